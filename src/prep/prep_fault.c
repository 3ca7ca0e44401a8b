/*
 * prep_fault.c - the test-only fault of the pipeline phase: a build that
 * crashes, aborts or hangs at one named program ($KILN_TEST_FAULT), in
 * builds with KILN_TEST_FAULTS only. It stands in for a driver that dies
 * or hangs in vkCreate*Pipelines, in one process or in an isolated worker
 * alike (start.c calls it right before each build), so the isolation
 * tests and their negative control exercise the same fault.
 *
 * The translation's fault ("hang-translate:SOURCE", kiln_translate calls
 * it before each translation) stands in for a translator that never
 * returns and heeds no stop flag, as shaderc waiting on glslang's lock.
 *
 * Invariant: without KILN_TEST_FAULTS they are empty functions: no release
 * build reads the variable.
 */
#include "kiln_internal.h"
#include "isolate_internal.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef _WIN32
#include <windows.h>
#else
#include <unistd.h>
#endif

void kiln__prep_test_fault(const char *name)
{
#ifdef KILN_TEST_FAULTS
    const char *f = getenv("KILN_TEST_FAULT");
    if (!f || !name)
        return;
    const char *colon = strchr(f, ':');
    if (!colon || strcmp(colon + 1, name) != 0)
        return;
    size_t len = (size_t)(colon - f);
    if (len == 5 && memcmp(f, "crash", 5) == 0) {
#ifdef _WIN32
        /* An access violation, unhandled, with no error box: the process
         * ends with 0xC0000005, as with a driver's crash. */
        SetErrorMode(SEM_FAILCRITICALERRORS | SEM_NOGPFAULTERRORBOX);
        RaiseException(EXCEPTION_ACCESS_VIOLATION, EXCEPTION_NONCONTINUABLE, 0, NULL);
#else
        /* The default action, past any sanitizer's handler: a driver's
         * crash as the parent sees it. */
        signal(SIGSEGV, SIG_DFL);
        raise(SIGSEGV);
#endif
    } else if (len == 5 && memcmp(f, "abort", 5) == 0) {
        signal(SIGABRT, SIG_DFL);
        abort();
    } else if (len == 4 && memcmp(f, "hang", 4) == 0) {
        /* The process that hangs, for a test that kills its parent. */
#ifdef _WIN32
        fprintf(stderr, "kiln: test fault: %s: hanging in process %lu\n", name,
                (unsigned long)GetCurrentProcessId());
#else
        fprintf(stderr, "kiln: test fault: %s: hanging in process %ld\n", name, (long)getpid());
#endif
        fflush(stderr);
        kiln__iso_sleep_forever();
    }
#else
    (void)name;
#endif
}

void kiln__prep_test_translate_fault(const char *name)
{
#ifdef KILN_TEST_FAULTS
    static const char kind[] = "hang-translate:";
    const char *f = getenv("KILN_TEST_FAULT");
    if (!f || !name || strncmp(f, kind, sizeof(kind) - 1) != 0 ||
        strcmp(f + sizeof(kind) - 1, name) != 0)
        return;
    /* A translator stuck for good (shaderc on a lock it never gets): no
     * stop flag reaches it. */
    fprintf(stderr, "kiln: test fault: %s: hanging in translation\n", name);
    fflush(stderr);
    kiln__iso_sleep_forever();
#else
    (void)name;
#endif
}
