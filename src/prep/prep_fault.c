/*
 * prep_fault.c - the test-only faults: a pipeline build that crashes,
 * aborts or hangs at one named program, and a translation that hangs
 * ($KILN_TEST_FAULT). The build's fault stands in for a driver that dies
 * or hangs in vkCreate*Pipelines, in one process or in an isolated worker
 * alike (start.c calls kiln__prep_before_build right before each build),
 * so the isolation tests and their negative control exercise the same
 * fault. The translation's ("hang-translate:SOURCE", kiln_translate calls
 * kiln__prep_before_translate before each translation) stands in for a
 * translator that never returns and heeds no stop flag, as shaderc waiting
 * on glslang's lock. $KILN_TEST_ISOLATE sets isolation's batch size,
 * learned time limit and worker sizing (kiln__prep_isolate_tuning), so
 * that a test puts a crash in the middle of a batch, or a hang after a few
 * fast builds, and slows each worker's start to see starts overlap (or,
 * serial, not), and the parent's own device to see the workers' made
 * beside it (or, with late_greeting, not).
 *
 * Invariant: this file is never part of libkiln or of the installed kiln.
 * It is compiled only into kiln_prep_faults (src/prep/CMakeLists.txt), an
 * object library that the test build's kiln-faults command alone links;
 * its definitions of the three hooks then stand in for libkiln's empty ones
 * (prep_build_hook.c), which the linker no longer pulls from the archive.
 * package.no_test_faults checks an install has none of it.
 */
#include "kiln_internal.h"
#include "isolate_internal.h"

#include <inttypes.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A device creation made slow by `ms`, with when it slept on stderr
 * ("kiln: test fault: WHAT delay in process P from T0 to T1 ms"): the
 * tuning's start_delay in a worker's greeting, for the test of parallel
 * starts, and its vk_delay before kiln_prepare's own device. */
static void delay(unsigned ms, const char *what)
{
    if (!ms)
        return;
    uint64_t t0 = kiln_now_ns();
    kiln__sleep_ms(ms);
    unsigned long pid = (unsigned long)kiln__process_id();
    fprintf(stderr,
            "kiln: test fault: %s delay in process %lu from %" PRIu64 " to %" PRIu64 " ms\n", what,
            pid, t0 / 1000000u, kiln_now_ns() / 1000000u);
    fflush(stderr);
}

void kiln__prep_before_build(const char *name)
{
    bool greeting = name && strcmp(name, KILN__PREP_FAULT_GREETING) == 0;
    if (greeting || (name && strcmp(name, KILN__PREP_FAULT_DEVICE) == 0)) {
        struct kiln__iso_tuning t;
        kiln__prep_isolate_tuning(&t);
        delay(greeting ? t.start_delay_ms : t.vk_delay_ms, greeting ? "start" : "device");
    }
    const char *f = getenv("KILN_TEST_FAULT");
    if (!f || !name)
        return;
    const char *colon = strchr(f, ':');
    if (!colon || strcmp(colon + 1, name) != 0)
        return;
    size_t len = (size_t)(colon - f);
    if (len == 5 && memcmp(f, "crash", 5) == 0) {
        kiln__iso_crash_now();
    } else if (len == 5 && memcmp(f, "abort", 5) == 0) {
        signal(SIGABRT, SIG_DFL);
        abort();
    } else if (len == 4 && memcmp(f, "hang", 4) == 0) {
        /* The process that hangs, for a test that kills its parent. */
        fprintf(stderr, "kiln: test fault: %s: hanging in process %ld\n", name, kiln__process_id());
        fflush(stderr);
        kiln__iso_sleep_forever();
    }
}

void kiln__prep_before_translate(const char *name)
{
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
}

/* $KILN_TEST_ISOLATE: "batch=N,floor=MS,samples=N,workers=N,build_ms=N,
 * serial=1,start_delay=MS,vk_delay=MS,late_greeting=1", any of them, in any order; a field not
 * given or not a number stays 0 (kiln's own rule). */
void kiln__prep_isolate_tuning(struct kiln__iso_tuning *t)
{
    *t = (struct kiln__iso_tuning){0};
    const char *e = getenv("KILN_TEST_ISOLATE");
    static const struct {
        const char *key;
        size_t off;
    } keys[] = {{"batch=", offsetof(struct kiln__iso_tuning, batch)},
                {"floor=", offsetof(struct kiln__iso_tuning, floor_ms)},
                {"samples=", offsetof(struct kiln__iso_tuning, samples)},
                {"workers=", offsetof(struct kiln__iso_tuning, workers)},
                {"build_ms=", offsetof(struct kiln__iso_tuning, build_ms)},
                {"serial=", offsetof(struct kiln__iso_tuning, serial)},
                {"start_delay=", offsetof(struct kiln__iso_tuning, start_delay_ms)},
                {"vk_delay=", offsetof(struct kiln__iso_tuning, vk_delay_ms)},
                {"late_greeting=", offsetof(struct kiln__iso_tuning, late_greeting)}};
    for (size_t k = 0; e && k < sizeof(keys) / sizeof(keys[0]); k++) {
        const char *at = strstr(e, keys[k].key);
        if (at)
            *(unsigned *)((char *)t + keys[k].off) =
                (unsigned)strtoul(at + strlen(keys[k].key), NULL, 10);
    }
}
