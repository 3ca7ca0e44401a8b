/*
 * isolate_app_worker.c - a worker executable as an application writes one
 * for isolation: it calls kiln_isolate_worker_main with its own builder
 * for KILN_STATE_APP (the parent's builders do not cross processes).
 * test_isolate.c's app_builder_in_workers runs it.
 *
 * The builder reads the state's first four bytes: 0 builds a compute pipeline in
 * kiln's shared layout, 1 answers KILN_ENOTSUP ("mode 1 not offered
 * here"), 2 answers KILN_EFORMAT, 3 crashes the process (SIGSEGV at its
 * default action, as a driver's crash would), 4 and 5 answer KILN_ENOTSUP
 * saying whether the context has VK_EXT_graphics_pipeline_library ("GPL
 * on" or "GPL off"). Its device extensions are APP_WORKER_EXTENSIONS,
 * which the parent's builder lists too (test_isolate.c's
 * extensions_in_workers).
 */
#ifndef VK_NO_PROTOTYPES
#define VK_NO_PROTOTYPES
#endif
#include <vulkan/vulkan.h>

#include "kiln.h"

#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

static int app_build(void *user, struct kiln_build_request *req)
{
    (void)user;
    uint32_t mode = 0;
    if (req->state_kind != KILN_STATE_APP || req->state_size < 4 || req->nstages != 1) {
        snprintf(req->why, sizeof(req->why), "unexpected request");
        return KILN_EINVAL;
    }
    memcpy(&mode, req->state, 4);
    if (mode == 1) {
        snprintf(req->why, sizeof(req->why), "mode 1 not offered here");
        return KILN_ENOTSUP;
    }
    if (mode == 2) {
        snprintf(req->why, sizeof(req->why), "mode 2 unreadable");
        return KILN_EFORMAT;
    }
    if (mode == 4 || mode == 5) {
        bool on = kiln_vk_extension_enabled(req->vk, "VK_EXT_graphics_pipeline_library");
        snprintf(req->why, sizeof(req->why), "GPL %s", on ? "on" : "off");
        return KILN_ENOTSUP;
    }
    if (mode == 3) {
        signal(SIGSEGV, SIG_DFL);
        raise(SIGSEGV);
    }
    struct kiln_vk_handles h = KILN_VK_HANDLES_INIT;
    kiln_vk_get_handles(req->vk, &h);
    PFN_vkCreateComputePipelines create = (PFN_vkCreateComputePipelines)req->get_device_proc_addr(
        req->device, "vkCreateComputePipelines");
    VkComputePipelineCreateInfo ci = {.sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
                                      .stage = req->stages[0],
                                      .layout = h.pipeline_layout};
    VkResult r = create(req->device, req->pipeline_cache, 1, &ci, NULL, &req->pipeline);
    if (r != VK_SUCCESS) {
        snprintf(req->why, sizeof(req->why), "vkCreateComputePipelines: %d", (int)r);
        return KILN_EVULKAN;
    }
    return KILN_OK;
}

int main(void)
{
    static const char *const exts[] = {"VK_KHR_pipeline_library",
                                       "VK_EXT_graphics_pipeline_library"};
    struct kiln_builder b = {.size = sizeof(b),
                             .kind = KILN_STATE_APP,
                             .build = app_build,
                             .name = "app",
                             .device_extensions = exts,
                             .ndevice_extensions = 2};
    struct kiln_isolate_worker_options o = {.size = sizeof(o), .builders = &b, .nbuilders = 1};
    return kiln_isolate_worker_main(-1, -1, &o) == KILN_OK ? 0 : 1;
}
