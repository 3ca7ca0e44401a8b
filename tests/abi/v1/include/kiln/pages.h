/*
 * kiln/pages.h - a guest page-state table whose run queries cost a handful
 * of loads.
 *
 * The table holds one opaque byte per 4 KiB guest page (the caller defines
 * the flags: committed, readable, writable, GPU-tracked, ...) over an address
 * range of up to 1 TiB. It is sparse: pages live in chunks of 64Ki pages that
 * are allocated on the first non-zero store into them; an absent chunk reads
 * as 0.
 *
 * Beside the pages every chunk keeps two summary levels: one byte per block
 * of 64 pages and one byte per group of 64 blocks (4096 pages, 16 MiB). A
 * summary byte holds the common value of everything below it when that value
 * is non-zero, else 0 ("they differ, or they are all 0"). Run queries skip
 * marked blocks and groups whole, eight summaries per 64-bit load, so a
 * uniform 150 MiB range costs a few dozen loads instead of thousands.
 *
 * Ranges. A range named by `first` and `last` includes both pages: [first,
 * last]. A range named by `page` and `limit` stops before `limit`: [page,
 * limit). Pages are indices (guest address >> 12), counted from 0.
 *
 * Threads. Any number of threads may store and query at once, without locks.
 * A query that overlaps a store in flight sees, page by page, the old or the
 * new value; once a store has returned (and no other store touching the same
 * 64-page blocks is in flight), every query that starts afterwards sees its
 * pages exactly, summaries included. docs/pages.md gives the argument.
 *
 * NULL arguments (0.2): a NULL table reads as one of no pages:
 * kiln_pages_count, _load, the run ends, _summary, _generation and
 * _chunk_count answer 0 and kiln_pages_all false; kiln_pages_create (NULL
 * out), _store, _verify and the describe calls (also for a NULL callback)
 * answer KILN_EINVAL.
 */
#ifndef KILN_PAGES_H
#define KILN_PAGES_H

#include "kiln/common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The size of a guest page: 4 KiB. */
#define KILN_PAGES_PAGE_SHIFT 12
/* Pages per level-1 summary byte (a block, 256 KiB). */
#define KILN_PAGES_BLOCK_PAGES 64u
/* Pages per level-2 summary byte (a group of 64 blocks, 16 MiB). */
#define KILN_PAGES_GROUP_PAGES 4096u
/* Pages per chunk (the unit of allocation, 256 MiB of guest space). */
#define KILN_PAGES_CHUNK_PAGES 65536u
/* The largest table: 1 TiB of 4 KiB pages. */
#define KILN_PAGES_MAX_PAGES ((uint64_t)1 << 28)

/* A page-state table. Create with kiln_pages_create. */
struct kiln_pages;

/*
 * How a run query reads the table. kiln_pages_run_end always uses
 * KILN_PAGES_SCAN_SUMMARY2; the others exist so that tests can check that
 * every way gives the same answer and `kiln bench pages` can compare them.
 */
enum kiln_pages_scan {
    KILN_PAGES_SCAN_BYTES = 0,    /* pages only, eight per 64-bit load */
    KILN_PAGES_SCAN_SUMMARY1 = 1, /* also skip marked 64-page blocks */
    KILN_PAGES_SCAN_SUMMARY2 = 2, /* also skip marked 4096-page groups */
};

/*
 * Receives one run of a describe call: the pages [first, last] and their
 * common value (for kiln_pages_describe_masked, the value under the mask).
 * @return 0 to go on; any other value stops the walk, and the describe call
 * returns it.
 */
typedef int (*kiln_pages_run_fn)(void *user, uint64_t first, uint64_t last, uint8_t value);

/*
 * Makes an empty table of `page_count` pages (1 .. KILN_PAGES_MAX_PAGES), all
 * 0. Only the chunk directory is allocated (8 bytes per 64Ki pages).
 * @return 0, KILN_EINVAL for a count out of range, or KILN_ENOMEM. On success
 * *out must be freed with kiln_pages_destroy. Thread-safe.
 */
KILN_API int kiln_pages_create(uint64_t page_count, struct kiln_pages **out);

/*
 * Frees the table and every chunk. NULL is a no-op.
 * Thread safety: no other thread may use the table during or after the
 * call.
 */
KILN_API void kiln_pages_destroy(struct kiln_pages *t);

/* @return the number of pages the table covers. Thread-safe. */
KILN_API uint64_t kiln_pages_count(const struct kiln_pages *t);

/*
 * Sets pages [first, last] to `value`, then settles the summaries of every
 * block and group it touched, and bumps the generation. Storing 0 into an
 * absent chunk allocates nothing; a non-zero store allocates the chunks it
 * needs (they stay until kiln_pages_destroy).
 * @return 0; KILN_EINVAL (logged) when first > last or last is outside the
 * table; KILN_ENOMEM (logged) when a chunk could not be allocated: the
 * chunks before it were stored and settled, the rest untouched.
 * Thread-safe and lock-free against stores and queries.
 */
KILN_API int kiln_pages_store(struct kiln_pages *t, uint64_t first, uint64_t last, uint8_t value);

/*
 * @return the value of one page; 0 for a page in an absent chunk or outside
 * the table. Thread-safe.
 */
KILN_API uint8_t kiln_pages_load(const struct kiln_pages *t, uint64_t page);

/*
 * @return the first page in [page, limit) whose value differs from the value
 * of `page`, or `limit` when there is none. `limit` is cut to the table's
 * size; when page >= limit the result is limit. An absent chunk reads as 0:
 * it ends a non-zero run and continues a run of 0. Thread-safe.
 */
KILN_API uint64_t kiln_pages_run_end(const struct kiln_pages *t, uint64_t page, uint64_t limit);

/*
 * kiln_pages_run_end, reading the table the way `scan` says. Every way gives
 * the same answer; only the cost differs. Thread-safe.
 */
KILN_API uint64_t kiln_pages_run_end_using(const struct kiln_pages *t, uint64_t page,
                                           uint64_t limit, enum kiln_pages_scan scan);

/*
 * @return the first page in [page, limit) for which (value & mask) differs
 * from (value of `page` & mask), or `limit`. The mask form of run_end: with
 * mask = READ it finds where readability changes, whatever the other flags
 * do. Same limits as kiln_pages_run_end. Thread-safe.
 */
KILN_API uint64_t kiln_pages_mask_run_end(const struct kiln_pages *t, uint64_t page, uint64_t limit,
                                          uint8_t mask);

/*
 * Calls `fn` for every run of equal pages in [first, last], in order, with
 * its value. Runs are maximal when no store is in flight; a walk that
 * overlaps stores shows each page with its old or its new value, and each
 * boundary it reports was seen in one load.
 * @return 0, the first non-zero value `fn` returned (the walk stops there),
 * or KILN_EINVAL (logged) when first > last or last is outside the table.
 * Thread-safe; `fn` may store into the table.
 */
KILN_API int kiln_pages_describe(const struct kiln_pages *t, uint64_t first, uint64_t last,
                                 kiln_pages_run_fn fn, void *user);

/*
 * kiln_pages_describe over (value & mask): every run of pages in [first,
 * last] whose values agree under the mask, with that masked value.
 * Same return and thread safety as kiln_pages_describe.
 */
KILN_API int kiln_pages_describe_masked(const struct kiln_pages *t, uint64_t first, uint64_t last,
                                        uint8_t mask, kiln_pages_run_fn fn, void *user);

/*
 * Calls `fn` for every maximal range in [first, last] whose pages have every
 * bit of `mask` set (mask != 0), with `mask` as the value: "the committed
 * ranges", "the readable and writable ranges" of a span.
 * Same return and thread safety as kiln_pages_describe.
 */
KILN_API int kiln_pages_ranges(const struct kiln_pages *t, uint64_t first, uint64_t last,
                               uint8_t mask, kiln_pages_run_fn fn, void *user);

/*
 * @return whether every page in [first, last] has every bit of `mask` set
 * (for example: is the whole range committed and readable). false when the
 * range is empty or outside the table. Thread-safe.
 */
KILN_API bool kiln_pages_all(const struct kiln_pages *t, uint64_t first, uint64_t last,
                             uint8_t mask);

/*
 * @return a counter that every store bumps after it has settled. A caller
 * may cache what it learned about a range together with the generation it
 * read before asking, and reuse it while the generation is unchanged:
 *
 *     uint64_t g = kiln_pages_generation(t);
 *     if (memo->generation != g) {
 *         recompute(memo);          (describe, run_end, ...)
 *         memo->generation = g;
 *     }
 *
 * A store in flight while the memo was computed bumps the counter when it
 * ends, so such a memo is never reused afterwards. Thread-safe.
 */
KILN_API uint64_t kiln_pages_generation(const struct kiln_pages *t);

/* @return how many chunks are allocated. Thread-safe. */
KILN_API uint64_t kiln_pages_chunk_count(const struct kiln_pages *t);

/*
 * @return the summary byte of `level` (1: the 64-page block, 2: the
 * 4096-page group) that covers `page`; 0 for an absent chunk, a page outside
 * the table or another level. For tests and diagnostics. Thread-safe.
 */
KILN_API uint8_t kiln_pages_summary(const struct kiln_pages *t, unsigned level, uint64_t page);

/*
 * Checks that every non-zero summary agrees with everything below it. For
 * tests and diagnostics.
 * @return 0, or KILN_ECORRUPT with one logged line naming the first summary
 * that disagrees.
 * Thread safety: any thread, beside queries, but not while a store is in
 * flight (a summary being settled would be reported).
 */
KILN_API int kiln_pages_verify(const struct kiln_pages *t);

#ifdef __cplusplus
}
#endif

#endif /* KILN_PAGES_H */
