/*
 * kiln/pages.h - the pages module's public API.
 */
#ifndef KILN_PAGES_H
#define KILN_PAGES_H

#include "kiln/common.h"

#ifdef __cplusplus
extern "C" {
#endif

#ifdef __cplusplus
}
#endif

#endif /* KILN_PAGES_H */
