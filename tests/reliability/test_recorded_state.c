/*
 * test_recorded_state.c - recorded state that no driver may be handed
 * (issue 29, findings 1 and 4): well-formed Fossilize archives whose
 * recorded pipeline is impossible, crafted here (tests/support/
 * foz_writer.c), one case each.
 *
 * Each case writes an archive of one good graphics pipeline and the bad
 * one, and another archive of six good pipelines, then checks that
 *   - `kiln import foz` refuses the bad one with one line naming the rule,
 *     counts it (`refused` in --json), imports the seven good ones and
 *     exits 1 (something skipped, everything good stored), never 2;
 *   - records planted straight into a cache, as an older kiln or another
 *     writer would have stored them, are skipped by `kiln start` with the
 *     rule named (counted as skipped), the good one built, no crash;
 *   - `kiln prepare --corpus` of the archive refuses it the same way.
 * Before the checks (c4628d3) the import stored them (or stopped at the
 * first, exit 2) and the builds crashed in lavapipe. `mutations` plants
 * the good pipeline with one random edge value or missing member each
 * time and starts it: whatever is built or skipped, nothing may crash. Needs shaderc and a
 * Vulkan device: without either a case prints "skipped:" and exits 77.
 */
#include "kiln_test.h"
#include "foz_writer.h"
#include "kt_cli.h"
#include "kiln/foz.h"

#include <inttypes.h>
#include <json.h>
#include <stdlib.h>
#include <string.h>

#define GOOD_HASH  UINT64_C(0x600d000000000001)
#define BAD_HASH   UINT64_C(0xbad0000000000001)
#define OBJ_HASH   UINT64_C(0x0b1000000000001)
#define OTHER_HASH UINT64_C(0x0700000000000000)

#define BLEND_ATTACHMENT                                                                     \
    "{\"dstAlphaBlendFactor\":0,\"srcAlphaBlendFactor\":0,\"dstColorBlendFactor\":0,"        \
    "\"srcColorBlendFactor\":0,\"colorWriteMask\":15,\"alphaBlendOp\":0,\"colorBlendOp\":0," \
    "\"blendEnable\":0}"

/* The state blocks of a graphics pipeline; a variant replaces one (an
 * empty string leaves it out). */
enum block { B_DYNAMIC, B_MULTISAMPLE, B_VERTEX, B_RASTER, B_ASSEMBLY, B_BLEND, B_VIEWPORT, B_N };

static const char *const good_blocks[B_N] = {
    [B_DYNAMIC] = "\"dynamicState\":{\"flags\":0,\"dynamicState\":[0,1]}",
    [B_MULTISAMPLE] = "\"multisampleState\":{\"flags\":0,\"rasterizationSamples\":1,"
                      "\"sampleShadingEnable\":0,\"minSampleShading\":0.0,\"alphaToOneEnable\":0,"
                      "\"alphaToCoverageEnable\":0}",
    [B_VERTEX] = "\"vertexInputState\":{\"flags\":0,\"attributes\":[],\"bindings\":[]}",
    [B_RASTER] = "\"rasterizationState\":{\"flags\":0,\"depthBiasConstantFactor\":0.0,"
                 "\"depthBiasSlopeFactor\":0.0,\"depthBiasClamp\":0.0,\"depthBiasEnable\":0,"
                 "\"depthClampEnable\":0,\"polygonMode\":0,\"rasterizerDiscardEnable\":0,"
                 "\"frontFace\":0,\"lineWidth\":1.0,\"cullMode\":0}",
    [B_ASSEMBLY] =
        "\"inputAssemblyState\":{\"flags\":0,\"topology\":3,\"primitiveRestartEnable\":0}",
    [B_BLEND] = "\"colorBlendState\":{\"flags\":0,\"logicOp\":0,\"logicOpEnable\":0,"
                "\"blendConstants\":[0.0,0.0,0.0,0.0],\"attachments\":[" BLEND_ATTACHMENT "]}",
    [B_VIEWPORT] = "\"viewportState\":{\"flags\":0,\"viewportCount\":1,\"scissorCount\":1}",
};

/* One impossible pipeline: what it changes, and the rule its refusal
 * names (at import, with kiln's bounds; at build, with the device's). */
struct variant {
    const char *name;
    uint64_t layout, pass;     /* 0: FW_PIPE_LAYOUT, FW_RENDER_PASS */
    bool null_layout;          /* the layout recorded as a null handle */
    uint32_t vertex_stage;     /* 0: VK_SHADER_STAGE_VERTEX_BIT */
    const char *vertex_extra;  /* more members of the vertex stage */
    const char *fragment_name; /* NULL: "main" */
    enum block block;          /* replaced by `replacement` when it is set */
    char *replacement;
    unsigned extra_tag; /* an extra object (a layout, a render pass) */
    char *extra;
    const char *rule_import, *rule_build;
};

static char *text(size_t cap)
{
    char *s = malloc(cap);
    KT_NEED(s);
    s[0] = '\0';
    return s;
}

/* A colour blend state of `n` attachments. */
static char *blend_of(unsigned n)
{
    size_t cap = 256 + (size_t)n * (sizeof(BLEND_ATTACHMENT) + 1);
    char *s = text(cap);
    size_t used =
        (size_t)snprintf(s, cap,
                         "\"colorBlendState\":{\"flags\":0,\"logicOp\":0,\"logicOpEnable\":0,"
                         "\"blendConstants\":[0.0,0.0,0.0,0.0],\"attachments\":[");
    for (unsigned i = 0; i < n; i++)
        used += (size_t)snprintf(s + used, cap - used, "%s" BLEND_ATTACHMENT, i ? "," : "");
    snprintf(s + used, cap - used, "]}");
    return s;
}

/* A vertex input state of `n` attributes (locations 0..n-1) of binding 0. */
static char *attributes_of(unsigned n)
{
    size_t cap = 256 + (size_t)n * 64;
    char *s = text(cap);
    size_t used = (size_t)snprintf(s, cap, "\"vertexInputState\":{\"flags\":0,\"attributes\":[");
    for (unsigned i = 0; i < n; i++)
        used += (size_t)snprintf(s + used, cap - used,
                                 "%s{\"location\":%u,\"binding\":0,\"format\":100,\"offset\":0}",
                                 i ? "," : "", i);
    snprintf(s + used, cap - used,
             "],\"bindings\":[{\"binding\":0,\"stride\":16,\"inputRate\":0}]}");
    return s;
}

/* A pipeline layout of `n` set layouts (each fw's one). */
static char *layout_of(unsigned n)
{
    size_t cap = 256 + (size_t)n * 20;
    char *s = text(cap);
    size_t used = (size_t)snprintf(s, cap,
                                   "{\"version\":6,\"pipelineLayouts\":{\"%016" PRIx64
                                   "\":{\"flags\":0,\"pushConstantRanges\":[],\"setLayouts\":[",
                                   OBJ_HASH);
    for (unsigned i = 0; i < n; i++)
        used += (size_t)snprintf(s + used, cap - used, "%s\"%016" PRIx64 "\"", i ? "," : "",
                                 FW_SET_LAYOUT);
    snprintf(s + used, cap - used, "]}}}");
    return s;
}

static char *dup_text(const char *s)
{
    char *d = text(strlen(s) + 1);
    memcpy(d, s, strlen(s) + 1);
    return d;
}

/* The variant `name` (the case's name). */
static struct variant variant_of(const char *name)
{
    struct variant v = {.name = name, .block = B_N};
    if (strcmp(name, "stage_out_of_range") == 0) {
        v.vertex_stage = 0x7fffffff;
        v.rule_import = v.rule_build = "stage 0 has stage 0x7fffffff, not one graphics";
    } else if (strcmp(name, "null_layout") == 0) {
        v.null_layout = true;
        v.rule_import = v.rule_build = "a null pipeline layout";
    } else if (strcmp(name, "blend_attachments") == 0) {
        v.block = B_BLEND;
        v.replacement = blend_of(100);
        v.rule_import = "100 colour-blend attachments, more than any device's maxColorAttachments";
        v.rule_build = "100 colour-blend attachments, more than the device's maxColorAttachments";
    } else if (strcmp(name, "vertex_attributes") == 0) {
        v.block = B_VERTEX;
        v.replacement = attributes_of(10000);
        v.rule_import = "10000 vertex attributes, more than any device's maxVertexInputAttributes";
        v.rule_build = "10000 vertex attributes, more than the device's maxVertexInputAttributes";
    } else if (strcmp(name, "no_rasterization") == 0) {
        v.block = B_RASTER;
        v.replacement = dup_text("");
        v.rule_import = v.rule_build = "no rasterization state";
    } else if (strcmp(name, "static_viewport_missing") == 0) {
        v.block = B_DYNAMIC;
        v.replacement = dup_text("\"dynamicState\":{\"flags\":0,\"dynamicState\":[1]}");
        v.rule_import = v.rule_build = "a static viewport count of 1 with 0 viewports";
    } else if (strcmp(name, "set_layouts") == 0) {
        v.layout = OBJ_HASH;
        v.extra_tag = KILN_FOZ_TAG_PIPELINE_LAYOUT;
        v.extra = layout_of(1000);
        v.rule_import =
            "1000 descriptor set layouts, more than any device's maxBoundDescriptorSets";
        v.rule_build = "1000 descriptor set layouts, more than the device's maxBoundDescriptorSets";
    } else if (strcmp(name, "no_subpass") == 0) {
        v.pass = OBJ_HASH;
        v.extra_tag = KILN_FOZ_TAG_RENDER_PASS;
        v.extra = text(512);
        snprintf(v.extra, 512,
                 "{\"version\":6,\"renderPasses\":{\"%016" PRIx64 "\":{\"flags\":0,"
                 "\"attachments\":[{\"flags\":0,\"format\":37,\"finalLayout\":2,"
                 "\"initialLayout\":0,\"loadOp\":1,\"storeOp\":0,\"samples\":1,"
                 "\"stencilLoadOp\":2,\"stencilStoreOp\":1}],\"subpasses\":[]}}}",
                 OBJ_HASH);
        v.rule_import = v.rule_build = "has no subpass";
    } else if (strcmp(name, "spec_past_data") == 0) {
        v.vertex_extra = ",\"specializationInfo\":{\"dataSize\":4,\"data\":\"BwAAAA==\","
                         "\"mapEntries\":[{\"offset\":2,\"size\":4,\"constantID\":0}]}";
        v.rule_import = v.rule_build = "lies past its 4 bytes of data";
    } else {
        KT_NEED(strcmp(name, "empty_entry_point") == 0);
        v.fragment_name = "";
        v.rule_import = v.rule_build = "stage 1 has an empty entry point name";
    }
    return v;
}

/* The JSON of graphics pipeline `hash`: the good one, or the variant's. */
static char *graphics_json(const struct fw_crafted *a, uint64_t hash, const struct variant *v)
{
    size_t cap = 4096 + (v && v->replacement ? strlen(v->replacement) : 0);
    char *blocks = text(cap), *s = text(cap + 2048);
    size_t used = 0;
    for (int b = 0; b < B_N; b++) {
        const char *t = v && v->block == (enum block)b ? v->replacement : good_blocks[b];
        if (t[0])
            used += (size_t)snprintf(blocks + used, cap - used, "%s,", t);
    }
    uint64_t layout = v && v->layout ? v->layout : FW_PIPE_LAYOUT;
    uint64_t pass = v && v->pass ? v->pass : FW_RENDER_PASS;
    snprintf(s, cap + 2048,
             "{\"version\":6,\"graphicsPipelines\":{\"%016" PRIx64 "\":{\"flags\":0,"
             "\"basePipelineHandle\":\"0000000000000000\",\"basePipelineIndex\":-1,"
             "\"layout\":\"%016" PRIx64 "\",\"renderPass\":\"%016" PRIx64 "\",\"subpass\":0,%s"
             "\"stages\":[{\"flags\":0,\"stage\":%u,\"module\":\"%016" PRIx64
             "\",\"name\":\"main\"%s},{\"flags\":0,\"stage\":16,\"module\":\"%016" PRIx64
             "\",\"name\":\"%s\"}]}}}",
             hash, v && v->null_layout ? 0 : layout, pass, blocks,
             v && v->vertex_stage ? v->vertex_stage : 1u, a->vert,
             v && v->vertex_extra ? v->vertex_extra : "", a->frag,
             v && v->fragment_name ? v->fragment_name : "main");
    free(blocks);
    return s;
}

/* Writes the crafted archive (the good pipeline, then the bad one) and the
 * other archive of six good pipelines. */
static void write_archives(const struct variant *v, const char *crafted, const char *other)
{
    struct fw_crafted a;
    FW_NEED(fw_crafted_begin(crafted, &a));
    if (v->extra)
        fw_crafted_add(&a, v->extra_tag, OBJ_HASH, v->extra);
    char *good = graphics_json(&a, GOOD_HASH, NULL), *bad = graphics_json(&a, BAD_HASH, v);
    fw_crafted_add(&a, KILN_FOZ_TAG_GRAPHICS_PIPELINE, GOOD_HASH, good);
    fw_crafted_add(&a, KILN_FOZ_TAG_GRAPHICS_PIPELINE, BAD_HASH, bad);
    free(good);
    free(bad);
    KT_NEED(fw_crafted_finish(&a, crafted) == 0);
    KT_NEED(fw_write_pipelines(other, 2, 4, OTHER_HASH) == 0);
}

/* ---------------------------------------------------------------------------
 * The command and its output
 * ------------------------------------------------------------------------ */

/* @return how many lines of the stderr of the run whose output is `out`
 * (the file `out`.err) hold both `a` and `b`. */
static int err_lines_with(const char *out, const char *a, const char *b)
{
    char path[4300];
    snprintf(path, sizeof(path), "%s.err", out);
    FILE *f = fopen(path, "r");
    KT_NEED(f);
    char line[8192];
    int n = 0;
    while (fgets(line, sizeof(line), f))
        n += strstr(line, a) != NULL && strstr(line, b) != NULL;
    fclose(f);
    return n;
}

/* ---------------------------------------------------------------------------
 * Planting records as an older kiln would have stored them
 * ------------------------------------------------------------------------ */

/* Stores every pipeline of the archive at `foz` in a new cache `dir`
 * without any check: its closure and stages as kiln_foz_pipeline_program
 * makes them (entry point and specialization left to the closure, which
 * the builder reads). */
static void plant(const char *foz, const char *dir)
{
    struct kiln_foz *f;
    KT_NEED(kiln_foz_open(NULL, foz, &f) == 0);
    struct kiln_foz_index *idx;
    KT_NEED(kiln_foz_index_create(f, &idx) == 0);
    kiln_foz_close(f);
    kt_mkdir(dir);
    struct kiln_cache_options o = {.size = sizeof(o),
                                   .stamp = KILN_FOZ_STAMP,
                                   .flags = KILN_CACHE_CREATE | KILN_CACHE_USE_DICT};
    struct kiln_cache *c;
    KT_NEED(kiln_cache_open(dir, &o, &c) == 0);
    const struct kiln_foz_pipeline_ref *refs;
    size_t n = kiln_foz_index_pipelines(idx, &refs);
    for (size_t i = 0; i < n; i++) {
        struct kiln_program *p;
        if (kiln_foz_pipeline_program(idx, &refs[i], &p) != 0)
            continue; /* no closure or stages: nothing an older kiln stored either */
        struct kiln_stage_blob st[KILN_FOZ_MAX_STAGES];
        memset(st, 0, sizeof(st));
        size_t spirv = 0;
        for (unsigned s = 0; s < p->nstages; s++) {
            size_t bs;
            void *blob;
            KT_NEED(kiln_pack(p->stages[s].words, p->stages[s].nwords, KILN_CODEC_KILN,
                              kiln_cache_dict(c), &blob, &bs) == 0);
            st[s] = (struct kiln_stage_blob){
                .stage = (uint32_t)p->stages[s].src.stage, .blob = blob, .blob_size = bs};
            spirv += p->stages[s].nwords * 4;
        }
        struct kiln_payload_state state = {
            .kind = KILN_STATE_FOZ, .bytes = p->state, .size = p->state_size};
        void *payload;
        size_t ps;
        KT_NEED(kiln_program_payload_build_full(&state, st, p->nstages, &payload, &ps) == 0);
        KT_NEED(kiln_cache_put(c, p->key, payload, ps, (uint32_t)spirv, KILN_CODEC_KILN,
                               (uint16_t)p->nstages) == 0);
        kiln_pack_free(payload);
        for (unsigned s = 0; s < p->nstages; s++)
            kiln_pack_free((void *)st[s].blob);
        kiln_program_destroy(p);
    }
    KT_NEED(kiln_cache_sync(c) == 0);
    kiln_cache_close(c);
    kiln_foz_index_destroy(idx);
}

/* ---------------------------------------------------------------------------
 * The cases
 * ------------------------------------------------------------------------ */

/* Runs `kiln ARGS` with stdout in `out`, printing its exit code after
 * `what`. @return its JSON output (*rc: the exit code); a run that found no
 * Vulkan device ends the case as skipped. */
static struct json_object *run_json(const char *out, const char *args, const char *what, int *rc)
{
    *rc = kt_cli_run(out, args);
    printf("%s: exit %d\n", what, *rc);
    struct json_object *o = kt_cli_json(out);
    kt_cli_require_vulkan(o, out);
    return o;
}

static void check_import(const struct variant *v, const char *dir, const char *crafted,
                         const char *other)
{
    char out[4200], args[13000];
    snprintf(out, sizeof(out), "%s/import.json", dir);
    snprintf(args, sizeof(args), "import foz '%s' '%s' --cache '%s/imported' --json", crafted,
             other, dir);
    int rc;
    struct json_object *o = run_json(out, args, "import", &rc);
    KT_CHECK_EQ(rc, 1); /* something skipped, everything good stored */
    KT_CHECK_EQ(kt_json_num(o, "found"), 8);
    KT_CHECK_EQ(kt_json_num(o, "refused"), 1);
    KT_CHECK_EQ(kt_json_num(o, "kinds.graphics.refused"), 1);
    KT_CHECK_EQ(kt_json_num(o, "imported"), 7);
    KT_CHECK_EQ(kt_json_num(o, "records"), 7);
    json_object_put(o);
    KT_CHECK_EQ(err_lines_with(out, "refused: ", v->rule_import), 1);
    KT_CHECK_EQ(err_lines_with(out, "bad0000000000001", "refused"), 1);
}

static void check_start(const struct variant *v, const char *dir, const char *crafted)
{
    char cache[4200], out[4200], args[9000];
    snprintf(cache, sizeof(cache), "%s/planted", dir);
    plant(crafted, cache);
    snprintf(out, sizeof(out), "%s/start.json", dir);
    snprintf(args, sizeof(args), "start --json --cache '%s'", cache);
    int rc;
    struct json_object *o = run_json(out, args, "start of planted records", &rc);
    KT_CHECK(rc < 128); /* no signal: nothing crashed */
    KT_CHECK_EQ(kt_json_num(o, "kinds.foz.graphics.built"), 1);
    KT_CHECK_EQ(kt_json_num(o, "kinds.foz.graphics.skipped"), 1);
    KT_CHECK_EQ(kt_json_num(o, "kinds.foz.graphics.failed"), 0);
    json_object_put(o);
    KT_CHECK_EQ(err_lines_with(out, "graphics pipeline bad0000000000001: refused: ", v->rule_build),
                1);
}

static void check_prepare(const struct variant *v, const char *dir, const char *crafted)
{
    char out[4200], args[9000];
    snprintf(out, sizeof(out), "%s/prepare.json", dir);
    snprintf(args, sizeof(args), "prepare --json --cache '%s/prepared' --corpus '%s'", dir,
             crafted);
    int rc;
    struct json_object *o = run_json(out, args, "prepare --corpus", &rc);
    KT_CHECK(rc < 128);
    KT_CHECK_EQ(kt_json_num(o, "kinds.foz.graphics.built"), 1);
    KT_CHECK_EQ(kt_json_num(o, "kinds.foz.graphics.failed"), 0);
    KT_CHECK_EQ(kt_json_num(o, "archive_pipelines.graphics.refused"), 1);
    json_object_put(o);
    KT_CHECK_EQ(err_lines_with(out, "refused: ", v->rule_import), 1);
}

static void run_case(const char *name)
{
    struct variant v = variant_of(name);
    const char *dir = kt_tmpdir();
    char crafted[4200], other[4200];
    snprintf(crafted, sizeof(crafted), "%s/crafted.foz", dir);
    snprintf(other, sizeof(other), "%s/other.foz", dir);
    write_archives(&v, crafted, other);
    check_import(&v, dir, crafted, other);
    check_start(&v, dir, crafted);
    check_prepare(&v, dir, crafted);
    free(v.replacement);
    free(v.extra);
}

/* A case per variant, named as its variant. */
#define VARIANT_CASE(name) \
    KT_CASE(name)          \
    {                      \
        run_case(#name);   \
    }

/* Finding 1: impossible recorded state. */
VARIANT_CASE(stage_out_of_range)
VARIANT_CASE(null_layout)
VARIANT_CASE(blend_attachments)
VARIANT_CASE(vertex_attributes)
VARIANT_CASE(no_rasterization)
VARIANT_CASE(static_viewport_missing)
VARIANT_CASE(set_layouts)
VARIANT_CASE(no_subpass)
/* Finding 4: one malformed pipeline costs that pipeline only. */
VARIANT_CASE(spec_past_data)
VARIANT_CASE(empty_entry_point)

/* ---------------------------------------------------------------------------
 * Mutations: random values in the good pipeline, planted and started
 * ------------------------------------------------------------------------ */

/* The values a mutation writes: edges of every field's range. */
static const int64_t edge_values[] = {
    0,          1,         2, 3, 7, 16, 255, 1000, 65535, -1, 10000, 0x7fffffff, 4294967295ll,
    1000000000, 1000267003};

static uint64_t next(uint64_t *s)
{
    *s = *s * UINT64_C(6364136223846793005) + UINT64_C(1442695040888963407);
    return *s >> 33;
}

/* Collects every integer leaf and every object of `o` (depth-first). */
struct leaves {
    struct json_object *ints[512];
    struct json_object *objs[128];
    size_t ni, no;
};

static void collect(struct json_object *o, struct leaves *l)
{
    if (json_object_is_type(o, json_type_object)) {
        if (l->no < 128)
            l->objs[l->no++] = o;
        json_object_object_foreach(o, key, v)
        {
            (void)key;
            if (json_object_is_type(v, json_type_int) && l->ni < 512)
                l->ints[l->ni++] = o; /* the parent, found again by key below */
            collect(v, l);
        }
    } else if (json_object_is_type(o, json_type_array)) {
        for (size_t i = 0; i < json_object_array_length(o); i++)
            collect(json_object_array_get_idx(o, i), l);
    }
}

/* Mutates one thing of pipeline object `p`: an integer member set to an
 * edge value, or a member removed. @return what, for the log. */
static void mutate(struct json_object *p, uint64_t *seed, char *what, size_t cap)
{
    struct leaves l = {.ni = 0};
    collect(p, &l);
    KT_NEED(l.ni && l.no);
    if (next(seed) % 4 == 0) {
        struct json_object *o = l.objs[next(seed) % l.no];
        size_t n = (size_t)json_object_object_length(o), k = n ? next(seed) % n : 0;
        json_object_object_foreach(o, key, v)
        {
            (void)v;
            if (k-- == 0) {
                snprintf(what, cap, "removed %s", key);
                json_object_object_del(o, key);
                return;
            }
        }
        snprintf(what, cap, "nothing");
        return;
    }
    struct json_object *o = l.ints[next(seed) % l.ni];
    size_t n = 0;
    json_object_object_foreach(o, k0, v0)
    {
        (void)k0;
        n += json_object_is_type(v0, json_type_int);
    }
    size_t pick = next(seed) % n;
    int64_t val = edge_values[next(seed) % (sizeof(edge_values) / sizeof(edge_values[0]))];
    json_object_object_foreach(o, key, v)
    {
        if (!json_object_is_type(v, json_type_int) || pick-- != 0)
            continue;
        snprintf(what, cap, "%s = %" PRId64, key, val);
        json_object_set_int64(v, val);
        return;
    }
}

/* Trials of the good pipeline with one mutation each, planted (no import,
 * no check) and started: the start must never die, whatever it built,
 * skipped or saw fail. KILN_RELIABILITY_LONG=1 runs 10 times as many. */
KT_CASE(mutations)
{
    const char *dir = kt_tmpdir();
    unsigned trials = getenv("KILN_RELIABILITY_LONG") ? 400 : 40;
    uint64_t built = 0, refused = 0, failed = 0, crashed = 0, seed = 29;
    for (unsigned t = 0; t < trials; t++) {
        char crafted[4200], cache[4200], out[4200], args[9000], what[160];
        snprintf(crafted, sizeof(crafted), "%s/m%u.foz", dir, t);
        snprintf(cache, sizeof(cache), "%s/m%u", dir, t);
        struct fw_crafted a;
        FW_NEED(fw_crafted_begin(crafted, &a));
        char *good = graphics_json(&a, BAD_HASH, NULL);
        struct json_object *doc = json_tokener_parse(good);
        KT_NEED(doc);
        struct json_object *pipes = NULL, *p = NULL;
        KT_NEED(json_object_object_get_ex(doc, "graphicsPipelines", &pipes));
        json_object_object_foreach(pipes, k, v)
        {
            (void)k;
            p = v;
        }
        mutate(p, &seed, what, sizeof(what));
        fw_crafted_add(&a, KILN_FOZ_TAG_GRAPHICS_PIPELINE, BAD_HASH,
                       json_object_to_json_string_ext(doc, JSON_C_TO_STRING_PLAIN));
        json_object_put(doc);
        free(good);
        KT_NEED(fw_crafted_finish(&a, crafted) == 0);
        plant(crafted, cache);
        snprintf(out, sizeof(out), "%s/m%u.json", dir, t);
        snprintf(args, sizeof(args), "start --json --cache '%s'", cache);
        int rc = kt_cli_run(out, args);
        if (rc >= 128) {
            printf("trial %u (%s): kiln start died (signal %d)\n", t, what, rc - 128);
            crashed++;
            continue;
        }
        struct json_object *o = kt_cli_json(out);
        kt_cli_require_vulkan(o, out);
        uint64_t b = kt_json_num(o, "kinds.foz.graphics.built"),
                 s = kt_json_num(o, "kinds.foz.graphics.skipped"),
                 f = kt_json_num(o, "kinds.foz.graphics.failed");
        built += b == 1;
        refused += s == 1;
        failed += f == 1;
        json_object_put(o);
    }
    printf("%u mutations planted and started: %" PRIu64 " built, %" PRIu64 " skipped, %" PRIu64
           " failed in the driver, %" PRIu64 " crashed\n",
           trials, built, refused, failed, crashed);
    KT_CHECK_EQ(crashed, 0);
}

KT_MAIN(KT_ENTRY(stage_out_of_range), KT_ENTRY(null_layout), KT_ENTRY(blend_attachments),
        KT_ENTRY(vertex_attributes), KT_ENTRY(no_rasterization), KT_ENTRY(static_viewport_missing),
        KT_ENTRY(set_layouts), KT_ENTRY(no_subpass), KT_ENTRY(spec_past_data),
        KT_ENTRY(empty_entry_point), KT_ENTRY(mutations))
