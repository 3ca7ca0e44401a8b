/*
 * prep_build_hook.c - libkiln's test hooks: kiln__prep_before_build and
 * kiln__prep_before_translate, which do nothing.
 *
 * Invariant: this file defines those three functions and nothing else, so
 * that a program linking its own definitions of all three first (the test
 * build's kiln-faults command, with prep_fault.c) never pulls this object
 * from the archive and gets no duplicate. An installed libkiln has only
 * these.
 */
#include "kiln_internal.h"
#include "isolate_internal.h"

void kiln__prep_before_build(const char *name)
{
    (void)name;
}

void kiln__prep_before_translate(const char *name)
{
    (void)name;
}

void kiln__prep_isolate_tuning(struct kiln__iso_tuning *t)
{
    *t = (struct kiln__iso_tuning){0};
}
