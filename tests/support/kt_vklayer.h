/*
 * kt_vklayer.h - the Khronos validation layer around the Vulkan work a test
 * does (POSIX: it goes through the environment the loader reads): turned
 * on for every instance made in this process, and in the programs it
 * starts, until kt_validation_end, with its errors written to a log the
 * test then reads.
 */
#ifndef KILN_KT_VKLAYER_H
#define KILN_KT_VKLAYER_H

#include <stdbool.h>
#include <stddef.h>

/* @return whether the layer is installed (Debian: vulkan-validationlayers). */
bool kt_have_validation_layer(void);

/*
 * Sends the layer's errors (errors only) of every Vulkan instance made from
 * now on, in this process and the programs it starts, to `log`, a file in
 * `dir` (its path goes to `log`), until kt_validation_end.
 * @return false, with nothing set, when the layer is not installed.
 */
bool kt_validation_begin(const char *dir, char *log, size_t cap);

/* Instances made from now on run without the layer again. */
void kt_validation_end(void);

/* @return how often `text` occurs in the file at `path` (its first 4 MiB);
 * 0 when it cannot be read. */
int kt_occurrences(const char *path, const char *text);

/* @return the errors the layer wrote to `log`; the log's start is printed
 * when there are some. */
int kt_validation_errors(const char *log);

#endif /* KILN_KT_VKLAYER_H */
