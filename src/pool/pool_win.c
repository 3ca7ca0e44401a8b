/*
 * pool_win.c - reading the machine on Windows.
 *
 * - CPUs: a process in one processor group may use the bits of its
 *   affinity mask; one whose threads span groups gets zero masks back and
 *   may use every active processor.
 * - Free memory: GlobalMemoryStatusEx's ullAvailPhys, the physical memory
 *   that can be used without paging anything out (standby plus free), which
 *   is what MemAvailable estimates on Linux.
 * - The heap kind: the signature in the process heap's header
 *   (pool_heap.c). Whether kiln.exe gets the segment heap is decided by its
 *   manifest before any code runs, so one read at probe time is the truth
 *   for the whole process. A signature that is neither heap's is taken as
 *   the NT heap, the safe side of the rule, and said at info level.
 * - There are no cgroups: quota_us stays 0. Job objects' CPU rate limits
 *   are not read; a job's CPU set shows in the affinity mask already.
 *   Fixture roots (proc_root, cgroup_root) have no meaning here and are
 *   refused with KILN_ENOTSUP rather than silently ignored.
 */
#include "kiln_internal.h"
#include "pool_internal.h"

#include <string.h>
#include <windows.h>
/* After windows.h, which psapi.h needs. */
#include <psapi.h>

int kiln__pool_process_heap_kind(enum kiln_heap_kind *kind, uint32_t *signature)
{
    HANDLE heap = GetProcessHeap();
    if (!heap) {
        *kind = KILN_HEAP_DEFAULT;
        if (signature)
            *signature = 0;
        return KILN_ENOTFOUND;
    }
    /* The heap handle is the address of the heap's header, which stays
     * mapped for the life of the process. */
    unsigned char header[0x14];
    memcpy(header, heap, sizeof(header));
    return kiln__pool_heap_kind(header, sizeof(header), kind, signature);
}

int kiln__pool_probe(const char *proc_root, const char *cgroup_root, struct kiln_pool_machine *m)
{
    if (proc_root || cgroup_root) {
        KILN_ERROR("pool",
                   "%s: Windows has no proc or cgroup folders; only the live machine "
                   "can be probed",
                   proc_root ? proc_root : cgroup_root);
        return KILN_ENOTSUP;
    }
    m->cpus_usable = kiln__affinity_cpus();
    if (m->cpus_usable == 0)
        m->flags |= KILN_POOL_CPUS_UNKNOWN;
    MEMORYSTATUSEX ms;
    ms.dwLength = sizeof(ms);
    if (GlobalMemoryStatusEx(&ms) && ms.ullAvailPhys > 0)
        m->mem_available = ms.ullAvailPhys;
    else
        m->flags |= KILN_POOL_MEM_UNKNOWN;
    uint32_t sig;
    if (kiln__pool_process_heap_kind(&m->heap, &sig) < 0) {
        KILN_INFO("pool",
                  "process heap signature 0x%08x is neither the NT heap's nor the "
                  "segment heap's; assuming the NT heap",
                  (unsigned)sig);
        m->heap = KILN_HEAP_NT;
    }
    return KILN_OK;
}

/* ---- the memory budget and background priority ---------------------------- */

/* Windows has no proportional set size to read: the working set counts. */
uint64_t kiln__pool_pss_of(long pid)
{
    (void)pid;
    return 0;
}

uint64_t kiln__pool_rss_of(long pid)
{
    HANDLE h = pid == 0 ? GetCurrentProcess()
                        : OpenProcess(PROCESS_QUERY_LIMITED_INFORMATION, FALSE, (DWORD)pid);
    if (!h)
        return 0;
    PROCESS_MEMORY_COUNTERS pmc;
    BOOL ok = GetProcessMemoryInfo(h, &pmc, sizeof(pmc));
    if (pid != 0)
        CloseHandle(h);
    return ok ? (uint64_t)pmc.WorkingSetSize : 0;
}

int kiln__pool_memory_max(const char *proc_root, const char *cgroup_root, uint64_t *bytes)
{
    (void)proc_root;
    (void)cgroup_root;
    *bytes = 0;
    return KILN_ENOTSUP; /* no cgroups; job object limits are not read */
}

int kiln__pool_thread_background(void)
{
    /* Background mode lowers CPU, I/O and memory priority together. */
    if (SetThreadPriority(GetCurrentThread(), THREAD_MODE_BACKGROUND_BEGIN))
        return KILN_OK;
    return SetThreadPriority(GetCurrentThread(), THREAD_PRIORITY_IDLE) ? KILN_OK : KILN_EIO;
}

bool kiln__pool_trim_heap(void)
{
    /* The process heap decommits free pages on its own. */
    return false;
}
