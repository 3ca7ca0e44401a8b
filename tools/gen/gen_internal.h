/*
 * gen_internal.h - what the files of tools/gen share. Private to tools/gen.
 */
#ifndef KILN_GEN_INTERNAL_H
#define KILN_GEN_INTERNAL_H

#include "kiln-tools/gen.h"
#include "tool_internal.h"

/* The largest source or SPIR-V file kiln reads from a corpus folder. */
#define KILN__PREP_MAX_FILE (64u << 20)

/* @return a new empty program named `name` (copied), or NULL. */
static inline struct kiln_program *kiln__prep_program_new(const char *name)
{
    struct kiln_program *p = NULL;
    return kiln_program_create(name, &p) == KILN_OK ? p : NULL;
}

/*
 * Sets a stage's src.name to "<program><suffix>" (a new string the program
 * owns). @return 0 or KILN_ENOMEM.
 */
static inline int kiln__prep_set_stage_name(struct kiln_program_stage *st, const char *program,
                                            const char *suffix)
{
    size_t a = strlen(program), b = strlen(suffix);
    char *s = kiln__malloc(a + b + 1);
    if (!s)
        return KILN_ENOMEM;
    memcpy(s, program, a);
    memcpy(s + a, suffix, b + 1);
    st->src.name = s;
    return KILN_OK;
}

/*
 * Calls `fn` for every regular file under `dir`, recursively, with its path
 * relative to `dir` ('/' separated). The order is the platform's: the caller
 * sorts. @return 0, fn's first negative return, or the listing error (one
 * error line naming the folder).
 */
int kiln__prep_walk(const char *dir, int (*fn)(void *user, const char *rel), void *user);

#endif /* KILN_GEN_INTERNAL_H */
