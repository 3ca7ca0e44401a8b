/*
 * pack_spirv2.c - kiln's SPIR-V transform, version 2 (blob formats 2 and 3): a
 * module split into streams of like values, each small and regular, for
 * zstd to compress.
 *
 * Design. As in version 1 (pack_spirv.c), each instruction word is routed
 * by what it means, from the shared table of operand shapes per opcode,
 * into one of seven streams:
 *
 *   op    opcode, one byte (0xFF and a u16 for opcodes >= 255), then the
 *         word count: 0 when it equals the last count seen for this opcode
 *         (or the opcode's usual count), else the count itself
 *   res   result id, as the zigzag delta from the predicted one: the
 *         previous result + 1, and inside a function the first id from
 *         there on not defined yet (compilers number module-level
 *         constants and types among a function's values, so those are
 *         skipped)
 *   type  result type id, as it is
 *   id    other id operands. Inside a function, an id defined outside
 *         every function but not a type (a constant, a global variable, an
 *         ext-inst set, a function) is written as 0 here and itself in the
 *         gid stream, so that `%int_0` is the same value at every use; any
 *         other id as 1 + the zigzag delta from this instruction's result
 *         id (or the last one): values mostly name values computed just
 *         before. Decoration and name targets are the zigzag delta from the
 *         previous target.
 *   gid   the module-level ids of the id stream, as they are
 *   lit   small literals, as varints: enums, indices, decorations, integer
 *         constants (zigzag). OpMemberDecorate and OpMemberName are coded
 *         per struct: the member index as a delta from the previous one and
 *         an Offset as a delta from the previous member's Offset.
 *   raw   literal words of float constants, as they are; literal strings
 *         as their bytes up to and with the terminating 0 (the padding is
 *         implied), or, for a string not padded with 0s, 0xFF, its word
 *         count and its words
 *
 * The decoder keeps no table of operands: the id stream's 0 says where to
 * read an id. Only the encoder knows which ids are module-level (a first
 * pass marks them in a bitmap); any choice it makes decodes to the same
 * words. Both sides keep the same bitmap of the result ids defined so far
 * to predict the next result; it covers ids below 2 x the word count (a
 * valid module has far fewer), and the search for the next undefined id
 * stops after PREDICT_SCAN ids, so a hostile blob cannot make decoding
 * slow.
 *
 * Every kind of value maps any 32-bit word to a value and back, so the
 * transform is lossless for any word sequence whose instruction lengths
 * fit: a shape that is wrong for an odd module costs size, never
 * correctness. Only a word count of 0 or one past the end makes encode
 * give up (KILN_EFORMAT).
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

enum { S_OP, S_RES, S_TYPE, S_ID, S_GID, S_LIT, S_RAW, S_COUNT };

enum {
    K_TYPE = KILN__K_TYPE,
    K_RES = KILN__K_RES,
    K_ID = KILN__K_ID,
    K_TARGET = KILN__K_TARGET,
    K_WORD = KILN__K_WORD,
    K_STR = KILN__K_STR,
};

enum {
    OP_UNDEF = 1,
    OP_NAME = 5,
    OP_MEMBER_NAME = 6,
    OP_EXT_INST = 12,
    OP_TYPE_FLOAT = 22,
    OP_TYPE_POINTER = 32,
    OP_CONSTANT_TRUE = 41,
    OP_CONSTANT = 43,
    OP_SPEC_CONSTANT_OP = 52,
    OP_FUNCTION = 54,
    OP_FUNCTION_PARAMETER = 55,
    OP_FUNCTION_END = 56,
    OP_VARIABLE = 59,
    OP_DECORATE = 71,
    OP_MEMBER_DECORATE = 72,
    OP_COMPOSITE_EXTRACT = 81,
    DECORATION_OFFSET = 35,
};

/* How far the next undefined result id is searched for. */
#define PREDICT_SCAN 64u

static const struct kiln__shape *shapes;
static const uint16_t *default_len;
static unsigned nslots, default_slot;
static pthread_once_t shapes_once = PTHREAD_ONCE_INIT;

static void shapes_init(void)
{
    shapes = kiln__shapes(&default_len);
    nslots = kiln__shape_slots();
    default_slot = nslots - 1;
}

static inline unsigned slot_of(uint32_t op)
{
    return KILN_LIKELY(op < KILN__SHAPE_OPS) ? op : kiln__shape_slot(op);
}

/* ---- varints and bitmaps -------------------------------------------------- */

/* The decoder's helpers are KILN_INLINE, here and the stream readers in
 * pack_varint.h. Left to itself, GCC called get_varint, get_id or predict
 * out of line at some of their call sites, which ones changing with edits
 * elsewhere in the decoder, and a call in the id loop made unpacking 10-25%
 * slower (docs/bench-pack.md, round six). */

static inline uint32_t rotr8(uint32_t v)
{
    return v >> 8 | v << 24;
}

static inline uint32_t rotl8(uint32_t v)
{
    return v << 8 | v >> 24;
}

/* A set of ids below `lim`; ids at or above it are never members. The
 * bits are in 64-bit words: byte stores would alias every other variable
 * for the compiler, which would then reload them after each id_add. */
struct idset {
    uint64_t *bits;
    uint32_t lim;
};

static uint32_t idset_lim(size_t nwords)
{
    return (uint32_t)KILN_MIN(nwords * 2 + 64, (size_t)UINT32_MAX);
}

/* The bitmap's bytes, with room to align it to 8 bytes. */
static size_t idset_bytes(size_t nwords)
{
    return ((size_t)idset_lim(nwords) / 64 + 1) * 8 + 8;
}

/* A bitmap at the first 8-byte boundary from p, all clear. */
static uint64_t *idset_at(uint8_t *p, size_t nwords)
{
    uint64_t *b = (uint64_t *)(void *)(p + (-(uintptr_t)p & 7));
    memset(b, 0, ((size_t)idset_lim(nwords) / 64 + 1) * 8);
    return b;
}

KILN_INLINE bool id_in(const struct idset *s, uint32_t id)
{
    return id < s->lim && (s->bits[id >> 6] >> (id & 63) & 1);
}

KILN_INLINE void id_add(struct idset *s, uint32_t id)
{
    if (id < s->lim)
        s->bits[id >> 6] |= (uint64_t)1 << (id & 63);
}

/*
 * The predicted result id after `last`: inside a function, the first id
 * from last + 1 on that is not defined yet, searched for up to PREDICT_SCAN
 * ids (else last + 1 + PREDICT_SCAN). Away from the bitmap's end the 64
 * bits from last + 1 on are taken at once and the first clear one counted:
 * how many ids a function's result skips (the constants numbered among its
 * values) changes from one instruction to the next, and a loop over them
 * mispredicted its exit once in every few results. The loop, kept for the
 * bitmap's last 64 ids, gives the same answer.
 */
_Static_assert(PREDICT_SCAN == 64, "predict takes one 64-bit word of the bitmap");

KILN_INLINE uint32_t predict(const struct idset *def, uint32_t last, bool in_func)
{
    uint32_t p = last + 1;
    if (!in_func)
        return p;
    if (KILN_LIKELY(p < def->lim - PREDICT_SCAN)) {
        const uint64_t *b = def->bits + (p >> 6);
        unsigned sh = p & 63;
        uint64_t defined = b[0] >> sh | (b[1] << 1) << (63 - sh); /* no shift by 64 */
        return p + (~defined ? (uint32_t)__builtin_ctzll(~defined) : PREDICT_SCAN);
    }
    for (unsigned n = 0; n < PREDICT_SCAN && id_in(def, p); n++)
        p++;
    return p;
}

/*
 * The float types seen so far (the first few; a module has one to three):
 * a literal word of a constant of any other type (an integer, mostly
 * small) is a varint in lit, a float's is its word in raw.
 */
#define FLOAT_TYPES 8

struct float_types {
    uint32_t id[FLOAT_TYPES];
    unsigned n;
};

static inline bool is_float_type(const struct float_types *f, uint32_t type)
{
    for (unsigned i = 0; i < f->n; i++) {
        if (f->id[i] == type)
            return true;
    }
    return false;
}

static inline void add_float_type(struct float_types *f, uint32_t id)
{
    if (f->n < FLOAT_TYPES)
        f->id[f->n++] = id;
}

/* The state of runs of OpMemberDecorate and OpMemberName on one struct. */
struct runs {
    uint32_t md_target, md_member, md_offset;
    uint32_t mn_target, mn_member;
};

/* ---- encode --------------------------------------------------------------- */

/*
 * Every stream gets room for the worst case of the whole module (5 bytes a
 * word), then the streams are moved together. After the regions, the two
 * id bitmaps.
 */
#define STREAM_SLACK 16u

size_t kiln__spirv2_work_bound(size_t nwords)
{
    return (size_t)S_COUNT * (nwords * 5 + STREAM_SLACK) + (size_t)S_COUNT * 5 +
           2 * idset_bytes(nwords);
}

/* An instruction's first word takes at most 3 + 3 bytes (op, count), any
 * other word at most 5 (a string's first word 6: 0xFF and its count, then
 * 4 a word); the stream sizes at most 5 bytes each. */
size_t kiln__spirv2_xform_bound(size_t nwords)
{
    return nwords * 6 + (size_t)S_COUNT * 5 + 16;
}

size_t kiln__spirv2_decode_scratch(size_t nwords)
{
    return idset_bytes(nwords);
}

/* An id operand: 1 + its zigzag delta from `base`, or 0 and the id itself
 * in the gid stream (a module-level id, or a delta that does not fit). */
static inline uint8_t *put_id(uint8_t *p, uint8_t **gp, bool global, uint32_t base, uint32_t id)
{
    uint32_t z = zigzag(base - id);
    if (global || z == UINT32_MAX) {
        *gp = put_varint(*gp, id);
        *p++ = 0;
        return p;
    }
    return put_varint(p, z + 1);
}

KILN_INLINE bool get_id(struct rs *s, struct rs *g, uint32_t base, uint32_t *id)
{
    uint32_t v;
    if (!get_varint(s, &v))
        return false;
    if (KILN_LIKELY(v != 0)) {
        *id = base - unzigzag(v - 1);
        return true;
    }
    return get_varint(g, id);
}

/*
 * A literal string starting at word `i` of an instruction of `wc` words:
 * its words run up to the one whose top byte is 0 (or the instruction's
 * end). A string whose first 0 byte is in its last word, followed by 0s
 * only, is written as its bytes up to and with that 0; any other, or one
 * starting with the byte 0xFF (never in UTF-8), as 0xFF, its word count
 * and its words.
 * @return the index of the string's last word.
 */
static uint32_t put_str(uint8_t **sp, const uint32_t *ins, uint32_t i, uint32_t wc)
{
    uint32_t j = i;
    while ((ins[j] >> 24) != 0 && j + 1 < wc)
        j++;
    const uint8_t *b = (const uint8_t *)(ins + i);
    size_t total = (size_t)(j - i + 1) * 4, z = 0;
    while (z < total && b[z] != 0)
        z++;
    bool canonical = z < total && z >= total - 4 && b[0] != 0xFF;
    for (size_t k = z; canonical && k < total; k++)
        canonical = b[k] == 0;
    uint8_t *p = *sp;
    if (canonical) {
        memcpy(p, b, z + 1);
        p += z + 1;
    } else {
        *p++ = 0xFF;
        p = put_varint(p, j - i + 1);
        memcpy(p, b, total);
        p += total;
    }
    *sp = p;
    return j;
}

/* Reads a string written by put_str into words i.. of an instruction of
 * `wc` words. @return the index of its last word, or 0 when damaged. */
static uint32_t get_str(struct rs *s, uint32_t *ins, uint32_t i, uint32_t wc)
{
    const uint8_t *p = s->p;
    if (p >= s->end)
        return 0;
    uint8_t *dst = (uint8_t *)(ins + i);
    if (*p == 0xFF) {
        uint32_t n;
        s->p = p + 1;
        if (!get_varint(s, &n) || n == 0 || n > wc - i || (size_t)(s->end - s->p) < (size_t)n * 4)
            return 0;
        memcpy(dst, s->p, (size_t)n * 4);
        s->p += (size_t)n * 4;
        return i + n - 1;
    }
    /* A word at a time while four bytes are left: names are short, and
     * this beats calling memchr and memcpy for each. The lowest byte that
     * the zero-byte test flags is the first 0 (only bytes above a 0 can be
     * flagged falsely). */
    uint32_t k = i;
    for (; k < wc && s->end - p >= 4; k++) {
        uint32_t x = kiln__load_le32(p);
        uint32_t zero = (x - 0x01010101u) & ~x & 0x80808080u;
        if (zero == 0) {
            ins[k] = x;
            p += 4;
            continue;
        }
        unsigned j = (unsigned)__builtin_ctz(zero) / 8; /* the 0's byte */
        ins[k] = j ? x & (0xFFFFFFFFu >> (32 - 8 * j)) : 0;
        s->p = p + j + 1;
        return k;
    }
    if (k == wc)
        return 0; /* no 0 in the instruction's words */
    /* Under four bytes left in the stream: the string ends in them. */
    const uint8_t *z = memchr(p, 0, (size_t)(s->end - p));
    if (!z)
        return 0;
    size_t len = (size_t)(z - p) + 1;
    ins[k] = 0; /* the padding */
    memcpy(ins + k, p, len);
    s->p = z + 1;
    return k;
}

/* Whether a result defined outside functions is coded as itself inside
 * them: anything but a type (types are rare operands there). */
static bool global_kind(uint32_t op)
{
    return kiln__spirv_op_class(op) != KILN_PACK_CLASS_TYPE_CONSTANT || op == OP_UNDEF ||
           (op >= OP_CONSTANT_TRUE && op <= OP_SPEC_CONSTANT_OP);
}

/* The first pass: marks the module-level ids (global_kind results outside
 * functions, and functions). @return 0 or KILN_EFORMAT when the words do
 * not tile. */
static int mark_globals(const uint32_t *words, size_t nwords, struct idset *g)
{
    bool in_func = false;
    size_t w = 5;
    while (w < nwords) {
        uint32_t op = words[w] & 0xFFFF, wc = words[w] >> 16;
        if (wc == 0 || wc > nwords - w)
            return KILN_EFORMAT;
        const struct kiln__shape *sh = &shapes[slot_of(op)];
        if (op == OP_FUNCTION) {
            in_func = true;
            if (wc > 2)
                id_add(g, words[w + 2]);
        } else if (op == OP_FUNCTION_END) {
            in_func = false;
        } else if ((!in_func && sh->has_result && global_kind(op)) ||
                   (in_func && (op == OP_VARIABLE || op == OP_FUNCTION_PARAMETER))) {
            for (uint32_t i = 1; i < wc && i <= sh->nfixed; i++) {
                if (sh->fixed[i - 1] == K_RES) {
                    id_add(g, words[w + i]);
                    break;
                }
            }
        }
        w += wc;
    }
    return 0;
}

int64_t kiln__spirv2_encode(const uint32_t *words, size_t nwords, uint8_t *dst, size_t cap,
                            int only_class)
{
    pthread_once(&shapes_once, shapes_init);
    if (nwords < 5 || words[0] != KILN__SPIRV_MAGIC || cap < kiln__spirv2_work_bound(nwords))
        return KILN_EFORMAT;
    size_t region = nwords * 5 + STREAM_SLACK;
    uint8_t *base = dst + (size_t)S_COUNT * 5; /* the stream sizes go before the streams */
    uint8_t *start[S_COUNT], *s[S_COUNT], *saved[S_COUNT];
    for (int i = 0; i < S_COUNT; i++)
        start[i] = s[i] = base + (size_t)i * region;
    uint8_t *sets = base + (size_t)S_COUNT * region;
    struct idset glob = {idset_at(sets, nwords), idset_lim(nwords)};
    struct idset def = {idset_at(sets + idset_bytes(nwords), nwords), glob.lim};
    KILN_TRY(mark_globals(words, nwords, &glob));

    uint16_t last_len[KILN__SHAPE_SLOTS_MAX];
    memcpy(last_len, default_len, nslots * sizeof(*last_len));

    /* The header after the magic: the version rotated so that its minor
     * number is the low byte, the generator and the schema; the bound
     * follows the instructions, as a delta from the largest result + 1. */
    s[S_LIT] = put_varint(s[S_LIT], rotr8(words[1]));
    s[S_LIT] = put_varint(s[S_LIT], words[2]);
    s[S_LIT] = put_varint(s[S_LIT], words[4]);

    uint32_t last_res = 0, last_target = 0, max_res = 0;
    bool in_func = false;
    struct runs rn = {0, 0, 0, 0, UINT32_MAX};
    struct float_types ft = {{0}, 0};
    size_t w = 5;
    while (w < nwords) {
        uint32_t head = words[w];
        uint32_t op = head & 0xFFFF, wc = head >> 16; /* mark_globals checked wc */
        if (KILN_UNLIKELY(only_class >= 0))
            memcpy(saved, s, sizeof(saved));
        uint8_t *q = s[S_OP];
        if (op < 0xFF) {
            *q++ = (uint8_t)op;
        } else {
            *q++ = 0xFF;
            kiln__store_le16(q, (uint16_t)op);
            q += 2;
        }
        unsigned slot = slot_of(op);
        if (slot != default_slot && last_len[slot] == wc) {
            *q++ = 0;
        } else {
            q = put_varint(q, wc);
            last_len[slot] = (uint16_t)wc;
        }
        s[S_OP] = q;
        const struct kiln__shape *sh = &shapes[slot];
        const uint32_t *ins = words + w;
        if (wc <= sh->fast_wc) {
            uint32_t i = 1, idb = last_res;
            if (sh->fast_prefix == KILN__FAST_TR && wc >= 3) {
                s[S_TYPE] = put_varint(s[S_TYPE], ins[1]);
                idb = ins[2];
                s[S_RES] = put_varint(s[S_RES], zigzag(idb - predict(&def, last_res, in_func)));
                id_add(&def, idb);
                max_res = KILN_MAX(max_res, idb);
                last_res = idb;
                i = 3;
            } else if (sh->fast_prefix == KILN__FAST_R && wc >= 2) {
                idb = ins[1];
                s[S_RES] = put_varint(s[S_RES], zigzag(idb - predict(&def, last_res, in_func)));
                id_add(&def, idb);
                max_res = KILN_MAX(max_res, idb);
                last_res = idb;
                i = 2;
            } else if (sh->fast_prefix != KILN__FAST_NONE) {
                goto general; /* cut short: fewer words than the prefix */
            }
            uint8_t *p = s[S_ID];
            for (; i < wc; i++)
                p = put_id(p, &s[S_GID], in_func && id_in(&glob, ins[i]), idb, ins[i]);
            s[S_ID] = p;
            goto next;
        }
        if (op == OP_MEMBER_DECORATE && wc >= 4) {
            /* A run on one struct: member and Offset as deltas within it. */
            uint32_t t = ins[1];
            s[S_ID] = put_varint(s[S_ID], zigzag(t - last_target));
            last_target = t;
            if (t != rn.md_target) {
                rn.md_target = t;
                rn.md_member = rn.md_offset = 0;
            }
            s[S_LIT] = put_varint(s[S_LIT], zigzag(ins[2] - rn.md_member));
            rn.md_member = ins[2];
            s[S_LIT] = put_varint(s[S_LIT], ins[3]);
            if (ins[3] == DECORATION_OFFSET && wc == 5) {
                s[S_LIT] = put_varint(s[S_LIT], zigzag(ins[4] - rn.md_offset));
                rn.md_offset = ins[4];
            } else {
                for (uint32_t i = 4; i < wc; i++)
                    s[S_LIT] = put_varint(s[S_LIT], ins[i]);
            }
            goto next;
        }
        if (op == OP_MEMBER_NAME && wc >= 4) {
            /* Names of one struct's members, in order: the member as a delta. */
            uint32_t t = ins[1];
            s[S_ID] = put_varint(s[S_ID], zigzag(t - last_target));
            last_target = t;
            if (t != rn.mn_target) {
                rn.mn_target = t;
                rn.mn_member = UINT32_MAX;
            }
            s[S_LIT] = put_varint(s[S_LIT], zigzag(ins[2] - (rn.mn_member + 1)));
            rn.mn_member = ins[2];
            uint32_t i = put_str(&s[S_RAW], ins, 3, wc);
            for (i++; i < wc; i++)
                s[S_LIT] = put_varint(s[S_LIT], ins[i]);
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
                s[S_RES] = put_varint(s[S_RES], zigzag(v - predict(&def, last_res, in_func)));
                id_add(&def, v);
                max_res = KILN_MAX(max_res, v);
                last_res = v;
                break;
            case K_ID:
                s[S_ID] = put_id(s[S_ID], &s[S_GID], in_func && id_in(&glob, v), id_base, v);
                break;
            case K_TARGET:
                s[S_ID] = put_varint(s[S_ID], zigzag(v - last_target));
                last_target = v;
                break;
            case K_WORD:
                if (wc >= 3 && !is_float_type(&ft, ins[1]))
                    s[S_LIT] = put_varint(s[S_LIT], zigzag(v));
                else
                    s[S_RAW] = put_word(s[S_RAW], v);
                break;
            case K_STR:
                i = put_str(&s[S_RAW], ins, i, wc);
                break;
            default:
                s[S_LIT] = put_varint(s[S_LIT], v);
                break;
            }
        }
        if (op == OP_TYPE_FLOAT && wc >= 2)
            add_float_type(&ft, ins[1]);
        /* Inside a function: after an OpFunction up to and with its
         * OpFunctionEnd, as both go through this general path. */
        in_func = op == OP_FUNCTION ? true : op == OP_FUNCTION_END ? false : in_func;
    next:
        /* Per-class figures: drop what other classes' instructions wrote. */
        if (KILN_UNLIKELY(only_class >= 0) && kiln__spirv_op_class(op) != (unsigned)only_class)
            memcpy(s, saved, sizeof(saved));
        w += wc;
    }

    if (only_class < 0)
        s[S_LIT] = put_varint(s[S_LIT], zigzag(words[3] - (max_res + 1)));

    /* Sizes of all streams but the last, then the streams, moved together. */
    uint8_t *p = dst;
    for (int i = 0; i < S_COUNT - 1; i++)
        p = put_varint(p, (uint32_t)(s[i] - start[i]));
    for (int i = 0; i < S_COUNT; i++) {
        size_t n = (size_t)(s[i] - start[i]);
        memmove(p, start[i], n);
        p += n;
    }
    assert((size_t)(p - dst) <= kiln__spirv2_xform_bound(nwords));
    return (int64_t)(p - dst);
}

/* ---- decode --------------------------------------------------------------- */

int kiln__spirv2_decode(const uint8_t *src, size_t n, uint32_t *out, size_t nwords,
                        uint8_t *scratch)
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

    /* Each stream's cursor in a variable of its own, so that the compiler
     * can keep the busy ones in registers. */
    struct rs sop = s[S_OP], sres = s[S_RES], stype = s[S_TYPE], sid = s[S_ID], sgid = s[S_GID],
              slit = s[S_LIT], sraw = s[S_RAW];
    struct idset def = {idset_at(scratch, nwords), idset_lim(nwords)};
    /* The tables in locals: the compiler cannot tell that stores to the
     * output leave the globals alone. */
    const struct kiln__shape *shape_tab = shapes;
    const unsigned unknown_slot = default_slot;
    uint16_t last_len[KILN__SHAPE_SLOTS_MAX];
    memcpy(last_len, default_len, nslots * sizeof(*last_len));

    out[0] = KILN__SPIRV_MAGIC;
    if (!get_varint(&slit, &out[1]) || !get_varint(&slit, &out[2]) || !get_varint(&slit, &out[4]))
        return KILN_ECORRUPT_BLOB;
    out[1] = rotl8(out[1]);
    uint32_t last_res = 0, last_target = 0, max_res = 0;
    bool in_func = false;
    struct runs rn = {0, 0, 0, 0, UINT32_MAX};
    struct float_types ft = {{0}, 0};
    size_t w = 5;
    while (w < nwords) {
        uint32_t op, wc;
        unsigned slot;
        if (KILN_LIKELY(sop.end - sop.p >= 2 && sop.p[0] != 0xFF && sop.p[1] < 0x80)) {
            /* The usual case: an opcode of one byte (its own slot, never
             * the unknown one) and a count of one byte, mostly 0. */
            op = slot = sop.p[0];
            wc = sop.p[1];
            sop.p += 2;
            wc = wc ? wc : last_len[slot];
        } else {
            if (sop.p >= sop.end)
                return KILN_ECORRUPT_BLOB;
            op = *sop.p++;
            if (op == 0xFF) {
                if (sop.end - sop.p < 2)
                    return KILN_ECORRUPT_BLOB;
                op = kiln__load_le16(sop.p);
                sop.p += 2;
            }
            if (!get_varint(&sop, &wc))
                return KILN_ECORRUPT_BLOB;
            slot = slot_of(op);
            if (wc == 0) {
                if (slot == unknown_slot)
                    return KILN_ECORRUPT_BLOB;
                wc = last_len[slot];
            } else if (wc > 0xFFFF) {
                return KILN_ECORRUPT_BLOB;
            }
        }
        last_len[slot] = (uint16_t)wc;
        if (wc > nwords - w)
            return KILN_ECORRUPT_BLOB;
        uint32_t *ins = out + w;
        ins[0] = wc << 16 | op;
        const struct kiln__shape *sh = &shape_tab[slot];
        if (wc <= sh->fast_wc) {
            uint32_t i = 1, base = last_res, v;
            if (sh->fast_prefix == KILN__FAST_TR && wc >= 3) {
                if (!get_varint(&stype, &ins[1]) || !get_varint(&sres, &v))
                    return KILN_ECORRUPT_BLOB;
                base = last_res = ins[2] = predict(&def, last_res, in_func) + unzigzag(v);
                id_add(&def, base);
                max_res = KILN_MAX(max_res, base);
                i = 3;
            } else if (sh->fast_prefix == KILN__FAST_R && wc >= 2) {
                if (!get_varint(&sres, &v))
                    return KILN_ECORRUPT_BLOB;
                base = last_res = ins[1] = predict(&def, last_res, in_func) + unzigzag(v);
                id_add(&def, base);
                max_res = KILN_MAX(max_res, base);
                i = 2;
            } else if (sh->fast_prefix != KILN__FAST_NONE) {
                goto general;
            }
            struct rs ids = sid, gids = sgid;
            for (; i < wc; i++) {
                if (!get_id(&ids, &gids, base, &ins[i]))
                    return KILN_ECORRUPT_BLOB;
            }
            sid = ids;
            sgid = gids;
            w += wc;
            continue;
        }
        /*
         * Straight-line code for the commonest instructions that are not
         * made of ids alone (in their usual shapes). Each stream's values come in the same order
         * as the general path below reads them, so the bytes are the same.
         */
        if (op == OP_VARIABLE && (wc == 4 || wc == 5)) {
            uint32_t v;
            if (!get_varint(&stype, &ins[1]) || !get_varint(&sres, &v) ||
                !get_varint(&slit, &ins[3]))
                return KILN_ECORRUPT_BLOB;
            uint32_t r = last_res = ins[2] = predict(&def, last_res, in_func) + unzigzag(v);
            id_add(&def, r);
            max_res = KILN_MAX(max_res, r);
            if (wc == 5 && !get_id(&sid, &sgid, r, &ins[4]))
                return KILN_ECORRUPT_BLOB;
            w += wc;
            continue;
        }
        if (op == OP_CONSTANT && wc == 4) {
            uint32_t v;
            if (!get_varint(&stype, &ins[1]) || !get_varint(&sres, &v))
                return KILN_ECORRUPT_BLOB;
            uint32_t r = last_res = ins[2] = predict(&def, last_res, in_func) + unzigzag(v);
            id_add(&def, r);
            max_res = KILN_MAX(max_res, r);
            if (!is_float_type(&ft, ins[1])) {
                if (!get_varint(&slit, &v))
                    return KILN_ECORRUPT_BLOB;
                ins[3] = unzigzag(v);
            } else if (!get_word(&sraw, &ins[3])) {
                return KILN_ECORRUPT_BLOB;
            }
            w += wc;
            continue;
        }
        if (op == OP_COMPOSITE_EXTRACT && wc >= 4) {
            uint32_t v;
            if (!get_varint(&stype, &ins[1]) || !get_varint(&sres, &v))
                return KILN_ECORRUPT_BLOB;
            uint32_t r = last_res = ins[2] = predict(&def, last_res, in_func) + unzigzag(v);
            id_add(&def, r);
            max_res = KILN_MAX(max_res, r);
            if (!get_id(&sid, &sgid, r, &ins[3]))
                return KILN_ECORRUPT_BLOB;
            for (uint32_t i = 4; i < wc; i++) {
                if (!get_varint(&slit, &ins[i]))
                    return KILN_ECORRUPT_BLOB;
            }
            w += wc;
            continue;
        }
        if (op == OP_TYPE_POINTER && wc == 4) {
            uint32_t v;
            if (!get_varint(&sres, &v) || !get_varint(&slit, &ins[2]))
                return KILN_ECORRUPT_BLOB;
            uint32_t r = last_res = ins[1] = predict(&def, last_res, in_func) + unzigzag(v);
            id_add(&def, r);
            max_res = KILN_MAX(max_res, r);
            if (!get_id(&sid, &sgid, r, &ins[3]))
                return KILN_ECORRUPT_BLOB;
            w += wc;
            continue;
        }
        if (op == OP_DECORATE && wc >= 3) {
            uint32_t v;
            if (!get_varint(&sid, &v))
                return KILN_ECORRUPT_BLOB;
            last_target = ins[1] = last_target + unzigzag(v);
            for (uint32_t i = 2; i < wc; i++) {
                if (!get_varint(&slit, &ins[i]))
                    return KILN_ECORRUPT_BLOB;
            }
            w += wc;
            continue;
        }
        if (op == OP_NAME && wc >= 3) {
            uint32_t v;
            if (!get_varint(&sid, &v))
                return KILN_ECORRUPT_BLOB;
            last_target = ins[1] = last_target + unzigzag(v);
            uint32_t i = get_str(&sraw, ins, 2, wc);
            if (i == 0)
                return KILN_ECORRUPT_BLOB;
            for (i++; i < wc; i++) {
                if (!get_varint(&slit, &ins[i]))
                    return KILN_ECORRUPT_BLOB;
            }
            w += wc;
            continue;
        }
        if (op == OP_EXT_INST && wc >= 5) {
            uint32_t v;
            if (!get_varint(&stype, &ins[1]) || !get_varint(&sres, &v) ||
                !get_varint(&slit, &ins[4]))
                return KILN_ECORRUPT_BLOB;
            uint32_t r = last_res = ins[2] = predict(&def, last_res, in_func) + unzigzag(v);
            id_add(&def, r);
            max_res = KILN_MAX(max_res, r);
            if (!get_id(&sid, &sgid, r, &ins[3]))
                return KILN_ECORRUPT_BLOB;
            for (uint32_t i = 5; i < wc; i++) {
                if (!get_id(&sid, &sgid, r, &ins[i]))
                    return KILN_ECORRUPT_BLOB;
            }
            w += wc;
            continue;
        }
        if (op == OP_MEMBER_DECORATE && wc >= 4) {
            uint32_t v;
            if (!get_varint(&sid, &v))
                return KILN_ECORRUPT_BLOB;
            uint32_t t = last_target = ins[1] = last_target + unzigzag(v);
            if (t != rn.md_target) {
                rn.md_target = t;
                rn.md_member = rn.md_offset = 0;
            }
            if (!get_varint(&slit, &v) || !get_varint(&slit, &ins[3]))
                return KILN_ECORRUPT_BLOB;
            rn.md_member = ins[2] = rn.md_member + unzigzag(v);
            if (ins[3] == DECORATION_OFFSET && wc == 5) {
                if (!get_varint(&slit, &v))
                    return KILN_ECORRUPT_BLOB;
                rn.md_offset = ins[4] = rn.md_offset + unzigzag(v);
            } else {
                for (uint32_t i = 4; i < wc; i++) {
                    if (!get_varint(&slit, &ins[i]))
                        return KILN_ECORRUPT_BLOB;
                }
            }
            w += wc;
            continue;
        }
        if (op == OP_MEMBER_NAME && wc >= 4) {
            uint32_t v;
            if (!get_varint(&sid, &v))
                return KILN_ECORRUPT_BLOB;
            uint32_t t = last_target = ins[1] = last_target + unzigzag(v);
            if (t != rn.mn_target) {
                rn.mn_target = t;
                rn.mn_member = UINT32_MAX;
            }
            if (!get_varint(&slit, &v))
                return KILN_ECORRUPT_BLOB;
            rn.mn_member = ins[2] = rn.mn_member + 1 + unzigzag(v);
            uint32_t i = get_str(&sraw, ins, 3, wc);
            if (i == 0)
                return KILN_ECORRUPT_BLOB;
            for (i++; i < wc; i++) {
                if (!get_varint(&slit, &ins[i]))
                    return KILN_ECORRUPT_BLOB;
            }
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
                    if (!get_varint(&sres, &v))
                        return KILN_ECORRUPT_BLOB;
                    res_pos = i;
                    res_val = predict(&def, last_res, in_func) + unzigzag(v);
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
                if (!get_varint(&stype, &ins[i]))
                    return KILN_ECORRUPT_BLOB;
                break;
            case K_RES:
                if (i == res_pos) {
                    ins[i] = res_val;
                } else {
                    if (!get_varint(&sres, &v))
                        return KILN_ECORRUPT_BLOB;
                    ins[i] = predict(&def, last_res, in_func) + unzigzag(v);
                }
                id_add(&def, ins[i]);
                max_res = KILN_MAX(max_res, ins[i]);
                last_res = ins[i];
                break;
            case K_ID:
                if (!get_id(&sid, &sgid, id_base, &ins[i]))
                    return KILN_ECORRUPT_BLOB;
                break;
            case K_TARGET:
                if (!get_varint(&sid, &v))
                    return KILN_ECORRUPT_BLOB;
                ins[i] = last_target + unzigzag(v);
                last_target = ins[i];
                break;
            case K_WORD:
                if (wc >= 3 && !is_float_type(&ft, ins[1])) {
                    if (!get_varint(&slit, &v))
                        return KILN_ECORRUPT_BLOB;
                    ins[i] = unzigzag(v);
                } else if (!get_word(&sraw, &ins[i])) {
                    return KILN_ECORRUPT_BLOB;
                }
                break;
            case K_STR:
                if ((i = get_str(&sraw, ins, i, wc)) == 0)
                    return KILN_ECORRUPT_BLOB;
                break;
            default:
                if (!get_varint(&slit, &ins[i]))
                    return KILN_ECORRUPT_BLOB;
                break;
            }
        }
        if (op == OP_TYPE_FLOAT && wc >= 2)
            add_float_type(&ft, ins[1]);
        in_func = op == OP_FUNCTION ? true : op == OP_FUNCTION_END ? false : in_func;
        w += wc;
    }
    uint32_t v;
    if (!get_varint(&slit, &v))
        return KILN_ECORRUPT_BLOB;
    out[3] = max_res + 1 + unzigzag(v);
    if (sop.p != sop.end || sres.p != sres.end || stype.p != stype.end || sid.p != sid.end ||
        sgid.p != sgid.end || slit.p != slit.end || sraw.p != sraw.end)
        return KILN_ECORRUPT_BLOB;
    return 0;
}
