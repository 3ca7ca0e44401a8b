/*
 * prep_internal.h - what the prep module's files share. Private to
 * src/prep.
 */
#ifndef KILN_PREP_INTERNAL_H
#define KILN_PREP_INTERNAL_H

/* The builders' requests carry Vulkan types: the headers come first, with
 * no prototypes (Vulkan is reached through kiln_vk's function pointers). */
#ifndef VK_NO_PROTOTYPES
#define VK_NO_PROTOTYPES
#endif
#include <vulkan/vulkan.h>

#include "kiln/pool.h"
#include "kiln_internal.h"
#include "kiln/prep.h"

#include <pthread.h>
#include <stdatomic.h>

/* ---- shared by prepare.c and start.c -------------------------------------- */

/* One program of a pipeline phase: its key, a name for log lines (NULL: the
 * key in hex) and its payload (borrowed). `status` is what the build gave. */
struct kiln__prep_item {
    struct kiln_key key;
    const char *name;
    const void *payload;
    size_t size;
    bool validated; /* its stages were validated by this process (not again) */
    /* Its failure never reached a driver (an isolated worker that could not
     * start or greet, a channel or memory failure before the program was
     * sent): not the driver's word, so not recorded in the ledger. */
    bool unreached;
    /* An isolated worker was killed at the learned time limit, under the
     * fixed one, while it built this program (isolate.c): a guess, not the
     * driver's word, so not recorded in the ledger either. */
    bool early_timeout;
    int status;
    /* What the driver said of its build (creation feedback), when valid. */
    bool feedback_valid;
    bool driver_cache_hit;
    uint64_t driver_ns;
    bool probe_missed; /* a probe the driver answered "compile required", then compiled */
    /* Fast-link (kiln_build_run.link): asked, and what the build did. */
    uint32_t link;
    bool linked;
    uint32_t parts_built, parts_reused;
    bool from_binaries; /* made from the host tier's binaries (no compile) */
    bool binaries_kept; /* its binaries were captured and stored in the tier */
};

/*
 * A built program's one name in log lines, the same in every run of every
 * command: "program <key, 32 hex digits>", with the source's own name after
 * it in parentheses where the run has one (kiln prepare: a file's name, a
 * Fossilize pipeline's "<hash>.<kind>"). @return buf.
 */
#define KILN__PREP_LABEL_MAX 320
const char *kiln__prep_item_label(const struct kiln__prep_item *it, char *buf, size_t cap);

struct kiln__journal;

/* ---- what a build is expected to need in memory (prep_memory.c) ------------ */

/* Classes: state kind x stage count (1, 2, 3+) x SPIR-V size bucket (4). */
#define KILN__MEMORY_CLASSES (KILN_STATE_KINDS * 3 * 4)
/* No build is predicted below this. */
#define KILN__MEMORY_FLOOR (1ull << 20)

struct kiln__prep_memory {
    pthread_mutex_t lock;
    uint64_t per_kib[KILN__MEMORY_CLASSES]; /* bytes per KiB of SPIR-V; 0: not known */
    bool changed[KILN__MEMORY_CLASSES];     /* learned in this run (written to the ledger) */
    bool verified[KILN__MEMORY_CLASSES];    /* a build of it ended in this run */
    uint64_t largest; /* the most one build was seen to need in this run (0: none yet) */
};

/* The head of a build job the pool's memory model reads (the job's arg
 * points to it). */
struct kiln__prep_memory_job {
    unsigned cls;
    uint64_t spirv_bytes;
    /* Its item: a build that reached no driver (not started, unreached)
     * teaches nothing. */
    const struct kiln__prep_item *item;
};

void kiln__prep_memory_init(struct kiln__prep_memory *m);
void kiln__prep_memory_destroy(struct kiln__prep_memory *m);

/* A payload's class and its SPIR-V bytes (0 and 0 for one that does not
 * parse: its build fails before the driver). Headers only: no unpacking. */
unsigned kiln__prep_memory_class(const void *payload, size_t size, uint64_t *spirv_bytes);

/* What a build of class `cls` with `spirv_bytes` is expected to need;
 * 0: nothing known yet. Thread-safe. */
uint64_t kiln__prep_memory_predict(struct kiln__prep_memory *m, unsigned cls, uint64_t spirv_bytes);

/* A build of class `cls` was seen to need `grown` bytes: the class's
 * figure rises to it at once and never falls within a run. Thread-safe. */
void kiln__prep_memory_observe(struct kiln__prep_memory *m, unsigned cls, uint64_t spirv_bytes,
                               uint64_t grown);

/* kiln_pool_memory_model callbacks over jobs that start with a struct
 * kiln__prep_memory_job; `user` is the struct kiln__prep_memory. */
uint64_t kiln__prep_memory_predict_job(void *user, void *arg);
void kiln__prep_memory_observe_job(void *user, void *arg, uint64_t predicted, uint64_t grown);

/* The pool's model over `m` (NULL: none) into *out. @return out, or NULL. */
const struct kiln_pool_memory_model *kiln__prep_memory_model(struct kiln__prep_memory *m,
                                                             struct kiln_pool_memory_model *out);

/* What a pipeline phase builds with. */
struct kiln__prep_build {
    struct kiln_vk *vk;
    /* The dictionary the payloads' blobs were packed with (NULL: none);
     * must outlive the phase. */
    const struct kiln_pack_dict *dict;
    kiln_prep_pipeline_fn on_pipeline; /* NULL: each pipeline is destroyed at once */
    void *pipeline_user;
    kiln_prep_progress_fn progress;
    void *progress_user;
    /* The caller's builders (see kiln/prep.h, "Builders"); may be none. */
    const struct kiln_builder *builders;
    size_t nbuilders;
    _Atomic uint64_t bad;  /* out: payloads that are not a program's, or not valid (logged) */
    _Atomic uint64_t lone; /* out: one-module payloads of no pipeline (not built) */
    /* out: programs built though the validator refused a stage (their
     * builder has KILN_BUILDER_RECORDED_SPIRV and the stage parses) */
    _Atomic uint64_t recorded_invalid;
    /* out: per state kind, what became of its programs; the first skip's
     * reason is written by the one worker that wins skip_claimed. */
    _Atomic uint64_t built[KILN_STATE_KINDS];
    _Atomic uint64_t skipped[KILN_STATE_KINDS];
    _Atomic uint64_t failed[KILN_STATE_KINDS];
    _Atomic unsigned skip_claimed[KILN_STATE_KINDS]; /* 0 until the first skip (zeroed) */
    char skip_reason[KILN_STATE_KINDS][160];
    /* The run's controls (prep_run.c): the pool's memory budget and
     * priority, and the cancel check (NULL: none). */
    uint64_t memory_budget;
    /* What each build is expected to need (NULL: the pool's largest-seen
     * rule); learned as builds finish. */
    struct kiln__prep_memory *memory;
    bool background;
    const struct kiln_executor *executor; /* the options' (NULL: threads) */
    bool (*cancel)(void *user);
    void *cancel_user;
    _Atomic uint64_t started; /* builds started (the test hook counts them) */
    atomic_bool stopped;      /* out: a build was not started because of a cancel */
    /* The run's crash journal (journal.c): each in-process build is noted
     * in flight in its worker's slot before it starts. NULL: none. */
    struct kiln__journal *journal;
    /* out: failures that never reached a driver (kiln__prep_item.unreached) */
    _Atomic uint64_t unreached;
    /* Ask before compiling: KILN_BUILD_* flags for every build (a build
     * session's probe), and out, the driver's word summed over the builds
     * (kiln__prep_note_feedback) and the probes it answered
     * KILN_ECOMPILE_REQUIRED (not failures: no warning, not counted). */
    uint32_t build_flags;
    _Atomic uint64_t feedback_pipelines;
    _Atomic uint64_t feedback_cache_hits;
    _Atomic uint64_t feedback_driver_ns;
    _Atomic uint64_t compile_required;
    /* The host tier of driver binaries (binaries.h; NULL: off): kiln's own
     * shapes and builders with KILN_BUILDER_BINARIES are made from it where
     * it holds them (from_binaries counts them), and built with their
     * binaries captured and kept otherwise. */
    struct kiln__bin_tier *bins;
    _Atomic uint64_t from_binaries;
};

/* Notes the driver's feedback of an item's build in the item and the
 * phase's sums (start.c). */
void kiln__prep_note_feedback(struct kiln__prep_build *b, struct kiln__prep_item *it, bool valid,
                              bool cache_hit, uint64_t driver_ns);

struct kiln__ledger_run;

/* The driver's word on a phase's builds, as a ledger run record of
 * `kind` (enum kiln_ledger_run_kind), stamped now (prep_run.c). */
void kiln__prep_run_word(const struct kiln__prep_build *b, uint64_t built, uint32_t kind,
                         struct kiln__ledger_run *out);

/* ---- the run's controls (prep_run.c) --------------------------------------- */

/*
 * Whether the run should stop handing out work: the options' cancel, or
 * the test hook kiln__prep_test_cancel_after (counted by `started`, when
 * not NULL). Thread-safe.
 */
bool kiln__prep_stopping(bool (*cancel)(void *), void *user, _Atomic uint64_t *started);

/* Test hook: with a value K > 0, every pipeline phase stops after K builds
 * started (as if options.cancel said so). 0 outside tests. */
extern uint64_t kiln__prep_test_cancel_after;

/* A pool for a phase of a run: `workers`, with the run's budget,
 * priority and executor (NULL: threads). @return kiln_pool_create_with's
 * result. */
int kiln__prep_pool(unsigned workers, uint64_t memory_budget, bool background,
                    const struct kiln_executor *executor,
                    const struct kiln_pool_memory_model *model, struct kiln_pool **pool);

/* The ledger's part of kiln_prepare's pipeline phase. */
struct kiln__prep_ledger;

/*
 * Opens the cache folder's ledger for vk's driver and takes from `items`
 * (payload set to NULL) what it answers: programs built before on this
 * driver, when pipelines.vkc was loaded, no on_pipeline wants the
 * pipelines and the host tier (`bins`, NULL: off) is not new (a new one
 * is filled by building everything once), and programs that failed before unless retry_failed.
 * Counts them in s->ledger_skipped / ledger_failed. A ledger that cannot be read answers nothing
 * (logged). First the crash journals: what a dead run had in flight is recorded as crashed and
 * taken from `items` this once (s->crash_skipped); then, unless isolated, this run's journal is
 * claimed with s->workers slots (kiln__prep_ledger_journal).
 * @return 0 or KILN_ENOMEM; *out may be NULL.
 */
int kiln__prep_ledger_begin(const struct kiln_prepare_options *o, struct kiln_vk *vk,
                            struct kiln__bin_tier *bins, struct kiln__prep_item *items, size_t n,
                            struct kiln_prepare_summary *s, struct kiln__prep_ledger **out);

/* The run's crash journal (NULL: none), for kiln__prep_build.journal. */
struct kiln__journal *kiln__prep_ledger_journal(const struct kiln__prep_ledger *pl);

/* The driver's memory figures from the ledger into `m` (prep_memory.c),
 * and the ones this run changed back, written by kiln__prep_ledger_end's
 * sync. NULL `pl` or `m`: nothing. */
void kiln__prep_ledger_memory_load(const struct kiln__prep_ledger *pl, struct kiln__prep_memory *m);
void kiln__prep_ledger_memory_keep(struct kiln__prep_ledger *pl, struct kiln__prep_memory *m);

/* The mean driver time of a pipeline on this driver in its last run with
 * creation feedback (kiln__ledger_build_ns), for isolation's sizing rule;
 * 0: not known (or NULL `pl`). */
uint64_t kiln__prep_ledger_build_ns(const struct kiln__prep_ledger *pl);

struct kiln__ledger;
struct kiln__ledger_driver;
struct kiln__journal_suspect;

/* The ledger's name for vk's driver (with kiln__ledger_test_version_xor). */
void kiln__prep_driver(struct kiln_vk *vk, struct kiln__ledger_driver *d);

/*
 * Records the `n` suspects of dead runs (kiln__journal_suspects) in the
 * ledger as failed with KILN_ECRASH and a reason saying whether each was
 * in flight alone: in `own` (unsynced notes of it are synced too) for
 * those of own_driver, else in a ledger opened for their driver. The
 * caller holds the cache's writer lock. @return 0 when every record was
 * synced, else the error (logged as a warning).
 */
int kiln__prep_record_suspects(const char *dir, const struct kiln_io *io, struct kiln__ledger *own,
                               const struct kiln__ledger_driver *own_driver,
                               const struct kiln__journal_suspect *sus, size_t n);

/*
 * Takes from `items` (payload set to NULL, status KILN_ECRASH) every
 * program that was in flight on driver `d` when a run died, with one
 * warning line each naming it (`command` in the hint to retry).
 * @return how many.
 */
uint64_t kiln__prep_skip_suspects(const struct kiln__journal_suspect *sus, size_t n,
                                  const struct kiln__ledger_driver *d,
                                  struct kiln__prep_item *items, size_t nitems,
                                  const char *command);

/*
 * Records what the pipeline phase did with the items it was handed: each
 * failure as FAILED (a skip for missing device features is not recorded,
 * nor an item never run, nor a failure that never reached a driver), each
 * pipeline built as BUILT when `vkc_saved`;
 * and the run's driver's word (`run`, when not NULL and it built
 * something); then syncs the ledger (a failure is logged as a warning:
 * only builds are lost) and frees it. NULL is a no-op.
 */
void kiln__prep_ledger_end(struct kiln__prep_ledger *pl, const struct kiln__prep_item *items,
                           size_t n, bool vkc_saved, const struct kiln__ledger_run *run);

/*
 * The caller's structs an options struct points at, read into the
 * library's own (prep_abi.c, docs/abi.md).
 *
 * kiln__prep_builders_in (kiln_internal.h) reads the builders.
 *
 * kiln__prep_abi_in reads *translator and *isolate (each may be NULL) into
 * `abi` and points them there, checks `io`, and reads the builders (unless
 * `builders` is NULL), pointing *builders and *nbuilders at the copy. @return 0, KILN_EINVAL
 * (logged) or KILN_ENOMEM; kiln__prep_abi_free after it either way.
 */
struct kiln__prep_abi {
    struct kiln_translator translator;
    struct kiln_isolate_options isolate;
    struct kiln__prep_builders builders;
};
int kiln__prep_abi_in(struct kiln__prep_abi *abi, const struct kiln_translator **translator,
                      const struct kiln_isolate_options **isolate, const struct kiln_io *io,
                      const struct kiln_builder **builders, size_t *nbuilders);
void kiln__prep_abi_free(struct kiln__prep_abi *abi);

/*
 * Checks the builders of options (each kind below KILN_STATE_KINDS, a
 * build function set); `what` names the call in the error line.
 * @return 0 or KILN_EINVAL (logged).
 */
int kiln__prep_check_builders(const struct kiln_builder *builders, size_t n, const char *what);

/* Copies a pipeline phase's per-kind counts into a summary's array, and
 * sums the skipped ones. @return the skipped total. */
uint64_t kiln__prep_kind_counts(struct kiln__prep_build *b,
                                struct kiln_kind_counts out[KILN_STATE_KINDS]);

/* What a pipeline phase asks of its Vulkan context (kiln__prep_vk_open). */
struct kiln__prep_vk_want {
    struct kiln_vk *given; /* the caller's context, or NULL */
    bool isolate;          /* the run's workers make their own contexts */
    bool use_device_index;
    unsigned device;
    const char *cache_dir; /* pipelines.vkc's folder */
    const struct kiln_io *io;
    const struct VkAllocationCallbacks *allocator; /* for a context kiln makes */
    const struct kiln_builder *builders;
    size_t nbuilders;
    const struct kiln__prep_item *items;
    size_t n;
    uint32_t binaries; /* enum kiln_binaries_mode: asks for VK_KHR_pipeline_binary */
};

/* The want of a run whose options `o` (kiln_prepare_options or
 * kiln_start_options: the fields have the same names) build `n` items. */
#define KILN__PREP_VK_WANT(o, items_, n_)                                   \
    ((struct kiln__prep_vk_want){.given = (o)->vk,                          \
                                 .isolate = (o)->isolate != NULL,           \
                                 .use_device_index = (o)->use_device_index, \
                                 .device = (o)->device,                     \
                                 .cache_dir = (o)->cache_dir,               \
                                 .io = (o)->io,                             \
                                 .allocator = (o)->vk_allocator,            \
                                 .builders = (o)->builders,                 \
                                 .nbuilders = (o)->nbuilders,               \
                                 .items = (items_),                         \
                                 .n = (n_),                                 \
                                 .binaries = (o)->binaries})

/* What kiln__prep_vk_open gives back. */
struct kiln__prep_vk_got {
    struct kiln_vk *vk;  /* the context to build on */
    struct kiln_vk *own; /* the one kiln made (the caller destroys it), or NULL */
    uint64_t *masks;     /* the items' builder extensions, or NULL (the caller frees) */
};

/*
 * The Vulkan context of a pipeline phase: `given` when the caller passed
 * one, else a new one for the device asked (use_device_index, device) with
 * cache_dir's pipelines.vkc, through `io`, with the caller's Vulkan
 * allocator; a new one is also put in got->own, for the caller to destroy.
 * On success got->vk is the context to build on and the summary's device
 * name, pipelines.vkc state and loaded bytes are filled from it. When kiln
 * makes the context, or the run is `isolate`d (its workers make their own),
 * got->masks is first set to what the `n` items need of the builders'
 * extensions (kiln__prep_needed_extensions; the caller frees it, also on
 * failure), else NULL; a new context enables those the device offers.
 * @return 0, KILN_ENOMEM, or kiln_vk_create's error (vk and own NULL then).
 */
int kiln__prep_vk_open(const struct kiln__prep_vk_want *w, struct kiln__prep_vk_got *got,
                       char (*device_name)[256], enum kiln_vk_cache_state *cache_state,
                       size_t *cache_loaded_bytes);

/*
 * The parts of kiln__prep_vk_open, for a context made beside the
 * translation (prep_vk_early.c):
 * kiln__prep_vk_extensions computes *masks as kiln__prep_vk_open does
 * (NULL, or malloc'd: the caller frees it, also on failure) and, for a
 * context kiln makes, the extra extension names (names[0..cap), at most
 * cap, borrowed from the builders) into *count; @return 0 or KILN_ENOMEM.
 * kiln__prep_vk_options fills the options of a context kiln makes for
 * `w`, without extra extensions. kiln__prep_vk_describe fills the
 * summary's device name and pipelines.vkc state from `vk`.
 */
int kiln__prep_vk_extensions(const struct kiln__prep_vk_want *w, uint64_t **masks,
                             const char **names, uint32_t cap, uint32_t *count);
void kiln__prep_vk_options(const struct kiln__prep_vk_want *w, struct kiln_vk_options *vopt);
void kiln__prep_vk_describe(struct kiln_vk *vk, char (*device_name)[256],
                            enum kiln_vk_cache_state *cache_state, size_t *cache_loaded_bytes);

/* Where kiln__prep_vk_early_finish writes what the context is and took:
 * the fields of the same names in kiln_prepare_summary and
 * kiln_start_summary (KILN__PREP_VK_REPORT(summary)). */
struct kiln__prep_vk_report {
    char (*device)[256];
    enum kiln_vk_cache_state *cache_state;
    size_t *cache_loaded_bytes;
    uint64_t *vulkan_ns;
    uint64_t *overlap_ns;
};
#define KILN__PREP_VK_REPORT(s)                                                       \
    ((struct kiln__prep_vk_report){.device = &(s)->device,                            \
                                   .cache_state = &(s)->vk_cache_state,               \
                                   .cache_loaded_bytes = &(s)->vk_cache_loaded_bytes, \
                                   .vulkan_ns = &(s)->vulkan_ns,                      \
                                   .overlap_ns = &(s)->vulkan_overlap_ns})

/*
 * The Vulkan context of a run made beside its first phase (prep_vk_early.c;
 * kiln_prepare's translation, kiln_warm_start's reading of the records):
 * kiln__prep_vk_early_start starts making the context
 * of `w` (its items are not read yet) on a thread of kiln's own, which
 * makes the instance and chooses the device, then waits for the run's
 * items. kiln__prep_vk_early_finish hands them over (w with its items),
 * waits for the context and fills got (as kiln__prep_vk_open) and the
 * report's device, pipelines.vkc state, vulkan_ns (the context's own
 * time) and overlap_ns (of it, what the run did not wait for);
 * when no thread was started it makes the context here, as before.
 * kiln__prep_vk_early_abandon stops it (a run that ends before its
 * pipelines): the device is never made, the thread joined. Each is
 * called once, on the run's thread; after finish, abandon is a no-op.
 */
struct kiln__prep_vk_early {
    const struct kiln__prep_vk_want *want;
    pthread_t thread;
    bool started; /* a thread runs: finish or abandon joins it */
    pthread_mutex_t lock;
    pthread_cond_t cond;
    /* Under lock: 0 waiting for the items, 1 handed over, -1 abandoned. */
    int state;
    bool waiting; /* the thread is in its late callback */
    /* The hand-over: the extra extension names. */
    const char *names[64];
    uint32_t nnames;
    /* Called on the run's thread by finish once the items' extensions are
     * known (masks as got->masks), right before the device is made (after
     * it without a thread): the run greets its isolated workers there. */
    void (*extensions_known)(void *user, const uint64_t *masks);
    void *extensions_user;
    /* Written by the thread, read after the join. */
    struct kiln_vk *vk;
    int rc;
    char detail[KILN__ERRMSG_MAX]; /* the thread's logged failure, or "" */
    uint64_t before_ns, after_ns;  /* its own time before and after the wait */
};
void kiln__prep_vk_early_start(struct kiln__prep_vk_early *e, const struct kiln__prep_vk_want *w);
int kiln__prep_vk_early_finish(struct kiln__prep_vk_early *e, const struct kiln__prep_vk_want *w,
                               struct kiln__prep_vk_got *got, const struct kiln__prep_vk_report *r);
void kiln__prep_vk_early_abandon(struct kiln__prep_vk_early *e);

/* Test hooks (0 outside tests): kiln__prep_test_vk_serial makes the
 * context after the translation, as before (the negative control), and
 * kiln__prep_test_vk_begun counts the contexts whose making began. */
extern bool kiln__prep_test_vk_serial;
extern _Atomic uint64_t kiln__prep_test_vk_begun;

/* The builder of state kind `kind`: the first in `builders`, or NULL
 * (prep_vk.c). */
const struct kiln_builder *kiln__prep_builder_for(const struct kiln_builder *builders,
                                                  size_t nbuilders, uint32_t kind);

/*
 * Which of each builder's device extensions the `n` items to build need:
 * (*masks)[b] has bit i set when some item of builder b's state kind needs
 * builders[b].device_extensions[i] (kiln_builder.extensions_needed; every
 * bit for a builder without it). Reads each payload's table and state
 * only, on the calling thread; items without a payload, or whose payload
 * does not read, are left out (their build refuses them).
 * @return 0 with a malloc'd array of `nbuilders` (NULL with none; free
 * it), or KILN_ENOMEM.
 */
int kiln__prep_needed_extensions(const struct kiln_builder *builders, size_t nbuilders,
                                 const struct kiln__prep_item *items, size_t n, uint64_t **masks);

/*
 * Collects the device extensions the builders ask for
 * (kiln_builder.device_extensions) into names[0..cap), each once: for
 * builder b only those whose bit is set in masks[b], or all with `masks`
 * NULL. @return how many were put there.
 */
uint32_t kiln__prep_builder_extensions(const struct kiln_builder *builders, size_t nbuilders,
                                       const uint64_t *masks, const char **names, uint32_t cap);

/*
 * Builds the pipeline of every item whose payload is set, on a pool of
 * `workers`, each through the builder for its state kind, reporting
 * KILN_PREP_PHASE_PIPELINES progress.
 * @return the number of pipelines built (failures are logged, counted in
 * *failed and left in each item's status; skipped programs are counted in
 * b->skipped), or a pool error.
 */
int64_t kiln__prep_build_all(struct kiln__prep_build *b, struct kiln__prep_item *items, size_t n,
                             unsigned workers, uint64_t *failed);

/* Builds one item's pipeline as kiln__prep_build_all's workers do, on the
 * calling thread (an isolated worker's build). @return as a pool job. */
int kiln__prep_build_one(struct kiln__prep_build *b, struct kiln__prep_item *item, unsigned worker);

/* Waits for a pool's jobs, reporting `phase` progress (done counted from
 * `base`) about ten times a second. @return kiln_pool_wait's result. */
int kiln__prep_wait(struct kiln_pool *pool, uint64_t base, uint64_t total,
                    enum kiln_prep_phase phase, kiln_prep_progress_fn progress, void *user);

/* Submits j's `count` jobs to `pool` in array order (job i is `jobs` + i *
 * `stride`, run by `fn`), reporting the pipelines phase's progress while it
 * submits and until the pool is done; submitting stops at the first error.
 * The pipeline phase of both kiln__prep_build_all and
 * kiln__isolate_build_all. @return the first submit error, else
 * kiln_pool_wait's result. */
struct kiln__prep_jobs {
    kiln_pool_job_fn fn;
    void *jobs;
    size_t stride;
    size_t count;
    /* The progress counts `total` programs, of which *done have ended
     * (jobs of several programs); NULL: one program per job. */
    uint64_t total;
    const _Atomic uint64_t *done;
};
int kiln__prep_run_pipelines(struct kiln_pool *pool, const struct kiln__prep_jobs *j,
                             kiln_prep_progress_fn progress, void *user);

/* The end of the pipelines phase of kiln__prep_build_all and
 * kiln__isolate_build_all, after the pool joined: one warning for each
 * state kind that had programs skipped, with the first reason.
 * @return the pipelines built, over every kind. */
int64_t kiln__prep_pipelines_done(const struct kiln__prep_build *b);

/* Reports progress when at least 100 ms passed since *last_ns. */
void kiln__prep_tick(struct kiln_pool *pool, uint64_t base, uint64_t total,
                     enum kiln_prep_phase phase, kiln_prep_progress_fn progress, void *user,
                     uint64_t *last_ns);

#endif /* KILN_PREP_INTERNAL_H */
