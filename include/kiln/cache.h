/*
 * kiln/cache.h - the cache module's public API.
 */
#ifndef KILN_CACHE_H
#define KILN_CACHE_H

#include "kiln/common.h"

#ifdef __cplusplus
extern "C" {
#endif

#ifdef __cplusplus
}
#endif

#endif /* KILN_CACHE_H */
