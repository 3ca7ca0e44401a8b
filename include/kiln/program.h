/*
 * kiln/program.h - the program record: what one pipeline is built from,
 * how it is stored, what it is stored under, and how its SPIR-V is checked.
 *
 * One home (docs/design.md, module `program`, src/program/):
 *
 * - the model: a program (struct kiln_program: stages with their SPIR-V or
 *   source text, entry points, specialization, and a pipeline-state
 *   description of a kind), and the program sources kiln_prepare reads;
 * - the payload: the bytes a cache record holds for a program (its packed
 *   stages, entry points, specialization and state; docs/pack-format.md);
 * - the key: the hash a program is stored under (kiln_program_key);
 * - the SPIR-V checks that need no Vulkan: framing, SPIRV-Tools' validator
 *   and its structure-only parse;
 * - sealing and opening: kiln_program_seal checks, packs and keys a
 *   program into one payload marked validated; kiln_program_open parses a
 *   payload, unpacks each stage once and checks it once. The cache's
 *   kiln_cache_put_program and kiln_cache_get_program (kiln/cache.h) are
 *   those two with the store and the load: the one call that stores a
 *   program an emulator meets during play, and the one that opens it.
 *
 * kiln/prep.h and kiln/vk.h include this header, so code that found these
 * names there still does; code that used the payload through kiln/pack.h
 * alone includes this header now (pack is below program: docs/design.md).
 *
 * NULL arguments: a NULL program, payload, options' required pointer or
 * output is KILN_EINVAL; kiln_spec_entry_get does nothing for a NULL stage
 * or `out`; kiln_program_spirv_bytes answers 0; the free functions take
 * NULL as a no-op.
 */
#ifndef KILN_PROGRAM_H
#define KILN_PROGRAM_H

#include "kiln/common.h"
#include "kiln/pack.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------------
 * The payload: a program as a cache record holds it
 * ------------------------------------------------------------------------ */

/*
 * The kinds of pipeline-state description a program carries (see
 * kiln/prep.h, struct kiln_program). Stored in the payload as a u32.
 */
enum kiln_state_kind {
    /* kiln's own shapes (kiln/vk.h, "The shader interface"): no state
     * bytes; built by kiln's own builder. Every program before version 3. */
    KILN_STATE_BUILTIN = 0,
    /* Fossilize state: bytes the Fossilize builder understands (src/foz);
     * opaque to the core. */
    KILN_STATE_FOZ = 1,
    /* An application's own bytes, opaque to kiln; built by the
     * application's builder. */
    KILN_STATE_APP = 2,
};

/* The number of state kinds (per-kind counts are arrays of this size). */
#define KILN_STATE_KINDS 3u

/* The state bytes one program may carry at most (a payload field is u32). */
#define KILN_STATE_MAX_BYTES (64u << 20)

/* The longest entry point name a payload stores (bytes, without the NUL). */
#define KILN_PAYLOAD_MAX_ENTRY 1024u

/* The bytes of one specialization map entry in a payload (three u32). */
#define KILN_SPEC_ENTRY_BYTES 12u

/* One specialization map entry (VkSpecializationMapEntry's fields, with the
 * size as u32). */
struct kiln_spec_entry {
    uint32_t constant_id;
    uint32_t offset;
    uint32_t size;
};

/*
 * One stage of a program in a payload. Zero-initialise it: the fields
 * after blob_size default to entry "main" and no specialization.
 */
struct kiln_stage_blob {
    uint32_t stage; /* a VkShaderStageFlagBits value (KILN_VK_STAGE_*_BIT) */
    /* Specialization map entries: `nspec` of them at spec_map (below). */
    uint32_t nspec;
    const void *blob; /* a packed blob (kiln_pack); borrowed */
    size_t blob_size;
    /* The entry point, NUL-terminated; NULL (or "main") for "main". When
     * parsed, NULL for "main", else it points into the payload. */
    const char *entry;
    /* Specialization: the map entries, each KILN_SPEC_ENTRY_BYTES of
     * little-endian u32 (constant id, offset, size; read them with
     * kiln_spec_entry_get), and `spec_size` bytes of data. Borrowed; when
     * parsed, they point into the payload. */
    const void *spec_map;
    const void *spec_data;
    size_t spec_size;
};

/* A program's pipeline-state description, as a payload holds it. */
struct kiln_payload_state {
    uint32_t kind;     /* enum kiln_state_kind */
    const void *bytes; /* borrowed; when parsed, it points into the payload */
    size_t size;       /* at most KILN_STATE_MAX_BYTES */
    uint32_t flags;    /* KILN_PAYLOAD_* flags */
};

/*
 * A payload flag: every stage passed kiln_vk_validate_spirv (with the
 * SPIR-V validator compiled in) before the payload was built, so kiln's
 * pipeline phase does not validate it again at every warm start. Set it
 * only after that check; a payload without it (every payload of an earlier
 * release) is validated before its first build in each run. The flag is
 * the high bit of the payload's version byte, covered by the cache
 * record's checksum.
 */
#define KILN_PAYLOAD_VALIDATED 1u

/* The most stages one payload holds. */
#define KILN_PAYLOAD_MAX_STAGES 255u

/*
 * Reads map entry `i` of a stage's specialization map (no bounds check:
 * i < stage->nspec). Thread-safe.
 */
KILN_API void kiln_spec_entry_get(const struct kiln_stage_blob *stage, uint32_t i,
                                  struct kiln_spec_entry *out);

/*
 * Joins `n` stages (1..KILN_PAYLOAD_MAX_STAGES) and a state description
 * into one payload (version 2 when there is nothing but built-in state,
 * "main" and no specialization; version 3 otherwise). `state` may be NULL
 * (built-in, no bytes). Each blob is checked with kiln_blob_info first;
 * each specialization entry must lie inside its stage's data.
 * @return 0 and a new payload in *payload (free it with kiln_pack_free) of
 * *size bytes; KILN_EINVAL for a bad count, an unknown state kind, bytes
 * with built-in state, an entry point of more than 1 KiB or one that is
 * empty, or a specialization entry outside its data; KILN_ECORRUPT_BLOB for
 * a stage that is not a blob; KILN_ERANGE for a blob over 4 GiB or state
 * over KILN_STATE_MAX_BYTES; or KILN_ENOMEM. Thread-safe.
 */
KILN_API int kiln_program_payload_build_full(const struct kiln_payload_state *state,
                                             const struct kiln_stage_blob *stages, uint32_t n,
                                             void **payload, size_t *size);

/* kiln_program_payload_build_full with built-in state. Thread-safe. */
KILN_API int kiln_program_payload_build(const struct kiln_stage_blob *stages, uint32_t n,
                                        void **payload, size_t *size);

/*
 * Splits a payload (version 1, 2 or 3) into its stages and its state,
 * checking every size against `size`, every stage's blob header
 * (kiln_blob_info), every entry point (NUL-terminated, no NUL inside),
 * every specialization entry (inside its data) and the state kind. What
 * `out` and `state` point to lies inside `payload`, which must outlive
 * them. `out` has room for `n_expected` stages; `state` may be NULL.
 * @return the number of stages; KILN_ECORRUPT_BLOB for a damaged payload;
 * KILN_ERANGE when it holds more than `n_expected` stages. Thread-safe.
 */
KILN_API int kiln_program_payload_parse_full(const void *payload, size_t size, uint32_t n_expected,
                                             struct kiln_stage_blob *out,
                                             struct kiln_payload_state *state);

/* kiln_program_payload_parse_full without the state. Thread-safe. */
KILN_API int kiln_program_payload_parse(const void *payload, size_t size, uint32_t n_expected,
                                        struct kiln_stage_blob *out);

/* ---------------------------------------------------------------------------
 * Stages, programs and program sources
 * ------------------------------------------------------------------------ */

/*
 * One stage's source, as a translator receives it. `text` holds `size`
 * bytes and need not end with a NUL (kiln's own sources do). `name` says
 * which program and stage it is, for log lines ("gen-000007-graphics.frag",
 * "shaders/blur.comp"). All pointers are borrowed for the call.
 */
struct kiln_source {
    uint32_t stage; /* a VkShaderStageFlagBits value (KILN_VK_STAGE_*_BIT, kiln/pack.h) */
    const char *text;
    size_t size;
    const char *name;
};

/* ---------------------------------------------------------------------------
 * Programs
 * ------------------------------------------------------------------------ */

/* The most stages one program has (a payload's most). */
#define KILN_PROGRAM_MAX_STAGES KILN_PAYLOAD_MAX_STAGES

/* The stages kiln_program_create makes room for (any graphics pipeline's:
 * vertex, two tessellation stages, geometry, fragment; or task, mesh,
 * fragment); kiln_program_reserve makes more. */
#define KILN_PROGRAM_STAGE_ROOM 8u

/* One stage of a program: source text, SPIR-V, or both once translated. */
struct kiln_program_stage {
    /* The source. src.text is NULL for a stage that came as SPIR-V; src.name
     * is always set (for a file: its path relative to its folder).
     * src.stage is any VkShaderStageFlagBits value. */
    struct kiln_source src;
    /* The SPIR-V, or NULL until kiln_program_translate fills it. */
    uint32_t *words;
    size_t nwords;
    /* The entry point; NULL: "main". */
    char *entry;
    /* Specialization: `nspec` map entries and `spec_size` bytes of data
     * (VkSpecializationInfo's parts); 0 and NULL: none. */
    uint32_t nspec;
    struct kiln_spec_entry *spec;
    void *spec_data;
    size_t spec_size;
};

/*
 * A program: the stages of one pipeline (any VkShaderStageFlagBits values,
 * each with its entry point and specialization data) and a pipeline-state
 * description of a kind (enum kiln_state_kind, kiln/pack.h):
 * KILN_STATE_BUILTIN (kiln's own shapes: one compute stage, or a vertex
 * then a fragment stage; no state bytes), KILN_STATE_FOZ (Fossilize state)
 * or KILN_STATE_APP (an application's bytes). kiln stores and returns all
 * of it and builds the pipeline through the builder for its kind (struct
 * kiln_builder).
 *
 * A program made by kiln (kiln_program_create, kiln_program_copy, a source's
 * load) owns everything in it, freed by kiln_program_destroy: its `stages`
 * array has room for `stage_room` stages, and every string, words array,
 * map and data in it comes from malloc. A caller may read it and may take
 * `words` over (setting the pointer to NULL), nothing else. A program a
 * caller lays out itself (for kiln_program_source_array) may point
 * anywhere; kiln only reads it, and copies it (kiln_program_copy) before
 * use.
 */
struct kiln_program {
    /* sizeof(struct kiln_program) and sizeof(struct kiln_program_stage) as
     * the caller's headers have them: KILN_PROGRAM_INIT sets both, and
     * kiln_program_create / kiln_program_copy do for the programs they
     * make. `stages` is an array of stage_size-byte elements (docs/abi.md,
     * "The program model"). */
    size_t size;
    size_t stage_size;
    char *name;
    unsigned nstages;
    struct kiln_program_stage *stages;
    unsigned stage_room; /* stages the array has room for (0 in a caller's own program) */
    /* The key the program is stored under, when its source names it (a
     * module of a Fossilize archive keeps its archive's hash); otherwise
     * has_key is false and kiln_prep_program_key makes it. */
    bool has_key;
    struct kiln_key key;
    /* The pipeline-state description: its kind and bytes (none for
     * KILN_STATE_BUILTIN; at most KILN_STATE_MAX_BYTES). */
    uint32_t state_kind;
    void *state;
    size_t state_size;
};

/* A caller's own program, zeroed but for its sizes (built-in state, no
 * stages): `struct kiln_program p = KILN_PROGRAM_INIT;`. */
#if defined(__cplusplus)
#define KILN_PROGRAM_INIT                                                              \
    {                                                                                  \
        sizeof(struct kiln_program), sizeof(struct kiln_program_stage), NULL, 0u, NULL \
    }
#else
#define KILN_PROGRAM_INIT                                                                    \
    {                                                                                        \
        .size = sizeof(struct kiln_program), .stage_size = sizeof(struct kiln_program_stage) \
    }
#endif

/* @return the SPIR-V bytes of all stages that have words. Thread-safe
 * (reads only). */
KILN_API size_t kiln_program_spirv_bytes(const struct kiln_program *p);

/* Frees a program and everything it holds. NULL is a no-op.
 * Thread safety: no other thread may use the program during or after the
 * call. */
KILN_API void kiln_program_destroy(struct kiln_program *p);

/*
 * Makes an empty program named `name` (copied; no stages, built-in state)
 * with room for KILN_PROGRAM_STAGE_ROOM stages, zeroed, laid out as the
 * caller's headers lay it out (program_size and stage_size: their sizeof,
 * which the inline kiln_program_create passes; smaller than this
 * release's first layout is KILN_EINVAL). The caller then
 * fills its stages and nstages: every string, words array, map and data
 * it puts there (and in `state`) must come from malloc, and is the
 * program's from then on (kiln_program_destroy frees them).
 * @return 0 and the program in *out, KILN_EINVAL for a NULL argument, or
 * KILN_ENOMEM. Thread-safe.
 */
KILN_API int kiln_program_create_sized(const char *name, size_t program_size, size_t stage_size,
                                       struct kiln_program **out);
/* kiln_program_create_sized with the caller's sizeof of both structs: the
 * program comes in the caller's layout (docs/abi.md). */
static inline int kiln_program_create(const char *name, struct kiln_program **out)
{
    return kiln_program_create_sized(name, sizeof(struct kiln_program),
                                     sizeof(struct kiln_program_stage), out);
}

/*
 * Makes room for `n` stages (at most KILN_PROGRAM_MAX_STAGES) in a program
 * made by kiln; new stages are zeroed, existing ones kept.
 * @return 0, KILN_EINVAL (NULL, n over the maximum, or a caller's own
 * program: stage_room 0) or KILN_ENOMEM. Thread-safe for different
 * programs.
 */
KILN_API int kiln_program_reserve(struct kiln_program *p, unsigned n);

/*
 * Copies a program deeply (name, stages with their text, words, entry
 * points and specialization, key, state) into a new program made by kiln.
 * `src` may be a caller's own layout.
 * The copy is laid out as program_size and stage_size say (the inline
 * kiln_program_copy passes the caller's sizeof).
 * @return 0 and the copy in *out; KILN_EINVAL for a NULL argument, a size
 * (its own, or stage_size) kiln cannot read, no name, no stages or more than
 * KILN_PROGRAM_MAX_STAGES, a stage with specialization entries but no map; KILN_ENOMEM.
 * Thread-safe.
 */
KILN_API int kiln_program_copy_sized(const struct kiln_program *src, size_t program_size,
                                     size_t stage_size, struct kiln_program **out);
/* kiln_program_copy_sized into the caller's layout (its sizeof of both). */
static inline int kiln_program_copy(const struct kiln_program *src, struct kiln_program **out)
{
    return kiln_program_copy_sized(src, sizeof(struct kiln_program),
                                   sizeof(struct kiln_program_stage), out);
}

/*
 * Checks that `n` bytes look like a SPIR-V module: a whole number of words,
 * at least a header, the magic number in host order.
 * @return 0, or KILN_EFORMAT with a static reason in *why (which may be
 * NULL). Thread-safe.
 */
KILN_API int kiln_spirv_check(const void *data, size_t n, const char **why);

/* ---------------------------------------------------------------------------
 * Program sources
 * ------------------------------------------------------------------------ */

/*
 * Where kiln_prepare takes its programs from: `count` programs, numbered
 * from 0, each made on demand by `load`. The struct is copied by value;
 * what `user` points to must outlive the kiln_prepare call.
 *
 * A program given as source text needs kiln_prepare_options.translator; a
 * program whose stages come as SPIR-V (words, no text) needs none. A
 * program may name its own key (kiln_program.has_key: a Fossilize module
 * keeps its archive's hash); otherwise it is keyed by
 * kiln_prep_program_key.
 */
struct kiln_program_source {
    size_t size; /* sizeof, as KILN_PROGRAM_SOURCE_INIT sets it (docs/abi.md) */
    void *user;
    /* How many programs there are. */
    size_t count;
    /*
     * Makes program i (0 <= i < count) and stores it in *out (the caller
     * destroys it). Called from many worker threads at once: it must be
     * thread-safe. On failure it returns a negative kiln error and has
     * logged one line naming the program and why.
     */
    int (*load)(void *user, size_t i, struct kiln_program **out);
    /*
     * The cache stamp for these programs translated by a translator with
     * `translator_stamp` (0 when there is none): a source whose programs
     * change with something besides the translator (the generator's
     * version) mixes that in; a source of SPIR-V names its own. NULL: the
     * translator's stamp as it is.
     */
    uint64_t (*stamp)(void *user, uint64_t translator_stamp);
};

/*
 * A caller's array of programs, for kiln_program_source_array. The
 * programs are only read (each is copied when kiln_prepare loads it); the
 * array, what it points to and this struct must outlive the kiln_prepare
 * call.
 */
struct kiln_program_array {
    size_t size; /* sizeof, as KILN_PROGRAM_ARRAY_INIT sets it (docs/abi.md) */
    /* `count` programs, each `programs[0].size` bytes apart (the size
     * KILN_PROGRAM_INIT sets in each). */
    const struct kiln_program *programs;
    size_t count;
    /* The stamp for the cache (what kiln_program_source.stamp returns,
     * whatever the translator's). */
    uint64_t stamp;
};

#define KILN_PROGRAM_SOURCE_INIT KILN_STRUCT_INIT(kiln_program_source)
#define KILN_PROGRAM_ARRAY_INIT  KILN_STRUCT_INIT(kiln_program_array)

/*
 * A program source over a caller's array (an emulator's programs, with
 * their state): count is a->count, load copies program i
 * (kiln_program_copy), stamp is a->stamp.
 * @return the source, with user = a. Thread-safe.
 */
KILN_API struct kiln_program_source kiln_program_source_array(const struct kiln_program_array *a);

/* ---------------------------------------------------------------------------
 * The key
 * ------------------------------------------------------------------------ */

/*
 * A program's key: XXH3-128 over its identity, stage by stage: the stage
 * kind, then the source text, or, for a stage that came as SPIR-V, its
 * words (each with its kind and length before it, so no two programs share
 * a key by shifting bytes between stages). Compute, vertex and fragment
 * are hashed as 0, 1 and 2, the numbers keys were first made with, so the
 * keys of caches made before stages were VkShaderStageFlagBits still hold.
 * A program with more than that (an entry point other than "main",
 * specialization data, a state kind other than built-in, state bytes) has
 * one more record hashed after its stages, of a type no stage record has:
 * every entry point, map and data, the state kind and the state bytes. So
 * a program of today's shape (built-in, "main", no specialization) keeps
 * the key earlier releases gave it, and any difference in the rest gives
 * another key. It ignores kiln_program.has_key (kiln_program_seal honours
 * it).
 * @return 0 with the key in *key, KILN_EINVAL for a program without stages
 * or a stage with neither text nor words, or KILN_ENOMEM. Thread-safe.
 */
KILN_API int kiln_program_key(const struct kiln_program *p, struct kiln_key *key);

/* kiln_program_key under its first name (kiln/prep.h of 0.2). Thread-safe. */
KILN_API int kiln_prep_program_key(const struct kiln_program *p, struct kiln_key *key);

/* ---------------------------------------------------------------------------
 * SPIR-V checks that need no Vulkan
 * ------------------------------------------------------------------------ */

/*
 * Checks the framing of `n` SPIR-V words: a header, the magic number in
 * host order, and every instruction's length nonzero and inside the
 * module. The check every module passes before a driver sees it, and the
 * first step of kiln_vk_validate_spirv.
 * @return 0, or KILN_EFORMAT with the reason in `why`; KILN_EINVAL for a
 * NULL `why` (or NULL words with n > 0). Thread-safe.
 */
KILN_API int kiln_spirv_check_words(const uint32_t *words, size_t n, char *why, size_t cap);

/*
 * Checks one SPIR-V module before it is stored or reaches a driver: first
 * its framing (header, magic, every instruction's length inside the
 * module), then SPIR-V's validator (SPIRV-Tools, Vulkan 1.1 rules), which
 * also refuses an id bound over its limit and unknown opcodes.
 * @return 0 when valid; KILN_EFORMAT with the reason (the validator's
 * first message, on one line) in `why`; KILN_ENOTSUP when the framing is
 * sound but this build has no SPIRV-Tools (`why` says so: nothing more
 * could be checked); KILN_ENOMEM. Thread-safe; needs no Vulkan context.
 */
KILN_API int kiln_vk_validate_spirv(const uint32_t *words, size_t n, char *why, size_t cap);

/*
 * Checks that one SPIR-V module is well-formed, without the validator's
 * semantic rules: its framing (as kiln_vk_validate_spirv), then SPIRV-Tools'
 * binary parse, which refuses unknown opcodes, operands that do not fit
 * their instruction and instructions cut short; and an id bound within
 * SPIRV-Tools' limit (0x3fffff), every id nonzero and below it, exactly one
 * OpMemoryModel and at least one OpEntryPoint. kiln uses it for modules
 * recorded from a working application (KILN_BUILDER_RECORDED_SPIRV, see
 * kiln/prep.h) that the validator refuses: those are stored and built when
 * they pass this check (docs/reliability.md).
 * @return 0 when well-formed; KILN_EFORMAT with the reason (the parser's
 * message, on one line) in `why`; KILN_ENOTSUP when the framing is sound
 * but this build has no SPIRV-Tools (`why` says so); KILN_EINVAL for a
 * NULL `why` or `words`; KILN_ENOMEM. Thread-safe; needs no Vulkan context.
 */
KILN_API int kiln_vk_check_spirv_structure(const uint32_t *words, size_t n, char *why, size_t cap);

/*
 * The short name of a stage (a VkShaderStageFlagBits value, kiln/pack.h),
 * from the one table every log line and command uses: "vertex",
 * "tess-control", "tess-eval", "geometry", "fragment", "compute", "task",
 * "mesh", the ray-tracing stages ("raygen", ...); "several" for more than
 * one bit, "none" for 0, "?" for a bit kiln does not know.
 * @return a static string. Thread-safe.
 */
KILN_API const char *kiln_vk_stage_name(uint32_t stage);

/* ---------------------------------------------------------------------------
 * Sealing and opening a program
 *
 * Sealing is the one way a program becomes a payload: every stage is
 * checked (kiln_vk_validate_spirv; with KILN_PROGRAM_RECORDED_SPIRV a
 * module the validator refuses is kept when it parses), packed, joined with
 * its entry points, specialization and state, marked
 * KILN_PAYLOAD_VALIDATED when the validator passed every stage, and keyed.
 * Opening is the one way a payload becomes stages a driver may see: parsed,
 * each stage unpacked once into a buffer of its own, and checked once (the
 * framing always; the validator too unless the payload is marked
 * validated). The words of an open program go to the driver as they are
 * (kiln_vk_stage.words): nothing unpacks or checks them again.
 * ------------------------------------------------------------------------ */

/* A modules-recorded flag for kiln_program_seal_options.flags and
 * kiln_program_open_options.flags: the modules were recorded from a working
 * application (as KILN_BUILDER_RECORDED_SPIRV, kiln/prep.h), so a module
 * the validator refuses is kept (not marked validated) when it parses
 * (kiln_vk_check_spirv_structure). */
#define KILN_PROGRAM_RECORDED_SPIRV 0x1u
/* A flag for kiln_program_seal_options.flags: pack with `codec` (else
 * KILN_CODEC_KILN). */
#define KILN_PROGRAM_SEAL_CODEC 0x2u
/* A flag for kiln_program_seal_options.flags: log nothing about a refused
 * (or recorded-accepted) stage; the caller logs kiln_program_sealed.why
 * in its own words. */
#define KILN_PROGRAM_SEAL_QUIET 0x10u
/* A flag for kiln_program_open_options.flags: keep a copy of the payload,
 * so it need not outlive the open program (kiln_cache_get_program sets
 * it). */
#define KILN_PROGRAM_OPEN_COPY 0x4u
/* A flag for kiln_program_open_options.flags: this process checked the
 * stages already (it sealed them itself): only their framing is checked,
 * as for a payload marked validated. */
#define KILN_PROGRAM_OPEN_CHECKED 0x8u

/* How kiln_program_seal (and kiln_cache_put_program) seals a program.
 * Growable (kiln/common.h): set it with KILN_PROGRAM_SEAL_OPTIONS_INIT; NULL
 * is every default. */
struct kiln_program_seal_options {
    size_t size;
    /* KILN_PROGRAM_RECORDED_SPIRV, KILN_PROGRAM_SEAL_CODEC,
     * KILN_PROGRAM_SEAL_QUIET */
    uint32_t flags;
    uint32_t codec; /* enum kiln_codec, read with KILN_PROGRAM_SEAL_CODEC */
    /* The dictionary to pack with (kiln_pack's); NULL: none, or, for
     * kiln_cache_put_program, the cache's (kiln_cache_dict). */
    const struct kiln_pack_dict *dict;
    /* The program's name in log lines; NULL: the program's own name. */
    const char *name;
};
#define KILN_PROGRAM_SEAL_OPTIONS_INIT KILN_STRUCT_INIT(kiln_program_seal_options)

/* What kiln_program_seal made. Growable: set `size` (KILN_PROGRAM_SEALED_INIT);
 * kiln writes only what it covers. */
struct kiln_program_sealed {
    size_t size;
    /* The payload (free it with kiln_pack_free, or kiln_program_sealed_clear). */
    void *payload;
    size_t payload_size;
    /* The key: the program's own (has_key) or kiln_program_key's. */
    struct kiln_key key;
    /* The SPIR-V bytes of all stages (at most UINT32_MAX: a record's
     * field), and the number of stages. */
    uint32_t spirv_bytes;
    uint32_t nstages;
    /* The validator passed every stage (the payload is marked
     * KILN_PAYLOAD_VALIDATED); false when this build has no SPIRV-Tools
     * or a recorded module was kept though the validator refused it. */
    bool validated;
    /* A recorded module was kept though the validator refused it. */
    bool recorded_invalid;
    /* Why a stage was refused (the call failed with KILN_EFORMAT: "its
     * compute module NAME is not valid SPIR-V: ...", or KILN_ERANGE: more
     * SPIR-V than a blob holds), or, with
     * recorded_invalid, why the first kept one breaks a rule ("its
     * compute module NAME: ..."); "" otherwise. Written also on failure. */
    char why[512];
};
#define KILN_PROGRAM_SEALED_INIT KILN_STRUCT_INIT(kiln_program_sealed)

/*
 * Seals a program: checks each stage's SPIR-V (every stage needs words:
 * translate source text first), packs it, builds the payload and keys it
 * (see above). A refused stage is logged as one line naming the program,
 * the stage and the validator's message.
 * @return 0 with *out filled; KILN_EINVAL for a NULL argument, bad options,
 * a program without stages or with a stage without words; KILN_EFORMAT for
 * a stage that is not valid SPIR-V; KILN_ERANGE for one over
 * KILN_PACK_MAX_SPIRV_BYTES (both with the reason in out->why); kiln_pack's and
 * kiln_program_payload_build_full's errors; KILN_ENOMEM. Thread-safe;
 * `dict` may be shared.
 */
KILN_API int kiln_program_seal(const struct kiln_program *p,
                               const struct kiln_program_seal_options *opt,
                               struct kiln_program_sealed *out);

/* Frees what kiln_program_seal made in *s (its payload) and zeroes it but
 * for `size`. NULL is a no-op. Thread safety: not beside another use of *s. */
KILN_API void kiln_program_sealed_clear(struct kiln_program_sealed *s);

/* How kiln_program_open (and kiln_cache_get_program) opens a payload.
 * Growable: KILN_PROGRAM_OPEN_OPTIONS_INIT; NULL is every default. */
struct kiln_program_open_options {
    size_t size;
    /* KILN_PROGRAM_RECORDED_SPIRV, KILN_PROGRAM_OPEN_COPY,
     * KILN_PROGRAM_OPEN_CHECKED */
    uint32_t flags;
    /* The dictionary the stages were packed with; NULL: none, or, for
     * kiln_cache_get_program, the cache's. */
    const struct kiln_pack_dict *dict;
    /* The program's name in log lines; NULL: "(program)". */
    const char *name;
};
#define KILN_PROGRAM_OPEN_OPTIONS_INIT KILN_STRUCT_INIT(kiln_program_open_options)

/* One stage of an open program: the payload's stage (its blob, stage bit,
 * entry point and specialization, read map entries with
 * kiln_spec_entry_get) and its SPIR-V, unpacked and checked. */
struct kiln_program_open_stage {
    struct kiln_stage_blob blob;
    const uint32_t *words;
    size_t nwords;
};

/*
 * An open program, made by kiln (read it; never allocate one). What it
 * points to lives until kiln_program_opened_free.
 */
struct kiln_program_opened {
    uint32_t nstages;
    const struct kiln_program_open_stage *stages;
    /* The state description (its bytes point into the payload). */
    struct kiln_payload_state state;
    /* Every stage passed the validator, now or when sealed. */
    bool validated;
    /* A recorded module was accepted though the validator refused it. */
    bool recorded_invalid;
};

/*
 * Opens a payload: parses it, unpacks each stage once and checks it once
 * (see above). `payload` is borrowed: it must outlive the open program,
 * unless KILN_PROGRAM_OPEN_COPY is set.
 * A refused stage is logged as one line naming the program and the stage.
 * @return 0 and the program in *out (free it with
 * kiln_program_opened_free); KILN_ECORRUPT_BLOB (or the unpack error) for
 * a damaged payload; KILN_EFORMAT for a stage that is not valid SPIR-V;
 * KILN_ENOTSUP for a payload not marked validated when this build has no
 * SPIRV-Tools (its stages cannot be checked, so they are not handed out);
 * KILN_EINVAL for a NULL argument or bad options; KILN_ENOMEM. Thread-safe.
 */
KILN_API int kiln_program_open(const void *payload, size_t size,
                               const struct kiln_program_open_options *opt,
                               struct kiln_program_opened **out);

/* Frees an open program (and its copy of the payload). NULL is a no-op. Thread safety: no other
 * thread may use it. */
KILN_API void kiln_program_opened_free(struct kiln_program_opened *p);

#ifdef __cplusplus
}
#endif

#endif /* KILN_PROGRAM_H */
