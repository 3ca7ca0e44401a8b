/*
 * prep_session.c - one program's pipeline built on demand, through the
 * same path as the warm start's pipeline phase (kiln_build_session).
 *
 * Design. A session is the pipeline phase of kiln_warm_start cut to one
 * program at a time: the builders are read once at the door
 * (kiln__prep_builders_in, the growable rule), and each run hands one
 * payload to kiln__prep_build_one (start.c), which opens and checks the
 * stages, stages them, calls the builder for the state kind (or kiln's own
 * shapes) and releases the stages: there is no second build loop. Each run
 * has its own kiln__prep_build on the stack, so runs share nothing but the
 * session's read-only fields and can go on any number of threads at once.
 * The pipeline reaches the run through the phase's on_pipeline callback,
 * pointed at the run's own slot. The builders' finish callbacks run once,
 * in kiln_build_session_destroy, as at the end of a pipeline phase.
 *
 * Ask before compiling. A run's flags (KILN_BUILD_PROBE, and
 * KILN_BUILD_COMPILE_ON_MISS: the miss compiled in the same build) go to
 * the phase
 * (kiln__prep_build.build_flags), which hands them to the builder or to
 * kiln's own shapes, and the driver's feedback comes back in the run's
 * item; a probe the driver answers VK_PIPELINE_COMPILE_REQUIRED is an
 * answer (KILN_ECOMPILE_REQUIRED), never a failure. The session sums the
 * driver's word over its runs (atomics: runs go on at once).
 *
 * The ledger. With ledger_dir, a run's failure is noted at once (in
 * memory, under `lock`), a build only remembered: BUILT is noted by
 * kiln_build_session_save after pipelines.vkc was saved, so the ledger
 * never claims what the pipeline cache does not hold (prep_run.c's rule).
 * The caller holds the cache's writer lock, the ledger's one-writer rule.
 */
#include "kiln_internal.h"
#include "binaries.h"
#include "ledger.h"
#include "prep_internal.h"

#include <pthread.h>
#include <string.h>
#include <time.h>

/* What the runs of a session did, by the driver's word. */
struct session_word {
    _Atomic uint64_t pipelines, feedback, cache_hits, driver_ns, probed, probe_hits;
};

struct kiln_build_session {
    struct kiln_vk *vk;
    const struct kiln_pack_dict *dict;
    /* The library's copy, with the default builders after the caller's
     * (kiln__prep_builders_in: the Fossilize state builder). */
    struct kiln__prep_builders builders;
    struct session_word word;
    /* The ledger (NULL: none) and the keys built since the last save. */
    pthread_mutex_t lock;
    struct kiln__ledger *ledger;
    struct kiln_key *built;
    size_t nbuilt, built_cap;
    /* The host tier, read only (NULL: off), and its provider's storage. */
    struct kiln__bin_tier *bins;
    struct kiln__bin_provider bin_provider;
};

/* Opens the ledger of options' ledger_dir for vk's driver; one that cannot
 * be opened is logged and left out (only the notes are lost). */
static void open_ledger(struct kiln_build_session *s, const struct kiln_build_session_options *o)
{
    if (!o->ledger_dir)
        return;
    struct kiln__ledger_driver d;
    kiln__prep_driver(s->vk, &d);
    int rc = kiln__ledger_open(o->ledger_dir, o->ledger_io, &d, &s->ledger);
    if (rc < 0)
        KILN_WARN("prep", "%s: build session: cannot open the build ledger (%s): nothing noted",
                  o->ledger_dir, kiln_strerror(rc));
}

int kiln_build_session_create(const struct kiln_build_session_options *o,
                              struct kiln_build_session **out)
{
    if (!o || !out)
        return KILN_EINVAL;
    *out = NULL;
    struct kiln_build_session_options opt;
    KILN_TRY(KILN_STRUCT_IN(&opt, o, "kiln_build_session_options"));
    if (!opt.vk) {
        KILN_ERROR("prep", "build session: no Vulkan context given");
        return KILN_EINVAL;
    }
    struct kiln_build_session *s = kiln__calloc(1, sizeof(*s));
    if (!s)
        return KILN_ENOMEM;
    /* A missing array is refused here; the builders themselves in the copy
     * (the caller's array is read at its own stride there). */
    int rc = opt.nbuilders && !opt.builders
                 ? kiln__prep_check_builders(NULL, opt.nbuilders, "build session")
                 : KILN_OK;
    if (rc == KILN_OK)
        rc = kiln__prep_builders_in(opt.builders, opt.nbuilders, &s->builders);
    if (rc == KILN_OK)
        rc = kiln__prep_check_builders(s->builders.list, s->builders.n, "build session");
    if (rc < 0) {
        kiln__prep_builders_free(&s->builders);
        kiln__free(s);
        return rc;
    }
    s->vk = opt.vk;
    s->dict = opt.dict;
    pthread_mutex_init(&s->lock, NULL);
    open_ledger(s, &opt);
    if (opt.binaries != KILN_BINARIES_OFF && opt.binaries_dir) {
        struct kiln__bin_tier_options bo = {
            .cache_dir = opt.binaries_dir, .io = opt.ledger_io, .read_only = !opt.binaries_keep};
        s->bins = kiln__bin_tier_for_run(opt.binaries, s->vk, &s->bin_provider, &bo);
    }
    *out = s;
    return KILN_OK;
}

/* The phase's on_pipeline, pointed at one run's slot. */
static void take_pipeline(void *user, struct kiln_key key, struct kiln_vk_pipeline *pipeline)
{
    (void)key;
    *(struct kiln_vk_pipeline **)user = pipeline;
}

/* A run's failure that is the build's word (not a probe's answer, a skip,
 * a cancel or memory), noted as FAILED; a build remembered for the save. */
static void note_run(struct kiln_build_session *s, struct kiln_key key, int rc)
{
    if (!s->ledger || rc == KILN_ECOMPILE_REQUIRED || rc == KILN_ENOTSUP || rc == KILN_ECANCELED ||
        rc == KILN_ENOMEM)
        return;
    pthread_mutex_lock(&s->lock);
    struct kiln_key *grown = NULL;
    if (rc < 0)
        kiln__ledger_note(s->ledger, key, KILN__LEDGER_FAILED, rc, kiln_errname(rc));
    else if ((grown = kiln__grow(s->built, s->nbuilt, &s->built_cap, sizeof(*grown), 64)) != NULL)
        (s->built = grown)[s->nbuilt++] = key;
    pthread_mutex_unlock(&s->lock);
}

/* Adds a run's answer to the session's word on its builds. */
static void count_word(struct session_word *w, const struct kiln_build_run *r, int rc)
{
    if (r->flags & KILN_BUILD_PROBE) {
        atomic_fetch_add(&w->probed, 1);
        if (rc == KILN_OK && !r->probe_missed)
            atomic_fetch_add(&w->probe_hits, 1);
    }
    if (rc < 0)
        return;
    if (r->pipeline) /* (a builder may keep its pipeline: its feedback still counts) */
        atomic_fetch_add(&w->pipelines, 1);
    if (!r->feedback_valid)
        return;
    atomic_fetch_add(&w->feedback, 1);
    atomic_fetch_add(&w->cache_hits, r->driver_cache_hit ? 1 : 0);
    atomic_fetch_add(&w->driver_ns, r->driver_ns);
}

static int run_body(struct kiln_build_session *s, struct kiln_build_run *r)
{
    if ((r->flags & KILN_BUILD_PROBE) && !kiln_vk_get_info(s->vk)->compile_probe)
        return KILN_ENOTSUP; /* a probe here would compile */
    struct kiln_vk_pipeline *got = NULL;
    struct kiln__prep_build b = {.vk = s->vk,
                                 .dict = s->dict,
                                 .on_pipeline = take_pipeline,
                                 .pipeline_user = &got,
                                 .builders = s->builders.list,
                                 .nbuilders = s->builders.n,
                                 .bins = s->bins,
                                 .build_flags =
                                     r->flags & (KILN_BUILD_PROBE | KILN_BUILD_COMPILE_ON_MISS)};
    struct kiln__prep_item item = {
        .key = r->key, .payload = r->payload, .size = r->payload_size, .link = r->link};
    int rc = kiln__prep_build_one(&b, &item, r->worker);
    if (rc == KILN_OK)
        rc = item.status; /* a skip answers KILN_OK with KILN_ENOTSUP here */
    if (rc < 0 && got) {
        kiln_vk_pipeline_destroy(s->vk, got);
        got = NULL;
    }
    r->pipeline = got;
    r->feedback_valid = rc == KILN_OK && item.feedback_valid;
    r->driver_cache_hit = r->feedback_valid && item.driver_cache_hit;
    r->driver_ns = r->feedback_valid ? item.driver_ns : 0;
    r->probe_missed = item.probe_missed;
    r->linked = got && item.linked;
    r->parts_built = item.parts_built;
    r->parts_reused = item.parts_reused;
    r->from_binaries = rc == KILN_OK && item.from_binaries;
    r->binaries_kept = rc == KILN_OK && item.binaries_kept;
    count_word(&s->word, r, rc);
    if (!(r->link & KILN_BUILD_LINK_PARTS))
        note_run(s, r->key, rc); /* parts alone are no build of the program */
    return rc;
}

int kiln_build_session_run_with(struct kiln_build_session *s, struct kiln_build_run *run)
{
    if (!s || !run)
        return KILN_EINVAL;
    struct kiln_build_run r;
    KILN_TRY(KILN_STRUCT_IN(&r, run, "kiln_build_run"));
    KILN_TRY(kiln__struct_out_check(run, "kiln_build_run"));
    r.pipeline = NULL;
    r.feedback_valid = r.driver_cache_hit = r.probe_missed = false;
    r.driver_ns = 0;
    r.linked = false;
    r.parts_built = r.parts_reused = 0;
    r.from_binaries = r.binaries_kept = false;
    int rc = r.payload ? run_body(s, &r) : KILN_EINVAL;
    KILN_STRUCT_OUT(run, &r);
    return rc;
}

int kiln_build_session_run(struct kiln_build_session *s, struct kiln_key key, const void *payload,
                           size_t size, unsigned worker, struct kiln_vk_pipeline **pipeline)
{
    if (pipeline)
        *pipeline = NULL;
    if (!s || !payload || !pipeline)
        return KILN_EINVAL;
    struct kiln_build_run r = {
        .size = sizeof(r), .key = key, .payload = payload, .payload_size = size, .worker = worker};
    int rc = run_body(s, &r);
    *pipeline = r.pipeline;
    return rc;
}

int kiln_build_session_save(struct kiln_build_session *s)
{
    if (!s)
        return KILN_EINVAL;
    if (!s->ledger)
        return KILN_OK;
    pthread_mutex_lock(&s->lock);
    bool built = s->nbuilt > 0;
    pthread_mutex_unlock(&s->lock);
    int vrc = built ? kiln_vk_cache_save(s->vk) : KILN_OK; /* nothing new: no save */
    if (vrc == KILN_EINVAL) /* a context without a cache folder: nothing to save */
        KILN_INFO("prep", "build session: no pipelines.vkc to save: builds not noted as built");
    else if (vrc < 0)
        KILN_WARN("prep", "build session: pipelines.vkc not saved (%s): builds not noted as built",
                  kiln_strerror(vrc));
    struct kiln__ledger_run run = {
        .kind = KILN_LEDGER_RUN_SERVICE,
        .when = (uint64_t)time(NULL),
        .pipelines = atomic_load(&s->word.pipelines),
        .feedback = atomic_load(&s->word.feedback),
        .cache_hits = atomic_load(&s->word.cache_hits),
        .driver_ns = atomic_load(&s->word.driver_ns),
        .probed = atomic_load(&s->word.probed),
        .probe_hits = atomic_load(&s->word.probe_hits),
    };
    int rc = KILN_OK;
    pthread_mutex_lock(&s->lock);
    for (size_t i = 0; vrc == KILN_OK && rc == KILN_OK && i < s->nbuilt; i++)
        rc = kiln__ledger_note(s->ledger, s->built[i], KILN__LEDGER_BUILT, 0, NULL);
    s->nbuilt = 0;
    if (rc == KILN_OK && (run.pipelines || run.probed))
        rc = kiln__ledger_note_run(s->ledger, &run);
    if (rc == KILN_OK)
        rc = kiln__ledger_sync(s->ledger);
    pthread_mutex_unlock(&s->lock);
    kiln__bin_tier_sync(s->bins); /* logs its own failure: only binaries are at stake */
    if (rc < 0)
        KILN_WARN("prep", "build session: cannot write the build ledger (%s)", kiln_strerror(rc));
    return rc < 0 ? rc : vrc;
}

void kiln_build_session_destroy(struct kiln_build_session *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->builders.n; i++)
        if (s->builders.list[i].finish)
            s->builders.list[i].finish(s->builders.list[i].user);
    kiln__prep_builders_free(&s->builders);
    kiln__ledger_close(s->ledger);
    kiln__bin_tier_close(s->bins);
    kiln__free(s->built);
    pthread_mutex_destroy(&s->lock);
    kiln__free(s);
}
