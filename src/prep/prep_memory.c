/*
 * prep_memory.c - what a pipeline build is expected to need in memory, so
 * the pipeline phase's memory budget admits builds while their predicted
 * total fits (kiln_pool_memory_model) instead of taking every build to be
 * as large as the largest seen.
 *
 * Design. A program's class is its state kind, its stage count (one, two,
 * three or more) and the size of its SPIR-V (four buckets: under 32 KiB,
 * 128 KiB, 512 KiB, and larger), read from the payload's headers without
 * unpacking (kiln_blob_info). Each class keeps one figure: the bytes a
 * build grew per KiB of SPIR-V (at least KILN__MEMORY_FLOOR per build).
 * The pool tells what each build was seen to need (its share of the
 * counted memory while it ran); within a run the figure is the most one
 * build of the class needed (per KiB): it rises at once and never falls,
 * since the builds of one class are not alike (on the H100 one class of
 * generated programs held builds that grew 17 MiB and builds that grew
 * 340; a figure that moved a quarter of the way down after each light
 * build fell to a few MiB, and sixteen heavy builds were admitted at once
 * under a 685 MiB budget). A budget is a ceiling, so a prediction is made
 * for the heavy case. A run's first build of a class replaces what the
 * ledger kept (another driver build, another game: the figure is this
 * run's). A prediction is the figure times the KiB plus an eighth: a figure
 * a little low (a reading between samples) is multiplied by the builds
 * running at once, so the margin keeps that under the budget. The figures are kept per driver in
 * the build ledger (ledger.c, memory records), so a run starts with what the last run on this
 * driver learned.
 *
 * Invariants and why they hold:
 *
 * - A figure is trusted only once this run saw a build of its class end.
 *   Until then a build of the class is predicted with the largest trusted
 *   figure of any class (per KiB of its own SPIR-V), and before any build
 *   ended it is predicted 0, so the pool's first-job rule admits it (half
 *   the budget or 512 MiB each, whichever is less). So a figure the ledger
 *   kept that is too low (another driver build, a changed game) admits
 *   nothing until this run confirmed it, a large budget (the default's)
 *   does not wait, and the builds sharing the counted memory while they
 *   run are weighed alike (a share in proportion to a wrong prediction
 *   would hide a build's growth behind another's guess). The pool's
 *   largest-seen rule is not the fallback after the first build: its
 *   figure is the process's growth over one build, every build running
 *   beside it included, and with a class per kind, stage count and size
 *   it held most classes' first builds to one or two at once (0.52 of the
 *   plain rate at a budget of the plain peak, on the H100). After that
 *   the pool asks for the prediction when a worker is about to take a
 *   job, after every observe so far, and its reading rule (the counted
 *   memory plus the next prediction) holds meanwhile.
 *
 * - A borrowed prediction is never below the most one build of this run
 *   needed (`largest`), plus the margin. Borrowing alone predicts a heavy
 *   class's first builds by a lighter class's figure per KiB, and with 16
 *   workers a tight budget admits several of them at once before any
 *   ended. So an unseen class starts beside others only while the
 *   headroom holds the largest build seen: at once under a large budget,
 *   one at a time under a tight one, until its own first build ended.
 *
 * - One mutex guards the figures: predict and observe run on the pool's
 *   workers at once.
 */
#include "kiln_internal.h"
#include "prep_internal.h"

#include <string.h>

void kiln__prep_memory_init(struct kiln__prep_memory *m)
{
    memset(m, 0, sizeof(*m));
    pthread_mutex_init(&m->lock, NULL);
}

void kiln__prep_memory_destroy(struct kiln__prep_memory *m)
{
    pthread_mutex_destroy(&m->lock);
}

unsigned kiln__prep_memory_class(const void *payload, size_t size, uint64_t *spirv_bytes)
{
    struct kiln_stage_blob st[KILN_PROGRAM_MAX_STAGES];
    struct kiln_payload_state state;
    *spirv_bytes = 0;
    int n = kiln_program_payload_parse_full(payload, size, KILN_PROGRAM_MAX_STAGES, st, &state);
    if (n <= 0)
        return 0;
    for (int i = 0; i < n; i++) {
        size_t words = 0;
        if (kiln_blob_info(st[i].blob, st[i].blob_size, NULL, &words) == KILN_OK)
            *spirv_bytes += words;
        else
            *spirv_bytes += st[i].blob_size;
    }
    unsigned stages = n >= 3 ? 2u : (unsigned)n - 1u;
    uint64_t b = *spirv_bytes;
    unsigned bucket = b < (32u << 10) ? 0u : b < (128u << 10) ? 1u : b < (512u << 10) ? 2u : 3u;
    unsigned kind = state.kind < KILN_STATE_KINDS ? state.kind : 0u;
    return (kind * 3u + stages) * 4u + bucket;
}

static uint64_t kib_of(uint64_t spirv_bytes)
{
    return spirv_bytes < 1024 ? 1 : (spirv_bytes + 1023) / 1024;
}

uint64_t kiln__prep_memory_predict(struct kiln__prep_memory *m, unsigned cls, uint64_t spirv_bytes)
{
    if (cls >= KILN__MEMORY_CLASSES)
        return 0;
    pthread_mutex_lock(&m->lock);
    /* Its own figure once trusted; else (or when it is 0) the largest
     * trusted figure of any class: a figure this run saw, per KiB, so a
     * class's first build is weighed by what builds of this driver needed,
     * not by the largest growth the whole process showed over one build
     * (which counts every build running beside it). */
    bool own = m->verified[cls] && m->per_kib[cls];
    uint64_t per = own ? m->per_kib[cls] : 0;
    if (!per)
        for (unsigned c = 0; c < KILN__MEMORY_CLASSES; c++)
            if (m->verified[c] && m->per_kib[c] > per)
                per = m->per_kib[c];
    uint64_t largest = m->largest;
    pthread_mutex_unlock(&m->lock);
    if (!per)
        return 0; /* nothing trusted yet: the pool's own rule */
    uint64_t kib = kib_of(spirv_bytes);
    uint64_t need = per > UINT64_MAX / 16 / kib ? UINT64_MAX / 16 : per * kib;
    /* A class no build of which ended is not weighed below the most one
     * build needed in this run: a borrowed figure per KiB says nothing of
     * a class whose builds cost more per KiB (a small module with a large
     * fixed cost, another kind), and with many workers every build
     * predicted too low starts at once. So it starts only where the
     * headroom holds the largest build seen, which a large budget has and
     * a tight one does not, until its own first build ended. */
    if (!own && need < largest)
        need = largest;
    need += need / 8; /* a margin: a figure a little low, times the builds at once */
    return need < KILN__MEMORY_FLOOR ? KILN__MEMORY_FLOOR : need;
}

void kiln__prep_memory_observe(struct kiln__prep_memory *m, unsigned cls, uint64_t spirv_bytes,
                               uint64_t grown)
{
    if (cls >= KILN__MEMORY_CLASSES)
        return;
    uint64_t seen = grown / kib_of(spirv_bytes);
    pthread_mutex_lock(&m->lock);
    bool first = !m->verified[cls];
    m->verified[cls] = true;
    if (grown == 0) {
        /* Nothing seen above the base: keeps the figure. */
        pthread_mutex_unlock(&m->lock);
        return;
    }
    if (grown > m->largest)
        m->largest = grown;
    if (seen == 0)
        seen = 1;
    uint64_t *per = &m->per_kib[cls];
    if (first || seen > *per)
        *per = seen; /* this run's first, or the most so far */
    m->changed[cls] = true;
    pthread_mutex_unlock(&m->lock);
}

/* ---- the pool's model over build jobs -------------------------------------- */

uint64_t kiln__prep_memory_predict_job(void *user, void *arg)
{
    const struct kiln__prep_memory_job *j = arg;
    return kiln__prep_memory_predict(user, j->cls, j->spirv_bytes);
}

void kiln__prep_memory_observe_job(void *user, void *arg, uint64_t predicted, uint64_t grown)
{
    (void)predicted;
    const struct kiln__prep_memory_job *j = arg;
    if (j->item && (j->item->unreached || j->item->status == KILN_ECANCELED))
        grown = 0; /* no driver saw it: it ends the class's wait, teaches nothing */
    kiln__prep_memory_observe(user, j->cls, j->spirv_bytes, grown);
}

const struct kiln_pool_memory_model *kiln__prep_memory_model(struct kiln__prep_memory *m,
                                                             struct kiln_pool_memory_model *out)
{
    if (!m)
        return NULL;
    *out = (struct kiln_pool_memory_model)KILN_POOL_MEMORY_MODEL_INIT;
    out->predict = kiln__prep_memory_predict_job;
    out->observe = kiln__prep_memory_observe_job;
    out->user = m;
    return out;
}
