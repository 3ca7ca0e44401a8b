/*
 * vk_library.c - pipeline libraries (VK_EXT_graphics_pipeline_library):
 * a graphics pipeline linked from four parts, each built once per key.
 *
 * Design and invariants:
 *
 * - Enabled wherever offered. kiln_vk_create asks for the extension and
 *   VK_KHR_pipeline_library as if the caller had listed them
 *   (kiln__vk_library_wanted, read by vk_context.c's pick of extras, whose
 *   row enables the graphicsPipelineLibrary feature alone), unless
 *   kiln_vk_options.no_pipeline_library. kiln_vk_info.pipeline_library
 *   says whether it is on; a context without it builds every pipeline
 *   monolithically, whatever kiln_vk_graphics.link asks.
 *
 * - A split, not a second description. The caller (vk_pipeline.c) fills
 *   one whole VkGraphicsPipelineCreateInfo as for a monolithic create;
 *   part_info cuts it into the four library parts, each with only the
 *   state and stages the specification gives that part (stages filtered
 *   by bit: vertex, tessellation, geometry, task and mesh for
 *   pre-rasterization; fragment for the fragment shader), the same layout
 *   and render pass, and VkPipelineRenderingCreateInfo where it is chained.
 *   So a linked pipeline and the monolithic one have the same state.
 *
 * - Each part once per key. The parts table (one per context, its own
 *   mutex and condition) maps (part, key) to a library. The first thread
 *   to want a key inserts it as `building` and builds it outside the lock;
 *   another thread wanting the same key waits on the condition, so no
 *   part is built twice. A part that failed stays in the table, failed:
 *   the call then falls back to a monolithic create, and so do later ones
 *   (never a retry loop against a driver that refuses it). The keys of
 *   kiln's own shape: vertex input and fragment output by the colour
 *   format; pre-rasterization and fragment shader by their stage's words
 *   (or blob, or kept module), entry point and specialization, and the
 *   format (the render pass is per format without dynamic rendering).
 *
 * - Parts live as long as the context. kiln_vk_destroy destroys the
 *   pipelines first (kiln__vk_destroy_objects), then the parts
 *   (kiln__vk_library_destroy), so no part goes before a pipeline linked
 *   from it.
 *
 * - Parts ahead. kiln__vk_link with no `out` (kiln_vk_link_graphics with
 *   out NULL, KILN_VK_LINK_PARTS) builds the parts into the table and
 *   stops: a renderer asks when it first sees a shader, and the draw that
 *   needs the pipeline later only links (the parts are found, or waited
 *   for while another thread builds them, never built twice).
 *
 * - Fast link only here. A link passes no
 *   VK_PIPELINE_CREATE_LINK_TIME_OPTIMIZATION_BIT_EXT and the parts no
 *   RETAIN_LINK_TIME_OPTIMIZATION_INFO: the optimized pipeline that
 *   replaces a linked one (the service's hand-over) is the monolithic
 *   create, not an optimized link. Two reasons: it is the very pipeline
 *   kiln_warm_start builds, so its VkPipelineCache entry (pipelines.vkc)
 *   is the one the next start looks up, where an optimized link's is not;
 *   and parts made without retained information cost the driver less
 *   memory and time, on the urgent path. The driver compiles the same
 *   whole program either way (docs/vk.md, "Pipeline libraries", has the
 *   measurement on lavapipe).
 */
#include "vk_internal.h"

#include <string.h>

enum { PART_VI, PART_PR, PART_FS, PART_FO };
enum part_state { P_BUILDING, P_READY, P_FAILED };

#define PART_BUCKETS 256u

static const VkGraphicsPipelineLibraryFlagsEXT part_bits[KILN__VK_PARTS] = {
    VK_GRAPHICS_PIPELINE_LIBRARY_VERTEX_INPUT_INTERFACE_BIT_EXT,
    VK_GRAPHICS_PIPELINE_LIBRARY_PRE_RASTERIZATION_SHADERS_BIT_EXT,
    VK_GRAPHICS_PIPELINE_LIBRARY_FRAGMENT_SHADER_BIT_EXT,
    VK_GRAPHICS_PIPELINE_LIBRARY_FRAGMENT_OUTPUT_INTERFACE_BIT_EXT,
};

static const char *const part_names[KILN__VK_PARTS] = {"vertex input", "pre-rasterization",
                                                       "fragment shader", "fragment output"};

struct part {
    struct kiln_key key;
    int kind;
    enum part_state state;
    VkPipeline lib;
    struct part *next;
};

struct kiln__vk_parts {
    pthread_mutex_t lock;
    pthread_cond_t changed; /* a part left `building` */
    struct part *bucket[PART_BUCKETS];
};

bool kiln__vk_library_wanted(const struct kiln_vk_options *opt, const char *name)
{
    return !opt->no_pipeline_library && (strcmp(name, "VK_KHR_pipeline_library") == 0 ||
                                         strcmp(name, "VK_EXT_graphics_pipeline_library") == 0);
}

int kiln__vk_library_probe(struct kiln_vk *vk, bool enabled)
{
    vk->info.pipeline_library = enabled;
    if (!vk->info.pipeline_library)
        return KILN_OK;
    VkPhysicalDeviceGraphicsPipelineLibraryPropertiesEXT lp = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_GRAPHICS_PIPELINE_LIBRARY_PROPERTIES_EXT};
    VkPhysicalDeviceProperties2 p2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2,
                                      .pNext = &lp};
    vk->fn.vkGetPhysicalDeviceProperties2(vk->phys, &p2);
    vk->info.library_fast_linking = lp.graphicsPipelineLibraryFastLinking != VK_FALSE;
    struct kiln__vk_parts *t = kiln__calloc(1, sizeof(*t));
    if (!t)
        return KILN_ENOMEM;
    pthread_mutex_init(&t->lock, NULL);
    pthread_cond_init(&t->changed, NULL);
    vk->parts = t;
    KILN_INFO("vk", "%s: pipeline libraries on (fast linking %s)", vk->info.device_name,
              vk->info.library_fast_linking ? "fast" : "not said to be fast");
    return KILN_OK;
}

void kiln__vk_library_destroy(struct kiln_vk *vk)
{
    struct kiln__vk_parts *t = vk->parts;
    if (!t)
        return;
    for (unsigned i = 0; i < PART_BUCKETS; i++) {
        for (struct part *p = t->bucket[i], *next; p; p = next) {
            next = p->next;
            if (p->lib)
                vk->fn.vkDestroyPipeline(vk->device, p->lib, vk->alloc);
            kiln__free(p);
        }
    }
    pthread_cond_destroy(&t->changed);
    pthread_mutex_destroy(&t->lock);
    kiln__free(t);
    vk->parts = NULL;
    atomic_store(&vk->live_parts, 0);
}

/* ---- keys ------------------------------------------------------------------ */

/* What a stage's part depends on, hashed: its code (words, else its blob,
 * else its kept module's handle), entry point and specialization. */
static struct kiln_key stage_key(const struct kiln_vk_stage *st, int kind, VkFormat format)
{
    struct {
        struct kiln_key code;
        uint64_t entry, map, data, module;
        uint32_t format, kind;
    } h;
    memset(&h, 0, sizeof(h));
    if (st->module)
        h.module = (uint64_t)(uintptr_t)st->module->module;
    else if (st->words)
        h.code = kiln_hash128(st->words, st->nwords * 4);
    else
        h.code = kiln_hash128(st->blob, st->blob_size);
    const char *entry = st->entry ? st->entry : "main";
    h.entry = kiln_hash64(entry, strlen(entry));
    const VkSpecializationInfo *sp = st->specialization;
    if (sp) {
        h.map = kiln_hash64(sp->pMapEntries, sp->mapEntryCount * sizeof(*sp->pMapEntries));
        h.data = kiln_hash64(sp->pData, sp->dataSize) ^ sp->dataSize;
    }
    h.format = (uint32_t)format;
    h.kind = (uint32_t)kind;
    return kiln_hash128(&h, sizeof(h));
}

static struct kiln_key format_key(int kind, VkFormat format)
{
    uint32_t h[2] = {(uint32_t)kind, (uint32_t)format};
    return kiln_hash128(h, sizeof(h));
}

/* ---- the split ------------------------------------------------------------- */

static bool stage_in_part(VkShaderStageFlagBits s, int kind)
{
    if (kind == PART_FS)
        return s == VK_SHADER_STAGE_FRAGMENT_BIT;
    return kind == PART_PR && s != VK_SHADER_STAGE_FRAGMENT_BIT;
}

/* A rendering info chained to the whole create info, or NULL. */
static const VkPipelineRenderingCreateInfo *rendering_of(const VkGraphicsPipelineCreateInfo *ci)
{
    for (const VkBaseInStructure *s = ci->pNext; s; s = s->pNext)
        if (s->sType == VK_STRUCTURE_TYPE_PIPELINE_RENDERING_CREATE_INFO)
            return (const VkPipelineRenderingCreateInfo *)s;
    return NULL;
}

/* Where one part's create info is made. */
struct part_ci {
    VkGraphicsPipelineCreateInfo ci;
    VkGraphicsPipelineLibraryCreateInfoEXT lib;
    VkPipelineRenderingCreateInfo rendering;
    VkPipelineDepthStencilStateCreateInfo depth;
    VkPipelineShaderStageCreateInfo stages[KILN_PROGRAM_MAX_STAGES];
};

/* Cuts part `kind` out of the whole create info (see the top). */
static void part_info(const VkGraphicsPipelineCreateInfo *ci, int kind, struct part_ci *o)
{
    memset(o, 0, sizeof(*o));
    o->lib = (VkGraphicsPipelineLibraryCreateInfoEXT){
        .sType = VK_STRUCTURE_TYPE_GRAPHICS_PIPELINE_LIBRARY_CREATE_INFO_EXT,
        .flags = part_bits[kind]};
    const VkPipelineRenderingCreateInfo *r = rendering_of(ci);
    if (r && kind != PART_VI) {
        /* Pre-rasterization and fragment shader state read its view mask
         * only; the formats are the fragment output's. */
        o->rendering = *r;
        o->rendering.pNext = NULL;
        if (kind != PART_FO) {
            o->rendering.colorAttachmentCount = 0;
            o->rendering.pColorAttachmentFormats = NULL;
            o->rendering.depthAttachmentFormat = VK_FORMAT_UNDEFINED;
            o->rendering.stencilAttachmentFormat = VK_FORMAT_UNDEFINED;
        }
        o->lib.pNext = &o->rendering;
    }
    VkGraphicsPipelineCreateInfo *p = &o->ci;
    p->sType = VK_STRUCTURE_TYPE_GRAPHICS_PIPELINE_CREATE_INFO;
    p->pNext = &o->lib;
    p->flags = VK_PIPELINE_CREATE_LIBRARY_BIT_KHR;
    p->pDynamicState = ci->pDynamicState;
    p->basePipelineIndex = -1;
    if (kind != PART_VI) {
        p->renderPass = ci->renderPass;
        p->subpass = ci->subpass;
    }
    if (kind == PART_PR || kind == PART_FS) {
        p->layout = ci->layout;
        for (uint32_t i = 0; i < ci->stageCount && p->stageCount < KILN_PROGRAM_MAX_STAGES; i++)
            if (stage_in_part(ci->pStages[i].stage, kind))
                o->stages[p->stageCount++] = ci->pStages[i];
        p->pStages = o->stages;
    }
    switch (kind) {
    case PART_VI:
        p->pVertexInputState = ci->pVertexInputState;
        p->pInputAssemblyState = ci->pInputAssemblyState;
        break;
    case PART_PR:
        p->pViewportState = ci->pViewportState;
        p->pRasterizationState = ci->pRasterizationState;
        p->pTessellationState = ci->pTessellationState;
        break;
    case PART_FS:
        /* Without a render pass the part needs a depth-stencil state, whole
         * pipelines without depth attachments may have none: all off. */
        o->depth.sType = VK_STRUCTURE_TYPE_PIPELINE_DEPTH_STENCIL_STATE_CREATE_INFO;
        p->pMultisampleState = ci->pMultisampleState;
        p->pDepthStencilState = ci->pDepthStencilState ? ci->pDepthStencilState : &o->depth;
        break;
    default:
        p->pColorBlendState = ci->pColorBlendState;
        p->pMultisampleState = ci->pMultisampleState;
        break;
    }
}

/* ---- the parts table ------------------------------------------------------- */

static struct part **slot(struct kiln__vk_parts *t, int kind, struct kiln_key key)
{
    struct part **pp = &t->bucket[(key.lo ^ (uint64_t)kind) % PART_BUCKETS];
    while (*pp && !((*pp)->kind == kind && kiln_key_equal((*pp)->key, key)))
        pp = &(*pp)->next;
    return pp;
}

/*
 * The library of part `kind` with `key`: from the table, or built now from
 * the whole create info (once per key: see the top). @return VK_SUCCESS
 * with *lib, or the driver's error (the part stays failed).
 */
static VkResult part_get(struct kiln_vk *vk, int kind, struct kiln_key key,
                         const VkGraphicsPipelineCreateInfo *ci, VkPipeline *lib,
                         struct kiln_vk_link_result *res)
{
    struct kiln__vk_parts *t = vk->parts;
    pthread_mutex_lock(&t->lock);
    struct part **pp = slot(t, kind, key);
    if (*pp) {
        struct part *p = *pp;
        while (p->state == P_BUILDING)
            pthread_cond_wait(&t->changed, &t->lock);
        *lib = p->lib;
        pthread_mutex_unlock(&t->lock);
        if (p->state == P_FAILED)
            return VK_ERROR_INITIALIZATION_FAILED;
        res->parts_reused++;
        atomic_fetch_add(&vk->parts_reused, 1);
        return VK_SUCCESS;
    }
    struct part *p = kiln__calloc(1, sizeof(*p));
    if (!p) {
        pthread_mutex_unlock(&t->lock);
        return VK_ERROR_OUT_OF_HOST_MEMORY;
    }
    p->key = key;
    p->kind = kind;
    p->state = P_BUILDING;
    *pp = p;
    pthread_mutex_unlock(&t->lock);

    struct part_ci pc;
    part_info(ci, kind, &pc);
    VkPipeline made = VK_NULL_HANDLE;
    VkResult r =
        vk->fn.vkCreateGraphicsPipelines(vk->device, vk->cache, 1, &pc.ci, vk->alloc, &made);
    pthread_mutex_lock(&t->lock);
    p->state = r == VK_SUCCESS ? P_READY : P_FAILED;
    p->lib = r == VK_SUCCESS ? made : VK_NULL_HANDLE;
    pthread_cond_broadcast(&t->changed);
    pthread_mutex_unlock(&t->lock);
    if (r != VK_SUCCESS) {
        if (made)
            vk->fn.vkDestroyPipeline(vk->device, made, vk->alloc);
        KILN_WARN("vk", "%s part: vkCreateGraphicsPipelines failed: %s", part_names[kind],
                  kiln_vk_result_name(r));
        return r;
    }
    *lib = made;
    res->parts_built++;
    atomic_fetch_add(&vk->parts_built, 1);
    atomic_fetch_add(&vk->live_parts, 1);
    return VK_SUCCESS;
}

VkResult kiln__vk_link(struct kiln_vk *vk, const VkGraphicsPipelineCreateInfo *ci,
                       const struct kiln_key keys[KILN__VK_PARTS], VkPipeline *out,
                       struct kiln_vk_link_result *res)
{
    VkPipeline libs[KILN__VK_PARTS];
    VkResult r = vk->parts ? VK_SUCCESS : VK_ERROR_FEATURE_NOT_PRESENT;
    for (int k = 0; k < KILN__VK_PARTS && r == VK_SUCCESS; k++)
        r = part_get(vk, k, keys[k], ci, &libs[k], res);
    if (!out)
        return r; /* the parts alone, ahead of the draw that links them */
    if (r == VK_SUCCESS) {
        VkPipelineLibraryCreateInfoKHR li = {
            .sType = VK_STRUCTURE_TYPE_PIPELINE_LIBRARY_CREATE_INFO_KHR,
            .libraryCount = KILN__VK_PARTS,
            .pLibraries = libs,
        };
        /* The whole state again, but the stages: the libraries' is taken
         * and this ignored, yet the layer (1.3.2xx) judges a link with a
         * render pass and without the state as if it had to be there
         * (06061, 06631). */
        VkGraphicsPipelineCreateInfo lci = *ci;
        lci.pNext = &li;
        lci.flags = 0;
        lci.stageCount = 0;
        lci.pStages = NULL;
        lci.basePipelineHandle = VK_NULL_HANDLE;
        lci.basePipelineIndex = -1;
        if (!ci->renderPass) {
            /* With dynamic rendering, the libraries' formats alone. */
            lci = (VkGraphicsPipelineCreateInfo){
                .sType = ci->sType, .pNext = &li, .layout = ci->layout, .basePipelineIndex = -1};
        }
        r = vk->fn.vkCreateGraphicsPipelines(vk->device, vk->cache, 1, &lci, vk->alloc, out);
        if (r == VK_SUCCESS) {
            res->linked = true;
            atomic_fetch_add(&vk->pipelines_linked, 1);
            return r;
        }
        *out = VK_NULL_HANDLE;
        KILN_WARN("vk", "linking a graphics pipeline from its parts failed: %s",
                  kiln_vk_result_name(r));
    }
    /* A part or the link failed: the monolithic create answers. */
    return vk->fn.vkCreateGraphicsPipelines(vk->device, vk->cache, 1, ci, vk->alloc, out);
}

VkResult kiln__vk_link_builtin(struct kiln_vk *vk, const struct kiln_vk_graphics *g,
                               VkFormat format, const VkGraphicsPipelineCreateInfo *ci,
                               VkPipeline *out, struct kiln_vk_link_result *res)
{
    struct kiln_vk_stage vs = KILN_VK_STAGE_INIT, fs = KILN_VK_STAGE_INIT;
    if (KILN_STRUCT_IN(&vs, g->vertex, "kiln_vk_stage") < 0 ||
        KILN_STRUCT_IN(&fs, g->fragment, "kiln_vk_stage") < 0)
        return VK_ERROR_INITIALIZATION_FAILED; /* refused before: not reached */
    struct kiln_key keys[KILN__VK_PARTS] = {
        format_key(PART_VI, format),
        stage_key(&vs, PART_PR, format),
        stage_key(&fs, PART_FS, format),
        format_key(PART_FO, format),
    };
    return kiln__vk_link(vk, ci, keys, out, res);
}

/* Whether the library split of vk_library.c keeps all of `ci`'s state
 * (see kiln_vk_link_graphics). */
static bool linkable(const VkGraphicsPipelineCreateInfo *ci)
{
    if (ci->flags || !ci->pRasterizationState || ci->pRasterizationState->rasterizerDiscardEnable)
        return false;
    for (const VkBaseInStructure *x = ci->pNext; x; x = x->pNext)
        if (x->sType != VK_STRUCTURE_TYPE_PIPELINE_RENDERING_CREATE_INFO)
            return false;
    const VkShaderStageFlags ok = VK_SHADER_STAGE_VERTEX_BIT |
                                  VK_SHADER_STAGE_TESSELLATION_CONTROL_BIT |
                                  VK_SHADER_STAGE_TESSELLATION_EVALUATION_BIT |
                                  VK_SHADER_STAGE_GEOMETRY_BIT | VK_SHADER_STAGE_FRAGMENT_BIT;
    if (ci->stageCount > KILN_PROGRAM_MAX_STAGES)
        return false;
    for (uint32_t i = 0; i < ci->stageCount; i++)
        if (!(ci->pStages[i].stage & ok))
            return false;
    return true;
}

static int link_graphics_body(struct kiln_vk *vk, const VkGraphicsPipelineCreateInfo *ci,
                              const struct kiln_key keys[KILN_VK_PARTS], VkPipeline *out,
                              struct kiln_vk_link_result *res)
{
    if (!vk || !ci || !keys)
        return KILN_EINVAL;
    if (out)
        *out = VK_NULL_HANDLE;
    if (res)
        KILN_TRY(kiln__struct_out_check(res, "kiln_vk_link_result"));
    if (!vk->parts || !linkable(ci))
        return KILN_ENOTSUP;
    struct kiln_vk_link_result lr = KILN_VK_LINK_RESULT_INIT;
    VkResult r = kiln__vk_link(vk, ci, keys, out, &lr);
    if (res)
        KILN_STRUCT_OUT(res, &lr);
    if (r != VK_SUCCESS) {
        if (out)
            *out = VK_NULL_HANDLE;
        KILN_WARN("vk", "linked graphics pipeline: vkCreateGraphicsPipelines failed: %s",
                  kiln_vk_result_name(r));
        return KILN_EVULKAN;
    }
    return KILN_OK;
}

int kiln_vk_link_graphics(struct kiln_vk *vk, const VkGraphicsPipelineCreateInfo *ci,
                          const struct kiln_key keys[KILN_VK_PARTS], VkPipeline *out,
                          struct kiln_vk_link_result *res)
{
    uint64_t m = kiln__err_mark();
    return kiln__err_end(vk ? &vk->err : NULL, m, "kiln_vk_link_graphics", NULL,
                         link_graphics_body(vk, ci, keys, out, res));
}
