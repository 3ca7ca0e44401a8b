/*
 * cli_stop_internal.h - what cli_stop.c shares with the platform files
 * (cli_stop_unix.c, cli_stop_win.c) that catch the signals and run the
 * watchdog. Private to tools/kiln.
 */
#ifndef KILN_CLI_STOP_INTERNAL_H
#define KILN_CLI_STOP_INTERNAL_H

#include <stdint.h>

/* What a signal means, given the ones before it (cli__stop_signal). */
enum cli__stop_kind {
    CLI__STOP_FIRST, /* the first request: stop, and start the deadline */
    CLI__STOP_ECHO,  /* the same request again (within CLI_STOP_ECHO_MS) */
    CLI__STOP_AGAIN, /* a second request: end now */
};

/* Notes a signal. Async-signal-safe (lock-free atomics, kiln_now_ns). */
enum cli__stop_kind cli__stop_signal(void);

/* The deadline's length in ms ($KILN_STOP_DEADLINE_MS, read at install). */
uint64_t cli__stop_deadline_ms(void);

/* The watchdog's line, made at install (with its newline). */
const char *cli__stop_line(void);

/* The platform's part: installs the handlers and starts the watchdog
 * thread; cli__stop_arm wakes it (its deadline starts). The watchdog
 * writes cli__stop_line() to stderr and ends the process with exit code 1
 * once cli__stop_deadline_ms() have passed. */
void cli__stop_platform_install(void);
void cli__stop_arm(void);

#endif /* KILN_CLI_STOP_INTERNAL_H */
