/*
 * log.c - kiln's log: levels, one line per event, stderr or a caller's sink.
 *
 * The level is an atomic so that the check in KILN_LOG costs one relaxed
 * load and needs no lock. Each event is formatted into one buffer and
 * written with one call, so lines from several threads never interleave.
 * Warnings and errors are formatted even when the level hides them: the
 * line is also the detail of the thread's error text (errmsg.c).
 */
#include "kiln_internal.h"

#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

static atomic_int log_level = KILN_LOG_WARN;
static kiln_log_fn log_sink;
static void *log_sink_user;

void kiln_log_set_level(enum kiln_log_level level)
{
    atomic_store_explicit(&log_level, (int)level, memory_order_relaxed);
}

enum kiln_log_level kiln_log_get_level(void)
{
    return (enum kiln_log_level)atomic_load_explicit(&log_level, memory_order_relaxed);
}

void kiln_log_set_sink(kiln_log_fn fn, void *user)
{
    log_sink = fn;
    log_sink_user = user;
}

bool kiln__log_enabled(enum kiln_log_level level)
{
    return (int)level <= atomic_load_explicit(&log_level, memory_order_relaxed);
}

static const char *level_name(enum kiln_log_level level)
{
    static const char *const names[] = {"error", "warning", "info", "debug"};
    return (unsigned)level < KILN_ARRAY_LEN(names) ? names[level] : "log";
}

/* Writes one formatted line to the sink or stderr. */
static void emit(enum kiln_log_level level, const char *module, char *line)
{
    /* One event is one line: fold any newline the message carries. */
    for (char *p = line; (p = strchr(p, '\n')) != NULL;)
        *p = ' ';

    if (log_sink) {
        log_sink(log_sink_user, level, module, line);
        return;
    }
    char out[1200];
    int m = snprintf(out, sizeof(out), "kiln: %s: %s: %s\n", module, level_name(level), line);
    if (m > 0)
        fwrite(out, 1, (size_t)KILN_MIN((size_t)m, sizeof(out) - 1), stderr);
}

void kiln_log(enum kiln_log_level level, const char *module, const char *fmt, ...)
{
    if (!fmt)
        return;
    if (!kiln__log_enabled(level))
        return;
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    if (n >= 0)
        emit(level, module ? module : "app", line);
}

void kiln__log(enum kiln_log_level level, const char *module, const char *fmt, ...)
{
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    /* The one formatting of a failure: the thread's error text keeps it
     * (errmsg.c), whether or not the log shows it. */
    if (level <= KILN_LOG_WARN)
        kiln__err_detail(module, line);
    if (kiln__log_enabled(level))
        emit(level, module, line);
}
