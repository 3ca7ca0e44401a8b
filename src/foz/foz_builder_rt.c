/*
 * foz_builder_rt.c - the Fossilize builder's pipeline libraries,
 * ray-tracing pipelines (docs/foz.md, "Pipeline libraries" and
 * "Ray-tracing pipelines") and the build call itself
 * (kiln_foz_builder_build).
 *
 * Design.
 * - This file is the builder's top: it calls foz_builder.c (objects,
 *   state, graphics and compute pipelines) and nothing there calls it, so
 *   the two files call one way (layout.file_cycles). Libraries recurse
 *   through kiln__fb_build_pipeline, which is here with them.
 * - A pipeline's libraries are built before it, depth-first, each once per
 *   build call (the build's `libs` list), with their own recorded flags and
 *   state, so a library shared by several parts of one closure is one
 *   VkPipeline. Nesting is bounded by LIBRARY_MAX_DEPTH, so a closure whose
 *   libraries name each other in a cycle ends in an error, not a loop; the
 *   closure's stage walk (kiln__foz_closure_stages) bounds their number,
 *   so the list cannot overflow. foz_builder.c destroys them when the build
 *   returns: a linked pipeline does not need its libraries.
 * - A library's stages are found among the handed-in stages by the
 *   identity of their stage records (kiln__fb_own_stages), so each
 *   pipeline of the closure takes exactly its own.
 * - Ray-tracing groups index the pipeline's own stages; an index outside
 *   them is refused before the driver sees it, and the recursion depth is
 *   checked against the device's limit when it is known.
 */
#include "foz_builder_private.h"

/* Makes every library `p` links that this build has not made yet, each
 * with its own flags and state, before `p` itself. */
int kiln__fb_build_libraries(struct build *c, struct json_object *p, int depth,
                             VkPipelineCache cache)
{
    uint64_t hashes[KILN__FOZ_MAX_LIBRARIES];
    uint32_t n;
    if (kiln__foz_pipeline_libraries(p, hashes, KILN__FOZ_MAX_LIBRARIES, &n) < 0)
        return kiln__fb_fail(c, KILN_EPARSE, "a pipeline library is not named by a hash");
    if (n > KILN__FOZ_MAX_LIBRARIES)
        return kiln__fb_fail(c, KILN_ERANGE,
                             "a pipeline links %u libraries, more than kiln builds (%u)", n,
                             KILN__FOZ_MAX_LIBRARIES);
    if (n && depth >= LIBRARY_MAX_DEPTH)
        return kiln__fb_fail(c, KILN_EPARSE, "pipeline libraries nest deeper than %d",
                             LIBRARY_MAX_DEPTH);
    for (uint32_t i = 0; i < n; i++) {
        bool made = false;
        for (uint32_t k = 0; k < c->nlibs && !made; k++)
            made = c->libs[k].hash == hashes[i];
        if (made)
            continue;
        struct json_object *lib;
        KILN_TRY(kiln__fb_recorded(c, kiln__foz_tag_member(c->tag), hashes[i], "pipeline library",
                                   &lib));
        if (!(u32(lib, "flags") & FLAG_LIBRARY))
            return kiln__fb_fail(c, KILN_EPARSE,
                                 "the pipeline library %016" PRIx64 " lacks the library flag",
                                 hashes[i]);
        VkPipeline h = VK_NULL_HANDLE;
        KILN_TRY(kiln__fb_build_pipeline(c, lib, depth + 1, cache, &h));
        /* The closure's stage walk bounds the distinct libraries, so this
         * holds for every closure that got this far; kept as a check. */
        if (c->nlibs == KILN__FOZ_MAX_LIBRARIES) {
            c->b->vk.DestroyPipeline(c->b->device, h, c->b->alloc);
            return kiln__fb_fail(c, KILN_ERANGE, "more than %u pipeline libraries",
                                 KILN__FOZ_MAX_LIBRARIES);
        }
        c->libs[c->nlibs++] = (struct made_library){hashes[i], h};
    }
    return KILN_OK;
}

/* Checks that a group's shader index is unused or one of the pipeline's
 * own `n` stages (a library's groups index the library's stages). */
static int group_index(struct build *c, struct json_object *g, const char *key, uint32_t group,
                       uint32_t n, uint32_t *out)
{
    *out = get(g, key) ? u32(g, key) : VK_SHADER_UNUSED_KHR;
    if (*out != VK_SHADER_UNUSED_KHR && *out >= n)
        return kiln__fb_fail(c, KILN_EPARSE,
                             "ray-tracing group %u: %s %u is not one of the %u stages", group, key,
                             *out, n);
    return KILN_OK;
}

int kiln__fb_build_raytracing(struct build *c, struct json_object *p, VkPipelineCache cache,
                              VkPipeline *out)
{
    struct kiln_foz_builder *b = c->b;
    KILN_TRY(kiln__fb_need(c, 0, X_RT_PIPELINE, -1, "a ray-tracing pipeline"));
    KILN_TRY(kiln__fb_need_feature(c, b->feat.rt, "rayTracingPipeline", "a ray-tracing pipeline"));
    if (!b->vk.CreateRayTracingPipelinesKHR)
        return kiln__fb_fail(c, KILN_ENOTSUP, "the device has no vkCreateRayTracingPipelinesKHR");
    VkRayTracingPipelineCreateInfoKHR ci = {
        .sType = VK_STRUCTURE_TYPE_RAY_TRACING_PIPELINE_CREATE_INFO_KHR};
    KILN_TRY(
        kiln__fb_pipeline_flags(c, p, &ci.flags, &ci.basePipelineHandle, &ci.basePipelineIndex));
    ci.maxPipelineRayRecursionDepth = u32(p, "maxPipelineRayRecursionDepth");
    if (b->max_recursion && ci.maxPipelineRayRecursionDepth > b->max_recursion)
        return kiln__fb_fail(
            c, KILN_ENOTSUP,
            "a ray recursion depth of %u needs more than the device's maxRayRecursionDepth "
            "(%u)",
            ci.maxPipelineRayRecursionDepth, b->max_recursion);
    KILN_TRY(kiln__fb_chain(c, get(p, "pNext"), NULL, &ci.pNext));
    struct json_object *rs = get(p, "stages");
    VkPipelineShaderStageCreateInfo *st;
    KILN_TRY(kiln__fb_own_stages(c, rs, len(rs), &st));
    ci.stageCount = len(rs);
    ci.pStages = st;

    struct json_object *gs = get(p, "groups");
    VkRayTracingShaderGroupCreateInfoKHR *g =
        kiln__fb_alloc(c, (len(gs) ? len(gs) : 1) * sizeof(*g));
    if (!g)
        return KILN_ENOMEM;
    for (uint32_t i = 0; i < len(gs); i++) {
        struct json_object *o = at(gs, i);
        g[i].sType = VK_STRUCTURE_TYPE_RAY_TRACING_SHADER_GROUP_CREATE_INFO_KHR;
        g[i].type = (VkRayTracingShaderGroupTypeKHR)u32(o, "type");
        if (g[i].type > VK_RAY_TRACING_SHADER_GROUP_TYPE_PROCEDURAL_HIT_GROUP_KHR)
            return kiln__fb_fail(c, KILN_EPARSE, "ray-tracing group %u has type %u", i,
                                 (unsigned)g[i].type);
        KILN_TRY(group_index(c, o, "generalShader", i, ci.stageCount, &g[i].generalShader));
        KILN_TRY(group_index(c, o, "closestHitShader", i, ci.stageCount, &g[i].closestHitShader));
        KILN_TRY(group_index(c, o, "anyHitShader", i, ci.stageCount, &g[i].anyHitShader));
        KILN_TRY(
            group_index(c, o, "intersectionShader", i, ci.stageCount, &g[i].intersectionShader));
        KILN_TRY(kiln__fb_chain(c, get(o, "pNext"), NULL, &g[i].pNext));
    }
    ci.groupCount = len(gs);
    ci.pGroups = g;

    struct json_object *o;
    if ((o = get(p, "libraryInterface")) != NULL) {
        VkRayTracingPipelineInterfaceCreateInfoKHR *i = kiln__fb_alloc(c, sizeof(*i));
        if (!i)
            return KILN_ENOMEM;
        i->sType = VK_STRUCTURE_TYPE_RAY_TRACING_PIPELINE_INTERFACE_CREATE_INFO_KHR;
        i->maxPipelineRayPayloadSize = u32(o, "maxPipelineRayPayloadSize");
        i->maxPipelineRayHitAttributeSize = u32(o, "maxPipelineRayHitAttributeSize");
        KILN_TRY(kiln__fb_chain(c, get(o, "pNext"), NULL, &i->pNext));
        ci.pLibraryInterface = i;
    }
    if ((o = get(p, "libraryInfo")) != NULL) {
        VkPipelineLibraryCreateInfoKHR *i;
        KILN_TRY(kiln__fb_library_info(c, o, &i));
        ci.pLibraryInfo = i;
    }
    if ((o = get(p, "dynamicState")) != NULL) {
        VkPipelineDynamicStateCreateInfo *dyn = kiln__fb_alloc(c, sizeof(*dyn));
        uint32_t *v = kiln__fb_uints(c, get(o, "dynamicState"));
        if (!dyn || !v)
            return KILN_ENOMEM;
        dyn->sType = VK_STRUCTURE_TYPE_PIPELINE_DYNAMIC_STATE_CREATE_INFO;
        dyn->flags = u32(o, "flags");
        dyn->dynamicStateCount = len(get(o, "dynamicState"));
        KILN_TRY(kiln__fb_dynamic_states(c, v, dyn->dynamicStateCount));
        dyn->pDynamicStates = (const VkDynamicState *)v;
        ci.pDynamicState = dyn;
    }
    uint64_t lh;
    if (!kiln__fb_hash_of(get(p, "layout"), &lh))
        return kiln__fb_fail(c, KILN_EPARSE, "layout is not a hash");
    if (lh)
        KILN_TRY(kiln__fb_pipeline_layout(c, lh, &ci.layout));
    /* The host tier takes a ray-tracing pipeline that links no library. */
    if (kiln__fb_ask(c, &ci.flags, &ci.pNext, ci.stageCount, ci.pLibraryInfo != NULL))
        cache = VK_NULL_HANDLE;
    VkResult r =
        b->vk.CreateRayTracingPipelinesKHR(b->device, VK_NULL_HANDLE, cache, 1, &ci, b->alloc, out);
    return kiln__fb_created(c, r, "vkCreateRayTracingPipelinesKHR");
}

/* Builds one pipeline of the closure: its libraries first, then itself. */
int kiln__fb_build_pipeline(struct build *c, struct json_object *p, int depth,
                            VkPipelineCache cache, VkPipeline *out)
{
    KILN_TRY(kiln__fb_build_libraries(c, p, depth, cache));
    if (c->tag == KILN_FOZ_TAG_GRAPHICS_PIPELINE)
        return kiln__fb_build_graphics(c, p, cache, out);
    if (c->tag == KILN_FOZ_TAG_COMPUTE_PIPELINE)
        return kiln__fb_build_compute(c, p, cache, out);
    return kiln__fb_build_raytracing(c, p, cache, out);
}

/* The build's answer in the counts: a probe's KILN_ECOMPILE_REQUIRED is
 * none of them (nothing built, nothing failed). */
static void count_build(struct kiln_foz_builder *b, enum kiln_foz_kind kind, int rc)
{
    if (rc == 0)
        atomic_fetch_add(&b->built[kind], 1);
    else if (rc == KILN_ENOTSUP)
        atomic_fetch_add(&b->skipped[kind], 1);
    else if (rc != KILN_ECOMPILE_REQUIRED)
        atomic_fetch_add(&b->failed[kind], 1);
}

/* The pipeline's feedback into the caller's build (see struct build). */
static void take_feedback(const struct build *c, struct kiln_foz_build *d)
{
    const VkPipelineCreationFeedback *f = &c->feedback;
    d->feedback_valid = (f->flags & VK_PIPELINE_CREATION_FEEDBACK_VALID_BIT) != 0;
    d->cache_hit =
        d->feedback_valid &&
        (f->flags & VK_PIPELINE_CREATION_FEEDBACK_APPLICATION_PIPELINE_CACHE_HIT_BIT) != 0;
    d->driver_ns = d->feedback_valid ? f->duration : 0;
}

static int build_body(struct kiln_foz_builder *b, struct kiln_foz_build *d,
                      struct kiln__fb_link *link, struct kiln__fb_tier *tier)
{
    char *why = d->why;
    size_t cap = d->why_cap;
    const VkPipelineShaderStageCreateInfo *stages = d->stages;
    uint32_t stage_count = d->stage_count;
    struct build *c = kiln__calloc(1, sizeof(*c));
    if (!c) {
        atomic_fetch_add(&b->failed[KILN_FOZ_KIND_GRAPHICS], 1);
        if (why && cap)
            snprintf(why, cap, "out of memory");
        return KILN_ENOMEM;
    }
    *c = (struct build){
        .b = b, .why = why, .cap = cap, .stages = stages, .link = link, .tier = tier};
    if (d->flags & KILN_FOZ_BUILD_NO_COMPILE)
        c->ask_flags = VK_PIPELINE_CREATE_FAIL_ON_PIPELINE_COMPILE_REQUIRED_BIT;
    uint64_t hash;
    struct json_object *p;
    int rc = kiln__foz_closure_parse(d->closure, d->closure_size, &c->doc, &c->tag, &hash, &p);
    if (rc < 0) {
        atomic_fetch_add(&b->failed[KILN_FOZ_KIND_GRAPHICS], 1);
        kiln__fb_fail(c, rc, "%s",
                      rc == KILN_EFORMAT ? "not a kiln Fossilize closure"
                                         : "the closure has no pipeline");
        kiln__free(c);
        return rc;
    }
    enum kiln_foz_kind kind = c->tag == KILN_FOZ_TAG_GRAPHICS_PIPELINE  ? KILN_FOZ_KIND_GRAPHICS
                              : c->tag == KILN_FOZ_TAG_COMPUTE_PIPELINE ? KILN_FOZ_KIND_COMPUTE
                                                                        : KILN_FOZ_KIND_RAYTRACING;
    rc = kiln__foz_closure_stages(c->doc, c->tag, p, c->recs, KILN_FOZ_MAX_STAGES, &c->nstages);
    if (rc < 0)
        kiln__fb_fail(c, rc, "the closure's stages or pipeline libraries do not read");
    else if (c->nstages != stage_count)
        rc = kiln__fb_fail(c, KILN_EINVAL, "the closure has %u stages but %u were handed in",
                           c->nstages, stage_count);
    for (uint32_t i = 0; rc == 0 && i < stage_count; i++)
        if ((uint32_t)stages[i].stage != u32(c->recs[i], "stage"))
            rc = kiln__fb_fail(c, KILN_EINVAL,
                               "stage %u is 0x%x in the closure but 0x%x was handed in", i,
                               u32(c->recs[i], "stage"), (unsigned)stages[i].stage);
    if (rc == 0) {
        /* Recorded state is checked before any of it reaches the driver:
         * records of an older kiln or another writer were not at import. */
        char rule[256];
        if (kiln__foz_check(c->doc, c->tag, p, &b->limits, rule, sizeof(rule)) < 0)
            rc = kiln__fb_fail(c, KILN_ENOTSUP, "%s pipeline %016" PRIx64 ": refused: %s",
                               kiln_foz_kind_name(kind), hash, rule);
    }
    /* Parts ahead (link->parts_only): only a graphics pipeline has them,
     * and they are no build of the pipeline (not counted). */
    bool parts = link && link->parts_only;
    if (rc == 0 && parts && c->tag != KILN_FOZ_TAG_GRAPHICS_PIPELINE)
        rc = KILN_ENOTSUP;
    else if (rc == 0)
        rc = kiln__fb_build_pipeline(c, p, 0, d->cache, &d->pipeline);
    if (rc == 0)
        take_feedback(c, d);
    /* The linked pipeline does not need its libraries once it exists. One
     * thread at a time: lavapipe (Mesa 22.3) defers destroying a library
     * that was linked by appending it to a device-wide list, and
     * ThreadSanitizer sees concurrent appends there race; a destroy is
     * cheap beside the builds around it. */
    pthread_mutex_lock(&b->lock);
    for (uint32_t i = 0; i < c->nlibs; i++)
        b->vk.DestroyPipeline(b->device, c->libs[i].pipeline, b->alloc);
    pthread_mutex_unlock(&b->lock);
    if (rc == KILN_ENOMEM)
        kiln__fb_fail(c, rc, "out of memory");
    if (!parts)
        count_build(b, kind, rc);
    json_object_put(c->doc);
    kiln__fb_arena_free(c);
    kiln__free(c);
    return rc;
}

int kiln__foz_builder_build_linked(struct kiln_foz_builder *b, struct kiln_foz_build *build,
                                   struct kiln__fb_link *link, struct kiln__fb_tier *tier)
{
    if (!b || !build)
        return KILN_EINVAL;
    struct kiln_foz_build d;
    KILN_TRY(KILN_STRUCT_IN(&d, build, "kiln_foz_build"));
    KILN_TRY(kiln__struct_out_check(build, "kiln_foz_build"));
    if (!d.closure || (!d.stages && d.stage_count))
        return KILN_EINVAL;
    d.pipeline = VK_NULL_HANDLE;
    d.feedback_valid = d.cache_hit = false;
    d.driver_ns = 0;
    if (d.why && d.why_cap)
        d.why[0] = '\0';
    int rc = build_body(b, &d, link, tier);
    KILN_STRUCT_OUT(build, &d);
    return rc;
}

int kiln_foz_builder_build_with(struct kiln_foz_builder *b, struct kiln_foz_build *build)
{
    return kiln__foz_builder_build_linked(b, build, NULL, NULL);
}

int kiln_foz_builder_build(struct kiln_foz_builder *b, const void *closure, size_t size,
                           const VkPipelineShaderStageCreateInfo *stages, uint32_t stage_count,
                           VkPipelineCache cache, VkPipeline *pipeline, char *why, size_t cap)
{
    if (!b || !closure || !pipeline || (!stages && stage_count))
        return KILN_EINVAL;
    *pipeline = VK_NULL_HANDLE;
    if (why && cap)
        why[0] = '\0';
    struct kiln_foz_build d = {.size = sizeof(d),
                               .closure = closure,
                               .closure_size = size,
                               .stages = stages,
                               .stage_count = stage_count,
                               .cache = cache,
                               .why = why,
                               .why_cap = cap};
    int rc = build_body(b, &d, NULL, NULL);
    *pipeline = d.pipeline;
    return rc;
}
