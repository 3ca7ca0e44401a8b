/*
 * version.c - the version of the library itself.
 *
 * The numbers are those of kiln/version.h when the library was built, so a
 * program can tell the headers it was compiled with from the library it
 * runs with.
 */
#include "kiln_internal.h"

unsigned kiln_version(void)
{
    return KILN_VERSION_NUMBER;
}

const char *kiln_version_string(void)
{
    return KILN_VERSION_STRING;
}
