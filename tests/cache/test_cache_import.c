/*
 * test_cache_import.c - Fossilize archives into a kiln cache
 * (kiln_foz_import) and as a preparation corpus (kiln_foz_programs on
 * a .foz).
 *
 * Counts are checked against an independent walk of the archives' entry
 * heads (not the reader under test). Every stored module is unpacked and
 * checked with spirv-val when it is there (KT_SPIRV_VAL).
 */
#include "kiln_test.h"
#include "kiln_internal.h"
#include "kiln/foz.h"
#include "kiln-tools/gen.h"
#include "kiln-tools/glsl.h"
#include "foz_writer.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#ifdef KT_SPIRV_VAL
#include <spawn.h>
#include <sys/wait.h>

extern char **environ;
#endif

/* The one corpus module today's validator rejects (docs/foz.md). */
#define KNOWN_INVALID UINT64_C(0x12b04dd0014895f5)

struct walk {
    uint64_t modules;     /* whole tag-4 entries */
    uint64_t hashes[512]; /* their hashes */
    uint64_t last_start;  /* offset of the last whole entry */
    uint64_t end;         /* end of the last whole entry */
};

static uint64_t hex(const unsigned char *p, size_t n)
{
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = p[i];
        v = v * 16 + (uint64_t)(ch <= '9' ? ch - '0' : (ch | 32) - 'a' + 10);
    }
    return v;
}

/* Walks entry heads: 40 hex characters, 4 u32s, the stored bytes. */
static void walk(const unsigned char *b, size_t n, struct walk *w)
{
    memset(w, 0, sizeof(*w));
    uint64_t off = 16;
    while (off + 56 <= n) {
        uint64_t stored = kiln__load_le32(b + off + 40);
        if (off + 56 + stored > n)
            break;
        if (hex(b + off + 8, 16) == KILN_FOZ_TAG_SHADER_MODULE && w->modules < 512)
            w->hashes[w->modules++] = hex(b + off + 24, 16);
        w->last_start = off;
        off += 56 + stored;
        w->end = off;
    }
}

static unsigned char *read_all(const char *path, size_t *n)
{
    void *d = NULL;
    if (kiln_io_read_file(kiln_io_default(), path, 64u << 20, &d, n) < 0)
        return NULL;
    return d;
}

static int write_all(const char *path, const void *d, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    size_t w = fwrite(d, 1, n, f);
    return fclose(f) == 0 && w == n ? 0 : -1;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The archives of the corpus, sorted. @return their count. */
static size_t list_archives(char paths[][4400], size_t cap)
{
    char dir[4096];
    snprintf(dir, sizeof(dir), "%s/foz/sascha-willems", kt_corpus_dir());
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    char *names[128];
    size_t n = 0;
    struct dirent *de;
    while ((de = readdir(d)) && n < cap && n < 128) {
        size_t l = strlen(de->d_name);
        if (l > 4 && strcmp(de->d_name + l - 4, ".foz") == 0)
            names[n++] = strdup(de->d_name);
    }
    closedir(d);
    qsort(names, n, sizeof(*names), cmp_str);
    for (size_t i = 0; i < n; i++) {
        snprintf(paths[i], sizeof(paths[i]), "%s/%s", dir, names[i]);
        free(names[i]);
    }
    return n;
}

static struct kiln_cache *open_foz_cache(const char *dir)
{
    struct kiln_cache_options o = {.size = sizeof(o),
                                   .stamp = KILN_FOZ_STAMP,
                                   .flags = KILN_CACHE_CREATE | KILN_CACHE_USE_DICT};
    struct kiln_cache *c = NULL;
    return kiln_cache_open(dir, &o, &c) < 0 ? NULL : c;
}

#ifdef KT_SPIRV_VAL
static int spirv_val(const char *spv, const char *log)
{
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    char *argv[] = {(char *)KT_SPIRV_VAL, (char *)spv, NULL};
    pid_t pid;
    int rc = posix_spawn(&pid, KT_SPIRV_VAL, &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    int st;
    if (rc != 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st))
        return -1;
    return WEXITSTATUS(st);
}
#endif

KT_CASE(import_corpus)
{
    static char paths[128][4400];
    size_t na = list_archives(paths, 128);
    if (na == 0) {
        printf("skipped: no Fossilize archives under %s/foz (the shared corpus)\n",
               kt_corpus_dir());
        exit(77);
    }
    KT_REQUIRE(na >= 40);
    const char *dir = kt_tmpdir();
    struct kiln_cache *c = open_foz_cache(dir);
    KT_REQUIRE(c);
    /* Distinct hashes over all archives: the same module in two archives
     * (a shared vertex shader) is one record. */
    static uint64_t seen[4096];
    size_t nseen = 0;
    uint64_t total_modules = 0, imported = 0, compute = 0, invalid = 0;
    for (size_t a = 0; a < na; a++) {
        size_t n;
        unsigned char *b = read_all(paths[a], &n);
        KT_REQUIRE(b);
        struct walk w;
        walk(b, n, &w);
        free(b);
        uint64_t fresh = 0;
        for (size_t i = 0; i < w.modules; i++) {
            bool dup = false;
            for (size_t k = 0; k < nseen && !dup; k++)
                dup = seen[k] == w.hashes[i];
            if (!dup && nseen < 4096) {
                seen[nseen++] = w.hashes[i];
                fresh++;
            }
        }
        struct kiln_foz_import_report r = KILN_FOZ_IMPORT_REPORT_INIT;
        KT_CHECK_OK(kiln_foz_import(c, paths[a], &r));
        KT_CHECK_EQ(r.modules, w.modules);
        /* A module the validator refuses is not stored: one line each. */
        KT_CHECK_EQ(r.imported + r.invalid, fresh);
        KT_CHECK_EQ(r.imported + r.present + r.invalid, w.modules);
        KT_CHECK_EQ(r.damaged + r.undecodable + r.entries_skipped, 0);
        total_modules += r.modules;
        imported += r.imported;
        compute += r.compute;
        invalid += r.invalid;
    }
    KT_CHECK_EQ(total_modules, 281); /* docs/foz.md */
    KT_CHECK_EQ(imported + invalid, nseen);
    KT_CHECK_EQ(kiln_cache_count(c), imported);
#ifdef KILN_HAVE_SPIRV_TOOLS
    /* The known invalid compute module, and two of gears that Vulkan's
     * rules refuse (BuiltIn VertexId, OriginLowerLeft): docs/foz.md. */
    KT_CHECK_EQ(invalid, 3);
    KT_CHECK_EQ(compute, 5);
#else
    KT_CHECK_EQ(invalid, 0);
    KT_CHECK_EQ(compute, 6);
#endif

    /* A re-import adds nothing (and refuses the same modules again). */
    for (size_t a = 0; a < na; a++) {
        struct kiln_foz_import_report r = KILN_FOZ_IMPORT_REPORT_INIT;
        kiln_log_set_level(KILN_LOG_ERROR); /* the refusals, said above */
        KT_CHECK_OK(kiln_foz_import(c, paths[a], &r));
        kiln_log_set_level(KILN_LOG_WARN);
        KT_CHECK_EQ(r.imported, 0);
        KT_CHECK_EQ(r.present + r.invalid, r.modules);
    }
    KT_CHECK_EQ(kiln_cache_count(c), imported);
    /* The stored ones, for the checks below. */
    size_t nstored = 0;
    for (size_t i = 0; i < nseen; i++)
        if (kiln_cache_find(c, kiln_foz_key(seen[i]), NULL) == KILN_OK)
            seen[nstored++] = seen[i];
    KT_CHECK_EQ(nstored, imported);
    size_t refused = nseen - nstored;
    nseen = nstored;
    kiln_cache_close(c);

    /* Every stored module unpacks to valid SPIR-V (but the one known bad). */
    struct kiln_cache_options ro = {.size = sizeof(ro),
                                    .stamp = KILN_FOZ_STAMP,
                                    .flags = KILN_CACHE_READ_ONLY | KILN_CACHE_USE_DICT};
    KT_REQUIRE_OK(kiln_cache_open(dir, &ro, &c));
    struct kiln_key *keys = malloc(nseen * sizeof(*keys));
    for (size_t i = 0; i < nseen; i++)
        keys[i] = kiln_foz_key(seen[i]);
    struct kiln_cache_result *res;
    KT_CHECK_EQ(kiln_cache_load_many(c, keys, nseen, 0, &res), (int64_t)nseen);
    size_t valid = 0, computes = 0;
    char spv[4200], log[4200];
    snprintf(spv, sizeof(spv), "%s/m.spv", dir);
    snprintf(log, sizeof(log), "%s/val.log", dir);
    for (size_t i = 0; i < nseen; i++) {
        struct kiln_stage_blob st;
        KT_REQUIRE(kiln_program_payload_parse(res[i].data, res[i].size, 1, &st) == 1);
        KT_CHECK_EQ(res[i].codec, KILN_CODEC_KILN);
        computes += st.stage == KILN_VK_STAGE_COMPUTE_BIT;
        /* VkShaderStageFlagBits of the graphics and compute stages only. */
        KT_CHECK((st.stage & ~0x3fu) == 0);
        const uint32_t *w;
        int64_t nw = kiln_unpack_scratch(st.blob, st.blob_size, kiln_cache_dict(c), &w);
        KT_REQUIRE(nw > 5);
        KT_CHECK_EQ(w[0], 0x07230203u);
        KT_CHECK_EQ(res[i].raw_size, nw * 4);
#ifdef KT_SPIRV_VAL
        KT_REQUIRE(write_all(spv, w, (size_t)nw * 4) == 0);
        int v = spirv_val(spv, log);
        if (seen[i] == KNOWN_INVALID)
            KT_CHECK(v != 0);
        else if (v != 0)
            kt_fail(__FILE__, __LINE__, "module %016" PRIx64 " fails spirv-val", seen[i]);
        else
            valid++;
#else
        valid += seen[i] != KNOWN_INVALID;
#endif
    }
    /* The known invalid one was refused by the import where it validates. */
    KT_CHECK_EQ(valid, refused ? nseen : nseen - 1);
    KT_CHECK_EQ(computes, refused ? 5 : 6);
    kiln_cache_results_free(res, nseen);
    free(keys);
    kiln_cache_close(c);
    kiln_pack_thread_cleanup();
}

/* An archive of the corpus with its bytes; without the corpus, one written
 * here from generated SPIR-V (one compute program, two graphics pairs). */
static unsigned char *load_archive(const char *name, size_t *n, char *path, size_t cap)
{
    FW_NEED(fw_archive(name, path, cap)); /* skipped without shaderc */
    return read_all(path, n);
}

KT_CASE(import_damage)
{
    const char *dir = kt_tmpdir();
    char cache[4200], file[4200], src[4200];
    snprintf(cache, sizeof(cache), "%s/cache", dir);
    snprintf(file, sizeof(file), "%s/x.foz", dir);
    KT_REQUIRE(kt_mkdir(cache) == 0);
    size_t n;
    unsigned char *b = load_archive("computenbody.f93c6e96adcd7946.1.foz", &n, src, sizeof(src));
    KT_REQUIRE(b);
    struct walk w;
    walk(b, n, &w);
    KT_REQUIRE(w.end == n && w.modules >= 3);
    struct kiln_cache *c = open_foz_cache(cache);
    KT_REQUIRE(c);

    /* Every cut inside the last entry: the whole ones before it come in. */
    struct walk cut;
    unsigned char *t = malloc(n);
    memcpy(t, b, n);
    walk(t, w.last_start, &cut);
    uint64_t len = n - w.last_start;
    for (uint64_t k = 1; k < len; k++) {
        KT_REQUIRE(write_all(file, t, (size_t)(w.last_start + k)) == 0);
        struct kiln_foz_import_report r = KILN_FOZ_IMPORT_REPORT_INIT;
        int rc = kiln_foz_import(c, file, &r);
        if (rc != KILN_OK || !r.truncated || r.modules != cut.modules) {
            kt_fail(__FILE__, __LINE__, "cut at %" PRIu64 ": %s, truncated %d, %" PRIu64 " modules",
                    w.last_start + k, kiln_errname(rc), r.truncated, r.modules);
            break;
        }
    }
    KT_CHECK_EQ(kiln_cache_count(c), cut.modules);

    /* A flipped CRC on the first module: that one skipped, the rest in. */
    uint64_t off = 16, first_mod = 0;
    while (off < n) {
        if (hex(b + off + 8, 16) == KILN_FOZ_TAG_SHADER_MODULE) {
            first_mod = off;
            break;
        }
        off += 56 + kiln__load_le32(b + off + 40);
    }
    KT_REQUIRE(first_mod);
    memcpy(t, b, n);
    t[first_mod + 48] ^= 1; /* the CRC field */
    KT_REQUIRE(write_all(file, t, n) == 0);
    struct kiln_cache *c2;
    char cache2[4300];
    snprintf(cache2, sizeof(cache2), "%s/cache2", dir);
    KT_REQUIRE(kt_mkdir(cache2) == 0);
    c2 = open_foz_cache(cache2);
    KT_REQUIRE(c2);
    struct kiln_foz_import_report r = KILN_FOZ_IMPORT_REPORT_INIT;
    KT_CHECK_OK(kiln_foz_import(c2, file, &r));
    KT_CHECK_EQ(r.damaged, 1);
    KT_CHECK_EQ(r.imported, w.modules - 1);
    KT_CHECK_EQ(r.modules, w.modules);
    KT_CHECK_EQ(kiln_cache_find(c2, kiln_foz_key(hex(b + first_mod + 24, 16)), NULL),
                KILN_ENOTFOUND);
    /* Importing the whole archive afterwards adds exactly that one. */
    KT_CHECK_OK(kiln_foz_import(c2, src, &r));
    KT_CHECK_EQ(r.imported, 1);

    /* A broken entry name after the first module: that entry is lost and
     * counted, the reader reads on from the next whole entry, and every
     * other module is imported. */
    uint64_t second = first_mod + 56 + kiln__load_le32(b + first_mod + 40);
    memcpy(t, b, n);
    t[second + 3] = 'x';
    KT_REQUIRE(write_all(file, t, n) == 0);
    char cache3[4300];
    snprintf(cache3, sizeof(cache3), "%s/cache3", dir);
    KT_REQUIRE(kt_mkdir(cache3) == 0);
    struct kiln_cache *c3 = open_foz_cache(cache3);
    KT_REQUIRE(c3);
    KT_CHECK_OK(kiln_foz_import(c3, file, &r));
    KT_CHECK_EQ(r.entries_skipped, 1);
    KT_CHECK_EQ(r.resyncs, 1);
    KT_CHECK(r.imported + 1 >= w.modules);
    KT_CHECK_OK(kiln_cache_find(c3, kiln_foz_key(hex(b + first_mod + 24, 16)), NULL));

    /* A bad version: refused as a whole, nothing imported. */
    memcpy(t, b, n);
    t[15] = 7;
    KT_REQUIRE(write_all(file, t, n) == 0);
    size_t before = kiln_cache_count(c3);
    KT_CHECK_EQ(kiln_foz_import(c3, file, &r), KILN_EFORMAT);
    KT_CHECK_EQ(kiln_cache_count(c3), before);
    kiln_cache_close(c3);
    kiln_cache_close(c2);
    kiln_cache_close(c);
    free(t);
    free(b);
    kiln_pack_thread_cleanup();
}

KT_CASE(corpus_foz)
{
    char path[4200];
    size_t n;
    unsigned char *b =
        load_archive("computeparticles.f93c6e96adcd7946.1.foz", &n, path, sizeof(path));
    KT_REQUIRE(b);
    struct walk w;
    walk(b, n, &w);
    free(b);
    struct kiln_foz_programs *cp;
    KT_REQUIRE_OK(kiln_foz_programs_open(path, &cp));
    /* One compute module; the rest (graphics) are listed as skipped. */
    KT_CHECK_EQ(kiln_foz_programs_count(cp), 1);
    KT_CHECK_EQ(kiln_foz_programs_count(cp) + kiln_foz_programs_skipped(cp), w.modules);
    struct kiln_program_source src;
    kiln_foz_programs_source(cp, &src);
    KT_CHECK_EQ(src.count, 1);
    KT_CHECK_EQ(src.stamp(src.user, 42), KILN_FOZ_STAMP);
    struct kiln_program *p;
    KT_REQUIRE_OK(src.load(src.user, 0, &p));
    KT_CHECK_EQ(p->nstages, 1);
    KT_CHECK_EQ(p->stages[0].src.stage, KILN_VK_STAGE_COMPUTE_BIT);
    KT_REQUIRE(p->stages[0].words && p->stages[0].nwords > 5);
    KT_CHECK(!p->stages[0].src.text); /* SPIR-V: no translator needed */
    uint64_t hash = 0;
    KT_CHECK(sscanf(p->name, "%16" SCNx64 ".comp", &hash) == 1);
    KT_CHECK(p->has_key && kiln_key_equal(p->key, kiln_foz_key(hash)));
    /* The same words as the import stores. */
    const char *dir = kt_tmpdir();
    struct kiln_cache *c = open_foz_cache(dir);
    KT_REQUIRE(c);
    KT_CHECK_OK(kiln_foz_import(c, path, NULL));
    struct kiln_key key = kiln_foz_key(hash);
    struct kiln_cache_result *res;
    KT_REQUIRE(kiln_cache_load_many(c, &key, 1, 1, &res) == 1);
    struct kiln_stage_blob st;
    KT_REQUIRE(kiln_program_payload_parse(res[0].data, res[0].size, 1, &st) == 1);
    KT_CHECK_EQ(st.stage, KILN_VK_STAGE_COMPUTE_BIT);
    const uint32_t *words;
    int64_t nw = kiln_unpack_scratch(st.blob, st.blob_size, NULL, &words);
    KT_CHECK(nw == (int64_t)p->stages[0].nwords &&
             memcmp(words, p->stages[0].words, (size_t)nw * 4) == 0);
    kiln_cache_results_free(res, 1);
    kiln_cache_close(c);
    kiln_program_destroy(p);
    kiln_foz_programs_destroy(cp);
    /* Not an archive: a clear error. */
    char bad[4200];
    snprintf(bad, sizeof(bad), "%s/bad.foz", dir);
    KT_REQUIRE(write_all(bad, "not an archive at all", 21) == 0);
    KT_CHECK_EQ(kiln_foz_programs_open(bad, &cp), KILN_EFORMAT);
    kiln_pack_thread_cleanup();
}

KT_MAIN(KT_ENTRY(import_corpus), KT_ENTRY(import_damage), KT_ENTRY(corpus_foz))
