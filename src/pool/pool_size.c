/*
 * pool_size.c - kiln_pool_auto_workers: the machine as the probe reads it,
 * sized by the policy.
 *
 * Design: the one file of the pool that both reads the system (through the
 * platform file's kiln_pool_probe) and applies the pure policy of
 * policy.c, so the platform file only calls down into the parsers of
 * policy.c and no two files of the module call each other both ways.
 */
#include "kiln_internal.h"
#include "pool_internal.h"

#include <stdio.h>

unsigned kiln_pool_auto_workers(enum kiln_pool_work work, unsigned requested,
                                struct kiln_pool_plan *plan)
{
    struct kiln_pool_plan local;
    if (!plan)
        plan = &local;
    if (requested > 0) {
        unsigned n = requested;
        if (work == KILN_POOL_WORK_READ && n > KILN_POOL_MAX_READERS)
            n = KILN_POOL_MAX_READERS;
        *plan = (struct kiln_pool_plan){.workers = n, .cpus = n, .bound = KILN_POOL_BY_CALLER};
        snprintf(plan->reason, sizeof(plan->reason), "%u worker%s: set by the caller%s", n,
                 n == 1 ? "" : "s", n < requested ? " (cut to the most readers)" : "");
        return n;
    }
    struct kiln_pool_machine m;
    struct kiln_pool_limits lim;
    kiln_pool_work_limits(work, &lim);
    kiln_pool_probe(NULL, NULL, &m);
    kiln_pool_policy(&m, &lim, plan);
    KILN_INFO("pool", "%s", plan->reason);
    return plan->workers;
}
