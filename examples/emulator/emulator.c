/*
 * emulator.c - how an emulator embeds kiln, in one small program.
 *
 * A run has two halves, as an emulator's life does:
 *   1. play: guest programs are "translated" to SPIR-V on four shader
 *      threads, and each miss is packed and stored in the program cache
 *      (opened with this emulator's own translator stamp);
 *   2. start: the next launch lists the cache, loads every record at once
 *      with kiln_cache_load_many and makes a shader module of each when a
 *      Vulkan device is there.
 * Guest memory is tracked in a page-state table (kiln/pages.h): the pages
 * holding guest shader code are marked, and a write to them is how the
 * emulator would learn that a translation is stale.
 *
 * usage: emulator [CACHE_DIR]   (default: a new folder under $TMPDIR)
 * Exit code 0 when every step did what it should, 1 otherwise.
 */
#define _POSIX_C_SOURCE 200809L /* mkdtemp */

#include <kiln/cache.h>
#include <kiln/pack.h>
#include <kiln/pages.h>
#include <kiln/vk.h>

#include <assert.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The translator's stamp: a cache written by another translator (or
 * another version of this one) is not ours to read. */
#define EMU_TRANSLATOR_STAMP 0x454d553030303031ull /* "EMU00001" */

#define EMU_THREADS        4
#define EMU_PROGRAMS       256        /* guest shader programs met while playing */
#define EMU_PAGE_CODE      1          /* page-state flag: holds translated guest code */
#define EMU_GUEST_PAGES    (1u << 18) /* 1 GiB of guest memory */
#define EMU_PROGRAM_PAGES  4u         /* each guest program spans four pages */
#define EMU_CODE_BASE_PAGE 4096u

static int failures;

static void fail(const char *what, int rc)
{
    fprintf(stderr, "emulator: %s: %s\n", what, rc < 0 ? kiln_strerror(rc) : "wrong result");
    failures++;
}

/* The "guest code" of program i: what the emulator hashes to key it. */
static void guest_code(uint32_t i, uint32_t code[4])
{
    code[0] = 0x47554553u; /* "GUES" */
    code[1] = i;
    code[2] = i * 2654435761u;
    code[3] = ~i;
}

/*
 * The "translator": a real, valid SPIR-V compute shader (local size 1x1x1,
 * an empty main) that carries the program's number as a constant, so every
 * program translates to other words.
 */
enum { EMU_SPIRV_WORDS = 43 };
static size_t translate(uint32_t program, uint32_t *w)
{
    size_t n = 0;
    /* Header: magic, version 1.0, generator 0, id bound 7, schema 0. */
    w[n++] = 0x07230203u, w[n++] = 0x00010000u, w[n++] = 0, w[n++] = 7, w[n++] = 0;
    w[n++] = (2u << 16) | 17, w[n++] = 1;             /* OpCapability Shader */
    w[n++] = (3u << 16) | 14, w[n++] = 0, w[n++] = 1; /* OpMemoryModel Logical GLSL450 */
    /* OpEntryPoint GLCompute %1 "main" */
    w[n++] = (5u << 16) | 15, w[n++] = 5, w[n++] = 1, w[n++] = 0x6e69616du, w[n++] = 0;
    /* OpExecutionMode %1 LocalSize 1 1 1 */
    w[n++] = (6u << 16) | 16, w[n++] = 1, w[n++] = 17, w[n++] = 1, w[n++] = 1, w[n++] = 1;
    w[n++] = (2u << 16) | 19, w[n++] = 2;                               /* %2 = OpTypeVoid */
    w[n++] = (3u << 16) | 33, w[n++] = 3, w[n++] = 2;                   /* %3 = OpTypeFunction %2 */
    w[n++] = (4u << 16) | 21, w[n++] = 4, w[n++] = 32, w[n++] = 0;      /* %4 = OpTypeInt 32 0 */
    w[n++] = (4u << 16) | 43, w[n++] = 4, w[n++] = 5, w[n++] = program; /* %5 = OpConstant */
    w[n++] = (5u << 16) | 54, w[n++] = 2, w[n++] = 1, w[n++] = 0, w[n++] = 3; /* OpFunction */
    w[n++] = (2u << 16) | 248, w[n++] = 6;                                    /* OpLabel */
    w[n++] = (1u << 16) | 253;                                                /* OpReturn */
    w[n++] = (1u << 16) | 56;                                                 /* OpFunctionEnd */
    assert(n == EMU_SPIRV_WORDS);
    return n;
}

struct shader_thread {
    struct kiln_cache *cache;
    uint32_t first, count;
    int rc;
};

/* One shader thread: translates its share of the misses and stores each. */
static void *shader_thread_main(void *arg)
{
    struct shader_thread *t = arg;
    for (uint32_t i = t->first; i < t->first + t->count && t->rc == 0; i++) {
        uint32_t code[4], words[EMU_SPIRV_WORDS];
        guest_code(i, code);
        size_t n = translate(i, words);
        void *blob;
        size_t blob_size;
        int rc = kiln_pack(words, n, KILN_CODEC_KILN, NULL, &blob, &blob_size);
        if (rc == 0) {
            /* Puts are safe from any number of threads: no lock of ours. */
            rc = kiln_cache_put(t->cache, kiln_hash128(code, sizeof(code)), blob, blob_size,
                                (uint32_t)(n * 4), KILN_CODEC_KILN, 1);
            kiln_pack_free(blob);
        }
        t->rc = rc;
    }
    kiln_pack_thread_cleanup();
    return NULL;
}

static int open_cache(const char *dir, struct kiln_cache **c)
{
    struct kiln_cache_options o = KILN_CACHE_OPTIONS_INIT;
    o.stamp = EMU_TRANSLATOR_STAMP;
    o.flags = KILN_CACHE_CREATE; /* makes the folder too */
    return kiln_cache_open(dir, &o, c);
}

/* Playing: four shader threads store what the translator made. */
static void play(const char *dir)
{
    struct kiln_cache *c;
    int rc = open_cache(dir, &c);
    if (rc < 0) {
        fail("open the cache", rc);
        return;
    }
    struct shader_thread threads[EMU_THREADS];
    pthread_t ids[EMU_THREADS];
    for (uint32_t i = 0; i < EMU_THREADS; i++) {
        threads[i] = (struct shader_thread){c, i * (EMU_PROGRAMS / EMU_THREADS),
                                            EMU_PROGRAMS / EMU_THREADS, 0};
        if (pthread_create(&ids[i], NULL, shader_thread_main, &threads[i]) != 0) {
            fail("start a shader thread", KILN_ENOMEM);
            threads[i].rc = KILN_ENOMEM;
            ids[i] = 0;
        }
    }
    for (uint32_t i = 0; i < EMU_THREADS; i++) {
        if (ids[i])
            pthread_join(ids[i], NULL);
        if (threads[i].rc < 0)
            fail("store a translated program", threads[i].rc);
    }
    if ((rc = kiln_cache_sync(c)) < 0)
        fail("sync the cache", rc);
    if (kiln_cache_count(c) != EMU_PROGRAMS)
        fail("count the stored programs", 0);
    kiln_cache_close(c);
    printf("play: %u programs translated on %u threads and stored\n", EMU_PROGRAMS, EMU_THREADS);
}

/* The next launch: every stored program loaded at once, and a shader module
 * made of each when there is a Vulkan device. */
static void start(const char *dir)
{
    struct kiln_cache *c;
    int rc = open_cache(dir, &c);
    if (rc < 0) {
        fail("reopen the cache", rc);
        return;
    }
    struct kiln_cache_entry *all = NULL;
    size_t n = 0;
    struct kiln_key *keys = NULL;
    struct kiln_cache_result *res = NULL;
    if ((rc = kiln_cache_entries(c, &all, &n)) < 0 || n != EMU_PROGRAMS) {
        fail("list the cache", rc);
        goto out;
    }
    keys = malloc(n * sizeof(*keys));
    if (!keys) {
        fail("list the keys", KILN_ENOMEM);
        goto out;
    }
    for (size_t i = 0; i < n; i++)
        keys[i] = all[i].key;
    int64_t loaded = kiln_cache_load_many(c, keys, n, 0, &res);
    if (loaded != (int64_t)n) {
        fail("load every program", loaded < 0 ? (int)loaded : 0);
        goto out;
    }

    /* Each record unpacks to the words the translator made. */
    uint32_t code[4], words[EMU_SPIRV_WORDS], back[256];
    guest_code(7, code);
    struct kiln_key k7 = kiln_hash128(code, sizeof(code));
    size_t n7 = translate(7, words);
    for (size_t i = 0; i < n; i++) {
        if (res[i].key.lo != k7.lo || res[i].key.hi != k7.hi)
            continue;
        int64_t got = kiln_unpack(res[i].data, res[i].size, NULL, back, 256);
        if (got != (int64_t)n7 || memcmp(back, words, n7 * 4) != 0)
            fail("unpack program 7", got < 0 ? (int)got : 0);
    }

    struct kiln_vk *vk = NULL;
    rc = kiln_vk_create(NULL, &vk);
    if (rc == KILN_ENOTSUP) {
        printf("start: %" PRId64 " programs loaded; no Vulkan device, no modules made\n", loaded);
    } else if (rc < 0) {
        fail("make a Vulkan context", rc);
    } else {
        size_t made = 0;
        for (size_t i = 0; i < n; i++) {
            struct kiln_vk_stage stage = {
                .size = sizeof(stage), .blob = res[i].data, .blob_size = res[i].size};
            struct kiln_vk_module *m;
            if ((rc = kiln_vk_module_create(vk, "guest program", &stage, &m)) < 0) {
                fail("make a shader module", rc);
                break;
            }
            kiln_vk_module_destroy(vk, m);
            made++;
        }
        printf("start: %" PRId64 " programs loaded, %zu shader modules made on %s\n", loaded, made,
               kiln_vk_get_info(vk)->device_name);
        kiln_vk_destroy(vk);
    }
out:
    kiln_cache_results_free(res, n);
    free(keys);
    kiln_cache_entries_free(all);
    kiln_cache_close(c);
}

/* Guest memory: the pages that hold guest shader code are marked, and a
 * guest write is checked against them. */
static void guest_memory(void)
{
    struct kiln_pages *pages;
    int rc = kiln_pages_create(EMU_GUEST_PAGES, &pages);
    if (rc < 0) {
        fail("make the page-state table", rc);
        return;
    }
    for (uint32_t i = 0; i < EMU_PROGRAMS; i++) {
        uint64_t first = EMU_CODE_BASE_PAGE + (uint64_t)i * EMU_PROGRAM_PAGES;
        if ((rc = kiln_pages_store(pages, first, first + EMU_PROGRAM_PAGES - 1, EMU_PAGE_CODE)) < 0)
            fail("mark guest code pages", rc);
    }
    /* The code pages are one run; a write past them touches no program. */
    uint64_t end = EMU_CODE_BASE_PAGE + (uint64_t)EMU_PROGRAMS * EMU_PROGRAM_PAGES;
    if (kiln_pages_run_end(pages, EMU_CODE_BASE_PAGE, EMU_GUEST_PAGES) != end)
        fail("find the end of the guest code", 0);
    if (kiln_pages_load(pages, end) != 0 || kiln_pages_load(pages, end - 1) != EMU_PAGE_CODE)
        fail("read the page states", 0);
    /* The guest rewrites program 3's memory: its pages lose the mark, and
     * the run of code pages now ends there. */
    uint64_t p3 = EMU_CODE_BASE_PAGE + 3ull * EMU_PROGRAM_PAGES;
    if ((rc = kiln_pages_store(pages, p3, p3 + EMU_PROGRAM_PAGES - 1, 0)) < 0)
        fail("clear a program's pages", rc);
    if (kiln_pages_run_end(pages, EMU_CODE_BASE_PAGE, EMU_GUEST_PAGES) != p3)
        fail("see the stale program", 0);
    if ((rc = kiln_pages_verify(pages)) < 0)
        fail("verify the page-state table", rc);
    printf("pages: %u guest programs tracked over %" PRIu64 " pages\n", EMU_PROGRAMS,
           kiln_pages_count(pages));
    kiln_pages_destroy(pages);
}

int main(int argc, char **argv)
{
    /* The headers this program was built with and the library it runs with
     * must agree. */
    printf("kiln %s (headers %s)\n", kiln_version_string(), KILN_VERSION_STRING);
    if (kiln_version() != KILN_VERSION_NUMBER)
        fail("match the library's version", 0);

    char dir[4096];
    if (argc > 1) {
        snprintf(dir, sizeof(dir), "%s", argv[1]);
    } else {
        const char *tmp = getenv("TMPDIR");
        snprintf(dir, sizeof(dir), "%s/kiln-emulator-XXXXXX", tmp && *tmp ? tmp : "/tmp");
        if (!mkdtemp(dir)) {
            perror("emulator: mkdtemp");
            return 1;
        }
    }
    play(dir);
    start(dir);
    guest_memory();
    if (failures) {
        fprintf(stderr, "emulator: %d step(s) failed\n", failures);
        return 1;
    }
    printf("emulator: all steps done (cache in %s)\n", dir);
    return 0;
}
