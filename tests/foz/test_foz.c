/*
 * test_foz.c - the Fossilize archive reader and shader module decoder.
 *
 * The real archives of the shared corpus are read whole and cut; the
 * expected counts come from a separate, deliberately simple walk over the
 * entry heads (walk_heads), not from the reader under test. Damage of every
 * kind the reader claims to catch is made by hand, in archives built here
 * with zlib.
 */
#include "kiln_test.h"
#include "kiln_internal.h"
#include "kiln/foz.h"
#include "foz_writer.h"
#include "foz_corpus.h"

#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>

#ifdef KT_SPIRV_VAL
#include <spawn.h>
#include <sys/wait.h>

extern char **environ;
#endif

/* ---------------------------------------------------------------------------
 * Helpers
 * ------------------------------------------------------------------------ */

/* The corpus's archives for a case that asserts what the corpus holds:
 * without the shared corpus (a bare clone) the case is skipped. */
static void corpus_archives_or_skip(struct archives *out)
{
    corpus_archives(out);
    if (out->n == 0) {
        printf("skipped: no Fossilize archives under %s/foz (the shared corpus)\n",
               kt_corpus_dir());
        exit(77);
    }
}

/* Archives for a case that needs any real archive: the corpus's, else one
 * written here from generated SPIR-V (tests/support/foz_writer.c). */
static void some_archives(struct archives *out)
{
    corpus_archives(out);
    if (out->n == 0) {
        char path[4096];
        FW_NEED(fw_archive("none", path, sizeof(path)));
        out->path[out->n++] = strdup(path);
    }
}

/* The path of the corpus archive whose file name starts with `stem.`. */
static const char *find_named(const struct archives *a, const char *stem)
{
    size_t n = strlen(stem);
    for (size_t i = 0; i < a->n; i++) {
        const char *base = strrchr(a->path[i], '/');
        base = base ? base + 1 : a->path[i];
        if (strncmp(base, stem, n) == 0 && base[n] == '.')
            return a->path[i];
    }
    return NULL;
}

static const char *base_name(const char *path)
{
    const char *b = strrchr(path, '/');
    return b ? b + 1 : path;
}

static int load(const char *path, uint8_t **data, size_t *n)
{
    return kiln_io_read_file(kiln_io_default(), path, (size_t)1 << 30, (void **)data, n);
}

/* What walk_heads finds: the entry count per tag, independently of the
 * reader (no CRC, no inflation, only the heads and sizes). */
struct heads {
    size_t whole;        /* entries that lie wholly inside the file */
    size_t per_tag[16];  /* of those, per tag (tags 0..15) */
    uint64_t last_start; /* where the last whole entry starts */
    uint64_t end;        /* just after the last whole entry */
    bool cut;            /* bytes follow `end` (a cut-off entry) */
};

static void walk_heads(const uint8_t *p, size_t n, struct heads *h)
{
    memset(h, 0, sizeof(*h));
    uint64_t off = 16;
    while (off + 56 <= n) {
        char tag_hex[17];
        memcpy(tag_hex, p + off + 8, 16);
        tag_hex[16] = 0;
        uint32_t stored = (uint32_t)p[off + 40] | (uint32_t)p[off + 41] << 8 |
                          (uint32_t)p[off + 42] << 16 | (uint32_t)p[off + 43] << 24;
        if (off + 56 + stored > n)
            break;
        unsigned long long tag = strtoull(tag_hex, NULL, 16);
        if (tag < 16)
            h->per_tag[tag]++;
        h->whole++;
        h->last_start = off;
        off += 56 + stored;
    }
    h->end = off;
    h->cut = off < n;
}

#ifdef KT_SPIRV_VAL
/* Runs a SPIRV-Tools program on a file, its output to `log_path`.
 * @return its exit status (0: accepted), or -1 when it could not run. */
static int run_tool(const char *tool, const char *spv, const char *log_path)
{
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, log_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    char *argv[] = {(char *)tool, (char *)spv, NULL};
    pid_t pid;
    int rc = posix_spawn(&pid, tool, &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0)
        return -1;
    int status;
    if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
        return -1;
    return WEXITSTATUS(status);
}

static bool file_contains(const char *path, const char *needle)
{
    char buf[8192];
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;
    if (f)
        fclose(f);
    buf[n] = 0;
    return strstr(buf, needle) != NULL;
}
#endif

/*
 * Modules that were invalid when the application made them, so that
 * today's spirv-val rejects them whatever a reader does: an old glslang
 * (generator 0x80001) gave OpArrayLength a signed result type. For these
 * the exact rejection is expected, and the binary must still disassemble
 * whole (spirv-dis), which shows the words were decoded right.
 */
static const struct {
    uint64_t hash;
    const char *error;
} known_invalid[] = {
    {0x12b04dd0014895f5ull, "Result Type of OpArrayLength"}, /* computeraytracing */
};

/* @return whether `spv` (the module `hash`) is valid SPIR-V, or one of the
 * known invalid ones rejected for its known reason. */
static bool spirv_ok(uint64_t hash, const char *spv, const char *log_path, size_t *known)
{
#ifdef KT_SPIRV_VAL
    if (run_tool(KT_SPIRV_VAL, spv, log_path) == 0)
        return true;
    for (size_t i = 0; i < KILN_ARRAY_LEN(known_invalid); i++) {
        if (known_invalid[i].hash != hash || !file_contains(log_path, known_invalid[i].error))
            continue;
#ifdef KT_SPIRV_DIS
        if (run_tool(KT_SPIRV_DIS, spv, log_path) != 0)
            return false;
#endif
        (*known)++;
        return true;
    }
    return false;
#else
    (void)hash;
    (void)spv;
    (void)log_path;
    (void)known;
    return true;
#endif
}

static void print_file(const char *path)
{
    FILE *f = fopen(path, "r");
    char line[512];
    while (f && fgets(line, sizeof(line), f))
        fprintf(stderr, "  %s", line);
    if (f)
        fclose(f);
}

/* Builds archives for the damage tests. */
struct builder {
    uint8_t *p;
    size_t n, cap;
};

static void put(struct builder *b, const void *data, size_t n)
{
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 256;
        b->p = realloc(b->p, b->cap);
    }
    memcpy(b->p + b->n, data, n);
    b->n += n;
}

static void put_header(struct builder *b, unsigned version)
{
    static const uint8_t magic[12] = {0x81, 'F', 'O', 'S', 'S', 'I', 'L', 'I', 'Z', 'E', 'D', 'B'};
    uint8_t rest[4] = {0, 0, 0, (uint8_t)version};
    put(b, magic, sizeof(magic));
    put(b, rest, sizeof(rest));
}

/* Appends one entry. flags 1 stores plain, 2 deflates; `declared` (when
 * not UINT32_MAX) replaces the size after inflation in the head. */
static void put_entry_ex(struct builder *b, unsigned tag, uint64_t hash, uint32_t flags,
                         const void *payload, size_t n, bool crc, uint32_t declared)
{
    char name[41];
    snprintf(name, sizeof(name), "%024x%016" PRIx64, tag, hash);
    put(b, name, 40);
    uint8_t *stored = (uint8_t *)payload;
    uLongf stored_n = (uLongf)n;
    uint8_t *z = NULL;
    if (flags == 2) {
        stored_n = compressBound((uLong)n);
        z = malloc(stored_n);
        compress2(z, &stored_n, payload, (uLong)n, 6);
        stored = z;
    }
    uint8_t head[16];
    kiln__store_le32(head, (uint32_t)stored_n);
    kiln__store_le32(head + 4, flags);
    kiln__store_le32(head + 8, crc ? (uint32_t)crc32(0L, stored, (uInt)stored_n) : 0);
    kiln__store_le32(head + 12, declared != UINT32_MAX ? declared : (uint32_t)n);
    put(b, head, sizeof(head));
    put(b, stored, stored_n);
    free(z);
}

static void put_entry(struct builder *b, unsigned tag, uint64_t hash, uint32_t flags,
                      const char *json)
{
    put_entry_ex(b, tag, hash, flags, json, strlen(json), true, UINT32_MAX);
}

/* Reads every entry; records results (1 or an error) and tags in order. */
struct run {
    int rc[64];
    uint64_t tag[64];
    uint64_t hash[64];
    size_t n;
    int final; /* what the last call returned (0 or a sticky error) */
};

static void read_all(struct kiln_foz *foz, struct run *r)
{
    memset(r, 0, sizeof(*r));
    struct kiln_foz_entry e;
    for (;;) {
        int rc = kiln_foz_next(foz, &e);
        if (rc == 0 || (rc < 0 && rc != KILN_ECORRUPT_RECORD) || r->n == 64) {
            r->final = rc;
            return;
        }
        r->rc[r->n] = rc;
        r->tag[r->n] = e.tag;
        r->hash[r->n] = e.hash;
        r->n++;
    }
}

struct captured {
    int count;
    char last[1024];
    enum kiln_log_level last_level;
};

static void capture(void *user, enum kiln_log_level level, const char *module, const char *line)
{
    struct captured *c = user;
    (void)module;
    c->count++;
    c->last_level = level;
    snprintf(c->last, sizeof(c->last), "%s", line);
}

/* ---------------------------------------------------------------------------
 * The shared corpus
 * ------------------------------------------------------------------------ */

/* Every module of every archive decodes to SPIR-V that spirv-val accepts,
 * and the reader delivers exactly the entries the heads say are there. */
KT_CASE(corpus_modules)
{
    struct archives a;
    corpus_archives_or_skip(&a);
    KT_REQUIRE(a.n > 0);
    char dir[4096], spv[4200], log_path[4200];
    snprintf(dir, sizeof(dir), "%s", kt_tmpdir());
    snprintf(spv, sizeof(spv), "%s/m.spv", dir);
    snprintf(log_path, sizeof(log_path), "%s/val.log", dir);
    size_t total_modules = 0, total_graphics = 0, total_compute = 0, known = 0;

    for (size_t i = 0; i < a.n; i++) {
        uint8_t *data;
        size_t size;
        KT_REQUIRE_OK(load(a.path[i], &data, &size));
        struct heads h;
        walk_heads(data, size, &h);
        free(data);

        struct kiln_foz *foz;
        KT_REQUIRE_OK(kiln_foz_open(NULL, a.path[i], &foz));
        size_t entries = 0, modules = 0, per_tag[16] = {0};
        struct kiln_foz_entry e;
        int rc;
        while ((rc = kiln_foz_next(foz, &e)) == 1) {
            entries++;
            if (e.tag < 16)
                per_tag[e.tag]++;
            if (e.tag != KILN_FOZ_TAG_SHADER_MODULE)
                continue;
            struct kiln_foz_module m;
            int drc = kiln_foz_decode_module(&e, &m);
            KT_CHECK_OK(drc);
            if (drc < 0)
                continue;
            modules++;
            KT_CHECK(m.hash == e.hash);
            KT_CHECK(m.word_count >= 5);
            FILE *f = fopen(spv, "wb");
            KT_REQUIRE(f != NULL);
            KT_CHECK_EQ(fwrite(m.words, 4, m.word_count, f), m.word_count);
            fclose(f);
            if (!spirv_ok(m.hash, spv, log_path, &known)) {
                kt_fail(__FILE__, __LINE__,
                        "%s: module %016" PRIx64 " is not valid SPIR-V:", base_name(a.path[i]),
                        m.hash);
                print_file(log_path);
            }
            kiln_foz_module_free(&m);
        }
        KT_CHECK_EQ(rc, 0);
        struct kiln_foz_stats st = KILN_FOZ_STATS_INIT;
        kiln_foz_get_stats(foz, &st);
        kiln_foz_close(foz);

        KT_CHECK_EQ(entries, h.whole);
        KT_CHECK_EQ(st.entries, h.whole);
        KT_CHECK_EQ(st.damaged, 0);
        KT_CHECK_EQ(st.version, 6);
        KT_CHECK_EQ(st.truncated, h.cut);
        KT_CHECK_EQ(st.end, h.end);
        if (h.cut)
            KT_CHECK_EQ(st.truncated_at, h.end);
        for (int t = 0; t < 16; t++)
            KT_CHECK_EQ(per_tag[t], h.per_tag[t]);
        KT_CHECK_EQ(modules, h.per_tag[KILN_FOZ_TAG_SHADER_MODULE]);
        total_modules += modules;
        total_graphics += h.per_tag[KILN_FOZ_TAG_GRAPHICS_PIPELINE];
        total_compute += h.per_tag[KILN_FOZ_TAG_COMPUTE_PIPELINE];
        printf("%-44s modules %3zu  graphics pipelines %3zu  compute pipelines %zu%s\n",
               base_name(a.path[i]), modules, h.per_tag[KILN_FOZ_TAG_GRAPHICS_PIPELINE],
               h.per_tag[KILN_FOZ_TAG_COMPUTE_PIPELINE],
               st.truncated ? "  (last entry cut off)" : "");
    }
    printf("%zu archives: %zu modules, %zu graphics pipelines, %zu compute pipelines; "
           "%zu modules invalid at capture (known)\n",
           a.n, total_modules, total_graphics, total_compute, known);
    KT_CHECK(total_modules > 0);
    KT_CHECK(known <= KILN_ARRAY_LEN(known_invalid));
    free_archives(&a);
}

/* Stages come from the pipelines: compute modules are told apart from
 * graphics ones, and only modules no pipeline names have none. */
KT_CASE(corpus_stages)
{
    struct archives a;
    corpus_archives_or_skip(&a);
    KT_REQUIRE(a.n > 0);
    size_t compute = 0, unknown = 0;
    for (size_t i = 0; i < a.n; i++) {
        uint8_t *data;
        size_t size;
        KT_REQUIRE_OK(load(a.path[i], &data, &size));
        struct heads h;
        walk_heads(data, size, &h);

        struct kiln_foz *foz;
        KT_REQUIRE_OK(kiln_foz_open_memory(data, size, a.path[i], &foz));
        struct kiln_foz_module_info *mods;
        int64_t n = kiln_foz_list_modules(foz, &mods);
        KT_REQUIRE(n >= 0);
        KT_CHECK_EQ(n, h.per_tag[KILN_FOZ_TAG_SHADER_MODULE]);
        for (int64_t j = 0; j < n; j++) {
            uint32_t s = mods[j].stages;
            if (j > 0)
                KT_CHECK(mods[j - 1].hash < mods[j].hash);
            KT_CHECK(kiln_foz_module_list_find(mods, (size_t)n, mods[j].hash) == &mods[j]);
            /* A module is used for compute or for graphics, not both. */
            KT_CHECK(!(s & KILN_VK_STAGE_COMPUTE_BIT) || s == KILN_VK_STAGE_COMPUTE_BIT);
            compute += s == KILN_VK_STAGE_COMPUTE_BIT;
            if (s == 0) {
                unknown++;
                /* Only where the pipeline naming it was cut off. */
                KT_CHECK(h.cut);
            }
        }
        /* The reader was rewound: it starts over from the first entry. */
        struct kiln_foz_entry e;
        KT_CHECK_EQ(kiln_foz_next(foz, &e), 1);
        KT_CHECK_EQ(e.offset, 16);
        kiln_foz_module_list_free(mods);
        kiln_foz_close(foz);
        free(data);
    }
    /* The corpus: six compute pipelines, each with its own module; two
     * modules of texture3d lost their pipeline to the cut-off tail. */
    printf("compute modules %zu, modules of no known stage %zu\n", compute, unknown);
    KT_CHECK_EQ(compute, 6);
    KT_CHECK_EQ(unknown, 2);

    const char *cloth = find_named(&a, "computecloth");
    if (cloth) {
        struct kiln_foz *foz;
        KT_REQUIRE_OK(kiln_foz_open(NULL, cloth, &foz));
        struct kiln_foz_module_info *mods;
        int64_t n = kiln_foz_list_modules(foz, &mods);
        KT_REQUIRE(n > 0);
        const struct kiln_foz_module_info *m =
            kiln_foz_module_list_find(mods, (size_t)n, 0xa26b8d1d2ced2eb9ull);
        KT_REQUIRE(m != NULL);
        KT_CHECK_EQ(m->stages, KILN_VK_STAGE_COMPUTE_BIT);
        KT_CHECK(kiln_foz_module_list_find(mods, (size_t)n, 0x1234) == NULL);
        kiln_foz_module_list_free(mods);
        kiln_foz_close(foz);
    }
    free_archives(&a);
}

/* The file reader and the memory reader deliver the same bytes. */
KT_CASE(file_and_memory_agree)
{
    struct archives a;
    some_archives(&a);
    KT_REQUIRE(a.n > 0);
    const char *path = a.path[0];
    uint8_t *data;
    size_t size;
    KT_REQUIRE_OK(load(path, &data, &size));
    struct kiln_foz *ff, *fm;
    KT_REQUIRE_OK(kiln_foz_open(NULL, path, &ff));
    KT_REQUIRE_OK(kiln_foz_open_memory(data, size, "copy", &fm));
    KT_CHECK(strcmp(kiln_foz_name(ff), path) == 0);
    KT_CHECK(strcmp(kiln_foz_name(fm), "copy") == 0);
    struct kiln_foz_entry x, y;
    size_t n = 0;
    for (;;) {
        int rx = kiln_foz_next(ff, &x), ry = kiln_foz_next(fm, &y);
        KT_CHECK_EQ(rx, ry);
        if (rx != 1 || ry != 1)
            break;
        n++;
        KT_CHECK(x.tag == y.tag && x.hash == y.hash && x.offset == y.offset);
        KT_CHECK_EQ(x.size, y.size);
        KT_CHECK(x.size == y.size && memcmp(x.data, y.data, x.size) == 0);
    }
    KT_CHECK(n > 0);
    /* Reading twice gives the same again. */
    KT_CHECK_OK(kiln_foz_rewind(ff));
    struct run r;
    read_all(ff, &r);
    KT_CHECK_EQ(r.n, n);
    kiln_foz_close(ff);
    kiln_foz_close(fm);
    free(data);
    free_archives(&a);
}

/* ---------------------------------------------------------------------------
 * Damage
 * ------------------------------------------------------------------------ */

/* Cuts an archive at every length inside its last entry: all entries
 * before it come out unchanged, the cut one is ignored and reported. */
static void check_every_cut(const char *path)
{
    uint8_t *data;
    size_t size;
    KT_REQUIRE_OK(load(path, &data, &size));
    struct heads h;
    walk_heads(data, size, &h);
    KT_REQUIRE(h.whole >= 2);
    /* The full archive (up to its last whole entry) is the reference. */
    struct kiln_foz *foz;
    struct run full, cut;
    KT_REQUIRE_OK(kiln_foz_open_memory(data, h.end, path, &foz));
    read_all(foz, &full);
    kiln_foz_close(foz);
    KT_REQUIRE(full.n == h.whole);

    size_t cuts = 0;
    for (uint64_t len = h.last_start; len < h.end; len++, cuts++) {
        KT_REQUIRE_OK(kiln_foz_open_memory(data, (size_t)len, path, &foz));
        read_all(foz, &cut);
        struct kiln_foz_stats st = KILN_FOZ_STATS_INIT;
        kiln_foz_get_stats(foz, &st);
        kiln_foz_close(foz);
        KT_CHECK_EQ(cut.final, 0);
        KT_CHECK_EQ(cut.n, full.n - 1);
        bool same = cut.n == full.n - 1;
        for (size_t i = 0; same && i < cut.n; i++)
            same = cut.rc[i] == 1 && cut.tag[i] == full.tag[i] && cut.hash[i] == full.hash[i];
        KT_CHECK(same);
        KT_CHECK_EQ(st.entries, full.n - 1);
        KT_CHECK_EQ(st.damaged, 0);
        KT_CHECK_EQ(st.truncated, len > h.last_start);
        if (len > h.last_start)
            KT_CHECK_EQ(st.truncated_at, h.last_start);
        KT_CHECK_EQ(st.end, h.last_start);
    }
    KT_CHECK_EQ(cuts, h.end - h.last_start);
    free(data);
}

KT_CASE(truncated_tail)
{
    struct archives a;
    some_archives(&a);
    KT_REQUIRE(a.n > 0);
    const char *names[] = {"triangle", "renderheadless", "computecloth", "texture3d"};
    size_t checked = 0;
    for (size_t i = 0; i < KILN_ARRAY_LEN(names); i++) {
        const char *p = find_named(&a, names[i]);
        if (p) {
            check_every_cut(p);
            checked++;
        }
    }
    if (checked == 0)
        check_every_cut(a.path[0]);

    /* Through a file too, and down to the bare header. */
    uint8_t *data;
    size_t size;
    KT_REQUIRE_OK(load(a.path[0], &data, &size));
    char path[4200];
    snprintf(path, sizeof(path), "%s/cut.foz", kt_tmpdir());
    KT_REQUIRE_OK(kiln_io_replace_file(kiln_io_default(), path, data, size - 1));
    struct kiln_foz *foz;
    KT_REQUIRE_OK(kiln_foz_open(NULL, path, &foz));
    struct run r;
    read_all(foz, &r);
    struct kiln_foz_stats st = KILN_FOZ_STATS_INIT;
    kiln_foz_get_stats(foz, &st);
    KT_CHECK_EQ(r.final, 0);
    KT_CHECK(st.truncated);
    KT_CHECK(r.n > 0);
    kiln_foz_close(foz);
    KT_REQUIRE_OK(kiln_foz_open_memory(data, 16, "header only", &foz));
    read_all(foz, &r);
    kiln_foz_get_stats(foz, &st);
    KT_CHECK_EQ(r.n, 0);
    KT_CHECK_EQ(r.final, 0);
    KT_CHECK(!st.truncated);
    kiln_foz_close(foz);
    for (size_t len = 16 + 1; len < 16 + 56; len += 11) {
        KT_REQUIRE_OK(kiln_foz_open_memory(data, len, "cut head", &foz));
        read_all(foz, &r);
        kiln_foz_get_stats(foz, &st);
        KT_CHECK_EQ(r.n, 0);
        KT_CHECK(st.truncated);
        kiln_foz_close(foz);
    }
    free(data);
    free_archives(&a);
}

/* A flipped byte in an entry's CRC or payload: that entry is reported
 * damaged, the entries before it are delivered, and reading goes on. */
KT_CASE(flipped_crc)
{
    struct archives a;
    some_archives(&a);
    KT_REQUIRE(a.n > 0);
    uint8_t *data;
    size_t size;
    KT_REQUIRE_OK(load(a.path[0], &data, &size));
    struct heads h;
    walk_heads(data, size, &h);
    struct kiln_foz *foz;
    struct run full, r;
    KT_REQUIRE_OK(kiln_foz_open_memory(data, size, "full", &foz));
    read_all(foz, &full);
    kiln_foz_close(foz);
    KT_REQUIRE(full.n >= 6);

    /* Entry offsets, from the heads. */
    uint64_t off[64];
    size_t n = 0;
    for (uint64_t o = 16; o + 56 <= h.end && n < 64; n++) {
        off[n] = o;
        o += 56 + kiln__load_le32(data + o + 40);
    }
    /* Damage: a CRC byte, a payload byte (deflate and plain entries). */
    for (int kind = 0; kind < 3; kind++) {
        size_t k = 0;
        for (size_t i = 2; i < n; i++) {
            uint32_t flags = kiln__load_le32(data + off[i] + 44);
            if ((kind == 2 && flags == 1) || (kind < 2 && flags == 2)) {
                k = i;
                break;
            }
        }
        KT_REQUIRE(k > 0);
        uint64_t at = kind == 0 ? off[k] + 48 + 1 : off[k] + 56 + 7;
        data[at] ^= 0x10;
        struct captured c = {0};
        kiln_log_set_sink(capture, &c);
        KT_REQUIRE_OK(kiln_foz_open_memory(data, size, "flipped.foz", &foz));
        read_all(foz, &r);
        struct kiln_foz_stats st = KILN_FOZ_STATS_INIT;
        kiln_foz_get_stats(foz, &st);
        kiln_foz_close(foz);
        kiln_log_set_sink(NULL, NULL);
        data[at] ^= 0x10;

        KT_CHECK_EQ(r.final, 0);
        KT_CHECK_EQ(r.n, full.n);
        for (size_t i = 0; i < r.n && i < full.n; i++) {
            KT_CHECK_EQ(r.rc[i], i == k ? KILN_ECORRUPT_RECORD : 1);
            KT_CHECK(r.tag[i] == full.tag[i] && r.hash[i] == full.hash[i]);
        }
        KT_CHECK_EQ(st.damaged, 1);
        KT_CHECK_EQ(st.entries, full.n - 1);
        KT_CHECK_EQ(c.count, 1);
        KT_CHECK(strstr(c.last, "flipped.foz") != NULL);
        KT_CHECK(strstr(c.last, "CRC32 mismatch") != NULL);
    }

    /* A stored size one too large: that entry's CRC fails, and the next
     * entry's name no longer lines up; the reader searches forward and
     * reads every later entry. */
    kiln_log_set_level(KILN_LOG_ERROR); /* the warnings are expected */
    uint32_t s = kiln__load_le32(data + off[4] + 40);
    kiln__store_le32(data + off[4] + 40, s + 1);
    KT_REQUIRE_OK(kiln_foz_open_memory(data, size, "size", &foz));
    read_all(foz, &r);
    KT_CHECK_EQ(r.final, 0);
    KT_CHECK_EQ(r.n, full.n);
    for (size_t i = 0; i < r.n && i < full.n; i++) {
        KT_CHECK_EQ(r.rc[i], i == 4 ? KILN_ECORRUPT_RECORD : 1);
        KT_CHECK(r.hash[i] == full.hash[i]);
    }
    struct kiln_foz_stats st = KILN_FOZ_STATS_INIT;
    kiln_foz_get_stats(foz, &st);
    KT_CHECK_EQ(st.damaged, 1);
    KT_CHECK_EQ(st.resyncs, 1);
    /* A rewind reads the good entries again. */
    struct kiln_foz_entry e;
    KT_CHECK_OK(kiln_foz_rewind(foz));
    KT_CHECK_EQ(kiln_foz_next(foz, &e), 1);
    kiln_foz_close(foz);
    kiln__store_le32(data + off[4] + 40, s);

    /* A name that is not hexadecimal: that entry is lost (tag unknown), the
     * others are read. */
    data[off[3] + 30] = 'x';
    KT_REQUIRE_OK(kiln_foz_open_memory(data, size, "name", &foz));
    read_all(foz, &r);
    KT_CHECK_EQ(r.final, 0);
    KT_CHECK_EQ(r.n, full.n);
    for (size_t i = 0; i < r.n && i < full.n; i++) {
        KT_CHECK_EQ(r.rc[i], i == 3 ? KILN_ECORRUPT_RECORD : 1);
        KT_CHECK(i == 3 ? r.tag[i] == UINT64_MAX : r.hash[i] == full.hash[i]);
    }
    kiln_foz_get_stats(foz, &st);
    KT_CHECK_EQ(st.damaged, 1);
    kiln_foz_close(foz);
    kiln_log_set_level(KILN_LOG_WARN);
    free(data);
    free_archives(&a);
}

/*
 * One damaged size field (stored size +1, -1, 0, 0x7fffffff, and a size
 * past the end) in each entry of a real archive in turn, the last one
 * included: that entry is reported damaged and every other entry is read,
 * whole and in order. Each trial is one archive read; the count is printed
 * for docs/reliability.md.
 */
KT_CASE(resync_bad_size)
{
    struct archives a;
    some_archives(&a);
    KT_REQUIRE(a.n > 0);
    uint8_t *data;
    size_t size;
    KT_REQUIRE_OK(load(a.path[0], &data, &size));
    struct kiln_foz *foz;
    struct run full, r;
    KT_REQUIRE_OK(kiln_foz_open_memory(data, size, "full", &foz));
    read_all(foz, &full);
    kiln_foz_close(foz);
    KT_REQUIRE(full.n >= 2 && full.n < 64);
    uint64_t off[64];
    size_t n = 0;
    for (uint64_t o = 16; o + 56 <= size && n < 64; n++) {
        off[n] = o;
        o += 56 + kiln__load_le32(data + o + 40);
    }
    KT_REQUIRE(n == full.n);
    unsigned trials = 0;
    kiln_log_set_level(KILN_LOG_ERROR); /* the warnings are expected */
    for (size_t k = 0; k < n; k++) {
        uint32_t s = kiln__load_le32(data + off[k] + 40);
        const uint32_t bad[] = {s + 1, s - 1, 0, 0x7fffffffu, (uint32_t)(size - off[k])};
        for (size_t v = 0; v < KILN_ARRAY_LEN(bad); v++) {
            if (bad[v] == s)
                continue;
            kiln__store_le32(data + off[k] + 40, bad[v]);
            KT_REQUIRE_OK(kiln_foz_open_memory(data, size, "bad-size.foz", &foz));
            read_all(foz, &r);
            struct kiln_foz_stats st = KILN_FOZ_STATS_INIT;
            kiln_foz_get_stats(foz, &st);
            kiln_foz_close(foz);
            trials++;
            bool ok =
                r.final == 0 && r.n == n && st.damaged == 1 && !st.truncated && st.entries == n - 1;
            for (size_t i = 0; ok && i < n; i++)
                ok = r.rc[i] == (i == k ? KILN_ECORRUPT_RECORD : 1) && r.hash[i] == full.hash[i] &&
                     r.tag[i] == full.tag[i];
            if (!ok)
                kt_fail(__FILE__, __LINE__,
                        "entry %zu of %zu, stored size %u instead of %u: %zu entries read, "
                        "final %d, %" PRIu64 " damaged, truncated %d",
                        k, n, bad[v], s, r.n, r.final, st.damaged, (int)st.truncated);
        }
        kiln__store_le32(data + off[k] + 40, s);
    }
    kiln_log_set_level(KILN_LOG_WARN);
    printf("%u trials: one bad size field in each of %zu entries of %s\n", trials, n, a.path[0]);
    free(data);
    free_archives(&a);
}

/*
 * Heads crafted to overlap, each claiming the rest of the archive with a
 * wrong CRC, after a damaged first name: without a bound, the search for
 * the next entry would check about n^2/112 bytes (hours for 10 MB). It
 * stops after checking 8 times the archive's size (and 16 MiB), says so,
 * and counts the rest as skipped.
 */
KT_CASE(resync_budget)
{
    const size_t heads = 20000;
    size_t size = 16 + 56 * heads;
    uint8_t *d = malloc(size);
    KT_REQUIRE(d);
    static const uint8_t header[16] = {0x81, 'F', 'O', 'S', 'S', 'I', 'L', 'I',
                                       'Z',  'E', 'D', 'B', 0,   0,   0,   6};
    memcpy(d, header, 16);
    for (size_t i = 0; i < heads; i++) {
        uint8_t *h = d + 16 + 56 * i;
        uint32_t left = (uint32_t)(size - (size_t)(h - d) - 56);
        char name[41];
        snprintf(name, sizeof(name), "%024x%016zx", 4u, i);
        memcpy(h, name, 40);
        kiln__store_le32(h + 40, left);
        kiln__store_le32(h + 44, 1);
        kiln__store_le32(h + 48, 1);
        kiln__store_le32(h + 52, left);
    }
    d[16] = 'x'; /* the first name is damaged: a search starts */
    struct captured c = {0};
    kiln_log_set_sink(capture, &c);
    struct kiln_foz *foz;
    KT_REQUIRE_OK(kiln_foz_open_memory(d, size, "crafted.foz", &foz));
    struct run r;
    read_all(foz, &r);
    struct kiln_foz_stats st = KILN_FOZ_STATS_INIT;
    kiln_foz_get_stats(foz, &st);
    kiln_foz_close(foz);
    kiln_log_set_sink(NULL, NULL);
    KT_CHECK_EQ(r.final, 0);
    KT_CHECK_EQ(r.n, 1);
    KT_CHECK_EQ(r.rc[0], KILN_ECORRUPT_RECORD);
    KT_CHECK_EQ(st.entries, 0);
    KT_CHECK_EQ(st.damaged, 1);
    KT_CHECK_EQ(st.resyncs, 1);
    KT_CHECK_EQ(st.skipped_bytes, size - 16);
    KT_CHECK_EQ(c.count, 1);
    KT_CHECK(strstr(c.last, "the search stopped") != NULL);
    free(d);
}

/* Heads that do not match their payloads, in an archive built here. */
KT_CASE(damaged_entries)
{
    const char *json = "{\"version\":6,\"samplers\":{\"0000000000000001\":{\"flags\":0}}}";
    size_t jn = strlen(json);
    struct builder b = {0};
    put_header(&b, 6);
    put_entry(&b, 1, 1, 2, json);                                /* 0 good */
    put_entry_ex(&b, 1, 2, 2, json, jn, true, (uint32_t)jn + 1); /* 1 declared too big */
    put_entry_ex(&b, 1, 3, 2, json, jn, true, (uint32_t)jn - 1); /* 2 declared too small */
    put_entry_ex(&b, 1, 4, 2, json, jn, false, 0xfffffff0u);     /* 3 impossible size */
    put_entry_ex(&b, 1, 5, 3, json, jn, true, UINT32_MAX);       /* 4 unknown flags */
    put_entry_ex(&b, 1, 6, 1, json, jn, true, (uint32_t)jn + 3); /* 5 plain, sizes differ */
    put_entry_ex(&b, 1, 7, 1, "garbage!", 8, false, UINT32_MAX); /* 6 plain, no CRC: fine */
    /* 7: "deflate" whose bytes are not deflate, without a CRC to catch it */
    put_entry_ex(&b, 1, 8, 1, "not a deflate stream", 20, false, UINT32_MAX);
    size_t at7 = b.n - 20 - 16;
    kiln__store_le32(b.p + at7 + 4, 2);
    kiln__store_le32(b.p + at7 + 12, 100);
    put_entry(&b, 1, 9, 1, json);                        /* 8 good */
    put_entry_ex(&b, 1, 10, 1, "", 0, true, UINT32_MAX); /* 9 empty: fine */
    put_entry_ex(&b, 1, 11, 2, "", 0, true, UINT32_MAX); /* 10 empty deflate: fine */

    struct kiln_foz *foz;
    struct run r;
    kiln_log_set_level(KILN_LOG_ERROR); /* the damage is expected */
    KT_REQUIRE_OK(kiln_foz_open_memory(b.p, b.n, "built", &foz));
    read_all(foz, &r);
    kiln_log_set_level(KILN_LOG_WARN);
    const int want[] = {1,
                        KILN_ECORRUPT_RECORD,
                        KILN_ECORRUPT_RECORD,
                        KILN_ECORRUPT_RECORD,
                        KILN_ECORRUPT_RECORD,
                        KILN_ECORRUPT_RECORD,
                        1,
                        KILN_ECORRUPT_RECORD,
                        1,
                        1,
                        1};
    KT_CHECK_EQ(r.final, 0);
    KT_CHECK_EQ(r.n, KILN_ARRAY_LEN(want));
    for (size_t i = 0; i < r.n && i < KILN_ARRAY_LEN(want); i++) {
        if (r.rc[i] != want[i])
            kt_fail(__FILE__, __LINE__, "entry %zu: %d, expected %d", i, r.rc[i], want[i]);
        KT_CHECK_EQ(r.hash[i], i + 1);
    }
    struct kiln_foz_stats st = KILN_FOZ_STATS_INIT;
    kiln_foz_get_stats(foz, &st);
    KT_CHECK_EQ(st.damaged, 6);
    KT_CHECK_EQ(st.entries, 5);
    KT_CHECK(!st.truncated);
    kiln_foz_close(foz);
    free(b.p);
}

/* Bad headers are refused with KILN_EFORMAT and a line naming the file,
 * at info level: the caller reports the refusal (see kiln_foz_open). */
KT_CASE(bad_version)
{
    struct builder b = {0};
    put_header(&b, 6);
    put_entry(&b, 0, 1, 1, "{}");
    struct kiln_foz *foz;
    const unsigned bad[] = {0, 4, 7, 255};
    enum kiln_log_level saved = kiln_log_get_level();
    kiln_log_set_level(KILN_LOG_INFO);
    for (size_t i = 0; i < KILN_ARRAY_LEN(bad); i++) {
        b.p[15] = (uint8_t)bad[i];
        struct captured c = {0};
        kiln_log_set_sink(capture, &c);
        KT_CHECK_EQ(kiln_foz_open_memory(b.p, b.n, "v.foz", &foz), KILN_EFORMAT);
        kiln_log_set_sink(NULL, NULL);
        KT_CHECK_EQ(c.count, 1);
        KT_CHECK_EQ(c.last_level, KILN_LOG_INFO);
        KT_CHECK(strstr(c.last, "v.foz") != NULL && strstr(c.last, "version") != NULL);
    }
    /* At the default level the refusal logs nothing. */
    kiln_log_set_level(KILN_LOG_WARN);
    struct captured quiet = {0};
    kiln_log_set_sink(capture, &quiet);
    KT_CHECK_EQ(kiln_foz_open_memory(b.p, b.n, "v.foz", &foz), KILN_EFORMAT);
    kiln_log_set_sink(NULL, NULL);
    KT_CHECK_EQ(quiet.count, 0);
    kiln_log_set_level(KILN_LOG_INFO);
    /* Version 5 has the same stream layout, and is read. */
    b.p[15] = 5;
    KT_REQUIRE_OK(kiln_foz_open_memory(b.p, b.n, "v5.foz", &foz));
    struct kiln_foz_entry e;
    KT_CHECK_EQ(kiln_foz_next(foz, &e), 1);
    KT_CHECK_EQ(e.size, 2);
    kiln_foz_close(foz);

    /* Through a file: the line names the path. */
    b.p[15] = 7;
    char path[4200];
    snprintf(path, sizeof(path), "%s/version7.foz", kt_tmpdir());
    KT_REQUIRE_OK(kiln_io_replace_file(kiln_io_default(), path, b.p, b.n));
    struct captured c = {0};
    kiln_log_set_sink(capture, &c);
    foz = (struct kiln_foz *)&c; /* must be cleared on failure */
    KT_CHECK_EQ(kiln_foz_open(NULL, path, &foz), KILN_EFORMAT);
    kiln_log_set_sink(NULL, NULL);
    kiln_log_set_level(saved);
    KT_CHECK(foz == NULL);
    KT_CHECK(strstr(c.last, path) != NULL);
    KT_CHECK(strstr(c.last, "version 7") != NULL);
    free(b.p);
}

KT_CASE(bad_magic)
{
    struct builder b = {0};
    put_header(&b, 6);
    put_entry(&b, 0, 1, 1, "{}");
    struct kiln_foz *foz;
    struct captured c = {0};
    enum kiln_log_level saved = kiln_log_get_level();
    kiln_log_set_level(KILN_LOG_INFO);
    kiln_log_set_sink(capture, &c);
    const size_t bytes[] = {0, 1, 5, 11, 12, 14};
    for (size_t i = 0; i < KILN_ARRAY_LEN(bytes); i++) {
        b.p[bytes[i]] ^= 0x01;
        KT_CHECK_EQ(kiln_foz_open_memory(b.p, b.n, "m.foz", &foz), KILN_EFORMAT);
        b.p[bytes[i]] ^= 0x01;
    }
    KT_CHECK(strstr(c.last, "m.foz") != NULL);
    /* Shorter than a header, or empty. */
    KT_CHECK_EQ(kiln_foz_open_memory(b.p, 15, "short", &foz), KILN_EFORMAT);
    KT_CHECK_EQ(kiln_foz_open_memory(NULL, 0, "empty", &foz), KILN_EFORMAT);
    /* Not a file at all. */
    char path[4200];
    snprintf(path, sizeof(path), "%s/missing.foz", kt_tmpdir());
    KT_CHECK_EQ(kiln_foz_open(NULL, path, &foz), KILN_ENOENT);
    KT_CHECK(strstr(c.last, "missing.foz") != NULL);
    KT_CHECK_EQ(c.last_level, KILN_LOG_INFO);
    kiln_log_set_sink(NULL, NULL);
    kiln_log_set_level(saved);
    KT_CHECK_OK(kiln_foz_open_memory(b.p, b.n, "good", &foz));
    kiln_foz_close(foz);
    kiln_foz_close(NULL);
    free(b.p);
}

/* ---------------------------------------------------------------------------
 * The module decoder
 * ------------------------------------------------------------------------ */

/* Appends a word in Fossilize's varint coding. */
static size_t varint(uint8_t *out, uint32_t w)
{
    size_t n = 0;
    while (w >= 0x80) {
        out[n++] = (uint8_t)(w | 0x80);
        w >>= 7;
    }
    out[n++] = (uint8_t)w;
    return n;
}

/* Decodes an entry made of `json`, a NUL and `bin`. */
static int decode(uint64_t hash, const char *json, const uint8_t *bin, size_t bin_n,
                  struct kiln_foz_module *m)
{
    uint8_t buf[1024];
    size_t jn = strlen(json);
    memcpy(buf, json, jn);
    buf[jn] = 0;
    if (bin_n)
        memcpy(buf + jn + 1, bin, bin_n);
    struct kiln_foz_entry e = {
        .tag = KILN_FOZ_TAG_SHADER_MODULE, .hash = hash, .data = buf, .size = jn + 1 + bin_n};
    return kiln_foz_decode_module(&e, m);
}

/* Writes `tmpl` with @C, @O and @S replaced by the code size, the varint
 * offset and the varint size. */
static void fill(char *out, size_t cap, const char *tmpl, uint32_t cs, uint32_t voff,
                 uint32_t vsize)
{
    size_t n = 0;
    for (const char *t = tmpl; *t && n + 12 < cap; t++) {
        if (t[0] == '@' && (t[1] == 'C' || t[1] == 'O' || t[1] == 'S')) {
            uint32_t v = t[1] == 'C' ? cs : t[1] == 'O' ? voff : vsize;
            n += (size_t)snprintf(out + n, cap - n, "%u", v);
            t++;
        } else {
            out[n++] = *t;
        }
    }
    out[n] = 0;
}

static int decode_json(const char *tmpl, uint32_t code_size, uint32_t voff, uint32_t vsize,
                       const uint8_t *bin, size_t bin_n)
{
    char json[512];
    fill(json, sizeof(json), tmpl, code_size, voff, vsize);
    struct kiln_foz_module m;
    int rc = decode(0xabc, json, bin, bin_n, &m);
    kiln_foz_module_free(&m);
    return rc;
}

KT_CASE(module_decoder)
{
    const uint32_t words[] = {0x07230203, 0x00010000, 0x0008000b, 0xffffffff, 0, 0x80, 0x3fff};
    uint8_t bin[64];
    size_t bn = 0;
    for (size_t i = 0; i < KILN_ARRAY_LEN(words); i++)
        bn += varint(bin + bn, words[i]);
    const uint32_t cs = (uint32_t)sizeof(words);
    const char *fmt = "{\"version\":6,\"shaderModules\":{\"0000000000000abc\":{\"flags\":0,"
                      "\"codeSize\":@C,\"varintOffset\":@O,\"varintSize\":@S}}}";

    struct kiln_foz_module m;
    char json[512];
    fill(json, sizeof(json), fmt, cs, 0, (uint32_t)bn);
    KT_REQUIRE_OK(decode(0xabc, json, bin, bn, &m));
    KT_CHECK_EQ(m.hash, 0xabc);
    KT_CHECK_EQ(m.word_count, KILN_ARRAY_LEN(words));
    KT_CHECK(m.word_count == KILN_ARRAY_LEN(words) && memcmp(m.words, words, sizeof(words)) == 0);
    kiln_foz_module_free(&m);
    kiln_foz_module_free(&m); /* cleared: a no-op */

    /* At an offset inside the binary area, with bytes around it. */
    uint8_t padded[80] = {0x55, 0x55, 0x55};
    memcpy(padded + 3, bin, bn);
    padded[3 + bn] = 0x55;
    KT_CHECK_OK(decode_json(fmt, cs, 3, (uint32_t)bn, padded, bn + 4));

    /* Sizes that do not fit. */
    KT_CHECK_EQ(decode_json(fmt, cs, 0, (uint32_t)bn + 1, bin, bn), KILN_EPARSE);
    KT_CHECK_EQ(decode_json(fmt, cs, 1, (uint32_t)bn, bin, bn), KILN_EPARSE);
    KT_CHECK_EQ(decode_json(fmt, cs - 2, 0, (uint32_t)bn, bin, bn), KILN_EPARSE);
    KT_CHECK_EQ(decode_json(fmt, cs + 4, 0, (uint32_t)bn, bin, bn), KILN_EPARSE);
    KT_CHECK_EQ(decode_json(fmt, cs - 4, 0, (uint32_t)bn, bin, bn), KILN_EPARSE);
    KT_CHECK_EQ(decode_json(fmt, 0, 0, (uint32_t)bn, bin, bn), KILN_EPARSE);
    KT_CHECK_EQ(decode_json(fmt, 0xfffffffcu, 0, (uint32_t)bn, bin, bn), KILN_EPARSE);
    /* The stream ends inside a word. */
    KT_CHECK_EQ(decode_json(fmt, cs, 0, (uint32_t)bn - 1, bin, bn - 1), KILN_EPARSE);

    /* Words longer than 32 bits. */
    uint8_t six[] = {0x83, 0x84, 0x8c, 0x39, 0x80, 0x00};
    KT_CHECK_EQ(decode_json(fmt, 4, 0, 6, six, 6), KILN_EPARSE);
    uint8_t wide[] = {0xff, 0xff, 0xff, 0xff, 0x1f};
    KT_CHECK_EQ(decode_json(fmt, 4, 0, 5, wide, 5), KILN_EPARSE);
    uint8_t magic5[] = {0x83, 0x84, 0x8c, 0xb9, 0x00}; /* the magic, over-long but in range */
    KT_CHECK_OK(decode_json(fmt, 4, 0, 5, magic5, 5));

    /* Not SPIR-V. */
    uint8_t one[] = {0x01};
    KT_CHECK_EQ(decode_json(fmt, 4, 0, 1, one, 1), KILN_EPARSE);

    /* JSON that is wrong. */
    const char *bad_json[] = {
        "{\"version\":6,\"shaderModules\":{\"0000000000000abd\":{\"flags\":0,\"codeSize\":@C,"
        "\"varintOffset\":@O,\"varintSize\":@S}}}", /* another hash */
        "{\"version\":6,\"shaderModules\":{\"0000000000000abc\":{\"flags\":0,\"codeSize\":@C,"
        "\"varintOffset\":@O,\"varintSize\":@S}}} x", /* bytes after the value */
        "{\"version\":6,\"shaderModules\":{\"0000000000000abc\":{\"flags\":0,\"codeSize\":@C,"
        "\"varintOffset\":@O,\"varintSize\":@S}}", /* cut short */
        "{\"version\":6,\"shaderModules\":{\"0000000000000abc\":{\"flags\":0,\"codeSize\":-@C,"
        "\"varintOffset\":@O,\"varintSize\":@S}}}", /* negative */
        "{\"version\":6,\"shaderModules\":{\"0000000000000abc\":{\"flags\":0,\"codeSize\":\"@C\","
        "\"varintOffset\":@O,\"varintSize\":@S}}}", /* a string */
        "{\"version\":6,\"shaderModules\":{\"0000000000000abc\":{\"flags\":0,\"codeSize\":@C,"
        "\"varintOffset\":@O,\"varintSize\":@S},\"1\":{}}}", /* two modules */
        "{\"version\":6,\"shaderModules\":{\"zz\":{\"flags\":0,\"codeSize\":@C,"
        "\"varintOffset\":@O,\"varintSize\":@S}}}", /* not a hash */
        "{\"version\":6,\"shaderModules\":{\"0000000000000abc\":{\"flags\":-1,\"codeSize\":@C,"
        "\"varintOffset\":@O,\"varintSize\":@S}}}", /* negative flags */
        "[@C,@O,@S]",
    };
    for (size_t i = 0; i < KILN_ARRAY_LEN(bad_json); i++) {
        int rc = decode_json(bad_json[i], cs, 0, (uint32_t)bn, bin, bn);
        if (rc != KILN_EPARSE)
            kt_fail(__FILE__, __LINE__, "bad JSON %zu: %s", i, kiln_errname(rc));
    }
    /* No NUL and no binary area at all. */
    fill(json, sizeof(json), fmt, cs, 0, (uint32_t)bn);
    struct kiln_foz_entry e = {.tag = KILN_FOZ_TAG_SHADER_MODULE,
                               .hash = 0xabc,
                               .data = (const uint8_t *)json,
                               .size = strlen(json)};
    KT_CHECK_EQ(kiln_foz_decode_module(&e, &m), KILN_EPARSE);
    /* The old base64 form. */
    KT_CHECK_EQ(decode(0xabc,
                       "{\"version\":6,\"shaderModules\":{\"0000000000000abc\":{\"flags\":0,"
                       "\"codeSize\":4,\"code\":\"AwIjBw==\"}}}",
                       NULL, 0, &m),
                KILN_ENOTSUP);
    /* Not a module entry. */
    e.tag = KILN_FOZ_TAG_SAMPLER;
    KT_CHECK_EQ(kiln_foz_decode_module(&e, &m), KILN_EINVAL);
    KT_CHECK(m.words == NULL);
}

/* Stages from pipelines that come before or after their modules, with a
 * pipeline whose JSON is broken left out. */
KT_CASE(stages_from_pipelines)
{
    uint8_t bin[16];
    size_t bn = varint(bin, 0x07230203);
    char mod[512];
    struct builder b = {0};
    put_header(&b, 6);
    put_entry(&b, 7, 0x70, 2,
              "{\"version\":6,\"computePipelines\":{\"0000000000000070\":{\"flags\":0,"
              "\"stage\":{\"flags\":0,\"stage\":32,\"module\":\"00000000000000c1\",\"name\":"
              "\"main\"}}}}");
    const uint64_t hashes[] = {0xc1, 0xa1, 0xa2, 0xa3, 0xb1};
    for (size_t i = 0; i < KILN_ARRAY_LEN(hashes); i++) {
        int jn = snprintf(mod, sizeof(mod),
                          "{\"version\":6,\"shaderModules\":{\"%016" PRIx64 "\":{\"flags\":0,"
                          "\"codeSize\":4,\"varintOffset\":0,\"varintSize\":%zu}}}",
                          hashes[i], bn);
        memcpy(mod + jn + 1, bin, bn);
        put_entry_ex(&b, 4, hashes[i], 2, mod, (size_t)jn + 1 + bn, true, UINT32_MAX);
    }
    put_entry(
        &b, 6, 0x60, 2,
        "{\"version\":6,\"graphicsPipelines\":{\"0000000000000060\":{\"flags\":0,"
        "\"stages\":[{\"flags\":0,\"stage\":1,\"module\":\"00000000000000a1\",\"name\":\"main\"},"
        "{\"flags\":0,\"stage\":16,\"module\":\"00000000000000a2\",\"name\":\"main\"},"
        "{\"flags\":0,\"stage\":16,\"module\":\"0000000000000000\",\"name\":\"main\"}]}}}");
    put_entry(&b, 6, 0x61, 1,
              "{\"version\":6,\"graphicsPipelines\":{\"0000000000000061\":{\"flags\":0,"
              "\"stages\":[{\"flags\":0,\"stage\":8,\"module\":\"00000000000000a2\",\"name\":"
              "\"main\"}]}}}");
    /* Broken: its first stage would name a3, its second has no module. */
    put_entry(&b, 6, 0x62, 1,
              "{\"version\":6,\"graphicsPipelines\":{\"0000000000000062\":{\"flags\":0,"
              "\"stages\":[{\"stage\":1,\"module\":\"00000000000000a3\"},{\"stage\":16}]}}}");

    struct kiln_foz *foz;
    KT_REQUIRE_OK(kiln_foz_open_memory(b.p, b.n, "stages", &foz));
    struct kiln_foz_module_info *mods;
    struct captured c = {0};
    kiln_log_set_sink(capture, &c);
    int64_t n = kiln_foz_list_modules(foz, &mods);
    kiln_log_set_sink(NULL, NULL);
    KT_REQUIRE(n == 5);
    KT_CHECK_EQ(c.count, 1); /* the broken pipeline */
    KT_CHECK(strstr(c.last, "graphics pipeline") != NULL);
    const struct {
        uint64_t hash;
        uint32_t stages;
    } want[] = {
        {0xa1, KILN_VK_STAGE_VERTEX_BIT},
        {0xa2, KILN_VK_STAGE_FRAGMENT_BIT | KILN_VK_STAGE_GEOMETRY_BIT},
        {0xa3, 0},
        {0xb1, 0},
        {0xc1, KILN_VK_STAGE_COMPUTE_BIT},
    };
    for (size_t i = 0; i < KILN_ARRAY_LEN(want); i++) {
        KT_CHECK_EQ(mods[i].hash, want[i].hash);
        KT_CHECK_EQ(mods[i].stages, want[i].stages);
    }
    kiln_foz_module_list_free(mods);

    /* Every module decodes. */
    struct kiln_foz_entry e;
    int rc, decoded = 0;
    while ((rc = kiln_foz_next(foz, &e)) == 1) {
        if (e.tag != KILN_FOZ_TAG_SHADER_MODULE)
            continue;
        struct kiln_foz_module m;
        KT_CHECK_OK(kiln_foz_decode_module(&e, &m));
        decoded += m.word_count == 1;
        kiln_foz_module_free(&m);
    }
    KT_CHECK_EQ(decoded, 5);
    kiln_foz_close(foz);

    /* No modules at all. */
    struct builder empty = {0};
    put_header(&empty, 6);
    KT_REQUIRE_OK(kiln_foz_open_memory(empty.p, empty.n, "empty", &foz));
    mods = (struct kiln_foz_module_info *)&c;
    KT_CHECK_EQ(kiln_foz_list_modules(foz, &mods), 0);
    KT_CHECK(mods == NULL);
    kiln_foz_close(foz);
    free(empty.p);
    free(b.p);
}

KT_CASE(tag_names)
{
    KT_CHECK(strcmp(kiln_foz_tag_name(KILN_FOZ_TAG_SHADER_MODULE), "shader module") == 0);
    KT_CHECK(strcmp(kiln_foz_tag_name(KILN_FOZ_TAG_COMPUTE_PIPELINE), "compute pipeline") == 0);
    KT_CHECK(strcmp(kiln_foz_tag_name(99), "unknown") == 0);
    KT_CHECK_EQ(KILN_FOZ_TAG_GRAPHICS_PIPELINE, 6);
    KT_CHECK_EQ(KILN_FOZ_TAG_APPLICATION_BLOB_LINK, 8);
}

KT_MAIN(KT_ENTRY(corpus_modules), KT_ENTRY(corpus_stages), KT_ENTRY(file_and_memory_agree),
        KT_ENTRY(truncated_tail), KT_ENTRY(flipped_crc), KT_ENTRY(resync_bad_size),
        KT_ENTRY(resync_budget), KT_ENTRY(damaged_entries), KT_ENTRY(bad_version),
        KT_ENTRY(bad_magic), KT_ENTRY(module_decoder), KT_ENTRY(stages_from_pipelines),
        KT_ENTRY(tag_names))
