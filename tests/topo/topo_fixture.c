/*
 * topo_fixture.c - see topo_fixture.h.
 */
#include "topo_fixture.h"

#include <errno.h>
#include <stdarg.h>
#include <sys/stat.h>
#include <unistd.h>

static void make_parents(char *path)
{
    for (char *p = path + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
#ifdef _WIN32
        struct stat st;
        if (kt_mkdir(path) != 0 && (stat(path, &st) != 0 || !S_ISDIR(st.st_mode)))
#else
        if (mkdir(path, 0755) != 0 && errno != EEXIST)
#endif
            kt_fail(__FILE__, __LINE__, "mkdir %s: %s", path, strerror(errno));
        *p = '/';
    }
}

void fx_write(const char *root, const char *rel, const char *text)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s", root, rel);
    FILE *f = fopen(path, "w");
    if (!f && errno == ENOENT) {
        make_parents(path); /* only when needed: most files land in existing folders */
        f = fopen(path, "w");
    }
    if (!f) {
        kt_fail(__FILE__, __LINE__, "cannot write %s: %s", path, strerror(errno));
        return;
    }
    fprintf(f, "%s\n", text);
    fclose(f);
}

void fx_remove(const char *root, const char *rel)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s", root, rel);
    if (remove(path) != 0)
        kt_fail(__FILE__, __LINE__, "cannot remove %s: %s", path, strerror(errno));
}

void fx_mkdir(const char *root, const char *rel)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s/", root, rel);
    make_parents(path);
}

void fx_cache(const char *root, unsigned cpu, unsigned index, unsigned level, const char *type,
              const char *size, const char *list, int id)
{
    char rel[128], num[32];
    snprintf(num, sizeof(num), "%u", level);
    snprintf(rel, sizeof(rel), "cpu%u/cache/index%u/level", cpu, index);
    fx_write(root, rel, num);
    snprintf(rel, sizeof(rel), "cpu%u/cache/index%u/type", cpu, index);
    fx_write(root, rel, type);
    snprintf(rel, sizeof(rel), "cpu%u/cache/index%u/size", cpu, index);
    fx_write(root, rel, size);
    snprintf(rel, sizeof(rel), "cpu%u/cache/index%u/shared_cpu_list", cpu, index);
    fx_write(root, rel, list);
    snprintf(num, sizeof(num), "%d", id);
    snprintf(rel, sizeof(rel), "cpu%u/cache/index%u/id", cpu, index);
    fx_write(root, rel, num);
}

const char *fx_fast_tmpdir(void)
{
#ifdef _WIN32
    return kt_tmpdir(); /* no /dev/shm */
#else
    static char dir[64];
    snprintf(dir, sizeof(dir), "/dev/shm/kiln-topo-XXXXXX");
    if (access("/dev/shm", W_OK) == 0 && mkdtemp(dir))
        return dir;
    return kt_tmpdir();
#endif
}

void fx_fast_tmpdir_done(const char *dir)
{
    if (strncmp(dir, "/dev/shm/", 9) == 0 && !getenv("KT_KEEP"))
        kt_rmtree(dir);
}

const char *fx_committed(const char *name)
{
    static char path[4096];
    snprintf(path, sizeof(path), "%s/tests/fixtures/topo/%s", KILN_SOURCE_DIR, name);
    return path;
}

#define FX_MAX_LINES 64

static struct {
    int n;
    enum kiln_log_level level[FX_MAX_LINES];
    char line[FX_MAX_LINES][512];
} caught;
static enum kiln_log_level saved_level;

static void sink(void *user, enum kiln_log_level level, const char *module, const char *line)
{
    (void)user;
    if (caught.n < FX_MAX_LINES) {
        caught.level[caught.n] = level;
        snprintf(caught.line[caught.n], sizeof(caught.line[0]), "%s: %s", module, line);
        caught.n++;
    }
}

void fx_log_start(void)
{
    caught.n = 0;
    saved_level = kiln_log_get_level();
    kiln_log_set_level(KILN_LOG_DEBUG);
    kiln_log_set_sink(sink, NULL);
}

void fx_log_stop(void)
{
    kiln_log_set_sink(NULL, NULL);
    kiln_log_set_level(saved_level);
}

int fx_log_count(enum kiln_log_level level)
{
    int n = 0;
    for (int i = 0; i < caught.n; i++)
        n += caught.level[i] == level;
    return n;
}

bool fx_log_has(enum kiln_log_level level, const char *text)
{
    for (int i = 0; i < caught.n; i++)
        if (caught.level[i] == level && strstr(caught.line[i], text))
            return true;
    fprintf(stderr, "no log line of level %d with '%s'; caught %d:\n", (int)level, text, caught.n);
    for (int i = 0; i < caught.n; i++)
        fprintf(stderr, "  [%d] %s\n", (int)caught.level[i], caught.line[i]);
    return false;
}

struct kiln_cpuset fx_set(const char *list)
{
    struct kiln_cpuset s = {0};
    int rc = kiln_cpuset_parse_list(&s, list, strlen(list));
    if (rc < 0)
        kt_fail(__FILE__, __LINE__, "bad test list '%s': %s", list, kiln_errname(rc));
    return s;
}

bool fx_set_is(const struct kiln_cpuset *set, const char *list)
{
    char buf[1024];
    kiln_cpuset_format(set, buf, sizeof(buf));
    if (strcmp(buf, list) == 0)
        return true;
    fprintf(stderr, "CPU set is '%s', expected '%s'\n", buf, list);
    return false;
}
