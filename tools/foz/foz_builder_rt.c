/*
 * foz_builder_rt.c - the Fossilize builder's pipeline libraries and
 * ray-tracing pipelines (docs/foz.md, "Pipeline libraries" and
 * "Ray-tracing pipelines").
 *
 * Design.
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

/* A VkPipelineLibraryCreateInfoKHR over the libraries `o` names, which
 * build_libraries made. */
int kiln__fb_library_info(struct build *c, struct json_object *o,
                          VkPipelineLibraryCreateInfoKHR **out)
{
    KILN_TRY(kiln__fb_need(c, 0, X_PIPELINE_LIBRARY, -1, "linking pipeline libraries"));
    struct json_object *libs = get(o, "libraries");
    VkPipelineLibraryCreateInfoKHR *i = kiln__fb_alloc(c, sizeof(*i));
    VkPipeline *h = kiln__fb_alloc(c, (len(libs) ? len(libs) : 1) * sizeof(*h));
    if (!i || !h)
        return KILN_ENOMEM;
    for (uint32_t k = 0; k < len(libs); k++) {
        uint64_t hash;
        if (!kiln__fb_hash_of(at(libs, k), &hash))
            return kiln__fb_fail(c, KILN_EPARSE, "a pipeline library is not named by a hash");
        uint32_t m = 0;
        while (m < c->nlibs && c->libs[m].hash != hash)
            m++;
        if (m == c->nlibs)
            return kiln__fb_fail(c, KILN_EPARSE, "the pipeline library %016" PRIx64 " was not made",
                                 hash);
        h[k] = c->libs[m].pipeline;
    }
    i->sType = VK_STRUCTURE_TYPE_PIPELINE_LIBRARY_CREATE_INFO_KHR;
    i->libraryCount = len(libs);
    i->pLibraries = h;
    *out = i;
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
    VkResult r =
        b->vk.CreateRayTracingPipelinesKHR(b->device, VK_NULL_HANDLE, cache, 1, &ci, b->alloc, out);
    if (r != VK_SUCCESS)
        return kiln__fb_fail(c, KILN_EVULKAN, "vkCreateRayTracingPipelinesKHR: VkResult %d",
                             (int)r);
    return KILN_OK;
}
