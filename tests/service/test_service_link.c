/*
 * test_service_link.c - the service's fast-link (KILN_SERVICE_FAST_LINK,
 * docs/runtime.md "Fast-link") on lavapipe, which offers
 * VK_EXT_graphics_pipeline_library: the hand-over (a linked answer, then
 * the optimized one, the callback once for each), parts reused across
 * programs that share a vertex stage (and a control that shares none),
 * the service without the flag and on a context without pipeline
 * libraries, on the application's own device (kiln_vk_external), the
 * validation layer's silence, and render threads asking
 * at once (also under TSan).
 *
 * The programs are kiln's own graphics shape (KILN_STATE_BUILTIN: a
 * vertex and a fragment stage, no resources), built by kiln's own
 * builder: vertex variant v and fragment variant f compile to words of
 * their own, so each (v, f) is its own key.
 */
#include "kiln_test.h"
#include "kt_vklayer.h"
#include "prep_fixture.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define VARIANTS 8

static uint32_t *g_vert[VARIANTS], *g_frag[VARIANTS];
static size_t g_nvert[VARIANTS], g_nfrag[VARIANTS];

/* Compiles head, the number v + 1, tail. */
static uint32_t *compile(const char *head, unsigned v, const char *tail, uint32_t stage, size_t *n)
{
    char src[512];
    snprintf(src, sizeof(src), "%s%u%s", head, v + 1, tail);
    uint32_t *words = NULL;
    int rc = kiln_glsl_compile_vulkan12(src, strlen(src), stage, &words, n);
    if (rc == KILN_ENOTSUP) {
        printf("skipped: no shaderc in this build\n");
        exit(77);
    }
    KT_NEED(rc == KILN_OK);
    return words;
}

/* The stages, compiled once; skips without shaderc. */
static void need_words(void)
{
    static const char vs[] = "#version 450\n"
                             "layout(location = 0) out vec4 c;\n"
                             "void main() {\n"
                             "    gl_Position = vec4(float(gl_VertexIndex), 0.0, 0.0, 1.0);\n"
                             "    c = vec4(";
    static const char fs[] = "#version 450\n"
                             "layout(location = 0) in vec4 c;\n"
                             "layout(location = 0) out vec4 o;\n"
                             "void main() { o = c * ";
    if (g_vert[0])
        return;
    for (unsigned i = 0; i < VARIANTS; i++) {
        g_vert[i] = compile(vs, i, ".0);\n}\n", KILN_VK_STAGE_VERTEX_BIT, &g_nvert[i]);
        g_frag[i] = compile(fs, i, ".0; }\n", KILN_VK_STAGE_FRAGMENT_BIT, &g_nfrag[i]);
    }
}

struct gprog {
    struct kiln_program p;
    struct kiln_program_stage st[2];
    char name[32];
};

/* Program (v, f): kiln's own graphics shape. */
static void make_gprog(struct gprog *g, unsigned v, unsigned f)
{
    memset(g, 0, sizeof(*g));
    snprintf(g->name, sizeof(g->name), "link-%u-%u", v, f);
    g->st[0].src = (struct kiln_source){.stage = KILN_VK_STAGE_VERTEX_BIT, .name = g->name};
    g->st[0].words = g_vert[v];
    g->st[0].nwords = g_nvert[v];
    g->st[1].src = (struct kiln_source){.stage = KILN_VK_STAGE_FRAGMENT_BIT, .name = g->name};
    g->st[1].words = g_frag[f];
    g->st[1].nwords = g_nfrag[f];
    g->p.size = sizeof(g->p);
    g->p.stage_size = sizeof(g->st[0]);
    g->p.name = g->name;
    g->p.nstages = 2;
    g->p.stages = g->st;
    g->p.state_kind = KILN_STATE_BUILTIN;
}

/* What a ticket's callbacks saw, in order. */
struct seen {
    pthread_mutex_t lock;
    unsigned n;
    struct kiln_ticket_info info[4];
};

static void on_answer(void *user, struct kiln_ticket *t, const struct kiln_ticket_info *info)
{
    struct seen *s = user;
    (void)t;
    pthread_mutex_lock(&s->lock);
    if (s->n < 4)
        s->info[s->n] = *info;
    s->n++;
    pthread_mutex_unlock(&s->lock);
}

static unsigned seen_count(struct seen *s)
{
    pthread_mutex_lock(&s->lock);
    unsigned n = s->n;
    pthread_mutex_unlock(&s->lock);
    return n;
}

static struct kiln_service *start(struct kiln_vk *vk, unsigned workers, uint32_t flags)
{
    struct kiln_service_options o = KILN_SERVICE_OPTIONS_INIT;
    o.vk = vk;
    o.workers = workers;
    o.flags = flags;
    struct kiln_service *svc = NULL;
    KT_CHECK_OK(kiln_service_create(&o, &svc));
    return svc;
}

static int ask(struct kiln_service *svc, unsigned v, unsigned f, struct seen *s,
               struct kiln_ticket **t)
{
    struct gprog g;
    make_gprog(&g, v, f);
    struct kiln_pipeline_request r = KILN_PIPELINE_REQUEST_INIT;
    r.program = &g.p;
    r.priority = KILN_PRIORITY_URGENT;
    r.on_done = s ? on_answer : NULL;
    r.user = s;
    return kiln_service_request(svc, &r, t);
}

/* Polls until the ticket holds its final answer: READY and not linked
 * (bounded: a minute). @return the last poll's info. */
static struct kiln_ticket_info wait_optimized(struct kiln_ticket *t)
{
    struct kiln_ticket_info info = KILN_TICKET_INFO_INIT;
    for (int i = 0; i < 12000; i++) {
        int st = kiln_ticket_wait(t, 60ull * 1000000000u, &info);
        if (st != KILN_TICKET_READY || !info.linked)
            break;
        struct timespec ms = {0, 5000000};
        nanosleep(&ms, NULL);
    }
    return info;
}

static struct kiln_service_stats stats_of(struct kiln_service *svc)
{
    struct kiln_service_stats s = KILN_SERVICE_STATS_INIT;
    KT_CHECK_OK(kiln_service_get_stats(svc, &s));
    return s;
}

/* A context with pipeline libraries, or a skip (one line). */
static struct kiln_vk *library_vk(void)
{
    struct kiln_vk *vk = pf_vk(NULL);
    if (vk && !kiln_vk_get_info(vk)->pipeline_library) {
        kiln_vk_destroy(vk);
        printf("skipped: the device lacks VK_EXT_graphics_pipeline_library\n");
        exit(77);
    }
    return vk;
}

/* ---- cases ---------------------------------------------------------------------- */

/* The hand-over, under the validation layer: READY linked (callback),
 * then READY optimized (callback once more), poll sees the optimized
 * pipeline; a later request of the key gets the optimized one at once;
 * the layer reports nothing on either pipeline. */
KT_CASE(hand_over)
{
    need_words();
    char log[4200];
    bool validated = kt_validation_begin(kt_tmpdir(), log, sizeof(log));
    if (!validated)
        printf("skipped: the validation part (no Khronos validation layer installed)\n");
    struct kiln_vk *vk = library_vk();
    KT_REQUIRE(vk);
    struct kiln_service *svc = start(vk, 1, KILN_SERVICE_FAST_LINK);
    struct seen s = {.lock = PTHREAD_MUTEX_INITIALIZER};
    struct kiln_ticket *t = NULL;
    KT_CHECK_OK(ask(svc, 0, 0, &s, &t));
    struct kiln_ticket_info end = wait_optimized(t);
    KT_CHECK_EQ(end.state, KILN_TICKET_READY);
    KT_CHECK(!end.linked && end.pipeline != 0);
    /* The callback ran once per state: linked, then optimized. */
    for (int i = 0; i < 2000 && seen_count(&s) < 2; i++) {
        struct timespec ms = {0, 1000000};
        nanosleep(&ms, NULL);
    }
    KT_CHECK_EQ(seen_count(&s), 2);
    KT_CHECK(s.info[0].state == KILN_TICKET_READY && s.info[0].linked);
    KT_CHECK(s.info[1].state == KILN_TICKET_READY && !s.info[1].linked);
    KT_CHECK(s.info[0].pipeline != 0 && s.info[0].pipeline != s.info[1].pipeline);
    KT_CHECK_EQ(s.info[1].pipeline, end.pipeline);
    struct kiln_service_stats st = stats_of(svc);
    KT_CHECK_EQ(st.fast_linked, 1);
    KT_CHECK_EQ(st.optimized, 1);
    KT_CHECK_EQ(st.parts_built, 4);
    KT_CHECK_EQ(st.parts_reused, 0);
    KT_CHECK_EQ(st.built_urgent, 1);
    KT_CHECK_EQ(st.built_background, 1);
    KT_CHECK_EQ(st.failed, 0);
    /* The key again: the optimized pipeline at once, one answer. */
    struct seen s2 = {.lock = PTHREAD_MUTEX_INITIALIZER};
    struct kiln_ticket *t2 = NULL;
    KT_CHECK_OK(ask(svc, 0, 0, &s2, &t2));
    struct kiln_ticket_info again = KILN_TICKET_INFO_INIT;
    KT_CHECK_EQ(kiln_ticket_poll(t2, &again), KILN_TICKET_READY);
    KT_CHECK(!again.linked && again.pipeline == end.pipeline && again.merged);
    KT_CHECK_EQ(seen_count(&s2), 1);
    kiln_ticket_release(t);
    kiln_ticket_release(t2);
    kiln_service_destroy(svc);
    kiln_vk_destroy(vk);
    if (validated) {
        kt_validation_end();
        KT_CHECK_EQ(kt_validation_errors(log), 0);
    }
}

/* Parts once per key: a second program with the first's vertex stage
 * reuses its pre-rasterization part and the format's two (3 reused, the
 * fragment part built); the control shares no stage: only the format's
 * two parts are reused (vk's own test has the control that shares
 * nothing at all: another format). */
static struct kiln_service_stats two_programs(unsigned v2, unsigned f2)
{
    struct kiln_vk *vk = library_vk();
    struct kiln_service *svc = start(vk, 1, KILN_SERVICE_FAST_LINK);
    struct kiln_ticket *a = NULL, *b = NULL;
    KT_CHECK_OK(ask(svc, 0, 0, NULL, &a));
    KT_CHECK(!wait_optimized(a).linked);
    KT_CHECK_OK(ask(svc, v2, f2, NULL, &b));
    KT_CHECK(!wait_optimized(b).linked);
    struct kiln_service_stats st = stats_of(svc);
    kiln_ticket_release(a);
    kiln_ticket_release(b);
    kiln_service_destroy(svc);
    kiln_vk_destroy(vk);
    return st;
}

KT_CASE(parts_reused)
{
    need_words();
    struct kiln_service_stats shared = two_programs(0, 1);
    KT_CHECK_EQ(shared.fast_linked, 2);
    KT_CHECK_EQ(shared.parts_built, 5);
    KT_CHECK_EQ(shared.parts_reused, 3);
    struct kiln_service_stats apart = two_programs(1, 1);
    KT_CHECK_EQ(apart.fast_linked, 2);
    KT_CHECK_EQ(apart.parts_built, 6);
    KT_CHECK_EQ(apart.parts_reused, 2);
}

/* Parts ahead: program (3, 3)'s parts asked first (parts only: READY
 * with no pipeline, four parts built, nothing linked or stored), then its
 * urgent request is answered linked and builds no part again (all four
 * reused). The control asks no parts first: the urgent request builds the
 * four itself. */
static struct kiln_service_stats parts_then_urgent(bool ahead)
{
    struct kiln_vk *vk = library_vk();
    struct kiln_service *svc = start(vk, 2, KILN_SERVICE_FAST_LINK);
    if (ahead) {
        struct gprog g;
        make_gprog(&g, 3, 3);
        struct kiln_pipeline_request r = KILN_PIPELINE_REQUEST_INIT;
        r.program = &g.p;
        r.flags = KILN_REQUEST_PARTS_ONLY;
        struct kiln_ticket *p = NULL;
        KT_CHECK_OK(kiln_service_request(svc, &r, &p));
        struct kiln_ticket_info pi = KILN_TICKET_INFO_INIT;
        KT_CHECK_EQ(kiln_ticket_wait(p, 60ull * 1000000000u, &pi), KILN_TICKET_READY);
        KT_CHECK(pi.pipeline == 0 && pi.vk_pipeline == NULL && !pi.linked);
        struct kiln_service_stats mid = stats_of(svc);
        KT_CHECK_EQ(mid.parts_only_built, 1);
        KT_CHECK_EQ(mid.parts_built, 4);
        KT_CHECK_EQ(mid.fast_linked + mid.built_urgent + mid.built_background, 0);
        kiln_ticket_release(p);
    }
    struct seen s = {.lock = PTHREAD_MUTEX_INITIALIZER};
    struct kiln_ticket *t = NULL;
    KT_CHECK_OK(ask(svc, 3, 3, &s, &t));
    KT_CHECK(!wait_optimized(t).linked);
    struct kiln_service_stats st = stats_of(svc);
    kiln_service_destroy(svc); /* joins the workers: the callbacks ran */
    KT_CHECK_EQ(seen_count(&s), 2);
    KT_CHECK(s.info[0].state == KILN_TICKET_READY && s.info[0].linked);
    kiln_ticket_release(t);
    struct kiln_vk_stats vs = KILN_VK_STATS_INIT;
    kiln_vk_get_stats(vk, &vs);
    KT_CHECK_EQ(vs.parts_built, 4); /* once each, whoever asked first */
    kiln_vk_destroy(vk);
    return st;
}

KT_CASE(parts_ahead)
{
    need_words();
    struct kiln_service_stats st = parts_then_urgent(true);
    KT_CHECK_EQ(st.parts_only_built, 1);
    KT_CHECK_EQ(st.fast_linked, 1);
    KT_CHECK_EQ(st.parts_built, 4); /* all by the parts-only build */
    KT_CHECK_EQ(st.parts_reused, 4);
}

KT_CASE(parts_ahead_control)
{
    need_words();
    struct kiln_service_stats st = parts_then_urgent(false);
    KT_CHECK_EQ(st.parts_only_built, 0);
    KT_CHECK_EQ(st.fast_linked, 1);
    KT_CHECK_EQ(st.parts_built, 4); /* by the urgent build */
    KT_CHECK_EQ(st.parts_reused, 0);
}

/* Without the flag, or on a context without pipeline libraries: one
 * answer, not linked, no part. */
static void answered_once(struct kiln_vk *vk, uint32_t flags)
{
    struct kiln_service *svc = start(vk, 1, flags);
    struct seen s = {.lock = PTHREAD_MUTEX_INITIALIZER};
    struct kiln_ticket *t = NULL;
    KT_CHECK_OK(ask(svc, 2, 2, &s, &t));
    struct kiln_ticket_info info = KILN_TICKET_INFO_INIT;
    KT_CHECK_EQ(kiln_ticket_wait(t, 60ull * 1000000000u, &info), KILN_TICKET_READY);
    KT_CHECK(!info.linked && info.pipeline != 0);
    kiln_service_destroy(svc); /* joins the worker: its callback ran */
    KT_CHECK_EQ(seen_count(&s), 1);
    KT_CHECK(!s.info[0].linked);
    kiln_ticket_release(t);
}

KT_CASE(without_flag)
{
    need_words();
    struct kiln_vk *vk = pf_vk(NULL);
    KT_REQUIRE(vk);
    answered_once(vk, 0);
    struct kiln_vk_stats vs = KILN_VK_STATS_INIT;
    kiln_vk_get_stats(vk, &vs);
    KT_CHECK_EQ(vs.parts_built, 0);
    KT_CHECK_EQ(vs.pipelines_linked, 0);
    kiln_vk_destroy(vk);
}

KT_CASE(without_library)
{
    need_words();
    struct kiln_vk_options o = KILN_VK_OPTIONS_INIT;
    o.no_pipeline_library = true; /* as a device without the extension */
    struct kiln_vk *vk = NULL;
    int rc = kiln_vk_create(&o, &vk);
    if (rc == KILN_ENOTSUP) {
        printf("skipped: Vulkan is not available here\n");
        exit(77);
    }
    KT_REQUIRE_OK(rc);
    pf_pin_loaded_libraries();
    KT_CHECK(!kiln_vk_get_info(vk)->pipeline_library);
    answered_once(vk, KILN_SERVICE_FAST_LINK);
    kiln_vk_destroy(vk);
}

/* The emulator's own device (kiln_vk_external), with the library enabled
 * and said so: the hand-over as on kiln's own device (here with render
 * passes: the application did not say it enabled dynamic rendering). */
KT_CASE(external_device)
{
    need_words();
    struct pf_own_vulkan v;
    pf_own_vulkan_make_gpl(&v);
    struct kiln_vk_external ext = pf_own_external(&v);
    ext.graphics_pipeline_library = true;
    struct kiln_vk_options o = KILN_VK_OPTIONS_INIT;
    o.external = &ext;
    struct kiln_vk *vk = NULL;
    KT_REQUIRE_OK(kiln_vk_create(&o, &vk));
    KT_CHECK(kiln_vk_get_info(vk)->pipeline_library);
    struct kiln_service *svc = start(vk, 1, KILN_SERVICE_FAST_LINK);
    struct seen s = {.lock = PTHREAD_MUTEX_INITIALIZER};
    struct kiln_ticket *t = NULL;
    KT_CHECK_OK(ask(svc, 3, 4, &s, &t));
    struct kiln_ticket_info end = wait_optimized(t);
    KT_CHECK(end.state == KILN_TICKET_READY && !end.linked);
    kiln_service_destroy(svc);
    KT_CHECK_EQ(seen_count(&s), 2);
    KT_CHECK(s.info[0].linked && !s.info[1].linked);
    kiln_ticket_release(t);
    kiln_vk_destroy(vk);
    /* Not said: no library, one answer. */
    ext.graphics_pipeline_library = false;
    KT_REQUIRE_OK(kiln_vk_create(&o, &vk));
    KT_CHECK(!kiln_vk_get_info(vk)->pipeline_library);
    answered_once(vk, KILN_SERVICE_FAST_LINK);
    kiln_vk_destroy(vk);
    pf_own_vulkan_destroy(&v);
}

/* ---- recorded Fossilize pipelines -------------------------------------------------- */

#define FOZ_MAX 96

/*
 * Recorded graphics pipelines of real archives (the Fossilize builder,
 * KILN_STATE_FOZ), urgent with fast-link, under the validation layer:
 * each built one ends READY with its optimized pipeline; those answered
 * linked first (most: plain pipelines) had their callback twice, linked
 * then not; parts were built and some reused (pipelines of one archive
 * share stages and state); the layer reports nothing.
 */
KT_CASE(foz_hand_over)
{
    kt_require_corpus("foz/sascha-willems");
    char log[4200];
    bool validated = kt_validation_begin(kt_tmpdir(), log, sizeof(log));
    if (!validated)
        printf("skipped: the validation part (no Khronos validation layer installed)\n");
    struct kiln_vk *vk = library_vk();
    struct kiln_service *svc = start(vk, 2, KILN_SERVICE_FAST_LINK);
    static const char *const archives[] = {"pipelines", "texture",       "triangle",
                                           "deferred",  "shadowmapping", "multisampling"};
    static struct seen seen[FOZ_MAX];
    struct kiln_ticket *t[FOZ_MAX] = {NULL};
    size_t n = 0;
    for (size_t a = 0; a < sizeof(archives) / sizeof(archives[0]); a++) {
        char path[4096];
        snprintf(path, sizeof(path), "%s/foz/sascha-willems/%s.f93c6e96adcd7946.1.foz",
                 kt_corpus_dir(), archives[a]);
        struct kiln_foz *foz = NULL;
        KT_REQUIRE_OK(kiln_foz_open(NULL, path, &foz));
        struct kiln_foz_index *idx = NULL;
        KT_REQUIRE_OK(kiln_foz_index_create(foz, &idx));
        const struct kiln_foz_pipeline_ref *refs = NULL;
        size_t np = kiln_foz_index_pipelines(idx, &refs);
        for (size_t i = 0; i < np && n < FOZ_MAX; i++) {
            if (kiln_foz_kind_of(refs[i].tag) != KILN_FOZ_KIND_GRAPHICS)
                continue;
            struct kiln_program *prog = NULL;
            KT_REQUIRE_OK(kiln_foz_pipeline_program(idx, &refs[i], &prog));
            pthread_mutex_init(&seen[n].lock, NULL);
            struct kiln_pipeline_request r = KILN_PIPELINE_REQUEST_INIT;
            r.program = prog;
            r.priority = KILN_PRIORITY_URGENT;
            r.on_done = on_answer;
            r.user = &seen[n];
            KT_CHECK_OK(kiln_service_request(svc, &r, &t[n]));
            kiln_program_destroy(prog);
            n++;
        }
        kiln_foz_index_destroy(idx);
        kiln_foz_close(foz);
    }
    unsigned ready = 0, linked = 0;
    for (size_t i = 0; i < n; i++) {
        struct kiln_ticket_info end = wait_optimized(t[i]);
        KT_CHECK(!end.linked);
        ready += end.state == KILN_TICKET_READY;
    }
    struct kiln_service_stats st = stats_of(svc);
    kiln_service_destroy(svc); /* every callback has run */
    for (size_t i = 0; i < n; i++) {
        struct seen *s = &seen[i];
        KT_CHECK(s->n == 1 || s->n == 2);
        if (s->n == 2) {
            KT_CHECK(s->info[0].linked && !s->info[1].linked);
            KT_CHECK(s->info[0].pipeline != s->info[1].pipeline);
            linked++;
        }
        kiln_ticket_release(t[i]);
    }
    printf("%zu recorded graphics pipelines: %u ready, %u linked first; parts built %llu, "
           "reused %llu\n",
           n, ready, linked, (unsigned long long)st.parts_built,
           (unsigned long long)st.parts_reused);
    KT_CHECK(n > 10 && ready > n / 2);
    KT_CHECK(linked > 0);
    /* Per answer, and per key (equal pipelines of two archives merge). */
    KT_CHECK_EQ(st.fast_linked, linked);
    KT_CHECK(st.optimized > 0 && st.optimized <= linked);
    KT_CHECK(st.parts_built > 0 && st.parts_reused > 0);
    kiln_vk_destroy(vk);
    if (validated) {
        kt_validation_end();
        KT_CHECK_EQ(kt_validation_errors(log), 0);
    }
}

/* ---- render threads --------------------------------------------------------------- */

#define RT_THREADS  6
#define RT_PROGRAMS 6

struct render {
    struct kiln_service *svc;
    unsigned seed;
    struct seen seen[RT_PROGRAMS];
    struct kiln_ticket *t[RT_PROGRAMS];
};

/* Asks for every program (vertex 0 shared, fragment i) in its own order. */
static void *render_thread(void *arg)
{
    struct render *r = arg;
    for (unsigned k = 0; k < RT_PROGRAMS; k++) {
        unsigned i = (k + r->seed) % RT_PROGRAMS;
        KT_CHECK_OK(ask(r->svc, 0, i, &r->seen[i], &r->t[i]));
    }
    return NULL;
}

/* Render threads ask for the same programs at once: each ticket ends with
 * the optimized pipeline of its key, its callback ran once or twice
 * (linked first when twice), each part was built once. */
KT_CASE(render_threads)
{
    need_words();
    struct kiln_vk *vk = library_vk();
    struct kiln_service *svc = start(vk, 4, KILN_SERVICE_FAST_LINK);
    static struct render r[RT_THREADS];
    pthread_t th[RT_THREADS];
    for (unsigned i = 0; i < RT_THREADS; i++) {
        memset(&r[i], 0, sizeof(r[i]));
        r[i].svc = svc;
        r[i].seed = i;
        for (unsigned p = 0; p < RT_PROGRAMS; p++)
            pthread_mutex_init(&r[i].seen[p].lock, NULL);
        KT_REQUIRE(pthread_create(&th[i], NULL, render_thread, &r[i]) == 0);
    }
    for (unsigned i = 0; i < RT_THREADS; i++)
        pthread_join(th[i], NULL);
    uint64_t pipe[RT_PROGRAMS] = {0};
    for (unsigned i = 0; i < RT_THREADS; i++) {
        for (unsigned p = 0; p < RT_PROGRAMS; p++) {
            struct kiln_ticket_info end = wait_optimized(r[i].t[p]);
            KT_CHECK(end.state == KILN_TICKET_READY && !end.linked);
            if (!pipe[p])
                pipe[p] = end.pipeline;
            KT_CHECK_EQ(end.pipeline, pipe[p]);
        }
    }
    struct kiln_service_stats st = stats_of(svc);
    kiln_service_destroy(svc); /* every callback has run */
    for (unsigned i = 0; i < RT_THREADS; i++) {
        for (unsigned p = 0; p < RT_PROGRAMS; p++) {
            struct seen *s = &r[i].seen[p];
            KT_CHECK(s->n == 1 || s->n == 2);
            KT_CHECK(s->n == 1 || (s->info[0].linked && !s->info[1].linked));
            KT_CHECK(!s->info[s->n - 1].linked);
            kiln_ticket_release(r[i].t[p]);
        }
    }
    KT_CHECK_EQ(st.optimized, RT_PROGRAMS);
    KT_CHECK_EQ(st.parts_built, 3 + RT_PROGRAMS); /* the format's two, vertex 0's, each fragment */
    KT_CHECK(st.fast_linked >= 1);
    kiln_vk_destroy(vk);
}

/* The programs of kind `kind` in corpus archive `name` (at most FOZ_MAX),
 * in prog[] (kiln_program_destroy each), their number in *count. */
static void archive_programs(const char *name, enum kiln_foz_kind kind,
                             struct kiln_program *prog[FOZ_MAX], size_t *count)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/foz/sascha-willems/%s.f93c6e96adcd7946.1.foz", kt_corpus_dir(),
             name);
    struct kiln_foz *foz = NULL;
    KT_REQUIRE_OK(kiln_foz_open(NULL, path, &foz));
    struct kiln_foz_index *idx = NULL;
    KT_REQUIRE_OK(kiln_foz_index_create(foz, &idx));
    const struct kiln_foz_pipeline_ref *refs = NULL;
    size_t np = kiln_foz_index_pipelines(idx, &refs), n = 0;
    for (size_t i = 0; i < np && n < FOZ_MAX; i++)
        if (kiln_foz_kind_of(refs[i].tag) == kind)
            KT_REQUIRE_OK(kiln_foz_pipeline_program(idx, &refs[i], &prog[n++]));
    kiln_foz_index_destroy(idx);
    kiln_foz_close(foz);
    *count = n;
}

/* A fast-link service of two workers on a context with pipeline libraries
 * (or a skip), and archive_programs' programs. */
static void archive_service(const char *name, enum kiln_foz_kind kind, struct kiln_vk **vk,
                            struct kiln_service **svc, struct kiln_program *prog[FOZ_MAX],
                            size_t *count)
{
    kt_require_corpus("foz/sascha-willems");
    *vk = library_vk();
    *svc = start(*vk, 2, KILN_SERVICE_FAST_LINK);
    archive_programs(name, kind, prog, count);
}

/* Parts ahead through the Fossilize builder: the graphics pipelines of
 * one archive asked parts-only first (each READY with no pipeline), then
 * urgent: the urgent builds link from those parts and build none again. */
KT_CASE(foz_parts_ahead)
{
    struct kiln_vk *vk = NULL;
    struct kiln_service *svc = NULL;
    struct kiln_program *prog[FOZ_MAX] = {NULL};
    size_t n = 0;
    archive_service("deferred", KILN_FOZ_KIND_GRAPHICS, &vk, &svc, prog, &n);
    struct kiln_ticket *t[FOZ_MAX] = {NULL};
    for (int pass = 0; pass < 2; pass++) {
        for (size_t i = 0; i < n; i++) {
            struct kiln_pipeline_request r = KILN_PIPELINE_REQUEST_INIT;
            r.program = prog[i];
            r.priority = KILN_PRIORITY_URGENT;
            r.flags = pass == 0 ? KILN_REQUEST_PARTS_ONLY : 0;
            KT_CHECK_OK(kiln_service_request(svc, &r, &t[i]));
        }
        for (size_t i = 0; i < n; i++) {
            struct kiln_ticket_info info = KILN_TICKET_INFO_INIT;
            if (pass == 0) {
                KT_CHECK_EQ(kiln_ticket_wait(t[i], 60ull * 1000000000u, &info), KILN_TICKET_READY);
                KT_CHECK(info.pipeline == 0);
            } else {
                info = wait_optimized(t[i]);
                KT_CHECK(info.state == KILN_TICKET_READY && !info.linked);
            }
            kiln_ticket_release(t[i]);
        }
    }
    struct kiln_service_stats st = stats_of(svc);
    kiln_service_destroy(svc);
    printf("%zu graphics pipelines: parts-only %llu, parts built %llu, reused %llu, linked %llu\n",
           n, (unsigned long long)st.parts_only_built, (unsigned long long)st.parts_built,
           (unsigned long long)st.parts_reused, (unsigned long long)st.fast_linked);
    KT_CHECK(n > 2);
    KT_CHECK_EQ(st.parts_only_built, n);
    KT_CHECK(st.fast_linked > 0 && st.parts_built > 0);
    /* Every part the urgent builds linked from was there: 4 per link. */
    KT_CHECK(st.parts_reused >= 4 * st.fast_linked);
    for (size_t i = 0; i < n; i++)
        kiln_program_destroy(prog[i]);
    kiln_vk_destroy(vk);
}

/* Links ahead: program (2, 3) asked at background priority with
 * KILN_REQUEST_LINK_AHEAD is answered linked first, then optimized (one
 * callback each), built as an urgent request would be though nobody asked
 * urgently; the draw's urgent request then is answered at once from the
 * table and builds nothing. The control is the same background request
 * without the flag: one answer, the optimized pipeline, nothing linked,
 * and the urgent request also answered at once. */
static void link_ahead(bool flag)
{
    need_words();
    struct kiln_vk *vk = library_vk();
    struct kiln_service *svc = start(vk, 2, KILN_SERVICE_FAST_LINK);
    struct gprog g;
    make_gprog(&g, 2, 3);
    struct seen s = {.lock = PTHREAD_MUTEX_INITIALIZER};
    struct kiln_pipeline_request r = KILN_PIPELINE_REQUEST_INIT;
    r.program = &g.p;
    r.priority = KILN_PRIORITY_BACKGROUND;
    r.flags = flag ? KILN_REQUEST_LINK_AHEAD : 0;
    r.on_done = on_answer;
    r.user = &s;
    struct kiln_ticket *a = NULL;
    KT_CHECK_OK(kiln_service_request(svc, &r, &a));
    struct kiln_ticket_info end = wait_optimized(a);
    KT_CHECK(end.state == KILN_TICKET_READY && !end.linked && end.pipeline != 0);
    struct kiln_ticket *u = NULL;
    KT_CHECK_OK(ask(svc, 2, 3, NULL, &u));
    struct kiln_ticket_info now = KILN_TICKET_INFO_INIT;
    KT_CHECK_EQ(kiln_ticket_poll(u, &now), KILN_TICKET_READY); /* at once */
    KT_CHECK(now.merged && now.pipeline == end.pipeline);
    struct kiln_service_stats st = stats_of(svc);
    kiln_service_destroy(svc); /* joins the workers: the callbacks ran */
    KT_CHECK_EQ(st.built_urgent, 0);
    KT_CHECK_EQ(st.answered_known, 1);
    if (flag) {
        KT_CHECK_EQ(seen_count(&s), 2);
        KT_CHECK(s.info[0].state == KILN_TICKET_READY && s.info[0].linked);
        KT_CHECK(s.info[0].pipeline != 0 && s.info[0].pipeline != end.pipeline);
        KT_CHECK_EQ(st.linked_ahead, 1);
        KT_CHECK_EQ(st.fast_linked, 1);
        KT_CHECK_EQ(st.optimized, 1);
        KT_CHECK_EQ(st.built_background, 2); /* the link and the optimized build */
    } else {
        KT_CHECK_EQ(seen_count(&s), 1);
        KT_CHECK(!s.info[0].linked);
        KT_CHECK_EQ(st.linked_ahead, 0);
        KT_CHECK_EQ(st.fast_linked, 0);
        KT_CHECK_EQ(st.built_background, 1);
    }
    kiln_ticket_release(a);
    kiln_ticket_release(u);
    kiln_vk_destroy(vk);
}

KT_CASE(link_ahead)
{
    link_ahead(true);
}

KT_CASE(link_ahead_control)
{
    link_ahead(false);
}

/* Asks for each program (urgent, or parts-only) and waits for each ticket
 * to be READY; a full request's answer holds a pipeline, a parts-only
 * one's none. */
static void ask_all(struct kiln_service *svc, struct kiln_program *const *prog, size_t n,
                    uint32_t flags)
{
    for (size_t i = 0; i < n; i++) {
        struct kiln_pipeline_request r = KILN_PIPELINE_REQUEST_INIT;
        r.program = prog[i];
        r.priority = KILN_PRIORITY_URGENT;
        r.flags = flags;
        struct kiln_ticket *t = NULL;
        KT_CHECK_OK(kiln_service_request(svc, &r, &t));
        struct kiln_ticket_info info = KILN_TICKET_INFO_INIT;
        KT_CHECK_EQ(kiln_ticket_wait(t, 60ull * 1000000000u, &info), KILN_TICKET_READY);
        KT_CHECK_EQ(info.pipeline != 0, flags == 0);
        kiln_ticket_release(t);
    }
}

/* Parts ahead of programs that have no parts (compute pipelines): each
 * parts-only ticket is READY once its whole pipeline was built ahead, in
 * the background, so the draw's urgent request is answered from the table
 * and builds nothing. The control asks no parts first: every urgent
 * request builds its pipeline. */
static void compute_ahead(bool ahead, struct kiln_service_stats *st, size_t *count)
{
    struct kiln_vk *vk = NULL;
    struct kiln_service *svc = NULL;
    struct kiln_program *prog[FOZ_MAX] = {NULL};
    size_t n = 0;
    archive_service("computenbody", KILN_FOZ_KIND_COMPUTE, &vk, &svc, prog, &n);
    KT_REQUIRE(n >= 2);
    if (ahead) {
        ask_all(svc, prog, n, KILN_REQUEST_PARTS_ONLY);
        struct kiln_service_stats mid = stats_of(svc);
        KT_CHECK_EQ(mid.whole_ahead, n);
        KT_CHECK_EQ(mid.built_background, n); /* answered only once built */
        KT_CHECK_EQ(mid.built_urgent, 0);
    }
    ask_all(svc, prog, n, 0);
    *st = stats_of(svc);
    kiln_service_destroy(svc);
    for (size_t i = 0; i < n; i++)
        kiln_program_destroy(prog[i]);
    kiln_vk_destroy(vk);
    *count = n;
}

KT_CASE(compute_whole_ahead)
{
    size_t n = 0;
    struct kiln_service_stats st = KILN_SERVICE_STATS_INIT;
    compute_ahead(true, &st, &n);
    printf("%zu compute pipelines: whole ahead %llu, answered known %llu, urgent builds %llu\n", n,
           (unsigned long long)st.whole_ahead, (unsigned long long)st.answered_known,
           (unsigned long long)st.built_urgent);
    KT_CHECK_EQ(st.whole_ahead, n);
    KT_CHECK_EQ(st.built_urgent, 0);
    KT_CHECK_EQ(st.answered_known, n);
    KT_CHECK_EQ(st.fast_linked, 0);
}

KT_CASE(compute_whole_ahead_control)
{
    size_t n = 0;
    struct kiln_service_stats st = KILN_SERVICE_STATS_INIT;
    compute_ahead(false, &st, &n);
    KT_CHECK_EQ(st.whole_ahead, 0);
    KT_CHECK_EQ(st.built_urgent, n);
    KT_CHECK_EQ(st.answered_known, 0);
}

KT_MAIN(KT_ENTRY(hand_over), KT_ENTRY(parts_reused), KT_ENTRY(without_flag),
        KT_ENTRY(without_library), KT_ENTRY(external_device), KT_ENTRY(foz_hand_over),
        KT_ENTRY(render_threads), KT_ENTRY(parts_ahead), KT_ENTRY(parts_ahead_control),
        KT_ENTRY(foz_parts_ahead), KT_ENTRY(compute_whole_ahead),
        KT_ENTRY(compute_whole_ahead_control), KT_ENTRY(link_ahead), KT_ENTRY(link_ahead_control))
