/*
 * cache_scan.c - reading a records file head by head, the way an open does
 * without a usable index (and the way `kiln cache check` reads everything).
 *
 * Design: the scan keeps a window of the file in memory and refills it with
 * one large pread whenever the next head falls outside it, so a file of
 * small records costs a few large reads, not one small read per record.
 * A head is believed only when its magic and head check match and its
 * record ends inside the file. When a head is not whole, the scan searches
 * forward for the next whole head: damage in the middle (a flipped bit in a
 * head) costs only the damaged record, never the records after it. Only when
 * no whole head follows is the rest a torn tail - the one case where an
 * open cuts bytes off.
 */
#include "cache_internal.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define SCAN_WINDOW (1u << 20)

struct window {
    const struct kiln_io *io;
    int fd;
    unsigned char *buf;
    uint64_t off; /* file offset of buf[0] */
    size_t len;   /* valid bytes in buf */
};

/* Makes [off, off + n) available in the window (n <= SCAN_WINDOW); it may
 * come back shorter at the end of the file. @return a pointer or NULL with
 * *rc set on an I/O error. */
static const unsigned char *window_get(struct window *w, uint64_t off, size_t n, size_t *got,
                                       int *rc)
{
    if (off >= w->off && off + n <= w->off + w->len) {
        *got = n;
        return w->buf + (off - w->off);
    }
    size_t have = 0;
    while (have < SCAN_WINDOW) {
        int64_t r = w->io->pread(w->io, w->fd, w->buf + have, SCAN_WINDOW - have, off + have);
        if (r < 0) {
            *rc = (int)r;
            return NULL;
        }
        if (r == 0)
            break;
        have += (size_t)r;
    }
    w->off = off;
    w->len = have;
    *got = KILN_MIN(n, have);
    return w->buf;
}

/* Looks for the next whole head at or after `from`. @return its offset, or
 * `size` when there is none. */
static uint64_t find_next_head(struct window *w, uint64_t from, uint64_t size,
                               struct kiln_cache_entry *e, int *rc)
{
    unsigned char magic[4];
    kiln__store_le32(magic, KILN__CACHE_HEAD_MAGIC);
    uint64_t off = from;
    while (off + KILN__CACHE_HEAD_SIZE <= size) {
        size_t got;
        size_t want = (size_t)KILN_MIN((uint64_t)SCAN_WINDOW, size - off);
        const unsigned char *p = window_get(w, off, want, &got, rc);
        if (!p)
            return size;
        if (got < KILN__CACHE_HEAD_SIZE)
            break;
        const unsigned char *hit = kiln__memmem(p, got, magic, sizeof(magic));
        if (!hit) {
            /* The magic may straddle the window's end: step back 3 bytes. */
            off += got - (sizeof(magic) - 1);
            continue;
        }
        uint64_t at = off + (uint64_t)(hit - p);
        size_t hgot;
        const unsigned char *h = window_get(w, at, KILN__CACHE_HEAD_SIZE, &hgot, rc);
        if (!h)
            return size;
        /* Records start 8-byte aligned: a magic elsewhere is payload. */
        if ((at & 7) == 0 && hgot == KILN__CACHE_HEAD_SIZE &&
            kiln__cache_head_decode(h, hgot, e) == KILN_OK &&
            at + kiln__cache_rec_len(e->size) <= size)
            return at;
        off = at + 1;
    }
    return size;
}

/* @return whether a whole head (one whose record fits in the file) starts
 * at `off`. */
static bool head_at(struct window *w, uint64_t off, uint64_t size, int *rc)
{
    struct kiln_cache_entry e;
    size_t got;
    if (size < KILN__CACHE_HEAD_SIZE || off > size - KILN__CACHE_HEAD_SIZE)
        return false;
    const unsigned char *h = window_get(w, off, KILN__CACHE_HEAD_SIZE, &got, rc);
    return h && got == KILN__CACHE_HEAD_SIZE && kiln__cache_head_decode(h, got, &e) == KILN_OK &&
           off + kiln__cache_rec_len(e.size) <= size;
}

/* Reads the payload of the record at e->offset and checks its checksum.
 * @return 1 when it matches, 0 when not, or an I/O error. */
static int payload_ok(struct window *w, const struct kiln_cache_entry *e, unsigned char **big)
{
    const unsigned char *payload;
    int rc = KILN_OK;
    if (e->size <= SCAN_WINDOW - KILN__CACHE_HEAD_SIZE) {
        size_t got;
        payload = window_get(w, e->offset, KILN__CACHE_HEAD_SIZE + e->size, &got, &rc);
        if (!payload)
            return rc;
        if (got < KILN__CACHE_HEAD_SIZE + e->size)
            return KILN_EIO_SHORTREAD;
        payload += KILN__CACHE_HEAD_SIZE;
    } else {
        kiln__free(*big);
        *big = kiln__malloc(e->size);
        if (!*big)
            return KILN_ENOMEM;
        KILN_TRY(kiln_io_read_full(w->io, w->fd, *big, e->size, e->offset + KILN__CACHE_HEAD_SIZE));
        payload = *big;
    }
    return kiln__cache_record_checksum(e, payload) == e->checksum;
}

int kiln__cache_scan(const struct kiln_io *io, int fd, const char *path, uint64_t from,
                     uint64_t size, bool verify, kiln__cache_scan_fn fn, void *user,
                     struct kiln__cache_scan *out)
{
    memset(out, 0, sizeof(*out));
    out->end = from;
    struct window w = {.io = io, .fd = fd, .buf = kiln__malloc(SCAN_WINDOW)};
    if (!w.buf)
        return KILN_ENOMEM;
    unsigned char *big = NULL; /* a payload larger than the window */
    int rc = KILN_OK;
    uint64_t off = from;
    while (off < size) {
        struct kiln_cache_entry e = {0};
        size_t got = 0;
        const unsigned char *h = NULL;
        if (size - off >= KILN__CACHE_HEAD_SIZE) {
            h = window_get(&w, off, KILN__CACHE_HEAD_SIZE, &got, &rc);
            if (!h)
                break;
        }
        bool whole = h && got == KILN__CACHE_HEAD_SIZE &&
                     kiln__cache_head_decode(h, got, &e) == KILN_OK &&
                     off + kiln__cache_rec_len(e.size) <= size;
        int ok = 1;
        if (whole) {
            e.offset = off;
            /* A record with no whole head after it may be the last one a
             * crash left half-written with its size already grown: its
             * payload must check out, else it is part of the torn tail. */
            uint64_t end = off + kiln__cache_rec_len(e.size);
            bool last = !head_at(&w, end, size, &rc);
            if (rc < 0)
                break;
            if (verify || last) {
                ok = payload_ok(&w, &e, &big);
                if (ok < 0) {
                    rc = ok;
                    break;
                }
                whole = ok || !last;
            }
        }
        if (!whole) {
            uint64_t next = find_next_head(&w, off + 1, size, &e, &rc);
            if (rc < 0)
                break;
            if (next >= size) {
                out->tail_bytes = size - off;
                break;
            }
            KILN_WARN("cache",
                      "%s: %" PRIu64 " damaged bytes at offset %" PRIu64
                      " hold no whole record; skipped to the next record",
                      path, next - off, off);
            out->damaged_bytes += next - off;
            off = next;
            continue;
        }
        out->bad_records += !ok;
        out->records++;
        rc = fn(user, &e, ok);
        if (rc < 0)
            break;
        off += kiln__cache_rec_len(e.size);
        out->end = off;
    }
    kiln__free(big);
    kiln__free(w.buf);
    return rc < 0 ? rc : KILN_OK;
}

int kiln__cache_last_ok(const struct kiln_io *io, int fd, const struct kiln_cache_entry *e,
                        uint64_t size)
{
    uint64_t end = e->offset + kiln__cache_rec_len(e->size);
    unsigned char hb[KILN__CACHE_HEAD_SIZE];
    struct kiln_cache_entry next;
    if (size >= KILN__CACHE_HEAD_SIZE && end <= size - KILN__CACHE_HEAD_SIZE &&
        kiln_io_read_full(io, fd, hb, sizeof(hb), end) == KILN_OK &&
        kiln__cache_head_decode(hb, sizeof(hb), &next) == KILN_OK &&
        end + kiln__cache_rec_len(next.size) <= size)
        return 1;
    unsigned char *payload = kiln__malloc(e->size ? e->size : 1);
    if (!payload)
        return KILN_ENOMEM;
    int rc = kiln_io_read_full(io, fd, payload, e->size, e->offset + KILN__CACHE_HEAD_SIZE);
    if (rc == KILN_OK)
        rc = kiln__cache_record_checksum(e, payload) == e->checksum;
    kiln__free(payload);
    return rc == KILN_EIO_SHORTREAD ? 0 : rc;
}

int kiln__cache_scan_gap(const struct kiln_io *io, int fd, uint64_t from, uint64_t to,
                         uint64_t *records)
{
    *records = 0;
    struct window w = {.io = io, .fd = fd, .buf = kiln__malloc(SCAN_WINDOW)};
    if (!w.buf)
        return KILN_ENOMEM;
    int rc = KILN_OK;
    uint64_t off = from;
    while (off < to && rc == KILN_OK) {
        struct kiln_cache_entry e;
        uint64_t at = head_at(&w, off, to, &rc) ? off : find_next_head(&w, off + 1, to, &e, &rc);
        if (rc < 0 || at >= to)
            break;
        size_t got;
        const unsigned char *h = window_get(&w, at, KILN__CACHE_HEAD_SIZE, &got, &rc);
        if (!h || kiln__cache_head_decode(h, got, &e) < 0)
            break;
        (*records)++;
        off = at + kiln__cache_rec_len(e.size);
    }
    kiln__free(w.buf);
    return rc < 0 ? rc : KILN_OK;
}
