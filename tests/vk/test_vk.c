/*
 * test_vk.c - the vk module against a real driver (lavapipe in CI):
 * pipelines are made, no shader module outlives its create call, a broken
 * program fails alone, and pipelines.vkc round-trips and is refused when it
 * belongs to another device or is damaged.
 *
 * Cases that need Vulkan exit with 77 (ctest SKIP) where there is none.
 */
#define VK_NO_PROTOTYPES
#include <vulkan/vulkan.h>

#include "vk_internal.h"
#include "kt_vkalloc.h"
#include "vk_shaders.h"
#ifndef _WIN32
#include "kt_vklayer.h"
#else
/* The layer through the environment is POSIX only (tests/CMakeLists.txt). */
static bool kt_validation_begin(const char *dir, char *log, size_t cap)
{
    (void)dir, (void)log, (void)cap;
    return false;
}
static void kt_validation_end(void)
{
}
static int kt_validation_errors(const char *log)
{
    (void)log;
    return 0;
}
#endif

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

static int build_compute(struct kiln_vk *vk, unsigned variant, struct kiln_vk_pipeline **p)
{
    struct vkt_blob b;
    if (vkt_make(VKT_COMPUTE, variant, &b) < 0)
        return -1;
    struct kiln_vk_stage st = {.size = sizeof(st), .blob = b.blob, .blob_size = b.size};
    int rc = kiln_vk_compute_pipeline(vk, "test-compute", &st, p);
    vkt_free(&b);
    return rc;
}

static int build_graphics(struct kiln_vk *vk, unsigned variant, uint32_t format,
                          struct kiln_vk_pipeline **p)
{
    struct vkt_blob v, f;
    if (vkt_make(VKT_VERTEX, variant, &v) < 0)
        return -1;
    if (vkt_make(VKT_FRAGMENT, variant, &f) < 0) {
        vkt_free(&v);
        return -1;
    }
    struct kiln_vk_graphics g = {
        .size = sizeof(g),
        .vertex = &(struct kiln_vk_stage){.size = sizeof(struct kiln_vk_stage),
                                          .blob = v.blob,
                                          .blob_size = v.size},
        .fragment = &(struct kiln_vk_stage){.size = sizeof(struct kiln_vk_stage),
                                            .blob = f.blob,
                                            .blob_size = f.size},
        .color_format = format,
    };
    int rc = kiln_vk_graphics_pipeline(vk, "test-graphics", &g, p);
    vkt_free(&v);
    vkt_free(&f);
    return rc;
}

KT_CASE(not_available_without_loader)
{
    vkt_capture_log(true);
    struct kiln_vk *vk = (struct kiln_vk *)&vk;
    struct kiln_vk_options opt = {.size = sizeof(opt),
                                  .loader = "libkiln-no-such-vulkan-loader.so.1"};
    KT_CHECK_EQ(kiln_vk_create(&opt, &vk), KILN_ENOTSUP);
    KT_CHECK(vk == NULL);
    KT_CHECK(strstr(vkt_log(), "Vulkan not available: could not load "
                               "libkiln-no-such-vulkan-loader.so.1") != NULL);
    vkt_capture_log(false);
    kiln_vk_destroy(NULL);
}

KT_CASE(compute_and_graphics)
{
    struct kiln_vk *vk = vkt_context(NULL);
    KT_REQUIRE(vk);
    const struct kiln_vk_info *in = kiln_vk_get_info(vk);
    fprintf(stderr, "device %u/%u: %s [%s], maintenance5 %d, chained %d, dynamic rendering %d\n",
            in->device_index, in->device_count, in->device_name, in->driver_info, in->maintenance5,
            in->chained_stages, in->dynamic_rendering);
    KT_CHECK(in->device_count >= 1);
    KT_CHECK(in->api_version >= VK_API_VERSION_1_1);
    KT_CHECK_EQ(in->cache_state, KILN_VK_CACHE_MEMORY);

    struct kiln_vk_stats s = KILN_VK_STATS_INIT;
    struct kiln_vk_pipeline *c = NULL, *g = NULL, *g16 = NULL;
    KT_CHECK_OK(build_compute(vk, 1, &c));
    KT_CHECK(c && kiln_vk_pipeline_handle(c) != 0);
    kiln_vk_get_stats(vk, &s);
    KT_CHECK_EQ(s.live_modules, 0);
    KT_CHECK(s.peak_modules <= 1);

    kiln_vk_reset_peak(vk);
    KT_CHECK_OK(build_graphics(vk, 1, 0, &g));
    KT_CHECK(g && kiln_vk_pipeline_handle(g) != 0);
    kiln_vk_get_stats(vk, &s);
    KT_CHECK_EQ(s.live_modules, 0);
    KT_CHECK(s.peak_modules <= 2);

    /* Another color format: a second render pass without dynamic rendering. */
    KT_CHECK_OK(build_graphics(vk, 2, 97 /* VK_FORMAT_R16G16B16A16_SFLOAT */, &g16));
    kiln_vk_get_stats(vk, &s);
    KT_CHECK_EQ(s.pipelines_built, 3);
    KT_CHECK_EQ(s.pipelines_failed, 0);
    KT_CHECK_EQ(s.live_pipelines, 3);
    KT_CHECK_EQ(s.live_modules, 0);
    /* Either every stage made a module or every stage was chained. */
    KT_CHECK_EQ(s.modules_created + s.stages_chained, 5);
    KT_CHECK_EQ(in->chained_stages ? s.modules_created : s.stages_chained, 0);

    kiln_vk_pipeline_destroy(vk, c);
    kiln_vk_pipeline_destroy(vk, NULL);
    kiln_vk_get_stats(vk, &s);
    KT_CHECK_EQ(s.live_pipelines, 2);
    kiln_vk_destroy(vk); /* g and g16 are destroyed with the context */
}

KT_CASE(forced_modules)
{
    struct kiln_vk_options opt = {.size = sizeof(opt), .force_modules = true};
    struct kiln_vk *vk = vkt_context(&opt);
    KT_REQUIRE(vk);
    KT_CHECK(!kiln_vk_get_info(vk)->chained_stages);
    struct kiln_vk_pipeline *c = NULL, *g = NULL;
    KT_CHECK_OK(build_compute(vk, 3, &c));
    KT_CHECK_OK(build_graphics(vk, 3, 0, &g));
    struct kiln_vk_stats s = KILN_VK_STATS_INIT;
    kiln_vk_get_stats(vk, &s);
    KT_CHECK_EQ(s.modules_created, 3);
    KT_CHECK_EQ(s.stages_chained, 0);
    KT_CHECK_EQ(s.live_modules, 0);
    KT_CHECK(s.peak_modules >= 1 && s.peak_modules <= 2);
    kiln_vk_destroy(vk);
}

KT_CASE(graphics_with_render_pass)
{
    struct kiln_vk_options opt = {.size = sizeof(opt), .no_dynamic_rendering = true};
    struct kiln_vk *vk = vkt_context(&opt);
    KT_REQUIRE(vk);
    KT_CHECK(!kiln_vk_get_info(vk)->dynamic_rendering);
    struct kiln_vk_pipeline *a = NULL, *b = NULL, *c = NULL;
    KT_CHECK_OK(build_graphics(vk, 5, 0, &a));
    KT_CHECK_OK(build_graphics(vk, 6, 0, &b)); /* reuses the render pass */
    KT_CHECK_OK(build_graphics(vk, 7, 44 /* VK_FORMAT_B8G8R8A8_UNORM */, &c));
    KT_CHECK(a && b && c);
    struct kiln_vk_stats s = KILN_VK_STATS_INIT;
    kiln_vk_get_stats(vk, &s);
    KT_CHECK_EQ(s.pipelines_built, 3);
    KT_CHECK_EQ(s.live_modules, 0);
    kiln_vk_destroy(vk);
}

KT_CASE(broken_program_fails_alone)
{
    struct kiln_vk_options opt = {.size = sizeof(opt), .no_pipeline_cache = true};
    struct kiln_vk *vk = vkt_context(&opt);
    KT_REQUIRE(vk);
    KT_CHECK_EQ(kiln_vk_get_info(vk)->cache_state, KILN_VK_CACHE_OFF);
    struct vkt_blob good;
    KT_REQUIRE(vkt_make(VKT_COMPUTE, 4, &good) == 0);
    uint64_t seed = 7;
    vkt_capture_log(true);

    /* 1. A valid header and instruction stream of garbage opcodes: only the
     * driver can tell, and refuses the pipeline. */
    uint32_t *w = malloc(good.nwords * 4);
    KT_REQUIRE(w);
    memcpy(w, good.words, 5 * 4);
    for (size_t i = 5; i < good.nwords; i++)
        w[i] = 1u << 16 | (uint32_t)(kt_rand(&seed) % 400);
    struct vkt_blob garbage_ops;
    KT_REQUIRE(vkt_pack_words(w, good.nwords, &garbage_ops) == 0);
    struct kiln_vk_pipeline *p = NULL;
    struct kiln_vk_stage st = {
        .size = sizeof(st), .blob = garbage_ops.blob, .blob_size = garbage_ops.size};
    int rc_ops = kiln_vk_compute_pipeline(vk, "broken-ops", &st, &p);
    KT_CHECK(rc_ops == KILN_EVULKAN || rc_ops == KILN_OK); /* a driver may accept it */
    if (rc_ops == KILN_EVULKAN) {
        KT_CHECK(p == NULL);
        KT_CHECK(strstr(vkt_log(), "broken-ops: compute pipeline: vkCreateComputePipelines "
                                   "failed: VK_") != NULL);
    }
    kiln_vk_pipeline_destroy(vk, p);

    /* 2. Garbage words after a valid header: refused before the driver. */
    for (size_t i = 5; i < good.nwords; i++)
        w[i] = (uint32_t)kt_rand(&seed);
    struct vkt_blob garbage;
    KT_REQUIRE(vkt_pack_words(w, good.nwords, &garbage) == 0);
    st = (struct kiln_vk_stage){
        .size = sizeof(struct kiln_vk_stage), .blob = garbage.blob, .blob_size = garbage.size};
    KT_CHECK_EQ(kiln_vk_compute_pipeline(vk, "broken-words", &st, &p), KILN_EFORMAT);
    KT_CHECK(strstr(vkt_log(), "broken-words: compute stage: not valid SPIR-V") != NULL);
    /* The context's error text: the function, the pipeline, the code. */
    const char *text = kiln_vk_errmsg(vk);
    KT_CHECK(strstr(text, "kiln_vk_compute_pipeline: ") == text);
    KT_CHECK(strstr(text, "broken-words: compute stage: not valid SPIR-V") != NULL);
    KT_CHECK(strstr(text, "(KILN_EFORMAT)") != NULL);

    /* 3. A blob that does not unpack (cut short). */
    st = (struct kiln_vk_stage){
        .size = sizeof(struct kiln_vk_stage), .blob = good.blob, .blob_size = good.size / 2};
    KT_CHECK(kiln_vk_compute_pipeline(vk, "broken-blob", &st, &p) < 0);
    KT_CHECK(strstr(vkt_log(), "broken-blob: compute stage: could not unpack its blob") != NULL);

    /* 4. A graphics pipeline whose fragment stage is broken: the vertex
     * stage's module is released too. */
    struct vkt_blob v;
    KT_REQUIRE(vkt_make(VKT_VERTEX, 4, &v) == 0);
    struct kiln_vk_graphics g = {
        .size = sizeof(g),
        .vertex = &(struct kiln_vk_stage){.size = sizeof(struct kiln_vk_stage),
                                          .blob = v.blob,
                                          .blob_size = v.size},
        .fragment = &(struct kiln_vk_stage){.size = sizeof(struct kiln_vk_stage),
                                            .blob = garbage.blob,
                                            .blob_size = garbage.size},
    };
    KT_CHECK_EQ(kiln_vk_graphics_pipeline(vk, "broken-frag", &g, &p), KILN_EFORMAT);
    KT_CHECK(strstr(vkt_log(), "broken-frag: fragment stage: not valid SPIR-V") != NULL);
    vkt_capture_log(false);
    KT_CHECK(strstr(kiln_vk_errmsg(vk), "kiln_vk_graphics_pipeline: ") != NULL);
    KT_CHECK(strstr(kiln_vk_errmsg(vk), "broken-frag") != NULL);

    struct kiln_vk_stats s = KILN_VK_STATS_INIT;
    kiln_vk_get_stats(vk, &s);
    KT_CHECK_EQ(s.live_modules, 0);
    KT_CHECK_EQ(s.pipelines_failed, 3 + (rc_ops == KILN_EVULKAN));
    KT_CHECK_EQ(s.pipelines_built, rc_ops == KILN_OK);

    /* The next pipeline builds. */
    st = (struct kiln_vk_stage){
        .size = sizeof(struct kiln_vk_stage), .blob = good.blob, .blob_size = good.size};
    KT_CHECK_OK(kiln_vk_compute_pipeline(vk, "good-after", &st, &p));
    KT_CHECK(p != NULL);
    KT_CHECK(strstr(kiln_vk_errmsg(vk), "broken-frag") != NULL); /* a success leaves it */
    kiln_vk_get_stats(vk, &s);
    KT_CHECK_EQ(s.live_modules, 0);
    KT_CHECK(s.peak_modules <= 2);

    free(w);
    vkt_free(&v);
    vkt_free(&garbage);
    vkt_free(&garbage_ops);
    vkt_free(&good);
    kiln_vk_destroy(vk);
}

KT_CASE(keep_modules_mode)
{
    struct kiln_vk_options opt = {.size = sizeof(opt), .no_pipeline_cache = true};
    struct kiln_vk *vk = vkt_context(&opt);
    KT_REQUIRE(vk);
    enum { N = 4 };
    struct kiln_vk_module *mods[N][2];
    for (unsigned i = 0; i < N; i++) {
        struct vkt_blob v, f;
        KT_REQUIRE(vkt_make(VKT_VERTEX, 10 + i, &v) == 0);
        KT_REQUIRE(vkt_make(VKT_FRAGMENT, 10 + i, &f) == 0);
        struct kiln_vk_stage sv = {.size = sizeof(sv), .blob = v.blob, .blob_size = v.size};
        struct kiln_vk_stage sf = {.size = sizeof(sf), .blob = f.blob, .blob_size = f.size};
        KT_CHECK_OK(kiln_vk_module_create(vk, "kept", &sv, &mods[i][0]));
        KT_CHECK_OK(kiln_vk_module_create(vk, "kept", &sf, &mods[i][1]));
        vkt_free(&v);
        vkt_free(&f);
    }
    struct kiln_vk_stats s = KILN_VK_STATS_INIT;
    kiln_vk_get_stats(vk, &s);
    KT_CHECK_EQ(s.live_modules, 2 * N);
    KT_CHECK_EQ(s.peak_modules, 2 * N);

    for (unsigned i = 0; i < N; i++) {
        struct kiln_vk_graphics g = {
            .size = sizeof(g),
            .vertex =
                &(struct kiln_vk_stage){.size = sizeof(struct kiln_vk_stage), .module = mods[i][0]},
            .fragment = &(struct kiln_vk_stage){.size = sizeof(struct kiln_vk_stage),
                                                .module = mods[i][1]}};
        struct kiln_vk_pipeline *p = NULL;
        KT_CHECK_OK(kiln_vk_graphics_pipeline(vk, "from-kept", &g, &p));
        kiln_vk_pipeline_destroy(vk, p);
    }
    kiln_vk_get_stats(vk, &s);
    KT_CHECK_EQ(s.live_modules, 2 * N); /* kept: still alive */
    KT_CHECK_EQ(s.modules_created, 2 * N);
    KT_CHECK_EQ(s.pipelines_built, N);
    for (unsigned i = 0; i < N - 1; i++) {
        kiln_vk_module_destroy(vk, mods[i][0]);
        kiln_vk_module_destroy(vk, mods[i][1]);
    }
    kiln_vk_get_stats(vk, &s);
    KT_CHECK_EQ(s.live_modules, 2);
    kiln_vk_destroy(vk); /* the last pair goes with the context */
}

static bool file_exists(const char *path, off_t *size)
{
    struct stat st;
    if (stat(path, &st) != 0)
        return false;
    *size = st.st_size;
    return true;
}

/* Rewrites pipelines.vkc in `dir` through `edit`. */
static void edit_cache_file(const char *dir, void (*edit)(unsigned char *data, size_t *n))
{
    char path[1100];
    snprintf(path, sizeof(path), "%.1024s/%s", dir, KILN_VK_CACHE_FILE);
    void *data;
    size_t n;
    if (kiln_io_read_file(kiln_io_default(), path, 1u << 30, &data, &n) < 0) {
        kt_fail(__FILE__, __LINE__, "could not read %s", path);
        return;
    }
    edit(data, &n);
    if (kiln_io_replace_file(kiln_io_default(), path, data, n) < 0)
        kt_fail(__FILE__, __LINE__, "could not write %s", path);
    free(data);
}

static void flip_uuid(unsigned char *d, size_t *n)
{
    (void)n;
    d[16] ^= 0xff;
}

static void cut_short(unsigned char *d, size_t *n)
{
    (void)d;
    *n = 10;
}

static void bad_header_length(unsigned char *d, size_t *n)
{
    kiln__store_le32(d, (uint32_t)*n + 1);
}

KT_CASE(pipeline_cache_round_trip)
{
    char dir[1024], path[1100];
    snprintf(dir, sizeof(dir), "%s", kt_tmpdir());
    snprintf(path, sizeof(path), "%.1024s/%s", dir, KILN_VK_CACHE_FILE);
    struct kiln_vk_options opt = {.size = sizeof(opt), .cache_dir = dir};

    struct kiln_vk *vk = vkt_context(&opt);
    KT_REQUIRE(vk);
    KT_CHECK_EQ(kiln_vk_get_info(vk)->cache_state, KILN_VK_CACHE_NEW);
    struct kiln_vk_pipeline *p;
    KT_CHECK_OK(build_compute(vk, 20, &p));
    KT_CHECK_OK(build_graphics(vk, 20, 0, &p));
    KT_CHECK_OK(kiln_vk_cache_save(vk));
    kiln_vk_destroy(vk);
    off_t size = 0;
    KT_REQUIRE(file_exists(path, &size));
    KT_CHECK(size >= 32);
    char tmp[1200];
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    off_t tmp_size;
    KT_CHECK(!file_exists(tmp, &tmp_size)); /* the temporary name was renamed away */

    /* A second context loads it and builds the same pipelines from it. */
    vk = vkt_context(&opt);
    KT_REQUIRE(vk);
    KT_CHECK_EQ(kiln_vk_get_info(vk)->cache_state, KILN_VK_CACHE_LOADED);
    KT_CHECK_EQ(kiln_vk_get_info(vk)->cache_loaded_bytes, (size_t)size);
    KT_CHECK_EQ(kiln_vk_get_info(vk)->cache_note[0], '\0');
    KT_CHECK_OK(build_compute(vk, 20, &p));
    KT_CHECK_OK(build_graphics(vk, 20, 0, &p));
    KT_CHECK_OK(kiln_vk_cache_save(vk));
    kiln_vk_destroy(vk);

    /* Another driver build's UUID: refused with the reason, cache empty. */
    edit_cache_file(dir, flip_uuid);
    vkt_capture_log(true);
    vk = vkt_context(&opt);
    KT_REQUIRE(vk);
    KT_CHECK_EQ(kiln_vk_get_info(vk)->cache_state, KILN_VK_CACHE_REJECTED);
    KT_CHECK_EQ(kiln_vk_get_info(vk)->cache_loaded_bytes, 0);
    KT_CHECK(strstr(kiln_vk_get_info(vk)->cache_note, "pipelineCacheUUID differs") != NULL);
    KT_CHECK(strstr(vkt_log(), "pipelines.vkc: not used: pipelineCacheUUID differs") != NULL);
    KT_CHECK_OK(build_compute(vk, 21, &p)); /* the context works on */
    kiln_vk_destroy(vk);

    /* A header length past the end of the file. */
    edit_cache_file(dir, bad_header_length);
    vk = vkt_context(&opt);
    KT_REQUIRE(vk);
    KT_CHECK_EQ(kiln_vk_get_info(vk)->cache_state, KILN_VK_CACHE_REJECTED);
    KT_CHECK(strstr(kiln_vk_get_info(vk)->cache_note, "header length") != NULL);
    kiln_vk_destroy(vk);

    /* A torn file. */
    edit_cache_file(dir, cut_short);
    vk = vkt_context(&opt);
    KT_REQUIRE(vk);
    KT_CHECK_EQ(kiln_vk_get_info(vk)->cache_state, KILN_VK_CACHE_REJECTED);
    KT_CHECK(strstr(kiln_vk_get_info(vk)->cache_note, "10 bytes, shorter than a pipeline cache "
                                                      "header") != NULL);
    /* Saving replaces the bad file with a good one. */
    KT_CHECK_OK(build_compute(vk, 22, &p));
    KT_CHECK_OK(kiln_vk_cache_save(vk));
    kiln_vk_destroy(vk);
    vkt_capture_log(false);
    vk = vkt_context(&opt);
    KT_REQUIRE(vk);
    KT_CHECK_EQ(kiln_vk_get_info(vk)->cache_state, KILN_VK_CACHE_LOADED);
    kiln_vk_destroy(vk);

    /* No cache folder: nothing to save to. */
    vk = vkt_context(NULL);
    KT_REQUIRE(vk);
    KT_CHECK_EQ(kiln_vk_cache_save(vk), KILN_EINVAL);
    kiln_vk_destroy(vk);
}

KT_CASE(device_index)
{
    struct kiln_vk *vk = vkt_context(NULL);
    KT_REQUIRE(vk);
    uint32_t count = kiln_vk_get_info(vk)->device_count;
    kiln_vk_destroy(vk);

    struct kiln_vk_options opt = {.size = sizeof(opt), .use_device_index = true, .device = count};
    vkt_capture_log(true);
    KT_CHECK_EQ(kiln_vk_create(&opt, &vk), KILN_EINVAL);
    KT_CHECK(strstr(vkt_log(), "asked for") != NULL);
    vkt_capture_log(false);
    opt.device = 0;
    vk = vkt_context(&opt);
    KT_REQUIRE(vk);
    KT_CHECK_EQ(kiln_vk_get_info(vk)->device_index, 0);
    struct kiln_vk_handles h = KILN_VK_HANDLES_INIT;
    kiln_vk_get_handles(vk, &h);
    KT_CHECK(h.device != VK_NULL_HANDLE && h.pipeline_layout != VK_NULL_HANDLE);
    KT_CHECK(h.queue != VK_NULL_HANDLE && h.get_instance_proc_addr != NULL);
    kiln_vk_destroy(vk);
}

/* ---- pure checks (no driver) ---------------------------------------------- */

KT_CASE(cache_header_check)
{
    uint8_t uuid[VK_UUID_SIZE];
    for (unsigned i = 0; i < VK_UUID_SIZE; i++)
        uuid[i] = (uint8_t)(i * 7);
    unsigned char h[64] = {0};
    kiln__store_le32(h, 32);
    kiln__store_le32(h + 4, VK_PIPELINE_CACHE_HEADER_VERSION_ONE);
    kiln__store_le32(h + 8, 0x10de);
    kiln__store_le32(h + 12, 0x2335);
    memcpy(h + 16, uuid, VK_UUID_SIZE);
    char why[256];
    KT_CHECK_OK(kiln__vk_cache_check(h, sizeof(h), 0x10de, 0x2335, uuid, why, sizeof(why)));
    KT_CHECK_OK(kiln__vk_cache_check(h, 32, 0x10de, 0x2335, uuid, why, sizeof(why)));
    KT_CHECK_EQ(kiln__vk_cache_check(h, 31, 0x10de, 0x2335, uuid, why, sizeof(why)),
                KILN_ECORRUPT_HEADER);
    KT_CHECK(strstr(why, "31 bytes") != NULL);
    KT_CHECK_EQ(kiln__vk_cache_check(h, sizeof(h), 0x1002, 0x2335, uuid, why, sizeof(why)),
                KILN_ECORRUPT_HEADER);
    KT_CHECK(strstr(why, "written for device 10de:2335, this is 1002:2335") != NULL);
    KT_CHECK_EQ(kiln__vk_cache_check(h, sizeof(h), 0x10de, 0x2336, uuid, why, sizeof(why)),
                KILN_ECORRUPT_HEADER);
    kiln__store_le32(h + 4, 2);
    KT_CHECK_EQ(kiln__vk_cache_check(h, sizeof(h), 0x10de, 0x2335, uuid, why, sizeof(why)),
                KILN_ECORRUPT_HEADER);
    KT_CHECK(strstr(why, "header version 2") != NULL);
    kiln__store_le32(h + 4, 1);
    kiln__store_le32(h, 16);
    KT_CHECK_EQ(kiln__vk_cache_check(h, sizeof(h), 0x10de, 0x2335, uuid, why, sizeof(why)),
                KILN_ECORRUPT_HEADER);
    kiln__store_le32(h, 32);
    h[31] ^= 1;
    KT_CHECK_EQ(kiln__vk_cache_check(h, sizeof(h), 0x10de, 0x2335, uuid, why, sizeof(why)),
                KILN_ECORRUPT_HEADER);
    KT_CHECK(strstr(why, "pipelineCacheUUID") != NULL);
}

KT_CASE(spirv_check)
{
    uint32_t w[8] = {0x07230203, 0x00010000, 0, 8, 0, 2u << 16 | 17, 1, 1u << 16 | 253};
    char why[160];
    KT_CHECK_OK(kiln_spirv_check_words(w, 8, why, sizeof(why)));
    KT_CHECK_OK(kiln_spirv_check_words(w, 5, why, sizeof(why))); /* a header alone */
    KT_CHECK_EQ(kiln_spirv_check_words(w, 4, why, sizeof(why)), KILN_EFORMAT);
    KT_CHECK_EQ(kiln_spirv_check_words(w, 6, why, sizeof(why)),
                KILN_EFORMAT); /* cut in an instruction */
    KT_CHECK(strstr(why, "runs past the end") != NULL);
    w[7] = 17; /* word count 0 */
    KT_CHECK_EQ(kiln_spirv_check_words(w, 8, why, sizeof(why)), KILN_EFORMAT);
    KT_CHECK(strstr(why, "length 0") != NULL);
    w[0] = 0x03022307; /* byte-swapped */
    KT_CHECK_EQ(kiln_spirv_check_words(w, 8, why, sizeof(why)), KILN_EFORMAT);
    KT_CHECK(strcmp(kiln_vk_result_name(VK_ERROR_OUT_OF_HOST_MEMORY),
                    "VK_ERROR_OUT_OF_HOST_MEMORY") == 0);
    KT_CHECK(strcmp(kiln_vk_result_name(12345), "VK_?") == 0);
}

/* The resource interface read from SPIR-V: every descriptor type kiln
 * names, arrays, set and binding numbers, the push-constant size with
 * matrix padding; damaged words are refused, not read past. Needs no
 * device. */
KT_CASE(spirv_reflect)
{
    static const char comp[] =
        "#version 450\n"
        "layout(local_size_x = 1) in;\n"
        "layout(set = 0, binding = 0) buffer B { uint data[]; };\n"
        "layout(set = 1, binding = 2) uniform U { vec4 u; };\n"
        "layout(set = 0, binding = 3, rgba8) uniform readonly image2D img;\n"
        "layout(set = 2, binding = 0) uniform sampler2D tex;\n"
        "layout(set = 2, binding = 1) uniform texture2D t2;\n"
        "layout(set = 2, binding = 2) uniform sampler smp;\n"
        "layout(set = 2, binding = 3) uniform samplerBuffer ub;\n"
        "layout(set = 2, binding = 4, r32f) uniform readonly imageBuffer sb;\n"
        "layout(set = 3, binding = 5) buffer Arr { uint x; } arr[4];\n"
        "layout(push_constant) uniform P { mat3 m; vec3 v; float f; };\n"
        "void main() {\n"
        "  vec4 s = texture(tex, vec2(0)) + texture(sampler2D(t2, smp), vec2(0))\n"
        "         + texelFetch(ub, 0) + imageLoad(sb, 0) + imageLoad(img, ivec2(0)) + u;\n"
        "  data[0] = uint(s.x + m[0][0] + v.x + f) + arr[1].x;\n"
        "}\n";
    struct vkt_blob b;
    KT_REQUIRE(vkt_compile(VKT_COMPUTE, comp, &b) == 0);
    struct kiln__spirv_iface f;
    char why[160];
    KT_REQUIRE_OK(kiln__spirv_reflect(b.words, b.nwords, &f, why, sizeof(why)));
    struct {
        uint32_t set, binding;
        int type;
    } want[] = {
        {0, 0, VK_DESCRIPTOR_TYPE_STORAGE_BUFFER},
        {1, 2, VK_DESCRIPTOR_TYPE_UNIFORM_BUFFER},
        {0, 3, VK_DESCRIPTOR_TYPE_STORAGE_IMAGE},
        {2, 0, VK_DESCRIPTOR_TYPE_COMBINED_IMAGE_SAMPLER},
        {2, 1, VK_DESCRIPTOR_TYPE_SAMPLED_IMAGE},
        {2, 2, VK_DESCRIPTOR_TYPE_SAMPLER},
        {2, 3, VK_DESCRIPTOR_TYPE_UNIFORM_TEXEL_BUFFER},
        {2, 4, VK_DESCRIPTOR_TYPE_STORAGE_TEXEL_BUFFER},
        {3, 5, VK_DESCRIPTOR_TYPE_STORAGE_BUFFER},
    };
    KT_CHECK_EQ(f.nbindings, KILN_ARRAY_LEN(want));
    for (size_t i = 0; i < KILN_ARRAY_LEN(want); i++) {
        bool found = false;
        for (uint32_t k = 0; k < f.nbindings; k++)
            if (f.bindings[k].set == want[i].set && f.bindings[k].binding == want[i].binding) {
                found = true;
                KT_CHECK_EQ(f.bindings[k].type, want[i].type);
                KT_CHECK_EQ(f.bindings[k].count, want[i].set == 3 ? 4u : 1u); /* arr[4] */
            }
        KT_CHECK(found);
    }
    KT_CHECK(f.has_push && f.push_known);
    KT_CHECK_EQ(f.push_bytes, 64); /* mat3: 3 columns of 16; vec3 at 48; float at 60 */
    KT_CHECK(
        strcmp(kiln__descriptor_type_name(VK_DESCRIPTOR_TYPE_STORAGE_IMAGE), "storage image") == 0);

    /* Damage: an instruction past the end, an absurd id bound, not SPIR-V. */
    uint32_t *w = malloc(b.nwords * 4);
    KT_REQUIRE(w);
    memcpy(w, b.words, b.nwords * 4);
    w[b.nwords - 1] = 2u << 16 | 56u; /* OpFunctionEnd claiming two words */
    KT_CHECK_EQ(kiln__spirv_reflect(w, b.nwords, &f, why, sizeof(why)), KILN_EFORMAT);
    KT_CHECK(strstr(why, "runs past the end") != NULL);
    w[b.nwords - 1] = b.words[b.nwords - 1];
    w[3] = 0xffffffffu;
    KT_CHECK_EQ(kiln__spirv_reflect(w, b.nwords, &f, why, sizeof(why)), KILN_EFORMAT);
    KT_CHECK(strstr(why, "id bound") != NULL);
    w[3] = b.words[3];
    w[0] = 0;
    KT_CHECK_EQ(kiln__spirv_reflect(w, b.nwords, &f, why, sizeof(why)), KILN_EFORMAT);
    free(w);
    vkt_free(&b);

    /* An input attachment, and a module with no resources at all. */
    static const char frag[] = "#version 450\n"
                               "layout(input_attachment_index = 0, set = 0, binding = 1)\n"
                               "  uniform subpassInput inp;\n"
                               "layout(location = 0) out vec4 o;\n"
                               "void main() { o = subpassLoad(inp); }\n";
    KT_REQUIRE(vkt_compile(VKT_FRAGMENT, frag, &b) == 0);
    KT_REQUIRE_OK(kiln__spirv_reflect(b.words, b.nwords, &f, why, sizeof(why)));
    KT_REQUIRE(f.nbindings == 1);
    KT_CHECK_EQ(f.bindings[0].type, VK_DESCRIPTOR_TYPE_INPUT_ATTACHMENT);
    KT_CHECK(!f.has_push);
    vkt_free(&b);
}

/* Compiles `src` as a compute stage and asks kiln_vk_compute_pipeline for
 * it: refused with KILN_ENOTSUP, and the one warning line has `line`. */
static void check_refused(struct kiln_vk *vk, const char *src, const char *line)
{
    struct vkt_blob b;
    KT_REQUIRE(vkt_compile(VKT_COMPUTE, src, &b) == 0);
    struct kiln_vk_stage s = {.size = sizeof(s), .blob = b.blob, .blob_size = b.size};
    struct kiln_vk_pipeline *p = NULL;
    vkt_capture_log(true);
    KT_CHECK_EQ(kiln_vk_compute_pipeline(vk, "refused", &s, &p), KILN_ENOTSUP);
    if (!strstr(vkt_log(), line))
        kt_fail(__FILE__, __LINE__, "log has not \"%s\": %s", line, vkt_log());
    vkt_capture_log(false);
    KT_CHECK(p == NULL);
    vkt_free(&b);
}

/* A stage of kiln's own shapes whose interface kiln's layout does not hold
 * is refused before the driver (one line naming the program, the binding
 * and both sides), counted as failed, and the next one builds. Such a
 * create call is invalid usage, and lavapipe crashes in it now and then:
 * a binding the layout lacks altogether is refused as well as a mismatch. */
KT_CASE(builtin_layout_checked)
{
    struct kiln_vk *vk = vkt_context(NULL);
    KT_REQUIRE(vk);
#define COMPUTE_HEAD "#version 450\nlayout(local_size_x = 1) in;\n"
    static const char image[] =
        COMPUTE_HEAD "layout(set = 0, binding = 0, rgba8) uniform writeonly image2D i;\n"
                     "void main() { imageStore(i, ivec2(0), vec4(1.0)); }\n";
    check_refused(vk, image,
                  "refused: compute stage: refused: set 0 binding 0 is a storage image in the "
                  "shader and a storage buffer in kiln's layout");
    static const char extra[] =
        COMPUTE_HEAD "layout(set = 0, binding = 0) buffer B { uint data[]; };\n"
                     "layout(set = 0, binding = 2) uniform U { uint u; };\n"
                     "void main() { data[0] = u; }\n";
    check_refused(vk, extra,
                  "refused: compute stage: refused: set 0 binding 2 (a uniform buffer) is in the "
                  "shader and not in kiln's layout");
    static const char other_set[] =
        COMPUTE_HEAD "layout(set = 1, binding = 0) buffer B { uint data[]; };\n"
                     "void main() { data[0] = 1u; }\n";
    check_refused(vk, other_set, "set 1 binding 0 (a storage buffer) is in the shader and not");
    static const char array[] =
        COMPUTE_HEAD "layout(set = 0, binding = 0) buffer B { uint data[]; } b[3];\n"
                     "void main() { b[2].data[0] = 1u; }\n";
    check_refused(vk, array,
                  "set 0 binding 0 is an array of 3 storage buffers in the shader and one "
                  "storage buffer in kiln's layout");
    static const char push[] =
        COMPUTE_HEAD "layout(set = 0, binding = 0) buffer B { uint data[]; };\n"
                     "layout(push_constant) uniform P { uvec4 a, b; };\n"
                     "void main() { data[0] = a.x + b.y; }\n";
    check_refused(vk, push, "refused: 32 bytes of push constants in the shader and 16 bytes");
#undef COMPUTE_HEAD

    struct vkt_blob bad, good;
    KT_REQUIRE(vkt_compile(VKT_COMPUTE, image, &bad) == 0);
    KT_REQUIRE(vkt_make(VKT_COMPUTE, 1, &good) == 0);
    struct kiln_vk_pipeline *p = NULL;
    struct kiln_vk_stage s = {.size = sizeof(s), .blob = good.blob, .blob_size = good.size};
    KT_REQUIRE_OK(kiln_vk_compute_pipeline(vk, "good", &s, &p));
    struct kiln_vk_stats st = KILN_VK_STATS_INIT;
    kiln_vk_get_stats(vk, &st);
    KT_CHECK_EQ(st.pipelines_failed, 5);
    KT_CHECK_EQ(st.pipelines_built, 1);
    KT_CHECK_EQ(st.live_modules, 0);

    /* A kept module was checked when it was made: kiln's shapes refuse it
     * the same way, its words long gone. */
    struct kiln_vk_module *kept = NULL;
    s = (struct kiln_vk_stage){
        .size = sizeof(struct kiln_vk_stage), .blob = bad.blob, .blob_size = bad.size};
    KT_REQUIRE_OK(kiln_vk_module_create(vk, "kept", &s, &kept));
    struct kiln_vk_stage by_module = {.size = sizeof(by_module), .module = kept};
    struct kiln_vk_pipeline *q = NULL;
    vkt_capture_log(true);
    KT_CHECK_EQ(kiln_vk_compute_pipeline(vk, "kept", &by_module, &q), KILN_ENOTSUP);
    KT_CHECK(strstr(vkt_log(),
                    "kept: compute stage: refused: set 0 binding 0 is a storage image") != NULL);
    vkt_capture_log(false);
    KT_CHECK(q == NULL);
    kiln_vk_module_destroy(vk, kept);

    /* The same module through kiln_vk_stage_module (a builder's own layout) is
     * not checked: it is the builder's to match. */
    struct kiln_vk_staged staged = KILN_VK_STAGED_INIT;
    s = (struct kiln_vk_stage){
        .size = sizeof(struct kiln_vk_stage), .blob = bad.blob, .blob_size = bad.size};
    KT_CHECK_OK(kiln_vk_stage_module(vk, "imagey", &s, VK_SHADER_STAGE_COMPUTE_BIT, &staged));
    kiln_vk_stage_release(vk, &staged);
    kiln_vk_pipeline_destroy(vk, p);
    vkt_free(&bad);
    vkt_free(&good);
    kiln_vk_destroy(vk);
}

/* With validation on, a stage the driver would have to judge (garbage
 * opcodes in a well-formed stream: lavapipe refuses it, NVIDIA's 580 driver
 * aborts the process on it) is refused by SPIR-V's validator before any
 * driver call, and the next program still builds. */
KT_CASE(validation_refuses_before_the_driver)
{
    struct kiln_vk_options opt = {.size = sizeof(opt), .no_pipeline_cache = true, .validate = true};
    struct kiln_vk *vk = vkt_context(&opt);
    KT_REQUIRE(vk);
    struct vkt_blob good;
    KT_REQUIRE(vkt_make(VKT_COMPUTE, 4, &good) == 0);
    uint64_t seed = 11;
    uint32_t *w = malloc(good.nwords * 4);
    KT_REQUIRE(w);
    memcpy(w, good.words, 5 * 4);
    for (size_t i = 5; i < good.nwords; i++)
        w[i] = 1u << 16 | (uint32_t)(kt_rand(&seed) % 400);
    struct vkt_blob garbage_ops;
    KT_REQUIRE(vkt_pack_words(w, good.nwords, &garbage_ops) == 0);

    vkt_capture_log(true);
    struct kiln_vk_pipeline *p = NULL;
    struct kiln_vk_stage st = {
        .size = sizeof(st), .blob = garbage_ops.blob, .blob_size = garbage_ops.size};
    KT_CHECK_EQ(kiln_vk_compute_pipeline(vk, "broken-ops", &st, &p), KILN_EFORMAT);
    KT_CHECK(p == NULL);
    KT_CHECK(strstr(vkt_log(), "broken-ops: compute stage: not valid SPIR-V") != NULL);
    vkt_capture_log(false);

    /* A real program passes the validator and builds. */
    st = (struct kiln_vk_stage){
        .size = sizeof(struct kiln_vk_stage), .blob = good.blob, .blob_size = good.size};
    KT_CHECK_OK(kiln_vk_compute_pipeline(vk, "good", &st, &p));
    KT_CHECK(p != NULL);
    kiln_vk_pipeline_destroy(vk, p);

    /* Off again: the check is the cheap structural one only. */
    KT_CHECK_OK(kiln_vk_set_validation(vk, false));
    struct kiln_vk_stats s = KILN_VK_STATS_INIT;
    kiln_vk_get_stats(vk, &s);
    KT_CHECK_EQ(s.live_modules, 0);
    KT_CHECK_EQ(s.pipelines_built, 1);
    free(w);
    vkt_free(&garbage_ops);
    vkt_free(&good);
    kiln_vk_destroy(vk);
}

/* Extra device extensions: each enabled only where offered, with what it
 * depends on; one the device lacks never fails the context. */
KT_CASE(extra_extensions)
{
    static const char *const extra[] = {
        "VK_KHR_pipeline_library",         "VK_EXT_graphics_pipeline_library",
        "VK_KHR_deferred_host_operations", "VK_KHR_acceleration_structure",
        "VK_KHR_ray_tracing_pipeline",     "VK_KILN_no_such_extension"};
    struct kiln_vk_options opt = {.size = sizeof(opt),
                                  .extra_extensions = extra,
                                  .extra_extension_count = sizeof(extra) / sizeof(extra[0])};
    struct kiln_vk *vk = vkt_context(&opt);
    KT_REQUIRE(vk);
    const struct kiln_vk_info *in = kiln_vk_get_info(vk);
    bool lib = kiln_vk_extension_enabled(vk, "VK_KHR_pipeline_library");
    bool gpl = kiln_vk_extension_enabled(vk, "VK_EXT_graphics_pipeline_library");
    bool dho = kiln_vk_extension_enabled(vk, "VK_KHR_deferred_host_operations");
    bool as = kiln_vk_extension_enabled(vk, "VK_KHR_acceleration_structure");
    bool rt = kiln_vk_extension_enabled(vk, "VK_KHR_ray_tracing_pipeline");
    fprintf(stderr, "%s: pipeline library %d, GPL %d, deferred ops %d, AS %d, ray tracing %d\n",
            in->device_name, lib, gpl, dho, as, rt);
    KT_CHECK(!kiln_vk_extension_enabled(vk, "VK_KILN_no_such_extension"));
    KT_CHECK(!kiln_vk_extension_enabled(vk, NULL));
    KT_CHECK_EQ(kiln_vk_extension_enabled(vk, "VK_KHR_maintenance5"), in->maintenance5);
    KT_CHECK(!gpl || lib);
    KT_CHECK(!as || dho);
    KT_CHECK(!rt || as);
    /* lavapipe, the CI's device, offers the graphics pipeline library. */
    if (strstr(in->device_name, "llvmpipe"))
        KT_CHECK(lib && gpl);
    kiln_vk_destroy(vk);

    /* Asked without the extension it depends on, it is left out (kiln's
     * own wish for pipeline libraries turned off: it would add both). */
    opt.extra_extensions = extra + 1;
    opt.extra_extension_count = 1;
    opt.no_pipeline_library = true;
    vk = vkt_context(&opt);
    KT_REQUIRE(vk);
    KT_CHECK(!kiln_vk_extension_enabled(vk, "VK_EXT_graphics_pipeline_library"));
    KT_CHECK(!kiln_vk_extension_enabled(vk, "VK_KHR_pipeline_library"));
    kiln_vk_destroy(vk);
}

/* Extra extensions with a feature structure: each asked for and offered
 * is enabled (with the features it reports: cli_foz.state_extensions_build
 * builds pipelines needing them under the validation layer); one the
 * device lacks, or asked twice, is harmless. */
KT_CASE(extra_extension_features)
{
    static const char *const extra[] = {"VK_EXT_depth_clip_enable",
                                        "VK_EXT_line_rasterization",
                                        "VK_KHR_line_rasterization",
                                        "VK_EXT_provoking_vertex",
                                        "VK_EXT_color_write_enable",
                                        "VK_EXT_extended_dynamic_state3",
                                        "VK_EXT_custom_border_color",
                                        "VK_EXT_vertex_input_dynamic_state",
                                        "VK_EXT_transform_feedback",
                                        "VK_EXT_depth_clip_control",
                                        "VK_EXT_subgroup_size_control",
                                        "VK_KHR_separate_depth_stencil_layouts",
                                        "VK_EXT_vertex_attribute_divisor",
                                        "VK_NV_mesh_shader",
                                        "VK_EXT_mesh_shader",
                                        "VK_KILN_no_such_extension",
                                        "VK_EXT_depth_clip_enable"};
    struct kiln_vk_options opt = {.size = sizeof(opt),
                                  .extra_extensions = extra,
                                  .extra_extension_count = sizeof(extra) / sizeof(extra[0])};
    enum kiln_log_level level = kiln_log_get_level();
    kiln_log_set_level(KILN_LOG_INFO);
    vkt_capture_log(true);
    struct kiln_vk *vk = vkt_context(&opt);
    static char log[8192];
    snprintf(log, sizeof(log), "%s", vkt_log());
    vkt_capture_log(false);
    kiln_log_set_level(level);
    KT_REQUIRE(vk);
    const struct kiln_vk_info *in = kiln_vk_get_info(vk);
    KT_CHECK(!kiln_vk_extension_enabled(vk, "VK_KILN_no_such_extension"));
    /* Nothing else kiln enables went missing. */
    KT_CHECK_EQ(kiln_vk_extension_enabled(vk, "VK_KHR_maintenance5"), in->maintenance5);
    /* A pipeline still builds on the context. */
    struct vkt_blob b;
    KT_REQUIRE(vkt_make(VKT_COMPUTE, 4, &b) == 0);
    struct kiln_vk_pipeline *p = NULL;
    struct kiln_vk_stage st = {.size = sizeof(st), .blob = b.blob, .blob_size = b.size};
    KT_CHECK_OK(kiln_vk_compute_pipeline(vk, "with-extras", &st, &p));
    kiln_vk_pipeline_destroy(vk, p);
    vkt_free(&b);
    if (strstr(in->device_name, "llvmpipe")) {
        /* lavapipe (Mesa 22.3) offers all of these but mesh shading and
         * the KHR line rasterization. */
        for (size_t i = 0; i < 13; i++)
            if (kiln_vk_extension_enabled(vk, extra[i]) !=
                (strcmp(extra[i], "VK_KHR_line_rasterization") != 0))
                kt_fail(__FILE__, __LINE__, "%s: not as expected", extra[i]);
        KT_CHECK(!kiln_vk_extension_enabled(vk, "VK_NV_mesh_shader"));
        KT_CHECK(!kiln_vk_extension_enabled(vk, "VK_EXT_mesh_shader"));
        /* One info line lists what was enabled. */
        KT_CHECK(strstr(log, "extra extensions enabled: VK_EXT_depth_clip_enable "
                             "VK_EXT_line_rasterization VK_EXT_provoking_vertex") != NULL);
    }
    kiln_vk_destroy(vk);
}

/* ---- VkAllocationCallbacks (kiln_vk_options.allocator) ----------------- */

/* kiln's own creates and destroys, seen through its function table: each
 * must pass the context's callbacks. */
static const VkAllocationCallbacks *cb_want;
static atomic_int cb_wrong, cb_seen;
static PFN_vkCreateComputePipelines real_compute;
static PFN_vkCreateGraphicsPipelines real_graphics;
static PFN_vkCreateShaderModule real_module;
static PFN_vkDestroyPipeline real_destroy_pipeline;

static void cb_note(const VkAllocationCallbacks *a)
{
    atomic_fetch_add(&cb_seen, 1);
    if (a != cb_want)
        atomic_fetch_add(&cb_wrong, 1);
}

static VkResult VKAPI_CALL w_compute(VkDevice d, VkPipelineCache pc, uint32_t n,
                                     const VkComputePipelineCreateInfo *ci,
                                     const VkAllocationCallbacks *a, VkPipeline *out)
{
    cb_note(a);
    return real_compute(d, pc, n, ci, a, out);
}

static VkResult VKAPI_CALL w_graphics(VkDevice d, VkPipelineCache pc, uint32_t n,
                                      const VkGraphicsPipelineCreateInfo *ci,
                                      const VkAllocationCallbacks *a, VkPipeline *out)
{
    cb_note(a);
    return real_graphics(d, pc, n, ci, a, out);
}

static VkResult VKAPI_CALL w_module(VkDevice d, const VkShaderModuleCreateInfo *ci,
                                    const VkAllocationCallbacks *a, VkShaderModule *out)
{
    cb_note(a);
    return real_module(d, ci, a, out);
}

static void VKAPI_CALL w_destroy_pipeline(VkDevice d, VkPipeline p, const VkAllocationCallbacks *a)
{
    cb_note(a);
    real_destroy_pipeline(d, p, a);
}

/* Every Vulkan object kiln makes goes through the application's callbacks,
 * and all of them are given back by kiln_vk_destroy. */
KT_CASE(allocation_callbacks)
{
    struct kt_vk_counts counts = {0};
    VkAllocationCallbacks cb = kt_vk_counting_callbacks(&counts);
    struct kiln_vk_options opt = {.size = sizeof(opt), .force_modules = true, .allocator = &cb};
    struct kiln_vk *vk = vkt_context(&opt);
    KT_REQUIRE(vk);
    KT_CHECK(kiln_vk_allocator(vk) != NULL);
    KT_CHECK(kiln_vk_allocator(vk)->pfnAllocation == cb.pfnAllocation);
    KT_CHECK(kiln_vk_allocator(NULL) == NULL);
    long long after_create = atomic_load(&counts.allocs);
    KT_CHECK(after_create > 0); /* the instance, the device, the layouts, the cache */

    cb_want = kiln_vk_allocator(vk);
    real_compute = vk->fn.vkCreateComputePipelines;
    real_graphics = vk->fn.vkCreateGraphicsPipelines;
    real_module = vk->fn.vkCreateShaderModule;
    real_destroy_pipeline = vk->fn.vkDestroyPipeline;
    vk->fn.vkCreateComputePipelines = w_compute;
    vk->fn.vkCreateGraphicsPipelines = w_graphics;
    vk->fn.vkCreateShaderModule = w_module;
    vk->fn.vkDestroyPipeline = w_destroy_pipeline;

    struct kiln_vk_pipeline *c = NULL, *g = NULL;
    KT_CHECK_OK(build_compute(vk, 1, &c));
    KT_CHECK_OK(build_graphics(vk, 1, 0, &g));
    kiln_vk_pipeline_destroy(vk, c);
    /* 2 pipelines made, 3 modules (forced), 1 destroyed here. */
    KT_CHECK(atomic_load(&cb_seen) >= 6);
    KT_CHECK_EQ(atomic_load(&cb_wrong), 0);
    kiln_vk_destroy(vk); /* g too */
    printf("callbacks: %lld allocations (%lld at create), %lld frees\n",
           (long long)atomic_load(&counts.allocs), after_create,
           (long long)atomic_load(&counts.frees));
    KT_CHECK(atomic_load(&counts.allocs) > after_create);
    KT_CHECK_EQ(atomic_load(&counts.live), 0);
    KT_CHECK_EQ(atomic_load(&counts.allocs), atomic_load(&counts.frees));
}

/*
 * A destroyed pipeline is freed once kiln__vk_settle waited on the queue:
 * lavapipe (Mesa 22) only queues vkDestroyPipeline until a submission, and
 * kiln never submits, so a preparation's pipelines lived until the device
 * went. Counted through the application's allocation callbacks (every
 * driver object of the device goes through them). The control is the same
 * context before the settle: the destroyed pipelines' blocks still live. A
 * driver that frees at vkDestroyPipeline has nothing to show (skipped).
 */
KT_CASE(destroyed_pipelines_freed_by_settle)
{
    struct kt_vk_counts counts = {0};
    VkAllocationCallbacks cb = kt_vk_counting_callbacks(&counts);
    struct kiln_vk_options opt = {.size = sizeof(opt), .allocator = &cb};
    struct kiln_vk *vk = vkt_context(&opt);
    KT_REQUIRE(vk);
    enum { BUILDS = 8 };
    struct kiln_vk_pipeline *p = NULL;
    KT_CHECK_OK(build_compute(vk, 40, &p)); /* what a first build leaves is not counted */
    kiln_vk_pipeline_destroy(vk, p);
    KT_CHECK_OK(kiln__vk_settle(vk));
    long long base = atomic_load(&counts.live);
    for (unsigned i = 0; i < BUILDS; i++) {
        p = NULL;
        KT_CHECK_OK(build_compute(vk, 41 + i, &p));
        kiln_vk_pipeline_destroy(vk, p);
    }
    struct timespec pause = {0, 50000000L}; /* time alone frees nothing */
    nanosleep(&pause, NULL);
    long long deferred = atomic_load(&counts.live);
    KT_CHECK_OK(kiln__vk_settle(vk));
    long long settled = atomic_load(&counts.live);
    printf("live driver blocks: %lld before, %lld after %d destroyed pipelines, %lld settled\n",
           base, deferred, BUILDS, settled);
    kiln_vk_destroy(vk);
    KT_CHECK_EQ(atomic_load(&counts.live), 0);
    if (deferred < base + BUILDS) {
        printf("skipped: this driver frees a pipeline at vkDestroyPipeline\n");
        exit(77);
    }
    KT_CHECK(settled < base + BUILDS); /* every destroyed pipeline's object went */
}

/* Builds the graphics pipeline of vertex `vv` and fragment `fv` linked
 * from parts (KILN_VK_LINK_FAST), into *p, with what the link did. */
/* kiln_vk_graphics.link for build_linked (library_parts_ahead sets it). */
static uint32_t g_link = KILN_VK_LINK_FAST;

static int build_linked(struct kiln_vk *vk, unsigned vv, unsigned fv, uint32_t format,
                        struct kiln_vk_link_result *lr, struct kiln_vk_pipeline **p)
{
    struct vkt_blob v, f;
    if (vkt_make(VKT_VERTEX, vv, &v) < 0)
        return -1;
    if (vkt_make(VKT_FRAGMENT, fv, &f) < 0) {
        vkt_free(&v);
        return -1;
    }
    struct kiln_vk_stage vs = {.size = sizeof(vs), .blob = v.blob, .blob_size = v.size};
    struct kiln_vk_stage fs = {.size = sizeof(fs), .blob = f.blob, .blob_size = f.size};
    struct kiln_vk_graphics g = {.size = sizeof(g),
                                 .vertex = &vs,
                                 .fragment = &fs,
                                 .color_format = format,
                                 .link = g_link,
                                 .link_result = lr};
    *lr = (struct kiln_vk_link_result)KILN_VK_LINK_RESULT_INIT;
    int rc = kiln_vk_graphics_pipeline(vk, "test-linked", &g, p);
    vkt_free(&v);
    vkt_free(&f);
    return rc;
}

/* Pipeline libraries (vk_library.c), under the validation layer: a
 * linked pipeline takes each part once per key (two programs sharing a
 * vertex stage and format share three parts; a program sharing nothing
 * builds four), a monolithic one takes none; without the library (the
 * knob) the same call builds monolithically. */
KT_CASE(library_fast_link)
{
    char log[4200];
    bool validated = kt_validation_begin(kt_tmpdir(), log, sizeof(log));
    if (!validated)
        printf("skipped: the validation part (no Khronos validation layer installed)\n");
    struct kiln_vk *vk = vkt_context(NULL);
    KT_REQUIRE(vk);
    const struct kiln_vk_info *in = kiln_vk_get_info(vk);
    if (!in->pipeline_library) {
        kt_validation_end();
        kiln_vk_destroy(vk);
        printf("skipped: the device lacks VK_EXT_graphics_pipeline_library\n");
        exit(77);
    }
    KT_CHECK(kiln_vk_extension_enabled(vk, "VK_KHR_pipeline_library"));
    struct kiln_vk_link_result lr;
    struct kiln_vk_pipeline *a = NULL, *b = NULL, *c = NULL, *m = NULL;
    KT_CHECK_OK(build_linked(vk, 1, 1, 0, &lr, &a));
    KT_CHECK(lr.linked && lr.parts_built == 4 && lr.parts_reused == 0);
    /* The same vertex stage and format: only the fragment part is new. */
    KT_CHECK_OK(build_linked(vk, 1, 2, 0, &lr, &b));
    KT_CHECK(lr.linked && lr.parts_built == 1 && lr.parts_reused == 3);
    /* The negative control: another format and other stages share nothing. */
    KT_CHECK_OK(build_linked(vk, 3, 3, 97 /* VK_FORMAT_R16G16B16A16_SFLOAT */, &lr, &c));
    KT_CHECK(lr.linked && lr.parts_built == 4 && lr.parts_reused == 0);
    /* The optimized (monolithic) build of the first takes no part. */
    KT_CHECK_OK(build_graphics(vk, 1, 0, &m));
    struct kiln_vk_stats s = KILN_VK_STATS_INIT;
    kiln_vk_get_stats(vk, &s);
    KT_CHECK_EQ(s.pipelines_linked, 3);
    KT_CHECK_EQ(s.parts_built, 9);
    KT_CHECK_EQ(s.parts_reused, 3);
    KT_CHECK_EQ(s.live_parts, 9);
    KT_CHECK_EQ(s.live_pipelines, 4);
    KT_CHECK(a && b && c && m);
    kiln_vk_destroy(vk); /* the pipelines, then the parts */
    /* With render passes instead of dynamic rendering, parts link too. */
    struct kiln_vk_options rp = {.size = sizeof(rp), .no_dynamic_rendering = true};
    vk = vkt_context(&rp);
    KT_REQUIRE(vk);
    KT_CHECK_OK(build_linked(vk, 1, 1, 0, &lr, &a));
    KT_CHECK(lr.linked && lr.parts_built == 4);
    KT_CHECK_OK(build_linked(vk, 1, 2, 0, &lr, &b));
    KT_CHECK(lr.linked && lr.parts_reused == 3);
    kiln_vk_destroy(vk);
    if (validated) {
        kt_validation_end();
        KT_CHECK_EQ(kt_validation_errors(log), 0);
    }

    /* Without the library: the same call builds monolithically. */
    struct kiln_vk_options opt = {.size = sizeof(opt), .no_pipeline_library = true};
    vk = vkt_context(&opt);
    KT_REQUIRE(vk);
    KT_CHECK(!kiln_vk_get_info(vk)->pipeline_library);
    KT_CHECK(!kiln_vk_extension_enabled(vk, "VK_EXT_graphics_pipeline_library"));
    KT_CHECK_OK(build_linked(vk, 1, 1, 0, &lr, &a));
    KT_CHECK(!lr.linked && lr.parts_built == 0 && lr.parts_reused == 0);
    kiln_vk_destroy(vk);
}

/* Parts ahead (KILN_VK_LINK_PARTS): the four parts and no pipeline; the
 * fast link of the same stages then builds no part (all four reused). The
 * control: a context without pipeline libraries refuses parts alone. */
KT_CASE(library_parts_ahead)
{
    struct kiln_vk *vk = vkt_context(NULL);
    KT_REQUIRE(vk);
    if (!kiln_vk_get_info(vk)->pipeline_library) {
        kiln_vk_destroy(vk);
        printf("skipped: the device lacks VK_EXT_graphics_pipeline_library\n");
        exit(77);
    }
    struct kiln_vk_link_result lr;
    struct kiln_vk_pipeline *p = NULL;
    g_link = KILN_VK_LINK_PARTS;
    KT_CHECK_OK(build_linked(vk, 5, 5, 0, &lr, &p));
    KT_CHECK(p == NULL && !lr.linked && lr.parts_built == 4 && lr.parts_reused == 0);
    g_link = KILN_VK_LINK_FAST;
    KT_CHECK_OK(build_linked(vk, 5, 5, 0, &lr, &p));
    KT_CHECK(p != NULL && lr.linked && lr.parts_built == 0 && lr.parts_reused == 4);
    struct kiln_vk_stats s = KILN_VK_STATS_INIT;
    kiln_vk_get_stats(vk, &s);
    KT_CHECK_EQ(s.parts_built, 4);
    KT_CHECK_EQ(s.pipelines_linked, 1);
    KT_CHECK_EQ(s.live_pipelines, 1);
    kiln_vk_destroy(vk);
    struct kiln_vk_options opt = {.size = sizeof(opt), .no_pipeline_library = true};
    vk = vkt_context(&opt);
    KT_REQUIRE(vk);
    g_link = KILN_VK_LINK_PARTS;
    p = NULL;
    KT_CHECK_EQ(build_linked(vk, 5, 5, 0, &lr, &p), KILN_ENOTSUP);
    KT_CHECK(p == NULL && lr.parts_built == 0);
    g_link = KILN_VK_LINK_FAST;
    kiln_vk_destroy(vk);
}

/* A compute pipeline of kiln's shapes through kiln_vk_pipeline_create. */
static int create_compute(struct kiln_vk *vk, unsigned variant, uint32_t flags,
                          struct kiln_vk_pipeline **p)
{
    struct vkt_blob b;
    if (vkt_make(VKT_COMPUTE, variant, &b) < 0)
        return -1;
    struct kiln_vk_stage st = {.size = sizeof(st), .blob = b.blob, .blob_size = b.size};
    struct kiln_vk_pipeline_desc d = {
        .size = sizeof(d), .name = "probe", .compute = &st, .flags = flags};
    int rc = kiln_vk_pipeline_create(vk, &d, p);
    vkt_free(&b);
    return rc;
}

/* Ask before compiling: lavapipe has creation feedback and
 * pipelineCreationCacheControl, every pipeline kiln makes carries the
 * driver's feedback, and a probe is answered by the driver. */
KT_CASE(creation_feedback_and_probe)
{
    char dir[1024];
    snprintf(dir, sizeof(dir), "%s", kt_tmpdir());
    struct kiln_vk_options opt = {.size = sizeof(opt), .cache_dir = dir};
    struct kiln_vk *vk = vkt_context(&opt);
    KT_REQUIRE(vk);
    const struct kiln_vk_info *in = kiln_vk_get_info(vk);
    fprintf(stderr, "%s: creation feedback %d, compile probe %d\n", in->device_name,
            in->creation_feedback, in->compile_probe);
    KT_REQUIRE(in->creation_feedback && in->compile_probe);

    /* Feedback on kiln_vk's own creates, summed in the stats. */
    struct kiln_vk_pipeline *c = NULL, *g = NULL, *p = NULL;
    KT_CHECK_OK(build_compute(vk, 30, &c));
    KT_CHECK_OK(build_graphics(vk, 30, 0, &g));
    struct kiln_vk_feedback fc = KILN_VK_FEEDBACK_INIT, fg = KILN_VK_FEEDBACK_INIT;
    KT_CHECK_OK(kiln_vk_pipeline_feedback(c, &fc));
    KT_CHECK_OK(kiln_vk_pipeline_feedback(g, &fg));
    fprintf(stderr, "compute: valid %d hit %d %llu ns; graphics: valid %d hit %d %llu ns\n",
            fc.valid, fc.cache_hit, (unsigned long long)fc.driver_ns, fg.valid, fg.cache_hit,
            (unsigned long long)fg.driver_ns);
    KT_CHECK(fc.valid && fg.valid);
    KT_CHECK(fc.driver_ns > 0 && fg.driver_ns > 0);
    struct kiln_vk_stats s = KILN_VK_STATS_INIT;
    kiln_vk_get_stats(vk, &s);
    KT_CHECK_EQ(s.feedback_pipelines, 2);
    KT_CHECK_EQ(s.feedback_driver_ns, fc.driver_ns + fg.driver_ns);
    KT_CHECK_EQ(s.feedback_cache_hits, (uint64_t)fc.cache_hit + fg.cache_hit);
    KT_CHECK_EQ(kiln_vk_pipeline_feedback(NULL, &fc), KILN_EINVAL);
    KT_CHECK_EQ(kiln_vk_pipeline_feedback(c, NULL), KILN_EINVAL);

    /* The probe, cold (a program the cache never saw) and warm (the
     * program built above, in this very VkPipelineCache). */
    int cold = create_compute(vk, 31, KILN_VK_PIPELINE_NO_COMPILE, &p);
    int warm = create_compute(vk, 30, KILN_VK_PIPELINE_NO_COMPILE, &p);
    fprintf(stderr, "probe: cold %s, warm %s\n", kiln_errname(cold), kiln_errname(warm));
    KT_CHECK_EQ(cold, KILN_ECOMPILE_REQUIRED);
    KT_CHECK(p == NULL);
    /* lavapipe (Mesa 22.3) keeps nothing in a VkPipelineCache: the warm
     * probe is answered "compile required" too, and no create is a cache
     * hit. A driver with a real cache answers the warm probe with a
     * pipeline. */
    bool lavapipe = strstr(in->device_name, "llvmpipe") != NULL;
    if (lavapipe) {
        KT_CHECK_EQ(warm, KILN_ECOMPILE_REQUIRED);
        KT_CHECK(!fc.cache_hit && !fg.cache_hit);
    } else {
        KT_CHECK(warm == KILN_OK || warm == KILN_ECOMPILE_REQUIRED);
    }
    kiln_vk_get_stats(vk, &s);
    KT_CHECK_EQ(s.compile_required, warm == KILN_ECOMPILE_REQUIRED ? 2 : 1);
    KT_CHECK_EQ(s.pipelines_failed, 0); /* an answer, not a failure */
    /* Negative control: without the flag the same program compiles. */
    KT_CHECK_OK(create_compute(vk, 31, 0, &p));
    KT_CHECK(p != NULL);
    kiln_vk_get_stats(vk, &s);
    KT_CHECK_EQ(s.feedback_pipelines, 3);
    /* Neither or both shapes: refused. */
    struct kiln_vk_pipeline_desc d = KILN_VK_PIPELINE_DESC_INIT;
    KT_CHECK_EQ(kiln_vk_pipeline_create(vk, &d, &p), KILN_EINVAL);
    kiln_vk_destroy(vk);
}

KT_MAIN(KT_ENTRY(spirv_reflect), KT_ENTRY(builtin_layout_checked),
        KT_ENTRY(not_available_without_loader), KT_ENTRY(compute_and_graphics),
        KT_ENTRY(forced_modules), KT_ENTRY(graphics_with_render_pass),
        KT_ENTRY(broken_program_fails_alone), KT_ENTRY(validation_refuses_before_the_driver),
        KT_ENTRY(keep_modules_mode), KT_ENTRY(pipeline_cache_round_trip), KT_ENTRY(device_index),
        KT_ENTRY(cache_header_check), KT_ENTRY(spirv_check), KT_ENTRY(extra_extensions),
        KT_ENTRY(extra_extension_features), KT_ENTRY(allocation_callbacks),
        KT_ENTRY(library_fast_link), KT_ENTRY(library_parts_ahead),
        KT_ENTRY(creation_feedback_and_probe), KT_ENTRY(destroyed_pipelines_freed_by_settle))
