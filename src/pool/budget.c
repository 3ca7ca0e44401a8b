/*
 * budget.c - the memory budget: what kiln and its worker processes hold
 * resident, the default budget, and the rule a pool's workers follow.
 *
 * Design. Resident memory is read, not estimated: /proc/<pid>/statm on
 * Linux (one small read, about ten microseconds) or GetProcessMemoryInfo
 * on Windows, for this process and for every worker process registered
 * (kiln__budget_add_pid), so what a driver allocates inside a compile is
 * counted too. A worker reads it before it takes a job and holds back
 * while it plus the growth one job may add would pass the budget.
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
 *   seen over one job of this pool (at least a sixteenth of the budget
 *   before any was seen), so the rule learns what a build costs here.
 *
 * - The registry is a fixed array under one mutex: adding, removing and
 *   summing never allocate, and a pid is read only while registered.
 */
#include "kiln_internal.h"
#include "pool_internal.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>

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

uint64_t kiln_pool_resident_bytes(void)
{
    uint64_t total = kiln__pool_rss_of(0);
    long copy[KILN__BUDGET_MAX_PIDS];
    pthread_mutex_lock(&pids_lock);
    unsigned n = npids;
    for (unsigned i = 0; i < n; i++)
        copy[i] = pids[i];
    pthread_mutex_unlock(&pids_lock);
    /* Read outside the lock: a worker that exits meanwhile reads as 0. */
    for (unsigned i = 0; i < n; i++)
        total += kiln__pool_rss_of(copy[i]);
    return total;
}

static double mib(uint64_t bytes)
{
    return (double)bytes / (double)(1u << 20);
}

uint64_t kiln_pool_default_memory_budget(char *reason, size_t cap)
{
    struct kiln_pool_machine m;
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

bool kiln__budget_hold(struct kiln__budget *b, uint64_t *rss)
{
    *rss = kiln_pool_resident_bytes();
    uint64_t growth = atomic_load_explicit(&b->growth, memory_order_relaxed);
    uint64_t floor = b->limit / 16;
    if (growth < floor)
        growth = floor;
    if (*rss == 0 || *rss + growth <= b->limit)
        return false;
    if (!atomic_exchange(&b->logged, true))
        KILN_INFO("pool",
                  "memory budget: resident %.0f MiB plus %.0f MiB for one more job would pass "
                  "%.0f MiB; fewer jobs run at once",
                  mib(*rss), mib(growth), mib(b->limit));
    return true;
}

void kiln__budget_job_done(struct kiln__budget *b, uint64_t rss_before)
{
    uint64_t now = kiln_pool_resident_bytes();
    if (now <= rss_before)
        return;
    uint64_t grew = now - rss_before;
    uint64_t seen = atomic_load_explicit(&b->growth, memory_order_relaxed);
    while (grew > seen &&
           !atomic_compare_exchange_weak_explicit(&b->growth, &seen, grew, memory_order_relaxed,
                                                  memory_order_relaxed)) {
    }
}
