/*
 * test_topo_pin.c - real pinning on this machine: every thread, the ones
 * made before the call and after it, then the original affinity restored.
 *
 * The machine's own sysfs may well have one L3 (nothing to pin), so the
 * test writes a tree naming this machine's allowed CPUs: the lowest one
 * alone under a 64 MB cache, the rest under a 32 MB one. The pinning itself
 * runs against the real process. It needs two allowed CPUs, and exits 77
 * (skipped) on a machine with fewer.
 */
#include "topo_fixture.h"

#include <pthread.h>
#include <sched.h>
#include <dirent.h>
#include <sys/syscall.h>
#include <unistd.h>

#define SKIP 77

/* The affinity of thread `tid` (0: the caller), any number of CPUs. */
static struct kiln_cpuset affinity_of(pid_t tid)
{
    struct kiln_cpuset out = {0};
    for (size_t n = 1024; n <= KILN_TOPO_MAX_CPUS; n *= 2) {
        cpu_set_t *mask = CPU_ALLOC(n);
        size_t size = CPU_ALLOC_SIZE(n);
        CPU_ZERO_S(size, mask);
        if (sched_getaffinity(tid, size, mask) != 0) {
            CPU_FREE(mask);
            continue;
        }
        char list[16384];
        size_t len = 0;
        for (size_t c = 0; c < size * 8; c++)
            if (CPU_ISSET_S(c, size, mask))
                len += (size_t)snprintf(list + len, sizeof(list) - len, "%s%zu", len ? "," : "", c);
        CPU_FREE(mask);
        out = fx_set(list);
        break;
    }
    return out;
}

/* Checks that every thread of the process has affinity `want`. @return threads seen. */
static int check_all_threads(const struct kiln_cpuset *want)
{
    DIR *d = opendir("/proc/self/task");
    if (!d) {
        kt_fail(__FILE__, __LINE__, "cannot list /proc/self/task");
        return 0;
    }
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        pid_t tid = (pid_t)atoi(e->d_name);
        struct kiln_cpuset got = affinity_of(tid);
        char a[256], b[256];
        kiln_cpuset_format(&got, a, sizeof(a));
        kiln_cpuset_format(want, b, sizeof(b));
        if (strcmp(a, b) != 0)
            kt_fail(__FILE__, __LINE__, "thread %d has CPUs %s, expected %s", (int)tid, a, b);
        kiln_cpuset_free(&got);
        n++;
    }
    closedir(d);
    return n;
}

struct worker {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    bool go;
    pid_t tid;
    struct kiln_cpuset seen; /* the affinity the thread read for itself */
};

static void *early_thread(void *arg)
{
    struct worker *w = arg;
    pthread_mutex_lock(&w->lock);
    w->tid = (pid_t)syscall(SYS_gettid);
    pthread_cond_broadcast(&w->cond);
    while (!w->go)
        pthread_cond_wait(&w->cond, &w->lock);
    pthread_mutex_unlock(&w->lock);
    w->seen = affinity_of(0);
    return NULL;
}

static void *late_thread(void *arg)
{
    struct worker *w = arg;
    w->seen = affinity_of(0);
    return NULL;
}

/* Writes a tree for this machine: `big` alone under 64 MB, `rest` under 32 MB. */
static const char *write_machine_tree(const struct kiln_cpuset *allowed, uint32_t big)
{
    const char *root = kt_tmpdir();
    char all[4096], rest[4096], own[16];
    kiln_cpuset_format(allowed, all, sizeof(all));
    fx_write(root, "online", all);
    struct kiln_cpuset r = {0};
    kiln_cpuset_copy(&r, allowed);
    r.words[big / 64] &= ~(UINT64_C(1) << (big % 64));
    kiln_cpuset_format(&r, rest, sizeof(rest));
    snprintf(own, sizeof(own), "%u", big);
    for (int64_t c = kiln_cpuset_next(allowed, 0); c >= 0;
         c = kiln_cpuset_next(allowed, (uint32_t)c + 1)) {
        bool is_big = (uint32_t)c == big;
        fx_cache(root, (unsigned)c, 0, 3, "Unified", is_big ? "64M" : "32M", is_big ? own : rest,
                 is_big ? 0 : 1);
    }
    kiln_cpuset_free(&r);
    return root;
}

KT_CASE(pin_every_thread_and_restore)
{
    struct kiln_cpuset original = affinity_of(0);
    struct kiln_cpuset allowed = {0};
    KT_REQUIRE_OK(kiln_topo_allowed(NULL, &allowed));
    if (kiln_cpuset_count(&allowed) < 2) {
        fprintf(stderr, "skip: this process may use fewer than 2 CPUs\n");
        exit(SKIP);
    }
    uint32_t big = (uint32_t)kiln_cpuset_next(&allowed, 0);
    const char *root = write_machine_tree(&allowed, big);

    /* A thread that exists before the pinning. */
    struct worker early = {.lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER};
    pthread_t te, tl;
    KT_REQUIRE(pthread_create(&te, NULL, early_thread, &early) == 0);
    pthread_mutex_lock(&early.lock);
    while (early.tid == 0)
        pthread_cond_wait(&early.cond, &early.lock);
    pthread_mutex_unlock(&early.lock);

    struct kiln_topo_env env = {.size = sizeof(env), .sysfs_root = root};
    struct kiln_pin_plan plan = KILN_PIN_PLAN_INIT;
    int rc = kiln_pin_largest_cache(&env, &plan);
    KT_CHECK_OK(rc);
    KT_CHECK_EQ(plan.verdict, KILN_PIN_APPLY);

    /* Every thread, the early one included, now runs on `big` alone. */
    KT_CHECK(kiln_cpuset_count(&plan.cpus) == 1 && kiln_cpuset_has(&plan.cpus, big));
    KT_CHECK(check_all_threads(&plan.cpus) >= 2);
    struct kiln_cpuset e = affinity_of(early.tid);
    KT_CHECK(kiln_cpuset_count(&e) == 1 && kiln_cpuset_has(&e, big));
    kiln_cpuset_free(&e);

    /* A thread made after it inherits the mask. */
    struct worker late = {0};
    KT_REQUIRE(pthread_create(&tl, NULL, late_thread, &late) == 0);
    pthread_join(tl, NULL);
    KT_CHECK(kiln_cpuset_count(&late.seen) == 1 && kiln_cpuset_has(&late.seen, big));

    pthread_mutex_lock(&early.lock);
    early.go = true;
    pthread_cond_broadcast(&early.cond);
    pthread_mutex_unlock(&early.lock);
    pthread_join(te, NULL);
    KT_CHECK(kiln_cpuset_count(&early.seen) == 1 && kiln_cpuset_has(&early.seen, big));

    /* Restore: every thread back to the original affinity. */
    KT_CHECK_OK(kiln_process_set_affinity(NULL, &original));
    check_all_threads(&original);

    kiln_cpuset_free(&late.seen);
    kiln_cpuset_free(&early.seen);
    kiln_pin_plan_free(&plan);
    kiln_cpuset_free(&allowed);
    kiln_cpuset_free(&original);
}

KT_CASE(mask_past_1024)
{
    /* A set naming CPU 1500 goes through CPU_ALLOC; the kernel keeps the
     * CPUs it has, so the affinity reads back as before. */
    struct kiln_cpuset original = affinity_of(0);
    struct kiln_cpuset wide = {0};
    KT_REQUIRE_OK(kiln_cpuset_copy(&wide, &original));
    char list[4096];
    size_t n = kiln_cpuset_format(&original, list, sizeof(list));
    snprintf(list + n, sizeof(list) - n, ",1500");
    kiln_cpuset_free(&wide);
    wide = fx_set(list);
    KT_CHECK_OK(kiln_process_set_affinity(NULL, &wide));
    check_all_threads(&original);
    kiln_cpuset_free(&wide);

    /* An empty set is refused, with a log line. */
    struct kiln_cpuset none = {0};
    fx_log_start();
    KT_CHECK_EQ(kiln_process_set_affinity(NULL, &none), KILN_EINVAL);
    fx_log_stop();
    KT_CHECK(fx_log_has(KILN_LOG_ERROR, "empty CPU set"));
    check_all_threads(&original);
    kiln_cpuset_free(&original);
}

KT_CASE(real_system_reads)
{
    /* The machine's own sysfs and process: whatever they hold, reading and
     * choosing succeed and agree with each other. */
    struct kiln_topo *t = NULL;
    KT_REQUIRE_OK(kiln_topo_read(NULL, 0, &t));
    KT_CHECK(kiln_cpuset_count(&t->online) >= 1);
    struct kiln_cpuset allowed = {0};
    KT_REQUIRE_OK(kiln_topo_allowed(NULL, &allowed));
    struct kiln_cpuset mine = affinity_of(0);
    KT_CHECK(kiln_cpuset_count(&allowed) >= 1);
    for (int64_t c = kiln_cpuset_next(&allowed, 0); c >= 0;
         c = kiln_cpuset_next(&allowed, (uint32_t)c + 1))
        KT_CHECK(kiln_cpuset_has(&mine, (uint32_t)c));
    struct kiln_pin_plan p = KILN_PIN_PLAN_INIT;
    KT_CHECK_OK(kiln_topo_choose(t, &allowed, &p));
    KT_CHECK(p.reason[0] != '\0');
    if (t->ndomains == 0)
        KT_CHECK_EQ(p.verdict, KILN_PIN_NO_CACHES);
    kiln_pin_plan_free(&p);
    kiln_cpuset_free(&mine);
    kiln_cpuset_free(&allowed);
    kiln_topo_free(t);
}

KT_MAIN(KT_ENTRY(pin_every_thread_and_restore), KT_ENTRY(mask_past_1024),
        KT_ENTRY(real_system_reads))
