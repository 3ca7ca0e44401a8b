/*
 * gen_modules.h - real SPIR-V for tests, made by kiln's own generator
 * through its GLSL translator (tools/gen, tools/glsl), so that a test runs
 * the same on a bare clone as beside ../shared.
 */
#ifndef KILN_GEN_MODULES_H
#define KILN_GEN_MODULES_H

#include "../pack/pack_corpus.h"

/*
 * Fills *c with every stage of generated programs 0..programs-1 (default
 * seed), one module per stage in program order, each path naming its
 * program and stage ("gen-000003-graphics.frag"). Free it with pc_free.
 * The same modules on every run and platform (for one shaderc).
 * @return 0; KILN_ENOTSUP in a build without shaderc; or the first error
 * (a line on stderr).
 */
int gm_load(struct pc_corpus *c, unsigned programs);

/*
 * The SPIR-V a test stores: the shared corpus (pc_load) when it is there,
 * as CI has it (its small modules keep long cases short), else gm_load's
 * `programs` generated programs (a bare clone). @return 0 or the error.
 */
int gm_load_any(struct pc_corpus *c, unsigned programs);

/* gm_load_any, or the case skipped (one "skipped:" line, exit 77) when
 * there is neither the shared corpus nor shaderc to generate modules with.
 * @return 0 or the error. */
int gm_load_any_or_skip(struct pc_corpus *c, unsigned programs);

#endif /* KILN_GEN_MODULES_H */
