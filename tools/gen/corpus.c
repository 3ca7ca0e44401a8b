/*
 * corpus.c - a folder of GLSL and SPIR-V files as a list of programs.
 *
 * The listing reads names only, so listing a corpus of thousands of
 * programs costs one folder walk, and the files are read later, one program
 * at a time, by whichever worker prepares it (kiln_corpus_load is
 * thread-safe: the list is never changed after kiln_corpus_open).
 *
 * Invariants:
 * - The list is sorted by name, so program i is the same program on every
 *   run over the same folder, whatever order the platform lists files in.
 * - A NAME has at most one file per stage; a second one is an error rather
 *   than a silent choice between the two.
 * - Every file a program names was a regular file with a known stage at
 *   listing time; its contents are checked when it is loaded.
 */
#include "gen_internal.h"

#include <inttypes.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct corpus_file {
    char *rel;  /* path relative to the folder */
    char *base; /* NAME: rel without the stage extensions */
    uint32_t stage;
    bool spv;
};

struct corpus_program {
    char *name;
    unsigned nstages;
    const struct corpus_file *files[KILN_PROGRAM_MAX_STAGES];
};

struct kiln_corpus {
    char *dir;
    struct corpus_file *files;
    size_t nfiles, capfiles;
    struct corpus_program *programs;
    size_t nprograms;
    /* What the listing left out, for its one warning line. */
    size_t skipped, skipped_stage, skipped_unpaired, skipped_unnamed;
    char first_skipped[256];
};

static const char *const other_stages[] = {".geom",  ".tesc",  ".tese",  ".mesh", ".task", ".rgen",
                                           ".rmiss", ".rchit", ".rahit", ".rint", ".rcall"};

static bool ends_with(const char *s, size_t n, const char *suffix)
{
    size_t k = strlen(suffix);
    return n >= k && memcmp(s + n - k, suffix, k) == 0;
}

static char *dup_n(const char *s, size_t n)
{
    char *d = kiln__malloc(n + 1);
    if (d) {
        memcpy(d, s, n);
        d[n] = '\0';
    }
    return d;
}

static void note_skip(struct kiln_corpus *c, const char *rel, size_t *counter)
{
    c->skipped++;
    if (counter)
        (*counter)++;
    if (!c->first_skipped[0])
        snprintf(c->first_skipped, sizeof(c->first_skipped), "%s", rel);
}

/* Sorts one file into the list by its name, or counts it as skipped. */
static int add_file(void *user, const char *rel)
{
    struct kiln_corpus *c = user;
    size_t n = strlen(rel);
    bool spv = ends_with(rel, n, ".spv");
    size_t m = spv ? n - 4 : n;
    static const struct {
        const char *ext;
        uint32_t stage;
    } exts[] = {{".comp", KILN_VK_STAGE_COMPUTE_BIT},
                {".vert", KILN_VK_STAGE_VERTEX_BIT},
                {".frag", KILN_VK_STAGE_FRAGMENT_BIT}};
    for (size_t i = 0; i < KILN_ARRAY_LEN(exts); i++) {
        if (!ends_with(rel, m, exts[i].ext) || m == strlen(exts[i].ext))
            continue;
        struct corpus_file *files =
            kiln__grow(c->files, c->nfiles, &c->capfiles, sizeof(*files), 64);
        if (!files)
            return KILN_ENOMEM;
        c->files = files;
        struct corpus_file *f = &c->files[c->nfiles];
        f->rel = dup_n(rel, n);
        f->base = dup_n(rel, m - strlen(exts[i].ext));
        if (!f->rel || !f->base) {
            kiln__free(f->rel);
            kiln__free(f->base);
            return KILN_ENOMEM;
        }
        f->stage = exts[i].stage;
        f->spv = spv;
        c->nfiles++;
        return KILN_OK;
    }
    if (!spv)
        return KILN_OK; /* not a program file at all: a licence, a readme */
    for (size_t i = 0; i < KILN_ARRAY_LEN(other_stages); i++)
        if (ends_with(rel, m, other_stages[i])) {
            note_skip(c, rel, &c->skipped_stage);
            return KILN_OK;
        }
    note_skip(c, rel, &c->skipped_unnamed);
    return KILN_OK;
}

/* A file's place among its NAME's stages: compute, vertex, fragment. */
static unsigned slot_of(uint32_t stage)
{
    return stage == KILN_VK_STAGE_COMPUTE_BIT ? 0 : stage == KILN_VK_STAGE_VERTEX_BIT ? 1 : 2;
}

static int cmp_file(const void *a, const void *b)
{
    const struct corpus_file *x = a, *y = b;
    int d = strcmp(x->base, y->base);
    if (d)
        return d;
    if (x->stage != y->stage)
        return (int)slot_of(x->stage) - (int)slot_of(y->stage);
    /* Two files of one stage (an error): named in a fixed order. */
    return strcmp(x->rel, y->rel);
}

static int add_program(struct kiln_corpus *c, const char *base, const char *suffix,
                       const struct corpus_file *a, const struct corpus_file *b)
{
    struct corpus_program *p = &c->programs[c->nprograms];
    size_t n = strlen(base), k = strlen(suffix);
    p->name = kiln__malloc(n + k + 1);
    if (!p->name)
        return KILN_ENOMEM;
    memcpy(p->name, base, n);
    memcpy(p->name + n, suffix, k + 1);
    p->files[0] = a;
    p->files[1] = b;
    p->nstages = b ? 2 : 1;
    c->nprograms++;
    return KILN_OK;
}

/* Groups the sorted files by NAME into programs. */
static int pair_files(struct kiln_corpus *c)
{
    /* At most one program per file. */
    c->programs = kiln__calloc(c->nfiles ? c->nfiles : 1, sizeof(*c->programs));
    if (!c->programs)
        return KILN_ENOMEM;
    size_t i = 0;
    while (i < c->nfiles) {
        const struct corpus_file *slot[3] = {NULL, NULL, NULL};
        size_t j = i;
        for (; j < c->nfiles && strcmp(c->files[j].base, c->files[i].base) == 0; j++) {
            const struct corpus_file *f = &c->files[j];
            unsigned k = slot_of(f->stage);
            if (slot[k]) {
                KILN_ERROR("prep", "corpus %s: %s and %s are both the %s stage of %s", c->dir,
                           slot[k]->rel, f->rel, kiln_vk_stage_name(f->stage), f->base);
                return KILN_EFORMAT;
            }
            slot[k] = f;
        }
        const char *base = c->files[i].base;
        if (slot[0])
            KILN_TRY(add_program(c, base, ".comp", slot[0], NULL));
        if (slot[1] && slot[2])
            KILN_TRY(add_program(c, base, ".vert+frag", slot[1], slot[2]));
        else if (slot[1])
            note_skip(c, slot[1]->rel, &c->skipped_unpaired);
        else if (slot[2])
            note_skip(c, slot[2]->rel, &c->skipped_unpaired);
        i = j;
    }
    return KILN_OK;
}

int kiln_corpus_open(const char *dir, struct kiln_corpus **out)
{
    if (!dir || !out)
        return KILN_EINVAL;
    *out = NULL;
    struct kiln_corpus *c = kiln__calloc(1, sizeof(*c));
    if (!c) {
        KILN_ERROR("prep", "corpus %s: out of memory listing it", dir);
        return KILN_ENOMEM;
    }
    c->dir = dup_n(dir, strlen(dir));
    int rc = c->dir ? kiln__prep_walk(dir, add_file, c) : KILN_ENOMEM;
    if (rc == 0) {
        if (c->nfiles > 1)
            qsort(c->files, c->nfiles, sizeof(*c->files), cmp_file);
        rc = pair_files(c);
    }
    if (rc < 0) {
        if (rc == KILN_ENOMEM)
            KILN_ERROR("prep", "corpus %s: out of memory listing it", dir);
        kiln_corpus_destroy(c);
        return rc;
    }
    if (c->skipped)
        KILN_WARN("prep",
                  "corpus %s: %zu programs; skipped %zu files (%zu of other stages, %zu without "
                  "their vertex or fragment partner, %zu .spv without a stage in the name), "
                  "first %s",
                  dir, c->nprograms, c->skipped, c->skipped_stage, c->skipped_unpaired,
                  c->skipped_unnamed, c->first_skipped);
    else
        KILN_INFO("prep", "corpus %s: %zu programs", dir, c->nprograms);
    *out = c;
    return KILN_OK;
}

size_t kiln_corpus_count(const struct kiln_corpus *c)
{
    return c ? c->nprograms : 0;
}

size_t kiln_corpus_skipped(const struct kiln_corpus *c)
{
    return c ? c->skipped : 0;
}

const char *kiln_corpus_name(const struct kiln_corpus *c, size_t i)
{
    return c && i < c->nprograms ? c->programs[i].name : NULL;
}

/* Reads one file into a program stage. */
static int load_stage(const struct kiln_corpus *c, const struct corpus_file *f,
                      struct kiln_program_stage *st)
{
    char path[4096];
    if (kiln__path_join(path, sizeof(path), c->dir, f->rel) < 0) {
        KILN_ERROR("prep", "corpus %s: path of %s too long", c->dir, f->rel);
        return KILN_ERANGE;
    }
    st->src.stage = f->stage;
    KILN_TRY(kiln__prep_set_stage_name(st, f->rel, ""));
    void *data = NULL;
    size_t n = 0;
    int rc = kiln_io_read_file(kiln_io_default(), path, KILN__PREP_MAX_FILE, &data, &n);
    if (rc < 0) {
        KILN_ERROR("prep", "corpus file %s: cannot read: %s", path,
                   rc == KILN_ERANGE ? "larger than 64 MiB" : kiln_strerror(rc));
        return rc;
    }
    if (f->spv) {
        const char *why = NULL;
        if (kiln_spirv_check(data, n, &why) < 0) {
            KILN_ERROR("prep", "corpus file %s: not SPIR-V: %s", path, why);
            kiln__free(data);
            return KILN_EFORMAT;
        }
        st->words = data;
        st->nwords = n / 4;
    } else {
        st->src.text = data;
        st->src.size = n;
    }
    return KILN_OK;
}

int kiln_corpus_load(const struct kiln_corpus *c, size_t i, struct kiln_program **out)
{
    if (!c || !out || i >= c->nprograms)
        return KILN_EINVAL;
    *out = NULL;
    const struct corpus_program *cp = &c->programs[i];
    struct kiln_program *p = kiln__prep_program_new(cp->name);
    if (!p)
        return KILN_ENOMEM;
    p->nstages = cp->nstages;
    for (unsigned s = 0; s < cp->nstages; s++) {
        int rc = load_stage(c, cp->files[s], &p->stages[s]);
        if (rc < 0) {
            kiln_program_destroy(p);
            return rc;
        }
    }
    *out = p;
    return KILN_OK;
}

void kiln_corpus_destroy(struct kiln_corpus *c)
{
    if (!c)
        return;
    for (size_t i = 0; i < c->nfiles; i++) {
        kiln__free(c->files[i].rel);
        kiln__free(c->files[i].base);
    }
    for (size_t i = 0; i < c->nprograms; i++)
        kiln__free(c->programs[i].name);
    kiln__free(c->files);
    kiln__free(c->programs);
    kiln__free(c->dir);
    kiln__free(c);
}

static int source_load(void *user, size_t i, struct kiln_program **out)
{
    return kiln_corpus_load(user, i, out); /* logs its failures, naming the file */
}

void kiln_corpus_source(const struct kiln_corpus *c, struct kiln_program_source *src)
{
    *src = (struct kiln_program_source){
        .size = sizeof(struct kiln_program_source),
        .user = (void *)c,
        .count = kiln_corpus_count(c),
        .load = source_load,
    };
}
