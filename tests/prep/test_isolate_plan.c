/*
 * test_isolate_plan.c - isolation's rules (isolate_plan.c) and its batch
 * frame, without processes or Vulkan: how programs are cut into batches,
 * when one more worker is started, what time limit is learned from the
 * builds seen, and that a batch survives its frame both ways (and a
 * damaged one is refused).
 */
#include "kiln_test.h"

#include "isolate_internal.h"

/* Every program in exactly one batch, in order, none empty, none over
 * the most. @return the largest batch. */
static size_t check_cover(const size_t *first, size_t nb, size_t n)
{
    size_t largest = 0;
    KT_CHECK(nb >= 1);
    KT_CHECK_EQ(first[0], 0);
    for (size_t k = 0; k < nb; k++) {
        size_t end = k + 1 < nb ? first[k + 1] : n;
        KT_CHECK(end > first[k]);
        KT_CHECK(end - first[k] <= KILN__ISO_BATCH_MAX);
        largest = end - first[k] > largest ? end - first[k] : largest;
    }
    return largest;
}

/* Heavy programs go alone, cheap ones many to a message; the batch size
 * given by a test is kept; every worker can still get several batches. */
KT_CASE(batches_by_cost)
{
    enum { N = 200 };
    size_t sizes[N], first[N];
    /* Ten heavy programs (larger first, as the phase orders them), then a
     * long cheap tail. */
    for (size_t i = 0; i < N; i++)
        sizes[i] = i < 10 ? 400000u : 2000u;
    size_t nb = kiln__iso_batches(sizes, N, 2, 0, first);
    check_cover(first, nb, N);
    for (size_t k = 0; k < 10; k++)
        KT_CHECK_EQ(first[k], k); /* each heavy one alone */
    KT_CHECK(nb < N / 4);         /* the tail batched */
    KT_CHECK(first[nb - 1] < N - 1);
    /* The same tail for 16 workers: smaller batches, so each gets several. */
    size_t nb16 = kiln__iso_batches(sizes, N, 16, 0, first);
    check_cover(first, nb16, N);
    KT_CHECK(nb16 > nb);
    /* Equal programs: no batch over KILN__ISO_BATCH_MAX even when they are
     * tiny. */
    for (size_t i = 0; i < N; i++)
        sizes[i] = 1;
    nb = kiln__iso_batches(sizes, N, 1, 0, first);
    KT_CHECK(check_cover(first, nb, N) <= KILN__ISO_BATCH_MAX);
    /* A fixed size (the test hook): exactly that many, the last the rest. */
    nb = kiln__iso_batches(sizes, 12, 1, 5, first);
    KT_CHECK_EQ(nb, 3);
    KT_CHECK_EQ(first[1], 5);
    KT_CHECK_EQ(first[2], 10);
    /* One program: one batch. */
    KT_CHECK_EQ(kiln__iso_batches(sizes, 1, 16, 0, first), 1);
}

/* How many workers the rule starts for `left` programs, one at a time,
 * up to `most`. */
static unsigned sized(size_t left, unsigned most, uint64_t build_ns, uint64_t start_ns)
{
    unsigned running = 0;
    while (running < most && kiln__iso_worth_starting(left, running, build_ns, start_ns))
        running++;
    return running;
}

/* The worker count follows the work: L x m / R >= 2 x S. Cheap programs
 * get fewer workers than threads, heavy ones all of them; a slow start
 * needs more work per worker. */
KT_CASE(workers_sized_for_the_work)
{
    /* The first worker always, when there is work. */
    KT_CHECK(kiln__iso_worth_starting(1, 0, 1, 1000000000u));
    KT_CHECK(!kiln__iso_worth_starting(0, 0, 1, 1));
    KT_CHECK(!kiln__iso_worth_starting(0, 3, 1000000000u, 1));
    /* The rule's edge: 100 programs of 2 ms on 1 worker is 200 ms, twice a
     * 100 ms start: a second one; 99 are not. */
    KT_CHECK(kiln__iso_worth_starting(100, 1, 2000000u, 100000000u));
    KT_CHECK(!kiln__iso_worth_starting(99, 1, 2000000u, 100000000u));
    /* 116 short pipelines (2 ms) against 100 ms starts (the H100 figures
     * of issue 28): two workers, not sixteen. */
    KT_CHECK_EQ(sized(116, 16, 2000000u, 100000000u), 2);
    /* The defaults, before anything was timed: 116 programs pay for 6. */
    KT_CHECK_EQ(sized(116, 16, KILN__ISO_DEFAULT_BUILD_NS, KILN__ISO_DEFAULT_START_NS), 6);
    /* 20 cheap programs of 5 ms against 25 ms starts: 3 of 16. */
    KT_CHECK_EQ(sized(20, 16, 5000000u, 25000000u), 3);
    /* Heavy programs (300 ms each) get every thread, even a few of them. */
    KT_CHECK_EQ(sized(16, 16, 300000000u, 100000000u), 16);
    KT_CHECK_EQ(sized(1000, 16, 300000000u, 100000000u), 16);
    /* A slower start asks for more work per worker. */
    KT_CHECK(sized(200, 16, 5000000u, 400000000u) < sized(200, 16, 5000000u, 25000000u));
}

/* The limit: none before `samples` builds, K x the p99 bucket's bound
 * after, never under the floor nor over the cap; a class with history of
 * its own uses it, one without uses all builds. */
KT_CASE(learned_time_limit)
{
    static struct kiln__iso_times t; /* zeroed */
    uint64_t seen = 0;
    KT_CHECK_EQ(kiln__iso_times_limit(&t, 0, 16, 1000, 60000, &seen), 0);
    /* 99 builds of 1.5 ms and one of 40 ms in class 0. */
    for (int i = 0; i < 99; i++)
        kiln__iso_times_note(&t, 0, 1500000u);
    kiln__iso_times_note(&t, 0, 40000000u);
    /* p99 is in 1.5 ms's bucket [1024, 2048) us: 10 x 2.048 ms = 21 ms,
     * under the floor of 1 s. */
    KT_CHECK_EQ(kiln__iso_times_limit(&t, 0, 16, 1000, 60000, &seen), 1000);
    KT_CHECK_EQ(seen, 100);
    KT_CHECK_EQ(kiln__iso_times_limit(&t, 0, 16, 1, 60000, &seen), 21);
    /* Too few samples asked for: none. */
    KT_CHECK_EQ(kiln__iso_times_limit(&t, 0, 101, 1, 60000, &seen), 0);
    /* Class 1 has no builds of its own: all builds answer. */
    KT_CHECK_EQ(kiln__iso_times_limit(&t, 1, 16, 1, 60000, &seen), 21);
    /* Class 1's own slow builds (3 s each) win once there are enough. */
    for (int i = 0; i < 16; i++)
        kiln__iso_times_note(&t, 1, 3000000000ull);
    unsigned slow = kiln__iso_times_limit(&t, 1, 16, 1, 600000, &seen);
    KT_CHECK(slow >= 30000 && slow <= 60000);
    KT_CHECK_EQ(seen, 16);
    /* Never over the cap. */
    KT_CHECK_EQ(kiln__iso_times_limit(&t, 1, 16, 1, 20000, &seen), 20000);
}

/* A batch survives its frame; a damaged one is refused, never read past. */
KT_CASE(batch_frame_round_trip)
{
    struct kiln__iso_job in[3] = {
        {.key = {1, 2}, .flags = KILN__ISO_JOB_VALIDATED, .name = "a", .payload = "xyz", .size = 3},
        {.key = {3, 4}, .flags = 0, .name = "", .payload = "p", .size = 1},
        {.key = {5, 6}, .flags = 0, .name = "gen-000005-graphics", .payload = "12345", .size = 5}};
    uint8_t *body = NULL;
    uint32_t size = 0;
    KT_REQUIRE_OK(kiln__iso_batch_make(in, 3, &body, &size));
    struct kiln__iso_job out[KILN__ISO_BATCH_MAX];
    uint32_t count = 0;
    KT_CHECK_OK(kiln__iso_batch_parse(body, size, out, KILN__ISO_BATCH_MAX, &count));
    KT_CHECK_EQ(count, 3);
    for (uint32_t i = 0; i < count && i < 3; i++) {
        KT_CHECK(kiln_key_equal(out[i].key, in[i].key));
        KT_CHECK_EQ(out[i].flags, in[i].flags);
        KT_CHECK(strcmp(out[i].name, in[i].name) == 0);
        KT_CHECK_EQ(out[i].size, in[i].size);
        KT_CHECK(memcmp(out[i].payload, in[i].payload, in[i].size) == 0);
    }
    /* Fewer slots than programs, every cut, a count of 0: refused. */
    KT_CHECK_EQ(kiln__iso_batch_parse(body, size, out, 2, &count), KILN_EFORMAT);
    for (uint32_t cut = 0; cut < size; cut++)
        KT_CHECK_EQ(kiln__iso_batch_parse(body, cut, out, KILN__ISO_BATCH_MAX, &count),
                    KILN_EFORMAT);
    body[0] = 0;
    KT_CHECK_EQ(kiln__iso_batch_parse(body, size, out, KILN__ISO_BATCH_MAX, &count), KILN_EFORMAT);
    kiln__free(body);
    /* Nothing to send, or too much: not made. */
    KT_CHECK_EQ(kiln__iso_batch_make(in, 0, &body, &size), KILN_ERANGE);
    KT_CHECK_EQ(kiln__iso_batch_make(in, KILN__ISO_BATCH_MAX + 1, &body, &size), KILN_ERANGE);
}

KT_MAIN(KT_ENTRY(batches_by_cost), KT_ENTRY(workers_sized_for_the_work),
        KT_ENTRY(learned_time_limit), KT_ENTRY(batch_frame_round_trip))
