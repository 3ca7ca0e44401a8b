/*
 * test_cli_foz.c - whole Fossilize pipelines through the kiln command:
 * kiln_foz_pipelines (several archives, each key once), `kiln import foz`,
 * `kiln prepare --corpus A.foz B.foz ...`, `kiln start` and `kiln export
 * foz`, counted per kind from their --json output.
 *
 * The cases that need no corpus write their own archives of whole
 * pipelines (tests/support/foz_writer.c: a layout, a render pass, compute
 * and graphics pipelines of kiln's generator). The corpus cases run the 48
 * archives of ../shared; one of them under the Khronos validation layer,
 * which may report only what the archives themselves recorded (named
 * below). Without shaderc, a Vulkan device, the corpus or the layer, a case
 * prints one "skipped:" line and exits 77.
 */
#include "kiln_test.h"
#include "foz_writer.h"
#include "kt_cli.h"
#include "kt_vklayer.h"
#include "kiln/foz.h"
#include "kiln/vk.h"

#include <json.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* What the shared corpus records (tests/foz/test_foz_build.c counts them
 * through the library): 151 graphics pipeline entries of 110 distinct
 * pipelines, 6 compute. Two distinct pipelines have a module SPIR-V's
 * validator refuses but that parses; recorded from a running application,
 * kiln stores and builds both, with a warning, counted as recorded_invalid
 * (docs/foz.md, "The corpus"): computeraytracing's compute pipeline
 * 36e571e519805da7 (module 12b04dd0014895f5: OpArrayLength with a signed
 * result) and gears' graphics pipeline e9a7dda52d261742 (vertex module
 * 782c6a2053f21090: BuiltIn VertexId; fragment module 569dd176fac32320:
 * execution mode OriginLowerLeft). */
#define CORPUS_GRAPHICS_FOUND 151
#define CORPUS_GRAPHICS       110
#define CORPUS_COMPUTE        6
#define CORPUS_RECORDED_G     1
#define CORPUS_RECORDED_C     1

/* ---------------------------------------------------------------------------
 * Helpers
 * ------------------------------------------------------------------------ */

/* Writes an archive of whole pipelines, or ends the case as skipped
 * without shaderc. */
static void check_raytracing(struct json_object *o, uint64_t n);

static void write_archive(const char *path, unsigned compute, unsigned graphics, uint64_t first)
{
    FW_NEED(fw_write_pipelines(path, compute, graphics, first));
}

/* The archives a case runs: the shared corpus's 48, or without it three
 * written here (two recording the same pipelines), with what each holds. */
struct input {
    char **v; /* NULL-terminated */
    size_t n;
    bool corpus;
    uint64_t graphics_found, graphics, compute; /* entries met; distinct pipelines */
    uint64_t recorded_g, recorded_c;            /* distinct ones the validator refuses (built) */
};

static void input_open(struct input *in, const char *dir)
{
    memset(in, 0, sizeof(*in));
    in->v = calloc(257, sizeof(*in->v));
    KT_NEED(in->v);
    char path[4300];
    snprintf(path, sizeof(path), "%s/foz/sascha-willems", kt_corpus_dir());
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode)) {
        printf("(no shared corpus at %s: archives written here instead)\n", path);
        static const struct {
            const char *name;
            unsigned compute, graphics;
            uint64_t first;
        } w[] = {{"a", 2, 3, 0x7000}, {"b", 2, 3, 0x7000}, {"c", 1, 1, 0x8000}};
        for (size_t k = 0; k < 3; k++) {
            snprintf(path, sizeof(path), "%s/%s.foz", dir, w[k].name);
            write_archive(path, w[k].compute, w[k].graphics, w[k].first);
            in->v[in->n++] = strdup(path);
        }
        *in = (struct input){.v = in->v, .n = 3, .graphics_found = 7, .graphics = 4, .compute = 3};
        return;
    }
    char cmd[9000], list[4300];
    snprintf(list, sizeof(list), "%s/archives.txt", dir);
    snprintf(cmd, sizeof(cmd), "ls '%s/'*.foz > '%s'", path, list);
    KT_NEED(system(cmd) == 0);
    FILE *f = fopen(list, "r");
    KT_NEED(f);
    char line[4300];
    while (in->n < 256 && fgets(line, sizeof(line), f)) {
        line[strcspn(line, "\n")] = 0;
        in->v[in->n++] = strdup(line);
    }
    fclose(f);
    in->corpus = true;
    in->graphics_found = CORPUS_GRAPHICS_FOUND;
    in->graphics = CORPUS_GRAPHICS;
    in->compute = CORPUS_COMPUTE;
    in->recorded_g = CORPUS_RECORDED_G;
    in->recorded_c = CORPUS_RECORDED_C;
}

static void free_list(char **v)
{
    for (size_t i = 0; v && v[i]; i++)
        free(v[i]);
    free(v);
}

/* @return the archives joined as quoted command-line arguments. */
static char *joined(char **v, size_t n)
{
    size_t cap = 1;
    for (size_t i = 0; i < n; i++)
        cap += strlen(v[i]) + 3;
    char *s = calloc(1, cap);
    KT_NEED(s);
    for (size_t i = 0; i < n; i++) {
        strcat(s, "'");
        strcat(s, v[i]);
        strcat(s, "' ");
    }
    return s;
}

/* The command line `head` 'CACHE' `flag`'ARCHIVE' 'ARCHIVE' ... of every
 * archive of `in`, in a buffer of *cap bytes, room enough for the other
 * commands of the case. @return it (free it). */
static char *archives_command(const struct input *in, const char *head, const char *cache,
                              const char *flag, size_t *cap)
{
    char *list = joined(in->v, in->n);
    *cap = strlen(list) + 8192;
    char *cmd = malloc(*cap);
    KT_NEED(cmd);
    snprintf(cmd, *cap, "%s '%s' %s%s", head, cache, flag, list);
    free(list);
    return cmd;
}

/* The archive of `v` whose file name starts with `name`. */
static const char *archive_named(char **v, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++) {
        const char *base = strrchr(v[i], '/') ? strrchr(v[i], '/') + 1 : v[i];
        if (strncmp(base, name, strlen(name)) == 0 && base[strlen(name)] == '.')
            return v[i];
    }
    KT_NEED(!"archive missing from the corpus");
    return NULL;
}

/* ---------------------------------------------------------------------------
 * The library: several archives, each key once (no device)
 * ------------------------------------------------------------------------ */

KT_CASE(pipelines_dedup)
{
    const char *dir = kt_tmpdir();
    char a[4200], b[4200], c[4200], bad[4200];
    snprintf(a, sizeof(a), "%s/a.foz", dir);
    snprintf(b, sizeof(b), "%s/b.foz", dir);
    snprintf(c, sizeof(c), "%s/c.foz", dir);
    write_archive(a, 2, 3, 0x7000);
    write_archive(b, 2, 3, 0x7000); /* the same five pipelines */
    write_archive(c, 1, 1, 0x8000); /* the same modules, other pipelines */
    const char *paths[] = {a, b, c};
    struct kiln_foz_pipelines *fp;
    KT_REQUIRE_OK(kiln_foz_pipelines_open(paths, 3, &fp));
    KT_CHECK_EQ(kiln_foz_pipelines_count(fp), 7);
    KT_CHECK_EQ(kiln_foz_pipelines_archives(fp), 3);
    struct kiln_foz_pipelines_stats all = KILN_FOZ_PIPELINES_STATS_INIT,
                                    sb = KILN_FOZ_PIPELINES_STATS_INIT;
    kiln_foz_pipelines_get_stats(fp, SIZE_MAX, &all);
    kiln_foz_pipelines_get_stats(fp, 1, &sb);
    KT_CHECK_EQ(all.found[KILN_FOZ_KIND_GRAPHICS], 7);
    KT_CHECK_EQ(all.found[KILN_FOZ_KIND_COMPUTE], 5);
    KT_CHECK_EQ(all.unique[KILN_FOZ_KIND_GRAPHICS], 4);
    KT_CHECK_EQ(all.unique[KILN_FOZ_KIND_COMPUTE], 3);
    KT_CHECK_EQ(sb.duplicates[KILN_FOZ_KIND_GRAPHICS], 3);
    KT_CHECK_EQ(sb.duplicates[KILN_FOZ_KIND_COMPUTE], 2);
    KT_CHECK_EQ(sb.unique[KILN_FOZ_KIND_GRAPHICS] + sb.unique[KILN_FOZ_KIND_COMPUTE], 0);
    KT_CHECK_EQ(all.unreadable[KILN_FOZ_KIND_GRAPHICS] + all.unreadable[KILN_FOZ_KIND_COMPUTE], 0);
    KT_CHECK(strcmp(kiln_foz_pipelines_path(fp, 2), c) == 0);
    KT_CHECK(kiln_foz_pipelines_get(fp, 7) == NULL);

    struct kiln_program_source src;
    kiln_foz_pipelines_source(fp, &src);
    KT_CHECK_EQ(src.count, 7);
    KT_CHECK(src.stamp(src.user, 1234) == KILN_FOZ_STAMP);
    for (size_t i = 0; i < src.count; i++) {
        const struct kiln_foz_pipelines_entry *e = kiln_foz_pipelines_get(fp, i);
        KT_REQUIRE(e);
        KT_CHECK(e->archive != 1); /* b only repeats a */
        struct kiln_program *p;
        KT_REQUIRE_OK(src.load(src.user, i, &p));
        KT_CHECK_EQ(p->state_kind, KILN_STATE_FOZ);
        KT_CHECK(p->has_key && p->key.lo == e->key.lo && p->key.hi == e->key.hi);
        bool compute = e->tag == KILN_FOZ_TAG_COMPUTE_PIPELINE;
        KT_CHECK_EQ(p->nstages, compute ? 1u : 2u);
        if (compute) {
            /* The recorded specialization constant came along. */
            KT_CHECK_EQ(p->stages[0].nspec, 1);
            KT_CHECK_EQ(p->stages[0].spec_size, 4);
            KT_CHECK(p->stages[0].spec_data && ((uint8_t *)p->stages[0].spec_data)[0] == 7);
        }
        for (size_t k = 0; k < i; k++) {
            const struct kiln_foz_pipelines_entry *o = kiln_foz_pipelines_get(fp, k);
            KT_CHECK(o->key.lo != e->key.lo || o->key.hi != e->key.hi);
        }
        kiln_program_destroy(p);
    }
    kiln_foz_pipelines_destroy(fp);

    /* One archive that is not one: the whole open fails, naming it. */
    snprintf(bad, sizeof(bad), "%s/bad.foz", dir);
    FILE *f = fopen(bad, "wb");
    KT_REQUIRE(f);
    fputs("not an archive at all, but long enough", f);
    fclose(f);
    const char *with_bad[] = {a, bad};
    KT_CHECK_EQ(kiln_foz_pipelines_open(with_bad, 2, &fp), KILN_EFORMAT);
    KT_CHECK_EQ(kiln_foz_pipelines_open(with_bad, 0, &fp), KILN_EINVAL);
}

/* A pipeline whose module is missing is unreadable: counted, the others kept. */
KT_CASE(pipelines_unreadable)
{
    const char *dir = kt_tmpdir();
    char a[4200], cut[4200];
    snprintf(a, sizeof(a), "%s/a.foz", dir);
    write_archive(a, 1, 2, 0x7000);
    /* Drop the first shader module entry (the fourth: after the set layout,
     * the pipeline layout and the render pass). */
    FILE *f = fopen(a, "rb");
    KT_REQUIRE(f);
    static uint8_t data[1 << 22];
    size_t size = fread(data, 1, sizeof(data), f);
    fclose(f);
    size_t off = 16;
    for (int k = 0; k < 3; k++)
        off += 56 + (data[off + 40] | data[off + 41] << 8 | data[off + 42] << 16);
    KT_REQUIRE(memcmp(data + off + 8, "0000000000000004", 16) == 0);
    size_t len = 56 + (data[off + 40] | data[off + 41] << 8 | data[off + 42] << 16);
    snprintf(cut, sizeof(cut), "%s/cut.foz", dir);
    f = fopen(cut, "wb");
    KT_REQUIRE(f);
    KT_REQUIRE(fwrite(data, 1, off, f) == off);
    KT_REQUIRE(fwrite(data + off + len, 1, size - off - len, f) == size - off - len);
    fclose(f);
    const char *paths[] = {cut};
    struct kiln_foz_pipelines *fp;
    KT_REQUIRE_OK(kiln_foz_pipelines_open(paths, 1, &fp));
    struct kiln_foz_pipelines_stats st = KILN_FOZ_PIPELINES_STATS_INIT;
    kiln_foz_pipelines_get_stats(fp, 0, &st);
    KT_CHECK_EQ(st.unreadable[KILN_FOZ_KIND_COMPUTE], 1);
    KT_CHECK_EQ(st.unique[KILN_FOZ_KIND_GRAPHICS], 2);
    KT_CHECK_EQ(kiln_foz_pipelines_count(fp), 2);
    KT_CHECK(strstr(st.first_unreadable, "not in the archive") != NULL);
    kiln_foz_pipelines_destroy(fp);
}

/* ---------------------------------------------------------------------------
 * The command, on archives written here
 * ------------------------------------------------------------------------ */

/* kiln prepare --corpus of several written archives, of a graphics-only
 * one, and of one with a ray-tracing pipeline: built (or skipped) through
 * the Fossilize builder. */
KT_CASE(prepare_written)
{
    const char *dir = kt_tmpdir();
    char a[4200], b[4200], g[4200], cache[4200], out[4200], args[20000];
    snprintf(a, sizeof(a), "%s/a.foz", dir);
    snprintf(b, sizeof(b), "%s/b.foz", dir);
    snprintf(g, sizeof(g), "%s/graphics.foz", dir);
    snprintf(out, sizeof(out), "%s/out.json", dir);
    write_archive(a, 2, 3, 0x7000);
    write_archive(b, 1, 2, 0x9000);
    write_archive(g, 0, 2, 0xa000);
    snprintf(cache, sizeof(cache), "%s/cache", dir);
    snprintf(args, sizeof(args), "prepare --json --jobs 2 --cache '%s' --corpus '%s' '%s'", cache,
             a, b);
    int rc = kt_cli_run(out, args);
    struct json_object *o = kt_cli_json(out);
    kt_cli_require_vulkan(o, out);
    KT_CHECK_EQ(rc, 0);
    KT_CHECK_EQ(kt_json_num(o, "programs"), 8);
    KT_CHECK_EQ(kt_json_num(o, "failed"), 0);
    KT_CHECK_EQ(kt_json_num(o, "kinds.foz.graphics.built"), 5);
    KT_CHECK_EQ(kt_json_num(o, "kinds.foz.compute.built"), 3);
    KT_CHECK_EQ(kt_json_num(o, "kinds.foz.failed"), 0);
    KT_CHECK_EQ(kt_json_num(o, "archive_pipelines.graphics.unique"), 5);
    json_object_put(o);

    /* A graphics-only archive is ordinary input. */
    snprintf(cache, sizeof(cache), "%s/cache-g", dir);
    snprintf(args, sizeof(args), "prepare --json --cache '%s' --corpus '%s'", cache, g);
    KT_CHECK_EQ(kt_cli_run(out, args), 0);
    o = kt_cli_json(out);
    KT_CHECK_EQ(kt_json_num(o, "kinds.foz.graphics.built"), 2);
    KT_CHECK_EQ(kt_json_num(o, "kinds.foz.compute.built"), 0);
    KT_CHECK_EQ(kt_json_num(o, "pipelines_failed"), 0);
    json_object_put(o);

    /* Ray-tracing pipelines: stored, then built where the device has
     * VK_KHR_ray_tracing_pipeline, else skipped with that reason, by
     * prepare and by start alike; nothing fails. */
    char rt[4200];
    snprintf(rt, sizeof(rt), "%s/rt.foz", dir);
    FW_NEED(fw_write_raytracing(rt, 0xb000));
    snprintf(cache, sizeof(cache), "%s/cache-rt", dir);
    snprintf(args, sizeof(args), "prepare --json --cache '%s' --corpus '%s' '%s'", cache, rt, g);
    KT_CHECK_EQ(kt_cli_run(out, args), 0);
    o = kt_cli_json(out);
    KT_CHECK_EQ(kt_json_num(o, "archive_pipelines.raytracing.unique"), 3);
    KT_CHECK_EQ(kt_json_num(o, "programs"), 5);
    check_raytracing(o, 3);
    KT_CHECK_EQ(kt_json_num(o, "kinds.foz.graphics.built"), 2);
    KT_CHECK_EQ(kt_json_num(o, "kinds.foz.failed"), 0);
    json_object_put(o);
    snprintf(args, sizeof(args), "start --json --cache '%s'", cache);
    KT_CHECK_EQ(kt_cli_run(out, args), 0);
    o = kt_cli_json(out);
    check_raytracing(o, 3);
    KT_CHECK_EQ(kt_json_num(o, "kinds.foz.graphics.built"), 2);
    json_object_put(o);
    snprintf(cache, sizeof(cache), "%s/cache-rt-import", dir);
    snprintf(args, sizeof(args), "import foz --json --cache '%s' '%s'", cache, rt);
    KT_CHECK_EQ(kt_cli_run(out, args), 0);
    o = kt_cli_json(out);
    KT_CHECK_EQ(kt_json_num(o, "kinds.raytracing.imported"), 3);
    json_object_put(o);

    /* A folder and an archive together are refused. */
    snprintf(args, sizeof(args), "prepare --no-vulkan --cache '%s' --corpus '%s' '%s'", cache, g,
             dir);
    KT_CHECK_EQ(kt_cli_run(out, args), 2);
}

/* ---------------------------------------------------------------------------
 * The command, on the shared corpus
 * ------------------------------------------------------------------------ */

/* The validation errors the archives recorded that kiln builds: VUID and
 * how many times. tests/foz/test_foz_build.c names each pipeline. */
static const struct {
    const char *vuid;
    int count;
} recorded[] = {
    /* computecloth 9e0224900a5c3525: primitive restart on a triangle list. */
    {"VUID-VkPipelineInputAssemblyStateCreateInfo-topology-00428", 1},
    /* gl_PerVertex differs between stages: deferredshadows 1861a749e16d5fed
     * (vertex / geometry) and the four pipelines of tessellation. */
    {"UNASSIGNED-CoreValidation-Shader-InterfaceTypeMismatch", 5},
    /* The modules SPIR-V's validator refuses but that parse, built as
     * recorded (see the top): the layer runs the validator on each module
     * and says so once per module, as named in `recorded_spirv`. */
    {"UNASSIGNED-CoreValidation-Shader-InconsistentSpirv", 3},
};

/* The layer's message for each of those modules. */
static const char *const recorded_spirv[] = {
    /* computeraytracing 36e571e519805da7, compute module 12b04dd0014895f5. */
    "SPIR-V module not valid: The Result Type of OpArrayLength",
    /* gears e9a7dda52d261742, vertex module 782c6a2053f21090. */
    "SPIR-V module not valid: Vulkan spec doesn't allow BuiltIn VertexId",
    /* gears e9a7dda52d261742, fragment module 569dd176fac32320. */
    "SPIR-V module not valid: [VUID-StandaloneSpirv-OriginLowerLeft-04653]",
};

/* kiln prepare --corpus of every archive, under the validation layer:
 * every graphics and compute pipeline built with the archives' layouts and
 * constants, and the layer reports only what the archives recorded. */
KT_CASE(prepare_validated)
{
    if (!kt_have_validation_layer()) {
        printf("skipped: the Khronos validation layer is not installed "
               "(Debian: vulkan-validationlayers)\n");
        exit(77);
    }
    const char *dir = kt_tmpdir();
    struct input in;
    input_open(&in, dir);
    char log[4200], cache[4200], out[4200];
    KT_REQUIRE(kt_validation_begin(dir, log, sizeof(log)));
    snprintf(cache, sizeof(cache), "%s/cache", dir);
    snprintf(out, sizeof(out), "%s/out.json", dir);
    size_t cap;
    char *args = archives_command(&in, "prepare --json --jobs 2 --cache", cache, "--corpus ", &cap);
    int rc = kt_cli_run(out, args);
    kt_validation_end();
    struct json_object *o = kt_cli_json(out);
    kt_cli_require_vulkan(o, out);
    /* Every pipeline is built; the two the validator refuses are counted. */
    KT_CHECK_EQ(rc, 0);
    KT_CHECK_EQ(kt_json_num(o, "failed"), 0);
    KT_CHECK_EQ(kt_json_num(o, "recorded_invalid"), in.recorded_g + in.recorded_c);
    KT_CHECK_EQ(kt_json_num(o, "programs"), in.graphics + in.compute);
    KT_CHECK_EQ(kt_json_num(o, "archive_pipelines.graphics.found"), in.graphics_found);
    KT_CHECK_EQ(kt_json_num(o, "archive_pipelines.graphics.unique"), in.graphics);
    KT_CHECK_EQ(kt_json_num(o, "archive_pipelines.compute.unique"), in.compute);
    KT_CHECK_EQ(kt_json_num(o, "kinds.foz.graphics.built"), in.graphics);
    KT_CHECK_EQ(kt_json_num(o, "kinds.foz.compute.built"), in.compute);
    KT_CHECK_EQ(kt_json_num(o, "kinds.foz.graphics.failed"), 0);
    KT_CHECK_EQ(kt_json_num(o, "kinds.foz.compute.failed"), 0);
    KT_CHECK_EQ(kt_json_num(o, "kinds.foz.graphics.skipped"), 0);
    KT_CHECK_EQ(kt_json_num(o, "kinds.foz.compute.skipped"), 0);
    KT_CHECK_EQ(kt_json_num(o, "pipelines_failed"), 0);
    json_object_put(o);

    /* The layer: only what the archives recorded (nothing for the written ones). */
    int errors = kt_occurrences(log, "Validation Error:");
    int known = 0;
    for (size_t k = 0; in.corpus && k < sizeof(recorded) / sizeof(recorded[0]); k++) {
        char pat[160];
        snprintf(pat, sizeof(pat), "Validation Error: [ %s ]", recorded[k].vuid);
        int seen = kt_occurrences(log, pat);
        printf("recorded in the archives: %s: %d\n", recorded[k].vuid, seen);
        KT_CHECK_EQ(seen, recorded[k].count);
        known += seen;
    }
    for (size_t k = 0; in.corpus && k < sizeof(recorded_spirv) / sizeof(recorded_spirv[0]); k++)
        KT_CHECK_EQ(kt_occurrences(log, recorded_spirv[k]), 1);
    if (errors != known) {
        char cmd[4300];
        snprintf(cmd, sizeof(cmd), "grep 'Validation Error' '%s' | head -20", log);
        if (system(cmd) != 0)
            printf("(could not show them)\n");
    }
    KT_CHECK_EQ(errors, known);
    free(args);
    free_list(in.v);
}

/* kiln import foz of every archive, then kiln start: the same counts as
 * prepare; a second import adds nothing. */
KT_CASE(import_start)
{
    const char *dir = kt_tmpdir();
    struct input in;
    input_open(&in, dir);
    char cache[4200], out[4200];
    snprintf(cache, sizeof(cache), "%s/cache", dir);
    snprintf(out, sizeof(out), "%s/out.json", dir);
    size_t cap;
    char *args = archives_command(&in, "import foz --json --cache", cache, "", &cap);
    /* Every pipeline is stored, those the validator refuses (but that
     * parse) with a warning each. */
    KT_CHECK_EQ(kt_cli_run(out, args), 0);
    struct json_object *o = kt_cli_json(out);
    uint64_t stored = in.graphics + in.compute;
    KT_CHECK_EQ(kt_json_num(o, "imported"), stored);
    KT_CHECK_EQ(kt_json_num(o, "kinds.graphics.imported"), in.graphics);
    KT_CHECK_EQ(kt_json_num(o, "kinds.compute.imported"), in.compute);
    KT_CHECK_EQ(kt_json_num(o, "kinds.graphics.invalid"), 0);
    KT_CHECK_EQ(kt_json_num(o, "kinds.compute.invalid"), 0);
    KT_CHECK_EQ(kt_json_num(o, "kinds.graphics.recorded_invalid"), in.recorded_g);
    KT_CHECK_EQ(kt_json_num(o, "kinds.compute.recorded_invalid"), in.recorded_c);
    KT_CHECK_EQ(kt_json_num(o, "kinds.graphics.duplicates"), in.graphics_found - in.graphics);
    KT_CHECK_EQ(kt_json_num(o, "unreadable"), 0);
    KT_CHECK_EQ(kt_json_num(o, "records"), stored);
    json_object_put(o);

    /* Again: nothing added. */
    KT_CHECK_EQ(kt_cli_run(out, args), 0);
    o = kt_cli_json(out);
    KT_CHECK_EQ(kt_json_num(o, "imported"), 0);
    KT_CHECK_EQ(kt_json_num(o, "present"), stored);
    KT_CHECK_EQ(kt_json_num(o, "records"), stored);
    json_object_put(o);

    snprintf(args, cap, "start --json --cache '%s'", cache);
    int rc = kt_cli_run(out, args);
    o = kt_cli_json(out);
    kt_cli_require_vulkan(o, out);
    KT_CHECK_EQ(rc, 0);
    KT_CHECK_EQ(kt_json_num(o, "loaded"), stored);
    KT_CHECK_EQ(kt_json_num(o, "pipelines_built"), stored);
    KT_CHECK_EQ(kt_json_num(o, "kinds.foz.graphics.built"), in.graphics);
    KT_CHECK_EQ(kt_json_num(o, "kinds.foz.compute.built"), in.compute);
    KT_CHECK_EQ(kt_json_num(o, "recorded_invalid"), in.recorded_g + in.recorded_c);
    KT_CHECK_EQ(kt_json_num(o, "kinds.foz.failed"), 0);
    KT_CHECK_EQ(kt_json_num(o, "kinds.builtin.built"), 0);
    KT_CHECK_EQ(kt_json_num(o, "pipelines_failed"), 0);
    json_object_put(o);
    free(args);
    free_list(in.v);
}

/* computeraytracing's module (a storage image where kiln's own layout has a
 * buffer; a module the validator refuses besides) crashes nothing: prepare
 * builds its compute pipeline in the archive's own layout, as recorded,
 * with the rest, and start builds what is stored. Without the corpus, the
 * written archive's first one stands in. */
KT_CASE(single_archive)
{
    const char *dir = kt_tmpdir();
    struct input in;
    input_open(&in, dir);
    char cache[4200], out[4200], args[20000];
    snprintf(out, sizeof(out), "%s/out.json", dir);
    snprintf(cache, sizeof(cache), "%s/one", dir);
    snprintf(args, sizeof(args), "prepare --json --cache '%s' --corpus '%s'", cache,
             in.corpus ? archive_named(in.v, in.n, "computeraytracing") : in.v[0]);
    int rc = kt_cli_run(out, args);
    KT_CHECK(rc == 0 || rc == 1); /* never a signal */
    struct json_object *o = kt_cli_json(out);
    kt_cli_require_vulkan(o, out);
    KT_CHECK_EQ(rc, 0);
    KT_CHECK_EQ(kt_json_num(o, "failed"), 0);
    KT_CHECK_EQ(kt_json_num(o, "recorded_invalid"), in.corpus ? 1 : 0);
    KT_CHECK_EQ(kt_json_num(o, "pipelines_failed"), 0);
    /* computeraytracing records one compute pipeline; written archive "a" two. */
    KT_CHECK_EQ(kt_json_num(o, "kinds.foz.compute.built"), in.corpus ? 1 : 2);
    KT_CHECK(kt_json_num(o, "kinds.foz.graphics.built") >= 1);
    json_object_put(o);
    snprintf(args, sizeof(args), "start --json --cache '%s'", cache);
    KT_CHECK_EQ(kt_cli_run(out, args), 0);
    if (in.corpus) {
        /* A graphics-only archive of the corpus. */
        snprintf(cache, sizeof(cache), "%s/triangle", dir);
        snprintf(args, sizeof(args), "prepare --json --cache '%s' --corpus '%s'", cache,
                 archive_named(in.v, in.n, "triangle"));
        KT_CHECK_EQ(kt_cli_run(out, args), 0);
        o = kt_cli_json(out);
        KT_CHECK_EQ(kt_json_num(o, "kinds.foz.graphics.built"), 1);
        KT_CHECK_EQ(kt_json_num(o, "kinds.foz.compute.built"), 0);
        json_object_put(o);
    }
    free_list(in.v);
}

/* Export, import, prepare: the generated corpus prepared by kiln's own
 * builder, exported (`kiln export foz`), imported and prepared from the
 * archive builds as many pipelines through the Fossilize builder; and the
 * archives' pipelines imported and exported import back under the same
 * keys (into the first cache: nothing new, every one present). */
KT_CASE(export_round_trip)
{
    enum { N = 12 };
    const char *dir = kt_tmpdir();
    char gen[4200], arc[4200], imp[4200], out[4200], args[20000];
    snprintf(gen, sizeof(gen), "%s/gen", dir);
    snprintf(arc, sizeof(arc), "%s/gen.foz", dir);
    snprintf(imp, sizeof(imp), "%s/imported", dir);
    snprintf(out, sizeof(out), "%s/out.json", dir);
    snprintf(args, sizeof(args), "prepare --generate %d --jobs 2 --json --cache '%s'", N, gen);
    int rc = kt_cli_run(out, args);
    struct json_object *o = kt_cli_json(out);
    kt_cli_require_vulkan(o, out);
    KT_CHECK_EQ(rc, 0);
    uint64_t built = kt_json_num(o, "kinds.builtin.built");
    KT_CHECK_EQ(built, N);
    json_object_put(o);

    snprintf(args, sizeof(args), "export foz --json --cache '%s' '%s'", gen, arc);
    KT_CHECK_EQ(kt_cli_run(out, args), 0);
    o = kt_cli_json(out);
    KT_CHECK_EQ(kt_json_num(o, "pipelines"), N);
    KT_CHECK_EQ(kt_json_num(o, "builtin"), N);
    json_object_put(o);
    snprintf(args, sizeof(args), "import foz --json --cache '%s' '%s'", imp, arc);
    KT_CHECK_EQ(kt_cli_run(out, args), 0);
    o = kt_cli_json(out);
    KT_CHECK_EQ(kt_json_num(o, "imported"), N);
    json_object_put(o);
    snprintf(args, sizeof(args), "prepare --json --jobs 2 --cache '%s' --corpus '%s'", imp, arc);
    KT_CHECK_EQ(kt_cli_run(out, args), 0);
    o = kt_cli_json(out);
    KT_CHECK_EQ(kt_json_num(o, "cached"), N);
    KT_CHECK_EQ(kt_json_num(o, "kinds.foz.built"), built);
    KT_CHECK_EQ(kt_json_num(o, "kinds.foz.skipped") + kt_json_num(o, "kinds.foz.failed"), 0);
    KT_CHECK_EQ(kt_json_num(o, "kinds.builtin.built"), 0);
    json_object_put(o);

    /* Recorded pipelines: imported, exported, imported again. */
    struct input in;
    input_open(&in, dir);
    char cache[4200], back[4200];
    snprintf(cache, sizeof(cache), "%s/recorded", dir);
    snprintf(back, sizeof(back), "%s/recorded.foz", dir);
    size_t cap;
    char *cmd = archives_command(&in, "import foz --json --cache", cache, "", &cap);
    KT_CHECK_EQ(kt_cli_run(out, cmd), 0);
    o = kt_cli_json(out);
    uint64_t stored = kt_json_num(o, "records");
    KT_CHECK_EQ(stored, in.graphics + in.compute); /* the recorded-invalid ones too */
    json_object_put(o);
    snprintf(cmd, cap, "export foz --json --cache '%s' '%s'", cache, back);
    KT_CHECK_EQ(kt_cli_run(out, cmd), 0);
    o = kt_cli_json(out);
    KT_CHECK_EQ(kt_json_num(o, "pipelines"), stored);
    KT_CHECK_EQ(kt_json_num(o, "foz"), stored);
    json_object_put(o);
    snprintf(cmd, cap, "import foz --json --cache '%s' '%s'", cache, back);
    KT_CHECK_EQ(kt_cli_run(out, cmd), 0);
    o = kt_cli_json(out);
    KT_CHECK_EQ(kt_json_num(o, "imported"), 0);
    KT_CHECK_EQ(kt_json_num(o, "present"), stored);
    KT_CHECK_EQ(kt_json_num(o, "records"), stored);
    json_object_put(o);
    free(cmd);
    free_list(in.v);
}

/* ---------------------------------------------------------------------------
 * Pipeline libraries and ray tracing
 * ------------------------------------------------------------------------ */

/*
 * Whether kiln's Vulkan context, asked for the Fossilize builder's extra
 * extensions, enables VK_KHR_ray_tracing_pipeline on the default device.
 * Asked in a child that leaves with _exit, so the driver's allocations
 * reach no leak check of this process.
 */
static bool device_has_raytracing(void)
{
    pid_t pid = fork();
    KT_NEED(pid >= 0);
    if (pid == 0) {
        static const char *const extra[] = {KILN_FOZ_DEVICE_EXTENSIONS};
        struct kiln_vk_options vo = {.size = sizeof(vo),
                                     .extra_extensions = extra,
                                     .extra_extension_count = sizeof(extra) / sizeof(extra[0])};
        struct kiln_vk *vk = NULL;
        int code = kiln_vk_create(&vo, &vk) < 0                                   ? 2
                   : kiln_vk_extension_enabled(vk, "VK_KHR_ray_tracing_pipeline") ? 1
                                                                                  : 0;
        kiln_vk_destroy(vk);
        _exit(code);
    }
    int st = 0;
    KT_NEED(waitpid(pid, &st, 0) == pid);
    return WIFEXITED(st) && WEXITSTATUS(st) == 1;
}

/*
 * Checks a run's `n` ray-tracing pipelines: all built where the device has
 * VK_KHR_ray_tracing_pipeline; else all skipped, with that extension named
 * as the reason (and one "skipped:" line for the part that cannot run).
 */
static void check_raytracing(struct json_object *o, uint64_t n)
{
    KT_CHECK_EQ(kt_json_num(o, "kinds.foz.raytracing.failed"), 0);
    if (device_has_raytracing()) {
        KT_CHECK_EQ(kt_json_num(o, "kinds.foz.raytracing.built"), n);
        KT_CHECK_EQ(kt_json_num(o, "kinds.foz.raytracing.skipped"), 0);
        return;
    }
    printf("skipped: building ray-tracing pipelines (the device lacks "
           "VK_KHR_ray_tracing_pipeline); checked that they are skipped\n");
    KT_CHECK_EQ(kt_json_num(o, "kinds.foz.raytracing.built"), 0);
    KT_CHECK_EQ(kt_json_num(o, "kinds.foz.raytracing.skipped"), n);
    struct json_object *why = NULL, *foz = NULL, *kinds = NULL;
    KT_CHECK(json_object_object_get_ex(o, "kinds", &kinds) &&
             json_object_object_get_ex(kinds, "foz", &foz) &&
             json_object_object_get_ex(foz, "skip_reason", &why) &&
             strstr(json_object_get_string(why), "VK_KHR_ray_tracing_pipeline") != NULL);
}

/* Writes fw_write_gpl's archive, or ends the case as skipped without shaderc. */
static void write_gpl(const char *path, bool drop_part)
{
    FW_NEED(fw_write_gpl(path, 0xc000, drop_part));
}

/* Writes fw_write_raytracing's archive, or ends the case as skipped without shaderc. */
static void write_rt(const char *path)
{
    FW_NEED(fw_write_raytracing(path, 0xb000));
}

/* A case's files in its folder: an archive, the cache and the JSON output. */
struct case_files {
    char arc[4200], cache[4200], out[4200];
};

static void case_files(const char *dir, const char *archive, struct case_files *f)
{
    snprintf(f->arc, sizeof(f->arc), "%s/%s", dir, archive);
    snprintf(f->cache, sizeof(f->cache), "%s/cache", dir);
    snprintf(f->out, sizeof(f->out), "%s/out.json", dir);
}

/* kiln prepare --json of the case's archive into its cache, with `jobs`
 * workers (0: kiln's choice); exits 77 where kiln has no Vulkan device.
 * @return the output read, and kiln's exit code in *rc. */
static struct json_object *prepare_archive(const struct case_files *f, unsigned jobs, int *rc)
{
    char args[9000], opt[32] = "";
    if (jobs)
        snprintf(opt, sizeof(opt), " --jobs %u", jobs);
    snprintf(args, sizeof(args), "prepare --json%s --cache '%s' --corpus '%s'", opt, f->cache,
             f->arc);
    *rc = kt_cli_run(f->out, args);
    struct json_object *o = kt_cli_json(f->out);
    kt_cli_require_vulkan(o, f->out);
    return o;
}

/* The graphics pipelines fw_write_gpl writes: two sets of four parts and a
 * link each; of them the vertex-input and fragment-output parts have no
 * stage, so they are no programs of their own (built inside each link). */
#define GPL_PIPELINES 10
#define GPL_STAGELESS 4
#define GPL_PROGRAMS  (GPL_PIPELINES - GPL_STAGELESS)

/* Graphics pipeline libraries on the device (lavapipe has
 * VK_EXT_graphics_pipeline_library): every part built as a pipeline of its
 * own, and each link built over its parts, made first, with and without
 * link-time optimization, by prepare and by start; under the validation
 * layer, which reports nothing, when it is installed. */
KT_CASE(gpl_build)
{
    const char *dir = kt_tmpdir();
    char args[20000], log[4200];
    struct case_files f;
    case_files(dir, "gpl.foz", &f);
    write_gpl(f.arc, false);
    bool validated = kt_validation_begin(dir, log, sizeof(log));
    if (!validated)
        printf("skipped: the validation part (no Khronos validation layer installed)\n");
    int rc;
    struct json_object *o = prepare_archive(&f, 2, &rc);
    if (kt_json_num(o, "kinds.foz.graphics.skipped") == GPL_PROGRAMS) {
        printf("skipped: the device lacks VK_EXT_graphics_pipeline_library\n");
        json_object_put(o);
        exit(77);
    }
    KT_CHECK_EQ(rc, 0);
    KT_CHECK_EQ(kt_json_num(o, "archive_pipelines.graphics.found"), GPL_PIPELINES);
    KT_CHECK_EQ(kt_json_num(o, "archive_pipelines.graphics.library_parts"), GPL_STAGELESS);
    KT_CHECK_EQ(kt_json_num(o, "archive_pipelines.graphics.unique"), GPL_PROGRAMS);
    KT_CHECK_EQ(kt_json_num(o, "programs"), GPL_PROGRAMS);
    KT_CHECK_EQ(kt_json_num(o, "kinds.foz.graphics.built"), GPL_PROGRAMS);
    KT_CHECK_EQ(kt_json_num(o, "kinds.foz.graphics.skipped"), 0);
    KT_CHECK_EQ(kt_json_num(o, "kinds.foz.graphics.failed"), 0);
    KT_CHECK_EQ(kt_json_num(o, "pipelines_failed"), 0);
    json_object_put(o);
    snprintf(args, sizeof(args), "start --json --cache '%s'", f.cache);
    KT_CHECK_EQ(kt_cli_run(f.out, args), 0);
    o = kt_cli_json(f.out);
    KT_CHECK_EQ(kt_json_num(o, "kinds.foz.graphics.built"), GPL_PROGRAMS);
    KT_CHECK_EQ(kt_json_num(o, "kinds.foz.graphics.failed") +
                    kt_json_num(o, "kinds.foz.graphics.skipped"),
                0);
    json_object_put(o);
    if (validated) {
        kt_validation_end();
        KT_CHECK_EQ(kt_validation_errors(log), 0);
    }
}

/*
 * Graphics pipelines with pNext structures and dynamic states of device
 * extensions (fw_write_state_extensions) are built on kiln's own context,
 * which enables what the Fossilize builder asks for where the device has
 * it: on lavapipe, which offers every one of them, all are built; on any
 * device none fails. Under the validation layer, which reports nothing,
 * when it is installed (features the context left off would be errors).
 */
KT_CASE(state_extensions_build)
{
    const char *dir = kt_tmpdir();
    char log[4200];
    struct case_files f;
    case_files(dir, "state.foz", &f);
    FW_NEED(fw_write_state_extensions(f.arc, 0xe000));
    bool validated = kt_validation_begin(dir, log, sizeof(log));
    if (!validated)
        printf("skipped: the validation part (no Khronos validation layer installed)\n");
    int rc;
    struct json_object *o = prepare_archive(&f, 2, &rc);
    if (validated)
        kt_validation_end();
    struct json_object *dev = NULL;
    bool lavapipe = json_object_object_get_ex(o, "device", &dev) &&
                    strstr(json_object_get_string(dev), "llvmpipe") != NULL;
    KT_CHECK_EQ(kt_json_num(o, "archive_pipelines.graphics.unique"), FW_STATE_EXTENSION_PIPELINES);
    KT_CHECK_EQ(kt_json_num(o, "kinds.foz.graphics.failed"), 0);
    KT_CHECK_EQ(kt_json_num(o, "kinds.foz.graphics.built") +
                    kt_json_num(o, "kinds.foz.graphics.skipped"),
                FW_STATE_EXTENSION_PIPELINES);
    if (lavapipe || kt_json_num(o, "kinds.foz.graphics.skipped") == 0) {
        KT_CHECK_EQ(rc, 0);
        KT_CHECK_EQ(kt_json_num(o, "kinds.foz.graphics.built"), FW_STATE_EXTENSION_PIPELINES);
        KT_CHECK_EQ(kt_json_num(o, "kinds.foz.graphics.skipped"), 0);
    } else {
        printf("skipped: building all (the device lacks an extension: %s.err)\n", f.out);
    }
    json_object_put(o);
    if (validated)
        KT_CHECK_EQ(kt_validation_errors(log), 0);
}

/* A link naming a library the archive lacks: that pipeline is left out
 * with one line naming it; the rest are built. */
KT_CASE(gpl_missing_library)
{
    const char *dir = kt_tmpdir();
    struct case_files f;
    case_files(dir, "gpl.foz", &f);
    write_gpl(f.arc, true);
    int rc;
    struct json_object *o = prepare_archive(&f, 0, &rc);
    KT_CHECK_EQ(kt_json_num(o, "archive_pipelines.graphics.found"), GPL_PIPELINES - 1);
    KT_CHECK_EQ(kt_json_num(o, "archive_pipelines.graphics.unreadable"), 1);
    KT_CHECK_EQ(kt_json_num(o, "archive_pipelines.graphics.library_parts"), GPL_STAGELESS - 1);
    KT_CHECK_EQ(kt_json_num(o, "programs"), GPL_PROGRAMS - 1);
    if (kt_json_num(o, "kinds.foz.graphics.skipped") == 0) {
        KT_CHECK_EQ(rc, 0);
        KT_CHECK_EQ(kt_json_num(o, "kinds.foz.graphics.built"), GPL_PROGRAMS - 1);
    }
    KT_CHECK_EQ(kt_json_num(o, "kinds.foz.graphics.failed"), 0);
    json_object_put(o);
    char err[4300];
    snprintf(err, sizeof(err), "%s.err", f.out);
    KT_CHECK_EQ(kt_occurrences(err, "graphics pipeline 000000000000c004"), 1);
}

/* Export keeps what an import of libraries and ray-tracing pipelines
 * stored: every link with its parts and their modules, and the ray-tracing
 * library with its link; imported again and prepared, the same counts. */
KT_CASE(library_round_trip)
{
    const char *dir = kt_tmpdir();
    char gpl[4200], rt[4200], c1[4200], c2[4200], back[4200], out[4200], args[20000];
    snprintf(gpl, sizeof(gpl), "%s/gpl.foz", dir);
    snprintf(rt, sizeof(rt), "%s/rt.foz", dir);
    snprintf(c1, sizeof(c1), "%s/c1", dir);
    snprintf(c2, sizeof(c2), "%s/c2", dir);
    snprintf(back, sizeof(back), "%s/back.foz", dir);
    snprintf(out, sizeof(out), "%s/out.json", dir);
    write_gpl(gpl, false);
    write_rt(rt);
    snprintf(args, sizeof(args), "import foz --json --cache '%s' '%s' '%s'", c1, gpl, rt);
    KT_CHECK_EQ(kt_cli_run(out, args), 0);
    struct json_object *o = kt_cli_json(out);
    KT_CHECK_EQ(kt_json_num(o, "imported"), GPL_PROGRAMS + 3);
    json_object_put(o);
    snprintf(args, sizeof(args), "export foz --json --cache '%s' '%s'", c1, back);
    KT_CHECK_EQ(kt_cli_run(out, args), 0);
    o = kt_cli_json(out);
    KT_CHECK_EQ(kt_json_num(o, "pipelines"), GPL_PROGRAMS + 3);
    KT_CHECK_EQ(kt_json_num(o, "raytracing"), 3);
    KT_CHECK_EQ(kt_json_num(o, "extra_dropped"), 0);
    json_object_put(o);
    snprintf(args, sizeof(args), "prepare --json --jobs 2 --cache '%s' --corpus '%s'", c2, back);
    int rc = kt_cli_run(out, args);
    o = kt_cli_json(out);
    kt_cli_require_vulkan(o, out);
    KT_CHECK_EQ(rc, 0);
    KT_CHECK_EQ(kt_json_num(o, "archive_pipelines.graphics.found"), GPL_PIPELINES);
    KT_CHECK_EQ(kt_json_num(o, "archive_pipelines.graphics.unique"), GPL_PROGRAMS);
    KT_CHECK_EQ(kt_json_num(o, "archive_pipelines.raytracing.unique"), 3);
    KT_CHECK_EQ(kt_json_num(o, "kinds.foz.graphics.failed"), 0);
    if (kt_json_num(o, "kinds.foz.graphics.skipped") == 0)
        KT_CHECK_EQ(kt_json_num(o, "kinds.foz.graphics.built"), GPL_PROGRAMS);
    check_raytracing(o, 3);
    json_object_put(o);
}

KT_MAIN(KT_ENTRY(pipelines_dedup), KT_ENTRY(pipelines_unreadable), KT_ENTRY(prepare_written),
        KT_ENTRY(prepare_validated), KT_ENTRY(import_start), KT_ENTRY(single_archive),
        KT_ENTRY(export_round_trip), KT_ENTRY(gpl_build), KT_ENTRY(gpl_missing_library),
        KT_ENTRY(library_round_trip), KT_ENTRY(state_extensions_build))
