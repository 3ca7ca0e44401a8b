/*
 * prep_fault.c - the test-only fault of the pipeline phase: a build that
 * crashes, aborts or hangs at one named program ($KILN_TEST_FAULT). It
 * stands in for a driver that dies or hangs in vkCreate*Pipelines, in one
 * process or in an isolated worker alike (start.c calls
 * kiln__prep_before_build right before each build), so the isolation tests
 * and their negative control exercise the same fault.
 *
 * Invariant: this file is never part of libkiln or of the installed kiln.
 * It is compiled only into kiln_prep_faults (src/prep/CMakeLists.txt), an
 * object library that the test build's kiln-faults command alone links;
 * its definition of kiln__prep_before_build then stands in for libkiln's
 * empty one (prep_build_hook.c), which the linker no longer pulls from the
 * archive. package.no_test_faults checks an install has none of it.
 */
#include "kiln_internal.h"
#include "isolate_internal.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#ifdef _WIN32
#include <windows.h>
#endif

void kiln__prep_before_build(const char *name)
{
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
        kiln__iso_sleep_forever();
    }
}
