/*
 * cache_format.h - the cache's on-disk layout: encoders and parsers.
 *
 * Private to src/cache; the fuzz targets include it too, because every
 * parser of bytes from disk has one. All integers are little-endian. The
 * layout is described for people in docs/cache-format.md; keep the two in
 * step.
 *
 *   file header (64 bytes, both files)
 *     0  magic[8]      "KILNKPC\n" (records) / "KILNKPX\n" (index)
 *     8  u32 version   2 (1: written before issue 17; still read and appended to)
 *    12  u32 unit      bytes of a record head / of an index entry (48)
 *    16  u64 stamp     the translator stamp
 *    24  u64 dict_id   the packing dictionary's id (0: none)
 *    32  file_id[16]   random id of the records file (copied into the index)
 *   version 2 (version 1: bytes 48..56 are 0, 56 holds XXH3-64 of 0..56):
 *    48  u32 session   random, new at the first sync of a writer that appended
 *    52  u32 generation how many times the session changed
 *    56  u32 previous  the session before it
 *    60  u32 check     low 32 bits of XXH3-64 of bytes 0..48
 *
 *   The identity (session, generation, previous) lies outside the check so
 *   that a writer can rewrite those 12 bytes in place: whatever a torn write
 *   leaves there only fails to match the other file's, which costs an index
 *   rebuild, never the cache. The index carries the identity of the records
 *   file it was written for; an open uses it only when it is the records'
 *   identity or the one before (an index left behind by a crash), so an
 *   index copied from a sibling (a cp -r of the cache, both written since)
 *   is refused.
 *
 *   record head (48 bytes), followed by `size` payload bytes and zero
 *   bytes up to a multiple of 8 (see kiln__cache_rec_len)
 *     0  u32 magic     "KREC"
 *     4  u8  codec
 *     5  u8  flags     0
 *     6  u16 stages
 *     8  u64 key.lo
 *    16  u64 key.hi
 *    24  u32 size      payload bytes
 *    28  u32 raw_size
 *    32  u64 checksum  XXH3-64 of the payload, seeded with XXH3-64 of bytes 0..32
 *    40  u64 head_check XXH3-64 of bytes 0..40
 *
 *   index entry (48 bytes)
 *     0  u64 key.lo
 *     8  u64 key.hi
 *    16  u64 offset    of the record's head in the records file
 *    24  u32 size
 *    28  u32 raw_size
 *    32  u64 checksum  (the record's)
 *    40  u8  codec
 *    41  u8  flags     0
 *    42  u16 stages
 *    44  u32 entry_check low 32 bits of XXH3-64 of bytes 0..44
 *
 * The head check lets a scan tell a record head from damage without reading
 * the payload; the entry check does the same for one index entry.
 */
#ifndef KILN_CACHE_FORMAT_H
#define KILN_CACHE_FORMAT_H

#include "kiln_internal.h"
#include "kiln/cache.h"

#define KILN__CACHE_VERSION      2u
#define KILN__CACHE_VERSION_1    1u  /* no identity; read, appended to, rewritten as 2 */
#define KILN__CACHE_IDENTITY_AT  48u /* offset of the identity in both headers */
#define KILN__CACHE_IDENTITY_LEN 12u
#define KILN__CACHE_HEADER_SIZE  64u
#define KILN__CACHE_HEAD_SIZE    48u
#define KILN__CACHE_ENTRY_SIZE   48u
#define KILN__CACHE_REC_MAGIC    "KILNKPC\n"
#define KILN__CACHE_IDX_MAGIC    "KILNKPX\n"
#define KILN__CACHE_HEAD_MAGIC   0x4345524Bu /* "KREC" */

/* Bytes a record takes in the file: its head, its payload, and zero bytes up
 * to the next multiple of 8, so that every record head and payload starts
 * 8-byte aligned (a loaded payload can be read as 32-bit SPIR-V words in
 * place). */
static inline uint64_t kiln__cache_rec_len(uint32_t size)
{
    return KILN__CACHE_HEAD_SIZE + (((uint64_t)size + 7) & ~(uint64_t)7);
}

/* A decoded file header. */
struct kiln__cache_header {
    uint32_t version;
    uint32_t unit;
    uint64_t stamp;
    uint64_t dict_id;
    uint8_t file_id[16];
    uint32_t session;    /* version 2: random, new when a writer first syncs new records */
    uint32_t generation; /* version 2: how many times the session changed */
    uint32_t previous;   /* version 2: the session before */
};

/* Encodes a header's identity into out[KILN__CACHE_IDENTITY_LEN], for the
 * in-place write at KILN__CACHE_IDENTITY_AT. */
void kiln__cache_identity_encode(void *out, const struct kiln__cache_header *h);

/* @return whether an index header's identity fits the records header's:
 * the same, or the one before (version 1 headers carry none: they fit each
 * other). */
bool kiln__cache_identity_fits(const struct kiln__cache_header *index,
                               const struct kiln__cache_header *records);

/* What kiln__cache_header_decode says of 64 bytes. */
enum kiln__cache_header_verdict {
    KILN__HEADER_OK = 0,
    KILN__HEADER_ZERO,    /* all zero bytes: a file whose creation never finished */
    KILN__HEADER_FOREIGN, /* another magic: not this kind of kiln file */
    KILN__HEADER_DAMAGED, /* our magic, but the check does not match */
    KILN__HEADER_VERSION, /* our magic and a whole header, but another version or unit */
};

/* Encodes a header with `magic` (8 bytes) into out[64]. */
void kiln__cache_header_encode(void *out, const char *magic, const struct kiln__cache_header *h);

/* Decodes a header of `n` bytes (fewer than 64 is never OK). */
enum kiln__cache_header_verdict kiln__cache_header_decode(const void *buf, size_t n,
                                                          const char *magic,
                                                          struct kiln__cache_header *h);

/* The checksum a record head carries for `payload`. */
uint64_t kiln__cache_record_checksum(const struct kiln_cache_entry *e, const void *payload);

/* Encodes the head of record `e` (e->checksum already set) into out[48]. */
void kiln__cache_head_encode(void *out, const struct kiln_cache_entry *e);

/*
 * Decodes a record head of `n` bytes into *e (offset is left as it was).
 * @return 0, or KILN_ECORRUPT_RECORD when n is short, the magic or head
 * check does not match, or the size is over KILN_CACHE_MAX_PAYLOAD.
 */
int kiln__cache_head_decode(const void *buf, size_t n, struct kiln_cache_entry *e);

/* @return whether a decoded head describes the same record as an entry. */
bool kiln__cache_head_matches(const struct kiln_cache_entry *head,
                              const struct kiln_cache_entry *entry);

/* Encodes an index entry into out[48]. */
void kiln__cache_entry_encode(void *out, const struct kiln_cache_entry *e);

/* Decodes an index entry. @return 0 or KILN_ECORRUPT_INDEX (bad check). */
int kiln__cache_entry_decode(const void *buf, struct kiln_cache_entry *e);

/* What kiln__cache_index_parse found. */
struct kiln__cache_index_parse {
    struct kiln__cache_header header;
    enum kiln__cache_header_verdict verdict;
    size_t whole;        /* whole entries in the file */
    size_t partial;      /* bytes of a cut-short entry after them */
    size_t valid;        /* leading entries that decode and ascend */
    const char *problem; /* NULL, or why the index cannot be used as it is */
};

/*
 * Parses an index file image: its header, then entries, each decoded and
 * checked to start after the previous record's end and (when rec_size is
 * not 0) to end inside a records file of rec_size bytes. Decoded entries
 * go to `entries` (room for (n - 64) / 48 of them; may be NULL to only
 * check). Parsing stops at the first entry that fails.
 * @return 0 when the whole index is usable (`problem` NULL), else
 * KILN_ECORRUPT_INDEX with `problem` naming why; `valid` says how many
 * leading entries were fine either way.
 */
int kiln__cache_index_parse(const void *data, size_t n, uint64_t rec_size,
                            struct kiln_cache_entry *entries, struct kiln__cache_index_parse *out);

/*
 * Decodes programs.kpm (the cache's settings, laid out in cache_meta.c):
 * `n` bytes at `data`. @return NULL with the cap in *max_size (0: none),
 * or why the file cannot be used (a constant string; *max_size is 0 then).
 */
const char *kiln__cache_meta_parse(const void *data, size_t n, uint64_t *max_size);

#endif /* KILN_CACHE_FORMAT_H */
