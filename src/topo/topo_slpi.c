/*
 * topo_slpi.c - the cache topology from the records Windows'
 * GetLogicalProcessorInformationEx returns, parsed from a byte buffer.
 *
 * Portable on purpose: topo_win.c hands it the live buffer, and tests on
 * every platform (and the fuzz target) hand it recorded layouts, so the
 * parser is checked under the sanitizers of the Linux build too.
 *
 * Design:
 * - The buffer is read by byte offsets with little-endian loads, never
 *   through the SDK's structs: it may come unaligned from a file or a test,
 *   and the SDKs disagree on the names of the reserved bytes (newer ones
 *   carve GroupCount out of CACHE_RELATIONSHIP's Reserved). topo_win.c
 *   checks the offsets against <windows.h> at build time.
 * - A CPU number is group * 64 + the bit of the processor in its group's
 *   affinity mask. Groups hold at most 64 processors, so the mapping needs
 *   no table and pinning can undo it from the number alone; a group with
 *   fewer than 64 processors leaves a gap in the numbers, which CPU sets
 *   tolerate.
 * - Online CPUs are the active processors of RelationGroup; a buffer
 *   without that record (RelationCache alone) uses the union of the
 *   processor-core records, then of the caches' masks.
 * - As with sysfs, the result is whole or absent: any malformed record
 *   (a size that runs past the buffer or is too small for its kind, level
 *   0, a mask with no processor) refuses the whole buffer with one error
 *   naming the record's byte offset. Two caches of one level and type that
 *   overlap must be the same set, and of the same size.
 * - Trace caches are left out (they hold decoded instructions, not data).
 *   Windows gives caches no id, so `id` is -1.
 */
#include "topo_internal.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

/* Record kinds (LOGICAL_PROCESSOR_RELATIONSHIP). */
#define REL_CORE  0u
#define REL_CACHE 2u
#define REL_GROUP 4u

/* PROCESSOR_CACHE_TYPE. */
#define CACHE_UNIFIED     0u
#define CACHE_INSTRUCTION 1u
#define CACHE_DATA        2u
#define CACHE_TRACE       3u

/* Offsets from the start of one record; topo_win.c asserts them. */
#define REC_HEAD          8u  /* Relationship, Size */
#define AFF_SIZE          16u /* GROUP_AFFINITY: Mask, Group, Reserved[3] */
#define CACHE_LEVEL       8u
#define CACHE_SIZE        12u
#define CACHE_TYPE        16u
#define CACHE_GROUP_COUNT 38u /* 0 before Windows 11: one mask follows */
#define CACHE_MASKS       40u
#define CORE_GROUP_COUNT  30u
#define CORE_MASKS        32u
#define GROUP_ACTIVE      10u /* ActiveGroupCount */
#define GROUP_INFO        32u
#define GROUP_INFO_SIZE   48u
#define GROUP_INFO_MASK   40u /* ActiveProcessorMask */

#define WHERE "GetLogicalProcessorInformationEx"

/* Logs one error about the record at byte `at` and returns KILN_EPARSE. */
static int bad(size_t at, const char *what)
{
    KILN_ERROR("topo", WHERE ": record at byte %zu: %s", at, what);
    return KILN_EPARSE;
}

/* Adds the processors of one GROUP_AFFINITY (at p) to *set. */
static int add_affinity(struct kiln_cpuset *set, const unsigned char *p, size_t at)
{
    uint64_t mask = kiln__load_le64(p);
    uint32_t group = kiln__load_le16(p + 8);
    if (mask == 0)
        return bad(at, "a processor mask with no processor");
    if ((uint64_t)group * 64 + 64 > KILN_TOPO_MAX_CPUS)
        return bad(at, "a processor group past the CPU limit");
    for (uint32_t b = 0; b < 64; b++)
        if (mask >> b & 1)
            KILN_TRY(kiln__cpuset_add(set, group * 64 + b));
    return KILN_OK;
}

/* Adds the `count` masks at rec + off (count 0 means 1) to *set. */
static int add_masks(struct kiln_cpuset *set, const unsigned char *rec, size_t size, size_t off,
                     uint32_t count, size_t at)
{
    if (count == 0)
        count = 1;
    if (off + (size_t)count * AFF_SIZE > size)
        return bad(at, "its processor masks run past the record");
    for (uint32_t i = 0; i < count; i++)
        KILN_TRY(add_affinity(set, rec + off + (size_t)i * AFF_SIZE, at));
    return KILN_OK;
}

static int add_domain(struct kiln_topo *t, size_t *cap, struct kiln_cpu_cache_domain *d, size_t at)
{
    int rc = kiln__topo_add_domain(t, cap, d);
    if (rc == KILN__DOMAIN_OVERLAP)
        return bad(at, "its processors overlap another cache of its level without matching");
    if (rc == KILN__DOMAIN_SIZE)
        return bad(at, "same processors as another cache of its level but another size");
    return rc;
}

/* One cache record: checked, and added unless it is a trace cache. */
static int read_cache(struct kiln_topo *t, size_t *cap, const unsigned char *rec, size_t size,
                      size_t at)
{
    if (size < CACHE_MASKS + AFF_SIZE)
        return bad(at, "a cache record too small");
    uint32_t level = rec[CACHE_LEVEL];
    uint32_t type = kiln__load_le32(rec + CACHE_TYPE);
    if (level == 0)
        return bad(at, "a cache of level 0");
    if (type > CACHE_TRACE)
        return bad(at, "an unknown cache type");
    struct kiln_cpu_cache_domain d = {.level = level, .id = -1};
    d.size = kiln__load_le32(rec + CACHE_SIZE);
    d.type = type == CACHE_DATA          ? KILN_CPU_CACHE_DATA
             : type == CACHE_INSTRUCTION ? KILN_CPU_CACHE_INSTRUCTION
                                         : KILN_CPU_CACHE_UNIFIED;
    int rc =
        add_masks(&d.cpus, rec, size, CACHE_MASKS, kiln__load_le16(rec + CACHE_GROUP_COUNT), at);
    if (rc == KILN_OK && type != CACHE_TRACE) {
        kiln__cpuset_and(&d.cpus, &t->online);
        /* A cache of processors that are all inactive says nothing. */
        if (kiln_cpuset_count(&d.cpus) > 0)
            rc = add_domain(t, cap, &d, at);
    }
    kiln_cpuset_free(&d.cpus);
    return rc;
}

/* Walks the records once: checks every size, and collects the online CPUs. */
static int read_online(struct kiln_topo *t, const unsigned char *buf, size_t len)
{
    struct kiln_cpuset cores = {0}, caches = {0};
    bool groups = false;
    int rc = KILN_OK;
    for (size_t at = 0; at < len && rc == KILN_OK;) {
        if (len - at < REC_HEAD) {
            rc = bad(at, "cut short");
            break;
        }
        const unsigned char *rec = buf + at;
        uint32_t kind = kiln__load_le32(rec), size = kiln__load_le32(rec + 4);
        if (size < REC_HEAD || size > len - at) {
            rc = bad(at, "its size runs past the buffer");
            break;
        }
        if (kind == REL_GROUP) {
            if (size < GROUP_INFO)
                rc = bad(at, "a group record too small");
            uint32_t active = rc == KILN_OK ? kiln__load_le16(rec + GROUP_ACTIVE) : 0;
            if (rc == KILN_OK && GROUP_INFO + (size_t)active * GROUP_INFO_SIZE > size)
                rc = bad(at, "its groups run past the record");
            for (uint32_t g = 0; g < active && rc == KILN_OK; g++) {
                uint64_t mask = kiln__load_le64(rec + GROUP_INFO + (size_t)g * GROUP_INFO_SIZE +
                                                GROUP_INFO_MASK);
                if ((uint64_t)g * 64 + 64 > KILN_TOPO_MAX_CPUS)
                    rc = bad(at, "more processor groups than the CPU limit allows");
                for (uint32_t b = 0; b < 64 && rc == KILN_OK; b++)
                    if (mask >> b & 1)
                        rc = kiln__cpuset_add(&t->online, g * 64 + b);
            }
            groups = true;
        } else if (kind == REL_CORE) {
            if (size < CORE_MASKS + AFF_SIZE)
                rc = bad(at, "a processor record too small");
            else
                rc = add_masks(&cores, rec, size, CORE_MASKS,
                               kiln__load_le16(rec + CORE_GROUP_COUNT), at);
        } else if (kind == REL_CACHE && size < CACHE_MASKS + AFF_SIZE) {
            rc = bad(at, "a cache record too small");
        } else if (kind == REL_CACHE) {
            /* Checked in full by read_cache. */
            uint32_t n = kiln__load_le16(rec + CACHE_GROUP_COUNT);
            if (CACHE_MASKS + (size_t)(n ? n : 1) * AFF_SIZE <= size)
                for (uint32_t i = 0; i < (n ? n : 1) && rc == KILN_OK; i++)
                    rc = add_affinity(&caches, rec + CACHE_MASKS + (size_t)i * AFF_SIZE, at);
        }
        at += size;
    }
    if (rc == KILN_OK && !groups) {
        kiln_cpuset_free(&t->online);
        rc = kiln_cpuset_copy(&t->online, kiln_cpuset_count(&cores) ? &cores : &caches);
    }
    if (rc == KILN_OK && kiln_cpuset_count(&t->online) == 0 && len > 0) {
        KILN_ERROR("topo", WHERE ": no active processor in %zu bytes", len);
        rc = KILN_EPARSE;
    }
    kiln_cpuset_free(&cores);
    kiln_cpuset_free(&caches);
    return rc;
}

static bool data_or_unified(enum kiln_cpu_cache_type type)
{
    return type == KILN_CPU_CACHE_DATA || type == KILN_CPU_CACHE_UNIFIED;
}

int kiln__topo_parse_slpi(const void *buf, size_t len, unsigned flags, struct kiln_topo **out)
{
    assert(out);
    *out = NULL;
    if (!buf && len > 0)
        return KILN_EINVAL;
    struct kiln_topo *t = kiln__calloc(1, sizeof(*t));
    if (!t)
        return KILN_ENOMEM;
    t->largest = -1;
    t->all_levels = (flags & KILN_TOPO_ALL_LEVELS) != 0;
    const unsigned char *b = buf;
    size_t cap = 0;
    int rc = read_online(t, b, len);
    for (size_t at = 0; at < len && rc == KILN_OK;) {
        uint32_t kind = kiln__load_le32(b + at), size = kiln__load_le32(b + at + 4);
        if (kind == REL_CACHE)
            rc = read_cache(t, &cap, b + at, size, at);
        at += size;
    }
    if (rc < 0) {
        kiln_topo_free(t);
        return rc;
    }
    if (!t->all_levels) {
        /* As the sysfs reader: only the last-level data or unified caches. */
        uint32_t top = 0;
        for (size_t i = 0; i < t->ndomains; i++)
            if (data_or_unified(t->domains[i].type))
                top = KILN_MAX(top, t->domains[i].level);
        size_t keep = 0;
        for (size_t i = 0; i < t->ndomains; i++) {
            if (t->domains[i].level == top && data_or_unified(t->domains[i].type))
                t->domains[keep++] = t->domains[i];
            else
                kiln_cpuset_free(&t->domains[i].cpus);
        }
        t->ndomains = keep;
    }
    kiln__topo_finish(t, WHERE);
    *out = t;
    return KILN_OK;
}
