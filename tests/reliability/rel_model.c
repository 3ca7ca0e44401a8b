/*
 * rel_model.c - the reliability tests' payloads, writer loop and check (see
 * rel_model.h).
 *
 * The check reads the index file itself (through the cache's format code)
 * before anything opens the cache, because an open repairs: only the files
 * as the faulted writer left them can show an index ahead of its records.
 */
#include "rel_model.h"
#include "kiln_internal.h"
#include "cache_format.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#ifndef _WIN32
#include <time.h>
#include <unistd.h>
#endif

#define KEY_BASE 0x52454c0000000000ull

/* Whether rel_check reports what it finds as test failures. */
static bool report = true;

/* Reports one problem found by the check (or only counts it). */
#define PROBLEM(...)                                  \
    do {                                              \
        if (report)                                   \
            kt_fail(__FILE__, __LINE__, __VA_ARGS__); \
    } while (0)

struct kiln_key rel_key(uint32_t id)
{
    uint64_t seed = id;
    return (struct kiln_key){.lo = KEY_BASE | id, .hi = kiln_hash64(&seed, sizeof(seed))};
}

/* @return the id of a key made by rel_key, or -1. */
static int64_t id_of(struct kiln_key k)
{
    if ((k.lo & ~0xffffffffull) != KEY_BASE)
        return -1;
    uint32_t id = (uint32_t)k.lo;
    return kiln_key_equal(rel_key(id), k) && id < REL_MAX_IDS ? (int64_t)id : -1;
}

size_t rel_size(uint32_t id, uint32_t version)
{
    uint64_t s = ((uint64_t)id << 32) | version;
    uint64_t r = kt_rand(&s);
    /* Mostly small programs, now and then a larger one. */
    return 8 + (size_t)((r & 7) == 0 ? r % 2300 : r % 600);
}

void rel_payload(uint32_t id, uint32_t version, void *buf)
{
    size_t n = rel_size(id, version);
    unsigned char *p = buf;
    kiln__store_le32(p, id);
    kiln__store_le32(p + 4, version);
    uint64_t s = ((uint64_t)version << 32) ^ id ^ 0xa5a5a5a5ull;
    for (size_t i = 8; i < n; i += 8) {
        uint64_t r = kt_rand(&s);
        memcpy(p + i, &r, KILN_MIN((size_t)8, n - i));
    }
}

int rel_put(struct kiln_cache *c, struct rel_model *m, uint32_t id, uint32_t version)
{
    unsigned char buf[2400];
    size_t n = rel_size(id, version);
    rel_payload(id, version, buf);
    if (version > m->attempted[id])
        m->attempted[id] = version;
    int rc = kiln_cache_put(c, rel_key(id), buf, n, (uint32_t)n * 2, 0, (uint16_t)(1 + id % 3));
    if (rc == KILN_OK)
        m->pending[id] = version;
    return rc;
}

void rel_acked(struct rel_model *m)
{
    for (size_t i = 0; i < REL_MAX_IDS; i++) {
        if (m->pending[i] > m->acked[i])
            m->acked[i] = m->pending[i];
        m->pending[i] = 0;
    }
}

void rel_writer(const char *dir, const struct kiln_io *io, unsigned nrec, struct rel_model *m,
                uint32_t *version, struct rel_writer_stats *st)
{
    struct kiln_cache_options opt = {.size = sizeof(opt),
                                     .stamp = REL_STAMP,
                                     .flags = KILN_CACHE_CREATE,
                                     .io = io,
                                     .threads = 1};
    struct kiln_cache *c = NULL;
    unsigned ids = nrec - nrec / 5; /* the last fifth writes new versions of earlier keys */
    for (unsigned i = 0; i < nrec; i++) {
        if (i == nrec / 2 && c) {
            kiln_cache_close(c);
            c = NULL;
        }
        if (!c && kiln_cache_open(dir, &opt, &c) < 0) {
            c = NULL;
            st->opens_failed++;
            continue;
        }
        uint32_t id = i < ids ? i : (i * 7) % ids;
        if (rel_put(c, m, id, ++*version) < 0) {
            st->puts_failed++;
            kiln_cache_close(c);
            c = NULL;
            memset(m->pending, 0, sizeof(m->pending));
            continue;
        }
        if (i % 4 == 3 || i == nrec - 1) {
            if (kiln_cache_sync(c) == KILN_OK) {
                st->syncs_done++;
                rel_acked(m);
            } else {
                st->syncs_failed++;
                kiln_cache_close(c);
                c = NULL;
                memset(m->pending, 0, sizeof(m->pending));
            }
        }
    }
    kiln_cache_close(c);
    memset(m->pending, 0, sizeof(m->pending));
}

/* Reads a whole file with the plain table; *data NULL when it is missing. */
static int slurp(const char *dir, const char *name, void **data, size_t *n)
{
    char path[4200];
    KILN_TRY(kiln__path_join(path, sizeof(path), dir, name));
    int rc = kiln_io_read_file(kiln_io_default(), path, (size_t)1 << 30, data, n);
    if (rc == KILN_ENOENT) {
        *data = NULL;
        *n = 0;
        return KILN_OK;
    }
    return rc;
}

int rel_index_not_ahead(const char *dir, const char *what)
{
    void *idx = NULL, *rec = NULL;
    size_t in = 0, rn = 0;
    int problems = 0;
    if (slurp(dir, KILN_CACHE_INDEX_FILE, &idx, &in) < 0 ||
        slurp(dir, KILN_CACHE_RECORDS_FILE, &rec, &rn) < 0) {
        PROBLEM("%s: cannot read the cache files", what);
        free(idx);
        free(rec);
        return 1;
    }
    if (idx && in > KILN__CACHE_HEADER_SIZE) {
        size_t cap = (in - KILN__CACHE_HEADER_SIZE) / KILN__CACHE_ENTRY_SIZE + 1;
        struct kiln_cache_entry *es = malloc(cap * sizeof(*es));
        struct kiln__cache_index_parse p;
        memset(&p, 0, sizeof(p));
        if (es)
            kiln__cache_index_parse(idx, in, rn, es, &p);
        /* An index of another records file (a rewrite was cut short after
         * putting its new records file in place) is rebuilt by the open:
         * none of its entries is used. */
        struct kiln__cache_header rh;
        bool ours =
            rec &&
            kiln__cache_header_decode(rec, rn, KILN__CACHE_REC_MAGIC, &rh) == KILN__HEADER_OK &&
            p.verdict == KILN__HEADER_OK &&
            memcmp(rh.file_id, p.header.file_id, sizeof(rh.file_id)) == 0;
        /* Entries that decode and ascend are what an open could use. */
        for (size_t i = 0; es && ours && i < p.valid; i++) {
            const struct kiln_cache_entry *e = &es[i];
            struct kiln_cache_entry head;
            bool ok = e->offset + kiln__cache_rec_len(e->size) <= rn &&
                      kiln__cache_head_decode((unsigned char *)rec + e->offset,
                                              KILN__CACHE_HEAD_SIZE, &head) == KILN_OK &&
                      kiln__cache_head_matches(&head, e) &&
                      kiln__cache_record_checksum(e, (unsigned char *)rec + e->offset +
                                                         KILN__CACHE_HEAD_SIZE) == e->checksum;
            if (!ok) {
                PROBLEM("%s: index entry %zu of %zu (offset %" PRIu64 ") names no whole record "
                        "in %zu record bytes: the index is ahead",
                        what, i, p.valid, e->offset, rn);
                problems++;
                break;
            }
        }
        free(es);
    }
    free(idx);
    free(rec);
    return problems;
}

/* One loaded payload is exactly some attempted version of its key. */
static bool payload_ok(const struct rel_model *m, uint32_t id, const void *data, size_t n,
                       uint32_t *version)
{
    if (n < 8)
        return false;
    const unsigned char *p = data;
    uint32_t got_id = kiln__load_le32(p), v = kiln__load_le32(p + 4);
    if (got_id != id || v == 0 || v > m->attempted[id] || rel_size(id, v) != n)
        return false;
    unsigned char want[2400];
    rel_payload(id, v, want);
    *version = v;
    return memcmp(want, data, n) == 0;
}

int rel_check(const char *dir, const struct rel_model *m, const char *what)
{
    int problems = rel_index_not_ahead(dir, what);
    struct kiln_cache_options opt = {
        .size = sizeof(opt), .stamp = REL_STAMP, .flags = KILN_CACHE_CREATE, .threads = 2};
    struct kiln_cache *c;
    int rc = kiln_cache_open(dir, &opt, &c);
    if (rc < 0) {
        PROBLEM("%s: the cache does not open: %s", what, kiln_errname(rc));
        return problems + 1;
    }
    struct kiln_cache_entry *es = NULL;
    size_t n = 0;
    rc = kiln_cache_entries(c, &es, &n);
    struct kiln_key *keys = calloc(n + REL_MAX_IDS + 1, sizeof(*keys));
    if (rc < 0 || !keys) {
        PROBLEM("%s: out of memory", what);
        kiln_cache_entries_free(es);
        free(keys);
        kiln_cache_close(c);
        return problems + 1;
    }
    /* Every live record, then every acked key. */
    for (size_t i = 0; i < n; i++)
        keys[i] = es[i].key;
    size_t nk = n;
    for (uint32_t id = 0; id < REL_MAX_IDS; id++)
        if (m->acked[id])
            keys[nk++] = rel_key(id);
    kiln_cache_entries_free(es);
    struct kiln_cache_result *res = NULL;
    int64_t loaded = kiln_cache_load_many(c, keys, nk, 0, &res);
    if (loaded < 0) {
        PROBLEM("%s: load_many: %s", what, kiln_errname((int)loaded));
        problems++;
    }
    for (size_t i = 0; res && i < nk; i++) {
        int64_t id = id_of(keys[i]);
        const struct kiln_cache_result *r = &res[i];
        if (id < 0) {
            PROBLEM("%s: a record with a key never put", what);
            problems++;
            continue;
        }
        uint32_t v = 0;
        if (r->status == KILN_OK && !payload_ok(m, (uint32_t)id, r->data, r->size, &v)) {
            PROBLEM("%s: id %" PRId64 " loaded %zu bytes that match no put", what, id, r->size);
            problems++;
        } else if (m->acked[id] && r->status != KILN_OK) {
            PROBLEM("%s: synced id %" PRId64 " (version %u) lost: %s", what, id, m->acked[id],
                    kiln_errname(r->status));
            problems++;
        } else if (m->acked[id] && v < m->acked[id]) {
            PROBLEM("%s: synced id %" PRId64 " came back at version %u, older than %u", what, id, v,
                    m->acked[id]);
            problems++;
        }
    }
    kiln_cache_results_free(res, nk);
    free(keys);
    kiln_cache_close(c);

    struct kiln_cache_check_report rep = KILN_CACHE_CHECK_REPORT_INIT;
    rc = kiln_cache_check(dir, NULL, false, &rep);
    if (rc != KILN_OK || !rep.whole) {
        PROBLEM("%s: kiln_cache_check after the reopen: %s, index %s", what, kiln_errname(rc),
                rep.index_text);
        problems++;
    }
    return problems;
}

int rel_count_problems(const char *dir, const struct rel_model *m)
{
    report = false;
    int n = rel_check(dir, m, "count");
    report = true;
    return n;
}

void rel_quiet(bool quiet)
{
    kiln_log_set_level(quiet ? KILN_LOG_ERROR : KILN_LOG_WARN);
}

bool rel_long_run(void)
{
    const char *e = getenv("KILN_RELIABILITY_LONG");
    return e && *e && strcmp(e, "0") != 0;
}

#ifndef _WIN32
void rel_sleep_us(unsigned us)
{
    struct timespec ts = {.tv_sec = us / 1000000u, .tv_nsec = (long)(us % 1000000u) * 1000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

void rel_write_all(int fd, const void *buf, size_t n)
{
    const char *p = buf;
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            _exit(5);
        p += w;
        n -= (size_t)w;
    }
}

bool rel_read_all(int fd, void *buf, size_t n)
{
    char *p = buf;
    while (n > 0) {
        ssize_t r = read(fd, p, n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return false;
        p += r;
        n -= (size_t)r;
    }
    return true;
}
#endif
