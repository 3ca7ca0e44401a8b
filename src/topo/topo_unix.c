/*
 * topo_unix.c - reading the cache topology from Linux sysfs, the CPUs a
 * process may use (affinity and cgroup v2 cpuset), and setting the affinity
 * of every thread.
 *
 * Design:
 * - Every path is relative to a root given by the caller (sysfs, proc,
 *   cgroup), so tests run the same code on fixture trees.
 * - Every online CPU's own entries are read, and they must agree. A cache
 *   is read whole (level, type, size, CPUs, id) through the lowest online
 *   CPU that shares it, its lead. Every other CPU of that cache then reads
 *   its own entry for it and must list the same CPUs (and, in the
 *   all-levels read, give the same size): a malformed file or a CPU that
 *   disagrees refuses the whole read. The checks compare the text with the
 *   lead's first and parse only when it differs, so the last-level read of
 *   a 256-CPU part costs one small file per CPU beyond the leads' dozen
 *   each, well under 2 ms (docs/topo.md).
 * - In the default (last-level) read a CPU inside a known domain checks it
 *   through the same index the lead read it from, without reading its other
 *   levels: caches nest, and reading every level of every CPU would cost
 *   ten times as many files. The all-levels read lists and checks every
 *   entry of every CPU.
 * - The reader builds the whole topology privately and hands it out only
 *   when every file read parsed and agreed: any failure frees it all, so a
 *   caller never sees a partial domain. Each failure logs one line naming
 *   the file; the functions above it only forward the code.
 * - Two domains of one level and type that share a CPU must be the same
 *   set; otherwise the input contradicts itself and is refused.
 * - Files are opened non-blocking: a FIFO planted in a tree reads as empty
 *   (and is refused as malformed) instead of blocking in open(2).
 * - Pinning sets the calling thread first, so a thread it creates from then
 *   on inherits the mask, then walks /proc/self/task until a pass finds no
 *   thread it has not set: a thread created by a not-yet-set thread during
 *   one pass is found by the next.
 */
#include "topo_internal.h"

#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define DEFAULT_SYSFS  "/sys/devices/system/cpu"
#define DEFAULT_PROC   "/proc"
#define DEFAULT_CGROUP "/sys/fs/cgroup"

/* The most cache indices one CPU may have (Linux has at most a handful). */
#define MAX_INDICES 32
/* The largest sysfs or proc text kiln reads. */
#define MAX_TEXT (1u << 20)

/* ---- small file reads ------------------------------------------------------- */

/*
 * The kiln code of a failed open of a path the caller gave: a path too long
 * or a link loop is bad input like a missing file, not an I/O failure.
 */
static int open_error(int err)
{
    if (err == ELOOP || err == ENAMETOOLONG)
        return KILN_EINVAL;
    return kiln_error_from_errno(err, KILN_EIO_OPEN);
}

/*
 * Reads a whole file (proc files report size 0, so it reads to the end,
 * unless `one_read`) into *buf (grown as needed, NUL-terminated). `dirfd`
 * may be AT_FDCWD.
 * @return the length, or a negative errno-based kiln code; nothing logged.
 */
static int64_t read_at(int dirfd, const char *path, bool one_read, char **buf, size_t *cap,
                       int *err)
{
    int fd = openat(dirfd, path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
        *err = errno;
        return open_error(errno);
    }
    size_t len = 0;
    for (;;) {
        if (len + 1 >= *cap) {
            size_t ncap = *cap ? *cap * 2 : 4096;
            if (ncap > MAX_TEXT + 1) {
                close(fd);
                *err = EFBIG;
                return KILN_ERANGE;
            }
            char *nb = kiln__realloc(*buf, ncap);
            if (!nb) {
                close(fd);
                *err = ENOMEM;
                return KILN_ENOMEM;
            }
            *buf = nb;
            *cap = ncap;
        }
        ssize_t got = read(fd, *buf + len, *cap - 1 - len);
        if (got < 0) {
            if (errno == EINTR)
                continue;
            *err = errno;
            close(fd);
            return kiln_error_from_errno(*err, KILN_EIO_READ);
        }
        if (got == 0)
            break;
        len += (size_t)got;
        /* A sysfs attribute (or a regular file) comes whole in one read, so a
         * read that left room is the end: this saves a call per file. */
        if (one_read && len + 1 < *cap)
            break;
    }
    close(fd);
    (*buf)[len] = '\0';
    return (int64_t)len;
}

/* ---- the sysfs reader ------------------------------------------------------- */

/* Where a domain was read from, for the other CPUs' checks against it. */
struct source {
    uint32_t lead;  /* the CPU it was read through */
    uint32_t index; /* its cache index there */
    bool map;       /* read from shared_cpu_map, not shared_cpu_list */
    char text[64];  /* the lead's CPU text, trimmed; "" when it did not fit */
};

struct reader {
    const char *root;
    int rootfd;
    char *buf;
    size_t cap;
    struct kiln_topo *topo;
    size_t dom_cap;
    struct source *src; /* one per domain, in the order they were added */
    size_t src_cap;
};

/* Logs one error about ROOT/REL and returns rc. */
static int fail(const struct reader *r, const char *rel, int rc, const char *fmt, ...)
    KILN_PRINTF(4, 5);

static int fail(const struct reader *r, const char *rel, int rc, const char *fmt, ...)
{
    char what[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    KILN_ERROR("topo", "%s/%s: %s", r->root, rel, what);
    return rc;
}

/*
 * Reads ROOT/REL into r->buf. @return its length; KILN_ENOENT without a log
 * when `optional` and the file is missing; else a logged error.
 */
static int64_t read_file(struct reader *r, const char *rel, bool optional)
{
    int err = 0;
    int64_t n = read_at(r->rootfd, rel, true, &r->buf, &r->cap, &err);
    r->topo->files_read++;
    if (n == KILN_ENOENT && optional)
        return n;
    if (n < 0)
        return fail(r, rel, (int)n, "cannot read: %s", strerror(err));
    return n;
}

/* A text for a log line: the file's content, shortened and on one line. */
static const char *shown(const char *text)
{
    static _Thread_local char out[48];
    size_t i = 0;
    for (; text[i] && i + 1 < sizeof(out); i++)
        out[i] = (text[i] == '\n') ? ' ' : text[i];
    out[i] = '\0';
    while (i > 0 && out[i - 1] == ' ')
        out[--i] = '\0';
    return out;
}

static int parse_small_uint(const char *text, size_t len, uint64_t max, uint64_t *out)
{
    while (len > 0 && (text[len - 1] == '\n' || text[len - 1] == ' '))
        len--;
    if (len == 0 || len > 19)
        return KILN_EPARSE;
    uint64_t v = 0;
    for (size_t i = 0; i < len; i++) {
        if (text[i] < '0' || text[i] > '9')
            return KILN_EPARSE;
        v = v * 10 + (uint64_t)(text[i] - '0');
    }
    if (v > max)
        return KILN_EPARSE;
    *out = v;
    return KILN_OK;
}

/* One cache index of one CPU, as far as it has been read. */
struct entry {
    uint32_t index;
    uint32_t level;
    enum kiln_cpu_cache_type type;
};

static int compare_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

/* Lists cpuN/cache/index*; no cache folder means no indices. */
static int list_indices(struct reader *r, uint32_t cpu, uint32_t *idx, size_t *n)
{
    char rel[64];
    snprintf(rel, sizeof(rel), "cpu%u/cache", cpu);
    *n = 0;
    int fd = openat(r->rootfd, rel, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT)
            return KILN_OK;
        return fail(r, rel, open_error(errno), "cannot open: %s", strerror(errno));
    }
    DIR *d = fdopendir(fd);
    if (!d) {
        int err = errno;
        close(fd);
        return fail(r, rel, kiln_error_from_errno(err, KILN_EIO_OPEN), "cannot list: %s",
                    strerror(err));
    }
    int rc = KILN_OK;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        const char *name = e->d_name;
        if (strncmp(name, "index", 5) != 0 || name[5] == '\0')
            continue;
        uint64_t v;
        if (parse_small_uint(name + 5, strlen(name + 5), 1u << 20, &v) < 0)
            continue; /* not an index entry */
        if (*n == MAX_INDICES) {
            rc = fail(r, rel, KILN_ERANGE, "more than %d cache indices", MAX_INDICES);
            break;
        }
        idx[(*n)++] = (uint32_t)v;
    }
    closedir(d);
    if (rc == KILN_OK)
        qsort(idx, *n, sizeof(*idx), compare_u32);
    return rc;
}

static int read_level_type(struct reader *r, uint32_t cpu, struct entry *e)
{
    char rel[96];
    snprintf(rel, sizeof(rel), "cpu%u/cache/index%u/level", cpu, e->index);
    int64_t n = read_file(r, rel, false);
    if (n < 0)
        return (int)n;
    uint64_t level;
    if (parse_small_uint(r->buf, (size_t)n, 255, &level) < 0 || level == 0)
        return fail(r, rel, KILN_EPARSE, "expected a cache level 1..255, got '%s'", shown(r->buf));
    e->level = (uint32_t)level;

    snprintf(rel, sizeof(rel), "cpu%u/cache/index%u/type", cpu, e->index);
    n = read_file(r, rel, false);
    if (n < 0)
        return (int)n;
    static const struct {
        const char *name;
        enum kiln_cpu_cache_type type;
    } types[] = {{"Data", KILN_CPU_CACHE_DATA},
                 {"Instruction", KILN_CPU_CACHE_INSTRUCTION},
                 {"Unified", KILN_CPU_CACHE_UNIFIED}};
    size_t len = (size_t)n;
    while (len > 0 && (r->buf[len - 1] == '\n' || r->buf[len - 1] == ' '))
        len--;
    for (size_t i = 0; i < KILN_ARRAY_LEN(types); i++) {
        if (strlen(types[i].name) == len && memcmp(types[i].name, r->buf, len) == 0) {
            e->type = types[i].type;
            return KILN_OK;
        }
    }
    return fail(r, rel, KILN_EPARSE, "expected Data, Instruction or Unified, got '%s'",
                shown(r->buf));
}

/* The length of text without its trailing newlines and blanks. */
static size_t trimmed(const char *text, size_t len)
{
    while (len > 0 && (text[len - 1] == '\n' || text[len - 1] == ' '))
        len--;
    return len;
}

/*
 * Reads the CPUs of cpuCPU/cache/indexINDEX (shared_cpu_list, else
 * shared_cpu_map) into *set, which must contain `cpu`; leaves the file's
 * text in r->buf and its path in rel (cap 96). *map says which file it was.
 */
static int read_cpus(struct reader *r, uint32_t cpu, uint32_t index, struct kiln_cpuset *set,
                     bool *map, char *rel, int64_t *len)
{
    char base[64];
    snprintf(base, sizeof(base), "cpu%u/cache/index%u", cpu, index);
    snprintf(rel, 96, "%s/shared_cpu_list", base);
    *map = false;
    int64_t n = read_file(r, rel, true);
    if (n == KILN_ENOENT) {
        *map = true;
        snprintf(rel, 96, "%s/shared_cpu_map", base);
        n = read_file(r, rel, true);
        if (n == KILN_ENOENT)
            return fail(r, base, KILN_ENOENT, "has neither shared_cpu_list nor shared_cpu_map");
    }
    if (n < 0)
        return (int)n;
    *len = n;
    int rc = *map ? kiln_cpuset_parse_mask(set, r->buf, (size_t)n)
                  : kiln_cpuset_parse_list(set, r->buf, (size_t)n);
    if (rc < 0)
        return fail(r, rel, rc, "expected a CPU %s, got '%s'",
                    *map ? "mask like 00ff00ff" : "list like 0-7,16-23", shown(r->buf));
    if (!kiln_cpuset_has(set, cpu))
        return fail(r, rel, KILN_EPARSE, "does not contain cpu%u itself", cpu);
    return KILN_OK;
}

/*
 * Reads size, CPUs and id of one cache into *d (zeroed by the caller) and
 * where it came from into *src.
 */
static int read_domain(struct reader *r, uint32_t cpu, const struct entry *e,
                       struct kiln_cpu_cache_domain *d, struct source *src)
{
    char rel[96];
    d->level = e->level;
    d->type = e->type;

    snprintf(rel, sizeof(rel), "cpu%u/cache/index%u/size", cpu, e->index);
    int64_t n = read_file(r, rel, false);
    if (n < 0)
        return (int)n;
    int rc = kiln_topo_parse_size(r->buf, (size_t)n, &d->size);
    if (rc < 0)
        return fail(r, rel, rc, "expected a size like 32K or 96M, got '%s'", shown(r->buf));

    *src = (struct source){.lead = cpu, .index = e->index};
    KILN_TRY(read_cpus(r, cpu, e->index, &d->cpus, &src->map, rel, &n));
    size_t tl = trimmed(r->buf, (size_t)n);
    if (tl < sizeof(src->text)) {
        memcpy(src->text, r->buf, tl);
        src->text[tl] = '\0';
    }
    kiln__cpuset_and(&d->cpus, &r->topo->online);

    snprintf(rel, sizeof(rel), "cpu%u/cache/index%u/id", cpu, e->index);
    n = read_file(r, rel, true);
    d->id = -1;
    if (n >= 0) {
        uint64_t id;
        if (parse_small_uint(r->buf, (size_t)n, INT64_MAX, &id) < 0)
            return fail(r, rel, KILN_EPARSE, "expected a cache id, got '%s'", shown(r->buf));
        d->id = (int64_t)id;
    } else if (n != KILN_ENOENT) {
        return (int)n;
    }
    return KILN_OK;
}

/*
 * Checks that `cpu`, a CPU of known domain `i` that is not its lead, says
 * the same about it through its own cpuCPU/cache/indexINDEX: the same CPUs
 * and, when `size` is asked for, the same size. The text is compared with
 * the lead's first, so an agreeing CPU costs one read and no parse.
 */
static int check_domain(struct reader *r, uint32_t cpu, uint32_t index, size_t i, bool size)
{
    const struct kiln_cpu_cache_domain *d = &r->topo->domains[i];
    const struct source *src = &r->src[i];
    char rel[96], lead[96];
    snprintf(lead, sizeof(lead), "cpu%u/cache/index%u", src->lead, src->index);
    if (size) {
        snprintf(rel, sizeof(rel), "cpu%u/cache/index%u/size", cpu, index);
        int64_t n = read_file(r, rel, false);
        if (n < 0)
            return (int)n;
        uint64_t bytes;
        int rc = kiln_topo_parse_size(r->buf, (size_t)n, &bytes);
        if (rc < 0)
            return fail(r, rel, rc, "expected a size like 32K or 96M, got '%s'", shown(r->buf));
        if (bytes != d->size)
            return fail(r, rel, KILN_EPARSE, "says %" PRIu64 " bytes, but %s says %" PRIu64, bytes,
                        lead, d->size);
    }
    /* The common case: the same file holding the same text as the lead's. */
    char base[64];
    snprintf(base, sizeof(base), "cpu%u/cache/index%u", cpu, index);
    if (src->text[0] != '\0') {
        snprintf(rel, sizeof(rel), "%s/%s", base, src->map ? "shared_cpu_map" : "shared_cpu_list");
        int64_t n = read_file(r, rel, true);
        if (n >= 0 && trimmed(r->buf, (size_t)n) == strlen(src->text) &&
            memcmp(r->buf, src->text, strlen(src->text)) == 0)
            return KILN_OK;
        if (n < 0 && n != KILN_ENOENT)
            return (int)n;
    }
    struct kiln_cpuset set = {0};
    bool map;
    int64_t n;
    int rc = read_cpus(r, cpu, index, &set, &map, rel, &n);
    if (rc == KILN_OK) {
        kiln__cpuset_and(&set, &r->topo->online);
        if (!kiln__cpuset_equal(&set, &d->cpus)) {
            char mine[48], theirs[48];
            kiln_cpuset_format(&set, mine, sizeof(mine));
            kiln_cpuset_format(&d->cpus, theirs, sizeof(theirs));
            rc = fail(r, rel, KILN_EPARSE, "disagrees with %s: online CPUs %s here, %s there", lead,
                      mine, theirs);
        }
    }
    kiln_cpuset_free(&set);
    return rc;
}

/* Adds *d (taking its set) and its source; refuses contradictions. */
static int add_domain(struct reader *r, uint32_t cpu, const struct entry *e,
                      struct kiln_cpu_cache_domain *d, const struct source *src)
{
    if (r->topo->ndomains == r->src_cap) {
        struct source *all = kiln__grow(r->src, r->topo->ndomains, &r->src_cap, sizeof(*all), 16);
        if (!all)
            return KILN_ENOMEM;
        r->src = all;
    }
    size_t before = r->topo->ndomains;
    int rc = kiln__topo_add_domain(r->topo, &r->dom_cap, d);
    if (rc == KILN_OK && r->topo->ndomains > before)
        r->src[before] = *src;
    if (rc <= 0)
        return rc;
    char rel[96];
    snprintf(rel, sizeof(rel), "cpu%u/cache/index%u", cpu, e->index);
    if (rc == KILN__DOMAIN_OVERLAP)
        return fail(r, rel, KILN_EPARSE,
                    "its CPUs overlap another L%u %s cache without matching it", d->level,
                    kiln_cpu_cache_type_name(d->type));
    return fail(r, rel, KILN_EPARSE, "same CPUs as another L%u cache but another size", d->level);
}

static bool data_or_unified(enum kiln_cpu_cache_type type)
{
    return type == KILN_CPU_CACHE_DATA || type == KILN_CPU_CACHE_UNIFIED;
}

/* Reads one cache of `cpu` as its lead and adds it. */
static int lead_domain(struct reader *r, uint32_t cpu, const struct entry *e)
{
    struct kiln_cpu_cache_domain d = {0};
    struct source src;
    int rc = read_domain(r, cpu, e, &d, &src);
    if (rc == KILN_OK)
        rc = add_domain(r, cpu, e, &d, &src);
    kiln_cpuset_free(&d.cpus);
    return rc;
}

/* @return the known domain of this level and type that holds `cpu`, or -1. */
static int64_t known_domain(const struct reader *r, uint32_t cpu, const struct entry *e)
{
    for (size_t i = 0; i < r->topo->ndomains; i++) {
        const struct kiln_cpu_cache_domain *d = &r->topo->domains[i];
        if (d->level == e->level && d->type == e->type && kiln_cpuset_has(&d->cpus, cpu))
            return (int64_t)i;
    }
    return -1;
}

static int read_cpu(struct reader *r, uint32_t cpu, bool all_levels)
{
    /* The last-level read: a CPU of a known domain checks it through the
     * lead's index and reads nothing else (see the design comment). */
    if (!all_levels) {
        bool covered = false;
        for (size_t i = 0; i < r->topo->ndomains; i++) {
            if (!kiln_cpuset_has(&r->topo->domains[i].cpus, cpu))
                continue;
            KILN_TRY(check_domain(r, cpu, r->src[i].index, i, false));
            covered = true;
        }
        if (covered)
            return KILN_OK;
    }

    uint32_t idx[MAX_INDICES];
    size_t n;
    KILN_TRY(list_indices(r, cpu, idx, &n));
    struct entry entries[MAX_INDICES];
    uint32_t top = 0;
    for (size_t i = 0; i < n; i++) {
        entries[i] = (struct entry){.index = idx[i]};
        KILN_TRY(read_level_type(r, cpu, &entries[i]));
        if (data_or_unified(entries[i].type))
            top = KILN_MAX(top, entries[i].level);
    }
    for (size_t i = 0; i < n; i++) {
        const struct entry *e = &entries[i];
        if (!all_levels && (e->level != top || !data_or_unified(e->type)))
            continue;
        int64_t known = known_domain(r, cpu, e);
        if (known >= 0)
            KILN_TRY(check_domain(r, cpu, e->index, (size_t)known, true));
        else
            KILN_TRY(lead_domain(r, cpu, e));
    }
    return KILN_OK;
}

/* Keeps only last-level data/unified domains (the last-level-only read). */
static void keep_last_level(struct kiln_topo *t)
{
    uint32_t top = 0;
    for (size_t i = 0; i < t->ndomains; i++)
        if (data_or_unified(t->domains[i].type))
            top = KILN_MAX(top, t->domains[i].level);
    size_t out = 0;
    for (size_t i = 0; i < t->ndomains; i++) {
        if (t->domains[i].level == top && data_or_unified(t->domains[i].type))
            t->domains[out++] = t->domains[i];
        else
            kiln_cpuset_free(&t->domains[i].cpus);
    }
    t->ndomains = out;
}

int kiln_topo_read(const char *sysfs_root, unsigned flags, struct kiln_topo **out)
{
    if (!out)
        return KILN_EINVAL;
    assert(out);
    *out = NULL;
    struct reader r = {.root = sysfs_root ? sysfs_root : DEFAULT_SYSFS};
    r.topo = kiln__calloc(1, sizeof(*r.topo));
    if (!r.topo)
        return KILN_ENOMEM;
    r.topo->largest = -1;
    r.topo->all_levels = (flags & KILN_TOPO_ALL_LEVELS) != 0;

    int rc = KILN_OK;
    r.rootfd = open(r.root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (r.rootfd < 0) {
        int err = errno;
        KILN_ERROR("topo", "%s: cannot open: %s", r.root, strerror(err));
        rc = open_error(err);
    }
    if (rc == KILN_OK) {
        int64_t n = read_file(&r, "online", false);
        if (n < 0)
            rc = (int)n;
        else if ((rc = kiln_cpuset_parse_list(&r.topo->online, r.buf, (size_t)n)) < 0)
            fail(&r, "online", rc, "expected a CPU list like 0-15, got '%s'", shown(r.buf));
        else if (kiln_cpuset_count(&r.topo->online) == 0)
            rc = fail(&r, "online", KILN_EPARSE, "lists no CPU");
    }
    for (int64_t c = rc == KILN_OK ? kiln_cpuset_next(&r.topo->online, 0) : -1;
         c >= 0 && rc == KILN_OK; c = kiln_cpuset_next(&r.topo->online, (uint32_t)c + 1))
        rc = read_cpu(&r, (uint32_t)c, r.topo->all_levels);

    if (r.rootfd >= 0)
        close(r.rootfd);
    kiln__free(r.buf);
    kiln__free(r.src);
    if (rc < 0) {
        kiln_topo_free(r.topo);
        return rc;
    }
    if (!r.topo->all_levels)
        keep_last_level(r.topo);
    kiln__topo_finish(r.topo, r.root);
    *out = r.topo;
    return KILN_OK;
}

/* ---- the CPUs this process may use --------------------------------------------- */

/* Reads the affinity of thread `tid` (0: the caller), growing past 1024 CPUs. */
static int get_affinity(pid_t tid, struct kiln_cpuset *out)
{
    *out = (struct kiln_cpuset){0};
    for (size_t ncpus = 1024; ncpus <= KILN_TOPO_MAX_CPUS; ncpus *= 2) {
        cpu_set_t *mask = CPU_ALLOC(ncpus);
        if (!mask)
            return KILN_ENOMEM;
        size_t size = CPU_ALLOC_SIZE(ncpus);
        CPU_ZERO_S(size, mask);
        if (sched_getaffinity(tid, size, mask) != 0) {
            int err = errno;
            CPU_FREE(mask);
            if (err == EINVAL)
                continue; /* the kernel has more CPUs than the mask holds */
            KILN_ERROR("topo", "sched_getaffinity(%d): %s", (int)tid, strerror(err));
            return kiln_error_from_errno(err, KILN_EIO);
        }
        int rc = KILN_OK;
        for (size_t c = 0; c < size * 8 && rc == KILN_OK; c++)
            if (CPU_ISSET_S(c, size, mask))
                rc = kiln__cpuset_add(out, (uint32_t)c);
        CPU_FREE(mask);
        if (rc < 0)
            kiln_cpuset_free(out);
        return rc;
    }
    KILN_ERROR("topo", "sched_getaffinity: more than %u CPUs", KILN_TOPO_MAX_CPUS);
    return KILN_ERANGE;
}

/* Finds the cgroup v2 mount in mountinfo: *mnt and its root *mroot. */
static int find_cgroup2_mount(const char *proc, char *mnt, size_t mcap, char *mroot, size_t rcap)
{
    char path[4096], *buf = NULL;
    size_t cap = 0;
    int err = 0;
    snprintf(path, sizeof(path), "%s/self/mountinfo", proc);
    int64_t n = read_at(AT_FDCWD, path, false, &buf, &cap, &err);
    if (n < 0) {
        kiln__free(buf);
        return (int)n;
    }
    int rc = KILN_ENOENT;
    for (char *line = buf, *next; line && *line; line = next) {
        next = strchr(line, '\n');
        if (next)
            *next++ = '\0';
        /* id parent major:minor root mountpoint options... - fstype source opts */
        char *sep = strstr(line, " - ");
        if (!sep || strncmp(sep + 3, "cgroup2 ", 8) != 0)
            continue;
        char root[2048], point[2048];
        if (sscanf(line, "%*s %*s %*s %2047s %2047s", root, point) != 2)
            continue;
        if (strchr(point, '\\') || strchr(root, '\\'))
            continue; /* octal escapes: not a mount kiln can use */
        snprintf(mnt, mcap, "%s", point);
        snprintf(mroot, rcap, "%s", root);
        rc = KILN_OK;
        break;
    }
    kiln__free(buf);
    return rc;
}

/*
 * Intersects *set with the cgroup v2 cpuset.cpus.effective nearest to the
 * process's cgroup. No cgroup v2, no cpuset file: no limit, not an error.
 */
static int apply_cgroup(const struct kiln_topo_env *env, struct kiln_cpuset *set)
{
    const char *proc = env && env->proc_root ? env->proc_root : DEFAULT_PROC;
    char path[4096], *buf = NULL;
    size_t cap = 0;
    int err = 0;
    snprintf(path, sizeof(path), "%s/self/cgroup", proc);
    int64_t n = read_at(AT_FDCWD, path, false, &buf, &cap, &err);
    if (n < 0) {
        KILN_DEBUG("topo", "%s: cannot read (%s): no cgroup limit applied", path, strerror(err));
        kiln__free(buf);
        return KILN_OK;
    }
    char cgpath[2048] = "";
    bool found = false;
    for (char *line = buf, *next; line && *line; line = next) {
        next = strchr(line, '\n');
        if (next)
            *next++ = '\0';
        if (strncmp(line, "0::", 3) == 0) {
            snprintf(cgpath, sizeof(cgpath), "%s", line + 3);
            found = true;
            break;
        }
    }
    if (!found) {
        kiln__free(buf);
        return KILN_OK;
    }

    char mnt[2048], mroot[2048] = "/";
    if (env && env->cgroup_root)
        snprintf(mnt, sizeof(mnt), "%s", env->cgroup_root);
    else if (find_cgroup2_mount(proc, mnt, sizeof(mnt), mroot, sizeof(mroot)) < 0)
        snprintf(mnt, sizeof(mnt), "%s", DEFAULT_CGROUP);
    /* A mount of a sub-tree shows paths below its root. */
    size_t rl = strlen(mroot);
    const char *rel = cgpath;
    if (rl > 1 && strncmp(cgpath, mroot, rl) == 0 && (cgpath[rl] == '/' || cgpath[rl] == '\0'))
        rel = cgpath + rl;

    char walk[2048];
    snprintf(walk, sizeof(walk), "%s", rel);
    int rc = KILN_OK;
    for (;;) {
        size_t wl = strlen(walk);
        while (wl > 0 && walk[wl - 1] == '/')
            walk[--wl] = '\0';
        int pn = snprintf(path, sizeof(path), "%s%s/cpuset.cpus.effective", mnt, walk);
        if (pn < 0 || (size_t)pn >= sizeof(path))
            break;
        n = read_at(AT_FDCWD, path, false, &buf, &cap, &err);
        if (n >= 0) {
            struct kiln_cpuset cg = {0};
            rc = kiln_cpuset_parse_list(&cg, buf, (size_t)n);
            if (rc < 0) {
                KILN_ERROR("topo", "%s: expected a CPU list, got '%s'", path, shown(buf));
            } else if (kiln_cpuset_count(&cg) == 0) {
                KILN_DEBUG("topo", "%s: empty: no cgroup limit applied", path);
            } else {
                kiln__cpuset_and(set, &cg);
                KILN_DEBUG("topo", "cgroup limit from %s", path);
            }
            kiln_cpuset_free(&cg);
            break;
        }
        if (n != KILN_ENOENT) {
            KILN_ERROR("topo", "%s: cannot read: %s", path, strerror(err));
            rc = (int)n;
            break;
        }
        if (wl == 0)
            break; /* the root has none: no cpuset controller */
        char *slash = strrchr(walk, '/');
        if (!slash)
            break;
        *slash = '\0';
    }
    kiln__free(buf);
    return rc;
}

int kiln_topo_allowed(const struct kiln_topo_env *env, struct kiln_cpuset *out)
{
    if (!out)
        return KILN_EINVAL;
    *out = (struct kiln_cpuset){0};
    struct kiln_topo_env own;
    if (env) {
        KILN_TRY(KILN_STRUCT_IN(&own, env, "kiln_topo_env"));
        env = &own;
    }
    int rc = env && env->affinity ? kiln_cpuset_copy(out, env->affinity) : get_affinity(0, out);
    if (rc == KILN_OK)
        rc = apply_cgroup(env, out);
    if (rc < 0)
        kiln_cpuset_free(out);
    return rc;
}

/* ---- pinning ------------------------------------------------------------------ */

static int set_one(pid_t tid, size_t size, const cpu_set_t *mask, const char *cpus)
{
    if (sched_setaffinity(tid, size, mask) == 0)
        return KILN_OK;
    int err = errno;
    if (err == ESRCH)
        return KILN_OK; /* the thread ended meanwhile */
    KILN_ERROR("topo", "sched_setaffinity(thread %d, CPUs %s): %s", (int)tid, cpus, strerror(err));
    return kiln_error_from_errno(err, KILN_EINVAL);
}

int kiln_process_set_affinity(const char *proc_root, const struct kiln_cpuset *cpus)
{
    if (!cpus)
        return KILN_EINVAL;
    assert(cpus);
    char text[128];
    KILN_TRY(kiln__pin_text(cpus, text, sizeof(text)));
    uint32_t span = kiln__cpuset_span(cpus);
    cpu_set_t *mask = CPU_ALLOC(span);
    if (!mask)
        return KILN_ENOMEM;
    size_t size = CPU_ALLOC_SIZE(span);
    CPU_ZERO_S(size, mask);
    for (int64_t c = kiln_cpuset_next(cpus, 0); c >= 0; c = kiln_cpuset_next(cpus, (uint32_t)c + 1))
        CPU_SET_S((size_t)c, size, mask);

    struct kiln__tid_list seen = {0};
    pid_t self = (pid_t)syscall(SYS_gettid);
    int rc = set_one(self, size, mask, text);
    if (rc == KILN_OK)
        rc = kiln__tid_add(&seen, (uint64_t)self);

    char dir[4096];
    snprintf(dir, sizeof(dir), "%s/self/task", proc_root ? proc_root : DEFAULT_PROC);
    for (int pass = 0; rc == KILN_OK; pass++) {
        if (pass == 64) {
            KILN_ERROR("topo", "%s: threads keep appearing; gave up after %d passes", dir, pass);
            rc = KILN_EBUSY;
            break;
        }
        DIR *d = opendir(dir);
        if (!d) {
            int err = errno;
            KILN_ERROR("topo", "%s: cannot list: %s", dir, strerror(err));
            rc = kiln_error_from_errno(err, KILN_EIO_OPEN);
            break;
        }
        size_t fresh = 0;
        struct dirent *e;
        while (rc == KILN_OK && (e = readdir(d)) != NULL) {
            char *end;
            long tid = strtol(e->d_name, &end, 10);
            if (*end != '\0' || tid <= 0 || kiln__tid_seen(&seen, (uint64_t)tid))
                continue;
            rc = set_one((pid_t)tid, size, mask, text);
            if (rc == KILN_OK)
                rc = kiln__tid_add(&seen, (uint64_t)tid);
            fresh++;
        }
        closedir(d);
        if (fresh == 0)
            break;
    }
    if (rc == KILN_OK)
        KILN_INFO("topo", "pinned %zu threads to CPUs %s", seen.n, text);
    kiln__tid_list_free(&seen);
    CPU_FREE(mask);
    return rc;
}
