/*
 * test_foz_build.c - pipeline closures of the Fossilize archives and their
 * builder on a real Vulkan device.
 *
 * The closure cases need no device: every pipeline of every corpus archive
 * gets a closure, the same pipeline recorded in two archives gives the same
 * bytes, and each closure holds the objects its pipeline references.
 *
 * The build cases make their own instance and device (the Vulkan loader
 * opened at run time, every feature the device has enabled) and build
 * every graphics and compute pipeline of the 48 archives with the
 * archive's own layouts, render passes and constants, from the archive's
 * own SPIR-V. One of them runs under the Khronos validation layer with a
 * debug-utils messenger that counts errors. Without a Vulkan device they
 * exit 77 (skipped), and so do the cases that need nothing but the corpus
 * when it is absent.
 */
#define VK_NO_PROTOTYPES
#include <vulkan/vulkan.h>

#include "kiln_test.h"
#include "kiln/foz.h"
#include "foz_corpus.h"

#include <json.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>

/* ---------------------------------------------------------------------------
 * The corpus
 * ------------------------------------------------------------------------ */

/* What the shared corpus holds (issue 14; test_foz.c counts the modules). */
#define CORPUS_ARCHIVES 48
#define CORPUS_GRAPHICS 110
#define CORPUS_COMPUTE  6

/* @return false (after one "skipped:" line) when the shared corpus is
 * absent: the cases that also check what needs no corpus go on to pass;
 * those that need nothing else call kt_require_corpus first (exit 77). */
static bool corpus(struct archives *out)
{
    corpus_archives(out);
    if (out->n == 0) {
        printf("skipped: no Fossilize archives under %s/foz (the shared corpus)\n",
               kt_corpus_dir());
        return false;
    }
    return true;
}

/* One distinct pipeline: its tag and hash, and its closure's bytes. */
struct seen {
    uint64_t tag, hash;
    uint8_t *bytes;
    size_t size;
    struct kiln_key key;
};

struct seen_set {
    struct seen *v;
    size_t n, cap;
};

static struct seen *seen_find(struct seen_set *s, uint64_t tag, uint64_t hash)
{
    for (size_t i = 0; i < s->n; i++)
        if (s->v[i].tag == tag && s->v[i].hash == hash)
            return &s->v[i];
    return NULL;
}

static void seen_free(struct seen_set *s)
{
    for (size_t i = 0; i < s->n; i++)
        kiln_foz_closure_free(s->v[i].bytes);
    free(s->v);
    memset(s, 0, sizeof(*s));
}

/* ---------------------------------------------------------------------------
 * Closures (no device)
 * ------------------------------------------------------------------------ */

static bool contains(const uint8_t *bytes, size_t size, const char *text)
{
    size_t n = strlen(text);
    for (size_t i = 0; i + n <= size; i++)
        if (memcmp(bytes + i, text, n) == 0)
            return true;
    return false;
}

KT_CASE(corpus_closures)
{
    kt_require_corpus("foz");
    struct archives a;
    if (!corpus(&a))
        return;
    KT_CHECK_EQ(a.n, CORPUS_ARCHIVES);
    struct seen_set seen = {0};
    size_t graphics = 0, compute = 0, same = 0;
    /* The builder tells a closure's extensions from its first bytes. */
    struct kiln_builder fb = KILN_BUILDER_INIT;
    KT_REQUIRE_OK(kiln_foz_kiln_builder_create(NULL, &fb));
    KT_REQUIRE(fb.extensions_needed != NULL);
    for (size_t i = 0; i < a.n; i++) {
        struct kiln_foz *foz;
        struct kiln_foz_index *idx;
        KT_REQUIRE_OK(kiln_foz_open(NULL, a.path[i], &foz));
        KT_REQUIRE_OK(kiln_foz_index_create(foz, &idx));
        const struct kiln_foz_pipeline_ref *p;
        size_t n = kiln_foz_index_pipelines(idx, &p);
        for (size_t k = 0; k < n; k++) {
            uint8_t *bytes;
            size_t size;
            KT_REQUIRE_OK(kiln_foz_closure_make(idx, p[k].tag, p[k].hash, &bytes, &size));
            struct kiln_foz_closure_info info = KILN_FOZ_CLOSURE_INFO_INIT;
            KT_REQUIRE_OK(kiln_foz_closure_inspect(bytes, size, &info));
            KT_CHECK_EQ(info.tag, p[k].tag);
            KT_CHECK(info.hash == p[k].hash);
            KT_CHECK(info.stage_count >= 1);
            /* Never the ray-tracing set (the last three) for these. */
            uint64_t needed = fb.extensions_needed(fb.user, bytes, size);
            uint64_t rt_set = UINT64_C(7) << (fb.ndevice_extensions - 3);
            KT_CHECK_EQ(needed & rt_set, 0u);
            KT_CHECK_EQ(needed & 3u, p[k].tag == KILN_FOZ_TAG_GRAPHICS_PIPELINE ? 3u : 0u);
            /* Each stage's module is in the archive, and named in the closure. */
            struct kiln_foz_module mods[KILN_FOZ_MAX_STAGES];
            memset(mods, 0, sizeof(mods));
            for (uint32_t s = 0; s < info.stage_count; s++) {
                KT_CHECK_OK(kiln_foz_index_module(idx, info.modules[s], &mods[s]));
                char name[17];
                snprintf(name, sizeof(name), "%016" PRIx64, info.modules[s]);
                KT_CHECK(contains(bytes, size, name));
            }
            /* Every pipeline of the corpus has a layout; graphics ones a render pass. */
            KT_CHECK(contains(bytes, size, "\"pipelineLayouts\""));
            KT_CHECK(contains(bytes, size, "\"setLayouts\"") ||
                     contains(bytes, size, "\"setLayouts\":[]"));
            if (p[k].tag == KILN_FOZ_TAG_GRAPHICS_PIPELINE)
                KT_CHECK(contains(bytes, size, "\"renderPasses\""));
            struct kiln_key key;
            KT_CHECK_OK(kiln_foz_pipeline_key(bytes, size, mods, info.stage_count, &key));
            for (uint32_t s = 0; s < info.stage_count; s++)
                kiln_foz_module_free(&mods[s]);
            struct seen *old = seen_find(&seen, p[k].tag, p[k].hash);
            if (old) {
                /* The same pipeline from another archive: the same bytes and key. */
                KT_CHECK(old->size == size && memcmp(old->bytes, bytes, size) == 0);
                KT_CHECK(old->key.lo == key.lo && old->key.hi == key.hi);
                same++;
                kiln_foz_closure_free(bytes);
                continue;
            }
            if (seen.n == seen.cap) {
                seen.cap = seen.cap ? seen.cap * 2 : 64;
                seen.v = realloc(seen.v, seen.cap * sizeof(*seen.v));
                KT_REQUIRE(seen.v);
            }
            /* A distinct pipeline: a key no other has. */
            for (size_t q = 0; q < seen.n; q++)
                KT_CHECK(seen.v[q].key.lo != key.lo || seen.v[q].key.hi != key.hi);
            seen.v[seen.n++] = (struct seen){p[k].tag, p[k].hash, bytes, size, key};
            graphics += p[k].tag == KILN_FOZ_TAG_GRAPHICS_PIPELINE;
            compute += p[k].tag == KILN_FOZ_TAG_COMPUTE_PIPELINE;
        }
        kiln_foz_index_destroy(idx);
        kiln_foz_close(foz);
    }
    printf("closures: %zu graphics, %zu compute distinct; %zu met again in another archive\n",
           graphics, compute, same);
    KT_CHECK_EQ(graphics, CORPUS_GRAPHICS);
    KT_CHECK_EQ(compute, CORPUS_COMPUTE);
    kiln_foz_kiln_builder_destroy(&fb);
    seen_free(&seen);
    free_archives(&a);
}

KT_CASE(closure_errors)
{
    struct kiln_foz_closure_info info = KILN_FOZ_CLOSURE_INFO_INIT;
    KT_CHECK_EQ(kiln_foz_closure_inspect("{}", 2, &info), KILN_EFORMAT);
    KT_CHECK_EQ(kiln_foz_closure_inspect("not json", 8, &info), KILN_EFORMAT);
    const char *other = "{\"format\":\"kiln-foz-closure\",\"version\":99}";
    KT_CHECK_EQ(kiln_foz_closure_inspect(other, strlen(other), &info), KILN_EFORMAT);
    const char *nopipe = "{\"format\":\"kiln-foz-closure\",\"version\":1,\"kind\":\"compute\","
                         "\"pipeline\":\"0000000000000001\"}";
    KT_CHECK_EQ(kiln_foz_closure_inspect(nopipe, strlen(nopipe), &info), KILN_EPARSE);

    /* A pipeline whose layout is not in the archive has no closure. */
    struct archives a;
    if (!corpus(&a))
        return;
    struct kiln_foz *foz;
    struct kiln_foz_index *idx;
    KT_REQUIRE_OK(kiln_foz_open(NULL, a.path[0], &foz));
    KT_REQUIRE_OK(kiln_foz_index_create(foz, &idx));
    uint8_t *bytes;
    size_t size;
    KT_CHECK_EQ(kiln_foz_closure_make(idx, KILN_FOZ_TAG_GRAPHICS_PIPELINE, 1, &bytes, &size),
                KILN_ENOTFOUND);
    KT_CHECK_EQ(kiln_foz_closure_make(idx, KILN_FOZ_TAG_SAMPLER, 1, &bytes, &size), KILN_EINVAL);
    kiln_foz_index_destroy(idx);
    kiln_foz_close(foz);
    free_archives(&a);
}

/* Closures of pipelines that link libraries: their stages in builder order
 * (the pipeline's own, then each library's, depth-first, each library
 * once), for graphics pipeline libraries and ray tracing alike; a missing
 * library is refused, a cycle ends. Stages are {stage, module} pairs, the
 * module hashes 00..0a1 and so on. */
static const char gpl_closure[] =
    "{\"format\":\"kiln-foz-closure\",\"version\":1,\"kind\":\"graphics\","
    "\"pipeline\":\"0000000000000010\",\"graphicsPipelines\":{"
    "\"0000000000000010\":{\"flags\":0,\"stages\":[],\"pNext\":[{\"sType\":1000290000,"
    "\"libraries\":[\"0000000000000011\",\"0000000000000012\"]}]},"
    "\"0000000000000011\":{\"flags\":2048,\"stages\":[{\"stage\":1,"
    "\"module\":\"00000000000000a1\",\"name\":\"main\"}]},"
    "\"0000000000000012\":{\"flags\":2048,\"stages\":[{\"stage\":16,"
    "\"module\":\"00000000000000a2\",\"name\":\"main\"}],\"pNext\":[{\"sType\":1000290000,"
    "\"libraries\":[\"0000000000000011\"]}]}}}";

static const char rt_closure[] =
    "{\"format\":\"kiln-foz-closure\",\"version\":1,\"kind\":\"raytracing\","
    "\"pipeline\":\"0000000000000020\",\"raytracingPipelines\":{"
    "\"0000000000000020\":{\"flags\":0,\"stages\":[{\"stage\":256,"
    "\"module\":\"00000000000000b1\",\"name\":\"main\"}],"
    "\"libraryInfo\":{\"libraries\":[\"0000000000000021\"]}},"
    "\"0000000000000021\":{\"flags\":2048,\"stages\":[{\"stage\":2048,"
    "\"module\":\"00000000000000b2\",\"name\":\"main\"},{\"stage\":1024,"
    "\"module\":\"00000000000000b3\",\"name\":\"main\"}]}}}";

/* A closure whose pipeline links `lib`, with `rest` after it. */
static char *closure_linking(const char *lib, const char *rest)
{
    static char text[1024];
    snprintf(text, sizeof(text),
             "{\"format\":\"kiln-foz-closure\",\"version\":1,\"kind\":\"graphics\","
             "\"pipeline\":\"0000000000000010\",\"graphicsPipelines\":{"
             "\"0000000000000010\":{\"flags\":2048,\"stages\":[],\"pNext\":[{\"sType\":1000290000,"
             "\"libraries\":[\"%s\"]}]}%s}}",
             lib, rest);
    return text;
}

/*
 * The Fossilize builder's extensions_needed, by closure kind, in
 * KILN_FOZ_DEVICE_EXTENSIONS's order (the two library extensions, the
 * state ones with the shared ones first, the ray-tracing set last):
 * graphics all but the ray-tracing set, compute the shared ones, ray
 * tracing the ray-tracing set, the shared ones and pipeline libraries;
 * bytes not starting as kiln writes closures, all.
 */
KT_CASE(extensions_by_kind)
{
    struct kiln_builder fb = KILN_BUILDER_INIT;
    KT_REQUIRE_OK(kiln_foz_kiln_builder_create(NULL, &fb));
    KT_REQUIRE(fb.extensions_needed != NULL);
    static const char *const names[] = {KILN_FOZ_DEVICE_EXTENSIONS};
    const uint32_t n = (uint32_t)(sizeof(names) / sizeof(names[0]));
    KT_CHECK_EQ(fb.ndevice_extensions, n);
    KT_REQUIRE(n >= 2 + KILN_FOZ_SHARED_EXTENSION_COUNT + KILN_FOZ_RAYTRACING_EXTENSION_COUNT);
    for (uint32_t i = 0; i < n; i++)
        KT_CHECK(strcmp(fb.device_extensions[i], names[i]) == 0);
    KT_CHECK(strcmp(names[0], "VK_KHR_pipeline_library") == 0);
    KT_CHECK(strcmp(names[1], "VK_EXT_graphics_pipeline_library") == 0);
    KT_CHECK(strcmp(names[n - 3], "VK_KHR_deferred_host_operations") == 0);
    KT_CHECK(strcmp(names[n - 1], "VK_KHR_ray_tracing_pipeline") == 0);
    const uint64_t all = (UINT64_C(1) << n) - 1u;
    const uint64_t rt_set = all & ~((UINT64_C(1) << (n - 3)) - 1u);
    const uint64_t shared = ((UINT64_C(1) << KILN_FOZ_SHARED_EXTENSION_COUNT) - 1u) << 2;
    /* The graphics closure's answer names every state extension the
     * builder knows a pNext structure or dynamic state of. */
    static const char *const graphics_needs[] = {
        "VK_EXT_depth_clip_enable",       "VK_EXT_line_rasterization",
        "VK_EXT_provoking_vertex",        "VK_EXT_color_write_enable",
        "VK_EXT_extended_dynamic_state3", "VK_EXT_vertex_input_dynamic_state",
        "VK_EXT_custom_border_color",     "VK_EXT_depth_clip_control",
        "VK_EXT_transform_feedback",      "VK_EXT_mesh_shader"};
    uint64_t g = fb.extensions_needed(fb.user, gpl_closure, strlen(gpl_closure));
    KT_CHECK_EQ(g, all & ~rt_set);
    for (size_t k = 0; k < sizeof(graphics_needs) / sizeof(graphics_needs[0]); k++) {
        uint32_t i = 0;
        while (i < n && strcmp(names[i], graphics_needs[k]) != 0)
            i++;
        KT_CHECK(i < n && (g >> i & 1u));
    }
    const char *comp = "{\"format\":\"kiln-foz-closure\",\"version\":1,\"kind\":\"compute\","
                       "\"pipeline\":\"0000000000000001\"}";
    KT_CHECK_EQ(fb.extensions_needed(fb.user, rt_closure, strlen(rt_closure)),
                rt_set | shared | 1u);
    KT_CHECK_EQ(fb.extensions_needed(fb.user, comp, strlen(comp)), shared);
    KT_CHECK(strcmp(names[6], "VK_EXT_subgroup_size_control") == 0);
    /* Not the writer's own bytes: every extension (the build parses them). */
    const char *spaced = "{ \"format\": \"kiln-foz-closure\", \"version\": 1, \"kind\": "
                         "\"compute\" }";
    const char *v2 = "{\"format\":\"kiln-foz-closure\",\"version\":2,\"kind\":\"compute\"}";
    const char *other = "{\"format\":\"kiln-foz-closure\",\"version\":1,\"kind\":\"mesh\"}";
    KT_CHECK_EQ(fb.extensions_needed(fb.user, spaced, strlen(spaced)), all);
    KT_CHECK_EQ(fb.extensions_needed(fb.user, v2, strlen(v2)), all);
    KT_CHECK_EQ(fb.extensions_needed(fb.user, other, strlen(other)), all);
    KT_CHECK_EQ(fb.extensions_needed(fb.user, NULL, 0), all);
    /* Cut inside the kind's word: not read past the size. */
    size_t cut = strlen(comp) - strlen("ute\",\"pipeline\":\"0000000000000001\"}");
    KT_CHECK_EQ(fb.extensions_needed(fb.user, comp, cut), all);
    kiln_foz_kiln_builder_destroy(&fb);
}

KT_CASE(library_closures)
{
    struct kiln_foz_closure_info info = KILN_FOZ_CLOSURE_INFO_INIT;
    /* A link of two parts, the second linking the first again. */
    KT_REQUIRE_OK(kiln_foz_closure_inspect(gpl_closure, strlen(gpl_closure), &info));
    KT_CHECK_EQ(info.tag, KILN_FOZ_TAG_GRAPHICS_PIPELINE);
    KT_CHECK_EQ(info.hash, 0x10);
    KT_CHECK_EQ(info.stage_count, 2);
    KT_CHECK_EQ(info.stages[0], 1);
    KT_CHECK_EQ(info.stages[1], 16);
    KT_CHECK_EQ(info.modules[0], 0xa1);
    KT_CHECK_EQ(info.modules[1], 0xa2);

    /* Ray tracing: the raygen, then the library's miss and closest hit. */
    KT_REQUIRE_OK(kiln_foz_closure_inspect(rt_closure, strlen(rt_closure), &info));
    KT_CHECK_EQ(info.tag, KILN_FOZ_TAG_RAYTRACING_PIPELINE);
    KT_CHECK_EQ(info.stage_count, 3);
    KT_CHECK_EQ(info.stages[0], 256);
    KT_CHECK_EQ(info.stages[1], 2048);
    KT_CHECK_EQ(info.stages[2], 1024);
    KT_CHECK_EQ(info.modules[2], 0xb3);

    /* A library the closure does not hold, and one not named by a hash. */
    const char *c = closure_linking("0000000000000099", "");
    KT_CHECK_EQ(kiln_foz_closure_inspect(c, strlen(c), &info), KILN_EPARSE);
    c = closure_linking("not a hash", "");
    KT_CHECK_EQ(kiln_foz_closure_inspect(c, strlen(c), &info), KILN_EPARSE);

    /* Libraries that link each other in a cycle: each is walked once. */
    c = closure_linking("0000000000000011",
                        ",\"0000000000000011\":{\"flags\":2048,\"stages\":[{\"stage\":1,"
                        "\"module\":\"00000000000000a1\",\"name\":\"main\"}],"
                        "\"pNext\":[{\"sType\":1000290000,\"libraries\":[\"0000000000000010\"]}]}");
    KT_CHECK_OK(kiln_foz_closure_inspect(c, strlen(c), &info));
    KT_CHECK_EQ(info.stage_count, 1);
}

/* ---------------------------------------------------------------------------
 * A Vulkan device of the test's own
 * ------------------------------------------------------------------------ */

struct gpu {
    void *lib;
    PFN_vkGetInstanceProcAddr gipa;
    PFN_vkGetDeviceProcAddr gdpa;
    VkInstance instance;
    VkPhysicalDevice phys;
    VkDevice device;
    uint32_t api;
    VkDebugUtilsMessengerEXT messenger;
    VkPhysicalDeviceFeatures2 f2;
    VkPhysicalDeviceVulkan11Features f11;
    VkPhysicalDeviceVulkan12Features f12;
    VkPhysicalDeviceVulkan13Features f13;
    PFN_vkCreateShaderModule CreateShaderModule;
    PFN_vkDestroyShaderModule DestroyShaderModule;
    PFN_vkDestroyPipeline DestroyPipeline;
    PFN_vkCreatePipelineCache CreatePipelineCache;
    PFN_vkDestroyPipelineCache DestroyPipelineCache;
};

/* Validation errors: each with the pipeline being built when it came (the
 * validation case builds on one thread) and its VUID. */
#define MAX_ERRORS 64
static atomic_int validation_errors;
static const char *_Atomic current_job;
static char error_job[MAX_ERRORS][96];
static char error_vuid[MAX_ERRORS][128];
static char error_text[MAX_ERRORS][320];

static VkBool32 VKAPI_PTR on_message(VkDebugUtilsMessageSeverityFlagBitsEXT severity,
                                     VkDebugUtilsMessageTypeFlagsEXT types,
                                     const VkDebugUtilsMessengerCallbackDataEXT *data, void *user)
{
    (void)types;
    (void)user;
    if (severity & VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT) {
        int n = atomic_fetch_add(&validation_errors, 1);
        if (n < MAX_ERRORS) {
            const char *msg = data->pMessage ? data->pMessage : "(no message)";
            const char *job = atomic_load(&current_job);
            snprintf(error_job[n], sizeof(error_job[n]), "%s", job ? job : "-");
            snprintf(error_vuid[n], sizeof(error_vuid[n]), "%s",
                     data->pMessageIdName ? data->pMessageIdName : "?");
            snprintf(error_text[n], sizeof(error_text[n]), "%s", msg);
        }
    }
    return VK_FALSE;
}

static bool has_layer(PFN_vkGetInstanceProcAddr gipa, const char *name)
{
    PFN_vkEnumerateInstanceLayerProperties enumerate =
        (PFN_vkEnumerateInstanceLayerProperties)gipa(NULL, "vkEnumerateInstanceLayerProperties");
    uint32_t n = 0;
    if (!enumerate || enumerate(&n, NULL) != VK_SUCCESS || n == 0)
        return false;
    VkLayerProperties *p = calloc(n, sizeof(*p));
    bool found = false;
    if (p && enumerate(&n, p) == VK_SUCCESS)
        for (uint32_t i = 0; i < n; i++)
            found |= strcmp(p[i].layerName, name) == 0;
    free(p);
    return found;
}

static void gpu_close(struct gpu *g)
{
    if (g->device) {
        PFN_vkDestroyDevice dd = (PFN_vkDestroyDevice)g->gdpa(g->device, "vkDestroyDevice");
        dd(g->device, NULL);
    }
    if (g->messenger) {
        PFN_vkDestroyDebugUtilsMessengerEXT dm = (PFN_vkDestroyDebugUtilsMessengerEXT)g->gipa(
            g->instance, "vkDestroyDebugUtilsMessengerEXT");
        dm(g->instance, g->messenger, NULL);
    }
    /* The instance and the loader stay until the process ends (each case
     * is a process of its own): destroying the instance unloads a CPU
     * driver, and LeakSanitizer then blames what its runtime still holds
     * on an unknown module (see tests/vk/CMakeLists.txt). */
    memset(g, 0, sizeof(*g));
}

/*
 * Makes an instance (with the validation layer and a messenger when asked)
 * and a device with every feature the first device has. Exits 77 where
 * there is no Vulkan; @return false (after a "skipped:" line) when
 * validation was asked for and the layer is not installed.
 */
static bool gpu_open(struct gpu *g, bool validate)
{
    memset(g, 0, sizeof(*g));
    g->lib = dlopen("libvulkan.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!g->lib) {
        printf("no Vulkan loader: %s\n", dlerror());
        exit(77);
    }
    g->gipa = (PFN_vkGetInstanceProcAddr)dlsym(g->lib, "vkGetInstanceProcAddr");
    if (!g->gipa)
        exit(77);
    const char *layer = "VK_LAYER_KHRONOS_validation";
    const char *ext = VK_EXT_DEBUG_UTILS_EXTENSION_NAME;
    if (validate && !has_layer(g->gipa, layer)) {
        printf("skipped: the Khronos validation layer is not installed "
               "(Debian: vulkan-validationlayers)\n");
        return false;
    }
    PFN_vkCreateInstance ci = (PFN_vkCreateInstance)g->gipa(NULL, "vkCreateInstance");
    VkApplicationInfo app = {.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO,
                             .pApplicationName = "test_foz_build",
                             .apiVersion = VK_API_VERSION_1_3};
    VkDebugUtilsMessengerCreateInfoEXT mi = {
        .sType = VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT,
        .messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT |
                           VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT,
        .messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT |
                       VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT,
        .pfnUserCallback = on_message};
    VkInstanceCreateInfo ii = {.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
                               .pApplicationInfo = &app,
                               .enabledLayerCount = validate ? 1 : 0,
                               .ppEnabledLayerNames = &layer,
                               .enabledExtensionCount = validate ? 1 : 0,
                               .ppEnabledExtensionNames = &ext};
    if (!ci || ci(&ii, NULL, &g->instance) != VK_SUCCESS) {
        printf("no Vulkan instance\n");
        exit(77);
    }
    if (validate) {
        PFN_vkCreateDebugUtilsMessengerEXT cm = (PFN_vkCreateDebugUtilsMessengerEXT)g->gipa(
            g->instance, "vkCreateDebugUtilsMessengerEXT");
        if (!cm || cm(g->instance, &mi, NULL, &g->messenger) != VK_SUCCESS) {
            printf("no debug-utils messenger\n");
            exit(1);
        }
    }
    PFN_vkEnumeratePhysicalDevices ep =
        (PFN_vkEnumeratePhysicalDevices)g->gipa(g->instance, "vkEnumeratePhysicalDevices");
    uint32_t n = 1;
    VkResult r = ep(g->instance, &n, &g->phys);
    if ((r != VK_SUCCESS && r != VK_INCOMPLETE) || n == 0) {
        printf("no Vulkan device\n");
        exit(77);
    }
    PFN_vkGetPhysicalDeviceProperties gp =
        (PFN_vkGetPhysicalDeviceProperties)g->gipa(g->instance, "vkGetPhysicalDeviceProperties");
    VkPhysicalDeviceProperties props;
    gp(g->phys, &props);
    g->api = props.apiVersion < VK_API_VERSION_1_3 ? props.apiVersion : VK_API_VERSION_1_3;
    printf("device: %s, Vulkan %u.%u\n", props.deviceName, VK_API_VERSION_MAJOR(g->api),
           VK_API_VERSION_MINOR(g->api));

    /* Every feature the device has, as far as the version knows them. */
    g->f2.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2;
    g->f11.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES;
    g->f12.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES;
    g->f13.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_3_FEATURES;
    void **tail = &g->f2.pNext;
    if (g->api >= VK_API_VERSION_1_2) {
        *tail = &g->f11;
        g->f11.pNext = &g->f12;
        tail = &g->f12.pNext;
    }
    if (g->api >= VK_API_VERSION_1_3)
        *tail = &g->f13;
    PFN_vkGetPhysicalDeviceFeatures2 gf =
        (PFN_vkGetPhysicalDeviceFeatures2)g->gipa(g->instance, "vkGetPhysicalDeviceFeatures2");
    if (gf && g->api >= VK_API_VERSION_1_1) {
        gf(g->phys, &g->f2);
    } else {
        PFN_vkGetPhysicalDeviceFeatures g1 =
            (PFN_vkGetPhysicalDeviceFeatures)g->gipa(g->instance, "vkGetPhysicalDeviceFeatures");
        g->f2.pNext = NULL;
        g1(g->phys, &g->f2.features);
    }
    /* Robust buffer access changes nothing a pipeline records, and costs time. */
    g->f2.features.robustBufferAccess = VK_FALSE;

    PFN_vkGetPhysicalDeviceQueueFamilyProperties qp =
        (PFN_vkGetPhysicalDeviceQueueFamilyProperties)g->gipa(
            g->instance, "vkGetPhysicalDeviceQueueFamilyProperties");
    uint32_t nq = 0;
    qp(g->phys, &nq, NULL);
    VkQueueFamilyProperties q[16];
    nq = nq > 16 ? 16 : nq;
    qp(g->phys, &nq, q);
    uint32_t family = 0;
    for (uint32_t i = 0; i < nq; i++)
        if (q[i].queueFlags & VK_QUEUE_GRAPHICS_BIT) {
            family = i;
            break;
        }
    float prio = 1.0f;
    VkDeviceQueueCreateInfo qi = {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
                                  .queueFamilyIndex = family,
                                  .queueCount = 1,
                                  .pQueuePriorities = &prio};
    VkDeviceCreateInfo di = {.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
                             .pNext = &g->f2,
                             .queueCreateInfoCount = 1,
                             .pQueueCreateInfos = &qi};
    PFN_vkCreateDevice cd = (PFN_vkCreateDevice)g->gipa(g->instance, "vkCreateDevice");
    if (cd(g->phys, &di, NULL, &g->device) != VK_SUCCESS) {
        printf("vkCreateDevice failed\n");
        exit(77);
    }
    g->gdpa = (PFN_vkGetDeviceProcAddr)g->gipa(g->instance, "vkGetDeviceProcAddr");
    g->CreateShaderModule = (PFN_vkCreateShaderModule)g->gdpa(g->device, "vkCreateShaderModule");
    g->DestroyShaderModule = (PFN_vkDestroyShaderModule)g->gdpa(g->device, "vkDestroyShaderModule");
    g->DestroyPipeline = (PFN_vkDestroyPipeline)g->gdpa(g->device, "vkDestroyPipeline");
    g->CreatePipelineCache = (PFN_vkCreatePipelineCache)g->gdpa(g->device, "vkCreatePipelineCache");
    g->DestroyPipelineCache =
        (PFN_vkDestroyPipelineCache)g->gdpa(g->device, "vkDestroyPipelineCache");
    return true;
}

static int builder_for(struct gpu *g, struct kiln_foz_builder **b)
{
    struct kiln_foz_builder_options o = KILN_FOZ_BUILDER_OPTIONS_INIT;
    o.device = g->device;
    o.get_device_proc_addr = g->gdpa;
    o.api_version = g->api;
    o.features = &g->f2;
    return kiln_foz_builder_create(&o, b);
}

/* ---------------------------------------------------------------------------
 * Building the corpus
 * ------------------------------------------------------------------------ */

/* One archive's pipelines, ready to build: closures and stage modules. */
struct job {
    uint8_t *bytes;
    size_t size;
    struct kiln_foz_closure_info info;
    char name[96];
};

struct work {
    struct gpu *g;
    struct kiln_foz_builder *b;
    VkPipelineCache cache;
    struct job *jobs;
    size_t n;
    atomic_size_t next;
    atomic_int errors; /* failed builds */
};

/* Makes the stage modules from the closure's recorded modules, builds,
 * and destroys the pipeline and the modules again. */
static int build_one(struct work *w, const struct job *j, const struct kiln_foz_index *idx,
                     char *why, size_t cap)
{
    VkPipelineShaderStageCreateInfo st[KILN_FOZ_MAX_STAGES];
    VkShaderModule mods[KILN_FOZ_MAX_STAGES] = {0};
    int rc = 0;
    for (uint32_t s = 0; s < j->info.stage_count && rc == 0; s++) {
        struct kiln_foz_module m;
        rc = kiln_foz_index_module(idx, j->info.modules[s], &m);
        if (rc < 0) {
            snprintf(why, cap, "module %016" PRIx64 " does not decode", j->info.modules[s]);
            break;
        }
        VkShaderModuleCreateInfo mi = {.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
                                       .codeSize = m.word_count * 4,
                                       .pCode = m.words};
        if (w->g->CreateShaderModule(w->g->device, &mi, NULL, &mods[s]) != VK_SUCCESS) {
            snprintf(why, cap, "vkCreateShaderModule failed");
            rc = KILN_EVULKAN;
        }
        kiln_foz_module_free(&m);
        st[s] = (VkPipelineShaderStageCreateInfo){
            .sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
            .stage = (VkShaderStageFlagBits)j->info.stages[s],
            .module = mods[s],
            .pName = "main"};
    }
    VkPipeline p = VK_NULL_HANDLE;
    if (rc == 0)
        rc = kiln_foz_builder_build(w->b, j->bytes, j->size, st, j->info.stage_count, w->cache, &p,
                                    why, cap);
    if (p)
        w->g->DestroyPipeline(w->g->device, p, NULL);
    for (uint32_t s = 0; s < j->info.stage_count; s++)
        if (mods[s])
            w->g->DestroyShaderModule(w->g->device, mods[s], NULL);
    return rc;
}

struct thread_arg {
    struct work *w;
    const struct kiln_foz_index *idx;
};

static void *worker(void *p)
{
    struct thread_arg *t = p;
    struct work *w = t->w;
    for (;;) {
        size_t i = atomic_fetch_add(&w->next, 1);
        if (i >= w->n)
            break;
        char why[256] = "";
        atomic_store(&current_job, w->jobs[i].name);
        int rc = build_one(w, &w->jobs[i], t->idx, why, sizeof(why));
        if (rc < 0) {
            printf("%s: %s: %s\n", w->jobs[i].name, rc == KILN_ENOTSUP ? "skipped" : "FAILED", why);
            atomic_fetch_add(&w->errors, 1);
        }
    }
    return NULL;
}

/* Builds every pipeline of every archive on `threads` threads sharing one
 * builder. Without the corpus the case is skipped (exit 77). @return false
 * when there is nothing to build. */
static bool build_corpus(struct gpu *g, unsigned threads, struct kiln_foz_builder_stats *st)
{
    struct archives a;
    kt_require_corpus("foz");
    if (!corpus(&a))
        return false;
    struct kiln_foz_builder *b;
    KT_CHECK_OK(builder_for(g, &b));
    if (!b)
        return false;
    VkPipelineCacheCreateInfo pci = {.sType = VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO};
    VkPipelineCache cache = VK_NULL_HANDLE;
    KT_CHECK(g->CreatePipelineCache(g->device, &pci, NULL, &cache) == VK_SUCCESS);
    for (size_t i = 0; i < a.n; i++) {
        struct kiln_foz *foz;
        struct kiln_foz_index *idx;
        KT_CHECK_OK(kiln_foz_open(NULL, a.path[i], &foz));
        KT_CHECK_OK(kiln_foz_index_create(foz, &idx));
        const struct kiln_foz_pipeline_ref *p;
        size_t n = kiln_foz_index_pipelines(idx, &p);
        struct job *jobs = calloc(n ? n : 1, sizeof(*jobs));
        KT_CHECK(jobs);
        const char *base = strrchr(a.path[i], '/') ? strrchr(a.path[i], '/') + 1 : a.path[i];
        for (size_t k = 0; k < n; k++) {
            KT_CHECK_OK(
                kiln_foz_closure_make(idx, p[k].tag, p[k].hash, &jobs[k].bytes, &jobs[k].size));
            jobs[k].info.size = sizeof(jobs[k].info);
            KT_CHECK_OK(kiln_foz_closure_inspect(jobs[k].bytes, jobs[k].size, &jobs[k].info));
            snprintf(jobs[k].name, sizeof(jobs[k].name), "%.60s %016" PRIx64, base, p[k].hash);
        }
        struct work w = {.g = g, .b = b, .cache = cache, .jobs = jobs, .n = n};
        struct thread_arg t = {&w, idx};
        pthread_t tid[8];
        unsigned started = 0;
        for (unsigned k = 1; k < threads && k < 8; k++)
            if (pthread_create(&tid[started], NULL, worker, &t) == 0)
                started++;
        worker(&t);
        for (unsigned k = 0; k < started; k++)
            pthread_join(tid[k], NULL);
        for (size_t k = 0; k < n; k++)
            kiln_foz_closure_free(jobs[k].bytes);
        free(jobs);
        kiln_foz_index_destroy(idx);
        kiln_foz_close(foz);
    }
    kiln_foz_builder_get_stats(b, st);
    printf("built graphics %" PRIu64 " compute %" PRIu64 "; skipped %" PRIu64 "/%" PRIu64
           "; failed %" PRIu64 "/%" PRIu64 "; shared objects %" PRIu64 "\n",
           st->built[KILN_FOZ_KIND_GRAPHICS], st->built[KILN_FOZ_KIND_COMPUTE],
           st->skipped[KILN_FOZ_KIND_GRAPHICS], st->skipped[KILN_FOZ_KIND_COMPUTE],
           st->failed[KILN_FOZ_KIND_GRAPHICS], st->failed[KILN_FOZ_KIND_COMPUTE], st->objects);
    kiln_foz_builder_destroy(b);
    if (cache)
        g->DestroyPipelineCache(g->device, cache, NULL);
    free_archives(&a);
    return true;
}

/* Every archive's pipelines are built: 48 archives record 110 distinct
 * graphics and 6 compute pipelines, some in several archives, and each
 * archive's are built from that archive. */
static void check_all_built(const struct kiln_foz_builder_stats *st)
{
    KT_CHECK_EQ(st->skipped[KILN_FOZ_KIND_GRAPHICS], 0);
    KT_CHECK_EQ(st->skipped[KILN_FOZ_KIND_COMPUTE], 0);
    KT_CHECK_EQ(st->failed[KILN_FOZ_KIND_GRAPHICS], 0);
    KT_CHECK_EQ(st->failed[KILN_FOZ_KIND_COMPUTE], 0);
    KT_CHECK(st->built[KILN_FOZ_KIND_GRAPHICS] >= CORPUS_GRAPHICS);
    KT_CHECK(st->built[KILN_FOZ_KIND_COMPUTE] >= CORPUS_COMPUTE);
    KT_CHECK(st->objects > 0);
}

KT_CASE(corpus_build)
{
    struct gpu g;
    gpu_open(&g, false);
    struct kiln_foz_builder_stats st = KILN_FOZ_BUILDER_STATS_INIT;
    if (build_corpus(&g, 4, &st))
        check_all_built(&st);
    gpu_close(&g);
}

/*
 * The validation errors the archives themselves recorded, which a faithful
 * build reproduces: the application's own state or SPIR-V is invalid. Each
 * is named by archive, pipeline and VUID; any other error fails the case,
 * and so does an entry here that no longer happens.
 */
static const struct {
    const char *job; /* archive file name and pipeline hash, as build_corpus names it */
    const char *vuid;
} recorded_errors[] = {
    /* The recorded state enables primitive restart on a triangle list. */
    {"computecloth.f93c6e96adcd7946.1.foz 9e0224900a5c3525",
     "VUID-VkPipelineInputAssemblyStateCreateInfo-topology-00428"},
    /* The module's OpArrayLength returns a signed int (invalid SPIR-V). */
    {"computeraytracing.f93c6e96adcd7946.1.foz 36e571e519805da7",
     "UNASSIGNED-CoreValidation-Shader-InconsistentSpirv"},
    /* gl_PerVertex has 4 members in the vertex stage, 3 in the geometry one. */
    {"deferredshadows.f93c6e96adcd7946.1.foz 1861a749e16d5fed",
     "UNASSIGNED-CoreValidation-Shader-InterfaceTypeMismatch"},
    /* The vertex module uses BuiltIn VertexId and OriginLowerLeft (GL-only). */
    {"gears.f93c6e96adcd7946.1.foz e9a7dda52d261742",
     "UNASSIGNED-CoreValidation-Shader-InconsistentSpirv"},
    /* gl_PerVertex differs between the tessellation stages, in all four. */
    {"tessellation.f93c6e96adcd7946.1.foz 0ec858fae41454b1",
     "UNASSIGNED-CoreValidation-Shader-InterfaceTypeMismatch"},
    {"tessellation.f93c6e96adcd7946.1.foz 40288fe15caf6c94",
     "UNASSIGNED-CoreValidation-Shader-InterfaceTypeMismatch"},
    {"tessellation.f93c6e96adcd7946.1.foz 6c0a73b15ea20f36",
     "UNASSIGNED-CoreValidation-Shader-InterfaceTypeMismatch"},
    {"tessellation.f93c6e96adcd7946.1.foz bb3c91656878879f",
     "UNASSIGNED-CoreValidation-Shader-InterfaceTypeMismatch"},
};
#define N_RECORDED (sizeof(recorded_errors) / sizeof(recorded_errors[0]))

KT_CASE(corpus_validation)
{
    struct gpu g;
    if (!gpu_open(&g, true))
        return;
    atomic_store(&validation_errors, 0);
    struct kiln_foz_builder_stats st = KILN_FOZ_BUILDER_STATS_INIT;
    bool ran = build_corpus(&g, 1, &st);
    gpu_close(&g);
    if (!ran)
        return;
    check_all_built(&st);
    int errors = atomic_load(&validation_errors);
    KT_REQUIRE(errors <= MAX_ERRORS);
    bool met[N_RECORDED] = {false};
    int unexpected = 0;
    for (int i = 0; i < errors; i++) {
        bool known = false;
        for (size_t k = 0; k < N_RECORDED; k++) {
            if (strcmp(error_job[i], recorded_errors[k].job) == 0 &&
                strcmp(error_vuid[i], recorded_errors[k].vuid) == 0) {
                known = met[k] = true;
            }
        }
        printf("%s: %s %s\n", known ? "recorded in the archive" : "UNEXPECTED", error_job[i],
               error_vuid[i]);
        if (!known) {
            printf("  %s\n", error_text[i]);
            unexpected++;
        }
    }
    KT_CHECK_EQ(unexpected, 0);
    for (size_t k = 0; k < N_RECORDED; k++) {
        if (!met[k])
            printf("recorded error no longer seen: %s %s\n", recorded_errors[k].job,
                   recorded_errors[k].vuid);
        KT_CHECK(met[k]);
    }
}

/* A stage that does not match the closure, and a pNext structure kiln does
 * not build, are refused with a reason and counted. */
KT_CASE(refusals)
{
    struct gpu g;
    gpu_open(&g, false);
    struct archives a;
    if (!corpus(&a)) {
        gpu_close(&g);
        return;
    }
    struct kiln_foz_builder *b;
    KT_REQUIRE_OK(builder_for(&g, &b));
    /* The first archive's first compute pipeline. */
    uint8_t *bytes = NULL;
    size_t size = 0;
    struct kiln_foz_index *idx = NULL;
    struct kiln_foz *foz = NULL;
    for (size_t i = 0; i < a.n && !bytes; i++) {
        KT_REQUIRE_OK(kiln_foz_open(NULL, a.path[i], &foz));
        KT_REQUIRE_OK(kiln_foz_index_create(foz, &idx));
        const struct kiln_foz_pipeline_ref *p;
        size_t n = kiln_foz_index_pipelines(idx, &p);
        for (size_t k = 0; k < n && !bytes; k++)
            if (p[k].tag == KILN_FOZ_TAG_COMPUTE_PIPELINE)
                KT_REQUIRE_OK(kiln_foz_closure_make(idx, p[k].tag, p[k].hash, &bytes, &size));
        if (!bytes) {
            kiln_foz_index_destroy(idx);
            kiln_foz_close(foz);
        }
    }
    KT_REQUIRE(bytes);
    struct kiln_foz_closure_info info = KILN_FOZ_CLOSURE_INFO_INIT;
    KT_REQUIRE_OK(kiln_foz_closure_inspect(bytes, size, &info));
    struct kiln_foz_module m;
    KT_REQUIRE_OK(kiln_foz_index_module(idx, info.modules[0], &m));
    VkShaderModuleCreateInfo mi = {.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
                                   .codeSize = m.word_count * 4,
                                   .pCode = m.words};
    VkShaderModule mod;
    KT_REQUIRE(g.CreateShaderModule(g.device, &mi, NULL, &mod) == VK_SUCCESS);
    kiln_foz_module_free(&m);
    VkPipelineShaderStageCreateInfo st = {.sType =
                                              VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
                                          .stage = VK_SHADER_STAGE_VERTEX_BIT,
                                          .module = mod,
                                          .pName = "main"};
    VkPipeline p;
    char why[256];
    KT_CHECK_EQ(
        kiln_foz_builder_build(b, bytes, size, &st, 1, VK_NULL_HANDLE, &p, why, sizeof(why)),
        KILN_EINVAL);
    printf("wrong stage: %s\n", why);
    KT_CHECK(strstr(why, "stage 0") != NULL);

    /* The same closure with a pNext structure of an unknown kind. */
    const char *needle = "\"stage\":{";
    char *at = NULL;
    for (size_t i = 0; i + strlen(needle) <= size && !at; i++)
        if (memcmp(bytes + i, needle, strlen(needle)) == 0)
            at = (char *)bytes + i;
    KT_REQUIRE(at);
    const char *insert = "\"pNext\":[{\"sType\":1000999000}],";
    size_t head = (size_t)(at - (char *)bytes) + strlen(needle);
    size_t n2 = size + strlen(insert);
    char *mut = malloc(n2);
    KT_REQUIRE(mut);
    memcpy(mut, bytes, head);
    memcpy(mut + head, insert, strlen(insert));
    memcpy(mut + head + strlen(insert), bytes + head, size - head);
    st.stage = VK_SHADER_STAGE_COMPUTE_BIT;
    KT_CHECK_EQ(kiln_foz_builder_build(b, mut, n2, &st, 1, VK_NULL_HANDLE, &p, why, sizeof(why)),
                KILN_ENOTSUP);
    printf("unknown pNext: %s\n", why);
    KT_CHECK(strstr(why, "1000999000") != NULL);

    /* And the closure as recorded builds. */
    KT_CHECK_OK(
        kiln_foz_builder_build(b, bytes, size, &st, 1, VK_NULL_HANDLE, &p, why, sizeof(why)));
    if (p)
        g.DestroyPipeline(g.device, p, NULL);

    /* Ask before compiling: the driver's feedback of a build, and a probe
     * (the device was made with every 1.3 feature, pipelineCreationCacheControl
     * among them): a pipeline the driver's caches held, or
     * KILN_ECOMPILE_REQUIRED with nothing made, counted neither built nor
     * failed (lavapipe answers the latter: its pipeline cache keeps nothing). */
    struct kiln_foz_build fb = KILN_FOZ_BUILD_INIT;
    fb.closure = bytes;
    fb.closure_size = size;
    fb.stages = &st;
    fb.stage_count = 1;
    fb.why = why;
    fb.why_cap = sizeof(why);
    KT_CHECK_OK(kiln_foz_builder_build_with(b, &fb));
    KT_CHECK(fb.pipeline != VK_NULL_HANDLE);
    KT_CHECK(fb.feedback_valid == (g.api >= VK_API_VERSION_1_3));
    KT_CHECK(!fb.feedback_valid || fb.driver_ns > 0);
    g.DestroyPipeline(g.device, fb.pipeline, NULL);
    uint64_t built = 2;
    if (g.f13.pipelineCreationCacheControl) {
        fb.flags = KILN_FOZ_BUILD_NO_COMPILE;
        int rc = kiln_foz_builder_build_with(b, &fb);
        printf("probe: %s%s%s\n", kiln_errname(rc), why[0] ? ": " : "", why);
        KT_CHECK(rc == KILN_OK || rc == KILN_ECOMPILE_REQUIRED);
        KT_CHECK((rc == KILN_OK) == (fb.pipeline != VK_NULL_HANDLE));
        built += rc == KILN_OK;
        if (fb.pipeline)
            g.DestroyPipeline(g.device, fb.pipeline, NULL);
    }
    struct kiln_foz_builder_stats s = KILN_FOZ_BUILDER_STATS_INIT;
    kiln_foz_builder_get_stats(b, &s);
    KT_CHECK_EQ(s.built[KILN_FOZ_KIND_COMPUTE], built);
    KT_CHECK_EQ(s.skipped[KILN_FOZ_KIND_COMPUTE], 1);
    KT_CHECK_EQ(s.failed[KILN_FOZ_KIND_COMPUTE], 1);

    free(mut);
    g.DestroyShaderModule(g.device, mod, NULL);
    kiln_foz_closure_free(bytes);
    kiln_foz_index_destroy(idx);
    kiln_foz_close(foz);
    kiln_foz_builder_destroy(b);
    gpu_close(&g);
    free_archives(&a);
}

/* ---------------------------------------------------------------------------
 * States the corpus does not record, on one of its pipelines
 * ------------------------------------------------------------------------ */

static struct json_object *jparse(const char *text)
{
    struct json_object *o = json_tokener_parse(text);
    if (!o)
        kt_fail(__FILE__, __LINE__, "test JSON does not parse: %s", text);
    return o;
}

static struct json_object *jget(struct json_object *o, const char *key)
{
    struct json_object *v = NULL;
    json_object_object_get_ex(o, key, &v);
    return v;
}

/* Builds `doc` (a closure) with the triangle's two modules; @return the
 * builder's result, with the reason in `why`. */
static int build_doc(struct gpu *g, struct kiln_foz_builder *b, struct json_object *doc,
                     const VkShaderModule mods[2], char *why, size_t cap)
{
    size_t n;
    const char *text = json_object_to_json_string_length(doc, JSON_C_TO_STRING_PLAIN, &n);
    struct kiln_foz_closure_info info = KILN_FOZ_CLOSURE_INFO_INIT;
    int rc = kiln_foz_closure_inspect(text, n, &info);
    if (rc < 0)
        return rc;
    VkPipelineShaderStageCreateInfo st[2];
    for (uint32_t i = 0; i < 2; i++)
        st[i] = (VkPipelineShaderStageCreateInfo){
            .sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
            .stage = (VkShaderStageFlagBits)info.stages[i],
            .module = mods[i],
            .pName = "main"};
    VkPipeline p = VK_NULL_HANDLE;
    rc = kiln_foz_builder_build(b, text, n, st, 2, VK_NULL_HANDLE, &p, why, cap);
    if (p)
        g->DestroyPipeline(g->device, p, NULL);
    return rc;
}

/*
 * The triangle pipeline (vertex input, depth test, one color attachment)
 * rebuilt with what no corpus archive records: dynamic rendering instead of
 * its render pass, the render pass as a render pass 2, an immutable sampler
 * in an extra set layout, static viewports with specialization constants
 * and a derivative flag, and a YCbCr sampler. Under the validation layer
 * where it is installed: no error. A dynamic state of an extension the
 * device did not enable is skipped, naming it.
 */
KT_CASE(unrecorded_states)
{
    struct gpu g;
    bool validate = true;
    if (!gpu_open(&g, true)) {
        validate = false;
        gpu_open(&g, false);
    }
    atomic_store(&validation_errors, 0);
    struct archives a;
    if (!corpus(&a)) {
        gpu_close(&g);
        return;
    }
    const char *path = NULL;
    for (size_t i = 0; i < a.n; i++)
        if (strstr(a.path[i], "/triangle."))
            path = a.path[i];
    KT_REQUIRE(path);
    struct kiln_foz *foz;
    struct kiln_foz_index *idx;
    KT_REQUIRE_OK(kiln_foz_open(NULL, path, &foz));
    KT_REQUIRE_OK(kiln_foz_index_create(foz, &idx));
    const struct kiln_foz_pipeline_ref *ref;
    KT_REQUIRE(kiln_foz_index_pipelines(idx, &ref) == 1);
    uint8_t *bytes;
    size_t size;
    KT_REQUIRE_OK(kiln_foz_closure_make(idx, ref[0].tag, ref[0].hash, &bytes, &size));
    struct kiln_foz_closure_info info = KILN_FOZ_CLOSURE_INFO_INIT;
    KT_REQUIRE_OK(kiln_foz_closure_inspect(bytes, size, &info));
    KT_REQUIRE(info.stage_count == 2);
    /* The closure as text (its bytes have no terminating NUL). */
    char *text = malloc(size + 1);
    KT_REQUIRE(text);
    memcpy(text, bytes, size);
    text[size] = '\0';
    VkShaderModule mods[2];
    for (int i = 0; i < 2; i++) {
        struct kiln_foz_module m;
        KT_REQUIRE_OK(kiln_foz_index_module(idx, info.modules[i], &m));
        VkShaderModuleCreateInfo mi = {.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
                                       .codeSize = m.word_count * 4,
                                       .pCode = m.words};
        KT_REQUIRE(g.CreateShaderModule(g.device, &mi, NULL, &mods[i]) == VK_SUCCESS);
        kiln_foz_module_free(&m);
    }
    char pname[17];
    snprintf(pname, sizeof(pname), "%016" PRIx64, ref[0].hash);
    struct kiln_foz_builder *b;
    KT_REQUIRE_OK(builder_for(&g, &b));
    char why[256];

    /* As recorded. */
    struct json_object *doc = jparse(text);
    KT_CHECK_OK(build_doc(&g, b, doc, mods, why, sizeof(why)));
    json_object_put(doc);

    /* Dynamic rendering: no render pass, the formats in the pipeline's pNext. */
    doc = jparse(text);
    struct json_object *pipe = jget(jget(doc, "graphicsPipelines"), pname);
    json_object_object_add(pipe, "renderPass", json_object_new_string("0000000000000000"));
    json_object_object_add(pipe, "pNext",
                           jparse("[{\"sType\":1000044002,\"viewMask\":0,"
                                  "\"colorAttachmentFormats\":[44],"
                                  "\"depthAttachmentFormat\":130,"
                                  "\"stencilAttachmentFormat\":130}]"));
    json_object_object_del(doc, "renderPasses");
    int rc = build_doc(&g, b, doc, mods, why, sizeof(why));
    KT_CHECK_OK(rc);
    if (rc < 0)
        printf("dynamic rendering: %s\n", why);
    json_object_put(doc);

    /* The render pass as a render pass 2 (under a new hash). */
    doc = jparse(text);
    pipe = jget(jget(doc, "graphicsPipelines"), pname);
    json_object_object_add(pipe, "renderPass", json_object_new_string("00000000000000b2"));
    json_object_object_del(doc, "renderPasses");
    json_object_object_add(
        doc, "renderPasses2",
        jparse("{\"00000000000000b2\":{\"flags\":0,"
               "\"attachments\":[{\"flags\":0,\"format\":44,\"samples\":1,\"loadOp\":1,"
               "\"storeOp\":0,\"stencilLoadOp\":2,\"stencilStoreOp\":1,\"initialLayout\":0,"
               "\"finalLayout\":1000001002},"
               "{\"flags\":0,\"format\":130,\"samples\":1,\"loadOp\":1,\"storeOp\":0,"
               "\"stencilLoadOp\":1,\"stencilStoreOp\":1,\"initialLayout\":0,"
               "\"finalLayout\":3}],"
               "\"subpasses\":[{\"flags\":0,\"pipelineBindPoint\":0,\"viewMask\":0,"
               "\"colorAttachments\":[{\"attachment\":0,\"layout\":2,\"aspectMask\":1}],"
               "\"depthStencilAttachment\":{\"attachment\":1,\"layout\":3,\"aspectMask\":6}}],"
               "\"dependencies\":[{\"srcSubpass\":4294967295,\"dstSubpass\":0,"
               "\"srcStageMask\":1024,\"dstStageMask\":1024,\"srcAccessMask\":0,"
               "\"dstAccessMask\":384,\"dependencyFlags\":1,\"viewOffset\":0}]}}"));
    rc = build_doc(&g, b, doc, mods, why, sizeof(why));
    KT_CHECK_OK(rc);
    if (rc < 0)
        printf("render pass 2: %s\n", why);
    json_object_put(doc);

    /* An immutable sampler (with a reduction mode) in a second set layout. */
    doc = jparse(text);
    pipe = jget(jget(doc, "graphicsPipelines"), pname);
    struct json_object *layouts = jget(doc, "pipelineLayouts");
    struct json_object *layout = NULL;
    json_object_object_foreach(layouts, lkey, lval)
    {
        (void)lkey;
        layout = lval;
    }
    KT_REQUIRE(layout);
    struct json_object *copy = NULL;
    json_object_deep_copy(layout, &copy, NULL);
    json_object_array_add(jget(copy, "setLayouts"), json_object_new_string("00000000000000c1"));
    json_object_object_add(layouts, "00000000000000c2", copy);
    json_object_object_add(pipe, "layout", json_object_new_string("00000000000000c2"));
    json_object_object_add(jget(doc, "setLayouts"), "00000000000000c1",
                           jparse("{\"flags\":0,\"bindings\":[{\"binding\":0,\"descriptorType\":1,"
                                  "\"descriptorCount\":1,\"stageFlags\":16,"
                                  "\"immutableSamplers\":[\"00000000000000c0\"]}]}"));
    json_object_object_add(
        doc, "samplers",
        jparse("{\"00000000000000c0\":{\"flags\":0,\"magFilter\":1,\"minFilter\":1,"
               "\"mipmapMode\":1,\"addressModeU\":2,\"addressModeV\":2,\"addressModeW\":2,"
               "\"mipLodBias\":0.0,\"anisotropyEnable\":0,\"maxAnisotropy\":1.0,"
               "\"compareEnable\":0,\"compareOp\":0,\"minLod\":0.0,\"maxLod\":1000.0,"
               "\"borderColor\":0,\"unnormalizedCoordinates\":0,"
               "\"pNext\":[{\"sType\":1000130001,\"reductionMode\":0}]}}"));
    rc = build_doc(&g, b, doc, mods, why, sizeof(why));
    KT_CHECK_OK(rc);
    if (rc < 0)
        printf("immutable sampler: %s\n", why);
    json_object_put(doc);

    /* Static viewport and scissor, specialization constants, a derivative. */
    doc = jparse(text);
    pipe = jget(jget(doc, "graphicsPipelines"), pname);
    json_object_object_del(pipe, "dynamicState");
    json_object_object_add(
        pipe, "viewportState",
        jparse("{\"flags\":0,\"viewportCount\":1,\"scissorCount\":1,"
               "\"viewports\":[{\"x\":0.0,\"y\":0.0,\"width\":64.0,\"height\":64.0,"
               "\"minDepth\":0.0,\"maxDepth\":1.0}],"
               "\"scissors\":[{\"x\":0,\"y\":0,\"width\":64,\"height\":64}]}"));
    json_object_object_add(pipe, "flags", json_object_new_int(4));
    json_object_object_add(pipe, "basePipelineHandle", json_object_new_string("00000000000000d0"));
    json_object_object_add(json_object_array_get_idx(jget(pipe, "stages"), 1), "specializationInfo",
                           jparse("{\"dataSize\":8,\"data\":\"AQAAAAIAAAA=\","
                                  "\"mapEntries\":[{\"constantID\":7,\"offset\":0,\"size\":4},"
                                  "{\"constantID\":8,\"offset\":4,\"size\":4}]}"));
    struct kiln_foz_builder_stats st0 = KILN_FOZ_BUILDER_STATS_INIT,
                                  st1 = KILN_FOZ_BUILDER_STATS_INIT;
    kiln_foz_builder_get_stats(b, &st0);
    rc = build_doc(&g, b, doc, mods, why, sizeof(why));
    KT_CHECK_OK(rc);
    if (rc < 0)
        printf("static viewport: %s\n", why);
    kiln_foz_builder_get_stats(b, &st1);
    KT_CHECK_EQ(st1.derivatives_standalone, st0.derivatives_standalone + 1);
    /* Specialization data that is not what dataSize says is refused. */
    json_object_object_add(json_object_array_get_idx(jget(pipe, "stages"), 1), "specializationInfo",
                           jparse("{\"dataSize\":8,\"data\":\"AQAAAA==\",\"mapEntries\":[]}"));
    KT_CHECK_EQ(build_doc(&g, b, doc, mods, why, sizeof(why)), KILN_EPARSE);
    printf("short specialization data: %s\n", why);
    json_object_put(doc);

    /* A YCbCr conversion on an immutable sampler: built where the device
     * has the feature, else skipped naming it. */
    doc = jparse(text);
    pipe = jget(jget(doc, "graphicsPipelines"), pname);
    layouts = jget(doc, "pipelineLayouts");
    json_object_object_foreach(layouts, lkey2, lval2)
    {
        (void)lkey2;
        layout = lval2;
    }
    copy = NULL;
    json_object_deep_copy(layout, &copy, NULL);
    json_object_array_add(jget(copy, "setLayouts"), json_object_new_string("00000000000000e1"));
    json_object_object_add(layouts, "00000000000000e2", copy);
    json_object_object_add(pipe, "layout", json_object_new_string("00000000000000e2"));
    json_object_object_add(jget(doc, "setLayouts"), "00000000000000e1",
                           jparse("{\"flags\":0,\"bindings\":[{\"binding\":0,\"descriptorType\":1,"
                                  "\"descriptorCount\":1,\"stageFlags\":16,"
                                  "\"immutableSamplers\":[\"00000000000000e0\"]}]}"));
    json_object_object_add(
        doc, "samplers",
        jparse("{\"00000000000000e0\":{\"flags\":0,\"magFilter\":0,\"minFilter\":0,"
               "\"mipmapMode\":0,\"addressModeU\":2,\"addressModeV\":2,\"addressModeW\":2,"
               "\"mipLodBias\":0.0,\"anisotropyEnable\":0,\"maxAnisotropy\":1.0,"
               "\"compareEnable\":0,\"compareOp\":0,\"minLod\":0.0,\"maxLod\":0.0,"
               "\"borderColor\":0,\"unnormalizedCoordinates\":0,"
               "\"pNext\":[{\"sType\":1000156000,\"format\":1000156003,\"ycbcrModel\":2,"
               "\"ycbcrRange\":0,\"components\":[0,0,0,0],\"xChromaOffset\":0,"
               "\"yChromaOffset\":0,\"chromaFilter\":0,"
               "\"forceExplicitReconstruction\":0}]}}"));
    rc = build_doc(&g, b, doc, mods, why, sizeof(why));
    printf("YCbCr sampler (feature %s): %s\n", g.f11.samplerYcbcrConversion ? "on" : "off",
           rc == 0 ? "built" : why);
    if (g.f11.samplerYcbcrConversion) {
        KT_CHECK_OK(rc);
    } else {
        KT_CHECK_EQ(rc, KILN_ENOTSUP);
        KT_CHECK(strstr(why, "samplerYcbcrConversion") != NULL);
    }
    json_object_put(doc);

    /* A dynamic state of an extension the device was not made with. */
    doc = jparse(text);
    pipe = jget(jget(doc, "graphicsPipelines"), pname);
    json_object_array_add(jget(jget(pipe, "dynamicState"), "dynamicState"),
                          json_object_new_int(1000099000));
    KT_CHECK_EQ(build_doc(&g, b, doc, mods, why, sizeof(why)), KILN_ENOTSUP);
    printf("discard rectangle: %s\n", why);
    KT_CHECK(strstr(why, "VK_EXT_discard_rectangles") != NULL);
    json_object_put(doc);

    kiln_foz_builder_destroy(b);
    for (int i = 0; i < 2; i++)
        g.DestroyShaderModule(g.device, mods[i], NULL);
    free(text);
    kiln_foz_closure_free(bytes);
    kiln_foz_index_destroy(idx);
    kiln_foz_close(foz);
    gpu_close(&g);
    free_archives(&a);
    int errors = atomic_load(&validation_errors);
    for (int i = 0; i < errors && i < MAX_ERRORS; i++)
        printf("validation error: %s\n", error_text[i]);
    if (validate)
        KT_CHECK_EQ(errors, 0);
    else
        printf("(the validation layer is not installed: built without it)\n");
}

KT_MAIN(KT_ENTRY(corpus_closures), KT_ENTRY(closure_errors), KT_ENTRY(library_closures),
        KT_ENTRY(extensions_by_kind), KT_ENTRY(corpus_build), KT_ENTRY(corpus_validation),
        KT_ENTRY(refusals), KT_ENTRY(unrecorded_states))
