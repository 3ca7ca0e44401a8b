/*
 * cache_meta.c - the cache's remembered settings (programs.kpm): its size
 * cap (kiln_cache_options.max_size).
 *
 * A file of its own rather than bytes in the records header: the header's
 * 64 bytes are all taken and checked, and a setting changes without a
 * record changing, so it must not cost a rewrite of the records. Caches
 * made before it have no such file, which means no cap; kiln versions
 * before it never read the file and keep the cache as they always did.
 *
 *   0  magic[8]  "KILNKPM\n"
 *   8  u32 version 1
 *  12  u32 0
 *  16  u64 max_size  bytes of programs.kpc (0: no cap)
 *  24  u64 check     XXH3-64 of bytes 0..24
 *
 * Written whole through a temporary file and a rename (kiln_io_replace_file),
 * so it is the old settings or the new ones, never half of each. A file that
 * does not check out means no cap (one info line): a lost setting can only
 * let the cache grow, never drop a record. A unit below the store: it calls
 * nothing of the store's.
 */
#include "cache_internal.h"

#include <string.h>
#include <xxhash.h>

#define KPM_MAGIC   "KILNKPM\n"
#define KPM_VERSION 1u
#define KPM_SIZE    32u

const char *kiln__cache_meta_parse(const void *data, size_t n, uint64_t *max_size)
{
    const unsigned char *b = data;
    *max_size = 0;
    if (n != KPM_SIZE || memcmp(b, KPM_MAGIC, 8) != 0)
        return "not a settings file";
    if (kiln__load_le32(b + 8) != KPM_VERSION)
        return "another format version";
    if (kiln__load_le64(b + 24) != XXH3_64bits(b, 24))
        return "its checksum does not match";
    *max_size = kiln__load_le64(b + 16);
    return NULL;
}

static int meta_path(const struct kiln_cache *c, char *out, size_t cap)
{
    return kiln__path_join(out, cap, c->dir, KILN_CACHE_META_FILE);
}

void kiln__cache_meta_load(struct kiln_cache *c)
{
    c->max_size = 0;
    char path[KILN__CACHE_PATH_MAX];
    if (meta_path(c, path, sizeof(path)) < 0)
        return;
    void *data = NULL;
    size_t n = 0;
    int rc = kiln__io_read_file(c->io, path, KILN_IO_NOFOLLOW, 4096, &data, &n);
    if (rc < 0) {
        if (rc != KILN_ENOENT)
            KILN_INFO("cache", "%s: not used (%s); the cache has no size cap", path,
                      kiln_strerror(rc));
        return;
    }
    const char *why = kiln__cache_meta_parse(data, n, &c->max_size);
    if (why)
        KILN_INFO("cache", "%s: not used (%s); the cache has no size cap", path, why);
    kiln__free(data);
}

int kiln__cache_meta_write(struct kiln_cache *c, uint64_t max_size)
{
    char path[KILN__CACHE_PATH_MAX];
    KILN_TRY(meta_path(c, path, sizeof(path)));
    unsigned char b[KPM_SIZE] = {0};
    memcpy(b, KPM_MAGIC, 8);
    kiln__store_le32(b + 8, KPM_VERSION);
    kiln__store_le64(b + 16, max_size);
    kiln__store_le64(b + 24, XXH3_64bits(b, 24));
    int rc = kiln_io_replace_file(c->io, path, b, sizeof(b));
    if (rc < 0) {
        KILN_ERROR("cache", "%s: cannot write the size cap: %s", path, kiln_strerror(rc));
        return rc;
    }
    c->max_size = max_size;
    return KILN_OK;
}
