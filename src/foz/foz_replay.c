/*
 * foz_replay.c - kiln_foz_replay: every pipeline of some archives built
 * in-process on a device, the application's or kiln's (docs/foz.md,
 * "Replaying in-process").
 *
 * Design.
 * - One path to the driver: each pipeline is made as the warm start makes
 *   it (kiln_foz_pipelines_load gives the program, its stages are staged
 *   by kiln_vk_stage_module and handed to a builder of kind KILN_STATE_FOZ
 *   in a struct kiln_build_request), so a replay exercises what a warm
 *   start of the imported archive would. The builder is read, or the
 *   default one made, where the warm start's are (kiln__prep_builders_in):
 *   the Fossilize one (kiln_foz_kiln_builder_create),
 *   which takes the device, its features and its limits from the context:
 *   an external context (kiln_vk_external) replays on the application's
 *   own device with what it enabled.
 * - Jobs are independent: each loads, stages, builds and destroys its own
 *   pipeline and writes only its own slot of the outcome array, so the
 *   counts are summed after the pool is idle, with no lock on the path.
 * - The builder's finish runs once every build is done, while the device
 *   still lives, so its shared objects never outlive the context.
 */
#define VK_NO_PROTOTYPES
#include <vulkan/vulkan.h>

#include "foz_private.h"
#include "kiln/pool.h"
#include "kiln/vk.h"

#include <inttypes.h>

/* What one pipeline came to. */
struct outcome {
    int rc;
    char why[256];
};

struct replay {
    const struct kiln_foz_pipelines *fp;
    struct kiln_vk *vk;
    const struct kiln_builder *builder;
    struct kiln_vk_handles h;
    PFN_vkGetDeviceProcAddr gdpa;
    PFN_vkDestroyPipeline destroy;
    struct outcome *out;
};

/* Stages every stage of `p` into st[] (as many as it returns in *n,
 * released by the caller whatever happens). The words are handed as they
 * are (kiln_vk_stage.words): a Fossilize program holds them unpacked. */
static int stage_all(struct replay *r, const struct kiln_program *p, struct kiln_vk_staged *st,
                     VkPipelineShaderStageCreateInfo *info, uint32_t *n)
{
    *n = 0;
    for (unsigned i = 0; i < p->nstages; i++) {
        const struct kiln_program_stage *ps = &p->stages[i];
        struct kiln_vk_stage src = KILN_VK_STAGE_INIT;
        src.words = ps->words;
        src.nwords = ps->nwords;
        src.entry = ps->entry;
        st[i] = (struct kiln_vk_staged){.size = sizeof(st[i])};
        KILN_TRY(kiln_vk_stage_module(r->vk, p->name, &src, (VkShaderStageFlagBits)ps->src.stage,
                                      &st[i]));
        info[i] = st[i].info;
        *n = i + 1;
    }
    return KILN_OK;
}

/* One job's argument: the run and the index, without an allocation each. */
struct job {
    struct replay *r;
    size_t i;
};

/* Builds pipeline j->i and destroys it. */
static int job_run(void *arg, unsigned worker)
{
    struct job *j = arg;
    struct replay *r = j->r;
    struct outcome *o = &r->out[j->i];
    struct kiln_program *p = NULL;
    o->rc = kiln_foz_pipelines_load(r->fp, j->i, &p);
    if (o->rc < 0) {
        snprintf(o->why, sizeof(o->why), "its program does not load: %s", kiln_strerror(o->rc));
        return o->rc;
    }
    struct kiln_vk_staged st[KILN_PROGRAM_MAX_STAGES];
    VkPipelineShaderStageCreateInfo info[KILN_PROGRAM_MAX_STAGES];
    uint32_t n = 0;
    o->rc = p->nstages > KILN_PROGRAM_MAX_STAGES ? KILN_ERANGE : stage_all(r, p, st, info, &n);
    if (o->rc < 0) {
        snprintf(o->why, sizeof(o->why), "a stage does not stage: %s", kiln_strerror(o->rc));
    } else {
        struct kiln_build_request req = KILN_BUILD_REQUEST_INIT;
        memset(&req, 0, sizeof(req));
        req.size = sizeof(req);
        req.key = kiln_foz_pipelines_get(r->fp, j->i)->key;
        req.name = p->name;
        req.state_kind = p->state_kind;
        req.state = p->state;
        req.state_size = p->state_size;
        req.nstages = n;
        req.stages = info;
        req.device = r->h.device;
        req.get_device_proc_addr = r->gdpa;
        req.pipeline_cache = r->h.pipeline_cache;
        req.vk = r->vk;
        req.worker = worker;
        o->rc = r->builder->build(r->builder->user, &req);
        if (req.pipeline != VK_NULL_HANDLE)
            r->destroy(r->h.device, req.pipeline, kiln_vk_allocator(r->vk));
        if (o->rc < 0)
            snprintf(o->why, sizeof(o->why), "%s", req.why[0] ? req.why : kiln_strerror(o->rc));
    }
    for (uint32_t k = 0; k < n; k++)
        kiln_vk_stage_release(r->vk, &st[k]);
    if (o->rc < 0)
        KILN_WARN("foz", "replay: %s: %s", p->name, o->why);
    kiln_program_destroy(p);
    return o->rc;
}

/* Runs every job, on the calling thread or a pool of `workers`. */
static int run_all(struct replay *r, size_t n, unsigned workers)
{
    struct job *jobs = kiln__calloc(n ? n : 1, sizeof(*jobs));
    if (!jobs)
        return KILN_ENOMEM;
    for (size_t i = 0; i < n; i++)
        jobs[i] = (struct job){r, i};
    int rc = KILN_OK;
    if (workers <= 1) {
        for (size_t i = 0; i < n; i++)
            job_run(&jobs[i], 0);
    } else {
        struct kiln_pool *pool = NULL;
        rc = kiln_pool_create(workers, 0, &pool);
        for (size_t i = 0; rc == KILN_OK && i < n; i++)
            rc = kiln_pool_submit(pool, job_run, &jobs[i]);
        if (pool) {
            int wrc = kiln_pool_wait(pool);
            rc = rc < 0 ? rc : wrc;
        }
        kiln_pool_destroy(pool);
    }
    kiln__free(jobs);
    return rc;
}

/* Sums the outcomes into the report. */
static void tally(const struct replay *r, size_t n, struct kiln_foz_replay_report *rep)
{
    rep->pipelines = n;
    for (size_t i = 0; i < n; i++) {
        enum kiln_foz_kind k = kiln_foz_kind_of(kiln_foz_pipelines_get(r->fp, i)->tag);
        if (k == KILN_FOZ_KIND_COUNT)
            continue;
        const struct outcome *o = &r->out[i];
        if (o->rc == KILN_OK)
            rep->built[k]++;
        else if (o->rc == KILN_ENOTSUP)
            rep->skipped[k]++;
        else
            rep->failed[k]++;
        if (o->rc < 0 && !rep->first_problem[0])
            snprintf(rep->first_problem, sizeof(rep->first_problem),
                     "%s pipeline %016" PRIx64 ": %.200s", kiln_foz_kind_name(k),
                     kiln_foz_pipelines_get(r->fp, i)->hash, o->why);
    }
}

/* The device's functions the run needs beside the builder's. */
static int device_functions(struct replay *r)
{
    r->h = (struct kiln_vk_handles)KILN_VK_HANDLES_INIT;
    kiln_vk_get_handles(r->vk, &r->h);
    r->gdpa = r->h.get_instance_proc_addr ? (PFN_vkGetDeviceProcAddr)r->h.get_instance_proc_addr(
                                                r->h.instance, "vkGetDeviceProcAddr")
                                          : NULL;
    r->destroy = r->gdpa ? (PFN_vkDestroyPipeline)r->gdpa(r->h.device, "vkDestroyPipeline") : NULL;
    return r->destroy ? KILN_OK : KILN_ENOTSUP;
}

/* The replay over an open set, with a context and a builder. */
static int replay_set(struct replay *r, unsigned workers, struct kiln_foz_replay_report *rep)
{
    KILN_TRY(device_functions(r));
    size_t n = kiln_foz_pipelines_count(r->fp);
    r->out = kiln__calloc(n ? n : 1, sizeof(*r->out));
    if (!r->out)
        return KILN_ENOMEM;
    int rc = run_all(r, n, workers);
    if (r->builder->finish)
        r->builder->finish(r->builder->user);
    tally(r, n, rep);
    kiln__free(r->out);
    r->out = NULL;
    return rc;
}

/* A context of kiln's own, asking for the Fossilize state extensions. */
static int own_context(struct kiln_vk **out)
{
    static const char *const extra[] = {KILN_FOZ_DEVICE_EXTENSIONS};
    struct kiln_vk_options vo = KILN_VK_OPTIONS_INIT;
    vo.extra_extensions = extra;
    vo.extra_extension_count = (uint32_t)KILN_ARRAY_LEN(extra);
    return kiln_vk_create(&vo, out);
}

/* The builder of KILN_STATE_FOZ to replay with: the caller's, read by the
 * growable rule, or the core's default (kiln__prep_builders_in, prep_abi.c,
 * the warm start's one home for both). */
static int replay_builder(const struct kiln_builder *given, struct kiln__prep_builders *bl,
                          const struct kiln_builder **out)
{
    *out = NULL;
    KILN_TRY(kiln__prep_builders_in(given, given ? 1 : 0, bl));
    /* The caller's comes first in the copy, the core's default after it. */
    if (bl->list && bl->list[0].kind == KILN_STATE_FOZ)
        *out = &bl->list[0];
    if (!*out || !(*out)->build) {
        KILN_ERROR("foz", "replay: %s",
                   *out ? "a builder without build" : "the builder given is not of KILN_STATE_FOZ");
        return KILN_EINVAL;
    }
    return KILN_OK;
}

/* The replay of options `o` into `rep`, once both are read. */
static int replay(const struct kiln_foz_replay_options *o, struct kiln_foz_replay_report *rep)
{
    if (!o->paths || !o->npaths) {
        KILN_ERROR("foz", "replay: no archives given");
        return KILN_EINVAL;
    }
    struct replay r = {.vk = o->vk};
    struct kiln__prep_builders bl;
    struct kiln_foz_pipelines *fp = NULL;
    struct kiln_vk *own_vk = NULL;
    int rc = replay_builder(o->builder, &bl, &r.builder);
    if (rc == KILN_OK)
        rc = kiln_foz_pipelines_open(o->paths, o->npaths, &fp);
    if (rc == KILN_OK) {
        rep->found.size = sizeof(rep->found);
        kiln_foz_pipelines_get_stats(fp, SIZE_MAX, &rep->found);
        r.fp = fp;
        if (!r.vk && (rc = own_context(&own_vk)) == KILN_OK)
            r.vk = own_vk;
    }
    if (rc == KILN_OK)
        rc = replay_set(&r, o->workers, rep);
    kiln__prep_builders_free(&bl);
    kiln_vk_destroy(own_vk);
    kiln_foz_pipelines_destroy(fp);
    return rc;
}

int kiln_foz_replay(const struct kiln_foz_replay_options *options,
                    struct kiln_foz_replay_report *report)
{
    uint64_t t0 = kiln_now_ns();
    if (!report || !options)
        return KILN_EINVAL;
    KILN_TRY(kiln__struct_out_check(report, "kiln_foz_replay_report"));
    struct kiln_foz_replay_report rep = KILN_FOZ_REPLAY_REPORT_INIT;
    memset(&rep, 0, sizeof(rep));
    rep.size = sizeof(rep);
    struct kiln_foz_replay_options o = KILN_FOZ_REPLAY_OPTIONS_INIT;
    int rc = KILN_STRUCT_IN(&o, options, "kiln_foz_replay_options");
    if (rc == KILN_OK)
        rc = replay(&o, &rep);
    rep.ns = kiln_now_ns() - t0;
    KILN_STRUCT_OUT(report, &rep);
    return rc;
}
