/*
 * cli.c - the helpers every kiln command shares.
 */
#include "cli.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int cli_cache_affinity_flag = -1;

int cli_exit_for(int kiln_error)
{
    switch (kiln_error) {
    case KILN_OK:
        return KILN_EXIT_OK;
    case KILN_EINVAL:
    case KILN_ENOENT:
    case KILN_EACCES:
    case KILN_EFORMAT:
    case KILN_EPARSE:
    case KILN_ERANGE:
    case KILN_ESTAMP:
    case KILN_ECORRUPT_HEADER:
        return KILN_EXIT_USAGE;
    default:
        return KILN_EXIT_FAILED;
    }
}

int cli_check_cache_folder(const char *name, const char *dir, bool *has_cache,
                           struct kiln_cache_stats *st)
{
    *has_cache = false;
    struct stat sb;
    if (stat(dir, &sb) != 0) {
        if (errno == ENOENT)
            return KILN_EXIT_OK; /* made later */
        int err = kiln_error_from_errno(errno, KILN_EIO_STAT);
        cli_error(name, "%s: %s", dir, kiln_strerror(err));
        return cli_exit_for(err);
    }
    if (!S_ISDIR(sb.st_mode)) {
        cli_error(name, "%s: not a folder", dir);
        return KILN_EXIT_USAGE;
    }
    struct kiln_cache_options ro = {.flags = KILN_CACHE_READ_ONLY | KILN_CACHE_ANY_STAMP};
    struct kiln_cache *c;
    int rc = kiln_cache_open(dir, &ro, &c);
    if (rc == KILN_ENOENT)
        return KILN_EXIT_OK; /* a folder with no cache yet */
    if (rc < 0) {
        cli_error(name, "%s: cannot open the cache: %s", dir, kiln_strerror(rc));
        return cli_exit_for(rc);
    }
    kiln_cache_stats(c, st);
    kiln_cache_close(c);
    *has_cache = true;
    return KILN_EXIT_OK;
}

void cli_error(const char *name, const char *fmt, ...)
{
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    fprintf(stderr, "%s: %s\n", name, line);
}

int cli_usage_error(const char *name, const char *fmt, ...)
{
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    fprintf(stderr, "%s: %s (try '%s --help')\n", name, line, name);
    return KILN_EXIT_USAGE;
}

int cli_parse_u64(const char *name, const char *flag, const char *text, uint64_t lo, uint64_t hi,
                  bool sizes, uint64_t *out)
{
    char *end = NULL;
    errno = 0;
    unsigned long long v = (text && *text && *text != '-') ? strtoull(text, &end, 10) : 0;
    bool ok = text && *text && *text != '-' && end != text && errno == 0;
    if (ok && sizes && *end) {
        static const char units[] = "KMGT";
        const char *u = strchr(units, *end == 'k' ? 'K' : *end);
        if (u && *u) {
            unsigned shift = 10u * (unsigned)(u - units + 1);
            ok = v <= (UINT64_MAX >> shift);
            v <<= shift;
            end++;
            if (*end == 'i' && end[1] == 'B')
                end += 2;
            else if (*end == 'B')
                end++;
        }
    }
    if (!ok || *end != '\0' || v < lo || v > hi)
        return cli_usage_error(name, "%s: expected a whole number in %" PRIu64 "..%" PRIu64
                               "%s, got '%s'",
                               flag, lo, hi, sizes ? " (K/M/G suffixes allowed)" : "",
                               text ? text : "");
    *out = v;
    return KILN_EXIT_OK;
}

int cli_parse_jobs(const char *name, const char *text, unsigned *jobs)
{
    if (text && strcmp(text, "auto") == 0) {
        *jobs = 0;
        return KILN_EXIT_OK;
    }
    uint64_t v;
    int rc = cli_parse_u64(name, "--jobs", text, 1, 1024, false, &v);
    if (rc == KILN_EXIT_OK)
        *jobs = (unsigned)v;
    return rc;
}

/* ---- JSON output ------------------------------------------------------- */

static void json_sep(struct cli_json *j, const char *key)
{
    if (j->need_comma[j->depth])
        fputc(',', j->out);
    j->need_comma[j->depth] = true;
    if (key)
        fprintf(j->out, "\"%s\":", key);
}

void cli_json_begin(struct cli_json *j, FILE *out)
{
    memset(j, 0, sizeof(*j));
    j->out = out;
    fputc('{', out);
}

void cli_json_end(struct cli_json *j)
{
    fputs("}\n", j->out);
    fflush(j->out);
}

void cli_json_u64(struct cli_json *j, const char *key, uint64_t v)
{
    json_sep(j, key);
    fprintf(j->out, "%" PRIu64, v);
}

void cli_json_i64(struct cli_json *j, const char *key, int64_t v)
{
    json_sep(j, key);
    fprintf(j->out, "%" PRId64, v);
}

void cli_json_double(struct cli_json *j, const char *key, double v)
{
    json_sep(j, key);
    /* JSON has no NaN or infinity. */
    if (isfinite(v))
        fprintf(j->out, "%.6g", v);
    else
        fputs("null", j->out);
}

void cli_json_bool(struct cli_json *j, const char *key, bool v)
{
    json_sep(j, key);
    fputs(v ? "true" : "false", j->out);
}

void cli_json_null(struct cli_json *j, const char *key)
{
    json_sep(j, key);
    fputs("null", j->out);
}

void cli_json_str(struct cli_json *j, const char *key, const char *v)
{
    json_sep(j, key);
    fputc('"', j->out);
    for (const unsigned char *p = (const unsigned char *)v; *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(j->out, "\\%c", *p);
        else if (*p < 0x20)
            fprintf(j->out, "\\u%04x", *p);
        else
            fputc(*p, j->out);
    }
    fputc('"', j->out);
}

static void json_open(struct cli_json *j, const char *key, char c)
{
    json_sep(j, key);
    fputc(c, j->out);
    if (j->depth + 1 < (int)CLI_ARRAY_LEN(j->need_comma))
        j->depth++;
    j->need_comma[j->depth] = false;
}

static void json_close(struct cli_json *j, char c)
{
    fputc(c, j->out);
    if (j->depth > 0)
        j->depth--;
}

void cli_json_array_begin(struct cli_json *j, const char *key)
{
    json_open(j, key, '[');
}

void cli_json_array_end(struct cli_json *j)
{
    json_close(j, ']');
}

void cli_json_object_begin(struct cli_json *j, const char *key)
{
    json_open(j, key, '{');
}

void cli_json_object_end(struct cli_json *j)
{
    json_close(j, '}');
}

/* ---- progress ----------------------------------------------------------- */

void cli_progress_start(struct cli_progress *p, const char *label, uint64_t total, bool quiet)
{
    p->label = label;
    p->total = total;
    p->start_ns = p->last_ns = kiln_now_ns();
    p->tty = isatty(STDERR_FILENO) != 0;
    p->quiet = quiet;
}

static void progress_draw(struct cli_progress *p, uint64_t done, uint64_t now, bool final)
{
    double secs = cli_seconds(p->start_ns, now);
    double rate = secs > 0 ? (double)done / secs : 0.0;
    double left = rate > 0 && p->total > done ? (double)(p->total - done) / rate : 0.0;
    if (p->tty) {
        enum { WIDTH = 30 };
        int filled = p->total ? (int)(WIDTH * done / p->total) : WIDTH;
        char bar[WIDTH + 1];
        for (int i = 0; i < WIDTH; i++)
            bar[i] = i < filled ? '#' : '.';
        bar[WIDTH] = '\0';
        fprintf(stderr, "\r%-10s [%s] %" PRIu64 "/%" PRIu64 "  %.1f/s  %4.0fs left ", p->label,
                bar, done, p->total, rate, left);
        if (final)
            fputc('\n', stderr);
    } else {
        fprintf(stderr, "%s: %" PRIu64 "/%" PRIu64 " done, %.1f/s, %.0f s left\n", p->label, done,
                p->total, rate, left);
    }
    fflush(stderr);
}

void cli_progress_update(struct cli_progress *p, uint64_t done)
{
    if (p->quiet)
        return;
    uint64_t now = kiln_now_ns();
    /* Redraw a bar 10 times a second; print a plain line every 5 seconds. */
    uint64_t every = p->tty ? 100000000u : 5000000000u;
    if (now - p->last_ns < every)
        return;
    p->last_ns = now;
    progress_draw(p, done, now, false);
}

void cli_progress_finish(struct cli_progress *p, uint64_t done)
{
    if (!p->quiet)
        progress_draw(p, done, kiln_now_ns(), true);
}

const char *cli_format_bytes(char *buf, size_t cap, uint64_t bytes)
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)bytes;
    size_t u = 0;
    while (v >= 1024.0 && u + 1 < CLI_ARRAY_LEN(units)) {
        v /= 1024.0;
        u++;
    }
    snprintf(buf, cap, u == 0 ? "%.0f %s" : "%.1f %s", v, units[u]);
    return buf;
}
