/*
 * cmd_export.c - `kiln export foz`: a cache's pipelines as a Fossilize
 * stream archive that Fossilize's replayer replays.
 *
 * A thin layer over kiln_foz_export (what each kind of program becomes is
 * described there): the cache is opened read-only, whatever its stamp, so
 * an export never changes it and may run beside a writer; the archive is
 * written beside OUT and renamed over it at the end, so a failed export
 * leaves no file.
 */
#include "cli.h"
#include "commands.h"

#include <getopt.h>
#include <inttypes.h>

static const char help[] =
    "usage: %s [--cache DIR] OUT.foz [--json]\n"
    "\n"
    "Writes the pipelines of the kiln cache in DIR as a Fossilize stream\n"
    "archive (format version 6) at OUT.foz, which Fossilize's replayer\n"
    "(fossilize-replay) reads and replays:\n"
    "  - pipelines imported from Fossilize archives, with every object their\n"
    "    recording references (samplers, layouts, render passes), each under\n"
    "    its recorded hash and written once;\n"
    "  - kiln's own programs (a compute stage, or vertex + fragment) with the\n"
    "    layout, render pass and fixed state kiln builds them with.\n"
    "Programs of an application's own state have no Fossilize form: they are\n"
    "left out and counted, as are programs of other stage sets. A one-module\n"
    "program of a graphics stage gives its module and no pipeline. The cache\n"
    "is only read. OUT.foz is written under a temporary name beside it and\n"
    "renamed at the end: a failed export leaves no file, and an existing\n"
    "OUT.foz is replaced only by a whole archive. OUT.foz is never a file of\n"
    "a cache, by any path or link, nor in the folder of any kiln cache: that\n"
    "is refused (exit 2) before anything is written.\n"
    "Exit 0 when the archive was written, 1 when it was written but damaged\n"
    "records (or objects whose hash names another already written) were left\n"
    "out, or when writing failed; 2 for a missing cache, or a cache with no\n"
    "program that makes a pipeline (then nothing is written).\n"
    "\n"
    "  --cache DIR   the cache folder (default: $KILN_CACHE_DIR, else\n"
    "                $XDG_CACHE_HOME/kiln, else ~/.cache/kiln)\n"
    "  --json        one JSON object on stdout\n"
    "  --help        this text\n";

int cmd_export_foz(int argc, char **argv)
{
    bool json = false;
    const char *dir;
    int ex = cli_parse_cache_options(argc, argv, &dir, NULL, &json, help, argv[0]);
    if (ex != CLI_NEXT_OPTION)
        return ex;
    if (optind >= argc)
        return cli_usage_error(argv[0], "expected the archive to write (OUT.foz)");
    if (optind + 1 < argc)
        return cli_usage_error(argv[0], "expected one archive to write, got %d", argc - optind);
    const char *out = argv[optind];
    CLI_TRY(cli_check_path(argv[0], "the archive", out));

    /* The bar: bytes of the records file read by the export (not by the
     * open, which may scan it first). */
    struct cli_io_meter meter;
    cli_io_meter_init(&meter, "programs.kpc", "export");
    meter.on = false;
    struct kiln_cache_options opt = {
        .size = sizeof(opt), .flags = KILN_CACHE_READ_ONLY | KILN_CACHE_ANY_STAMP, .io = &meter.io};
    struct kiln_cache *c;
    CLI_TRY(cli_open_cache(argv[0], dir, &opt, &c));
    struct kiln_foz_export_report r = KILN_FOZ_EXPORT_REPORT_INIT;
    uint64_t t0 = kiln_now_ns();
    meter.on = true;
    int rc = kiln_foz_export(c, out, &r);
    double secs = cli_seconds(t0, kiln_now_ns());
    cli_io_meter_close(&meter);
    kiln_cache_close(c);

    int exit_code = KILN_EXIT_OK;
    if (rc == KILN_ECACHE_FILE) {
        cli_error(argv[0], "%s: a file of a kiln cache, or in a cache's folder: not written over",
                  out);
        exit_code = cli_exit_for(rc);
    } else if (rc == KILN_ENOTFOUND) {
        cli_error(argv[0],
                  "%s: no program of the cache makes a pipeline (%" PRIu64
                  " program%s); nothing written",
                  dir, r.programs, CLI_S(r.programs));
        exit_code = KILN_EXIT_USAGE;
        cli_note_code(rc);
    } else if (rc < 0) {
        cli_error(argv[0], "%s: cannot export: %s", out, kiln_strerror(rc));
        exit_code = cli_exit_for(rc);
    } else if (r.damaged || r.skipped_conflict) {
        cli_note_error(KILN_ECORRUPT_RECORD,
                       "%s: %" PRIu64 " damaged program%s and %" PRIu64
                       " with a conflicting hash left out",
                       out, r.damaged, CLI_S(r.damaged), r.skipped_conflict);
        exit_code = KILN_EXIT_FAILED;
    }
    if (json) {
        struct cli_json j;
        cli_json_begin(&j);
        cli_json_str(&j, "cache_dir", dir);
        cli_json_str(&j, "archive", out);
        cli_json_bool(&j, "written", rc == 0);
        cli_json_u64(&j, "programs", r.programs);
        cli_json_u64(&j, "pipelines", r.pipelines);
        cli_json_u64(&j, "graphics", r.graphics);
        cli_json_u64(&j, "compute", r.compute);
        cli_json_u64(&j, "raytracing", r.raytracing);
        cli_json_u64(&j, "builtin", r.builtin);
        cli_json_u64(&j, "foz", r.foz);
        cli_json_u64(&j, "duplicates", r.duplicates);
        cli_json_u64(&j, "modules", r.modules);
        cli_json_u64(&j, "objects", r.objects);
        cli_json_u64(&j, "extra_pipelines", r.extra_pipelines);
        cli_json_u64(&j, "extra_dropped", r.extra_dropped);
        cli_json_u64(&j, "lone", r.lone);
        cli_json_u64(&j, "skipped", r.skipped);
        cli_json_u64(&j, "skipped_app", r.skipped_app);
        cli_json_u64(&j, "skipped_shape", r.skipped_shape);
        cli_json_u64(&j, "skipped_conflict", r.skipped_conflict);
        cli_json_u64(&j, "damaged", r.damaged);
        if (r.skip_reason[0])
            cli_json_str(&j, "skip_reason", r.skip_reason);
        else
            cli_json_null(&j, "skip_reason");
        cli_json_u64(&j, "entries", r.entries);
        cli_json_u64(&j, "archive_bytes", r.bytes);
        cli_json_seconds(&j, "export", secs);
        cli_json_end(&j);
    } else if (rc == 0) {
        char b[32];
        printf("%s: %" PRIu64 " pipeline%s (%" PRIu64 " graphics, %" PRIu64 " compute, %" PRIu64
               " ray tracing; %" PRIu64 " of kiln's shapes, %" PRIu64 " Fossilize) from %" PRIu64
               " program%s; %" PRIu64 " module%s, %" PRIu64 " other object%s; %s (%.2f s)\n",
               out, r.pipelines, CLI_S(r.pipelines), r.graphics, r.compute, r.raytracing, r.builtin,
               r.foz, r.programs, CLI_S(r.programs), r.modules, CLI_S(r.modules), r.objects,
               CLI_S(r.objects), cli_format_bytes(b, sizeof(b), r.bytes), secs);
        if (r.duplicates || r.lone || r.extra_pipelines || r.extra_dropped)
            printf("also        %" PRIu64 " program%s of a pipeline written already, %" PRIu64
                   " lone module%s; %" PRIu64 " base or library pipeline%s written, %" PRIu64
                   " left out (a module of theirs is in no program)\n",
                   r.duplicates, CLI_S(r.duplicates), r.lone, CLI_S(r.lone), r.extra_pipelines,
                   CLI_S(r.extra_pipelines), r.extra_dropped);
        if (r.skipped || r.damaged)
            printf("left out    %" PRIu64 " of an application's state, %" PRIu64
                   " of other stage sets, %" PRIu64 " with a conflicting hash, %" PRIu64
                   " damaged%s%s\n",
                   r.skipped_app, r.skipped_shape, r.skipped_conflict, r.damaged,
                   r.skip_reason[0] ? "; first: " : "", r.skip_reason);
    }
    return exit_code;
}
