/*
 * cli_term.c - what stderr shows beside the work: the progress bar's line
 * and the log lines that interrupt it, and each warning once per run.
 *
 * Design.
 * - A bar is drawn with "\r" and no newline, so a log line written while
 *   it shows would be torn into it. The bar notes that it is on the line
 *   (bar_shown); a log line first clears that line ("\r", spaces, "\r")
 *   and the bar is drawn again at its next update (at most 0.1 s later).
 * - Warnings: the same warning (module and text) is printed the first
 *   time only; the others are counted, and cli_term_finish() says how
 *   many were left out. The seen set is a fixed table of 64-bit hashes
 *   filled with compare-and-swap, so log lines from any thread need no
 *   lock; when it is full, every further warning is printed (nothing is
 *   hidden that was not shown once).
 */
#include "cli.h"

#include <stdatomic.h>
#include <string.h>

#define SEEN_SLOTS 1024

static atomic_bool bar_shown;
static _Atomic uint64_t seen[SEEN_SLOTS];
static atomic_ullong repeats;

void cli_term_bar_drawn(bool on_line)
{
    atomic_store(&bar_shown, on_line);
}

void cli_term_before_line(void)
{
    if (atomic_exchange(&bar_shown, false))
        fprintf(stderr, "\r%79s\r", "");
}

/* @return whether `h` was not in the set (and is now), or the set is full. */
static bool first_sight(uint64_t h)
{
    h = h ? h : 1; /* 0 marks an empty slot */
    for (size_t i = 0; i < SEEN_SLOTS; i++) {
        _Atomic uint64_t *slot = &seen[(h + i) % SEEN_SLOTS];
        uint64_t cur = atomic_load(slot);
        if (cur == h)
            return false;
        if (cur == 0) {
            uint64_t empty = 0;
            if (atomic_compare_exchange_strong(slot, &empty, h))
                return true;
            if (empty == h)
                return false;
        }
    }
    return true;
}

bool cli_term_first_warning(const char *module, const char *line)
{
    char key[1024];
    int n = snprintf(key, sizeof(key), "%s\n%s", module, line);
    size_t len = n < 0 ? 0 : (size_t)n < sizeof(key) ? (size_t)n : sizeof(key) - 1;
    if (first_sight(kiln_hash64(key, len)))
        return true;
    atomic_fetch_add(&repeats, 1);
    return false;
}

void cli_term_finish(void)
{
    unsigned long long n = atomic_load(&repeats);
    cli_term_before_line();
    if (n)
        fprintf(stderr, "kiln: %llu repeated warning%s not shown (each was shown once above)\n", n,
                n == 1 ? "" : "s");
}
