/*
 * prep_fixture.h - what the preparation's tests share: small GLSL corpus
 * folders, and a Vulkan context that skips the test where there is none.
 */
#ifndef KILN_PREP_FIXTURE_H
#define KILN_PREP_FIXTURE_H

#include "kiln.h"
#include "kiln/foz.h"
#include "kiln-tools/gen.h"
#include "kiln-tools/glsl.h"

/* The programs pf_write_corpus writes when `broken` is false. */
#define PF_GOOD_PROGRAMS 3

/*
 * Writes a small corpus into `dir` (which must exist): two compute programs
 * (a.comp, sub/b.comp) and one graphics pair (tri.vert + tri.frag), each
 * small enough to translate and build in a few milliseconds; with `broken`,
 * also bad.comp, which does not compile.
 * @return 0 or -1 (a test failure is recorded).
 */
int pf_write_corpus(const char *dir, bool broken);

/* Makes `path` (one level). @return 0 or -1. */
int pf_mkdir(const char *path);

/*
 * A Vulkan context over `cache_dir` (NULL: a pipeline cache in memory), or
 * exit(77) (ctest's skip) when Vulkan is not available. Every library loaded
 * by then (the driver, LLVM) is kept loaded to the end of the process, so
 * that LeakSanitizer can name the driver library a leak inside it comes
 * from (tests/support/lsan.supp suppresses those).
 */
struct kiln_vk *pf_vk(const char *cache_dir);

/* pf_vk with options of the case's own (extra extensions, say). */
struct kiln_vk *pf_vk_with(const struct kiln_vk_options *opt);

/*
 * Skips the case (exit 77) where there is no Vulkan; else makes a context
 * and destroys it at once, so the driver stays loaded for good (pf_vk).
 * @return false when making the context failed (a failure is recorded).
 */
bool pf_need_vulkan(void);

/*
 * Makes the folder `root`/corpus, its path in `out`, and writes the small
 * corpus into it (pf_write_corpus with `broken`).
 * @return 0 or -1 (a test failure is recorded).
 */
int pf_corpus(char *out, size_t cap, const char *root, bool broken);

/* kiln_prepare_options_init, then the cache folder and the workers. */
void pf_options(struct kiln_prepare_options *o, const char *cache_dir, unsigned jobs);

/* Keeps every library loaded so far loaded for good (see pf_vk). */
void pf_pin_loaded_libraries(void);

/*
 * The programs a test prepares, named as kiln prepare names them: a corpus
 * folder or a .foz archive (`corpus`), else `generate` programs of the
 * generator with `seed`. Start from PF_INPUT_INIT. The handles are
 * pf_prepare's.
 */
struct pf_input {
    const char *corpus;
    uint32_t generate;
    uint64_t seed;
    struct kiln_generator gen;
    struct kiln_corpus *folder;
    struct kiln_foz_programs *foz;
    struct kiln_glsl *glsl;
    struct kiln_program_source src;
};

#define PF_INPUT_INIT                                                                  \
    {                                                                                  \
        .generate = KILN_PREPARE_DEFAULT_PROGRAMS, .seed = KILN_GENERATOR_DEFAULT_SEED \
    }

/*
 * Opens `in` as kiln prepare would (the tools' sources, kiln's GLSL
 * translator unless the programs are an archive's) and points o->source
 * and o->translator at it. @return 0 or the error (logged), with *step.
 */
int pf_input_open(struct pf_input *in, struct kiln_prepare_options *o, enum kiln_prep_step *step);

/* Frees what pf_input_open made. */
void pf_input_close(struct pf_input *in);

/* kiln_prepare over `in` (opened and closed around it); an input error
 * is returned with summary->error and ->step set, as kiln_prepare would. */
int pf_prepare(struct kiln_prepare_options *o, struct pf_input *in, kiln_prep_progress_fn progress,
               void *user, struct kiln_prepare_summary *s);

/* The stamp kiln_prepare gives a cache of `in`'s programs. */
uint64_t pf_stamp(struct pf_input *in);

#if defined(VK_VERSION_1_0)
/* The application's own Vulkan: an instance and a device made with the
 * loader, not by kiln (for kiln_vk_options.external). */
struct pf_own_vulkan {
    void *lib;
    PFN_vkGetInstanceProcAddr gipa;
    VkInstance instance;
    VkPhysicalDevice phys;
    VkDevice device;
    uint32_t family;
    PFN_vkDestroyInstance destroy_instance;
    PFN_vkDestroyDevice destroy_device;
    PFN_vkGetDeviceProcAddr gdpa;
    /* The application's VkPipelineCache on that device, and its calls. */
    VkPipelineCache cache;
    PFN_vkDestroyPipelineCache destroy_cache;
    PFN_vkGetPipelineCacheData cache_data;
};

/* Makes them (Vulkan 1.1, one graphics + compute queue, no extension, an
 * empty pipeline cache); exit(77) where there is none. */
void pf_own_vulkan_make(struct pf_own_vulkan *v);

/* pf_own_vulkan_make with VK_EXT_graphics_pipeline_library enabled on the
 * device (exit(77) where it is not offered). */
void pf_own_vulkan_make_gpl(struct pf_own_vulkan *v);

/* What kiln_vk_options.external takes to wrap them (the cache included). */
struct kiln_vk_external pf_own_external(const struct pf_own_vulkan *v);

/* @return the bytes of the application's pipeline cache's data now. */
size_t pf_own_cache_bytes(const struct pf_own_vulkan *v);

/* Destroys the cache, the device and the instance. */
void pf_own_vulkan_destroy(struct pf_own_vulkan *v);
#endif

#endif /* KILN_PREP_FIXTURE_H */
