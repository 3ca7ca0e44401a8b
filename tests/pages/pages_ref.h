/*
 * pages_ref.h - a plain byte array as the reference a page table must match,
 * and the checks that compare the two.
 *
 * The reference is the obvious implementation: one byte per page, queries
 * answered by looking at every byte. Every check asks the table the same
 * question every way it can (three scan levels, masks, describe) and
 * compares each answer with the reference's.
 */
#ifndef KILN_PAGES_REF_H
#define KILN_PAGES_REF_H

#include "kiln_test.h"
#include "kiln_internal.h"

struct ref_pages {
    uint8_t *bytes;
    uint64_t count;
};

static inline uint64_t ref_run_end(const struct ref_pages *r, uint64_t page, uint64_t limit,
                                   uint8_t mask)
{
    if (limit > r->count)
        limit = r->count;
    if (page >= limit)
        return limit;
    uint8_t v = r->bytes[page] & mask;
    uint64_t p = page + 1;
    while (p < limit && (r->bytes[p] & mask) == v)
        p++;
    return p;
}

/* Compares one run query, every way, with the reference. @return whether all agree. */
static inline bool ref_check_run_end(const struct kiln_pages *t, const struct ref_pages *r,
                                     uint64_t page, uint64_t limit, uint8_t mask)
{
    uint64_t want = ref_run_end(r, page, limit, 0xFF);
    bool ok = true;
    for (int how = KILN_PAGES_SCAN_BYTES; how <= KILN_PAGES_SCAN_SUMMARY2; how++) {
        uint64_t got = kiln_pages_run_end_using(t, page, limit, (enum kiln_pages_scan)how);
        if (got != want) {
            kt_fail(__FILE__, __LINE__,
                    "run_end(%" PRIu64 ", %" PRIu64 ") scan %d: %" PRIu64 " != %" PRIu64, page,
                    limit, how, got, want);
            ok = false;
        }
    }
    uint64_t got = kiln_pages_run_end(t, page, limit);
    if (got != want) {
        kt_fail(__FILE__, __LINE__, "run_end(%" PRIu64 ", %" PRIu64 "): %" PRIu64 " != %" PRIu64,
                page, limit, got, want);
        ok = false;
    }
    want = ref_run_end(r, page, limit, mask);
    got = kiln_pages_mask_run_end(t, page, limit, mask);
    if (got != want) {
        kt_fail(__FILE__, __LINE__,
                "mask_run_end(%" PRIu64 ", %" PRIu64 ", 0x%02x): %" PRIu64 " != %" PRIu64, page,
                limit, mask, got, want);
        ok = false;
    }
    return ok;
}

struct ref_walk {
    const struct ref_pages *ref;
    uint64_t next; /* the page the next run must start at */
    uint8_t mask;
    bool only; /* kiln_pages_ranges: only runs with every mask bit set */
    uint64_t runs;
    bool ok;
};

static inline int ref_walk_run(void *user, uint64_t first, uint64_t last, uint8_t value)
{
    struct ref_walk *w = user;
    const struct ref_pages *r = w->ref;
    w->runs++;
    if (w->only) {
        /* Every page before this range must lack a bit of the mask. */
        for (uint64_t p = w->next; p < first; p++)
            if ((r->bytes[p] & w->mask) == w->mask)
                w->ok = false;
    } else if (first != w->next) {
        w->ok = false;
    }
    if (last < first || last >= r->count || (w->only && value != w->mask)) {
        w->ok = false;
        return 1;
    }
    for (uint64_t p = first; p <= last; p++)
        if ((r->bytes[p] & w->mask) != value)
            w->ok = false;
    /* Maximal: the page after the run must differ (or lie past the walk). */
    w->next = last + 1;
    return w->ok ? 0 : 1;
}

/* Compares describe, describe_masked, ranges and all over [first, last]. */
static inline bool ref_check_describe(const struct kiln_pages *t, const struct ref_pages *r,
                                      uint64_t first, uint64_t last, uint8_t mask)
{
    bool ok = true;
    for (int kind = 0; kind < 3; kind++) {
        struct ref_walk w = {r, first, kind == 0 ? 0xFF : mask, kind == 2, 0, true};
        int rc = kind == 0   ? kiln_pages_describe(t, first, last, ref_walk_run, &w)
                 : kind == 1 ? kiln_pages_describe_masked(t, first, last, mask, ref_walk_run, &w)
                             : kiln_pages_ranges(t, first, last, mask, ref_walk_run, &w);
        if (w.only) {
            for (uint64_t p = w.next; p <= last; p++)
                if ((r->bytes[p] & w.mask) == w.mask)
                    w.ok = false;
        } else if (w.ok && w.next != last + 1) {
            w.ok = false;
        }
        /* The number of runs must be the reference's: runs are maximal. */
        uint64_t want_runs = 0;
        for (uint64_t p = first; p <= last; p = ref_run_end(r, p, last + 1, w.mask))
            if (!w.only || (r->bytes[p] & w.mask) == w.mask)
                want_runs++;
        if (rc != 0 || !w.ok || w.runs != want_runs) {
            kt_fail(__FILE__, __LINE__,
                    "describe kind %d of %" PRIu64 "..%" PRIu64
                    " mask 0x%02x: rc %d, ok %d, runs %" PRIu64 " want %" PRIu64,
                    kind, first, last, w.mask, rc, w.ok, w.runs, want_runs);
            ok = false;
        }
    }
    bool want_all = true;
    for (uint64_t p = first; p <= last; p++)
        want_all &= (r->bytes[p] & mask) == mask;
    if (kiln_pages_all(t, first, last, mask) != want_all) {
        kt_fail(__FILE__, __LINE__, "all(%" PRIu64 "..%" PRIu64 ", 0x%02x) != %d", first, last,
                mask, want_all);
        ok = false;
    }
    return ok;
}

/* Stores into both. */
static inline int ref_store(struct kiln_pages *t, struct ref_pages *r, uint64_t first,
                            uint64_t last, uint8_t v)
{
    memset(r->bytes + first, v, last - first + 1);
    return kiln_pages_store(t, first, last, v);
}

#endif /* KILN_PAGES_REF_H */
