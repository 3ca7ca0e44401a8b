/*
 * kiln/pool.h - the worker pool and the policy that sizes it from the machine.
 *
 * Two parts:
 *
 * - The pool: a fixed number of worker threads taking jobs from a bounded
 *   queue. kiln_pool_submit blocks while the queue is full, so a producer
 *   never holds more than `queue_capacity` pending jobs in memory. Counters
 *   (submitted, done, failed, dropped) can be read at any time for a progress
 *   bar. kiln_pool_cancel drops every pending job; jobs already running
 *   finish. kiln_pool_wait waits until every submitted job has finished or
 *   been dropped.
 *
 * - The policy: kiln_pool_policy is a pure function from what the machine
 *   offers (struct kiln_pool_machine, filled by kiln_pool_probe) and what the
 *   caller allows (struct kiln_pool_limits) to a worker count and a one-line
 *   reason. It never gives more workers than usable CPUs, and never fewer
 *   than one.
 *
 * Typical use:
 *
 *     struct kiln_pool_machine m;
 *     kiln_pool_probe(NULL, NULL, &m);               // warns and falls back on bad files
 *     struct kiln_pool_limits lim = {.mem_per_worker = 512u << 20};
 *     struct kiln_pool_plan plan;
 *     kiln_pool_policy(&m, &lim, &plan);             // plan.reason for the log
 *     struct kiln_pool *pool;
 *     kiln_pool_create(plan.workers, 0, &pool);
 *     for (...) kiln_pool_submit(pool, build_one, item);
 *     int rc = kiln_pool_wait(pool);                 // 0 or KILN_ECANCELED
 *     kiln_pool_destroy(pool);
 *
 * The application's executor (kiln_pool_options.executor) replaces the
 * threads: the same queue, counters and worker indexes, run by tasks handed
 * to the executor and by the threads that wait.
 *
 * NULL arguments: a NULL pool, options, callback or output is KILN_EINVAL;
 * kiln_pool_workers answers 0; kiln_pool_cancel, _destroy, _get_progress
 * and (0.2) kiln_pool_work_limits do nothing.
 */
#ifndef KILN_POOL_H
#define KILN_POOL_H

#include "kiln/common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------------
 * The pool
 * ------------------------------------------------------------------------ */

/* A worker pool. Opaque. */
struct kiln_pool;

/*
 * A job. `arg` is what was submitted with it; `worker` is the index of the
 * worker thread running it, in [0, workers), so a caller can keep per-worker
 * state in an array without locks.
 * @return 0 (or any non-negative value) when the job succeeded, a negative
 * kiln error when it failed: the pool counts it in `failed` and goes on. A
 * job logs its own failure; the pool does not.
 */
typedef int (*kiln_pool_job_fn)(void *arg, unsigned worker);

/* Progress counters, read together under the pool's lock. */
struct kiln_pool_progress {
    size_t size;        /* sizeof, as KILN_POOL_PROGRESS_INIT sets it (docs/abi.md) */
    uint64_t submitted; /* jobs accepted by kiln_pool_submit */
    uint64_t done;      /* jobs that ran to the end, failed ones included */
    uint64_t failed;    /* of `done`, the jobs that returned a negative value */
    uint64_t dropped;   /* jobs removed from the queue by kiln_pool_cancel, never run */
    unsigned running;   /* jobs running now */
    unsigned queued;    /* jobs waiting in the queue now */
    bool canceled;      /* kiln_pool_cancel was called */
};
#define KILN_POOL_PROGRESS_INIT KILN_STRUCT_INIT(kiln_pool_progress)

/*
 * Starts `workers` threads (at least 1) and a queue of `queue_capacity`
 * pending jobs (0: four per worker).
 * @return 0 and the pool in *pool, KILN_EINVAL for 0 workers, KILN_ENOMEM,
 * or KILN_EIO when a thread could not be started (the others are joined).
 * Thread-safe (each call makes its own pool).
 */
KILN_API int kiln_pool_create(unsigned workers, size_t queue_capacity, struct kiln_pool **pool);

/*
 * Queues one job; blocks while the queue is full.
 * @return 0, or KILN_ECANCELED once the pool is cancelled (the job is not
 * queued then; also when the cancel happens while this call waits).
 * Thread-safe. A job may submit further jobs, but with every worker blocked
 * in a full queue the pool would stop: submit from jobs only when the queue
 * has room for them.
 */
KILN_API int kiln_pool_submit(struct kiln_pool *pool, kiln_pool_job_fn fn, void *arg);

/*
 * Cancels the pool: every pending job is dropped (counted in `dropped`),
 * jobs already running finish, and later submits fail with KILN_ECANCELED.
 * Cancelling twice is harmless. Thread-safe, and may be called from a job;
 * not async-signal-safe (from a signal handler, set a flag that a thread
 * turns into this call).
 */
KILN_API void kiln_pool_cancel(struct kiln_pool *pool);

/*
 * Waits until every submitted job has finished or been dropped.
 * @return 0, or KILN_ECANCELED when the pool was cancelled (after the
 * running jobs finished). Failed jobs do not make it fail: read `failed`.
 * Thread-safe; must not be called from a job (it would wait for itself).
 * The pool can take more jobs after it returns 0.
 */
KILN_API int kiln_pool_wait(struct kiln_pool *pool);

/*
 * Like kiln_pool_wait, but returns after at most `timeout_ns` nanoseconds,
 * for a caller that redraws a progress bar while it waits.
 * @return the number of jobs still queued or running (0: all finished), or
 * KILN_ECANCELED once the pool is cancelled and nothing runs any more.
 * Thread-safe; from a job it only ever times out (the job counts as
 * running).
 */
KILN_API int64_t kiln_pool_wait_for(struct kiln_pool *pool, uint64_t timeout_ns);

/*
 * (0.2) What the memory budget expects of each job, so it can admit jobs
 * while their predicted total fits instead of assuming every job needs as
 * much as the largest seen so far (see kiln_pool_options.memory_model and
 * docs/pool.md, "The memory budget").
 */
struct kiln_pool_memory_model {
    size_t size; /* sizeof, as KILN_POOL_MEMORY_MODEL_INIT sets it (docs/abi.md) */
    /*
     * The bytes job `arg` is expected to add to the counted memory while it
     * runs; 0: unknown (the pool then uses the largest growth it saw).
     * Asked when a worker is about to take the job, under the pool's lock,
     * so a correction made by `observe` counts for every job still queued:
     * it must be quick, thread-safe and must not call the pool. A job
     * predicted at or above the budget runs alone (UINT64_MAX: "not while
     * anything else runs").
     */
    uint64_t (*predict)(void *user, void *arg);
    /*
     * Job `arg` ended: it was predicted `predicted` bytes and was seen to
     * need `grown` (the memory counted while it ran above the pool's base,
     * shared among the jobs then running in proportion to their
     * predictions; alone, its own peak growth). Called on the worker's
     * thread, outside the pool's lock, before the job counts as done; may
     * be NULL. Thread-safe as `predict` must be.
     */
    void (*observe)(void *user, void *arg, uint64_t predicted, uint64_t grown);
    void *user;
};
#define KILN_POOL_MEMORY_MODEL_INIT KILN_STRUCT_INIT(kiln_pool_memory_model)

/* What kiln_pool_create_with makes. Zeroed fields are defaults. */
struct kiln_pool_options {
    size_t size;           /* sizeof, as KILN_POOL_OPTIONS_INIT sets it (docs/abi.md) */
    unsigned workers;      /* at least 1 */
    size_t queue_capacity; /* 0: four per worker */
    /*
     * Resident bytes the pool keeps kiln (and the worker processes
     * registered with it) under: a worker does not take a job while the
     * resident memory plus the largest growth one job has shown (at least a
     * sixteenth of the budget) would pass it, unless no job runs, so at
     * least one job always runs. Jobs keep their queue order. 0: no budget.
     * See kiln_pool_default_memory_budget.
     */
    uint64_t memory_budget;
    /* Run the workers at idle priority: SCHED_IDLE (else nice 19) and the
     * idle I/O class on Linux, THREAD_MODE_BACKGROUND_BEGIN on Windows. */
    bool background;
    /*
     * (0.2) Run the jobs on the application's job system instead of
     * threads the pool starts (see struct kiln_executor; NULL: threads).
     * The pool then starts no thread: `workers` (cut to the executor's
     * concurrency; kiln_pool_workers says the result) is how many tasks
     * it hands the executor at most at once, each running jobs until the
     * queue is empty and then returning, so an idle pool holds none of the
     * executor's threads. The thread in kiln_pool_wait, kiln_pool_wait_for
     * or a kiln_pool_submit blocked on a full queue runs jobs too, so jobs
     * never wait for a task the executor has not started yet (an executor
     * whose only thread is the one waiting works), and a task the executor
     * refuses is run on the submitting thread. `background` is ignored
     * (the threads are the application's). kiln_pool_destroy waits for
     * the tasks running jobs, not for those the executor has not started
     * (the last of them frees the pool when it runs, and calls nothing).
     * Copied; its `user` must outlive every task it took.
     */
    const struct kiln_executor *executor;
    /*
     * (0.2) With a memory budget: each job's expected memory (NULL: every
     * job is taken to need the largest growth one job showed). A worker
     * then takes the next job while the pool's base plus the predictions
     * of the running jobs and of this one fit the budget, and while the
     * reading plus this one's prediction does. Copied; `user` must outlive
     * the pool. Ignored without a budget.
     */
    const struct kiln_pool_memory_model *memory_model;
};
#define KILN_POOL_OPTIONS_INIT KILN_STRUCT_INIT(kiln_pool_options)

/*
 * kiln_pool_create with a memory budget and background priority.
 * @return as kiln_pool_create (KILN_EINVAL for NULL options or 0 workers).
 * Thread-safe (each call makes its own pool).
 */
KILN_API int kiln_pool_create_with(const struct kiln_pool_options *options,
                                   struct kiln_pool **pool);

/*
 * The memory budget kiln uses when none is given: three quarters of what
 * is free to this process, min(resident + 3/4 MemAvailable, 3/4 of the
 * tightest cgroup v2 memory.max) on Linux (the cgroup part is Linux only;
 * Windows reads the available physical memory). `reason` (may be NULL)
 * gets one line saying which bound it is.
 * @return the budget in bytes, or 0 when nothing could be read (no budget).
 * Thread-safe (reads files, keeps no state).
 */
KILN_API uint64_t kiln_pool_default_memory_budget(char *reason, size_t cap);

/*
 * The memory the budget counts: this process plus every worker process
 * registered with it (kiln's isolated workers). On Linux 4.14 and later
 * each process's proportional set size (Pss of /proc/<pid>/smaps_rollup,
 * so a page they share counts once over them all), read at most every
 * 50 ms per process and followed in between by the change of its
 * resident count (/proc/<pid>/statm); else the resident count itself
 * (statm; GetProcessMemoryInfo on Windows). (Before 0.2: always the
 * resident count.)
 * @return bytes (0 when it cannot be read). Thread-safe.
 */
KILN_API uint64_t kiln_pool_resident_bytes(void);

/* Reads the counters. (Named kiln_pool_progress before 0.2, a name C++
 * took for the struct's.) Thread-safe, cheap (one lock). */
KILN_API void kiln_pool_get_progress(struct kiln_pool *pool, struct kiln_pool_progress *out);

#ifndef __cplusplus
/* Deprecated: kiln_pool_get_progress's name before 0.2, still exported for
 * programs built against 0.1; C only (in C++ it hid the struct).
 * Thread-safe. */
KILN_API void kiln_pool_progress(struct kiln_pool *pool, struct kiln_pool_progress *out)
    KILN_DEPRECATED("use kiln_pool_get_progress");
#endif

/* @return the number of worker threads (fixed at create). Thread-safe. */
KILN_API unsigned kiln_pool_workers(const struct kiln_pool *pool);

/*
 * Cancels what is still pending, waits for running jobs, joins the workers
 * and frees the pool. NULL is a no-op. Call kiln_pool_wait first to finish
 * every job instead.
 * Thread safety: any thread but a job's, and not while another thread
 * still uses the pool.
 */
KILN_API void kiln_pool_destroy(struct kiln_pool *pool);

/* ---------------------------------------------------------------------------
 * The policy
 * ------------------------------------------------------------------------ */

/* The process heap on Windows; other platforms say KILN_HEAP_DEFAULT. */
enum kiln_heap_kind {
    KILN_HEAP_DEFAULT = 0, /* not Windows: the C library's allocator, no CPU rule */
    KILN_HEAP_NT = 1,      /* Windows' NT heap: compilers queue on its lock, half the CPUs */
    KILN_HEAP_SEGMENT = 2, /* Windows' segment heap: every CPU, with the memory rule */
};

/* Bits of kiln_pool_machine.flags: what the probe could not read. */
enum {
    KILN_POOL_CPUS_UNKNOWN = 1 << 0,     /* the affinity mask could not be read */
    KILN_POOL_QUOTA_UNREADABLE = 1 << 1, /* a cpu.max (or /proc/self/cgroup) was malformed */
    KILN_POOL_MEM_UNKNOWN = 1 << 2,      /* MemAvailable could not be read */
};

/* What the machine offers this process. */
struct kiln_pool_machine {
    size_t size; /* sizeof, as KILN_POOL_MACHINE_INIT sets it (docs/abi.md) */
    /* CPUs in this process's affinity mask (sched_getaffinity); 0: unknown. */
    unsigned cpus_usable;
    /* The tightest cgroup v2 cpu.max on the way to the root: `quota_us`
     * microseconds of CPU per `period_us`. quota_us 0 means no quota. */
    uint64_t quota_us;
    uint64_t period_us;
    /* MemAvailable in bytes; 0 with KILN_POOL_MEM_UNKNOWN when unknown. */
    uint64_t mem_available;
    enum kiln_heap_kind heap;
    unsigned flags; /* KILN_POOL_*_UNKNOWN / _UNREADABLE */
};
#define KILN_POOL_MACHINE_INIT KILN_STRUCT_INIT(kiln_pool_machine)

/* What the caller allows. Zeroed fields mean "no such limit". */
struct kiln_pool_limits {
    size_t size; /* sizeof, as KILN_POOL_LIMITS_INIT sets it (docs/abi.md) */
    /* Bytes kept free for everything but the workers (the rest of the
     * process, the system). Used with mem_per_worker. */
    uint64_t mem_reserve;
    /* The memory one worker is expected to need at its peak; 0 turns the
     * memory rule off. */
    uint64_t mem_per_worker;
    /* At most this many workers; 0: no bound. */
    unsigned max_workers;
    /* Background work: at most a quarter of the CPUs (at least 1). */
    bool background;
};
#define KILN_POOL_LIMITS_INIT KILN_STRUCT_INIT(kiln_pool_limits)

/* What limited the worker count. */
enum kiln_pool_bound {
    KILN_POOL_BY_CPUS = 0,       /* the usable CPUs */
    KILN_POOL_BY_QUOTA = 1,      /* the cgroup cpu.max quota */
    KILN_POOL_BY_HEAP = 2,       /* half the CPUs for Windows' NT heap */
    KILN_POOL_BY_MEMORY = 3,     /* free memory past the reserve */
    KILN_POOL_BY_MAX = 4,        /* the caller's max_workers */
    KILN_POOL_BY_CALLER = 5,     /* the caller's own count (kiln_pool_auto_workers) */
    KILN_POOL_BY_BACKGROUND = 6, /* a quarter of the CPUs (KILN_POOL_WORK_BACKGROUND) */
};

/* The policy's answer. */
struct kiln_pool_plan {
    size_t size;                /* sizeof, as KILN_POOL_PLAN_INIT sets it (docs/abi.md) */
    unsigned workers;           /* >= 1, <= cpus */
    unsigned cpus;              /* usable CPUs after the quota (>= 1) */
    enum kiln_pool_bound bound; /* what limited `workers` */
    /* One line for the log, for example
     * "12 workers: 12 CPUs usable, 9.1 GB free at 0.5 GB per worker". */
    char reason[256];
};
#define KILN_POOL_PLAN_INIT KILN_STRUCT_INIT(kiln_pool_plan)

/*
 * The policy, a pure function of its inputs:
 *
 *   cpus    = cpus_usable (1 when unknown), cut to ceil(quota_us / period_us)
 *             when there is a quota;
 *   workers = cpus, halved (at least 1) for KILN_HEAP_NT;
 *   memory  = when mem_per_worker > 0 and memory is known: the first worker
 *             is always allowed, and one more for each mem_per_worker of
 *             mem_available past mem_reserve;
 *   background = a quarter of cpus (at least 1) when limits->background;
 *   workers = min(workers, memory, background, max_workers), at least 1.
 *
 * When the probe could not read something (machine->flags), the reason
 * says what was assumed.
 * @return 0, or KILN_EINVAL for NULL pointers. Thread-safe.
 */
KILN_API int kiln_pool_policy(const struct kiln_pool_machine *machine,
                              const struct kiln_pool_limits *limits, struct kiln_pool_plan *plan);

/*
 * Reads the machine: the affinity mask, the cgroup v2 cpu.max of this
 * process's cgroup and of each parent (the smallest quota wins), and
 * MemAvailable. `proc_root` replaces "/proc" and `cgroup_root` replaces
 * "/sys/fs/cgroup" (NULL: the real ones), so tests can point at fixture
 * folders laid out like the real ones (<proc_root>/self/cgroup,
 * <proc_root>/meminfo, <cgroup_root>/<path>/cpu.max).
 *
 * A missing cpu.max (no quota, cgroup v1) is not an error. A malformed file
 * is logged as one warning naming the file, the field is treated as
 * unknown (see machine->flags) and the probe goes on.
 * @return 0 (possibly with flags set), or KILN_EINVAL for a NULL machine.
 * Thread-safe (it reads files and keeps no state).
 */
KILN_API int kiln_pool_probe(const char *proc_root, const char *cgroup_root,
                             struct kiln_pool_machine *machine);

/* The kinds of work kiln starts threads for, each with its own limits. */
enum kiln_pool_work {
    /* Translating, packing and building pipelines: bound by CPU; a driver
     * may need 512 MiB to build one large pipeline, and 1 GiB is kept free
     * for the rest of the process and the system. */
    KILN_POOL_WORK_BUILD = 0,
    /* Reading cache records (kiln_cache_load_many): bound by I/O, so at
     * most KILN_POOL_MAX_READERS threads, each holding one read block of at
     * most 8 MiB. */
    KILN_POOL_WORK_READ = 1,
    /* KILN_POOL_WORK_BUILD in the background (kiln prepare --background):
     * at most a quarter of the usable CPUs, the rest left to the user. */
    KILN_POOL_WORK_BACKGROUND = 2,
};

/* The most threads one kiln_cache_load_many call reads with. */
#define KILN_POOL_MAX_READERS 16u

/*
 * Fills *limits with the limits kiln uses for `work` (see enum
 * kiln_pool_work); an unknown kind gets those of KILN_POOL_WORK_BUILD.
 * Pure and thread-safe.
 */
KILN_API void kiln_pool_work_limits(enum kiln_pool_work work, struct kiln_pool_limits *limits);

/*
 * The one place kiln decides how many threads to start: the preparation,
 * the warm start and the cache's loader all ask it. `requested` > 0 is the
 * caller's own count, returned as it is (cut to KILN_POOL_MAX_READERS for
 * KILN_POOL_WORK_READ) with nothing read or logged. 0 means decide: probe
 * the machine (CPUs, cgroup quota, free memory), apply the policy with
 * kiln_pool_work_limits(work), and log the reason at info level as
 * "pool: <reason>". `plan` may be NULL; for a caller's count its bound is
 * KILN_POOL_BY_CALLER and its cpus equal its workers.
 * @return the worker count (>= 1). Thread-safe.
 */
KILN_API unsigned kiln_pool_auto_workers(enum kiln_pool_work work, unsigned requested,
                                         struct kiln_pool_plan *plan);

#ifdef __cplusplus
}
#endif

#endif /* KILN_POOL_H */
