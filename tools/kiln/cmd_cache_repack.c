/*
 * cmd_cache_repack.c - `kiln cache repack`: rewriting a cache's programs
 * with another codec (and its dictionary), for users with an existing
 * cache.
 *
 * A thin layer over kiln_cache_repack: every stage is unpacked and packed
 * again, the new records file is switched in crash-safely (the old cache
 * stays whole until the rename), and the sizes before and after are
 * reported.
 */
#include "cli.h"
#include "commands.h"

#include <getopt.h>
#include <inttypes.h>
#include <string.h>

static const char help[] =
    "usage: %s [DIR | --cache DIR] --codec raw|zstd|kiln [--dict|--no-dict]\n"
    "       [--level default|max|N] [--json]\n"
    "\n"
    "Rewrites every program of the cache in DIR with another codec: each stage\n"
    "is unpacked and packed again. With the kiln codec, --dict trains a\n"
    "dictionary from the cache's own programs (stored as programs.kpd, its id\n"
    "in the cache's header), --no-dict packs without one; the default keeps\n"
    "the cache's dictionary (if any) for the kiln codec. Records that are not\n"
    "programs are copied as they are. The new cache is written beside the old\n"
    "one and renamed into place: the old one stays whole until then.\n"
    "\n"
    "  --codec NAME  raw, zstd (level 1) or kiln\n"
    "  --dict        train a dictionary (kiln codec only)\n"
    "  --no-dict     no dictionary\n"
    "  --level L     default, max (the shipping level: the smallest blobs that\n"
    "                still unpack at zstd -1's speed, for a layer packed once and\n"
    "                read by every user; about 100x slower to pack), or a zstd\n"
    "                level 1..22\n"
    "  --cache DIR   the same as DIR; with neither: $KILN_CACHE_DIR, else\n"
    "                $XDG_CACHE_HOME/kiln, else ~/.cache/kiln\n"
    "  --max-size SIZE|none  give the cache a size cap (K, M, G suffixes), which it\n"
    "                keeps itself and remembers: a store past it evicts the least\n"
    "                recently used records (never this run's); none clears it\n"
    "  --json        one JSON object on stdout\n"
    "  --help        this text\n";

static int repack(struct kiln_cache *c, const void *arg, struct kiln_cache_rewrite_report *r)
{
    return kiln_cache_repack_with(c, arg, r);
}

int cmd_cache_repack(int argc, char **argv)
{
    static const struct option opts[] = {{"codec", required_argument, NULL, 'c'},
                                         {"dict", no_argument, NULL, 'd'},
                                         {"no-dict", no_argument, NULL, 'n'},
                                         {"level", required_argument, NULL, 'l'},
                                         CLI_CACHE_OPTION,
                                         CLI_MAX_SIZE_OPTION,
                                         {"json", no_argument, NULL, 'j'},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    bool json = false, have_codec = false, dict = false, no_dict = false;
    enum kiln_codec codec = KILN_CODEC_KILN;
    enum kiln_cache_dict_mode mode = KILN_CACHE_DICT_KEEP;
    int32_t level = KILN_PACK_LEVEL_DEFAULT;
    int ch, ex;
    opterr = 0;
    optind = 1;
    while ((ch = cli_getopt(argc, argv, "", opts)) != -1) {
        if (ch == 'c') {
            if (kiln_codec_parse(optarg, &codec) < 0)
                return cli_usage_error(argv[0], "--codec: expected raw, zstd or kiln, got '%s'",
                                       optarg);
            have_codec = true;
        } else if (ch == 'd') {
            mode = KILN_CACHE_DICT_TRAIN;
            dict = true;
        } else if (ch == 'n') {
            mode = KILN_CACHE_DICT_NONE;
            no_dict = true;
        } else if (ch == 'l') {
            if (cli_parse_pack_level(argv[0], optarg, &level))
                return KILN_EXIT_USAGE;
        } else {
            ex = cli_report_option(ch, argv, &json, help, argv[0]);
            if (ex != CLI_NEXT_OPTION)
                return ex;
        }
    }
    const char *dir;
    ex = cli_one_cache_dir(argc, argv, &dir);
    if (ex != KILN_EXIT_OK)
        return ex;
    if (!have_codec)
        return cli_usage_error(argv[0], "--codec is required");
    if (dict && no_dict)
        return cli_usage_error(argv[0], "--dict and --no-dict exclude each other");
    if (mode == KILN_CACHE_DICT_TRAIN && codec != KILN_CODEC_KILN)
        return cli_usage_error(argv[0], "--dict goes only with --codec kiln");
    struct kiln_cache_repack_options arg = KILN_CACHE_REPACK_OPTIONS_INIT;
    arg.codec = (uint32_t)codec;
    arg.dict = (uint32_t)mode;
    arg.level = level;
    char lv[16];
    cli_pack_level_name(lv, sizeof(lv), level);
    struct kiln_cache_rewrite_report r = KILN_CACHE_REWRITE_REPORT_INIT;
    double secs;
    CLI_TRY(cli_cache_rewrite(argv[0], dir, "repack", repack, &arg, &r, &secs));
    double ratio_before =
        r.payload_bytes_before ? (double)r.spirv_bytes / (double)r.payload_bytes_before : 0.0;
    double ratio_after =
        r.payload_bytes_after ? (double)r.spirv_bytes / (double)r.payload_bytes_after : 0.0;
    char d0[20], d1[20];
    cli_format_dict(d0, sizeof(d0), r.dict_id_before);
    cli_format_dict(d1, sizeof(d1), r.dict_id_after);
    if (json) {
        struct cli_json j;
        cli_json_begin(&j);
        cli_json_str(&j, "cache_dir", dir);
        cli_json_str(&j, "codec", kiln_codec_name(codec));
        cli_json_str(&j, "level", lv);
        cli_json_u64(&j, "records", r.records_after);
        cli_json_u64(&j, "repacked", r.repacked);
        cli_json_u64(&j, "kept_as_is", r.kept_as_is);
        cli_json_u64(&j, "superseded", r.superseded);
        cli_json_u64(&j, "damaged", r.damaged);
        cli_json_u64(&j, "spirv_bytes", r.spirv_bytes);
        cli_json_u64(&j, "bytes_before", r.payload_bytes_before);
        cli_json_u64(&j, "bytes_after", r.payload_bytes_after);
        cli_json_u64(&j, "file_bytes_before", r.file_bytes_before);
        cli_json_u64(&j, "file_bytes_after", r.file_bytes_after);
        cli_json_double(&j, "ratio_before", ratio_before);
        cli_json_double(&j, "ratio_after", ratio_after);
        cli_json_hex_or_null(&j, "dict_id_before", r.dict_id_before);
        cli_json_hex_or_null(&j, "dict_id_after", r.dict_id_after);
        cli_json_seconds(&j, "repack", secs);
        cli_json_end(&j);
        return KILN_EXIT_OK;
    }
    char b1[32], b2[32], b3[32];
    printf("cache       %s\n", dir);
    printf("records     %" PRIu64 " (%" PRIu64 " repacked with %s at level %s, %" PRIu64
           " copied as they were; %" PRIu64 " superseded and %" PRIu64 " damaged left out)\n",
           r.records_after, r.repacked, kiln_codec_name(codec), lv, r.kept_as_is, r.superseded,
           r.damaged);
    printf("payloads    %s -> %s for %s of SPIR-V (ratio %.2fx -> %.2fx)\n",
           cli_format_bytes(b1, sizeof(b1), r.payload_bytes_before),
           cli_format_bytes(b2, sizeof(b2), r.payload_bytes_after),
           cli_format_bytes(b3, sizeof(b3), r.spirv_bytes), ratio_before, ratio_after);
    printf("dictionary  %s -> %s\n", d0, d1);
    printf("file        %s -> %s (%.2f s)\n", cli_format_bytes(b1, sizeof(b1), r.file_bytes_before),
           cli_format_bytes(b2, sizeof(b2), r.file_bytes_after), secs);
    return KILN_EXIT_OK;
}
