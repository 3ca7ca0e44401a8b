/*
 * vk_shaders.c - test shaders: GLSL compiled by shaderc's C API, then
 * packed. Each shader takes a variant number as a macro so tests can make
 * many distinct pipelines (no two hit the same pipeline-cache entry).
 */
#include "vk_shaders.h"

#include <pthread.h>
#include <shaderc/shaderc.h>

static const char *const compute_src = "#version 450\n"
                                       "layout(local_size_x = 64) in;\n"
                                       "layout(set = 0, binding = 0) buffer B { uint data[]; };\n"
                                       "layout(push_constant) uniform P { uvec4 args; };\n"
                                       "void main() {\n"
                                       "    uint i = gl_GlobalInvocationID.x;\n"
                                       "    uint v = data[i];\n"
                                       "    for (uint k = 0u; k < args.w; k++)\n"
                                       "        v = v * args.x + args.y + uint(VARIANT);\n"
                                       "    data[i] = v;\n"
                                       "}\n";

static const char *const vertex_src =
    "#version 450\n"
    "layout(push_constant) uniform P { uvec4 args; };\n"
    "void main() {\n"
    "    vec2 p = vec2((gl_VertexIndex << 1) & 2, gl_VertexIndex & 2);\n"
    "    gl_Position = vec4(p * 2.0 - 1.0, float(VARIANT) * 1e-6, 1.0);\n"
    "}\n";

static const char *const fragment_src =
    "#version 450\n"
    "layout(set = 0, binding = 0) readonly buffer B { uint data[]; };\n"
    "layout(push_constant) uniform P { uvec4 args; };\n"
    "layout(location = 0) out vec4 color;\n"
    "void main() {\n"
    "    color = unpackUnorm4x8(data[args.z] + uint(VARIANT));\n"
    "}\n";

int vkt_pack_words(const uint32_t *words, size_t n, struct vkt_blob *out)
{
    memset(out, 0, sizeof(*out));
    int rc = kiln_pack(words, n, KILN_CODEC_RAW, NULL, &out->blob, &out->size);
    if (rc < 0) {
        kt_fail(__FILE__, __LINE__, "kiln_pack: %s", kiln_errname(rc));
        return -1;
    }
    out->words = malloc(n * 4 + 4);
    if (!out->words) {
        kiln_pack_free(out->blob);
        return -1;
    }
    memcpy(out->words, words, n * 4);
    out->nwords = n;
    return 0;
}

static int compile(enum vkt_kind kind, const char *src, unsigned variant, struct vkt_blob *out)
{
    static const shaderc_shader_kind kinds[] = {
        shaderc_glsl_compute_shader, shaderc_glsl_vertex_shader, shaderc_glsl_fragment_shader};
    shaderc_compiler_t compiler = shaderc_compiler_initialize();
    shaderc_compile_options_t opts = shaderc_compile_options_initialize();
    char value[16];
    snprintf(value, sizeof(value), "%u", variant);
    shaderc_compile_options_add_macro_definition(opts, "VARIANT", 7, value, strlen(value));
    shaderc_compile_options_set_target_env(opts, shaderc_target_env_vulkan,
                                           shaderc_env_version_vulkan_1_1);
    shaderc_compilation_result_t res = shaderc_compile_into_spv(
        compiler, src, strlen(src), kinds[kind], "test.glsl", "main", opts);
    int rc = -1;
    if (shaderc_result_get_compilation_status(res) != shaderc_compilation_status_success) {
        kt_fail(__FILE__, __LINE__, "shaderc: %s", shaderc_result_get_error_message(res));
    } else {
        const uint32_t *w = (const uint32_t *)(const void *)shaderc_result_get_bytes(res);
        rc = vkt_pack_words(w, shaderc_result_get_length(res) / 4, out);
    }
    shaderc_result_release(res);
    shaderc_compile_options_release(opts);
    shaderc_compiler_release(compiler);
    return rc;
}

int vkt_make(enum vkt_kind kind, unsigned variant, struct vkt_blob *out)
{
    static const char *const srcs[] = {compute_src, vertex_src, fragment_src};
    return compile(kind, srcs[kind], variant, out);
}

int vkt_compile(enum vkt_kind kind, const char *glsl, struct vkt_blob *out)
{
    return compile(kind, glsl, 0, out);
}

void vkt_free(struct vkt_blob *b)
{
    kiln_pack_free(b->blob);
    free(b->words);
    memset(b, 0, sizeof(*b));
}

struct kiln_vk *vkt_context(const struct kiln_vk_options *opt)
{
    struct kiln_vk *vk = NULL;
    int rc = kiln_vk_create(opt, &vk);
    if (rc == KILN_ENOTSUP) {
        fprintf(stderr, "SKIP: Vulkan is not available here\n");
        exit(77);
    }
    if (rc < 0)
        kt_fail(__FILE__, __LINE__, "kiln_vk_create: %s", kiln_errname(rc));
    return vk;
}

static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static char log_buf[16384];

static void capture(void *user, enum kiln_log_level level, const char *module, const char *line)
{
    (void)user;
    (void)level;
    pthread_mutex_lock(&log_lock);
    size_t len = strlen(log_buf);
    snprintf(log_buf + len, sizeof(log_buf) - len, "%s: %s\n", module, line);
    pthread_mutex_unlock(&log_lock);
    fprintf(stderr, "[%s] %s\n", module, line);
}

void vkt_capture_log(bool on)
{
    log_buf[0] = '\0';
    kiln_log_set_sink(on ? capture : NULL, NULL);
}

const char *vkt_log(void)
{
    return log_buf;
}
