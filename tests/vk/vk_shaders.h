/*
 * vk_shaders.h - SPIR-V for the vk tests, compiled from GLSL with shaderc
 * inside the test, and packed with kiln_pack.
 */
#ifndef KILN_VK_SHADERS_H
#define KILN_VK_SHADERS_H

#include "kiln_test.h"

enum vkt_kind { VKT_COMPUTE, VKT_VERTEX, VKT_FRAGMENT };

/* A packed stage (free with vkt_free). */
struct vkt_blob {
    void *blob;
    size_t size;
    uint32_t *words; /* the SPIR-V it packs, for tests that damage it */
    size_t nwords;
};

/*
 * Compiles the test shader of `kind`, made distinct by `variant` (a
 * constant in its code), and packs it with the raw codec.
 * @return 0, or -1 after a test failure was reported.
 */
int vkt_make(enum vkt_kind kind, unsigned variant, struct vkt_blob *out);

/* Compiles the caller's GLSL for `kind` and packs it (raw codec).
 * @return 0, or -1 after a test failure was reported. */
int vkt_compile(enum vkt_kind kind, const char *glsl, struct vkt_blob *out);

/* Packs words as they are (raw codec). @return 0 or -1. */
int vkt_pack_words(const uint32_t *words, size_t n, struct vkt_blob *out);

void vkt_free(struct vkt_blob *b);

/*
 * Makes a context with `opt`, or exits the process with 77 (ctest's SKIP)
 * when Vulkan is not available here.
 */
struct kiln_vk *vkt_context(const struct kiln_vk_options *opt);

/* Captures log lines into a buffer while set. */
void vkt_capture_log(bool on);
const char *vkt_log(void);

#endif /* KILN_VK_SHADERS_H */
