/*
 * json_vocab_check.c - checks one `kiln ... --json` output against the
 * vocabulary of docs/json.md. tests/cli/json_vocab.sh runs every command
 * and pipes each output here.
 *
 * usage: json_vocab_check ok|fail [DOC] < output
 *
 * The output must be exactly one JSON object (a trailing newline allowed)
 * in valid UTF-8 with: `schema` "kiln/1"; `command` a string; `ok` a bool
 * equal to the expectation; `error` null when ok, else an object with a
 * non-empty string `code` and `message`. Anywhere in it: no key of the old
 * vocabulary (`dir`, `cache`, `out`, `open_s`, `read_us`), no time outside
 * `seconds` (a key ending in `_s` that is not a rate `_per_s`, or in `_us`),
 * and every `seconds` an object of numbers (or null). `cache_dir`, where
 * present, is a string. One value form a meaning: `stamp` is 16 hex
 * digits, `dict_id` (and `dict_id_before`, `dict_id_after`) 16 hex digits or
 * null (never zeros), a `*_bytes` a whole number. With DOC (docs/json.md):
 * every key of the object, at any depth (but inside `seconds`, whose keys
 * are the phase table's, and `error`), is named as `key` in the row of the
 * table "Every key, by command" whose first cell is the object's `command`.
 * Exit 0 when all hold, else 1 with one line a problem on stderr.
 */
#include <json-c/json.h>

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int problems;

static void problem(const char *what, const char *where)
{
    fprintf(stderr, "json_vocab_check: %s%s%s\n", what, where ? ": " : "", where ? where : "");
    problems++;
}

/* @return whether text[0..n) is valid UTF-8 (no overlongs, surrogates or
 * code points past U+10FFFF). */
static bool valid_utf8(const unsigned char *t, size_t n)
{
    for (size_t i = 0; i < n;) {
        unsigned char c = t[i];
        size_t len;
        unsigned long cp;
        if (c < 0x80) {
            i++;
            continue;
        } else if (c >= 0xc2 && c <= 0xdf) {
            len = 2;
            cp = c & 0x1f;
        } else if (c >= 0xe0 && c <= 0xef) {
            len = 3;
            cp = c & 0x0f;
        } else if (c >= 0xf0 && c <= 0xf4) {
            len = 4;
            cp = c & 0x07;
        } else {
            return false;
        }
        if (i + len > n)
            return false;
        for (size_t k = 1; k < len; k++) {
            if ((t[i + k] & 0xc0) != 0x80)
                return false;
            cp = (cp << 6) | (t[i + k] & 0x3f);
        }
        if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
            (cp >= 0xd800 && cp <= 0xdfff))
            return false;
        i += len;
    }
    return true;
}

static bool ends_with(const char *s, const char *tail)
{
    size_t a = strlen(s), b = strlen(tail);
    return a >= b && strcmp(s + a - b, tail) == 0;
}

/* The row of the key table for the command being checked ("" none). */
static char doc_row[8192];
static bool doc_given;

/* Finds the row "| `COMMAND` | ..." of DOC's key table (a command whose
 * objects hold only the four shared fields needs none). */
static void load_doc_row(const char *doc, const char *command)
{
    FILE *f = fopen(doc, "r");
    if (!f) {
        problem("cannot read the key table", doc);
        return;
    }
    char want[256], line[sizeof(doc_row)];
    snprintf(want, sizeof(want), "| `%s` |", command);
    while (fgets(line, sizeof(line), f))
        if (strncmp(line, want, strlen(want)) == 0) {
            snprintf(doc_row, sizeof(doc_row), "%s", line);
            break;
        }
    fclose(f);
}

static bool is_hex16(struct json_object *v)
{
    if (!json_object_is_type(v, json_type_string) || json_object_get_string_len(v) != 16)
        return false;
    const char *t = json_object_get_string(v);
    return strspn(t, "0123456789abcdef") == 16;
}

/* @return whether v is a whole number or an array of them. */
static bool whole_numbers(struct json_object *v)
{
    if (!json_object_is_type(v, json_type_array))
        return json_object_is_type(v, json_type_int);
    for (size_t i = 0; i < json_object_array_length(v); i++)
        if (!json_object_is_type(json_object_array_get_idx(v, i), json_type_int))
            return false;
    return true;
}

/* The one value form of a shared key, and the key named in the doc row. */
static void check_key(const char *key, struct json_object *child, const char *where)
{
    if (strcmp(key, "stamp") == 0 && !is_hex16(child))
        problem("`stamp` is not 16 hex digits", where);
    if (strncmp(key, "dict_id", 7) == 0 &&
        (child ? !is_hex16(child) || strcmp(json_object_get_string(child), "0000000000000000") == 0
               : false))
        problem("a dictionary id is not 16 hex digits or null (none is null, not zeros)", where);
    if (ends_with(key, "_bytes") && child && !whole_numbers(child))
        problem("a `*_bytes` is not a whole number (or a list of them)", where);
    if (doc_given && !doc_row[0]) {
        problem("a key of a command docs/json.md's key table has no row for", where);
    } else if (doc_given) {
        char named[256];
        snprintf(named, sizeof(named), "`%s`", key);
        if (!strstr(doc_row, named))
            problem("a key docs/json.md's key table does not list for the command", where);
    }
}

/* Checks every key of `v` and below; `path` names where, for messages. */
static void walk(struct json_object *v, const char *path)
{
    if (json_object_is_type(v, json_type_array)) {
        size_t n = json_object_array_length(v);
        for (size_t i = 0; i < n; i++)
            walk(json_object_array_get_idx(v, i), path);
        return;
    }
    if (!json_object_is_type(v, json_type_object))
        return;
    json_object_object_foreach(v, key, child)
    {
        char where[512];
        snprintf(where, sizeof(where), "%s.%s", path, key);
        static const char *const old[] = {"dir", "cache", "out", "open_s", "read_us"};
        for (size_t i = 0; i < sizeof(old) / sizeof(old[0]); i++)
            if (strcmp(key, old[i]) == 0)
                problem("a key of the old vocabulary", where);
        if ((ends_with(key, "_s") && !ends_with(key, "_per_s")) || ends_with(key, "_us"))
            problem("a time outside `seconds`", where);
        if (strcmp(key, "cache_dir") == 0 && !json_object_is_type(child, json_type_string))
            problem("`cache_dir` is not a string", where);
        bool shared =
            strcmp(path, "$") == 0 && (!strcmp(key, "schema") || !strcmp(key, "command") ||
                                       !strcmp(key, "ok") || !strcmp(key, "error"));
        if (!shared)
            check_key(key, child, where);
        if (strcmp(key, "error") == 0 && strcmp(path, "$") == 0)
            continue; /* {code, message}: checked in main */
        if (strcmp(key, "seconds") == 0) {
            if (!json_object_is_type(child, json_type_object)) {
                problem("`seconds` is not an object", where);
            } else {
                json_object_object_foreach(child, phase, secs)
                {
                    (void)phase;
                    if (secs && !json_object_is_type(secs, json_type_double) &&
                        !json_object_is_type(secs, json_type_int))
                        problem("a `seconds` value is not a number", where);
                }
            }
            continue; /* its keys are the phase table's */
        }
        walk(child, where);
    }
}

int main(int argc, char **argv)
{
    if (argc < 2 || argc > 3 || (strcmp(argv[1], "ok") != 0 && strcmp(argv[1], "fail") != 0)) {
        fprintf(stderr, "usage: json_vocab_check ok|fail [DOC] < output\n");
        return 2;
    }
    bool want_ok = strcmp(argv[1], "ok") == 0;
    size_t cap = 1 << 16, len = 0;
    char *text = malloc(cap);
    for (size_t got; text && (got = fread(text + len, 1, cap - len - 1, stdin)) > 0;) {
        len += got;
        if (len + 1 == cap) {
            char *bigger = realloc(text, cap * 2);
            if (!bigger) {
                free(text);
                text = NULL;
                break;
            }
            text = bigger;
            cap *= 2;
        }
    }
    if (!text) {
        fprintf(stderr, "json_vocab_check: out of memory\n");
        return 2;
    }
    text[len] = '\0';
    if (len == 0) {
        problem("no output on stdout", NULL);
        free(text);
        return 1;
    }
    if (!valid_utf8((const unsigned char *)text, len))
        problem("the output is not valid UTF-8", NULL);
    if (memchr(text, '\0', len))
        problem("the output holds a NUL byte", NULL);

    struct json_tokener *tok = json_tokener_new();
    json_tokener_set_flags(tok, JSON_TOKENER_STRICT);
    struct json_object *root = json_tokener_parse_ex(tok, text, (int)len);
    size_t used = (size_t)json_tokener_get_parse_end(tok);
    if (!root) {
        problem("not one JSON object", json_tokener_error_desc(json_tokener_get_error(tok)));
    } else {
        /* One object and nothing after it but its newline. */
        for (size_t i = used; i < len; i++)
            if (text[i] != '\n' && text[i] != ' ') {
                problem("more than one JSON value on stdout", NULL);
                break;
            }
        if (!json_object_is_type(root, json_type_object))
            problem("the output is not an object", NULL);
    }
    json_tokener_free(tok);
    if (!root || !json_object_is_type(root, json_type_object)) {
        json_object_put(root);
        free(text);
        return 1;
    }

    struct json_object *v;
    if (!json_object_object_get_ex(root, "schema", &v) ||
        !json_object_is_type(v, json_type_string) ||
        strcmp(json_object_get_string(v), "kiln/1") != 0)
        problem("`schema` is not \"kiln/1\"", NULL);
    if (!json_object_object_get_ex(root, "command", &v) ||
        !json_object_is_type(v, json_type_string))
        problem("no `command` string", NULL);
    else if (argc == 3) {
        doc_given = true;
        load_doc_row(argv[2], json_object_get_string(v));
    }
    bool ok = false;
    if (!json_object_object_get_ex(root, "ok", &v) || !json_object_is_type(v, json_type_boolean))
        problem("no `ok` bool", NULL);
    else if ((ok = json_object_get_boolean(v)) != want_ok)
        problem(want_ok ? "`ok` is false, expected true" : "`ok` is true, expected false", NULL);
    if (!json_object_object_get_ex(root, "error", &v)) {
        problem("no `error`", NULL);
    } else if (ok && v != NULL) {
        problem("`error` is not null although `ok` is true", NULL);
    } else if (!ok) {
        struct json_object *code, *message;
        if (!json_object_is_type(v, json_type_object) ||
            !json_object_object_get_ex(v, "code", &code) ||
            !json_object_is_type(code, json_type_string) || !json_object_get_string_len(code) ||
            !json_object_object_get_ex(v, "message", &message) ||
            !json_object_is_type(message, json_type_string) || !json_object_get_string_len(message))
            problem("`error` is not {code, message} with both non-empty", NULL);
    }
    walk(root, "$");
    json_object_put(root);
    free(text);
    return problems ? 1 : 0;
}
