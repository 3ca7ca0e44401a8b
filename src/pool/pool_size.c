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
#include <string.h>

unsigned kiln_pool_auto_workers(enum kiln_pool_work work, unsigned requested,
                                struct kiln_pool_plan *plan)
{
    /* A plan of size 0 is logged and left unwritten (there is no error to
     * return). */
    if (plan && kiln__struct_out_check(plan, "kiln_pool_plan") < 0)
        plan = NULL;
    struct kiln_pool_plan p = {.size = sizeof(p)};
    if (requested > 0) {
        unsigned n = requested;
        if (work == KILN_POOL_WORK_READ && n > KILN_POOL_MAX_READERS)
            n = KILN_POOL_MAX_READERS;
        p = (struct kiln_pool_plan){
            .size = sizeof(p), .workers = n, .cpus = n, .bound = KILN_POOL_BY_CALLER};
        snprintf(p.reason, sizeof(p.reason), "%u worker%s: set by the caller%s", n,
                 n == 1 ? "" : "s", n < requested ? " (cut to the most readers)" : "");
        KILN_STRUCT_OUT(plan, &p);
        return n;
    }
    struct kiln_pool_machine m = KILN_POOL_MACHINE_INIT;
    struct kiln_pool_limits lim = KILN_POOL_LIMITS_INIT;
    kiln_pool_work_limits(work, &lim);
    kiln_pool_probe(NULL, NULL, &m);
    kiln_pool_policy(&m, &lim, &p);
    KILN_INFO("pool", "%s", p.reason);
    KILN_STRUCT_OUT(plan, &p);
    return p.workers;
}

int kiln_pool_probe(const char *proc_root, const char *cgroup_root,
                    struct kiln_pool_machine *machine)
{
    if (!machine)
        return KILN_EINVAL;
    KILN_TRY(kiln__struct_out_check(machine, "kiln_pool_machine"));
    struct kiln_pool_machine m = KILN_POOL_MACHINE_INIT;
    memset(&m, 0, sizeof(m));
    int rc = kiln__pool_probe(proc_root, cgroup_root, &m);
    m.size = sizeof(m);
    KILN_STRUCT_OUT(machine, &m);
    return rc;
}
