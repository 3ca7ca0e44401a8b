/*
 * cli_stop.c - a command stopped by a signal (cli.h, "stopping on a
 * signal"): the portable part, which tells a first request from its echo
 * and from a second one, and the deadline; the platform files catch the
 * signals and run the watchdog.
 *
 * Invariants and why they hold:
 *
 * - A handler only touches lock-free atomics and the monotonic clock, so
 *   it is safe in a POSIX signal handler, whichever thread it interrupts.
 *
 * - The deadline starts once, at the first request (a signal or
 *   cli_stop_request), and nothing resets it: a command that stops in time
 *   never meets the watchdog, and one stuck in a library call (a driver, a
 *   shaderc waiting on a lock it will never get) is ended by it, with one
 *   line, within the deadline. Ending it there is safe because the cache is
 *   crash-safe by design (docs/reliability.md): a record is either synced
 *   whole or redone by the next run.
 */
#include "cli.h"
#include "cli_stop_internal.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static atomic_int stop_flag;
static atomic_int by_signal;      /* the first request was a signal */
static _Atomic uint64_t first_ns; /* 0: no request yet */
static uint64_t deadline_ms = CLI_STOP_DEADLINE_MS;
static char line[256];

_Static_assert(ATOMIC_LLONG_LOCK_FREE == 2, "a signal handler needs a lock-free 64-bit atomic");

enum cli__stop_kind cli__stop_signal(void)
{
    uint64_t now = kiln_now_ns() | 1u; /* never 0, which means "none yet" */
    uint64_t first = 0;
    if (atomic_compare_exchange_strong(&first_ns, &first, now)) {
        atomic_store(&by_signal, 1);
        atomic_store(&stop_flag, 1);
        return CLI__STOP_FIRST;
    }
    return now - first <= (uint64_t)CLI_STOP_ECHO_MS * 1000000u ? CLI__STOP_ECHO : CLI__STOP_AGAIN;
}

uint64_t cli__stop_deadline_ms(void)
{
    return deadline_ms;
}

const char *cli__stop_line(void)
{
    return line;
}

void cli_stop_install(const char *name)
{
    /* For tests: a shorter deadline; a value that does not parse is ignored. */
    const char *e = getenv("KILN_STOP_DEADLINE_MS");
    char *end = NULL;
    unsigned long long v = e && *e >= '0' && *e <= '9' ? strtoull(e, &end, 10) : 0;
    if (end && *end == '\0' && v > 0 && v <= 3600000u)
        deadline_ms = v;
    snprintf(line, sizeof(line),
             "%s: did not stop within %.1f s of the request (a library call does not return): "
             "ended now; the cache is crash-safe: run it again to resume\n",
             name, (double)deadline_ms / 1000.0);
    cli__stop_platform_install();
}

bool cli_stop_asked(void *user)
{
    (void)user;
    return atomic_load_explicit(&stop_flag, memory_order_relaxed) != 0;
}

void cli_stop_request(void)
{
    uint64_t first = 0;
    atomic_store(&stop_flag, 1);
    if (atomic_compare_exchange_strong(&first_ns, &first, kiln_now_ns() | 1u))
        cli__stop_arm();
}

bool cli_stop_by_signal(void)
{
    return atomic_load(&by_signal) != 0;
}
