/*
 * test_invalid_spirv.c - nothing invalid is stored, nothing unvalidated
 * reaches a driver (issue 17, point 1).
 *
 * Malformed variants of a real generated compute module (a wrong magic, id
 * bounds of 0x7fffffff, 0 and 1, garbage opcodes, instructions cut short or
 * of length 0 or one too long, a header alone, misordered sections: 60 in
 * all) are put
 * through every way into a cache: a Fossilize archive through
 * kiln_foz_import, a program source of SPIR-V through kiln_prepare, and
 * records planted directly (as a cache written before validation, or by
 * another route, may hold). Each variant is refused and counted, one line
 * each; the valid modules beside them are stored and built; and the warm
 * start builds only the valid ones (lavapipe; skipped, exit 77, without
 * Vulkan). The number of variants is printed for docs/reliability.md.
 */
#include "foz_writer.h"
#include "kiln_internal.h"
#include "kiln_test.h"
#include "prep_fixture.h"

#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#define MAX_VARIANTS 64
#define GOOD         2

/* The valid modules and their malformed variants. */
struct set {
    struct kiln_program *good[GOOD];
    uint32_t *words[MAX_VARIANTS];
    size_t nwords[MAX_VARIANTS];
    char what[MAX_VARIANTS][64];
    size_t n;
};

static uint32_t *copy_words(const uint32_t *w, size_t n, size_t room)
{
    uint32_t *c = calloc(room > n ? room : n, 4);
    if (!c)
        abort(); /* out of memory: nothing to test */
    memcpy(c, w, n * 4);
    return c;
}

/* Adds a variant: `n` words of `w` (copied), changed by the caller after. */
static uint32_t *add(struct set *s, const uint32_t *w, size_t n, size_t keep, const char *what)
{
    if (s->n == MAX_VARIANTS)
        abort(); /* the table is too small: a test bug */
    s->words[s->n] = copy_words(w, n, keep);
    s->nwords[s->n] = keep;
    snprintf(s->what[s->n], sizeof(s->what[0]), "%s", what);
    return s->words[s->n++];
}

/* Makes the set, or exits 77 where there is no shaderc to make SPIR-V. */
static void make_set(struct set *s)
{
    memset(s, 0, sizeof(*s));
    struct kiln_glsl *g = NULL;
    int rc = kiln_glsl_create(KILN_GLSL_OPT_NONE, &g);
    if (rc == KILN_ENOTSUP) {
        printf("skipped: this build has no GLSL translator to make SPIR-V\n");
        exit(77);
    }
    KT_REQUIRE_OK(rc);
    /* Generated programs 0 and 2 are compute programs. */
    for (uint32_t i = 0; i < GOOD; i++) {
        KT_REQUIRE_OK(kiln_generate_spirv(kiln_glsl_translator(g), KILN_GENERATOR_DEFAULT_SEED,
                                          2 * i, &s->good[i]));
        KT_REQUIRE(s->good[i]->nstages == 1);
    }
    kiln_glsl_destroy(g);
    const uint32_t *w = s->good[0]->stages[0].words;
    size_t n = s->good[0]->stages[0].nwords;
    char why[256];
    KT_REQUIRE_OK(kiln_vk_validate_spirv(w, n, why, sizeof(why)));

    /* Where each instruction starts. */
    size_t at[512], ni = 0;
    for (size_t i = 5; i < n && ni < 512; i += w[i] >> 16)
        at[ni++] = i;
    KT_REQUIRE(ni >= 24);

    uint32_t *v;
    v = add(s, w, n, n, "wrong magic");
    v[0] = 0xdeadbeef;
    v = add(s, w, n, n, "id bound 0x7fffffff");
    v[3] = 0x7fffffff;
    v = add(s, w, n, n, "id bound 0xffffffff");
    v[3] = 0xffffffff;
    v = add(s, w, n, n, "id bound 0");
    v[3] = 0;
    v = add(s, w, n, n, "id bound 1");
    v[3] = 1;
    v = add(s, w, n, n, "id bound one short");
    v[3] = w[3] - 1;
    add(s, w, n, 5, "a header alone");
    add(s, w, n, 3, "shorter than a header");
    v = add(s, w, n, n + 1, "a trailing garbage word");
    v[n] = 0xffffffff;
    /* The memory model before the capabilities. */
    v = add(s, w, n, n, "sections out of order");
    {
        size_t a = at[0], la = w[a] >> 16, b = at[1], lb = w[b] >> 16;
        memcpy(v + a, w + b, lb * 4);
        memcpy(v + a + lb, w + a, la * 4);
    }
    /* Garbage opcodes, the length kept. */
    for (size_t k = 0; k < 20; k++) {
        char what[64];
        snprintf(what, sizeof(what), "garbage opcode in instruction %zu", k);
        v = add(s, w, n, n, what);
        size_t i = at[(k * ni) / 20];
        v[i] = (v[i] & 0xffff0000u) | 0xfffeu;
    }
    /* Cut inside an instruction: its length runs past the end. */
    size_t cuts = 0;
    for (size_t k = 0; k < ni && cuts < 16; k++) {
        if ((w[at[k]] >> 16) < 2)
            continue;
        char what[64];
        snprintf(what, sizeof(what), "cut inside instruction %zu", k);
        add(s, w, n, at[k] + 1, what);
        cuts++;
    }
    /* Length 0, and one word too long. */
    for (size_t k = 0; k < 5; k++) {
        char what[64];
        size_t i = at[1 + (k * (ni - 2)) / 5];
        snprintf(what, sizeof(what), "instruction at word %zu of length 0", i);
        v = add(s, w, n, n, what);
        v[i] &= 0xffffu;
    }
    for (size_t k = 0; k < 9; k++) {
        char what[64];
        size_t i = at[(k * (ni - 1)) / 9];
        snprintf(what, sizeof(what), "instruction at word %zu one word too long", i);
        v = add(s, w, n, n, what);
        v[i] += 1u << 16;
    }
    /* Every variant really is refused by the validator (the premise). */
    for (size_t i = 0; i < s->n; i++)
        if (kiln_vk_validate_spirv(s->words[i], s->nwords[i], why, sizeof(why)) != KILN_EFORMAT)
            kt_fail(__FILE__, __LINE__, "variant %zu (%s) is not refused", i, s->what[i]);
}

static void free_set(struct set *s)
{
    for (size_t i = 0; i < GOOD; i++)
        kiln_program_destroy(s->good[i]);
    for (size_t i = 0; i < s->n; i++)
        free(s->words[i]);
}

/* Good modules first, then the variants. */
static void modules_of(const struct set *s, struct fw_module *m)
{
    for (size_t i = 0; i < GOOD; i++)
        m[i] = (struct fw_module){s->good[i]->stages[0].words, s->good[i]->stages[0].nwords};
    for (size_t i = 0; i < s->n; i++)
        m[GOOD + i] = (struct fw_module){s->words[i], s->nwords[i]};
}

/* Counts log lines; the sink is called from the pool's workers too. */
struct lines {
    _Atomic unsigned warnings;
    _Atomic unsigned naming; /* warnings that contain `needle` */
    const char *needle;
};

static void count_lines(void *user, enum kiln_log_level level, const char *module, const char *line)
{
    (void)module;
    struct lines *l = user;
    if (level == KILN_LOG_WARN) {
        atomic_fetch_add(&l->warnings, 1);
        if (l->needle && strstr(line, l->needle) != NULL)
            atomic_fetch_add(&l->naming, 1);
    }
}

static struct kiln_cache *open_cache(const char *dir, uint64_t stamp)
{
    struct kiln_cache_options o = {.size = sizeof(o), .stamp = stamp, .flags = KILN_CACHE_CREATE};
    struct kiln_cache *c = NULL;
    kt_mkdir(dir); /* may be there */
    int rc = kiln_cache_open(dir, &o, &c);
    if (rc < 0) {
        fprintf(stderr, "%s: cannot open the cache: %s\n", dir, kiln_strerror(rc));
        exit(1);
    }
    return c;
}

/* Writes the set as an archive in `dir` and imports it into `cache`. */
static void import_set(const struct set *s, const char *dir, const char *cache, uint64_t *hashes,
                       struct kiln_foz_import_report *r, struct lines *l)
{
    struct fw_module m[GOOD + MAX_VARIANTS];
    modules_of(s, m);
    char foz[4200];
    snprintf(foz, sizeof(foz), "%s/variants.foz", dir);
    KT_REQUIRE_OK(fw_write_modules(foz, m, GOOD + s->n, hashes));
    struct kiln_cache *c = open_cache(cache, KILN_FOZ_STAMP);
    kiln_log_set_sink(count_lines, l);
    KT_CHECK_OK(kiln_foz_import(c, foz, r));
    kiln_log_set_sink(NULL, NULL);
    kiln_cache_close(c);
}

/* kiln import foz: every variant refused and counted, one line each. */
KT_CASE(import_refuses)
{
    struct set s;
    make_set(&s);
    const char *dir = kt_tmpdir();
    char cache[4200];
    snprintf(cache, sizeof(cache), "%s/cache", dir);
    uint64_t hashes[GOOD + MAX_VARIANTS];
    struct kiln_foz_import_report r = KILN_FOZ_IMPORT_REPORT_INIT;
    struct lines l = {.needle = "not imported"};
    import_set(&s, dir, cache, hashes, &r, &l);
    KT_CHECK_EQ(r.modules, GOOD + s.n);
    KT_CHECK_EQ(r.imported, GOOD);
    /* A wrong magic is refused by the module decoder already (undecodable),
     * the others by the validator (invalid): one line each. */
    KT_CHECK_EQ(r.undecodable, 1);
    KT_CHECK_EQ(r.invalid, s.n - 1);
    KT_CHECK_EQ(r.compute, GOOD);
    KT_CHECK_EQ(l.naming, s.n - 1);
    KT_CHECK_EQ(l.warnings, s.n);
    struct kiln_cache *c = open_cache(cache, KILN_FOZ_STAMP);
    KT_CHECK_EQ(kiln_cache_count(c), GOOD);
    for (size_t i = 0; i < GOOD + s.n; i++)
        KT_CHECK_EQ(kiln_cache_find(c, kiln_foz_key(hashes[i]), NULL) == KILN_OK, i < GOOD);
    kiln_cache_close(c);
    printf("%zu malformed variants refused by the import, %d valid modules stored\n", s.n, GOOD);
    free_set(&s);
}

/* A program source of the good modules and the variants, as SPIR-V. */
static int set_load(void *user, size_t i, struct kiln_program **out)
{
    const struct set *s = user;
    const uint32_t *w = i < GOOD ? s->good[i]->stages[0].words : s->words[i - GOOD];
    size_t n = i < GOOD ? s->good[i]->stages[0].nwords : s->nwords[i - GOOD];
    char name[64];
    snprintf(name, sizeof(name), "%s%zu.comp", i < GOOD ? "good" : "variant", i);
    struct kiln_program *p = NULL;
    int rc = kiln_program_create(name, &p);
    if (rc < 0)
        return rc;
    p->nstages = 1;
    p->stages[0].src.stage = KILN_VK_STAGE_COMPUTE_BIT;
    p->stages[0].words = malloc(n ? n * 4 : 4);
    if (!p->stages[0].words) {
        kiln_program_destroy(p);
        return KILN_ENOMEM;
    }
    memcpy(p->stages[0].words, w, n * 4);
    p->stages[0].nwords = n;
    *out = p;
    return KILN_OK;
}

/* kiln_prepare from a source of SPIR-V: refused, counted, not stored. */
static void prepare_set(struct set *s, const char *cache, struct kiln_vk *vk,
                        struct kiln_prepare_summary *sum, struct lines *l)
{
    struct kiln_program_source src = {
        .size = sizeof(src), .user = s, .count = GOOD + s->n, .load = set_load};
    struct kiln_prepare_options o = KILN_PREPARE_OPTIONS_INIT;
    kiln_prepare_options_init(&o);
    o.cache_dir = cache;
    o.source = &src;
    o.no_vulkan = vk == NULL;
    o.vk = vk;
    o.jobs = 2;
    kiln_log_set_sink(count_lines, l);
    KT_CHECK_OK(kiln_prepare(&o, NULL, NULL, sum));
    kiln_log_set_sink(NULL, NULL);
}

KT_CASE(prepare_refuses)
{
    struct set s;
    make_set(&s);
    char cache[4200];
    snprintf(cache, sizeof(cache), "%s/cache", kt_tmpdir());
    struct kiln_prepare_summary sum = KILN_PREPARE_SUMMARY_INIT;
    struct lines l = {.needle = "not stored: its compute stage is not valid SPIR-V"};
    prepare_set(&s, cache, NULL, &sum, &l);
    KT_CHECK_EQ(sum.programs, GOOD + s.n);
    KT_CHECK_EQ(sum.translated, GOOD);
    KT_CHECK_EQ(sum.failed, s.n);
    KT_CHECK_EQ(l.naming, s.n);
    struct kiln_cache *c = open_cache(cache, 0);
    KT_CHECK_EQ(kiln_cache_count(c), GOOD);
    kiln_cache_close(c);
    printf("%zu malformed variants refused by kiln_prepare, %d valid programs stored\n", s.n, GOOD);
    free_set(&s);
}

/* Stores the variants as records directly, as an old cache may hold them:
 * under the keys kiln_prepare gives them (`prep_keys`), or others. */
static void plant(struct set *s, const char *cache, uint64_t stamp, bool prep_keys)
{
    struct kiln_cache_options o = {.size = sizeof(o), .stamp = stamp, .flags = KILN_CACHE_USE_DICT};
    struct kiln_cache *c = NULL;
    KT_REQUIRE_OK(kiln_cache_open(cache, &o, &c));
    for (size_t i = 0; i < s->n; i++) {
        void *blob = NULL, *payload = NULL;
        size_t bs = 0, ps = 0;
        KT_REQUIRE_OK(
            kiln_pack(s->words[i], s->nwords[i], KILN_CODEC_KILN, kiln_cache_dict(c), &blob, &bs));
        struct kiln_stage_blob st = {
            .stage = KILN_VK_STAGE_COMPUTE_BIT, .blob = blob, .blob_size = bs};
        KT_REQUIRE_OK(kiln_program_payload_build(&st, 1, &payload, &ps));
        struct kiln_key k = {.hi = 0x706c616e74ull, .lo = i};
        if (prep_keys) {
            struct kiln_program *p = NULL;
            KT_REQUIRE_OK(set_load(s, GOOD + i, &p));
            KT_REQUIRE_OK(kiln_prep_program_key(p, &k));
            kiln_program_destroy(p);
        }
        KT_REQUIRE_OK(
            kiln_cache_put(c, k, payload, ps, (uint32_t)(s->nwords[i] * 4), KILN_CODEC_KILN, 1));
        kiln_pack_free(blob);
        kiln_pack_free(payload);
    }
    KT_REQUIRE_OK(kiln_cache_sync(c));
    kiln_cache_close(c);
}

static void start(const char *cache, struct kiln_vk *vk, struct kiln_start_summary *sum,
                  struct lines *l)
{
    struct kiln_start_options o = {
        .size = sizeof(o), .cache_dir = cache, .any_stamp = true, .jobs = 2, .vk = vk};
    kiln_log_set_sink(count_lines, l);
    KT_CHECK_OK(kiln_warm_start(&o, NULL, NULL, sum));
    kiln_log_set_sink(NULL, NULL);
}

/*
 * The warm start builds only valid modules: from an imported archive, from
 * a prepared source, and from a cache whose records were planted without
 * validation (a cache of an older kiln). Needs Vulkan (lavapipe).
 */
KT_CASE(start_builds_only_valid)
{
    struct set s;
    make_set(&s);
    const char *dir = kt_tmpdir();
    struct kiln_vk *vk = pf_vk(NULL); /* exit 77 without Vulkan */
    char imported[4200], prepared[4200];
    snprintf(imported, sizeof(imported), "%s/imported", dir);
    snprintf(prepared, sizeof(prepared), "%s/prepared", dir);

    /* Import, then start. */
    uint64_t hashes[GOOD + MAX_VARIANTS];
    struct kiln_foz_import_report r = KILN_FOZ_IMPORT_REPORT_INIT;
    struct lines l = {0};
    import_set(&s, dir, imported, hashes, &r, &l);
    KT_CHECK_EQ(r.imported, GOOD);
    struct kiln_start_summary ss = KILN_START_SUMMARY_INIT;
    struct lines ls = {.needle = "is not valid SPIR-V"};
    start(imported, vk, &ss, &ls);
    KT_CHECK_EQ(ss.records, GOOD);
    KT_CHECK_EQ(ss.pipelines_built, GOOD);
    KT_CHECK_EQ(ss.bad + ss.pipelines_failed, 0);

    /* Prepare with Vulkan: the valid ones stored and built. */
    struct kiln_prepare_summary ps = KILN_PREPARE_SUMMARY_INIT;
    struct lines lp = {0};
    prepare_set(&s, prepared, vk, &ps, &lp);
    KT_CHECK_EQ(ps.translated, GOOD);
    KT_CHECK_EQ(ps.failed, s.n);
    KT_CHECK_EQ(ps.pipelines_built, GOOD);
    KT_CHECK_EQ(ps.pipelines_failed, 0);

    /* Records planted without validation: refused before the driver, one
     * line each, the valid ones built. */
    plant(&s, imported, KILN_FOZ_STAMP, false);
    memset(&ls, 0, sizeof(ls));
    ls.needle = "is not valid SPIR-V";
    start(imported, vk, &ss, &ls);
    KT_CHECK_EQ(ss.records, GOOD + s.n);
    KT_CHECK_EQ(ss.pipelines_built, GOOD);
    KT_CHECK_EQ(ss.bad, s.n);
    KT_CHECK_EQ(ss.pipelines_failed, 0);
    KT_CHECK_EQ(ls.naming, s.n);
    /* The same through kiln_prepare's pipeline phase: planted under the
     * keys it gives them, every program is found cached and read back. */
    plant(&s, prepared, 0, true);
    memset(&lp, 0, sizeof(lp));
    lp.needle = "not built: its compute stage is not valid SPIR-V";
    prepare_set(&s, prepared, vk, &ps, &lp);
    KT_CHECK_EQ(ps.cached, GOOD + s.n);
    KT_CHECK_EQ(ps.pipelines_built, GOOD);
    KT_CHECK_EQ(ps.pipelines_failed, s.n);
    KT_CHECK_EQ(lp.naming, s.n);
    printf("%zu malformed variants: none reached the driver (import, prepare, planted "
           "records); %d valid built each time\n",
           s.n, GOOD);
    kiln_vk_destroy(vk);
    free_set(&s);
}

/* A module over 256 MiB costs that module only; the rest is imported. */
KT_CASE(oversized_module)
{
    struct set s;
    make_set(&s);
    const char *dir = kt_tmpdir();
    size_t big_n = (KILN_PACK_MAX_SPIRV_BYTES / 4) + 1;
    uint32_t *big = calloc(big_n, 4);
    KT_REQUIRE(big);
    big[0] = 0x07230203u; /* SPIR-V's magic: it decodes, and is too large */
    struct fw_module m[3] = {
        {s.good[0]->stages[0].words, s.good[0]->stages[0].nwords},
        {big, big_n},
        {s.good[1]->stages[0].words, s.good[1]->stages[0].nwords},
    };
    char foz[4200], cache[4200];
    snprintf(foz, sizeof(foz), "%s/big.foz", dir);
    snprintf(cache, sizeof(cache), "%s/cache", dir);
    uint64_t hashes[3];
    KT_REQUIRE_OK(fw_write_modules(foz, m, 3, hashes));
    free(big);
    struct kiln_cache *c = open_cache(cache, KILN_FOZ_STAMP);
    struct kiln_foz_import_report r = KILN_FOZ_IMPORT_REPORT_INIT;
    struct lines l = {.needle = "more than kiln stores"};
    kiln_log_set_sink(count_lines, &l);
    KT_CHECK_OK(kiln_foz_import(c, foz, &r));
    kiln_log_set_sink(NULL, NULL);
    printf("modules %" PRIu64 ", imported %" PRIu64 ", invalid %" PRIu64 ", undecodable %" PRIu64
           ", damaged %" PRIu64 "\n",
           r.modules, r.imported, r.invalid, r.undecodable, r.damaged);
    KT_CHECK_EQ(r.modules, 3);
    KT_CHECK_EQ(r.imported, 2);
    KT_CHECK_EQ(r.invalid, 1);
    KT_CHECK_EQ(l.naming, 1);
    KT_CHECK_OK(kiln_cache_find(c, kiln_foz_key(hashes[2]), NULL));
    KT_CHECK_EQ(kiln_cache_find(c, kiln_foz_key(hashes[1]), NULL), KILN_ENOTFOUND);
    kiln_cache_close(c);
    free_set(&s);
}

/* The value of "key": N in a JSON file (0 when absent). */
static uint64_t json_u64(const char *path, const char *key)
{
    static char buf[65536];
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;
    if (f)
        fclose(f);
    buf[n] = 0;
    char pat[64];
    snprintf(pat, sizeof(pat), "\"%s\":", key);
    const char *p = strstr(buf, pat);
    return p ? strtoull(p + strlen(pat), NULL, 10) : 0;
}

/* How many lines of the file at `path` contain `text`. */
static size_t count_in(const char *path, const char *text)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    char line[8192];
    size_t n = 0;
    while (fgets(line, sizeof(line), f))
        n += strstr(line, text) != NULL;
    fclose(f);
    return n;
}

/* How many lines of file `a` that contain `text` name a program ("program
 * " and 32 hex digits) that file `b` names too: one name per pipeline, the
 * import's and the start's. */
static size_t programs_named_in_both(const char *a, const char *text, const char *b)
{
    FILE *f = fopen(a, "r");
    if (!f)
        return 0;
    char line[8192], want[48];
    size_t n = 0;
    while (fgets(line, sizeof(line), f)) {
        const char *at = strstr(line, "program ");
        if (!strstr(line, text) || !at || strlen(at) < 40)
            continue;
        snprintf(want, sizeof(want), "%.40s", at);
        n += count_in(b, want) > 0;
    }
    fclose(f);
    return n;
}

/* Runs `kiln import foz --json` of `foz` into `cache`. @return its exit code. */
static int cli_import(const char *dir, const char *cache, const char *foz, const char *json)
{
    char cmd[16384];
    snprintf(cmd, sizeof(cmd), "'%s' import foz --cache '%s' --json '%s' > '%s' 2> '%s/err'",
             KILN_CLI, cache, foz, json, dir);
    int st = system(cmd);
    return st != -1 && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/*
 * kiln import foz on a real archive with one bad size field (in entry 6,
 * and in the last entry): exit 1, the skipped entry counted, every
 * pipeline that does not need it imported. Without the shared corpus, an archive written here.
 */
KT_CASE(cli_import_damaged)
{
    const char *dir = kt_tmpdir();
    char src[4200];
    FW_NEED(fw_archive("bloom.f93c6e96adcd7946.1.foz", src, sizeof(src)));
    FILE *f = fopen(src, "rb");
    KT_REQUIRE(f);
    static uint8_t data[1 << 22];
    size_t size = fread(data, 1, sizeof(data), f);
    fclose(f);
    KT_REQUIRE(size > 16 && size < sizeof(data));
    uint64_t off[512];
    size_t n = 0;
    for (uint64_t o = 16; o + 56 <= size && n < 512; n++) {
        off[n] = o;
        o += 56 + kiln__load_le32(data + o + 40);
    }
    KT_REQUIRE(n >= 7);

    char cache[4300], json[4300], bad[4300];
    snprintf(cache, sizeof(cache), "%s/clean", dir);
    snprintf(json, sizeof(json), "%s/out.json", dir);
    KT_CHECK_EQ(cli_import(dir, cache, src, json), 0);
    uint64_t all = json_u64(json, "records");
    KT_REQUIRE(all > 1);

    const size_t which[2] = {5, n - 1}; /* entry 6, and the last */
    for (size_t t = 0; t < 2; t++) {
        size_t k = which[t];
        /* Its tag is digits 8..23 of its name. */
        bool module = memcmp(data + off[k] + 8, "0000000000000004", 16) == 0;
        bool pipeline = memcmp(data + off[k] + 8, "0000000000000006", 16) == 0 ||
                        memcmp(data + off[k] + 8, "0000000000000007", 16) == 0;
        uint32_t s = kiln__load_le32(data + off[k] + 40);
        kiln__store_le32(data + off[k] + 40, s + 1);
        snprintf(bad, sizeof(bad), "%s/bad%zu.foz", dir, t);
        f = fopen(bad, "wb");
        KT_REQUIRE(f && fwrite(data, 1, size, f) == size);
        fclose(f);
        kiln__store_le32(data + off[k] + 40, s);
        snprintf(cache, sizeof(cache), "%s/cache%zu", dir, t);
        KT_CHECK_EQ(cli_import(dir, cache, bad, json), 1);
        KT_CHECK_EQ(json_u64(json, "entries_skipped"), 1);
        /* Whole pipelines are stored: a lost module (or layout, render
         * pass) costs each pipeline naming it, counted unreadable; a lost
         * pipeline entry costs that pipeline; every other one is stored. */
        uint64_t unreadable = json_u64(json, "unreadable");
        if (module)
            KT_CHECK(unreadable >= 1);
        KT_CHECK_EQ(json_u64(json, "records"), all - unreadable - (pipeline ? 1 : 0));
    }
}

/* Runs the kiln command with `args`, stdout to `json`, stderr to `err`.
 * @return its exit code, -1 for a signal. */
static int cli_run(const char *args, const char *json, const char *err)
{
    char cmd[32768];
    snprintf(cmd, sizeof(cmd), "'%s' %s > '%s' 2> '%s'", KILN_CLI, args, json, err);
    int st = system(cmd);
    int rc = st != -1 && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    if (rc != 0 && rc != 1) {
        /* Not an answer: show how it ended. */
        snprintf(cmd, sizeof(cmd), "tail -n 20 '%s'", err);
        if (system(cmd) != 0)
            printf("(cannot show %s)\n", err);
    }
    return rc;
}

/* Whether a variant breaks SPIR-V's framing or grammar, or has ids a
 * driver's tables cannot hold: such a module is refused for every kind of
 * program, recorded ones too (kiln_vk_check_spirv_structure). */
static bool malformed(const char *what)
{
    static const char *const kinds[] = {
        "wrong magic",           "garbage opcode",    "cut inside",
        "of length 0",           "one word too long", "a header alone",
        "shorter than a header", "trailing garbage",  "id bound"};
    for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++)
        if (strstr(what, kinds[k]))
            return true;
    return false;
}

/*
 * Recorded pipelines (a Fossilize archive of whole compute pipelines, one per
 * variant): what does not parse stays refused by kiln import foz, kiln
 * prepare --corpus and kiln start, as for kiln's own programs; a variant
 * that parses but breaks a semantic rule (the memory model before the
 * capabilities: refused for kiln's own programs by prepare_refuses) is
 * stored and built, one warning line each, counted as recorded_invalid.
 */
KT_CASE(recorded_pipelines)
{
    struct set s;
    make_set(&s);
    const char *dir = kt_tmpdir();
    /* Which variants parse: every malformed one is refused by the parse. */
    size_t parses = 0;
    bool order_parses = false;
    char why[256];
    for (size_t i = 0; i < s.n; i++) {
        int rc = kiln_vk_check_spirv_structure(s.words[i], s.nwords[i], why, sizeof(why));
        if (malformed(s.what[i]) && rc != KILN_EFORMAT)
            kt_fail(__FILE__, __LINE__, "variant %zu (%s) parses", i, s.what[i]);
        if (rc == KILN_OK) {
            printf("parses, breaks a rule: %s\n", s.what[i]);
            parses++;
            order_parses |= strcmp(s.what[i], "sections out of order") == 0;
        }
    }
    KT_REQUIRE(order_parses);
    for (size_t i = 0; i < GOOD; i++)
        KT_CHECK_OK(kiln_vk_check_spirv_structure(s.good[i]->stages[0].words,
                                                  s.good[i]->stages[0].nwords, why, sizeof(why)));

    struct fw_module m[GOOD + MAX_VARIANTS];
    modules_of(&s, m);
    char foz[4200], cache[4200], prepared[4200], json[4200], err[4200], args[16384];
    snprintf(foz, sizeof(foz), "%s/recorded.foz", dir);
    snprintf(cache, sizeof(cache), "%s/imported", dir);
    snprintf(prepared, sizeof(prepared), "%s/prepared", dir);
    snprintf(json, sizeof(json), "%s/out.json", dir);
    snprintf(err, sizeof(err), "%s/err", dir);
    KT_REQUIRE_OK(fw_write_module_pipelines(foz, m, GOOD + s.n, 0x7ec0000000000000ull));

    /* Import: the malformed ones skipped (exit 1), the others stored. */
    snprintf(args, sizeof(args), "import foz --json --cache '%s' '%s'", cache, foz);
    KT_CHECK_EQ(cli_run(args, json, err), 1);
    KT_CHECK_EQ(json_u64(json, "imported"), GOOD + parses);
    KT_CHECK_EQ(json_u64(json, "recorded_invalid"), parses);
    KT_CHECK_EQ(json_u64(json, "invalid") + json_u64(json, "unreadable"), s.n - parses);
    KT_CHECK_EQ(count_in(err, "imported though the SPIR-V validator refuses"), parses);
    char import_err[4300];
    snprintf(import_err, sizeof(import_err), "%s.import", err);
    KT_REQUIRE(rename(err, import_err) == 0);

    /* Start: every stored one built, the recorded-invalid ones counted.
     * lavapipe leaks compiling the out-of-order module and is unloaded
     * before LeakSanitizer can name it for tests/support/lsan.supp: under
     * ASan the commands that build run without leak checks (memory errors
     * still end them). */
    const char *asan = getenv("ASAN_OPTIONS");
    char *saved = asan ? strdup(asan) : NULL;
    char opts[1024];
    snprintf(opts, sizeof(opts), "%s%sdetect_leaks=0", asan ? asan : "", asan && *asan ? ":" : "");
    setenv("ASAN_OPTIONS", opts, 1);
    snprintf(args, sizeof(args), "start --json --cache '%s'", cache);
    int rc = cli_run(args, json, err);
    if (json_u64(json, "pipelines_built") == 0 && rc != 0) {
        printf("skipped: no Vulkan device to build on\n");
        free(saved);
        free_set(&s);
        exit(77);
    }
    KT_CHECK_EQ(rc, 0);
    KT_CHECK_EQ(json_u64(json, "pipelines_built"), GOOD + parses);
    KT_CHECK_EQ(json_u64(json, "recorded_invalid"), parses);
    KT_CHECK_EQ(json_u64(json, "bad"), 0);
    KT_CHECK_EQ(json_u64(json, "pipelines_failed"), 0);
    KT_CHECK_EQ(count_in(err, "built though its compute stage breaks a rule"), parses);
    /* The import named each of them as the start does. */
    KT_CHECK_EQ(programs_named_in_both(import_err, "imported though", err), parses);

    /* Prepare from the archive: the same, the malformed ones failed. */
    snprintf(args, sizeof(args), "prepare --json --jobs 2 --cache '%s' --corpus '%s'", prepared,
             foz);
    KT_CHECK_EQ(cli_run(args, json, err), 1);
    KT_CHECK_EQ(json_u64(json, "pipelines_built"), GOOD + parses);
    KT_CHECK_EQ(json_u64(json, "recorded_invalid"), parses);
    KT_CHECK_EQ(json_u64(json, "pipelines_failed"), 0);
    KT_CHECK_EQ(count_in(err, "stored though its compute stage"), parses);
    if (saved)
        setenv("ASAN_OPTIONS", saved, 1);
    else
        unsetenv("ASAN_OPTIONS");
    free(saved);
    printf("%zu variants through recorded pipelines: %zu malformed refused, %zu that parse "
           "built with a warning\n",
           s.n, s.n - parses, parses);
    free_set(&s);
}

KT_MAIN(KT_ENTRY(import_refuses), KT_ENTRY(prepare_refuses), KT_ENTRY(start_builds_only_valid),
        KT_ENTRY(oversized_module), KT_ENTRY(cli_import_damaged), KT_ENTRY(recorded_pipelines))
