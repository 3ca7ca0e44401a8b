/*
 * cli.c - the helpers every kiln command shares.
 */
#include "cli.h"

#include <errno.h>
#include <getopt.h>
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

int cli_open_cache(const char *name, const char *dir, const struct kiln_cache_options *opt,
                   struct kiln_cache **c)
{
    int rc = kiln_cache_open(dir, opt, c);
    if (rc < 0) {
        bool writer = !(opt->flags & KILN_CACHE_READ_ONLY);
        cli_error(name, "%s: cannot open the cache: %s%s", dir, kiln_strerror(rc),
                  writer && rc == KILN_EBUSY ? " (another writer holds it)" : "");
        return cli_exit_for(rc);
    }
    return KILN_EXIT_OK;
}

int cli_open_cache_writer(const char *name, const char *dir, struct kiln_cache **c)
{
    struct kiln_cache_options opt = {.flags = KILN_CACHE_KEEP_STAMP};
    return cli_open_cache(name, dir, &opt, c);
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
        return cli_usage_error(
            name, "%s: expected a whole number in %" PRIu64 "..%" PRIu64 "%s, got '%s'", flag, lo,
            hi, sizes ? " (K/M/G suffixes allowed)" : "", text ? text : "");
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

int cli_parse_device(const char *name, const char *text, bool *use_index, unsigned *index)
{
    uint64_t v;
    int rc = cli_parse_u64(name, "--device", text, 0, 1023, false, &v);
    if (rc == KILN_EXIT_OK) {
        *use_index = true;
        *index = (unsigned)v;
    }
    return rc;
}

int cli_parse_seed(const char *name, const char *text, uint64_t *seed)
{
    char *end = NULL;
    if (!text[0] || text[0] == '-')
        return cli_usage_error(name, "--seed: '%s' is not a number", text);
    *seed = strtoull(text, &end, 0);
    if (*end)
        return cli_usage_error(name, "--seed: '%s' is not a number", text);
    return KILN_EXIT_OK;
}

int cli_parse_cache_dir(const char *name, const char *text, const char **dir)
{
    if (!text[0])
        return cli_usage_error(name, "--cache: empty folder name");
    *dir = text;
    return KILN_EXIT_OK;
}

int cli_option_error(const char *name, int ch, char **argv)
{
    if (ch == ':')
        return cli_usage_error(name, "%s needs a value", argv[optind - 1]);
    return cli_usage_error(name, "unknown option '%s'", argv[optind - 1]);
}

static int report_option(int ch, char **argv, bool *json, const char *help, va_list ap)
    __attribute__((format(CLI_PRINTF_KIND, 4, 0)));

static int report_option(int ch, char **argv, bool *json, const char *help, va_list ap)
{
    if (ch == 'j') {
        *json = true;
        return CLI_NEXT_OPTION;
    }
    if (ch == 'h') {
        vprintf(help, ap);
        return KILN_EXIT_OK;
    }
    return cli_option_error(argv[0], ch, argv);
}

int cli_report_option(int ch, char **argv, bool *json, const char *help, ...)
{
    va_list ap;
    va_start(ap, help);
    int ex = report_option(ch, argv, json, help, ap);
    va_end(ap);
    return ex;
}

int cli_parse_report_options(int argc, char **argv, bool *json, const char *help, ...)
{
    static const struct option opts[] = {
        {"json", no_argument, NULL, 'j'}, {"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0}};
    int ch, ex = CLI_NEXT_OPTION;
    opterr = 0;
    optind = 1;
    while (ex == CLI_NEXT_OPTION && (ch = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        va_list ap;
        va_start(ap, help);
        ex = report_option(ch, argv, json, help, ap);
        va_end(ap);
    }
    return ex;
}

int cli_one_cache_dir(int argc, char **argv, const char **dir)
{
    if (optind != argc - 1)
        return cli_usage_error(argv[0], "expected one cache folder");
    *dir = argv[optind];
    return KILN_EXIT_OK;
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

void cli_json_hex_or_null(struct cli_json *j, const char *key, uint64_t v)
{
    if (!v) {
        cli_json_null(j, key);
        return;
    }
    char hex[24];
    snprintf(hex, sizeof(hex), "%016" PRIx64, v);
    cli_json_str(j, key, hex);
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
        fprintf(stderr, "\r%-10s [%s] %" PRIu64 "/%" PRIu64 "  %.1f/s  %4.0fs left ", p->label, bar,
                done, p->total, rate, left);
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

/* ---- kiln prepare and kiln start ---------------------------------------- */

void cli_phase_progress(void *user, enum kiln_prep_phase phase, uint64_t done, uint64_t total)
{
    struct cli_phase_progress *ps = user;
    if (ps->phase != (int)phase) {
        ps->phase = (int)phase;
        cli_progress_start(&ps->bar, kiln_prep_phase_name(phase), total, false);
    }
    if (done >= total) {
        cli_progress_finish(&ps->bar, done);
        ps->phase = -2; /* a new start for a later report of the same phase */
    } else {
        cli_progress_update(&ps->bar, done);
    }
}

const char *cli_vk_cache_state_name(enum kiln_vk_cache_state st)
{
    static const char *const names[] = {"off", "memory", "new", "loaded", "rejected"};
    return (unsigned)st < CLI_ARRAY_LEN(names) ? names[st] : "?";
}

const char *cli_prep_step_name(enum kiln_prep_step step)
{
    static const char *const names[] = {"none", "input", "cache", "vulkan", "other"};
    return (unsigned)step < CLI_ARRAY_LEN(names) ? names[step] : "?";
}

bool cli_prep_shows_table(int rc, enum kiln_prep_step step)
{
    return rc == KILN_OK || (step != KILN_PREP_STEP_INPUT && cli_exit_for(rc) != KILN_EXIT_USAGE);
}

void cli_json_prep_vulkan(struct cli_json *j, bool vulkan, const char *device,
                          enum kiln_vk_cache_state cache_state, size_t cache_loaded_bytes)
{
    cli_json_bool(j, "vulkan", vulkan);
    if (vulkan) {
        cli_json_str(j, "device", device);
        cli_json_str(j, "pipeline_cache", cli_vk_cache_state_name(cache_state));
        cli_json_u64(j, "pipeline_cache_loaded_bytes", cache_loaded_bytes);
    } else {
        cli_json_null(j, "device");
    }
}

void cli_json_prep_end(struct cli_json *j, uint64_t peak_rss, int error, enum kiln_prep_step step)
{
    cli_json_u64(j, "peak_rss_bytes", peak_rss);
    if (error) {
        cli_json_str(j, "error", kiln_errname(error));
        cli_json_str(j, "error_step", cli_prep_step_name(step));
    } else {
        cli_json_null(j, "error");
    }
}

void cli_print_phase_table(const struct cli_phase_time *rows, size_t n, uint64_t peak_rss)
{
    char b[32];
    printf("\n  %-10s %10s\n", "phase", "seconds");
    for (size_t i = 0; i < n; i++)
        if (rows[i].name)
            printf("  %-10s %10.3f\n", rows[i].name, (double)rows[i].ns / 1e9);
    printf("\n  peak memory %s\n", cli_format_bytes(b, sizeof(b), peak_rss));
}
