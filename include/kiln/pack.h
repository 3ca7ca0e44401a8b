/*
 * kiln/pack.h - the pack module's public API.
 */
#ifndef KILN_PACK_H
#define KILN_PACK_H

#include "kiln/common.h"

#ifdef __cplusplus
extern "C" {
#endif

#ifdef __cplusplus
}
#endif

#endif /* KILN_PACK_H */
