/*
 * generate.c - the generator of emulator-like programs (the default corpus).
 *
 * What an emulator's shader cache holds is many variants of a few program
 * shapes, each variant a translation of one guest state with its own
 * constants baked in. The generator makes the same: an interpreter-style
 * compute shader (a loop that decodes guest words and switches over
 * 64-400 opcodes, each case a few ALU operations on a register file) and
 * vertex/fragment pairs (a vertex-attribute decoder driven by per-variant
 * format constants, and a texture-combiner stage chain). The structure
 * repeats, the constants, register choices, formats and operation mixes do
 * not: that is where a real cache's compressibility comes from, and the
 * generator draws every choice from the random stream rather than from a
 * small table, so the SPIR-V is not more compressible than a real one's.
 *
 * Invariants:
 * - Output depends only on (seed, index): one splitmix64 stream per program,
 *   seeded from both, and text formatted from integers only (floats are
 *   printed from integer thousandths), so the GLSL is byte-identical on every
 *   platform. KILN_GENERATOR_VERSION changes whenever the output does.
 * - Every buffer index is masked with MEM_MASK, so no generated program can
 *   reach past the first 1 MiB of its storage buffer.
 * - The interface is the one prep.h states: set 0 binding 0 storage buffer,
 *   16 bytes of push constants in compute, no vertex inputs, one vec4 color
 *   output at location 0.
 */
#include "gen_internal.h"

#include <assert.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MEM_MASK_TEXT "0x3FFFFu"

/* ---- random stream ------------------------------------------------------ */

struct rng {
    uint64_t s;
};

static uint64_t rng_next(struct rng *r)
{
    uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* A value in [0, n). */
static uint32_t below(struct rng *r, uint32_t n)
{
    assert(n > 0);
    return (uint32_t)(((rng_next(r) >> 32) * (uint64_t)n) >> 32);
}

/* A value in [lo, hi]. */
static uint32_t range(struct rng *r, uint32_t lo, uint32_t hi)
{
    return lo + below(r, hi - lo + 1);
}

static uint32_t u32(struct rng *r)
{
    return (uint32_t)(rng_next(r) >> 32);
}

/* ---- text builder ------------------------------------------------------- */

struct sb {
    char *p;
    size_t n, cap;
    bool oom;
};

static void sb_put(struct sb *b, const char *s, size_t n)
{
    if (b->oom)
        return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (b->n + n + 1 > cap)
            cap *= 2;
        char *p = kiln__realloc(b->p, cap);
        if (!p) {
            b->oom = true;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
}

static void sb_printf(struct sb *b, const char *fmt, ...) KILN_PRINTF(2, 3);

static void sb_printf(struct sb *b, const char *fmt, ...)
{
    char tmp[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
    va_end(ap);
    assert(n >= 0 && (size_t)n < sizeof(tmp));
    sb_put(b, tmp, (size_t)n);
}

/* ---- the generator's state ---------------------------------------------- */

#define LIT_RING 48
#define LIT_SIZE 192

/*
 * One program's generation. C leaves the order in which a call's arguments
 * are evaluated unspecified, so every random draw is its own statement (or
 * its own declaration): never two draws in one expression. Literals are
 * formatted into a ring of buffers so that several can be passed to one
 * sb_printf.
 */
struct gen {
    struct rng r;
    struct sb b;
    char lit[LIT_RING][LIT_SIZE];
    unsigned nlit;
    /* The variant's constants: masks, strides and magic numbers a guest
     * program uses again and again, as real translations repeat them. */
    uint32_t pool[40];
    unsigned nreg;  /* interpreter registers (a power of two) */
    unsigned nhelp; /* interpreter helper functions */
};

static char *lit_next(struct gen *g)
{
    return g->lit[g->nlit++ % LIT_RING];
}

/* Appends the float literal of integer thousandths `milli` to `out`; only
 * integers are formatted, so the text is the same on every platform. */
static void flit_cat(char *out, size_t cap, int32_t milli)
{
    uint32_t a = milli < 0 ? (uint32_t)(-(int64_t)milli) : (uint32_t)milli;
    size_t n = strlen(out);
    snprintf(out + n, cap - n, "%s%u.%03u", milli < 0 ? "-" : "", a / 1000u, a % 1000u);
}

/* A random float literal in [lo, hi] thousandths. */
static const char *F(struct gen *g, int32_t lo, int32_t hi)
{
    char *out = lit_next(g);
    out[0] = '\0';
    flit_cat(out, LIT_SIZE, lo + (int32_t)below(&g->r, (uint32_t)(hi - lo + 1)));
    return out;
}

/* `n` random float literals in [lo, hi] thousandths, comma-separated. */
static const char *FV(struct gen *g, unsigned n, int32_t lo, int32_t hi)
{
    char *out = lit_next(g);
    out[0] = '\0';
    for (unsigned i = 0; i < n; i++) {
        if (i)
            strcat(out, ", ");
        flit_cat(out, LIT_SIZE, lo + (int32_t)below(&g->r, (uint32_t)(hi - lo + 1)));
    }
    return out;
}

/* A constant: mostly one of the variant's own, now and then a fresh one. */
static uint32_t K(struct gen *g)
{
    if (below(&g->r, 16) != 0)
        return g->pool[below(&g->r, KILN_ARRAY_LEN(g->pool))];
    return u32(&g->r);
}

static void fill_pool(struct gen *g)
{
    for (size_t i = 0; i < KILN_ARRAY_LEN(g->pool); i++) {
        uint32_t kind = below(&g->r, 4);
        if (kind == 0) { /* a mask */
            uint32_t width = range(&g->r, 1, 31);
            uint32_t at = below(&g->r, 32 - width + 1);
            g->pool[i] = ((1u << width) - 1u) << at;
        } else if (kind == 1) { /* a small number */
            g->pool[i] = range(&g->r, 1, 4096);
        } else {
            g->pool[i] = u32(&g->r);
        }
    }
}

#define P(g, ...) sb_printf(&(g)->b, __VA_ARGS__)

/* ---- the interpreter (compute) ------------------------------------------ */

/* A source register: decoded (r[a], r[b], r[d]) or a fixed one. */
static const char *src_reg(struct gen *g, char *buf)
{
    uint32_t k = below(&g->r, 10);
    if (k < 4)
        return "r[a]";
    if (k < 7)
        return "r[b]";
    if (k < 8)
        return "r[d]";
    snprintf(buf, 16, "r[%u]", below(&g->r, g->nreg));
    return buf;
}

static const char *dst_reg(struct gen *g, char *buf)
{
    if (below(&g->r, 5) < 4)
        return "r[d]";
    snprintf(buf, 16, "r[%u]", below(&g->r, g->nreg));
    return buf;
}

/* One ALU statement of an opcode's case. */
static void interp_stmt(struct gen *g)
{
    char dbuf[16], xbuf[16], ybuf[16];
    const char *D = dst_reg(g, dbuf);
    const char *X = src_reg(g, xbuf);
    const char *Y = src_reg(g, ybuf);
    uint32_t s = range(&g->r, 1, 31);
    uint32_t w = range(&g->r, 1, 32 - s);
    uint32_t k1 = K(g);
    uint32_t k2 = K(g);
    /* Guest code is mostly moves, adds, logic and shifts: the first kinds
     * are drawn more often than the rest. */
    uint32_t kind = below(&g->r, 48);
    if (kind >= 24)
        kind = (kind - 24) % 6;
    switch (kind) {
    case 0:
        P(g, "            %s = %s + %s;\n", D, X, Y);
        break;
    case 1:
        P(g, "            %s = %s - 0x%Xu;\n", D, X, k1);
        break;
    case 2:
        P(g, "            %s = (%s ^ 0x%Xu) * 0x%Xu;\n", D, X, k1, k2 | 1u);
        break;
    case 3:
        P(g, "            %s = (%s << %uu) | (%s >> %uu);\n", D, X, s, X, 32u - s);
        break;
    case 4:
        P(g, "            %s = bitfieldExtract(%s, %u, %u);\n", D, X, s, w);
        break;
    case 5:
        P(g, "            %s = bitfieldInsert(%s, %s, %u, %u);\n", D, X, Y, s, w);
        break;
    case 6: {
        const char *f = F(g, -4000, 4000);
        P(g, "            %s = floatBitsToUint(uintBitsToFloat(%s) * %s + uintBitsToFloat(%s));\n",
          D, X, f, Y);
        break;
    }
    case 7:
        P(g, "            %s = clamp(%s, 0x%Xu, 0x%Xu);\n", D, X, k1 >> 8, 0x80000000u | k2);
        break;
    case 8:
        P(g, "            if ((%s & 0x%Xu) != 0u) { %s = %s ^ 0x%Xu; } else { %s = %s + imm; }\n",
          X, k1, D, Y, k2, D, Y);
        break;
    case 9:
        P(g, "            %s = guest.words[(%s + 0x%Xu) & " MEM_MASK_TEXT "];\n", D, X,
          k1 & 0x3FFFFu);
        break;
    case 10:
        P(g, "            guest.words[(%s + imm + 0x%Xu) & " MEM_MASK_TEXT "] = %s;\n", X,
          k1 & 0x3FFFFu, Y);
        break;
    case 11:
        P(g, "            %s = uint(findMSB(%s)) + uint(bitCount(%s)) * %uu;\n", D, X, Y,
          k1 & 0x3FFu);
        break;
    case 12:
        P(g, "            %s = uint(int(%s) >> %u);\n", D, X, s);
        break;
    case 13: {
        const char *f = FV(g, 4, 0, 1500);
        P(g, "            %s = packUnorm4x8(unpackUnorm4x8(%s) * vec4(%s) + unpackUnorm4x8(%s));\n",
          D, X, f, Y);
        break;
    }
    case 14:
        P(g,
          "            flags = (flags & 0x%Xu) | (%s == %s ? 1u : 0u) | (%s < %s ? 2u : 0u) | "
          "(int(%s) < int(%s) ? 4u : 0u);\n",
          k1 & ~7u, X, Y, X, Y, X, Y);
        break;
    case 15:
        P(g, "            umulExtended(%s, %s | 0x%Xu, t_hi, t_lo);\n", X, Y, k1);
        P(g, "            %s = t_hi ^ (t_lo >> %uu);\n", D, s);
        break;
    case 16:
        if (g->nhelp > 0) {
            uint32_t h = below(&g->r, g->nhelp);
            P(g, "            %s = helper%u(%s, %s ^ 0x%Xu);\n", D, h, X, Y, k1);
            break;
        }
        /* fall through */
    case 17:
        P(g, "            if ((flags & %uu) != 0u) { ip += imm & 0x%Xu; }\n", 1u << (s % 3),
          (k1 & 63u) | 1u);
        break;
    case 18: {
        const char *f = F(g, -100000, 100000);
        P(g, "            %s = (uintBitsToFloat(%s) < %s) ? %s : %s + 0x%Xu;\n", D, X, f, Y, X, k1);
        break;
    }
    case 19: {
        const char *f = FV(g, 2, -2000, 2000);
        P(g, "            %s = packHalf2x16(unpackHalf2x16(%s) * vec2(%s) + unpackHalf2x16(%s));\n",
          D, X, f, Y);
        break;
    }
    case 20:
        P(g, "            %s = (%s << (imm & 31u)) + 0x%Xu;\n", D, X, k1);
        break;
    case 21:
        P(g, "            %s = %s / (%s | 1u) + %s %% %uu;\n", D, X, Y, X, (k1 & 0xFFFFu) | 3u);
        break;
    case 22:
        P(g, "            %s = %s ^ (%s >> %uu) ^ 0x%Xu;\n", D, X, Y, s, k1);
        break;
    default:
        P(g, "            %s = (%s & 0x%Xu) | (%s & 0x%Xu);\n", D, X, k1, Y, k2);
        break;
    }
}

/* A helper: a small routine the opcodes call, like an emulator's shared
 * ALU helpers (flag computation, saturation, address wrapping). */
static void interp_helper(struct gen *g, unsigned i)
{
    P(g, "uint helper%u(uint x, uint y)\n{\n", i);
    unsigned n = range(&g->r, 3, 7);
    for (unsigned k = 0; k < n; k++) {
        uint32_t s = range(&g->r, 1, 31);
        uint32_t k1 = K(g);
        uint32_t k2 = K(g);
        uint32_t kind = below(&g->r, 5);
        switch (kind) {
        case 0:
            P(g, "    x = (x ^ 0x%Xu) + (y >> %uu);\n", k1, s);
            break;
        case 1:
            P(g, "    y = y * 0x%Xu + (x << %uu);\n", k1 | 1u, s);
            break;
        case 2:
            P(g, "    x = (x > 0x%Xu) ? x - y : x + 0x%Xu;\n", k1, k2);
            break;
        case 3:
            P(g, "    x = bitfieldInsert(x, y, %u, %u);\n", s, 1u + k1 % (32u - s));
            break;
        default:
            P(g, "    y = (y << %uu) | (y >> %uu);\n", s, 32u - s);
            break;
        }
    }
    P(g, "    return x ^ y;\n}\n\n");
}

static void gen_compute(struct gen *g, const char *name)
{
    g->nreg = 1u << range(&g->r, 3, 5);
    g->nhelp = range(&g->r, 0, 6);
    fill_pool(g);
    unsigned nops = range(&g->r, 64, 400);
    unsigned opbits = 6;
    while ((1u << opbits) < nops)
        opbits++;
    opbits += below(&g->r, 2); /* sparse opcode spaces, as real instruction sets have */
    unsigned regbits = 0;
    while ((1u << regbits) < g->nreg)
        regbits++;

    /* The fields of a guest word: opcode, d, a, b, then an immediate in what
     * is left, at a per-variant layout. */
    unsigned widths[5] = {opbits, regbits, regbits, regbits, 32 - opbits - 3 * regbits};
    unsigned order[5] = {0, 1, 2, 3, 4};
    for (unsigned i = 4; i > 0; i--) {
        unsigned j = below(&g->r, i + 1), t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
    unsigned shift[5], at = 0;
    for (unsigned i = 0; i < 5; i++) {
        shift[order[i]] = at;
        at += widths[order[i]];
    }
    uint32_t max_steps = range(&g->r, 64, 4096);
    uint32_t flags_key = u32(&g->r);
    uint32_t lane_mask = u32(&g->r) & 0xFFFu;

    P(g, "#version 450\n// %s: a guest-program interpreter, %u opcodes, %u registers\n", name, nops,
      g->nreg);
    P(g, "layout(local_size_x = 64) in;\n");
    P(g, "layout(std430, set = 0, binding = 0) buffer Guest { uint words[]; } guest;\n");
    P(g, "layout(push_constant) uniform Push { uint code_base; uint step_count; uint data_base; "
         "uint flags; } pc;\n\n");
    P(g, "const uint MAX_STEPS = %uu;\n\n", max_steps);
    for (unsigned i = 0; i < g->nhelp; i++)
        interp_helper(g, i);

    P(g, "uint update_flags(uint flags, uint v)\n{\n");
    P(g,
      "    return (flags & 0xFFFFFFF0u) | (v == 0u ? 1u : 0u) | ((v >> 31) << 1) | "
      "((v & 0x%Xu) != 0u ? 4u : 0u);\n}\n\n",
      u32(&g->r));
    P(g, "void main()\n{\n");
    P(g, "    uint r[%u];\n    uint t_hi, t_lo;\n    uint cycles = 0u;\n", g->nreg);
    P(g, "    uint lane = gl_GlobalInvocationID.x;\n");
    P(g, "    uint flags = pc.flags ^ 0x%Xu;\n", flags_key);
    P(g, "    for (uint i = 0u; i < %uu; i++)\n", g->nreg);
    P(g, "        r[i] = guest.words[(pc.data_base + lane * %uu + i) & " MEM_MASK_TEXT "];\n",
      g->nreg);
    P(g, "    uint ip = pc.code_base + (lane & 0x%Xu);\n", lane_mask);
    P(g, "    for (uint step = 0u; step < min(pc.step_count, MAX_STEPS); step++) {\n");
    P(g,
      "        uint w = guest.words[ip & " MEM_MASK_TEXT "];\n        ip++;\n        cycles++;\n");
    P(g, "        uint op = bitfieldExtract(w, %u, %u);\n", shift[0], widths[0]);
    P(g, "        uint d = bitfieldExtract(w, %u, %u);\n", shift[1], widths[1]);
    P(g, "        uint a = bitfieldExtract(w, %u, %u);\n", shift[2], widths[2]);
    P(g, "        uint b = bitfieldExtract(w, %u, %u);\n", shift[3], widths[3]);
    P(g, "        uint imm = bitfieldExtract(w, %u, %u);\n", shift[4], widths[4]);
    P(g, "        switch (op) {\n");

    /* Opcode numbers: a random subset of the opcode space, in order
     * (selection sampling). */
    unsigned space = 1u << opbits;
    unsigned chosen = 0;
    /* A larger instruction set has simpler instructions, which also keeps
     * every interpreter under 200 KB of SPIR-V. */
    /* Interpreters of few opcodes do more per opcode: the statements are
     * spread from a budget drawn for the whole shader (about 110-200 KB of
     * SPIR-V), at least one per opcode. */
    uint32_t target = range(&g->r, 110, 190) * 1024;
    uint32_t overhead = 6000 + nops * 220; /* the loop, the helpers, each case's own code */
    unsigned budget = target > overhead ? (target - overhead) / 210 : 0;
    budget = budget > nops ? budget : nops;
    unsigned left = budget;
    for (unsigned op = 0; op < space && chosen < nops; op++) {
        if (below(&g->r, space - op) >= nops - chosen)
            continue;
        chosen++;
        P(g, "        case %uu: {\n", op);
        /* Instructions that take more than the one cycle the loop counts
         * add the rest. */
        uint32_t cycles = range(&g->r, 1, 12);
        if (cycles > 6)
            P(g, "            cycles += %uu;\n", cycles - 6);
        /* What is left of the budget over the opcodes left, rounded at
         * random, give or take one. */
        unsigned ops_left = nops - chosen + 1;
        unsigned n = (left + below(&g->r, ops_left)) / ops_left;
        uint32_t jitter = below(&g->r, 3);
        if (n >= 2)
            n = n - 1 + jitter;
        n = n ? n : 1;
        left = left > n ? left - n : 0;
        for (unsigned k = 0; k < n; k++)
            interp_stmt(g);
        /* Most instructions set the condition flags from their result. */
        uint32_t setflags = below(&g->r, 5);
        if (setflags < 4)
            P(g, "            flags = update_flags(flags, r[d]);\n");
        P(g, "            break;\n        }\n");
    }
    P(g, "        default:\n            flags |= 0x80000000u;\n            break;\n");
    P(g, "        }\n");
    P(g, "        if ((flags & 0x80000000u) != 0u)\n            break;\n    }\n");
    P(g, "    for (uint i = 0u; i < %uu; i++)\n", g->nreg);
    P(g, "        guest.words[(pc.data_base + lane * %uu + i) & " MEM_MASK_TEXT "] = r[i];\n",
      g->nreg);
    P(g, "    guest.words[(pc.data_base + 0x%Xu + lane) & " MEM_MASK_TEXT "] = cycles;\n",
      u32(&g->r) & 0xFFFFu);
    P(g, "}\n");
}

/* ---- the graphics pair -------------------------------------------------- */

/* What the vertex stage hands the fragment stage: colors and texture
 * coordinates, as a fixed-function GPU's rasterizer would. */
struct varyings {
    unsigned ncolor;    /* 1-2 vec4 colors */
    unsigned ntexcoord; /* 1-8 vec2 texture coordinates, packed two per vec4 */
};

static unsigned texcoord_vec4s(const struct varyings *v)
{
    return (v->ntexcoord + 1) / 2;
}

static void declare_varyings(struct gen *g, const struct varyings *v, const char *dir)
{
    unsigned loc = 0;
    for (unsigned i = 0; i < v->ncolor; i++)
        P(g, "layout(location = %u) %s vec4 v_color%u;\n", loc++, dir, i);
    for (unsigned i = 0; i < texcoord_vec4s(v); i++)
        P(g, "layout(location = %u) %s vec4 v_tex%u;\n", loc++, dir, i);
}

static const char *const vertex_readers =
    "uint rd8(uint o) { return (guest.words[(o >> 2) & " MEM_MASK_TEXT
    "] >> ((o & 3u) * 8u)) & 0xFFu; }\n"
    "uint rd16(uint o) { return (rd8(o) << 8) | rd8(o + 1u); }\n"
    "int rd8s(uint o) { return int(rd8(o) << 24) >> 24; }\n"
    "int rd16s(uint o) { return int(rd16(o) << 16) >> 16; }\n"
    "float rdf32(uint o) { return uintBitsToFloat((rd16(o) << 16) | rd16(o + 2u)); }\n"
    "vec4 mtx_row(uint m, uint row)\n{\n"
    "    uint w = (MTX_BASE + m * 12u + row * 4u) & " MEM_MASK_TEXT ";\n"
    "    return vec4(uintBitsToFloat(guest.words[w]), uintBitsToFloat(guest.words[(w + 1u) "
    "& " MEM_MASK_TEXT "]),\n"
    "                uintBitsToFloat(guest.words[(w + 2u) & " MEM_MASK_TEXT
    "]), uintBitsToFloat(guest.words[(w + 3u) & " MEM_MASK_TEXT "]));\n}\n\n";

/* Component formats of a vertex attribute: u8, s8, u16, s16, f32. */
static const unsigned fmt_bytes[] = {1, 1, 2, 2, 4};

/* Writes the decode of one component at byte offset `off` of the vertex,
 * with `frac` fraction bits for the fixed-point formats. */
static void vtx_component(struct gen *g, unsigned fmt, unsigned off, unsigned frac)
{
    static const char *const rd[] = {"float(rd8", "float(rd8s", "float(rd16", "float(rd16s",
                                     "(rdf32"};
    P(g, "%s(vb + %uu))", rd[fmt], off);
    if (fmt != 4)
        P(g, " / %u.0", 1u << frac);
}

/* An attribute of `n` components as a vecN expression. */
static void vtx_attr(struct gen *g, unsigned n, unsigned fmt, unsigned off, unsigned frac)
{
    P(g, "vec%u(", n);
    for (unsigned i = 0; i < n; i++) {
        if (i)
            P(g, ", ");
        vtx_component(g, fmt, off + i * fmt_bytes[fmt], frac);
    }
    P(g, ")");
}

/* One light's contribution to lighting channel `ch`, with its position,
 * direction, attenuation and color baked in. */
static void vtx_light(struct gen *g, unsigned ch, unsigned l)
{
    const char *pos = FV(g, 3, -100000, 100000);
    P(g, "    { // channel %u, light %u\n", ch, l);
    P(g, "        vec3 ldir = vec3(%s) - wpos;\n", pos);
    P(g, "        float dist = max(length(ldir), 0.0001);\n");
    P(g, "        ldir /= dist;\n");
    uint32_t diffuse = below(&g->r, 3);
    if (diffuse == 0)
        P(g, "        float ndl = dot(nrm, ldir);\n");
    else if (diffuse == 1)
        P(g, "        float ndl = max(dot(nrm, ldir), 0.0);\n");
    else
        P(g, "        float ndl = abs(dot(nrm, ldir));\n");
    uint32_t atten = below(&g->r, 3);
    if (atten == 0) {
        const char *k = FV(g, 3, 0, 2000);
        P(g, "        vec3 k = vec3(%s);\n", k);
        P(g, "        float att = 1.0 / max(k.x + k.y * dist + k.z * dist * dist, 0.0001);\n");
    } else if (atten == 1) {
        const char *dir = FV(g, 3, -1000, 1000);
        const char *a = FV(g, 3, -2000, 2000);
        const char *k = FV(g, 3, 0, 2000);
        P(g, "        float cosang = max(dot(ldir, normalize(vec3(%s))), 0.0);\n", dir);
        P(g, "        float spot = max(dot(vec3(%s), vec3(1.0, cosang, cosang * cosang)), 0.0);\n",
          a);
        P(g, "        vec3 k = vec3(%s);\n", k);
        P(g, "        float att = spot / max(k.x + k.y * dist + k.z * dist * dist, 0.0001);\n");
    } else {
        const char *h = FV(g, 3, -1000, 1000);
        const char *e = F(g, 1000, 64000);
        P(g, "        float att = pow(max(dot(nrm, normalize(ldir + vec3(%s))), 0.0), %s);\n", h,
          e);
    }
    const char *col = FV(g, 4, 0, 1000);
    P(g, "        lit%u += vec4(%s) * ndl * att;\n    }\n", ch, col);
}

/*
 * Writes the decode of one guest vertex format as a case of the format
 * switch: position, matrix indexes and weights (skinning), normal (and
 * binormal and tangent when nbt is 1; none when it is 2), colors and
 * texture coordinates, each with its own component format, fraction bits
 * and offset, at its own base address and stride.
 */
static void vtx_format(struct gen *g, const struct varyings *v, unsigned k, unsigned nbt)
{
    unsigned off = 0;
    unsigned pos_fmt = below(&g->r, 5);
    unsigned pos_n = range(&g->r, 2, 3);
    unsigned pos_frac = below(&g->r, 15);
    unsigned pos_off = off;
    off += pos_n * fmt_bytes[pos_fmt];
    unsigned nbones = below(&g->r, 5); /* 0: one fixed matrix */
    unsigned bone_off = off;
    off += nbones * 2;
    unsigned nrm_fmt = (unsigned[]){1, 3, 4}[below(&g->r, 3)];
    unsigned nrm_off = off;
    off += nbt == 2 ? 0 : (nbt == 1 ? 9 : 3) * fmt_bytes[nrm_fmt];
    unsigned col_fmt[2], col_off[2];
    for (unsigned i = 0; i < v->ncolor; i++) {
        col_fmt[i] = below(&g->r, 4); /* rgb565, rgb8, rgba4, rgba8 */
        col_off[i] = off;
        off += (unsigned[]){2, 3, 2, 4}[col_fmt[i]];
    }
    unsigned tc_fmt[8], tc_off[8], tc_frac[8];
    for (unsigned i = 0; i < v->ntexcoord; i++) {
        tc_fmt[i] = below(&g->r, 5);
        tc_frac[i] = below(&g->r, 15);
        tc_off[i] = off;
        off += 2 * fmt_bytes[tc_fmt[i]];
    }
    unsigned stride = (off + 3) & ~3u;
    uint32_t vtx_base = (u32(&g->r) & 0xFFFFu) * 4u;

    P(g, "    case %uu: {\n", k);
    P(g, "        uint vb = %uu + uint(gl_VertexIndex) * %uu;\n", vtx_base, stride);
    P(g, "        pos = vec4(");
    vtx_attr(g, pos_n, pos_fmt, pos_off, pos_frac);
    P(g, "%s, 1.0);\n", pos_n == 2 ? ", 0.0" : "");
    if (nbones == 0) {
        uint32_t m = below(&g->r, 64);
        P(g, "        m0 = mtx_row(%uu, 0u);\n        m1 = mtx_row(%uu, 1u);\n", m, m);
        P(g, "        m2 = mtx_row(%uu, 2u);\n", m);
    } else {
        P(g, "        m0 = vec4(0.0);\n        m1 = vec4(0.0);\n        m2 = vec4(0.0);\n");
        for (unsigned i = 0; i < nbones; i++) {
            P(g, "        {\n            uint m = rd8(vb + %uu) / 3u;\n", bone_off + 2 * i);
            P(g, "            float wt = float(rd8(vb + %uu)) / 255.0;\n", bone_off + 2 * i + 1);
            P(g,
              "            m0 += mtx_row(m, 0u) * wt;\n            m1 += mtx_row(m, 1u) * wt;\n");
            P(g, "            m2 += mtx_row(m, 2u) * wt;\n        }\n");
        }
    }
    if (nbt != 2) {
        unsigned frac = nrm_fmt == 1 ? 6 : 14;
        P(g, "        nrm = ");
        vtx_attr(g, 3, nrm_fmt, nrm_off, frac);
        P(g, ";\n");
        if (nbt == 1) {
            P(g, "        bin = ");
            vtx_attr(g, 3, nrm_fmt, nrm_off + 3 * fmt_bytes[nrm_fmt], frac);
            P(g, ";\n        tan = ");
            vtx_attr(g, 3, nrm_fmt, nrm_off + 6 * fmt_bytes[nrm_fmt], frac);
            P(g, ";\n");
        }
    }
    for (unsigned i = 0; i < v->ncolor; i++) {
        unsigned o = col_off[i];
        switch (col_fmt[i]) {
        case 0:
            P(g, "        uint c%u = rd16(vb + %uu);\n", i, o);
            P(g,
              "        col%u = vec4(float(c%u >> 11) / 31.0, float((c%u >> 5) & 63u) / 63.0, "
              "float(c%u & 31u) / 31.0, 1.0);\n",
              i, i, i, i);
            break;
        case 1:
            P(g,
              "        col%u = vec4(float(rd8(vb + %uu)), float(rd8(vb + %uu)), float(rd8(vb + "
              "%uu)), 255.0) / 255.0;\n",
              i, o, o + 1, o + 2);
            break;
        case 2:
            P(g, "        uint c%u = rd16(vb + %uu);\n", i, o);
            P(g,
              "        col%u = vec4(float(c%u >> 12), float((c%u >> 8) & 15u), float((c%u >> 4) "
              "& 15u), float(c%u & 15u)) / 15.0;\n",
              i, i, i, i, i);
            break;
        default:
            P(g,
              "        col%u = vec4(float(rd8(vb + %uu)), float(rd8(vb + %uu)), float(rd8(vb + "
              "%uu)), float(rd8(vb + %uu))) / 255.0;\n",
              i, o, o + 1, o + 2, o + 3);
            break;
        }
    }
    for (unsigned i = 0; i < v->ntexcoord; i++) {
        P(g, "        tc%u = ", i);
        vtx_attr(g, 2, tc_fmt[i], tc_off[i], tc_frac[i]);
        P(g, ";\n");
    }
    P(g, "        break;\n    }\n");
}

static void gen_vertex(struct gen *g, const char *name, const struct varyings *v)
{
    /* Two to four guest vertex formats, chosen per draw by a buffer word,
     * as an emulator's vertex loader for a set of attribute tables. */
    unsigned nfmt = range(&g->r, 2, 4);
    unsigned nbt = below(&g->r, 6); /* 0-2 normal, 3-4 + binormal/tangent, 5 none */
    nbt = nbt < 3 ? 0 : nbt < 5 ? 1 : 2;
    uint32_t mtx_base = u32(&g->r) & 0x3FFF0u;
    uint32_t fmt_word = u32(&g->r) & 0x3FFFFu;

    P(g, "#version 450\n// %s.vert: a vertex decoder for %u guest vertex formats\n", name, nfmt);
    P(g, "layout(std430, set = 0, binding = 0) readonly buffer Guest { uint words[]; } guest;\n");
    declare_varyings(g, v, "out");
    P(g, "\nconst uint MTX_BASE = %uu;\n\n%s", mtx_base, vertex_readers);

    P(g, "void main()\n{\n");
    P(g, "    vec4 pos, m0, m1, m2;\n");
    P(g, "    vec3 nrm = vec3(0.0, 0.0, 1.0), bin = vec3(1.0, 0.0, 0.0), tan = vec3(0.0, 1.0, "
         "0.0);\n");
    for (unsigned i = 0; i < v->ncolor; i++)
        P(g, "    vec4 col%u = vec4(1.0);\n", i);
    for (unsigned i = 0; i < v->ntexcoord; i++)
        P(g, "    vec2 tc%u = vec2(0.0);\n", i);
    P(g, "    switch (guest.words[%uu] %% %uu) {\n", fmt_word, nfmt);
    for (unsigned k = 0; k < nfmt; k++)
        vtx_format(g, v, k, nbt);
    P(g, "    }\n");
    P(g, "    vec3 wpos = vec3(dot(m0, pos), dot(m1, pos), dot(m2, pos));\n");
    if (nbt != 2)
        P(g, "    nrm = normalize(vec3(dot(m0.xyz, nrm), dot(m1.xyz, nrm), dot(m2.xyz, nrm)));\n");
    /* Lighting: a color and an alpha channel per vertex color, each with an
     * ambient and a material color and up to eight lights, each light with
     * its own constants. */
    for (unsigned ch = 0; ch < 2 * v->ncolor; ch++) {
        unsigned nlight = nbt == 2 ? 0 : range(&g->r, 2, 8);
        const char *amb = FV(g, 4, 0, 600);
        P(g, "    vec4 lit%u = vec4(%s);\n", ch, amb);
        for (unsigned l = 0; l < nlight; l++)
            vtx_light(g, ch, l);
    }
    for (unsigned i = 0; i < v->ncolor; i++) {
        const char *mat = FV(g, 4, 300, 1000);
        P(g, "    v_color%u = col%u * vec4(%s) * clamp(vec4(lit%u.rgb, lit%u.a), 0.0, 1.0);\n", i,
          i, mat, 2 * i, 2 * i + 1);
    }

    /* Texture coordinates, each through its own texgen and post-transform
     * matrices. */
    for (unsigned i = 0; i < v->ntexcoord; i++) {
        uint32_t src = below(&g->r, 4);
        static const char *const srcs[] = {"vec4(tc%u, 1.0, 1.0)", "vec4(wpos, 1.0)",
                                           "vec4(nrm, 1.0)", "vec4(tc%u.yx, 0.0, 1.0)"};
        char in4[48];
        if (src == 0)
            snprintf(in4, sizeof(in4), "vec4(tc%u, 1.0, 1.0)", i);
        else if (src == 3)
            snprintf(in4, sizeof(in4), "vec4(tc%u.yx, 0.0, 1.0)", i);
        else
            snprintf(in4, sizeof(in4), "%s", srcs[src]);
        const char *r0 = FV(g, 4, -2000, 2000);
        const char *r1 = FV(g, 4, -2000, 2000);
        const char *r2 = FV(g, 4, -2000, 2000);
        P(g, "    vec4 tin%u = %s;\n", i, in4);
        P(g,
          "    vec3 tg%u = vec3(dot(vec4(%s), tin%u), dot(vec4(%s), tin%u), dot(vec4(%s), "
          "tin%u));\n",
          i, r0, i, r1, i, r2, i);
        uint32_t kind = below(&g->r, 5);
        if (kind == 0) {
            P(g, "    tg%u.xy /= max(abs(tg%u.z), 0.0001);\n", i, i);
        } else if (kind == 1 && nbt == 1) {
            const char *l = FV(g, 3, -1000, 1000);
            P(g, "    vec3 emb%u = normalize(vec3(%s) - wpos);\n", i, l);
            P(g, "    tg%u.xy += vec2(dot(emb%u, tan), dot(emb%u, bin)) * %s;\n", i, i, i,
              F(g, 0, 200));
        } else if (kind >= 2) {
            const char *p0 = FV(g, 4, -2000, 2000);
            const char *p1 = FV(g, 4, -2000, 2000);
            const char *p2 = FV(g, 4, -2000, 2000);
            P(g, "    tg%u = normalize(tg%u);\n", i, i);
            P(g,
              "    tg%u = vec3(dot(vec4(%s), vec4(tg%u, 1.0)), dot(vec4(%s), vec4(tg%u, 1.0)), "
              "dot(vec4(%s), vec4(tg%u, 1.0)));\n",
              i, p0, i, p1, i, p2, i);
        }
    }
    for (unsigned i = 0; i < texcoord_vec4s(v); i++) {
        unsigned t0 = 2 * i, t1 = 2 * i + 1;
        if (t1 < v->ntexcoord)
            P(g, "    v_tex%u = vec4(tg%u.xy, tg%u.xy);\n", i, t0, t1);
        else
            P(g, "    v_tex%u = vec4(tg%u.xy, 0.0, 0.0);\n", i, t0);
    }
    const char *proj0 = FV(g, 4, -3000, 3000);
    const char *proj1 = FV(g, 4, -3000, 3000);
    const char *proj2 = FV(g, 4, -1100, 1100);
    P(g, "    vec4 vpos = vec4(wpos, 1.0);\n");
    P(g,
      "    gl_Position = vec4(dot(vec4(%s), vpos), dot(vec4(%s), vpos), dot(vec4(%s), vpos), "
      "-wpos.z);\n",
      proj0, proj1, proj2);
    P(g, "}\n");
}

/* A texture unit: a fetch function decoding one guest texture format from
 * the buffer, with per-variant size, base address and wrap modes. */
static void frag_texture(struct gen *g, unsigned t)
{
    unsigned wl = range(&g->r, 3, 10);
    unsigned hl = range(&g->r, 3, 10);
    unsigned fmt = below(&g->r, 7);
    unsigned base = u32(&g->r) & 0x3FFFFu;
    unsigned wsm = below(&g->r, 3);
    unsigned wtm = below(&g->r, 3);
    static const char *const wrap[][2] = {
        {"fract(", ")"}, {"clamp(", ", 0.0, 1.0)"}, {"(1.0 - abs(mod(", ", 2.0) - 1.0))"}};
    P(g, "vec4 tex%u(vec2 uv)\n{\n", t);
    P(g, "    uvec2 st = uvec2(vec2(%suv.x%s, %suv.y%s) * vec2(%u.0, %u.0)) & uvec2(%uu, %uu);\n",
      wrap[wsm][0], wrap[wsm][1], wrap[wtm][0], wrap[wtm][1], 1u << wl, 1u << hl, (1u << wl) - 1,
      (1u << hl) - 1);
    /* Guest textures are tiled: the texel's address goes block by block. */
    P(g,
      "    uint texel = ((st.y >> 2) * %uu + (st.x >> 2)) * 16u + (st.y & 3u) * 4u + (st.x & "
      "3u);\n",
      (1u << wl) / 4);
    switch (fmt) {
    case 0: /* RGBA8 */
        P(g, "    return unpackUnorm4x8(guest.words[(%uu + texel) & " MEM_MASK_TEXT "]);\n", base);
        break;
    case 1: /* RGB565 */
        P(g,
          "    uint v = (guest.words[(%uu + (texel >> 1)) & " MEM_MASK_TEXT
          "] >> ((texel & 1u) * 16u)) & 0xFFFFu;\n",
          base);
        P(g,
          "    return vec4(float(v >> 11) / 31.0, float((v >> 5) & 63u) / 63.0, float(v & 31u) / "
          "31.0, 1.0);\n");
        break;
    case 2: /* RGB5A3 */
        P(g,
          "    uint v = (guest.words[(%uu + (texel >> 1)) & " MEM_MASK_TEXT
          "] >> ((texel & 1u) * 16u)) & 0xFFFFu;\n",
          base);
        P(g, "    if ((v & 0x8000u) != 0u)\n        return vec4(float((v >> 10) & 31u) / 31.0, "
             "float((v >> 5) & 31u) / 31.0, float(v & 31u) / 31.0, 1.0);\n");
        P(g,
          "    return vec4(float((v >> 8) & 15u) / 15.0, float((v >> 4) & 15u) / 15.0, float(v & "
          "15u) / 15.0, float((v >> 12) & 7u) / 7.0);\n");
        break;
    case 3: /* IA8 */
        P(g,
          "    uint v = (guest.words[(%uu + (texel >> 1)) & " MEM_MASK_TEXT
          "] >> ((texel & 1u) * 16u)) & 0xFFFFu;\n",
          base);
        P(g, "    return vec4(vec3(float(v & 255u) / 255.0), float(v >> 8) / 255.0);\n");
        break;
    case 4: /* I4 */
        P(g,
          "    uint v = (guest.words[(%uu + (texel >> 3)) & " MEM_MASK_TEXT
          "] >> ((texel & 7u) * 4u)) & 15u;\n",
          base);
        P(g, "    return vec4(float(v) / 15.0);\n");
        break;
    case 5: { /* C8 through a palette */
        unsigned pal = u32(&g->r) & 0x3FFFFu;
        P(g,
          "    uint idx = (guest.words[(%uu + (texel >> 2)) & " MEM_MASK_TEXT
          "] >> ((texel & 3u) * 8u)) & 255u;\n",
          base);
        P(g,
          "    uint v = (guest.words[(%uu + (idx >> 1)) & " MEM_MASK_TEXT
          "] >> ((idx & 1u) * 16u)) & 0xFFFFu;\n",
          pal);
        P(g,
          "    return vec4(float(v >> 11) / 31.0, float((v >> 5) & 63u) / 63.0, float(v & 31u) / "
          "31.0, 1.0);\n");
        break;
    }
    default: /* a block format: two endpoint colors and 2-bit indices */
        P(g, "    uint blk = (%uu + (texel >> 4) * 2u) & " MEM_MASK_TEXT ";\n", base);
        P(g, "    uint ends = guest.words[blk];\n");
        P(g, "    uint sel = (guest.words[(blk + 1u) & " MEM_MASK_TEXT
             "] >> ((texel & 15u) * 2u)) & 3u;\n");
        P(g,
          "    vec3 c0 = vec3(float(ends >> 27), float((ends >> 21) & 63u), float((ends >> 16) & "
          "31u)) / vec3(31.0, 63.0, 31.0);\n");
        P(g, "    vec3 c1 = vec3(float((ends >> 11) & 31u), float((ends >> 5) & 63u), float(ends & "
             "31u)) / vec3(31.0, 63.0, 31.0);\n");
        P(g, "    return vec4(mix(c0, c1, float(sel) / 3.0), sel == 3u && (ends >> 16) <= (ends & "
             "0xFFFFu) ? 0.0 : 1.0);\n");
        break;
    }
    P(g, "}\n\n");
}

static const char *const tev_color_in[] = {"prev.rgb",  "prev.aaa",  "c0.rgb",    "c0.aaa",
                                           "c1.rgb",    "c1.aaa",    "c2.rgb",    "c2.aaa",
                                           "tex.rgb",   "tex.aaa",   "ras.rgb",   "ras.aaa",
                                           "vec3(1.0)", "vec3(0.5)", "konst.rgb", "vec3(0.0)"};
static const char *const tev_alpha_in[] = {"prev.a", "c0.a",  "c1.a",    "c2.a",
                                           "tex.a",  "ras.a", "konst.a", "0.0"};
static const char *const tev_dest[] = {"prev", "c0", "c1", "c2"};
static const char *const swizzles[] = {".rgba", ".bgra", ".rrra", ".ggga", ".bbba", ".gbra"};
static const char *const bias[] = {"0.0", "0.5", "-0.5"};
static const char *const scale[] = {"1.0", "2.0", "4.0", "0.5"};

/* One combiner stage: texture coordinate (maybe offset by an indirect
 * texture read), a texture read, the four color and four alpha inputs and
 * an operation, as a fixed-function combiner's stage registers say. */
static void frag_stage(struct gen *g, const struct varyings *v, unsigned s, unsigned ntex)
{
    unsigned tc = below(&g->r, v->ntexcoord);
    char tcs[24];
    snprintf(tcs, sizeof(tcs), "v_tex%u.%s", tc / 2, (tc & 1) ? "zw" : "xy");
    P(g, "    { // stage %u\n", s);
    const char *sc = FV(g, 2, 250, 4000);
    uint32_t indirect = below(&g->r, 3);
    if (indirect == 0) {
        uint32_t it = below(&g->r, ntex);
        const char *m0 = FV(g, 3, -1000, 1000);
        const char *m1 = FV(g, 3, -1000, 1000);
        uint32_t ibias = below(&g->r, 3);
        P(g, "        vec3 ind = tex%u(%s).xyz - %s;\n", it, tcs, bias[ibias]);
        P(g, "        vec2 uv = %s * vec2(%s) + vec2(dot(vec3(%s), ind), dot(vec3(%s), ind));\n",
          tcs, sc, m0, m1);
    } else {
        P(g, "        vec2 uv = %s * vec2(%s);\n", tcs, sc);
    }
    uint32_t tm = below(&g->r, ntex);
    uint32_t tsw = below(&g->r, KILN_ARRAY_LEN(swizzles));
    uint32_t rc = below(&g->r, v->ncolor);
    uint32_t rsw = below(&g->r, KILN_ARRAY_LEN(swizzles));
    uint32_t kc = below(&g->r, 4);
    uint32_t ka = below(&g->r, 4);
    uint32_t kca = below(&g->r, 4);
    /* Guest filtering done in the shader: four taps, blended. */
    uint32_t tw = range(&g->r, 3, 10);
    uint32_t th = range(&g->r, 3, 10);
    P(g, "        vec2 fr = fract(uv * vec2(%u.0, %u.0) - 0.5);\n", 1u << tw, 1u << th);
    P(g, "        vec2 px = vec2(%u.0, %u.0);\n", 1u << tw, 1u << th);
    P(g, "        vec4 tex = mix(mix(tex%u(uv), tex%u(uv + vec2(1.0 / px.x, 0.0)), fr.x),\n", tm,
      tm);
    P(g,
      "                       mix(tex%u(uv + vec2(0.0, 1.0 / px.y)), tex%u(uv + 1.0 / px), fr.x), "
      "fr.y)%s;\n",
      tm, tm, swizzles[tsw]);
    P(g, "        vec4 ras = v_color%u%s;\n", rc, swizzles[rsw]);
    P(g, "        vec4 konst = vec4(KONST%u.rgb, KONST%u.%c);\n", kc, ka, "rgba"[kca]);
    const char *ca = tev_color_in[below(&g->r, 16)];
    const char *cb = tev_color_in[below(&g->r, 16)];
    const char *cc = tev_color_in[below(&g->r, 16)];
    const char *cd = tev_color_in[below(&g->r, 16)];
    const char *aa = tev_alpha_in[below(&g->r, 8)];
    const char *ab = tev_alpha_in[below(&g->r, 8)];
    const char *ac = tev_alpha_in[below(&g->r, 8)];
    const char *ad = tev_alpha_in[below(&g->r, 8)];
    const char *cbias = bias[below(&g->r, 3)];
    const char *cscale = scale[below(&g->r, 4)];
    const char *abias = bias[below(&g->r, 3)];
    const char *ascale = scale[below(&g->r, 4)];
    uint32_t op = below(&g->r, 5);
    if (op < 2) {
        P(g, "        vec3 col = (%s %s mix(%s, %s, %s) + %s) * %s;\n", cd, op ? "-" : "+", ca, cb,
          cc, cbias, cscale);
    } else if (op == 2) {
        const char *eps = F(g, 0, 100);
        P(g, "        vec3 col = %s + mix(vec3(0.0), %s, greaterThan(%s, %s + %s));\n", cd, cc, ca,
          cb, eps);
    } else if (op == 3) {
        P(g,
          "        vec3 col = %s + (dot(%s, vec3(0.299, 0.587, 0.114)) > dot(%s, vec3(0.299, "
          "0.587, 0.114)) ? %s : vec3(0.0));\n",
          cd, ca, cb, cc);
    } else {
        P(g,
          "        vec3 col = %s + mix(vec3(0.0), %s, equal(floor(%s * 255.0), floor(%s * "
          "255.0)));\n",
          cd, cc, ca, cb);
    }
    uint32_t aop = below(&g->r, 3);
    if (aop < 2)
        P(g, "        float alpha = (%s %s mix(%s, %s, %s) + %s) * %s;\n", ad, aop ? "-" : "+", aa,
          ab, ac, abias, ascale);
    else
        P(g, "        float alpha = %s + (%s > %s ? %s : 0.0);\n", ad, aa, ab, ac);
    const char *dst = tev_dest[below(&g->r, 4)];
    uint32_t clampmode = below(&g->r, 4);
    /* The guest combines in 8-bit fixed point: round the way it does. */
    uint32_t rnd = below(&g->r, 2);
    if (rnd)
        P(g,
          "        ivec4 fx = ivec4(round(vec4(col, alpha) * 255.0));\n"
          "        fx = (fx * %d + 128) >> 8;\n"
          "        vec4 res = vec4(fx) / 255.0;\n",
          (int)range(&g->r, 200, 300));
    else
        P(g, "        vec4 res = vec4(col, alpha);\n");
    P(g, "        %s = clamp(res, %s, %s);\n    }\n", dst, clampmode ? "0.0" : "-4.0",
      clampmode ? "1.0" : "4.0");
}

static void gen_fragment(struct gen *g, const char *name, const struct varyings *v)
{
    unsigned ntex = range(&g->r, 1, 8);
    unsigned nstage = range(&g->r, 8, 16);
    P(g, "#version 450\n// %s.frag: a texture-combiner chain, %u stages, %u textures\n", name,
      nstage, ntex);
    P(g, "layout(std430, set = 0, binding = 0) readonly buffer Guest { uint words[]; } guest;\n");
    declare_varyings(g, v, "in");
    P(g, "layout(location = 0) out vec4 o_color;\n\n");
    for (unsigned k = 0; k < 4; k++) {
        const char *c = FV(g, 4, 0, 1000);
        P(g, "const vec4 KONST%u = vec4(%s);\n", k, c);
    }
    P(g, "\n");
    for (unsigned t = 0; t < ntex; t++)
        frag_texture(g, t);

    P(g, "void main()\n{\n");
    P(g, "    vec4 prev = v_color0;\n");
    for (unsigned k = 0; k < 3; k++) {
        const char *c = FV(g, 4, 0, 1000);
        P(g, "    vec4 c%u = vec4(%s);\n", k, c);
    }
    for (unsigned s = 0; s < nstage; s++)
        frag_stage(g, v, s, ntex);

    /* Alpha test: two comparisons and a logic op, then fog and dither. */
    static const char *const cmp[] = {"<", "<=", ">", ">=", "==", "!="};
    static const char *const logic[] = {"&&", "||", "!="};
    const char *cmp0 = cmp[below(&g->r, 6)];
    const char *ref0 = F(g, 0, 1000);
    const char *cmp1 = cmp[below(&g->r, 6)];
    const char *ref1 = F(g, 0, 1000);
    const char *lop = logic[below(&g->r, 3)];
    P(g, "    bool pass0 = prev.a %s %s;\n    bool pass1 = prev.a %s %s;\n", cmp0, ref0, cmp1,
      ref1);
    P(g, "    if (!(pass0 %s pass1))\n        discard;\n", lop);
    uint32_t fog = below(&g->r, 3);
    if (fog == 1) {
        const char *start = F(g, 0, 500);
        const char *density = F(g, 1000, 20000);
        const char *color = FV(g, 3, 0, 1000);
        P(g, "    float fog = clamp((gl_FragCoord.z - %s) * %s, 0.0, 1.0);\n", start, density);
        P(g, "    prev.rgb = mix(prev.rgb, vec3(%s), fog);\n", color);
    } else if (fog == 2) {
        const char *density = F(g, 100, 9000);
        const char *color = FV(g, 3, 0, 1000);
        P(g, "    float fog = 1.0 - exp2(-%s * gl_FragCoord.z * gl_FragCoord.z);\n", density);
        P(g, "    prev.rgb = mix(prev.rgb, vec3(%s), clamp(fog, 0.0, 1.0));\n", color);
    }
    if (below(&g->r, 2)) {
        const char *d = FV(g, 2, 100, 900);
        P(g,
          "    prev.rgb = floor(prev.rgb * 255.0 + fract(dot(gl_FragCoord.xy, vec2(%s)))) / "
          "255.0;\n",
          d);
    }
    P(g, "    o_color = prev;\n}\n");
}

/* ---- programs ----------------------------------------------------------- */

static int take_text(struct kiln_program *p, unsigned i, uint32_t stage, struct sb *b,
                     const char *suffix)
{
    struct kiln_program_stage *st = &p->stages[i];
    if (b->oom)
        return KILN_ENOMEM;
    st->src.stage = stage;
    st->src.text = b->p;
    st->src.size = b->n;
    b->p = NULL;
    b->n = b->cap = 0;
    return kiln__prep_set_stage_name(st, p->name, suffix);
}

int kiln_generate_program(uint64_t seed, uint32_t index, struct kiln_program **out)
{
    if (!out)
        return KILN_EINVAL;
    *out = NULL;
    bool compute = index % 2 == 0;
    char name[48];
    snprintf(name, sizeof(name), "gen-%06u-%s", index, compute ? "compute" : "graphics");
    struct kiln_program *p = kiln__prep_program_new(name);
    struct gen *g = kiln__calloc(1, sizeof(*g));
    if (!p || !g) {
        kiln__free(g);
        kiln_program_destroy(p);
        return KILN_ENOMEM;
    }
    /* The index is mixed in through a full round, so that neighbouring
     * indexes share nothing. */
    g->r.s = seed;
    g->r.s = rng_next(&g->r) ^ ((uint64_t)index * 0xd6e8feb86659fd93ull) ^ KILN_GENERATOR_VERSION;
    (void)rng_next(&g->r);

    int rc;
    if (compute) {
        p->nstages = 1;
        gen_compute(g, name);
        rc = take_text(p, 0, KILN_VK_STAGE_COMPUTE_BIT, &g->b, ".comp");
    } else {
        struct varyings v;
        v.ncolor = range(&g->r, 1, 2);
        v.ntexcoord = range(&g->r, 1, 8);
        p->nstages = 2;
        gen_vertex(g, name, &v);
        rc = take_text(p, 0, KILN_VK_STAGE_VERTEX_BIT, &g->b, ".vert");
        if (rc == 0) {
            gen_fragment(g, name, &v);
            rc = take_text(p, 1, KILN_VK_STAGE_FRAGMENT_BIT, &g->b, ".frag");
        }
    }
    kiln__free(g->b.p);
    kiln__free(g);
    if (rc < 0) {
        kiln_program_destroy(p);
        return rc;
    }
    *out = p;
    return KILN_OK;
}

int kiln_generate_spirv(const struct kiln_translator *t, uint64_t seed, uint32_t index,
                        struct kiln_program **out)
{
    if (!t || !out)
        return KILN_EINVAL;
    *out = NULL;
    struct kiln_program *p;
    KILN_TRY(kiln_generate_program(seed, index, &p));
    int rc = kiln_program_translate(t, p);
    if (rc < 0) {
        kiln_program_destroy(p);
        return rc;
    }
    *out = p;
    return KILN_OK;
}

/* ---- the generator as a program source --------------------------------- */

/* Mixed into the stamp of generated programs. */
#define GENERATOR_STAMP_TAG "kiln-generator"

uint64_t kiln_generator_stamp(uint64_t translator_stamp)
{
    unsigned char buf[8 + sizeof(GENERATOR_STAMP_TAG) + 4];
    kiln__store_le64(buf, translator_stamp);
    memcpy(buf + 8, GENERATOR_STAMP_TAG, sizeof(GENERATOR_STAMP_TAG));
    kiln__store_le32(buf + 8 + sizeof(GENERATOR_STAMP_TAG), KILN_GENERATOR_VERSION);
    return kiln_hash64(buf, sizeof(buf));
}

static int source_load(void *user, size_t i, struct kiln_program **out)
{
    const struct kiln_generator *g = user;
    int rc = kiln_generate_program(g->seed, (uint32_t)i, out);
    if (rc < 0)
        KILN_ERROR("prep", "gen-%06zu: cannot generate: %s", i, kiln_strerror(rc));
    return rc;
}

static uint64_t source_stamp(void *user, uint64_t translator_stamp)
{
    (void)user;
    return kiln_generator_stamp(translator_stamp);
}

void kiln_generator_source(const struct kiln_generator *g, struct kiln_program_source *src)
{
    *src = (struct kiln_program_source){
        .size = sizeof(struct kiln_program_source),
        .user = (void *)g,
        .count = g->count,
        .load = source_load,
        .stamp = source_stamp,
    };
}
