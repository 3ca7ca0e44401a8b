/*
 * foz_programs.c - the compute modules of a Fossilize archive as a program
 * source for kiln_prepare (kiln prepare --corpus FILE.foz).
 *
 * The archive's shader modules are decoded at open and kept in memory. A
 * module that the archive's compute pipelines use is a compute program
 * named "HASH.comp" (the 16-digit Fossilize hash), listed in hash order, so
 * program i is the same on every run. Graphics modules are not made
 * programs: a single module is no pipeline (the vertex/fragment pairing and
 * the fixed-function state live in the archive's pipeline entries, which
 * kiln does not replay); they are counted as skipped, as are modules of no
 * known stage and damaged entries, in one warning line. Each program keeps
 * its Fossilize hash as its key (kiln_foz_key) and the source's stamp is
 * KILN_FOZ_STAMP, so the cache is the one kiln import foz fills: an archive
 * imported first is prepared without storing anything again. Loads only
 * read the list, which never changes after the open: they are thread-safe.
 */
#include "foz_private.h"

#include <inttypes.h>

struct foz_program {
    char *name;
    uint32_t *words;
    size_t nwords;
    uint64_t foz_hash;
};

struct kiln_foz_programs {
    struct foz_program *programs;
    size_t nprograms;
    size_t skipped;
    char first_skipped[256];
};

static char *strdup_(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = kiln__malloc(n);
    if (d)
        memcpy(d, s, n);
    return d;
}

static void note_skip(struct kiln_foz_programs *c, const char *name)
{
    if (!c->skipped++)
        snprintf(c->first_skipped, sizeof(c->first_skipped), "%s", name);
}

/* Lists a Fossilize archive's modules: compute ones become programs. */
static int open_foz(struct kiln_foz_programs *c, const char *path)
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
        c->programs = kiln__calloc(nmods > 0 ? (size_t)nmods : 1, sizeof(*c->programs));
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
            note_skip(c, name);
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
        if (d == KILN_ENOMEM) {
            rc = d;
            break;
        }
        if (d < 0) {
            KILN_WARN("prep", "corpus %s: module %016" PRIx64 " does not decode: %s; skipped", path,
                      e.hash, kiln_strerror(d));
            damaged++;
            note_skip(c, name);
            continue;
        }
        struct foz_program *p = &c->programs[c->nprograms];
        p->name = strdup_(name);
        if (!p->name) {
            kiln_foz_module_free(&m);
            rc = KILN_ENOMEM;
            break;
        }
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
            struct foz_program t = c->programs[j];
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

int kiln_foz_programs_open(const char *path, struct kiln_foz_programs **out)
{
    if (!path || !out)
        return KILN_EINVAL;
    *out = NULL;
    struct kiln_foz_programs *c = kiln__calloc(1, sizeof(*c));
    if (!c) {
        KILN_ERROR("prep", "corpus %s: out of memory listing it", path);
        return KILN_ENOMEM;
    }
    int rc = open_foz(c, path);
    if (rc < 0) {
        kiln_foz_programs_destroy(c);
        return rc;
    }
    *out = c;
    return KILN_OK;
}

size_t kiln_foz_programs_count(const struct kiln_foz_programs *c)
{
    if (!c)
        return 0;
    return c ? c->nprograms : 0;
}

size_t kiln_foz_programs_skipped(const struct kiln_foz_programs *c)
{
    if (!c)
        return 0;
    return c ? c->skipped : 0;
}

static int source_load(void *user, size_t i, struct kiln_program **out)
{
    const struct kiln_foz_programs *c = user;
    *out = NULL;
    if (i >= c->nprograms)
        return KILN_EINVAL;
    const struct foz_program *cp = &c->programs[i];
    struct kiln_program *p = NULL;
    KILN_TRY(kiln_program_create(cp->name, &p));
    struct kiln_program_stage *st = &p->stages[0];
    p->nstages = 1;
    st->src.stage = KILN_VK_STAGE_COMPUTE_BIT;
    st->src.name = strdup_(cp->name);
    st->words = kiln__malloc(cp->nwords * 4);
    if (!st->src.name || !st->words) {
        KILN_ERROR("prep", "%s: out of memory", cp->name);
        kiln_program_destroy(p);
        return KILN_ENOMEM;
    }
    memcpy(st->words, cp->words, cp->nwords * 4);
    st->nwords = cp->nwords;
    p->has_key = true;
    p->key = kiln_foz_key(cp->foz_hash);
    *out = p;
    return KILN_OK;
}

static uint64_t source_stamp(void *user, uint64_t translator_stamp)
{
    (void)user;
    (void)translator_stamp;
    return KILN_FOZ_STAMP; /* SPIR-V as captured: no translator is involved */
}

void kiln_foz_programs_source(const struct kiln_foz_programs *c, struct kiln_program_source *src)
{
    if (!c || !src)
        return;
    *src = (struct kiln_program_source){
        .size = sizeof(struct kiln_program_source),
        .user = (void *)c,
        .count = kiln_foz_programs_count(c),
        .load = source_load,
        .stamp = source_stamp,
    };
}

void kiln_foz_programs_destroy(struct kiln_foz_programs *c)
{
    if (!c)
        return;
    for (size_t i = 0; i < c->nprograms; i++) {
        kiln__free(c->programs[i].name);
        kiln__free(c->programs[i].words);
    }
    kiln__free(c->programs);
    kiln__free(c);
}
