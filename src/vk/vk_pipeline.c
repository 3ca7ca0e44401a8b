/*
 * vk_pipeline.c - transient shader modules and the pipelines built from
 * them.
 *
 * Design. A stage's SPIR-V exists unpacked only between kiln_vk_stage_module
 * and kiln_vk_stage_release, which bracket one vkCreate*Pipelines call:
 *
 * - module path: the blob is unpacked into this thread's scratch buffer,
 *   vkCreateShaderModule copies it, and the module is destroyed right after
 *   the pipeline call. The scratch buffer may be reused by the next stage at
 *   once, because the driver has its own copy.
 * - maintenance5 path: no module object; the VkShaderModuleCreateInfo is
 *   chained into the stage, so the words must live until the pipeline call:
 *   each stage unpacks into its own buffer, freed by release.
 *
 * live_modules is incremented after a module exists and decremented after
 * it is destroyed, so it never reads lower than the true count; peak is
 * raised with a compare-and-swap so concurrent builds never lose a maximum.
 * Both paths check the unpacked words are a well-formed SPIR-V instruction
 * stream before a driver sees them, and with validation on (kiln prepare's
 * first builds) run SPIR-V's full validator too: a damaged or mistranslated
 * program fails alone with a clear line, instead of taking a driver's
 * compiler into undefined ground (where one driver aborts the process).
 *
 * Ask before compiling: every create here chains a
 * VkPipelineCreationFeedbackCreateInfo when the device has it (struct
 * ask, on the caller's stack for the one call), so the driver's word on a
 * cache hit and its time lands in the pipeline and the context's sums; a
 * create with KILN_VK_PIPELINE_NO_COMPILE adds
 * FAIL_ON_PIPELINE_COMPILE_REQUIRED, and the driver's
 * VK_PIPELINE_COMPILE_REQUIRED is an answer (KILN_ECOMPILE_REQUIRED), not
 * a failure: no warning, not in pipelines_failed.
 *
 * Pipelines and kept modules are linked into the context under its mutex so
 * kiln_vk_destroy can free what callers left behind. The mutex is held only
 * to link and unlink, never across a driver call, except the rare first
 * creation of a render pass per color format.
 */
#include "vk_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *prog(const char *name)
{
    return name ? name : "(unnamed)";
}

static void count_module_made(struct kiln_vk *vk)
{
    long long live = atomic_fetch_add(&vk->live_modules, 1) + 1;
    long long peak = atomic_load(&vk->peak_modules);
    while (live > peak && !atomic_compare_exchange_weak(&vk->peak_modules, &peak, live))
        ;
    atomic_fetch_add(&vk->modules_created, 1);
}

/* Unpacks a stage's blob, or takes its opened words as they are. @return
 * the word count with *words set (and *owned when the buffer is ours to
 * free), or the unpack error, logged. */
static int64_t unpack_stage(const struct kiln_vk *vk, const char *name, const char *stage,
                            const struct kiln_vk_stage *src, bool own_buffer,
                            const uint32_t **words, uint32_t **owned)
{
    int64_t n;
    *owned = NULL;
    if (src->words) {
        /* Opened words (kiln_program_open): unpacked and checked there, and
         * alive until the pipeline call, so neither is done again here. */
        *words = src->words;
        return (int64_t)src->nwords;
    }
    if (!src->blob) {
        KILN_WARN("vk", "%s: %s stage: no blob and no module given", prog(name), stage);
        return KILN_EINVAL;
    }
    if (own_buffer) {
        size_t bytes = 0;
        n = kiln_blob_info(src->blob, src->blob_size, NULL, &bytes);
        if (n >= 0) {
            *owned = kiln__malloc(bytes ? bytes : 4);
            n = *owned ? kiln_unpack(src->blob, src->blob_size, src->dict, *owned, bytes / 4)
                       : KILN_ENOMEM;
        }
        *words = *owned;
    } else {
        n = kiln_unpack_scratch(src->blob, src->blob_size, src->dict, words);
    }
    if (n < 0) {
        KILN_WARN("vk", "%s: %s stage: could not unpack its blob: %s", prog(name), stage,
                  kiln_strerror((int)n));
        kiln__free(*owned);
        *owned = NULL;
        return n;
    }
    char why[256];
    int rc = vk->validate ? kiln_vk_validate_spirv(*words, (size_t)n, why, sizeof(why))
                          : kiln_spirv_check_words(*words, (size_t)n, why, sizeof(why));
    if (rc < 0) {
        KILN_WARN("vk", "%s: %s stage: not valid SPIR-V: %s", prog(name), stage, why);
        kiln__free(*owned);
        *owned = NULL;
        return KILN_EFORMAT;
    }
    return n;
}

/*
 * Checks a stage of kiln's own shapes against kiln's layout: one storage
 * buffer at set 0 binding 0 and KILN_VK_PUSH_CONSTANT_BYTES of push
 * constants. Every binding the shader declares must be that buffer, a
 * single one; push constants must fit. Anything else makes the create info
 * invalid (VUID-VkComputePipelineCreateInfo-layout-07988 and its graphics
 * twin), and drivers do not fail such a call, they crash in it: lavapipe
 * reads past its layout's bindings. So a mismatch is refused before the
 * driver; `why` gets the rest of the one line the caller logs, after
 * "<program>: <stage> stage: ", naming the binding and both sides.
 * @return 0; KILN_ENOTSUP for a mismatch, KILN_EFORMAT for an interface
 * that cannot be read, or KILN_ENOMEM, with `why`.
 */
static int fit_builtin_layout(const uint32_t *words, size_t n, char *why, size_t cap)
{
    struct kiln__spirv_iface f;
    char what[200];
    int rc = kiln__spirv_reflect(words, n, &f, what, sizeof(what));
    if (rc < 0) {
        snprintf(why, cap, "cannot read its resource interface: %s", what);
        return rc == KILN_ENOMEM ? rc : KILN_EFORMAT;
    }
    for (uint32_t i = 0; i < f.nbindings; i++) {
        const struct kiln__spirv_binding *b = &f.bindings[i];
        const char *type = kiln__descriptor_type_name(b->type);
        if (b->set != 0 || b->binding != 0) {
            snprintf(why, cap,
                     "refused: set %u binding %u (a %s) is in the shader and not in "
                     "kiln's layout",
                     b->set, b->binding, type);
            return KILN_ENOTSUP;
        }
        if (b->type != VK_DESCRIPTOR_TYPE_STORAGE_BUFFER) {
            snprintf(why, cap,
                     "refused: set 0 binding 0 is a %s in the shader and a storage "
                     "buffer in kiln's layout",
                     type);
            return KILN_ENOTSUP;
        }
        if (b->count != 1) {
            char many[64] = "an array of storage buffers of unknown length";
            if (b->count == 0)
                snprintf(many, sizeof(many), "a runtime array of storage buffers");
            else if (b->count != UINT32_MAX)
                snprintf(many, sizeof(many), "an array of %u storage buffers", b->count);
            snprintf(why, cap,
                     "refused: set 0 binding 0 is %s in the shader and one storage buffer in "
                     "kiln's layout",
                     many);
            return KILN_ENOTSUP;
        }
    }
    if (f.truncated) {
        snprintf(why, cap, "refused: more than %d bindings in the shader and one in kiln's layout",
                 KILN__SPIRV_MAX_BINDINGS);
        return KILN_ENOTSUP;
    }
    if (f.has_push && (!f.push_known || f.push_bytes > KILN_VK_PUSH_CONSTANT_BYTES)) {
        char size[32] = "an unknown size of";
        if (f.push_known)
            snprintf(size, sizeof(size), "%u bytes of", f.push_bytes);
        snprintf(why, cap, "refused: %s push constants in the shader and %u bytes in kiln's layout",
                 size, KILN_VK_PUSH_CONSTANT_BYTES);
        return KILN_ENOTSUP;
    }
    return KILN_OK;
}

/* kiln_vk_stage_module, checking the stage against kiln's own layout when
 * `builtin` is set (a kept module was checked when it was made). */
static int stage_module(struct kiln_vk *vk, const char *name, const struct kiln_vk_stage *src,
                        VkShaderStageFlagBits stage, bool builtin, struct kiln_vk_staged *out)
{
    if (!out)
        return KILN_EINVAL;
    memset(out, 0, sizeof(*out));
    out->size = sizeof(*out);
    if (!vk || !src)
        return KILN_EINVAL;
    struct kiln_vk_stage in = KILN_VK_STAGE_INIT;
    KILN_TRY(KILN_STRUCT_IN(&in, src, "kiln_vk_stage"));
    src = &in;
    out->info = (VkPipelineShaderStageCreateInfo){
        .sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
        .stage = stage,
        .pName = src->entry ? src->entry : "main",
        .pSpecializationInfo = src->specialization,
    };
    if (src->module) {
        if (builtin && src->module->unfit) {
            KILN_WARN("vk", "%s: %s stage: %s", prog(name), kiln_vk_stage_name(stage),
                      src->module->unfit);
            return src->module->unfit_rc;
        }
        out->info.module = src->module->module;
        return KILN_OK;
    }
    bool chain = vk->info.chained_stages;
    const uint32_t *words;
    int64_t n = unpack_stage(vk, name, kiln_vk_stage_name(stage), src, chain, &words, &out->words);
    if (n < 0)
        return (int)n;
    if (builtin) {
        char why[256];
        int rc = fit_builtin_layout(words, (size_t)n, why, sizeof(why));
        if (rc < 0) {
            KILN_WARN("vk", "%s: %s stage: %s", prog(name), kiln_vk_stage_name(stage), why);
            kiln__free(out->words);
            out->words = NULL;
            return rc;
        }
    }
    out->module_info = (VkShaderModuleCreateInfo){
        .sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
        .codeSize = (size_t)n * 4,
        .pCode = words,
    };
    if (chain) {
        out->info.pNext = &out->module_info;
        atomic_fetch_add(&vk->stages_chained, 1);
        return KILN_OK;
    }
    VkResult res =
        vk->fn.vkCreateShaderModule(vk->device, &out->module_info, vk->alloc, &out->module);
    if (res != VK_SUCCESS) {
        KILN_WARN("vk", "%s: %s stage: vkCreateShaderModule failed: %s", prog(name),
                  kiln_vk_stage_name(stage), kiln_vk_result_name(res));
        out->module = VK_NULL_HANDLE;
        return KILN_EVULKAN;
    }
    count_module_made(vk);
    out->info.module = out->module;
    out->module_info.pCode = NULL; /* the scratch words may be reused from here on */
    return KILN_OK;
}

/* The caller's kiln_vk_staged is filled in place, never copied: its `info`
 * may point into it (module_info). So it must hold at least this
 * library's fields (a larger one keeps its size and the rest of its
 * bytes); see docs/abi.md. */
static int stage_module_body(struct kiln_vk *vk, const char *name, const struct kiln_vk_stage *src,
                             VkShaderStageFlagBits stage, struct kiln_vk_staged *out)
{
    if (!out)
        return KILN_EINVAL;
    size_t size = out->size;
    if (size < sizeof(*out)) {
        KILN_ERROR("abi",
                   "kiln_vk_staged: size %zu, smaller than this kiln's %zu (initialise it with "
                   "KILN_VK_STAGED_INIT)",
                   size, sizeof(*out));
        return KILN_EINVAL;
    }
    int rc = stage_module(vk, name, src, stage, false, out);
    out->size = size;
    return rc;
}

int kiln_vk_stage_module(struct kiln_vk *vk, const char *name, const struct kiln_vk_stage *src,
                         VkShaderStageFlagBits stage, struct kiln_vk_staged *out)
{
    uint64_t m = kiln__err_mark();
    return kiln__err_end(vk ? &vk->err : NULL, m, "kiln_vk_stage_module", name,
                         stage_module_body(vk, name, src, stage, out));
}

void kiln_vk_stage_release(struct kiln_vk *vk, struct kiln_vk_staged *st)
{
    if (!vk || !st)
        return;
    if (st->module) {
        vk->fn.vkDestroyShaderModule(vk->device, st->module, vk->alloc);
        atomic_fetch_sub(&vk->live_modules, 1);
        st->module = VK_NULL_HANDLE;
    }
    kiln__free(st->words);
    st->words = NULL;
    st->info.pNext = NULL;
}

/* ---- object lists ------------------------------------------------------- */

static void link_object(struct kiln_vk *vk, struct kiln_vk_object *head, struct kiln_vk_object *o)
{
    pthread_mutex_lock(&vk->lock);
    o->next = head->next;
    o->prev = head;
    head->next->prev = o;
    head->next = o;
    pthread_mutex_unlock(&vk->lock);
}

static void unlink_object(struct kiln_vk *vk, struct kiln_vk_object *o)
{
    pthread_mutex_lock(&vk->lock);
    o->prev->next = o->next;
    o->next->prev = o->prev;
    pthread_mutex_unlock(&vk->lock);
}

void kiln__vk_destroy_objects(struct kiln_vk *vk)
{
    unsigned pipes = 0, mods = 0;
    while (vk->pipelines.next != &vk->pipelines) {
        kiln_vk_pipeline_destroy(vk, (struct kiln_vk_pipeline *)vk->pipelines.next);
        pipes++;
    }
    while (vk->modules.next != &vk->modules) {
        kiln_vk_module_destroy(vk, (struct kiln_vk_module *)vk->modules.next);
        mods++;
    }
    if (pipes || mods)
        KILN_DEBUG("vk", "destroyed %u pipelines and %u kept modules left at exit", pipes, mods);
    for (unsigned i = 0; i < vk->nrender_passes; i++)
        vk->fn.vkDestroyRenderPass(vk->device, vk->render_passes[i].pass, vk->alloc);
    vk->nrender_passes = 0;
}

/* ---- pipelines ------------------------------------------------------------ */

/* One create's flags and feedback (see the top). */
struct ask {
    uint32_t flags; /* KILN_VK_PIPELINE_*, KILN__VK_PIPELINE_CAPTURE */
    VkPipelineCreationFeedback pipeline;
    VkPipelineCreationFeedback stages[2];
    VkPipelineCreationFeedbackCreateInfo info;
    /* The host tier of driver binaries (vk_binary.c): a VkPipelineBinaryInfoKHR to make the
     * pipeline from (NULL: its stages), and the flags that capture its data. */
    VkBaseInStructure *binaries;
#ifdef VK_KHR_pipeline_binary
    VkPipelineCreateFlags2CreateInfoKHR flags2;
#endif
};

/* Whether the create goes through the host tier of binaries, which
 * keeps the VkPipelineCache out of it (docs/vk.md: one path per device). */
static bool ask_tier(const struct kiln_vk *vk, const struct ask *a)
{
#ifdef VK_KHR_pipeline_binary
    if (vk->bin_loaded && (a->binaries || (a->flags & KILN__VK_PIPELINE_CAPTURE)))
        return true;
#endif
    (void)vk;
    (void)a;
    return false;
}

/* The pipeline cache of a create: none through the host tier. */
static VkPipelineCache ask_cache(const struct kiln_vk *vk, const struct ask *a)
{
    return ask_tier(vk, a) ? VK_NULL_HANDLE : vk->cache;
}

/* The tier's structures before `next`: the binaries to make it from, or
 * the capture flag (VkPipelineCreateFlags2CreateInfoKHR, which then holds
 * every flag of the create). */
static const void *ask_tier_chain(const struct kiln_vk *vk, struct ask *a, const void *next)
{
    if (!ask_tier(vk, a))
        return next;
    if (a->binaries) {
        a->binaries->pNext = next;
        return a->binaries;
    }
#ifdef VK_KHR_pipeline_binary
    a->flags2 = (VkPipelineCreateFlags2CreateInfoKHR){
        .sType = VK_STRUCTURE_TYPE_PIPELINE_CREATE_FLAGS_2_CREATE_INFO_KHR,
        .pNext = next,
        .flags = VK_PIPELINE_CREATE_2_CAPTURE_DATA_BIT_KHR |
                 (a->flags & KILN_VK_PIPELINE_NO_COMPILE
                      ? VK_PIPELINE_CREATE_2_FAIL_ON_PIPELINE_COMPILE_REQUIRED_BIT_KHR
                      : 0)};
    return &a->flags2;
#else
    return next;
#endif
}

/* The create info's pNext: the feedback request before `next` where the
 * device has it, else `next` alone; the host tier's structures first. */
static const void *ask_chain(const struct kiln_vk *vk, struct ask *a, uint32_t nstages,
                             const void *next)
{
    memset(&a->pipeline, 0, sizeof(a->pipeline));
    memset(a->stages, 0, sizeof(a->stages));
    next = ask_tier_chain(vk, a, next);
    if (!vk->info.creation_feedback)
        return next;
    a->info = (VkPipelineCreationFeedbackCreateInfo){
        .sType = VK_STRUCTURE_TYPE_PIPELINE_CREATION_FEEDBACK_CREATE_INFO,
        .pNext = next,
        .pPipelineCreationFeedback = &a->pipeline,
        .pipelineStageCreationFeedbackCount = nstages,
        .pPipelineStageCreationFeedbacks = a->stages,
    };
    return &a->info;
}

static VkPipelineCreateFlags ask_flags(const struct ask *a)
{
    return a->flags & KILN_VK_PIPELINE_NO_COMPILE
               ? VK_PIPELINE_CREATE_FAIL_ON_PIPELINE_COMPILE_REQUIRED_BIT
               : 0;
}

/* Adds a created pipeline's feedback to the context's sums. */
static void count_feedback(struct kiln_vk *vk, const VkPipelineCreationFeedback *f)
{
    if (!(f->flags & VK_PIPELINE_CREATION_FEEDBACK_VALID_BIT))
        return;
    atomic_fetch_add(&vk->feedback_pipelines, 1);
    if (f->flags & VK_PIPELINE_CREATION_FEEDBACK_APPLICATION_PIPELINE_CACHE_HIT_BIT)
        atomic_fetch_add(&vk->feedback_cache_hits, 1);
    atomic_fetch_add(&vk->feedback_driver_ns, f->duration);
}

static int finish_pipeline(struct kiln_vk *vk, const char *name, const char *what, VkResult res,
                           VkPipeline handle, const struct ask *a, struct kiln_vk_pipeline **out)
{
    if (res == VK_PIPELINE_COMPILE_REQUIRED && (a->flags & KILN_VK_PIPELINE_NO_COMPILE)) {
        if (handle)
            vk->fn.vkDestroyPipeline(vk->device, handle, vk->alloc);
        atomic_fetch_add(&vk->compile_required, 1);
        return KILN_ECOMPILE_REQUIRED;
    }
    if (res != VK_SUCCESS) {
        KILN_WARN("vk", "%s: %s pipeline: vkCreate%sPipelines failed: %s", prog(name), what,
                  strcmp(what, "compute") == 0 ? "Compute" : "Graphics", kiln_vk_result_name(res));
        atomic_fetch_add(&vk->pipelines_failed, 1);
        if (handle)
            vk->fn.vkDestroyPipeline(vk->device, handle, vk->alloc);
        return KILN_EVULKAN;
    }
    struct kiln_vk_pipeline *p = kiln__calloc(1, sizeof(*p));
    if (!p) {
        vk->fn.vkDestroyPipeline(vk->device, handle, vk->alloc);
        atomic_fetch_add(&vk->pipelines_failed, 1);
        return KILN_ENOMEM;
    }
    p->pipeline = handle;
    if (vk->info.creation_feedback) {
        p->feedback = a->pipeline;
        count_feedback(vk, &a->pipeline);
    }
    link_object(vk, &vk->pipelines, &p->link);
    atomic_fetch_add(&vk->pipelines_built, 1);
    atomic_fetch_add(&vk->live_pipelines, 1);
    *out = p;
    return KILN_OK;
}

static int compute_pipeline_body(struct kiln_vk *vk, const char *name,
                                 const struct kiln_vk_stage *stage, struct ask *a,
                                 struct kiln_vk_pipeline **out)
{
    if (!vk || !stage || !out)
        return KILN_EINVAL;
    *out = NULL;
    struct kiln_vk_staged st = KILN_VK_STAGED_INIT;
    int rc = stage_module(vk, name, stage, VK_SHADER_STAGE_COMPUTE_BIT, true, &st);
    if (rc < 0) {
        atomic_fetch_add(&vk->pipelines_failed, 1);
        return rc;
    }
    VkComputePipelineCreateInfo ci = {
        .sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
        .pNext = ask_chain(vk, a, 1, NULL),
        .flags = ask_flags(a),
        .stage = st.info,
        .layout = vk->layout,
    };
    VkPipeline handle = VK_NULL_HANDLE;
    VkResult res =
        vk->fn.vkCreateComputePipelines(vk->device, ask_cache(vk, a), 1, &ci, vk->alloc, &handle);
    kiln_vk_stage_release(vk, &st);
    return finish_pipeline(vk, name, "compute", res, handle, a, out);
}

int kiln_vk_compute_pipeline(struct kiln_vk *vk, const char *name,
                             const struct kiln_vk_stage *stage, struct kiln_vk_pipeline **out)
{
    uint64_t m = kiln__err_mark();
    struct ask a = {.flags = 0};
    return kiln__err_end(vk ? &vk->err : NULL, m, "kiln_vk_compute_pipeline", name,
                         compute_pipeline_body(vk, name, stage, &a, out));
}

/* The fixed state of kiln's own graphics shape (a triangle list, one color
 * attachment of `format`, viewport and scissor dynamic), in one place for
 * the builds from SPIR-V and from driver binaries. */
struct builtin_state {
    VkPipelineVertexInputStateCreateInfo vin;
    VkPipelineInputAssemblyStateCreateInfo ia;
    VkPipelineViewportStateCreateInfo vp;
    VkPipelineRasterizationStateCreateInfo rs;
    VkPipelineMultisampleStateCreateInfo ms;
    VkPipelineColorBlendAttachmentState blend;
    VkPipelineColorBlendStateCreateInfo cb;
    VkDynamicState dyn[2];
    VkPipelineDynamicStateCreateInfo ds;
    VkPipelineRenderingCreateInfo rendering;
    VkFormat format;
};

/* Fills *s and a create info pointing at it: no stages, no flags; pNext is
 * the rendering info with dynamic rendering, else NULL. */
static void builtin_state_fill(const struct kiln_vk *vk, struct builtin_state *s, VkFormat format,
                               VkRenderPass pass, VkGraphicsPipelineCreateInfo *ci)
{
    memset(s, 0, sizeof(*s));
    s->format = format;
    s->vin.sType = VK_STRUCTURE_TYPE_PIPELINE_VERTEX_INPUT_STATE_CREATE_INFO;
    s->ia = (VkPipelineInputAssemblyStateCreateInfo){
        .sType = VK_STRUCTURE_TYPE_PIPELINE_INPUT_ASSEMBLY_STATE_CREATE_INFO,
        .topology = VK_PRIMITIVE_TOPOLOGY_TRIANGLE_LIST,
    };
    s->vp = (VkPipelineViewportStateCreateInfo){
        .sType = VK_STRUCTURE_TYPE_PIPELINE_VIEWPORT_STATE_CREATE_INFO,
        .viewportCount = 1,
        .scissorCount = 1,
    };
    s->rs = (VkPipelineRasterizationStateCreateInfo){
        .sType = VK_STRUCTURE_TYPE_PIPELINE_RASTERIZATION_STATE_CREATE_INFO,
        .polygonMode = VK_POLYGON_MODE_FILL,
        .cullMode = VK_CULL_MODE_NONE,
        .frontFace = VK_FRONT_FACE_COUNTER_CLOCKWISE,
        .lineWidth = 1.0f,
    };
    s->ms = (VkPipelineMultisampleStateCreateInfo){
        .sType = VK_STRUCTURE_TYPE_PIPELINE_MULTISAMPLE_STATE_CREATE_INFO,
        .rasterizationSamples = VK_SAMPLE_COUNT_1_BIT,
    };
    s->blend.colorWriteMask = VK_COLOR_COMPONENT_R_BIT | VK_COLOR_COMPONENT_G_BIT |
                              VK_COLOR_COMPONENT_B_BIT | VK_COLOR_COMPONENT_A_BIT;
    s->cb = (VkPipelineColorBlendStateCreateInfo){
        .sType = VK_STRUCTURE_TYPE_PIPELINE_COLOR_BLEND_STATE_CREATE_INFO,
        .attachmentCount = 1,
        .pAttachments = &s->blend,
    };
    s->dyn[0] = VK_DYNAMIC_STATE_VIEWPORT;
    s->dyn[1] = VK_DYNAMIC_STATE_SCISSOR;
    s->ds = (VkPipelineDynamicStateCreateInfo){
        .sType = VK_STRUCTURE_TYPE_PIPELINE_DYNAMIC_STATE_CREATE_INFO,
        .dynamicStateCount = 2,
        .pDynamicStates = s->dyn,
    };
    s->rendering = (VkPipelineRenderingCreateInfo){
        .sType = VK_STRUCTURE_TYPE_PIPELINE_RENDERING_CREATE_INFO,
        .colorAttachmentCount = 1,
        .pColorAttachmentFormats = &s->format,
    };
    *ci = (VkGraphicsPipelineCreateInfo){
        .sType = VK_STRUCTURE_TYPE_GRAPHICS_PIPELINE_CREATE_INFO,
        .pNext = vk->info.dynamic_rendering ? &s->rendering : NULL,
        .pVertexInputState = &s->vin,
        .pInputAssemblyState = &s->ia,
        .pViewportState = &s->vp,
        .pRasterizationState = &s->rs,
        .pMultisampleState = &s->ms,
        .pColorBlendState = &s->cb,
        .pDynamicState = &s->ds,
        .layout = vk->layout,
        .renderPass = pass,
        .subpass = 0,
    };
}

/* The render pass for one color format (devices without dynamic rendering). */
static VkResult render_pass_for(struct kiln_vk *vk, VkFormat format, VkRenderPass *out)
{
    VkResult res = VK_SUCCESS;
    pthread_mutex_lock(&vk->lock);
    for (unsigned i = 0; i < vk->nrender_passes; i++) {
        if (vk->render_passes[i].format == format) {
            *out = vk->render_passes[i].pass;
            pthread_mutex_unlock(&vk->lock);
            return VK_SUCCESS;
        }
    }
    if (vk->nrender_passes == KILN_VK_MAX_RENDER_PASSES) {
        pthread_mutex_unlock(&vk->lock);
        return VK_ERROR_TOO_MANY_OBJECTS;
    }
    VkAttachmentDescription color = {
        .format = format,
        .samples = VK_SAMPLE_COUNT_1_BIT,
        .loadOp = VK_ATTACHMENT_LOAD_OP_CLEAR,
        .storeOp = VK_ATTACHMENT_STORE_OP_STORE,
        .stencilLoadOp = VK_ATTACHMENT_LOAD_OP_DONT_CARE,
        .stencilStoreOp = VK_ATTACHMENT_STORE_OP_DONT_CARE,
        .initialLayout = VK_IMAGE_LAYOUT_UNDEFINED,
        .finalLayout = VK_IMAGE_LAYOUT_COLOR_ATTACHMENT_OPTIMAL,
    };
    VkAttachmentReference ref = {0, VK_IMAGE_LAYOUT_COLOR_ATTACHMENT_OPTIMAL};
    VkSubpassDescription sub = {
        .pipelineBindPoint = VK_PIPELINE_BIND_POINT_GRAPHICS,
        .colorAttachmentCount = 1,
        .pColorAttachments = &ref,
    };
    VkRenderPassCreateInfo ci = {
        .sType = VK_STRUCTURE_TYPE_RENDER_PASS_CREATE_INFO,
        .attachmentCount = 1,
        .pAttachments = &color,
        .subpassCount = 1,
        .pSubpasses = &sub,
    };
    VkRenderPass pass;
    res = vk->fn.vkCreateRenderPass(vk->device, &ci, vk->alloc, &pass);
    if (res == VK_SUCCESS) {
        vk->render_passes[vk->nrender_passes].format = format;
        vk->render_passes[vk->nrender_passes].pass = pass;
        vk->nrender_passes++;
        *out = pass;
    }
    pthread_mutex_unlock(&vk->lock);
    return res;
}

static int graphics_pipeline_body(struct kiln_vk *vk, const char *name,
                                  const struct kiln_vk_graphics *desc, struct ask *a,
                                  struct kiln_vk_pipeline **out)
{
    if (!vk || !desc || !out)
        return KILN_EINVAL;
    *out = NULL;
    struct kiln_vk_graphics g = KILN_VK_GRAPHICS_INIT;
    KILN_TRY(KILN_STRUCT_IN(&g, desc, "kiln_vk_graphics"));
    if (!g.vertex || !g.fragment)
        return KILN_EINVAL;
    bool parts = g.link == KILN_VK_LINK_PARTS;
    if (parts && (!vk->info.pipeline_library || (a->flags & KILN_VK_PIPELINE_NO_COMPILE)))
        return KILN_ENOTSUP; /* parts need libraries, and are no probe */
    VkFormat format = (VkFormat)(g.color_format ? g.color_format : KILN_VK_DEFAULT_COLOR_FORMAT);
    VkRenderPass pass = VK_NULL_HANDLE;
    if (!vk->info.dynamic_rendering) {
        VkResult res = render_pass_for(vk, format, &pass);
        if (res != VK_SUCCESS) {
            KILN_WARN("vk", "%s: graphics pipeline: no render pass for format %d: %s", prog(name),
                      (int)format, kiln_vk_result_name(res));
            atomic_fetch_add(&vk->pipelines_failed, 1);
            return KILN_EVULKAN;
        }
    }

    struct kiln_vk_staged vs, fs;
    int rc = stage_module(vk, name, g.vertex, VK_SHADER_STAGE_VERTEX_BIT, true, &vs);
    if (rc < 0) {
        atomic_fetch_add(&vk->pipelines_failed, 1);
        return rc;
    }
    rc = stage_module(vk, name, g.fragment, VK_SHADER_STAGE_FRAGMENT_BIT, true, &fs);
    if (rc < 0) {
        kiln_vk_stage_release(vk, &vs);
        atomic_fetch_add(&vk->pipelines_failed, 1);
        return rc;
    }
    VkPipelineShaderStageCreateInfo stages[2] = {vs.info, fs.info};
    struct builtin_state bs;
    VkGraphicsPipelineCreateInfo ci;
    builtin_state_fill(vk, &bs, format, pass, &ci);
    ci.pNext = ask_chain(vk, a, 2, ci.pNext);
    ci.flags = ask_flags(a);
    ci.stageCount = 2;
    ci.pStages = stages;
    VkPipeline handle = VK_NULL_HANDLE;
    struct kiln_vk_link_result lr = KILN_VK_LINK_RESULT_INIT;
    VkResult res = (g.link == KILN_VK_LINK_FAST || parts) && vk->info.pipeline_library &&
                           !(a->flags & KILN_VK_PIPELINE_NO_COMPILE) /* a link is no probe */
                       ? kiln__vk_link_builtin(vk, &g, format, &ci, parts ? NULL : &handle, &lr)
                       : vk->fn.vkCreateGraphicsPipelines(vk->device, ask_cache(vk, a), 1, &ci,
                                                          vk->alloc, &handle);
    kiln_vk_stage_release(vk, &fs);
    kiln_vk_stage_release(vk, &vs);
    if (g.link_result && kiln__struct_out_check(g.link_result, "kiln_vk_link_result") == KILN_OK)
        KILN_STRUCT_OUT(g.link_result, &lr);
    if (parts)
        return res == VK_SUCCESS ? KILN_OK : KILN_EVULKAN; /* the part's failure was logged */
    return finish_pipeline(vk, name, "graphics", res, handle, a, out);
}

int kiln_vk_graphics_pipeline(struct kiln_vk *vk, const char *name,
                              const struct kiln_vk_graphics *desc, struct kiln_vk_pipeline **out)
{
    uint64_t m = kiln__err_mark();
    struct ask a = {.flags = 0};
    return kiln__err_end(vk ? &vk->err : NULL, m, "kiln_vk_graphics_pipeline", name,
                         graphics_pipeline_body(vk, name, desc, &a, out));
}

int kiln__vk_pipeline_from_binaries(struct kiln_vk *vk, bool compute, void *binary_info,
                                    struct kiln_vk_pipeline **out)
{
    *out = NULL;
    struct ask a = {.flags = 0, .binaries = binary_info};
    VkPipeline handle = VK_NULL_HANDLE;
    VkResult res;
    if (compute) {
        /* The stage is ignored when made from binaries; it names the kind. */
        VkComputePipelineCreateInfo ci = {
            .sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
            .pNext = ask_chain(vk, &a, 1, NULL),
            .stage = {.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
                      .stage = VK_SHADER_STAGE_COMPUTE_BIT,
                      .pName = "main"},
            .layout = vk->layout,
        };
        res =
            vk->fn.vkCreateComputePipelines(vk->device, VK_NULL_HANDLE, 1, &ci, vk->alloc, &handle);
    } else {
        VkFormat format = (VkFormat)KILN_VK_DEFAULT_COLOR_FORMAT;
        VkRenderPass pass = VK_NULL_HANDLE;
        res = vk->info.dynamic_rendering ? VK_SUCCESS : render_pass_for(vk, format, &pass);
        struct builtin_state bs;
        VkGraphicsPipelineCreateInfo ci;
        builtin_state_fill(vk, &bs, format, pass, &ci);
        ci.pNext = ask_chain(vk, &a, 2, ci.pNext);
        if (res == VK_SUCCESS)
            res = vk->fn.vkCreateGraphicsPipelines(vk->device, VK_NULL_HANDLE, 1, &ci, vk->alloc,
                                                   &handle);
    }
    if (res != VK_SUCCESS) {
        KILN_INFO("vk", "a pipeline from driver binaries: %s", kiln_vk_result_name(res));
        if (handle)
            vk->fn.vkDestroyPipeline(vk->device, handle, vk->alloc);
        return KILN_EVULKAN;
    }
    return finish_pipeline(vk, NULL, compute ? "compute" : "graphics", res, handle, &a, out);
}

static int pipeline_create_body(struct kiln_vk *vk, const struct kiln_vk_pipeline_desc *in,
                                struct kiln_vk_pipeline **out)
{
    if (out)
        *out = NULL;
    if (!vk || !in || !out)
        return KILN_EINVAL;
    struct kiln_vk_pipeline_desc d = KILN_VK_PIPELINE_DESC_INIT;
    KILN_TRY(KILN_STRUCT_IN(&d, in, "kiln_vk_pipeline_desc"));
    if (!d.compute == !d.graphics) {
        KILN_ERROR("vk", "%s: kiln_vk_pipeline_desc: give a compute stage or a graphics pair",
                   prog(d.name));
        return KILN_EINVAL;
    }
    if ((d.flags & KILN_VK_PIPELINE_NO_COMPILE) && !vk->info.compile_probe) {
        KILN_INFO("vk", "%s: no compile probe on this device (pipelineCreationCacheControl)",
                  prog(d.name));
        return KILN_ENOTSUP;
    }
    struct ask a = {.flags = d.flags};
    return d.compute ? compute_pipeline_body(vk, d.name, d.compute, &a, out)
                     : graphics_pipeline_body(vk, d.name, d.graphics, &a, out);
}

int kiln_vk_pipeline_create(struct kiln_vk *vk, const struct kiln_vk_pipeline_desc *desc,
                            struct kiln_vk_pipeline **out)
{
    uint64_t m = kiln__err_mark();
    int rc = pipeline_create_body(vk, desc, out);
    if (rc == KILN_ECOMPILE_REQUIRED)
        return rc; /* an answer, not a failure: the last error stays */
    return kiln__err_end(vk ? &vk->err : NULL, m, "kiln_vk_pipeline_create", NULL, rc);
}

int kiln_vk_pipeline_feedback(const struct kiln_vk_pipeline *p, struct kiln_vk_feedback *out)
{
    if (!p || !out)
        return KILN_EINVAL;
    KILN_TRY(kiln__struct_out_check(out, "kiln_vk_feedback"));
    const VkPipelineCreationFeedback *f = &p->feedback;
    struct kiln_vk_feedback own = {.size = sizeof(own)};
    own.valid = (f->flags & VK_PIPELINE_CREATION_FEEDBACK_VALID_BIT) != 0;
    own.cache_hit =
        own.valid && (f->flags & VK_PIPELINE_CREATION_FEEDBACK_APPLICATION_PIPELINE_CACHE_HIT_BIT);
    own.driver_ns = own.valid ? f->duration : 0;
    KILN_STRUCT_OUT(out, &own);
    return KILN_OK;
}

void kiln_vk_pipeline_destroy(struct kiln_vk *vk, struct kiln_vk_pipeline *p)
{
    if (!vk || !p)
        return;
    if (!p)
        return;
    unlink_object(vk, &p->link);
    vk->fn.vkDestroyPipeline(vk->device, p->pipeline, vk->alloc);
    atomic_fetch_sub(&vk->live_pipelines, 1);
    kiln__free(p);
}

static int pipeline_adopt_body(struct kiln_vk *vk, VkPipeline pipeline,
                               struct kiln_vk_pipeline **out)
{
    if (!vk || !out || pipeline == VK_NULL_HANDLE)
        return KILN_EINVAL;
    *out = NULL;
    struct kiln_vk_pipeline *p = kiln__calloc(1, sizeof(*p));
    if (!p) {
        vk->fn.vkDestroyPipeline(vk->device, pipeline, vk->alloc);
        return KILN_ENOMEM;
    }
    p->pipeline = pipeline;
    link_object(vk, &vk->pipelines, &p->link);
    atomic_fetch_add(&vk->live_pipelines, 1);
    *out = p;
    return KILN_OK;
}

int kiln_vk_pipeline_adopt(struct kiln_vk *vk, VkPipeline pipeline, struct kiln_vk_pipeline **out)
{
    uint64_t m = kiln__err_mark();
    return kiln__err_end(vk ? &vk->err : NULL, m, "kiln_vk_pipeline_adopt", NULL,
                         pipeline_adopt_body(vk, pipeline, out));
}

uint64_t kiln_vk_pipeline_handle(const struct kiln_vk_pipeline *p)
{
    return p ? (uint64_t)(uintptr_t)p->pipeline : 0;
}

/* ---- kept modules (the baseline) ------------------------------------------ */

static int module_create_body(struct kiln_vk *vk, const char *name, const struct kiln_vk_stage *src,
                              struct kiln_vk_module **out)
{
    if (!vk || !src || !out)
        return KILN_EINVAL;
    *out = NULL;
    struct kiln_vk_stage in = KILN_VK_STAGE_INIT;
    KILN_TRY(KILN_STRUCT_IN(&in, src, "kiln_vk_stage"));
    const uint32_t *words;
    uint32_t *owned;
    int64_t n = unpack_stage(vk, name, "kept", &in, false, &words, &owned);
    if (n < 0)
        return (int)n;
    struct kiln_vk_module *m = kiln__calloc(1, sizeof(*m));
    if (!m)
        return KILN_ENOMEM;
    /* Whether kiln's own shapes may use it: its words are gone after this. */
    char why[256];
    int fit = fit_builtin_layout(words, (size_t)n, why, sizeof(why));
    if (fit == KILN_ENOTSUP || fit == KILN_EFORMAT) {
        size_t len = strlen(why) + 1;
        m->unfit_rc = fit;
        if ((m->unfit = kiln__malloc(len)) != NULL)
            memcpy(m->unfit, why, len);
        else
            fit = KILN_ENOMEM;
    }
    if (fit == KILN_ENOMEM) {
        kiln__free(m);
        return KILN_ENOMEM;
    }
    VkShaderModuleCreateInfo ci = {
        .sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
        .codeSize = (size_t)n * 4,
        .pCode = words,
    };
    VkResult res = vk->fn.vkCreateShaderModule(vk->device, &ci, vk->alloc, &m->module);
    if (res != VK_SUCCESS) {
        KILN_WARN("vk", "%s: kept module: vkCreateShaderModule failed: %s", prog(name),
                  kiln_vk_result_name(res));
        kiln__free(m->unfit);
        kiln__free(m);
        return KILN_EVULKAN;
    }
    count_module_made(vk);
    link_object(vk, &vk->modules, &m->link);
    *out = m;
    return KILN_OK;
}

int kiln_vk_module_create(struct kiln_vk *vk, const char *name, const struct kiln_vk_stage *src,
                          struct kiln_vk_module **out)
{
    uint64_t m = kiln__err_mark();
    return kiln__err_end(vk ? &vk->err : NULL, m, "kiln_vk_module_create", name,
                         module_create_body(vk, name, src, out));
}

void kiln_vk_module_destroy(struct kiln_vk *vk, struct kiln_vk_module *m)
{
    if (!vk || !m)
        return;
    if (!m)
        return;
    unlink_object(vk, &m->link);
    vk->fn.vkDestroyShaderModule(vk->device, m->module, vk->alloc);
    atomic_fetch_sub(&vk->live_modules, 1);
    kiln__free(m->unfit);
    kiln__free(m);
}
