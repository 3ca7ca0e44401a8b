/*
 * pages.c - the guest page-state table: one byte per page, two summary
 * levels, no locks.
 *
 * LAYOUT
 * A directory holds one chunk pointer per 64Ki pages. A chunk is allocated
 * on the first non-zero store into it and published with a compare-and-swap
 * (the loser of a race frees its copy); it stays until destroy, so a reader
 * may use a pointer it loaded for as long as it likes. A chunk holds its
 * pages and the summaries of its own pages, so no summary spans two chunks:
 * level 1, one byte per block of 64 pages; level 2, one byte per group of 64
 * blocks. A summary byte is the common value of the 64 bytes below it
 * (pages for level 1, level-1 bytes for level 2) when that value is non-zero,
 * else 0. A 0 summary only means "look below": a missing mark costs time,
 * never a wrong answer. Only a stale mark is a bug.
 *
 * ATOMICITY
 * Pages and summaries are arrays of _Atomic uint64_t, byte i of word w at
 * bits 8i..8i+7. Readers load whole words (relaxed), so "eight pages per
 * load" is a single atomic load and the code is data-race-free in the C11
 * model. A writer changes bytes with a compare-and-swap on their word that
 * keeps the other bytes as it found them; words a store covers whole are
 * stored outright. Byte-sized atomics on the same memory would be cheaper to
 * write, but mixing access sizes is outside the C11 model, and a fetch-and
 * followed by a fetch-or would show a 0 that no store asked for.
 *
 * THE PROTOCOL
 * A store does, for each chunk it touches:
 *   1. write its pages;
 *   2. a seq_cst fence, F1;
 *   3. settle level 1: for each block it touched, read the 64 pages and set
 *      the block's byte to their common value ("mark") or to 0 ("clear");
 *      then, if it marked any, a seq_cst fence, a re-read of each marked
 *      block, and a take-back (compare-and-swap mark -> 0) of every mark
 *      whose pages no longer agree;
 *   4. a seq_cst fence, F2;
 *   5. settle level 2 the same way, over the level-1 bytes of each group it
 *      touched.
 * Then it bumps the generation. A reader skips blocks by their level-1
 * bytes and groups by their level-2 bytes, and reads pages where neither
 * lets it skip; a non-zero byte whose value matches lets it skip all below.
 *
 * WHY A STALE MARK CANNOT OUTLIVE A CHANGE (level 1)
 * Suppose every store touching block b has returned, b's byte holds m != 0
 * and a page p of b holds x != m. Let A be the write that put m there (the
 * last write of that byte), made by store M in step 3 and followed by M's
 * fence F and re-read; M did not take A back, so its re-read saw m in every
 * page. Let X be the last write of page p (value x), made by store S in
 * step 1 and followed by S's F1. Seq_cst fences are totally ordered:
 *  - F1 of S before F of M: M's re-read of p comes after F, so it sees X or
 *    a later write of p (C11 7.17.4: a write before one fence is seen by a
 *    read after a later fence). X is the last, so M saw x != m and took the
 *    mark back: a write of the byte after A. Contradiction.
 *  - F of M before F1 of S: S's settle of b comes after F1, so it sees A or
 *    a later write of the byte, and it reads page p after its own X, so the
 *    value it computes is not m: it writes that value over A. Contradiction.
 * Hence once the stores that touched a block have returned, its byte is 0 or
 * the value of all its pages. A store that finds the byte already equal to
 * what it computed skips the write: the argument above never needs it.
 *
 * WHY A STALE MARK CANNOT OUTLIVE A CHANGE (level 2)
 * The same argument one level up: read "level-1 byte" for "page", "step 3"
 * for "step 1" and F2 for F1. Every write of a level-1 byte (mark, clear,
 * take-back) is made in step 3 of some store, before that store's F2, and is
 * followed by its step-5 settle of the group. So once the stores have
 * returned, a non-zero group byte equals all 64 level-1 bytes below it, and
 * each of those equals all 64 pages below it.
 *
 * WHAT READERS SEE
 * A reader that starts after a store returned (happens-after it) reads the
 * last writes of every byte it loads (coherence), so it sees the settled
 * state. A reader that overlaps a store may still see a mark that the store
 * is about to clear; that mark describes the block as it was, so the reader
 * sees the old or the new state, never one that did not exist.
 *
 * THE NEGATIVE CONTROL
 * Built with KILN_PAGES_TEST_SKIP_SETTLE=1 (tests only), a store settles only
 * the blocks and groups it covers whole and skips the settle of those it
 * covers in part: the shortcut that leaves a stale mark. The stress test
 * must fail against that build.
 */
#include "kiln/pages.h"
#include "kiln_internal.h"
#include "pages_os.h"

#include <stdatomic.h>
#include <stdlib.h>

#ifndef KILN_PAGES_TEST_SKIP_SETTLE
#define KILN_PAGES_TEST_SKIP_SETTLE 0
#endif

/* Zeroed memory from the OS is taken as atomic words holding 0: that needs
 * lock-free 64-bit atomics, which have the plain integer's representation. */
_Static_assert(ATOMIC_LLONG_LOCK_FREE == 2, "kiln pages needs lock-free 64-bit atomics");

#define CHUNK_SHIFT 16
#define GROUP_SHIFT 12
#define BLOCK_SHIFT 6
#define CHUNK_MASK  (KILN_PAGES_CHUNK_PAGES - 1u)
#define PAGE_WORDS  (KILN_PAGES_CHUNK_PAGES / 8u)
#define SUM1_BYTES  (KILN_PAGES_CHUNK_PAGES / KILN_PAGES_BLOCK_PAGES)
#define SUM2_BYTES  (KILN_PAGES_CHUNK_PAGES / KILN_PAGES_GROUP_PAGES)

#define ONES  0x0101010101010101ull
#define HIGHS 0x8080808080808080ull

_Static_assert(1u << CHUNK_SHIFT == KILN_PAGES_CHUNK_PAGES, "chunk size");
_Static_assert(1u << GROUP_SHIFT == KILN_PAGES_GROUP_PAGES, "group size");
_Static_assert(1u << BLOCK_SHIFT == KILN_PAGES_BLOCK_PAGES, "block size");

struct chunk {
    _Atomic uint64_t pages[PAGE_WORDS];
    _Atomic uint64_t sum1[SUM1_BYTES / 8]; /* one byte per block */
    _Atomic uint64_t sum2[SUM2_BYTES / 8]; /* one byte per group */
};

struct kiln_pages {
    uint64_t page_count;
    size_t slots;
    _Atomic(struct chunk *) *dir;
    _Atomic uint64_t chunks;
    /* Every store bumps the generation; keep it off the line readers use. */
    char pad0[64];
    _Atomic uint64_t generation;
    char pad1[64];
};

static inline unsigned first_byte(uint64_t high_bits)
{
#if defined(__GNUC__)
    return (unsigned)__builtin_ctzll(high_bits) >> 3;
#else
    unsigned n = 0;
    while (!(high_bits & 0xFF)) {
        high_bits >>= 8;
        n++;
    }
    return n;
#endif
}

/* 0x80 in each byte of y that is not zero, 0 elsewhere (no carries cross bytes). */
static inline uint64_t nonzero_bytes(uint64_t y)
{
    return (((y & ~HIGHS) + ~HIGHS) | y) & HIGHS;
}

static inline uint64_t load_word(const _Atomic uint64_t *w)
{
    return atomic_load_explicit((_Atomic uint64_t *)w, memory_order_relaxed);
}

static inline uint8_t load_byte(const _Atomic uint64_t *arr, size_t i)
{
    return (uint8_t)(load_word(&arr[i >> 3]) >> ((i & 7) * 8));
}

/* Sets the bytes of *w selected by `mask` to those of v8, keeping the others. */
static void store_bytes(_Atomic uint64_t *w, uint64_t mask, uint64_t v8)
{
    uint64_t old = atomic_load_explicit(w, memory_order_relaxed);
    uint64_t want;
    do {
        want = (old & ~mask) | (v8 & mask);
        if (want == old)
            return;
    } while (!atomic_compare_exchange_weak_explicit(w, &old, want, memory_order_relaxed,
                                                    memory_order_relaxed));
}

static void store_byte(_Atomic uint64_t *arr, size_t i, uint8_t v)
{
    store_bytes(&arr[i >> 3], 0xFFull << ((i & 7) * 8), ONES * v);
}

/* Takes a mark back: sets byte i to 0 only while it still holds `mark`. */
static void take_back(_Atomic uint64_t *arr, size_t i, uint8_t mark)
{
    _Atomic uint64_t *w = &arr[i >> 3];
    unsigned shift = (unsigned)(i & 7) * 8;
    uint64_t old = atomic_load_explicit(w, memory_order_relaxed);
    do {
        if ((uint8_t)(old >> shift) != mark)
            return; /* a later write already replaced the mark */
    } while (!atomic_compare_exchange_weak_explicit(w, &old, old & ~(0xFFull << shift),
                                                    memory_order_relaxed, memory_order_relaxed));
}

/* @return the common value of the 64 bytes in w[0..7] when it is non-zero, else 0. */
static uint8_t common_value(const _Atomic uint64_t *w)
{
    uint64_t first = load_word(&w[0]);
    uint8_t v = (uint8_t)first;
    uint64_t v8 = ONES * v;
    if (v == 0 || first != v8)
        return 0;
    for (int i = 1; i < 8; i++)
        if (load_word(&w[i]) != v8)
            return 0;
    return v;
}

static inline struct chunk *chunk_at(const struct kiln_pages *t, uint64_t c)
{
    return atomic_load_explicit(&t->dir[c], memory_order_acquire);
}

static int chunk_make(struct kiln_pages *t, uint64_t c, struct chunk **out)
{
    struct chunk *fresh = kiln__pages_os_alloc(sizeof(struct chunk));
    if (!fresh) {
        KILN_ERROR("pages", "allocating the chunk of pages %llu..%llu (%zu bytes) failed",
                   (unsigned long long)(c << CHUNK_SHIFT),
                   (unsigned long long)(((c + 1) << CHUNK_SHIFT) - 1), sizeof(struct chunk));
        return KILN_ENOMEM;
    }
    struct chunk *seen = NULL;
    if (atomic_compare_exchange_strong_explicit(&t->dir[c], &seen, fresh, memory_order_acq_rel,
                                                memory_order_acquire)) {
        atomic_fetch_add_explicit(&t->chunks, 1, memory_order_relaxed);
        *out = fresh;
    } else {
        kiln__pages_os_free(fresh, sizeof(struct chunk));
        *out = seen;
    }
    return 0;
}

/* Step 1: pages [lo, hi] of the chunk (inclusive offsets) become v. */
static void write_pages(struct chunk *ch, uint32_t lo, uint32_t hi, uint8_t v)
{
    uint64_t v8 = ONES * v;
    uint32_t wlo = lo >> 3, whi = hi >> 3;
    uint64_t mlo = ~0ull << ((lo & 7) * 8);
    uint64_t mhi = ~0ull >> ((7 - (hi & 7)) * 8);
    if (wlo == whi) {
        store_bytes(&ch->pages[wlo], mlo & mhi, v8);
        return;
    }
    store_bytes(&ch->pages[wlo], mlo, v8);
    for (uint32_t w = wlo + 1; w < whi; w++)
        atomic_store_explicit(&ch->pages[w], v8, memory_order_relaxed);
    store_bytes(&ch->pages[whi], mhi, v8);
}

/*
 * Settles one summary level for the units [ulo, uhi] of a chunk: `sum` holds
 * one byte per unit, `below` the 64 bytes (8 words) under each unit. The
 * caller has fenced after writing `below`. Units the store [lo, hi] covers
 * only in part are skipped in the negative-control build.
 */
static void settle_level(_Atomic uint64_t *sum, const _Atomic uint64_t *below, uint32_t ulo,
                         uint32_t uhi, unsigned unit_shift, uint32_t lo, uint32_t hi)
{
    uint8_t marked[SUM1_BYTES];
    bool any = false;
    for (uint32_t u = ulo; u <= uhi; u++) {
        marked[u - ulo] = 0;
        if (KILN_PAGES_TEST_SKIP_SETTLE) {
            uint32_t first = u << unit_shift, last = ((u + 1) << unit_shift) - 1;
            if (lo > first || hi < last)
                continue;
        }
        uint8_t v = common_value(&below[(size_t)u * 8]);
        store_byte(sum, u, v);
        marked[u - ulo] = v;
        any |= v != 0;
    }
    if (!any)
        return;
    /* The marks are written; now re-read what is below them. A store that
     * wrote below before this fence has its own settle coming after it. */
    atomic_thread_fence(memory_order_seq_cst);
    for (uint32_t u = ulo; u <= uhi; u++) {
        uint8_t m = marked[u - ulo];
        if (m && common_value(&below[(size_t)u * 8]) != m)
            take_back(sum, u, m);
    }
}

int kiln_pages_create(uint64_t page_count, struct kiln_pages **out)
{
    if (!out)
        return KILN_EINVAL;
    *out = NULL;
    if (page_count == 0 || page_count > KILN_PAGES_MAX_PAGES) {
        KILN_ERROR("pages", "creating a table of %llu pages: the count must be 1..%llu",
                   (unsigned long long)page_count, (unsigned long long)KILN_PAGES_MAX_PAGES);
        return KILN_EINVAL;
    }
    struct kiln_pages *t = kiln__calloc(1, sizeof(*t));
    size_t slots = (size_t)((page_count + CHUNK_MASK) >> CHUNK_SHIFT);
    if (t)
        t->dir = kiln__malloc(slots * sizeof(*t->dir));
    if (!t || !t->dir) {
        KILN_ERROR("pages", "allocating the directory of a %llu-page table failed",
                   (unsigned long long)page_count);
        kiln__free(t);
        return KILN_ENOMEM;
    }
    t->page_count = page_count;
    t->slots = slots;
    for (size_t i = 0; i < slots; i++)
        atomic_init(&t->dir[i], NULL);
    atomic_init(&t->chunks, 0);
    atomic_init(&t->generation, 0);
    *out = t;
    return 0;
}

void kiln_pages_destroy(struct kiln_pages *t)
{
    if (!t)
        return;
    for (size_t i = 0; i < t->slots; i++)
        kiln__pages_os_free(atomic_load_explicit(&t->dir[i], memory_order_relaxed),
                            sizeof(struct chunk));
    kiln__free(t->dir);
    kiln__free(t);
}

uint64_t kiln_pages_count(const struct kiln_pages *t)
{
    if (!t)
        return 0;
    return t->page_count;
}

int kiln_pages_store(struct kiln_pages *t, uint64_t first, uint64_t last, uint8_t value)
{
    if (!t)
        return KILN_EINVAL;
    if (first > last || last >= t->page_count) {
        KILN_ERROR("pages", "store of pages %llu..%llu: outside the table of %llu pages",
                   (unsigned long long)first, (unsigned long long)last,
                   (unsigned long long)t->page_count);
        return KILN_EINVAL;
    }
    int rc = 0;
    for (uint64_t c = first >> CHUNK_SHIFT; c <= last >> CHUNK_SHIFT; c++) {
        uint32_t lo = c == first >> CHUNK_SHIFT ? (uint32_t)(first & CHUNK_MASK) : 0;
        uint32_t hi = c == last >> CHUNK_SHIFT ? (uint32_t)(last & CHUNK_MASK) : CHUNK_MASK;
        struct chunk *ch = chunk_at(t, c);
        if (!ch) {
            if (value == 0)
                continue; /* an absent chunk reads as 0 already */
            rc = chunk_make(t, c, &ch);
            if (rc < 0)
                break;
        }
        write_pages(ch, lo, hi, value);
        atomic_thread_fence(memory_order_seq_cst); /* F1 */
        settle_level(ch->sum1, ch->pages, lo >> BLOCK_SHIFT, hi >> BLOCK_SHIFT, BLOCK_SHIFT, lo,
                     hi);
        atomic_thread_fence(memory_order_seq_cst); /* F2 */
        settle_level(ch->sum2, ch->sum1, lo >> GROUP_SHIFT, hi >> GROUP_SHIFT, GROUP_SHIFT, lo, hi);
    }
    atomic_fetch_add_explicit(&t->generation, 1, memory_order_seq_cst);
    return rc;
}

uint8_t kiln_pages_load(const struct kiln_pages *t, uint64_t page)
{
    if (!t)
        return 0;
    if (page >= t->page_count)
        return 0;
    const struct chunk *ch = chunk_at(t, page >> CHUNK_SHIFT);
    return ch ? load_byte(ch->pages, page & CHUNK_MASK) : 0;
}

/*
 * Skipping by one summary level from unit i: @return the first unit at or
 * after i, within i's word, whose byte is not a usable mark (0, or a value
 * whose masked bits differ from the reference), or the unit after that word.
 */
static inline uint32_t skip_marked(const _Atomic uint64_t *sum, uint32_t i, uint64_t m8,
                                   uint64_t r8)
{
    uint64_t w = load_word(&sum[i >> 3]);
    uint64_t bad = nonzero_bytes((w & m8) ^ r8) | (~nonzero_bytes(w) & HIGHS);
    bad &= ~0ull << ((i & 7) * 8);
    return bad ? (i & ~7u) + first_byte(bad) : (i | 7u) + 1;
}

/*
 * @return the first page offset in [o, end) whose masked value differs, else
 * end; *seen gets the value that page had in the load that found it.
 */
static inline uint32_t scan_pages(const _Atomic uint64_t *pages, uint32_t o, uint32_t end,
                                  uint64_t m8, uint64_t r8, uint8_t *seen)
{
    uint32_t w = o >> 3;
    uint64_t word = load_word(&pages[w]);
    uint64_t bad = nonzero_bytes((word & m8) ^ r8) & (~0ull << ((o & 7) * 8));
    for (;;) {
        if (bad) {
            unsigned i = first_byte(bad);
            *seen = (uint8_t)(word >> (i * 8));
            return w * 8 + i < end ? w * 8 + i : end;
        }
        if (++w * 8 >= end)
            return end;
        word = load_word(&pages[w]);
        bad = nonzero_bytes((word & m8) ^ r8);
    }
}

/*
 * The scan within one chunk: offsets [o, end), end <= 65536. It climbs to
 * level 2 only when level 1 let it skip to the start of a group: short runs,
 * the common case in mixed memory, rarely pay for a level-2 load, while a
 * uniform range pays at most eight level-1 loads to reach a group edge and
 * then skips up to 32768 pages per level-2 load.
 */
static uint32_t scan_chunk(const struct chunk *ch, uint32_t o, uint32_t end, uint64_t m8,
                           uint64_t r8, unsigned levels, uint8_t *seen)
{
    while (o < end) {
        uint32_t bend = end;
        if (levels >= 1) {
            uint32_t b = o >> BLOCK_SHIFT;
            uint32_t stop = skip_marked(ch->sum1, b, m8, r8);
            if (stop > b) {
                o = stop << BLOCK_SHIFT;
                while (levels >= 2 && (o & (KILN_PAGES_GROUP_PAGES - 1)) == 0 && o < end) {
                    uint32_t g = o >> GROUP_SHIFT;
                    uint32_t gstop = skip_marked(ch->sum2, g, m8, r8);
                    if (gstop == g)
                        break;
                    o = gstop << GROUP_SHIFT;
                }
                continue;
            }
            bend = KILN_MIN((b + 1) << BLOCK_SHIFT, end);
        }
        uint32_t at = scan_pages(ch->pages, o, bend, m8, r8, seen);
        if (at < bend)
            return at;
        o = bend;
    }
    return end;
}

/*
 * The one run query everything uses: the first page in (page, limit) whose
 * value under `mask` differs from `ref`, the masked value of `page`, or
 * limit (page < limit <= page_count). *next gets the masked value of the
 * page it stopped at, as the load that stopped it saw it, so a walk goes on
 * from what it saw: every boundary it reports was there in one load.
 */
static uint64_t scan_from(const struct kiln_pages *t, uint64_t page, uint64_t limit, uint8_t mask,
                          uint8_t ref, unsigned levels, uint8_t *next)
{
    uint64_t m8 = ONES * mask, r8 = ONES * ref;
    uint64_t p = page + 1;
    while (p < limit) {
        uint64_t c = p >> CHUNK_SHIFT;
        uint64_t base = c << CHUNK_SHIFT;
        uint64_t cend = KILN_MIN(base + KILN_PAGES_CHUNK_PAGES, limit);
        const struct chunk *ch = chunk_at(t, c);
        if (!ch) {
            if (ref != 0) {
                *next = 0; /* an absent chunk reads as 0 */
                return p;
            }
            p = cend;
            continue;
        }
        uint8_t seen = 0;
        p = base +
            scan_chunk(ch, (uint32_t)(p - base), (uint32_t)(cend - base), m8, r8, levels, &seen);
        if (p < cend) {
            *next = (uint8_t)(seen & mask);
            return p;
        }
    }
    return limit;
}

static uint64_t run_end(const struct kiln_pages *t, uint64_t page, uint64_t limit, uint8_t mask,
                        unsigned levels)
{
    if (!t)
        return 0; /* NULL reads as a table of no pages (include/kiln/pages.h) */
    if (limit > t->page_count)
        limit = t->page_count;
    if (page >= limit)
        return limit;
    uint8_t next;
    return scan_from(t, page, limit, mask, (uint8_t)(kiln_pages_load(t, page) & mask), levels,
                     &next);
}

uint64_t kiln_pages_run_end_using(const struct kiln_pages *t, uint64_t page, uint64_t limit,
                                  enum kiln_pages_scan how)
{
    return run_end(t, page, limit, 0xFF, (unsigned)how > 2 ? 2 : (unsigned)how);
}

uint64_t kiln_pages_run_end(const struct kiln_pages *t, uint64_t page, uint64_t limit)
{
    return run_end(t, page, limit, 0xFF, 2);
}

uint64_t kiln_pages_mask_run_end(const struct kiln_pages *t, uint64_t page, uint64_t limit,
                                 uint8_t mask)
{
    return run_end(t, page, limit, mask, 2);
}

/* Walks [first, last] by runs of equal masked value; with `only` set, reports
 * only the runs whose masked value is the whole mask. */
static int walk(const struct kiln_pages *t, const char *what, uint64_t first, uint64_t last,
                uint8_t mask, bool only, kiln_pages_run_fn fn, void *user)
{
    if (!t || !fn)
        return KILN_EINVAL;
    if (first > last || last >= t->page_count) {
        KILN_ERROR("pages", "%s of pages %llu..%llu: outside the table of %llu pages", what,
                   (unsigned long long)first, (unsigned long long)last,
                   (unsigned long long)t->page_count);
        return KILN_EINVAL;
    }
    uint8_t v = (uint8_t)(kiln_pages_load(t, first) & mask);
    for (uint64_t p = first; p <= last;) {
        uint8_t next = 0;
        uint64_t end = scan_from(t, p, last + 1, mask, v, 2, &next);
        if (!only || v == mask) {
            int rc = fn(user, p, end - 1, v);
            if (rc)
                return rc;
        }
        p = end;
        v = next;
    }
    return 0;
}

int kiln_pages_describe(const struct kiln_pages *t, uint64_t first, uint64_t last,
                        kiln_pages_run_fn fn, void *user)
{
    return walk(t, "describe", first, last, 0xFF, false, fn, user);
}

int kiln_pages_describe_masked(const struct kiln_pages *t, uint64_t first, uint64_t last,
                               uint8_t mask, kiln_pages_run_fn fn, void *user)
{
    return walk(t, "masked describe", first, last, mask, false, fn, user);
}

int kiln_pages_ranges(const struct kiln_pages *t, uint64_t first, uint64_t last, uint8_t mask,
                      kiln_pages_run_fn fn, void *user)
{
    return walk(t, "ranges", first, last, mask, true, fn, user);
}

bool kiln_pages_all(const struct kiln_pages *t, uint64_t first, uint64_t last, uint8_t mask)
{
    if (!t)
        return false;
    if (first > last || last >= t->page_count)
        return false;
    uint8_t next;
    return (kiln_pages_load(t, first) & mask) == mask &&
           scan_from(t, first, last + 1, mask, mask, 2, &next) > last;
}

uint64_t kiln_pages_generation(const struct kiln_pages *t)
{
    if (!t)
        return 0;
    return atomic_load_explicit((_Atomic uint64_t *)&t->generation, memory_order_acquire);
}

uint64_t kiln_pages_chunk_count(const struct kiln_pages *t)
{
    if (!t)
        return 0;
    return atomic_load_explicit((_Atomic uint64_t *)&t->chunks, memory_order_relaxed);
}

uint8_t kiln_pages_summary(const struct kiln_pages *t, unsigned level, uint64_t page)
{
    if (!t)
        return 0;
    if (page >= t->page_count || level < 1 || level > 2)
        return 0;
    const struct chunk *ch = chunk_at(t, page >> CHUNK_SHIFT);
    if (!ch)
        return 0;
    uint32_t o = (uint32_t)(page & CHUNK_MASK);
    return level == 1 ? load_byte(ch->sum1, o >> BLOCK_SHIFT)
                      : load_byte(ch->sum2, o >> GROUP_SHIFT);
}

int kiln_pages_verify(const struct kiln_pages *t)
{
    if (!t)
        return KILN_EINVAL;
    for (size_t c = 0; c < t->slots; c++) {
        const struct chunk *ch = chunk_at(t, c);
        if (!ch)
            continue;
        uint64_t base = (uint64_t)c << CHUNK_SHIFT;
        for (uint32_t b = 0; b < SUM1_BYTES; b++) {
            uint8_t s = load_byte(ch->sum1, b);
            for (uint32_t i = 0; s && i < KILN_PAGES_BLOCK_PAGES; i++) {
                uint32_t o = (b << BLOCK_SHIFT) + i;
                uint8_t v = load_byte(ch->pages, o);
                if (v != s) {
                    KILN_ERROR("pages",
                               "level-1 summary of pages %llu..%llu says 0x%02x but "
                               "page %llu holds 0x%02x",
                               (unsigned long long)(base + (b << BLOCK_SHIFT)),
                               (unsigned long long)(base + (b << BLOCK_SHIFT) + 63), s,
                               (unsigned long long)(base + o), v);
                    return KILN_ECORRUPT;
                }
            }
        }
        for (uint32_t g = 0; g < SUM2_BYTES; g++) {
            uint8_t s = load_byte(ch->sum2, g);
            for (uint32_t i = 0; s && i < KILN_PAGES_GROUP_PAGES / KILN_PAGES_BLOCK_PAGES; i++) {
                uint32_t b = g * 64 + i;
                uint8_t v = load_byte(ch->sum1, b);
                if (v != s) {
                    KILN_ERROR("pages",
                               "level-2 summary of pages %llu..%llu says 0x%02x but "
                               "the block at page %llu is summarised as 0x%02x",
                               (unsigned long long)(base + ((uint64_t)g << GROUP_SHIFT)),
                               (unsigned long long)(base + ((uint64_t)(g + 1) << GROUP_SHIFT) - 1),
                               s, (unsigned long long)(base + ((uint64_t)b << BLOCK_SHIFT)), v);
                    return KILN_ECORRUPT;
                }
            }
        }
    }
    return 0;
}
