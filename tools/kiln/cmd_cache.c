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
#include <string.h>

static const char stats_help[] =
    "usage: %s [DIR | --cache DIR] [--json]\n"
    "\n"
    "Opens the cache in DIR read-only (whatever its stamp) and reports its live\n"
    "records (a superseded record does not count), their payload bytes, the\n"
    "records file's size, the stamp, and how the open went: from the index\n"
    "('index'), from the index plus records past its end ('index+tail'), by a\n"
    "full scan ('rebuilt'), or 'new' for an empty cache. Nothing is written.\n"
    "\n"
    "  --cache DIR   the same as DIR; with neither: $KILN_CACHE_DIR, else\n"
    "                $XDG_CACHE_HOME/kiln, else ~/.cache/kiln\n"
    "  --json    one JSON object on stdout\n"
    "  --help    this text\n";

int cmd_cache_stats(int argc, char **argv)
{
    bool json = false;
    int ex = cli_parse_report_options(argc, argv, &json, stats_help, argv[0]);
    if (ex != CLI_NEXT_OPTION)
        return ex;
    const char *dir;
    struct kiln_cache_options opt = {.flags = KILN_CACHE_READ_ONLY | KILN_CACHE_ANY_STAMP};
    struct kiln_cache *c;
    ex = cli_one_cache_dir(argc, argv, &dir);
    if (ex == KILN_EXIT_OK)
        ex = cli_open_cache(argv[0], dir, &opt, &c);
    if (ex != KILN_EXIT_OK)
        return ex;
    struct kiln_cache_stats st;
    kiln_cache_get_stats(c, &st);
    kiln_cache_close(c);
    char stamp[20], dict[20];
    snprintf(stamp, sizeof(stamp), "%016" PRIx64, st.stamp);
    snprintf(dict, sizeof(dict), "%016" PRIx64, st.dict_id);
    if (json) {
        struct cli_json j;
        cli_json_begin(&j);
        cli_json_str(&j, "cache_dir", dir);
        cli_json_u64(&j, "records", st.records);
        cli_json_u64(&j, "bytes", st.bytes);
        cli_json_u64(&j, "superseded", st.superseded);
        cli_json_u64(&j, "file_bytes", st.file_bytes);
        cli_json_str(&j, "stamp", stamp);
        cli_json_str(&j, "dict_id", dict);
        cli_json_str(&j, "cache_open", kiln_cache_open_kind_name(st.open_kind));
        cli_json_str(&j, "open", kiln_cache_open_kind_name(st.open_kind)); /* kiln/1's name */
        cli_json_str(&j, "open_text", st.open_text);
        cli_json_u64(&j, "tail_records", st.tail_records);
        cli_json_u64(&j, "torn_tail_bytes", st.cut_bytes);
        cli_json_u64(&j, "damaged_bytes", st.damaged_bytes);
        cli_json_seconds(&j, "open", (double)st.open_ns / 1e9);
        cli_json_end(&j);
        return KILN_EXIT_OK;
    }
    char b1[32], b2[32];
    printf("cache       %s\n", dir);
    printf("records     %" PRIu64 " live, %" PRIu64 " superseded\n", st.records, st.superseded);
    printf("bytes       %s of payload, records file %s\n",
           cli_format_bytes(b1, sizeof(b1), st.bytes),
           cli_format_bytes(b2, sizeof(b2), st.file_bytes));
    printf("stamp       %s (dictionary %s)\n", stamp, st.dict_id ? dict : "none");
    printf("open        %s in %.1f ms: %s\n", kiln_cache_open_kind_name(st.open_kind),
           (double)st.open_ns / 1e6, st.open_text);
    return KILN_EXIT_OK;
}

static const char check_help[] =
    "usage: %s [DIR | --cache DIR] [--repair] [--json]\n"
    "\n"
    "Reads every record of the cache in DIR, checks its head and checksum, and\n"
    "checks the index against the records. Exit 0 only when the cache is whole\n"
    "(or --repair made it whole), 1 when damage remains, 2 when DIR holds no\n"
    "cache.\n"
    "\n"
    "  --repair  cut a torn tail and rewrite the index from the whole records\n"
    "            (takes the writer lock; damaged records are left out of the\n"
    "            index so they read as missing and can be written again)\n"
    "  --cache DIR   the same as DIR; with neither: $KILN_CACHE_DIR, else\n"
    "                $XDG_CACHE_HOME/kiln, else ~/.cache/kiln\n"
    "  --json    one JSON object on stdout\n"
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
    struct kiln_cache_check_report rep;
    uint64_t t0 = kiln_now_ns();
    int rc = kiln_cache_check(dir, NULL, repair, &rep);
    double secs = cli_seconds(t0, kiln_now_ns());
    if (rc < 0 && rc != KILN_ECORRUPT) {
        cli_error(argv[0], "%s: cannot check the cache: %s", dir, kiln_strerror(rc));
        return cli_exit_for(rc);
    }
    bool whole_now = rc == KILN_OK;
    if (json) {
        char stamp[20];
        snprintf(stamp, sizeof(stamp), "%016" PRIx64, rep.stamp);
        struct cli_json j;
        cli_json_begin(&j);
        cli_json_str(&j, "cache_dir", dir);
        cli_json_str(&j, "stamp", stamp);
        cli_json_u64(&j, "file_bytes", rep.file_bytes);
        cli_json_u64(&j, "records", rep.records);
        cli_json_u64(&j, "damaged", rep.bad_records);
        cli_json_u64(&j, "bad_records", rep.bad_records); /* kiln/1's name */
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
        cli_json_seconds(&j, "check", secs);
        cli_json_end(&j);
    } else {
        char b[32];
        printf("cache       %s (%s)\n", dir, cli_format_bytes(b, sizeof(b), rep.file_bytes));
        printf("records     %" PRIu64 " whole, %" PRIu64 " with a wrong checksum\n", rep.records,
               rep.bad_records);
        printf("damage      %" PRIu64 " bytes between records, torn tail of %" PRIu64 " bytes\n",
               rep.damaged_bytes, rep.torn_tail_bytes);
        printf("index       %s, %" PRIu64 " entries (%s)\n", index_state_name(rep.index_state),
               rep.index_entries, rep.index_text);
        printf("dictionary  %s\n", rep.dict_text);
        printf("result      %s%s (%.2f s)\n", rep.whole ? "whole" : "not whole",
               rep.repaired
                   ? (whole_now ? ", repaired" : ", repaired what could be, damage remains")
                   : "",
               secs);
    }
    if (!whole_now)
        cli_note_error(rc, "%s: the cache is not whole%s", dir,
                       rep.repaired ? " (repaired what could be, damage remains)" : "");
    return whole_now ? KILN_EXIT_OK : KILN_EXIT_FAILED;
}
