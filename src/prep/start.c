/*
 * start.c - the warm start (kiln_warm_start), and the pipeline phase it
 * shares with the preparation.
 *
 * Invariants and why they hold:
 *
 * - The warm start never adds, changes or drops a record. It writes only
 *   the last-use marks (programs.kpu, through kiln_cache_save_use's
 *   temporary file and rename) and pipelines.vkc (only when it was missing
 *   or not used: the driver's data is then new).
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
 *   size and blob header, and each blob is unpacked against its own
 *   checksum inside kiln_vk_stage_module. A record that fails any of these is
 *   counted and never built.
 *
 * - Nothing unvalidated reaches the driver. A checksum says the words are
 *   those stored, not that they are valid SPIR-V: caches written before
 *   validation at store time, or by another route, may hold anything. So
 *   every stage goes through kiln_vk_validate_spirv right before its build
 *   (validate_stages), in kiln_prepare and kiln_warm_start alike, whatever
 *   the Vulkan context's own setting; only a payload this very process
 *   validated before storing it (kiln_prepare's own, and any payload
 *   whose writer marked it KILN_PAYLOAD_VALIDATED after validating every
 *   stage: kiln_prepare and kiln import foz do) is not checked twice. A build without
 * SPIRV-Tools cannot validate and so builds nothing (one line per program says why): the safe side,
 * since some drivers end the process on a bad module.
 *   One exception, by the builder's word: a builder with
 *   KILN_BUILDER_RECORDED_SPIRV (the Fossilize adapter) builds programs
 *   recorded from a working application, whose modules every driver
 *   already built. For those a stage the validator refuses is built
 *   anyway when it is well-formed (kiln_vk_check_spirv_structure: no
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
 * - A context kiln makes enables only the builders' device extensions that
 *   some program of the run needs (kiln__prep_needed_extensions asks each
 *   builder's extensions_needed over the items to build, reading only the
 *   payload's table and state, before the context is made), and isolated
 *   workers get the same names in their greeting (isolate.c): an extension
 *   the run never uses can still cost the driver much memory (ray tracing:
 *   ~140 MiB on an NVIDIA H200). A builder without the callback gets all of
 *   its extensions, and a context the caller gives is used as it is.
 *
 * - Progress is reported from the caller's thread only: workers never call
 *   the progress callback, the caller polls the pool's counters, so the
 *   callback needs no lock.
 */
#include "kiln_internal.h"
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
    struct kiln__prep_build *b;
    struct kiln__prep_item *item;
};

/* The module policy (see the top and prep_internal.h). */
int kiln__prep_check_module(const uint32_t *words, size_t n, bool recorded, char *why, size_t cap)
{
    int rc = kiln_vk_validate_spirv(words, n, why, cap);
    if (rc != KILN_EFORMAT || !recorded)
        return rc;
    char parse[256];
    return kiln_vk_check_spirv_structure(words, n, parse, sizeof(parse)) == KILN_OK ? 1 : rc;
}

/*
 * Validates every stage of a payload before its build. @return 0, or the
 * first stage's failure, logged as one line naming the program, the stage
 * and the validator's message.
 */
static int validate_stages(const struct kiln_stage_blob *st, int n,
                           const struct kiln_pack_dict *dict, const char *name, bool recorded,
                           bool *accepted)
{
    *accepted = false;
    for (int i = 0; i < n; i++) {
        const uint32_t *words = NULL;
        int64_t nw = kiln_unpack_scratch(st[i].blob, st[i].blob_size, dict, &words);
        if (nw < 0) {
            KILN_WARN("prep", "%s: not built: its %s stage could not be unpacked: %s", name,
                      kiln_vk_stage_name(st[i].stage), kiln_strerror((int)nw));
            return (int)nw;
        }
        char why[512];
        int rc = kiln__prep_check_module(words, (size_t)nw, recorded, why, sizeof(why));
        if (rc == 1) {
            KILN_WARN("prep",
                      "%s: built though its %s stage breaks a rule of the SPIR-V validator "
                      "(recorded from an application; it parses): %s",
                      name, kiln_vk_stage_name(st[i].stage), why);
            *accepted = true;
            continue;
        }
        if (rc < 0) {
            KILN_WARN("prep", "%s: not built: its %s stage %s: %s", name,
                      kiln_vk_stage_name(st[i].stage),
                      rc == KILN_ENOTSUP ? "cannot be validated" : "is not valid SPIR-V", why);
            return rc;
        }
    }
    return KILN_OK;
}

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

int kiln__prep_builders_open(const struct kiln_builder *given, size_t n,
                             struct kiln__prep_builders *out)
{
    *out = (struct kiln__prep_builders){.list = given, .n = n};
    if (n && !given)
        return KILN_OK; /* refused by kiln__prep_check_builders */
    uint32_t have = 0;
    for (size_t i = 0; i < n; i++)
        if (given[i].kind < KILN_STATE_KINDS)
            have |= 1u << given[i].kind;
    if (have == (1u << KILN_STATE_KINDS) - 1u)
        return KILN_OK;
    struct kiln_builder *own = kiln__calloc(n + KILN_STATE_KINDS, sizeof(*own));
    if (!own)
        return KILN_ENOMEM;
    if (n)
        memcpy(own, given, n * sizeof(*own));
    size_t k = n;
    for (uint32_t kind = 0; kind < KILN_STATE_KINDS; kind++) {
        if (have & 1u << kind)
            continue;
        int rc = kiln__default_builder_create(kind, &own[k]);
        if (rc < 0) {
            out->own = own;
            out->ndefaults = k - n;
            kiln__prep_builders_close(out);
            return rc;
        }
        k += rc == 1;
    }
    if (k == n) {
        kiln__free(own);
        return KILN_OK;
    }
    *out = (struct kiln__prep_builders){.list = own, .n = k, .own = own, .ndefaults = k - n};
    return KILN_OK;
}

void kiln__prep_builders_close(struct kiln__prep_builders *b)
{
    if (b->own) {
        size_t n = b->n - b->ndefaults;
        for (size_t i = 0; i < b->ndefaults; i++)
            kiln__default_builder_destroy(&b->own[n + i]);
        kiln__free(b->own);
    }
    *b = (struct kiln__prep_builders){0};
}

/* The builder for `kind`: the first in the caller's array, or NULL. */
static const struct kiln_builder *builder_for(const struct kiln__prep_build *b, uint32_t kind)
{
    for (size_t i = 0; i < b->nbuilders; i++)
        if (b->builders[i].kind == kind)
            return &b->builders[i];
    return NULL;
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
        out->map = malloc((size_t)st->nspec * sizeof(*out->map));
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

/* Validates a program's stages right before its build, whatever its kind
 * (see the top): @return 0, or the failure, counted as `bad`. */
static int check_stages(struct build_job *j, const char *name, const struct kiln_stage_blob *st,
                        int n, bool recorded)
{
    bool accepted = false;
    int rc = j->item->validated ? KILN_OK
                                : validate_stages(st, n, j->b->dict, name, recorded, &accepted);
    if (accepted && rc == KILN_OK)
        atomic_fetch_add_explicit(&j->b->recorded_invalid, 1, memory_order_relaxed);
    if (rc < 0) {
        atomic_fetch_add_explicit(&j->b->bad, 1, memory_order_relaxed);
        j->item->status = rc;
    }
    return rc;
}

/* Hands a built pipeline to the caller's callback, or destroys it. */
static void deliver(struct build_job *j, struct kiln_vk_pipeline *pipe)
{
    if (j->b->on_pipeline)
        j->b->on_pipeline(j->b->pipeline_user, j->item->key, pipe);
    else
        kiln_vk_pipeline_destroy(j->b->vk, pipe);
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
    int rc = check_stages(j, name, st, n, false);
    if (rc < 0)
        return rc;
    struct spec sp[2] = {{.map = NULL}, {.map = NULL}}; /* freed whatever spec_make did */
    int ns = compute ? 1 : 2;
    for (int i = 0; i < ns && rc == KILN_OK; i++)
        rc = spec_make(&st[i], &sp[i]);
    struct kiln_vk_pipeline *pipe = NULL;
    if (rc == KILN_OK) {
        struct kiln_vk_stage vs[2];
        for (int i = 0; i < ns; i++)
            vs[i] = (struct kiln_vk_stage){
                .blob = st[i].blob,
                .blob_size = st[i].blob_size,
                .dict = j->b->dict,
                .entry = st[i].entry,
                .specialization = sp[i].map || sp[i].info.dataSize ? &sp[i].info : NULL,
            };
        if (compute) {
            rc = kiln_vk_compute_pipeline(j->b->vk, name, &vs[0], &pipe);
        } else {
            struct kiln_vk_graphics g = {.vertex = vs[0], .fragment = vs[1]};
            rc = kiln_vk_graphics_pipeline(j->b->vk, name, &g, &pipe);
        }
    }
    free(sp[0].map);
    free(sp[1].map);
    it->status = rc;
    if (rc == KILN_ENOTSUP) {
        count_skip(j->b, KILN_STATE_BUILTIN, name, "its stages do not fit kiln's layout");
        return KILN_OK;
    }
    if (rc < 0) {
        atomic_fetch_add_explicit(&j->b->failed[KILN_STATE_BUILTIN], 1, memory_order_relaxed);
        return rc; /* kiln_vk logged it, naming the program */
    }
    atomic_fetch_add_explicit(&j->b->built[KILN_STATE_BUILTIN], 1, memory_order_relaxed);
    deliver(j, pipe);
    return KILN_OK;
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
    int vrc = check_stages(j, name, st, n, (bld->flags & KILN_BUILDER_RECORDED_SPIRV) != 0);
    if (vrc < 0)
        return vrc;
    struct kiln_vk_staged *staged = calloc((size_t)n, sizeof(*staged));
    VkPipelineShaderStageCreateInfo *infos = calloc((size_t)n, sizeof(*infos));
    struct spec *sp = calloc((size_t)n, sizeof(*sp));
    int made = 0, rc = staged && infos && sp ? KILN_OK : KILN_ENOMEM;
    for (int i = 0; i < n && rc == KILN_OK; i++) {
        rc = spec_make(&st[i], &sp[i]);
        if (rc < 0)
            break;
        struct kiln_vk_stage vs = {
            .blob = st[i].blob,
            .blob_size = st[i].blob_size,
            .dict = b->dict,
            .entry = st[i].entry,
            .specialization = sp[i].map || sp[i].info.dataSize ? &sp[i].info : NULL,
        };
        rc = kiln_vk_stage_module(b->vk, name, &vs, (VkShaderStageFlagBits)st[i].stage, &staged[i]);
        if (rc < 0)
            break; /* logged by kiln_vk_stage_module */
        infos[i] = staged[i].info;
        made++;
    }
    struct kiln_build_request req;
    memset(&req, 0, sizeof(req));
    if (rc == KILN_OK) {
        struct kiln_vk_handles h;
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
        rc = bld->build(bld->user, &req);
        req.why[sizeof(req.why) - 1] = '\0';
    } else if (rc == KILN_ENOMEM) {
        KILN_WARN("prep", "%s: not built: out of memory", name);
    }
    for (int i = 0; i < made; i++)
        kiln_vk_stage_release(b->vk, &staged[i]);
    for (int i = 0; sp && i < n; i++)
        free(sp[i].map);
    free(sp);
    free(infos);
    free(staged);

    it->status = rc;
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
    atomic_fetch_add_explicit(&b->built[kind], 1, memory_order_relaxed);
    if (req.pipeline == VK_NULL_HANDLE)
        return KILN_OK; /* the builder keeps it */
    struct kiln_vk_pipeline *pipe = NULL;
    if (b->on_pipeline && kiln_vk_pipeline_adopt(b->vk, req.pipeline, &pipe) == KILN_OK) {
        b->on_pipeline(b->pipeline_user, it->key, pipe);
    } else if (!b->on_pipeline) {
        /* Nobody takes it: the pipeline cache keeps what the driver made. */
        PFN_vkDestroyPipeline destroy =
            (PFN_vkDestroyPipeline)req.get_device_proc_addr(req.device, "vkDestroyPipeline");
        if (destroy)
            destroy(req.device, req.pipeline, NULL);
    }
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
    char hex[48];
    const char *name = it->name;
    if (!name) {
        snprintf(hex, sizeof(hex), "program %016" PRIx64 "%016" PRIx64, it->key.hi, it->key.lo);
        name = hex;
    }

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
    kiln__prep_before_build(name); /* the test faults' hook: empty in libkiln */
    const struct kiln_builder *bld = builder_for(j->b, state.kind);
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

/* Every bit of builder `bld`'s extensions. */
static uint64_t all_extensions(const struct kiln_builder *bld)
{
    uint32_t n = bld->ndevice_extensions;
    return n >= 64 ? UINT64_MAX : ((uint64_t)1 << n) - 1;
}

int kiln__prep_needed_extensions(const struct kiln_builder *builders, size_t nbuilders,
                                 const struct kiln__prep_item *items, size_t n, uint64_t **masks)
{
    *masks = NULL;
    if (!nbuilders)
        return KILN_OK;
    uint64_t *m = calloc(nbuilders, sizeof(*m));
    if (!m)
        return KILN_ENOMEM;
    struct kiln__prep_build b = {.builders = builders, .nbuilders = nbuilders};
    bool asking = false;
    for (size_t i = 0; i < nbuilders; i++) {
        if (!builders[i].extensions_needed)
            m[i] = all_extensions(&builders[i]);
        else if (builders[i].ndevice_extensions)
            asking = true;
    }
    /* The payload's table and state only: its stages stay packed. */
    struct kiln_stage_blob *st = asking ? malloc(KILN_PROGRAM_MAX_STAGES * sizeof(*st)) : NULL;
    if (asking && !st) {
        free(m);
        return KILN_ENOMEM;
    }
    for (size_t i = 0; asking && i < n; i++) {
        struct kiln_payload_state state;
        if (!items[i].payload ||
            kiln_program_payload_parse_full(items[i].payload, items[i].size,
                                            KILN_PROGRAM_MAX_STAGES, st, &state) < 0)
            continue; /* not built: the build says why */
        const struct kiln_builder *bld = builder_for(&b, state.kind);
        if (!bld || !bld->extensions_needed)
            continue;
        size_t k = (size_t)(bld - builders);
        m[k] |= bld->extensions_needed(bld->user, state.bytes, state.size) & all_extensions(bld);
    }
    free(st);
    *masks = m;
    return KILN_OK;
}

uint32_t kiln__prep_builder_extensions(const struct kiln_builder *builders, size_t nbuilders,
                                       const uint64_t *masks, const char **names, uint32_t cap)
{
    uint32_t n = 0;
    for (size_t b = 0; b < nbuilders; b++) {
        for (uint32_t i = 0; i < builders[b].ndevice_extensions; i++) {
            const char *name = builders[b].device_extensions[i];
            bool seen = !name || (masks && !(masks[b] >> i & 1u));
            for (uint32_t k = 0; k < n && !seen; k++)
                seen = strcmp(names[k], name) == 0;
            if (!seen && n < cap)
                names[n++] = name;
        }
    }
    return n;
}

void kiln__prep_isolate_extensions(const struct kiln_builder *builders, size_t nbuilders,
                                   const uint64_t *masks, struct kiln__isolate_run *run)
{
    run->ext_known_kinds = 0;
    run->next_names = 0;
    if (!masks)
        return;
    for (size_t i = 0; i < nbuilders; i++)
        run->ext_known_kinds |= 1u << builders[i].kind;
    run->next_names = kiln__prep_builder_extensions(builders, nbuilders, masks, run->ext_names,
                                                    KILN_ARRAY_LEN(run->ext_names));
}

int kiln__prep_vk_open(struct kiln_vk *given, bool isolate, bool use_device_index, unsigned device,
                       const char *cache_dir, const struct kiln_io *io,
                       const struct kiln_builder *builders, size_t nbuilders,
                       const struct kiln__prep_item *items, size_t n, uint64_t **masks,
                       struct kiln_vk **own, struct kiln_vk **vk, char (*device_name)[256],
                       enum kiln_vk_cache_state *cache_state, size_t *cache_loaded_bytes)
{
    *own = NULL;
    *vk = given;
    *masks = NULL;
    if (!given || isolate)
        KILN_TRY(kiln__prep_needed_extensions(builders, nbuilders, items, n, masks));
    if (!given) {
        const char *extra[64];
        struct kiln_vk_options vopt = {
            .use_device_index = use_device_index,
            .device = device,
            .cache_dir = cache_dir,
            .io = io,
            .extra_extensions = extra,
            .extra_extension_count = kiln__prep_builder_extensions(builders, nbuilders, *masks,
                                                                   extra, KILN_ARRAY_LEN(extra))};
        KILN_TRY(kiln_vk_create(&vopt, own));
        *vk = *own;
    }
    const struct kiln_vk_info *vi = kiln_vk_get_info(*vk);
    snprintf(*device_name, sizeof(*device_name), "%s", vi->device_name);
    *cache_state = vi->cache_state;
    *cache_loaded_bytes = vi->cache_loaded_bytes;
    return KILN_OK;
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

    struct build_job *jobs = calloc(todo, sizeof(*jobs));
    if (!jobs)
        return KILN_ENOMEM;
    struct kiln_pool *pool;
    int rc = kiln__prep_pool(workers, b->memory_budget, b->background, b->executor, &pool);
    if (rc < 0) {
        free(jobs);
        return rc;
    }
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (items[i].payload)
            jobs[k++] = (struct build_job){.b = b, .item = &items[i]};
    /* The largest programs first: the builds that start last are then short
     * ones, and no worker idles at the end while one long build finishes. */
    qsort(jobs, todo, sizeof(*jobs), larger_payload_first);
    rc = kiln__prep_run_pipelines(pool, journaled_build_one, jobs, sizeof(*jobs), todo, b->progress,
                                  b->progress_user);
    struct kiln_pool_progress pp;
    kiln_pool_get_progress(pool, &pp);
    kiln_pool_destroy(pool);
    free(jobs);
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
static int start_open(const struct kiln_start_options *o, struct kiln_cache **out, bool *writer,
                      struct kiln_start_summary *s)
{
    *writer = false;
    int rc = KILN_EINVAL;
    if (o->read_only) {
        snprintf(s->use_text, sizeof(s->use_text), "opened read-only as asked");
    } else {
        struct kiln_cache_options wopt = {
            .flags = KILN_CACHE_KEEP_STAMP, .io = o->io, .executor = o->executor};
        rc = kiln_cache_open(o->cache_dir, &wopt, out);
        if (rc == KILN_OK) {
            struct kiln_cache_stats cs;
            kiln_cache_get_stats(*out, &cs);
            if (o->any_stamp || cs.stamp == o->stamp) {
                *writer = true;
                return KILN_OK;
            }
            kiln_cache_close(*out); /* the read-only open below refuses it */
            *out = NULL;
            snprintf(s->use_text, sizeof(s->use_text), "another stamp");
        } else if (rc == KILN_ENOENT || rc == KILN_ECORRUPT) {
            /* No cache, or no copy of the dictionary its records name (the
             * open said which in its one line): a read-only open meets the
             * same, and would only say it again. */
            return rc;
        } else {
            snprintf(s->use_text, sizeof(s->use_text), "opened read-only: %s",
                     rc == KILN_EBUSY ? "another writer holds the cache" : kiln_strerror(rc));
        }
    }
    struct kiln_cache_options ropt = {
        .stamp = o->stamp,
        .flags =
            KILN_CACHE_READ_ONLY | KILN_CACHE_USE_DICT | (o->any_stamp ? KILN_CACHE_ANY_STAMP : 0u),
        .io = o->io,
        .executor = o->executor,
    };
    rc = kiln_cache_open(o->cache_dir, &ropt, out);
    struct kiln_cache_stats cs;
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
 * worker (the driver's word), and the retried ones that were built (only
 * once pipelines.vkc was saved, as kiln_prepare does). Nothing to record:
 * nothing opened. Another writer holding the cache: not recorded (info).
 */
static void start_ledger_end(const struct kiln_start_options *o, struct kiln_vk *own_vk,
                             const struct kiln__ledger_driver *d,
                             const struct kiln__prep_item *items, size_t n,
                             const unsigned char *retried)
{
    bool crashed = false, rebuilt = false;
    for (size_t i = 0; i < n; i++) {
        crashed |= crash_error(items[i].status) && !items[i].unreached && items[i].payload;
        rebuilt |= retried[i] && items[i].status == KILN_OK;
    }
    if (!crashed && !rebuilt)
        return;
    struct kiln_cache *c = NULL;
    struct kiln_cache_options wopt = {.flags = KILN_CACHE_KEEP_STAMP, .io = o->io};
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
        if (crash_error(items[i].status) && !items[i].unreached && items[i].payload)
            rc = kiln__ledger_note(l, items[i].key, KILN__LEDGER_FAILED, items[i].status,
                                   kiln_errname(items[i].status));
        else if (retried[i] && items[i].status == KILN_OK && saved)
            rc = kiln__ledger_note(l, items[i].key, KILN__LEDGER_BUILT, 0, NULL);
    }
    if (rc == KILN_OK)
        rc = kiln__ledger_sync(l);
    if (rc < 0)
        KILN_WARN("prep", "%s: cannot write the build ledger (%s)", o->cache_dir,
                  kiln_strerror(rc));
    kiln__ledger_close(l);
    kiln_cache_close(c);
}

static int warm_start_body(const struct kiln_start_options *o, kiln_prep_progress_fn progress,
                           void *progress_user, struct kiln_start_summary *s);

/* The caller's options with the core's default builders added
 * (kiln__prep_builders_open): programs of a kind the caller has no
 * builder of are built by kiln's own (KILN_STATE_FOZ: the Fossilize one). */
static int warm_start(const struct kiln_start_options *o, kiln_prep_progress_fn progress,
                      void *progress_user, struct kiln_start_summary *s)
{
    if (!s || !o)
        return warm_start_body(o, progress, progress_user, s);
    struct kiln__prep_builders bl;
    int rc = kiln__prep_builders_open(o->builders, o->nbuilders, &bl);
    if (rc < 0) {
        memset(s, 0, sizeof(*s));
        return start_fail(s, KILN_PREP_STEP_INPUT, rc);
    }
    struct kiln_start_options with = *o;
    with.builders = bl.list;
    with.nbuilders = bl.n;
    rc = warm_start_body(&with, progress, progress_user, s);
    kiln__prep_builders_close(&bl);
    return rc;
}

static int warm_start_body(const struct kiln_start_options *o, kiln_prep_progress_fn progress,
                           void *progress_user, struct kiln_start_summary *s)
{
    if (!s)
        return KILN_EINVAL;
    uint64_t t0 = kiln_now_ns();
    memset(s, 0, sizeof(*s));
    if (!o || !o->cache_dir) {
        KILN_ERROR("prep", "warm start: no cache folder given");
        return start_fail(s, KILN_PREP_STEP_INPUT, KILN_EINVAL);
    }
    if (kiln__prep_check_builders(o->builders, o->nbuilders, "warm start") < 0)
        return start_fail(s, KILN_PREP_STEP_INPUT, KILN_EINVAL);
    if (kiln__isolate_check(o->isolate, o->vk && o->on_pipeline) < 0)
        return start_fail(s, KILN_PREP_STEP_INPUT, KILN_EINVAL);

    /* Open by the index; a writer when it can be (see the top). */
    struct kiln_cache *cache = NULL;
    bool writer = false;
    int rc = start_open(o, &cache, &writer, s);
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
    /* What a dead run had in flight: recorded now, while the writer lock is
     * held; a start that is not a writer leaves it for one that is. */
    struct kiln__journal *journal = NULL;
    if (!o->no_vulkan && kiln__journal_scan(o->cache_dir, o->io, &journal) == KILN_OK) {
        const struct kiln__journal_suspect *sus = NULL;
        size_t nsus = kiln__journal_suspects(journal, &sus);
        kiln__journal_settle(journal, nsus && writer &&
                                          kiln__prep_record_suspects(o->cache_dir, o->io, NULL,
                                                                     NULL, sus, nsus) == KILN_OK);
    }
    struct kiln_cache_stats cs;
    kiln_cache_get_stats(cache, &cs);
    s->open_kind = cs.open_kind;
    s->stamp = cs.stamp;
    s->dict_id = cs.dict_id;
    snprintf(s->open_text, sizeof(s->open_text), "%s", cs.open_text);

    struct kiln_cache_entry *entries = NULL;
    size_t n = 0;
    struct kiln_key *keys = NULL;
    struct kiln_cache_result *res = NULL;
    struct kiln__prep_item *items = NULL;
    struct kiln_vk *own_vk = NULL;
    uint64_t *ext_masks = NULL;
    struct kiln_pack_dict *dict = NULL;
    unsigned char *retried = NULL;
    rc = kiln_cache_entries(cache, &entries, &n);
    if (rc == KILN_OK && n) {
        keys = malloc(n * sizeof(*keys));
        items = calloc(n, sizeof(*items));
        retried = calloc(n, 1);
        if (!keys || !items || !retried)
            rc = KILN_ENOMEM;
    }
    /* The dictionary, copied: the handle is closed before the pipelines. */
    if (rc == KILN_OK && kiln_cache_dict(cache)) {
        size_t dsize = 0;
        const void *dbytes = kiln_pack_dict_bytes(kiln_cache_dict(cache), &dsize);
        rc = kiln_pack_dict_load(dbytes, dsize, &dict);
    }
    s->records = n;
    s->open_ns = kiln_now_ns() - t0;
    if (rc != KILN_OK) {
        start_fail(s, KILN_PREP_STEP_OTHER, rc);
        goto out;
    }
    for (size_t i = 0; i < n; i++)
        keys[i] = entries[i].key;

    struct kiln_pool_plan plan;
    s->workers = kiln_pool_auto_workers(KILN_POOL_WORK_BUILD, o->jobs, &plan);
    snprintf(s->workers_reason, sizeof(s->workers_reason), "%s", plan.reason);
    s->read_threads = kiln_pool_auto_workers(KILN_POOL_WORK_READ, s->workers, NULL);

    /* Read every record at once; the load marks each one used today. */
    uint64_t t1 = kiln_now_ns();
    if (n) {
        int64_t got = kiln_cache_load_many(cache, keys, n, s->read_threads, &res);
        if (got < 0) {
            KILN_ERROR("prep", "%s: cannot read the program cache: %s", o->cache_dir,
                       kiln_strerror((int)got));
            start_fail(s, KILN_PREP_STEP_CACHE, (int)got);
            goto out;
        }
        s->loaded = (uint64_t)got;
    }
    s->read_ns = kiln_now_ns() - t1;
    for (size_t i = 0; i < n; i++) {
        items[i].key = keys[i];
        if (res[i].status < 0) {
            s->missing++;
            items[i].status = res[i].status;
            continue;
        }
        s->bytes += res[i].size;
        items[i].payload = res[i].data;
        items[i].size = res[i].size;
    }
    if (s->missing)
        KILN_WARN("prep",
                  "%s: %" PRIu64 " of %zu records missing or damaged: not built "
                  "(kiln prepare makes them again)",
                  o->cache_dir, s->missing, n);

    /* Last use, then the lock goes: the payloads outlive the handle. */
    if (writer) {
        rc = kiln_cache_save_use(cache);
        s->use_recorded = rc == KILN_OK; /* advisory: a failure was logged */
        if (rc < 0)
            snprintf(s->use_text, sizeof(s->use_text), "not written: %s", kiln_strerror(rc));
    } else {
        KILN_INFO("prep", "%s: last use not recorded (%s)", o->cache_dir, s->use_text);
    }
    kiln_cache_close(cache);
    cache = NULL;

    if (o->no_vulkan)
        goto out;

    /* Vulkan, with the pipeline cache kiln prepare saved. */
    uint64_t t2 = kiln_now_ns();
    struct kiln_vk *vk = NULL;
    rc = kiln__prep_vk_open(o->vk, o->isolate, o->use_device_index, o->device, o->cache_dir, o->io,
                            o->builders, o->nbuilders, items, n, &ext_masks, &own_vk, &vk,
                            &s->device, &s->vk_cache_state, &s->vk_cache_loaded_bytes);
    s->vulkan_ns = kiln_now_ns() - t2;
    if (rc < 0) {
        start_fail(s, KILN_PREP_STEP_VULKAN, rc);
        goto out;
    }
    s->vulkan = true;
    struct kiln__ledger_driver drv;
    kiln__prep_driver(vk, &drv);
    start_ledger_begin(o, journal, &drv, items, n, retried, s);
    if (!o->isolate) /* an isolated worker's crash costs no run */
        kiln__journal_claim(journal, &drv, s->workers);

    uint64_t t3 = kiln_now_ns();
    struct kiln__prep_build b = {.vk = vk,
                                 .dict = dict,
                                 .on_pipeline = o->vk ? o->on_pipeline : NULL,
                                 .pipeline_user = o->pipeline_user,
                                 .progress = progress,
                                 .progress_user = progress_user,
                                 .builders = o->builders,
                                 .nbuilders = o->nbuilders,
                                 .executor = o->executor,
                                 .cancel = o->cancel,
                                 .cancel_user = o->cancel_user,
                                 .journal = journal};
    int64_t built;
    if (o->isolate) {
        /* In worker processes; their pipeline caches are merged into vk's. */
        struct kiln__isolate_run iso = {.iso = o->isolate,
                                        .use_device_index = o->use_device_index,
                                        .device = o->device,
                                        .cache_dir = o->cache_dir};
        kiln__prep_isolate_extensions(o->builders, o->nbuilders, ext_masks, &iso);
        built = kiln__isolate_build_all(&b, &iso, items, n, s->workers, &s->pipelines_failed);
    } else {
        built = kiln__prep_build_all(&b, items, n, s->workers, &s->pipelines_failed);
    }
    s->pipelines_ns = kiln_now_ns() - t3;
    kiln__journal_close(journal); /* the phase is over: nothing in flight */
    journal = NULL;
    s->pipelines_skipped = kiln__prep_kind_counts(&b, s->kinds);
    s->bad = atomic_load(&b.bad);
    s->lone_modules = atomic_load(&b.lone);
    s->recorded_invalid = atomic_load(&b.recorded_invalid);
    s->pipelines_failed -= s->bad;
    if (built < 0) {
        start_fail(s, KILN_PREP_STEP_OTHER, (int)built);
        goto out;
    }
    s->pipelines_built = (uint64_t)built;
    if (s->lone_modules)
        KILN_INFO("prep",
                  "%s: %" PRIu64 " records are single graphics modules (no pipeline alone): "
                  "stored, not built",
                  o->cache_dir, s->lone_modules);

    /* New driver data: keep it for the next start. */
    if (own_vk &&
        (s->vk_cache_state == KILN_VK_CACHE_NEW || s->vk_cache_state == KILN_VK_CACHE_REJECTED)) {
        rc = kiln_vk_cache_save(own_vk);
        if (rc < 0)
            s->vk_cache_save_error = rc; /* its one line is the vk module's */
    }
    start_ledger_end(o, own_vk, &drv, items, n, retried);
    /* Stopped: what was built is kept (pipelines.vkc, the ledger), and
     * the run says it did not finish. */
    if (atomic_load(&b.stopped)) {
        s->canceled = true;
        start_fail(s, KILN_PREP_STEP_OTHER, KILN_ECANCELED);
    }

out:
    kiln__journal_close(journal);
    free(retried);
    kiln_vk_destroy(own_vk);
    free(ext_masks);
    kiln_cache_results_free(res, n);
    free(items);
    free(keys);
    kiln_cache_entries_free(entries);
    kiln_cache_close(cache);
    kiln_pack_dict_destroy(dict);
    s->total_ns = kiln_now_ns() - t0;
    s->peak_rss = kiln_peak_rss_bytes();
    return s->error;
}

/* The run gives no handle: a failure's text is the thread's (kiln_last_errmsg). */
int kiln_warm_start(const struct kiln_start_options *o, kiln_prep_progress_fn progress,
                    void *progress_user, struct kiln_start_summary *s)
{
    uint64_t m = kiln__err_mark();
    return kiln__err_end(NULL, m, "kiln_warm_start", o ? o->cache_dir : NULL,
                         warm_start(o, progress, progress_user, s));
}
