/*
 * isolate_worker.c - the worker's side of isolation
 * (kiln_isolate_worker_main): greeted by the parent, it makes its own
 * Vulkan context once, builds the batches of programs it is sent, one
 * program after another, and at the end sends its pipeline cache's data.
 *
 * Invariants and why they hold:
 *
 * - A program is built exactly as in one process: the worker calls the
 *   pipeline phase's own kiln__prep_build_one (start.c), with the same
 *   dictionary and device extensions (the names the parent's builders
 *   found the programs need, sent in the greeting; every one of a kind the
 *   parent had no builder for), the same device selection and the same
 *   builders (the application passes them here), so isolation changes
 *   where a build runs, not what it does.
 *
 * - The answer is read off the phase's counters: the worker builds one
 *   program at a time on one thread, so the one counter that moved during
 *   the call is that program's outcome. The first-skip claim is reset
 *   before each build, so every skip's reason is written and sent.
 *
 * - The worker writes nothing to the cache folder: its context loads
 *   pipelines.vkc and is never saved; its data goes to the parent, which
 *   merges and saves it. So workers never race each other on the file.
 *   The host tier of driver binaries likewise (a greeting with
 *   KILN__ISO_HELLO_BINARIES): opened read only here, and what a build
 *   captures is sent (BINARIES, before that program's RESULT) for the
 *   parent to check and keep.
 *
 * - A batch's programs are built in the order sent and each is answered
 *   (RESULT) as soon as it ends, before the next starts: when the worker
 *   dies or hangs, the parent has the answers of those before and knows
 *   the first unanswered one is the one that was being built.
 *
 * - A worker started with the run gets START first (a greeting without
 *   extensions or dictionary): it begins its Vulkan context at once and
 *   reads the HELLO inside its creation (kiln__vk_create_late's callback),
 *   right before the device is made, so the device's extensions are the
 *   HELLO's, as for a worker greeted first. The parent sends that HELLO
 *   as it makes its own device (isolate.c), so the instance overlapped
 *   its translation and the device overlaps its device; when the HELLO
 *   comes does not change what the worker does with it.
 *
 * - Bytes from the parent are checked like those from a worker (frame
 *   checksum, each field against the body's length); a malformed frame ends
 *   the worker with KILN_EFORMAT, never a build of half a payload.
 */
#include "kiln_internal.h"
#include "binaries.h"
#include "isolate_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Logs how a session ended, in one line, unless as it should (0) or with
 * the parent gone (KILN_ECANCELED: nobody to tell). @return rc. */
static int worker_end(int rc)
{
    if (rc == KILN_EFORMAT)
        KILN_ERROR("prep", "worker: the parent sent a malformed frame: stopped");
    else if (rc < 0 && rc != KILN_ECANCELED)
        KILN_ERROR("prep", "worker: stopped: %s", kiln_strerror(rc));
    return rc;
}

/* Reads one frame; *body is malloc'd (free it). */
static int read_frame(int fd, struct kiln__iso_head *h, void **body)
{
    uint8_t head[KILN__ISO_HEAD_BYTES];
    *body = NULL;
    KILN_TRY(kiln__iso_fd_read(fd, head, sizeof(head)));
    KILN_TRY(kiln__iso_head_get(head, h));
    void *buf = kiln__malloc(h->size ? h->size : 1);
    if (!buf)
        return KILN_ENOMEM;
    int rc = kiln__iso_fd_read(fd, buf, h->size);
    if (rc == KILN_ECANCELED)
        rc = KILN_EIO_SHORTREAD;
    if (rc == KILN_OK)
        rc = kiln__iso_body_check(h, buf);
    if (rc < 0) {
        kiln__free(buf);
        return rc;
    }
    *body = buf;
    return KILN_OK;
}

static int write_frame(int fd, uint32_t type, const void *body, size_t size)
{
    uint8_t head[KILN__ISO_HEAD_BYTES];
    kiln__iso_head_put(head, type, body, (uint32_t)size);
    KILN_TRY(kiln__iso_fd_write(fd, head, sizeof(head)));
    return size ? kiln__iso_fd_write(fd, body, size) : KILN_OK;
}

/* READY: the context's status and why. */
static int send_ready(int fd, int status, const char *why)
{
    size_t wlen = strlen(why);
    uint8_t *p = kiln__malloc(4 + wlen + 1);
    if (!p)
        return KILN_ENOMEM;
    kiln__store_le32(p, (uint32_t)status);
    memcpy(p + 4, why, wlen + 1);
    int rc = write_frame(fd, KILN__ISO_READY, p, 4 + wlen + 1);
    kiln__free(p);
    return rc;
}

/* RESULT: one program's outcome; with `it` (a build), what the driver
 * said of it (creation feedback), for the parent's counts. */
static int send_result(int fd, int status, uint32_t outcome, uint32_t kind, const char *why,
                       const struct kiln__prep_item *it)
{
    size_t wlen = strnlen(why, 255);
    uint8_t p[KILN__ISO_RESULT_HEAD + 256];
    uint32_t feedback = 0;
    if (it && it->feedback_valid)
        feedback =
            KILN__ISO_FEEDBACK_VALID | (it->driver_cache_hit ? KILN__ISO_FEEDBACK_CACHE_HIT : 0u);
    kiln__store_le32(p, (uint32_t)status);
    kiln__store_le32(p + 4, outcome);
    kiln__store_le32(p + 8, kind);
    kiln__store_le32(p + 12, feedback);
    kiln__store_le64(p + 16, feedback ? it->driver_ns : 0);
    memcpy(p + KILN__ISO_RESULT_HEAD, why, wlen);
    p[KILN__ISO_RESULT_HEAD + wlen] = '\0';
    return write_frame(fd, KILN__ISO_RESULT, p, KILN__ISO_RESULT_HEAD + wlen + 1);
}

/* The host tier's relay (KILN__ISO_HELLO_KEEP_BINARIES): a program's
 * captured binaries go to the parent, before its RESULT, as BINARIES. */
static int relay_binaries(void *user, struct kiln_key key, const struct kiln__bin_global *driver,
                          const void *payload, size_t size)
{
    uint8_t *body = NULL;
    uint32_t n = 0;
    int rc = kiln__iso_binaries_make(key, driver, payload, size, &body, &n);
    if (rc == KILN_OK)
        rc = write_frame(*(const int *)user, KILN__ISO_BINARIES, body, n);
    kiln__free(body);
    return rc;
}

/* Builds one program and answers with its outcome. */
static int do_job(int fd, struct kiln__prep_build *b, const struct kiln__iso_job *job)
{
    struct kiln__prep_item it = {.key = job->key,
                                 .name = job->name,
                                 .payload = job->payload,
                                 .size = job->size,
                                 .validated = (job->flags & KILN__ISO_JOB_VALIDATED) != 0};
    uint64_t built[KILN_STATE_KINDS], skipped[KILN_STATE_KINDS], failed[KILN_STATE_KINDS];
    for (unsigned k = 0; k < KILN_STATE_KINDS; k++) {
        built[k] = atomic_load(&b->built[k]);
        skipped[k] = atomic_load(&b->skipped[k]);
        failed[k] = atomic_load(&b->failed[k]);
        atomic_store(&b->skip_claimed[k], 0u);
        b->skip_reason[k][0] = '\0';
    }
    uint64_t bad = atomic_load(&b->bad), lone = atomic_load(&b->lone);
    int rc = kiln__prep_build_one(b, &it, 0);
    for (uint32_t k = 0; k < KILN_STATE_KINDS; k++) {
        if (atomic_load(&b->built[k]) != built[k])
            return send_result(fd, 0, it.from_binaries ? KILN__ISO_FROM_BINARIES : KILN__ISO_BUILT,
                               k, "", &it);
        if (atomic_load(&b->skipped[k]) != skipped[k])
            return send_result(fd, it.status < 0 ? it.status : KILN_ENOTSUP, KILN__ISO_SKIPPED, k,
                               b->skip_reason[k], NULL);
        if (atomic_load(&b->failed[k]) != failed[k])
            return send_result(fd, it.status < 0 ? it.status : KILN_EVULKAN, KILN__ISO_FAILED, k,
                               "", NULL);
    }
    if (atomic_load(&b->lone) != lone)
        return send_result(fd, 0, KILN__ISO_LONE, 0, "", NULL);
    (void)bad; /* a refused payload or stage: the one outcome left */
    return send_result(fd,
                       rc < 0          ? rc
                       : it.status < 0 ? it.status
                                       : KILN_EFORMAT,
                       KILN__ISO_BAD, 0, "", NULL);
}

/* CACHE: the context's pipeline cache data (empty without one). */
static int send_cache(int fd, struct kiln_vk *vk)
{
    struct kiln_vk_handles h = KILN_VK_HANDLES_INIT;
    kiln_vk_get_handles(vk, &h);
    void *data = NULL;
    size_t size = 0;
    PFN_vkGetDeviceProcAddr gdpa =
        (PFN_vkGetDeviceProcAddr)h.get_instance_proc_addr(h.instance, "vkGetDeviceProcAddr");
    PFN_vkGetPipelineCacheData get =
        gdpa ? (PFN_vkGetPipelineCacheData)gdpa(h.device, "vkGetPipelineCacheData") : NULL;
    if (get && h.pipeline_cache != VK_NULL_HANDLE &&
        get(h.device, h.pipeline_cache, &size, NULL) == VK_SUCCESS && size &&
        size <= KILN__ISO_BODY_MAX) {
        data = kiln__malloc(size);
        if (data && get(h.device, h.pipeline_cache, &size, data) != VK_SUCCESS)
            size = 0;
    }
    if (!data)
        size = 0;
    int rc = write_frame(fd, KILN__ISO_CACHE, data, size);
    kiln__free(data);
    return rc;
}

/* The session after the context was made: batches until END. */
static int serve(int in, int out, struct kiln__prep_build *b)
{
    for (;;) {
        struct kiln__iso_head h;
        void *body = NULL;
        int rc = read_frame(in, &h, &body);
        if (rc < 0)
            return rc;
        if (h.type == KILN__ISO_END) {
            kiln__free(body);
            return send_cache(out, b->vk);
        }
        struct kiln__iso_job jobs[KILN__ISO_BATCH_MAX];
        uint32_t count = 0;
        rc = h.type == KILN__ISO_JOB
                 ? kiln__iso_batch_parse(body, h.size, jobs, KILN__ISO_BATCH_MAX, &count)
                 : KILN_EFORMAT;
        /* In order, each answered as it ends: the parent blames a death on
         * the first program it has no answer for. */
        for (uint32_t i = 0; i < count && rc == KILN_OK; i++)
            rc = do_job(out, b, &jobs[i]);
        kiln__free(body);
        if (rc < 0)
            return rc;
    }
}

/* The greeting (HELLO) and what the worker makes of it: the extensions
 * to enable (names borrowed from the builders) and why a step failed. */
struct greeting {
    int in;
    const struct kiln_builder *builders;
    size_t nbuilders;
    void *body; /* the HELLO frame's body: hello points into it */
    struct kiln__iso_hello hello;
    const char *names[64];
    uint32_t nnames;
    int read_rc; /* the greeting's read or parse failed: the channel's word */
    char why[160];
};

/* The extensions the parent found the run's programs need, as names. */
static int greeting_names(struct greeting *g)
{
    uint64_t *masks = g->nbuilders ? kiln__calloc(g->nbuilders, sizeof(*masks)) : NULL;
    if (g->nbuilders && !masks) {
        snprintf(g->why, sizeof(g->why), "out of memory");
        return KILN_ENOMEM;
    }
    for (size_t i = 0; masks && i < g->nbuilders; i++)
        for (uint32_t k = 0; k < g->builders[i].ndevice_extensions; k++)
            if (g->builders[i].device_extensions[k] &&
                kiln__iso_hello_wants(&g->hello, g->builders[i].kind,
                                      g->builders[i].device_extensions[k]))
                masks[i] |= (uint64_t)1 << k;
    g->nnames = kiln__prep_builder_extensions(g->builders, g->nbuilders, masks, g->names,
                                              KILN_ARRAY_LEN(g->names) - 1);
    kiln__free(masks);
    /* The host tier's extension, as the parent's own context has it. */
    if (g->hello.flags & KILN__ISO_HELLO_BINARIES)
        g->names[g->nnames++] = "VK_KHR_pipeline_binary";
    return KILN_OK;
}

/* Reads and parses the greeting; `body` is a first frame already read
 * (NULL: read it here). */
static int read_hello(struct greeting *g, const struct kiln__iso_head *first, void *body)
{
    struct kiln__iso_head h;
    int rc = KILN_OK;
    if (first) {
        h = *first;
    } else {
        rc = read_frame(g->in, &h, &body);
    }
    g->body = body;
    if (rc == KILN_OK)
        rc = h.type == KILN__ISO_HELLO ? kiln__iso_hello_parse(body, h.size, &g->hello)
                                       : KILN_EFORMAT;
    if (rc < 0) {
        g->read_rc = rc;
        return rc;
    }
    /* The test fault "hang:" KILN__PREP_FAULT_GREETING: a worker that misses
     * its greeting's deadline (a no-op outside test builds). */
    kiln__prep_before_build(KILN__PREP_FAULT_GREETING);
    return greeting_names(g);
}

/* kiln__vk_create_late's callback for a worker started early (START):
 * the instance is made and the device chosen while the parent's run
 * translated; the greeting now says which extensions the device gets. */
static int late_hello(void *user, const char *const **names, uint32_t *count)
{
    struct greeting *g = user;
    KILN_TRY(read_hello(g, NULL, NULL));
    *names = g->names;
    *count = g->nnames;
    return KILN_OK;
}

/*
 * The worker's Vulkan context, for a first frame `h` with `body`: a HELLO
 * (the context made with its extensions), or a START (the parent started
 * this worker at its run's start: the context is begun with START's
 * device and cache folder, and the HELLO read in its late callback).
 * @return 0 with *vk, or the error: g->read_rc set when the greeting
 * never came whole (no READY is then sent).
 */
static int make_context(struct greeting *g, const struct kiln__iso_head *h, void *body,
                        struct kiln_vk **vk)
{
    struct kiln__iso_hello start;
    bool early = h->type == KILN__ISO_START;
    int rc = early ? kiln__iso_hello_parse(body, h->size, &start) : read_hello(g, h, body);
    if (rc < 0) {
        g->read_rc = rc;
        if (early)
            kiln__free(body);
        return rc;
    }
    const struct kiln__iso_hello *where = early ? &start : &g->hello;
    struct kiln_vk_options vopt = {.size = sizeof(vopt),
                                   .use_device_index = (where->flags & KILN__ISO_HELLO_DEVICE) != 0,
                                   .device = where->device,
                                   .cache_dir = where->cache_dir[0] ? where->cache_dir : NULL,
                                   .extra_extensions = g->names,
                                   .extra_extension_count = g->nnames,
                                   .no_pipeline_library =
                                       true}; /* as the parent's own context (start.c) */
    struct kiln__vk_late late = {.fn = late_hello, .user = g};
    rc = early ? kiln__vk_create_late(&vopt, &late, vk) : kiln_vk_create(&vopt, vk);
    if (early)
        kiln__free(body);
    /* Failed before the greeting (no device): answered only once greeted,
     * as a worker started late; a parent that never greets (its own
     * context failed alike) ends this one without a word from it. */
    if (rc < 0 && early && !g->body && !g->read_rc && read_hello(g, NULL, NULL) < 0)
        return g->read_rc ? g->read_rc : rc;
    if (rc < 0 && !g->why[0])
        snprintf(g->why, sizeof(g->why), "no Vulkan context");
    return rc;
}

/* The worker builds with the builders its parent has: the application's
 * and the core's defaults (kiln__prep_builders_in). */
int kiln_isolate_worker_main(int in_fd, int out_fd, const struct kiln_isolate_worker_options *o)
{
    int in = in_fd < 0 ? 0 : in_fd, out = out_fd < 0 ? 1 : out_fd;
    kiln__iso_worker_init();
    struct kiln_isolate_worker_options opt = KILN_ISOLATE_WORKER_OPTIONS_INIT;
    KILN_TRY(KILN_STRUCT_IN(&opt, o, "kiln_isolate_worker_options"));
    struct kiln__prep_builders own;
    KILN_TRY(kiln__prep_builders_in(opt.builders, opt.nbuilders, &own));
    struct greeting g = {.in = in,
                         .builders = own.list ? own.list : opt.builders,
                         .nbuilders = own.list ? own.n : opt.nbuilders};
    if (kiln__prep_check_builders(g.builders, g.nbuilders, "worker") < 0) {
        kiln__prep_builders_free(&own);
        return KILN_EINVAL;
    }
    struct kiln__iso_head h;
    void *body = NULL;
    struct kiln_vk *vk = NULL;
    int rc = read_frame(in, &h, &body);
    if (rc == KILN_OK)
        rc = make_context(&g, &h, body, &vk);
    else
        g.read_rc = rc;
    if (g.read_rc < 0) { /* no greeting: nobody to answer */
        kiln__free(g.body);
        kiln__prep_builders_free(&own);
        return worker_end(g.read_rc);
    }
    struct kiln_pack_dict *dict = NULL;
    if (rc == KILN_OK && g.hello.dict_size) {
        rc = kiln_pack_dict_load(g.hello.dict, g.hello.dict_size, &dict);
        if (rc < 0)
            snprintf(g.why, sizeof(g.why), "the packing dictionary could not be loaded");
    }
    /* The host tier, read only here: what this worker captures goes to
     * the parent (relay_binaries), whose tier keeps it. */
    struct kiln__bin_provider provider;
    struct kiln__bin_tier *bins = NULL;
    if (rc == KILN_OK && (g.hello.flags & KILN__ISO_HELLO_BINARIES) && g.hello.cache_dir[0]) {
        bool keep = (g.hello.flags & KILN__ISO_HELLO_KEEP_BINARIES) != 0;
        struct kiln__bin_tier_options bo = {.cache_dir = g.hello.cache_dir,
                                            .read_only = true,
                                            .relay = keep ? relay_binaries : NULL,
                                            .relay_user = &out};
        bins = kiln__bin_tier_for_run(KILN_BINARIES_AUTO, vk, &provider, &bo);
    }
    kiln__free(g.body);
    int wrc = send_ready(out, rc, g.why);
    if (rc == KILN_OK && wrc == KILN_OK) {
        struct kiln__prep_build b = {
            .vk = vk, .dict = dict, .builders = g.builders, .nbuilders = g.nbuilders, .bins = bins};
        rc = serve(in, out, &b);
    } else if (rc == KILN_OK) {
        rc = wrc;
    }
    kiln__bin_tier_close(bins);
    kiln_vk_destroy(vk);
    kiln_pack_dict_destroy(dict);
    kiln__prep_builders_free(&own);
    return worker_end(rc);
}
