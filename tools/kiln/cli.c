/*
 * cli.c - the helpers every kiln command shares.
 */
#include "cli.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int cli_cache_affinity_flag = -1;

/*
 * A command's report is built in memory and printed by cli_json_emit() once
 * the command has returned: only then are `ok` and `error` known, and a
 * command that failed before its report still prints one object.
 */
static char *json_report;

/* A message slot: the first writer wins (log lines come from any thread). */
struct note {
    atomic_int claimed;
    char text[1024];
};

/*
 * Why the command failed, for `error`. The code is the first kiln code the
 * command stopped on. The message is the command's own error line when it
 * printed one, since that line says what stopped it, so the two agree; the
 * library's first error line is only the fallback. Taking the first line of
 * either kind instead paired, say, a shaderc failure logged by one worker
 * with the KILN_ENOMEM another met (issue 29).
 */
static struct {
    int code;         /* a kiln error code, 0 when none was recorded */
    bool usage;       /* the command line was wrong */
    struct note own;  /* cli_error, cli_usage_error, cli_note_error */
    struct note logs; /* the library's first error line */
} json_error;

static void note_into(struct note *n, const char *fmt, va_list ap)
    __attribute__((format(CLI_PRINTF_KIND, 2, 0)));

static void note_into(struct note *n, const char *fmt, va_list ap)
{
    if (atomic_exchange(&n->claimed, 1) == 0)
        vsnprintf(n->text, sizeof(n->text), fmt, ap);
}

static void note_message(const char *fmt, va_list ap)
    __attribute__((format(CLI_PRINTF_KIND, 1, 0)));

static void note_message(const char *fmt, va_list ap)
{
    note_into(&json_error.own, fmt, ap);
}

static void note_message_f(const char *fmt, ...) __attribute__((format(CLI_PRINTF_KIND, 1, 2)));

static void note_message_f(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    note_message(fmt, ap);
    va_end(ap);
}

int cli_exit_for(int kiln_error)
{
    if (kiln_error < 0 && json_error.code == 0)
        json_error.code = kiln_error;
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
    case KILN_EROFS:
    case KILN_ECACHE_FILE:
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
    struct kiln_cache_options ro = {.size = sizeof(ro),
                                    .flags = KILN_CACHE_READ_ONLY | KILN_CACHE_ANY_STAMP};
    struct kiln_cache *c;
    int rc = kiln_cache_open(dir, &ro, &c);
    if (rc == KILN_ENOENT)
        return KILN_EXIT_OK; /* a folder with no cache yet */
    if (rc < 0) {
        cli_error(name, "%s: cannot open the cache: %s", dir, kiln_strerror(rc));
        return cli_exit_for(rc);
    }
    kiln_cache_get_stats(c, st);
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

const char *cli_reset_hint(int rc)
{
    switch (rc) {
    case KILN_ESTAMP:
    case KILN_EFORMAT:
    case KILN_ECORRUPT_HEADER:
        return "; --reset starts a new cache there, the old files kept beside it "
               "(programs.*.<stamp>.old)";
    default:
        return "";
    }
}

int cli_reset_cache(const char *name, const char *dir, uint64_t stamp)
{
    struct kiln_cache_options opt = {
        .size = sizeof(opt), .stamp = stamp, .flags = KILN_CACHE_RESET | KILN_CACHE_MOVE_ASIDE};
    struct kiln_cache *c;
    int rc = kiln_cache_open(dir, &opt, &c);
    if (rc < 0) {
        cli_error(name, "%s: cannot start a new cache (--reset): %s%s", dir, kiln_strerror(rc),
                  rc == KILN_EBUSY ? " (another writer holds it)" : "");
        return cli_exit_for(rc);
    }
    kiln_cache_close(c);
    return KILN_EXIT_OK;
}

int cli_open_cache_writer(const char *name, const char *dir, struct kiln_cache **c)
{
    struct kiln_cache_options opt = {
        .size = sizeof(opt), .flags = KILN_CACHE_KEEP_STAMP, .max_size = cli_max_size_option()};
    return cli_open_cache(name, dir, &opt, c);
}

int cli_cache_rewrite(const char *name, const char *dir, const char *what, cli_rewrite_fn fn,
                      const void *arg, struct kiln_cache_rewrite_report *r, double *secs)
{
    struct kiln_cache *c;
    int ex = cli_open_cache_writer(name, dir, &c);
    if (ex != KILN_EXIT_OK)
        return ex;
    struct cli_cache_bar bar;
    cli_cache_bar_attach(&bar, c);
    uint64_t t0 = kiln_now_ns();
    int rc = fn(c, arg, r);
    *secs = cli_seconds(t0, kiln_now_ns());
    cli_cache_bar_close(&bar);
    kiln_cache_close(c);
    if (rc < 0) {
        cli_error(name, "%s: %s failed: %s", dir, what, kiln_strerror(rc));
        return KILN_EXIT_FAILED;
    }
    return KILN_EXIT_OK;
}

/* Formats a whole error line, however long (a path may be): never cut
 * before its reason. @return the line to free, or NULL without memory. */
static char *format_line(const char *fmt, va_list ap)
    __attribute__((format(CLI_PRINTF_KIND, 1, 0)));

static char *format_line(const char *fmt, va_list ap)
{
    va_list again;
    va_copy(again, ap);
    int n = vsnprintf(NULL, 0, fmt, ap);
    char *line = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (line)
        vsnprintf(line, (size_t)n + 1, fmt, again);
    va_end(again);
    return line;
}

void cli_error(const char *name, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *line = format_line(fmt, ap);
    va_end(ap);
    fprintf(stderr, "%s: %s\n", name, line ? line : "(out of memory)");
    note_message_f("%s", line ? line : "out of memory");
    free(line);
}

int cli_usage_error(const char *name, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *line = format_line(fmt, ap);
    va_end(ap);
    fprintf(stderr, "%s: %s (try '%s --help')\n", name, line ? line : "(out of memory)", name);
    json_error.usage = true;
    note_message_f("%s", line ? line : "out of memory");
    free(line);
    return KILN_EXIT_USAGE;
}

int cli_parse_pack_level(const char *name, const char *text, int32_t *out)
{
    if (text && strcmp(text, "default") == 0) {
        *out = KILN_PACK_LEVEL_DEFAULT;
        return KILN_EXIT_OK;
    }
    if (text && strcmp(text, "max") == 0) {
        *out = KILN_PACK_LEVEL_MAX;
        return KILN_EXIT_OK;
    }
    uint64_t v;
    if (!text || *text < '0' || *text > '9')
        return cli_usage_error(name, "--level: expected default, max or 1..22, got '%s'",
                               text ? text : "");
    int ex = cli_parse_u64(name, "--level", text, 1, 22, false, &v);
    if (ex == KILN_EXIT_OK)
        *out = (int32_t)v;
    return ex;
}

const char *cli_pack_level_name(char *buf, size_t n, int32_t level)
{
    if (level == KILN_PACK_LEVEL_DEFAULT)
        (void)snprintf(buf, n, "default");
    else if (level == KILN_PACK_LEVEL_MAX)
        (void)snprintf(buf, n, "max");
    else
        (void)snprintf(buf, n, "%d", (int)level);
    return buf;
}

int cli_parse_u64(const char *name, const char *flag, const char *text, uint64_t lo, uint64_t hi,
                  bool sizes, uint64_t *out)
{
    char *end = NULL;
    errno = 0;
    /* A digit first: strtoull would skip leading blanks and take a sign,
     * so " -1" would wrap to the largest value and " 2" pass for 2. */
    bool digit = text && *text >= '0' && *text <= '9';
    unsigned long long v = digit ? strtoull(text, &end, 10) : 0;
    bool ok = digit && end != text && errno == 0;
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
    uint64_t v = 0; /* gcc 12 at -O3 cannot see that cli_parse_u64 sets it on success */
    int rc = cli_parse_u64(name, "--jobs", text, 1, 1024, false, &v);
    if (rc == KILN_EXIT_OK)
        *jobs = (unsigned)v;
    return rc;
}

int cli_parse_binaries(const char *name, const char *text, uint32_t *mode)
{
    static const char *const names[] = {"off", "on", "auto"};
    for (uint32_t i = 0; i < 3; i++) {
        if (strcmp(text, names[i]) == 0) {
            *mode = i; /* KILN_BINARIES_OFF, _ON, _AUTO */
            return KILN_EXIT_OK;
        }
    }
    return cli_usage_error(name, "--binaries: '%s' is not off, on or auto", text);
}

void cli_json_binaries(struct cli_json *j, const struct cli_binaries *b)
{
    cli_json_bool(j, "binaries_used", b->used);
    cli_json_u64(j, "binaries_kept", b->kept);
    cli_json_u64(j, "binaries_stale", b->stale);
    cli_json_u64(j, "binaries_stale_dropped", b->dropped);
    cli_json_u64(j, "binaries_damaged", b->damaged);
    cli_json_u64(j, "binaries_records", b->records);
    cli_json_u64(j, "binaries_bytes", b->bytes);
    cli_json_u64(j, "binaries_swept", b->swept);
    if (b->used) {
        cli_json_str(j, "binaries_dir", b->dir);
        cli_json_str(j, "binaries_global_key", b->global_key);
    } else {
        cli_json_null(j, "binaries_dir");
        cli_json_null(j, "binaries_global_key");
    }
}

void cli_print_binaries(const struct cli_binaries *b)
{
    if (!b->used)
        return;
    char size[32];
    printf("  binaries   %" PRIu64 " pipeline%s (%s) in %s\n", b->records, CLI_S(b->records),
           cli_format_bytes(size, sizeof(size), b->bytes), b->dir);
    printf("             %" PRIu64 " kept this run, %" PRIu64 " damaged; %" PRIu64
           " stale folder%s (another driver), %" PRIu64 " removed\n",
           b->kept, b->damaged, b->stale, CLI_S(b->stale), b->dropped);
    if (b->swept)
        printf("             %" PRIu64 " dropped: their programs are no longer in the cache\n",
               b->swept);
}

int cli_parse_device(const char *name, const char *text, bool *use_index, unsigned *index)
{
    uint64_t v = 0; /* as in cli_parse_jobs */
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
    if (text[0] < '0' || text[0] > '9') /* as in cli_parse_u64: no blank, no sign */
        return cli_usage_error(name, "--seed: '%s' is not a number", text);
    errno = 0;
    *seed = strtoull(text, &end, 0);
    if (*end)
        return cli_usage_error(name, "--seed: '%s' is not a number", text);
    if (errno == ERANGE)
        return cli_usage_error(name, "--seed: %s is out of range (at most %" PRIu64 ")", text,
                               UINT64_MAX);
    return KILN_EXIT_OK;
}

int cli_check_path(const char *name, const char *what, const char *text)
{
    size_t len = strlen(text);
    if (len == 0)
        return cli_usage_error(name, "%s: an empty path", what);
    if (text[0] == '-')
        return cli_usage_error(name,
                               "%s: expected a path, got the option '%s' (write ./%s for a path "
                               "that starts with '-')",
                               what, text, text);
    if (len >= CLI_PATH_MAX)
        return cli_usage_error(name,
                               "%s: a path of %zu bytes is longer than the %d a path may have "
                               "('%.48s...')",
                               what, len, CLI_PATH_MAX - 1, text);
    return KILN_EXIT_OK;
}

int cli_parse_cache_dir(const char *name, const char *text, const char **dir)
{
    CLI_TRY(cli_check_path(name, "--cache", text));
    *dir = text;
    return KILN_EXIT_OK;
}

int cli_parse_layer(const char *name, const char *text, const char **layers, size_t *n)
{
    CLI_TRY(cli_check_path(name, "--layer", text));
    if (*n == KILN_CACHE_MAX_LAYERS)
        return cli_usage_error(name, "--layer: at most %u layers", KILN_CACHE_MAX_LAYERS);
    layers[(*n)++] = text;
    return KILN_EXIT_OK;
}

int cli_option_error(const char *name, int ch, char **argv)
{
    if (ch == ':')
        return cli_usage_error(name, "%s needs a value", argv[optind - 1]);
    const char *meant = cli_suggest_option(argv[optind - 1]);
    if (meant)
        return cli_usage_error(name, "unknown option '%s'; did you mean '--%s'?", argv[optind - 1],
                               meant);
    return cli_usage_error(name, "unknown option '%s'", argv[optind - 1]);
}

static int report_option(int ch, char **argv, bool *json, const char *help, va_list ap)
    __attribute__((format(CLI_PRINTF_KIND, 4, 0)));

/* --cache DIR as an option of a cache command; NULL when not given. */
static const char *given_cache_dir;
/* --max-size SIZE|none of a writing command; 0 when not given. */
static uint64_t given_max_size;

int cli_parse_max_size(const char *name, const char *text, uint64_t *out)
{
    if (text && strcmp(text, "none") == 0) {
        *out = KILN_CACHE_NO_CAP;
        return KILN_EXIT_OK;
    }
    return cli_parse_u64(name, "--max-size", text, 64, UINT64_MAX - 1, true, out);
}

uint64_t cli_max_size_option(void)
{
    return given_max_size;
}

static int report_option(int ch, char **argv, bool *json, const char *help, va_list ap)
{
    if (ch == CLI_OPT_CACHE) {
        CLI_TRY(cli_parse_cache_dir(argv[0], optarg, &given_cache_dir));
        return CLI_NEXT_OPTION;
    }
    if (ch == CLI_OPT_MAX_SIZE) {
        CLI_TRY(cli_parse_max_size(argv[0], optarg, &given_max_size));
        return CLI_NEXT_OPTION;
    }
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
    static const struct option opts[] = {CLI_CACHE_OPTION,
                                         CLI_MAX_SIZE_OPTION,
                                         {"json", no_argument, NULL, 'j'},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    int ch, ex = CLI_NEXT_OPTION;
    opterr = 0;
    optind = 1;
    while (ex == CLI_NEXT_OPTION && (ch = cli_getopt(argc, argv, "", opts)) != -1) {
        va_list ap;
        va_start(ap, help);
        ex = report_option(ch, argv, json, help, ap);
        va_end(ap);
    }
    return ex;
}

int cli_parse_cache_options(int argc, char **argv, const char **dir, bool *reset, bool *json,
                            const char *help, ...)
{
    static const struct option opts[] = {{"cache", required_argument, NULL, 'c'},
                                         {"json", no_argument, NULL, 'j'},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    static const struct option with_reset[] = {{"cache", required_argument, NULL, 'c'},
                                               {"reset", no_argument, NULL, 'r'},
                                               CLI_MAX_SIZE_OPTION,
                                               {"json", no_argument, NULL, 'j'},
                                               {"help", no_argument, NULL, 'h'},
                                               {NULL, 0, NULL, 0}};
    int ch;
    *dir = NULL;
    opterr = 0;
    optind = 1;
    while ((ch = cli_getopt(argc, argv, "", reset ? with_reset : opts)) != -1) {
        if (ch == 'c') {
            CLI_TRY(cli_parse_cache_dir(argv[0], optarg, dir));
        } else if (ch == 'r' && reset) {
            *reset = true;
        } else {
            va_list ap;
            va_start(ap, help);
            int ex = report_option(ch, argv, json, help, ap);
            va_end(ap);
            if (ex != CLI_NEXT_OPTION)
                return ex;
        }
    }
    if (!*dir && !(*dir = cli_default_cache_dir(argv[0])))
        return KILN_EXIT_USAGE;
    return CLI_NEXT_OPTION;
}

int cli_one_cache_dir(int argc, char **argv, const char **dir)
{
    if (optind < argc - 1 || (optind == argc - 1 && given_cache_dir))
        return cli_usage_error(argv[0], "expected one cache folder (DIR or --cache DIR)");
    if (optind == argc - 1) {
        CLI_TRY(cli_check_path(argv[0], "the cache folder", argv[optind]));
        *dir = argv[optind];
    } else if (given_cache_dir) {
        *dir = given_cache_dir;
    } else if (!(*dir = cli_default_cache_dir(argv[0]))) {
        return KILN_EXIT_USAGE;
    }
    return KILN_EXIT_OK;
}

/* "/x", "C:\\x", "C:/x" or "\\\\server\\x": a path that names the same place
 * wherever kiln stands. */
static bool cli_path_is_absolute(const char *p)
{
    if (p[0] == '/' || (p[0] == '\\' && p[1] == '\\'))
        return true;
    bool letter = (p[0] >= 'a' && p[0] <= 'z') || (p[0] >= 'A' && p[0] <= 'Z');
    return letter && p[1] == ':' && (p[2] == '\\' || p[2] == '/');
}

/* `base` + `tail` into `out` when `base` is an absolute path; else false. */
static bool under(char *out, size_t cap, const char *base, const char *tail)
{
    if (!base || !*base || !cli_path_is_absolute(base))
        return false;
    size_t n = strlen(base);
    const char *sep = base[n - 1] == '/' || base[n - 1] == '\\' ? "" : "/";
    return (size_t)snprintf(out, cap, "%s%s%s", base, sep, tail) < cap;
}

void cli_silence_stdout(void)
{
    fflush(stdout);
    if (!freopen(cli_os_null_device(), "w", stdout))
        return; /* stdout is closed then: nothing is printed either way */
}

int cli_make_folder(const char *name, const char *dir, bool *made)
{
    *made = cli_os_make_dir(dir) == 0;
    if (*made || errno == EEXIST)
        return KILN_EXIT_OK;
    int err = kiln_error_from_errno(errno, KILN_EIO);
    cli_error(name, "%s: cannot make the folder: %s", dir, kiln_strerror(err));
    return cli_exit_for(err);
}

void cli_unmake_folder(const char *dir, bool made)
{
    if (made)
        cli_os_remove_dir(dir); /* the folder this run made, left as it was found */
}

const char *cli_cache_option(void)
{
    return given_cache_dir;
}

const char *cli_default_cache_dir(const char *name)
{
    static char dir[CLI_PATH_MAX];
    const char *own = getenv("KILN_CACHE_DIR");
    if (own && *own) {
        if (cli_check_path(name, "$KILN_CACHE_DIR", own) != KILN_EXIT_OK)
            return NULL;
        return own;
    }
    if (under(dir, sizeof(dir), getenv("XDG_CACHE_HOME"), "kiln") ||
        under(dir, sizeof(dir), getenv("LOCALAPPDATA"), "kiln") ||
        under(dir, sizeof(dir), getenv("HOME"), ".cache/kiln"))
        return dir;
    cli_usage_error(name, "no cache folder: give --cache DIR, or set KILN_CACHE_DIR "
                          "(or HOME, for ~/.cache/kiln)");
    return NULL;
}

/* ---- JSON output ------------------------------------------------------- */

void cli_note_code(int kiln_code)
{
    if (kiln_code < 0 && json_error.code == 0)
        json_error.code = kiln_code;
}

void cli_note_error(int kiln_code, const char *fmt, ...)
{
    if (kiln_code < 0 && json_error.code == 0)
        json_error.code = kiln_code;
    va_list ap;
    va_start(ap, fmt);
    note_message(fmt, ap);
    va_end(ap);
}

static void note_log_f(const char *fmt, ...) __attribute__((format(CLI_PRINTF_KIND, 1, 2)));

static void note_log_f(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    note_into(&json_error.logs, fmt, ap);
    va_end(ap);
}

/* The log sink of the command: the default line on stderr, and the first
 * error line kept for `error`, since some failures are told only there. */
static void log_sink(void *user, enum kiln_log_level level, const char *module, const char *line)
{
    (void)user;
    static const char *const names[] = {"error", "warning", "info", "debug"};
    if (level == KILN_LOG_WARN && !cli_term_first_warning(module, line))
        return;
    cli_term_before_line();
    fprintf(stderr, "kiln: %s: %s: %s\n", module,
            (unsigned)level < CLI_ARRAY_LEN(names) ? names[level] : "log", line);
    if (level == KILN_LOG_ERROR)
        note_log_f("%s: %s", module, line);
}

void cli_json_install_log_sink(void)
{
    kiln_log_set_sink(log_sink, NULL);
}

static void json_put(struct cli_json *j, const char *text, size_t n)
{
    if (j->failed)
        return;
    if (j->len + n + 1 > j->cap) {
        size_t cap = j->cap ? j->cap : 1024;
        while (cap < j->len + n + 1)
            cap *= 2;
        char *nb = realloc(j->buf, cap);
        if (!nb) {
            j->failed = true;
            return;
        }
        j->buf = nb;
        j->cap = cap;
    }
    memcpy(j->buf + j->len, text, n);
    j->len += n;
    j->buf[j->len] = '\0';
}

static void json_printf(struct cli_json *j, const char *fmt, ...)
    __attribute__((format(CLI_PRINTF_KIND, 2, 3)));

static void json_printf(struct cli_json *j, const char *fmt, ...)
{
    char tmp[64];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
    va_end(ap);
    if (n > 0)
        json_put(j, tmp, (size_t)n < sizeof(tmp) ? (size_t)n : sizeof(tmp) - 1);
}

/* Writes `v` as a JSON string: escaped, and every byte that is not part of
 * valid UTF-8 (a path may hold any bytes) replaced by U+FFFD. */
static void json_string(struct cli_json *j, const char *v)
{
    json_put(j, "\"", 1);
    const unsigned char *p = (const unsigned char *)v;
    while (*p) {
        unsigned char c = *p;
        if (c == '"' || c == '\\') {
            char esc[2] = {'\\', (char)c};
            json_put(j, esc, 2);
            p++;
        } else if (c < 0x20 || c == 0x7f) {
            json_printf(j, "\\u%04x", c);
            p++;
        } else if (c < 0x80) {
            json_put(j, (const char *)p, 1);
            p++;
        } else {
            size_t n = cli_utf8_sequence(p);
            if (n)
                json_put(j, (const char *)p, n);
            else
                json_put(j, "\\ufffd", 6);
            p += n ? n : 1;
        }
    }
    json_put(j, "\"", 1);
}

size_t cli_utf8_sequence(const unsigned char *p)
{
    unsigned char c = p[0];
    size_t n;
    uint32_t cp;
    if (c >= 0xc2 && c <= 0xdf) {
        n = 2;
        cp = c & 0x1f;
    } else if (c >= 0xe0 && c <= 0xef) {
        n = 3;
        cp = c & 0x0f;
    } else if (c >= 0xf0 && c <= 0xf4) {
        n = 4;
        cp = c & 0x07;
    } else {
        return 0; /* ASCII is not a sequence; 0x80-0xc1 and 0xf5-0xff never start one */
    }
    for (size_t i = 1; i < n; i++) {
        if ((p[i] & 0xc0) != 0x80)
            return 0; /* also stops at the NUL */
        cp = (cp << 6) | (p[i] & 0x3f);
    }
    /* Overlong forms, UTF-16 surrogates and code points past U+10FFFF. */
    if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
        (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return n;
}

static void json_sep(struct cli_json *j, const char *key)
{
    if (j->need_comma[j->depth])
        json_put(j, ",", 1);
    j->need_comma[j->depth] = true;
    if (key) {
        json_string(j, key);
        json_put(j, ":", 1);
    }
}

void cli_json_begin(struct cli_json *j)
{
    memset(j, 0, sizeof(*j));
    json_put(j, "{", 1);
}

void cli_json_end(struct cli_json *j)
{
    json_put(j, "}", 1);
    free(json_report);
    json_report = j->failed ? NULL : j->buf;
    j->buf = NULL;
}

bool cli_json_wanted(int argc, char **argv)
{
    for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++)
        if (strcmp(argv[i], "--json") == 0)
            return true;
    return false;
}

void cli_json_emit(const char *command, int exit_code)
{
    struct cli_json j;
    cli_json_begin(&j);
    cli_json_str(&j, "schema", CLI_JSON_SCHEMA);
    cli_json_str(&j, "command", command);
    cli_json_bool(&j, "ok", exit_code == KILN_EXIT_OK);
    if (exit_code == KILN_EXIT_OK) {
        cli_json_null(&j, "error");
    } else {
        cli_json_object_begin(&j, "error");
        const char *code = json_error.code < 0 ? kiln_errname(json_error.code)
                           : json_error.usage || exit_code == KILN_EXIT_USAGE ? "usage"
                                                                              : "failed";
        cli_json_str(&j, "code", code);
        if (json_error.own.text[0])
            cli_json_str(&j, "message", json_error.own.text);
        else if (json_error.logs.text[0])
            cli_json_str(&j, "message", json_error.logs.text);
        else
            cli_json_str(&j, "message",
                         exit_code == KILN_EXIT_USAGE ? "bad usage or input" : "the work failed");
        cli_json_object_end(&j);
    }
    /* The command's own fields follow, without their braces. */
    if (json_report && strlen(json_report) > 2) {
        json_put(&j, ",", 1);
        json_put(&j, json_report + 1, strlen(json_report) - 2);
    }
    json_put(&j, "}\n", 2);
    if (!j.failed)
        fputs(j.buf, stdout); /* main() flushes and checks it (cli_finish_stdout) */
    free(j.buf);
    free(json_report);
    json_report = NULL;
}

int cli_finish_stdout(const char *name, int exit_code)
{
    /* Buffered output fails only when it is flushed: a full disk shows
     * here, or at the close, not at the printf. */
    errno = 0;
    bool failed = fflush(stdout) != 0 || ferror(stdout);
    failed = fclose(stdout) != 0 || failed;
    if (!failed)
        return exit_code;
    int err = errno;
    fprintf(stderr, "%s: cannot write the report to stdout: %s\n", name,
            err ? strerror(err) : "write error");
    return exit_code == KILN_EXIT_OK ? KILN_EXIT_FAILED : exit_code;
}

void cli_json_u64(struct cli_json *j, const char *key, uint64_t v)
{
    json_sep(j, key);
    json_printf(j, "%" PRIu64, v);
}

void cli_json_i64(struct cli_json *j, const char *key, int64_t v)
{
    json_sep(j, key);
    json_printf(j, "%" PRId64, v);
}

void cli_json_double(struct cli_json *j, const char *key, double v)
{
    json_sep(j, key);
    /* JSON has no NaN or infinity. */
    if (isfinite(v))
        json_printf(j, "%.6g", v);
    else
        json_put(j, "null", 4);
}

void cli_json_bool(struct cli_json *j, const char *key, bool v)
{
    json_sep(j, key);
    if (v)
        json_put(j, "true", 4);
    else
        json_put(j, "false", 5);
}

void cli_json_null(struct cli_json *j, const char *key)
{
    json_sep(j, key);
    json_put(j, "null", 4);
}

void cli_json_str(struct cli_json *j, const char *key, const char *v)
{
    json_sep(j, key);
    json_string(j, v);
}

static void json_open(struct cli_json *j, const char *key, char c)
{
    json_sep(j, key);
    json_put(j, &c, 1);
    if (j->depth + 1 < (int)CLI_ARRAY_LEN(j->need_comma))
        j->depth++;
    j->need_comma[j->depth] = false;
}

static void json_close(struct cli_json *j, char c)
{
    json_put(j, &c, 1);
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

void cli_json_u64_array(struct cli_json *j, const char *key, const uint64_t *v, size_t n)
{
    cli_json_array_begin(j, key);
    for (size_t i = 0; i < n; i++)
        cli_json_u64(j, NULL, v[i]);
    cli_json_array_end(j);
}

const char *cli_format_dict(char *buf, size_t cap, uint64_t dict_id)
{
    if (!dict_id)
        snprintf(buf, cap, "none");
    else
        snprintf(buf, cap, "%016" PRIx64, dict_id);
    return buf;
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
    p->quiet = quiet || kiln_log_get_level() <= KILN_LOG_ERROR; /* -q */
    p->lines = 0;
    p->done = 0;
    p->bytes = false;
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
        char d[32], t[32], r[32];
        if (p->bytes)
            fprintf(stderr, "\r%-10s [%s] %s/%s  %s/s  %4.0fs left ", p->label, bar,
                    cli_format_bytes(d, sizeof(d), done), cli_format_bytes(t, sizeof(t), p->total),
                    cli_format_bytes(r, sizeof(r), (uint64_t)rate), left);
        else
            fprintf(stderr, "\r%-10s [%s] %" PRIu64 "/%" PRIu64 "  %.1f/s  %4.0fs left ", p->label,
                    bar, done, p->total, rate, left);
        if (final)
            fputc('\n', stderr);
        cli_term_bar_drawn(!final);
    } else {
        /* Without a terminal: a line every 5 s, and the last one only after
         * such lines (work under 5 s leaves no trace but its report). */
        if (final && p->lines == 0)
            return;
        char d[32], t[32], r[32];
        if (p->bytes)
            fprintf(stderr, "%s: %s of %s done, %s/s, %.0f s left\n", p->label,
                    cli_format_bytes(d, sizeof(d), done), cli_format_bytes(t, sizeof(t), p->total),
                    cli_format_bytes(r, sizeof(r), (uint64_t)rate), left);
        else
            fprintf(stderr, "%s: %" PRIu64 "/%" PRIu64 " done, %.1f/s, %.0f s left\n", p->label,
                    done, p->total, rate, left);
        p->lines++;
    }
    fflush(stderr);
}

void cli_progress_update(struct cli_progress *p, uint64_t done)
{
    p->done = done;
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

void cli_cache_bar_report(void *user, const char *what, uint64_t done, uint64_t total)
{
    struct cli_cache_bar *b = user;
    if (!b->started) {
        cli_progress_start(&b->bar, what, total, false);
        b->bar.bytes = b->bytes;
        b->started = true;
    }
    if (done >= total)
        cli_progress_finish(&b->bar, done);
    else
        cli_progress_update(&b->bar, done);
    b->done = done >= total;
}

void cli_cache_bar_attach(struct cli_cache_bar *b, struct kiln_cache *c)
{
    memset(b, 0, sizeof(*b));
    b->cache = c;
    if (c)
        kiln_cache_set_progress(c, cli_cache_bar_report, b);
}

void cli_cache_bar_close(struct cli_cache_bar *b)
{
    if (b->started && !b->done)
        cli_progress_finish(&b->bar, b->bar.done);
    if (b->cache)
        kiln_cache_set_progress(b->cache, NULL, NULL);
}

void cli_phase_progress_close(struct cli_phase_progress *ps)
{
    if (ps->phase >= 0)
        cli_progress_finish(&ps->bar, ps->bar.done);
    ps->phase = -2;
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
        cli_json_str(j, "error_step", cli_prep_step_name(step));
        cli_note_code(error); /* the command's error line says the rest */
    } else {
        cli_json_null(j, "error_step");
    }
}

void cli_json_seconds(struct cli_json *j, const char *phase, double secs)
{
    cli_json_object_begin(j, "seconds");
    cli_json_double(j, phase, secs);
    cli_json_object_end(j);
}

void cli_json_phase_seconds(struct cli_json *j, const struct cli_phase_time *rows, size_t n)
{
    cli_json_object_begin(j, "seconds");
    for (size_t i = 0; i < n; i++)
        if (rows[i].name)
            cli_json_double(j, rows[i].name, (double)rows[i].ns / 1e9);
    cli_json_object_end(j);
}

void cli_print_phase_table(const struct cli_phase_time *rows, size_t n, uint64_t peak_rss)
{
    char b[32];
    int w = 10; /* the longest name's width, at least 10 */
    for (size_t i = 0; i < n; i++)
        if (rows[i].name && (int)strlen(rows[i].name) > w)
            w = (int)strlen(rows[i].name);
    printf("\n  %-*s %10s\n", w, "phase", "seconds");
    for (size_t i = 0; i < n; i++)
        if (rows[i].name)
            printf("  %-*s %10.3f\n", w, rows[i].name, (double)rows[i].ns / 1e9);
    printf("\n  peak memory %s\n", cli_format_bytes(b, sizeof(b), peak_rss));
}

int cli_isolate_worker(const char *name, struct kiln_isolate_options *iso)
{
    static char exe[CLI_PATH_MAX];
    static const char *argv[] = {exe, "__worker", NULL};
    iso->size = sizeof(*iso); /* a growable struct (docs/abi.md) */
    if (!cli_os_self_exe(exe, sizeof(exe))) {
        cli_error(name, "cannot find this executable's path for the isolated workers");
        return KILN_EXIT_FAILED;
    }
    iso->argv = argv;
    return 0;
}
