/*
 * bench_child_unix.c - the measuring child process of `kiln bench prepare`,
 * `kiln bench replay`, `kiln bench start` and `kiln bench stutter`, and the
 * temporary folders and generated archive they measure in.
 *
 * Each measurement runs in a fresh process so that no run finds another's
 * work in the driver's memory and its peak memory is its own. The parent
 * flushes stdout and stderr before fork, so nothing it buffered is printed
 * twice. The child sends its result as raw bytes and ends with _exit: the
 * parent and the child are the same executable, so the layout agrees, and
 * a child that dies before sending all of it is told apart from one that
 * reported (the parent reads exactly `size` bytes or says it died).
 */
#include "bench_child.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

void bench_child_no_disk_cache(void)
{
    setenv("MESA_SHADER_CACHE_DISABLE", "true", 1);
    setenv("MESA_GLSL_CACHE_DISABLE", "true", 1);
    setenv("__GL_SHADER_DISK_CACHE", "0", 1);
}

bool bench_child_reset_peak(void)
{
    int fd = open("/proc/self/clear_refs", O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    bool ok = write(fd, "5", 1) == 1;
    close(fd);
    return ok;
}

/* @return the field `key` ("VmHWM:") of /proc/self/status in bytes, or 0. */
static uint64_t status_bytes(const char *key)
{
    FILE *f = fopen("/proc/self/status", "re");
    if (!f)
        return 0;
    char line[256];
    uint64_t v = 0;
    size_t n = strlen(key);
    while (fgets(line, sizeof(line), f))
        if (strncmp(line, key, n) == 0) {
            v = strtoull(line + n, NULL, 10) * 1024u;
            break;
        }
    fclose(f);
    return v;
}

uint64_t bench_child_peak_rss(bool reset)
{
    uint64_t v = reset ? status_bytes("VmHWM:") : 0;
    return v ? v : kiln_peak_rss_bytes();
}

int bench_child_vk(bool use_device, unsigned device, bool raytracing, struct kiln_vk **out)
{
    /* The ray-tracing set is last in the list. */
    static const char *const extra[] = {KILN_FOZ_DEVICE_EXTENSIONS};
    struct kiln_vk_options vo = {.size = sizeof(vo),
                                 .use_device_index = use_device,
                                 .device = device,
                                 .extra_extensions = extra,
                                 .extra_extension_count =
                                     CLI_ARRAY_LEN(extra) -
                                     (raytracing ? 0 : KILN_FOZ_RAYTRACING_EXTENSION_COUNT)};
    return kiln_vk_create(&vo, out);
}

int bench_tmpdir(const char *name, const char *tag, char *buf, size_t cap)
{
    const char *base = getenv("TMPDIR");
    snprintf(buf, cap, "%s/kiln-%s-XXXXXX", base && *base ? base : "/tmp", tag);
    if (!mkdtemp(buf)) {
        cli_error(name, "%s: cannot make the temporary folder: %s", buf, strerror(errno));
        return KILN_EIO;
    }
    return KILN_OK;
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)ftw;
    return (flag == FTW_DP ? rmdir(path) : unlink(path)) == 0 ? 0 : -1;
}

int bench_remove_tree(const char *dir)
{
    return nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* Without Vulkan (so no driver memory is held by this process before a
 * measurement forks); the export writes beside its path and renames at the
 * end, so a failure leaves no partial archive at `keep`. */
int bench_generated_archive(const char *name, const char *tmp, uint32_t count, uint64_t seed,
                            const char *keep, char *archive, size_t cap)
{
    struct kiln_glsl *g = NULL;
    int rc = kiln_glsl_create(KILN_GLSL_OPT_NONE, &g);
    if (rc < 0) {
        cli_error(name, "--generate: no GLSL translator: %s", kiln_strerror(rc));
        return rc;
    }
    struct kiln_generator gen = {.seed = seed, .count = count};
    struct kiln_program_source src;
    kiln_generator_source(&gen, &src);
    char dir[CLI_PATH_MAX + 32];
    snprintf(dir, sizeof(dir), "%s/generated", tmp);
    struct kiln_prepare_options o = KILN_PREPARE_OPTIONS_INIT;
    kiln_prepare_options_init(&o);
    o.cache_dir = dir;
    o.source = &src;
    o.translator = kiln_glsl_translator(g);
    o.no_vulkan = true;
    struct kiln_prepare_summary s = KILN_PREPARE_SUMMARY_INIT;
    rc = kiln_prepare(&o, NULL, NULL, &s);
    kiln_glsl_destroy(g);
    if (rc < 0 || s.failed) {
        cli_error(name, "--generate: %s: preparing %u programs failed: %s", dir, count,
                  rc < 0 ? kiln_strerror(rc) : "programs did not translate (logged above)");
        return rc < 0 ? rc : KILN_ETRANSLATE;
    }
    struct kiln_cache_options co = {.size = sizeof(co),
                                    .flags = KILN_CACHE_READ_ONLY | KILN_CACHE_ANY_STAMP};
    struct kiln_cache *c = NULL;
    if (cli_open_cache(name, dir, &co, &c) != KILN_EXIT_OK)
        return KILN_EIO;
    if (keep)
        snprintf(archive, cap, "%s", keep);
    else
        snprintf(archive, cap, "%s/generated-%u.foz", tmp, count);
    struct kiln_foz_export_report rep = KILN_FOZ_EXPORT_REPORT_INIT;
    rc = kiln_foz_export(c, archive, &rep);
    kiln_cache_close(c);
    if (rc < 0) {
        cli_error(name, "--generate: %s: exporting the generated programs failed: %s", archive,
                  kiln_strerror(rc));
        return rc;
    }
    if (rep.pipelines != count) {
        cli_error(name,
                  "--generate: %s: %" PRIu64 " of %u generated programs exported as pipelines "
                  "(%" PRIu64 " skipped: %s)",
                  archive, rep.pipelines, count, rep.skipped,
                  rep.skip_reason[0] ? rep.skip_reason : "no reason given");
        return KILN_ECORRUPT_RECORD;
    }
    return KILN_OK;
}

/* In the child: runs the measurement into its own copy of `res`, sends it
 * and ends. */
_Noreturn static void child_main(int fd, bench_child_fn fn, void *arg, void *res, size_t size)
{
    fn(arg, res);
    const char *p = res;
    size_t left = size;
    while (left) {
        ssize_t w = write(fd, p, left);
        if (w <= 0)
            _exit(3);
        p += w;
        left -= (size_t)w;
    }
    _exit(0); /* no atexit work, no driver teardown: the numbers are sent */
}

int bench_child_run(const char *name, const char *what, bench_child_fn fn, void *arg, void *result,
                    size_t size)
{
    int fds[2];
    if (pipe(fds) != 0) {
        cli_error(name, "pipe: %s", strerror(errno));
        return KILN_EIO;
    }
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) {
        cli_error(name, "fork: %s", strerror(errno));
        close(fds[0]);
        close(fds[1]);
        return KILN_EIO;
    }
    if (pid == 0) {
        close(fds[0]);
        child_main(fds[1], fn, arg, result, size);
    }
    close(fds[1]);
    char *p = result;
    size_t got = 0;
    while (got < size) {
        ssize_t n = read(fds[0], p + got, size - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    close(fds[0]);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (got != size) {
        cli_error(name, "%s died (%s %d) before reporting", what,
                  WIFSIGNALED(status) ? "signal" : "exit",
                  WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
        return KILN_EIO;
    }
    return KILN_OK;
}
