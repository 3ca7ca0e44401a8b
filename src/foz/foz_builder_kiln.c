/*
 * foz_builder_kiln.c - the Fossilize builder as one of kiln's builders
 * (kiln/prep.h: struct kiln_builder of state kind KILN_STATE_FOZ).
 *
 * Design. kiln's requests name the device only when they come, so the
 * Fossilize builder is made on the first request, under a mutex, and kept
 * for every later one; a request on another device is refused rather than
 * built with objects of the first. The request's stages already follow the
 * program's stage order, which the import made the closure's recorded
 * order, so they are handed on as they are. At the end of each pipeline
 * phase (kiln_builder.finish) the Fossilize builder and its shared objects
 * are destroyed while the device still lives, their counts kept, and the
 * next phase makes a new one on its own device. Compiled only once the core
 * has builders (KILN_STATE_KINDS, kiln/pack.h).
 */
#define VK_NO_PROTOTYPES
#include <vulkan/vulkan.h>

#include "foz_link.h"
#include "foz_state_private.h"
#include "kiln/vk.h"

#if defined(KILN_STATE_KINDS)

#include <pthread.h>

struct adapter {
    pthread_mutex_t lock;
    struct kiln_foz_builder_options options;
    bool have_options_device;
    struct kiln_foz_builder *b;
    VkDevice device;
    int create_rc;
    /* What builders released by finish() counted. */
    struct kiln_foz_builder_stats done;
    /* kiln's device's features, when `options` gives none (make_builder). */
    VkPhysicalDeviceFeatures2 f2;
    VkPhysicalDeviceVulkan13Features f13;
    VkPhysicalDeviceGraphicsPipelineLibraryFeaturesEXT gpl;
    VkPhysicalDeviceRayTracingPipelineFeaturesKHR rt;
    VkPhysicalDeviceSamplerYcbcrConversionFeatures ycbcr;
    /* kiln's device's limits, when `options` gives none (make_builder). */
    VkPhysicalDeviceProperties props;
};

/* The extensions the builder asks kiln's context for (kiln_builder.device_extensions). */
static const char *const foz_extensions[] = {KILN_FOZ_DEVICE_EXTENSIONS};

/* Their bits in extensions_needed's answer, in KILN_FOZ_DEVICE_EXTENSIONS's
 * order: the two library extensions, the state ones (the shared ones
 * first), then the ray-tracing set. */
#define EXT_COUNT            ((uint32_t)KILN_ARRAY_LEN(foz_extensions))
#define EXT_ALL              ((UINT64_C(1) << EXT_COUNT) - 1u)
#define EXT_PIPELINE_LIBRARY UINT64_C(1)
#define EXT_GRAPHICS_LIBRARY (UINT64_C(1) << 1)
#define EXT_RAY_TRACING \
    (EXT_ALL & ~((UINT64_C(1) << (EXT_COUNT - KILN_FOZ_RAYTRACING_EXTENSION_COUNT)) - 1u))
#define EXT_SHARED   (((UINT64_C(1) << KILN_FOZ_SHARED_EXTENSION_COUNT) - 1u) << 2)
#define EXT_GRAPHICS (EXT_ALL & ~EXT_RAY_TRACING & ~EXT_PIPELINE_LIBRARY & ~EXT_GRAPHICS_LIBRARY)
_Static_assert(KILN_ARRAY_LEN(foz_extensions) <= 64, "one bit each in extensions_needed");

/*
 * kiln_builder.extensions_needed: which extensions a closure's pipeline
 * may need, told by its kind alone, read from the closure's first bytes
 * (no JSON parse). A graphics pipeline gets the two library extensions
 * and every state one, whether or not it uses them: telling would mean
 * parsing every closure, and the library ones cost nothing measurable (an
 * NVIDIA H200's replay of the corpus peaked at 130 MiB with and without
 * them; the state ones are not measured there yet). A compute pipeline gets the shared ones
 * (samplers, descriptor indexing, subgroup sizes). A ray-tracing pipeline gets the ray-tracing set,
 * the shared ones and VK_KHR_pipeline_library (for its libraries, which its kind does not tell
 * without a parse); nothing else gets the ray-tracing set, which costs the driver much memory.
 * Bytes that do not start as kiln writes closures get every one (the build parses them and says
 * why).
 */
static uint64_t extensions_needed(void *user, const void *state, size_t size)
{
    (void)user;
    switch (kiln__foz_closure_peek_tag(state, size)) {
    case KILN_FOZ_TAG_GRAPHICS_PIPELINE:
        return EXT_PIPELINE_LIBRARY | EXT_GRAPHICS_LIBRARY | EXT_GRAPHICS;
    case KILN_FOZ_TAG_COMPUTE_PIPELINE:
        return EXT_SHARED;
    case KILN_FOZ_TAG_RAYTRACING_PIPELINE:
        return EXT_PIPELINE_LIBRARY | EXT_SHARED | EXT_RAY_TRACING;
    default:
        return EXT_ALL;
    }
}

/* An instance-level function for vk's physical device, with its handles in
 * *h. @return NULL when it cannot be reached (no loader entry point, no
 * physical device, or the loader does not know the name). */
static PFN_vkVoidFunction instance_fn(const struct kiln_vk *vk, const char *name,
                                      struct kiln_vk_handles *h)
{
    kiln_vk_get_handles(vk, h);
    if (!h->get_instance_proc_addr || !h->physical_device)
        return NULL;
    return h->get_instance_proc_addr(h->instance, name);
}

/*
 * The features kiln's context enables: every core feature of the physical
 * device but robustBufferAccess (vk_context.c), dynamic rendering as
 * kiln_vk_get_info says, the one feature of the library and ray-tracing
 * extensions it enabled (graphicsPipelineLibrary, rayTracingPipeline:
 * vk_context.c enables those only with it), and samplerYcbcrConversion
 * where VK_KHR_sampler_ycbcr_conversion is enabled and the device reports
 * it (vk_context.c enables every reported feature of that extension). The
 * other state extensions' pNext structures are checked by extension.
 * @return them, in the adapter, or NULL (nothing checked) when the
 * function cannot be reached.
 */
static const VkPhysicalDeviceFeatures2 *
kiln_device_features(struct adapter *a, const struct kiln_vk *vk, const struct kiln_vk_info *info)
{
    struct kiln_vk_handles h = KILN_VK_HANDLES_INIT;
    PFN_vkGetPhysicalDeviceFeatures get =
        (PFN_vkGetPhysicalDeviceFeatures)instance_fn(vk, "vkGetPhysicalDeviceFeatures", &h);
    if (!get)
        return NULL;
    a->f2 = (VkPhysicalDeviceFeatures2){.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
    get(h.physical_device, &a->f2.features);
    a->f2.features.robustBufferAccess = VK_FALSE;
    a->f13 = (VkPhysicalDeviceVulkan13Features){
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_3_FEATURES,
        .dynamicRendering = info && info->dynamic_rendering};
    a->gpl = (VkPhysicalDeviceGraphicsPipelineLibraryFeaturesEXT){
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_GRAPHICS_PIPELINE_LIBRARY_FEATURES_EXT,
        .pNext = &a->f13,
        .graphicsPipelineLibrary =
            kiln_vk_extension_enabled(vk, "VK_EXT_graphics_pipeline_library")};
    a->rt = (VkPhysicalDeviceRayTracingPipelineFeaturesKHR){
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_RAY_TRACING_PIPELINE_FEATURES_KHR,
        .pNext = &a->gpl,
        .rayTracingPipeline = kiln_vk_extension_enabled(vk, "VK_KHR_ray_tracing_pipeline")};
    /* The rows of vk_context.c that enable every feature the device
     * reports with the extension: a feature is on when both are. */
    bool ycbcr = kiln_vk_extension_enabled(vk, "VK_KHR_sampler_ycbcr_conversion");
    a->ycbcr = (VkPhysicalDeviceSamplerYcbcrConversionFeatures){
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SAMPLER_YCBCR_CONVERSION_FEATURES};
    PFN_vkGetPhysicalDeviceFeatures2 get2 =
        (PFN_vkGetPhysicalDeviceFeatures2)h.get_instance_proc_addr(h.instance,
                                                                   "vkGetPhysicalDeviceFeatures2");
    if (ycbcr && get2) {
        VkPhysicalDeviceFeatures2 q = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2,
                                       .pNext = &a->ycbcr};
        get2(h.physical_device, &q);
    }
    a->ycbcr.samplerYcbcrConversion = ycbcr && get2 && a->ycbcr.samplerYcbcrConversion;
    a->ycbcr.pNext = &a->rt;
    a->f2.pNext = &a->ycbcr;
    return &a->f2;
}

/* The device's maxRayRecursionDepth, or 0 when it cannot be asked. */
static uint32_t max_recursion(const struct kiln_vk *vk)
{
    struct kiln_vk_handles h = KILN_VK_HANDLES_INIT;
    PFN_vkGetPhysicalDeviceProperties2 get =
        (PFN_vkGetPhysicalDeviceProperties2)instance_fn(vk, "vkGetPhysicalDeviceProperties2", &h);
    if (!get)
        return 0;
    VkPhysicalDeviceRayTracingPipelinePropertiesKHR rt = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_RAY_TRACING_PIPELINE_PROPERTIES_KHR};
    VkPhysicalDeviceProperties2 p2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2,
                                      .pNext = &rt};
    get(h.physical_device, &p2);
    return rt.maxRayRecursionDepth;
}

/* kiln's device's limits, in the adapter, or NULL when they cannot be asked
 * (then the builder checks against kiln's bounds). */
static const VkPhysicalDeviceLimits *kiln_device_limits(struct adapter *a, const struct kiln_vk *vk)
{
    struct kiln_vk_handles h = KILN_VK_HANDLES_INIT;
    PFN_vkGetPhysicalDeviceProperties get =
        (PFN_vkGetPhysicalDeviceProperties)instance_fn(vk, "vkGetPhysicalDeviceProperties", &h);
    if (!get)
        return NULL;
    get(h.physical_device, &a->props);
    return &a->props.limits;
}

/* Makes the Fossilize builder for the request's device. Called under the lock. */
static int make_builder(struct adapter *a, const struct kiln_build_request *req)
{
    struct kiln_foz_builder_options o = a->options;
    const char *exts[3 + KILN_ARRAY_LEN(foz_extensions)];
    if (!a->have_options_device) {
        /* Without kiln's context the device is taken as plain Vulkan 1.0. */
        const struct kiln_vk_info *info = req->vk ? kiln_vk_get_info(req->vk) : NULL;
        uint32_t n = 0;
        if (info && info->maintenance5)
            exts[n++] = "VK_KHR_maintenance5";
        if (info && info->dynamic_rendering && info->api_version < VK_API_VERSION_1_3)
            exts[n++] = "VK_KHR_dynamic_rendering";
        if (info && info->creation_feedback && info->api_version < VK_API_VERSION_1_3)
            exts[n++] = "VK_EXT_pipeline_creation_feedback";
        /* The extras kiln's context enabled because this builder asked. */
        for (size_t i = 0; req->vk && i < KILN_ARRAY_LEN(foz_extensions); i++)
            if (kiln_vk_extension_enabled(req->vk, foz_extensions[i]))
                exts[n++] = foz_extensions[i];
        if (req->vk && kiln_vk_extension_enabled(req->vk, "VK_KHR_ray_tracing_pipeline"))
            o.max_ray_recursion_depth = max_recursion(req->vk);
        o.device = req->device;
        o.get_device_proc_addr = req->get_device_proc_addr;
        o.allocator = kiln_vk_allocator(req->vk);
        /* kiln's instance asks for at most 1.3, so the device is used as that. */
        o.api_version = !info                                    ? VK_API_VERSION_1_0
                        : info->api_version > VK_API_VERSION_1_3 ? VK_API_VERSION_1_3
                                                                 : info->api_version;
        o.extensions = exts;
        o.extension_count = n;
        if (!o.features && req->vk)
            o.features = kiln_device_features(a, req->vk, info);
        if (!o.limits && req->vk)
            o.limits = kiln_device_limits(a, req->vk);
    }
    return kiln_foz_builder_create(&o, &a->b);
}

static int build(void *user, struct kiln_build_request *req)
{
    struct adapter *a = user;
    pthread_mutex_lock(&a->lock);
    if (!a->b && a->create_rc == 0) {
        a->create_rc = make_builder(a, req);
        a->device = req->device;
    }
    int rc = a->create_rc;
    struct kiln_foz_builder *b = a->b;
    bool same = a->device == req->device;
    pthread_mutex_unlock(&a->lock);
    if (rc < 0) {
        snprintf(req->why, sizeof(req->why), "the Fossilize builder could not be made: %s",
                 kiln_strerror(rc));
        return rc;
    }
    if (!same) {
        snprintf(req->why, sizeof(req->why), "the Fossilize builder serves another device");
        return KILN_EINVAL;
    }
    struct kiln_foz_build d = {.size = sizeof(d),
                               .closure = req->state,
                               .closure_size = req->state_size,
                               .stages = req->stages,
                               .stage_count = req->nstages,
                               .cache = req->pipeline_cache,
                               .flags =
                                   req->flags & KILN_BUILD_PROBE ? KILN_FOZ_BUILD_NO_COMPILE : 0,
                               .why = req->why,
                               .why_cap = sizeof(req->why)};
    /* Fast-link: only on kiln's own context, whose device this builder's is. */
    struct kiln__fb_link link = {.vk = req->vk,
                                 .parts_only = (req->link & KILN_BUILD_LINK_PARTS) != 0};
    if (link.parts_only && !req->vk)
        return KILN_ENOTSUP; /* parts need kiln's parts table */
    /* The host tier (KILN_BUILDER_BINARIES): its binaries or capture flags. */
    struct kiln__fb_tier tier = {.flags2 = req->tier_flags2, .binaries = req->tier_binaries};
    rc = kiln__foz_builder_build_linked(
        b, &d,
        req->vk && (req->link & (KILN_BUILD_LINK_FAST | KILN_BUILD_LINK_PARTS)) ? &link : NULL,
        &tier);
    req->tier_used = tier.used;
    req->pipeline = d.pipeline;
    req->feedback_valid = d.feedback_valid;
    req->feedback_cache_hit = d.cache_hit;
    req->feedback_driver_ns = d.driver_ns;
    req->linked = link.linked;
    req->parts_built = link.parts_built;
    req->parts_reused = link.parts_reused;
    return rc;
}

/* The end of a pipeline phase: the device may be destroyed next, so the
 * Fossilize builder's shared objects go now; its counts are kept. */
static void finish(void *user)
{
    struct adapter *a = user;
    pthread_mutex_lock(&a->lock);
    if (a->b) {
        struct kiln_foz_builder_stats st = KILN_FOZ_BUILDER_STATS_INIT;
        kiln_foz_builder_get_stats(a->b, &st);
        for (int k = 0; k < KILN_FOZ_KIND_COUNT; k++) {
            a->done.built[k] += st.built[k];
            a->done.skipped[k] += st.skipped[k];
            a->done.failed[k] += st.failed[k];
        }
        a->done.objects += st.objects;
        a->done.derivatives_standalone += st.derivatives_standalone;
        kiln_foz_builder_destroy(a->b);
    }
    a->b = NULL;
    a->device = VK_NULL_HANDLE;
    a->create_rc = 0;
    pthread_mutex_unlock(&a->lock);
}

int kiln_foz_kiln_builder_create(const struct kiln_foz_builder_options *options,
                                 struct kiln_builder *out)
{
    if (!out)
        return KILN_EINVAL;
    memset(out, 0, sizeof(*out));
    out->size = sizeof(*out);
    struct adapter *a = kiln__calloc(1, sizeof(*a));
    if (!a)
        return KILN_ENOMEM;
    /* Growable: NULL gives the defaults, with this library's size. */
    int rc = KILN_STRUCT_IN(&a->options, options, "kiln_foz_builder_options");
    if (rc < 0) {
        kiln__free(a);
        return rc;
    }
    a->have_options_device = a->options.device != VK_NULL_HANDLE;
    if (pthread_mutex_init(&a->lock, NULL) != 0) {
        kiln__free(a);
        return KILN_ENOMEM;
    }
    out->kind = KILN_STATE_FOZ;
    out->user = a;
    out->build = build;
    out->name = "foz";
    out->finish = finish;
    /* An archive's modules were recorded from a running application: only
     * what does not parse is refused (docs/foz.md). */
    out->flags = KILN_BUILDER_RECORDED_SPIRV | KILN_BUILDER_BINARIES;
    /* Pipeline libraries, state structures and ray tracing, where the
     * device has them. */
    out->device_extensions = foz_extensions;
    out->ndevice_extensions = KILN_ARRAY_LEN(foz_extensions);
    /* Only those the run's closures need: ray tracing costs the driver
     * much memory (docs/foz.md). */
    out->extensions_needed = extensions_needed;
    return KILN_OK;
}

void kiln_foz_kiln_builder_stats(const struct kiln_builder *builder,
                                 struct kiln_foz_builder_stats *stats)
{
    if (!builder || !stats || kiln__struct_out_check(stats, "kiln_foz_builder_stats") < 0)
        return;
    struct kiln_foz_builder_stats sum = KILN_FOZ_BUILDER_STATS_INIT;
    memset(&sum, 0, sizeof(sum));
    struct adapter *a = builder->user;
    if (a) {
        pthread_mutex_lock(&a->lock);
        sum = a->done;
        if (a->b) {
            struct kiln_foz_builder_stats st = KILN_FOZ_BUILDER_STATS_INIT;
            kiln_foz_builder_get_stats(a->b, &st);
            for (int k = 0; k < KILN_FOZ_KIND_COUNT; k++) {
                sum.built[k] += st.built[k];
                sum.skipped[k] += st.skipped[k];
                sum.failed[k] += st.failed[k];
            }
            sum.objects += st.objects;
            sum.derivatives_standalone += st.derivatives_standalone;
        }
        pthread_mutex_unlock(&a->lock);
    }
    sum.size = sizeof(sum);
    KILN_STRUCT_OUT(stats, &sum);
}

void kiln_foz_kiln_builder_destroy(struct kiln_builder *builder)
{
    if (!builder || !builder->user)
        return;
    struct adapter *a = builder->user;
    kiln_foz_builder_destroy(a->b);
    pthread_mutex_destroy(&a->lock);
    kiln__free(a);
    memset(builder, 0, sizeof(*builder));
    builder->size = sizeof(*builder);
}

struct kiln_foz_builder *kiln_foz_kiln_builder_get(const struct kiln_builder *builder)
{
    if (!builder)
        return NULL;
    struct adapter *a = builder ? builder->user : NULL;
    if (!a)
        return NULL;
    pthread_mutex_lock(&a->lock);
    struct kiln_foz_builder *b = a->b;
    pthread_mutex_unlock(&a->lock);
    return b;
}

int kiln__default_builder_create(uint32_t kind, struct kiln_builder *out)
{
    memset(out, 0, sizeof(*out));
    if (kind != KILN_STATE_FOZ)
        return 0;
    int rc = kiln_foz_kiln_builder_create(NULL, out);
    return rc < 0 ? rc : 1;
}

void kiln__default_builder_destroy(struct kiln_builder *b)
{
    kiln_foz_kiln_builder_destroy(b);
}

#else

/* Until the core has builders there is nothing to adapt to: ISO C wants a
 * translation unit to declare something. */
typedef int kiln__foz_builder_kiln_unused;

#endif /* KILN_STATE_KINDS */
