/*
 * test_pages.c - the page table's answers around every edge of its layout:
 * inside a block, at the start of a summary word, of a group, of a chunk,
 * next to an absent chunk; decommits; what allocates and what does not.
 *
 * Each case keeps a plain byte array beside the table and compares every
 * query with it (pages_ref.h), before a page changes, after, and after it is
 * restored; the summaries themselves are checked where the case is about
 * them.
 */
#include "kiln_test.h"
#include "pages_ref.h"

/* Flags as an emulator might define them; kiln treats them as opaque. */
enum { C = 0x01, R = 0x02, W = 0x04, G = 0x10, RW = C | R | W, RO = C | R };

#define CHUNK ((uint64_t)KILN_PAGES_CHUNK_PAGES)

struct log_count {
    int errors;
};

static void count_log(void *user, enum kiln_log_level level, const char *module, const char *line)
{
    struct log_count *c = user;
    if (level == KILN_LOG_ERROR && strcmp(module, "pages") == 0 && line[0])
        c->errors++;
}

/* Every query near page p, every way, against the reference. */
static void check_around(const struct kiln_pages *t, const struct ref_pages *r, uint64_t p)
{
    const int64_t deltas[] = {-4097, -4096, -4095, -513, -512, -65, -64, -63, -9,   -8,
                              -1,    0,     1,     7,    8,    63,  64,  512, 4095, 4096};
    const uint8_t masks[] = {R, W, C | R, G};
    uint64_t block = p & ~(uint64_t)63, word = p & ~(uint64_t)511, group = p & ~(uint64_t)4095;
    uint64_t chunk = p & ~(uint64_t)(CHUNK - 1);
    uint64_t probes[KILN_ARRAY_LEN(deltas) + 5];
    size_t n = 0;
    for (size_t i = 0; i < KILN_ARRAY_LEN(deltas); i++)
        if ((int64_t)p + deltas[i] >= 0 && (uint64_t)((int64_t)p + deltas[i]) < r->count)
            probes[n++] = (uint64_t)((int64_t)p + deltas[i]);
    probes[n++] = block;
    probes[n++] = word;
    probes[n++] = group;
    probes[n++] = chunk;
    if (chunk > 0)
        probes[n++] = chunk - 1;
    for (size_t i = 0; i < n; i++) {
        uint64_t q = probes[i];
        KT_CHECK_EQ(kiln_pages_load(t, q), r->bytes[q]);
        const uint64_t limits[] = {
            q + 1,        q + 2,         p,         p + 1,         p + 2,   block + 64,
            group + 4096, chunk + CHUNK, q + 70000, q + 3 * CHUNK, r->count};
        /* The far limits cost the reference a long walk: ask them of some probes. */
        size_t nlimits = i % 4 == 0 ? KILN_ARRAY_LEN(limits) : KILN_ARRAY_LEN(limits) - 3;
        for (size_t j = 0; j < nlimits; j++)
            if (!ref_check_run_end(t, r, q, limits[j], masks[(i + j) % KILN_ARRAY_LEN(masks)]))
                return;
    }
    const uint64_t lo = p > 5000 ? p - 5000 : 0, hi = KILN_MIN(p + 5000, r->count - 1);
    const uint64_t windows[][2] = {{lo, hi}, {p, p}, {block, p}, {p, hi}, {lo, p}};
    for (size_t i = 0; i < KILN_ARRAY_LEN(windows); i++)
        for (size_t m = 0; m < KILN_ARRAY_LEN(masks); m++)
            if (!ref_check_describe(t, r, windows[i][0], windows[i][1], masks[m]))
                return;
}

/* Chunks 0, 1 and 3 read-write, chunk 2 absent. */
static struct kiln_pages *make_table(struct ref_pages *r)
{
    struct kiln_pages *t = NULL;
    r->count = 4 * (uint64_t)CHUNK;
    r->bytes = calloc(r->count, 1);
    if (kiln_pages_create(r->count, &t) < 0 || !r->bytes)
        return NULL;
    if (ref_store(t, r, 0, 2 * CHUNK - 1, RW) < 0 ||
        ref_store(t, r, 3 * CHUNK, 4 * CHUNK - 1, RW) < 0)
        return NULL;
    return t;
}

KT_CASE(one_page_at_every_edge)
{
    struct ref_pages r;
    struct kiln_pages *t = make_table(&r);
    KT_REQUIRE(t != NULL);
    KT_CHECK_EQ(kiln_pages_chunk_count(t), 3);
    KT_CHECK_OK(kiln_pages_verify(t));
    const uint64_t points[] = {
        0,             /* the first page of the table */
        5 * 64 + 31,   /* the middle of a marked block */
        3 * 512,       /* the start of a 512-page group (one summary word) */
        7 * 512 + 511, /* the end of one */
        5 * 4096,      /* the start of a level-2 group */
        32768,         /* the start of the second level-2 word */
        CHUNK - 1,     /* the last page of a chunk */
        CHUNK,         /* the first page of the next */
        2 * CHUNK - 1, /* the last page before an absent chunk */
        3 * CHUNK,     /* the first page after it */
        4 * CHUNK - 1, /* the last page of the table */
    };
    for (size_t i = 0; i < KILN_ARRAY_LEN(points); i++) {
        uint64_t p = points[i];
        check_around(t, &r, p);
        KT_CHECK_EQ(kiln_pages_summary(t, 1, p), RW);
        KT_CHECK_EQ(kiln_pages_summary(t, 2, p), RW);

        KT_REQUIRE_OK(ref_store(t, &r, p, p, RO));
        check_around(t, &r, p);
        KT_CHECK_EQ(kiln_pages_summary(t, 1, p), 0);
        KT_CHECK_EQ(kiln_pages_summary(t, 2, p), 0);
        /* The neighbouring block keeps its mark; the group's is gone. */
        uint64_t other = (p & 64) ? p - 64 : p + 64;
        KT_CHECK_EQ(kiln_pages_summary(t, 1, other), RW);
        KT_CHECK_EQ(kiln_pages_summary(t, 2, other), 0);
        KT_CHECK_OK(kiln_pages_verify(t));

        /* A second flag on the same page: masks see one change, not the other. */
        KT_REQUIRE_OK(ref_store(t, &r, p, p, RO | G));
        check_around(t, &r, p);

        KT_REQUIRE_OK(ref_store(t, &r, p, p, RW));
        check_around(t, &r, p);
        KT_CHECK_EQ(kiln_pages_summary(t, 1, p), RW);
        KT_CHECK_EQ(kiln_pages_summary(t, 2, p), RW);
        KT_CHECK_OK(kiln_pages_verify(t));
    }
    /* The absent chunk ends a run that is not 0 and reads as one run of 0. */
    KT_CHECK_EQ(kiln_pages_run_end(t, 100, r.count), 2 * CHUNK);
    KT_CHECK_EQ(kiln_pages_run_end(t, 2 * CHUNK, r.count), 3 * CHUNK);
    KT_CHECK_EQ(kiln_pages_chunk_count(t), 3);
    kiln_pages_destroy(t);
    free(r.bytes);
}

KT_CASE(runs_of_every_length)
{
    /* Runs that start and end at every offset of a block and of a summary
     * word, inside one marked region. */
    struct ref_pages r;
    struct kiln_pages *t = make_table(&r);
    KT_REQUIRE(t != NULL);
    const uint64_t base = CHUNK - 4096; /* the last group of chunk 0, then chunk 1 */
    for (uint64_t a = 0; a < 72; a += 7) {
        for (uint64_t len = 1; len < 1200; len = len * 3 + 1) {
            uint64_t first = base + 4096 - 600 + a, last = first + len - 1;
            KT_REQUIRE_OK(ref_store(t, &r, first, last, RO));
            for (uint64_t q = first - 70; q <= last + 70; q += 13)
                ref_check_run_end(t, &r, q, last + 5000, W);
            ref_check_describe(t, &r, first - 100, last + 100, W);
            KT_REQUIRE_OK(ref_store(t, &r, first, last, RW));
        }
    }
    KT_CHECK_OK(kiln_pages_verify(t));
    KT_CHECK_EQ(kiln_pages_summary(t, 2, base), RW);
    kiln_pages_destroy(t);
    free(r.bytes);
}

KT_CASE(decommit_clears_summaries)
{
    struct ref_pages r;
    struct kiln_pages *t = make_table(&r);
    KT_REQUIRE(t != NULL);
    /* Blocks 1 (in part) to 78 (in part), groups 0 and 1 are touched. */
    KT_REQUIRE_OK(ref_store(t, &r, 100, 5000, 0));
    KT_CHECK_EQ(kiln_pages_summary(t, 1, 0), RW);    /* block 0: untouched */
    KT_CHECK_EQ(kiln_pages_summary(t, 1, 64), 0);    /* part RW, part 0 */
    KT_CHECK_EQ(kiln_pages_summary(t, 1, 128), 0);   /* all 0: 0 is never a mark */
    KT_CHECK_EQ(kiln_pages_summary(t, 1, 4992), 0);  /* part 0, part RW */
    KT_CHECK_EQ(kiln_pages_summary(t, 1, 5056), RW); /* untouched */
    KT_CHECK_EQ(kiln_pages_summary(t, 2, 0), 0);
    KT_CHECK_EQ(kiln_pages_summary(t, 2, 4096), 0);
    KT_CHECK_EQ(kiln_pages_summary(t, 2, 8192), RW);
    check_around(t, &r, 100);
    check_around(t, &r, 5000);
    KT_CHECK_OK(kiln_pages_verify(t));

    /* A whole chunk decommitted: every summary of it is 0, and it stays allocated. */
    KT_REQUIRE_OK(ref_store(t, &r, CHUNK, 2 * CHUNK - 1, 0));
    for (uint64_t p = CHUNK; p < 2 * CHUNK; p += 64)
        KT_CHECK_EQ(kiln_pages_summary(t, 1, p), 0);
    for (uint64_t p = CHUNK; p < 2 * CHUNK; p += 4096)
        KT_CHECK_EQ(kiln_pages_summary(t, 2, p), 0);
    KT_CHECK_EQ(kiln_pages_run_end(t, CHUNK, r.count), 3 * CHUNK);
    KT_CHECK_EQ(kiln_pages_chunk_count(t), 3);
    check_around(t, &r, CHUNK);
    kiln_pages_destroy(t);
    free(r.bytes);
}

KT_CASE(zero_into_absent_chunks_allocates_nothing)
{
    struct kiln_pages *t;
    const uint64_t n = KILN_PAGES_MAX_PAGES; /* 1 TiB */
    KT_REQUIRE_OK(kiln_pages_create(n, &t));
    KT_CHECK_EQ(kiln_pages_chunk_count(t), 0);
    KT_CHECK_OK(kiln_pages_store(t, 0, n - 1, 0));
    KT_CHECK_OK(kiln_pages_store(t, 12345, 12345, 0));
    KT_CHECK_EQ(kiln_pages_chunk_count(t), 0);
    KT_CHECK_EQ(kiln_pages_run_end(t, 0, n), n);

    KT_CHECK_OK(kiln_pages_store(t, n - 1, n - 1, RW));
    KT_CHECK_EQ(kiln_pages_chunk_count(t), 1);
    KT_CHECK_EQ(kiln_pages_load(t, n - 1), RW);
    KT_CHECK_EQ(kiln_pages_run_end(t, 0, n), n - 1);
    KT_CHECK_EQ(kiln_pages_run_end(t, n - 1, n), n);
    /* 0 over present and absent chunks alike: only the present one is written. */
    KT_CHECK_OK(kiln_pages_store(t, 0, n - 1, 0));
    KT_CHECK_EQ(kiln_pages_chunk_count(t), 1);
    KT_CHECK_EQ(kiln_pages_load(t, n - 1), 0);
    KT_CHECK_EQ(kiln_pages_run_end(t, 0, n), n);
    /* A store from the last page of chunk 4 to the first of chunk 7
     * allocates exactly those four. */
    KT_CHECK_OK(kiln_pages_store(t, 5 * CHUNK - 1, 7 * CHUNK, C));
    KT_CHECK_EQ(kiln_pages_chunk_count(t), 5);
    KT_CHECK(kiln_pages_all(t, 5 * CHUNK - 1, 7 * CHUNK, C));
    KT_CHECK(!kiln_pages_all(t, 5 * CHUNK - 2, 7 * CHUNK, C));
    KT_CHECK_OK(kiln_pages_verify(t));
    kiln_pages_destroy(t);
}

static int stop_at_second(void *user, uint64_t first, uint64_t last, uint8_t value)
{
    int *calls = user;
    return ++*calls == 2 ? 42 : 0;
}

KT_CASE(arguments_and_generation)
{
    struct log_count logs = {0};
    kiln_log_set_sink(count_log, &logs);
    struct kiln_pages *t = (struct kiln_pages *)1;
    KT_CHECK_EQ(kiln_pages_create(0, &t), KILN_EINVAL);
    KT_CHECK(t == NULL);
    KT_CHECK_EQ(kiln_pages_create(KILN_PAGES_MAX_PAGES + 1, &t), KILN_EINVAL);
    KT_CHECK_EQ(logs.errors, 2);
    kiln_pages_destroy(NULL);

    KT_REQUIRE_OK(kiln_pages_create(1000, &t));
    KT_CHECK_EQ(kiln_pages_count(t), 1000);
    uint64_t g0 = kiln_pages_generation(t);
    KT_CHECK_EQ(kiln_pages_store(t, 10, 9, RW), KILN_EINVAL);
    KT_CHECK_EQ(kiln_pages_store(t, 10, 1000, RW), KILN_EINVAL);
    KT_CHECK_EQ(kiln_pages_generation(t), g0); /* a refused store changes nothing */
    KT_CHECK_EQ(kiln_pages_describe(t, 0, 1000, stop_at_second, NULL), KILN_EINVAL);
    KT_CHECK_EQ(logs.errors, 5);

    KT_CHECK_OK(kiln_pages_store(t, 10, 19, RW));
    KT_CHECK_EQ(kiln_pages_generation(t), g0 + 1);
    KT_CHECK_OK(kiln_pages_store(t, 500, 999, 0));
    KT_CHECK_EQ(kiln_pages_generation(t), g0 + 2);
    int calls = 0;
    KT_CHECK_EQ(kiln_pages_describe(t, 0, 999, stop_at_second, &calls), 42);
    KT_CHECK_EQ(calls, 2);
    /* Limits are cut to the table; an empty range answers its limit. */
    KT_CHECK_EQ(kiln_pages_load(t, 1000), 0);
    KT_CHECK_EQ(kiln_pages_run_end(t, 10, 5000), 20);
    KT_CHECK_EQ(kiln_pages_run_end(t, 20, 5000), 1000);
    KT_CHECK_EQ(kiln_pages_run_end(t, 30, 30), 30);
    KT_CHECK_EQ(kiln_pages_run_end(t, 2000, 3000), 1000);
    KT_CHECK_EQ(kiln_pages_mask_run_end(t, 5, 1000, 0), 1000);
    KT_CHECK_EQ(kiln_pages_summary(t, 3, 10), 0);
    KT_CHECK(!kiln_pages_all(t, 10, 1000, RW));
    KT_CHECK(kiln_pages_all(t, 10, 19, RW));
    KT_CHECK_EQ(logs.errors, 5);
    kiln_pages_destroy(t);
    kiln_log_set_sink(NULL, NULL);
}

KT_MAIN(KT_ENTRY(one_page_at_every_edge), KT_ENTRY(runs_of_every_length),
        KT_ENTRY(decommit_clears_summaries), KT_ENTRY(zero_into_absent_chunks_allocates_nothing),
        KT_ENTRY(arguments_and_generation))
