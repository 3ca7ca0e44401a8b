/*
 * budget.c - the memory budget: what kiln and its worker processes hold
 * resident, the default budget, and the rule a pool's workers follow.
 *
 * Design. Memory is read, not estimated, for this process and for every
 * worker process registered (kiln__budget_add_pid), so what a driver
 * allocates inside a compile is counted too. What counts is the
 * proportional set size where the kernel has it (Pss of smaps_rollup,
 * Linux 4.14 and later): a page kiln shares with its workers (the
 * driver's libraries, a mapping made before the fork) counts once over
 * them all, not once per process as resident sizes would. Reading it walks
 * the page tables (about half a millisecond for a small process, more for
 * a large one, with the process's mmap lock held for reading), so it is
 * read at most every KILN__PSS_REFRESH_NS per process and followed in
 * between by the change of the resident count (/proc/<pid>/statm, about
 * ten microseconds). Without it (an older kernel, Windows) the resident
 * count itself counts (GetProcessMemoryInfo's working set on Windows). A
 * worker reads it before it takes a job and holds back while it plus the
 * growth one job may add would pass the budget.
 *
 * Invariants and why they hold:
 *
 * - At least one job always runs: a worker holds back only while another
 *   job runs (pool.c checks `running` under the pool's lock), so a budget
 *   below what one job needs slows the pool to one job, never to none.
 *
 * - Order is kept: holding back delays the head of the queue, it never
 *   skips it, so the largest programs still go first.
 *
 * - The expected growth of a job is the largest growth of resident memory
 *   seen over one job of this pool: from its start to the most read while
 *   it ran (every held worker reads every few milliseconds, and each job's
 *   end reads too), so a driver that frees its memory before returning is
 *   still counted at its peak. Before any job finished, a job is taken to
 *   need half the budget or 512 MiB (what the pool policy expects of one
 *   build), whichever is less: a tight budget runs one job until it has
 *   seen one, a large one starts many at once.
 *
 * - Readings lag: a job that just started has not grown yet. So the rule
 *   takes the larger of the reading (resident + one job) and a model
 *   (resident when the pool was made + one job for each running job and
 *   the new one), and the model keeps a burst of starts under the budget.
 *   With a memory model each running job counts what it was seen to grow
 *   so far (its share of the counted memory above the base: in proportion
 *   to its prediction, at least an equal part), never less than its
 *   prediction: a job predicted too low counts at its real size from the
 *   first sample on, not only once it ended. The shares may sum to more
 *   than what is counted (the safe side), never to less.
 *
 * - The registry is a fixed array under one mutex: adding, removing and
 *   summing never allocate, and a pid is read only while registered.
 */
#include "kiln_internal.h"
#include "pool_internal.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static pthread_mutex_t pids_lock = PTHREAD_MUTEX_INITIALIZER;
static long pids[KILN__BUDGET_MAX_PIDS];
static unsigned npids;

int kiln__budget_add_pid(long pid)
{
    if (pid <= 0)
        return KILN_EINVAL;
    int rc = KILN_OK;
    pthread_mutex_lock(&pids_lock);
    if (npids == KILN__BUDGET_MAX_PIDS)
        rc = KILN_ERANGE;
    else
        pids[npids++] = pid;
    pthread_mutex_unlock(&pids_lock);
    return rc;
}

void kiln__budget_remove_pid(long pid)
{
    pthread_mutex_lock(&pids_lock);
    for (unsigned i = 0; i < npids; i++)
        if (pids[i] == pid) {
            pids[i] = pids[--npids];
            break;
        }
    pthread_mutex_unlock(&pids_lock);
}

/* The last PSS read per process: pid (0: this process), when, the PSS and
 * the resident count then. Guarded by pss_lock; one reader at a time. */
struct pss_seen {
    long pid;
    uint64_t at_ns;
    uint64_t pss;
    uint64_t rss;
    uint64_t cost_ns; /* how long the last read took */
};
static pthread_mutex_t pss_lock = PTHREAD_MUTEX_INITIALIZER;
static struct pss_seen pss_cache[KILN__BUDGET_MAX_PIDS + 1];
static unsigned npss;

/* How much the resident count may move while the PSS is read for the pair
 * to be kept. */
#define PSS_STILL_BYTES (1u << 20)
/* The PSS is read at most once per this many times its reading's cost. */
#define PSS_COST_SHARE 50u

/* What the budget counts for `pid`: its PSS as last read (at most
 * KILN__PSS_REFRESH_NS ago) plus how much its resident count changed since,
 * or the resident count where there is no PSS. */
static uint64_t counted_of(long pid)
{
    uint64_t rss = kiln__pool_rss_of(pid);
    if (rss == 0)
        return 0;
    uint64_t now = kiln_now_ns();
    pthread_mutex_lock(&pss_lock);
    unsigned i = 0;
    while (i < npss && pss_cache[i].pid != pid)
        i++;
    if (i == npss) {
        if (npss == KILN__BUDGET_MAX_PIDS + 1)
            i = pid == 0 ? 0 : 1 + (unsigned)((uint64_t)pid % KILN__BUDGET_MAX_PIDS);
        else
            npss++;
        pss_cache[i] = (struct pss_seen){.pid = pid};
    }
    struct pss_seen *e = &pss_cache[i];
    /* At most every KILN__PSS_REFRESH_NS, and never more than a fiftieth
     * of the time: the read walks the page tables (35 ms for 2 GiB of 4 KiB
     * pages) with the process's mmap lock held for reading. */
    uint64_t every = e->cost_ns * PSS_COST_SHARE;
    if (every < KILN__PSS_REFRESH_NS)
        every = KILN__PSS_REFRESH_NS;
    if (e->at_ns == 0 || now - e->at_ns >= every) {
        /* A pair read while the process's memory moved (the PSS read takes
         * a while) would offset every estimate until the next one: kept
         * only when the resident count stood still around it. */
        uint64_t pss = kiln__pool_pss_of(pid);
        uint64_t after = kiln__pool_rss_of(pid);
        uint64_t cost = kiln_now_ns() - now;
        uint64_t moved = after > rss ? after - rss : rss - after;
        if (moved <= PSS_STILL_BYTES) {
            e->pss = pss;
            e->rss = after;
        } /* else the last pair stays the base of the estimate */
        e->at_ns = now;
        e->cost_ns = cost;
        rss = after ? after : rss;
    }
    uint64_t v = rss;
    if (e->pss) {
        int64_t moved = (int64_t)(rss - e->rss);
        if (moved < 0 && (uint64_t)-moved >= e->pss)
            /* The pair was read while the resident count ran ahead of the
             * pages (an unmap under way: measured, a pair of 0.44 MiB PSS
             * and 4.03 MiB resident, then 1.84 MiB resident), so the
             * estimate would be nothing and a reading of 0 admits every
             * job. The resident count stands in until a new pair. */
            e->at_ns = 0;
        else
            v = e->pss + (uint64_t)moved;
    }
    pthread_mutex_unlock(&pss_lock);
    return v;
}

uint64_t kiln_pool_resident_bytes(void)
{
    uint64_t total = counted_of(0);
    long copy[KILN__BUDGET_MAX_PIDS];
    pthread_mutex_lock(&pids_lock);
    unsigned n = npids;
    for (unsigned i = 0; i < n; i++)
        copy[i] = pids[i];
    pthread_mutex_unlock(&pids_lock);
    /* Read outside the lock: a worker that exits meanwhile reads as 0. */
    for (unsigned i = 0; i < n; i++)
        total += counted_of(copy[i]);
    return total;
}

static double mib(uint64_t bytes)
{
    return (double)bytes / (double)(1u << 20);
}

uint64_t kiln_pool_default_memory_budget(char *reason, size_t cap)
{
    struct kiln_pool_machine m = KILN_POOL_MACHINE_INIT;
    kiln_pool_probe(NULL, NULL, &m);
    uint64_t rss = kiln_pool_resident_bytes();
    uint64_t by_free = 0, by_cgroup = 0, cg = 0;
    if (m.mem_available && !(m.flags & KILN_POOL_MEM_UNKNOWN))
        by_free = rss + m.mem_available / 4 * 3;
    if (kiln__pool_memory_max(NULL, NULL, &cg) == KILN_OK && cg > 0)
        by_cgroup = cg / 4 * 3;
    uint64_t budget = by_free;
    if (by_cgroup && (!budget || by_cgroup < budget))
        budget = by_cgroup;
    if (reason && cap) {
        if (!budget)
            snprintf(reason, cap, "no memory budget: free memory unknown");
        else if (budget == by_cgroup)
            snprintf(reason, cap,
                     "memory budget %.0f MiB: three quarters of the cgroup's memory.max "
                     "(%.0f MiB)",
                     mib(budget), mib(cg));
        else
            snprintf(reason, cap,
                     "memory budget %.0f MiB: resident %.0f MiB plus three quarters of "
                     "MemAvailable (%.0f MiB)",
                     mib(budget), mib(rss), mib(m.mem_available));
    }
    return budget;
}

int kiln__budget_init(struct kiln__budget *b, uint64_t limit, unsigned workers,
                      const struct kiln_pool_memory_model *model)
{
    memset(b, 0, sizeof(*b));
    if (!limit)
        return KILN_OK;
    b->start = kiln__calloc(workers, sizeof(*b->start));
    b->peak = kiln__calloc(workers, sizeof(*b->peak));
    b->busy = kiln__calloc(workers, sizeof(*b->busy));
    b->shared = kiln__calloc(workers, sizeof(*b->shared));
    b->pred = kiln__calloc(workers, sizeof(*b->pred));
    b->seen = kiln__calloc(workers, sizeof(*b->seen));
    if (!b->start || !b->peak || !b->busy || !b->shared || !b->pred || !b->seen) {
        kiln__budget_free(b);
        return KILN_ENOMEM;
    }
    if (model && model->predict) {
        struct kiln_pool_memory_model m = KILN_POOL_MEMORY_MODEL_INIT;
        int rc = KILN_STRUCT_IN(&m, model, "kiln_pool_memory_model");
        if (rc < 0) {
            kiln__budget_free(b);
            return rc;
        }
        b->model = m;
        b->has_model = true;
    }
    b->limit = limit;
    b->nworkers = workers;
    b->base = kiln_pool_resident_bytes();
    return KILN_OK;
}

void kiln__budget_free(struct kiln__budget *b)
{
    kiln__free(b->start);
    kiln__free(b->peak);
    kiln__free(b->busy);
    kiln__free(b->shared);
    kiln__free(b->pred);
    kiln__free(b->seen);
    b->start = b->peak = b->pred = b->seen = NULL;
    b->busy = b->shared = NULL;
}

void kiln__budget_sample(struct kiln__budget *b, uint64_t rss)
{
    for (unsigned i = 0; i < b->nworkers; i++)
        if (b->busy[i] && rss > b->peak[i])
            b->peak[i] = rss;
    if (!b->has_model || b->committed == 0 || rss <= b->base)
        return;
    /* What is counted above the base belongs to the running jobs: each in
     * proportion to what it was predicted to need, and never less than an
     * equal part. A share in proportion alone teaches a class predicted
     * low to stay low (on the H100, builds predicted 1-2 MiB beside ones
     * predicted 25 MiB learned 1-2 MiB while the process grew 200 MiB
     * over them, and the next fifteen started at once and grew 1.2 GiB
     * against a 642 MiB budget). */
    unsigned running = 0;
    for (unsigned i = 0; i < b->nworkers; i++)
        running += b->busy[i];
    if (running == 0)
        return;
    uint64_t above = rss - b->base;
    uint64_t equal = above / running;
    double per = (double)above / (double)b->committed;
    for (unsigned i = 0; i < b->nworkers; i++) {
        if (!b->busy[i])
            continue;
        uint64_t share = (uint64_t)((double)b->pred[i] * per);
        if (share < equal)
            share = equal;
        if (share > b->seen[i])
            b->seen[i] = share;
    }
}

/* Before any job finished: what a driver may need for one large pipeline
 * (the pool policy's figure for a build worker). */
#define FIRST_JOB_GUESS (512ull << 20)

/* What one more job is expected to add: what one was seen to add, or,
 * before any job finished, half the budget or FIRST_JOB_GUESS, whichever
 * is less (so a tight budget runs one job until it knows better). */
static uint64_t expected_growth(const struct kiln__budget *b)
{
    uint64_t g = b->growth;
    if (!g)
        g = b->limit / 2 < FIRST_JOB_GUESS ? b->limit / 2 : FIRST_JOB_GUESS;
    return g ? g : 1;
}

uint64_t kiln__budget_need(const struct kiln__budget *b, void *arg)
{
    uint64_t need = b->has_model ? b->model.predict(b->model.user, arg) : 0;
    if (!need)
        need = expected_growth(b);
    /* At or above the budget: alone (and the sums below cannot overflow). */
    return need > b->limit ? b->limit : need;
}

/* What the running jobs hold by the model: each what it has been seen to
 * grow so far (its share of the counted memory above the base), never
 * less than its prediction, so a job predicted too low counts as large as
 * it already is. */
static uint64_t held_by_running(const struct kiln__budget *b)
{
    uint64_t held = 0;
    for (unsigned i = 0; i < b->nworkers; i++)
        if (b->busy[i])
            held += b->pred[i] > b->seen[i] ? b->pred[i] : b->seen[i];
    return held;
}

bool kiln__budget_hold(struct kiln__budget *b, unsigned running, uint64_t rss, uint64_t need)
{
    uint64_t by_reading = rss + need;
    uint64_t by_model = b->has_model ? b->base + held_by_running(b) + need
                                     : b->base + need * ((uint64_t)running + 1);
    uint64_t projected = by_reading > by_model ? by_reading : by_model;
    if (rss == 0 || projected <= b->limit)
        return false;
    if (!b->logged) {
        b->logged = true;
        KILN_INFO("pool",
                  "memory budget: %u job%s running, resident %.0f MiB, %.0f MiB expected for the "
                  "next: it would pass %.0f MiB; fewer jobs run at once",
                  running, running == 1 ? "" : "s", mib(rss), mib(need), mib(b->limit));
    }
    return true;
}

void kiln__budget_start(struct kiln__budget *b, unsigned worker, uint64_t rss, uint64_t need)
{
    /* `kiln -vv`: each admission with the figures the rule weighed. */
    KILN_DEBUG("pool",
               "memory budget: worker %u starts a job at %.0f ms: counted %.1f MiB, base %.1f MiB, "
               "running jobs hold %.1f MiB, this one needs %.1f MiB, limit %.1f MiB",
               worker, (double)kiln_now_ns() / 1e6, mib(rss), mib(b->base),
               mib(b->has_model ? held_by_running(b) : 0), mib(need), mib(b->limit));
    /* Whether it and every job now running ever ran beside another. */
    b->shared[worker] = false;
    for (unsigned i = 0; i < b->nworkers; i++)
        if (b->busy[i] && i != worker)
            b->shared[i] = b->shared[worker] = true;
    b->busy[worker] = true;
    b->start[worker] = rss;
    b->peak[worker] = rss;
    b->pred[worker] = need;
    b->seen[worker] = 0;
    b->committed += need;
}

void kiln__budget_end(struct kiln__budget *b, unsigned worker, uint64_t rss, uint64_t *predicted,
                      uint64_t *grown)
{
    kiln__budget_sample(b, rss);
    uint64_t top = b->peak[worker] > rss ? b->peak[worker] : rss;
    uint64_t own = top > b->start[worker] ? top - b->start[worker] : 0;
    if (own > b->growth)
        b->growth = own;
    b->busy[worker] = false;
    b->committed -= b->pred[worker];
    *predicted = b->pred[worker];
    *grown = b->seen[worker];
    if (!b->shared[worker] && rss) {
        /* It ran alone from its start to its end: what it held above the
         * lower of its start and end (memory freed meanwhile, as the
         * translate phase's leftovers, would otherwise be taken off its
         * growth). A job that is only alone at its end is not: the peak
         * while it ran holds the jobs that ended before it, and taking
         * that for its own need (on the H100, 968 MiB for a build whose
         * share was a tenth of it) holds every later build of its class to
         * one at a time. */
        uint64_t low = rss < b->start[worker] ? rss : b->start[worker];
        if (top > low && top - low > *grown)
            *grown = top - low;
    }
    KILN_DEBUG("pool",
               "memory budget: worker %u ended a job at %.0f ms: counted %.1f MiB, predicted %.1f "
               "MiB, its share seen %.1f MiB, the process grew %.1f MiB while it ran",
               worker, (double)kiln_now_ns() / 1e6, mib(rss), mib(*predicted), mib(*grown),
               mib(own));
    if (!b->has_model)
        return;
    /* The base follows what the driver keeps between jobs: the reading less
     * what the jobs still running may hold (at least their predictions), or
     * the reading itself once nothing runs. */
    uint64_t held = held_by_running(b);
    bool any = false;
    for (unsigned i = 0; i < b->nworkers && !any; i++)
        any = b->busy[i];
    if (!any && rss)
        b->base = rss;
    else if (rss > held && rss - held > b->base)
        b->base = rss - held;
}
