/*
 * isolate_unix.c - isolation's processes and channel on POSIX systems.
 *
 * Invariants and why they hold:
 *
 * - The child inherits its channel and stderr, nothing else. The channel
 *   is a socketpair made close-on-exec; posix_spawn's file actions dup the
 *   child's end onto its stdin and stdout (which clears close-on-exec on
 *   those two only) and, where glibc has it, close every descriptor above
 *   2, so a cache file or lock the parent holds never outlives it in a
 *   worker.
 *
 * - A signal to kiln's process group (a terminal's Ctrl-C, `timeout`)
 *   reaches the parent only: each worker leads a group of its own, so the
 *   parent stops the run as it decides, and no worker dies of the user's
 *   signal mid-build, which would read as the driver's crash.
 *
 * - A dead worker never kills the parent: the parent's writes use
 *   send(MSG_NOSIGNAL), so a closed channel is EPIPE (KILN_ECRASH), not
 *   SIGPIPE.
 *
 * - A worker dies with its parent (Linux): it asks for SIGKILL when its
 *   parent goes (PR_SET_PDEATHSIG, kept across exec) first thing, then
 *   compares getppid() with the pid the parent put in its environment
 *   (KILN_WORKER_PARENT) and exits when they differ: a parent that died
 *   before the prctl left an orphan the signal would never reach. The
 *   signal comes when the thread that started the child ends, so the
 *   parent starts every worker from a thread that outlives them
 *   (isolate.c, the spawner). A hung driver cannot block it: SIGKILL is
 *   the kernel's.
 *
 * - No wait is unbounded: the parent's end is non-blocking and every send
 *   and receive polls with the time left to its deadline; a child is reaped
 *   after it exited or after SIGKILL, never with a blocking wait on a live
 *   process.
 */
#include "kiln_internal.h"
#include "isolate_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif
#include <time.h>
#include <unistd.h>

extern char **environ;

struct kiln__iso_proc {
    pid_t pid;
    int fd; /* the parent's end of the channel */
};

/* The variable that tells a worker its parent's pid (kiln__iso_worker_init). */
#define PARENT_VAR "KILN_WORKER_PARENT="

/* environ with PARENT_VAR set to this process's pid, in one malloc'd block
 * (free it): the child gets it, and the parent's own environment is never
 * changed (setenv is not thread-safe). */
static char **child_env(void)
{
    size_t n = 0, bytes = 0;
    for (char **e = environ; *e; e++, n++)
        bytes += strlen(*e) + 1;
    char **env = kiln__malloc((n + 2) * sizeof(char *) + bytes + sizeof(PARENT_VAR) + 24);
    if (!env)
        return NULL;
    char *text = (char *)(env + n + 2);
    size_t k = 0;
    for (char **e = environ; *e; e++) {
        if (strncmp(*e, PARENT_VAR, sizeof(PARENT_VAR) - 1) == 0)
            continue; /* a worker's own worker gets its own parent */
        size_t len = strlen(*e) + 1;
        memcpy(text, *e, len);
        env[k++] = text;
        text += len;
    }
    snprintf(text, sizeof(PARENT_VAR) + 24, PARENT_VAR "%ld", (long)getpid());
    env[k++] = text;
    env[k] = NULL;
    return env;
}

int kiln__iso_spawn(const char *const *argv, bool background, struct kiln__iso_proc **out)
{
    (void)background; /* the child inherits the pool thread's nice, policy and I/O class */
    *out = NULL;
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
        return kiln_error_from_errno(errno, KILN_EIO);
    struct kiln__iso_proc *p = kiln__malloc(sizeof(*p));
    char **env = p ? child_env() : NULL;
    posix_spawn_file_actions_t fa;
    int rc = env ? posix_spawn_file_actions_init(&fa) : ENOMEM;
    if (rc == 0) {
        posix_spawn_file_actions_adddup2(&fa, sv[1], STDIN_FILENO);
        posix_spawn_file_actions_adddup2(&fa, sv[1], STDOUT_FILENO);
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 34))
        posix_spawn_file_actions_addclosefrom_np(&fa, STDERR_FILENO + 1);
#endif
        /* posix_spawn takes argv without const; it does not write it. */
        char *const *av;
        memcpy(&av, &argv, sizeof(av));
        /* A process group of its own: a terminal's Ctrl-C (or `timeout`'s
         * signal to the group) is the parent's to act on; a worker it
         * killed mid-build would be recorded as the driver's crash. */
        posix_spawnattr_t at;
        posix_spawnattr_init(&at);
        posix_spawnattr_setflags(&at, POSIX_SPAWN_SETPGROUP);
        posix_spawnattr_setpgroup(&at, 0);
        pid_t pid;
        rc = posix_spawn(&pid, argv[0], &fa, &at, av, env);
        posix_spawnattr_destroy(&at);
        posix_spawn_file_actions_destroy(&fa);
        if (rc == 0)
            p->pid = pid;
    }
    kiln__free(env);
    close(sv[1]);
    if (rc != 0) {
        close(sv[0]);
        kiln__free(p);
        return kiln_error_from_errno(rc, KILN_EIO);
    }
    int fl = fcntl(sv[0], F_GETFL);
    if (fl < 0 || fcntl(sv[0], F_SETFL, fl | O_NONBLOCK) != 0) {
        int err = kiln_error_from_errno(errno, KILN_EIO);
        p->fd = sv[0];
        kiln__iso_end(p, 0, NULL, 0);
        return err;
    }
    p->fd = sv[0];
    *out = p;
    return KILN_OK;
}

long kiln__iso_pid(const struct kiln__iso_proc *p)
{
    return p ? (long)p->pid : -1;
}

/* Waits for `events` on the channel until the deadline. @return 0 or
 * KILN_ETIMEDOUT. */
static int wait_for(const struct kiln__iso_proc *p, short events, uint64_t deadline)
{
    for (;;) {
        uint64_t now = kiln_now_ns();
        if (now >= deadline)
            return KILN_ETIMEDOUT;
        uint64_t ms = (deadline - now + 999999u) / 1000000u;
        struct pollfd pfd = {.fd = p->fd, .events = events};
        int r = poll(&pfd, 1, ms > 60000 ? 60000 : (int)ms);
        if (r > 0)
            return KILN_OK; /* readable, writable, or hung up: the call says which */
        if (r < 0 && errno != EINTR)
            return kiln_error_from_errno(errno, KILN_EIO);
    }
}

int kiln__iso_send(struct kiln__iso_proc *p, const void *buf, size_t n, uint64_t deadline)
{
    const char *c = buf;
    while (n) {
        ssize_t w = send(p->fd, c, n, MSG_NOSIGNAL);
        if (w > 0) {
            c += w;
            n -= (size_t)w;
            continue;
        }
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            KILN_TRY(wait_for(p, POLLOUT, deadline));
            continue;
        }
        if (w < 0 && (errno == EPIPE || errno == ECONNRESET))
            return KILN_ECRASH;
        return kiln_error_from_errno(errno, KILN_EIO_WRITE);
    }
    return KILN_OK;
}

int kiln__iso_recv(struct kiln__iso_proc *p, void *buf, size_t n, uint64_t deadline)
{
    char *c = buf;
    while (n) {
        ssize_t r = recv(p->fd, c, n, 0);
        if (r > 0) {
            c += r;
            n -= (size_t)r;
            continue;
        }
        if (r == 0)
            return KILN_ECRASH; /* the worker's end closed: it died or exited */
        if (errno == EINTR)
            continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) {
            KILN_TRY(wait_for(p, POLLIN, deadline));
            continue;
        }
        if (errno == ECONNRESET)
            return KILN_ECRASH;
        return kiln_error_from_errno(errno, KILN_EIO_READ);
    }
    return KILN_OK;
}

static const char *signal_name(int sig)
{
    switch (sig) {
    case SIGSEGV:
        return "SIGSEGV";
    case SIGABRT:
        return "SIGABRT";
    case SIGBUS:
        return "SIGBUS";
    case SIGILL:
        return "SIGILL";
    case SIGFPE:
        return "SIGFPE";
    case SIGKILL:
        return "SIGKILL";
    case SIGTERM:
        return "SIGTERM";
    default:
        return "a signal";
    }
}

void kiln__iso_end(struct kiln__iso_proc *p, unsigned grace_ms, char *how, size_t cap)
{
    if (how && cap)
        how[0] = '\0';
    if (!p)
        return;
    /* Closing our end first tells a worker still reading that we are done. */
    close(p->fd);
    int status = 0;
    pid_t r = 0;
    uint64_t deadline = kiln_now_ns() + (uint64_t)grace_ms * 1000000u;
    for (;;) {
        r = waitpid(p->pid, &status, WNOHANG);
        if (r != 0 || kiln_now_ns() >= deadline)
            break;
        struct timespec ts = {0, 2000000}; /* 2 ms */
        nanosleep(&ts, NULL);
    }
    bool killed = false;
    if (r == 0) {
        kill(p->pid, SIGKILL);
        killed = true;
        while ((r = waitpid(p->pid, &status, 0)) < 0 && errno == EINTR)
            ;
    }
    if (how && cap) {
        if (r < 0)
            snprintf(how, cap, "could not be reaped");
        else if (WIFSIGNALED(status) && !(killed && WTERMSIG(status) == SIGKILL))
            snprintf(how, cap, "killed by signal %d (%s)", WTERMSIG(status),
                     signal_name(WTERMSIG(status)));
        else if (WIFSIGNALED(status))
            snprintf(how, cap, "killed");
        else
            snprintf(how, cap, "exited with code %d", WEXITSTATUS(status));
    }
    kiln__free(p);
}

int kiln__iso_fd_read(int fd, void *buf, size_t n)
{
    char *c = buf;
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, c + got, n - got);
        if (r > 0) {
            got += (size_t)r;
            continue;
        }
        if (r == 0)
            return got ? KILN_EIO_SHORTREAD : KILN_ECANCELED;
        if (errno != EINTR)
            return kiln_error_from_errno(errno, KILN_EIO_READ);
    }
    return KILN_OK;
}

int kiln__iso_fd_write(int fd, const void *buf, size_t n)
{
    const char *c = buf;
    while (n) {
        ssize_t w = write(fd, c, n);
        if (w > 0) {
            c += w;
            n -= (size_t)w;
            continue;
        }
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && errno == EPIPE)
            return KILN_ECANCELED;
        return kiln_error_from_errno(errno, KILN_EIO_WRITE);
    }
    return KILN_OK;
}

void kiln__iso_worker_init(void)
{
#ifdef __linux__
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0)
        KILN_WARN("prep", "worker: cannot ask to die with the parent: %s",
                  kiln_strerror(kiln_error_from_errno(errno, KILN_EIO)));
    /* After the prctl: a parent gone before it left this process an orphan
     * that no signal will end. A worker started otherwise (no variable)
     * keeps the signal alone. */
    const char *want = getenv("KILN_WORKER_PARENT");
    if (want && *want && strtol(want, NULL, 10) != (long)getppid())
        _exit(1);
#endif
}

void kiln__iso_sleep_forever(void)
{
    for (;;)
        pause();
}

void kiln__iso_crash_now(void)
{
    signal(SIGSEGV, SIG_DFL);
    raise(SIGSEGV);
    abort(); /* not reached */
}
