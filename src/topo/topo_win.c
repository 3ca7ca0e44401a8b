/*
 * topo_win.c - the cache topology, the CPUs a process may use, and pinning
 * on Windows.
 *
 * Design:
 * - The topology is one call, GetLogicalProcessorInformationEx
 *   (RelationAll, RelationCache where that is refused), whose records
 *   topo_slpi.c parses from the buffer; tests feed that parser recorded
 *   layouts. Windows has no sysfs: kiln_topo_read() reads the live system
 *   when the root is NULL and answers KILN_ENOTSUP for any root, so a
 *   caller can never mistake a fixture tree for the machine.
 * - CPU c is processor (c % 64) of processor group c / 64 (see
 *   topo_slpi.c). A group's active processors are numbered densely from 0,
 *   so a group's usable mask is the low GetActiveProcessorCount(group) bits.
 * - The usable CPUs are the process's affinity: its mask in its one group,
 *   or, when its threads span several groups (Windows 11 gives a process
 *   every group by default), every active processor of those groups.
 *   kiln_topo_env's roots mean nothing here; its `affinity` still overrides.
 * - Pinning inside the one group the process lives in is
 *   SetProcessAffinityMask: Windows applies it to every thread now and to
 *   every thread made later. Any other set (another group, or several) is
 *   set thread by thread with SetThreadGroupAffinity, a thread belonging to
 *   one group only, so threads are spread over the set's groups in turn;
 *   the thread list (a Toolhelp snapshot) is taken again until a pass finds
 *   no thread it has not set, as the /proc walk does on Linux. Threads made
 *   later start in the process's default group then.
 */
#include "topo_internal.h"

#include <assert.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <windows.h>

#include <tlhelp32.h>

/* The record offsets topo_slpi.c reads, against the SDK's structs. */
_Static_assert(offsetof(SYSTEM_LOGICAL_PROCESSOR_INFORMATION_EX, Cache) == 8, "record head");
_Static_assert(offsetof(CACHE_RELATIONSHIP, CacheSize) == 4, "CacheSize");
_Static_assert(offsetof(CACHE_RELATIONSHIP, Type) == 8, "Type");
_Static_assert(offsetof(CACHE_RELATIONSHIP, GroupMask) == 32, "cache GroupMask");
_Static_assert(offsetof(PROCESSOR_RELATIONSHIP, GroupCount) == 22, "core GroupCount");
_Static_assert(offsetof(PROCESSOR_RELATIONSHIP, GroupMask) == 24, "core GroupMask");
_Static_assert(offsetof(GROUP_RELATIONSHIP, ActiveGroupCount) == 2, "ActiveGroupCount");
_Static_assert(offsetof(GROUP_RELATIONSHIP, GroupInfo) == 24, "GroupInfo");
_Static_assert(sizeof(PROCESSOR_GROUP_INFO) == 48, "PROCESSOR_GROUP_INFO");
_Static_assert(offsetof(PROCESSOR_GROUP_INFO, ActiveProcessorMask) == 40, "ActiveProcessorMask");
_Static_assert(sizeof(GROUP_AFFINITY) == 16 && offsetof(GROUP_AFFINITY, Group) == 8,
               "GROUP_AFFINITY");

/* Largest group count kiln handles (KILN_TOPO_MAX_CPUS / 64). */
#define MAX_GROUPS (KILN_TOPO_MAX_CPUS / 64)

/* ---- the topology -------------------------------------------------------------- */

/* Fills *buf with the records of `rel`. @return 0 or the GetLastError code. */
static DWORD query(LOGICAL_PROCESSOR_RELATIONSHIP rel, unsigned char **buf, DWORD *len)
{
    *buf = NULL;
    *len = 0;
    for (int tries = 0; tries < 8; tries++) {
        DWORD want = *len;
        if (GetLogicalProcessorInformationEx(rel, (PSYSTEM_LOGICAL_PROCESSOR_INFORMATION_EX)*buf,
                                             &want)) {
            *len = want;
            return 0;
        }
        DWORD err = GetLastError();
        if (err != ERROR_INSUFFICIENT_BUFFER || want <= *len) {
            kiln__free(*buf);
            *buf = NULL;
            return err ? err : ERROR_INVALID_DATA;
        }
        unsigned char *nb = kiln__realloc(*buf, want);
        if (!nb) {
            kiln__free(*buf);
            *buf = NULL;
            return ERROR_NOT_ENOUGH_MEMORY;
        }
        *buf = nb;
        *len = want;
    }
    kiln__free(*buf);
    *buf = NULL;
    return ERROR_INSUFFICIENT_BUFFER; /* it kept growing */
}

int kiln_topo_read(const char *sysfs_root, unsigned flags, struct kiln_topo **out)
{
    if (!out)
        return KILN_EINVAL;
    assert(out);
    *out = NULL;
    if (sysfs_root) {
        KILN_ERROR("topo", "%s: Windows has no sysfs; only the live system can be read",
                   sysfs_root);
        return KILN_ENOTSUP;
    }
    unsigned char *buf;
    DWORD len;
    DWORD err = query(RelationAll, &buf, &len);
    if (err == ERROR_NOT_ENOUGH_MEMORY)
        return KILN_ENOMEM;
    if (err)
        err = query(RelationCache, &buf, &len);
    if (err == ERROR_NOT_ENOUGH_MEMORY)
        return KILN_ENOMEM;
    if (err) {
        KILN_ERROR("topo", "GetLogicalProcessorInformationEx: error %lu", (unsigned long)err);
        return KILN_EIO;
    }
    int rc = kiln__topo_parse_slpi(buf, len, flags, out);
    kiln__free(buf);
    return rc;
}

/* ---- the CPUs this process may use --------------------------------------------- */

/* The active processors of `group` as a mask (0 for a group that is not there). */
static uint64_t group_active_mask(WORD group)
{
    DWORD n = GetActiveProcessorCount(group);
    if (n == 0)
        return 0;
    return n >= 64 ? UINT64_MAX : (UINT64_C(1) << n) - 1;
}

static int add_group_mask(struct kiln_cpuset *set, uint32_t group, uint64_t mask)
{
    for (uint32_t b = 0; b < 64; b++)
        if (mask >> b & 1)
            KILN_TRY(kiln__cpuset_add(set, group * 64 + b));
    return KILN_OK;
}

/* The groups this process has threads in. @return their count (0: unknown). */
static USHORT process_groups(USHORT *groups, USHORT cap)
{
    USHORT n = cap;
    if (!GetProcessGroupAffinity(GetCurrentProcess(), &n, groups))
        return 0;
    return n;
}

static int live_affinity(struct kiln_cpuset *out)
{
    USHORT groups[MAX_GROUPS];
    USHORT ng = process_groups(groups, (USHORT)KILN_ARRAY_LEN(groups));
    if (ng <= 1) {
        DWORD_PTR mask = 0, system = 0;
        if (GetProcessAffinityMask(GetCurrentProcess(), &mask, &system) && mask != 0)
            return add_group_mask(out, ng == 1 ? groups[0] : 0, (uint64_t)mask);
        if (ng == 0) {
            KILN_ERROR("topo", "GetProcessAffinityMask: error %lu", (unsigned long)GetLastError());
            return KILN_EIO;
        }
    }
    for (USHORT i = 0; i < ng; i++)
        KILN_TRY(add_group_mask(out, groups[i], group_active_mask(groups[i])));
    return KILN_OK;
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
    int rc = env && env->affinity ? kiln_cpuset_copy(out, env->affinity) : live_affinity(out);
    if (rc < 0)
        kiln_cpuset_free(out);
    return rc;
}

/* ---- pinning ------------------------------------------------------------------ */

struct group_mask {
    WORD group;
    uint64_t mask;
};

static int error_code(DWORD err)
{
    return err == ERROR_ACCESS_DENIED ? KILN_EACCES : KILN_EINVAL;
}

/* Sets thread `tid` (0: the caller) to one group's mask. */
static int set_thread(DWORD tid, const struct group_mask *gm, const char *text)
{
    HANDLE h = tid ? OpenThread(THREAD_SET_INFORMATION | THREAD_QUERY_INFORMATION, FALSE, tid)
                   : GetCurrentThread();
    if (!h) {
        DWORD err = GetLastError();
        if (err == ERROR_INVALID_PARAMETER)
            return KILN_OK; /* the thread ended meanwhile */
        KILN_ERROR("topo", "OpenThread(thread %lu): error %lu", (unsigned long)tid,
                   (unsigned long)err);
        return error_code(err);
    }
    GROUP_AFFINITY ga = {.Mask = (KAFFINITY)gm->mask, .Group = gm->group};
    BOOL ok = SetThreadGroupAffinity(h, &ga, NULL);
    DWORD err = ok ? 0 : GetLastError();
    if (tid)
        CloseHandle(h);
    if (ok)
        return KILN_OK;
    KILN_ERROR("topo", "SetThreadGroupAffinity(thread %lu, CPUs %s): error %lu", (unsigned long)tid,
               text, (unsigned long)err);
    return error_code(err);
}

/* Sets every thread of the process, spreading them over the groups in turn. */
static int set_threads(const struct group_mask *gms, size_t ng, const char *text)
{
    struct kiln__tid_list seen = {0};
    DWORD pid = GetCurrentProcessId();
    size_t next = 0;
    int rc = set_thread(0, &gms[next++ % ng], text);
    if (rc == KILN_OK)
        rc = kiln__tid_add(&seen, GetCurrentThreadId());
    for (int pass = 0; rc == KILN_OK; pass++) {
        if (pass == 64) {
            KILN_ERROR("topo", "threads keep appearing; gave up after %d passes", pass);
            rc = KILN_EBUSY;
            break;
        }
        HANDLE snap = CreateToolhelp32Snapshot(TH32CS_SNAPTHREAD, 0);
        if (snap == INVALID_HANDLE_VALUE) {
            KILN_ERROR("topo", "CreateToolhelp32Snapshot: error %lu",
                       (unsigned long)GetLastError());
            rc = KILN_EIO;
            break;
        }
        size_t fresh = 0;
        THREADENTRY32 te = {.dwSize = sizeof(te)};
        for (BOOL more = Thread32First(snap, &te); more && rc == KILN_OK;
             more = Thread32Next(snap, &te)) {
            if (te.th32OwnerProcessID != pid || kiln__tid_seen(&seen, te.th32ThreadID))
                continue;
            rc = set_thread(te.th32ThreadID, &gms[next++ % ng], text);
            if (rc == KILN_OK)
                rc = kiln__tid_add(&seen, te.th32ThreadID);
            fresh++;
        }
        CloseHandle(snap);
        if (fresh == 0)
            break;
    }
    if (rc == KILN_OK)
        KILN_INFO("topo", "pinned %zu threads to CPUs %s", seen.n, text);
    kiln__tid_list_free(&seen);
    return rc;
}

int kiln_process_set_affinity(const char *proc_root, const struct kiln_cpuset *cpus)
{
    if (!cpus)
        return KILN_EINVAL;
    assert(cpus);
    if (proc_root) {
        KILN_ERROR("topo", "%s: Windows has no proc folder; only this process can be pinned",
                   proc_root);
        return KILN_ENOTSUP;
    }
    char text[128];
    KILN_TRY(kiln__pin_text(cpus, text, sizeof(text)));
    /* The set, group by group; every CPU must be an active processor. */
    struct group_mask *gms = kiln__malloc(cpus->nwords * sizeof(*gms));
    if (!gms)
        return KILN_ENOMEM;
    size_t ng = 0;
    for (uint32_t g = 0; g < cpus->nwords; g++) {
        uint64_t mask = cpus->words[g];
        if (mask == 0)
            continue;
        if ((mask & ~group_active_mask((WORD)g)) != 0) {
            KILN_ERROR("topo", "CPUs %s: not all are active processors of this system", text);
            kiln__free(gms);
            return KILN_EINVAL;
        }
        gms[ng++] = (struct group_mask){.group = (WORD)g, .mask = mask};
    }
    USHORT groups[2];
    USHORT pg = process_groups(groups, 2);
    int rc = KILN_OK;
    if (ng == 1 && pg == 1 && groups[0] == gms[0].group) {
        if (SetProcessAffinityMask(GetCurrentProcess(), (DWORD_PTR)gms[0].mask)) {
            KILN_INFO("topo", "pinned the process to CPUs %s", text);
        } else {
            DWORD err = GetLastError();
            KILN_ERROR("topo", "SetProcessAffinityMask(CPUs %s): error %lu", text,
                       (unsigned long)err);
            rc = error_code(err);
        }
    } else {
        rc = set_threads(gms, ng, text);
    }
    kiln__free(gms);
    return rc;
}
