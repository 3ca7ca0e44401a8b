/*
 * app-builder - an application that builds its own graphics pipelines
 * through kiln: its own VkInstance and VkDevice, its own pipeline state
 * (vertex input, blending, depth) as bytes kiln stores without reading
 * them, and a builder kiln calls on its worker threads to make each
 * pipeline with vkCreateGraphicsPipelines.
 *
 *   app-builder [CACHE_DIR]
 *
 * 1. Makes a Vulkan instance and device with the loader, and wraps them in
 *    a kiln context (kiln_vk_options.external): kiln builds in them and
 *    never destroys them.
 * 2. kiln_prepare over the application's array of programs
 *    (kiln_program_source_array): each is the same two stages with its own
 *    state bytes (struct app_state) and specialization constant, of kind
 *    KILN_STATE_APP; kiln stores them in the cache and calls the builder
 *    for each one.
 * 3. kiln_warm_start from the same cache with the same builder, as the
 *    application's next start would: the programs come back from the
 *    cache, state and all, and are built again (through the pipeline cache
 *    this time).
 *
 * Exit status: 0 when every pipeline was built both times, 1 when not,
 * 77 where there is no Vulkan device (a test runner's "skipped").
 */
#include <vulkan/vulkan.h>

#include "kiln.h"

#include "shaders.h"

#include <dirent.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SKIP 77

/* ---- the application's pipeline state ------------------------------------ */

/* What one pipeline needs beyond its stages, as the application stores it
 * in kiln's cache. kiln keeps these bytes as they are; only the builder
 * below reads them. A real renderer would write a versioned, endian-fixed
 * form; a version field is enough for the example. */
struct app_state {
    uint32_t version; /* APP_STATE_VERSION */
    uint32_t slot;    /* where the builder puts the pipeline (0..APP_PIPELINES-1) */
    uint32_t blend;   /* 0: opaque, 1: alpha blending, 2: additive */
    uint32_t depth_test;
    uint32_t depth_write;
    uint32_t compare_op; /* a VkCompareOp */
    uint32_t cull_mode;  /* a VkCullModeFlags */
    uint32_t topology;   /* a VkPrimitiveTopology */
};

#define APP_STATE_VERSION 1u
#define APP_PIPELINES     3u

/* One vertex: a 2D position and a color (tri.vert's inputs). */
struct vertex {
    float pos[2];
    float color[3];
};

static const VkFormat color_format = VK_FORMAT_R8G8B8A8_UNORM;
static const VkFormat depth_format = VK_FORMAT_D32_SFLOAT;

/* ---- the application's Vulkan -------------------------------------------- */

struct app {
    VkInstance instance;
    VkPhysicalDevice phys;
    VkDevice device;
    uint32_t family;
    VkPipelineCache cache;
    VkRenderPass pass;
    VkPipelineLayout layout;
    /* The pipelines the builder made, one per slot; written by kiln's
     * worker threads, each slot by one program only. */
    _Atomic(VkPipeline) pipelines[APP_PIPELINES];
    atomic_uint built;
};

/* Makes the instance and the device. @return 0, SKIP without a device. */
static int app_vulkan(struct app *a)
{
    VkApplicationInfo info = {.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO,
                              .pApplicationName = "kiln app-builder",
                              .apiVersion = VK_API_VERSION_1_1};
    VkInstanceCreateInfo ici = {.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
                                .pApplicationInfo = &info};
    if (vkCreateInstance(&ici, NULL, &a->instance) != VK_SUCCESS) {
        fprintf(stderr, "app-builder: no Vulkan driver: skipped\n");
        return SKIP;
    }
    uint32_t n = 0;
    vkEnumeratePhysicalDevices(a->instance, &n, NULL);
    VkPhysicalDevice devs[16];
    n = n > 16 ? 16 : n;
    if (n == 0 || vkEnumeratePhysicalDevices(a->instance, &n, devs) < 0) {
        fprintf(stderr, "app-builder: no Vulkan device: skipped\n");
        return SKIP;
    }
    a->family = UINT32_MAX;
    for (uint32_t d = 0; d < n && a->family == UINT32_MAX; d++) {
        VkQueueFamilyProperties q[16];
        uint32_t nq = 16;
        vkGetPhysicalDeviceQueueFamilyProperties(devs[d], &nq, q);
        for (uint32_t i = 0; i < nq && a->family == UINT32_MAX; i++)
            if (q[i].queueFlags & VK_QUEUE_GRAPHICS_BIT) {
                a->phys = devs[d];
                a->family = i;
            }
    }
    if (a->family == UINT32_MAX) {
        fprintf(stderr, "app-builder: no device with a graphics queue: skipped\n");
        return SKIP;
    }
    float prio = 1.0f;
    VkDeviceQueueCreateInfo qci = {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
                                   .queueFamilyIndex = a->family,
                                   .queueCount = 1,
                                   .pQueuePriorities = &prio};
    VkDeviceCreateInfo dci = {.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
                              .queueCreateInfoCount = 1,
                              .pQueueCreateInfos = &qci};
    if (vkCreateDevice(a->phys, &dci, NULL, &a->device) != VK_SUCCESS) {
        fprintf(stderr, "app-builder: vkCreateDevice failed\n");
        return 1;
    }
    VkPipelineCacheCreateInfo pci = {.sType = VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO};
    if (vkCreatePipelineCache(a->device, &pci, NULL, &a->cache) != VK_SUCCESS)
        return 1;

    /* What every pipeline of the application shares: one render pass (a
     * color and a depth attachment) and one layout (a matrix in push
     * constants). */
    VkAttachmentDescription att[2] = {
        {.format = color_format,
         .samples = VK_SAMPLE_COUNT_1_BIT,
         .loadOp = VK_ATTACHMENT_LOAD_OP_CLEAR,
         .storeOp = VK_ATTACHMENT_STORE_OP_STORE,
         .stencilLoadOp = VK_ATTACHMENT_LOAD_OP_DONT_CARE,
         .stencilStoreOp = VK_ATTACHMENT_STORE_OP_DONT_CARE,
         .initialLayout = VK_IMAGE_LAYOUT_UNDEFINED,
         .finalLayout = VK_IMAGE_LAYOUT_COLOR_ATTACHMENT_OPTIMAL},
        {.format = depth_format,
         .samples = VK_SAMPLE_COUNT_1_BIT,
         .loadOp = VK_ATTACHMENT_LOAD_OP_CLEAR,
         .storeOp = VK_ATTACHMENT_STORE_OP_DONT_CARE,
         .stencilLoadOp = VK_ATTACHMENT_LOAD_OP_DONT_CARE,
         .stencilStoreOp = VK_ATTACHMENT_STORE_OP_DONT_CARE,
         .initialLayout = VK_IMAGE_LAYOUT_UNDEFINED,
         .finalLayout = VK_IMAGE_LAYOUT_DEPTH_STENCIL_ATTACHMENT_OPTIMAL},
    };
    VkAttachmentReference color_ref = {0, VK_IMAGE_LAYOUT_COLOR_ATTACHMENT_OPTIMAL};
    VkAttachmentReference depth_ref = {1, VK_IMAGE_LAYOUT_DEPTH_STENCIL_ATTACHMENT_OPTIMAL};
    VkSubpassDescription sub = {.pipelineBindPoint = VK_PIPELINE_BIND_POINT_GRAPHICS,
                                .colorAttachmentCount = 1,
                                .pColorAttachments = &color_ref,
                                .pDepthStencilAttachment = &depth_ref};
    VkRenderPassCreateInfo rci = {.sType = VK_STRUCTURE_TYPE_RENDER_PASS_CREATE_INFO,
                                  .attachmentCount = 2,
                                  .pAttachments = att,
                                  .subpassCount = 1,
                                  .pSubpasses = &sub};
    if (vkCreateRenderPass(a->device, &rci, NULL, &a->pass) != VK_SUCCESS)
        return 1;
    VkPushConstantRange push = {.stageFlags = VK_SHADER_STAGE_VERTEX_BIT, .size = 64};
    VkPipelineLayoutCreateInfo lci = {.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO,
                                      .pushConstantRangeCount = 1,
                                      .pPushConstantRanges = &push};
    if (vkCreatePipelineLayout(a->device, &lci, NULL, &a->layout) != VK_SUCCESS)
        return 1;
    return 0;
}

static void app_destroy_pipelines(struct app *a)
{
    for (unsigned i = 0; i < APP_PIPELINES; i++) {
        VkPipeline p = atomic_exchange(&a->pipelines[i], VK_NULL_HANDLE);
        if (p)
            vkDestroyPipeline(a->device, p, NULL);
    }
    atomic_store(&a->built, 0);
}

static void app_vulkan_destroy(struct app *a)
{
    if (a->device) {
        app_destroy_pipelines(a);
        vkDestroyPipelineLayout(a->device, a->layout, NULL);
        vkDestroyRenderPass(a->device, a->pass, NULL);
        vkDestroyPipelineCache(a->device, a->cache, NULL);
        vkDestroyDevice(a->device, NULL);
    }
    if (a->instance)
        vkDestroyInstance(a->instance, NULL);
}

/* ---- the builder kiln calls ------------------------------------------------ */

/*
 * Builds one of the application's pipelines from its state bytes and the
 * stages kiln staged. Runs on kiln's worker threads, several at once: it
 * touches only its own slot of the pipeline table. It calls Vulkan through
 * the device functions kiln hands over (req->get_device_proc_addr), as a
 * renderer that loads its functions itself would; this example could call
 * vkCreateGraphicsPipelines directly too, since the device is its own.
 */
static int app_build(void *user, struct kiln_build_request *req)
{
    struct app *a = user;
    struct app_state s;
    if (req->state_size != sizeof(s)) {
        snprintf(req->why, sizeof(req->why), "state of %zu bytes, not %zu", req->state_size,
                 sizeof(s));
        return KILN_EFORMAT;
    }
    memcpy(&s, req->state, sizeof(s));
    if (s.version != APP_STATE_VERSION || s.slot >= APP_PIPELINES || req->nstages != 2) {
        snprintf(req->why, sizeof(req->why), "state version %u, slot %u, %u stages", s.version,
                 s.slot, req->nstages);
        return KILN_EFORMAT;
    }

    VkVertexInputBindingDescription binding = {
        .binding = 0, .stride = sizeof(struct vertex), .inputRate = VK_VERTEX_INPUT_RATE_VERTEX};
    VkVertexInputAttributeDescription attrs[2] = {
        {.location = 0, .binding = 0, .format = VK_FORMAT_R32G32_SFLOAT, .offset = 0},
        {.location = 1,
         .binding = 0,
         .format = VK_FORMAT_R32G32B32_SFLOAT,
         .offset = offsetof(struct vertex, color)},
    };
    VkPipelineVertexInputStateCreateInfo vin = {
        .sType = VK_STRUCTURE_TYPE_PIPELINE_VERTEX_INPUT_STATE_CREATE_INFO,
        .vertexBindingDescriptionCount = 1,
        .pVertexBindingDescriptions = &binding,
        .vertexAttributeDescriptionCount = 2,
        .pVertexAttributeDescriptions = attrs};
    VkPipelineInputAssemblyStateCreateInfo ia = {
        .sType = VK_STRUCTURE_TYPE_PIPELINE_INPUT_ASSEMBLY_STATE_CREATE_INFO,
        .topology = (VkPrimitiveTopology)s.topology};
    VkPipelineViewportStateCreateInfo vp = {
        .sType = VK_STRUCTURE_TYPE_PIPELINE_VIEWPORT_STATE_CREATE_INFO,
        .viewportCount = 1,
        .scissorCount = 1};
    VkPipelineRasterizationStateCreateInfo rs = {
        .sType = VK_STRUCTURE_TYPE_PIPELINE_RASTERIZATION_STATE_CREATE_INFO,
        .polygonMode = VK_POLYGON_MODE_FILL,
        .cullMode = s.cull_mode,
        .frontFace = VK_FRONT_FACE_COUNTER_CLOCKWISE,
        .lineWidth = 1.0f};
    VkPipelineMultisampleStateCreateInfo ms = {
        .sType = VK_STRUCTURE_TYPE_PIPELINE_MULTISAMPLE_STATE_CREATE_INFO,
        .rasterizationSamples = VK_SAMPLE_COUNT_1_BIT};
    VkPipelineDepthStencilStateCreateInfo ds = {
        .sType = VK_STRUCTURE_TYPE_PIPELINE_DEPTH_STENCIL_STATE_CREATE_INFO,
        .depthTestEnable = s.depth_test ? VK_TRUE : VK_FALSE,
        .depthWriteEnable = s.depth_write ? VK_TRUE : VK_FALSE,
        .depthCompareOp = (VkCompareOp)s.compare_op};
    VkPipelineColorBlendAttachmentState blend = {
        .blendEnable = s.blend ? VK_TRUE : VK_FALSE,
        .srcColorBlendFactor = VK_BLEND_FACTOR_SRC_ALPHA,
        .dstColorBlendFactor =
            s.blend == 2 ? VK_BLEND_FACTOR_ONE : VK_BLEND_FACTOR_ONE_MINUS_SRC_ALPHA,
        .colorBlendOp = VK_BLEND_OP_ADD,
        .srcAlphaBlendFactor = VK_BLEND_FACTOR_ONE,
        .dstAlphaBlendFactor = VK_BLEND_FACTOR_ZERO,
        .alphaBlendOp = VK_BLEND_OP_ADD,
        .colorWriteMask = VK_COLOR_COMPONENT_R_BIT | VK_COLOR_COMPONENT_G_BIT |
                          VK_COLOR_COMPONENT_B_BIT | VK_COLOR_COMPONENT_A_BIT};
    VkPipelineColorBlendStateCreateInfo cb = {
        .sType = VK_STRUCTURE_TYPE_PIPELINE_COLOR_BLEND_STATE_CREATE_INFO,
        .attachmentCount = 1,
        .pAttachments = &blend};
    VkDynamicState dyn[2] = {VK_DYNAMIC_STATE_VIEWPORT, VK_DYNAMIC_STATE_SCISSOR};
    VkPipelineDynamicStateCreateInfo dy = {.sType =
                                               VK_STRUCTURE_TYPE_PIPELINE_DYNAMIC_STATE_CREATE_INFO,
                                           .dynamicStateCount = 2,
                                           .pDynamicStates = dyn};
    VkGraphicsPipelineCreateInfo ci = {
        .sType = VK_STRUCTURE_TYPE_GRAPHICS_PIPELINE_CREATE_INFO,
        .stageCount = req->nstages,
        .pStages = req->stages, /* kiln's staged modules, entry points, constants */
        .pVertexInputState = &vin,
        .pInputAssemblyState = &ia,
        .pViewportState = &vp,
        .pRasterizationState = &rs,
        .pMultisampleState = &ms,
        .pDepthStencilState = &ds,
        .pColorBlendState = &cb,
        .pDynamicState = &dy,
        .layout = a->layout,
        .renderPass = a->pass};
    PFN_vkCreateGraphicsPipelines create = (PFN_vkCreateGraphicsPipelines)req->get_device_proc_addr(
        req->device, "vkCreateGraphicsPipelines");
    VkPipeline pipe = VK_NULL_HANDLE;
    VkResult r = create(req->device, req->pipeline_cache, 1, &ci, NULL, &pipe);
    if (r != VK_SUCCESS) {
        snprintf(req->why, sizeof(req->why), "vkCreateGraphicsPipelines: %s",
                 kiln_vk_result_name(r));
        return KILN_EVULKAN;
    }
    /* The application keeps its pipelines itself: req->pipeline stays null,
     * so kiln neither hands it on nor destroys it. */
    VkPipeline old = atomic_exchange(&a->pipelines[s.slot], pipe);
    if (old)
        vkDestroyPipeline(a->device, old, NULL);
    atomic_fetch_add(&a->built, 1);
    return KILN_OK;
}

/* ---- the programs ------------------------------------------------------------ */

/* Three pipelines of the same two stages: opaque with depth, alpha-blended
 * without depth writes, additive with no depth at all. The fragment
 * stage's alpha is a specialization constant (constant 0). */
static const struct app_state states[APP_PIPELINES] = {
    {APP_STATE_VERSION, 0, 0, 1, 1, VK_COMPARE_OP_LESS, VK_CULL_MODE_BACK_BIT,
     VK_PRIMITIVE_TOPOLOGY_TRIANGLE_LIST},
    {APP_STATE_VERSION, 1, 1, 1, 0, VK_COMPARE_OP_LESS_OR_EQUAL, VK_CULL_MODE_NONE,
     VK_PRIMITIVE_TOPOLOGY_TRIANGLE_LIST},
    {APP_STATE_VERSION, 2, 2, 0, 0, VK_COMPARE_OP_ALWAYS, VK_CULL_MODE_NONE,
     VK_PRIMITIVE_TOPOLOGY_TRIANGLE_STRIP},
};
static const float alphas[APP_PIPELINES] = {1.0f, 0.5f, 0.25f};
static const char *const names[APP_PIPELINES] = {"opaque", "alpha", "additive"};

/* Removes a folder of files (the temporary cache: kiln's files only). */
static void remove_folder(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    char path[4096];
    while (d && (e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        unlink(path);
    }
    if (d)
        closedir(d);
    rmdir(dir);
}

static int check(const char *what, uint64_t built, uint64_t skipped, uint64_t failed,
                 const struct app *a)
{
    printf("%s: %llu built, %llu skipped, %llu failed; the builder made %u\n", what,
           (unsigned long long)built, (unsigned long long)skipped, (unsigned long long)failed,
           atomic_load(&a->built));
    bool ok = built == APP_PIPELINES && skipped == 0 && failed == 0 &&
              atomic_load(&a->built) == APP_PIPELINES;
    for (unsigned i = 0; i < APP_PIPELINES; i++)
        ok = ok && atomic_load(&a->pipelines[i]) != VK_NULL_HANDLE;
    if (!ok)
        fprintf(stderr, "app-builder: %s did not build every pipeline\n", what);
    return ok ? 0 : 1;
}

int main(int argc, char **argv)
{
    char tmp[] = "/tmp/kiln-app-builder-XXXXXX";
    const char *dir = argc > 1 ? argv[1] : mkdtemp(tmp);
    if (!dir) {
        perror("app-builder: mkdtemp");
        return 1;
    }
    struct app a = {0};
    int rc = app_vulkan(&a);
    if (rc != 0) {
        app_vulkan_destroy(&a);
        return rc;
    }

    /* kiln over the application's own Vulkan objects. */
    struct kiln_vk_external ext = {.size = sizeof(ext),
                                   .get_instance_proc_addr = vkGetInstanceProcAddr,
                                   .instance = a.instance,
                                   .physical_device = a.phys,
                                   .device = a.device,
                                   .queue_family = a.family,
                                   .pipeline_cache = a.cache,
                                   .api_version = VK_API_VERSION_1_1};
    struct kiln_vk_options vo = {.size = sizeof(vo), .external = &ext};
    struct kiln_vk *vk = NULL;
    if (kiln_vk_create(&vo, &vk) < 0) {
        app_vulkan_destroy(&a);
        return 1;
    }

    /* The programs, in the application's own memory: kiln copies what it
     * needs. */
    struct kiln_spec_entry spec = {.constant_id = 0, .offset = 0, .size = sizeof(float)};
    struct kiln_program_stage stages[APP_PIPELINES][2];
    struct kiln_program programs[APP_PIPELINES];
    for (unsigned i = 0; i < APP_PIPELINES; i++) {
        stages[i][0] = (struct kiln_program_stage){
            .src = {.stage = KILN_VK_STAGE_VERTEX_BIT, .name = "tri.vert"},
            .words = (uint32_t *)(uintptr_t)tri_vert_spv,
            .nwords = sizeof(tri_vert_spv) / 4};
        stages[i][1] = (struct kiln_program_stage){
            .src = {.stage = KILN_VK_STAGE_FRAGMENT_BIT, .name = "tri.frag"},
            .words = (uint32_t *)(uintptr_t)tri_frag_spv,
            .nwords = sizeof(tri_frag_spv) / 4,
            .nspec = 1,
            .spec = &spec,
            .spec_data = (void *)(uintptr_t)&alphas[i],
            .spec_size = sizeof(float)};
        programs[i] = (struct kiln_program){.size = sizeof(struct kiln_program),
                                            .stage_size = sizeof(struct kiln_program_stage),
                                            .name = (char *)(uintptr_t)names[i],
                                            .nstages = 2,
                                            .stages = stages[i],
                                            .state_kind = KILN_STATE_APP,
                                            .state = (void *)(uintptr_t)&states[i],
                                            .state_size = sizeof(states[i])};
    }
    /* The stamp names the application's shaders and state layout: a cache
     * made by another version is not used. */
    struct kiln_program_array arr = {.size = sizeof(arr),
                                     .programs = programs,
                                     .count = APP_PIPELINES,
                                     .stamp = 0x617070u << 8 | APP_STATE_VERSION};
    struct kiln_program_source src = kiln_program_source_array(&arr);
    struct kiln_builder builder = {.size = sizeof(builder),
                                   .kind = KILN_STATE_APP,
                                   .user = &a,
                                   .build = app_build,
                                   .name = "app-builder"};

    /* First run: store and build. */
    struct kiln_prepare_options po = KILN_PREPARE_OPTIONS_INIT;
    kiln_prepare_options_init(&po);
    po.cache_dir = dir;
    po.source = &src;
    po.vk = vk;
    po.builders = &builder;
    po.nbuilders = 1;
    struct kiln_prepare_summary ps = KILN_PREPARE_SUMMARY_INIT;
    rc = kiln_prepare(&po, NULL, NULL, &ps);
    if (rc == KILN_OK) {
        const struct kiln_kind_counts *k = &ps.kinds[KILN_STATE_APP];
        rc = check("prepare", k->built, k->skipped, k->failed, &a);
    }

    /* The next start: everything from the cache, through the same builder. */
    if (rc == KILN_OK) {
        app_destroy_pipelines(&a);
        struct kiln_start_options so = {.size = sizeof(so),
                                        .cache_dir = dir,
                                        .stamp = arr.stamp,
                                        .vk = vk,
                                        .builders = &builder,
                                        .nbuilders = 1};
        struct kiln_start_summary ss = KILN_START_SUMMARY_INIT;
        rc = kiln_warm_start(&so, NULL, NULL, &ss);
        if (rc == KILN_OK) {
            const struct kiln_kind_counts *k = &ss.kinds[KILN_STATE_APP];
            printf("warm start: %llu records loaded\n", (unsigned long long)ss.loaded);
            rc = check("warm start", k->built, k->skipped, k->failed, &a);
        }
    }

    kiln_vk_destroy(vk); /* the application's objects stay */
    app_vulkan_destroy(&a);
    if (argc <= 1)
        remove_folder(dir); /* the temporary cache */
    return rc == KILN_OK ? 0 : 1;
}
