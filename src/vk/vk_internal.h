/*
 * vk_internal.h - the vk module's private state, shared by its files.
 *
 * Vulkan is reached only through function pointers resolved at run time
 * (VK_NO_PROTOTYPES): global ones from vkGetInstanceProcAddr(NULL, ...),
 * instance ones from the instance, device ones from vkGetDeviceProcAddr, so
 * calls skip the loader's dispatch trampolines.
 */
#ifndef KILN_VK_INTERNAL_H
#define KILN_VK_INTERNAL_H

#define VK_NO_PROTOTYPES
#include <vulkan/vulkan.h>

#include "kiln_internal.h"
#include "kiln/vk.h"

#include <pthread.h>
#include <stdatomic.h>

/* VK_KHR_maintenance5, declared here so older Vulkan headers build too; the
 * layout is the extension's VkPhysicalDeviceMaintenance5FeaturesKHR. */
#define KILN_VK_MAINTENANCE5_NAME           "VK_KHR_maintenance5"
#define KILN_VK_STYPE_MAINTENANCE5_FEATURES ((VkStructureType)1000470000)
struct kiln_vk_maintenance5_features {
    VkStructureType sType;
    void *pNext;
    VkBool32 maintenance5;
};

#define KILN_VK_GLOBAL_FNS(X)                 \
    X(vkEnumerateInstanceVersion)             \
    X(vkEnumerateInstanceExtensionProperties) \
    X(vkCreateInstance)

#define KILN_VK_INSTANCE_FNS(X)                 \
    X(vkDestroyInstance)                        \
    X(vkEnumeratePhysicalDevices)               \
    X(vkGetPhysicalDeviceProperties)            \
    X(vkGetPhysicalDeviceProperties2)           \
    X(vkGetPhysicalDeviceFeatures2)             \
    X(vkGetPhysicalDeviceQueueFamilyProperties) \
    X(vkEnumerateDeviceExtensionProperties)     \
    X(vkCreateDevice)                           \
    X(vkGetDeviceProcAddr)

#define KILN_VK_DEVICE_FNS(X)       \
    X(vkDestroyDevice)              \
    X(vkGetDeviceQueue)             \
    X(vkQueueWaitIdle)              \
    X(vkCreateShaderModule)         \
    X(vkDestroyShaderModule)        \
    X(vkCreatePipelineCache)        \
    X(vkDestroyPipelineCache)       \
    X(vkGetPipelineCacheData)       \
    X(vkCreateComputePipelines)     \
    X(vkCreateGraphicsPipelines)    \
    X(vkDestroyPipeline)            \
    X(vkCreatePipelineLayout)       \
    X(vkDestroyPipelineLayout)      \
    X(vkCreateDescriptorSetLayout)  \
    X(vkDestroyDescriptorSetLayout) \
    X(vkCreateRenderPass)           \
    X(vkDestroyRenderPass)

#define KILN_VK_DECLARE_FN(name) PFN_##name name;

struct kiln_vk_fns {
    PFN_vkGetInstanceProcAddr vkGetInstanceProcAddr;
    KILN_VK_GLOBAL_FNS(KILN_VK_DECLARE_FN)
    KILN_VK_INSTANCE_FNS(KILN_VK_DECLARE_FN)
    KILN_VK_DEVICE_FNS(KILN_VK_DECLARE_FN)
};

/* Render passes for devices without dynamic rendering, one per color format. */
#define KILN_VK_MAX_RENDER_PASSES 16

/* A live pipeline or kept module: on the context's list so destroy finds it. */
struct kiln_vk_object {
    struct kiln_vk_object *prev, *next;
};

struct kiln_vk_pipeline {
    struct kiln_vk_object link; /* first: the list holds pipelines and modules apart */
    VkPipeline pipeline;
    /* The driver's creation feedback (kiln_vk_pipeline_feedback); all zero
     * for an adopted pipeline or without the feature. */
    VkPipelineCreationFeedback feedback;
};

struct kiln_vk_module {
    struct kiln_vk_object link;
    VkShaderModule module;
    char *unfit;  /* why kiln's own shapes refuse it (after "stage: "), or NULL */
    int unfit_rc; /* and what they return then: KILN_ENOTSUP or KILN_EFORMAT */
};

/* The most device extensions kiln enables: its own three and the extras. */
#define KILN_VK_MAX_EXTENSIONS 64u

#ifdef VK_KHR_pipeline_binary
/* VK_KHR_pipeline_binary's calls (vk_binary.c), loaded under the context's
 * lock by the first provider asked for. */
struct kiln__vk_bin_fns {
    PFN_vkCreatePipelineBinariesKHR create;
    PFN_vkDestroyPipelineBinaryKHR destroy;
    PFN_vkGetPipelineKeyKHR key;
    PFN_vkGetPipelineBinaryDataKHR data;
    PFN_vkReleaseCapturedPipelineDataKHR release;
};
#endif

struct kiln_vk {
    struct kiln__errbuf err; /* the last failure's text (kiln_vk_errmsg) */
    struct kiln_vk_fns fn;
    VkInstance instance;
    VkPhysicalDevice phys;
    VkDevice device;
    uint32_t queue_family;
    VkQueue queue;
    VkDescriptorSetLayout set_layout;
    VkPipelineLayout layout;
    VkPipelineCache cache;
    /* The options' allocation callbacks (a copy), and what every create
     * and destroy passes: &alloc_copy, or NULL without them. */
    VkAllocationCallbacks alloc_copy;
    const VkAllocationCallbacks *alloc;

    const struct kiln_io *io;
    char cache_path[4096]; /* "" without a cache folder */

    pthread_mutex_t lock;            /* guards the object lists and the render passes */
    pthread_mutex_t queue_lock;      /* the queue's external synchronisation (kiln__vk_settle) */
    struct kiln_vk_object pipelines; /* list heads */
    struct kiln_vk_object modules;
    struct {
        VkFormat format;
        VkRenderPass pass;
    } render_passes[KILN_VK_MAX_RENDER_PASSES];
    unsigned nrender_passes;

    atomic_llong live_modules;
    atomic_llong peak_modules;
    atomic_ullong modules_created;
    atomic_ullong stages_chained;
    atomic_ullong pipelines_built;
    atomic_ullong pipelines_failed;
    atomic_llong live_pipelines;
    /* Ask before compiling: the creation feedback of kiln_vk's creates. */
    atomic_ullong feedback_pipelines;
    atomic_ullong feedback_cache_hits;
    atomic_ullong feedback_driver_ns;
    atomic_ullong compile_required;

    bool validate;       /* run SPIR-V's validator on every stage (kiln_vk_set_validation) */
    bool external;       /* the instance and device are the application's: never destroyed */
    bool external_cache; /* so is the pipeline cache */

    struct kiln_vk_info info;
    /* The device extensions kiln enabled on its own device (none when
     * wrapping an application's). */
    char extensions[KILN_VK_MAX_EXTENSIONS][VK_MAX_EXTENSION_NAME_SIZE];
    uint32_t nextensions;

    /* Pipeline libraries (vk_library.c): the parts table (NULL without
     * the extension) and its counters. */
    struct kiln__vk_parts *parts;
    atomic_ullong pipelines_linked;
    atomic_ullong parts_built;
    atomic_ullong parts_reused;
    atomic_llong live_parts;
#ifdef VK_KHR_pipeline_binary
    struct kiln__vk_bin_fns bin;
    bool bin_loaded;
#endif
};

/*
 * Makes one of kiln's own shapes (compute, or the vertex and fragment pair
 * in kiln's layout and the default color format) from driver binaries:
 * `binary_info` is a VkPipelineBinaryInfoKHR (vk_binary.c) chained first;
 * no stage, no pipeline cache. @return 0 with *out, or KILN_EVULKAN
 * (logged at info: the caller builds from SPIR-V).
 */
int kiln__vk_pipeline_from_binaries(struct kiln_vk *vk, bool compute, void *binary_info,
                                    struct kiln_vk_pipeline **out);

/* Opens the loader; @return vkGetInstanceProcAddr or NULL with `why` filled. */
PFN_vkGetInstanceProcAddr kiln__vk_load(const char *loader, char *why, size_t cap);

/*
 * Sanitizer builds only (KILN_SANITIZED): keeps every library loaded so far
 * (the driver the loader opened, LLVM under lavapipe) in memory for the rest
 * of the process. The loader unloads the driver at vkDestroyInstance; state
 * a driver keeps past it then shows as a leak of an unnamed module, which
 * tests/support/lsan.supp cannot suppress by the driver's name. Elsewhere a
 * no-op: a shipped kiln leaves unloading to the loader.
 */
void kiln__vk_keep_drivers_loaded(void);

/*
 * Checks a pipeline cache blob's header (VkPipelineCacheHeaderVersionOne)
 * against a device. @return 0, or KILN_ECORRUPT_HEADER with the reason in
 * `why` (one clause, no trailing period).
 */
int kiln__vk_cache_check(const void *data, size_t n, uint32_t vendor_id, uint32_t device_id,
                         const uint8_t uuid[VK_UUID_SIZE], char *why, size_t cap);

/* Makes vk->cache, loading vk->cache_path when there is one. @return 0 or KILN_EVULKAN. */
int kiln__vk_cache_open(struct kiln_vk *vk, bool in_memory);

/* The most bindings kiln__spirv_reflect reports for one module. */
#define KILN__SPIRV_MAX_BINDINGS 64

/* One descriptor binding a module declares. */
struct kiln__spirv_binding {
    uint32_t set, binding;
    int type;       /* a VkDescriptorType, or -1 when kiln cannot tell */
    uint32_t count; /* descriptors: 1, an array's length, 0 for a runtime
                     * array, UINT32_MAX when kiln cannot tell */
};

/* A module's resource interface, as kiln__spirv_reflect reads it. */
struct kiln__spirv_iface {
    uint32_t nbindings;
    struct kiln__spirv_binding bindings[KILN__SPIRV_MAX_BINDINGS];
    bool truncated;      /* more bindings than KILN__SPIRV_MAX_BINDINGS */
    bool has_push;       /* a push-constant block is declared */
    bool push_known;     /* its size could be computed */
    uint32_t push_bytes; /* the end of its last member */
};

/*
 * Reads the descriptor bindings (every variable of storage class
 * UniformConstant, Uniform or StorageBuffer with a Binding decoration) and
 * the push-constant size a module declares. Trusts nothing in the words.
 * @return 0; KILN_EFORMAT with the reason in `why` (not SPIR-V, an
 * instruction past the end, an id bound over 4M); KILN_ENOMEM.
 */
int kiln__spirv_reflect(const uint32_t *words, size_t n, struct kiln__spirv_iface *out, char *why,
                        size_t cap);

/* A VkDescriptorType's name for log lines ("storage buffer"); any other
 * value: "resource of unknown type". */
const char *kiln__descriptor_type_name(int type);

/* ---- pipeline libraries (vk_library.c) ---------------------------------- */

/* The four library parts: vertex input, pre-rasterization, fragment
 * shader, fragment output. */
#define KILN__VK_PARTS 4

/* Whether extension `name` is one kiln_vk_create enables for pipeline
 * libraries unless opt->no_pipeline_library (vk_context.c asks). */
bool kiln__vk_library_wanted(const struct kiln_vk_options *opt, const char *name);

/* After the device is made, `enabled` saying whether the extension is:
 * fills info.pipeline_library and library_fast_linking, and makes the
 * parts table when it is on. @return 0 or KILN_ENOMEM. */
int kiln__vk_library_probe(struct kiln_vk *vk, bool enabled);

/* Destroys every part and the table (after the pipelines linked from them). */
void kiln__vk_library_destroy(struct kiln_vk *vk);

/*
 * Creates the pipeline of the whole create info `ci` by linking its four
 * parts (keys[k] names part k in the context's table; a part not there is
 * built from `ci`), with no link-time optimisation; when a part or the
 * link fails, by a monolithic create of `ci`. res->linked says which;
 * parts_built and parts_reused are added to. With `out` NULL, only the
 * parts are built (no link, no fallback: parts ahead of the draw).
 * @return the driver's answer.
 */
VkResult kiln__vk_link(struct kiln_vk *vk, const VkGraphicsPipelineCreateInfo *ci,
                       const struct kiln_key keys[KILN__VK_PARTS], VkPipeline *out,
                       struct kiln_vk_link_result *res);

/* kiln__vk_link for kiln's own graphics shape: the parts keyed by the
 * format and each stage (vk_library.c, the top). */
VkResult kiln__vk_link_builtin(struct kiln_vk *vk, const struct kiln_vk_graphics *g,
                               VkFormat format, const VkGraphicsPipelineCreateInfo *ci,
                               VkPipeline *out, struct kiln_vk_link_result *res);

/* Destroys every pipeline, kept module and render pass of the context. */
void kiln__vk_destroy_objects(struct kiln_vk *vk);

#endif /* KILN_VK_INTERNAL_H */
