/*
 * prep_progress.c - the progress of a preparation's or a warm start's
 * phases, shared by every pipeline phase (in one process, start.c, or in
 * worker processes, isolate.c) and by the translate phase (prepare.c).
 *
 * Invariant: progress is reported from the caller's thread only. Workers
 * never call the progress callback; the caller polls the pool's counters
 * (kiln__prep_tick while it submits, kiln__prep_wait until the pool is
 * done), at most about ten times a second, so the callback needs no lock.
 * The end of a pipelines phase is here too (kiln__prep_pipelines_done):
 * read after the pool joined, so its counters are final.
 */
#include "kiln_internal.h"
#include "prep_internal.h"

#include "kiln/pool.h"

#include <inttypes.h>

#define TICK_NS 100000000ull /* progress about ten times a second */

const char *kiln_prep_phase_name(enum kiln_prep_phase phase)
{
    switch (phase) {
    case KILN_PREP_PHASE_TRANSLATE:
        return "translate";
    case KILN_PREP_PHASE_PIPELINES:
        return "pipelines";
    }
    return "?";
}

/* Reports the jobs done: finished ones only, so a stopped phase (its
 * pending jobs dropped) ends at what was done, never at `total`. */
static void report(struct kiln_pool *pool, uint64_t base, uint64_t total,
                   enum kiln_prep_phase phase, kiln_prep_progress_fn progress, void *user)
{
    struct kiln_pool_progress pp = KILN_POOL_PROGRESS_INIT;
    kiln_pool_get_progress(pool, &pp);
    uint64_t done = pp.done > base ? pp.done - base : 0;
    progress(user, phase, done < total ? done : total, total);
}

void kiln__prep_tick(struct kiln_pool *pool, uint64_t base, uint64_t total,
                     enum kiln_prep_phase phase, kiln_prep_progress_fn progress, void *user,
                     uint64_t *last_ns)
{
    if (!progress)
        return;
    uint64_t now = kiln_now_ns();
    if (now - *last_ns < TICK_NS)
        return;
    *last_ns = now;
    report(pool, base, total, phase, progress, user);
}

int kiln__prep_wait(struct kiln_pool *pool, uint64_t base, uint64_t total,
                    enum kiln_prep_phase phase, kiln_prep_progress_fn progress, void *user)
{
    if (!progress)
        return kiln_pool_wait(pool);
    for (;;) {
        int64_t left = kiln_pool_wait_for(pool, TICK_NS);
        if (left <= 0)
            break;
        report(pool, base, total, phase, progress, user);
    }
    int rc = kiln_pool_wait(pool);
    report(pool, base, total, phase, progress, user);
    return rc;
}

int kiln__prep_run_pipelines(struct kiln_pool *pool, kiln_pool_job_fn fn, void *jobs, size_t stride,
                             size_t count, kiln_prep_progress_fn progress, void *user)
{
    int rc = KILN_OK;
    uint64_t last = kiln_now_ns();
    for (size_t i = 0; i < count && rc == KILN_OK; i++) {
        rc = kiln_pool_submit(pool, fn, (char *)jobs + i * stride);
        kiln__prep_tick(pool, 0, count, KILN_PREP_PHASE_PIPELINES, progress, user, &last);
    }
    int wrc = kiln__prep_wait(pool, 0, count, KILN_PREP_PHASE_PIPELINES, progress, user);
    return rc == KILN_OK ? wrc : rc;
}

int64_t kiln__prep_pipelines_done(const struct kiln__prep_build *b)
{
    /* The state kinds (enum kiln_state_kind) as a warning names them. */
    static const char *const kinds[KILN_STATE_KINDS] = {"built-in", "Fossilize", "application"};
    for (unsigned kind = 0; kind < KILN_STATE_KINDS; kind++) {
        uint64_t skipped = atomic_load(&b->skipped[kind]);
        if (skipped)
            KILN_WARN("prep", "%" PRIu64 " %s program%s skipped; the first: %s", skipped,
                      kinds[kind], skipped == 1 ? "" : "s", b->skip_reason[kind]);
    }
    uint64_t built = 0;
    for (unsigned kind = 0; kind < KILN_STATE_KINDS; kind++)
        built += atomic_load(&b->built[kind]);
    return (int64_t)built;
}
