/*
 * runtime - a minimal emulator frame loop over kiln.
 *
 *   runtime CACHE_DIR [--expect-warm N]
 *
 * Design. An emulator owns its Vulkan objects and its pipeline layouts;
 * kiln keeps the programs it meets and builds them again at the next start:
 *
 * 1. Vulkan: its own VkInstance and VkDevice (any driver; lavapipe will
 *    do), handed to kiln as a context over them (kiln_vk_options.external).
 * 2. Warm start: kiln_warm_start reads every program the cache holds and
 *    builds each through the emulator's own builder (state kind
 *    KILN_STATE_APP), which makes a compute pipeline in its own layout.
 * 3. Frame loop: at frame 3 the "guest" runs a shader the emulator has not
 *    seen: it is translated (here: SPIR-V written in code, a compute
 *    shader whose local size is the guest's value) and asked of the
 *    pipeline service (kiln/service.h) as urgent. The loop polls the
 *    ticket each frame and skips the draw until the pipeline is ready; the
 *    service built it through the emulator's builder on its own worker and
 *    stored the program (kiln_cache_put_program: checked, packed, keyed,
 *    marked validated). A later run finds it stored.
 * 4. Exit: the cache is closed (synced); the next start builds the program
 *    in step 2. With --expect-warm N the exit status is 1 when the warm
 *    start built fewer than N pipelines.
 */
#include <kiln.h>
#include <vulkan/vulkan.h>

#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define STAMP 0x72756e74u /* names this emulator's shader translator */
#define SKIP  77

struct emu {
    VkInstance instance;
    VkPhysicalDevice phys;
    VkDevice device;
    uint32_t family;
    VkPipelineLayout layout; /* the emulator's own: no resources */
    atomic_uint warm_built;
};

/* The emulator's state bytes for a program: what its builder reads. */
static const uint8_t app_state[4] = {'r', 't', '1', 0};

/* A guest shader "translated": a compute shader of local size (x, 1, 1). */
static void translate(uint32_t x, uint32_t w[35])
{
    const uint32_t t[35] = {0x07230203u,
                            0x00010000u,
                            0,
                            5,
                            0,
                            (2u << 16) | 17,
                            1,
                            (3u << 16) | 14,
                            0,
                            1,
                            (5u << 16) | 15,
                            5,
                            1,
                            0x6e69616du,
                            0, /* OpEntryPoint GLCompute %1 "main" */
                            (6u << 16) | 16,
                            1,
                            17,
                            x,
                            1,
                            1, /* OpExecutionMode %1 LocalSize x 1 1 */
                            (2u << 16) | 19,
                            2,
                            (3u << 16) | 33,
                            3,
                            2,
                            (5u << 16) | 54,
                            2,
                            1,
                            0,
                            3,
                            (2u << 16) | 248,
                            4,
                            (1u << 16) | 253,
                            (1u << 16) | 56};
    memcpy(w, t, sizeof(t));
}

static int vulkan_up(struct emu *e)
{
    VkApplicationInfo ai = {.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO,
                            .apiVersion = VK_API_VERSION_1_1};
    VkInstanceCreateInfo ici = {.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
                                .pApplicationInfo = &ai};
    if (vkCreateInstance(&ici, NULL, &e->instance) != VK_SUCCESS)
        return SKIP;
    uint32_t n = 1;
    if (vkEnumeratePhysicalDevices(e->instance, &n, &e->phys) < 0 || n == 0)
        return SKIP;
    VkQueueFamilyProperties q[16];
    uint32_t nq = 16;
    vkGetPhysicalDeviceQueueFamilyProperties(e->phys, &nq, q);
    for (e->family = 0; e->family < nq; e->family++)
        if ((q[e->family].queueFlags & (VK_QUEUE_GRAPHICS_BIT | VK_QUEUE_COMPUTE_BIT)) ==
            (VK_QUEUE_GRAPHICS_BIT | VK_QUEUE_COMPUTE_BIT))
            break;
    if (e->family == nq)
        return SKIP;
    float prio = 1.0f;
    VkDeviceQueueCreateInfo qci = {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
                                   .queueFamilyIndex = e->family,
                                   .queueCount = 1,
                                   .pQueuePriorities = &prio};
    VkDeviceCreateInfo dci = {.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
                              .queueCreateInfoCount = 1,
                              .pQueueCreateInfos = &qci};
    VkPipelineLayoutCreateInfo lci = {.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO};
    if (vkCreateDevice(e->phys, &dci, NULL, &e->device) != VK_SUCCESS ||
        vkCreatePipelineLayout(e->device, &lci, NULL, &e->layout) != VK_SUCCESS)
        return 1;
    return 0;
}

static VkPipeline compute_pipeline(struct emu *e, const VkPipelineShaderStageCreateInfo *stage)
{
    VkComputePipelineCreateInfo ci = {.sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
                                      .stage = *stage,
                                      .layout = e->layout};
    VkPipeline p = VK_NULL_HANDLE;
    vkCreateComputePipelines(e->device, VK_NULL_HANDLE, 1, &ci, NULL, &p);
    return p;
}

/* The emulator's builder: kiln staged the stage, the emulator builds. */
static int build(void *user, struct kiln_build_request *req)
{
    struct emu *e = user;
    if (req->nstages != 1 || req->state_size != sizeof(app_state)) {
        snprintf(req->why, sizeof(req->why), "not one of this emulator's programs");
        return KILN_EFORMAT;
    }
    req->pipeline = compute_pipeline(e, &req->stages[0]);
    if (!req->pipeline)
        return KILN_EVULKAN;
    atomic_fetch_add(&e->warm_built, 1);
    return KILN_OK;
}

/* A program met during play: asked of the pipeline service, urgent (this
 * frame draws with it). The service stores it in the cache unless it is
 * there, and builds it through the emulator's builder on its worker; the
 * frame loop never waits. @return 0 or a kiln error. */
static int meet(struct kiln_service *svc, struct kiln_cache *c, uint32_t guest_value,
                struct kiln_ticket **t)
{
    uint32_t words[35];
    translate(guest_value, words);
    struct kiln_program_stage st = {
        .src = {.stage = KILN_VK_STAGE_COMPUTE_BIT, .name = "guest.comp"},
        .words = words,
        .nwords = 35};
    struct kiln_program p = {.size = sizeof(struct kiln_program),
                             .stage_size = sizeof(struct kiln_program_stage),
                             .name = "guest-program",
                             .nstages = 1,
                             .stages = &st,
                             .state_kind = KILN_STATE_APP,
                             .state = (void *)app_state,
                             .state_size = sizeof(app_state)};
    struct kiln_key key;
    int rc = kiln_program_key(&p, &key);
    if (rc == KILN_OK)
        printf("play: %s\n", kiln_cache_find(c, key, NULL) == KILN_OK
                                 ? "program met again: already in the cache"
                                 : "new program: the service stores it");
    struct kiln_pipeline_request r = {
        .size = sizeof(r), .program = &p, .priority = KILN_PRIORITY_URGENT};
    return rc == KILN_OK ? kiln_service_request(svc, &r, t) : rc; /* p is copied */
}

static void on_pipeline(void *user, struct kiln_key key, struct kiln_vk_pipeline *p)
{
    (void)key;
    kiln_vk_pipeline_destroy(user, p); /* an emulator keeps it in its table */
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: runtime CACHE_DIR [--expect-warm N]\n");
        return 2;
    }
    unsigned expect = argc > 3 && !strcmp(argv[2], "--expect-warm") ? atoi(argv[3]) : 0;
    struct emu e = {0};
    int rc = vulkan_up(&e);
    if (rc != 0) {
        printf("SKIP: no Vulkan device\n");
        return rc;
    }
    struct kiln_vk_external ext = {.size = sizeof(ext),
                                   .get_instance_proc_addr = vkGetInstanceProcAddr,
                                   .instance = e.instance,
                                   .physical_device = e.phys,
                                   .device = e.device,
                                   .queue_family = e.family,
                                   .api_version = VK_API_VERSION_1_1};
    struct kiln_vk_options vo = {.size = sizeof(vo), .external = &ext};
    struct kiln_vk *vk = NULL;
    if (kiln_vk_create(&vo, &vk) < 0)
        return 1;

    /* Start: every program met before, built by the emulator's builder. */
    struct kiln_builder b = {
        .size = sizeof(b), .kind = KILN_STATE_APP, .user = &e, .build = build, .name = "emu"};
    struct kiln_start_options so = {.size = sizeof(so),
                                    .cache_dir = argv[1],
                                    .stamp = STAMP,
                                    .vk = vk,
                                    .builders = &b,
                                    .nbuilders = 1,
                                    .on_pipeline = on_pipeline,
                                    .pipeline_user = vk};
    struct kiln_start_summary ss = KILN_START_SUMMARY_INIT;
    rc = kiln_warm_start(&so, NULL, NULL, &ss);
    unsigned warm = atomic_load(&e.warm_built); /* the service's builds come after */
    printf("warm start: %llu records, %u built (%s)\n", (unsigned long long)ss.loaded, warm,
           rc == KILN_ENOENT ? "no cache yet" : kiln_strerror(rc));

    /* Play: the frame loop asks the pipeline service for what it meets. */
    struct kiln_cache_options co = {.size = sizeof(co), .stamp = STAMP, .flags = KILN_CACHE_CREATE};
    struct kiln_cache *c = NULL;
    rc = kiln_cache_open(argv[1], &co, &c);
    struct kiln_service_options svo = {
        .size = sizeof(svo), .vk = vk, .cache = c, .builders = &b, .nbuilders = 1, .workers = 1};
    struct kiln_service *svc = NULL;
    if (rc == KILN_OK)
        rc = kiln_service_create(&svo, &svc);
    struct kiln_ticket *t = NULL;
    unsigned skipped = 0;
    bool ready = false;
    for (unsigned frame = 0; frame < 5000 && rc == KILN_OK && !ready; frame++) {
        if (frame == 3)
            rc = meet(svc, c, 64, &t); /* the guest's shader of this frame */
        if (!t)
            continue;
        struct kiln_ticket_info info = KILN_TICKET_INFO_INIT;
        int state = kiln_ticket_poll(t, &info); /* never blocks */
        if (state == KILN_TICKET_PENDING) {
            skipped++;                           /* this frame's draw is skipped */
            kiln_ticket_wait(t, 2000000u, NULL); /* stands in for the rest of the frame */
        } else {
            ready = state == KILN_TICKET_READY;
            rc = ready ? KILN_OK : info.error;
            printf("play: pipeline %s after %u skipped draw%s\n", ready ? "ready" : "failed",
                   skipped, skipped == 1 ? "" : "s");
        }
    }
    kiln_ticket_release(t);
    kiln_service_destroy(svc); /* its pipelines too: an emulator keeps the service to exit */
    kiln_cache_close(c);       /* synced: the next start finds it */
    kiln_vk_destroy(vk);       /* the emulator's own objects stay */
    vkDestroyPipelineLayout(e.device, e.layout, NULL);
    vkDestroyDevice(e.device, NULL);
    vkDestroyInstance(e.instance, NULL);
    if (rc != KILN_OK || warm < expect) {
        fprintf(stderr, "runtime: %s; warm start built %u of %u expected\n", kiln_strerror(rc),
                warm, expect);
        return 1;
    }
    return 0;
}
