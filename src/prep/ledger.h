/*
 * ledger.h - the build ledger (ledger.c): which programs were built, or
 * failed to build, on which driver. Private to src/prep.
 */
#ifndef KILN_LEDGER_H
#define KILN_LEDGER_H

#include "kiln/common.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The ledger's file in a cache folder. */
#define KILN__LEDGER_FILE "ledger.kpl"
/* Its header and each record, in bytes. */
#define KILN__LEDGER_HEADER 32u
#define KILN__LEDGER_RECORD 128u
/* The longest reason kept with a failure (NUL included). */
#define KILN__LEDGER_REASON 64u
/* Memory classes a ledger keeps (at least KILN__MEMORY_CLASSES). */
#define KILN__LEDGER_MEMORY_CLASSES 64u

/* What a record says of a program on a driver. */
enum kiln__ledger_state {
    KILN__LEDGER_NONE = 0,   /* nothing recorded */
    KILN__LEDGER_BUILT = 1,  /* its pipeline was built and pipelines.vkc saved after */
    KILN__LEDGER_FAILED = 2, /* its build failed (reason and error kept) */
    /* Not a program's: what a build of a memory class needs on this
     * driver (key.lo the class, key.hi bytes per KiB of SPIR-V; see
     * prep_memory.c). Kiln before 0.2 skips it as a damaged record. */
    KILN__LEDGER_MEMORY = 3,
    /* Not a program's: the driver's word on one run (struct
     * kiln__ledger_run; the key is zero). Older kiln counts such a record
     * as damaged and skips it. */
    KILN__LEDGER_RUN = 4, /* in memory only: a run record has a tag of its own */
};

/* The driver's word on one run (kiln_ledger_run, kiln/prep.h). */
struct kiln__ledger_run {
    uint32_t kind;       /* enum kiln_ledger_run_kind */
    uint64_t when;       /* seconds since 1970 */
    uint64_t pipelines;  /* pipelines the run built */
    uint64_t feedback;   /* of those, with the driver's creation feedback */
    uint64_t cache_hits; /* of those, found in the application's pipeline cache */
    uint64_t driver_ns;  /* the driver's time for them, summed */
    uint64_t probed;     /* probes (KILN_BUILD_PROBE) asked */
    uint64_t probe_hits; /* probes answered with a pipeline, no compile */
};

/* A driver, as the ledger tells drivers apart. */
struct kiln__ledger_driver {
    uint32_t vendor_id;
    uint32_t device_id;
    uint32_t driver_version;
    uint8_t cache_uuid[16]; /* VkPhysicalDeviceProperties.pipelineCacheUUID */
};

/* One record, as parsed. */
struct kiln__ledger_entry {
    struct kiln__ledger_driver driver;
    struct kiln_key key;
    uint32_t state; /* enum kiln__ledger_state */
    int32_t error;  /* for FAILED: the kiln error */
    char reason[KILN__LEDGER_REASON];
    struct kiln__ledger_run run; /* for KILN__LEDGER_RUN */
};

/* What a parse found. */
struct kiln__ledger_scan {
    uint64_t records; /* whole records with a good checksum */
    uint64_t damaged; /* whole slots whose tag or checksum is wrong (skipped) */
    size_t end;       /* the offset after the last whole slot: appends go here */
};

typedef void (*kiln__ledger_visit_fn)(void *user, const struct kiln__ledger_entry *e);

/*
 * Parses a ledger file's bytes: the header, then whole 128-byte slots in
 * order; a slot whose tag or checksum is wrong is counted and skipped, a
 * torn tail (less than a slot) is ignored. `visit` gets each good record
 * in file order (later ones win). Pure, never reads past `n`.
 * @return 0, KILN_EFORMAT when the bytes do not start with the ledger's
 * magic, or KILN_ECORRUPT_HEADER for a short or damaged header.
 */
int kiln__ledger_parse(const void *bytes, size_t n, kiln__ledger_visit_fn visit, void *user,
                       struct kiln__ledger_scan *scan);

/* Writes the file header into out[KILN__LEDGER_HEADER]. */
void kiln__ledger_header(unsigned char *out);

/* Writes one record into out[KILN__LEDGER_RECORD]. */
void kiln__ledger_record(const struct kiln__ledger_entry *e, unsigned char *out);

/* The ledger of one cache folder, for one driver. */
struct kiln__ledger;

/*
 * Reads dir/ledger.kpl through `io` and keeps the records of `driver`. A
 * missing file is an empty ledger; a damaged one (another kind of file, a
 * bad header, too large) is logged once and treated as empty: the next
 * kiln__ledger_sync replaces it with a new file (the cache's own files are
 * never touched). `dir` must outlive the ledger.
 * @return 0 or KILN_ENOMEM / KILN_ERANGE for a path too long.
 * Not thread-safe: one thread uses a ledger.
 */
int kiln__ledger_open(const char *dir, const struct kiln_io *io,
                      const struct kiln__ledger_driver *driver, struct kiln__ledger **out);

/* @return what the ledger holds for `key` on its driver (KILN__LEDGER_NONE:
 * nothing), with the failure's error in *error when not NULL. */
uint32_t kiln__ledger_lookup(const struct kiln__ledger *l, struct kiln_key key, int *error);

/*
 * Records `state` for `key` (in memory; kiln__ledger_sync writes it). A
 * state the ledger already holds is not written again. `reason` may be
 * NULL; it is cut to fit. @return 0 or KILN_ENOMEM.
 */
int kiln__ledger_note(struct kiln__ledger *l, struct kiln_key key, uint32_t state, int error,
                      const char *reason);

/* Notes the driver's word on a run of this ledger's driver (in memory;
 * kiln__ledger_sync writes it). @return 0 or KILN_ENOMEM. */
int kiln__ledger_note_run(struct kiln__ledger *l, const struct kiln__ledger_run *run);

/*
 * Appends what was noted since the last sync to the file and syncs it (a
 * new or damaged file is replaced whole: a temporary file made with
 * O_EXCL|O_NOFOLLOW in the folder, synced, renamed). @return 0 or the
 * I/O error (logged by the caller); what was noted stays pending then.
 */
int kiln__ledger_sync(struct kiln__ledger *l);

/* Frees the ledger (without syncing). NULL is a no-op. */
void kiln__ledger_close(struct kiln__ledger *l);

/*
 * Test hook: XORed into the driver version kiln_prepare reads, so a test
 * can act as a new driver. 0 outside tests.
 */
/* The learned bytes per KiB of SPIR-V of memory class `cls` on this
 * ledger's driver (its last memory record); 0: none. NULL answers 0. */
uint64_t kiln__ledger_memory(const struct kiln__ledger *l, unsigned cls);

/* The mean driver time of one pipeline in this driver's last run with
 * creation feedback (its run record: driver time over the pipelines with
 * feedback), in ns; 0: no such run. NULL answers 0. */
uint64_t kiln__ledger_build_ns(const struct kiln__ledger *l);

/* Notes a memory record (written by the next sync). @return 0 or
 * KILN_ENOMEM; NULL, or a class out of range, is a no-op. */
int kiln__ledger_note_memory(struct kiln__ledger *l, unsigned cls, uint64_t per_kib);

extern uint32_t kiln__ledger_test_version_xor;

#endif /* KILN_LEDGER_H */
