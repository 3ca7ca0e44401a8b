/*
 * cmd_start.c - `kiln start`: the warm start. Opens the cache by its
 * index, loads every program at once, builds every pipeline through the
 * saved VkPipelineCache, and prints a phase table.
 *
 * A thin layer over kiln_warm_start (include/kiln/prep.h). The cache is
 * opened with whatever stamp it carries (kiln prepare chose it), as a
 * writer for the open and the read so that last use is recorded (read-only
 * when another writer holds it, or with --read-only); the stamp is
 * printed. Exit codes: 0 when every record loaded and
 * every pipeline was built, 1 when something failed (a missing or damaged
 * record, a pipeline, Vulkan), 2 for bad usage or a folder without a cache
 * (or with a file of another kind, or a damaged cache header, in its place).
 */
#include "cli.h"
#include "cli_kinds.h"
#include "commands.h"

#include <getopt.h>
#include <inttypes.h>

static const char help[] =
    "usage: %s [--cache DIR] [--jobs N|auto] [--no-vulkan] [--read-only] [--device N]\n"
    "       [--retry-failed] [--isolate] [--timeout-ms MS] [--recent N] [--layer DIR]...\n"
    "       [--binaries off|on|auto] [--binaries-rebuild] [--json]\n"
    "\n"
    "The warm start: opens the program cache kiln prepare filled (by its index),\n"
    "loads every program in parallel, records their last use (for `kiln cache\n"
    "prune`), builds every pipeline through the saved pipeline cache\n"
    "(pipelines.vkc), and prints how long each phase took. No record is ever\n"
    "added, changed or dropped. Programs of kiln's own shapes are built by kiln;\n"
    "recorded Fossilize pipelines (from `kiln import foz` or `kiln prepare\n"
    "--corpus FILE.foz`) by the Fossilize builder, with their own layouts, render\n"
    "passes and constants. Pipelines are counted per state kind (builtin, foz\n"
    "split into graphics, compute and ray-tracing, app): built, skipped (the\n"
    "device lacks what one needs, such as VK_KHR_ray_tracing_pipeline for a\n"
    "ray-tracing pipeline) and failed.\n"
    "\n"
    "  --cache DIR     the cache folder (default: $KILN_CACHE_DIR, else\n"
    "                  $XDG_CACHE_HOME/kiln, else ~/.cache/kiln)\n"
    "  --jobs N|auto   workers and read threads (default auto: the pool policy)\n"
    "  --no-vulkan     open and load only; build no pipeline\n"
    "  --read-only     write nothing to the program cache (last use is not\n"
    "                  recorded; also what happens while another writer holds it)\n"
    "  --device N      the Vulkan device by index\n"
    "  --retry-failed  build again the programs the build ledger records as having\n"
    "                  crashed a process or worker on this device (skipped otherwise)\n"
    "  --isolate       build the pipelines in worker processes (at most one per\n"
    "                  job, as many as the work pays for; several programs per\n"
    "                  message): a driver that crashes or hangs fails that\n"
    "                  pipeline only\n"
    "  --timeout-ms MS with --isolate: the most one pipeline may take, fixed; a\n"
    "                  worker past it is killed (default: learned from the builds\n"
    "                  seen, 10 x their p99, at least 10 s, at most 60 s)\n"
    "  --layer DIR     a read-only cache beneath this one (one shipped with a game),\n"
    "                  searched after it; repeatable, at most 8\n"
    "  --recent N      read and build only the N most recently used programs (a\n"
    "                  large cache then costs memory for what is used)\n"
    "  --binaries off|on|auto  make pipelines from the driver binaries kiln prepare\n"
    "                  kept per pipeline (VK_KHR_pipeline_binary; on: one warning where\n"
    "                  the device lacks it, auto: quietly pipelines.vkc; default off)\n"
    "  --binaries-rebuild  with --binaries: remove this device's binaries of an older\n"
    "                  driver and keep them again as the start builds\n"
    "  --json          one JSON object on stdout\n"
    "  --help          this text\n"
    "\n"
    "A pipeline being built when an earlier run died is skipped once, with one\n"
    "line, and recorded as crashed in the build ledger (ledger.kpl).\n"
    "\n"
    "SIGINT or SIGTERM stops it after the builds running (what was built is kept).\n"
    "\n"
    "Exit codes: 0 done, 1 something failed (missing or damaged records, failed\n"
    "pipelines, one in flight when a run died, no Vulkan), 2 bad usage or no cache in\n"
    "the folder (or something else in its place), 130 stopped by a signal.\n";

#define START_PHASES 6

/* The phases of a run, as the table and "seconds" give them: the table
 * has the vulkan_overlap row (the part of vulkan hidden beside the
 * reading, counted in vulkan but not in total) only when some was
 * hidden. @return how many rows it wrote. */
static size_t start_phases(const struct kiln_start_summary *s, bool table,
                           struct cli_phase_time rows[START_PHASES])
{
    rows[0] = (struct cli_phase_time){"open", s->open_ns};
    rows[1] = (struct cli_phase_time){"read", s->read_ns};
    rows[2] = (struct cli_phase_time){"vulkan", s->vulkan_ns};
    rows[3] = (struct cli_phase_time){table && !s->vulkan_overlap_ns ? NULL : "vulkan_overlap",
                                      s->vulkan_overlap_ns};
    rows[4] = (struct cli_phase_time){"pipelines", s->pipelines_ns};
    rows[5] = (struct cli_phase_time){"total", s->total_ns};
    return START_PHASES;
}

static void print_json(const struct kiln_start_options *o, const struct kiln_start_summary *s,
                       const struct kiln_foz_builder_stats *fst)
{
    struct cli_json j;
    char stamp[24];
    snprintf(stamp, sizeof(stamp), "%016" PRIx64, s->stamp);
    cli_json_begin(&j);
    cli_json_str(&j, "cache_dir", o->cache_dir);
    cli_json_str(&j, "stamp", stamp);
    cli_json_str(&j, "cache_open", kiln_cache_open_kind_name(s->open_kind));
    cli_json_str(&j, "cache_open_text", s->open_text);
    cli_json_u64(&j, "records", s->records);
    cli_json_u64(&j, "chosen", s->chosen);
    cli_json_u64(&j, "loaded", s->loaded);
    cli_json_u64(&j, "missing", s->missing);
    cli_json_u64(&j, "damaged", s->bad);
    cli_json_u64(&j, "bad", s->bad); /* kiln/1's name */
    cli_json_u64(&j, "lone_modules", s->lone_modules);
    cli_json_hex_or_null(&j, "dict_id", s->dict_id);
    cli_json_bool(&j, "use_recorded", s->use_recorded);
    if (!s->use_recorded)
        cli_json_str(&j, "use_text", s->use_text);
    cli_json_u64(&j, "bytes", s->bytes);
    cli_json_u64(&j, "pipelines_built", s->pipelines_built);
    cli_json_u64(&j, "pipelines_failed", s->pipelines_failed);
    cli_json_u64(&j, "pipelines_skipped", s->pipelines_skipped);
    cli_json_u64(&j, "recorded_invalid", s->recorded_invalid);
    cli_json_u64(&j, "crash_skipped", s->crash_skipped);
    cli_json_bool(&j, "canceled", s->canceled);
    cli_json_u64(&j, "ledger_failed", s->ledger_failed);
    cli_json_u64(&j, "feedback_pipelines", s->feedback_pipelines);
    cli_json_u64(&j, "driver_cache_hits", s->driver_cache_hits);
    cli_json_u64(&j, "driver_ns", s->driver_ns);
    cli_json_u64(&j, "from_binaries", s->from_binaries);
    cli_json_u64(&j, "from_pipeline_cache", s->from_pipeline_cache);
    cli_json_u64(&j, "compiled", s->compiled);
    struct cli_binaries bins = CLI_BINARIES(s);
    cli_json_binaries(&j, &bins);
    cli_json_kinds(&j, s->kinds, fst);
    struct cli_isolated iso = CLI_ISOLATED(s);
    cli_json_isolated(&j, o->isolate ? &iso : NULL);
    cli_json_u64(&j, "workers", s->workers);
    cli_json_u64(&j, "read_threads", s->read_threads);
    cli_json_str(&j, "workers_reason", s->workers_reason);
    cli_json_prep_vulkan(&j, s->vulkan, s->device, s->vk_cache_state, s->vk_cache_loaded_bytes);
    /* Built but not kept is not a failed start, yet never silent. */
    if (s->vulkan && s->error == 0) {
        cli_json_bool(&j, "pipeline_cache_saved", s->vk_cache_save_error == 0);
        if (s->vk_cache_save_error)
            cli_json_str(&j, "pipeline_cache_save_error", kiln_strerror(s->vk_cache_save_error));
        else
            cli_json_null(&j, "pipeline_cache_save_error");
    } else {
        cli_json_null(&j, "pipeline_cache_saved");
        cli_json_null(&j, "pipeline_cache_save_error");
    }
    struct cli_phase_time rows[START_PHASES];
    cli_json_phase_seconds(&j, rows, start_phases(s, false, rows));
    cli_json_prep_end(&j, s->peak_rss, s->error, s->step);
    cli_json_end(&j);
}

static void print_text(const struct kiln_start_options *o, const struct kiln_start_summary *s,
                       const struct kiln_foz_builder_stats *fst)
{
    char b1[32];
    if (s->canceled)
        printf("stopped after %" PRIu64 " of %" PRIu64 " pipeline%s; run it again for the rest\n",
               s->pipelines_built, s->loaded, CLI_S(s->loaded));
    printf("warm start from %s\n", o->cache_dir);
    printf("  cache      opened by %s (%s), stamp %016" PRIx64 "\n",
           kiln_cache_open_kind_name(s->open_kind), s->open_text, s->stamp);
    printf("  programs   %" PRIu64 " record%s, %" PRIu64 " loaded (%s), %" PRIu64
           " missing or damaged\n",
           s->records, CLI_S(s->records), s->loaded, cli_format_bytes(b1, sizeof(b1), s->bytes),
           s->missing + s->bad);
    if (s->chosen != s->records)
        printf("  subset     %" PRIu64 " most recently used of %" PRIu64 "\n", s->chosen,
               s->records);
    if (s->lone_modules)
        printf("  modules    %" PRIu64 " single graphics module%s stored, not built\n",
               s->lone_modules, CLI_S(s->lone_modules));
    if (s->dict_id)
        printf("  dictionary %016" PRIx64 "\n", s->dict_id);
    if (s->use_recorded)
        printf("  last use   recorded\n");
    else
        printf("  last use   not recorded (%s)\n", s->use_text);
    if (s->vulkan) {
        printf("  pipelines  %" PRIu64 " built, %" PRIu64 " skipped, %" PRIu64
               " failed on %s (pipelines.vkc: %s, %s)\n",
               s->pipelines_built, s->pipelines_skipped, s->pipelines_failed, s->device,
               cli_vk_cache_state_name(s->vk_cache_state),
               cli_format_bytes(b1, sizeof(b1), s->vk_cache_loaded_bytes));
        cli_print_kinds(s->kinds, fst);
        cli_print_driver_word(s->feedback_pipelines, s->driver_cache_hits, s->driver_ns);
        if (s->binaries_used)
            printf("  from       %" PRIu64 " driver binaries, %" PRIu64 " pipeline cache, %" PRIu64
                   " compiled\n",
                   s->from_binaries, s->from_pipeline_cache, s->compiled);
        struct cli_binaries bins = CLI_BINARIES(s);
        cli_print_binaries(&bins);
        if (s->crash_skipped || s->ledger_failed)
            printf("  crashes    %" PRIu64 " in flight when a run died, %" PRIu64
                   " crashed before: not built\n",
                   s->crash_skipped, s->ledger_failed);
        if (s->vk_cache_save_error)
            printf("  warning    pipelines.vkc not saved (%s): the next start compiles again\n",
                   kiln_strerror(s->vk_cache_save_error));
    } else
        printf("  pipelines  none built\n");
    if (s->recorded_invalid)
        printf("  recorded   %" PRIu64 " pipeline%s built though the SPIR-V validator refuses a"
               " stage (recorded from an application; %s)\n",
               s->recorded_invalid, CLI_S(s->recorded_invalid),
               s->recorded_invalid == 1 ? "it parses" : "they parse");
    printf("  workers    %s; %u read thread%s\n", s->workers_reason, s->read_threads,
           CLI_S(s->read_threads));
    struct cli_phase_time rows[START_PHASES];
    cli_print_phase_table(rows, start_phases(s, true, rows), s->peak_rss);
}

int cmd_start(int argc, char **argv)
{
    const char *name = argv[0];
    static const struct option longopts[] = {
        {"cache", required_argument, NULL, 'C'},
        {"jobs", required_argument, NULL, 'j'},
        {"no-vulkan", no_argument, NULL, 'V'},
        {"read-only", no_argument, NULL, 'R'},
        {"device", required_argument, NULL, 'd'},
        {"json", no_argument, NULL, 'J'},
        {"isolate", no_argument, NULL, 'I'},
        {"timeout-ms", required_argument, NULL, 'T'},
        {"retry-failed", no_argument, NULL, 'F'},
        {"recent", required_argument, NULL, 'N'},
        {"layer", required_argument, NULL, 'L'},
        {"binaries", required_argument, NULL, 'b'},
        {"binaries-rebuild", no_argument, NULL, 'r'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    struct kiln_start_options o = {.size = sizeof(o), .cache_dir = NULL, .any_stamp = true};
    struct cli_prep_flags f = {.cache_dir = &o.cache_dir,
                               .jobs = &o.jobs,
                               .no_vulkan = &o.no_vulkan,
                               .use_device_index = &o.use_device_index,
                               .device = &o.device};
    int c, ex;
    optind = 1;
    opterr = 0;
    while ((c = cli_getopt(argc, argv, ":", longopts)) != -1) {
        if (c == 'R') {
            o.read_only = true;
        } else if (c == 'F') {
            o.retry_failed = true;
        } else if (c == 'N') {
            CLI_TRY(cli_parse_u64(name, "--recent", optarg, 1, UINT64_MAX, false, &o.recent));
        } else if (c == 'b') {
            CLI_TRY(cli_parse_binaries(name, optarg, &o.binaries));
        } else if (c == 'r') {
            o.binaries_rebuild = true;
        } else {
            ex = cli_prep_option(name, c, argv, &f, help, name);
            if (ex != CLI_NEXT_OPTION)
                return ex;
        }
    }
    if (optind < argc)
        return cli_usage_error(name, "unexpected argument '%s'", argv[optind]);
    struct cli_builders builders;
    CLI_TRY(cli_prep_setup(name, &f, &builders));
    if (f.isolate)
        o.isolate = &f.iso;
    o.layers = f.layers;
    o.nlayers = f.nlayers;

    struct cli_phase_progress ps = {.phase = -1};
    struct kiln_start_summary s = KILN_START_SUMMARY_INIT;
    o.builders = builders.list;
    o.nbuilders = builders.n;
    o.cancel = cli_stop_asked;
    cli_stop_install(name);
    int rc = kiln_warm_start(&o, cli_phase_progress, &ps, &s);
    cli_phase_progress_close(&ps);
    struct kiln_foz_builder_stats fst = KILN_FOZ_BUILDER_STATS_INIT;
    cli_builders_foz_stats(&builders, &fst);
    cli_builders_free(&builders);
    bool ok = rc == KILN_OK && s.missing == 0 && s.bad == 0 && s.pipelines_failed == 0 &&
              s.crash_skipped == 0;
    if (f.json)
        print_json(&o, &s, f.isolate ? NULL : &fst);
    else if (cli_prep_shows_table(rc, s.step))
        print_text(&o, &s,
                   f.isolate ? NULL
                             : &fst); /* no table of zeros for bad input: its one line says it */

    if (rc < 0) {
        /* The library logged a failed open at info only: this is its line. */
        if (s.step == KILN_PREP_STEP_INPUT) {
            if (rc == KILN_ENOENT)
                cli_error(name, "%s: no program cache here (run kiln prepare first)", o.cache_dir);
            else
                cli_error(name, "%s: cannot open the program cache: %s", o.cache_dir,
                          kiln_strerror(rc));
            return KILN_EXIT_USAGE;
        }
        if (s.step == KILN_PREP_STEP_VULKAN) {
            if (rc == KILN_ENOTSUP)
                cli_error(name, "Vulkan is not available (--no-vulkan opens and loads only)");
            else
                cli_error(name, "Vulkan: %s", kiln_strerror(rc));
            return KILN_EXIT_FAILED;
        }
        if (rc == KILN_ECANCELED) {
            cli_error(name, "stopped: what was built is kept; run it again for the rest");
            return cli_stop_by_signal() ? KILN_EXIT_SIGNAL : KILN_EXIT_FAILED;
        }
        cli_error(name, "%s: %s", o.cache_dir, kiln_strerror(rc));
        return cli_exit_for(rc);
    }
    if (!ok) {
        cli_error(name,
                  "%" PRIu64 " record(s) missing or damaged, %" PRIu64
                  " pipeline(s) failed, %" PRIu64
                  " in flight when a run died (each is logged above)",
                  s.missing + s.bad, s.pipelines_failed, s.crash_skipped);
        return KILN_EXIT_FAILED;
    }
    return KILN_EXIT_OK;
}
