/*
 * pack_opclass.c - which class of `enum kiln_pack_class` a SPIR-V opcode
 * belongs to.
 *
 * Design: a file of its own below both transforms and the statistics, so
 * the transforms (which filter by class for the figures) and pack_stats.c
 * (which calls the transforms) never call each other both ways. Opcodes
 * kiln does not know are KILN_PACK_CLASS_OTHER, so a newer SPIR-V only
 * moves bytes between classes, never out of the figures.
 */
#include "pack_internal.h"

unsigned kiln__spirv_op_class(uint32_t op)
{
    switch (op) {
    case 71:
    case 73:
    case 74:
    case 75:
    case 332:
    case 5632:
        return KILN_PACK_CLASS_DECORATION;
    case 72:
    case 5633:
        return KILN_PACK_CLASS_MEMBER_DECORATION;
    case 1:
    case 19:
    case 20:
    case 21:
    case 22:
    case 23:
    case 24:
    case 25:
    case 26:
    case 27:
    case 28:
    case 29:
    case 30:
    case 31:
    case 32:
    case 33:
    case 34:
    case 35:
    case 36:
    case 37:
    case 38:
    case 39:
    case 41:
    case 42:
    case 43:
    case 44:
    case 45:
    case 46:
    case 48:
    case 49:
    case 50:
    case 51:
    case 52:
    case 4472:
    case 5341:
        return KILN_PACK_CLASS_TYPE_CONSTANT;
    case 2:
    case 3:
    case 4:
    case 5:
    case 6:
    case 7:
    case 8:
    case 317:
    case 330:
        return KILN_PACK_CLASS_DEBUG;
    case 59:
    case 60:
    case 61:
    case 62:
    case 63:
    case 64:
    case 65:
    case 66:
    case 67:
    case 68:
    case 69:
    case 70:
    case 400:
    case 401:
    case 402:
    case 403:
        return KILN_PACK_CLASS_MEMORY;
    case 12:
        return KILN_PACK_CLASS_EXT_INST;
    case 54:
    case 55:
    case 56:
    case 57:
    case 245:
    case 246:
    case 247:
    case 248:
    case 249:
    case 250:
    case 251:
    case 252:
    case 253:
    case 254:
    case 255:
    case 4416:
        return KILN_PACK_CLASS_CONTROL;
    default:
        break;
    }
    if (op >= 227 && op <= 242)
        return KILN_PACK_CLASS_MEMORY; /* atomics */
    if (op >= 86 && op <= 107)
        return KILN_PACK_CLASS_IMAGE;
    if ((op >= 77 && op <= 84) || (op >= 109 && op <= 215) || (op >= 333 && op <= 366))
        return KILN_PACK_CLASS_ARITHMETIC;
    return KILN_PACK_CLASS_OTHER;
}
