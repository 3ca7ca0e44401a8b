/*
 * foz_link.h - the Fossilize builder's fast-link ask, between kiln's
 * adapter (foz_builder_kiln.c, which reads kiln_build_request.link) and
 * the builder (foz_builder_rt.c, foz_builder.c, which link a recorded
 * graphics pipeline from library parts through kiln_vk_link_graphics).
 * Nothing here is part of any public header.
 */
#ifndef KILN_FOZ_LINK_H
#define KILN_FOZ_LINK_H

#include "kiln/foz.h"
#include "kiln/vk.h"

/* A fast-link ask: the context whose parts table links (the builder's
 * device must be its device), and the answer. */
struct kiln__fb_link {
    struct kiln_vk *vk;
    bool parts_only; /* in: build the library parts alone (KILN_BUILD_LINK_PARTS) */
    bool linked;     /* out: the pipeline was linked from parts */
    uint32_t parts_built, parts_reused;
};

/* The host tier's ask (kiln_build_request.tier_*): capture flags to add
 * (VkPipelineCreateFlags2KHR) or a VkPipelineBinaryInfoKHR to chain, taken
 * only by a monolithic graphics or compute pipeline (no library made or
 * linked), which then goes without the pipeline cache; `used` (out) says
 * it was taken. */
struct kiln__fb_tier {
    uint64_t flags2;
    void *binaries;
    bool used;
};

/* kiln_foz_builder_build_with, with the fast-link ask (NULL: none) and the
 * host tier's (NULL: none): a
 * plain recorded graphics pipeline is linked from parts keyed by the
 * recorded state each depends on; any other is built as
 * kiln_foz_builder_build_with builds it. With link->parts_only, a plain
 * recorded graphics pipeline's parts are built and no pipeline (0,
 * build->pipeline VK_NULL_HANDLE); any other answers KILN_ENOTSUP, built
 * nothing. @return as kiln_foz_builder_build_with. */
int kiln__foz_builder_build_linked(struct kiln_foz_builder *b, struct kiln_foz_build *build,
                                   struct kiln__fb_link *link, struct kiln__fb_tier *tier);

#endif /* KILN_FOZ_LINK_H */
