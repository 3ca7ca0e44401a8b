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
 */
#include "kiln_internal.h"
#include "prep_internal.h"

#include <string.h>

struct kiln_build_session {
    struct kiln_vk *vk;
    const struct kiln_pack_dict *dict;
    /* The library's copy, with the default builders after the caller's
     * (kiln__prep_builders_in: the Fossilize state builder). */
    struct kiln__prep_builders builders;
};

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
    *out = s;
    return KILN_OK;
}

/* The phase's on_pipeline, pointed at one run's slot. */
static void take_pipeline(void *user, struct kiln_key key, struct kiln_vk_pipeline *pipeline)
{
    (void)key;
    *(struct kiln_vk_pipeline **)user = pipeline;
}

/* One run: the payload through kiln__prep_build_one, its pipeline into
 * run->pipeline (and the fast-link answer). */
static int session_run(struct kiln_build_session *s, struct kiln_build_run *run)
{
    struct kiln_vk_pipeline *got = NULL;
    struct kiln__prep_build b = {.vk = s->vk,
                                 .dict = s->dict,
                                 .on_pipeline = take_pipeline,
                                 .pipeline_user = &got,
                                 .builders = s->builders.list,
                                 .nbuilders = s->builders.n};
    struct kiln__prep_item item = {
        .key = run->key, .payload = run->payload, .size = run->payload_size, .link = run->link};
    int rc = kiln__prep_build_one(&b, &item, run->worker);
    if (rc == KILN_OK)
        rc = item.status; /* a skip answers KILN_OK with KILN_ENOTSUP here */
    if (rc < 0 && got) {
        kiln_vk_pipeline_destroy(s->vk, got);
        got = NULL;
    }
    run->pipeline = got;
    run->linked = got && item.linked;
    run->parts_built = item.parts_built;
    run->parts_reused = item.parts_reused;
    return rc;
}

int kiln_build_session_run(struct kiln_build_session *s, struct kiln_key key, const void *payload,
                           size_t size, unsigned worker, struct kiln_vk_pipeline **pipeline)
{
    if (pipeline)
        *pipeline = NULL;
    if (!s || !payload || !pipeline)
        return KILN_EINVAL;
    struct kiln_build_run run = {.size = sizeof(run),
                                 .key = key,
                                 .payload = payload,
                                 .payload_size = size,
                                 .worker = worker};
    int rc = session_run(s, &run);
    *pipeline = run.pipeline;
    return rc;
}

int kiln_build_session_run_with(struct kiln_build_session *s, struct kiln_build_run *in)
{
    if (!s || !in)
        return KILN_EINVAL;
    struct kiln_build_run run;
    KILN_TRY(KILN_STRUCT_IN(&run, in, "kiln_build_run"));
    KILN_TRY(kiln__struct_out_check(in, "kiln_build_run"));
    run.pipeline = NULL;
    run.linked = false;
    run.parts_built = run.parts_reused = 0;
    int rc = run.payload ? session_run(s, &run) : KILN_EINVAL;
    KILN_STRUCT_OUT(in, &run);
    return rc;
}

void kiln_build_session_destroy(struct kiln_build_session *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->builders.n; i++)
        if (s->builders.list[i].finish)
            s->builders.list[i].finish(s->builders.list[i].user);
    kiln__prep_builders_free(&s->builders);
    kiln__free(s);
}
