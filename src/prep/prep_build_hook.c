/*
 * prep_build_hook.c - libkiln's kiln__prep_before_build: nothing.
 *
 * Invariant: this file defines that one function and nothing else, so that
 * a program linking its own definition first (the test build's kiln-faults
 * command, with prep_fault.c) never pulls this object from the archive and
 * gets no duplicate. An installed libkiln has only this one.
 */
#include "kiln_internal.h"
#include "isolate_internal.h"

void kiln__prep_before_build(const char *name)
{
    (void)name;
}
