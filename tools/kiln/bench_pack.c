/*
 * bench_pack.c - `kiln bench pack`: SPIR-V packing side by side in one run.
 *
 * Per module: raw, plain zstd level 1 (the baseline: a bare zstd frame per
 * module, no kiln header), kiln's codec without and with a dictionary. Sizes
 * count everything a blob holds (kiln's header included). Speeds are single
 * thread, SPIR-V bytes per second: per chunk of modules the best of
 * --rounds timed passes, summed over the chunks (the best, because other
 * processes share the CPU; see run_bench).
 *
 * The dictionary figures are honest by construction: two-fold cross
 * validation over the modules in path order. A dictionary trained on the
 * even-indexed modules packs the odd-indexed ones and one trained on the
 * odd-indexed modules packs the even ones, so no module is packed with a
 * dictionary that saw it.
 *
 * Where the bytes go: per opcode class (kiln_pack_class_stats_add), the
 * words and the bytes of each class's values after zstd, with the
 * transform of blob format 1 and with format 2's, so the next gain shows.
 *
 * Memory: N programs kept as raw SPIR-V against kept packed (kiln with the
 * dictionary), each as one heap block per module; reported both as the
 * bytes allocated and as the growth of the resident set (kiln_rss_bytes)
 * while the copies are made, with nothing freed in between.
 */
#include "cli.h"
#include "commands.h"

#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdlib.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif
#include <string.h>
#include <sys/stat.h>
#include <zstd.h>

#define DEFAULT_CORPUS   "../shared/corpus/spirv"
#define MAX_CORPORA      16
#define MAX_MODULE_BYTES (64u << 20)
/* The unit of timing: see run_bench. */
#define CHUNK_BYTES (64u << 10)
#define MIN(a, b)   ((a) < (b) ? (a) : (b))
#define MAX(a, b)   ((a) > (b) ? (a) : (b))

struct module {
    char *path;
    uint32_t *words;
    size_t nwords;
};

struct set {
    struct module *m;
    size_t n, cap;
    size_t programs; /* a corpus module is a program; a generated program has 1-2 modules */
    size_t skipped;  /* files that are not whole words */
};

/* ---- loading ------------------------------------------------------------ */

static int add_module(struct set *s, const char *path, uint32_t *words, size_t nwords)
{
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 256;
        struct module *m = realloc(s->m, cap * sizeof(*m));
        if (!m)
            return KILN_ENOMEM;
        s->m = m;
        s->cap = cap;
    }
    s->m[s->n].path = path ? strdup(path) : NULL;
    s->m[s->n].words = words;
    s->m[s->n].nwords = nwords;
    s->n++;
    return 0;
}

static bool has_spv_suffix(const char *name)
{
    size_t n = strlen(name);
    return n > 4 && strcmp(name + n - 4, ".spv") == 0;
}

static int walk(struct set *s, const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return kiln_error_from_errno(errno, KILN_EIO_OPEN);
    struct dirent *e;
    int rc = 0;
    while (rc == 0 && (e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        char path[4096];
        if (snprintf(path, sizeof(path), "%s/%s", dir, e->d_name) >= (int)sizeof(path))
            continue;
        struct stat st;
        if (stat(path, &st) != 0)
            continue;
        if (S_ISDIR(st.st_mode)) {
            rc = walk(s, path);
        } else if (S_ISREG(st.st_mode) && has_spv_suffix(e->d_name)) {
            void *data;
            size_t n;
            rc = kiln_io_read_file(kiln_io_default(), path, MAX_MODULE_BYTES, &data, &n);
            if (rc < 0)
                break;
            if (n % 4 != 0 || n == 0) {
                s->skipped++;
                free(data);
                continue;
            }
            rc = add_module(s, path, data, n / 4);
            if (rc < 0)
                free(data);
        }
    }
    closedir(d);
    return rc;
}

static int cmp_path(const void *a, const void *b)
{
    const struct module *x = a, *y = b;
    return strcmp(x->path, y->path);
}

static void set_free(struct set *s)
{
    for (size_t i = 0; i < s->n; i++) {
        free(s->m[i].path);
        free(s->m[i].words);
    }
    free(s->m);
    memset(s, 0, sizeof(*s));
}

/* ---- measuring ---------------------------------------------------------- */

enum { C_RAW, C_ZSTD1, C_KILN_NODICT, C_KILN, C_COUNT };
static const char *const codec_keys[C_COUNT] = {"raw", "zstd1", "kiln_nodict", "kiln"};

struct blob {
    void *data;
    size_t size;
};

struct result {
    size_t modules, programs, spirv_bytes;
    size_t bytes[C_COUNT];
    double pack_s[C_COUNT], unpack_s[C_COUNT]; /* best pass */
    bool roundtrip_ok;
    size_t dict_bytes[2];
    uint64_t mem_raw_alloc, mem_packed_alloc, rss_raw, rss_packed;
    struct kiln_pack_class_stats classes; /* where the bytes go, per opcode class */
};

struct bench {
    const struct set *s;
    int32_t level;                  /* kiln's codec's packing level (kiln_pack_options.level) */
    struct kiln_pack_dict *dict[2]; /* [k]: trained on modules with index % 2 == k */
    struct blob *blobs[C_COUNT];
    ZSTD_CCtx *zc;
    ZSTD_DCtx *zd;
    uint32_t *out;
    size_t out_words;
};

/* The dictionary that packs module i: the one trained on the other half. */
static const struct kiln_pack_dict *dict_for(const struct bench *b, size_t i)
{
    return b->dict[(i + 1) % 2];
}

static int train(struct bench *b)
{
    const struct set *s = b->s;
    const uint32_t **mods = malloc(s->n * sizeof(*mods));
    size_t *words = malloc(s->n * sizeof(*words));
    int rc = mods && words ? 0 : KILN_ENOMEM;
    for (int k = 0; rc == 0 && k < 2; k++) {
        size_t n = 0;
        for (size_t i = (size_t)k; i < s->n; i += 2) {
            mods[n] = s->m[i].words;
            words[n++] = s->m[i].nwords;
        }
        rc = kiln_pack_dict_train(mods, words, n, 0, &b->dict[k]);
    }
    free(mods);
    free(words);
    return rc;
}

/* Packs modules [lo, hi) with codec c once. @return 0 or an error. */
static int pack_range(struct bench *b, int c, size_t lo, size_t hi, bool keep)
{
    const struct set *s = b->s;
    for (size_t i = lo; i < hi; i++) {
        const struct module *m = &s->m[i];
        void *data;
        size_t size;
        if (c == C_ZSTD1) {
            size_t cap = ZSTD_compressBound(m->nwords * 4);
            data = malloc(cap);
            if (!data)
                return KILN_ENOMEM;
            size = ZSTD_compressCCtx(b->zc, data, cap, m->words, m->nwords * 4, 1);
            if (ZSTD_isError(size)) {
                free(data);
                return KILN_EINVAL;
            }
        } else {
            struct kiln_pack_options o = KILN_PACK_OPTIONS_INIT;
            o.codec = c == C_RAW ? KILN_CODEC_RAW : KILN_CODEC_KILN;
            o.dict = c == C_KILN ? dict_for(b, i) : NULL;
            o.level = c == C_RAW ? KILN_PACK_LEVEL_DEFAULT : b->level;
            int rc = kiln_pack_with(m->words, m->nwords, &o, &data, &size);
            if (rc < 0)
                return rc;
        }
        if (keep) {
            b->blobs[c][i].data = data;
            b->blobs[c][i].size = size;
        } else {
            free(data);
        }
    }
    return 0;
}

/* Unpacks modules [lo, hi) of codec c once; checks the bytes when `check`. */
static bool unpack_range(struct bench *b, int c, size_t lo, size_t hi, bool check)
{
    const struct set *s = b->s;
    bool ok = true;
    for (size_t i = lo; i < hi; i++) {
        const struct module *m = &s->m[i];
        const struct blob *bl = &b->blobs[c][i];
        size_t got;
        if (c == C_ZSTD1) {
            size_t n = ZSTD_decompressDCtx(b->zd, b->out, b->out_words * 4, bl->data, bl->size);
            got = ZSTD_isError(n) ? (size_t)-1 : n / 4;
        } else {
            const struct kiln_pack_dict *d = c == C_KILN ? dict_for(b, i) : NULL;
            int64_t n = kiln_unpack(bl->data, bl->size, d, b->out, b->out_words);
            got = n < 0 ? (size_t)-1 : (size_t)n;
        }
        if (check && (got != m->nwords || memcmp(b->out, m->words, m->nwords * 4) != 0)) {
            if (ok)
                (void)fprintf(stderr, "kiln bench pack: %s: %s round trip differs\n",
                              m->path ? m->path : "(generated)", codec_keys[c]);
            ok = false;
        }
    }
    return ok;
}

static void measure_memory(struct bench *b, struct result *r)
{
    const struct set *s = b->s;
    void **raw = calloc(s->n, sizeof(*raw));
    void **packed = calloc(s->n, sizeof(*packed));
    if (!raw || !packed) {
        free(raw);
        free(packed);
        return;
    }
    /* Free heap pages go back to the system first, so that the copies
     * below fault in fresh pages instead of reusing resident ones. */
#if defined(__GLIBC__)
    malloc_trim(0);
#endif
    uint64_t r0 = kiln_rss_bytes();
    for (size_t i = 0; i < s->n; i++) {
        size_t n = s->m[i].nwords * 4;
        if ((raw[i] = malloc(n)) != NULL)
            memcpy(raw[i], s->m[i].words, n);
        r->mem_raw_alloc += n;
    }
    uint64_t r1 = kiln_rss_bytes();
    for (size_t i = 0; i < s->n; i++) {
        const struct blob *bl = &b->blobs[C_KILN][i];
        if ((packed[i] = malloc(bl->size)) != NULL)
            memcpy(packed[i], bl->data, bl->size);
        r->mem_packed_alloc += bl->size;
    }
    uint64_t r2 = kiln_rss_bytes();
    r->rss_raw = r1 > r0 ? r1 - r0 : 0;
    r->rss_packed = r2 > r1 ? r2 - r1 : 0;
    for (size_t i = 0; i < s->n; i++) {
        free(raw[i]);
        free(packed[i]);
    }
    free(raw);
    free(packed);
}

static int run_bench(const struct set *s, unsigned rounds, int32_t level, bool quiet,
                     struct result *r)
{
    struct bench b = {.s = s, .level = level};
    memset(r, 0, sizeof(*r));
    r->modules = s->n;
    r->programs = s->programs ? s->programs : s->n;
    for (size_t i = 0; i < s->n; i++) {
        r->spirv_bytes += s->m[i].nwords * 4;
        b.out_words = MAX(b.out_words, s->m[i].nwords);
    }
    int rc = 0;
    b.zc = ZSTD_createCCtx();
    b.zd = ZSTD_createDCtx();
    b.out = malloc(MAX(b.out_words, (size_t)1) * 4);
    for (int c = 0; c < C_COUNT; c++)
        b.blobs[c] = calloc(s->n ? s->n : 1, sizeof(struct blob));
    if (!b.zc || !b.zd || !b.out || !b.blobs[C_COUNT - 1])
        rc = KILN_ENOMEM;
    if (rc == 0) {
        rc = train(&b);
        if (rc < 0)
            cli_error("kiln bench pack", "dictionary training failed: %s", kiln_strerror(rc));
    }
    if (rc == 0) {
        for (int k = 0; k < 2; k++)
            kiln_pack_dict_bytes(b.dict[k], &r->dict_bytes[k]);
        for (int c = 0; rc == 0 && c < C_COUNT; c++)
            rc = pack_range(&b, c, 0, s->n, true);
    }
    if (rc == 0) {
        r->roundtrip_ok = true;
        for (int c = 0; c < C_COUNT; c++) {
            for (size_t i = 0; i < s->n; i++)
                r->bytes[c] += b.blobs[c][i].size;
            r->roundtrip_ok &= unpack_range(&b, c, 0, s->n, true);
        }
        measure_memory(&b, r);
        r->classes.size = sizeof(r->classes); /* a growable struct (docs/abi.md) */
        for (size_t i = 0; rc == 0 && i < s->n; i++)
            rc = kiln_pack_class_stats_add(s->m[i].words, s->m[i].nwords, &r->classes);
        /*
         * Timing: the modules in chunks of about CHUNK_BYTES; per chunk, each
         * codec packs and unpacks it `rounds` times and the best time counts.
         * A chunk takes well under a scheduler slice, so a pass that another
         * process interrupted is thrown away rather than averaged in, and the
         * codecs take turns chunk by chunk under the same conditions.
         */
        struct cli_progress prog;
        cli_progress_start(&prog, "timing", s->n, quiet);
        for (size_t lo = 0; rc == 0 && lo < s->n;) {
            size_t hi = lo, bytes = 0;
            while (hi < s->n && (hi == lo || bytes < CHUNK_BYTES))
                bytes += s->m[hi++].nwords * 4;
            for (int c = 0; rc == 0 && c < C_COUNT; c++) {
                double best_pack = 1e30, best_unpack = 1e30;
                for (unsigned round = 0; rc == 0 && round < rounds; round++) {
                    uint64_t t0 = kiln_now_ns();
                    rc = pack_range(&b, c, lo, hi, false);
                    uint64_t t1 = kiln_now_ns();
                    unpack_range(&b, c, lo, hi, false);
                    uint64_t t2 = kiln_now_ns();
                    best_pack = MIN(best_pack, cli_seconds(t0, t1));
                    best_unpack = MIN(best_unpack, cli_seconds(t1, t2));
                }
                r->pack_s[c] += best_pack;
                r->unpack_s[c] += best_unpack;
            }
            lo = hi;
            cli_progress_update(&prog, lo);
        }
        cli_progress_finish(&prog, s->n);
    }
    for (int c = 0; c < C_COUNT; c++) {
        for (size_t i = 0; b.blobs[c] && i < s->n; i++) {
            if (c == C_ZSTD1)
                free(b.blobs[c][i].data);
            else
                kiln_pack_free(b.blobs[c][i].data);
        }
        free(b.blobs[c]);
    }
    kiln_pack_dict_destroy(b.dict[0]);
    kiln_pack_dict_destroy(b.dict[1]);
    ZSTD_freeCCtx(b.zc);
    ZSTD_freeDCtx(b.zd);
    free(b.out);
    return rc;
}

/* ---- output ------------------------------------------------------------- */

static double mbps(size_t bytes, double s)
{
    return s > 0 ? (double)bytes / s / 1e6 : 0;
}

static double ratio(size_t a, size_t b)
{
    return b ? (double)a / (double)b : 0;
}

/* How many times zstd -1's speed codec `c` ran at, from the seconds each took. */
static double speed_vs_zstd1(const double *seconds, int c)
{
    return seconds[c] > 0 ? seconds[C_ZSTD1] / seconds[c] : 0;
}

/*
 * The SMOL-V figures for the shared corpus (1,585 modules, 4,317,048
 * B of SPIR-V), measured outside kiln (SMOL-V is C++ and not a dependency):
 * cited, not measured by this bench, and printed only beside that corpus.
 */
#define CITED_SMOLV_ZSTD20      1007119u /* SMOL-V + zstd -20, no dictionary */
#define CITED_SMOLV_ZSTD19_DICT 573404u  /* SMOL-V + zstd -19, 2-fold dictionary */
#define CITED_MODULES           1585u
#define CITED_SPIRV_BYTES       4317048u
static const char *const cited_text =
    "cited from issue 27 (SMOL-V built outside kiln), not measured by this run; they apply to "
    "../shared/corpus/spirv (1,585 modules, 4,317,048 B)";

static bool cited_applies(const struct result *r)
{
    return r->modules == CITED_MODULES && r->spirv_bytes == CITED_SPIRV_BYTES;
}

static const char *const split_text =
    "2-fold by path order: the dictionary trained on even-indexed modules packs the "
    "odd-indexed ones, the one trained on odd-indexed modules packs the even ones";

static void json_cited(struct cli_json *j, const struct result *r)
{
    if (!cited_applies(r))
        return;
    cli_json_object_begin(j, "cited");
    cli_json_str(j, "source", cited_text);
    cli_json_u64(j, "smolv_zstd20_bytes", CITED_SMOLV_ZSTD20);
    cli_json_u64(j, "smolv_zstd19_dict_bytes", CITED_SMOLV_ZSTD19_DICT);
    cli_json_bool(j, "kiln_nodict_smaller", r->bytes[C_KILN_NODICT] < CITED_SMOLV_ZSTD20);
    cli_json_bool(j, "kiln_smaller", r->bytes[C_KILN] < CITED_SMOLV_ZSTD19_DICT);
    cli_json_object_end(j);
}

static void json_result(struct cli_json *j, const struct result *r)
{
    cli_json_u64(j, "modules", r->modules);
    cli_json_u64(j, "raw_bytes", r->spirv_bytes);
    cli_json_u64(j, "zstd1_bytes", r->bytes[C_ZSTD1]);
    cli_json_u64(j, "kiln_bytes", r->bytes[C_KILN]);
    cli_json_u64(j, "kiln_nodict_bytes", r->bytes[C_KILN_NODICT]);
    cli_json_u64(j, "raw_blob_bytes", r->bytes[C_RAW]);
    cli_json_double(j, "ratio_zstd1", ratio(r->spirv_bytes, r->bytes[C_ZSTD1]));
    cli_json_double(j, "ratio_kiln", ratio(r->spirv_bytes, r->bytes[C_KILN]));
    cli_json_double(j, "ratio_kiln_nodict", ratio(r->spirv_bytes, r->bytes[C_KILN_NODICT]));
    cli_json_double(j, "gain_vs_zstd1", ratio(r->bytes[C_ZSTD1], r->bytes[C_KILN]));
    cli_json_double(j, "gain_nodict_vs_zstd1", ratio(r->bytes[C_ZSTD1], r->bytes[C_KILN_NODICT]));
    for (int c = 0; c < C_COUNT; c++) {
        char key[64];
        (void)snprintf(key, sizeof(key), "%s_pack_mbps", codec_keys[c]);
        cli_json_double(j, key, mbps(r->spirv_bytes, r->pack_s[c]));
        (void)snprintf(key, sizeof(key), "%s_unpack_mbps", codec_keys[c]);
        cli_json_double(j, key, mbps(r->spirv_bytes, r->unpack_s[c]));
    }
    /* kiln with the dictionary, and without the caller's. */
    cli_json_double(j, "unpack_speed_vs_zstd1", speed_vs_zstd1(r->unpack_s, C_KILN));
    cli_json_double(j, "pack_speed_vs_zstd1", speed_vs_zstd1(r->pack_s, C_KILN));
    cli_json_double(j, "nodict_unpack_speed_vs_zstd1", speed_vs_zstd1(r->unpack_s, C_KILN_NODICT));
    cli_json_double(j, "nodict_pack_speed_vs_zstd1", speed_vs_zstd1(r->pack_s, C_KILN_NODICT));
    cli_json_bool(j, "roundtrip_ok", r->roundtrip_ok);
    json_cited(j, r);
    cli_json_str(j, "dict_split", split_text);
    cli_json_u64(j, "dict_bytes_even", r->dict_bytes[0]);
    cli_json_u64(j, "dict_bytes_odd", r->dict_bytes[1]);
    cli_json_u64(j, "mem_programs", r->programs);
    cli_json_str(j, "mem_method",
                 "one heap block per module; alloc = bytes allocated, rss = growth of the "
                 "resident set (kiln_rss_bytes) while the copies were made, after "
                 "malloc_trim");
    cli_json_u64(j, "mem_raw_alloc_bytes", r->mem_raw_alloc);
    cli_json_u64(j, "mem_packed_alloc_bytes", r->mem_packed_alloc);
    cli_json_u64(j, "mem_raw_rss_bytes", r->rss_raw);
    cli_json_u64(j, "mem_packed_rss_bytes", r->rss_packed);
    /* Where the bytes go: per opcode class, before (format 1's transform)
     * and after (format 2's). */
    cli_json_str(j, "classes_method",
                 "per opcode class: the SPIR-V words of its instructions, and the bytes of "
                 "its values in the transformed streams and after zstd (each class's streams "
                 "compressed alone, no dictionary, less what an empty module costs); before = "
                 "blob format 1's transform, after = format 2's");
    cli_json_object_begin(j, "classes");
    for (int c = 0; c < KILN_PACK_CLASS_COUNT; c++) {
        const struct kiln_pack_class_stats *st = &r->classes;
        cli_json_object_begin(j, kiln_pack_class_name((enum kiln_pack_class)c));
        cli_json_u64(j, "words", st->words[c]);
        cli_json_u64(j, "before_stream_bytes", st->xform_bytes[0][c]);
        cli_json_u64(j, "before_zstd_bytes", st->zstd_bytes[0][c]);
        cli_json_u64(j, "after_stream_bytes", st->xform_bytes[1][c]);
        cli_json_u64(j, "after_zstd_bytes", st->zstd_bytes[1][c]);
        cli_json_object_end(j);
    }
    cli_json_object_end(j);
}

static void text_result(const char *title, const struct result *r, int32_t level)
{
    char a[32], b[32];
    printf("%s: %zu module%s, %s of SPIR-V, kiln at level %s\n", title, r->modules,
           CLI_S(r->modules), cli_format_bytes(a, sizeof(a), r->spirv_bytes),
           cli_pack_level_name(b, sizeof(b), level));
    /* Text in IEC units (JSON keeps its documented MB/s). */
    printf("  %-12s %12s %7s %12s %12s\n", "codec", "size", "ratio", "pack MiB/s", "unpack MiB/s");
    for (int c = 0; c < C_COUNT; c++)
        printf("  %-12s %12s %6.2fx %12.1f %12.1f\n", codec_keys[c],
               cli_format_bytes(a, sizeof(a), r->bytes[c]), ratio(r->spirv_bytes, r->bytes[c]),
               mbps(r->spirv_bytes, r->pack_s[c]) / 1.048576,
               mbps(r->spirv_bytes, r->unpack_s[c]) / 1.048576);
    printf("  kiln vs zstd -1: %.2fx smaller; unpack %.2fx, pack %.2fx its speed\n",
           ratio(r->bytes[C_ZSTD1], r->bytes[C_KILN]), speed_vs_zstd1(r->unpack_s, C_KILN),
           speed_vs_zstd1(r->pack_s, C_KILN));
    printf("  without the dictionary: %.2fx smaller; unpack %.2fx, pack %.2fx its speed\n",
           ratio(r->bytes[C_ZSTD1], r->bytes[C_KILN_NODICT]),
           speed_vs_zstd1(r->unpack_s, C_KILN_NODICT), speed_vs_zstd1(r->pack_s, C_KILN_NODICT));
    if (cited_applies(r)) {
        printf("  SMOL-V + zstd -20, no dictionary: %u B (cited); kiln without the caller's "
               "dictionary %.3fx its size\n",
               CITED_SMOLV_ZSTD20, ratio(r->bytes[C_KILN_NODICT], CITED_SMOLV_ZSTD20));
        printf("  SMOL-V + zstd -19, 2-fold dictionary: %u B (cited); kiln with the dictionary "
               "%.3fx its size\n",
               CITED_SMOLV_ZSTD19_DICT, ratio(r->bytes[C_KILN], CITED_SMOLV_ZSTD19_DICT));
        printf("  (%s)\n", cited_text);
    }
    printf("  round trip: %s\n", r->roundtrip_ok ? "every module byte-exact" : "FAILED");
    printf("  dictionary: %s\n", split_text);
    printf("  memory, %zu program%s: raw %s allocated (resident +%s), ", r->programs,
           CLI_S(r->programs), cli_format_bytes(a, sizeof(a), r->mem_raw_alloc),
           cli_format_bytes(b, sizeof(b), r->rss_raw));
    printf("packed %s allocated (resident +%s)\n",
           cli_format_bytes(a, sizeof(a), r->mem_packed_alloc),
           cli_format_bytes(b, sizeof(b), r->rss_packed));
    const struct kiln_pack_class_stats *st = &r->classes;
    printf("  where the bytes go, per opcode class (each class's values compressed alone, no\n"
           "  dictionary; before = blob format 1's transform, after = format 2's):\n");
    printf("  %-18s %10s %13s %13s %13s %13s\n", "class", "words", "streams before", "zstd before",
           "streams after", "zstd after");
    for (int c = 0; c < KILN_PACK_CLASS_COUNT; c++)
        printf("  %-18s %10" PRIu64 " %13" PRIu64 " %13" PRIu64 " %13" PRIu64 " %13" PRIu64 "\n",
               kiln_pack_class_name((enum kiln_pack_class)c), st->words[c], st->xform_bytes[0][c],
               st->zstd_bytes[0][c], st->xform_bytes[1][c], st->zstd_bytes[1][c]);
}

/* ---- generated programs ------------------------------------------------- */

/*
 * Generates and translates programs 0..n-1 of the default generator corpus
 * (kiln_generate_spirv, GLSL through shaderc without optimization); each
 * stage is one module of the set.
 */
static int load_generated(struct set *s, unsigned n, bool quiet)
{
    struct kiln_glsl *glsl;
    int rc = kiln_glsl_create(KILN_GLSL_OPT_NONE, &glsl);
    if (rc < 0)
        return rc;
    const struct kiln_translator *t = kiln_glsl_translator(glsl);
    struct cli_progress prog;
    cli_progress_start(&prog, "generating", n, quiet);
    for (unsigned i = 0; rc == 0 && i < n; i++) {
        struct kiln_program *p;
        rc = kiln_generate_spirv(t, KILN_GENERATOR_DEFAULT_SEED, i, &p);
        if (rc < 0)
            break;
        for (unsigned k = 0; rc == 0 && k < p->nstages; k++) {
            char name[256];
            (void)snprintf(name, sizeof(name), "%s/%s", p->name,
                           kiln_vk_stage_name(p->stages[k].src.stage));
            rc = add_module(s, name, p->stages[k].words, p->stages[k].nwords);
            if (rc == 0)
                p->stages[k].words = NULL; /* taken over */
        }
        kiln_program_destroy(p);
        s->programs++;
        cli_progress_update(&prog, i + 1);
    }
    cli_progress_finish(&prog, n);
    kiln_glsl_destroy(glsl);
    return rc;
}

/* ---- the command -------------------------------------------------------- */

static void help(void)
{
    printf(
        "usage: kiln bench pack [--corpus DIR ...] [--generate N] [--level L] [--rounds R]\n"
        "                       [--json]\n\n"
        "Packs every module side by side with raw, zstd level 1 (the baseline), and\n"
        "kiln's codec without and with a dictionary; reports sizes, single-thread pack\n"
        "and unpack speed (SPIR-V MiB/s, MB/s in --json; per 64 KiB chunk of modules\n"
        "the best of R passes, summed), the memory of the programs kept raw against kept packed,\n"
        "and whether every module came back byte-exact, and, per opcode class, the\n"
        "words and the bytes after zstd of blob format 1's transform and format 2's.\n"
        "The dictionary is cross-validated: trained on the even-indexed modules (path\n"
        "order) to pack the odd ones, and the other way round.\n\n"
        "  --corpus DIR     a folder of .spv files, searched recursively (repeatable);\n"
        "                   default: $KILN_CORPUS/spirv (KILN_CORPUS names the shared\n"
        "                   corpus folder, as for the tests), else " DEFAULT_CORPUS "\n"
        "                   relative to the current folder\n"
        "  --generate N     measure N (>= 10) generated emulator-like programs\n"
        "                   (kiln_generate_spirv, default seed, GLSL through shaderc\n"
        "                   without optimization); with --corpus, both are measured\n"
        "  --level L        kiln's packing level: default, max (the shipping level, for\n"
        "                   layers) or a zstd level 1..22; beside the shared corpus,\n"
        "                   the issue's SMOL-V sizes are printed as cited references\n"
        "  --rounds R       timed passes per chunk and codec (default 5)\n"
        "  --json           one JSON object on stdout\n");
}

int cmd_bench_pack(int argc, char **argv)
{
    const char *name = argv[0];
    static const struct option opts[] = {
        {"corpus", required_argument, NULL, 'c'},
        {"generate", required_argument, NULL, 'g'},
        {"generated", required_argument, NULL, 'G'}, /* the old spelling */
        {"rounds", required_argument, NULL, 'r'},
        {"level", required_argument, NULL, 'l'},
        {"json", no_argument, NULL, 'j'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *corpora[MAX_CORPORA];
    size_t ncorpora = 0;
    uint64_t generated = 0, rounds = 5;
    int32_t level = KILN_PACK_LEVEL_DEFAULT;
    bool json = false;
    int c;
    optind = 1;
    opterr = 0; /* one line per error: ours, naming the option */
    while ((c = cli_getopt(argc, argv, ":h", opts)) != -1) {
        switch (c) {
        case 'c':
            if (ncorpora == MAX_CORPORA)
                return cli_usage_error(name, "at most %d --corpus folders", MAX_CORPORA);
            corpora[ncorpora++] = optarg;
            break;
        case 'G':
            cli_deprecated(name, "--generated", "--generate");
            /* fall through */
        case 'g':
            if (cli_parse_u64(name, "--generate", optarg, 10, 1000000, false, &generated))
                return KILN_EXIT_USAGE;
            break;
        case 'r':
            if (cli_parse_u64(name, "--rounds", optarg, 1, 1000, false, &rounds))
                return KILN_EXIT_USAGE;
            break;
        case 'l':
            if (cli_parse_pack_level(name, optarg, &level))
                return KILN_EXIT_USAGE;
            break;
        case 'j':
            json = true;
            break;
        case 'h':
            help();
            return KILN_EXIT_OK;
        default:
            return cli_option_error(name, c, argv);
        }
    }
    if (optind < argc)
        return cli_usage_error(name, "unexpected argument '%s'", argv[optind]);
    bool use_corpus = ncorpora > 0 || generated == 0;
    char env_corpus[4096];
    bool implicit_corpus = ncorpora == 0;
    if (ncorpora == 0) {
        const char *env = getenv("KILN_CORPUS");
        if (env && *env) {
            (void)snprintf(env_corpus, sizeof(env_corpus), "%s/spirv", env);
            corpora[ncorpora++] = env_corpus;
        } else {
            corpora[ncorpora++] = DEFAULT_CORPUS;
        }
    }

    struct set corpus = {0}, gen = {0};
    struct result rc_corpus, rc_gen;
    int status = KILN_EXIT_OK;
    if (use_corpus) {
        for (size_t i = 0; i < ncorpora; i++) {
            int rc = walk(&corpus, corpora[i]);
            if (rc < 0) {
                /* The default corpus is beside a checkout, not in it: say
                 * what measures without it. */
                cli_error(name, "%s: %s%s", corpora[i], kiln_strerror(rc),
                          implicit_corpus
                              ? " (no corpus of .spv modules here: give --corpus DIR, or "
                                "--generate N to measure N generated programs)"
                              : "");
                set_free(&corpus);
                return cli_exit_for(rc);
            }
        }
        if (corpus.n < 16) {
            cli_error(name, "%s: %zu .spv modules; at least 16 are needed", corpora[0], corpus.n);
            set_free(&corpus);
            return KILN_EXIT_USAGE;
        }
        qsort(corpus.m, corpus.n, sizeof(*corpus.m), cmp_path);
        int rc = run_bench(&corpus, (unsigned)rounds, level, json, &rc_corpus);
        if (rc < 0) {
            cli_error(name, "corpus: %s", kiln_strerror(rc));
            status = KILN_EXIT_FAILED;
        }
    }
    bool gen_ok = false;
    if (status == KILN_EXIT_OK && generated) {
        int rc = load_generated(&gen, (unsigned)generated, json);
        if (rc == KILN_ENOTSUP) {
            cli_error(name, "--generate: this build has no GLSL translator (shaderc), so "
                            "no generated programs");
            status = KILN_EXIT_FAILED;
        } else if (rc < 0 || (rc = run_bench(&gen, (unsigned)rounds, level, json, &rc_gen)) < 0) {
            cli_error(name, "generated programs: %s", kiln_strerror(rc));
            status = KILN_EXIT_FAILED;
        } else {
            gen_ok = true;
        }
    }
    if (status == KILN_EXIT_OK) {
        if (json) {
            struct cli_json j;
            char lv[16];
            cli_json_begin(&j);
            cli_json_str(&j, "level", cli_pack_level_name(lv, sizeof(lv), level));
            if (use_corpus) {
                json_result(&j, &rc_corpus);
                cli_json_u64(&j, "skipped_files", corpus.skipped);
            }
            if (gen_ok) {
                if (use_corpus)
                    cli_json_object_begin(&j, "generated");
                json_result(&j, &rc_gen);
                if (use_corpus)
                    cli_json_object_end(&j);
            }
            cli_json_end(&j);
        } else {
            if (use_corpus)
                text_result("corpus", &rc_corpus, level);
            if (gen_ok)
                text_result("generated programs", &rc_gen, level);
        }
        if ((use_corpus && !rc_corpus.roundtrip_ok) || (gen_ok && !rc_gen.roundtrip_ok))
            status = KILN_EXIT_FAILED;
    }
    set_free(&corpus);
    set_free(&gen);
    kiln_pack_thread_cleanup();
    return status;
}
