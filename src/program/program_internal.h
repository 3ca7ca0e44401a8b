/*
 * program_internal.h - what the program module's files share.
 */
#ifndef KILN_PROGRAM_INTERNAL_H
#define KILN_PROGRAM_INTERNAL_H

#include "kiln_internal.h"

#include "kiln/program.h"

/*
 * The module policy, the one rule for sealing and opening alike: runs
 * kiln_vk_validate_spirv; when the validator refuses the module,
 * `recorded` is set (KILN_PROGRAM_RECORDED_SPIRV) and the module parses
 * (kiln_vk_check_spirv_structure), it is accepted anyway. @return 0 when
 * valid; 1 when accepted so, with the validator's message in `why`; else
 * kiln_vk_validate_spirv's error (KILN_ENOTSUP: no SPIRV-Tools), with its
 * message in `why`. Thread-safe.
 */
int kiln__program_check_module(const uint32_t *words, size_t n, bool recorded, char *why,
                               size_t cap);

#endif /* KILN_PROGRAM_INTERNAL_H */
