/*
 * vk_unix.c - opening the Vulkan loader with dlopen.
 *
 * The loader stays loaded for the rest of the process once opened: drivers
 * keep state past vkDestroyInstance, and unloading would also hide the
 * library names that leak reports and profilers need.
 */
#include "vk_internal.h"

#include <dlfcn.h>
#include <link.h>
#include <stdio.h>

PFN_vkGetInstanceProcAddr kiln__vk_load(const char *loader, char *why, size_t cap)
{
    const char *name = loader ? loader : "libvulkan.so.1";
    void *lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (!lib && !loader)
        lib = dlopen("libvulkan.so", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        const char *err = dlerror();
        snprintf(why, cap, "could not load %s (%s)", name, err ? err : "unknown error");
        return NULL;
    }
    /* dlsym returns void *; going through a union keeps -Wpedantic quiet
     * about object-to-function pointer casts. */
    union {
        void *obj;
        PFN_vkGetInstanceProcAddr fn;
    } sym;
    sym.obj = dlsym(lib, "vkGetInstanceProcAddr");
    if (!sym.obj) {
        snprintf(why, cap, "%s has no vkGetInstanceProcAddr", name);
        dlclose(lib);
        return NULL;
    }
    return sym.fn;
}

#if defined(KILN_SANITIZED)
static int keep_one(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    (void)data;
    if (info->dlpi_name && info->dlpi_name[0]) {
        void *h = dlopen(info->dlpi_name, RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE);
        if (h)
            dlclose(h); /* RTLD_NODELETE stays: never unloaded */
    }
    return 0;
}
#endif

void kiln__vk_keep_drivers_loaded(void)
{
#if defined(KILN_SANITIZED)
    dl_iterate_phdr(keep_one, NULL);
#endif
}
