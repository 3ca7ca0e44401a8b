/*
 * translate_none.c - the built-in GLSL translator in a build without
 * shaderc: every call says KILN_ENOTSUP, so a caller can still bring its
 * own translator and use SPIR-V corpora.
 */
#include "kiln-tools/glsl.h"
#include "tool_internal.h"

int kiln_glsl_create(enum kiln_glsl_opt opt, struct kiln_glsl **out)
{
    (void)opt;
    if (out)
        *out = NULL;
    KILN_ERROR("prep", "the GLSL translator needs shaderc, and this build has none");
    return KILN_ENOTSUP;
}

void kiln_glsl_destroy(struct kiln_glsl *glsl)
{
    (void)glsl;
}

const struct kiln_translator *kiln_glsl_translator(const struct kiln_glsl *glsl)
{
    (void)glsl;
    return NULL;
}

int kiln_glsl_compile_vulkan12(const char *text, size_t size, uint32_t stage, uint32_t **words,
                               size_t *nwords)
{
    (void)text;
    (void)size;
    (void)stage;
    *words = NULL;
    *nwords = 0;
    return KILN_ENOTSUP;
}

bool kiln_glsl_unusable(void)
{
    return false;
}
