/*
 * prep_internal.h - what the prep module's files share. Private to
 * src/prep.
 */
#ifndef KILN_PREP_INTERNAL_H
#define KILN_PREP_INTERNAL_H

#include "kiln/prep.h"

/* The largest source or SPIR-V file kiln reads from a corpus folder. */
#define KILN__PREP_MAX_FILE (64u << 20)

/* @return a new empty program named `name` (copied), or NULL. */
struct kiln_program *kiln__prep_program_new(const char *name);

/*
 * Sets a stage's src.name to "<program><suffix>" (a new string the program
 * owns). @return 0 or KILN_ENOMEM.
 */
int kiln__prep_set_stage_name(struct kiln_program_stage *st, const char *program,
                              const char *suffix);

/*
 * Checks that `n` bytes look like a SPIR-V module: a whole number of words,
 * at least a header, the magic number in host order.
 * @return 0 or KILN_EFORMAT, with a reason in *why.
 */
int kiln__prep_check_spirv(const void *data, size_t n, const char **why);

/*
 * Calls `fn` for every regular file under `dir`, recursively, with its path
 * relative to `dir` ('/' separated). The order is the platform's: the caller
 * sorts. @return 0, fn's first negative return, or the listing error (one
 * error line naming the folder).
 */
int kiln__prep_walk(const char *dir, int (*fn)(void *user, const char *rel), void *user);

#endif /* KILN_PREP_INTERNAL_H */
