/*
 * gen_modules.c - see gen_modules.h.
 */
#include "gen_modules.h"

#include "kiln-tools/gen.h"
#include "kiln-tools/glsl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int gm_load_any(struct pc_corpus *c, unsigned programs)
{
    char dir[4096];
    snprintf(dir, sizeof(dir), "%s/spirv", kt_corpus_dir());
    struct stat st;
    if (stat(dir, &st) == 0 && S_ISDIR(st.st_mode))
        return pc_load(c);
    return gm_load(c, programs);
}

int gm_load_any_or_skip(struct pc_corpus *c, unsigned programs)
{
    int rc = gm_load_any(c, programs);
    if (rc == KILN_ENOTSUP) {
        printf("skipped: no shared SPIR-V corpus, and no shaderc to generate modules with\n");
        fflush(stdout);
        exit(77);
    }
    return rc;
}

int gm_load(struct pc_corpus *c, unsigned programs)
{
    memset(c, 0, sizeof(*c));
    struct kiln_glsl *g = NULL;
    int rc = kiln_glsl_create(KILN_GLSL_OPT_NONE, &g);
    if (rc < 0)
        return rc;
    c->m = calloc((size_t)programs * KILN_PROGRAM_MAX_STAGES + 1, sizeof(*c->m));
    rc = c->m ? KILN_OK : KILN_ENOMEM;
    for (unsigned i = 0; i < programs && rc == KILN_OK; i++) {
        struct kiln_program *p = NULL;
        rc = kiln_generate_spirv(kiln_glsl_translator(g), KILN_GENERATOR_DEFAULT_SEED, i, &p);
        for (unsigned s = 0; rc == KILN_OK && s < p->nstages; s++) {
            struct pc_module *m = &c->m[c->n];
            size_t len = strlen(p->stages[s].src.name) + 1;
            m->path = malloc(len);
            if (!m->path) {
                rc = KILN_ENOMEM;
                break;
            }
            memcpy(m->path, p->stages[s].src.name, len);
            m->words = p->stages[s].words; /* taken over */
            m->nwords = p->stages[s].nwords;
            p->stages[s].words = NULL;
            c->n++;
        }
        kiln_program_destroy(p);
    }
    kiln_glsl_destroy(g);
    if (rc < 0) {
        fprintf(stderr, "gm_load: cannot generate %u programs: %s\n", programs, kiln_strerror(rc));
        pc_free(c);
    }
    return rc;
}
