/*
 * cli_kinds.h - the per-kind pipeline counts that kiln prepare and kiln
 * start print (text and --json), and the Fossilize builder they pass.
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
void cli_print_kinds(const struct kiln_kind_counts *kinds,
                     const struct kiln_foz_builder_stats *foz);

#endif /* KILN_CLI_KINDS_H */
