/*
 * binaries.h - the host tier of driver binaries (prep-private): the payload
 * of one pipeline's binaries (binaries_format.c) and the tier that keeps
 * them per device and driver (binaries.c). The provider the tier asks of a
 * device is in kiln_internal.h (struct kiln__bin_provider).
 */
#ifndef KILN_PREP_BINARIES_H
#define KILN_PREP_BINARIES_H

#include "kiln_internal.h"
#include "kiln/cache.h"
#include "kiln/prep.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- the payload (binaries_format.c) ---------------------------------------
 *
 * A header (magic "KLNB", version, count, zero), then per binary its key
 * (u32 size, 1..KILN__BIN_KEY_MAX bytes) and its data (u64 size, bytes),
 * all little-endian, nothing after the last one. */
#define KILN__BIN_MAGIC     0x424e4c4bu /* "KLNB" */
#define KILN__BIN_VERSION   1u
#define KILN__BIN_HEADER    16u
#define KILN__BIN_MAX_COUNT 64u /* binaries of one pipeline */

/* The bytes a payload of these `n` binaries takes. @return 0 or
 * KILN_ERANGE (a key size out of range, a count over KILN__BIN_MAX_COUNT, or
 * a sum that would overflow). */
int kiln__bin_payload_size(const struct kiln__bin_entry *e, uint32_t n, size_t *size);

/* Writes the payload of `n` binaries into out[0..cap). @return the bytes
 * written, or KILN_ERANGE (as kiln__bin_payload_size, or cap too small). */
int64_t kiln__bin_payload_write(const struct kiln__bin_entry *e, uint32_t n, void *out, size_t cap);

/*
 * Parses a payload: every size is checked against what is left, so any
 * bytes either parse to binaries inside `p` or are refused. out[] gets at
 * most `cap` entries pointing into `p`.
 * @return the count, or KILN_EFORMAT (not this format or version),
 * KILN_ECORRUPT_RECORD (a size that does not fit, bytes left over, a key
 * size out of range), KILN_ERANGE (more than `cap` binaries).
 */
int kiln__bin_payload_parse(const void *p, size_t n, struct kiln__bin_entry *out, uint32_t cap);

/* ---- the tier (binaries.c) ------------------------------------------------- */

/* The tier's folders, beneath a cache folder. */
#define KILN__BIN_DIR "binaries"

struct kiln__bin_tier;

/* Where a relaying tier hands a captured payload (an isolated worker's
 * channel to its parent), with the device and driver that made it: @return
 * 0 or the error (logged by the tier). */
typedef int (*kiln__bin_relay_fn)(void *user, struct kiln_key key,
                                  const struct kiln__bin_global *driver, const void *payload,
                                  size_t size);

struct kiln__bin_tier_options {
    const char *cache_dir;
    const struct kiln_io *io;
    const struct kiln__bin_provider *provider; /* must outlive the tier */
    /* Read only: nothing captured, nothing stored, no stale folder dropped. */
    bool read_only;
    /* Drop the stale folders of this device (another global key). */
    bool drop_stale;
    /* Where set (an isolated worker): builds capture, and each capture's
     * payload goes to relay instead of the tier's folder, which this tier
     * only reads (read_only is implied). */
    kiln__bin_relay_fn relay;
    void *relay_user;
};

/* What the tier saw and did (counts of the run so far). */
struct kiln__bin_tier_stats {
    char dir[512];                              /* this device's and driver's folder */
    char global_hex[2 * KILN__BIN_KEY_MAX + 1]; /* its global key in hex */
    uint64_t records;       /* pipelines held (at open, plus those kept since) */
    uint64_t bytes;         /* their payload bytes */
    uint64_t stale;         /* folders of this device with another global key */
    uint64_t stale_dropped; /* of those, removed by this tier */
    uint64_t made;          /* pipelines made from binaries */
    uint64_t kept;          /* pipelines whose binaries were captured and stored */
    uint64_t damaged;       /* payloads that did not parse: reported missing */
    uint64_t refused;       /* payloads the driver refused: built from SPIR-V */
    bool is_new;            /* the folder was made by this open */
};

/*
 * Opens (or makes, unless read_only) the tier of the provider's device and
 * global key in cache_dir/binaries/<vendor>-<device>-<global key hex>/ (a
 * kiln_cache of its own), and counts (drop_stale: removes) the folders of
 * the same device with another global key: a driver update made them
 * stale. Only those folders, and only their cache files, are removed.
 * @return 0 with *out, or the error (logged at warning): the run then
 * goes without the tier.
 */
int kiln__bin_tier_open(const struct kiln__bin_tier_options *o, struct kiln__bin_tier **out);

/* Syncs what was kept (a failure logged at warning: only binaries are at
 * stake). NULL or a read-only tier is a no-op. Thread-safe. */
void kiln__bin_tier_sync(struct kiln__bin_tier *t);

/* Syncs what was kept and closes. NULL is a no-op. */
void kiln__bin_tier_close(struct kiln__bin_tier *t);

/* Whether the tier holds binaries for `key` (no file access). Thread-safe. */
bool kiln__bin_tier_has(struct kiln__bin_tier *t, struct kiln_key key);

/* Whether the tier's folder was made by this open (NULL: false). */
bool kiln__bin_tier_fresh(const struct kiln__bin_tier *t);

/* Whether builds should capture (a writable tier). */
bool kiln__bin_tier_capturing(const struct kiln__bin_tier *t);

/*
 * Makes the pipeline of `key` from its stored binaries: read, checked by
 * the cache (head, checksum) and parsed here before the provider sees
 * them. @return 0 with *out (may be NULL, see the provider), KILN_ENOTFOUND
 * (none stored), KILN_ECORRUPT_RECORD (damaged: counted, never handed to
 * the driver), or the provider's error (counted as refused). Thread-safe.
 */
int kiln__bin_tier_make(struct kiln__bin_tier *t, struct kiln_key key, bool compute,
                        struct kiln_vk_pipeline **out);

/*
 * For a builder's pipeline: reads and checks the binaries of `key` as
 * kiln__bin_tier_make does and has the provider bind them: *info is a
 * VkPipelineBinaryInfoKHR (its pNext NULL) for the builder's create, or
 * NULL (the tests' fake: nothing to chain). Pass it to
 * kiln__bin_tier_unbind after the create, whatever it answered. A count
 * of `made` assumes the builder uses it. @return as kiln__bin_tier_make
 * (KILN_ENOTSUP: the provider cannot bind). Thread-safe.
 */
int kiln__bin_tier_bind(struct kiln__bin_tier *t, struct kiln_key key, void **info);
void kiln__bin_tier_unbind(struct kiln__bin_tier *t, void *info);

/* A bound record whose create the driver refused after all: counted
 * refused (not made) and logged; the caller builds from SPIR-V. */
void kiln__bin_tier_refused(struct kiln__bin_tier *t, struct kiln_key key, int rc);

/* The VkPipelineCreateFlags2KHR a builder's capturing create adds (the
 * provider's capture_flags2; 0 for NULL or the tests' fake). */
uint64_t kiln__bin_tier_capture_flags2(const struct kiln__bin_tier *t);

/* Stores a payload captured elsewhere (an isolated worker's, relayed)
 * under `key`: only one `driver` made for this tier's device and driver
 * (another's would be refused by this driver), and parsed first, so only a
 * payload of this format is kept. @return 0, KILN_EINVAL (the tier does
 * not capture), KILN_ESTAMP (another device or driver), the parser's
 * error (nothing kept), or the cache's. Thread-safe. */
int kiln__bin_tier_put_payload(struct kiln__bin_tier *t, struct kiln_key key,
                               const struct kiln__bin_global *driver, const void *payload,
                               size_t size);

/* kiln__bin_tier_keep for a pipeline a builder made (a VkPipeline as an
 * integer). */
int kiln__bin_tier_keep_handle(struct kiln__bin_tier *t, struct kiln_key key, uint64_t pipeline);

/* Captures the binaries of `pipe` and stores them under `key`. @return 0
 * or the error (logged at info: the pipeline is built, only its binaries
 * are not kept). Thread-safe. */
int kiln__bin_tier_keep(struct kiln__bin_tier *t, struct kiln_key key,
                        struct kiln_vk_pipeline *pipe);

void kiln__bin_tier_get_stats(struct kiln__bin_tier *t, struct kiln__bin_tier_stats *out);

/*
 * The tier a run uses for `mode` (enum kiln_binaries_mode): none for off,
 * or where neither the test provider nor vk's real one is there (for ON,
 * one line says the run falls back to pipelines.vkc). `provider` is the
 * caller's storage for the provider (it must outlive the tier).
 * @return the tier, or NULL.
 */
struct kiln__bin_tier *kiln__bin_tier_for_run(uint32_t mode, struct kiln_vk *vk,
                                              struct kiln__bin_provider *provider,
                                              const struct kiln__bin_tier_options *o);

/* A run's counts from its tier (NULL: zeros) into a summary's fields:
 * `s` is a struct kiln_prepare_summary or kiln_start_summary (the fields
 * have the same names). */
#define KILN__PREP_BINARIES_COUNTS(t, s)                                           \
    do {                                                                           \
        struct kiln__bin_tier_stats bst_;                                          \
        kiln__bin_tier_stats_or_zero((t), &bst_);                                  \
        (s)->binaries_used = (t) != NULL;                                          \
        (s)->binaries_kept = bst_.kept;                                            \
        (s)->binaries_stale = bst_.stale;                                          \
        (s)->binaries_stale_dropped = bst_.stale_dropped;                          \
        (s)->binaries_damaged = bst_.damaged;                                      \
        (s)->binaries_records = bst_.records;                                      \
        (s)->binaries_bytes = bst_.bytes;                                          \
        snprintf((s)->binaries_dir, sizeof((s)->binaries_dir), "%s", bst_.dir);    \
        snprintf((s)->binaries_global_key, sizeof((s)->binaries_global_key), "%s", \
                 bst_.global_hex);                                                 \
    } while (0)

/* kiln__bin_tier_get_stats, or all zero (empty strings) for NULL. */
void kiln__bin_tier_stats_or_zero(struct kiln__bin_tier *t, struct kiln__bin_tier_stats *out);

/*
 * Drops, in every tier folder beneath `programs`'s folder (any device,
 * any driver), the records whose program `programs` (with its layers) no
 * longer holds, with the cache's crash-safe rewrite; only a folder with
 * something to drop is rewritten. A folder that does not open (another
 * run writes it, damage) is counted skipped and logged; damaged records
 * are left out by the rewrite. `programs` must be held for writing.
 * @return 0 with *out filled, or the listing's error.
 */
int kiln__bin_sweep(struct kiln_cache *programs, const struct kiln_io *io,
                    struct kiln_binaries_sweep_report *out);

/* Test hook: when set, runs use this provider instead of the device's. */
extern const struct kiln__bin_provider *kiln__bin_test_provider;

/* The platform's part (binaries_unix.c, binaries_win.c): calls fn for each
 * entry of `dir` that is a folder (dirs) or a plain file (!dirs); the
 * folder itself is removed with kiln__bin_rmdir. @return 0 or the error
 * (KILN_ENOENT: no such folder). */
int kiln__bin_list(const char *dir, bool dirs, void (*fn)(void *user, const char *name),
                   void *user);
int kiln__bin_rmdir(const char *dir);

#endif /* KILN_PREP_BINARIES_H */
