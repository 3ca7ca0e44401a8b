/*
 * vk_reflect.c - a module's resource interface read from its SPIR-V words:
 * the descriptor bindings it declares (set, binding, descriptor type) and
 * the bytes of push constants it uses.
 *
 * Design. kiln builds the programs of its own shapes in a layout it made
 * (one storage buffer at set 0 binding 0, 16 bytes of push constants);
 * a module that declares anything else makes the create info invalid,
 * and drivers then crash inside vkCreate*Pipelines instead of failing
 * (lavapipe reads past its layout's bindings). Reading the interface
 * first lets kiln refuse such a program with one line.
 *
 * The words come from a cache or a translator, so nothing in them is
 * trusted: instructions are walked with their word counts checked against
 * the end (kiln_spirv_check_words's rule), ids are checked against the header's
 * bound (itself capped, so the per-id tables stay small), every operand
 * read is inside its instruction, and type sizes are computed with a depth
 * limit and saturating arithmetic, so a cyclic or absurd type ends as
 * "unknown", never as a loop or an overflow. A type kiln cannot name gives
 * descriptor type -1 (unknown), which the caller treats as a mismatch.
 */
#include "vk_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SPIRV_MAGIC 0x07230203u
#define MAX_BOUND   (1u << 22)
#define MAX_DEPTH   16
#define NONE        UINT32_MAX

/* Opcodes, decorations, storage classes and dims used here (SPIR-V spec). */
enum {
    OP_DECORATE = 71,
    OP_MEMBER_DECORATE = 72,
    OP_TYPE_INT = 21,
    OP_TYPE_FLOAT = 22,
    OP_TYPE_VECTOR = 23,
    OP_TYPE_MATRIX = 24,
    OP_TYPE_IMAGE = 25,
    OP_TYPE_SAMPLER = 26,
    OP_TYPE_SAMPLED_IMAGE = 27,
    OP_TYPE_ARRAY = 28,
    OP_TYPE_RUNTIME_ARRAY = 29,
    OP_TYPE_STRUCT = 30,
    OP_TYPE_POINTER = 32,
    OP_CONSTANT = 43,
    OP_VARIABLE = 59,
    OP_TYPE_ACCEL = 5341,
    DEC_BLOCK = 2,
    DEC_BUFFER_BLOCK = 3,
    DEC_ARRAY_STRIDE = 6,
    DEC_BINDING = 33,
    DEC_SET = 34,
    DEC_OFFSET = 35,
    SC_UNIFORM_CONSTANT = 0,
    SC_UNIFORM = 2,
    SC_PUSH_CONSTANT = 9,
    SC_STORAGE_BUFFER = 12,
    DIM_BUFFER = 5,
    DIM_SUBPASS = 6,
};

#define FLAG_BLOCK        1u
#define FLAG_BUFFER_BLOCK 2u

struct member_offset {
    uint32_t type, member, offset;
};

struct reader {
    const uint32_t *w;
    size_t n;
    uint32_t bound;
    uint32_t *def; /* word index of each id's defining instruction, 0: none */
    uint32_t *set, *binding, *stride;
    uint8_t *flags;
    struct member_offset *offs;
    size_t noffs, cap_offs;
};

/* The defining instruction of `id` with at least `min` words, or NULL. */
static const uint32_t *def_of(const struct reader *r, uint32_t id, uint32_t min)
{
    if (id >= r->bound || !r->def[id])
        return NULL;
    const uint32_t *in = r->w + r->def[id];
    return (in[0] >> 16) >= min ? in : NULL;
}

static uint32_t op_of(const uint32_t *in)
{
    return in ? in[0] & 0xffffu : 0;
}

static uint64_t sat_add(uint64_t a, uint64_t b)
{
    return a + b < a ? UINT64_MAX : a + b;
}

static uint64_t sat_mul(uint64_t a, uint64_t b)
{
    if (a == UINT64_MAX || b == UINT64_MAX)
        return UINT64_MAX;
    return b && a > UINT64_MAX / b ? UINT64_MAX : a * b;
}

static uint32_t member_offset(const struct reader *r, uint32_t type, uint32_t member)
{
    for (size_t i = 0; i < r->noffs; i++)
        if (r->offs[i].type == type && r->offs[i].member == member)
            return r->offs[i].offset;
    return NONE;
}

/* The bytes a value of `type` takes in a block (UINT64_MAX: unknown). */
static uint64_t type_size(const struct reader *r, uint32_t type, int depth)
{
    const uint32_t *in = def_of(r, type, 2);
    if (!in || depth > MAX_DEPTH)
        return UINT64_MAX;
    uint32_t len = in[0] >> 16;
    switch (op_of(in)) {
    case OP_TYPE_INT:
    case OP_TYPE_FLOAT:
        return len >= 3 ? in[2] / 8 : UINT64_MAX;
    case OP_TYPE_VECTOR:
        return len >= 4 ? sat_mul(type_size(r, in[2], depth + 1), in[3]) : UINT64_MAX;
    case OP_TYPE_MATRIX: {
        if (len < 4)
            return UINT64_MAX;
        /* Columns of three are padded to four in a block's layouts. */
        const uint32_t *col = def_of(r, in[2], 4);
        uint64_t c = type_size(r, in[2], depth + 1);
        if (col && col[3] == 3 && c != UINT64_MAX)
            c = c / 3 * 4;
        return sat_mul(c, in[3]);
    }
    case OP_TYPE_ARRAY: {
        const uint32_t *k = len >= 4 ? def_of(r, in[3], 4) : NULL;
        if (!k || op_of(k) != OP_CONSTANT)
            return UINT64_MAX;
        uint64_t elem = r->stride[type] != NONE ? r->stride[type] : type_size(r, in[2], depth + 1);
        return sat_mul(elem, k[3]);
    }
    case OP_TYPE_STRUCT: {
        uint64_t end = 0;
        for (uint32_t m = 0; m + 2 < len; m++) {
            uint32_t off = member_offset(r, type, m);
            uint64_t sz = type_size(r, in[2 + m], depth + 1);
            if (off == NONE || sz == UINT64_MAX)
                return UINT64_MAX;
            uint64_t e = sat_add(off, sz);
            end = e > end ? e : end;
        }
        return end;
    }
    default:
        return UINT64_MAX;
    }
}

/* The descriptors a variable of `type` binds: 1, an array's length (the
 * product for arrays of arrays), 0 for a runtime array, NONE: unknown. */
static uint32_t descriptor_count(const struct reader *r, uint32_t type)
{
    uint64_t count = 1;
    const uint32_t *in = def_of(r, type, 2);
    for (int d = 0; in && d < MAX_DEPTH; d++) {
        uint32_t op = op_of(in);
        if (op == OP_TYPE_RUNTIME_ARRAY)
            return 0;
        if (op != OP_TYPE_ARRAY)
            return count >= NONE ? NONE : (uint32_t)count;
        const uint32_t *k = (in[0] >> 16) >= 4 ? def_of(r, in[3], 4) : NULL;
        if (!k || op_of(k) != OP_CONSTANT)
            return NONE; /* a length from a specialization constant */
        count = sat_mul(count, k[3]);
        in = def_of(r, in[2], 2);
    }
    return NONE;
}

/* The descriptor type a variable of `type` in `sc` binds, or -1. */
static int descriptor_type(const struct reader *r, uint32_t sc, uint32_t type)
{
    const uint32_t *in = def_of(r, type, 2);
    for (int d = 0; in && d < MAX_DEPTH; d++) {
        uint32_t op = op_of(in);
        if ((op == OP_TYPE_ARRAY || op == OP_TYPE_RUNTIME_ARRAY) && (in[0] >> 16) >= 3) {
            type = in[2];
            in = def_of(r, type, 2);
            continue;
        }
        break;
    }
    if (!in)
        return -1;
    switch (op_of(in)) {
    case OP_TYPE_STRUCT:
        if (sc == SC_STORAGE_BUFFER)
            return VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
        if (sc == SC_UNIFORM)
            return r->flags[type] & FLAG_BUFFER_BLOCK ? VK_DESCRIPTOR_TYPE_STORAGE_BUFFER
                                                      : VK_DESCRIPTOR_TYPE_UNIFORM_BUFFER;
        return -1;
    case OP_TYPE_IMAGE:
        if ((in[0] >> 16) < 9)
            return -1;
        if (in[3] == DIM_SUBPASS)
            return VK_DESCRIPTOR_TYPE_INPUT_ATTACHMENT;
        if (in[3] == DIM_BUFFER)
            return in[7] == 2 ? VK_DESCRIPTOR_TYPE_STORAGE_TEXEL_BUFFER
                              : VK_DESCRIPTOR_TYPE_UNIFORM_TEXEL_BUFFER;
        return in[7] == 2 ? VK_DESCRIPTOR_TYPE_STORAGE_IMAGE : VK_DESCRIPTOR_TYPE_SAMPLED_IMAGE;
    case OP_TYPE_SAMPLER:
        return VK_DESCRIPTOR_TYPE_SAMPLER;
    case OP_TYPE_SAMPLED_IMAGE: {
        /* A sampled buffer image (GLSL's samplerBuffer) is a texel buffer. */
        const uint32_t *img = (in[0] >> 16) >= 3 ? def_of(r, in[2], 9) : NULL;
        return img && op_of(img) == OP_TYPE_IMAGE && img[3] == DIM_BUFFER
                   ? VK_DESCRIPTOR_TYPE_UNIFORM_TEXEL_BUFFER
                   : VK_DESCRIPTOR_TYPE_COMBINED_IMAGE_SAMPLER;
    }
    case OP_TYPE_ACCEL:
        return (int)VK_DESCRIPTOR_TYPE_ACCELERATION_STRUCTURE_KHR;
    default:
        return -1;
    }
}

static int add_offset(struct reader *r, uint32_t type, uint32_t member, uint32_t offset)
{
    if (r->noffs == r->cap_offs) {
        size_t nc = r->cap_offs ? r->cap_offs * 2 : 64;
        struct member_offset *o = kiln__realloc(r->offs, nc * sizeof(*o));
        if (!o)
            return KILN_ENOMEM;
        r->offs = o;
        r->cap_offs = nc;
    }
    r->offs[r->noffs++] = (struct member_offset){type, member, offset};
    return KILN_OK;
}

/* First pass: where each id is defined, and the decorations used here. */
static int scan(struct reader *r, char *why, size_t cap)
{
    for (size_t i = 5; i < r->n;) {
        uint32_t len = r->w[i] >> 16, op = r->w[i] & 0xffffu;
        if (len == 0 || len > r->n - i) {
            snprintf(why, cap, "instruction at word %zu runs past the end", i);
            return KILN_EFORMAT;
        }
        const uint32_t *in = r->w + i;
        uint32_t id = NONE;
        if (((op >= OP_TYPE_INT && op <= OP_TYPE_POINTER) || op == OP_TYPE_ACCEL) && len >= 2)
            id = in[1];
        else if ((op == OP_CONSTANT || op == OP_VARIABLE) && len >= 3)
            id = in[2];
        if (id != NONE && id < r->bound)
            r->def[id] = (uint32_t)i;
        if (op == OP_DECORATE && len >= 3 && in[1] < r->bound) {
            uint32_t t = in[1];
            if (in[2] == DEC_BLOCK)
                r->flags[t] |= FLAG_BLOCK;
            else if (in[2] == DEC_BUFFER_BLOCK)
                r->flags[t] |= FLAG_BUFFER_BLOCK;
            else if (in[2] == DEC_SET && len >= 4)
                r->set[t] = in[3];
            else if (in[2] == DEC_BINDING && len >= 4)
                r->binding[t] = in[3];
            else if (in[2] == DEC_ARRAY_STRIDE && len >= 4)
                r->stride[t] = in[3];
        } else if (op == OP_MEMBER_DECORATE && len >= 5 && in[3] == DEC_OFFSET) {
            KILN_TRY(add_offset(r, in[1], in[2], in[4]));
        }
        i += len;
    }
    return KILN_OK;
}

/* Second pass: the interface variables. */
static void collect(const struct reader *r, struct kiln__spirv_iface *out)
{
    for (size_t i = 5; i < r->n; i += r->w[i] >> 16) {
        const uint32_t *in = r->w + i;
        if ((in[0] & 0xffffu) != OP_VARIABLE || (in[0] >> 16) < 4)
            continue;
        uint32_t var = in[2], sc = in[3];
        const uint32_t *ptr = def_of(r, in[1], 4);
        if (!ptr || op_of(ptr) != OP_TYPE_POINTER)
            continue;
        uint32_t pointee = ptr[3];
        if (sc == SC_PUSH_CONSTANT) {
            uint64_t sz = type_size(r, pointee, 0);
            out->push_known = out->push_known && sz != UINT64_MAX;
            if (sz != UINT64_MAX && sz > out->push_bytes)
                out->push_bytes = sz > UINT32_MAX ? UINT32_MAX : (uint32_t)sz;
            out->has_push = true;
            continue;
        }
        if (sc != SC_UNIFORM_CONSTANT && sc != SC_UNIFORM && sc != SC_STORAGE_BUFFER)
            continue;
        if (var >= r->bound || r->binding[var] == NONE)
            continue; /* not a descriptor (invalid for Vulkan, the validator's to say) */
        struct kiln__spirv_binding b = {
            .set = r->set[var] == NONE ? 0 : r->set[var],
            .binding = r->binding[var],
            .type = descriptor_type(r, sc, pointee),
            .count = descriptor_count(r, pointee),
        };
        if (out->nbindings == KILN__SPIRV_MAX_BINDINGS) {
            /* Set 0 binding 0 is what kiln's own layout has: it is never
             * the one left out. */
            out->truncated = true;
            if (b.set == 0 && b.binding == 0)
                out->bindings[KILN__SPIRV_MAX_BINDINGS - 1] = b;
            continue;
        }
        out->bindings[out->nbindings++] = b;
    }
}

int kiln__spirv_reflect(const uint32_t *words, size_t n, struct kiln__spirv_iface *out, char *why,
                        size_t cap)
{
    memset(out, 0, sizeof(*out));
    out->push_known = true;
    if (n < 5 || words[0] != SPIRV_MAGIC) {
        snprintf(why, cap, "not a SPIR-V module");
        return KILN_EFORMAT;
    }
    if (words[3] > MAX_BOUND) {
        snprintf(why, cap, "id bound %u over %u", words[3], MAX_BOUND);
        return KILN_EFORMAT;
    }
    struct reader r = {.w = words, .n = n, .bound = words[3]};
    size_t b = r.bound ? r.bound : 1;
    r.def = kiln__calloc(b, sizeof(*r.def));
    r.set = kiln__malloc(b * sizeof(*r.set));
    r.binding = kiln__malloc(b * sizeof(*r.binding));
    r.stride = kiln__malloc(b * sizeof(*r.stride));
    r.flags = kiln__calloc(b, 1);
    int rc = KILN_ENOMEM;
    if (r.def && r.set && r.binding && r.stride && r.flags) {
        memset(r.set, 0xff, b * sizeof(*r.set));
        memset(r.binding, 0xff, b * sizeof(*r.binding));
        memset(r.stride, 0xff, b * sizeof(*r.stride));
        rc = scan(&r, why, cap);
        if (rc == KILN_ENOMEM)
            snprintf(why, cap, "out of memory");
        if (rc == KILN_OK)
            collect(&r, out);
    } else {
        snprintf(why, cap, "out of memory");
    }
    kiln__free(r.def);
    kiln__free(r.set);
    kiln__free(r.binding);
    kiln__free(r.stride);
    kiln__free(r.flags);
    kiln__free(r.offs);
    return rc;
}

const char *kiln__descriptor_type_name(int type)
{
    switch (type) {
    case VK_DESCRIPTOR_TYPE_SAMPLER:
        return "sampler";
    case VK_DESCRIPTOR_TYPE_COMBINED_IMAGE_SAMPLER:
        return "combined image sampler";
    case VK_DESCRIPTOR_TYPE_SAMPLED_IMAGE:
        return "sampled image";
    case VK_DESCRIPTOR_TYPE_STORAGE_IMAGE:
        return "storage image";
    case VK_DESCRIPTOR_TYPE_UNIFORM_TEXEL_BUFFER:
        return "uniform texel buffer";
    case VK_DESCRIPTOR_TYPE_STORAGE_TEXEL_BUFFER:
        return "storage texel buffer";
    case VK_DESCRIPTOR_TYPE_UNIFORM_BUFFER:
        return "uniform buffer";
    case VK_DESCRIPTOR_TYPE_STORAGE_BUFFER:
        return "storage buffer";
    case VK_DESCRIPTOR_TYPE_INPUT_ATTACHMENT:
        return "input attachment";
    case (int)VK_DESCRIPTOR_TYPE_ACCELERATION_STRUCTURE_KHR:
        return "acceleration structure";
    default:
        return "resource of unknown type";
    }
}
