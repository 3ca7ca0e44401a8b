/*
 * cmd_import.c - `kiln import foz`: bringing the recorded pipelines of
 * Fossilize archives into a kiln cache.
 *
 * A thin layer over kiln_foz_pipelines_open and kiln_foz_pipelines_import
 * (how pipelines become records is described there): the cache folder and
 * every archive's header are checked first, so a missing file, or one of another kind where the
 * cache or an archive should be, changes nothing (no cache folder is made); then the cache is
 * opened (made when missing) with KILN_FOZ_STAMP, the archives' pipelines are listed (each key
 * once) and stored, and what was imported or skipped is reported per archive and per pipeline kind
 * (the reasons are logged, one line each).
 */
#include "cli.h"
#include "commands.h"

#include <getopt.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

static const char help[] =
    "usage: %s FILE.foz... [--cache DIR] [--reset] [--max-size SIZE|none] [--json]\n"
    "\n"
    "Reads Fossilize stream archives (versions 5 and 6) and stores each recorded\n"
    "pipeline (graphics, compute, ray-tracing) in the kiln cache in DIR (made when\n"
    "missing) as one program: its recorded state and every object it references,\n"
    "and its stages' SPIR-V packed with kiln's codec, with their entry points and\n"
    "specialization constants. The same pipeline in several archives is stored\n"
    "once; pipelines already in the cache are skipped, so importing again adds\n"
    "nothing. `kiln start` (and `kiln prepare --corpus FILE.foz...`) build them\n"
    "with the archives' own layouts. Damaged entries (a bad CRC, size or name;\n"
    "reading goes on at the next whole entry), pipelines whose objects or modules\n"
    "are missing, pipelines with a module SPIR-V's validator refuses, and\n"
    "pipelines whose recorded state breaks a rule of the Vulkan specification\n"
    "(refused) are skipped and counted, one line each; the rest of every archive\n"
    "is imported. A cut-off last entry is ignored, as the\n"
    "format says. Counts are per pipeline kind and per archive (a pipeline is\n"
    "counted in the first archive that has it).\n"
    "DIR must hold no cache yet or one that this command filled (a cache of\n"
    "another stamp, e.g. from kiln prepare on GLSL, is refused, never started\n"
    "over, unless --reset). Exit 0 when everything was imported, 1 when anything was skipped\n"
    "(everything good is imported all the same), 2 for a missing file, one\n"
    "that is not an archive, or a DIR that is not such a cache folder (then\n"
    "nothing is imported and no file or folder is made).\n"
    "\n"
    "  --cache DIR   the cache folder (default: $KILN_CACHE_DIR, else\n"
    "                $XDG_CACHE_HOME/kiln, else ~/.cache/kiln)\n"
    "  --reset       start a new cache in DIR: the cache there (of any stamp,\n"
    "                version, or with a damaged header) is set aside, its\n"
    "                files renamed programs.*.<stamp>.old (never removed)\n"
    "  --max-size SIZE|none  give the cache a size cap (K, M, G suffixes), which it\n"
    "                keeps itself and remembers: a store past it evicts the least\n"
    "                recently used records (never this run's); none clears it\n"
    "  --json        one JSON object on stdout\n"
    "  --help        this text\n";

/* The per-kind counts of one archive (or the total) as JSON: the totals
 * across kinds, then "kinds": {"graphics": {...}, "compute": ..., ...}. */
static void print_json_counts(struct cli_json *j, const struct kiln_foz_pipelines_report *r)
{
    uint64_t t[8] = {0};
    for (int k = 0; k < KILN_FOZ_KIND_COUNT; k++) {
        t[0] += r->found.found[k];
        t[1] += r->imported[k];
        t[2] += r->present[k];
        t[3] += r->found.duplicates[k];
        t[4] += r->found.unreadable[k];
        t[5] += r->invalid[k];
        t[6] += r->recorded_invalid[k];
        t[7] += r->found.refused[k];
    }
    cli_json_u64(j, "found", t[0]);
    cli_json_u64(j, "imported", t[1]);
    cli_json_u64(j, "present", t[2]);
    cli_json_u64(j, "duplicates", t[3]);
    cli_json_u64(j, "unreadable", t[4]);
    cli_json_u64(j, "invalid", t[5]);
    cli_json_u64(j, "recorded_invalid", t[6]);
    cli_json_u64(j, "refused", t[7]);
    cli_json_u64(j, "entries_skipped", r->found.entries_skipped);
    cli_json_object_begin(j, "kinds");
    for (int k = 0; k < KILN_FOZ_KIND_COUNT; k++) {
        cli_json_object_begin(j, kiln_foz_kind_name((enum kiln_foz_kind)k));
        cli_json_u64(j, "found", r->found.found[k]);
        cli_json_u64(j, "imported", r->imported[k]);
        cli_json_u64(j, "present", r->present[k]);
        cli_json_u64(j, "duplicates", r->found.duplicates[k]);
        cli_json_u64(j, "unreadable", r->found.unreadable[k]);
        cli_json_u64(j, "library_parts", r->found.library_parts[k]);
        cli_json_u64(j, "invalid", r->invalid[k]);
        cli_json_u64(j, "recorded_invalid", r->recorded_invalid[k]);
        cli_json_u64(j, "refused", r->found.refused[k]);
        cli_json_object_end(j);
    }
    cli_json_object_end(j);
}

/* Whether archive report `r` has anything skipped or damaged to tell. */
static bool has_skips(const struct kiln_foz_pipelines_report *r)
{
    uint64_t n = r->found.entries_skipped + r->found.truncated;
    for (int k = 0; k < KILN_FOZ_KIND_COUNT; k++)
        n += r->found.unreadable[k] + r->invalid[k] + r->found.refused[k];
    return n != 0;
}

/* One line for an archive (one with skips: the others are only in the
 * total) or the total: per kind found and imported, then only the counts
 * that are not zero (already present, met in an earlier archive, skipped;
 * the reasons are logged, one line each). */
static void print_text_counts(const char *what, const struct kiln_foz_pipelines_report *r)
{
    printf("%s:", what);
    const char *sep = "";
    for (int k = 0; k < KILN_FOZ_KIND_COUNT; k++) {
        if (!r->found.found[k])
            continue;
        printf("%s %s %" PRIu64 ": %" PRIu64 " imported", sep,
               kiln_foz_kind_name((enum kiln_foz_kind)k), r->found.found[k], r->imported[k]);
        const struct {
            uint64_t n;
            const char *what;
        } more[] = {{r->present[k], "already present"},
                    {r->found.duplicates[k], "duplicate"},
                    {r->found.unreadable[k], "unreadable"},
                    {r->invalid[k], "invalid"},
                    {r->found.refused[k], "refused"}};
        for (size_t m = 0; m < CLI_ARRAY_LEN(more); m++)
            if (more[m].n)
                printf(", %" PRIu64 " %s%s", more[m].n, more[m].what,
                       m == 1 ? CLI_S(more[m].n) : "");
        if (r->recorded_invalid[k])
            printf(" (%" PRIu64 " imported though the validator refuses a stage)",
                   r->recorded_invalid[k]);
        sep = ";";
    }
    if (!*sep)
        printf(" no pipelines");
    if (r->found.entries_skipped)
        printf("; %" PRIu64 " damaged entr%s skipped", r->found.entries_skipped,
               r->found.entries_skipped == 1 ? "y" : "ies");
    if (r->found.truncated)
        printf("; cut-off last entry ignored");
    printf("\n");
}

int cmd_import_foz(int argc, char **argv)
{
    bool json = false, reset = false;
    const char *dir;
    int ex = cli_parse_cache_options(argc, argv, &dir, &reset, &json, help, argv[0]);
    if (ex != CLI_NEXT_OPTION)
        return ex;
    if (optind >= argc)
        return cli_usage_error(argv[0], "expected at least one .foz archive");
    for (int i = optind; i < argc; i++)
        CLI_TRY(cli_check_path(argv[0], "an archive", argv[i]));
    /* The cache folder and the archives first: what is wrong with them is
     * reported before anything is made or written. */
    bool has_cache;
    struct kiln_cache_stats st = KILN_CACHE_STATS_INIT;
    int bad = reset ? KILN_EXIT_OK : cli_check_cache_folder(argv[0], dir, &has_cache, &st);
    if (bad != KILN_EXIT_OK)
        return bad;
    if (!reset && has_cache && st.stamp != KILN_FOZ_STAMP) {
        /* A writer of the import's stamp would start that cache over. */
        cli_error(argv[0],
                  "%s: holds a cache of stamp %016" PRIx64 ", not one of imported Fossilize "
                  "pipelines (%016" PRIx64 "); nothing imported, the cache left as it is%s",
                  dir, st.stamp, (uint64_t)KILN_FOZ_STAMP, cli_reset_hint(KILN_ESTAMP));
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

    /* Every archive is read (whole) before anything is made: one that
     * cannot be (an object's JSON that does not parse) changes nothing. */
    size_t n = (size_t)(argc - optind);
    uint64_t t0 = kiln_now_ns();
    struct kiln_foz_pipelines *fp = NULL;
    int rc = kiln_foz_pipelines_open((const char *const *)&argv[optind], n, &fp);
    if (rc < 0) {
        cli_note_code(rc); /* the archive's line is logged */
        return cli_exit_for(rc);
    }
    if (reset) {
        /* The archives read: only now is the old cache set aside. */
        int rex = cli_reset_cache(argv[0], dir, KILN_FOZ_STAMP);
        if (rex != KILN_EXIT_OK) {
            kiln_foz_pipelines_destroy(fp);
            return rex;
        }
    }
    bool made = false;
    int mex = cli_make_folder(argv[0], dir, &made);
    if (mex != KILN_EXIT_OK) {
        kiln_foz_pipelines_destroy(fp);
        return mex;
    }
    struct kiln_cache_options opt = {.size = sizeof(opt),
                                     .stamp = KILN_FOZ_STAMP,
                                     .flags = KILN_CACHE_CREATE | KILN_CACHE_USE_DICT,
                                     .max_size = cli_max_size_option()};
    struct kiln_cache *c;
    rc = kiln_cache_open(dir, &opt, &c);
    if (rc < 0) {
        cli_error(argv[0], "%s: cannot open the cache: %s%s", dir,
                  rc == KILN_ENOENT ? "not a folder" : kiln_strerror(rc),
                  rc == KILN_EBUSY ? " (another writer holds it)" : "");
        cli_unmake_folder(dir, made);
        kiln_foz_pipelines_destroy(fp);
        return cli_exit_for(rc);
    }
    struct kiln_foz_pipelines_report *reps = calloc(n, sizeof(*reps));
    struct cli_cache_bar bar;
    cli_cache_bar_attach(&bar, NULL);
    rc = reps ? kiln_foz_pipelines_import_progress(c, fp, reps, cli_cache_bar_report, &bar)
              : KILN_ENOMEM;
    cli_cache_bar_close(&bar);
    double secs = cli_seconds(t0, kiln_now_ns());
    size_t records = kiln_cache_count(c);
    kiln_cache_close(c);
    if (rc == KILN_ENOMEM && !reps) {
        kiln_foz_pipelines_destroy(fp);
        cli_error(argv[0], "out of memory");
        return KILN_EXIT_FAILED;
    }
    int exit_code = KILN_EXIT_OK;
    if (rc < 0) {
        cli_error(argv[0], "%s: import stopped: %s", dir, kiln_strerror(rc));
        exit_code = cli_exit_for(rc);
    }
    /* Totals over the archives, per kind. */
    struct kiln_foz_pipelines_report sum;
    memset(&sum, 0, sizeof(sum));
    for (size_t i = 0; i < n; i++) {
        const struct kiln_foz_pipelines_report *r = &reps[i];
        for (int k = 0; k < KILN_FOZ_KIND_COUNT; k++) {
            sum.found.found[k] += r->found.found[k];
            sum.found.unique[k] += r->found.unique[k];
            sum.found.duplicates[k] += r->found.duplicates[k];
            sum.found.unreadable[k] += r->found.unreadable[k];
            sum.found.refused[k] += r->found.refused[k];
            sum.imported[k] += r->imported[k];
            sum.present[k] += r->present[k];
            sum.invalid[k] += r->invalid[k];
            sum.recorded_invalid[k] += r->recorded_invalid[k];
        }
        sum.found.entries_skipped += r->found.entries_skipped;
        sum.found.truncated |= r->found.truncated;
        sum.spirv_bytes += r->spirv_bytes;
        sum.packed_bytes += r->packed_bytes;
        uint64_t skipped = r->found.entries_skipped + r->found.resyncs;
        for (int k = 0; k < KILN_FOZ_KIND_COUNT; k++)
            skipped += r->found.unreadable[k] + r->invalid[k] + r->found.refused[k];
        if (rc == KILN_OK && skipped && exit_code == KILN_EXIT_OK) {
            /* All that was good is stored; what was skipped is logged. */
            cli_note_error(KILN_ECORRUPT_RECORD,
                           "%s: %" PRIu64 " damaged entries and %" PRIu64
                           " pipelines (unreadable, invalid or refused) skipped",
                           argv[optind + (int)i], r->found.entries_skipped,
                           skipped - r->found.entries_skipped - r->found.resyncs);
            exit_code = KILN_EXIT_FAILED;
        }
    }
    if (json) {
        struct cli_json j;
        cli_json_begin(&j);
        cli_json_str(&j, "cache_dir", dir);
        cli_json_u64(&j, "archives", n);
        print_json_counts(&j, &sum);
        cli_json_u64(&j, "pipelines", kiln_foz_pipelines_count(fp));
        cli_json_u64(&j, "spirv_bytes", sum.spirv_bytes);
        cli_json_u64(&j, "packed_bytes", sum.packed_bytes);
        cli_json_u64(&j, "records", records);
        cli_json_seconds(&j, "import", secs);
        cli_json_array_begin(&j, "files");
        for (size_t i = 0; i < n; i++) {
            const struct kiln_foz_pipelines_report *r = &reps[i];
            cli_json_object_begin(&j, NULL);
            cli_json_str(&j, "path", argv[optind + (int)i]);
            cli_json_str(&j, "status", rc < 0 ? kiln_errname(rc) : "ok");
            print_json_counts(&j, r);
            cli_json_u64(&j, "resyncs", r->found.resyncs);
            cli_json_u64(&j, "skipped_bytes", r->found.skipped_bytes);
            cli_json_bool(&j, "truncated", r->found.truncated);
            if (r->found.first_unreadable[0])
                cli_json_str(&j, "first_unreadable", r->found.first_unreadable);
            if (r->first_invalid[0])
                cli_json_str(&j, "first_invalid", r->first_invalid);
            if (r->found.first_refused[0])
                cli_json_str(&j, "first_refused", r->found.first_refused);
            cli_json_object_end(&j);
        }
        cli_json_array_end(&j);
        cli_json_end(&j);
    } else {
        for (size_t i = 0; i < n; i++)
            if (has_skips(&reps[i]))
                print_text_counts(argv[optind + (int)i], &reps[i]);
        print_text_counts(n == 1 ? argv[optind] : "total", &sum);
        char b1[32], b2[32];
        if (sum.spirv_bytes)
            printf("cache       %s: %zu record%s; imported %s of SPIR-V as %s (%.2f s)\n", dir,
                   records, CLI_S(records), cli_format_bytes(b1, sizeof(b1), sum.spirv_bytes),
                   cli_format_bytes(b2, sizeof(b2), sum.packed_bytes), secs);
        else
            printf("cache       %s: %zu record%s; nothing new imported (%.2f s)\n", dir, records,
                   CLI_S(records), secs);
    }
    kiln_foz_pipelines_destroy(fp);
    free(reps);
    return exit_code;
}
