/*
 * kiln/pool.h - the pool module's public API.
 */
#ifndef KILN_POOL_H
#define KILN_POOL_H

#include "kiln/common.h"

#ifdef __cplusplus
extern "C" {
#endif

#ifdef __cplusplus
}
#endif

#endif /* KILN_POOL_H */
