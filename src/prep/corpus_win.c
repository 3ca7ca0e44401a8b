/*
 * corpus_win.c - the folder walk of a corpus listing on Windows: not
 * written yet, so listing a corpus folder answers KILN_ENOTSUP there (the
 * generated corpus and a caller's own programs still work).
 */
#include "kiln_internal.h"
#include "prep_internal.h"

int kiln__prep_walk(const char *dir, int (*fn)(void *user, const char *rel), void *user)
{
    (void)fn;
    (void)user;
    KILN_ERROR("prep", "corpus folder %s: listing folders is not supported on this platform", dir);
    return KILN_ENOTSUP;
}
