/*
 * policy.c - how many workers: a pure function of the machine and the
 * caller's limits, and the parsers of the files the probe reads.
 *
 * Design. The policy takes no input but its arguments, so every rule is
 * unit-tested with made-up machines. Its invariants: 1 <= workers <= cpus,
 * where cpus is the affinity count cut by the cgroup quota; every step can
 * only lower the count, so the order of the rules does not matter for the
 * result, only for which one is named as the bound.
 *
 * Why these rules: a compiler thread per CPU is the most a CPU-bound build
 * can use (oversubscription was measured slower); a cgroup quota caps CPU
 * time below the affinity mask, and threads past it only wait; on Windows
 * the NT heap serialises the driver's allocations, so half the CPUs did
 * better there, while the segment heap scales; and memory past what is
 * free makes the system page, which is slower than fewer workers.
 *
 * kiln_pool_auto_workers (pool_size.c, which probes the machine and calls
 * the policy, so this file never reads the system) is the one place that
 * decides a worker count:
 * every part of kiln that starts threads (the preparation, the warm start,
 * the cache's loader, the benches) asks it with its kind of work, so the
 * rules above hold everywhere and the reason is logged the same way.
 *
 * The parsers read text from the OS. They are strict about shape, never
 * read past their length, and are fuzzed (fuzz/fuzz_pool_probe.c).
 */
#include "kiln_internal.h"
#include "pool_internal.h"

#include <assert.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* The limits of kiln's kinds of work (kiln_pool_work_limits). A driver
 * building one large pipeline peaked near 512 MiB; a reader holds one block
 * of at most 8 MiB. */
#define BUILD_MEM_PER_WORKER (512ull << 20)
#define BUILD_MEM_RESERVE    (1ull << 30)
#define READ_MEM_PER_WORKER  (8ull << 20)

/* ---- parsers ----------------------------------------------------------- */

static bool is_space(char c)
{
    return c == ' ' || c == '\t';
}

/* Parses decimal digits at *pos; @return 0 or KILN_EPARSE (none, or overflow). */
static int parse_u64(const char *t, size_t n, size_t *pos, uint64_t *out)
{
    size_t i = *pos;
    uint64_t v = 0;
    if (i >= n || t[i] < '0' || t[i] > '9')
        return KILN_EPARSE;
    for (; i < n && t[i] >= '0' && t[i] <= '9'; i++) {
        unsigned d = (unsigned)(t[i] - '0');
        if (v > (UINT64_MAX - d) / 10)
            return KILN_EPARSE;
        v = v * 10 + d;
    }
    *pos = i;
    *out = v;
    return KILN_OK;
}

int kiln__pool_parse_cpu_max(const char *t, size_t n, uint64_t *quota_us, uint64_t *period_us)
{
    size_t i = 0;
    uint64_t quota = 0, period = 0;
    if (n >= 3 && memcmp(t, "max", 3) == 0) {
        i = 3;
    } else {
        KILN_TRY(parse_u64(t, n, &i, &quota));
        if (quota == 0)
            return KILN_EPARSE; /* the kernel refuses a zero quota */
    }
    if (i >= n || !is_space(t[i]))
        return KILN_EPARSE;
    while (i < n && is_space(t[i]))
        i++;
    KILN_TRY(parse_u64(t, n, &i, &period));
    if (period == 0)
        return KILN_EPARSE;
    while (i < n && (is_space(t[i]) || t[i] == '\n'))
        i++;
    if (i != n)
        return KILN_EPARSE;
    *quota_us = quota;
    *period_us = period;
    return KILN_OK;
}

int kiln__pool_parse_meminfo(const char *t, size_t n, uint64_t *bytes)
{
    return kiln__pool_parse_kb_line(t, n, "MemAvailable:", bytes);
}

int kiln__pool_parse_kb_line(const char *t, size_t n, const char *key, uint64_t *bytes)
{
    const size_t klen = strlen(key);
    size_t line = 0;
    while (line < n) {
        const char *nl = memchr(t + line, '\n', n - line);
        size_t end = nl ? (size_t)(nl - t) : n;
        if (end - line >= klen && memcmp(t + line, key, klen) == 0) {
            size_t i = line + klen;
            uint64_t kb;
            while (i < end && is_space(t[i]))
                i++;
            KILN_TRY(parse_u64(t, end, &i, &kb));
            while (i < end && is_space(t[i]))
                i++;
            if (end - i < 2 || memcmp(t + i, "kB", 2) != 0)
                return KILN_EPARSE;
            i += 2;
            while (i < end && is_space(t[i]))
                i++;
            if (i != end || kb > UINT64_MAX / 1024)
                return KILN_EPARSE;
            *bytes = kb * 1024;
            return KILN_OK;
        }
        line = end + 1;
    }
    return KILN_ENOTFOUND;
}

int kiln__pool_parse_cgroup(const char *t, size_t n, char *path, size_t cap)
{
    size_t line = 0;
    while (line < n) {
        const char *nl = memchr(t + line, '\n', n - line);
        size_t end = nl ? (size_t)(nl - t) : n;
        /* "hierarchy-id:controllers:path"; v2 is id 0 with no controllers. */
        if (end - line >= 3 && memcmp(t + line, "0::", 3) == 0) {
            size_t start = line + 3, len = end - start;
            if (len == 0 || t[start] != '/' || memchr(t + start, '\0', len))
                return KILN_EPARSE;
            if (len + 1 > cap)
                return KILN_ERANGE;
            /* Refuse "." and ".." parts: the path must stay inside the
             * mount (a process outside this cgroup namespace sees "/.."). */
            size_t seg = start + 1;
            for (size_t i = start + 1; i <= end; i++) {
                if (i == end || t[i] == '/') {
                    size_t sl = i - seg;
                    if ((sl == 1 && t[seg] == '.') ||
                        (sl == 2 && t[seg] == '.' && t[seg + 1] == '.'))
                        return KILN_EPARSE;
                    seg = i + 1;
                }
            }
            memcpy(path, t + start, len);
            path[len] = '\0';
            return KILN_OK;
        }
        line = end + 1;
    }
    return KILN_ENOTFOUND;
}

int kiln__pool_parse_memory_max(const char *t, size_t n, uint64_t *bytes)
{
    size_t i = 0;
    uint64_t v = 0;
    if (n >= 3 && memcmp(t, "max", 3) == 0)
        i = 3; /* no limit: 0 */
    else
        KILN_TRY(parse_u64(t, n, &i, &v));
    while (i < n && (is_space(t[i]) || t[i] == '\n'))
        i++;
    if (i != n)
        return KILN_EPARSE;
    *bytes = v;
    return KILN_OK;
}

int kiln__pool_parse_statm(const char *t, size_t n, uint64_t page_size, uint64_t *bytes)
{
    size_t i = 0;
    uint64_t size, resident;
    KILN_TRY(parse_u64(t, n, &i, &size));
    if (i >= n || !is_space(t[i]))
        return KILN_EPARSE;
    while (i < n && is_space(t[i]))
        i++;
    KILN_TRY(parse_u64(t, n, &i, &resident));
    if (i < n && !is_space(t[i]) && t[i] != '\n')
        return KILN_EPARSE;
    if (page_size && resident > UINT64_MAX / page_size)
        return KILN_EPARSE;
    *bytes = resident * page_size;
    return KILN_OK;
}

/* ---- the policy -------------------------------------------------------- */

struct reason {
    char *buf;
    size_t cap;
    size_t len;
};

static void KILN_PRINTF(2, 3) add(struct reason *r, const char *fmt, ...)
{
    if (r->len >= r->cap)
        return;
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(r->buf + r->len, r->cap - r->len, fmt, ap);
    va_end(ap);
    if (k > 0)
        r->len = KILN_MIN(r->cap - 1, r->len + (size_t)k);
}

/* GB here means 2^30 bytes, as Windows and the port's own rule count them. */
static double gb(uint64_t bytes)
{
    return (double)bytes / (double)(1ull << 30);
}

static const char *bound_text(enum kiln_pool_bound b)
{
    switch (b) {
    case KILN_POOL_BY_QUOTA:
        return "the cgroup CPU quota";
    case KILN_POOL_BY_HEAP:
        return "the NT heap";
    case KILN_POOL_BY_MEMORY:
        return "memory";
    case KILN_POOL_BY_MAX:
        return "the requested maximum";
    case KILN_POOL_BY_CALLER:
        return "the caller";
    case KILN_POOL_BY_BACKGROUND:
        return "background mode";
    case KILN_POOL_BY_CPUS:
        break;
    }
    return "CPUs";
}

/* The policy over the library's own structs (kiln_pool_policy reads the
 * caller's into them). */
static void policy(const struct kiln_pool_machine *m, const struct kiln_pool_limits *lim,
                   struct kiln_pool_plan *plan)
{
    memset(plan, 0, sizeof(*plan));
    plan->size = sizeof(*plan);

    bool cpus_known = m->cpus_usable > 0 && !(m->flags & KILN_POOL_CPUS_UNKNOWN);
    unsigned cpus = cpus_known ? m->cpus_usable : 1;
    unsigned workers = cpus;
    enum kiln_pool_bound bound = KILN_POOL_BY_CPUS;

    bool quota = m->quota_us > 0 && m->period_us > 0 && !(m->flags & KILN_POOL_QUOTA_UNREADABLE);
    uint64_t quota_cpus = 0;
    if (quota) {
        quota_cpus = (m->quota_us + m->period_us - 1) / m->period_us; /* ceil */
        if (quota_cpus < cpus) {
            cpus = (unsigned)KILN_MAX(quota_cpus, 1u);
            workers = cpus;
            bound = KILN_POOL_BY_QUOTA;
        }
    }

    if (m->heap == KILN_HEAP_NT && cpus > 1) {
        workers = cpus / 2;
        bound = KILN_POOL_BY_HEAP;
    }

    bool mem_rule = lim->mem_per_worker > 0;
    bool mem_known = m->mem_available > 0 && !(m->flags & KILN_POOL_MEM_UNKNOWN);
    if (mem_rule && mem_known) {
        uint64_t spare =
            m->mem_available > lim->mem_reserve ? m->mem_available - lim->mem_reserve : 0;
        uint64_t by_mem = 1 + spare / lim->mem_per_worker;
        if (by_mem < workers) {
            workers = (unsigned)by_mem;
            bound = KILN_POOL_BY_MEMORY;
        }
    }

    /* Background work leaves three quarters of the CPUs to the user. */
    unsigned quarter = KILN_MAX(cpus / 4, 1u);
    if (lim->background && quarter < workers) {
        workers = quarter;
        bound = KILN_POOL_BY_BACKGROUND;
    }

    if (lim->max_workers > 0 && lim->max_workers < workers) {
        workers = lim->max_workers;
        bound = KILN_POOL_BY_MAX;
    }
    /* Every rule above only lowers the count and none goes below 1. */
    assert(workers >= 1 && workers <= cpus);

    plan->workers = workers;
    plan->cpus = cpus;
    plan->bound = bound;

    struct reason r = {plan->reason, sizeof(plan->reason), 0};
    add(&r, "%u worker%s: ", workers, workers == 1 ? "" : "s");
    if (cpus_known)
        add(&r, "%u CPU%s usable", m->cpus_usable, m->cpus_usable == 1 ? "" : "s");
    else
        add(&r, "CPU count unknown, assuming 1");
    if (quota)
        add(&r, ", cgroup quota %.2f CPUs", (double)m->quota_us / (double)m->period_us);
    else if (m->flags & KILN_POOL_QUOTA_UNREADABLE)
        add(&r, ", cgroup quota unreadable (ignored)");
    if (m->heap == KILN_HEAP_NT)
        add(&r, ", NT heap: half the CPUs");
    else if (m->heap == KILN_HEAP_SEGMENT)
        add(&r, ", segment heap");
    if (mem_rule && mem_known) {
        add(&r, ", %.1f GiB free", gb(m->mem_available));
        if (lim->mem_reserve > 0)
            add(&r, " less %.1f GiB reserve", gb(lim->mem_reserve));
        add(&r, " at %.1f GiB per worker", gb(lim->mem_per_worker));
    } else if (mem_rule) {
        add(&r, ", free memory unknown (not limiting)");
    }
    if (lim->background)
        add(&r, ", background: a quarter of the CPUs");
    if (lim->max_workers > 0)
        add(&r, ", at most %u", lim->max_workers);
    if (bound != KILN_POOL_BY_CPUS)
        add(&r, "; limited by %s", bound_text(bound));
}

int kiln_pool_policy(const struct kiln_pool_machine *machine, const struct kiln_pool_limits *limits,
                     struct kiln_pool_plan *plan)
{
    if (!machine || !plan)
        return KILN_EINVAL;
    KILN_TRY(kiln__struct_out_check(plan, "kiln_pool_plan"));
    struct kiln_pool_machine m = KILN_POOL_MACHINE_INIT;
    struct kiln_pool_limits lim = KILN_POOL_LIMITS_INIT;
    KILN_TRY(KILN_STRUCT_IN(&m, machine, "kiln_pool_machine"));
    KILN_TRY(KILN_STRUCT_IN(&lim, limits, "kiln_pool_limits"));
    struct kiln_pool_plan p = KILN_POOL_PLAN_INIT;
    policy(&m, &lim, &p);
    KILN_STRUCT_OUT(plan, &p);
    return KILN_OK;
}

void kiln_pool_work_limits(enum kiln_pool_work work, struct kiln_pool_limits *limits)
{
    if (!limits || kiln__struct_out_check(limits, "kiln_pool_limits") < 0)
        return;
    struct kiln_pool_limits l = KILN_POOL_LIMITS_INIT;
    if (work == KILN_POOL_WORK_READ)
        l = (struct kiln_pool_limits){.size = sizeof(l),
                                      .mem_per_worker = READ_MEM_PER_WORKER,
                                      .max_workers = KILN_POOL_MAX_READERS};
    else
        l = (struct kiln_pool_limits){.size = sizeof(l),
                                      .mem_reserve = BUILD_MEM_RESERVE,
                                      .mem_per_worker = BUILD_MEM_PER_WORKER,
                                      .background = work == KILN_POOL_WORK_BACKGROUND};
    KILN_STRUCT_OUT(limits, &l);
}
