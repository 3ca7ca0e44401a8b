/*
 * test_vk_loader.c - the Vulkan loader is opened at run time, and its
 * absence is reported cleanly: KILN_ENOTSUP and one log line, "Vulkan not
 * available: ...", naming what could not be loaded.
 *
 * These cases compile no shaders, so they build and run everywhere the
 * library does, the Windows build under wine included (where vulkan-1.dll
 * may be wine's own, with or without a driver behind it):
 *
 *  - a loader name that does not exist;
 *  - a library that exists but is no Vulkan loader (no vkGetInstanceProcAddr);
 *  - the default loader (libvulkan.so.1 / vulkan-1.dll): the context is made
 *    or KILN_ENOTSUP comes back with its one line; nothing else, no crash.
 *
 * The log is captured with kiln_log_set_sink; every line at warning level or
 * above is counted, so a second line beside the one expected fails the case.
 */
#include "kiln_test.h"
#include "kiln/vk.h"

#include <stdio.h>
#include <string.h>

#ifdef _WIN32
#define MISSING_LOADER "kiln-no-such-vulkan-loader.dll"
#define NOT_A_LOADER   "kernel32.dll"
#else
#define MISSING_LOADER "libkiln-no-such-vulkan-loader.so.1"
#define NOT_A_LOADER   "libc.so.6"
#endif

/* What the sink saw since the last reset. */
static struct {
    unsigned lines;  /* warnings and errors */
    char first[512]; /* the first of them */
} seen;

static void sink(void *user, enum kiln_log_level level, const char *module, const char *line)
{
    (void)user;
    (void)module;
    if (level > KILN_LOG_WARN)
        return;
    if (seen.lines++ == 0)
        snprintf(seen.first, sizeof(seen.first), "%s", line);
}

/* Starts capturing (from an empty record) or stops (keeping what was seen). */
static void capture(bool on)
{
    if (on)
        memset(&seen, 0, sizeof(seen));
    kiln_log_set_sink(on ? sink : NULL, NULL);
}

/* Creates a context with `loader`, expecting KILN_ENOTSUP and exactly one
 * line that starts as `want` does. */
static void expect_not_available(const char *loader, const char *want)
{
    capture(true);
    struct kiln_vk *vk = (struct kiln_vk *)&vk; /* must come back NULL */
    struct kiln_vk_options opt = {.size = sizeof(opt), .loader = loader};
    int rc = kiln_vk_create(&opt, &vk);
    capture(false);
    KT_CHECK_EQ(rc, KILN_ENOTSUP);
    KT_CHECK(vk == NULL);
    KT_CHECK_EQ(seen.lines, 1);
    printf("%s: %s\n", loader, seen.first);
    KT_CHECK(strncmp(seen.first, want, strlen(want)) == 0);
    /* No context: the thread's error text is the same line. */
    printf("kiln_last_errmsg: %s\n", kiln_last_errmsg());
    KT_CHECK(strncmp(kiln_last_errmsg(), "kiln_vk_create: ", 16) == 0);
    KT_CHECK(strstr(kiln_last_errmsg(), want) != NULL);
    KT_CHECK(strstr(kiln_last_errmsg(), "(KILN_ENOTSUP)") != NULL);
    kiln_vk_destroy(vk);
}

KT_CASE(missing_loader)
{
    expect_not_available(MISSING_LOADER, "Vulkan not available: could not load " MISSING_LOADER);
}

KT_CASE(not_a_loader)
{
    expect_not_available(NOT_A_LOADER,
                         "Vulkan not available: " NOT_A_LOADER " has no vkGetInstanceProcAddr");
}

KT_CASE(default_loader)
{
    capture(true);
    struct kiln_vk *vk = NULL;
    int rc = kiln_vk_create(NULL, &vk);
    capture(false);
    if (rc == KILN_OK) {
        const struct kiln_vk_info *in = kiln_vk_get_info(vk);
        KT_REQUIRE(in);
        printf("default loader: a context on device %u of %u: %s\n", in->device_index,
               in->device_count, in->device_name);
        KT_CHECK(in->device_count >= 1);
        KT_CHECK(in->device_index < in->device_count);
        KT_CHECK(in->device_name[0] != '\0');
        kiln_vk_destroy(vk);
    } else {
        printf("default loader: %s: %s\n", kiln_errname(rc), seen.first);
        KT_CHECK_EQ(rc, KILN_ENOTSUP);
        KT_CHECK(vk == NULL);
        KT_CHECK_EQ(seen.lines, 1);
        KT_CHECK(strncmp(seen.first, "Vulkan not available: ", 22) == 0);
    }
}

KT_MAIN(KT_ENTRY(missing_loader), KT_ENTRY(not_a_loader), KT_ENTRY(default_loader))
