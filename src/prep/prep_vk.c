/*
 * prep_vk.c - the Vulkan context of a run (kiln_prepare, kiln_warm_start):
 * which builder extensions it enables, its options, making it serially
 * (kiln__prep_vk_open; prep_vk_early.c makes it beside the run's first
 * phase) and what the summaries say of it; the greeting isolated workers
 * get with the same extensions.
 *
 * Design. A context kiln makes enables only the builders' device
 * extensions that some program of the run needs: kiln__prep_needed_extensions
 * asks each builder's extensions_needed over the items to build, reading
 * only the payload's table and state, before the context is made, and
 * isolated workers get the same names in their greeting (isolate.c). An
 * extension the run never uses can still cost the driver much memory (ray
 * tracing: ~140 MiB on an NVIDIA H200).
 *
 * Invariants and why they hold:
 *
 * - A builder without the callback gets all of its extensions, and a
 *   context the caller gives is used as it is (only an isolated run's
 *   workers are told the names).
 *
 * - One computation for every path: the serial open, the early context
 *   and the workers' greeting all take their names from
 *   kiln__prep_vk_extensions / kiln__prep_builder_extensions over the
 *   same items, so a worker's device and kiln's own enable the same.
 */
#include "kiln_internal.h"
#include "binaries.h"
#include "isolate_internal.h"
#include "prep_internal.h"

#include "kiln/vk.h"

#include <stdio.h>
#include <string.h>

/* Every bit of builder `bld`'s extensions. */
static uint64_t all_extensions(const struct kiln_builder *bld)
{
    uint32_t n = bld->ndevice_extensions;
    return n >= 64 ? UINT64_MAX : ((uint64_t)1 << n) - 1;
}

const struct kiln_builder *kiln__prep_builder_for(const struct kiln_builder *builders,
                                                  size_t nbuilders, uint32_t kind)
{
    for (size_t i = 0; i < nbuilders; i++)
        if (builders[i].kind == kind)
            return &builders[i];
    return NULL;
}

int kiln__prep_needed_extensions(const struct kiln_builder *builders, size_t nbuilders,
                                 const struct kiln__prep_item *items, size_t n, uint64_t **masks)
{
    *masks = NULL;
    if (!nbuilders)
        return KILN_OK;
    uint64_t *m = kiln__calloc(nbuilders, sizeof(*m));
    if (!m)
        return KILN_ENOMEM;
    bool asking = false;
    for (size_t i = 0; i < nbuilders; i++) {
        if (!builders[i].extensions_needed)
            m[i] = all_extensions(&builders[i]);
        else if (builders[i].ndevice_extensions)
            asking = true;
    }
    /* The payload's table and state only: its stages stay packed. */
    struct kiln_stage_blob *st =
        asking ? kiln__malloc(KILN_PROGRAM_MAX_STAGES * sizeof(*st)) : NULL;
    if (asking && !st) {
        kiln__free(m);
        return KILN_ENOMEM;
    }
    for (size_t i = 0; asking && i < n; i++) {
        struct kiln_payload_state state;
        if (!items[i].payload ||
            kiln_program_payload_parse_full(items[i].payload, items[i].size,
                                            KILN_PROGRAM_MAX_STAGES, st, &state) < 0)
            continue; /* not built: the build says why */
        const struct kiln_builder *bld = kiln__prep_builder_for(builders, nbuilders, state.kind);
        if (!bld || !bld->extensions_needed)
            continue;
        size_t k = (size_t)(bld - builders);
        m[k] |= bld->extensions_needed(bld->user, state.bytes, state.size) & all_extensions(bld);
    }
    kiln__free(st);
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

int kiln__prep_vk_extensions(const struct kiln__prep_vk_want *w, uint64_t **masks,
                             const char **names, uint32_t cap, uint32_t *count)
{
    *masks = NULL;
    *count = 0;
    if (w->given && !w->isolate)
        return KILN_OK;
    KILN_TRY(kiln__prep_needed_extensions(w->builders, w->nbuilders, w->items, w->n, masks));
    if (w->given)
        return KILN_OK;
    uint32_t n = kiln__prep_builder_extensions(w->builders, w->nbuilders, *masks, names, cap - 1);
    /* The host tier's extension, where the headers know it (vk_binary.c);
     * isolated, for the tier's global key (the workers enable it too). */
    if (w->binaries != KILN_BINARIES_OFF)
        names[n++] = "VK_KHR_pipeline_binary";
    *count = n;
    return KILN_OK;
}

void kiln__prep_vk_options(const struct kiln__prep_vk_want *w, struct kiln_vk_options *vopt)
{
    *vopt =
        (struct kiln_vk_options){.size = sizeof(*vopt),
                                 .use_device_index = w->use_device_index,
                                 .device = w->device,
                                 .cache_dir = w->cache_dir,
                                 .io = w->io,
                                 .allocator = w->allocator,
                                 /* Pipeline libraries only where a program of the run needs them
                                  * (a builder names them): the preparation and the warm start
                                  * build monolithically, and an extension the run never uses
                                  * can cost the driver memory. Fast-link is the service's. */
                                 .no_pipeline_library = true};
}

void kiln__prep_vk_describe(struct kiln_vk *vk, char (*device_name)[256],
                            enum kiln_vk_cache_state *cache_state, size_t *cache_loaded_bytes)
{
    const struct kiln_vk_info *vi = kiln_vk_get_info(vk);
    snprintf(*device_name, sizeof(*device_name), "%s", vi->device_name);
    *cache_state = vi->cache_state;
    *cache_loaded_bytes = vi->cache_loaded_bytes;
}

int kiln__prep_vk_open(const struct kiln__prep_vk_want *w, struct kiln__prep_vk_got *got,
                       char (*device_name)[256], enum kiln_vk_cache_state *cache_state,
                       size_t *cache_loaded_bytes)
{
    *got = (struct kiln__prep_vk_got){.vk = w->given};
    const char *extra[64];
    uint32_t nextra;
    KILN_TRY(kiln__prep_vk_extensions(w, &got->masks, extra, KILN_ARRAY_LEN(extra), &nextra));
    if (!w->given) {
        struct kiln_vk_options vopt;
        kiln__prep_vk_options(w, &vopt);
        vopt.extra_extensions = extra;
        vopt.extra_extension_count = nextra;
        KILN_TRY(kiln_vk_create(&vopt, &got->own));
        got->vk = got->own;
    }
    kiln__prep_vk_describe(got->vk, device_name, cache_state, cache_loaded_bytes);
    return KILN_OK;
}
