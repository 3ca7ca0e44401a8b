/*
 * foz_writer.h - Fossilize archives written by the tests themselves, from
 * SPIR-V of kiln's generator, for the cases that need a real archive where
 * the shared corpus (../shared/corpus/foz) is not there (a bare clone).
 */
#ifndef KILN_FOZ_WRITER_H
#define KILN_FOZ_WRITER_H

#include "kiln_test.h"

/* Ends the case as skipped (one "skipped:" line, exit 77) when `expr`, a
 * writer's return, is KILN_ENOTSUP (no shaderc to make SPIR-V with), as
 * failed (exit 1, the call named) on any other error. */
#define FW_NEED(expr) fw_need((expr), __FILE__, __LINE__, #expr)
void fw_need(int rc, const char *file, int line, const char *what);

/*
 * Writes an archive (format version 6) to `path` of whole pipelines, as an
 * application records them: a descriptor set layout (one storage buffer at
 * set 0, binding 0), a pipeline layout with it and 16 bytes of push
 * constants, a render pass with one RGBA8 color attachment, then
 * `compute` compute pipelines and `graphics` graphics pipelines (vertex +
 * fragment, no vertex input, every fixed-function state block) of kiln's
 * generator, each module once. Pipeline hashes are `first_hash` + k, so two
 * archives with the same `first_hash` and counts record the same
 * pipelines. Each compute pipeline has one specialization constant (id 0,
 * 4 bytes) its module does not use. Needs shaderc.
 * @return 0, KILN_ENOTSUP in a build without shaderc, or the error (a line
 * on stderr).
 */
int fw_write_pipelines(const char *path, unsigned compute, unsigned graphics, uint64_t first_hash);

/*
 * Writes an archive (format version 6) to `path` of three ray-tracing
 * pipelines with real stages (GLSL with GL_EXT_ray_tracing compiled for
 * Vulkan 1.2 / SPIR-V 1.4): a layout with an acceleration structure at
 * binding 0 and a storage image at binding 1; pipeline `hash` with a
 * raygen, a miss and a closest-hit stage in a general, a general and a
 * triangles-hit group; `hash` + 1, a library (LIBRARY flag, a library
 * interface) with the miss and hit groups; `hash` + 2, a raygen pipeline
 * linking `hash` + 1 (libraryInfo). Recursion depth 1 everywhere. Needs
 * shaderc.
 * @return as fw_write_pipelines.
 */
int fw_write_raytracing(const char *path, uint64_t hash);

/*
 * Writes an archive (format version 6) to `path` of graphics pipeline
 * libraries (VK_EXT_graphics_pipeline_library) over fw_write_pipelines'
 * objects and one generated vertex + fragment pair: two sets of the four
 * parts (vertex input interface, pre-rasterization with the vertex stage,
 * fragment shader, fragment output; hashes first_hash + 8 * set + 0..3),
 * each part recorded as a pipeline of its own with the LIBRARY flag, and
 * per set a pipeline linking the four (first_hash + 8 * set + 4). Set 1's
 * parts retain link-time optimization info and its link asks for link-time
 * optimization. With `drop_part`, set 0's vertex-input part is left out, so
 * the set-0 link names a library the archive lacks. Needs shaderc.
 * @return as fw_write_pipelines.
 */
int fw_write_gpl(const char *path, uint64_t first_hash, bool drop_part);

/* How many graphics pipelines fw_write_state_extensions writes. */
#define FW_STATE_EXTENSION_PIPELINES 5

/*
 * Writes an archive (format version 6) to `path` of graphics pipelines
 * over fw_write_pipelines' objects and one generated vertex + fragment
 * pair, each using pNext structures or dynamic states of device
 * extensions (hashes first_hash + 0..4): 0, a depth clip state
 * (VK_EXT_depth_clip_enable), a last-vertex provoking mode
 * (VK_EXT_provoking_vertex) and rasterization stream 0
 * (VK_EXT_transform_feedback); 1, a [-1, 1] depth clip control
 * (VK_EXT_depth_clip_control) and color write enables
 * (VK_EXT_color_write_enable); 2, rectangular lines on a line list
 * (VK_EXT_line_rasterization); 3, dynamic states of extended dynamic state
 * 1, 2 (logic op too) and 3 (polygon mode, depth clip enable, provoking
 * vertex mode), color write enable and vertex input; 4, an instance-rate
 * binding with divisor 2 (VK_EXT_vertex_attribute_divisor). Needs shaderc.
 * @return as fw_write_pipelines.
 */
int fw_write_state_extensions(const char *path, uint64_t first_hash);

/*
 * The archive a case uses: `name` in the shared corpus's foz/sascha-willems
 * when it is there (path filled with it), else one fw_write_pipelines makes
 * once per process under $TMPDIR (removed at exit): whole pipelines (their
 * layouts and render pass too), one compute program and two graphics
 * pairs. Not thread-safe.
 * @return 0 or the error.
 */
int fw_archive(const char *name, char *path, size_t cap);

/* One module fw_write_modules writes. */
struct fw_module {
    const uint32_t *words;
    size_t nwords;
};

/*
 * Writes an archive (format version 6) to `path` of the `n` modules given,
 * whatever their words hold (malformed SPIR-V too), each followed by a
 * compute pipeline entry naming it, so that every one is a compute module.
 * A module's hash is kiln_hash64 of its words; each is stored in hashes[i]
 * when `hashes` is not NULL. Modules deflated, pipelines plain, each entry
 * with its CRC. Needs no shaderc.
 * @return 0 or the error (a line on stderr).
 */
int fw_write_modules(const char *path, const struct fw_module *mods, size_t n, uint64_t *hashes);

/*
 * Writes an archive (format version 6) to `path` of whole compute
 * pipelines, one per module given, whatever its words hold (malformed
 * SPIR-V too): fw_write_pipelines' layout objects, then each module and a
 * compute pipeline in that layout naming it (hash `first_hash` + i). Module
 * hashes as fw_write_modules'. Needs no shaderc.
 * @return 0 or the error (a line on stderr).
 */
int fw_write_module_pipelines(const char *path, const struct fw_module *mods, size_t n,
                              uint64_t first_hash);

/* The objects fw_write_pipelines' pipelines name: a set layout (one
 * storage buffer), a pipeline layout with it and 16 bytes of push
 * constants, a render pass of one RGBA8 colour attachment in one subpass. */
#define FW_SET_LAYOUT  UINT64_C(0x5e7100000000001)
#define FW_PIPE_LAYOUT UINT64_C(0x1a7000000000001)
#define FW_RENDER_PASS UINT64_C(0x9a5500000000001)

/* An archive a case crafts entry by entry (fw_crafted_begin). */
struct fw_crafted {
    struct kiln_foz_writer *w;
    uint64_t vert, frag; /* the hashes of its vertex and fragment modules */
    int rc;              /* the first failure */
};

/*
 * Begins an archive at `path` with fw_write_pipelines' objects (FW_*) and
 * the vertex and fragment modules of generated program 1; the case adds
 * what it wants with fw_crafted_add and ends with fw_crafted_finish.
 * Needs shaderc. @return 0, KILN_ENOTSUP without shaderc, or the error.
 */
int fw_crafted_begin(const char *path, struct fw_crafted *a);

/* Adds an entry (deflated) of `tag` and `hash` whose payload is `json`. */
void fw_crafted_add(struct fw_crafted *a, unsigned tag, uint64_t hash, const char *json);

/* Writes the archive out. @return 0 or the first error (a line on stderr). */
int fw_crafted_finish(struct fw_crafted *a, const char *path);

#endif /* KILN_FOZ_WRITER_H */
