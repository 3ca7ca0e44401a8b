/*
 * test_pool.c - the worker pool: every job runs once, the queue bounds
 * submitters, counters add up, cancellation drops pending work and lets
 * running work finish.
 *
 * Jobs that must stay running while the test looks at the pool wait on a
 * gate the test opens; no case depends on timing for its result.
 */
#include "kiln_test.h"

#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

struct gate {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    bool open;
    unsigned arrived;
};

static void gate_init(struct gate *g)
{
    pthread_mutex_init(&g->lock, NULL);
    pthread_cond_init(&g->cond, NULL);
    g->open = false;
    g->arrived = 0;
}

static void gate_open(struct gate *g)
{
    pthread_mutex_lock(&g->lock);
    g->open = true;
    pthread_cond_broadcast(&g->cond);
    pthread_mutex_unlock(&g->lock);
}

static void gate_pass(struct gate *g)
{
    pthread_mutex_lock(&g->lock);
    g->arrived++;
    pthread_cond_broadcast(&g->cond);
    while (!g->open)
        pthread_cond_wait(&g->cond, &g->lock);
    pthread_mutex_unlock(&g->lock);
}

/* Waits until `n` jobs stand at the gate. */
static void gate_await(struct gate *g, unsigned n)
{
    pthread_mutex_lock(&g->lock);
    while (g->arrived < n)
        pthread_cond_wait(&g->cond, &g->lock);
    pthread_mutex_unlock(&g->lock);
}

static void gate_destroy(struct gate *g)
{
    pthread_cond_destroy(&g->cond);
    pthread_mutex_destroy(&g->lock);
}

static int gated_job(void *arg, unsigned worker)
{
    (void)worker;
    gate_pass(arg);
    return 0;
}

static atomic_uint counter;

static int count_job(void *arg, unsigned worker)
{
    (void)worker;
    atomic_fetch_add(&counter, 1);
    return (int)(intptr_t)arg;
}

KT_CASE(runs_every_job)
{
    struct kiln_pool *pool;
    KT_REQUIRE_OK(kiln_pool_create(4, 3, &pool));
    KT_CHECK_EQ(kiln_pool_workers(pool), 4);
    atomic_store(&counter, 0);
    for (int i = 0; i < 2000; i++)
        KT_CHECK_OK(kiln_pool_submit(pool, count_job, NULL));
    KT_CHECK_EQ(kiln_pool_wait(pool), KILN_OK);
    KT_CHECK_EQ(atomic_load(&counter), 2000);
    struct kiln_pool_progress p = KILN_POOL_PROGRESS_INIT;
    kiln_pool_get_progress(pool, &p);
    KT_CHECK_EQ(p.submitted, 2000);
    KT_CHECK_EQ(p.done, 2000);
    KT_CHECK_EQ(p.failed, 0);
    KT_CHECK_EQ(p.dropped, 0);
    KT_CHECK_EQ(p.running, 0);
    KT_CHECK_EQ(p.queued, 0);
    KT_CHECK(!p.canceled);

    /* The pool takes more work after a wait. */
    for (int i = 0; i < 10; i++)
        KT_CHECK_OK(kiln_pool_submit(pool, count_job, NULL));
    KT_CHECK_EQ(kiln_pool_wait(pool), KILN_OK);
    KT_CHECK_EQ(atomic_load(&counter), 2010);
    kiln_pool_destroy(pool);
}

KT_CASE(failed_jobs_are_counted)
{
    struct kiln_pool *pool;
    KT_REQUIRE_OK(kiln_pool_create(3, 0, &pool));
    atomic_store(&counter, 0);
    for (int i = 0; i < 300; i++)
        KT_CHECK_OK(
            kiln_pool_submit(pool, count_job, (void *)(intptr_t)(i % 3 == 0 ? KILN_EVULKAN : 0)));
    KT_CHECK_EQ(kiln_pool_wait(pool), KILN_OK);
    struct kiln_pool_progress p = KILN_POOL_PROGRESS_INIT;
    kiln_pool_get_progress(pool, &p);
    KT_CHECK_EQ(p.done, 300);
    KT_CHECK_EQ(p.failed, 100);
    kiln_pool_destroy(pool);
}

struct index_record {
    unsigned workers;
    atomic_uint per_worker[8];
    atomic_uint out_of_range;
};

static int index_job(void *arg, unsigned worker)
{
    struct index_record *r = arg;
    if (worker >= r->workers)
        atomic_fetch_add(&r->out_of_range, 1);
    else
        atomic_fetch_add(&r->per_worker[worker], 1);
    return 0;
}

KT_CASE(worker_index_in_range)
{
    static struct index_record r;
    r.workers = 5;
    struct kiln_pool *pool;
    KT_REQUIRE_OK(kiln_pool_create(r.workers, 0, &pool));
    for (int i = 0; i < 500; i++)
        KT_CHECK_OK(kiln_pool_submit(pool, index_job, &r));
    KT_CHECK_OK(kiln_pool_wait(pool));
    unsigned total = 0;
    for (unsigned i = 0; i < r.workers; i++)
        total += atomic_load(&r.per_worker[i]);
    KT_CHECK_EQ(total, 500);
    KT_CHECK_EQ(atomic_load(&r.out_of_range), 0);
    kiln_pool_destroy(pool);
}

struct submitter {
    struct kiln_pool *pool;
    struct gate *gate;
    atomic_int returned;
    int rc;
};

static void *submit_thread(void *p)
{
    struct submitter *s = p;
    s->rc = kiln_pool_submit(s->pool, gated_job, s->gate);
    atomic_store(&s->returned, 1);
    return NULL;
}

KT_CASE(submit_blocks_when_full)
{
    struct gate gate;
    gate_init(&gate);
    struct kiln_pool *pool;
    KT_REQUIRE_OK(kiln_pool_create(1, 2, &pool));
    /* One job runs (held at the gate) and two fill the queue. */
    KT_CHECK_OK(kiln_pool_submit(pool, gated_job, &gate));
    gate_await(&gate, 1);
    KT_CHECK_OK(kiln_pool_submit(pool, gated_job, &gate));
    KT_CHECK_OK(kiln_pool_submit(pool, gated_job, &gate));
    struct kiln_pool_progress p = KILN_POOL_PROGRESS_INIT;
    kiln_pool_get_progress(pool, &p);
    KT_CHECK_EQ(p.running, 1);
    KT_CHECK_EQ(p.queued, 2);

    struct submitter s = {.pool = pool, .gate = &gate};
    atomic_init(&s.returned, 0);
    pthread_t t;
    KT_REQUIRE(pthread_create(&t, NULL, submit_thread, &s) == 0);
    /* Give the submitter time to reach the full queue; whatever the timing,
     * it cannot return while nothing leaves the queue. */
    usleep(20000);
    KT_CHECK_EQ(atomic_load(&s.returned), 0);
    kiln_pool_get_progress(pool, &p);
    KT_CHECK_EQ(p.submitted, 3);

    gate_open(&gate);
    pthread_join(t, NULL);
    KT_CHECK_EQ(s.rc, KILN_OK);
    KT_CHECK_EQ(kiln_pool_wait(pool), KILN_OK);
    kiln_pool_get_progress(pool, &p);
    KT_CHECK_EQ(p.done, 4);
    kiln_pool_destroy(pool);
    gate_destroy(&gate);
}

KT_CASE(cancel_drops_pending)
{
    struct gate gate;
    gate_init(&gate);
    struct kiln_pool *pool;
    KT_REQUIRE_OK(kiln_pool_create(2, 16, &pool));
    KT_CHECK_OK(kiln_pool_submit(pool, gated_job, &gate));
    KT_CHECK_OK(kiln_pool_submit(pool, gated_job, &gate));
    gate_await(&gate, 2);
    for (int i = 0; i < 10; i++)
        KT_CHECK_OK(kiln_pool_submit(pool, count_job, NULL));

    kiln_pool_cancel(pool);
    struct kiln_pool_progress p = KILN_POOL_PROGRESS_INIT;
    kiln_pool_get_progress(pool, &p);
    KT_CHECK(p.canceled);
    KT_CHECK_EQ(p.dropped, 10);
    KT_CHECK_EQ(p.running, 2);
    KT_CHECK_EQ(p.queued, 0);
    /* The running jobs are not finished yet, so nothing reports done. */
    KT_CHECK_EQ(kiln_pool_wait_for(pool, 1000000), 2);
    KT_CHECK_EQ(kiln_pool_submit(pool, count_job, NULL), KILN_ECANCELED);

    gate_open(&gate);
    KT_CHECK_EQ(kiln_pool_wait(pool), KILN_ECANCELED);
    KT_CHECK_EQ(kiln_pool_wait_for(pool, 0), KILN_ECANCELED);
    kiln_pool_get_progress(pool, &p);
    KT_CHECK_EQ(p.done, 2);
    KT_CHECK_EQ(p.submitted, 12);
    KT_CHECK_EQ(p.done + p.dropped, p.submitted);
    kiln_pool_cancel(pool); /* twice is harmless */
    kiln_pool_destroy(pool);
    gate_destroy(&gate);
}

KT_CASE(cancel_wakes_blocked_submitter)
{
    struct gate gate;
    gate_init(&gate);
    struct kiln_pool *pool;
    KT_REQUIRE_OK(kiln_pool_create(1, 1, &pool));
    KT_CHECK_OK(kiln_pool_submit(pool, gated_job, &gate));
    gate_await(&gate, 1);
    KT_CHECK_OK(kiln_pool_submit(pool, gated_job, &gate)); /* fills the queue */

    struct submitter s = {.pool = pool, .gate = &gate};
    atomic_init(&s.returned, 0);
    pthread_t t;
    KT_REQUIRE(pthread_create(&t, NULL, submit_thread, &s) == 0);
    usleep(20000);
    kiln_pool_cancel(pool);
    pthread_join(t, NULL); /* returns whether it was blocked yet or not */
    KT_CHECK_EQ(s.rc, KILN_ECANCELED);
    gate_open(&gate);
    KT_CHECK_EQ(kiln_pool_wait(pool), KILN_ECANCELED);
    struct kiln_pool_progress p = KILN_POOL_PROGRESS_INIT;
    kiln_pool_get_progress(pool, &p);
    KT_CHECK_EQ(p.done, 1);
    KT_CHECK_EQ(p.dropped, 1);
    kiln_pool_destroy(pool);
    gate_destroy(&gate);
}

struct self_cancel {
    struct kiln_pool *pool;
    atomic_uint ran;
};

static int cancelling_job(void *arg, unsigned worker)
{
    (void)worker;
    struct self_cancel *sc = arg;
    if (atomic_fetch_add(&sc->ran, 1) == 4)
        kiln_pool_cancel(sc->pool);
    return 0;
}

KT_CASE(cancel_from_a_job)
{
    static struct self_cancel sc;
    atomic_store(&sc.ran, 0);
    KT_REQUIRE_OK(kiln_pool_create(2, 4, &sc.pool));
    int submitted = 0;
    for (int i = 0; i < 1000; i++) {
        int rc = kiln_pool_submit(sc.pool, cancelling_job, &sc);
        if (rc == KILN_ECANCELED)
            break;
        KT_CHECK_OK(rc);
        submitted++;
    }
    KT_CHECK_EQ(kiln_pool_wait(sc.pool), KILN_ECANCELED);
    struct kiln_pool_progress p = KILN_POOL_PROGRESS_INIT;
    kiln_pool_get_progress(sc.pool, &p);
    KT_CHECK_EQ(p.submitted, (uint64_t)submitted);
    KT_CHECK_EQ(p.done + p.dropped, p.submitted);
    KT_CHECK(p.done >= 5);
    KT_CHECK(submitted < 1000); /* the queue holds 4, so the producer saw the cancel */
    kiln_pool_destroy(sc.pool);
}

KT_CASE(wait_for_counts_what_is_left)
{
    struct gate gate;
    gate_init(&gate);
    struct kiln_pool *pool;
    KT_REQUIRE_OK(kiln_pool_create(1, 8, &pool));
    for (int i = 0; i < 3; i++)
        KT_CHECK_OK(kiln_pool_submit(pool, gated_job, &gate));
    gate_await(&gate, 1);
    KT_CHECK_EQ(kiln_pool_wait_for(pool, 1000000), 3);
    gate_open(&gate);
    int64_t left;
    while ((left = kiln_pool_wait_for(pool, 100000000)) > 0)
        ;
    KT_CHECK_EQ(left, 0);
    kiln_pool_destroy(pool);
    gate_destroy(&gate);
}

KT_CASE(destroy_with_pending_jobs)
{
    struct gate gate;
    gate_init(&gate);
    struct kiln_pool *pool;
    KT_REQUIRE_OK(kiln_pool_create(1, 8, &pool));
    KT_CHECK_OK(kiln_pool_submit(pool, gated_job, &gate));
    gate_await(&gate, 1);
    atomic_store(&counter, 0);
    for (int i = 0; i < 5; i++)
        KT_CHECK_OK(kiln_pool_submit(pool, count_job, NULL));
    gate_open(&gate);
    kiln_pool_destroy(pool); /* drops what was still queued, joins the worker */
    KT_CHECK(atomic_load(&counter) <= 5);
    kiln_pool_destroy(NULL);
    gate_destroy(&gate);
}

KT_CASE(bad_arguments)
{
    struct kiln_pool *pool = (struct kiln_pool *)&pool;
    KT_CHECK_EQ(kiln_pool_create(0, 4, &pool), KILN_EINVAL);
    KT_CHECK(pool == NULL);
    KT_REQUIRE_OK(kiln_pool_create(1, 1, &pool));
    KT_CHECK_EQ(kiln_pool_submit(pool, NULL, NULL), KILN_EINVAL);
    KT_CHECK_EQ(kiln_pool_wait(pool), KILN_OK); /* nothing submitted */
    KT_CHECK_EQ(kiln_pool_wait_for(pool, 0), 0);
    kiln_pool_destroy(pool);
}

struct mem_jobs {
    atomic_uint running;
    atomic_uint most;
    atomic_uint ran;
};

static int count_running(void *arg, unsigned worker)
{
    (void)worker;
    struct mem_jobs *m = arg;
    unsigned now = atomic_fetch_add(&m->running, 1) + 1;
    unsigned most = atomic_load(&m->most);
    while (now > most && !atomic_compare_exchange_weak(&m->most, &most, now)) {
    }
    usleep(2000);
    atomic_fetch_sub(&m->running, 1);
    atomic_fetch_add(&m->ran, 1);
    return 0;
}

/* A budget below what the process holds already: every job still runs,
 * one at a time (at least one always runs, never more). */
KT_CASE(budget_keeps_one_running)
{
    struct kiln_pool_options o = {
        .size = sizeof(o), .workers = 4, .memory_budget = 1, .background = true};
    struct kiln_pool *pool;
    KT_REQUIRE_OK(kiln_pool_create_with(&o, &pool));
    struct mem_jobs m = {0};
    for (int i = 0; i < 40; i++)
        KT_CHECK_OK(kiln_pool_submit(pool, count_running, &m));
    KT_CHECK_OK(kiln_pool_wait(pool));
    kiln_pool_destroy(pool);
    KT_CHECK_EQ(atomic_load(&m.ran), 40);
    KT_CHECK_EQ(atomic_load(&m.most), 1);
    KT_CHECK_EQ(kiln_pool_create_with(NULL, &pool), KILN_EINVAL);
}

KT_MAIN(KT_ENTRY(runs_every_job), KT_ENTRY(failed_jobs_are_counted),
        KT_ENTRY(worker_index_in_range), KT_ENTRY(submit_blocks_when_full),
        KT_ENTRY(cancel_drops_pending), KT_ENTRY(cancel_wakes_blocked_submitter),
        KT_ENTRY(cancel_from_a_job), KT_ENTRY(wait_for_counts_what_is_left),
        KT_ENTRY(destroy_with_pending_jobs), KT_ENTRY(bad_arguments),
        KT_ENTRY(budget_keeps_one_running))
