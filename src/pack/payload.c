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
 * Versions. Version 2 stores VkShaderStageFlagBits values as stage kinds.
 * Version 1 (kiln before the stage change) stored kiln's own enum (0
 * compute, 1 vertex, 2 fragment) or, for an imported Fossilize module used
 * in other or several stages, 0x80000000 | its VkShaderStageFlagBits. A
 * version 1 payload is converted when it is read, so every caller sees
 * version 2 kinds and caches written before open and load as they are;
 * builds always write version 2. The layout is otherwise the same.
 */
#include "pack_internal.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define PAYLOAD_VERSION    2u
#define PAYLOAD_VERSION_V1 1u
#define PAYLOAD_HEAD       4u
#define PAYLOAD_ENTRY      8u

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

int kiln_program_payload_build(const struct kiln_stage_blob *stages, uint32_t n, void **payload,
                               size_t *size)
{
    if (!payload || !size || !stages || n == 0 || n > KILN_PAYLOAD_MAX_STAGES)
        return KILN_EINVAL;
    *payload = NULL;
    *size = 0;
    size_t total = PAYLOAD_HEAD + (size_t)n * PAYLOAD_ENTRY;
    for (uint32_t i = 0; i < n; i++) {
        if (kiln_blob_info(stages[i].blob, stages[i].blob_size, NULL, NULL) < 0) {
            KILN_ERROR("pack", "program payload: stage %u is not a packed blob", i);
            return KILN_ECORRUPT_BLOB;
        }
        if (stages[i].blob_size > UINT32_MAX || total + stages[i].blob_size < total)
            return KILN_ERANGE;
        total += stages[i].blob_size;
    }
    uint8_t *p = malloc(total);
    if (!p)
        return KILN_ENOMEM;
    p[0] = 'K';
    p[1] = 'G';
    p[2] = PAYLOAD_VERSION;
    p[3] = (uint8_t)n;
    uint8_t *e = p + PAYLOAD_HEAD;
    uint8_t *b = e + (size_t)n * PAYLOAD_ENTRY;
    for (uint32_t i = 0; i < n; i++) {
        kiln__store_le32(e, stages[i].stage);
        kiln__store_le32(e + 4, (uint32_t)stages[i].blob_size);
        e += PAYLOAD_ENTRY;
        memcpy(b, stages[i].blob, stages[i].blob_size);
        b += stages[i].blob_size;
    }
    *payload = p;
    *size = total;
    return 0;
}

int kiln_program_payload_parse(const void *payload, size_t size, uint32_t n_expected,
                               struct kiln_stage_blob *out)
{
    const uint8_t *p = payload;
    if (!p || size < PAYLOAD_HEAD || p[0] != 'K' || p[1] != 'G' ||
        (p[2] != PAYLOAD_VERSION && p[2] != PAYLOAD_VERSION_V1) || p[3] == 0) {
        KILN_WARN("pack", "program payload of %zu bytes: bad head", size);
        return KILN_ECORRUPT_BLOB;
    }
    uint32_t n = p[3];
    if (n > n_expected) {
        KILN_WARN("pack", "program payload holds %u stages, room for %u", n, n_expected);
        return KILN_ERANGE;
    }
    if (!out)
        return KILN_EINVAL;
    uint64_t table_end = PAYLOAD_HEAD + (uint64_t)n * PAYLOAD_ENTRY;
    if (table_end > size) {
        KILN_WARN("pack", "program payload of %zu bytes: cut inside its table", size);
        return KILN_ECORRUPT_BLOB;
    }
    uint64_t off = table_end;
    for (uint32_t i = 0; i < n; i++) {
        const uint8_t *e = p + PAYLOAD_HEAD + (size_t)i * PAYLOAD_ENTRY;
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
