/*
 * kiln/prep.h - the prep module's public API.
 */
#ifndef KILN_PREP_H
#define KILN_PREP_H

#include "kiln/common.h"

#ifdef __cplusplus
extern "C" {
#endif

#ifdef __cplusplus
}
#endif

#endif /* KILN_PREP_H */
