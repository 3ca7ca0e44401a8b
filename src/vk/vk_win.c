/*
 * vk_win.c - opening the Vulkan loader with LoadLibrary.
 *
 * As on Unix, the loader stays loaded for the rest of the process.
 */
#include "vk_internal.h"

#include <stdio.h>
#include <windows.h>

PFN_vkGetInstanceProcAddr kiln__vk_load(const char *loader, char *why, size_t cap)
{
    const char *name = loader ? loader : "vulkan-1.dll";
    HMODULE lib = LoadLibraryA(name);
    if (!lib) {
        snprintf(why, cap, "could not load %s (error %lu)", name, (unsigned long)GetLastError());
        return NULL;
    }
    FARPROC sym = GetProcAddress(lib, "vkGetInstanceProcAddr");
    if (!sym) {
        snprintf(why, cap, "%s has no vkGetInstanceProcAddr", name);
        FreeLibrary(lib);
        return NULL;
    }
    return (PFN_vkGetInstanceProcAddr)(void (*)(void))sym;
}
