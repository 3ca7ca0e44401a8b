/*
 * isolate_win.c - isolation's processes and channel on Windows: not
 * supported yet. Every call answers KILN_ENOTSUP, so kiln_prepare with
 * isolation fails each pipeline with one error line per worker slot
 * ("cannot start the worker ...: not supported here") and the run goes
 * on, and kiln_isolate_worker_main returns KILN_ENOTSUP at once.
 * CreateProcess with inheritable pipe handles for the child only and a
 * reader thread per worker is the planned implementation (docs/prep.md).
 */
#include "kiln_internal.h"
#include "isolate_internal.h"

#include <windows.h>

int kiln__iso_spawn(const char *const *argv, struct kiln__iso_proc **out)
{
    (void)argv;
    *out = NULL;
    return KILN_ENOTSUP;
}

long kiln__iso_pid(const struct kiln__iso_proc *p)
{
    (void)p;
    return -1;
}

int kiln__iso_send(struct kiln__iso_proc *p, const void *buf, size_t n, uint64_t deadline_ns)
{
    (void)p, (void)buf, (void)n, (void)deadline_ns;
    return KILN_ENOTSUP;
}

int kiln__iso_recv(struct kiln__iso_proc *p, void *buf, size_t n, uint64_t deadline_ns)
{
    (void)p, (void)buf, (void)n, (void)deadline_ns;
    return KILN_ENOTSUP;
}

void kiln__iso_end(struct kiln__iso_proc *p, unsigned grace_ms, char *how, size_t cap)
{
    (void)p, (void)grace_ms;
    if (how && cap)
        how[0] = '\0';
}

int kiln__iso_fd_read(int fd, void *buf, size_t n)
{
    (void)fd, (void)buf, (void)n;
    return KILN_ENOTSUP;
}

int kiln__iso_fd_write(int fd, const void *buf, size_t n)
{
    (void)fd, (void)buf, (void)n;
    return KILN_ENOTSUP;
}

void kiln__iso_sleep_forever(void)
{
    for (;;)
        Sleep(INFINITE);
}
