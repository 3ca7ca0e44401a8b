/*
 * vk_binary.c - the device's side of the host tier of driver binaries
 * (VK_KHR_pipeline_binary): the driver's global key, capturing a built
 * pipeline's binaries and making a pipeline from them. The tier itself
 * (storage, staleness) is prep's (src/prep/binaries.c), which reaches this
 * file through struct kiln__bin_provider (kiln_internal.h).
 *
 * Compiled in only where the Vulkan headers know the extension (1.3.260
 * and later): elsewhere the provider answers KILN_ENOTSUP and kiln keeps
 * pipelines.vkc, as it does where the device lacks the extension.
 */
#include "vk_internal.h"

#include <stdio.h>

int kiln__vk_binary_provider(struct kiln_vk *vk, struct kiln__bin_provider *out, char *why,
                             size_t cap)
{
    (void)vk;
    (void)out;
    snprintf(why, cap, "kiln was built with Vulkan headers that lack VK_KHR_pipeline_binary");
    return KILN_ENOTSUP;
}
