/*
 * foz_builder_private.h - what the Fossilize builder's files share
 * (foz_builder.c: objects, graphics and compute; foz_builder_rt.c:
 * pipeline libraries and ray tracing): the builder, one build's state and
 * the helpers both use. Nothing here is part of any public header.
 */
#ifndef KILN_FOZ_BUILDER_PRIVATE_H
#define KILN_FOZ_BUILDER_PRIVATE_H

/* The Vulkan headers first: foz.h declares the builder only after them. */
#define VK_NO_PROTOTYPES
#include <vulkan/vulkan.h>

#include "foz_link.h"
#include "foz_state_private.h"

#include <pthread.h>
#include <stdatomic.h>

/* Structure types newer than the oldest Vulkan headers kiln builds with. */
#define STYPE_PIPELINE_CREATE_FLAGS_2 1000470005
#define STYPE_PIPELINE_LIBRARY        1000290000
#define STYPE_GRAPHICS_PIPELINE_LIB   1000320002

/* Pipeline flags that do not change what is compiled (Fossilize drops them
 * too): capture statistics and representations, fail-on-compile-required,
 * early return. */
#define FLAGS_IGNORED   0x3c0u
#define FLAG_DERIVATIVE 0x4u
#define FLAG_LIBRARY    0x800u

/* How deep pipeline libraries may nest (the closure's walk bounds it too). */
#define LIBRARY_MAX_DEPTH 16

/* The extensions the builder checks for (names in foz_builder.c). */
enum ext {
    X_MAINTENANCE2,
    X_MULTIVIEW,
    X_YCBCR,
    X_CREATE_RENDERPASS2,
    X_DEPTH_STENCIL_RESOLVE,
    X_SEPARATE_DS_LAYOUTS,
    X_DESCRIPTOR_INDEXING,
    X_FILTER_MINMAX,
    X_SUBGROUP_SIZE,
    X_DYNAMIC_RENDERING,
    X_DIVISOR_EXT,
    X_DIVISOR_KHR,
    X_DEPTH_CLIP_ENABLE,
    X_TRANSFORM_FEEDBACK,
    X_BLEND_ADVANCED,
    X_CONSERVATIVE,
    X_LINE_EXT,
    X_LINE_KHR,
    X_COLOR_WRITE,
    X_PROVOKING_VERTEX,
    X_CUSTOM_BORDER,
    X_DEPTH_CLIP_CONTROL,
    X_MAINTENANCE5,
    X_EDS,
    X_EDS2,
    X_EDS3,
    X_VERTEX_INPUT_DYNAMIC,
    X_DISCARD_RECTANGLES,
    X_SAMPLE_LOCATIONS,
    X_FRAGMENT_SHADING_RATE,
    X_CLIP_SPACE_W_SCALING,
    X_MESH_EXT,
    X_MESH_NV,
    X_PIPELINE_LIBRARY,
    X_GPL,
    X_RT_PIPELINE,
    X_COUNT,
};

/* The core features a recorded pipeline may need (VkPhysicalDeviceFeatures
 * and the 1.1-1.3 structures), copied at create. */
struct features {
    bool known; /* false: the caller gave none, nothing is checked */
    VkPhysicalDeviceFeatures f;
    bool ycbcr;
    bool dynamic_rendering;
    bool gpl; /* graphicsPipelineLibrary */
    bool rt;  /* rayTracingPipeline */
};

struct fns {
    PFN_vkCreateSampler CreateSampler;
    PFN_vkDestroySampler DestroySampler;
    PFN_vkCreateSamplerYcbcrConversion CreateSamplerYcbcrConversion;
    PFN_vkDestroySamplerYcbcrConversion DestroySamplerYcbcrConversion;
    PFN_vkCreateDescriptorSetLayout CreateDescriptorSetLayout;
    PFN_vkDestroyDescriptorSetLayout DestroyDescriptorSetLayout;
    PFN_vkCreatePipelineLayout CreatePipelineLayout;
    PFN_vkDestroyPipelineLayout DestroyPipelineLayout;
    PFN_vkCreateRenderPass CreateRenderPass;
    PFN_vkCreateRenderPass2 CreateRenderPass2;
    PFN_vkDestroyRenderPass DestroyRenderPass;
    PFN_vkCreateGraphicsPipelines CreateGraphicsPipelines;
    PFN_vkCreateComputePipelines CreateComputePipelines;
    PFN_vkDestroyPipeline DestroyPipeline;
    PFN_vkCreateRayTracingPipelinesKHR CreateRayTracingPipelinesKHR;
};

/* A shared object's handle, by its tag (a union, so that no handle is
 * ever cast through an integer). */
union handle {
    VkSampler sampler;
    VkDescriptorSetLayout set_layout;
    VkPipelineLayout layout;
    VkRenderPass pass;
};

/* One shared object: a sampler (with its YCbCr conversion, or null), a
 * descriptor set layout, a pipeline layout or a render pass. */
struct shared {
    uint64_t tag;
    uint64_t hash;
    union handle h;
    VkSamplerYcbcrConversion ycbcr;
    struct shared *next;
};

#define SHARED_BUCKETS 256u

struct kiln_foz_builder {
    uint64_t id; /* this process's number for it: parts are keyed by it */
    VkDevice device;
    const VkAllocationCallbacks *alloc; /* the options' allocator (NULL: the driver's) */
    struct fns vk;
    uint32_t api;
    bool ext[X_COUNT];
    struct features feat;
    uint32_t max_recursion;        /* maxRayRecursionDepth; 0: not checked */
    struct kiln_foz_limits limits; /* every closure is checked against them first */
    pthread_mutex_t lock;
    struct shared *table[SHARED_BUCKETS];
    _Atomic uint64_t built[KILN_FOZ_KIND_COUNT];
    _Atomic uint64_t skipped[KILN_FOZ_KIND_COUNT];
    _Atomic uint64_t failed[KILN_FOZ_KIND_COUNT];
    _Atomic uint64_t objects;
    _Atomic uint64_t standalone;
    bool creation_feedback; /* Vulkan 1.3 or VK_EXT_pipeline_creation_feedback */
};

struct block {
    struct block *next;
    size_t used, cap;
    max_align_t data[];
};

/* A pipeline library made for the pipeline being built. */
struct made_library {
    uint64_t hash;
    VkPipeline pipeline;
};

struct build {
    struct kiln_foz_builder *b;
    struct json_object *doc; /* the closure */
    uint64_t tag;            /* the pipeline's, shared by its libraries */
    /* The handed-in stages and the stage records they match, in the
     * closure's builder order (kiln__foz_closure_stages). */
    const VkPipelineShaderStageCreateInfo *stages;
    struct json_object *recs[KILN_FOZ_MAX_STAGES];
    uint32_t nstages;
    /* Libraries made so far in this build: each once, destroyed when the
     * build returns (the linked pipeline does not need them). */
    struct made_library libs[KILN__FOZ_MAX_LIBRARIES];
    uint32_t nlibs;
    struct block *arena;
    char *why;
    size_t cap;
    bool oom;
    /* Ask before compiling (kiln__fb_ask): flags added to every create of
     * the build (the probe's), and the driver's feedback of the last
     * create, the pipeline's own (its libraries are made before it). */
    VkPipelineCreateFlags ask_flags;
    VkPipelineCreationFeedback feedback;
    VkPipelineCreationFeedback stage_feedback[KILN_FOZ_MAX_STAGES];
    VkPipelineCreationFeedbackCreateInfo feedback_info;
    struct kiln__fb_link *link; /* the fast-link ask, or NULL */
    struct kiln__fb_tier *tier; /* the host tier's ask, or NULL */
};

/* JSON access: a missing member reads as NULL or 0. */
static inline struct json_object *get(struct json_object *o, const char *key)
{
    struct json_object *v = NULL;
    if (!json_object_is_type(o, json_type_object) || !json_object_object_get_ex(o, key, &v))
        return NULL;
    return v;
}

static inline uint32_t u32(struct json_object *o, const char *key)
{
    return (uint32_t)json_object_get_int64(get(o, key));
}

static inline uint32_t len(struct json_object *a)
{
    return json_object_is_type(a, json_type_array) ? (uint32_t)json_object_array_length(a) : 0;
}

static inline struct json_object *at(struct json_object *a, uint32_t i)
{
    return json_object_array_get_idx(a, i);
}

/* An arena block of the build, zeroed; NULL (and c->oom) when out of memory. */
void *kiln__fb_alloc(struct build *c, size_t n);

/* Puts the build's first error line (later ones are dropped). @return rc. */
KILN_PRINTF(3, 4) int kiln__fb_fail(struct build *c, int rc, const char *fmt, ...);

/* An array of unsigned integers copied into the arena, or NULL. */
uint32_t *kiln__fb_uints(struct build *c, struct json_object *a);

/* Whether core 1.minor (0: never core) or extension x1 or x2 (-1: none)
 * gives `what`. @return 0, or KILN_ENOTSUP with the reason. */
int kiln__fb_need(struct build *c, uint32_t minor, int x1, int x2, const char *what);

/* @return 0 when the feature is there (or features are unknown), else
 * KILN_ENOTSUP naming it. */
int kiln__fb_need_feature(struct build *c, bool have, const char *feature, const char *what);

/* Builds the recorded pNext array `pnext` (or NULL) in order, ending in `tail`. */
int kiln__fb_chain(struct build *c, struct json_object *pnext, const void *tail, const void **out);

/* The recorded object `hash` of closure member `member`. */
int kiln__fb_recorded(struct build *c, const char *member, uint64_t hash, const char *what,
                      struct json_object **out);

/* The shared pipeline layout `hash`, made on first use. */
int kiln__fb_pipeline_layout(struct build *c, uint64_t hash, VkPipelineLayout *out);

/* Checks that each of the `n` dynamic states is one the device offers. */
int kiln__fb_dynamic_states(struct build *c, const uint32_t *v, uint32_t n);

/* The flags a pipeline is built with (derivatives without their base). */
int kiln__fb_pipeline_flags(struct build *c, struct json_object *p, VkPipelineCreateFlags *flags,
                            VkPipeline *base, int32_t *base_index);

/* The `n` recorded stages `rs` (an array, or one stage object) filled from
 * the handed-in stages they match. */
int kiln__fb_own_stages(struct build *c, struct json_object *rs, uint32_t n,
                        VkPipelineShaderStageCreateInfo **out);

/* Builds one pipeline of the closure: its libraries first, then itself. */
/* Frees what the build's arena holds (foz_builder.c). */
void kiln__fb_arena_free(struct build *c);

/* Builds the closure's graphics or compute pipeline `p` itself, its
 * libraries made already (foz_builder.c). */
/* Ask before compiling: adds the probe's flag to a create's flags and
 * chains the feedback request before *pnext (where the device has it and
 * the recorded chain has none) for a create of `nstages` stages; puts
 * the host tier's ask (struct kiln__fb_tier) in where the pipeline takes
 * it (not where the create `links` pipeline libraries). @return true
 * when it did: the create goes without the pipeline cache (one path per
 * device). */
bool kiln__fb_ask(struct build *c, VkPipelineCreateFlags *flags, const void **pnext,
                  uint32_t nstages, bool links);

/* A create's VkResult as the build's answer: 0, KILN_ECOMPILE_REQUIRED
 * for a probe the driver answered VK_PIPELINE_COMPILE_REQUIRED, else
 * KILN_EVULKAN; `call` names the create in `why`. */
int kiln__fb_created(struct build *c, VkResult r, const char *call);

int kiln__fb_build_graphics(struct build *c, struct json_object *p, VkPipelineCache cache,
                            VkPipeline *out);
int kiln__fb_build_compute(struct build *c, struct json_object *p, VkPipelineCache cache,
                           VkPipeline *out);

int kiln__fb_build_pipeline(struct build *c, struct json_object *p, int depth,
                            VkPipelineCache cache, VkPipeline *out);

/* foz_builder_rt.c: makes the libraries `p` links that the build lacks. */
int kiln__fb_build_libraries(struct build *c, struct json_object *p, int depth,
                             VkPipelineCache cache);

/* foz_builder_rt.c: a VkPipelineLibraryCreateInfoKHR over the built
 * libraries recorded object `o` names. */
int kiln__fb_library_info(struct build *c, struct json_object *o,
                          VkPipelineLibraryCreateInfoKHR **out);

/* foz_builder_rt.c: builds a ray-tracing pipeline. */
int kiln__fb_build_raytracing(struct build *c, struct json_object *p, VkPipelineCache cache,
                              VkPipeline *out);

#endif /* KILN_FOZ_BUILDER_PRIVATE_H */
