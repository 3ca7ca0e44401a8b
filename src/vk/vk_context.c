/*
 * vk_context.c - the Vulkan context: loader, instance, device choice,
 * device, the shared pipeline layout.
 *
 * Design. Everything a pipeline build needs is made once here and then only
 * read, so builds on many threads share the context without locks (the
 * pipeline cache is internally synchronised by Vulkan; the object lists and
 * render passes have their own mutex). Optional features are probed, never
 * assumed: maintenance5 and dynamic rendering are enabled only when the
 * device reports both the extension (or core version) and the feature bit,
 * and info records what was enabled so the pipeline code takes the matching
 * path. Every core 1.0 feature the device has is enabled, robustBufferAccess
 * aside (it costs every buffer access), so that a builder's recorded
 * pipelines (tessellation, geometry, wide lines, ...) are valid on it; the
 * Fossilize builder (src/foz) assumes exactly this set. A caller's extra
 * extensions (kiln_vk_options.extra_extensions) follow the same rule: each
 * is enabled only when offered, with the extensions it depends on; one
 * with a feature structure (extra_rows, one row each) gets every feature
 * the device reports for it (the library and ray-tracing rows only their
 * one), so asking for one a device lacks never fails the context. The
 * chain holds each structure type once and no VkPhysicalDeviceVulkanXY
 * Features, so promoted structures are valid in it. The names enabled are
 * kept for kiln_vk_extension_enabled.
 * Any failure part-way goes through
 * kiln_vk_destroy, which copes with a half-made context because every handle starts null.
 */
#include "vk_internal.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define VK_MODULE "vk"

static bool has_ext(const VkExtensionProperties *exts, uint32_t n, const char *name)
{
    for (uint32_t i = 0; i < n; i++)
        if (strcmp(exts[i].extensionName, name) == 0)
            return true;
    return false;
}

/* Logs why Vulkan cannot be used; @return KILN_ENOTSUP. */
static int KILN_PRINTF(1, 2) not_available(const char *fmt, ...)
{
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    KILN_WARN(VK_MODULE, "Vulkan not available: %s", line);
    return KILN_ENOTSUP;
}

static int load_instance_fns(struct kiln_vk *vk)
{
#define LOAD_INSTANCE(name)                                                      \
    vk->fn.name = (PFN_##name)vk->fn.vkGetInstanceProcAddr(vk->instance, #name); \
    if (!vk->fn.name) {                                                          \
        KILN_ERROR(VK_MODULE, "the Vulkan instance lacks %s", #name);            \
        return KILN_EVULKAN;                                                     \
    }
    KILN_VK_INSTANCE_FNS(LOAD_INSTANCE)
#undef LOAD_INSTANCE
    return KILN_OK;
}

static int load_device_fns(struct kiln_vk *vk)
{
#define LOAD_DEVICE(name)                                                    \
    vk->fn.name = (PFN_##name)vk->fn.vkGetDeviceProcAddr(vk->device, #name); \
    if (!vk->fn.name) {                                                      \
        KILN_ERROR(VK_MODULE, "the Vulkan device lacks %s", #name);          \
        return KILN_EVULKAN;                                                 \
    }
    KILN_VK_DEVICE_FNS(LOAD_DEVICE)
#undef LOAD_DEVICE
    return KILN_OK;
}

static int make_instance(struct kiln_vk *vk, const char *loader)
{
    char why[512];
    vk->fn.vkGetInstanceProcAddr = kiln__vk_load(loader, why, sizeof(why));
    if (!vk->fn.vkGetInstanceProcAddr)
        return not_available("%s", why);
#define LOAD_GLOBAL(name) \
    vk->fn.name = (PFN_##name)vk->fn.vkGetInstanceProcAddr(VK_NULL_HANDLE, #name);
    KILN_VK_GLOBAL_FNS(LOAD_GLOBAL)
#undef LOAD_GLOBAL
    if (!vk->fn.vkCreateInstance || !vk->fn.vkEnumerateInstanceExtensionProperties)
        return not_available("%s", "the loader lacks vkCreateInstance");
    uint32_t version = VK_API_VERSION_1_0;
    if (vk->fn.vkEnumerateInstanceVersion)
        vk->fn.vkEnumerateInstanceVersion(&version);
    if (version < VK_API_VERSION_1_1)
        return not_available("%s", "the loader offers Vulkan 1.0; kiln needs 1.1");

    uint32_t next = 0;
    vk->fn.vkEnumerateInstanceExtensionProperties(NULL, &next, NULL);
    VkExtensionProperties *exts = kiln__calloc(next ? next : 1, sizeof(*exts));
    if (!exts)
        return KILN_ENOMEM;
    vk->fn.vkEnumerateInstanceExtensionProperties(NULL, &next, exts);
    bool portability = has_ext(exts, next, "VK_KHR_portability_enumeration");
    kiln__free(exts);

    const char *enabled[1];
    uint32_t nenabled = 0;
    VkInstanceCreateFlags flags = 0;
    if (portability) {
        /* Lists drivers that implement Vulkan over another API (MoltenVK). */
        enabled[nenabled++] = "VK_KHR_portability_enumeration";
        flags |= 0x00000001; /* VK_INSTANCE_CREATE_ENUMERATE_PORTABILITY_BIT_KHR */
    }
    VkApplicationInfo app = {
        .sType = VK_STRUCTURE_TYPE_APPLICATION_INFO,
        .pApplicationName = "kiln",
        .applicationVersion =
            VK_MAKE_API_VERSION(0, KILN_VERSION_MAJOR, KILN_VERSION_MINOR, KILN_VERSION_PATCH),
        .pEngineName = "kiln",
        .engineVersion =
            VK_MAKE_API_VERSION(0, KILN_VERSION_MAJOR, KILN_VERSION_MINOR, KILN_VERSION_PATCH),
        .apiVersion = KILN_MIN(version, VK_API_VERSION_1_3),
    };
    VkInstanceCreateInfo ci = {
        .sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
        .flags = flags,
        .pApplicationInfo = &app,
        .enabledExtensionCount = nenabled,
        .ppEnabledExtensionNames = enabled,
    };
    VkResult res = vk->fn.vkCreateInstance(&ci, vk->alloc, &vk->instance);
    if (res == VK_ERROR_INCOMPATIBLE_DRIVER || res == VK_ERROR_INITIALIZATION_FAILED)
        return not_available("vkCreateInstance: %s (no usable driver)", kiln_vk_result_name(res));
    if (res != VK_SUCCESS) {
        KILN_ERROR(VK_MODULE, "vkCreateInstance failed: %s", kiln_vk_result_name(res));
        vk->instance = VK_NULL_HANDLE;
        return KILN_EVULKAN;
    }
    kiln__vk_keep_drivers_loaded();
    return load_instance_fns(vk);
}

/* @return the index of a graphics+compute queue family, or UINT32_MAX. */
static uint32_t find_queue_family(struct kiln_vk *vk, VkPhysicalDevice pd)
{
    uint32_t n = 0;
    vk->fn.vkGetPhysicalDeviceQueueFamilyProperties(pd, &n, NULL);
    VkQueueFamilyProperties *q = kiln__calloc(n ? n : 1, sizeof(*q));
    if (!q)
        return UINT32_MAX;
    vk->fn.vkGetPhysicalDeviceQueueFamilyProperties(pd, &n, q);
    uint32_t found = UINT32_MAX;
    const VkQueueFlags want = VK_QUEUE_GRAPHICS_BIT | VK_QUEUE_COMPUTE_BIT;
    for (uint32_t i = 0; i < n && found == UINT32_MAX; i++)
        if ((q[i].queueFlags & want) == want && q[i].queueCount > 0)
            found = i;
    kiln__free(q);
    return found;
}

static bool usable(struct kiln_vk *vk, VkPhysicalDevice pd)
{
    VkPhysicalDeviceProperties p;
    vk->fn.vkGetPhysicalDeviceProperties(pd, &p);
    return p.apiVersion >= VK_API_VERSION_1_1 && find_queue_family(vk, pd) != UINT32_MAX;
}

static int choose_device(struct kiln_vk *vk, const struct kiln_vk_options *opt)
{
    uint32_t n = 0;
    VkResult res = vk->fn.vkEnumeratePhysicalDevices(vk->instance, &n, NULL);
    if (res != VK_SUCCESS && res != VK_INCOMPLETE)
        return not_available("vkEnumeratePhysicalDevices: %s", kiln_vk_result_name(res));
    if (n == 0)
        return not_available("%s", "no Vulkan device");
    VkPhysicalDevice *pds = kiln__calloc(n, sizeof(*pds));
    if (!pds)
        return KILN_ENOMEM;
    vk->fn.vkEnumeratePhysicalDevices(vk->instance, &n, pds);
    vk->info.device_count = n;

    uint32_t pick = UINT32_MAX;
    if (opt->use_device_index) {
        if (opt->device >= n) {
            KILN_ERROR(VK_MODULE, "device %u asked for, but there %s %u (0..%u)", opt->device,
                       n == 1 ? "is" : "are", n, n - 1);
            kiln__free(pds);
            return KILN_EINVAL;
        }
        if (!usable(vk, pds[opt->device])) {
            KILN_ERROR(VK_MODULE, "device %u has no graphics+compute queue or is below Vulkan 1.1",
                       opt->device);
            kiln__free(pds);
            return KILN_ENOTSUP;
        }
        pick = opt->device;
    } else {
        for (uint32_t i = 0; i < n && pick == UINT32_MAX; i++) {
            VkPhysicalDeviceProperties p;
            vk->fn.vkGetPhysicalDeviceProperties(pds[i], &p);
            if (p.deviceType == VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU && usable(vk, pds[i]))
                pick = i;
        }
        for (uint32_t i = 0; i < n && pick == UINT32_MAX; i++)
            if (usable(vk, pds[i]))
                pick = i;
    }
    if (pick == UINT32_MAX) {
        kiln__free(pds);
        return not_available("%s", "no device with a graphics+compute queue and Vulkan 1.1");
    }
    vk->phys = pds[pick];
    vk->info.device_index = pick;
    vk->queue_family = find_queue_family(vk, vk->phys);
    kiln__free(pds);
    return KILN_OK;
}

static void read_properties(struct kiln_vk *vk)
{
    VkPhysicalDeviceProperties p;
    vk->fn.vkGetPhysicalDeviceProperties(vk->phys, &p);
    struct kiln_vk_info *in = &vk->info;
    snprintf(in->device_name, sizeof(in->device_name), "%s", p.deviceName);
    in->vendor_id = p.vendorID;
    in->device_id = p.deviceID;
    in->api_version = p.apiVersion;
    in->driver_version = p.driverVersion;
    in->discrete = p.deviceType == VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU;
    memcpy(in->pipeline_cache_uuid, p.pipelineCacheUUID, VK_UUID_SIZE);
    if (p.apiVersion >= VK_API_VERSION_1_2) {
        VkPhysicalDeviceDriverProperties drv = {
            .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES};
        VkPhysicalDeviceProperties2 p2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2,
                                          .pNext = &drv};
        vk->fn.vkGetPhysicalDeviceProperties2(vk->phys, &p2);
        snprintf(in->driver_info, sizeof(in->driver_info), "%.120s %.120s", drv.driverName,
                 drv.driverInfo);
    }
}

/*
 * The extra extensions kiln knows a feature structure for, one row each.
 * `feat` is the structure queried and enabled with it; `also`, a second
 * one (a promoted feature it needs: acceleration structures need
 * bufferDeviceAddress). With `required`, the extension is left out unless
 * that feature is reported. A `minimal` row enables only the required
 * feature (the ray-tracing and library rows: their optional features,
 * capture/replay and the like, cost driver memory); any other row enables
 * every feature the device reports for it but the `clear` ones (those
 * whose valid use needs a feature of an extension kiln may not enable).
 * `core`: the API version its own dependencies need (core there); `deps`:
 * extensions that must be enabled with it, earlier rows. kiln chains no
 * VkPhysicalDeviceVulkan11/12/13Features, only per-feature structures,
 * so a promoted structure here (descriptor indexing, subgroup size
 * control, multiview) is valid in VkDeviceCreateInfo's chain; each
 * structure type is chained at most once (pick_extras).
 */
struct feature {
    VkStructureType stype;
    size_t size;
    size_t required; /* offset of the VkBool32 that must be on; 0: none */
};

#define FEAT(T, S, F) \
    (&(const struct feature){.stype = (S), .size = sizeof(T), .required = offsetof(T, F)})
#define FEAT_ANY(T, S) (&(const struct feature){.stype = (S), .size = sizeof(T)})

struct extra_row {
    const char *name;
    const struct feature *feat;
    const struct feature *also;
    bool minimal;
    uint32_t core;
    const char *deps[2];
    size_t clear[2];
};

/* Features structures kiln's Vulkan headers may predate (same layout as
 * the EXT ones they were promoted from). */
#define STYPE_DIVISOR_FEATURES_KHR ((VkStructureType)1000525000)

static const struct extra_row extra_rows[] = {
    {.name = "VK_KHR_pipeline_library"},
    {.name = "VK_EXT_graphics_pipeline_library",
     .feat = FEAT(VkPhysicalDeviceGraphicsPipelineLibraryFeaturesEXT,
                  VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_GRAPHICS_PIPELINE_LIBRARY_FEATURES_EXT,
                  graphicsPipelineLibrary),
     .minimal = true,
     .deps = {"VK_KHR_pipeline_library"}},
    {.name = "VK_KHR_deferred_host_operations"},
    {.name = "VK_KHR_acceleration_structure",
     .feat = FEAT(VkPhysicalDeviceAccelerationStructureFeaturesKHR,
                  VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_ACCELERATION_STRUCTURE_FEATURES_KHR,
                  accelerationStructure),
     .also = FEAT(VkPhysicalDeviceBufferDeviceAddressFeatures,
                  VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_BUFFER_DEVICE_ADDRESS_FEATURES,
                  bufferDeviceAddress),
     .minimal = true,
     .core = VK_API_VERSION_1_2,
     .deps = {"VK_KHR_deferred_host_operations"}},
    {.name = "VK_KHR_ray_tracing_pipeline",
     .feat = FEAT(VkPhysicalDeviceRayTracingPipelineFeaturesKHR,
                  VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_RAY_TRACING_PIPELINE_FEATURES_KHR,
                  rayTracingPipeline),
     .minimal = true,
     .deps = {"VK_KHR_acceleration_structure"}},
    {.name = "VK_KHR_multiview",
     .feat = FEAT(VkPhysicalDeviceMultiviewFeatures,
                  VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MULTIVIEW_FEATURES, multiview)},
    {.name = "VK_KHR_sampler_ycbcr_conversion",
     .feat = FEAT(VkPhysicalDeviceSamplerYcbcrConversionFeatures,
                  VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SAMPLER_YCBCR_CONVERSION_FEATURES,
                  samplerYcbcrConversion)},
    {.name = "VK_KHR_separate_depth_stencil_layouts",
     .feat = FEAT(VkPhysicalDeviceSeparateDepthStencilLayoutsFeatures,
                  VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SEPARATE_DEPTH_STENCIL_LAYOUTS_FEATURES,
                  separateDepthStencilLayouts)},
    {.name = "VK_EXT_descriptor_indexing",
     .feat = FEAT_ANY(VkPhysicalDeviceDescriptorIndexingFeatures,
                      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DESCRIPTOR_INDEXING_FEATURES)},
    {.name = "VK_EXT_subgroup_size_control",
     .feat = FEAT_ANY(VkPhysicalDeviceSubgroupSizeControlFeatures,
                      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_FEATURES)},
    {.name = "VK_EXT_vertex_attribute_divisor",
     .feat = FEAT_ANY(VkPhysicalDeviceVertexAttributeDivisorFeaturesEXT,
                      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VERTEX_ATTRIBUTE_DIVISOR_FEATURES_EXT)},
    {.name = "VK_KHR_vertex_attribute_divisor",
     .feat =
         FEAT_ANY(VkPhysicalDeviceVertexAttributeDivisorFeaturesEXT, STYPE_DIVISOR_FEATURES_KHR)},
    {.name = "VK_EXT_depth_clip_enable",
     .feat =
         FEAT(VkPhysicalDeviceDepthClipEnableFeaturesEXT,
              VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DEPTH_CLIP_ENABLE_FEATURES_EXT, depthClipEnable)},
    {.name = "VK_EXT_transform_feedback",
     .feat = FEAT(VkPhysicalDeviceTransformFeedbackFeaturesEXT,
                  VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_TRANSFORM_FEEDBACK_FEATURES_EXT,
                  transformFeedback)},
    {.name = "VK_EXT_blend_operation_advanced",
     .feat = FEAT_ANY(VkPhysicalDeviceBlendOperationAdvancedFeaturesEXT,
                      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_BLEND_OPERATION_ADVANCED_FEATURES_EXT)},
    /* The KHR promotion shares the EXT structure's type. */
    {.name = "VK_EXT_line_rasterization",
     .feat = FEAT_ANY(VkPhysicalDeviceLineRasterizationFeaturesEXT,
                      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_LINE_RASTERIZATION_FEATURES_EXT)},
    {.name = "VK_KHR_line_rasterization",
     .feat = FEAT_ANY(VkPhysicalDeviceLineRasterizationFeaturesEXT,
                      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_LINE_RASTERIZATION_FEATURES_EXT)},
    {.name = "VK_EXT_color_write_enable",
     .feat =
         FEAT(VkPhysicalDeviceColorWriteEnableFeaturesEXT,
              VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COLOR_WRITE_ENABLE_FEATURES_EXT, colorWriteEnable)},
    {.name = "VK_EXT_provoking_vertex",
     .feat = FEAT_ANY(VkPhysicalDeviceProvokingVertexFeaturesEXT,
                      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROVOKING_VERTEX_FEATURES_EXT)},
    {.name = "VK_EXT_custom_border_color",
     .feat = FEAT(VkPhysicalDeviceCustomBorderColorFeaturesEXT,
                  VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_CUSTOM_BORDER_COLOR_FEATURES_EXT,
                  customBorderColors)},
    {.name = "VK_EXT_depth_clip_control",
     .feat =
         FEAT(VkPhysicalDeviceDepthClipControlFeaturesEXT,
              VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DEPTH_CLIP_CONTROL_FEATURES_EXT, depthClipControl)},
    {.name = "VK_EXT_extended_dynamic_state",
     .feat = FEAT(VkPhysicalDeviceExtendedDynamicStateFeaturesEXT,
                  VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_EXTENDED_DYNAMIC_STATE_FEATURES_EXT,
                  extendedDynamicState)},
    {.name = "VK_EXT_extended_dynamic_state2",
     .feat = FEAT(VkPhysicalDeviceExtendedDynamicState2FeaturesEXT,
                  VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_EXTENDED_DYNAMIC_STATE_2_FEATURES_EXT,
                  extendedDynamicState2)},
    {.name = "VK_EXT_extended_dynamic_state3",
     .feat = FEAT_ANY(VkPhysicalDeviceExtendedDynamicState3FeaturesEXT,
                      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_EXTENDED_DYNAMIC_STATE_3_FEATURES_EXT)},
    {.name = "VK_EXT_vertex_input_dynamic_state",
     .feat = FEAT(VkPhysicalDeviceVertexInputDynamicStateFeaturesEXT,
                  VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VERTEX_INPUT_DYNAMIC_STATE_FEATURES_EXT,
                  vertexInputDynamicState)},
    {.name = "VK_KHR_fragment_shading_rate",
     .feat = FEAT_ANY(VkPhysicalDeviceFragmentShadingRateFeaturesKHR,
                      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FRAGMENT_SHADING_RATE_FEATURES_KHR),
     .core = VK_API_VERSION_1_2},
    /* Mesh shading with multiview or a per-primitive shading rate needs
     * those features as well, which may be off: cleared. */
    {.name = "VK_EXT_mesh_shader",
     .feat = FEAT(VkPhysicalDeviceMeshShaderFeaturesEXT,
                  VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MESH_SHADER_FEATURES_EXT, meshShader),
     .core = VK_API_VERSION_1_2,
     .clear = {offsetof(VkPhysicalDeviceMeshShaderFeaturesEXT, multiviewMeshShader),
               offsetof(VkPhysicalDeviceMeshShaderFeaturesEXT,
                        primitiveFragmentShadingRateMeshShader)}},
    {.name = "VK_NV_mesh_shader",
     .feat = FEAT(VkPhysicalDeviceMeshShaderFeaturesNV,
                  VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MESH_SHADER_FEATURES_NV, meshShader)},
#ifdef VK_KHR_pipeline_binary
    /* The host tier of driver binaries (vk_binary.c): asked for by a run
     * with the tier on; it needs maintenance5, which kiln enables itself
     * where offered (vk_binary.c checks it is on). */
    {.name = VK_KHR_PIPELINE_BINARY_EXTENSION_NAME,
     .feat = FEAT(VkPhysicalDevicePipelineBinaryFeaturesKHR,
                  VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PIPELINE_BINARY_FEATURES_KHR, pipelineBinaries),
     .minimal = true},
#endif
};

#define EXTRA_ROWS KILN_ARRAY_LEN(extra_rows)

/* Room for one feature structure (the largest, extended dynamic state 3's, fits). */
#define FEATURE_BYTES 256
_Static_assert(sizeof(VkPhysicalDeviceExtendedDynamicState3FeaturesEXT) <= FEATURE_BYTES,
               "the largest feature structure fits");

/* The queried, then enabled, feature structures of the rows (make_device). */
struct extra_features {
    union {
        max_align_t align;
        unsigned char bytes[FEATURE_BYTES];
    } buf[EXTRA_ROWS][2];
    bool on[EXTRA_ROWS];
};

/* Whether the caller asked for extension `name` in its extra list. */
static bool asked(const struct kiln_vk_options *opt, const char *name)
{
    if (kiln__vk_library_wanted(opt, name))
        return true; /* pipeline libraries: wherever offered (vk_library.c) */
    for (uint32_t i = 0; i < opt->extra_extension_count; i++)
        if (opt->extra_extensions[i] && strcmp(opt->extra_extensions[i], name) == 0)
            return true;
    return false;
}

/* Appends `name` to the enabled list unless it is there. */
static int enable(struct kiln_vk *vk, const char *name)
{
    if (kiln_vk_extension_enabled(vk, name))
        return KILN_OK;
    if (vk->nextensions == KILN_VK_MAX_EXTENSIONS)
        return KILN_ERANGE;
    snprintf(vk->extensions[vk->nextensions++], VK_MAX_EXTENSION_NAME_SIZE, "%s", name);
    return KILN_OK;
}

static const struct feature *row_feature(const struct extra_row *r, int k)
{
    return k == 0 ? r->feat : r->also;
}

static VkBaseOutStructure *feature_buf(struct extra_features *x, uint32_t row, int k)
{
    return (VkBaseOutStructure *)x->buf[row][k].bytes;
}

static VkBool32 *feature_bool(struct extra_features *x, uint32_t row, int k, size_t offset)
{
    return (VkBool32 *)(x->buf[row][k].bytes + offset);
}

/* Whether a structure of type `t` is already in `chain`. */
static bool chained(const void *chain, VkStructureType t)
{
    for (const VkBaseInStructure *s = chain; s; s = s->pNext)
        if (s->sType == t)
            return true;
    return false;
}

/* The row of extension `name`, or EXTRA_ROWS. */
static uint32_t row_of(const char *name)
{
    for (uint32_t i = 0; i < EXTRA_ROWS; i++)
        if (strcmp(extra_rows[i].name, name) == 0)
            return i;
    return EXTRA_ROWS;
}

/*
 * Picks the extra extensions to enable (kiln_vk_options.extra_extensions):
 * each one asked for and offered; for a row of extra_rows, only when its
 * dependencies are on, the API version is enough and its required feature
 * is reported, with its feature structures queried into `x` and chained
 * onto *chain. Never an error: an extension the device lacks (or one past
 * KILN_VK_MAX_EXTENSIONS) is logged at info and left out. The names
 * enabled are logged at info.
 */
static void pick_extras(struct kiln_vk *vk, const struct kiln_vk_options *opt,
                        const VkExtensionProperties *exts, uint32_t n, struct extra_features *x,
                        void **chain)
{
    /* In table order, so a dependency is decided before the rows that need
     * it. Each row is queried on its own: two rows may share a structure
     * type (EXT and KHR line rasterization), which one query cannot hold. */
    for (uint32_t i = 0; i < EXTRA_ROWS; i++) {
        const struct extra_row *r = &extra_rows[i];
        bool on =
            asked(opt, r->name) && has_ext(exts, n, r->name) && vk->info.api_version >= r->core;
        for (size_t d = 0; d < KILN_ARRAY_LEN(r->deps) && r->deps[d] && on; d++) {
            uint32_t j = row_of(r->deps[d]);
            on = j < EXTRA_ROWS && x->on[j];
        }
        VkPhysicalDeviceFeatures2 f2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
        for (int k = 0; k < 2 && on; k++) {
            const struct feature *f = row_feature(r, k);
            if (!f)
                continue;
            VkBaseOutStructure *s = feature_buf(x, i, k);
            memset(s, 0, f->size);
            s->sType = f->stype;
            s->pNext = (VkBaseOutStructure *)f2.pNext;
            f2.pNext = s;
        }
        if (on && f2.pNext)
            vk->fn.vkGetPhysicalDeviceFeatures2(vk->phys, &f2);
        for (int k = 0; k < 2 && on; k++) {
            const struct feature *f = row_feature(r, k);
            on = !f || !f->required || *feature_bool(x, i, k, f->required);
        }
        if (on && enable(vk, r->name) < 0)
            on = false; /* no room left: logged below as left out */
        x->on[i] = on;
        /* Enable: a minimal row's structure keeps only its required
         * feature; every other keeps what the device reported, less
         * `clear`. A structure type already chained (kiln's own, or an
         * earlier row's with the same values) is not chained again. */
        for (int k = 0; k < 2 && on; k++) {
            const struct feature *f = row_feature(r, k);
            if (!f || chained(*chain, f->stype))
                continue;
            VkBaseOutStructure *s = feature_buf(x, i, k);
            if (r->minimal) {
                memset(s, 0, f->size);
                s->sType = f->stype;
                *feature_bool(x, i, k, f->required) = VK_TRUE;
            }
            for (size_t c = 0; c < KILN_ARRAY_LEN(r->clear) && k == 0; c++)
                if (r->clear[c])
                    *feature_bool(x, i, k, r->clear[c]) = VK_FALSE;
            s->pNext = *chain;
            *chain = s;
        }
    }

    char list[1024] = "";
    size_t used = 0;
    for (uint32_t i = 0; i < opt->extra_extension_count; i++) {
        const char *name = opt->extra_extensions[i];
        bool again = false;
        for (uint32_t j = 0; name && j < i && !again; j++)
            again = opt->extra_extensions[j] && strcmp(opt->extra_extensions[j], name) == 0;
        if (!name || again)
            continue;
        uint32_t row = row_of(name);
        bool on =
            row < EXTRA_ROWS ? x->on[row] : has_ext(exts, n, name) && enable(vk, name) == KILN_OK;
        if (!on) {
            KILN_INFO(VK_MODULE, "%s: %s is left out (not offered, or without what it needs)",
                      vk->info.device_name, name);
            continue;
        }
        int w = snprintf(list + used, sizeof(list) - used, "%s%s", used ? " " : "", name);
        if (w > 0 && (size_t)w < sizeof(list) - used)
            used += (size_t)w;
    }
    if (used)
        KILN_INFO(VK_MODULE, "%s: extra extensions enabled: %s", vk->info.device_name, list);
}

/*
 * Ask before compiling (docs/runtime.md): creation feedback (Vulkan 1.3, or
 * VK_EXT_pipeline_creation_feedback; no feature to enable) and
 * pipelineCreationCacheControl (Vulkan 1.3, or
 * VK_EXT_pipeline_creation_cache_control), each enabled where the device
 * has it; `cc` is chained onto *chain when the feature is there.
 * @return 0, or enable's error (no room for the extension).
 */
static int pick_compile_probe(struct kiln_vk *vk, const VkExtensionProperties *exts, uint32_t n,
                              VkPhysicalDevicePipelineCreationCacheControlFeatures *cc,
                              void **chain)
{
    bool core13 = vk->info.api_version >= VK_API_VERSION_1_3;
    bool fb_ext = has_ext(exts, n, "VK_EXT_pipeline_creation_feedback");
    bool cc_ext = has_ext(exts, n, "VK_EXT_pipeline_creation_cache_control");
    if (!core13 && fb_ext)
        KILN_TRY(enable(vk, "VK_EXT_pipeline_creation_feedback"));
    vk->info.creation_feedback = core13 || fb_ext;
    if (!core13 && !cc_ext)
        return KILN_OK;
    *cc = (VkPhysicalDevicePipelineCreationCacheControlFeatures){
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PIPELINE_CREATION_CACHE_CONTROL_FEATURES};
    VkPhysicalDeviceFeatures2 f2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2,
                                    .pNext = cc};
    vk->fn.vkGetPhysicalDeviceFeatures2(vk->phys, &f2);
    if (!cc->pipelineCreationCacheControl)
        return KILN_OK;
    if (!core13)
        KILN_TRY(enable(vk, "VK_EXT_pipeline_creation_cache_control"));
    *cc = (VkPhysicalDevicePipelineCreationCacheControlFeatures){
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PIPELINE_CREATION_CACHE_CONTROL_FEATURES,
        .pNext = *chain,
        .pipelineCreationCacheControl = VK_TRUE};
    *chain = cc;
    vk->info.compile_probe = true;
    return KILN_OK;
}

static int make_device(struct kiln_vk *vk, const struct kiln_vk_options *opt)
{
    uint32_t n = 0;
    vk->fn.vkEnumerateDeviceExtensionProperties(vk->phys, NULL, &n, NULL);
    VkExtensionProperties *exts = kiln__calloc(n ? n : 1, sizeof(*exts));
    if (!exts)
        return KILN_ENOMEM;
    vk->fn.vkEnumerateDeviceExtensionProperties(vk->phys, NULL, &n, exts);
    bool has_m5 = has_ext(exts, n, KILN_VK_MAINTENANCE5_NAME);
    bool has_dr_ext = has_ext(exts, n, "VK_KHR_dynamic_rendering");
    bool has_portability = has_ext(exts, n, "VK_KHR_portability_subset");
    bool core13 = vk->info.api_version >= VK_API_VERSION_1_3;

    /* Ask which features are there, then enable exactly those. */
    struct kiln_vk_maintenance5_features m5 = {.sType = KILN_VK_STYPE_MAINTENANCE5_FEATURES};
    VkPhysicalDeviceDynamicRenderingFeatures dr = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DYNAMIC_RENDERING_FEATURES};
    VkPhysicalDeviceFeatures2 f2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
    void **tail = &f2.pNext;
    if (has_m5) {
        *tail = &m5;
        tail = &m5.pNext;
    }
    if (core13 || has_dr_ext) {
        *tail = &dr;
        tail = &dr.pNext;
    }
    *tail = NULL; /* the end of the chain */
    vk->fn.vkGetPhysicalDeviceFeatures2(vk->phys, &f2);
    bool use_m5 = has_m5 && m5.maintenance5;
    bool use_dr = (core13 || has_dr_ext) && dr.dynamicRendering && !opt->no_dynamic_rendering;

    void *chain = NULL;
    int rc = KILN_OK;
    if (use_m5) {
        rc = enable(vk, KILN_VK_MAINTENANCE5_NAME);
        m5 = (struct kiln_vk_maintenance5_features){
            .sType = KILN_VK_STYPE_MAINTENANCE5_FEATURES, .pNext = chain, .maintenance5 = VK_TRUE};
        chain = &m5;
    }
    if (use_dr) {
        if (!core13 && rc == KILN_OK)
            rc = enable(vk, "VK_KHR_dynamic_rendering");
        dr = (VkPhysicalDeviceDynamicRenderingFeatures){
            .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DYNAMIC_RENDERING_FEATURES,
            .pNext = chain,
            .dynamicRendering = VK_TRUE};
        chain = &dr;
    }
    if (has_portability && rc == KILN_OK)
        rc = enable(vk, "VK_KHR_portability_subset"); /* required when offered */
    VkPhysicalDevicePipelineCreationCacheControlFeatures cc;
    if (rc == KILN_OK)
        rc = pick_compile_probe(vk, exts, n, &cc, &chain);
    /* On the heap: the rows' structures take some 15 KiB. */
    struct extra_features *extra = kiln__calloc(1, sizeof(*extra));
    if (!extra && rc == KILN_OK)
        rc = KILN_ENOMEM;
    if (rc == KILN_OK)
        pick_extras(vk, opt, exts, n, extra, &chain);
    kiln__free(exts);
    if (rc < 0) {
        kiln__free(extra);
        return rc;
    }

    const char *enabled[KILN_VK_MAX_EXTENSIONS];
    for (uint32_t i = 0; i < vk->nextensions; i++)
        enabled[i] = vk->extensions[i];
    float priority = 1.0f;
    VkDeviceQueueCreateInfo q = {
        .sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
        .queueFamilyIndex = vk->queue_family,
        .queueCount = 1,
        .pQueuePriorities = &priority,
    };
    VkPhysicalDeviceFeatures core = f2.features;
    core.robustBufferAccess = VK_FALSE;
    VkDeviceCreateInfo ci = {
        .sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
        .pNext = chain,
        .pEnabledFeatures = &core,
        .queueCreateInfoCount = 1,
        .pQueueCreateInfos = &q,
        .enabledExtensionCount = vk->nextensions,
        .ppEnabledExtensionNames = enabled,
    };
    VkResult res = vk->fn.vkCreateDevice(vk->phys, &ci, vk->alloc, &vk->device);
    kiln__free(extra);
    if (res != VK_SUCCESS) {
        KILN_ERROR(VK_MODULE, "vkCreateDevice (%s) failed: %s", vk->info.device_name,
                   kiln_vk_result_name(res));
        vk->device = VK_NULL_HANDLE;
        return KILN_EVULKAN;
    }
    kiln__vk_keep_drivers_loaded(); /* what the device loaded too */
    KILN_TRY(load_device_fns(vk));
    vk->fn.vkGetDeviceQueue(vk->device, vk->queue_family, 0, &vk->queue);
    vk->info.maintenance5 = use_m5;
    vk->info.chained_stages = use_m5 && !opt->force_modules;
    vk->info.dynamic_rendering = use_dr;
    if (opt->validate)
        kiln_vk_set_validation(vk, true);
    return kiln__vk_library_probe(
        vk, kiln_vk_extension_enabled(vk, "VK_EXT_graphics_pipeline_library"));
}

static int make_layout(struct kiln_vk *vk)
{
    VkDescriptorSetLayoutBinding b = {
        .binding = 0,
        .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
        .descriptorCount = 1,
        .stageFlags = VK_SHADER_STAGE_ALL,
    };
    VkDescriptorSetLayoutCreateInfo dci = {
        .sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO,
        .bindingCount = 1,
        .pBindings = &b,
    };
    VkResult res = vk->fn.vkCreateDescriptorSetLayout(vk->device, &dci, vk->alloc, &vk->set_layout);
    if (res != VK_SUCCESS) {
        KILN_ERROR(VK_MODULE, "vkCreateDescriptorSetLayout failed: %s", kiln_vk_result_name(res));
        vk->set_layout = VK_NULL_HANDLE;
        return KILN_EVULKAN;
    }
    VkPushConstantRange pc = {
        .stageFlags = VK_SHADER_STAGE_ALL,
        .offset = 0,
        .size = KILN_VK_PUSH_CONSTANT_BYTES,
    };
    VkPipelineLayoutCreateInfo lci = {
        .sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO,
        .setLayoutCount = 1,
        .pSetLayouts = &vk->set_layout,
        .pushConstantRangeCount = 1,
        .pPushConstantRanges = &pc,
    };
    res = vk->fn.vkCreatePipelineLayout(vk->device, &lci, vk->alloc, &vk->layout);
    if (res != VK_SUCCESS) {
        KILN_ERROR(VK_MODULE, "vkCreatePipelineLayout failed: %s", kiln_vk_result_name(res));
        vk->layout = VK_NULL_HANDLE;
        return KILN_EVULKAN;
    }
    return KILN_OK;
}

/*
 * Wraps the application's own instance, device and (maybe) pipeline cache
 * (kiln_vk_options.external): loads kiln's function pointers from them,
 * finds the device's index, and takes what the application enabled from
 * its word, since Vulkan cannot be asked which features a device was made
 * with.
 */
static int wrap_external(struct kiln_vk *vk, const struct kiln_vk_options *opt)
{
    const struct kiln_vk_external *x = opt->external;
    if (!x->get_instance_proc_addr || !x->instance || !x->physical_device || !x->device) {
        KILN_ERROR(VK_MODULE, "external Vulkan context: %s missing",
                   !x->get_instance_proc_addr ? "vkGetInstanceProcAddr"
                   : !x->instance             ? "the instance"
                   : !x->physical_device      ? "the physical device"
                                              : "the device");
        return KILN_EINVAL;
    }
    vk->external = true;
    vk->fn.vkGetInstanceProcAddr = x->get_instance_proc_addr;
    vk->instance = x->instance;
    KILN_TRY(load_instance_fns(vk));
    vk->phys = x->physical_device;
    uint32_t n = 0;
    if (vk->fn.vkEnumeratePhysicalDevices(vk->instance, &n, NULL) == VK_SUCCESS && n) {
        VkPhysicalDevice *pds = kiln__calloc(n, sizeof(*pds));
        if (!pds)
            return KILN_ENOMEM;
        vk->fn.vkEnumeratePhysicalDevices(vk->instance, &n, pds);
        vk->info.device_count = n;
        for (uint32_t i = 0; i < n; i++)
            if (pds[i] == vk->phys)
                vk->info.device_index = i;
        kiln__free(pds);
    }
    read_properties(vk);
    if (x->api_version)
        vk->info.api_version = KILN_MIN(vk->info.api_version, x->api_version);
    uint32_t nq = 0;
    vk->fn.vkGetPhysicalDeviceQueueFamilyProperties(vk->phys, &nq, NULL);
    if (x->queue_family >= nq) {
        KILN_ERROR(VK_MODULE, "external Vulkan context: queue family %u of %u", x->queue_family,
                   nq);
        return KILN_EINVAL;
    }
    vk->queue_family = x->queue_family;
    vk->device = x->device;
    KILN_TRY(load_device_fns(vk));
    vk->fn.vkGetDeviceQueue(vk->device, vk->queue_family, 0, &vk->queue);
    vk->info.maintenance5 = x->maintenance5;
    vk->info.chained_stages = x->maintenance5 && !opt->force_modules;
    vk->info.dynamic_rendering = x->dynamic_rendering && !opt->no_dynamic_rendering;
    /* Feedback is core in 1.3 (no feature); the probe's feature only on the
     * application's word. */
    vk->info.creation_feedback = vk->info.api_version >= VK_API_VERSION_1_3;
    vk->info.compile_probe = x->pipeline_creation_cache_control;
    if (opt->validate)
        kiln_vk_set_validation(vk, true);
    return kiln__vk_library_probe(vk, x->graphics_pipeline_library && !opt->no_pipeline_library);
}

static int setup(struct kiln_vk *vk, struct kiln_vk_options *opt, const struct kiln__vk_late *late)
{
    if (opt->external) {
        KILN_TRY(wrap_external(vk, opt));
    } else {
        KILN_TRY(make_instance(vk, opt->loader));
        KILN_TRY(choose_device(vk, opt));
        read_properties(vk);
        /* The extensions asked late: the caller's work decided them while
         * the instance was made (kiln__vk_create_late). */
        if (late)
            KILN_TRY(late->fn(late->user, &opt->extra_extensions, &opt->extra_extension_count));
        KILN_TRY(make_device(vk, opt));
    }
    KILN_TRY(make_layout(vk));
    if (opt->cache_dir)
        KILN_TRY(kiln__path_join(vk->cache_path, sizeof(vk->cache_path), opt->cache_dir,
                                 KILN_VK_CACHE_FILE));
    if (opt->no_pipeline_cache) {
        vk->info.cache_state = KILN_VK_CACHE_OFF;
        return KILN_OK;
    }
    if (opt->external && opt->external->pipeline_cache) {
        /* The application's: kiln builds through it (and saves its data to
         * cache_dir when asked), and leaves it alone otherwise. */
        vk->cache = opt->external->pipeline_cache;
        vk->external_cache = true;
        vk->info.cache_state = KILN_VK_CACHE_MEMORY;
        snprintf(vk->info.cache_note, sizeof(vk->info.cache_note),
                 "the application's pipeline cache");
        return KILN_OK;
    }
    return kiln__vk_cache_open(vk, opt->cache_dir == NULL);
}

static int create_body(const struct kiln_vk_options *options, const struct kiln__vk_late *late,
                       struct kiln_vk **out)
{
    if (!out)
        return KILN_EINVAL;
    *out = NULL;
    /* The caller's growable structs, read into the library's own
     * (docs/abi.md); the external one is used during this call only. */
    struct kiln_vk_options o = KILN_VK_OPTIONS_INIT;
    struct kiln_vk_external ext = KILN_VK_EXTERNAL_INIT;
    KILN_TRY(KILN_STRUCT_IN(&o, options, "kiln_vk_options"));
    if (o.external) {
        KILN_TRY(KILN_STRUCT_IN(&ext, o.external, "kiln_vk_external"));
        o.external = &ext;
    }
    if (o.io)
        KILN_TRY(kiln__io_check(o.io));
    struct kiln_vk_options *opt = &o;
    if (late && opt->external)
        return KILN_EINVAL; /* an application's device is made already */
    struct kiln_vk *vk = kiln__calloc(1, sizeof(*vk));
    if (!vk)
        return KILN_ENOMEM;
    pthread_mutex_init(&vk->lock, NULL);
    pthread_mutex_init(&vk->queue_lock, NULL);
    vk->pipelines.prev = vk->pipelines.next = &vk->pipelines;
    vk->modules.prev = vk->modules.next = &vk->modules;
    vk->io = opt->io ? opt->io : kiln_io_default();
    if (opt->allocator) {
        vk->alloc_copy = *opt->allocator;
        vk->alloc = &vk->alloc_copy;
    }

    int rc = setup(vk, opt, late);
    if (rc < 0) {
        kiln_vk_destroy(vk);
        return rc;
    }
    const struct kiln_vk_info *in = &vk->info;
    KILN_INFO(VK_MODULE,
              "device %u of %u: %s (Vulkan %u.%u.%u%s%s), maintenance5 %s%s, dynamic rendering %s, "
              "creation feedback %s, compile probe %s",
              in->device_index, in->device_count, in->device_name,
              VK_API_VERSION_MAJOR(in->api_version), VK_API_VERSION_MINOR(in->api_version),
              VK_API_VERSION_PATCH(in->api_version), in->driver_info[0] ? ", " : "",
              in->driver_info, in->maintenance5 ? "on" : "off",
              in->maintenance5 && !in->chained_stages ? " (modules forced)" : "",
              in->dynamic_rendering ? "on" : "off", in->creation_feedback ? "on" : "off",
              in->compile_probe ? "on" : "off");
    *out = vk;
    return KILN_OK;
}

int kiln_vk_create(const struct kiln_vk_options *options, struct kiln_vk **out)
{
    uint64_t m = kiln__err_mark();
    return kiln__err_end(NULL, m, "kiln_vk_create", NULL, create_body(options, NULL, out));
}

int kiln__vk_create_late(const struct kiln_vk_options *options, const struct kiln__vk_late *late,
                         struct kiln_vk **out)
{
    uint64_t m = kiln__err_mark();
    return kiln__err_end(NULL, m, "kiln_vk_create", NULL, create_body(options, late, out));
}

const struct VkAllocationCallbacks *kiln_vk_allocator(const struct kiln_vk *vk)
{
    return vk ? vk->alloc : NULL;
}

void kiln_vk_destroy(struct kiln_vk *vk)
{
    if (!vk)
        return;
    /* With an external context, only what kiln made goes: never the
     * application's device, instance or pipeline cache. The device's
     * functions may be missing when wrapping failed half-way. */
    if (vk->device && vk->fn.vkDestroyDescriptorSetLayout) {
        kiln__vk_destroy_objects(vk);
        kiln__vk_library_destroy(vk); /* after the pipelines linked from its parts */
        if (vk->cache && !vk->external_cache)
            vk->fn.vkDestroyPipelineCache(vk->device, vk->cache, vk->alloc);
        if (vk->layout)
            vk->fn.vkDestroyPipelineLayout(vk->device, vk->layout, vk->alloc);
        if (vk->set_layout)
            vk->fn.vkDestroyDescriptorSetLayout(vk->device, vk->set_layout, vk->alloc);
    }
    if (vk->device && vk->fn.vkDestroyDevice && !vk->external)
        vk->fn.vkDestroyDevice(vk->device, vk->alloc);
    if (vk->instance && vk->fn.vkDestroyInstance && !vk->external)
        vk->fn.vkDestroyInstance(vk->instance, vk->alloc);
    pthread_mutex_destroy(&vk->lock);
    pthread_mutex_destroy(&vk->queue_lock);
    kiln__free(vk);
}

const struct kiln_vk_info *kiln_vk_get_info(const struct kiln_vk *vk)
{
    return vk ? &vk->info : NULL;
}

/* The name before 0.2, kept exported (include/kiln/vk.h). */
const struct kiln_vk_info *kiln_vk_info(const struct kiln_vk *vk)
{
    return kiln_vk_get_info(vk);
}

bool kiln_vk_extension_enabled(const struct kiln_vk *vk, const char *name)
{
    for (uint32_t i = 0; vk && name && i < vk->nextensions; i++)
        if (strcmp(vk->extensions[i], name) == 0)
            return true;
    return false;
}

void kiln_vk_get_stats(const struct kiln_vk *vk, struct kiln_vk_stats *s)
{
    if (!vk || !s || kiln__struct_out_check(s, "kiln_vk_stats") < 0)
        return;
    struct kiln_vk *v = (struct kiln_vk *)vk; /* atomic loads need a non-const object */
    struct kiln_vk_stats st = {
        .size = sizeof(st),
        .live_modules = atomic_load(&v->live_modules),
        .peak_modules = atomic_load(&v->peak_modules),
        .modules_created = atomic_load(&v->modules_created),
        .stages_chained = atomic_load(&v->stages_chained),
        .pipelines_built = atomic_load(&v->pipelines_built),
        .pipelines_failed = atomic_load(&v->pipelines_failed),
        .live_pipelines = atomic_load(&v->live_pipelines),
        .feedback_pipelines = atomic_load(&v->feedback_pipelines),
        .feedback_cache_hits = atomic_load(&v->feedback_cache_hits),
        .feedback_driver_ns = atomic_load(&v->feedback_driver_ns),
        .compile_required = atomic_load(&v->compile_required),
        .pipelines_linked = atomic_load(&v->pipelines_linked),
        .parts_built = atomic_load(&v->parts_built),
        .parts_reused = atomic_load(&v->parts_reused),
        .live_parts = atomic_load(&v->live_parts),
    };
    KILN_STRUCT_OUT(s, &st);
}

/* The name before 0.2, kept exported (include/kiln/vk.h). */
void kiln_vk_stats(const struct kiln_vk *vk, struct kiln_vk_stats *s)
{
    kiln_vk_get_stats(vk, s);
}

void kiln_vk_reset_peak(struct kiln_vk *vk)
{
    if (!vk)
        return;
    atomic_store(&vk->peak_modules, atomic_load(&vk->live_modules));
}

void kiln_vk_get_handles(const struct kiln_vk *vk, struct kiln_vk_handles *out)
{
    if (!vk || !out || kiln__struct_out_check(out, "kiln_vk_handles") < 0)
        return;
    struct kiln_vk_handles h = {
        .size = sizeof(h),
        .get_instance_proc_addr = vk->fn.vkGetInstanceProcAddr,
        .instance = vk->instance,
        .physical_device = vk->phys,
        .device = vk->device,
        .queue_family = vk->queue_family,
        .queue = vk->queue,
        .pipeline_cache = vk->cache,
        .pipeline_layout = vk->layout,
        .set_layout = vk->set_layout,
    };
    KILN_STRUCT_OUT(out, &h);
}

/*
 * Some drivers only queue a destroyed pipeline and free it at the queue's
 * next submission or wait (lavapipe of Mesa 22: `vkDestroyPipeline` appends
 * it to the queue's list, and only a submit empties that list). kiln never
 * submits, so without this every pipeline a preparation built stays alive
 * until the device goes (measured: 24 generated pipelines, 239 -> 107 MiB).
 * Waiting on the idle queue costs microseconds elsewhere. Only on
 * kiln's own device: an application's queue is the application's to
 * synchronise.
 */
int kiln__vk_settle(struct kiln_vk *vk)
{
    if (!vk || vk->external || vk->queue == VK_NULL_HANDLE || !vk->fn.vkQueueWaitIdle)
        return KILN_OK;
    /* Twice: lavapipe empties its list when a submission runs, and the
     * first wait may return as soon as its own submission signalled
     * (measured: one wait left 8 destroyed pipelines alive, two freed
     * them). */
    pthread_mutex_lock(&vk->queue_lock);
    VkResult res = vk->fn.vkQueueWaitIdle(vk->queue);
    if (res == VK_SUCCESS)
        res = vk->fn.vkQueueWaitIdle(vk->queue);
    pthread_mutex_unlock(&vk->queue_lock);
    if (res != VK_SUCCESS) {
        KILN_ERROR(VK_MODULE, "vkQueueWaitIdle (freeing destroyed pipelines) failed: %s",
                   kiln_vk_result_name(res));
        return KILN_EVULKAN;
    }
    return KILN_OK;
}

const char *kiln_vk_errmsg(const struct kiln_vk *vk)
{
    return vk ? kiln__err_text((struct kiln__errbuf *)&vk->err) : "kiln_vk_errmsg: no context";
}
