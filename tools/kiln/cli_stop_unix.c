/*
 * cli_stop_unix.c - the signals and the watchdog of cli_stop.c on POSIX
 * systems.
 *
 * Invariants and why they hold:
 *
 * - The handler is async-signal-safe: cli__stop_signal (atomics, the
 *   clock), sem_post, signal and raise are all a handler may call. A second
 *   request resets the default action and raises the signal again, so the
 *   process ends as the signal's default says (killed by SIGINT/SIGTERM),
 *   as before the watchdog.
 *
 * - The watchdog is a thread of its own, blocked on a semaphore until the
 *   first request and blind to SIGINT and SIGTERM (its mask), so it runs
 *   whatever the other threads are stuck in; it writes its line with
 *   write(2) (no stdio lock a stuck thread could hold) and ends the
 *   process with _exit (no atexit handler, no static destructor that could
 *   wait on a lock: glslang's, for one).
 */
#include "cli.h"
#include "cli_stop_internal.h"

#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static sem_t wake;

static void on_signal(int sig)
{
    int saved = errno;
    switch (cli__stop_signal()) {
    case CLI__STOP_FIRST:
        sem_post(&wake);
        break;
    case CLI__STOP_AGAIN:
        signal(sig, SIG_DFL); /* a second request ends the process at once */
        raise(sig);
        break;
    case CLI__STOP_ECHO:
        break;
    }
    errno = saved;
}

static void *watchdog(void *arg)
{
    (void)arg;
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    while (sem_wait(&wake) != 0 && errno == EINTR)
        ;
    uint64_t ms = cli__stop_deadline_ms();
    struct timespec ts = {.tv_sec = (time_t)(ms / 1000u), .tv_nsec = (long)(ms % 1000u) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
    const char *line = cli__stop_line();
    size_t n = strlen(line);
    while (n) {
        ssize_t w = write(STDERR_FILENO, line, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            break;
        line += w;
        n -= (size_t)w;
    }
    _exit(cli_stop_by_signal() ? KILN_EXIT_SIGNAL : KILN_EXIT_FAILED);
}

void cli__stop_platform_install(void)
{
    if (sem_init(&wake, 0, 0) != 0)
        return; /* no watchdog: the signals keep their default action */
    pthread_t t;
    if (pthread_create(&t, NULL, watchdog, NULL) != 0)
        return;
    pthread_detach(t);
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}

void cli__stop_arm(void)
{
    sem_post(&wake);
}
