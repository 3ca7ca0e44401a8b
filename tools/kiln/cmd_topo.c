/*
 * cmd_topo.c - `kiln topo`: the CPU cache domains, which one is largest and
 * whether pinning would apply; and cli_apply_cache_affinity(), the opt-in
 * rule every heavy command runs before it starts work.
 *
 * The command only reports: it never pins. With --sysfs it reads a copied
 * tree, whose CPU numbers need not match this machine's, so the allowed set
 * is then the tree's online CPUs (or --allowed), not this process's mask.
 * read_us times kiln_topo_read() alone, the figure start-up pays.
 */
#include "cli.h"
#include "commands.h"

#include <getopt.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *out, const char *name)
{
    fprintf(out,
            "usage: %s [--sysfs ROOT] [--allowed LIST] [--all-levels] [--json]\n\n"
            "Shows the CPU cache domains, the largest last-level one, and whether pinning to\n"
            "it would apply and why. It never pins; 'kiln prepare' and 'kiln start' do with\n"
            "--cache-affinity (or %s=1; the flag wins, default off).\n\n"
            "  --sysfs ROOT     read ROOT instead of /sys/devices/system/cpu\n"
            "  --allowed LIST   choose for these CPUs (\"0-7,16-23\") instead of the ones\n"
            "                   this process may use (with --sysfs: the tree's online CPUs)\n"
            "  --all-levels     read and list every cache level, not only the last\n"
            "  --json           one JSON object on stdout\n",
            name, KILN_CPU_CACHE_AFFINITY_ENV);
}

static const char *source_name(enum kiln_affinity_source s)
{
    switch (s) {
    case KILN_AFFINITY_FLAG:
        return "flag";
    case KILN_AFFINITY_ENV:
        return "environment";
    case KILN_AFFINITY_DEFAULT:
        break;
    }
    return "default";
}

/* A CPU list in a new string (free it). NULL only when out of memory. */
static char *list_dup(const struct kiln_cpuset *set)
{
    size_t n = kiln_cpuset_format(set, NULL, 0);
    char *s = malloc(n + 1);
    if (s)
        kiln_cpuset_format(set, s, n + 1);
    return s;
}

static void print_json(const struct kiln_topo *t, const char *root, double read_us,
                       const struct kiln_cpuset *allowed, const char *allowed_from,
                       const struct kiln_pin_plan *plan, const struct kiln_affinity_decision *d,
                       int decide_rc)
{
    struct cli_json j;
    char *s;
    cli_json_begin(&j);
    cli_json_str(&j, "sysfs", root);
    cli_json_seconds(&j, "read", read_us / 1e6);
    cli_json_u64(&j, "files_read", t->files_read);
    cli_json_bool(&j, "all_levels", t->all_levels);
    cli_json_str(&j, "online", (s = list_dup(&t->online)) ? s : "");
    free(s);
    cli_json_str(&j, "allowed", (s = list_dup(allowed)) ? s : "");
    free(s);
    cli_json_str(&j, "allowed_from", allowed_from);
    cli_json_u64(&j, "last_level", t->last_level);
    cli_json_array_begin(&j, "domains");
    for (size_t i = 0; i < t->ndomains; i++) {
        const struct kiln_cpu_cache_domain *dom = &t->domains[i];
        cli_json_object_begin(&j, NULL);
        cli_json_u64(&j, "level", dom->level);
        cli_json_str(&j, "type", kiln_cpu_cache_type_name(dom->type));
        cli_json_u64(&j, "size", dom->size);
        cli_json_i64(&j, "id", dom->id);
        cli_json_str(&j, "cpus", (s = list_dup(&dom->cpus)) ? s : "");
        free(s);
        cli_json_u64(&j, "cpu_count", kiln_cpuset_count(&dom->cpus));
        cli_json_bool(&j, "largest", (int64_t)i == t->largest);
        cli_json_object_end(&j);
    }
    cli_json_array_end(&j);
    if (t->largest >= 0)
        cli_json_u64(&j, "largest", (uint64_t)t->largest);
    else
        cli_json_null(&j, "largest");
    cli_json_str(&j, "note", t->note);
    cli_json_object_begin(&j, "pin");
    cli_json_str(&j, "verdict", kiln_pin_verdict_name(plan->verdict));
    cli_json_bool(&j, "would_apply", plan->verdict == KILN_PIN_APPLY);
    if (plan->domain >= 0)
        cli_json_u64(&j, "domain", (uint64_t)plan->domain);
    else
        cli_json_null(&j, "domain");
    cli_json_str(&j, "cpus", (s = list_dup(&plan->cpus)) ? s : "");
    free(s);
    cli_json_str(&j, "reason", plan->reason);
    cli_json_object_end(&j);
    cli_json_object_begin(&j, "cache_affinity");
    cli_json_bool(&j, "on", d->on);
    cli_json_str(&j, "source", source_name(d->source));
    cli_json_bool(&j, "env_malformed", d->env_malformed);
    cli_json_bool(&j, "valid", decide_rc == 0);
    cli_json_str(&j, "reason", d->reason);
    cli_json_object_end(&j);
    cli_json_end(&j);
}

static void print_text(const struct kiln_topo *t, const char *root, double read_us,
                       const struct kiln_cpuset *allowed, const char *allowed_from,
                       const struct kiln_pin_plan *plan, const struct kiln_affinity_decision *d)
{
    char *s;
    printf("sysfs:     %s (read in %.1f us, %u files)\n", root, read_us, t->files_read);
    printf("online:    %s\n", (s = list_dup(&t->online)) ? s : "?");
    free(s);
    printf("allowed:   %s (%s)\n", (s = list_dup(allowed)) ? s : "?", allowed_from);
    free(s);
    if (t->ndomains == 0)
        printf("caches:    none: %s\n", t->note);
    for (size_t i = 0; i < t->ndomains; i++) {
        const struct kiln_cpu_cache_domain *dom = &t->domains[i];
        char size[32];
        printf("L%u %-11s %10s  CPUs %s (%u)%s\n", dom->level, kiln_cpu_cache_type_name(dom->type),
               cli_format_bytes(size, sizeof(size), dom->size),
               (s = list_dup(&dom->cpus)) ? s : "?", kiln_cpuset_count(&dom->cpus),
               (int64_t)i == t->largest ? "  <- largest" : "");
        free(s);
    }
    printf("pinning:   %s: %s\n",
           plan->verdict == KILN_PIN_APPLY ? "would apply" : "would not apply", plan->reason);
    printf("affinity:  %s: %s\n", d->on ? "on" : "off", d->reason);
}

int cmd_topo(int argc, char **argv)
{
    const char *name = argv[0];
    const char *root = NULL, *allowed_text = NULL;
    bool json = false;
    unsigned flags = 0;
    static const struct option opts[] = {
        {"sysfs", required_argument, NULL, 's'}, {"allowed", required_argument, NULL, 'a'},
        {"all-levels", no_argument, NULL, 'l'},  {"json", no_argument, NULL, 'j'},
        {"help", no_argument, NULL, 'h'},        {NULL, 0, NULL, 0},
    };
    optind = 1;
    opterr = 0; /* one line per error: ours, naming the option */
    int c;
    while ((c = cli_getopt(argc, argv, ":h", opts)) != -1) {
        switch (c) {
        case 's':
            CLI_TRY(cli_check_path(name, "--sysfs", optarg));
            root = optarg;
            break;
        case 'a':
            if (!optarg[0])
                return cli_usage_error(name, "--allowed: an empty CPU list (no CPU to choose for)");
            allowed_text = optarg;
            break;
        case 'l':
            flags |= KILN_TOPO_ALL_LEVELS;
            break;
        case 'j':
            json = true;
            break;
        case 'h':
            usage(stdout, name);
            return KILN_EXIT_OK;
        default:
            return cli_option_error(name, c, argv);
        }
    }
    if (optind < argc)
        return cli_usage_error(name, "unexpected argument '%s'", argv[optind]);

    struct kiln_cpuset allowed = {0};
    if (allowed_text && kiln_cpuset_parse_list(&allowed, allowed_text, strlen(allowed_text)) < 0)
        return cli_usage_error(name, "--allowed: expected a CPU list like 0-7,16-23, got '%s'",
                               allowed_text);

    uint64_t t0 = kiln_now_ns();
    struct kiln_topo *topo = NULL;
    int rc = kiln_topo_read(root, flags, &topo);
    double read_us = (double)(kiln_now_ns() - t0) / 1e3;
    if (rc < 0) {
        /* The library logged the file and what is wrong with it. */
        kiln_cpuset_free(&allowed);
        return cli_exit_for(rc);
    }

    const char *allowed_from = "--allowed";
    if (!allowed_text && root) {
        allowed_from = "the tree's online CPUs";
        rc = kiln_cpuset_copy(&allowed, &topo->online);
    } else if (!allowed_text) {
        allowed_from = "this process's affinity and cgroup";
        rc = kiln_topo_allowed(NULL, &allowed);
    }
    struct kiln_pin_plan plan = {.size = sizeof(plan), .domain = -1};
    if (rc == 0)
        rc = kiln_topo_choose(topo, &allowed, &plan);
    if (rc < 0) {
        cli_error(name, "cannot choose: %s", kiln_strerror(rc));
        kiln_pin_plan_free(&plan);
        kiln_cpuset_free(&allowed);
        kiln_topo_free(topo);
        return KILN_EXIT_FAILED;
    }

    struct kiln_affinity_decision d = KILN_AFFINITY_DECISION_INIT;
    int decide_rc =
        kiln_affinity_decide(cli_cache_affinity_flag, getenv(KILN_CPU_CACHE_AFFINITY_ENV), &d);
    const char *shown_root = root ? root : "/sys/devices/system/cpu";
    if (json)
        print_json(topo, shown_root, read_us, &allowed, allowed_from, &plan, &d, decide_rc);
    else
        print_text(topo, shown_root, read_us, &allowed, allowed_from, &plan, &d);

    kiln_pin_plan_free(&plan);
    kiln_cpuset_free(&allowed);
    kiln_topo_free(topo);
    return KILN_EXIT_OK;
}

int cli_apply_cache_affinity(const char *name)
{
    struct kiln_affinity_decision d = KILN_AFFINITY_DECISION_INIT;
    if (kiln_affinity_decide(cli_cache_affinity_flag, getenv(KILN_CPU_CACHE_AFFINITY_ENV), &d) <
        0) {
        cli_error(name, "%s", d.reason);
        return KILN_EXIT_USAGE;
    }
    /* Logs the decision and, when on, the plan (info level, "topo"). */
    struct kiln_pin_plan plan = KILN_PIN_PLAN_INIT;
    if (kiln_affinity_apply(&d, NULL, &plan) < 0)
        cli_error(name, "cache affinity: %s; continuing unpinned", plan.reason);
    kiln_pin_plan_free(&plan);
    return KILN_EXIT_OK;
}
