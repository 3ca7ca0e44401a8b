/*
 * test_foz_export.c - the archive writer (kiln_foz_writer) and the export
 * of a cache's pipelines (kiln_foz_export).
 *
 * Everything written is read back through the reader that the fuzz target
 * covers (kiln_foz_open, kiln_foz_index_create), never through the writer's
 * own view: an export keeps every pipeline when the archive, read as any
 * archive is, gives back the same pipelines under the same keys.
 */
#ifndef _WIN32
#include <vulkan/vulkan.h> /* first: declares foz.h's Vulkan part (the builder) */
#endif

#include "kiln_test.h"
#include "kiln_internal.h"
#include "faultio.h"
#include "foz_corpus.h"
#include "foz_writer.h"
#ifndef _WIN32
#include "prep_fixture.h"
#endif
#include "kiln/foz.h"
#include "kiln-tools/gen.h"
#include "kiln-tools/glsl.h"
#include "kiln.h"

#include <dirent.h>
#include <sys/stat.h>

/* ---------------------------------------------------------------------------
 * Helpers
 * ------------------------------------------------------------------------ */

/* KT_REQUIRE for helpers that return a value: the case ends here. */
#define MUST(cond)                                              \
    do {                                                        \
        if (!(cond)) {                                          \
            kt_fail(__FILE__, __LINE__, "required: %s", #cond); \
            exit(1);                                            \
        }                                                       \
    } while (0)

static bool exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

/* The files in `dir` whose name contains `part`. */
static size_t files_with(const char *dir, const char *part)
{
    DIR *d = opendir(dir);
    MUST(d != NULL);
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        n += strstr(e->d_name, part) != NULL;
    closedir(d);
    return n;
}

static uint8_t *read_file(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    MUST(f != NULL);
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *p = malloc(len > 0 ? (size_t)len : 1);
    MUST(p != NULL);
    MUST(fread(p, 1, (size_t)len, f) == (size_t)len);
    fclose(f);
    *n = (size_t)len;
    return p;
}

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "wb");
    MUST(f != NULL);
    fputs(text, f);
    fclose(f);
}

/* A case's folder, its cache folder and its archive's path. */
struct paths {
    char dir[4096], cache[4200], again[4200], out[4200];
};

static void case_paths(struct paths *p, const char *archive)
{
    snprintf(p->dir, sizeof(p->dir), "%s", kt_tmpdir());
    snprintf(p->cache, sizeof(p->cache), "%s/cache", p->dir);
    snprintf(p->again, sizeof(p->again), "%s/again", p->dir);
    snprintf(p->out, sizeof(p->out), "%s/%s", p->dir, archive);
}

/* A few SPIR-V-looking words (the writer does not read them). */
static void some_words(uint32_t *w, size_t n, uint32_t seed)
{
    w[0] = 0x07230203u;
    for (size_t i = 1; i < n; i++)
        w[i] = seed * 2654435761u + (uint32_t)i * (i % 3 ? 1u : 0x10000001u);
}

/* The entries a reader delivers, checked whole. */
static size_t read_all(struct kiln_foz *foz, uint64_t *modules)
{
    struct kiln_foz_entry e;
    size_t n = 0;
    int rc;
    *modules = 0;
    while ((rc = kiln_foz_next(foz, &e)) != 0) {
        MUST(rc == 1);
        n++;
        *modules += e.tag == KILN_FOZ_TAG_SHADER_MODULE;
    }
    struct kiln_foz_stats st = KILN_FOZ_STATS_INIT;
    kiln_foz_get_stats(foz, &st);
    KT_CHECK_EQ(st.damaged, 0);
    KT_CHECK(!st.truncated);
    KT_CHECK_EQ(st.resyncs, 0);
    KT_CHECK_EQ(st.version, KILN_FOZ_WRITE_VERSION);
    return n;
}

/* Writes the same small archive through `w`: three modules (one twice, one
 * plain), a pipeline. @return the entries it says it wrote. */
static uint64_t fill(struct kiln_foz_writer *w, uint32_t words[3][64])
{
    for (uint32_t m = 0; m < 3; m++) {
        some_words(words[m], 64, m + 1);
        KT_CHECK_EQ(kiln_foz_writer_add_module(w, 0x100 + m, words[m], 64, 0,
                                               m == 2 ? KILN_FOZ_ENTRY_PLAIN : 0),
                    1);
    }
    /* The same module again is no entry; other words under its hash are refused. */
    KT_CHECK_EQ(kiln_foz_writer_add_module(w, 0x100, words[0], 64, 0, 0), 0);
    KT_CHECK_EQ(kiln_foz_writer_add_module(w, 0x100, words[1], 64, 0, 0), KILN_EEXIST);
    static const char pipe[] = "{\"version\":6,\"computePipelines\":{\"00000000000000aa\":"
                               "{\"flags\":0,\"stage\":{\"flags\":0,\"stage\":32,\"module\":"
                               "\"0000000000000100\",\"name\":\"main\"}}}}";
    KT_CHECK_EQ(kiln_foz_writer_add(w, KILN_FOZ_TAG_COMPUTE_PIPELINE, 0xaa, pipe, strlen(pipe),
                                    KILN_FOZ_ENTRY_PLAIN),
                1);
    KT_CHECK_EQ(kiln_foz_writer_lookup(w, KILN_FOZ_TAG_COMPUTE_PIPELINE, 0xaa, pipe, strlen(pipe)),
                1);
    KT_CHECK_EQ(kiln_foz_writer_lookup(w, KILN_FOZ_TAG_COMPUTE_PIPELINE, 0xaa, "{}", 2),
                KILN_EEXIST);
    KT_CHECK_EQ(kiln_foz_writer_lookup(w, KILN_FOZ_TAG_COMPUTE_PIPELINE, 0xab, "{}", 2), 0);
    KT_CHECK(kiln_foz_writer_has(w, KILN_FOZ_TAG_SHADER_MODULE, 0x102));
    KT_CHECK(!kiln_foz_writer_has(w, KILN_FOZ_TAG_SHADER_MODULE, 0x103));
    KT_CHECK_EQ(kiln_foz_writer_add(w, KILN_FOZ_TAG_SAMPLER, 1, "{}", 2, 0x80), KILN_EINVAL);
    return kiln_foz_writer_entries(w);
}

/* ---------------------------------------------------------------------------
 * The writer
 * ------------------------------------------------------------------------ */

/* A memory archive and a file archive of the same entries are the same
 * bytes, and read back entry for entry, each module to its own words. */
KT_CASE(writer_reads_back)
{
    uint32_t words[3][64];
    struct kiln_foz_writer *mw = NULL;
    KT_REQUIRE_OK(kiln_foz_writer_create_memory(&mw));
    KT_CHECK_EQ(fill(mw, words), 4);
    uint64_t mbytes = 0;
    KT_REQUIRE_OK(kiln_foz_writer_finish(mw, &mbytes));
    KT_CHECK_EQ(kiln_foz_writer_finish(mw, NULL), KILN_EINVAL);
    size_t msize = 0;
    const uint8_t *mem = kiln_foz_writer_data(mw, &msize);
    KT_CHECK_EQ(msize, mbytes);

    char dir[4096], path[4200];
    snprintf(dir, sizeof(dir), "%s", kt_tmpdir());
    snprintf(path, sizeof(path), "%s/out.foz", dir);
    struct kiln_foz_writer *fw = NULL;
    KT_REQUIRE_OK(kiln_foz_writer_create(NULL, path, &fw));
    KT_CHECK_EQ(fill(fw, words), 4);
    /* Nothing at the path before finish: the archive is beside it. */
    KT_CHECK(!exists(path));
    KT_CHECK_EQ(files_with(dir, ".tmp-"), 1);
    size_t none = 1;
    KT_CHECK(kiln_foz_writer_data(fw, &none) == NULL && none == 0);
    uint64_t fbytes = 0;
    KT_REQUIRE_OK(kiln_foz_writer_finish(fw, &fbytes));
    kiln_foz_writer_destroy(fw);
    KT_CHECK_EQ(files_with(dir, ".tmp-"), 0);
    size_t n = 0;
    uint8_t *file = read_file(path, &n);
    KT_CHECK_EQ(n, fbytes);
    KT_CHECK(n == msize && memcmp(file, mem, n) == 0);
    free(file);

    struct kiln_foz *foz = NULL;
    KT_REQUIRE_OK(kiln_foz_open_memory(mem, msize, "memory", &foz));
    uint64_t modules;
    KT_CHECK_EQ(read_all(foz, &modules), 4);
    KT_CHECK_EQ(modules, 3);
    kiln_foz_close(foz);

    KT_REQUIRE_OK(kiln_foz_open(NULL, path, &foz));
    struct kiln_foz_index *idx = NULL;
    KT_REQUIRE_OK(kiln_foz_index_create(foz, &idx));
    for (uint32_t m = 0; m < 3; m++) {
        struct kiln_foz_module mod;
        KT_REQUIRE_OK(kiln_foz_index_module(idx, 0x100 + m, &mod));
        KT_CHECK(mod.word_count == 64 && memcmp(mod.words, words[m], sizeof(words[m])) == 0);
        kiln_foz_module_free(&mod);
    }
    const struct kiln_foz_pipeline_ref *refs;
    KT_CHECK_EQ(kiln_foz_index_pipelines(idx, &refs), 1);
    uint8_t *closure;
    size_t size;
    KT_CHECK_OK(kiln_foz_closure_make(idx, refs[0].tag, refs[0].hash, &closure, &size));
    kiln_foz_closure_free(closure);
    kiln_foz_index_destroy(idx);
    kiln_foz_close(foz);
    kiln_foz_writer_destroy(mw);

    /* Every word value takes its varint length, the largest too. */
    uint32_t edge[] = {0x07230203u, 0,        0x7f,       0x80,       0x3fff,     0x4000,
                       0x1fffff,    0x200000, 0x0fffffff, 0x10000000, 0xffffffffu};
    uint8_t *p;
    KT_REQUIRE_OK(kiln_foz_module_encode(7, edge, KILN_ARRAY_LEN(edge), 3, &p, &size));
    struct kiln_foz_entry e = {
        .tag = KILN_FOZ_TAG_SHADER_MODULE, .hash = 7, .data = p, .size = size};
    struct kiln_foz_module mod;
    KT_REQUIRE_OK(kiln_foz_decode_module(&e, &mod));
    KT_CHECK(mod.word_count == KILN_ARRAY_LEN(edge) && mod.flags == 3 &&
             memcmp(mod.words, edge, sizeof(edge)) == 0);
    kiln_foz_module_free(&mod);
    kiln_foz_payload_free(p);
    KT_CHECK_EQ(kiln_foz_module_encode(7, edge, 0, 0, &p, &size), KILN_ERANGE);
}

/* A writer that fails anywhere (open, a write, the sync, the rename)
 * leaves the destination as it was and no temporary file; one destroyed
 * unfinished leaves nothing either. */
KT_CASE(writer_failure_leaves_nothing)
{
    char dir[4096], path[4200];
    snprintf(dir, sizeof(dir), "%s", kt_tmpdir());
    snprintf(path, sizeof(path), "%s/out.foz", dir);
    write_text(path, "old");
    uint32_t words[3][64];

    struct kiln_foz_writer *w = NULL;
    KT_REQUIRE_OK(kiln_foz_writer_create(NULL, path, &w));
    KT_CHECK_EQ(fill(w, words), 4);
    kiln_foz_writer_destroy(w);
    KT_CHECK_EQ(files_with(dir, ".tmp-"), 0);

    static const unsigned kinds[] = {FAULTIO_OPEN, FAULTIO_WRITE, FAULTIO_SYNC, FAULTIO_RENAME};
    size_t failures = 0;
    for (size_t k = 0; k < KILN_ARRAY_LEN(kinds); k++) {
        for (uint64_t nth = 1;; nth++) {
            struct faultio f;
            faultio_init(&f);
            faultio_arm(&f, nth, kinds[k], KILN_ENOSPC, false);
            int rc = kiln_foz_writer_create(&f.io, path, &w);
            if (rc == 0) {
                /* Adds go on after a failed write (each returns it again);
                 * finish returns it. */
                for (uint32_t m = 0; m < 3; m++)
                    kiln_foz_writer_add_module(w, 0x100 + m, words[m], 64, 0, 0);
                rc = kiln_foz_writer_finish(w, NULL);
                kiln_foz_writer_destroy(w);
            }
            bool faulted = f.faults > 0;
            faultio_destroy(&f);
            KT_CHECK_EQ(files_with(dir, ".tmp-"), 0);
            size_t n;
            uint8_t *now = read_file(path, &n);
            if (rc < 0) {
                failures++;
                KT_CHECK(faulted);
                KT_CHECK(n == 3 && memcmp(now, "old", 3) == 0);
            } else {
                /* A folder sync that fails is only logged: the archive is whole. */
                KT_CHECK(!faulted || kinds[k] == FAULTIO_SYNC);
                KT_CHECK(n > 16 && memcmp(now,
                                          "\x81"
                                          "FOSSILIZEDB",
                                          12) == 0);
                write_text(path, "old");
            }
            free(now);
            if (!faulted)
                break;
        }
    }
    /* One open, at least one write, the file's sync, one rename. */
    KT_CHECK(failures >= 4);
}

/* ---------------------------------------------------------------------------
 * The export
 * ------------------------------------------------------------------------ */

/* Stores `progs` in a new cache at `dir` (kiln_prepare, no Vulkan). */
static void store(const char *dir, struct kiln_program **progs, size_t n, uint64_t stamp)
{
    struct kiln_program *arr = calloc(n, sizeof(*arr));
    MUST(arr != NULL);
    for (size_t i = 0; i < n; i++)
        arr[i] = *progs[i];
    struct kiln_program_array a = {.size = sizeof(a), .programs = arr, .count = n, .stamp = stamp};
    struct kiln_program_source src = kiln_program_source_array(&a);
    struct kiln_prepare_options o = KILN_PREPARE_OPTIONS_INIT;
    kiln_prepare_options_init(&o);
    o.cache_dir = dir;
    o.source = &src;
    o.no_vulkan = true;
    o.jobs = 2;
    struct kiln_prepare_summary s = KILN_PREPARE_SUMMARY_INIT;
    MUST(KILN_OK == kiln_prepare(&o, NULL, NULL, &s));
    free(arr);
}

static struct kiln_cache *open_cache(const char *dir)
{
    struct kiln_cache_options o = {.size = sizeof(o),
                                   .flags = KILN_CACHE_READ_ONLY | KILN_CACHE_ANY_STAMP};
    struct kiln_cache *c = NULL;
    MUST(KILN_OK == kiln_cache_open(dir, &o, &c));
    return c;
}

/* Every pipeline of the archive at `path` as a program (as an import makes
 * it), in *out. @return their count. */
static size_t read_programs(const char *path, struct kiln_program ***out, size_t *graphics)
{
    struct kiln_foz *foz = NULL;
    MUST(KILN_OK == kiln_foz_open(NULL, path, &foz));
    uint64_t modules;
    read_all(foz, &modules);
    struct kiln_foz_index *idx = NULL;
    MUST(KILN_OK == kiln_foz_index_create(foz, &idx));
    const struct kiln_foz_pipeline_ref *refs;
    size_t n = kiln_foz_index_pipelines(idx, &refs);
    *out = calloc(n ? n : 1, sizeof(**out));
    MUST(*out != NULL);
    *graphics = 0;
    for (size_t i = 0; i < n; i++) {
        MUST(KILN_OK == kiln_foz_pipeline_program(idx, &refs[i], &(*out)[i]));
        *graphics += refs[i].tag == KILN_FOZ_TAG_GRAPHICS_PIPELINE;
    }
    kiln_foz_index_destroy(idx);
    kiln_foz_close(foz);
    return n;
}

static void free_programs(struct kiln_program **p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        kiln_program_destroy(p[i]);
    free(p);
}

/* What a program's stages are, whatever its state: stage bits, entry and
 * words of each, digested. */
static struct kiln_key stages_digest(const struct kiln_program *p)
{
    struct kiln_key acc = {0, 0};
    for (unsigned i = 0; i < p->nstages; i++) {
        const struct kiln_program_stage *s = &p->stages[i];
        struct kiln_key w = kiln_hash128(s->words, s->nwords * 4);
        const char *entry = s->entry ? s->entry : "main";
        uint64_t v[6] = {acc.lo, acc.hi, s->src.stage,
                         w.lo,   w.hi,   kiln_hash64(entry, strlen(entry))};
        acc = kiln_hash128(v, sizeof(v));
    }
    return acc;
}

static int by_digest(const void *a, const void *b)
{
    const struct kiln_key *x = a, *y = b;
    if (x->hi != y->hi)
        return x->hi < y->hi ? -1 : 1;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/* A destination absent when the writer was made, and made by someone else
 * before the archive is finished (a cache another kiln creates at that
 * name): finish refuses (KILN_EEXIST) and leaves that file byte for byte,
 * whatever the timing; a destination that was there is replaced as
 * before. Fails where finish renames over whatever is there. */
KT_CASE(writer_never_replaces_a_newcomer)
{
    char dir[4096], path[4200];
    snprintf(dir, sizeof(dir), "%s", kt_tmpdir());
    snprintf(path, sizeof(path), "%s/programs.kpc", dir);
    uint32_t words[3][64];
    struct kiln_foz_writer *w = NULL;
    KT_REQUIRE_OK(kiln_foz_writer_create(NULL, path, &w));
    KT_CHECK_EQ(fill(w, words), 4);
    write_text(path, "a cache's records");
    KT_CHECK_EQ(kiln_foz_writer_finish(w, NULL), KILN_EEXIST);
    kiln_foz_writer_destroy(w);
    size_t n;
    uint8_t *now = read_file(path, &n);
    KT_CHECK(n == 17 && memcmp(now, "a cache's records", 17) == 0);
    free(now);
    KT_CHECK_EQ(files_with(dir, ".tmp-"), 0);
    /* There from the start: replaced by the whole archive. */
    KT_REQUIRE_OK(kiln_foz_writer_create(NULL, path, &w));
    KT_CHECK_EQ(fill(w, words), 4);
    KT_CHECK_OK(kiln_foz_writer_finish(w, NULL));
    kiln_foz_writer_destroy(w);
    now = read_file(path, &n);
    KT_CHECK(n > 16 && memcmp(now,
                              "\x81"
                              "FOSSILIZEDB",
                              12) == 0);
    free(now);
    /* kiln_io_rename_new itself, on the default table. */
    char a[4300], b[4300];
    snprintf(a, sizeof(a), "%s/a", dir);
    snprintf(b, sizeof(b), "%s/b", dir);
    write_text(a, "A");
    write_text(b, "B");
    KT_CHECK_EQ(kiln_io_rename_new(NULL, a, b), KILN_EEXIST);
    now = read_file(b, &n);
    KT_CHECK(n == 1 && now[0] == 'B');
    free(now);
    const struct kiln_io *io = kiln_io_default();
    KT_CHECK_OK(io->unlink(io, b));
    KT_CHECK_OK(kiln_io_rename_new(NULL, a, b));
    now = read_file(b, &n);
    KT_CHECK(n == 1 && now[0] == 'A');
    free(now);
    int fd;
    KT_CHECK_EQ(io->open(io, a, KILN_IO_READ, &fd), KILN_ENOENT);
}

/* The generated corpus exported: one pipeline per program, in kiln's own
 * layout and render pass (three objects in all), and every pipeline read
 * back carries its program's stages. */
KT_CASE(export_generated)
{
    enum { N = 24 };
    struct kiln_glsl *g = NULL;
    KT_REQUIRE_OK(kiln_glsl_create(KILN_GLSL_OPT_NONE, &g));
    struct kiln_program *progs[N];
    struct kiln_key want[N];
    for (uint32_t i = 0; i < N; i++) {
        KT_REQUIRE_OK(kiln_generate_spirv(kiln_glsl_translator(g), KILN_GENERATOR_DEFAULT_SEED, i,
                                          &progs[i]));
        want[i] = stages_digest(progs[i]);
    }
    struct paths P;
    case_paths(&P, "gen.foz");
    store(P.cache, progs, N, 0x9e7);

    struct kiln_cache *c = open_cache(P.cache);
    struct kiln_foz_export_report r = KILN_FOZ_EXPORT_REPORT_INIT;
    KT_REQUIRE_OK(kiln_foz_export(c, P.out, &r));
    kiln_cache_close(c);
    KT_CHECK_EQ(r.programs, N);
    KT_CHECK_EQ(r.pipelines, N);
    KT_CHECK_EQ(r.builtin, N);
    KT_CHECK_EQ(r.graphics, N / 2);
    KT_CHECK_EQ(r.compute, N / 2);
    KT_CHECK_EQ(r.modules, N / 2 * 3);
    KT_CHECK_EQ(r.objects, 3); /* set layout, pipeline layout, render pass */
    KT_CHECK_EQ(r.skipped + r.damaged + r.duplicates + r.lone, 0);
    KT_CHECK_EQ(r.entries, r.pipelines + r.modules + r.objects);
    KT_CHECK_EQ(files_with(P.dir, ".tmp-"), 0);

    struct kiln_program **back;
    size_t graphics;
    size_t n = read_programs(P.out, &back, &graphics);
    KT_CHECK_EQ(n, N);
    KT_CHECK_EQ(graphics, N / 2);
    struct kiln_key got[N];
    for (size_t i = 0; i < n && i < N; i++)
        got[i] = stages_digest(back[i]);
    qsort(want, N, sizeof(want[0]), by_digest);
    qsort(got, n < N ? n : N, sizeof(got[0]), by_digest);
    KT_CHECK(n == N && memcmp(want, got, sizeof(want)) == 0);

    /* The same cache gives the same archive. */
    size_t n1, n2;
    uint8_t *a1 = read_file(P.out, &n1);
    c = open_cache(P.cache);
    KT_REQUIRE_OK(kiln_foz_export(c, P.out, &r));
    kiln_cache_close(c);
    uint8_t *a2 = read_file(P.out, &n2);
    KT_CHECK(n1 == n2 && memcmp(a1, a2, n1) == 0);
    free(a1);
    free(a2);

    free_programs(back, n);
    for (uint32_t i = 0; i < N; i++)
        kiln_program_destroy(progs[i]);
    kiln_glsl_destroy(g);
}

/* An application's state, opaque to the export. */
static struct kiln_program *app_program(const struct kiln_program *from)
{
    struct kiln_program *p = NULL;
    MUST(KILN_OK == kiln_program_copy(from, &p));
    free(p->state);
    p->state_kind = KILN_STATE_APP;
    p->state = strdup("app bytes");
    p->state_size = 9;
    p->has_key = false;
    return p;
}

/* A built-in compute program of the first compute stage met. */
static struct kiln_program *builtin_program(struct kiln_program **progs, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (progs[i]->nstages != 1 || progs[i]->stages[0].src.stage != KILN_VK_STAGE_COMPUTE_BIT)
            continue;
        struct kiln_program *p = NULL;
        MUST(KILN_OK == kiln_program_create("builtin.comp", &p));
        p->nstages = 1;
        p->stages[0].src.stage = KILN_VK_STAGE_COMPUTE_BIT;
        p->stages[0].nwords = progs[i]->stages[0].nwords;
        p->stages[0].words = malloc(p->stages[0].nwords * 4);
        MUST(p->stages[0].words != NULL);
        memcpy(p->stages[0].words, progs[i]->stages[0].words, p->stages[0].nwords * 4);
        return p;
    }
    return NULL;
}

static bool has_key(struct kiln_key *keys, size_t n, struct kiln_key k)
{
    for (size_t i = 0; i < n; i++)
        if (kiln_key_equal(keys[i], k))
            return true;
    return false;
}

/* Whole Fossilize pipelines (every pipeline of the corpus's archives, or of
 * an archive written here without the corpus) stored as programs, with a
 * built-in one and an application's one beside them: the export, read back,
 * gives every Fossilize pipeline under its own key, the built-in one as a
 * pipeline of its own, and leaves the application's out, counted. */
KT_CASE(export_foz_pipelines)
{
    struct archives arcs;
    corpus_archives(&arcs);
    if (arcs.n == 0) {
        char path[4096];
        FW_NEED(fw_archive("none", path, sizeof(path)));
        arcs.path[arcs.n++] = strdup(path);
    }
    size_t cap = 64, n = 0;
    struct kiln_program **progs = calloc(cap, sizeof(*progs));
    KT_REQUIRE(progs != NULL);
    for (size_t a = 0; a < arcs.n; a++) {
        struct kiln_foz *foz = NULL;
        KT_REQUIRE_OK(kiln_foz_open(NULL, arcs.path[a], &foz));
        struct kiln_foz_index *idx = NULL;
        KT_REQUIRE_OK(kiln_foz_index_create(foz, &idx));
        const struct kiln_foz_pipeline_ref *refs;
        size_t np = kiln_foz_index_pipelines(idx, &refs);
        for (size_t i = 0; i < np; i++) {
            struct kiln_program *p = NULL;
            if (kiln_foz_pipeline_program(idx, &refs[i], &p) != 0)
                continue; /* texture3d's cut-off pipeline */
            if (n == cap) {
                cap *= 2;
                progs = realloc(progs, cap * sizeof(*progs));
                KT_REQUIRE(progs != NULL);
            }
            progs[n++] = p;
        }
        kiln_foz_index_destroy(idx);
        kiln_foz_close(foz);
    }
    free_archives(&arcs);
    KT_REQUIRE(n > 0);
    size_t nfoz = n;
    struct kiln_program *extra[2] = {builtin_program(progs, n), app_program(progs[0])};
    KT_REQUIRE(extra[0] != NULL);
    progs = realloc(progs, (n + 2) * sizeof(*progs));
    KT_REQUIRE(progs != NULL);
    progs[n++] = extra[0];
    progs[n++] = extra[1];

    struct paths P;
    case_paths(&P, "foz.foz");
    store(P.cache, progs, n, 0xf0e);

    /* What the cache holds: the pipelines SPIR-V's validator let through,
     * each key once (archives share pipelines). */
    struct kiln_cache *c = open_cache(P.cache);
    struct kiln_cache_entry *ents;
    size_t nrec;
    KT_REQUIRE_OK(kiln_cache_entries(c, &ents, &nrec));
    struct kiln_key *foz_keys = calloc(nrec, sizeof(*foz_keys));
    KT_REQUIRE(foz_keys != NULL);
    size_t nfozrec = 0;
    for (size_t i = 0; i < nrec; i++)
        for (size_t k = 0; k < nfoz; k++)
            if (kiln_key_equal(ents[i].key, progs[k]->key)) {
                foz_keys[nfozrec++] = ents[i].key;
                break;
            }
    KT_CHECK_EQ(nfozrec + 2, nrec);

    struct kiln_foz_export_report r = KILN_FOZ_EXPORT_REPORT_INIT;
    KT_REQUIRE_OK(kiln_foz_export(c, P.out, &r));
    kiln_cache_close(c);
    KT_CHECK_EQ(r.programs, nrec);
    KT_CHECK_EQ(r.foz + r.duplicates, nfozrec);
    KT_CHECK_EQ(r.duplicates, 0);
    KT_CHECK_EQ(r.builtin, 1);
    KT_CHECK_EQ(r.pipelines, nfozrec + 1);
    KT_CHECK_EQ(r.skipped_app, 1);
    KT_CHECK_EQ(r.skipped, 1);
    KT_CHECK(strstr(r.skip_reason, "application") != NULL);
    KT_CHECK_EQ(r.damaged + r.skipped_conflict + r.extra_dropped, 0);

    printf("%zu Fossilize pipelines read, %zu stored, %" PRIu64 " exported (%" PRIu64
           " graphics, %" PRIu64 " compute) with %" PRIu64 " modules and %" PRIu64 " objects\n",
           nfoz, nfozrec, r.pipelines, r.graphics, r.compute, r.modules, r.objects);
    struct kiln_program **back;
    size_t graphics;
    size_t nb = read_programs(P.out, &back, &graphics);
    KT_CHECK_EQ(nb, nfozrec + 1);
    struct kiln_key *got = calloc(nb ? nb : 1, sizeof(*got));
    KT_REQUIRE(got != NULL);
    for (size_t i = 0; i < nb; i++)
        got[i] = back[i]->key;
    /* Every Fossilize pipeline under its own key: its closure and modules
     * came back byte for byte. */
    size_t found = 0;
    for (size_t i = 0; i < nfozrec; i++)
        found += has_key(got, nb, foz_keys[i]);
    KT_CHECK_EQ(found, nfozrec);
    /* The built-in one is the one other: its own stage, in kiln's layout. */
    struct kiln_key builtin = stages_digest(extra[0]);
    size_t builtin_found = 0;
    for (size_t i = 0; i < nb; i++)
        if (!has_key(foz_keys, nfozrec, back[i]->key))
            builtin_found += kiln_key_equal(stages_digest(back[i]), builtin);
    KT_CHECK_EQ(builtin_found, 1);

    free(got);
    free_programs(back, nb);
    free(foz_keys);
    kiln_cache_entries_free(ents);
    free_programs(progs, n);
}

/* Two programs whose closures give one hash two contents: the export
 * writes the first (in key order) and leaves the other out whole, counted
 * and said, so the archive never names an object that is another. */
KT_CASE(export_conflict)
{
    char path[4096];
    FW_NEED(fw_archive("triangle.f93c6e96adcd7946.1.foz", path, sizeof(path)));
    struct kiln_foz *foz = NULL;
    KT_REQUIRE_OK(kiln_foz_open(NULL, path, &foz));
    struct kiln_foz_index *idx = NULL;
    KT_REQUIRE_OK(kiln_foz_index_create(foz, &idx));
    const struct kiln_foz_pipeline_ref *refs;
    KT_REQUIRE(kiln_foz_index_pipelines(idx, &refs) > 0);
    struct kiln_program *progs[2] = {NULL, NULL};
    KT_REQUIRE_OK(kiln_foz_pipeline_program(idx, &refs[0], &progs[0]));
    kiln_foz_index_destroy(idx);
    kiln_foz_close(foz);
    /* The first object of the closure (its layout, or the pipeline) gets a
     * member more, under the same hash. */
    KT_REQUIRE_OK(kiln_program_copy(progs[0], &progs[1]));
    const char *text = progs[0]->state;
    const char *at = strstr(text, "\"flags\":0");
    KT_REQUIRE(at != NULL);
    static const char more[] = ",\"kilnTest\":1";
    size_t head = (size_t)(at - text) + strlen("\"flags\":0");
    char *changed = malloc(progs[0]->state_size + sizeof(more));
    KT_REQUIRE(changed != NULL);
    memcpy(changed, text, head);
    memcpy(changed + head, more, sizeof(more) - 1);
    memcpy(changed + head + sizeof(more) - 1, text + head, progs[0]->state_size - head);
    free(progs[1]->state);
    progs[1]->state = changed;
    progs[1]->state_size = progs[0]->state_size + sizeof(more) - 1;
    struct kiln_foz_module mods[KILN_FOZ_MAX_STAGES];
    for (unsigned i = 0; i < progs[1]->nstages; i++)
        mods[i] = (struct kiln_foz_module){.words = progs[1]->stages[i].words,
                                           .word_count = progs[1]->stages[i].nwords};
    KT_REQUIRE_OK(kiln_foz_pipeline_key(progs[1]->state, progs[1]->state_size, mods,
                                        progs[1]->nstages, &progs[1]->key));
    KT_REQUIRE(!kiln_key_equal(progs[0]->key, progs[1]->key));

    struct paths P;
    case_paths(&P, "conflict.foz");
    store(P.cache, progs, 2, 0xc0f);
    struct kiln_cache *c = open_cache(P.cache);
    KT_CHECK_EQ(kiln_cache_count(c), 2);
    struct kiln_foz_export_report r = KILN_FOZ_EXPORT_REPORT_INIT;
    KT_REQUIRE_OK(kiln_foz_export(c, P.out, &r));
    kiln_cache_close(c);
    KT_CHECK_EQ(r.pipelines, 1);
    KT_CHECK_EQ(r.foz, 1);
    KT_CHECK_EQ(r.skipped_conflict, 1);
    KT_CHECK_EQ(r.skipped, 1);
    KT_CHECK(strstr(r.skip_reason, "has the hash of another one already written") != NULL);
    struct kiln_program **back;
    size_t graphics;
    size_t n = read_programs(P.out, &back, &graphics);
    KT_CHECK_EQ(n, 1);
    KT_CHECK(n == 1 && (kiln_key_equal(back[0]->key, progs[0]->key) ||
                        kiln_key_equal(back[0]->key, progs[1]->key)));
    free_programs(back, n);
    kiln_program_destroy(progs[0]);
    kiln_program_destroy(progs[1]);
}

/* Nothing that makes a pipeline: no archive. */
KT_CASE(export_nothing)
{
    struct paths P;
    case_paths(&P, "none.foz");
    struct kiln_cache_options o = {.size = sizeof(o), .stamp = 5, .flags = KILN_CACHE_CREATE};
    struct kiln_cache *c = NULL;
    KT_REQUIRE(kt_mkdir(P.cache) == 0);
    KT_REQUIRE_OK(kiln_cache_open(P.cache, &o, &c));
    struct kiln_foz_export_report r = KILN_FOZ_EXPORT_REPORT_INIT;
    KT_CHECK_EQ(kiln_foz_export(c, P.out, &r), KILN_ENOTFOUND);
    KT_CHECK_EQ(r.programs, 0);
    kiln_cache_close(c);
    KT_CHECK(!exists(P.out));
    KT_CHECK_EQ(files_with(P.dir, ".tmp-"), 0);
}

#ifndef _WIN32
/* Prepares `progs` on `vk` into a new cache at `dir` with the Fossilize
 * builder beside kiln's own. */
static void prepare_on(struct kiln_vk *vk, const char *dir, struct kiln_program **progs, size_t n,
                       struct kiln_prepare_summary *s)
{
    struct kiln_program *arr = calloc(n, sizeof(*arr));
    MUST(arr != NULL);
    for (size_t i = 0; i < n; i++)
        arr[i] = *progs[i];
    struct kiln_program_array a = {.size = sizeof(a), .programs = arr, .count = n, .stamp = 0xb17d};
    struct kiln_program_source src = kiln_program_source_array(&a);
    struct kiln_builder fb = KILN_BUILDER_INIT;
    MUST(KILN_OK == kiln_foz_kiln_builder_create(NULL, &fb));
    struct kiln_prepare_options o = KILN_PREPARE_OPTIONS_INIT;
    kiln_prepare_options_init(&o);
    o.cache_dir = dir;
    o.source = &src;
    o.jobs = 2;
    o.vk = vk;
    o.builders = &fb;
    o.nbuilders = 1;
    MUST(KILN_OK == kiln_prepare(&o, NULL, NULL, s));
    kiln_foz_kiln_builder_destroy(&fb);
    free(arr);
}

/* The generated corpus exported, made programs again (as an import of the
 * archive makes them) and prepared: the Fossilize builder builds as many
 * pipelines, in the exported layouts and render pass, as kiln's own builder
 * builds from the generated programs. */
KT_CASE(export_prepared)
{
    enum { N = 16 };
    struct kiln_vk *vk = pf_vk(NULL);
    struct kiln_glsl *g = NULL;
    KT_REQUIRE_OK(kiln_glsl_create(KILN_GLSL_OPT_NONE, &g));
    struct kiln_program *progs[N];
    for (uint32_t i = 0; i < N; i++)
        KT_REQUIRE_OK(kiln_generate_spirv(kiln_glsl_translator(g), KILN_GENERATOR_DEFAULT_SEED, i,
                                          &progs[i]));
    struct paths P;
    case_paths(&P, "gen.foz");

    struct kiln_prepare_summary s = KILN_PREPARE_SUMMARY_INIT;
    prepare_on(vk, P.cache, progs, N, &s);
    uint64_t builtin_built = s.kinds[KILN_STATE_BUILTIN].built;
    KT_CHECK_EQ(builtin_built, N);

    struct kiln_cache *c = open_cache(P.cache);
    struct kiln_foz_export_report r = KILN_FOZ_EXPORT_REPORT_INIT;
    KT_REQUIRE_OK(kiln_foz_export(c, P.out, &r));
    kiln_cache_close(c);
    KT_CHECK_EQ(r.pipelines, N);

    struct kiln_program **back;
    size_t graphics;
    size_t n = read_programs(P.out, &back, &graphics);
    KT_CHECK_EQ(n, N);
    prepare_on(vk, P.again, back, n, &s);
    const struct kiln_kind_counts *k = &s.kinds[KILN_STATE_FOZ];
    KT_CHECK_EQ(k->built, builtin_built);
    KT_CHECK_EQ(k->skipped + k->failed, 0);
    KT_CHECK_EQ(s.kinds[KILN_STATE_BUILTIN].built, 0);
    printf("%" PRIu64 " pipelines built by kiln's builder, %" PRIu64
           " from the exported archive by the Fossilize builder\n",
           builtin_built, k->built);

    free_programs(back, n);
    for (uint32_t i = 0; i < N; i++)
        kiln_program_destroy(progs[i]);
    kiln_glsl_destroy(g);
    kiln_vk_destroy(vk);
}
#endif

/* The Vulkan case is POSIX only (tests/prep's fixture). */
#ifdef _WIN32
#define VULKAN_CASES
#else
#define VULKAN_CASES KT_ENTRY(export_prepared),
#endif

KT_MAIN(VULKAN_CASES KT_ENTRY(writer_reads_back), KT_ENTRY(writer_failure_leaves_nothing),
        KT_ENTRY(writer_never_replaces_a_newcomer), KT_ENTRY(export_generated),
        KT_ENTRY(export_foz_pipelines), KT_ENTRY(export_conflict), KT_ENTRY(export_nothing))
