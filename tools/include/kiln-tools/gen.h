/*
 * kiln-tools/gen.h - program sources of kiln's own: the generator of
 * emulator-like programs (kiln's default corpus) and corpus folders of GLSL
 * and SPIR-V files. A tool above libkiln (tools/gen): it uses the core's
 * public headers only, and hands kiln_prepare a struct kiln_program_source.
 */
#ifndef KILN_TOOLS_GEN_H
#define KILN_TOOLS_GEN_H

#include "kiln/prep.h"

#ifdef __cplusplus
extern "C" {
#endif

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

/* How many programs kiln prepare generates when told neither --corpus nor
 * --generate (sized so that `make run` ends well within 3 minutes on a
 * 2-core machine with lavapipe; docs/prep.md has the measurement). */
#define KILN_PREPARE_DEFAULT_PROGRAMS 200u

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

/* The generator as a program source: `count` programs of `seed`. */
struct kiln_generator {
    uint64_t seed;  /* KILN_GENERATOR_DEFAULT_SEED for kiln's own corpus */
    uint32_t count; /* KILN_PREPARE_DEFAULT_PROGRAMS for kiln prepare's */
};

/*
 * Fills *src with a source of g's programs (kiln_generate_program: GLSL,
 * to be translated by kiln's GLSL translator). Its stamp mixes the
 * translator's with KILN_GENERATOR_VERSION, so a cache of generated
 * programs is started over when the generator changes. `g` must outlive
 * every use of *src.
 */
KILN_API void kiln_generator_source(const struct kiln_generator *g,
                                    struct kiln_program_source *src);

/*
 * The stamp kiln_generator_source's programs give a cache when translated
 * by a translator with `translator_stamp`. Thread-safe.
 */
KILN_API uint64_t kiln_generator_stamp(uint64_t translator_stamp);

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
 * (A Fossilize archive is a source of its own: kiln/foz.h.)
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

/*
 * Fills *src with a source of the list's programs (kiln_corpus_load); its
 * GLSL needs a translator, its SPIR-V none; the stamp is the translator's.
 * `c` must outlive every use of *src.
 */
KILN_API void kiln_corpus_source(const struct kiln_corpus *c, struct kiln_program_source *src);

#ifdef __cplusplus
}
#endif

#endif /* KILN_TOOLS_GEN_H */
