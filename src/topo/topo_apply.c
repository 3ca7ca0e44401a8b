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
    if (out)
        KILN_TRY(kiln__struct_out_check(out, "kiln_pin_plan"));
    struct kiln_topo_env own;
    KILN_TRY(KILN_STRUCT_IN(&own, env, "kiln_topo_env"));
    env = &own;
    struct kiln_pin_plan plan = {.size = sizeof(plan), .domain = -1};
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
        plan = (struct kiln_pin_plan){
            .size = sizeof(struct kiln_pin_plan), .verdict = KILN_PIN_FAILED, .domain = -1};
        snprintf(plan.reason, sizeof(plan.reason), "not pinned: %s failed: %s", step,
                 kiln_strerror(rc));
    }
    KILN_INFO("topo", "cache affinity: %s: %s", kiln_pin_verdict_name(plan.verdict), plan.reason);
    kiln_cpuset_free(&allowed);
    kiln_topo_free(topo);
    kiln__pin_plan_out(out, &plan);
    return rc;
}

int kiln_affinity_apply(const struct kiln_affinity_decision *decision,
                        const struct kiln_topo_env *env, struct kiln_pin_plan *plan)
{
    if (!decision)
        return KILN_EINVAL;
    struct kiln_affinity_decision d;
    KILN_TRY(KILN_STRUCT_IN(&d, decision, "kiln_affinity_decision"));
    decision = &d;
    if (plan)
        KILN_TRY(kiln__struct_out_check(plan, "kiln_pin_plan"));
    KILN_INFO("topo", "cache affinity %s: %s", decision->on ? "on" : "off", decision->reason);
    if (decision->on)
        return kiln_pin_largest_cache(env, plan);
    struct kiln_pin_plan p = {.size = sizeof(p), .verdict = KILN_PIN_OFF, .domain = -1};
    snprintf(p.reason, sizeof(p.reason), "not asked for: %s", decision->reason);
    kiln__pin_plan_out(plan, &p);
    return KILN_OK;
}
