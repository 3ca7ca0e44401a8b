/*
 * kiln/topo.h - the topo module's public API.
 */
#ifndef KILN_TOPO_H
#define KILN_TOPO_H

#include "kiln/common.h"

#ifdef __cplusplus
extern "C" {
#endif

#ifdef __cplusplus
}
#endif

#endif /* KILN_TOPO_H */
