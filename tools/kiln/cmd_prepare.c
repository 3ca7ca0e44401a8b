/*
 * cmd_prepare.c - `kiln prepare`: translate, pack and store every program
 * of a corpus (or of the generator), then build every pipeline.
 *
 * A thin layer over kiln_prepare (include/kiln/prep.h): it parses the
 * options, draws the progress of each phase on stderr, and prints the
 * summary (a table, or one JSON object with --json). Exit codes: 0 when
 * every program was stored and every pipeline built, 1 when something
 * failed (a program, a pipeline, the cache, Vulkan), 2 for bad usage, a
 * corpus folder that cannot be read, or a cache folder that holds something
 * else than a cache. A bad corpus is reported by the library's own error
 * line (kiln_prepare logs each one, naming what and where), so the command
 * adds none of its own there; a cache that cannot be opened the library
 * logs at info only, and the command prints the line.
 */
#include "cli.h"
#include "cli_kinds.h"
#include "commands.h"

#include <dirent.h>
#include <getopt.h>
#include <inttypes.h>
#include <string.h>

/* The most archives one command line names (--corpus A.foz B.foz ...). */
#define MAX_ARCHIVES 4096

static const char help[] =
    "usage: %s [--corpus DIR | --corpus FILE.foz [FILE.foz...] | --generate N]\n"
    "       [--seed S] [--cache DIR] [--jobs N|auto] [--dict] [--no-vulkan]\n"
    "       [--device N] [--retry-failed] [--memory-budget B] [--background]\n"
    "       [--isolate] [--timeout-ms MS] [--reset] [--layer DIR]... [--max-size SIZE|none]\n"
    "       [--binaries off|on|auto] [--json]\n"
    "\n"
    "Translates every program to SPIR-V (skipping those the cache holds already),\n"
    "packs and stores them in the program cache, then builds every pipeline with\n"
    "shader modules that live only for their create call, and saves the driver's\n"
    "pipeline cache (pipelines.vkc) for `kiln start`.\n"
    "\n"
    "  --corpus DIR    programs from a folder: NAME.comp, NAME.vert + NAME.frag\n"
    "                  (GLSL), or the same names with .spv (SPIR-V); or Fossilize\n"
    "                  archives FILE.foz... (after --corpus, or --corpus repeated):\n"
    "                  every recorded pipeline (graphics, compute, ray-tracing;\n"
    "                  pipeline libraries built inside the pipelines linking\n"
    "                  them; skipped and counted where the device lacks what one\n"
    "                  needs, e.g. VK_KHR_ray_tracing_pipeline), each once, built with the\n"
    "                  archive's own layouts, render passes and constants, in the\n"
    "                  cache that `kiln import foz` fills (what it imported is not\n"
    "                  stored again)\n"
    "  --generate N    N programs of kiln's generator of emulator-like programs\n"
    "                  (the default, with N = %u)\n"
    "  --seed S        the generator's seed (default 0x%" PRIx64 ")\n"
    "  --cache DIR     the cache folder, made when missing (default: $KILN_CACHE_DIR,\n"
    "                  else $XDG_CACHE_HOME/kiln, else ~/.cache/kiln)\n"
    "  --jobs N|auto   workers (default auto: the pool policy, from usable CPUs\n"
    "                  and free memory)\n"
    "  --dict          give the cache a packing dictionary: when it has none, one\n"
    "                  is trained from its programs and every record repacked with\n"
    "                  it before the pipelines are built (a cache that has one,\n"
    "                  e.g. from `kiln cache repack --dict`, is always kept and\n"
    "                  used, with or without --dict)\n"
    "  --no-vulkan     translate and store only; build no pipeline\n"
    "  --device N      the Vulkan device by index (default: the first discrete GPU,\n"
    "                  else the first device)\n"
    "  --retry-failed  build again the programs the build ledger records as failed\n"
    "                  on this driver (by default they are skipped and counted)\n"
    "  --memory-budget B  keep kiln's resident memory under B bytes (suffixes K, M,\n"
    "                  G): fewer builds run at once near it, never fewer than one\n"
    "                  (default: three quarters of what is free; 0: no budget)\n"
    "  --background    idle CPU and I/O priority, at most a quarter of the CPUs\n"
    "                  (unless --jobs); Ctrl-C or SIGTERM stops it cleanly, and the\n"
    "                  next run resumes where it stopped\n"
    "  --isolate       build the pipelines in worker processes (at most one per\n"
    "                  job, as many as the work pays for; several programs per\n"
    "                  message): a driver that crashes or hangs fails that\n"
    "                  pipeline only\n"
    "                  (KILN_ECRASH, KILN_ETIMEDOUT), and the run goes on\n"
    "  --timeout-ms MS with --isolate: the most one pipeline may take, fixed; a\n"
    "                  worker past it is killed (default: learned from the builds\n"
    "                  seen, 10 x their p99, at least 10 s, at most 60 s)\n"
    "  --reset         start a new cache in DIR: the cache there (of any stamp,\n"
    "                  version, or with a damaged header) is set aside, its files\n"
    "                  renamed programs.*.<stamp>.old (never removed)\n"
    "  --layer DIR     a read-only cache beneath this one: what it holds is not\n"
    "                  translated or stored again; repeatable, at most 8\n"
    "  --max-size SIZE|none  give the cache a size cap (K, M, G suffixes), which it\n"
    "                keeps itself and remembers: a store past it evicts the least\n"
    "                recently used records (never this run's); none clears it\n"
    "  --binaries off|on|auto  also keep each pipeline's driver binaries\n"
    "                  (VK_KHR_pipeline_binary) per pipeline under DIR/binaries/, for\n"
    "                  kiln start --binaries; binaries of an older driver are removed\n"
    "                  and kept again (on: one warning where the device lacks it,\n"
    "                  auto: quietly pipelines.vkc; default off)\n"
    "  --json          one JSON object on stdout\n"
    "  --help          this text\n"
    "\n"
    "Pipelines are counted per state kind (builtin: kiln's own shapes; foz: a\n"
    "Fossilize archive's, split into graphics, compute and ray-tracing): built,\n"
    "skipped (the device lacks what one needs, with the first reason) and failed.\n"
    "\n"
    "A second run over the same programs on the same driver builds nothing: the\n"
    "build ledger (ledger.kpl) and pipelines.vkc answer. SIGINT or SIGTERM stops any\n"
    "run cleanly (what was done is kept). A second signal ends it at once (one within\n"
    "0.5 s of the first counts as the same), and a run that has not ended 10 s after\n"
    "the first (a driver or shaderc stuck) is ended then: the cache is crash-safe.\n"
    "\n"
    "Exit codes: 0 done, 1 something failed (each failure is logged), 2 bad usage, an\n"
    "unreadable corpus, or a cache folder that holds something else, 130 stopped by\n"
    "a signal (the report's first line says how far it got).\n";

/* The run's cancel callback: a signal (cli_stop_asked), or shaderc made
 * unusable in this process (kiln_glsl_unusable: every later translation
 * would fail, and one waiting on glslang's lock never returns), which asks
 * the same stop with the same deadline. Thread-safe. */
static bool stop_requested(void *user)
{
    if (kiln_glsl_unusable() && !cli_stop_asked(user))
        cli_stop_request();
    return cli_stop_asked(user);
}

/* What the command line names as the programs, and what is opened for it. */
struct prep_input {
    const char *corpus;    /* a folder or the first .foz; NULL: the generator */
    const char **archives; /* with .foz: every archive named (corpus is the first) */
    size_t narchives;
    uint32_t generate;
    uint64_t seed;
    struct kiln_generator gen;
    struct kiln_corpus *folder;
    struct kiln_foz_pipelines *foz;
    struct kiln_glsl *glsl;
    struct kiln_program_source src;
};

static bool is_foz(const char *path)
{
    size_t n = strlen(path);
    return n >= 4 && strcmp(path + n - 4, ".foz") == 0;
}

/* "no programs in the corpus folder", with what to do when it holds
 * Fossilize archives instead (they are named one by one). */
static void no_programs(const char *dir)
{
    unsigned foz = 0;
    DIR *d = opendir(dir);
    for (struct dirent *e; d && (e = readdir(d)) != NULL;)
        foz += is_foz(e->d_name);
    if (d)
        closedir(d);
    if (foz)
        kiln_log(KILN_LOG_ERROR, "prep",
                 "%s: no programs in the corpus folder, but %u Fossilize archive%s: name them "
                 "(--corpus %s/*.foz), or import them first (kiln import foz %s/*.foz)",
                 dir, foz, foz == 1 ? "" : "s", dir, dir);
    else
        kiln_log(KILN_LOG_ERROR, "prep",
                 "%s: no programs in the corpus folder (NAME.comp, NAME.vert + NAME.frag, or the "
                 "same with .spv)",
                 dir);
}

/*
 * Opens the program source the options name (tools/gen, kiln/foz.h) and
 * the GLSL translator (tools/glsl) its programs need, and points `o` at
 * them. @return 0, or the error with *step set (each logged as one line).
 */
static int open_input(struct prep_input *in, struct kiln_prepare_options *o,
                      enum kiln_prep_step *step)
{
    int rc;
    *step = KILN_PREP_STEP_INPUT;
    if (in->corpus && is_foz(in->corpus)) {
        if ((rc = kiln_foz_pipelines_open(in->archives, in->narchives, &in->foz)) < 0)
            return rc; /* logged: one line naming the archive */
        kiln_foz_pipelines_source(in->foz, &in->src);
    } else if (in->corpus) {
        if ((rc = kiln_corpus_open(in->corpus, &in->folder)) < 0)
            return rc;
        kiln_corpus_source(in->folder, &in->src);
    } else {
        in->gen = (struct kiln_generator){.seed = in->seed, .count = in->generate};
        kiln_generator_source(&in->gen, &in->src);
    }
    if (in->src.count == 0) {
        if (in->foz)
            kiln_log(KILN_LOG_ERROR, "prep", "%s%s: no pipelines in the archive%s", in->corpus,
                     in->narchives > 1 ? " ..." : "", in->narchives > 1 ? "s" : "");
        else
            no_programs(in->corpus);
        return KILN_EINVAL;
    }
    if (!in->foz) { /* an archive's programs are SPIR-V already */
        *step = KILN_PREP_STEP_OTHER;
        if ((rc = kiln_glsl_create(KILN_GLSL_OPT_NONE, &in->glsl)) < 0) {
            kiln_log(KILN_LOG_ERROR, "prep", "prepare: no GLSL translator: %s", kiln_strerror(rc));
            return rc;
        }
        o->translator = kiln_glsl_translator(in->glsl);
    }
    o->source = &in->src;
    *step = KILN_PREP_STEP_NONE;
    return KILN_OK;
}

static void close_input(struct prep_input *in)
{
    kiln_foz_pipelines_destroy(in->foz);
    in->foz = NULL;
    kiln_corpus_destroy(in->folder);
    kiln_glsl_destroy(in->glsl);
}

/* What the archives held: per Fossilize kind found, distinct, met again
 * in another archive, unreadable (each logged when it was met). */
static void print_json_archives(struct cli_json *j, const struct prep_input *in)
{
    struct kiln_foz_pipelines_stats st = KILN_FOZ_PIPELINES_STATS_INIT;
    kiln_foz_pipelines_get_stats(in->foz, SIZE_MAX, &st);
    cli_json_array_begin(j, "archives");
    for (size_t i = 0; i < in->narchives; i++)
        cli_json_str(j, NULL, in->archives[i]);
    cli_json_array_end(j);
    cli_json_object_begin(j, "archive_pipelines");
    for (int k = 0; k < KILN_FOZ_KIND_COUNT; k++) {
        cli_json_object_begin(j, kiln_foz_kind_name((enum kiln_foz_kind)k));
        cli_json_u64(j, "found", st.found[k]);
        cli_json_u64(j, "unique", st.unique[k]);
        cli_json_u64(j, "duplicates", st.duplicates[k]);
        cli_json_u64(j, "unreadable", st.unreadable[k]);
        cli_json_u64(j, "library_parts", st.library_parts[k]);
        cli_json_u64(j, "refused", st.refused[k]);
        cli_json_object_end(j);
    }
    cli_json_object_end(j);
    cli_json_u64(j, "entries_skipped", st.entries_skipped);
}

static void print_text_archives(const struct prep_input *in)
{
    struct kiln_foz_pipelines_stats st = KILN_FOZ_PIPELINES_STATS_INIT;
    kiln_foz_pipelines_get_stats(in->foz, SIZE_MAX, &st);
    printf("  archives  ");
    const char *sep = "";
    for (int k = 0; k < KILN_FOZ_KIND_COUNT; k++) {
        if (!st.found[k])
            continue;
        printf("%s %" PRIu64 " %s (%" PRIu64 " distinct, %" PRIu64 " unreadable)", sep, st.found[k],
               kiln_foz_kind_name((enum kiln_foz_kind)k), st.unique[k], st.unreadable[k]);
        sep = ",";
    }
    if (st.entries_skipped)
        printf("; %" PRIu64 " damaged entries skipped", st.entries_skipped);
    printf("\n");
}

#define PREPARE_PHASES 9

/* The phases of a run, as the table and "seconds" give them: the table
 * has the dict row only after --dict trained one, and the vulkan_overlap
 * row (the part of vulkan hidden beside the translation, counted in
 * vulkan but not in total) only when some was hidden. @return how many
 * rows it wrote. */
static size_t prepare_phases(const struct kiln_prepare_summary *s, bool table,
                             struct cli_phase_time rows[PREPARE_PHASES])
{
    rows[0] = (struct cli_phase_time){"open", s->open_ns};
    rows[1] = (struct cli_phase_time){"translate", s->translate_ns};
    rows[2] = (struct cli_phase_time){table && !s->dict_ns ? NULL : "dict", s->dict_ns};
    rows[3] = (struct cli_phase_time){"load", s->load_ns};
    rows[4] = (struct cli_phase_time){"vulkan", s->vulkan_ns};
    rows[5] = (struct cli_phase_time){table && !s->vulkan_overlap_ns ? NULL : "vulkan_overlap",
                                      s->vulkan_overlap_ns};
    rows[6] = (struct cli_phase_time){"pipelines", s->pipelines_ns};
    rows[7] = (struct cli_phase_time){"save", s->save_ns};
    rows[8] = (struct cli_phase_time){"total", s->total_ns};
    return PREPARE_PHASES;
}

static void print_json(const struct kiln_prepare_options *o, const struct prep_input *in,
                       const struct kiln_prepare_summary *s,
                       const struct kiln_foz_builder_stats *fst)
{
    struct cli_json j;
    char stamp[24];
    snprintf(stamp, sizeof(stamp), "%016" PRIx64, s->stamp);
    cli_json_begin(&j);
    cli_json_str(&j, "cache_dir", o->cache_dir);
    cli_json_str(&j, "source", in->corpus ? "corpus" : "generated");
    if (in->corpus)
        cli_json_str(&j, "corpus", in->corpus);
    if (in->foz)
        print_json_archives(&j, in);
    if (!in->corpus)
        cli_json_u64(&j, "seed", in->seed);
    cli_json_str(&j, "stamp", stamp);
    cli_json_str(&j, "cache_open", kiln_cache_open_kind_name(s->open_kind));
    cli_json_u64(&j, "programs", s->programs);
    cli_json_u64(&j, "translated", s->translated);
    cli_json_u64(&j, "cached", s->cached);
    cli_json_u64(&j, "failed", s->failed);
    cli_json_u64(&j, "remade", s->remade);
    cli_json_u64(&j, "pipelines_built", s->pipelines_built);
    cli_json_u64(&j, "pipelines_failed", s->pipelines_failed);
    cli_json_u64(&j, "driver_compiles", s->driver_compiles);
    cli_json_u64(&j, "ledger_skipped", s->ledger_skipped);
    cli_json_u64(&j, "ledger_failed", s->ledger_failed);
    cli_json_u64(&j, "crash_skipped", s->crash_skipped);
    cli_json_u64(&j, "feedback_pipelines", s->feedback_pipelines);
    cli_json_u64(&j, "driver_cache_hits", s->driver_cache_hits);
    struct cli_binaries bins = CLI_BINARIES(s);
    cli_json_binaries(&j, &bins);
    cli_json_u64(&j, "driver_ns", s->driver_ns);
    struct cli_isolated iso = CLI_ISOLATED(s);
    cli_json_isolated(&j, o->isolate ? &iso : NULL);
    cli_json_u64(&j, "memory_budget_bytes", s->memory_budget);
    if (s->memory_budget)
        cli_json_bool(&j, "within_budget", s->peak_rss <= s->memory_budget);
    else
        cli_json_null(&j, "within_budget");
    cli_json_bool(&j, "background", o->background);
    cli_json_bool(&j, "canceled", s->canceled);
    cli_json_u64(&j, "pipelines_skipped", s->pipelines_skipped);
    cli_json_u64(&j, "recorded_invalid", s->recorded_invalid);
    cli_json_kinds(&j, s->kinds, fst);
    cli_json_u64(&j, "spirv_bytes", s->spirv_bytes);
    cli_json_u64(&j, "packed_bytes", s->packed_bytes);
    cli_json_str(&j, "codec", kiln_codec_name(o->codec));
    cli_json_hex_or_null(&j, "dict_id", s->dict_id);
    cli_json_u64(&j, "dict_bytes", s->dict_bytes);
    cli_json_bool(&j, "dict_trained", s->dict_trained);
    if (s->dict_trained) {
        cli_json_u64(&j, "dict_payload_bytes_before", s->dict_payload_before);
        cli_json_u64(&j, "dict_payload_bytes_after", s->dict_payload_after);
    }
    cli_json_u64(&j, "workers", s->workers);
    cli_json_str(&j, "workers_reason", s->workers_reason);
    cli_json_prep_vulkan(&j, s->vulkan, s->device, s->vk_cache_state, s->vk_cache_loaded_bytes);
    struct cli_phase_time rows[PREPARE_PHASES];
    cli_json_phase_seconds(&j, rows, prepare_phases(s, false, rows));
    cli_json_prep_end(&j, s->peak_rss, s->error, s->step);
    cli_json_end(&j);
}

/* A stopped run's first line: what was done and what was not. */
static void print_stopped(const struct kiln_prepare_summary *s)
{
    uint64_t stored = s->translated + s->cached;
    if (stored + s->failed < s->programs)
        printf("stopped after %" PRIu64 " of %" PRIu64 " program%s; run it again to resume\n",
               stored, s->programs, CLI_S(s->programs));
    else
        printf("stopped after %" PRIu64 " of %" PRIu64 " pipeline%s (every program stored); run "
               "it again to resume\n",
               s->pipelines_built + s->ledger_skipped, s->programs, CLI_S(s->programs));
}

static void print_text(const struct kiln_prepare_options *o, const struct prep_input *in,
                       const struct kiln_prepare_summary *s,
                       const struct kiln_foz_builder_stats *fst)
{
    char b1[32];
    if (s->canceled)
        print_stopped(s);
    else if (in->foz)
        printf("prepared %" PRIu64 " pipeline%s of %zu Fossilize archive%s (%s%s) into %s\n",
               s->programs, CLI_S(s->programs), in->narchives, in->narchives == 1 ? "" : "s",
               in->corpus, in->narchives > 1 ? " ..." : "", o->cache_dir);
    else if (in->corpus)
        printf("prepared %" PRIu64 " program%s of %s into %s\n", s->programs, CLI_S(s->programs),
               in->corpus, o->cache_dir);
    else
        printf("prepared %" PRIu64 " generated program%s (seed 0x%" PRIx64 ") into %s\n",
               s->programs, CLI_S(s->programs), in->seed, o->cache_dir);
    printf("  programs   %" PRIu64 " translated and stored, %" PRIu64 " already cached, %" PRIu64
           " failed\n",
           s->translated, s->cached, s->failed);
    if (s->remade)
        printf("  damaged    %" PRIu64 " record%s could not be read back: made again\n", s->remade,
               CLI_S(s->remade));
    if (s->translated)
        printf("  spir-v     %s packed to %s (%s, %.2fx)\n",
               cli_format_bytes(b1, sizeof(b1), s->spirv_bytes),
               cli_format_bytes((char[32]){0}, 32, s->packed_bytes), kiln_codec_name(o->codec),
               s->packed_bytes ? (double)s->spirv_bytes / (double)s->packed_bytes : 0.0);
    if (s->dict_trained)
        printf("  dictionary %016" PRIx64 " trained (%s): payloads %s -> %s (%.2fx)\n", s->dict_id,
               cli_format_bytes(b1, sizeof(b1), s->dict_bytes),
               cli_format_bytes((char[32]){0}, 32, s->dict_payload_before),
               cli_format_bytes((char[32]){0}, 32, s->dict_payload_after),
               s->dict_payload_after
                   ? (double)s->dict_payload_before / (double)s->dict_payload_after
                   : 0.0);
    else if (s->dict_id)
        printf("  dictionary %016" PRIx64 " (the cache's, %s)\n", s->dict_id,
               cli_format_bytes(b1, sizeof(b1), s->dict_bytes));
    if (in->foz)
        print_text_archives(in);
    if (s->vulkan) {
        printf("  pipelines  %" PRIu64 " built, %" PRIu64 " skipped, %" PRIu64 " failed on %s\n",
               s->pipelines_built, s->pipelines_skipped, s->pipelines_failed, s->device);
        cli_print_kinds(s->kinds, fst);
        printf("  ledger     %" PRIu64 " driver compile%s, %" PRIu64
               " answered by the build ledger (%" PRIu64 " failed before)\n",
               s->driver_compiles, CLI_S(s->driver_compiles), s->ledger_skipped, s->ledger_failed);
        cli_print_driver_word(s->feedback_pipelines, s->driver_cache_hits, s->driver_ns);
        struct cli_binaries bins = CLI_BINARIES(s);
        cli_print_binaries(&bins);
        if (s->crash_skipped)
            printf("  crashes    %" PRIu64 " in flight when a run died: not built, recorded\n",
                   s->crash_skipped);
    } else
        printf("  pipelines  none built (%s)\n", o->no_vulkan  ? "--no-vulkan"
                                                 : s->canceled ? "stopped before them"
                                                               : "no Vulkan");
    if (s->recorded_invalid)
        printf("  recorded   %" PRIu64 " pipeline%s kept though the SPIR-V validator refuses a"
               " stage (recorded from an application; %s)\n",
               s->recorded_invalid, CLI_S(s->recorded_invalid),
               s->recorded_invalid == 1 ? "it parses" : "they parse");
    printf("  workers    %s\n", s->workers_reason);
    if (s->memory_budget && s->peak_rss > s->memory_budget) {
        /* Said, not hidden: the pools never hold fewer than one build. */
        char b2[32];
        printf("  memory     budget %s NOT held: peak %s (one build at a time needed more)\n",
               cli_format_bytes(b1, sizeof(b1), s->memory_budget),
               cli_format_bytes(b2, sizeof(b2), s->peak_rss));
    } else if (s->memory_budget) {
        printf("  memory     budget %s\n", cli_format_bytes(b1, sizeof(b1), s->memory_budget));
    }
    printf("  cache      %s (opened: %s), stamp %016" PRIx64 "\n", o->cache_dir,
           kiln_cache_open_kind_name(s->open_kind), s->stamp);
    struct cli_phase_time rows[PREPARE_PHASES];
    cli_print_phase_table(rows, prepare_phases(s, true, rows), s->peak_rss);
}

int cmd_prepare(int argc, char **argv)
{
    const char *name = argv[0];
    static const struct option longopts[] = {
        {"corpus", required_argument, NULL, 'c'},
        {"generate", required_argument, NULL, 'g'},
        {"seed", required_argument, NULL, 's'},
        {"cache", required_argument, NULL, 'C'},
        {"jobs", required_argument, NULL, 'j'},
        {"no-vulkan", no_argument, NULL, 'V'},
        {"device", required_argument, NULL, 'd'},
        {"json", no_argument, NULL, 'J'},
        {"layer", required_argument, NULL, 'L'},
        CLI_MAX_SIZE_OPTION,
        {"dict", no_argument, NULL, 'D'},
        {"retry-failed", no_argument, NULL, 'R'},
        {"memory-budget", required_argument, NULL, 'M'},
        {"background", no_argument, NULL, 'B'},
        {"isolate", no_argument, NULL, 'I'},
        {"timeout-ms", required_argument, NULL, 'T'},
        {"reset", no_argument, NULL, 'X'},
        {"binaries", required_argument, NULL, 'b'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    struct kiln_prepare_options o = KILN_PREPARE_OPTIONS_INIT;
    kiln_prepare_options_init(&o);
    static const char *archives[MAX_ARCHIVES];
    size_t nnamed = 0;
    o.cache_dir = NULL; /* the default folder, from cli_prep_setup */
    struct prep_input in = {.generate = KILN_PREPARE_DEFAULT_PROGRAMS,
                            .seed = KILN_GENERATOR_DEFAULT_SEED};
    struct cli_prep_flags f = {.cache_dir = &o.cache_dir,
                               .jobs = &o.jobs,
                               .no_vulkan = &o.no_vulkan,
                               .use_device_index = &o.use_device_index,
                               .device = &o.device};
    bool generate_given = false, reset = false;
    uint64_t v;
    int c, ex;
    optind = 1;
    opterr = 0;
    while ((c = cli_getopt(argc, argv, ":", longopts)) != -1) {
        switch (c) {
        case 'c':
            if (cli_check_path(name, "--corpus", optarg))
                return KILN_EXIT_USAGE;
            if (nnamed == MAX_ARCHIVES)
                return cli_usage_error(name, "more than %d archives", MAX_ARCHIVES);
            if (!in.corpus)
                in.corpus = optarg;
            archives[nnamed++] = optarg;
            break;
        case 'g':
            if (cli_parse_u64(name, "--generate", optarg, 1, UINT32_MAX, false, &v))
                return KILN_EXIT_USAGE;
            in.generate = (uint32_t)v;
            generate_given = true;
            break;
        case 's':
            if (cli_parse_seed(name, optarg, &in.seed))
                return KILN_EXIT_USAGE;
            break;
        case 'D':
            o.dict = true;
            break;
        case 'R':
            o.retry_failed = true;
            break;
        case 'M':
            if (cli_parse_u64(name, "--memory-budget", optarg, 0, UINT64_MAX, true, &v))
                return KILN_EXIT_USAGE;
            o.memory_budget = v ? v : UINT64_MAX; /* 0 on the command line: no budget */
            break;
        case 'B':
            o.background = true;
            break;
        case 'X':
            reset = true;
            break;
        case 'b':
            if (cli_parse_binaries(name, optarg, &o.binaries))
                return KILN_EXIT_USAGE;
            break;
        default:
            ex = cli_prep_option(name, c, argv, &f, help, name, KILN_PREPARE_DEFAULT_PROGRAMS,
                                 KILN_GENERATOR_DEFAULT_SEED);
            if (ex != CLI_NEXT_OPTION)
                return ex;
        }
    }
    /* Further archives after --corpus FILE.foz (getopt moved them here). */
    for (int i = optind; i < argc; i++) {
        if (!in.corpus || !is_foz(in.corpus) || !is_foz(argv[i]))
            return cli_usage_error(name, "unexpected argument '%s'", argv[i]);
        if (cli_check_path(name, "--corpus", argv[i]))
            return KILN_EXIT_USAGE;
        if (nnamed == MAX_ARCHIVES)
            return cli_usage_error(name, "more than %d archives", MAX_ARCHIVES);
        archives[nnamed++] = argv[i];
    }
    for (size_t i = 1; i < nnamed; i++)
        if (!is_foz(archives[i]) || !is_foz(in.corpus))
            return cli_usage_error(name, "--corpus names one folder, or Fossilize archives "
                                         "(FILE.foz) only");
    in.archives = archives;
    in.narchives = nnamed;
    if (in.corpus && generate_given)
        return cli_usage_error(name, "--corpus and --generate exclude each other");
    struct cli_builders builders;
    CLI_TRY(cli_prep_setup(name, &f, &builders));
    o.layers = f.layers;
    o.nlayers = f.nlayers;
    o.max_size = f.max_size;
    if (f.isolate)
        o.isolate = &f.iso;

    struct cli_phase_progress ps = {.phase = -1};
    struct kiln_prepare_summary s = KILN_PREPARE_SUMMARY_INIT;
    enum kiln_prep_step step;
    o.builders = builders.list;
    o.nbuilders = builders.n;
    int rc = open_input(&in, &o, &step);
    if (rc == KILN_OK && reset) {
        /* After the input, whose translator gives the new cache's stamp. */
        ex = cli_reset_cache(name, o.cache_dir, kiln_prepare_stamp(&o));
        if (ex != KILN_EXIT_OK) {
            close_input(&in);
            cli_builders_free(&builders);
            return ex;
        }
    }
    if (rc == KILN_OK) {
        /* Kept to the end: a close that hangs (a driver's, shaderc's) is
         * bounded by the deadline too. */
        o.cancel = stop_requested;
        cli_stop_install(name);
        rc = kiln_prepare(&o, cli_phase_progress, &ps, &s);
        cli_phase_progress_close(&ps);
    } else {
        memset(&s, 0, sizeof(s));
        s.size = sizeof(s);
        s.error = rc;
        s.step = step;
    }
    struct kiln_foz_builder_stats fst = KILN_FOZ_BUILDER_STATS_INIT;
    cli_builders_foz_stats(&builders, &fst);
    bool ok = rc == KILN_OK && s.failed == 0 && s.pipelines_failed == 0 && s.crash_skipped == 0;
    if (s.memory_budget && s.peak_rss > s.memory_budget) {
        char b1[32], b2[32];
        kiln_log(KILN_LOG_WARN, "prep",
                 "the memory budget of %s was not held: the peak was %s, since at least one "
                 "build always runs (give a larger --memory-budget, or fewer programs at once)",
                 cli_format_bytes(b1, sizeof(b1), s.memory_budget),
                 cli_format_bytes(b2, sizeof(b2), s.peak_rss));
    }
    if (f.json)
        print_json(&o, &in, &s, f.isolate ? NULL : &fst);
    else if (cli_prep_shows_table(rc, s.step))
        print_text(&o, &in, &s,
                   f.isolate ? NULL
                             : &fst); /* no table of zeros for bad input: its one line says it */
    close_input(&in);
    cli_builders_free(&builders);

    if (rc < 0) {
        if (s.step == KILN_PREP_STEP_INPUT)
            return KILN_EXIT_USAGE; /* kiln_prepare logged it: one line naming what and where */
        if (s.step == KILN_PREP_STEP_CACHE) {
            /* A cache folder that is not one is bad input (the library
             * logged it at info only); a failed write is a failure. */
            cli_error(name, "%s: cannot use the program cache: %s%s", o.cache_dir,
                      rc == KILN_ENOENT ? "not a folder" : kiln_strerror(rc), cli_reset_hint(rc));
            return cli_exit_for(rc);
        }
        /* shaderc poisoned by an out-of-memory: the run stops (canceled, or
         * out of memory since the translator's failure is passed up). */
        if ((rc == KILN_ECANCELED || rc == KILN_ENOMEM) && kiln_glsl_unusable())
            cli_error(name, "stopped: shaderc ran out of memory and cannot be used again in this "
                            "process: what was done is kept; run it again (with more memory) "
                            "to resume");
        else if (rc == KILN_ECANCELED) {
            cli_error(name, "stopped: what was done is kept; run it again to resume");
            if (cli_stop_by_signal())
                return KILN_EXIT_SIGNAL;
        } else if (s.step == KILN_PREP_STEP_VULKAN && rc == KILN_ENOTSUP)
            cli_error(name, "Vulkan is not available: programs stored, no pipeline built "
                            "(--no-vulkan translates and stores only)");
        else
            cli_error(name, "%s failed: %s", s.step == KILN_PREP_STEP_VULKAN ? "Vulkan" : "prepare",
                      kiln_strerror(rc));
        return KILN_EXIT_FAILED;
    }
    if (!ok && kiln_glsl_unusable()) {
        cli_error(name,
                  "%" PRIu64 " program(s) failed: shaderc ran out of memory and cannot be used "
                  "again in this process: run it again (with more memory)",
                  s.failed);
        return KILN_EXIT_FAILED;
    }
    if (!ok) {
        cli_error(name,
                  "%" PRIu64 " program(s) failed, %" PRIu64 " pipeline(s) failed, %" PRIu64
                  " in flight when a run died (each is logged above)",
                  s.failed, s.pipelines_failed, s.crash_skipped);
        return KILN_EXIT_FAILED;
    }
    return KILN_EXIT_OK;
}
