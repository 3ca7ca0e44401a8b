/*
 * kt_vkalloc.h - counting VkAllocationCallbacks over libc for the tests that
 * check kiln hands the application's Vulkan allocator to the driver: every
 * allocation, reallocation and free is counted, and the blocks still live.
 */
#ifndef KILN_KT_VKALLOC_H
#define KILN_KT_VKALLOC_H

#include <stdatomic.h>
#include <vulkan/vulkan.h>

struct kt_vk_counts {
    atomic_llong allocs, frees, live;
};

/* Callbacks that count into *counts (which must outlive every object made
 * with them). Thread-safe. */
VkAllocationCallbacks kt_vk_counting_callbacks(struct kt_vk_counts *counts);

#endif
