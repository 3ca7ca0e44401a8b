/*
 * test_cache_program.c - a program in one call: kiln_cache_put_program
 * seals and stores, kiln_cache_get_program / kiln_program_open open it.
 *
 * The programs are compute shaders written here word by word (no shaderc):
 * a module with no resources, its local size x the one thing that differs,
 * so each has a key of its own and passes SPIR-V's validator.
 */
#include "kiln_test.h"

#include "kiln.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CS_WORDS 35

/* A compute shader of local size (x, 1, 1): valid SPIR-V 1.0. */
static void compute_words(uint32_t x, uint32_t w[CS_WORDS])
{
    const uint32_t t[CS_WORDS] = {
        0x07230203u,
        0x00010000u,
        0,
        5,
        0, /* header: bound 5 */
        (2u << 16) | 17,
        1, /* OpCapability Shader */
        (3u << 16) | 14,
        0,
        1, /* OpMemoryModel Logical GLSL450 */
        (5u << 16) | 15,
        5,
        1,
        0x6e69616du,
        0, /* OpEntryPoint GLCompute %1 "main" */
        (6u << 16) | 16,
        1,
        17,
        x,
        1,
        1, /* OpExecutionMode %1 LocalSize x 1 1 */
        (2u << 16) | 19,
        2, /* %2 = OpTypeVoid */
        (3u << 16) | 33,
        3,
        2, /* %3 = OpTypeFunction %2 */
        (5u << 16) | 54,
        2,
        1,
        0,
        3, /* %1 = OpFunction %2 None %3 */
        (2u << 16) | 248,
        4,                /* OpLabel */
        (1u << 16) | 253, /* OpReturn */
        (1u << 16) | 56,  /* OpFunctionEnd */
    };
    memcpy(w, t, sizeof(t));
}

/* A caller's own one-stage program over `words`. */
struct one {
    uint32_t words[CS_WORDS];
    struct kiln_program_stage st;
    struct kiln_program p;
};

static void one_make(struct one *o, uint32_t x)
{
    memset(o, 0, sizeof(*o));
    compute_words(x, o->words);
    o->st.src.stage = KILN_VK_STAGE_COMPUTE_BIT;
    o->st.src.name = "cs";
    o->st.words = o->words;
    o->st.nwords = CS_WORDS;
    o->p = (struct kiln_program)KILN_PROGRAM_INIT;
    o->p.name = "cs";
    o->p.nstages = 1;
    o->p.stages = &o->st;
}

static struct kiln_cache *open_cache(const char *dir)
{
    struct kiln_cache_options opt = {
        .size = sizeof(opt), .stamp = 0x5eed, .flags = KILN_CACHE_CREATE};
    struct kiln_cache *c = NULL;
    KT_NEED(kiln_cache_open(dir, &opt, &c) == KILN_OK);
    return c;
}

/* One call stores; the next open finds it, unpacked and checked. */
/* Ends the case as skipped (exit 77) in a build without the SPIR-V
 * validator (the Windows build): there kiln opens no program, since it
 * cannot check one (docs/prep.md). */
static void need_validator(void)
{
    static const uint32_t words[5] = {0x07230203u, 0x00010000u, 0, 1, 0};
    char why[128];
    if (kiln_vk_validate_spirv(words, 5, why, sizeof(why)) == KILN_ENOTSUP) {
        printf("skipped: this build has no SPIR-V validator\n");
        exit(77);
    }
}

KT_CASE(put_then_get)
{
    need_validator();
    struct kiln_cache *c = open_cache(kt_case_dir());
    struct one o;
    one_make(&o, 7);
    struct kiln_key key, want;
    KT_REQUIRE_OK(kiln_cache_put_program(c, &o.p, NULL, &key));
    KT_REQUIRE_OK(kiln_program_key(&o.p, &want));
    KT_CHECK(kiln_key_equal(key, want));
    KT_CHECK_OK(kiln_cache_sync(c));
    kiln_cache_close(c);

    c = open_cache(kt_case_dir());
    KT_CHECK_EQ(kiln_cache_count(c), 1);
    struct kiln_program_opened *op = NULL;
    KT_REQUIRE_OK(kiln_cache_get_program(c, key, NULL, &op));
    kiln_cache_close(c); /* the open program stands alone */
    KT_CHECK_EQ(op->nstages, 1);
    KT_CHECK(op->validated);
    KT_CHECK(op->state.flags & KILN_PAYLOAD_VALIDATED);
    KT_CHECK_EQ(op->stages[0].blob.stage, KILN_VK_STAGE_COMPUTE_BIT);
    KT_CHECK_EQ(op->stages[0].nwords, CS_WORDS);
    KT_CHECK(memcmp(op->stages[0].words, o.words, sizeof(o.words)) == 0);
    kiln_program_opened_free(op);
}

/* A stage the validator refuses is not stored. */
KT_CASE(invalid_refused)
{
    struct kiln_cache *c = open_cache(kt_case_dir());
    struct one o;
    one_make(&o, 7);
    o.words[11] = 99; /* an execution model that does not exist */
    struct kiln_program_sealed s = {.size = sizeof(s)};
    int rc = kiln_program_seal(&o.p, NULL, &s);
    if (rc == KILN_OK && !s.validated) {
        printf("skipped: this build has no SPIR-V validator\n");
        kiln_program_sealed_clear(&s);
        kiln_cache_close(c);
        return;
    }
    KT_CHECK_EQ(rc, KILN_EFORMAT);
    KT_CHECK(strstr(s.why, "is not valid SPIR-V") != NULL);
    KT_CHECK_EQ(kiln_cache_put_program(c, &o.p, NULL, NULL), KILN_EFORMAT);
    KT_CHECK_EQ(kiln_cache_count(c), 0);
    kiln_cache_close(c);
}

/* A damaged payload is refused by the open, whatever byte is hit. */
KT_CASE(damaged_refused)
{
    need_validator();
    struct one o;
    one_make(&o, 3);
    struct kiln_program_sealed s = {.size = sizeof(s)};
    KT_REQUIRE_OK(kiln_program_seal(&o.p, NULL, &s));
    struct kiln_program_opened *op = NULL;
    KT_REQUIRE_OK(kiln_program_open(s.payload, s.payload_size, NULL, &op));
    /* Where the stage's blob lies: every byte of it is under its seal. */
    size_t blob_at =
        (size_t)((const unsigned char *)op->stages[0].blob.blob - (const unsigned char *)s.payload);
    size_t blob_end = blob_at + op->stages[0].blob.blob_size;
    kiln_program_opened_free(op);
    unsigned char *bad = malloc(s.payload_size);
    KT_REQUIRE(bad);
    size_t refused = 0;
    for (size_t i = 0; i < s.payload_size; i++) {
        memcpy(bad, s.payload, s.payload_size);
        bad[i] ^= 0x5a;
        op = NULL;
        int rc = kiln_program_open(bad, s.payload_size, NULL, &op);
        if (rc < 0) {
            refused++;
            KT_CHECK(op == NULL);
            continue;
        }
        KT_CHECK(i < blob_at || i >= blob_end); /* a blob's byte always refused */
        /* Only a byte that changes no word may open (the validated flag
         * cleared, say): then the words are still the sealed ones. */
        KT_CHECK(op->stages[0].nwords == CS_WORDS &&
                 memcmp(op->stages[0].words, o.words, sizeof(o.words)) == 0);
        kiln_program_opened_free(op);
    }
    printf("damaged bytes refused: %zu of %zu\n", refused, s.payload_size);
    KT_CHECK(refused >= blob_end - blob_at);
    /* Cut short: refused too. */
    KT_CHECK(kiln_program_open(s.payload, s.payload_size - 1, NULL, &op) < 0);
    free(bad);
    kiln_program_sealed_clear(&s);
}

/* Stores a program the old way, in four calls (pack, payload, put), so its
 * payload is not marked validated: the build validates it first. */
static void put_unmarked(struct kiln_cache *c, uint32_t x)
{
    struct one o;
    one_make(&o, x);
    void *blob = NULL, *payload = NULL;
    size_t bs = 0, ps = 0;
    KT_NEED(kiln_pack(o.words, CS_WORDS, KILN_CODEC_KILN, NULL, &blob, &bs) == KILN_OK);
    struct kiln_stage_blob st = {.stage = KILN_VK_STAGE_COMPUTE_BIT, .blob = blob, .blob_size = bs};
    KT_NEED(kiln_program_payload_build(&st, 1, &payload, &ps) == KILN_OK);
    struct kiln_key key;
    KT_NEED(kiln_program_key(&o.p, &key) == KILN_OK);
    KT_NEED(kiln_cache_put(c, key, payload, ps, CS_WORDS * 4, KILN_CODEC_KILN, 1) == KILN_OK);
    kiln_pack_free(blob);
    kiln_pack_free(payload);
}

/* The build path unpacks each stage once: a warm start of N one-stage
 * programs, sealed (marked validated) and stored the old way (not marked:
 * validated before the build), unpacks N blobs. Before kiln_program_open
 * an unmarked one was unpacked twice (prep's check, then vk's). */
KT_CASE(build_unpacks_once)
{
    enum { SEALED = 3, UNMARKED = 2, N = SEALED + UNMARKED };
    const char *dir = kt_case_dir();
    struct kiln_cache *c = open_cache(dir);
    for (uint32_t i = 0; i < SEALED; i++) {
        struct one o;
        one_make(&o, i + 1);
        KT_REQUIRE_OK(kiln_cache_put_program(c, &o.p, NULL, NULL));
    }
    for (uint32_t i = 0; i < UNMARKED; i++)
        put_unmarked(c, 100 + i);
    kiln_cache_close(c);
    struct kiln_start_options so = {
        .size = sizeof(so), .cache_dir = dir, .stamp = 0x5eed, .jobs = 2};
    struct kiln_start_summary sum = KILN_START_SUMMARY_INIT;
    uint64_t before = kiln_unpack_count();
    int rc = kiln_warm_start(&so, NULL, NULL, &sum);
    uint64_t unpacks = kiln_unpack_count() - before;
    if (rc == KILN_ENOTSUP) {
        printf("skipped: no Vulkan device\n");
        return;
    }
    KT_REQUIRE_OK(rc);
    printf("built %llu, unpacks %llu\n", (unsigned long long)sum.pipelines_built,
           (unsigned long long)unpacks);
    KT_CHECK_EQ(sum.pipelines_built, N);
    KT_CHECK_EQ(unpacks, N);
}

KT_MAIN(KT_ENTRY(put_then_get), KT_ENTRY(invalid_refused), KT_ENTRY(damaged_refused),
        KT_ENTRY(build_unpacks_once))
