/*
 * kiln/version.h - the version of the kiln headers, made by CMake from
 * project(kiln VERSION ...). Included by kiln/common.h; do not edit the
 * generated copy.
 */
#ifndef KILN_VERSION_H
#define KILN_VERSION_H

#define KILN_VERSION_MAJOR  0
#define KILN_VERSION_MINOR  1
#define KILN_VERSION_PATCH  0
#define KILN_VERSION_STRING "0.1.0"

/* One number that orders versions: 1.2.3 is 10203. */
#define KILN_VERSION_NUMBER \
    (KILN_VERSION_MAJOR * 10000 + KILN_VERSION_MINOR * 100 + KILN_VERSION_PATCH)

#endif /* KILN_VERSION_H */
