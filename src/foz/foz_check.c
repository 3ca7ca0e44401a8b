/*
 * foz_check.c - the recorded state of a closure checked against the
 * structure rules of the Vulkan specification and a device's limits before
 * any of it reaches a driver (docs/foz.md, "Recorded state is checked").
 *
 * Design.
 * - One home: every value the builders (foz_builder.c, foz_builder_rt.c)
 *   read from a recording and hand to the driver as an enum, a count, an
 *   index or a handle is checked here, and the builders build only what
 *   passed. A driver is entitled to crash on an invalid create-info (the
 *   specification says "must"), so "the driver will refuse it" is no check.
 * - Two tiers, one code path. The structure rules (enum ranges, a handle
 *   the pipeline needs, a state block it needs, array lengths that match
 *   their counts, indices inside their arrays) hold on every device; the
 *   counts are compared with a struct kiln_foz_limits. At import no device
 *   is known, so kiln's bounds are used (kiln_foz_limits_bound): each far
 *   above what any device reports, so nothing a device could build is
 *   refused there; at build the device's own VkPhysicalDeviceLimits are
 *   (kiln_foz_limits_from_vk). The specification's guaranteed minimums are
 *   never used to refuse: a device may offer more (maxColorAttachments is 4
 *   in the specification and 8 on every desktop GPU).
 * - Wide structures are read by tables: each enum field names its key and
 *   its set of values (ranges), each limit its name and where it lives in
 *   VkPhysicalDeviceLimits. A rule that fails writes one sentence naming
 *   what broke it and returns KILN_EFORMAT; the first failure wins.
 * - The walk is bounded: a pipeline and the libraries it links (each once,
 *   at most KILN__FOZ_MAX_LIBRARIES, 16 deep), the layout and render pass
 *   each names, their set layouts and samplers. Arrays are checked against
 *   their limits before they are walked, so a recording of a million
 *   attributes costs one comparison.
 */
/* The builder's JSON access (get, len, at, kiln__fb_hash_of) and flags. */
#include "foz_builder_private.h"

#include <stdarg.h>
#include <stddef.h>

/* ---------------------------------------------------------------------------
 * Limits
 * ------------------------------------------------------------------------ */

/* A limit's name, kiln's bound for it, the specification's minimum, and
 * where VkPhysicalDeviceLimits keeps it (SIZE_MAX: a float, read apart). */
static const struct {
    const char *name;
    uint32_t bound;
    uint32_t minimum;
    size_t offset;
} limit_info[KILN_FOZ_LIMIT_COUNT] = {
    [KILN_FOZ_LIMIT_VERTEX_INPUT_ATTRIBUTES] = {"maxVertexInputAttributes", 256, 16,
                                                offsetof(VkPhysicalDeviceLimits,
                                                         maxVertexInputAttributes)},
    [KILN_FOZ_LIMIT_VERTEX_INPUT_BINDINGS] = {"maxVertexInputBindings", 256, 16,
                                              offsetof(VkPhysicalDeviceLimits,
                                                       maxVertexInputBindings)},
    [KILN_FOZ_LIMIT_VERTEX_INPUT_ATTRIBUTE_OFFSET] = {"maxVertexInputAttributeOffset", UINT32_MAX,
                                                      2047,
                                                      offsetof(VkPhysicalDeviceLimits,
                                                               maxVertexInputAttributeOffset)},
    [KILN_FOZ_LIMIT_VERTEX_INPUT_BINDING_STRIDE] = {"maxVertexInputBindingStride", UINT32_MAX, 2048,
                                                    offsetof(VkPhysicalDeviceLimits,
                                                             maxVertexInputBindingStride)},
    [KILN_FOZ_LIMIT_COLOR_ATTACHMENTS] = {"maxColorAttachments", 32, 4,
                                          offsetof(VkPhysicalDeviceLimits, maxColorAttachments)},
    [KILN_FOZ_LIMIT_BOUND_DESCRIPTOR_SETS] = {"maxBoundDescriptorSets", 64, 4,
                                              offsetof(VkPhysicalDeviceLimits,
                                                       maxBoundDescriptorSets)},
    [KILN_FOZ_LIMIT_VIEWPORTS] = {"maxViewports", 64, 1,
                                  offsetof(VkPhysicalDeviceLimits, maxViewports)},
    [KILN_FOZ_LIMIT_PUSH_CONSTANTS_SIZE] = {"maxPushConstantsSize", 65536, 128,
                                            offsetof(VkPhysicalDeviceLimits, maxPushConstantsSize)},
    [KILN_FOZ_LIMIT_TESSELLATION_PATCH_SIZE] = {"maxTessellationPatchSize", 256, 32,
                                                offsetof(VkPhysicalDeviceLimits,
                                                         maxTessellationPatchSize)},
    [KILN_FOZ_LIMIT_SAMPLER_ANISOTROPY] = {"maxSamplerAnisotropy", 64, 1, SIZE_MAX},
};

void kiln_foz_limits_bound(struct kiln_foz_limits *l)
{
    if (!l)
        return;
    memset(l, 0, sizeof(*l));
    for (int i = 0; i < KILN_FOZ_LIMIT_COUNT; i++)
        l->value[i] = limit_info[i].bound;
}

void kiln_foz_limits_minimum(struct kiln_foz_limits *l)
{
    if (!l)
        return;
    memset(l, 0, sizeof(*l));
    l->device = true;
    for (int i = 0; i < KILN_FOZ_LIMIT_COUNT; i++)
        l->value[i] = limit_info[i].minimum;
}

void kiln_foz_limits_from_vk(const VkPhysicalDeviceLimits *vk, struct kiln_foz_limits *l)
{
    if (!vk || !l)
        return;
    memset(l, 0, sizeof(*l));
    l->device = true;
    for (int i = 0; i < KILN_FOZ_LIMIT_COUNT; i++) {
        if (limit_info[i].offset == SIZE_MAX)
            continue;
        memcpy(&l->value[i], (const char *)vk + limit_info[i].offset, sizeof(uint32_t));
    }
    float a = vk->maxSamplerAnisotropy;
    l->value[KILN_FOZ_LIMIT_SAMPLER_ANISOTROPY] = a >= 1.0f && a < 4294967040.0f ? (uint32_t)a : 1;
}

const char *kiln_foz_limit_name(enum kiln_foz_limit limit)
{
    return (unsigned)limit < KILN_FOZ_LIMIT_COUNT ? limit_info[limit].name : "unknown";
}

/* ---------------------------------------------------------------------------
 * One check: the first failure's sentence
 * ------------------------------------------------------------------------ */

struct chk {
    const struct kiln_foz_limits *lim;
    struct json_object *doc;
    uint64_t tag;
    char *why;
    size_t cap;
    uint64_t seen[KILN__FOZ_MAX_LIBRARIES]; /* libraries checked */
    uint32_t nseen;
};

KILN_PRINTF(2, 3) static int refuse(struct chk *k, const char *fmt, ...)
{
    if (k->why && k->cap) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(k->why, k->cap, fmt, ap);
        va_end(ap);
    }
    return KILN_EFORMAT;
}

/* A count against a limit: "100 colour-blend attachments, more than the
 * device's maxColorAttachments 8". `n` may exceed 32 bits. */
static int over(struct chk *k, uint64_t n, enum kiln_foz_limit limit, const char *what)
{
    uint32_t v = k->lim->value[limit];
    if (n <= v)
        return KILN_OK;
    if (k->lim->device)
        return refuse(k, "%" PRIu64 " %s, more than the device's %s %u", n, what,
                      limit_info[limit].name, v);
    return refuse(k, "%" PRIu64 " %s, more than any device's %s (kiln's bound: %u)", n, what,
                  limit_info[limit].name, v);
}

/* A member as a signed 64-bit number (missing: 0), so that no recorded
 * value is cut to 32 bits before it is judged. */
static int64_t num(struct json_object *o, const char *key)
{
    return json_object_get_int64(get(o, key));
}

#define hash_of kiln__fb_hash_of
/* An array's length as size_t, for the sentences' %zu. */
#define alen(a) ((size_t)len(a))

static struct json_object *recorded(struct chk *k, const char *member, uint64_t hash)
{
    char name[17];
    snprintf(name, sizeof(name), "%016" PRIx64, hash);
    return get(get(k->doc, member), name);
}

/* ---------------------------------------------------------------------------
 * Enum fields, by table
 * ------------------------------------------------------------------------ */

struct range {
    int64_t lo, hi;
};

struct enum_set {
    const char *type;
    const struct range *r;
    size_t n;
};

#define SET(name, type, ...)                              \
    static const struct range name##_r[] = {__VA_ARGS__}; \
    static const struct enum_set name = {type, name##_r, KILN_ARRAY_LEN(name##_r)}

SET(FORMAT, "VkFormat", {0, 184}, {1000054000, 1000054007}, {1000066000, 1000066013},
    {1000156000, 1000156033}, {1000330000, 1000330003}, {1000340000, 1000340001},
    {1000464000, 1000464000}, {1000470000, 1000470001});
SET(TOPOLOGY, "VkPrimitiveTopology", {0, 10});
SET(POLYGON_MODE, "VkPolygonMode", {0, 2}, {1000153000, 1000153000});
SET(CULL_MODE, "VkCullModeFlags", {0, 3});
SET(FRONT_FACE, "VkFrontFace", {0, 1});
SET(COMPARE_OP, "VkCompareOp", {0, 7});
SET(STENCIL_OP, "VkStencilOp", {0, 7});
SET(BLEND_FACTOR, "VkBlendFactor", {0, 18});
SET(BLEND_OP, "VkBlendOp", {0, 4}, {1000148000, 1000148045});
SET(LOGIC_OP, "VkLogicOp", {0, 15});
SET(WRITE_MASK, "VkColorComponentFlags", {0, 15});
SET(SAMPLES, "VkSampleCountFlagBits", {1, 2}, {4, 4}, {8, 8}, {16, 16}, {32, 32}, {64, 64});
SET(LOAD_OP, "VkAttachmentLoadOp", {0, 2}, {1000400000, 1000400000});
SET(STORE_OP, "VkAttachmentStoreOp", {0, 1}, {1000301000, 1000301000});
SET(INPUT_RATE, "VkVertexInputRate", {0, 1});
SET(FILTER, "VkFilter", {0, 1}, {1000015000, 1000015000});
SET(MIPMAP_MODE, "VkSamplerMipmapMode", {0, 1});
SET(ADDRESS_MODE, "VkSamplerAddressMode", {0, 4});
SET(BORDER_COLOR, "VkBorderColor", {0, 5}, {1000287003, 1000287004});
SET(DESCRIPTOR_TYPE, "VkDescriptorType", {0, 10}, {1000138000, 1000138000},
    {1000150000, 1000150000}, {1000165000, 1000165000}, {1000351000, 1000351000},
    {1000440000, 1000440001}, {1000570000, 1000570000});
SET(BIND_POINT, "VkPipelineBindPoint", {0, 0}, {1000369003, 1000369003});
SET(GROUP_TYPE, "VkRayTracingShaderGroupTypeKHR", {0, 2});

struct field {
    const char *key;
    const struct enum_set *set;
};

static const struct field rasterization_fields[] = {
    {"polygonMode", &POLYGON_MODE}, {"cullMode", &CULL_MODE}, {"frontFace", &FRONT_FACE}};
static const struct field input_assembly_fields[] = {{"topology", &TOPOLOGY}};
static const struct field multisample_fields[] = {{"rasterizationSamples", &SAMPLES}};
static const struct field depth_stencil_fields[] = {{"depthCompareOp", &COMPARE_OP}};
static const struct field stencil_face_fields[] = {{"failOp", &STENCIL_OP},
                                                   {"passOp", &STENCIL_OP},
                                                   {"depthFailOp", &STENCIL_OP},
                                                   {"compareOp", &COMPARE_OP}};
static const struct field blend_attachment_fields[] = {{"srcColorBlendFactor", &BLEND_FACTOR},
                                                       {"dstColorBlendFactor", &BLEND_FACTOR},
                                                       {"colorBlendOp", &BLEND_OP},
                                                       {"srcAlphaBlendFactor", &BLEND_FACTOR},
                                                       {"dstAlphaBlendFactor", &BLEND_FACTOR},
                                                       {"alphaBlendOp", &BLEND_OP},
                                                       {"colorWriteMask", &WRITE_MASK}};
static const struct field attachment_fields[] = {
    {"format", &FORMAT},    {"samples", &SAMPLES},       {"loadOp", &LOAD_OP},
    {"storeOp", &STORE_OP}, {"stencilLoadOp", &LOAD_OP}, {"stencilStoreOp", &STORE_OP}};
static const struct field attribute_fields[] = {{"format", &FORMAT}};
static const struct field binding_fields[] = {{"inputRate", &INPUT_RATE}};
static const struct field sampler_fields[] = {
    {"magFilter", &FILTER},          {"minFilter", &FILTER},
    {"mipmapMode", &MIPMAP_MODE},    {"addressModeU", &ADDRESS_MODE},
    {"addressModeV", &ADDRESS_MODE}, {"addressModeW", &ADDRESS_MODE},
    {"borderColor", &BORDER_COLOR}};
static const struct field set_binding_fields[] = {{"descriptorType", &DESCRIPTOR_TYPE}};
static const struct field subpass_fields[] = {{"pipelineBindPoint", &BIND_POINT}};
static const struct field group_fields[] = {{"type", &GROUP_TYPE}};

/* Checks each field of `o` the table names (a missing one reads as 0). */
static int fields(struct chk *k, struct json_object *o, const char *where, const struct field *f,
                  size_t n)
{
    for (size_t i = 0; i < n; i++) {
        int64_t v = num(o, f[i].key);
        bool in = false;
        for (size_t r = 0; r < f[i].set->n && !in; r++)
            in = v >= f[i].set->r[r].lo && v <= f[i].set->r[r].hi;
        if (!in)
            return refuse(k, "%s %s %" PRId64 " is not a %s", where, f[i].key, v, f[i].set->type);
    }
    return KILN_OK;
}

#define FIELDS(k, o, where, table) fields(k, o, where, table, KILN_ARRAY_LEN(table))

/* ---------------------------------------------------------------------------
 * Dynamic states
 * ------------------------------------------------------------------------ */

#define DYN_VIEWPORT            0
#define DYN_SCISSOR             1
#define DYN_VIEWPORT_WITH_COUNT 1000267003
#define DYN_SCISSOR_WITH_COUNT  1000267004
#define DYN_VERTEX_INPUT        1000352000
#define DYN_TOPOLOGY            1000267002
#define DYN_RESTART             1000377004
#define DYN_DISCARD             1000377001
#define DYN_PATCH_POINTS        1000377000
#define DYN_DEPTH_CLAMP         1000455003
#define DYN_POLYGON_MODE        1000455004
#define DYN_SAMPLES             1000455005
#define DYN_BLEND_ENABLE        1000455010
#define DYN_BLEND_EQUATION      1000455011
#define DYN_WRITE_MASK          1000455012
#define DYN_DEPTH_TEST          1000267006
#define DYN_STENCIL_OP          1000267011
#define MAX_DYNAMIC             256

struct dyn {
    int64_t v[MAX_DYNAMIC];
    size_t n;
};

static bool has(const struct dyn *d, int64_t s)
{
    for (size_t i = 0; i < d->n; i++)
        if (d->v[i] == s)
            return true;
    return false;
}

static int dynamic_states(struct chk *k, struct json_object *p, struct dyn *d)
{
    struct json_object *a = get(get(p, "dynamicState"), "dynamicState");
    d->n = 0;
    if (alen(a) > MAX_DYNAMIC)
        return refuse(k, "%zu dynamic states, more than there are", alen(a));
    for (size_t i = 0; i < alen(a); i++) {
        int64_t v = json_object_get_int64(at(a, i));
        if (has(d, v))
            return refuse(k, "dynamic state %" PRId64 " is named twice", v);
        d->v[d->n++] = v;
    }
    return KILN_OK;
}

/* ---------------------------------------------------------------------------
 * Stages: bit, entry point, specialization
 * ------------------------------------------------------------------------ */

static int specialization(struct chk *k, struct json_object *si, uint32_t index)
{
    int64_t size = num(si, "dataSize");
    if (size < 0 || size > (int64_t)KILN_STATE_MAX_BYTES)
        return refuse(k, "stage %u: specialization dataSize %" PRId64 " is out of range", index,
                      size);
    struct json_object *m = get(si, "mapEntries");
    if (alen(m) > 4096)
        return refuse(k, "stage %u: %zu specialization map entries", index, alen(m));
    for (size_t i = 0; i < alen(m); i++) {
        struct json_object *e = at(m, i);
        int64_t id = num(e, "constantID"), off = num(e, "offset"), n = num(e, "size");
        if (off < 0 || n < 0 || off > size || n > size - off)
            return refuse(k,
                          "stage %u: specialization constant %" PRId64 " (offset %" PRId64
                          ", size %" PRId64 ") lies past its %" PRId64 " bytes of data",
                          index, id, off, n, size);
        for (size_t j = 0; j < i; j++)
            if (num(at(m, j), "constantID") == id)
                return refuse(k, "stage %u: specialization constant %" PRId64 " is mapped twice",
                              index, id);
    }
    return KILN_OK;
}

/* The stage bits of each pipeline kind. */
#define GRAPHICS_STAGES 0xdfu   /* vertex, tessellation, geometry, fragment, task, mesh */
#define RT_STAGES       0x3f00u /* raygen, any hit, closest hit, miss, intersection, callable */
#define STAGE_COMPUTE   0x20u
#define STAGE_MESH      0x80u /* VK_SHADER_STAGE_MESH_BIT_EXT, newer than the oldest headers */

static uint32_t stage_bits(uint64_t tag)
{
    return tag == KILN_FOZ_TAG_GRAPHICS_PIPELINE  ? GRAPHICS_STAGES
           : tag == KILN_FOZ_TAG_COMPUTE_PIPELINE ? STAGE_COMPUTE
                                                  : RT_STAGES;
}

static int stage(struct chk *k, struct json_object *s, uint32_t index, uint32_t *bit)
{
    int64_t v = num(s, "stage");
    uint32_t allowed = stage_bits(k->tag);
    if (v <= 0 || v > UINT32_MAX || (v & (v - 1)) != 0 || !((uint32_t)v & allowed))
        return refuse(k, "stage %u has stage 0x%" PRIx64 ", not one %s pipeline stage", index,
                      (uint64_t)v, kiln_foz_kind_name(kiln_foz_kind_of(k->tag)));
    *bit = (uint32_t)v;
    uint64_t mod;
    if (!hash_of(get(s, "module"), &mod) || mod == 0)
        return refuse(k, "stage %u has no shader module", index);
    struct json_object *name = get(s, "name");
    if (!json_object_is_type(name, json_type_string))
        return refuse(k, "stage %u has no entry point name", index);
    size_t n = (size_t)json_object_get_string_len(name);
    if (n == 0)
        return refuse(k, "stage %u has an empty entry point name", index);
    if (n > KILN_PAYLOAD_MAX_ENTRY || strlen(json_object_get_string(name)) != n)
        return refuse(k, "stage %u: the entry point name is not a name", index);
    struct json_object *si = get(s, "specializationInfo");
    return si ? specialization(k, si, index) : KILN_OK;
}

/* The recorded stages of `p`: each checked, each bit once; their bits in *bits. */
static int stages(struct chk *k, struct json_object *p, uint32_t *bits)
{
    *bits = 0;
    if (k->tag == KILN_FOZ_TAG_COMPUTE_PIPELINE) {
        if (!get(p, "stage"))
            return refuse(k, "a compute pipeline has no stage");
        return stage(k, get(p, "stage"), 0, bits);
    }
    struct json_object *a = get(p, "stages");
    if (alen(a) > KILN_FOZ_MAX_STAGES)
        return refuse(k, "%zu stages, more than kiln builds (%u)", alen(a), KILN_FOZ_MAX_STAGES);
    for (size_t i = 0; i < alen(a); i++) {
        uint32_t bit;
        KILN_TRY(stage(k, at(a, i), (uint32_t)i, &bit));
        if (k->tag == KILN_FOZ_TAG_GRAPHICS_PIPELINE && (*bits & bit))
            return refuse(k, "stage 0x%x appears twice", bit);
        *bits |= bit;
    }
    return KILN_OK;
}

/* ---------------------------------------------------------------------------
 * Samplers, set layouts, pipeline layouts
 * ------------------------------------------------------------------------ */

static int sampler(struct chk *k, uint64_t hash)
{
    struct json_object *o = recorded(k, "samplers", hash);
    if (!o)
        return refuse(k, "the closure has no sampler %016" PRIx64, hash);
    char where[40];
    snprintf(where, sizeof(where), "sampler %016" PRIx64, hash);
    KILN_TRY(FIELDS(k, o, where, sampler_fields));
    if (num(o, "compareEnable"))
        KILN_TRY(fields(k, o, where, &(struct field){"compareOp", &COMPARE_OP}, 1));
    if (num(o, "anisotropyEnable")) {
        double a = json_object_get_double(get(o, "maxAnisotropy"));
        if (!(a >= 1.0))
            return refuse(k, "%s: maxAnisotropy %g is less than 1", where, a);
        /* Rounded up, so that 16.5 is more than a limit of 16. */
        uint64_t n = a < 1.8e19 ? (uint64_t)a : UINT64_MAX;
        if ((double)n < a && n < UINT64_MAX)
            n++;
        KILN_TRY(over(k, n, KILN_FOZ_LIMIT_SAMPLER_ANISOTROPY, "times anisotropy"));
    }
    double lo = json_object_get_double(get(o, "minLod")),
           hi = json_object_get_double(get(o, "maxLod"));
    if (hi < lo)
        return refuse(k, "%s: maxLod %g is less than minLod %g", where, hi, lo);
    return KILN_OK;
}

/* One binding of a set layout: its type and immutable samplers. */
static int set_binding(struct chk *k, struct json_object *b, const char *where)
{
    KILN_TRY(FIELDS(k, b, where, set_binding_fields));
    struct json_object *imm = get(b, "immutableSamplers");
    int64_t type = num(b, "descriptorType");
    if (!imm ||
        (type != VK_DESCRIPTOR_TYPE_SAMPLER && type != VK_DESCRIPTOR_TYPE_COMBINED_IMAGE_SAMPLER))
        return KILN_OK; /* the specification ignores them for other types */
    if ((int64_t)alen(imm) != num(b, "descriptorCount"))
        return refuse(k, "%s: %zu immutable samplers for descriptorCount %" PRId64, where,
                      alen(imm), num(b, "descriptorCount"));
    for (size_t i = 0; i < alen(imm); i++) {
        uint64_t h;
        if (!hash_of(at(imm, i), &h) || h == 0)
            return refuse(k, "%s: immutable sampler %zu is a null handle", where, i);
        KILN_TRY(sampler(k, h));
    }
    return KILN_OK;
}

static int set_layout(struct chk *k, uint64_t hash)
{
    struct json_object *o = recorded(k, "setLayouts", hash);
    if (!o)
        return refuse(k, "the closure has no descriptor set layout %016" PRIx64, hash);
    struct json_object *bs = get(o, "bindings");
    if (alen(bs) > 65536)
        return refuse(k, "set layout %016" PRIx64 ": %zu bindings", hash, alen(bs));
    for (size_t i = 0; i < alen(bs); i++) {
        char where[96];
        snprintf(where, sizeof(where), "set layout %016" PRIx64 " binding %zu", hash, i);
        KILN_TRY(set_binding(k, at(bs, i), where));
        for (size_t j = 0; j < i; j++)
            if (num(at(bs, j), "binding") == num(at(bs, i), "binding"))
                return refuse(k, "set layout %016" PRIx64 ": binding %" PRId64 " appears twice",
                              hash, num(at(bs, i), "binding"));
    }
    struct json_object *pn = get(o, "pNext");
    for (size_t i = 0; i < alen(pn); i++) {
        struct json_object *f = get(at(pn, i), "bindingFlags");
        if (num(at(pn, i), "sType") ==
                VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_BINDING_FLAGS_CREATE_INFO &&
            alen(f) && alen(f) != alen(bs))
            return refuse(k, "set layout %016" PRIx64 ": %zu binding flags for %zu bindings", hash,
                          alen(f), alen(bs));
    }
    return KILN_OK;
}

/* `null_sets`: a null set layout is allowed (graphics pipeline libraries). */
static int pipeline_layout(struct chk *k, uint64_t hash, bool null_sets)
{
    struct json_object *o = recorded(k, "pipelineLayouts", hash);
    if (!o)
        return refuse(k, "the closure has no pipeline layout %016" PRIx64, hash);
    struct json_object *sets = get(o, "setLayouts"), *pcs = get(o, "pushConstantRanges");
    KILN_TRY(over(k, alen(sets), KILN_FOZ_LIMIT_BOUND_DESCRIPTOR_SETS, "descriptor set layouts"));
    for (size_t i = 0; i < alen(sets); i++) {
        uint64_t h;
        if (!hash_of(at(sets, i), &h))
            return refuse(k, "pipeline layout %016" PRIx64 ": set layout %zu is not a hash", hash,
                          i);
        if (h == 0 && !null_sets)
            return refuse(k, "pipeline layout %016" PRIx64 ": set layout %zu is a null handle",
                          hash, i);
        if (h)
            KILN_TRY(set_layout(k, h));
    }
    uint64_t used = 0;
    if (alen(pcs) > 32)
        return refuse(k, "pipeline layout %016" PRIx64 ": %zu push constant ranges", hash,
                      alen(pcs));
    for (size_t i = 0; i < alen(pcs); i++) {
        int64_t st = num(at(pcs, i), "stageFlags"), off = num(at(pcs, i), "offset"),
                n = num(at(pcs, i), "size");
        if (st <= 0 || st > UINT32_MAX || n <= 0 || off < 0 || off % 4 || n % 4)
            return refuse(k,
                          "pipeline layout %016" PRIx64
                          ": push constant range %zu (stages 0x%" PRIx64 ", offset %" PRId64
                          ", size %" PRId64 ") breaks the rules",
                          hash, i, (uint64_t)st, off, n);
        KILN_TRY(over(k, (uint64_t)off + (uint64_t)n, KILN_FOZ_LIMIT_PUSH_CONSTANTS_SIZE,
                      "bytes of push constants"));
        if (used & (uint64_t)st)
            return refuse(
                k, "pipeline layout %016" PRIx64 ": two push constant ranges share a stage", hash);
        used |= (uint64_t)st;
    }
    return KILN_OK;
}

/* ---------------------------------------------------------------------------
 * Render passes
 * ------------------------------------------------------------------------ */

#define UNUSED_INDEX 0xffffffffll

/* The colour and depth/stencil use of one subpass, for the pipeline. */
struct subpass_use {
    size_t colors;
    bool depth;
};

static int refs(struct chk *k, struct json_object *a, int64_t natt, const char *what,
                const char *where)
{
    for (size_t i = 0; i < alen(a); i++) {
        int64_t v = json_object_is_type(at(a, i), json_type_object)
                        ? num(at(a, i), "attachment")
                        : json_object_get_int64(at(a, i));
        if (v != UNUSED_INDEX && (v < 0 || v >= natt))
            return refuse(k, "%s: %s %zu names attachment %" PRId64 " of %" PRId64, where, what, i,
                          v, natt);
    }
    return KILN_OK;
}

static int subpass(struct chk *k, struct json_object *s, int64_t natt, const char *where)
{
    KILN_TRY(FIELDS(k, s, where, subpass_fields));
    struct json_object *c = get(s, "colorAttachments"), *r = get(s, "resolveAttachments");
    KILN_TRY(over(k, alen(c), KILN_FOZ_LIMIT_COLOR_ATTACHMENTS, "colour attachments in a subpass"));
    if (r && alen(r) != alen(c))
        return refuse(k, "%s: %zu resolve attachments for %zu colour attachments", where, alen(r),
                      alen(c));
    KILN_TRY(refs(k, get(s, "inputAttachments"), natt, "input attachment", where));
    KILN_TRY(refs(k, c, natt, "colour attachment", where));
    KILN_TRY(refs(k, r, natt, "resolve attachment", where));
    struct json_object *ds = get(s, "depthStencilAttachment");
    if (ds) {
        int64_t v = num(ds, "attachment");
        if (v != UNUSED_INDEX && (v < 0 || v >= natt))
            return refuse(k, "%s: the depth/stencil attachment is %" PRId64 " of %" PRId64, where,
                          v, natt);
    }
    struct json_object *pres = get(s, "preserveAttachments");
    for (size_t i = 0; i < alen(pres); i++) {
        int64_t v = json_object_get_int64(at(pres, i));
        if (v < 0 || v >= natt)
            return refuse(k, "%s: preserve attachment %zu is %" PRId64 " of %" PRId64, where, i, v,
                          natt);
    }
    return KILN_OK;
}

static int render_pass_pnext(struct chk *k, struct json_object *o, size_t nsub, const char *where)
{
    struct json_object *pn = get(o, "pNext");
    for (size_t i = 0; i < alen(pn); i++) {
        struct json_object *s = at(pn, i);
        int64_t t = num(s, "sType");
        if (t == VK_STRUCTURE_TYPE_RENDER_PASS_MULTIVIEW_CREATE_INFO && alen(get(s, "viewMasks")) &&
            alen(get(s, "viewMasks")) != nsub)
            return refuse(k, "%s: %zu multiview masks for %zu subpasses", where,
                          alen(get(s, "viewMasks")), nsub);
        if (t != VK_STRUCTURE_TYPE_RENDER_PASS_INPUT_ATTACHMENT_ASPECT_CREATE_INFO)
            continue;
        struct json_object *a = get(s, "aspectReferences");
        for (size_t j = 0; j < alen(a); j++) {
            int64_t sp = num(at(a, j), "subpass"), ix = num(at(a, j), "inputAttachmentIndex");
            struct json_object *sub =
                sp >= 0 && (size_t)sp < nsub ? at(get(o, "subpasses"), (size_t)sp) : NULL;
            if (!sub || ix < 0 || (size_t)ix >= alen(get(sub, "inputAttachments")))
                return refuse(k, "%s: input aspect reference %zu names no input attachment", where,
                              j);
        }
    }
    return KILN_OK;
}

/* Checks render pass `hash`; the use of subpass `index` goes to *use. */
static int render_pass(struct chk *k, uint64_t hash, int64_t index, struct subpass_use *use)
{
    struct json_object *o = recorded(k, "renderPasses", hash);
    if (!o)
        o = recorded(k, "renderPasses2", hash);
    if (!o)
        return refuse(k, "the closure has no render pass %016" PRIx64, hash);
    char where[40];
    snprintf(where, sizeof(where), "render pass %016" PRIx64, hash);
    struct json_object *as = get(o, "attachments"), *ss = get(o, "subpasses"),
                       *ds = get(o, "dependencies");
    if (alen(ss) == 0)
        return refuse(k, "%s has no subpass", where);
    if (alen(as) > 65536 || alen(ss) > 1024 || alen(ds) > 65536)
        return refuse(k, "%s: %zu attachments, %zu subpasses, %zu dependencies", where, alen(as),
                      alen(ss), alen(ds));
    for (size_t i = 0; i < alen(as); i++) {
        char w[96];
        snprintf(w, sizeof(w), "%s attachment %zu", where, i);
        KILN_TRY(FIELDS(k, at(as, i), w, attachment_fields));
    }
    for (size_t i = 0; i < alen(ss); i++) {
        char w[96];
        snprintf(w, sizeof(w), "%s subpass %zu", where, i);
        KILN_TRY(subpass(k, at(ss, i), (int64_t)alen(as), w));
    }
    for (size_t i = 0; i < alen(ds); i++) {
        int64_t s = num(at(ds, i), "srcSubpass"), d = num(at(ds, i), "dstSubpass");
        bool sok = s == UNUSED_INDEX || (s >= 0 && (size_t)s < alen(ss));
        bool dok = d == UNUSED_INDEX || (d >= 0 && (size_t)d < alen(ss));
        if (!sok || !dok || (s == UNUSED_INDEX && d == UNUSED_INDEX))
            return refuse(k,
                          "%s: dependency %zu joins subpasses %" PRId64 " and %" PRId64 " of %zu",
                          where, i, s, d, alen(ss));
    }
    KILN_TRY(render_pass_pnext(k, o, alen(ss), where));
    if (index < 0 || (size_t)index >= alen(ss))
        return refuse(k, "subpass %" PRId64 " of a render pass of %zu", index, alen(ss));
    struct json_object *sp = at(ss, (size_t)index);
    use->colors = alen(get(sp, "colorAttachments"));
    struct json_object *dsa = get(sp, "depthStencilAttachment");
    use->depth = dsa && num(dsa, "attachment") != UNUSED_INDEX;
    return KILN_OK;
}

/* ---------------------------------------------------------------------------
 * Graphics pipelines
 * ------------------------------------------------------------------------ */

/* VkGraphicsPipelineLibraryFlagBitsEXT. */
#define PART_VERTEX_INPUT 0x1u
#define PART_PRE_RASTER   0x2u
#define PART_FRAGMENT     0x4u
#define PART_OUTPUT       0x8u

static struct json_object *pnext_of(struct json_object *o, int64_t stype)
{
    struct json_object *pn = get(o, "pNext");
    for (size_t i = 0; i < alen(pn); i++)
        if (num(at(pn, i), "sType") == stype)
            return at(pn, i);
    return NULL;
}

/* What one graphics pipeline is made of, for the rules below. */
struct gfx {
    uint32_t parts;  /* the state it specifies itself (VkGraphicsPipelineLibraryFlagBitsEXT) */
    uint32_t stages; /* its stage bits */
    struct dyn dyn;
    bool discard;           /* rasterizer discard, statically on */
    struct subpass_use use; /* its subpass (render pass or dynamic rendering) */
    bool use_known;         /* a render pass or a rendering info said */
};

static int vertex_input(struct chk *k, struct json_object *p, const struct gfx *g)
{
    struct json_object *vi = get(p, "vertexInputState");
    if (!vi) {
        if (has(&g->dyn, DYN_VERTEX_INPUT))
            return KILN_OK;
        return refuse(k, "no vertex input state");
    }
    struct json_object *as = get(vi, "attributes"), *bs = get(vi, "bindings");
    KILN_TRY(over(k, alen(bs), KILN_FOZ_LIMIT_VERTEX_INPUT_BINDINGS, "vertex bindings"));
    KILN_TRY(over(k, alen(as), KILN_FOZ_LIMIT_VERTEX_INPUT_ATTRIBUTES, "vertex attributes"));
    for (size_t i = 0; i < alen(bs); i++) {
        int64_t b = num(at(bs, i), "binding"), s = num(at(bs, i), "stride");
        KILN_TRY(FIELDS(k, at(bs, i), "a vertex binding", binding_fields));
        if (b < 0 || s < 0)
            return refuse(k, "vertex binding %zu has binding %" PRId64 ", stride %" PRId64, i, b,
                          s);
        KILN_TRY(over(k, (uint64_t)b + 1, KILN_FOZ_LIMIT_VERTEX_INPUT_BINDINGS,
                      "vertex binding numbers"));
        KILN_TRY(over(k, (uint64_t)s, KILN_FOZ_LIMIT_VERTEX_INPUT_BINDING_STRIDE,
                      "bytes of vertex stride"));
        for (size_t j = 0; j < i; j++)
            if (num(at(bs, j), "binding") == b)
                return refuse(k, "vertex binding %" PRId64 " is described twice", b);
    }
    for (size_t i = 0; i < alen(as); i++) {
        struct json_object *a = at(as, i);
        int64_t loc = num(a, "location"), b = num(a, "binding"), off = num(a, "offset");
        KILN_TRY(FIELDS(k, a, "a vertex attribute", attribute_fields));
        if (loc < 0 || off < 0)
            return refuse(k, "vertex attribute %zu has location %" PRId64 ", offset %" PRId64, i,
                          loc, off);
        KILN_TRY(over(k, (uint64_t)loc + 1, KILN_FOZ_LIMIT_VERTEX_INPUT_ATTRIBUTES,
                      "vertex attribute locations"));
        KILN_TRY(over(k, (uint64_t)off, KILN_FOZ_LIMIT_VERTEX_INPUT_ATTRIBUTE_OFFSET,
                      "bytes of vertex attribute offset"));
        bool described = false;
        for (size_t j = 0; j < alen(bs) && !described; j++)
            described = num(at(bs, j), "binding") == b;
        if (!described && !has(&g->dyn, DYN_VERTEX_INPUT))
            return refuse(
                k, "vertex attribute %" PRId64 " reads binding %" PRId64 ", which is not described",
                loc, b);
        for (size_t j = 0; j < i; j++)
            if (num(at(as, j), "location") == loc)
                return refuse(k, "vertex attribute location %" PRId64 " appears twice", loc);
    }
    struct json_object *div = pnext_of(vi, 1000190001);
    struct json_object *dv = get(div, "vertexBindingDivisors");
    for (size_t i = 0; i < alen(dv); i++) {
        bool described = false;
        for (size_t j = 0; j < alen(bs) && !described; j++)
            described = num(at(bs, j), "binding") == num(at(dv, i), "binding");
        if (!described)
            return refuse(k, "a vertex divisor names binding %" PRId64 ", which is not described",
                          num(at(dv, i), "binding"));
    }
    return KILN_OK;
}

static int input_assembly(struct chk *k, struct json_object *p, const struct gfx *g)
{
    struct json_object *ia = get(p, "inputAssemblyState");
    if (!ia) {
        if (has(&g->dyn, DYN_TOPOLOGY) && has(&g->dyn, DYN_RESTART))
            return KILN_OK;
        return refuse(k, "no input assembly state");
    }
    KILN_TRY(FIELDS(k, ia, "input assembly", input_assembly_fields));
    bool tess = (g->stages & (VK_SHADER_STAGE_TESSELLATION_CONTROL_BIT |
                              VK_SHADER_STAGE_TESSELLATION_EVALUATION_BIT)) != 0;
    bool patches = num(ia, "topology") == VK_PRIMITIVE_TOPOLOGY_PATCH_LIST;
    if ((g->parts & PART_PRE_RASTER) && !has(&g->dyn, DYN_TOPOLOGY) && tess != patches)
        return refuse(k, tess ? "tessellation stages with a topology other than a patch list"
                              : "a patch list topology without tessellation stages");
    return KILN_OK;
}

static int viewports(struct chk *k, struct json_object *p, const struct gfx *g)
{
    struct json_object *vs = get(p, "viewportState");
    bool vwc = has(&g->dyn, DYN_VIEWPORT_WITH_COUNT), swc = has(&g->dyn, DYN_SCISSOR_WITH_COUNT);
    if (!vs) {
        if (vwc && swc)
            return KILN_OK;
        return refuse(k, "no viewport state, and rasterization is not discarded");
    }
    int64_t nv = num(vs, "viewportCount"), ns = num(vs, "scissorCount");
    if (nv < 0 || ns < 0 || (vwc ? nv != 0 : nv == 0) || (swc ? ns != 0 : ns == 0))
        return refuse(k,
                      "viewportCount %" PRId64 " and scissorCount %" PRId64
                      " do not suit the dynamic states",
                      nv, ns);
    KILN_TRY(over(k, (uint64_t)nv, KILN_FOZ_LIMIT_VIEWPORTS, "viewports"));
    KILN_TRY(over(k, (uint64_t)ns, KILN_FOZ_LIMIT_VIEWPORTS, "scissors"));
    if (!vwc && !swc && nv != ns)
        return refuse(k, "%" PRId64 " viewports but %" PRId64 " scissors", nv, ns);
    if (!vwc && !has(&g->dyn, DYN_VIEWPORT) && (int64_t)alen(get(vs, "viewports")) != nv)
        return refuse(k, "a static viewport count of %" PRId64 " with %zu viewports", nv,
                      alen(get(vs, "viewports")));
    if (!swc && !has(&g->dyn, DYN_SCISSOR) && (int64_t)alen(get(vs, "scissors")) != ns)
        return refuse(k, "a static scissor count of %" PRId64 " with %zu scissors", ns,
                      alen(get(vs, "scissors")));
    return KILN_OK;
}

/* The pre-rasterization state: rasterization, tessellation, viewports. */
static int pre_raster(struct chk *k, struct json_object *p, struct gfx *g)
{
    const uint32_t tc = VK_SHADER_STAGE_TESSELLATION_CONTROL_BIT,
                   te = VK_SHADER_STAGE_TESSELLATION_EVALUATION_BIT;
    bool mesh = (g->stages & STAGE_MESH) != 0;
    if (!mesh && !(g->stages & VK_SHADER_STAGE_VERTEX_BIT))
        return refuse(k, "no vertex or mesh stage");
    if (mesh && (g->stages & (VK_SHADER_STAGE_VERTEX_BIT | tc | te | VK_SHADER_STAGE_GEOMETRY_BIT)))
        return refuse(k, "a mesh stage with vertex, tessellation or geometry stages");
    if (!(g->stages & tc) != !(g->stages & te))
        return refuse(k, "one tessellation stage without the other");
    struct json_object *rs = get(p, "rasterizationState");
    if (!rs) {
        if (!(has(&g->dyn, DYN_DISCARD) && has(&g->dyn, DYN_POLYGON_MODE) &&
              has(&g->dyn, DYN_DEPTH_CLAMP)))
            return refuse(k, "no rasterization state");
    } else {
        KILN_TRY(FIELDS(k, rs, "rasterization", rasterization_fields));
        g->discard = num(rs, "rasterizerDiscardEnable") && !has(&g->dyn, DYN_DISCARD);
    }
    if (g->stages & tc) {
        struct json_object *ts = get(p, "tessellationState");
        if (!ts && !has(&g->dyn, DYN_PATCH_POINTS))
            return refuse(k, "tessellation stages without a tessellation state");
        int64_t n = num(ts, "patchControlPoints");
        if (ts && !has(&g->dyn, DYN_PATCH_POINTS)) {
            if (n <= 0)
                return refuse(k, "%" PRId64 " patch control points", n);
            KILN_TRY(over(k, (uint64_t)n, KILN_FOZ_LIMIT_TESSELLATION_PATCH_SIZE,
                          "patch control points"));
        }
    }
    return g->discard ? KILN_OK : viewports(k, p, g);
}

static int depth_stencil(struct chk *k, struct json_object *p, const struct gfx *g)
{
    struct json_object *ds = get(p, "depthStencilState");
    if (!ds) {
        bool dynamic = true;
        for (int64_t s = DYN_DEPTH_TEST; s <= DYN_STENCIL_OP; s++)
            dynamic = dynamic && has(&g->dyn, s);
        if (g->use.depth && !dynamic)
            return refuse(k, "a depth/stencil attachment but no depth/stencil state");
        return KILN_OK;
    }
    KILN_TRY(FIELDS(k, ds, "depth/stencil", depth_stencil_fields));
    KILN_TRY(FIELDS(k, get(ds, "front"), "the front stencil", stencil_face_fields));
    return FIELDS(k, get(ds, "back"), "the back stencil", stencil_face_fields);
}

static int color_blend(struct chk *k, struct json_object *p, const struct gfx *g)
{
    struct json_object *cb = get(p, "colorBlendState");
    if (!cb) {
        if (g->use.colors && !(has(&g->dyn, DYN_BLEND_ENABLE) && has(&g->dyn, DYN_BLEND_EQUATION) &&
                               has(&g->dyn, DYN_WRITE_MASK)))
            return refuse(k, "%zu colour attachments but no colour blend state", g->use.colors);
        return KILN_OK;
    }
    struct json_object *as = get(cb, "attachments");
    KILN_TRY(over(k, alen(as), KILN_FOZ_LIMIT_COLOR_ATTACHMENTS, "colour-blend attachments"));
    if (g->use_known && alen(as) != g->use.colors)
        return refuse(k, "%zu colour-blend attachments for a subpass of %zu colour attachments",
                      alen(as), g->use.colors);
    if (num(cb, "logicOpEnable"))
        KILN_TRY(fields(k, cb, "colour blend", &(struct field){"logicOp", &LOGIC_OP}, 1));
    for (size_t i = 0; i < alen(as); i++)
        KILN_TRY(FIELDS(k, at(as, i), "a colour-blend attachment", blend_attachment_fields));
    struct json_object *cw = pnext_of(cb, VK_STRUCTURE_TYPE_PIPELINE_COLOR_WRITE_CREATE_INFO_EXT);
    if (cw && num(cw, "attachmentCount") != (int64_t)alen(as))
        return refuse(k, "%" PRId64 " colour write enables for %zu colour-blend attachments",
                      num(cw, "attachmentCount"), alen(as));
    return KILN_OK;
}

/* The fragment output state: multisampling, depth/stencil, blending. */
static int fragment_output(struct chk *k, struct json_object *p, const struct gfx *g)
{
    struct json_object *ms = get(p, "multisampleState");
    if (!ms && !has(&g->dyn, DYN_SAMPLES))
        return refuse(k, "no multisample state, and rasterization is not discarded");
    if (ms) {
        KILN_TRY(FIELDS(k, ms, "multisample", multisample_fields));
        double s = json_object_get_double(get(ms, "minSampleShading"));
        if (num(ms, "sampleShadingEnable") && !(s >= 0.0 && s <= 1.0))
            return refuse(k, "minSampleShading %g is not in [0, 1]", s);
        struct json_object *mask = get(ms, "sampleMask");
        if (mask && (int64_t)alen(mask) != (num(ms, "rasterizationSamples") + 31) / 32)
            return refuse(k, "sampleMask has %zu words for %" PRId64 " samples", alen(mask),
                          num(ms, "rasterizationSamples"));
    }
    KILN_TRY(depth_stencil(k, p, g));
    return color_blend(k, p, g);
}

/* The subpass the pipeline renders to: a render pass's, or dynamic rendering's formats. */
static int target(struct chk *k, struct json_object *p, struct gfx *g)
{
    uint64_t rh;
    if (!hash_of(get(p, "renderPass"), &rh))
        return refuse(k, "renderPass is not a hash");
    if (rh) {
        g->use_known = true;
        return render_pass(k, rh, num(p, "subpass"), &g->use);
    }
    struct json_object *ri = pnext_of(p, VK_STRUCTURE_TYPE_PIPELINE_RENDERING_CREATE_INFO);
    if (!ri)
        return KILN_OK;
    struct json_object *f = get(ri, "colorAttachmentFormats");
    KILN_TRY(over(k, alen(f), KILN_FOZ_LIMIT_COLOR_ATTACHMENTS, "colour attachment formats"));
    for (size_t i = 0; i < alen(f); i++) {
        int64_t v = json_object_get_int64(at(f, i));
        bool in = false;
        for (size_t r = 0; r < FORMAT.n && !in; r++)
            in = v >= FORMAT.r[r].lo && v <= FORMAT.r[r].hi;
        if (!in)
            return refuse(k, "colour attachment format %zu, %" PRId64 ", is not a VkFormat", i, v);
    }
    g->use_known = true;
    g->use.colors = alen(f);
    g->use.depth = num(ri, "depthAttachmentFormat") || num(ri, "stencilAttachmentFormat");
    return KILN_OK;
}

static int graphics(struct chk *k, struct json_object *p)
{
    struct gfx g;
    memset(&g, 0, sizeof(g));
    bool library = (num(p, "flags") & FLAG_LIBRARY) != 0;
    bool links = pnext_of(p, STYPE_PIPELINE_LIBRARY) != NULL;
    struct json_object *gpl = pnext_of(p, STYPE_GRAPHICS_PIPELINE_LIB);
    /* A library with no part named is all four; a link specifies only the
     * parts it names itself, the rest come from its libraries. */
    g.parts = gpl ? (uint32_t)num(gpl, "flags") & 0xfu : library || !links ? 0xfu : 0;
    if (library && !g.parts)
        g.parts = 0xf;
    KILN_TRY(dynamic_states(k, p, &g.dyn));
    KILN_TRY(stages(k, p, &g.stages));
    uint64_t lh;
    if (!hash_of(get(p, "layout"), &lh))
        return refuse(k, "layout is not a hash");
    /* A link's layout must be compatible with its libraries': a handle too. */
    if (lh == 0 && ((g.parts & (PART_PRE_RASTER | PART_FRAGMENT)) || (links && !library)))
        return refuse(k, "a null pipeline layout");
    if (lh)
        KILN_TRY(pipeline_layout(k, lh, library || links));
    /* The parts that render to a subpass (foz_builder.c's GPL_PARTS_WITH_PASS). */
    if (g.parts & (PART_PRE_RASTER | PART_FRAGMENT | PART_OUTPUT))
        KILN_TRY(target(k, p, &g));
    bool mesh = (g.stages & STAGE_MESH) != 0;
    if ((g.parts & PART_VERTEX_INPUT) && !mesh) {
        KILN_TRY(vertex_input(k, p, &g));
        KILN_TRY(input_assembly(k, p, &g));
    }
    if (g.parts & PART_PRE_RASTER)
        KILN_TRY(pre_raster(k, p, &g));
    if ((g.parts & PART_OUTPUT) && !g.discard)
        KILN_TRY(fragment_output(k, p, &g));
    return KILN_OK;
}

/* ---------------------------------------------------------------------------
 * Compute and ray-tracing pipelines
 * ------------------------------------------------------------------------ */

static int compute(struct chk *k, struct json_object *p)
{
    uint32_t bits;
    KILN_TRY(stages(k, p, &bits));
    uint64_t lh;
    if (!hash_of(get(p, "layout"), &lh) || lh == 0)
        return refuse(k, "a null pipeline layout");
    return pipeline_layout(k, lh, false);
}

/* A group's shader index: unused, or a stage of the pipeline of one of `bits`. */
static int group_shader(struct chk *k, struct json_object *g, const char *key, size_t i,
                        struct json_object *st, uint32_t bits, bool needed)
{
    int64_t v = get(g, key) ? num(g, key) : UNUSED_INDEX;
    if (v == UNUSED_INDEX) {
        if (needed)
            return refuse(k, "ray-tracing group %zu has no %s", i, key);
        return KILN_OK;
    }
    if (!bits)
        return refuse(k, "ray-tracing group %zu: its type takes no %s", i, key);
    if (v < 0 || (size_t)v >= alen(st))
        return refuse(k, "ray-tracing group %zu: %s %" PRId64 " is not one of the %zu stages", i,
                      key, v, alen(st));
    if (!((uint32_t)num(at(st, (size_t)v), "stage") & bits))
        return refuse(k, "ray-tracing group %zu: %s %" PRId64 " is a stage of another kind", i, key,
                      v);
    return KILN_OK;
}

static int raytracing(struct chk *k, struct json_object *p)
{
    uint32_t bits;
    KILN_TRY(stages(k, p, &bits));
    bool libs = alen(get(get(p, "libraryInfo"), "libraries")) > 0;
    struct json_object *st = get(p, "stages"), *gs = get(p, "groups");
    if (!libs && (alen(st) == 0 || alen(gs) == 0))
        return refuse(k, "a ray-tracing pipeline with no stages or groups and no libraries");
    if (alen(gs) > 65536)
        return refuse(k, "%zu ray-tracing groups", alen(gs));
    for (size_t i = 0; i < alen(gs); i++) {
        struct json_object *g = at(gs, i);
        KILN_TRY(FIELDS(k, g, "a ray-tracing group", group_fields));
        int64_t t = num(g, "type");
        bool general = t == VK_RAY_TRACING_SHADER_GROUP_TYPE_GENERAL_KHR;
        bool procedural = t == VK_RAY_TRACING_SHADER_GROUP_TYPE_PROCEDURAL_HIT_GROUP_KHR;
        KILN_TRY(group_shader(k, g, "generalShader", i, st, general ? 0x2900u : 0, general));
        KILN_TRY(group_shader(k, g, "closestHitShader", i, st, general ? 0 : 0x400u, false));
        KILN_TRY(group_shader(k, g, "anyHitShader", i, st, general ? 0 : 0x200u, false));
        KILN_TRY(
            group_shader(k, g, "intersectionShader", i, st, procedural ? 0x1000u : 0, procedural));
    }
    uint64_t lh;
    if (!hash_of(get(p, "layout"), &lh) || lh == 0)
        return refuse(k, "a null pipeline layout");
    return pipeline_layout(k, lh, false);
}

/* ---------------------------------------------------------------------------
 * The walk: a pipeline and the libraries it links
 * ------------------------------------------------------------------------ */

static int pipeline(struct chk *k, struct json_object *p, int depth)
{
    if (!json_object_is_type(p, json_type_object))
        return refuse(k, "a pipeline is not an object");
    int rc = k->tag == KILN_FOZ_TAG_GRAPHICS_PIPELINE  ? graphics(k, p)
             : k->tag == KILN_FOZ_TAG_COMPUTE_PIPELINE ? compute(k, p)
                                                       : raytracing(k, p);
    if (rc < 0)
        return rc;
    uint64_t libs[KILN__FOZ_MAX_LIBRARIES];
    uint32_t n;
    if (kiln__foz_pipeline_libraries(p, libs, KILN__FOZ_MAX_LIBRARIES, &n) < 0)
        return refuse(k, "a pipeline library is not named by a hash");
    if (n > KILN__FOZ_MAX_LIBRARIES || (n && depth >= 16))
        return refuse(k, "pipeline libraries nest too deep or are too many");
    for (uint32_t i = 0; i < n; i++) {
        bool seen = false;
        for (uint32_t s = 0; s < k->nseen && !seen; s++)
            seen = k->seen[s] == libs[i];
        if (seen)
            continue;
        if (k->nseen == KILN__FOZ_MAX_LIBRARIES)
            return refuse(k, "more than %u pipeline libraries", KILN__FOZ_MAX_LIBRARIES);
        k->seen[k->nseen++] = libs[i];
        struct json_object *lib = recorded(k, kiln__foz_tag_member(k->tag), libs[i]);
        if (!lib)
            return refuse(k, "the closure has no pipeline library %016" PRIx64, libs[i]);
        char why[256] = "";
        struct chk sub = *k;
        sub.why = why;
        sub.cap = sizeof(why);
        rc = pipeline(&sub, lib, depth + 1);
        k->nseen = sub.nseen;
        memcpy(k->seen, sub.seen, sizeof(k->seen));
        if (rc < 0)
            return refuse(k, "pipeline library %016" PRIx64 ": %s", libs[i], why);
    }
    return KILN_OK;
}

int kiln__foz_check(struct json_object *doc, uint64_t tag, struct json_object *pipe,
                    const struct kiln_foz_limits *lim, char *why, size_t cap)
{
    struct kiln_foz_limits bound;
    if (!lim) {
        kiln_foz_limits_bound(&bound);
        lim = &bound;
    }
    if (why && cap)
        why[0] = '\0';
    struct chk k = {.lim = lim, .doc = doc, .tag = tag, .why = why, .cap = cap};
    return pipeline(&k, pipe, 0);
}

int kiln_foz_closure_check(const void *closure, size_t size, const struct kiln_foz_limits *lim,
                           char *why, size_t cap)
{
    if (!closure)
        return KILN_EINVAL;
    if (why && cap)
        why[0] = '\0';
    struct json_object *doc, *p;
    uint64_t tag, hash;
    int rc = kiln__foz_closure_parse(closure, size, &doc, &tag, &hash, &p);
    if (rc < 0) {
        if (why && cap)
            snprintf(why, cap, "%s",
                     rc == KILN_EFORMAT ? "not a kiln Fossilize closure"
                                        : "the closure has no pipeline");
        return rc;
    }
    rc = kiln__foz_check(doc, tag, p, lim, why, cap);
    json_object_put(doc);
    return rc;
}
