/*
 * translate_shaderc.c - kiln's built-in GLSL translator, over shaderc's C
 * API.
 *
 * One shaderc_compiler_t and one shaderc_compile_options_t serve every
 * thread: shaderc.h documents shaderc_compile_into_spv as safe to call from
 * many threads at once on one compiler, and the options are only read by
 * it (they are set once here, before the translator is handed out, and
 * never changed). So the translator needs no lock and no per-thread state.
 *
 * The target is Vulkan 1.1 (SPIR-V 1.3): the newest version both lavapipe
 * and NVIDIA's driver take without extra features, and old enough for
 * drivers an emulator still meets.
 *
 * One failure poisons shaderc for the rest of the process: glslang holds a
 * process-wide lock (its gMutex) across allocations, and an allocation
 * that fails there throws; shaderc catches it and reports an internal
 * error, but the lock stays held, so the next compile, or the
 * ShFinalize of a compiler's release, waits for it forever. So after an
 * internal error (or no result at all) `poisoned` is set, once for the
 * process as the lock is: every later call fails at once with
 * KILN_ENOMEM and a message saying to run again, no compiler is released
 * (its release would wait on the lock: the memory goes back at exit), and
 * kiln_glsl_unusable() lets a caller stop its run. A compile already
 * waiting on the lock when it happened stays stuck: only the caller can
 * end that (the kiln command's stop deadline, tools/kiln/cli_stop.c).
 */
#include "kiln-tools/glsl.h"
#include "tool_internal.h"

#include <shaderc/shaderc.h>

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct kiln_glsl {
    shaderc_compiler_t compiler;
    shaderc_compile_options_t options;
    struct kiln_translator translator;
};

/* Set once shaderc failed in a way that leaves glslang's lock held. */
static atomic_bool poisoned;

#define POISONED_WHY                                                                   \
    "not tried: shaderc ran out of memory earlier in this process and cannot be used " \
    "again in it: run again"

bool kiln_glsl_unusable(void)
{
    return atomic_load(&poisoned);
}

/* A compile's result that may have left glslang's lock held: an internal
 * error (the exception shaderc caught, std::bad_alloc) or no result.
 * Poisons shaderc then (the design comment). @return whether it did. */
static bool poisons(shaderc_compilation_result_t res)
{
    if (res &&
        shaderc_result_get_compilation_status(res) != shaderc_compilation_status_internal_error)
        return false;
    atomic_store(&poisoned, true);
    return true;
}

static int glsl_translate(void *user, const struct kiln_source *src, uint32_t **words,
                          size_t *nwords)
{
    const struct kiln_glsl *g = user;
    if (atomic_load(&poisoned)) {
        kiln_translate_set_error(POISONED_WHY);
        return KILN_ENOMEM;
    }
    shaderc_shader_kind kind;
    switch (src->stage) {
    case KILN_VK_STAGE_COMPUTE_BIT:
        kind = shaderc_glsl_compute_shader;
        break;
    case KILN_VK_STAGE_VERTEX_BIT:
        kind = shaderc_glsl_vertex_shader;
        break;
    case KILN_VK_STAGE_FRAGMENT_BIT:
        kind = shaderc_glsl_fragment_shader;
        break;
    case KILN_VK_STAGE_GEOMETRY_BIT:
        kind = shaderc_glsl_geometry_shader;
        break;
    case KILN_VK_STAGE_TESS_CONTROL_BIT:
        kind = shaderc_glsl_tess_control_shader;
        break;
    case KILN_VK_STAGE_TESS_EVAL_BIT:
        kind = shaderc_glsl_tess_evaluation_shader;
        break;
    default:
        kiln_translate_set_error("no GLSL stage for %s (0x%x)", kiln_vk_stage_name(src->stage),
                                 (unsigned)src->stage);
        return KILN_EINVAL;
    }
    shaderc_compilation_result_t res =
        shaderc_compile_into_spv(g->compiler, src->text, src->size, kind,
                                 src->name ? src->name : "source", "main", g->options);
    if (poisons(res)) {
        kiln_translate_set_error("shaderc failed inside (out of memory): it cannot be used "
                                 "again in this process: run again");
        if (res)
            shaderc_result_release(res);
        return KILN_ENOMEM;
    }
    shaderc_compilation_status status = shaderc_result_get_compilation_status(res);
    if (status != shaderc_compilation_status_success) {
        const char *msg = shaderc_result_get_error_message(res);
        kiln_translate_set_error("%zu error(s): %s", shaderc_result_get_num_errors(res),
                                 msg && msg[0] ? msg : "(no message)");
        shaderc_result_release(res);
        return KILN_ETRANSLATE;
    }
    size_t n = shaderc_result_get_length(res);
    uint32_t *w = n % 4 == 0 && n > 0 ? kiln__malloc(n) : NULL;
    if (!w) {
        shaderc_result_release(res);
        if (n % 4 != 0 || n == 0) {
            kiln_translate_set_error("shaderc gave %zu bytes", n);
            return KILN_ETRANSLATE;
        }
        return KILN_ENOMEM;
    }
    memcpy(w, shaderc_result_get_bytes(res), n);
    shaderc_result_release(res);
    *words = w;
    *nwords = n / 4;
    return KILN_OK;
}

int kiln_glsl_compile_vulkan12(const char *text, size_t size, uint32_t stage, uint32_t **words,
                               size_t *nwords)
{
    *words = NULL;
    *nwords = 0;
    static const struct {
        uint32_t stage;
        shaderc_shader_kind kind;
    } kinds[] = {
        {KILN_VK_STAGE_VERTEX_BIT, shaderc_glsl_vertex_shader},
        {KILN_VK_STAGE_FRAGMENT_BIT, shaderc_glsl_fragment_shader},
        {KILN_VK_STAGE_COMPUTE_BIT, shaderc_glsl_compute_shader},
        {0x100, shaderc_glsl_raygen_shader},
        {0x200, shaderc_glsl_anyhit_shader},
        {0x400, shaderc_glsl_closesthit_shader},
        {0x800, shaderc_glsl_miss_shader},
        {0x1000, shaderc_glsl_intersection_shader},
        {0x2000, shaderc_glsl_callable_shader},
    };
    size_t k = 0;
    while (k < KILN_ARRAY_LEN(kinds) && kinds[k].stage != stage)
        k++;
    if (k == KILN_ARRAY_LEN(kinds))
        return KILN_EINVAL;
    if (atomic_load(&poisoned)) {
        fprintf(stderr, "shaderc: %s\n", POISONED_WHY);
        return KILN_ENOMEM;
    }
    shaderc_compiler_t compiler = shaderc_compiler_initialize();
    shaderc_compile_options_t options = shaderc_compile_options_initialize();
    int rc = compiler && options ? KILN_OK : KILN_ENOMEM;
    shaderc_compilation_result_t res = NULL;
    if (rc == KILN_OK) {
        shaderc_compile_options_set_source_language(options, shaderc_source_language_glsl);
        shaderc_compile_options_set_target_env(options, shaderc_target_env_vulkan,
                                               shaderc_env_version_vulkan_1_2);
        shaderc_compile_options_set_target_spirv(options, shaderc_spirv_version_1_4);
        res = shaderc_compile_into_spv(compiler, text, size, kinds[k].kind, "source", "main",
                                       options);
        rc = poisons(res) ? KILN_ENOMEM : KILN_OK;
    }
    if (rc == KILN_OK &&
        shaderc_result_get_compilation_status(res) != shaderc_compilation_status_success) {
        fprintf(stderr, "shaderc: %s\n", shaderc_result_get_error_message(res));
        rc = KILN_ETRANSLATE;
    }
    size_t n = rc == KILN_OK ? shaderc_result_get_length(res) : 0;
    if (rc == KILN_OK && (n == 0 || n % 4 != 0))
        rc = KILN_ETRANSLATE;
    if (rc == KILN_OK) {
        *words = kiln__malloc(n);
        if (*words) {
            memcpy(*words, shaderc_result_get_bytes(res), n);
            *nwords = n / 4;
        } else {
            rc = KILN_ENOMEM;
        }
    }
    if (res)
        shaderc_result_release(res);
    if (options)
        shaderc_compile_options_release(options);
    if (compiler && !atomic_load(&poisoned)) /* its release would wait on the lock */
        shaderc_compiler_release(compiler);
    return rc;
}

int kiln_glsl_create(enum kiln_glsl_opt opt, struct kiln_glsl **out)
{
    if (!out)
        return KILN_EINVAL;
    *out = NULL;
    shaderc_optimization_level level;
    switch (opt) {
    case KILN_GLSL_OPT_NONE:
        level = shaderc_optimization_level_zero;
        break;
    case KILN_GLSL_OPT_SIZE:
        level = shaderc_optimization_level_size;
        break;
    case KILN_GLSL_OPT_PERFORMANCE:
        level = shaderc_optimization_level_performance;
        break;
    default:
        return KILN_EINVAL;
    }
    if (atomic_load(&poisoned)) {
        KILN_ERROR("prep", "shaderc: %s", POISONED_WHY);
        return KILN_ENOMEM;
    }
    struct kiln_glsl *g = kiln__calloc(1, sizeof(*g));
    if (!g)
        return KILN_ENOMEM;
    g->compiler = shaderc_compiler_initialize();
    g->options = shaderc_compile_options_initialize();
    if (!g->compiler || !g->options) {
        KILN_ERROR("prep", "shaderc: cannot make a compiler");
        kiln_glsl_destroy(g);
        return KILN_ENOMEM;
    }
    shaderc_compile_options_set_source_language(g->options, shaderc_source_language_glsl);
    shaderc_compile_options_set_target_env(g->options, shaderc_target_env_vulkan,
                                           shaderc_env_version_vulkan_1_1);
    shaderc_compile_options_set_target_spirv(g->options, shaderc_spirv_version_1_3);
    shaderc_compile_options_set_optimization_level(g->options, level);

    unsigned version = 0, revision = 0;
    shaderc_get_spv_version(&version, &revision);
    char stamp[128];
    int n = snprintf(stamp, sizeof(stamp), "kiln-glsl shaderc spv=%u.%u env=vulkan1.1 opt=%d",
                     version, revision, (int)opt);
    g->translator = (struct kiln_translator){
        .size = sizeof(struct kiln_translator),
        .translate = glsl_translate,
        .release = NULL,
        .user = g,
        .stamp = kiln_hash64(stamp, (size_t)n),
        .name = "shaderc",
    };
    *out = g;
    return KILN_OK;
}

void kiln_glsl_destroy(struct kiln_glsl *g)
{
    if (!g)
        return;
    if (g->options)
        shaderc_compile_options_release(g->options);
    /* Released, it would wait forever on glslang's lock (ShFinalize). */
    if (g->compiler && !atomic_load(&poisoned))
        shaderc_compiler_release(g->compiler);
    kiln__free(g);
}

const struct kiln_translator *kiln_glsl_translator(const struct kiln_glsl *g)
{
    return g ? &g->translator : NULL;
}
