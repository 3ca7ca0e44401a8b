/*
 * kiln/vk.h - the Vulkan side: device choice, shader modules that live only
 * for the create call, compute and graphics pipelines, and a
 * VkPipelineCache kept as a file.
 *
 * kiln loads the Vulkan loader at run time (libvulkan.so.1, vulkan-1.dll),
 * so it runs where there is none: kiln_vk_create then fails with
 * KILN_ENOTSUP and logs "Vulkan not available: <why>".
 *
 * Shader modules. A pipeline's stages arrive as packed blobs (kiln/pack.h).
 * Each is unpacked and turned into a VkShaderModule just before
 * vkCreate*Pipelines and destroyed right after, so at any moment at most
 * the stages of the pipelines being built exist as modules. On a device
 * with VK_KHR_maintenance5 there is no module object at all: the
 * VkShaderModuleCreateInfo is chained into the stage. kiln_vk_stats counts
 * live modules and their peak, so tests can check both.
 *
 * The shader interface. Pipelines built by kiln_vk_compute_pipeline and
 * kiln_vk_graphics_pipeline share one pipeline layout, and shaders must be
 * written against it:
 *
 *   - descriptor set 0, binding 0: one storage buffer, visible to every
 *     stage (`layout(set = 0, binding = 0) buffer B { uint data[]; };`);
 *     a shader may leave it unused; it must not declare other bindings;
 *   - push constants: at most KILN_VK_PUSH_CONSTANT_BYTES (16) bytes at
 *     offset 0, visible to every stage
 *     (`layout(push_constant) uniform P { uvec4 args; };`);
 *   - compute: any local size; the entry point is "main" unless given;
 *   - graphics: no vertex input (use gl_VertexIndex), triangle lists, one
 *     color output at location 0 in the pipeline's color format (default
 *     R8G8B8A8_UNORM), no depth, no blending; viewport and scissor are
 *     dynamic state. With dynamic rendering (Vulkan 1.3 or
 *     VK_KHR_dynamic_rendering) the pipeline has no render pass; otherwise
 *     kiln makes one single-subpass render pass per color format.
 *
 * Before building, kiln_vk_compute_pipeline and kiln_vk_graphics_pipeline
 * read each stage's resource interface from its SPIR-V and refuse a stage
 * whose set 0 binding 0 is not a storage buffer, or whose push constants
 * pass KILN_VK_PUSH_CONSTANT_BYTES, with one line naming the program, the
 * binding and both types (drivers crash on such a module instead of
 * failing). kiln_vk_stage_module, for pipelines in a caller's own layout, does
 * not check.
 *
 * The application's own Vulkan. kiln_vk_options.external wraps an
 * application's instance, device and pipeline cache instead of making
 * them; kiln then never destroys them.
 *
 * Threads. Every function taking a context may be called from any number of
 * threads at once (Vulkan lets pipelines be created concurrently and the
 * VkPipelineCache is internally synchronised), except kiln_vk_destroy,
 * kiln_vk_set_validation (set it before building) and two
 * kiln_vk_cache_save calls at once. Each declaration says which it is.
 *
 * Failures of one program do not stop the others: a stage that does not
 * unpack or a module or pipeline the driver refuses is logged as one warning
 * naming the program, the stage and the VkResult, counted in
 * kiln_vk_stats.pipelines_failed, and its function returns an error; the
 * caller goes on with the next pipeline.
 *
 * NULL arguments (0.2): a NULL context, stage, description or output is
 * KILN_EINVAL; kiln_vk_get_info answers NULL, kiln_vk_pipeline_handle 0 and
 * kiln_vk_extension_enabled false; the functions that return nothing (the
 * destroys, kiln_vk_get_stats, kiln_vk_reset_peak, kiln_vk_get_handles,
 * kiln_vk_stage_release) do nothing.
 */
#ifndef KILN_VK_H
#define KILN_VK_H

#include "kiln/common.h"
#include "kiln/pack.h"
#include "kiln/program.h"

/*
 * The Vulkan types. The structs and functions of "Direct Vulkan access"
 * below (and kiln_build_request in kiln/prep.h) use Vulkan's own types, so
 * this header includes <vulkan/vulkan_core.h> itself, and they are there
 * whether kiln.h comes before or after <vulkan/vulkan.h>. Declaring the
 * handle types here instead would be fragile: a non-dispatchable handle
 * is a pointer on 64-bit targets but a uint64_t on 32-bit ones (and
 * VK_USE_64_BIT_PTR_DEFINES may change that), the PFN types carry the
 * platform's calling convention, and kiln_vk_staged holds Vulkan structs
 * by value. Only vulkan_core.h, never vulkan.h: the platform parts
 * (VK_USE_PLATFORM_*_KHR) are still the application's to choose with a
 * later #include <vulkan/vulkan.h>. Vulkan's header declares its
 * prototypes unless VK_NO_PROTOTYPES is defined: with a loader of your own
 * (volk and the like), define VK_NO_PROTOTYPES before including kiln.h,
 * as you would before vulkan.h.
 *
 * Where the Vulkan headers cannot be found (__has_include says so), or
 * KILN_NO_VULKAN_HEADERS is defined, that part is left out and
 * KILN_VK_TYPES is 0; it is 1 when it is declared.
 */
#if !defined(VK_VERSION_1_0) && !defined(KILN_NO_VULKAN_HEADERS)
#if defined(__has_include)
#if __has_include(<vulkan/vulkan_core.h>)
#include <vulkan/vulkan_core.h>
#endif
#else
#include <vulkan/vulkan_core.h>
#endif
#endif
#if defined(VK_VERSION_1_0)
#define KILN_VK_TYPES 1
#else
#define KILN_VK_TYPES 0
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* The push-constant bytes every kiln pipeline layout offers (offset 0). */
#define KILN_VK_PUSH_CONSTANT_BYTES 16u

/* VK_FORMAT_R8G8B8A8_UNORM: the color format graphics pipelines get by default. */
#define KILN_VK_DEFAULT_COLOR_FORMAT 37u

/* The pipeline cache's file name inside a cache folder. */
#define KILN_VK_CACHE_FILE "pipelines.vkc"

/* A Vulkan context: instance, device, queue, pipeline layout and cache. */
struct kiln_vk;

/* A pipeline made by kiln_vk_compute_pipeline or kiln_vk_graphics_pipeline. */
struct kiln_vk_pipeline;

/* An application's own Vulkan objects (declared with the direct access
 * below). */
struct kiln_vk_external;

/* A shader module kept alive on purpose (the baseline "keep modules" mode). */
struct kiln_vk_module;

/* How kiln_vk_create sets up. Zero-initialise, then set what you need. */
struct kiln_vk_options {
    size_t size; /* sizeof, as KILN_VK_OPTIONS_INIT sets it (docs/abi.md) */
    /* When true, use the physical device at index `device` in
     * vkEnumeratePhysicalDevices order (`kiln prepare --device N`). When
     * false (the zeroed default), kiln picks the first discrete GPU, else
     * the first device. */
    bool use_device_index;
    unsigned device;
    /* The folder holding pipelines.vkc: it is loaded by kiln_vk_create
     * (when its header matches this device) and written by
     * kiln_vk_cache_save. NULL: the pipeline cache lives in memory only. */
    const char *cache_dir;
    /* No VkPipelineCache at all, so every build compiles (benchmarks). */
    bool no_pipeline_cache;
    /* Make VkShaderModule objects even when VK_KHR_maintenance5 would let
     * kiln chain the create info instead (to compare the two). */
    bool force_modules;
    /* Use render passes even where dynamic rendering is available (to test
     * the fallback, or to step around a driver bug). */
    bool no_dynamic_rendering;
    /* File I/O for pipelines.vkc; NULL: kiln_io_default(). Must outlive
     * the context. */
    const struct kiln_io *io;
    /* The loader library to open; NULL: "libvulkan.so.1" (Linux) or
     * "vulkan-1.dll" (Windows). */
    const char *loader;
    /* Run SPIR-V's validator (SPIRV-Tools, Vulkan 1.1 rules) on every stage
     * before a driver sees it, as kiln_vk_set_validation(vk, true) does. */
    bool validate;
    /* The application's own Vulkan objects to build in, instead of making
     * an instance and a device (struct kiln_vk_external, declared whenever
     * the Vulkan headers are there: KILN_VK_TYPES); NULL: kiln makes its
     * own. Copied by kiln_vk_create. */
    const struct kiln_vk_external *external;
    /* Device extensions to enable beside kiln's own, for pipelines a
     * builder makes (kiln_builder.device_extensions asks for them through
     * kiln_prepare): each is enabled only when the device offers it, and
     * for the ones kiln knows only with the feature it needs and the
     * extensions it depends on, which must be in the list too:
     * VK_KHR_pipeline_library; VK_EXT_graphics_pipeline_library (with
     * VK_KHR_pipeline_library; graphicsPipelineLibrary);
     * VK_KHR_deferred_host_operations; VK_KHR_acceleration_structure
     * (Vulkan 1.2, with VK_KHR_deferred_host_operations;
     * accelerationStructure and bufferDeviceAddress);
     * VK_KHR_ray_tracing_pipeline (with VK_KHR_acceleration_structure;
     * rayTracingPipeline). Those of pipeline state with a feature
     * structure (docs/vk.md has the table: depth clip enable, line
     * rasterization, extended dynamic state 1-3, ...) are enabled with
     * every feature the device reports for them. Any other name is
     * enabled when offered, with no feature. One left out is logged at info, never an error; ask
     * kiln_vk_extension_enabled which were enabled. Ignored with
     * `external`. The names are read during kiln_vk_create only. */
    const char *const *extra_extensions;
    uint32_t extra_extension_count;
    /* The application's VkAllocationCallbacks, passed to every vkCreate*,
     * vkAllocate* and vkDestroy* kiln makes on this context (its instance
     * and device when kiln makes them; with `external`, kiln's own objects
     * on the application's device), and to builders through
     * kiln_vk_allocator. Copied by kiln_vk_create. NULL: the driver's own
     * allocator (kiln_set_allocator's is not handed to the driver). */
    const struct VkAllocationCallbacks *allocator;
    /* Pipeline libraries (fast-link, docs/vk.md "Pipeline libraries").
     * kiln enables VK_EXT_graphics_pipeline_library (with
     * VK_KHR_pipeline_library and only its graphicsPipelineLibrary
     * feature) wherever the device offers it; true leaves both out, as on
     * a device without them (tests, or a driver bug). With `external`,
     * the application says what it enabled
     * (kiln_vk_external.graphics_pipeline_library). */
    bool no_pipeline_library;
};
#define KILN_VK_OPTIONS_INIT KILN_STRUCT_INIT(kiln_vk_options)

/* What became of pipelines.vkc when the context was made. */
enum kiln_vk_cache_state {
    KILN_VK_CACHE_OFF = 0,      /* no pipeline cache (no_pipeline_cache) */
    KILN_VK_CACHE_MEMORY = 1,   /* a pipeline cache without a file (no cache_dir) */
    KILN_VK_CACHE_NEW = 2,      /* no file yet: started empty */
    KILN_VK_CACHE_LOADED = 3,   /* the file's header matched: its data is used */
    KILN_VK_CACHE_REJECTED = 4, /* the file was not used; cache_note says why */
};

/* What kiln_vk_info reports about the context. */
struct kiln_vk_info {
    char device_name[256];
    char driver_info[256]; /* "<driverName> <driverInfo>" (Vulkan 1.2+), else "" */
    uint32_t device_index; /* in vkEnumeratePhysicalDevices order */
    uint32_t device_count;
    uint32_t vendor_id;
    uint32_t device_id;
    uint32_t api_version;    /* the device's (VK_MAKE_API_VERSION packing) */
    uint32_t driver_version; /* vendor-specific packing */
    bool discrete;
    bool maintenance5;      /* VK_KHR_maintenance5 is enabled */
    bool chained_stages;    /* stages chain their create info: no module objects */
    bool dynamic_rendering; /* graphics pipelines need no render pass */
    uint8_t pipeline_cache_uuid[16];
    enum kiln_vk_cache_state cache_state;
    size_t cache_loaded_bytes; /* bytes of pipelines.vkc handed to the driver */
    char cache_note[256];      /* why pipelines.vkc was rejected; "" otherwise */
    /* Ask before compiling (docs/runtime.md, "Ask before compiling"). */
    /* Pipelines kiln creates chain VkPipelineCreationFeedbackCreateInfo
     * (Vulkan 1.3 or VK_EXT_pipeline_creation_feedback): the driver says
     * per pipeline whether its caches held it and how long it took. */
    bool creation_feedback;
    /* pipelineCreationCacheControl is enabled (Vulkan 1.3 or
     * VK_EXT_pipeline_creation_cache_control): a create may ask the driver
     * to answer VK_PIPELINE_COMPILE_REQUIRED instead of compiling
     * (KILN_VK_PIPELINE_NO_COMPILE, KILN_BUILD_PROBE). */
    bool compile_probe;
    /* Pipeline libraries (vk_library.c). */
    bool pipeline_library;     /* VK_EXT_graphics_pipeline_library is enabled:
                                * kiln_vk_graphics.link can link from parts */
    bool library_fast_linking; /* the device says linking without link-time
                                * optimisation is fast
                                * (graphicsPipelineLibraryFastLinking) */
};

/* Counters, all updated atomically as work happens. */
struct kiln_vk_stats {
    size_t size;              /* sizeof, as KILN_VK_STATS_INIT sets it (docs/abi.md) */
    int64_t live_modules;     /* VkShaderModule objects that exist now (kept ones included) */
    int64_t peak_modules;     /* the most that existed at once (see kiln_vk_reset_peak) */
    uint64_t modules_created; /* every VkShaderModule made so far */
    uint64_t stages_chained;  /* stages passed as chained create info (maintenance5) */
    uint64_t pipelines_built;
    uint64_t pipelines_failed; /* a stage or the pipeline itself failed */
    int64_t live_pipelines;
    /* Creation feedback of the pipelines kiln_vk creates itself
     * (kiln_vk_compute_pipeline, kiln_vk_graphics_pipeline,
     * kiln_vk_pipeline_create), with kiln_vk_info.creation_feedback. */
    uint64_t feedback_pipelines;  /* pipelines the driver gave valid feedback for */
    uint64_t feedback_cache_hits; /* of those, found in the application's pipeline cache */
    uint64_t feedback_driver_ns;  /* the driver's own time for them, summed */
    /* Creates with KILN_VK_PIPELINE_NO_COMPILE the driver answered with
     * VK_PIPELINE_COMPILE_REQUIRED (not counted in pipelines_failed). */
    uint64_t compile_required;
    /* Pipeline libraries (kiln_vk_graphics.link). */
    uint64_t pipelines_linked; /* pipelines linked from library parts */
    uint64_t parts_built;      /* library parts built (each once per key) */
    uint64_t parts_reused;     /* library parts taken from the context's table */
    int64_t live_parts;        /* parts held now (destroyed with the context) */
};
#define KILN_VK_STATS_INIT KILN_STRUCT_INIT(kiln_vk_stats)

/*
 * Loads the Vulkan loader, makes an instance (API 1.1 or later, with
 * portability enumeration when present), picks a device and makes it with
 * one queue that does graphics and compute, VK_KHR_maintenance5 and dynamic
 * rendering when available, the shared pipeline layout, and the pipeline
 * cache (loading cache_dir/pipelines.vkc when its header matches the
 * device: length, version, vendorID, deviceID, pipelineCacheUUID; a file
 * that does not match is logged with the reason and the cache starts
 * empty). `options` may be NULL. With options->external, no loader is
 * opened and no instance or device made: kiln wraps the application's
 * (see struct kiln_vk_external) and makes only its pipeline layout, and
 * the pipeline cache when the application gives none.
 * @return 0 and the context in *vk; KILN_ENOTSUP when there is no loader,
 * no usable driver or no device with a graphics+compute queue (logged as
 * "Vulkan not available: ..."); KILN_EINVAL for a device index out of
 * range; KILN_EVULKAN for another failed Vulkan call; KILN_ENOMEM.
 * Thread-safe (each call makes its own context).
 */
KILN_API int kiln_vk_create(const struct kiln_vk_options *options, struct kiln_vk **vk);

/*
 * The allocation callbacks the context passes to Vulkan
 * (kiln_vk_options.allocator, copied), for a builder's own vkCreate* and
 * vkDestroy* calls: kiln destroys a pipeline a builder hands back with
 * them, so a builder creates it with them too.
 * @return the callbacks, or NULL (none given, or a NULL `vk`): the
 * driver's own allocator. Thread-safe.
 */
KILN_API const struct VkAllocationCallbacks *kiln_vk_allocator(const struct kiln_vk *vk);

/*
 * Turns validation of every stage on or off: with it, each stage's SPIR-V
 * goes through the SPIR-V validator (SPIRV-Tools, Vulkan 1.1 rules) before
 * the driver sees it, and a stage that fails is logged with the validator's
 * message and left unmade, like any other failed stage. Without it, a
 * translator's malformed output reaches the driver's compiler, and some
 * drivers end the process on it (NVIDIA's 580 driver aborts in its
 * compiler on a structurally well-formed but meaningless module). The
 * check costs a fraction of a pipeline build. kiln_prepare and
 * kiln_warm_start validate every stage themselves before they build
 * (kiln_vk_validate_spirv), whatever this setting: a record's checksum
 * says its words are those stored, not that they were ever validated.
 * @return 0, or KILN_ENOTSUP when this build has no SPIRV-Tools (then
 * nothing is validated).
 * Thread safety: not beside builds on the context (a plain store): set it
 * before building, not while other threads build.
 */
KILN_API int kiln_vk_set_validation(struct kiln_vk *vk, bool on);

/*
 * Destroys the context, every pipeline and kept module still alive in it
 * (their pointers become invalid), and the device and instance. It does not
 * save the pipeline cache: call kiln_vk_cache_save first. NULL is a no-op.
 * Not thread-safe: no other call on `vk` may run.
 */
KILN_API void kiln_vk_destroy(struct kiln_vk *vk);

/*
 * (0.2) The text of the last failure of a call on this context, as
 * kiln_cache_errmsg: for example "kiln_vk_graphics_pipeline: gen-3: ...
 * (KILN_EVULKAN)". Set by kiln_vk_cache_save, kiln_vk_compute_pipeline,
 * kiln_vk_graphics_pipeline, kiln_vk_module_create, kiln_vk_stage_module
 * and kiln_vk_pipeline_adopt when they fail; left as it was by a call that
 * succeeds; "" before any failure. A failed kiln_vk_create has no context:
 * read kiln_last_errmsg() on the same thread.
 * @return a string owned by the calling thread, valid until it calls this
 * again ("kiln_vk_errmsg: no context" for NULL). Thread-safe.
 */
KILN_API const char *kiln_vk_errmsg(const struct kiln_vk *vk);

/* @return the context's description, valid for the context's life.
 * (Named kiln_vk_info before 0.2, a name C++ took for the struct's.)
 * Thread-safe. */
KILN_API const struct kiln_vk_info *kiln_vk_get_info(const struct kiln_vk *vk);

#ifndef __cplusplus
/* Deprecated: kiln_vk_get_info's name before 0.2, still exported for
 * programs built against 0.1; C only (in C++ it hid the struct).
 * Thread-safe. */
KILN_API const struct kiln_vk_info *kiln_vk_info(const struct kiln_vk *vk)
    KILN_DEPRECATED("use kiln_vk_get_info");
#endif

/*
 * Whether kiln enabled device extension `name` on the device it made (its
 * own, kiln_vk_options.extra_extensions and portability included).
 * @return true when enabled; false otherwise, and always with
 * kiln_vk_options.external (kiln cannot ask what the application enabled).
 * Thread-safe; the answer does not change for the context's life.
 */
KILN_API bool kiln_vk_extension_enabled(const struct kiln_vk *vk, const char *name);

/* Reads the counters. (Named kiln_vk_stats before 0.2, a name C++ took
 * for the struct's.) Thread-safe. */
KILN_API void kiln_vk_get_stats(const struct kiln_vk *vk, struct kiln_vk_stats *stats);

#ifndef __cplusplus
/* Deprecated: kiln_vk_get_stats's name before 0.2, still exported for
 * programs built against 0.1; C only (in C++ it hid the struct).
 * Thread-safe. */
KILN_API void kiln_vk_stats(const struct kiln_vk *vk, struct kiln_vk_stats *stats)
    KILN_DEPRECATED("use kiln_vk_get_stats");
#endif

/* Starts a new peak: peak_modules becomes live_modules. Thread-safe. */
KILN_API void kiln_vk_reset_peak(struct kiln_vk *vk);

/*
 * One shader stage of a pipeline: a packed blob, opened words, or a kept
 * module.
 * Everything is borrowed for the call.
 */
struct kiln_vk_stage {
    size_t size;      /* sizeof, as KILN_VK_STAGE_INIT sets it (docs/abi.md) */
    const void *blob; /* packed SPIR-V (kiln_pack) */
    size_t blob_size;
    const struct kiln_pack_dict *dict;   /* the dictionary the blob needs, or NULL */
    const struct kiln_vk_module *module; /* when set, used instead of the blob */
    const char *entry;                   /* the entry point; NULL: "main" */
    /* A VkSpecializationInfo for the stage, or NULL; borrowed until the
     * pipeline call (kiln_vk_stage_release). */
    const void *specialization;
    /* The SPIR-V already unpacked and checked (a stage of a program opened
     * by kiln_program_open); when set (and no module), used as it is
     * instead of the blob: not unpacked, copied or checked again. Borrowed
     * until the pipeline call (kiln_vk_stage_release). */
    const uint32_t *words;
    size_t nwords;
};
#define KILN_VK_STAGE_INIT KILN_STRUCT_INIT(kiln_vk_stage)

/* The stages and state of a graphics pipeline. */
struct kiln_vk_link_result;
struct kiln_vk_graphics {
    size_t size; /* sizeof, as KILN_VK_GRAPHICS_INIT sets it (docs/abi.md) */
    /* Each stage is its own growable struct (KILN_VK_STAGE_INIT), borrowed
     * for the call; both required. */
    const struct kiln_vk_stage *vertex;
    const struct kiln_vk_stage *fragment;
    uint32_t color_format; /* a VkFormat; 0: KILN_VK_DEFAULT_COLOR_FORMAT */
    /* How to build it: KILN_VK_LINK_NONE (0, one monolithic create) or
     * KILN_VK_LINK_FAST (linked from library parts, no link-time
     * optimisation, where kiln_vk_info.pipeline_library; a monolithic
     * create elsewhere). */
    uint32_t link;
    /* Optional out (NULL: none): what the link did. */
    struct kiln_vk_link_result *link_result;
};
#define KILN_VK_GRAPHICS_INIT KILN_STRUCT_INIT(kiln_vk_graphics)

/* kiln_vk_graphics.link. KILN_VK_LINK_PARTS builds the four library
 * parts only (parts ahead of the draw; docs/runtime.md): the call answers
 * 0 with *pipeline NULL, KILN_ENOTSUP on a context without pipeline
 * libraries, KILN_EVULKAN when a part failed. */
#define KILN_VK_LINK_NONE  0u
#define KILN_VK_LINK_FAST  1u
#define KILN_VK_LINK_PARTS 2u

/* What a kiln_vk_graphics_pipeline with KILN_VK_LINK_FAST did. */
struct kiln_vk_link_result {
    size_t size;           /* sizeof, as KILN_VK_LINK_RESULT_INIT sets it (docs/abi.md) */
    bool linked;           /* the pipeline was linked from parts (else monolithic) */
    uint32_t parts_built;  /* parts this call built (0 to 4) */
    uint32_t parts_reused; /* parts it took from the context's table */
};
#define KILN_VK_LINK_RESULT_INIT KILN_STRUCT_INIT(kiln_vk_link_result)

/*
 * Builds a compute pipeline from one stage. `name` names the program in
 * log lines (NULL: "(unnamed)"). The stage's module exists only during this
 * call (none at all with maintenance5).
 * @return 0 and the pipeline in *pipeline (destroy it with
 * kiln_vk_pipeline_destroy); on failure, after one warning naming `name`,
 * the stage and the VkResult: the unpack error (KILN_ECORRUPT_BLOB, ...),
 * KILN_EFORMAT for words that are not SPIR-V, KILN_ENOTSUP for a stage
 * whose resources kiln's layout does not hold (a binding other than one
 * storage buffer at set 0 binding 0, push constants over
 * KILN_VK_PUSH_CONSTANT_BYTES: checked before the driver, which would
 * crash on it), or KILN_EVULKAN. Thread-safe.
 */
KILN_API int kiln_vk_compute_pipeline(struct kiln_vk *vk, const char *name,
                                      const struct kiln_vk_stage *stage,
                                      struct kiln_vk_pipeline **pipeline);

/*
 * Builds a graphics pipeline from a vertex and a fragment stage, as
 * kiln_vk_compute_pipeline does. At most two modules exist during the call.
 * With desc->link KILN_VK_LINK_FAST on a context with pipeline libraries,
 * the pipeline is linked from four library parts (vertex input,
 * pre-rasterization, fragment shader, fragment output), each built once
 * per key and kept in the context until kiln_vk_destroy; a part that
 * cannot be built makes the call fall back to a monolithic create
 * (link_result->linked false).
 * @return as kiln_vk_compute_pipeline. Thread-safe.
 */
KILN_API int kiln_vk_graphics_pipeline(struct kiln_vk *vk, const char *name,
                                       const struct kiln_vk_graphics *desc,
                                       struct kiln_vk_pipeline **pipeline);

/* Destroys a pipeline. NULL is a no-op. Thread-safe (not for the same pipeline). */
KILN_API void kiln_vk_pipeline_destroy(struct kiln_vk *vk, struct kiln_vk_pipeline *pipeline);

/* @return the VkPipeline handle, as an integer (cast it back to VkPipeline).
 * Thread-safe. */
KILN_API uint64_t kiln_vk_pipeline_handle(const struct kiln_vk_pipeline *pipeline);

/* What the driver said of one pipeline it created
 * (VkPipelineCreationFeedback), for kiln_vk_pipeline_feedback. */
struct kiln_vk_feedback {
    size_t size; /* sizeof, as KILN_VK_FEEDBACK_INIT sets it (docs/abi.md) */
    /* The driver filled the feedback (false: no feedback on this device,
     * a pipeline a builder made and kiln adopted, or the driver left it
     * out); the two below mean nothing without it. */
    bool valid;
    /* The application's pipeline cache held the pipeline: the driver
     * compiled nothing (VK_PIPELINE_CREATION_FEEDBACK_APPLICATION_PIPELINE_CACHE_HIT_BIT). */
    bool cache_hit;
    uint64_t driver_ns; /* the driver's own time to create it */
};
#define KILN_VK_FEEDBACK_INIT KILN_STRUCT_INIT(kiln_vk_feedback)

/*
 * Reads the creation feedback the driver gave for `pipeline` (kiln_vk's own
 * creates chain it where kiln_vk_info.creation_feedback).
 * @return 0 with *out filled (valid false when there is none), or
 * KILN_EINVAL for a NULL argument or a bad size. Thread-safe.
 */
KILN_API int kiln_vk_pipeline_feedback(const struct kiln_vk_pipeline *pipeline,
                                       struct kiln_vk_feedback *out);

/* A flag of kiln_vk_pipeline_desc: create only what the driver's caches
 * already hold (VK_PIPELINE_CREATE_FAIL_ON_PIPELINE_COMPILE_REQUIRED_BIT);
 * a pipeline that would need a compile is answered at once with
 * KILN_ECOMPILE_REQUIRED. Needs kiln_vk_info.compile_probe (KILN_ENOTSUP
 * without it). */
#define KILN_VK_PIPELINE_NO_COMPILE 0x1u

/* One pipeline of kiln's own shapes, for kiln_vk_pipeline_create. */
struct kiln_vk_pipeline_desc {
    size_t size;      /* sizeof, as KILN_VK_PIPELINE_DESC_INIT sets it (docs/abi.md) */
    const char *name; /* for log lines; NULL: "(unnamed)" */
    /* Exactly one of the two: a compute stage, or a graphics pair. */
    const struct kiln_vk_stage *compute;
    const struct kiln_vk_graphics *graphics;
    uint32_t flags; /* KILN_VK_PIPELINE_* */
};
#define KILN_VK_PIPELINE_DESC_INIT KILN_STRUCT_INIT(kiln_vk_pipeline_desc)

/*
 * kiln_vk_compute_pipeline or kiln_vk_graphics_pipeline, with flags.
 * @return as they do; also KILN_ECOMPILE_REQUIRED (no warning logged, not
 * counted as failed) when KILN_VK_PIPELINE_NO_COMPILE is set and the
 * driver's caches lack the pipeline, KILN_ENOTSUP for that flag on a
 * device without kiln_vk_info.compile_probe, KILN_EINVAL for a desc with
 * neither or both shapes. Thread-safe.
 */
KILN_API int kiln_vk_pipeline_create(struct kiln_vk *vk, const struct kiln_vk_pipeline_desc *desc,
                                     struct kiln_vk_pipeline **pipeline);

/*
 * The baseline "keep modules" mode: unpacks a blob and makes a
 * VkShaderModule that stays alive until kiln_vk_module_destroy (or
 * kiln_vk_destroy). Pass it in kiln_vk_stage.module. It counts in
 * live_modules. This is how a renderer without kiln holds every module for
 * the whole preparation; `kiln bench prepare` compares its memory with the
 * transient way. It makes a real module even with maintenance5.
 * @return 0 and the module, or an error as kiln_vk_compute_pipeline.
 * Thread-safe.
 */
KILN_API int kiln_vk_module_create(struct kiln_vk *vk, const char *name,
                                   const struct kiln_vk_stage *stage,
                                   struct kiln_vk_module **module);

/* Destroys a kept module. NULL is a no-op. Thread-safe. */
KILN_API void kiln_vk_module_destroy(struct kiln_vk *vk, struct kiln_vk_module *module);

/*
 * Writes the pipeline cache's data to cache_dir/pipelines.vkc through
 * kiln_io_replace_file (a temporary file, synced, renamed over the old one).
 * May run while pipelines are being built.
 * @return 0; KILN_EINVAL when the context has no cache folder or no
 * pipeline cache; KILN_EVULKAN; or the I/O error of the step that failed.
 * Thread safety: any thread, beside builds; not beside another save of the
 * same context (both would write "pipelines.vkc.tmp").
 */
KILN_API int kiln_vk_cache_save(struct kiln_vk *vk);

/* The name of a VkResult value ("VK_ERROR_OUT_OF_HOST_MEMORY"); "VK_?" if
 * unknown. Thread-safe. */
KILN_API const char *kiln_vk_result_name(int result);

/* ---------------------------------------------------------------------------
 * Direct Vulkan access, for renderers with their own pipeline layouts.
 * Declared whenever the Vulkan headers are there (KILN_VK_TYPES, above).
 * ------------------------------------------------------------------------ */
#if KILN_VK_TYPES

/*
 * An application's own Vulkan objects, for kiln_vk_options.external. kiln
 * builds in them and never destroys them: kiln_vk_destroy destroys only
 * what kiln made (its pipeline layout, render passes, and the pipeline
 * cache when it made that too). They must outlive the context.
 */
struct kiln_vk_external {
    size_t size; /* sizeof, as KILN_VK_EXTERNAL_INIT sets it (docs/abi.md) */
    /* The loader's (or the application's) vkGetInstanceProcAddr; required.
     * kiln then opens no loader of its own. */
    PFN_vkGetInstanceProcAddr get_instance_proc_addr;
    VkInstance instance;
    VkPhysicalDevice physical_device;
    VkDevice device;
    /* A queue family of the device that does graphics and compute. */
    uint32_t queue_family;
    /* The application's pipeline cache; VK_NULL_HANDLE: kiln makes one as
     * it would (over kiln_vk_options.cache_dir's pipelines.vkc). */
    VkPipelineCache pipeline_cache;
    /* What the application enabled on the device (kiln cannot ask): the
     * Vulkan version it was made for (VK_MAKE_API_VERSION; 0: 1.1),
     * VK_KHR_maintenance5's maintenance5 feature, and dynamic rendering
     * (the 1.3 feature or VK_KHR_dynamic_rendering). */
    uint32_t api_version;
    bool maintenance5;
    bool dynamic_rendering;
    /* The application enabled pipelineCreationCacheControl (the 1.3
     * feature or VK_EXT_pipeline_creation_cache_control's): kiln may
     * probe with it (kiln_vk_info.compile_probe). Creation feedback needs
     * no feature: kiln chains it on Vulkan 1.3 devices. */
    bool pipeline_creation_cache_control;
    /* The application enabled VK_EXT_graphics_pipeline_library (and
     * VK_KHR_pipeline_library) with the graphicsPipelineLibrary feature:
     * kiln may link from library parts (kiln_vk_info.pipeline_library,
     * unless kiln_vk_options.no_pipeline_library). */
    bool graphics_pipeline_library;
};
#define KILN_VK_EXTERNAL_INIT KILN_STRUCT_INIT(kiln_vk_external)

/* The context's Vulkan objects. They belong to the context, or, with
 * kiln_vk_options.external, to the application. */
struct kiln_vk_handles {
    size_t size; /* sizeof, as KILN_VK_HANDLES_INIT sets it (docs/abi.md) */
    PFN_vkGetInstanceProcAddr get_instance_proc_addr;
    VkInstance instance;
    VkPhysicalDevice physical_device;
    VkDevice device;
    uint32_t queue_family;
    VkQueue queue;
    VkPipelineCache pipeline_cache;   /* VK_NULL_HANDLE with no_pipeline_cache */
    VkPipelineLayout pipeline_layout; /* the shared layout described above */
    VkDescriptorSetLayout set_layout; /* set 0 of it */
};
#define KILN_VK_HANDLES_INIT KILN_STRUCT_INIT(kiln_vk_handles)

/*
 * Takes over a pipeline made on the context's device (by a builder): it is
 * then a kiln pipeline like those kiln_vk_compute_pipeline makes, destroyed
 * by kiln_vk_pipeline_destroy or kiln_vk_destroy, and counted in
 * live_pipelines.
 * @return 0 and the pipeline in *out; KILN_EINVAL for a null handle;
 * KILN_ENOMEM (the pipeline is destroyed then). Thread-safe.
 */
KILN_API int kiln_vk_pipeline_adopt(struct kiln_vk *vk, VkPipeline pipeline,
                                    struct kiln_vk_pipeline **out);

/* Fills *out with the context's handles. Thread-safe. */
KILN_API void kiln_vk_get_handles(const struct kiln_vk *vk, struct kiln_vk_handles *out);

/*
 * One stage made ready for vkCreate*Pipelines by kiln_vk_stage_module. Copy
 * `info` into your VkPipelineShaderStageCreateInfo array; keep this struct
 * itself in place (info.pNext may point into it) until kiln_vk_stage_release.
 */
struct kiln_vk_staged {
    size_t size; /* sizeof, as KILN_VK_STAGED_INIT sets it (docs/abi.md) */
    VkPipelineShaderStageCreateInfo info;
    VkShaderModuleCreateInfo module_info; /* chained into info.pNext with maintenance5 */
    VkShaderModule module;                /* made here and destroyed by release, or null */
    uint32_t *words;                      /* unpacked SPIR-V owned by this stage, or NULL */
};
#define KILN_VK_STAGED_INIT KILN_STRUCT_INIT(kiln_vk_staged)

/*
 * Unpacks `src` and fills `out` for one stage of a pipeline: either a new
 * VkShaderModule (made now, destroyed by kiln_vk_stage_release), or, with
 * maintenance5, the create info chained into out->info.pNext. With
 * src->module set, the kept module is used as it is. Call
 * kiln_vk_stage_release right after the vkCreate*Pipelines call, whatever it
 * returned.
 * @return 0; or, after one warning naming `name` and the stage, the unpack
 * error, KILN_EFORMAT (not SPIR-V) or KILN_EVULKAN. `out` needs no release
 * after an error. Thread-safe.
 */
KILN_API int kiln_vk_stage_module(struct kiln_vk *vk, const char *name,
                                  const struct kiln_vk_stage *src, VkShaderStageFlagBits stage,
                                  struct kiln_vk_staged *out);

/* Destroys the stage's transient module and frees its words. Thread-safe. */
KILN_API void kiln_vk_stage_release(struct kiln_vk *vk, struct kiln_vk_staged *staged);

/* The parts of a graphics pipeline (kiln_vk_link_graphics's keys). */
#define KILN_VK_PART_VERTEX_INPUT      0
#define KILN_VK_PART_PRE_RASTERIZATION 1
#define KILN_VK_PART_FRAGMENT_SHADER   2
#define KILN_VK_PART_FRAGMENT_OUTPUT   3
#define KILN_VK_PARTS                  4

/*
 * Creates the graphics pipeline of the whole create info `ci` (as
 * vkCreateGraphicsPipelines would take it, on the context's device) by
 * linking four library parts, without link-time optimisation: keys[k]
 * names part k (KILN_VK_PART_*) in the context's parts table, where a
 * part not there is cut from `ci` and built once (docs/vk.md, "Pipeline
 * libraries"). The caller's keys must cover all the state the part
 * depends on: two create infos whose part-k state differs must have
 * different keys[k]. Only plain pipelines are linked: `ci` with flags 0,
 * vertex, tessellation, geometry and fragment stages, rasterization on,
 * and no pNext structure but VkPipelineRenderingCreateInfo; any other is
 * refused with KILN_ENOTSUP before the driver, as is a context without
 * pipeline libraries. When a part or the link fails, the pipeline is made
 * by a monolithic create of `ci` (res->linked false). With `out` NULL,
 * only the parts are built into the table (parts ahead of the draw: a
 * later call with the same keys only links), and a failed part answers
 * KILN_EVULKAN (no fallback).
 * @return 0 with the pipeline in *out (the caller's: destroy it with
 * vkDestroyPipeline and kiln_vk_allocator), *res (optional) saying what
 * was done; KILN_ENOTSUP (nothing made); KILN_EVULKAN; KILN_EINVAL for a
 * NULL vk, ci or keys. Thread-safe.
 */
KILN_API int kiln_vk_link_graphics(struct kiln_vk *vk, const VkGraphicsPipelineCreateInfo *ci,
                                   const struct kiln_key keys[KILN_VK_PARTS], VkPipeline *out,
                                   struct kiln_vk_link_result *res);

#endif /* KILN_VK_TYPES */

#ifdef __cplusplus
}
#endif

#endif /* KILN_VK_H */
