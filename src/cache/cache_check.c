/*
 * cache_check.c - reading every record of a cache and checking it, and the
 * repair behind `kiln cache check --repair`.
 *
 * The records are the truth: the check reads them all (heads and payloads)
 * and compares the index with what it found. A repair only does what an
 * open would do - cut a torn tail, rewrite the index from the records - and
 * leaves records with a wrong checksum out of the new index, so a lookup
 * says they are missing and the caller writes them again. Bytes of damaged
 * records stay in the file (an append-only file is never rewritten in
 * place); compaction drops them.
 *
 * Check and repair agree: an index that names a damaged record, or leaves
 * it out, is usable either way (neither returns it), so only an entry that
 * contradicts a whole record makes the index invalid. The cache is whole
 * only with no damaged byte left; the report's `next` names the one step
 * that gets there (a repair for the index and tail, else a compaction), and
 * a repair's verdict is the one the next check gives.
 */
#include "cache_internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct found {
    struct kiln_cache_entry *e;
    bool *ok;
    size_t n, cap;
};

static int collect(void *user, const struct kiln_cache_entry *e, bool ok)
{
    struct found *f = user;
    if (f->n == f->cap) {
        size_t cap = f->cap ? f->cap * 2 : 1024;
        struct kiln_cache_entry *ne = kiln__realloc(f->e, cap * sizeof(*ne));
        if (!ne)
            return KILN_ENOMEM;
        f->e = ne;
        bool *nok = kiln__realloc(f->ok, cap * sizeof(*nok));
        if (!nok)
            return KILN_ENOMEM;
        f->ok = nok;
        f->cap = cap;
    }
    f->e[f->n] = *e;
    f->ok[f->n] = ok;
    f->n++;
    return KILN_OK;
}

static bool same_entry(const struct kiln_cache_entry *a, const struct kiln_cache_entry *b)
{
    return a->offset == b->offset && kiln__cache_head_matches(a, b);
}

/*
 * Walks the index entries beside the records found, both in file order. A
 * damaged record may be named by the index (an open that scanned without
 * reading payloads indexed it; a load reports it missing) or left out of it
 * (a repair did that): either is a usable index. So is an entry naming
 * bytes where no whole head was found. A whole record the index skips, or
 * an entry that differs from the record at its offset, is not.
 */
static void match_entries(const struct kiln_cache_entry *es, size_t n, size_t partial,
                          const struct found *f, struct kiln_cache_check_report *rep)
{
    size_t i = 0, j = 0;
    while (i < n) {
        const struct kiln_cache_entry *x = &es[i];
        const struct kiln_cache_entry *r = j < f->n ? &f->e[j] : NULL;
        if (r && same_entry(x, r)) {
            rep->damaged_indexed += !f->ok[j];
            i++, j++;
        } else if (!r || (x->offset < r->offset &&
                          x->offset + kiln__cache_rec_len(x->size) <= r->offset)) {
            rep->damaged_indexed++; /* no whole head where it points */
            i++;
        } else if (x->offset > r->offset && !f->ok[j]) {
            rep->damaged_left_out++;
            j++;
        } else {
            snprintf(rep->index_text, sizeof(rep->index_text),
                     x->offset > r->offset && f->ok[j]
                         ? "entry %zu skips the whole record at offset %" PRIu64
                         : "entry %zu does not match the record at offset %" PRIu64,
                     i, r->offset);
            rep->damaged_indexed = rep->damaged_left_out = 0;
            return;
        }
    }
    size_t behind = 0;
    for (; j < f->n; j++) {
        behind += f->ok[j];
        rep->damaged_left_out += !f->ok[j];
    }
    if (behind || partial) {
        rep->index_state = KILN_CACHE_INDEX_BEHIND;
        snprintf(rep->index_text, sizeof(rep->index_text),
                 "behind: %zu whole record%s past its end%s", behind, behind == 1 ? "" : "s",
                 partial ? ", last entry cut short" : "");
    } else {
        rep->index_state = KILN_CACHE_INDEX_OK;
        snprintf(rep->index_text, sizeof(rep->index_text), "ok");
    }
}

/* Compares the index file with the records found. */
static void check_index(const struct kiln_io *io, const char *idx_path,
                        const struct kiln__cache_header *rh, uint64_t rec_size,
                        const struct found *f, struct kiln_cache_check_report *rep)
{
    void *data = NULL;
    size_t n = 0;
    size_t max = (size_t)(KILN__CACHE_HEADER_SIZE +
                          ((rec_size - KILN__CACHE_HEADER_SIZE) / KILN__CACHE_HEAD_SIZE + 1) *
                              KILN__CACHE_ENTRY_SIZE);
    int rc = kiln__io_read_file(io, idx_path, KILN_IO_NOFOLLOW, max, &data, &n);
    if (rc == KILN_ENOENT) {
        rep->index_state = KILN_CACHE_INDEX_MISSING;
        snprintf(rep->index_text, sizeof(rep->index_text), "missing");
        return;
    }
    rep->index_state = KILN_CACHE_INDEX_INVALID;
    if (rc < 0) {
        snprintf(rep->index_text, sizeof(rep->index_text), "cannot be read: %s", kiln_strerror(rc));
        return;
    }
    size_t cap =
        n > KILN__CACHE_HEADER_SIZE ? (n - KILN__CACHE_HEADER_SIZE) / KILN__CACHE_ENTRY_SIZE : 0;
    struct kiln_cache_entry *es = kiln__malloc((cap ? cap : 1) * sizeof(*es));
    if (!es) {
        kiln__free(data);
        snprintf(rep->index_text, sizeof(rep->index_text), "out of memory");
        return;
    }
    struct kiln__cache_index_parse p;
    rc = kiln__cache_index_parse(data, n, rec_size, es, &p);
    kiln__free(data);
    rep->index_entries = p.valid;
    if (rc < 0) {
        snprintf(rep->index_text, sizeof(rep->index_text), "%s", p.problem);
    } else if (p.header.stamp != rh->stamp || p.header.dict_id != rh->dict_id) {
        snprintf(rep->index_text, sizeof(rep->index_text), "another stamp or dictionary");
    } else if (memcmp(p.header.file_id, rh->file_id, sizeof(rh->file_id)) != 0) {
        snprintf(rep->index_text, sizeof(rep->index_text), "belongs to another records file");
    } else if (!kiln__cache_identity_fits(&p.header, rh)) {
        snprintf(rep->index_text, sizeof(rep->index_text),
                 "belongs to another copy of the records (identity)");
    } else {
        match_entries(es, p.whole, p.partial, f, rep);
    }
    kiln__free(es);
}

/*
 * Where a repair cuts a torn tail: after the last record that checks out.
 * A damaged record (or damaged bytes) right before the tail would be the
 * last record once the tail is gone, and so the next scan's torn tail: it
 * goes with the tail, so that one repair is enough. *left gets the counts
 * of what stays. @return the cut offset (the file's size when no tail).
 */
static uint64_t after_cut(const struct found *f, const struct kiln_cache_check_report *rep,
                          struct kiln_cache_check_report *left)
{
    memset(left, 0, sizeof(*left));
    uint64_t size = rep->file_bytes;
    uint64_t cut = size;
    if (rep->torn_tail_bytes) {
        cut = KILN__CACHE_HEADER_SIZE;
        for (size_t i = 0; i < f->n; i++)
            if (f->ok[i])
                cut = f->e[i].offset + kiln__cache_rec_len(f->e[i].size);
    }
    uint64_t covered = 0;
    for (size_t i = 0; i < f->n && f->e[i].offset < cut; i++) {
        uint64_t len = kiln__cache_rec_len(f->e[i].size);
        covered += len;
        left->records += f->ok[i];
        left->bad_records += !f->ok[i];
        left->bad_record_bytes += f->ok[i] ? 0 : len;
    }
    left->damaged_bytes = cut - KILN_MIN(cut, (uint64_t)KILN__CACHE_HEADER_SIZE) - covered;
    left->torn_tail_bytes = size - cut;
    return cut;
}

static int repair_files(const struct kiln_io *io, int fd, const char *rec_path,
                        const char *idx_path, const struct kiln__cache_header *rh,
                        const struct found *f, const struct kiln_cache_check_report *rep,
                        uint64_t end)
{
    if (rep->torn_tail_bytes) {
        int rc = io->truncate(io, fd, end);
        if (rc < 0) {
            KILN_WARN("cache", "%s: cannot cut the torn tail: %s", rec_path, kiln_strerror(rc));
            return rc;
        }
    }
    int rc = io->fsync(io, fd);
    if (rc < 0) {
        KILN_WARN("cache", "%s: sync failed: %s", rec_path, kiln_strerror(rc));
        return rc;
    }
    size_t good = 0;
    for (size_t i = 0; i < f->n; i++)
        good += f->ok[i];
    size_t n = KILN__CACHE_HEADER_SIZE + good * (size_t)KILN__CACHE_ENTRY_SIZE;
    unsigned char *buf = kiln__malloc(n);
    if (!buf)
        return KILN_ENOMEM;
    struct kiln__cache_header h = *rh;
    h.unit = KILN__CACHE_ENTRY_SIZE;
    kiln__cache_header_encode(buf, KILN__CACHE_IDX_MAGIC, &h);
    unsigned char *p = buf + KILN__CACHE_HEADER_SIZE;
    for (size_t i = 0; i < f->n; i++) {
        if (!f->ok[i])
            continue;
        kiln__cache_entry_encode(p, &f->e[i]);
        p += KILN__CACHE_ENTRY_SIZE;
    }
    rc = kiln_io_replace_file(io, idx_path, buf, n);
    kiln__free(buf);
    if (rc < 0)
        KILN_WARN("cache", "%s: rewriting the index failed: %s", idx_path, kiln_strerror(rc));
    else
        KILN_WARN("cache", "%s: repaired: %zu record%s indexed%s", idx_path, good,
                  good == 1 ? "" : "s", rep->torn_tail_bytes ? ", torn tail cut" : "");
    return rc;
}

static int check(const char *dir, const struct kiln_io *io, bool repair,
                 struct kiln_cache_check_report *rep)
{
    char rec_path[KILN__CACHE_PATH_MAX], idx_path[KILN__CACHE_PATH_MAX];
    KILN_TRY(kiln__path_join(rec_path, sizeof(rec_path), dir, KILN_CACHE_RECORDS_FILE));
    KILN_TRY(kiln__path_join(idx_path, sizeof(idx_path), dir, KILN_CACHE_INDEX_FILE));
    int fd;
    int rc = io->open(io, rec_path, (repair ? KILN_IO_RDWR : KILN_IO_READ) | KILN_IO_NOFOLLOW, &fd);
    if (rc < 0) {
        /* Returned failures are the caller's to report (logged at info). */
        KILN_INFO("cache", "%s: cannot open: %s", rec_path, kiln_strerror(rc));
        return rc;
    }
    struct found f = {0};
    if (repair) {
        rc = io->lock(io, fd, KILN_IO_LOCK_EXCLUSIVE);
        if (rc == KILN_EBUSY)
            KILN_INFO("cache", "%s: another writer holds this cache; cannot repair now", rec_path);
        if (rc < 0)
            goto out;
    }
    uint64_t size;
    rc = io->file_size(io, fd, &size);
    if (rc < 0)
        goto out;
    rep->file_bytes = size;
    unsigned char hb[KILN__CACHE_HEADER_SIZE] = {0};
    size_t hn = (size_t)KILN_MIN(size, (uint64_t)sizeof(hb));
    if (hn && (rc = kiln_io_read_full(io, fd, hb, hn, 0)) < 0)
        goto out;
    struct kiln__cache_header rh;
    enum kiln__cache_header_verdict v =
        kiln__cache_header_decode(hb, hn, KILN__CACHE_REC_MAGIC, &rh);
    if (v != KILN__HEADER_OK) {
        rc = v == KILN__HEADER_FOREIGN || v == KILN__HEADER_VERSION ? KILN_EFORMAT
                                                                    : KILN_ECORRUPT_HEADER;
        KILN_INFO("cache", "%s: %s", rec_path,
                  rc == KILN_EFORMAT ? "not a kiln records file of this version"
                                     : "the file header is damaged or was never finished");
        goto out;
    }
    rep->stamp = rh.stamp;
    rep->dict_id = rh.dict_id;
    struct kiln__cache_scan s;
    rc = kiln__cache_scan(io, fd, rec_path, KILN__CACHE_HEADER_SIZE, size, true, collect, &f, &s);
    if (rc < 0) {
        KILN_WARN("cache", "%s: reading the records failed: %s", rec_path, kiln_strerror(rc));
        goto out;
    }
    rep->records = s.records - s.bad_records;
    rep->bad_records = s.bad_records;
    rep->damaged_bytes = s.damaged_bytes;
    rep->torn_tail_bytes = s.tail_bytes;
    check_index(io, idx_path, &rh, size, &f, rep);
    /* The dictionary: each copy checks itself; a repair writes a damaged
     * or missing copy again from the whole one. */
    bool dict_damaged = false;
    unsigned copies = 0;
    rc = kiln__cache_dict_check(io, dir, rh.dict_id, false, &copies, &dict_damaged, rep->dict_text,
                                sizeof(rep->dict_text));
    if (rc < 0)
        goto out;
    rep->dict_copies = copies;
    rep->whole = rep->index_state == KILN_CACHE_INDEX_OK && !rep->bad_records &&
                 !rep->damaged_bytes && !rep->torn_tail_bytes && !dict_damaged;
    if (dict_damaged)
        KILN_WARN("cache", "%s: dictionary: %s", dir, rep->dict_text);
    if (rep->bad_records)
        KILN_WARN("cache", "%s: %" PRIu64 " %s", rec_path, rep->bad_records,
                  rep->bad_records == 1 ? "record fails its checksum"
                                        : "records fail their checksums");
    if (repair && (copies < 2 || dict_damaged)) {
        rc = kiln__cache_dict_check(io, dir, rh.dict_id, true, &copies, &dict_damaged,
                                    rep->dict_text, sizeof(rep->dict_text));
        if (rc < 0)
            goto out;
        rep->dict_copies = copies;
        rep->repaired = rep->repaired || !dict_damaged;
    }
    for (size_t i = 0; i < f.n; i++)
        if (!f.ok[i])
            rep->bad_record_bytes += kiln__cache_rec_len(f.e[i].size);
    /* The index a repair writes names every whole record and no damaged
     * one; the bytes of damaged records stay until a compaction. */
    bool index_fix =
        rep->index_state != KILN_CACHE_INDEX_OK || rep->damaged_indexed || rep->torn_tail_bytes;
    struct kiln_cache_check_report left = KILN_CACHE_CHECK_REPORT_INIT;
    uint64_t cut = after_cut(&f, rep, &left);
    if (repair && index_fix) {
        rc = repair_files(io, fd, rec_path, idx_path, &rh, &f, rep, cut);
        if (rc < 0)
            goto out;
        rep->repaired = true;
        index_fix = false;
        /* The counts say what the repair left, as the next check sees it. */
        rep->records = left.records;
        rep->bad_records = left.bad_records;
        rep->bad_record_bytes = left.bad_record_bytes;
        rep->damaged_bytes = left.damaged_bytes;
        rep->torn_tail_bytes = left.torn_tail_bytes;
    }
    bool dead = left.bad_records || left.damaged_bytes;
    bool lost_dict = dict_damaged && copies == 0; /* no open works: nothing kiln can do */
    rep->next = KILN_CACHE_NEXT_NONE;
    if (!lost_dict && dead)
        rep->next = KILN_CACHE_NEXT_COMPACT; /* its writer's open also does a repair's work */
    else if (!lost_dict && (index_fix || dict_damaged))
        rep->next = KILN_CACHE_NEXT_REPAIR;
    rc = !index_fix && !dead && !dict_damaged ? KILN_OK : KILN_ECORRUPT;
out:
    kiln__free(f.e);
    kiln__free(f.ok);
    if (repair)
        io->lock(io, fd, KILN_IO_UNLOCK);
    io->close(io, fd);
    return rc;
}

/* The caller's report and I/O table, read and written by the growable
 * rule (docs/abi.md), around check(). */
static int check_body(const char *dir, const struct kiln_io *io, bool repair,
                      struct kiln_cache_check_report *report)
{
    if (!dir || !report)
        return KILN_EINVAL;
    KILN_TRY(kiln__struct_out_check(report, "kiln_cache_check_report"));
    if (io)
        KILN_TRY(kiln__io_check(io));
    struct kiln_cache_check_report rep = {.size = sizeof(rep)};
    int rc = check(dir, io ? io : kiln_io_default(), repair, &rep);
    KILN_STRUCT_OUT(report, &rep);
    return rc;
}

int kiln_cache_check(const char *dir, const struct kiln_io *io, bool repair,
                     struct kiln_cache_check_report *report)
{
    uint64_t m = kiln__err_mark();
    return kiln__err_end(NULL, m, "kiln_cache_check", dir, check_body(dir, io, repair, report));
}
