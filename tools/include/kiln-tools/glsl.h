/*
 * kiln-tools/glsl.h - kiln's GLSL translator, over shaderc: a struct
 * kiln_translator (kiln/prep.h) for programs given as GLSL. A tool above
 * libkiln (tools/glsl): the core links no shaderc or glslang; the kiln
 * command, the generator's tests and the benches link this.
 */
#ifndef KILN_TOOLS_GLSL_H
#define KILN_TOOLS_GLSL_H

#include "kiln/prep.h"

#ifdef __cplusplus
extern "C" {
#endif

/* shaderc's optimization level. */
enum kiln_glsl_opt {
    KILN_GLSL_OPT_NONE = 0,        /* glslang's output as it is */
    KILN_GLSL_OPT_SIZE = 1,        /* spirv-opt -Os */
    KILN_GLSL_OPT_PERFORMANCE = 2, /* spirv-opt -O */
};

/* The built-in GLSL translator. Opaque. */
struct kiln_glsl;

/*
 * Makes a GLSL-to-SPIR-V translator over shaderc: GLSL 450, target
 * environment Vulkan 1.1 (SPIR-V 1.3, accepted by lavapipe and NVIDIA's
 * driver), entry point "main", the stage from kiln_source.stage, and the
 * given optimization level. One shaderc compiler and one options object
 * serve every thread: shaderc documents compile calls on one compiler as
 * safe from many threads at once.
 * @return 0 and a new translator in *out; KILN_ENOMEM when shaderc cannot
 * make its compiler; KILN_ENOTSUP in a build without shaderc.
 */
KILN_API int kiln_glsl_create(enum kiln_glsl_opt opt, struct kiln_glsl **out);

/* Frees the translator. NULL is a no-op. No call through its
 * kiln_translator may be running or made afterwards. */
KILN_API void kiln_glsl_destroy(struct kiln_glsl *glsl);

/*
 * The translator's callback table, valid as long as `glsl` lives. Its
 * words come from kiln_malloc (release is NULL); its stamp covers shaderc's
 * SPIR-V version, the target environment and the optimization level.
 */
KILN_API const struct kiln_translator *kiln_glsl_translator(const struct kiln_glsl *glsl);

/*
 * Compiles one GLSL 460 shader of `stage` (a VkShaderStageFlagBits: the
 * translator's stages and the ray-tracing ones, raygen to callable) for
 * Vulkan 1.2 (SPIR-V 1.4, which GL_EXT_ray_tracing needs), entry point
 * "main", unoptimized. Not the translator's target, so its words must not
 * be stored under the translator's stamp: for archives and tests that
 * record ray-tracing pipelines.
 * @return 0 with words from kiln_malloc in *words (free them with kiln_free) and their count;
 * KILN_ETRANSLATE with shaderc's message on stderr; KILN_EINVAL for a
 * stage it has no GLSL kind for; KILN_ENOTSUP in a build without shaderc;
 * KILN_ENOMEM. Thread-safe.
 */
KILN_API int kiln_glsl_compile_vulkan12(const char *text, size_t size, uint32_t stage,
                                        uint32_t **words, size_t *nwords);

/*
 * Whether shaderc can no longer be used in this process: a compile failed
 * inside shaderc (an internal error: an allocation that failed, under a
 * low address-space limit say), which leaves glslang's process-wide lock
 * held. From then on every translation and kiln_glsl_compile_vulkan12
 * fails at once with KILN_ENOMEM and a message saying to run again,
 * kiln_glsl_create fails alike, and kiln_glsl_destroy leaves shaderc's
 * compiler unreleased (its release would wait on the lock). A compile that
 * was already waiting on the lock never returns: a caller that sees this
 * should stop its run and end the process within a bound (the kiln command
 * does). Always false in a build without shaderc. Thread-safe.
 */
KILN_API bool kiln_glsl_unusable(void);

#ifdef __cplusplus
}
#endif

#endif /* KILN_TOOLS_GLSL_H */
