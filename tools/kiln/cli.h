/*
 * cli.h - what the `kiln` command's files share: exit codes, option
 * parsing helpers, a JSON writer for --json and a progress bar.
 *
 * The command line is a thin layer over the public API: a command parses
 * its options, calls the library and prints. Every report has --json (one
 * object on stdout, nothing else on stdout); errors go to stderr as one line
 * that says what and where.
 */
#ifndef KILN_CLI_H
#define KILN_CLI_H

#include "kiln.h"
#include "kiln/foz.h"
#include "kiln-tools/gen.h"
#include "kiln-tools/glsl.h"

#include <limits.h>
#include <stdio.h>

enum {
    KILN_EXIT_OK = 0,       /* done */
    KILN_EXIT_FAILED = 1,   /* the work failed */
    KILN_EXIT_USAGE = 2,    /* bad usage or input */
    KILN_EXIT_SIGNAL = 130, /* a signal stopped the work (SIGINT or SIGTERM): 128 + SIGINT */
};

/*
 * The exit code for a kiln error code that stopped a command: bad input
 * (KILN_EINVAL, a missing file or folder, one kiln may not read or write, a
 * file of another kind, text that does not parse, a value out of range, a
 * cache of another stamp or whose header is not a cache's) gives
 * KILN_EXIT_USAGE; anything else - an I/O failure, memory, a cache held by
 * another writer, damage met while working - KILN_EXIT_FAILED. Commands map
 * the library's errors through it.
 */
int cli_exit_for(int kiln_error);

/*
 * Checks, before anything is written, a cache folder that a command will
 * write into and make when missing (import foz --cache, cache merge OUT):
 * it must be missing, or a folder that holds no cache yet, or one that holds
 * a kiln cache. Only reads (a read-only open of any stamp). On success
 * *has_cache says whether a cache is there, and *st holds its stats then.
 * @return KILN_EXIT_OK, or prints one line naming DIR and what is wrong and
 * returns the exit code (cli_exit_for).
 */
int cli_check_cache_folder(const char *name, const char *dir, bool *has_cache,
                           struct kiln_cache_stats *st);

/*
 * Opens the cache in `dir` with `opt`; on failure prints one line naming
 * DIR and why ("cannot open the cache: ...", and that another writer holds
 * it when a writer's open meets KILN_EBUSY).
 * @return KILN_EXIT_OK with *c to close, or the exit code (cli_exit_for).
 */
int cli_open_cache(const char *name, const char *dir, const struct kiln_cache_options *opt,
                   struct kiln_cache **c);

/*
 * --reset of the commands that write a cache of their own stamp (prepare,
 * import foz): whatever cache `dir` holds (any stamp, format version, or a
 * damaged header) is set aside, never removed - its files renamed to
 * programs.*.<stamp>.old (.old.N when taken: KILN_CACHE_MOVE_ASIDE) - and
 * a new, empty cache of `stamp` takes its place (the folder made when
 * missing). The library logs one warning line naming what was moved.
 * @return KILN_EXIT_OK, or prints one line and returns the exit code.
 */
int cli_reset_cache(const char *name, const char *dir, uint64_t stamp);

/* The end of an error line about a cache that cannot be opened: for a
 * stamp, format version or header that a reset would start over, the
 * "--reset ..." hint, else "". */
const char *cli_reset_hint(int kiln_error);

/* Opens the cache in `dir` as a writer that keeps its stamp and dictionary
 * (KILN_CACHE_KEEP_STAMP), for maintenance: cli_open_cache. */
int cli_open_cache_writer(const char *name, const char *dir, struct kiln_cache **c);

/* The rewrite a maintenance command runs on the cache it opened:
 * kiln_cache_prune, _compact or _repack with the command's `arg`. */
typedef int (*cli_rewrite_fn)(struct kiln_cache *c, const void *arg,
                              struct kiln_cache_rewrite_report *r);

/*
 * Opens the cache in `dir` as a writer (cli_open_cache_writer), runs `fn`
 * on it, timed, and closes it; a rewrite that fails prints one line "DIR:
 * WHAT failed: why". @return KILN_EXIT_OK with *r and *secs, or the exit
 * code.
 */
int cli_cache_rewrite(const char *name, const char *dir, const char *what, cli_rewrite_fn fn,
                      const void *arg, struct kiln_cache_rewrite_report *r, double *secs);

/* A command: argv[0] is its full name ("kiln cache stats"). */
typedef int (*cli_command_fn)(int argc, char **argv);

#ifdef __MINGW32__
#define CLI_PRINTF_KIND gnu_printf /* the build sets __USE_MINGW_ANSI_STDIO */
#else
#define CLI_PRINTF_KIND printf
#endif

/* Prints "NAME: message" to stderr as one line. */
void cli_error(const char *name, const char *fmt, ...)
    __attribute__((format(CLI_PRINTF_KIND, 2, 3)));

/* Prints a usage error and a hint to run --help; @return KILN_EXIT_USAGE. */
int cli_usage_error(const char *name, const char *fmt, ...)
    __attribute__((format(CLI_PRINTF_KIND, 2, 3)));

/*
 * Parses an unsigned integer option value in [lo, hi]. Suffixes K, M, G
 * (powers of 1024) are accepted when `sizes` is true.
 * @return 0, or prints one line naming the flag and returns KILN_EXIT_USAGE.
 */
int cli_parse_u64(const char *name, const char *flag, const char *text, uint64_t lo, uint64_t hi,
                  bool sizes, uint64_t *out);

/* Parses "--level default|max|N" (a packing level, kiln_pack_options.level):
 * default is KILN_PACK_LEVEL_DEFAULT, max KILN_PACK_LEVEL_MAX, N a zstd level
 * of 1 to 22. Same return as cli_parse_u64. */
int cli_parse_pack_level(const char *name, const char *text, int32_t *out);

/* A packing level's name: "default", "max" or its number, in buf. */
const char *cli_pack_level_name(char *buf, size_t n, int32_t level);

/* Parses "--jobs N|auto": 0 means auto. Same return as cli_parse_u64. */
int cli_parse_jobs(const char *name, const char *text, unsigned *jobs);

/* Parses "--device N" (0..1023): sets *use_index and *index. Same return as
 * cli_parse_u64. */
int cli_parse_device(const char *name, const char *text, bool *use_index, unsigned *index);

/* Parses "--binaries off|on|auto" (enum kiln_binaries_mode). Same return
 * as cli_parse_u64. */
int cli_parse_binaries(const char *name, const char *text, uint32_t *mode);

/* The host tier's figures (kiln_prepare_summary / kiln_start_summary
 * binaries_*), read from either summary with CLI_BINARIES. */
struct cli_binaries {
    uint64_t kept, stale, dropped, damaged, records, bytes, swept;
    const char *dir, *global_key;
    bool used;
};
#define CLI_BINARIES(s)                                            \
    ((struct cli_binaries){.kept = (s)->binaries_kept,             \
                           .stale = (s)->binaries_stale,           \
                           .dropped = (s)->binaries_stale_dropped, \
                           .damaged = (s)->binaries_damaged,       \
                           .records = (s)->binaries_records,       \
                           .bytes = (s)->binaries_bytes,           \
                           .swept = (s)->binaries_swept,           \
                           .dir = (s)->binaries_dir,               \
                           .global_key = (s)->binaries_global_key, \
                           .used = (s)->binaries_used})

/* The figures as JSON keys (binaries_*), and as text lines when the tier
 * was used. */
struct cli_json;
void cli_json_binaries(struct cli_json *j, const struct cli_binaries *b);
void cli_print_binaries(const struct cli_binaries *b);

/* Parses "--seed S" (decimal, or hex with 0x). @return 0, or prints one line
 * and returns KILN_EXIT_USAGE. */
int cli_parse_seed(const char *name, const char *text, uint64_t *seed);

/* The longest path the command takes, its NUL included (Windows' PATH_MAX
 * is 260, but kiln.exe is long-path aware). */
#define CLI_PATH_MAX 4096

/* Returns a nonzero exit code from the calling function. */
#define CLI_TRY(expr)                 \
    do {                              \
        int cli_try_ = (expr);        \
        if (cli_try_ != KILN_EXIT_OK) \
            return cli_try_;          \
    } while (0)

/*
 * Checks a path given on the command line (`what` names it in the error:
 * "--cache", "the cache folder") before anything is made: not empty, not
 * an option (`--cache -v --no-vulkan` must not make a folder named
 * "--no-vulkan"), and shorter than CLI_PATH_MAX (the error says so without
 * printing the whole path). @return 0, or prints one line and returns
 * KILN_EXIT_USAGE.
 */
int cli_check_path(const char *name, const char *what, const char *text);

/* Takes "--cache DIR" (cli_check_path). @return 0, or prints one line and
 * returns KILN_EXIT_USAGE. */
int cli_parse_cache_dir(const char *name, const char *text, const char **dir);

/* Parses one "--layer DIR" into layers[*n] (at most KILN_CACHE_MAX_LAYERS).
 * Same return as cli_parse_cache_dir. */
int cli_parse_layer(const char *name, const char *text, const char **layers, size_t *n);

/*
 * The end of every command's getopt_long loop (opterr = 0): for ':' a
 * value is missing, anything else is an unknown option; prints the usage
 * error naming it (argv[optind - 1]). @return KILN_EXIT_USAGE.
 */
int cli_option_error(const char *name, int ch, char **argv);

struct option;

/*
 * getopt_long() for a command's option loop, remembering `longs` so that
 * cli_option_error() can suggest the option meant ("did you mean
 * '--cache'?"). Same arguments and result as getopt_long(), no index.
 */
int cli_getopt(int argc, char **argv, const char *shorts, const struct option *longs);

/* "Did you mean": offer each known word, then take the closest, or NULL. */
struct cli_suggest {
    const char *typed;
    const char *best;
    size_t best_distance;
    const char *prefix_of; /* the last word `typed` is a prefix of */
    unsigned prefix_count;
};
void cli_suggest_begin(struct cli_suggest *s, const char *typed);
void cli_suggest_offer(struct cli_suggest *s, const char *word);
const char *cli_suggest_result(const struct cli_suggest *s);

/* Edit distance with swaps of neighbours; (size_t)-1 past 64 characters. */
size_t cli_edit_distance(const char *a, const char *b);

/* One warning line: option `old` is spelled `now` today. */
void cli_deprecated(const char *name, const char *old, const char *now);

/* The long option of the last cli_getopt() table closest to `arg`
 * ("--cahce"), or NULL. */
const char *cli_suggest_option(const char *arg);

/*
 * --cache DIR in a cache command's option table (beside the folder as an
 * operand): cli_report_option() takes it, cli_one_cache_dir() uses it.
 */
#define CLI_OPT_CACHE 0x1001
#define CLI_CACHE_OPTION                                \
    {                                                   \
        "cache", required_argument, NULL, CLI_OPT_CACHE \
    }

/*
 * The cache folder a command uses when none is given: $KILN_CACHE_DIR,
 * else $XDG_CACHE_HOME/kiln, else %LOCALAPPDATA%/kiln (set on Windows),
 * else $HOME/.cache/kiln. A relative variable is ignored, as the XDG rules
 * say. @return the folder (static storage, for the life of the process),
 * or NULL after one usage line saying none of them is set.
 */
const char *cli_default_cache_dir(const char *name);

/* The terminal's stderr (cli_term.c): the bar says whether it is drawn on
 * the current line; a log line clears it first; a warning already shown
 * this run is counted, not printed; cli_term_finish() says how many. */
void cli_term_bar_drawn(bool on_line);
void cli_term_before_line(void);
bool cli_term_first_warning(const char *module, const char *line);
void cli_term_finish(void);

/* "s" for a count other than one: "%" PRIu64 " record%s", n, CLI_S(n). */
#define CLI_S(n) ((n) == 1 ? "" : "s")

/* Sends stdout to the null device from now on (-q on a command that is not
 * a report). */
void cli_silence_stdout(void);

/* The folder --cache DIR gave to cli_report_option(), or NULL. */
const char *cli_cache_option(void);

/*
 * --max-size SIZE|none in a writing command's option table: the cache's
 * size cap (kiln_cache_options.max_size), remembered by the cache; "none"
 * clears it. cli_report_option() and cli_prep_option() take it;
 * cli_open_cache_writer() passes it.
 */
#define CLI_OPT_MAX_SIZE 0x1002
#define CLI_MAX_SIZE_OPTION                                   \
    {                                                         \
        "max-size", required_argument, NULL, CLI_OPT_MAX_SIZE \
    }

/* Parses --max-size: SIZE (K, M, G suffixes; at least 64) or "none"
 * (KILN_CACHE_NO_CAP). Same return as cli_parse_u64. */
int cli_parse_max_size(const char *name, const char *text, uint64_t *out);

/* The cap --max-size gave to cli_report_option(): 0 when not given. */
uint64_t cli_max_size_option(void);

/* A cli_report_option() result: the option was --json; parsing goes on. */
#define CLI_NEXT_OPTION (-1)

/*
 * The options every report command shares, inside its getopt_long loop:
 * 'j' (--json) sets *json; 'h' (--help) prints the format `help` with the
 * arguments after it on stdout; anything else is cli_option_error().
 * @return CLI_NEXT_OPTION after --json, else the exit code to return.
 */
int cli_report_option(int ch, char **argv, bool *json, const char *help, ...)
    __attribute__((format(CLI_PRINTF_KIND, 4, 5)));

/*
 * The whole option parsing of a command whose only options are --cache
 * DIR, --max-size SIZE|none (cache compact and merge write), --json and
 * --help (cli_report_option); its operands start at optind after it.
 * @return CLI_NEXT_OPTION to go on, else the exit code to return.
 */
int cli_parse_report_options(int argc, char **argv, bool *json, const char *help, ...)
    __attribute__((format(CLI_PRINTF_KIND, 4, 5)));

/*
 * The whole option parsing of a command whose options are --cache DIR
 * (cli_parse_cache_dir; else the default folder), --reset and --max-size
 * SIZE|none (cli_max_size_option) when `reset` is not NULL (it sets
 * *reset: a writing command), --json and --help (cli_report_option); its
 * operands start at optind after it. `help` is a format, printed with the
 * arguments after it.
 * @return CLI_NEXT_OPTION to go on, else the exit code to return.
 */
int cli_parse_cache_options(int argc, char **argv, const char **dir, bool *reset, bool *json,
                            const char *help, ...) __attribute__((format(CLI_PRINTF_KIND, 6, 7)));

/*
 * After the options of a command that takes one cache folder: *dir is it.
 * @return 0, or the usage error "expected one cache folder".
 */
int cli_one_cache_dir(int argc, char **argv, const char **dir);

/*
 * The cache-affinity choice of every command: -1 when neither
 * --cache-affinity nor --no-cache-affinity was given, else 0 or 1. main()
 * takes both flags out of argv before a command sees it.
 */
extern int cli_cache_affinity_flag;

/*
 * Applies the cache-affinity rule (flag beats KILN_CACHE_AFFINITY, default
 * off) and pins the process when it says so. Called by commands that do
 * heavy work (prepare, start). @return 0, or KILN_EXIT_USAGE for a bad
 * environment value.
 */
int cli_apply_cache_affinity(const char *name);

/* ---- JSON output ------------------------------------------------------- */

/*
 * Every --json output is one object on stdout in the vocabulary of
 * docs/json.md: `schema`, `command`, `ok`, `error` ({code, message}, null
 * on success) and then the command's own fields, with the cache folder as
 * `cache_dir` and times as a `seconds` object (phase -> seconds). main()
 * prints it through cli_json_emit() after the command returned, so that a
 * failure prints one too.
 */
#define CLI_JSON_SCHEMA "kiln/1"

struct cli_json {
    char *buf;
    size_t len, cap;
    bool failed; /* out of memory: nothing is printed */
    int depth;
    bool need_comma[16];
};

/* Starts the command's report (one object; its fields are kept in memory). */
void cli_json_begin(struct cli_json *j);
/* Ends it: cli_json_emit() prints it with the shared fields. */
void cli_json_end(struct cli_json *j);
/* Values; `key` is NULL inside an array. Strings are escaped, and bytes
 * that are not valid UTF-8 become U+FFFD, so any path prints valid JSON. */
void cli_json_u64(struct cli_json *j, const char *key, uint64_t v);
void cli_json_i64(struct cli_json *j, const char *key, int64_t v);
void cli_json_double(struct cli_json *j, const char *key, double v);
void cli_json_bool(struct cli_json *j, const char *key, bool v);
void cli_json_str(struct cli_json *j, const char *key, const char *v);
void cli_json_null(struct cli_json *j, const char *key);
void cli_json_array_begin(struct cli_json *j, const char *key);
void cli_json_array_end(struct cli_json *j);
void cli_json_object_begin(struct cli_json *j, const char *key);
void cli_json_object_end(struct cli_json *j);
/* An array of `n` whole numbers under `key`. */
void cli_json_u64_array(struct cli_json *j, const char *key, const uint64_t *v, size_t n);

/* @return the length of the valid UTF-8 sequence of 2 to 4 bytes at p, or 0
 * (ASCII, or not valid: overlong, a surrogate, past U+10FFFF, cut short). */
size_t cli_utf8_sequence(const unsigned char *p);

/* @return whether --json stands on the command line (before any "--"). */
bool cli_json_wanted(int argc, char **argv);

/*
 * Prints the one --json object of `command`, which returned `exit_code`:
 * the shared fields, then the report the command ended with
 * cli_json_end() (if it got that far). `error` comes from what was noted:
 * the first kiln error code given to cli_exit_for(), cli_note_code() or
 * cli_note_error(), and the first message of cli_error()/cli_usage_error()/
 * cli_note_error() (the command's own word, which goes with that code), or
 * without one the first logged error line.
 */
void cli_json_emit(const char *command, int exit_code);

/*
 * The end of every command: flushes and closes stdout, where its report
 * went, and checks that it was written (a full disk shows only here).
 * @return `exit_code`, or KILN_EXIT_FAILED (when it was 0) after one line
 * on stderr saying the report was lost.
 */
int cli_finish_stdout(const char *name, int exit_code);

/* Records why the command failed without printing it (the first message
 * wins); `kiln_code` is a kiln error code, or 0. */
void cli_note_error(int kiln_code, const char *fmt, ...)
    __attribute__((format(CLI_PRINTF_KIND, 2, 3)));

/* Records a kiln error code for `error` (the first one wins). */
void cli_note_code(int kiln_code);

/* Sends the library's log lines to stderr as before, keeping the first
 * error line for cli_json_emit(). */
void cli_json_install_log_sink(void);

/* A dictionary id in text: 16 hex digits, or "none" for 0. @return buf. */
const char *cli_format_dict(char *buf, size_t cap, uint64_t dict_id);

/* Writes `v` as 16 hex digits, or null when it is 0 (no dictionary). */
void cli_json_hex_or_null(struct cli_json *j, const char *key, uint64_t v);

/* ---- progress ----------------------------------------------------------- */

/*
 * A progress display for long work: a bar redrawn in place on a terminal
 * (done/total, rate, time left), a plain line every few seconds otherwise.
 * It writes to stderr so that --json output on stdout stays clean.
 */
struct cli_progress {
    const char *label;
    uint64_t total;
    uint64_t start_ns;
    uint64_t last_ns;
    bool tty;
    bool quiet;
    unsigned lines; /* plain lines printed (no terminal) */
    uint64_t done;  /* the last count drawn or given */
    bool bytes;     /* the counts are bytes: drawn in IEC units (set after start) */
};

void cli_progress_start(struct cli_progress *p, const char *label, uint64_t total, bool quiet);
void cli_progress_update(struct cli_progress *p, uint64_t done);
void cli_progress_finish(struct cli_progress *p, uint64_t done);

/* ---- kiln prepare and kiln start ---------------------------------------- */

/*
 * The progress of kiln_prepare and kiln_warm_start: one bar a phase,
 * started when a phase first reports and finished when it is done. Start
 * it as {.phase = -1} and pass cli_phase_progress with it.
 */
struct cli_phase_progress {
    struct cli_progress bar;
    int phase; /* the phase the bar shows; -1 none yet, -2 the last one done */
};

/* A kiln_prep_progress_fn; `user` is a struct cli_phase_progress. */
void cli_phase_progress(void *user, enum kiln_prep_phase phase, uint64_t done, uint64_t total);

/* The progress bar of a cache's compact, prune, repack or merge
 * (kiln_cache_set_progress): attached to the handle before the operation,
 * closed (and detached) after it. With a NULL cache it is attached to
 * nothing: cli_cache_bar_report (a kiln_cache_progress_fn whose `user` is
 * the bar) draws it for another operation (import foz, cli_io_meter). */
struct cli_cache_bar {
    struct kiln_cache *cache;
    struct cli_progress bar;
    bool started, done;
    bool bytes; /* the counts are bytes (set after attach) */
};
void cli_cache_bar_attach(struct cli_cache_bar *b, struct kiln_cache *c);
void cli_cache_bar_report(void *user, const char *what, uint64_t done, uint64_t total);
void cli_cache_bar_close(struct cli_cache_bar *b);

/*
 * A progress bar over the bytes a library call reads of one file
 * (cli_meter.c): `io` is a struct kiln_io that forwards every call to the
 * default table and counts what is read from the file named `file`
 * ("programs.kpc") once `on`, against that file's size, drawn as the bar
 * `what`. For calls that take an I/O table (kiln_cache_check, a cache's
 * open for kiln_foz_export) and read that file from one thread.
 */
struct cli_io_meter {
    struct kiln_io io; /* first: what the library is given */
    const struct kiln_io *base;
    const char *file, *what;
    int fd; /* the metered file's descriptor while open, else -1 */
    uint64_t size, read;
    bool on;
    struct cli_cache_bar bar;
};
void cli_io_meter_init(struct cli_io_meter *m, const char *file, const char *what);
void cli_io_meter_close(struct cli_io_meter *m);

/* Ends a bar a stopped phase left open, at the count it reached (never
 * more than was done). */
void cli_phase_progress_close(struct cli_phase_progress *ps);

/* "off", "memory", "new", "loaded", "rejected". */
const char *cli_vk_cache_state_name(enum kiln_vk_cache_state st);

/*
 * Points iso->argv at the isolated workers' command: this executable's
 * path (/proc/self/exe; GetModuleFileName on Windows) and its private
 * `__worker` command (cmd_worker.c). For --isolate of prepare and start.
 * @return 0, or KILN_EXIT_FAILED after one error line naming `name`.
 */
int cli_isolate_worker(const char *name, struct kiln_isolate_options *iso);

/* "none", "input", "cache", "vulkan", "other". */
const char *cli_prep_step_name(enum kiln_prep_step step);

/*
 * Whether a run that returned `rc`, stopped at `step`, gets its summary
 * table: not for bad input, whose one error line says it all.
 */
bool cli_prep_shows_table(int rc, enum kiln_prep_step step);

/* The JSON fields of a run's Vulkan context: vulkan, device (null when
 * none) and, with one, pipeline_cache and pipeline_cache_loaded_bytes. */
void cli_json_prep_vulkan(struct cli_json *j, bool vulkan, const char *device,
                          enum kiln_vk_cache_state cache_state, size_t cache_loaded_bytes);

/* The last JSON fields of a run: peak_rss_bytes, and error_step (null when
 * `error` is 0; the error itself is noted for cli_json_emit()). */
void cli_json_prep_end(struct cli_json *j, uint64_t peak_rss, int error, enum kiln_prep_step step);

/* One row of a phase table; a row with a NULL name is left out. */
struct cli_phase_time {
    const char *name;
    uint64_t ns;
};

/* Writes "seconds": {phase: secs}, the times of a command of one phase. */
void cli_json_seconds(struct cli_json *j, const char *phase, double secs);

/* Writes "seconds": {phase: secs} of every row with a name. */
void cli_json_phase_seconds(struct cli_json *j, const struct cli_phase_time *rows, size_t n);

/* Prints a run's phase table (seconds a phase) and its peak memory. */
void cli_print_phase_table(const struct cli_phase_time *rows, size_t n, uint64_t peak_rss);

/* ---- the system (cli_os_unix.c, cli_os_win.c) ------------------------------ */

/* Makes the folder `dir` (not its parents); removes an empty one.
 * @return 0, or -1 with errno set (EEXIST: it is there). */
int cli_os_make_dir(const char *dir);
int cli_os_remove_dir(const char *dir);

/* @return the name of the null device ("/dev/null", "NUL"). */
const char *cli_os_null_device(void);

/* This executable's path, as UTF-8, into `out` (size `cap`).
 * @return whether it was found and fits. */
bool cli_os_self_exe(char *out, size_t cap);

/*
 * Makes the folder `dir` that a command writes a new cache into, unless it
 * is there; *made says whether this run made it (undo it with
 * cli_unmake_folder when the command fails before writing there).
 * @return 0, or the exit code after one error line ("NAME: DIR: cannot
 * make the folder: WHY").
 */
int cli_make_folder(const char *name, const char *dir, bool *made);

/* Removes the folder cli_make_folder made (*made), leaving it as found. */
void cli_unmake_folder(const char *dir, bool made);

/* ---- stopping on a signal (cli_stop.c, cli_stop_unix.c, cli_stop_win.c) ---
 *
 * SIGINT or SIGTERM (Ctrl-C or Ctrl-Break on Windows) asks a long command
 * to stop at its next safe point: cli_stop_asked is its cancel callback.
 * A repeat within CLI_STOP_ECHO_MS of the first is the same request (one
 * signal sent to the whole process group reaches kiln twice: a terminal's
 * Ctrl-C, `timeout -s INT`); a later one ends the process at once. And
 * whatever a library call is stuck in, the process ends within the stop
 * deadline of the first request ($KILN_STOP_DEADLINE_MS, default
 * CLI_STOP_DEADLINE_MS): a watchdog thread writes one line and ends it
 * (_exit, exit code 1). That is safe because kiln's cache is crash-safe by
 * design: what was synced is kept, the rest is redone by the next run.
 */
#define CLI_STOP_ECHO_MS     500u
#define CLI_STOP_DEADLINE_MS 10000u

/* Installs the handlers and starts the watchdog; `name` (the command's,
 * must outlive the process) starts its line. Call once. */
void cli_stop_install(const char *name);

/* Whether a stop was asked (a kiln_prepare_options.cancel). Thread-safe. */
bool cli_stop_asked(void *user);

/* Asks the stop from inside the process, as a first signal would (the
 * deadline starts now unless a signal started it already). Thread-safe. */
void cli_stop_request(void);

/* Whether a signal (not cli_stop_request) asked the stop: the command then
 * exits KILN_EXIT_SIGNAL. Thread-safe. */
bool cli_stop_by_signal(void);

/* ---- small helpers ------------------------------------------------------ */

#define CLI_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* Seconds between two kiln_now_ns() readings. */
static inline double cli_seconds(uint64_t from_ns, uint64_t to_ns)
{
    return (double)(to_ns - from_ns) / 1e9;
}

/* Formats a byte count as "1.5 GiB" into buf. @return buf. */
const char *cli_format_bytes(char *buf, size_t cap, uint64_t bytes);

#endif /* KILN_CLI_H */
