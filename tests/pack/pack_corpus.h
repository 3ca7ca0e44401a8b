/*
 * pack_corpus.h - the pack tests' access to the shared SPIR-V corpus: every
 * .spv file under kt_corpus_dir()/spirv that is a whole number of words,
 * in path order.
 */
#ifndef KILN_PACK_CORPUS_H
#define KILN_PACK_CORPUS_H

#include "kiln_test.h"

struct pc_module {
    char *path;
    uint32_t *words;
    size_t nwords;
};

struct pc_corpus {
    struct pc_module *m;
    size_t n;
};

/* The smallest module the kiln codec transforms (OpCapability Shader,
 * OpMemoryModel): PC_TINY_WORDS words. */
#define PC_TINY_WORDS 10
extern const uint32_t pc_tiny_module[PC_TINY_WORDS];

/* Loads the corpus. @return 0, or a negative error (with a line on stderr). */
int pc_load(struct pc_corpus *c);

/* Frees what pc_load made. */
void pc_free(struct pc_corpus *c);

#endif /* KILN_PACK_CORPUS_H */
