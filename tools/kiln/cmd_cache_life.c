/*
 * cmd_cache_life.c - `kiln cache prune`, `kiln cache compact` and
 * `kiln cache merge`: keeping a cache's size in check and joining caches.
 *
 * Each is a thin layer over the library (kiln_cache_prune, _compact,
 * _merge; crash-safety is argued in src/cache/cache_life.c): the cache is
 * opened as a writer that keeps whatever stamp and dictionary it has
 * (KILN_CACHE_KEEP_STAMP), so a running writer makes these fail with
 * "busy" rather than race it. prune and compact then sweep the host tier
 * of driver binaries (kiln_binaries_sweep) while the writer lock is still
 * held: the binaries of the programs they dropped go with them.
 */
#include "cli.h"
#include "commands.h"

#include <getopt.h>
#include <inttypes.h>
#include <string.h>

/* What prune and compact are given, and the tier's sweep after them. */
struct life {
    const struct kiln_cache_prune_options *po; /* prune's; NULL: compact */
    struct kiln_binaries_sweep_report *sweep;
};

static void print_rewrite(const char *what, const char *dir, bool json,
                          const struct kiln_cache_rewrite_report *r, double secs,
                          const struct kiln_binaries_sweep_report *sw)
{
    if (json) {
        struct cli_json j;
        cli_json_begin(&j);
        cli_json_str(&j, "cache_dir", dir);
        cli_json_bool(&j, "rewritten", r->rewritten);
        cli_json_u64(&j, "records_before", r->records_before);
        cli_json_u64(&j, "records_after", r->records_after);
        cli_json_u64(&j, "dropped", r->dropped);
        cli_json_u64(&j, "superseded", r->superseded);
        cli_json_u64(&j, "damaged", r->damaged);
        cli_json_u64(&j, "damaged_bytes", r->damaged_bytes);
        cli_json_u64(&j, "records_read", r->records_read);
        cli_json_u64(&j, "file_bytes_before", r->file_bytes_before);
        cli_json_u64(&j, "file_bytes_after", r->file_bytes_after);
        cli_json_u64(&j, "payload_bytes_before", r->payload_bytes_before);
        cli_json_u64(&j, "payload_bytes_after", r->payload_bytes_after);
        cli_json_u64(&j, "binaries_swept", sw->swept);
        cli_json_seconds(&j, what, secs);
        cli_json_end(&j);
        return;
    }
    char b1[32], b2[32];
    printf("cache       %s\n", dir);
    if (sw->swept)
        printf("binaries    %" PRIu64 " pipeline%s of dropped programs removed\n", sw->swept,
               sw->swept == 1 ? "" : "s");
    if (!r->rewritten) {
        printf("result      nothing to %s: %" PRIu64 " record%s, %s, unchanged\n", what,
               r->records_before, r->records_before == 1 ? "" : "s",
               cli_format_bytes(b1, sizeof(b1), r->file_bytes_before));
        return;
    }
    /* Every record read lands in one of these (their sum is records_read). */
    printf("records     %" PRIu64 " -> %" PRIu64 " live; of %" PRIu64 " read: %" PRIu64
           " kept, %" PRIu64 " dropped, %" PRIu64 " superseded, %" PRIu64 " damaged left out\n",
           r->records_before, r->records_after, r->records_read, r->records_after, r->dropped,
           r->superseded, r->damaged);
    if (r->damaged_bytes)
        printf("damage      %s left out (damaged records and bytes no record held)\n",
               cli_format_bytes(b1, sizeof(b1), r->damaged_bytes));
    printf("file        %s -> %s (%.2f s)\n",
           cli_format_bytes(b1, sizeof(b1), r->file_bytes_before),
           cli_format_bytes(b2, sizeof(b2), r->file_bytes_after), secs);
}

/* The rewrite, then the sweep of the tier (a failed sweep is logged by
 * the library: the rewrite's result stands). */
static int prune_or_compact(struct kiln_cache *c, const void *arg,
                            struct kiln_cache_rewrite_report *r)
{
    const struct life *l = arg;
    int rc = l->po ? kiln_cache_prune(c, l->po, r) : kiln_cache_compact(c, r);
    if (rc == KILN_OK)
        kiln_binaries_sweep(c, l->sweep);
    return rc;
}

static const char prune_help[] =
    "usage: %s [DIR | --cache DIR] [--older-than DAYS] [--max-size SIZE|none] [--dry-run]\n"
    "       [--json]\n"
    "\n"
    "Drops the records of the cache in DIR that were not used (loaded or\n"
    "stored) in the last DAYS days, then the least recently used ones until\n"
    "the records file is at most SIZE bytes (K, M, G suffixes), and rewrites\n"
    "the cache without them (crash-safe: the old cache stays whole until the\n"
    "new one is renamed into place). Last use is kept per record in\n"
    "programs.kpu, at a day's resolution. The host tier's driver binaries\n"
    "(DIR/binaries/) of programs no longer in the cache go with them\n"
    "(binaries_swept).\n"
    "\n"
    "  --older-than DAYS  drop records unused for more than DAYS days\n"
    "  --max-size SIZE    keep the records file at most SIZE bytes: now, and from\n"
    "                     now on as the cache's size cap, which it keeps itself\n"
    "                     (none: no size limit, and the cap cleared)\n"
    "  --cache DIR        the same as DIR; with neither: $KILN_CACHE_DIR, else\n"
    "                     $XDG_CACHE_HOME/kiln, else ~/.cache/kiln\n"
    "  --dry-run          list what would go (one line per record: key, size,\n"
    "                     last use, reason) and the totals; nothing is written\n"
    "                     (the cache is opened read-only)\n"
    "  --json             one JSON object on stdout; with --dry-run: dry_run,\n"
    "                     records_before, records_after, dropped,\n"
    "                     dropped_bytes, file_bytes_before, file_bytes_after,\n"
    "                     today and drop[] {key, payload_bytes, record_bytes,\n"
    "                     last_use (YYYY-MM-DD), days_unused, reason\n"
    "                     (\"older_than\" or \"max_size\")}\n"
    "  --help             this text\n";

/* Day number (days since 1970-01-01) as YYYY-MM-DD, the civil calendar. */
static void day_text(uint32_t day, char out[32])
{
    int64_t z = (int64_t)day + 719468;
    int64_t era = z / 146097;
    int64_t doe = z - era * 146097;
    int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    int64_t mp = (5 * doy + 2) / 153;
    int64_t d = doy - (153 * mp + 2) / 5 + 1;
    int64_t m = mp < 10 ? mp + 3 : mp - 9;
    int64_t y = yoe + era * 400 + (m <= 2);
    snprintf(out, 32, "%04u-%02u-%02u", (unsigned)y % 10000u, (unsigned)m % 100u,
             (unsigned)d % 100u);
}

static void print_plan_json(const char *dir, const struct kiln_cache_prune_plan *p,
                            uint64_t max_size, uint32_t days)
{
    char key[40], date[32];
    struct cli_json j;
    cli_json_begin(&j);
    cli_json_str(&j, "cache_dir", dir);
    cli_json_bool(&j, "dry_run", true);
    cli_json_u64(&j, "records_before", p->records_before);
    cli_json_u64(&j, "records_after", p->records_after);
    cli_json_u64(&j, "dropped", p->count);
    cli_json_u64(&j, "dropped_bytes", p->dropped_bytes);
    cli_json_u64(&j, "file_bytes_before", p->file_bytes_before);
    cli_json_u64(&j, "file_bytes_after", p->file_bytes_after);
    day_text(p->today, date);
    cli_json_str(&j, "today", date);
    if (days != UINT32_MAX)
        cli_json_u64(&j, "older_than_days", days);
    else
        cli_json_null(&j, "older_than_days");
    cli_json_u64(&j, "max_size_bytes", max_size);
    cli_json_array_begin(&j, "drop");
    for (size_t i = 0; i < p->count; i++) {
        const struct kiln_cache_prune_item *it = &p->items[i];
        snprintf(key, sizeof(key), "%016" PRIx64 "%016" PRIx64, it->key.hi, it->key.lo);
        day_text(it->last_use, date);
        cli_json_object_begin(&j, NULL);
        cli_json_str(&j, "key", key);
        cli_json_u64(&j, "payload_bytes", it->size);
        cli_json_u64(&j, "record_bytes", it->record_bytes);
        cli_json_str(&j, "last_use", date);
        cli_json_u64(&j, "days_unused", p->today > it->last_use ? p->today - it->last_use : 0);
        cli_json_str(&j, "reason", it->reason == KILN_CACHE_PRUNE_OLD ? "older_than" : "max_size");
        cli_json_object_end(&j);
    }
    cli_json_array_end(&j);
    cli_json_end(&j);
}

static void print_plan_text(const char *dir, const struct kiln_cache_prune_plan *p,
                            uint64_t max_size, uint32_t days)
{
    char b1[32], b2[32], b3[32], key[48], date[32];
    printf("cache       %s (dry run: nothing is written)\n", dir);
    for (size_t i = 0; i < p->count; i++) {
        const struct kiln_cache_prune_item *it = &p->items[i];
        snprintf(key, sizeof(key), "program %016" PRIx64 "%016" PRIx64, it->key.hi, it->key.lo);
        day_text(it->last_use, date);
        uint32_t ago = p->today > it->last_use ? p->today - it->last_use : 0;
        char why[64];
        if (it->reason == KILN_CACHE_PRUNE_OLD)
            snprintf(why, sizeof(why), "older than %" PRIu32 " day%s", days, days == 1 ? "" : "s");
        else
            snprintf(why, sizeof(why), "over the size (%s)",
                     cli_format_bytes(b1, sizeof(b1), max_size));
        printf("would drop  %s  %10s  last used %s (%" PRIu32 " day%s ago)  %s\n", key,
               cli_format_bytes(b2, sizeof(b2), it->record_bytes), date, ago, ago == 1 ? "" : "s",
               why);
    }
    printf("result      would drop %zu record%s (%s): %" PRIu64 " -> %" PRIu64
           " live, records file %s -> %s\n",
           p->count, p->count == 1 ? "" : "s", cli_format_bytes(b1, sizeof(b1), p->dropped_bytes),
           p->records_before, p->records_after,
           cli_format_bytes(b2, sizeof(b2), p->file_bytes_before),
           cli_format_bytes(b3, sizeof(b3), p->file_bytes_after));
}

/* --dry-run: the prune's own selection (kiln_cache_plan_prune) on a
 * read-only open, which writes nothing, printed. */
static int prune_dry_run(const char *name, const char *dir,
                         const struct kiln_cache_prune_options *po, bool json)
{
    struct kiln_cache_options ro = {.size = sizeof(ro),
                                    .flags = KILN_CACHE_READ_ONLY | KILN_CACHE_ANY_STAMP};
    struct kiln_cache *c;
    CLI_TRY(cli_open_cache(name, dir, &ro, &c));
    struct kiln_cache_prune_plan p = KILN_CACHE_PRUNE_PLAN_INIT;
    int rc = kiln_cache_plan_prune(c, po, &p);
    kiln_cache_close(c);
    if (rc < 0) {
        cli_error(name, "%s: prune --dry-run failed: %s", dir, kiln_strerror(rc));
        return cli_exit_for(rc);
    }
    if (json)
        print_plan_json(dir, &p, po->max_file_bytes, po->older_than_days);
    else
        print_plan_text(dir, &p, po->max_file_bytes, po->older_than_days);
    kiln_cache_prune_plan_free(&p);
    return KILN_EXIT_OK;
}

int cmd_cache_prune(int argc, char **argv)
{
    static const struct option opts[] = {{"older-than", required_argument, NULL, 'o'},
                                         CLI_MAX_SIZE_OPTION,
                                         CLI_CACHE_OPTION,
                                         {"dry-run", no_argument, NULL, 'n'},
                                         {"json", no_argument, NULL, 'j'},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    struct kiln_cache_prune_options po = {
        .size = sizeof(po), .older_than_days = UINT32_MAX, .max_file_bytes = 0};
    bool json = false, any = false, dry = false;
    uint64_t v;
    int ch, ex;
    opterr = 0;
    optind = 1;
    while ((ch = cli_getopt(argc, argv, "", opts)) != -1) {
        if (ch == 'o') {
            if (cli_parse_u64(argv[0], "--older-than", optarg, 0, UINT32_MAX - 1, false, &v))
                return KILN_EXIT_USAGE;
            po.older_than_days = (uint32_t)v;
            any = true;
        } else if (ch == 'n') {
            dry = true;
        } else {
            ex = cli_report_option(ch, argv, &json, prune_help, argv[0]);
            if (ex != CLI_NEXT_OPTION)
                return ex;
        }
    }
    const char *dir;
    ex = cli_one_cache_dir(argc, argv, &dir);
    if (ex != KILN_EXIT_OK)
        return ex;
    /* --max-size prunes to SIZE now and keeps it as the cache's cap ("none":
     * no size limit now, and the cap cleared). */
    uint64_t cap = cli_max_size_option();
    po.max_file_bytes = cap == KILN_CACHE_NO_CAP ? 0 : cap;
    if (!any && !cap)
        return cli_usage_error(argv[0], "give --older-than DAYS and/or --max-size SIZE");
    if (dry)
        return prune_dry_run(argv[0], dir, &po, json);
    struct kiln_cache_rewrite_report r = KILN_CACHE_REWRITE_REPORT_INIT;
    struct kiln_binaries_sweep_report sw = KILN_BINARIES_SWEEP_REPORT_INIT;
    struct life l = {&po, &sw};
    double secs;
    CLI_TRY(cli_cache_rewrite(argv[0], dir, "prune", prune_or_compact, &l, &r, &secs));
    print_rewrite("prune", dir, json, &r, secs, &sw);
    return KILN_EXIT_OK;
}

static const char compact_help[] =
    "usage: %s [DIR | --cache DIR] [--max-size SIZE|none] [--json]\n"
    "\n"
    "Rewrites the records file of the cache in DIR without superseded or\n"
    "damaged records and dead bytes, and its index and last-use marks with it\n"
    "(new file, sync, rename: the old cache stays whole until the rename).\n"
    "Damaged records count whether the index names them or a repair left them\n"
    "out of it. Nothing is written when the file is already compact and every\n"
    "record checks out (each is read to know). Every record read is counted\n"
    "once: kept, superseded or damaged (records_read is their sum). Then the\n"
    "host tier's driver binaries of programs no longer in the cache go.\n"
    "\n"
    "  --cache DIR   the same as DIR; with neither: $KILN_CACHE_DIR, else\n"
    "                $XDG_CACHE_HOME/kiln, else ~/.cache/kiln\n"
    "  --max-size SIZE|none  give the cache a size cap (K, M, G suffixes), which it\n"
    "                keeps itself and remembers: a store past it evicts the least\n"
    "                recently used records (never this run's); none clears it\n"
    "  --json    one JSON object on stdout: rewritten, records_read,\n"
    "            records_before and records_after (live), dropped, superseded,\n"
    "            damaged, damaged_bytes, file_bytes_before, file_bytes_after,\n"
    "            payload_bytes_before, payload_bytes_after, binaries_swept\n"
    "  --help    this text\n";

int cmd_cache_compact(int argc, char **argv)
{
    bool json = false;
    int ex = cli_parse_report_options(argc, argv, &json, compact_help, argv[0]);
    if (ex != CLI_NEXT_OPTION)
        return ex;
    const char *dir;
    struct kiln_cache_rewrite_report r = KILN_CACHE_REWRITE_REPORT_INIT;
    struct kiln_binaries_sweep_report sw = KILN_BINARIES_SWEEP_REPORT_INIT;
    struct life l = {NULL, &sw};
    double secs;
    ex = cli_one_cache_dir(argc, argv, &dir);
    if (ex == KILN_EXIT_OK)
        ex = cli_cache_rewrite(argv[0], dir, "compact", prune_or_compact, &l, &r, &secs);
    if (ex != KILN_EXIT_OK)
        return ex;
    print_rewrite("compact", dir, json, &r, secs, &sw);
    return KILN_EXIT_OK;
}

static const char merge_help[] =
    "usage: %s OUT IN... [--max-size SIZE|none] [--json]\n"
    "       %s --cache OUT IN... [--max-size SIZE|none] [--json]\n"
    "\n"
    "Joins the caches IN... into the cache OUT (made when missing). Every cache\n"
    "must have the same stamp and dictionary, else nothing is merged. Packed\n"
    "payloads are copied as they are; for a key in several caches the newest\n"
    "wins (IN caches are newer than OUT, later ones newer than earlier ones).\n"
    "Records are appended to OUT and synced, so OUT is whole at every moment;\n"
    "run 'kiln cache compact OUT' afterwards to drop what was superseded. Every\n"
    "folder is checked before OUT is made or written: a missing input, or one\n"
    "that is not a cache, changes nothing (exit 2). Every live record read\n"
    "from IN... is counted once: added (of those, replaced: OUT had the key\n"
    "with another record), superseded (a later input has its key), same (OUT\n"
    "holds it byte for byte) or damaged (left out); records_read is their sum.\n"
    "\n"
    "  --cache OUT   the output folder, as an option (then every operand is\n"
    "                an input)\n"
    "  --max-size SIZE|none  give the cache a size cap (K, M, G suffixes), which it\n"
    "                keeps itself and remembers: a store past it evicts the least\n"
    "                recently used records (never this run's); none clears it\n"
    "  --json    one JSON object on stdout: inputs, records_read, added,\n"
    "            replaced, superseded, same, damaged, records_after,\n"
    "            file_bytes_after\n"
    "  --help    this text\n";

int cmd_cache_merge(int argc, char **argv)
{
    bool json = false;
    int ex = cli_parse_report_options(argc, argv, &json, merge_help, argv[0], argv[0]);
    if (ex != CLI_NEXT_OPTION)
        return ex;
    const char *out_dir = cli_cache_option();
    int first_in = out_dir ? optind : optind + 1;
    if (argc - first_in < 1 || first_in > argc)
        return cli_usage_error(argv[0], "expected an output cache folder and at least one input");
    for (int i = optind; i < argc; i++)
        CLI_TRY(cli_check_path(argv[0], i < first_in ? "the output folder" : "an input folder",
                               argv[i]));
    if (!out_dir)
        out_dir = argv[optind];
    const char *const *in = (const char *const *)&argv[first_in];
    size_t nin = (size_t)(argc - first_in);

    /* Everything is checked before OUT is made or written: OUT must be
     * missing, a folder without a cache, or a cache; every input must open
     * and have the first input's stamp and dictionary (and OUT's, when it
     * has a cache). */
    bool has_out;
    struct kiln_cache_stats out_st = KILN_CACHE_STATS_INIT;
    ex = cli_check_cache_folder(argv[0], out_dir, &has_out, &out_st);
    if (ex != KILN_EXIT_OK)
        return ex;
    /* OUT takes the first input's stamp and dictionary when it is made. */
    struct kiln_cache_options ro = {.size = sizeof(ro),
                                    .flags = KILN_CACHE_READ_ONLY | KILN_CACHE_ANY_STAMP |
                                             KILN_CACHE_USE_DICT};
    struct kiln_cache *first = NULL;
    struct kiln_cache_stats st = KILN_CACHE_STATS_INIT;
    for (size_t i = 0; i < nin; i++) {
        struct kiln_cache *c;
        ex = cli_open_cache(argv[0], in[i], &ro, &c);
        if (ex != KILN_EXIT_OK) {
            kiln_cache_close(first);
            return ex;
        }
        struct kiln_cache_stats cs = KILN_CACHE_STATS_INIT;
        kiln_cache_get_stats(c, &cs);
        if (!first) {
            first = c;
            st = cs;
            continue;
        }
        kiln_cache_close(c);
        if (cs.stamp != st.stamp || cs.dict_id != st.dict_id) {
            cli_error(argv[0],
                      "%s: stamp %016" PRIx64 " dictionary %016" PRIx64 ", but %s has %016" PRIx64
                      "/%016" PRIx64 ": caches of different stamps or dictionaries cannot be "
                      "merged; nothing merged",
                      in[i], cs.stamp, cs.dict_id, in[0], st.stamp, st.dict_id);
            kiln_cache_close(first);
            return KILN_EXIT_USAGE;
        }
    }
    if (has_out && (out_st.stamp != st.stamp || out_st.dict_id != st.dict_id)) {
        cli_error(argv[0],
                  "%s: stamp %016" PRIx64 " dictionary %016" PRIx64 ", but %s has %016" PRIx64
                  "/%016" PRIx64 ": caches of different stamps or dictionaries cannot be "
                  "merged; nothing merged",
                  out_dir, out_st.stamp, out_st.dict_id, in[0], st.stamp, st.dict_id);
        kiln_cache_close(first);
        return KILN_EXIT_USAGE;
    }

    bool made = false;
    int mex = cli_make_folder(argv[0], out_dir, &made);
    if (mex != KILN_EXIT_OK) {
        kiln_cache_close(first);
        return mex;
    }
    struct kiln_cache_options wo = {.size = sizeof(wo),
                                    .stamp = st.stamp,
                                    .dict = kiln_cache_dict(first),
                                    .dict_id = st.dict_id,
                                    .flags = KILN_CACHE_KEEP_STAMP | KILN_CACHE_CREATE,
                                    .max_size = cli_max_size_option()};
    struct kiln_cache *out;
    int rc = kiln_cache_open(out_dir, &wo, &out);
    kiln_cache_close(first);
    if (rc < 0) {
        cli_error(argv[0], "%s: cannot open the output cache: %s%s", out_dir, kiln_strerror(rc),
                  rc == KILN_EBUSY ? " (another writer holds it)" : "");
        cli_unmake_folder(out_dir, made);
        return cli_exit_for(rc);
    }
    struct kiln_cache_merge_report r = KILN_CACHE_MERGE_REPORT_INIT;
    struct cli_cache_bar bar;
    cli_cache_bar_attach(&bar, out);
    uint64_t t0 = kiln_now_ns();
    rc = kiln_cache_merge(out, in, nin, &r);
    double secs = cli_seconds(t0, kiln_now_ns());
    cli_cache_bar_close(&bar);
    kiln_cache_close(out);
    if (rc < 0) {
        cli_error(argv[0], "%s: merge failed: %s%s", out_dir, kiln_strerror(rc),
                  rc == KILN_ESTAMP ? " (the caches have different stamps or dictionaries)" : "");
        return cli_exit_for(rc);
    }
    if (json) {
        struct cli_json j;
        cli_json_begin(&j);
        cli_json_str(&j, "cache_dir", out_dir);
        cli_json_u64(&j, "inputs", r.inputs);
        cli_json_u64(&j, "records_read", r.records_read);
        cli_json_u64(&j, "added", r.added);
        cli_json_u64(&j, "replaced", r.replaced);
        cli_json_u64(&j, "same", r.same);
        cli_json_u64(&j, "superseded", r.superseded);
        cli_json_u64(&j, "damaged", r.damaged);
        cli_json_u64(&j, "records_after", r.records_after);
        cli_json_u64(&j, "file_bytes_after", r.file_bytes_after);
        cli_json_seconds(&j, "merge", secs);
        cli_json_end(&j);
        return KILN_EXIT_OK;
    }
    char b[32];
    printf("cache       %s (from %" PRIu64 " cache%s)\n", out_dir, r.inputs,
           r.inputs == 1 ? "" : "s");
    /* Every record read lands in one of these (their sum is records_read). */
    printf("records     %" PRIu64 " read: %" PRIu64 " added (%" PRIu64
           " replacing one in %s), %" PRIu64 " superseded by a later input, %" PRIu64
           " already there, %" PRIu64 " damaged left out\n",
           r.records_read, r.added, r.replaced, out_dir, r.superseded, r.same, r.damaged);
    printf("result      %" PRIu64 " record%s, %s (%.2f s)\n", r.records_after,
           r.records_after == 1 ? "" : "s", cli_format_bytes(b, sizeof(b), r.file_bytes_after),
           secs);
    return KILN_EXIT_OK;
}
