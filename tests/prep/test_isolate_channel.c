/*
 * test_isolate_channel.c - isolation's platform layer (isolate_unix.c,
 * isolate_win.c) without Vulkan: kiln__iso_spawn starts this very test
 * executable in a child mode ("--child MODE ..."), which echoes its
 * arguments, copies a message back, crashes or hangs. So the channel, the
 * command line's quoting, deadlines, kills and the description of how a
 * child ended are checked on every platform, wine included.
 *
 * No case measures time: a deadline only has to end a wait that would
 * otherwise never end.
 */
#include "kiln_test.h"
#include "kiln_internal.h"
#include "isolate_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef _WIN32
#include <windows.h>

#include <shellapi.h>
#else
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>
#endif

#define LIMIT_NS ((uint64_t)120 * 1000000000u) /* ends a wait that went wrong */

/* This executable's path, as UTF-8. */
static const char *self_path(void)
{
    static char path[4096];
#ifdef _WIN32
    wchar_t w[2048];
    DWORD n = GetModuleFileNameW(NULL, w, 2048);
    if (n == 0 || n >= 2048 ||
        !WideCharToMultiByte(CP_UTF8, 0, w, -1, path, (int)sizeof(path), NULL, NULL))
        return NULL;
#else
    /* The link itself: it still runs this binary when a rebuild has
     * replaced the file meanwhile (its target then ends in " (deleted)"). */
    snprintf(path, sizeof(path), "/proc/self/exe");
#endif
    return path;
}

/* ---- the child's side ------------------------------------------------------ */

static int child_main(int argc, char **argv)
{
#ifdef _WIN32
    /* The class the child was started in (kiln__iso_worker_init may enter
     * background mode, which wine reports as another class). */
    DWORD start_class = GetPriorityClass(GetCurrentProcess());
#endif
    kiln__iso_worker_init();
    const char *mode = argv[2];
    if (strcmp(mode, "echo") == 0) {
        /* Each argument after the mode, then a newline. On Windows the
         * arguments are read from the wide command line (main's are in the
         * ANSI code page), which also checks its quoting against
         * CommandLineToArgvW's rules. */
#ifdef _WIN32
        int wargc = 0;
        wchar_t **wargv = CommandLineToArgvW(GetCommandLineW(), &wargc);
        for (int i = 3; wargv && i < wargc; i++) {
            char arg[1024];
            if (!WideCharToMultiByte(CP_UTF8, 0, wargv[i], -1, arg, (int)sizeof(arg), NULL, NULL) ||
                kiln__iso_fd_write(1, arg, strlen(arg)) < 0 || kiln__iso_fd_write(1, "\n", 1) < 0)
                return 2;
        }
        LocalFree(wargv);
#else
        for (int i = 3; i < argc; i++)
            if (kiln__iso_fd_write(1, argv[i], strlen(argv[i])) < 0 ||
                kiln__iso_fd_write(1, "\n", 1) < 0)
                return 2;
#endif
        return 0;
    }
    if (strcmp(mode, "copy") == 0) {
        /* A length (4 bytes, little-endian) and that many bytes, sent back
         * whole, until the end of input. */
        for (;;) {
            uint8_t len[4];
            int rc = kiln__iso_fd_read(0, len, 4);
            if (rc == KILN_ECANCELED)
                return 0;
            if (rc < 0)
                return 3;
            uint32_t n = kiln__load_le32(len);
            char *buf = malloc(n ? n : 1);
            if (!buf || kiln__iso_fd_read(0, buf, n) < 0 || kiln__iso_fd_write(1, buf, n) < 0)
                return 4;
            free(buf);
        }
    }
    if (strcmp(mode, "crash") == 0) {
#ifdef _WIN32
        RaiseException(EXCEPTION_ACCESS_VIOLATION, EXCEPTION_NONCONTINUABLE, 0, NULL);
#else
        signal(SIGSEGV, SIG_DFL);
        raise(SIGSEGV);
#endif
        return 5;
    }
    if (strcmp(mode, "hang") == 0)
        kiln__iso_sleep_forever();
    if (strcmp(mode, "priority") == 0) {
        char line[64];
#ifdef _WIN32
        snprintf(line, sizeof(line), "%s", start_class == IDLE_PRIORITY_CLASS ? "idle" : "normal");
#else
        snprintf(line, sizeof(line), "nice %d", getpriority(PRIO_PROCESS, 0));
#endif
        return kiln__iso_fd_write(1, line, strlen(line)) < 0 ? 2 : 0;
    }
    return 6;
}

/* ---- the parent's side ----------------------------------------------------- */

static int spawn_child(const char *const *args, struct kiln__iso_proc **p)
{
    const char *argv[16];
    size_t n = 0;
    argv[n++] = self_path();
    argv[n++] = "--child";
    for (size_t i = 0; args[i] && n < 15; i++)
        argv[n++] = args[i];
    argv[n] = NULL;
    if (!argv[0])
        return KILN_ENOENT;
    return kiln__iso_spawn(argv, false, p);
}

/* Receives until the child's end closes. @return the bytes (malloc'd). */
static char *recv_all(struct kiln__iso_proc *p, size_t *len, int *end_rc)
{
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap + 1);
    uint64_t deadline = kiln_now_ns() + LIMIT_NS;
    for (;;) {
        int rc = kiln__iso_recv(p, buf + n, 1, deadline);
        if (rc < 0) {
            *end_rc = rc;
            break;
        }
        if (++n == cap) {
            char *more = realloc(buf, cap * 2 + 1);
            if (!more)
                break;
            buf = more;
            cap *= 2;
        }
    }
    buf[n] = '\0';
    *len = n;
    return buf;
}

/* Arguments with spaces, quotes, backslashes (before a quote, at the end)
 * and non-ASCII text reach the child unchanged. */
KT_CASE(args_reach_child)
{
    const char *args[] = {
        "echo", "plain", "a b", "q\"x", "tail\\", "", "two\\\\\"q", "\t tab", "\xc3\xbcn\xc3\xaf",
        NULL};
    struct kiln__iso_proc *p = NULL;
    KT_REQUIRE_OK(spawn_child(args, &p));
    KT_CHECK(kiln__iso_pid(p) > 0);
    size_t len = 0;
    int end_rc = 0;
    char *got = recv_all(p, &len, &end_rc);
    KT_CHECK_EQ(end_rc, KILN_ECRASH); /* its end closed when it exited */
    char want[256] = "";
    for (size_t i = 1; args[i]; i++) {
        strcat(want, args[i]);
        strcat(want, "\n");
    }
    KT_CHECK(strcmp(got, want) == 0);
    if (strcmp(got, want) != 0)
        fprintf(stderr, "got:\n%s\nwant:\n%s\n", got, want);
    free(got);
    char how[96];
    kiln__iso_end(p, 30000, how, sizeof(how));
    KT_CHECK(strcmp(how, "exited with code 0") == 0);
    if (strcmp(how, "exited with code 0") != 0)
        fprintf(stderr, "how: %s\n", how);
}

/* Messages larger than the pipe's buffer go both ways intact. */
KT_CASE(large_messages_both_ways)
{
    const char *args[] = {"copy", NULL};
    struct kiln__iso_proc *p = NULL;
    KT_REQUIRE_OK(spawn_child(args, &p));
    size_t sizes[] = {1, 70000, 3u << 20};
    for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
        uint32_t n = (uint32_t)sizes[s];
        uint8_t *out = malloc(4 + (size_t)n), *in = malloc(n);
        KT_REQUIRE(out && in);
        kiln__store_le32(out, n);
        for (uint32_t i = 0; i < n; i++)
            out[4 + i] = (uint8_t)(i * 131u + s);
        uint64_t deadline = kiln_now_ns() + LIMIT_NS;
        KT_CHECK_OK(kiln__iso_send(p, out, 4 + (size_t)n, deadline));
        KT_CHECK_OK(kiln__iso_recv(p, in, n, deadline));
        KT_CHECK(memcmp(in, out + 4, n) == 0);
        free(out);
        free(in);
    }
    char how[96];
    kiln__iso_end(p, 30000, how, sizeof(how)); /* the end of its input ends it */
    KT_CHECK(strcmp(how, "exited with code 0") == 0);
}

/* A child that crashes is KILN_ECRASH, and how it died is named. */
KT_CASE(crash_is_named)
{
    const char *args[] = {"crash", NULL};
    struct kiln__iso_proc *p = NULL;
    KT_REQUIRE_OK(spawn_child(args, &p));
    /* Under wine its debugger may write a report to the child's stdout
     * first: read to the end. */
    size_t len = 0;
    int end_rc = 0;
    free(recv_all(p, &len, &end_rc));
    KT_CHECK_EQ(end_rc, KILN_ECRASH);
    char how[96];
    kiln__iso_end(p, 30000, how, sizeof(how));
#ifdef _WIN32
    const char *want = "died with exception 0xC0000005 (access violation)";
#else
    const char *want = "killed by signal 11 (SIGSEGV)";
#endif
    KT_CHECK(strcmp(how, want) == 0);
    if (strcmp(how, want) != 0)
        fprintf(stderr, "how: %s\n", how);
}

/* A child that never answers passes the deadline and is killed. */
KT_CASE(hang_times_out)
{
    const char *args[] = {"hang", NULL};
    struct kiln__iso_proc *p = NULL;
    KT_REQUIRE_OK(spawn_child(args, &p));
    char byte;
    KT_CHECK_EQ(kiln__iso_recv(p, &byte, 1, kiln_now_ns() + 200000000u), KILN_ETIMEDOUT);
    char how[96];
    kiln__iso_end(p, 0, how, sizeof(how));
    KT_CHECK(strcmp(how, "killed") == 0);
}

/* A worker of a run in background mode: on Windows in the idle priority
 * class (a thread's background mode is not inherited); on POSIX systems
 * as its parent thread, whose priority it inherits. */
KT_CASE(background_priority)
{
    const char *argv[] = {self_path(), "--child", "priority", NULL};
    struct kiln__iso_proc *p = NULL;
    KT_REQUIRE(argv[0]);
    KT_REQUIRE_OK(kiln__iso_spawn(argv, true, &p));
    size_t len = 0;
    int end_rc = 0;
    char *got = recv_all(p, &len, &end_rc);
#ifdef _WIN32
    const char *want = "idle";
#else
    char want[64];
    snprintf(want, sizeof(want), "nice %d", getpriority(PRIO_PROCESS, 0));
#endif
    KT_CHECK(strcmp(got, want) == 0);
    if (strcmp(got, want) != 0)
        fprintf(stderr, "got %s, want %s\n", got, want);
    free(got);
    kiln__iso_end(p, 30000, NULL, 0);
}

#ifdef _WIN32
/* A worker is in kiln's job object, made kill-on-close (isolate_win.c),
 * so it dies with the parent. The job is the parent's only: a child made
 * outside it (a process kiln did not start as a worker) is not in it. */
KT_CASE(worker_in_job)
{
    const char *args[] = {"hang", NULL};
    struct kiln__iso_proc *p = NULL;
    KT_REQUIRE_OK(spawn_child(args, &p));
    HANDLE h = OpenProcess(PROCESS_QUERY_INFORMATION, FALSE, (DWORD)kiln__iso_pid(p));
    KT_REQUIRE(h != NULL);
    BOOL in = FALSE, self = FALSE;
    BOOL ok = IsProcessInJob(h, NULL, &in);
    if (!ok || !in)
        fprintf(stderr, "IsProcessInJob: %d, in %d, error %lu\n", (int)ok, (int)in,
                (unsigned long)GetLastError());
    KT_CHECK(ok && in);
    /* Not merely inherited from a job this test runs in. */
    KT_CHECK(IsProcessInJob(GetCurrentProcess(), NULL, &self));
    if (self)
        fprintf(stderr, "this test runs inside a job: the check above proves less\n");
    CloseHandle(h);
    kiln__iso_end(p, 0, NULL, 0);
}
#endif

/* A worker that cannot be started is an error, not a child. */
KT_CASE(missing_program)
{
    const char *argv[] = {"/nonexistent-kiln-folder/kiln-worker", "__worker", NULL};
    struct kiln__iso_proc *p = NULL;
    KT_CHECK(kiln__iso_spawn(argv, false, &p) < 0);
    KT_CHECK(p == NULL);
    kiln__iso_end(p, 0, NULL, 0);
}

/* Receives one frame of `type`; *body is malloc'd. */
static int recv_frame(struct kiln__iso_proc *p, uint32_t type, void **body, uint32_t *size)
{
    uint8_t head[KILN__ISO_HEAD_BYTES];
    uint64_t deadline = kiln_now_ns() + LIMIT_NS;
    KILN_TRY(kiln__iso_recv(p, head, sizeof(head), deadline));
    struct kiln__iso_head h;
    KILN_TRY(kiln__iso_head_get(head, &h));
    if (h.type != type)
        return KILN_EFORMAT;
    *body = malloc(h.size ? h.size : 1);
    if (!*body)
        return KILN_ENOMEM;
    *size = h.size;
    int rc = kiln__iso_recv(p, *body, h.size, deadline);
    return rc < 0 ? rc : kiln__iso_body_check(&h, *body);
}

static int send_frame(struct kiln__iso_proc *p, uint32_t type, const void *body, uint32_t size)
{
    uint8_t head[KILN__ISO_HEAD_BYTES];
    kiln__iso_head_put(head, type, body, size);
    uint64_t deadline = kiln_now_ns() + LIMIT_NS;
    KILN_TRY(kiln__iso_send(p, head, sizeof(head), deadline));
    return size ? kiln__iso_send(p, body, size, deadline) : KILN_OK;
}

/* kiln's own worker (`kiln __worker`, started as kiln prepare --isolate
 * starts it) answers the greeting: with its context where there is
 * Vulkan (then END brings its pipeline cache and it exits with 0), with
 * the reason where there is none (wine), and it exits. */
KT_CASE(kiln_worker_greets)
{
    const char *argv[] = {KILN_CLI, "__worker", NULL};
#ifndef _WIN32
    /* Under AddressSanitizer the worker gets detect_leaks=0, as in
     * test_isolate.c: the driver is unloaded before LeakSanitizer could
     * name what it keeps. The worker inherits the environment. */
    const char *asan = getenv("ASAN_OPTIONS");
    char opts[1024];
    snprintf(opts, sizeof(opts), "%s%sdetect_leaks=0", asan ? asan : "", asan && *asan ? ":" : "");
    setenv("ASAN_OPTIONS", opts, 1);
#endif
    struct kiln__iso_proc *p = NULL;
    KT_REQUIRE_OK(kiln__iso_spawn(argv, false, &p));
    /* No flags, device 0, no folder, no extensions known (every one), no
     * dictionary. */
    uint8_t *hello = NULL;
    uint32_t hello_size = 0;
    KT_REQUIRE_OK(kiln__iso_hello_make(0, 0, NULL, 0, NULL, 0, NULL, 0, &hello, &hello_size));
    KT_CHECK_EQ(hello_size, 25u);
    KT_CHECK_OK(send_frame(p, KILN__ISO_HELLO, hello, hello_size));
    free(hello);
    void *body = NULL;
    uint32_t size = 0;
    int32_t status = 0;
    const char *why = NULL;
    KT_CHECK_OK(recv_frame(p, KILN__ISO_READY, &body, &size));
    if (body)
        KT_CHECK_OK(kiln__iso_ready_parse(body, size, &status, &why));
    char how[96];
    if (status == KILN_OK) {
        void *cache = NULL;
        KT_CHECK_OK(send_frame(p, KILN__ISO_END, NULL, 0));
        KT_CHECK_OK(recv_frame(p, KILN__ISO_CACHE, &cache, &size));
        free(cache);
        kiln__iso_end(p, 30000, how, sizeof(how));
        KT_CHECK(strcmp(how, "exited with code 0") == 0);
    } else {
        fprintf(stderr, "the worker has no context: %s (%s)\n", why ? why : "?",
                kiln_errname(status));
        kiln__iso_end(p, 30000, how, sizeof(how));
        KT_CHECK(strncmp(how, "exited with code ", 17) == 0 && strcmp(how, "exited with code 0"));
    }
    fprintf(stderr, "worker: %s\n", how);
    free(body);
}

/* The greeting made by the parent reads back field for field in the
 * worker, its extensions included; a body cut anywhere before the
 * dictionary, or naming more extensions than it holds, is refused. */
KT_CASE(hello_round_trip)
{
    const char *names[2] = {"VK_KHR_pipeline_library", "VK_EXT_graphics_pipeline_library"};
    const uint32_t known = 1u << KILN_STATE_FOZ;
    const char dict[] = "DICTIONARY";
    uint8_t *body = NULL;
    uint32_t size = 0;
    KT_REQUIRE_OK(kiln__iso_hello_make(KILN__ISO_HELLO_DEVICE, 7, "/some/cache", known, names, 2,
                                       dict, sizeof(dict), &body, &size));
    struct kiln__iso_hello h;
    KT_REQUIRE_OK(kiln__iso_hello_parse(body, size, &h));
    KT_CHECK_EQ(h.version, KILN__ISO_VERSION);
    KT_CHECK_EQ(h.flags, KILN__ISO_HELLO_DEVICE);
    KT_CHECK_EQ(h.device, 7u);
    KT_CHECK(strcmp(h.cache_dir, "/some/cache") == 0);
    KT_CHECK_EQ(h.known_kinds, known);
    KT_CHECK_EQ(h.nnames, 2u);
    KT_CHECK(strcmp(h.names, names[0]) == 0);
    KT_CHECK(strcmp(h.names + strlen(names[0]) + 1, names[1]) == 0);
    KT_CHECK_EQ(h.dict_size, sizeof(dict));
    KT_CHECK(h.dict && memcmp(h.dict, dict, sizeof(dict)) == 0);
    /* The kind the parent knew gets the names sent and no other; a kind it
     * had no builder for gets every extension. */
    KT_CHECK(kiln__iso_hello_wants(&h, KILN_STATE_FOZ, "VK_EXT_graphics_pipeline_library"));
    KT_CHECK(kiln__iso_hello_wants(&h, KILN_STATE_FOZ, "VK_KHR_pipeline_library"));
    KT_CHECK(!kiln__iso_hello_wants(&h, KILN_STATE_FOZ, "VK_KHR_ray_tracing_pipeline"));
    KT_CHECK(kiln__iso_hello_wants(&h, KILN_STATE_APP, "VK_KHR_ray_tracing_pipeline"));
    /* Cut before the dictionary: refused; at it: no dictionary. */
    size_t fixed = 16 + strlen("/some/cache") + 1 + 8 + strlen(names[0]) + 1 + strlen(names[1]) + 1;
    for (size_t n = 0; n < fixed; n++)
        KT_CHECK_EQ(kiln__iso_hello_parse(body, n, &h), KILN_EFORMAT);
    KT_CHECK_OK(kiln__iso_hello_parse(body, fixed, &h));
    KT_CHECK_EQ(h.dict_size, 0u);
    KT_CHECK(h.dict == NULL);
    /* More names than the body holds, or than any greeting may carry. */
    uint8_t *count = body + 16 + strlen("/some/cache") + 1 + 4;
    kiln__store_le32(count, 3);
    KT_CHECK_EQ(kiln__iso_hello_parse(body, fixed, &h), KILN_EFORMAT);
    kiln__store_le32(count, KILN__ISO_MAX_NAMES + 1);
    KT_CHECK_EQ(kiln__iso_hello_parse(body, size, &h), KILN_EFORMAT);
    free(body);

    /* Nothing known, no folder, no dictionary: the smallest greeting. */
    KT_REQUIRE_OK(kiln__iso_hello_make(0, 0, NULL, 0, NULL, 0, NULL, 9, &body, &size));
    KT_CHECK_EQ(size, 25u);
    KT_REQUIRE_OK(kiln__iso_hello_parse(body, size, &h));
    KT_CHECK_EQ(h.nnames, 0u);
    KT_CHECK(kiln__iso_hello_wants(&h, KILN_STATE_FOZ, "VK_KHR_ray_tracing_pipeline"));
    KT_CHECK(h.cache_dir[0] == '\0' && h.dict == NULL);
    free(body);
}

/* A worker's answer: built, and built from the host tier's binaries,
 * are successes (status 0); a failure's status must be an error; an
 * outcome past the last one is refused. And the frames of the host tier:
 * a worker's binaries, the greeting's flags. */
KT_CASE(result_outcomes)
{
    static const struct {
        int32_t status;
        uint32_t outcome;
        uint32_t feedback;
        int rc;
    } cases[] = {
        {0, KILN__ISO_BUILT, 0, KILN_OK},
        {0, KILN__ISO_FROM_BINARIES, 0, KILN_OK},
        {KILN_EVULKAN, KILN__ISO_FROM_BINARIES, 0, KILN_EFORMAT},
        {KILN_EVULKAN, KILN__ISO_FAILED, 0, KILN_OK},
        {0, KILN__ISO_FAILED, 0, KILN_EFORMAT},
        {0, KILN__ISO_FROM_BINARIES + 1, 0, KILN_EFORMAT},
        /* The driver's word on a build: a hit only where it spoke. */
        {0, KILN__ISO_BUILT, KILN__ISO_FEEDBACK_VALID, KILN_OK},
        {0, KILN__ISO_BUILT, KILN__ISO_FEEDBACK_VALID | KILN__ISO_FEEDBACK_CACHE_HIT, KILN_OK},
        {0, KILN__ISO_BUILT, KILN__ISO_FEEDBACK_CACHE_HIT, KILN_EFORMAT},
        {0, KILN__ISO_BUILT, 4, KILN_EFORMAT},
    };
    for (size_t i = 0; i < KILN_ARRAY_LEN(cases); i++) {
        uint8_t body[KILN__ISO_RESULT_HEAD + 1] = {0};
        kiln__store_le32(body, (uint32_t)cases[i].status);
        kiln__store_le32(body + 4, cases[i].outcome);
        kiln__store_le32(body + 8, KILN_STATE_BUILTIN);
        kiln__store_le32(body + 12, cases[i].feedback);
        kiln__store_le64(body + 16, 12345);
        struct kiln__iso_result r;
        KT_CHECK_EQ(kiln__iso_result_parse(body, sizeof(body), &r), cases[i].rc);
        if (cases[i].rc == KILN_OK) {
            KT_CHECK_EQ(r.feedback, cases[i].feedback);
            KT_CHECK_EQ(r.driver_ns, 12345u);
        }
        /* One byte short of the head and its NUL: refused. */
        KT_CHECK_EQ(kiln__iso_result_parse(body, sizeof(body) - 1, &r), KILN_EFORMAT);
    }
    /* A BINARIES body reads back; cut anywhere, or with a global key
     * size out of range, it is refused. */
    struct kiln_key key = {.lo = 0x1122, .hi = 0x3344};
    struct kiln__bin_global drv = {.vendor_id = 0x10de, .device_id = 0x2330, .key_size = 20};
    memset(drv.key, 0xab, drv.key_size);
    const char payload[] = "PAYLOAD";
    uint8_t *bb = NULL;
    uint32_t bn = 0;
    KT_REQUIRE_OK(kiln__iso_binaries_make(key, &drv, payload, sizeof(payload), &bb, &bn));
    struct kiln_key k2;
    struct kiln__bin_global d2;
    const void *pp = NULL;
    size_t pn = 0;
    KT_REQUIRE_OK(kiln__iso_binaries_parse(bb, bn, &k2, &d2, &pp, &pn));
    KT_CHECK(k2.lo == key.lo && k2.hi == key.hi);
    KT_CHECK(d2.vendor_id == drv.vendor_id && d2.device_id == drv.device_id);
    KT_CHECK(d2.key_size == drv.key_size && memcmp(d2.key, drv.key, drv.key_size) == 0);
    KT_CHECK(pn == sizeof(payload) && memcmp(pp, payload, pn) == 0);
    for (uint32_t n = 0; n <= KILN__ISO_BINARIES_HEAD + drv.key_size; n++)
        KT_CHECK_EQ(kiln__iso_binaries_parse(bb, n, &k2, &d2, &pp, &pn), KILN_EFORMAT);
    kiln__store_le32(bb + 24, KILN__BIN_KEY_MAX + 1);
    KT_CHECK_EQ(kiln__iso_binaries_parse(bb, bn, &k2, &d2, &pp, &pn), KILN_EFORMAT);
    kiln__store_le32(bb + 24, 0);
    KT_CHECK_EQ(kiln__iso_binaries_parse(bb, bn, &k2, &d2, &pp, &pn), KILN_EFORMAT);
    free(bb);
    KT_CHECK_EQ(kiln__iso_binaries_make(key, &drv, payload, 0, &bb, &bn), KILN_ERANGE);

    /* The greeting's flag for the tier reads back. */
    uint8_t *hello = NULL;
    uint32_t size = 0;
    KT_REQUIRE_OK(kiln__iso_hello_make(KILN__ISO_HELLO_BINARIES, 0, "/c", 0, NULL, 0, NULL, 0,
                                       &hello, &size));
    struct kiln__iso_hello h;
    KT_REQUIRE_OK(kiln__iso_hello_parse(hello, size, &h));
    KT_CHECK_EQ(h.flags, KILN__ISO_HELLO_BINARIES);
    free(hello);
}

/* KT_MAIN's main, renamed: the child modes run first. */
int kt_main(int argc, char **argv);
#define main kt_main
#ifdef _WIN32
#define WINDOWS_CASES , KT_ENTRY(worker_in_job)
#else
#define WINDOWS_CASES
#endif
KT_MAIN(KT_ENTRY(args_reach_child), KT_ENTRY(large_messages_both_ways), KT_ENTRY(crash_is_named),
        KT_ENTRY(hang_times_out), KT_ENTRY(missing_program), KT_ENTRY(kiln_worker_greets),
        KT_ENTRY(background_priority), KT_ENTRY(hello_round_trip),
        KT_ENTRY(result_outcomes) WINDOWS_CASES)
#undef main

int main(int argc, char **argv)
{
    if (argc >= 3 && strcmp(argv[1], "--child") == 0)
        return child_main(argc, argv);
    return kt_main(argc, argv);
}
