/*
 * topo_apply.c - kiln_pin_largest_cache and kiln_affinity_apply: read the
 * system, choose, pin.
 *
 * Design: the one file of topo that both reads the system (through the
 * platform file) and uses the portable choice, so topo.c stays free of
 * system reads and the platform file only calls down into topo.c: no two
 * files of the module call each other both ways. A failed step leaves the
 * process's affinity as it was and names the step in the plan's reason.
 */
#include "topo_internal.h"

#include <assert.h>
#include <stdio.h>

int kiln_pin_largest_cache(const struct kiln_topo_env *env, struct kiln_pin_plan *out)
{
    static const struct kiln_topo_env real_system;
    if (!env)
        env = &real_system;
    struct kiln_pin_plan plan = {.domain = -1};
    struct kiln_topo *topo = NULL;
    struct kiln_cpuset allowed = {0};
    const char *step = "reading the cache topology";
    int rc = kiln_topo_read(env->sysfs_root, 0, &topo);
    if (rc == KILN_OK) {
        step = "finding the CPUs this process may use";
        rc = kiln_topo_allowed(env, &allowed);
    }
    if (rc == KILN_OK) {
        step = "choosing";
        rc = kiln_topo_choose(topo, &allowed, &plan);
    }
    if (rc == KILN_OK && plan.verdict == KILN_PIN_APPLY) {
        step = "setting the affinity of the process's threads";
        rc = kiln_process_set_affinity(env->proc_root, &plan.cpus);
    }
    if (rc < 0) {
        kiln_pin_plan_free(&plan);
        plan = (struct kiln_pin_plan){.verdict = KILN_PIN_FAILED, .domain = -1};
        snprintf(plan.reason, sizeof(plan.reason), "not pinned: %s failed: %s", step,
                 kiln_strerror(rc));
    }
    KILN_INFO("topo", "cache affinity: %s: %s", kiln_pin_verdict_name(plan.verdict), plan.reason);
    kiln_cpuset_free(&allowed);
    kiln_topo_free(topo);
    if (out)
        *out = plan;
    else
        kiln_pin_plan_free(&plan);
    return rc;
}

int kiln_affinity_apply(const struct kiln_affinity_decision *decision,
                        const struct kiln_topo_env *env, struct kiln_pin_plan *plan)
{
    if (!decision)
        return KILN_EINVAL;
    assert(decision);
    KILN_INFO("topo", "cache affinity %s: %s", decision->on ? "on" : "off", decision->reason);
    if (decision->on)
        return kiln_pin_largest_cache(env, plan);
    if (plan) {
        *plan = (struct kiln_pin_plan){.verdict = KILN_PIN_OFF, .domain = -1};
        snprintf(plan->reason, sizeof(plan->reason), "not asked for: %s", decision->reason);
    }
    return KILN_OK;
}
