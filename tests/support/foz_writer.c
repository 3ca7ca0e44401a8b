/*
 * foz_writer.c - see foz_writer.h. The layout is docs/foz.md's: a 16-byte
 * header, then entries of a 40-digit hexadecimal name (tag, hash), four
 * little-endian u32s (stored size, flags, CRC32, size after inflation) and
 * the stored bytes.
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
#include <zlib.h>

struct out {
    FILE *f;
    int rc;
};

static void le32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

/* Appends one entry, deflated or plain, with its CRC. */
static void entry(struct out *o, unsigned tag, uint64_t hash, const void *payload, size_t n,
                  bool deflate)
{
    if (o->rc)
        return;
    uLongf zn = deflate ? compressBound((uLong)n) : (uLongf)n;
    uint8_t *z = malloc(zn ? zn : 1);
    if (!z || (deflate && compress2(z, &zn, payload, (uLong)n, 6) != Z_OK)) {
        free(z);
        o->rc = KILN_ENOMEM;
        return;
    }
    if (!deflate)
        memcpy(z, payload, n);
    char name[41];
    snprintf(name, sizeof(name), "%024x%016" PRIx64, tag, hash);
    uint8_t head[16];
    le32(head, (uint32_t)zn);
    le32(head + 4, deflate ? 2 : 1);
    le32(head + 8, (uint32_t)crc32(0L, z, (uInt)zn));
    le32(head + 12, (uint32_t)n);
    if (fwrite(name, 1, 40, o->f) != 40 || fwrite(head, 1, 16, o->f) != 16 ||
        fwrite(z, 1, zn, o->f) != zn)
        o->rc = KILN_EIO;
    free(z);
}

/* Appends a shader module entry of `words`; @return its hash. */
static uint64_t module(struct out *o, const uint32_t *words, size_t nwords)
{
    uint64_t hash = kiln_hash64(words, nwords * 4);
    char json[256];
    size_t cap = 256 + nwords * 5;
    uint8_t *buf = malloc(cap);
    if (!buf) {
        o->rc = KILN_ENOMEM;
        return hash;
    }
    /* The varint area first, to know its size. */
    uint8_t *v = buf + 256;
    size_t vn = 0;
    for (size_t i = 0; i < nwords; i++) {
        uint32_t w = words[i];
        while (w >= 0x80) {
            v[vn++] = (uint8_t)(w | 0x80);
            w >>= 7;
        }
        v[vn++] = (uint8_t)w;
    }
    int jn = snprintf(json, sizeof(json),
                      "{\"version\":6,\"shaderModules\":{\"%016" PRIx64 "\":{\"flags\":0,"
                      "\"codeSize\":%zu,\"varintOffset\":0,\"varintSize\":%zu}}}",
                      hash, nwords * 4, vn);
    /* JSON, a NUL, then the varint area right after it. */
    memmove(buf + jn + 1, v, vn);
    memcpy(buf, json, (size_t)jn);
    buf[jn] = 0;
    entry(o, KILN_FOZ_TAG_SHADER_MODULE, hash, buf, (size_t)jn + 1 + vn, true);
    free(buf);
    return hash;
}

int fw_write(const char *path, unsigned compute, unsigned graphics)
{
    struct kiln_glsl *g = NULL;
    int rc = kiln_glsl_create(KILN_GLSL_OPT_NONE, &g);
    if (rc < 0)
        return rc;
    struct out o = {.f = fopen(path, "wb")};
    if (!o.f) {
        fprintf(stderr, "fw_write: cannot write %s\n", path);
        kiln_glsl_destroy(g);
        return KILN_EIO;
    }
    static const uint8_t header[16] = {0x81, 'F', 'O', 'S', 'S', 'I', 'L', 'I',
                                       'Z',  'E', 'D', 'B', 0,   0,   0,   6};
    if (fwrite(header, 1, sizeof(header), o.f) != sizeof(header))
        o.rc = KILN_EIO;
    /* Generated program 2k is a compute program, 2k + 1 a graphics pair. */
    for (unsigned k = 0; k < compute + graphics && !o.rc; k++) {
        bool is_compute = k < compute;
        uint32_t index = is_compute ? 2 * k : 2 * (k - compute) + 1;
        struct kiln_program *p = NULL;
        o.rc = kiln_generate_spirv(kiln_glsl_translator(g), KILN_GENERATOR_DEFAULT_SEED, index, &p);
        if (o.rc)
            break;
        uint64_t h[2] = {0, 0};
        for (unsigned s = 0; s < p->nstages; s++)
            h[s] = module(&o, p->stages[s].words, p->stages[s].nwords);
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
        entry(&o, is_compute ? KILN_FOZ_TAG_COMPUTE_PIPELINE : KILN_FOZ_TAG_GRAPHICS_PIPELINE, pipe,
              json, strlen(json), false);
        kiln_program_destroy(p);
    }
    if (fclose(o.f) != 0 && !o.rc)
        o.rc = KILN_EIO;
    kiln_glsl_destroy(g);
    if (o.rc)
        fprintf(stderr, "fw_write: %s: %s\n", path, kiln_strerror(o.rc));
    return o.rc;
}

/* The objects every pipeline fw_write_pipelines writes names. */
#define FW_SET_LAYOUT  UINT64_C(0x5e7100000000001)
#define FW_PIPE_LAYOUT UINT64_C(0x1a7000000000001)
#define FW_RENDER_PASS UINT64_C(0x9a5500000000001)

static void pipeline_objects(struct out *o)
{
    char json[1024];
    snprintf(json, sizeof(json),
             "{\"version\":6,\"setLayouts\":{\"%016" PRIx64 "\":{\"flags\":0,\"bindings\":"
             "[{\"descriptorType\":7,\"descriptorCount\":1,\"stageFlags\":2147483647,"
             "\"binding\":0}]}}}",
             FW_SET_LAYOUT);
    entry(o, KILN_FOZ_TAG_DESCRIPTOR_SET_LAYOUT, FW_SET_LAYOUT, json, strlen(json), false);
    snprintf(json, sizeof(json),
             "{\"version\":6,\"pipelineLayouts\":{\"%016" PRIx64 "\":{\"flags\":0,"
             "\"pushConstantRanges\":[{\"stageFlags\":2147483647,\"offset\":0,\"size\":16}],"
             "\"setLayouts\":[\"%016" PRIx64 "\"]}}}",
             FW_PIPE_LAYOUT, FW_SET_LAYOUT);
    entry(o, KILN_FOZ_TAG_PIPELINE_LAYOUT, FW_PIPE_LAYOUT, json, strlen(json), true);
    snprintf(json, sizeof(json),
             "{\"version\":6,\"renderPasses\":{\"%016" PRIx64 "\":{\"flags\":0,"
             "\"attachments\":[{\"flags\":0,\"format\":37,\"finalLayout\":2,\"initialLayout\":0,"
             "\"loadOp\":1,\"storeOp\":0,\"samples\":1,\"stencilLoadOp\":2,"
             "\"stencilStoreOp\":1}],\"subpasses\":[{\"flags\":0,\"pipelineBindPoint\":0,"
             "\"colorAttachments\":[{\"attachment\":0,\"layout\":2}]}]}}}",
             FW_RENDER_PASS);
    entry(o, KILN_FOZ_TAG_RENDER_PASS, FW_RENDER_PASS, json, strlen(json), false);
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
    struct out o = {.f = fopen(path, "wb")};
    if (!o.f) {
        fprintf(stderr, "fw_write_pipelines: cannot write %s\n", path);
        kiln_glsl_destroy(g);
        return KILN_EIO;
    }
    static const uint8_t header[16] = {0x81, 'F', 'O', 'S', 'S', 'I', 'L', 'I',
                                       'Z',  'E', 'D', 'B', 0,   0,   0,   6};
    if (fwrite(header, 1, sizeof(header), o.f) != sizeof(header))
        o.rc = KILN_EIO;
    pipeline_objects(&o);
    for (unsigned k = 0; k < compute + graphics && !o.rc; k++) {
        bool is_compute = k < compute;
        uint32_t index = is_compute ? 2 * k : 2 * (k - compute) + 1;
        struct kiln_program *p = NULL;
        o.rc = kiln_generate_spirv(kiln_glsl_translator(g), KILN_GENERATOR_DEFAULT_SEED, index, &p);
        if (o.rc)
            break;
        uint64_t h[2] = {0, 0};
        for (unsigned s = 0; s < p->nstages && s < 2; s++)
            h[s] = module(&o, p->stages[s].words, p->stages[s].nwords);
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
        entry(&o, is_compute ? KILN_FOZ_TAG_COMPUTE_PIPELINE : KILN_FOZ_TAG_GRAPHICS_PIPELINE, pipe,
              json, strlen(json), true);
        kiln_program_destroy(p);
    }
    if (fclose(o.f) != 0 && !o.rc)
        o.rc = KILN_EIO;
    kiln_glsl_destroy(g);
    if (o.rc)
        fprintf(stderr, "fw_write_pipelines: %s: %s\n", path, kiln_strerror(o.rc));
    return o.rc;
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
    struct out o = {.f = fopen(path, "wb")};
    if (!o.f) {
        fprintf(stderr, "fw_write_raytracing: cannot write %s\n", path);
        kiln_program_destroy(p);
        return KILN_EIO;
    }
    static const uint8_t header[16] = {0x81, 'F', 'O', 'S', 'S', 'I', 'L', 'I',
                                       'Z',  'E', 'D', 'B', 0,   0,   0,   6};
    if (fwrite(header, 1, sizeof(header), o.f) != sizeof(header))
        o.rc = KILN_EIO;
    pipeline_objects(&o);
    uint64_t h = module(&o, p->stages[0].words, p->stages[0].nwords);
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
    entry(&o, KILN_FOZ_TAG_RAYTRACING_PIPELINE, hash, json, strlen(json), false);
    if (fclose(o.f) != 0 && !o.rc)
        o.rc = KILN_EIO;
    if (o.rc)
        fprintf(stderr, "fw_write_raytracing: %s: %s\n", path, kiln_strerror(o.rc));
    return o.rc;
}

/* A compute pipeline entry naming module `mod`. */
static void compute_pipeline(struct out *o, uint64_t pipe, uint64_t mod)
{
    char json[512];
    snprintf(json, sizeof(json),
             "{\"version\":6,\"computePipelines\":{\"%016" PRIx64 "\":{\"flags\":0,"
             "\"stage\":{\"flags\":0,\"stage\":32,\"module\":\"%016" PRIx64
             "\",\"name\":\"main\"}}}}",
             pipe, mod);
    entry(o, KILN_FOZ_TAG_COMPUTE_PIPELINE, pipe, json, strlen(json), false);
}

int fw_write_modules(const char *path, const struct fw_module *mods, size_t n, uint64_t *hashes)
{
    struct out o = {.f = fopen(path, "wb")};
    if (!o.f) {
        fprintf(stderr, "fw_write_modules: cannot write %s\n", path);
        return KILN_EIO;
    }
    static const uint8_t header[16] = {0x81, 'F', 'O', 'S', 'S', 'I', 'L', 'I',
                                       'Z',  'E', 'D', 'B', 0,   0,   0,   6};
    if (fwrite(header, 1, sizeof(header), o.f) != sizeof(header))
        o.rc = KILN_EIO;
    for (size_t i = 0; i < n && !o.rc; i++) {
        uint64_t h = module(&o, mods[i].words, mods[i].nwords);
        if (hashes)
            hashes[i] = h;
        compute_pipeline(&o, 0x9000u + i, h);
    }
    if (fclose(o.f) != 0 && !o.rc)
        o.rc = KILN_EIO;
    if (o.rc)
        fprintf(stderr, "fw_write_modules: %s: %s\n", path, kiln_strerror(o.rc));
    return o.rc;
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
