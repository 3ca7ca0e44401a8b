/*
 * cache_format.c - encoding and parsing of the cache's file headers, record
 * heads and index entries (layout in cache_format.h).
 *
 * Every decoder here takes untrusted bytes: it checks lengths before it
 * reads, verifies the check field before it believes any other field, and
 * bounds every size it returns, so a damaged or hostile file can only make
 * the cache treat it as damage.
 */
#include "cache_format.h"

#include <string.h>
#include <xxhash.h>

void kiln__cache_identity_encode(void *out, const struct kiln__cache_header *h)
{
    unsigned char *b = out;
    kiln__store_le32(b, h->session);
    kiln__store_le32(b + 4, h->generation);
    kiln__store_le32(b + 8, h->previous);
}

bool kiln__cache_identity_fits(const struct kiln__cache_header *index,
                               const struct kiln__cache_header *records)
{
    if (index->version != records->version)
        return false;
    if (index->session == records->session && index->generation == records->generation)
        return true;
    return index->session == records->previous && index->generation + 1 == records->generation;
}

void kiln__cache_header_encode(void *out, const char *magic, const struct kiln__cache_header *h)
{
    unsigned char *b = out;
    memset(b, 0, KILN__CACHE_HEADER_SIZE);
    memcpy(b, magic, 8);
    kiln__store_le32(b + 8, h->version);
    kiln__store_le32(b + 12, h->unit);
    kiln__store_le64(b + 16, h->stamp);
    kiln__store_le64(b + 24, h->dict_id);
    memcpy(b + 32, h->file_id, 16);
    if (h->version == KILN__CACHE_VERSION_1) {
        kiln__store_le64(b + 56, XXH3_64bits(b, 56));
        return;
    }
    kiln__cache_identity_encode(b + KILN__CACHE_IDENTITY_AT, h);
    kiln__store_le32(b + 60, (uint32_t)XXH3_64bits(b, KILN__CACHE_IDENTITY_AT));
}

enum kiln__cache_header_verdict kiln__cache_header_decode(const void *buf, size_t n,
                                                          const char *magic,
                                                          struct kiln__cache_header *h)
{
    const unsigned char *b = buf;
    size_t look = KILN_MIN(n, (size_t)KILN__CACHE_HEADER_SIZE);
    bool zero = true;
    for (size_t i = 0; i < look && zero; i++)
        zero = b[i] == 0;
    if (zero)
        return KILN__HEADER_ZERO;
    if (n < 8 || memcmp(b, magic, 8) != 0)
        return KILN__HEADER_FOREIGN;
    if (n < KILN__CACHE_HEADER_SIZE)
        return KILN__HEADER_DAMAGED;
    /* Version 1 checks all 56 bytes, version 2 the 48 before its identity. */
    bool whole1 = kiln__load_le64(b + 56) == XXH3_64bits(b, 56);
    uint64_t check2 = XXH3_64bits(b, KILN__CACHE_IDENTITY_AT);
    bool whole2 = kiln__load_le32(b + 60) == (uint32_t)check2;
    if (!whole1 && !whole2)
        return KILN__HEADER_DAMAGED;
    h->version = kiln__load_le32(b + 8);
    h->unit = kiln__load_le32(b + 12);
    h->stamp = kiln__load_le64(b + 16);
    h->dict_id = kiln__load_le64(b + 24);
    memcpy(h->file_id, b + 32, 16);
    h->session = 0;
    h->generation = 0;
    h->previous = 0;
    bool v1 = whole1 && h->version == KILN__CACHE_VERSION_1 &&
              kiln__load_le64(b + KILN__CACHE_IDENTITY_AT) == 0;
    bool v2 = whole2 && h->version == KILN__CACHE_VERSION;
    if ((!v1 && !v2) || h->unit != KILN__CACHE_HEAD_SIZE)
        return KILN__HEADER_VERSION;
    if (v2) {
        h->session = kiln__load_le32(b + KILN__CACHE_IDENTITY_AT);
        h->generation = kiln__load_le32(b + KILN__CACHE_IDENTITY_AT + 4);
        h->previous = kiln__load_le32(b + KILN__CACHE_IDENTITY_AT + 8);
    }
    return KILN__HEADER_OK;
}

/* Bytes 0..32 of a head: what the record checksum seeds from. */
static void head_fields(unsigned char b[32], const struct kiln_cache_entry *e)
{
    kiln__store_le32(b, KILN__CACHE_HEAD_MAGIC);
    b[4] = e->codec;
    b[5] = 0;
    kiln__store_le16(b + 6, e->stages);
    kiln__store_le64(b + 8, e->key.lo);
    kiln__store_le64(b + 16, e->key.hi);
    kiln__store_le32(b + 24, e->size);
    kiln__store_le32(b + 28, e->raw_size);
}

uint64_t kiln__cache_record_checksum(const struct kiln_cache_entry *e, const void *payload)
{
    unsigned char b[32];
    head_fields(b, e);
    return XXH3_64bits_withSeed(e->size ? payload : b, e->size, XXH3_64bits(b, sizeof(b)));
}

void kiln__cache_head_encode(void *out, const struct kiln_cache_entry *e)
{
    unsigned char *b = out;
    head_fields(b, e);
    kiln__store_le64(b + 32, e->checksum);
    kiln__store_le64(b + 40, XXH3_64bits(b, 40));
}

int kiln__cache_head_decode(const void *buf, size_t n, struct kiln_cache_entry *e)
{
    const unsigned char *b = buf;
    if (n < KILN__CACHE_HEAD_SIZE || kiln__load_le32(b) != KILN__CACHE_HEAD_MAGIC ||
        kiln__load_le64(b + 40) != XXH3_64bits(b, 40))
        return KILN_ECORRUPT_RECORD;
    uint32_t size = kiln__load_le32(b + 24);
    if (size > KILN_CACHE_MAX_PAYLOAD || b[5] != 0)
        return KILN_ECORRUPT_RECORD;
    e->codec = b[4];
    e->stages = kiln__load_le16(b + 6);
    e->key.lo = kiln__load_le64(b + 8);
    e->key.hi = kiln__load_le64(b + 16);
    e->size = size;
    e->raw_size = kiln__load_le32(b + 28);
    e->checksum = kiln__load_le64(b + 32);
    return KILN_OK;
}

bool kiln__cache_head_matches(const struct kiln_cache_entry *head,
                              const struct kiln_cache_entry *entry)
{
    return kiln_key_equal(head->key, entry->key) && head->size == entry->size &&
           head->raw_size == entry->raw_size && head->checksum == entry->checksum &&
           head->codec == entry->codec && head->stages == entry->stages;
}

void kiln__cache_entry_encode(void *out, const struct kiln_cache_entry *e)
{
    unsigned char *b = out;
    kiln__store_le64(b, e->key.lo);
    kiln__store_le64(b + 8, e->key.hi);
    kiln__store_le64(b + 16, e->offset);
    kiln__store_le32(b + 24, e->size);
    kiln__store_le32(b + 28, e->raw_size);
    kiln__store_le64(b + 32, e->checksum);
    b[40] = e->codec;
    b[41] = 0;
    kiln__store_le16(b + 42, e->stages);
    kiln__store_le32(b + 44, (uint32_t)XXH3_64bits(b, 44));
}

int kiln__cache_entry_decode(const void *buf, struct kiln_cache_entry *e)
{
    const unsigned char *b = buf;
    if (kiln__load_le32(b + 44) != (uint32_t)XXH3_64bits(b, 44) || b[41] != 0)
        return KILN_ECORRUPT_INDEX;
    e->key.lo = kiln__load_le64(b);
    e->key.hi = kiln__load_le64(b + 8);
    e->offset = kiln__load_le64(b + 16);
    e->size = kiln__load_le32(b + 24);
    e->raw_size = kiln__load_le32(b + 28);
    e->checksum = kiln__load_le64(b + 32);
    e->codec = b[40];
    e->stages = kiln__load_le16(b + 42);
    if (e->size > KILN_CACHE_MAX_PAYLOAD)
        return KILN_ECORRUPT_INDEX;
    return KILN_OK;
}

int kiln__cache_index_parse(const void *data, size_t n, uint64_t rec_size,
                            struct kiln_cache_entry *entries, struct kiln__cache_index_parse *out)
{
    const unsigned char *b = data;
    memset(out, 0, sizeof(*out));
    out->verdict = kiln__cache_header_decode(b, n, KILN__CACHE_IDX_MAGIC, &out->header);
    if (out->verdict != KILN__HEADER_OK) {
        out->problem = out->verdict == KILN__HEADER_ZERO      ? "its header is empty"
                       : out->verdict == KILN__HEADER_FOREIGN ? "it is not a kiln index"
                       : out->verdict == KILN__HEADER_DAMAGED ? "its header is damaged"
                                                              : "it has another format version";
        return KILN_ECORRUPT_INDEX;
    }
    out->whole = (n - KILN__CACHE_HEADER_SIZE) / KILN__CACHE_ENTRY_SIZE;
    out->partial = (n - KILN__CACHE_HEADER_SIZE) % KILN__CACHE_ENTRY_SIZE;
    /* Records never overlap and come in file order, so each entry must
     * start at or after the previous record's end. */
    uint64_t next = KILN__CACHE_HEADER_SIZE;
    for (size_t i = 0; i < out->whole; i++) {
        struct kiln_cache_entry e;
        const unsigned char *p = b + KILN__CACHE_HEADER_SIZE + i * KILN__CACHE_ENTRY_SIZE;
        if (kiln__cache_entry_decode(p, &e) != KILN_OK) {
            out->problem = "an entry is damaged";
            return KILN_ECORRUPT_INDEX;
        }
        if (e.offset < next || (e.offset & 7) ||
            e.offset > UINT64_MAX - kiln__cache_rec_len(e.size)) {
            out->problem = "its entries are out of order";
            return KILN_ECORRUPT_INDEX;
        }
        uint64_t end = e.offset + kiln__cache_rec_len(e.size);
        if (rec_size && end > rec_size) {
            out->problem = "an entry points past the end of the records";
            return KILN_ECORRUPT_INDEX;
        }
        if (entries)
            entries[i] = e;
        next = end;
        out->valid = i + 1;
    }
    return KILN_OK;
}
