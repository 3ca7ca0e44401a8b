/*
 * isolate_plan.c - the rules isolation's parent (isolate.c) runs by: how
 * programs are batched into messages, when one more worker process is
 * worth starting, and how long one program may take in a worker.
 *
 * Invariants and why they hold:
 *
 * - Batching never changes what is built, only how many programs travel
 *   in one message: batches are consecutive runs of the phase's order
 *   (larger payloads first), every program in exactly one batch, none
 *   empty, none over KILN__ISO_BATCH_MAX. The expected cost of a program
 *   is its payload's size (what the driver is handed); a batch stays under
 *   an even share of the run's bytes, so a heavy program travels alone and
 *   the cheap tail travels many to a message, and every worker still gets
 *   several batches to balance the end of the run.
 *
 * - Workers are sized for the work, not for the thread count: a worker
 *   costs a process and a Vulkan device (tens of milliseconds on lavapipe,
 *   100 ms and more on a discrete GPU's driver) and its memory for the
 *   whole run. With L programs no worker has received, R workers running
 *   or starting, a mean build m and the slowest start S seen so far, one
 *   more is started only while L x m / R >= 2 x S, never past the
 *   threads. Why: the R workers end the work in L m / R; with one more
 *   that starts now and helps after S, in (L m + S) / (R + 1), sooner
 *   exactly when L m / R > S; the factor 2 keeps a worker that would
 *   barely pay (and its memory) out. m is this run's mean once a build was
 *   timed, before that the build ledger's figure for this driver (its
 *   last run) or KILN__ISO_DEFAULT_BUILD_NS; S is the slowest start that
 *   ended or the longest one still under way, before either what the
 *   parent's own Vulkan context took (a worker's start makes the same),
 *   else KILN__ISO_DEFAULT_START_NS. S counts only what the phase waits
 *   for: a worker started with the run (isolate.c) began its context
 *   beside the translation, so its start is timed from its greeting, and
 *   the first guess is the part of the parent's context the run waited
 *   for (vulkan_ns less vulkan_overlap_ns). So 20 cheap programs get one or two
 *   workers, not sixteen, and a long or heavy run gets one per thread.
 *   Starts run in parallel (isolate.c): the rule, not a pacing window,
 *   bounds how many are under way, and it is asked again as each start
 *   and each build ends.
 *
 * - A learned time limit only shortens the wait for a hung build, never
 *   lengthens it past the fixed cap, and is used only once enough builds
 *   of the kind were seen: K times the 99th percentile of similar builds
 *   (the program's memory class: state kind, stages, SPIR-V size), or of
 *   all builds while the class has too few, never under the floor. The
 *   percentile is read from a histogram of power-of-two buckets (its
 *   bucket's upper bound: at most twice the true value, erring long).
 *   Counters are atomics: pool threads note builds while others read.
 */
#include "kiln_internal.h"
#include "isolate_internal.h"

size_t kiln__iso_batches(const size_t *sizes, size_t n, unsigned workers, unsigned fixed,
                         size_t *first)
{
    uint64_t total = 0;
    for (size_t i = 0; i < n; i++)
        total += sizes[i];
    uint64_t shares = (uint64_t)(workers ? workers : 1u) * KILN__ISO_BATCHES_PER_WORKER;
    uint64_t cap = total / shares ? total / shares : 1;
    unsigned most =
        fixed ? (fixed < KILN__ISO_BATCH_MAX ? fixed : KILN__ISO_BATCH_MAX) : KILN__ISO_BATCH_MAX;
    size_t nb = 0;
    for (size_t i = 0; i < n;) {
        first[nb++] = i;
        uint64_t bytes = sizes[i++];
        for (unsigned k = 1; k < most && i < n; k++, i++) {
            if (!fixed && bytes + sizes[i] > cap)
                break;
            bytes += sizes[i];
        }
    }
    return nb;
}

bool kiln__iso_worth_starting(size_t left, unsigned running, uint64_t build_ns, uint64_t start_ns)
{
    if (running == 0 || left == 0)
        return left > 0;
    /* left x build / running >= 2 x start, without overflow. */
    double each = (double)left * (double)build_ns / (double)running;
    return each >= 2.0 * (double)start_ns;
}

/* The histogram's row over every class, after the classes' own. */
static const unsigned all_row = KILN__MEMORY_CLASSES;

static unsigned bucket_of(uint64_t ns)
{
    uint64_t us = ns / 1000u;
    unsigned b = 0;
    while (b + 1 < KILN__ISO_TIME_BUCKETS && us >= ((uint64_t)2 << b))
        b++;
    return b;
}

void kiln__iso_times_note(struct kiln__iso_times *t, unsigned cls, uint64_t ns)
{
    unsigned b = bucket_of(ns);
    if (cls < KILN__MEMORY_CLASSES)
        atomic_fetch_add_explicit(&t->hist[cls][b], 1u, memory_order_relaxed);
    atomic_fetch_add_explicit(&t->hist[all_row][b], 1u, memory_order_relaxed);
    atomic_fetch_add_explicit(&t->sum_ns, ns, memory_order_relaxed);
    atomic_fetch_add_explicit(&t->count, 1u, memory_order_relaxed);
}

/* The upper bound of row's 99th percentile in microseconds; 0 with fewer
 * than `samples` builds in it. */
static uint64_t p99_us(const _Atomic uint32_t *row, unsigned samples, uint64_t *seen)
{
    uint32_t h[KILN__ISO_TIME_BUCKETS];
    uint64_t total = 0;
    for (unsigned b = 0; b < KILN__ISO_TIME_BUCKETS; b++) {
        h[b] = atomic_load_explicit(&row[b], memory_order_relaxed);
        total += h[b];
    }
    *seen = total;
    if (total == 0 || total < samples)
        return 0;
    uint64_t want = (total * 99u + 99u) / 100u, sum = 0;
    for (unsigned b = 0; b < KILN__ISO_TIME_BUCKETS; b++) {
        sum += h[b];
        if (sum >= want)
            return (uint64_t)2 << b;
    }
    return (uint64_t)2 << (KILN__ISO_TIME_BUCKETS - 1);
}

unsigned kiln__iso_times_limit(const struct kiln__iso_times *t, unsigned cls, unsigned samples,
                               unsigned floor_ms, unsigned cap_ms, uint64_t *seen)
{
    uint64_t p = cls < KILN__MEMORY_CLASSES ? p99_us(t->hist[cls], samples, seen) : 0;
    if (!p)
        p = p99_us(t->hist[all_row], samples, seen);
    if (!p)
        return 0;
    uint64_t ms = (p * KILN__ISO_LIMIT_K + 999u) / 1000u;
    if (ms < floor_ms)
        ms = floor_ms;
    return ms < cap_ms ? (unsigned)ms : cap_ms;
}
