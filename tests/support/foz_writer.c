/*
 * foz_writer.c - see foz_writer.h. The archives are written with the foz
 * tool's own writer (kiln_foz_writer, docs/foz.md): this file chooses only
 * what goes in them.
 */
#include "foz_writer.h"

#include "kiln/foz.h"
#include "kiln-tools/gen.h"
#include "kiln-tools/glsl.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

void fw_need(int rc, const char *file, int line, const char *what)
{
    if (rc == KILN_ENOTSUP) {
        printf("skipped: this build has no shaderc to make SPIR-V with\n");
        exit(77);
    }
    if (rc != KILN_OK) {
        printf("%s:%d: needed: %s: %s\n", file, line, what, kiln_strerror(rc));
        exit(1);
    }
}

/* Appends a shader module entry of `words` (deflated); @return its hash.
 * A failure is kept in *rc (the first one). */
static uint64_t module(struct kiln_foz_writer *w, const uint32_t *words, size_t nwords, int *rc)
{
    uint64_t hash = kiln_hash64(words, nwords * 4);
    int r = kiln_foz_writer_add_module(w, hash, words, nwords, 0, 0);
    if (r < 0 && *rc == 0)
        *rc = r;
    return hash;
}

/* Appends an object's entry with `flags` (KILN_FOZ_ENTRY_PLAIN or 0). */
static void object(struct kiln_foz_writer *w, unsigned tag, uint64_t hash, const char *json,
                   unsigned flags, int *rc)
{
    int r = kiln_foz_writer_add(w, tag, hash, json, strlen(json), flags);
    if (r < 0 && *rc == 0)
        *rc = r;
}

/* Appends a pipeline entry (stored plain). */
static void pipeline(struct kiln_foz_writer *w, unsigned tag, uint64_t hash, const char *json,
                     int *rc)
{
    object(w, tag, hash, json, KILN_FOZ_ENTRY_PLAIN, rc);
}

/* Begins the archive at `path`, saying on stderr (as `who`) when it cannot. */
static int start(const char *who, const char *path, struct kiln_foz_writer **w)
{
    int rc = kiln_foz_writer_create(NULL, path, w);
    if (rc < 0)
        fprintf(stderr, "%s: cannot write %s\n", who, path);
    return rc;
}

/* Ends an archive: finished when nothing failed, else dropped. */
static int finish(struct kiln_foz_writer *w, int rc, const char *who, const char *path)
{
    if (rc == 0)
        rc = kiln_foz_writer_finish(w, NULL);
    kiln_foz_writer_destroy(w);
    if (rc)
        fprintf(stderr, "%s: %s: %s\n", who, path, kiln_strerror(rc));
    return rc;
}

static void pipeline_objects(struct kiln_foz_writer *w, int *rc)
{
    char json[1024];
    snprintf(json, sizeof(json),
             "{\"version\":6,\"setLayouts\":{\"%016" PRIx64 "\":{\"flags\":0,\"bindings\":"
             "[{\"descriptorType\":7,\"descriptorCount\":1,\"stageFlags\":2147483647,"
             "\"binding\":0}]}}}",
             FW_SET_LAYOUT);
    object(w, KILN_FOZ_TAG_DESCRIPTOR_SET_LAYOUT, FW_SET_LAYOUT, json, KILN_FOZ_ENTRY_PLAIN, rc);
    snprintf(json, sizeof(json),
             "{\"version\":6,\"pipelineLayouts\":{\"%016" PRIx64 "\":{\"flags\":0,"
             "\"pushConstantRanges\":[{\"stageFlags\":2147483647,\"offset\":0,\"size\":16}],"
             "\"setLayouts\":[\"%016" PRIx64 "\"]}}}",
             FW_PIPE_LAYOUT, FW_SET_LAYOUT);
    object(w, KILN_FOZ_TAG_PIPELINE_LAYOUT, FW_PIPE_LAYOUT, json, 0, rc);
    snprintf(json, sizeof(json),
             "{\"version\":6,\"renderPasses\":{\"%016" PRIx64 "\":{\"flags\":0,"
             "\"attachments\":[{\"flags\":0,\"format\":37,\"finalLayout\":2,\"initialLayout\":0,"
             "\"loadOp\":1,\"storeOp\":0,\"samples\":1,\"stencilLoadOp\":2,"
             "\"stencilStoreOp\":1}],\"subpasses\":[{\"flags\":0,\"pipelineBindPoint\":0,"
             "\"colorAttachments\":[{\"attachment\":0,\"layout\":2}]}]}}}",
             FW_RENDER_PASS);
    object(w, KILN_FOZ_TAG_RENDER_PASS, FW_RENDER_PASS, json, KILN_FOZ_ENTRY_PLAIN, rc);
}

/* The fixed-function state of a graphics pipeline fw_write_pipelines
 * writes: a triangle list, one viewport and scissor (dynamic), no depth, no
 * blending. */
static const char graphics_state[] =
    "\"dynamicState\":{\"flags\":0,\"dynamicState\":[0,1]},"
    "\"multisampleState\":{\"flags\":0,\"rasterizationSamples\":1,\"sampleShadingEnable\":0,"
    "\"minSampleShading\":0.0,\"alphaToOneEnable\":0,\"alphaToCoverageEnable\":0},"
    "\"vertexInputState\":{\"flags\":0,\"attributes\":[],\"bindings\":[]},"
    "\"rasterizationState\":{\"flags\":0,\"depthBiasConstantFactor\":0.0,"
    "\"depthBiasSlopeFactor\":0.0,\"depthBiasClamp\":0.0,\"depthBiasEnable\":0,"
    "\"depthClampEnable\":0,\"polygonMode\":0,\"rasterizerDiscardEnable\":0,\"frontFace\":0,"
    "\"lineWidth\":1.0,\"cullMode\":0},"
    "\"inputAssemblyState\":{\"flags\":0,\"topology\":3,\"primitiveRestartEnable\":0},"
    "\"colorBlendState\":{\"flags\":0,\"logicOp\":0,\"logicOpEnable\":0,"
    "\"blendConstants\":[0.0,0.0,0.0,0.0],\"attachments\":[{\"dstAlphaBlendFactor\":0,"
    "\"srcAlphaBlendFactor\":0,\"dstColorBlendFactor\":0,\"srcColorBlendFactor\":0,"
    "\"colorWriteMask\":15,\"alphaBlendOp\":0,\"colorBlendOp\":0,\"blendEnable\":0}]},"
    "\"viewportState\":{\"flags\":0,\"viewportCount\":1,\"scissorCount\":1}";

int fw_write_pipelines(const char *path, unsigned compute, unsigned graphics, uint64_t first_hash)
{
    struct kiln_glsl *g = NULL;
    int rc = kiln_glsl_create(KILN_GLSL_OPT_NONE, &g);
    if (rc < 0)
        return rc;
    struct kiln_foz_writer *w = NULL;
    rc = start("fw_write_pipelines", path, &w);
    if (rc < 0) {
        kiln_glsl_destroy(g);
        return rc;
    }
    pipeline_objects(w, &rc);
    for (unsigned k = 0; k < compute + graphics && !rc; k++) {
        bool is_compute = k < compute;
        uint32_t index = is_compute ? 2 * k : 2 * (k - compute) + 1;
        struct kiln_program *p = NULL;
        rc = kiln_generate_spirv(kiln_glsl_translator(g), KILN_GENERATOR_DEFAULT_SEED, index, &p);
        if (rc)
            break;
        uint64_t h[2] = {0, 0};
        for (unsigned s = 0; s < p->nstages && s < 2; s++)
            h[s] = module(w, p->stages[s].words, p->stages[s].nwords, &rc);
        char json[4096];
        uint64_t pipe = first_hash + k;
        if (is_compute)
            snprintf(json, sizeof(json),
                     "{\"version\":6,\"computePipelines\":{\"%016" PRIx64 "\":{\"flags\":0,"
                     "\"basePipelineHandle\":\"0000000000000000\",\"basePipelineIndex\":-1,"
                     "\"layout\":\"%016" PRIx64 "\",\"stage\":{\"flags\":0,\"stage\":32,"
                     "\"module\":\"%016" PRIx64 "\",\"name\":\"main\",\"specializationInfo\":"
                     "{\"dataSize\":4,\"data\":\"BwAAAA==\",\"mapEntries\":[{\"offset\":0,"
                     "\"size\":4,\"constantID\":0}]}}}}}",
                     pipe, FW_PIPE_LAYOUT, h[0]);
        else
            snprintf(
                json, sizeof(json),
                "{\"version\":6,\"graphicsPipelines\":{\"%016" PRIx64 "\":{\"flags\":0,"
                "\"basePipelineHandle\":\"0000000000000000\",\"basePipelineIndex\":-1,"
                "\"layout\":\"%016" PRIx64 "\",\"renderPass\":\"%016" PRIx64 "\","
                "\"subpass\":0,%s,\"stages\":[{\"flags\":0,\"stage\":1,\"module\":\"%016" PRIx64
                "\",\"name\":\"main\"},{\"flags\":0,\"stage\":16,\"module\":\"%016" PRIx64
                "\",\"name\":\"main\"}]}}}",
                pipe, FW_PIPE_LAYOUT, FW_RENDER_PASS, graphics_state, h[0], h[1]);
        object(w, is_compute ? KILN_FOZ_TAG_COMPUTE_PIPELINE : KILN_FOZ_TAG_GRAPHICS_PIPELINE, pipe,
               json, 0, &rc);
        kiln_program_destroy(p);
    }
    kiln_glsl_destroy(g);
    return finish(w, rc, "fw_write_pipelines", path);
}

/* What each pipeline of fw_write_state_extensions changes in
 * graphics_state's blocks: NULL keeps the block as it is. */
struct state_variant {
    const char *dynamic;      /* the dynamicState array */
    const char *raster_pnext; /* rasterizationState's pNext array */
    const char *viewport;     /* viewportState's pNext array */
    const char *blend;        /* colorBlendState's pNext array */
    unsigned topology;
    const char *vertex_input; /* the whole vertexInputState block */
};

static const struct state_variant state_variants[FW_STATE_EXTENSION_PIPELINES] = {
    {.raster_pnext = "[{\"sType\":1000102001,\"flags\":0,\"depthClipEnable\":1},"
                     "{\"sType\":1000254001,\"provokingVertexMode\":1},"
                     "{\"sType\":1000028002,\"flags\":0,\"rasterizationStream\":0}]",
     .topology = 3},
    {.viewport = "[{\"sType\":1000355001,\"negativeOneToOne\":1}]",
     .blend = "[{\"sType\":1000381001,\"attachmentCount\":1,\"colorWriteEnables\":[1]}]",
     .topology = 3},
    {.raster_pnext = "[{\"sType\":1000259001,\"lineRasterizationMode\":1,"
                     "\"stippledLineEnable\":0,\"lineStippleFactor\":1,\"lineStipplePattern\":0}]",
     .topology = 1},
    {.dynamic = "[0,1,1000267000,1000267001,1000377001,1000377002,1000377003,1000381000,"
                "1000455004,1000455016,1000455019,1000352000]",
     .topology = 3},
    {.vertex_input = "{\"flags\":0,\"attributes\":[],\"bindings\":[{\"binding\":0,\"stride\":16,"
                     "\"inputRate\":1}],\"pNext\":[{\"sType\":1000190001,"
                     "\"vertexBindingDivisors\":[{\"binding\":0,\"divisor\":2}]}]}",
     .topology = 3},
};

/* Generated program 1 of the default seed: a vertex and fragment pair. */
static int graphics_pair(struct kiln_program **p)
{
    struct kiln_glsl *g = NULL;
    int rc = kiln_glsl_create(KILN_GLSL_OPT_NONE, &g);
    if (rc < 0)
        return rc;
    rc = kiln_generate_spirv(kiln_glsl_translator(g), KILN_GENERATOR_DEFAULT_SEED, 1, p);
    kiln_glsl_destroy(g);
    return rc;
}

int fw_write_state_extensions(const char *path, uint64_t first_hash)
{
    struct kiln_program *p = NULL;
    int rc = graphics_pair(&p);
    if (rc < 0)
        return rc;
    struct kiln_foz_writer *w = NULL;
    rc = start("fw_write_state_extensions", path, &w);
    if (rc < 0) {
        kiln_program_destroy(p);
        return rc;
    }
    pipeline_objects(w, &rc);
    uint64_t h[2] = {0, 0};
    for (unsigned s = 0; rc == 0 && s < p->nstages && s < 2; s++)
        h[s] = module(w, p->stages[s].words, p->stages[s].nwords, &rc);
    for (unsigned k = 0; k < FW_STATE_EXTENSION_PIPELINES && rc == 0; k++) {
        const struct state_variant *v = &state_variants[k];
        char json[8192];
        snprintf(
            json, sizeof(json),
            "{\"version\":6,\"graphicsPipelines\":{\"%016" PRIx64 "\":{\"flags\":0,"
            "\"basePipelineHandle\":\"0000000000000000\",\"basePipelineIndex\":-1,"
            "\"layout\":\"%016" PRIx64 "\",\"renderPass\":\"%016" PRIx64 "\",\"subpass\":0,"
            "\"dynamicState\":{\"flags\":0,\"dynamicState\":%s},"
            "\"multisampleState\":{\"flags\":0,\"rasterizationSamples\":1,"
            "\"sampleShadingEnable\":0,\"minSampleShading\":0.0,\"alphaToOneEnable\":0,"
            "\"alphaToCoverageEnable\":0},"
            "\"vertexInputState\":%s,"
            "\"rasterizationState\":{\"flags\":0,\"depthBiasConstantFactor\":0.0,"
            "\"depthBiasSlopeFactor\":0.0,\"depthBiasClamp\":0.0,\"depthBiasEnable\":0,"
            "\"depthClampEnable\":0,\"polygonMode\":0,\"rasterizerDiscardEnable\":0,"
            "\"frontFace\":0,\"lineWidth\":1.0,\"cullMode\":0,\"pNext\":%s},"
            "\"inputAssemblyState\":{\"flags\":0,\"topology\":%u,\"primitiveRestartEnable\":0},"
            "\"colorBlendState\":{\"flags\":0,\"logicOp\":0,\"logicOpEnable\":0,"
            "\"blendConstants\":[0.0,0.0,0.0,0.0],\"attachments\":[{\"dstAlphaBlendFactor\":0,"
            "\"srcAlphaBlendFactor\":0,\"dstColorBlendFactor\":0,\"srcColorBlendFactor\":0,"
            "\"colorWriteMask\":15,\"alphaBlendOp\":0,\"colorBlendOp\":0,\"blendEnable\":0}],"
            "\"pNext\":%s},"
            "\"viewportState\":{\"flags\":0,\"viewportCount\":1,\"scissorCount\":1,\"pNext\":%s},"
            "\"stages\":[{\"flags\":0,\"stage\":1,\"module\":\"%016" PRIx64
            "\",\"name\":\"main\"},{\"flags\":0,\"stage\":16,\"module\":\"%016" PRIx64
            "\",\"name\":\"main\"}]}}}",
            first_hash + k, FW_PIPE_LAYOUT, FW_RENDER_PASS, v->dynamic ? v->dynamic : "[0,1]",
            v->vertex_input ? v->vertex_input : "{\"flags\":0,\"attributes\":[],\"bindings\":[]}",
            v->raster_pnext ? v->raster_pnext : "[]", v->topology, v->blend ? v->blend : "[]",
            v->viewport ? v->viewport : "[]", h[0], h[1]);
        object(w, KILN_FOZ_TAG_GRAPHICS_PIPELINE, first_hash + k, json, 0, &rc);
    }
    kiln_program_destroy(p);
    return finish(w, rc, "fw_write_state_extensions", path);
}

/* The ray-tracing shaders fw_write_raytracing records: a raygen that traces
 * one ray per pixel into an acceleration structure and stores the payload
 * in an image, a miss and a closest-hit shader that fill the payload. */
static const char rt_raygen[] =
    "#version 460\n"
    "#extension GL_EXT_ray_tracing : require\n"
    "layout(set = 0, binding = 0) uniform accelerationStructureEXT tlas;\n"
    "layout(set = 0, binding = 1, rgba8) uniform writeonly image2D img;\n"
    "layout(location = 0) rayPayloadEXT vec3 color;\n"
    "void main() {\n"
    "    vec2 uv = (vec2(gl_LaunchIDEXT.xy) + 0.5) / vec2(gl_LaunchSizeEXT.xy);\n"
    "    traceRayEXT(tlas, gl_RayFlagsOpaqueEXT, 0xff, 0, 0, 0, vec3(uv, -1.0), 0.001,\n"
    "                vec3(0.0, 0.0, 1.0), 100.0, 0);\n"
    "    imageStore(img, ivec2(gl_LaunchIDEXT.xy), vec4(color, 1.0));\n"
    "}\n";
static const char rt_miss[] = "#version 460\n"
                              "#extension GL_EXT_ray_tracing : require\n"
                              "layout(location = 0) rayPayloadInEXT vec3 color;\n"
                              "void main() { color = vec3(0.1, 0.2, 0.3); }\n";
static const char rt_chit[] =
    "#version 460\n"
    "#extension GL_EXT_ray_tracing : require\n"
    "layout(location = 0) rayPayloadInEXT vec3 color;\n"
    "hitAttributeEXT vec2 bary;\n"
    "void main() { color = vec3(1.0 - bary.x - bary.y, bary.x, bary.y); }\n";

#define FW_RT_SET_LAYOUT  UINT64_C(0x5e7100000000002)
#define FW_RT_PIPE_LAYOUT UINT64_C(0x1a7000000000002)

/* One ray-tracing stage record. */
#define RT_STAGE(bit) \
    "{\"flags\":0,\"stage\":" #bit ",\"module\":\"%016" PRIx64 "\",\"name\":\"main\"}"
/* Groups: general (type 0) and triangles hit (type 1). */
#define RT_GENERAL(i)                                                       \
    "{\"type\":0,\"generalShader\":" #i ",\"closestHitShader\":4294967295," \
    "\"anyHitShader\":4294967295,\"intersectionShader\":4294967295}"
#define RT_HIT(i)                                                           \
    "{\"type\":1,\"generalShader\":4294967295,\"closestHitShader\":" #i "," \
    "\"anyHitShader\":4294967295,\"intersectionShader\":4294967295}"
#define RT_HEAD                                                                 \
    "{\"version\":6,\"raytracingPipelines\":{\"%016" PRIx64 "\":{\"flags\":%u," \
    "\"basePipelineHandle\":\"0000000000000000\",\"basePipelineIndex\":-1,"     \
    "\"layout\":\"%016" PRIx64 "\",\"maxPipelineRayRecursionDepth\":1,"
#define RT_INTERFACE                                          \
    "\"libraryInterface\":{\"maxPipelineRayPayloadSize\":12," \
    "\"maxPipelineRayHitAttributeSize\":8},"

int fw_write_raytracing(const char *path, uint64_t hash)
{
    static const struct {
        const char *text;
        uint32_t stage;
    } src[3] = {{rt_raygen, 0x100}, {rt_miss, 0x800}, {rt_chit, 0x400}};
    uint64_t mod[3] = {0, 0, 0};
    struct kiln_foz_writer *w = NULL;
    int rc = start("fw_write_raytracing", path, &w);
    if (rc < 0)
        return rc;
    for (int i = 0; i < 3 && rc == 0; i++) {
        uint32_t *words = NULL;
        size_t n = 0;
        rc = kiln_glsl_compile_vulkan12(src[i].text, strlen(src[i].text), src[i].stage, &words, &n);
        if (rc == 0)
            mod[i] = module(w, words, n, &rc);
        free(words);
    }
    char json[4096];
    /* An acceleration structure (1000150000) and a storage image (3) for
     * raygen, miss and closest hit (0xd00). */
    snprintf(json, sizeof(json),
             "{\"version\":6,\"setLayouts\":{\"%016" PRIx64 "\":{\"flags\":0,\"bindings\":"
             "[{\"descriptorType\":1000150000,\"descriptorCount\":1,\"stageFlags\":3328,"
             "\"binding\":0},{\"descriptorType\":3,\"descriptorCount\":1,\"stageFlags\":3328,"
             "\"binding\":1}]}}}",
             FW_RT_SET_LAYOUT);
    object(w, KILN_FOZ_TAG_DESCRIPTOR_SET_LAYOUT, FW_RT_SET_LAYOUT, json, KILN_FOZ_ENTRY_PLAIN,
           &rc);
    snprintf(json, sizeof(json),
             "{\"version\":6,\"pipelineLayouts\":{\"%016" PRIx64 "\":{\"flags\":0,"
             "\"pushConstantRanges\":[],\"setLayouts\":[\"%016" PRIx64 "\"]}}}",
             FW_RT_PIPE_LAYOUT, FW_RT_SET_LAYOUT);
    object(w, KILN_FOZ_TAG_PIPELINE_LAYOUT, FW_RT_PIPE_LAYOUT, json, 0, &rc);

    /* The whole pipeline: raygen, miss, hit group. */
    snprintf(json, sizeof(json),
             RT_HEAD "\"stages\":[" RT_STAGE(256) "," RT_STAGE(2048) "," RT_STAGE(
                 1024) "],"
                       "\"groups\":[" RT_GENERAL(0) "," RT_GENERAL(1) "," RT_HIT(2) "]}}}",
             hash, 0u, FW_RT_PIPE_LAYOUT, mod[0], mod[1], mod[2]);
    object(w, KILN_FOZ_TAG_RAYTRACING_PIPELINE, hash, json, KILN_FOZ_ENTRY_PLAIN, &rc);
    /* A library with the miss shader and the hit group ... */
    snprintf(json, sizeof(json),
             RT_HEAD RT_INTERFACE "\"stages\":[" RT_STAGE(2048) "," RT_STAGE(
                 1024) "],"
                       "\"groups\":[" RT_GENERAL(0) "," RT_HIT(1) "]}}}",
             hash + 1, 0x800u, FW_RT_PIPE_LAYOUT, mod[1], mod[2]);
    object(w, KILN_FOZ_TAG_RAYTRACING_PIPELINE, hash + 1, json, KILN_FOZ_ENTRY_PLAIN, &rc);
    /* ... and the raygen pipeline that links it. */
    snprintf(json, sizeof(json),
             RT_HEAD RT_INTERFACE
             "\"libraryInfo\":{\"libraries\":[\"%016" PRIx64 "\"]},"
             "\"stages\":[" RT_STAGE(256) "],\"groups\":[" RT_GENERAL(0) "]}}}",
             hash + 2, 0u, FW_RT_PIPE_LAYOUT, hash + 1, mod[0]);
    object(w, KILN_FOZ_TAG_RAYTRACING_PIPELINE, hash + 2, json, KILN_FOZ_ENTRY_PLAIN, &rc);
    return finish(w, rc, "fw_write_raytracing", path);
}

/* One part of a graphics pipeline library: its hash, flags, the
 * VkGraphicsPipelineLibraryFlagsEXT it holds, and its state members. */
static void gpl_part(struct kiln_foz_writer *w, uint64_t hash, uint32_t flags, uint32_t parts,
                     const char *members, int *rc)
{
    char json[4096];
    snprintf(json, sizeof(json),
             "{\"version\":6,\"graphicsPipelines\":{\"%016" PRIx64 "\":{\"flags\":%u,"
             "\"basePipelineHandle\":\"0000000000000000\",\"basePipelineIndex\":-1,"
             "\"layout\":\"%016" PRIx64 "\",\"subpass\":0,%s,"
             "\"pNext\":[{\"sType\":1000320002,\"flags\":%u}]}}}",
             hash, flags, FW_PIPE_LAYOUT, members, parts);
    object(w, KILN_FOZ_TAG_GRAPHICS_PIPELINE, hash, json, 0, rc);
}

int fw_write_gpl(const char *path, uint64_t first_hash, bool drop_part)
{
    struct kiln_program *p = NULL;
    int rc = graphics_pair(&p);
    if (rc < 0)
        return rc;
    struct kiln_foz_writer *w = NULL;
    rc = start("fw_write_gpl", path, &w);
    if (rc < 0) {
        kiln_program_destroy(p);
        return rc;
    }
    pipeline_objects(w, &rc);
    uint64_t vs = module(w, p->stages[0].words, p->stages[0].nwords, &rc);
    uint64_t fs = module(w, p->stages[1].words, p->stages[1].nwords, &rc);
    kiln_program_destroy(p);
    char m[3][1024];
    snprintf(m[0], sizeof(m[0]),
             "\"renderPass\":\"%016" PRIx64 "\",\"stages\":[{\"flags\":0,\"stage\":1,"
             "\"module\":\"%016" PRIx64 "\",\"name\":\"main\"}],"
             "\"dynamicState\":{\"flags\":0,\"dynamicState\":[0,1]},"
             "\"viewportState\":{\"flags\":0,\"viewportCount\":1,\"scissorCount\":1},"
             "\"rasterizationState\":{\"flags\":0,\"depthBiasConstantFactor\":0.0,"
             "\"depthBiasSlopeFactor\":0.0,\"depthBiasClamp\":0.0,\"depthBiasEnable\":0,"
             "\"depthClampEnable\":0,\"polygonMode\":0,\"rasterizerDiscardEnable\":0,"
             "\"frontFace\":0,\"lineWidth\":1.0,\"cullMode\":0}",
             FW_RENDER_PASS, vs);
    snprintf(m[1], sizeof(m[1]),
             "\"renderPass\":\"%016" PRIx64 "\",\"stages\":[{\"flags\":0,\"stage\":16,"
             "\"module\":\"%016" PRIx64 "\",\"name\":\"main\"}],"
             "\"multisampleState\":{\"flags\":0,\"rasterizationSamples\":1,"
             "\"sampleShadingEnable\":0,\"minSampleShading\":0.0,\"alphaToOneEnable\":0,"
             "\"alphaToCoverageEnable\":0}",
             FW_RENDER_PASS, fs);
    snprintf(m[2], sizeof(m[2]),
             "\"renderPass\":\"%016" PRIx64 "\","
             "\"multisampleState\":{\"flags\":0,\"rasterizationSamples\":1,"
             "\"sampleShadingEnable\":0,\"minSampleShading\":0.0,\"alphaToOneEnable\":0,"
             "\"alphaToCoverageEnable\":0},"
             "\"colorBlendState\":{\"flags\":0,\"logicOp\":0,\"logicOpEnable\":0,"
             "\"blendConstants\":[0.0,0.0,0.0,0.0],\"attachments\":[{\"dstAlphaBlendFactor\":0,"
             "\"srcAlphaBlendFactor\":0,\"dstColorBlendFactor\":0,\"srcColorBlendFactor\":0,"
             "\"colorWriteMask\":15,\"alphaBlendOp\":0,\"colorBlendOp\":0,\"blendEnable\":0}]}",
             FW_RENDER_PASS);
    static const char vi[] =
        "\"vertexInputState\":{\"flags\":0,\"attributes\":[],\"bindings\":[]},"
        "\"inputAssemblyState\":{\"flags\":0,\"topology\":3,\"primitiveRestartEnable\":0}";
    /* Two sets of the four parts: the second retains what link-time
     * optimization needs, and is linked with it. */
    for (uint32_t set = 0; set < 2 && rc == 0; set++) {
        uint64_t base = first_hash + 8 * set;
        uint32_t flags = 0x800u | (set ? 0x800000u : 0);
        if (!(drop_part && set == 0))
            gpl_part(w, base + 0, flags, 0x1, vi, &rc);
        gpl_part(w, base + 1, flags, 0x2, m[0], &rc);
        gpl_part(w, base + 2, flags, 0x4, m[1], &rc);
        gpl_part(w, base + 3, flags, 0x8, m[2], &rc);
        char json[1024];
        snprintf(json, sizeof(json),
                 "{\"version\":6,\"graphicsPipelines\":{\"%016" PRIx64 "\":{\"flags\":%u,"
                 "\"basePipelineHandle\":\"0000000000000000\",\"basePipelineIndex\":-1,"
                 "\"layout\":\"%016" PRIx64 "\",\"renderPass\":\"0000000000000000\","
                 "\"subpass\":0,\"stages\":[],\"pNext\":[{\"sType\":1000290000,\"libraries\":"
                 "[\"%016" PRIx64 "\",\"%016" PRIx64 "\",\"%016" PRIx64 "\",\"%016" PRIx64
                 "\"]}]}}}",
                 base + 4, set ? 0x400u : 0u, FW_PIPE_LAYOUT, base, base + 1, base + 2, base + 3);
        object(w, KILN_FOZ_TAG_GRAPHICS_PIPELINE, base + 4, json, 0, &rc);
    }
    return finish(w, rc, "fw_write_gpl", path);
}

/* A compute pipeline entry naming module `mod`. */
static void compute_pipeline(struct kiln_foz_writer *w, uint64_t pipe, uint64_t mod, int *rc)
{
    char json[512];
    snprintf(json, sizeof(json),
             "{\"version\":6,\"computePipelines\":{\"%016" PRIx64 "\":{\"flags\":0,"
             "\"stage\":{\"flags\":0,\"stage\":32,\"module\":\"%016" PRIx64
             "\",\"name\":\"main\"}}}}",
             pipe, mod);
    pipeline(w, KILN_FOZ_TAG_COMPUTE_PIPELINE, pipe, json, rc);
}

int fw_write_modules(const char *path, const struct fw_module *mods, size_t n, uint64_t *hashes)
{
    struct kiln_foz_writer *w = NULL;
    int rc = start("fw_write_modules", path, &w);
    if (rc < 0)
        return rc;
    for (size_t i = 0; i < n && !rc; i++) {
        uint64_t h = module(w, mods[i].words, mods[i].nwords, &rc);
        if (hashes)
            hashes[i] = h;
        compute_pipeline(w, 0x9000u + i, h, &rc);
    }
    return finish(w, rc, "fw_write_modules", path);
}

/* The archive written for this process, removed at its exit (not in the
 * case's kt_tmpdir: a case may call that again, which starts it afresh). */
static char written[4096];

static void remove_written(void)
{
    if (written[0])
        remove(written);
}

int fw_archive(const char *name, char *path, size_t cap)
{
    snprintf(path, cap, "%s/foz/sascha-willems/%s", kt_corpus_dir(), name);
    struct stat st;
    if (stat(path, &st) == 0)
        return KILN_OK;
    if (!written[0]) {
        const char *tmp = getenv("TMPDIR");
        snprintf(written, sizeof(written), "%s/kiln-written-%ld.foz", tmp && *tmp ? tmp : "/tmp",
                 (long)getpid());
        int rc = fw_write_pipelines(written, 1, 2, 0x7000);
        if (rc < 0) {
            remove(written);
            written[0] = 0;
            return rc;
        }
        atexit(remove_written);
    }
    snprintf(path, cap, "%s", written);
    return KILN_OK;
}

int fw_write_module_pipelines(const char *path, const struct fw_module *mods, size_t n,
                              uint64_t first_hash)
{
    struct kiln_foz_writer *w = NULL;
    int rc = start("fw_write_module_pipelines", path, &w);
    if (rc < 0)
        return rc;
    pipeline_objects(w, &rc);
    for (size_t i = 0; i < n && !rc; i++) {
        uint64_t h = module(w, mods[i].words, mods[i].nwords, &rc);
        char json[1024];
        snprintf(json, sizeof(json),
                 "{\"version\":6,\"computePipelines\":{\"%016" PRIx64 "\":{\"flags\":0,"
                 "\"basePipelineHandle\":\"0000000000000000\",\"basePipelineIndex\":-1,"
                 "\"layout\":\"%016" PRIx64 "\",\"stage\":{\"flags\":0,\"stage\":32,"
                 "\"module\":\"%016" PRIx64 "\",\"name\":\"main\"}}}}",
                 first_hash + i, FW_PIPE_LAYOUT, h);
        pipeline(w, KILN_FOZ_TAG_COMPUTE_PIPELINE, first_hash + i, json, &rc);
    }
    return finish(w, rc, "fw_write_module_pipelines", path);
}

int fw_crafted_begin(const char *path, struct fw_crafted *a)
{
    memset(a, 0, sizeof(*a));
    struct kiln_program *p = NULL;
    int rc = graphics_pair(&p);
    if (rc < 0)
        return rc;
    rc = start("fw_crafted_begin", path, &a->w);
    if (rc < 0) {
        kiln_program_destroy(p);
        return rc;
    }
    pipeline_objects(a->w, &a->rc);
    a->vert = module(a->w, p->stages[0].words, p->stages[0].nwords, &a->rc);
    a->frag = module(a->w, p->stages[1].words, p->stages[1].nwords, &a->rc);
    kiln_program_destroy(p);
    return a->rc;
}

void fw_crafted_add(struct fw_crafted *a, unsigned tag, uint64_t hash, const char *json)
{
    object(a->w, tag, hash, json, 0, &a->rc);
}

int fw_crafted_finish(struct fw_crafted *a, const char *path)
{
    return finish(a->w, a->rc, "fw_crafted_finish", path);
}
