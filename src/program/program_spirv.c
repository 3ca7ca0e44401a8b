/*
 * program_spirv.c - the SPIR-V checks that need no Vulkan: framing,
 * SPIR-V's validator, and its structure-only parse. (Moved from
 * src/vk/vk_validate.c: a program is checked when it is sealed and when
 * it is opened, below the Vulkan layer.)
 *
 * A driver's compiler trusts its input: given a module that is well-formed
 * word by word but meaningless (a translator's bug, a bad cache write that
 * slipped past every checksum), one driver returns an error and another
 * ends the process. With validation on, SPIRV-Tools checks every stage
 * under the Vulkan 1.1 rules first (1.2 or 1.3 for a module whose SPIR-V
 * version 1.1 does not take) and a bad stage fails alone, with the
 * validator's message in its log line. A validator context is made per call:
 * it costs microseconds against the milliseconds of a pipeline build, and
 * shares nothing between threads.
 *
 * kiln_vk_validate_spirv is the one check every module passes before it is
 * stored (kiln_program_seal) and, unless its payload is marked validated,
 * once more when it is opened for a build (kiln_program_open): the
 * framing check (kiln_spirv_check_words) first, so a build without
 * SPIRV-Tools still refuses what is not SPIR-V at all, and says so
 * (KILN_ENOTSUP) when that is all it could check. Its callers choose what
 * an unchecked module may do: stored, never built.
 *
 * kiln_vk_check_spirv_structure is the weaker check for modules recorded
 * from a working application (a Fossilize archive): the framing check and
 * SPIRV-Tools' binary parse, which refuses unknown opcodes and
 * instructions whose length disagrees with their operands, plus an id
 * bound within SPIRV-Tools' limit, every id nonzero and below it, one
 * memory model and an entry point (drivers size tables by the bound and
 * index them by id: what makes a driver's compiler end the process); but
 * none of the validator's semantic rules, which real drivers do not
 * enforce. Its callers use it
 * only after kiln_vk_validate_spirv refused a module, to tell a module
 * that is not SPIR-V from one that breaks a rule (see docs/reliability.md).
 */
#include "program_internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#define SPIRV_MAGIC 0x07230203u

int kiln_spirv_check_words(const uint32_t *words, size_t n, char *why, size_t cap)
{
    if ((!words && n) || !why || cap == 0)
        return KILN_EINVAL;
    if (n < 5) {
        snprintf(why, cap, "%zu words, shorter than a SPIR-V header", n);
        return KILN_EFORMAT;
    }
    if (words[0] != SPIRV_MAGIC) {
        snprintf(why, cap, "magic 0x%08x is not SPIR-V's", words[0]);
        return KILN_EFORMAT;
    }
    size_t i = 5;
    while (i < n) {
        uint32_t count = words[i] >> 16;
        if (count == 0) {
            snprintf(why, cap, "instruction at word %zu has length 0", i);
            return KILN_EFORMAT;
        }
        if (count > n - i) {
            snprintf(why, cap, "instruction at word %zu (%u words) runs past the end (%zu)", i,
                     count, n);
            return KILN_EFORMAT;
        }
        i += count;
    }
    return KILN_OK;
}

int kiln_spirv_check(const void *data, size_t n, const char **why)
{
    const char *unused;
    if (!why)
        why = &unused;
    if (!data && n) {
        *why = "no data";
        return KILN_EINVAL;
    }
    if (n == 0) {
        *why = "empty";
        return KILN_EFORMAT;
    }
    if (n % 4 != 0) {
        *why = "not a whole number of 32-bit words";
        return KILN_EFORMAT;
    }
    if (n < 20) {
        *why = "shorter than a SPIR-V header";
        return KILN_EFORMAT;
    }
    uint32_t magic;
    memcpy(&magic, data, 4);
    if (magic != SPIRV_MAGIC) {
        *why = magic == 0x03022307u ? "SPIR-V of the other byte order" : "no SPIR-V magic number";
        return KILN_EFORMAT;
    }
    return KILN_OK;
}

#ifdef KILN_HAVE_SPIRV_TOOLS
/* libspirv.h defines `const uint32_t kDefaultMaxIdBound = ...;` at file
 * scope: internal in C++, but in C an external definition, which would put
 * SPIRV-Tools' name into libkiln.a and clash with any C client that
 * includes the header too. Renamed here to a kiln__ name (hidden, never
 * exported; tests/layout/check_core_symbols.sh checks every defined
 * global of libkiln starts with kiln_). */
#define kDefaultMaxIdBound kiln__spirv_default_max_id_bound
#include <spirv-tools/libspirv.h>
#undef kDefaultMaxIdBound

/* The oldest Vulkan environment whose rules take the module's SPIR-V
 * version: 1.1 up to SPIR-V 1.3, 1.2 for 1.4 and 1.5 (ray-tracing stages
 * need 1.4), 1.3 beyond. */
static spv_target_env env_for(const uint32_t *words, size_t n)
{
    uint32_t version = n > 1 ? words[1] : 0;
    return version >= 0x00010600u   ? SPV_ENV_VULKAN_1_3
           : version >= 0x00010400u ? SPV_ENV_VULKAN_1_2
                                    : SPV_ENV_VULKAN_1_1;
}

static int spirv_validate(const uint32_t *words, size_t n, char *why, size_t cap)
{
    spv_context ctx = spvContextCreate(env_for(words, n));
    if (!ctx) {
        snprintf(why, cap, "the SPIR-V validator could not start");
        return KILN_ENOMEM;
    }
    spv_diagnostic diag = NULL;
    spv_result_t res = spvValidateBinary(ctx, words, n, &diag);
    int rc = KILN_OK;
    if (res != SPV_SUCCESS) {
        const char *msg = diag && diag->error ? diag->error : "rejected by the SPIR-V validator";
        snprintf(why, cap, "%s", msg);
        /* One event, one line: the validator's messages may span several. */
        for (char *p = why; (p = strchr(p, '\n')) != NULL;)
            *p = ' ';
        for (size_t len = strlen(why); len > 0 && why[len - 1] == ' ';)
            why[--len] = '\0';
        rc = KILN_EFORMAT;
    }
    spvDiagnosticDestroy(diag);
    spvContextDestroy(ctx);
    return rc;
}

/* SPIRV-Tools' default limit on the id bound (the validator's), and the
 * two opcodes every stage's module has. */
#define MAX_ID_BOUND    0x3fffffu
#define OP_MEMORY_MODEL 14u
#define OP_ENTRY_POINT  15u

/* What the parse callbacks find; the first problem stops the parse. */
struct parse_state {
    uint32_t bound;
    unsigned memory_models, entry_points;
    char *why;
    size_t cap;
};

static spv_result_t on_header(void *user, spv_endianness_t endian, uint32_t magic, uint32_t version,
                              uint32_t generator, uint32_t bound, uint32_t reserved)
{
    (void)endian;
    (void)magic;
    (void)version;
    (void)generator;
    (void)reserved;
    struct parse_state *ps = user;
    ps->bound = bound;
    if (bound == 0 || bound > MAX_ID_BOUND) {
        snprintf(ps->why, ps->cap, "id bound %" PRIu32 " outside 1..%u", bound, MAX_ID_BOUND);
        return SPV_ERROR_INVALID_BINARY;
    }
    return SPV_SUCCESS;
}

/* Every id is below the bound and not 0: drivers size their tables by the
 * bound and index them by id, so this is as structural as a length. */
static spv_result_t on_instruction(void *user, const spv_parsed_instruction_t *in)
{
    struct parse_state *ps = user;
    ps->memory_models += in->opcode == OP_MEMORY_MODEL;
    ps->entry_points += in->opcode == OP_ENTRY_POINT;
    for (uint16_t k = 0; k < in->num_operands; k++) {
        const spv_parsed_operand_t *o = &in->operands[k];
        switch (o->type) {
        case SPV_OPERAND_TYPE_ID:
        case SPV_OPERAND_TYPE_TYPE_ID:
        case SPV_OPERAND_TYPE_RESULT_ID:
        case SPV_OPERAND_TYPE_MEMORY_SEMANTICS_ID:
        case SPV_OPERAND_TYPE_SCOPE_ID: {
            uint32_t id = in->words[o->offset];
            if (id == 0 || id >= ps->bound) {
                snprintf(ps->why, ps->cap, "id %" PRIu32 " of opcode %u outside 1..%" PRIu32, id,
                         (unsigned)in->opcode, ps->bound - 1);
                return SPV_ERROR_INVALID_ID;
            }
            break;
        }
        default:
            break;
        }
    }
    return SPV_SUCCESS;
}

static int spirv_parse(const uint32_t *words, size_t n, char *why, size_t cap)
{
    spv_context ctx = spvContextCreate(env_for(words, n));
    if (!ctx) {
        snprintf(why, cap, "the SPIR-V parser could not start");
        return KILN_ENOMEM;
    }
    spv_diagnostic diag = NULL;
    struct parse_state ps = {.why = why, .cap = cap};
    why[0] = '\0';
    /* The parse checks every opcode and operand against the grammar; the
     * callbacks check ids and the instructions a stage cannot lack. */
    spv_result_t res = spvBinaryParse(ctx, &ps, words, n, on_header, on_instruction, &diag);
    if (res == SPV_SUCCESS && (ps.memory_models != 1 || ps.entry_points == 0)) {
        snprintf(why, cap, "%u OpMemoryModel and %u OpEntryPoint instructions (1 and 1 or more)",
                 ps.memory_models, ps.entry_points);
        res = SPV_ERROR_INVALID_BINARY;
    }
    int rc = KILN_OK;
    if (res != SPV_SUCCESS && why[0] == '\0') {
        const char *msg = diag && diag->error ? diag->error : "not parseable SPIR-V";
        snprintf(why, cap, "%s", msg);
        for (char *p = why; (p = strchr(p, '\n')) != NULL;)
            *p = ' ';
    }
    if (res != SPV_SUCCESS)
        rc = KILN_EFORMAT;
    spvDiagnosticDestroy(diag);
    spvContextDestroy(ctx);
    return rc;
}

#else

static int spirv_validate(const uint32_t *words, size_t n, char *why, size_t cap)
{
    (void)words;
    (void)n;
    snprintf(why, cap, "this build has no SPIR-V validator");
    return KILN_ENOTSUP;
}

static int spirv_parse(const uint32_t *words, size_t n, char *why, size_t cap)
{
    (void)words;
    (void)n;
    snprintf(why, cap, "this build has no SPIR-V parser");
    return KILN_ENOTSUP;
}

#endif

int kiln_vk_validate_spirv(const uint32_t *words, size_t n, char *why, size_t cap)
{
    if ((!words && n) || !why || cap == 0)
        return KILN_EINVAL;
    KILN_TRY(kiln_spirv_check_words(words, n, why, cap));
    return spirv_validate(words, n, why, cap);
}

int kiln_vk_check_spirv_structure(const uint32_t *words, size_t n, char *why, size_t cap)
{
    if ((!words && n) || !why || cap == 0)
        return KILN_EINVAL;
    KILN_TRY(kiln_spirv_check_words(words, n, why, cap));
    return spirv_parse(words, n, why, cap);
}

int kiln__program_check_module(const uint32_t *words, size_t n, bool recorded, char *why,
                               size_t cap)
{
    int rc = kiln_vk_validate_spirv(words, n, why, cap);
    if (rc != KILN_EFORMAT || !recorded)
        return rc;
    char parse[256];
    return kiln_vk_check_spirv_structure(words, n, parse, sizeof(parse)) == KILN_OK ? 1 : rc;
}
