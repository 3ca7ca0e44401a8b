/*
 * fuzz_vk_cache_header.c - the check of pipelines.vkc's header before its
 * bytes reach a driver. Inputs are whole files; the device it is checked
 * against comes from the input's own header half the time, so both the
 * accepting and the refusing paths are reached.
 */
#include "vk_internal.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    unsigned char *copy = malloc(size ? size : 1); /* exact size: ASan sees overreads */
    if (!copy)
        return 0;
    memcpy(copy, data, size);
    uint8_t uuid[VK_UUID_SIZE] = {0};
    uint32_t vendor = 0x10de, device = 0x2335;
    if (size >= 32 && (size & 1)) {
        vendor = kiln__load_le32(copy + 8);
        device = kiln__load_le32(copy + 12);
        memcpy(uuid, copy + 16, VK_UUID_SIZE);
    }
    char why[256];
    why[0] = '\0';
    int rc = kiln__vk_cache_check(copy, size, vendor, device, uuid, why, sizeof(why));
    if (rc != KILN_OK && (rc != KILN_ECORRUPT_HEADER || why[0] == '\0'))
        abort(); /* a refusal always says why */
    if (rc == KILN_OK && size < 32)
        abort();
    free(copy);
    return 0;
}
