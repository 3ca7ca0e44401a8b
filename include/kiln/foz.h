/*
 * kiln/foz.h - Fossilize stream archives (.foz) in libkiln: reading them,
 * their recorded pipelines as whole kiln programs (kiln_foz_pipelines:
 * import into a program cache, a program source for kiln_prepare), the
 * builder of those pipelines, in-process replay (kiln_foz_replay) and
 * writing archives (kiln_foz_export). The core module src/foz, above prep;
 * included by kiln.h. The one part of libkiln that uses zlib and json-c.
 *
 * Since 0.2 (before, a tool of the kiln command, kiln-tools/foz.h): the
 * Fossilize builder is the default builder of KILN_STATE_FOZ, so
 * kiln_prepare and kiln_warm_start build what kiln_foz_pipelines_import
 * (`kiln import foz`) stored with no builder given; an application's own
 * builder of that kind still wins. kiln_foz_builder_get_stats and
 * kiln_foz_pipelines_get_stats were kiln_foz_builder_stats and
 * kiln_foz_pipelines_stats (a function may not share its struct's name in
 * C++). Every function refuses NULL where it needs a pointer: KILN_EINVAL,
 * or, for one that returns no error code, 0, false or NULL; a destroy,
 * close or free of NULL does nothing.
 *
 * Fossilize records Vulkan object create-infos (samplers, layouts, render
 * passes, shader modules, pipelines) in stream archives. kiln reads them so
 * that an existing capture can be brought into a kiln cache and prepared
 * from, and writes them (kiln_foz_writer, kiln_foz_export) so that a
 * cache's pipelines can be replayed by Fossilize's own replayer.
 *
 * An archive is a 16-byte header (the magic "\x81FOSSILIZEDB", three zero
 * bytes, the format version) and then entries, each 40 hexadecimal
 * characters (a tag and a 64-bit hash), four little-endian u32s (stored
 * size, flags: 1 plain or 2 deflate, CRC32 of the stored bytes or 0,
 * size after inflation) and the stored bytes. Each entry's payload is JSON;
 * a shader module's is JSON, a NUL and the SPIR-V in Fossilize's varint
 * packing. See docs/foz.md.
 *
 * Reading an archive:
 *
 *     struct kiln_foz *foz;
 *     KILN_TRY(kiln_foz_open(NULL, path, &foz));
 *     struct kiln_foz_entry e;
 *     int rc;
 *     while ((rc = kiln_foz_next(foz, &e)) != 0) {
 *         if (rc == KILN_ECORRUPT_RECORD)
 *             continue;                  // this entry is damaged; the next may be whole
 *         if (rc < 0)
 *             break;                     // the archive cannot be read further
 *         if (e.tag != KILN_FOZ_TAG_SHADER_MODULE)
 *             continue;
 *         struct kiln_foz_module m;
 *         if (kiln_foz_decode_module(&e, &m) == 0) {
 *             ... store m.words, m.word_count under a key made from m.hash ...
 *             kiln_foz_module_free(&m);
 *         }
 *     }
 *     kiln_foz_close(foz);
 *
 * A reader is not thread-safe: use one per thread. Different readers may be
 * used from different threads at once.
 */
#ifndef KILN_TOOLS_FOZ_H
#define KILN_TOOLS_FOZ_H

#include "kiln/cache.h"
#include "kiln/common.h"
#include "kiln/pack.h"
#include "kiln/prep.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The resource tags Fossilize defines (its ResourceTag). Other values may
 * appear in an archive; the reader delivers them as they are. */
enum kiln_foz_tag {
    KILN_FOZ_TAG_APPLICATION_INFO = 0,
    KILN_FOZ_TAG_SAMPLER = 1,
    KILN_FOZ_TAG_DESCRIPTOR_SET_LAYOUT = 2,
    KILN_FOZ_TAG_PIPELINE_LAYOUT = 3,
    KILN_FOZ_TAG_SHADER_MODULE = 4,
    KILN_FOZ_TAG_RENDER_PASS = 5,
    KILN_FOZ_TAG_GRAPHICS_PIPELINE = 6,
    KILN_FOZ_TAG_COMPUTE_PIPELINE = 7,
    KILN_FOZ_TAG_APPLICATION_BLOB_LINK = 8,
    KILN_FOZ_TAG_RAYTRACING_PIPELINE = 9,
    KILN_FOZ_TAG_COUNT = 10,
};

/* The archive format versions this reader accepts (the same range
 * Fossilize itself reads; the stream layout is the same in both). */
#define KILN_FOZ_VERSION_MIN 5
#define KILN_FOZ_VERSION_MAX 6

/* An open archive. Opaque. */
struct kiln_foz;

/* One whole, checked entry of an archive. */
struct kiln_foz_entry {
    uint64_t tag;        /* a kiln_foz_tag, or another application-defined value */
    uint64_t hash;       /* the object's Fossilize hash */
    const uint8_t *data; /* the payload after inflation; valid until the next
                            kiln_foz_next, kiln_foz_rewind or kiln_foz_close */
    size_t size;         /* bytes at data */
    uint64_t offset;     /* where the entry starts in the archive (for messages) */
};

/* What a reader has met so far (see kiln_foz_get_stats). Growable: set
 * `size` with KILN_FOZ_STATS_INIT (docs/abi.md). */
struct kiln_foz_stats {
    size_t size;            /* sizeof, as KILN_FOZ_STATS_INIT sets it */
    unsigned version;       /* the archive's format version */
    uint64_t file_size;     /* bytes in the archive */
    uint64_t entries;       /* whole, checked entries delivered */
    uint64_t damaged;       /* entries reported damaged (KILN_ECORRUPT_RECORD) */
    bool truncated;         /* the last entry was cut off, and ignored */
    uint64_t truncated_at;  /* where that cut-off entry starts */
    uint64_t end;           /* the offset just after the last entry read */
    uint64_t resyncs;       /* times the reader searched forward for the next entry */
    uint64_t skipped_bytes; /* bytes skipped by those searches and damaged sizes */
};
#define KILN_FOZ_STATS_INIT KILN_STRUCT_INIT(kiln_foz_stats)

/* A decoded shader module. */
struct kiln_foz_module {
    uint64_t hash;     /* the module's Fossilize hash */
    uint32_t flags;    /* VkShaderModuleCreateInfo.flags */
    uint32_t *words;   /* the SPIR-V; owned, free with kiln_foz_module_free */
    size_t word_count; /* words at `words` (codeSize / 4) */
};

/* One shader module of an archive and the stages it is used in. */
struct kiln_foz_module_info {
    uint64_t hash;   /* the module's Fossilize hash */
    uint32_t stages; /* VkShaderStageFlagBits (KILN_VK_STAGE_*) of every pipeline stage in the
                        archive that names this module; 0 when none does */
};

/*
 * Opens the archive at `path` through `io` (NULL: kiln_io_default()) and
 * checks its header. The file is read entry by entry, never whole.
 * @return 0 and a new reader in *foz (close it with kiln_foz_close);
 * KILN_EFORMAT when the file is not a Fossilize stream archive (too short,
 * wrong magic) or has a version outside KILN_FOZ_VERSION_MIN..MAX; an I/O
 * error when it cannot be opened or read. What is wrong (which check failed)
 * is logged at info only, naming the file: a file that is missing or of
 * another kind is the caller's input, and the caller reports it. A read
 * that fails inside a file that opened is logged as an error.
 * Thread-safe; the reader it makes is used by one thread at a time.
 */
KILN_API int kiln_foz_open(const struct kiln_io *io, const char *path, struct kiln_foz **foz);

/*
 * Opens an archive held in memory, like kiln_foz_open. `data` is borrowed:
 * it must outlive the reader. `name` (may be NULL) names the archive in log
 * lines and is copied.
 * @return as kiln_foz_open.
 * Thread-safe; the reader as kiln_foz_open's.
 */
KILN_API int kiln_foz_open_memory(const void *data, size_t size, const char *name,
                                  struct kiln_foz **foz);

/* Closes a reader and frees what it holds. NULL is a no-op.
 * Not thread-safe on `foz`: nothing else may use it. */
KILN_API void kiln_foz_close(struct kiln_foz *foz);

/*
 * Reads the next entry, checks its CRC32 (when not zero), inflates it (for
 * deflate entries) and checks its size after inflation.
 * @return 1 with the entry in *entry;
 *   0 at the end of the archive, also when the last entry is cut off (it is
 *     ignored, as the format says; kiln_foz_get_stats says so, and an info
 *     line is logged);
 *   KILN_ECORRUPT_RECORD when this entry is damaged (CRC, inflate or size
 *     mismatch, unknown flags, a stored size past the end with more after
 *     it, or a head whose name is not hexadecimal: tag UINT64_MAX then):
 *     *entry names its tag, hash and offset, with no data; the next call
 *     reads on from the next whole entry, searching forward for it when the
 *     damaged entry's size does not lead to one (stats.resyncs);
 *   KILN_ENOMEM, or an I/O error from the file (also repeated by later calls).
 * Every damaged entry, and every stretch of bytes skipped to find the next
 * entry, is logged as one warning line naming the archive and the offset
 * (and the tag and hash where they are known). The reader no longer stops
 * at a broken framing; KILN_ECORRUPT is not returned.
 * Not thread-safe on `foz` (one reader per thread).
 */
KILN_API int kiln_foz_next(struct kiln_foz *foz, struct kiln_foz_entry *entry);

/*
 * Goes back to the first entry and clears the statistics, so that an archive
 * can be read twice (for example: pipelines first, then modules).
 * @return 0, or the I/O error of a file that can no longer be read.
 * Not thread-safe on `foz`.
 */
KILN_API int kiln_foz_rewind(struct kiln_foz *foz);

/* Copies what the reader has met so far into *stats, as far as stats->size
 * covers (a refused size: one error line, nothing written).
 * Not thread-safe on `foz` (as kiln_foz_next). */
KILN_API void kiln_foz_get_stats(const struct kiln_foz *foz, struct kiln_foz_stats *stats);

/* @return the name the reader logs with (the path, or the memory name).
 * Thread-safe (the name does not change). */
KILN_API const char *kiln_foz_name(const struct kiln_foz *foz);

/*
 * Decodes a shader module entry (tag KILN_FOZ_TAG_SHADER_MODULE): parses its
 * JSON (VkShaderModuleCreateInfo: codeSize, flags, varintOffset, varintSize)
 * and unpacks the varint-coded SPIR-V, with every offset and size checked
 * against the entry.
 * @return 0 with the module in *module (free it with kiln_foz_module_free);
 *   KILN_EINVAL when the entry is not a shader module;
 *   KILN_EPARSE when the JSON or the varint stream is malformed, when the
 *     module's hash differs from the entry's, or the words are not SPIR-V
 *     (wrong magic);
 *   KILN_ENOTSUP for the old form that stores the code as base64 text;
 *   KILN_ENOMEM.
 * Thread-safe (the entry is only read). Errors are logged at debug level:
 * the caller reports them.
 */
KILN_API int kiln_foz_decode_module(const struct kiln_foz_entry *entry,
                                    struct kiln_foz_module *module);

/* Frees a module's words and clears it. NULL or a cleared module is a no-op.
 * Thread-safe on distinct modules. */
KILN_API void kiln_foz_module_free(struct kiln_foz_module *module);

/*
 * Lists the archive's shader modules with the stages they are used in,
 * found from the graphics, compute and ray-tracing pipeline entries that
 * name them (VkPipelineShaderStageCreateInfo.stage and .module). A module
 * named by a compute pipeline has KILN_VK_STAGE_COMPUTE_BIT; one that no
 * pipeline names (for example because that pipeline was cut off) has 0.
 * Reads the archive from its first entry and rewinds it afterwards.
 * Damaged entries are skipped (the reader logs them and reads on from the
 * next whole entry). A pipeline whose JSON does not parse is skipped with a
 * warning.
 * @return the number of modules (>= 0), with a new array sorted by hash,
 * one element per distinct hash, in *modules (free it with
 * kiln_foz_module_list_free; NULL when there are none); or KILN_ENOMEM or
 * an I/O error.
 * Not thread-safe on `foz`.
 */
KILN_API int64_t kiln_foz_list_modules(struct kiln_foz *foz, struct kiln_foz_module_info **modules);

/* Frees an array made by kiln_foz_list_modules. NULL is a no-op. Thread-safe on distinct arrays. */
KILN_API void kiln_foz_module_list_free(struct kiln_foz_module_info *modules);

// clang-format off
/*
 * Finds a hash in an array made by kiln_foz_list_modules (binary search).
 * @return the element, or NULL when the hash is not there. Thread-safe.
 */
KILN_API const struct kiln_foz_module_info *kiln_foz_module_list_find(
    const struct kiln_foz_module_info *modules, size_t count, uint64_t hash);
// clang-format on

/* @return Fossilize's name of a tag ("shader module", ...), or "unknown". Thread-safe. */
KILN_API const char *kiln_foz_tag_name(uint64_t tag);

/* ---------------------------------------------------------------------------
 * The former import, one program per shader module. `kiln import foz` now
 * stores whole pipelines (kiln_foz_pipelines_import, below); this is kept
 * for the library's callers and tests, and caches it filled still open.
 * ------------------------------------------------------------------------ */

/* The stamp of caches that Fossilize modules are imported into (no
 * translator is involved: the SPIR-V is stored as captured). */
#define KILN_FOZ_STAMP UINT64_C(0x6b696c6e2d666f7a) /* "kiln-foz" */

/* @return the key an imported module is stored under: XXH3-128 of "foz"
 * followed by its Fossilize hash (8 bytes, little-endian). Thread-safe. */
KILN_API struct kiln_key kiln_foz_key(uint64_t hash);

/* What kiln_foz_import did with one archive. Growable: set `size` with
 * KILN_FOZ_IMPORT_REPORT_INIT (docs/abi.md); only what it covers is written. */
struct kiln_foz_import_report {
    size_t size;          /* sizeof, as KILN_FOZ_IMPORT_REPORT_INIT sets it */
    uint64_t modules;     /* shader-module entries met (whole, damaged or not) */
    uint64_t imported;    /* stored by this call */
    uint64_t present;     /* skipped: the key was in the cache already */
    uint64_t damaged;     /* skipped: damaged module entry (CRC, inflate, size) */
    uint64_t undecodable; /* skipped: entry whole but its module did not decode */
    uint64_t invalid;     /* skipped: refused by the SPIR-V validator, or too large to store */
    uint64_t compute;     /* imported modules used by compute pipelines */
    bool truncated;       /* the archive's last entry was cut off (ignored) */
    uint64_t truncated_at;
    uint64_t entries_skipped; /* damaged entries of any kind, names unreadable ones too */
    uint64_t resyncs;         /* times the reader searched forward for the next entry */
    uint64_t skipped_bytes;   /* bytes those searches skipped */
    uint64_t spirv_bytes;     /* SPIR-V of the imported modules */
    uint64_t packed_bytes;    /* their payloads as stored */
};
#define KILN_FOZ_IMPORT_REPORT_INIT KILN_STRUCT_INIT(kiln_foz_import_report)

/*
 * Imports the shader modules of the Fossilize archive at `path` into `c`
 * (opened with KILN_FOZ_STAMP): each module is one one-stage program
 * under kiln_foz_key(hash), packed with KILN_CODEC_KILN (and
 * kiln_cache_dict(c)); its stage kind is the VkShaderStageFlagBits of
 * every stage the archive's pipelines use it in (kiln_foz_list_modules:
 * one bit, several, or 0 when none names it). Modules already present are
 * skipped, so a re-import adds nothing. The cache is synced at the end.
 * Each module is checked before it is stored (kiln_vk_validate_spirv):
 * one the validator refuses, or over KILN_PACK_MAX_SPIRV_BYTES, is
 * counted in `invalid` with one warning line naming the archive, the
 * module and the reason, and the others go on. A build without SPIRV-Tools
 * stores what passes the framing check; no build of kiln then builds it
 * (see kiln_warm_start).
 * @return 0 when the archive was read to its end (a cut-off last entry is
 * ignored, as the format says; damaged entries are skipped and counted,
 * and the reader reads on from the next whole entry); KILN_EFORMAT for a file that is not a
 * Fossilize archive or of another version; KILN_ENOMEM, an I/O or cache
 * error, which
 * stops the import (what was stored before it is synced); KILN_EINVAL for a
 * NULL `c` or `path`, a read-only cache or a report whose size is refused.
 * `report` may be NULL; else it is filled in every case but the last.
 * Not thread-safe on `c` (one import into a cache at a time).
 */
KILN_API int kiln_foz_import(struct kiln_cache *c, const char *path,
                             struct kiln_foz_import_report *report);

/* ---------------------------------------------------------------------------
 * An archive's compute modules as a program source, in kiln's own layout
 * (what kiln prepare --corpus FILE.foz did before it built whole pipelines:
 * kiln_foz_pipelines_source)
 * ------------------------------------------------------------------------ */

/* An archive's compute modules, decoded. Opaque. */
struct kiln_foz_programs;

/*
 * Reads the archive at `path`: each shader module its compute pipelines use
 * becomes a compute program "HASH.comp" (the 16-digit Fossilize hash, in
 * hash order) whose one stage is the module's SPIR-V, decoded now and kept
 * in memory, stored under kiln_foz_key(hash), the key kiln_foz_import gives
 * it. Graphics modules, modules of no known stage and damaged entries are
 * counted as skipped (one warning line), since a single module is no
 * pipeline.
 * @return 0 and the list in *out; or kiln_foz_open's errors (KILN_EFORMAT
 * for a file that is not an archive), with one error line naming the file.
 * Thread-safe.
 */
KILN_API int kiln_foz_programs_open(const char *path, struct kiln_foz_programs **out);

/* @return the number of programs. Thread-safe. */
KILN_API size_t kiln_foz_programs_count(const struct kiln_foz_programs *fp);

/* @return the number of modules skipped. Thread-safe. */
KILN_API size_t kiln_foz_programs_skipped(const struct kiln_foz_programs *fp);

/*
 * Fills *src with a source of the list's programs: each is SPIR-V with its
 * key set, so no translator is needed, and the stamp is KILN_FOZ_STAMP
 * whatever the translator (the cache kiln import foz fills). `fp` must
 * outlive every use of *src. Thread-safe loads.
 */
KILN_API void kiln_foz_programs_source(const struct kiln_foz_programs *fp,
                                       struct kiln_program_source *src);

/* Frees the list. NULL is a no-op.
 * Not thread-safe: nothing else may use the list or a source over it. */
KILN_API void kiln_foz_programs_destroy(struct kiln_foz_programs *fp);

/* ---------------------------------------------------------------------------
 * Pipeline closures: one recorded pipeline with everything it references
 * (docs/foz.md, "Closures")
 * ------------------------------------------------------------------------ */

/* The most stages a closure's pipeline may have for kiln_foz_closure_inspect. */
#define KILN_FOZ_MAX_STAGES 32

/* An archive read whole into memory, its objects found by tag and hash. Opaque. */
struct kiln_foz_index;

/* A pipeline of an index: its tag (graphics, compute or ray-tracing) and hash. */
struct kiln_foz_pipeline_ref {
    uint64_t tag;
    uint64_t hash;
};

/*
 * Reads every entry of `foz` from its first (and rewinds it afterwards) and
 * keeps each whole entry's payload, so that closures can be made from it.
 * Damaged entries are skipped (the reader logs them); the first of two
 * entries with one tag and hash wins. The JSON of every pipeline, sampler,
 * layout and render pass entry is parsed now.
 * @return 0 and the index in *out (free it with kiln_foz_index_destroy);
 * KILN_EPARSE when an object entry's JSON does not parse, with one error
 * line naming the archive, the tag and the hash; KILN_ECORRUPT when the
 * framing broke; KILN_ENOMEM or an I/O error. Not thread-safe on `foz`;
 * the index itself may be read from many threads at once.
 */
KILN_API int kiln_foz_index_create(struct kiln_foz *foz, struct kiln_foz_index **out);

/* Frees an index. NULL is a no-op. Not thread-safe: nothing else may use the index. */
KILN_API void kiln_foz_index_destroy(struct kiln_foz_index *idx);

/*
 * Lists the index's graphics, compute and ray-tracing pipelines, ordered by
 * tag and then hash. The array belongs to the index.
 * @return the number of pipelines, with the array in *out. Thread-safe.
 */
KILN_API size_t kiln_foz_index_pipelines(const struct kiln_foz_index *idx,
                                         const struct kiln_foz_pipeline_ref **out);

/*
 * Decodes the shader module `hash` of the index, as kiln_foz_decode_module.
 * @return 0 with the module in *module; KILN_ENOTFOUND when the archive has
 * no such module; kiln_foz_decode_module's errors. Thread-safe.
 */
KILN_API int kiln_foz_index_module(const struct kiln_foz_index *idx, uint64_t hash,
                                   struct kiln_foz_module *module);

/*
 * Makes the closure of pipeline `hash` of kind `tag`: its recorded JSON and
 * that of every object it references, found transitively (pipeline layout,
 * descriptor set layouts, immutable samplers with their YCbCr conversions,
 * render pass, base pipeline of a derivative, pipeline libraries), and the
 * hashes of every shader module those pipelines name, as one self-contained
 * byte string (docs/foz.md). The same pipeline recorded in two archives
 * gives the same bytes.
 * @return 0 with malloc'ed bytes in *bytes (free with kiln_foz_closure_free)
 * and their count in *size; KILN_ENOTFOUND when the pipeline, or an object
 * it references, is not in the archive (logged at debug with the missing
 * object: the caller reports it); KILN_EINVAL for a tag that is not a
 * pipeline; KILN_EPARSE for a reference that is not a hash; KILN_ENOMEM.
 * Thread-safe.
 */
KILN_API int kiln_foz_closure_make(const struct kiln_foz_index *idx, uint64_t tag, uint64_t hash,
                                   uint8_t **bytes, size_t *size);

/* Frees bytes made by kiln_foz_closure_make. NULL is a no-op. Thread-safe. */
KILN_API void kiln_foz_closure_free(uint8_t *bytes);

/* What kiln_foz_closure_inspect finds in a closure. Growable: set `size`
 * with KILN_FOZ_CLOSURE_INFO_INIT (docs/abi.md). */
struct kiln_foz_closure_info {
    size_t size;          /* sizeof, as KILN_FOZ_CLOSURE_INFO_INIT sets it */
    uint64_t tag;         /* KILN_FOZ_TAG_GRAPHICS_PIPELINE, _COMPUTE_ or _RAYTRACING_ */
    uint64_t hash;        /* the pipeline's Fossilize hash */
    uint32_t stage_count; /* its stages, in builder order (below) */
    uint32_t stages[KILN_FOZ_MAX_STAGES];  /* VkShaderStageFlagBits of each */
    uint64_t modules[KILN_FOZ_MAX_STAGES]; /* the shader module hash of each */
};
#define KILN_FOZ_CLOSURE_INFO_INIT KILN_STRUCT_INIT(kiln_foz_closure_info)

/*
 * Reads a closure's pipeline kind, hash and stages in builder order: the
 * pipeline's own recorded stages, then, depth-first, those of each pipeline
 * library it links, each library once (the order the builder expects its
 * stages in; a pipeline without libraries has its recorded order).
 * @return 0; KILN_EFORMAT when the bytes are not a kiln Fossilize closure
 * of a version this build reads; KILN_EPARSE when it is malformed;
 * KILN_ERANGE for more than KILN_FOZ_MAX_STAGES stages; KILN_ENOMEM;
 * KILN_EINVAL for NULL or an info whose size is refused (nothing written).
 * Thread-safe.
 */
KILN_API int kiln_foz_closure_inspect(const void *bytes, size_t size,
                                      struct kiln_foz_closure_info *info);

/*
 * The key a whole pipeline is stored under: XXH3-128 (kiln_hash128) of
 * "foz-pipeline", the closure's bytes, and for each of its `n` stage
 * modules (in stage order) the module's word count and the XXH3-128 of its
 * SPIR-V. So the same pipeline from two archives is one key, and a
 * different module under the same Fossilize hash is another.
 * @return 0 with the key in *key; KILN_ENOMEM. Thread-safe.
 */
KILN_API int kiln_foz_pipeline_key(const void *closure, size_t size,
                                   const struct kiln_foz_module *modules, uint32_t n,
                                   struct kiln_key *key);

/* ---------------------------------------------------------------------------
 * Recorded state checked before it reaches a driver (docs/foz.md,
 * "Recorded state is checked")
 * Thread safety for this section: thread-safe (pure functions).
 * ------------------------------------------------------------------------ */

/* The device limits the recorded-state check compares counts with
 * (VkPhysicalDeviceLimits' names in kiln_foz_limit_name). */
enum kiln_foz_limit {
    KILN_FOZ_LIMIT_VERTEX_INPUT_ATTRIBUTES,
    KILN_FOZ_LIMIT_VERTEX_INPUT_BINDINGS,
    KILN_FOZ_LIMIT_VERTEX_INPUT_ATTRIBUTE_OFFSET,
    KILN_FOZ_LIMIT_VERTEX_INPUT_BINDING_STRIDE,
    KILN_FOZ_LIMIT_COLOR_ATTACHMENTS,
    KILN_FOZ_LIMIT_BOUND_DESCRIPTOR_SETS,
    KILN_FOZ_LIMIT_VIEWPORTS,
    KILN_FOZ_LIMIT_PUSH_CONSTANTS_SIZE,
    KILN_FOZ_LIMIT_TESSELLATION_PATCH_SIZE,
    KILN_FOZ_LIMIT_SAMPLER_ANISOTROPY, /* the float's whole part */
    KILN_FOZ_LIMIT_COUNT
};

/* Limits to check recorded counts against. `device`: they are a device's
 * (the refusal says "the device's"), else kiln's bounds. */
struct kiln_foz_limits {
    uint32_t value[KILN_FOZ_LIMIT_COUNT];
    bool device;
};

/* Fills *l with kiln's bounds: for use where no device is known (the
 * import), each far above what any device reports, so that nothing a
 * device could build is refused (docs/foz.md has the table). */
KILN_API void kiln_foz_limits_bound(struct kiln_foz_limits *l);

/* Fills *l with the least the Vulkan specification lets a device report
 * (marked as a device's): the strictest limits a check can meet. */
KILN_API void kiln_foz_limits_minimum(struct kiln_foz_limits *l);

/* @return the VkPhysicalDeviceLimits name of a limit ("maxColorAttachments"). */
KILN_API const char *kiln_foz_limit_name(enum kiln_foz_limit limit);

/*
 * Checks a closure's recorded state, as the builders would hand it to a
 * driver, against the structure rules of the Vulkan specification and
 * the counts in `lim` (NULL: kiln_foz_limits_bound): enum values, handles
 * a pipeline needs, state blocks it needs, array lengths against their
 * counts, indices inside their arrays, entry points and specialization
 * maps; for the pipeline, every library it links, and the objects they
 * reference. Needs no device.
 * @return 0 when it passes; KILN_EFORMAT with one sentence naming the
 * broken rule in `why` (`cap` bytes, may be NULL) when it does not, or
 * when the bytes are not a closure. Thread-safe.
 */
KILN_API int kiln_foz_closure_check(const void *closure, size_t size,
                                    const struct kiln_foz_limits *lim, char *why, size_t cap);

#if defined(KILN_STATE_KINDS)
/*
 * Makes the program of pipeline `ref` of an index, as `kiln import foz`
 * stores whole pipelines: named "<hash>.graphics" (or .compute,
 * .raytracing); one stage per recorded stage, in recorded order, with the
 * module's SPIR-V, the recorded entry point and specialization constants;
 * state kind KILN_STATE_FOZ with the pipeline's closure as state bytes;
 * key kiln_foz_pipeline_key. Declared once the core's programs carry state.
 * @return 0 and the program in *out (free it with kiln_program_destroy);
 * kiln_foz_closure_make's errors; KILN_ENOTFOUND for a module the archive
 * lacks; KILN_EPARSE for malformed specialization data; KILN_ENOMEM.
 * Thread-safe.
 */
KILN_API int kiln_foz_pipeline_program(const struct kiln_foz_index *idx,
                                       const struct kiln_foz_pipeline_ref *ref,
                                       struct kiln_program **out);
#endif

/* ---------------------------------------------------------------------------
 * The whole pipelines of one or more archives (kiln import foz, kiln
 * prepare --corpus A.foz B.foz ...)
 * ------------------------------------------------------------------------ */

/* The pipeline kinds of an archive (Fossilize's graphics, compute and
 * ray-tracing pipeline tags), for per-kind counts. */
enum kiln_foz_kind {
    KILN_FOZ_KIND_GRAPHICS = 0,
    KILN_FOZ_KIND_COMPUTE = 1,
    KILN_FOZ_KIND_RAYTRACING = 2,
    KILN_FOZ_KIND_COUNT = 3,
};

/* @return the kind of a pipeline tag (KILN_FOZ_KIND_COUNT for another tag).
 * Thread-safe. */
KILN_API enum kiln_foz_kind kiln_foz_kind_of(uint64_t tag);

/* @return "graphics", "compute", "raytracing" (or "unknown"), a static
 * string. Thread-safe. */
KILN_API const char *kiln_foz_kind_name(enum kiln_foz_kind kind);

/* The pipelines of several archives, de-duplicated by
 * kiln_foz_pipeline_key. Opaque. */
struct kiln_foz_pipelines;

/* What kiln_foz_pipelines_open found, in all archives or in one. Growable:
 * set `size` with KILN_FOZ_PIPELINES_STATS_INIT (docs/abi.md). Inside
 * kiln_foz_pipelines_report and kiln_foz_replay_report it is filled whole,
 * `size` included. */
struct kiln_foz_pipelines_stats {
    size_t size;                              /* sizeof, as the INIT macro sets it */
    uint64_t found[KILN_FOZ_KIND_COUNT];      /* pipeline entries met */
    uint64_t unique[KILN_FOZ_KIND_COUNT];     /* in the set (first met in this archive) */
    uint64_t duplicates[KILN_FOZ_KIND_COUNT]; /* same key as one met before: left out */
    uint64_t unreadable[KILN_FOZ_KIND_COUNT]; /* missing object or module, or bad record */
    /* Library parts with no shader stage of their own (a graphics pipeline
     * library's vertex-input or fragment-output part): left out of the set,
     * since a kiln program has at least one stage; each is built inside
     * every pipeline that links it. */
    uint64_t library_parts[KILN_FOZ_KIND_COUNT];
    char first_unreadable[192]; /* the first unreadable one and why ("" none) */
    /* Recorded state that breaks a rule of the Vulkan specification or
     * kiln's bounds (kiln_foz_closure_check): left out, one warning line
     * each naming the rule. */
    uint64_t refused[KILN_FOZ_KIND_COUNT];
    char first_refused[256]; /* the first refused one and the rule ("" none) */
    /* What the archives' reader met (kiln_foz_stats): */
    uint64_t entries_skipped; /* damaged entries of any kind, skipped (one warning line each) */
    uint64_t resyncs;         /* times the reader searched forward for the next entry */
    uint64_t skipped_bytes;   /* bytes those searches skipped */
    bool truncated;           /* a cut-off last entry was ignored (as the format says) */
};
#define KILN_FOZ_PIPELINES_STATS_INIT KILN_STRUCT_INIT(kiln_foz_pipelines_stats)

/* One pipeline of the set. */
struct kiln_foz_pipelines_entry {
    size_t archive;      /* the archive it was first met in (index into the paths) */
    uint64_t tag;        /* KILN_FOZ_TAG_GRAPHICS_PIPELINE, _COMPUTE_ or _RAYTRACING_ */
    uint64_t hash;       /* its Fossilize hash */
    struct kiln_key key; /* kiln_foz_pipeline_key: what the cache stores it under */
};

/*
 * Reads the `n` archives at `paths` (each whole, kiln_foz_index_create) and
 * lists their graphics, compute and ray-tracing pipelines in archive order,
 * then tag and hash order, each key once: a pipeline whose
 * kiln_foz_pipeline_key was met before (in this or an earlier archive) is
 * counted as a duplicate. A pipeline whose closure cannot be made (an
 * object or module it references is missing) or whose record is malformed
 * is counted unreadable, with one warning line naming the archive, the
 * pipeline and why; the others go on. The archives are kept in memory
 * until kiln_foz_pipelines_destroy.
 * @return 0 and the set in *out; KILN_EINVAL for no paths; for an archive
 * that cannot be read (KILN_EFORMAT: not a Fossilize archive of a version
 * kiln reads; KILN_EPARSE: an object's JSON does not parse; an I/O error)
 * its error, with one error line naming the file; KILN_ENOMEM.
 * Thread safety: any number of opens may run at once.
 */
KILN_API int kiln_foz_pipelines_open(const char *const *paths, size_t n,
                                     struct kiln_foz_pipelines **out);

/* @return the number of pipelines in the set (distinct keys). Thread-safe. */
KILN_API size_t kiln_foz_pipelines_count(const struct kiln_foz_pipelines *fp);

/* @return the number of archives the set was opened from. Thread-safe. */
KILN_API size_t kiln_foz_pipelines_archives(const struct kiln_foz_pipelines *fp);

/* @return the path of archive `a` as given to open (NULL past the end).
 * Thread-safe; valid for the set's life. */
KILN_API const char *kiln_foz_pipelines_path(const struct kiln_foz_pipelines *fp, size_t a);

// clang-format off
/* @return pipeline i of the set (NULL past the end). Thread-safe; valid
 * for the set's life. */
KILN_API const struct kiln_foz_pipelines_entry *kiln_foz_pipelines_get(
    const struct kiln_foz_pipelines *fp, size_t i);
// clang-format on

/*
 * Fills *stats with the counts of every archive together (`archive` ==
 * SIZE_MAX) or of archive `archive` alone, as far as stats->size covers
 * (a refused size: one error line, nothing written). Thread-safe.
 */
KILN_API void kiln_foz_pipelines_get_stats(const struct kiln_foz_pipelines *fp, size_t archive,
                                           struct kiln_foz_pipelines_stats *stats);

#if defined(KILN_STATE_KINDS)
/*
 * Makes program i of the set, as kiln_foz_pipeline_program makes it from
 * its first archive: state kind KILN_STATE_FOZ, stages in recorded order,
 * key kiln_foz_pipelines_get(fp, i)->key.
 * @return 0 and the program in *out (free with kiln_program_destroy);
 * KILN_EINVAL past the end; kiln_foz_pipeline_program's errors, with one
 * warning line naming the pipeline. Thread-safe.
 */
KILN_API int kiln_foz_pipelines_load(const struct kiln_foz_pipelines *fp, size_t i,
                                     struct kiln_program **out);

/*
 * Fills *src with a program source of the set's pipelines
 * (kiln_foz_pipelines_load), with the stamp KILN_FOZ_STAMP whatever the
 * translator. Its programs are of state kind KILN_STATE_FOZ: give
 * kiln_prepare a builder of that kind (kiln_foz_kiln_builder_create).
 * `fp` must outlive every use of *src. Loads are thread-safe.
 */
KILN_API void kiln_foz_pipelines_source(const struct kiln_foz_pipelines *fp,
                                        struct kiln_program_source *src);

/* What kiln_foz_pipelines_import did with one archive's pipelines. An
 * element of an array the library fills at the caller's stride
 * (kiln_foz_pipelines_import_sized, docs/abi.md "Arrays"): `size` says how
 * much of it this library wrote. */
struct kiln_foz_pipelines_report {
    size_t size;                            /* the bytes written: min(stride, this library's) */
    struct kiln_foz_pipelines_stats found;  /* what the open found (unique, duplicates, ...) */
    uint64_t imported[KILN_FOZ_KIND_COUNT]; /* stored by this call */
    uint64_t present[KILN_FOZ_KIND_COUNT];  /* skipped: the key was in the cache already */
    uint64_t invalid[KILN_FOZ_KIND_COUNT];  /* skipped: a stage the SPIR-V validator refuses,
                                               or too large to store */
    char first_invalid[320];                /* the first invalid one and why ("" none) */
    uint64_t spirv_bytes;                   /* SPIR-V of the imported pipelines */
    uint64_t packed_bytes;                  /* their payloads as stored */
    /* Of imported: pipelines with a stage the validator refuses but that
     * parses (recorded from a working application, so stored: see
     * kiln_foz_pipelines_import). */
    uint64_t recorded_invalid[KILN_FOZ_KIND_COUNT];
};

/*
 * Stores every pipeline of `fp` in `c` (opened with KILN_FOZ_STAMP) as
 * kiln_foz_pipelines_load makes it: state kind KILN_STATE_FOZ, stages
 * packed with KILN_CODEC_KILN (and kiln_cache_dict(c)), under its key.
 * Keys already present are skipped, so a re-import adds nothing. Every
 * stage is checked first (kiln_vk_validate_spirv). The archive recorded
 * them from a working application, so a stage the validator refuses but
 * that parses (kiln_vk_check_spirv_structure) is stored anyway, not marked
 * KILN_PAYLOAD_VALIDATED, with one warning line naming the archive, the
 * pipeline, the module and the validator's message, and counted in
 * recorded_invalid. A pipeline with a stage that does not parse, or one
 * over KILN_PACK_MAX_SPIRV_BYTES, is not stored, with one warning line
 * naming the archive, the pipeline, the module and the reason, and the
 * others go on. Each pipeline is counted in
 * the report of the archive it was first met in: `reports` has
 * kiln_foz_pipelines_archives(fp) elements, each filled in every case.
 * The cache is synced at the end.
 * `report_size` is sizeof(struct kiln_foz_pipelines_report) as the
 * caller's headers know it: the stride of `reports` (docs/abi.md,
 * "Arrays"); call it through kiln_foz_pipelines_import, which passes it.
 * `progress` (may be NULL) is called as kiln_cache_set_progress's is:
 * "import", the pipelines looked at and kiln_foz_pipelines_count(fp), from
 * the calling thread, at most ten times a second, and once at the end
 * (done == total) when the import did not stop.
 * @return 0; KILN_EINVAL for a NULL argument, a read-only cache or a
 * report_size below a size_t; a cache
 * error (a failed put or sync, one error line), which stops the import
 * (what was stored before it is synced); KILN_ENOMEM. Not thread-safe on
 * `c`.
 */
KILN_API int kiln_foz_pipelines_import_sized(struct kiln_cache *c,
                                             const struct kiln_foz_pipelines *fp,
                                             size_t report_size,
                                             struct kiln_foz_pipelines_report *reports,
                                             kiln_cache_progress_fn progress, void *user);
/* kiln_foz_pipelines_import_sized with the caller's stride and no progress. */
static inline int kiln_foz_pipelines_import(struct kiln_cache *c,
                                            const struct kiln_foz_pipelines *fp,
                                            struct kiln_foz_pipelines_report *reports)
{
    return kiln_foz_pipelines_import_sized(c, fp, sizeof(struct kiln_foz_pipelines_report), reports,
                                           NULL, NULL);
}
/* kiln_foz_pipelines_import_sized with the caller's stride. Thread safety:
 * as kiln_foz_pipelines_import_sized. */
static inline int kiln_foz_pipelines_import_progress(struct kiln_cache *c,
                                                     const struct kiln_foz_pipelines *fp,
                                                     struct kiln_foz_pipelines_report *reports,
                                                     kiln_cache_progress_fn progress, void *user)
{
    return kiln_foz_pipelines_import_sized(c, fp, sizeof(struct kiln_foz_pipelines_report), reports,
                                           progress, user);
}
#endif

/* Frees the set and the archives it holds. NULL is a no-op. Not
 * thread-safe: nothing else may use the set or a source over it. */
KILN_API void kiln_foz_pipelines_destroy(struct kiln_foz_pipelines *fp);

/* ---------------------------------------------------------------------------
 * Replaying archives in-process (docs/foz.md, "Replaying in-process"):
 * every recorded pipeline built on the application's device or kiln's
 * ------------------------------------------------------------------------ */

/* What kiln_foz_replay replays, and on what. Growable: set `size` with
 * KILN_FOZ_REPLAY_OPTIONS_INIT. */
struct kiln_foz_replay_options {
    size_t size;
    /* The archives (kiln_foz_pipelines_open: each pipeline key once). Required. */
    const char *const *paths;
    size_t npaths;
    /* The device to build on: a context over the application's own device
     * (kiln_vk_create with kiln_vk_options.external), or one of kiln's.
     * NULL: kiln makes a context of its own for the call (kiln_vk_create,
     * asking for KILN_FOZ_DEVICE_EXTENSIONS where the device has them) and
     * destroys it at the end. */
    struct kiln_vk *vk;
    /* Threads that build at once: 0 or 1 builds on the calling thread. */
    unsigned workers;
    /* A builder of kind KILN_STATE_FOZ to build with (the application's
     * own); NULL: kiln's Fossilize builder (kiln_foz_kiln_builder_create),
     * made and destroyed by the call. */
    const struct kiln_builder *builder;
};
#define KILN_FOZ_REPLAY_OPTIONS_INIT KILN_STRUCT_INIT(kiln_foz_replay_options)

/* What kiln_foz_replay did. Growable: set `size` with
 * KILN_FOZ_REPLAY_REPORT_INIT (or to sizeof); only what it covers is written. */
struct kiln_foz_replay_report {
    size_t size;
    struct kiln_foz_pipelines_stats found; /* what the archives held (kiln_foz_pipelines_open) */
    uint64_t pipelines;                    /* distinct pipelines replayed */
    uint64_t built[KILN_FOZ_KIND_COUNT];   /* built by the driver (then destroyed) */
    uint64_t skipped[KILN_FOZ_KIND_COUNT]; /* the device lacks what they need (KILN_ENOTSUP) */
    uint64_t failed[KILN_FOZ_KIND_COUNT];  /* a stage or the build failed */
    char first_problem[256];               /* the first skip or failure and why ("" none) */
    uint64_t ns;                           /* the call's wall time */
};
#define KILN_FOZ_REPLAY_REPORT_INIT KILN_STRUCT_INIT(kiln_foz_replay_report)

/*
 * Replays archives in-process, as Fossilize's replayer does: every
 * graphics, compute and ray-tracing pipeline of the archives (each key
 * once) is built on the device of `options->vk` through the builder (its
 * stages staged by kiln_vk_stage_module; the driver compiles them, and
 * the context's VkPipelineCache, the application's with an external
 * context, keeps the result) and then destroyed. A pipeline the device
 * cannot build (a missing extension or feature, a limit) is skipped, one
 * that fails is counted, each with a warning line, and the others go on.
 * @return 0 when every pipeline was tried (see the report for how each
 * fared); KILN_EINVAL for NULL options or report, no paths, a builder not
 * of KILN_STATE_FOZ or without build, or a size refused (docs/abi.md); kiln_foz_pipelines_open's
 * errors for an archive that cannot be read; kiln_vk_create's when no context can be made;
 * KILN_ENOMEM. *report is filled in every case.
 * Thread safety: any thread; several replays may run at once, also on one
 * context (kiln_vk is thread-safe for builds).
 */
KILN_API int kiln_foz_replay(const struct kiln_foz_replay_options *options,
                             struct kiln_foz_replay_report *report);

/* ---------------------------------------------------------------------------
 * Writing archives (docs/foz.md, "Writing")
 * ------------------------------------------------------------------------ */

/* The format version kiln writes (Fossilize's current one). */
#define KILN_FOZ_WRITE_VERSION 6

/* Entry flags for kiln_foz_writer_add: store the payload as it is instead
 * of deflating it (both carry a CRC32 of the stored bytes). */
#define KILN_FOZ_ENTRY_PLAIN 1u

/* An archive being written. Opaque. */
struct kiln_foz_writer;

/*
 * Starts an archive that kiln_foz_writer_finish puts at `path`. Until then
 * it is written through `io` (NULL: kiln_io_default()) to a new temporary
 * file in the same folder ("PATH.tmp-" and 16 hexadecimal digits, made with
 * KILN_IO_EXCL | KILN_IO_NOFOLLOW), and `path` itself is not touched; the
 * header is written now.
 * @return 0 and the writer in *out (free it with kiln_foz_writer_destroy,
 * which removes the temporary file of an unfinished writer); KILN_EINVAL
 * for an empty path; the I/O error of the open or the write (one error
 * line naming the file); KILN_ENOMEM.
 * Thread safety: a writer is not thread-safe; different writers may be
 * used on different threads at once.
 */
KILN_API int kiln_foz_writer_create(const struct kiln_io *io, const char *path,
                                    struct kiln_foz_writer **out);

/*
 * Starts an archive kept in memory (kiln_foz_writer_data reads it).
 * @return 0 and the writer in *out, or KILN_ENOMEM. Thread safety: as
 * kiln_foz_writer_create.
 */
KILN_API int kiln_foz_writer_create_memory(struct kiln_foz_writer **out);

/*
 * Appends one entry: tag, hash, the payload (`size` bytes) deflated or,
 * with KILN_FOZ_ENTRY_PLAIN in `flags`, stored plain, with the CRC32 of
 * the stored bytes and the payload's size. The writer remembers every tag
 * and hash it wrote with a digest of the payload, so that every hash in the
 * archive names one object.
 * @return 1 when written; 0 when the same payload was written under this
 * tag and hash before (nothing is written); KILN_EEXIST when another
 * payload was (nothing is written); KILN_ERANGE for a payload over what a
 * reader takes (256 MiB); KILN_EINVAL for unknown flags or a finished
 * writer; KILN_ENOMEM; or the I/O error of a failed write, which every
 * later call returns too. Thread safety: as kiln_foz_writer_create.
 */
KILN_API int kiln_foz_writer_add(struct kiln_foz_writer *w, uint64_t tag, uint64_t hash,
                                 const void *payload, size_t size, unsigned flags);

/*
 * What kiln_foz_writer_add would make of this entry, without writing.
 * @return 0 when the tag and hash were not written; 1 when they were with
 * the same payload; KILN_EEXIST when with another. Thread safety: as
 * kiln_foz_writer_create (reads only).
 */
KILN_API int kiln_foz_writer_lookup(const struct kiln_foz_writer *w, uint64_t tag, uint64_t hash,
                                    const void *payload, size_t size);

/* @return whether an entry of this tag and hash was written. Thread
 * safety: as kiln_foz_writer_lookup. Thread-safe as kiln_foz_writer_lookup (reads only). */
KILN_API bool kiln_foz_writer_has(const struct kiln_foz_writer *w, uint64_t tag, uint64_t hash);

/*
 * Encodes a shader module entry's payload: its JSON
 * (VkShaderModuleCreateInfo: codeSize, flags, and where the code is), a
 * NUL, and the `nwords` SPIR-V words in Fossilize's varint coding, as
 * kiln_foz_decode_module reads it back.
 * @return 0 with malloc'ed bytes in *payload (free with
 * kiln_foz_payload_free) and their count in *size; KILN_ERANGE for no
 * words; KILN_ENOMEM. (kiln_foz_writer_add refuses a payload over 256 MiB,
 * which no reader takes.) Thread-safe.
 */
KILN_API int kiln_foz_module_encode(uint64_t hash, const uint32_t *words, size_t nwords,
                                    uint32_t flags, uint8_t **payload, size_t *size);

/* Frees bytes made by kiln_foz_module_encode. NULL is a no-op. Thread-safe. */
KILN_API void kiln_foz_payload_free(uint8_t *payload);

/*
 * Appends a shader module entry (kiln_foz_module_encode, then
 * kiln_foz_writer_add with `entry_flags`).
 * @return as kiln_foz_writer_add, and kiln_foz_module_encode's errors.
 * Thread safety: as kiln_foz_writer_create.
 */
KILN_API int kiln_foz_writer_add_module(struct kiln_foz_writer *w, uint64_t hash,
                                        const uint32_t *words, size_t nwords, uint32_t flags,
                                        unsigned entry_flags);

/* @return the entries written so far. Thread safety: as
 * kiln_foz_writer_lookup. */
KILN_API uint64_t kiln_foz_writer_entries(const struct kiln_foz_writer *w);

/*
 * Ends the archive. A file writer syncs its temporary file, renames it over
 * the path given at create (replacing what was there) and syncs the folder
 * (a failure of that last sync is only logged: the archive is whole). A
 * memory writer keeps its bytes for kiln_foz_writer_data.
 * @return 0 with the archive's size in *bytes (may be NULL); the first
 * error of any earlier call, or the error of the sync or rename (the
 * temporary file is removed then; the path is as it was), each with one
 * error line; KILN_EINVAL when finished already. Thread safety: as
 * kiln_foz_writer_create.
 */
KILN_API int kiln_foz_writer_finish(struct kiln_foz_writer *w, uint64_t *bytes);

/*
 * The bytes of a memory writer (all written so far; the whole archive after
 * finish). They belong to the writer and change with the next add.
 * @return them with their count in *size; NULL and 0 for a file writer.
 * Thread safety: as kiln_foz_writer_lookup.
 */
KILN_API const uint8_t *kiln_foz_writer_data(const struct kiln_foz_writer *w, size_t *size);

/*
 * Frees a writer. The temporary file of a file writer that was not
 * finished is removed, so a failed export leaves no partial archive. NULL
 * is a no-op.
 * Not thread-safe on `w`.
 */
KILN_API void kiln_foz_writer_destroy(struct kiln_foz_writer *w);

/* What kiln_foz_export wrote and left out. Growable: set `size` with
 * KILN_FOZ_EXPORT_REPORT_INIT (or to sizeof); only what it covers is written. */
struct kiln_foz_export_report {
    size_t size;
    uint64_t programs;   /* records in the cache */
    uint64_t pipelines;  /* pipeline entries written for programs (graphics + compute +
                            ray tracing; a program whose pipeline was there already is
                            counted in `duplicates`, not here) */
    uint64_t graphics;   /* of those, graphics pipelines */
    uint64_t compute;    /* compute pipelines */
    uint64_t raytracing; /* ray-tracing pipelines */
    uint64_t builtin;    /* programs written of kiln's built-in shapes (KILN_STATE_BUILTIN) */
    uint64_t foz;        /* programs written of Fossilize state (KILN_STATE_FOZ) */
    uint64_t duplicates; /* programs whose pipeline, with the same content, was written already */
    uint64_t modules;    /* shader module entries written */
    uint64_t objects;    /* other entries written: samplers, set layouts, pipeline layouts,
                            render passes */
    uint64_t extra_pipelines;  /* base pipelines and libraries a closure names, written */
    uint64_t extra_dropped;    /* such pipelines left out: a module of theirs is in no program */
    uint64_t lone;             /* one-module built-in programs of a graphics stage: their module
                                  is written, they make no pipeline */
    uint64_t skipped;          /* programs not written (the four below) */
    uint64_t skipped_app;      /* KILN_STATE_APP: opaque bytes, no Fossilize form */
    uint64_t skipped_shape;    /* built-in stages that make no pipeline of kiln's shapes */
    uint64_t skipped_conflict; /* an object of the program has a hash written already for
                                  other content */
    uint64_t damaged;          /* records that did not load, parse, unpack or read as a closure */
    char skip_reason[192];     /* the first skip's reason (a clause), "" when none */
    uint64_t entries;          /* entries in the archive */
    uint64_t bytes;            /* the archive's size */
};
#if defined(__cplusplus)
#define KILN_FOZ_EXPORT_REPORT_INIT KILN_STRUCT_INIT(kiln_foz_export_report)
#else
#define KILN_FOZ_EXPORT_REPORT_INIT                   \
    {                                                 \
        .size = sizeof(struct kiln_foz_export_report) \
    }
#endif

/*
 * Writes the pipelines of cache `c` as a Fossilize stream archive at
 * `out_path` that Fossilize's replayer reads and replays (docs/foz.md,
 * "Exporting"). Every record is loaded and its payload split
 * (kiln_program_payload_parse_full); its stages are unpacked with the
 * cache's dictionary.
 * - KILN_STATE_FOZ programs: every object of the closure (samplers, set
 *   layouts, pipeline layouts, render passes, the pipeline, its base and
 *   libraries), each under its recorded hash and written once however many
 *   pipelines share it, and the stages' modules under their recorded
 *   hashes.
 * - KILN_STATE_BUILTIN programs (a compute stage, or vertex + fragment):
 *   the objects of kiln's own shape, as kiln/vk.h builds it: one set layout
 *   (binding 0 a storage buffer for every stage), a pipeline layout with
 *   KILN_VK_PUSH_CONSTANT_BYTES of push constants, and for graphics a
 *   render pass with one color attachment of KILN_VK_DEFAULT_COLOR_FORMAT,
 *   no vertex input, a triangle list, no depth, no blending, dynamic
 *   viewport and scissor; each stage's entry point and specialization
 *   constants. Their hashes are kiln_hash64 of the objects' content (the
 *   replayer uses hashes as names only and never recomputes them).
 * - KILN_STATE_APP programs are opaque: skipped and counted.
 * A record that does not load, or whose payload or closure does not read,
 * is counted in `damaged` with one warning line, and the others go on. The
 * archive is written beside `out_path` and renamed over it at the end
 * (kiln_foz_writer_create), so a failed export leaves no file behind.
 * Records are written in key order, so one cache gives one archive.
 * @return 0 when the archive was written (also when programs were skipped
 * or damaged: see *report, filled in every case); KILN_ENOTFOUND when the
 * cache has no program that makes a pipeline (nothing is written);
 * KILN_ECACHE_FILE, before anything is read or written, when `out_path` is
 * a file of c's folder or lies in the folder of any kiln cache
 * (kiln_cache_check_output); the I/O error of the archive or the cache;
 * KILN_ENOMEM.
 * Thread safety: uses `c` like kiln_cache_get (any thread, not beside a
 * close or rewrite).
 */
KILN_API int kiln_foz_export(struct kiln_cache *c, const char *out_path,
                             struct kiln_foz_export_report *report);

/* ---------------------------------------------------------------------------
 * Building a closure's pipeline on a VkDevice (declared when the Vulkan
 * headers were included before this one)
 * ------------------------------------------------------------------------ */
#if defined(VK_VERSION_1_0)

/* What a builder builds on. Growable: start from
 * KILN_FOZ_BUILDER_OPTIONS_INIT, then set what you have. */
struct kiln_foz_builder_options {
    size_t size;
    VkDevice device;                              /* required */
    PFN_vkGetDeviceProcAddr get_device_proc_addr; /* required */
    /* The API version the device was created for (the lower of the
     * instance's apiVersion and the device's); 0 means 1.0. */
    uint32_t api_version;
    /* The device extensions the device was created with. */
    const char *const *extensions;
    uint32_t extension_count;
    /* The features the device was created with: a VkPhysicalDeviceFeatures2
     * and, chained, any of VkPhysicalDeviceVulkan11/12/13Features,
     * VkPhysicalDeviceGraphicsPipelineLibraryFeaturesEXT,
     * VkPhysicalDeviceRayTracingPipelineFeaturesKHR. NULL: no feature is
     * checked (the driver judges). Read during create only. */
    const VkPhysicalDeviceFeatures2 *features;
    /* The device's maxRayRecursionDepth
     * (VkPhysicalDeviceRayTracingPipelinePropertiesKHR): a ray-tracing
     * pipeline asking more is skipped. 0: not checked. */
    uint32_t max_ray_recursion_depth;
    /* The device's limits: every closure is checked against them before
     * anything is made for it (kiln_foz_closure_check). NULL: kiln's bounds
     * (kiln_foz_limits_bound) and the structure rules only. Read during
     * create only. */
    const VkPhysicalDeviceLimits *limits;
    /* The allocation callbacks every object the builder makes is created
     * and destroyed with (kiln_vk_allocator of kiln's context); NULL: the
     * driver's own. Must outlive the builder. */
    const VkAllocationCallbacks *allocator;
};
#if defined(__cplusplus)
#define KILN_FOZ_BUILDER_OPTIONS_INIT KILN_STRUCT_INIT(kiln_foz_builder_options)
#else
#define KILN_FOZ_BUILDER_OPTIONS_INIT                   \
    {                                                   \
        .size = sizeof(struct kiln_foz_builder_options) \
    }
#endif

/* Fills *l from a device's VkPhysicalDeviceLimits. Thread-safe. */
KILN_API void kiln_foz_limits_from_vk(const VkPhysicalDeviceLimits *vk, struct kiln_foz_limits *l);

struct kiln_foz_builder;

/*
 * Makes a builder: it loads the device functions it needs and notes what
 * the device offers (api_version, extensions, features).
 * @return 0 and the builder in *out (destroy it with
 * kiln_foz_builder_destroy); KILN_EINVAL for a missing device or function
 * pointer; KILN_ENOTSUP when a core 1.0 entry point cannot be loaded;
 * KILN_ENOMEM.
 * Thread-safe (each call makes its own builder).
 */
KILN_API int kiln_foz_builder_create(const struct kiln_foz_builder_options *options,
                                     struct kiln_foz_builder **out);

/*
 * Builds a closure's pipeline into *pipeline (the caller's from then on).
 * The samplers (and YCbCr conversions), descriptor set layouts, pipeline
 * layout and render pass it references are made on first use and kept by
 * the builder for every later pipeline naming the same Fossilize hash.
 * `stages` are the pipeline's stages in the closure's builder order
 * (kiln_foz_closure_inspect), as kiln's core stages them: each names its
 * module, or chains a VkShaderModuleCreateInfo (maintenance5); its stage
 * bit must match the record. Entry point, flags, specialization constants
 * and the recorded stage pNext come from the closure. A derivative is built
 * without its base (the base is a hint only). `cache` may be
 * VK_NULL_HANDLE.
 * Pipeline libraries: the libraries a pipeline links (graphics pipeline
 * libraries, ray-tracing libraries) are built first, each once per call,
 * with their own recorded flags and state, their stages handed in after
 * the pipeline's own (the closure's builder order); they are destroyed
 * when the call returns, since the linked pipeline does not need them. A
 * pipeline that is itself a library is returned like any other.
 * @return 0 with the pipeline; KILN_ENOTSUP when the device lacks what the
 * pipeline needs (an extension such as VK_EXT_graphics_pipeline_library or
 * VK_KHR_ray_tracing_pipeline, a feature, a ray recursion depth), or when
 * its recorded state breaks a rule (kiln_foz_closure_check against the
 * device's limits, before anything is made: `why` is "KIND pipeline HASH:
 * refused: " and the rule), with the reason in `why`;
 * KILN_EVULKAN when a create call failed, KILN_EPARSE or KILN_EFORMAT for
 * a malformed closure, KILN_EINVAL for stages that do not match it, each
 * with one line in `why` (`cap` bytes, may be 0). Counted in
 * kiln_foz_builder_get_stats. Thread-safe: any number of threads may build at
 * once.
 */
KILN_API int kiln_foz_builder_build(struct kiln_foz_builder *b, const void *closure, size_t size,
                                    const VkPipelineShaderStageCreateInfo *stages,
                                    uint32_t stage_count, VkPipelineCache cache,
                                    VkPipeline *pipeline, char *why, size_t cap);

/* A flag of kiln_foz_build.flags: a probe (kiln/prep.h, KILN_BUILD_PROBE).
 * Every create of the build adds
 * VK_PIPELINE_CREATE_FAIL_ON_PIPELINE_COMPILE_REQUIRED_BIT, and the driver's
 * VK_PIPELINE_COMPILE_REQUIRED is answered KILN_ECOMPILE_REQUIRED. The
 * device must have pipelineCreationCacheControl enabled. */
#define KILN_FOZ_BUILD_NO_COMPILE 0x1u

/* One build (kiln_foz_builder_build_with): kiln_foz_builder_build's
 * arguments, flags, and the driver's feedback out. */
struct kiln_foz_build {
    size_t size; /* sizeof, as KILN_FOZ_BUILD_INIT sets it (docs/abi.md) */
    /* In: as kiln_foz_builder_build's arguments of the same names. */
    const void *closure;
    size_t closure_size;
    const VkPipelineShaderStageCreateInfo *stages;
    uint32_t stage_count;
    VkPipelineCache cache;
    uint32_t flags; /* KILN_FOZ_BUILD_* */
    char *why;      /* one line on failure (why_cap bytes; may be NULL) */
    size_t why_cap;
    /* Out: the pipeline, and the driver's creation feedback of it where the
     * device has it (Vulkan 1.3 or VK_EXT_pipeline_creation_feedback among
     * the options' extensions): valid, the pipeline cache held it (no
     * compile), the driver's time. */
    VkPipeline pipeline;
    bool feedback_valid;
    bool cache_hit;
    uint64_t driver_ns;
};
#define KILN_FOZ_BUILD_INIT KILN_STRUCT_INIT(kiln_foz_build)

/*
 * kiln_foz_builder_build with a growable request: flags in
 * (KILN_FOZ_BUILD_NO_COMPILE), the driver's feedback out.
 * @return as kiln_foz_builder_build; also KILN_ECOMPILE_REQUIRED for a
 * probe the driver answered VK_PIPELINE_COMPILE_REQUIRED (nothing made,
 * not counted as failed); KILN_EINVAL for NULL or a bad size.
 * Thread-safe, as kiln_foz_builder_build.
 */
KILN_API int kiln_foz_builder_build_with(struct kiln_foz_builder *b, struct kiln_foz_build *build);

/*
 * Destroys every object the builder made (not the pipelines it returned).
 * NULL is a no-op. No build may be running.
 * Not thread-safe: no build may be running.
 */
KILN_API void kiln_foz_builder_destroy(struct kiln_foz_builder *b);

#endif /* VK_VERSION_1_0 */

/* ---------------------------------------------------------------------------
 * What a builder counts, and the builder as one of kiln's builders: no
 * Vulkan type is needed here, so a caller without the Vulkan headers (the
 * kiln command) can use them.
 * ------------------------------------------------------------------------ */

/* The device extensions recorded pipelines may need beyond kiln's own
 * (pipeline libraries, the pNext structures and dynamic states the builder
 * knows, ray tracing and what it depends on), for
 * kiln_vk_options.extra_extensions or a device of the caller's. In three
 * parts, in this order, which the kiln builder's extensions_needed and
 * kiln bench replay rely on: the two library extensions, then those of the
 * pipeline state (the first KILN_FOZ_SHARED_EXTENSION_COUNT of them serve
 * compute pipelines too: samplers, descriptor indexing, subgroup sizes),
 * then the ray-tracing set, last, which only ray-tracing pipelines need
 * (KILN_FOZ_RAYTRACING_EXTENSION_COUNT of them). */
#define KILN_FOZ_DEVICE_EXTENSIONS                                                               \
    "VK_KHR_pipeline_library", "VK_EXT_graphics_pipeline_library",                               \
        "VK_KHR_sampler_ycbcr_conversion", "VK_EXT_sampler_filter_minmax",                       \
        "VK_EXT_custom_border_color", "VK_EXT_descriptor_indexing",                              \
        "VK_EXT_subgroup_size_control", "VK_KHR_multiview", "VK_KHR_create_renderpass2",         \
        "VK_KHR_depth_stencil_resolve", "VK_KHR_separate_depth_stencil_layouts",                 \
        "VK_EXT_vertex_attribute_divisor", "VK_KHR_vertex_attribute_divisor",                    \
        "VK_EXT_depth_clip_enable", "VK_EXT_transform_feedback",                                 \
        "VK_EXT_blend_operation_advanced", "VK_EXT_conservative_rasterization",                  \
        "VK_EXT_line_rasterization", "VK_KHR_line_rasterization", "VK_EXT_color_write_enable",   \
        "VK_EXT_provoking_vertex", "VK_EXT_depth_clip_control", "VK_EXT_extended_dynamic_state", \
        "VK_EXT_extended_dynamic_state2", "VK_EXT_extended_dynamic_state3",                      \
        "VK_EXT_vertex_input_dynamic_state", "VK_EXT_discard_rectangles",                        \
        "VK_EXT_sample_locations", "VK_KHR_fragment_shading_rate", "VK_NV_clip_space_w_scaling", \
        "VK_EXT_mesh_shader", "VK_NV_mesh_shader", "VK_KHR_deferred_host_operations",            \
        "VK_KHR_acceleration_structure", "VK_KHR_ray_tracing_pipeline"

/* How many of KILN_FOZ_DEVICE_EXTENSIONS, after the two library ones,
 * compute pipelines may need as well. */
#define KILN_FOZ_SHARED_EXTENSION_COUNT 5

/* How many of KILN_FOZ_DEVICE_EXTENSIONS, at its end, are the ray-tracing set. */
#define KILN_FOZ_RAYTRACING_EXTENSION_COUNT 3

/* A builder of closures' pipelines on one device. Opaque. */
struct kiln_foz_builder;

/* What it builds on (declared above, with the Vulkan headers). */
struct kiln_foz_builder_options;

/* What a builder has done, per kind (kiln_foz_builder_get_stats). Growable:
 * set `size` with KILN_FOZ_BUILDER_STATS_INIT (docs/abi.md). */
struct kiln_foz_builder_stats {
    size_t size; /* sizeof, as the INIT macro sets it */
    uint64_t built[KILN_FOZ_KIND_COUNT];
    uint64_t skipped[KILN_FOZ_KIND_COUNT]; /* the device lacks what it needs */
    uint64_t failed[KILN_FOZ_KIND_COUNT];  /* malformed, or the driver refused */
    uint64_t objects;                      /* shared objects made (samplers, layouts, passes) */
    uint64_t derivatives_standalone;       /* derivatives built without their base */
};
#define KILN_FOZ_BUILDER_STATS_INIT KILN_STRUCT_INIT(kiln_foz_builder_stats)

/* Copies the builder's counters into *stats, as far as stats->size covers
 * (a refused size: one error line, nothing written). Thread-safe. */
KILN_API void kiln_foz_builder_get_stats(const struct kiln_foz_builder *b,
                                         struct kiln_foz_builder_stats *stats);

/* ---------------------------------------------------------------------------
 * The builder as one of kiln's builders (kiln/prep.h: struct kiln_builder,
 * state kind KILN_STATE_FOZ); declared once the core has builders.
 * `options` (struct kiln_foz_builder_options) needs the Vulkan headers; NULL
 * does not.
 * ------------------------------------------------------------------------ */
#if defined(KILN_STATE_KINDS)

/*
 * Fills *out with a builder of kind KILN_STATE_FOZ for
 * kiln_prepare_options.builders / kiln_start_options.builders: each
 * request's state bytes are a closure, its stages the closure's stages in
 * order. The Fossilize builder behind it is made on the first request, on
 * that request's device: from `options` where it names a device (its
 * extensions and features are then used as given), else from the request
 * (device, vkGetDeviceProcAddr) and kiln_vk_get_info of its context (API
 * version, maintenance5, dynamic rendering) with the core
 * features the physical device has, robustBufferAccess aside (what kiln's
 * context enables), and those of the 1.3 structure it needs
 * (dynamicRendering as kiln_vk_get_info says); `features` in `options`, when
 * given, replace them. Every later request must be on
 * the same device until the phase ends (kiln_builder.finish, set here,
 * releases it; the next phase may use another device). `options` is copied; what it points to
 * (extensions, features) must outlive the builder.
 * @return 0, KILN_EINVAL for a NULL `out`, or KILN_ENOMEM. Free with
 * kiln_foz_kiln_builder_destroy after the last prepare or start using it.
 * Thread-safe (each call makes its own).
 */
KILN_API int kiln_foz_kiln_builder_create(const struct kiln_foz_builder_options *options,
                                          struct kiln_builder *out);

/*
 * Destroys what kiln_foz_kiln_builder_create made (the Fossilize builder's
 * shared objects included) and clears *builder. A cleared one is a no-op.
 * Not thread-safe: no prepare, warm start or replay may be using it.
 */
KILN_API void kiln_foz_kiln_builder_destroy(struct kiln_builder *builder);

/*
 * Copies what the kiln builder's Fossilize builders counted, over every
 * pipeline phase it served (each phase ends with kiln_builder.finish, which
 * destroys that phase's Fossilize builder and its shared objects while the
 * device lives). Thread-safe.
 */
KILN_API void kiln_foz_kiln_builder_stats(const struct kiln_builder *builder,
                                          struct kiln_foz_builder_stats *stats);

/* @return the Fossilize builder behind a kiln builder made above, or NULL
 * before its first request and after a phase's end (for
 * kiln_foz_builder_get_stats). Thread-safe. */
KILN_API struct kiln_foz_builder *kiln_foz_kiln_builder_get(const struct kiln_builder *builder);

#endif /* KILN_STATE_KINDS */

#ifdef __cplusplus
}
#endif

#endif /* KILN_TOOLS_FOZ_H */
