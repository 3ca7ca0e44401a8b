/*
 * foz_corpus.h - the Fossilize archives of the shared corpus, as the foz
 * tests list them: every *.foz under kt_corpus_dir()/foz and its
 * sub-folders (two levels), sorted by path.
 */
#ifndef KILN_FOZ_CORPUS_H
#define KILN_FOZ_CORPUS_H

#include <stddef.h>

#define MAX_ARCHIVES 256

struct archives {
    char *path[MAX_ARCHIVES];
    size_t n;
};

/* Fills *out with the corpus's archives (none when it is absent). */
void corpus_archives(struct archives *out);

/* Frees the paths corpus_archives made; *a is empty afterwards. */
void free_archives(struct archives *a);

#endif /* KILN_FOZ_CORPUS_H */
