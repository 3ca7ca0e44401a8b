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
 *
 * A path ending in ".foz" is a Fossilize archive instead of a folder: its
 * shader modules are decoded at open (kiln_foz_*) and kept in memory. A
 * module that the archive's compute pipelines use is a compute program named
 * "HASH.comp" (the 16-digit Fossilize hash), listed in hash order. Graphics
 * modules are listed but not made programs: a single module is no pipeline
 * (the vertex/fragment pairing and the fixed-function state live in the
 * archive's pipeline entries, which kiln does not replay); they are counted
 * as skipped, as are modules of no known stage and damaged entries, in one
 * warning line. Such a program keeps its Fossilize hash, so it is stored
 * under the key kiln_cache_import_foz gives the module (kiln__corpus_key):
 * an archive imported first is prepared without translating anything.
 */
#include "kiln_internal.h"
#include "prep_internal.h"

#include "kiln/foz.h"

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
    uint32_t *words; /* a .foz corpus's compute module (one stage); NULL otherwise */
    size_t nwords;
    uint64_t foz_hash; /* with words: the module's Fossilize hash */
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
    char *d = malloc(n + 1);
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
            free(f->rel);
            free(f->base);
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
    p->name = malloc(n + k + 1);
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
    c->programs = calloc(c->nfiles ? c->nfiles : 1, sizeof(*c->programs));
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

/* Lists a Fossilize archive's modules: compute ones become programs. */
static int open_foz(struct kiln_corpus *c, const char *path)
{
    struct kiln_foz *foz;
    int orc = kiln_foz_open(NULL, path, &foz);
    if (orc < 0) {
        /* The reader logs why at info only: this is the corpus's one line. */
        if (orc == KILN_EFORMAT)
            KILN_ERROR("prep",
                       "corpus %s: not a Fossilize archive of a version kiln reads (%d to %d)",
                       path, KILN_FOZ_VERSION_MIN, KILN_FOZ_VERSION_MAX);
        else
            KILN_ERROR("prep", "corpus %s: cannot open the archive: %s", path, kiln_strerror(orc));
        return orc;
    }
    struct kiln_foz_module_info *mods = NULL;
    int64_t nmods = kiln_foz_list_modules(foz, &mods);
    int rc = nmods < 0 ? (int)nmods : KILN_OK;
    size_t cap = 0, graphics = 0, unknown = 0, damaged = 0;
    if (rc == KILN_OK) {
        c->programs = calloc(nmods > 0 ? (size_t)nmods : 1, sizeof(*c->programs));
        cap = nmods > 0 ? (size_t)nmods : 0;
        rc = c->programs ? KILN_OK : KILN_ENOMEM;
    }
    struct kiln_foz_entry e;
    while (rc == KILN_OK) {
        int got = kiln_foz_next(foz, &e);
        if (got == 0)
            break;
        if (got == KILN_ECORRUPT_RECORD) {
            damaged += e.tag == KILN_FOZ_TAG_SHADER_MODULE;
            continue;
        }
        if (got < 0) {
            KILN_ERROR("prep", "corpus %s: the archive cannot be read past offset %" PRIu64 ": %s",
                       path, e.offset, kiln_strerror(got));
            rc = got;
            break;
        }
        if (e.tag != KILN_FOZ_TAG_SHADER_MODULE)
            continue;
        const struct kiln_foz_module_info *info =
            kiln_foz_module_list_find(mods, (size_t)nmods, e.hash);
        char name[32];
        snprintf(name, sizeof(name), "%016" PRIx64 ".comp", e.hash);
        if (!info || !(info->stages & KILN_VK_STAGE_COMPUTE_BIT)) {
            if (info && info->stages)
                graphics++;
            else
                unknown++;
            note_skip(c, name, NULL);
            continue;
        }
        /* A hash that comes twice is one module (list_modules has one). */
        bool seen = false;
        for (size_t i = 0; i < c->nprograms && !seen; i++)
            seen = strcmp(c->programs[i].name, name) == 0;
        if (seen || c->nprograms == cap)
            continue;
        struct kiln_foz_module m;
        int d = kiln_foz_decode_module(&e, &m);
        if (d < 0) {
            KILN_WARN("prep", "corpus %s: module %016" PRIx64 " does not decode: %s; skipped", path,
                      e.hash, kiln_strerror(d));
            damaged++;
            note_skip(c, name, NULL);
            continue;
        }
        struct corpus_program *p = &c->programs[c->nprograms];
        p->name = dup_n(name, strlen(name));
        if (!p->name) {
            kiln_foz_module_free(&m);
            rc = KILN_ENOMEM;
            break;
        }
        p->nstages = 1;
        p->words = m.words; /* taken over */
        p->nwords = m.word_count;
        p->foz_hash = e.hash;
        c->nprograms++;
    }
    kiln_foz_module_list_free(mods);
    kiln_foz_close(foz);
    if (rc == KILN_ENOMEM)
        KILN_ERROR("prep", "corpus %s: out of memory listing it", path);
    if (rc < 0)
        return rc;
    /* Hash order: the same list on every run. */
    for (size_t i = 1; i < c->nprograms; i++)
        for (size_t j = i; j > 0 && strcmp(c->programs[j - 1].name, c->programs[j].name) > 0; j--) {
            struct corpus_program t = c->programs[j];
            c->programs[j] = c->programs[j - 1];
            c->programs[j - 1] = t;
        }
    if (c->skipped)
        KILN_WARN("prep",
                  "corpus %s: %zu compute programs; %zu graphics modules listed but not prepared "
                  "(a single module is no pipeline), %zu of no known stage, %zu damaged; first %s",
                  path, c->nprograms, graphics, unknown, damaged, c->first_skipped);
    else
        KILN_INFO("prep", "corpus %s: %zu compute programs", path, c->nprograms);
    return KILN_OK;
}

bool kiln__corpus_is_foz(const char *path)
{
    return path && ends_with(path, strlen(path), ".foz");
}

int kiln__corpus_key(const struct kiln_corpus *c, size_t i, struct kiln_key *key)
{
    if (!c || i >= c->nprograms || !c->programs[i].words)
        return KILN_ENOTFOUND;
    *key = kiln_cache_foz_key(c->programs[i].foz_hash);
    return KILN_OK;
}

int kiln_corpus_open(const char *dir, struct kiln_corpus **out)
{
    if (!dir || !out)
        return KILN_EINVAL;
    *out = NULL;
    struct kiln_corpus *c = calloc(1, sizeof(*c));
    if (!c) {
        KILN_ERROR("prep", "corpus %s: out of memory listing it", dir);
        return KILN_ENOMEM;
    }
    c->dir = dup_n(dir, strlen(dir));
    if (c->dir && kiln__corpus_is_foz(dir)) {
        int rc = open_foz(c, dir);
        if (rc < 0) {
            kiln_corpus_destroy(c);
            return rc;
        }
        *out = c;
        return KILN_OK;
    }
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
        if (kiln__prep_check_spirv(data, n, &why) < 0) {
            KILN_ERROR("prep", "corpus file %s: not SPIR-V: %s", path, why);
            free(data);
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
    if (cp->words) {
        struct kiln_program_stage *st = &p->stages[0];
        st->src.stage = KILN_VK_STAGE_COMPUTE_BIT;
        st->words = malloc(cp->nwords * 4);
        int rc = st->words ? kiln__prep_set_stage_name(st, cp->name, "") : KILN_ENOMEM;
        if (rc < 0) {
            kiln_program_destroy(p);
            return rc;
        }
        memcpy(st->words, cp->words, cp->nwords * 4);
        st->nwords = cp->nwords;
        *out = p;
        return KILN_OK;
    }
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
        free(c->files[i].rel);
        free(c->files[i].base);
    }
    for (size_t i = 0; i < c->nprograms; i++) {
        free(c->programs[i].name);
        free(c->programs[i].words);
    }
    free(c->files);
    free(c->programs);
    free(c->dir);
    free(c);
}
