/*
 * kiln/prep.h - the preparation's inputs: programs, translators, the
 * generated default corpus and corpus folders.
 *
 * A program is what one pipeline is built from: one compute stage, or a
 * vertex and a fragment stage. Each stage starts as source text (GLSL, or
 * whatever an emulator's guest program is) and is turned into SPIR-V by a
 * translator: a callback the emulator brings. kiln has one built in, a GLSL
 * translator over shaderc.
 *
 * Ownership in one place: every SPIR-V array kiln hands out (a program
 * stage's words, kiln_translate's output) comes from malloc and is freed by
 * kiln_program_destroy or kiln_words_free. A translator's own buffer is given
 * back to it through its `release` callback as soon as kiln has taken the
 * words over.
 */
#ifndef KILN_PREP_H
#define KILN_PREP_H

#include "kiln/common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------------
 * Stages and sources
 * ------------------------------------------------------------------------ */

/* The shader stages kiln builds pipelines from. Values are fixed forever. */
enum kiln_stage {
    KILN_STAGE_COMPUTE = 0,
    KILN_STAGE_VERTEX = 1,
    KILN_STAGE_FRAGMENT = 2,
};

/* The stage's short name ("compute", "vertex", "fragment"), or "?" for an
 * unknown value. Thread-safe. */
KILN_API const char *kiln_stage_name(enum kiln_stage stage);

/*
 * One stage's source, as a translator receives it. `text` holds `size`
 * bytes and need not end with a NUL (kiln's own sources do). `name` says
 * which program and stage it is, for log lines ("gen-000007-graphics.frag",
 * "shaders/blur.comp"). All pointers are borrowed for the call.
 */
struct kiln_source {
    enum kiln_stage stage;
    const char *text;
    size_t size;
    const char *name;
};

/* ---------------------------------------------------------------------------
 * Translators
 * ------------------------------------------------------------------------ */

/*
 * Translates one source to SPIR-V. On success it returns 0 and stores a new
 * array of *nwords words in *words, which belongs to the translator until
 * kiln gives it back through kiln_translator.release. On failure it returns
 * a negative kiln error (KILN_ETRANSLATE for a program it cannot translate,
 * KILN_ENOMEM, ...) and may call kiln_translate_set_error() first to say why.
 * It is called from many worker threads at once with the same `user`: it
 * must be thread-safe.
 */
typedef int (*kiln_translate_fn)(void *user, const struct kiln_source *src, uint32_t **words,
                                 size_t *nwords);

/* Gives a translated array back to the translator that made it. */
typedef void (*kiln_release_fn)(void *user, uint32_t *words);

/*
 * A translator as kiln uses it. The struct is copied by value; what `user`
 * points to must outlive every call kiln makes through the copy.
 */
struct kiln_translator {
    kiln_translate_fn translate;
    /* NULL when the words come from malloc(): kiln then takes the array over
     * as it is. Otherwise kiln copies the words and releases the array. */
    kiln_release_fn release;
    void *user;
    /* Identifies the translator and its settings: a program cache written
     * with another stamp is not used (its SPIR-V may differ). */
    uint64_t stamp;
    /* A short name for log lines ("shaderc"); may be NULL. */
    const char *name;
};

/*
 * Runs `t` on one source and checks its output: at least a SPIR-V header
 * (5 words) and the SPIR-V magic number. A failure is logged as one error
 * line naming the source, its stage, the translator and the translator's
 * message (see kiln_translate_set_error).
 * @return 0 with a new malloc'd array in *words (free it with
 * kiln_words_free) of *nwords words; KILN_ETRANSLATE when the translator
 * failed or gave something that is not SPIR-V; the translator's other
 * errors as they are; KILN_EINVAL for a NULL argument. Thread-safe when the
 * translator is.
 */
KILN_API int kiln_translate(const struct kiln_translator *t, const struct kiln_source *src,
                            uint32_t **words, size_t *nwords);

/* Frees words made by kiln_translate. NULL is a no-op. */
KILN_API void kiln_words_free(uint32_t *words);

/*
 * Called by a translator inside its callback to say why it failed; kiln puts
 * the text (newlines become spaces, at most 1 KiB) in the one log line it
 * writes for the failure. Kept per thread; the next kiln_translate on this
 * thread clears it.
 */
KILN_API void kiln_translate_set_error(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;

/* ---------------------------------------------------------------------------
 * The built-in GLSL translator (shaderc)
 * ------------------------------------------------------------------------ */

/* shaderc's optimization level. */
enum kiln_glsl_opt {
    KILN_GLSL_OPT_NONE = 0,        /* glslang's output as it is */
    KILN_GLSL_OPT_SIZE = 1,        /* spirv-opt -Os */
    KILN_GLSL_OPT_PERFORMANCE = 2, /* spirv-opt -O */
};

/* The built-in GLSL translator. Opaque. */
struct kiln_glsl;

/*
 * Makes a GLSL-to-SPIR-V translator over shaderc: GLSL 450, target
 * environment Vulkan 1.1 (SPIR-V 1.3, accepted by lavapipe and NVIDIA's
 * driver), entry point "main", the stage from kiln_source.stage, and the
 * given optimization level. One shaderc compiler and one options object
 * serve every thread: shaderc documents compile calls on one compiler as
 * safe from many threads at once.
 * @return 0 and a new translator in *out; KILN_ENOMEM when shaderc cannot
 * make its compiler; KILN_ENOTSUP in a build without shaderc.
 */
KILN_API int kiln_glsl_create(enum kiln_glsl_opt opt, struct kiln_glsl **out);

/* Frees the translator. NULL is a no-op. No call through its
 * kiln_translator may be running or made afterwards. */
KILN_API void kiln_glsl_destroy(struct kiln_glsl *glsl);

/*
 * The translator's callback table, valid as long as `glsl` lives. Its
 * words come from malloc (release is NULL); its stamp covers shaderc's
 * SPIR-V version, the target environment and the optimization level.
 */
KILN_API const struct kiln_translator *kiln_glsl_translator(const struct kiln_glsl *glsl);

/* ---------------------------------------------------------------------------
 * Programs
 * ------------------------------------------------------------------------ */

#define KILN_PROGRAM_MAX_STAGES 2

/* One stage of a program: source text, SPIR-V, or both once translated. */
struct kiln_program_stage {
    /* The source. src.text is NULL for a stage that came as SPIR-V; src.name
     * is always set (for a file: its path relative to the corpus folder). */
    struct kiln_source src;
    /* The SPIR-V, or NULL until kiln_program_translate fills it. */
    uint32_t *words;
    size_t nwords;
};

/*
 * A program: one compute stage, or a vertex stage then a fragment stage.
 * Everything in it is owned by the program and freed by
 * kiln_program_destroy; a caller may read it and may take `words` over
 * (setting the pointer to NULL), nothing else.
 */
struct kiln_program {
    char *name;
    unsigned nstages;
    struct kiln_program_stage stages[KILN_PROGRAM_MAX_STAGES];
};

/*
 * Translates every stage of `p` that has source text and no SPIR-V yet,
 * through kiln_translate.
 * @return 0, or the first stage's error (stages before it keep their words).
 * Thread-safe for different programs when the translator is.
 */
KILN_API int kiln_program_translate(const struct kiln_translator *t, struct kiln_program *p);

/* @return the SPIR-V bytes of all stages that have words. */
KILN_API size_t kiln_program_spirv_bytes(const struct kiln_program *p);

/* Frees a program and everything it holds. NULL is a no-op. */
KILN_API void kiln_program_destroy(struct kiln_program *p);

/* ---------------------------------------------------------------------------
 * The generator of emulator-like programs (the default corpus)
 *
 * Every generated program uses this one pipeline layout, so one
 * VkPipelineLayout serves them all:
 *
 *   descriptor set 0, binding 0: one storage buffer (VK_DESCRIPTOR_TYPE_
 *     STORAGE_BUFFER, count 1), stages COMPUTE | VERTEX | FRAGMENT. The
 *     vertex and fragment stages only read it; compute reads and writes it.
 *   push constants: one range, offset 0, 16 bytes, stage COMPUTE (four
 *     uints). Graphics stages use no push constants.
 *
 * Compute: local size (64, 1, 1), entry point "main".
 * Graphics: no vertex input bindings or attributes (the vertex shader reads
 * its vertices from the storage buffer by gl_VertexIndex), triangle list,
 * vertex outputs matched by the fragment inputs of the same program, one
 * vec4 color output at location 0 (one color attachment, e.g.
 * VK_FORMAT_R8G8B8A8_UNORM), entry point "main" in both stages.
 * Every buffer index is masked into the first 1 MiB (262,144 words), so a
 * dispatch or draw over a buffer that large never reads outside it.
 *
 * Programs are numbered from 0: an even index is a compute program (an
 * interpreter, 110-200 KB of SPIR-V), an odd one a graphics pair (each
 * stage 25-80 KB). Half the programs and a third of the modules are
 * compute, as in an emulator's cache where compute variants dominate; the
 * modules average about 80 KB. These sizes are for the built-in translator
 * at KILN_GLSL_OPT_NONE (what kiln uses for the generated corpus);
 * docs/generator.md has the measured figures.
 * ------------------------------------------------------------------------ */

/* Bumped whenever the generator's output changes for a (seed, index). */
#define KILN_GENERATOR_VERSION 1

/* The seed kiln prepare and kiln bench use when none is given. */
#define KILN_GENERATOR_DEFAULT_SEED UINT64_C(0x6b696c6e)

/*
 * Generates program number `index` of the corpus named by `seed`: the same
 * (seed, index) gives byte-identical GLSL on every platform. The program
 * has source text only (no words); its name is "gen-NNNNNN-compute" or
 * "gen-NNNNNN-graphics" with the index, and its stages' names add ".comp",
 * ".vert" or ".frag".
 * @return 0 and a new program in *out (kiln_program_destroy), or KILN_ENOMEM.
 * Thread-safe.
 */
KILN_API int kiln_generate_program(uint64_t seed, uint32_t index, struct kiln_program **out);

/*
 * kiln_generate_program, then kiln_program_translate with `t` (the built-in
 * GLSL translator: kiln_glsl_translator()).
 * @return 0 and a new program with SPIR-V for every stage, or an error (a
 * translation failure is logged). Thread-safe when the translator is.
 */
KILN_API int kiln_generate_spirv(const struct kiln_translator *t, uint64_t seed, uint32_t index,
                                 struct kiln_program **out);

/* ---------------------------------------------------------------------------
 * Corpus folders (kiln prepare --corpus DIR)
 * ------------------------------------------------------------------------ */

/* A listed corpus folder. Opaque. */
struct kiln_corpus;

/*
 * Lists a folder and its subfolders (in byte order of the paths, so the
 * list is the same on every run) into programs:
 *   NAME.comp, NAME.vert, NAME.frag             GLSL, translated later;
 *   NAME.comp.spv, NAME.vert.spv, NAME.frag.spv SPIR-V, used as it is.
 * A compute file is a program; a vertex and a fragment file with the same
 * NAME (GLSL or SPIR-V, in any mix) are one. Other files, SPIR-V of other
 * stages (NAME.geom.spv, ...) and a vertex or fragment file without its
 * partner are skipped and counted, and one warning line says how many.
 * The listing reads names only: contents are read by kiln_corpus_load.
 * @return 0 and a new list in *out; KILN_ENOENT / KILN_EIO_OPEN when the
 * folder cannot be read; KILN_EFORMAT for a bad file (a ".spv" whose name
 * has no stage, or two files for one stage of a NAME, such as x.vert and
 * x.vert.spv), with one error line naming it; KILN_ENOTSUP where the
 * platform has no folder listing.
 */
KILN_API int kiln_corpus_open(const char *dir, struct kiln_corpus **out);

/* @return the number of programs listed. */
KILN_API size_t kiln_corpus_count(const struct kiln_corpus *c);

/* @return the number of files skipped by the listing. */
KILN_API size_t kiln_corpus_skipped(const struct kiln_corpus *c);

/*
 * @return program i's name, owned by the list: "NAME.comp" for a compute
 * program and "NAME.vert+frag" for a graphics pair, NAME relative to the
 * folder; NULL when i is out of range.
 */
KILN_API const char *kiln_corpus_name(const struct kiln_corpus *c, size_t i);

/*
 * Reads program i's files: GLSL as source text (no words yet), SPIR-V as
 * words (no source text). Each stage's src.name is its file's path relative
 * to the folder.
 * @return 0 and a new program in *out; KILN_EFORMAT for a SPIR-V file that
 * is empty, not a whole number of words, shorter than a header or without
 * the SPIR-V magic, KILN_ERANGE for a file over 64 MiB, or the read error;
 * each with one error line naming the file. Thread-safe.
 */
KILN_API int kiln_corpus_load(const struct kiln_corpus *c, size_t i, struct kiln_program **out);

/* Frees the list. NULL is a no-op. */
KILN_API void kiln_corpus_destroy(struct kiln_corpus *c);

#ifdef __cplusplus
}
#endif

#endif /* KILN_PREP_H */
