/*
 * kt_cli.c - see kt_cli.h. The command line is built on the heap (an
 * argument list may name dozens of archives); nothing here keeps state.
 */
#include "kt_cli.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

int kt_cli_run(const char *out, const char *args)
{
    size_t cap = strlen(args) + 2 * strlen(out) + 4096;
    char *cmd = malloc(cap);
    KT_NEED(cmd);
    /* Under AddressSanitizer a run that makes a Vulkan context checks no
     * leaks: the loader unloads the driver with the context, and
     * LeakSanitizer then cannot name the library its leaks come from for
     * tests/support/lsan.supp (as in tests/prep/test_prepare_cli.c). The
     * import makes none and keeps the check. */
    bool vulkan = strncmp(args, "import", 6) != 0;
    snprintf(cmd, cap, "%s'%s' %s > '%s' 2> '%s.err'",
             vulkan ? "ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 " : "", KILN_CLI, args, out,
             out);
    int st = system(cmd);
    free(cmd);
    KT_NEED(st != -1);
    if (WIFSIGNALED(st))
        return 128 + WTERMSIG(st);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 255;
}

struct json_object *kt_cli_json(const char *path)
{
    struct json_object *o = json_object_from_file(path);
    if (!o) {
        printf("not one JSON object in %s\n", path);
        char cmd[4300];
        snprintf(cmd, sizeof(cmd), "cat '%s' '%s.err' | head -20", path, path);
        if (system(cmd) != 0)
            printf("(could not show %s)\n", path);
    }
    KT_NEED(o);
    return o;
}

uint64_t kt_json_num(struct json_object *o, const char *dotted)
{
    char key[128];
    const char *p = dotted;
    while (o && *p) {
        const char *dot = strchr(p, '.');
        size_t n = dot ? (size_t)(dot - p) : strlen(p);
        snprintf(key, sizeof(key), "%.*s", (int)n, p);
        struct json_object *v = NULL;
        if (!json_object_object_get_ex(o, key, &v))
            return UINT64_MAX;
        o = v;
        p += n + (dot ? 1 : 0);
    }
    return o ? (uint64_t)json_object_get_int64(o) : UINT64_MAX;
}

int64_t kt_json_text_int(const char *text, const char *key)
{
    struct json_object *j = json_tokener_parse(text), *v;
    int64_t x = -1;
    if (j && json_object_object_get_ex(j, key, &v))
        x = json_object_get_int64(v);
    else
        kt_fail(__FILE__, __LINE__, "no field '%s' in the JSON", key);
    json_object_put(j);
    return x;
}

void kt_cli_require_vulkan(struct json_object *o, const char *out)
{
    struct json_object *v = NULL, *step = NULL;
    if ((json_object_object_get_ex(o, "vulkan", &v) && json_object_get_boolean(v)) ||
        !json_object_object_get_ex(o, "error_step", &step) ||
        !json_object_is_type(step, json_type_string) ||
        strcmp(json_object_get_string(step), "vulkan") != 0)
        return; /* built, or failed for another reason: the checks say */
    printf("skipped: no Vulkan device for kiln (see %s.err)\n", out);
    json_object_put(o);
    exit(77);
}
