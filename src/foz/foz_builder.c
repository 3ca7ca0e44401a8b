/*
 * foz_builder.c - builds a closure's recorded pipeline (docs/foz.md) on a
 * VkDevice: samplers and YCbCr conversions, descriptor set layouts,
 * pipeline layouts, render passes (1 and 2), then the graphics or compute
 * pipeline with every core state block and the pNext structures kiln
 * knows, each checked against what the device offers. Pipeline libraries
 * and ray-tracing pipelines are in foz_builder_rt.c, over the shared
 * internals of foz_builder_private.h.
 *
 * Design.
 * - Shared objects (everything but the pipeline) are keyed by their tag and
 *   Fossilize hash, which is a hash of their content, so one object serves
 *   every pipeline that names it, from any archive. They are made outside
 *   the lock (a set layout makes its immutable samplers, which takes the
 *   lock again) and inserted under it; a thread that loses the race to
 *   insert destroys its own copy, so each key maps to exactly one handle
 *   and every handle made is either in the table or destroyed at once.
 *   The table is only freed by kiln_foz_builder_destroy, when no build runs.
 * - Everything a create-info points at lives in a per-build arena freed
 *   when the build returns, so no create-info outlives its call.
 * - A pipeline is checked before anything is made for it: each pNext
 *   structure, dynamic state and feature it needs is compared with the
 *   device's API version, extensions and features. A miss is a skip
 *   (KILN_ENOTSUP) with the reason, never a call the driver or the
 *   validation layer would reject.
 * - Before that, the whole closure passes kiln_foz_closure_check against
 *   the device's limits (foz_check.c): what breaks a rule of the
 *   specification is a skip naming the rule, never a create-info a driver
 *   may crash on, whoever wrote the record.
 * - Derivatives are built on their own: the DERIVATIVE bit is cleared and
 *   no base is given. The base is only a hint to the driver, the pipeline
 *   made is the same, and a base handle kept by the builder could be
 *   destroyed by its owner at any time.
 */
#include "foz_builder_private.h"

#include <stdarg.h>

/* VkPipelineCreateFlags2CreateInfoKHR (VK_KHR_maintenance5). */
struct flags2_info {
    VkStructureType sType;
    const void *pNext;
    uint64_t flags;
};

/* ---------------------------------------------------------------------------
 * What the device offers
 * ------------------------------------------------------------------------ */

static const char *const ext_name[X_COUNT] = {
    [X_MAINTENANCE2] = "VK_KHR_maintenance2",
    [X_MULTIVIEW] = "VK_KHR_multiview",
    [X_YCBCR] = "VK_KHR_sampler_ycbcr_conversion",
    [X_CREATE_RENDERPASS2] = "VK_KHR_create_renderpass2",
    [X_DEPTH_STENCIL_RESOLVE] = "VK_KHR_depth_stencil_resolve",
    [X_SEPARATE_DS_LAYOUTS] = "VK_KHR_separate_depth_stencil_layouts",
    [X_DESCRIPTOR_INDEXING] = "VK_EXT_descriptor_indexing",
    [X_FILTER_MINMAX] = "VK_EXT_sampler_filter_minmax",
    [X_SUBGROUP_SIZE] = "VK_EXT_subgroup_size_control",
    [X_DYNAMIC_RENDERING] = "VK_KHR_dynamic_rendering",
    [X_DIVISOR_EXT] = "VK_EXT_vertex_attribute_divisor",
    [X_DIVISOR_KHR] = "VK_KHR_vertex_attribute_divisor",
    [X_DEPTH_CLIP_ENABLE] = "VK_EXT_depth_clip_enable",
    [X_TRANSFORM_FEEDBACK] = "VK_EXT_transform_feedback",
    [X_BLEND_ADVANCED] = "VK_EXT_blend_operation_advanced",
    [X_CONSERVATIVE] = "VK_EXT_conservative_rasterization",
    [X_LINE_EXT] = "VK_EXT_line_rasterization",
    [X_LINE_KHR] = "VK_KHR_line_rasterization",
    [X_COLOR_WRITE] = "VK_EXT_color_write_enable",
    [X_PROVOKING_VERTEX] = "VK_EXT_provoking_vertex",
    [X_CUSTOM_BORDER] = "VK_EXT_custom_border_color",
    [X_DEPTH_CLIP_CONTROL] = "VK_EXT_depth_clip_control",
    [X_MAINTENANCE5] = "VK_KHR_maintenance5",
    [X_EDS] = "VK_EXT_extended_dynamic_state",
    [X_EDS2] = "VK_EXT_extended_dynamic_state2",
    [X_EDS3] = "VK_EXT_extended_dynamic_state3",
    [X_VERTEX_INPUT_DYNAMIC] = "VK_EXT_vertex_input_dynamic_state",
    [X_DISCARD_RECTANGLES] = "VK_EXT_discard_rectangles",
    [X_SAMPLE_LOCATIONS] = "VK_EXT_sample_locations",
    [X_FRAGMENT_SHADING_RATE] = "VK_KHR_fragment_shading_rate",
    [X_CLIP_SPACE_W_SCALING] = "VK_NV_clip_space_w_scaling",
    [X_MESH_EXT] = "VK_EXT_mesh_shader",
    [X_MESH_NV] = "VK_NV_mesh_shader",
    [X_PIPELINE_LIBRARY] = "VK_KHR_pipeline_library",
    [X_GPL] = "VK_EXT_graphics_pipeline_library",
    [X_RT_PIPELINE] = "VK_KHR_ray_tracing_pipeline",
};

/* ---------------------------------------------------------------------------
 * The builder
 * ------------------------------------------------------------------------ */

/* ---------------------------------------------------------------------------
 * One build: arena, error line, JSON access
 * ------------------------------------------------------------------------ */

void *kiln__fb_alloc(struct build *c, size_t n)
{
    n = (n + sizeof(max_align_t) - 1) / sizeof(max_align_t) * sizeof(max_align_t);
    if (n == 0)
        n = sizeof(max_align_t);
    struct block *k = c->arena;
    if (!k || k->cap - k->used < n) {
        size_t cap = n > 16384 ? n : 16384;
        k = kiln__malloc(sizeof(*k) + cap);
        if (!k) {
            c->oom = true;
            return NULL;
        }
        k->cap = cap;
        k->used = 0;
        k->next = c->arena;
        c->arena = k;
    }
    void *p = (char *)k->data + k->used;
    k->used += n;
    memset(p, 0, n);
    return p;
}

void kiln__fb_arena_free(struct build *c)
{
    while (c->arena) {
        struct block *k = c->arena;
        c->arena = k->next;
        kiln__free(k);
    }
}

int kiln__fb_fail(struct build *c, int rc, const char *fmt, ...)
{
    if (c->why && c->cap && !c->why[0]) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(c->why, c->cap, fmt, ap);
        va_end(ap);
    }
    return rc;
}

static int32_t i32(struct json_object *o, const char *key)
{
    return (int32_t)json_object_get_int64(get(o, key));
}

static float f32(struct json_object *o, const char *key)
{
    return (float)json_object_get_double(get(o, key));
}

/* Copies an array of unsigned integers into the arena. */
uint32_t *kiln__fb_uints(struct build *c, struct json_object *a)
{
    uint32_t n = len(a);
    uint32_t *out = kiln__fb_alloc(c, (size_t)n * sizeof(uint32_t));
    for (uint32_t i = 0; out && i < n; i++)
        out[i] = (uint32_t)json_object_get_int64(at(a, i));
    return out;
}

static bool version_at_least(const struct kiln_foz_builder *b, uint32_t minor)
{
    return VK_API_VERSION_MAJOR(b->api) > 1 ||
           (VK_API_VERSION_MAJOR(b->api) == 1 && VK_API_VERSION_MINOR(b->api) >= minor);
}

/* Whether core 1.minor (0: never core) or one of two extensions gives it. */
static bool offers(const struct kiln_foz_builder *b, uint32_t minor, int x1, int x2)
{
    return (minor && version_at_least(b, minor)) || (x1 >= 0 && b->ext[x1]) ||
           (x2 >= 0 && b->ext[x2]);
}

int kiln__fb_need(struct build *c, uint32_t minor, int x1, int x2, const char *what)
{
    if (offers(c->b, minor, x1, x2))
        return KILN_OK;
    if (minor)
        return kiln__fb_fail(c, KILN_ENOTSUP, "%s needs Vulkan 1.%u or %s", what, minor,
                             x1 >= 0 ? ext_name[x1] : "an extension");
    return kiln__fb_fail(c, KILN_ENOTSUP, "%s needs %s", what,
                         x1 >= 0 ? ext_name[x1] : "an extension");
}

int kiln__fb_need_feature(struct build *c, bool have, const char *feature, const char *what)
{
    if (!c->b->feat.known || have)
        return KILN_OK;
    return kiln__fb_fail(c, KILN_ENOTSUP,
                         "%s needs the %s feature, which the device lacks or did not enable", what,
                         feature);
}

/* ---------------------------------------------------------------------------
 * pNext chains
 * ------------------------------------------------------------------------ */

static int attachment_ref2(struct build *c, struct json_object *o, VkAttachmentReference2 *r);

/* Parses one recorded pNext structure into a new arena struct. */
static int pnext_one(struct build *c, struct json_object *s, VkBaseInStructure **out)
{
    int64_t stype = json_object_get_int64(get(s, "sType"));
    VkBaseInStructure *n = NULL;
    switch (stype) {
    case VK_STRUCTURE_TYPE_PIPELINE_TESSELLATION_DOMAIN_ORIGIN_STATE_CREATE_INFO: {
        KILN_TRY(kiln__fb_need(c, 1, X_MAINTENANCE2, -1, "a tessellation domain origin"));
        VkPipelineTessellationDomainOriginStateCreateInfo *i = kiln__fb_alloc(c, sizeof(*i));
        if (!i)
            return KILN_ENOMEM;
        i->domainOrigin = (VkTessellationDomainOrigin)u32(s, "domainOrigin");
        n = (VkBaseInStructure *)i;
        break;
    }
    case VK_STRUCTURE_TYPE_PIPELINE_VERTEX_INPUT_DIVISOR_STATE_CREATE_INFO_EXT: {
        KILN_TRY(kiln__fb_need(c, 0, X_DIVISOR_EXT, X_DIVISOR_KHR, "a vertex attribute divisor"));
        VkPipelineVertexInputDivisorStateCreateInfoEXT *i = kiln__fb_alloc(c, sizeof(*i));
        struct json_object *d = get(s, "vertexBindingDivisors");
        VkVertexInputBindingDivisorDescriptionEXT *v = kiln__fb_alloc(c, len(d) * sizeof(*v));
        if (!i || !v)
            return KILN_ENOMEM;
        for (uint32_t k = 0; k < len(d); k++) {
            v[k].binding = u32(at(d, k), "binding");
            v[k].divisor = u32(at(d, k), "divisor");
        }
        i->vertexBindingDivisorCount = len(d);
        i->pVertexBindingDivisors = v;
        n = (VkBaseInStructure *)i;
        break;
    }
    case VK_STRUCTURE_TYPE_PIPELINE_RASTERIZATION_DEPTH_CLIP_STATE_CREATE_INFO_EXT: {
        KILN_TRY(kiln__fb_need(c, 0, X_DEPTH_CLIP_ENABLE, -1, "a depth clip state"));
        VkPipelineRasterizationDepthClipStateCreateInfoEXT *i = kiln__fb_alloc(c, sizeof(*i));
        if (!i)
            return KILN_ENOMEM;
        i->flags = u32(s, "flags");
        i->depthClipEnable = u32(s, "depthClipEnable");
        n = (VkBaseInStructure *)i;
        break;
    }
    case VK_STRUCTURE_TYPE_PIPELINE_RASTERIZATION_STATE_STREAM_CREATE_INFO_EXT: {
        KILN_TRY(kiln__fb_need(c, 0, X_TRANSFORM_FEEDBACK, -1, "a rasterization stream"));
        VkPipelineRasterizationStateStreamCreateInfoEXT *i = kiln__fb_alloc(c, sizeof(*i));
        if (!i)
            return KILN_ENOMEM;
        i->flags = u32(s, "flags");
        i->rasterizationStream = u32(s, "rasterizationStream");
        n = (VkBaseInStructure *)i;
        break;
    }
    case VK_STRUCTURE_TYPE_RENDER_PASS_MULTIVIEW_CREATE_INFO: {
        KILN_TRY(kiln__fb_need(c, 1, X_MULTIVIEW, -1, "multiview"));
        VkRenderPassMultiviewCreateInfo *i = kiln__fb_alloc(c, sizeof(*i));
        if (!i)
            return KILN_ENOMEM;
        i->subpassCount = len(get(s, "viewMasks"));
        i->pViewMasks = kiln__fb_uints(c, get(s, "viewMasks"));
        i->dependencyCount = len(get(s, "viewOffsets"));
        i->pViewOffsets = (const int32_t *)kiln__fb_uints(c, get(s, "viewOffsets"));
        i->correlationMaskCount = len(get(s, "correlationMasks"));
        i->pCorrelationMasks = kiln__fb_uints(c, get(s, "correlationMasks"));
        n = (VkBaseInStructure *)i;
        break;
    }
    case VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_BINDING_FLAGS_CREATE_INFO: {
        KILN_TRY(kiln__fb_need(c, 2, X_DESCRIPTOR_INDEXING, -1, "descriptor binding flags"));
        VkDescriptorSetLayoutBindingFlagsCreateInfo *i = kiln__fb_alloc(c, sizeof(*i));
        if (!i)
            return KILN_ENOMEM;
        i->bindingCount = len(get(s, "bindingFlags"));
        i->pBindingFlags = kiln__fb_uints(c, get(s, "bindingFlags"));
        n = (VkBaseInStructure *)i;
        break;
    }
    case VK_STRUCTURE_TYPE_PIPELINE_COLOR_BLEND_ADVANCED_STATE_CREATE_INFO_EXT: {
        KILN_TRY(kiln__fb_need(c, 0, X_BLEND_ADVANCED, -1, "advanced blending"));
        VkPipelineColorBlendAdvancedStateCreateInfoEXT *i = kiln__fb_alloc(c, sizeof(*i));
        if (!i)
            return KILN_ENOMEM;
        i->blendOverlap = (VkBlendOverlapEXT)u32(s, "blendOverlap");
        i->srcPremultiplied = u32(s, "srcPremultiplied");
        i->dstPremultiplied = u32(s, "dstPremultiplied");
        n = (VkBaseInStructure *)i;
        break;
    }
    case VK_STRUCTURE_TYPE_PIPELINE_RASTERIZATION_CONSERVATIVE_STATE_CREATE_INFO_EXT: {
        KILN_TRY(kiln__fb_need(c, 0, X_CONSERVATIVE, -1, "conservative rasterization"));
        VkPipelineRasterizationConservativeStateCreateInfoEXT *i = kiln__fb_alloc(c, sizeof(*i));
        if (!i)
            return KILN_ENOMEM;
        i->flags = u32(s, "flags");
        i->conservativeRasterizationMode =
            (VkConservativeRasterizationModeEXT)u32(s, "conservativeRasterizationMode");
        i->extraPrimitiveOverestimationSize = f32(s, "extraPrimitiveOverestimationSize");
        n = (VkBaseInStructure *)i;
        break;
    }
    case VK_STRUCTURE_TYPE_PIPELINE_RASTERIZATION_LINE_STATE_CREATE_INFO_EXT: {
        KILN_TRY(kiln__fb_need(c, 0, X_LINE_EXT, X_LINE_KHR, "a line rasterization state"));
        VkPipelineRasterizationLineStateCreateInfoEXT *i = kiln__fb_alloc(c, sizeof(*i));
        if (!i)
            return KILN_ENOMEM;
        i->lineRasterizationMode = (VkLineRasterizationModeEXT)u32(s, "lineRasterizationMode");
        i->stippledLineEnable = u32(s, "stippledLineEnable");
        i->lineStippleFactor = u32(s, "lineStippleFactor");
        i->lineStipplePattern = (uint16_t)u32(s, "lineStipplePattern");
        n = (VkBaseInStructure *)i;
        break;
    }
    case VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_REQUIRED_SUBGROUP_SIZE_CREATE_INFO: {
        KILN_TRY(kiln__fb_need(c, 3, X_SUBGROUP_SIZE, -1, "a required subgroup size"));
        VkPipelineShaderStageRequiredSubgroupSizeCreateInfo *i = kiln__fb_alloc(c, sizeof(*i));
        if (!i)
            return KILN_ENOMEM;
        i->requiredSubgroupSize = u32(s, "requiredSubgroupSize");
        n = (VkBaseInStructure *)i;
        break;
    }
    case VK_STRUCTURE_TYPE_ATTACHMENT_DESCRIPTION_STENCIL_LAYOUT: {
        KILN_TRY(kiln__fb_need(c, 2, X_SEPARATE_DS_LAYOUTS, -1, "a separate stencil layout"));
        VkAttachmentDescriptionStencilLayout *i = kiln__fb_alloc(c, sizeof(*i));
        if (!i)
            return KILN_ENOMEM;
        i->stencilInitialLayout = (VkImageLayout)u32(s, "stencilInitialLayout");
        i->stencilFinalLayout = (VkImageLayout)u32(s, "stencilFinalLayout");
        n = (VkBaseInStructure *)i;
        break;
    }
    case VK_STRUCTURE_TYPE_ATTACHMENT_REFERENCE_STENCIL_LAYOUT: {
        KILN_TRY(kiln__fb_need(c, 2, X_SEPARATE_DS_LAYOUTS, -1, "a separate stencil layout"));
        VkAttachmentReferenceStencilLayout *i = kiln__fb_alloc(c, sizeof(*i));
        if (!i)
            return KILN_ENOMEM;
        i->stencilLayout = (VkImageLayout)u32(s, "stencilLayout");
        n = (VkBaseInStructure *)i;
        break;
    }
    case VK_STRUCTURE_TYPE_SUBPASS_DESCRIPTION_DEPTH_STENCIL_RESOLVE: {
        KILN_TRY(kiln__fb_need(c, 2, X_DEPTH_STENCIL_RESOLVE, -1, "a depth/stencil resolve"));
        VkSubpassDescriptionDepthStencilResolve *i = kiln__fb_alloc(c, sizeof(*i));
        if (!i)
            return KILN_ENOMEM;
        i->depthResolveMode = (VkResolveModeFlagBits)u32(s, "depthResolveMode");
        i->stencilResolveMode = (VkResolveModeFlagBits)u32(s, "stencilResolveMode");
        struct json_object *a = get(s, "depthStencilResolveAttachment");
        if (a) {
            VkAttachmentReference2 *r = kiln__fb_alloc(c, sizeof(*r));
            if (!r)
                return KILN_ENOMEM;
            KILN_TRY(attachment_ref2(c, a, r));
            i->pDepthStencilResolveAttachment = r;
        }
        n = (VkBaseInStructure *)i;
        break;
    }
    case VK_STRUCTURE_TYPE_PIPELINE_RENDERING_CREATE_INFO: {
        KILN_TRY(kiln__fb_need(c, 3, X_DYNAMIC_RENDERING, -1, "dynamic rendering"));
        KILN_TRY(kiln__fb_need_feature(c, c->b->feat.dynamic_rendering, "dynamicRendering",
                                       "dynamic rendering"));
        VkPipelineRenderingCreateInfo *i = kiln__fb_alloc(c, sizeof(*i));
        if (!i)
            return KILN_ENOMEM;
        i->viewMask = u32(s, "viewMask");
        i->depthAttachmentFormat = (VkFormat)u32(s, "depthAttachmentFormat");
        i->stencilAttachmentFormat = (VkFormat)u32(s, "stencilAttachmentFormat");
        i->colorAttachmentCount = len(get(s, "colorAttachmentFormats"));
        i->pColorAttachmentFormats =
            (const VkFormat *)kiln__fb_uints(c, get(s, "colorAttachmentFormats"));
        n = (VkBaseInStructure *)i;
        break;
    }
    case VK_STRUCTURE_TYPE_PIPELINE_COLOR_WRITE_CREATE_INFO_EXT: {
        KILN_TRY(kiln__fb_need(c, 0, X_COLOR_WRITE, -1, "color write enables"));
        VkPipelineColorWriteCreateInfoEXT *i = kiln__fb_alloc(c, sizeof(*i));
        if (!i)
            return KILN_ENOMEM;
        i->attachmentCount = u32(s, "attachmentCount");
        if (get(s, "colorWriteEnables")) {
            if (len(get(s, "colorWriteEnables")) != i->attachmentCount)
                return kiln__fb_fail(c, KILN_EPARSE,
                                     "colorWriteEnables does not have attachmentCount values");
            i->pColorWriteEnables = kiln__fb_uints(c, get(s, "colorWriteEnables"));
        }
        n = (VkBaseInStructure *)i;
        break;
    }
    case VK_STRUCTURE_TYPE_PIPELINE_RASTERIZATION_PROVOKING_VERTEX_STATE_CREATE_INFO_EXT: {
        KILN_TRY(kiln__fb_need(c, 0, X_PROVOKING_VERTEX, -1, "a provoking vertex mode"));
        VkPipelineRasterizationProvokingVertexStateCreateInfoEXT *i = kiln__fb_alloc(c, sizeof(*i));
        if (!i)
            return KILN_ENOMEM;
        i->provokingVertexMode = (VkProvokingVertexModeEXT)u32(s, "provokingVertexMode");
        n = (VkBaseInStructure *)i;
        break;
    }
    case VK_STRUCTURE_TYPE_SAMPLER_CUSTOM_BORDER_COLOR_CREATE_INFO_EXT: {
        KILN_TRY(kiln__fb_need(c, 0, X_CUSTOM_BORDER, -1, "a custom border color"));
        VkSamplerCustomBorderColorCreateInfoEXT *i = kiln__fb_alloc(c, sizeof(*i));
        if (!i)
            return KILN_ENOMEM;
        struct json_object *col = get(s, "customBorderColor");
        if (len(col) != 4)
            return kiln__fb_fail(c, KILN_EPARSE, "customBorderColor has not 4 values");
        for (uint32_t k = 0; k < 4; k++)
            i->customBorderColor.uint32[k] = (uint32_t)json_object_get_int64(at(col, k));
        i->format = (VkFormat)u32(s, "format");
        n = (VkBaseInStructure *)i;
        break;
    }
    case VK_STRUCTURE_TYPE_SAMPLER_REDUCTION_MODE_CREATE_INFO: {
        KILN_TRY(kiln__fb_need(c, 2, X_FILTER_MINMAX, -1, "a sampler reduction mode"));
        VkSamplerReductionModeCreateInfo *i = kiln__fb_alloc(c, sizeof(*i));
        if (!i)
            return KILN_ENOMEM;
        i->reductionMode = (VkSamplerReductionMode)u32(s, "reductionMode");
        n = (VkBaseInStructure *)i;
        break;
    }
    case VK_STRUCTURE_TYPE_RENDER_PASS_INPUT_ATTACHMENT_ASPECT_CREATE_INFO: {
        KILN_TRY(kiln__fb_need(c, 1, X_MAINTENANCE2, -1, "input attachment aspects"));
        VkRenderPassInputAttachmentAspectCreateInfo *i = kiln__fb_alloc(c, sizeof(*i));
        struct json_object *a = get(s, "aspectReferences");
        VkInputAttachmentAspectReference *r = kiln__fb_alloc(c, len(a) * sizeof(*r));
        if (!i || !r)
            return KILN_ENOMEM;
        for (uint32_t k = 0; k < len(a); k++) {
            r[k].subpass = u32(at(a, k), "subpass");
            r[k].inputAttachmentIndex = u32(at(a, k), "inputAttachmentIndex");
            r[k].aspectMask = u32(at(a, k), "aspectMask");
        }
        i->aspectReferenceCount = len(a);
        i->pAspectReferences = r;
        n = (VkBaseInStructure *)i;
        break;
    }
    case VK_STRUCTURE_TYPE_SAMPLER_YCBCR_CONVERSION_CREATE_INFO: {
        KILN_TRY(kiln__fb_need(c, 1, X_YCBCR, -1, "a YCbCr conversion"));
        KILN_TRY(kiln__fb_need_feature(c, c->b->feat.ycbcr, "samplerYcbcrConversion",
                                       "a YCbCr conversion"));
        if (!c->b->vk.CreateSamplerYcbcrConversion)
            return kiln__fb_fail(c, KILN_ENOTSUP,
                                 "a YCbCr conversion: vkCreateSamplerYcbcrConversion "
                                 "is not available");
        VkSamplerYcbcrConversionCreateInfo *i = kiln__fb_alloc(c, sizeof(*i));
        if (!i)
            return KILN_ENOMEM;
        struct json_object *comp = get(s, "components");
        if (len(comp) != 4)
            return kiln__fb_fail(c, KILN_EPARSE,
                                 "a YCbCr conversion's components has not 4 values");
        i->format = (VkFormat)u32(s, "format");
        i->ycbcrModel = (VkSamplerYcbcrModelConversion)u32(s, "ycbcrModel");
        i->ycbcrRange = (VkSamplerYcbcrRange)u32(s, "ycbcrRange");
        i->components.r = (VkComponentSwizzle)json_object_get_int64(at(comp, 0));
        i->components.g = (VkComponentSwizzle)json_object_get_int64(at(comp, 1));
        i->components.b = (VkComponentSwizzle)json_object_get_int64(at(comp, 2));
        i->components.a = (VkComponentSwizzle)json_object_get_int64(at(comp, 3));
        i->xChromaOffset = (VkChromaLocation)u32(s, "xChromaOffset");
        i->yChromaOffset = (VkChromaLocation)u32(s, "yChromaOffset");
        i->chromaFilter = (VkFilter)u32(s, "chromaFilter");
        i->forceExplicitReconstruction = u32(s, "forceExplicitReconstruction");
        n = (VkBaseInStructure *)i;
        break;
    }
    case VK_STRUCTURE_TYPE_PIPELINE_VIEWPORT_DEPTH_CLIP_CONTROL_CREATE_INFO_EXT: {
        KILN_TRY(kiln__fb_need(c, 0, X_DEPTH_CLIP_CONTROL, -1, "a depth clip control"));
        VkPipelineViewportDepthClipControlCreateInfoEXT *i = kiln__fb_alloc(c, sizeof(*i));
        if (!i)
            return KILN_ENOMEM;
        i->negativeOneToOne = u32(s, "negativeOneToOne");
        n = (VkBaseInStructure *)i;
        break;
    }
    case STYPE_PIPELINE_CREATE_FLAGS_2: {
        KILN_TRY(kiln__fb_need(c, 0, X_MAINTENANCE5, -1, "pipeline create flags 2"));
        struct flags2_info *i = kiln__fb_alloc(c, sizeof(*i));
        if (!i)
            return KILN_ENOMEM;
        uint64_t f = (uint64_t)json_object_get_int64(get(s, "flags"));
        if (f & FLAG_LIBRARY)
            KILN_TRY(kiln__fb_need(c, 0, X_PIPELINE_LIBRARY, -1, "a pipeline library"));
        i->flags = f & ~(uint64_t)(FLAGS_IGNORED | FLAG_DERIVATIVE);
        n = (VkBaseInStructure *)i;
        break;
    }
    case STYPE_PIPELINE_LIBRARY: {
        VkPipelineLibraryCreateInfoKHR *i = NULL;
        KILN_TRY(kiln__fb_library_info(c, s, &i));
        if (!i)
            return KILN_ENOMEM;
        n = (VkBaseInStructure *)i;
        break;
    }
    case STYPE_GRAPHICS_PIPELINE_LIB: {
        KILN_TRY(kiln__fb_need(c, 0, X_GPL, -1, "a graphics pipeline library"));
        KILN_TRY(kiln__fb_need_feature(c, c->b->feat.gpl, "graphicsPipelineLibrary",
                                       "a graphics pipeline library"));
        VkGraphicsPipelineLibraryCreateInfoEXT *i = kiln__fb_alloc(c, sizeof(*i));
        if (!i)
            return KILN_ENOMEM;
        i->flags = u32(s, "flags");
        n = (VkBaseInStructure *)i;
        break;
    }
    default:
        return kiln__fb_fail(c, KILN_ENOTSUP, "pNext structure %" PRId64 " is not one kiln builds",
                             stype);
    }
    n->sType = (VkStructureType)stype;
    *out = n;
    return KILN_OK;
}

/* Builds the recorded chain `pnext` (an array, or NULL), ending in `tail`. */
int kiln__fb_chain(struct build *c, struct json_object *pnext, const void *tail, const void **out)
{
    const void *head = tail;
    /* Built from the last element, so the chain keeps the recorded order. */
    for (uint32_t k = len(pnext); k-- > 0;) {
        VkBaseInStructure *n = NULL;
        KILN_TRY(pnext_one(c, at(pnext, k), &n));
        n->pNext = head;
        head = n;
    }
    *out = head;
    return c->oom ? KILN_ENOMEM : KILN_OK;
}

/* ---------------------------------------------------------------------------
 * Shared objects
 * ------------------------------------------------------------------------ */

static struct shared *shared_find(struct kiln_foz_builder *b, uint64_t tag, uint64_t hash)
{
    for (struct shared *s = b->table[(hash ^ tag) % SHARED_BUCKETS]; s; s = s->next)
        if (s->tag == tag && s->hash == hash)
            return s;
    return NULL;
}

static void destroy_object(struct kiln_foz_builder *b, uint64_t tag, union handle h,
                           VkSamplerYcbcrConversion ycbcr)
{
    switch (tag) {
    case KILN_FOZ_TAG_SAMPLER:
        b->vk.DestroySampler(b->device, h.sampler, b->alloc);
        if (ycbcr)
            b->vk.DestroySamplerYcbcrConversion(b->device, ycbcr, b->alloc);
        break;
    case KILN_FOZ_TAG_DESCRIPTOR_SET_LAYOUT:
        b->vk.DestroyDescriptorSetLayout(b->device, h.set_layout, b->alloc);
        break;
    case KILN_FOZ_TAG_PIPELINE_LAYOUT:
        b->vk.DestroyPipelineLayout(b->device, h.layout, b->alloc);
        break;
    case KILN_FOZ_TAG_RENDER_PASS:
        b->vk.DestroyRenderPass(b->device, h.pass, b->alloc);
        break;
    default:
        break;
    }
}

/* Looks a shared object up. @return whether it was found. */
static bool shared_get(struct kiln_foz_builder *b, uint64_t tag, uint64_t hash, union handle *h)
{
    pthread_mutex_lock(&b->lock);
    struct shared *s = shared_find(b, tag, hash);
    if (s)
        *h = s->h;
    pthread_mutex_unlock(&b->lock);
    return s != NULL;
}

/* Inserts a new object, or destroys it when another thread was first;
 * *h is the one in the table afterwards. */
static int shared_put(struct kiln_foz_builder *b, uint64_t tag, uint64_t hash, union handle *h,
                      VkSamplerYcbcrConversion ycbcr)
{
    struct shared *n = kiln__malloc(sizeof(*n));
    pthread_mutex_lock(&b->lock);
    struct shared *s = shared_find(b, tag, hash);
    if (!s && n) {
        *n = (struct shared){tag, hash, *h, ycbcr, b->table[(hash ^ tag) % SHARED_BUCKETS]};
        b->table[(hash ^ tag) % SHARED_BUCKETS] = n;
        n = NULL;
        atomic_fetch_add(&b->objects, 1);
        pthread_mutex_unlock(&b->lock);
        return KILN_OK;
    }
    union handle keep;
    memset(&keep, 0, sizeof(keep));
    if (s)
        keep = s->h;
    pthread_mutex_unlock(&b->lock);
    kiln__free(n);
    destroy_object(b, tag, *h, ycbcr);
    if (!s)
        return KILN_ENOMEM;
    *h = keep;
    return KILN_OK;
}

/* The recorded object `hash` of a closure member. */
int kiln__fb_recorded(struct build *c, const char *member, uint64_t hash, const char *what,
                      struct json_object **out)
{
    char name[17];
    snprintf(name, sizeof(name), "%016" PRIx64, hash);
    *out = get(get(c->doc, member), name);
    if (!*out)
        return kiln__fb_fail(c, KILN_EPARSE, "the closure has no %s %s", what, name);
    return KILN_OK;
}

static int sampler(struct build *c, uint64_t hash, VkSampler *out)
{
    struct kiln_foz_builder *b = c->b;
    union handle h;
    if (shared_get(b, KILN_FOZ_TAG_SAMPLER, hash, &h)) {
        *out = h.sampler;
        return KILN_OK;
    }
    struct json_object *o;
    KILN_TRY(kiln__fb_recorded(c, "samplers", hash, "sampler", &o));
    VkSamplerCreateInfo ci = {.sType = VK_STRUCTURE_TYPE_SAMPLER_CREATE_INFO};
    ci.flags = u32(o, "flags");
    ci.magFilter = (VkFilter)u32(o, "magFilter");
    ci.minFilter = (VkFilter)u32(o, "minFilter");
    ci.mipmapMode = (VkSamplerMipmapMode)u32(o, "mipmapMode");
    ci.addressModeU = (VkSamplerAddressMode)u32(o, "addressModeU");
    ci.addressModeV = (VkSamplerAddressMode)u32(o, "addressModeV");
    ci.addressModeW = (VkSamplerAddressMode)u32(o, "addressModeW");
    ci.mipLodBias = f32(o, "mipLodBias");
    ci.anisotropyEnable = u32(o, "anisotropyEnable");
    ci.maxAnisotropy = f32(o, "maxAnisotropy");
    ci.compareEnable = u32(o, "compareEnable");
    ci.compareOp = (VkCompareOp)u32(o, "compareOp");
    ci.minLod = f32(o, "minLod");
    ci.maxLod = f32(o, "maxLod");
    ci.borderColor = (VkBorderColor)u32(o, "borderColor");
    ci.unnormalizedCoordinates = u32(o, "unnormalizedCoordinates");
    if (ci.anisotropyEnable)
        KILN_TRY(kiln__fb_need_feature(c, b->feat.f.samplerAnisotropy, "samplerAnisotropy",
                                       "an anisotropic sampler"));
    KILN_TRY(kiln__fb_chain(c, get(o, "pNext"), NULL, &ci.pNext));

    /* A YCbCr conversion is recorded inline; the sampler names the one made
     * from it, in the chain's place of its create info. */
    VkSamplerYcbcrConversion conv = VK_NULL_HANDLE;
    for (VkBaseInStructure **p = (VkBaseInStructure **)&ci.pNext; *p;
         p = (VkBaseInStructure **)&(*p)->pNext) {
        if ((*p)->sType != VK_STRUCTURE_TYPE_SAMPLER_YCBCR_CONVERSION_CREATE_INFO)
            continue;
        VkSamplerYcbcrConversionCreateInfo yc = *(const VkSamplerYcbcrConversionCreateInfo *)*p;
        yc.pNext = NULL;
        VkResult r = b->vk.CreateSamplerYcbcrConversion(b->device, &yc, b->alloc, &conv);
        if (r != VK_SUCCESS)
            return kiln__fb_fail(c, KILN_EVULKAN,
                                 "vkCreateSamplerYcbcrConversion for sampler %016" PRIx64
                                 ": VkResult %d",
                                 hash, (int)r);
        VkSamplerYcbcrConversionInfo *info = kiln__fb_alloc(c, sizeof(*info));
        if (!info) {
            b->vk.DestroySamplerYcbcrConversion(b->device, conv, b->alloc);
            return KILN_ENOMEM;
        }
        info->sType = VK_STRUCTURE_TYPE_SAMPLER_YCBCR_CONVERSION_INFO;
        info->pNext = (*p)->pNext;
        info->conversion = conv;
        *p = (VkBaseInStructure *)info;
        break;
    }
    VkSampler s;
    VkResult r = b->vk.CreateSampler(b->device, &ci, b->alloc, &s);
    if (r != VK_SUCCESS) {
        if (conv)
            b->vk.DestroySamplerYcbcrConversion(b->device, conv, b->alloc);
        return kiln__fb_fail(c, KILN_EVULKAN, "vkCreateSampler %016" PRIx64 ": VkResult %d", hash,
                             (int)r);
    }
    h.sampler = s;
    KILN_TRY(shared_put(b, KILN_FOZ_TAG_SAMPLER, hash, &h, conv));
    *out = h.sampler;
    return KILN_OK;
}

static int set_layout(struct build *c, uint64_t hash, VkDescriptorSetLayout *out)
{
    struct kiln_foz_builder *b = c->b;
    union handle h;
    if (shared_get(b, KILN_FOZ_TAG_DESCRIPTOR_SET_LAYOUT, hash, &h)) {
        *out = h.set_layout;
        return KILN_OK;
    }
    struct json_object *o;
    KILN_TRY(kiln__fb_recorded(c, "setLayouts", hash, "descriptor set layout", &o));
    VkDescriptorSetLayoutCreateInfo ci = {.sType =
                                              VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO};
    ci.flags = u32(o, "flags");
    struct json_object *bs = get(o, "bindings");
    VkDescriptorSetLayoutBinding *bind = kiln__fb_alloc(c, len(bs) * sizeof(*bind));
    if (!bind)
        return KILN_ENOMEM;
    for (uint32_t i = 0; i < len(bs); i++) {
        struct json_object *x = at(bs, i);
        bind[i].binding = u32(x, "binding");
        bind[i].descriptorType = (VkDescriptorType)u32(x, "descriptorType");
        bind[i].descriptorCount = u32(x, "descriptorCount");
        bind[i].stageFlags = u32(x, "stageFlags");
        struct json_object *imm = get(x, "immutableSamplers");
        if (imm) {
            VkSampler *ss = kiln__fb_alloc(c, len(imm) * sizeof(*ss));
            if (!ss)
                return KILN_ENOMEM;
            for (uint32_t k = 0; k < len(imm); k++) {
                uint64_t sh;
                if (!kiln__fb_hash_of(at(imm, k), &sh))
                    return kiln__fb_fail(
                        c, KILN_EPARSE,
                        "set layout %016" PRIx64 ": an immutable sampler is not a hash", hash);
                if (sh)
                    KILN_TRY(sampler(c, sh, &ss[k]));
            }
            bind[i].pImmutableSamplers = ss;
        }
    }
    ci.bindingCount = len(bs);
    ci.pBindings = bind;
    KILN_TRY(kiln__fb_chain(c, get(o, "pNext"), NULL, &ci.pNext));
    VkDescriptorSetLayout l;
    VkResult r = b->vk.CreateDescriptorSetLayout(b->device, &ci, b->alloc, &l);
    if (r != VK_SUCCESS)
        return kiln__fb_fail(c, KILN_EVULKAN,
                             "vkCreateDescriptorSetLayout %016" PRIx64 ": VkResult %d", hash,
                             (int)r);
    h.set_layout = l;
    KILN_TRY(shared_put(b, KILN_FOZ_TAG_DESCRIPTOR_SET_LAYOUT, hash, &h, VK_NULL_HANDLE));
    *out = h.set_layout;
    return KILN_OK;
}

int kiln__fb_pipeline_layout(struct build *c, uint64_t hash, VkPipelineLayout *out)
{
    struct kiln_foz_builder *b = c->b;
    union handle h;
    if (shared_get(b, KILN_FOZ_TAG_PIPELINE_LAYOUT, hash, &h)) {
        *out = h.layout;
        return KILN_OK;
    }
    struct json_object *o;
    KILN_TRY(kiln__fb_recorded(c, "pipelineLayouts", hash, "pipeline layout", &o));
    VkPipelineLayoutCreateInfo ci = {.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO};
    ci.flags = u32(o, "flags");
    struct json_object *sets = get(o, "setLayouts");
    VkDescriptorSetLayout *sl = kiln__fb_alloc(c, len(sets) * sizeof(*sl));
    struct json_object *pcs = get(o, "pushConstantRanges");
    VkPushConstantRange *pc = kiln__fb_alloc(c, len(pcs) * sizeof(*pc));
    if (!sl || !pc)
        return KILN_ENOMEM;
    for (uint32_t i = 0; i < len(sets); i++) {
        uint64_t sh;
        if (!kiln__fb_hash_of(at(sets, i), &sh))
            return kiln__fb_fail(
                c, KILN_EPARSE, "pipeline layout %016" PRIx64 ": a set layout is not a hash", hash);
        if (sh)
            KILN_TRY(set_layout(c, sh, &sl[i]));
    }
    for (uint32_t i = 0; i < len(pcs); i++) {
        pc[i].stageFlags = u32(at(pcs, i), "stageFlags");
        pc[i].offset = u32(at(pcs, i), "offset");
        pc[i].size = u32(at(pcs, i), "size");
    }
    ci.setLayoutCount = len(sets);
    ci.pSetLayouts = sl;
    ci.pushConstantRangeCount = len(pcs);
    ci.pPushConstantRanges = pc;
    VkPipelineLayout l;
    VkResult r = b->vk.CreatePipelineLayout(b->device, &ci, b->alloc, &l);
    if (r != VK_SUCCESS)
        return kiln__fb_fail(c, KILN_EVULKAN, "vkCreatePipelineLayout %016" PRIx64 ": VkResult %d",
                             hash, (int)r);
    h.layout = l;
    KILN_TRY(shared_put(b, KILN_FOZ_TAG_PIPELINE_LAYOUT, hash, &h, VK_NULL_HANDLE));
    *out = h.layout;
    return KILN_OK;
}

/* Render passes: the fields VkAttachmentDescription(2) and the others share. */
#define ATTACHMENT_FIELDS(d, o)                                              \
    do {                                                                     \
        (d)->flags = u32(o, "flags");                                        \
        (d)->format = (VkFormat)u32(o, "format");                            \
        (d)->samples = (VkSampleCountFlagBits)u32(o, "samples");             \
        (d)->loadOp = (VkAttachmentLoadOp)u32(o, "loadOp");                  \
        (d)->storeOp = (VkAttachmentStoreOp)u32(o, "storeOp");               \
        (d)->stencilLoadOp = (VkAttachmentLoadOp)u32(o, "stencilLoadOp");    \
        (d)->stencilStoreOp = (VkAttachmentStoreOp)u32(o, "stencilStoreOp"); \
        (d)->initialLayout = (VkImageLayout)u32(o, "initialLayout");         \
        (d)->finalLayout = (VkImageLayout)u32(o, "finalLayout");             \
    } while (0)

#define DEPENDENCY_FIELDS(d, o)                           \
    do {                                                  \
        (d)->srcSubpass = u32(o, "srcSubpass");           \
        (d)->dstSubpass = u32(o, "dstSubpass");           \
        (d)->srcStageMask = u32(o, "srcStageMask");       \
        (d)->dstStageMask = u32(o, "dstStageMask");       \
        (d)->srcAccessMask = u32(o, "srcAccessMask");     \
        (d)->dstAccessMask = u32(o, "dstAccessMask");     \
        (d)->dependencyFlags = u32(o, "dependencyFlags"); \
    } while (0)

static VkAttachmentReference *refs1(struct build *c, struct json_object *a)
{
    VkAttachmentReference *r = kiln__fb_alloc(c, len(a) * sizeof(*r));
    for (uint32_t i = 0; r && i < len(a); i++) {
        r[i].attachment = u32(at(a, i), "attachment");
        r[i].layout = (VkImageLayout)u32(at(a, i), "layout");
    }
    return r;
}

static int attachment_ref2(struct build *c, struct json_object *o, VkAttachmentReference2 *r)
{
    r->sType = VK_STRUCTURE_TYPE_ATTACHMENT_REFERENCE_2;
    r->attachment = u32(o, "attachment");
    r->layout = (VkImageLayout)u32(o, "layout");
    r->aspectMask = u32(o, "aspectMask");
    return kiln__fb_chain(c, get(o, "pNext"), NULL, &r->pNext);
}

static int refs2(struct build *c, struct json_object *a, const VkAttachmentReference2 **out)
{
    VkAttachmentReference2 *r = kiln__fb_alloc(c, len(a) * sizeof(*r));
    if (!r)
        return KILN_ENOMEM;
    for (uint32_t i = 0; i < len(a); i++)
        KILN_TRY(attachment_ref2(c, at(a, i), &r[i]));
    *out = r;
    return KILN_OK;
}

static int render_pass1(struct build *c, struct json_object *o, uint64_t hash, VkRenderPass *out)
{
    VkRenderPassCreateInfo ci = {.sType = VK_STRUCTURE_TYPE_RENDER_PASS_CREATE_INFO};
    ci.flags = u32(o, "flags");
    struct json_object *as = get(o, "attachments"), *ds = get(o, "dependencies"),
                       *ss = get(o, "subpasses");
    VkAttachmentDescription *a = kiln__fb_alloc(c, len(as) * sizeof(*a));
    VkSubpassDependency *d = kiln__fb_alloc(c, len(ds) * sizeof(*d));
    VkSubpassDescription *s = kiln__fb_alloc(c, len(ss) * sizeof(*s));
    if (!a || !d || !s)
        return KILN_ENOMEM;
    for (uint32_t i = 0; i < len(as); i++)
        ATTACHMENT_FIELDS(&a[i], at(as, i));
    for (uint32_t i = 0; i < len(ds); i++)
        DEPENDENCY_FIELDS(&d[i], at(ds, i));
    for (uint32_t i = 0; i < len(ss); i++) {
        struct json_object *x = at(ss, i);
        s[i].flags = u32(x, "flags");
        s[i].pipelineBindPoint = (VkPipelineBindPoint)u32(x, "pipelineBindPoint");
        s[i].inputAttachmentCount = len(get(x, "inputAttachments"));
        s[i].pInputAttachments = refs1(c, get(x, "inputAttachments"));
        s[i].colorAttachmentCount = len(get(x, "colorAttachments"));
        s[i].pColorAttachments = refs1(c, get(x, "colorAttachments"));
        if (get(x, "resolveAttachments")) {
            if (len(get(x, "resolveAttachments")) != s[i].colorAttachmentCount)
                return kiln__fb_fail(
                    c, KILN_EPARSE,
                    "render pass %016" PRIx64 ": resolve and color attachment counts differ", hash);
            s[i].pResolveAttachments = refs1(c, get(x, "resolveAttachments"));
        }
        if (get(x, "depthStencilAttachment")) {
            VkAttachmentReference *r = kiln__fb_alloc(c, sizeof(*r));
            if (!r)
                return KILN_ENOMEM;
            r->attachment = u32(get(x, "depthStencilAttachment"), "attachment");
            r->layout = (VkImageLayout)u32(get(x, "depthStencilAttachment"), "layout");
            s[i].pDepthStencilAttachment = r;
        }
        s[i].preserveAttachmentCount = len(get(x, "preserveAttachments"));
        s[i].pPreserveAttachments = kiln__fb_uints(c, get(x, "preserveAttachments"));
    }
    ci.attachmentCount = len(as);
    ci.pAttachments = a;
    ci.dependencyCount = len(ds);
    ci.pDependencies = d;
    ci.subpassCount = len(ss);
    ci.pSubpasses = s;
    KILN_TRY(kiln__fb_chain(c, get(o, "pNext"), NULL, &ci.pNext));
    if (c->oom)
        return KILN_ENOMEM;
    VkResult r = c->b->vk.CreateRenderPass(c->b->device, &ci, c->b->alloc, out);
    if (r != VK_SUCCESS)
        return kiln__fb_fail(c, KILN_EVULKAN, "vkCreateRenderPass %016" PRIx64 ": VkResult %d",
                             hash, (int)r);
    return KILN_OK;
}

static int render_pass2(struct build *c, struct json_object *o, uint64_t hash, VkRenderPass *out)
{
    KILN_TRY(kiln__fb_need(c, 2, X_CREATE_RENDERPASS2, -1, "a render pass 2"));
    if (!c->b->vk.CreateRenderPass2)
        return kiln__fb_fail(c, KILN_ENOTSUP,
                             "a render pass 2: vkCreateRenderPass2 is not available");
    VkRenderPassCreateInfo2 ci = {.sType = VK_STRUCTURE_TYPE_RENDER_PASS_CREATE_INFO_2};
    ci.flags = u32(o, "flags");
    struct json_object *as = get(o, "attachments"), *ds = get(o, "dependencies"),
                       *ss = get(o, "subpasses");
    VkAttachmentDescription2 *a = kiln__fb_alloc(c, len(as) * sizeof(*a));
    VkSubpassDependency2 *d = kiln__fb_alloc(c, len(ds) * sizeof(*d));
    VkSubpassDescription2 *s = kiln__fb_alloc(c, len(ss) * sizeof(*s));
    if (!a || !d || !s)
        return KILN_ENOMEM;
    for (uint32_t i = 0; i < len(as); i++) {
        a[i].sType = VK_STRUCTURE_TYPE_ATTACHMENT_DESCRIPTION_2;
        ATTACHMENT_FIELDS(&a[i], at(as, i));
        KILN_TRY(kiln__fb_chain(c, get(at(as, i), "pNext"), NULL, &a[i].pNext));
    }
    for (uint32_t i = 0; i < len(ds); i++) {
        d[i].sType = VK_STRUCTURE_TYPE_SUBPASS_DEPENDENCY_2;
        DEPENDENCY_FIELDS(&d[i], at(ds, i));
        d[i].viewOffset = i32(at(ds, i), "viewOffset");
        KILN_TRY(kiln__fb_chain(c, get(at(ds, i), "pNext"), NULL, &d[i].pNext));
    }
    for (uint32_t i = 0; i < len(ss); i++) {
        struct json_object *x = at(ss, i);
        s[i].sType = VK_STRUCTURE_TYPE_SUBPASS_DESCRIPTION_2;
        s[i].flags = u32(x, "flags");
        s[i].pipelineBindPoint = (VkPipelineBindPoint)u32(x, "pipelineBindPoint");
        s[i].viewMask = u32(x, "viewMask");
        s[i].inputAttachmentCount = len(get(x, "inputAttachments"));
        KILN_TRY(refs2(c, get(x, "inputAttachments"), &s[i].pInputAttachments));
        s[i].colorAttachmentCount = len(get(x, "colorAttachments"));
        KILN_TRY(refs2(c, get(x, "colorAttachments"), &s[i].pColorAttachments));
        if (get(x, "resolveAttachments")) {
            if (len(get(x, "resolveAttachments")) != s[i].colorAttachmentCount)
                return kiln__fb_fail(
                    c, KILN_EPARSE,
                    "render pass %016" PRIx64 ": resolve and color attachment counts differ", hash);
            KILN_TRY(refs2(c, get(x, "resolveAttachments"), &s[i].pResolveAttachments));
        }
        if (get(x, "depthStencilAttachment")) {
            VkAttachmentReference2 *r = kiln__fb_alloc(c, sizeof(*r));
            if (!r)
                return KILN_ENOMEM;
            KILN_TRY(attachment_ref2(c, get(x, "depthStencilAttachment"), r));
            s[i].pDepthStencilAttachment = r;
        }
        s[i].preserveAttachmentCount = len(get(x, "preserveAttachments"));
        s[i].pPreserveAttachments = kiln__fb_uints(c, get(x, "preserveAttachments"));
        KILN_TRY(kiln__fb_chain(c, get(x, "pNext"), NULL, &s[i].pNext));
    }
    ci.attachmentCount = len(as);
    ci.pAttachments = a;
    ci.dependencyCount = len(ds);
    ci.pDependencies = d;
    ci.subpassCount = len(ss);
    ci.pSubpasses = s;
    ci.correlatedViewMaskCount = len(get(o, "correlatedViewMasks"));
    ci.pCorrelatedViewMasks = kiln__fb_uints(c, get(o, "correlatedViewMasks"));
    KILN_TRY(kiln__fb_chain(c, get(o, "pNext"), NULL, &ci.pNext));
    if (c->oom)
        return KILN_ENOMEM;
    VkResult r = c->b->vk.CreateRenderPass2(c->b->device, &ci, c->b->alloc, out);
    if (r != VK_SUCCESS)
        return kiln__fb_fail(c, KILN_EVULKAN, "vkCreateRenderPass2 %016" PRIx64 ": VkResult %d",
                             hash, (int)r);
    return KILN_OK;
}

static int render_pass(struct build *c, uint64_t hash, VkRenderPass *out)
{
    struct kiln_foz_builder *b = c->b;
    union handle h;
    if (shared_get(b, KILN_FOZ_TAG_RENDER_PASS, hash, &h)) {
        *out = h.pass;
        return KILN_OK;
    }
    char name[17];
    snprintf(name, sizeof(name), "%016" PRIx64, hash);
    struct json_object *o;
    VkRenderPass rp = VK_NULL_HANDLE;
    if ((o = get(get(c->doc, "renderPasses"), name)) != NULL)
        KILN_TRY(render_pass1(c, o, hash, &rp));
    else if ((o = get(get(c->doc, "renderPasses2"), name)) != NULL)
        KILN_TRY(render_pass2(c, o, hash, &rp));
    else
        return kiln__fb_fail(c, KILN_EPARSE, "the closure has no render pass %s", name);
    h.pass = rp;
    KILN_TRY(shared_put(b, KILN_FOZ_TAG_RENDER_PASS, hash, &h, VK_NULL_HANDLE));
    *out = h.pass;
    return KILN_OK;
}

/* ---------------------------------------------------------------------------
 * Pipelines
 * ------------------------------------------------------------------------ */

static int specialization(struct build *c, struct json_object *o, const VkSpecializationInfo **out)
{
    VkSpecializationInfo *si = kiln__fb_alloc(c, sizeof(*si));
    if (!si)
        return KILN_ENOMEM;
    si->dataSize = u32(o, "dataSize");
    uint8_t *data = kiln__fb_alloc(c, si->dataSize);
    if (!data)
        return KILN_ENOMEM;
    struct json_object *text = get(o, "data");
    if (si->dataSize &&
        (!json_object_is_type(text, json_type_string) ||
         !kiln__foz_base64_decode(json_object_get_string(text),
                                  (size_t)json_object_get_string_len(text), data, si->dataSize)))
        return kiln__fb_fail(c, KILN_EPARSE, "specialization data is not %zu bytes of base64",
                             si->dataSize);
    si->pData = data;
    struct json_object *m = get(o, "mapEntries");
    VkSpecializationMapEntry *e = kiln__fb_alloc(c, len(m) * sizeof(*e));
    if (!e)
        return KILN_ENOMEM;
    for (uint32_t i = 0; i < len(m); i++) {
        e[i].constantID = u32(at(m, i), "constantID");
        e[i].offset = u32(at(m, i), "offset");
        e[i].size = u32(at(m, i), "size");
        if ((uint64_t)e[i].offset + e[i].size > si->dataSize)
            return kiln__fb_fail(c, KILN_EPARSE, "specialization constant %u lies outside its data",
                                 e[i].constantID);
    }
    si->mapEntryCount = len(m);
    si->pMapEntries = e;
    *out = si;
    return KILN_OK;
}

/* Fills one stage from the recorded JSON and the caller's staged module. */
static int stage(struct build *c, struct json_object *rec,
                 const VkPipelineShaderStageCreateInfo *in, uint32_t index,
                 VkPipelineShaderStageCreateInfo *out)
{
    uint32_t bit = u32(rec, "stage");
    if (in->stage != (VkShaderStageFlagBits)bit)
        return kiln__fb_fail(c, KILN_EINVAL,
                             "stage %u is 0x%x in the closure but 0x%x was handed in", index, bit,
                             (unsigned)in->stage);
    struct kiln_foz_builder *b = c->b;
    if (bit == VK_SHADER_STAGE_TESSELLATION_CONTROL_BIT ||
        bit == VK_SHADER_STAGE_TESSELLATION_EVALUATION_BIT)
        KILN_TRY(kiln__fb_need_feature(c, b->feat.f.tessellationShader, "tessellationShader",
                                       "a tessellation stage"));
    if (bit == VK_SHADER_STAGE_GEOMETRY_BIT)
        KILN_TRY(kiln__fb_need_feature(c, b->feat.f.geometryShader, "geometryShader",
                                       "a geometry stage"));
    if (bit == 0x40 || bit == 0x80) /* task, mesh */
        KILN_TRY(kiln__fb_need(c, 0, X_MESH_EXT, X_MESH_NV, "a task or mesh stage"));
    *out = *in;
    out->flags = u32(rec, "flags");
    struct json_object *name = get(rec, "name");
    if (!json_object_is_type(name, json_type_string))
        return kiln__fb_fail(c, KILN_EPARSE, "stage %u has no entry point name", index);
    size_t n = (size_t)json_object_get_string_len(name);
    char *s = kiln__fb_alloc(c, n + 1);
    if (!s)
        return KILN_ENOMEM;
    memcpy(s, json_object_get_string(name), n);
    out->pName = s;
    out->pSpecializationInfo = NULL;
    if (get(rec, "specializationInfo"))
        KILN_TRY(specialization(c, get(rec, "specializationInfo"), &out->pSpecializationInfo));
    /* The recorded structures go first, ending in the caller's chain (the
     * module's create info with maintenance5), which is not ours to edit. */
    return kiln__fb_chain(c, get(rec, "pNext"), in->pNext, &out->pNext);
}

/* Checks that each dynamic state is one the device offers. */
int kiln__fb_dynamic_states(struct build *c, const uint32_t *v, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) {
        uint32_t d = v[i];
        if (d <= VK_DYNAMIC_STATE_STENCIL_REFERENCE)
            continue;
        if ((d >= 1000267000 && d <= 1000267011))
            KILN_TRY(kiln__fb_need(c, 3, X_EDS, -1, "an extended dynamic state"));
        else if (d == 1000377001 || d == 1000377002 || d == 1000377004)
            KILN_TRY(kiln__fb_need(c, 3, X_EDS2, -1, "an extended dynamic state 2"));
        else {
            static const struct {
                uint32_t number;
                int ext;
            } by_number[] = {
                {88, X_CLIP_SPACE_W_SCALING},
                {100, X_DISCARD_RECTANGLES},
                {144, X_SAMPLE_LOCATIONS},
                {227, X_FRAGMENT_SHADING_RATE},
                {260, X_LINE_EXT},
                {353, X_VERTEX_INPUT_DYNAMIC},
                {378, X_EDS2},
                {382, X_COLOR_WRITE},
                {456, X_EDS3},
                {348, X_RT_PIPELINE},
            };
            /* An extension's enum values are 1000000000 + (number - 1) * 1000 + n. */
            uint32_t number = d >= 1000000000u ? (d - 1000000000u) / 1000u + 1 : 0;
            int ext = -1;
            for (size_t k = 0; k < KILN_ARRAY_LEN(by_number); k++)
                if (by_number[k].number == number)
                    ext = by_number[k].ext;
            if (ext < 0)
                return kiln__fb_fail(c, KILN_ENOTSUP, "dynamic state %u is not one kiln knows", d);
            if (number == 260 && c->b->ext[X_LINE_KHR])
                continue;
            KILN_TRY(kiln__fb_need(c, 0, ext, -1, "a dynamic state"));
        }
    }
    return KILN_OK;
}

static bool has_dynamic(const VkPipelineDynamicStateCreateInfo *dyn, uint32_t state)
{
    for (uint32_t i = 0; dyn && i < dyn->dynamicStateCount; i++)
        if ((uint32_t)dyn->pDynamicStates[i] == state)
            return true;
    return false;
}

static bool dual_source(uint32_t factor)
{
    return factor >= VK_BLEND_FACTOR_SRC1_COLOR && factor <= VK_BLEND_FACTOR_ONE_MINUS_SRC1_ALPHA;
}

/* The graphics states, with the core features they may need checked. */
static int graphics_states(struct build *c, struct json_object *p, VkGraphicsPipelineCreateInfo *ci)
{
    const struct features *f = &c->b->feat;
    struct json_object *o;
    VkPipelineDynamicStateCreateInfo *dyn = NULL;
    if ((o = get(p, "dynamicState")) != NULL) {
        dyn = kiln__fb_alloc(c, sizeof(*dyn));
        if (!dyn)
            return KILN_ENOMEM;
        dyn->sType = VK_STRUCTURE_TYPE_PIPELINE_DYNAMIC_STATE_CREATE_INFO;
        dyn->flags = u32(o, "flags");
        dyn->dynamicStateCount = len(get(o, "dynamicState"));
        uint32_t *v = kiln__fb_uints(c, get(o, "dynamicState"));
        if (!v)
            return KILN_ENOMEM;
        KILN_TRY(kiln__fb_dynamic_states(c, v, dyn->dynamicStateCount));
        dyn->pDynamicStates = (const VkDynamicState *)v;
        ci->pDynamicState = dyn;
    }
    if ((o = get(p, "vertexInputState")) != NULL) {
        VkPipelineVertexInputStateCreateInfo *s = kiln__fb_alloc(c, sizeof(*s));
        struct json_object *as = get(o, "attributes"), *bs = get(o, "bindings");
        VkVertexInputAttributeDescription *a = kiln__fb_alloc(c, len(as) * sizeof(*a));
        VkVertexInputBindingDescription *bd = kiln__fb_alloc(c, len(bs) * sizeof(*bd));
        if (!s || !a || !bd)
            return KILN_ENOMEM;
        for (uint32_t i = 0; i < len(as); i++) {
            a[i].location = u32(at(as, i), "location");
            a[i].binding = u32(at(as, i), "binding");
            a[i].format = (VkFormat)u32(at(as, i), "format");
            a[i].offset = u32(at(as, i), "offset");
        }
        for (uint32_t i = 0; i < len(bs); i++) {
            bd[i].binding = u32(at(bs, i), "binding");
            bd[i].stride = u32(at(bs, i), "stride");
            bd[i].inputRate = (VkVertexInputRate)u32(at(bs, i), "inputRate");
        }
        s->sType = VK_STRUCTURE_TYPE_PIPELINE_VERTEX_INPUT_STATE_CREATE_INFO;
        s->flags = u32(o, "flags");
        s->vertexAttributeDescriptionCount = len(as);
        s->pVertexAttributeDescriptions = a;
        s->vertexBindingDescriptionCount = len(bs);
        s->pVertexBindingDescriptions = bd;
        KILN_TRY(kiln__fb_chain(c, get(o, "pNext"), NULL, &s->pNext));
        ci->pVertexInputState = s;
    }
    if ((o = get(p, "inputAssemblyState")) != NULL) {
        VkPipelineInputAssemblyStateCreateInfo *s = kiln__fb_alloc(c, sizeof(*s));
        if (!s)
            return KILN_ENOMEM;
        s->sType = VK_STRUCTURE_TYPE_PIPELINE_INPUT_ASSEMBLY_STATE_CREATE_INFO;
        s->flags = u32(o, "flags");
        s->topology = (VkPrimitiveTopology)u32(o, "topology");
        s->primitiveRestartEnable = u32(o, "primitiveRestartEnable");
        KILN_TRY(kiln__fb_chain(c, get(o, "pNext"), NULL, &s->pNext));
        ci->pInputAssemblyState = s;
    }
    if ((o = get(p, "tessellationState")) != NULL) {
        VkPipelineTessellationStateCreateInfo *s = kiln__fb_alloc(c, sizeof(*s));
        if (!s)
            return KILN_ENOMEM;
        s->sType = VK_STRUCTURE_TYPE_PIPELINE_TESSELLATION_STATE_CREATE_INFO;
        s->flags = u32(o, "flags");
        s->patchControlPoints = u32(o, "patchControlPoints");
        KILN_TRY(kiln__fb_chain(c, get(o, "pNext"), NULL, &s->pNext));
        ci->pTessellationState = s;
    }
    if ((o = get(p, "viewportState")) != NULL) {
        VkPipelineViewportStateCreateInfo *s = kiln__fb_alloc(c, sizeof(*s));
        if (!s)
            return KILN_ENOMEM;
        s->sType = VK_STRUCTURE_TYPE_PIPELINE_VIEWPORT_STATE_CREATE_INFO;
        s->flags = u32(o, "flags");
        s->viewportCount = u32(o, "viewportCount");
        s->scissorCount = u32(o, "scissorCount");
        struct json_object *vs = get(o, "viewports"), *ss = get(o, "scissors");
        if (vs) {
            if (len(vs) != s->viewportCount)
                return kiln__fb_fail(c, KILN_EPARSE,
                                     "viewports does not hold viewportCount values");
            VkViewport *v = kiln__fb_alloc(c, len(vs) * sizeof(*v));
            if (!v)
                return KILN_ENOMEM;
            for (uint32_t i = 0; i < len(vs); i++) {
                v[i].x = f32(at(vs, i), "x");
                v[i].y = f32(at(vs, i), "y");
                v[i].width = f32(at(vs, i), "width");
                v[i].height = f32(at(vs, i), "height");
                v[i].minDepth = f32(at(vs, i), "minDepth");
                v[i].maxDepth = f32(at(vs, i), "maxDepth");
            }
            s->pViewports = v;
        }
        if (ss) {
            if (len(ss) != s->scissorCount)
                return kiln__fb_fail(c, KILN_EPARSE, "scissors does not hold scissorCount values");
            VkRect2D *r = kiln__fb_alloc(c, len(ss) * sizeof(*r));
            if (!r)
                return KILN_ENOMEM;
            for (uint32_t i = 0; i < len(ss); i++) {
                r[i].offset.x = i32(at(ss, i), "x");
                r[i].offset.y = i32(at(ss, i), "y");
                r[i].extent.width = u32(at(ss, i), "width");
                r[i].extent.height = u32(at(ss, i), "height");
            }
            s->pScissors = r;
        }
        if (s->viewportCount > 1 || s->scissorCount > 1)
            KILN_TRY(
                kiln__fb_need_feature(c, f->f.multiViewport, "multiViewport", "several viewports"));
        KILN_TRY(kiln__fb_chain(c, get(o, "pNext"), NULL, &s->pNext));
        ci->pViewportState = s;
    }
    if ((o = get(p, "rasterizationState")) != NULL) {
        VkPipelineRasterizationStateCreateInfo *s = kiln__fb_alloc(c, sizeof(*s));
        if (!s)
            return KILN_ENOMEM;
        s->sType = VK_STRUCTURE_TYPE_PIPELINE_RASTERIZATION_STATE_CREATE_INFO;
        s->flags = u32(o, "flags");
        s->depthClampEnable = u32(o, "depthClampEnable");
        s->rasterizerDiscardEnable = u32(o, "rasterizerDiscardEnable");
        s->polygonMode = (VkPolygonMode)u32(o, "polygonMode");
        s->cullMode = u32(o, "cullMode");
        s->frontFace = (VkFrontFace)u32(o, "frontFace");
        s->depthBiasEnable = u32(o, "depthBiasEnable");
        s->depthBiasConstantFactor = f32(o, "depthBiasConstantFactor");
        s->depthBiasClamp = f32(o, "depthBiasClamp");
        s->depthBiasSlopeFactor = f32(o, "depthBiasSlopeFactor");
        s->lineWidth = f32(o, "lineWidth");
        if (s->depthClampEnable)
            KILN_TRY(kiln__fb_need_feature(c, f->f.depthClamp, "depthClamp", "depth clamping"));
        if (s->polygonMode == VK_POLYGON_MODE_LINE || s->polygonMode == VK_POLYGON_MODE_POINT)
            KILN_TRY(kiln__fb_need_feature(c, f->f.fillModeNonSolid, "fillModeNonSolid",
                                           "a non-solid polygon mode"));
        if (s->depthBiasEnable && s->depthBiasClamp != 0.0f &&
            !has_dynamic(dyn, VK_DYNAMIC_STATE_DEPTH_BIAS))
            KILN_TRY(kiln__fb_need_feature(c, f->f.depthBiasClamp, "depthBiasClamp",
                                           "a depth bias clamp"));
        if (s->lineWidth != 1.0f && !has_dynamic(dyn, VK_DYNAMIC_STATE_LINE_WIDTH))
            KILN_TRY(
                kiln__fb_need_feature(c, f->f.wideLines, "wideLines", "a line width other than 1"));
        KILN_TRY(kiln__fb_chain(c, get(o, "pNext"), NULL, &s->pNext));
        ci->pRasterizationState = s;
    }
    if ((o = get(p, "multisampleState")) != NULL) {
        VkPipelineMultisampleStateCreateInfo *s = kiln__fb_alloc(c, sizeof(*s));
        if (!s)
            return KILN_ENOMEM;
        s->sType = VK_STRUCTURE_TYPE_PIPELINE_MULTISAMPLE_STATE_CREATE_INFO;
        s->flags = u32(o, "flags");
        s->rasterizationSamples = (VkSampleCountFlagBits)u32(o, "rasterizationSamples");
        s->sampleShadingEnable = u32(o, "sampleShadingEnable");
        s->minSampleShading = f32(o, "minSampleShading");
        s->alphaToCoverageEnable = u32(o, "alphaToCoverageEnable");
        s->alphaToOneEnable = u32(o, "alphaToOneEnable");
        struct json_object *mask = get(o, "sampleMask");
        if (mask) {
            if (len(mask) != (s->rasterizationSamples + 31) / 32)
                return kiln__fb_fail(c, KILN_EPARSE,
                                     "sampleMask does not have one word per 32 samples");
            s->pSampleMask = kiln__fb_uints(c, mask);
        }
        if (s->sampleShadingEnable)
            KILN_TRY(kiln__fb_need_feature(c, f->f.sampleRateShading, "sampleRateShading",
                                           "sample shading"));
        if (s->alphaToOneEnable)
            KILN_TRY(kiln__fb_need_feature(c, f->f.alphaToOne, "alphaToOne", "alpha to one"));
        KILN_TRY(kiln__fb_chain(c, get(o, "pNext"), NULL, &s->pNext));
        ci->pMultisampleState = s;
    }
    if ((o = get(p, "depthStencilState")) != NULL) {
        VkPipelineDepthStencilStateCreateInfo *s = kiln__fb_alloc(c, sizeof(*s));
        if (!s)
            return KILN_ENOMEM;
        s->sType = VK_STRUCTURE_TYPE_PIPELINE_DEPTH_STENCIL_STATE_CREATE_INFO;
        s->flags = u32(o, "flags");
        s->depthTestEnable = u32(o, "depthTestEnable");
        s->depthWriteEnable = u32(o, "depthWriteEnable");
        s->depthCompareOp = (VkCompareOp)u32(o, "depthCompareOp");
        s->depthBoundsTestEnable = u32(o, "depthBoundsTestEnable");
        s->stencilTestEnable = u32(o, "stencilTestEnable");
        s->minDepthBounds = f32(o, "minDepthBounds");
        s->maxDepthBounds = f32(o, "maxDepthBounds");
        VkStencilOpState *faces[2] = {&s->front, &s->back};
        const char *names[2] = {"front", "back"};
        for (int k = 0; k < 2; k++) {
            struct json_object *x = get(o, names[k]);
            faces[k]->failOp = (VkStencilOp)u32(x, "failOp");
            faces[k]->passOp = (VkStencilOp)u32(x, "passOp");
            faces[k]->depthFailOp = (VkStencilOp)u32(x, "depthFailOp");
            faces[k]->compareOp = (VkCompareOp)u32(x, "compareOp");
            faces[k]->compareMask = u32(x, "compareMask");
            faces[k]->writeMask = u32(x, "writeMask");
            faces[k]->reference = u32(x, "reference");
        }
        if (s->depthBoundsTestEnable)
            KILN_TRY(
                kiln__fb_need_feature(c, f->f.depthBounds, "depthBounds", "a depth bounds test"));
        KILN_TRY(kiln__fb_chain(c, get(o, "pNext"), NULL, &s->pNext));
        ci->pDepthStencilState = s;
    }
    if ((o = get(p, "colorBlendState")) != NULL) {
        VkPipelineColorBlendStateCreateInfo *s = kiln__fb_alloc(c, sizeof(*s));
        struct json_object *as = get(o, "attachments");
        VkPipelineColorBlendAttachmentState *a = kiln__fb_alloc(c, len(as) * sizeof(*a));
        if (!s || !a)
            return KILN_ENOMEM;
        s->sType = VK_STRUCTURE_TYPE_PIPELINE_COLOR_BLEND_STATE_CREATE_INFO;
        s->flags = u32(o, "flags");
        s->logicOpEnable = u32(o, "logicOpEnable");
        s->logicOp = (VkLogicOp)u32(o, "logicOp");
        struct json_object *k4 = get(o, "blendConstants");
        for (uint32_t i = 0; i < 4 && i < len(k4); i++)
            s->blendConstants[i] = (float)json_object_get_double(at(k4, i));
        for (uint32_t i = 0; i < len(as); i++) {
            struct json_object *x = at(as, i);
            a[i].blendEnable = u32(x, "blendEnable");
            a[i].srcColorBlendFactor = (VkBlendFactor)u32(x, "srcColorBlendFactor");
            a[i].dstColorBlendFactor = (VkBlendFactor)u32(x, "dstColorBlendFactor");
            a[i].colorBlendOp = (VkBlendOp)u32(x, "colorBlendOp");
            a[i].srcAlphaBlendFactor = (VkBlendFactor)u32(x, "srcAlphaBlendFactor");
            a[i].dstAlphaBlendFactor = (VkBlendFactor)u32(x, "dstAlphaBlendFactor");
            a[i].alphaBlendOp = (VkBlendOp)u32(x, "alphaBlendOp");
            a[i].colorWriteMask = u32(x, "colorWriteMask");
            if (a[i].blendEnable &&
                (dual_source(a[i].srcColorBlendFactor) || dual_source(a[i].dstColorBlendFactor) ||
                 dual_source(a[i].srcAlphaBlendFactor) || dual_source(a[i].dstAlphaBlendFactor)))
                KILN_TRY(kiln__fb_need_feature(c, f->f.dualSrcBlend, "dualSrcBlend",
                                               "dual-source blending"));
            if (i > 0 && memcmp(&a[i], &a[0], sizeof(a[0])) != 0)
                KILN_TRY(kiln__fb_need_feature(c, f->f.independentBlend, "independentBlend",
                                               "attachments that blend differently"));
        }
        if (s->logicOpEnable)
            KILN_TRY(kiln__fb_need_feature(c, f->f.logicOp, "logicOp", "a logic op"));
        s->attachmentCount = len(as);
        s->pAttachments = a;
        KILN_TRY(kiln__fb_chain(c, get(o, "pNext"), NULL, &s->pNext));
        ci->pColorBlendState = s;
    }
    return c->oom ? KILN_ENOMEM : KILN_OK;
}

static bool chain_has(const void *pnext, uint32_t stype)
{
    for (const VkBaseInStructure *s = pnext; s; s = s->pNext)
        if ((uint32_t)s->sType == stype)
            return true;
    return false;
}

/* The flags a pipeline is built with: derivatives on their own, the
 * flags that change nothing dropped, a library only where the device has
 * VK_KHR_pipeline_library. */
int kiln__fb_pipeline_flags(struct build *c, struct json_object *p, VkPipelineCreateFlags *flags,
                            VkPipeline *base, int32_t *base_index)
{
    uint32_t f = u32(p, "flags");
    if (f & FLAG_LIBRARY)
        KILN_TRY(kiln__fb_need(c, 0, X_PIPELINE_LIBRARY, -1, "a pipeline library"));
    uint64_t bh;
    if (!kiln__fb_hash_of(get(p, "basePipelineHandle"), &bh))
        return kiln__fb_fail(c, KILN_EPARSE, "basePipelineHandle is not a hash");
    if ((f & FLAG_DERIVATIVE) || bh)
        atomic_fetch_add(&c->b->standalone, 1);
    *flags = f & ~(uint32_t)(FLAGS_IGNORED | FLAG_DERIVATIVE);
    *base = VK_NULL_HANDLE;
    *base_index = -1;
    return KILN_OK;
}

/*
 * The stages of one pipeline of the build (the pipeline itself or one of
 * its libraries): each recorded stage is found among the build's stage
 * records by identity (kiln__foz_closure_stages hands out the closure's
 * own JSON objects) and filled from the handed-in stage at that index.
 */
int kiln__fb_own_stages(struct build *c, struct json_object *rs, uint32_t n,
                        VkPipelineShaderStageCreateInfo **out)
{
    VkPipelineShaderStageCreateInfo *st = kiln__fb_alloc(c, (n ? n : 1) * sizeof(*st));
    if (!st)
        return KILN_ENOMEM;
    for (uint32_t i = 0; i < n; i++) {
        struct json_object *rec = json_object_is_type(rs, json_type_array) ? at(rs, i) : rs;
        uint32_t k = 0;
        while (k < c->nstages && c->recs[k] != rec)
            k++;
        if (k == c->nstages)
            return kiln__fb_fail(c, KILN_EINVAL, "a recorded stage has no handed-in stage");
        KILN_TRY(stage(c, rec, &c->stages[k], k, &st[i]));
    }
    *out = st;
    return KILN_OK;
}

/* The recorded VkPipelineCreateFlags2CreateInfoKHR of a chain, or NULL
 * (the chain's structures are the build's own, in its arena). */
static struct flags2_info *chain_flags2(const void *pnext)
{
    for (const VkBaseInStructure *s = pnext; s; s = s->pNext)
        if ((uint32_t)s->sType == STYPE_PIPELINE_CREATE_FLAGS_2)
            return (struct flags2_info *)s;
    return NULL;
}

/* The host tier's ask (foz_link.h), for a monolithic pipeline only (a
 * graphics, compute or ray-tracing one): a library, or a pipeline that
 * links libraries (`links`: a graphics pipeline's
 * VkPipelineLibraryCreateInfoKHR, a ray-tracing one's pLibraryInfo),
 * builds as usual, with the pipeline cache. The capture flags go in the
 * recorded VkPipelineCreateFlags2CreateInfoKHR, or in one made here that
 * carries the create's flags (it replaces them). */
static bool ask_tier(struct build *c, VkPipelineCreateFlags flags, const void **pnext, bool links)
{
    struct kiln__fb_tier *t = c->tier;
    struct flags2_info *f2 = chain_flags2(*pnext);
    if (!t || (!t->flags2 && !t->binaries) || links || (flags & FLAG_LIBRARY) ||
        (f2 && (f2->flags & FLAG_LIBRARY)))
        return false;
    if (t->binaries) {
        ((VkBaseOutStructure *)t->binaries)->pNext = (VkBaseOutStructure *)*pnext;
        *pnext = t->binaries;
    } else if (f2) {
        f2->flags |= t->flags2;
    } else {
        f2 = kiln__fb_alloc(c, sizeof(*f2));
        if (!f2)
            return false;
        *f2 = (struct flags2_info){.sType = (VkStructureType)STYPE_PIPELINE_CREATE_FLAGS_2,
                                   .pNext = *pnext,
                                   .flags = flags | t->flags2};
        *pnext = f2;
    }
    t->used = true;
    return true;
}

bool kiln__fb_ask(struct build *c, VkPipelineCreateFlags *flags, const void **pnext,
                  uint32_t nstages, bool links)
{
    *flags |= c->ask_flags;
    bool tier = ask_tier(c, *flags, pnext, links);
    memset(&c->feedback, 0, sizeof(c->feedback));
    if (!c->b->creation_feedback || nstages > KILN_FOZ_MAX_STAGES ||
        chain_has(*pnext, VK_STRUCTURE_TYPE_PIPELINE_CREATION_FEEDBACK_CREATE_INFO))
        return tier;
    c->feedback_info = (VkPipelineCreationFeedbackCreateInfo){
        .sType = VK_STRUCTURE_TYPE_PIPELINE_CREATION_FEEDBACK_CREATE_INFO,
        .pNext = *pnext,
        .pPipelineCreationFeedback = &c->feedback,
        .pipelineStageCreationFeedbackCount = nstages,
        .pPipelineStageCreationFeedbacks = c->stage_feedback,
    };
    *pnext = &c->feedback_info;
    return tier;
}

int kiln__fb_created(struct build *c, VkResult r, const char *call)
{
    if (r == VK_SUCCESS)
        return KILN_OK;
    if (r == VK_PIPELINE_COMPILE_REQUIRED && c->ask_flags)
        return kiln__fb_fail(c, KILN_ECOMPILE_REQUIRED, "%s: the driver's caches lack it", call);
    return kiln__fb_fail(c, KILN_EVULKAN, "%s: VkResult %d", call, (int)r);
}

/* VK_GRAPHICS_PIPELINE_LIBRARY_*_BIT_EXT: the parts that use a render pass. */
#define GPL_PARTS_WITH_PASS 0xeu

/* The recorded VkGraphicsPipelineLibraryCreateInfoEXT flags, or 0. */
static uint32_t gpl_parts(struct json_object *p)
{
    struct json_object *pnext = get(p, "pNext");
    for (uint32_t i = 0; i < len(pnext); i++)
        if (u32(at(pnext, i), "sType") == STYPE_GRAPHICS_PIPELINE_LIB)
            return u32(at(pnext, i), "flags");
    return 0;
}

/* A hash of one recorded member (its JSON text; absent: none). */
static uint64_t member_hash(struct json_object *p, const char *key)
{
    struct json_object *o = get(p, key);
    const char *t = o ? json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN) : "";
    return kiln_hash64(t, strlen(t));
}

/* The members each library part depends on (docs/vk.md, "Pipeline
 * libraries"), beside the ones every part shares and its stages. */
static const char *const part_members[KILN_VK_PARTS][4] = {
    {"vertexInputState", "inputAssemblyState"},
    {"viewportState", "rasterizationState", "tessellationState", "layout"},
    {"multisampleState", "depthStencilState", "layout"},
    {"colorBlendState", "multisampleState"},
};

/* Part k's key: this builder (its layouts and render passes are its own
 * handles), the part, the recorded members it depends on (a render pass,
 * layout or module is named by its Fossilize hash, a hash of its
 * content), and its stages' records (module, entry point,
 * specialization). */
static struct kiln_key part_key(struct build *c, struct json_object *p, int k)
{
    uint64_t h[16] = {c->b->id,
                      (uint64_t)k,
                      member_hash(p, "dynamicState"),
                      member_hash(p, "pNext"),
                      member_hash(p, "renderPass"),
                      u32(p, "subpass")};
    size_t n = 6;
    for (int i = 0; i < 4 && part_members[k][i]; i++)
        h[n++] = member_hash(p, part_members[k][i]);
    struct json_object *rs = get(p, "stages");
    uint64_t stages = 0;
    for (uint32_t i = 0; i < len(rs) && (k == 1 || k == 2); i++) {
        bool frag = u32(at(rs, i), "stage") == VK_SHADER_STAGE_FRAGMENT_BIT;
        if (frag == (k == 2)) {
            const char *t = json_object_to_json_string_ext(at(rs, i), JSON_C_TO_STRING_PLAIN);
            stages = stages * 31 + kiln_hash64(t, strlen(t));
        }
    }
    h[n++] = stages;
    return kiln_hash128(h, n * sizeof(h[0]));
}

/* Links the whole create info from parts (kiln_vk_link_graphics).
 * @return 0 with *out; KILN_ENOTSUP when it cannot be linked (nothing
 * made: the caller builds it as usual); the failure otherwise. */
static int link_graphics(struct build *c, struct json_object *p,
                         const VkGraphicsPipelineCreateInfo *ci, VkPipeline *out)
{
    struct kiln_key keys[KILN_VK_PARTS];
    for (int k = 0; k < KILN_VK_PARTS; k++)
        keys[k] = part_key(c, p, k);
    struct kiln_vk_link_result lr = KILN_VK_LINK_RESULT_INIT;
    int rc = kiln_vk_link_graphics(c->link->vk, ci, keys, c->link->parts_only ? NULL : out, &lr);
    if (rc == KILN_OK) {
        c->link->linked = lr.linked;
        c->link->parts_built = lr.parts_built;
        c->link->parts_reused = lr.parts_reused;
    } else if (rc != KILN_ENOTSUP) {
        return kiln__fb_fail(c, rc, "linking from library parts: %s", kiln_vk_errmsg(c->link->vk));
    }
    return rc;
}

int kiln__fb_build_graphics(struct build *c, struct json_object *p, VkPipelineCache cache,
                            VkPipeline *out)
{
    VkGraphicsPipelineCreateInfo ci = {.sType = VK_STRUCTURE_TYPE_GRAPHICS_PIPELINE_CREATE_INFO};
    KILN_TRY(
        kiln__fb_pipeline_flags(c, p, &ci.flags, &ci.basePipelineHandle, &ci.basePipelineIndex));
    uint32_t parts = gpl_parts(p);
    if ((ci.flags & FLAG_LIBRARY) && !parts) {
        /* A graphics library with no part named is all four parts. */
        KILN_TRY(kiln__fb_need(c, 0, X_GPL, -1, "a graphics pipeline library"));
        parts = 0xf;
    }
    KILN_TRY(kiln__fb_chain(c, get(p, "pNext"), NULL, &ci.pNext));
    bool links = chain_has(ci.pNext, STYPE_PIPELINE_LIBRARY);
    if (links)
        KILN_TRY(kiln__fb_need(c, 0, X_GPL, -1, "linking graphics pipeline libraries"));
    struct json_object *rs = get(p, "stages");
    VkPipelineShaderStageCreateInfo *st;
    KILN_TRY(kiln__fb_own_stages(c, rs, len(rs), &st));
    ci.stageCount = len(rs);
    ci.pStages = st;
    KILN_TRY(graphics_states(c, p, &ci));

    uint64_t lh, rh;
    if (!kiln__fb_hash_of(get(p, "layout"), &lh) || !kiln__fb_hash_of(get(p, "renderPass"), &rh))
        return kiln__fb_fail(c, KILN_EPARSE, "layout or renderPass is not a hash");
    /* A render pass matters only to the parts that rasterize or shade; a
     * linked pipeline takes it from its libraries. */
    bool uses_pass = (ci.flags & FLAG_LIBRARY) ? (parts & GPL_PARTS_WITH_PASS) != 0 : !links;
    if (rh) {
        KILN_TRY(render_pass(c, rh, &ci.renderPass));
    } else if (uses_pass &&
               !chain_has(ci.pNext, VK_STRUCTURE_TYPE_PIPELINE_RENDERING_CREATE_INFO)) {
        /* No render pass and no formats: dynamic rendering with none. */
        KILN_TRY(kiln__fb_need(c, 3, X_DYNAMIC_RENDERING, -1, "a pipeline without a render pass"));
        KILN_TRY(kiln__fb_need_feature(c, c->b->feat.dynamic_rendering, "dynamicRendering",
                                       "a pipeline without a render pass"));
    }
    ci.subpass = u32(p, "subpass");
    if (lh)
        KILN_TRY(kiln__fb_pipeline_layout(c, lh, &ci.layout));
    if (c->link && !ci.flags && !links && !c->ask_flags) { /* a link is no probe */
        int lrc = link_graphics(c, p, &ci, out);
        if (lrc != KILN_ENOTSUP || c->link->parts_only)
            return lrc; /* linked, or made monolithically by the link's fallback */
    }
    if (c->link && c->link->parts_only)
        return KILN_ENOTSUP; /* no parts to build ahead for this one */
    if (kiln__fb_ask(c, &ci.flags, &ci.pNext, ci.stageCount, links))
        cache = VK_NULL_HANDLE;
    VkResult r = c->b->vk.CreateGraphicsPipelines(c->b->device, cache, 1, &ci, c->b->alloc, out);
    return kiln__fb_created(c, r, "vkCreateGraphicsPipelines");
}

int kiln__fb_build_compute(struct build *c, struct json_object *p, VkPipelineCache cache,
                           VkPipeline *out)
{
    VkComputePipelineCreateInfo ci = {.sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO};
    KILN_TRY(
        kiln__fb_pipeline_flags(c, p, &ci.flags, &ci.basePipelineHandle, &ci.basePipelineIndex));
    KILN_TRY(kiln__fb_chain(c, get(p, "pNext"), NULL, &ci.pNext));
    if (!get(p, "stage"))
        return kiln__fb_fail(c, KILN_EPARSE, "a compute pipeline has no stage");
    VkPipelineShaderStageCreateInfo *st = NULL;
    KILN_TRY(kiln__fb_own_stages(c, get(p, "stage"), 1, &st));
    if (!st)
        return KILN_ENOMEM;
    ci.stage = st[0];
    uint64_t lh;
    if (!kiln__fb_hash_of(get(p, "layout"), &lh))
        return kiln__fb_fail(c, KILN_EPARSE, "layout is not a hash");
    if (lh)
        KILN_TRY(kiln__fb_pipeline_layout(c, lh, &ci.layout));
    if (kiln__fb_ask(c, &ci.flags, &ci.pNext, 1, false))
        cache = VK_NULL_HANDLE;
    VkResult r = c->b->vk.CreateComputePipelines(c->b->device, cache, 1, &ci, c->b->alloc, out);
    return kiln__fb_created(c, r, "vkCreateComputePipelines");
}

/* A VkPipelineLibraryCreateInfoKHR over the libraries `o` names, which
 * build_libraries made. */
int kiln__fb_library_info(struct build *c, struct json_object *o,
                          VkPipelineLibraryCreateInfoKHR **out)
{
    KILN_TRY(kiln__fb_need(c, 0, X_PIPELINE_LIBRARY, -1, "linking pipeline libraries"));
    struct json_object *libs = get(o, "libraries");
    VkPipelineLibraryCreateInfoKHR *i = kiln__fb_alloc(c, sizeof(*i));
    VkPipeline *h = kiln__fb_alloc(c, (len(libs) ? len(libs) : 1) * sizeof(*h));
    if (!i || !h)
        return KILN_ENOMEM;
    for (uint32_t k = 0; k < len(libs); k++) {
        uint64_t hash;
        if (!kiln__fb_hash_of(at(libs, k), &hash))
            return kiln__fb_fail(c, KILN_EPARSE, "a pipeline library is not named by a hash");
        uint32_t m = 0;
        while (m < c->nlibs && c->libs[m].hash != hash)
            m++;
        if (m == c->nlibs)
            return kiln__fb_fail(c, KILN_EPARSE, "the pipeline library %016" PRIx64 " was not made",
                                 hash);
        h[k] = c->libs[m].pipeline;
    }
    i->sType = VK_STRUCTURE_TYPE_PIPELINE_LIBRARY_CREATE_INFO_KHR;
    i->libraryCount = len(libs);
    i->pLibraries = h;
    *out = i;
    return KILN_OK;
}

/* ---------------------------------------------------------------------------
 * Create, stats, destroy
 * ------------------------------------------------------------------------ */

static void copy_features(struct kiln_foz_builder *b, const VkPhysicalDeviceFeatures2 *f2)
{
    if (!f2)
        return;
    b->feat.known = true;
    b->feat.f = f2->features;
    for (const VkBaseInStructure *s = f2->pNext; s; s = s->pNext) {
        if (s->sType == VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES)
            b->feat.ycbcr |= ((const VkPhysicalDeviceVulkan11Features *)s)->samplerYcbcrConversion;
        else if (s->sType == VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_3_FEATURES)
            b->feat.dynamic_rendering |=
                ((const VkPhysicalDeviceVulkan13Features *)s)->dynamicRendering;
        else if (s->sType == VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SAMPLER_YCBCR_CONVERSION_FEATURES)
            b->feat.ycbcr |=
                ((const VkPhysicalDeviceSamplerYcbcrConversionFeatures *)s)->samplerYcbcrConversion;
        else if (s->sType == VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DYNAMIC_RENDERING_FEATURES)
            b->feat.dynamic_rendering |=
                ((const VkPhysicalDeviceDynamicRenderingFeatures *)s)->dynamicRendering;
        else if (s->sType ==
                 VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_GRAPHICS_PIPELINE_LIBRARY_FEATURES_EXT)
            b->feat.gpl |= ((const VkPhysicalDeviceGraphicsPipelineLibraryFeaturesEXT *)s)
                               ->graphicsPipelineLibrary;
        else if (s->sType == VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_RAY_TRACING_PIPELINE_FEATURES_KHR)
            b->feat.rt |=
                ((const VkPhysicalDeviceRayTracingPipelineFeaturesKHR *)s)->rayTracingPipeline;
    }
}

int kiln_foz_builder_create(const struct kiln_foz_builder_options *options,
                            struct kiln_foz_builder **out)
{
    if (!options || !out)
        return KILN_EINVAL;
    *out = NULL;
    struct kiln_foz_builder_options own;
    KILN_TRY(KILN_STRUCT_IN(&own, options, "kiln_foz_builder_options"));
    const struct kiln_foz_builder_options *o = &own;
    if (!o->device || !o->get_device_proc_addr)
        return KILN_EINVAL;
    struct kiln_foz_builder *b = kiln__calloc(1, sizeof(*b));
    static atomic_ullong next_id;
    if (b)
        b->id = atomic_fetch_add(&next_id, 1) + 1;
    if (!b)
        return KILN_ENOMEM;
    b->device = o->device;
    b->alloc = o->allocator;
    b->api = o->api_version ? o->api_version : VK_API_VERSION_1_0;
    for (uint32_t i = 0; i < o->extension_count; i++)
        for (int x = 0; x < X_COUNT; x++)
            if (o->extensions[i] && strcmp(o->extensions[i], ext_name[x]) == 0)
                b->ext[x] = true;
    copy_features(b, o->features);
    b->creation_feedback = b->api >= VK_API_VERSION_1_3;
    for (uint32_t i = 0; i < o->extension_count; i++)
        if (o->extensions[i] && strcmp(o->extensions[i], "VK_EXT_pipeline_creation_feedback") == 0)
            b->creation_feedback = true;
    b->max_recursion = o->max_ray_recursion_depth;
    if (o->limits)
        kiln_foz_limits_from_vk(o->limits, &b->limits);
    else
        kiln_foz_limits_bound(&b->limits);

#define LOAD(name, text) b->vk.name = (PFN_vk##name)o->get_device_proc_addr(o->device, text)
    LOAD(CreateSampler, "vkCreateSampler");
    LOAD(DestroySampler, "vkDestroySampler");
    LOAD(CreateDescriptorSetLayout, "vkCreateDescriptorSetLayout");
    LOAD(DestroyDescriptorSetLayout, "vkDestroyDescriptorSetLayout");
    LOAD(CreatePipelineLayout, "vkCreatePipelineLayout");
    LOAD(DestroyPipelineLayout, "vkDestroyPipelineLayout");
    LOAD(CreateRenderPass, "vkCreateRenderPass");
    LOAD(DestroyRenderPass, "vkDestroyRenderPass");
    LOAD(CreateGraphicsPipelines, "vkCreateGraphicsPipelines");
    LOAD(CreateComputePipelines, "vkCreateComputePipelines");
    LOAD(DestroyPipeline, "vkDestroyPipeline");
    if (b->ext[X_RT_PIPELINE])
        LOAD(CreateRayTracingPipelinesKHR, "vkCreateRayTracingPipelinesKHR");
    /* The core name where the version has it, else the extension's, so
     * that neither is asked of a device that does not offer it. */
    if (version_at_least(b, 1)) {
        LOAD(CreateSamplerYcbcrConversion, "vkCreateSamplerYcbcrConversion");
        LOAD(DestroySamplerYcbcrConversion, "vkDestroySamplerYcbcrConversion");
    } else if (b->ext[X_YCBCR]) {
        LOAD(CreateSamplerYcbcrConversion, "vkCreateSamplerYcbcrConversionKHR");
        LOAD(DestroySamplerYcbcrConversion, "vkDestroySamplerYcbcrConversionKHR");
    }
    if (version_at_least(b, 2))
        LOAD(CreateRenderPass2, "vkCreateRenderPass2");
    else if (b->ext[X_CREATE_RENDERPASS2])
        LOAD(CreateRenderPass2, "vkCreateRenderPass2KHR");
#undef LOAD
    if (!b->vk.CreateSampler || !b->vk.DestroySampler || !b->vk.CreateDescriptorSetLayout ||
        !b->vk.DestroyDescriptorSetLayout || !b->vk.CreatePipelineLayout ||
        !b->vk.DestroyPipelineLayout || !b->vk.CreateRenderPass || !b->vk.DestroyRenderPass ||
        !b->vk.CreateGraphicsPipelines || !b->vk.CreateComputePipelines || !b->vk.DestroyPipeline) {
        kiln__free(b);
        return KILN_ENOTSUP;
    }
    if (pthread_mutex_init(&b->lock, NULL) != 0) {
        kiln__free(b);
        return KILN_ENOMEM;
    }
    *out = b;
    return KILN_OK;
}

void kiln_foz_builder_get_stats(const struct kiln_foz_builder *b, struct kiln_foz_builder_stats *s)
{
    if (!b || !s || kiln__struct_out_check(s, "kiln_foz_builder_stats") < 0)
        return;
    struct kiln_foz_builder *m = (struct kiln_foz_builder *)b;
    struct kiln_foz_builder_stats st = KILN_FOZ_BUILDER_STATS_INIT;
    memset(&st, 0, sizeof(st));
    st.size = sizeof(st);
    for (int k = 0; k < KILN_FOZ_KIND_COUNT; k++) {
        st.built[k] = atomic_load(&m->built[k]);
        st.skipped[k] = atomic_load(&m->skipped[k]);
        st.failed[k] = atomic_load(&m->failed[k]);
    }
    st.objects = atomic_load(&m->objects);
    st.derivatives_standalone = atomic_load(&m->standalone);
    KILN_STRUCT_OUT(s, &st);
}

void kiln_foz_builder_destroy(struct kiln_foz_builder *b)
{
    if (!b)
        return;
    /* Pipeline layouts and render passes first, then the set layouts, then
     * the samplers their immutable bindings name. */
    static const uint64_t order[] = {KILN_FOZ_TAG_PIPELINE_LAYOUT, KILN_FOZ_TAG_RENDER_PASS,
                                     KILN_FOZ_TAG_DESCRIPTOR_SET_LAYOUT, KILN_FOZ_TAG_SAMPLER};
    for (size_t k = 0; k < KILN_ARRAY_LEN(order); k++)
        for (unsigned i = 0; i < SHARED_BUCKETS; i++)
            for (struct shared *s = b->table[i]; s; s = s->next)
                if (s->tag == order[k])
                    destroy_object(b, s->tag, s->h, s->ycbcr);
    for (unsigned i = 0; i < SHARED_BUCKETS; i++) {
        while (b->table[i]) {
            struct shared *s = b->table[i];
            b->table[i] = s->next;
            kiln__free(s);
        }
    }
    pthread_mutex_destroy(&b->lock);
    kiln__free(b);
}
