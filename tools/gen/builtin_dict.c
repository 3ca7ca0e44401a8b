/*
 * builtin_dict.c - kiln-builtin-dict, which trains the kiln codec's built-in
 * dictionary and writes it as src/pack/pack_builtin_dict.inc.
 *
 * Design. The built-in dictionary is part of blob format 4: every blob
 * packed with the kiln codec and no caller's dictionary names it by being
 * of that format, so its bytes may never change once blobs exist (the
 * library pins its id: KILN__BUILTIN_DICT_ID). This program is how the
 * committed bytes were made, kept so that the choice can be read and
 * redone for a later format:
 *
 * - the samples are generated programs of their own seed (BUILTIN_SEED),
 *   so no module that `kiln bench pack --generated` measures (the default
 *   seed) or any file of a real corpus was seen in training;
 * - 200 programs (300 modules: 100 compute, 100 vertex + fragment), GLSL
 *   through shaderc without optimization, as kiln's generated corpus;
 * - kiln_pack_dict_train (COVER over transform 2's streams), 16 KiB: of
 *   4, 16, 32 and 64 KiB, 16 packed the shared corpus smallest and unpacked
 *   it fastest (docs/bench-pack.md, round four).
 *
 * The output depends on shaderc's version (the SPIR-V it makes); the bytes
 * in the tree were made with Debian 12's.
 */
#include <kiln-tools/gen.h>
#include <kiln-tools/glsl.h>
#include <kiln/pack.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#define BUILTIN_SEED     UINT64_C(0x6b696c6e62756c74) /* "kilnbult" */
#define BUILTIN_PROGRAMS 200u
#define BUILTIN_BYTES    ((size_t)16 * 1024)
#define KPD_HEAD         16u /* the serialized form's header (pack_dict.c) */

struct modules {
    const uint32_t **words;
    size_t *nwords;
    size_t n, cap;
};

static int add_program(struct modules *m, struct kiln_program *p)
{
    for (unsigned k = 0; k < p->nstages; k++) {
        if (m->n == m->cap) {
            size_t cap = m->cap ? 2 * m->cap : 64;
            const uint32_t **w = realloc(m->words, cap * sizeof(*w));
            if (w)
                m->words = w;
            size_t *n = realloc(m->nwords, cap * sizeof(*n));
            if (n)
                m->nwords = n;
            if (!w || !n)
                return KILN_ENOMEM;
            m->cap = cap;
        }
        m->words[m->n] = p->stages[k].words;
        m->nwords[m->n++] = p->stages[k].nwords;
        p->stages[k].words = NULL; /* taken over */
    }
    return 0;
}

static int write_inc(const char *path, const uint8_t *b, size_t n, uint64_t id)
{
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "kiln-builtin-dict: cannot write %s\n", path);
        return KILN_EIO;
    }
    fprintf(f,
            "/* The kiln codec's built-in dictionary: %zu bytes, id %016" PRIx64 ".\n"
            " * Made by kiln-builtin-dict (tools/gen/builtin_dict.c); never edit. */\n",
            n, id);
    for (size_t i = 0; i < n; i++)
        fprintf(f, "0x%02x,%s", b[i], i % 16 == 15 || i + 1 == n ? "\n" : " ");
    int rc = fclose(f) == 0 ? 0 : KILN_EIO;
    if (rc < 0)
        fprintf(stderr, "kiln-builtin-dict: cannot write %s\n", path);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: kiln-builtin-dict OUT.inc\n");
        return 2;
    }
    struct kiln_glsl *glsl;
    int rc = kiln_glsl_create(KILN_GLSL_OPT_NONE, &glsl);
    if (rc < 0) {
        fprintf(stderr, "kiln-builtin-dict: no GLSL translator: %s\n", kiln_strerror(rc));
        return 1;
    }
    struct modules m = {0};
    for (uint32_t i = 0; rc == 0 && i < BUILTIN_PROGRAMS; i++) {
        struct kiln_program *p;
        rc = kiln_generate_spirv(kiln_glsl_translator(glsl), BUILTIN_SEED, i, &p);
        if (rc == 0) {
            rc = add_program(&m, p);
            kiln_program_destroy(p);
        }
    }
    kiln_glsl_destroy(glsl);
    struct kiln_pack_dict *dict = NULL;
    if (rc == 0)
        rc = kiln_pack_dict_train(m.words, m.nwords, m.n, BUILTIN_BYTES, &dict);
    if (rc == 0) {
        size_t size;
        const uint8_t *b = kiln_pack_dict_bytes(dict, &size);
        rc = write_inc(argv[1], b + KPD_HEAD, size - KPD_HEAD, kiln_pack_dict_id(dict));
        if (rc == 0)
            printf("%zu modules, dictionary of %zu bytes, id %016" PRIx64 "\n", m.n,
                   size - KPD_HEAD, kiln_pack_dict_id(dict));
    } else {
        fprintf(stderr, "kiln-builtin-dict: %s\n", kiln_strerror(rc));
    }
    kiln_pack_dict_destroy(dict);
    for (size_t i = 0; i < m.n; i++)
        free((void *)m.words[i]);
    free(m.words);
    free(m.nwords);
    return rc == 0 ? 0 : 1;
}
