/*
 * kiln/foz.h - reading Fossilize stream archives (.foz).
 */
#ifndef KILN_FOZ_H
#define KILN_FOZ_H

#include "kiln/common.h"

#ifdef __cplusplus
extern "C" {
#endif

#ifdef __cplusplus
}
#endif

#endif /* KILN_FOZ_H */
