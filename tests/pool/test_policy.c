/*
 * test_policy.c - the pool policy as a pure function, its parsers, and the
 * probe over fixture trees (tests/fixtures/pool/NAME/{proc,cgroup}).
 */
#include "kiln_test.h"
#include "kiln_internal.h"
#include "pool_internal.h"

#include <unistd.h>

#define GB (1ull << 30)
#define MB (1ull << 20)

static struct kiln_pool_plan plan_for(struct kiln_pool_machine m, struct kiln_pool_limits lim)
{
    struct kiln_pool_plan p = KILN_POOL_PLAN_INIT;
    int rc = kiln_pool_policy(&m, &lim, &p);
    if (rc != KILN_OK)
        kt_fail(__FILE__, __LINE__, "kiln_pool_policy: %s", kiln_errname(rc));
    return p;
}

#define CHECK_REASON(plan, text)                                                           \
    do {                                                                                   \
        if (strcmp((plan).reason, (text)) != 0)                                            \
            kt_fail(__FILE__, __LINE__, "reason \"%s\" != \"%s\"", (plan).reason, (text)); \
    } while (0)

KT_CASE(every_cpu_when_memory_allows)
{
    struct kiln_pool_machine m = {
        .size = sizeof(m), .cpus_usable = 12, .mem_available = (uint64_t)(9.1 * GB)};
    struct kiln_pool_plan p =
        plan_for(m, (struct kiln_pool_limits){.size = sizeof(struct kiln_pool_limits),
                                              .mem_per_worker = GB / 2});
    KT_CHECK_EQ(p.workers, 12);
    KT_CHECK_EQ(p.cpus, 12);
    KT_CHECK_EQ(p.bound, KILN_POOL_BY_CPUS);
    CHECK_REASON(p, "12 workers: 12 CPUs usable, 9.1 GiB free at 0.5 GiB per worker");
}

KT_CASE(never_more_than_cpus)
{
    /* Plenty of memory and a high maximum never add workers past the CPUs. */
    struct kiln_pool_machine m = {.size = sizeof(m), .cpus_usable = 4, .mem_available = 512 * GB};
    struct kiln_pool_plan p = plan_for(
        m, (struct kiln_pool_limits){
               .size = sizeof(struct kiln_pool_limits), .mem_per_worker = MB, .max_workers = 64});
    KT_CHECK_EQ(p.workers, 4);
    m.cpus_usable = 1;
    p = plan_for(m, (struct kiln_pool_limits)KILN_POOL_LIMITS_INIT);
    KT_CHECK_EQ(p.workers, 1);
    CHECK_REASON(p, "1 worker: 1 CPU usable");
}

KT_CASE(quota_caps_cpus_rounding_up)
{
    struct kiln_pool_machine m = {
        .size = sizeof(m), .cpus_usable = 16, .quota_us = 200000, .period_us = 100000};
    struct kiln_pool_plan p = plan_for(m, (struct kiln_pool_limits)KILN_POOL_LIMITS_INIT);
    KT_CHECK_EQ(p.workers, 2);
    KT_CHECK_EQ(p.cpus, 2);
    KT_CHECK_EQ(p.bound, KILN_POOL_BY_QUOTA);
    CHECK_REASON(
        p, "2 workers: 16 CPUs usable, cgroup quota 2.00 CPUs; limited by the cgroup CPU quota");

    m.quota_us = 150000; /* 1.5 CPUs: a second worker still gets half a CPU */
    KT_CHECK_EQ(plan_for(m, (struct kiln_pool_limits)KILN_POOL_LIMITS_INIT).workers, 2);
    m.quota_us = 10000; /* a tenth of a CPU: still one worker */
    KT_CHECK_EQ(plan_for(m, (struct kiln_pool_limits)KILN_POOL_LIMITS_INIT).workers, 1);
    m.quota_us = 6400000; /* a quota above the affinity mask does not add CPUs */
    p = plan_for(m, (struct kiln_pool_limits)KILN_POOL_LIMITS_INIT);
    KT_CHECK_EQ(p.workers, 16);
    KT_CHECK_EQ(p.bound, KILN_POOL_BY_CPUS);
}

KT_CASE(memory_rule)
{
    /* The first worker is always allowed, one more per 768 MB past a 4 GB
     * reserve: 8 GiB free gives 1 + 4096/768 = 6. */
    struct kiln_pool_machine m = {.size = sizeof(m), .cpus_usable = 12, .mem_available = 8 * GB};
    struct kiln_pool_limits lim = {
        .size = sizeof(lim), .mem_reserve = 4 * GB, .mem_per_worker = 768 * MB};
    struct kiln_pool_plan p = plan_for(m, lim);
    KT_CHECK_EQ(p.workers, 6);
    KT_CHECK_EQ(p.bound, KILN_POOL_BY_MEMORY);
    CHECK_REASON(p, "6 workers: 12 CPUs usable, 8.0 GiB free less 4.0 GiB reserve at 0.8 GiB per "
                    "worker; limited by memory");
    m.mem_available = 3 * GB; /* below the reserve: one worker */
    KT_CHECK_EQ(plan_for(m, lim).workers, 1);
    m.mem_available = 0; /* unknown: the memory rule does not limit */
    m.flags = KILN_POOL_MEM_UNKNOWN;
    p = plan_for(m, lim);
    KT_CHECK_EQ(p.workers, 12);
    CHECK_REASON(p, "12 workers: 12 CPUs usable, free memory unknown (not limiting)");
    lim.mem_per_worker = 0; /* rule off: memory is not mentioned */
    m.mem_available = GB;
    m.flags = 0;
    CHECK_REASON(plan_for(m, lim), "12 workers: 12 CPUs usable");
}

KT_CASE(max_workers_bound)
{
    struct kiln_pool_machine m = {.size = sizeof(m), .cpus_usable = 32};
    struct kiln_pool_plan p = plan_for(
        m, (struct kiln_pool_limits){.size = sizeof(struct kiln_pool_limits), .max_workers = 8});
    KT_CHECK_EQ(p.workers, 8);
    KT_CHECK_EQ(p.bound, KILN_POOL_BY_MAX);
    CHECK_REASON(p, "8 workers: 32 CPUs usable, at most 8; limited by the requested maximum");
}

KT_CASE(windows_heap_kinds)
{
    struct kiln_pool_machine m = {
        .size = sizeof(m), .cpus_usable = 12, .heap = KILN_HEAP_NT, .mem_available = 16 * GB};
    struct kiln_pool_limits lim = {
        .size = sizeof(lim), .mem_reserve = 4 * GB, .mem_per_worker = 768 * MB, .max_workers = 32};
    struct kiln_pool_plan p = plan_for(m, lim);
    KT_CHECK_EQ(p.workers, 6);
    KT_CHECK_EQ(p.bound, KILN_POOL_BY_HEAP);
    m.heap = KILN_HEAP_SEGMENT;
    p = plan_for(m, lim);
    KT_CHECK_EQ(p.workers, 12);
    KT_CHECK_EQ(p.bound, KILN_POOL_BY_CPUS);
    m.mem_available = 6 * GB; /* the segment heap keeps the memory rule: 1 + 2048/768 */
    p = plan_for(m, lim);
    KT_CHECK_EQ(p.workers, 3);
    KT_CHECK_EQ(p.bound, KILN_POOL_BY_MEMORY);
    m.heap = KILN_HEAP_NT; /* one CPU is not halved to zero */
    m.cpus_usable = 1;
    KT_CHECK_EQ(plan_for(m, lim).workers, 1);
}

KT_CASE(unknowns_are_named)
{
    struct kiln_pool_machine m = {.size = sizeof(m),
                                  .flags = KILN_POOL_CPUS_UNKNOWN | KILN_POOL_QUOTA_UNREADABLE,
                                  .quota_us = 100000,
                                  .period_us = 100000};
    struct kiln_pool_plan p = plan_for(m, (struct kiln_pool_limits)KILN_POOL_LIMITS_INIT);
    KT_CHECK_EQ(p.workers, 1);
    CHECK_REASON(p, "1 worker: CPU count unknown, assuming 1, cgroup quota unreadable (ignored)");
    KT_CHECK_EQ(kiln_pool_policy(NULL, NULL, &p), KILN_EINVAL);
    /* NULL limits mean no limits. */
    m = (struct kiln_pool_machine){.size = sizeof(struct kiln_pool_machine), .cpus_usable = 3};
    KT_CHECK_OK(kiln_pool_policy(&m, NULL, &p));
    KT_CHECK_EQ(p.workers, 3);
}

KT_CASE(policy_invariants_random)
{
    uint64_t seed = 42;
    for (int i = 0; i < 20000; i++) {
        struct kiln_pool_machine m = {
            .size = sizeof(m),
            .cpus_usable = (unsigned)(kt_rand(&seed) % 300),
            .quota_us = kt_rand(&seed) % 4 == 0 ? 0 : kt_rand(&seed) % 10000000,
            .period_us = kt_rand(&seed) % 200000,
            .mem_available = kt_rand(&seed) % (1024 * GB),
            .heap = (enum kiln_heap_kind)(kt_rand(&seed) % 3),
            .flags = (unsigned)(kt_rand(&seed) % 8),
        };
        struct kiln_pool_limits lim = {
            .size = sizeof(lim),
            .mem_reserve = kt_rand(&seed) % (64 * GB),
            .mem_per_worker = kt_rand(&seed) % (4 * GB),
            .max_workers = (unsigned)(kt_rand(&seed) % 40),
        };
        struct kiln_pool_plan p = KILN_POOL_PLAN_INIT;
        KT_REQUIRE_OK(kiln_pool_policy(&m, &lim, &p));
        unsigned cpus = m.cpus_usable && !(m.flags & KILN_POOL_CPUS_UNKNOWN) ? m.cpus_usable : 1;
        KT_CHECK(p.workers >= 1);
        KT_CHECK(p.workers <= p.cpus);
        KT_CHECK(p.cpus <= cpus);
        if (lim.max_workers)
            KT_CHECK(p.workers <= lim.max_workers);
        KT_CHECK(strlen(p.reason) > 0 && strlen(p.reason) < sizeof(p.reason));
        if (kt_failures)
            return;
    }
}

/* ---- parsers ------------------------------------------------------------ */

static int cpu_max(const char *s, uint64_t *q, uint64_t *p)
{
    return kiln__pool_parse_cpu_max(s, strlen(s), q, p);
}

KT_CASE(parse_cpu_max)
{
    uint64_t q, p;
    KT_CHECK_OK(cpu_max("200000 100000\n", &q, &p));
    KT_CHECK_EQ(q, 200000);
    KT_CHECK_EQ(p, 100000);
    KT_CHECK_OK(cpu_max("max 100000\n", &q, &p));
    KT_CHECK_EQ(q, 0);
    KT_CHECK_EQ(p, 100000);
    KT_CHECK_OK(cpu_max("50000 100000", &q, &p)); /* no newline */
    KT_CHECK_EQ(q, 50000);
    const char *bad[] = {"",
                         "\n",
                         "max",
                         "max\n",
                         "200000\n",
                         "0 100000\n",
                         "200000 0\n",
                         "-1 100000\n",
                         "lots 100000\n",
                         "200000 100000 7\n",
                         "maxx 100000\n",
                         "99999999999999999999999 100000\n",
                         "200000 10x\n"};
    for (size_t i = 0; i < KILN_ARRAY_LEN(bad); i++) {
        if (cpu_max(bad[i], &q, &p) != KILN_EPARSE)
            kt_fail(__FILE__, __LINE__, "accepted cpu.max \"%s\"", bad[i]);
    }
}

KT_CASE(parse_meminfo)
{
    uint64_t b;
    const char *ok = "MemTotal:       16318480 kB\nMemFree:          513516 kB\n"
                     "MemAvailable:    9541772 kB\nBuffers:          123 kB\n";
    KT_CHECK_OK(kiln__pool_parse_meminfo(ok, strlen(ok), &b));
    KT_CHECK_EQ(b, 9541772ull * 1024);
    const char *none = "MemTotal: 1 kB\nMemFree: 1 kB\n";
    KT_CHECK_EQ(kiln__pool_parse_meminfo(none, strlen(none), &b), KILN_ENOTFOUND);
    const char *bad[] = {"MemAvailable:\n",
                         "MemAvailable: lots kB\n",
                         "MemAvailable: 12\n",
                         "MemAvailable: 12 MB\n",
                         "MemAvailable: 12 kB extra\n",
                         "MemAvailable: 99999999999999999999 kB\n"};
    for (size_t i = 0; i < KILN_ARRAY_LEN(bad); i++) {
        if (kiln__pool_parse_meminfo(bad[i], strlen(bad[i]), &b) != KILN_EPARSE)
            kt_fail(__FILE__, __LINE__, "accepted meminfo \"%s\"", bad[i]);
    }
    /* A prefix of the key is not the key; the length bounds the read. */
    KT_CHECK_EQ(kiln__pool_parse_meminfo("MemAvail", 8, &b), KILN_ENOTFOUND);
    KT_CHECK_EQ(kiln__pool_parse_meminfo("MemAvailable: 5 kB", 16, &b), KILN_EPARSE);
}

KT_CASE(parse_cgroup)
{
    char path[64];
    const char *v2 = "0::/user.slice/user-1000.slice/session-2.scope\n";
    KT_CHECK_OK(kiln__pool_parse_cgroup(v2, strlen(v2), path, sizeof(path)));
    KT_CHECK(strcmp(path, "/user.slice/user-1000.slice/session-2.scope") == 0);
    const char *hybrid = "12:cpu,cpuacct:/x\n1:name=systemd:/\n0::/\n";
    KT_CHECK_OK(kiln__pool_parse_cgroup(hybrid, strlen(hybrid), path, sizeof(path)));
    KT_CHECK(strcmp(path, "/") == 0);
    const char *v1 = "4:memory:/a\n1:cpu:/\n";
    KT_CHECK_EQ(kiln__pool_parse_cgroup(v1, strlen(v1), path, sizeof(path)), KILN_ENOTFOUND);
    const char *bad[] = {"0::\n", "0::relative\n", "0::/../escape\n", "0::/a/./b\n", "0::/a/..\n"};
    for (size_t i = 0; i < KILN_ARRAY_LEN(bad); i++) {
        if (kiln__pool_parse_cgroup(bad[i], strlen(bad[i]), path, sizeof(path)) != KILN_EPARSE)
            kt_fail(__FILE__, __LINE__, "accepted cgroup \"%s\"", bad[i]);
    }
    KT_CHECK_EQ(kiln__pool_parse_cgroup(v2, strlen(v2), path, 8), KILN_ERANGE);
}

/* ---- the probe over fixtures -------------------------------------------- */

static char log_text[4096];

static void capture(void *user, enum kiln_log_level level, const char *module, const char *line)
{
    (void)user;
    size_t len = strlen(log_text);
    snprintf(log_text + len, sizeof(log_text) - len, "%d %s: %s\n", (int)level, module, line);
}

static int probe_fixture(const char *name, struct kiln_pool_machine *m)
{
    char proc[1024], cg[1024];
    snprintf(proc, sizeof(proc), "%s/tests/fixtures/pool/%s/proc", KILN_SOURCE_DIR, name);
    snprintf(cg, sizeof(cg), "%s/tests/fixtures/pool/%s/cgroup", KILN_SOURCE_DIR, name);
    log_text[0] = '\0';
    kiln_log_set_sink(capture, NULL);
    int rc = kiln_pool_probe(proc, cg, m);
    kiln_log_set_sink(NULL, NULL);
    return rc;
}

KT_CASE(probe_parent_quota_wins)
{
    /* The leaf says "max", its parent 2 CPUs: the parent bounds the leaf. */
    struct kiln_pool_machine m = KILN_POOL_MACHINE_INIT;
    KT_REQUIRE_OK(probe_fixture("quota", &m));
    KT_CHECK(m.cpus_usable >= 1);
    KT_CHECK_EQ(m.quota_us, 200000);
    KT_CHECK_EQ(m.period_us, 100000);
    KT_CHECK_EQ(m.mem_available, 9541772ull * 1024);
    KT_CHECK_EQ(m.flags, 0);
    KT_CHECK_EQ(log_text[0], '\0');
    m.cpus_usable = 16;
    struct kiln_pool_plan p = plan_for(m, (struct kiln_pool_limits)KILN_POOL_LIMITS_INIT);
    KT_CHECK_EQ(p.workers, 2);
}

KT_CASE(probe_tightest_quota)
{
    /* Parent 4 CPUs, child 1.5: the child's is the tighter one. */
    struct kiln_pool_machine m = KILN_POOL_MACHINE_INIT;
    KT_REQUIRE_OK(probe_fixture("nested", &m));
    KT_CHECK_EQ(m.quota_us, 150000);
    KT_CHECK_EQ(m.period_us, 100000);
    KT_CHECK_EQ(m.flags, 0);
}

KT_CASE(probe_no_quota)
{
    struct kiln_pool_machine m = KILN_POOL_MACHINE_INIT;
    KT_REQUIRE_OK(probe_fixture("noquota", &m)); /* every cpu.max says "max" */
    KT_CHECK_EQ(m.quota_us, 0);
    KT_CHECK_EQ(m.flags, 0);
    KT_REQUIRE_OK(probe_fixture("v1", &m)); /* cgroup v1 only */
    KT_CHECK_EQ(m.quota_us, 0);
    KT_CHECK_EQ(m.flags, 0);
    KT_CHECK_EQ(log_text[0], '\0');
}

KT_CASE(probe_malformed_cpu_max)
{
    struct kiln_pool_machine m = KILN_POOL_MACHINE_INIT;
    KT_REQUIRE_OK(probe_fixture("badcpumax", &m));
    KT_CHECK(m.flags & KILN_POOL_QUOTA_UNREADABLE);
    KT_CHECK_EQ(m.quota_us, 0);
    KT_CHECK(strstr(log_text, "badcpumax/cgroup/job/cpu.max: malformed") != NULL);
    KT_CHECK(!(m.flags & KILN_POOL_MEM_UNKNOWN));
    m.cpus_usable = 8;
    struct kiln_pool_plan p = plan_for(m, (struct kiln_pool_limits)KILN_POOL_LIMITS_INIT);
    KT_CHECK_EQ(p.workers, 8);
    KT_CHECK(strstr(p.reason, "cgroup quota unreadable (ignored)") != NULL);
}

KT_CASE(probe_malformed_meminfo)
{
    struct kiln_pool_machine m = KILN_POOL_MACHINE_INIT;
    KT_REQUIRE_OK(probe_fixture("badmeminfo", &m));
    KT_CHECK(m.flags & KILN_POOL_MEM_UNKNOWN);
    KT_CHECK_EQ(m.mem_available, 0);
    KT_CHECK(strstr(log_text, "badmeminfo/proc/meminfo: malformed MemAvailable") != NULL);
    KT_REQUIRE_OK(probe_fixture("nomemavail", &m));
    KT_CHECK(m.flags & KILN_POOL_MEM_UNKNOWN);
    KT_CHECK(strstr(log_text, "nomemavail/proc/meminfo: no MemAvailable line") != NULL);
    m.cpus_usable = 4;
    struct kiln_pool_plan p =
        plan_for(m, (struct kiln_pool_limits){.size = sizeof(struct kiln_pool_limits),
                                              .mem_per_worker = GB});
    KT_CHECK_EQ(p.workers, 4);
    KT_CHECK(strstr(p.reason, "free memory unknown") != NULL);
}

KT_CASE(probe_bad_cgroup_path_reads_root)
{
    /* "0::/../x" points outside the mount: warn, use the root's cpu.max. */
    struct kiln_pool_machine m = KILN_POOL_MACHINE_INIT;
    KT_REQUIRE_OK(probe_fixture("escape", &m));
    KT_CHECK(strstr(log_text, "escape/proc/self/cgroup: no usable cgroup v2 path") != NULL);
    KT_CHECK_EQ(m.quota_us, 300000);
    KT_CHECK_EQ(m.period_us, 100000);
}

KT_CASE(probe_real_machine)
{
    struct kiln_pool_machine m = KILN_POOL_MACHINE_INIT;
    KT_REQUIRE_OK(kiln_pool_probe(NULL, NULL, &m));
    KT_CHECK(m.cpus_usable >= 1);
    struct kiln_pool_plan p = KILN_POOL_PLAN_INIT;
    unsigned n = kiln_pool_auto_workers(KILN_POOL_WORK_BUILD, 0, &p);
    KT_CHECK(n >= 1 && n <= m.cpus_usable);
    KT_CHECK_EQ(n, p.workers);
    n = kiln_pool_auto_workers(KILN_POOL_WORK_READ, 0, &p);
    KT_CHECK(n >= 1 && n <= m.cpus_usable && n <= KILN_POOL_MAX_READERS);
    KT_CHECK_EQ(kiln_pool_probe(NULL, NULL, NULL), KILN_EINVAL);
}

/* The caller's own count wins, cut to the most readers for reading. */
KT_CASE(auto_workers_caller_count)
{
    struct kiln_pool_plan p = KILN_POOL_PLAN_INIT;
    KT_CHECK_EQ(kiln_pool_auto_workers(KILN_POOL_WORK_BUILD, 48, &p), 48);
    KT_CHECK_EQ(p.bound, KILN_POOL_BY_CALLER);
    KT_CHECK(strstr(p.reason, "48 workers: set by the caller") != NULL);
    KT_CHECK_EQ(kiln_pool_auto_workers(KILN_POOL_WORK_READ, 48, &p), KILN_POOL_MAX_READERS);
    KT_CHECK_EQ(kiln_pool_auto_workers(KILN_POOL_WORK_READ, 3, NULL), 3);

    /* The kinds' limits: building keeps memory free, reading is bounded. */
    struct kiln_pool_limits lim = KILN_POOL_LIMITS_INIT;
    kiln_pool_work_limits(KILN_POOL_WORK_BUILD, &lim);
    KT_CHECK(lim.mem_per_worker == 512 * MB && lim.mem_reserve == 1024 * MB);
    KT_CHECK_EQ(lim.max_workers, 0);
    kiln_pool_work_limits(KILN_POOL_WORK_READ, &lim);
    KT_CHECK_EQ(lim.max_workers, KILN_POOL_MAX_READERS);
    KT_CHECK_EQ(lim.mem_reserve, 0);

    /* On a 64-CPU machine with plenty of memory, reading stops at 16. */
    struct kiln_pool_machine m = {
        .size = sizeof(m), .cpus_usable = 64, .mem_available = 64 * 1024 * MB};
    KT_REQUIRE_OK(kiln_pool_policy(&m, &lim, &p));
    KT_CHECK_EQ(p.workers, KILN_POOL_MAX_READERS);
    KT_CHECK_EQ(p.bound, KILN_POOL_BY_MAX);
}

/* Background work takes a quarter of the CPUs, at least one, and says so. */
KT_CASE(background_quarter)
{
    struct kiln_pool_machine m = {.size = sizeof(m), .cpus_usable = 16, .mem_available = 512 * GB};
    struct kiln_pool_limits lim = KILN_POOL_LIMITS_INIT;
    kiln_pool_work_limits(KILN_POOL_WORK_BACKGROUND, &lim);
    KT_CHECK(lim.background);
    struct kiln_pool_plan p = plan_for(m, lim);
    KT_CHECK_EQ(p.workers, 4);
    KT_CHECK_EQ(p.bound, KILN_POOL_BY_BACKGROUND);
    KT_CHECK(strstr(p.reason, "background: a quarter of the CPUs") != NULL);
    KT_CHECK(strstr(p.reason, "limited by background mode") != NULL);
    m.cpus_usable = 3;
    KT_CHECK_EQ(plan_for(m, lim).workers, 1);
    m.cpus_usable = 16;
    m.quota_us = 200000; /* 2 CPUs by quota: a quarter of those */
    m.period_us = 100000;
    KT_CHECK_EQ(plan_for(m, lim).workers, 1);
    kiln_pool_work_limits(KILN_POOL_WORK_BUILD, &lim);
    KT_CHECK(!lim.background);
}

KT_CASE(parse_memory_max_and_statm)
{
    uint64_t v = 1;
    KT_CHECK_OK(kiln__pool_parse_memory_max("max\n", 4, &v));
    KT_CHECK_EQ(v, 0);
    KT_CHECK_OK(kiln__pool_parse_memory_max("536870912\n", 10, &v));
    KT_CHECK_EQ(v, 536870912);
    const char *bad[] = {"", "maxi\n", "12 13\n", "-5\n", "99999999999999999999999\n"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        KT_CHECK_EQ(kiln__pool_parse_memory_max(bad[i], strlen(bad[i]), &v), KILN_EPARSE);
    KT_CHECK_OK(kiln__pool_parse_statm("1000 250 30 4 0 500 0\n", 22, 4096, &v));
    KT_CHECK_EQ(v, 250 * 4096);
    KT_CHECK_OK(kiln__pool_parse_statm("1000 250", 8, 4096, &v));
    KT_CHECK_EQ(v, 250 * 4096);
    const char *bads[] = {"", "1000\n", "1000 x\n", "1000 25x 3\n", "x 1\n"};
    for (size_t i = 0; i < sizeof(bads) / sizeof(bads[0]); i++)
        KT_CHECK_EQ(kiln__pool_parse_statm(bads[i], strlen(bads[i]), 4096, &v), KILN_EPARSE);
}

/* The tightest memory.max on the way up; none under cgroup v1. */
KT_CASE(probe_memory_max)
{
    char proc[1024], cg[1024];
    uint64_t bytes = 7;
    snprintf(proc, sizeof(proc), "%s/tests/fixtures/pool/nested/proc", KILN_SOURCE_DIR);
    snprintf(cg, sizeof(cg), "%s/tests/fixtures/pool/nested/cgroup", KILN_SOURCE_DIR);
    KT_CHECK_OK(kiln__pool_memory_max(proc, cg, &bytes));
    KT_CHECK_EQ(bytes, 1u << 30);
    snprintf(proc, sizeof(proc), "%s/tests/fixtures/pool/v1/proc", KILN_SOURCE_DIR);
    snprintf(cg, sizeof(cg), "%s/tests/fixtures/pool/v1/cgroup", KILN_SOURCE_DIR);
    KT_CHECK_EQ(kiln__pool_memory_max(proc, cg, &bytes), KILN_ENOTSUP);
    /* The live machine: some budget, or none when nothing can be read. */
    char why[256];
    uint64_t budget = kiln_pool_default_memory_budget(why, sizeof(why));
    KT_CHECK(strstr(why, "memory budget") != NULL);
    KT_CHECK(budget == 0 || budget >= kiln_pool_resident_bytes());
}

/* A registered process counts toward the resident memory (this process
 * itself, registered as if it were a worker: counted twice). */
KT_CASE(registered_pids_count)
{
    uint64_t alone = kiln_pool_resident_bytes();
    KT_CHECK(alone > 0);
    KT_CHECK_OK(kiln__budget_add_pid((long)getpid()));
    uint64_t twice = kiln_pool_resident_bytes();
    kiln__budget_remove_pid((long)getpid());
    kiln__budget_remove_pid(12345678); /* not registered: nothing */
    KT_CHECK(twice >= alone + alone / 2);
    KT_CHECK(kiln_pool_resident_bytes() < twice);
    KT_CHECK_EQ(kiln__budget_add_pid(0), KILN_EINVAL);
}

KT_MAIN(KT_ENTRY(every_cpu_when_memory_allows), KT_ENTRY(never_more_than_cpus),
        KT_ENTRY(quota_caps_cpus_rounding_up), KT_ENTRY(memory_rule), KT_ENTRY(max_workers_bound),
        KT_ENTRY(windows_heap_kinds), KT_ENTRY(unknowns_are_named),
        KT_ENTRY(policy_invariants_random), KT_ENTRY(parse_cpu_max), KT_ENTRY(parse_meminfo),
        KT_ENTRY(parse_cgroup), KT_ENTRY(probe_parent_quota_wins), KT_ENTRY(probe_tightest_quota),
        KT_ENTRY(probe_no_quota), KT_ENTRY(probe_malformed_cpu_max),
        KT_ENTRY(probe_malformed_meminfo), KT_ENTRY(probe_bad_cgroup_path_reads_root),
        KT_ENTRY(auto_workers_caller_count), KT_ENTRY(probe_real_machine),
        KT_ENTRY(background_quarter), KT_ENTRY(parse_memory_max_and_statm),
        KT_ENTRY(probe_memory_max), KT_ENTRY(registered_pids_count))
