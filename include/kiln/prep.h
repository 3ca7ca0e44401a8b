/*
 * kiln/prep.h - the preparation and the warm start, and their inputs:
 * programs, program sources and translators.
 *
 * A program is what one pipeline is built from: one compute stage, or a
 * vertex and a fragment stage. Each stage starts as source text (GLSL, or
 * whatever an emulator's guest program is) and is turned into SPIR-V by a
 * translator: a callback the caller brings (kiln's tools have a GLSL one
 * over shaderc, tools/glsl), or comes as SPIR-V already. Programs reach
 * kiln_prepare through a program source: a table of callbacks that counts
 * and loads them (kiln's tools have the generator, corpus folders and
 * Fossilize archives as sources; an emulator brings its own).
 *
 * Ownership in one place: every SPIR-V array kiln hands out (a program
 * stage's words, kiln_translate's output) comes from malloc and is freed by
 * kiln_program_destroy or kiln_words_free. A translator's own buffer is given
 * back to it through its `release` callback as soon as kiln has taken the
 * words over.
 */
#ifndef KILN_PREP_H
#define KILN_PREP_H

#include "kiln/common.h"
#include "kiln/cache.h"
#include "kiln/pack.h"
#include "kiln/vk.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------------
 * Stages and sources
 * ------------------------------------------------------------------------ */

/*
 * One stage's source, as a translator receives it. `text` holds `size`
 * bytes and need not end with a NUL (kiln's own sources do). `name` says
 * which program and stage it is, for log lines ("gen-000007-graphics.frag",
 * "shaders/blur.comp"). All pointers are borrowed for the call.
 */
struct kiln_source {
    uint32_t stage; /* a VkShaderStageFlagBits value (KILN_VK_STAGE_*_BIT, kiln/pack.h) */
    const char *text;
    size_t size;
    const char *name;
};

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
    kiln_translate_fn translate;
    /* NULL when the words come from malloc(): kiln then takes the array over
     * as it is. Otherwise kiln copies the words and releases the array. */
    kiln_release_fn release;
    void *user;
    /* Identifies the translator and its settings: a program cache written
     * with another stamp is not used (its SPIR-V may differ). */
    uint64_t stamp;
    /* A short name for log lines ("shaderc"); may be NULL. */
    const char *name;
};

/*
 * Runs `t` on one source and checks its output: at least a SPIR-V header
 * (5 words) and the SPIR-V magic number. A failure is logged as one error
 * line naming the source, its stage, the translator and the translator's
 * message (see kiln_translate_set_error).
 * @return 0 with a new malloc'd array in *words (free it with
 * kiln_words_free) of *nwords words; KILN_ETRANSLATE when the translator
 * failed or gave something that is not SPIR-V; the translator's other
 * errors as they are; KILN_EINVAL for a NULL argument. Thread-safe when the
 * translator is.
 */
KILN_API int kiln_translate(const struct kiln_translator *t, const struct kiln_source *src,
                            uint32_t **words, size_t *nwords);

/* Frees words made by kiln_translate. NULL is a no-op. */
KILN_API void kiln_words_free(uint32_t *words);

/*
 * Called by a translator inside its callback to say why it failed; kiln puts
 * the text (newlines become spaces, at most 1 KiB) in the one log line it
 * writes for the failure. Kept per thread; the next kiln_translate on this
 * thread clears it.
 */
KILN_API void kiln_translate_set_error(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;

/* ---------------------------------------------------------------------------
 * Programs
 * ------------------------------------------------------------------------ */

#define KILN_PROGRAM_MAX_STAGES 2

/* One stage of a program: source text, SPIR-V, or both once translated. */
struct kiln_program_stage {
    /* The source. src.text is NULL for a stage that came as SPIR-V; src.name
     * is always set (for a file: its path relative to its folder). */
    struct kiln_source src;
    /* The SPIR-V, or NULL until kiln_program_translate fills it. */
    uint32_t *words;
    size_t nwords;
};

/*
 * A program: one compute stage, or a vertex stage then a fragment stage.
 * Everything in it is owned by the program and freed by
 * kiln_program_destroy; a caller may read it and may take `words` over
 * (setting the pointer to NULL), nothing else.
 */
struct kiln_program {
    char *name;
    unsigned nstages;
    struct kiln_program_stage stages[KILN_PROGRAM_MAX_STAGES];
    /* The key the program is stored under, when its source names it (a
     * module of a Fossilize archive keeps its archive's hash); otherwise
     * has_key is false and kiln_prep_program_key makes it. */
    bool has_key;
    struct kiln_key key;
};

/*
 * Translates every stage of `p` that has source text and no SPIR-V yet,
 * through kiln_translate.
 * @return 0, or the first stage's error (stages before it keep their words).
 * Thread-safe for different programs when the translator is.
 */
KILN_API int kiln_program_translate(const struct kiln_translator *t, struct kiln_program *p);

/* @return the SPIR-V bytes of all stages that have words. */
KILN_API size_t kiln_program_spirv_bytes(const struct kiln_program *p);

/* Frees a program and everything it holds. NULL is a no-op. */
KILN_API void kiln_program_destroy(struct kiln_program *p);

/*
 * Makes an empty program named `name` (copied; no stages). The caller then
 * fills its stages: every string and words array it puts there must come
 * from malloc, and is the program's from then on (kiln_program_destroy
 * frees them).
 * @return 0 and the program in *out, KILN_EINVAL for a NULL argument, or
 * KILN_ENOMEM. Thread-safe.
 */
KILN_API int kiln_program_create(const char *name, struct kiln_program **out);

/*
 * Checks that `n` bytes look like a SPIR-V module: a whole number of words,
 * at least a header, the magic number in host order.
 * @return 0, or KILN_EFORMAT with a static reason in *why (which may be
 * NULL). Thread-safe.
 */
KILN_API int kiln_spirv_check(const void *data, size_t n, const char **why);

/* ---------------------------------------------------------------------------
 * Program sources
 * ------------------------------------------------------------------------ */

/*
 * Where kiln_prepare takes its programs from: `count` programs, numbered
 * from 0, each made on demand by `load`. The struct is copied by value;
 * what `user` points to must outlive the kiln_prepare call.
 *
 * A program given as source text needs kiln_prepare_options.translator; a
 * program whose stages come as SPIR-V (words, no text) needs none. A
 * program may name its own key (kiln_program.has_key: a Fossilize module
 * keeps its archive's hash); otherwise it is keyed by
 * kiln_prep_program_key.
 */
struct kiln_program_source {
    void *user;
    /* How many programs there are. */
    size_t count;
    /*
     * Makes program i (0 <= i < count) and stores it in *out (the caller
     * destroys it). Called from many worker threads at once: it must be
     * thread-safe. On failure it returns a negative kiln error and has
     * logged one line naming the program and why.
     */
    int (*load)(void *user, size_t i, struct kiln_program **out);
    /*
     * The cache stamp for these programs translated by a translator with
     * `translator_stamp` (0 when there is none): a source whose programs
     * change with something besides the translator (the generator's
     * version) mixes that in; a source of SPIR-V names its own. NULL: the
     * translator's stamp as it is.
     */
    uint64_t (*stamp)(void *user, uint64_t translator_stamp);
};

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
 * (kiln_program.key), else by kiln_prep_program_key. The payload's stage
 * kinds are VkShaderStageFlagBits values: one KILN_VK_STAGE_COMPUTE_BIT
 * stage, or KILN_VK_STAGE_VERTEX_BIT then KILN_VK_STAGE_FRAGMENT_BIT. The
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

/* What kiln_prepare does. Fill it with kiln_prepare_options_init first. */
struct kiln_prepare_options {
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
};

/* Sets every field of *o to its default (see the fields). */
KILN_API void kiln_prepare_options_init(struct kiln_prepare_options *o);

/*
 * The stamp kiln_prepare gives the cache for these options: the source's
 * stamp callback over the translator's stamp (0 without a translator), or
 * the translator's stamp as it is when the source has no such callback.
 * An emulator passes it to kiln_warm_start.
 * @return the stamp; 0 for NULL options or no source.
 */
KILN_API uint64_t kiln_prepare_stamp(const struct kiln_prepare_options *o);

/*
 * A program's key: XXH3-128 over its identity, stage by stage: the stage
 * kind, then the source text, or, for a stage that came as SPIR-V, its
 * words (each with its kind and length before it, so no two programs share
 * a key by shifting bytes between stages). Compute, vertex and fragment
 * are hashed as 0, 1 and 2, the numbers keys were first made with, so the
 * keys of caches made before stages were VkShaderStageFlagBits still hold.
 * @return 0 with the key in *key, KILN_EINVAL for a program without stages
 * or a stage with neither text nor words, or KILN_ENOMEM. Thread-safe.
 */
KILN_API int kiln_prep_program_key(const struct kiln_program *p, struct kiln_key *key);

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
    uint64_t programs;        /* programs the source has */
    uint64_t translated;      /* translated, packed and stored by this run */
    uint64_t cached;          /* found in the cache already: not translated */
    uint64_t failed;          /* programs that could not be loaded, translated, packed or stored */
    uint64_t pipelines_built; /* pipelines made */
    uint64_t pipelines_failed;
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
};

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
 * it. *summary is always filled. Not to be run twice at once on one cache folder (the
 * second one's open fails with KILN_EBUSY; so does one while a warm start
 * holds the cache for its open and read).
 */
KILN_API int kiln_prepare(const struct kiln_prepare_options *o, kiln_prep_progress_fn progress,
                          void *progress_user, struct kiln_prepare_summary *summary);

/* What kiln_warm_start does. Zero-initialise, then set what you need. */
struct kiln_start_options {
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
};

/* What kiln_warm_start did. Times are in nanoseconds. */
struct kiln_start_summary {
    uint64_t records; /* live records the index lists */
    uint64_t loaded;  /* records read and checked */
    uint64_t missing; /* records missing or damaged: reported, not built */
    uint64_t bad;     /* records read but not a program payload, or a stage the SPIR-V
                         validator refused (or, without one, could not check): not built */
    uint64_t bytes;   /* payload bytes read */
    uint64_t pipelines_built;
    uint64_t pipelines_failed;
    uint64_t open_ns;      /* opening the cache (index) and listing it */
    uint64_t read_ns;      /* kiln_cache_load_many */
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
};

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
 * @return 0 when the start went through (check `missing` and
 * `pipelines_failed`), or the error that stopped it with summary->step set:
 * KILN_ENOENT (no cache in the folder), KILN_ESTAMP (another stamp), a
 * cache error (KILN_ECORRUPT: the cache's dictionary file is missing or
 * damaged), KILN_ENOTSUP (no Vulkan). A failed open is logged at info
 * only: the caller reports it. *summary is always filled.
 */
KILN_API int kiln_warm_start(const struct kiln_start_options *o, kiln_prep_progress_fn progress,
                             void *progress_user, struct kiln_start_summary *summary);

#ifdef __cplusplus
}
#endif

#endif /* KILN_PREP_H */
