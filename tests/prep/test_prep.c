/*
 * test_prep.c - translators, the generated corpus and corpus folders.
 *
 * SPIR-V validity is checked with spirv-val (spirv-tools), run on a
 * temporary file, against the Vulkan 1.1 environment the built-in
 * translator targets.
 */
#include "kiln_test.h"
#include "kiln_internal.h"
#include "kiln/foz.h"
#include "kiln-tools/gen.h"
#include "kiln-tools/glsl.h"

#include <pthread.h>
#include <sys/stat.h>

/* ---- helpers ------------------------------------------------------------ */

struct captured {
    int count;
    char last[2048];
};

static void capture(void *user, enum kiln_log_level level, const char *module, const char *line)
{
    struct captured *c = user;
    (void)level;
    (void)module;
    c->count++;
    snprintf(c->last, sizeof(c->last), "%s", line);
}

static int write_file(const char *dir, const char *name, const void *data, size_t n)
{
    char path[4200];
    if (kiln__path_join(path, sizeof(path), dir, name) < 0)
        return -1;
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    size_t put = fwrite(data, 1, n, f);
    return fclose(f) == 0 && put == n ? 0 : -1;
}

/* Runs spirv-val on the words. @return its exit status (0: valid). */
static int spirv_val(const uint32_t *words, size_t nwords)
{
    char dir[4200], path[4200], cmd[4400];
    snprintf(dir, sizeof(dir), "%s", kt_tmpdir()); /* a fresh folder each call */
    if (kiln__path_join(path, sizeof(path), dir, "m.spv") < 0 ||
        write_file(dir, "m.spv", words, nwords * 4) < 0)
        return -1;
    snprintf(cmd, sizeof(cmd), "spirv-val --target-env vulkan1.1 '%s'", path);
    int rc = system(cmd);
    if (rc != 0 && system("command -v spirv-val >/dev/null 2>&1") != 0)
        fprintf(stderr, "spirv-val not found: install spirv-tools (scripts/deps.sh test)\n");
    return rc;
}

static const char comp_src[] = "#version 450\n"
                               "layout(local_size_x = 64) in;\n"
                               "layout(std430, set = 0, binding = 0) buffer B { uint w[]; } b;\n"
                               "void main() { b.w[gl_GlobalInvocationID.x] *= 3u; }\n";
static const char vert_src[] =
    "#version 450\n"
    "layout(location = 0) out vec4 c;\n"
    "void main() { c = vec4(1.0); gl_Position = vec4(float(gl_VertexIndex)); }\n";
static const char frag_src[] = "#version 450\n"
                               "layout(location = 0) in vec4 c;\n"
                               "layout(location = 0) out vec4 o;\n"
                               "void main() { o = c * 0.5; }\n";
static const char broken_src[] = "#version 450\nvoid main() { undeclared_thing = 1; }\n";

static struct kiln_source src_of(uint32_t stage, const char *text, const char *name)
{
    return (struct kiln_source){.stage = stage, .text = text, .size = strlen(text), .name = name};
}

/* ---- translators -------------------------------------------------------- */

KT_CASE(stage_names)
{
    KT_CHECK(strcmp(kiln_vk_stage_name(KILN_VK_STAGE_COMPUTE_BIT), "compute") == 0);
    KT_CHECK(strcmp(kiln_vk_stage_name(KILN_VK_STAGE_VERTEX_BIT), "vertex") == 0);
    KT_CHECK(strcmp(kiln_vk_stage_name(KILN_VK_STAGE_FRAGMENT_BIT), "fragment") == 0);
    KT_CHECK(strcmp(kiln_vk_stage_name(KILN_VK_STAGE_GEOMETRY_BIT), "geometry") == 0);
    KT_CHECK(strcmp(kiln_vk_stage_name(0x40), "task") == 0);
    KT_CHECK(strcmp(kiln_vk_stage_name(0), "none") == 0);
    KT_CHECK(strcmp(kiln_vk_stage_name(KILN_VK_STAGE_VERTEX_BIT | KILN_VK_STAGE_FRAGMENT_BIT),
                    "several") == 0);
    KT_CHECK(strcmp(kiln_vk_stage_name(0x40000000u), "?") == 0);
}

KT_CASE(glsl_each_stage)
{
    struct kiln_glsl *glsl;
    KT_REQUIRE_OK(kiln_glsl_create(KILN_GLSL_OPT_PERFORMANCE, &glsl));
    const struct kiln_translator *t = kiln_glsl_translator(glsl);
    KT_REQUIRE(t != NULL);
    KT_CHECK(t->stamp != 0);
    const struct kiln_source srcs[] = {src_of(KILN_VK_STAGE_COMPUTE_BIT, comp_src, "t.comp"),
                                       src_of(KILN_VK_STAGE_VERTEX_BIT, vert_src, "t.vert"),
                                       src_of(KILN_VK_STAGE_FRAGMENT_BIT, frag_src, "t.frag")};
    for (size_t i = 0; i < KILN_ARRAY_LEN(srcs); i++) {
        uint32_t *words = NULL;
        size_t n = 0;
        KT_CHECK_OK(kiln_translate(t, &srcs[i], &words, &n));
        KT_REQUIRE(words != NULL && n >= 5);
        KT_CHECK_EQ(words[0], 0x07230203u);
        KT_CHECK_EQ(words[1], 0x00010300u); /* SPIR-V 1.3 for Vulkan 1.1 */
        KT_CHECK_EQ(spirv_val(words, n), 0);
        kiln_words_free(words);
    }
    /* Another optimization level is another stamp: its SPIR-V differs. */
    struct kiln_glsl *glsl0;
    KT_REQUIRE_OK(kiln_glsl_create(KILN_GLSL_OPT_NONE, &glsl0));
    KT_CHECK(kiln_glsl_translator(glsl0)->stamp != t->stamp);
    kiln_glsl_destroy(glsl0);
    kiln_glsl_destroy(glsl);
    kiln_glsl_destroy(NULL);
}

KT_CASE(glsl_rejects_broken)
{
    struct kiln_glsl *glsl;
    KT_REQUIRE_OK(kiln_glsl_create(KILN_GLSL_OPT_NONE, &glsl));
    struct captured c = {0};
    kiln_log_set_sink(capture, &c);
    struct kiln_source s = src_of(KILN_VK_STAGE_FRAGMENT_BIT, broken_src, "prog7.frag");
    uint32_t *words = (uint32_t *)&c; /* must be reset to NULL */
    size_t n = 99;
    KT_CHECK_EQ(kiln_translate(kiln_glsl_translator(glsl), &s, &words, &n), KILN_ETRANSLATE);
    KT_CHECK(words == NULL && n == 0);
    /* One line naming the program, its stage and shaderc's message. */
    KT_CHECK_EQ(c.count, 1);
    KT_CHECK(strstr(c.last, "prog7.frag") != NULL);
    KT_CHECK(strstr(c.last, "fragment") != NULL);
    KT_CHECK(strstr(c.last, "undeclared_thing") != NULL);
    KT_CHECK(strchr(c.last, '\n') == NULL);
    /* A wrong stage for the text fails the same way. */
    struct kiln_source s2 = src_of(KILN_VK_STAGE_COMPUTE_BIT, frag_src, "wrong.comp");
    KT_CHECK_EQ(kiln_translate(kiln_glsl_translator(glsl), &s2, &words, &n), KILN_ETRANSLATE);
    KT_CHECK_EQ(c.count, 2);
    kiln_log_set_sink(NULL, NULL);
    kiln_glsl_destroy(glsl);
}

/* A caller's translator that hands out its own buffers and counts what it
 * gets back. */
struct own_translator {
    int made, released;
    int mode; /* 0 good, 1 not SPIR-V, 2 fails with a message */
};

static int own_translate(void *user, const struct kiln_source *src, uint32_t **words,
                         size_t *nwords)
{
    struct own_translator *o = user;
    (void)src;
    if (o->mode == 2) {
        kiln_translate_set_error("guest opcode 0x%x\nis unknown", 0x5f);
        return KILN_ETRANSLATE;
    }
    uint32_t *w = calloc(8, sizeof(uint32_t));
    if (!w)
        return KILN_ENOMEM;
    w[0] = o->mode == 1 ? 0xdeadbeefu : 0x07230203u;
    w[1] = 0x00010300u;
    w[5] = 42;
    o->made++;
    *words = w;
    *nwords = 8;
    return 0;
}

static void own_release(void *user, uint32_t *words)
{
    struct own_translator *o = user;
    o->released++;
    free(words);
}

KT_CASE(own_translator)
{
    struct own_translator o = {0};
    struct kiln_translator t = {.size = sizeof(t),
                                .translate = own_translate,
                                .release = own_release,
                                .user = &o,
                                .stamp = 1,
                                .name = "mine"};
    struct kiln_source s = src_of(KILN_VK_STAGE_COMPUTE_BIT, "guest bytes", "guest-17");
    uint32_t *words;
    size_t n;
    KT_REQUIRE_OK(kiln_translate(&t, &s, &words, &n));
    /* kiln copied the words and gave the translator's buffer back. */
    KT_CHECK_EQ(o.made, 1);
    KT_CHECK_EQ(o.released, 1);
    KT_CHECK_EQ(n, 8);
    KT_CHECK_EQ(words[5], 42);
    kiln_words_free(words);

    struct captured c = {0};
    kiln_log_set_sink(capture, &c);
    o.mode = 1;
    KT_CHECK_EQ(kiln_translate(&t, &s, &words, &n), KILN_ETRANSLATE);
    KT_CHECK_EQ(o.released, 2); /* released even when rejected */
    KT_CHECK(strstr(c.last, "guest-17") != NULL && strstr(c.last, "magic") != NULL);
    o.mode = 2;
    KT_CHECK_EQ(kiln_translate(&t, &s, &words, &n), KILN_ETRANSLATE);
    KT_CHECK(strstr(c.last, "guest-17") != NULL);
    KT_CHECK(strstr(c.last, "mine") != NULL);
    KT_CHECK(strstr(c.last, "guest opcode 0x5f is unknown") != NULL);
    KT_CHECK_EQ(c.count, 2);
    kiln_log_set_sink(NULL, NULL);
    KT_CHECK_EQ(kiln_translate(NULL, &s, &words, &n), KILN_EINVAL);
}

struct thread_job {
    const struct kiln_translator *t;
    int rc;
    uint64_t hash;
};

static void *translate_thread(void *arg)
{
    struct thread_job *j = arg;
    j->hash = 0;
    for (uint32_t i = 1; i < 4 && j->rc == 0; i += 2) {
        struct kiln_program *p;
        j->rc = kiln_generate_spirv(j->t, 99, i, &p);
        if (j->rc == 0) {
            for (unsigned s = 0; s < p->nstages; s++)
                j->hash ^= kiln_hash64(p->stages[s].words, p->stages[s].nwords * 4) + s;
            kiln_program_destroy(p);
        }
    }
    return NULL;
}

/* One translator on four threads at once gives what it gives on one. */
KT_CASE(glsl_threads)
{
    struct kiln_glsl *glsl;
    KT_REQUIRE_OK(kiln_glsl_create(KILN_GLSL_OPT_NONE, &glsl));
    struct thread_job one = {.t = kiln_glsl_translator(glsl)};
    translate_thread(&one);
    KT_REQUIRE_OK(one.rc);
    struct thread_job jobs[4];
    pthread_t th[4];
    for (int i = 0; i < 4; i++) {
        jobs[i] = (struct thread_job){.t = kiln_glsl_translator(glsl)};
        KT_REQUIRE(pthread_create(&th[i], NULL, translate_thread, &jobs[i]) == 0);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        KT_CHECK_OK(jobs[i].rc);
        KT_CHECK(jobs[i].hash == one.hash);
    }
    kiln_glsl_destroy(glsl);
}

/* ---- the generator ------------------------------------------------------ */

static bool same_text(const struct kiln_program *a, const struct kiln_program *b)
{
    if (a->nstages != b->nstages || strcmp(a->name, b->name) != 0)
        return false;
    for (unsigned i = 0; i < a->nstages; i++)
        if (a->stages[i].src.size != b->stages[i].src.size ||
            memcmp(a->stages[i].src.text, b->stages[i].src.text, a->stages[i].src.size) != 0)
            return false;
    return true;
}

KT_CASE(generate_deterministic)
{
    struct kiln_glsl *glsl;
    KT_REQUIRE_OK(kiln_glsl_create(KILN_GLSL_OPT_NONE, &glsl));
    const struct kiln_translator *t = kiln_glsl_translator(glsl);
    for (uint32_t index = 0; index < 2; index++) {
        struct kiln_program *a, *b, *next, *other_seed;
        KT_REQUIRE_OK(kiln_generate_spirv(t, 7, index, &a));
        KT_REQUIRE_OK(kiln_generate_spirv(t, 7, index, &b));
        KT_REQUIRE_OK(kiln_generate_program(7, index + 2, &next));
        KT_REQUIRE_OK(kiln_generate_program(8, index, &other_seed));
        KT_CHECK_EQ(a->nstages, index % 2 == 0 ? 1 : 2);
        KT_CHECK_EQ(a->stages[0].src.stage,
                    index % 2 == 0 ? KILN_VK_STAGE_COMPUTE_BIT : KILN_VK_STAGE_VERTEX_BIT);
        KT_CHECK(same_text(a, b));
        for (unsigned s = 0; s < a->nstages; s++) {
            KT_CHECK_EQ(a->stages[s].nwords, b->stages[s].nwords);
            KT_CHECK(memcmp(a->stages[s].words, b->stages[s].words, a->stages[s].nwords * 4) == 0);
            KT_CHECK(strstr(a->stages[s].src.name, a->name) == a->stages[s].src.name);
        }
        /* Same kind of program, different index or seed: different text. */
        KT_CHECK_EQ(next->nstages, a->nstages);
        KT_CHECK(!same_text(a, next));
        KT_CHECK(strcmp(other_seed->name, a->name) == 0);
        KT_CHECK(!same_text(a, other_seed));
        kiln_program_destroy(a);
        kiln_program_destroy(b);
        kiln_program_destroy(next);
        kiln_program_destroy(other_seed);
    }
    /* The text is fixed for a seed, index and KILN_GENERATOR_VERSION on
     * every platform and compiler: a change here needs a new version. */
    const uint64_t golden[3] = {0x468a94edd76cb515u, 0x149f2ba053db76ebu, 0x9d46ef58230b7412u};
    for (uint32_t index = 0, k = 0; index < 2; index++) {
        struct kiln_program *g;
        KT_REQUIRE_OK(kiln_generate_program(KILN_GENERATOR_DEFAULT_SEED, index, &g));
        for (unsigned s = 0; s < g->nstages; s++, k++)
            if (kiln_hash64(g->stages[s].src.text, g->stages[s].src.size) != golden[k])
                kt_fail(
                    __FILE__, __LINE__, "%s: text changed (hash %016llx)", g->stages[s].src.name,
                    (unsigned long long)kiln_hash64(g->stages[s].src.text, g->stages[s].src.size));
        kiln_program_destroy(g);
    }

    /* Known names, and the fixed interface every generated program has. */
    struct kiln_program *p;
    KT_REQUIRE_OK(kiln_generate_program(KILN_GENERATOR_DEFAULT_SEED, 12, &p));
    KT_CHECK(strcmp(p->name, "gen-000012-compute") == 0);
    KT_CHECK(strstr(p->stages[0].src.text, "set = 0, binding = 0") != NULL);
    KT_CHECK(strstr(p->stages[0].src.text, "local_size_x = 64") != NULL);
    kiln_program_destroy(p);
    KT_REQUIRE_OK(kiln_generate_program(KILN_GENERATOR_DEFAULT_SEED, 13, &p));
    KT_CHECK(strcmp(p->name, "gen-000013-graphics") == 0);
    KT_CHECK(strcmp(p->stages[1].src.name, "gen-000013-graphics.frag") == 0);
    KT_CHECK(strstr(p->stages[1].src.text, "layout(location = 0) out vec4 o_color;") != NULL);
    KT_CHECK(strstr(p->stages[0].src.text, ") in ") == NULL); /* no vertex inputs */
    kiln_program_destroy(p);
    kiln_glsl_destroy(glsl);
}

/* Every module of the first programs is valid Vulkan 1.1 SPIR-V, and
 * their sizes stay in the 20-200 KB the corpus promises. */
KT_CASE(generate_valid_and_sized)
{
    struct kiln_glsl *glsl;
    KT_REQUIRE_OK(kiln_glsl_create(KILN_GLSL_OPT_NONE, &glsl));
    const struct kiln_translator *t = kiln_glsl_translator(glsl);
    size_t modules = 0, compute = 0, total = 0;
    for (uint32_t i = 0; i < 12; i++) {
        struct kiln_program *p;
        KT_REQUIRE_OK(kiln_generate_spirv(t, KILN_GENERATOR_DEFAULT_SEED, i, &p));
        for (unsigned s = 0; s < p->nstages; s++) {
            size_t bytes = p->stages[s].nwords * 4;
            if (bytes < 20 * 1024 || bytes > 200 * 1024)
                kt_fail(__FILE__, __LINE__, "%s: %zu bytes of SPIR-V", p->stages[s].src.name,
                        bytes);
            /* spirv-val on a handful: the first compute and graphics ones. */
            if (i < 4 && spirv_val(p->stages[s].words, p->stages[s].nwords) != 0)
                kt_fail(__FILE__, __LINE__, "%s: spirv-val failed", p->stages[s].src.name);
            compute += p->stages[s].src.stage == KILN_VK_STAGE_COMPUTE_BIT;
            total += bytes;
            modules++;
        }
        KT_CHECK_EQ(kiln_program_spirv_bytes(p),
                    p->nstages == 1 ? p->stages[0].nwords * 4
                                    : (p->stages[0].nwords + p->stages[1].nwords) * 4);
        kiln_program_destroy(p);
    }
    KT_CHECK_EQ(modules, 18);
    KT_CHECK_EQ(compute, 6);
    /* The mix averages about 80 KB a module. */
    KT_CHECK(total / modules > 50 * 1024 && total / modules < 110 * 1024);
    kiln_glsl_destroy(glsl);
}

/* ---- corpus folders ----------------------------------------------------- */

static int mkdir_in(const char *dir, const char *name)
{
    char path[4200];
    if (kiln__path_join(path, sizeof(path), dir, name) < 0)
        return -1;
    return kt_mkdir(path);
}

/* SPIR-V for a stage, from the built-in translator. */
static int spirv_of(const struct kiln_translator *t, uint32_t stage, const char *text,
                    uint32_t **words, size_t *n)
{
    struct kiln_source s = src_of(stage, text, "fixture");
    return kiln_translate(t, &s, words, n);
}

KT_CASE(corpus_listing)
{
    struct kiln_glsl *glsl;
    KT_REQUIRE_OK(kiln_glsl_create(KILN_GLSL_OPT_NONE, &glsl));
    const struct kiln_translator *t = kiln_glsl_translator(glsl);
    const char *dir = kt_tmpdir();
    uint32_t *vw, *fw, *cw;
    size_t vn, fn, cn;
    KT_REQUIRE_OK(spirv_of(t, KILN_VK_STAGE_VERTEX_BIT, vert_src, &vw, &vn));
    KT_REQUIRE_OK(spirv_of(t, KILN_VK_STAGE_FRAGMENT_BIT, frag_src, &fw, &fn));
    KT_REQUIRE_OK(spirv_of(t, KILN_VK_STAGE_COMPUTE_BIT, comp_src, &cw, &cn));
    KT_REQUIRE(mkdir_in(dir, "sub") == 0 && mkdir_in(dir, ".git") == 0);
    KT_REQUIRE(write_file(dir, "b.vert", vert_src, strlen(vert_src)) == 0);
    KT_REQUIRE(write_file(dir, "b.frag", frag_src, strlen(frag_src)) == 0);
    KT_REQUIRE(write_file(dir, "a.comp", comp_src, strlen(comp_src)) == 0);
    KT_REQUIRE(write_file(dir, "c.vert.spv", vw, vn * 4) == 0);
    KT_REQUIRE(write_file(dir, "c.frag", frag_src, strlen(frag_src)) == 0); /* a mixed pair */
    KT_REQUIRE(write_file(dir, "sub/d.comp.spv", cw, cn * 4) == 0);
    KT_REQUIRE(write_file(dir, "e.frag.spv", fw, fn * 4) == 0); /* no partner: skipped */
    KT_REQUIRE(write_file(dir, "f.geom.spv", fw, fn * 4) == 0); /* other stage: skipped */
    KT_REQUIRE(write_file(dir, "README.txt", "hello", 5) == 0); /* not a program file */
    KT_REQUIRE(write_file(dir, ".git/x.comp", "x", 1) == 0);    /* hidden: left out */

    struct captured c = {0};
    kiln_log_set_sink(capture, &c);
    struct kiln_corpus *corpus;
    KT_REQUIRE_OK(kiln_corpus_open(dir, &corpus));
    kiln_log_set_sink(NULL, NULL);
    KT_CHECK_EQ(c.count, 1); /* one warning for what was skipped */
    KT_CHECK(strstr(c.last, "skipped 2 files") != NULL);
    KT_REQUIRE(kiln_corpus_count(corpus) == 4);
    KT_CHECK_EQ(kiln_corpus_skipped(corpus), 2);
    const char *want[] = {"a.comp", "b.vert+frag", "c.vert+frag", "sub/d.comp"};
    for (size_t i = 0; i < 4; i++)
        KT_CHECK(strcmp(kiln_corpus_name(corpus, i), want[i]) == 0);
    KT_CHECK(kiln_corpus_name(corpus, 4) == NULL);

    struct kiln_program *p;
    KT_REQUIRE_OK(kiln_corpus_load(corpus, 2, &p)); /* c: SPIR-V vertex, GLSL fragment */
    KT_REQUIRE(p->nstages == 2);
    KT_CHECK_EQ(p->stages[0].src.stage, KILN_VK_STAGE_VERTEX_BIT);
    KT_CHECK(p->stages[0].src.text == NULL && p->stages[0].nwords == vn);
    KT_CHECK(memcmp(p->stages[0].words, vw, vn * 4) == 0);
    KT_CHECK(strcmp(p->stages[0].src.name, "c.vert.spv") == 0);
    KT_CHECK(p->stages[1].src.text != NULL && p->stages[1].words == NULL);
    KT_CHECK_EQ(p->stages[1].src.size, strlen(frag_src));
    KT_CHECK_OK(kiln_program_translate(t, p));
    KT_CHECK(p->stages[1].words != NULL && p->stages[1].nwords == fn);
    kiln_program_destroy(p);
    KT_REQUIRE_OK(kiln_corpus_load(corpus, 3, &p));
    KT_CHECK(p->nstages == 1 && p->stages[0].src.stage == KILN_VK_STAGE_COMPUTE_BIT);
    KT_CHECK(strcmp(p->stages[0].src.name, "sub/d.comp.spv") == 0);
    kiln_program_destroy(p);
    KT_CHECK_EQ(kiln_corpus_load(corpus, 4, &p), KILN_EINVAL);
    kiln_corpus_destroy(corpus);
    kiln_corpus_destroy(NULL);
    kiln_words_free(vw);
    kiln_words_free(fw);
    kiln_words_free(cw);
    kiln_glsl_destroy(glsl);
}

KT_CASE(corpus_bad_files)
{
    const char *dir = kt_tmpdir();
    const uint32_t header[5] = {0x07230203u, 0x00010300u, 0, 16, 0};
    const uint32_t swapped[5] = {0x03022307u, 0, 0, 16, 0};
    KT_REQUIRE(write_file(dir, "odd.comp.spv", header, 18) == 0);
    KT_REQUIRE(write_file(dir, "magic.comp.spv", swapped, sizeof(swapped)) == 0);
    KT_REQUIRE(write_file(dir, "empty.comp.spv", "", 0) == 0);
    KT_REQUIRE(write_file(dir, "short.comp.spv", header, 16) == 0);
    KT_REQUIRE(write_file(dir, "good.comp.spv", header, sizeof(header)) == 0);
    struct kiln_corpus *corpus;
    KT_REQUIRE_OK(kiln_corpus_open(dir, &corpus));
    KT_REQUIRE(kiln_corpus_count(corpus) == 5);
    struct captured c = {0};
    kiln_log_set_sink(capture, &c);
    const struct {
        const char *name, *why;
    } bad[] = {{"empty.comp", "empty"},
               {"magic.comp", "other byte order"},
               {"odd.comp", "whole number"},
               {"short.comp", "header"}};
    /* Sorted by name: empty, good, magic, odd, short. */
    KT_CHECK(strcmp(kiln_corpus_name(corpus, 1), "good.comp") == 0);
    const size_t at[] = {0, 2, 3, 4};
    for (size_t i = 0; i < 4; i++) {
        struct kiln_program *p = (struct kiln_program *)&c;
        KT_CHECK(strcmp(kiln_corpus_name(corpus, at[i]), bad[i].name) == 0);
        KT_CHECK_EQ(kiln_corpus_load(corpus, at[i], &p), KILN_EFORMAT);
        KT_CHECK(p == NULL);
        KT_CHECK_EQ(c.count, (int)i + 1);
        /* The line names the file and says what is wrong with it. */
        char file[64];
        snprintf(file, sizeof(file), "%s.spv", bad[i].name);
        KT_CHECK(strstr(c.last, file) != NULL);
        KT_CHECK(strstr(c.last, bad[i].why) != NULL);
    }
    struct kiln_program *p;
    KT_CHECK_OK(kiln_corpus_load(corpus, 1, &p)); /* a bare header passes the listing's checks */
    kiln_program_destroy(p);
    kiln_corpus_destroy(corpus);

    /* Two files for one stage of a NAME: the listing fails, naming both. */
    KT_REQUIRE(write_file(dir, "twice.vert", vert_src, strlen(vert_src)) == 0);
    KT_REQUIRE(write_file(dir, "twice.vert.spv", header, sizeof(header)) == 0);
    corpus = (struct kiln_corpus *)&c;
    KT_CHECK_EQ(kiln_corpus_open(dir, &corpus), KILN_EFORMAT);
    KT_CHECK(corpus == NULL);
    KT_CHECK(strstr(c.last, "twice.vert.spv") != NULL && strstr(c.last, "twice.vert and") != NULL);

    /* A folder that is not there. */
    char missing[4200];
    KT_REQUIRE_OK(kiln__path_join(missing, sizeof(missing), dir, "nope"));
    KT_CHECK_EQ(kiln_corpus_open(missing, &corpus), KILN_ENOENT);
    KT_CHECK(strstr(c.last, "nope") != NULL);
    kiln_log_set_sink(NULL, NULL);
}

KT_MAIN(KT_ENTRY(stage_names), KT_ENTRY(glsl_each_stage), KT_ENTRY(glsl_rejects_broken),
        KT_ENTRY(own_translator), KT_ENTRY(glsl_threads), KT_ENTRY(generate_deterministic),
        KT_ENTRY(generate_valid_and_sized), KT_ENTRY(corpus_listing), KT_ENTRY(corpus_bad_files))
