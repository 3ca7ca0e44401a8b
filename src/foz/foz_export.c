/*
 * foz_export.c - a cache's pipelines as a Fossilize stream archive
 * (kiln_foz_export, `kiln export foz`): Fossilize closures with their
 * recorded objects, kiln's built-in shapes with objects made here.
 *
 * Design. Records are read one at a time, in key order, and each program
 * is first turned into a plan: every entry it needs (objects, modules, the
 * pipeline) as payload bytes. The plan is checked against what the writer
 * wrote (kiln_foz_writer_lookup) before anything of it is written, so a
 * program whose object would give a written hash another content is left
 * out whole, and an archive never holds a reference to an object that is
 * not there or is another one. Objects shared by many pipelines are written
 * once (the writer drops an identical second entry).
 *
 * A closure's other pipelines (a derivative's base, a pipeline's libraries)
 * use modules the program does not carry as stages. They are kept aside and
 * written at the end when every module they name was written by some
 * program; otherwise they are left out and counted (extra_dropped): the
 * replayer resolves neither bases nor libraries by default, so the
 * program's own pipeline replays all the same.
 *
 * Built-in shapes get the objects kiln/vk.h makes for them (vk_context.c's
 * layout, vk_pipeline.c's render pass and fixed state), hashed with
 * kiln_hash64 of their content: Fossilize's replayer uses hashes only as
 * names (it never recomputes them), and a content hash keeps one name for
 * one object.
 */
#include "foz_state_private.h"

#include "kiln/vk.h"

#include <stdarg.h>

/* Vulkan values of kiln's built-in shape (the core's vk.h hides the Vulkan
 * headers behind VK_VERSION_1_0; these are fixed by the specification). */
#define VK_DESCRIPTOR_TYPE_STORAGE_BUFFER_ 7
#define VK_SHADER_STAGE_ALL_               0x7fffffff
#define VK_IMAGE_LAYOUT_COLOR_ATTACHMENT_  2
#define VK_ATTACHMENT_LOAD_OP_CLEAR_       1
#define VK_ATTACHMENT_STORE_OP_STORE_      0
#define VK_ATTACHMENT_LOAD_OP_DONT_CARE_   2
#define VK_ATTACHMENT_STORE_OP_DONT_CARE_  1
#define VK_TOPOLOGY_TRIANGLE_LIST_         3
#define VK_DYNAMIC_STATE_VIEWPORT_         0
#define VK_DYNAMIC_STATE_SCISSOR_          1
#define VK_COLOR_WRITE_RGBA_               15

/* The JSON printer's flags: compact, '/' as it is (as Fossilize writes). */
#define PRINT_FLAGS (JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE)

/* ---------------------------------------------------------------------------
 * Plans
 * ------------------------------------------------------------------------ */

struct planned {
    uint64_t tag;
    uint64_t hash;
    uint8_t *bytes;
    size_t size;
    bool main;       /* the program's own pipeline */
    bool pipeline;   /* any pipeline entry */
    uint64_t *needs; /* modules an extra pipeline names */
    size_t nneeds;
};

struct plan {
    struct planned *e;
    size_t n, cap;
};

static void plan_clear(struct plan *p)
{
    for (size_t i = 0; i < p->n; i++) {
        kiln__free(p->e[i].bytes);
        kiln__free(p->e[i].needs);
    }
    p->n = 0;
}

static int plan_add(struct plan *p, uint64_t tag, uint64_t hash, uint8_t *bytes, size_t size)
{
    struct planned *grown = kiln__grow(p->e, p->n, &p->cap, sizeof(*p->e), 16);
    if (!grown) {
        kiln__free(bytes);
        return KILN_ENOMEM;
    }
    p->e = grown;
    p->e[p->n++] = (struct planned){.tag = tag, .hash = hash, .bytes = bytes, .size = size};
    return KILN_OK;
}

/* An entry's payload: {"version":6,"<member>":{"<hash>":obj}}. `obj` is
 * borrowed (a reference is taken for the wrapper and dropped with it). */
static int entry_bytes(const char *member, uint64_t hash, struct json_object *obj, uint8_t **bytes,
                       size_t *size)
{
    char name[17];
    snprintf(name, sizeof(name), "%016" PRIx64, hash);
    struct json_object *doc = json_object_new_object();
    struct json_object *dict = json_object_new_object();
    int rc = KILN_ENOMEM;
    if (!doc || !dict) {
        json_object_put(dict);
        goto out;
    }
    if (json_object_object_add(doc, "version", json_object_new_int(KILN_FOZ_WRITE_VERSION)) < 0 ||
        json_object_object_add(doc, member, dict) < 0) {
        json_object_put(dict);
        goto out;
    }
    if (json_object_object_add(dict, name, json_object_get(obj)) < 0) {
        json_object_put(obj);
        goto out;
    }
    size_t n;
    const char *text = json_object_to_json_string_length(doc, PRINT_FLAGS, &n);
    if (!text || !(*bytes = kiln__malloc(n)))
        goto out;
    memcpy(*bytes, text, n);
    *size = n;
    rc = KILN_OK;
out:
    json_object_put(doc);
    return rc;
}

/* ---------------------------------------------------------------------------
 * A small JSON builder for the built-in shapes: every call may fail for
 * want of memory, which is noted once and checked at the end.
 * ------------------------------------------------------------------------ */

struct jb {
    bool oom;
};

static struct json_object *jb_keep(struct jb *b, struct json_object *o)
{
    if (!o)
        b->oom = true;
    return o;
}

static void jb_set(struct jb *b, struct json_object *o, const char *key, struct json_object *v)
{
    if (!o || !v || json_object_object_add(o, key, v) < 0) {
        json_object_put(v);
        b->oom = true;
    }
}

static void jb_int(struct jb *b, struct json_object *o, const char *key, int64_t v)
{
    jb_set(b, o, key, json_object_new_int64(v));
}

static void jb_hash(struct jb *b, struct json_object *o, const char *key, uint64_t h)
{
    char s[17];
    snprintf(s, sizeof(s), "%016" PRIx64, h);
    jb_set(b, o, key, json_object_new_string(s));
}

static void jb_push(struct jb *b, struct json_object *arr, struct json_object *v)
{
    if (!arr || !v || json_object_array_add(arr, v) < 0) {
        json_object_put(v);
        b->oom = true;
    }
}

/* An object of int members, from pairs of key and value (a NULL key ends). */
static struct json_object *jb_ints(struct jb *b, const char *const *keys, const int64_t *vals)
{
    struct json_object *o = jb_keep(b, json_object_new_object());
    for (size_t i = 0; keys[i]; i++)
        jb_int(b, o, keys[i], vals[i]);
    return o;
}

static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/* Base64 with padding, as Fossilize records specialization data. */
static char *base64_encode(const uint8_t *p, size_t n)
{
    char *s = kiln__malloc((n + 2) / 3 * 4 + 1);
    if (!s)
        return NULL;
    size_t k = 0;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)p[i] << 16;
        if (i + 1 < n)
            v |= (uint32_t)p[i + 1] << 8;
        if (i + 2 < n)
            v |= p[i + 2];
        s[k++] = b64[v >> 18 & 63];
        s[k++] = b64[v >> 12 & 63];
        s[k++] = i + 1 < n ? b64[v >> 6 & 63] : '=';
        s[k++] = i + 2 < n ? b64[v & 63] : '=';
    }
    s[k] = '\0';
    return s;
}

/* One stage of a built-in pipeline: flags, name, module, stage and its
 * specialization, as Fossilize records VkPipelineShaderStageCreateInfo. */
static struct json_object *builtin_stage(struct jb *b, const struct kiln_stage_blob *st,
                                         uint32_t stage, uint64_t module)
{
    struct json_object *o = jb_keep(b, json_object_new_object());
    jb_int(b, o, "flags", 0);
    jb_set(b, o, "name", json_object_new_string(st->entry ? st->entry : "main"));
    jb_hash(b, o, "module", module);
    jb_int(b, o, "stage", stage);
    if (st->nspec || st->spec_size) {
        struct json_object *si = jb_keep(b, json_object_new_object());
        char *data = base64_encode(st->spec_data, st->spec_size);
        if (!data)
            b->oom = true;
        jb_int(b, si, "dataSize", (int64_t)st->spec_size);
        jb_set(b, si, "data", json_object_new_string(data ? data : ""));
        kiln__free(data);
        struct json_object *map = jb_keep(b, json_object_new_array());
        for (uint32_t i = 0; i < st->nspec; i++) {
            struct kiln_spec_entry e;
            kiln_spec_entry_get(st, i, &e);
            static const char *const keys[] = {"offset", "size", "constantID", NULL};
            const int64_t vals[] = {e.offset, e.size, e.constant_id};
            jb_push(b, map, jb_ints(b, keys, vals));
        }
        jb_set(b, si, "mapEntries", map);
        jb_set(b, o, "specializationInfo", si);
    }
    return o;
}

/* Plans one object made here: its hash is kiln_hash64 of its entry's
 * content, with the hash left out (it names itself). */
static int plan_made(struct plan *p, struct jb *b, uint64_t tag, struct json_object *obj,
                     uint64_t *hash)
{
    if (b->oom || !obj) {
        json_object_put(obj);
        return KILN_ENOMEM;
    }
    size_t n;
    const char *text = json_object_to_json_string_length(obj, PRINT_FLAGS, &n);
    if (!text) {
        json_object_put(obj);
        return KILN_ENOMEM;
    }
    uint8_t *key = kiln__malloc(n + 32);
    if (!key) {
        json_object_put(obj);
        return KILN_ENOMEM;
    }
    int k = snprintf((char *)key, 32, "kiln-builtin %s ", kiln__foz_tag_member(tag));
    memcpy(key + k, text, n);
    *hash = kiln_hash64(key, (size_t)k + n);
    kiln__free(key);
    uint8_t *bytes;
    size_t size;
    int rc = entry_bytes(kiln__foz_tag_member(tag), *hash, obj, &bytes, &size);
    json_object_put(obj);
    if (rc == 0)
        rc = plan_add(p, tag, *hash, bytes, size);
    return rc;
}

/* The pipeline layout of kiln/vk.h (and its set layout): binding 0 a
 * storage buffer for every stage, KILN_VK_PUSH_CONSTANT_BYTES of push
 * constants for every stage. */
static int plan_builtin_layout(struct plan *p, uint64_t *layout)
{
    struct jb b = {0};
    struct json_object *set = jb_keep(&b, json_object_new_object());
    jb_int(&b, set, "flags", 0);
    struct json_object *bindings = jb_keep(&b, json_object_new_array());
    static const char *const bkeys[] = {"descriptorType", "descriptorCount", "stageFlags",
                                        "binding", NULL};
    const int64_t bvals[] = {VK_DESCRIPTOR_TYPE_STORAGE_BUFFER_, 1, VK_SHADER_STAGE_ALL_, 0};
    jb_push(&b, bindings, jb_ints(&b, bkeys, bvals));
    jb_set(&b, set, "bindings", bindings);
    uint64_t set_hash;
    KILN_TRY(plan_made(p, &b, KILN_FOZ_TAG_DESCRIPTOR_SET_LAYOUT, set, &set_hash));

    struct json_object *pl = jb_keep(&b, json_object_new_object());
    jb_int(&b, pl, "flags", 0);
    struct json_object *ranges = jb_keep(&b, json_object_new_array());
    static const char *const rkeys[] = {"stageFlags", "offset", "size", NULL};
    const int64_t rvals[] = {VK_SHADER_STAGE_ALL_, 0, KILN_VK_PUSH_CONSTANT_BYTES};
    jb_push(&b, ranges, jb_ints(&b, rkeys, rvals));
    jb_set(&b, pl, "pushConstantRanges", ranges);
    struct json_object *sets = jb_keep(&b, json_object_new_array());
    char s[17];
    snprintf(s, sizeof(s), "%016" PRIx64, set_hash);
    jb_push(&b, sets, json_object_new_string(s));
    jb_set(&b, pl, "setLayouts", sets);
    return plan_made(p, &b, KILN_FOZ_TAG_PIPELINE_LAYOUT, pl, layout);
}

/* The render pass of vk_pipeline.c: one color attachment of
 * KILN_VK_DEFAULT_COLOR_FORMAT, cleared and stored, one subpass. */
static int plan_builtin_render_pass(struct plan *p, uint64_t *pass)
{
    struct jb b = {0};
    struct json_object *rp = jb_keep(&b, json_object_new_object());
    jb_int(&b, rp, "flags", 0);
    struct json_object *atts = jb_keep(&b, json_object_new_array());
    static const char *const akeys[] = {"flags",          "format",  "finalLayout", "initialLayout",
                                        "loadOp",         "storeOp", "samples",     "stencilLoadOp",
                                        "stencilStoreOp", NULL};
    const int64_t avals[] = {
        0, KILN_VK_DEFAULT_COLOR_FORMAT,     VK_IMAGE_LAYOUT_COLOR_ATTACHMENT_,
        0, VK_ATTACHMENT_LOAD_OP_CLEAR_,     VK_ATTACHMENT_STORE_OP_STORE_,
        1, VK_ATTACHMENT_LOAD_OP_DONT_CARE_, VK_ATTACHMENT_STORE_OP_DONT_CARE_};
    jb_push(&b, atts, jb_ints(&b, akeys, avals));
    jb_set(&b, rp, "attachments", atts);
    struct json_object *subs = jb_keep(&b, json_object_new_array());
    struct json_object *sub = jb_keep(&b, json_object_new_object());
    jb_int(&b, sub, "flags", 0);
    jb_int(&b, sub, "pipelineBindPoint", 0);
    struct json_object *colors = jb_keep(&b, json_object_new_array());
    static const char *const ckeys[] = {"attachment", "layout", NULL};
    const int64_t cvals[] = {0, VK_IMAGE_LAYOUT_COLOR_ATTACHMENT_};
    jb_push(&b, colors, jb_ints(&b, ckeys, cvals));
    jb_set(&b, sub, "colorAttachments", colors);
    jb_push(&b, subs, sub);
    jb_set(&b, rp, "subpasses", subs);
    return plan_made(p, &b, KILN_FOZ_TAG_RENDER_PASS, rp, pass);
}

/* The fixed state of vk_pipeline.c's graphics pipelines. */
static void builtin_graphics_state(struct jb *b, struct json_object *o)
{
    struct json_object *dyn = jb_keep(b, json_object_new_object());
    jb_int(b, dyn, "flags", 0);
    struct json_object *states = jb_keep(b, json_object_new_array());
    jb_push(b, states, json_object_new_int(VK_DYNAMIC_STATE_VIEWPORT_));
    jb_push(b, states, json_object_new_int(VK_DYNAMIC_STATE_SCISSOR_));
    jb_set(b, dyn, "dynamicState", states);
    jb_set(b, o, "dynamicState", dyn);

    static const char *const mkeys[] = {"flags",
                                        "rasterizationSamples",
                                        "sampleShadingEnable",
                                        "alphaToOneEnable",
                                        "alphaToCoverageEnable",
                                        NULL};
    const int64_t mvals[] = {0, 1, 0, 0, 0};
    struct json_object *ms = jb_ints(b, mkeys, mvals);
    jb_set(b, ms, "minSampleShading", json_object_new_double(0.0));
    jb_set(b, o, "multisampleState", ms);

    struct json_object *vi = jb_keep(b, json_object_new_object());
    jb_int(b, vi, "flags", 0);
    jb_set(b, vi, "attributes", json_object_new_array());
    jb_set(b, vi, "bindings", json_object_new_array());
    jb_set(b, o, "vertexInputState", vi);

    /* Fill, no culling, counter-clockwise front faces, no depth bias. */
    static const char *const rkeys[] = {"flags",
                                        "depthBiasEnable",
                                        "depthClampEnable",
                                        "polygonMode",
                                        "rasterizerDiscardEnable",
                                        "frontFace",
                                        "cullMode",
                                        NULL};
    const int64_t rvals[] = {0, 0, 0, 0, 0, 0, 0};
    struct json_object *rs = jb_ints(b, rkeys, rvals);
    jb_set(b, rs, "depthBiasConstantFactor", json_object_new_double(0.0));
    jb_set(b, rs, "depthBiasSlopeFactor", json_object_new_double(0.0));
    jb_set(b, rs, "depthBiasClamp", json_object_new_double(0.0));
    jb_set(b, rs, "lineWidth", json_object_new_double(1.0));
    jb_set(b, o, "rasterizationState", rs);

    static const char *const ikeys[] = {"flags", "topology", "primitiveRestartEnable", NULL};
    const int64_t ivals[] = {0, VK_TOPOLOGY_TRIANGLE_LIST_, 0};
    jb_set(b, o, "inputAssemblyState", jb_ints(b, ikeys, ivals));

    /* One attachment, all channels written, no blending. */
    static const char *const ckeys[] = {"flags", "logicOp", "logicOpEnable", NULL};
    const int64_t cvals[] = {0, 0, 0};
    struct json_object *cb = jb_ints(b, ckeys, cvals);
    struct json_object *consts = jb_keep(b, json_object_new_array());
    for (int i = 0; i < 4; i++)
        jb_push(b, consts, json_object_new_double(0.0));
    jb_set(b, cb, "blendConstants", consts);
    static const char *const bkeys[] = {
        "dstAlphaBlendFactor", "srcAlphaBlendFactor", "dstColorBlendFactor",
        "srcColorBlendFactor", "colorWriteMask",      "alphaBlendOp",
        "colorBlendOp",        "blendEnable",         NULL};
    const int64_t bvals[] = {0, 0, 0, 0, VK_COLOR_WRITE_RGBA_, 0, 0, 0};
    struct json_object *atts = jb_keep(b, json_object_new_array());
    jb_push(b, atts, jb_ints(b, bkeys, bvals));
    jb_set(b, cb, "attachments", atts);
    jb_set(b, o, "colorBlendState", cb);

    static const char *const vkeys[] = {"flags", "viewportCount", "scissorCount", NULL};
    const int64_t vvals[] = {0, 1, 1};
    jb_set(b, o, "viewportState", jb_ints(b, vkeys, vvals));
}

/* ---------------------------------------------------------------------------
 * The export
 * ------------------------------------------------------------------------ */

struct exporter {
    struct kiln_cache *c;
    const struct kiln_pack_dict *dict;
    struct kiln_foz_writer *w;
    struct kiln_foz_export_report *r;
    struct plan plan;
    struct planned *extra; /* base pipelines and libraries, written at the end */
    size_t nextra, capextra;
    char name[48]; /* the record being exported, for messages */
    uint32_t *words[KILN_PAYLOAD_MAX_STAGES];
    size_t nwords[KILN_PAYLOAD_MAX_STAGES];
    struct kiln_stage_blob st[KILN_PAYLOAD_MAX_STAGES];
};

static void note_skip(struct exporter *x, uint64_t *counter, const char *fmt, ...)
    KILN_PRINTF(3, 4);

static void note_skip(struct exporter *x, uint64_t *counter, const char *fmt, ...)
{
    char why[128];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof(why), fmt, ap);
    va_end(ap);
    (*counter)++;
    x->r->skipped++;
    if (!x->r->skip_reason[0])
        snprintf(x->r->skip_reason, sizeof(x->r->skip_reason), "%s: %s", x->name, why);
    /* A conflict costs a pipeline the archive should have had: a warning.
     * Programs no archive can hold are expected, and counted. */
    if (counter == &x->r->skipped_conflict)
        KILN_WARN("foz", "export: %s: left out: %s", x->name, why);
    else
        KILN_INFO("foz", "export: %s: left out: %s", x->name, why);
}

static void note_damaged(struct exporter *x, const char *what, int rc)
{
    x->r->damaged++;
    KILN_WARN("foz", "export: %s: left out: %s (%s)", x->name, what, kiln_strerror(rc));
}

/* Plans a module entry of `words`. */
static int plan_module(struct plan *p, uint64_t hash, const uint32_t *words, size_t n)
{
    uint8_t *bytes;
    size_t size;
    KILN_TRY(kiln_foz_module_encode(hash, words, n, 0, &bytes, &size));
    return plan_add(p, KILN_FOZ_TAG_SHADER_MODULE, hash, bytes, size);
}

/* Plans a built-in program's entries. @return 1 when planned, 0 when the
 * program was left out (counted), or an error. */
static int plan_builtin(struct exporter *x, int n)
{
    struct plan *p = &x->plan;
    bool compute = n == 1 && (x->st[0].stage & KILN_VK_STAGE_COMPUTE_BIT);
    bool graphics = n == 2 && x->st[0].stage == KILN_VK_STAGE_VERTEX_BIT &&
                    x->st[1].stage == KILN_VK_STAGE_FRAGMENT_BIT;
    uint64_t mods[2];
    if (!compute && !graphics && n != 1) {
        uint32_t all = 0;
        for (int i = 0; i < n; i++)
            all |= x->st[i].stage;
        note_skip(x, &x->r->skipped_shape,
                  "kiln's own shapes have no pipeline of %d stages (stage bits 0x%x)", n, all);
        return 0;
    }
    for (int i = 0; i < n; i++) {
        mods[i] = kiln_hash64(x->words[i], x->nwords[i] * 4);
        KILN_TRY(plan_module(p, mods[i], x->words[i], x->nwords[i]));
    }
    if (!compute && !graphics)
        return 1; /* one module of a graphics stage: no pipeline alone */
    uint64_t layout, pass = 0;
    KILN_TRY(plan_builtin_layout(p, &layout));
    if (graphics)
        KILN_TRY(plan_builtin_render_pass(p, &pass));
    struct jb b = {0};
    struct json_object *o = jb_keep(&b, json_object_new_object());
    jb_int(&b, o, "flags", 0);
    jb_hash(&b, o, "basePipelineHandle", 0);
    jb_int(&b, o, "basePipelineIndex", 0);
    jb_hash(&b, o, "layout", layout);
    uint64_t tag;
    if (compute) {
        tag = KILN_FOZ_TAG_COMPUTE_PIPELINE;
        jb_set(&b, o, "stage", builtin_stage(&b, &x->st[0], KILN_VK_STAGE_COMPUTE_BIT, mods[0]));
    } else {
        tag = KILN_FOZ_TAG_GRAPHICS_PIPELINE;
        jb_hash(&b, o, "renderPass", pass);
        jb_int(&b, o, "subpass", 0);
        builtin_graphics_state(&b, o);
        struct json_object *stages = jb_keep(&b, json_object_new_array());
        for (int i = 0; i < 2; i++)
            jb_push(&b, stages, builtin_stage(&b, &x->st[i], x->st[i].stage, mods[i]));
        jb_set(&b, o, "stages", stages);
    }
    uint64_t hash;
    KILN_TRY(plan_made(p, &b, tag, o, &hash));
    p->e[p->n - 1].main = p->e[p->n - 1].pipeline = true;
    return 1;
}

static struct json_object *get(struct json_object *o, const char *key)
{
    struct json_object *v = NULL;
    if (!json_object_is_type(o, json_type_object) || !json_object_object_get_ex(o, key, &v))
        return NULL;
    return v;
}

/* The module hashes a recorded pipeline's stages name. */
static int pipeline_modules(uint64_t tag, struct json_object *pipe, uint64_t **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    struct json_object *stages = get(pipe, "stages"), *one = get(pipe, "stage");
    size_t count =
        tag == KILN_FOZ_TAG_COMPUTE_PIPELINE
            ? (one != NULL)
            : (json_object_is_type(stages, json_type_array) ? json_object_array_length(stages) : 0);
    if (!count)
        return KILN_OK;
    *out = kiln__calloc(count, sizeof(**out));
    if (!*out)
        return KILN_ENOMEM;
    for (size_t i = 0; i < count; i++) {
        struct json_object *s =
            tag == KILN_FOZ_TAG_COMPUTE_PIPELINE ? one : json_object_array_get_idx(stages, i);
        struct json_object *m = get(s, "module");
        uint64_t h;
        if (!json_object_is_type(m, json_type_string) ||
            !kiln__foz_parse_hex(json_object_get_string(m), (size_t)json_object_get_string_len(m),
                                 &h)) {
            kiln__free(*out);
            *out = NULL;
            return KILN_EPARSE;
        }
        (*out)[(*n)++] = h;
    }
    return KILN_OK;
}

/* The closure members that hold objects, with their tags. */
static const struct {
    const char *member;
    uint64_t tag;
} closure_members[] = {
    {"samplers", KILN_FOZ_TAG_SAMPLER},
    {"setLayouts", KILN_FOZ_TAG_DESCRIPTOR_SET_LAYOUT},
    {"pipelineLayouts", KILN_FOZ_TAG_PIPELINE_LAYOUT},
    {"renderPasses", KILN_FOZ_TAG_RENDER_PASS},
    {"renderPasses2", KILN_FOZ_TAG_RENDER_PASS},
    {"graphicsPipelines", KILN_FOZ_TAG_GRAPHICS_PIPELINE},
    {"computePipelines", KILN_FOZ_TAG_COMPUTE_PIPELINE},
    {"raytracingPipelines", KILN_FOZ_TAG_RAYTRACING_PIPELINE},
};

static bool closure_header_member(const char *key)
{
    return strcmp(key, "format") == 0 || strcmp(key, "version") == 0 || strcmp(key, "kind") == 0 ||
           strcmp(key, "pipeline") == 0 || strcmp(key, "shaderModules") == 0;
}

/* Plans the entries of one member of a closure. */
static int plan_member(struct exporter *x, struct json_object *dict, const char *member,
                       uint64_t tag, uint64_t main_tag, uint64_t main_hash)
{
    json_object_object_foreach(dict, key, obj)
    {
        uint64_t h;
        if (!kiln__foz_parse_hex(key, strlen(key), &h) ||
            !json_object_is_type(obj, json_type_object))
            return KILN_EPARSE;
        uint8_t *bytes;
        size_t size;
        KILN_TRY(entry_bytes(member, h, obj, &bytes, &size));
        KILN_TRY(plan_add(&x->plan, tag, h, bytes, size));
        struct planned *e = &x->plan.e[x->plan.n - 1];
        bool pipeline = tag == KILN_FOZ_TAG_GRAPHICS_PIPELINE ||
                        tag == KILN_FOZ_TAG_COMPUTE_PIPELINE ||
                        tag == KILN_FOZ_TAG_RAYTRACING_PIPELINE;
        e->pipeline = pipeline;
        e->main = tag == main_tag && h == main_hash;
        if (pipeline && !e->main)
            KILN_TRY(pipeline_modules(tag, obj, &e->needs, &e->nneeds));
    }
    return KILN_OK;
}

/* Plans a Fossilize program's entries. @return 1 when planned, 0 when it
 * was left out (counted), or an error. */
static int plan_foz(struct exporter *x, int n, const struct kiln_payload_state *state)
{
    struct kiln_foz_closure_info info = KILN_FOZ_CLOSURE_INFO_INIT;
    int rc = kiln_foz_closure_inspect(state->bytes, state->size, &info);
    if (rc < 0) {
        note_damaged(x, "its state is not a closure this build reads", rc);
        return 0;
    }
    if (info.stage_count != (uint32_t)n) {
        note_damaged(x, "its closure and its stages disagree", KILN_ECORRUPT);
        return 0;
    }
    struct json_object *doc, *pipe;
    uint64_t tag, hash;
    rc = kiln__foz_closure_parse(state->bytes, state->size, &doc, &tag, &hash, &pipe);
    if (rc < 0) {
        note_damaged(x, "its closure does not read", rc);
        return 0;
    }
    /* Modules first, then objects, the pipeline among them: the order a
     * recording has, though the replayer looks everything up by hash. */
    for (int i = 0; i < n && rc == 0; i++)
        rc = plan_module(&x->plan, info.modules[i], x->words[i], x->nwords[i]);

    for (size_t m = 0; m < KILN_ARRAY_LEN(closure_members) && rc == 0; m++) {
        struct json_object *dict = get(doc, closure_members[m].member);
        if (dict && !json_object_is_type(dict, json_type_object))
            rc = KILN_EPARSE;
        else if (dict)
            rc = plan_member(x, dict, closure_members[m].member, closure_members[m].tag, tag, hash);
    }
    const char *unknown = NULL;
    json_object_object_foreach(doc, key, val)
    {
        (void)val;
        bool known = closure_header_member(key);
        for (size_t m = 0; m < KILN_ARRAY_LEN(closure_members) && !known; m++)
            known = strcmp(key, closure_members[m].member) == 0;
        if (!known && !unknown)
            unknown = key;
    }
    int out = 1;
    if (rc == 0 && unknown) {
        note_damaged(x, "its closure has a member this build does not know", KILN_EFORMAT);
        KILN_INFO("foz", "export: %s: the closure member is \"%s\"", x->name, unknown);
        out = 0;
    } else if (rc == KILN_EPARSE) {
        note_damaged(x, "its closure is malformed", rc);
        out = 0;
    }
    json_object_put(doc);
    if (rc < 0 && rc != KILN_EPARSE)
        return rc;
    return out;
}

/* Checks a plan against what was written, then writes it. */
static int write_plan(struct exporter *x, enum kiln_state_kind kind)
{
    struct plan *p = &x->plan;
    const struct planned *main = NULL;
    for (size_t i = 0; i < p->n; i++) {
        const struct planned *e = &p->e[i];
        if (e->main)
            main = e;
        if (kiln_foz_writer_lookup(x->w, e->tag, e->hash, e->bytes, e->size) == KILN_EEXIST) {
            note_skip(x, &x->r->skipped_conflict,
                      "its %s %016" PRIx64 " has the hash of another one already written",
                      kiln_foz_tag_name(e->tag), e->hash);
            return KILN_OK;
        }
    }
    if (main && kiln_foz_writer_lookup(x->w, main->tag, main->hash, main->bytes, main->size) == 1) {
        x->r->duplicates++;
        return KILN_OK;
    }
    for (size_t i = 0; i < p->n; i++) {
        struct planned *e = &p->e[i];
        if (e->pipeline && !e->main) {
            /* A base or library: at the end, when its modules are there. */
            struct planned *grown =
                kiln__grow(x->extra, x->nextra, &x->capextra, sizeof(*x->extra), 8);
            if (!grown)
                return KILN_ENOMEM;
            x->extra = grown;
            x->extra[x->nextra++] = *e;
            e->bytes = NULL;
            e->needs = NULL;
            continue;
        }
        int rc = kiln_foz_writer_add(x->w, e->tag, e->hash, e->bytes, e->size, 0);
        if (rc < 0)
            return rc;
        if (rc == 1 && e->tag == KILN_FOZ_TAG_SHADER_MODULE)
            x->r->modules++;
        else if (rc == 1 && !e->pipeline)
            x->r->objects++;
    }
    if (!main) {
        x->r->lone++;
        return KILN_OK;
    }
    x->r->pipelines++;
    x->r->graphics += main->tag == KILN_FOZ_TAG_GRAPHICS_PIPELINE;
    x->r->compute += main->tag == KILN_FOZ_TAG_COMPUTE_PIPELINE;
    x->r->raytracing += main->tag == KILN_FOZ_TAG_RAYTRACING_PIPELINE;
    x->r->builtin += kind == KILN_STATE_BUILTIN;
    x->r->foz += kind == KILN_STATE_FOZ;
    return KILN_OK;
}

/* Writes the extra pipelines whose modules are all in the archive. */
static int write_extra(struct exporter *x)
{
    for (size_t i = 0; i < x->nextra; i++) {
        struct planned *e = &x->extra[i];
        bool ready = true;
        for (size_t k = 0; k < e->nneeds && ready; k++)
            ready = kiln_foz_writer_has(x->w, KILN_FOZ_TAG_SHADER_MODULE, e->needs[k]);
        if (kiln_foz_writer_lookup(x->w, e->tag, e->hash, e->bytes, e->size) != 0)
            continue; /* written as a program's own pipeline, or conflicting */
        if (!ready) {
            x->r->extra_dropped++;
            KILN_INFO("foz",
                      "export: the %s %016" PRIx64 " a closure names (a base or library) is "
                      "left out: a module of it is in no program",
                      kiln_foz_tag_name(e->tag), e->hash);
            continue;
        }
        int rc = kiln_foz_writer_add(x->w, e->tag, e->hash, e->bytes, e->size, 0);
        if (rc < 0)
            return rc;
        x->r->extra_pipelines += rc == 1;
    }
    return KILN_OK;
}

static void free_words(struct exporter *x, int n)
{
    for (int i = 0; i < n; i++) {
        kiln__free(x->words[i]);
        x->words[i] = NULL;
    }
}

/* Unpacks a program's stages. @return 1, 0 when damaged (counted), or an
 * error. */
static int unpack_stages(struct exporter *x, int n)
{
    for (int i = 0; i < n; i++) {
        size_t bytes;
        int rc = kiln_blob_info(x->st[i].blob, x->st[i].blob_size, NULL, &bytes);
        if (rc == 0 && (bytes == 0 || bytes % 4))
            rc = KILN_ECORRUPT_BLOB;
        if (rc == 0 && !(x->words[i] = kiln__malloc(bytes)))
            return KILN_ENOMEM;
        int64_t got = rc < 0 ? rc
                             : kiln_unpack(x->st[i].blob, x->st[i].blob_size, x->dict, x->words[i],
                                           bytes / 4);
        if (got == KILN_ENOMEM)
            return KILN_ENOMEM;
        if (got < 0) {
            note_damaged(x, "a stage does not unpack", (int)got);
            return 0;
        }
        x->nwords[i] = (size_t)got;
    }
    return 1;
}

/* Exports one record. @return 0, or an error that stops the export. */
static int export_one(struct exporter *x, struct kiln_key key)
{
    snprintf(x->name, sizeof(x->name), "program %016" PRIx64 "%016" PRIx64, key.hi, key.lo);
    struct kiln_cache_result res;
    int rc = kiln_cache_get(x->c, key, &res);
    if (rc == KILN_ECORRUPT_RECORD || rc == KILN_ENOTFOUND) {
        note_damaged(x, "its record does not load", rc);
        return KILN_OK;
    }
    if (rc < 0)
        return rc;
    struct kiln_payload_state state;
    int n =
        kiln_program_payload_parse_full(res.data, res.size, KILN_PAYLOAD_MAX_STAGES, x->st, &state);
    int planned = 0;
    if (n <= 0) {
        note_damaged(x, "its payload is not a program's", n < 0 ? n : KILN_ECORRUPT_BLOB);
    } else if (state.kind == KILN_STATE_APP) {
        note_skip(x, &x->r->skipped_app,
                  "an application's own state (kind %u) has no Fossilize form", state.kind);
    } else if (state.kind != KILN_STATE_BUILTIN && state.kind != KILN_STATE_FOZ) {
        note_damaged(x, "its state kind is unknown", KILN_EFORMAT);
    } else {
        planned = unpack_stages(x, n);
        if (planned == 1)
            planned = state.kind == KILN_STATE_FOZ ? plan_foz(x, n, &state) : plan_builtin(x, n);
    }
    rc = planned < 0 ? planned : KILN_OK;
    if (planned == 1)
        rc = write_plan(x, (enum kiln_state_kind)state.kind);
    plan_clear(&x->plan);
    free_words(x, n > 0 ? n : 0);
    kiln_cache_payload_free(res.data);
    return rc;
}

static int by_key(const void *a, const void *b)
{
    const struct kiln_cache_entry *x = a, *y = b;
    if (x->key.hi != y->key.hi)
        return x->key.hi < y->key.hi ? -1 : 1;
    return x->key.lo < y->key.lo ? -1 : x->key.lo > y->key.lo;
}

static int export_all(struct kiln_cache *c, const char *out_path,
                      struct kiln_foz_export_report *report);

/* The caller's report is growable: this library's own is filled, and only
 * what the caller's size covers is copied back. */
int kiln_foz_export(struct kiln_cache *c, const char *out_path,
                    struct kiln_foz_export_report *report)
{
    if (!c || !out_path || !report)
        return KILN_EINVAL;
    struct kiln_foz_export_report r;
    KILN_TRY(KILN_STRUCT_IN(&r, report, "kiln_foz_export_report"));
    memset(&r, 0, sizeof(r));
    r.size = sizeof(r);
    int rc = export_all(c, out_path, &r);
    KILN_STRUCT_OUT(report, &r);
    return rc;
}

static int export_all(struct kiln_cache *c, const char *out_path,
                      struct kiln_foz_export_report *report)
{
    /* Never over a file of this cache or into any cache's folder. */
    KILN_TRY(kiln_cache_check_output(c, out_path));
    struct kiln_cache_entry *ents;
    size_t n;
    KILN_TRY(kiln_cache_entries(c, &ents, &n));
    if (n > 1)
        qsort(ents, n, sizeof(*ents), by_key);
    report->programs = n;
    struct exporter *x = kiln__calloc(1, sizeof(*x));
    if (!x) {
        kiln_cache_entries_free(ents);
        return KILN_ENOMEM;
    }
    x->c = c;
    x->dict = kiln_cache_dict(c);
    x->r = report;
    int rc = kiln_foz_writer_create(NULL, out_path, &x->w);
    for (size_t i = 0; i < n && rc == 0; i++)
        rc = export_one(x, ents[i].key);
    if (rc == 0)
        rc = write_extra(x);
    if (rc == 0 && report->pipelines == 0 && report->duplicates == 0) {
        KILN_ERROR("foz", "export: %s: the cache has no program that makes a pipeline", out_path);
        rc = KILN_ENOTFOUND;
    }
    if (rc == 0) {
        /* Again before the rename: a cache may have been made there since. */
        rc = kiln_cache_check_output(c, out_path);
    }
    if (rc == 0) {
        report->entries = kiln_foz_writer_entries(x->w);
        rc = kiln_foz_writer_finish(x->w, &report->bytes);
    }
    kiln_foz_writer_destroy(x->w);
    for (size_t i = 0; i < x->nextra; i++) {
        kiln__free(x->extra[i].bytes);
        kiln__free(x->extra[i].needs);
    }
    kiln__free(x->extra);
    plan_clear(&x->plan);
    kiln__free(x->plan.e);
    kiln__free(x);
    kiln_cache_entries_free(ents);
    return rc;
}
