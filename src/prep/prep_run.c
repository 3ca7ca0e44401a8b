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
#include "journal.h"
#include "binaries.h"
#include "ledger.h"
#include "prep_internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

uint64_t kiln__prep_test_cancel_after;

bool kiln__prep_stopping(bool (*cancel)(void *), void *user, _Atomic uint64_t *started)
{
    if (started && kiln__prep_test_cancel_after &&
        atomic_fetch_add(started, 1) >= kiln__prep_test_cancel_after)
        return true;
    return cancel && cancel(user);
}

int kiln__prep_pool(unsigned workers, uint64_t memory_budget, bool background,
                    const struct kiln_executor *executor,
                    const struct kiln_pool_memory_model *model, struct kiln_pool **pool)
{
    struct kiln_pool_options po = {.size = sizeof(po),
                                   .workers = workers,
                                   .memory_budget = memory_budget,
                                   .background = background,
                                   .executor = executor,
                                   .memory_model = model};
    return kiln_pool_create_with(&po, pool);
}

struct kiln__prep_ledger {
    struct kiln__ledger *ledger;
    struct kiln__journal *journal; /* the run's crash journal (journal.c) */
    const char *dir;
    unsigned char *handed; /* per item: given to the pipeline phase */
    size_t n;
};

void kiln__prep_driver(struct kiln_vk *vk, struct kiln__ledger_driver *d)
{
    const struct kiln_vk_info *vi = kiln_vk_get_info(vk);
    memset(d, 0, sizeof(*d));
    d->vendor_id = vi->vendor_id;
    d->device_id = vi->device_id;
    d->driver_version = vi->driver_version ^ kiln__ledger_test_version_xor;
    memcpy(d->cache_uuid, vi->pipeline_cache_uuid, 16);
}

static bool same_driver(const struct kiln__ledger_driver *a, const struct kiln__ledger_driver *b)
{
    return memcmp(a, b, sizeof(*a)) == 0;
}

/* The reason a suspect is recorded with (it fits the ledger's 64 bytes). */
static void suspect_reason(const struct kiln__journal_suspect *s, char *out, size_t cap)
{
    if (s->in_flight <= 1)
        snprintf(out, cap, "in flight alone when a run died (pid %" PRIu32 ")", s->pid);
    else
        snprintf(out, cap, "in flight with %" PRIu32 " others when a run died", s->in_flight - 1);
}

int kiln__prep_record_suspects(const char *dir, const struct kiln_io *io, struct kiln__ledger *own,
                               const struct kiln__ledger_driver *own_driver,
                               const struct kiln__journal_suspect *sus, size_t n)
{
    int rc = KILN_OK;
    for (size_t i = 0; i < n && rc == KILN_OK; i++) {
        bool first = true; /* the first suspect of its driver handles them all */
        for (size_t k = 0; k < i && first; k++)
            first = !same_driver(&sus[k].driver, &sus[i].driver);
        if (!first)
            continue;
        struct kiln__ledger *l = NULL;
        bool mine = own && own_driver && same_driver(own_driver, &sus[i].driver);
        if (mine)
            l = own;
        else
            rc = kiln__ledger_open(dir, io, &sus[i].driver, &l);
        for (size_t k = i; k < n && rc == KILN_OK; k++) {
            if (!same_driver(&sus[k].driver, &sus[i].driver))
                continue;
            char why[KILN__LEDGER_REASON];
            suspect_reason(&sus[k], why, sizeof(why));
            rc = kiln__ledger_note(l, sus[k].key, KILN__LEDGER_FAILED, KILN_ECRASH, why);
        }
        if (rc == KILN_OK)
            rc = kiln__ledger_sync(l);
        if (!mine)
            kiln__ledger_close(l);
    }
    if (rc < 0)
        KILN_WARN("prep",
                  "%s: cannot record the programs a dead run had in flight in the build ledger "
                  "(%s): the next run skips them again",
                  dir, kiln_strerror(rc));
    return rc;
}

uint64_t kiln__prep_skip_suspects(const struct kiln__journal_suspect *sus, size_t n,
                                  const struct kiln__ledger_driver *d,
                                  struct kiln__prep_item *items, size_t nitems, const char *command)
{
    uint64_t skipped = 0;
    for (size_t i = 0; i < nitems; i++) {
        if (!items[i].payload)
            continue;
        for (size_t k = 0; k < n; k++) {
            if (!same_driver(&sus[k].driver, d) || !kiln_key_equal(sus[k].key, items[i].key))
                continue;
            char label[KILN__PREP_LABEL_MAX];
            const char *name = kiln__prep_item_label(&items[i], label, sizeof(label));
            KILN_WARN("prep",
                      "%s: not built: it was being built when an earlier run (pid %" PRIu32
                      ") died%s: recorded as crashed (%s --retry-failed builds it again)",
                      name, sus[k].pid,
                      sus[k].in_flight > 1 ? ", with others in flight (each is suspected)" : "",
                      command);
            items[i].payload = NULL;
            items[i].status = KILN_ECRASH;
            skipped++;
            break;
        }
    }
    return skipped;
}

void kiln__prep_ledger_memory_load(const struct kiln__prep_ledger *pl, struct kiln__prep_memory *m)
{
    for (unsigned c = 0; pl && m && c < KILN__MEMORY_CLASSES; c++)
        m->per_kib[c] = kiln__ledger_memory(pl->ledger, c);
}

void kiln__prep_ledger_memory_keep(struct kiln__prep_ledger *pl, struct kiln__prep_memory *m)
{
    int rc = KILN_OK;
    for (unsigned c = 0; pl && pl->ledger && m && c < KILN__MEMORY_CLASSES && rc == KILN_OK; c++)
        if (m->changed[c])
            rc = kiln__ledger_note_memory(pl->ledger, c, m->per_kib[c]);
    if (rc < 0)
        KILN_WARN("prep", "%s: cannot note what builds needed in memory (%s): learned again",
                  pl->dir, kiln_strerror(rc));
}

uint64_t kiln__prep_ledger_build_ns(const struct kiln__prep_ledger *pl)
{
    return pl ? kiln__ledger_build_ns(pl->ledger) : 0;
}

struct kiln__journal *kiln__prep_ledger_journal(const struct kiln__prep_ledger *pl)
{
    return pl ? pl->journal : NULL;
}

int kiln__prep_ledger_begin(const struct kiln_prepare_options *o, struct kiln_vk *vk,
                            struct kiln__bin_tier *bins, struct kiln__prep_item *items, size_t n,
                            struct kiln_prepare_summary *s, struct kiln__prep_ledger **out)
{
    *out = NULL;
    struct kiln__prep_ledger *pl = kiln__calloc(1, sizeof(*pl));
    unsigned char *handed = kiln__calloc(n ? n : 1, 1);
    if (!pl || !handed) {
        kiln__free(pl);
        kiln__free(handed);
        return KILN_ENOMEM;
    }
    pl->handed = handed;
    pl->n = n;
    pl->dir = o->cache_dir;
    const struct kiln_vk_info *vi = kiln_vk_get_info(vk);
    struct kiln__ledger_driver d;
    kiln__prep_driver(vk, &d);
    int rc = kiln__ledger_open(o->cache_dir, o->io, &d, &pl->ledger);
    if (rc < 0)
        KILN_WARN("prep", "%s: cannot open the build ledger (%s): every pipeline is built",
                  o->cache_dir, kiln_strerror(rc));
    /* What a dead run had in flight: recorded (the writer lock is held for
     * the whole run), then skipped this once even with retry_failed. */
    rc = kiln__journal_scan(o->cache_dir, o->io, &pl->journal);
    if (rc < 0) {
        kiln__prep_ledger_end(pl, items, 0, false, NULL);
        return rc;
    }
    const struct kiln__journal_suspect *sus = NULL;
    size_t nsus = kiln__journal_suspects(pl->journal, &sus);
    if (nsus)
        kiln__journal_settle(
            pl->journal,
            kiln__prep_record_suspects(o->cache_dir, o->io, pl->ledger, &d, sus, nsus) == KILN_OK);
    s->crash_skipped = kiln__prep_skip_suspects(sus, nsus, &d, items, n, "kiln prepare");
    if (!o->isolate) /* an isolated worker's crash costs no run */
        kiln__journal_claim(pl->journal, &d, s->workers);
    /* A new tier folder (the first run with it, or a driver update made
     * the old one stale) is filled from the programs: everything is built
     * once more, its binaries captured. */
    bool built_answers = vi->cache_state == KILN_VK_CACHE_LOADED && !(o->vk && o->on_pipeline) &&
                         !kiln__bin_tier_fresh(bins);
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

void kiln__prep_run_word(const struct kiln__prep_build *b, uint64_t built, uint32_t kind,
                         struct kiln__ledger_run *out)
{
    struct kiln__prep_build *m = (struct kiln__prep_build *)b; /* atomic loads */
    *out = (struct kiln__ledger_run){.kind = kind,
                                     .when = (uint64_t)time(NULL),
                                     .pipelines = built,
                                     .feedback = atomic_load(&m->feedback_pipelines),
                                     .cache_hits = atomic_load(&m->feedback_cache_hits),
                                     .driver_ns = atomic_load(&m->feedback_driver_ns)};
}

void kiln__prep_ledger_end(struct kiln__prep_ledger *pl, const struct kiln__prep_item *items,
                           size_t n, bool vkc_saved, const struct kiln__ledger_run *run)
{
    if (!pl)
        return;
    kiln__journal_close(pl->journal); /* the phase is over: nothing in flight */
    int rc = KILN_OK;
    for (size_t i = 0; pl->ledger && i < n && i < pl->n && rc == KILN_OK; i++) {
        int st = items[i].status;
        if (!pl->handed[i] || st == KILN_ECANCELED || st == KILN_ENOTSUP || items[i].unreached ||
            items[i].early_timeout)
            continue;
        if (st < 0)
            rc = kiln__ledger_note(pl->ledger, items[i].key, KILN__LEDGER_FAILED, st,
                                   kiln_errname(st));
        else if (vkc_saved)
            rc = kiln__ledger_note(pl->ledger, items[i].key, KILN__LEDGER_BUILT, 0, NULL);
    }
    if (rc == KILN_OK && pl->ledger && run && run->pipelines)
        rc = kiln__ledger_note_run(pl->ledger, run);
    if (rc == KILN_OK)
        rc = kiln__ledger_sync(pl->ledger);
    if (rc < 0)
        KILN_WARN("prep", "%s: cannot write the build ledger (%s): the next run builds again",
                  pl->dir, kiln_strerror(rc));
    kiln__ledger_close(pl->ledger);
    kiln__free(pl->handed);
    kiln__free(pl);
}

const char *kiln__prep_item_label(const struct kiln__prep_item *it, char *buf, size_t cap)
{
    if (it->name)
        snprintf(buf, cap, "program %016" PRIx64 "%016" PRIx64 " (%s)", it->key.hi, it->key.lo,
                 it->name);
    else
        snprintf(buf, cap, "program %016" PRIx64 "%016" PRIx64, it->key.hi, it->key.lo);
    return buf;
}
