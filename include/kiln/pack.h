/*
 * kiln/pack.h - SPIR-V kept packed in memory and on disk.
 *
 * A packed blob is self-describing: a small header names its codec, the
 * SPIR-V size it unpacks to, a checksum (a seal of the packed bytes and the
 * dictionary's whole id, XXH3-64's low 32 bits) and (for the kiln codec with
 * a dictionary) the low 16 bits of the dictionary's id. Unpacking checks the
 * seal before it decodes, so a damaged blob gives an error, never wrong
 * SPIR-V. kiln_pack makes blob format 4; kiln_unpack also reads formats 3,
 * 2 and 1 (the last two checked the output), made before. The bytes a cache
 * stores are the bytes kept in memory: a blob is never unpacked and repacked
 * on load, only unpacked for the moment a shader module is made from it.
 * docs/pack-format.md has the layout.
 *
 * Compression contexts are per thread and reused: kiln_pack and kiln_unpack
 * may be called from any number of threads at once. Each thread's contexts
 * and buffers are freed when it exits (or by kiln_pack_thread_cleanup).
 *
 * NULL arguments (0.2): a NULL blob, payload, words (of nwords > 0), output
 * or `out` array is KILN_EINVAL (a NULL blob was KILN_ECORRUPT_BLOB before,
 * and kiln_pack_dict_load's NULL data KILN_EFORMAT); kiln_spec_entry_get
 * does nothing for a NULL stage or `out`.
 */
#ifndef KILN_PACK_H
#define KILN_PACK_H

#include "kiln/common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Codec ids, stored in every blob and every cache record. Fixed forever. */
enum kiln_codec {
    KILN_CODEC_RAW = 0,  /* the SPIR-V as it is */
    KILN_CODEC_ZSTD = 1, /* plain zstd level 1 (the baseline) */
    KILN_CODEC_KILN = 2, /* kiln's SPIR-V-aware transform, then zstd (with a dictionary if given) */
};

/* The largest SPIR-V module a blob holds, in bytes (256 MiB). */
#define KILN_PACK_MAX_SPIRV_BYTES (256u << 20)

/* A trained zstd dictionary for the kiln codec. Opaque. */
struct kiln_pack_dict;

/*
 * Packs `nwords` SPIR-V words with `codec`. A module that is not SPIR-V
 * (wrong magic, shorter than the 5-word header) is packed with
 * KILN_CODEC_RAW whatever was asked; one whose instructions do not tile it
 * (a word count of 0 or past the end) is packed with KILN_CODEC_ZSTD when
 * KILN_CODEC_KILN was asked. kiln_blob_info tells which codec was used.
 * `dict` may be NULL; it is used by KILN_CODEC_KILN only, and a blob made
 * with it unpacks only with a dictionary of the same id. Without one,
 * KILN_CODEC_KILN packs modules of up to 64 KiB with kiln's built-in
 * dictionary (part of the library: such blobs unpack with no dictionary),
 * made on first use and kept until the process exits (about 250 KiB).
 * @return 0, and a new blob in *blob (free it with kiln_pack_free) of
 * *blob_size bytes; KILN_EINVAL for bad arguments, KILN_ERANGE for a module
 * over KILN_PACK_MAX_SPIRV_BYTES, KILN_ENOMEM. Thread-safe; `dict` may be
 * shared by any number of threads.
 */
KILN_API int kiln_pack(const uint32_t *words, size_t nwords, enum kiln_codec codec,
                       const struct kiln_pack_dict *dict, void **blob, size_t *blob_size);

/* Frees a blob made by kiln_pack. NULL is a no-op. Thread-safe. */
KILN_API void kiln_pack_free(void *blob);

/*
 * Reads a blob's header without unpacking (a few loads: cheap enough to
 * size a buffer with).
 * @return 0 with the codec and the SPIR-V size in bytes it unpacks to, or
 * KILN_ECORRUPT_BLOB for a header that is cut short or damaged. Any
 * out-parameter may be NULL. Thread-safe.
 */
KILN_API int kiln_blob_info(const void *blob, size_t blob_size, enum kiln_codec *codec,
                            size_t *spirv_bytes);

/*
 * Unpacks a blob into `out` (room for `out_words` words).
 * @return the number of SPIR-V words written, or KILN_ECORRUPT_BLOB for a
 * truncated or damaged blob (never an overrun, never wrong SPIR-V without
 * an error: the blob is checked against its checksum), KILN_ERANGE
 * when `out` is too small, KILN_EINVAL when the blob needs a dictionary that
 * `dict` is not (NULL, or another id; formats 2 and 3 store the id's low 16 bits,
 * so another dictionary that shares them gives KILN_ECORRUPT_BLOB instead). On an error `out` may
 * hold partial output. Thread-safe.
 */
KILN_API int64_t kiln_unpack(const void *blob, size_t blob_size, const struct kiln_pack_dict *dict,
                             uint32_t *out, size_t out_words);

/*
 * Unpacks a blob into this thread's scratch buffer (grown as needed, kept
 * for the next call).
 * @return the number of words, with *words pointing at them; the buffer is
 * valid until this thread's next kiln_unpack_scratch or
 * kiln_pack_thread_cleanup call, or its exit. Errors as kiln_unpack, and
 * *words is NULL then.
 * Thread-safe: each thread has its own scratch buffer.
 */
KILN_API int64_t kiln_unpack_scratch(const void *blob, size_t blob_size,
                                     const struct kiln_pack_dict *dict, const uint32_t **words);

/*
 * Trains a dictionary from sample modules (zstd's COVER trainer over the
 * samples' transformed streams). `max_bytes` bounds its size (0: 64 KiB).
 * Samples that are not SPIR-V are left out.
 * @return 0 and a new dictionary in *dict, or an error (KILN_EINVAL when the
 * samples are too few, fewer than 8, or zstd cannot train on them).
 * Thread-safe.
 */
KILN_API int kiln_pack_dict_train(const uint32_t *const *modules, const size_t *module_words,
                                  size_t count, size_t max_bytes, struct kiln_pack_dict **dict);

/*
 * Makes a dictionary from its serialized bytes (as kiln_pack_dict_bytes
 * gave them, for example read from programs.kpd). The bytes are copied.
 * @return 0 or KILN_ECORRUPT for bytes that are not a kiln dictionary or
 * whose content does not match the id they carry; KILN_ENOMEM.
 * Thread-safe.
 */
KILN_API int kiln_pack_dict_load(const void *data, size_t size, struct kiln_pack_dict **dict);

/* The dictionary's serialized bytes (what programs.kpd holds), owned by
 * the dictionary and valid as long as it lives. Thread-safe. */
KILN_API const void *kiln_pack_dict_bytes(const struct kiln_pack_dict *dict, size_t *size);

/* A 64-bit id of the dictionary's content (XXH3-64 of its zstd bytes);
 * every blob made with it stores its low 16 bits (format 1 blobs: all of
 * it). 0 for NULL. Thread-safe. */
KILN_API uint64_t kiln_pack_dict_id(const struct kiln_pack_dict *dict);

/* Frees a dictionary. NULL is a no-op.
 * Thread safety: no pack or unpack may be using it, nor use it after. */
KILN_API void kiln_pack_dict_destroy(struct kiln_pack_dict *dict);

/*
 * Frees this thread's compression contexts and scratch buffer now, instead
 * of at thread exit (they are made again on the next call). Useful for a
 * pool thread that is done packing, and for the main thread, whose
 * thread-exit destructors do not run. Invalidates pointers given by this
 * thread's kiln_unpack_scratch.
 * Thread safety: any thread; it frees the calling thread's state only.
 */
KILN_API void kiln_pack_thread_cleanup(void);

/* ---------------------------------------------------------------------------
 * Where the bytes go: per opcode class, for kiln bench pack.
 * ------------------------------------------------------------------------ */

/* Opcode classes of the per-class figures. */
enum kiln_pack_class {
    KILN_PACK_CLASS_DECORATION,        /* OpDecorate, OpDecorateId/String, decoration groups */
    KILN_PACK_CLASS_MEMBER_DECORATION, /* OpMemberDecorate, OpMemberDecorateString */
    KILN_PACK_CLASS_TYPE_CONSTANT,     /* OpType*, OpConstant*, OpSpecConstant*, OpUndef */
    KILN_PACK_CLASS_DEBUG,             /* names, strings, sources, OpLine, OpModuleProcessed */
    KILN_PACK_CLASS_MEMORY,            /* variables, loads, stores, access chains, atomics */
    KILN_PACK_CLASS_ARITHMETIC,        /* arithmetic, logic, conversions, composites */
    KILN_PACK_CLASS_IMAGE,             /* image sampling, reads, writes, queries */
    KILN_PACK_CLASS_CONTROL,           /* functions, labels, branches, merges, phis */
    KILN_PACK_CLASS_EXT_INST,          /* OpExtInst (GLSL.std.450, debug info, ...) */
    KILN_PACK_CLASS_OTHER,             /* the header, capabilities, entry points, modes, ... */
    KILN_PACK_CLASS_COUNT
};

/* Per-class figures, summed over modules. Index [t] is transform t + 1:
 * [0] the transform of blob format 1, [1] the current one. */
struct kiln_pack_class_stats {
    uint64_t modules;                               /* modules counted */
    uint64_t words[KILN_PACK_CLASS_COUNT];          /* SPIR-V words of the class's instructions */
    uint64_t xform_bytes[2][KILN_PACK_CLASS_COUNT]; /* the transform's stream bytes */
    uint64_t zstd_bytes[2][KILN_PACK_CLASS_COUNT];  /* those bytes after zstd, alone */
};

/* The class's name ("decoration", "member_decoration", ...), or NULL.
 * Thread-safe. */
KILN_API const char *kiln_pack_class_name(enum kiln_pack_class c);

/*
 * Adds one module's per-class figures to *stats: for each class and each
 * transform, the module is transformed keeping only the values of that
 * class's instructions (the transform's state still follows every
 * instruction) and those streams are compressed alone, at the kiln codec's
 * level without a dictionary. So a class's bytes are what it costs on its
 * own; the classes' sum is near, not equal to, a blob's payload. A module
 * the kiln codec would not transform (not SPIR-V, or cut off) is left out.
 * @return 0, KILN_EINVAL for bad arguments or KILN_ENOMEM. Thread-safe;
 * slow (twenty transforms of the module): for benchmarks.
 */
KILN_API int kiln_pack_class_stats_add(const uint32_t *words, size_t nwords,
                                       struct kiln_pack_class_stats *stats);

/* ---------------------------------------------------------------------------
 * Program payload: one program (a pipeline's stages, each a packed blob,
 * their entry points and specialization data, and the pipeline-state
 * description) in one buffer. This is what the cache stores as a record's
 * payload.
 *
 * Layout (little-endian), version 3: "KG", 3, stage count (1..255); the
 * state kind (u32) and state size (u32); per stage its kind (u32), blob
 * size (u32), entry-point length (u32, 0: "main"), specialization entries
 * (u32) and specialization data size (u32); then the state bytes; then per
 * stage its entry point and a NUL, its map entries (3 u32 each: constant
 * id, offset, size) and its data; then the blobs, back to back.
 *
 * Version 2 (stage kinds and blobs only: "KG", 2, count; per stage kind and
 * blob size; the blobs) is still written for a program that has nothing
 * else (built-in state, entry points "main", no specialization), so such a
 * payload is byte for byte what earlier releases wrote. Versions 1 (kiln's
 * own stage numbers, converted when parsed) and 2 parse as built-in state,
 * "main" and no specialization.
 *
 * A stage's kind is a VkShaderStageFlagBits value (the OR of several for a
 * module used in several stages, 0 when unknown).
 * ------------------------------------------------------------------------ */

/*
 * Shader stages: VkShaderStageFlagBits values everywhere in kiln (payloads,
 * programs, Fossilize archives). The numbers are Vulkan's, named here so
 * that no caller needs a Vulkan header to use them (src/vk checks that they
 * match); kiln_vk_stage_name (kiln/vk.h) names them.
 */
enum {
    KILN_VK_STAGE_VERTEX_BIT = 0x00000001,       /* VK_SHADER_STAGE_VERTEX_BIT */
    KILN_VK_STAGE_TESS_CONTROL_BIT = 0x00000002, /* VK_SHADER_STAGE_TESSELLATION_CONTROL_BIT */
    KILN_VK_STAGE_TESS_EVAL_BIT = 0x00000004,    /* VK_SHADER_STAGE_TESSELLATION_EVALUATION_BIT */
    KILN_VK_STAGE_GEOMETRY_BIT = 0x00000008,     /* VK_SHADER_STAGE_GEOMETRY_BIT */
    KILN_VK_STAGE_FRAGMENT_BIT = 0x00000010,     /* VK_SHADER_STAGE_FRAGMENT_BIT */
    KILN_VK_STAGE_COMPUTE_BIT = 0x00000020,      /* VK_SHADER_STAGE_COMPUTE_BIT */
    KILN_VK_STAGE_TASK_BIT = 0x00000040,         /* VK_SHADER_STAGE_TASK_BIT_EXT */
    KILN_VK_STAGE_MESH_BIT = 0x00000080,         /* VK_SHADER_STAGE_MESH_BIT_EXT */
    KILN_VK_STAGE_RAYGEN_BIT = 0x00000100,       /* VK_SHADER_STAGE_RAYGEN_BIT_KHR */
    KILN_VK_STAGE_ANY_HIT_BIT = 0x00000200,      /* VK_SHADER_STAGE_ANY_HIT_BIT_KHR */
    KILN_VK_STAGE_CLOSEST_HIT_BIT = 0x00000400,  /* VK_SHADER_STAGE_CLOSEST_HIT_BIT_KHR */
    KILN_VK_STAGE_MISS_BIT = 0x00000800,         /* VK_SHADER_STAGE_MISS_BIT_KHR */
    KILN_VK_STAGE_INTERSECTION_BIT = 0x00001000, /* VK_SHADER_STAGE_INTERSECTION_BIT_KHR */
    KILN_VK_STAGE_CALLABLE_BIT = 0x00002000,     /* VK_SHADER_STAGE_CALLABLE_BIT_KHR */
};

/* The ray-tracing stages together (raygen to callable). */
#define KILN_VK_STAGE_RAY_TRACING_BITS 0x00003f00u

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

/* The codec's name ("raw", "zstd", "kiln"), or NULL for an unknown id.
 * Thread-safe. */
KILN_API const char *kiln_codec_name(enum kiln_codec codec);

/* Parses a codec name. @return 0 or KILN_EINVAL. Thread-safe. */
KILN_API int kiln_codec_parse(const char *name, enum kiln_codec *codec);

#ifdef __cplusplus
}
#endif

#endif /* KILN_PACK_H */
