/*
 * pool.c - the worker pool: fixed threads, a bounded queue, counters and
 * cancellation.
 *
 * Design. One mutex guards the ring of pending jobs and every counter, so a
 * progress snapshot is consistent (done + dropped + queued + running ==
 * submitted at every moment the lock is free). Three condition variables:
 * `has_job` wakes workers, `has_room` wakes blocked submitters, `idle` wakes
 * waiters when the queue is empty and nothing runs. The `canceled` flag is
 * also an atomic so a submitter can fail fast without the lock; it only ever
 * goes from false to true, under the lock.
 *
 * Invariants and why they hold:
 * - A job is counted exactly once: it leaves the ring either by a worker
 *   (then `running` until it returns, then `done`) or by cancel (`dropped`);
 *   both happen under the lock.
 * - wait cannot miss the end: `idle` is broadcast under the lock by whoever
 *   makes queued == running == 0 true (the last worker to finish, or cancel).
 * - A cancelled pool never runs another job: cancel empties the ring and
 *   submit refuses under the same lock.
 * - Destroy never leaves a thread behind: it sets `stopping` and wakes every
 *   worker; a worker exits only when the ring is empty and `stopping` is set.
 * - With a memory budget (budget.c), a worker that finds a job but sees the
 *   counted memory near the budget leaves it in the ring and looks again
 *   when a job ends (`budget_freed`) or a few milliseconds later, but only
 *   while another job runs: the check of `running` and the take happen
 *   under one hold of the lock, so a job is always running or being
 *   taken, and the queue order is kept. With a memory model the job's
 *   prediction is asked at that moment, under the lock, so every
 *   correction observed so far counts; a sampler thread reads the counted
 *   memory every few milliseconds while jobs run, so a job's share of it
 *   is seen while it lasts, not only at its ends.
 * - With an executor there are no threads: each job worked is run under a
 *   worker index taken from the `free_index` stack (so indexes stay unique
 *   among jobs running at once, as with threads), by a drain task the
 *   executor runs or by a thread in wait or a blocked submit. A drain
 *   task runs until the queue is empty and gives its index back under the
 *   same hold of the lock that saw the queue empty, so a job queued then
 *   is either seen by it or finds the index free and a new task spawned.
 *   `pending` counts tasks taken but not started. Destroy waits until
 *   every index is back (the jobs are the caller's), but not for pending
 *   tasks, which may be queued behind the destroying thread itself: it
 *   marks the pool orphaned and the last of them frees it, touching
 *   nothing else.
 */
#include "kiln_internal.h"
#include "pool_internal.h"

#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

struct pool_job {
    kiln_pool_job_fn fn;
    void *arg;
};

struct pool_worker {
    struct kiln_pool *pool;
    pthread_t thread;
    unsigned index;
};

struct kiln_pool {
    pthread_mutex_t lock;
    pthread_cond_t has_job;
    pthread_cond_t has_room;
    pthread_cond_t idle;
    /* With a memory model and threads: a thread that reads the counted
     * memory while jobs run, so a job's growth is seen while it lasts;
     * woken to stop. */
    pthread_cond_t sampler_wake;
    pthread_cond_t budget_freed; /* a job ended: held workers look again */
    pthread_t sampler;           /* has_sampler: started */

    struct pool_job *ring;
    size_t capacity;
    size_t head; /* next job to take */
    size_t count;

    uint64_t submitted;
    uint64_t done;
    uint64_t failed;
    uint64_t dropped;
    unsigned running;
    atomic_bool canceled;
    bool stopping;

    unsigned nworkers;
    struct pool_worker *workers;

    struct kiln__budget budget; /* limit 0: none */
    bool background;
    bool has_sampler;

    /* With an executor (kiln_pool_options.executor): no threads; drain
     * tasks run jobs until the queue is empty. */
    bool use_executor;
    struct kiln_executor executor;
    unsigned pending;     /* drain tasks the executor took that have not started */
    unsigned *free_index; /* worker indexes no drain task holds (a stack) */
    unsigned nfree;
    pthread_cond_t drained; /* every index is free */
    bool orphaned;          /* destroyed while tasks were pending: the last one frees it */
};

/* How long a worker held back by the budget waits at most before it looks
 * again (a job's end wakes it sooner). */
#define BUDGET_RECHECK_NS 5000000L

/* The monotonic clock `ns` nanoseconds from now (under one second), for
 * timed waits on the pool's conditions (made with CLOCK_MONOTONIC). */
static struct timespec after_ns(long ns)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    t.tv_nsec += ns;
    if (t.tv_nsec >= 1000000000L) {
        t.tv_sec++;
        t.tv_nsec -= 1000000000L;
    }
    return t;
}

/* A job with a budget ended: its reading and, with a memory model, what it
 * was seen to need, told to the model outside the lock before the job
 * counts as done (so a waiter sees every observe made). */
static void end_budget(struct kiln_pool *pool, unsigned index, void *arg)
{
    uint64_t rss = kiln_pool_resident_bytes(), predicted, grown;
    pthread_mutex_lock(&pool->lock);
    kiln__budget_end(&pool->budget, index, rss, &predicted, &grown);
    bool tell = pool->budget.has_model && pool->budget.model.observe;
    pthread_mutex_unlock(&pool->lock);
    if (tell)
        pool->budget.model.observe(pool->budget.model.user, arg, predicted, grown);
}

/*
 * Takes the next job and runs it as worker `index`, unlocking the pool
 * meanwhile; the caller holds the lock. With a memory budget near its
 * limit it may instead wait a little and take nothing.
 * @return false when the queue was empty.
 */
static bool run_next(struct kiln_pool *pool, unsigned index)
{
    if (pool->count == 0)
        return false;
    if (pool->budget.limit) {
        /* Read outside the lock: other workers go on meanwhile. */
        pthread_mutex_unlock(&pool->lock);
        uint64_t rss = kiln_pool_resident_bytes();
        pthread_mutex_lock(&pool->lock);
        kiln__budget_sample(&pool->budget, rss);
        if (pool->count == 0)
            return false;
        uint64_t need = kiln__budget_need(&pool->budget, pool->ring[pool->head].arg);
        if (pool->running > 0 && kiln__budget_hold(&pool->budget, pool->running, rss, need)) {
            struct timespec until = after_ns(BUDGET_RECHECK_NS);
            pthread_cond_timedwait(&pool->budget_freed, &pool->lock, &until);
            return true; /* look again: a job may have ended meanwhile */
        }
        kiln__budget_start(&pool->budget, index, rss, need);
    }
    struct pool_job job = pool->ring[pool->head];
    pool->head = (pool->head + 1) % pool->capacity;
    pool->count--;
    pool->running++;
    pthread_cond_signal(&pool->has_room);
    pthread_mutex_unlock(&pool->lock);

    int rc = job.fn(job.arg, index);
    if (pool->budget.limit)
        end_budget(pool, index, job.arg);

    pthread_mutex_lock(&pool->lock);
    pool->running--;
    pool->done++;
    if (rc < 0)
        pool->failed++;
    if (pool->budget.limit)
        pthread_cond_broadcast(&pool->budget_freed); /* held workers look again */
    if (pool->count == 0 && pool->running == 0)
        pthread_cond_broadcast(&pool->idle);
    return true;
}

static void *worker_main(void *p)
{
    struct pool_worker *w = p;
    struct kiln_pool *pool = w->pool;
    if (pool->background) {
        int brc = kiln__pool_thread_background();
        if (brc < 0 && w->index == 0)
            KILN_INFO("pool", "background priority only in part: %s", kiln_strerror(brc));
    }

    pthread_mutex_lock(&pool->lock);
    for (;;) {
        while (pool->count == 0 && !pool->stopping)
            pthread_cond_wait(&pool->has_job, &pool->lock);
        if (pool->count == 0)
            break; /* stopping, nothing left */
        run_next(pool, w->index);
    }
    pthread_mutex_unlock(&pool->lock);
    return NULL;
}

/* ---- the executor's drain tasks ----------------------------------------- */

/*
 * Runs jobs on the calling thread under a free worker index until the
 * queue is empty (or, with `one`, after one job); the caller holds the
 * lock. @return whether an index was free.
 */
static bool drain_here(struct kiln_pool *pool, bool one)
{
    if (pool->nfree == 0)
        return false;
    unsigned index = pool->free_index[--pool->nfree];
    while (run_next(pool, index) && !one)
        ;
    pool->free_index[pool->nfree++] = index;
    if (pool->nfree == pool->nworkers)
        pthread_cond_broadcast(&pool->drained);
    return true;
}

static void free_pool(struct kiln_pool *pool);

static void drain_task(void *p)
{
    struct kiln_pool *pool = p;
    pthread_mutex_lock(&pool->lock);
    pool->pending--;
    if (pool->orphaned) {
        /* Started after kiln_pool_destroy: nothing to run, maybe the pool
         * to free. */
        bool last = pool->pending == 0;
        pthread_mutex_unlock(&pool->lock);
        if (last)
            free_pool(pool);
        return;
    }
    drain_here(pool, false); /* none free: the holders take the jobs */
    pthread_mutex_unlock(&pool->lock);
}

/*
 * After a job was queued: hands the executor one more drain task while
 * fewer run or wait than there are workers and jobs. A task it refuses is
 * run here, on the calling thread (never lost, never waited for). The
 * caller holds the lock; it is released around submit, which may run the
 * task inline.
 */
static void drain_spawn(struct kiln_pool *pool)
{
    unsigned busy = pool->nworkers - pool->nfree;
    if (pool->pending + busy >= pool->nworkers || pool->pending >= pool->count)
        return;
    pool->pending++;
    pthread_mutex_unlock(&pool->lock);
    int rc = pool->executor.submit(drain_task, pool, pool->executor.user);
    pthread_mutex_lock(&pool->lock);
    if (rc == 0)
        return;
    pool->pending--;
    KILN_DEBUG("pool", "the executor refused a task (%d); the calling thread runs the jobs", rc);
    drain_here(pool, false);
}

/* Drops every pending job; the caller holds the lock. */
static void drop_pending(struct kiln_pool *pool)
{
    pool->dropped += pool->count;
    pool->count = 0;
    pool->head = 0;
    pthread_cond_broadcast(&pool->has_room);
    if (pool->running == 0)
        pthread_cond_broadcast(&pool->idle);
}

/* How often the sampler reads the counted memory while a job runs. */
#define SAMPLE_NS 5000000L

static void *sampler_main(void *p)
{
    struct kiln_pool *pool = p;
    pthread_mutex_lock(&pool->lock);
    while (!pool->stopping) {
        struct timespec until = after_ns(SAMPLE_NS);
        pthread_cond_timedwait(&pool->sampler_wake, &pool->lock, &until);
        if (pool->stopping || pool->running == 0)
            continue;
        pthread_mutex_unlock(&pool->lock);
        uint64_t rss = kiln_pool_resident_bytes();
        pthread_mutex_lock(&pool->lock);
        kiln__budget_sample(&pool->budget, rss);
    }
    pthread_mutex_unlock(&pool->lock);
    return NULL;
}

static void stop_workers(struct kiln_pool *pool, unsigned started)
{
    pthread_mutex_lock(&pool->lock);
    pool->stopping = true;
    pthread_cond_broadcast(&pool->has_job);
    pthread_cond_broadcast(&pool->sampler_wake);
    pthread_mutex_unlock(&pool->lock);
    if (pool->has_sampler)
        pthread_join(pool->sampler, NULL);
    pool->has_sampler = false;
    for (unsigned i = 0; i < started; i++)
        pthread_join(pool->workers[i].thread, NULL);
}

static void free_pool(struct kiln_pool *pool)
{
    kiln__budget_free(&pool->budget);
    pthread_cond_destroy(&pool->sampler_wake);
    pthread_cond_destroy(&pool->budget_freed);
    pthread_cond_destroy(&pool->drained);
    pthread_cond_destroy(&pool->idle);
    pthread_cond_destroy(&pool->has_room);
    pthread_cond_destroy(&pool->has_job);
    pthread_mutex_destroy(&pool->lock);
    kiln__free(pool->free_index);
    kiln__free(pool->workers);
    kiln__free(pool->ring);
    kiln__free(pool);
}

int kiln_pool_create(unsigned workers, size_t queue_capacity, struct kiln_pool **out)
{
    struct kiln_pool_options o = {
        .size = sizeof(o), .workers = workers, .queue_capacity = queue_capacity};
    return kiln_pool_create_with(&o, out);
}

/* Allocates the pool and its arrays and initialises its locks. */
static int pool_new(const struct kiln_pool_options *o, unsigned workers, size_t capacity,
                    struct kiln_pool **out)
{
    struct kiln_pool *pool = kiln__calloc(1, sizeof(*pool));
    if (!pool)
        return KILN_ENOMEM;
    pool->ring = kiln__calloc(capacity, sizeof(*pool->ring));
    pool->workers = kiln__calloc(workers, sizeof(*pool->workers));
    pool->free_index = kiln__calloc(workers, sizeof(*pool->free_index));
    int rc = KILN_ENOMEM;
    if (!pool->ring || !pool->workers || !pool->free_index ||
        (rc =
             kiln__budget_init(&pool->budget, o->memory_budget == UINT64_MAX ? 0 : o->memory_budget,
                               workers, o->memory_model)) < 0) {
        kiln__free(pool->free_index);
        kiln__free(pool->ring);
        kiln__free(pool->workers);
        kiln__free(pool);
        return rc;
    }
    pool->capacity = capacity;
    pool->nworkers = workers;
    for (unsigned i = 0; i < workers; i++)
        pool->free_index[i] = workers - 1 - i; /* index 0 is taken first */
    pool->nfree = workers;
    atomic_init(&pool->canceled, false);
    pool->background = o->background;

    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    /* wait_for measures its timeout on the monotonic clock, not wall time. */
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_mutex_init(&pool->lock, NULL);
    pthread_cond_init(&pool->has_job, NULL);
    pthread_cond_init(&pool->has_room, NULL);
    pthread_cond_init(&pool->idle, &attr);
    pthread_cond_init(&pool->drained, NULL);
    pthread_cond_init(&pool->sampler_wake, &attr);
    pthread_cond_init(&pool->budget_freed, &attr);
    pthread_condattr_destroy(&attr);
    *out = pool;
    return KILN_OK;
}

static int create_with_body(const struct kiln_pool_options *o, struct kiln_pool **out)
{
    if (!out)
        return KILN_EINVAL;
    *out = NULL;
    if (!o)
        return KILN_EINVAL;
    struct kiln_pool_options opt = KILN_POOL_OPTIONS_INIT;
    KILN_TRY(KILN_STRUCT_IN(&opt, o, "kiln_pool_options"));
    o = &opt;
    struct kiln_executor ex;
    bool use_executor;
    KILN_TRY(kiln__exec_in(&ex, &use_executor, o->executor));
    unsigned workers = o->workers;
    if (workers == 0)
        return KILN_EINVAL;
    if (use_executor && ex.concurrency && workers > ex.concurrency)
        workers = ex.concurrency;
    size_t queue_capacity = o->queue_capacity ? o->queue_capacity : (size_t)workers * 4;

    struct kiln_pool *pool;
    KILN_TRY(pool_new(o, workers, queue_capacity, &pool));
    if (use_executor) {
        /* No thread: drain tasks go to the executor as jobs come. */
        pool->use_executor = true;
        pool->executor = ex;
        *out = pool;
        return KILN_OK;
    }
    for (unsigned i = 0; i < workers; i++) {
        pool->workers[i].pool = pool;
        pool->workers[i].index = i;
        if (pthread_create(&pool->workers[i].thread, NULL, worker_main, &pool->workers[i]) != 0) {
            KILN_ERROR("pool", "could not start worker thread %u of %u", i + 1, workers);
            stop_workers(pool, i);
            free_pool(pool);
            return KILN_EIO;
        }
    }
    if (pool->budget.has_model) {
        /* Without it a job's growth is read only as jobs start and end. */
        pool->has_sampler = pthread_create(&pool->sampler, NULL, sampler_main, pool) == 0;
        if (!pool->has_sampler)
            KILN_INFO("pool", "no memory sampler thread: jobs' growth read at their ends only");
    }
    *out = pool;
    return KILN_OK;
}

/* A failure's text is the thread's (kiln_last_errmsg): there is no pool. */
int kiln_pool_create_with(const struct kiln_pool_options *o, struct kiln_pool **out)
{
    uint64_t m = kiln__err_mark();
    return kiln__err_end(NULL, m, "kiln_pool_create_with", NULL, create_with_body(o, out));
}

int kiln_pool_submit(struct kiln_pool *pool, kiln_pool_job_fn fn, void *arg)
{
    if (!pool || !fn)
        return KILN_EINVAL;
    if (atomic_load_explicit(&pool->canceled, memory_order_relaxed))
        return KILN_ECANCELED;
    pthread_mutex_lock(&pool->lock);
    while (pool->count == pool->capacity && !atomic_load(&pool->canceled)) {
        /* With an executor, a full queue is worked down here while an index
         * is free: the executor may be busy with this very thread. */
        if (!(pool->use_executor && drain_here(pool, true)))
            pthread_cond_wait(&pool->has_room, &pool->lock);
    }
    if (atomic_load(&pool->canceled)) {
        pthread_mutex_unlock(&pool->lock);
        return KILN_ECANCELED;
    }
    size_t tail = (pool->head + pool->count) % pool->capacity;
    pool->ring[tail] = (struct pool_job){fn, arg};
    pool->count++;
    pool->submitted++;
    if (pool->use_executor)
        drain_spawn(pool);
    else
        pthread_cond_signal(&pool->has_job);
    pthread_mutex_unlock(&pool->lock);
    return KILN_OK;
}

void kiln_pool_cancel(struct kiln_pool *pool)
{
    if (!pool)
        return;
    pthread_mutex_lock(&pool->lock);
    if (!atomic_load(&pool->canceled)) {
        atomic_store(&pool->canceled, true);
        if (pool->count > 0)
            KILN_INFO("pool", "cancelled: %zu pending jobs dropped, %u running finish", pool->count,
                      pool->running);
    }
    drop_pending(pool);
    pthread_mutex_unlock(&pool->lock);
}

int kiln_pool_wait(struct kiln_pool *pool)
{
    if (!pool)
        return KILN_EINVAL;
    pthread_mutex_lock(&pool->lock);
    while (pool->count > 0 || pool->running > 0) {
        /* With an executor the waiting thread works too (while an index is
         * free), so jobs never wait for a task the executor has not run. */
        if (!(pool->use_executor && pool->count > 0 && drain_here(pool, false)))
            pthread_cond_wait(&pool->idle, &pool->lock);
    }
    int rc = atomic_load(&pool->canceled) ? KILN_ECANCELED : KILN_OK;
    pthread_mutex_unlock(&pool->lock);
    return rc;
}

int64_t kiln_pool_wait_for(struct kiln_pool *pool, uint64_t timeout_ns)
{
    if (!pool)
        return KILN_EINVAL;
    struct timespec deadline;
    clock_gettime(CLOCK_MONOTONIC, &deadline);
    uint64_t ns = (uint64_t)deadline.tv_nsec + timeout_ns % 1000000000u;
    deadline.tv_sec += (time_t)(timeout_ns / 1000000000u + ns / 1000000000u);
    deadline.tv_nsec = (long)(ns % 1000000000u);

    pthread_mutex_lock(&pool->lock);
    while (pool->count > 0 || pool->running > 0) {
        if (pool->use_executor && pool->count > 0 && drain_here(pool, true)) {
            struct timespec now;
            clock_gettime(CLOCK_MONOTONIC, &now);
            if (now.tv_sec > deadline.tv_sec ||
                (now.tv_sec == deadline.tv_sec && now.tv_nsec >= deadline.tv_nsec))
                break;
            continue;
        }
        if (pthread_cond_timedwait(&pool->idle, &pool->lock, &deadline) != 0)
            break; /* timed out (or an error we treat alike): report what is left */
    }
    int64_t left = (int64_t)(pool->count + pool->running);
    if (left == 0 && atomic_load(&pool->canceled))
        left = KILN_ECANCELED;
    pthread_mutex_unlock(&pool->lock);
    return left;
}

void kiln_pool_get_progress(struct kiln_pool *pool, struct kiln_pool_progress *out)
{
    if (!pool || !out || kiln__struct_out_check(out, "kiln_pool_progress") < 0)
        return;
    pthread_mutex_lock(&pool->lock);
    struct kiln_pool_progress p = {
        .size = sizeof(p),
        .submitted = pool->submitted,
        .done = pool->done,
        .failed = pool->failed,
        .dropped = pool->dropped,
        .running = pool->running,
        .queued = (unsigned)pool->count,
        .canceled = atomic_load(&pool->canceled),
    };
    pthread_mutex_unlock(&pool->lock);
    KILN_STRUCT_OUT(out, &p);
}

/* The name before 0.2, kept exported (include/kiln/pool.h). */
void kiln_pool_progress(struct kiln_pool *pool, struct kiln_pool_progress *out)
{
    kiln_pool_get_progress(pool, out);
}

unsigned kiln_pool_workers(const struct kiln_pool *pool)
{
    return pool ? pool->nworkers : 0;
}

void kiln_pool_destroy(struct kiln_pool *pool)
{
    if (!pool)
        return;
    pthread_mutex_lock(&pool->lock);
    if (pool->count > 0) {
        atomic_store(&pool->canceled, true);
        drop_pending(pool);
    }
    /* Wait for the tasks that run jobs; never for one the executor has not
     * started (it may be queued behind this very thread): the last of those
     * frees the pool instead. */
    while (pool->use_executor && pool->nfree < pool->nworkers)
        pthread_cond_wait(&pool->drained, &pool->lock);
    bool leave = pool->use_executor && pool->pending > 0;
    pool->orphaned = leave;
    pthread_mutex_unlock(&pool->lock);
    if (leave)
        return;
    stop_workers(pool, pool->use_executor ? 0 : pool->nworkers);
    bool trim = pool->budget.limit != 0;
    free_pool(pool);
    if (trim)
        kiln__pool_trim_heap();
}
