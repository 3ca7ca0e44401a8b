/*
 * cache_sys_win.c - what the cache asks of Windows beyond file I/O: memory
 * for large blocks, making a cache's folder, and the ids of files
 * (kiln_cache_check_output: the volume serial number and file index of
 * GetFileInformationByHandle).
 *
 * Large blocks come straight from VirtualAlloc: committed pages read as zero
 * without being written, cost memory only once touched, and go back to the
 * system at once when freed instead of staying in the heap. Under the NT
 * heap this also keeps many parallel loads off the heap's one lock for the
 * blocks that matter.
 */
#include "cache_internal.h"

#include <stdlib.h>
#include <string.h>
#include <windows.h>

/* Below this, malloc: a region is at least one 64 KiB allocation unit. */
#define BIG_MIN (256u << 10)

void *kiln__cache_alloc_big(size_t n)
{
    if (n < BIG_MIN)
        return kiln__malloc(n);
    return VirtualAlloc(NULL, n, MEM_RESERVE | MEM_COMMIT, PAGE_READWRITE);
}

void kiln__cache_free_big(void *p, size_t n)
{
    if (!p)
        return;
    if (n >= BIG_MIN) {
        VirtualFree(p, 0, MEM_RELEASE);
        return;
    }
    kiln__free(p);
}

/* Makes one folder; @return 0 when it is a folder now, or the error. */
static int make_one(const char *path, bool last)
{
    wchar_t *w = NULL;
    int rc = kiln__win_path(path, &w);
    if (rc < 0)
        return rc;
    if (!CreateDirectoryW(w, NULL) && last) {
        DWORD err = GetLastError();
        DWORD attr = GetFileAttributesW(w);
        if (attr == INVALID_FILE_ATTRIBUTES)
            rc = err == ERROR_PATH_NOT_FOUND || err == ERROR_FILE_NOT_FOUND ? KILN_ENOENT
                 : err == ERROR_ACCESS_DENIED                               ? KILN_EACCES
                                                                            : KILN_EIO;
        else if (!(attr & FILE_ATTRIBUTE_DIRECTORY))
            rc = KILN_ENOENT; /* as opening a file in it says */
    }
    kiln__free(w);
    return rc;
}

int kiln__cache_make_dirs(const char *dir)
{
    size_t len = strlen(dir);
    if (!len)
        return KILN_ENOENT;
    char *p = kiln__malloc(len + 1);
    if (!p)
        return KILN_ENOMEM;
    memcpy(p, dir, len + 1);
    /* Each parent in turn (a drive such as "C:" fails harmlessly); a
     * failure there shows in the last one. */
    for (size_t i = 1; i < len; i++) {
        if ((p[i] != '/' && p[i] != '\\') || p[i - 1] == '/' || p[i - 1] == '\\')
            continue;
        char sep = p[i];
        p[i] = '\0';
        make_one(p, false);
        p[i] = sep;
    }
    int rc = make_one(p, true);
    kiln__free(p);
    return rc;
}

/* The kiln code for a failed CreateFileW or FindFirstFileExW. */
static int open_error(DWORD err)
{
    return err == ERROR_FILE_NOT_FOUND || err == ERROR_PATH_NOT_FOUND ? KILN_ENOENT
           : err == ERROR_ACCESS_DENIED                               ? KILN_EACCES
                                                                      : KILN_EIO_OPEN;
}

int kiln__file_id_of(const char *path, struct kiln__file_id *id)
{
    wchar_t *w = NULL;
    KILN_TRY(kiln__win_path(path, &w));
    /* No access asked: only the file's information is read. Backup
     * semantics open folders too. */
    HANDLE h = CreateFileW(w, 0, FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE, NULL,
                           OPEN_EXISTING, FILE_FLAG_BACKUP_SEMANTICS, NULL);
    kiln__free(w);
    if (h == INVALID_HANDLE_VALUE)
        return open_error(GetLastError());
    BY_HANDLE_FILE_INFORMATION info;
    BOOL ok = GetFileInformationByHandle(h, &info);
    CloseHandle(h);
    if (!ok)
        return KILN_EIO_STAT;
    id->volume = info.dwVolumeSerialNumber;
    id->file = ((uint64_t)info.nFileIndexHigh << 32) | info.nFileIndexLow;
    return KILN_OK;
}

int kiln__dir_holds(const char *dir, struct kiln__file_id id)
{
    char pattern[KILN__CACHE_PATH_MAX];
    KILN_TRY(kiln__path_join(pattern, sizeof(pattern), dir, "*"));
    wchar_t *w = NULL;
    KILN_TRY(kiln__win_path(pattern, &w));
    WIN32_FIND_DATAW fd;
    HANDLE find = FindFirstFileExW(w, FindExInfoBasic, &fd, FindExSearchNameMatch, NULL, 0);
    kiln__free(w);
    if (find == INVALID_HANDLE_VALUE)
        return open_error(GetLastError());
    int found = 0;
    do {
        char *name = NULL, path[KILN__CACHE_PATH_MAX];
        struct kiln__file_id f = {0, 0};
        if (wcscmp(fd.cFileName, L".") == 0 || wcscmp(fd.cFileName, L"..") == 0 ||
            kiln__win_utf8(fd.cFileName, &name) < 0)
            continue;
        found = kiln__path_join(path, sizeof(path), dir, name) == KILN_OK &&
                kiln__file_id_of(path, &f) == KILN_OK && kiln__file_id_equal(f, id);
        kiln__free(name);
    } while (!found && FindNextFileW(find, &fd));
    FindClose(find);
    return found;
}
