/*
 * cli_kinds.h - what kiln prepare and kiln start share: the per-kind
 * pipeline counts they print (text and --json), the Fossilize builder they
 * pass, and the options they both take.
 */
#ifndef KILN_CLI_KINDS_H
#define KILN_CLI_KINDS_H

#include "cli.h"

/* The builders kiln prepare and kiln start pass: the Fossilize state
 * builder (kind KILN_STATE_FOZ), made before the run and destroyed after
 * it. Zero-initialise. */
struct cli_builders {
    struct kiln_builder foz;
    struct kiln_builder list[1];
    size_t n;
};

/* Makes the builders. @return 0, or KILN_ENOMEM (after one error line). */
int cli_builders_make(const char *command, struct cli_builders *b);

/* The Fossilize builder's counts (zeros before its first build). */
void cli_builders_foz_stats(const struct cli_builders *b, struct kiln_foz_builder_stats *st);

/* Destroys the builders (a zeroed struct is a no-op). */
void cli_builders_free(struct cli_builders *b);

/* @return the name of a state kind in the output: "builtin", "foz", "app". */
const char *cli_state_kind_name(unsigned kind);

/*
 * Writes "kinds": {"builtin": {built, skipped, failed[, skip_reason]},
 * "foz": {..., "graphics": {built, skipped, failed}, "compute": ...,
 * "raytracing": ...}, "app": {...}} (docs/json.md). `foz` NULL (an
 * isolated run, whose builders counted in the workers): each split is null.
 */
void cli_json_kinds(struct cli_json *j, const struct kiln_kind_counts *kinds,
                    const struct kiln_foz_builder_stats *foz);

/* Prints one "  kind ..." line per state kind that had pipelines, the FOZ
 * one split by Fossilize kind unless `foz` is NULL. */
/* The driver's word line of kiln prepare and kiln start: how many of the
 * pipelines built the driver gave creation feedback for, how many its
 * pipeline cache held (no compile), and its own time; "no feedback" when
 * it gave none. */
void cli_print_driver_word(uint64_t feedback, uint64_t cache_hits, uint64_t driver_ns);

void cli_print_kinds(const struct kiln_kind_counts *kinds,
                     const struct kiln_foz_builder_stats *foz);

/* What isolated workers did in a run (the isolated_* fields of
 * kiln_prepare_summary and kiln_start_summary alike), as kiln prepare,
 * kiln start and kiln bench replay report it: CLI_ISOLATED(summary). */
struct cli_isolated {
    uint64_t workers, batches, resent, early_timeouts, time_limit_ms;
    uint64_t ready_at_phase; /* of workers, those started with the run */
};
#define CLI_ISOLATED(s)                                                    \
    ((struct cli_isolated){.workers = (s)->isolated_workers,               \
                           .batches = (s)->isolated_batches,               \
                           .resent = (s)->isolated_resent,                 \
                           .early_timeouts = (s)->isolated_early_timeouts, \
                           .time_limit_ms = (s)->isolated_time_limit_ms,   \
                           .ready_at_phase = (s)->isolated_early_workers})

/* Writes "isolated": {workers, workers_started (the same count: the
 * worker processes the sizing rule started; `workers` is its kiln/1
 * name), workers_ready_at_phase (of them, those started with the run),
 * batches, resent, early_timeouts, time_limit_ms}, or null for
 * `iso` NULL (a run in threads). */
void cli_json_isolated(struct cli_json *j, const struct cli_isolated *iso);

/*
 * The options kiln prepare and kiln start share: --cache DIR, --jobs
 * N|auto, --no-vulkan, --device N, --json, --isolate, --timeout-ms MS and
 * --help. The pointers are the command's own option fields, set before its
 * getopt_long loop; zero-initialise the rest.
 */
struct cli_prep_flags {
    const char **cache_dir;
    unsigned *jobs;
    bool *no_vulkan;
    bool *use_device_index;
    unsigned *device;
    bool json;
    bool isolate;
    struct kiln_isolate_options iso;           /* --timeout-ms; the worker command with --isolate */
    const char *layers[KILN_CACHE_MAX_LAYERS]; /* --layer DIR, repeatable */
    size_t nlayers;
    uint64_t max_size; /* --max-size SIZE|none (CLI_OPT_MAX_SIZE; kiln prepare): 0 not given */
};

/*
 * Inside the getopt_long loop: takes one of the shared options, given by
 * the letters 'C', 'j', 'V', 'd', 'J', 'I', 'T', 'L', CLI_OPT_MAX_SIZE and 'h' ('h' prints the
 * format `help` with the arguments after it on stdout); anything else is
 * cli_option_error(). @return CLI_NEXT_OPTION when it took an option that
 * lets parsing go on, else the exit code to return.
 */
int cli_prep_option(const char *name, int ch, char **argv, struct cli_prep_flags *f,
                    const char *help, ...) __attribute__((format(CLI_PRINTF_KIND, 5, 6)));

/*
 * After the options: --timeout-ms needs --isolate; --isolate points f->iso
 * at the worker command (cli_isolate_worker); then the cache affinity is
 * applied and the builders are made (cli_builders_make).
 * @return KILN_EXIT_OK with `builders` to free, or the exit code after one
 * error line.
 */
int cli_prep_setup(const char *name, struct cli_prep_flags *f, struct cli_builders *builders);

#endif /* KILN_CLI_KINDS_H */
