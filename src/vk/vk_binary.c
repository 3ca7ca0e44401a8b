/*
 * vk_binary.c - the device's side of the host tier of driver binaries
 * (VK_KHR_pipeline_binary): the driver's global key, capturing a built
 * pipeline's binaries and making a pipeline from them. The tier itself
 * (storage, staleness) is prep's (src/prep/binaries.c), which reaches this
 * file through struct kiln__bin_provider (kiln_internal.h).
 *
 * Compiled in only where the Vulkan headers know the extension (1.3.260
 * and later; -DKILN_VULKAN_INCLUDE_DIR puts newer ones first): elsewhere
 * the provider answers KILN_ENOTSUP and kiln keeps pipelines.vkc, as it
 * does where the device lacks the extension or maintenance5.
 *
 * Invariants and why they hold:
 *
 * - Every VkPipelineBinaryKHR made here is destroyed before the call
 *   returns, whatever the driver answered: a capture hands out copies of
 *   their keys and data, a create_from needs them only for its create
 *   call. The one exception, bind (a builder's pipeline), hands them out
 *   for one create and unbind destroys them right after it (start.c
 *   calls it whatever the builder answered). A captured pipeline's data is released
 * (vkReleaseCapturedPipeline DataKHR) right after its binaries were made, so the driver holds it no
 *   longer than one capture.
 * - The calls are loaded once, under the context's lock, before any build
 *   (the provider is asked for on the run's own thread); after that they
 *   are only read.
 */
#include "vk_internal.h"

#include <stdio.h>
#include <string.h>

#ifndef VK_KHR_pipeline_binary

int kiln__vk_binary_provider(struct kiln_vk *vk, struct kiln__bin_provider *out, char *why,
                             size_t cap)
{
    (void)vk;
    (void)out;
    snprintf(why, cap, "kiln was built with Vulkan headers that lack VK_KHR_pipeline_binary");
    return KILN_ENOTSUP;
}

#else

/* The most binaries one pipeline has (prep's payload holds as many). */
#define BIN_MAX 64u

static int global_key(void *user, struct kiln__bin_global *out)
{
    struct kiln_vk *vk = user;
    VkPipelineBinaryKeyKHR key = {.sType = VK_STRUCTURE_TYPE_PIPELINE_BINARY_KEY_KHR};
    VkResult res = vk->bin.key(vk->device, NULL, &key);
    if (res != VK_SUCCESS || key.keySize == 0 || key.keySize > KILN__BIN_KEY_MAX) {
        KILN_WARN("vk", "vkGetPipelineKeyKHR (global): %s, %u bytes", kiln_vk_result_name(res),
                  key.keySize);
        return KILN_EVULKAN;
    }
    out->vendor_id = vk->info.vendor_id;
    out->device_id = vk->info.device_id;
    out->key_size = key.keySize;
    memcpy(out->key, key.key, key.keySize);
    return KILN_OK;
}

/* Hands one binary's key and data to add(). */
static int capture_one(struct kiln_vk *vk, VkPipelineBinaryKHR b, kiln__bin_add_fn add, void *ctx)
{
    VkPipelineBinaryDataInfoKHR di = {.sType = VK_STRUCTURE_TYPE_PIPELINE_BINARY_DATA_INFO_KHR,
                                      .pipelineBinary = b};
    VkPipelineBinaryKeyKHR key = {.sType = VK_STRUCTURE_TYPE_PIPELINE_BINARY_KEY_KHR};
    size_t n = 0;
    VkResult res = vk->bin.data(vk->device, &di, &key, &n, NULL);
    if (res != VK_SUCCESS)
        return KILN_EVULKAN;
    void *data = kiln__malloc(n ? n : 1);
    if (!data)
        return KILN_ENOMEM;
    res = vk->bin.data(vk->device, &di, &key, &n, data);
    int rc = res == VK_SUCCESS ? KILN_OK : KILN_EVULKAN;
    if (rc == KILN_OK) {
        struct kiln__bin_entry e = {
            .key = key.key, .key_size = key.keySize, .data = data, .data_size = n};
        rc = add(ctx, &e);
    }
    kiln__free(data);
    return rc;
}

static int capture(void *user, const struct kiln_key *pkey, uint64_t pipeline, kiln__bin_add_fn add,
                   void *ctx)
{
    struct kiln_vk *vk = user;
    (void)pkey;
    VkPipeline handle = (VkPipeline)(uintptr_t)pipeline;
    VkPipelineBinaryCreateInfoKHR ci = {.sType = VK_STRUCTURE_TYPE_PIPELINE_BINARY_CREATE_INFO_KHR,
                                        .pipeline = handle};
    VkPipelineBinaryKHR bins[BIN_MAX];
    VkPipelineBinaryHandlesInfoKHR h = {.sType =
                                            VK_STRUCTURE_TYPE_PIPELINE_BINARY_HANDLES_INFO_KHR};
    VkResult res = vk->bin.create(vk->device, &ci, vk->alloc, &h);
    int rc = res == VK_SUCCESS && h.pipelineBinaryCount <= BIN_MAX ? KILN_OK : KILN_EVULKAN;
    uint32_t made = 0;
    if (rc == KILN_OK) {
        h.pPipelineBinaries = bins;
        res = vk->bin.create(vk->device, &ci, vk->alloc, &h);
        made = res == VK_SUCCESS ? h.pipelineBinaryCount : 0;
        rc = res == VK_SUCCESS ? KILN_OK : KILN_EVULKAN;
    }
    for (uint32_t i = 0; i < made && rc == KILN_OK; i++)
        rc = capture_one(vk, bins[i], add, ctx);
    for (uint32_t i = 0; i < made; i++)
        vk->bin.destroy(vk->device, bins[i], vk->alloc);
    VkReleaseCapturedPipelineDataInfoKHR rel = {
        .sType = VK_STRUCTURE_TYPE_RELEASE_CAPTURED_PIPELINE_DATA_INFO_KHR, .pipeline = handle};
    vk->bin.release(vk->device, &rel, vk->alloc);
    if (rc == KILN_EVULKAN)
        KILN_INFO("vk", "vkCreatePipelineBinariesKHR / vkGetPipelineBinaryDataKHR: %s",
                  kiln_vk_result_name(res));
    return rc;
}

/* The driver's binary objects of `n` checked binaries, in h (bins[]). */
static int make_binaries(struct kiln_vk *vk, const struct kiln__bin_entry *e, uint32_t n,
                         VkPipelineBinaryKHR *bins, VkPipelineBinaryHandlesInfoKHR *h)
{
    if (n == 0 || n > BIN_MAX)
        return KILN_EINVAL;
    VkPipelineBinaryKeyKHR keys[BIN_MAX];
    VkPipelineBinaryDataKHR data[BIN_MAX];
    for (uint32_t i = 0; i < n; i++) {
        if (e[i].key_size > VK_MAX_PIPELINE_BINARY_KEY_SIZE_KHR || e[i].data_size > SIZE_MAX)
            return KILN_EINVAL;
        keys[i] = (VkPipelineBinaryKeyKHR){.sType = VK_STRUCTURE_TYPE_PIPELINE_BINARY_KEY_KHR,
                                           .keySize = e[i].key_size};
        memcpy(keys[i].key, e[i].key, e[i].key_size);
        data[i] = (VkPipelineBinaryDataKHR){.dataSize = (size_t)e[i].data_size,
                                            .pData = (void *)e[i].data};
    }
    VkPipelineBinaryKeysAndDataKHR kd = {
        .binaryCount = n, .pPipelineBinaryKeys = keys, .pPipelineBinaryData = data};
    VkPipelineBinaryCreateInfoKHR ci = {.sType = VK_STRUCTURE_TYPE_PIPELINE_BINARY_CREATE_INFO_KHR,
                                        .pKeysAndDataInfo = &kd};
    *h = (VkPipelineBinaryHandlesInfoKHR){.sType =
                                              VK_STRUCTURE_TYPE_PIPELINE_BINARY_HANDLES_INFO_KHR,
                                          .pipelineBinaryCount = n,
                                          .pPipelineBinaries = bins};
    VkResult res = vk->bin.create(vk->device, &ci, vk->alloc, h);
    if (res != VK_SUCCESS) {
        KILN_INFO("vk", "vkCreatePipelineBinariesKHR from data: %s", kiln_vk_result_name(res));
        return KILN_EVULKAN;
    }
    return KILN_OK;
}

static int create_from(void *user, const struct kiln_key *pkey, bool compute,
                       const struct kiln__bin_entry *e, uint32_t n, struct kiln_vk_pipeline **out)
{
    struct kiln_vk *vk = user;
    (void)pkey;
    *out = NULL;
    VkPipelineBinaryKHR bins[BIN_MAX];
    VkPipelineBinaryHandlesInfoKHR h;
    KILN_TRY(make_binaries(vk, e, n, bins, &h));
    VkPipelineBinaryInfoKHR bi = {.sType = VK_STRUCTURE_TYPE_PIPELINE_BINARY_INFO_KHR,
                                  .binaryCount = h.pipelineBinaryCount,
                                  .pPipelineBinaries = bins};
    int rc = kiln__vk_pipeline_from_binaries(vk, compute, &bi, out);
    for (uint32_t i = 0; i < h.pipelineBinaryCount; i++)
        vk->bin.destroy(vk->device, bins[i], vk->alloc);
    return rc;
}

/* A builder's binaries: the info and the objects it names, in one block. */
struct bound {
    VkPipelineBinaryInfoKHR info; /* first: what the builder chains */
    VkPipelineBinaryKHR bins[BIN_MAX];
};

static int bind(void *user, const struct kiln_key *pkey, const struct kiln__bin_entry *e,
                uint32_t n, void **info)
{
    struct kiln_vk *vk = user;
    (void)pkey;
    *info = NULL;
    struct bound *b = kiln__calloc(1, sizeof(*b));
    if (!b)
        return KILN_ENOMEM;
    VkPipelineBinaryHandlesInfoKHR h;
    int rc = make_binaries(vk, e, n, b->bins, &h);
    if (rc < 0) {
        kiln__free(b);
        return rc;
    }
    b->info = (VkPipelineBinaryInfoKHR){.sType = VK_STRUCTURE_TYPE_PIPELINE_BINARY_INFO_KHR,
                                        .binaryCount = h.pipelineBinaryCount,
                                        .pPipelineBinaries = b->bins};
    *info = b;
    return KILN_OK;
}

static void unbind(void *user, void *info)
{
    struct kiln_vk *vk = user;
    struct bound *b = info;
    for (uint32_t i = 0; i < b->info.binaryCount; i++)
        vk->bin.destroy(vk->device, b->bins[i], vk->alloc);
    kiln__free(b);
}

/* Loads the extension's calls once. @return 0 or KILN_ENOTSUP. */
static int load(struct kiln_vk *vk, char *why, size_t cap)
{
    pthread_mutex_lock(&vk->lock);
    if (!vk->bin_loaded) {
        PFN_vkGetDeviceProcAddr gdpa = vk->fn.vkGetDeviceProcAddr;
        struct kiln__vk_bin_fns f = {
            .create =
                (PFN_vkCreatePipelineBinariesKHR)gdpa(vk->device, "vkCreatePipelineBinariesKHR"),
            .destroy =
                (PFN_vkDestroyPipelineBinaryKHR)gdpa(vk->device, "vkDestroyPipelineBinaryKHR"),
            .key = (PFN_vkGetPipelineKeyKHR)gdpa(vk->device, "vkGetPipelineKeyKHR"),
            .data = (PFN_vkGetPipelineBinaryDataKHR)gdpa(vk->device, "vkGetPipelineBinaryDataKHR"),
            .release = (PFN_vkReleaseCapturedPipelineDataKHR)gdpa(
                vk->device, "vkReleaseCapturedPipelineDataKHR"),
        };
        if (f.create && f.destroy && f.key && f.data && f.release) {
            vk->bin = f;
            vk->bin_loaded = true;
        }
    }
    bool loaded = vk->bin_loaded;
    pthread_mutex_unlock(&vk->lock);
    if (!loaded)
        snprintf(why, cap, "the driver lacks VK_KHR_pipeline_binary's calls");
    return loaded ? KILN_OK : KILN_ENOTSUP;
}

int kiln__vk_binary_provider(struct kiln_vk *vk, struct kiln__bin_provider *out, char *why,
                             size_t cap)
{
    if (!kiln_vk_extension_enabled(vk, VK_KHR_PIPELINE_BINARY_EXTENSION_NAME) ||
        !vk->info.maintenance5) {
        snprintf(why, cap, "%s lacks VK_KHR_pipeline_binary with maintenance5",
                 vk->info.device_name);
        return KILN_ENOTSUP;
    }
    KILN_TRY(load(vk, why, cap));
    *out = (struct kiln__bin_provider){.user = vk,
                                       .global_key = global_key,
                                       .capture = capture,
                                       .create_from = create_from,
                                       .bind = bind,
                                       .unbind = unbind,
                                       .capture_flags2 = VK_PIPELINE_CREATE_2_CAPTURE_DATA_BIT_KHR};
    return KILN_OK;
}

#endif
