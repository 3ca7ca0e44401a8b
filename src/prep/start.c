/*
 * start.c - the warm start (kiln_warm_start), and the pipeline phase it
 * shares with the preparation.
 *
 * Invariants and why they hold:
 *
 * - The warm start never adds, changes or drops a record. It writes only
 *   the last-use marks (programs.kpu, through kiln_cache_save_use's
 *   temporary file and rename), pipelines.vkc (only when it was missing
 *   or not used: the driver's data is then new) and, with the host tier
 *   of driver binaries on (binaries.c), the binaries of the pipelines it
 *   built that the tier lacked, in the tier's own cache folder.
 *
 * - A pipeline made from the tier's binaries skips the SPIR-V checks
 *   below: no SPIR-V reaches the driver, only the driver's own binaries,
 *   checked by the tier's cache (checksum) and parser (sizes) first. A
 *   builder's pipeline (KILN_BUILDER_BINARIES: the Fossilize builder) goes
 *   through the tier too: its stages are opened and checked as always
 *   (the builder's create info needs them; the driver ignores them beside
 *   the binaries), the binaries are bound for that one create and
 *   unbound right after it whatever the builder answered, and only a
 *   pipeline the builder made with the capture flags has its binaries
 *   kept (capturing one made without them is invalid usage).
 *
 * - Last use is recorded under the writer lock, or not at all. Marks are
 *   a whole-file snapshot of one handle's view, so two handles writing
 *   them unlocked could each undo the other's marks, and a prune could
 *   then drop what a start just used. The start therefore opens the cache
 *   as a writer that keeps its stamp and dictionary (KILN_CACHE_KEEP_STAMP:
 *   it never starts a cache over), loads, saves the marks and closes it
 *   before the pipeline phase, so it holds the lock for the open and the
 *   read only. When it cannot be a writer (another one holds the lock, the
 *   folder is read-only) or is asked not to be, it opens read-only: no
 *   lock, a stale index made up for in memory, nothing written to the
 *   cache, and one info line says last use was not recorded.
 *
 * - The dictionary outlives the cache handle: the start unpacks with a
 *   copy of kiln_cache_dict (which is valid only while the handle is
 *   open), taken before the handle is closed.
 *
 * - Nothing unchecked reaches the driver. A record is used only when
 *   kiln_cache_load_many checked its head and checksum (status 0); its
 *   payload is then split by kiln_program_payload_parse, which checks every
 *   size and blob header, and a program about to be built is opened
 *   (kiln_program_open): each blob unpacked once against its own checksum
 *   and its words handed to kiln_vk as they are. A record that fails any of
 *   these is counted and never built.
 *
 * - Nothing unvalidated reaches the driver. A checksum says the words are
 *   those stored, not that they are valid SPIR-V: caches written before
 *   validation at store time, or by another route, may hold anything. So
 *   every stage goes through kiln_vk_validate_spirv right before its build
 *   (kiln_program_open, the same pass that unpacks it), in kiln_prepare and kiln_warm_start alike,
 * whatever the Vulkan context's own setting; only a payload this very process validated before
 * storing it (kiln_prepare's own, and any payload whose writer marked it KILN_PAYLOAD_VALIDATED
 * after validating every stage: kiln_prepare and kiln import foz do) is not checked twice. A build
 * without SPIRV-Tools cannot validate and so builds nothing (one line per program says why): the
 * safe side, since some drivers end the process on a bad module. One exception, by the builder's
 * word: a builder with KILN_BUILDER_RECORDED_SPIRV (the Fossilize adapter) builds programs recorded
 * from a working application, whose modules every driver already built. For those a stage the
 * validator refuses is built anyway when it is well-formed (kiln_vk_check_spirv_structure: no
 *   unknown opcode, no instruction cut or overlong, every id below a sane
 *   bound), with one warning line, and
 *   counted in recorded_invalid. What does not parse is refused for every
 *   kind: that is what ends a driver's process.
 *
 * - Shader modules live only for their create call: every pipeline goes
 *   through kiln_vk_compute_pipeline / kiln_vk_graphics_pipeline, which
 *   make the stage modules (or chain their create info) and release them
 *   before returning, whatever the driver answered.
 *
 * - Every program goes to exactly one outcome of its state kind: built,
 *   skipped (no builder for its kind, a shape kiln's own builder lacks, a
 *   stage whose interface kiln's layout does not hold, or the builder said
 *   KILN_ENOTSUP) or failed; a damaged or invalid payload is `bad`
 *   and no kind's. A builder gets its stages staged by kiln_vk_stage_module
 *   and they are released right after it returns, whatever it answered, so
 *   the transient-module rule holds for builders too. Per-kind counters are
 *   atomics, and the first skip's reason is written by the one worker that
 *   claims it; both are read only after the pool has joined.
 *
 * - A context kiln makes enables only the device extensions some program
 *   of the run needs (prep_vk.c).
 *
 * - Progress is reported from the caller's thread only: workers never call
 *   the progress callback, the caller polls the pool's counters, so the
 *   callback needs no lock.
 */
#include "kiln_internal.h"
#include "binaries.h"
#include "isolate_internal.h"
#include "journal.h"
#include "ledger.h"
#include "prep_internal.h"

#include "kiln/pool.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the pipeline phase ---------------------------------------------------- */

struct build_job {
    struct kiln__prep_memory_job mem; /* first: the pool's memory model reads it */
    struct kiln__prep_build *b;
    struct kiln__prep_item *item;
};

int kiln__prep_check_builders(const struct kiln_builder *builders, size_t n, const char *what)
{
    if (n && !builders) {
        KILN_ERROR("prep", "%s: %zu builders given and no array", what, n);
        return KILN_EINVAL;
    }
    for (size_t i = 0; i < n; i++) {
        if (builders[i].kind >= KILN_STATE_KINDS || !builders[i].build) {
            KILN_ERROR("prep", "%s: builder %zu (%s): %s", what, i,
                       builders[i].name ? builders[i].name : "builder",
                       builders[i].build ? "unknown state kind" : "no build function");
            return KILN_EINVAL;
        }
        /* extensions_needed answers one bit per extension. */
        if (builders[i].ndevice_extensions > KILN_BUILDER_MAX_EXTENSIONS ||
            (builders[i].ndevice_extensions && !builders[i].device_extensions)) {
            KILN_ERROR("prep",
                       "%s: builder %zu (%s): %u device extensions (at most %u, in an array)", what,
                       i, builders[i].name ? builders[i].name : "builder",
                       builders[i].ndevice_extensions, KILN_BUILDER_MAX_EXTENSIONS);
            return KILN_EINVAL;
        }
    }
    return KILN_OK;
}

uint64_t kiln__prep_kind_counts(struct kiln__prep_build *b,
                                struct kiln_kind_counts out[KILN_STATE_KINDS])
{
    uint64_t skipped = 0;
    for (unsigned k = 0; k < KILN_STATE_KINDS; k++) {
        out[k].built = atomic_load(&b->built[k]);
        out[k].skipped = atomic_load(&b->skipped[k]);
        out[k].failed = atomic_load(&b->failed[k]);
        snprintf(out[k].skip_reason, sizeof(out[k].skip_reason), "%s", b->skip_reason[k]);
        skipped += out[k].skipped;
    }
    return skipped;
}

/* Counts a skipped program of `kind`; the first one's reason is kept. */
static void count_skip(struct kiln__prep_build *b, uint32_t kind, const char *name,
                       const char *reason)
{
    atomic_fetch_add_explicit(&b->skipped[kind], 1, memory_order_relaxed);
    if (atomic_exchange(&b->skip_claimed[kind], 1u) == 0)
        snprintf(b->skip_reason[kind], sizeof(b->skip_reason[kind]), "%s", reason);
    KILN_INFO("prep", "%s: skipped: %s", name, reason);
}

/* One stage's specialization as Vulkan takes it (map entries decoded from
 * the payload's bytes). */
struct spec {
    VkSpecializationInfo info;
    VkSpecializationMapEntry *map;
};

static int spec_make(const struct kiln_stage_blob *st, struct spec *out)
{
    *out = (struct spec){.map = NULL};
    if (!st->nspec && !st->spec_size)
        return KILN_OK;
    if (st->nspec) {
        out->map = kiln__malloc((size_t)st->nspec * sizeof(*out->map));
        if (!out->map)
            return KILN_ENOMEM;
    }
    for (uint32_t k = 0; k < st->nspec; k++) {
        struct kiln_spec_entry e;
        kiln_spec_entry_get(st, k, &e);
        out->map[k] = (VkSpecializationMapEntry){e.constant_id, e.offset, e.size};
    }
    out->info = (VkSpecializationInfo){.mapEntryCount = st->nspec,
                                       .pMapEntries = out->map,
                                       .dataSize = st->spec_size,
                                       .pData = st->spec_data};
    return KILN_OK;
}

/* Opens a program right before its build, whatever its kind (see the top):
 * each stage unpacked and checked once. @return 0 with *op, or the failure,
 * counted as `bad`. */
static int open_stages(struct build_job *j, const char *name, bool recorded,
                       struct kiln_program_opened **op)
{
    struct kiln_program_open_options o = {
        .size = sizeof(o),
        .flags = (recorded ? KILN_PROGRAM_RECORDED_SPIRV : 0u) |
                 (j->item->validated ? KILN_PROGRAM_OPEN_CHECKED : 0u),
        .dict = j->b->dict,
        .name = name,
    };
    int rc = kiln_program_open(j->item->payload, j->item->size, &o, op);
    if (rc == KILN_OK && (*op)->recorded_invalid)
        atomic_fetch_add_explicit(&j->b->recorded_invalid, 1, memory_order_relaxed);
    if (rc < 0) {
        atomic_fetch_add_explicit(&j->b->bad, 1, memory_order_relaxed);
        j->item->status = rc;
    }
    return rc;
}

/* A stage of an open program as kiln_vk takes it: its words, unpacked and
 * checked once, never its blob again. */
static struct kiln_vk_stage vk_stage(const struct kiln_program_open_stage *os,
                                     const struct spec *sp)
{
    return (struct kiln_vk_stage){
        .size = sizeof(struct kiln_vk_stage),
        .entry = os->blob.entry,
        .specialization = sp->map || sp->info.dataSize ? &sp->info : NULL,
        .words = os->words,
        .nwords = os->nwords,
    };
}

/* Hands a built pipeline to the caller's callback, or destroys it. */
static void deliver(struct build_job *j, struct kiln_vk_pipeline *pipe)
{
    if (!pipe)
        return; /* made by the tests' fake provider of binaries: nothing to hand out */
    if (j->b->on_pipeline)
        j->b->on_pipeline(j->b->pipeline_user, j->item->key, pipe);
    else
        kiln_vk_pipeline_destroy(j->b->vk, pipe);
}

/* kiln's own shapes' flags for a phase's builds: the probe where asked. */
static uint32_t probe_flags(const struct kiln__prep_build *b)
{
    return b->build_flags & KILN_BUILD_PROBE ? KILN_VK_PIPELINE_NO_COMPILE : 0;
}

/* Whether a create of `it` captures its binaries: where the tier keeps
 * them, for a whole pipeline (not linked, not parts), and only for a
 * create that compiles: a probe's create is answered from the pipeline
 * cache or not at all, and captures nothing; its compile on a miss
 * (`compiling`) does. */
static bool captures(const struct kiln__prep_build *b, const struct kiln__prep_item *it,
                     bool compiling)
{
    return kiln__bin_tier_capturing(b->bins) &&
           !(it->link & (KILN_BUILD_LINK_FAST | KILN_BUILD_LINK_PARTS)) &&
           (compiling || !(b->build_flags & KILN_BUILD_PROBE));
}

/* kiln's own shapes' capture flag for such a create. */
static uint32_t capture_flag(const struct kiln__prep_build *b, const struct kiln__prep_item *it,
                             bool compiling)
{
    return captures(b, it, compiling) ? KILN__VK_PIPELINE_CAPTURE : 0;
}

/* A probe's miss is compiled at once, in the same build (its stages
 * staged once). */
static bool compile_on_miss(const struct kiln__prep_build *b)
{
    return (b->build_flags & (KILN_BUILD_PROBE | KILN_BUILD_COMPILE_ON_MISS)) ==
           (KILN_BUILD_PROBE | KILN_BUILD_COMPILE_ON_MISS);
}

/* Calls the builder with the phase's probe flag; a probe it answers
 * KILN_ECOMPILE_REQUIRED is asked again without it when the phase
 * compiles on a miss (the stages stay staged), with `miss_flags2` (the
 * host tier's capture flags where that compile captures). */
static int call_builder(struct kiln__prep_build *b, const struct kiln_builder *bld,
                        struct kiln__prep_item *it, struct kiln_build_request *req,
                        uint64_t miss_flags2)
{
    req->flags = b->build_flags & KILN_BUILD_PROBE;
    int rc = bld->build(bld->user, req);
    if (rc == KILN_ECOMPILE_REQUIRED && req->flags && compile_on_miss(b)) {
        it->probe_missed = true;
        req->flags = 0;
        req->pipeline = VK_NULL_HANDLE;
        req->why[0] = '\0';
        req->tier_flags2 = miss_flags2;
        req->tier_used = false;
        rc = bld->build(bld->user, req);
    }
    req->why[sizeof(req->why) - 1] = '\0';
    return rc;
}

/* The program's pipeline from the host tier's binaries, where it holds
 * them: no stage opened, no compile, so also a probe's answer (the
 * service probes first). @return true when made (counted and delivered);
 * false: build it from its SPIR-V. */
static bool from_binaries(struct build_job *j, bool compute)
{
    struct kiln__prep_build *b = j->b;
    if (!b->bins || (j->item->link & KILN_BUILD_LINK_PARTS))
        return false;
    struct kiln_vk_pipeline *pipe = NULL;
    if (kiln__bin_tier_make(b->bins, j->item->key, compute, &pipe) < 0)
        return false;
    atomic_fetch_add_explicit(&b->from_binaries, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&b->built[KILN_STATE_BUILTIN], 1, memory_order_relaxed);
    j->item->status = KILN_OK;
    j->item->from_binaries = true;
    deliver(j, pipe);
    return true;
}

/* kiln_vk_graphics.link for a run's KILN_BUILD_LINK_* bits. */
static uint32_t link_mode(uint32_t link)
{
    return link & KILN_BUILD_LINK_PARTS  ? KILN_VK_LINK_PARTS
           : link & KILN_BUILD_LINK_FAST ? KILN_VK_LINK_FAST
                                         : KILN_VK_LINK_NONE;
}

/* kiln's own shapes: one compute stage, or a vertex and a fragment stage,
 * in kiln's layout. kiln_vk checks the stages against that layout first and
 * answers KILN_ENOTSUP for one it does not hold (a binding other than set 0
 * binding 0's storage buffer, more push constants): the program is then
 * skipped, as a shape kiln lacks is; only a build that went wrong fails. */
static int build_builtin(struct build_job *j, const char *name, const struct kiln_stage_blob *st,
                         int n)
{
    struct kiln__prep_item *it = j->item;
    /* A one-module record whose stage bits include compute (an imported
     * module used by compute and other stages) is a compute program. */
    bool compute = n == 1 && (st[0].stage & KILN_VK_STAGE_COMPUTE_BIT);
    if (compute && (it->link & KILN_BUILD_LINK_PARTS)) {
        it->status = KILN_ENOTSUP; /* a compute pipeline has no library parts */
        return KILN_OK;
    }
    bool graphics = n == 2 && st[0].stage == KILN_VK_STAGE_VERTEX_BIT &&
                    st[1].stage == KILN_VK_STAGE_FRAGMENT_BIT;
    if (n == 1 && !compute) {
        /* One graphics (or other) module: stored, but no pipeline alone. */
        atomic_fetch_add_explicit(&j->b->lone, 1, memory_order_relaxed);
        it->status = KILN_OK;
        return KILN_OK;
    }
    if (!compute && !graphics) {
        char why[160];
        uint32_t all = 0;
        for (int i = 0; i < n; i++)
            all |= st[i].stage;
        snprintf(why, sizeof(why), "kiln's own shapes have no pipeline of %d stages (%s%s)", n,
                 all & KILN_VK_STAGE_RAY_TRACING_BITS ? "ray tracing: " : "",
                 kiln_vk_stage_name(all));
        count_skip(j->b, KILN_STATE_BUILTIN, name, why);
        it->status = KILN_ENOTSUP;
        return KILN_OK;
    }
    if (from_binaries(j, compute))
        return KILN_OK;
    struct kiln_program_opened *op = NULL;
    int rc = open_stages(j, name, false, &op);
    if (rc < 0)
        return rc;
    struct spec sp[2] = {{.map = NULL}, {.map = NULL}}; /* freed whatever spec_make did */
    bool captured = false; /* the create that made the pipeline captured its binaries */
    int ns = compute ? 1 : 2;
    for (int i = 0; i < ns && rc == KILN_OK; i++)
        rc = spec_make(&op->stages[i].blob, &sp[i]);
    struct kiln_vk_pipeline *pipe = NULL;
    if (rc == KILN_OK) {
        struct kiln_vk_stage vs[2];
        for (int i = 0; i < ns; i++)
            vs[i] = vk_stage(&op->stages[i], &sp[i]);
        struct kiln_vk_link_result lr = KILN_VK_LINK_RESULT_INIT;
        struct kiln_vk_graphics g = {.size = sizeof(g),
                                     .vertex = &vs[0],
                                     .fragment = &vs[1],
                                     .link = link_mode(it->link),
                                     .link_result = &lr};
        struct kiln_vk_pipeline_desc d = {.size = sizeof(d),
                                          .name = name,
                                          .compute = compute ? &vs[0] : NULL,
                                          .graphics = compute ? NULL : &g,
                                          .flags =
                                              probe_flags(j->b) | capture_flag(j->b, it, false)};
        rc = kiln_vk_pipeline_create(j->b->vk, &d, &pipe);
        if (rc == KILN_ECOMPILE_REQUIRED && compile_on_miss(j->b)) {
            j->item->probe_missed = true; /* compiled now, the stages still open */
            d.flags = capture_flag(j->b, it, true);
            rc = kiln_vk_pipeline_create(j->b->vk, &d, &pipe);
        }
        captured = (d.flags & KILN__VK_PIPELINE_CAPTURE) != 0;
        it->linked = !compute && lr.linked;
        it->parts_built = lr.parts_built;
        it->parts_reused = lr.parts_reused;
    }
    kiln__free(sp[0].map);
    kiln__free(sp[1].map);
    kiln_program_opened_free(op);
    it->status = rc;
    if (rc == KILN_ECOMPILE_REQUIRED) {
        atomic_fetch_add_explicit(&j->b->compile_required, 1, memory_order_relaxed);
        return KILN_OK; /* a probe's answer: nothing built, nothing failed */
    }
    if (rc == KILN_ENOTSUP && (it->link & KILN_BUILD_LINK_PARTS))
        return KILN_OK; /* no parts here (compute, no libraries): nothing skipped */
    if (rc == KILN_ENOTSUP) {
        count_skip(j->b, KILN_STATE_BUILTIN, name, "its stages do not fit kiln's layout");
        return KILN_OK;
    }
    if (rc < 0) {
        atomic_fetch_add_explicit(&j->b->failed[KILN_STATE_BUILTIN], 1, memory_order_relaxed);
        return rc; /* kiln_vk logged it, naming the program */
    }
    if (!pipe)
        return KILN_OK; /* the parts alone (KILN_BUILD_LINK_PARTS): no pipeline built */
    atomic_fetch_add_explicit(&j->b->built[KILN_STATE_BUILTIN], 1, memory_order_relaxed);
    /* A failure to keep is logged: only the binaries are lost, not the build. */
    if (captured)
        it->binaries_kept = kiln__bin_tier_keep(j->b->bins, it->key, pipe) == KILN_OK;
    struct kiln_vk_feedback fb = KILN_VK_FEEDBACK_INIT;
    if (kiln_vk_pipeline_feedback(pipe, &fb) == KILN_OK)
        kiln__prep_note_feedback(j->b, it, fb.valid, fb.cache_hit, fb.driver_ns);
    deliver(j, pipe);
    return KILN_OK;
}

/* The host tier for a builder's pipeline (kiln_build_request.tier_*): on
 * for a builder with KILN_BUILDER_BINARIES, outside fast links; a probe
 * may be made from binaries (no compile) but captures nothing, its
 * compile on a miss does. */
struct tier_ask {
    bool on;
    bool bound; /* the binaries were read, checked and bound (info: what to chain) */
    void *info;
};

/* Right before the builder's call: the program's binaries where the tier
 * holds them (a damaged or refused record leaves the request as it was:
 * built from SPIR-V), else the capture flags where the tier captures. */
static void tier_ask(struct kiln__prep_build *b, const struct kiln_builder *bld,
                     struct kiln__prep_item *it, struct kiln_build_request *req, struct tier_ask *t)
{
    *t = (struct tier_ask){.on = b->bins && (bld->flags & KILN_BUILDER_BINARIES) &&
                                 !(it->link & (KILN_BUILD_LINK_FAST | KILN_BUILD_LINK_PARTS))};
    if (!t->on)
        return;
    if (kiln__bin_tier_bind(b->bins, it->key, &t->info) == KILN_OK) {
        t->bound = true;
        req->tier_binaries = t->info;
    } else if (captures(b, it, false)) {
        req->tier_flags2 = kiln__bin_tier_capture_flags2(b->bins);
    }
}

/* The capture flags for the compile after a probe's miss (call_builder). */
static uint64_t tier_miss_flags2(struct kiln__prep_build *b, struct kiln__prep_item *it,
                                 const struct tier_ask *t)
{
    return t->on && !t->bound && captures(b, it, true) ? kiln__bin_tier_capture_flags2(b->bins) : 0;
}

/* Right after it, whatever it answered: the binaries are unbound, and a
 * pipeline the builder made with the capture flags has its binaries kept
 * (a provider with no flags, the tests' fake, needs none). @return true
 * when the pipeline came from the binaries. */
static bool tier_done(struct kiln__prep_build *b, struct kiln__prep_item *it,
                      const struct kiln_build_request *req, struct tier_ask *t, int rc)
{
    if (!t->on)
        return false;
    kiln__bin_tier_unbind(b->bins, t->info);
    if (rc != KILN_OK)
        return false;
    if (t->bound)
        return req->tier_used || !t->info;
    /* Asked with the capture flags and taken, or a provider that needs none;
     * a probe's hit (req->flags still the probe) compiled nothing to keep. */
    bool captured = req->tier_flags2 ? req->tier_used : !kiln__bin_tier_capture_flags2(b->bins);
    if (captured && req->pipeline != VK_NULL_HANDLE && !(req->flags & KILN_BUILD_PROBE) &&
        captures(b, it, true))
        it->binaries_kept = kiln__bin_tier_keep_handle(
                                b->bins, it->key, (uint64_t)(uintptr_t)req->pipeline) == KILN_OK;
    return false;
}

/* Calls the builder through the host tier (tier_ask, tier_done). A
 * create the driver refused with the binaries bound (another driver
 * build, damage the checks missed) is asked again from the SPIR-V, as
 * kiln's own shapes are, with the capture flags where the tier captures,
 * so the record is replaced. @return the builder's answer, *from_bins. */
static int call_tiered(struct kiln__prep_build *b, const struct kiln_builder *bld,
                       struct kiln__prep_item *it, struct kiln_build_request *req, bool *from_bins)
{
    struct tier_ask t;
    tier_ask(b, bld, it, req, &t);
    int rc = call_builder(b, bld, it, req, tier_miss_flags2(b, it, &t));
    if (t.bound && t.info && req->tier_used && rc < 0 && rc != KILN_ENOTSUP) {
        kiln__bin_tier_unbind(b->bins, t.info);
        kiln__bin_tier_refused(b->bins, it->key, rc);
        t = (struct tier_ask){.on = true};
        req->tier_binaries = NULL;
        req->tier_used = false;
        req->pipeline = VK_NULL_HANDLE;
        req->why[0] = '\0';
        if (captures(b, it, false))
            req->tier_flags2 = kiln__bin_tier_capture_flags2(b->bins);
        rc = call_builder(b, bld, it, req, tier_miss_flags2(b, it, &t));
    }
    *from_bins = tier_done(b, it, req, &t, rc);
    return rc;
}

/* A builder's built pipeline: counted, its feedback noted (not for one
 * from binaries: counted there), handed to on_pipeline or destroyed. */
static void builder_built(struct kiln__prep_build *b, struct kiln__prep_item *it, uint32_t kind,
                          const struct kiln_build_request *req, bool from_bins)
{
    atomic_fetch_add_explicit(&b->built[kind], 1, memory_order_relaxed);
    it->from_binaries = from_bins;
    if (from_bins)
        atomic_fetch_add_explicit(&b->from_binaries, 1, memory_order_relaxed);
    else
        kiln__prep_note_feedback(b, it, req->feedback_valid, req->feedback_cache_hit,
                                 req->feedback_driver_ns);
    if (req->pipeline == VK_NULL_HANDLE)
        return; /* the builder keeps it */
    struct kiln_vk_pipeline *pipe = NULL;
    if (b->on_pipeline && kiln_vk_pipeline_adopt(b->vk, req->pipeline, &pipe) == KILN_OK) {
        b->on_pipeline(b->pipeline_user, it->key, pipe);
    } else if (!b->on_pipeline) {
        /* Nobody takes it: the pipeline cache keeps what the driver made. */
        PFN_vkDestroyPipeline destroy =
            (PFN_vkDestroyPipeline)req->get_device_proc_addr(req->device, "vkDestroyPipeline");
        if (destroy)
            destroy(req->device, req->pipeline, NULL);
        /* Freed now, not at the device's end, where a driver defers it
         * to a queue submission (lavapipe): what it keeps would otherwise
         * grow with every build, past any memory budget. */
        (void)kiln__vk_settle(b->vk);
    }
}

/* Stages every stage and calls the builder; releases the stages after,
 * whatever it answered. */
static int build_with(struct build_job *j, unsigned worker, const struct kiln_builder *bld,
                      const char *name, const struct kiln_stage_blob *st, int n,
                      const struct kiln_payload_state *state)
{
    struct kiln__prep_build *b = j->b;
    struct kiln__prep_item *it = j->item;
    uint32_t kind = state->kind;
    const char *bname = bld->name ? bld->name : "builder";
    struct kiln_program_opened *op = NULL;
    int vrc = open_stages(j, name, (bld->flags & KILN_BUILDER_RECORDED_SPIRV) != 0, &op);
    if (vrc < 0)
        return vrc;
    struct kiln_vk_staged *staged = kiln__calloc((size_t)n, sizeof(*staged));
    VkPipelineShaderStageCreateInfo *infos = kiln__calloc((size_t)n, sizeof(*infos));
    struct spec *sp = kiln__calloc((size_t)n, sizeof(*sp));
    int made = 0, rc = staged && infos && sp ? KILN_OK : KILN_ENOMEM;
    for (int i = 0; i < n && rc == KILN_OK; i++) {
        rc = spec_make(&st[i], &sp[i]);
        if (rc < 0)
            break;
        struct kiln_vk_stage vs = vk_stage(&op->stages[i], &sp[i]);
        staged[i].size = sizeof(staged[i]);
        rc = kiln_vk_stage_module(b->vk, name, &vs, (VkShaderStageFlagBits)st[i].stage, &staged[i]);
        if (rc < 0)
            break; /* logged by kiln_vk_stage_module */
        infos[i] = staged[i].info;
        made++;
    }
    bool from_bins = false;
    struct kiln_build_request req = KILN_BUILD_REQUEST_INIT;
    memset(&req, 0, sizeof(req));
    req.size = sizeof(req);
    if (rc == KILN_OK) {
        struct kiln_vk_handles h = KILN_VK_HANDLES_INIT;
        kiln_vk_get_handles(b->vk, &h);
        req.key = it->key;
        req.name = name;
        req.state_kind = kind;
        req.state = state->bytes;
        req.state_size = state->size;
        req.nstages = (uint32_t)n;
        req.stages = infos;
        req.device = h.device;
        req.get_device_proc_addr =
            (PFN_vkGetDeviceProcAddr)h.get_instance_proc_addr(h.instance, "vkGetDeviceProcAddr");
        req.pipeline_cache = h.pipeline_cache;
        req.vk = b->vk;
        req.worker = worker;
        req.link = it->link;
        rc = call_tiered(b, bld, it, &req, &from_bins);
        it->linked = req.linked && (it->link & KILN_BUILD_LINK_FAST);
        it->parts_built = req.parts_built;
        it->parts_reused = req.parts_reused;
    } else if (rc == KILN_ENOMEM) {
        KILN_WARN("prep", "%s: not built: out of memory", name);
    }
    for (int i = 0; i < made; i++)
        kiln_vk_stage_release(b->vk, &staged[i]);
    for (int i = 0; sp && i < n; i++)
        kiln__free(sp[i].map);
    kiln__free(sp);
    kiln__free(infos);
    kiln__free(staged);
    kiln_program_opened_free(op);

    it->status = rc;
    if (rc == KILN_ECOMPILE_REQUIRED && (b->build_flags & KILN_BUILD_PROBE)) {
        atomic_fetch_add_explicit(&b->compile_required, 1, memory_order_relaxed);
        return KILN_OK; /* a probe's answer: nothing built, nothing failed */
    }
    bool parts = (it->link & KILN_BUILD_LINK_PARTS) != 0;
    if (rc == KILN_ENOTSUP && parts)
        return KILN_OK; /* no parts for this one: nothing skipped, nothing failed */
    if (rc == KILN_ENOTSUP && made == n) {
        char why[sizeof(req.why) + 64];
        snprintf(why, sizeof(why), "%s: %s", bname, req.why[0] ? req.why : "not supported here");
        count_skip(b, kind, name, why);
        return KILN_OK;
    }
    if (rc < 0) {
        if (made == n)
            KILN_WARN("prep", "%s: not built: %s: %s (%s)", name, bname,
                      req.why[0] ? req.why : "failed", kiln_strerror(rc));
        atomic_fetch_add_explicit(&b->failed[kind], 1, memory_order_relaxed);
        return rc;
    }
    if (parts && req.pipeline == VK_NULL_HANDLE)
        return KILN_OK; /* the parts alone: no pipeline built */
    builder_built(b, it, kind, &req, from_bins);
    return KILN_OK;
}

/* Builds one program's pipeline from its payload, through the builder for
 * its state kind. */
static int build_one(void *arg, unsigned worker)
{
    struct build_job *j = arg;
    struct kiln__prep_item *it = j->item;
    if (kiln__prep_stopping(j->b->cancel, j->b->cancel_user, &j->b->started)) {
        atomic_store(&j->b->stopped, true);
        it->status = KILN_ECANCELED; /* not started: the next run builds it */
        return KILN_OK;
    }
    /* Log lines and builders name it by its key, as every run does; the
     * test faults' hook keeps the source's own name. */
    char label[KILN__PREP_LABEL_MAX], hex[48];
    const char *name = kiln__prep_item_label(it, label, sizeof(label));
    snprintf(hex, sizeof(hex), "program %016" PRIx64 "%016" PRIx64, it->key.hi, it->key.lo);
    const char *hook_name = it->name ? it->name : hex;

    struct kiln_stage_blob st[KILN_PROGRAM_MAX_STAGES];
    struct kiln_payload_state state;
    int n =
        kiln_program_payload_parse_full(it->payload, it->size, KILN_PROGRAM_MAX_STAGES, st, &state);
    if (n < 0) {
        KILN_WARN("prep", "%s: not built: the payload is not a program's (%s)", name,
                  kiln_strerror(n));
        atomic_fetch_add_explicit(&j->b->bad, 1, memory_order_relaxed);
        it->status = n;
        return n;
    }
    /* Its writer validated every stage before storing it (see the top). */
    if (state.flags & KILN_PAYLOAD_VALIDATED)
        it->validated = true;
    kiln__prep_before_build(hook_name); /* the test faults' hook: empty in libkiln */
    const struct kiln_builder *bld =
        kiln__prep_builder_for(j->b->builders, j->b->nbuilders, state.kind);
    if (bld)
        return build_with(j, worker, bld, name, st, n, &state);
    if (state.kind == KILN_STATE_BUILTIN)
        return build_builtin(j, name, st, n);
    char why[64];
    snprintf(why, sizeof(why), "no builder for state kind %u", state.kind);
    count_skip(j->b, state.kind, name, why);
    it->status = KILN_ENOTSUP;
    return KILN_OK;
}

int kiln__prep_build_one(struct kiln__prep_build *b, struct kiln__prep_item *item, unsigned worker)
{
    struct build_job j = {.b = b, .item = item};
    return build_one(&j, worker);
}

/* build_one, noted in flight in the worker's journal slot for its whole
 * length (journal.c): a crash in the driver leaves it noted. */
static int journaled_build_one(void *arg, unsigned worker)
{
    struct build_job *j = arg;
    kiln__journal_note(j->b->journal, worker, j->item->key, j->item->name);
    int rc = build_one(arg, worker);
    kiln__journal_done(j->b->journal, worker);
    return rc;
}

/* Larger payloads first (qsort order for build jobs). */
static int larger_payload_first(const void *x, const void *y)
{
    size_t a = ((const struct build_job *)x)->item->size;
    size_t b = ((const struct build_job *)y)->item->size;
    return a < b ? 1 : a > b ? -1 : 0;
}

static int64_t build_all(struct kiln__prep_build *b, struct kiln__prep_item *items, size_t n,
                         unsigned workers, uint64_t *failed)
{
    *failed = 0;
    size_t todo = 0;
    for (size_t i = 0; i < n; i++)
        todo += items[i].payload != NULL;
    if (b->progress)
        b->progress(b->progress_user, KILN_PREP_PHASE_PIPELINES, 0, todo);
    if (todo == 0)
        return 0;

    struct build_job *jobs = kiln__calloc(todo, sizeof(*jobs));
    if (!jobs)
        return KILN_ENOMEM;
    struct kiln_pool *pool;
    struct kiln_pool_memory_model mm;
    int rc = kiln__prep_pool(workers, b->memory_budget, b->background, b->executor,
                             kiln__prep_memory_model(b->memory, &mm), &pool);
    if (rc < 0) {
        kiln__free(jobs);
        return rc;
    }
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (items[i].payload)
            jobs[k++] = (struct build_job){.b = b, .item = &items[i]};
    for (size_t i = 0; b->memory && i < todo; i++) {
        jobs[i].mem.item = jobs[i].item;
        jobs[i].mem.cls = kiln__prep_memory_class(jobs[i].item->payload, jobs[i].item->size,
                                                  &jobs[i].mem.spirv_bytes);
    }
    /* The largest programs first: the builds that start last are then short
     * ones, and no worker idles at the end while one long build finishes. */
    qsort(jobs, todo, sizeof(*jobs), larger_payload_first);
    struct kiln__prep_jobs pj = {
        .fn = journaled_build_one, .jobs = jobs, .stride = sizeof(*jobs), .count = todo};
    rc = kiln__prep_run_pipelines(pool, &pj, b->progress, b->progress_user);
    struct kiln_pool_progress pp = KILN_POOL_PROGRESS_INIT;
    kiln_pool_get_progress(pool, &pp);
    kiln_pool_destroy(pool);
    kiln__free(jobs);
    if (rc < 0)
        return rc;
    *failed = pp.failed;
    return kiln__prep_pipelines_done(b);
}

/* Builds every item, then lets each builder release what it made on the
 * device, which may be destroyed right after (struct kiln_builder.finish). */
int64_t kiln__prep_build_all(struct kiln__prep_build *b, struct kiln__prep_item *items, size_t n,
                             unsigned workers, uint64_t *failed)
{
    int64_t built = build_all(b, items, n, workers, failed);
    for (size_t i = 0; i < b->nbuilders; i++)
        if (b->builders[i].finish)
            b->builders[i].finish(b->builders[i].user);
    return built;
}

/* ---- the warm start -------------------------------------------------------- */

static int start_fail(struct kiln_start_summary *s, enum kiln_prep_step step, int rc)
{
    s->error = rc;
    s->step = step;
    return rc;
}

/*
 * Opens the cache for the start: as a writer that keeps its stamp and
 * dictionary when it can (so last use can be recorded), else read-only.
 * @return 0 with the cache in *out and *writer set, or the open's error.
 */
/* No cache yet beneath layers: an empty one with the first usable layer's
 * stamp and dictionary, so the layers can be used (kiln_start_options.layers).
 * @return 0 when one was made. */
static int start_make_top(const struct kiln_start_options *o)
{
    int rc = KILN_ENOENT;
    for (size_t i = 0; rc != KILN_OK && i < o->nlayers; i++) {
        struct kiln_cache_options lo = {.size = sizeof(lo),
                                        .stamp = o->stamp,
                                        .flags = KILN_CACHE_READ_ONLY |
                                                 (o->any_stamp ? KILN_CACHE_ANY_STAMP : 0u),
                                        .io = o->io};
        struct kiln_cache *l = NULL;
        if (!o->layers[i] || kiln_cache_open(o->layers[i], &lo, &l) < 0)
            continue;
        struct kiln_cache_stats ls = KILN_CACHE_STATS_INIT;
        kiln_cache_get_stats(l, &ls);
        struct kiln_cache_options top = {.size = sizeof(top),
                                         .stamp = ls.stamp,
                                         .flags = KILN_CACHE_CREATE,
                                         .io = o->io,
                                         .dict = kiln_cache_dict(l)};
        struct kiln_cache *c = NULL;
        rc = ls.dict_id && !top.dict ? KILN_ECORRUPT : kiln_cache_open(o->cache_dir, &top, &c);
        kiln_cache_close(c);
        kiln_cache_close(l);
        if (rc == KILN_OK)
            KILN_INFO("prep", "%s: a new cache beneath layer %s (its stamp %016" PRIx64 ")",
                      o->cache_dir, o->layers[i], ls.stamp);
    }
    return rc;
}

static int start_open(const struct kiln_start_options *o, struct kiln_cache **out, bool *writer,
                      struct kiln_start_summary *s)
{
    *writer = false;
    int rc = KILN_EINVAL;
    if (o->read_only) {
        snprintf(s->use_text, sizeof(s->use_text), "opened read-only as asked");
    } else {
        struct kiln_cache_options wopt = {.size = sizeof(wopt),
                                          .flags = KILN_CACHE_KEEP_STAMP,
                                          .io = o->io,
                                          .executor = o->executor,
                                          .layers = o->layers,
                                          .nlayers = o->nlayers};
        rc = kiln_cache_open(o->cache_dir, &wopt, out);
        if (rc == KILN_ENOENT && start_make_top(o) == KILN_OK)
            rc = kiln_cache_open(o->cache_dir, &wopt, out);
        if (rc == KILN_OK) {
            struct kiln_cache_stats cs = KILN_CACHE_STATS_INIT;
            kiln_cache_get_stats(*out, &cs);
            if (o->any_stamp || cs.stamp == o->stamp) {
                *writer = true;
                return KILN_OK;
            }
            kiln_cache_close(*out); /* the read-only open below refuses it */
            *out = NULL;
            snprintf(s->use_text, sizeof(s->use_text), "another stamp");
        } else if (rc == KILN_ENOENT || rc == KILN_ECORRUPT || rc == KILN_ENOMEM) {
            /* No cache, or no copy of the dictionary its records name (the
             * open said which in its one line), or no memory: a read-only
             * open meets the same, and would only say it again. */
            return rc;
        } else {
            snprintf(s->use_text, sizeof(s->use_text), "opened read-only: %s",
                     rc == KILN_EBUSY ? "another writer holds the cache" : kiln_strerror(rc));
        }
    }
    struct kiln_cache_options ropt = {
        .size = sizeof(ropt),
        .stamp = o->stamp,
        .flags =
            KILN_CACHE_READ_ONLY | KILN_CACHE_USE_DICT | (o->any_stamp ? KILN_CACHE_ANY_STAMP : 0u),
        .io = o->io,
        .executor = o->executor,
        .layers = o->layers,
        .nlayers = o->nlayers,
    };
    rc = kiln_cache_open(o->cache_dir, &ropt, out);
    struct kiln_cache_stats cs = KILN_CACHE_STATS_INIT;
    if (rc == KILN_OK && kiln_cache_get_stats(*out, &cs) == KILN_OK && cs.dict_id &&
        !kiln_cache_dict(*out)) {
        /* Opened without the dictionary its records name (the open logged
         * why): no program could be unpacked. */
        kiln_cache_close(*out);
        *out = NULL;
        rc = KILN_ECORRUPT;
    }
    return rc;
}

/* A ledger failure that a crash or hang gave: what the start skips. */
static bool crash_error(int err)
{
    return err == KILN_ECRASH || err == KILN_ETIMEDOUT;
}

/*
 * The ledger's part of the start, after the Vulkan context: takes from
 * `items` what a dead run had in flight on this driver (the journal's
 * suspects) and, unless retry_failed, what the ledger records as having
 * crashed on it; marks in retried[] those it builds again. A ledger that
 * cannot be read answers nothing.
 */
static void start_ledger_begin(const struct kiln_start_options *o, struct kiln__journal *journal,
                               const struct kiln__ledger_driver *d, struct kiln__prep_item *items,
                               size_t n, unsigned char *retried, struct kiln_start_summary *s)
{
    const struct kiln__journal_suspect *sus = NULL;
    size_t nsus = kiln__journal_suspects(journal, &sus);
    s->crash_skipped = kiln__prep_skip_suspects(sus, nsus, d, items, n, "kiln start");
    struct kiln__ledger *l = NULL;
    if (kiln__ledger_open(o->cache_dir, o->io, d, &l) < 0)
        return;
    for (size_t i = 0; i < n; i++) {
        int err = 0;
        if (!items[i].payload ||
            kiln__ledger_lookup(l, items[i].key, &err) != KILN__LEDGER_FAILED || !crash_error(err))
            continue;
        if (o->retry_failed) {
            retried[i] = 1;
            continue;
        }
        items[i].payload = NULL;
        s->ledger_failed++;
    }
    kiln__ledger_close(l);
    if (s->ledger_failed)
        KILN_WARN("prep",
                  "%s: %" PRIu64 " program%s crashed a process or worker on this driver before: "
                  "skipped (kiln start --retry-failed builds them again)",
                  o->cache_dir, s->ledger_failed, s->ledger_failed == 1 ? "" : "s");
}

/*
 * Records in the ledger, under the cache's writer lock taken again for
 * it, what the start learnt: programs that crashed or hung an isolated
 * worker (the driver's word), the retried ones that were built (only
 * once pipelines.vkc was saved, as kiln_prepare does), and the driver's
 * word on the start's builds (`run`, when it built any). Nothing to
 * record: nothing opened. Another writer holding the cache: not recorded (info).
 */
static void start_ledger_end(const struct kiln_start_options *o, struct kiln_vk *own_vk,
                             const struct kiln__ledger_driver *d,
                             const struct kiln__prep_item *items, size_t n,
                             const unsigned char *retried, const struct kiln__ledger_run *run)
{
    bool crashed = false, rebuilt = false;
    for (size_t i = 0; i < n; i++) {
        crashed |= crash_error(items[i].status) && !items[i].unreached && !items[i].early_timeout &&
                   items[i].payload;
        rebuilt |= retried[i] && items[i].status == KILN_OK;
    }
    if (!crashed && !rebuilt && !run->pipelines)
        return;
    struct kiln_cache *c = NULL;
    struct kiln_cache_options wopt = {
        .size = sizeof(wopt), .flags = KILN_CACHE_KEEP_STAMP, .io = o->io};
    int rc = o->read_only ? KILN_EBUSY : kiln_cache_open(o->cache_dir, &wopt, &c);
    if (rc < 0) {
        KILN_INFO("prep", "%s: the build ledger not written (%s)", o->cache_dir,
                  o->read_only ? "opened read-only as asked" : kiln_strerror(rc));
        return;
    }
    bool saved = rebuilt && own_vk && kiln_vk_cache_save(own_vk) == KILN_OK;
    struct kiln__ledger *l = NULL;
    rc = kiln__ledger_open(o->cache_dir, o->io, d, &l);
    for (size_t i = 0; i < n && rc == KILN_OK; i++) {
        if (crash_error(items[i].status) && !items[i].unreached && !items[i].early_timeout &&
            items[i].payload)
            rc = kiln__ledger_note(l, items[i].key, KILN__LEDGER_FAILED, items[i].status,
                                   kiln_errname(items[i].status));
        else if (retried[i] && items[i].status == KILN_OK && saved)
            rc = kiln__ledger_note(l, items[i].key, KILN__LEDGER_BUILT, 0, NULL);
    }
    if (rc == KILN_OK && run->pipelines)
        rc = kiln__ledger_note_run(l, run);
    if (rc == KILN_OK)
        rc = kiln__ledger_sync(l);
    if (rc < 0)
        KILN_WARN("prep", "%s: cannot write the build ledger (%s)", o->cache_dir,
                  kiln_strerror(rc));
    kiln__ledger_close(l);
    kiln_cache_close(c);
}

/* ---- the subset (kiln_start_options.keys, .recent) ------------------------ */

struct key_at {
    struct kiln_key key;
    size_t at;
};

static int by_key(const void *x, const void *y)
{
    const struct kiln_key *a = x, *b = y;
    if (a->hi != b->hi)
        return a->hi < b->hi ? -1 : 1;
    return a->lo < b->lo ? -1 : a->lo > b->lo;
}

/* Marks the entries of the asked keys; counts the keys none has. The
 * entries are the cache's and its layers', so they are matched by key. */
static int mark_keys(const struct kiln_start_options *o, const struct kiln_cache_entry *e, size_t n,
                     unsigned char *keep, uint64_t *absent)
{
    struct key_at *sorted = kiln__malloc((n ? n : 1) * sizeof(*sorted));
    if (!sorted)
        return KILN_ENOMEM;
    for (size_t i = 0; i < n; i++)
        sorted[i] = (struct key_at){.key = e[i].key, .at = i};
    qsort(sorted, n, sizeof(*sorted), by_key);
    for (size_t k = 0; k < o->nkeys; k++) {
        const struct key_at *hit = bsearch(&o->keys[k], sorted, n, sizeof(*sorted), by_key);
        if (hit)
            keep[hit->at] = 1;
        else
            (*absent)++;
    }
    kiln__free(sorted);
    return KILN_OK;
}

struct use_rank {
    uint32_t day;
    size_t at;
};

/* The most recently used first; within a day the later record first. */
static int more_recent_first(const void *x, const void *y)
{
    const struct use_rank *a = x, *b = y;
    if (a->day != b->day)
        return a->day > b->day ? -1 : 1;
    return a->at > b->at ? -1 : a->at < b->at;
}

static int mark_recent(struct kiln_cache *cache, const struct kiln_cache_entry *e, size_t n,
                       uint64_t recent, unsigned char *keep)
{
    if (recent >= n) {
        memset(keep, 1, n);
        return KILN_OK;
    }
    struct use_rank *r = kiln__malloc(n * sizeof(*r));
    if (!r)
        return KILN_ENOMEM;
    for (size_t i = 0; i < n; i++) {
        r[i] = (struct use_rank){.day = 0, .at = i};
        kiln_cache_last_use(cache, e[i].key, &r[i].day);
    }
    qsort(r, n, sizeof(*r), more_recent_first);
    for (uint64_t i = 0; i < recent; i++)
        keep[r[i].at] = 1;
    kiln__free(r);
    return KILN_OK;
}

/* Keeps in e[0..*n) only the records the subset names, in their order.
 * Nothing is read from the records file here: the index's entries say
 * where each record is. */
static int start_choose(const struct kiln_start_options *o, struct kiln_cache *cache,
                        struct kiln_cache_entry *e, size_t *n, struct kiln_start_summary *s)
{
    s->chosen = *n;
    if (!o->nkeys && !o->recent)
        return KILN_OK;
    unsigned char *keep = kiln__calloc(*n ? *n : 1, 1);
    if (!keep)
        return KILN_ENOMEM;
    int rc = o->recent ? mark_recent(cache, e, *n, o->recent, keep) : KILN_OK;
    if (rc == KILN_OK && o->nkeys)
        rc = mark_keys(o, e, *n, keep, &s->keys_absent);
    size_t m = 0;
    for (size_t i = 0; i < *n; i++)
        if (keep[i])
            e[m++] = e[i];
    kiln__free(keep);
    *n = m;
    s->chosen = m;
    return rc;
}

/* The host tier for the start (options.binaries): read-only with the
 * cache; stale folders removed only when a rebuild is asked. Isolated,
 * the workers make pipelines from it and send what they capture, which
 * this process keeps. NULL: off or not offered. */
static struct kiln__bin_tier *start_binaries(const struct kiln_start_options *o, struct kiln_vk *vk,
                                             struct kiln__bin_provider *provider)
{
    if (o->binaries == KILN_BINARIES_OFF)
        return NULL;
    struct kiln__bin_tier_options bo = {.cache_dir = o->cache_dir,
                                        .io = o->io,
                                        .read_only = o->read_only,
                                        .drop_stale = o->binaries_rebuild};
    return kiln__bin_tier_for_run(o->binaries, vk, provider, &bo);
}

/* Where the start's pipelines came from (kiln_start_summary.from_*). */
static void start_binaries_counts(struct kiln__prep_build *b, struct kiln_start_summary *s)
{
    KILN__PREP_BINARIES_COUNTS(b->bins, s);
    s->from_binaries = atomic_load(&b->from_binaries);
    s->from_pipeline_cache = atomic_load(&b->feedback_cache_hits);
    uint64_t known = s->from_binaries + s->from_pipeline_cache;
    s->compiled = s->pipelines_built > known ? s->pipelines_built - known : 0;
}

/* What one warm start holds from its first phase to its last
 * (warm_start()). It stays where warm_start() made it: the isolated
 * workers' run is `early.run`. */
struct start_run {
    const struct kiln_start_options *o;
    struct kiln_cache *cache; /* closed once the records are read */
    bool writer;
    struct kiln__journal *journal;
    struct kiln_cache_entry *entries;
    size_t n; /* the records chosen (start_choose) */
    struct kiln_key *keys;
    struct kiln_cache_result *res;
    struct kiln__prep_item *items;
    unsigned char *retried;
    /* The dictionary, copied: the handle is closed before the pipelines. */
    struct kiln_pack_dict *dict;
    /* The Vulkan context, begun beside the reading, and the isolated
     * workers started with it, greeted beside its device (prep_vk_early.c). */
    struct kiln__prep_early early;
    struct kiln_vk *vk;     /* the run's context: the caller's or own_vk */
    struct kiln_vk *own_vk; /* made by this run */
    uint64_t *ext_masks;
    struct kiln__ledger_driver drv;
    struct kiln__bin_provider bin_provider;
    struct kiln__bin_tier *bins;
    kiln_prep_progress_fn progress;
    void *progress_user;
};

/* Checks the options before anything is opened. @return 0, or KILN_EINVAL
 * (logged, and the summary's step INPUT). */
static int start_check_input(const struct kiln_start_options *o, struct kiln_start_summary *s)
{
    if (!o || !o->cache_dir) {
        KILN_ERROR("prep", "warm start: no cache folder given");
        return start_fail(s, KILN_PREP_STEP_INPUT, KILN_EINVAL);
    }
    if (kiln__prep_check_builders(o->builders, o->nbuilders, "warm start") < 0)
        return start_fail(s, KILN_PREP_STEP_INPUT, KILN_EINVAL);
    if (o->nkeys && !o->keys) {
        KILN_ERROR("prep", "warm start: %zu keys asked for and no array", o->nkeys);
        return start_fail(s, KILN_PREP_STEP_INPUT, KILN_EINVAL);
    }
    if (kiln__isolate_check(o->isolate, o->vk && o->on_pipeline) < 0)
        return start_fail(s, KILN_PREP_STEP_INPUT, KILN_EINVAL);
    return KILN_OK;
}

/* Opens the cache by the index, a writer when it can be (see the top), and
 * records what a dead run had in flight while the writer lock is held (a
 * start that is not a writer leaves it for one that is). */
static int start_open_phase(struct start_run *p, struct kiln_start_summary *s, uint64_t t0)
{
    const struct kiln_start_options *o = p->o;
    int rc = start_open(o, &p->cache, &p->writer, s);
    if (rc < 0) {
        /* Returned to the caller, who says it to the user (no cache, or a
         * file of another kind, is the user's input, not kiln's failure). */
        if (rc == KILN_ENOENT)
            KILN_INFO("prep", "%s: no program cache here (run kiln prepare first)", o->cache_dir);
        else
            KILN_INFO("prep", "%s: cannot open the program cache: %s", o->cache_dir,
                      kiln_strerror(rc));
        s->total_ns = kiln_now_ns() - t0;
        return start_fail(s,
                          rc == KILN_ENOENT || rc == KILN_ESTAMP || rc == KILN_EFORMAT
                              ? KILN_PREP_STEP_INPUT
                              : KILN_PREP_STEP_CACHE,
                          rc);
    }
    if (!o->no_vulkan && kiln__journal_scan(o->cache_dir, o->io, &p->journal) == KILN_OK) {
        const struct kiln__journal_suspect *sus = NULL;
        size_t nsus = kiln__journal_suspects(p->journal, &sus);
        kiln__journal_settle(
            p->journal,
            nsus && p->writer &&
                kiln__prep_record_suspects(o->cache_dir, o->io, NULL, NULL, sus, nsus) == KILN_OK);
    }
    struct kiln_cache_stats cs = KILN_CACHE_STATS_INIT;
    kiln_cache_get_stats(p->cache, &cs);
    s->open_kind = cs.open_kind;
    s->stamp = cs.stamp;
    s->dict_id = cs.dict_id;
    snprintf(s->open_text, sizeof(s->open_text), "%s", cs.open_text);
    return KILN_OK;
}

/* The records to start (all, or the subset asked), their slots, the
 * dictionary's copy and the pool's size; then the context and the isolated
 * workers begin, beside the reading. */
static int start_choose_phase(struct start_run *p, struct kiln_start_summary *s, uint64_t t0)
{
    const struct kiln_start_options *o = p->o;
    int rc = kiln_cache_entries(p->cache, &p->entries, &p->n);
    s->records = p->n;
    if (rc == KILN_OK)
        rc = start_choose(o, p->cache, p->entries, &p->n, s);
    size_t n = p->n;
    if (rc == KILN_OK && n) {
        p->keys = kiln__malloc(n * sizeof(*p->keys));
        p->items = kiln__calloc(n, sizeof(*p->items));
        p->retried = kiln__calloc(n, 1);
        if (!p->keys || !p->items || !p->retried)
            rc = KILN_ENOMEM;
    }
    if (rc == KILN_OK && kiln_cache_dict(p->cache)) {
        size_t dsize = 0;
        const void *dbytes = kiln_pack_dict_bytes(kiln_cache_dict(p->cache), &dsize);
        rc = kiln_pack_dict_load(dbytes, dsize, &p->dict);
    }
    s->open_ns = kiln_now_ns() - t0;
    if (rc != KILN_OK)
        return start_fail(s, KILN_PREP_STEP_OTHER, rc);
    for (size_t i = 0; i < n; i++)
        p->keys[i] = p->entries[i].key;
    struct kiln_pool_plan plan = KILN_POOL_PLAN_INIT;
    s->workers = kiln_pool_auto_workers(KILN_POOL_WORK_BUILD, o->jobs, &plan);
    snprintf(s->workers_reason, sizeof(s->workers_reason), "%s", plan.reason);
    s->read_threads = kiln_pool_auto_workers(KILN_POOL_WORK_READ, s->workers, NULL);
    kiln__prep_early_context(&p->early);
    kiln__prep_early_workers(&p->early, false, n, s->workers);
    return KILN_OK;
}

/* The last use recorded (a writer's), the tier swept to the programs while
 * no program can come, then the lock goes: the payloads outlive the handle. */
static void start_release_cache(struct start_run *p, struct kiln_start_summary *s)
{
    const struct kiln_start_options *o = p->o;
    if (p->writer) {
        int rc = kiln_cache_save_use(p->cache);
        s->use_recorded = rc == KILN_OK; /* advisory: a failure was logged */
        if (rc < 0)
            snprintf(s->use_text, sizeof(s->use_text), "not written: %s", kiln_strerror(rc));
    } else {
        KILN_INFO("prep", "%s: last use not recorded (%s)", o->cache_dir, s->use_text);
    }
    if (p->writer && o->binaries != KILN_BINARIES_OFF && !o->no_vulkan) {
        struct kiln_binaries_sweep_report sw;
        if (kiln__bin_sweep(p->cache, o->io, &sw) == KILN_OK)
            s->binaries_swept = sw.swept;
    }
    kiln_cache_close(p->cache);
    p->cache = NULL;
}

/* Reads every chosen record at once (the load marks each one used today);
 * a missing or damaged one is counted and not built. */
static int start_read_phase(struct start_run *p, struct kiln_start_summary *s)
{
    const struct kiln_start_options *o = p->o;
    uint64_t t = kiln_now_ns();
    if (p->n) {
        int64_t got = kiln_cache_load_many(p->cache, p->keys, p->n, s->read_threads, &p->res);
        if (got < 0) {
            KILN_ERROR("prep", "%s: cannot read the program cache: %s", o->cache_dir,
                       kiln_strerror((int)got));
            return start_fail(s, KILN_PREP_STEP_CACHE, (int)got);
        }
        s->loaded = (uint64_t)got;
    }
    s->read_ns = kiln_now_ns() - t;
    for (size_t i = 0; i < p->n; i++) {
        struct kiln__prep_item *it = &p->items[i];
        it->key = p->keys[i];
        if (p->res[i].status < 0) {
            s->missing++;
            it->status = p->res[i].status;
            continue;
        }
        s->bytes += p->res[i].size;
        it->payload = p->res[i].data;
        it->size = p->res[i].size;
    }
    if (s->missing)
        KILN_WARN("prep",
                  "%s: %" PRIu64 " of %zu records missing or damaged: not built "
                  "(kiln prepare makes them again)",
                  o->cache_dir, s->missing, p->n);
    start_release_cache(p, s);
    return KILN_OK;
}

/* Vulkan, with the pipeline cache kiln prepare saved: the context begun
 * beside the reading is finished with the records' extensions; then the
 * ledger's answer, and the journal claimed for a start in this process
 * (an isolated worker's crash costs no run). */
static int start_vulkan_phase(struct start_run *p, struct kiln_start_summary *s)
{
    const struct kiln_start_options *o = p->o;
    struct kiln__prep_vk_want want = KILN__PREP_VK_WANT(o, p->items, p->n);
    struct kiln__prep_vk_got got;
    struct kiln__prep_vk_report report = KILN__PREP_VK_REPORT(s);
    int rc = kiln__prep_early_finish(&p->early, &want, p->dict, &got, &report);
    p->vk = got.vk;
    p->own_vk = got.own;
    p->ext_masks = got.masks;
    if (rc < 0)
        return start_fail(s, KILN_PREP_STEP_VULKAN, rc);
    s->vulkan = true;
    kiln__prep_driver(p->vk, &p->drv);
    start_ledger_begin(o, p->journal, &p->drv, p->items, p->n, p->retried, s);
    if (!o->isolate)
        kiln__journal_claim(p->journal, &p->drv, s->workers);
    return KILN_OK;
}

/* New driver data kept for the next start, the driver's feedback counted,
 * the ledger's record of the run; a stopped start keeps what was built and
 * says it did not finish. */
static void start_save_phase(struct start_run *p, struct kiln__prep_build *b,
                             struct kiln_start_summary *s)
{
    if (p->own_vk &&
        (s->vk_cache_state == KILN_VK_CACHE_NEW || s->vk_cache_state == KILN_VK_CACHE_REJECTED)) {
        int rc = kiln_vk_cache_save(p->own_vk);
        if (rc < 0)
            s->vk_cache_save_error = rc; /* its one line is the vk module's */
    }
    s->feedback_pipelines = atomic_load(&b->feedback_pipelines);
    s->driver_cache_hits = atomic_load(&b->feedback_cache_hits);
    s->driver_ns = atomic_load(&b->feedback_driver_ns);
    struct kiln__ledger_run word;
    kiln__prep_run_word(b, s->pipelines_built, KILN_LEDGER_RUN_START, &word);
    start_ledger_end(p->o, p->own_vk, &p->drv, p->items, p->n, p->retried, &word);
    if (atomic_load(&b->stopped)) {
        s->canceled = true;
        start_fail(s, KILN_PREP_STEP_OTHER, KILN_ECANCELED);
    }
}

/* Every chosen pipeline, from the host tier's binaries where it has them,
 * in this process's pool or in isolated workers (whose pipeline caches are
 * merged into the run's); then saved. */
static int start_build_phase(struct start_run *p, struct kiln_start_summary *s)
{
    const struct kiln_start_options *o = p->o;
    uint64_t t = kiln_now_ns();
    struct kiln__prep_build b = {.vk = p->vk,
                                 .dict = p->dict,
                                 .on_pipeline = o->vk ? o->on_pipeline : NULL,
                                 .pipeline_user = o->pipeline_user,
                                 .progress = p->progress,
                                 .progress_user = p->progress_user,
                                 .builders = o->builders,
                                 .nbuilders = o->nbuilders,
                                 .executor = o->executor,
                                 .cancel = o->cancel,
                                 .cancel_user = o->cancel_user,
                                 .journal = p->journal};
    p->bins = start_binaries(o, p->vk, &p->bin_provider);
    b.bins = p->bins;
    int64_t built;
    if (o->isolate) {
        kiln__prep_isolate_extensions(o->builders, o->nbuilders, p->ext_masks, &p->early.run);
        struct kiln__isolate_stats ist;
        built = kiln__isolate_build_all(&b, &p->early.run, p->items, p->n, s->workers,
                                        &s->pipelines_failed, &ist);
        KILN__ISOLATE_STATS_TO(s, &ist);
    } else {
        built = kiln__prep_build_all(&b, p->items, p->n, s->workers, &s->pipelines_failed);
    }
    s->pipelines_ns = kiln_now_ns() - t;
    kiln__journal_close(p->journal); /* the phase is over: nothing in flight */
    p->journal = NULL;
    s->pipelines_skipped = kiln__prep_kind_counts(&b, s->kinds);
    s->bad = atomic_load(&b.bad);
    s->lone_modules = atomic_load(&b.lone);
    s->recorded_invalid = atomic_load(&b.recorded_invalid);
    s->pipelines_failed -= s->bad;
    if (built < 0)
        return start_fail(s, KILN_PREP_STEP_OTHER, (int)built);
    s->pipelines_built = (uint64_t)built;
    start_binaries_counts(&b, s);
    if (s->lone_modules)
        KILN_INFO("prep",
                  "%s: %" PRIu64 " records are single graphics modules (no pipeline alone): "
                  "stored, not built",
                  o->cache_dir, s->lone_modules);
    start_save_phase(p, &b, s);
    return KILN_OK;
}

/* Frees what the start made, whichever phase it ended in. */
static void start_finish(struct start_run *p, struct kiln_start_summary *s, uint64_t t0)
{
    kiln__prep_early_end(&p->early);
    kiln__bin_tier_close(p->bins);
    kiln__journal_close(p->journal);
    kiln__free(p->retried);
    kiln_vk_destroy(p->own_vk);
    kiln__free(p->ext_masks);
    kiln_cache_results_free(p->res, p->n);
    kiln__free(p->items);
    kiln__free(p->keys);
    kiln_cache_entries_free(p->entries);
    kiln_cache_close(p->cache);
    kiln_pack_dict_destroy(p->dict);
    s->total_ns = kiln_now_ns() - t0;
    s->peak_rss = kiln_peak_rss_bytes();
}

/* The start, phase by phase; each phase that fails has set the summary's
 * error and step, and the phases after it are skipped. */
static int warm_start(const struct kiln_start_options *o, kiln_prep_progress_fn progress,
                      void *progress_user, struct kiln_start_summary *s, uint64_t t0)
{
    KILN_TRY(start_check_input(o, s));
    struct start_run p = {.o = o, .progress = progress, .progress_user = progress_user};
    KILN_TRY(start_open_phase(&p, s, t0));
    KILN__PREP_EARLY_INIT(&p.early, o);
    p.early.run.binaries = o->isolate && o->binaries != KILN_BINARIES_OFF;
    p.early.run.keep_binaries = p.early.run.binaries && !o->read_only;

    int rc = start_choose_phase(&p, s, t0);
    if (rc == KILN_OK)
        rc = start_read_phase(&p, s);
    if (rc == KILN_OK && !o->no_vulkan)
        rc = start_vulkan_phase(&p, s);
    if (rc == KILN_OK && !o->no_vulkan)
        start_build_phase(&p, s);
    start_finish(&p, s, t0);
    return s->error;
}

/* The caller's options and summary, read and written by the growable rule
 * (docs/abi.md), around warm_start(). */
static int warm_start_body(const struct kiln_start_options *o, kiln_prep_progress_fn progress,
                           void *progress_user, struct kiln_start_summary *summary)
{
    if (!summary)
        return KILN_EINVAL;
    KILN_TRY(kiln__struct_out_check(summary, "kiln_start_summary"));
    uint64_t t0 = kiln_now_ns();
    struct kiln_start_summary s = KILN_START_SUMMARY_INIT;
    memset(&s, 0, sizeof(s));
    s.size = sizeof(s);
    struct kiln_start_options opt = KILN_START_OPTIONS_INIT;
    struct kiln__prep_abi abi = {.builders.list = NULL};
    int rc = o ? KILN_STRUCT_IN(&opt, o, "kiln_start_options") : KILN_OK;
    if (o && rc == KILN_OK)
        rc = kiln__prep_abi_in(&abi, NULL, &opt.isolate, opt.io, &opt.builders, &opt.nbuilders);
    if (rc == KILN_OK)
        rc = warm_start(o ? &opt : NULL, progress, progress_user, &s, t0);
    else
        start_fail(&s, KILN_PREP_STEP_INPUT, rc);
    kiln__prep_abi_free(&abi);
    KILN_STRUCT_OUT(summary, &s);
    return rc;
}

/* The run gives no handle: a failure's text is the thread's (kiln_last_errmsg). */
int kiln_warm_start(const struct kiln_start_options *o, kiln_prep_progress_fn progress,
                    void *progress_user, struct kiln_start_summary *s)
{
    uint64_t m = kiln__err_mark();
    return kiln__err_end(NULL, m, "kiln_warm_start", o ? o->cache_dir : NULL,
                         warm_start_body(o, progress, progress_user, s));
}
