/*
 * errmsg.c - the text of the last failure: per thread (kiln_last_errmsg)
 * and per handle (struct kiln__errbuf, read by kiln_cache_errmsg and
 * kiln_vk_errmsg).
 *
 * Design. The detail of a failure is the warning or error line the failing
 * code logged: kiln__log hands each such line to kiln__err_detail, which
 * keeps it in a thread-local buffer with a sequence number. A public
 * function takes the sequence number on entry (kiln__err_mark) and, when it
 * fails, kiln__err_end builds "<function>: <detail> (<code name>)" from the
 * line logged since then, so the log line and the error text come from one
 * formatting. Nothing is logged twice and no failing path formats its own
 * text.
 *
 * Threads. The thread-local buffers need no lock. A handle's buffer may be
 * written by two failing calls on two threads and read by a third: a spin
 * flag guards each copy in or out (at most KILN__ERRMSG_MAX bytes, never a
 * call into other code while it is held), and the getters return the
 * calling thread's copy, so a returned pointer is never written by another
 * thread. As in SQLite the text is the handle's, not the call's: with
 * several threads failing on one handle, it is the latest one's.
 */
#include "kiln_internal.h"

#include <stdio.h>
#include <string.h>

static _Thread_local char detail[KILN__ERRMSG_MAX];
static _Thread_local uint64_t detail_seq;
static _Thread_local char last[KILN__ERRMSG_MAX];
static _Thread_local char copy[KILN__ERRMSG_MAX];

void kiln__err_detail(const char *module, const char *line)
{
    (void)module;
    snprintf(detail, sizeof(detail), "%s", line);
    detail_seq++;
}

uint64_t kiln__err_mark(void)
{
    return detail_seq;
}

const char *kiln__err_detail_since(uint64_t mark)
{
    return detail_seq != mark ? detail : "";
}

static void lock(struct kiln__errbuf *eb)
{
    while (atomic_flag_test_and_set_explicit(&eb->busy, memory_order_acquire))
        ;
}

static void unlock(struct kiln__errbuf *eb)
{
    atomic_flag_clear_explicit(&eb->busy, memory_order_release);
}

int kiln__err_end(struct kiln__errbuf *eb, uint64_t mark, const char *fn, const char *where, int rc)
{
    if (rc >= 0)
        return rc;
    if (detail_seq != mark)
        snprintf(last, sizeof(last), "%.60s: %.400s (%s)", fn, detail, kiln_errname(rc));
    else if (where)
        snprintf(last, sizeof(last), "%.60s: %.300s: %s (%s)", fn, where, kiln_strerror(rc),
                 kiln_errname(rc));
    else
        snprintf(last, sizeof(last), "%.60s: %s (%s)", fn, kiln_strerror(rc), kiln_errname(rc));
    if (eb) {
        lock(eb);
        eb->code = rc;
        memcpy(eb->text, last, sizeof(eb->text));
        unlock(eb);
    }
    return rc;
}

const char *kiln__err_text(struct kiln__errbuf *eb)
{
    lock(eb);
    memcpy(copy, eb->text, sizeof(copy));
    unlock(eb);
    copy[sizeof(copy) - 1] = '\0';
    return copy;
}

const char *kiln_last_errmsg(void)
{
    return last;
}
