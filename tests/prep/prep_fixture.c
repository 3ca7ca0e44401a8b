/*
 * prep_fixture.c - see prep_fixture.h.
 */
#include <vulkan/vulkan.h>

#include "prep_fixture.h"

#include "kiln_test.h"

#include <dlfcn.h>
#include <link.h>
#include <string.h>
#include <sys/stat.h>

static const char comp_a[] = "#version 450\n"
                             "layout(local_size_x = 64) in;\n"
                             "layout(set = 0, binding = 0) buffer B { uint data[]; };\n"
                             "layout(push_constant) uniform P { uvec4 args; };\n"
                             "void main() {\n"
                             "    uint i = gl_GlobalInvocationID.x & 0xffffu;\n"
                             "    data[i] = data[i] * args.x + args.y;\n"
                             "}\n";

static const char comp_b[] = "#version 450\n"
                             "layout(local_size_x = 32) in;\n"
                             "layout(set = 0, binding = 0) buffer B { uint data[]; };\n"
                             "void main() {\n"
                             "    uint i = gl_GlobalInvocationID.x & 0xffffu;\n"
                             "    data[i] = bitfieldReverse(data[i]) ^ 0x5a5a5a5au;\n"
                             "}\n";

static const char vert[] = "#version 450\n"
                           "layout(location = 0) out vec2 uv;\n"
                           "void main() {\n"
                           "    vec2 p = vec2((gl_VertexIndex << 1) & 2, gl_VertexIndex & 2);\n"
                           "    uv = p;\n"
                           "    gl_Position = vec4(p * 2.0 - 1.0, 0.0, 1.0);\n"
                           "}\n";

static const char frag[] = "#version 450\n"
                           "layout(set = 0, binding = 0) readonly buffer B { uint data[]; };\n"
                           "layout(location = 0) in vec2 uv;\n"
                           "layout(location = 0) out vec4 color;\n"
                           "void main() {\n"
                           "    color = unpackUnorm4x8(data[uint(uv.x * 7.0) & 255u]) + uv.y;\n"
                           "}\n";

static const char bad[] = "#version 450\n"
                          "layout(local_size_x = 64) in;\n"
                          "void main() { this is not GLSL; }\n";

static int put(const char *dir, const char *name, const char *text)
{
    char path[4200];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f) {
        kt_fail(__FILE__, __LINE__, "cannot write %s", path);
        return -1;
    }
    size_t n = strlen(text);
    size_t w = fwrite(text, 1, n, f);
    if (fclose(f) != 0 || w != n) {
        kt_fail(__FILE__, __LINE__, "cannot write %s", path);
        return -1;
    }
    return 0;
}

int pf_mkdir(const char *path)
{
    return kt_mkdir(path);
}

int pf_write_corpus(const char *dir, bool broken)
{
    char sub[4200];
    snprintf(sub, sizeof(sub), "%s/sub", dir);
    if (pf_mkdir(sub) != 0) {
        kt_fail(__FILE__, __LINE__, "cannot make %s", sub);
        return -1;
    }
    if (put(dir, "a.comp", comp_a) || put(dir, "sub/b.comp", comp_b) ||
        put(dir, "tri.vert", vert) || put(dir, "tri.frag", frag))
        return -1;
    if (broken && put(dir, "bad.comp", bad))
        return -1;
    return 0;
}

static int pin_one(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    (void)data;
    if (info->dlpi_name && info->dlpi_name[0]) {
        void *h = dlopen(info->dlpi_name, RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE);
        if (h)
            dlclose(h); /* RTLD_NODELETE stays: the library is never unloaded */
    }
    return 0;
}

void pf_pin_loaded_libraries(void)
{
    dl_iterate_phdr(pin_one, NULL);
}

struct kiln_vk *pf_vk(const char *cache_dir)
{
    struct kiln_vk_options opt = {.size = sizeof(opt), .cache_dir = cache_dir};
    return pf_vk_with(&opt);
}

struct kiln_vk *pf_vk_with(const struct kiln_vk_options *opt)
{
    struct kiln_vk *vk = NULL;
    int rc = kiln_vk_create(opt, &vk);
    if (rc == KILN_ENOTSUP) {
        fprintf(stderr, "SKIP: Vulkan is not available here\n");
        exit(77);
    }
    if (rc < 0) {
        kt_fail(__FILE__, __LINE__, "kiln_vk_create: %s", kiln_errname(rc));
        return NULL;
    }
    pf_pin_loaded_libraries();
    return vk;
}

bool pf_need_vulkan(void)
{
    struct kiln_vk *vk = pf_vk(NULL);
    kiln_vk_destroy(vk);
    return vk != NULL;
}

int pf_corpus(char *out, size_t cap, const char *root, bool broken)
{
    snprintf(out, cap, "%s/corpus", root);
    return pf_mkdir(out) == 0 && pf_write_corpus(out, broken) == 0 ? 0 : -1;
}

void pf_options(struct kiln_prepare_options *o, const char *cache_dir, unsigned jobs)
{
    kiln_prepare_options_init(o);
    o->cache_dir = cache_dir;
    o->jobs = jobs;
}

static bool ends_with_foz(const char *path)
{
    size_t n = strlen(path);
    return n >= 4 && strcmp(path + n - 4, ".foz") == 0;
}

int pf_input_open(struct pf_input *in, struct kiln_prepare_options *o, enum kiln_prep_step *step)
{
    int rc;
    *step = KILN_PREP_STEP_INPUT;
    if (in->corpus && ends_with_foz(in->corpus)) {
        if ((rc = kiln_foz_programs_open(in->corpus, &in->foz)) < 0)
            return rc;
        kiln_foz_programs_source(in->foz, &in->src);
    } else if (in->corpus) {
        if ((rc = kiln_corpus_open(in->corpus, &in->folder)) < 0)
            return rc;
        kiln_corpus_source(in->folder, &in->src);
    } else {
        in->gen = (struct kiln_generator){.seed = in->seed, .count = in->generate};
        kiln_generator_source(&in->gen, &in->src);
    }
    if (!in->foz) {
        *step = KILN_PREP_STEP_OTHER;
        if ((rc = kiln_glsl_create(KILN_GLSL_OPT_NONE, &in->glsl)) < 0)
            return rc;
        o->translator = kiln_glsl_translator(in->glsl);
    }
    o->source = &in->src;
    *step = KILN_PREP_STEP_NONE;
    return KILN_OK;
}

void pf_input_close(struct pf_input *in)
{
    kiln_foz_programs_destroy(in->foz);
    kiln_corpus_destroy(in->folder);
    kiln_glsl_destroy(in->glsl);
    in->foz = NULL;
    in->folder = NULL;
    in->glsl = NULL;
}

int pf_prepare(struct kiln_prepare_options *o, struct pf_input *in, kiln_prep_progress_fn progress,
               void *user, struct kiln_prepare_summary *s)
{
    enum kiln_prep_step step;
    int rc = pf_input_open(in, o, &step);
    if (rc == KILN_OK) {
        rc = kiln_prepare(o, progress, user, s);
    } else {
        memset(s, 0, sizeof(*s));
        s->size = sizeof(*s);
        s->error = rc;
        s->step = step;
    }
    pf_input_close(in);
    o->source = NULL;
    o->translator = NULL;
    return rc;
}

uint64_t pf_stamp(struct pf_input *in)
{
    struct kiln_prepare_options o = KILN_PREPARE_OPTIONS_INIT;
    kiln_prepare_options_init(&o);
    enum kiln_prep_step step;
    uint64_t stamp = 0;
    if (pf_input_open(in, &o, &step) == KILN_OK)
        stamp = kiln_prepare_stamp(&o);
    pf_input_close(in);
    return stamp;
}

/* The application's instance and device, made with the loader; exit(77)
 * where there is none. With `gpl`, the device has
 * VK_EXT_graphics_pipeline_library (and VK_KHR_pipeline_library) with its
 * graphicsPipelineLibrary feature; exit(77) where it is not offered. */
static void own_vulkan_make(struct pf_own_vulkan *v, bool gpl)
{
    memset(v, 0, sizeof(*v));
    v->lib = dlopen("libvulkan.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!v->lib) {
        fprintf(stderr, "SKIP: no Vulkan loader\n");
        exit(77);
    }
    v->gipa = (PFN_vkGetInstanceProcAddr)dlsym(v->lib, "vkGetInstanceProcAddr");
    KT_REQUIRE(v->gipa);
    PFN_vkCreateInstance ci = (PFN_vkCreateInstance)v->gipa(NULL, "vkCreateInstance");
    VkApplicationInfo app = {.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO,
                             .apiVersion = VK_API_VERSION_1_1};
    VkInstanceCreateInfo ici = {.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
                                .pApplicationInfo = &app};
    if (!ci || ci(&ici, NULL, &v->instance) != VK_SUCCESS) {
        fprintf(stderr, "SKIP: no Vulkan driver\n");
        exit(77);
    }
    v->destroy_instance = (PFN_vkDestroyInstance)v->gipa(v->instance, "vkDestroyInstance");
    PFN_vkEnumeratePhysicalDevices epd =
        (PFN_vkEnumeratePhysicalDevices)v->gipa(v->instance, "vkEnumeratePhysicalDevices");
    PFN_vkGetPhysicalDeviceQueueFamilyProperties qfp =
        (PFN_vkGetPhysicalDeviceQueueFamilyProperties)v->gipa(
            v->instance, "vkGetPhysicalDeviceQueueFamilyProperties");
    PFN_vkCreateDevice cd = (PFN_vkCreateDevice)v->gipa(v->instance, "vkCreateDevice");
    uint32_t n = 1;
    VkResult r = epd(v->instance, &n, &v->phys);
    if ((r != VK_SUCCESS && r != VK_INCOMPLETE) || n == 0) {
        fprintf(stderr, "SKIP: no Vulkan device\n");
        exit(77);
    }
    VkQueueFamilyProperties q[16];
    uint32_t nq = 16;
    qfp(v->phys, &nq, q);
    v->family = UINT32_MAX;
    for (uint32_t i = 0; i < nq && v->family == UINT32_MAX; i++)
        if ((q[i].queueFlags & (VK_QUEUE_GRAPHICS_BIT | VK_QUEUE_COMPUTE_BIT)) ==
            (VK_QUEUE_GRAPHICS_BIT | VK_QUEUE_COMPUTE_BIT))
            v->family = i;
    KT_REQUIRE(v->family != UINT32_MAX);
    float prio = 1.0f;
    VkDeviceQueueCreateInfo dq = {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
                                  .queueFamilyIndex = v->family,
                                  .queueCount = 1,
                                  .pQueuePriorities = &prio};
    static const char *const gpl_ext[] = {"VK_KHR_pipeline_library",
                                          "VK_EXT_graphics_pipeline_library"};
    VkPhysicalDeviceGraphicsPipelineLibraryFeaturesEXT gf = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_GRAPHICS_PIPELINE_LIBRARY_FEATURES_EXT,
        .graphicsPipelineLibrary = VK_TRUE};
    VkDeviceCreateInfo dci = {.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
                              .pNext = gpl ? &gf : NULL,
                              .queueCreateInfoCount = 1,
                              .pQueueCreateInfos = &dq,
                              .enabledExtensionCount = gpl ? 2 : 0,
                              .ppEnabledExtensionNames = gpl ? gpl_ext : NULL};
    r = cd(v->phys, &dci, NULL, &v->device);
    if (gpl && r == VK_ERROR_EXTENSION_NOT_PRESENT) {
        fprintf(stderr, "SKIP: the device lacks VK_EXT_graphics_pipeline_library\n");
        exit(77);
    }
    KT_REQUIRE(r == VK_SUCCESS);
    v->gdpa = (PFN_vkGetDeviceProcAddr)v->gipa(v->instance, "vkGetDeviceProcAddr");
    v->destroy_device = (PFN_vkDestroyDevice)v->gdpa(v->device, "vkDestroyDevice");
    PFN_vkCreatePipelineCache cpc =
        (PFN_vkCreatePipelineCache)v->gdpa(v->device, "vkCreatePipelineCache");
    v->destroy_cache = (PFN_vkDestroyPipelineCache)v->gdpa(v->device, "vkDestroyPipelineCache");
    v->cache_data = (PFN_vkGetPipelineCacheData)v->gdpa(v->device, "vkGetPipelineCacheData");
    VkPipelineCacheCreateInfo pci = {.sType = VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO};
    KT_REQUIRE(cpc && v->destroy_cache && v->cache_data);
    KT_REQUIRE(cpc(v->device, &pci, NULL, &v->cache) == VK_SUCCESS);
    pf_pin_loaded_libraries();
}

void pf_own_vulkan_make(struct pf_own_vulkan *v)
{
    own_vulkan_make(v, false);
}

void pf_own_vulkan_make_gpl(struct pf_own_vulkan *v)
{
    own_vulkan_make(v, true);
}

struct kiln_vk_external pf_own_external(const struct pf_own_vulkan *v)
{
    return (struct kiln_vk_external){.size = sizeof(struct kiln_vk_external),
                                     .get_instance_proc_addr = v->gipa,
                                     .instance = v->instance,
                                     .physical_device = v->phys,
                                     .device = v->device,
                                     .queue_family = v->family,
                                     .pipeline_cache = v->cache,
                                     .api_version = VK_API_VERSION_1_1};
}

size_t pf_own_cache_bytes(const struct pf_own_vulkan *v)
{
    size_t n = 0;
    KT_CHECK(v->cache_data(v->device, v->cache, &n, NULL) == VK_SUCCESS);
    return n;
}

void pf_own_vulkan_destroy(struct pf_own_vulkan *v)
{
    v->destroy_cache(v->device, v->cache, NULL);
    v->destroy_device(v->device, NULL);
    v->destroy_instance(v->instance, NULL);
}
