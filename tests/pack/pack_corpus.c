/*
 * pack_corpus.c - loads the shared SPIR-V corpus for the pack tests.
 */
#include "pack_corpus.h"

#include <dirent.h>
#include <sys/stat.h>

const uint32_t pc_tiny_module[PC_TINY_WORDS] = {
    0x07230203u, 0x00010300u, 0, 4, 0, (2u << 16) | 17u, 1, (3u << 16) | 14u, 0, 1,
};

static int add(struct pc_corpus *c, size_t *cap, const char *path, void *data, size_t n)
{
    if (c->n == *cap) {
        size_t ncap = *cap ? *cap * 2 : 512;
        struct pc_module *m = realloc(c->m, ncap * sizeof(*m));
        if (!m)
            return KILN_ENOMEM;
        c->m = m;
        *cap = ncap;
    }
    c->m[c->n].path = strdup(path);
    c->m[c->n].words = data;
    c->m[c->n].nwords = n / 4;
    c->n++;
    return 0;
}

static int walk(struct pc_corpus *c, size_t *cap, const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return KILN_ENOENT;
    struct dirent *e;
    int rc = 0;
    while (rc == 0 && (e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        char path[4096];
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        struct stat st;
        if (stat(path, &st) != 0)
            continue;
        size_t len = strlen(e->d_name);
        if (S_ISDIR(st.st_mode)) {
            rc = walk(c, cap, path);
        } else if (len > 4 && strcmp(e->d_name + len - 4, ".spv") == 0 && st.st_size > 0 &&
                   st.st_size % 4 == 0) {
            void *data;
            size_t n;
            rc = kiln_io_read_file(kiln_io_default(), path, 64u << 20, &data, &n);
            if (rc == 0 && (rc = add(c, cap, path, data, n)) < 0)
                free(data);
        }
    }
    closedir(d);
    return rc;
}

static int cmp(const void *a, const void *b)
{
    return strcmp(((const struct pc_module *)a)->path, ((const struct pc_module *)b)->path);
}

int pc_load(struct pc_corpus *c)
{
    memset(c, 0, sizeof(*c));
    char dir[4096];
    snprintf(dir, sizeof(dir), "%s/spirv", kt_corpus_dir());
    size_t cap = 0;
    int rc = walk(c, &cap, dir);
    if (rc == KILN_ENOENT && c->n == 0) {
        /* A bare clone: the case needs the shared corpus (ctest's skip). */
        printf("skipped: no SPIR-V corpus at %s (set KILN_CORPUS)\n", dir);
        exit(77);
    }
    if (rc < 0 || c->n == 0) {
        fprintf(stderr, "%s: no SPIR-V corpus (%s); set KILN_CORPUS\n", dir,
                rc < 0 ? kiln_strerror(rc) : "empty");
        pc_free(c);
        return rc < 0 ? rc : KILN_ENOENT;
    }
    qsort(c->m, c->n, sizeof(*c->m), cmp);
    return 0;
}

void pc_free(struct pc_corpus *c)
{
    for (size_t i = 0; i < c->n; i++) {
        free(c->m[i].path);
        free(c->m[i].words);
    }
    free(c->m);
    memset(c, 0, sizeof(*c));
}
