/*
 * prep_vk_early.c - a run's Vulkan context made beside its first phase:
 * kiln_prepare's translation, kiln_warm_start's reading of the records.
 *
 * Design. Making a context is slow on some drivers (0.15 s on NVIDIA) and
 * needs nothing the translation makes but the builder extensions to
 * enable, which the run's programs decide (prep_vk.c: only those some
 * program needs). So a thread of kiln's own starts kiln__vk_create_late at
 * the run's start: the loader, the instance and the device choice go on
 * while the run's thread opens the cache and translates; the creation then
 * waits, in its late callback, until the run hands it the items'
 * extensions (kiln__prep_vk_early_finish) or abandons it (a translation
 * that failed, a stop, a run without pipelines).
 *
 * Invariants and why they hold:
 *
 * - The device is made with exactly the extensions of the serial order,
 *   or never: the callback waits under `lock` until `state` leaves 0, and
 *   finish computes the names from the same items, with the same code
 *   (kiln__prep_vk_extensions), as kiln__prep_vk_open; an abandoned run's
 *   callback answers KILN_ECANCELED, and kiln_vk destroys what it made.
 *
 * - The thread never outlives the run: finish and abandon set `state`
 *   once and join; prepare() and warm_start() call abandon on every way
 *   out.
 *
 * - Honest times: before_ns + after_ns is the context's own time (the
 *   wait in the callback left out), the summary's vulkan_ns as before; the
 *   run's own wait, from the hand-over to the join, is the serial part,
 *   and the rest is vulkan_overlap_ns, so the phases minus the overlap
 *   still add up to total_ns.
 *
 * - Errors as before: the thread's failure (its code, and its logged line
 *   through kiln__err_detail_since) is reported by finish, on the run's
 *   thread, where the serial order reported it (KILN_PREP_STEP_VULKAN,
 *   after the translation), so kiln_last_errmsg says the same.
 *
 * - The run hears of the extensions before its device is made: finish
 *   calls extensions_known (the isolated workers' greeting,
 *   greet_early_workers below) right after it computed them and before
 *   the hand-over, so the
 *   workers' devices are made beside this one; without a thread, right
 *   after kiln__prep_vk_open. The test faults' hook (KILN__PREP_FAULT_DEVICE,
 *   empty in libkiln) runs in the callback after the hand-over, inside
 *   the context's own time, where the device is about to be made.
 *
 * - Without a thread (pthread_create failed, the caller gave a context,
 *   or the test hook kiln__prep_test_vk_serial) finish makes the context
 *   on the run's thread through kiln__prep_vk_open, the serial order.
 */
#include "kiln_internal.h"
#include "isolate_internal.h"
#include "prep_internal.h"

#include "kiln/vk.h"

#include <stdio.h>
#include <string.h>

bool kiln__prep_test_vk_serial;
_Atomic uint64_t kiln__prep_test_vk_begun;

/* The late callback: waits for the hand-over. */
static int late_names(void *user, const char *const **names, uint32_t *count)
{
    struct kiln__prep_vk_early *e = user;
    uint64_t t = kiln_now_ns();
    pthread_mutex_lock(&e->lock);
    e->waiting = true;
    while (e->state == 0)
        pthread_cond_wait(&e->cond, &e->lock);
    int state = e->state;
    pthread_mutex_unlock(&e->lock);
    e->before_ns = t;
    e->after_ns = kiln_now_ns();
    *names = e->names;
    *count = e->nnames;
    if (state > 0) /* the test faults' vk_delay (a slow driver): empty in libkiln */
        kiln__prep_before_build(KILN__PREP_FAULT_DEVICE);
    return state > 0 ? KILN_OK : KILN_ECANCELED;
}

static void *early_main(void *arg)
{
    struct kiln__prep_vk_early *e = arg;
    atomic_fetch_add(&kiln__prep_test_vk_begun, 1);
    uint64_t t0 = kiln_now_ns();
    uint64_t mark = kiln__err_mark();
    struct kiln_vk_options vopt;
    kiln__prep_vk_options(e->want, &vopt);
    struct kiln__vk_late late = {.fn = late_names, .user = e};
    e->rc = kiln__vk_create_late(&vopt, &late, &e->vk);
    uint64_t t1 = kiln_now_ns();
    /* Own time: before the wait, and after it (or all of it when the
     * creation failed before reaching the callback). */
    if (e->after_ns) {
        uint64_t waited = e->after_ns - e->before_ns;
        e->before_ns = e->before_ns - t0;
        e->after_ns = t1 - t0 - e->before_ns - waited;
    } else {
        e->before_ns = t1 - t0;
    }
    snprintf(e->detail, sizeof(e->detail), "%s", kiln__err_detail_since(mark));
    return NULL;
}

void kiln__prep_vk_early_start(struct kiln__prep_vk_early *e, const struct kiln__prep_vk_want *w)
{
    memset(e, 0, sizeof(*e));
    e->want = w;
    if (w->given || kiln__prep_test_vk_serial)
        return;
    if (pthread_mutex_init(&e->lock, NULL) != 0)
        return;
    if (pthread_cond_init(&e->cond, NULL) != 0) {
        pthread_mutex_destroy(&e->lock);
        return;
    }
    e->started = pthread_create(&e->thread, NULL, early_main, e) == 0;
    if (!e->started) {
        KILN_INFO("prep", "no thread for the Vulkan context: it is made after the translation");
        pthread_cond_destroy(&e->cond);
        pthread_mutex_destroy(&e->lock);
    }
}

/* Sets the state once, wakes the thread and joins it. */
static void hand_over(struct kiln__prep_vk_early *e, int state)
{
    pthread_mutex_lock(&e->lock);
    e->state = state;
    pthread_cond_signal(&e->cond);
    pthread_mutex_unlock(&e->lock);
    pthread_join(e->thread, NULL);
    pthread_cond_destroy(&e->cond);
    pthread_mutex_destroy(&e->lock);
    e->started = false;
}

int kiln__prep_vk_early_finish(struct kiln__prep_vk_early *e, const struct kiln__prep_vk_want *w,
                               struct kiln__prep_vk_got *got, const struct kiln__prep_vk_report *r)
{
    uint64_t t0 = kiln_now_ns();
    if (!e->started) {
        atomic_fetch_add(&kiln__prep_test_vk_begun, !w->given);
        int rc = kiln__prep_vk_open(w, got, r->device, r->cache_state, r->cache_loaded_bytes);
        *r->vulkan_ns = kiln_now_ns() - t0;
        if (rc == KILN_OK && e->extensions_known)
            e->extensions_known(e->extensions_user, got->masks);
        return rc;
    }
    *got = (struct kiln__prep_vk_got){0};
    int rc =
        kiln__prep_vk_extensions(w, &got->masks, e->names, KILN_ARRAY_LEN(e->names), &e->nnames);
    if (rc == KILN_OK && e->extensions_known)
        e->extensions_known(e->extensions_user, got->masks);
    hand_over(e, rc == KILN_OK ? 1 : -1);
    uint64_t waited = kiln_now_ns() - t0;
    uint64_t own = e->before_ns + e->after_ns;
    *r->vulkan_ns = own;
    *r->overlap_ns = own > waited ? own - waited : 0;
    if (rc == KILN_OK && e->rc < 0) {
        rc = e->rc;
        if (e->detail[0])
            kiln__err_detail("vk", e->detail); /* the thread's line, the run's text */
    }
    if (rc < 0) {
        kiln_vk_destroy(e->vk);
        e->vk = NULL;
        return rc;
    }
    got->vk = got->own = e->vk;
    e->vk = NULL;
    kiln__prep_vk_describe(got->vk, r->device, r->cache_state, r->cache_loaded_bytes);
    return KILN_OK;
}

void kiln__prep_vk_early_abandon(struct kiln__prep_vk_early *e)
{
    if (!e->started)
        return;
    hand_over(e, -1);
    kiln_vk_destroy(e->vk); /* made before it saw the state: not used */
    e->vk = NULL;
}

/* ---- the run's early context and workers together ------------------------- */

void kiln__prep_early_context(struct kiln__prep_early *e)
{
    if (!e->no_vulkan)
        kiln__prep_vk_early_start(&e->vk, &e->want);
}

void kiln__prep_early_workers(struct kiln__prep_early *e, bool background, size_t programs,
                              unsigned workers)
{
    if (!e->run.iso || e->no_vulkan || programs == 0)
        return;
    struct kiln__isolate_early_want ew = {.iso = e->run.iso,
                                          .use_device_index = e->run.use_device_index,
                                          .device = e->run.device,
                                          .cache_dir = e->run.cache_dir,
                                          .background = background,
                                          .programs = programs,
                                          .workers = workers};
    if (kiln__isolate_early_begin(&ew, &e->run.early) < 0)
        KILN_INFO("prep", "isolated workers start with the pipeline phase (out of memory)");
}

/* The greeting of the early workers, once the run's extensions are known
 * (the context's extensions_known, user the struct kiln__prep_early): the
 * one the pipeline phase would send, sent beside the run's own device. */
static void greet_early_workers(void *user, const uint64_t *masks)
{
    struct kiln__prep_early *e = user;
    if (!e->run.early)
        return;
    kiln__prep_isolate_extensions(e->want.builders, e->want.nbuilders, masks, &e->run);
    (void)kiln__isolate_early_greet(e->run.early, &e->run, e->dict); /* else the phase greets */
}

int kiln__prep_early_finish(struct kiln__prep_early *e, const struct kiln__prep_vk_want *w,
                            const struct kiln_pack_dict *dict, struct kiln__prep_vk_got *got,
                            const struct kiln__prep_vk_report *r)
{
    e->dict = dict;
    e->vk.extensions_known = greet_early_workers;
    e->vk.extensions_user = e;
    return kiln__prep_vk_early_finish(&e->vk, w, got, r);
}

void kiln__prep_early_end(struct kiln__prep_early *e)
{
    kiln__prep_vk_early_abandon(&e->vk);   /* a run that ended before its pipelines */
    kiln__isolate_early_end(e->run.early); /* those not taken, then their thread */
    e->run.early = NULL;
}
