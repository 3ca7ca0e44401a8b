/*
 * cli_kinds.c - see cli_kinds.h. The core counts pipelines per state kind
 * (kiln_kind_counts); the Fossilize builder counts its own per pipeline
 * kind (graphics, compute, ray-tracing). Both are printed side by side: the
 * core's say what the run did, the builder's split the FOZ line. A FOZ
 * pipeline the core refused before it reached the builder (a stage the
 * SPIR-V validator refuses) is in the core's failed count only. With
 * --isolate the builder runs in the worker processes and its split stays
 * there: the callers pass NULL, and the split is null (JSON) or left out.
 */
#include "cli_kinds.h"

#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <string.h>

int cli_builders_make(const char *command, struct cli_builders *b)
{
    memset(b, 0, sizeof(*b));
    int rc = kiln_foz_kiln_builder_create(NULL, &b->foz);
    if (rc < 0) {
        cli_error(command, "cannot make the Fossilize builder: %s", kiln_strerror(rc));
        return rc;
    }
    b->list[0] = b->foz;
    b->n = 1;
    return KILN_OK;
}

void cli_builders_foz_stats(const struct cli_builders *b, struct kiln_foz_builder_stats *st)
{
    memset(st, 0, sizeof(*st));
    st->size = sizeof(*st);
    if (b->n)
        kiln_foz_kiln_builder_stats(&b->foz, st);
}

void cli_builders_free(struct cli_builders *b)
{
    if (b->n)
        kiln_foz_kiln_builder_destroy(&b->foz);
    memset(b, 0, sizeof(*b));
}

const char *cli_state_kind_name(unsigned kind)
{
    switch (kind) {
    case KILN_STATE_BUILTIN:
        return "builtin";
    case KILN_STATE_FOZ:
        return "foz";
    case KILN_STATE_APP:
        return "app";
    default:
        return "unknown";
    }
}

void cli_json_kinds(struct cli_json *j, const struct kiln_kind_counts *kinds,
                    const struct kiln_foz_builder_stats *foz)
{
    cli_json_object_begin(j, "kinds");
    for (unsigned k = 0; k < KILN_STATE_KINDS; k++) {
        const struct kiln_kind_counts *c = &kinds[k];
        cli_json_object_begin(j, cli_state_kind_name(k));
        cli_json_u64(j, "built", c->built);
        cli_json_u64(j, "skipped", c->skipped);
        cli_json_u64(j, "failed", c->failed);
        if (c->skip_reason[0])
            cli_json_str(j, "skip_reason", c->skip_reason);
        if (k == KILN_STATE_FOZ) {
            for (int f = 0; f < KILN_FOZ_KIND_COUNT; f++) {
                if (!foz) { /* counted in the worker processes */
                    cli_json_null(j, kiln_foz_kind_name((enum kiln_foz_kind)f));
                    continue;
                }
                cli_json_object_begin(j, kiln_foz_kind_name((enum kiln_foz_kind)f));
                cli_json_u64(j, "built", foz->built[f]);
                cli_json_u64(j, "skipped", foz->skipped[f]);
                cli_json_u64(j, "failed", foz->failed[f]);
                cli_json_object_end(j);
            }
        }
        cli_json_object_end(j);
    }
    cli_json_object_end(j);
}

void cli_print_driver_word(uint64_t feedback, uint64_t cache_hits, uint64_t driver_ns)
{
    if (!feedback) {
        printf("  driver     no creation feedback for the pipelines built\n");
        return;
    }
    printf("  driver     %" PRIu64 " pipeline%s with the driver's feedback: %" PRIu64
           " held by its pipeline cache (no compile), %.1f ms of driver time\n",
           feedback, CLI_S(feedback), cache_hits, (double)driver_ns / 1e6);
}

void cli_json_isolated(struct cli_json *j, const struct cli_isolated *iso)
{
    if (!iso) {
        cli_json_null(j, "isolated");
        return;
    }
    cli_json_object_begin(j, "isolated");
    cli_json_u64(j, "workers", iso->workers);
    cli_json_u64(j, "workers_started", iso->workers);
    cli_json_u64(j, "workers_ready_at_phase", iso->ready_at_phase);
    cli_json_u64(j, "batches", iso->batches);
    cli_json_u64(j, "resent", iso->resent);
    cli_json_u64(j, "early_timeouts", iso->early_timeouts);
    cli_json_u64(j, "time_limit_ms", iso->time_limit_ms);
    cli_json_object_end(j);
}

void cli_print_kinds(const struct kiln_kind_counts *kinds, const struct kiln_foz_builder_stats *foz)
{
    for (unsigned k = 0; k < KILN_STATE_KINDS; k++) {
        const struct kiln_kind_counts *c = &kinds[k];
        if (!c->built && !c->skipped && !c->failed)
            continue;
        printf("  %-10s %" PRIu64 " built, %" PRIu64 " skipped, %" PRIu64 " failed",
               cli_state_kind_name(k), c->built, c->skipped, c->failed);
        if (k == KILN_STATE_FOZ && foz) {
            const char *sep = " (";
            for (int f = 0; f < KILN_FOZ_KIND_COUNT; f++) {
                if (!foz->built[f] && !foz->skipped[f] && !foz->failed[f])
                    continue;
                printf("%s%s %" PRIu64 "/%" PRIu64 "/%" PRIu64, sep,
                       kiln_foz_kind_name((enum kiln_foz_kind)f), foz->built[f], foz->skipped[f],
                       foz->failed[f]);
                sep = ", ";
            }
            if (sep[0] == ',')
                printf(")");
        }
        if (c->skip_reason[0])
            printf("; skipped: %s", c->skip_reason);
        printf("\n");
    }
}

int cli_prep_option(const char *name, int ch, char **argv, struct cli_prep_flags *f,
                    const char *help, ...)
{
    uint64_t v;
    switch (ch) {
    case 'C':
        return cli_parse_cache_dir(name, optarg, f->cache_dir) ? KILN_EXIT_USAGE : CLI_NEXT_OPTION;
    case 'j':
        return cli_parse_jobs(name, optarg, f->jobs) ? KILN_EXIT_USAGE : CLI_NEXT_OPTION;
    case 'V':
        *f->no_vulkan = true;
        return CLI_NEXT_OPTION;
    case 'd':
        return cli_parse_device(name, optarg, f->use_device_index, f->device) ? KILN_EXIT_USAGE
                                                                              : CLI_NEXT_OPTION;
    case 'J':
        f->json = true;
        return CLI_NEXT_OPTION;
    case 'I':
        f->isolate = true;
        return CLI_NEXT_OPTION;
    case 'L':
        return cli_parse_layer(name, optarg, f->layers, &f->nlayers) ? KILN_EXIT_USAGE
                                                                     : CLI_NEXT_OPTION;
    case CLI_OPT_MAX_SIZE:
        return cli_parse_max_size(name, optarg, &f->max_size) ? KILN_EXIT_USAGE : CLI_NEXT_OPTION;
    case 'T':
        if (cli_parse_u64(name, "--timeout-ms", optarg, 1, UINT32_MAX, false, &v))
            return KILN_EXIT_USAGE;
        f->iso.time_limit_ms = (unsigned)v;
        return CLI_NEXT_OPTION;
    case 'h': {
        va_list ap;
        va_start(ap, help);
        vprintf(help, ap);
        va_end(ap);
        return KILN_EXIT_OK;
    }
    default:
        return cli_option_error(name, ch, argv);
    }
}

int cli_prep_setup(const char *name, struct cli_prep_flags *f, struct cli_builders *builders)
{
    if (f->iso.time_limit_ms && !f->isolate)
        return cli_usage_error(name, "--timeout-ms goes with --isolate");
    if (!*f->cache_dir && !(*f->cache_dir = cli_default_cache_dir(name)))
        return KILN_EXIT_USAGE;
    if (*f->no_vulkan && *f->use_device_index)
        return cli_usage_error(name, "--device %u picks a Vulkan device: not with --no-vulkan",
                               *f->device);
    if (f->isolate && cli_isolate_worker(name, &f->iso))
        return KILN_EXIT_FAILED;
    CLI_TRY(cli_apply_cache_affinity(name));
    if (cli_builders_make(name, builders) < 0)
        return KILN_EXIT_FAILED;
    return KILN_EXIT_OK;
}
