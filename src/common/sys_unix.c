/*
 * sys_unix.c - the clock, randomness, memory figures and the usable CPU
 * count on POSIX systems.
 */
#include "kiln_internal.h"

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

uint64_t kiln_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int kiln_random_bytes(void *buf, size_t n)
{
    if (!buf && n)
        return KILN_EINVAL;
    unsigned char *p = buf;
    while (n > 0) {
        ssize_t got = getrandom(p, n, 0);
        if (got < 0) {
            if (errno == EINTR)
                continue;
            return KILN_EIO;
        }
        p += got;
        n -= (size_t)got;
    }
    return KILN_OK;
}

unsigned kiln__affinity_cpus(void)
{
#if defined(__linux__)
    /* Ask with a growing mask: machines with more than 1024 CPUs exist. */
    for (size_t ncpu = 1024; ncpu <= (1u << 20); ncpu *= 2) {
        cpu_set_t *set = CPU_ALLOC(ncpu);
        if (!set)
            return 0;
        size_t size = CPU_ALLOC_SIZE(ncpu);
        CPU_ZERO_S(size, set);
        if (sched_getaffinity(0, size, set) == 0) {
            int count = CPU_COUNT_S(size, set);
            CPU_FREE(set);
            return count > 0 ? (unsigned)count : 0;
        }
        int err = errno;
        CPU_FREE(set);
        if (err != EINVAL)
            return 0;
    }
    return 0;
#else
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (unsigned)n : 0;
#endif
}

long kiln__process_id(void)
{
    return (long)getpid();
}

uint64_t kiln_peak_rss_bytes(void)
{
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0)
        return 0;
    return (uint64_t)ru.ru_maxrss * 1024u; /* Linux reports KiB */
}

uint64_t kiln_rss_bytes(void)
{
    FILE *f = fopen("/proc/self/statm", "re");
    if (!f)
        return 0;
    unsigned long long size, resident;
    int n = fscanf(f, "%llu %llu", &size, &resident);
    fclose(f);
    if (n != 2)
        return 0;
    return (uint64_t)resident * (uint64_t)sysconf(_SC_PAGESIZE);
}

void kiln__sleep_ms(unsigned ms)
{
    struct timespec ts = {(time_t)(ms / 1000u), (long)(ms % 1000u) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

int kiln__make_dir(const char *path)
{
    return mkdir(path, 0777);
}

const char *kiln__path_last_sep(const char *path)
{
    return strrchr(path, '/');
}

void *kiln__memmem(const void *hay, size_t n, const void *needle, size_t m)
{
    return memmem(hay, n, needle, m);
}
