/*
 * kiln/vk.h - the vk module's public API.
 */
#ifndef KILN_VK_H
#define KILN_VK_H

#include "kiln/common.h"

#ifdef __cplusplus
extern "C" {
#endif

#ifdef __cplusplus
}
#endif

#endif /* KILN_VK_H */
