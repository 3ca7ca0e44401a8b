/*
 * sys_win.c - the clock, randomness, memory figures and the usable CPU
 * count on Windows.
 *
 * The clock is QueryPerformanceCounter: monotonic, and consistent across
 * CPUs on every Windows kiln supports. Its frequency is fixed at boot, so
 * reading it on each call costs nothing (it lives in shared user data) and
 * needs no once-only setup. Randomness is the system's preferred generator
 * through BCryptGenRandom. Memory figures are the working set, which is what
 * Windows calls the resident set.
 */
#include "kiln_internal.h"

#include <windows.h>

#include <bcrypt.h>
#include <direct.h>
#include <psapi.h>
#include <string.h>

uint64_t kiln_now_ns(void)
{
    LARGE_INTEGER count, freq;
    QueryPerformanceCounter(&count);
    QueryPerformanceFrequency(&freq);
    uint64_t c = (uint64_t)count.QuadPart, f = (uint64_t)freq.QuadPart;
    /* Split the division so that c * 1e9 cannot overflow. */
    return c / f * 1000000000u + c % f * 1000000000u / f;
}

int kiln_random_bytes(void *buf, size_t n)
{
    if (!buf && n)
        return KILN_EINVAL;
    unsigned char *p = buf;
    while (n > 0) {
        ULONG len = (ULONG)KILN_MIN(n, (size_t)(1u << 30));
        NTSTATUS st = BCryptGenRandom(NULL, p, len, BCRYPT_USE_SYSTEM_PREFERRED_RNG);
        if (st < 0) {
            KILN_ERROR("sys", "BCryptGenRandom failed: NTSTATUS 0x%08lx", (unsigned long)st);
            return KILN_EIO;
        }
        p += len;
        n -= len;
    }
    return KILN_OK;
}

/* A process in one processor group may use the bits of its affinity mask;
 * one whose threads span groups gets zero masks back and may use every
 * active processor. */
unsigned kiln__affinity_cpus(void)
{
    DWORD_PTR mask = 0, system = 0;
    if (GetProcessAffinityMask(GetCurrentProcess(), &mask, &system) && mask != 0) {
        unsigned n = 0;
        for (; mask; mask &= mask - 1)
            n++;
        return n;
    }
    DWORD n = GetActiveProcessorCount(ALL_PROCESSOR_GROUPS);
    return n > 0 ? (unsigned)n : 0;
}

long kiln__process_id(void)
{
    return (long)GetCurrentProcessId();
}

static bool memory_counters(PROCESS_MEMORY_COUNTERS *pmc)
{
    memset(pmc, 0, sizeof(*pmc));
    pmc->cb = sizeof(*pmc);
    return GetProcessMemoryInfo(GetCurrentProcess(), pmc, sizeof(*pmc)) != 0;
}

uint64_t kiln_peak_rss_bytes(void)
{
    PROCESS_MEMORY_COUNTERS pmc;
    return memory_counters(&pmc) ? (uint64_t)pmc.PeakWorkingSetSize : 0;
}

uint64_t kiln_rss_bytes(void)
{
    PROCESS_MEMORY_COUNTERS pmc;
    return memory_counters(&pmc) ? (uint64_t)pmc.WorkingSetSize : 0;
}

void kiln__sleep_ms(unsigned ms)
{
    Sleep(ms);
}

int kiln__make_dir(const char *path)
{
    return _mkdir(path);
}

const char *kiln__path_last_sep(const char *path)
{
    const char *slash = strrchr(path, '/'), *back = strrchr(path, '\\');
    return back && (!slash || back > slash) ? back : slash;
}

/* The C runtime on Windows has no memmem: the same search over memchr. */
void *kiln__memmem(const void *hay, size_t n, const void *needle, size_t m)
{
    const unsigned char *h = hay, *end = h + n;
    if (m == 0)
        return (void *)h;
    while (n >= m && (h = memchr(h, *(const unsigned char *)needle, n - m + 1)) != NULL) {
        if (memcmp(h, needle, m) == 0)
            return (void *)h;
        h++;
        n = (size_t)(end - h);
    }
    return NULL;
}
