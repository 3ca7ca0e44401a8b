/*
 * isolate_internal.h - isolation (driver compiles in worker processes):
 * the frames parent and worker exchange, the parent's pipeline phase, and
 * the platform's process and pipe calls. Private to src/prep.
 */
#ifndef KILN_ISOLATE_INTERNAL_H
#define KILN_ISOLATE_INTERNAL_H

#include "prep_internal.h"

#include <stddef.h>
#include <stdint.h>

/* ---- frames ----------------------------------------------------------------
 *
 * A frame is a 16-byte head (magic, type, body length, checksum: the low
 * 32 bits of XXH3-64 over the body, all little-endian) and its body. */

#define KILN__ISO_MAGIC      0x3157494bu /* "KIW1" */
#define KILN__ISO_HEAD_BYTES 16u
#define KILN__ISO_BODY_MAX   ((uint32_t)1 << 30) /* a pipeline cache's data may be large */
/* 2: HELLO carries the device extensions; 3: JOB carries a batch; 4: START;
 * 5: HELLO's binaries flags, RESULT's from-binaries outcome, BINARIES */
#define KILN__ISO_VERSION 5u

enum kiln__iso_type {
    KILN__ISO_HELLO = 1,  /* parent: version, device, cache folder, extensions, dictionary */
    KILN__ISO_READY = 2,  /* worker: its Vulkan context's status */
    KILN__ISO_JOB = 3,    /* parent: a batch of programs (each: key, flags, name, payload) */
    KILN__ISO_RESULT = 4, /* worker: one program's status, outcome, state kind, why */
    KILN__ISO_END = 5,    /* parent: no more jobs; send the pipeline cache */
    KILN__ISO_CACHE = 6,  /* worker: its pipeline cache's data */
    /* parent, instead of a first HELLO: a HELLO body without extensions or
     * dictionary, sent to a worker started at the run's start. The worker
     * begins its Vulkan context (instance, device choice) at once and
     * reads the HELLO that follows before it makes the device. */
    KILN__ISO_START = 7,
    /* worker, before a program's RESULT: its driver binaries, captured
     * (a greeting with KILN__ISO_HELLO_KEEP_BINARIES): the program's key,
     * the device and driver (vendor, device, global key), then the tier's
     * payload (binaries.h) */
    KILN__ISO_BINARIES = 8,
};

/* What became of one program in a worker (RESULT.outcome). */
enum kiln__iso_outcome {
    KILN__ISO_BUILT = 0,
    KILN__ISO_SKIPPED = 1,
    KILN__ISO_FAILED = 2,
    KILN__ISO_BAD = 3,  /* the payload or a stage was refused before any build */
    KILN__ISO_LONE = 4, /* one module of no pipeline: nothing to build */
    /* built, made from the host tier's binaries (no compile) */
    KILN__ISO_FROM_BINARIES = 5,
};

#define KILN__ISO_JOB_VALIDATED 1u /* JOB.flags: the stages were validated already */
/* The most programs one JOB frame carries. The worker builds them in
 * order and answers one RESULT per program as each ends, so the parent
 * always knows which one a dying worker held: the first unanswered. */
#define KILN__ISO_BATCH_MAX    32u
#define KILN__ISO_HELLO_DEVICE 1u /* HELLO.flags: use the device index given */
/* HELLO.flags: make pipelines from the host tier of driver binaries
 * beneath the cache folder, read only (its extension enabled) */
#define KILN__ISO_HELLO_BINARIES 2u
/* HELLO.flags: and capture the binaries of each whole pipeline compiled,
 * sent to the parent (BINARIES), which keeps them */
#define KILN__ISO_HELLO_KEEP_BINARIES 4u

struct kiln__iso_head {
    uint32_t type;
    uint32_t size; /* the body's length */
    uint32_t check;
};

/* Writes a frame head for `body` into `out`. */
void kiln__iso_head_put(uint8_t out[KILN__ISO_HEAD_BYTES], uint32_t type, const void *body,
                        uint32_t size);

/* Reads a frame head. @return 0, or KILN_EFORMAT (wrong magic, unknown
 * type, a body over KILN__ISO_BODY_MAX). */
int kiln__iso_head_get(const uint8_t in[KILN__ISO_HEAD_BYTES], struct kiln__iso_head *h);

/* Checks a body against its head's checksum. @return 0 or KILN_EFORMAT. */
int kiln__iso_body_check(const struct kiln__iso_head *h, const void *body);

/* The parsed bodies. Pointers point into the body. */
struct kiln__iso_hello {
    uint32_t version;
    uint32_t flags;
    uint32_t device;
    const char *cache_dir; /* NUL-terminated in the body; "" for none */
    /* The device extensions the parent's builders found the programs need
     * (kiln__prep_needed_extensions): bit k of known_kinds set when the
     * parent had a builder for state kind k, and then those of the worker's
     * builder of kind k that are among the `nnames` NUL-terminated names
     * at `names` are enabled (kiln__iso_hello_wants); a kind the parent had
     * no builder for gets every extension its worker builder lists. */
    uint32_t known_kinds;
    uint32_t nnames;
    const char *names;
    const void *dict; /* the packing dictionary's bytes, or NULL */
    size_t dict_size;
};
struct kiln__iso_job {
    struct kiln_key key;
    uint32_t flags;
    const char *name; /* NUL-terminated in the body */
    const void *payload;
    size_t size;
};
/* A RESULT body: status, outcome and state kind (u32 each), what the
 * driver said of the build (u32 flags, KILN__ISO_FEEDBACK_*; then its
 * time, u64 ns), then the why to the body's end with its NUL. */
#define KILN__ISO_RESULT_HEAD        24u
#define KILN__ISO_FEEDBACK_VALID     1u /* creation feedback was given */
#define KILN__ISO_FEEDBACK_CACHE_HIT 2u /* ...and the driver's caches had it */
struct kiln__iso_result {
    int32_t status;
    uint32_t outcome;
    uint32_t kind;
    uint32_t feedback; /* KILN__ISO_FEEDBACK_*: a hit only with valid */
    uint64_t driver_ns;
    const char *why; /* NUL-terminated in the body */
};

/* The most extension names one greeting carries. */
#define KILN__ISO_MAX_NAMES 256u

/* Makes a greeting's body: version, flags, device, cache folder (NULL:
 * none), the extensions (known_kinds and `nnames` names, as in struct
 * kiln__iso_hello), dictionary (NULL: none). @return 0 with a malloc'd
 * *body of *size bytes, KILN_ERANGE past KILN__ISO_BODY_MAX or
 * KILN__ISO_MAX_NAMES, or KILN_ENOMEM. */
int kiln__iso_hello_make(uint32_t flags, uint32_t device, const char *cache_dir,
                         uint32_t known_kinds, const char *const *names, uint32_t nnames,
                         const void *dict, size_t dict_size, uint8_t **body, uint32_t *size);

/* Whether a worker builder of state kind `kind` enables extension `name`
 * (struct kiln__iso_hello's known_kinds and names). */
bool kiln__iso_hello_wants(const struct kiln__iso_hello *h, uint32_t kind, const char *name);

/* Each parses a body of its type. @return 0 or KILN_EFORMAT. */
int kiln__iso_hello_parse(const void *body, size_t n, struct kiln__iso_hello *out);
int kiln__iso_result_parse(const void *body, size_t n, struct kiln__iso_result *out);
int kiln__iso_ready_parse(const void *body, size_t n, int32_t *status, const char **why);
/* A BINARIES body: the key (hi, lo, as in a JOB), the vendor and device
 * ids, the global key's size (1..KILN__BIN_KEY_MAX) and bytes, then a
 * payload of at least one byte (*payload points into the body; the tier's
 * parser checks it). kiln__iso_binaries_make @return 0 with a malloc'd
 * *body, KILN_ERANGE (a size out of range) or KILN_ENOMEM. */
#define KILN__ISO_BINARIES_HEAD 28u /* the fixed part, before the global key */
int kiln__iso_binaries_make(struct kiln_key key, const struct kiln__bin_global *driver,
                            const void *payload, size_t size, uint8_t **body, uint32_t *n);
int kiln__iso_binaries_parse(const void *body, size_t n, struct kiln_key *key,
                             struct kiln__bin_global *driver, const void **payload, size_t *size);

/* A JOB body: a count, then per program its key, flags, name length,
 * payload length, name with its NUL and payload. kiln__iso_batch_make
 * @return 0 with a malloc'd *body, KILN_ERANGE (no program, more than
 * KILN__ISO_BATCH_MAX, past KILN__ISO_BODY_MAX) or KILN_ENOMEM.
 * kiln__iso_batch_parse fills out[0..*count) (count at most `cap`, at
 * least 1, every payload non-empty). @return 0 or KILN_EFORMAT. */
int kiln__iso_batch_make(const struct kiln__iso_job *jobs, uint32_t count, uint8_t **body,
                         uint32_t *size);
int kiln__iso_batch_parse(const void *body, size_t n, struct kiln__iso_job *out, uint32_t cap,
                          uint32_t *count);

/* ---- the parent's side ---------------------------------------------------- */

/* Checks the isolation options against the rest of a preparation's.
 * @return 0 or KILN_EINVAL (logged). */
int kiln__isolate_check(const struct kiln_isolate_options *iso, bool on_pipeline);

/* What workers need besides the pipeline phase's build. */
struct kiln__isolate_run {
    const struct kiln_isolate_options *iso;
    bool use_device_index;
    unsigned device;
    const char *cache_dir;
    /* The workers make pipelines from the host tier's binaries where it
     * holds them (read only), and with keep_binaries capture those of what
     * they compile and send them here, where the run's tier keeps them. */
    bool binaries;
    bool keep_binaries;
    /* The device extensions sent to every worker (kiln__prep_isolate_extensions):
     * the state kinds this process has builders for (0: none, and the
     * workers enable every extension of theirs) and the names they need. */
    uint32_t ext_known_kinds;
    uint32_t next_names;
    const char *ext_names[KILN__ISO_MAX_NAMES];
    /* The mean build on this driver in its last run (the build ledger's
     * run record: driver time over pipelines with feedback), for the
     * sizing rule before this run timed a build; 0: not known. */
    uint64_t build_hint_ns;
    /* What making this process's own Vulkan context took (a worker's start
     * makes the same), for the sizing rule before a start ended; 0: not
     * known (the application's context). With early workers, only the
     * part of it the run waited for (a started worker's context is begun
     * too: its visible start is the rest). */
    uint64_t start_hint_ns;
    /* Workers started with the run (kiln__isolate_early_begin), taken
     * before any other is started; NULL: none. */
    struct kiln__isolate_early *early;
};

/*
 * Worker processes started at the run's start, beside the translation
 * (isolate.c): as many as the sizing rule starts with nothing timed
 * (kiln__iso_worth_starting with `programs` left and the defaults), at
 * most the threads, the CPUs or isolate->workers, none with the tuning's
 * serial starts. Each is sent START, so its Vulkan instance and device
 * choice are made while the run translates. kiln__isolate_early_begin
 * @return 0 with *out (NULL: none started), or KILN_ENOMEM.
 *
 * kiln__isolate_early_greet: once the run knows the greeting (run's
 * device, cache folder and ext_* fields, the dictionary `dict`), right
 * before the run makes its own device, the spawner thread sends that
 * HELLO to every early worker, so each makes its device beside the
 * parent's; the pipeline phase then only reads their READY. Called once,
 * on the run's thread; it does not wait for the sends. A no-op for NULL
 * or under the tuning's late_greeting (then the phase greets them, as
 * before). @return 0, or KILN_ENOMEM / KILN_ERANGE when the greeting
 * could not be made (the phase then greets them).
 *
 * kiln__isolate_early_end ends those the phase did not take and then the
 * thread that started them all (the PR_SET_PDEATHSIG rule), after
 * kiln__isolate_build_all.
 */
struct kiln__isolate_early;
struct kiln__isolate_early_want {
    const struct kiln_isolate_options *iso;
    bool use_device_index;
    unsigned device;
    const char *cache_dir;
    bool background;
    size_t programs;
    unsigned workers; /* the run's threads */
};
int kiln__isolate_early_begin(const struct kiln__isolate_early_want *w,
                              struct kiln__isolate_early **out);
/* How many it started (and sent START). */
int kiln__isolate_early_greet(struct kiln__isolate_early *e, const struct kiln__isolate_run *run,
                              const struct kiln_pack_dict *dict);
unsigned kiln__isolate_early_started(const struct kiln__isolate_early *e);
void kiln__isolate_early_end(struct kiln__isolate_early *e);

/* Fills run's ext_* fields from the phase's builders and their masks
 * (kiln__prep_needed_extensions; NULL: nothing known). In prep_vk.c, beside
 * the rest of the extension code. */
void kiln__prep_isolate_extensions(const struct kiln_builder *builders, size_t nbuilders,
                                   const uint64_t *masks, struct kiln__isolate_run *run);

/*
 * What a run (kiln_prepare, kiln_warm_start) begins beside its first phase
 * (prep_vk_early.c): its Vulkan context and, with isolation, its first
 * worker processes, greeted beside its own device. KILN__PREP_EARLY_INIT
 * sets it up in place from the run's options `o` (either kind);
 * kiln__prep_early_context begins the context (none with no_vulkan);
 * kiln__prep_early_workers starts the workers (none without isolation,
 * Vulkan or programs); kiln__prep_early_finish finishes the context with
 * the run's items (w), greeting the workers with the dictionary `dict`
 * and the extensions as soon as those are known, beside the run's own
 * device (kiln__prep_vk_early_finish's extensions_known);
 * kiln__prep_early_end, on every way out, abandons a context never
 * finished and ends the workers the phase did not take. All on the run's
 * thread.
 */
struct kiln__prep_early {
    struct kiln__prep_vk_want want; /* the context's, before the items are known */
    struct kiln__prep_vk_early vk;
    struct kiln__isolate_run run;      /* the isolated phase's (run.early: the workers) */
    const struct kiln_pack_dict *dict; /* the greeting's, set by finish */
    bool no_vulkan;
};
#define KILN__PREP_EARLY_INIT(e, o)                                                      \
    do {                                                                                 \
        (e)->want = KILN__PREP_VK_WANT(o, NULL, 0);                                      \
        (e)->vk = (struct kiln__prep_vk_early){.started = false};                        \
        (e)->run = (struct kiln__isolate_run){.iso = (o)->isolate,                       \
                                              .use_device_index = (o)->use_device_index, \
                                              .device = (o)->device,                     \
                                              .cache_dir = (o)->cache_dir};              \
        (e)->dict = NULL;                                                                \
        (e)->no_vulkan = (o)->no_vulkan;                                                 \
    } while (0)
void kiln__prep_early_context(struct kiln__prep_early *e);
void kiln__prep_early_workers(struct kiln__prep_early *e, bool background, size_t programs,
                              unsigned workers);
int kiln__prep_early_finish(struct kiln__prep_early *e, const struct kiln__prep_vk_want *w,
                            const struct kiln_pack_dict *dict, struct kiln__prep_vk_got *got,
                            const struct kiln__prep_vk_report *r);
void kiln__prep_early_end(struct kiln__prep_early *e);

/* What the workers of a phase did (the summaries' isolated_* fields). */
struct kiln__isolate_stats {
    uint64_t workers_started;  /* worker processes that answered their greeting */
    uint64_t batches;          /* JOB frames sent */
    uint64_t resent;           /* programs sent again after their batch's worker died */
    uint64_t early_timeouts;   /* programs killed at the learned limit, under the fixed one */
    unsigned learned_limit_ms; /* the learned limit over all builds at the end (0: none) */
    uint64_t early_taken;      /* of workers_started, those started with the run */
};
/* Copies them into a summary's isolated_* fields (kiln_prepare_summary and
 * kiln_start_summary alike). */
#define KILN__ISOLATE_STATS_TO(s, st)                         \
    do {                                                      \
        (s)->isolated_workers = (st)->workers_started;        \
        (s)->isolated_batches = (st)->batches;                \
        (s)->isolated_resent = (st)->resent;                  \
        (s)->isolated_early_timeouts = (st)->early_timeouts;  \
        (s)->isolated_time_limit_ms = (st)->learned_limit_ms; \
        (s)->isolated_early_workers = (st)->early_taken;      \
    } while (0)

/*
 * kiln__prep_build_all in worker processes: builds every item whose payload
 * is set, counting outcomes in `b` as the in-process phase does (a worker
 * that dies or passes the time limit fails its item with KILN_ECRASH or
 * KILN_ETIMEDOUT), then merges the workers' pipeline caches into b->vk's.
 * @return the number of pipelines built, or a pool error.
 */
int64_t kiln__isolate_build_all(struct kiln__prep_build *b, const struct kiln__isolate_run *run,
                                struct kiln__prep_item *items, size_t n, unsigned workers,
                                uint64_t *failed, struct kiln__isolate_stats *stats);

/* ---- the parent's rules (isolate_plan.c) -----------------------------------
 *
 * How many programs one message carries, when one more worker is started,
 * and how long a program may take: pure functions of what the phase knows,
 * so that tests check them without processes. */

/* Cuts `n` programs of payload sizes `sizes` (larger first, as the phase
 * orders them) into batches for `workers` workers: writes each batch's
 * first index into `first` (n entries at most) and @return the number of
 * batches. A batch gathers programs while their payload bytes, the
 * expected cost, stay under the run's total / (workers x
 * KILN__ISO_BATCHES_PER_WORKER), so heavy programs go one at a time,
 * cheap ones many together (up to KILN__ISO_BATCH_MAX), and every worker
 * can still get several batches. `fixed` > 0: that many per batch. */
#define KILN__ISO_BATCHES_PER_WORKER 8u
size_t kiln__iso_batches(const size_t *sizes, size_t n, unsigned workers, unsigned fixed,
                         size_t *first);

/* Whether to start one more worker, with `left` programs no worker has
 * received, `running` workers running or starting, a mean build of
 * `build_ns` and the slowest worker start seen so far `start_ns` (the
 * callers pass defaults, KILN__ISO_DEFAULT_*, while nothing was timed):
 * the first always (when there is work); another only while
 * left x build_ns / running >= 2 x start_ns, the work each running worker
 * has left paying twice over for the start of one more (isolate_plan.c's
 * design comment says why). The caller caps the count at its threads. */
bool kiln__iso_worth_starting(size_t left, unsigned running, uint64_t build_ns, uint64_t start_ns);

/* What the sizing rule assumes before this run timed anything: a build
 * (unless the build ledger knows this driver's: kiln__isolate_run's
 * build_hint_ns) and a worker's start (a process and a Vulkan device:
 * about 100 ms on a discrete GPU's driver, less on lavapipe; unless the
 * parent timed its own context: start_hint_ns). */
#define KILN__ISO_DEFAULT_BUILD_NS 10000000u  /* 10 ms */
#define KILN__ISO_DEFAULT_START_NS 100000000u /* 100 ms */

/* Build times seen so far, per memory class (kiln__prep_memory_class) and
 * over all: how many took under 2^(b+1) microseconds, per bucket b.
 * Updated by many threads at once (atomics). Zero-initialise. */
#define KILN__ISO_TIME_BUCKETS 32
struct kiln__iso_times {
    _Atomic uint32_t hist[KILN__MEMORY_CLASSES + 1][KILN__ISO_TIME_BUCKETS];
    _Atomic uint64_t sum_ns, count;
};
void kiln__iso_times_note(struct kiln__iso_times *t, unsigned cls, uint64_t ns);

/* The learned per-program limit: K x the 99th percentile (its bucket's
 * upper bound) of the class's builds when it has `samples` of them, else
 * of all builds when they are that many, never under `floor_ms` nor over
 * `cap_ms`. @return the limit in ms, or 0 when too few builds were seen
 * (the cap applies); *seen: the builds it was learned from. */
#define KILN__ISO_LIMIT_K 10u
unsigned kiln__iso_times_limit(const struct kiln__iso_times *t, unsigned cls, unsigned samples,
                               unsigned floor_ms, unsigned cap_ms, uint64_t *seen);

/* Called right before each pipeline build, with the program's name. An
 * empty function in libkiln (prep_build_hook.c); the test build's
 * kiln-faults command links prep_fault.c's instead, which crashes or hangs
 * the process when $KILN_TEST_FAULT names this program ("crash:NAME",
 * "abort:NAME", "hang:NAME"). */
void kiln__prep_before_build(const char *name);

/* How the parent batches, times and starts isolated builds, for tests:
 * every field 0 means kiln's own rule (isolate.c). libkiln's hook
 * (prep_build_hook.c) leaves them 0; kiln-faults' (prep_fault.c) reads
 * $KILN_TEST_ISOLATE, e.g. "batch=12,floor=1000,samples=1": the programs
 * per batch, the learned time limit's floor in ms, and the builds it needs
 * seen before it applies; "workers=N": at most N workers whatever the
 * CPUs; "build_ms=N": the mean build the sizing rule assumes, measured or
 * not; "serial=1": one worker start at a time (the
 * negative control of parallel starts); "start_delay=N": each worker
 * sleeps N ms before it makes its Vulkan context, and prints when on
 * stderr ("start delay in process P from T0 to T1 ms", kiln_now_ns), and
 * the parent's first guess of a start (start_hint_ns) counts it, as it
 * would a slower driver's; "vk_delay=N": kiln_prepare's own device (the
 * late part of the context made beside the translation) sleeps N ms
 * before it is made, printing "device delay in process P from T0 to T1
 * ms", a slow driver's parent beside its slow workers; "late_greeting=1":
 * early workers are greeted by the pipeline phase, not beside the
 * parent's device (the negative control of kiln__isolate_early_greet). */
struct kiln__iso_tuning {
    unsigned batch;
    unsigned floor_ms;
    unsigned samples;
    unsigned workers;
    unsigned build_ms;
    unsigned serial;
    unsigned start_delay_ms;
    unsigned vk_delay_ms;
    unsigned late_greeting;
};
void kiln__prep_isolate_tuning(struct kiln__iso_tuning *t);

/* The name the fault gives a worker's greeting: "hang:(greeting)" makes a
 * worker hang before it answers, "crash:(greeting)" die; the hook called
 * with it also sleeps the tuning's start_delay. */
#define KILN__PREP_FAULT_GREETING "(greeting)"

/* The name the hook is called with in kiln_prepare's own process right
 * before its device is made (prep_vk_early.c): the fault sleeps the
 * tuning's vk_delay there. */
#define KILN__PREP_FAULT_DEVICE "(device)"

/* The same for a translation (kiln_translate), empty in libkiln too: in
 * kiln-faults it hangs, heeding no stop, when $KILN_TEST_FAULT is
 * "hang-translate:SOURCE" for this source's name. */
void kiln__prep_before_translate(const char *name);

/* ---- the platform's calls (isolate_unix.c, isolate_win.c) ----------------- */

struct kiln__iso_proc;

/* Starts argv with a two-way channel on its standard input and output and
 * no other inherited descriptor or handle (a socketpair on POSIX systems,
 * a named pipe on Windows). `background`: the run is in background mode
 * (POSIX children inherit the calling pool thread's priority; Windows
 * children get the idle priority class, and the worker then enters
 * background mode itself, kiln__iso_worker_init). @return 0 or the error. */
int kiln__iso_spawn(const char *const *argv, bool background, struct kiln__iso_proc **out);

/* The child's process id, for log lines. */
long kiln__iso_pid(const struct kiln__iso_proc *p);

/* Sends or receives exactly n bytes by `deadline_ns` (kiln_now_ns).
 * @return 0, KILN_ETIMEDOUT, KILN_ECRASH (the child closed its end or
 * died), or an I/O error. */
int kiln__iso_send(struct kiln__iso_proc *p, const void *buf, size_t n, uint64_t deadline_ns);
int kiln__iso_recv(struct kiln__iso_proc *p, void *buf, size_t n, uint64_t deadline_ns);

/* Ends the child: waits up to grace_ms for it to exit, kills it after (0:
 * kills at once), reaps it, describes how it ended in `how` ("exited with
 * code 0", "killed by signal 11 (SIGSEGV)") and frees p. NULL is a no-op. */
void kiln__iso_end(struct kiln__iso_proc *p, unsigned grace_ms, char *how, size_t cap);

/* The worker's reads and writes on its descriptors. @return 0,
 * KILN_ECANCELED at the end of input before any byte, KILN_EIO_SHORTREAD
 * in the middle of a read, or an I/O error. */
int kiln__iso_fd_read(int fd, void *buf, size_t n);
int kiln__iso_fd_write(int fd, const void *buf, size_t n);

/* Prepares the worker's process: on Windows, no error box on a crash (the
 * process ends at once, with its exception code), and background mode
 * (CPU, I/O and memory priority) when started in the idle priority class.
 * A no-op elsewhere. */
void kiln__iso_worker_init(void);

/* Never returns (the test-only hang). */
void kiln__iso_sleep_forever(void);

/* Ends the process as a driver's crash would, as the parent sees it (the
 * test-only crash): SIGSEGV by its default action, past any sanitizer's
 * handler; on Windows an unhandled access violation with no error box
 * (exit code 0xC0000005). Never returns. */
void kiln__iso_crash_now(void);

#endif /* KILN_ISOLATE_INTERNAL_H */
