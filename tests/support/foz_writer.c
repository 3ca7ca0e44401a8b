/*
 * foz_writer.c - see foz_writer.h. The archives are written with the foz
 * tool's own writer (kiln_foz_writer, docs/foz.md): this file chooses only
 * what goes in them.
 */
#include "foz_writer.h"

#include "kiln-tools/foz.h"
#include "kiln-tools/gen.h"
#include "kiln-tools/glsl.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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

int fw_write(const char *path, unsigned compute, unsigned graphics)
{
    struct kiln_glsl *g = NULL;
    int rc = kiln_glsl_create(KILN_GLSL_OPT_NONE, &g);
    if (rc < 0)
        return rc;
    struct kiln_foz_writer *w = NULL;
    rc = kiln_foz_writer_create(NULL, path, &w);
    if (rc < 0) {
        fprintf(stderr, "fw_write: cannot write %s\n", path);
        kiln_glsl_destroy(g);
        return rc;
    }
    /* Generated program 2k is a compute program, 2k + 1 a graphics pair. */
    for (unsigned k = 0; k < compute + graphics && !rc; k++) {
        bool is_compute = k < compute;
        uint32_t index = is_compute ? 2 * k : 2 * (k - compute) + 1;
        struct kiln_program *p = NULL;
        rc = kiln_generate_spirv(kiln_glsl_translator(g), KILN_GENERATOR_DEFAULT_SEED, index, &p);
        if (rc)
            break;
        uint64_t h[2] = {0, 0};
        for (unsigned s = 0; s < p->nstages; s++)
            h[s] = module(w, p->stages[s].words, p->stages[s].nwords, &rc);
        char json[512];
        uint64_t pipe = 0x7000u + k;
        if (is_compute)
            snprintf(json, sizeof(json),
                     "{\"version\":6,\"computePipelines\":{\"%016" PRIx64 "\":{\"flags\":0,"
                     "\"stage\":{\"flags\":0,\"stage\":32,\"module\":\"%016" PRIx64
                     "\",\"name\":\"main\"}}}}",
                     pipe, h[0]);
        else
            snprintf(json, sizeof(json),
                     "{\"version\":6,\"graphicsPipelines\":{\"%016" PRIx64 "\":{\"flags\":0,"
                     "\"stages\":[{\"flags\":0,\"stage\":1,\"module\":\"%016" PRIx64
                     "\",\"name\":\"main\"},{\"flags\":0,\"stage\":16,\"module\":\"%016" PRIx64
                     "\",\"name\":\"main\"}]}}}",
                     pipe, h[0], h[1]);
        pipeline(w, is_compute ? KILN_FOZ_TAG_COMPUTE_PIPELINE : KILN_FOZ_TAG_GRAPHICS_PIPELINE,
                 pipe, json, &rc);
        kiln_program_destroy(p);
    }
    kiln_glsl_destroy(g);
    return finish(w, rc, "fw_write", path);
}

/* The objects every pipeline fw_write_pipelines writes names. */
#define FW_SET_LAYOUT  UINT64_C(0x5e7100000000001)
#define FW_PIPE_LAYOUT UINT64_C(0x1a7000000000001)
#define FW_RENDER_PASS UINT64_C(0x9a5500000000001)

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
    rc = kiln_foz_writer_create(NULL, path, &w);
    if (rc < 0) {
        fprintf(stderr, "fw_write_pipelines: cannot write %s\n", path);
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

int fw_write_raytracing(const char *path, uint64_t hash)
{
    struct kiln_glsl *g = NULL;
    int rc = kiln_glsl_create(KILN_GLSL_OPT_NONE, &g);
    if (rc < 0)
        return rc;
    struct kiln_program *p = NULL;
    rc = kiln_generate_spirv(kiln_glsl_translator(g), KILN_GENERATOR_DEFAULT_SEED, 0, &p);
    kiln_glsl_destroy(g);
    if (rc < 0)
        return rc;
    struct kiln_foz_writer *w = NULL;
    rc = kiln_foz_writer_create(NULL, path, &w);
    if (rc < 0) {
        fprintf(stderr, "fw_write_raytracing: cannot write %s\n", path);
        kiln_program_destroy(p);
        return rc;
    }
    pipeline_objects(w, &rc);
    uint64_t h = module(w, p->stages[0].words, p->stages[0].nwords, &rc);
    kiln_program_destroy(p);
    char json[1024];
    snprintf(json, sizeof(json),
             "{\"version\":6,\"raytracingPipelines\":{\"%016" PRIx64 "\":{\"flags\":0,"
             "\"basePipelineHandle\":\"0000000000000000\",\"basePipelineIndex\":-1,"
             "\"layout\":\"%016" PRIx64 "\",\"maxPipelineRayRecursionDepth\":1,"
             "\"stages\":[{\"flags\":0,\"stage\":256,\"module\":\"%016" PRIx64
             "\",\"name\":\"main\"}],\"groups\":[{\"type\":0,\"generalShader\":0,"
             "\"closestHitShader\":4294967295,\"anyHitShader\":4294967295,"
             "\"intersectionShader\":4294967295}]}}}",
             hash, FW_PIPE_LAYOUT, h);
    object(w, KILN_FOZ_TAG_RAYTRACING_PIPELINE, hash, json, KILN_FOZ_ENTRY_PLAIN, &rc);
    return finish(w, rc, "fw_write_raytracing", path);
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
    int rc = kiln_foz_writer_create(NULL, path, &w);
    if (rc < 0) {
        fprintf(stderr, "fw_write_modules: cannot write %s\n", path);
        return rc;
    }
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
        int rc = fw_write(written, 1, 2);
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
    int rc = kiln_foz_writer_create(NULL, path, &w);
    if (rc < 0) {
        fprintf(stderr, "fw_write_module_pipelines: cannot write %s\n", path);
        return rc;
    }
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
