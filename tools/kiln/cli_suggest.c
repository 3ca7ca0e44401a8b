/*
 * cli_suggest.c - "did you mean" for mistyped commands and options.
 *
 * Design.
 * - The distance is the optimal string alignment distance (Levenshtein
 *   plus the swap of two neighbours, the commonest typo: `perpare`). A
 *   word is suggested when it is within a third of the typed length (at
 *   least 1, at most 3) or when the typed word is a prefix of exactly it
 *   and nothing else, so `--cahce` finds `--cache` and `pre` finds
 *   `prepare`, while `x` finds nothing.
 * - Options: every command's getopt_long loop goes through cli_getopt(),
 *   which remembers the command's table for cli_option_error(). The table
 *   is the command's own static array, so the pointer stays valid; the
 *   command line is parsed on the main thread only.
 * - Old spellings of options (docs/cli.md, "Old spellings") stay accepted:
 *   each one's table entry has a value of its own, and its case calls
 *   cli_deprecated() before doing what the new spelling does.
 */
#include "cli.h"

#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#define SUGGEST_MAX_LEN 64

static const struct option *current_options;

int cli_getopt(int argc, char **argv, const char *shorts, const struct option *longs)
{
    current_options = longs;
    return getopt_long(argc, argv, shorts, longs, NULL);
}

static size_t min3(size_t a, size_t b, size_t c)
{
    size_t m = a < b ? a : b;
    return m < c ? m : c;
}

size_t cli_edit_distance(const char *a, const char *b)
{
    size_t n = strlen(a), m = strlen(b);
    if (n > SUGGEST_MAX_LEN || m > SUGGEST_MAX_LEN)
        return (size_t)-1;
    /* Three rows of the table: two back (for a swap), one back, this one. */
    size_t rows[3][SUGGEST_MAX_LEN + 1];
    size_t *back2 = rows[0], *back1 = rows[1], *cur = rows[2];
    for (size_t j = 0; j <= m; j++)
        back1[j] = j;
    for (size_t i = 1; i <= n; i++) {
        cur[0] = i;
        for (size_t j = 1; j <= m; j++) {
            size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
            cur[j] = min3(back1[j] + 1, cur[j - 1] + 1, back1[j - 1] + cost);
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
                back2[j - 2] + 1 < cur[j])
                cur[j] = back2[j - 2] + 1;
        }
        size_t *t = back2;
        back2 = back1;
        back1 = cur;
        cur = t;
    }
    return back1[m];
}

void cli_suggest_begin(struct cli_suggest *s, const char *typed)
{
    s->typed = typed;
    s->best = NULL;
    s->best_distance = (size_t)-1;
    s->prefix_of = NULL;
    s->prefix_count = 0;
}

void cli_suggest_offer(struct cli_suggest *s, const char *word)
{
    size_t typed_len = strlen(s->typed);
    if (typed_len > 0 && strncmp(word, s->typed, typed_len) == 0) {
        s->prefix_of = word;
        s->prefix_count++;
    }
    size_t d = cli_edit_distance(s->typed, word);
    if (d < s->best_distance) {
        s->best_distance = d;
        s->best = word;
    }
}

const char *cli_suggest_result(const struct cli_suggest *s)
{
    size_t limit = strlen(s->typed) / 3;
    limit = limit < 1 ? 1 : limit > 3 ? 3 : limit;
    if (s->best && s->best_distance > 0 && s->best_distance <= limit)
        return s->best;
    if (s->prefix_count == 1)
        return s->prefix_of;
    return NULL;
}

/* The option as typed, without its dashes and any "=value". */
static void typed_option(const char *arg, char *out, size_t cap)
{
    while (*arg == '-')
        arg++;
    size_t n = strcspn(arg, "=");
    n = n < cap - 1 ? n : cap - 1;
    memcpy(out, arg, n);
    out[n] = '\0';
}

const char *cli_suggest_option(const char *arg)
{
    if (!current_options || !arg || strncmp(arg, "--", 2) != 0)
        return NULL;
    char typed[SUGGEST_MAX_LEN + 1];
    typed_option(arg, typed, sizeof(typed));
    struct cli_suggest s;
    cli_suggest_begin(&s, typed);
    for (const struct option *o = current_options; o->name; o++)
        cli_suggest_offer(&s, o->name);
    return cli_suggest_result(&s);
}

void cli_deprecated(const char *name, const char *old, const char *now)
{
    kiln_log(KILN_LOG_WARN, "cli", "%s: %s is an old spelling: use %s (the old one still works)",
             name, old, now);
}
