/*
 * test_topo_win.c - topo on the live Windows system (or wine): reading the
 * processor records, the usable CPUs, pinning this process and restoring
 * it, and the refusal of sysfs and proc roots, which mean nothing there.
 */
#include "topo_fixture.h"

#include <pthread.h>
#include <windows.h>

/* The live affinity of one thread, as a kiln CPU set (group * 64 + bit). */
static struct kiln_cpuset thread_affinity(HANDLE thread)
{
    struct kiln_cpuset set = {0};
    GROUP_AFFINITY ga;
    if (!GetThreadGroupAffinity(thread, &ga)) {
        kt_fail(__FILE__, __LINE__, "GetThreadGroupAffinity: error %lu",
                (unsigned long)GetLastError());
        return set;
    }
    char list[64];
    size_t n = 0;
    list[0] = '\0';
    for (unsigned b = 0; b < 64; b++)
        if ((uint64_t)ga.Mask >> b & 1)
            n += (size_t)snprintf(list + n, sizeof(list) - n, "%s%u", n ? "," : "",
                                  ga.Group * 64u + b);
    if (n < sizeof(list))
        return fx_set(list);
    kiln_cpuset_parse_list(&set, "", 0);
    return set;
}

static bool under_wine(void)
{
    HMODULE ntdll = GetModuleHandleW(L"ntdll.dll");
    return ntdll && GetProcAddress(ntdll, "wine_get_version") != NULL;
}

KT_CASE(real_system_reads)
{
    struct kiln_topo *t = NULL;
    KT_REQUIRE_OK(kiln_topo_read(NULL, 0, &t));
    KT_CHECK(kiln_cpuset_count(&t->online) >= 1);
    printf("live topology: %zu last-level domains, online %u CPUs%s%s\n", t->ndomains,
           kiln_cpuset_count(&t->online), t->note[0] ? ": " : "", t->note);
    struct kiln_cpuset allowed = {0};
    KT_REQUIRE_OK(kiln_topo_allowed(NULL, &allowed));
    KT_CHECK(kiln_cpuset_count(&allowed) >= 1);
    KT_CHECK(kiln_cpuset_count(&allowed) <= GetActiveProcessorCount(ALL_PROCESSOR_GROUPS));
    struct kiln_pin_plan p = KILN_PIN_PLAN_INIT;
    KT_CHECK_OK(kiln_topo_choose(t, &allowed, &p));
    KT_CHECK(p.reason[0] != '\0');
    if (t->ndomains == 0)
        KT_CHECK_EQ(p.verdict, KILN_PIN_NO_CACHES);
    kiln_pin_plan_free(&p);
    kiln_cpuset_free(&allowed);
    kiln_topo_free(t);

    /* All levels: every domain's CPUs are online ones. */
    KT_REQUIRE_OK(kiln_topo_read(NULL, KILN_TOPO_ALL_LEVELS, &t));
    for (size_t i = 0; i < t->ndomains; i++)
        KT_CHECK(kiln_cpuset_count(&t->domains[i].cpus) >= 1);
    kiln_topo_free(t);
}

KT_CASE(roots_are_refused)
{
    struct kiln_topo *t = (struct kiln_topo *)1;
    fx_log_start();
    KT_CHECK_EQ(kiln_topo_read(fx_committed("x3d"), 0, &t), KILN_ENOTSUP);
    fx_log_stop();
    KT_CHECK(t == NULL);
    KT_CHECK(fx_log_has(KILN_LOG_ERROR, "no sysfs"));
    struct kiln_cpuset one = fx_set("0");
    fx_log_start();
    KT_CHECK_EQ(kiln_process_set_affinity("C:/proc", &one), KILN_ENOTSUP);
    fx_log_stop();
    kiln_cpuset_free(&one);
    /* The flag/environment rule and an explicit affinity still work. */
    struct kiln_cpuset aff = fx_set("2-3"), got = {0};
    struct kiln_topo_env env = {.size = sizeof(env), .affinity = &aff};
    KT_CHECK_OK(kiln_topo_allowed(&env, &got));
    KT_CHECK(fx_set_is(&got, "2-3"));
    kiln_cpuset_free(&got);
    kiln_cpuset_free(&aff);
}

static HANDLE ready_event, stop_event;

static void *sleeper(void *arg)
{
    HANDLE *self = arg;
    DuplicateHandle(GetCurrentProcess(), GetCurrentThread(), GetCurrentProcess(), self, 0, FALSE,
                    DUPLICATE_SAME_ACCESS);
    SetEvent(ready_event);
    WaitForSingleObject(stop_event, INFINITE);
    return NULL;
}

/* Pins the process to its last usable CPU, checks a thread made before the
 * call and this one, then restores the original set. */
KT_CASE(pin_and_restore)
{
    struct kiln_cpuset original = {0};
    KT_REQUIRE_OK(kiln_topo_allowed(NULL, &original));
    if (kiln_cpuset_count(&original) < 2) {
        printf("skipped: needs two usable CPUs\n");
        kiln_cpuset_free(&original);
        exit(77);
    }
    int64_t last = -1;
    for (int64_t c = kiln_cpuset_next(&original, 0); c >= 0;
         c = kiln_cpuset_next(&original, (uint32_t)c + 1))
        last = c;
    char list[32];
    snprintf(list, sizeof(list), "%lld", (long long)last);
    struct kiln_cpuset one = fx_set(list);

    ready_event = CreateEventW(NULL, TRUE, FALSE, NULL);
    stop_event = CreateEventW(NULL, TRUE, FALSE, NULL);
    HANDLE other = NULL;
    pthread_t th;
    KT_REQUIRE(pthread_create(&th, NULL, sleeper, &other) == 0);
    WaitForSingleObject(ready_event, INFINITE);

    KT_CHECK_OK(kiln_process_set_affinity(NULL, &one));
    struct kiln_cpuset mine = thread_affinity(GetCurrentThread());
    struct kiln_cpuset theirs = thread_affinity(other);
    KT_CHECK(fx_set_is(&mine, list));
    KT_CHECK(fx_set_is(&theirs, list));
    kiln_cpuset_free(&mine);
    kiln_cpuset_free(&theirs);

    /* The process's own mask follows, except under wine, whose
     * GetProcessAffinityMask keeps answering the system's mask. */
    struct kiln_cpuset now = {0};
    KT_CHECK_OK(kiln_topo_allowed(NULL, &now));
    if (under_wine())
        printf("wine: process mask not checked (threads were)\n");
    else
        KT_CHECK(fx_set_is(&now, list));
    kiln_cpuset_free(&now);

    /* An empty set and CPUs the system lacks are refused. */
    struct kiln_cpuset empty = {0}, absent = fx_set("65000");
    fx_log_start();
    KT_CHECK_EQ(kiln_process_set_affinity(NULL, &empty), KILN_EINVAL);
    KT_CHECK_EQ(kiln_process_set_affinity(NULL, &absent), KILN_EINVAL);
    fx_log_stop();
    KT_CHECK(fx_log_has(KILN_LOG_ERROR, "empty CPU set"));
    KT_CHECK(fx_log_has(KILN_LOG_ERROR, "not all are active processors"));
    kiln_cpuset_free(&absent);

    KT_CHECK_OK(kiln_process_set_affinity(NULL, &original));
    char want[256];
    kiln_cpuset_format(&original, want, sizeof(want));
    mine = thread_affinity(GetCurrentThread());
    theirs = thread_affinity(other);
    KT_CHECK(fx_set_is(&mine, want));
    KT_CHECK(fx_set_is(&theirs, want));
    kiln_cpuset_free(&mine);
    kiln_cpuset_free(&theirs);

    SetEvent(stop_event);
    pthread_join(th, NULL);
    CloseHandle(other);
    CloseHandle(ready_event);
    CloseHandle(stop_event);
    kiln_cpuset_free(&one);
    kiln_cpuset_free(&original);
}

KT_MAIN(KT_ENTRY(real_system_reads), KT_ENTRY(roots_are_refused), KT_ENTRY(pin_and_restore))
