/*
 * test_pipes.c - programs as pipelines: state kinds, entry points and
 * specialization stored and returned, keys, builders, the interface check
 * of kiln's own layout, and an application's own Vulkan context.
 *
 * The SPIR-V comes from kiln's GLSL translator (shaderc); the pipelines
 * are built on whatever Vulkan device there is (lavapipe in CI), and the
 * cases that build skip (exit 77) where there is none.
 */
#define VK_NO_PROTOTYPES
#include <vulkan/vulkan.h>

#include "kiln_test.h"
#include "prep_fixture.h"

#include <dlfcn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* KT_REQUIRE for helpers that return a value: the case cannot go on. */
#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

#define MUST(cond)                                              \
    do {                                                        \
        if (!(cond)) {                                          \
            kt_fail(__FILE__, __LINE__, "required: %s", #cond); \
            exit(1);                                            \
        }                                                       \
    } while (0)

static const char COMP_OK[] = "#version 450\n"
                              "layout(local_size_x = 1) in;\n"
                              "layout(set = 0, binding = 0) buffer B { uint data[]; };\n"
                              "layout(push_constant) uniform P { uvec4 args; };\n"
                              "layout(constant_id = 3) const uint K = 1u;\n"
                              "void main() { data[0] = args.x + K; }\n";

/* Binding 0 as a storage image: kiln's layout has a storage buffer there
 * (lavapipe crashed inside vkCreateComputePipelines on this). */
static const char COMP_IMAGE[] =
    "#version 450\n"
    "layout(local_size_x = 1) in;\n"
    "layout(set = 0, binding = 0, rgba8) uniform writeonly image2D img;\n"
    "void main() { imageStore(img, ivec2(0), vec4(1.0)); }\n";

/* 32 bytes of push constants: kiln's layout has 16. */
static const char COMP_PUSH32[] = "#version 450\n"
                                  "layout(local_size_x = 1) in;\n"
                                  "layout(set = 0, binding = 0) buffer B { uint data[]; };\n"
                                  "layout(push_constant) uniform P { uvec4 a; uvec4 b; };\n"
                                  "void main() { data[0] = a.x + b.w; }\n";

/* Translates one GLSL stage to SPIR-V words (malloc'd). */
static uint32_t *glsl(uint32_t stage, const char *text, size_t *nwords)
{
    static struct kiln_glsl *g;
    if (!g)
        MUST(KILN_OK == kiln_glsl_create(KILN_GLSL_OPT_NONE, &g));
    struct kiln_source src = {.stage = stage, .text = text, .size = strlen(text), .name = "test"};
    uint32_t *w = NULL;
    MUST(KILN_OK == kiln_translate(kiln_glsl_translator(g), &src, &w, nwords));
    return w;
}

static void cache_dir(char *out, size_t cap, const char *leaf)
{
    snprintf(out, cap, "%s/%s", kt_tmpdir(), leaf);
}

/* kiln_prepare's options over `src` into the case's folder "cache" (its
 * path in `dir`, which must outlive them) with `jobs` workers (0: auto). */
static void source_options(struct kiln_prepare_options *o, char *dir, size_t cap,
                           const struct kiln_program_source *src, unsigned jobs)
{
    cache_dir(dir, cap, "cache");
    pf_options(o, dir, jobs);
    o->source = src;
}

/* An application's own state bytes. */
struct app_state {
    uint32_t magic;
    uint32_t local_size; /* what the test's builder puts in its layout */
};

#define APP_MAGIC 0x41505031u

/* A one-stage compute program of SPIR-V words (the words are copied). */
static struct kiln_program *compute_program(const char *name, const uint32_t *w, size_t n)
{
    struct kiln_program *p = NULL;
    MUST(KILN_OK == kiln_program_create(name, &p));
    p->nstages = 1;
    p->stages[0].src.stage = KILN_VK_STAGE_COMPUTE_BIT;
    p->stages[0].src.name = strdup(name);
    p->stages[0].words = malloc(n * 4);
    MUST(p->stages[0].src.name && p->stages[0].words);
    memcpy(p->stages[0].words, w, n * 4);
    p->stages[0].nwords = n;
    return p;
}

/* Sets a program's state (copied). */
static void set_state(struct kiln_program *p, uint32_t kind, const void *bytes, size_t n)
{
    p->state_kind = kind;
    p->state = malloc(n);
    KT_REQUIRE(p->state);
    memcpy(p->state, bytes, n);
    p->state_size = n;
}

/* Gives stage 0 one specialization constant (id 3 = value). */
static void set_spec(struct kiln_program *p, uint32_t value)
{
    struct kiln_program_stage *st = &p->stages[0];
    st->spec = malloc(sizeof(*st->spec));
    st->spec_data = malloc(4);
    KT_REQUIRE(st->spec && st->spec_data);
    st->spec[0] = (struct kiln_spec_entry){.constant_id = 3, .offset = 0, .size = 4};
    memcpy(st->spec_data, &value, 4);
    st->nspec = 1;
    st->spec_size = 4;
}

/* ---- the payload ----------------------------------------------------------- */

/* Version 3 keeps state, entry points and specialization; a plain program
 * is still written as version 2; damage is refused. */
KT_CASE(payload_v3)
{
    size_t n = 0;
    uint32_t *w = glsl(KILN_VK_STAGE_COMPUTE_BIT, COMP_OK, &n);
    void *blob = NULL;
    size_t bs = 0;
    KT_REQUIRE_OK(kiln_pack(w, n, KILN_CODEC_KILN, NULL, &blob, &bs));
    uint8_t map[2 * KILN_SPEC_ENTRY_BYTES] = {3, 0, 0, 0, 0, 0, 0, 0, 4, 0, 0, 0,
                                              9, 0, 0, 0, 4, 0, 0, 0, 4, 0, 0, 0};
    uint32_t data[2] = {7, 8};
    struct kiln_stage_blob in[2] = {
        {.stage = KILN_VK_STAGE_VERTEX_BIT, .blob = blob, .blob_size = bs, .entry = "vs_main"},
        {.stage = KILN_VK_STAGE_FRAGMENT_BIT,
         .blob = blob,
         .blob_size = bs,
         .nspec = 2,
         .spec_map = map,
         .spec_data = data,
         .spec_size = sizeof(data)},
    };
    const char state_bytes[] = "opaque state";
    struct kiln_payload_state st = {
        .kind = KILN_STATE_APP, .bytes = state_bytes, .size = sizeof(state_bytes)};
    void *pl = NULL;
    size_t size = 0;
    KT_REQUIRE_OK(kiln_program_payload_build_full(&st, in, 2, &pl, &size));
    KT_CHECK_EQ(((uint8_t *)pl)[2], 3);

    /* The validated mark is the version byte's high bit, and comes back. */
    struct kiln_payload_state marked = st;
    marked.flags = KILN_PAYLOAD_VALIDATED;
    void *mpl = NULL;
    size_t msize = 0;
    KT_REQUIRE_OK(kiln_program_payload_build_full(&marked, in, 2, &mpl, &msize));
    KT_CHECK_EQ(((uint8_t *)mpl)[2], 0x83);
    struct kiln_stage_blob mout[2];
    struct kiln_payload_state mgot;
    KT_REQUIRE(kiln_program_payload_parse_full(mpl, msize, 2, mout, &mgot) == 2);
    KT_CHECK_EQ(mgot.flags, KILN_PAYLOAD_VALIDATED);
    KT_CHECK_EQ(mgot.kind, KILN_STATE_APP);
    /* Version 1 never carried it: such a head is damage. */
    ((uint8_t *)mpl)[2] = 0x81;
    KT_CHECK(kiln_program_payload_parse_full(mpl, msize, 2, mout, &mgot) < 0);
    free(mpl);

    struct kiln_stage_blob out[2];
    struct kiln_payload_state got;
    KT_REQUIRE(kiln_program_payload_parse_full(pl, size, 2, out, &got) == 2);
    KT_CHECK_EQ(got.kind, KILN_STATE_APP);
    KT_REQUIRE(got.size == sizeof(state_bytes));
    KT_CHECK(memcmp(got.bytes, state_bytes, got.size) == 0);
    KT_REQUIRE(out[0].entry != NULL);
    KT_CHECK(strcmp(out[0].entry, "vs_main") == 0);
    KT_CHECK(out[1].entry == NULL); /* "main" */
    KT_CHECK_EQ(out[0].nspec, 0);
    KT_REQUIRE(out[1].nspec == 2);
    struct kiln_spec_entry e;
    kiln_spec_entry_get(&out[1], 1, &e);
    KT_CHECK_EQ(e.constant_id, 9);
    KT_CHECK_EQ(e.offset, 4);
    KT_CHECK_EQ(e.size, 4);
    KT_CHECK(out[1].spec_size == sizeof(data) && memcmp(out[1].spec_data, data, 8) == 0);
    KT_CHECK(out[1].blob_size == bs && memcmp(out[1].blob, blob, bs) == 0);
    /* The old parse reads the stages and leaves the state out. */
    KT_CHECK_EQ(kiln_program_payload_parse(pl, size, 2, out), 2);

    /* Every cut and every flipped byte of the extras is refused or parses
     * to in-bounds pointers (ASan would see the rest). */
    kiln_log_set_level(KILN_LOG_ERROR + 1);
    uint8_t *copy = malloc(size);
    KT_REQUIRE(copy);
    for (size_t cut = 0; cut < size; cut++) {
        memcpy(copy, pl, cut);
        KT_CHECK(kiln_program_payload_parse_full(copy, cut, 2, out, &got) < 0);
    }
    for (size_t i = 4; i < size - bs * 2; i++) {
        memcpy(copy, pl, size);
        copy[i] ^= 0x5a;
        int r = kiln_program_payload_parse_full(copy, size, 2, out, &got);
        if (r == 2 && out[0].entry)
            KT_CHECK(strlen(out[0].entry) < size);
    }
    free(copy);
    /* A state kind kiln does not know, and bytes with built-in state, are
     * refused when building. */
    void *bad = NULL;
    size_t bsz = 0;
    struct kiln_payload_state unknown = {.kind = 7};
    KT_CHECK_EQ(kiln_program_payload_build_full(&unknown, in, 1, &bad, &bsz), KILN_EINVAL);
    struct kiln_payload_state builtin_bytes = {.kind = KILN_STATE_BUILTIN, .bytes = "x", .size = 1};
    KT_CHECK_EQ(kiln_program_payload_build_full(&builtin_bytes, in, 1, &bad, &bsz), KILN_EINVAL);
    uint8_t bad_map[KILN_SPEC_ENTRY_BYTES] = {1, 0, 0, 0, 6, 0, 0, 0, 4, 0, 0, 0};
    struct kiln_stage_blob outside = {.stage = KILN_VK_STAGE_COMPUTE_BIT,
                                      .blob = blob,
                                      .blob_size = bs,
                                      .nspec = 1,
                                      .spec_map = bad_map,
                                      .spec_data = data,
                                      .spec_size = 8};
    KT_CHECK_EQ(kiln_program_payload_build_full(NULL, &outside, 1, &bad, &bsz), KILN_EINVAL);
    kiln_log_set_level(KILN_LOG_WARN);

    /* A plain program (entry "main" said out loud) is a version 2 payload. */
    void *plain = NULL;
    size_t psize = 0;
    struct kiln_stage_blob one = {
        .stage = KILN_VK_STAGE_COMPUTE_BIT, .blob = blob, .blob_size = bs, .entry = "main"};
    KT_REQUIRE_OK(kiln_program_payload_build_full(NULL, &one, 1, &plain, &psize));
    KT_CHECK_EQ(((uint8_t *)plain)[2], 2);
    KT_CHECK_EQ(psize, 4 + 8 + bs);
    KT_REQUIRE(kiln_program_payload_parse_full(plain, psize, 1, out, &got) == 1);
    KT_CHECK_EQ(got.kind, KILN_STATE_BUILTIN);
    KT_CHECK(got.size == 0 && out[0].entry == NULL && out[0].nspec == 0);
    kiln_pack_free(plain);
    kiln_pack_free(pl);
    kiln_pack_free(blob);
    kiln_words_free(w);
}

/* ---- keys ------------------------------------------------------------------ */

/* Today's key, made here from its documented form (kind code, 1 for words,
 * the length, the words), so a change in kiln_prep_program_key shows. */
static struct kiln_key todays_key(uint32_t code, const uint32_t *w, size_t n)
{
    size_t total = 16 + n * 4;
    unsigned char *b = malloc(total);
    MUST(b);
    uint64_t len = n * 4;
    uint32_t one = 1;
    memcpy(b, &code, 4); /* the test hosts are little-endian, as the format is */
    memcpy(b + 4, &one, 4);
    memcpy(b + 8, &len, 8);
    memcpy(b + 16, w, n * 4);
    struct kiln_key k = kiln_hash128(b, total);
    free(b);
    return k;
}

KT_CASE(key_stable)
{
    size_t n = 0;
    uint32_t *w = glsl(KILN_VK_STAGE_COMPUTE_BIT, COMP_OK, &n);
    struct kiln_program *p = compute_program("k", w, n);
    struct kiln_key k0, k;
    KT_REQUIRE_OK(kiln_prep_program_key(p, &k0));
    KT_CHECK(kiln_key_equal(k0, todays_key(0, w, n)));

    /* "main" said out loud is the same program. */
    p->stages[0].entry = strdup("main");
    KT_REQUIRE_OK(kiln_prep_program_key(p, &k));
    KT_CHECK(kiln_key_equal(k, k0));

    /* Every new part makes another key, each its own. */
    struct kiln_key seen[4];
    free(p->stages[0].entry);
    p->stages[0].entry = strdup("other");
    KT_REQUIRE_OK(kiln_prep_program_key(p, &seen[0]));
    free(p->stages[0].entry);
    p->stages[0].entry = NULL;
    set_spec(p, 5);
    KT_REQUIRE_OK(kiln_prep_program_key(p, &seen[1]));
    memcpy(p->stages[0].spec_data, &(uint32_t){6}, 4);
    KT_REQUIRE_OK(kiln_prep_program_key(p, &seen[2]));
    struct app_state as = {APP_MAGIC, 1};
    set_state(p, KILN_STATE_APP, &as, sizeof(as));
    KT_REQUIRE_OK(kiln_prep_program_key(p, &seen[3]));
    for (int i = 0; i < 4; i++) {
        KT_CHECK(!kiln_key_equal(seen[i], k0));
        for (int j = 0; j < i; j++)
            KT_CHECK(!kiln_key_equal(seen[i], seen[j]));
    }
    /* The same bytes under another kind is another program. */
    p->state_kind = KILN_STATE_FOZ;
    KT_REQUIRE_OK(kiln_prep_program_key(p, &k));
    KT_CHECK(!kiln_key_equal(k, seen[3]));
    kiln_program_destroy(p);
    kiln_words_free(w);
}

/* ---- programs from a caller's array, stored and read back ------------------- */

KT_CASE(array_source_round_trip)
{
    size_t n = 0;
    uint32_t *w = glsl(KILN_VK_STAGE_COMPUTE_BIT, COMP_OK, &n);
    /* The caller's own layout: everything borrowed, nothing from kiln. */
    struct kiln_spec_entry spec = {.constant_id = 3, .offset = 0, .size = 4};
    uint32_t value = 11;
    struct kiln_program_stage stages[2] = {
        {.src = {.stage = KILN_VK_STAGE_COMPUTE_BIT, .name = "a.comp"},
         .words = w,
         .nwords = n,
         .nspec = 1,
         .spec = &spec,
         .spec_data = &value,
         .spec_size = 4},
        {.src = {.stage = KILN_VK_STAGE_COMPUTE_BIT, .name = "b.comp"}, .words = w, .nwords = n},
    };
    struct app_state as = {APP_MAGIC, 1};
    struct kiln_program progs[2] = {
        {.size = sizeof(struct kiln_program),
         .stage_size = sizeof(struct kiln_program_stage),
         .name = "app-a",
         .nstages = 1,
         .stages = &stages[0],
         .state_kind = KILN_STATE_APP,
         .state = &as,
         .state_size = sizeof(as)},
        {.size = sizeof(struct kiln_program),
         .stage_size = sizeof(struct kiln_program_stage),
         .name = "builtin-b",
         .nstages = 1,
         .stages = &stages[1]},
    };
    char why[256];
    bool validator = kiln_vk_validate_spirv(w, n, why, sizeof(why)) != KILN_ENOTSUP;
    struct kiln_program_array arr = {
        .size = sizeof(arr), .programs = progs, .count = 2, .stamp = 0xab};
    struct kiln_program_source src = kiln_program_source_array(&arr);
    char dir[4200];
    struct kiln_prepare_options o = KILN_PREPARE_OPTIONS_INIT;
    source_options(&o, dir, sizeof(dir), &src, 2);
    o.no_vulkan = true;
    struct kiln_prepare_summary s = KILN_PREPARE_SUMMARY_INIT;
    KT_REQUIRE_OK(kiln_prepare(&o, NULL, NULL, &s));
    KT_CHECK_EQ(s.programs, 2);
    KT_CHECK_EQ(s.translated, 2);
    KT_CHECK_EQ(s.stamp, 0xab);

    struct kiln_cache_options co = {
        .size = sizeof(co), .stamp = 0xab, .flags = KILN_CACHE_READ_ONLY};
    struct kiln_cache *c;
    KT_REQUIRE_OK(kiln_cache_open(dir, &co, &c));
    for (int i = 0; i < 2; i++) {
        struct kiln_key k;
        KT_REQUIRE_OK(kiln_prep_program_key(&progs[i], &k));
        struct kiln_cache_result *res;
        KT_REQUIRE(kiln_cache_load_many(c, &k, 1, 1, &res) == 1);
        KT_REQUIRE_OK(res[0].status);
        struct kiln_stage_blob st[1];
        struct kiln_payload_state ps;
        KT_REQUIRE(kiln_program_payload_parse_full(res[0].data, res[0].size, 1, st, &ps) == 1);
        /* The version, and the mark that prepare validated every stage
         * (only where SPIR-V's validator is compiled in). */
        KT_CHECK_EQ(((uint8_t *)res[0].data)[2] & 0x7f, i == 0 ? 3 : 2);
        KT_CHECK_EQ(ps.flags, validator ? KILN_PAYLOAD_VALIDATED : 0u);
        KT_CHECK_EQ(ps.kind, progs[i].state_kind);
        KT_CHECK_EQ(ps.size, progs[i].state_size);
        if (i == 0) {
            KT_CHECK(memcmp(ps.bytes, &as, sizeof(as)) == 0);
            KT_REQUIRE(st[0].nspec == 1 && st[0].spec_size == 4);
            struct kiln_spec_entry e;
            kiln_spec_entry_get(&st[0], 0, &e);
            KT_CHECK(e.constant_id == 3 && e.offset == 0 && e.size == 4);
            KT_CHECK(memcmp(st[0].spec_data, &value, 4) == 0);
        }
        kiln_cache_results_free(res, 1);
    }
    kiln_cache_close(c);

    /* Again: found by their keys, nothing stored. */
    KT_REQUIRE_OK(kiln_prepare(&o, NULL, NULL, &s));
    KT_CHECK_EQ(s.cached, 2);
    KT_CHECK_EQ(s.translated, 0);
    kiln_words_free(w);
}

/* ---- builders --------------------------------------------------------------- */

/* A builder for the application's kind: checks what it is given and builds
 * a real compute pipeline in a layout of its own (one storage buffer, no
 * push constants, as the state says), with the device's own functions. */
struct app_builder {
    _Atomic unsigned calls;
    _Atomic unsigned bad_requests;
    VkPipelineLayout layout;
    PFN_vkCreateComputePipelines create;
    bool keep; /* keep the pipelines itself (req->pipeline left null) */
    _Atomic unsigned kept;
    VkPipeline kept_pipelines[8];
    unsigned skip_magic; /* a state with this local_size is answered KILN_ENOTSUP */
};

static int app_build(void *user, struct kiln_build_request *req)
{
    struct app_builder *b = user;
    atomic_fetch_add(&b->calls, 1);
    struct app_state as;
    if (req->state_kind != KILN_STATE_APP || req->state_size != sizeof(as) || req->nstages != 1 ||
        req->stages[0].stage != VK_SHADER_STAGE_COMPUTE_BIT || !req->name || !req->vk ||
        !req->device || !req->get_device_proc_addr) {
        atomic_fetch_add(&b->bad_requests, 1);
        snprintf(req->why, sizeof(req->why), "unexpected request");
        return KILN_EINVAL;
    }
    memcpy(&as, req->state, sizeof(as));
    if (as.magic != APP_MAGIC) {
        snprintf(req->why, sizeof(req->why), "state magic %08x", as.magic);
        return KILN_EFORMAT;
    }
    if (as.local_size == b->skip_magic) {
        snprintf(req->why, sizeof(req->why), "local size %u not offered here", as.local_size);
        return KILN_ENOTSUP;
    }
    const VkSpecializationInfo *si = req->stages[0].pSpecializationInfo;
    if (!si || si->mapEntryCount != 1 || si->pMapEntries[0].constantID != 3 ||
        strcmp(req->stages[0].pName, "main") != 0) {
        atomic_fetch_add(&b->bad_requests, 1);
        snprintf(req->why, sizeof(req->why), "specialization or entry point lost");
        return KILN_EINVAL;
    }
    VkComputePipelineCreateInfo ci = {
        .sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
        .stage = req->stages[0],
        .layout = b->layout,
    };
    VkResult r = b->create(req->device, req->pipeline_cache, 1, &ci, NULL, &req->pipeline);
    if (r != VK_SUCCESS) {
        snprintf(req->why, sizeof(req->why), "vkCreateComputePipelines: %d", (int)r);
        return KILN_EVULKAN;
    }
    if (b->keep) {
        unsigned i = atomic_fetch_add(&b->kept, 1);
        MUST(i < 8);
        b->kept_pipelines[i] = req->pipeline;
        req->pipeline = VK_NULL_HANDLE;
    }
    return KILN_OK;
}

/* The test's layout for the builder, made on kiln's device. */
static void app_builder_init(struct app_builder *b, struct kiln_vk *vk)
{
    struct kiln_vk_handles h = KILN_VK_HANDLES_INIT;
    kiln_vk_get_handles(vk, &h);
    PFN_vkGetDeviceProcAddr gdpa =
        (PFN_vkGetDeviceProcAddr)h.get_instance_proc_addr(h.instance, "vkGetDeviceProcAddr");
    PFN_vkCreatePipelineLayout cpl =
        (PFN_vkCreatePipelineLayout)gdpa(h.device, "vkCreatePipelineLayout");
    b->create = (PFN_vkCreateComputePipelines)gdpa(h.device, "vkCreateComputePipelines");
    VkPushConstantRange pc = {.stageFlags = VK_SHADER_STAGE_COMPUTE_BIT, .size = 16};
    VkPipelineLayoutCreateInfo lci = {.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO,
                                      .setLayoutCount = 1,
                                      .pSetLayouts = &h.set_layout,
                                      .pushConstantRangeCount = 1,
                                      .pPushConstantRanges = &pc};
    KT_REQUIRE(cpl(h.device, &lci, NULL, &b->layout) == VK_SUCCESS);
}

static void app_builder_fini(struct app_builder *b, struct kiln_vk *vk)
{
    struct kiln_vk_handles h = KILN_VK_HANDLES_INIT;
    kiln_vk_get_handles(vk, &h);
    PFN_vkGetDeviceProcAddr gdpa =
        (PFN_vkGetDeviceProcAddr)h.get_instance_proc_addr(h.instance, "vkGetDeviceProcAddr");
    PFN_vkDestroyPipelineLayout dpl =
        (PFN_vkDestroyPipelineLayout)gdpa(h.device, "vkDestroyPipelineLayout");
    PFN_vkDestroyPipeline dp = (PFN_vkDestroyPipeline)gdpa(h.device, "vkDestroyPipeline");
    for (unsigned i = 0; i < atomic_load(&b->kept); i++)
        dp(h.device, b->kept_pipelines[i], NULL);
    dpl(h.device, b->layout, NULL);
}

struct taken {
    struct kiln_vk *vk;
    _Atomic unsigned n;
};

static void take_pipeline(void *user, struct kiln_key key, struct kiln_vk_pipeline *p)
{
    (void)key;
    struct taken *t = user;
    KT_CHECK(kiln_vk_pipeline_handle(p) != 0);
    atomic_fetch_add(&t->n, 1);
    kiln_vk_pipeline_destroy(t->vk, p);
}

/*
 * Five programs: two of the application's kind (one the builder skips),
 * one Fossilize one (no builder given), one of kiln's own shapes, one of
 * kiln's kind with stages its shapes lack. Each ends where its kind says,
 * in kiln_prepare and again in kiln_warm_start; without the builder the
 * application's programs are skipped with the reason. A Fossilize program
 * with no builder of its kind given goes to the core's Fossilize builder
 * (the default of KILN_STATE_FOZ), which refuses its bytes: not a closure.
 */
KT_CASE(builders_routing)
{
    struct kiln_vk *vk = pf_vk(NULL);
    size_t n = 0;
    uint32_t *w = glsl(KILN_VK_STAGE_COMPUTE_BIT, COMP_OK, &n);
    struct kiln_program *p[5];
    struct app_state as = {APP_MAGIC, 1}, skip = {APP_MAGIC, 64};
    p[0] = compute_program("app-built", w, n);
    set_state(p[0], KILN_STATE_APP, &as, sizeof(as));
    set_spec(p[0], 2);
    p[1] = compute_program("app-skipped", w, n);
    set_state(p[1], KILN_STATE_APP, &skip, sizeof(skip));
    set_spec(p[1], 2);
    p[2] = compute_program("foz-default-builder", w, n);
    set_state(p[2], KILN_STATE_FOZ, "fossil", 6);
    p[3] = compute_program("builtin", w, n);
    p[4] = compute_program("builtin-geometry", w, n);
    p[4]->stages[0].src.stage = KILN_VK_STAGE_GEOMETRY_BIT;
    KT_REQUIRE_OK(kiln_program_reserve(p[4], 2));
    p[4]->nstages = 2;
    p[4]->stages[1].src.stage = KILN_VK_STAGE_RAYGEN_BIT;
    p[4]->stages[1].src.name = strdup("rgen");
    p[4]->stages[1].words = malloc(n * 4);
    KT_REQUIRE(p[4]->stages[1].words);
    memcpy(p[4]->stages[1].words, w, n * 4);
    p[4]->stages[1].nwords = n;

    struct kiln_program arr_progs[5];
    for (int i = 0; i < 5; i++)
        arr_progs[i] = *p[i];
    struct kiln_program_array arr = {
        .size = sizeof(arr), .programs = arr_progs, .count = 5, .stamp = 7};
    struct kiln_program_source src = kiln_program_source_array(&arr);

    struct app_builder ab = {.skip_magic = 64};
    app_builder_init(&ab, vk);
    struct kiln_builder builders[1] = {{.size = sizeof(struct kiln_builder),
                                        .kind = KILN_STATE_APP,
                                        .user = &ab,
                                        .build = app_build,
                                        .name = "test-app"}};
    struct taken taken = {.vk = vk};
    char dir[4200];
    struct kiln_prepare_options o = KILN_PREPARE_OPTIONS_INIT;
    source_options(&o, dir, sizeof(dir), &src, 2);
    o.vk = vk;
    o.on_pipeline = take_pipeline;
    o.pipeline_user = &taken;
    o.builders = builders;
    o.nbuilders = 1;
    struct kiln_prepare_summary s = KILN_PREPARE_SUMMARY_INIT;
    KT_REQUIRE_OK(kiln_prepare(&o, NULL, NULL, &s));
    KT_CHECK_EQ(s.translated, 5);
    KT_CHECK_EQ(atomic_load(&ab.calls), 2);
    KT_CHECK_EQ(atomic_load(&ab.bad_requests), 0);
    KT_CHECK_EQ(s.pipelines_built, 2);
    KT_CHECK_EQ(s.pipelines_failed, 1);
    KT_CHECK_EQ(s.pipelines_skipped, 2);
    KT_CHECK_EQ(s.kinds[KILN_STATE_APP].built, 1);
    KT_CHECK_EQ(s.kinds[KILN_STATE_APP].skipped, 1);
    KT_CHECK(strstr(s.kinds[KILN_STATE_APP].skip_reason, "test-app: local size 64") != NULL);
    KT_CHECK_EQ(s.kinds[KILN_STATE_FOZ].skipped, 0);
    KT_CHECK_EQ(s.kinds[KILN_STATE_FOZ].failed, 1); /* "fossil" is no closure */
    KT_CHECK_EQ(s.kinds[KILN_STATE_BUILTIN].built, 1);
    KT_CHECK_EQ(s.kinds[KILN_STATE_BUILTIN].skipped, 1);
    KT_CHECK(strstr(s.kinds[KILN_STATE_BUILTIN].skip_reason, "ray tracing") != NULL);
    KT_CHECK_EQ(atomic_load(&taken.n), 2); /* both built pipelines reached the caller */

    /* The warm start, same builders, the builder keeping its pipelines. */
    ab.keep = true;
    struct kiln_start_options so = {.size = sizeof(so),
                                    .cache_dir = dir,
                                    .stamp = 7,
                                    .jobs = 2,
                                    .vk = vk,
                                    .on_pipeline = take_pipeline,
                                    .pipeline_user = &taken,
                                    .builders = builders,
                                    .nbuilders = 1};
    struct kiln_start_summary ss = KILN_START_SUMMARY_INIT;
    KT_REQUIRE_OK(kiln_warm_start(&so, NULL, NULL, &ss));
    KT_CHECK_EQ(ss.loaded, 5);
    KT_CHECK_EQ(ss.bad, 0);
    KT_CHECK_EQ(ss.pipelines_built, 2);
    KT_CHECK_EQ(ss.pipelines_skipped, 2);
    KT_CHECK_EQ(ss.kinds[KILN_STATE_APP].built, 1);
    KT_CHECK_EQ(ss.kinds[KILN_STATE_FOZ].failed, 1);
    KT_CHECK_EQ(atomic_load(&ab.kept), 1);
    KT_CHECK_EQ(atomic_load(&taken.n), 3); /* the builtin one only */

    /* Without the builder: the application's programs are skipped. */
    so.builders = NULL;
    so.nbuilders = 0;
    KT_REQUIRE_OK(kiln_warm_start(&so, NULL, NULL, &ss));
    KT_CHECK_EQ(ss.kinds[KILN_STATE_APP].skipped, 2);
    KT_CHECK(strcmp(ss.kinds[KILN_STATE_APP].skip_reason, "no builder for state kind 2") == 0);
    KT_CHECK_EQ(ss.pipelines_built, 1);

    /* A builder for a kind kiln does not know is bad input. */
    struct kiln_builder unknown = {.size = sizeof(unknown), .kind = 9, .build = app_build};
    so.builders = &unknown;
    so.nbuilders = 1;
    kiln_log_set_level(KILN_LOG_ERROR + 1);
    KT_CHECK_EQ(kiln_warm_start(&so, NULL, NULL, &ss), KILN_EINVAL);
    KT_CHECK_EQ(ss.step, KILN_PREP_STEP_INPUT);
    kiln_log_set_level(KILN_LOG_WARN);

    app_builder_fini(&ab, vk);
    for (int i = 0; i < 5; i++)
        kiln_program_destroy(p[i]);
    kiln_words_free(w);
    kiln_vk_destroy(vk);
}

/* ---- device extensions only where needed -------------------------------- */

#define GPL "VK_EXT_graphics_pipeline_library"

/* A builder that builds nothing: it notes whether its request's context
 * has the graphics pipeline library extension (its list: VK_KHR_pipeline_library
 * and GPL, bits 0 and 1), and skips. Its
 * extensions_needed answers `answer` and counts its calls. */
struct probe_builder {
    _Atomic unsigned builds, gpl_on, asked;
    uint64_t answer;
};

static int probe_build(void *user, struct kiln_build_request *req)
{
    struct probe_builder *b = user;
    atomic_fetch_add(&b->builds, 1);
    if (kiln_vk_extension_enabled(req->vk, GPL))
        atomic_fetch_add(&b->gpl_on, 1);
    snprintf(req->why, sizeof(req->why), "a probe builds nothing");
    return KILN_ENOTSUP;
}

static uint64_t probe_needed(void *user, const void *state, size_t size)
{
    struct probe_builder *b = user;
    struct app_state as;
    MUST(size == sizeof(as));
    memcpy(&as, state, sizeof(as));
    MUST(as.magic == APP_MAGIC); /* the program's own state bytes */
    atomic_fetch_add(&b->asked, 1);
    return b->answer;
}

/* Runs a warm start of `dir` with the probe, on a context kiln makes
 * (`vk` NULL) or on `vk`; resets the probe's counts first. */
static void probe_start(const char *dir, struct kiln_builder *bld, struct probe_builder *pb,
                        struct kiln_vk *vk)
{
    atomic_store(&pb->builds, 0);
    atomic_store(&pb->gpl_on, 0);
    atomic_store(&pb->asked, 0);
    struct kiln_start_options so = {.size = sizeof(so),
                                    .cache_dir = dir,
                                    .stamp = 5,
                                    .jobs = 2,
                                    .vk = vk,
                                    .builders = bld,
                                    .nbuilders = 1};
    struct kiln_start_summary ss = KILN_START_SUMMARY_INIT;
    KT_REQUIRE_OK(kiln_warm_start(&so, NULL, NULL, &ss));
    KT_CHECK_EQ(ss.kinds[KILN_STATE_APP].skipped, 2);
}

/*
 * A context kiln makes enables a builder's extension only when some
 * program needs it (kiln_builder.extensions_needed): a probe answering 0
 * for both programs sees VK_EXT_graphics_pipeline_library off in its
 * builds, answering its bit sees it on, and without the callback it is on
 * (every extension, as before the callback). Bits past the builder's list
 * are ignored; a context the caller gives is used as it is, without
 * asking; more than 64 extensions is refused. Needs lavapipe's GPL.
 */
KT_CASE(extensions_needed)
{
    pf_need_vulkan();
    /* GPL is enabled only with the extension it depends on. */
    const char *exts[2] = {"VK_KHR_pipeline_library", GPL};
    struct kiln_vk_options vo = {
        .size = sizeof(vo), .extra_extensions = exts, .extra_extension_count = 2};
    struct kiln_vk *vk = NULL;
    KT_REQUIRE_OK(kiln_vk_create(&vo, &vk));
    if (!kiln_vk_extension_enabled(vk, GPL)) {
        fprintf(stderr, "the device does not offer " GPL ": nothing to tell\n");
        kiln_vk_destroy(vk);
        return;
    }
    size_t n = 0;
    uint32_t *w = glsl(KILN_VK_STAGE_COMPUTE_BIT, COMP_OK, &n);
    struct kiln_program *p[2];
    struct app_state as[2] = {{APP_MAGIC, 1}, {APP_MAGIC, 2}};
    struct kiln_program arr_progs[2];
    for (int i = 0; i < 2; i++) {
        p[i] = compute_program(i ? "probe-b" : "probe-a", w, n);
        set_state(p[i], KILN_STATE_APP, &as[i], sizeof(as[i]));
        arr_progs[i] = *p[i];
    }
    struct kiln_program_array arr = {
        .size = sizeof(arr), .programs = arr_progs, .count = 2, .stamp = 5};
    struct kiln_program_source src = kiln_program_source_array(&arr);

    struct probe_builder pb = {.answer = 0};
    struct kiln_builder bld = {.size = sizeof(bld),
                               .kind = KILN_STATE_APP,
                               .user = &pb,
                               .build = probe_build,
                               .name = "probe",
                               .device_extensions = exts,
                               .ndevice_extensions = 2,
                               .extensions_needed = probe_needed};
    char dir[4200];
    struct kiln_prepare_options o = KILN_PREPARE_OPTIONS_INIT;
    source_options(&o, dir, sizeof(dir), &src, 2);
    o.builders = &bld;
    o.nbuilders = 1;
    struct kiln_prepare_summary s = KILN_PREPARE_SUMMARY_INIT;
    kiln_log_set_level(KILN_LOG_ERROR); /* the probe's skips are not news */
    KT_REQUIRE_OK(kiln_prepare(&o, NULL, NULL, &s));
    KT_CHECK_EQ(s.kinds[KILN_STATE_APP].skipped, 2);
    KT_CHECK_EQ(atomic_load(&pb.asked), 2); /* once per program */
    KT_CHECK_EQ(atomic_load(&pb.builds), 2);
    KT_CHECK_EQ(atomic_load(&pb.gpl_on), 0);

    /* The warm start: off with 0, and with only a bit past the list. */
    probe_start(dir, &bld, &pb, NULL);
    KT_CHECK_EQ(atomic_load(&pb.asked), 2);
    KT_CHECK_EQ(atomic_load(&pb.gpl_on), 0);
    pb.answer = 4;
    probe_start(dir, &bld, &pb, NULL);
    KT_CHECK_EQ(atomic_load(&pb.builds), 2);
    KT_CHECK_EQ(atomic_load(&pb.gpl_on), 0);
    /* Its bits: on. */
    pb.answer = 3;
    probe_start(dir, &bld, &pb, NULL);
    KT_CHECK_EQ(atomic_load(&pb.builds), 2);
    KT_CHECK_EQ(atomic_load(&pb.gpl_on), 2);
    /* No callback: every extension, as before. */
    bld.extensions_needed = NULL;
    probe_start(dir, &bld, &pb, NULL);
    KT_CHECK_EQ(atomic_load(&pb.asked), 0);
    KT_CHECK_EQ(atomic_load(&pb.gpl_on), 2);
    /* The caller's context: as it is (GPL on), the callback not asked. */
    bld.extensions_needed = probe_needed;
    pb.answer = 0;
    probe_start(dir, &bld, &pb, vk);
    KT_CHECK_EQ(atomic_load(&pb.asked), 0);
    KT_CHECK_EQ(atomic_load(&pb.gpl_on), 2);

    /* One bit each: at most 64 extensions. */
    const char *many[65];
    for (int i = 0; i < 65; i++)
        many[i] = i ? GPL : "VK_KHR_pipeline_library";
    bld.device_extensions = many;
    bld.ndevice_extensions = 65;
    struct kiln_start_options so = {
        .size = sizeof(so), .cache_dir = dir, .stamp = 5, .builders = &bld, .nbuilders = 1};
    struct kiln_start_summary ss = KILN_START_SUMMARY_INIT;
    kiln_log_set_level(KILN_LOG_ERROR + 1);
    KT_CHECK_EQ(kiln_warm_start(&so, NULL, NULL, &ss), KILN_EINVAL);
    KT_CHECK_EQ(ss.step, KILN_PREP_STEP_INPUT);
    kiln_log_set_level(KILN_LOG_ERROR);
    bld.ndevice_extensions = 64; /* the most: accepted */
    pb.answer = UINT64_MAX;
    probe_start(dir, &bld, &pb, NULL);
    KT_CHECK_EQ(atomic_load(&pb.gpl_on), 2);
    kiln_log_set_level(KILN_LOG_WARN);

    for (int i = 0; i < 2; i++)
        kiln_program_destroy(p[i]);
    kiln_words_free(w);
    kiln_vk_destroy(vk);
}

/* ---- kiln's own layout checked first ----------------------------------------- */

/*
 * A module using binding 0 as a storage image, and one with 32 bytes of
 * push constants, are refused before the driver sees them (one line each)
 * and counted as skipped, with the reason, as a shape kiln lacks is; the
 * matching one beside them is built, in the preparation and in the warm
 * start.
 */
KT_CASE(layout_mismatch_refused)
{
    struct kiln_vk *vk = pf_vk(NULL);
    kiln_vk_destroy(vk); /* only to skip without Vulkan */
    const char *texts[3] = {COMP_OK, COMP_IMAGE, COMP_PUSH32};
    const char *names[3] = {"ok", "storage-image", "push-32"};
    struct kiln_program *p[3];
    struct kiln_program arr_progs[3];
    uint32_t *w[3];
    for (int i = 0; i < 3; i++) {
        size_t n = 0;
        w[i] = glsl(KILN_VK_STAGE_COMPUTE_BIT, texts[i], &n);
        p[i] = compute_program(names[i], w[i], n);
        arr_progs[i] = *p[i];
    }
    struct kiln_program_array arr = {
        .size = sizeof(arr), .programs = arr_progs, .count = 3, .stamp = 1};
    struct kiln_program_source src = kiln_program_source_array(&arr);
    char dir[4200];
    struct kiln_prepare_options o = KILN_PREPARE_OPTIONS_INIT;
    source_options(&o, dir, sizeof(dir), &src, 2);
    struct kiln_prepare_summary s = KILN_PREPARE_SUMMARY_INIT;
    KT_REQUIRE_OK(kiln_prepare(&o, NULL, NULL, &s));
    KT_CHECK_EQ(s.pipelines_built, 1);
    KT_CHECK_EQ(s.pipelines_skipped, 2);
    KT_CHECK_EQ(s.pipelines_failed, 0);
    KT_CHECK_EQ(s.kinds[KILN_STATE_BUILTIN].skipped, 2);
    KT_CHECK(strcmp(s.kinds[KILN_STATE_BUILTIN].skip_reason,
                    "its stages do not fit kiln's layout") == 0);

    struct kiln_start_options so = {.size = sizeof(so), .cache_dir = dir, .stamp = 1, .jobs = 2};
    struct kiln_start_summary ss = KILN_START_SUMMARY_INIT;
    KT_REQUIRE_OK(kiln_warm_start(&so, NULL, NULL, &ss));
    KT_CHECK_EQ(ss.pipelines_built, 1);
    KT_CHECK_EQ(ss.pipelines_skipped, 2);
    KT_CHECK_EQ(ss.pipelines_failed, 0);
    KT_CHECK_EQ(ss.bad, 0);
    for (int i = 0; i < 3; i++) {
        kiln_program_destroy(p[i]);
        kiln_words_free(w[i]);
    }
}

/* ---- the application's own Vulkan context ---------------------------------- */

/*
 * kiln builds in the application's device and pipeline cache, and leaves
 * them alive when its context goes: the application can still use both,
 * and destroys them itself.
 */
KT_CASE(external_context)
{
    struct pf_own_vulkan v;
    pf_own_vulkan_make(&v);
    PFN_vkCreatePipelineLayout cpl =
        (PFN_vkCreatePipelineLayout)v.gdpa(v.device, "vkCreatePipelineLayout");
    PFN_vkDestroyPipelineLayout dpl =
        (PFN_vkDestroyPipelineLayout)v.gdpa(v.device, "vkDestroyPipelineLayout");
    VkPipelineCache cache = v.cache;
    size_t before = pf_own_cache_bytes(&v);

    struct kiln_vk_external ext = pf_own_external(&v);
    struct kiln_vk_options vo = {.size = sizeof(vo), .external = &ext};
    struct kiln_vk *vk = NULL;
    KT_REQUIRE_OK(kiln_vk_create(&vo, &vk));
    struct kiln_vk_handles h = KILN_VK_HANDLES_INIT;
    kiln_vk_get_handles(vk, &h);
    KT_CHECK(h.device == v.device && h.instance == v.instance && h.pipeline_cache == cache);
    KT_CHECK(!kiln_vk_get_info(vk)->chained_stages); /* maintenance5 not said to be on */

    /* A preparation in it, through the builtin builder. */
    size_t n = 0;
    uint32_t *w = glsl(KILN_VK_STAGE_COMPUTE_BIT, COMP_OK, &n);
    struct kiln_program_stage st = {
        .src = {.stage = KILN_VK_STAGE_COMPUTE_BIT, .name = "c"}, .words = w, .nwords = n};
    struct kiln_program prog = {.size = sizeof(struct kiln_program),
                                .stage_size = sizeof(struct kiln_program_stage),
                                .name = "ext",
                                .nstages = 1,
                                .stages = &st};
    struct kiln_program_array arr = {
        .size = sizeof(arr), .programs = &prog, .count = 1, .stamp = 3};
    struct kiln_program_source src = kiln_program_source_array(&arr);
    char dir[4200];
    struct kiln_prepare_options o = KILN_PREPARE_OPTIONS_INIT;
    source_options(&o, dir, sizeof(dir), &src, 0);
    o.vk = vk;
    struct kiln_prepare_summary s = KILN_PREPARE_SUMMARY_INIT;
    KT_REQUIRE_OK(kiln_prepare(&o, NULL, NULL, &s));
    KT_CHECK_EQ(s.pipelines_built, 1);
    kiln_vk_destroy(vk);

    /* Still the application's, and alive: the cache holds the pipeline. */
    KT_CHECK(pf_own_cache_bytes(&v) >= before);
    VkPipelineLayoutCreateInfo lci = {.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO};
    VkPipelineLayout layout;
    KT_CHECK(cpl(v.device, &lci, NULL, &layout) == VK_SUCCESS);
    dpl(v.device, layout, NULL);

    /* Missing handles are bad input, and nothing of the application's goes. */
    struct kiln_vk_external partial = ext;
    partial.device = VK_NULL_HANDLE;
    vo.external = &partial;
    kiln_log_set_level(KILN_LOG_ERROR + 1);
    KT_CHECK_EQ(kiln_vk_create(&vo, &vk), KILN_EINVAL);
    partial = ext;
    partial.queue_family = 999;
    KT_CHECK_EQ(kiln_vk_create(&vo, &vk), KILN_EINVAL);
    kiln_log_set_level(KILN_LOG_WARN);
    KT_CHECK(cpl(v.device, &lci, NULL, &layout) == VK_SUCCESS);
    dpl(v.device, layout, NULL);

    pf_own_vulkan_destroy(&v);
    kiln_words_free(w);
}

/* ---- Fossilize state through the core's builders ----------------------------- */

/* The records a cache holds. */
static size_t records_in(const char *dir, uint64_t stamp)
{
    struct kiln_cache_options co = {
        .size = sizeof(co), .stamp = stamp, .flags = KILN_CACHE_READ_ONLY};
    struct kiln_cache *c = NULL;
    MUST(KILN_OK == kiln_cache_open(dir, &co, &c));
    size_t n = kiln_cache_count(c);
    kiln_cache_close(c);
    return n;
}

/*
 * The whole path with the Fossilize builder (src/foz) plugged in:
 * every pipeline of three recorded archives (graphics with specialization
 * constants, tessellation, computeraytracing) becomes a program of kind
 * KILN_STATE_FOZ, kiln_prepare stores and builds them through the builder
 * in their archives' own layouts, and the warm start builds them again
 * from the cache alone. (The compute module of computeraytracing fails
 * SPIR-V validation but is well-formed: under the Fossilize builder, whose
 * programs are recorded (KILN_BUILDER_RECORDED_SPIRV), it is stored and
 * built with a warning, counted in recorded_invalid; the same builder
 * without the flag refuses it before the driver.)
 */
KT_CASE(foz_state_builder)
{
    kt_require_corpus("foz/sascha-willems");
    struct kiln_vk *vk = pf_vk(NULL);
    const char *archives[] = {"specializationconstants", "tessellation", "computeraytracing"};
    struct kiln_program *progs[64];
    struct kiln_program arr_progs[64];
    size_t n = 0;
    for (size_t a = 0; a < ARRAY_LEN(archives); a++) {
        char path[4096];
        snprintf(path, sizeof(path), "%s/foz/sascha-willems/%s.f93c6e96adcd7946.1.foz",
                 kt_corpus_dir(), archives[a]);
        struct kiln_foz *foz = NULL;
        KT_REQUIRE_OK(kiln_foz_open(NULL, path, &foz));
        struct kiln_foz_index *idx = NULL;
        KT_REQUIRE_OK(kiln_foz_index_create(foz, &idx));
        const struct kiln_foz_pipeline_ref *refs = NULL;
        size_t np = kiln_foz_index_pipelines(idx, &refs);
        KT_CHECK(np > 0);
        for (size_t i = 0; i < np && n < ARRAY_LEN(progs); i++) {
            KT_REQUIRE_OK(kiln_foz_pipeline_program(idx, &refs[i], &progs[n]));
            KT_CHECK_EQ(progs[n]->state_kind, KILN_STATE_FOZ);
            arr_progs[n] = *progs[n];
            n++;
        }
        kiln_foz_index_destroy(idx);
        kiln_foz_close(foz);
    }
    KT_REQUIRE(n > 0);
    struct kiln_program_array arr = {
        .size = sizeof(arr), .programs = arr_progs, .count = n, .stamp = 0xf02};
    struct kiln_program_source src = kiln_program_source_array(&arr);
    struct kiln_builder fb = KILN_BUILDER_INIT;
    KT_REQUIRE_OK(kiln_foz_kiln_builder_create(NULL, &fb));

    char dir[4200];
    struct kiln_prepare_options o = KILN_PREPARE_OPTIONS_INIT;
    source_options(&o, dir, sizeof(dir), &src, 2);
    o.vk = vk;
    o.builders = &fb;
    o.nbuilders = 1;
    struct kiln_prepare_summary s = KILN_PREPARE_SUMMARY_INIT;
    KT_REQUIRE_OK(kiln_prepare(&o, NULL, NULL, &s));
    const struct kiln_kind_counts *k = &s.kinds[KILN_STATE_FOZ];
    /* Archives share pipelines (same closure, same key): stored once. */
    size_t unique = 0;
    for (size_t i = 0; i < n; i++) {
        bool seen = false;
        for (size_t j = 0; j < i && !seen; j++)
            seen = kiln_key_equal(progs[i]->key, progs[j]->key);
        unique += !seen;
    }
    /* A module SPIR-V's validator refuses (computeraytracing's compute
     * module) is stored and built all the same: recorded, and it parses. */
    KT_CHECK(fb.flags & KILN_BUILDER_RECORDED_SPIRV);
    KT_CHECK_EQ(s.failed, 0);
    KT_CHECK_EQ(s.recorded_invalid, 1);
    KT_CHECK_EQ(s.translated + s.cached, n);
    size_t records = records_in(dir, 0xf02);
    KT_CHECK(records > 0 && records <= unique);
    KT_CHECK_EQ(k->failed, 0);
    KT_CHECK(k->built > 0);
    KT_CHECK_EQ(k->built + k->skipped, n - s.failed);
    uint64_t built = k->built;

    struct kiln_start_options so = {.size = sizeof(so),
                                    .cache_dir = dir,
                                    .stamp = 0xf02,
                                    .jobs = 2,
                                    .vk = vk,
                                    .builders = &fb,
                                    .nbuilders = 1};
    struct kiln_start_summary ss = KILN_START_SUMMARY_INIT;
    KT_REQUIRE_OK(kiln_warm_start(&so, NULL, NULL, &ss));
    KT_CHECK_EQ(ss.loaded, records);
    KT_CHECK_EQ(ss.kinds[KILN_STATE_FOZ].built + ss.kinds[KILN_STATE_FOZ].skipped, records);
    KT_CHECK(ss.kinds[KILN_STATE_FOZ].built > 0 && ss.kinds[KILN_STATE_FOZ].built <= built);
    KT_CHECK_EQ(ss.kinds[KILN_STATE_FOZ].failed, 0);
    /* Stored unmarked, so checked again, under the builder's rule. */
    KT_CHECK_EQ(ss.recorded_invalid, 1);
    KT_CHECK_EQ(ss.bad, 0);

    /* The same builder without the flag: that module is refused (bad). */
    struct kiln_builder strict = fb;
    strict.flags = 0;
    so.builders = &strict;
    KT_REQUIRE_OK(kiln_warm_start(&so, NULL, NULL, &ss));
    KT_CHECK_EQ(ss.bad, 1);
    KT_CHECK_EQ(ss.recorded_invalid, 0);
    KT_CHECK_EQ(ss.kinds[KILN_STATE_FOZ].built + ss.kinds[KILN_STATE_FOZ].skipped, records - 1);

    kiln_foz_kiln_builder_destroy(&fb);
    for (size_t i = 0; i < n; i++)
        kiln_program_destroy(progs[i]);
    kiln_vk_destroy(vk);
}

KT_MAIN(KT_ENTRY(payload_v3), KT_ENTRY(key_stable), KT_ENTRY(array_source_round_trip),
        KT_ENTRY(builders_routing), KT_ENTRY(layout_mismatch_refused), KT_ENTRY(external_context),
        KT_ENTRY(foz_state_builder), KT_ENTRY(extensions_needed))
