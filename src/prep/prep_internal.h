/*
 * prep_internal.h - what the prep module's files share. Private to
 * src/prep.
 */
#ifndef KILN_PREP_INTERNAL_H
#define KILN_PREP_INTERNAL_H

#include "kiln/pool.h"
#include "kiln/prep.h"

#include <stdatomic.h>

/* The largest source or SPIR-V file kiln reads from a corpus folder. */
#define KILN__PREP_MAX_FILE (64u << 20)

/* @return a new empty program named `name` (copied), or NULL. */
struct kiln_program *kiln__prep_program_new(const char *name);

/*
 * Sets a stage's src.name to "<program><suffix>" (a new string the program
 * owns). @return 0 or KILN_ENOMEM.
 */
int kiln__prep_set_stage_name(struct kiln_program_stage *st, const char *program,
                              const char *suffix);

/*
 * Checks that `n` bytes look like a SPIR-V module: a whole number of words,
 * at least a header, the magic number in host order.
 * @return 0 or KILN_EFORMAT, with a reason in *why.
 */
int kiln__prep_check_spirv(const void *data, size_t n, const char **why);

/*
 * Calls `fn` for every regular file under `dir`, recursively, with its path
 * relative to `dir` ('/' separated). The order is the platform's: the caller
 * sorts. @return 0, fn's first negative return, or the listing error (one
 * error line naming the folder).
 */
int kiln__prep_walk(const char *dir, int (*fn)(void *user, const char *rel), void *user);

/*
 * The key program i of a listed corpus is stored under when the corpus
 * names it itself: a Fossilize archive's module, kiln_cache_foz_key of its
 * hash, so that kiln prepare and kiln import foz fill one cache alike.
 * @return 0 with the key in *key, or KILN_ENOTFOUND for a folder corpus
 * (whose programs are keyed by kiln_prep_program_key).
 */
int kiln__corpus_key(const struct kiln_corpus *c, size_t i, struct kiln_key *key);

/* @return true when the path names a Fossilize archive (ends in ".foz"). */
bool kiln__corpus_is_foz(const char *path);

/* ---- shared by prepare.c and start.c -------------------------------------- */

/* One program of a pipeline phase: its key, a name for log lines (NULL: the
 * key in hex) and its payload (borrowed). `status` is what the build gave. */
struct kiln__prep_item {
    struct kiln_key key;
    const char *name;
    const void *payload;
    size_t size;
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
    _Atomic uint64_t bad;  /* out: payloads that are not a program's (logged) */
    _Atomic uint64_t lone; /* out: one-module payloads of no pipeline (not built) */
};

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
 * `workers`, reporting KILN_PREP_PHASE_PIPELINES progress.
 * @return the number of pipelines built (failures are logged, counted in
 * *failed and left in each item's status), or a pool error.
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
