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

/*
 * Packing levels (kiln_pack_options.level). The default is what a cache
 * filled during play gets: fast to pack, the kiln codec's zstd levels of
 * docs/pack-format.md. 1 to 22 pack the kiln codec's streams (and the zstd
 * codec's SPIR-V) at that zstd level, with the same dictionary and literal
 * rules. KILN_PACK_LEVEL_MAX is the shipping level, for a layer packed once
 * and read by every user: the smallest blobs kiln makes that still unpack
 * at least as fast as zstd -1's (docs/pack-format.md, "Levels"); it packs
 * about a hundred times slower than the default. A level never changes
 * what reads a blob: every level's blobs unpack with every reader of blob
 * format 4.
 */
#define KILN_PACK_LEVEL_DEFAULT 0
#define KILN_PACK_LEVEL_MAX     100

/* How kiln_pack_with packs. Growable (kiln/common.h): set it with
 * KILN_PACK_OPTIONS_INIT; every field's zero is kiln_pack's default. */
struct kiln_pack_options {
    size_t size;    /* sizeof, as KILN_PACK_OPTIONS_INIT sets it (docs/abi.md) */
    uint32_t codec; /* enum kiln_codec; 0 is KILN_CODEC_RAW */
    int32_t level;  /* KILN_PACK_LEVEL_DEFAULT, 1 to 22, or KILN_PACK_LEVEL_MAX */
    const struct kiln_pack_dict *dict; /* as kiln_pack's `dict`; NULL: none */
};
#define KILN_PACK_OPTIONS_INIT KILN_STRUCT_INIT(kiln_pack_options)

/*
 * (0.2) kiln_pack with options: the codec, the dictionary and the level
 * (KILN_PACK_LEVEL_MAX for a layer shipped to every user). kiln_pack(w, n,
 * codec, dict, ...) is this with level KILN_PACK_LEVEL_DEFAULT.
 * @return as kiln_pack; also KILN_EINVAL for a NULL `o`, a bad `size` or a
 * level that is none of the above. Thread-safe, as kiln_pack.
 */
KILN_API int kiln_pack_with(const uint32_t *words, size_t nwords, const struct kiln_pack_options *o,
                            void **blob, size_t *blob_size);

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
    size_t size;      /* sizeof, as KILN_PACK_CLASS_STATS_INIT sets it (docs/abi.md) */
    uint64_t modules; /* modules counted */
    uint64_t words[KILN_PACK_CLASS_COUNT];          /* SPIR-V words of the class's instructions */
    uint64_t xform_bytes[2][KILN_PACK_CLASS_COUNT]; /* the transform's stream bytes */
    uint64_t zstd_bytes[2][KILN_PACK_CLASS_COUNT];  /* those bytes after zstd, alone */
};
#define KILN_PACK_CLASS_STATS_INIT KILN_STRUCT_INIT(kiln_pack_class_stats)

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

/* @return how many blobs this process has unpacked (kiln_unpack, and
 * kiln_unpack_scratch through it): what shows a build unpacks each stage
 * once (kiln_program_open). Thread-safe (a relaxed atomic). */
KILN_API uint64_t kiln_unpack_count(void);

/* The codec's name ("raw", "zstd", "kiln"), or NULL for an unknown id.
 * Thread-safe. */
KILN_API const char *kiln_codec_name(enum kiln_codec codec);

/* Parses a codec name. @return 0 or KILN_EINVAL. Thread-safe. */
KILN_API int kiln_codec_parse(const char *name, enum kiln_codec *codec);

#ifdef __cplusplus
}
#endif

#endif /* KILN_PACK_H */
