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
 *  - An entry's stored size is not covered by its CRC, so a damaged entry
 *    may also say where the next one starts wrongly. A bad entry costs that
 *    entry only: it is reported and skipped, and when the bytes where the
 *    next entry should start are no entry (no 40-digit hexadecimal name),
 *    the reader resynchronises: it searches forward for a name followed by
 *    sane flags and sizes, and accepts it only when its payload checks out
 *    (CRC when present, exact inflation; a plain entry without a CRC must
 *    also end at another name or the archive's end). Every damaged entry
 *    and every skipped stretch is counted (stats) and logged as one line.
 *  - The searches check at most 8 times the archive's size (and 16 MiB) of
 *    payload bytes per pass (spend), so heads crafted to overlap cannot make
 *    them quadratic; past that, the rest of the archive is skipped, counted.
 *  - A size that runs past the end is the cut-off tail only when nothing
 *    says otherwise: when the bytes that are there check out as the
 *    payload, or a whole entry follows, the size is damaged and the entry
 *    is counted damaged, not ignored.
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
    uint64_t pos;         /* the start of the next entry */
    int sticky;           /* a fatal error every later call returns */
    bool done;            /* the end (or the cut-off tail) was reached */
    bool trusted;         /* pos was reached through a checked entry (or is the first) */
    uint64_t resync_from; /* where a search starts when pos is not trusted */
    uint64_t logged_to;   /* damage before this offset was logged (kept by a rewind) */
    uint64_t budget;      /* payload bytes the searches may still check (spend) */
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
    uint8_t *p = kiln__realloc(*buf, n);
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

/* The payload bytes a reading pass may check while searching for entries:
 * linear in the archive's size, so that no file (heads crafted to overlap,
 * each claiming most of the file) can make the searches quadratic. */
static uint64_t search_budget(uint64_t size)
{
    return 8 * size + ((uint64_t)16 << 20);
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
    foz->trusted = true;
    foz->budget = search_budget(foz->size);
    foz->stats.end = FOZ_HEADER_BYTES;
    return KILN_OK;
}

static struct kiln_foz *foz_new(const char *name)
{
    struct kiln_foz *foz = kiln__calloc(1, sizeof(*foz));
    if (!foz)
        return NULL;
    foz->fd = -1;
    foz->name = kiln__strdup(name ? name : "(memory)");
    if (!foz->name) {
        kiln__free(foz);
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
    rc = foz->io->file_size(foz->io, foz->fd, &foz->size);
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
    kiln__free(foz->stored);
    kiln__free(foz->inflated);
    kiln__free(foz->name);
    kiln__free(foz);
}

int kiln_foz_rewind(struct kiln_foz *foz)
{
    if (!foz)
        return KILN_EINVAL;
    unsigned version = foz->stats.version;
    memset(&foz->stats, 0, sizeof(foz->stats));
    foz->stats.version = version;
    foz->stats.file_size = foz->size;
    foz->stats.end = FOZ_HEADER_BYTES;
    foz->pos = FOZ_HEADER_BYTES;
    foz->trusted = true;
    foz->budget = search_budget(foz->size);
    foz->sticky = 0;
    foz->done = false;
    return KILN_OK;
}

void kiln_foz_get_stats(const struct kiln_foz *foz, struct kiln_foz_stats *stats)
{
    if (!foz || !stats || kiln__struct_out_check(stats, "kiln_foz_stats") < 0)
        return;
    struct kiln_foz_stats st = foz->stats;
    st.size = sizeof(st);
    KILN_STRUCT_OUT(stats, &st);
}

const char *kiln_foz_name(const struct kiln_foz *foz)
{
    if (!foz)
        return NULL;
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

/* Reports the current entry damaged and moves past it. `next` is where
 * its stored size says the next entry starts; the size is not covered by
 * the CRC, so that position is not trusted until an entry is read there. */
/* Whether damage at `off` is new: an archive read twice (listed, then
 * imported) says each damage once. */
static bool first_time(struct kiln_foz *foz, uint64_t off)
{
    if (off < foz->logged_to)
        return false;
    foz->logged_to = off + 1;
    return true;
}

static int damaged(struct kiln_foz *foz, const struct kiln_foz_entry *e, uint64_t next,
                   const char *why)
{
    if (first_time(foz, e->offset))
        KILN_WARN("foz",
                  "%s: entry at offset %" PRIu64 " (%s, hash %016" PRIx64
                  ") is damaged: %s; skipped",
                  foz->name, e->offset, kiln_foz_tag_name(e->tag), e->hash, why);
    foz->stats.damaged++;
    foz->pos = next;
    foz->trusted = false;
    /* A wrong size may point past the next entry: search from here. */
    foz->resync_from = e->offset + 1;
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

/* An entry head, decoded. */
struct head {
    uint64_t tag, hash;
    uint32_t stored, flags, crc, size;
};

/* Decodes a head: @return whether its name is 40 hexadecimal digits.
 * Fossilize reads the tag from the last 16 of its 24 digits; the first 8
 * are still checked, as part of the framing. */
static bool parse_head(const uint8_t *h, struct head *hd)
{
    uint64_t pad;
    if (!kiln__foz_parse_hex((const char *)h, 8, &pad) ||
        !kiln__foz_parse_hex((const char *)h + 8, 16, &hd->tag) ||
        !kiln__foz_parse_hex((const char *)h + 24, 16, &hd->hash))
        return false;
    hd->stored = kiln__load_le32(h + 40);
    hd->flags = kiln__load_le32(h + 44);
    hd->crc = kiln__load_le32(h + 48);
    hd->size = kiln__load_le32(h + 52);
    return true;
}

/* Whether a head's flags and sizes could be an entry's, with `left` bytes
 * after the head: checked before any of its bytes are read. */
static bool head_sane(const struct head *hd, uint64_t left)
{
    if (hd->stored > left)
        return false;
    if (hd->flags == FOZ_FLAG_PLAIN)
        return hd->stored == hd->size;
    if (hd->flags == FOZ_FLAG_DEFLATE)
        return (uint64_t)hd->size <= KILN__FOZ_MAX_INFLATED &&
               (uint64_t)hd->size <= (uint64_t)hd->stored * KILN__FOZ_MAX_RATIO + 64;
    return false;
}

/*
 * Checks the `stored` bytes at `body` as the payload of head `hd`: its CRC
 * when not zero, and for a deflate entry that it inflates to exactly
 * hd->size. Sets *data and *size to the payload (valid until the next read).
 * @return 0; KILN_ECORRUPT_RECORD with *why; or an I/O or memory error.
 */
static int check_payload(struct kiln_foz *foz, const struct head *hd, uint64_t body,
                         uint32_t stored, const uint8_t **data, size_t *size, const char **why)
{
    const uint8_t *src;
    if (!foz->mem)
        KILN_TRY(reserve(&foz->stored, &foz->stored_cap, stored));
    KILN_TRY(read_at(foz, body, stored, foz->stored, &src));
    if (hd->crc != 0 && (uint32_t)crc32(0L, src, stored) != hd->crc) {
        *why = "CRC32 mismatch";
        return KILN_ECORRUPT_RECORD;
    }
    if (hd->flags == FOZ_FLAG_PLAIN) {
        if (stored != hd->size) {
            *why = "plain entry whose two sizes differ";
            return KILN_ECORRUPT_RECORD;
        }
        *data = src;
        *size = stored;
        return KILN_OK;
    }
    if (hd->flags != FOZ_FLAG_DEFLATE) {
        *why = "unknown flags";
        return KILN_ECORRUPT_RECORD;
    }
    KILN_TRY(inflate_entry(foz, src, stored, hd->size, why));
    *data = foz->inflated;
    *size = hd->size;
    return KILN_OK;
}

/* Takes the cost of checking a head's payload from the budget. @return
 * false when it is spent (the searches then find nothing more). */
static bool spend(struct kiln_foz *foz, const struct head *hd)
{
    uint64_t cost = (uint64_t)hd->stored + FOZ_HEAD_BYTES;
    if (hd->flags == FOZ_FLAG_DEFLATE)
        cost += hd->size;
    if (cost > foz->budget) {
        foz->budget = 0;
        return false;
    }
    foz->budget -= cost;
    return true;
}

/* Whether the bytes at `off` start an entry name (or are the archive's end). */
static bool name_or_end_at(struct kiln_foz *foz, uint64_t off)
{
    if (off == foz->size)
        return true;
    if (foz->size - off < FOZ_HEAD_BYTES)
        return false;
    uint8_t buf[FOZ_HEAD_BYTES];
    const uint8_t *h;
    struct head hd;
    return read_at(foz, off, FOZ_HEAD_BYTES, buf, &h) == KILN_OK && parse_head(h, &hd);
}

/*
 * Whether a whole, checked entry starts at `off`: a name, sane flags and
 * sizes, and a payload that checks out (its CRC, or its inflation to
 * exactly the declared size). A plain entry without a CRC proves nothing by
 * itself, so it must also end where another name, or the archive, begins.
 * @return 1 yes, 0 no, or an I/O or memory error.
 */
static int entry_at(struct kiln_foz *foz, uint64_t off, const uint8_t *h)
{
    struct head hd;
    if (!parse_head(h, &hd) || !head_sane(&hd, foz->size - off - FOZ_HEAD_BYTES) ||
        !spend(foz, &hd))
        return 0;
    const uint8_t *data;
    size_t size;
    const char *why;
    int rc = check_payload(foz, &hd, off + FOZ_HEAD_BYTES, hd.stored, &data, &size, &why);
    if (rc == KILN_ECORRUPT_RECORD)
        return 0;
    if (rc < 0)
        return rc;
    if (hd.flags == FOZ_FLAG_PLAIN && hd.crc == 0)
        return name_or_end_at(foz, off + FOZ_HEAD_BYTES + hd.stored);
    return 1;
}

/* Bytes of the archive scanned per read while searching for an entry. */
#define FOZ_SCAN_BYTES 65536u

/*
 * Searches forward from `from` for the next whole, checked entry (entry_at).
 * @return 1 with its offset in *found, 0 when none follows, or an I/O or
 * memory error.
 */
static int find_entry(struct kiln_foz *foz, uint64_t from, uint64_t *found)
{
    uint8_t *win = NULL;
    size_t win_cap = 0;
    int rc = 0;
    for (uint64_t at = from;
         rc == 0 && foz->budget > 0 && at < foz->size && foz->size - at >= FOZ_HEAD_BYTES;) {
        /* A window of heads that start in [at, at + FOZ_SCAN_BYTES). */
        uint64_t left = foz->size - at;
        size_t n = (size_t)KILN_MIN(left, (uint64_t)FOZ_SCAN_BYTES + FOZ_HEAD_BYTES - 1);
        const uint8_t *w;
        if (!foz->mem && (rc = reserve(&win, &win_cap, n)) < 0)
            break;
        if ((rc = read_at(foz, at, n, win, &w)) < 0)
            break;
        size_t starts = n - FOZ_HEAD_BYTES + 1;
        /* A name is 40 hexadecimal digits in a row: count the run ending
         * at each byte, so each byte is looked at once. */
        size_t run = 0;
        for (size_t j = 0; j < n && rc == 0 && foz->budget > 0; j++) {
            run = kiln__hexval(w[j]) >= 0 ? run + 1 : 0;
            if (run < FOZ_NAME_BYTES)
                continue;
            size_t i = j + 1 - FOZ_NAME_BYTES;
            if (i >= starts)
                break;
            /* entry_at may reuse the reader's buffers, not `win`. */
            rc = entry_at(foz, at + i, w + i);
            if (rc == 1)
                *found = at + i;
        }
        at += starts;
    }
    kiln__free(win);
    return rc;
}

/*
 * Goes on after bytes at foz->pos that are no entry: from the next whole,
 * checked entry, or the archive's end when none follows. The skipped bytes
 * are counted and logged as one line; `lost` says that an entry started at
 * foz->pos (its head was damaged), and is counted as a damaged entry.
 * @return KILN_ECORRUPT_RECORD when an entry was lost, 0 to read on, or an
 * I/O or memory error.
 */
static int resync(struct kiln_foz *foz, bool lost, struct kiln_foz_entry *e)
{
    uint64_t from = foz->pos;
    uint64_t found = foz->size;
    int rc = find_entry(foz, lost ? from + 1 : foz->resync_from, &found);
    if (rc < 0)
        return rc;
    uint64_t skipped = found > from ? found - from : 0;
    foz->stats.resyncs++;
    foz->stats.skipped_bytes += skipped;
    const char *then = found < foz->size ? "read on from the next whole entry, at offset"
                       : foz->budget == 0
                           ? "the search stopped (it checked 8 times the archive's size): the "
                             "rest is skipped, to the end at offset"
                           : "no whole entry follows: the end is at offset";
    if (first_time(foz, from)) {
        if (lost)
            KILN_WARN("foz",
                      "%s: entry at offset %" PRIu64 " has a damaged head; skipped, %s %" PRIu64
                      " (%" PRIu64 " bytes skipped)",
                      foz->name, from, then, found, skipped);
        else
            KILN_WARN("foz",
                      "%s: no entry at offset %" PRIu64
                      ", where the damaged entry before it said the next one starts; %s %" PRIu64
                      " (%" PRIu64 " more bytes skipped)",
                      foz->name, from, then, found, skipped);
    }
    foz->pos = found;
    foz->stats.end = found;
    foz->trusted = true; /* an entry checked whole starts there, or the end */
    if (found == foz->size)
        foz->done = true;
    if (!lost)
        return 0;
    foz->stats.damaged++;
    e->tag = UINT64_MAX; /* unknown: its name is damaged */
    e->offset = from;
    return KILN_ECORRUPT_RECORD;
}

/* Reads the entry at foz->pos (see kiln_foz_next). @return as it does, or
 * 2 to look again at the new foz->pos. */
static int next_entry(struct kiln_foz *foz, struct kiln_foz_entry *e)
{
    if (foz->pos == foz->size) {
        foz->done = true;
        return 0;
    }
    if (!foz->trusted) {
        /* After a damaged entry, its size led here: an entry is taken here
         * only when it is framed as one (a 40-digit name, and stored bytes
         * inside the archive); it is then read, whole or damaged, as any
         * other. Else the size was wrong, and the next entry is searched
         * for from the damaged one on. */
        bool framed = false;
        if (foz->size - foz->pos >= FOZ_HEAD_BYTES) {
            const uint8_t *h0;
            struct head hd0;
            KILN_TRY(read_at(foz, foz->pos, FOZ_HEAD_BYTES, foz->head, &h0));
            framed = parse_head(h0, &hd0) && hd0.stored <= foz->size - foz->pos - FOZ_HEAD_BYTES;
        }
        if (!framed) {
            int rc = resync(foz, false, e);
            return rc < 0 ? rc : 2;
        }
        foz->trusted = true;
    }
    if (foz->size - foz->pos < FOZ_HEAD_BYTES) {
        cut_off(foz, FOZ_HEAD_BYTES);
        return 0;
    }

    const uint8_t *h;
    KILN_TRY(read_at(foz, foz->pos, FOZ_HEAD_BYTES, foz->head, &h));
    struct head hd;
    if (!parse_head(h, &hd)) {
        /* The entry before ended here, so an entry starts here: it is lost. */
        int rc = resync(foz, true, e);
        return rc == 0 ? 2 : rc;
    }
    e->tag = hd.tag;
    e->hash = hd.hash;
    e->offset = foz->pos;
    uint64_t body = foz->pos + FOZ_HEAD_BYTES;
    if (hd.stored > foz->size - body) {
        /* Either the cut-off tail the format allows, or a damaged size:
         * damage when the bytes that are there check out as the payload
         * (only the size is wrong) or a whole entry follows. */
        uint64_t found = foz->size;
        uint32_t there = (uint32_t)(foz->size - body);
        const uint8_t *data;
        size_t size;
        const char *why = NULL;
        /* A cut-off entry's bytes fail its CRC or inflation, and a cut-off
         * plain entry has fewer bytes than its other size says. */
        struct head cost = hd;
        cost.stored = there;
        int rc = spend(foz, &cost) ? check_payload(foz, &hd, body, there, &data, &size, &why)
                                   : KILN_ECORRUPT_RECORD;
        if (rc < 0 && rc != KILN_ECORRUPT_RECORD)
            return rc;
        if (rc == KILN_OK && (hd.crc != 0 || hd.flags == FOZ_FLAG_DEFLATE || there == hd.size))
            return damaged(foz, e, foz->size, "its stored size runs past the end of the archive");
        rc = find_entry(foz, body, &found);
        if (rc < 0)
            return rc;
        if (rc == 1) {
            foz->stats.skipped_bytes += found - foz->pos;
            rc = damaged(foz, e, found, "its stored size runs past the end of the archive");
            foz->trusted = true; /* found is a whole, checked entry */
            return rc;
        }
        cut_off(foz, FOZ_HEAD_BYTES + (uint64_t)hd.stored);
        return 0;
    }
    uint64_t next = body + hd.stored;
    const uint8_t *data;
    size_t size;
    const char *why = NULL;
    int rc = check_payload(foz, &hd, body, hd.stored, &data, &size, &why);
    if (rc == KILN_ECORRUPT_RECORD)
        return damaged(foz, e, next, why);
    if (rc < 0)
        return rc;
    e->data = data;
    e->size = size;
    foz->pos = next;
    foz->trusted = true;
    foz->stats.end = next;
    foz->stats.entries++;
    return 1;
}

int kiln_foz_next(struct kiln_foz *foz, struct kiln_foz_entry *e)
{
    if (!foz || !e)
        return KILN_EINVAL;
    for (;;) {
        memset(e, 0, sizeof(*e));
        if (foz->sticky)
            return foz->sticky;
        if (foz->done)
            return 0;
        int rc = next_entry(foz, e);
        if (rc == 2)
            continue; /* resynchronised: read the entry found */
        if (rc < 0 && rc != KILN_ECORRUPT_RECORD)
            foz->sticky = rc;
        return rc;
    }
}

enum kiln_foz_kind kiln_foz_kind_of(uint64_t tag)
{
    switch (tag) {
    case KILN_FOZ_TAG_GRAPHICS_PIPELINE:
        return KILN_FOZ_KIND_GRAPHICS;
    case KILN_FOZ_TAG_COMPUTE_PIPELINE:
        return KILN_FOZ_KIND_COMPUTE;
    case KILN_FOZ_TAG_RAYTRACING_PIPELINE:
        return KILN_FOZ_KIND_RAYTRACING;
    default:
        return KILN_FOZ_KIND_COUNT;
    }
}

const char *kiln_foz_kind_name(enum kiln_foz_kind kind)
{
    switch (kind) {
    case KILN_FOZ_KIND_GRAPHICS:
        return "graphics";
    case KILN_FOZ_KIND_COMPUTE:
        return "compute";
    case KILN_FOZ_KIND_RAYTRACING:
        return "raytracing";
    default:
        return "unknown";
    }
}

const char *kiln__foz_pipeline_label(char *buf, size_t cap, enum kiln_foz_kind kind, uint64_t hash,
                                     struct kiln_key k)
{
    snprintf(buf, cap, "program %016" PRIx64 "%016" PRIx64 " (%s pipeline %016" PRIx64 ")", k.hi,
             k.lo, kiln_foz_kind_name(kind), hash);
    return buf;
}
