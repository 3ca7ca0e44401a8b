/*
 * vk_win.c - opening the Vulkan loader with LoadLibraryExW.
 *
 * The system's loader, vulkan-1.dll, is looked for in System32 only
 * (LOAD_LIBRARY_SEARCH_SYSTEM32): the Vulkan runtime installs it there, and
 * a copy planted in the working folder or beside the emulator is never
 * picked up. A loader the caller names is loaded as given (a UTF-8 path,
 * through kiln__win_path). Without a loader, kiln__vk_load fails with a
 * reason and the context reports "Vulkan not available" (KILN_ENOTSUP).
 *
 * As on Unix, a loader that was opened stays loaded for the rest of the
 * process; only one that lacks vkGetInstanceProcAddr is freed again.
 */
#include "kiln_internal.h"
#include "vk_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <windows.h>

static const char *error_text(DWORD err)
{
    switch (err) {
    case ERROR_MOD_NOT_FOUND:
        return "not found";
    case ERROR_BAD_EXE_FORMAT:
        return "not a 64-bit DLL";
    case ERROR_PROC_NOT_FOUND:
        return "a DLL it needs lacks a function";
    case ERROR_DLL_INIT_FAILED:
        return "its initialisation failed";
    default:
        return "cannot load";
    }
}

PFN_vkGetInstanceProcAddr kiln__vk_load(const char *loader, char *why, size_t cap)
{
    const char *name = loader ? loader : "vulkan-1.dll";
    HMODULE lib = NULL;
    DWORD err = 0;
    if (!loader) {
        lib = LoadLibraryExW(L"vulkan-1.dll", NULL, LOAD_LIBRARY_SEARCH_SYSTEM32);
        err = lib ? 0 : GetLastError();
    } else {
        wchar_t *w = NULL;
        int rc = kiln__win_path(loader, &w);
        if (rc < 0) {
            snprintf(why, cap, "could not load %s (%s)", name, kiln_strerror(rc));
            return NULL;
        }
        lib = LoadLibraryExW(w, NULL, 0);
        err = lib ? 0 : GetLastError();
        kiln__free(w);
    }
    if (!lib) {
        snprintf(why, cap, "could not load %s (error %lu: %s)", name, (unsigned long)err,
                 error_text(err));
        return NULL;
    }
    FARPROC sym = GetProcAddress(lib, "vkGetInstanceProcAddr");
    if (!sym) {
        snprintf(why, cap, "%s has no vkGetInstanceProcAddr", name);
        FreeLibrary(lib);
        return NULL;
    }
    /* FARPROC to the real signature: both are plain function pointers. */
    return (PFN_vkGetInstanceProcAddr)(void (*)(void))sym;
}

void kiln__vk_keep_drivers_loaded(void)
{
    /* Windows builds are not sanitized here. */
}
