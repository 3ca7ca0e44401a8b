/*
 * binaries_format.c - the payload of one pipeline's driver binaries, as
 * the host tier stores it (binaries.h has the layout).
 *
 * Design. The payload reaches a driver (vkCreatePipelineBinariesKHR) only
 * through kiln__bin_payload_parse, which checks every size against the
 * bytes left before it reads past it, in 64-bit arithmetic that cannot
 * overflow (each size is compared to what is left, never added first), and
 * refuses bytes left over: a payload either is exactly what the writer
 * wrote for some binaries, or is refused. The record's checksum (the
 * cache's) catches damage on disk; this parse catches a payload of another
 * version or a writer's bug, so neither reaches the driver.
 */
#include "binaries.h"

#include <string.h>

static bool key_size_ok(uint32_t n)
{
    return n >= 1 && n <= KILN__BIN_KEY_MAX;
}

int kiln__bin_payload_size(const struct kiln__bin_entry *e, uint32_t n, size_t *size)
{
    if (n > KILN__BIN_MAX_COUNT)
        return KILN_ERANGE;
    uint64_t total = KILN__BIN_HEADER;
    for (uint32_t i = 0; i < n; i++) {
        if (!key_size_ok(e[i].key_size))
            return KILN_ERANGE;
        uint64_t one = 4u + (uint64_t)e[i].key_size + 8u;
        if (e[i].data_size > UINT64_MAX / 2 || e[i].data_size > SIZE_MAX - one ||
            total > (uint64_t)SIZE_MAX - one - e[i].data_size)
            return KILN_ERANGE;
        total += one + e[i].data_size;
    }
    *size = (size_t)total;
    return KILN_OK;
}

int64_t kiln__bin_payload_write(const struct kiln__bin_entry *e, uint32_t n, void *out, size_t cap)
{
    size_t need = 0;
    KILN_TRY(kiln__bin_payload_size(e, n, &need));
    if (need > cap || need > (size_t)INT64_MAX)
        return KILN_ERANGE;
    unsigned char *p = out;
    kiln__store_le32(p, KILN__BIN_MAGIC);
    kiln__store_le32(p + 4, KILN__BIN_VERSION);
    kiln__store_le32(p + 8, n);
    kiln__store_le32(p + 12, 0);
    size_t at = KILN__BIN_HEADER;
    for (uint32_t i = 0; i < n; i++) {
        kiln__store_le32(p + at, e[i].key_size);
        memcpy(p + at + 4, e[i].key, e[i].key_size);
        at += 4u + e[i].key_size;
        kiln__store_le64(p + at, e[i].data_size);
        if (e[i].data_size)
            memcpy(p + at + 8, e[i].data, (size_t)e[i].data_size);
        at += 8u + (size_t)e[i].data_size;
    }
    return (int64_t)at;
}

int kiln__bin_payload_parse(const void *payload, size_t n, struct kiln__bin_entry *out,
                            uint32_t cap)
{
    const unsigned char *p = payload;
    if (n < KILN__BIN_HEADER || kiln__load_le32(p) != KILN__BIN_MAGIC ||
        kiln__load_le32(p + 4) != KILN__BIN_VERSION)
        return KILN_EFORMAT;
    uint32_t count = kiln__load_le32(p + 8);
    if (kiln__load_le32(p + 12) != 0 || count > KILN__BIN_MAX_COUNT)
        return KILN_ECORRUPT_RECORD;
    if (count > cap)
        return KILN_ERANGE;
    size_t at = KILN__BIN_HEADER;
    for (uint32_t i = 0; i < count; i++) {
        if (n - at < 4)
            return KILN_ECORRUPT_RECORD;
        uint32_t ks = kiln__load_le32(p + at);
        at += 4;
        if (!key_size_ok(ks) || n - at < (size_t)ks + 8u)
            return KILN_ECORRUPT_RECORD;
        const unsigned char *key = p + at;
        at += ks;
        uint64_t ds = kiln__load_le64(p + at);
        at += 8;
        if (ds > (uint64_t)(n - at))
            return KILN_ECORRUPT_RECORD;
        out[i] =
            (struct kiln__bin_entry){.key = key, .key_size = ks, .data = p + at, .data_size = ds};
        at += (size_t)ds;
    }
    return at == n ? (int)count : KILN_ECORRUPT_RECORD;
}
