/*
 * kt_spawn.c - see kt_spawn.h.
 *
 * stdout comes back through a pipe that is read while the child runs, so
 * a child that writes more than the pipe holds never blocks on it. The
 * run is over when the child is reaped and the pipe has nothing more to
 * give: a process the child started that still holds the pipe (an
 * isolated worker on its way out) cannot keep the test waiting. With a
 * bound, the wait polls, so a child that hangs is killed and the case
 * fails instead of hanging.
 */
#include "kt_spawn.h"

#include "kiln_test.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#define MAX_ARGS 64

/* This process's environment for the child, as kt_spawn.h says. The
 * strings are borrowed, except `fault_env` (the caller's buffer). */
static char **child_env(const struct kt_spawn *r, char *fault_env, size_t cap)
{
    size_t ne = 0;
    while (environ[ne])
        ne++;
    char **env = calloc(ne + 4, sizeof(*env));
    if (!env)
        return NULL;
    size_t k = 0;
    for (size_t i = 0; i < ne; i++)
        if ((r->leak_checks || strncmp(environ[i], "ASAN_OPTIONS=", 13) != 0) &&
            strncmp(environ[i], "KILN_TEST_FAULT=", 16) != 0)
            env[k++] = environ[i];
    static char asan[] = "ASAN_OPTIONS=detect_leaks=0:abort_on_error=1";
    if (!r->leak_checks)
        env[k++] = asan;
    if (r->fault) {
        snprintf(fault_env, cap, "KILN_TEST_FAULT=%s", r->fault);
        env[k++] = fault_env;
    }
    if (r->env)
        env[k++] = (char *)(uintptr_t)r->env; /* posix_spawn does not write it */
    env[k] = NULL;
    return env;
}

/* Reads what the pipe has now into r->out (the rest is dropped once it is
 * full). @return false at its end. */
static bool read_some(int fd, struct kt_spawn *r)
{
    char scratch[4096];
    size_t room = r->out_cap - 1 - r->out_len;
    char *to = room ? r->out + r->out_len : scratch;
    ssize_t n = read(fd, to, room ? room : sizeof(scratch));
    if (n < 0 && errno == EINTR)
        return true;
    if (n <= 0)
        return false;
    if (room)
        r->out_len += (size_t)n;
    return true;
}

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

int kt_spawn(const char *exe, const char *const *args, struct kt_spawn *r)
{
    const char *argv[MAX_ARGS];
    size_t n = 0;
    argv[n++] = exe;
    for (size_t i = 0; args[i] && n < MAX_ARGS - 1; i++)
        argv[n++] = args[i];
    argv[n] = NULL;
    r->out_len = 0;
    r->out[0] = '\0';
    r->status = 0;

    char fault_env[256];
    char **env = child_env(r, fault_env, sizeof(fault_env));
    int fds[2];
    if (!env || pipe(fds) != 0) {
        free(env);
        kt_fail(__FILE__, __LINE__, "cannot run %s: no memory or no pipe", exe);
        return -1;
    }
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    if (r->stdin_path)
        posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, r->stdin_path, O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, fds[1], STDOUT_FILENO);
    if (r->stderr_path)
        posix_spawn_file_actions_addopen(&fa, STDERR_FILENO, r->stderr_path,
                                         O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addclose(&fa, fds[0]);
    posix_spawn_file_actions_addclose(&fa, fds[1]);
    /* A group of its own, which a case signals as a terminal would. */
    posix_spawnattr_t at;
    posix_spawnattr_init(&at);
    if (r->own_group) {
        posix_spawnattr_setflags(&at, POSIX_SPAWN_SETPGROUP);
        posix_spawnattr_setpgroup(&at, 0);
    }
    pid_t pid;
    int rc = posix_spawn(&pid, exe, &fa, &at, (char *const *)(uintptr_t)argv, env);
    posix_spawnattr_destroy(&at);
    posix_spawn_file_actions_destroy(&fa);
    free(env);
    close(fds[1]);
    if (rc != 0) {
        close(fds[0]);
        kt_fail(__FILE__, __LINE__, "cannot run %s: %s", exe, strerror(rc));
        return -1;
    }

    uint64_t start = now_ms();
    bool open = true;
    int status = 0;
    for (;;) {
        struct pollfd p = {.fd = fds[0], .events = POLLIN};
        if (open) {
            int ready = poll(&p, 1, 10);
            if (ready > 0)
                open = read_some(fds[0], r);
            else if (ready < 0 && errno != EINTR)
                open = false;
        } else {
            struct timespec ts = {0, 10000000};
            nanosleep(&ts, NULL);
        }
        pid_t w = waitpid(pid, &status, WNOHANG);
        if (w == 0 && r->during)
            r->during(r->during_user, (int)pid);
        if (w == pid || (w < 0 && errno != EINTR)) {
            /* All it wrote is in the pipe now; what comes later is not its. */
            while (open && poll(&p, 1, 0) > 0)
                open = read_some(fds[0], r);
            break;
        }
        if (r->limit_s && now_ms() - start > r->limit_s * 1000ull) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            close(fds[0]);
            kt_fail(__FILE__, __LINE__, "%s did not end within %u s: killed", exe, r->limit_s);
            return -1;
        }
    }
    close(fds[0]);
    r->out[r->out_len] = '\0';
    r->status = status;
    return 0;
}

int kt_spawn_exit(const char *exe, const char *const *args, struct kt_spawn *r)
{
    if (kt_spawn(exe, args, r) < 0)
        return -1;
    if (!WIFEXITED(r->status)) {
        kt_fail(__FILE__, __LINE__, "%s died (signal %d)", exe, WTERMSIG(r->status));
        return -1;
    }
    return WEXITSTATUS(r->status);
}
