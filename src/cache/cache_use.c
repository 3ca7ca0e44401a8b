/*
 * cache_use.c - the last-use marks of a cache's records (programs.kpu).
 *
 * One day number per entry position of the table (file order, superseded
 * records too), kept in memory: a load marks its entries with one relaxed
 * atomic store each (no lock beyond the read lock a load holds anyway, no
 * I/O), and the file is written whole, crash-safely, at sync and close when
 * a mark changed. The file carries the records file's id and, per entry,
 * the low bits of its record's offset, so marks never attach to the wrong
 * record: what does not match counts as used on the day of the open (age
 * is advisory; losing it must not make a prune drop records).
 *
 * A unit below the store: it reads the handle's table but calls nothing of
 * the store's.
 */
#include "cache_internal.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <xxhash.h>

#define KPU_MAGIC   "KILNKPU\n"
#define KPU_HEAD    56u
#define KPU_UNIT    8u
#define KPU_VERSION 1u

uint32_t kiln__cache_clock_day(void)
{
    time_t t = time(NULL);
    return t > 86400 ? (uint32_t)(t / 86400) : 1;
}

int kiln__cache_use_reserve(struct kiln_cache *c, size_t cap)
{
    uint32_t *n = kiln__realloc(c->last_use, cap * sizeof(*n));
    if (!n)
        return KILN_ENOMEM;
    c->last_use = n;
    uint8_t *r = kiln__realloc(c->run_used, cap * sizeof(*r));
    if (!r)
        return KILN_ENOMEM;
    c->run_used = r;
    return KILN_OK;
}

static int side_path(const struct kiln_cache *c, const char *name, char *out, size_t cap)
{
    return kiln__path_join(out, cap, c->dir, name);
}

static uint32_t off_check(uint64_t offset)
{
    return (uint32_t)(offset >> 3);
}

void kiln__cache_use_load(struct kiln_cache *c)
{
    __atomic_store_n(&c->use_dirty, c->count > 0, __ATOMIC_RELAXED);
    if (!c->count)
        return;
    char path[KILN__CACHE_PATH_MAX];
    if (side_path(c, KILN_CACHE_USE_FILE, path, sizeof(path)) < 0)
        return;
    void *data = NULL;
    size_t n = 0;
    size_t max = KPU_HEAD + ((size_t)c->count + 65536) * KPU_UNIT;
    int rc = kiln__io_read_file(c->io, path, KILN_IO_NOFOLLOW, max, &data, &n);
    if (rc < 0) {
        if (rc != KILN_ENOENT)
            KILN_INFO("cache", "%s: not used (%s); every record counts as used today", path,
                      kiln_strerror(rc));
        return;
    }
    const unsigned char *b = data;
    const char *why = NULL;
    uint64_t count = 0;
    if (n < KPU_HEAD || memcmp(b, KPU_MAGIC, 8) != 0) {
        why = "not a last-use file";
    } else if (kiln__load_le32(b + 8) != KPU_VERSION || kiln__load_le32(b + 12) != KPU_UNIT) {
        why = "another format version";
    } else {
        count = kiln__load_le64(b + 32);
        if (count > (n - KPU_HEAD) / KPU_UNIT || n != KPU_HEAD + count * KPU_UNIT)
            why = "its size does not match its count";
        else if (kiln__load_le64(b + 48) !=
                 XXH3_64bits_withSeed(b + KPU_HEAD, n - KPU_HEAD, XXH3_64bits(b, 48)))
            why = "its checksum does not match";
        else if (memcmp(b + 16, c->header.file_id, 16) != 0)
            why = "it belongs to another records file";
    }
    if (why) {
        KILN_INFO("cache", "%s: not used (%s); every record counts as used today", path, why);
        kiln__free(data);
        return;
    }
    size_t matched = 0;
    for (size_t i = 0; i < count && i < c->count; i++) {
        const unsigned char *p = b + KPU_HEAD + i * KPU_UNIT;
        if (kiln__load_le32(p + 4) != off_check(c->entries[i].offset))
            continue;
        uint32_t day = kiln__load_le32(p);
        c->last_use[i] = day > c->today ? c->today : day;
        matched++;
    }
    kiln__free(data);
    __atomic_store_n(&c->use_dirty, matched != c->count || count != c->count, __ATOMIC_RELAXED);
}

int kiln__cache_save_use(struct kiln_cache *c)
{
    if (!__atomic_load_n(&c->use_dirty, __ATOMIC_RELAXED) || c->rec_fd < 0)
        return KILN_OK;
    char path[KILN__CACHE_PATH_MAX];
    KILN_TRY(side_path(c, KILN_CACHE_USE_FILE, path, sizeof(path)));
    pthread_rwlock_rdlock(&c->lock);
    size_t n = KPU_HEAD + c->count * (size_t)KPU_UNIT;
    unsigned char *b = kiln__malloc(n);
    if (!b) {
        pthread_rwlock_unlock(&c->lock);
        return KILN_ENOMEM;
    }
    memset(b, 0, KPU_HEAD);
    memcpy(b, KPU_MAGIC, 8);
    kiln__store_le32(b + 8, KPU_VERSION);
    kiln__store_le32(b + 12, KPU_UNIT);
    memcpy(b + 16, c->header.file_id, 16);
    kiln__store_le64(b + 32, c->count);
    for (size_t i = 0; i < c->count; i++) {
        unsigned char *p = b + KPU_HEAD + i * KPU_UNIT;
        kiln__store_le32(p, __atomic_load_n(&c->last_use[i], __ATOMIC_RELAXED));
        kiln__store_le32(p + 4, off_check(c->entries[i].offset));
    }
    /* Marks made from here on set the flag again. */
    __atomic_store_n(&c->use_dirty, false, __ATOMIC_RELAXED);
    pthread_rwlock_unlock(&c->lock);
    kiln__store_le64(b + 48, XXH3_64bits_withSeed(b + KPU_HEAD, n - KPU_HEAD, XXH3_64bits(b, 48)));
    int rc = kiln_io_replace_file(c->io, path, b, n);
    kiln__free(b);
    if (rc < 0) {
        __atomic_store_n(&c->use_dirty, true, __ATOMIC_RELAXED);
        KILN_WARN("cache", "%s: cannot write the last-use marks: %s", path, kiln_strerror(rc));
    }
    return rc;
}

/* The public call takes the gate: an eviction rewrites the file it describes. */
static int save_use_body(struct kiln_cache *c)
{
    if (!c)
        return KILN_EINVAL;
    pthread_rwlock_rdlock(&c->gate);
    int rc = kiln__cache_save_use(c);
    pthread_rwlock_unlock(&c->gate);
    return rc;
}

int kiln_cache_save_use(struct kiln_cache *c)
{
    uint64_t m = kiln__err_mark();
    return KILN__CACHE_END(c, m, "kiln_cache_save_use", save_use_body(c));
}

uint32_t kiln_cache_today(struct kiln_cache *c)
{
    if (!c)
        return 0;
    return c->today;
}
