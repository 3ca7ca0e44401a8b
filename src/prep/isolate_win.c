/*
 * isolate_win.c - isolation's processes and channel on Windows.
 *
 * Invariants and why they hold:
 *
 * - The child inherits its channel and stderr, nothing else. The channel
 *   is a named pipe made for this one worker (a unique name, one instance,
 *   FILE_FLAG_FIRST_PIPE_INSTANCE so nobody can have made it first, local
 *   clients only). Its client end is opened inheritable and passed as the
 *   child's stdin and stdout, with an inheritable copy of stderr; both are
 *   named in PROC_THREAD_ATTRIBUTE_HANDLE_LIST, so even while another
 *   thread spawns a worker of its own, neither child inherits the other's
 *   channel or any handle (cache file, lock) the parent holds. The parent
 *   closes its copies right after CreateProcessW: the child's is then the
 *   only client end, and its exit breaks the pipe.
 *
 * - A worker dies with its parent: every worker is put, before it runs a
 *   single instruction (made suspended, resumed after), into one job
 *   object of the process's own with JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE.
 *   Only this process holds a handle to the job (never inherited), so when
 *   it ends, however it ends, the system closes the handle and ends every
 *   worker still running, whatever its driver is doing. A job that cannot
 *   be made or joined (an old system that does not nest jobs) leaves the
 *   worker running untied, with one info line.
 *
 * - No wait is unbounded: the parent's end is overlapped, and every read
 *   and write waits on its event and on the process with the time left to
 *   its deadline; a call still pending at the deadline is cancelled and
 *   waited for (the buffer is the caller's again) before KILN_ETIMEDOUT.
 *   A process that exited with a call still pending is KILN_ECRASH: what it
 *   wrote before it exited is read first, as it is still in the pipe.
 *
 * - A dead worker never takes the parent down: a broken pipe is an error
 *   code (KILN_ECRASH), and a worker is ended with TerminateProcess and
 *   waited for with a bound.
 *
 * - The worker's side reads and writes the OS handles under its C runtime
 *   descriptors (_get_osfhandle) with ReadFile and WriteFile, so no text
 *   mode translation ever touches a frame.
 */
#include "kiln_internal.h"
#include "isolate_internal.h"

#include <io.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <windows.h>

/* The exit code TerminateProcess gives a worker ended by the parent. */
#define KILLED_CODE 0x4b494c4cu
/* The most one ReadFile or WriteFile call moves. */
#define CHUNK ((DWORD)1 << 20)

struct kiln__iso_proc {
    HANDLE process;
    HANDLE pipe;  /* the parent's end of the channel (overlapped) */
    HANDLE event; /* the overlapped calls' event: one call at a time */
    DWORD pid;
};

static int from_win(DWORD err, int fallback)
{
    switch (err) {
    case ERROR_FILE_NOT_FOUND:
    case ERROR_PATH_NOT_FOUND:
        return KILN_ENOENT;
    case ERROR_ACCESS_DENIED:
        return KILN_EACCES;
    case ERROR_NOT_ENOUGH_MEMORY:
    case ERROR_OUTOFMEMORY:
        return KILN_ENOMEM;
    case ERROR_BAD_EXE_FORMAT:
        return KILN_EFORMAT;
    default:
        return fallback;
    }
}

/* from_win for the calling thread's last error, with one line naming the
 * call that failed and the error: a spawn that fails says what and where. */
static int win_fail(const char *call, int fallback)
{
    DWORD err = GetLastError();
    KILN_ERROR("prep", "starting a worker: %s failed (Windows error %lu)", call,
               (unsigned long)err);
    return from_win(err, fallback);
}

static wchar_t *wide(const char *s)
{
    int n = MultiByteToWideChar(CP_UTF8, MB_ERR_INVALID_CHARS, s, -1, NULL, 0);
    wchar_t *w = n > 0 ? kiln__malloc((size_t)n * sizeof(*w)) : NULL;
    if (w && MultiByteToWideChar(CP_UTF8, MB_ERR_INVALID_CHARS, s, -1, w, n) != n) {
        kiln__free(w);
        w = NULL;
    }
    return w;
}

/* Appends one argument to `out` (NULL: counts only) quoted so that the C
 * runtime's parsing (CommandLineToArgvW's rules) gives it back unchanged:
 * backslashes double only before a quote or the closing quote. @return the
 * number of characters. */
static size_t quote_arg(const wchar_t *a, wchar_t *out)
{
    size_t n = 0;
#define PUT(ch) (out ? (void)(out[n] = (ch)) : (void)0, n++)
    if (*a && !wcspbrk(a, L" \t\n\v\"")) {
        for (; *a; a++)
            PUT(*a);
        return n;
    }
    PUT(L'"');
    for (;;) {
        size_t slashes = 0;
        while (*a == L'\\') {
            slashes++;
            a++;
        }
        if (!*a) {
            for (size_t i = 0; i < slashes * 2; i++)
                PUT(L'\\');
            break;
        }
        if (*a == L'"') {
            for (size_t i = 0; i < slashes * 2 + 1; i++)
                PUT(L'\\');
        } else {
            for (size_t i = 0; i < slashes; i++)
                PUT(L'\\');
        }
        PUT(*a);
        a++;
    }
    PUT(L'"');
#undef PUT
    return n;
}

/* The command line for argv, in UTF-16; NULL with *rc set on failure. */
static wchar_t *command_line(const char *const *argv, int *rc)
{
    size_t argc = 0;
    while (argv[argc])
        argc++;
    wchar_t **w = kiln__calloc(argc, sizeof(*w));
    wchar_t *line = NULL;
    *rc = w ? KILN_OK : KILN_ENOMEM;
    size_t len = 1;
    for (size_t i = 0; i < argc && *rc == KILN_OK; i++) {
        w[i] = wide(argv[i]);
        if (!w[i]) {
            KILN_ERROR("prep", "the worker's argument %s is not valid UTF-8", argv[i]);
            *rc = KILN_EINVAL;
        } else {
            len += quote_arg(w[i], NULL) + 1;
        }
    }
    if (*rc == KILN_OK && len > 32767) {
        KILN_ERROR("prep", "the worker's command line is too long (%zu characters)", len);
        *rc = KILN_ERANGE;
    }
    if (*rc == KILN_OK && !(line = kiln__malloc(len * sizeof(*line))))
        *rc = KILN_ENOMEM;
    if (line) {
        size_t at = 0;
        for (size_t i = 0; i < argc; i++) {
            if (i)
                line[at++] = L' ';
            at += quote_arg(w[i], line + at);
        }
        line[at] = L'\0';
    }
    for (size_t i = 0; w && i < argc; i++)
        kiln__free(w[i]);
    kiln__free(w);
    return line;
}

/* Makes the named pipe; *child is its client end, inheritable. */
static int make_channel(struct kiln__iso_proc *p, HANDLE *child)
{
    static atomic_uint serial;
    LARGE_INTEGER t;
    QueryPerformanceCounter(&t);
    char name8[128];
    snprintf(name8, sizeof(name8), "\\\\.\\pipe\\kiln-iso-%lu-%u-%lld",
             (unsigned long)GetCurrentProcessId(), atomic_fetch_add(&serial, 1u),
             (long long)t.QuadPart);
    wchar_t name[128];
    if (!MultiByteToWideChar(CP_UTF8, 0, name8, -1, name, 128))
        return KILN_EINVAL;
    p->pipe = CreateNamedPipeW(
        name, PIPE_ACCESS_DUPLEX | FILE_FLAG_OVERLAPPED | FILE_FLAG_FIRST_PIPE_INSTANCE,
        PIPE_TYPE_BYTE | PIPE_READMODE_BYTE | PIPE_WAIT | PIPE_REJECT_REMOTE_CLIENTS, 1, 65536,
        65536, 0, NULL);
    if (p->pipe == INVALID_HANDLE_VALUE) {
        p->pipe = NULL;
        return win_fail("CreateNamedPipeW", KILN_EIO);
    }
    /* The client's side as Windows documents it: a pipe that is busy (its
     * instance not yet listening; seen under wine with a loaded machine) is
     * waited for, with a bound, and opened again. */
    SECURITY_ATTRIBUTES sa = {sizeof(sa), NULL, TRUE};
    for (int tries = 0;; tries++) {
        *child = CreateFileW(name, GENERIC_READ | GENERIC_WRITE, 0, &sa, OPEN_EXISTING, 0, NULL);
        if (*child != INVALID_HANDLE_VALUE)
            break;
        *child = NULL;
        if (GetLastError() != ERROR_PIPE_BUSY || tries == 3 || !WaitNamedPipeW(name, 2000))
            return win_fail("opening the channel's client end (CreateFileW)", KILN_EIO);
    }
    /* The client is connected already; this only confirms it. */
    OVERLAPPED ov = {.hEvent = p->event};
    if (!ConnectNamedPipe(p->pipe, &ov)) {
        DWORD err = GetLastError();
        DWORD done = 0;
        if (err == ERROR_IO_PENDING && !GetOverlappedResult(p->pipe, &ov, &done, TRUE))
            err = GetLastError();
        else if (err == ERROR_IO_PENDING)
            err = ERROR_PIPE_CONNECTED;
        if (err != ERROR_PIPE_CONNECTED) {
            SetLastError(err);
            return win_fail("ConnectNamedPipe", KILN_EIO);
        }
    }
    return KILN_OK;
}

/* The process's job for its workers (the design comment), made once;
 * NULL when it could not be. */
static HANDLE the_job;
static INIT_ONCE job_once = INIT_ONCE_STATIC_INIT;

static BOOL CALLBACK make_job(PINIT_ONCE once, PVOID param, PVOID *ctx)
{
    (void)once;
    (void)param;
    (void)ctx;
    HANDLE job = CreateJobObjectW(NULL, NULL);
    JOBOBJECT_EXTENDED_LIMIT_INFORMATION lim;
    memset(&lim, 0, sizeof(lim));
    lim.BasicLimitInformation.LimitFlags = JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE;
    if (job &&
        !SetInformationJobObject(job, JobObjectExtendedLimitInformation, &lim, sizeof(lim))) {
        CloseHandle(job);
        job = NULL;
    }
    if (!job)
        KILN_INFO("prep", "no job object for the workers (error %lu): a worker may outlive kiln",
                  (unsigned long)GetLastError());
    the_job = job;
    return TRUE;
}

/* Puts a suspended child into the job. */
static void join_job(HANDLE process)
{
    InitOnceExecuteOnce(&job_once, make_job, NULL, NULL);
    if (the_job && !AssignProcessToJobObject(the_job, process))
        KILN_INFO("prep", "a worker is not in kiln's job (error %lu): it may outlive kiln",
                  (unsigned long)GetLastError());
}

/* CreateProcessW with `child` as stdin and stdout and `err` (may be NULL)
 * as stderr, inheriting those alone; in the job before it runs. */
static int create(struct kiln__iso_proc *p, const wchar_t *app, wchar_t *cmd, HANDLE child,
                  HANDLE err, bool background)
{
    HANDLE list[2] = {child, err};
    SIZE_T size = 0;
    InitializeProcThreadAttributeList(NULL, 1, 0, &size);
    LPPROC_THREAD_ATTRIBUTE_LIST attrs = size ? kiln__malloc(size) : NULL;
    if (!attrs)
        return KILN_ENOMEM;
    if (!InitializeProcThreadAttributeList(attrs, 1, 0, &size)) {
        kiln__free(attrs);
        return win_fail("InitializeProcThreadAttributeList", KILN_EIO);
    }
    int rc = KILN_OK;
    if (!UpdateProcThreadAttribute(attrs, 0, PROC_THREAD_ATTRIBUTE_HANDLE_LIST, list,
                                   (err ? 2 : 1) * sizeof(HANDLE), NULL, NULL))
        rc = win_fail("UpdateProcThreadAttribute", KILN_EIO);
    STARTUPINFOEXW si;
    memset(&si, 0, sizeof(si));
    si.StartupInfo.cb = sizeof(si);
    si.StartupInfo.dwFlags = STARTF_USESTDHANDLES;
    si.StartupInfo.hStdInput = child;
    si.StartupInfo.hStdOutput = child;
    si.StartupInfo.hStdError = err;
    si.lpAttributeList = attrs;
    PROCESS_INFORMATION pi;
    /* A thread's background mode is not inherited: the idle class is. A
     * process group of its own: the console's Ctrl-C is the parent's to act
     * on (a worker it ended mid-build would read as the driver's crash). */
    DWORD flags = EXTENDED_STARTUPINFO_PRESENT | CREATE_SUSPENDED | CREATE_NEW_PROCESS_GROUP |
                  (background ? IDLE_PRIORITY_CLASS : 0);
    if (rc == KILN_OK &&
        !CreateProcessW(app, cmd, NULL, NULL, TRUE, flags, NULL, NULL, &si.StartupInfo, &pi))
        rc = win_fail("CreateProcessW", KILN_EIO);
    DeleteProcThreadAttributeList(attrs);
    kiln__free(attrs);
    if (rc == KILN_OK) {
        join_job(pi.hProcess);
        if (ResumeThread(pi.hThread) == (DWORD)-1) {
            rc = win_fail("ResumeThread", KILN_EIO);
            TerminateProcess(pi.hProcess, KILLED_CODE);
            WaitForSingleObject(pi.hProcess, 5000);
            CloseHandle(pi.hThread);
            CloseHandle(pi.hProcess);
            return rc;
        }
        CloseHandle(pi.hThread);
        p->process = pi.hProcess;
        p->pid = pi.dwProcessId;
    }
    return rc;
}

int kiln__iso_spawn(const char *const *argv, bool background, struct kiln__iso_proc **out)
{
    *out = NULL;
    wchar_t *app = NULL;
    KILN_TRY(kiln__win_path(argv[0], &app));
    int rc = KILN_OK;
    wchar_t *cmd = command_line(argv, &rc);
    struct kiln__iso_proc *p = rc == KILN_OK ? kiln__calloc(1, sizeof(*p)) : NULL;
    if (rc == KILN_OK && !p)
        rc = KILN_ENOMEM;
    if (p && !(p->event = CreateEventW(NULL, TRUE, FALSE, NULL)))
        rc = win_fail("CreateEventW", KILN_EIO);
    HANDLE child = NULL, err = NULL;
    if (rc == KILN_OK)
        rc = make_channel(p, &child);
    if (rc == KILN_OK) {
        /* An inheritable copy of stderr for the worker's log lines; none
         * (its log lines lost, the run unchanged) where there is no stderr. */
        HANDLE e = GetStdHandle(STD_ERROR_HANDLE);
        if (e && e != INVALID_HANDLE_VALUE &&
            !DuplicateHandle(GetCurrentProcess(), e, GetCurrentProcess(), &err, 0, TRUE,
                             DUPLICATE_SAME_ACCESS))
            err = NULL;
        rc = create(p, app, cmd, child, err, background);
    }
    if (child)
        CloseHandle(child);
    if (err)
        CloseHandle(err);
    kiln__free(cmd);
    kiln__free(app);
    if (rc < 0) {
        if (p && p->pipe)
            CloseHandle(p->pipe);
        if (p && p->event)
            CloseHandle(p->event);
        kiln__free(p);
        return rc;
    }
    *out = p;
    return KILN_OK;
}

long kiln__iso_pid(const struct kiln__iso_proc *p)
{
    return p ? (long)p->pid : -1;
}

/* Waits for a pending call until the deadline or the process's exit;
 * cancels it then. @return 0 with *done (possibly 0 after a cancel that
 * raced a completion: the caller goes on), KILN_ETIMEDOUT, KILN_ECRASH, or
 * an I/O error. */
static int finish(struct kiln__iso_proc *p, OVERLAPPED *ov, DWORD *done, uint64_t deadline,
                  int io_error)
{
    HANDLE both[2] = {ov->hEvent, p->process};
    int why = KILN_ETIMEDOUT;
    for (;;) {
        uint64_t now = kiln_now_ns();
        DWORD ms = 0;
        if (now < deadline) {
            uint64_t left = (deadline - now + 999999u) / 1000000u;
            ms = left > 60000 ? 60000 : (DWORD)left;
        }
        DWORD w = WaitForMultipleObjects(2, both, FALSE, ms);
        if (w == WAIT_OBJECT_0)
            break;
        if (w == WAIT_TIMEOUT && ms && kiln_now_ns() < deadline)
            continue;
        if (w == WAIT_OBJECT_0 + 1)
            why = KILN_ECRASH;
        else if (w != WAIT_TIMEOUT)
            why = from_win(GetLastError(), io_error);
        /* The call must be over before its buffer is given back. */
        CancelIoEx(p->pipe, ov);
        *done = 0;
        if (GetOverlappedResult(p->pipe, ov, done, TRUE) || *done)
            return *done ? KILN_OK : why;
        DWORD err = GetLastError();
        return err == ERROR_OPERATION_ABORTED || err == ERROR_BROKEN_PIPE || err == ERROR_NO_DATA ||
                       err == ERROR_PIPE_NOT_CONNECTED
                   ? why
                   : from_win(err, io_error);
    }
    if (GetOverlappedResult(p->pipe, ov, done, FALSE))
        return KILN_OK;
    DWORD err = GetLastError();
    return err == ERROR_BROKEN_PIPE || err == ERROR_NO_DATA || err == ERROR_PIPE_NOT_CONNECTED
               ? KILN_ECRASH
               : from_win(err, io_error);
}

/* Moves exactly n bytes in one direction by the deadline. */
static int transfer(struct kiln__iso_proc *p, bool out, char *c, size_t n, uint64_t deadline)
{
    int io_error = out ? KILN_EIO_WRITE : KILN_EIO_READ;
    while (n) {
        DWORD want = n > CHUNK ? CHUNK : (DWORD)n, done = 0;
        OVERLAPPED ov = {.hEvent = p->event};
        BOOL ok =
            out ? WriteFile(p->pipe, c, want, NULL, &ov) : ReadFile(p->pipe, c, want, NULL, &ov);
        DWORD err = ok ? ERROR_IO_PENDING : GetLastError();
        int rc;
        if (err == ERROR_IO_PENDING)
            rc = finish(p, &ov, &done, deadline, io_error);
        else if (err == ERROR_BROKEN_PIPE || err == ERROR_NO_DATA ||
                 err == ERROR_PIPE_NOT_CONNECTED)
            rc = KILN_ECRASH;
        else
            rc = from_win(err, io_error);
        if (rc < 0)
            return rc;
        c += done;
        n -= done;
        if (!done && kiln_now_ns() >= deadline)
            return KILN_ETIMEDOUT;
    }
    return KILN_OK;
}

int kiln__iso_send(struct kiln__iso_proc *p, const void *buf, size_t n, uint64_t deadline)
{
    char *c;
    memcpy(&c, &buf, sizeof(c)); /* WriteFile does not write it */
    return transfer(p, true, c, n, deadline);
}

int kiln__iso_recv(struct kiln__iso_proc *p, void *buf, size_t n, uint64_t deadline)
{
    return transfer(p, false, buf, n, deadline);
}

/* A name for the exception codes a crashed driver most often ends with. */
static const char *exception_name(DWORD code)
{
    switch (code) {
    case 0xC0000005u:
        return "access violation";
    case 0xC00000FDu:
        return "stack overflow";
    case 0xC000001Du:
        return "illegal instruction";
    case 0xC0000094u:
        return "integer division by zero";
    case 0xC0000409u:
        return "fail fast";
    case 0xC0000374u:
        return "heap corruption";
    case 0xC0000006u:
        return "in-page error";
    case 0x80000003u:
        return "breakpoint";
    default:
        return "an exception";
    }
}

void kiln__iso_end(struct kiln__iso_proc *p, unsigned grace_ms, char *how, size_t cap)
{
    if (how && cap)
        how[0] = '\0';
    if (!p)
        return;
    /* Closing our end first tells a worker still reading that we are done. */
    CloseHandle(p->pipe);
    CloseHandle(p->event);
    DWORD w = WaitForSingleObject(p->process, grace_ms);
    bool killed = false;
    if (w != WAIT_OBJECT_0) {
        TerminateProcess(p->process, KILLED_CODE);
        killed = true;
        w = WaitForSingleObject(p->process, 10000);
    }
    DWORD code = 0;
    bool known = w == WAIT_OBJECT_0 && GetExitCodeProcess(p->process, &code);
    if (how && cap) {
        if (!known)
            snprintf(how, cap, "could not be reaped");
        else if (killed && code == KILLED_CODE)
            snprintf(how, cap, "killed");
        else if ((code & 0xC0000000u) == 0xC0000000u || code == 0x80000003u)
            snprintf(how, cap, "died with exception 0x%08lX (%s)", (unsigned long)code,
                     exception_name(code));
        else
            snprintf(how, cap, "exited with code %lu", (unsigned long)code);
    }
    CloseHandle(p->process);
    kiln__free(p);
}

static HANDLE os_handle(int fd)
{
    intptr_t h = _get_osfhandle(fd);
    return h == -1 || h == -2 || h == 0 ? NULL : (HANDLE)h;
}

int kiln__iso_fd_read(int fd, void *buf, size_t n)
{
    HANDLE h = os_handle(fd);
    if (!h)
        return KILN_EIO_READ;
    char *c = buf;
    size_t got = 0;
    while (got < n) {
        DWORD want = n - got > CHUNK ? CHUNK : (DWORD)(n - got), r = 0;
        if (!ReadFile(h, c + got, want, &r, NULL)) {
            DWORD err = GetLastError();
            if (err != ERROR_BROKEN_PIPE && err != ERROR_HANDLE_EOF)
                return from_win(err, KILN_EIO_READ);
            r = 0;
        }
        if (r == 0) /* the end: the parent closed its end, or a file ended */
            return got ? KILN_EIO_SHORTREAD : KILN_ECANCELED;
        got += r;
    }
    return KILN_OK;
}

int kiln__iso_fd_write(int fd, const void *buf, size_t n)
{
    HANDLE h = os_handle(fd);
    if (!h)
        return KILN_EIO_WRITE;
    const char *c = buf;
    while (n) {
        DWORD want = n > CHUNK ? CHUNK : (DWORD)n, w = 0;
        if (!WriteFile(h, c, want, &w, NULL)) {
            DWORD err = GetLastError();
            if (err == ERROR_BROKEN_PIPE || err == ERROR_NO_DATA)
                return KILN_ECANCELED;
            return from_win(err, KILN_EIO_WRITE);
        }
        c += w;
        n -= w;
    }
    return KILN_OK;
}

void kiln__iso_worker_init(void)
{
    /* A crash ends the worker at once (the parent names its exception),
     * with no error box waiting for a click that never comes. */
    SetErrorMode(SEM_FAILCRITICALERRORS | SEM_NOGPFAULTERRORBOX | SEM_NOOPENFILEERRORBOX);
    /* Started in the idle class by a run in background mode: lower its
     * I/O and memory priority too, as the pool's threads do theirs. */
    if (GetPriorityClass(GetCurrentProcess()) == IDLE_PRIORITY_CLASS)
        SetPriorityClass(GetCurrentProcess(), PROCESS_MODE_BACKGROUND_BEGIN);
}

void kiln__iso_sleep_forever(void)
{
    for (;;)
        Sleep(INFINITE);
}

void kiln__iso_crash_now(void)
{
    SetErrorMode(SEM_FAILCRITICALERRORS | SEM_NOGPFAULTERRORBOX);
    RaiseException(EXCEPTION_ACCESS_VIOLATION, EXCEPTION_NONCONTINUABLE, 0, NULL);
    abort(); /* not reached */
}
