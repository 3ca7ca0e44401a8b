/*
 * cmd_cache.c - `kiln cache stats` and `kiln cache check`: what a cache
 * holds, and whether every record in it is whole.
 *
 * Both only read unless --repair is given: stats opens the cache read-only
 * (whatever its stamp), so it can run beside the writer that holds it, and
 * says how such an open goes now (from the index, with a tail to read, or
 * by a full scan).
 */
#include "cli.h"
#include "commands.h"

#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <string.h>

static const char stats_help[] =
    "usage: %s [DIR | --cache DIR] [--layer DIR]... [--json]\n"
    "\n"
    "Opens the cache in DIR read-only (whatever its stamp) and reports its live\n"
    "records (a superseded record does not count), their payload bytes, the\n"
    "records file's size, the stamp, and how the open went: from the index\n"
    "('index'), from the index plus records past its end ('index+tail'), by a\n"
    "full scan ('rebuilt'), or 'new' for an empty cache, and the driver's word\n"
    "on the last prepare, start and service run (the build ledger: pipelines\n"
    "built, those the driver gave creation feedback for, its cache hits, its\n"
    "time, the probes it answered without a compile). Nothing is written.\n"
    "\n"
    "  --cache DIR   the same as DIR; with neither: $KILN_CACHE_DIR, else\n"
    "                $XDG_CACHE_HOME/kiln, else ~/.cache/kiln\n"
    "  --layer DIR   a read-only cache beneath it (repeatable, at most 8): how many\n"
    "                are used, left out (one line says why), and the records they add\n"
    "  --json    one JSON object on stdout\n"
    "  --help    this text\n";

/* cache stats' options: the report options and --layer DIR. */
static int stats_options(int argc, char **argv, bool *json, const char **layers, size_t *nlayers)
{
    static const struct option opts[] = {CLI_CACHE_OPTION,
                                         {"layer", required_argument, NULL, 'L'},
                                         {"json", no_argument, NULL, 'j'},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    int ch, ex = CLI_NEXT_OPTION;
    opterr = 0;
    optind = 1;
    while (ex == CLI_NEXT_OPTION && (ch = cli_getopt(argc, argv, "", opts)) != -1) {
        if (ch == 'L')
            ex = cli_parse_layer(argv[0], optarg, layers, nlayers) ? KILN_EXIT_USAGE
                                                                   : CLI_NEXT_OPTION;
        else
            ex = cli_report_option(ch, argv, json, stats_help, argv[0]);
    }
    return ex;
}

/* The ledger's run kinds, in kiln_ledger_run_kind order from 1. */
static const char *const run_kinds[] = {"prepare", "start", "service"};

/* The driver's word on the last run of each kind (kiln_ledger_last_run):
 * found[k] tells which there were. */
static void read_driver_word(const char *dir, struct kiln_ledger_run runs[3], bool found[3])
{
    for (uint32_t k = 0; k < 3; k++) {
        runs[k] = (struct kiln_ledger_run)KILN_LEDGER_RUN_INIT;
        found[k] = kiln_ledger_last_run(dir, k + KILN_LEDGER_RUN_PREPARE, &runs[k]) == KILN_OK;
    }
}

static void json_driver_word(struct cli_json *j, const struct kiln_ledger_run runs[3],
                             const bool found[3])
{
    cli_json_object_begin(j, "driver_word");
    for (int k = 0; k < 3; k++) {
        const struct kiln_ledger_run *r = &runs[k];
        if (!found[k]) {
            cli_json_null(j, run_kinds[k]);
            continue;
        }
        cli_json_object_begin(j, run_kinds[k]);
        cli_json_u64(j, "unix_time", r->when);
        cli_json_u64(j, "vendor_id", r->vendor_id);
        cli_json_u64(j, "device_id", r->device_id);
        cli_json_u64(j, "driver_version", r->driver_version);
        cli_json_u64(j, "pipelines", r->pipelines);
        cli_json_u64(j, "feedback_pipelines", r->feedback);
        cli_json_u64(j, "driver_cache_hits", r->cache_hits);
        cli_json_u64(j, "driver_ns", r->driver_ns);
        cli_json_u64(j, "probed", r->probed);
        cli_json_u64(j, "probe_hits", r->probe_hits);
        cli_json_object_end(j);
    }
    cli_json_object_end(j);
}

static void print_driver_word(const struct kiln_ledger_run runs[3], const bool found[3])
{
    bool any = false;
    for (int k = 0; k < 3; k++) {
        const struct kiln_ledger_run *r = &runs[k];
        if (!found[k])
            continue;
        printf("%s %-8s %" PRIu64 " pipeline%s, %" PRIu64 " with feedback, %" PRIu64
               " driver cache hit%s, %.1f ms of driver time",
               any ? "           " : "driver word", run_kinds[k], r->pipelines, CLI_S(r->pipelines),
               r->feedback, r->cache_hits, CLI_S(r->cache_hits), (double)r->driver_ns / 1e6);
        if (r->probed)
            printf(", %" PRIu64 " of %" PRIu64 " probes answered without a compile", r->probe_hits,
                   r->probed);
        printf(" (device %04x:%04x)\n", r->vendor_id, r->device_id);
        any = true;
    }
    if (!any)
        printf("driver word none recorded (no run with the driver's feedback yet)\n");
}

int cmd_cache_stats(int argc, char **argv)
{
    bool json = false;
    const char *layers[KILN_CACHE_MAX_LAYERS];
    size_t nlayers = 0;
    int ex = stats_options(argc, argv, &json, layers, &nlayers);
    if (ex != CLI_NEXT_OPTION)
        return ex;
    const char *dir;
    struct kiln_cache_options opt = {.size = sizeof(opt),
                                     .flags = KILN_CACHE_READ_ONLY | KILN_CACHE_ANY_STAMP,
                                     .layers = layers,
                                     .nlayers = nlayers};
    struct kiln_cache *c;
    ex = cli_one_cache_dir(argc, argv, &dir);
    if (ex == KILN_EXIT_OK)
        ex = cli_open_cache(argv[0], dir, &opt, &c);
    if (ex != KILN_EXIT_OK)
        return ex;
    struct kiln_cache_stats st = KILN_CACHE_STATS_INIT;
    kiln_cache_get_stats(c, &st);
    kiln_cache_close(c);
    struct kiln_ledger_run runs[3];
    bool found[3];
    read_driver_word(dir, runs, found);
    char stamp[20], dict[20];
    snprintf(stamp, sizeof(stamp), "%016" PRIx64, st.stamp);
    if (json) {
        struct cli_json j;
        cli_json_begin(&j);
        cli_json_str(&j, "cache_dir", dir);
        cli_json_u64(&j, "records", st.records);
        cli_json_u64(&j, "bytes", st.bytes);
        cli_json_u64(&j, "superseded", st.superseded);
        cli_json_u64(&j, "file_bytes", st.file_bytes);
        cli_json_str(&j, "stamp", stamp);
        cli_json_hex_or_null(&j, "dict_id", st.dict_id);
        cli_json_str(&j, "cache_open", kiln_cache_open_kind_name(st.open_kind));
        cli_json_str(&j, "open", kiln_cache_open_kind_name(st.open_kind)); /* kiln/1's name */
        cli_json_str(&j, "open_text", st.open_text);
        cli_json_u64(&j, "tail_records", st.tail_records);
        cli_json_u64(&j, "torn_tail_bytes", st.cut_bytes);
        cli_json_u64(&j, "damaged_bytes", st.damaged_bytes);
        cli_json_u64(&j, "max_size", st.max_size);
        if (nlayers) {
            cli_json_u64(&j, "layers", st.layers);
            cli_json_u64(&j, "layers_left_out", st.layers_left_out);
            cli_json_u64(&j, "layer_records", st.layer_records);
        }
        cli_json_seconds(&j, "open", (double)st.open_ns / 1e9);
        json_driver_word(&j, runs, found);
        cli_json_end(&j);
        return KILN_EXIT_OK;
    }
    char b1[32], b2[32];
    printf("cache       %s\n", dir);
    printf("records     %" PRIu64 " live, %" PRIu64 " superseded\n", st.records, st.superseded);
    printf("bytes       %s of payload, records file %s\n",
           cli_format_bytes(b1, sizeof(b1), st.bytes),
           cli_format_bytes(b2, sizeof(b2), st.file_bytes));
    printf("stamp       %s (dictionary %s)\n", stamp,
           cli_format_dict(dict, sizeof(dict), st.dict_id));
    printf("open        %s in %.1f ms: %s\n", kiln_cache_open_kind_name(st.open_kind),
           (double)st.open_ns / 1e6, st.open_text);
    if (st.max_size)
        printf("size cap    %s (the records file; a store past it evicts the least recently "
               "used records)\n",
               cli_format_bytes(b1, sizeof(b1), st.max_size));
    else
        printf("size cap    none\n");
    if (nlayers)
        printf("layers      %u used, %u left out; %" PRIu64 " record%s beneath this cache's own\n",
               st.layers, st.layers_left_out, st.layer_records, CLI_S(st.layer_records));
    print_driver_word(runs, found);
    return KILN_EXIT_OK;
}

static const char check_help[] =
    "usage: %s [DIR | --cache DIR] [--repair] [--json]\n"
    "\n"
    "Reads every record of the cache in DIR, checks its head and checksum, and\n"
    "checks the index against the records. The cache is whole when every byte\n"
    "of the records file is a whole record, the index names each of them, and\n"
    "the dictionary is whole. A damaged record is never returned: the index\n"
    "may name it (a load reports it missing) or leave it out (it reads as\n"
    "missing); either way its bytes stay in the file, and the cache is not\n"
    "whole, until 'kiln cache compact DIR' drops them. When the cache is not\n"
    "whole, the result line names the one command that makes it whole.\n"
    "Exit 0 only when the cache is whole (after --repair: when a check would\n"
    "now say so), 1 when it is not, 2 when DIR holds no cache.\n"
    "\n"
    "  --repair  cut a torn tail and rewrite the index from the whole records\n"
    "            (takes the writer lock; damaged records are left out of the\n"
    "            index so they read as missing and can be written again);\n"
    "            the file is not rewritten: a compaction drops the damaged\n"
    "            bytes\n"
    "  --cache DIR   the same as DIR; with neither: $KILN_CACHE_DIR, else\n"
    "                $XDG_CACHE_HOME/kiln, else ~/.cache/kiln\n"
    "  --json    one JSON object on stdout: records, bad_records (damaged\n"
    "            records), damaged_indexed and damaged_left_out (of those, the\n"
    "            ones the index names and leaves out, as found),\n"
    "            bad_record_bytes, damaged_bytes (between records),\n"
    "            torn_tail_bytes, index, index_text, index_entries, whole (as\n"
    "            found), repaired, whole_now, next (\"none\", \"repair\" or\n"
    "            \"compact\") and next_command (the command, or null)\n"
    "  --help    this text\n";

static const char *index_state_name(enum kiln_cache_index_state s)
{
    switch (s) {
    case KILN_CACHE_INDEX_OK:
        return "ok";
    case KILN_CACHE_INDEX_BEHIND:
        return "behind";
    case KILN_CACHE_INDEX_INVALID:
        return "invalid";
    case KILN_CACHE_INDEX_MISSING:
        return "missing";
    }
    return "?";
}

static const char *next_name(enum kiln_cache_next_step s)
{
    switch (s) {
    case KILN_CACHE_NEXT_NONE:
        return "none";
    case KILN_CACHE_NEXT_REPAIR:
        return "repair";
    case KILN_CACHE_NEXT_COMPACT:
        return "compact";
    }
    return "?";
}

/* Appends to out[cap] (kept NUL-terminated, cut at cap). */
static void add(char *out, size_t cap, const char *fmt, ...)
    __attribute__((format(CLI_PRINTF_KIND, 3, 4)));

static void add(char *out, size_t cap, const char *fmt, ...)
{
    size_t n = strlen(out);
    if (n + 1 >= cap)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(out + n, cap - n, fmt, ap);
    va_end(ap);
}

/*
 * The result line: "whole", or "not whole: " what remains now (after the
 * repair, when one ran) and the one command that makes the cache whole,
 * in the words a following check uses.
 */
static void check_result(const struct kiln_cache_check_report *r, bool repair, const char *next,
                         char *out, size_t cap)
{
    out[0] = 0;
    if (r->whole) {
        snprintf(out, cap, "whole");
        return;
    }
    bool fixed = repair && r->next != KILN_CACHE_NEXT_REPAIR; /* index and tail as they should be */
    bool rewrote =
        repair && r->repaired &&
        (r->index_state != KILN_CACHE_INDEX_OK || r->damaged_indexed || r->torn_tail_bytes);
    if (rewrote)
        add(out, cap, "repaired (%sindex rewritten); ",
            r->torn_tail_bytes ? "torn tail cut, " : "");
    else if (r->repaired)
        add(out, cap, "repaired; ");
    if (!r->bad_records && !r->damaged_bytes && r->next == KILN_CACHE_NEXT_NONE && fixed) {
        add(out, cap, "whole now");
        return;
    }
    add(out, cap, "not whole: ");
    size_t start = strlen(out);
    uint64_t n = r->bad_records;
    bool out_of_index = fixed || (r->index_state == KILN_CACHE_INDEX_OK && !r->damaged_indexed);
    if (n)
        add(out, cap, "%" PRIu64 " damaged record%s, %s", n, n == 1 ? "" : "s",
            out_of_index ? "left out of the index (reads as missing)"
                         : "a load reports it missing");
    if (r->damaged_bytes)
        add(out, cap, "%s%" PRIu64 " damaged byte%s between records",
            strlen(out) > start ? "; " : "", r->damaged_bytes, r->damaged_bytes == 1 ? "" : "s");
    if (!fixed && r->torn_tail_bytes)
        add(out, cap, "%sa torn tail of %" PRIu64 " byte%s", strlen(out) > start ? "; " : "",
            r->torn_tail_bytes, r->torn_tail_bytes == 1 ? "" : "s");
    if (!fixed && r->index_state != KILN_CACHE_INDEX_OK)
        add(out, cap, "%sindex %s", strlen(out) > start ? "; " : "",
            index_state_name(r->index_state));
    if (strlen(out) == start)
        add(out, cap, "dictionary: %s", r->dict_text);
    if (r->next == KILN_CACHE_NEXT_COMPACT)
        add(out, cap, ": run '%s' to drop %s", next,
            n + (r->damaged_bytes != 0) == 1 ? "it" : "them");
    else if (r->next == KILN_CACHE_NEXT_REPAIR)
        add(out, cap, ": run '%s'", next);
    else
        add(out, cap, ": no kiln command can make it whole");
}

int cmd_cache_check(int argc, char **argv)
{
    static const struct option opts[] = {{"repair", no_argument, NULL, 'r'},
                                         CLI_CACHE_OPTION,
                                         {"json", no_argument, NULL, 'j'},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    bool json = false, repair = false;
    int ch, ex;
    opterr = 0;
    optind = 1;
    while ((ch = cli_getopt(argc, argv, "", opts)) != -1) {
        if (ch == 'r') {
            repair = true;
        } else {
            ex = cli_report_option(ch, argv, &json, check_help, argv[0]);
            if (ex != CLI_NEXT_OPTION)
                return ex;
        }
    }
    const char *dir;
    ex = cli_one_cache_dir(argc, argv, &dir);
    if (ex != KILN_EXIT_OK)
        return ex;
    struct kiln_cache_check_report rep = KILN_CACHE_CHECK_REPORT_INIT;
    uint64_t t0 = kiln_now_ns();
    struct cli_io_meter meter;
    cli_io_meter_init(&meter, "programs.kpc", "check");
    int rc = kiln_cache_check(dir, &meter.io, repair, &rep);
    cli_io_meter_close(&meter);
    double secs = cli_seconds(t0, kiln_now_ns());
    if (rc < 0 && rc != KILN_ECORRUPT) {
        cli_error(argv[0], "%s: cannot check the cache: %s", dir, kiln_strerror(rc));
        return cli_exit_for(rc);
    }
    bool whole_now = rc == KILN_OK;
    char next[CLI_PATH_MAX + 64] = "";
    if (rep.next == KILN_CACHE_NEXT_COMPACT)
        snprintf(next, sizeof(next), "kiln cache compact %s", dir);
    else if (rep.next == KILN_CACHE_NEXT_REPAIR)
        snprintf(next, sizeof(next), "kiln cache check --repair %s", dir);
    char what[CLI_PATH_MAX + 512];
    check_result(&rep, repair, next, what, sizeof(what));
    if (json) {
        char stamp[20];
        snprintf(stamp, sizeof(stamp), "%016" PRIx64, rep.stamp);
        struct cli_json j;
        cli_json_begin(&j);
        cli_json_str(&j, "cache_dir", dir);
        cli_json_str(&j, "stamp", stamp);
        cli_json_hex_or_null(&j, "dict_id", rep.dict_id);
        cli_json_u64(&j, "file_bytes", rep.file_bytes);
        cli_json_u64(&j, "records", rep.records);
        cli_json_u64(&j, "damaged", rep.bad_records);
        cli_json_u64(&j, "bad_records", rep.bad_records); /* kiln/1's name */
        cli_json_u64(&j, "damaged_indexed", rep.damaged_indexed);
        cli_json_u64(&j, "damaged_left_out", rep.damaged_left_out);
        cli_json_u64(&j, "bad_record_bytes", rep.bad_record_bytes);
        cli_json_u64(&j, "damaged_bytes", rep.damaged_bytes);
        cli_json_u64(&j, "torn_tail_bytes", rep.torn_tail_bytes);
        cli_json_u64(&j, "index_entries", rep.index_entries);
        cli_json_str(&j, "index", index_state_name(rep.index_state));
        cli_json_str(&j, "index_text", rep.index_text);
        cli_json_u64(&j, "dictionary_copies", rep.dict_copies);
        cli_json_str(&j, "dictionary_text", rep.dict_text);
        cli_json_bool(&j, "whole", rep.whole);
        cli_json_bool(&j, "repaired", rep.repaired);
        cli_json_bool(&j, "whole_now", whole_now);
        cli_json_str(&j, "next", next_name(rep.next));
        if (next[0])
            cli_json_str(&j, "next_command", next);
        else
            cli_json_null(&j, "next_command");
        cli_json_seconds(&j, "check", secs);
        cli_json_end(&j);
    } else {
        char b[32], b2[32];
        printf("cache       %s (%s)\n", dir, cli_format_bytes(b, sizeof(b), rep.file_bytes));
        printf("records     %" PRIu64 " whole, %" PRIu64 " damaged (%s)", rep.records,
               rep.bad_records, cli_format_bytes(b, sizeof(b), rep.bad_record_bytes));
        if (rep.bad_records && rep.index_state == KILN_CACHE_INDEX_OK)
            printf(": %" PRIu64 " named by the index, %" PRIu64 " left out of it",
                   rep.damaged_indexed, rep.damaged_left_out);
        printf("\n");
        printf("damage      %s between records, torn tail of %s\n",
               cli_format_bytes(b, sizeof(b), rep.damaged_bytes),
               cli_format_bytes(b2, sizeof(b2), rep.torn_tail_bytes));
        printf("index       %s, %" PRIu64 " entr%s (%s)\n", index_state_name(rep.index_state),
               rep.index_entries, rep.index_entries == 1 ? "y" : "ies", rep.index_text);
        printf("dictionary  %s\n", rep.dict_text);
        printf("result      %s (%.2f s)\n", what, secs);
    }
    if (!whole_now)
        cli_note_error(rc, "%s: %s", dir, what);
    return whole_now ? KILN_EXIT_OK : KILN_EXIT_FAILED;
}
