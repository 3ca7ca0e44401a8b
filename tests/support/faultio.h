/*
 * faultio.h - a file I/O table that breaks on purpose, for tests.
 *
 * It wraps the default table (kiln_io_default) and can:
 *
 *  - fail the Nth call (counting every call of the chosen kinds, from 1)
 *    with an error of the test's choice: ENOSPC, EIO, a failed sync or
 *    rename. A write can instead be made short (half its bytes written).
 *    The fault is transient (only that call fails) or persistent (that call
 *    and every later one of the chosen kinds fail, as a full disk does);
 *
 *  - simulate a power cut: every write not yet made durable by an fsync of
 *    its file is remembered with the bytes it replaced, and
 *    faultio_power_cut() puts those bytes back (and the file's old size),
 *    optionally leaving the newest unsynced write half applied (a torn
 *    write). Renames and unlinks are treated as durable at once: kiln syncs
 *    the folder right after each, and a rename is atomic on the filesystems
 *    kiln supports.
 *
 * Thread-safe: one mutex guards the counters and the undo log.
 */
#ifndef KILN_FAULTIO_H
#define KILN_FAULTIO_H

#include "kiln/common.h"

#include <pthread.h>

/* Kinds of call, for faultio.fail_kinds (a bit mask). */
enum faultio_kind {
    FAULTIO_OPEN = 1 << 0,
    FAULTIO_READ = 1 << 1,
    FAULTIO_WRITE = 1 << 2,
    FAULTIO_SYNC = 1 << 3, /* fsync and fsync_dir */
    FAULTIO_RENAME = 1 << 4,
    FAULTIO_TRUNCATE = 1 << 5,
    FAULTIO_ANY_WRITE = FAULTIO_WRITE | FAULTIO_SYNC | FAULTIO_RENAME | FAULTIO_TRUNCATE,
    FAULTIO_ALL = 0x3f,
};

struct faultio_undo; /* one unsynced write's old bytes (private) */

struct faultio {
    struct kiln_io io; /* first member: pass &f->io to kiln */

    /* Fault settings: fail the call numbered fail_at (1-based) among the
     * calls of kinds fail_kinds; 0 disables. */
    uint64_t fail_at;
    unsigned fail_kinds;
    int fail_error;   /* the kiln error to return, e.g. KILN_ENOSPC */
    bool short_write; /* the first failing write writes half and reports that count
                       * (later persistent faults refuse every byte) */
    bool persistent;  /* keep failing after the first fault */

    /* Power-cut simulation: remember unsynced writes. */
    bool track_unsynced;

    /* Counters (read them under no lock only when no other thread runs). */
    uint64_t calls;  /* calls of kinds fail_kinds so far */
    uint64_t faults; /* faults injected so far */

    pthread_mutex_t lock;
    struct faultio_undo *undo; /* newest first */
    int fd_paths_cap;
    char **fd_paths; /* path of each open fd, for the undo log */
};

/* Sets up a faultio with no fault armed. */
void faultio_init(struct faultio *f);

/* Frees what faultio_init and the calls made since allocated. */
void faultio_destroy(struct faultio *f);

/* Arms one fault: the Nth call of `kinds` fails with `error`. */
void faultio_arm(struct faultio *f, uint64_t nth, unsigned kinds, int error, bool persistent);

/* Disarms, and resets the counters. */
void faultio_disarm(struct faultio *f);

/*
 * Undoes every write not made durable by an fsync of its file, newest
 * first, restoring the old bytes and sizes. With `tear_last`, the newest
 * unsynced write keeps its first half. @return the writes undone.
 */
int faultio_power_cut(struct faultio *f, bool tear_last);

#endif /* KILN_FAULTIO_H */
