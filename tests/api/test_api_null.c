/*
 * test_api_null.c - every public function given NULL where it needs a
 * pointer: it answers KILN_EINVAL (one that returns no error code answers
 * its documented neutral value, 0, false or NULL; one that returns nothing
 * does nothing), and never crashes.
 *
 * The calls are one table (ROWS below): a row names the function, the call
 * with one NULL in it and the answer it must give; the other arguments are
 * real objects of the fixture, so each row reaches the check for its one
 * NULL. table_complete reads every header of include/kiln and fails for any KILN_API
 * function that takes a pointer and has no row (or a reasoned exemption),
 * so a new function cannot skip the rule. Before 0.2, kiln_cache_open(dir,
 * opt, NULL) and most of the rows crashed.
 */
#include "kiln_test.h"

#include <kiln.h>

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

/* kiln_log and kiln_translate_set_error with a NULL format: through
 * pointers, which carry no format attribute for the compiler to check. */
static void (*const log_fn)(enum kiln_log_level, const char *, const char *, ...) = kiln_log;
static void (*const set_error_fn)(const char *, ...) = kiln_translate_set_error;

/* The real objects beside each row's one NULL. */
static struct fixture {
    char dir[4096];
    char file[4200];
    struct kiln_cache *cache;
    struct kiln_pool *pool;
    struct kiln_pages *pages;
    struct kiln_cpuset set;
    struct kiln_topo *topo;
    struct kiln_program *program;
    const struct kiln_io *io;
    int fd;
    uint32_t words[5];
    void *blob;
    size_t blob_size;
    uint8_t buf[64];
    char text[64];
    size_t n;
    void *data;
    uint64_t u64;
    uint32_t u32;
    struct kiln_key key;
    enum kiln_codec codec;
    struct kiln_cache_entry entry;
    struct kiln_cache_entry *entries;
    struct kiln_cache_result *results;
    struct kiln_cache_result result;
    struct kiln_cache_stats stats;
    struct kiln_cache_check_report check;
    struct kiln_cache_prune_options prune;
    struct kiln_pack_dict *dict;
    struct kiln_pack_class_stats class_stats;
    struct kiln_stage_blob stage;
    struct kiln_spec_entry spec;
    struct kiln_payload_state state;
    struct kiln_pool_options pool_options;
    struct kiln_pool_machine machine;
    struct kiln_pool_plan plan;
    struct kiln_pool_progress progress;
    struct kiln_translator translator;
    struct kiln_source source;
    uint32_t *out_words;
    struct kiln_prepare_options prepare;
    struct kiln_start_options start;
    struct kiln_prepare_summary prepare_summary;
    struct kiln_start_summary start_summary;
    struct kiln_pin_plan pin;
    struct kiln_affinity_decision decision;
    struct kiln_vk_stage vk_stage;
    struct kiln_vk_graphics graphics;
    struct kiln_vk_pipeline *pipeline;
    struct kiln_vk_module *module;
    struct kiln_vk_stats vk_stats;
    const char *why;
    /* What a refused call sets to NULL: never one of the objects above. */
    struct kiln_pool *out_pool;
    struct kiln_cache *out_cache;
    struct kiln_program *out_program;
    struct kiln_program_sealed sealed;
    struct kiln_program_opened *opened;
    struct kiln_build_session_options session_options;
    struct kiln_build_session *session;
    struct kiln_build_run build_run;
    VkGraphicsPipelineCreateInfo link_ci;
    struct kiln_key link_keys[KILN_VK_PARTS];
    VkPipeline link_out;
    struct kiln_service_options service_options;
    struct kiln_pipeline_request service_request;
    struct kiln_service_stats service_stats;
    struct kiln_ticket_info ticket_info;
    struct kiln_service *service;
    struct kiln_ticket *ticket;
} F;

static int translate_none(void *user, const struct kiln_source *src, uint32_t **words,
                          size_t *nwords)
{
    (void)user;
    (void)src;
    *words = NULL;
    *nwords = 0;
    return KILN_ENOTSUP;
}

static void fixture_open(void)
{
    memset(&F, 0, sizeof(F));
    /* One folder for both: a second kt_tmpdir() would remove the first. */
    const char *tmp = kt_tmpdir();
    snprintf(F.dir, sizeof(F.dir), "%s/cache", tmp);
    snprintf(F.file, sizeof(F.file), "%s/file", tmp);
    struct kiln_cache_options o = {.size = sizeof(o), .flags = KILN_CACHE_CREATE};
    KT_REQUIRE_OK(kiln_cache_open(F.dir, &o, &F.cache));
    KT_REQUIRE_OK(kiln_pool_create(1, 4, &F.pool));
    KT_REQUIRE_OK(kiln_pages_create(64, &F.pages));
    KT_REQUIRE_OK(kiln_cpuset_parse_list(&F.set, "0-3", 3));
    /* A committed sysfs copy; Windows reads only the live system. */
    if (kiln_topo_read(KILN_SOURCE_DIR "/tests/fixtures/topo/x3d", 0, &F.topo) < 0)
        KT_REQUIRE_OK(kiln_topo_read(NULL, 0, &F.topo));
    KT_REQUIRE_OK(kiln_program_create("null-test", &F.program));
    F.io = kiln_io_default();
    KT_REQUIRE_OK(kiln_io_replace_file(F.io, F.file, "kiln", 4));
    KT_REQUIRE_OK(F.io->open(F.io, F.file, KILN_IO_READ, &F.fd));
    static const uint32_t header[5] = {0x07230203u, 0x00010000u, 0, 1, 0};
    memcpy(F.words, header, sizeof(header));
    KT_REQUIRE_OK(kiln_pack(F.words, 5, KILN_CODEC_RAW, NULL, &F.blob, &F.blob_size));
    F.stage = (struct kiln_stage_blob){
        .stage = KILN_VK_STAGE_COMPUTE_BIT, .blob = F.blob, .blob_size = F.blob_size};
    F.pool_options.workers = 1;
    F.translator.translate = translate_none;
    F.source.text = "void main() {}";
    F.source.size = strlen(F.source.text);
    kiln_prepare_options_init(&F.prepare);
    F.prepare.cache_dir = F.dir;
    F.start.cache_dir = F.dir;
    F.session_options.size = sizeof(F.session_options);
    F.build_run.size = sizeof(F.build_run);
    F.build_run.payload = F.buf;
    F.build_run.payload_size = 64;
    F.service_options.size = sizeof(F.service_options);
    F.service_request.size = sizeof(F.service_request);
    F.service_request.program = F.program;
    F.service_stats.size = sizeof(F.service_stats);
    F.ticket_info.size = sizeof(F.ticket_info);
    F.decision.on = false;
    F.vk_stage.blob = F.blob;
    F.vk_stage.blob_size = F.blob_size;
}

static void fixture_close(void)
{
    F.io->close(F.io, F.fd);
    kiln_pack_free(F.blob);
    kiln_program_destroy(F.program);
    kiln_topo_free(F.topo);
    kiln_cpuset_free(&F.set);
    kiln_pages_destroy(F.pages);
    kiln_pool_destroy(F.pool);
    kiln_cache_close(F.cache);
}

static int on_run(void *user, uint64_t first, uint64_t last, uint8_t value)
{
    (void)user;
    (void)first;
    (void)last;
    (void)value;
    return 0;
}

static int job(void *arg, unsigned worker)
{
    (void)arg;
    (void)worker;
    return 0;
}

/* The foz rows: the other pointers are scratch bytes (SCR), never read:
 * every foz function checks all its required pointers before it uses any,
 * so each row's one NULL is refused first. */
#define SCR ((void *)F.buf)
#define FOZ_ROWS(E, P, V)                                                                          \
    E(foz_open_path, kiln_foz_open, KILN_EINVAL, kiln_foz_open(SCR, NULL, SCR))                    \
    E(foz_open_foz, kiln_foz_open, KILN_EINVAL, kiln_foz_open(SCR, SCR, NULL))                     \
    E(foz_open_memory_data, kiln_foz_open_memory, KILN_EINVAL,                                     \
      kiln_foz_open_memory(NULL, 1, SCR, SCR))                                                     \
    E(foz_open_memory_foz, kiln_foz_open_memory, KILN_EINVAL,                                      \
      kiln_foz_open_memory(SCR, 1, SCR, NULL))                                                     \
    V(foz_close, kiln_foz_close, kiln_foz_close(NULL))                                             \
    E(foz_next_foz, kiln_foz_next, KILN_EINVAL, kiln_foz_next(NULL, SCR))                          \
    E(foz_next_entry, kiln_foz_next, KILN_EINVAL, kiln_foz_next(SCR, NULL))                        \
    E(foz_rewind_foz, kiln_foz_rewind, KILN_EINVAL, kiln_foz_rewind(NULL))                         \
    V(foz_get_stats_foz, kiln_foz_get_stats, kiln_foz_get_stats(NULL, SCR))                        \
    V(foz_get_stats_stats, kiln_foz_get_stats, kiln_foz_get_stats(SCR, NULL))                      \
    P(foz_name_foz, kiln_foz_name, kiln_foz_name(NULL))                                            \
    E(foz_decode_module_entry, kiln_foz_decode_module, KILN_EINVAL,                                \
      kiln_foz_decode_module(NULL, SCR))                                                           \
    E(foz_decode_module_module, kiln_foz_decode_module, KILN_EINVAL,                               \
      kiln_foz_decode_module(SCR, NULL))                                                           \
    V(foz_module_free, kiln_foz_module_free, kiln_foz_module_free(NULL))                           \
    E(foz_list_modules_foz, kiln_foz_list_modules, KILN_EINVAL, kiln_foz_list_modules(NULL, SCR))  \
    E(foz_list_modules_modules, kiln_foz_list_modules, KILN_EINVAL,                                \
      kiln_foz_list_modules(SCR, NULL))                                                            \
    V(foz_module_list_free, kiln_foz_module_list_free, kiln_foz_module_list_free(NULL))            \
    P(foz_module_list_find_modules, kiln_foz_module_list_find,                                     \
      kiln_foz_module_list_find(NULL, 1, 1))                                                       \
    E(foz_import_c, kiln_foz_import, KILN_EINVAL, kiln_foz_import(NULL, SCR, SCR))                 \
    E(foz_import_path, kiln_foz_import, KILN_EINVAL, kiln_foz_import(SCR, NULL, SCR))              \
    E(foz_programs_open_path, kiln_foz_programs_open, KILN_EINVAL,                                 \
      kiln_foz_programs_open(NULL, SCR))                                                           \
    E(foz_programs_open_out, kiln_foz_programs_open, KILN_EINVAL,                                  \
      kiln_foz_programs_open(SCR, NULL))                                                           \
    E(foz_programs_count_fp, kiln_foz_programs_count, 0, kiln_foz_programs_count(NULL))            \
    E(foz_programs_skipped_fp, kiln_foz_programs_skipped, 0, kiln_foz_programs_skipped(NULL))      \
    V(foz_programs_source_fp, kiln_foz_programs_source, kiln_foz_programs_source(NULL, SCR))       \
    V(foz_programs_source_src, kiln_foz_programs_source, kiln_foz_programs_source(SCR, NULL))      \
    V(foz_programs_destroy, kiln_foz_programs_destroy, kiln_foz_programs_destroy(NULL))            \
    E(foz_index_create_foz, kiln_foz_index_create, KILN_EINVAL, kiln_foz_index_create(NULL, SCR))  \
    E(foz_index_create_out, kiln_foz_index_create, KILN_EINVAL, kiln_foz_index_create(SCR, NULL))  \
    V(foz_index_destroy, kiln_foz_index_destroy, kiln_foz_index_destroy(NULL))                     \
    E(foz_index_pipelines_idx, kiln_foz_index_pipelines, 0, kiln_foz_index_pipelines(NULL, SCR))   \
    E(foz_index_pipelines_out, kiln_foz_index_pipelines, 0, kiln_foz_index_pipelines(SCR, NULL))   \
    E(foz_index_module_idx, kiln_foz_index_module, KILN_EINVAL,                                    \
      kiln_foz_index_module(NULL, 1, SCR))                                                         \
    E(foz_index_module_module, kiln_foz_index_module, KILN_EINVAL,                                 \
      kiln_foz_index_module(SCR, 1, NULL))                                                         \
    E(foz_closure_make_idx, kiln_foz_closure_make, KILN_EINVAL,                                    \
      kiln_foz_closure_make(NULL, 1, 1, SCR, SCR))                                                 \
    E(foz_closure_make_bytes, kiln_foz_closure_make, KILN_EINVAL,                                  \
      kiln_foz_closure_make(SCR, 1, 1, NULL, SCR))                                                 \
    E(foz_closure_make_size, kiln_foz_closure_make, KILN_EINVAL,                                   \
      kiln_foz_closure_make(SCR, 1, 1, SCR, NULL))                                                 \
    V(foz_closure_free, kiln_foz_closure_free, kiln_foz_closure_free(NULL))                        \
    E(foz_closure_inspect_bytes, kiln_foz_closure_inspect, KILN_EINVAL,                            \
      kiln_foz_closure_inspect(NULL, 1, SCR))                                                      \
    E(foz_closure_inspect_info, kiln_foz_closure_inspect, KILN_EINVAL,                             \
      kiln_foz_closure_inspect(SCR, 1, NULL))                                                      \
    E(foz_pipeline_key_closure, kiln_foz_pipeline_key, KILN_EINVAL,                                \
      kiln_foz_pipeline_key(NULL, 1, SCR, 1, SCR))                                                 \
    E(foz_pipeline_key_modules, kiln_foz_pipeline_key, KILN_EINVAL,                                \
      kiln_foz_pipeline_key(SCR, 1, NULL, 1, SCR))                                                 \
    E(foz_pipeline_key_key, kiln_foz_pipeline_key, KILN_EINVAL,                                    \
      kiln_foz_pipeline_key(SCR, 1, SCR, 1, NULL))                                                 \
    V(foz_limits_bound_l, kiln_foz_limits_bound, kiln_foz_limits_bound(NULL))                      \
    V(foz_limits_minimum_l, kiln_foz_limits_minimum, kiln_foz_limits_minimum(NULL))                \
    E(foz_closure_check_closure, kiln_foz_closure_check, KILN_EINVAL,                              \
      kiln_foz_closure_check(NULL, 1, SCR, SCR, 1))                                                \
    E(foz_pipeline_program_idx, kiln_foz_pipeline_program, KILN_EINVAL,                            \
      kiln_foz_pipeline_program(NULL, SCR, SCR))                                                   \
    E(foz_pipeline_program_ref, kiln_foz_pipeline_program, KILN_EINVAL,                            \
      kiln_foz_pipeline_program(SCR, NULL, SCR))                                                   \
    E(foz_pipeline_program_out, kiln_foz_pipeline_program, KILN_EINVAL,                            \
      kiln_foz_pipeline_program(SCR, SCR, NULL))                                                   \
    E(foz_pipelines_open_paths, kiln_foz_pipelines_open, KILN_EINVAL,                              \
      kiln_foz_pipelines_open(NULL, 1, SCR))                                                       \
    E(foz_pipelines_open_out, kiln_foz_pipelines_open, KILN_EINVAL,                                \
      kiln_foz_pipelines_open(SCR, 1, NULL))                                                       \
    E(foz_pipelines_count_fp, kiln_foz_pipelines_count, 0, kiln_foz_pipelines_count(NULL))         \
    E(foz_pipelines_archives_fp, kiln_foz_pipelines_archives, 0,                                   \
      kiln_foz_pipelines_archives(NULL))                                                           \
    P(foz_pipelines_path_fp, kiln_foz_pipelines_path, kiln_foz_pipelines_path(NULL, 1))            \
    P(foz_pipelines_get_fp, kiln_foz_pipelines_get, kiln_foz_pipelines_get(NULL, 1))               \
    V(foz_pipelines_stats_fp, kiln_foz_pipelines_get_stats,                                        \
      kiln_foz_pipelines_get_stats(NULL, 1, SCR))                                                  \
    V(foz_pipelines_stats_stats, kiln_foz_pipelines_get_stats,                                     \
      kiln_foz_pipelines_get_stats(SCR, 1, NULL))                                                  \
    E(foz_pipelines_load_fp, kiln_foz_pipelines_load, KILN_EINVAL,                                 \
      kiln_foz_pipelines_load(NULL, 1, SCR))                                                       \
    E(foz_pipelines_load_out, kiln_foz_pipelines_load, KILN_EINVAL,                                \
      kiln_foz_pipelines_load(SCR, 1, NULL))                                                       \
    V(foz_pipelines_source_fp, kiln_foz_pipelines_source, kiln_foz_pipelines_source(NULL, SCR))    \
    V(foz_pipelines_source_src, kiln_foz_pipelines_source, kiln_foz_pipelines_source(SCR, NULL))   \
    E(foz_pipelines_import_c, kiln_foz_pipelines_import, KILN_EINVAL,                              \
      kiln_foz_pipelines_import(NULL, SCR, SCR))                                                   \
    E(foz_pipelines_import_fp, kiln_foz_pipelines_import, KILN_EINVAL,                             \
      kiln_foz_pipelines_import(SCR, NULL, SCR))                                                   \
    E(foz_pipelines_import_reports, kiln_foz_pipelines_import, KILN_EINVAL,                        \
      kiln_foz_pipelines_import(SCR, SCR, NULL))                                                   \
    E(foz_pipelines_import_progress_c, kiln_foz_pipelines_import_progress, KILN_EINVAL,            \
      kiln_foz_pipelines_import_progress(NULL, SCR, SCR, NULL, NULL))                              \
    E(foz_pipelines_import_progress_fp, kiln_foz_pipelines_import_progress, KILN_EINVAL,           \
      kiln_foz_pipelines_import_progress(SCR, NULL, SCR, NULL, NULL))                              \
    E(foz_pipelines_import_progress_reports, kiln_foz_pipelines_import_progress, KILN_EINVAL,      \
      kiln_foz_pipelines_import_progress(SCR, SCR, NULL, NULL, NULL))                              \
    E(foz_pipelines_import_sized_c, kiln_foz_pipelines_import_sized, KILN_EINVAL,                  \
      kiln_foz_pipelines_import_sized(NULL, SCR, 64, SCR, NULL, NULL))                             \
    E(foz_pipelines_import_sized_fp, kiln_foz_pipelines_import_sized, KILN_EINVAL,                 \
      kiln_foz_pipelines_import_sized(SCR, NULL, 64, SCR, NULL, NULL))                             \
    E(foz_pipelines_import_sized_reports, kiln_foz_pipelines_import_sized, KILN_EINVAL,            \
      kiln_foz_pipelines_import_sized(SCR, SCR, 64, NULL, NULL, NULL))                             \
    V(foz_pipelines_destroy, kiln_foz_pipelines_destroy, kiln_foz_pipelines_destroy(NULL))         \
    E(foz_replay_options, kiln_foz_replay, KILN_EINVAL, kiln_foz_replay(NULL, SCR))                \
    E(foz_replay_report, kiln_foz_replay, KILN_EINVAL, kiln_foz_replay(SCR, NULL))                 \
    E(foz_writer_create_path, kiln_foz_writer_create, KILN_EINVAL,                                 \
      kiln_foz_writer_create(SCR, NULL, SCR))                                                      \
    E(foz_writer_create_out, kiln_foz_writer_create, KILN_EINVAL,                                  \
      kiln_foz_writer_create(SCR, SCR, NULL))                                                      \
    E(foz_writer_create_memory_out, kiln_foz_writer_create_memory, KILN_EINVAL,                    \
      kiln_foz_writer_create_memory(NULL))                                                         \
    E(foz_writer_add_w, kiln_foz_writer_add, KILN_EINVAL,                                          \
      kiln_foz_writer_add(NULL, 1, 1, SCR, 1, 1))                                                  \
    E(foz_writer_add_payload, kiln_foz_writer_add, KILN_EINVAL,                                    \
      kiln_foz_writer_add(SCR, 1, 1, NULL, 1, 1))                                                  \
    E(foz_writer_lookup_w, kiln_foz_writer_lookup, KILN_EINVAL,                                    \
      kiln_foz_writer_lookup(NULL, 1, 1, SCR, 1))                                                  \
    E(foz_writer_lookup_payload, kiln_foz_writer_lookup, KILN_EINVAL,                              \
      kiln_foz_writer_lookup(SCR, 1, 1, NULL, 1))                                                  \
    E(foz_writer_has_w, kiln_foz_writer_has, 0, kiln_foz_writer_has(NULL, 1, 1))                   \
    E(foz_module_encode_words, kiln_foz_module_encode, KILN_EINVAL,                                \
      kiln_foz_module_encode(1, NULL, 1, 1, SCR, SCR))                                             \
    E(foz_module_encode_payload, kiln_foz_module_encode, KILN_EINVAL,                              \
      kiln_foz_module_encode(1, SCR, 1, 1, NULL, SCR))                                             \
    E(foz_module_encode_size, kiln_foz_module_encode, KILN_EINVAL,                                 \
      kiln_foz_module_encode(1, SCR, 1, 1, SCR, NULL))                                             \
    V(foz_payload_free, kiln_foz_payload_free, kiln_foz_payload_free(NULL))                        \
    E(foz_writer_add_module_w, kiln_foz_writer_add_module, KILN_EINVAL,                            \
      kiln_foz_writer_add_module(NULL, 1, SCR, 1, 1, 1))                                           \
    E(foz_writer_add_module_words, kiln_foz_writer_add_module, KILN_EINVAL,                        \
      kiln_foz_writer_add_module(SCR, 1, NULL, 1, 1, 1))                                           \
    E(foz_writer_entries_w, kiln_foz_writer_entries, 0, kiln_foz_writer_entries(NULL))             \
    E(foz_writer_finish_w, kiln_foz_writer_finish, KILN_EINVAL, kiln_foz_writer_finish(NULL, SCR)) \
    P(foz_writer_data_w, kiln_foz_writer_data, kiln_foz_writer_data(NULL, SCR))                    \
    P(foz_writer_data_size, kiln_foz_writer_data, kiln_foz_writer_data(SCR, NULL))                 \
    V(foz_writer_destroy, kiln_foz_writer_destroy, kiln_foz_writer_destroy(NULL))                  \
    E(foz_export_c, kiln_foz_export, KILN_EINVAL, kiln_foz_export(NULL, SCR, SCR))                 \
    E(foz_export_out_path, kiln_foz_export, KILN_EINVAL, kiln_foz_export(SCR, NULL, SCR))          \
    E(foz_export_report, kiln_foz_export, KILN_EINVAL, kiln_foz_export(SCR, SCR, NULL))            \
    V(foz_limits_from_vk_vk, kiln_foz_limits_from_vk, kiln_foz_limits_from_vk(NULL, SCR))          \
    V(foz_limits_from_vk_l, kiln_foz_limits_from_vk, kiln_foz_limits_from_vk(SCR, NULL))           \
    E(foz_builder_create_options, kiln_foz_builder_create, KILN_EINVAL,                            \
      kiln_foz_builder_create(NULL, SCR))                                                          \
    E(foz_builder_create_out, kiln_foz_builder_create, KILN_EINVAL,                                \
      kiln_foz_builder_create(SCR, NULL))                                                          \
    E(foz_builder_build_b, kiln_foz_builder_build, KILN_EINVAL,                                    \
      kiln_foz_builder_build(NULL, SCR, 1, SCR, 1, VK_NULL_HANDLE, SCR, SCR, 1))                   \
    E(foz_builder_build_closure, kiln_foz_builder_build, KILN_EINVAL,                              \
      kiln_foz_builder_build(SCR, NULL, 1, SCR, 1, VK_NULL_HANDLE, SCR, SCR, 1))                   \
    E(foz_builder_build_stages, kiln_foz_builder_build, KILN_EINVAL,                               \
      kiln_foz_builder_build(SCR, SCR, 1, NULL, 1, VK_NULL_HANDLE, SCR, SCR, 1))                   \
    E(foz_builder_build_pipeline, kiln_foz_builder_build, KILN_EINVAL,                             \
      kiln_foz_builder_build(SCR, SCR, 1, SCR, 1, VK_NULL_HANDLE, NULL, SCR, 1))                   \
    E(foz_builder_build_with_b, kiln_foz_builder_build_with, KILN_EINVAL,                          \
      kiln_foz_builder_build_with(NULL, SCR))                                                      \
    E(foz_builder_build_with_build, kiln_foz_builder_build_with, KILN_EINVAL,                      \
      kiln_foz_builder_build_with(SCR, NULL))                                                      \
    V(foz_builder_destroy, kiln_foz_builder_destroy, kiln_foz_builder_destroy(NULL))               \
    V(foz_builder_stats_b, kiln_foz_builder_get_stats, kiln_foz_builder_get_stats(NULL, SCR))      \
    V(foz_builder_stats_stats, kiln_foz_builder_get_stats, kiln_foz_builder_get_stats(SCR, NULL))  \
    E(foz_kiln_builder_create_out, kiln_foz_kiln_builder_create, KILN_EINVAL,                      \
      kiln_foz_kiln_builder_create(SCR, NULL))                                                     \
    V(foz_kiln_builder_destroy, kiln_foz_kiln_builder_destroy,                                     \
      kiln_foz_kiln_builder_destroy(NULL))                                                         \
    V(foz_kiln_builder_stats_builder, kiln_foz_kiln_builder_stats,                                 \
      kiln_foz_kiln_builder_stats(NULL, SCR))                                                      \
    V(foz_kiln_builder_stats_stats, kiln_foz_kiln_builder_stats,                                   \
      kiln_foz_kiln_builder_stats(SCR, NULL))                                                      \
    P(foz_kiln_builder_get_builder, kiln_foz_kiln_builder_get, kiln_foz_kiln_builder_get(NULL))

/*
 * The rows. E(id, fn, want, call): `call` answers `want` (an error code or
 * a value); P(id, fn, call): `call` answers a NULL pointer; V(id, fn,
 * call): `call` returns nothing, and must do nothing. One NULL per row.
 */
#define ROWS(E, P, V)                                                                              \
    /* common */                                                                                   \
    V(log_set_sink, kiln_log_set_sink, kiln_log_set_sink(NULL, NULL))                              \
    V(log_fmt, kiln_log, log_fn(KILN_LOG_ERROR, "null-test", NULL))                                \
    E(get_allocator, kiln_get_allocator, KILN_EINVAL, kiln_get_allocator(NULL))                    \
    P(realloc_null, kiln_realloc, (kiln_free(kiln_realloc(NULL, 0)), (void *)NULL))                \
    V(free_null, kiln_free, kiln_free(NULL))                                                       \
    E(read_full_io, kiln_io_read_full, KILN_EINVAL, kiln_io_read_full(NULL, F.fd, F.buf, 4, 0))    \
    E(read_full_buf, kiln_io_read_full, KILN_EINVAL, kiln_io_read_full(F.io, F.fd, NULL, 4, 0))    \
    E(write_full_io, kiln_io_write_full, KILN_EINVAL, kiln_io_write_full(NULL, F.fd, F.buf, 4, 0)) \
    E(write_full_buf, kiln_io_write_full, KILN_EINVAL, kiln_io_write_full(F.io, F.fd, NULL, 4, 0)) \
    E(rename_new_from, kiln_io_rename_new, KILN_EINVAL, kiln_io_rename_new(NULL, NULL, F.file))    \
    E(rename_new_to, kiln_io_rename_new, KILN_EINVAL, kiln_io_rename_new(NULL, F.file, NULL))      \
    E(replace_io, kiln_io_replace_file, KILN_EINVAL, kiln_io_replace_file(NULL, F.file, "x", 1))   \
    E(replace_path, kiln_io_replace_file, KILN_EINVAL, kiln_io_replace_file(F.io, NULL, "x", 1))   \
    E(replace_data, kiln_io_replace_file, KILN_EINVAL,                                             \
      kiln_io_replace_file(F.io, F.file, NULL, 1))                                                 \
    E(read_file_io, kiln_io_read_file, KILN_EINVAL,                                                \
      kiln_io_read_file(NULL, F.file, 64, &F.data, &F.n))                                          \
    E(read_file_path, kiln_io_read_file, KILN_EINVAL,                                              \
      kiln_io_read_file(F.io, NULL, 64, &F.data, &F.n))                                            \
    E(read_file_data, kiln_io_read_file, KILN_EINVAL,                                              \
      kiln_io_read_file(F.io, F.file, 64, NULL, &F.n))                                             \
    E(read_file_n, kiln_io_read_file, KILN_EINVAL,                                                 \
      kiln_io_read_file(F.io, F.file, 64, &F.data, NULL))                                          \
    E(hash64, kiln_hash64, 1, kiln_hash64(NULL, 8) == kiln_hash64("", 0))                          \
    E(hash128, kiln_hash128, 1, kiln_hash128(NULL, 8).lo == kiln_hash128("", 0).lo)                \
    E(random_bytes, kiln_random_bytes, KILN_EINVAL, kiln_random_bytes(NULL, 8))                    \
    /* pack */                                                                                     \
    E(pack_words, kiln_pack, KILN_EINVAL, kiln_pack(NULL, 5, KILN_CODEC_RAW, NULL, &F.data, &F.n)) \
    E(pack_with_opts, kiln_pack_with, KILN_EINVAL,                                                 \
      kiln_pack_with(F.words, 5, NULL, &F.data, &F.n))                                             \
    E(pack_blob, kiln_pack, KILN_EINVAL, kiln_pack(F.words, 5, KILN_CODEC_RAW, NULL, NULL, &F.n))  \
    E(pack_size, kiln_pack, KILN_EINVAL,                                                           \
      kiln_pack(F.words, 5, KILN_CODEC_RAW, NULL, &F.data, NULL))                                  \
    V(pack_free, kiln_pack_free, kiln_pack_free(NULL))                                             \
    E(blob_info, kiln_blob_info, KILN_EINVAL, kiln_blob_info(NULL, 16, &F.codec, &F.n))            \
    E(unpack_blob, kiln_unpack, KILN_EINVAL, kiln_unpack(NULL, 16, NULL, F.words, 5))              \
    E(unpack_out, kiln_unpack, KILN_EINVAL, kiln_unpack(F.blob, F.blob_size, NULL, NULL, 5))       \
    E(unpack_scratch_blob, kiln_unpack_scratch, KILN_EINVAL,                                       \
      kiln_unpack_scratch(NULL, 16, NULL, (const uint32_t **)&F.data))                             \
    E(unpack_scratch_words, kiln_unpack_scratch, KILN_EINVAL,                                      \
      kiln_unpack_scratch(F.blob, F.blob_size, NULL, NULL))                                        \
    E(dict_train_out, kiln_pack_dict_train, KILN_EINVAL,                                           \
      kiln_pack_dict_train(NULL, NULL, 0, 0, NULL))                                                \
    E(dict_train_modules, kiln_pack_dict_train, KILN_EINVAL,                                       \
      kiln_pack_dict_train(NULL, &F.n, 1, 0, &F.dict))                                             \
    E(dict_load_data, kiln_pack_dict_load, KILN_EINVAL, kiln_pack_dict_load(NULL, 64, &F.dict))    \
    E(dict_load_out, kiln_pack_dict_load, KILN_EINVAL, kiln_pack_dict_load(F.buf, 64, NULL))       \
    P(dict_bytes, kiln_pack_dict_bytes, kiln_pack_dict_bytes(NULL, &F.n))                          \
    E(dict_id, kiln_pack_dict_id, 0, kiln_pack_dict_id(NULL))                                      \
    V(dict_destroy, kiln_pack_dict_destroy, kiln_pack_dict_destroy(NULL))                          \
    E(class_stats_words, kiln_pack_class_stats_add, KILN_EINVAL,                                   \
      kiln_pack_class_stats_add(NULL, 5, &F.class_stats))                                          \
    E(class_stats_out, kiln_pack_class_stats_add, KILN_EINVAL,                                     \
      kiln_pack_class_stats_add(F.words, 5, NULL))                                                 \
    V(spec_entry_stage, kiln_spec_entry_get, kiln_spec_entry_get(NULL, 0, &F.spec))                \
    V(spec_entry_out, kiln_spec_entry_get, kiln_spec_entry_get(&F.stage, 0, NULL))                 \
    E(payload_build_full_stages, kiln_program_payload_build_full, KILN_EINVAL,                     \
      kiln_program_payload_build_full(NULL, NULL, 1, &F.data, &F.n))                               \
    E(payload_build_full_out, kiln_program_payload_build_full, KILN_EINVAL,                        \
      kiln_program_payload_build_full(NULL, &F.stage, 1, NULL, &F.n))                              \
    E(payload_build_stages, kiln_program_payload_build, KILN_EINVAL,                               \
      kiln_program_payload_build(NULL, 1, &F.data, &F.n))                                          \
    E(payload_build_size, kiln_program_payload_build, KILN_EINVAL,                                 \
      kiln_program_payload_build(&F.stage, 1, &F.data, NULL))                                      \
    E(payload_parse_full, kiln_program_payload_parse_full, KILN_EINVAL,                            \
      kiln_program_payload_parse_full(F.buf, 64, 1, NULL, &F.state))                               \
    E(payload_parse, kiln_program_payload_parse, KILN_EINVAL,                                      \
      kiln_program_payload_parse(F.buf, 64, 1, NULL))                                              \
    E(codec_parse, kiln_codec_parse, KILN_EINVAL, kiln_codec_parse(NULL, &F.codec))                \
    /* topo */                                                                                     \
    E(cpuset_parse_list_set, kiln_cpuset_parse_list, KILN_EINVAL,                                  \
      kiln_cpuset_parse_list(NULL, "0-1", 3))                                                      \
    E(cpuset_parse_list_text, kiln_cpuset_parse_list, KILN_EINVAL,                                 \
      kiln_cpuset_parse_list(&F.set, NULL, 3))                                                     \
    E(cpuset_parse_mask_set, kiln_cpuset_parse_mask, KILN_EINVAL,                                  \
      kiln_cpuset_parse_mask(NULL, "ff", 2))                                                       \
    E(cpuset_parse_mask_text, kiln_cpuset_parse_mask, KILN_EINVAL,                                 \
      kiln_cpuset_parse_mask(&F.set, NULL, 2))                                                     \
    E(cpuset_copy_dst, kiln_cpuset_copy, KILN_EINVAL, kiln_cpuset_copy(NULL, &F.set))              \
    E(cpuset_copy_src, kiln_cpuset_copy, KILN_EINVAL, kiln_cpuset_copy(&F.pin.cpus, NULL))         \
    V(cpuset_free, kiln_cpuset_free, kiln_cpuset_free(NULL))                                       \
    E(cpuset_has, kiln_cpuset_has, 0, kiln_cpuset_has(NULL, 0))                                    \
    E(cpuset_count, kiln_cpuset_count, 0, kiln_cpuset_count(NULL))                                 \
    E(cpuset_next, kiln_cpuset_next, -1, kiln_cpuset_next(NULL, 0))                                \
    E(cpuset_format_set, kiln_cpuset_format, 0, kiln_cpuset_format(NULL, F.text, sizeof(F.text)))  \
    E(cpuset_format_buf, kiln_cpuset_format, 3, kiln_cpuset_format(&F.set, NULL, 64))              \
    E(topo_parse_size_text, kiln_topo_parse_size, KILN_EINVAL,                                     \
      kiln_topo_parse_size(NULL, 2, &F.u64))                                                       \
    E(topo_parse_size_out, kiln_topo_parse_size, KILN_EINVAL, kiln_topo_parse_size("1K", 2, NULL)) \
    E(topo_read, kiln_topo_read, KILN_EINVAL,                                                      \
      kiln_topo_read(KILN_SOURCE_DIR "/tests/fixtures/topo/x3d", 0, NULL))                         \
    V(topo_free, kiln_topo_free, kiln_topo_free(NULL))                                             \
    E(topo_allowed, kiln_topo_allowed, KILN_EINVAL, kiln_topo_allowed(NULL, NULL))                 \
    V(pin_plan_free, kiln_pin_plan_free, kiln_pin_plan_free(NULL))                                 \
    E(topo_choose_topo, kiln_topo_choose, KILN_EINVAL, kiln_topo_choose(NULL, NULL, &F.pin))       \
    E(topo_choose_plan, kiln_topo_choose, KILN_EINVAL, kiln_topo_choose(F.topo, NULL, NULL))       \
    E(set_affinity, kiln_process_set_affinity, KILN_EINVAL, kiln_process_set_affinity(NULL, NULL)) \
    E(affinity_decide, kiln_affinity_decide, KILN_EINVAL, kiln_affinity_decide(0, NULL, NULL))     \
    E(affinity_apply, kiln_affinity_apply, KILN_EINVAL, kiln_affinity_apply(NULL, NULL, &F.pin))   \
    /* pages */                                                                                    \
    E(pages_create, kiln_pages_create, KILN_EINVAL, kiln_pages_create(64, NULL))                   \
    V(pages_destroy, kiln_pages_destroy, kiln_pages_destroy(NULL))                                 \
    E(pages_count, kiln_pages_count, 0, kiln_pages_count(NULL))                                    \
    E(pages_store, kiln_pages_store, KILN_EINVAL, kiln_pages_store(NULL, 0, 1, 1))                 \
    E(pages_load, kiln_pages_load, 0, kiln_pages_load(NULL, 0))                                    \
    E(pages_run_end, kiln_pages_run_end, 0, kiln_pages_run_end(NULL, 0, 8))                        \
    E(pages_run_end_using, kiln_pages_run_end_using, 0,                                            \
      kiln_pages_run_end_using(NULL, 0, 8, KILN_PAGES_SCAN_BYTES))                                 \
    E(pages_mask_run_end, kiln_pages_mask_run_end, 0, kiln_pages_mask_run_end(NULL, 0, 8, 1))      \
    E(pages_describe_t, kiln_pages_describe, KILN_EINVAL,                                          \
      kiln_pages_describe(NULL, 0, 1, on_run, NULL))                                               \
    E(pages_describe_fn, kiln_pages_describe, KILN_EINVAL,                                         \
      kiln_pages_describe(F.pages, 0, 1, NULL, NULL))                                              \
    E(pages_describe_masked_t, kiln_pages_describe_masked, KILN_EINVAL,                            \
      kiln_pages_describe_masked(NULL, 0, 1, 1, on_run, NULL))                                     \
    E(pages_describe_masked_fn, kiln_pages_describe_masked, KILN_EINVAL,                           \
      kiln_pages_describe_masked(F.pages, 0, 1, 1, NULL, NULL))                                    \
    E(pages_ranges_t, kiln_pages_ranges, KILN_EINVAL,                                              \
      kiln_pages_ranges(NULL, 0, 1, 1, on_run, NULL))                                              \
    E(pages_ranges_fn, kiln_pages_ranges, KILN_EINVAL,                                             \
      kiln_pages_ranges(F.pages, 0, 1, 1, NULL, NULL))                                             \
    E(pages_all, kiln_pages_all, 0, kiln_pages_all(NULL, 0, 1, 1))                                 \
    E(pages_generation, kiln_pages_generation, 0, kiln_pages_generation(NULL))                     \
    E(pages_chunk_count, kiln_pages_chunk_count, 0, kiln_pages_chunk_count(NULL))                  \
    E(pages_summary, kiln_pages_summary, 0, kiln_pages_summary(NULL, 1, 0))                        \
    E(pages_verify, kiln_pages_verify, KILN_EINVAL, kiln_pages_verify(NULL))                       \
    /* pool */                                                                                     \
    E(pool_create, kiln_pool_create, KILN_EINVAL, kiln_pool_create(1, 4, NULL))                    \
    E(pool_submit_pool, kiln_pool_submit, KILN_EINVAL, kiln_pool_submit(NULL, job, NULL))          \
    E(pool_submit_fn, kiln_pool_submit, KILN_EINVAL, kiln_pool_submit(F.pool, NULL, NULL))         \
    V(pool_cancel, kiln_pool_cancel, kiln_pool_cancel(NULL))                                       \
    E(pool_wait, kiln_pool_wait, KILN_EINVAL, kiln_pool_wait(NULL))                                \
    E(pool_wait_for, kiln_pool_wait_for, KILN_EINVAL, kiln_pool_wait_for(NULL, 1))                 \
    E(pool_create_with_options, kiln_pool_create_with, KILN_EINVAL,                                \
      kiln_pool_create_with(NULL, &F.out_pool))                                                    \
    E(pool_create_with_out, kiln_pool_create_with, KILN_EINVAL,                                    \
      kiln_pool_create_with(&F.pool_options, NULL))                                                \
    E(pool_budget, kiln_pool_default_memory_budget, 1,                                             \
      kiln_pool_default_memory_budget(NULL, 16) > 0)                                               \
    V(pool_get_progress_pool, kiln_pool_get_progress, kiln_pool_get_progress(NULL, &F.progress))   \
    V(pool_get_progress_out, kiln_pool_get_progress, kiln_pool_get_progress(F.pool, NULL))         \
    E(pool_workers, kiln_pool_workers, 0, kiln_pool_workers(NULL))                                 \
    V(pool_destroy, kiln_pool_destroy, kiln_pool_destroy(NULL))                                    \
    E(pool_policy_machine, kiln_pool_policy, KILN_EINVAL, kiln_pool_policy(NULL, NULL, &F.plan))   \
    E(pool_policy_plan, kiln_pool_policy, KILN_EINVAL, kiln_pool_policy(&F.machine, NULL, NULL))   \
    E(pool_probe, kiln_pool_probe, KILN_EINVAL, kiln_pool_probe(NULL, NULL, NULL))                 \
    V(pool_work_limits, kiln_pool_work_limits, kiln_pool_work_limits(KILN_POOL_WORK_READ, NULL))   \
    E(pool_auto_workers, kiln_pool_auto_workers, 3,                                                \
      kiln_pool_auto_workers(KILN_POOL_WORK_BUILD, 3, NULL))                                       \
    /* cache */                                                                                    \
    E(cache_open_dir, kiln_cache_open, KILN_EINVAL, kiln_cache_open(NULL, NULL, &F.out_cache))     \
    E(cache_open_out, kiln_cache_open, KILN_EINVAL, kiln_cache_open(F.dir, NULL, NULL))            \
    V(cache_close, kiln_cache_close, kiln_cache_close(NULL))                                       \
    E(cache_errmsg, kiln_cache_errmsg, 1, kiln_cache_errmsg(NULL) != NULL)                         \
    E(cache_put, kiln_cache_put, KILN_EINVAL, kiln_cache_put(NULL, F.key, F.buf, 4, 4, 0, 1))      \
    E(cache_sync, kiln_cache_sync, KILN_EINVAL, kiln_cache_sync(NULL))                             \
    E(cache_find, kiln_cache_find, KILN_EINVAL, kiln_cache_find(NULL, F.key, &F.entry))            \
    E(cache_find_sized, kiln_cache_find_sized, KILN_EINVAL,                                        \
      kiln_cache_find_sized(NULL, F.key, sizeof(F.entry), &F.entry))                               \
    E(cache_count, kiln_cache_count, 0, kiln_cache_count(NULL))                                    \
    E(cache_entries_c, kiln_cache_entries, KILN_EINVAL,                                            \
      kiln_cache_entries(NULL, &F.entries, &F.n))                                                  \
    E(cache_entries_out, kiln_cache_entries, KILN_EINVAL, kiln_cache_entries(F.cache, NULL, &F.n)) \
    E(cache_entries_n, kiln_cache_entries, KILN_EINVAL,                                            \
      kiln_cache_entries(F.cache, &F.entries, NULL))                                               \
    E(cache_entries_sized, kiln_cache_entries_sized, KILN_EINVAL,                                  \
      kiln_cache_entries_sized(F.cache, sizeof(F.entry), NULL, &F.n))                              \
    V(cache_entries_free, kiln_cache_entries_free, kiln_cache_entries_free(NULL))                  \
    E(cache_load_many_c, kiln_cache_load_many, KILN_EINVAL,                                        \
      kiln_cache_load_many(NULL, &F.key, 1, 1, &F.results))                                        \
    E(cache_load_many_keys, kiln_cache_load_many, KILN_EINVAL,                                     \
      kiln_cache_load_many(F.cache, NULL, 1, 1, &F.results))                                       \
    E(cache_load_many_out, kiln_cache_load_many, KILN_EINVAL,                                      \
      kiln_cache_load_many(F.cache, &F.key, 1, 1, NULL))                                           \
    V(cache_results_free, kiln_cache_results_free, kiln_cache_results_free(NULL, 3))               \
    E(cache_load_many_sized, kiln_cache_load_many_sized, KILN_EINVAL,                              \
      kiln_cache_load_many_sized(F.cache, &F.key, 1, 1, sizeof(F.result), NULL))                   \
    V(cache_results_free_sized, kiln_cache_results_free_sized,                                     \
      kiln_cache_results_free_sized(NULL, 3, sizeof(F.result)))                                    \
    E(cache_get_c, kiln_cache_get, KILN_EINVAL, kiln_cache_get(NULL, F.key, &F.result))            \
    E(cache_get_out, kiln_cache_get, KILN_EINVAL, kiln_cache_get(F.cache, F.key, NULL))            \
    E(cache_get_sized, kiln_cache_get_sized, KILN_EINVAL,                                          \
      kiln_cache_get_sized(F.cache, F.key, sizeof(F.result), NULL))                                \
    V(cache_payload_free, kiln_cache_payload_free, kiln_cache_payload_free(NULL))                  \
    E(cache_get_stats_c, kiln_cache_get_stats, KILN_EINVAL, kiln_cache_get_stats(NULL, &F.stats))  \
    E(cache_get_stats_out, kiln_cache_get_stats, KILN_EINVAL, kiln_cache_get_stats(F.cache, NULL)) \
    E(cache_check_dir, kiln_cache_check, KILN_EINVAL,                                              \
      kiln_cache_check(NULL, NULL, false, &F.check))                                               \
    E(cache_check_report, kiln_cache_check, KILN_EINVAL,                                           \
      kiln_cache_check(F.dir, NULL, false, NULL))                                                  \
    P(cache_dict, kiln_cache_dict, kiln_cache_dict(NULL))                                          \
    P(cache_dir, kiln_cache_dir, kiln_cache_dir(NULL))                                             \
    E(cache_last_use, kiln_cache_last_use, KILN_EINVAL, kiln_cache_last_use(NULL, F.key, &F.u32))  \
    E(cache_today, kiln_cache_today, 0, kiln_cache_today(NULL))                                    \
    E(cache_save_use, kiln_cache_save_use, KILN_EINVAL, kiln_cache_save_use(NULL))                 \
    E(cache_compact, kiln_cache_compact, KILN_EINVAL, kiln_cache_compact(NULL, NULL))              \
    E(cache_prune_c, kiln_cache_prune, KILN_EINVAL, kiln_cache_prune(NULL, &F.prune, NULL))        \
    E(cache_prune_o, kiln_cache_prune, KILN_EINVAL, kiln_cache_prune(F.cache, NULL, NULL))         \
    V(cache_progress, kiln_cache_set_progress, kiln_cache_set_progress(NULL, NULL, NULL))          \
    E(cache_output_p, kiln_cache_check_output, KILN_EINVAL,                                        \
      kiln_cache_check_output(F.cache, NULL))                                                      \
    E(cache_plan_c, kiln_cache_plan_prune, KILN_EINVAL,                                            \
      kiln_cache_plan_prune(NULL, &F.prune, NULL))                                                 \
    E(cache_plan_o, kiln_cache_plan_prune, KILN_EINVAL,                                            \
      kiln_cache_plan_prune(F.cache, NULL, NULL))                                                  \
    E(cache_plan_sized, kiln_cache_plan_prune_sized, KILN_EINVAL,                                  \
      kiln_cache_plan_prune_sized(NULL, &F.prune, sizeof(struct kiln_cache_prune_item), NULL))     \
    V(cache_plan_free, kiln_cache_prune_plan_free, kiln_cache_prune_plan_free(NULL))               \
    E(cache_repack, kiln_cache_repack, KILN_EINVAL,                                                \
      kiln_cache_repack(NULL, KILN_CODEC_ZSTD, KILN_CACHE_DICT_KEEP, NULL))                        \
    E(cache_repack_with, kiln_cache_repack_with, KILN_EINVAL,                                      \
      kiln_cache_repack_with(NULL, NULL, NULL))                                                    \
    E(cache_merge_out, kiln_cache_merge, KILN_EINVAL, kiln_cache_merge(NULL, NULL, 0, NULL))       \
    E(cache_merge_dirs, kiln_cache_merge, KILN_EINVAL, kiln_cache_merge(F.cache, NULL, 1, NULL))   \
    /* vk, without a context (test_vk_null_with_context has the rest) */                           \
    E(vk_create, kiln_vk_create, KILN_EINVAL, kiln_vk_create(NULL, NULL))                          \
    P(vk_allocator, kiln_vk_allocator, kiln_vk_allocator(NULL))                                    \
    E(vk_set_validation, kiln_vk_set_validation, KILN_EINVAL, kiln_vk_set_validation(NULL, true))  \
    E(vk_validate_words, kiln_vk_validate_spirv, KILN_EINVAL,                                      \
      kiln_vk_validate_spirv(NULL, 5, F.text, sizeof(F.text)))                                     \
    E(vk_validate_why, kiln_vk_validate_spirv, KILN_EINVAL,                                        \
      kiln_vk_validate_spirv(F.words, 5, NULL, 64))                                                \
    E(vk_structure_words, kiln_vk_check_spirv_structure, KILN_EINVAL,                              \
      kiln_vk_check_spirv_structure(NULL, 5, F.text, sizeof(F.text)))                              \
    E(vk_structure_why, kiln_vk_check_spirv_structure, KILN_EINVAL,                                \
      kiln_vk_check_spirv_structure(F.words, 5, NULL, 64))                                         \
    V(vk_destroy, kiln_vk_destroy, kiln_vk_destroy(NULL))                                          \
    E(vk_errmsg, kiln_vk_errmsg, 1, kiln_vk_errmsg(NULL) != NULL)                                  \
    P(vk_get_info, kiln_vk_get_info, kiln_vk_get_info(NULL))                                       \
    E(vk_extension_enabled, kiln_vk_extension_enabled, 0, kiln_vk_extension_enabled(NULL, "x"))    \
    V(vk_get_stats, kiln_vk_get_stats, kiln_vk_get_stats(NULL, &F.vk_stats))                       \
    V(vk_reset_peak, kiln_vk_reset_peak, kiln_vk_reset_peak(NULL))                                 \
    E(vk_compute_vk, kiln_vk_compute_pipeline, KILN_EINVAL,                                        \
      kiln_vk_compute_pipeline(NULL, "p", &F.vk_stage, &F.pipeline))                               \
    E(vk_graphics_vk, kiln_vk_graphics_pipeline, KILN_EINVAL,                                      \
      kiln_vk_graphics_pipeline(NULL, "p", &F.graphics, &F.pipeline))                              \
    V(vk_pipeline_destroy, kiln_vk_pipeline_destroy, kiln_vk_pipeline_destroy(NULL, NULL))         \
    E(vk_pipeline_handle, kiln_vk_pipeline_handle, 0, kiln_vk_pipeline_handle(NULL))               \
    E(vk_pipeline_feedback_p, kiln_vk_pipeline_feedback, KILN_EINVAL,                              \
      kiln_vk_pipeline_feedback(NULL, SCR))                                                        \
    E(vk_pipeline_feedback_out, kiln_vk_pipeline_feedback, KILN_EINVAL,                            \
      kiln_vk_pipeline_feedback(SCR, NULL))                                                        \
    E(vk_pipeline_create_vk, kiln_vk_pipeline_create, KILN_EINVAL,                                 \
      kiln_vk_pipeline_create(NULL, SCR, &F.pipeline))                                             \
    E(vk_module_create_vk, kiln_vk_module_create, KILN_EINVAL,                                     \
      kiln_vk_module_create(NULL, "p", &F.vk_stage, &F.module))                                    \
    V(vk_module_destroy, kiln_vk_module_destroy, kiln_vk_module_destroy(NULL, NULL))               \
    E(vk_cache_save, kiln_vk_cache_save, KILN_EINVAL, kiln_vk_cache_save(NULL))                    \
    E(vk_adopt, kiln_vk_pipeline_adopt, KILN_EINVAL,                                               \
      kiln_vk_pipeline_adopt(NULL, VK_NULL_HANDLE, &F.pipeline))                                   \
    V(vk_get_handles, kiln_vk_get_handles, kiln_vk_get_handles(NULL, NULL))                        \
    E(vk_link_graphics_vk, kiln_vk_link_graphics, KILN_EINVAL,                                     \
      kiln_vk_link_graphics(NULL, &F.link_ci, F.link_keys, &F.link_out, NULL))                     \
    E(vk_stage_module_out, kiln_vk_stage_module, KILN_EINVAL,                                      \
      kiln_vk_stage_module(NULL, "p", &F.vk_stage, VK_SHADER_STAGE_COMPUTE_BIT, NULL))             \
    V(vk_stage_release, kiln_vk_stage_release, kiln_vk_stage_release(NULL, NULL))                  \
    /* prep */                                                                                     \
    E(translate_t, kiln_translate, KILN_EINVAL,                                                    \
      kiln_translate(NULL, &F.source, &F.out_words, &F.n))                                         \
    E(translate_src, kiln_translate, KILN_EINVAL,                                                  \
      kiln_translate(&F.translator, NULL, &F.out_words, &F.n))                                     \
    E(translate_words, kiln_translate, KILN_EINVAL,                                                \
      kiln_translate(&F.translator, &F.source, NULL, &F.n))                                        \
    E(translate_n, kiln_translate, KILN_EINVAL,                                                    \
      kiln_translate(&F.translator, &F.source, &F.out_words, NULL))                                \
    V(words_free, kiln_words_free, kiln_words_free(NULL))                                          \
    V(translate_set_error, kiln_translate_set_error, set_error_fn(NULL))                           \
    E(program_translate_t, kiln_program_translate, KILN_EINVAL,                                    \
      kiln_program_translate(NULL, F.program))                                                     \
    E(program_translate_p, kiln_program_translate, KILN_EINVAL,                                    \
      kiln_program_translate(&F.translator, NULL))                                                 \
    E(program_spirv_bytes, kiln_program_spirv_bytes, 0, kiln_program_spirv_bytes(NULL))            \
    V(program_destroy, kiln_program_destroy, kiln_program_destroy(NULL))                           \
    E(program_create_name, kiln_program_create, KILN_EINVAL,                                       \
      kiln_program_create(NULL, &F.out_program))                                                   \
    E(program_create_out, kiln_program_create, KILN_EINVAL, kiln_program_create("p", NULL))        \
    E(program_reserve, kiln_program_reserve, KILN_EINVAL, kiln_program_reserve(NULL, 1))           \
    E(program_copy_src, kiln_program_copy, KILN_EINVAL, kiln_program_copy(NULL, &F.out_program))   \
    E(program_copy_out, kiln_program_copy, KILN_EINVAL, kiln_program_copy(F.program, NULL))        \
    E(program_create_sized_name, kiln_program_create_sized, KILN_EINVAL,                           \
      kiln_program_create_sized(NULL, sizeof(struct kiln_program),                                 \
                                sizeof(struct kiln_program_stage), &F.out_program))                \
    E(program_create_sized_out, kiln_program_create_sized, KILN_EINVAL,                            \
      kiln_program_create_sized("p", sizeof(struct kiln_program),                                  \
                                sizeof(struct kiln_program_stage), NULL))                          \
    E(program_copy_sized_src, kiln_program_copy_sized, KILN_EINVAL,                                \
      kiln_program_copy_sized(NULL, sizeof(struct kiln_program),                                   \
                              sizeof(struct kiln_program_stage), &F.out_program))                  \
    E(program_copy_sized_out, kiln_program_copy_sized, KILN_EINVAL,                                \
      kiln_program_copy_sized(F.program, sizeof(struct kiln_program),                              \
                              sizeof(struct kiln_program_stage), NULL))                            \
    E(spirv_check, kiln_spirv_check, KILN_EINVAL, kiln_spirv_check(NULL, 20, &F.why))              \
    E(spirv_check_words, kiln_spirv_check_words, KILN_EINVAL,                                      \
      kiln_spirv_check_words(NULL, 5, F.text, sizeof(F.text)))                                     \
    E(spirv_check_words_why, kiln_spirv_check_words, KILN_EINVAL,                                  \
      kiln_spirv_check_words(F.words, 5, NULL, 64))                                                \
    E(program_key2_p, kiln_program_key, KILN_EINVAL, kiln_program_key(NULL, &F.key))               \
    E(program_key2_out, kiln_program_key, KILN_EINVAL, kiln_program_key(F.program, NULL))          \
    E(program_seal_p, kiln_program_seal, KILN_EINVAL, kiln_program_seal(NULL, NULL, &F.sealed))    \
    E(program_seal_out, kiln_program_seal, KILN_EINVAL, kiln_program_seal(F.program, NULL, NULL))  \
    V(program_sealed_clear, kiln_program_sealed_clear, kiln_program_sealed_clear(NULL))            \
    E(program_open_payload, kiln_program_open, KILN_EINVAL,                                        \
      kiln_program_open(NULL, 64, NULL, &F.opened))                                                \
    E(program_open_out, kiln_program_open, KILN_EINVAL, kiln_program_open(F.buf, 64, NULL, NULL))  \
    V(program_opened_free, kiln_program_opened_free, kiln_program_opened_free(NULL))               \
    E(cache_put_program_c, kiln_cache_put_program, KILN_EINVAL,                                    \
      kiln_cache_put_program(NULL, F.program, NULL, NULL))                                         \
    E(cache_put_program_p, kiln_cache_put_program, KILN_EINVAL,                                    \
      kiln_cache_put_program(F.cache, NULL, NULL, NULL))                                           \
    E(cache_get_program_c, kiln_cache_get_program, KILN_EINVAL,                                    \
      kiln_cache_get_program(NULL, F.key, NULL, &F.opened))                                        \
    E(cache_get_program_out, kiln_cache_get_program, KILN_EINVAL,                                  \
      kiln_cache_get_program(F.cache, F.key, NULL, NULL))                                          \
    E(program_source_array, kiln_program_source_array, 0, kiln_program_source_array(NULL).count)   \
    V(prepare_options_init, kiln_prepare_options_init, kiln_prepare_options_init(NULL))            \
    E(prepare_stamp, kiln_prepare_stamp, 0, kiln_prepare_stamp(NULL))                              \
    E(program_key_p, kiln_prep_program_key, KILN_EINVAL, kiln_prep_program_key(NULL, &F.key))      \
    E(program_key_out, kiln_prep_program_key, KILN_EINVAL, kiln_prep_program_key(F.program, NULL)) \
    E(prepare_o, kiln_prepare, KILN_EINVAL, kiln_prepare(NULL, NULL, NULL, &F.prepare_summary))    \
    E(prepare_summary, kiln_prepare, KILN_EINVAL, kiln_prepare(&F.prepare, NULL, NULL, NULL))      \
    E(warm_start_o, kiln_warm_start, KILN_EINVAL,                                                  \
      kiln_warm_start(NULL, NULL, NULL, &F.start_summary))                                         \
    E(warm_start_summary, kiln_warm_start, KILN_EINVAL,                                            \
      kiln_warm_start(&F.start, NULL, NULL, NULL))                                                 \
    E(binaries_sweep_programs, kiln_binaries_sweep, KILN_EINVAL,                                   \
      kiln_binaries_sweep(NULL,                                                                    \
                          &(struct kiln_binaries_sweep_report)KILN_BINARIES_SWEEP_REPORT_INIT))    \
    E(build_session_create_o, kiln_build_session_create, KILN_EINVAL,                              \
      kiln_build_session_create(NULL, &F.session))                                                 \
    E(build_session_create_out, kiln_build_session_create, KILN_EINVAL,                            \
      kiln_build_session_create(&F.session_options, NULL))                                         \
    E(build_session_run_s, kiln_build_session_run, KILN_EINVAL,                                    \
      kiln_build_session_run(NULL, F.key, F.buf, 64, 0, &F.pipeline))                              \
    E(build_session_run_with_s, kiln_build_session_run_with, KILN_EINVAL,                          \
      kiln_build_session_run_with(NULL, SCR))                                                      \
    E(build_session_run_with_run, kiln_build_session_run_with, KILN_EINVAL,                        \
      kiln_build_session_run_with(SCR, NULL))                                                      \
    E(build_session_save, kiln_build_session_save, KILN_EINVAL, kiln_build_session_save(NULL))     \
    E(ledger_last_run_dir, kiln_ledger_last_run, KILN_EINVAL,                                      \
      kiln_ledger_last_run(NULL, KILN_LEDGER_RUN_START, SCR))                                      \
    E(ledger_last_run_out, kiln_ledger_last_run, KILN_EINVAL,                                      \
      kiln_ledger_last_run(F.dir, KILN_LEDGER_RUN_START, NULL))                                    \
    V(build_session_destroy, kiln_build_session_destroy, kiln_build_session_destroy(NULL))         \
    /* service (test_vk_null_with_context has the rows that need a service) */                     \
    E(service_create_o, kiln_service_create, KILN_EINVAL, kiln_service_create(NULL, &F.service))   \
    E(service_create_out, kiln_service_create, KILN_EINVAL,                                        \
      kiln_service_create(&F.service_options, NULL))                                               \
    E(service_request_svc, kiln_service_request, KILN_EINVAL,                                      \
      kiln_service_request(NULL, &F.service_request, &F.ticket))                                   \
    E(ticket_poll, kiln_ticket_poll, KILN_EINVAL, kiln_ticket_poll(NULL, &F.ticket_info))          \
    E(ticket_wait, kiln_ticket_wait, KILN_EINVAL, kiln_ticket_wait(NULL, 0, &F.ticket_info))       \
    E(ticket_cancel, kiln_ticket_cancel, KILN_EINVAL, kiln_ticket_cancel(NULL))                    \
    V(ticket_release, kiln_ticket_release, kiln_ticket_release(NULL))                              \
    E(service_get_stats_svc, kiln_service_get_stats, KILN_EINVAL,                                  \
      kiln_service_get_stats(NULL, &F.service_stats))                                              \
    V(service_destroy, kiln_service_destroy, kiln_service_destroy(NULL))                           \
    FOZ_ROWS(E, P, V)

/* Functions that take a pointer and have no row, with the reason. */
static const char *const exempt[][2] = {
    {"kiln_isolate_worker_main", "its one pointer is optional, and a call runs a worker on stdin"},
    {"kiln_pin_largest_cache", "both pointers are optional, and a call pins this process"},
    {"kiln_set_allocator", "NULL is valid (restores libc's); with the fixture's handles live it "
                           "answers KILN_EBUSY (test_alloc_fail.c tests it)"},
    {"kiln_cache_stats", "the deprecated name of kiln_cache_get_stats (deprecated_names)"},
    {"kiln_pool_progress", "the deprecated name of kiln_pool_get_progress (deprecated_names)"},
    {"kiln_vk_info", "the deprecated name of kiln_vk_get_info (deprecated_names)"},
    {"kiln_vk_stats", "the deprecated name of kiln_vk_get_stats (deprecated_names)"},
};

#define ROW_E(id, fn, want, call) \
    static int64_t row_##id(void) \
    {                             \
        return (int64_t)(call);   \
    }
#define ROW_P(id, fn, call)               \
    static int64_t row_##id(void)         \
    {                                     \
        return (int64_t)(intptr_t)(call); \
    }
#define ROW_V(id, fn, call)       \
    static int64_t row_##id(void) \
    {                             \
        call;                     \
        return 0;                 \
    }
ROWS(ROW_E, ROW_P, ROW_V)

struct row {
    const char *fn;
    const char *call;
    int64_t (*run)(void);
    int64_t want;
};
#define TAB_E(id, fn, want, call) {#fn, #call, row_##id, (int64_t)(want)},
#define TAB_P(id, fn, call)       {#fn, #call, row_##id, 0},
#define TAB_V(id, fn, call)       {#fn, #call, row_##id, 0},
static const struct row rows[] = {ROWS(TAB_E, TAB_P, TAB_V)};

/* Every row, against the fixture; the fixture must come out as it went in. */
KT_CASE(null_args)
{
    fixture_open();
    int bad = 0;
    for (size_t i = 0; i < N_OF(rows); i++) {
        printf("%s\n", rows[i].call);
        fflush(stdout);
        int64_t got = rows[i].run();
        if (got != rows[i].want) {
            printf("FAIL %s: %lld, not %lld\n", rows[i].call, (long long)got,
                   (long long)rows[i].want);
            bad++;
        }
    }
    /* The objects beside the NULLs are untouched. */
    KT_CHECK_EQ(kiln_cache_count(F.cache), 0);
    KT_CHECK_EQ(kiln_pool_workers(F.pool), 1);
    KT_CHECK_EQ(kiln_pages_count(F.pages), 64);
    KT_CHECK_EQ(kiln_cpuset_count(&F.set), 4);
    KT_CHECK(F.program != NULL && F.cache != NULL && F.pool != NULL);
    printf("%zu rows, %d wrong\n", N_OF(rows), bad);
    KT_CHECK_EQ(bad, 0);
    fixture_close();
}

/* ---- the table is complete ---------------------------------------------- */

static bool has_row(const char *fn)
{
    for (size_t i = 0; i < N_OF(rows); i++)
        if (strcmp(rows[i].fn, fn) == 0)
            return true;
    for (size_t i = 0; i < N_OF(exempt); i++)
        if (strcmp(exempt[i][0], fn) == 0)
            return true;
    return false;
}

/* Blanks out comments and preprocessor lines in place. */
static void strip(char *s)
{
    bool line_start = true;
    for (char *p = s; *p; p++) {
        if (p[0] == '/' && p[1] == '*') {
            char *e = strstr(p + 2, "*/");
            char *end = e ? e + 2 : p + strlen(p);
            memset(p, ' ', (size_t)(end - p));
            p = end - 1;
            continue;
        }
        if (line_start && *p == '#') {
            while (*p && *p != '\n')
                *p++ = ' ';
            if (!*p)
                break;
        }
        line_start = *p == '\n' || (line_start && (*p == ' ' || *p == '\t'));
    }
}

/* Checks one header's KILN_API declarations; counts in *missing those
 * that lack a row. */
static void check_header(const char *path, int *missing)
{
    void *data;
    size_t n;
    KT_REQUIRE_OK(kiln_io_read_file(kiln_io_default(), path, 1u << 22, &data, &n));
    char *text = realloc(data, n + 1);
    KT_REQUIRE(text != NULL);
    text[n] = '\0';
    strip(text);
    for (char *p = text; (p = strstr(p, "KILN_API")) != NULL;) {
        char *end = strchr(p, ';');
        char *open = strchr(p, '(');
        if (!end || !open || open > end)
            break;
        char *q = open;
        while (q > p && q[-1] == ' ')
            q--;
        char *name_end = q;
        while (q > p &&
               (q[-1] == '_' || (q[-1] >= 'a' && q[-1] <= 'z') || (q[-1] >= '0' && q[-1] <= '9')))
            q--;
        char name[128];
        snprintf(name, sizeof(name), "%.*s", (int)(name_end - q), q);
        bool pointer = memchr(open, '*', (size_t)(end - open)) != NULL;
        for (char *f = open; f < end && !pointer; f++)
            pointer = strncmp(f, "_fn ", 4) == 0;
        if (pointer && !has_row(name)) {
            printf("%s: %s takes a pointer and has no row in ROWS\n", path, name);
            (*missing)++;
        }
        p = end;
    }
    free(text);
}

KT_CASE(table_complete)
{
    char dir[4096];
    snprintf(dir, sizeof(dir), "%s/include/kiln", KILN_SOURCE_DIR);
    DIR *d = opendir(dir);
    KT_REQUIRE(d != NULL);
    int missing = 0, headers = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        size_t len = strlen(e->d_name);
        if (len < 3 || strcmp(e->d_name + len - 2, ".h") != 0)
            continue;
        char path[8192];
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        check_header(path, &missing);
        headers++;
    }
    closedir(d);
    printf("%d headers, %zu rows, %d function(s) without one\n", headers, N_OF(rows), missing);
    KT_CHECK(headers >= 8);
    KT_CHECK_EQ(missing, 0);
}

/* ---- with a Vulkan context ------------------------------------------------ */

KT_CASE(vk_null_with_context)
{
    struct kiln_vk *vk = NULL;
    kiln_log_set_level(KILN_LOG_ERROR);
    if (kiln_vk_create(NULL, &vk) < 0) {
        printf("skipped: no Vulkan device\n");
        exit(77);
    }
    struct kiln_vk_pipeline *p = NULL;
    struct kiln_vk_module *m = NULL;
    KT_CHECK_EQ(kiln_vk_compute_pipeline(vk, "p", NULL, &p), KILN_EINVAL);
    KT_CHECK_EQ(kiln_vk_graphics_pipeline(vk, "p", NULL, &p), KILN_EINVAL);
    KT_CHECK_EQ(kiln_vk_module_create(vk, "p", NULL, &m), KILN_EINVAL);
    KT_CHECK_EQ(kiln_vk_pipeline_adopt(vk, VK_NULL_HANDLE, NULL), KILN_EINVAL);
    VkPipeline lp = VK_NULL_HANDLE;
    struct kiln_key lk[KILN_VK_PARTS] = {{0}};
    VkGraphicsPipelineCreateInfo lci = {.sType = VK_STRUCTURE_TYPE_GRAPHICS_PIPELINE_CREATE_INFO};
    KT_CHECK_EQ(kiln_vk_link_graphics(vk, NULL, lk, &lp, NULL), KILN_EINVAL);
    KT_CHECK_EQ(kiln_vk_link_graphics(vk, &lci, NULL, &lp, NULL), KILN_EINVAL);
    /* out NULL asks for the parts alone: refused as the link is (below). */
    KT_CHECK_EQ(kiln_vk_link_graphics(vk, &lci, lk, NULL, NULL), KILN_ENOTSUP);
    /* No rasterization state: not a plain pipeline, refused before the driver. */
    KT_CHECK_EQ(kiln_vk_link_graphics(vk, &lci, lk, &lp, NULL), KILN_ENOTSUP);
    struct kiln_vk_staged st = KILN_VK_STAGED_INIT;
    KT_CHECK_EQ(kiln_vk_stage_module(vk, "p", NULL, VK_SHADER_STAGE_COMPUTE_BIT, &st), KILN_EINVAL);
    KT_CHECK(st.module == VK_NULL_HANDLE && st.words == NULL); /* needs no release */
    KT_CHECK(!kiln_vk_extension_enabled(vk, NULL));
    kiln_vk_get_stats(vk, NULL);
    kiln_vk_get_handles(vk, NULL);
    kiln_vk_stage_release(vk, NULL);
    kiln_vk_pipeline_destroy(vk, NULL);
    kiln_vk_module_destroy(vk, NULL);
    /* The build session's and the service's rows that need a context. */
    struct kiln_build_session_options bo = KILN_BUILD_SESSION_OPTIONS_INIT;
    bo.vk = vk;
    struct kiln_build_session *bs = NULL;
    KT_CHECK_OK(kiln_build_session_create(&bo, &bs));
    KT_CHECK_EQ(kiln_build_session_run(bs, F.key, NULL, 64, 0, &p), KILN_EINVAL);
    KT_CHECK_EQ(kiln_build_session_run(bs, F.key, F.buf, 64, 0, NULL), KILN_EINVAL);
    KT_CHECK_EQ(kiln_build_session_run_with(bs, NULL), KILN_EINVAL);
    struct kiln_build_run no_payload = KILN_BUILD_RUN_INIT;
    KT_CHECK_EQ(kiln_build_session_run_with(bs, &no_payload), KILN_EINVAL);
    kiln_build_session_destroy(bs);
    struct kiln_service_options so = KILN_SERVICE_OPTIONS_INIT;
    so.vk = vk;
    struct kiln_service *svc = NULL;
    KT_CHECK_OK(kiln_service_create(&so, &svc));
    struct kiln_ticket *t = NULL;
    KT_CHECK_EQ(kiln_service_request(svc, NULL, &t), KILN_EINVAL);
    KT_CHECK(t == NULL);
    KT_CHECK_EQ(kiln_service_get_stats(svc, NULL), KILN_EINVAL);
    kiln_service_destroy(svc);
    struct kiln_vk_stats s = KILN_VK_STATS_INIT;
    kiln_vk_get_stats(vk, &s);
    KT_CHECK_EQ(s.live_pipelines, 0);
    KT_CHECK_EQ(s.live_modules, 0);
    kiln_vk_destroy(vk);
}

/* ---- the names before 0.2 ------------------------------------------------ */

/* The old names are still exported and answer as the new ones (a program
 * built against 0.1 calls them). */
KT_CASE(deprecated_names)
{
#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
#endif
    fixture_open();
    struct kiln_cache_stats a = KILN_CACHE_STATS_INIT, b = KILN_CACHE_STATS_INIT;
    KT_CHECK_OK(kiln_cache_get_stats(F.cache, &a));
    KT_CHECK_OK(kiln_cache_stats(F.cache, &b));
    KT_CHECK_EQ(a.records, b.records);
    KT_CHECK_EQ(kiln_cache_stats(NULL, &b), KILN_EINVAL);
    struct kiln_pool_progress pa = KILN_POOL_PROGRESS_INIT, pb = KILN_POOL_PROGRESS_INIT;
    kiln_pool_get_progress(F.pool, &pa);
    kiln_pool_progress(F.pool, &pb);
    KT_CHECK_EQ(pa.submitted, pb.submitted);
    KT_CHECK(kiln_vk_info(NULL) == NULL);
    kiln_vk_stats(NULL, NULL);
    fixture_close();
#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif
}

KT_MAIN(KT_ENTRY(null_args), KT_ENTRY(table_complete), KT_ENTRY(vk_null_with_context),
        KT_ENTRY(deprecated_names))
