/*
 * journal.h - the crash journal (journal.c): which programs a run is
 * building right now, so that the next run can tell which ones were in
 * flight when a run died. Private to src/prep.
 */
#ifndef KILN_JOURNAL_H
#define KILN_JOURNAL_H

#include "kiln/common.h"
#include "ledger.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The journal files of a cache folder: inflight-0.kpj ... inflight-7.kpj,
 * one per run building at once. */
#define KILN__JOURNAL_FILES 8u
/* The header and each slot, in bytes (a slot never straddles a page). */
#define KILN__JOURNAL_HEADER 128u
#define KILN__JOURNAL_SLOT   128u
/* The most slots (pool workers) one journal has. */
#define KILN__JOURNAL_MAX_SLOTS 1024u
/* The longest program name kept in a slot (NUL included). */
#define KILN__JOURNAL_NAME 96u

/* A journal's header, as parsed. */
struct kiln__journal_head {
    uint32_t nslots;
    uint32_t pid; /* the run's process, for log lines */
    struct kiln__ledger_driver driver;
};

/* A program in flight, as parsed from a slot. */
struct kiln__journal_entry {
    struct kiln_key key;
    char name[KILN__JOURNAL_NAME];
};

/* What a parse found. */
struct kiln__journal_scan {
    uint32_t in_flight; /* good slots that say a build was running */
    uint32_t damaged;   /* whole slots whose tag, state or checksum is wrong (skipped) */
};

typedef void (*kiln__journal_visit_fn)(void *user, const struct kiln__journal_entry *e);

/*
 * Parses a journal file's bytes: an empty file is a journal with nothing
 * in flight; else the header, then up to its slot count of whole slots (a
 * file cut short has fewer). `visit` gets each slot in flight. Pure, never
 * reads past `n`.
 * @return 0, KILN_EFORMAT when the bytes do not start with the journal's
 * magic, or KILN_ECORRUPT_HEADER for a short or damaged header.
 */
int kiln__journal_parse(const void *bytes, size_t n, struct kiln__journal_head *head,
                        kiln__journal_visit_fn visit, void *user, struct kiln__journal_scan *scan);

/* Writes a header into out[KILN__JOURNAL_HEADER]. */
void kiln__journal_header(const struct kiln__journal_head *h, unsigned char *out);

/* Writes a slot into out[KILN__JOURNAL_SLOT]: in flight with `e`, or idle
 * when `e` is NULL. */
void kiln__journal_slot(const struct kiln__journal_entry *e, unsigned char *out);

/* A program that was in flight when a run died. */
struct kiln__journal_suspect {
    struct kiln_key key;
    char name[KILN__JOURNAL_NAME];
    struct kiln__ledger_driver driver; /* the dead run's */
    uint32_t pid;                      /* the dead run's process */
    uint32_t in_flight;                /* how many were in flight in that run, this one too */
};

/* The journals of one cache folder, as one run sees them. */
struct kiln__journal;

/*
 * Reads dir's journal files through `io`. A file whose lock can be taken
 * belongs to no running process; when it has programs in flight, its run
 * died: they become suspects, and the file stays locked until
 * kiln__journal_settle. Files another process holds are left alone;
 * unreadable or damaged ones are logged and ignored (damaged ones are
 * written over when claimed). `dir` must outlive the journal.
 * @return 0 with *out set, or KILN_ENOMEM / KILN_ERANGE (a path too long).
 * Not thread-safe, like everything here but note and done.
 */
int kiln__journal_scan(const char *dir, const struct kiln_io *io, struct kiln__journal **out);

/* The suspects the scan found (valid until kiln__journal_close). */
size_t kiln__journal_suspects(const struct kiln__journal *j,
                              const struct kiln__journal_suspect **out);

/*
 * Lets go of the dead runs' files: emptied when `recorded` (their suspects
 * are in the ledger now), else left as they are for a later run to
 * record. NULL is a no-op; a second call does nothing.
 */
void kiln__journal_settle(struct kiln__journal *j, bool recorded);

/*
 * Takes a journal file for this run (the first one no process holds and
 * that holds no dead run's programs) and writes its header with `driver`
 * and `slots` idle slots. A folder where no file can be had (read-only, all
 * taken) leaves the run without a journal: one info line, and note and
 * done do nothing. NULL is a no-op.
 */
void kiln__journal_claim(struct kiln__journal *j, const struct kiln__ledger_driver *driver,
                         unsigned slots);

/*
 * Notes that pool worker `worker` starts building `key` (`name` for the
 * log lines of the next run; cut to fit), or that it is done. One write
 * at the slot's offset each, no sync: what a process wrote survives its
 * crash. Thread-safe for distinct workers; NULL or no journal: no-op.
 */
void kiln__journal_note(struct kiln__journal *j, unsigned worker, struct kiln_key key,
                        const char *name);
void kiln__journal_done(struct kiln__journal *j, unsigned worker);

/*
 * Ends the run's journal: its file is emptied (nothing in flight) and
 * unlocked, the dead runs' files are released as kiln__journal_settle(j,
 * false) would, and j is freed. NULL is a no-op.
 */
void kiln__journal_close(struct kiln__journal *j);

#endif /* KILN_JOURNAL_H */
