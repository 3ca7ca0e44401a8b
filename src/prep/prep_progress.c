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
 * read after the pool joined, so its counters are final; and the count of
 * what the driver said of each build (kiln__prep_note_feedback), which
 * both kinds of phase keep.
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

/* What a phase's progress reads: the pool's jobs done, or a counter of
 * its own (a job of several programs, isolate.c). */
struct meter {
    struct kiln_pool *pool;
    const _Atomic uint64_t *done; /* NULL: the pool's jobs done */
    uint64_t base, total;
    enum kiln_prep_phase phase;
    kiln_prep_progress_fn progress;
    void *user;
};

/* Reports the jobs done: finished ones only, so a stopped phase (its
 * pending jobs dropped) ends at what was done, never at `total`. */
static void report(const struct meter *m)
{
    uint64_t now;
    if (m->done) {
        now = atomic_load_explicit(m->done, memory_order_relaxed);
    } else {
        struct kiln_pool_progress pp = KILN_POOL_PROGRESS_INIT;
        kiln_pool_get_progress(m->pool, &pp);
        now = pp.done;
    }
    uint64_t done = now > m->base ? now - m->base : 0;
    m->progress(m->user, m->phase, done < m->total ? done : m->total, m->total);
}

static void tick(const struct meter *m, uint64_t *last_ns)
{
    if (!m->progress)
        return;
    uint64_t now = kiln_now_ns();
    if (now - *last_ns < TICK_NS)
        return;
    *last_ns = now;
    report(m);
}

static int wait_done(const struct meter *m)
{
    if (!m->progress)
        return kiln_pool_wait(m->pool);
    for (;;) {
        int64_t left = kiln_pool_wait_for(m->pool, TICK_NS);
        if (left <= 0)
            break;
        report(m);
    }
    int rc = kiln_pool_wait(m->pool);
    report(m);
    return rc;
}

void kiln__prep_tick(struct kiln_pool *pool, uint64_t base, uint64_t total,
                     enum kiln_prep_phase phase, kiln_prep_progress_fn progress, void *user,
                     uint64_t *last_ns)
{
    struct meter m = {pool, NULL, base, total, phase, progress, user};
    tick(&m, last_ns);
}

int kiln__prep_wait(struct kiln_pool *pool, uint64_t base, uint64_t total,
                    enum kiln_prep_phase phase, kiln_prep_progress_fn progress, void *user)
{
    struct meter m = {pool, NULL, base, total, phase, progress, user};
    return wait_done(&m);
}

int kiln__prep_run_pipelines(struct kiln_pool *pool, const struct kiln__prep_jobs *j,
                             kiln_prep_progress_fn progress, void *user)
{
    struct meter m = {
        pool, j->done, 0, j->done ? j->total : j->count, KILN_PREP_PHASE_PIPELINES, progress, user};
    int rc = KILN_OK;
    uint64_t last = kiln_now_ns();
    for (size_t i = 0; i < j->count && rc == KILN_OK; i++) {
        rc = kiln_pool_submit(pool, j->fn, (char *)j->jobs + i * j->stride);
        tick(&m, &last);
    }
    int wrc = wait_done(&m);
    return rc == KILN_OK ? wrc : rc;
}

/* The driver's word on one build, counted for the phase: in one process
 * (start.c) or as a worker answered it (isolate.c). */
void kiln__prep_note_feedback(struct kiln__prep_build *b, struct kiln__prep_item *it, bool valid,
                              bool cache_hit, uint64_t driver_ns)
{
    it->feedback_valid = valid;
    it->driver_cache_hit = valid && cache_hit;
    it->driver_ns = valid ? driver_ns : 0;
    if (!valid)
        return;
    atomic_fetch_add_explicit(&b->feedback_pipelines, 1, memory_order_relaxed);
    if (cache_hit)
        atomic_fetch_add_explicit(&b->feedback_cache_hits, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&b->feedback_driver_ns, driver_ns, memory_order_relaxed);
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
