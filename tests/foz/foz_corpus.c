/*
 * foz_corpus.c - lists the shared corpus's Fossilize archives for the foz
 * tests (see foz_corpus.h).
 */
#include "foz_corpus.h"
#include "kiln_test.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int by_string(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Collects the *.foz files under `dir` and its sub-folders (`depth` levels). */
static void find_archives(const char *dir, int depth, struct archives *out)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        char path[4096];
        if (snprintf(path, sizeof(path), "%s/%s", dir, e->d_name) >= (int)sizeof(path))
            continue; /* a path this long is no archive of the corpus */
        size_t len = strlen(e->d_name);
        if (len > 4 && strcmp(e->d_name + len - 4, ".foz") == 0) {
            if (out->n < MAX_ARCHIVES)
                out->path[out->n++] = strdup(path);
        } else if (depth > 0) {
            find_archives(path, depth - 1, out);
        }
    }
    if (d)
        closedir(d);
}

void corpus_archives(struct archives *out)
{
    char dir[4096];
    out->n = 0;
    snprintf(dir, sizeof(dir), "%s/foz", kt_corpus_dir());
    find_archives(dir, 2, out);
    qsort(out->path, out->n, sizeof(out->path[0]), by_string);
}

void free_archives(struct archives *a)
{
    for (size_t i = 0; i < a->n; i++)
        free(a->path[i]);
    a->n = 0;
}
