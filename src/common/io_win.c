/*
 * io_win.c - the default file I/O table on Windows.
 *
 * Paths are UTF-8 everywhere in kiln; here they become UTF-16 for the wide
 * Win32 calls, so a cache folder named in any script works whatever the
 * process code page is. A path too long for MAX_PATH gets the "\\?\" prefix
 * (after GetFullPathNameW, which that prefix would otherwise skip).
 *
 * Descriptors. The table's `int fd` is an index into a private table of
 * HANDLEs, not a C runtime descriptor from _open_osfhandle. The runtime's
 * descriptors belong to one copy of the runtime (an application linked to
 * another one cannot use them), are capped by _setmaxstdio, and serialise
 * every call on a per-descriptor lock; kiln never needs the runtime's
 * buffering or text mode, so it keeps its own table. Indexes are small and
 * reused lowest first, as POSIX descriptors are, which the fault-injecting
 * table in the tests relies on. A slot is looked up under a shared SRW lock,
 * so many threads read at once; only open and close take it exclusively.
 *
 * Reads and writes. Files are opened with FILE_FLAG_OVERLAPPED and every
 * ReadFile/WriteFile names its offset in an OVERLAPPED, so there is no file
 * pointer to race on and the I/O manager does not serialise the calls of
 * many threads on one handle (it does for a synchronous handle). Each thread
 * waits on its own event, made on first use and closed by the fiber-local
 * storage callback when the thread ends.
 *
 * Sharing. Every open passes FILE_SHARE_READ | FILE_SHARE_WRITE |
 * FILE_SHARE_DELETE: readers never block a writer, and a file that is open
 * can still be replaced by rename or removed, as on POSIX.
 *
 * Replacing. MoveFileExW(MOVEFILE_REPLACE_EXISTING | MOVEFILE_WRITE_THROUGH)
 * returns only once the rename is on disk, which is what fsync of the folder
 * gives on POSIX; fsync_dir therefore only checks that the folder is there
 * (Windows cannot flush a folder handle). A target that another process
 * holds open is replaced with the POSIX-semantics rename of Windows 10, and
 * failing that retried briefly, because scanners hold new files for a moment.
 *
 * Locks. LockFileEx locks are mandatory: a locked byte range refuses reads
 * and writes through other handles. kiln's locks are advisory, so the one
 * byte locked lies far past any real data (LOCK_OFFSET), where no read or
 * write ever goes. Like flock, a lock belongs to the handle, so a second
 * open of the same file in this process is refused too; changing the mode
 * drops the old lock first, as flock may.
 */
#include "kiln_internal.h"

#include <windows.h>

#include <stdlib.h>
#include <string.h>

/* The byte that stands for the whole file in LockFileEx: 2^62, beyond the
 * largest file any Windows filesystem holds. */
#define LOCK_OFFSET (UINT64_C(1) << 62)

/* FileRenameInfoEx of the Windows SDK; mingw-w64's headers hide it behind a
 * version test that _WIN32_WINNT never passes. */
#define RENAME_INFO_EX ((FILE_INFO_BY_HANDLE_CLASS)22)

/* The most bytes one ReadFile/WriteFile moves; callers loop on short counts. */
#define IO_CHUNK (1u << 30)

struct slot {
    HANDLE h; /* NULL when free */
    int lock; /* the enum kiln_io_lock_mode held through this handle */
};

static SRWLOCK table_lock = SRWLOCK_INIT;
static struct slot *table;
static int table_cap;

/* --- errors and paths ---------------------------------------------------- */

static int win_error(DWORD err, int fallback)
{
    switch (err) {
    case ERROR_FILE_NOT_FOUND:
    case ERROR_PATH_NOT_FOUND:
    case ERROR_INVALID_DRIVE:
    case ERROR_BAD_NETPATH:
    case ERROR_BAD_NET_NAME:
        return KILN_ENOENT;
    case ERROR_FILE_EXISTS:
    case ERROR_ALREADY_EXISTS:
        return KILN_EEXIST;
    case ERROR_ACCESS_DENIED:
        return KILN_EACCES;
    case ERROR_WRITE_PROTECT:
        return KILN_EROFS;
    case ERROR_SHARING_VIOLATION:
    case ERROR_LOCK_VIOLATION:
        return KILN_EBUSY;
    case ERROR_DISK_FULL:
    case ERROR_HANDLE_DISK_FULL:
        return KILN_ENOSPC;
    case ERROR_NOT_ENOUGH_MEMORY:
    case ERROR_OUTOFMEMORY:
        return KILN_ENOMEM;
    case ERROR_INVALID_NAME:
    case ERROR_DIRECTORY:
    case ERROR_INVALID_PARAMETER:
        return KILN_EINVAL;
    case ERROR_FILENAME_EXCED_RANGE:
        return KILN_ERANGE;
    case ERROR_NOT_SUPPORTED:
        return KILN_ENOTSUP;
    default:
        return fallback;
    }
}

static wchar_t *utf8_to_wide(const char *s)
{
    int n = MultiByteToWideChar(CP_UTF8, MB_ERR_INVALID_CHARS, s, -1, NULL, 0);
    if (n <= 0)
        return NULL;
    wchar_t *w = kiln__malloc((size_t)n * sizeof(*w));
    if (w && MultiByteToWideChar(CP_UTF8, MB_ERR_INVALID_CHARS, s, -1, w, n) != n) {
        kiln__free(w);
        w = NULL;
    }
    return w;
}

int kiln__win_path(const char *path, wchar_t **out)
{
    *out = NULL;
    if (!path || !*path)
        return KILN_ENOENT;
    wchar_t *w = utf8_to_wide(path);
    if (!w) {
        if (GetLastError() == ERROR_NO_UNICODE_TRANSLATION) {
            KILN_ERROR("io", "path %s is not valid UTF-8", path);
            return KILN_EINVAL;
        }
        return KILN_ENOMEM;
    }
    if (wcslen(w) < MAX_PATH - 12 || wcsncmp(w, L"\\\\?\\", 4) == 0) {
        *out = w;
        return KILN_OK;
    }
    /* Long path: make it absolute and canonical, then mark it verbatim. */
    DWORD need = GetFullPathNameW(w, 0, NULL, NULL);
    wchar_t *abs = need ? kiln__malloc((size_t)need * sizeof(*abs)) : NULL;
    DWORD got = abs ? GetFullPathNameW(w, need, abs, NULL) : 0;
    DWORD err = GetLastError();
    kiln__free(w);
    if (got == 0 || got >= need) {
        kiln__free(abs);
        return !need || abs ? win_error(err, KILN_EINVAL) : KILN_ENOMEM;
    }
    bool unc = abs[0] == L'\\' && abs[1] == L'\\';
    wchar_t *full = kiln__malloc(((size_t)got + 8) * sizeof(*full));
    if (full) {
        /* \\server\share becomes \\?\UNC\server\share; C:\x becomes \\?\C:\x. */
        wcscpy(full, unc ? L"\\\\?\\UNC" : L"\\\\?\\");
        wcscat(full, unc ? abs + 1 : abs);
    }
    kiln__free(abs);
    if (!full)
        return KILN_ENOMEM;
    *out = full;
    return KILN_OK;
}

int kiln__win_utf8(const wchar_t *w, char **out)
{
    *out = NULL;
    int n = WideCharToMultiByte(CP_UTF8, WC_ERR_INVALID_CHARS, w, -1, NULL, 0, NULL, NULL);
    if (n <= 0)
        return KILN_EINVAL;
    char *s = kiln__malloc((size_t)n);
    if (!s)
        return KILN_ENOMEM;
    if (WideCharToMultiByte(CP_UTF8, WC_ERR_INVALID_CHARS, w, -1, s, n, NULL, NULL) != n) {
        kiln__free(s);
        return KILN_EINVAL;
    }
    *out = s;
    return KILN_OK;
}

/* --- the handle table ---------------------------------------------------- */

static int slot_add(HANDLE h, int *fd)
{
    AcquireSRWLockExclusive(&table_lock);
    int i = 0;
    while (i < table_cap && table[i].h)
        i++;
    if (i == table_cap) {
        int cap = table_cap ? table_cap * 2 : 64;
        struct slot *grown = kiln__realloc(table, (size_t)cap * sizeof(*grown));
        if (!grown) {
            ReleaseSRWLockExclusive(&table_lock);
            return KILN_ENOMEM;
        }
        memset(grown + table_cap, 0, (size_t)(cap - table_cap) * sizeof(*grown));
        table = grown;
        table_cap = cap;
    }
    table[i].h = h;
    table[i].lock = KILN_IO_UNLOCK;
    ReleaseSRWLockExclusive(&table_lock);
    *fd = i;
    return KILN_OK;
}

static HANDLE slot_get(int fd)
{
    HANDLE h = NULL;
    AcquireSRWLockShared(&table_lock);
    if (fd >= 0 && fd < table_cap)
        h = table[fd].h;
    ReleaseSRWLockShared(&table_lock);
    return h;
}

/* --- one event per thread for overlapped calls --------------------------- */

static INIT_ONCE event_once = INIT_ONCE_STATIC_INIT;
static DWORD event_fls = FLS_OUT_OF_INDEXES;

static void WINAPI event_free(void *event)
{
    if (event)
        CloseHandle(event);
}

static BOOL CALLBACK event_init(INIT_ONCE *once, void *param, void **ctx)
{
    (void)once;
    (void)param;
    (void)ctx;
    event_fls = FlsAlloc(event_free);
    return TRUE;
}

static HANDLE thread_event(void)
{
    InitOnceExecuteOnce(&event_once, event_init, NULL, NULL);
    if (event_fls == FLS_OUT_OF_INDEXES)
        return NULL;
    HANDLE ev = FlsGetValue(event_fls);
    if (!ev) {
        ev = CreateEventW(NULL, TRUE, FALSE, NULL);
        if (ev && !FlsSetValue(event_fls, ev)) {
            CloseHandle(ev);
            ev = NULL;
        }
    }
    return ev;
}

/* Runs one overlapped ReadFile (write == false) or WriteFile at `off`.
 * @return the bytes moved, or -(Win32 error). */
static int64_t overlapped_io(HANDLE h, bool write, void *buf, size_t n, uint64_t off)
{
    OVERLAPPED ov;
    memset(&ov, 0, sizeof(ov));
    ov.Offset = (DWORD)off;
    ov.OffsetHigh = (DWORD)(off >> 32);
    ov.hEvent = thread_event();
    if (!ov.hEvent)
        return -(int64_t)ERROR_NOT_ENOUGH_MEMORY;
    DWORD len = (DWORD)KILN_MIN(n, (size_t)IO_CHUNK), done = 0;
    BOOL ok = write ? WriteFile(h, buf, len, &done, &ov) : ReadFile(h, buf, len, &done, &ov);
    if (!ok && GetLastError() == ERROR_IO_PENDING)
        ok = GetOverlappedResult(h, &ov, &done, TRUE);
    if (!ok) {
        DWORD err = GetLastError();
        return err == ERROR_HANDLE_EOF && !write ? 0 : -(int64_t)err;
    }
    return (int64_t)done;
}

/* --- the table's functions ----------------------------------------------- */

static int win_open(const struct kiln_io *self, const char *path, int flags, int *fd)
{
    (void)self;
    DWORD access = GENERIC_READ | ((flags & KILN_IO_RDWR) ? GENERIC_WRITE : 0);
    DWORD disp;
    if (flags & KILN_IO_CREATE) {
        disp = (flags & KILN_IO_EXCL)    ? CREATE_NEW
               : (flags & KILN_IO_TRUNC) ? CREATE_ALWAYS
                                         : OPEN_ALWAYS;
    } else {
        disp = (flags & KILN_IO_TRUNC) ? TRUNCATE_EXISTING : OPEN_EXISTING;
    }
    wchar_t *w;
    KILN_TRY(kiln__win_path(path, &w));
    /* With KILN_IO_NOFOLLOW a reparse point (a symbolic link, a junction)
     * is opened itself, then refused below. */
    DWORD how = FILE_ATTRIBUTE_NORMAL | FILE_FLAG_OVERLAPPED |
                ((flags & KILN_IO_NOFOLLOW) ? FILE_FLAG_OPEN_REPARSE_POINT : 0);
    HANDLE h = CreateFileW(w, access, FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE, NULL,
                           disp, how, NULL);
    DWORD err = GetLastError();
    if (h == INVALID_HANDLE_VALUE && err == ERROR_ACCESS_DENIED) {
        /* A folder refuses CreateFileW: answer as the POSIX table does. */
        DWORD attr = GetFileAttributesW(w);
        if (attr != INVALID_FILE_ATTRIBUTES && (attr & FILE_ATTRIBUTE_DIRECTORY)) {
            kiln__free(w);
            return KILN_EFORMAT;
        }
    }
    kiln__free(w);
    if (h == INVALID_HANDLE_VALUE)
        return win_error(err, KILN_EIO_OPEN);
    /* Only a regular file on a disk: not a pipe, a device, or a link. */
    BY_HANDLE_FILE_INFORMATION info;
    if (GetFileType(h) != FILE_TYPE_DISK || !GetFileInformationByHandle(h, &info) ||
        (info.dwFileAttributes & (FILE_ATTRIBUTE_DIRECTORY | FILE_ATTRIBUTE_REPARSE_POINT))) {
        CloseHandle(h);
        return KILN_EFORMAT;
    }
    int rc = slot_add(h, fd);
    if (rc != KILN_OK)
        CloseHandle(h);
    return rc;
}

static int unlock_handle(HANDLE h)
{
    OVERLAPPED ov;
    memset(&ov, 0, sizeof(ov));
    ov.Offset = (DWORD)LOCK_OFFSET;
    ov.OffsetHigh = (DWORD)(LOCK_OFFSET >> 32);
    if (!UnlockFileEx(h, 0, 1, 0, &ov) && GetLastError() != ERROR_NOT_LOCKED)
        return KILN_EIO_LOCK;
    return KILN_OK;
}

static int win_close(const struct kiln_io *self, int fd)
{
    (void)self;
    AcquireSRWLockExclusive(&table_lock);
    HANDLE h = NULL;
    int lock = KILN_IO_UNLOCK;
    if (fd >= 0 && fd < table_cap && table[fd].h) {
        h = table[fd].h;
        lock = table[fd].lock;
        table[fd].h = NULL;
        table[fd].lock = KILN_IO_UNLOCK;
    }
    ReleaseSRWLockExclusive(&table_lock);
    if (!h)
        return KILN_EINVAL;
    /* Windows frees a closed handle's locks only "eventually": drop it now,
     * so the next opener is not refused. */
    if (lock != KILN_IO_UNLOCK)
        unlock_handle(h);
    return CloseHandle(h) ? KILN_OK : win_error(GetLastError(), KILN_EIO);
}

static int64_t win_pread(const struct kiln_io *self, int fd, void *buf, size_t n, uint64_t off)
{
    (void)self;
    HANDLE h = slot_get(fd);
    if (!h)
        return KILN_EINVAL;
    int64_t got = overlapped_io(h, false, buf, n, off);
    return got < 0 ? win_error((DWORD)-got, KILN_EIO_READ) : got;
}

static int64_t win_pwrite(const struct kiln_io *self, int fd, const void *buf, size_t n,
                          uint64_t off)
{
    (void)self;
    HANDLE h = slot_get(fd);
    if (!h)
        return KILN_EINVAL;
    int64_t put = overlapped_io(h, true, (void *)buf, n, off);
    return put < 0 ? win_error((DWORD)-put, KILN_EIO_WRITE) : put;
}

static int win_fsync(const struct kiln_io *self, int fd)
{
    (void)self;
    HANDLE h = slot_get(fd);
    if (!h)
        return KILN_EINVAL;
    if (FlushFileBuffers(h))
        return KILN_OK;
    DWORD err = GetLastError();
    return err == ERROR_DISK_FULL || err == ERROR_HANDLE_DISK_FULL ? KILN_ENOSPC : KILN_EIO_SYNC;
}

static int win_fsync_dir(const struct kiln_io *self, const char *path)
{
    (void)self;
    /* Renames are written through (MOVEFILE_WRITE_THROUGH) and new files'
     * data is flushed by fsync: what remains is to fail as POSIX does when
     * the folder is not there. */
    wchar_t *w;
    KILN_TRY(kiln__win_path(path, &w));
    DWORD attr = GetFileAttributesW(w);
    DWORD err = GetLastError();
    kiln__free(w);
    if (attr == INVALID_FILE_ATTRIBUTES)
        return win_error(err, KILN_EIO_OPEN);
    return (attr & FILE_ATTRIBUTE_DIRECTORY) ? KILN_OK : KILN_EINVAL;
}

/* The rename of Windows 10 (1607 on, NTFS) that may replace a target other
 * processes hold open, as rename(2) does. @return a Win32 error or 0. */
static DWORD posix_rename(const wchar_t *from, const wchar_t *to)
{
    HANDLE h = CreateFileW(from, DELETE | SYNCHRONIZE,
                           FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE, NULL,
                           OPEN_EXISTING, FILE_ATTRIBUTE_NORMAL | FILE_FLAG_WRITE_THROUGH, NULL);
    if (h == INVALID_HANDLE_VALUE)
        return GetLastError();
    size_t len = wcslen(to) * sizeof(wchar_t);
    size_t size = sizeof(FILE_RENAME_INFO) + len;
    FILE_RENAME_INFO *info = kiln__calloc(1, size);
    DWORD err = ERROR_NOT_ENOUGH_MEMORY;
    if (info) {
        info->Flags = FILE_RENAME_FLAG_REPLACE_IF_EXISTS | FILE_RENAME_FLAG_POSIX_SEMANTICS;
        info->FileNameLength = (DWORD)len;
        memcpy(info->FileName, to, len);
        err = SetFileInformationByHandle(h, RENAME_INFO_EX, info, (DWORD)size) ? 0 : GetLastError();
        kiln__free(info);
    }
    CloseHandle(h);
    return err;
}

/* Both names of a rename as wide paths; on failure neither is left. */
static int win_path_pair(const char *from, const char *to, wchar_t **wf, wchar_t **wt)
{
    KILN_TRY(kiln__win_path(from, wf));
    int rc = kiln__win_path(to, wt);
    if (rc != KILN_OK) {
        kiln__free(*wf);
        *wf = NULL;
    }
    return rc;
}

int kiln__io_rename_noreplace(const char *from, const char *to)
{
    wchar_t *wf, *wt;
    KILN_TRY(win_path_pair(from, to, &wf, &wt));
    /* Without MOVEFILE_REPLACE_EXISTING the move fails when `to` exists. */
    int rc = KILN_OK;
    if (!MoveFileExW(wf, wt, MOVEFILE_WRITE_THROUGH)) {
        DWORD err = GetLastError();
        rc = err == ERROR_ALREADY_EXISTS || err == ERROR_FILE_EXISTS
                 ? KILN_EEXIST
                 : win_error(err, KILN_EIO_RENAME);
    }
    kiln__free(wf);
    kiln__free(wt);
    return rc;
}

static int win_rename(const struct kiln_io *self, const char *from, const char *to)
{
    (void)self;
    wchar_t *wf, *wt;
    KILN_TRY(win_path_pair(from, to, &wf, &wt));
    DWORD err = 0;
    for (int attempt = 0; attempt < 6; attempt++) {
        if (MoveFileExW(wf, wt, MOVEFILE_REPLACE_EXISTING | MOVEFILE_WRITE_THROUGH)) {
            err = 0;
            break;
        }
        err = GetLastError();
        if (err != ERROR_ACCESS_DENIED && err != ERROR_SHARING_VIOLATION)
            break;
        if (attempt == 0 && posix_rename(wf, wt) == 0) {
            err = 0;
            break;
        }
        Sleep(1u << (2 * attempt)); /* 1, 4, 16, 64, 256 ms */
    }
    kiln__free(wf);
    kiln__free(wt);
    if (err == 0)
        return KILN_OK;
    int rc = win_error(err, KILN_EIO_RENAME);
    /* A rename that fails for a reason with no code of its own says which step failed. */
    return rc == KILN_EACCES || rc == KILN_EBUSY ? KILN_EIO_RENAME : rc;
}

static int win_truncate(const struct kiln_io *self, int fd, uint64_t size)
{
    (void)self;
    HANDLE h = slot_get(fd);
    if (!h)
        return KILN_EINVAL;
    FILE_END_OF_FILE_INFO eof;
    eof.EndOfFile.QuadPart = (LONGLONG)size;
    if (SetFileInformationByHandle(h, FileEndOfFileInfo, &eof, sizeof(eof)))
        return KILN_OK;
    /* Older systems: move the (otherwise unused) file pointer and cut there. */
    LARGE_INTEGER pos;
    pos.QuadPart = (LONGLONG)size;
    if (SetFilePointerEx(h, pos, NULL, FILE_BEGIN) && SetEndOfFile(h))
        return KILN_OK;
    return win_error(GetLastError(), KILN_EIO_TRUNCATE);
}

static int win_lock(const struct kiln_io *self, int fd, enum kiln_io_lock_mode mode)
{
    (void)self;
    AcquireSRWLockShared(&table_lock);
    HANDLE h = NULL;
    int held = KILN_IO_UNLOCK;
    if (fd >= 0 && fd < table_cap) {
        h = table[fd].h;
        held = table[fd].lock;
    }
    ReleaseSRWLockShared(&table_lock);
    if (!h)
        return KILN_EINVAL;
    if ((int)mode == held)
        return KILN_OK;
    if (held != KILN_IO_UNLOCK)
        KILN_TRY(unlock_handle(h));
    int rc = KILN_OK;
    if (mode != KILN_IO_UNLOCK) {
        OVERLAPPED ov;
        memset(&ov, 0, sizeof(ov));
        ov.Offset = (DWORD)LOCK_OFFSET;
        ov.OffsetHigh = (DWORD)(LOCK_OFFSET >> 32);
        ov.hEvent = thread_event();
        DWORD how = LOCKFILE_FAIL_IMMEDIATELY |
                    (mode == KILN_IO_LOCK_EXCLUSIVE ? LOCKFILE_EXCLUSIVE_LOCK : 0);
        BOOL ok = LockFileEx(h, how, 0, 1, 0, &ov);
        DWORD done;
        if (!ok && GetLastError() == ERROR_IO_PENDING)
            ok = GetOverlappedResult(h, &ov, &done, TRUE);
        if (!ok) {
            DWORD err = GetLastError();
            rc = err == ERROR_LOCK_VIOLATION || err == ERROR_SHARING_VIOLATION ? KILN_EBUSY
                                                                               : KILN_EIO_LOCK;
        }
    }
    AcquireSRWLockExclusive(&table_lock);
    if (fd < table_cap && table[fd].h == h)
        table[fd].lock = rc == KILN_OK ? (int)mode : KILN_IO_UNLOCK;
    ReleaseSRWLockExclusive(&table_lock);
    return rc;
}

static int win_size(const struct kiln_io *self, int fd, uint64_t *size)
{
    (void)self;
    HANDLE h = slot_get(fd);
    if (!h)
        return KILN_EINVAL;
    LARGE_INTEGER s;
    if (!GetFileSizeEx(h, &s))
        return win_error(GetLastError(), KILN_EIO_STAT);
    *size = (uint64_t)s.QuadPart;
    return KILN_OK;
}

static int win_unlink(const struct kiln_io *self, const char *path)
{
    (void)self;
    wchar_t *w;
    KILN_TRY(kiln__win_path(path, &w));
    BOOL ok = DeleteFileW(w);
    DWORD err = GetLastError();
    kiln__free(w);
    return ok ? KILN_OK : win_error(err, KILN_EIO_UNLINK);
}

static const struct kiln_io win_io = {
    .size = sizeof(struct kiln_io),
    .open = win_open,
    .close = win_close,
    .pread = win_pread,
    .pwrite = win_pwrite,
    .fsync = win_fsync,
    .fsync_dir = win_fsync_dir,
    .rename = win_rename,
    .truncate = win_truncate,
    .lock = win_lock,
    .file_size = win_size,
    .unlink = win_unlink,
};

const struct kiln_io *kiln_io_default(void)
{
    return &win_io;
}
