#!/bin/sh
# check_api_docs_selftest.sh CHECKER - the negative control of
# check_api_docs.sh: a small tree whose header and table keep the rule must
# pass; a declaration without a thread-safety statement, one whose doc block
# is not right before it, and one missing from docs/api.md must each fail,
# with one line naming it.
set -u
checker=${1:?usage: check_api_docs_selftest.sh CHECKER}
tmp=$(mktemp -d) || exit 2
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/include/kiln" "$tmp/docs"
cat > "$tmp/include/kiln/fake.h" <<'H'
#define KILN_API
/* Counts. Thread-safe. */
KILN_API int kiln_fake_count(void);

/*
 * Frees it. NULL is a no-op.
 * Thread safety: only call on it.
 */
KILN_API void kiln_fake_free(void *p);

/* ---------------------------------------------------------------------------
 * Names
 *
 * Thread safety for this section: any thread (static strings).
 * ------------------------------------------------------------------------ */

/* The name of a thing. */
KILN_API const char *kiln_fake_name(int thing);
H
printf '| `kiln_fake_count` | counts | any thread |\n| `kiln_fake_free` | frees | only call |\n| `kiln_fake_name` | names | any thread |\n' \
    > "$tmp/docs/api.md"
if ! sh "$checker" "$tmp" > "$tmp/out" 2>&1; then
    echo "selftest: a tree that keeps the rule was refused:"; cat "$tmp/out"; exit 1
fi
cat >> "$tmp/include/kiln/fake.h" <<'H'

/* ---------------------------------------------------------------------------
 * More
 * ------------------------------------------------------------------------ */

/* Frobs. Runs on worker threads. */
KILN_API int kiln_fake_frob(int x);

/* Undocumented below. Thread-safe. */

KILN_API int kiln_fake_loose(int x);
/* Thread-safe. */
KILN_API int kiln_fake_untabled(int x);
H
printf '| `kiln_fake_frob` | frobs | ? |\n| `kiln_fake_loose` | loose | ? |\n' >> "$tmp/docs/api.md"
if sh "$checker" "$tmp" > "$tmp/out" 2>&1; then
    echo "selftest: a tree that breaks the rule passed:"; cat "$tmp/out"; exit 1
fi
for want in 'include/kiln/fake.h:25: kiln_fake_frob: its doc block says nothing of thread safety' \
            'include/kiln/fake.h:29: kiln_fake_loose: no doc block right before it' \
            'docs/api.md: kiln_fake_untabled: not in the table'; do
    if ! grep -qF "$want" "$tmp/out"; then
        echo "selftest: no line for '$want' in:"; cat "$tmp/out"; exit 1
    fi
done
if [ "$(wc -l < "$tmp/out")" -ne 3 ]; then
    echo "selftest: expected exactly three offenders:"; cat "$tmp/out"; exit 1
fi
echo "selftest: check_api_docs refuses an undocumented or untabled function and passes the rest"
