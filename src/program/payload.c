/*
 * payload.c - the program payload: a program's stages, each a packed blob,
 * in one buffer (what the cache stores per program).
 *
 * Design. The layout is a 4-byte head ("KG", version, stage count), a table
 * of (stage kind u32, blob size u32) per stage, then the blobs back to back.
 * The parser trusts nothing: every size is checked against what is left
 * before it is used (in 64-bit arithmetic, so sums cannot wrap), the blobs
 * must fill the payload exactly, and each blob's header must read
 * (kiln_blob_info), so damage shows up at parse time, not at unpack.
 *
 * Versions. Version 3 adds the program's pipeline-state description (a
 * kind and opaque bytes) and per stage an entry point and specialization
 * data (kiln/pack.h has the layout): a fixed-size table first, then the
 * variable parts in table order, so every offset follows from the table
 * and the parser walks the buffer once. Version 2 stores
 * VkShaderStageFlagBits values as stage kinds and nothing else. Version 1
 * (kiln before the stage change) stored kiln's own enum (0 compute, 1
 * vertex, 2 fragment) or, for an imported Fossilize module used in other
 * or several stages, 0x80000000 | its VkShaderStageFlagBits; it is
 * converted when read. A build writes version 2 for a program with nothing
 * but stages (built-in state, "main", no specialization), so the payloads
 * of today's programs are byte for byte those of earlier releases (and
 * earlier releases still read them), and version 3 otherwise.
 *
 * The version byte's high bit is KILN_PAYLOAD_VALIDATED: its writer ran
 * SPIR-V's validator over every stage before building it, so a build need
 * not do it again. Versions 2 and 3 may carry it; version 1 never did.
 *
 * Every pointer the parser hands out points into the payload: an entry
 * point is accepted only with its NUL inside the payload and none before
 * it, and a specialization entry only inside its stage's data, so a
 * builder can pass them to Vulkan as they are.
 */
#include "kiln_internal.h"

#include "kiln/program.h"

#include <assert.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define PAYLOAD_VERSION    3u
#define PAYLOAD_VERSION_V2 2u
#define PAYLOAD_VERSION_V1 1u
#define PAYLOAD_VALIDATED  0x80u /* in the version byte: KILN_PAYLOAD_VALIDATED */
#define PAYLOAD_HEAD       4u
#define PAYLOAD_ENTRY      8u  /* v1, v2: kind, blob size */
#define PAYLOAD_STATE_HEAD 8u  /* v3: state kind, state size */
#define PAYLOAD_ENTRY3     20u /* v3: kind, blob size, entry length, spec entries, spec size */
#define ENTRY_MAX          KILN_PAYLOAD_MAX_ENTRY

/* Version 1's stage kinds, and its bit for "the Vulkan stages follow". */
#define V1_COMPUTE  0u
#define V1_VERTEX   1u
#define V1_FRAGMENT 2u
#define V1_VK_BITS  0x80000000u

/* A version 1 stage kind as a VkShaderStageFlagBits value (the numbers are
 * Vulkan's, fixed by its specification). Kinds kiln never wrote are kept. */
static uint32_t stage_from_v1(uint32_t kind)
{
    switch (kind) {
    case V1_COMPUTE:
        return KILN_VK_STAGE_COMPUTE_BIT;
    case V1_VERTEX:
        return KILN_VK_STAGE_VERTEX_BIT;
    case V1_FRAGMENT:
        return KILN_VK_STAGE_FRAGMENT_BIT;
    default:
        return kind & V1_VK_BITS ? kind & ~V1_VK_BITS : kind;
    }
}

void kiln_spec_entry_get(const struct kiln_stage_blob *stage, uint32_t i,
                         struct kiln_spec_entry *out)
{
    if (!stage || !out || !stage->spec_map)
        return;
    const uint8_t *m = (const uint8_t *)stage->spec_map + (size_t)i * KILN_SPEC_ENTRY_BYTES;
    out->constant_id = kiln__load_le32(m);
    out->offset = kiln__load_le32(m + 4);
    out->size = kiln__load_le32(m + 8);
}

/* The entry point as stored: "" for "main" (NULL or "main"). */
static const char *stored_entry(const char *entry)
{
    return !entry || strcmp(entry, "main") == 0 ? "" : entry;
}

/* Every map entry of `st` lies inside its data. */
static bool spec_fits(const struct kiln_stage_blob *st)
{
    for (uint32_t k = 0; k < st->nspec; k++) {
        struct kiln_spec_entry e;
        kiln_spec_entry_get(st, k, &e);
        if ((uint64_t)e.offset + e.size > st->spec_size)
            return false;
    }
    return true;
}

int kiln_program_payload_build_full(const struct kiln_payload_state *state,
                                    const struct kiln_stage_blob *stages, uint32_t n,
                                    void **payload, size_t *size)
{
    if (!payload || !size || !stages || n == 0 || n > KILN_PAYLOAD_MAX_STAGES)
        return KILN_EINVAL;
    *payload = NULL;
    *size = 0;
    struct kiln_payload_state none = {.kind = KILN_STATE_BUILTIN};
    if (!state)
        state = &none;
    if (state->kind >= KILN_STATE_KINDS || (state->size && !state->bytes) ||
        (state->kind == KILN_STATE_BUILTIN && state->size)) {
        KILN_ERROR("pack", "program payload: state kind %u with %zu bytes is not allowed",
                   state->kind, state->size);
        return KILN_EINVAL;
    }
    if (state->size > KILN_STATE_MAX_BYTES)
        return KILN_ERANGE;
    bool plain = state->kind == KILN_STATE_BUILTIN;
    uint64_t extra = state->size;
    for (uint32_t i = 0; i < n; i++) {
        const struct kiln_stage_blob *st = &stages[i];
        if (kiln_blob_info(st->blob, st->blob_size, NULL, NULL) < 0) {
            KILN_ERROR("pack", "program payload: stage %u is not a packed blob", i);
            return KILN_ECORRUPT_BLOB;
        }
        if (st->blob_size > UINT32_MAX)
            return KILN_ERANGE;
        size_t elen = strlen(stored_entry(st->entry));
        if (elen > ENTRY_MAX || (st->entry && !st->entry[0]) || (st->nspec && !st->spec_map) ||
            (st->spec_size && !st->spec_data) || st->spec_size > UINT32_MAX ||
            st->nspec > UINT32_MAX / KILN_SPEC_ENTRY_BYTES || !spec_fits(st)) {
            KILN_ERROR("pack", "program payload: stage %u: bad entry point or specialization", i);
            return KILN_EINVAL;
        }
        plain = plain && elen == 0 && st->nspec == 0 && st->spec_size == 0;
        extra += (elen ? elen + 1 : 0) + (uint64_t)st->nspec * KILN_SPEC_ENTRY_BYTES +
                 st->spec_size + st->blob_size;
    }
    uint64_t table =
        plain ? (uint64_t)n * PAYLOAD_ENTRY : PAYLOAD_STATE_HEAD + (uint64_t)n * PAYLOAD_ENTRY3;
    uint64_t total = PAYLOAD_HEAD + table + extra;
    if (total > SIZE_MAX || total > UINT32_MAX * (uint64_t)KILN_PAYLOAD_MAX_STAGES)
        return KILN_ERANGE;
    uint8_t *p = kiln__malloc((size_t)total);
    if (!p)
        return KILN_ENOMEM;
    p[0] = 'K';
    p[1] = 'G';
    p[2] = (uint8_t)((plain ? PAYLOAD_VERSION_V2 : PAYLOAD_VERSION) |
                     (state && (state->flags & KILN_PAYLOAD_VALIDATED) ? PAYLOAD_VALIDATED : 0));
    p[3] = (uint8_t)n;
    uint8_t *e = p + PAYLOAD_HEAD;
    if (!plain) {
        kiln__store_le32(e, state->kind);
        kiln__store_le32(e + 4, (uint32_t)state->size);
        e += PAYLOAD_STATE_HEAD;
    }
    uint8_t *b = p + PAYLOAD_HEAD + table;
    if (!plain && state->size) {
        memcpy(b, state->bytes, state->size);
        b += state->size;
    }
    for (uint32_t i = 0; i < n && !plain; i++) {
        const struct kiln_stage_blob *st = &stages[i];
        const char *entry = stored_entry(st->entry);
        size_t elen = strlen(entry);
        if (elen) {
            memcpy(b, entry, elen + 1);
            b += elen + 1;
        }
        size_t map = (size_t)st->nspec * KILN_SPEC_ENTRY_BYTES;
        if (map)
            memcpy(b, st->spec_map, map);
        b += map;
        if (st->spec_size)
            memcpy(b, st->spec_data, st->spec_size);
        b += st->spec_size;
    }
    for (uint32_t i = 0; i < n; i++) {
        const struct kiln_stage_blob *st = &stages[i];
        kiln__store_le32(e, st->stage);
        kiln__store_le32(e + 4, (uint32_t)st->blob_size);
        if (!plain) {
            size_t elen = strlen(stored_entry(st->entry));
            kiln__store_le32(e + 8, (uint32_t)elen);
            kiln__store_le32(e + 12, st->nspec);
            kiln__store_le32(e + 16, (uint32_t)st->spec_size);
        }
        e += plain ? PAYLOAD_ENTRY : PAYLOAD_ENTRY3;
        memcpy(b, st->blob, st->blob_size);
        b += st->blob_size;
    }
    assert(b == p + total);
    *payload = p;
    *size = (size_t)total;
    return 0;
}

int kiln_program_payload_build(const struct kiln_stage_blob *stages, uint32_t n, void **payload,
                               size_t *size)
{
    return kiln_program_payload_build_full(NULL, stages, n, payload, size);
}

/* Logs one line for a damaged payload; `i` is the stage, or UINT32_MAX. */
static int damaged(size_t size, const char *what, uint32_t i)
{
    if (i == UINT32_MAX)
        KILN_WARN("pack", "program payload of %zu bytes: %s", size, what);
    else
        KILN_WARN("pack", "program payload of %zu bytes: stage %u: %s", size, i, what);
    return KILN_ECORRUPT_BLOB;
}

/* Version 3's state and per-stage extras, from `off` on; *off ends where the
 * blobs begin. */
static int parse_v3_extras(const uint8_t *p, size_t size, uint32_t n, uint64_t *off,
                           struct kiln_stage_blob *out, struct kiln_payload_state *state)
{
    uint32_t kind = kiln__load_le32(p + PAYLOAD_HEAD);
    uint32_t ssize = kiln__load_le32(p + PAYLOAD_HEAD + 4);
    if (kind >= KILN_STATE_KINDS || (kind == KILN_STATE_BUILTIN && ssize) ||
        ssize > KILN_STATE_MAX_BYTES || ssize > size - *off)
        return damaged(size, "bad state", UINT32_MAX);
    state->kind = kind;
    state->bytes = ssize ? p + *off : NULL;
    state->size = ssize;
    *off += ssize;
    for (uint32_t i = 0; i < n; i++) {
        const uint8_t *e = p + PAYLOAD_HEAD + PAYLOAD_STATE_HEAD + (size_t)i * PAYLOAD_ENTRY3;
        uint32_t elen = kiln__load_le32(e + 8);
        uint32_t nspec = kiln__load_le32(e + 12);
        uint32_t dsize = kiln__load_le32(e + 16);
        out[i].entry = NULL;
        if (elen) {
            const uint8_t *s = p + *off;
            if (elen > ENTRY_MAX || (uint64_t)elen + 1 > size - *off || s[elen] != 0 ||
                memchr(s, 0, elen))
                return damaged(size, "bad entry point", i);
            out[i].entry = (const char *)s;
            *off += elen + 1;
        }
        uint64_t map = (uint64_t)nspec * KILN_SPEC_ENTRY_BYTES;
        if (map > size - *off)
            return damaged(size, "cut inside the specialization map", i);
        out[i].nspec = nspec;
        out[i].spec_map = nspec ? p + *off : NULL;
        *off += map;
        if (dsize > size - *off)
            return damaged(size, "cut inside the specialization data", i);
        out[i].spec_data = dsize ? p + *off : NULL;
        out[i].spec_size = dsize;
        *off += dsize;
        if (!spec_fits(&out[i]))
            return damaged(size, "a specialization entry outside its data", i);
    }
    return KILN_OK;
}

int kiln_program_payload_parse_full(const void *payload, size_t size, uint32_t n_expected,
                                    struct kiln_stage_blob *out, struct kiln_payload_state *state)
{
    if (!payload || !out)
        return KILN_EINVAL;
    const uint8_t *p = payload;
    /* Version 1 never carried the validated bit. */
    uint8_t version = p && size >= PAYLOAD_HEAD ? p[2] & (uint8_t)~PAYLOAD_VALIDATED : 0;
    if (!p || size < PAYLOAD_HEAD || p[0] != 'K' || p[1] != 'G' ||
        (version != PAYLOAD_VERSION && version != PAYLOAD_VERSION_V2 &&
         p[2] != PAYLOAD_VERSION_V1) ||
        p[3] == 0) {
        KILN_WARN("pack", "program payload of %zu bytes: bad head", size);
        return KILN_ECORRUPT_BLOB;
    }
    uint32_t n = p[3];
    if (n > n_expected) {
        KILN_WARN("pack", "program payload holds %u stages, room for %u", n, n_expected);
        return KILN_ERANGE;
    }
    bool v3 = version == PAYLOAD_VERSION;
    uint64_t table_end = v3 ? PAYLOAD_HEAD + PAYLOAD_STATE_HEAD + (uint64_t)n * PAYLOAD_ENTRY3
                            : PAYLOAD_HEAD + (uint64_t)n * PAYLOAD_ENTRY;
    if (table_end > size)
        return damaged(size, "cut inside its table", UINT32_MAX);
    struct kiln_payload_state st_local;
    if (!state)
        state = &st_local;
    *state = (struct kiln_payload_state){
        .kind = KILN_STATE_BUILTIN, .flags = p[2] & PAYLOAD_VALIDATED ? KILN_PAYLOAD_VALIDATED : 0};
    uint64_t off = table_end;
    if (v3) {
        KILN_TRY(parse_v3_extras(p, size, n, &off, out, state));
    } else {
        for (uint32_t i = 0; i < n; i++)
            out[i] = (struct kiln_stage_blob){.stage = 0};
    }
    for (uint32_t i = 0; i < n; i++) {
        const uint8_t *e = v3 ? p + PAYLOAD_HEAD + PAYLOAD_STATE_HEAD + (size_t)i * PAYLOAD_ENTRY3
                              : p + PAYLOAD_HEAD + (size_t)i * PAYLOAD_ENTRY;
        uint32_t bsize = kiln__load_le32(e + 4);
        if (bsize > size - off || kiln_blob_info(p + off, bsize, NULL, NULL) < 0) {
            KILN_WARN("pack", "program payload of %zu bytes: stage %u is damaged", size, i);
            return KILN_ECORRUPT_BLOB;
        }
        uint32_t kind = kiln__load_le32(e);
        out[i].stage = p[2] == PAYLOAD_VERSION_V1 ? stage_from_v1(kind) : kind;
        out[i].blob = p + off;
        out[i].blob_size = bsize;
        off += bsize;
    }
    if (off != size) {
        KILN_WARN("pack", "program payload of %zu bytes: %" PRIu64 " bytes after its stages", size,
                  (uint64_t)size - off);
        return KILN_ECORRUPT_BLOB;
    }
    return (int)n;
}

int kiln_program_payload_parse(const void *payload, size_t size, uint32_t n_expected,
                               struct kiln_stage_blob *out)
{
    return kiln_program_payload_parse_full(payload, size, n_expected, out, NULL);
}
