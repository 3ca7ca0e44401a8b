/*
 * pool_unix.c - reading the machine on Linux and other POSIX systems: the
 * affinity mask, the cgroup v2 CPU quota and MemAvailable.
 *
 * Design. Every file is read whole into a small stack buffer and handed to
 * the strict parsers of policy.c; the roots are parameters so tests read
 * fixture trees. Failures never stop the probe: a missing file means "no
 * such limit" (no quota, cgroup v1, not Linux), a malformed one is logged
 * once with its path and its field is marked unknown in machine->flags, so
 * the policy's reason says what it assumed.
 *
 * The quota is the smallest cpu.max from this process's cgroup up to the
 * mount's root: a parent's quota bounds every child, and a child's
 * "max" does not lift it.
 */
#include "kiln_internal.h"
#include "pool_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/syscall.h>
#endif
#ifdef __GLIBC__
#include <dlfcn.h>
#include <malloc.h>
#endif

/*
 * Reads a small file whole (procfs and cgroupfs report size 0, so read to
 * the end). @return the byte count, KILN_ENOENT, KILN_ERANGE when it does
 * not fit, or another error.
 */
static int64_t read_small(const char *path, char *buf, size_t cap)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return kiln_error_from_errno(errno, KILN_EIO_OPEN);
    size_t n = 0;
    for (;;) {
        if (n == cap) {
            close(fd);
            return KILN_ERANGE;
        }
        ssize_t got = read(fd, buf + n, cap - n);
        if (got < 0) {
            if (errno == EINTR)
                continue;
            int rc = kiln_error_from_errno(errno, KILN_EIO_READ);
            close(fd);
            return rc;
        }
        if (got == 0)
            break;
        n += (size_t)got;
    }
    close(fd);
    return (int64_t)n;
}

/* Reads one cpu.max; @return 0 (quota 0 when the file is missing) or an error. */
static int read_cpu_max(const char *path, uint64_t *quota, uint64_t *period)
{
    char buf[128];
    int64_t n = read_small(path, buf, sizeof(buf));
    *quota = 0;
    *period = 0;
    if (n == KILN_ENOENT)
        return KILN_OK;
    if (n < 0) {
        KILN_WARN("pool", "%s: could not read: %s; CPU quota ignored", path, kiln_strerror((int)n));
        return (int)n;
    }
    int rc = kiln__pool_parse_cpu_max(buf, (size_t)n, quota, period);
    if (rc < 0)
        KILN_WARN("pool", "%s: malformed (expected \"<quota|max> <period>\"); CPU quota ignored",
                  path);
    return rc;
}

/* Walks from the process's cgroup up to the root, keeping the tightest quota. */
static void probe_quota(const char *proc_root, const char *cgroup_root, struct kiln_pool_machine *m)
{
    char path[4096], file[4096], text[8192];
    if (snprintf(file, sizeof(file), "%s/self/cgroup", proc_root) >= (int)sizeof(file))
        return;
    int64_t n = read_small(file, text, sizeof(text));
    if (n == KILN_ENOENT)
        return; /* not Linux, or no cgroups: no quota */
    int rc = n < 0 ? (int)n : kiln__pool_parse_cgroup(text, (size_t)n, path, sizeof(path));
    if (rc == KILN_ENOTFOUND)
        return; /* cgroup v1 only: kiln reads v2 quotas */
    if (rc < 0) {
        KILN_WARN("pool", "%s: no usable cgroup v2 path (%s); reading the quota at %s only", file,
                  kiln_strerror(rc), cgroup_root);
        strcpy(path, "/");
    }

    for (;;) {
        uint64_t quota, period;
        const char *sep = strcmp(path, "/") == 0 ? "" : path;
        if (snprintf(file, sizeof(file), "%s%s/cpu.max", cgroup_root, sep) >= (int)sizeof(file))
            break;
        if (read_cpu_max(file, &quota, &period) < 0) {
            m->flags |= KILN_POOL_QUOTA_UNREADABLE;
        } else if (quota > 0) {
            /* Compare quota/period ratios without dividing. */
            bool tighter = m->quota_us == 0 || (double)quota * (double)m->period_us <
                                                   (double)m->quota_us * (double)period;
            if (tighter) {
                m->quota_us = quota;
                m->period_us = period;
            }
        }
        if (strcmp(path, "/") == 0)
            break;
        char *slash = strrchr(path, '/');
        if (slash == path)
            slash[1] = '\0';
        else
            *slash = '\0';
    }
}

static void probe_memory(const char *proc_root, struct kiln_pool_machine *m)
{
    char file[4096], text[16384];
    m->flags |= KILN_POOL_MEM_UNKNOWN;
    if (snprintf(file, sizeof(file), "%s/meminfo", proc_root) >= (int)sizeof(file))
        return;
    int64_t n = read_small(file, text, sizeof(text));
    if (n == KILN_ENOENT) {
        KILN_INFO("pool", "%s: missing; free memory unknown", file);
        return;
    }
    if (n < 0) {
        KILN_WARN("pool", "%s: could not read: %s; free memory unknown", file,
                  kiln_strerror((int)n));
        return;
    }
    uint64_t bytes;
    int rc = kiln__pool_parse_meminfo(text, (size_t)n, &bytes);
    if (rc == KILN_ENOTFOUND) {
        KILN_WARN("pool", "%s: no MemAvailable line; free memory unknown", file);
        return;
    }
    if (rc < 0) {
        KILN_WARN("pool",
                  "%s: malformed MemAvailable line (expected \"<n> kB\"); free memory unknown",
                  file);
        return;
    }
    m->mem_available = bytes;
    m->flags &= ~(unsigned)KILN_POOL_MEM_UNKNOWN;
}

int kiln__pool_probe(const char *proc_root, const char *cgroup_root, struct kiln_pool_machine *m)
{
    m->heap = KILN_HEAP_DEFAULT;
    m->cpus_usable = kiln__affinity_cpus();
    if (m->cpus_usable == 0) {
        KILN_WARN("pool", "sched_getaffinity: could not read the CPU mask; assuming 1 CPU");
        m->flags |= KILN_POOL_CPUS_UNKNOWN;
    }
    probe_quota(proc_root ? proc_root : "/proc", cgroup_root ? cgroup_root : "/sys/fs/cgroup", m);
    probe_memory(proc_root ? proc_root : "/proc", m);
    return KILN_OK;
}

/* ---- the memory budget and background priority ---------------------------- */

/* The proportional set size (Pss in smaps_rollup, Linux 4.14 and later):
 * a page shared by kiln and its workers, or with any process, counts once
 * over all of them. @return bytes, or 0 when the kernel has no such file. */
/* Reads /proc/<pid>/<name> (pid 0: this process) into text.
 * @return as read_small. */
static int64_t read_proc_of(long pid, const char *name, char *text, size_t cap)
{
    char file[64];
    if (pid == 0)
        snprintf(file, sizeof(file), "/proc/self/%s", name);
    else
        snprintf(file, sizeof(file), "/proc/%ld/%s", pid, name);
    return read_small(file, text, cap);
}

uint64_t kiln__pool_pss_of(long pid)
{
    char text[2048];
    int64_t n = read_proc_of(pid, "smaps_rollup", text, sizeof(text));
    uint64_t bytes;
    if (n < 0 || kiln__pool_parse_kb_line(text, (size_t)n, "Pss:", &bytes) < 0)
        return 0;
    return bytes;
}

uint64_t kiln__pool_rss_of(long pid)
{
    char text[256];
    int64_t n = read_proc_of(pid, "statm", text, sizeof(text));
    uint64_t bytes;
    long page = sysconf(_SC_PAGESIZE);
    if (n < 0 || page <= 0 || kiln__pool_parse_statm(text, (size_t)n, (uint64_t)page, &bytes) < 0)
        return 0;
    return bytes;
}

int kiln__pool_memory_max(const char *proc_root, const char *cgroup_root, uint64_t *bytes)
{
    char path[4096], file[4096], text[8192];
    *bytes = 0;
    proc_root = proc_root ? proc_root : "/proc";
    cgroup_root = cgroup_root ? cgroup_root : "/sys/fs/cgroup";
    if (snprintf(file, sizeof(file), "%s/self/cgroup", proc_root) >= (int)sizeof(file))
        return KILN_ERANGE;
    int64_t n = read_small(file, text, sizeof(text));
    if (n == KILN_ENOENT)
        return KILN_ENOTSUP;
    int rc = n < 0 ? (int)n : kiln__pool_parse_cgroup(text, (size_t)n, path, sizeof(path));
    if (rc == KILN_ENOTFOUND)
        return KILN_ENOTSUP; /* cgroup v1 only */
    if (rc < 0)
        strcpy(path, "/");
    /* A parent's limit bounds every child: keep the smallest. */
    for (;;) {
        const char *sep = strcmp(path, "/") == 0 ? "" : path;
        uint64_t v;
        if (snprintf(file, sizeof(file), "%s%s/memory.max", cgroup_root, sep) >= (int)sizeof(file))
            break;
        n = read_small(file, text, sizeof(text));
        if (n >= 0 && kiln__pool_parse_memory_max(text, (size_t)n, &v) == KILN_OK && v > 0 &&
            (*bytes == 0 || v < *bytes))
            *bytes = v;
        else if (n >= 0 && n != 0 && kiln__pool_parse_memory_max(text, (size_t)n, &v) < 0)
            KILN_WARN("pool", "%s: malformed (expected \"max\" or bytes); ignored", file);
        if (strcmp(path, "/") == 0)
            break;
        char *slash = strrchr(path, '/');
        if (slash == path)
            slash[1] = '\0';
        else
            *slash = '\0';
    }
    return KILN_OK;
}

int kiln__pool_thread_background(void)
{
    int rc = KILN_OK;
#if defined(__linux__) && defined(SCHED_IDLE)
    struct sched_param sp = {0};
    if (pthread_setschedparam(pthread_self(), SCHED_IDLE, &sp) != 0) {
        /* Not allowed here (a seccomp filter, say): nice 19 for this thread. */
        if (setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), 19) != 0)
            rc = kiln_error_from_errno(errno, KILN_EIO);
    }
#else
    if (setpriority(PRIO_PROCESS, 0, 19) != 0)
        rc = kiln_error_from_errno(errno, KILN_EIO);
#endif
#if defined(__linux__) && defined(SYS_ioprio_set)
    /* ioprio_set(IOPRIO_WHO_PROCESS, this thread, IOPRIO_CLASS_IDLE): the
     * kernel's uapi numbers (class 3 in the top bits, who 1). */
    const int who_process = 1, class_idle = 3, class_shift = 13;
    if (syscall(SYS_ioprio_set, who_process, (int)syscall(SYS_gettid), class_idle << class_shift) !=
            0 &&
        rc == KILN_OK)
        rc = kiln_error_from_errno(errno, KILN_EIO);
#endif
    return rc;
}

#ifdef __GLIBC__
static bool glibc_malloc;
static pthread_once_t glibc_malloc_once = PTHREAD_ONCE_INIT;

/* Whether the process's malloc is glibc's own: with another one
 * interposed (jemalloc, mimalloc or tcmalloc preloaded or linked by the
 * embedder, a sanitizer's), glibc's arenas hold nothing kiln freed and
 * may never have been set up, so malloc_trim has nothing to give back and
 * has been seen to read through an arena that was never made. Found by
 * dladdr, not dlopen, whose interception by ThreadSanitizer deadlocked
 * against a dl_iterate_phdr on another thread. */
static void glibc_malloc_find(void)
{
    Dl_info info;
    void *m = dlsym(RTLD_DEFAULT, "malloc");
    const char *name = m && dladdr(m, &info) && info.dli_fname ? info.dli_fname : "";
    const char *base = strrchr(name, '/');
    glibc_malloc = strncmp(base ? base + 1 : name, "libc.so", 7) == 0;
}
#endif

bool kiln__pool_trim_heap(void)
{
#ifdef __GLIBC__
    pthread_once(&glibc_malloc_once, glibc_malloc_find);
    if (glibc_malloc)
        malloc_trim(0);
    return glibc_malloc;
#else
    return false;
#endif
}
