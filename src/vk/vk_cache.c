/*
 * vk_cache.c - the VkPipelineCache kept as pipelines.vkc in a cache folder.
 *
 * Design. The file is exactly what vkGetPipelineCacheData returned. Before
 * its bytes go back to a driver, kiln checks the header Vulkan defines
 * (VkPipelineCacheHeaderVersionOne: header length, header version,
 * vendorID, deviceID, pipelineCacheUUID) against this device: drivers are
 * asked to ignore foreign data, but a check here names the reason in the
 * log (another GPU, another driver build, a torn file) and keeps garbage
 * away from drivers that handle it badly. Any mismatch or read error starts
 * an empty cache; it never fails the context. The file is written whole to
 * a temporary name, synced and renamed (kiln_io_replace_file), so a crash
 * leaves the old file or the new one, never a mix.
 */
#include "vk_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The fixed part of VkPipelineCacheHeaderVersionOne. */
#define CACHE_HEADER_BYTES (16u + VK_UUID_SIZE)

/* The most kiln reads back (a driver's cache for ~10k pipelines is far less). */
#define CACHE_MAX_BYTES ((size_t)1 << 30)

int kiln__vk_cache_check(const void *data, size_t n, uint32_t vendor_id, uint32_t device_id,
                         const uint8_t uuid[VK_UUID_SIZE], char *why, size_t cap)
{
    const unsigned char *p = data;
    if (n < CACHE_HEADER_BYTES) {
        snprintf(why, cap, "%zu bytes, shorter than a pipeline cache header (%u)", n,
                 CACHE_HEADER_BYTES);
        return KILN_ECORRUPT_HEADER;
    }
    uint32_t header_size = kiln__load_le32(p);
    uint32_t version = kiln__load_le32(p + 4);
    uint32_t vendor = kiln__load_le32(p + 8);
    uint32_t device = kiln__load_le32(p + 12);
    if (header_size < CACHE_HEADER_BYTES || header_size > n) {
        snprintf(why, cap, "header length %u does not fit a %zu-byte file", header_size, n);
        return KILN_ECORRUPT_HEADER;
    }
    if (version != VK_PIPELINE_CACHE_HEADER_VERSION_ONE) {
        snprintf(why, cap, "header version %u, expected %u", version,
                 (unsigned)VK_PIPELINE_CACHE_HEADER_VERSION_ONE);
        return KILN_ECORRUPT_HEADER;
    }
    if (vendor != vendor_id || device != device_id) {
        snprintf(why, cap, "written for device %04x:%04x, this is %04x:%04x", vendor, device,
                 vendor_id, device_id);
        return KILN_ECORRUPT_HEADER;
    }
    if (memcmp(p + 16, uuid, VK_UUID_SIZE) != 0) {
        snprintf(why, cap, "pipelineCacheUUID differs (another driver build)");
        return KILN_ECORRUPT_HEADER;
    }
    return KILN_OK;
}

static VkResult create_cache(struct kiln_vk *vk, const void *data, size_t n)
{
    VkPipelineCacheCreateInfo ci = {
        .sType = VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO,
        .initialDataSize = n,
        .pInitialData = data,
    };
    return vk->fn.vkCreatePipelineCache(vk->device, &ci, vk->alloc, &vk->cache);
}

/* Marks the file rejected, logging why. */
static void reject(struct kiln_vk *vk, const char *why)
{
    vk->info.cache_state = KILN_VK_CACHE_REJECTED;
    snprintf(vk->info.cache_note, sizeof(vk->info.cache_note), "%s", why);
    KILN_WARN("vk", "%s: not used: %s; starting with an empty pipeline cache", vk->cache_path, why);
}

int kiln__vk_cache_open(struct kiln_vk *vk, bool in_memory)
{
    void *data = NULL;
    size_t n = 0;
    if (in_memory) {
        vk->info.cache_state = KILN_VK_CACHE_MEMORY;
    } else {
        int rc = kiln_io_read_file(vk->io, vk->cache_path, CACHE_MAX_BYTES, &data, &n);
        char why[256];
        if (rc == KILN_ENOENT) {
            vk->info.cache_state = KILN_VK_CACHE_NEW;
            KILN_INFO("vk", "%s: none yet; starting with an empty pipeline cache", vk->cache_path);
        } else if (rc < 0) {
            snprintf(why, sizeof(why), "could not read it: %s", kiln_strerror(rc));
            reject(vk, why);
        } else if (kiln__vk_cache_check(data, n, vk->info.vendor_id, vk->info.device_id,
                                        vk->info.pipeline_cache_uuid, why, sizeof(why)) < 0) {
            reject(vk, why);
            kiln__free(data);
            data = NULL;
            n = 0;
        } else {
            vk->info.cache_state = KILN_VK_CACHE_LOADED;
        }
    }

    VkResult res = create_cache(vk, data, n);
    if (res != VK_SUCCESS && data) {
        char why[256];
        snprintf(why, sizeof(why), "the driver refused its data (%s)", kiln_vk_result_name(res));
        reject(vk, why);
        n = 0;
        res = create_cache(vk, NULL, 0);
    }
    kiln__free(data);
    if (res != VK_SUCCESS) {
        KILN_ERROR("vk", "vkCreatePipelineCache failed: %s", kiln_vk_result_name(res));
        vk->cache = VK_NULL_HANDLE;
        return KILN_EVULKAN;
    }
    if (vk->info.cache_state == KILN_VK_CACHE_LOADED) {
        vk->info.cache_loaded_bytes = n;
        KILN_INFO("vk", "%s: loaded %zu bytes", vk->cache_path, n);
    }
    return KILN_OK;
}

static int cache_save_body(struct kiln_vk *vk)
{
    if (!vk || !vk->cache || !vk->cache_path[0])
        return KILN_EINVAL;
    /* The cache can grow between the size query and the copy while other
     * threads build: retry while the driver says VK_INCOMPLETE. */
    for (int attempt = 0; attempt < 8; attempt++) {
        size_t n = 0;
        VkResult res = vk->fn.vkGetPipelineCacheData(vk->device, vk->cache, &n, NULL);
        if (res != VK_SUCCESS) {
            KILN_ERROR("vk", "%s: vkGetPipelineCacheData failed: %s", vk->cache_path,
                       kiln_vk_result_name(res));
            return KILN_EVULKAN;
        }
        n += n / 8 + 4096; /* room for growth in between */
        void *data = kiln__malloc(n);
        if (!data)
            return KILN_ENOMEM;
        res = vk->fn.vkGetPipelineCacheData(vk->device, vk->cache, &n, data);
        if (res == VK_INCOMPLETE) {
            kiln__free(data);
            continue;
        }
        if (res != VK_SUCCESS) {
            kiln__free(data);
            KILN_ERROR("vk", "%s: vkGetPipelineCacheData failed: %s", vk->cache_path,
                       kiln_vk_result_name(res));
            return KILN_EVULKAN;
        }
        int rc = kiln_io_replace_file(vk->io, vk->cache_path, data, n);
        kiln__free(data);
        if (rc < 0) {
            KILN_ERROR("vk", "%s: could not write the pipeline cache: %s", vk->cache_path,
                       kiln_strerror(rc));
            return rc;
        }
        KILN_INFO("vk", "%s: saved %zu bytes", vk->cache_path, n);
        return KILN_OK;
    }
    KILN_ERROR("vk", "%s: the pipeline cache kept growing while it was read; not saved",
               vk->cache_path);
    return KILN_EVULKAN;
}

int kiln_vk_cache_save(struct kiln_vk *vk)
{
    uint64_t m = kiln__err_mark();
    return kiln__err_end(vk ? &vk->err : NULL, m, "kiln_vk_cache_save", vk ? vk->cache_path : NULL,
                         cache_save_body(vk));
}
