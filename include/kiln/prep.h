/*
 * kiln/prep.h - the preparation and the warm start, and their inputs:
 * programs, program sources and translators.
 *
 * A program is what one pipeline is built from: its stages (any shader
 * stages, each with its entry point and specialization data) and a
 * pipeline-state description of a kind (kiln's own shapes, Fossilize state,
 * or an application's bytes), built by the builder for its kind (see
 * "Builders"). Each stage starts as source text (GLSL, or
 * whatever an emulator's guest program is) and is turned into SPIR-V by a
 * translator: a callback the caller brings (kiln's tools have a GLSL one
 * over shaderc, tools/glsl), or comes as SPIR-V already. Programs reach
 * kiln_prepare through a program source: a table of callbacks that counts
 * and loads them (kiln's tools have the generator, corpus folders and
 * Fossilize archives as sources; an emulator brings its own).
 *
 * Ownership in one place: every SPIR-V array kiln hands out (a program
 * stage's words, kiln_translate's output) comes from kiln_malloc (kiln's
 * allocator, kiln/common.h "Memory") and is freed by
 * kiln_program_destroy or kiln_words_free. A translator's own buffer is given
 * back to it through its `release` callback as soon as kiln has taken the
 * words over.
 *
 * NULL arguments (0.2): a NULL options, summary (kiln_prepare and
 * kiln_warm_start crashed on one before), program, translator, source or
 * output is KILN_EINVAL; kiln_prepare_options_init and
 * kiln_translate_set_error do nothing for NULL; kiln_program_spirv_bytes
 * and kiln_prepare_stamp answer 0.
 */
#ifndef KILN_PREP_H
#define KILN_PREP_H

#include "kiln/common.h"
#include "kiln/cache.h"
#include "kiln/pack.h"
#include "kiln/program.h"
#include "kiln/vk.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------------
 * Stages and sources
 * ------------------------------------------------------------------------ */

/* ---------------------------------------------------------------------------
 * Translators
 * ------------------------------------------------------------------------ */

/*
 * Translates one source to SPIR-V. On success it returns 0 and stores a new
 * array of *nwords words in *words, which belongs to the translator until
 * kiln gives it back through kiln_translator.release. On failure it returns
 * a negative kiln error (KILN_ETRANSLATE for a program it cannot translate,
 * KILN_ENOMEM, ...) and may call kiln_translate_set_error() first to say why.
 * It is called from many worker threads at once with the same `user`: it
 * must be thread-safe.
 */
typedef int (*kiln_translate_fn)(void *user, const struct kiln_source *src, uint32_t **words,
                                 size_t *nwords);

/* Gives a translated array back to the translator that made it. */
typedef void (*kiln_release_fn)(void *user, uint32_t *words);

/*
 * A translator as kiln uses it. The struct is copied by value; what `user`
 * points to must outlive every call kiln makes through the copy.
 */
struct kiln_translator {
    size_t size; /* sizeof, as KILN_TRANSLATOR_INIT sets it (docs/abi.md) */
    kiln_translate_fn translate;
    /* NULL when the words come from kiln_malloc(): kiln then takes the array over
     * as it is. Otherwise kiln copies the words and releases the array. */
    kiln_release_fn release;
    void *user;
    /* Identifies the translator and its settings: a program cache written
     * with another stamp is not used (its SPIR-V may differ). */
    uint64_t stamp;
    /* A short name for log lines ("shaderc"); may be NULL. */
    const char *name;
};
#define KILN_TRANSLATOR_INIT KILN_STRUCT_INIT(kiln_translator)

/*
 * Runs `t` on one source and checks its output: at least a SPIR-V header
 * (5 words) and the SPIR-V magic number. A failure is logged as one error
 * line naming the source, its stage, the translator and the translator's
 * message (see kiln_translate_set_error).
 * @return 0 with a new array from kiln's allocator in *words (free it with
 * kiln_words_free) of *nwords words; KILN_ETRANSLATE when the translator
 * failed or gave something that is not SPIR-V; the translator's other
 * errors as they are; KILN_EINVAL for a NULL argument. Thread-safe when the
 * translator is.
 */
KILN_API int kiln_translate(const struct kiln_translator *t, const struct kiln_source *src,
                            uint32_t **words, size_t *nwords);

/* Frees words made by kiln_translate. NULL is a no-op. Thread-safe. */
KILN_API void kiln_words_free(uint32_t *words);

/*
 * Called by a translator inside its callback to say why it failed; kiln puts
 * the text (newlines become spaces, at most 1 KiB) in the one log line it
 * writes for the failure. Kept per thread; the next kiln_translate on this
 * thread clears it.
 * Thread safety: any thread; it sets the calling thread's message only.
 */
KILN_API void kiln_translate_set_error(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;

/*
 * Translates every stage of `p` that has source text and no SPIR-V yet,
 * through kiln_translate.
 * @return 0, or the first stage's error (stages before it keep their words).
 * Thread-safe for different programs when the translator is.
 */
KILN_API int kiln_program_translate(const struct kiln_translator *t, struct kiln_program *p);

/* ---------------------------------------------------------------------------
 * Builders: how a program's pipeline is made from its state.
 *
 * In the pipeline phase of kiln_prepare and kiln_warm_start, each program
 * is built by the builder for its state kind: a program of kind
 * KILN_STATE_BUILTIN by kiln's own (the shapes of kiln/vk.h, its layout
 * checked against the stages' SPIR-V first), unless the options give a
 * builder for KILN_STATE_BUILTIN; any other kind by the builder the
 * options give for it. A program whose kind has no builder is skipped and
 * counted ("no builder for state kind N"). kiln stages every stage first
 * (kiln_vk_stage_module: a transient VkShaderModule, or none with
 * maintenance5 and the create info chained), calls the builder on one of
 * its worker threads, and releases the stages right after, whatever the
 * builder answered.
 * ------------------------------------------------------------------------ */

/* Declared below whenever the Vulkan headers are there (KILN_VK_TYPES,
 * kiln/vk.h). */
struct kiln_build_request;

/*
 * A builder. The struct is copied by value; what `user` points to must
 * outlive the kiln_prepare or kiln_warm_start call.
 */
struct kiln_builder {
    size_t size; /* sizeof, as KILN_BUILDER_INIT sets it (docs/abi.md) */
    /* The state kind it builds (enum kiln_state_kind, below
     * KILN_STATE_KINDS). The first builder of a kind in the options' array
     * is used. */
    uint32_t kind;
    void *user;
    /*
     * Builds one program's pipeline: calls vkCreate*Pipelines itself, with
     * req->stages as its VkPipelineShaderStageCreateInfo array and
     * req->pipeline_cache as its cache. Called from kiln's worker threads,
     * many at once with the same `user`: it must be thread-safe. It must
     * not keep req->stages (or what they point to) past the call.
     * It creates with kiln_vk_allocator(req->vk) as pAllocator (kiln
     * destroys what it hands back with those callbacks).
     * @return 0 when built, with the pipeline in req->pipeline (kiln hands
     * it to the options' on_pipeline, or destroys it), or VK_NULL_HANDLE
     * there when the builder keeps the pipeline itself; KILN_ENOTSUP when
     * the pipeline cannot be built here (the device lacks what it needs):
     * skipped and counted, req->why says why; any other negative kiln error
     * (KILN_EVULKAN, KILN_EFORMAT for state bytes it cannot read, ...):
     * failed and counted, req->why says why. kiln logs one line naming the
     * program and the builder, with req->why.
     */
    int (*build)(void *user, struct kiln_build_request *req);
    /* A short name for log lines ("foz", "my-renderer"); NULL: "builder". */
    const char *name;
    /* Optional (NULL: none). Called once at the end of every pipeline
     * phase, after the last build returned, on the thread that called
     * kiln_prepare or kiln_warm_start, while the device is still alive:
     * the builder releases what it made on the device and shares between
     * builds (layouts, render passes), since kiln destroys a device it
     * made right after the phase. */
    void (*finish)(void *user);
    /* KILN_BUILDER_* bits (0: none). */
    uint32_t flags;
    /* Optional (NULL and 0: none). Device extensions this builder's
     * pipelines may use: a Vulkan context kiln makes for the run enables
     * each the device offers (kiln_vk_options.extra_extensions says how);
     * a context the caller gives is used as it is. The names must outlive
     * the call. At most 64 (KILN_BUILDER_MAX_EXTENSIONS): extensions_needed
     * answers with one bit each. */
    const char *const *device_extensions;
    uint32_t ndevice_extensions;
    /*
     * Optional (NULL: every program of this builder may need every one of
     * device_extensions, and a context kiln makes enables them all). Says
     * which of device_extensions the program with these state bytes needs:
     * a context kiln makes then enables only those some program of the run
     * needs, since an extension that no pipeline uses can still cost much
     * (the ray-tracing set made the driver of an NVIDIA H200 hold ~140 MiB
     * more for a run without one ray-tracing pipeline). Called only when
     * kiln makes the context (none given, or isolated workers), on the
     * thread that called kiln_prepare or kiln_warm_start, once for each
     * program of this builder's kind that will be built, before the
     * context is made (and before any build); it must be cheap (read the
     * few bytes that tell, never parse all of them) and cannot fail: for
     * bytes it cannot read it answers every bit (the build then says why).
     * @return bit i set when device_extensions[i] is needed; bits at or
     * past ndevice_extensions are ignored.
     */
    uint64_t (*extensions_needed)(void *user, const void *state, size_t size);
};
#define KILN_BUILDER_INIT KILN_STRUCT_INIT(kiln_builder)

/* The most device extensions one builder may ask for (one bit each in
 * kiln_builder.extensions_needed's answer). */
#define KILN_BUILDER_MAX_EXTENSIONS 64u

/*
 * A builder flag: its programs' modules were recorded from a working
 * application (a Fossilize archive), so kiln refuses only modules that do
 * not parse (kiln_vk_check_spirv_structure). A module that parses but
 * breaks one of the validator's semantic rules is stored and built, with
 * one warning line naming the program, the stage and the validator's
 * message, and counted in the summary's recorded_invalid. Without it, every
 * module must pass kiln_vk_validate_spirv (see docs/reliability.md).
 */
#define KILN_BUILDER_RECORDED_SPIRV 0x1u

/*
 * A builder flag: the builder honours kiln_build_request's host tier
 * fields (tier_flags2, tier_binaries, tier_used; docs/vk.md, "Host tier of
 * driver binaries"), so its pipelines' driver binaries are captured into
 * the tier and made from it. Without it kiln never sets those fields and
 * the builder's pipelines keep pipelines.vkc. kiln's Fossilize builder
 * has it.
 */
#define KILN_BUILDER_BINARIES 0x2u

#if KILN_VK_TYPES
/*
 * What a builder receives for one program. Every pointer is borrowed for
 * the call only.
 */
struct kiln_build_request {
    size_t size; /* sizeof, as KILN_BUILD_REQUEST_INIT sets it (docs/abi.md) */
    /* The program: its key, a name for log lines (never NULL) and its
     * state. */
    struct kiln_key key;
    const char *name;
    uint32_t state_kind;
    const void *state;
    size_t state_size;
    /* The stages, staged: each holds its module (or, with maintenance5, a
     * VkShaderModuleCreateInfo in pNext and no module), its stage bit as
     * the payload has it, its entry point and its specialization info. */
    uint32_t nstages;
    const VkPipelineShaderStageCreateInfo *stages;
    /* Where to build: the device, its vkGetDeviceProcAddr (to reach
     * vkCreateGraphicsPipelines and the rest), and the pipeline cache
     * (VK_NULL_HANDLE with none). `vk` is kiln's context over them
     * (kiln_vk_get_handles gives the instance and the rest). */
    VkDevice device;
    PFN_vkGetDeviceProcAddr get_device_proc_addr;
    VkPipelineCache pipeline_cache;
    struct kiln_vk *vk;
    /* The worker thread (0..workers-1), for per-thread state in `user`. */
    unsigned worker;
    /* Out: the pipeline built (VK_NULL_HANDLE: none, or kept by the
     * builder), and why it was skipped or failed (a NUL-terminated
     * clause, no trailing period). */
    VkPipeline pipeline;
    char why[256];
    /* Ask before compiling (docs/runtime.md, "Ask before compiling"). */
    /* In: KILN_BUILD_* flags for this build (0: build as always). */
    uint32_t flags;
    /* Out, optional: what the driver said of req->pipeline when the builder
     * chained a VkPipelineCreationFeedbackCreateInfo to its create (kiln's
     * Fossilize builder does where kiln_vk_info.creation_feedback): the
     * feedback is valid, the application's pipeline cache held the
     * pipeline (no compile), and the driver's time. Left false and 0, kiln
     * counts the pipeline as one without feedback. */
    bool feedback_valid;
    bool feedback_cache_hit;
    uint64_t feedback_driver_ns;
    /* Fast-link (the service's KILN_SERVICE_FAST_LINK). In: KILN_BUILD_LINK_*
     * bits; KILN_BUILD_LINK_FAST asks for a graphics pipeline linked from
     * library parts (VK_EXT_graphics_pipeline_library, no link-time
     * optimisation), to be replaced later by a build without the bit. A
     * builder that cannot builds as usual and leaves `linked` false. Out:
     * `linked`, set when the pipeline is such a linked one, and the parts
     * it built and took from a table for it. */
    uint32_t link;
    bool linked;
    uint32_t parts_built;
    uint32_t parts_reused;
    /* The host tier of driver binaries (docs/vk.md), set only for a builder
     * with KILN_BUILDER_BINARIES. In: tier_flags2, VkPipelineCreateFlags2KHR
     * bits to add to the pipeline's create (VK_PIPELINE_CREATE_2_CAPTURE_
     * DATA_BIT_KHR: kiln captures its binaries after) through a
     * VkPipelineCreateFlags2CreateInfoKHR, which then carries the create's
     * own flags too; tier_binaries, a VkPipelineBinaryInfoKHR (its pNext
     * NULL) to chain into the create: the pipeline is made from those
     * binaries, no compile. A builder that takes either builds that
     * pipeline without pipeline_cache (one path per device) and sets
     * tier_used (out); one that cannot (a pipeline library, a linked
     * pipeline) builds as usual and leaves it false. */
    uint64_t tier_flags2;
    void *tier_binaries;
    bool tier_used;
};
#define KILN_BUILD_LINK_FAST 0x1u
/* kiln_build_request.link / kiln_build_run.link: build the program's
 * library parts only (parts ahead of the draw, docs/runtime.md): no
 * pipeline (req->pipeline stays VK_NULL_HANDLE), nothing noted in the
 * ledger; a later KILN_BUILD_LINK_FAST build of the program only links.
 * kiln's own graphics shape and its Fossilize builder honour it; a
 * builder that does not may build the whole pipeline (the caller then
 * destroys it). A program that cannot be linked answers KILN_ENOTSUP. */
#define KILN_BUILD_LINK_PARTS   0x2u
#define KILN_BUILD_REQUEST_INIT KILN_STRUCT_INIT(kiln_build_request)
#endif /* KILN_VK_TYPES */

/*
 * A flag of kiln_build_request.flags and kiln_build_run.flags: a probe.
 * Build only what the driver's caches already hold: a builder that honours
 * it adds VK_PIPELINE_CREATE_FAIL_ON_PIPELINE_COMPILE_REQUIRED_BIT to its
 * creates and answers KILN_ECOMPILE_REQUIRED (no pipeline; req->why may
 * stay empty) when the driver says VK_PIPELINE_COMPILE_REQUIRED, which it
 * answers at once, without compiling. kiln's own shapes and its Fossilize
 * builder honour it. kiln sets it only where kiln_vk_info.compile_probe. A
 * builder that ignores it just builds: the probe then costs a compile,
 * and its answer is a pipeline as always.
 */
#define KILN_BUILD_PROBE 0x1u

/*
 * A flag of kiln_build_run.flags, with KILN_BUILD_PROBE: a probe the
 * driver answers "compile required" is compiled at once in the same run,
 * from the stages already open and staged (no second unpack, check or
 * stage), and kiln_build_run.probe_missed says so. What the pipeline
 * service asks.
 */
#define KILN_BUILD_COMPILE_ON_MISS 0x2u

/* What one state kind's programs came to in a pipeline phase. */
struct kiln_kind_counts {
    uint64_t built;
    uint64_t skipped;      /* no builder, or the builder said KILN_ENOTSUP */
    uint64_t failed;       /* the stages or the builder failed */
    char skip_reason[160]; /* the first skip's reason; "" when none */
};

/* ---------------------------------------------------------------------------
 * Isolation: driver compiles in worker processes.
 *
 * A driver that crashes or hangs in vkCreate*Pipelines takes the process
 * with it. With kiln_prepare_options.isolate (kiln_start_options.isolate)
 * set, kiln_prepare (kiln_warm_start) builds every pipeline in worker
 * processes instead: it starts the worker command (an
 * executable that calls kiln_isolate_worker_main), at most one process per
 * pool thread and only as many as the work pays for, hands them batches
 * of programs (several per message, answered one by one) and waits for
 * each answer up to a time limit. A worker that dies, or passes the limit
 * (it is killed), has the program it was building counted as a failed
 * pipeline with KILN_ECRASH or KILN_ETIMEDOUT and one warning line naming
 * the program and the signal or exit code; the programs after it in its
 * batch go to another worker, and the run goes on. At the end
 * every worker sends its VkPipelineCache's data, which is merged into the
 * parent's (vkMergePipelineCaches) before pipelines.vkc is saved; what a
 * worker compiled before it died is lost (those pipelines are built again
 * on the next start, from the driver's own cache at best).
 * ------------------------------------------------------------------------ */

/* The per-pipeline time limit when kiln_isolate_options.time_limit_ms is 0. */
#define KILN_ISOLATE_DEFAULT_TIME_LIMIT_MS 60000u

/* How kiln_prepare runs its workers. Zero-initialise, then set argv. */
struct kiln_isolate_options {
    size_t size; /* sizeof, as KILN_ISOLATE_OPTIONS_INIT sets it (docs/abi.md) */
    /* The worker command: the executable's path and its arguments,
     * NULL-terminated. Run as it is (no shell, no PATH search); it must
     * call kiln_isolate_worker_main on its standard input and output.
     * Required. */
    const char *const *argv;
    /* The most one pipeline may take in a worker, in milliseconds (also the
     * most a new worker may take to make its Vulkan context), fixed. 0:
     * learned, per run, from the builds seen (10 times the 99th percentile
     * of similar builds once 16 were seen, at least 10 s), never over
     * KILN_ISOLATE_DEFAULT_TIME_LIMIT_MS, which applies until then; a
     * program killed at a learned limit under that one fails this run but
     * is not recorded in the build ledger (a guess, not the driver's word). */
    unsigned time_limit_ms;
    /* Worker processes at most; 0: the preparation's workers (its `jobs`),
     * at most one per usable CPU. Fewer are started when the work does not
     * pay for them (docs/prep.md, "Sizing"). */
    unsigned workers;
};
#define KILN_ISOLATE_OPTIONS_INIT KILN_STRUCT_INIT(kiln_isolate_options)

/* What kiln_isolate_worker_main builds with. Zero-initialise. */
struct kiln_isolate_worker_options {
    size_t size; /* sizeof, as KILN_ISOLATE_WORKER_OPTIONS_INIT sets it (docs/abi.md) */
    /* The builders for the programs' state kinds, as in
     * kiln_prepare_options (the parent's are not used when isolated: a
     * builder is code, it does not cross a process). May be NULL and 0. */
    const struct kiln_builder *builders;
    size_t nbuilders;
};
#define KILN_ISOLATE_WORKER_OPTIONS_INIT KILN_STRUCT_INIT(kiln_isolate_worker_options)

/*
 * The worker's side of isolation: an application calls it from its own
 * executable when started as kiln_isolate_options.argv says (in kiln's CLI,
 * `kiln __worker`). It reads the parent's greeting (the device to use, the
 * cache folder whose pipelines.vkc it starts from, the packing dictionary),
 * makes its own Vulkan context, then builds each program it is sent
 * through the same path as kiln_prepare in one process (kiln's built-in
 * shapes, or `o`'s builders), answers with the outcome and why, and when
 * the parent says it is done sends its pipeline cache's data. It writes
 * nothing to the cache folder. Frames are length-prefixed and checksummed;
 * a malformed frame ends the worker with KILN_EFORMAT.
 * `in_fd` and `out_fd` are the file descriptors to read from and write to
 * (-1: standard input and output; C runtime descriptors on Windows).
 * Nothing else may write to out_fd meanwhile (log lines go to stderr).
 * @return 0 when the parent ended the session, KILN_ECANCELED when the
 * parent went away first, KILN_EFORMAT for a malformed frame, the Vulkan
 * context's error (also sent to the parent), or an I/O error. On Windows
 * the descriptors' handles are read and written directly (binary, no text
 * mode), and a crash ends the process at once with its exception code (no
 * error box).
 * Thread safety: call it once per process, from one thread; it uses one
 * thread itself.
 */
KILN_API int kiln_isolate_worker_main(int in_fd, int out_fd,
                                      const struct kiln_isolate_worker_options *o);

/* ---------------------------------------------------------------------------
 * The preparation (kiln prepare) and the warm start (kiln start)
 *
 * kiln_prepare turns a set of programs into a program cache and a warm
 * VkPipelineCache: on a pool of workers it translates every program that
 * is not in the cache yet, packs each stage (kiln_pack, with the cache's
 * dictionary when it has one), joins the stages into one payload
 * (kiln_program_payload_build) and stores it (kiln_cache_put); then it
 * builds every program's pipeline from its packed payload, each shader
 * module living only for its create call, and saves pipelines.vkc.
 * kiln_warm_start is a later start: it opens the cache by its index, loads
 * every program at once (kiln_cache_load_many), records their last use,
 * and builds every pipeline through the saved VkPipelineCache.
 *
 * A program is named in the cache by the key its source gives it
 * (kiln_program.key), else by kiln_prep_program_key. Its payload
 * (kiln_program_payload_build_full) holds its stages with their
 * VkShaderStageFlagBits kinds, entry points and specialization, and its
 * state kind and bytes; the pipeline phase builds each program through the
 * builder for its kind (see "Builders") and counts the outcome per kind. The
 * cache's stamp is kiln_prepare_stamp: the translator's stamp, as the
 * program source mixes it (kiln_program_source.stamp). Both calls
 * open the cache with its dictionary (KILN_CACHE_USE_DICT), so a cache
 * repacked with one (kiln cache repack --dict) is used as it is.
 * docs/prep.md has the details.
 * ------------------------------------------------------------------------ */

/* Programs kiln_prepare stores between two kiln_cache_sync calls when
 * kiln_prepare_options.sync_every is 0. */
#define KILN_PREPARE_SYNC_EVERY 64u

/* The phases kiln_prepare and kiln_warm_start report progress for. */
enum kiln_prep_phase {
    KILN_PREP_PHASE_TRANSLATE = 0, /* translate, pack and store (or find in the cache) */
    KILN_PREP_PHASE_PIPELINES = 1, /* build pipelines */
};

/* The phase's short name ("translate", "pipelines"), or "?". Thread-safe. */
KILN_API const char *kiln_prep_phase_name(enum kiln_prep_phase phase);

/*
 * Progress of a phase: `done` of `total` items. Called only on the thread
 * that called kiln_prepare or kiln_warm_start, at most about ten times a
 * second, once with done 0 when a phase starts and once with done == total
 * when it ends; so it needs no lock.
 */
typedef void (*kiln_prep_progress_fn)(void *user, enum kiln_prep_phase phase, uint64_t done,
                                      uint64_t total);

/*
 * Receives a pipeline kiln_prepare or kiln_warm_start built in the caller's
 * own context (options.vk): it now belongs to the caller (destroy it with
 * kiln_vk_pipeline_destroy). `key` names the program. Called from worker
 * threads at once: it must be thread-safe.
 */
typedef void (*kiln_prep_pipeline_fn)(void *user, struct kiln_key key,
                                      struct kiln_vk_pipeline *pipeline);

/*
 * (0.2) The host tier of driver binaries (docs/vk.md, "Host tier of driver
 * binaries"): where the device offers VK_KHR_pipeline_binary and
 * maintenance5, each pipeline's driver binaries are captured and kept per
 * pipeline under cache_dir/binaries/, keyed by the driver's global key, and
 * a warm start makes its pipelines from them (no SPIR-V unpacked, no
 * compile). Off by default: measured against pipelines.vkc first.
 */
enum kiln_binaries_mode {
    KILN_BINARIES_OFF = 0,  /* pipelines.vkc alone, as before */
    KILN_BINARIES_ON = 1,   /* the tier; where the device lacks it, one warning line and
                               pipelines.vkc */
    KILN_BINARIES_AUTO = 2, /* the tier where the device has it, quietly pipelines.vkc
                               elsewhere */
};

/* (0.2) What kiln_binaries_sweep did. */
struct kiln_binaries_sweep_report {
    size_t size;              /* sizeof, as KILN_BINARIES_SWEEP_REPORT_INIT sets it (docs/abi.md) */
    uint64_t folders;         /* tier folders looked at (every device and driver) */
    uint64_t folders_skipped; /* of those, not swept: busy (another run) or not opened (logged) */
    uint64_t records_before;  /* records of the folders swept, before */
    uint64_t swept;           /* records dropped: their program is no longer in the cache */
    uint64_t damaged;         /* damaged records the rewrites left out */
};
#define KILN_BINARIES_SWEEP_REPORT_INIT KILN_STRUCT_INIT(kiln_binaries_sweep_report)

/*
 * (0.2) Makes the host tier follow its programs: in every folder of
 * `programs`'s binaries/ (this device's, stale ones, other devices'),
 * drops the records of the pipelines whose program `programs` (with its
 * layers) no longer holds, after a prune, a compaction or the cap's
 * eviction. Nothing else is dropped; each folder is rewritten only when
 * it has something to drop, with kiln_cache_prune's crash-safe rewrite.
 * A folder another run writes is skipped (counted, logged). kiln cache
 * prune and compact call it, and so do kiln_prepare and kiln_start with
 * the tier on. `programs` must be open for writing, so that no program
 * comes while the sweep looks. `report` may be NULL.
 * @return 0, KILN_EINVAL, or the error listing binaries/.
 * Thread safety: no other call on `programs` may write meanwhile.
 */
KILN_API int kiln_binaries_sweep(struct kiln_cache *programs,
                                 struct kiln_binaries_sweep_report *report);

/* What kiln_prepare does. Fill it with kiln_prepare_options_init first. */
struct kiln_prepare_options {
    size_t size; /* sizeof, as KILN_PREPARE_OPTIONS_INIT sets it (docs/abi.md) */
    /* The cache folder; made when missing (with its parents). Required. */
    const char *cache_dir;
    /* The programs. Required; see struct kiln_program_source. */
    const struct kiln_program_source *source;
    /* The translator for programs given as source text (required for
     * them: such a program fails without one, logged); NULL when every
     * program comes as SPIR-V. Must be thread-safe; what it points to must
     * outlive the call. */
    const struct kiln_translator *translator;
    /* How each stage is packed; default KILN_CODEC_KILN (with the cache's
     * dictionary when it has one; see `dict`). */
    enum kiln_codec codec;
    /* Workers for both phases; 0 (the default):
     * kiln_pool_auto_workers(KILN_POOL_WORK_BUILD, 0). */
    unsigned jobs;
    /* Translate and store only; build no pipeline. */
    bool no_vulkan;
    /* The device, as kiln_vk_options.use_device_index / device. */
    bool use_device_index;
    unsigned device;
    /* An existing Vulkan context to build in (it is not destroyed, and
     * pipelines.vkc is saved only when it has a cache folder); NULL: kiln
     * makes one over cache_dir/pipelines.vkc. */
    struct kiln_vk *vk;
    /* With `vk` set: receives each pipeline. NULL, or without `vk`: each
     * pipeline is destroyed right after it is made (the pipeline cache
     * keeps what the driver compiled). */
    kiln_prep_pipeline_fn on_pipeline;
    void *pipeline_user;
    /* File I/O for the cache and pipelines.vkc; NULL: kiln_io_default(). */
    const struct kiln_io *io;
    /* Stored programs between two syncs; 0: KILN_PREPARE_SYNC_EVERY. */
    unsigned sync_every;
    /* Give the cache a packing dictionary: when it has none after the
     * translate phase, one is trained from its programs and every record
     * is packed again with it (kiln_cache_repack with
     * KILN_CACHE_DICT_TRAIN), before any pipeline is built. A cache that
     * has one keeps it (new programs are packed with it either way; kiln
     * cache repack --dict trains a new one). Needs KILN_CODEC_KILN. With
     * fewer than 8 stages in the cache, no dictionary is trained (one
     * warning line) and the run goes on. */
    bool dict;
    /* The builders for the programs' state kinds (see "Builders"):
     * `nbuilders` of them, or NULL and 0. Programs of kind
     * KILN_STATE_BUILTIN need none. The array must outlive the call. */
    const struct kiln_builder *builders;
    size_t nbuilders;
    /* Build again the programs the build ledger (ledger.kpl in the cache
     * folder) records as failed on this driver; by default they are
     * skipped and counted in ledger_skipped. */
    bool retry_failed;
    /*
     * Resident bytes kiln (and its worker processes) is kept under: the
     * pools start fewer jobs while near it, at least one always runs (see
     * kiln_pool_options.memory_budget). 0: the default share
     * (kiln_pool_default_memory_budget); UINT64_MAX: no budget.
     */
    uint64_t memory_budget;
    /* Background mode: idle CPU and I/O priority for the workers, and at
     * most a quarter of the usable CPUs when `jobs` is 0
     * (KILN_POOL_WORK_BACKGROUND). */
    bool background;
    /*
     * Asked before each job (from worker threads and the caller's thread,
     * so it must be thread-safe and cheap; a signal handler sets a flag it
     * reads): once it returns true, no more work is handed out, what was
     * stored is synced, pipelines.vkc and the ledger are saved, and
     * kiln_prepare returns KILN_ECANCELED. A later kiln_prepare over the
     * same folder resumes: stored programs are not translated again, and
     * built ones are not built again. NULL: never.
     */
    bool (*cancel)(void *user);
    void *cancel_user;
    /* Build the pipelines in worker processes (see "Isolation"); NULL:
     * on this process's threads. Must outlive the call. */
    const struct kiln_isolate_options *isolate;
    /*
     * (0.2) Run the pools (translate, build) and the cache's loads on the
     * application's job system instead of threads kiln starts (see struct
     * kiln_executor and kiln_pool_options.executor): `jobs` (or the
     * policy's count) cut to its concurrency; `background` priority does
     * not apply to its threads. With `isolate`, the pool that talks to the
     * worker processes runs on it too, but the one thread that starts the
     * worker processes is still kiln's (a process must not be forked from
     * a thread the application shares), and so is the one that makes the
     * Vulkan context beside the translation (it waits in the driver and
     * then for the translation: no job for a shared pool). NULL: kiln's
     * threads.
     */
    const struct kiln_executor *executor;
    /*
     * (0.2) The Vulkan allocation callbacks (a VkAllocationCallbacks) for
     * the context kiln makes when `vk` is NULL: passed to every create and
     * destroy of that context, as kiln_vk_options.allocator. Must outlive
     * the call. Not used with `vk` (that context has its own) nor by
     * isolated workers (another process). NULL: the driver's allocator.
     */
    const struct VkAllocationCallbacks *vk_allocator;
    /* (0.2) Read-only layers beneath the cache (kiln_cache_options.layers):
     * a program a layer holds counts as cached (not translated or stored
     * again) and is built from the layer's record. */
    const char *const *layers;
    size_t nlayers;
    /*
     * (0.2) With a memory budget, admit the pipeline builds as kiln before
     * 0.2 did: each taken to need the largest growth one build showed,
     * instead of what it is predicted to need from its class (state kind,
     * stage count, SPIR-V size) and this driver's figures learned in the
     * build ledger (docs/prep.md, "Memory budget, background and
     * stopping"). For comparison (kiln bench replay --budget-rule). false:
     * the prediction.
     */
    bool largest_seen_budget;
    /* (0.2) The cache's size cap (kiln_cache_options.max_size): 0 keeps
     * the cap the cache remembers, KILN_CACHE_NO_CAP clears it, any other
     * value is the new cap, remembered by the cache and kept as the
     * preparation stores its programs (the programs it stores are never
     * evicted by it). */
    uint64_t max_size;
    /* (0.2) The host tier of driver binaries (enum kiln_binaries_mode):
     * with it on, the run captures each pipeline's binaries it builds, and
     * stores those of programs built before that the tier lacks (a driver
     * update made it stale: its old folder is removed). With `isolate`
     * the workers capture them and send them to this process, which keeps
     * them. */
    uint32_t binaries;
};
/* The defaults kiln_prepare_options_init sets (codec KILN_CODEC_KILN). */
#if defined(__cplusplus)
#define KILN_PREPARE_OPTIONS_INIT                                              \
    {                                                                          \
        sizeof(struct kiln_prepare_options), NULL, NULL, NULL, KILN_CODEC_KILN \
    }
#else
#define KILN_PREPARE_OPTIONS_INIT                                             \
    {                                                                         \
        .size = sizeof(struct kiln_prepare_options), .codec = KILN_CODEC_KILN \
    }
#endif

/* Sets every field of *o to its default (see the fields). Thread-safe. */
KILN_API void kiln_prepare_options_init(struct kiln_prepare_options *o);

/*
 * The stamp kiln_prepare gives the cache for these options: the source's
 * stamp callback over the translator's stamp (0 without a translator), or
 * the translator's stamp as it is when the source has no such callback.
 * An emulator passes it to kiln_warm_start.
 * @return the stamp; 0 for NULL options or no source. Thread-safe when the
 * source's stamp callback is.
 */
KILN_API uint64_t kiln_prepare_stamp(const struct kiln_prepare_options *o);

/* Which step of kiln_prepare or kiln_warm_start stopped it. */
enum kiln_prep_step {
    KILN_PREP_STEP_NONE = 0,   /* nothing stopped it */
    KILN_PREP_STEP_INPUT = 1,  /* the source or the options (bad input) */
    KILN_PREP_STEP_CACHE = 2,  /* opening, writing or syncing the cache */
    KILN_PREP_STEP_VULKAN = 3, /* making the Vulkan context */
    KILN_PREP_STEP_OTHER = 4,  /* memory, threads, the translator's creation */
};

/* What kiln_prepare did. Times are in nanoseconds. */
struct kiln_prepare_summary {
    size_t size;              /* sizeof, as KILN_PREPARE_SUMMARY_INIT sets it (docs/abi.md) */
    uint64_t programs;        /* programs the source has */
    uint64_t translated;      /* translated, packed and stored by this run */
    uint64_t cached;          /* found in the cache already: not translated */
    uint64_t failed;          /* programs that could not be loaded, translated, packed or stored */
    uint64_t pipelines_built; /* pipelines made */
    uint64_t pipelines_failed;
    uint64_t pipelines_skipped; /* no builder for their kind, a shape or layout kiln's own
                                 * builder lacks, or the builder skipped them */
    struct kiln_kind_counts kinds[KILN_STATE_KINDS]; /* the three above per state kind */
    uint64_t remade;       /* cached programs whose record could not be read back:
                              translated and stored again (counted in translated) */
    uint64_t spirv_bytes;  /* SPIR-V of the programs translated by this run */
    uint64_t packed_bytes; /* their payloads as stored */
    uint64_t open_ns;      /* opening the cache and listing the programs */
    uint64_t translate_ns; /* the translate phase (pack and store included) */
    uint64_t load_ns;      /* reading back the payloads of cached programs */
    uint64_t vulkan_ns;    /* making the Vulkan context (pipelines.vkc loaded) */
    uint64_t pipelines_ns; /* the pipeline phase */
    uint64_t save_ns;      /* the final sync and saving pipelines.vkc */
    uint64_t total_ns;
    uint64_t peak_rss; /* kiln_peak_rss_bytes at the end */
    unsigned workers;
    char workers_reason[256]; /* the policy's line, or why the count was given */
    uint64_t stamp;
    enum kiln_cache_open_kind open_kind;
    bool vulkan; /* pipelines were built (a context was there) */
    char device[256];
    enum kiln_vk_cache_state vk_cache_state;
    size_t vk_cache_loaded_bytes;
    int error;                /* the error that stopped the run, or 0 */
    enum kiln_prep_step step; /* where it stopped */
    /* The dictionary (options.dict, or the cache's own). */
    uint64_t dict_id;             /* the cache's dictionary at the end, 0: none */
    bool dict_trained;            /* this run trained it and repacked the cache */
    uint64_t dict_payload_before; /* with dict_trained: payload bytes before the repack */
    uint64_t dict_payload_after;  /* ... and after it */
    uint64_t dict_bytes;          /* the size of programs.kpd (0: none) */
    uint64_t dict_ns;             /* training and repacking */
    /* The build ledger. */
    uint64_t driver_compiles; /* pipelines this run handed to a driver or builder (built, or
                                 failed there: not a refusal before, nor a worker that never
                                 got the program) */
    uint64_t ledger_skipped;  /* programs the ledger answered: built before on this driver
                                 with pipelines.vkc loaded, or failed before (not retried) */
    uint64_t ledger_failed;   /* of ledger_skipped, those recorded as failed */
    uint64_t memory_budget;   /* the budget the pools kept to, bytes (0: none) */
    bool canceled;            /* options.cancel stopped the run (error KILN_ECANCELED) */
    /* Programs whose builder has KILN_BUILDER_RECORDED_SPIRV with a stage
     * the validator refuses but that parses: stored or built anyway, one
     * warning line each. */
    uint64_t recorded_invalid;
    /* Programs that were being built when an earlier run died (its crash
     * journal says so): not built this run, even with retry_failed, one
     * warning line each, and recorded in the build ledger as crashed
     * (failed with KILN_ECRASH), so later runs skip them until
     * retry_failed. Counted as failed in the exit code of kiln prepare. */
    uint64_t crash_skipped;
    /* The driver's word (VK_EXT_pipeline_creation_feedback) on the
     * pipelines this run built in this process (not in isolated workers),
     * also kept in the build ledger (kiln_ledger_last_run). */
    uint64_t feedback_pipelines; /* pipelines the driver gave feedback for */
    uint64_t driver_cache_hits;  /* of those, held by the pipeline cache: no compile */
    uint64_t driver_ns;          /* the driver's own time for them */
    /* Isolation (options.isolate; 0 without): the worker processes started
     * (sized for the work: fewer than `workers` when the run is short),
     * the messages that carried programs to them (several programs each),
     * the programs sent again after their batch's worker died or hung
     * while building another, the programs killed at the learned time
     * limit (under the fixed one: not recorded in the build ledger), and
     * that limit over all builds at the end (0: none learned). */
    uint64_t isolated_workers;
    uint64_t isolated_batches;
    uint64_t isolated_resent;
    uint64_t isolated_early_timeouts;
    uint64_t isolated_time_limit_ms;
    /* (0.2) The host tier (kiln_prepare_options.binaries), as in
     * kiln_start_summary: used or not, binaries kept this run, stale
     * folders found and removed, damaged records refused, the tier's
     * folder, global key, pipelines and bytes. */
    uint64_t binaries_kept;
    uint64_t binaries_stale;
    uint64_t binaries_stale_dropped;
    uint64_t binaries_damaged;
    uint64_t binaries_records;
    uint64_t binaries_bytes;
    char binaries_dir[512];
    char binaries_global_key[71]; /* 71: the bool after it ends the struct unpadded */
    bool binaries_used;
    /* (0.2) Records of the tier dropped at the run's start because their
     * program is no longer in the cache (kiln_binaries_sweep). */
    uint64_t binaries_swept;
    /* (0.2) Of vulkan_ns, the part the run did not wait for: the context
     * kiln makes is begun beside the translation (the instance and the
     * device choice), and only the rest follows it. So open_ns +
     * translate_ns + dict_ns + load_ns + vulkan_ns - vulkan_overlap_ns +
     * pipelines_ns + save_ns is about total_ns. 0 with a given context. */
    uint64_t vulkan_overlap_ns;
    /* (0.2) Isolation: of isolated_workers, those started with the run
     * (beside the translation, their Vulkan context begun there), which
     * the pipeline phase found ready but for their device. */
    uint64_t isolated_early_workers;
};
#define KILN_PREPARE_SUMMARY_INIT KILN_STRUCT_INIT(kiln_prepare_summary)

/*
 * Runs the preparation described by `o` (see the top of this section).
 * Programs already in the cache are not translated again; they are read
 * back for the pipeline phase. A program that fails (to load, translate,
 * pack, store or build) is logged as one line naming it and counted; the
 * run goes on. The cache is synced every `sync_every` stored programs and
 * at the end, so a crash loses little. `progress` may be NULL.
 * @return 0 when the run went through (failures of single programs are in
 * *summary: check `failed` and `pipelines_failed`), or the error that
 * stopped it, with summary->step saying where: KILN_EINVAL (no cache
 * folder, no source or a source without programs, `dict` with another
 * codec than kiln), a cache error (also a
 * failed repack for `dict`: what it leaves is kiln_cache_repack's),
 * KILN_ENOTSUP when Vulkan is not available (the programs are stored
 * then; pass no_vulkan to skip pipelines). Every error with step
 * KILN_PREP_STEP_INPUT has been logged as one error line naming what and
 * where, so a caller that reports it need not repeat it. A cache folder
 * that cannot be made or opened (KILN_PREP_STEP_CACHE before anything is
 * written: KILN_EFORMAT when programs.kpc is not a cache, KILN_ENOENT when
 * the folder is a file, ...) is logged at info only: the caller reports
 * it. *summary is always filled.
 * Thread safety: any thread, but not twice at once on one cache folder (the
 * second one's open fails with KILN_EBUSY; so does one while a warm start
 * holds the cache for its open and read). Calls on different folders are
 * independent.
 */
KILN_API int kiln_prepare(const struct kiln_prepare_options *o, kiln_prep_progress_fn progress,
                          void *progress_user, struct kiln_prepare_summary *summary);

/* What kiln_warm_start does. Zero-initialise, then set what you need. */
struct kiln_start_options {
    size_t size; /* sizeof, as KILN_START_OPTIONS_INIT sets it (docs/abi.md) */
    /* The cache folder kiln_prepare filled. Required. */
    const char *cache_dir;
    /* The stamp the cache must carry (kiln_prepare_stamp); with any_stamp,
     * whatever stamp the cache has is accepted. */
    uint64_t stamp;
    bool any_stamp;
    /* Workers for the pipelines and threads for the load; 0: the pool
     * policy's count (kiln_pool_auto_workers). */
    unsigned jobs;
    /* Load only; build no pipeline. */
    bool no_vulkan;
    bool use_device_index;
    unsigned device;
    /* As in kiln_prepare_options. */
    struct kiln_vk *vk;
    kiln_prep_pipeline_fn on_pipeline;
    void *pipeline_user;
    const struct kiln_io *io;
    /* Open the cache read-only and write nothing to it: last use is not
     * recorded (see kiln_warm_start). */
    bool read_only;
    /* As in kiln_prepare_options. */
    const struct kiln_builder *builders;
    size_t nbuilders;
    const struct kiln_isolate_options *isolate;
    /* Build again the programs the build ledger records as having crashed
     * a process or worker on this driver (failed with KILN_ECRASH or
     * KILN_ETIMEDOUT); by default the start skips them (ledger_failed). */
    bool retry_failed;
    /* As in kiln_prepare_options: asked (from any pool thread) before each
     * build; once it returns true no further build starts, the builds
     * running finish, what was built is kept (pipelines.vkc, the ledger),
     * and kiln_warm_start returns KILN_ECANCELED with `canceled` set.
     * NULL: never. */
    bool (*cancel)(void *user);
    void *cancel_user;
    /* (0.2) As in kiln_prepare_options: the load and the build pool run
     * on the application's executor. NULL: kiln's threads. */
    const struct kiln_executor *executor;
    /* (0.2) As in kiln_prepare_options: the Vulkan allocation callbacks
     * of the context kiln makes when `vk` is NULL. */
    const struct VkAllocationCallbacks *vk_allocator;
    /* (0.2) A warm start of a subset: only the chosen records are read,
     * unpacked and built, so a large cache costs memory for what the run
     * uses. The records of the `nkeys` keys in `keys` (a key the cache
     * does not hold is counted in keys_absent), and the `recent` most
     * recently used records (by last use, a day; within a day the later
     * record first). Both given: the union. Neither (NULL, 0, 0): every
     * record. The array is read during the call only. */
    const struct kiln_key *keys;
    size_t nkeys;
    uint64_t recent;
    /* (0.2) Read-only layers beneath the cache (kiln_cache_options.layers):
     * their records are loaded and built with the cache's own (a key held
     * twice is the cache's), and never written (no last-use marks). With
     * layers and no cache in cache_dir yet, the start makes an empty one
     * there with the first usable layer's stamp and dictionary, so an
     * emulator's first start on a shipped cache works. */
    const char *const *layers;
    size_t nlayers;
    /* (0.2) As in kiln_prepare_options: pipelines made from the host
     * tier's driver binaries where it holds them; those it lacks are built
     * and their binaries kept (unless read_only). With `isolate` the
     * workers make them from the tier and send what they capture to this
     * process, which keeps it. */
    uint32_t binaries;
    /* (0.2) With `binaries`: remove this device's stale tier folders (a
     * driver update) and keep the binaries again as the start builds. */
    bool binaries_rebuild;
};
#define KILN_START_OPTIONS_INIT KILN_STRUCT_INIT(kiln_start_options)

/* What kiln_warm_start did. Times are in nanoseconds. */
struct kiln_start_summary {
    size_t size;      /* sizeof, as KILN_START_SUMMARY_INIT sets it (docs/abi.md) */
    uint64_t records; /* live records the index lists */
    uint64_t loaded;  /* records read and checked */
    uint64_t missing; /* records missing or damaged: reported, not built */
    uint64_t bad;     /* records read but not a program payload, or a stage the SPIR-V
                         validator refused (or, without one, could not check): not built */
    uint64_t bytes;   /* payload bytes read */
    uint64_t pipelines_built;
    uint64_t pipelines_failed;
    uint64_t pipelines_skipped; /* no builder for their kind, a shape or layout kiln's own
                                 * builder lacks, or the builder skipped them */
    struct kiln_kind_counts kinds[KILN_STATE_KINDS]; /* the three above per state kind */
    uint64_t open_ns;                                /* opening the cache (index) and listing it */
    uint64_t read_ns;                                /* kiln_cache_load_many */
    uint64_t vulkan_ns;    /* making the Vulkan context (pipelines.vkc loaded) */
    uint64_t pipelines_ns; /* building every pipeline */
    uint64_t total_ns;
    uint64_t peak_rss;
    unsigned workers;
    unsigned read_threads;
    char workers_reason[256];
    uint64_t stamp;
    enum kiln_cache_open_kind open_kind;
    char open_text[256]; /* kiln_cache_stats.open_text */
    bool vulkan;
    char device[256];
    enum kiln_vk_cache_state vk_cache_state;
    size_t vk_cache_loaded_bytes;
    int error;
    enum kiln_prep_step step;
    /* Records that are one vertex, fragment or other-stage module (a
     * Fossilize import's graphics modules): stored, but no pipeline on
     * their own; not built and not counted as bad. */
    uint64_t lone_modules;
    uint64_t dict_id; /* the cache's dictionary, 0: none */
    /* Last use was recorded (programs.kpu written) for the loaded records;
     * false when the cache was opened read-only (use_text says why). */
    bool use_recorded;
    char use_text[160];
    /* Records whose builder has KILN_BUILDER_RECORDED_SPIRV with a stage
     * the validator refuses but that parses: built anyway, one warning
     * line each. */
    uint64_t recorded_invalid;
    /* As in kiln_prepare_summary: programs in flight when an earlier run
     * died, not built this run. */
    uint64_t crash_skipped;
    /* Programs the build ledger records as having crashed a process or
     * worker on this driver: not built (one warning line counts them)
     * unless retry_failed. */
    uint64_t ledger_failed;
    /* options.cancel stopped the run (error KILN_ECANCELED): the counts
     * say how far it got. */
    bool canceled;
    /* 0, or why new driver data could not be saved as pipelines.vkc (a
     * read-only cache folder, a full disk; the vk module logged it): the
     * pipelines were built, but the next start compiles them again. Not an
     * error of the start. */
    int vk_cache_save_error;
    /* (0.2) The records chosen for this run: `records` without a subset
     * (kiln_start_options.keys, .recent), else how many of them the subset
     * named; and the keys asked for that the cache does not hold. */
    uint64_t chosen;
    uint64_t keys_absent;
    /* As in kiln_prepare_summary: the driver's word on the pipelines this
     * start built; a start whose every pipeline was a cache hit compiled
     * nothing, by the driver's own word. */
    uint64_t feedback_pipelines;
    uint64_t driver_cache_hits;
    uint64_t driver_ns;
    /* (0.2) Where the start's pipelines came from: made from the host
     * tier's driver binaries (binaries), found in the VkPipelineCache by
     * the driver's word (driver_cache_hits), and the rest of those built,
     * compiled (where the driver gives no feedback, a pipeline cache hit
     * counts here). */
    uint64_t from_binaries;
    uint64_t from_pipeline_cache;
    uint64_t compiled;
    /* (0.2) The tier (kiln_start_options.binaries): whether it was used,
     * the binaries it kept this run, the stale folders of this device it
     * found and removed, and the damaged records it refused (built from
     * SPIR-V; never handed to the driver). */
    uint64_t binaries_kept;
    uint64_t binaries_stale;
    uint64_t binaries_stale_dropped;
    uint64_t binaries_damaged;
    /* The tier's folder for this device and driver, its global key in
     * hex, and the pipelines and payload bytes it holds at the end. */
    uint64_t binaries_records;
    uint64_t binaries_bytes;
    char binaries_dir[512];
    char binaries_global_key[71]; /* 71: the bool after it ends the struct unpadded */
    bool binaries_used;
    /* (0.2) Records of the tier dropped before the build because their
     * program is no longer in the cache (kiln_binaries_sweep; a start
     * that holds the cache for writing). */
    uint64_t binaries_swept;
    /* (0.2) Of vulkan_ns, the part the start did not wait for: the
     * context kiln makes is begun beside the reading of the records (the
     * instance and the device choice), and only the rest follows it. So
     * open_ns + read_ns + vulkan_ns - vulkan_overlap_ns + pipelines_ns is
     * about total_ns. 0 with a given context. */
    uint64_t vulkan_overlap_ns;
    /* (0.2) Isolation (options.isolate; 0 without), as in
     * kiln_prepare_summary: worker processes started, messages that
     * carried programs, programs sent again after their worker died,
     * programs killed at the learned limit, that limit at the end, and
     * the workers started with the run (beside the reading, their Vulkan
     * context begun there). */
    uint64_t isolated_workers;
    uint64_t isolated_batches;
    uint64_t isolated_resent;
    uint64_t isolated_early_timeouts;
    uint64_t isolated_time_limit_ms;
    uint64_t isolated_early_workers;
};
#define KILN_START_SUMMARY_INIT KILN_STRUCT_INIT(kiln_start_summary)

/*
 * The warm start: opens the cache (by its index when it matches), lists
 * its records, loads them all with kiln_cache_load_many, records their
 * last use, closes the cache, and builds every program's pipeline on the
 * pool through the VkPipelineCache loaded from pipelines.vkc, unpacking
 * with the cache's dictionary. A record that is missing or damaged is
 * counted in `missing` (one warning line gives the count) and not built.
 * When pipelines.vkc was missing or not used, it is saved at the end, so
 * the next start finds it. `progress` may be NULL.
 *
 * The start never adds, changes or drops a record. To record last use
 * (programs.kpu, what kiln cache prune goes by) it opens the cache as a
 * writer that keeps its stamp and dictionary (KILN_CACHE_KEEP_STAMP), so
 * its marks cannot race another writer's, and holds the lock only through
 * the open and the read; the open may do what any writer's open does (cut
 * a torn last record, bring the index up to date). When another writer
 * holds the cache (KILN_EBUSY), the folder is not writable, or `read_only`
 * is set, it opens read-only instead, writes nothing, and says in one info
 * line (and use_text) that last use was not recorded.
 *
 * A crash costs one start at most: each build is noted in a crash journal
 * of the folder (inflight-N.kpj) while it runs, so the next start (or
 * kiln_prepare) skips what a dead run had in flight (crash_skipped) and
 * records it in the build ledger as crashed; a start skips what the ledger
 * records as having crashed a process or worker on this driver
 * (ledger_failed) unless retry_failed. The ledger is written only under the
 * writer lock (taken again at the end when there is something to record).
 * See docs/prep.md, "A crash costs one run".
 * @return 0 when the start went through (check `missing` and
 * `pipelines_failed`), or the error that stopped it with summary->step set:
 * KILN_ENOENT (no cache in the folder), KILN_ESTAMP (another stamp), a
 * cache error (KILN_ECORRUPT: the cache's dictionary file is missing or
 * damaged), KILN_ENOTSUP (no Vulkan), KILN_ECANCELED (options->cancel
 * stopped the builds: `canceled` set, what was built kept). A failed open
 * is logged at info only: the caller reports it. *summary is always
 * filled.
 * Thread safety: any thread; beside a kiln_prepare or another writer on the
 * same folder it opens the cache read-only (see above).
 */
KILN_API int kiln_warm_start(const struct kiln_start_options *o, kiln_prep_progress_fn progress,
                             void *progress_user, struct kiln_start_summary *summary);

/* ---------------------------------------------------------------------------
 * One program at a time: the build session.
 *
 * What the pipeline phase of kiln_warm_start does to each program, for a
 * caller that builds programs as it meets them (kiln/service.h's service
 * does): open and check the payload's stages, stage them, build through
 * the builder for its state kind (kiln's own shapes for
 * KILN_STATE_BUILTIN), release the stages.
 * ------------------------------------------------------------------------ */

struct kiln_build_session;

/* What a build session builds with. Zero-initialise, then set vk. */
struct kiln_build_session_options {
    size_t size; /* sizeof, as KILN_BUILD_SESSION_OPTIONS_INIT sets it (docs/abi.md) */
    /* The Vulkan context to build on. Required; must outlive the session. */
    struct kiln_vk *vk;
    /* The builders, as in kiln_prepare_options (copied). May be NULL and 0. */
    const struct kiln_builder *builders;
    size_t nbuilders;
    /* The dictionary the payloads were packed with (kiln_cache_dict of their
     * cache); NULL: none. Must outlive the session. */
    const struct kiln_pack_dict *dict;
    /* The build ledger (optional, NULL: none): the cache folder whose
     * ledger.kpl notes what the session builds, as kiln_prepare does. A
     * failure is noted when kiln_build_session_save runs; a build as BUILT
     * only once pipelines.vkc was saved after it (kiln_build_session_save
     * saves it: `vk` must have been made with this cache_dir). The caller
     * holds the cache's writer lock (an open kiln_cache that is not
     * read-only) for the session's life. Must outlive the session. */
    const char *ledger_dir;
    const struct kiln_io *ledger_io; /* NULL: kiln_io_default() */
    /* (0.2) The host tier of driver binaries (enum kiln_binaries_mode; 0:
     * off) of the cache folder binaries_dir (docs/vk.md): a run makes a
     * pipeline from its binaries where the tier holds them (no compile;
     * kiln_build_run.from_binaries), and builds it as always otherwise.
     * The session only reads the tier unless binaries_keep is set.
     * binaries_dir must outlive the session. */
    uint32_t binaries;
    const char *binaries_dir;
    /* (0.2) Keep the binaries of what the session compiles in that tier
     * (kiln_build_run.binaries_kept): whole pipelines only (not a linked
     * one, not parts, not a probe's hit, which compiled nothing), each
     * captured by its create and stored under its program's key, so the
     * next start makes it from them. The tier is then held for writing
     * for the session's life (where another run writes it, the session
     * only reads it, with one info line); the caller holds the program
     * cache's writer lock, as for ledger_dir. kiln_build_session_save
     * syncs what was kept; a crash before loses only binaries. */
    bool binaries_keep;
};
#define KILN_BUILD_SESSION_OPTIONS_INIT KILN_STRUCT_INIT(kiln_build_session_options)

/*
 * Makes a build session.
 * @return 0 and the session in *out; KILN_EINVAL (NULL, no vk, a builder
 * of an unknown kind or without a build function: logged) or KILN_ENOMEM.
 * Thread-safe (each call makes its own session).
 */
KILN_API int kiln_build_session_create(const struct kiln_build_session_options *o,
                                       struct kiln_build_session **out);

/*
 * Builds the pipeline of one program payload (a cache record's, or
 * kiln_program_seal's) on the calling thread, as the warm start would,
 * `worker` being the calling thread's index for the builders' per-thread
 * state (kiln_build_request.worker).
 * @return 0 with the pipeline in *pipeline (the caller's: free it with
 * kiln_vk_pipeline_destroy; NULL when the builder keeps the pipeline, or
 * the payload is one graphics module of no pipeline alone); KILN_ENOTSUP
 * when the program was skipped (no builder for its kind, a shape kiln's
 * own builder lacks, the builder said so); the payload's or the build's
 * error otherwise (one line logged, naming the program). KILN_EINVAL for a
 * NULL argument.
 * Thread-safe: any number of threads at once, each with its own `worker`
 * when the builders keep per-thread state.
 */
KILN_API int kiln_build_session_run(struct kiln_build_session *s, struct kiln_key key,
                                    const void *payload, size_t size, unsigned worker,
                                    struct kiln_vk_pipeline **pipeline);

/* One build of a session (kiln_build_session_run_with): kiln_build_session_run's
 * arguments, and what only this form asks and answers. Zero-initialise,
 * then set the program. */
struct kiln_build_run {
    size_t size; /* sizeof, as KILN_BUILD_RUN_INIT sets it (docs/abi.md) */
    /* In: the program, as kiln_build_session_run takes it. */
    struct kiln_key key;
    const void *payload; /* borrowed for the call */
    size_t payload_size;
    unsigned worker;
    uint32_t flags; /* KILN_BUILD_PROBE (ask before compiling), KILN_BUILD_COMPILE_ON_MISS */
    /* In: KILN_BUILD_LINK_* (kiln_build_request.link): KILN_BUILD_LINK_FAST
     * asks for a pipeline linked from library parts where the builder can
     * (kiln's own graphics shape, on a context with pipeline libraries). */
    uint32_t link;
    /* Out: the pipeline (the caller's, as kiln_build_session_run says). */
    struct kiln_vk_pipeline *pipeline;
    /* Out: the driver's creation feedback of the pipeline (kiln's own
     * shapes and the Fossilize builder give it where
     * kiln_vk_info.creation_feedback; another builder when it fills
     * kiln_build_request's feedback fields): valid, the application's
     * pipeline cache held it (no compile), the driver's time. */
    bool feedback_valid;
    bool driver_cache_hit;
    uint64_t driver_ns;
    /* Out: the probe missed and the run compiled
     * (KILN_BUILD_COMPILE_ON_MISS). */
    bool probe_missed;
    /* Out: the pipeline is a linked one (KILN_BUILD_LINK_FAST), and the
     * library parts built and reused for it. */
    bool linked;
    uint32_t parts_built;
    uint32_t parts_reused;
    /* (0.2) Out: the pipeline was made from the host tier's binaries (the
     * session's `binaries`): no compile. */
    bool from_binaries;
    /* (0.2) Out: its binaries were captured and stored in the tier (the
     * session's binaries_keep). */
    bool binaries_kept;
};
#define KILN_BUILD_RUN_INIT KILN_STRUCT_INIT(kiln_build_run)

/*
 * kiln_build_session_run with a growable request: the same build, plus
 * flags in and the driver's feedback out, and the fast-link request and
 * answer (run->link, run->linked). With KILN_BUILD_PROBE the build only
 * takes what the driver's caches hold.
 * @return as kiln_build_session_run; with KILN_BUILD_PROBE also
 * KILN_ECOMPILE_REQUIRED (nothing built, nothing logged: building it means
 * a compile) and KILN_ENOTSUP without building when the device has no
 * probe (kiln_vk_info.compile_probe false). A builder that ignores the
 * flag builds as always. KILN_EINVAL for NULL or a bad size.
 * Thread-safe, as kiln_build_session_run.
 */
KILN_API int kiln_build_session_run_with(struct kiln_build_session *s, struct kiln_build_run *run);

/*
 * Writes what the session built to its build ledger
 * (kiln_build_session_options.ledger_dir): saves pipelines.vkc
 * (kiln_vk_cache_save, when something was built since the last save),
 * then notes every program built since the last save as BUILT (only when the save worked) and every
 * failure as FAILED (a probe's KILN_ECOMPILE_REQUIRED and a skip are not failures), with the
 * driver's word on the session's builds (KILN_LEDGER_RUN_SERVICE, see
 * kiln_ledger_last_run), and syncs the ledger.
 * @return 0 (also with no ledger: nothing to do), the pipelines.vkc save's
 * error (failures and the driver's word are still written), or the
 * ledger's I/O error. KILN_EINVAL for NULL.
 * Thread safety: any thread, beside runs of the session; not beside
 * another save of it.
 */
KILN_API int kiln_build_session_save(struct kiln_build_session *s);

/*
 * Calls each builder's finish, then frees the session (without writing
 * the ledger: kiln_build_session_save does). NULL is a no-op.
 * Thread safety: not beside another call on the session; the pipelines it
 * built stay valid.
 */
KILN_API void kiln_build_session_destroy(struct kiln_build_session *s);

/* ---------------------------------------------------------------------------
 * The driver's word on the last runs (the build ledger's run records).
 *
 * Each kiln_prepare and kiln_warm_start that built pipelines, and each
 * build session saved (the pipeline service), notes in the cache folder's
 * ledger what the driver said of its builds through
 * VK_EXT_pipeline_creation_feedback: so "a second run compiles nothing"
 * is read from the driver, not assumed.
 * ------------------------------------------------------------------------ */

/* Which run a ledger run record tells of. */
enum kiln_ledger_run_kind {
    KILN_LEDGER_RUN_PREPARE = 1, /* kiln_prepare */
    KILN_LEDGER_RUN_START = 2,   /* kiln_warm_start */
    KILN_LEDGER_RUN_SERVICE = 3, /* a build session's save (the pipeline service) */
};

/* What the driver said of one run's builds (kiln_ledger_last_run). */
struct kiln_ledger_run {
    size_t size;   /* sizeof, as KILN_LEDGER_RUN_INIT sets it (docs/abi.md) */
    uint32_t kind; /* enum kiln_ledger_run_kind */
    /* The driver, as the ledger tells drivers apart. */
    uint32_t vendor_id;
    uint32_t device_id;
    uint32_t driver_version;
    uint8_t pipeline_cache_uuid[16];
    uint64_t when;       /* seconds since 1970 (UTC) */
    uint64_t pipelines;  /* pipelines the run built */
    uint64_t feedback;   /* of those, with the driver's creation feedback */
    uint64_t cache_hits; /* of those, held by the application's pipeline cache: no compile */
    uint64_t driver_ns;  /* the driver's own time for them, summed */
    uint64_t probed;     /* probes asked (KILN_BUILD_PROBE) */
    uint64_t probe_hits; /* probes answered with a pipeline, without a compile */
};
#define KILN_LEDGER_RUN_INIT KILN_STRUCT_INIT(kiln_ledger_run)

/*
 * The last run of `kind` the build ledger of `cache_dir` tells of, on
 * whatever driver.
 * @return 0 with *out filled; KILN_ENOTFOUND when it tells of none (a
 * ledger of an older kiln), KILN_ENOENT when the folder has no ledger, the
 * ledger's header error (KILN_EFORMAT, KILN_ECORRUPT_HEADER), an I/O
 * error, or KILN_EINVAL (NULL, a bad size or kind).
 * Thread-safe; reads the file without the cache's lock (a record is
 * whole or skipped).
 */
KILN_API int kiln_ledger_last_run(const char *cache_dir, uint32_t kind,
                                  struct kiln_ledger_run *out);

#ifdef __cplusplus
}
#endif

#endif /* KILN_PREP_H */
