/*
 * prep_run.c - the controls of a preparation: the build ledger's part of
 * the pipeline phase, the cancel check, and the pools' memory budget and
 * priority.
 *
 * Invariants and why they hold:
 *
 * - A program is skipped as built only when skipping loses nothing: the
 *   ledger says it was built on this very driver (vendorID, deviceID,
 *   driverVersion, pipelineCacheUUID), pipelines.vkc was loaded for this
 *   device (so the driver's compiled code is in the pipeline cache), and
 *   nobody asked for the pipeline objects (on_pipeline). A new driver, a
 *   pipeline cache that was rejected or missing, or a damaged ledger all
 *   mean "build again", which refills the pipeline cache.
 *
 * - BUILT is recorded only after pipelines.vkc was saved, so the ledger
 *   never claims what the pipeline cache does not hold; a crash between
 *   the two costs a rebuild, never a missing pipeline.
 *
 * - Every failure reaching kiln_prepare's pipeline phase is recorded as
 *   FAILED on this driver (a crash or timeout of an isolated worker comes
 *   back as one), except KILN_ENOTSUP (the device lacks a feature: a skip,
 *   not a failure) and jobs never run (cancelled); these are told apart by
 *   the status each item is given before the phase (KILN_ECANCELED) and
 *   that the build overwrites.
 *
 * - The cancel check is called from worker threads before each job and
 *   from the caller's thread between phases: the options say it must be
 *   thread-safe.
 */
#include "kiln_internal.h"
#include "ledger.h"
#include "prep_internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

uint64_t kiln__prep_test_cancel_after;

bool kiln__prep_stopping(bool (*cancel)(void *), void *user, _Atomic uint64_t *started)
{
    if (started && kiln__prep_test_cancel_after &&
        atomic_fetch_add(started, 1) >= kiln__prep_test_cancel_after)
        return true;
    return cancel && cancel(user);
}

int kiln__prep_pool(unsigned workers, uint64_t memory_budget, bool background,
                    struct kiln_pool **pool)
{
    struct kiln_pool_options po = {
        .workers = workers, .memory_budget = memory_budget, .background = background};
    return kiln_pool_create_with(&po, pool);
}

struct kiln__prep_ledger {
    struct kiln__ledger *ledger;
    const char *dir;
    unsigned char *handed; /* per item: given to the pipeline phase */
    size_t n;
};

int kiln__prep_ledger_begin(const struct kiln_prepare_options *o, struct kiln_vk *vk,
                            struct kiln__prep_item *items, size_t n, struct kiln_prepare_summary *s,
                            struct kiln__prep_ledger **out)
{
    *out = NULL;
    struct kiln__prep_ledger *pl = calloc(1, sizeof(*pl));
    unsigned char *handed = calloc(n ? n : 1, 1);
    if (!pl || !handed) {
        free(pl);
        free(handed);
        return KILN_ENOMEM;
    }
    pl->handed = handed;
    pl->n = n;
    pl->dir = o->cache_dir;
    const struct kiln_vk_info *vi = kiln_vk_get_info(vk);
    struct kiln__ledger_driver d = {.vendor_id = vi->vendor_id,
                                    .device_id = vi->device_id,
                                    .driver_version =
                                        vi->driver_version ^ kiln__ledger_test_version_xor};
    memcpy(d.cache_uuid, vi->pipeline_cache_uuid, 16);
    int rc = kiln__ledger_open(o->cache_dir, o->io, &d, &pl->ledger);
    if (rc < 0)
        KILN_WARN("prep", "%s: cannot open the build ledger (%s): every pipeline is built",
                  o->cache_dir, kiln_strerror(rc));
    bool built_answers = vi->cache_state == KILN_VK_CACHE_LOADED && !(o->vk && o->on_pipeline);
    for (size_t i = 0; i < n; i++) {
        if (!items[i].payload)
            continue;
        int err = 0;
        uint32_t st = kiln__ledger_lookup(pl->ledger, items[i].key, &err);
        if ((st == KILN__LEDGER_BUILT && built_answers) ||
            (st == KILN__LEDGER_FAILED && !o->retry_failed)) {
            items[i].payload = NULL;
            s->ledger_skipped++;
            s->ledger_failed += st == KILN__LEDGER_FAILED;
            continue;
        }
        handed[i] = 1;
        items[i].status = KILN_ECANCELED; /* until the build says otherwise */
    }
    if (s->ledger_failed)
        KILN_WARN("prep",
                  "%s: %" PRIu64 " program%s failed to build on this driver before: skipped "
                  "(retry_failed, kiln prepare --retry-failed, builds them again)",
                  o->cache_dir, s->ledger_failed, s->ledger_failed == 1 ? "" : "s");
    if (s->ledger_skipped > s->ledger_failed)
        KILN_INFO("prep", "%s: %" PRIu64 " pipelines built before on this driver: not built again",
                  o->cache_dir, s->ledger_skipped - s->ledger_failed);
    *out = pl;
    return KILN_OK;
}

void kiln__prep_ledger_end(struct kiln__prep_ledger *pl, const struct kiln__prep_item *items,
                           size_t n, bool vkc_saved)
{
    if (!pl)
        return;
    int rc = KILN_OK;
    for (size_t i = 0; pl->ledger && i < n && i < pl->n && rc == KILN_OK; i++) {
        int st = items[i].status;
        if (!pl->handed[i] || st == KILN_ECANCELED || st == KILN_ENOTSUP)
            continue;
        if (st < 0)
            rc = kiln__ledger_note(pl->ledger, items[i].key, KILN__LEDGER_FAILED, st,
                                   kiln_errname(st));
        else if (vkc_saved)
            rc = kiln__ledger_note(pl->ledger, items[i].key, KILN__LEDGER_BUILT, 0, NULL);
    }
    if (rc == KILN_OK)
        rc = kiln__ledger_sync(pl->ledger);
    if (rc < 0)
        KILN_WARN("prep", "%s: cannot write the build ledger (%s): the next run builds again",
                  pl->dir, kiln_strerror(rc));
    kiln__ledger_close(pl->ledger);
    free(pl->handed);
    free(pl);
}
