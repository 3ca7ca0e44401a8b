/*
 * prepare.c - the preparation (kiln_prepare): translate, pack and store
 * every program, then build every pipeline.
 *
 * Invariants and why they hold:
 *
 * - A re-run translates nothing. A program's key is a hash of what the
 *   translator sees, with the program's entry points, specialization and
 *   state when it has any (kiln_program_key, or the source's own key
 *   for it), and the cache's stamp names the translator as the source mixes
 *   it (kiln_program_source.stamp), so a key found in a
 *   cache opened with this stamp is the output this run would make; the
 *   worker checks the key before translating and skips what is there.
 *
 * - One writer at a time. kiln_cache_put and kiln_cache_sync may not run
 *   at once with each other, so every put and sync happens under
 *   `put_lock`; loading, translating and packing (nearly all the time)
 *   run outside it, in parallel.
 *
 * - A crash loses little: the cache is synced every `sync_every` stored
 *   programs and at the end of the translate phase, before any pipeline
 *   is built. A cache error (a failed put or sync: a full disk, an I/O
 *   error) stops the run, since every later put would fail alike; a
 *   program's own failure (load, translate, pack) is logged and counted,
 *   and the run goes on.
 *
 * - One dictionary per run. The cache is opened with its dictionary
 *   (KILN_CACHE_USE_DICT), so a cache repacked with one is kept, not
 *   started over; every stage this run packs uses that dictionary, and
 *   every payload reaches the pipeline phase with it. Only the dictionary
 *   step (options.dict) changes it, between the translate phase and the
 *   pipeline phase: kiln_cache_repack trains one and packs every record
 *   again, so the payloads this run made are dropped and read back from
 *   the repacked cache with the new dictionary. (Training from the SPIR-V
 *   in memory instead would keep every translated module alive through the
 *   phase, and could not cover the programs an earlier run stored; the
 *   repack reads the whole cache once more, which is cheap next to
 *   translating it.)
 *
 * - prep knows no kind of program source: the generator, corpus folders
 *   and Fossilize archives (tools/gen, src/foz) hand it a
 *   struct kiln_program_source. A source may name the stamp (a Fossilize
 *   archive's is the one kiln import foz uses) and each program's key (its
 *   module's hash), so a cache filled by another route is found as it is.
 *
 * - Progress is reported from the caller's thread only (see start.c).
 *
 * - Compile once, a memory budget, background and cancel live in
 *   prep_run.c (the build ledger, ledger.c); this file only calls it: the
 *   ledger answers before the pipeline phase and records after it, the
 *   pools get the run's budget and priority, and a cancelled run stops
 *   handing out jobs, syncs, saves pipelines.vkc and the ledger, and
 *   returns KILN_ECANCELED.
 *
 * - A stop makes what was stored durable at once, not at the pass's end: the
 *   translate pass's wait syncs when it first sees the stop, and every put
 *   after it syncs (store_locked). So a run whose caller ends the process
 *   while a translation never returns (the kiln command's stop deadline)
 *   leaves a whole cache, index included.
 */
#include "kiln_internal.h"
#include "binaries.h"
#include "isolate_internal.h"
#include "ledger.h"
#include "prep_internal.h"

#include "kiln/pool.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
void kiln_prepare_options_init(struct kiln_prepare_options *o)
{
    if (!o)
        return;
    memset(o, 0, sizeof(*o));
    o->size = sizeof(*o);
    o->codec = KILN_CODEC_KILN;
}

uint64_t kiln_prepare_stamp(const struct kiln_prepare_options *o)
{
    struct kiln_prepare_options opt = KILN_PREPARE_OPTIONS_INIT;
    if (!o || KILN_STRUCT_IN(&opt, o, "kiln_prepare_options") < 0)
        return 0;
    struct kiln__prep_abi abi;
    int rc = kiln__prep_abi_in(&abi, &opt.translator, &opt.isolate, NULL, NULL, NULL);
    kiln__prep_abi_free(&abi);
    if (rc < 0 || !opt.source)
        return 0;
    struct kiln_program_source src;
    if (KILN_STRUCT_IN(&src, opt.source, "kiln_program_source") < 0)
        return 0;
    uint64_t t = opt.translator ? opt.translator->stamp : 0;
    return src.stamp ? src.stamp(src.user, t) : t;
}

/* Makes `path` and its missing parents. @return 0 or the error (logged at
 * info: kiln_prepare returns it, and its caller reports it). */
static int make_dirs(const char *path)
{
    size_t len = strlen(path);
    char *p = kiln__malloc(len + 1);
    if (!p)
        return KILN_ENOMEM;
    memcpy(p, path, len + 1);
    int rc = KILN_OK;
    for (size_t i = 1; i <= len && rc == KILN_OK; i++) {
        if (p[i] != '/' && p[i] != '\\' && p[i] != '\0')
            continue;
        char c = p[i];
        p[i] = '\0';
        int r = kiln__make_dir(p);
        if (r != 0 && errno != EEXIST) {
            rc = kiln_error_from_errno(errno, KILN_EIO);
            KILN_INFO("prep", "%s: cannot make the folder: %s", p, kiln_strerror(rc));
        }
        p[i] = c;
    }
    kiln__free(p);
    return rc;
}

/* ---- the run ---------------------------------------------------------------- */

struct run;

/* One program of the run. */
struct prog {
    struct run *run;
    uint32_t index;
    char *name;
    struct kiln_key key;
    bool have_key;
    bool cached;   /* found in the cache: not translated */
    bool reload;   /* stored by this run, then repacked: read it back */
    bool remake;   /* its record could not be read back: translate it again */
    bool failed;   /* could not be loaded, translated or packed (logged) */
    void *payload; /* made by this run (kiln_pack_free) */
    size_t size;
    void *loaded; /* read back from the cache (kiln_cache_payload_free) */
};

struct run {
    const struct kiln_prepare_options *o;
    const struct kiln_translator *t;
    struct kiln_program_source src;
    struct kiln_cache *cache;
    /* The cache's dictionary, packed with and unpacked with (NULL: none). */
    const struct kiln_pack_dict *dict;
    unsigned sync_every;

    pthread_mutex_t put_lock;
    /* Under put_lock: */
    uint64_t stored;
    uint64_t since_sync;
    uint64_t spirv_bytes;
    uint64_t packed_bytes;
    int cache_error; /* the first failed put or sync; stops the run */
    struct kiln_pool *pool;
    uint64_t memory_budget; /* for the pools (0: none) */
    atomic_bool canceled;   /* options.cancel said so */
    /* A program failed for want of memory: the run stops with KILN_ENOMEM
     * (the others would meet the same; the next run resumes). */
    atomic_bool no_memory;
    /* Programs stored though the validator refused a stage (their kind's
     * builder has KILN_BUILDER_RECORDED_SPIRV; see validate_program). */
    _Atomic uint64_t recorded_invalid;
};

/* Whether the run was asked to stop (remembered once seen). */
static bool stopping(struct run *r)
{
    if (atomic_load(&r->canceled))
        return true;
    if (!kiln__prep_stopping(r->o->cancel, r->o->cancel_user, NULL))
        return false;
    atomic_store(&r->canceled, true);
    return true;
}

static int load_program(struct prog *it, struct kiln_program **p)
{
    const struct run *r = it->run;
    *p = NULL;
    int rc = r->src.load(r->src.user, it->index, p);
    if (rc == KILN_OK && !*p)
        rc = KILN_EINVAL;
    if (rc == KILN_OK) {
        /* A program in another release's layout: this one's from here on. */
        const struct kiln_program *use;
        struct kiln_program *own;
        rc = kiln__program_in(*p, &use, &own);
        if (rc < 0 || own) {
            kiln_program_destroy(*p);
            *p = own;
        }
    }
    if (rc == KILN_OK &&
        ((*p)->nstages == 0 || (*p)->nstages > KILN_PROGRAM_MAX_STAGES || !(*p)->stages)) {
        KILN_ERROR("prep", "%s: the source gave a program of %u stages", (*p)->name, (*p)->nstages);
        kiln_program_destroy(*p);
        *p = NULL;
        rc = KILN_EINVAL;
    } else if (rc == KILN_OK && ((*p)->state_kind >= KILN_STATE_KINDS ||
                                 ((*p)->state_kind == KILN_STATE_BUILTIN && (*p)->state_size) ||
                                 (*p)->state_size > KILN_STATE_MAX_BYTES)) {
        KILN_ERROR("prep", "%s: the source gave state kind %u with %zu bytes", (*p)->name,
                   (*p)->state_kind, (*p)->state_size);
        kiln_program_destroy(*p);
        *p = NULL;
        rc = KILN_EINVAL;
    }
    return rc; /* the source logged its own failures */
}

/* A program given as text needs a translator; one of SPIR-V needs none. */
static int need_no_text(const struct kiln_program *p, const char *name)
{
    for (unsigned i = 0; i < p->nstages; i++)
        if (!p->stages[i].words && p->stages[i].src.text) {
            KILN_ERROR("prep", "%s: stage %s is source text and no translator was given", name,
                       p->stages[i].src.name ? p->stages[i].src.name : "(unnamed)");
            return KILN_EINVAL;
        }
    return KILN_OK;
}

/* The builder's word on its programs' modules (start.c's top): recorded
 * from a working application or not; the same policy at store time as at
 * build time. */
static bool recorded_spirv(const struct run *r, uint32_t kind)
{
    for (size_t b = 0; b < r->o->nbuilders; b++)
        if (r->o->builders[b].kind == kind)
            return (r->o->builders[b].flags & KILN_BUILDER_RECORDED_SPIRV) != 0;
    return false;
}

/*
 * Seals a translated program (kiln_program_seal: checks every stage, so the
 * cache never holds a module SPIR-V's validator refuses; packs with the
 * run's codec and dictionary; marks the payload validated when the
 * validator passed every stage) under the key the run gave it. @return 0
 * with the payload in it->payload, or the refusal, logged naming the
 * program and the stage.
 */
static int seal_program(struct run *r, struct kiln_program *p, struct prog *it, const char *name,
                        struct kiln_program_sealed *s)
{
    p->has_key = true; /* keyed before translating (translate_job) */
    p->key = it->key;
    struct kiln_program_seal_options o = {
        .size = sizeof(o),
        .flags = KILN_PROGRAM_SEAL_CODEC |
                 (recorded_spirv(r, p->state_kind) ? KILN_PROGRAM_RECORDED_SPIRV : 0u),
        .codec = (uint32_t)r->o->codec,
        .dict = r->dict,
        .name = name,
    };
    int rc = kiln_program_seal(p, &o, s);
    if (rc < 0)
        return rc;
    if (s->recorded_invalid)
        atomic_fetch_add_explicit(&r->recorded_invalid, 1, memory_order_relaxed);
    it->payload = s->payload;
    it->size = s->payload_size;
    return KILN_OK;
}

/* Syncs what was stored since the last sync. Under put_lock (or with the
 * pool joined). */
static void sync_locked(struct run *r)
{
    if (r->cache_error || !r->since_sync)
        return;
    r->since_sync = 0;
    int rc = kiln_cache_sync(r->cache);
    if (rc < 0) {
        KILN_ERROR("prep", "%s: cannot sync the program cache: %s", r->o->cache_dir,
                   kiln_strerror(rc));
        r->cache_error = rc;
    }
}

/* Stores one payload; syncs every sync_every puts, and every put once the
 * run was asked to stop. Under put_lock. */
static int store_locked(struct run *r, struct prog *it, size_t spirv, unsigned nstages)
{
    if (r->cache_error)
        return r->cache_error;
    int rc = kiln_cache_put(r->cache, it->key, it->payload, it->size, (uint32_t)spirv,
                            (uint8_t)r->o->codec, (uint16_t)nstages);
    if (rc < 0) {
        KILN_ERROR("prep", "%s: cannot store %s: %s", r->o->cache_dir, it->name, kiln_strerror(rc));
    } else {
        r->stored++;
        r->spirv_bytes += spirv;
        r->packed_bytes += it->size;
        if (++r->since_sync >= r->sync_every || atomic_load(&r->canceled)) {
            r->since_sync = 0;
            rc = kiln_cache_sync(r->cache);
            if (rc < 0)
                KILN_ERROR("prep", "%s: cannot sync the program cache: %s", r->o->cache_dir,
                           kiln_strerror(rc));
        }
    }
    if (rc < 0) {
        r->cache_error = rc;
        kiln_pool_cancel(r->pool); /* every later put would fail alike */
    }
    return rc;
}

/* A program's failure: out of memory stops the run (the pool hands out no
 * more work); any other error is the program's alone. */
static int prog_failed(struct run *r, struct prog *it, int rc)
{
    it->failed = true;
    if (rc == KILN_ENOMEM) {
        atomic_store(&r->no_memory, true);
        kiln_pool_cancel(r->pool);
    }
    return rc;
}

/* The translate phase's job: load, key, skip or translate, pack, store. */
static int translate_job(void *arg, unsigned worker)
{
    (void)worker;
    struct prog *it = arg;
    struct run *r = it->run;
    struct kiln_program *p = NULL;
    if (stopping(r))
        return KILN_OK; /* not started: the next run does it */
    int rc = load_program(it, &p);
    if (rc < 0)
        return prog_failed(r, it, rc); /* logged, naming the file or the program */
    if (!it->name) {
        it->name = kiln__malloc(strlen(p->name) + 1);
        if (it->name)
            memcpy(it->name, p->name, strlen(p->name) + 1);
    }
    const char *name = it->name ? it->name : "(program)";

    if (p->has_key) {
        it->key = p->key; /* the source named it */
        rc = KILN_OK;
    } else {
        rc = kiln_program_key(p, &it->key);
    }
    if (rc < 0) {
        KILN_ERROR("prep", "%s: cannot key the program: %s", name, kiln_strerror(rc));
        goto fail;
    }
    it->have_key = true;
    if (!it->remake && kiln_cache_find(r->cache, it->key, NULL) == KILN_OK) {
        it->cached = true;
        kiln_program_destroy(p);
        return KILN_OK;
    }

    rc = r->t ? kiln_program_translate(r->t, p) : need_no_text(p, name);
    if (rc < 0)
        goto fail; /* logged, naming the source and stage */
    struct kiln_program_sealed sealed = {.size = sizeof(sealed)};
    rc = seal_program(r, p, it, name, &sealed);
    if (rc < 0)
        goto fail; /* logged: refused, the other programs go on */
    size_t spirv = sealed.spirv_bytes;
    unsigned nstages = sealed.nstages;
    kiln_program_destroy(p);
    p = NULL;

    pthread_mutex_lock(&r->put_lock);
    rc = store_locked(r, it, spirv, nstages);
    pthread_mutex_unlock(&r->put_lock);
    if (rc < 0) {
        kiln_pack_free(it->payload);
        it->payload = NULL;
    }
    return rc;

fail:
    kiln_program_destroy(p);
    return prog_failed(r, it, rc);
}

static int fail_at(struct kiln_prepare_summary *s, enum kiln_prep_step step, int rc)
{
    if (!s->error) {
        s->error = rc;
        s->step = step;
    }
    return rc;
}

/* Reads back the payloads of the programs found in the cache (and of those
 * stored by this run and repacked since). */
static int load_cached(struct run *r, struct prog *progs, size_t n, unsigned threads,
                       struct kiln_prepare_summary *s)
{
    size_t want = 0;
    for (size_t i = 0; i < n; i++)
        want += progs[i].cached || progs[i].reload;
    if (!want)
        return KILN_OK;
    struct kiln_key *keys = kiln__malloc(want * sizeof(*keys));
    size_t *which = kiln__malloc(want * sizeof(*which));
    if (!keys || !which) {
        kiln__free(keys);
        kiln__free(which);
        return KILN_ENOMEM;
    }
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (progs[i].cached || progs[i].reload) {
            keys[k] = progs[i].key;
            which[k++] = i;
        }
    struct kiln_cache_result *res = NULL;
    int64_t got = kiln_cache_load_many(r->cache, keys, want, threads, &res);
    if (got < 0) {
        KILN_ERROR("prep", "%s: cannot read the program cache: %s", r->o->cache_dir,
                   kiln_strerror((int)got));
        kiln__free(keys);
        kiln__free(which);
        return (int)got;
    }
    for (size_t j = 0; j < want; j++) {
        struct prog *it = &progs[which[j]];
        if (res[j].status < 0) {
            KILN_WARN("prep", "%s: its record could not be read back (%s): translating it again",
                      it->name ? it->name : "(program)", kiln_strerror(res[j].status));
            it->cached = it->reload = false;
            it->remake = true;
            s->remade++;
            continue;
        }
        it->reload = false;
        it->loaded = res[j].data;
        it->size = res[j].size;
        res[j].data = NULL; /* now the program's */
    }
    kiln_cache_results_free(res, want);
    kiln__free(keys);
    kiln__free(which);
    return KILN_OK;
}

/*
 * Runs translate_job on the pool for every program (or, with `remakes`,
 * for the programs marked remake), then syncs the cache. Updates the
 * summary's counts. @return 0 or a pool error; cache errors are left in
 * r->cache_error.
 */
static int translate_pass(struct run *r, struct prog *progs, size_t n, bool remakes,
                          unsigned workers, kiln_prep_progress_fn progress, void *user)
{
    size_t total = 0;
    for (size_t i = 0; i < n; i++)
        total += !remakes || progs[i].remake;
    int rc = kiln__prep_pool(workers, r->memory_budget, r->o->background, r->o->executor, NULL,
                             &r->pool);
    if (rc < 0)
        return rc;
    if (progress)
        progress(user, KILN_PREP_PHASE_TRANSLATE, 0, total);
    uint64_t last = kiln_now_ns();
    for (size_t i = 0; i < n; i++) {
        if (remakes && !progs[i].remake)
            continue;
        rc = kiln_pool_submit(r->pool, translate_job, &progs[i]);
        if (rc == KILN_ENOMEM)
            atomic_store(&r->no_memory, true);
        if (rc < 0)
            break; /* cancelled by a cache error or out of memory */
        kiln__prep_tick(r->pool, 0, total, KILN_PREP_PHASE_TRANSLATE, progress, user, &last);
    }
    /* Stopped while jobs still run (one may never return: a translator
     * stuck): what was stored is made durable now. */
    bool synced = false;
    while (kiln_pool_wait_for(r->pool, 100000000ull) > 0) {
        kiln__prep_tick(r->pool, 0, total, KILN_PREP_PHASE_TRANSLATE, progress, user, &last);
        if (!synced && stopping(r)) {
            synced = true;
            pthread_mutex_lock(&r->put_lock);
            sync_locked(r);
            pthread_mutex_unlock(&r->put_lock);
        }
    }
    kiln__prep_wait(r->pool, 0, total, KILN_PREP_PHASE_TRANSLATE, progress, user);
    kiln_pool_destroy(r->pool);
    r->pool = NULL;
    /* Durable before any pipeline is built. */
    sync_locked(r);
    return KILN_OK;
}

/*
 * The dictionary step (options.dict): when the cache has no dictionary,
 * trains one from its programs and packs every record again with it. The
 * payloads this run made are then dropped, to be read back repacked.
 * @return 0 (also when there were too few modules to train from: one
 * warning) or the repack's error (logged).
 */
static int give_dict(struct run *r, struct prog *progs, size_t n, struct kiln_prepare_summary *s)
{
    if (kiln_cache_dict(r->cache))
        return KILN_OK; /* kept: new programs were packed with it */
    struct kiln_cache_entry *e = NULL;
    size_t ne = 0;
    KILN_TRY(kiln_cache_entries(r->cache, &e, &ne));
    uint64_t stages = 0;
    for (size_t i = 0; i < ne; i++)
        stages += e[i].stages;
    kiln_cache_entries_free(e);
    if (stages < 8) {
        KILN_WARN("prep",
                  "%s: %" PRIu64 " shader stages in the cache, a dictionary needs at least 8: "
                  "kept without one",
                  r->o->cache_dir, stages);
        return KILN_OK;
    }
    struct kiln_cache_rewrite_report rep = KILN_CACHE_REWRITE_REPORT_INIT;
    int rc = kiln_cache_repack(r->cache, KILN_CODEC_KILN, KILN_CACHE_DICT_TRAIN, &rep);
    if (rc == KILN_EINVAL) {
        /* Training refused the samples (logged); the cache is unchanged. */
        KILN_WARN("prep", "%s: no dictionary could be trained: kept without one", r->o->cache_dir);
        return KILN_OK;
    }
    if (rc < 0) {
        KILN_ERROR("prep", "%s: cannot repack the program cache with a new dictionary: %s",
                   r->o->cache_dir, kiln_strerror(rc));
        return rc;
    }
    r->dict = kiln_cache_dict(r->cache);
    s->dict_trained = true;
    s->dict_payload_before = rep.payload_bytes_before;
    s->dict_payload_after = rep.payload_bytes_after;
    for (size_t i = 0; i < n; i++)
        if (progs[i].payload) {
            kiln_pack_free(progs[i].payload);
            progs[i].payload = NULL;
            progs[i].reload = true;
        }
    KILN_INFO("prep",
              "%s: dictionary %016" PRIx64 " trained; %" PRIu64
              " records repacked, payloads %" PRIu64 " -> %" PRIu64 " bytes",
              r->o->cache_dir, kiln_pack_dict_id(r->dict), rep.repacked, rep.payload_bytes_before,
              rep.payload_bytes_after);
    return KILN_OK;
}

/* Counts what the passes did into the summary. */
static void count(const struct run *r, const struct prog *progs, size_t n,
                  struct kiln_prepare_summary *s)
{
    s->cached = s->failed = 0;
    for (size_t i = 0; i < n; i++) {
        s->cached += progs[i].cached;
        s->failed += progs[i].failed;
    }
    s->translated = r->stored;
    s->recorded_invalid = atomic_load(&r->recorded_invalid);
    s->spirv_bytes = r->spirv_bytes;
    s->packed_bytes = r->packed_bytes;
}

/* The host tier for the run (options.binaries), in vk's device: a stale
 * folder of this device is removed, and the run fills a new one (isolated,
 * with what the workers capture and send). NULL: off or not offered. */
static struct kiln__bin_tier *prepare_binaries(const struct kiln_prepare_options *o,
                                               struct kiln_vk *vk,
                                               struct kiln__bin_provider *provider)
{
    struct kiln__bin_tier_options bo = {.cache_dir = o->cache_dir, .io = o->io, .drop_stale = true};
    return kiln__bin_tier_for_run(o->binaries, vk, provider, &bo);
}

/* What one prepare holds from its first phase to its last (prepare()).
 * It stays where prepare() made it: the programs point at `r`, the
 * isolated workers' run is `early.run`. */
struct prepare_run {
    struct run r;
    struct prog *progs;
    struct kiln__prep_item *items;
    size_t n;
    bool lock_made;
    /* The Vulkan context, made beside the translation, and the isolated
     * workers started with the run, greeted beside its device
     * (prep_vk_early.c). */
    struct kiln__prep_early early;
    struct kiln_vk *vk;     /* the run's context: the caller's or own_vk */
    struct kiln_vk *own_vk; /* made by this run */
    uint64_t *ext_masks;
    struct kiln__bin_provider bin_provider;
    struct kiln__bin_tier *bins;
    kiln_prep_progress_fn progress;
    void *progress_user;
};

/* Checks the options before anything is made. @return 0 with the program
 * source in *src, or KILN_EINVAL (logged, and the summary's step INPUT). */
static int check_input(const struct kiln_prepare_options *o, struct kiln_program_source *src,
                       struct kiln_prepare_summary *s)
{
    if (!o || !o->cache_dir || !o->cache_dir[0]) {
        KILN_ERROR("prep", "prepare: no cache folder given");
        return fail_at(s, KILN_PREP_STEP_INPUT, KILN_EINVAL);
    }
    if (!kiln_codec_name(o->codec)) {
        KILN_ERROR("prep", "prepare: unknown codec %d", (int)o->codec);
        return fail_at(s, KILN_PREP_STEP_INPUT, KILN_EINVAL);
    }
    if (o->dict && o->codec != KILN_CODEC_KILN) {
        KILN_ERROR("prep", "prepare: a dictionary goes only with the kiln codec, not %s",
                   kiln_codec_name(o->codec));
        return fail_at(s, KILN_PREP_STEP_INPUT, KILN_EINVAL);
    }
    if (!o->source || KILN_STRUCT_IN(src, o->source, "kiln_program_source") < 0 || !src->load) {
        KILN_ERROR("prep", "prepare: no program source given");
        return fail_at(s, KILN_PREP_STEP_INPUT, KILN_EINVAL);
    }
    if (kiln__prep_check_builders(o->builders, o->nbuilders, "prepare") < 0)
        return fail_at(s, KILN_PREP_STEP_INPUT, KILN_EINVAL);
    if (kiln__isolate_check(o->isolate, o->vk && o->on_pipeline) < 0)
        return fail_at(s, KILN_PREP_STEP_INPUT, KILN_EINVAL);
    if (src->count == 0) {
        KILN_ERROR("prep", "prepare: the program source has no programs");
        return fail_at(s, KILN_PREP_STEP_INPUT, KILN_EINVAL);
    }
    return KILN_OK;
}

/* Opens (or makes) the program cache with its stamp, layers, cap and
 * dictionary: a cache repacked with one is kept, not restarted. */
static int open_cache(struct prepare_run *p, struct kiln_prepare_summary *s)
{
    const struct kiln_prepare_options *o = p->r.o;
    s->stamp = kiln_prepare_stamp(o);
    int rc = make_dirs(o->cache_dir);
    if (rc < 0)
        return fail_at(s, KILN_PREP_STEP_CACHE, rc);
    struct kiln_cache_options copt = {.size = sizeof(copt),
                                      .stamp = s->stamp,
                                      .flags = KILN_CACHE_CREATE | KILN_CACHE_USE_DICT,
                                      .io = o->io,
                                      .executor = o->executor,
                                      .layers = o->layers,
                                      .nlayers = o->nlayers,
                                      .max_size = o->max_size};
    rc = kiln_cache_open(o->cache_dir, &copt, &p->r.cache);
    if (rc < 0) {
        /* Returned to the caller, who reports it (a folder holding another
         * kind of file is the user's input, not kiln's failure). */
        KILN_INFO("prep", "%s: cannot open the program cache: %s", o->cache_dir, kiln_strerror(rc));
        return fail_at(s, KILN_PREP_STEP_CACHE, rc);
    }
    struct kiln_cache_stats cs = KILN_CACHE_STATS_INIT;
    kiln_cache_get_stats(p->r.cache, &cs);
    s->open_kind = cs.open_kind;
    p->r.dict = kiln_cache_dict(p->r.cache);
    return KILN_OK;
}

/* The programs' slots, the pool's size and the memory budget; then the
 * isolated workers start, their contexts begun beside the translation
 * (kiln__isolate_early_begin). */
static int plan_run(struct prepare_run *p, struct kiln_prepare_summary *s, uint64_t t0)
{
    const struct kiln_prepare_options *o = p->r.o;
    size_t n = p->n;
    p->progs = kiln__calloc(n, sizeof(*p->progs));
    p->items = kiln__calloc(n, sizeof(*p->items));
    if (!p->progs || !p->items || pthread_mutex_init(&p->r.put_lock, NULL) != 0)
        return fail_at(s, KILN_PREP_STEP_OTHER, KILN_ENOMEM);
    p->lock_made = true;
    for (size_t i = 0; i < n; i++)
        p->progs[i] = (struct prog){.run = &p->r, .index = (uint32_t)i};
    struct kiln_pool_plan plan = KILN_POOL_PLAN_INIT;
    s->workers = kiln_pool_auto_workers(
        o->background ? KILN_POOL_WORK_BACKGROUND : KILN_POOL_WORK_BUILD, o->jobs, &plan);
    snprintf(s->workers_reason, sizeof(s->workers_reason), "%s", plan.reason);
    if (o->memory_budget == 0) {
        char why[256];
        p->r.memory_budget = kiln_pool_default_memory_budget(why, sizeof(why));
        KILN_INFO("prep", "%s", why);
    } else if (o->memory_budget != UINT64_MAX) {
        p->r.memory_budget = o->memory_budget;
    }
    s->memory_budget = p->r.memory_budget;
    s->open_ns = kiln_now_ns() - t0;
    kiln__prep_early_workers(&p->early, o->background, n, s->workers);
    return KILN_OK;
}

/* One translate pass (`remake`: only the damaged records) and what stops
 * the run after it: a cache error, or want of memory. */
static int translate_checked(struct prepare_run *p, bool remake, struct kiln_prepare_summary *s)
{
    uint64_t t = kiln_now_ns();
    int rc =
        translate_pass(&p->r, p->progs, p->n, remake, s->workers, p->progress, p->progress_user);
    s->translate_ns += kiln_now_ns() - t;
    if (rc < 0)
        return fail_at(s, KILN_PREP_STEP_OTHER, rc);
    if (p->r.cache_error)
        return fail_at(s, KILN_PREP_STEP_CACHE, p->r.cache_error);
    if (atomic_load(&p->r.no_memory))
        return fail_at(s, KILN_PREP_STEP_OTHER, KILN_ENOMEM);
    return KILN_OK;
}

/* Translate, pack and store, on the pool; then the dictionary step. */
static int translate_phase(struct prepare_run *p, struct kiln_prepare_summary *s)
{
    KILN_TRY(translate_checked(p, false, s));
    if (stopping(&p->r)) {
        /* What was stored is synced (translate_pass): the next run resumes. */
        return fail_at(s, KILN_PREP_STEP_OTHER, KILN_ECANCELED);
    }
    if (!p->r.o->dict)
        return KILN_OK;
    uint64_t td = kiln_now_ns();
    int rc = give_dict(&p->r, p->progs, p->n, s);
    s->dict_ns = kiln_now_ns() - td;
    return rc < 0 ? fail_at(s, KILN_PREP_STEP_CACHE, rc) : KILN_OK;
}

/* The payloads of the programs the cache had already (damaged records
 * made again, the new record replacing the old), then the items to build. */
static int load_phase(struct prepare_run *p, struct kiln_prepare_summary *s)
{
    uint64_t t = kiln_now_ns();
    int rc = load_cached(&p->r, p->progs, p->n,
                         kiln_pool_auto_workers(KILN_POOL_WORK_READ, s->workers, NULL), s);
    s->load_ns = kiln_now_ns() - t;
    if (rc < 0)
        return fail_at(s, KILN_PREP_STEP_CACHE, rc);
    if (s->remade)
        KILN_TRY(translate_checked(p, true, s));
    for (size_t i = 0; i < p->n; i++) {
        const struct prog *g = &p->progs[i];
        p->items[i].key = g->key;
        p->items[i].name = g->name;
        p->items[i].payload = g->payload ? g->payload : g->loaded;
        /* Made by this run, so validated before it was stored (translate_job). */
        p->items[i].validated = g->payload != NULL;
        p->items[i].size = g->size;
    }
    return KILN_OK;
}

/* Vulkan, with the builders' extensions these items need: the context
 * begun beside the translation is finished with them. Every stage is
 * validated before its build (start.c, kiln_program_open). */
static int vulkan_phase(struct prepare_run *p, struct kiln_prepare_summary *s)
{
    struct kiln__prep_vk_want want = KILN__PREP_VK_WANT(p->r.o, p->items, p->n);
    struct kiln__prep_vk_got got;
    struct kiln__prep_vk_report report = KILN__PREP_VK_REPORT(s);
    int rc = kiln__prep_early_finish(&p->early, &want, p->r.dict, &got, &report);
    p->vk = got.vk;
    p->own_vk = got.own;
    p->ext_masks = got.masks;
    if (rc < 0)
        return fail_at(s, KILN_PREP_STEP_VULKAN, rc);
    s->vulkan = true;
    return KILN_OK;
}

/* Builds every item, in this process's pool or in isolated workers (whose
 * pipeline caches are merged into the run's). @return the pipelines built,
 * or the error. */
static int64_t build_items(struct prepare_run *p, struct kiln__prep_build *b,
                           struct kiln__prep_ledger *ledger, struct kiln_prepare_summary *s)
{
    const struct kiln_prepare_options *o = p->r.o;
    if (!o->isolate)
        return kiln__prep_build_all(b, p->items, p->n, s->workers, &s->pipelines_failed);
    struct kiln__isolate_run *iso = &p->early.run;
    iso->build_hint_ns = kiln__prep_ledger_build_ns(ledger);
    iso->start_hint_ns = !p->own_vk   ? 0
                         : iso->early ? s->vulkan_ns - s->vulkan_overlap_ns
                                      : s->vulkan_ns;
    kiln__prep_isolate_extensions(o->builders, o->nbuilders, p->ext_masks, iso);
    struct kiln__isolate_stats ist;
    int64_t built =
        kiln__isolate_build_all(b, iso, p->items, p->n, s->workers, &s->pipelines_failed, &ist);
    KILN__ISOLATE_STATS_TO(s, &ist);
    return built;
}

/* The driver's compiled pipelines saved for the warm start (pipelines.vkc),
 * the driver's feedback counted, and the ledger's record of the run. */
static void save_phase(struct prepare_run *p, struct kiln__prep_build *b,
                       struct kiln__prep_ledger *ledger, struct kiln_prepare_summary *s)
{
    const struct kiln_prepare_options *o = p->r.o;
    uint64_t t = kiln_now_ns();
    int rc = kiln_vk_cache_save(p->vk);
    if (rc < 0 && !(o->vk && rc == KILN_EINVAL)) {
        KILN_ERROR("prep", "%s: cannot save %s: %s", o->cache_dir, KILN_VK_CACHE_FILE,
                   kiln_strerror(rc));
        fail_at(s, KILN_PREP_STEP_CACHE, rc);
    }
    s->feedback_pipelines = atomic_load(&b->feedback_pipelines);
    s->driver_cache_hits = atomic_load(&b->feedback_cache_hits);
    s->driver_ns = atomic_load(&b->feedback_driver_ns);
    struct kiln__ledger_run word;
    kiln__prep_run_word(b, s->pipelines_built, KILN_LEDGER_RUN_PREPARE, &word);
    kiln__prep_ledger_end(ledger, p->items, p->n, rc == KILN_OK, &word);
    s->save_ns = kiln_now_ns() - t;
    if (!s->error && (atomic_load(&b->stopped) || stopping(&p->r)))
        fail_at(s, KILN_PREP_STEP_OTHER, KILN_ECANCELED);
}

/* Every pipeline: the host tier swept and opened, the ledger's answer
 * first, builds admitted by what each is expected to need under a budget
 * (prep_memory.c, learned on this driver in earlier runs), then saved. */
static int build_phase(struct prepare_run *p, struct kiln_prepare_summary *s)
{
    const struct kiln_prepare_options *o = p->r.o;
    uint64_t t = kiln_now_ns();
    struct kiln__prep_build b = {.vk = p->vk,
                                 .dict = p->r.dict,
                                 .on_pipeline = o->vk ? o->on_pipeline : NULL,
                                 .pipeline_user = o->pipeline_user,
                                 .progress = p->progress,
                                 .progress_user = p->progress_user,
                                 .builders = o->builders,
                                 .nbuilders = o->nbuilders,
                                 .memory_budget = p->r.memory_budget,
                                 .background = o->background,
                                 .executor = o->executor,
                                 .cancel = o->cancel,
                                 .cancel_user = o->cancel_user};
    if (o->binaries != KILN_BINARIES_OFF) {
        /* The tier follows the programs (a prune or the cap dropped some). */
        struct kiln_binaries_sweep_report sw;
        if (kiln__bin_sweep(p->r.cache, o->io, &sw) == KILN_OK)
            s->binaries_swept = sw.swept;
    }
    p->bins = prepare_binaries(o, p->vk, &p->bin_provider);
    b.bins = p->bins;
    struct kiln__prep_ledger *ledger = NULL;
    int rc = kiln__prep_ledger_begin(o, p->vk, p->bins, p->items, p->n, s, &ledger);
    if (rc < 0)
        return fail_at(s, KILN_PREP_STEP_OTHER, rc);
    b.journal = kiln__prep_ledger_journal(ledger);
    struct kiln__prep_memory mem;
    kiln__prep_memory_init(&mem);
    if (p->r.memory_budget && !o->largest_seen_budget) {
        kiln__prep_ledger_memory_load(ledger, &mem);
        b.memory = &mem;
    }
    int64_t built = build_items(p, &b, ledger, s);
    s->pipelines_ns = kiln_now_ns() - t;
    s->pipelines_skipped = kiln__prep_kind_counts(&b, s->kinds);
    /* Made by this run: counted when stored (one warning line each). */
    s->recorded_invalid += atomic_load(&b.recorded_invalid);
    kiln__prep_ledger_memory_keep(ledger, b.memory);
    kiln__prep_memory_destroy(&mem);
    if (built < 0) {
        kiln__prep_ledger_end(ledger, p->items, p->n, false, NULL);
        return fail_at(s, KILN_PREP_STEP_OTHER, (int)built);
    }
    s->pipelines_built = (uint64_t)built;
    /* Only what reached a driver or builder: not a stage refused before
     * its build, nor a program no worker received. */
    uint64_t not_compiled = atomic_load(&b.bad) + atomic_load(&b.unreached);
    s->driver_compiles = s->pipelines_built + s->pipelines_failed -
                         (not_compiled < s->pipelines_failed ? not_compiled : s->pipelines_failed);
    save_phase(p, &b, ledger, s);
    return KILN_OK;
}

/* Counts into the summary and frees what the run made, whichever phase it
 * ended in. */
static void finish_run(struct prepare_run *p, struct kiln_prepare_summary *s, uint64_t t0)
{
    if (p->progs)
        count(&p->r, p->progs, p->n, s);
    if (p->r.cache) {
        const struct kiln_pack_dict *d = kiln_cache_dict(p->r.cache);
        size_t dsize = 0;
        s->dict_id = kiln_pack_dict_id(d);
        if (d && kiln_pack_dict_bytes(d, &dsize))
            s->dict_bytes = dsize;
    }
    KILN__PREP_BINARIES_COUNTS(p->bins, s);
    kiln__bin_tier_close(p->bins);
    kiln__prep_early_end(&p->early);
    kiln_vk_destroy(p->own_vk);
    kiln__free(p->ext_masks);
    for (size_t i = 0; p->progs && i < p->n; i++) {
        kiln__free(p->progs[i].name);
        kiln_pack_free(p->progs[i].payload);
        kiln_cache_payload_free(p->progs[i].loaded);
    }
    kiln__free(p->items);
    kiln__free(p->progs);
    if (p->lock_made)
        pthread_mutex_destroy(&p->r.put_lock);
    kiln_cache_close(p->r.cache);
    s->canceled = s->error == KILN_ECANCELED;
    s->total_ns = kiln_now_ns() - t0;
    s->peak_rss = kiln_peak_rss_bytes();
}

/* The run, phase by phase; each phase that fails has set the summary's
 * error and step, and the phases after it are skipped. */
static int prepare(const struct kiln_prepare_options *o, kiln_prep_progress_fn progress,
                   void *progress_user, struct kiln_prepare_summary *s, uint64_t t0)
{
    struct kiln_program_source src;
    KILN_TRY(check_input(o, &src, s));
    struct prepare_run p = {
        .r = {.o = o,
              .src = src,
              .t = o->translator,
              .sync_every = o->sync_every ? o->sync_every : KILN_PREPARE_SYNC_EVERY},
        .n = src.count,
        .progress = progress,
        .progress_user = progress_user};
    KILN__PREP_EARLY_INIT(&p.early, o);
    p.early.run.binaries = p.early.run.keep_binaries =
        o->isolate && o->binaries != KILN_BINARIES_OFF;
    s->programs = p.n;
    kiln__prep_early_context(&p.early);

    int rc = open_cache(&p, s);
    if (rc == KILN_OK)
        rc = plan_run(&p, s, t0);
    if (rc == KILN_OK)
        rc = translate_phase(&p, s);
    if (rc == KILN_OK && !o->no_vulkan)
        rc = load_phase(&p, s);
    if (rc == KILN_OK && !o->no_vulkan)
        rc = vulkan_phase(&p, s);
    if (rc == KILN_OK && !o->no_vulkan)
        build_phase(&p, s);
    finish_run(&p, s, t0);
    return s->error;
}

/* The caller's options and summary, read and written by the growable rule
 * (docs/abi.md), around prepare(). */
static int prepare_body(const struct kiln_prepare_options *o, kiln_prep_progress_fn progress,
                        void *progress_user, struct kiln_prepare_summary *summary)
{
    if (!summary)
        return KILN_EINVAL;
    KILN_TRY(kiln__struct_out_check(summary, "kiln_prepare_summary"));
    uint64_t t0 = kiln_now_ns();
    struct kiln_prepare_summary s = KILN_PREPARE_SUMMARY_INIT;
    memset(&s, 0, sizeof(s));
    s.size = sizeof(s);
    struct kiln_prepare_options opt = KILN_PREPARE_OPTIONS_INIT;
    struct kiln__prep_abi abi = {.builders.list = NULL};
    int rc = o ? KILN_STRUCT_IN(&opt, o, "kiln_prepare_options") : KILN_OK;
    if (o && rc == KILN_OK)
        rc = kiln__prep_abi_in(&abi, &opt.translator, &opt.isolate, opt.io, &opt.builders,
                               &opt.nbuilders);
    if (rc == KILN_OK)
        rc = prepare(o ? &opt : NULL, progress, progress_user, &s, t0);
    else
        fail_at(&s, KILN_PREP_STEP_INPUT, rc);
    kiln__prep_abi_free(&abi);
    KILN_STRUCT_OUT(summary, &s);
    return rc;
}

/* The run gives no handle: a failure's text is the thread's (kiln_last_errmsg). */
int kiln_prepare(const struct kiln_prepare_options *o, kiln_prep_progress_fn progress,
                 void *progress_user, struct kiln_prepare_summary *s)
{
    uint64_t m = kiln__err_mark();
    return kiln__err_end(NULL, m, "kiln_prepare", o ? o->cache_dir : NULL,
                         prepare_body(o, progress, progress_user, s));
}
