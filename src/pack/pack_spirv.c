/*
 * pack_spirv.c - kiln's SPIR-V transform, version 1 (blob format 1: kept so
 * that those blobs unpack, and its encoder for tests), and the table of
 * operand shapes per opcode that both transforms share. Format 1 depends on
 * every entry of the table: never change one.
 *
 * Design. Each instruction word is routed by what it means, taken from a
 * table of operand shapes per opcode:
 *
 *   op    opcode, one byte (0xFF and a u16 for opcodes >= 255)
 *   len   word count: 0 when it equals the last count seen for this opcode
 *         (or the opcode's usual count), else the count itself
 *   res   result id, as the zigzag delta from the previous result id + 1
 *         (ids are mostly handed out in order, so this is mostly 0)
 *   type  result type id, as it is (few types, repeated: zstd learns them)
 *   id    other id operands, as the zigzag delta from this instruction's
 *         result id (or the last one when it has none): operands mostly name
 *         values computed just before. Decoration and name targets are a
 *         delta from the previous target instead, since those run in order.
 *   lit   small literals (enums, indices, decoration values) as varints
 *   raw   literal words with no small-number bias (constants), as they are
 *   str   literal strings, as their words
 *
 * Every stream value is a varint of a 32-bit word or a plain word, and every
 * kind of value maps any 32-bit word to a value and back, so the transform
 * is lossless for any word sequence whose instruction lengths fit: a shape
 * that is wrong for an odd module costs size, never correctness. Only a
 * word count of 0 or one past the end makes encode give up (KILN_EFORMAT).
 *
 * Instructions made of an optional (type, result) or (result) prefix and
 * then only ids, the bulk of any module, take a fast path in both
 * directions: straight-line code instead of a switch per operand, reading
 * and writing the streams in the same order as the general path, so the two
 * paths make the same bytes.
 *
 * The stream form is: the size of each stream but the last as a varint,
 * then the streams back to back. The decoder checks every read against its
 * stream's end, every word count against the words left, and at the end
 * that every stream was used up exactly; the blob's checksum then catches
 * any damage that still decodes.
 */
#include "pack_internal.h"
#include "pack_varint.h"

#include <assert.h>
#include <pthread.h>
#include <string.h>

enum { S_OP, S_LEN, S_RES, S_TYPE, S_ID, S_LIT, S_RAW, S_STR, S_COUNT };

/* Shorter names for the shared operand kinds and shape fields. */
enum {
    K_NONE = KILN__K_NONE,
    K_TYPE = KILN__K_TYPE,
    K_RES = KILN__K_RES,
    K_ID = KILN__K_ID,
    K_TARGET = KILN__K_TARGET,
    K_LIT = KILN__K_LIT,
    K_WORD = KILN__K_WORD,
    K_STR = KILN__K_STR,
};
enum { FAST_NONE = KILN__FAST_NONE, FAST_R = KILN__FAST_R, FAST_TR = KILN__FAST_TR };
#define SHAPE_FIXED KILN__SHAPE_FIXED
#define shape       kiln__shape

/* Opcodes below this have a table entry, a few above have one in
 * shape_extra; others use the default shape, in the last slot. */
#define SHAPE_OPS KILN__SHAPE_OPS

/*
 * Shapes, written as one letter per operand after the opcode word: T type,
 * R result, I id, P target, L literal, W word, S string; a '*' makes the
 * next letter the kind of every remaining operand. Opcodes missing here get
 * "*L", which is lossless but compresses less well.
 */
static const char *const shape_src[SHAPE_OPS] = {
    [1] = "TR",         /* OpUndef */
    [2] = "S",          /* OpSourceContinued */
    [3] = "LLIS",       /* OpSource */
    [4] = "S",          /* OpSourceExtension */
    [5] = "PS",         /* OpName */
    [6] = "PLS",        /* OpMemberName */
    [7] = "RS",         /* OpString */
    [8] = "ILL",        /* OpLine */
    [10] = "S",         /* OpExtension */
    [11] = "RS",        /* OpExtInstImport */
    [12] = "TRIL*I",    /* OpExtInst */
    [14] = "LL",        /* OpMemoryModel */
    [15] = "LPS*P",     /* OpEntryPoint */
    [16] = "IL*L",      /* OpExecutionMode */
    [17] = "L",         /* OpCapability */
    [19] = "R",         /* OpTypeVoid */
    [20] = "R",         /* OpTypeBool */
    [21] = "RLL",       /* OpTypeInt */
    [22] = "RL*L",      /* OpTypeFloat */
    [23] = "RIL",       /* OpTypeVector */
    [24] = "RIL",       /* OpTypeMatrix */
    [25] = "RIL*L",     /* OpTypeImage */
    [26] = "R",         /* OpTypeSampler */
    [27] = "RI",        /* OpTypeSampledImage */
    [28] = "RII",       /* OpTypeArray */
    [29] = "RI",        /* OpTypeRuntimeArray */
    [30] = "R*I",       /* OpTypeStruct */
    [31] = "RS",        /* OpTypeOpaque */
    [32] = "RLI",       /* OpTypePointer */
    [33] = "R*I",       /* OpTypeFunction */
    [34] = "R",         /* OpTypeEvent */
    [35] = "R",         /* OpTypeDeviceEvent */
    [36] = "R",         /* OpTypeReserveId */
    [37] = "R",         /* OpTypeQueue */
    [38] = "RL",        /* OpTypePipe */
    [39] = "IL",        /* OpTypeForwardPointer */
    [41] = "TR",        /* OpConstantTrue */
    [42] = "TR",        /* OpConstantFalse */
    [43] = "TR*W",      /* OpConstant */
    [44] = "TR*I",      /* OpConstantComposite */
    [45] = "TRLLL",     /* OpConstantSampler */
    [46] = "TR",        /* OpConstantNull */
    [48] = "TR",        /* OpSpecConstantTrue */
    [49] = "TR",        /* OpSpecConstantFalse */
    [50] = "TR*W",      /* OpSpecConstant */
    [51] = "TR*I",      /* OpSpecConstantComposite */
    [52] = "TRL*I",     /* OpSpecConstantOp */
    [54] = "TRLI",      /* OpFunction */
    [55] = "TR",        /* OpFunctionParameter */
    [57] = "TRI*I",     /* OpFunctionCall */
    [59] = "TRLI",      /* OpVariable */
    [60] = "TRIII",     /* OpImageTexelPointer */
    [61] = "TRI*L",     /* OpLoad */
    [62] = "II*L",      /* OpStore */
    [63] = "II*L",      /* OpCopyMemory */
    [64] = "III*L",     /* OpCopyMemorySized */
    [65] = "TRI*I",     /* OpAccessChain */
    [66] = "TRI*I",     /* OpInBoundsAccessChain */
    [67] = "TRII*I",    /* OpPtrAccessChain */
    [68] = "TRIL",      /* OpArrayLength */
    [69] = "TRI",       /* OpGenericPtrMemSemantics */
    [70] = "TRII*I",    /* OpInBoundsPtrAccessChain */
    [71] = "PL*L",      /* OpDecorate */
    [72] = "PLL*L",     /* OpMemberDecorate */
    [73] = "R",         /* OpDecorationGroup */
    [74] = "I*I",       /* OpGroupDecorate */
    [77] = "TRII",      /* OpVectorExtractDynamic */
    [78] = "TRIII",     /* OpVectorInsertDynamic */
    [79] = "TRII*L",    /* OpVectorShuffle */
    [80] = "TR*I",      /* OpCompositeConstruct */
    [81] = "TRI*L",     /* OpCompositeExtract */
    [82] = "TRII*L",    /* OpCompositeInsert */
    [83] = "TRI",       /* OpCopyObject */
    [84] = "TRI",       /* OpTranspose */
    [86] = "TRII",      /* OpSampledImage */
    [87] = "TRIIL*I",   /* OpImageSampleImplicitLod */
    [88] = "TRIIL*I",   /* OpImageSampleExplicitLod */
    [89] = "TRIIIL*I",  /* OpImageSampleDrefImplicitLod */
    [90] = "TRIIIL*I",  /* OpImageSampleDrefExplicitLod */
    [91] = "TRIIL*I",   /* OpImageSampleProjImplicitLod */
    [92] = "TRIIL*I",   /* OpImageSampleProjExplicitLod */
    [93] = "TRIIIL*I",  /* OpImageSampleProjDrefImplicitLod */
    [94] = "TRIIIL*I",  /* OpImageSampleProjDrefExplicitLod */
    [95] = "TRIIL*I",   /* OpImageFetch */
    [96] = "TRIIIL*I",  /* OpImageGather */
    [97] = "TRIIIL*I",  /* OpImageDrefGather */
    [98] = "TRIIL*I",   /* OpImageRead */
    [99] = "IIIL*I",    /* OpImageWrite */
    [100] = "TRI",      /* OpImage */
    [101] = "TRI",      /* OpImageQueryFormat */
    [102] = "TRI",      /* OpImageQueryOrder */
    [103] = "TRII",     /* OpImageQuerySizeLod */
    [104] = "TRI",      /* OpImageQuerySize */
    [105] = "TRII",     /* OpImageQueryLod */
    [106] = "TRI",      /* OpImageQueryLevels */
    [107] = "TRI",      /* OpImageQuerySamples */
    [109] = "TRI",      /* OpConvertFToU */
    [110] = "TRI",      /* OpConvertFToS */
    [111] = "TRI",      /* OpConvertSToF */
    [112] = "TRI",      /* OpConvertUToF */
    [113] = "TRI",      /* OpUConvert */
    [114] = "TRI",      /* OpSConvert */
    [115] = "TRI",      /* OpFConvert */
    [116] = "TRI",      /* OpQuantizeToF16 */
    [117] = "TRI",      /* OpConvertPtrToU */
    [118] = "TRI",      /* OpSatConvertSToU */
    [119] = "TRI",      /* OpSatConvertUToS */
    [120] = "TRI",      /* OpConvertUToPtr */
    [121] = "TRI",      /* OpPtrCastToGeneric */
    [122] = "TRI",      /* OpGenericCastToPtr */
    [123] = "TRIL",     /* OpGenericCastToPtrExplicit */
    [124] = "TRI",      /* OpBitcast */
    [126] = "TRI",      /* OpSNegate */
    [127] = "TRI",      /* OpFNegate */
    [128] = "TRII",     /* OpIAdd */
    [129] = "TRII",     /* OpFAdd */
    [130] = "TRII",     /* OpISub */
    [131] = "TRII",     /* OpFSub */
    [132] = "TRII",     /* OpIMul */
    [133] = "TRII",     /* OpFMul */
    [134] = "TRII",     /* OpUDiv */
    [135] = "TRII",     /* OpSDiv */
    [136] = "TRII",     /* OpFDiv */
    [137] = "TRII",     /* OpUMod */
    [138] = "TRII",     /* OpSRem */
    [139] = "TRII",     /* OpSMod */
    [140] = "TRII",     /* OpFRem */
    [141] = "TRII",     /* OpFMod */
    [142] = "TRII",     /* OpVectorTimesScalar */
    [143] = "TRII",     /* OpMatrixTimesScalar */
    [144] = "TRII",     /* OpVectorTimesMatrix */
    [145] = "TRII",     /* OpMatrixTimesVector */
    [146] = "TRII",     /* OpMatrixTimesMatrix */
    [147] = "TRII",     /* OpOuterProduct */
    [148] = "TRII",     /* OpDot */
    [149] = "TRII",     /* OpIAddCarry */
    [150] = "TRII",     /* OpISubBorrow */
    [151] = "TRII",     /* OpUMulExtended */
    [152] = "TRII",     /* OpSMulExtended */
    [154] = "TRI",      /* OpAny */
    [155] = "TRI",      /* OpAll */
    [156] = "TRI",      /* OpIsNan */
    [157] = "TRI",      /* OpIsInf */
    [158] = "TRI",      /* OpIsFinite */
    [159] = "TRI",      /* OpIsNormal */
    [160] = "TRI",      /* OpSignBitSet */
    [161] = "TRII",     /* OpLessOrGreater */
    [162] = "TRII",     /* OpOrdered */
    [163] = "TRII",     /* OpUnordered */
    [164] = "TRII",     /* OpLogicalEqual */
    [165] = "TRII",     /* OpLogicalNotEqual */
    [166] = "TRII",     /* OpLogicalOr */
    [167] = "TRII",     /* OpLogicalAnd */
    [168] = "TRI",      /* OpLogicalNot */
    [169] = "TRIII",    /* OpSelect */
    [170] = "TRII",     /* OpIEqual */
    [171] = "TRII",     /* OpINotEqual */
    [172] = "TRII",     /* OpUGreaterThan */
    [173] = "TRII",     /* OpSGreaterThan */
    [174] = "TRII",     /* OpUGreaterThanEqual */
    [175] = "TRII",     /* OpSGreaterThanEqual */
    [176] = "TRII",     /* OpULessThan */
    [177] = "TRII",     /* OpSLessThan */
    [178] = "TRII",     /* OpULessThanEqual */
    [179] = "TRII",     /* OpSLessThanEqual */
    [180] = "TRII",     /* OpFOrdEqual */
    [181] = "TRII",     /* OpFUnordEqual */
    [182] = "TRII",     /* OpFOrdNotEqual */
    [183] = "TRII",     /* OpFUnordNotEqual */
    [184] = "TRII",     /* OpFOrdLessThan */
    [185] = "TRII",     /* OpFUnordLessThan */
    [186] = "TRII",     /* OpFOrdGreaterThan */
    [187] = "TRII",     /* OpFUnordGreaterThan */
    [188] = "TRII",     /* OpFOrdLessThanEqual */
    [189] = "TRII",     /* OpFUnordLessThanEqual */
    [190] = "TRII",     /* OpFOrdGreaterThanEqual */
    [191] = "TRII",     /* OpFUnordGreaterThanEqual */
    [194] = "TRII",     /* OpShiftRightLogical */
    [195] = "TRII",     /* OpShiftRightArithmetic */
    [196] = "TRII",     /* OpShiftLeftLogical */
    [197] = "TRII",     /* OpBitwiseOr */
    [198] = "TRII",     /* OpBitwiseXor */
    [199] = "TRII",     /* OpBitwiseAnd */
    [200] = "TRI",      /* OpNot */
    [201] = "TRIIII",   /* OpBitFieldInsert */
    [202] = "TRIII",    /* OpBitFieldSExtract */
    [203] = "TRIII",    /* OpBitFieldUExtract */
    [204] = "TRI",      /* OpBitReverse */
    [205] = "TRI",      /* OpBitCount */
    [207] = "TRI",      /* OpDPdx */
    [208] = "TRI",      /* OpDPdy */
    [209] = "TRI",      /* OpFwidth */
    [210] = "TRI",      /* OpDPdxFine */
    [211] = "TRI",      /* OpDPdyFine */
    [212] = "TRI",      /* OpFwidthFine */
    [213] = "TRI",      /* OpDPdxCoarse */
    [214] = "TRI",      /* OpDPdyCoarse */
    [215] = "TRI",      /* OpFwidthCoarse */
    [218] = "",         /* OpEmitVertex */
    [219] = "",         /* OpEndPrimitive */
    [220] = "I",        /* OpEmitStreamVertex */
    [221] = "I",        /* OpEndStreamPrimitive */
    [224] = "III",      /* OpControlBarrier */
    [225] = "II",       /* OpMemoryBarrier */
    [227] = "TRIII",    /* OpAtomicLoad */
    [228] = "IIII",     /* OpAtomicStore */
    [229] = "TRIIII",   /* OpAtomicExchange */
    [230] = "TRIIIIII", /* OpAtomicCompareExchange */
    [231] = "TRIIIIII", /* OpAtomicCompareExchangeWeak */
    [232] = "TRIII",    /* OpAtomicIIncrement */
    [233] = "TRIII",    /* OpAtomicIDecrement */
    [234] = "TRIIII",   /* OpAtomicIAdd */
    [235] = "TRIIII",   /* OpAtomicISub */
    [236] = "TRIIII",   /* OpAtomicSMin */
    [237] = "TRIIII",   /* OpAtomicUMin */
    [238] = "TRIIII",   /* OpAtomicSMax */
    [239] = "TRIIII",   /* OpAtomicUMax */
    [240] = "TRIIII",   /* OpAtomicAnd */
    [241] = "TRIIII",   /* OpAtomicOr */
    [242] = "TRIIII",   /* OpAtomicXor */
    [245] = "TR*I",     /* OpPhi */
    [246] = "IIL*L",    /* OpLoopMerge */
    [247] = "IL",       /* OpSelectionMerge */
    [248] = "R",        /* OpLabel */
    [249] = "I",        /* OpBranch */
    [250] = "III*L",    /* OpBranchConditional */
    [251] = "II*L",     /* OpSwitch */
    [252] = "",         /* OpKill */
    [253] = "",         /* OpReturn */
    [254] = "I",        /* OpReturnValue */
    [255] = "",         /* OpUnreachable */
    [256] = "IL",       /* OpLifetimeStart */
    [257] = "IL",       /* OpLifetimeStop */
    [330] = "S",        /* OpModuleProcessed */
    [331] = "IL*I",     /* OpExecutionModeId */
    [332] = "PL*I",     /* OpDecorateId */
    [333] = "TRI",      /* OpGroupNonUniformElect */
    [334] = "TRII",     /* OpGroupNonUniformAll */
    [335] = "TRII",     /* OpGroupNonUniformAny */
    [336] = "TRII",     /* OpGroupNonUniformAllEqual */
    [337] = "TRIII",    /* OpGroupNonUniformBroadcast */
    [338] = "TRII",     /* OpGroupNonUniformBroadcastFirst */
    [339] = "TRII",     /* OpGroupNonUniformBallot */
    [340] = "TRII",     /* OpGroupNonUniformInverseBallot */
    [341] = "TRIII",    /* OpGroupNonUniformBallotBitExtract */
    [342] = "TRILI",    /* OpGroupNonUniformBallotBitCount */
    [343] = "TRII",     /* OpGroupNonUniformBallotFindLSB */
    [344] = "TRII",     /* OpGroupNonUniformBallotFindMSB */
    [345] = "TRIII",    /* OpGroupNonUniformShuffle */
    [346] = "TRIII",    /* OpGroupNonUniformShuffleXor */
    [347] = "TRIII",    /* OpGroupNonUniformShuffleUp */
    [348] = "TRIII",    /* OpGroupNonUniformShuffleDown */
    [349] = "TRIL*I",   /* OpGroupNonUniformIAdd */
    [350] = "TRIL*I",   /* OpGroupNonUniformFAdd */
    [351] = "TRIL*I",   /* OpGroupNonUniformIMul */
    [352] = "TRIL*I",   /* OpGroupNonUniformFMul */
    [353] = "TRIL*I",   /* OpGroupNonUniformSMin */
    [354] = "TRIL*I",   /* OpGroupNonUniformUMin */
    [355] = "TRIL*I",   /* OpGroupNonUniformFMin */
    [356] = "TRIL*I",   /* OpGroupNonUniformSMax */
    [357] = "TRIL*I",   /* OpGroupNonUniformUMax */
    [358] = "TRIL*I",   /* OpGroupNonUniformFMax */
    [359] = "TRIL*I",   /* OpGroupNonUniformBitwiseAnd */
    [360] = "TRIL*I",   /* OpGroupNonUniformBitwiseOr */
    [361] = "TRIL*I",   /* OpGroupNonUniformBitwiseXor */
    [362] = "TRIL*I",   /* OpGroupNonUniformLogicalAnd */
    [363] = "TRIL*I",   /* OpGroupNonUniformLogicalOr */
    [364] = "TRIL*I",   /* OpGroupNonUniformLogicalXor */
    [365] = "TRIII",    /* OpGroupNonUniformQuadBroadcast */
    [366] = "TRIII",    /* OpGroupNonUniformQuadSwap */
    [400] = "TRI",      /* OpCopyLogical */
    [401] = "TRII",     /* OpPtrEqual */
    [402] = "TRII",     /* OpPtrNotEqual */
    [403] = "TRII",     /* OpPtrDiff */
};

/* Opcodes from extensions that common shaders use. */
static const struct {
    uint32_t op;
    const char *src;
} shape_extra[] = {
    {4416, ""},            /* OpTerminateInvocation */
    {4445, "IIIIIIIIIII"}, /* OpTraceRayKHR */
    {4446, "II"},          /* OpExecuteCallableKHR */
    {4448, ""},            /* OpIgnoreIntersectionKHR */
    {4449, ""},            /* OpTerminateRayKHR */
    {4472, "R"},           /* OpTypeRayQueryKHR */
    {5294, "III*I"},       /* OpEmitMeshTasksEXT */
    {5295, "II"},          /* OpSetMeshOutputsEXT */
    {5334, "TRII"},        /* OpReportIntersectionKHR */
    {5341, "R"},           /* OpTypeAccelerationStructureKHR */
    {5632, "PLS"},         /* OpDecorateString */
    {5633, "PLLS"},        /* OpMemberDecorateString */
};

#define SLOTS        (SHAPE_OPS + KILN_ARRAY_LEN(shape_extra) + 1)
#define DEFAULT_SLOT (SLOTS - 1)

_Static_assert(SLOTS <= KILN__SHAPE_SLOTS_MAX, "KILN__SHAPE_SLOTS_MAX is too small");

static struct shape shapes[SLOTS];
static uint16_t default_len[SLOTS];
static pthread_once_t shapes_once = PTHREAD_ONCE_INIT;

static uint8_t kind_of(char c)
{
    switch (c) {
    case 'T':
        return K_TYPE;
    case 'R':
        return K_RES;
    case 'I':
        return K_ID;
    case 'P':
        return K_TARGET;
    case 'L':
        return K_LIT;
    case 'W':
        return K_WORD;
    case 'S':
        return K_STR;
    default:
        return K_NONE;
    }
}

static void parse_shape(const char *src, struct shape *s)
{
    memset(s, 0, sizeof(*s));
    s->rest = K_LIT;
    for (const char *c = src; *c; c++) {
        if (*c == '*') {
            s->rest = kind_of(c[1]);
            break;
        }
        if (s->nfixed < SHAPE_FIXED) {
            uint8_t k = kind_of(*c);
            s->fixed[s->nfixed++] = k;
            s->has_result |= k == K_RES;
        }
    }
}

static void shapes_init(void)
{
    for (unsigned i = 0; i < SLOTS; i++) {
        const char *src = "*L";
        if (i < SHAPE_OPS && shape_src[i])
            src = shape_src[i];
        else if (i >= SHAPE_OPS && i < DEFAULT_SLOT)
            src = shape_extra[i - SHAPE_OPS].src;
        struct shape *sh = &shapes[i];
        parse_shape(src, sh);
        /* The usual count: the opcode word and the fixed operands. */
        default_len[i] = (uint16_t)(1 + sh->nfixed);

        unsigned p = 0;
        if (sh->nfixed >= 2 && sh->fixed[0] == K_TYPE && sh->fixed[1] == K_RES) {
            sh->fast_prefix = FAST_TR;
            p = 2;
        } else if (sh->nfixed >= 1 && sh->fixed[0] == K_RES) {
            sh->fast_prefix = FAST_R;
            p = 1;
        } else {
            sh->fast_prefix = FAST_NONE;
        }
        /* Ids after the prefix, as far as they go. */
        while (p < sh->nfixed && sh->fixed[p] == K_ID)
            p++;
        if (p == sh->nfixed && sh->rest == K_ID)
            sh->fast_wc = 0xFFFF;
        else
            sh->fast_wc = (uint16_t)(p + 1);
        if (sh->fast_prefix == FAST_NONE && p == 0)
            sh->fast_wc = 0; /* nothing to gain */
    }
}

const struct kiln__shape *kiln__shapes(const uint16_t **len)
{
    pthread_once(&shapes_once, shapes_init);
    if (len)
        *len = default_len;
    return shapes;
}

unsigned kiln__shape_slots(void)
{
    return SLOTS;
}

unsigned kiln__shape_slot(uint32_t op)
{
    if (KILN_LIKELY(op < SHAPE_OPS))
        return op;
    for (unsigned i = 0; i < KILN_ARRAY_LEN(shape_extra); i++) {
        if (shape_extra[i].op == op)
            return SHAPE_OPS + i;
    }
    return DEFAULT_SLOT;
}

/* The table slot of an opcode. The default slot never predicts a length. */
static inline unsigned slot_of(uint32_t op)
{
    if (KILN_LIKELY(op < SHAPE_OPS))
        return op;
    for (unsigned i = 0; i < KILN_ARRAY_LEN(shape_extra); i++) {
        if (shape_extra[i].op == op)
            return SHAPE_OPS + i;
    }
    return DEFAULT_SLOT;
}

/* ---- encode ------------------------------------------------------------- */

/*
 * Every stream gets room for the worst case of the whole module (5 bytes a
 * word), then the streams are moved together.
 */
#define STREAM_SLACK 16u

size_t kiln__spirv1_work_bound(size_t nwords)
{
    return (size_t)S_COUNT * (nwords * 5 + STREAM_SLACK) + (size_t)S_COUNT * 5;
}

/* An instruction's first word takes at most 3 + 3 bytes (op, len), any
 * other word at most 5; the stream sizes at most 5 bytes each. */
size_t kiln__spirv1_xform_bound(size_t nwords)
{
    return nwords * 6 + (size_t)S_COUNT * 5 + 16;
}

int64_t kiln__spirv1_encode(const uint32_t *words, size_t nwords, uint8_t *dst, size_t cap,
                            int only_class)
{
    pthread_once(&shapes_once, shapes_init);
    if (nwords < 5 || words[0] != KILN__SPIRV_MAGIC || cap < kiln__spirv1_work_bound(nwords))
        return KILN_EFORMAT;
    size_t region = nwords * 5 + STREAM_SLACK;
    uint8_t *base = dst + (size_t)S_COUNT * 5; /* the stream sizes go before the streams */
    uint8_t *start[S_COUNT], *s[S_COUNT], *saved[S_COUNT];
    for (int i = 0; i < S_COUNT; i++)
        start[i] = s[i] = base + (size_t)i * region;

    uint16_t last_len[SLOTS];
    memcpy(last_len, default_len, sizeof(last_len));

    /* The header after the magic: version, generator, bound, schema. */
    for (int i = 1; i < 5; i++)
        s[S_LIT] = put_varint(s[S_LIT], words[i]);

    uint32_t last_res = 0, last_target = 0;
    size_t w = 5;
    while (w < nwords) {
        uint32_t head = words[w];
        uint32_t op = head & 0xFFFF, wc = head >> 16;
        if (wc == 0 || wc > nwords - w)
            return KILN_EFORMAT;
        if (KILN_UNLIKELY(only_class >= 0))
            memcpy(saved, s, sizeof(saved));
        if (op < 0xFF) {
            *s[S_OP]++ = (uint8_t)op;
        } else {
            *s[S_OP]++ = 0xFF;
            kiln__store_le16(s[S_OP], (uint16_t)op);
            s[S_OP] += 2;
        }
        unsigned slot = slot_of(op);
        if (slot != DEFAULT_SLOT && last_len[slot] == wc) {
            *s[S_LEN]++ = 0;
        } else {
            s[S_LEN] = put_varint(s[S_LEN], wc);
            last_len[slot] = (uint16_t)wc;
        }
        const struct shape *sh = &shapes[slot];
        const uint32_t *ins = words + w;
        if (wc <= sh->fast_wc) {
            uint32_t i = 1, idb = last_res;
            if (sh->fast_prefix == FAST_TR && wc >= 3) {
                s[S_TYPE] = put_varint(s[S_TYPE], ins[1]);
                idb = ins[2];
                s[S_RES] = put_varint(s[S_RES], zigzag(idb - (last_res + 1)));
                last_res = idb;
                i = 3;
            } else if (sh->fast_prefix == FAST_R && wc >= 2) {
                idb = ins[1];
                s[S_RES] = put_varint(s[S_RES], zigzag(idb - (last_res + 1)));
                last_res = idb;
                i = 2;
            } else if (sh->fast_prefix != FAST_NONE) {
                goto general; /* cut short: fewer words than the prefix */
            }
            uint8_t *q = s[S_ID];
            for (; i < wc; i++)
                q = put_varint(q, zigzag(idb - ins[i]));
            s[S_ID] = q;
            goto next;
        }
    general:;
        /* The base for id deltas: this instruction's result if it has one. */
        uint32_t id_base = last_res;
        if (sh->has_result) {
            for (uint32_t i = 1; i < wc && i <= sh->nfixed; i++) {
                if (sh->fixed[i - 1] == K_RES) {
                    id_base = ins[i];
                    break;
                }
            }
        }
        for (uint32_t i = 1; i < wc; i++) {
            uint8_t k = i <= sh->nfixed ? sh->fixed[i - 1] : sh->rest;
            uint32_t v = ins[i];
            switch (k) {
            case K_TYPE:
                s[S_TYPE] = put_varint(s[S_TYPE], v);
                break;
            case K_RES:
                s[S_RES] = put_varint(s[S_RES], zigzag(v - (last_res + 1)));
                last_res = v;
                break;
            case K_ID:
                s[S_ID] = put_varint(s[S_ID], zigzag(id_base - v));
                break;
            case K_TARGET:
                s[S_ID] = put_varint(s[S_ID], zigzag(v - last_target));
                last_target = v;
                break;
            case K_WORD:
                s[S_RAW] = put_word(s[S_RAW], v);
                break;
            case K_STR:
                /* The string's words, up to the one that holds its terminator. */
                for (;;) {
                    s[S_STR] = put_word(s[S_STR], ins[i]);
                    if ((ins[i] >> 24) == 0 || i + 1 >= wc)
                        break;
                    i++;
                }
                break;
            default:
                s[S_LIT] = put_varint(s[S_LIT], v);
                break;
            }
        }
    next:
        /* Per-class figures: drop what other classes' instructions wrote. */
        if (KILN_UNLIKELY(only_class >= 0) && kiln__spirv_op_class(op) != (unsigned)only_class)
            memcpy(s, saved, sizeof(saved));
        w += wc;
    }

    /* Sizes of all streams but the last, then the streams, moved together. */
    uint8_t *p = dst;
    for (int i = 0; i < S_COUNT - 1; i++)
        p = put_varint(p, (uint32_t)(s[i] - start[i]));
    for (int i = 0; i < S_COUNT; i++) {
        size_t n = (size_t)(s[i] - start[i]);
        memmove(p, start[i], n);
        p += n;
    }
    assert((size_t)(p - dst) <= kiln__spirv1_xform_bound(nwords));
    return (int64_t)(p - dst);
}

/* ---- decode ------------------------------------------------------------- */

int kiln__spirv1_decode(const uint8_t *src, size_t n, uint32_t *out, size_t nwords)
{
    pthread_once(&shapes_once, shapes_init);
    if (nwords < 5)
        return KILN_ECORRUPT_BLOB;
    struct rs head = {src, src + n};
    struct rs s[S_COUNT];
    size_t off = 0, sizes[S_COUNT];
    for (int i = 0; i < S_COUNT - 1; i++) {
        uint32_t v;
        if (!get_varint(&head, &v))
            return KILN_ECORRUPT_BLOB;
        sizes[i] = v;
    }
    size_t body = (size_t)(head.end - head.p);
    for (int i = 0; i < S_COUNT - 1; i++) {
        if (sizes[i] > body - off)
            return KILN_ECORRUPT_BLOB;
        s[i].p = head.p + off;
        s[i].end = s[i].p + sizes[i];
        off += sizes[i];
    }
    s[S_COUNT - 1].p = head.p + off;
    s[S_COUNT - 1].end = head.end;

    uint16_t last_len[SLOTS];
    memcpy(last_len, default_len, sizeof(last_len));

    out[0] = KILN__SPIRV_MAGIC;
    for (int i = 1; i < 5; i++) {
        if (!get_varint(&s[S_LIT], &out[i]))
            return KILN_ECORRUPT_BLOB;
    }
    uint32_t last_res = 0, last_target = 0;
    size_t w = 5;
    while (w < nwords) {
        struct rs *so = &s[S_OP];
        if (so->p >= so->end)
            return KILN_ECORRUPT_BLOB;
        uint32_t op = *so->p++;
        if (op == 0xFF) {
            if (so->end - so->p < 2)
                return KILN_ECORRUPT_BLOB;
            op = kiln__load_le16(so->p);
            so->p += 2;
        }
        uint32_t wc;
        if (!get_varint(&s[S_LEN], &wc))
            return KILN_ECORRUPT_BLOB;
        unsigned slot = slot_of(op);
        if (wc == 0) {
            if (slot == DEFAULT_SLOT)
                return KILN_ECORRUPT_BLOB;
            wc = last_len[slot];
        } else if (wc > 0xFFFF) {
            return KILN_ECORRUPT_BLOB;
        }
        last_len[slot] = (uint16_t)wc;
        if (wc > nwords - w)
            return KILN_ECORRUPT_BLOB;
        uint32_t *ins = out + w;
        ins[0] = wc << 16 | op;
        const struct shape *sh = &shapes[slot];
        if (wc <= sh->fast_wc) {
            uint32_t i = 1, base = last_res, v;
            if (sh->fast_prefix == FAST_TR && wc >= 3) {
                if (!get_varint(&s[S_TYPE], &ins[1]) || !get_varint(&s[S_RES], &v))
                    return KILN_ECORRUPT_BLOB;
                base = last_res = ins[2] = last_res + 1 + unzigzag(v);
                i = 3;
            } else if (sh->fast_prefix == FAST_R && wc >= 2) {
                if (!get_varint(&s[S_RES], &v))
                    return KILN_ECORRUPT_BLOB;
                base = last_res = ins[1] = last_res + 1 + unzigzag(v);
                i = 2;
            } else if (sh->fast_prefix != FAST_NONE) {
                goto general;
            }
            struct rs ids = s[S_ID];
            for (; i < wc; i++) {
                if (!get_varint(&ids, &v))
                    return KILN_ECORRUPT_BLOB;
                ins[i] = base - unzigzag(v);
            }
            s[S_ID] = ids;
            w += wc;
            continue;
        }
    general:;
        /* The result id comes first in the streams' order of reading: fetch
         * it ahead so that earlier id operands can use it as their base. */
        uint32_t id_base = last_res;
        uint32_t res_pos = 0, res_val = 0;
        if (sh->has_result) {
            for (uint32_t i = 1; i < wc && i <= sh->nfixed; i++) {
                if (sh->fixed[i - 1] == K_RES) {
                    uint32_t v;
                    if (!get_varint(&s[S_RES], &v))
                        return KILN_ECORRUPT_BLOB;
                    res_pos = i;
                    res_val = last_res + 1 + unzigzag(v);
                    id_base = res_val;
                    break;
                }
            }
        }
        for (uint32_t i = 1; i < wc; i++) {
            uint8_t k = i <= sh->nfixed ? sh->fixed[i - 1] : sh->rest;
            uint32_t v;
            switch (k) {
            case K_TYPE:
                if (!get_varint(&s[S_TYPE], &ins[i]))
                    return KILN_ECORRUPT_BLOB;
                break;
            case K_RES:
                if (i == res_pos) {
                    ins[i] = res_val;
                } else {
                    if (!get_varint(&s[S_RES], &v))
                        return KILN_ECORRUPT_BLOB;
                    ins[i] = last_res + 1 + unzigzag(v);
                }
                last_res = ins[i];
                break;
            case K_ID:
                if (!get_varint(&s[S_ID], &v))
                    return KILN_ECORRUPT_BLOB;
                ins[i] = id_base - unzigzag(v);
                break;
            case K_TARGET:
                if (!get_varint(&s[S_ID], &v))
                    return KILN_ECORRUPT_BLOB;
                ins[i] = last_target + unzigzag(v);
                last_target = ins[i];
                break;
            case K_WORD:
                if (!get_word(&s[S_RAW], &ins[i]))
                    return KILN_ECORRUPT_BLOB;
                break;
            case K_STR:
                for (;;) {
                    if (!get_word(&s[S_STR], &ins[i]))
                        return KILN_ECORRUPT_BLOB;
                    if ((ins[i] >> 24) == 0 || i + 1 >= wc)
                        break;
                    i++;
                }
                break;
            default:
                if (!get_varint(&s[S_LIT], &ins[i]))
                    return KILN_ECORRUPT_BLOB;
                break;
            }
        }
        w += wc;
    }
    for (int i = 0; i < S_COUNT; i++) {
        if (s[i].p != s[i].end)
            return KILN_ECORRUPT_BLOB;
    }
    return 0;
}
