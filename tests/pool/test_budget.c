/*
 * test_budget.c - the memory budget with a memory model: predicted jobs
 * are admitted while their predicted total fits, a prediction that was too
 * low is corrected from what the pool saw and the budget holds, and the
 * counted memory is PSS (a page kiln shares with a worker counts once).
 *
 * Each case has its negative control: without the model the pool keeps
 * the largest-seen rule (fewer jobs at once), without the correction the
 * budget is passed. Jobs map and touch their memory with mmap (not malloc,
 * whose arenas keep freed memory) and wait at a gate for the others, with
 * a bounded wait, so concurrency is counted, never timed.
 */
#include "kiln_test.h"
#include "kiln_internal.h"
#include "pool_internal.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MIB (1ull << 20)

struct run {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    unsigned running, most, target;
    uint64_t peak; /* the most counted memory a job saw */
    atomic_uint ran;
};

struct job {
    struct run *r;
    uint64_t bytes;   /* what it maps and touches */
    uint64_t predict; /* what the model says before any correction */
    unsigned cls;     /* its class in the test model */
};

static void run_init(struct run *r, unsigned target)
{
    memset(r, 0, sizeof(*r));
    pthread_mutex_init(&r->lock, NULL);
    pthread_cond_init(&r->cond, NULL);
    r->target = target;
}

/* Maps and touches its bytes, waits (at most 300 ms) until `target` jobs
 * run at once, notes the counted memory, and unmaps. */
static int mem_job(void *arg, unsigned worker)
{
    (void)worker;
    struct job *j = arg;
    struct run *r = j->r;
    char *p = mmap(NULL, j->bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return KILN_ENOMEM;
    memset(p, 1, j->bytes);
    pthread_mutex_lock(&r->lock);
    r->running++;
    if (r->running > r->most)
        r->most = r->running;
    pthread_cond_broadcast(&r->cond);
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_nsec += 300000000L;
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    while (r->running < r->target)
        if (pthread_cond_timedwait(&r->cond, &r->lock, &until) != 0)
            break;
    pthread_mutex_unlock(&r->lock);
    uint64_t now = kiln_pool_resident_bytes();
    pthread_mutex_lock(&r->lock);
    if (now > r->peak)
        r->peak = now;
    r->running--;
    pthread_mutex_unlock(&r->lock);
    munmap(p, j->bytes);
    atomic_fetch_add(&r->ran, 1);
    return 0;
}

/* The test's model: a class's estimate starts at the job's own prediction
 * and, with `correct`, rises to what a job of the class was seen to need. */
struct model {
    pthread_mutex_t lock;
    uint64_t learned[2];
    bool correct;
    unsigned observed;
};

static uint64_t predict(void *user, void *arg)
{
    struct model *m = user;
    const struct job *j = arg;
    pthread_mutex_lock(&m->lock);
    uint64_t v = m->learned[j->cls] > j->predict ? m->learned[j->cls] : j->predict;
    pthread_mutex_unlock(&m->lock);
    return v;
}

static void observe(void *user, void *arg, uint64_t predicted, uint64_t grown)
{
    struct model *m = user;
    const struct job *j = arg;
    (void)predicted;
    pthread_mutex_lock(&m->lock);
    m->observed++;
    if (m->correct && grown > m->learned[j->cls])
        m->learned[j->cls] = grown;
    pthread_mutex_unlock(&m->lock);
}

static struct kiln_pool *budget_pool(unsigned workers, uint64_t over_base, struct model *m)
{
    static struct kiln_pool_memory_model mm;
    mm = (struct kiln_pool_memory_model)KILN_POOL_MEMORY_MODEL_INIT;
    mm.predict = predict;
    mm.observe = observe;
    mm.user = m;
    struct kiln_pool_options o = KILN_POOL_OPTIONS_INIT;
    o.workers = workers;
    o.memory_budget = kiln_pool_resident_bytes() + over_base;
    o.memory_model = m ? &mm : NULL;
    struct kiln_pool *pool = NULL;
    if (kiln_pool_create_with(&o, &pool) < 0)
        return NULL;
    return pool;
}

/*
 * One large job (64 MiB) then twelve small ones (6 MiB) under a budget of
 * 100 MiB over what the process holds: the largest-seen rule takes every
 * job to need 64 MiB and runs one at a time; the prediction admits the
 * small ones four at once.
 */
static unsigned small_after_large(bool with_model, uint64_t *peak, uint64_t *limit)
{
    struct model m = {.lock = PTHREAD_MUTEX_INITIALIZER};
    struct run r;
    run_init(&r, 4);
    *limit = kiln_pool_resident_bytes() + 100 * MIB;
    struct kiln_pool *pool = budget_pool(4, 100 * MIB, with_model ? &m : NULL);
    if (!pool)
        return 0;
    struct job jobs[13];
    jobs[0] = (struct job){.r = &r, .bytes = 64 * MIB, .predict = 64 * MIB, .cls = 0};
    for (int i = 1; i < 13; i++)
        jobs[i] = (struct job){.r = &r, .bytes = 6 * MIB, .predict = 6 * MIB, .cls = 1};
    for (int i = 0; i < 13; i++)
        kiln_pool_submit(pool, mem_job, &jobs[i]);
    kiln_pool_wait(pool);
    kiln_pool_destroy(pool);
    *peak = r.peak;
    return atomic_load(&r.ran) == 13 ? r.most : 0;
}

KT_CASE(prediction_admits_more)
{
    uint64_t peak, limit;
    unsigned most = small_after_large(true, &peak, &limit);
    KT_CHECK(most >= 3);
    KT_CHECK(peak <= limit);
}

/* The control: no model, the largest growth seen bounds every job. */
KT_CASE(largest_seen_serialises)
{
    uint64_t peak, limit;
    unsigned most = small_after_large(false, &peak, &limit);
    KT_CHECK_EQ(most, 1);
    KT_CHECK(peak <= limit);
}

/*
 * Jobs predicted 8 MiB that touch 40 MiB, six workers, 100 MiB over the
 * base. One runs alone first; with the correction the rest run at most two
 * at once and the budget holds; without it three or more start and the
 * budget is passed.
 */
static unsigned too_low(bool correct, uint64_t *peak, uint64_t *limit, unsigned *observed)
{
    struct model m = {.lock = PTHREAD_MUTEX_INITIALIZER, .correct = correct};
    struct run r;
    run_init(&r, 6);
    *limit = kiln_pool_resident_bytes() + 100 * MIB;
    struct kiln_pool *pool = budget_pool(6, 100 * MIB, &m);
    if (!pool)
        return 0;
    struct job jobs[13];
    for (int i = 0; i < 13; i++)
        jobs[i] = (struct job){.r = &r, .bytes = 40 * MIB, .predict = 8 * MIB, .cls = 0};
    kiln_pool_submit(pool, mem_job, &jobs[0]);
    kiln_pool_wait(pool);
    for (int i = 1; i < 13; i++)
        kiln_pool_submit(pool, mem_job, &jobs[i]);
    kiln_pool_wait(pool);
    kiln_pool_destroy(pool);
    *peak = r.peak;
    *observed = m.observed;
    return atomic_load(&r.ran) == 13 ? r.most : 0;
}

KT_CASE(low_prediction_corrected)
{
    uint64_t peak, limit;
    unsigned observed;
    unsigned most = too_low(true, &peak, &limit, &observed);
    KT_CHECK_EQ(observed, 13);
    KT_CHECK(most >= 1 && most <= 2);
    KT_CHECK(peak <= limit);
}

/* The control: the same jobs, the correction off: the budget is passed. */
KT_CASE(low_prediction_uncorrected_passes)
{
    uint64_t peak, limit;
    unsigned observed;
    unsigned most = too_low(false, &peak, &limit, &observed);
    KT_CHECK(most >= 3);
    KT_CHECK(peak > limit);
}

static uint64_t statm_rss(long pid)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%ld/statm", pid);
    FILE *f = fopen(path, "r");
    unsigned long long size = 0, res = 0;
    if (!f)
        return 0;
    if (fscanf(f, "%llu %llu", &size, &res) != 2)
        res = 0;
    fclose(f);
    return res * (uint64_t)sysconf(_SC_PAGESIZE);
}

/*
 * 64 MiB shared by kiln and a registered worker process count once (PSS),
 * not once per process: the control sums both processes' RSS.
 */
KT_CASE(pss_counts_shared_once)
{
    if (access("/proc/self/smaps_rollup", R_OK) != 0) {
        printf("skipped: no /proc/self/smaps_rollup (PSS)\n");
        exit(77);
    }
    uint64_t before = kiln_pool_resident_bytes();
    size_t n = 64 * MIB;
    char *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    KT_REQUIRE(p != MAP_FAILED);
    memset(p, 1, n);
    int up[2], down[2];
    KT_REQUIRE(pipe(up) == 0 && pipe(down) == 0);
    pid_t pid = fork();
    KT_REQUIRE(pid >= 0);
    if (pid == 0) {
        volatile char sum = 0;
        for (size_t i = 0; i < n; i += 4096)
            sum += p[i];
        char c = sum;
        (void)!write(up[1], &c, 1);
        (void)!read(down[0], &c, 1);
        _exit(0);
    }
    char c;
    KT_REQUIRE(read(up[0], &c, 1) == 1);
    KT_CHECK_OK(kiln__budget_add_pid((long)pid));
    /* Past the refresh interval: both processes' PSS read afresh (between
     * reads the resident count's change is followed, which counts the
     * shared pages whole). */
    struct timespec pause = {0, (long)KILN__PSS_REFRESH_NS + 10000000L};
    nanosleep(&pause, NULL);
    uint64_t counted = kiln_pool_resident_bytes();
    uint64_t rss_sum = statm_rss((long)getpid()) + statm_rss((long)pid);
    kiln__budget_remove_pid((long)pid);
    (void)!write(down[1], &c, 1);
    waitpid(pid, NULL, 0);
    munmap(p, n);
    KT_CHECK(counted < before + n + n / 4);
    KT_CHECK(rss_sum > before + n + n / 2); /* the control: RSS counts it twice */
}

/* The predict of the arithmetic cases: the job's argument is its prediction. */
static uint64_t fixed_predict(void *user, void *arg)
{
    (void)user;
    return *(const uint64_t *)arg;
}

/* The arithmetic cases' budget: 1000 MiB for four workers over
 * fixed_predict, its base at `base`. */
static void fixed_budget(struct kiln__budget *b, uint64_t base)
{
    struct kiln_pool_memory_model model = KILN_POOL_MEMORY_MODEL_INIT;
    model.predict = fixed_predict;
    KT_CHECK_EQ(kiln__budget_init(b, 1000 * MIB, 4, &model), KILN_OK);
    b->base = base;
}

/*
 * A running job predicted 10 MiB that has been seen to grow 60 MiB counts
 * 60 MiB when the next job asks (the model's rule, with the reading still
 * low as one that lags): a 45 MiB job does not fit 100 MiB over the base.
 * The control: the running job's prediction alone (what the rule counted
 * before) would admit it. Arithmetic on the budget's own state: no
 * threads, no timing.
 */
KT_CASE(running_growth_counts)
{
    struct kiln__budget b;
    fixed_budget(&b, 900 * MIB); /* the limit is 100 MiB over it */
    uint64_t lagging = b.base + 10 * MIB;
    kiln__budget_start(&b, 0, b.base, 10 * MIB);
    uint64_t next = 45 * MIB;
    /* Before any sample: its prediction counts, the next job fits. */
    KT_CHECK(!kiln__budget_hold(&b, 1, lagging, next));
    kiln__budget_sample(&b, b.base + 60 * MIB); /* it grew to 60 MiB */
    KT_CHECK_EQ(b.seen[0], 60 * MIB);
    KT_CHECK(kiln__budget_hold(&b, 1, lagging, next));
    /* The control: by the predictions alone it would have started. */
    KT_CHECK(b.base + b.committed + next <= b.limit);
    KT_CHECK(lagging + next <= b.limit);
    /* A job that fits beside what the first has grown still starts. */
    KT_CHECK(!kiln__budget_hold(&b, 1, lagging, 30 * MIB));
    uint64_t predicted = 0, grown = 0;
    kiln__budget_end(&b, 0, b.base + 60 * MIB, &predicted, &grown);
    KT_CHECK_EQ(predicted, 10 * MIB);
    kiln__budget_free(&b);
}

/*
 * A job that ran beside another and is alone only at its end learns its
 * share, not the peak of the two: A (predicted 20 MiB) and B (60 MiB) run
 * together to 80 MiB over the base, B ends, and A ends with the reading
 * back at 20 MiB over the base. A learns its share (an equal part, 40
 * MiB, being more than its proportional 20); taking the peak over the
 * lower of its start and end (80 MiB) would give it B's growth. The
 * control: a job that ran alone throughout still learns that peak (30
 * MiB, with its end's reading back at the base).
 */
KT_CASE(alone_at_end_learns_share)
{
    struct kiln__budget b;
    fixed_budget(&b, 100 * MIB);
    uint64_t predicted = 0, grown = 0;
    kiln__budget_start(&b, 0, b.base, 20 * MIB);
    kiln__budget_start(&b, 1, b.base, 60 * MIB);
    kiln__budget_sample(&b, b.base + 80 * MIB);
    kiln__budget_end(&b, 1, b.base + 80 * MIB, &predicted, &grown);
    KT_CHECK_EQ(grown, 60 * MIB);
    kiln__budget_end(&b, 0, b.base + 20 * MIB, &predicted, &grown);
    KT_CHECK_EQ(predicted, 20 * MIB);
    KT_CHECK_EQ(grown, 40 * MIB);
    /* The control: alone from start to end. */
    b.base = 100 * MIB;
    kiln__budget_start(&b, 2, b.base, 20 * MIB);
    kiln__budget_sample(&b, b.base + 30 * MIB);
    kiln__budget_end(&b, 2, b.base, &predicted, &grown);
    KT_CHECK_EQ(grown, 30 * MIB);
    kiln__budget_free(&b);
}

/*
 * A job predicted low learns at least an equal part of what the running
 * jobs grew: A (predicted 1 MiB) beside B (99 MiB) while the counted
 * memory grows 100 MiB over the base learns 50 MiB, not its proportional
 * 1 MiB (the control: what the proportion alone gives), so a class
 * predicted low does not teach itself to stay low. B keeps its larger
 * proportional share; the shares sum to more than was counted, never
 * less.
 */
KT_CASE(low_prediction_learns_equal_part)
{
    struct kiln__budget b;
    fixed_budget(&b, 100 * MIB);
    kiln__budget_start(&b, 0, b.base, 1 * MIB);
    kiln__budget_start(&b, 1, b.base, 99 * MIB);
    kiln__budget_sample(&b, b.base + 100 * MIB);
    uint64_t proportional = (uint64_t)((double)b.pred[0] * 100.0 / 100.0);
    KT_CHECK_EQ(proportional, 1 * MIB); /* the control */
    KT_CHECK_EQ(b.seen[0], 50 * MIB);
    KT_CHECK_EQ(b.seen[1], 99 * MIB);
    KT_CHECK(b.seen[0] + b.seen[1] >= 100 * MIB);
    uint64_t predicted = 0, grown = 0;
    kiln__budget_end(&b, 0, b.base + 100 * MIB, &predicted, &grown);
    KT_CHECK_EQ(grown, 50 * MIB);
    kiln__budget_free(&b);
}

/* The pool's heap trim (kiln__pool_trim_heap, at the end of a budgeted
 * pool): 64 MiB of 64 KiB blocks (below glibc's mmap threshold: heap
 * memory), touched, freed below a block still in use (so free cannot give
 * them back from the top). The control half: after the free the memory is
 * still resident; after the trim at least half of it is gone. Where the
 * process's malloc is not glibc's the trim does nothing by design: skipped. */
KT_CASE(heap_trim_gives_back)
{
    enum { N = 1024, BLOCK = 64 * 1024 };
    char **b = calloc(N, sizeof(*b));
    KT_REQUIRE(b);
    for (int i = 0; i < N; i++) {
        b[i] = malloc(BLOCK);
        KT_REQUIRE(b[i]);
        memset(b[i], 0x5a, BLOCK);
    }
    char *pin = malloc(64); /* above them: the free space is not the top */
    KT_REQUIRE(pin);
    uint64_t full = kiln_rss_bytes();
    for (int i = 0; i < N; i++)
        free(b[i]);
    uint64_t freed = kiln_rss_bytes();
    if (!kiln__pool_trim_heap()) {
        printf("skipped: the process's malloc is not glibc's\n");
        exit(77);
    }
    uint64_t trimmed = kiln_rss_bytes();
    printf("resident: %.1f MiB full, %.1f after free, %.1f after the trim\n", full / 1048576.0,
           freed / 1048576.0, trimmed / 1048576.0);
    KT_CHECK(freed + (uint64_t)N * BLOCK / 2 > full); /* the control: free kept it */
    KT_CHECK(trimmed + (uint64_t)N * BLOCK / 2 < freed);
    free(pin);
    free(b);
}

KT_MAIN(KT_ENTRY(prediction_admits_more), KT_ENTRY(largest_seen_serialises),
        KT_ENTRY(low_prediction_corrected), KT_ENTRY(low_prediction_uncorrected_passes),
        KT_ENTRY(pss_counts_shared_once), KT_ENTRY(running_growth_counts),
        KT_ENTRY(alone_at_end_learns_share), KT_ENTRY(low_prediction_learns_equal_part),
        KT_ENTRY(heap_trim_gives_back))
