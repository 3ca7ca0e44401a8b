/*
 * foz_reader.c - the Fossilize stream archive reader.
 *
 * Design. An archive is read front to back, one entry at a time, from a
 * file (through the kiln_io table, never whole) or from a caller's buffer.
 * The reader keeps one position: the start of the next entry. Invariants:
 *
 *  - An entry is delivered only whole and checked: all of its stored bytes
 *    lie inside the archive, its CRC32 matches when it is not zero, and it
 *    inflates to exactly the size its head declares. So a caller never sees
 *    a byte the archive did not vouch for.
 *  - An entry whose bytes run past the end of the archive is the cut-off
 *    tail the format allows: it ends the archive, quietly (stats say so).
 *    Only the last entry can be cut off, because every entry's extent is
 *    checked against the archive size before anything is read.
 *  - An entry's stored size is not covered by its CRC. A damaged entry is
 *    therefore reported and skipped, and the next entry's name (40
 *    hexadecimal characters) is what tells whether the framing still holds:
 *    a name that is not hexadecimal stops the reader for good
 *    (KILN_ECORRUPT), since nothing after it can be located.
 *  - Sizes are checked before allocation: stored bytes against the
 *    archive's size, inflated bytes against KILN__FOZ_MAX_INFLATED and the
 *    deflate expansion bound, so a damaged head cannot ask for gigabytes.
 */
#include "foz_private.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#define FOZ_HEADER_BYTES 16
#define FOZ_NAME_BYTES   40
#define FOZ_HEAD_BYTES   (FOZ_NAME_BYTES + 16)

enum { FOZ_FLAG_PLAIN = 1, FOZ_FLAG_DEFLATE = 2 };

static const unsigned char foz_magic[12] = {0x81, 'F', 'O', 'S', 'S', 'I',
                                            'L',  'I', 'Z', 'E', 'D', 'B'};

struct kiln_foz {
    char *name;
    /* Exactly one source: a file through `io`, or `mem`. */
    const struct kiln_io *io;
    int fd;
    const uint8_t *mem;
    uint64_t size;
    uint64_t pos; /* the start of the next entry */
    int sticky;   /* a fatal error every later call returns */
    bool done;    /* the end (or the cut-off tail) was reached */
    uint8_t head[FOZ_HEAD_BYTES];
    uint8_t *stored; /* file source: the stored bytes of the current entry */
    size_t stored_cap;
    uint8_t *inflated; /* the current deflate entry after inflation */
    size_t inflated_cap;
    struct kiln_foz_stats stats;
};

/* Makes `*buf` hold at least n bytes (at least 1). */
static int reserve(uint8_t **buf, size_t *cap, size_t n)
{
    if (n == 0)
        n = 1;
    if (*cap >= n)
        return KILN_OK;
    uint8_t *p = realloc(*buf, n);
    if (!p)
        return KILN_ENOMEM;
    *buf = p;
    *cap = n;
    return KILN_OK;
}

/* Points *out at n bytes of the archive at `off`; the caller has checked
 * that they lie inside it. A file source reads them into `buf`. */
static int read_at(struct kiln_foz *foz, uint64_t off, size_t n, uint8_t *buf, const uint8_t **out)
{
    if (off > foz->size || n > foz->size - off)
        return KILN_EIO_SHORTREAD;
    if (foz->mem) {
        *out = foz->mem + off;
        return KILN_OK;
    }
    int rc = kiln_io_read_full(foz->io, foz->fd, buf, n, off);
    if (rc < 0) {
        KILN_ERROR("foz", "%s: read of %zu bytes at offset %" PRIu64 " failed: %s", foz->name, n,
                   off, kiln_strerror(rc));
        return rc;
    }
    *out = buf;
    return KILN_OK;
}

/* Checks the archive's header. What is wrong is logged at info only: the
 * open returns it, and its caller reports it (see kiln_foz_open). */
static int check_header(struct kiln_foz *foz)
{
    const uint8_t *h;
    if (foz->size < FOZ_HEADER_BYTES) {
        KILN_INFO("foz", "%s: not a Fossilize archive: %" PRIu64 " bytes, shorter than its header",
                  foz->name, foz->size);
        return KILN_EFORMAT;
    }
    KILN_TRY(read_at(foz, 0, FOZ_HEADER_BYTES, foz->head, &h));
    if (memcmp(h, foz_magic, sizeof(foz_magic)) != 0) {
        KILN_INFO("foz", "%s: not a Fossilize archive (bad magic)", foz->name);
        return KILN_EFORMAT;
    }
    if (h[12] != 0 || h[13] != 0 || h[14] != 0) {
        KILN_INFO("foz", "%s: Fossilize archive header has non-zero reserved bytes", foz->name);
        return KILN_EFORMAT;
    }
    unsigned version = h[15];
    if (version < KILN_FOZ_VERSION_MIN || version > KILN_FOZ_VERSION_MAX) {
        KILN_INFO("foz", "%s: Fossilize archive format version %u, kiln reads versions %d to %d",
                  foz->name, version, KILN_FOZ_VERSION_MIN, KILN_FOZ_VERSION_MAX);
        return KILN_EFORMAT;
    }
    foz->stats.version = version;
    foz->stats.file_size = foz->size;
    foz->pos = FOZ_HEADER_BYTES;
    foz->stats.end = FOZ_HEADER_BYTES;
    return KILN_OK;
}

static struct kiln_foz *foz_new(const char *name)
{
    struct kiln_foz *foz = calloc(1, sizeof(*foz));
    if (!foz)
        return NULL;
    foz->fd = -1;
    foz->name = strdup(name ? name : "(memory)");
    if (!foz->name) {
        free(foz);
        return NULL;
    }
    return foz;
}

int kiln_foz_open(const struct kiln_io *io, const char *path, struct kiln_foz **out)
{
    if (!path || !out)
        return KILN_EINVAL;
    *out = NULL;
    struct kiln_foz *foz = foz_new(path);
    if (!foz)
        return KILN_ENOMEM;
    foz->io = io ? io : kiln_io_default();
    int rc = foz->io->open(foz->io, path, KILN_IO_READ, &foz->fd);
    if (rc < 0) {
        KILN_INFO("foz", "%s: cannot open: %s", path, kiln_strerror(rc));
        foz->fd = -1;
        kiln_foz_close(foz);
        return rc;
    }
    rc = foz->io->size(foz->io, foz->fd, &foz->size);
    if (rc < 0)
        KILN_INFO("foz", "%s: cannot read its size: %s", path, kiln_strerror(rc));
    if (rc == KILN_OK)
        rc = check_header(foz);
    if (rc < 0) {
        kiln_foz_close(foz);
        return rc;
    }
    *out = foz;
    return KILN_OK;
}

int kiln_foz_open_memory(const void *data, size_t size, const char *name, struct kiln_foz **out)
{
    if ((!data && size) || !out)
        return KILN_EINVAL;
    *out = NULL;
    struct kiln_foz *foz = foz_new(name);
    if (!foz)
        return KILN_ENOMEM;
    static const uint8_t empty[1];
    foz->mem = data ? data : empty;
    foz->size = size;
    int rc = check_header(foz);
    if (rc < 0) {
        kiln_foz_close(foz);
        return rc;
    }
    *out = foz;
    return KILN_OK;
}

void kiln_foz_close(struct kiln_foz *foz)
{
    if (!foz)
        return;
    if (foz->fd >= 0)
        foz->io->close(foz->io, foz->fd);
    free(foz->stored);
    free(foz->inflated);
    free(foz->name);
    free(foz);
}

int kiln_foz_rewind(struct kiln_foz *foz)
{
    unsigned version = foz->stats.version;
    memset(&foz->stats, 0, sizeof(foz->stats));
    foz->stats.version = version;
    foz->stats.file_size = foz->size;
    foz->stats.end = FOZ_HEADER_BYTES;
    foz->pos = FOZ_HEADER_BYTES;
    foz->sticky = 0;
    foz->done = false;
    return KILN_OK;
}

void kiln_foz_get_stats(const struct kiln_foz *foz, struct kiln_foz_stats *stats)
{
    *stats = foz->stats;
}

const char *kiln_foz_name(const struct kiln_foz *foz)
{
    return foz->name;
}

const char *kiln_foz_tag_name(uint64_t tag)
{
    static const char *const names[KILN_FOZ_TAG_COUNT] = {
        "application info",     "sampler",          "descriptor set layout",
        "pipeline layout",      "shader module",    "render pass",
        "graphics pipeline",    "compute pipeline", "application link",
        "ray-tracing pipeline",
    };
    return tag < KILN_FOZ_TAG_COUNT ? names[tag] : "unknown";
}

/* Reports the current entry damaged and moves past it. */
static int damaged(struct kiln_foz *foz, const struct kiln_foz_entry *e, uint64_t next,
                   const char *why)
{
    KILN_WARN("foz",
              "%s: entry at offset %" PRIu64 " (%s, hash %016" PRIx64 ") is damaged: %s; skipped",
              foz->name, e->offset, kiln_foz_tag_name(e->tag), e->hash, why);
    foz->stats.damaged++;
    foz->pos = next;
    foz->stats.end = next;
    return KILN_ECORRUPT_RECORD;
}

static void cut_off(struct kiln_foz *foz, uint64_t need)
{
    KILN_INFO("foz",
              "%s: last entry at offset %" PRIu64 " is cut off (%" PRIu64 " of %" PRIu64
              " bytes); ignored",
              foz->name, foz->pos, foz->size - foz->pos, need);
    foz->stats.truncated = true;
    foz->stats.truncated_at = foz->pos;
    foz->done = true;
}

/* Inflates `n` stored bytes into foz->inflated, expecting exactly `want`. */
static int inflate_entry(struct kiln_foz *foz, const uint8_t *src, size_t n, uint32_t want,
                         const char **why)
{
    if ((uint64_t)want > KILN__FOZ_MAX_INFLATED ||
        (uint64_t)want > (uint64_t)n * KILN__FOZ_MAX_RATIO + 64) {
        *why = "declared inflated size is impossible for its stored size";
        return KILN_ECORRUPT_RECORD;
    }
    KILN_TRY(reserve(&foz->inflated, &foz->inflated_cap, want));
    uLongf out_n = want;
    uLong in_n = (uLong)n;
    int zr = uncompress2(foz->inflated, &out_n, src, &in_n);
    if (zr == Z_MEM_ERROR)
        return KILN_ENOMEM;
    if (zr == Z_BUF_ERROR) {
        *why = "inflates to more bytes than declared";
        return KILN_ECORRUPT_RECORD;
    }
    if (zr != Z_OK) {
        *why = "deflate stream is invalid";
        return KILN_ECORRUPT_RECORD;
    }
    if (out_n != want) {
        *why = "inflates to fewer bytes than declared";
        return KILN_ECORRUPT_RECORD;
    }
    if (in_n != n) {
        *why = "stored bytes continue after the deflate stream";
        return KILN_ECORRUPT_RECORD;
    }
    return KILN_OK;
}

int kiln_foz_next(struct kiln_foz *foz, struct kiln_foz_entry *e)
{
    memset(e, 0, sizeof(*e));
    if (foz->sticky)
        return foz->sticky;
    if (foz->done)
        return 0;
    if (foz->pos == foz->size) {
        foz->done = true;
        return 0;
    }
    if (foz->size - foz->pos < FOZ_HEAD_BYTES) {
        cut_off(foz, FOZ_HEAD_BYTES);
        return 0;
    }

    const uint8_t *h;
    int rc = read_at(foz, foz->pos, FOZ_HEAD_BYTES, foz->head, &h);
    if (rc < 0)
        return foz->sticky = rc;
    /* Fossilize reads the tag from the last 16 of its 24 digits; the first
     * 8 are still checked, as part of the framing. */
    uint64_t pad;
    if (!kiln__foz_parse_hex((const char *)h, 8, &pad) ||
        !kiln__foz_parse_hex((const char *)h + 8, 16, &e->tag) ||
        !kiln__foz_parse_hex((const char *)h + 24, 16, &e->hash)) {
        KILN_WARN("foz",
                  "%s: entry at offset %" PRIu64 " has no valid name; the archive is damaged "
                  "from here on and is not read further",
                  foz->name, foz->pos);
        return foz->sticky = KILN_ECORRUPT;
    }
    e->offset = foz->pos;
    uint32_t stored = kiln__load_le32(h + 40);
    uint32_t flags = kiln__load_le32(h + 44);
    uint32_t crc = kiln__load_le32(h + 48);
    uint32_t size = kiln__load_le32(h + 52);
    uint64_t body = foz->pos + FOZ_HEAD_BYTES;
    if (stored > foz->size - body) {
        cut_off(foz, FOZ_HEAD_BYTES + (uint64_t)stored);
        return 0;
    }
    uint64_t next = body + stored;

    if (flags != FOZ_FLAG_PLAIN && flags != FOZ_FLAG_DEFLATE)
        return damaged(foz, e, next, "unknown flags");
    if (flags == FOZ_FLAG_PLAIN && stored != size)
        return damaged(foz, e, next, "plain entry whose two sizes differ");

    const uint8_t *src;
    if (!foz->mem) {
        rc = reserve(&foz->stored, &foz->stored_cap, stored);
        if (rc < 0)
            return foz->sticky = rc;
    }
    rc = read_at(foz, body, stored, foz->stored, &src);
    if (rc < 0)
        return foz->sticky = rc;
    if (crc != 0 && (uint32_t)crc32(0L, src, stored) != crc)
        return damaged(foz, e, next, "CRC32 mismatch");

    if (flags == FOZ_FLAG_PLAIN) {
        e->data = src;
        e->size = stored;
    } else {
        const char *why = NULL;
        rc = inflate_entry(foz, src, stored, size, &why);
        if (rc == KILN_ECORRUPT_RECORD)
            return damaged(foz, e, next, why);
        if (rc < 0)
            return foz->sticky = rc;
        e->data = foz->inflated;
        e->size = size;
    }
    foz->pos = next;
    foz->stats.end = next;
    foz->stats.entries++;
    return 1;
}
