/*
 * prep_internal.h - what the prep module's files share. Private to
 * src/prep.
 */
#ifndef KILN_PREP_INTERNAL_H
#define KILN_PREP_INTERNAL_H

/* The builders' requests carry Vulkan types: the headers come first, with
 * no prototypes (Vulkan is reached through kiln_vk's function pointers). */
#ifndef VK_NO_PROTOTYPES
#define VK_NO_PROTOTYPES
#endif
#include <vulkan/vulkan.h>

#include "kiln/pool.h"
#include "kiln/prep.h"

#include <stdatomic.h>

/* ---- shared by prepare.c and start.c -------------------------------------- */

/* One program of a pipeline phase: its key, a name for log lines (NULL: the
 * key in hex) and its payload (borrowed). `status` is what the build gave. */
struct kiln__prep_item {
    struct kiln_key key;
    const char *name;
    const void *payload;
    size_t size;
    bool validated; /* its stages were validated by this process (not again) */
    int status;
};

/* What a pipeline phase builds with. */
struct kiln__prep_build {
    struct kiln_vk *vk;
    /* The dictionary the payloads' blobs were packed with (NULL: none);
     * must outlive the phase. */
    const struct kiln_pack_dict *dict;
    kiln_prep_pipeline_fn on_pipeline; /* NULL: each pipeline is destroyed at once */
    void *pipeline_user;
    kiln_prep_progress_fn progress;
    void *progress_user;
    /* The caller's builders (see kiln/prep.h, "Builders"); may be none. */
    const struct kiln_builder *builders;
    size_t nbuilders;
    _Atomic uint64_t bad;  /* out: payloads that are not a program's, or not valid (logged) */
    _Atomic uint64_t lone; /* out: one-module payloads of no pipeline (not built) */
    /* out: per state kind, what became of its programs; the first skip's
     * reason is written by the one worker that wins skip_claimed. */
    _Atomic uint64_t built[KILN_STATE_KINDS];
    _Atomic uint64_t skipped[KILN_STATE_KINDS];
    _Atomic uint64_t failed[KILN_STATE_KINDS];
    _Atomic unsigned skip_claimed[KILN_STATE_KINDS]; /* 0 until the first skip (zeroed) */
    char skip_reason[KILN_STATE_KINDS][160];
};

/*
 * Checks the builders of options (each kind below KILN_STATE_KINDS, a
 * build function set); `what` names the call in the error line.
 * @return 0 or KILN_EINVAL (logged).
 */
int kiln__prep_check_builders(const struct kiln_builder *builders, size_t n, const char *what);

/* Copies a pipeline phase's per-kind counts into a summary's array, and
 * sums the skipped ones. @return the skipped total. */
uint64_t kiln__prep_kind_counts(struct kiln__prep_build *b,
                                struct kiln_kind_counts out[KILN_STATE_KINDS]);

/*
 * The Vulkan context of a pipeline phase: `given` when the caller passed
 * one, else a new one for the device asked (use_device_index, device) with
 * cache_dir's pipelines.vkc, through `io`; a new one is also put in *own,
 * for the caller to destroy. On success *vk is the context to build on and
 * the summary's device name, pipelines.vkc state and loaded bytes are
 * filled from it.
 * @return 0, or kiln_vk_create's error (*vk and *own NULL then).
 */
int kiln__prep_vk_open(struct kiln_vk *given, bool use_device_index, unsigned device,
                       const char *cache_dir, const struct kiln_io *io, struct kiln_vk **own,
                       struct kiln_vk **vk, char (*device_name)[256],
                       enum kiln_vk_cache_state *cache_state, size_t *cache_loaded_bytes);

/*
 * Builds the pipeline of every item whose payload is set, on a pool of
 * `workers`, each through the builder for its state kind, reporting
 * KILN_PREP_PHASE_PIPELINES progress.
 * @return the number of pipelines built (failures are logged, counted in
 * *failed and left in each item's status; skipped programs are counted in
 * b->skipped), or a pool error.
 */
int64_t kiln__prep_build_all(struct kiln__prep_build *b, struct kiln__prep_item *items, size_t n,
                             unsigned workers, uint64_t *failed);

/* Waits for a pool's jobs, reporting `phase` progress (done counted from
 * `base`) about ten times a second. @return kiln_pool_wait's result. */
int kiln__prep_wait(struct kiln_pool *pool, uint64_t base, uint64_t total,
                    enum kiln_prep_phase phase, kiln_prep_progress_fn progress, void *user);

/* Reports progress when at least 100 ms passed since *last_ns. */
void kiln__prep_tick(struct kiln_pool *pool, uint64_t base, uint64_t total,
                     enum kiln_prep_phase phase, kiln_prep_progress_fn progress, void *user,
                     uint64_t *last_ns);

#endif /* KILN_PREP_INTERNAL_H */
