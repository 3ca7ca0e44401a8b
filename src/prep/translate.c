/*
 * translate.c - running a translator, and programs.
 *
 * Every translation goes through kiln_translate, which is what makes the
 * ownership rule of prep.h hold: whatever the translator allocated, the
 * caller gets a malloc'd array (taken over when the translator used malloc,
 * copied and released otherwise), so a program never depends on the
 * translator outliving it. It also checks the output is SPIR-V before
 * anything downstream (packing, a driver) sees it, and writes the one log
 * line of a failure, with the translator's own message carried in a
 * per-thread buffer (translators run on many workers at once).
 */
#include "kiln_internal.h"
#include "isolate_internal.h" /* the test-only fault */

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static _Thread_local char translate_error[1024];

void kiln_translate_set_error(const char *fmt, ...)
{
    if (!fmt)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(translate_error, sizeof(translate_error), fmt, ap);
    va_end(ap);
    for (char *c = translate_error; *c; c++)
        if (*c == '\n' || *c == '\r')
            *c = ' ';
}

int kiln_translate(const struct kiln_translator *t, const struct kiln_source *src, uint32_t **words,
                   size_t *nwords)
{
    if (!t || !src || !words || !nwords)
        return KILN_EINVAL;
    *words = NULL;
    *nwords = 0;
    struct kiln_translator own;
    KILN_TRY(KILN_STRUCT_IN(&own, t, "kiln_translator"));
    t = &own;
    if (!t->translate)
        return KILN_EINVAL;
    const char *tname = t->name ? t->name : "translator";
    const char *sname = src->name ? src->name : "(unnamed)";
    translate_error[0] = '\0';

    uint32_t *got = NULL;
    size_t n = 0;
    kiln__prep_before_translate(src->name);
    int rc = t->translate(t->user, src, &got, &n);
    if (rc != 0) {
        if (rc > 0)
            rc = KILN_ETRANSLATE;
        KILN_ERROR("prep", "%s (%s): %s failed: %s%s%s", sname, kiln_vk_stage_name(src->stage),
                   tname, kiln_errname(rc), translate_error[0] ? ": " : "", translate_error);
        return rc;
    }
    const char *why = NULL;
    if (!got || kiln_spirv_check(got, n * 4, &why) < 0) {
        KILN_ERROR("prep", "%s (%s): %s gave no SPIR-V: %s", sname, kiln_vk_stage_name(src->stage),
                   tname, got ? why : "no words");
        if (got) {
            if (t->release)
                t->release(t->user, got);
            else
                kiln__free(got);
        }
        return KILN_ETRANSLATE;
    }
    if (t->release) {
        uint32_t *copy = kiln__malloc(n * sizeof(uint32_t));
        if (copy)
            memcpy(copy, got, n * sizeof(uint32_t));
        t->release(t->user, got);
        if (!copy)
            return KILN_ENOMEM;
        got = copy;
    }
    *words = got;
    *nwords = n;
    return KILN_OK;
}

void kiln_words_free(uint32_t *words)
{
    kiln__free(words);
}

int kiln_program_translate(const struct kiln_translator *t, struct kiln_program *p)
{
    if (!t || !p || p->nstages == 0 || p->nstages > KILN_PROGRAM_MAX_STAGES)
        return KILN_EINVAL;
    for (unsigned i = 0; i < p->nstages; i++) {
        struct kiln_program_stage *st = &p->stages[i];
        if (st->words || !st->src.text)
            continue;
        KILN_TRY(kiln_translate(t, &st->src, &st->words, &st->nwords));
    }
    return KILN_OK;
}
