/*
 * cache_life.c - the rewrites of a cache's life cycle: compact, prune,
 * repack, and merge. They sit on top of the store (cache.c) and its units
 * (cache_dict.c, cache_use.c), and only call down.
 *
 * compact, prune and repack share one engine: the kept records are read
 * from the old file (each checked against its head and checksum; damaged
 * ones are left out), optionally transformed, and written to
 * programs.kpc.new, which is locked, synced and renamed over programs.kpc.
 * Until that rename nothing the old cache uses has changed, so any failure
 * (or a crash) before it leaves the old cache whole; after it, the store
 * switches the handle to the new file (kiln__cache_switch), and the index
 * (tied to the records by the file id), the dictionary (see cache_dict.c)
 * and the last-use file (tied the same way) follow; an open repairs
 * whichever did not. merge appends instead, through the store's put: the
 * cache format is append-only and crash-safe by itself.
 *
 * The size cap (kiln_cache_options.max_size) is kept here too, because
 * keeping it is a prune: a put that makes programs.kpc pass the cap
 * (kiln_cache_put, cache_cap.c) calls kiln__cache_keep_cap, which takes
 * the handle's gate for writing (no put, sync, get or load is running
 * then: each holds it for reading), picks the least recently used records
 * with the prune's selection down to the low-water mark
 * (KILN__CACHE_LOW_WATER: half the cap), sparing every record this handle
 * stored, loaded or found (run_used), and rewrites the file as prune does:
 * a kill at any moment leaves the old file or the new one, each whole.
 * Evicting down to the low-water mark, not to the cap, is what bounds the
 * work: the puts of the next half of the cap cost nothing extra, and the
 * copying amortizes to at most one byte copied per byte stored (half the
 * cap copied per half the cap stored), whatever the cache's size. A higher
 * mark evicts less at a time but copies more: at 3/4 of the cap (three
 * bytes copied per byte stored) kiln bench store measured 0.38 of the
 * uncapped store rate on a 2-core machine, at 1/2 0.53 to 0.66
 * (docs/bench-store.md).
 * When only this handle's records are left, nothing is rewritten again:
 * the puts succeed and count an overflow (cap_spent). compact, prune,
 * repack and merge keep the cap at their end.
 */
#include "cache_internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Most SPIR-V bytes read to train a dictionary (spread over the cache). */
#define TRAIN_BUDGET ((uint64_t)48 << 20)
/* Output buffer of a rewrite. */
#define OUT_BUF (1u << 20)

static int side_path(const struct kiln_cache *c, const char *name, char *out, size_t cap)
{
    return kiln__path_join(out, cap, c->dir, name);
}

/* ---- reading records without marking them used ------------------------------ */

/* Reads entry e's whole record into *buf (grown as needed) and checks its
 * head against e and its checksum. The payload is at *buf + 48.
 * @return 0, KILN_ECORRUPT_RECORD, or the I/O error. */
static int read_record(const struct kiln_cache *c, const struct kiln_cache_entry *e,
                       unsigned char **buf, size_t *cap)
{
    uint64_t len = kiln__cache_rec_len(e->size);
    if (len > *cap) {
        unsigned char *n = kiln__realloc(*buf, (size_t)len);
        if (!n)
            return KILN_ENOMEM;
        *buf = n;
        *cap = (size_t)len;
    }
    int rc = kiln_io_read_full(c->io, c->rec_fd, *buf, (size_t)len, e->offset);
    if (rc == KILN_EIO_SHORTREAD)
        return KILN_ECORRUPT_RECORD;
    KILN_TRY(rc);
    struct kiln_cache_entry h;
    if (kiln__cache_head_decode(*buf, KILN__CACHE_HEAD_SIZE, &h) < 0 ||
        !kiln__cache_head_matches(&h, e) ||
        kiln__cache_record_checksum(&h, *buf + KILN__CACHE_HEAD_SIZE) != e->checksum)
        return KILN_ECORRUPT_RECORD;
    return KILN_OK;
}

/* Indices of the live entries, in file order. */
static int live_entries(struct kiln_cache *c, size_t **out, size_t *n)
{
    *out = kiln__malloc((c->live ? c->live : 1) * sizeof(**out));
    if (!*out)
        return KILN_ENOMEM;
    size_t k = 0;
    for (size_t i = 0; i < c->count; i++)
        if (kiln__cache_lookup(c, c->entries[i].key) == (int64_t)i)
            (*out)[k++] = i;
    *n = k;
    return KILN_OK;
}

/* ---- the rewrite engine ------------------------------------------------------ */

/* Turns one payload into another. Leaves *out NULL to keep the payload as
 * it is. @return 0 or an error that stops the rewrite. */
typedef int (*xform_fn)(void *user, const struct kiln_cache_entry *e, const void *payload,
                        void **out, size_t *out_size, uint32_t *raw_size, uint8_t *codec);

struct out_file {
    const struct kiln_io *io;
    int fd;
    unsigned char *buf;
    size_t len;
    uint64_t buf_off; /* file offset of buf[0] */
};

static int out_flush(struct out_file *o)
{
    if (!o->len)
        return KILN_OK;
    KILN_TRY(kiln_io_write_full(o->io, o->fd, o->buf, o->len, o->buf_off));
    o->buf_off += o->len;
    o->len = 0;
    return KILN_OK;
}

static int out_put(struct out_file *o, const void *p, size_t n)
{
    if (o->len + n > OUT_BUF) {
        KILN_TRY(out_flush(o));
        if (n > OUT_BUF) {
            KILN_TRY(kiln_io_write_full(o->io, o->fd, p, n, o->buf_off));
            o->buf_off += n;
            return KILN_OK;
        }
    }
    memcpy(o->buf + o->len, p, n);
    o->len += n;
    return KILN_OK;
}

/* @return the report a rewrite fills in (the caller's `report`, or `tmp`
 * where it passes none), set to the cache as it stands. */
static struct kiln_cache_rewrite_report *report_before(struct kiln_cache *c,
                                                       struct kiln_cache_rewrite_report *report,
                                                       struct kiln_cache_rewrite_report *tmp)
{
    struct kiln_cache_rewrite_report *r = report ? report : tmp;
    memset(r, 0, sizeof(*r));
    r->size = sizeof(*r);
    r->records_before = c->live;
    r->records_after = c->live;
    r->superseded = c->count - c->live;
    r->file_bytes_before = c->rec_end;
    r->file_bytes_after = c->rec_end;
    r->payload_bytes_before = c->live_bytes;
    r->payload_bytes_after = c->live_bytes;
    r->dict_id_before = c->header.dict_id;
    r->dict_id_after = c->header.dict_id;
    r->records_read = c->count;
    return r;
}

/* Counts what lies between the table's records and after the last one:
 * records a repair left out of the index (damaged), holes of failed puts
 * and damaged bytes. A rewrite leaves all of it out. */
static int count_gaps(struct kiln_cache *c, struct kiln_cache_rewrite_report *r)
{
    uint64_t at = KILN__CACHE_HEADER_SIZE;
    for (size_t i = 0; i <= c->count; i++) {
        uint64_t next = i < c->count ? c->entries[i].offset : c->rec_end;
        if (next > at) {
            uint64_t recs;
            KILN_TRY(kiln__cache_scan_gap(c->io, c->rec_fd, at, next, &recs));
            if (recs)
                KILN_WARN("cache",
                          "%s: %" PRIu64 " bytes at offset %" PRIu64 " that the index does not "
                          "name hold %" PRIu64 " damaged record%s; left out",
                          c->rec_path, next - at, at, recs, recs == 1 ? "" : "s");
            else
                KILN_WARN("cache",
                          "%s: %" PRIu64 " bytes at offset %" PRIu64 " hold no record; left out",
                          c->rec_path, next - at, at);
            r->damaged += recs;
            r->records_read += recs;
            r->damaged_bytes += next - at;
        }
        if (i < c->count)
            at = c->entries[i].offset + kiln__cache_rec_len(c->entries[i].size);
    }
    return KILN_OK;
}

/*
 * Writes the entries `keep` (indices, ascending) into a new records file
 * and puts it in place of the old one (see the top of this file). With
 * `dict_change`, the new file names `new_dict` (NULL: none).
 */
static int rewrite(struct kiln_cache *c, const size_t *keep, size_t nkeep, bool dict_change,
                   const struct kiln_pack_dict *new_dict, xform_fn fn, void *user,
                   struct kiln_cache_rewrite_report *r)
{
    const struct kiln_io *io = c->io;
    char tmp[KILN__CACHE_PATH_MAX + 8], kpd[KILN__CACHE_PATH_MAX],
        kpd_new[KILN__CACHE_PATH_MAX + 8];
    snprintf(tmp, sizeof(tmp), "%s.new", c->rec_path);
    KILN_TRY(side_path(c, KILN_CACHE_DICT_FILE, kpd, sizeof(kpd)));
    snprintf(kpd_new, sizeof(kpd_new), "%s.new", kpd);

    struct kiln_cache_entry *ne = kiln__malloc((nkeep ? nkeep : 1) * sizeof(*ne));
    uint32_t *nu = kiln__malloc((nkeep ? nkeep : 1) * sizeof(*nu));
    uint8_t *nr = kiln__malloc(nkeep ? nkeep : 1);
    struct out_file o = {.io = io, .fd = -1, .buf = kiln__malloc(OUT_BUF)};
    unsigned char *in = NULL;
    size_t incap = 0, m = 0;
    bool wrote_kpd = false, made_tmp = false;
    const char *step = "allocating";
    int rc = ne && nu && nr && o.buf ? KILN_OK : KILN_ENOMEM;
    if (rc == KILN_OK) {
        step = "reading the bytes between records";
        rc = count_gaps(c, r);
    }

    struct kiln__cache_header h = c->header;
    if (dict_change)
        h.dict_id = kiln_pack_dict_id(new_dict);
    if (rc == KILN_OK && dict_change && new_dict) {
        step = "writing the new dictionary";
        size_t n = 0;
        const void *b = kiln_pack_dict_bytes(new_dict, &n);
        rc = kiln_io_replace_file(io, kpd_new, b, n);
        wrote_kpd = rc == KILN_OK;
    }
    if (rc == KILN_OK) {
        step = "creating the new records file";
        rc = kiln__io_create_new(io, tmp, &o.fd); /* we hold the lock: no one else writes it */
        made_tmp = rc == KILN_OK;
        if (rc < 0)
            o.fd = -1;
    }
    if (rc == KILN_OK)
        rc = io->lock(io, o.fd, KILN_IO_LOCK_EXCLUSIVE);
    if (rc == KILN_OK)
        rc = io->truncate(io, o.fd, 0);
    /* A new file of the current version, with its own id and identity. */
    h.version = KILN__CACHE_VERSION;
    h.generation = 0;
    h.previous = 0;
    if (rc == KILN_OK)
        rc = kiln_random_bytes(h.file_id, sizeof(h.file_id));
    if (rc == KILN_OK)
        rc = kiln_random_bytes(&h.session, sizeof(h.session));
    if (rc == KILN_OK) {
        step = "writing the new records file";
        unsigned char hb[KILN__CACHE_HEADER_SIZE];
        kiln__cache_header_encode(hb, KILN__CACHE_REC_MAGIC, &h);
        rc = out_put(&o, hb, sizeof(hb));
    }
    r->payload_bytes_after = 0;
    for (size_t k = 0; rc == KILN_OK && k < nkeep; k++) {
        kiln__cache_progress(c, k, nkeep);
        const struct kiln_cache_entry *e = &c->entries[keep[k]];
        step = "reading a record";
        rc = read_record(c, e, &in, &incap);
        if (rc == KILN_ECORRUPT_RECORD) {
            KILN_WARN("cache", "%s: record at offset %" PRIu64 " is damaged; left out", c->rec_path,
                      e->offset);
            r->damaged++;
            r->damaged_bytes += kiln__cache_rec_len(e->size);
            rc = KILN_OK;
            continue;
        }
        if (rc < 0)
            break;
        const unsigned char *payload = in + KILN__CACHE_HEAD_SIZE;
        void *np = NULL;
        size_t nsize = 0;
        struct kiln_cache_entry x = *e;
        if (fn) {
            step = "repacking a record";
            rc = fn(user, e, payload, &np, &nsize, &x.raw_size, &x.codec);
            if (rc < 0)
                break;
        }
        if (np) {
            if (nsize > KILN_CACHE_MAX_PAYLOAD) {
                kiln_pack_free(np);
                rc = KILN_ERANGE;
                break;
            }
            x.size = (uint32_t)nsize;
            payload = np;
        }
        x.offset = o.buf_off + o.len;
        x.checksum = kiln__cache_record_checksum(&x, payload);
        unsigned char head[KILN__CACHE_HEAD_SIZE];
        static const unsigned char pad[8];
        kiln__cache_head_encode(head, &x);
        step = "writing the new records file";
        rc = out_put(&o, head, sizeof(head));
        if (rc == KILN_OK && x.size)
            rc = out_put(&o, payload, x.size);
        size_t npad = (size_t)(kiln__cache_rec_len(x.size) - KILN__CACHE_HEAD_SIZE - x.size);
        if (rc == KILN_OK && npad)
            rc = out_put(&o, pad, npad);
        kiln_pack_free(np);
        ne[m] = x;
        nu[m] = c->last_use[keep[k]];
        nr[m] = c->run_used[keep[k]];
        m++;
        r->payload_bytes_after += x.size;
    }
    if (rc == KILN_OK)
        kiln__cache_progress(c, nkeep, nkeep);
    if (rc == KILN_OK)
        rc = out_flush(&o);
    if (rc == KILN_OK) {
        step = "syncing the new records file";
        rc = io->fsync(io, o.fd);
    }
    if (rc == KILN_OK) {
        /* The commit point: until here the old cache is untouched. */
        step = "renaming the new records file into place";
        rc = io->rename(io, tmp, c->rec_path);
    }
    kiln__free(in);
    kiln__free(o.buf);
    if (rc < 0) {
        KILN_ERROR("cache", "%s: rewrite failed %s: %s; the cache is left as it was", c->dir, step,
                   kiln_strerror(rc));
        if (o.fd >= 0)
            io->close(io, o.fd);
        if (made_tmp)
            io->unlink(io, tmp);
        if (wrote_kpd)
            io->unlink(io, kpd_new);
        kiln__free(ne);
        kiln__free(nu);
        kiln__free(nr);
        return rc;
    }

    /* Committed: the rest follows, and an open repairs what does not. */
    int after = io->fsync_dir(io, c->dir);
    if (dict_change) {
        int d = kiln__cache_dict_switch(c, new_dict);
        after = after < 0 ? after : d;
    }
    struct kiln__cache_kept kept = {.entries = ne, .uses = nu, .run = nr, .n = m};
    int sw = kiln__cache_switch(c, o.fd, &h, &kept, o.buf_off);
    kiln__free(ne);
    kiln__free(nu);
    kiln__free(nr);
    if (sw < 0)
        return sw;
    int ix = kiln__cache_index_write_whole(c);
    __atomic_store_n(&c->use_dirty, true, __ATOMIC_RELAXED);
    kiln__cache_save_use(c);
    r->rewritten = true;
    r->records_after = m;
    r->file_bytes_after = c->rec_end;
    r->dict_id_after = h.dict_id;
    KILN_INFO("cache", "%s: rewritten: %zu record%s, %" PRIu64 " -> %" PRIu64 " bytes", c->dir, m,
              m == 1 ? "" : "s", r->file_bytes_before, r->file_bytes_after);
    return after < 0 ? after : ix < 0 ? ix : KILN_OK;
}

static int writable(struct kiln_cache *c)
{
    if (c->flags & KILN_CACHE_READ_ONLY)
        return KILN_EINVAL;
    return __atomic_load_n(&c->failed, __ATOMIC_ACQUIRE);
}

/* Reads every kept record of a file that is otherwise compact: a record
 * that fails its checksum (an index or a scan may name one) makes the
 * compaction rewrite the file without it. */
static int find_damaged(struct kiln_cache *c, const size_t *keep, size_t n, bool *damaged)
{
    unsigned char *buf = NULL;
    size_t cap = 0;
    int rc = KILN_OK;
    *damaged = false;
    for (size_t i = 0; i < n && rc == KILN_OK && !*damaged; i++) {
        rc = read_record(c, &c->entries[keep[i]], &buf, &cap);
        *damaged = rc == KILN_ECORRUPT_RECORD;
    }
    kiln__free(buf);
    return *damaged ? KILN_OK : rc;
}

static int compact(struct kiln_cache *c, struct kiln_cache_rewrite_report *report)
{
    if (!c)
        return KILN_EINVAL;
    struct kiln_cache_rewrite_report tmp, *r = report_before(c, report, &tmp);
    KILN_TRY(writable(c));
    size_t *keep, n;
    KILN_TRY(live_entries(c, &keep, &n));
    uint64_t ideal = KILN__CACHE_HEADER_SIZE;
    for (size_t i = 0; i < n; i++)
        ideal += kiln__cache_rec_len(c->entries[keep[i]].size);
    int rc = KILN_OK;
    bool damaged = false;
    if (ideal == c->rec_end && n == c->count)
        rc = find_damaged(c, keep, n, &damaged);
    c->progress_what = "compact";
    if (rc == KILN_OK && (ideal != c->rec_end || n != c->count || damaged))
        rc = rewrite(c, keep, n, false, NULL, NULL, NULL, r);
    kiln__free(keep);
    return rc;
}

/* ---- prune ----------------------------------------------------------------- */

struct lru_item {
    uint32_t day;
    uint64_t offset;
    size_t live; /* position in the live list */
};

static int by_lru(const void *a, const void *b)
{
    const struct lru_item *x = a, *y = b;
    if (x->day != y->day)
        return x->day < y->day ? -1 : 1;
    return x->offset < y->offset ? -1 : x->offset > y->offset;
}

/* What a prune drops: the live entries in file order, and for each the
 * reason it goes (0: kept); the picks in the order they were made. */
struct prune_sel {
    size_t *live, n;
    uint8_t *why;          /* per live entry: 0 or enum kiln_cache_prune_reason */
    size_t *order, picked; /* live positions, in pick order */
    uint64_t total;        /* the records file after the drops */
    uint32_t cutoff;
};

static void prune_sel_free(struct prune_sel *s)
{
    kiln__free(s->live);
    kiln__free(s->why);
    kiln__free(s->order);
    memset(s, 0, sizeof(*s));
}

/* The one selection of prune and its plan: records last used before the
 * cutoff, then the least recently used (ties: earliest in the file) while
 * the file would be over max_file_bytes. */
static int prune_select(struct kiln_cache *c, const struct kiln_cache_prune_options *o,
                        bool spare_run, struct prune_sel *s)
{
    memset(s, 0, sizeof(*s));
    KILN_TRY(live_entries(c, &s->live, &s->n));
    size_t n = s->n;
    struct lru_item *lru = kiln__malloc((n ? n : 1) * sizeof(*lru));
    s->why = kiln__calloc(n ? n : 1, sizeof(*s->why));
    s->order = kiln__calloc(n ? n : 1, sizeof(*s->order));
    if (!lru || !s->why || !s->order) {
        kiln__free(lru);
        prune_sel_free(s);
        return KILN_ENOMEM;
    }
    s->total = KILN__CACHE_HEADER_SIZE;
    for (size_t i = 0; i < n; i++) {
        const struct kiln_cache_entry *e = &c->entries[s->live[i]];
        /* Loads mark uses beside a plan (under the read lock): atomic reads. */
        uint32_t day = __atomic_load_n(&c->last_use[s->live[i]], __ATOMIC_RELAXED);
        lru[i] = (struct lru_item){day, e->offset, i};
        s->total += kiln__cache_rec_len(e->size);
    }
    qsort(lru, n, sizeof(*lru), by_lru);
    if (o->older_than_days != UINT32_MAX && c->today > o->older_than_days)
        s->cutoff = c->today - o->older_than_days;
    for (size_t i = 0; i < n; i++) {
        const struct kiln_cache_entry *e = &c->entries[s->live[lru[i].live]];
        bool old = lru[i].day < s->cutoff;
        bool big = o->max_file_bytes && s->total > o->max_file_bytes;
        if ((!old && !big) ||
            (spare_run && __atomic_load_n(&c->run_used[s->live[lru[i].live]], __ATOMIC_RELAXED)))
            continue;
        s->why[lru[i].live] = old ? KILN_CACHE_PRUNE_OLD : KILN_CACHE_PRUNE_SIZE;
        s->order[s->picked++] = lru[i].live;
        s->total -= kiln__cache_rec_len(e->size);
    }
    kiln__free(lru);
    return KILN_OK;
}

/* Moves the records `s` keeps to the front of s->live, in file order.
 * @return how many. */
static size_t prune_sel_keep(struct prune_sel *s)
{
    size_t k = 0;
    for (size_t i = 0; i < s->n; i++)
        if (!s->why[i])
            s->live[k++] = s->live[i];
    return k;
}

/* Whether a rewrite changes anything: records picked, or dead bytes or
 * entries in the file to drop. */
static bool prune_sel_rewrites(const struct kiln_cache *c, const struct prune_sel *s)
{
    return s->picked || s->total != c->rec_end || s->n != c->count;
}

static int prune(struct kiln_cache *c, const struct kiln_cache_prune_options *o,
                 struct kiln_cache_rewrite_report *report)
{
    if (!c)
        return KILN_EINVAL;
    struct kiln_cache_rewrite_report tmp, *r = report_before(c, report, &tmp);
    if (!o)
        return KILN_EINVAL;
    KILN_TRY(writable(c));
    struct prune_sel s;
    KILN_TRY(prune_select(c, o, false, &s));
    size_t k = prune_sel_keep(&s);
    int rc = KILN_OK;
    r->dropped = s.picked;
    c->progress_what = "prune";
    if (prune_sel_rewrites(c, &s))
        rc = rewrite(c, s.live, k, false, NULL, NULL, NULL, r);
    prune_sel_free(&s);
    return rc;
}

/* A drop the caller asked for (kiln__cache_drop_where), beside the
 * prune's reasons in prune_sel.why. */
#define DROP_ASKED 0xffu

/* The prune's rewrite of a selection the caller's predicate makes; the
 * tier of driver binaries sweeps with it (src/prep/binaries.c). */
static int drop_where(struct kiln_cache *c, kiln__cache_drop_fn drop, void *user,
                      struct kiln_cache_rewrite_report *r)
{
    struct prune_sel s;
    memset(&s, 0, sizeof(s));
    KILN_TRY(live_entries(c, &s.live, &s.n));
    s.why = kiln__calloc(s.n ? s.n : 1, sizeof(*s.why));
    if (!s.why) {
        prune_sel_free(&s);
        return KILN_ENOMEM;
    }
    for (size_t i = 0; i < s.n; i++)
        if (drop(user, &c->entries[s.live[i]].key)) {
            s.why[i] = DROP_ASKED;
            s.picked++;
        }
    int rc = KILN_OK;
    r->dropped = s.picked;
    if (s.picked) {
        size_t k = prune_sel_keep(&s);
        c->progress_what = "prune";
        rc = rewrite(c, s.live, k, false, NULL, NULL, NULL, r);
    }
    prune_sel_free(&s);
    return rc;
}

int kiln__cache_drop_where(struct kiln_cache *c, kiln__cache_drop_fn drop, void *user,
                           struct kiln_cache_rewrite_report *report)
{
    uint64_t m = kiln__err_mark();
    struct kiln_cache_rewrite_report tmp;
    int rc = !c || !drop ? KILN_EINVAL : writable(c);
    if (rc == KILN_OK)
        rc = drop_where(c, drop, user, report_before(c, report, &tmp));
    return KILN__CACHE_END(c, m, "kiln__cache_drop_where", rc);
}

/* ---- the cap ---------------------------------------------------------------- */

/* Bytes of the records that `s` picked. */
static uint64_t picked_bytes(const struct kiln_cache *c, const struct prune_sel *s)
{
    uint64_t b = 0;
    for (size_t i = 0; i < s->picked; i++)
        b += kiln__cache_rec_len(c->entries[s->live[s->order[i]]].size);
    return b;
}

/*
 * One eviction, under the gate held for writing: the prune's selection
 * (least recently used first: last-use day, then the earliest in the file)
 * down to the low-water mark, sparing every record this handle used, then
 * the prune's crash-safe rewrite. Nothing to evict and nothing dead in the
 * file: an overflow, counted, and no rewrite.
 */
static int evict(struct kiln_cache *c)
{
    uint64_t cap = c->max_size;
    struct kiln_cache_prune_options o = {.size = sizeof(o),
                                         .older_than_days = UINT32_MAX,
                                         .max_file_bytes = KILN__CACHE_LOW_WATER(cap)};
    struct prune_sel s;
    KILN_TRY(prune_select(c, &o, true, &s));
    size_t k = prune_sel_keep(&s);
    uint64_t before = c->rec_end, bytes = picked_bytes(c, &s), picked = s.picked;
    size_t spare = 0;
    for (size_t i = 0; i < k; i++)
        spare += !__atomic_load_n(&c->run_used[s.live[i]], __ATOMIC_RELAXED);
    int rc = KILN_OK;
    if (prune_sel_rewrites(c, &s)) {
        struct kiln_cache_rewrite_report r;
        report_before(c, NULL, &r);
        const char *what = c->progress_what;
        c->progress_what = NULL; /* a put's eviction reports no progress */
        rc = rewrite(c, s.live, k, false, NULL, NULL, NULL, &r);
        c->progress_what = what;
    }
    prune_sel_free(&s);
    pthread_rwlock_wrlock(&c->lock);
    if (rc == KILN_OK && c->rec_end < before) {
        c->st.evictions++;
        c->st.evicted_records += picked;
        c->st.evicted_bytes += bytes;
    }
    bool over = c->rec_end > cap;
    if (over)
        c->st.cap_overflows++;
    /* Every record left is this handle's: the next puts need not look. */
    __atomic_store_n(&c->cap_spent, rc == KILN_OK && spare == 0, __ATOMIC_RELAXED);
    pthread_rwlock_unlock(&c->lock);
    if (rc == KILN_OK && picked)
        KILN_INFO("cache",
                  "%s: over its cap of %" PRIu64 " bytes: %" PRIu64 " least recently used "
                  "record%s evicted (%" PRIu64 " -> %" PRIu64 " bytes)",
                  c->dir, cap, picked, picked == 1 ? "" : "s", before, c->rec_end);
    if (rc == KILN_OK && over && c->st.cap_overflows == 1)
        KILN_WARN("cache",
                  "%s: %" PRIu64 " bytes, over its cap of %" PRIu64 " bytes: the rest are "
                  "records this handle used, which the cap never evicts",
                  c->dir, c->rec_end, cap);
    return rc;
}

int kiln__cache_keep_cap(struct kiln_cache *c)
{
    if (!c->max_size || (c->flags & KILN_CACHE_READ_ONLY))
        return KILN_OK;
    bool over;
    if (__atomic_load_n(&c->cap_spent, __ATOMIC_RELAXED)) {
        /* Nothing left to evict: the overflow is only counted. */
        pthread_rwlock_wrlock(&c->lock);
        over = c->rec_end > c->max_size;
        c->st.cap_overflows += over;
        pthread_rwlock_unlock(&c->lock);
        return KILN_OK;
    }
    pthread_rwlock_rdlock(&c->lock);
    over = c->rec_end > c->max_size;
    pthread_rwlock_unlock(&c->lock);
    if (!over)
        return KILN_OK;
    pthread_rwlock_wrlock(&c->gate);
    int rc = __atomic_load_n(&c->failed, __ATOMIC_ACQUIRE);
    /* Another put's eviction may have kept the cap meanwhile. */
    if (rc == KILN_OK && c->rec_end > c->max_size)
        rc = evict(c);
    pthread_rwlock_unlock(&c->gate);
    return rc;
}

/* Fills the library's own plan (items at the caller's stride). */
static int plan_prune(struct kiln_cache *c, const struct kiln_cache_prune_options *o, size_t stride,
                      struct kiln_cache_prune_plan *plan)
{
    pthread_rwlock_rdlock(&c->lock);
    struct prune_sel s = {0};
    int rc = prune_select(c, o, false, &s);
    if (rc == KILN_OK) {
        plan->items = kiln__calloc(s.picked ? s.picked : 1, stride);
        rc = plan->items ? KILN_OK : KILN_ENOMEM;
    }
    if (rc == KILN_OK) {
        for (size_t i = 0; i < s.picked; i++) {
            size_t at = s.live[s.order[i]];
            const struct kiln_cache_entry *e = &c->entries[at];
            struct kiln_cache_prune_item item = {
                .key = e->key,
                .offset = e->offset,
                .record_bytes = kiln__cache_rec_len(e->size),
                .size = e->size,
                .last_use = __atomic_load_n(&c->last_use[at], __ATOMIC_RELAXED),
                .reason = (enum kiln_cache_prune_reason)s.why[s.order[i]],
            };
            kiln__elem_out(plan->items, stride, i, &item, sizeof(item));
            plan->dropped_bytes += item.record_bytes;
        }
        plan->count = s.picked;
        plan->records_before = s.n;
        plan->records_after = s.n - s.picked;
        plan->file_bytes_before = c->rec_end;
        plan->file_bytes_after = s.total;
        plan->today = c->today;
        plan->cutoff = s.cutoff;
    }
    prune_sel_free(&s);
    pthread_rwlock_unlock(&c->lock);
    return rc;
}

static int plan_prune_body(struct kiln_cache *c, const struct kiln_cache_prune_options *o,
                           size_t item_size, struct kiln_cache_prune_plan *plan)
{
    if (!plan)
        return KILN_EINVAL;
    KILN_TRY(kiln__struct_out_check(plan, "kiln_cache_prune_plan"));
    struct kiln_cache_prune_plan p = {.size = sizeof(p)};
    KILN_STRUCT_OUT(plan, &p);
    if (!c || !o)
        return KILN_EINVAL;
    if (item_size == 0) {
        KILN_ERROR("abi", "kiln_cache_prune_item: element size %zu is too small", item_size);
        return KILN_EINVAL;
    }
    struct kiln_cache_prune_options opt = KILN_CACHE_PRUNE_OPTIONS_INIT;
    KILN_TRY(KILN_STRUCT_IN(&opt, o, "kiln_cache_prune_options"));
    int rc = plan_prune(c, &opt, item_size, &p);
    KILN_STRUCT_OUT(plan, &p);
    return rc;
}

void kiln_cache_prune_plan_free(struct kiln_cache_prune_plan *plan)
{
    if (!plan || plan->size < offsetof(struct kiln_cache_prune_plan, items) + sizeof(void *))
        return;
    kiln__free(plan->items);
    plan->items = NULL;
    struct kiln_cache_prune_plan p = {.size = sizeof(p)};
    KILN_STRUCT_OUT(plan, &p);
}

/* ---- repack ------------------------------------------------------------------ */

struct repack {
    enum kiln_codec codec;
    int32_t level;
    const struct kiln_pack_dict *old_dict, *new_dict;
    struct kiln_cache_rewrite_report *r;
    const char *dir;
};

static int repack_fn(void *user, const struct kiln_cache_entry *e, const void *payload, void **out,
                     size_t *out_size, uint32_t *raw_size, uint8_t *codec)
{
    struct repack *rp = user;
    struct kiln_stage_blob st[KILN_PAYLOAD_MAX_STAGES], ns[KILN_PAYLOAD_MAX_STAGES];
    struct kiln_payload_state state;
    int n = kiln_program_payload_parse_full(payload, e->size, KILN_PAYLOAD_MAX_STAGES, st, &state);
    if (n < 0) {
        rp->r->kept_as_is++; /* not a program payload: copied as it is */
        return KILN_OK;
    }
    uint64_t spirv = 0;
    int rc = KILN_OK, made = 0;
    for (int s = 0; s < n; s++) {
        const uint32_t *w = NULL;
        int64_t nw = kiln_unpack_scratch(st[s].blob, st[s].blob_size, rp->old_dict, &w);
        if (nw < 0) {
            KILN_ERROR("cache",
                       "%s: record %016" PRIx64 "%016" PRIx64 " stage %d does not unpack: %s%s",
                       rp->dir, e->key.hi, e->key.lo, s, kiln_strerror((int)nw),
                       nw == KILN_EINVAL ? " (its dictionary is not loaded)" : "");
            rc = nw == KILN_EINVAL ? KILN_EINVAL : KILN_ECORRUPT_BLOB;
            break;
        }
        void *blob = NULL;
        size_t bs = 0;
        struct kiln_pack_options po = {
            .size = sizeof(po), .codec = rp->codec, .level = rp->level, .dict = rp->new_dict};
        rc = kiln_pack_with(w, (size_t)nw, &po, &blob, &bs);
        if (rc < 0)
            break;
        ns[s] = st[s]; /* entry point and specialization kept */
        ns[s].blob = blob;
        ns[s].blob_size = bs;
        made++;
        spirv += (uint64_t)nw * 4;
    }
    if (rc == KILN_OK)
        rc = kiln_program_payload_build_full(&state, ns, (uint32_t)n, out, out_size);
    for (int s = 0; s < made; s++)
        kiln_pack_free((void *)ns[s].blob);
    if (rc < 0) {
        *out = NULL;
        return rc;
    }
    *raw_size = spirv > UINT32_MAX ? UINT32_MAX : (uint32_t)spirv;
    *codec = (uint8_t)rp->codec;
    rp->r->repacked++;
    rp->r->spirv_bytes += spirv;
    return KILN_OK;
}

/* Trains a dictionary from the cache's own programs (spread over the file). */
static int train(struct kiln_cache *c, const size_t *live, size_t n, struct kiln_pack_dict **out)
{
    uint64_t raw = 0;
    for (size_t i = 0; i < n; i++)
        raw += c->entries[live[i]].raw_size;
    size_t step = raw > TRAIN_BUDGET ? (size_t)(raw / TRAIN_BUDGET) + 1 : 1;
    size_t cap = 0, count = 0;
    uint32_t **mods = NULL;
    size_t *words = NULL;
    unsigned char *buf = NULL;
    size_t bufcap = 0;
    struct kiln_stage_blob st[KILN_PAYLOAD_MAX_STAGES];
    int rc = KILN_OK;
    for (size_t i = 0; i < n && rc == KILN_OK; i += step) {
        const struct kiln_cache_entry *e = &c->entries[live[i]];
        rc = read_record(c, e, &buf, &bufcap);
        if (rc == KILN_ECORRUPT_RECORD) {
            rc = KILN_OK;
            continue;
        }
        if (rc < 0)
            break;
        int ns = kiln_program_payload_parse(buf + KILN__CACHE_HEAD_SIZE, e->size,
                                            KILN_PAYLOAD_MAX_STAGES, st);
        for (int s = 0; s < ns && rc == KILN_OK; s++) {
            const uint32_t *w = NULL;
            int64_t nw = kiln_unpack_scratch(st[s].blob, st[s].blob_size, c->dict, &w);
            if (nw <= 0)
                continue;
            if (count == cap) {
                size_t nc = cap ? cap * 2 : 256;
                uint32_t **nm = kiln__realloc(mods, nc * sizeof(*nm));
                if (nm)
                    mods = nm;
                size_t *nwd = nm ? kiln__realloc(words, nc * sizeof(*nwd)) : NULL;
                if (!nm || !nwd) {
                    rc = KILN_ENOMEM;
                    break;
                }
                words = nwd;
                cap = nc;
            }
            mods[count] = kiln__malloc((size_t)nw * 4);
            if (!mods[count]) {
                rc = KILN_ENOMEM;
                break;
            }
            memcpy(mods[count], w, (size_t)nw * 4);
            words[count++] = (size_t)nw;
        }
    }
    kiln__free(buf);
    if (rc == KILN_OK) {
        rc = kiln_pack_dict_train((const uint32_t *const *)mods, words, count, 0, out);
        if (rc < 0)
            KILN_ERROR("cache", "%s: cannot train a dictionary from %zu modules: %s%s", c->dir,
                       count, kiln_strerror(rc), count < 8 ? " (at least 8 are needed)" : "");
    }
    for (size_t i = 0; i < count; i++)
        kiln__free(mods[i]);
    kiln__free(mods);
    kiln__free(words);
    return rc;
}

static int repack(struct kiln_cache *c, const struct kiln_cache_repack_options *o,
                  struct kiln_cache_rewrite_report *report)
{
    if (!c)
        return KILN_EINVAL;
    enum kiln_codec codec = (enum kiln_codec)o->codec;
    enum kiln_cache_dict_mode mode = (enum kiln_cache_dict_mode)o->dict;
    struct kiln_cache_rewrite_report tmp, *r = report_before(c, report, &tmp);
    KILN_TRY(writable(c));
    if (!kiln_codec_name(codec) || (mode == KILN_CACHE_DICT_TRAIN && codec != KILN_CODEC_KILN) ||
        (unsigned)mode > KILN_CACHE_DICT_TRAIN) {
        KILN_ERROR("cache", "%s: repack: a dictionary goes only with the kiln codec", c->dir);
        return KILN_EINVAL;
    }
    if (c->header.dict_id && !c->dict) {
        KILN_ERROR("cache",
                   "%s: repack: the cache's dictionary is not loaded (an inspection "
                   "open, or the caller keeps it)",
                   c->dir);
        return KILN_EINVAL;
    }
    size_t *live, n;
    KILN_TRY(live_entries(c, &live, &n));
    struct kiln_pack_dict *trained = NULL;
    const struct kiln_pack_dict *nd = NULL;
    int rc = KILN_OK;
    if (mode == KILN_CACHE_DICT_TRAIN)
        rc = train(c, live, n, &trained);
    nd = mode == KILN_CACHE_DICT_TRAIN                              ? trained
         : mode == KILN_CACHE_DICT_KEEP && codec == KILN_CODEC_KILN ? c->dict
                                                                    : NULL;
    struct repack rp = {.codec = codec,
                        .level = o->level,
                        .old_dict = c->dict,
                        .new_dict = nd,
                        .r = r,
                        .dir = c->dir};
    bool change = kiln_pack_dict_id(nd) != c->header.dict_id;
    c->progress_what = "repack";
    if (rc == KILN_OK)
        rc = rewrite(c, live, n, change, nd, repack_fn, &rp, r);
    kiln_pack_thread_cleanup();
    kiln_pack_dict_destroy(trained);
    kiln__free(live);
    return rc;
}

/* ---- merge ------------------------------------------------------------------- */

struct merge_item {
    struct kiln_key key;
    size_t input; /* index into the inputs */
    size_t entry; /* index into that input's entries */
};

static int by_key_newest(const void *a, const void *b)
{
    const struct merge_item *x = a, *y = b;
    if (x->key.hi != y->key.hi)
        return x->key.hi < y->key.hi ? -1 : 1;
    if (x->key.lo != y->key.lo)
        return x->key.lo < y->key.lo ? -1 : 1;
    return x->input > y->input ? -1 : x->input < y->input; /* newest input first */
}

static int by_input_offset(const void *a, const void *b)
{
    const struct merge_item *x = a, *y = b;
    if (x->input != y->input)
        return x->input < y->input ? -1 : 1;
    return x->entry < y->entry ? -1 : x->entry > y->entry;
}

static int merge(struct kiln_cache *out, const char *const *in_dirs, size_t n,
                 struct kiln_cache_merge_report *r)
{
    memset(r, 0, sizeof(*r));
    r->size = sizeof(*r);
    r->records_after = out->live;
    r->file_bytes_after = out->rec_end;
    KILN_TRY(writable(out));
    if (n && !in_dirs)
        return KILN_EINVAL;
    struct kiln_cache **in = kiln__calloc(n ? n : 1, sizeof(*in));
    if (!in)
        return KILN_ENOMEM;
    int rc = KILN_OK;
    struct kiln_cache_options ro = {.size = sizeof(ro),
                                    .flags = KILN_CACHE_READ_ONLY | KILN_CACHE_ANY_STAMP |
                                             KILN_CACHE_USE_DICT,
                                    .io = out->io,
                                    .today = out->today};
    size_t total = 0;
    for (size_t i = 0; i < n && rc == KILN_OK; i++) {
        /* Both refusals change nothing and are returned: logged at info,
         * the caller reports them. */
        rc = kiln_cache_open(in_dirs[i], &ro, &in[i]);
        if (rc < 0) {
            KILN_INFO("cache", "merge: cannot open %s: %s", in_dirs[i], kiln_strerror(rc));
            break;
        }
        if (in[i]->header.stamp != out->header.stamp ||
            in[i]->header.dict_id != out->header.dict_id) {
            KILN_INFO("cache",
                      "merge: %s has stamp %016" PRIx64 " dictionary %016" PRIx64 ", but %s has "
                      "%016" PRIx64 "/%016" PRIx64 "; caches of different stamps or "
                      "dictionaries cannot be merged, nothing was merged",
                      in_dirs[i], in[i]->header.stamp, in[i]->header.dict_id, out->dir,
                      out->header.stamp, out->header.dict_id);
            rc = KILN_ESTAMP;
            break;
        }
        total += in[i]->live;
    }
    r->inputs = n;
    struct merge_item *items = NULL;
    size_t m = 0;
    if (rc == KILN_OK) {
        items = kiln__malloc((total ? total : 1) * sizeof(*items));
        rc = items ? KILN_OK : KILN_ENOMEM;
    }
    for (size_t i = 0; i < n && rc == KILN_OK; i++) {
        struct kiln_cache *c = in[i];
        for (size_t e = 0; e < c->count; e++)
            if (kiln__cache_lookup(c, c->entries[e].key) == (int64_t)e)
                items[m++] = (struct merge_item){c->entries[e].key, i, e};
    }
    r->records_read = m;
    /* The newest record of each key, then read in file order per input. */
    size_t w = 0;
    if (rc == KILN_OK && m) {
        qsort(items, m, sizeof(*items), by_key_newest);
        for (size_t i = 0; i < m; i++)
            if (i == 0 || !kiln_key_equal(items[i].key, items[i - 1].key))
                items[w++] = items[i];
        qsort(items, w, sizeof(*items), by_input_offset);
    }
    r->superseded = m - w; /* each key's older records: a later input's wins */
    unsigned char *buf = NULL;
    size_t bufcap = 0;
    out->progress_what = "merge";
    for (size_t k = 0; k < w && rc == KILN_OK; k++) {
        kiln__cache_progress(out, k, w);
        struct kiln_cache *c = in[items[k].input];
        const struct kiln_cache_entry *e = &c->entries[items[k].entry];
        uint32_t day = c->last_use[items[k].entry];
        struct kiln_cache_entry oe;
        bool have = kiln_cache_find(out, e->key, &oe) == KILN_OK;
        if (have && oe.checksum == e->checksum && oe.size == e->size && oe.codec == e->codec) {
            kiln__cache_set_use(out, e->key, day, true);
            r->same++;
            continue;
        }
        int lr = read_record(c, e, &buf, &bufcap);
        if (lr == KILN_ECORRUPT_RECORD) {
            KILN_WARN("cache", "merge: %s: record at offset %" PRIu64 " is damaged; left out",
                      in_dirs[items[k].input], e->offset);
            r->damaged++;
            continue;
        }
        rc = lr;
        if (rc == KILN_OK)
            rc = kiln__cache_put_record(out, e->key, buf + KILN__CACHE_HEAD_SIZE, e->size,
                                        e->raw_size, e->codec, e->stages);
        if (rc == KILN_OK) {
            kiln__cache_set_use(out, e->key, day, false);
            r->added++;
            r->replaced += have;
        }
    }
    if (rc == KILN_OK)
        kiln__cache_progress(out, w, w);
    kiln__free(buf);
    kiln__free(items);
    for (size_t i = 0; i < n; i++)
        kiln_cache_close(in[i]);
    kiln__free(in);
    int sr = kiln_cache_sync(out);
    if (rc == KILN_OK)
        rc = sr;
    /* The cap is kept once, after the whole merge (its records are this
     * handle's: only the output's older ones can go). */
    if (rc == KILN_OK)
        rc = kiln__cache_keep_cap(out);
    r->records_after = out->live;
    r->file_bytes_after = out->rec_end;
    return rc;
}

/* ---- the public doors: the caller's growable reports (docs/abi.md) ---------- */

/* Refuses a report of size 0; NULL is fine (no report asked). */
static int report_ok(const void *report, const char *what)
{
    return report ? kiln__struct_out_check(report, what) : KILN_OK;
}

static int compact_body(struct kiln_cache *c, struct kiln_cache_rewrite_report *report)
{
    KILN_TRY(report_ok(report, "kiln_cache_rewrite_report"));
    struct kiln_cache_rewrite_report r = {.size = sizeof(r)};
    int rc = c ? compact(c, &r) : KILN_EINVAL;
    if (rc == KILN_OK)
        rc = kiln__cache_keep_cap(c);
    KILN_STRUCT_OUT(report, &r);
    return rc;
}

static int prune_body(struct kiln_cache *c, const struct kiln_cache_prune_options *o,
                      struct kiln_cache_rewrite_report *report)
{
    KILN_TRY(report_ok(report, "kiln_cache_rewrite_report"));
    struct kiln_cache_rewrite_report r = {.size = sizeof(r)};
    struct kiln_cache_prune_options opt = KILN_CACHE_PRUNE_OPTIONS_INIT;
    int rc = !c || !o ? KILN_EINVAL : KILN_STRUCT_IN(&opt, o, "kiln_cache_prune_options");
    if (rc == KILN_OK)
        rc = prune(c, &opt, &r);
    if (rc == KILN_OK)
        rc = kiln__cache_keep_cap(c);
    KILN_STRUCT_OUT(report, &r);
    return rc;
}

static int repack_body(struct kiln_cache *c, const struct kiln_cache_repack_options *o,
                       struct kiln_cache_rewrite_report *report)
{
    KILN_TRY(report_ok(report, "kiln_cache_rewrite_report"));
    struct kiln_cache_repack_options opt;
    /* A bad level is refused by kiln_pack_with, at the first stage: nothing
     * is changed then. */
    int rc = !c || !o ? KILN_EINVAL : KILN_STRUCT_IN(&opt, o, "kiln_cache_repack_options");
    struct kiln_cache_rewrite_report r = {.size = sizeof(r)};
    if (rc == KILN_OK)
        rc = repack(c, &opt, &r);
    if (rc == KILN_OK)
        rc = kiln__cache_keep_cap(c);
    KILN_STRUCT_OUT(report, &r);
    return rc;
}

static int merge_body(struct kiln_cache *out, const char *const *in_dirs, size_t n,
                      struct kiln_cache_merge_report *report)
{
    KILN_TRY(report_ok(report, "kiln_cache_merge_report"));
    if (!out)
        return KILN_EINVAL;
    struct kiln_cache_merge_report r = KILN_CACHE_MERGE_REPORT_INIT;
    int rc = merge(out, in_dirs, n, &r);
    KILN_STRUCT_OUT(report, &r);
    return rc;
}

/* ---- the public functions: the body, then the handle's error text -------- */

int kiln_cache_compact(struct kiln_cache *c, struct kiln_cache_rewrite_report *report)
{
    uint64_t m = kiln__err_mark();
    return KILN__CACHE_END(c, m, "kiln_cache_compact", compact_body(c, report));
}

int kiln_cache_prune(struct kiln_cache *c, const struct kiln_cache_prune_options *o,
                     struct kiln_cache_rewrite_report *report)
{
    uint64_t m = kiln__err_mark();
    return KILN__CACHE_END(c, m, "kiln_cache_prune", prune_body(c, o, report));
}

int kiln_cache_plan_prune_sized(struct kiln_cache *c, const struct kiln_cache_prune_options *o,
                                size_t item_size, struct kiln_cache_prune_plan *plan)
{
    uint64_t m = kiln__err_mark();
    return KILN__CACHE_END(c, m, "kiln_cache_plan_prune", plan_prune_body(c, o, item_size, plan));
}

int kiln_cache_repack(struct kiln_cache *c, enum kiln_codec codec, enum kiln_cache_dict_mode mode,
                      struct kiln_cache_rewrite_report *report)
{
    uint64_t m = kiln__err_mark();
    struct kiln_cache_repack_options o = {
        .size = sizeof(o), .codec = (uint32_t)codec, .dict = (uint32_t)mode};
    return KILN__CACHE_END(c, m, "kiln_cache_repack", repack_body(c, &o, report));
}

int kiln_cache_repack_with(struct kiln_cache *c, const struct kiln_cache_repack_options *o,
                           struct kiln_cache_rewrite_report *report)
{
    uint64_t m = kiln__err_mark();
    return KILN__CACHE_END(c, m, "kiln_cache_repack_with", repack_body(c, o, report));
}

int kiln_cache_merge(struct kiln_cache *out, const char *const *in_dirs, size_t n,
                     struct kiln_cache_merge_report *report)
{
    uint64_t m = kiln__err_mark();
    return KILN__CACHE_END(out, m, "kiln_cache_merge", merge_body(out, in_dirs, n, report));
}
