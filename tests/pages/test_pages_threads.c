/*
 * test_pages_threads.c - the page table against a reference model, and
 * against concurrent readers.
 *
 * model: 100,000 random stores and queries, each answer compared with a
 * plain byte array. stress: two threads describe a 1,536-page range in a
 * loop while a third turns one page of a marked block read-only and back,
 * moving through every offset of four blocks over 256 rounds; a pass that
 * started after a change and saw no other change must show the range split
 * exactly at that page (or whole again after the restore). Built against
 * the sources with KILN_PAGES_TEST_SKIP_SETTLE=1 (stores skip the settle of
 * blocks they cover in part), the stress case must fail: ctest requires it.
 *
 * Both run under ThreadSanitizer in CI (label `threads`): every byte the
 * threads share is reached through C11 atomics.
 */
#include "kiln_test.h"
#include "pages_ref.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>

enum { C = 0x01, R = 0x02, W = 0x04, G = 0x10, RW = C | R | W, RO = C | R };

#define CHUNK ((uint64_t)KILN_PAGES_CHUNK_PAGES)

/* A length from 1 to 2^bits, spread evenly over the powers of two. */
static uint64_t log_length(uint64_t *seed, unsigned bits)
{
    unsigned b = (unsigned)(kt_rand(seed) % (bits + 1));
    return 1 + kt_rand(seed) % ((uint64_t)1 << b);
}

KT_CASE(model)
{
    /* Three and a bit chunks: a partial last chunk, and chunks that stay absent
     * until a random store reaches them. */
    struct ref_pages r = {NULL, 3 * (uint64_t)CHUNK + 1000};
    r.bytes = calloc(r.count, 1);
    struct kiln_pages *t;
    KT_REQUIRE(r.bytes != NULL);
    KT_REQUIRE_OK(kiln_pages_create(r.count, &t));
    bool touched[4] = {false};
    const uint8_t values[] = {0, RW, RW, RO, C, RW | G, 0xFF, 0x80};
    const uint8_t masks[] = {R, W, C | R, G, 0x80, 0xFF};
    uint64_t seed = 0x5eed;
    uint64_t generation = kiln_pages_generation(t);
    for (int op = 0; op < 100000 && !kt_failures; op++) {
        uint64_t kind = kt_rand(&seed) % 8;
        uint64_t first = kt_rand(&seed) % r.count;
        uint64_t len = log_length(&seed, kind == 0 ? 17 : 12);
        uint64_t last = KILN_MIN(first + len - 1, r.count - 1);
        uint8_t mask = masks[kt_rand(&seed) % KILN_ARRAY_LEN(masks)];
        if (kind < 3) {
            uint8_t v = values[kt_rand(&seed) % KILN_ARRAY_LEN(values)];
            KT_REQUIRE_OK(ref_store(t, &r, first, last, v));
            for (uint64_t c = first / CHUNK; v && c <= last / CHUNK; c++)
                touched[c] = true;
            KT_CHECK_EQ(kiln_pages_generation(t), ++generation);
        } else if (kind < 6) {
            ref_check_run_end(t, &r, first, first + len, mask);
        } else if (kind == 6) {
            /* With no store in flight the summaries are exact: a block or group
             * whose pages all hold v != 0 is marked v, any other holds 0. */
            KT_CHECK_EQ(kiln_pages_load(t, first), r.bytes[first]);
            uint64_t b = first & ~(uint64_t)63, g = first & ~(uint64_t)4095;
            if ((first | 63) < r.count)
                KT_CHECK_EQ(kiln_pages_summary(t, 1, first),
                            ref_run_end(&r, b, b + 64, 0xFF) == b + 64 ? r.bytes[b] : 0);
            if ((first | 4095) < r.count)
                KT_CHECK_EQ(kiln_pages_summary(t, 2, first),
                            ref_run_end(&r, g, g + 4096, 0xFF) == g + 4096 ? r.bytes[g] : 0);
        } else {
            ref_check_describe(t, &r, first, KILN_MIN(last, first + 2048), mask);
        }
        if (op % 10000 == 0)
            KT_CHECK_OK(kiln_pages_verify(t));
    }
    KT_CHECK_OK(kiln_pages_verify(t));
    uint64_t want_chunks = 0;
    for (int c = 0; c < 4; c++)
        want_chunks += touched[c];
    KT_CHECK_EQ(kiln_pages_chunk_count(t), want_chunks);
    kiln_pages_destroy(t);
    free(r.bytes);
}

/* ---- stress ------------------------------------------------------------- */

enum { ROUNDS = 256, SCANNERS = 2, MAX_RUNS = 8 };

/* The scanned range straddles a level-2 group boundary inside chunk 1; the
 * setup store covers whole groups around it, so both levels hold marks. */
#define GROUP_EDGE  (CHUNK + 2 * (uint64_t)KILN_PAGES_GROUP_PAGES)
#define RANGE_FIRST (GROUP_EDGE - 512)
#define RANGE_LAST  (GROUP_EDGE + 1023)

struct stress {
    struct kiln_pages *t;
    /* Change k (k = 1 .. 2 * ROUNDS) is in flight while phase == 2k-1 and done
     * once phase == 2k. After an odd number of changes, round (k-1)/2's page
     * is read-only; after an even number, the range is read-write again. */
    _Atomic unsigned phase;
    _Atomic unsigned ack[SCANNERS];
    _Atomic bool done;
    _Atomic bool failed;
    /* Written by a scanner before it sets `failed`, read after the joins. */
    unsigned fail_phase;
    unsigned fail_runs;
    uint64_t fail_first[MAX_RUNS], fail_last[MAX_RUNS];
    uint8_t fail_value[MAX_RUNS];
    _Atomic uint64_t exact_passes;
    _Atomic uint64_t passes;
};

/* The page round r changes: every offset of four blocks, 64 rounds each. */
static uint64_t round_page(unsigned r)
{
    const uint64_t blocks[4] = {RANGE_FIRST, GROUP_EDGE - 64, GROUP_EDGE, RANGE_LAST - 63};
    return blocks[(r / 64) % 4] + r % 64;
}

struct pass {
    unsigned n;
    bool overflow;
    uint64_t first[MAX_RUNS], last[MAX_RUNS];
    uint8_t value[MAX_RUNS];
};

static int collect(void *user, uint64_t first, uint64_t last, uint8_t value)
{
    struct pass *p = user;
    if (p->n == MAX_RUNS) {
        p->overflow = true;
        return 1;
    }
    p->first[p->n] = first;
    p->last[p->n] = last;
    p->value[p->n] = value;
    p->n++;
    return 0;
}

/* @return whether a pass shows the range exactly as it stands after `changes` changes. */
static bool pass_matches(const struct pass *p, unsigned changes)
{
    if (p->overflow)
        return false;
    if (changes % 2 == 0) /* the whole range read-write */
        return p->n == 1 && p->first[0] == RANGE_FIRST && p->last[0] == RANGE_LAST &&
               p->value[0] == RW;
    uint64_t x = round_page((changes - 1) / 2);
    struct pass want = {0};
    if (x > RANGE_FIRST)
        collect(&want, RANGE_FIRST, x - 1, RW);
    collect(&want, x, x, RO);
    if (x < RANGE_LAST)
        collect(&want, x + 1, RANGE_LAST, RW);
    if (p->n != want.n)
        return false;
    for (unsigned i = 0; i < p->n; i++)
        if (p->first[i] != want.first[i] || p->last[i] != want.last[i] ||
            p->value[i] != want.value[i])
            return false;
    return true;
}

struct scanner_arg {
    struct stress *s;
    unsigned id;
};

static void *scanner(void *arg)
{
    struct scanner_arg *a = arg;
    struct stress *s = a->s;
    unsigned passes = 0;
    while (!atomic_load(&s->done) && !atomic_load(&s->failed)) {
        unsigned before = atomic_load_explicit(&s->phase, memory_order_acquire);
        struct pass p = {0};
        int rc = kiln_pages_describe(s->t, RANGE_FIRST, RANGE_LAST, collect, &p);
        unsigned after = atomic_load_explicit(&s->phase, memory_order_acquire);
        /* A pass that overlapped changes may show any state it overlapped,
         * never one that did not exist; a pass that started after change k
         * was done and saw no other change in flight must show exactly the
         * state after change k. */
        bool ok = false;
        for (unsigned k = before / 2; k <= (after + 1) / 2 && !ok; k++)
            ok = pass_matches(&p, k);
        if (rc < 0 || !ok) {
            bool expected = false;
            /* Only the first scanner to fail records what it saw. */
            if (atomic_compare_exchange_strong(&s->failed, &expected, true)) {
                s->fail_phase = before;
                s->fail_runs = p.n;
                memcpy(s->fail_first, p.first, sizeof(p.first));
                memcpy(s->fail_last, p.last, sizeof(p.last));
                memcpy(s->fail_value, p.value, sizeof(p.value));
            }
            break;
        }
        atomic_fetch_add_explicit(&s->passes, 1, memory_order_relaxed);
        if (before == after && before % 2 == 0)
            atomic_fetch_add_explicit(&s->exact_passes, 1, memory_order_relaxed);
        atomic_store_explicit(&s->ack[a->id], before, memory_order_release);
        /* On a machine with fewer cores than threads, give the writer the
         * core once this phase is proved, rather than spin a timeslice. */
        if (atomic_load_explicit(&s->phase, memory_order_relaxed) == before && passes % 4 == 3)
            sched_yield();
        passes++;
    }
    return NULL;
}

/* Waits until every scanner finished a pass that started in `phase` or later. */
static bool wait_for_scanners(struct stress *s, unsigned phase)
{
    for (unsigned i = 0; i < SCANNERS; i++) {
        while (atomic_load_explicit(&s->ack[i], memory_order_acquire) < phase) {
            if (atomic_load(&s->failed))
                return false;
            sched_yield();
        }
    }
    return true;
}

KT_CASE(stress)
{
    struct stress *s = calloc(1, sizeof(*s));
    KT_REQUIRE(s != NULL);
    KT_REQUIRE_OK(kiln_pages_create(3 * (uint64_t)CHUNK, &s->t));
    KT_REQUIRE_OK(kiln_pages_store(s->t, GROUP_EDGE - 2 * KILN_PAGES_GROUP_PAGES,
                                   GROUP_EDGE + 2 * KILN_PAGES_GROUP_PAGES - 1, RW));
    KT_REQUIRE(kiln_pages_summary(s->t, 2, RANGE_FIRST) == RW);
    KT_REQUIRE(kiln_pages_summary(s->t, 2, RANGE_LAST) == RW);

    pthread_t threads[SCANNERS];
    struct scanner_arg args[SCANNERS];
    for (unsigned i = 0; i < SCANNERS; i++) {
        args[i] = (struct scanner_arg){s, i};
        KT_REQUIRE(pthread_create(&threads[i], NULL, scanner, &args[i]) == 0);
    }
    /* KILN_PAGES_STRESS_REPEAT=N runs the 256 rounds N times (long runs by hand). */
    const char *repeat_env = getenv("KILN_PAGES_STRESS_REPEAT");
    unsigned repeat = repeat_env && atoi(repeat_env) > 1 ? (unsigned)atoi(repeat_env) : 1;
    unsigned rounds = 0;
    for (unsigned r = 0; r < ROUNDS * repeat; r++) {
        uint64_t x = round_page(r);
        unsigned k = 2 * r + 1; /* turn page x read-only: change k */
        atomic_store(&s->phase, 2 * k - 1);
        if (kiln_pages_store(s->t, x, x, RO) < 0)
            break;
        atomic_store(&s->phase, 2 * k);
        if (!wait_for_scanners(s, 2 * k))
            break;
        k++; /* and back: change k + 1 */
        atomic_store(&s->phase, 2 * k - 1);
        if (kiln_pages_store(s->t, x, x, RW) < 0)
            break;
        atomic_store(&s->phase, 2 * k);
        if (!wait_for_scanners(s, 2 * k))
            break;
        rounds++;
    }
    atomic_store(&s->done, true);
    for (unsigned i = 0; i < SCANNERS; i++)
        pthread_join(threads[i], NULL);

    if (atomic_load(&s->failed)) {
        unsigned k = s->fail_phase / 2;
        kt_fail(__FILE__, __LINE__,
                "a pass started after %u changes%s (round %u, page %" PRIu64 " %s) saw %u runs:", k,
                s->fail_phase % 2 ? " and one in flight" : "", k ? (k - 1) / 2 : 0,
                k ? round_page((k - 1) / 2) : 0, k % 2 ? "read-only" : "restored", s->fail_runs);
        for (unsigned i = 0; i < s->fail_runs && i < MAX_RUNS; i++)
            (void)fprintf(stderr, "  run %" PRIu64 "..%" PRIu64 " = 0x%02x\n", s->fail_first[i],
                          s->fail_last[i], s->fail_value[i]);
    }
    KT_CHECK_EQ(rounds, ROUNDS * repeat);
    /* Every phase had a pass per scanner that saw no other change. */
    KT_CHECK(atomic_load(&s->exact_passes) >= 2 * ROUNDS * repeat * SCANNERS);
    KT_CHECK_OK(kiln_pages_verify(s->t));
    KT_CHECK_EQ(kiln_pages_summary(s->t, 2, RANGE_FIRST), RW);
    kiln_pages_destroy(s->t);
    free(s);
}

KT_MAIN(KT_ENTRY(model), KT_ENTRY(stress))
