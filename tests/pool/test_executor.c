/*
 * test_executor.c - the application's executor (struct kiln_executor): the
 * pool and kiln_cache_load_many run on it and start no thread of their
 * own; an executor that runs tasks inline inside submit works; one that
 * refuses every task loses no work (the calling thread does it).
 *
 * How "no thread of kiln's" is shown: every job (pool) and every read of
 * the records file (load_many, through a wrapping kiln_io) notes the thread
 * it runs on, and each must be one of the executor's threads or the
 * calling thread. The negative control is the same check on kiln's own
 * threads, which must see a thread outside that set: so the check can fail.
 * Each case also asserts the executor was handed tasks (a kiln that
 * bypassed it would fail there), and on Linux counts /proc/self/task.
 * Labelled threads: run under TSan too.
 */
#include "kiln/cache.h"
#include "kiln/pool.h"
#include "kiln_test.h"

#include <dirent.h>
#include <pthread.h>
#include <stdbool.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- a test executor: its own threads, or inline, or refusing ----------- */

/* TEXEC_DEFER keeps every task until texec_run_deferred: an executor whose
 * one thread is the one that called kiln. */
enum texec_mode { TEXEC_THREADS, TEXEC_INLINE, TEXEC_REFUSE, TEXEC_DEFER };

#define TEXEC_THREADS_MAX 4
#define TEXEC_QUEUE       256

struct task {
    void (*fn)(void *);
    void *arg;
};

struct texec {
    enum texec_mode mode;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    struct task q[TEXEC_QUEUE];
    size_t head, count;
    bool stop;
    pthread_t threads[TEXEC_THREADS_MAX];
    unsigned nthreads;
    atomic_uint submitted; /* submit calls */
    atomic_uint ran;       /* tasks run */
};

/* Takes the next task and runs it, the lock released meanwhile; the
 * caller holds the lock and has seen a task queued. */
static void texec_run_next(struct texec *e)
{
    struct task t = e->q[e->head];
    e->head = (e->head + 1) % TEXEC_QUEUE;
    e->count--;
    pthread_mutex_unlock(&e->lock);
    t.fn(t.arg);
    atomic_fetch_add(&e->ran, 1);
    pthread_mutex_lock(&e->lock);
}

static void *texec_main(void *p)
{
    struct texec *e = p;
    pthread_mutex_lock(&e->lock);
    for (;;) {
        while (e->count == 0 && !e->stop)
            pthread_cond_wait(&e->cond, &e->lock);
        if (e->count == 0)
            break;
        texec_run_next(e);
    }
    pthread_mutex_unlock(&e->lock);
    return NULL;
}

static int texec_submit(void (*fn)(void *), void *arg, void *user)
{
    struct texec *e = user;
    atomic_fetch_add(&e->submitted, 1);
    if (e->mode == TEXEC_REFUSE)
        return -1;
    if (e->mode == TEXEC_INLINE) {
        fn(arg);
        atomic_fetch_add(&e->ran, 1);
        return 0;
    }
    pthread_mutex_lock(&e->lock);
    if (e->count == TEXEC_QUEUE) {
        pthread_mutex_unlock(&e->lock);
        return -1;
    }
    e->q[(e->head + e->count) % TEXEC_QUEUE] = (struct task){fn, arg};
    e->count++;
    pthread_cond_signal(&e->cond);
    pthread_mutex_unlock(&e->lock);
    return 0;
}

/* Runs the tasks a TEXEC_DEFER executor kept, on the calling thread.
 * @return how many. */
static unsigned texec_run_deferred(struct texec *e)
{
    unsigned n = 0;
    pthread_mutex_lock(&e->lock);
    for (; e->count > 0; n++)
        texec_run_next(e);
    pthread_mutex_unlock(&e->lock);
    return n;
}

static void texec_start(struct texec *e, enum texec_mode mode, unsigned nthreads)
{
    memset(e, 0, sizeof(*e));
    e->mode = mode;
    pthread_mutex_init(&e->lock, NULL);
    pthread_cond_init(&e->cond, NULL);
    atomic_init(&e->submitted, 0);
    atomic_init(&e->ran, 0);
    e->nthreads = mode == TEXEC_THREADS ? nthreads : 0;
    for (unsigned i = 0; i < e->nthreads; i++)
        KT_REQUIRE(pthread_create(&e->threads[i], NULL, texec_main, e) == 0);
}

static void texec_stop(struct texec *e)
{
    pthread_mutex_lock(&e->lock);
    e->stop = true;
    pthread_cond_broadcast(&e->cond);
    pthread_mutex_unlock(&e->lock);
    for (unsigned i = 0; i < e->nthreads; i++)
        pthread_join(e->threads[i], NULL);
    pthread_cond_destroy(&e->cond);
    pthread_mutex_destroy(&e->lock);
}

static struct kiln_executor texec_table(struct texec *e, unsigned concurrency)
{
    return (struct kiln_executor){.size = sizeof(struct kiln_executor),
                                  .submit = texec_submit,
                                  .user = e,
                                  .concurrency = concurrency};
}

/* ---- which threads did the work ------------------------------------------ */

static pthread_t main_thread;
static atomic_uint foreign; /* work seen on a thread that is neither main nor the executor's */

static void note_thread(const struct texec *e)
{
    pthread_t self = pthread_self();
    if (pthread_equal(self, main_thread))
        return;
    for (unsigned i = 0; e && i < e->nthreads; i++)
        if (pthread_equal(self, e->threads[i]))
            return;
    atomic_fetch_add(&foreign, 1);
}

/* @return the threads of this process (Linux), or 0 where that cannot be
 * read. */
static unsigned task_entries(void)
{
    DIR *d = opendir("/proc/self/task");
    if (!d)
        return 0;
    unsigned n = 0;
    for (struct dirent *de; (de = readdir(d)) != NULL;)
        n += de->d_name[0] != '.';
    closedir(d);
    return n;
}

static atomic_int probe_go;

static void *probe_thread(void *arg)
{
    (void)arg;
    while (!atomic_load(&probe_go))
        sched_yield();
    return NULL;
}

/* Whether /proc/self/task counts this process's threads: one more while a
 * thread of ours lives (under wine it lists the wine process's own, which
 * do not follow the program's threads). Asked once. */
static bool tasks_count_threads(void)
{
    static atomic_int known = -1;
    if (atomic_load(&known) >= 0)
        return atomic_load(&known);
    unsigned before = task_entries();
    pthread_t t;
    atomic_store(&probe_go, 0);
    if (before == 0 || pthread_create(&t, NULL, probe_thread, NULL) != 0) {
        atomic_store(&known, 0);
        return false;
    }
    unsigned during = task_entries();
    atomic_store(&probe_go, 1);
    pthread_join(t, NULL);
    atomic_store(&known, during == before + 1);
    return during == before + 1;
}

/* The threads of this process, or 0 where that cannot be counted. */
static unsigned thread_count(void)
{
    return tasks_count_threads() ? task_entries() : 0;
}

static void nap_ms(long ms)
{
    struct timespec ts = {0, ms * 1000000L};
    nanosleep(&ts, NULL);
}

/* ---- the pool ------------------------------------------------------------ */

#define NJOBS 200

struct pool_run {
    const struct texec *e;
    atomic_uint threads_seen; /* the most /proc/self/task showed during a job */
    unsigned workers;
    atomic_uint bad_index;
    unsigned base; /* threads before the pool, the executor's included (0: unknown) */
    uint64_t out[NJOBS];
    unsigned idx[NJOBS];
};

static struct pool_run *run_ctx;

static int square_job(void *arg, unsigned worker)
{
    unsigned i = (unsigned)(uintptr_t)arg;
    note_thread(run_ctx->e);
    if (worker >= run_ctx->workers)
        atomic_fetch_add(&run_ctx->bad_index, 1);
    unsigned n = thread_count();
    unsigned seen = atomic_load(&run_ctx->threads_seen);
    while (n > seen && !atomic_compare_exchange_weak(&run_ctx->threads_seen, &seen, n))
        ;
    if (i % 16 == 0)
        nap_ms(1); /* let the other workers take jobs meanwhile */
    run_ctx->out[i] = (uint64_t)i * i + 7;
    return i % 10 == 3 ? KILN_EIO : 0;
}

/* Runs NJOBS jobs on a pool of `workers` with executor `x` (NULL: kiln's
 * threads) and checks what every job computed. */
static void run_pool(const struct kiln_executor *x, const struct texec *e, unsigned workers,
                     struct pool_run *r)
{
    memset(r, 0, sizeof(*r));
    r->e = e;
    (void)tasks_count_threads(); /* asked here, before any job asks it */
    run_ctx = r;
    atomic_store(&foreign, 0);
    struct kiln_pool_options o = {
        .size = sizeof(o), .workers = workers, .queue_capacity = 8, .executor = x};
    struct kiln_pool *pool;
    KT_REQUIRE_OK(kiln_pool_create_with(&o, &pool));
    r->workers = kiln_pool_workers(pool);
    for (unsigned i = 0; i < NJOBS; i++)
        KT_REQUIRE_OK(kiln_pool_submit(pool, square_job, (void *)(uintptr_t)i));
    KT_CHECK_OK(kiln_pool_wait(pool));
    struct kiln_pool_progress pp = KILN_POOL_PROGRESS_INIT;
    kiln_pool_get_progress(pool, &pp);
    KT_CHECK_EQ(pp.submitted, (uint64_t)NJOBS);
    KT_CHECK_EQ(pp.done, (uint64_t)NJOBS);
    KT_CHECK_EQ(pp.failed, (uint64_t)(NJOBS / 10));
    kiln_pool_destroy(pool);
    for (unsigned i = 0; i < NJOBS; i++)
        KT_CHECK_EQ(r->out[i], (uint64_t)i * i + 7);
    KT_CHECK_EQ(atomic_load(&r->bad_index), 0u);
}

/* Starts an executor of `mode`, runs the pool case on it, and checks what
 * every case on an executor must show: kiln handed it tasks, and no job ran
 * on a thread of kiln's. The caller checks more, then texec_stop(e). */
static void pool_case(struct texec *e, enum texec_mode mode, unsigned nthreads,
                      unsigned concurrency, unsigned workers, struct pool_run *r)
{
    main_thread = pthread_self();
    texec_start(e, mode, nthreads);
    struct kiln_executor x = texec_table(e, concurrency);
    /* Main and the executor's threads; a thread still ending (seen under
     * ASan: 5 at the base, 4 during the run) is let go first, for up to
     * two seconds, else the count stands as read. */
    unsigned want = 1 + e->nthreads, base = thread_count();
    for (int i = 0; i < 200 && base > want; i++) {
        nap_ms(10);
        base = thread_count();
    }
    run_pool(&x, e, workers, r);
    r->base = base;
    KT_CHECK(atomic_load(&e->submitted) > 0); /* kiln used the executor */
    KT_CHECK_EQ(atomic_load(&foreign), 0u);   /* no job ran on a thread of kiln's */
}

KT_CASE(pool_on_executor)
{
    struct texec e;
    static struct pool_run r;
    pool_case(&e, TEXEC_THREADS, 3, 0, 4, &r);
    unsigned base = r.base; /* main and the executor's three */
    if (base)
        KT_CHECK_EQ(atomic_load(&r.threads_seen), base); /* kiln started none */
    KT_CHECK_EQ(r.workers, 4u);

    /* The negative control: kiln's own threads are seen by the same check. */
    static struct pool_run t;
    run_pool(NULL, &e, 4, &t);
    KT_CHECK(atomic_load(&foreign) > 0);
    if (base)
        KT_CHECK(atomic_load(&t.threads_seen) > base);
    KT_CHECK(memcmp(r.out, t.out, sizeof(r.out)) == 0); /* same results either way */
    texec_stop(&e); /* joins the executor: a task counts as run after its fn returns */
    KT_CHECK_EQ(atomic_load(&e.ran), atomic_load(&e.submitted)); /* every task ran */
}

KT_CASE(pool_concurrency_bounds_workers)
{
    struct texec e;
    static struct pool_run r;
    pool_case(&e, TEXEC_THREADS, 2, 2, 8, &r); /* 8 asked, the executor runs 2 at once */
    KT_CHECK_EQ(r.workers, 2u);
    texec_stop(&e);
}

KT_CASE(pool_inline_executor)
{
    struct texec e;
    static struct pool_run r;
    pool_case(&e, TEXEC_INLINE, 0, 0, 4, &r); /* everything on the calling thread */
    KT_CHECK_EQ(atomic_load(&e.ran), atomic_load(&e.submitted));
    texec_stop(&e);
}

KT_CASE(pool_refusing_executor)
{
    struct texec e;
    static struct pool_run r;
    pool_case(&e, TEXEC_REFUSE, 0, 0, 4, &r); /* every job still runs, once */
    KT_CHECK_EQ(atomic_load(&e.ran), 0u);
    texec_stop(&e);
}

/* Pending jobs of a destroyed pool are dropped, and destroy waits for the
 * executor's tasks (TSan or ASan would see a task touch a freed pool). */
KT_CASE(pool_destroy_waits_for_tasks)
{
    main_thread = pthread_self();
    struct texec e;
    texec_start(&e, TEXEC_THREADS, 3);
    struct kiln_executor x = texec_table(&e, 0);
    static struct pool_run r;
    memset(&r, 0, sizeof(r));
    r.e = &e;
    r.workers = 3;
    run_ctx = &r;
    struct kiln_pool_options o = {
        .size = sizeof(o), .workers = 3, .queue_capacity = 64, .executor = &x};
    struct kiln_pool *pool;
    KT_REQUIRE_OK(kiln_pool_create_with(&o, &pool));
    for (unsigned i = 0; i < 64; i++)
        KT_REQUIRE_OK(kiln_pool_submit(pool, square_job, (void *)(uintptr_t)i));
    kiln_pool_destroy(pool);
    KT_CHECK(atomic_load(&e.submitted) > 0);
    texec_stop(&e); /* joins the executor: every task has returned by now */
    KT_CHECK_EQ(atomic_load(&e.ran), atomic_load(&e.submitted));
}

KT_CASE(bad_executor)
{
    struct kiln_executor x = {.size = sizeof x}; /* no submit */
    struct kiln_pool_options o = {.size = sizeof(o), .workers = 2, .executor = &x};
    struct kiln_pool *pool;
    KT_CHECK_EQ(kiln_pool_create_with(&o, &pool), KILN_EINVAL);
    KT_CHECK(pool == NULL);
    struct kiln_executor zero = {0}; /* size 0 */
    zero.submit = texec_submit;
    o.executor = &zero;
    KT_CHECK_EQ(kiln_pool_create_with(&o, &pool), KILN_EINVAL);
    struct kiln_cache_options co = {.size = sizeof(co), .flags = KILN_CACHE_CREATE, .executor = &x};
    struct kiln_cache *c;
    KT_CHECK_EQ(kiln_cache_open(kt_tmpdir(), &co, &c), KILN_EINVAL);
}

/* ---- kiln_cache_load_many ------------------------------------------------ */

/* Reads through the default table, noting the thread of each read. */
struct readio {
    struct kiln_io io; /* first member */
    const struct texec *e;
    atomic_uint reads;
};

static struct readio rio;

static int64_t noting_pread(const struct kiln_io *self, int fd, void *buf, size_t n, uint64_t off)
{
    note_thread(rio.e);
    atomic_fetch_add(&rio.reads, 1);
    if (n > 4096)
        nap_ms(5); /* a slow disk: the other readers take runs meanwhile */
    return kiln_io_default()->pread(kiln_io_default(), fd, buf, n, off);
}

#define NRECS    24
#define REC_SIZE (1u << 20) /* 24 MiB: three runs of 8 MiB */

static struct kiln_key key_of(unsigned i)
{
    return (struct kiln_key){.lo = i * 0x9e3779b97f4a7c15ull + 1, .hi = i ^ 0x5eedull};
}

/* The records every load case reads (and the thread the case runs on). */
static void make_cache(const char *dir)
{
    main_thread = pthread_self();
    struct kiln_cache_options o = {.size = sizeof(o), .stamp = 1, .flags = KILN_CACHE_CREATE};
    struct kiln_cache *c;
    KT_REQUIRE_OK(kiln_cache_open(dir, &o, &c));
    unsigned char *buf = malloc(REC_SIZE);
    KT_REQUIRE(buf);
    for (unsigned i = 0; i < NRECS; i++) {
        for (unsigned k = 0; k < REC_SIZE; k++)
            buf[k] = (unsigned char)(k * 31 + i);
        KT_REQUIRE_OK(kiln_cache_put(c, key_of(i), buf, REC_SIZE - i, REC_SIZE, 0, 1));
    }
    free(buf);
    KT_REQUIRE_OK(kiln_cache_sync(c));
    kiln_cache_close(c);
}

/* Loads every record with executor `x` (NULL: kiln's threads), 3 threads
 * asked, and checks each payload. */
static void load_all(const char *dir, const struct kiln_executor *x, const struct texec *e)
{
    rio.io = *kiln_io_default();
    rio.io.pread = noting_pread;
    rio.e = e;
    atomic_store(&rio.reads, 0);
    atomic_store(&foreign, 0);
    struct kiln_cache_options o = {.size = sizeof(o), .stamp = 1, .io = &rio.io, .executor = x};
    struct kiln_cache *c;
    KT_REQUIRE_OK(kiln_cache_open(dir, &o, &c));
    struct kiln_key keys[NRECS];
    for (unsigned i = 0; i < NRECS; i++)
        keys[i] = key_of(i);
    struct kiln_cache_result *res;
    KT_CHECK_EQ(kiln_cache_load_many(c, keys, NRECS, 3, &res), (int64_t)NRECS);
    for (unsigned i = 0; i < NRECS; i++) {
        KT_CHECK_OK(res[i].status);
        KT_CHECK_EQ(res[i].size, (size_t)(REC_SIZE - i));
        const unsigned char *p = res[i].data;
        bool same = p != NULL;
        for (unsigned k = 0; same && k < res[i].size; k += 4093)
            same = p[k] == (unsigned char)(k * 31 + i);
        KT_CHECK(same);
    }
    kiln_cache_results_free(res, NRECS);
    kiln_cache_close(c);
    KT_CHECK(atomic_load(&rio.reads) > 0);
}

/* Starts an executor of `mode` and loads every record on it: kiln handed
 * it the readers and read on no thread of its own. Then texec_stop(e). */
static void load_case(const char *dir, struct texec *e, enum texec_mode mode, unsigned nthreads)
{
    texec_start(e, mode, nthreads);
    struct kiln_executor x = texec_table(e, 0);
    load_all(dir, &x, e);
    KT_CHECK(atomic_load(&e->submitted) > 0);
    KT_CHECK_EQ(atomic_load(&foreign), 0u);
}

KT_CASE(load_many_on_executor)
{
    const char *dir = kt_tmpdir();
    make_cache(dir);
    struct texec e;
    load_case(dir, &e, TEXEC_THREADS, 3);
    /* The negative control: kiln's reader threads are seen. */
    load_all(dir, NULL, &e);
    KT_CHECK(atomic_load(&foreign) > 0);
    texec_stop(&e);
}

KT_CASE(load_many_inline_and_refusing)
{
    const char *dir = kt_tmpdir();
    make_cache(dir);
    struct texec e;
    load_case(dir, &e, TEXEC_INLINE, 0);
    texec_stop(&e);
    load_case(dir, &e, TEXEC_REFUSE, 0); /* every record still loaded, on this thread */
    KT_CHECK_EQ(atomic_load(&e.ran), 0u);
    texec_stop(&e);
}

/* The executor's one thread is the one in kiln: its tasks run only after
 * the kiln call returned. kiln never waits for them (it does the work on
 * that thread) and a late task touches nothing that is gone (TSan and ASan
 * would see it). */
KT_CASE(deferred_tasks_never_waited_for)
{
    struct texec e;
    static struct pool_run r;
    pool_case(&e, TEXEC_DEFER, 0, 0, 3, &r); /* create, submit, wait, destroy all return */
    KT_CHECK_EQ(atomic_load(&e.ran), 0u);
    KT_CHECK(texec_run_deferred(&e) > 0); /* the last of them frees the pool */
    texec_stop(&e);

    const char *dir = kt_tmpdir();
    make_cache(dir);
    load_case(dir, &e, TEXEC_DEFER, 0); /* load_many returns, every record loaded */
    KT_CHECK_EQ(atomic_load(&e.ran), 0u);
    KT_CHECK(texec_run_deferred(&e) > 0); /* they find the work done */
    KT_CHECK_EQ(atomic_load(&foreign), 0u);
    texec_stop(&e);
}

KT_MAIN(KT_ENTRY(pool_on_executor), KT_ENTRY(pool_concurrency_bounds_workers),
        KT_ENTRY(pool_inline_executor), KT_ENTRY(pool_refusing_executor),
        KT_ENTRY(pool_destroy_waits_for_tasks), KT_ENTRY(bad_executor),
        KT_ENTRY(load_many_on_executor), KT_ENTRY(load_many_inline_and_refusing),
        KT_ENTRY(deferred_tasks_never_waited_for))
