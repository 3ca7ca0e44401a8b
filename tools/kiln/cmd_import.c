/*
 * cmd_import.c - `kiln import foz`: bringing the shader modules of
 * Fossilize archives into a kiln cache.
 *
 * A thin layer over kiln_foz_import (how modules become records is
 * described there): the cache folder and every archive's header are
 * checked first, so a missing file, or one of another kind where the cache
 * or an archive should be, changes nothing (no cache folder is made);
 * then the cache is opened (made when missing) with KILN_FOZ_STAMP,
 * each archive is imported in turn, and what was imported or skipped, and
 * why, is reported per archive.
 */
#include "cli.h"
#include "commands.h"

#include <getopt.h>
#include <inttypes.h>
#include <stdlib.h>
#include <errno.h>
#include <string.h>
#ifdef _WIN32
#include <direct.h>
#define make_dir(p) _mkdir(p)
#define rmdir(p)    _rmdir(p)
#else
#include <sys/stat.h>
#include <unistd.h>
#define make_dir(p) mkdir(p, 0777)
#endif

static const char help[] =
    "usage: %s FILE.foz... --cache DIR [--json]\n"
    "\n"
    "Reads Fossilize stream archives (versions 5 and 6) and stores each shader\n"
    "module in the kiln cache in DIR (made when missing) as a one-stage program,\n"
    "packed with kiln's codec, keyed by its Fossilize hash. Damaged entries (a\n"
    "bad CRC, size or name; reading goes on at the next whole entry), modules\n"
    "that do not decode, and modules SPIR-V's validator refuses are skipped\n"
    "and counted, one line each; a cut-off last entry is ignored, as the format\n"
    "says. Modules already in the cache are skipped, so importing again adds\n"
    "nothing.\n"
    "DIR must hold no cache yet or one that this command filled (a cache of\n"
    "another stamp, e.g. from kiln prepare on GLSL, is refused, never started\n"
    "over). Exit 0 when everything was imported, 1 when anything was skipped\n"
    "(everything good is imported all the same), 2 for a missing file, one\n"
    "that is not an archive, or a DIR that is not such a cache folder (then\n"
    "nothing is imported and no file or folder is made).\n"
    "\n"
    "  --cache DIR   the cache folder (required)\n"
    "  --json        one JSON object on stdout\n"
    "  --help        this text\n";

int cmd_import_foz(int argc, char **argv)
{
    static const struct option opts[] = {{"cache", required_argument, NULL, 'c'},
                                         {"json", no_argument, NULL, 'j'},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    bool json = false;
    const char *dir = NULL;
    int ch, ex;
    opterr = 0;
    optind = 1;
    while ((ch = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        if (ch == 'c') {
            CLI_TRY(cli_parse_cache_dir(argv[0], optarg, &dir));
        } else {
            ex = cli_report_option(ch, argv, &json, help, argv[0]);
            if (ex != CLI_NEXT_OPTION)
                return ex;
        }
    }
    if (!dir)
        return cli_usage_error(argv[0], "--cache DIR is required");
    if (optind >= argc)
        return cli_usage_error(argv[0], "expected at least one .foz archive");
    for (int i = optind; i < argc; i++)
        CLI_TRY(cli_check_path(argv[0], "an archive", argv[i]));
    /* The cache folder and the archives first: what is wrong with them is
     * reported before anything is made or written. */
    bool has_cache;
    struct kiln_cache_stats st;
    int bad = cli_check_cache_folder(argv[0], dir, &has_cache, &st);
    if (bad != KILN_EXIT_OK)
        return bad;
    if (has_cache && st.stamp != KILN_FOZ_STAMP) {
        /* A writer of the import's stamp would start that cache over. */
        cli_error(argv[0],
                  "%s: holds a cache of stamp %016" PRIx64 ", not one of imported Fossilize "
                  "modules (%016" PRIx64 "); nothing imported, the cache left as it is",
                  dir, st.stamp, (uint64_t)KILN_FOZ_STAMP);
        return KILN_EXIT_USAGE;
    }
    for (int i = optind; i < argc; i++) {
        struct kiln_foz *foz;
        int frc = kiln_foz_open(NULL, argv[i], &foz);
        if (frc == KILN_OK) {
            kiln_foz_close(foz);
            continue;
        }
        if (frc == KILN_EFORMAT)
            cli_error(argv[0], "%s: not a Fossilize archive of a version kiln reads (%d to %d)",
                      argv[i], KILN_FOZ_VERSION_MIN, KILN_FOZ_VERSION_MAX);
        else
            cli_error(argv[0], "%s: cannot read the archive: %s", argv[i], kiln_strerror(frc));
        if (bad != KILN_EXIT_FAILED)
            bad = cli_exit_for(frc);
    }
    if (bad != KILN_EXIT_OK)
        return bad;

    bool made = make_dir(dir) == 0;
    if (!made && errno != EEXIST) {
        int err = kiln_error_from_errno(errno, KILN_EIO);
        cli_error(argv[0], "%s: cannot make the cache folder: %s", dir, kiln_strerror(err));
        return cli_exit_for(err);
    }
    struct kiln_cache_options opt = {.stamp = KILN_FOZ_STAMP,
                                     .flags = KILN_CACHE_CREATE | KILN_CACHE_USE_DICT};
    struct kiln_cache *c;
    int rc = kiln_cache_open(dir, &opt, &c);
    if (rc < 0) {
        cli_error(argv[0], "%s: cannot open the cache: %s%s", dir,
                  rc == KILN_ENOENT ? "not a folder" : kiln_strerror(rc),
                  rc == KILN_EBUSY ? " (another writer holds it)" : "");
        if (made)
            rmdir(dir); /* the folder this run made, left as it was found */
        return cli_exit_for(rc);
    }
    size_t n = (size_t)(argc - optind);
    struct kiln_foz_import_report *reps = calloc(n, sizeof(*reps));
    int *rcs = calloc(n, sizeof(*rcs));
    if (!reps || !rcs) {
        free(reps);
        free(rcs);
        kiln_cache_close(c);
        cli_error(argv[0], "out of memory");
        return KILN_EXIT_FAILED;
    }
    int exit_code = KILN_EXIT_OK;
    struct kiln_foz_import_report sum = {0};
    uint64_t t0 = kiln_now_ns();
    for (size_t i = 0; i < n; i++) {
        const char *path = argv[optind + (int)i];
        rcs[i] = kiln_foz_import(c, path, &reps[i]);
        const struct kiln_foz_import_report *r = &reps[i];
        sum.modules += r->modules;
        sum.imported += r->imported;
        sum.present += r->present;
        sum.damaged += r->damaged;
        sum.undecodable += r->undecodable;
        sum.invalid += r->invalid;
        sum.entries_skipped += r->entries_skipped;
        sum.compute += r->compute;
        sum.spirv_bytes += r->spirv_bytes;
        sum.packed_bytes += r->packed_bytes;
        sum.truncated |= r->truncated;
        if (rcs[i] < 0) {
            cli_error(argv[0], "%s: %s", path, kiln_strerror(rcs[i]));
            int e = cli_exit_for(rcs[i]);
            if (exit_code == KILN_EXIT_OK || e == KILN_EXIT_FAILED)
                exit_code = e;
            if (rcs[i] != KILN_EFORMAT && rcs[i] != KILN_ENOENT && rcs[i] != KILN_EIO_OPEN)
                break; /* a cache error: later archives would fail alike */
        } else if (r->entries_skipped || r->resyncs || r->damaged || r->undecodable || r->invalid) {
            /* All that was good is stored; what was skipped is said above. */
            cli_note_error(KILN_ECORRUPT_RECORD,
                           "%s: %" PRIu64 " damaged entries and %" PRIu64
                           " modules (damaged, undecodable or invalid) skipped",
                           path, r->entries_skipped, r->damaged + r->undecodable + r->invalid);
            exit_code = KILN_EXIT_FAILED;
        }
    }
    double secs = cli_seconds(t0, kiln_now_ns());
    size_t records = kiln_cache_count(c);
    kiln_cache_close(c);
    if (json) {
        struct cli_json j;
        cli_json_begin(&j);
        cli_json_str(&j, "cache_dir", dir);
        cli_json_u64(&j, "archives", n);
        cli_json_u64(&j, "modules", sum.modules);
        cli_json_u64(&j, "imported", sum.imported);
        cli_json_u64(&j, "present", sum.present);
        cli_json_u64(&j, "damaged", sum.damaged);
        cli_json_u64(&j, "undecodable", sum.undecodable);
        cli_json_u64(&j, "invalid", sum.invalid);
        cli_json_u64(&j, "entries_skipped", sum.entries_skipped);
        cli_json_u64(&j, "compute", sum.compute);
        cli_json_u64(&j, "spirv_bytes", sum.spirv_bytes);
        cli_json_u64(&j, "packed_bytes", sum.packed_bytes);
        cli_json_u64(&j, "records", records);
        cli_json_seconds(&j, "import", secs);
        cli_json_array_begin(&j, "files");
        for (size_t i = 0; i < n; i++) {
            const struct kiln_foz_import_report *r = &reps[i];
            cli_json_object_begin(&j, NULL);
            cli_json_str(&j, "path", argv[optind + (int)i]);
            cli_json_str(&j, "status", rcs[i] < 0 ? kiln_errname(rcs[i]) : "ok");
            cli_json_u64(&j, "modules", r->modules);
            cli_json_u64(&j, "imported", r->imported);
            cli_json_u64(&j, "present", r->present);
            cli_json_u64(&j, "damaged", r->damaged);
            cli_json_u64(&j, "undecodable", r->undecodable);
            cli_json_u64(&j, "invalid", r->invalid);
            cli_json_u64(&j, "entries_skipped", r->entries_skipped);
            cli_json_u64(&j, "resyncs", r->resyncs);
            cli_json_u64(&j, "skipped_bytes", r->skipped_bytes);
            cli_json_bool(&j, "truncated", r->truncated);
            cli_json_object_end(&j);
        }
        cli_json_array_end(&j);
        cli_json_end(&j);
    } else {
        for (size_t i = 0; i < n; i++) {
            const struct kiln_foz_import_report *r = &reps[i];
            printf("%s: %" PRIu64 " modules: %" PRIu64 " imported, %" PRIu64
                   " already present, %" PRIu64 " damaged, %" PRIu64 " undecodable, %" PRIu64
                   " invalid; %" PRIu64 " damaged entries skipped%s\n",
                   argv[optind + (int)i], r->modules, r->imported, r->present, r->damaged,
                   r->undecodable, r->invalid, r->entries_skipped,
                   r->truncated ? "; cut-off last entry ignored" : "");
        }
        char b1[32], b2[32];
        printf("total       %" PRIu64 " modules in %zu archives: %" PRIu64 " imported (%" PRIu64
               " compute), %" PRIu64 " already present, %" PRIu64 " skipped as damaged, %" PRIu64
               " refused as invalid; %" PRIu64 " damaged entries skipped\n",
               sum.modules, n, sum.imported, sum.compute, sum.present,
               sum.damaged + sum.undecodable, sum.invalid, sum.entries_skipped);
        printf("cache       %s: %zu records; imported %s of SPIR-V as %s (%.2f s)\n", dir, records,
               cli_format_bytes(b1, sizeof(b1), sum.spirv_bytes),
               cli_format_bytes(b2, sizeof(b2), sum.packed_bytes), secs);
    }
    free(reps);
    free(rcs);
    return exit_code;
}
