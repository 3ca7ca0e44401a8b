/*
 * test_prepare_overlap.c - kiln_prepare's Vulkan context made beside its
 * translation (src/prep/prep_vk_early.c), on lavapipe.
 *
 * The order of events, never a time: the source's last load (part of the
 * translation) waits until the library's counter says a context's making
 * began, and notes whether it did. Beside the translation it begins at
 * the run's start, so the load sees it at once; in the serial order it
 * begins only after the translation, so the load gives up after a bound
 * (only the negative control waits that long) and the check fails: the
 * case serial_order_control runs with kiln__prep_test_vk_serial and ctest
 * requires it to fail (WILL_FAIL).
 */
#include "kiln_test.h"
#include "prep_fixture.h"
#include "prep_internal.h"

#include "kiln-tools/gen.h"
#include "kiln-tools/glsl.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define NPROGRAMS 3

struct overlap_source {
    struct kiln_program *spirv[NPROGRAMS]; /* generated and translated beforehand */
    uint64_t begun_before;                 /* the counter before the run */
    _Atomic bool seen;                     /* the last load saw the context begun */
    _Atomic bool stop;                     /* the cancel callback's answer */
    struct kiln_program_source src;        /* this source, as the run reads it */
    struct kiln_prepare_options o;         /* the run's options (setup) */
    char cache[4200];
};

/* Waits up to 5 s, in 1 ms steps, for a context's making to begin. */
static bool context_begun(const struct overlap_source *o)
{
    for (int i = 0; i < 5000; i++) {
        if (atomic_load(&kiln__prep_test_vk_begun) > o->begun_before)
            return true;
        struct timespec ts = {0, 1000000L};
        nanosleep(&ts, NULL);
    }
    return false;
}

static int overlap_load(void *user, size_t i, struct kiln_program **out)
{
    struct overlap_source *o = user;
    if (i == NPROGRAMS - 1)
        atomic_store(&o->seen, context_begun(o));
    return kiln_program_copy(o->spirv[i], out);
}

static bool overlap_cancel(void *user)
{
    return atomic_load(&((struct overlap_source *)user)->stop);
}

/* The programs, a source over them and options for `cache` (one job, so
 * the last load is the translation's last step). */
static void setup(struct overlap_source *own)
{
    pf_need_vulkan();
    memset(own, 0, sizeof(*own));
    atomic_init(&own->seen, false);
    atomic_init(&own->stop, false);
    snprintf(own->cache, sizeof(own->cache), "%s/cache", kt_tmpdir());
    struct kiln_glsl *g = NULL;
    KT_REQUIRE_OK(kiln_glsl_create(KILN_GLSL_OPT_NONE, &g));
    for (uint32_t i = 0; i < NPROGRAMS; i++)
        KT_REQUIRE_OK(kiln_generate_spirv(kiln_glsl_translator(g), 5, i, &own->spirv[i]));
    kiln_glsl_destroy(g);
    own->begun_before = atomic_load(&kiln__prep_test_vk_begun);
    own->src = (struct kiln_program_source){
        .size = sizeof(own->src), .user = own, .count = NPROGRAMS, .load = overlap_load};
    pf_options(&own->o, own->cache, 1);
    own->o.source = &own->src;
}

static void teardown(struct overlap_source *own)
{
    for (size_t i = 0; i < NPROGRAMS; i++)
        kiln_program_destroy(own->spirv[i]);
}

/* The context's making begins before the translation ends, and the run's
 * times add up: the hidden part is part of the context's own time. */
static void check_overlap(bool serial)
{
    struct overlap_source own;
    setup(&own);
    kiln__prep_test_vk_serial = serial;
    struct kiln_prepare_summary s = KILN_PREPARE_SUMMARY_INIT;
    int rc = kiln_prepare(&own.o, NULL, NULL, &s);
    kiln__prep_test_vk_serial = false;
    KT_REQUIRE_OK(rc);
    KT_CHECK_EQ(s.translated, NPROGRAMS);
    KT_CHECK_EQ(s.pipelines_built, NPROGRAMS);
    KT_CHECK(s.vulkan);
    KT_CHECK(s.vulkan_overlap_ns <= s.vulkan_ns);
    KT_CHECK_EQ(atomic_load(&kiln__prep_test_vk_begun), own.begun_before + 1);
    KT_CHECK(atomic_load(&own.seen)); /* the serial order fails here */
    teardown(&own);
}

KT_CASE(context_beside_translation)
{
    check_overlap(false);
}

/* The negative control: the serial order (WILL_FAIL in CMakeLists.txt). */
KT_CASE(serial_order_control)
{
    check_overlap(true);
}

/* A device that cannot be made fails the run where the serial order did:
 * after the translation, at the Vulkan step, with the thread's line as
 * the run's error text. */
KT_CASE(context_error_after_translation)
{
    struct overlap_source own;
    setup(&own);
    own.o.use_device_index = true;
    own.o.device = 99;
    struct kiln_prepare_summary s = KILN_PREPARE_SUMMARY_INIT;
    KT_CHECK_EQ(kiln_prepare(&own.o, NULL, NULL, &s), KILN_EINVAL);
    KT_CHECK_EQ(s.step, KILN_PREP_STEP_VULKAN);
    KT_CHECK_EQ(s.translated, NPROGRAMS); /* stored first, as before */
    KT_CHECK(!s.vulkan);
    KT_CHECK(strstr(kiln_last_errmsg(), "device 99") != NULL);
    teardown(&own);
}

/* A run stopped during its translation abandons the context: the device
 * is never made, the thread is joined, and the run says it was stopped. */
KT_CASE(context_abandoned_on_stop)
{
    struct overlap_source own;
    setup(&own);
    atomic_store(&own.stop, true);
    own.o.cancel = overlap_cancel;
    own.o.cancel_user = &own;
    struct kiln_prepare_summary s = KILN_PREPARE_SUMMARY_INIT;
    KT_CHECK_EQ(kiln_prepare(&own.o, NULL, NULL, &s), KILN_ECANCELED);
    KT_CHECK(s.canceled);
    KT_CHECK(!s.vulkan);
    KT_CHECK_EQ(s.vulkan_ns, 0);
    KT_CHECK_EQ(atomic_load(&kiln__prep_test_vk_begun), own.begun_before + 1);
    teardown(&own);
}

KT_MAIN(KT_ENTRY(context_beside_translation), KT_ENTRY(serial_order_control),
        KT_ENTRY(context_error_after_translation), KT_ENTRY(context_abandoned_on_stop))
