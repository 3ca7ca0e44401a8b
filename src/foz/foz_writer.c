/*
 * foz_writer.c - writing Fossilize stream archives (kiln_foz_writer), the
 * format docs/foz.md describes and foz_reader.c reads.
 *
 * Design. An archive is written front to back: the 16-byte header when the
 * writer is made, then each entry as it is added (a 40-digit name, four
 * little-endian u32s, the stored bytes). A file writer writes under a
 * temporary name in the destination's folder, made new (KILN_IO_EXCL |
 * KILN_IO_NOFOLLOW, so nothing already there is written through, and two
 * writers never share one), and only kiln_foz_writer_finish syncs it and
 * renames it over the destination (or, when none was there as the writer
 * was made, to it without replacing what appeared there since: a cache
 * another kiln made at that name is never written over); destroying an
 * unfinished writer removes
 * it. So the destination is at every moment absent, the old file or the
 * whole new archive, never a partial one.
 *
 * Every (tag, hash) written is remembered with a 64-bit digest of its
 * payload: adding the same object again writes nothing, and a different
 * payload under a name already written is refused (KILN_EEXIST), so every
 * hash in an archive names exactly one object. The first failed write is
 * kept and returned by every later call, so a caller may check once, at
 * finish.
 */
#include "foz_private.h"

#include <inttypes.h>
#include <stdatomic.h>
#include <zlib.h>

/* Entry flags of the format (docs/foz.md). */
#define FOZ_STORE_PLAIN   1u
#define FOZ_STORE_DEFLATE 2u

/* The bytes of an entry's head: the name and four u32s. */
#define ENTRY_HEAD 56u

struct seen {
    uint64_t tag;
    uint64_t hash;
    uint64_t digest; /* kiln_hash64 of the payload */
    bool used;
};

struct kiln_foz_writer {
    const struct kiln_io *io;
    int fd;     /* -1 for a memory writer */
    char *path; /* the destination (file writer) */
    char *tmp;  /* the temporary file until finish renames it */
    uint8_t *mem;
    size_t mem_cap;
    uint64_t size; /* bytes written so far */
    struct seen *set;
    size_t nset, capset; /* capset: a power of two, or 0 */
    uint64_t entries;
    int err; /* the first write error, returned from then on */
    bool finished;
    bool dest_existed; /* a file was at `path` when the writer was made */
};

/* ---------------------------------------------------------------------------
 * The set of written names
 * ------------------------------------------------------------------------ */

static size_t slot_of(uint64_t tag, uint64_t hash, size_t cap)
{
    uint64_t k[2] = {tag, hash};
    return (size_t)(kiln_hash64(k, sizeof(k)) & (cap - 1));
}

static struct seen *set_find(const struct kiln_foz_writer *w, uint64_t tag, uint64_t hash)
{
    if (!w->capset)
        return NULL;
    for (size_t i = slot_of(tag, hash, w->capset);; i = (i + 1) & (w->capset - 1)) {
        struct seen *s = &w->set[i];
        if (!s->used)
            return NULL;
        if (s->tag == tag && s->hash == hash)
            return s;
    }
}

static void set_put(struct seen *set, size_t cap, struct seen v)
{
    size_t i = slot_of(v.tag, v.hash, cap);
    while (set[i].used)
        i = (i + 1) & (cap - 1);
    set[i] = v;
}

static int set_add(struct kiln_foz_writer *w, uint64_t tag, uint64_t hash, uint64_t digest)
{
    /* At most half full, so probes stay short and always end. */
    if ((w->nset + 1) * 2 > w->capset) {
        size_t cap = w->capset ? w->capset * 2 : 64;
        struct seen *grown = kiln__calloc(cap, sizeof(*grown));
        if (!grown)
            return KILN_ENOMEM;
        for (size_t i = 0; i < w->capset; i++)
            if (w->set[i].used)
                set_put(grown, cap, w->set[i]);
        kiln__free(w->set);
        w->set = grown;
        w->capset = cap;
    }
    set_put(w->set, w->capset, (struct seen){tag, hash, digest, true});
    w->nset++;
    return KILN_OK;
}

/* ---------------------------------------------------------------------------
 * Output
 * ------------------------------------------------------------------------ */

static int emit(struct kiln_foz_writer *w, const void *p, size_t n)
{
    if (w->err)
        return w->err;
    if (w->fd < 0) {
        if (w->size + n > w->mem_cap) {
            size_t cap = w->mem_cap ? w->mem_cap : 4096;
            while (cap < w->size + n)
                cap *= 2;
            uint8_t *grown = kiln__realloc(w->mem, cap);
            if (!grown)
                return w->err = KILN_ENOMEM;
            w->mem = grown;
            w->mem_cap = cap;
        }
        memcpy(w->mem + w->size, p, n);
    } else {
        int rc = kiln_io_write_full(w->io, w->fd, p, n, w->size);
        if (rc < 0) {
            KILN_ERROR("foz", "%s: cannot write the archive: %s", w->tmp, kiln_strerror(rc));
            return w->err = rc;
        }
    }
    w->size += n;
    return KILN_OK;
}

static int write_header(struct kiln_foz_writer *w)
{
    static const uint8_t magic[12] = {0x81, 'F', 'O', 'S', 'S', 'I', 'L', 'I', 'Z', 'E', 'D', 'B'};
    uint8_t head[16] = {0};
    memcpy(head, magic, sizeof(magic));
    head[15] = KILN_FOZ_WRITE_VERSION;
    return emit(w, head, sizeof(head));
}

/* Makes the temporary file beside `path`: a new name each try, made new. */
static int create_tmp(struct kiln_foz_writer *w)
{
    static _Atomic unsigned counter;
    size_t cap = strlen(w->path) + 32;
    w->tmp = kiln__malloc(cap);
    if (!w->tmp)
        return KILN_ENOMEM;
    int rc = KILN_EEXIST;
    for (int tries = 0; tries < 16 && rc == KILN_EEXIST; tries++) {
        uint64_t seed[3] = {kiln_now_ns(), (uint64_t)(uintptr_t)w, counter++};
        snprintf(w->tmp, cap, "%s.tmp-%016" PRIx64, w->path, kiln_hash64(seed, sizeof(seed)));
        rc = w->io->open(w->io, w->tmp,
                         KILN_IO_RDWR | KILN_IO_CREATE | KILN_IO_EXCL | KILN_IO_NOFOLLOW, &w->fd);
    }
    if (rc < 0) {
        KILN_ERROR("foz", "%s: cannot make a temporary file beside it: %s", w->path,
                   kiln_strerror(rc));
        w->fd = -1;
        kiln__free(w->tmp);
        w->tmp = NULL;
    }
    return rc;
}

int kiln_foz_writer_create(const struct kiln_io *io, const char *path, struct kiln_foz_writer **out)
{
    if (!path || !out)
        return KILN_EINVAL;
    *out = NULL;
    if (!path || !*path)
        return KILN_EINVAL;
    struct kiln_foz_writer *w = kiln__calloc(1, sizeof(*w));
    if (!w)
        return KILN_ENOMEM;
    w->io = io ? io : kiln_io_default();
    w->fd = -1;
    w->path = kiln__strdup(path);
    int rc = w->path ? create_tmp(w) : KILN_ENOMEM;
    if (rc == 0) {
        /* Whether a file is at the destination now (a folder or a FIFO
         * there counts: the rename meets it); an open that fails otherwise
         * is this writer's failure, as any other I/O error. */
        int fd;
        int probe = w->io->open(w->io, path, KILN_IO_READ, &fd);
        if (probe == KILN_OK)
            w->io->close(w->io, fd);
        w->dest_existed = probe != KILN_ENOENT;
        if (probe < 0 && probe != KILN_ENOENT && probe != KILN_EFORMAT && probe != KILN_EACCES)
            rc = probe;
    }
    if (rc == 0)
        rc = write_header(w);
    if (rc < 0) {
        kiln_foz_writer_destroy(w);
        return rc;
    }
    *out = w;
    return KILN_OK;
}

int kiln_foz_writer_create_memory(struct kiln_foz_writer **out)
{
    if (!out)
        return KILN_EINVAL;
    *out = NULL;
    struct kiln_foz_writer *w = kiln__calloc(1, sizeof(*w));
    if (!w)
        return KILN_ENOMEM;
    w->fd = -1;
    int rc = write_header(w);
    if (rc < 0) {
        kiln_foz_writer_destroy(w);
        return rc;
    }
    *out = w;
    return KILN_OK;
}

int kiln_foz_writer_lookup(const struct kiln_foz_writer *w, uint64_t tag, uint64_t hash,
                           const void *payload, size_t size)
{
    if (!w || (!payload && size))
        return KILN_EINVAL;
    const struct seen *s = set_find(w, tag, hash);
    if (!s)
        return 0;
    return s->digest == kiln_hash64(payload, size) ? 1 : KILN_EEXIST;
}

bool kiln_foz_writer_has(const struct kiln_foz_writer *w, uint64_t tag, uint64_t hash)
{
    if (!w)
        return false;
    return set_find(w, tag, hash) != NULL;
}

int kiln_foz_writer_add(struct kiln_foz_writer *w, uint64_t tag, uint64_t hash, const void *payload,
                        size_t size, unsigned flags)
{
    if (!w || (!payload && size))
        return KILN_EINVAL;
    if (w->err)
        return w->err;
    if (w->finished || (flags & ~(unsigned)KILN_FOZ_ENTRY_PLAIN))
        return KILN_EINVAL;
    if (size > KILN__FOZ_MAX_INFLATED)
        return KILN_ERANGE; /* no reader would take it */
    int known = kiln_foz_writer_lookup(w, tag, hash, payload, size);
    if (known != 0)
        return known == 1 ? 0 : known;
    bool plain = flags & KILN_FOZ_ENTRY_PLAIN;
    uLongf stored = plain ? (uLongf)size : compressBound((uLong)size);
    uint8_t *z = NULL;
    if (!plain) {
        z = kiln__malloc(stored ? stored : 1);
        if (!z)
            return KILN_ENOMEM;
        if (compress2(z, &stored, payload, (uLong)size, Z_DEFAULT_COMPRESSION) != Z_OK) {
            kiln__free(z);
            return KILN_ENOMEM; /* zlib fails only for want of memory here */
        }
    }
    const uint8_t *bytes = plain ? payload : z;
    uint8_t head[ENTRY_HEAD + 1];
    snprintf((char *)head, 41, "%024" PRIx64 "%016" PRIx64, tag, hash);
    kiln__store_le32(head + 40, (uint32_t)stored);
    kiln__store_le32(head + 44, plain ? FOZ_STORE_PLAIN : FOZ_STORE_DEFLATE);
    kiln__store_le32(head + 48, (uint32_t)crc32(crc32(0L, Z_NULL, 0), bytes, (uInt)stored));
    kiln__store_le32(head + 52, (uint32_t)size);
    int rc = set_add(w, tag, hash, kiln_hash64(payload, size));
    if (rc == 0)
        rc = emit(w, head, ENTRY_HEAD);
    if (rc == 0)
        rc = emit(w, bytes, stored);
    kiln__free(z);
    if (rc < 0)
        return rc;
    w->entries++;
    return 1;
}

/* ---------------------------------------------------------------------------
 * Shader modules
 * ------------------------------------------------------------------------ */

int kiln_foz_module_encode(uint64_t hash, const uint32_t *words, size_t nwords, uint32_t flags,
                           uint8_t **payload, size_t *size)
{
    if (!words || !payload || !size)
        return KILN_EINVAL;
    *payload = NULL;
    *size = 0;
    /* The words themselves have no bound here (a reader bounds the
     * payload, which kiln_foz_writer_add checks); only the buffer's size
     * must not overflow. */
    if (nwords == 0 || nwords > (SIZE_MAX - 256) / 5)
        return KILN_ERANGE;
    /* The varint area: 7 bits a byte from the low bits up, the top bit set
     * on every byte but a word's last. At most 5 bytes a word. */
    size_t vcap = nwords * 5;
    uint8_t *v = kiln__malloc(vcap);
    if (!v)
        return KILN_ENOMEM;
    size_t vn = 0;
    for (size_t i = 0; i < nwords; i++) {
        uint32_t x = words[i];
        while (x >= 0x80) {
            v[vn++] = (uint8_t)(x | 0x80);
            x >>= 7;
        }
        v[vn++] = (uint8_t)x;
    }
    char json[256];
    int jn = snprintf(
        json, sizeof(json),
        "{\"version\":%d,\"shaderModules\":{\"%016" PRIx64
        "\":{\"varintOffset\":0,\"varintSize\":%zu,\"codeSize\":%zu,\"flags\":%" PRIu32 "}}}",
        KILN_FOZ_WRITE_VERSION, hash, vn, nwords * 4, flags);
    /* The JSON, its NUL, then the varint area. */
    uint8_t *p = kiln__malloc((size_t)jn + 1 + vn);
    if (!p) {
        kiln__free(v);
        return KILN_ENOMEM;
    }
    memcpy(p, json, (size_t)jn + 1);
    memcpy(p + jn + 1, v, vn);
    kiln__free(v);
    *payload = p;
    *size = (size_t)jn + 1 + vn;
    return KILN_OK;
}

void kiln_foz_payload_free(uint8_t *payload)
{
    kiln__free(payload);
}

int kiln_foz_writer_add_module(struct kiln_foz_writer *w, uint64_t hash, const uint32_t *words,
                               size_t nwords, uint32_t flags, unsigned entry_flags)
{
    if (!w || !words)
        return KILN_EINVAL;
    if (w->err)
        return w->err;
    uint8_t *p;
    size_t n;
    KILN_TRY(kiln_foz_module_encode(hash, words, nwords, flags, &p, &n));
    int rc = kiln_foz_writer_add(w, KILN_FOZ_TAG_SHADER_MODULE, hash, p, n, entry_flags);
    kiln__free(p);
    return rc;
}

/* ---------------------------------------------------------------------------
 * Finishing
 * ------------------------------------------------------------------------ */

uint64_t kiln_foz_writer_entries(const struct kiln_foz_writer *w)
{
    if (!w)
        return 0;
    return w->entries;
}

int kiln_foz_writer_finish(struct kiln_foz_writer *w, uint64_t *bytes)
{
    if (!w)
        return KILN_EINVAL;
    if (w->err)
        return w->err;
    if (w->finished)
        return KILN_EINVAL;
    if (w->fd >= 0) {
        int rc = w->io->fsync(w->io, w->fd);
        int rc_close = w->io->close(w->io, w->fd);
        w->fd = -1;
        if (rc == 0)
            rc = rc_close;
        /* A destination that was not there is published without replacing
         * whatever appeared at its name since (a cache another kiln made). */
        if (rc == 0)
            rc = w->dest_existed ? w->io->rename(w->io, w->tmp, w->path)
                                 : kiln_io_rename_new(w->io, w->tmp, w->path);
        if (rc == KILN_EEXIST) {
            KILN_ERROR("foz",
                       "%s: a file appeared there while the archive was written: left as "
                       "it is, nothing written",
                       w->path);
        } else if (rc < 0) {
            KILN_ERROR("foz", "%s: cannot finish the archive: %s", w->path, kiln_strerror(rc));
        }
        if (rc < 0) {
            w->io->unlink(w->io, w->tmp);
            kiln__free(w->tmp);
            w->tmp = NULL;
            return w->err = rc;
        }
        kiln__free(w->tmp);
        w->tmp = NULL;
        /* The rename is durable once the folder is synced; the archive is
         * whole either way, so a failure here is only logged. */
        char dir[4096];
        int rc_dir = kiln__path_dir(dir, sizeof(dir), w->path);
        if (rc_dir == KILN_OK)
            rc_dir = w->io->fsync_dir(w->io, dir);
        if (rc_dir < 0 && rc_dir != KILN_ENOTSUP)
            KILN_WARN("foz", "%s: the archive's folder could not be synced: %s", w->path,
                      kiln_strerror(rc_dir));
    }
    w->finished = true;
    if (bytes)
        *bytes = w->size;
    return KILN_OK;
}

const uint8_t *kiln_foz_writer_data(const struct kiln_foz_writer *w, size_t *size)
{
    if (!w || !size)
        return NULL;
    *size = w->path ? 0 : (size_t)w->size;
    return w->path ? NULL : w->mem;
}

void kiln_foz_writer_destroy(struct kiln_foz_writer *w)
{
    if (!w)
        return;
    if (w->fd >= 0)
        w->io->close(w->io, w->fd);
    if (w->tmp)
        w->io->unlink(w->io, w->tmp); /* unfinished: no partial archive is left */
    kiln__free(w->tmp);
    kiln__free(w->path);
    kiln__free(w->mem);
    kiln__free(w->set);
    kiln__free(w);
}
