/*
 * topo.c - the portable half of topo: CPU sets, the sysfs text parsers, the
 * choice of where to pin and the opt-in rule.
 *
 * Design:
 * - Nothing here reads the system, so every rule is tested with plain
 *   values. The platform file reads sysfs / proc and calls back into the
 *   parsers and kiln__topo_finish().
 * - A parser either fills its whole result or leaves it empty: callers can
 *   never see half a CPU list, and so never build half a domain.
 * - A CPU set is a word array sized to its highest CPU, capped at
 *   KILN_TOPO_MAX_CPUS, so no input can make kiln allocate more than 8 KiB
 *   for one set and more than 1024 CPUs need nothing special.
 * - The choice pins only when the usable last-level domains differ in
 *   size: a part whose dies are alike gains nothing from losing half its
 *   cores (measured: -1.4% on a 5900X against +25% on a 9950X3D).
 */
#include "topo_internal.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- CPU sets ------------------------------------------------------------ */

int kiln__cpuset_reserve(struct kiln_cpuset *set, uint32_t ncpus)
{
    assert(ncpus <= KILN_TOPO_MAX_CPUS);
    uint32_t need = (ncpus + 63) / 64;
    if (need <= set->nwords)
        return KILN_OK;
    uint64_t *w = kiln__realloc(set->words, need * sizeof(*w));
    if (!w)
        return KILN_ENOMEM;
    memset(w + set->nwords, 0, (need - set->nwords) * sizeof(*w));
    set->words = w;
    set->nwords = need;
    return KILN_OK;
}

int kiln__cpuset_add(struct kiln_cpuset *set, uint32_t cpu)
{
    if (cpu >= KILN_TOPO_MAX_CPUS)
        return KILN_ERANGE;
    KILN_TRY(kiln__cpuset_reserve(set, cpu + 1));
    set->words[cpu / 64] |= UINT64_C(1) << (cpu % 64);
    return KILN_OK;
}

/* Adds CPUs a..b (inclusive); both below KILN_TOPO_MAX_CPUS. */
static int cpuset_add_range(struct kiln_cpuset *set, uint32_t a, uint32_t b)
{
    assert(a <= b && b < KILN_TOPO_MAX_CPUS);
    KILN_TRY(kiln__cpuset_reserve(set, b + 1));
    for (uint32_t c = a; c <= b; c++)
        set->words[c / 64] |= UINT64_C(1) << (c % 64);
    return KILN_OK;
}

int kiln_cpuset_copy(struct kiln_cpuset *dst, const struct kiln_cpuset *src)
{
    if (!dst || !src)
        return KILN_EINVAL;
    *dst = (struct kiln_cpuset){0};
    if (src->nwords == 0)
        return KILN_OK;
    dst->words = kiln__malloc(src->nwords * sizeof(*dst->words));
    if (!dst->words)
        return KILN_ENOMEM;
    memcpy(dst->words, src->words, src->nwords * sizeof(*dst->words));
    dst->nwords = src->nwords;
    return KILN_OK;
}

void kiln__cpuset_and(struct kiln_cpuset *set, const struct kiln_cpuset *other)
{
    for (uint32_t i = 0; i < set->nwords; i++)
        set->words[i] &= i < other->nwords ? other->words[i] : 0;
}

static uint64_t word_at(const struct kiln_cpuset *s, uint32_t i)
{
    return i < s->nwords ? s->words[i] : 0;
}

bool kiln__cpuset_equal(const struct kiln_cpuset *a, const struct kiln_cpuset *b)
{
    uint32_t n = KILN_MAX(a->nwords, b->nwords);
    for (uint32_t i = 0; i < n; i++)
        if (word_at(a, i) != word_at(b, i))
            return false;
    return true;
}

bool kiln__cpuset_subset(const struct kiln_cpuset *a, const struct kiln_cpuset *b)
{
    for (uint32_t i = 0; i < a->nwords; i++)
        if (a->words[i] & ~word_at(b, i))
            return false;
    return true;
}

bool kiln__cpuset_intersects(const struct kiln_cpuset *a, const struct kiln_cpuset *b)
{
    uint32_t n = KILN_MIN(a->nwords, b->nwords);
    for (uint32_t i = 0; i < n; i++)
        if (a->words[i] & b->words[i])
            return true;
    return false;
}

uint32_t kiln__cpuset_span(const struct kiln_cpuset *set)
{
    for (uint32_t i = set->nwords; i-- > 0;)
        if (set->words[i])
            return i * 64 + 64 - (uint32_t)__builtin_clzll(set->words[i]);
    return 0;
}

void kiln_cpuset_free(struct kiln_cpuset *set)
{
    if (!set)
        return;
    kiln__free(set->words);
    set->words = NULL;
    set->nwords = 0;
}

bool kiln_cpuset_has(const struct kiln_cpuset *set, uint32_t cpu)
{
    if (!set)
        return false;
    return cpu / 64 < set->nwords && (set->words[cpu / 64] >> (cpu % 64) & 1);
}

uint32_t kiln_cpuset_count(const struct kiln_cpuset *set)
{
    if (!set)
        return 0;
    uint32_t n = 0;
    for (uint32_t i = 0; i < set->nwords; i++)
        n += (uint32_t)__builtin_popcountll(set->words[i]);
    return n;
}

int64_t kiln_cpuset_next(const struct kiln_cpuset *set, uint32_t from)
{
    if (!set)
        return -1;
    uint32_t i = from / 64;
    if (i >= set->nwords)
        return -1;
    uint64_t w = set->words[i] & (~UINT64_C(0) << (from % 64));
    for (;;) {
        if (w)
            return (int64_t)i * 64 + __builtin_ctzll(w);
        if (++i >= set->nwords)
            return -1;
        w = set->words[i];
    }
}

size_t kiln_cpuset_format(const struct kiln_cpuset *set, char *buf, size_t cap)
{
    size_t need = 0;
    /* A NULL buf only counts the length needed. */
    if (buf && cap > 0)
        buf[0] = '\0';
    int64_t c = kiln_cpuset_next(set, 0);
    while (c >= 0) {
        int64_t end = c;
        while (kiln_cpuset_has(set, (uint32_t)(end + 1)))
            end++;
        char item[32];
        int n = end > c ? snprintf(item, sizeof(item), "%s%lld-%lld", need ? "," : "", (long long)c,
                                   (long long)end)
                        : snprintf(item, sizeof(item), "%s%lld", need ? "," : "", (long long)c);
        if (buf && need + (size_t)n < cap)
            memcpy(buf + need, item, (size_t)n + 1);
        else if (buf && need < cap)
            buf[need] = '\0';
        need += (size_t)n;
        c = kiln_cpuset_next(set, (uint32_t)end + 1);
    }
    return need;
}

/* ---- parsers ------------------------------------------------------------- */

/* @return len without trailing white space (sysfs files end in "\n"). */
static size_t trim_end(const char *text, size_t len)
{
    while (len > 0 && (text[len - 1] == '\n' || text[len - 1] == ' ' || text[len - 1] == '\t' ||
                       text[len - 1] == '\r'))
        len--;
    return len;
}

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

/* Parses a decimal CPU number at text[*i]. */
static int parse_cpu(const char *text, size_t len, size_t *i, uint32_t *out)
{
    if (*i >= len || !is_digit(text[*i]))
        return KILN_EPARSE;
    uint32_t v = 0;
    bool over = false;
    while (*i < len && is_digit(text[*i])) {
        v = v * 10 + (uint32_t)(text[*i] - '0');
        if (v >= KILN_TOPO_MAX_CPUS) {
            over = true;
            v = KILN_TOPO_MAX_CPUS; /* stays small, so the next digit cannot wrap */
        }
        (*i)++;
    }
    *out = v;
    return over ? KILN_ERANGE : KILN_OK;
}

int kiln_cpuset_parse_list(struct kiln_cpuset *set, const char *text, size_t len)
{
    if (!set || (!text && len))
        return KILN_EINVAL;
    if (!text)
        text = ""; /* NULL of length 0: empty text */
    assert(set && (text || len == 0));
    *set = (struct kiln_cpuset){0};
    len = trim_end(text, len);
    int rc = KILN_OK;
    bool over = false; /* a CPU past the limit: KILN_ERANGE, unless the text is malformed too */
    for (size_t i = 0; i < len && rc == KILN_OK;) {
        uint32_t a = 0, b = 0;
        int ra = parse_cpu(text, len, &i, &a);
        if (ra == KILN_EPARSE) {
            rc = ra;
            break;
        }
        b = a;
        int rb = KILN_OK;
        if (i < len && text[i] == '-') {
            i++;
            rb = parse_cpu(text, len, &i, &b);
            if (rb == KILN_EPARSE || b < a) {
                rc = KILN_EPARSE;
                break;
            }
        }
        if (ra == KILN_ERANGE || rb == KILN_ERANGE)
            over = true;
        else
            rc = cpuset_add_range(set, a, b);
        if (rc == KILN_OK && i < len) {
            /* A separator must be followed by another item. */
            if (text[i] != ',' || i + 1 == len)
                rc = KILN_EPARSE;
            i++;
        }
    }
    if (rc == KILN_OK && over)
        rc = KILN_ERANGE;
    if (rc < 0)
        kiln_cpuset_free(set);
    return rc;
}

int kiln_cpuset_parse_mask(struct kiln_cpuset *set, const char *text, size_t len)
{
    if (!set || (!text && len))
        return KILN_EINVAL;
    if (!text)
        text = ""; /* NULL of length 0: empty text */
    assert(set && (text || len == 0));
    *set = (struct kiln_cpuset){0};
    len = trim_end(text, len);
    if (len == 0)
        return KILN_EPARSE;
    size_t groups = 1;
    for (size_t i = 0; i < len; i++)
        groups += text[i] == ',';

    int rc = KILN_OK;
    size_t i = 0;
    /* Group g (counted from the right) holds CPUs 32g .. 32g+31. */
    for (size_t g = groups; g-- > 0 && rc == KILN_OK;) {
        uint32_t v = 0;
        size_t digits = 0;
        for (; i < len && text[i] != ','; i++, digits++) {
            int h = kiln__hexval((unsigned char)text[i]);
            if (h < 0 || digits == 8) {
                rc = KILN_EPARSE;
                break;
            }
            v = v << 4 | (uint32_t)h;
        }
        if (rc < 0)
            break;
        if (digits == 0) {
            rc = KILN_EPARSE;
            break;
        }
        i++; /* the comma */
        if (v == 0)
            continue;
        if (g >= KILN_TOPO_MAX_CPUS / 32) {
            rc = KILN_ERANGE;
            break;
        }
        for (uint32_t bit = 0; bit < 32 && rc == KILN_OK; bit++)
            if (v >> bit & 1)
                rc = kiln__cpuset_add(set, (uint32_t)g * 32 + bit);
    }
    if (rc < 0)
        kiln_cpuset_free(set);
    return rc;
}

int kiln_topo_parse_size(const char *text, size_t len, uint64_t *bytes)
{
    if (!bytes || (!text && len))
        return KILN_EINVAL;
    assert(bytes && (text || len == 0));
    *bytes = 0;
    len = trim_end(text, len);
    size_t i = 0;
    uint64_t v = 0;
    bool over = false; /* malformed text is KILN_EPARSE even when its number is huge */
    for (; i < len && is_digit(text[i]); i++) {
        unsigned d = (unsigned)(text[i] - '0');
        if (v > (UINT64_MAX - d) / 10)
            over = true;
        else
            v = v * 10 + d;
    }
    if (i == 0)
        return KILN_EPARSE;
    unsigned shift = 0;
    if (i < len) {
        switch (text[i]) {
        case 'K':
        case 'k':
            shift = 10;
            break;
        case 'M':
            shift = 20;
            break;
        case 'G':
            shift = 30;
            break;
        default:
            return KILN_EPARSE;
        }
        if (++i != len)
            return KILN_EPARSE;
    }
    if (over || v > (UINT64_MAX >> shift))
        return KILN_ERANGE;
    *bytes = v << shift;
    return KILN_OK;
}

/* ---- names and text ---------------------------------------------------------- */

const char *kiln_cpu_cache_type_name(enum kiln_cpu_cache_type type)
{
    switch (type) {
    case KILN_CPU_CACHE_DATA:
        return "data";
    case KILN_CPU_CACHE_INSTRUCTION:
        return "instruction";
    case KILN_CPU_CACHE_UNIFIED:
        return "unified";
    }
    return "?";
}

const char *kiln_pin_verdict_name(enum kiln_pin_verdict verdict)
{
    static const char *const names[] = {"apply",   "no-caches", "no-candidate", "symmetric",
                                        "already", "off",       "failed"};
    return (unsigned)verdict < KILN_ARRAY_LEN(names) ? names[verdict] : "?";
}

const char *kiln__topo_size_text(char *buf, size_t cap, uint64_t bytes)
{
    if (bytes >= (UINT64_C(1) << 20) && bytes % (UINT64_C(1) << 20) == 0)
        snprintf(buf, cap, "%llu MiB", (unsigned long long)(bytes >> 20));
    else if (bytes >= 1024 && bytes % 1024 == 0)
        snprintf(buf, cap, "%llu KiB", (unsigned long long)(bytes >> 10));
    else
        snprintf(buf, cap, "%llu bytes", (unsigned long long)bytes);
    return buf;
}

/* snprintf for one-sentence texts, where cutting a long one short is fine. */
static void say(char *buf, size_t cap, const char *fmt, ...) KILN_PRINTF(3, 4);

static void say(char *buf, size_t cap, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, cap, fmt, ap);
    va_end(ap);
}

/* A CPU list for a log line: shortened with "..." when it is long. */
static const char *list_text(char *buf, size_t cap, const struct kiln_cpuset *set)
{
    assert(cap > 4);
    if (kiln_cpuset_format(set, buf, cap) >= cap)
        memcpy(buf + cap - 4, "...", 4);
    return buf;
}

/* ---- topology ------------------------------------------------------------------ */

static int64_t first_cpu(const struct kiln_cpu_cache_domain *d)
{
    return kiln_cpuset_next(&d->cpus, 0);
}

static int domain_order(const void *pa, const void *pb)
{
    const struct kiln_cpu_cache_domain *a = pa, *b = pb;
    if (a->level != b->level)
        return a->level < b->level ? -1 : 1;
    if (a->type != b->type)
        return a->type < b->type ? -1 : 1;
    int64_t fa = first_cpu(a), fb = first_cpu(b);
    return fa < fb ? -1 : fa > fb;
}

static bool is_data_or_unified(const struct kiln_cpu_cache_domain *d)
{
    return d->type == KILN_CPU_CACHE_DATA || d->type == KILN_CPU_CACHE_UNIFIED;
}

/* @return whether a beats b as the largest: larger, or as large with a lower CPU. */
static bool beats(const struct kiln_cpu_cache_domain *a, const struct kiln_cpu_cache_domain *b)
{
    if (a->size != b->size)
        return a->size > b->size;
    return first_cpu(a) < first_cpu(b);
}

int kiln__topo_add_domain(struct kiln_topo *topo, size_t *cap, struct kiln_cpu_cache_domain *d)
{
    for (size_t i = 0; i < topo->ndomains; i++) {
        const struct kiln_cpu_cache_domain *o = &topo->domains[i];
        if (o->level != d->level || o->type != d->type ||
            !kiln__cpuset_intersects(&o->cpus, &d->cpus))
            continue;
        if (!kiln__cpuset_equal(&o->cpus, &d->cpus))
            return KILN__DOMAIN_OVERLAP;
        if (o->size != d->size)
            return KILN__DOMAIN_SIZE;
        kiln_cpuset_free(&d->cpus);
        return KILN_OK;
    }
    struct kiln_cpu_cache_domain *all =
        kiln__grow(topo->domains, topo->ndomains, cap, sizeof(*all), 16);
    if (!all)
        return KILN_ENOMEM;
    topo->domains = all;
    topo->domains[topo->ndomains++] = *d;
    *d = (struct kiln_cpu_cache_domain){0};
    return KILN_OK;
}

void kiln__topo_finish(struct kiln_topo *topo, const char *where)
{
    if (topo->ndomains > 1)
        qsort(topo->domains, topo->ndomains, sizeof(*topo->domains), domain_order);
    topo->last_level = 0;
    topo->largest = -1;
    for (size_t i = 0; i < topo->ndomains; i++)
        if (is_data_or_unified(&topo->domains[i]))
            topo->last_level = KILN_MAX(topo->last_level, topo->domains[i].level);
    for (size_t i = 0; i < topo->ndomains; i++) {
        const struct kiln_cpu_cache_domain *d = &topo->domains[i];
        if (d->level != topo->last_level || !is_data_or_unified(d))
            continue;
        if (topo->largest < 0 || beats(d, &topo->domains[topo->largest]))
            topo->largest = (int64_t)i;
    }
    topo->note[0] = '\0';
    if (topo->ndomains == 0)
        say(topo->note, sizeof(topo->note),
            "no cache information under %s (common in virtual machines)", where);
    else if (topo->last_level == 0)
        say(topo->note, sizeof(topo->note), "only instruction caches under %s", where);
}

void kiln_topo_free(struct kiln_topo *topo)
{
    if (!topo)
        return;
    for (size_t i = 0; i < topo->ndomains; i++)
        kiln_cpuset_free(&topo->domains[i].cpus);
    kiln__free(topo->domains);
    kiln_cpuset_free(&topo->online);
    kiln__free(topo);
}

/* ---- the choice ---------------------------------------------------------------- */

/* A caller's plan holds its CPU set only when its size covers it. */
static bool plan_has_cpus(const struct kiln_pin_plan *plan)
{
    return plan->size >= offsetof(struct kiln_pin_plan, cpus) + sizeof(plan->cpus);
}

void kiln_pin_plan_free(struct kiln_pin_plan *plan)
{
    if (plan && plan_has_cpus(plan))
        kiln_cpuset_free(&plan->cpus);
}

void kiln__pin_plan_out(struct kiln_pin_plan *out, struct kiln_pin_plan *plan)
{
    if (!out || kiln__struct_out_check(out, "kiln_pin_plan") < 0 || !plan_has_cpus(out)) {
        kiln_cpuset_free(&plan->cpus); /* nowhere to give it */
        if (!out || out->size < sizeof(size_t))
            return;
    }
    KILN_STRUCT_OUT(out, plan);
}

static void plan_reset(struct kiln_pin_plan *plan, enum kiln_pin_verdict verdict)
{
    kiln_cpuset_free(&plan->cpus);
    plan->verdict = verdict;
    plan->domain = -1;
    plan->reason[0] = '\0';
}

static int topo_choose(const struct kiln_topo *topo, const struct kiln_cpuset *allowed,
                       struct kiln_pin_plan *plan)
{
    *plan = (struct kiln_pin_plan){.size = sizeof(struct kiln_pin_plan), .domain = -1};
    if (topo->last_level == 0) {
        plan->verdict = KILN_PIN_NO_CACHES;
        say(plan->reason, sizeof(plan->reason), "nothing to pin to: %s",
            topo->note[0] ? topo->note : "no data or unified cache is known");
        return KILN_OK;
    }

    /* Only online CPUs count: an affinity mask may name offline ones. */
    struct kiln_cpuset usable = {0};
    KILN_TRY(kiln_cpuset_copy(&usable, allowed ? allowed : &topo->online));
    kiln__cpuset_and(&usable, &topo->online);

    int64_t best = -1;
    uint32_t candidates = 0;
    uint64_t smallest = UINT64_MAX;
    for (size_t i = 0; i < topo->ndomains; i++) {
        const struct kiln_cpu_cache_domain *d = &topo->domains[i];
        if (d->level != topo->last_level || !is_data_or_unified(d) ||
            !kiln__cpuset_intersects(&d->cpus, &usable))
            continue;
        candidates++;
        smallest = KILN_MIN(smallest, d->size);
        if (best < 0 || beats(d, &topo->domains[best]))
            best = (int64_t)i;
    }

    char cpus[96], size[32], small[32];
    if (best < 0) {
        plan->verdict = KILN_PIN_NO_CANDIDATE;
        say(plan->reason, sizeof(plan->reason),
            "none of the CPUs this process may use (%s) has a known L%u cache",
            list_text(cpus, sizeof(cpus), &usable), topo->last_level);
        kiln_cpuset_free(&usable);
        return KILN_OK;
    }
    const struct kiln_cpu_cache_domain *d = &topo->domains[best];
    plan->domain = best;
    list_text(cpus, sizeof(cpus), &d->cpus);
    kiln__topo_size_text(size, sizeof(size), d->size);
    kiln__topo_size_text(small, sizeof(small), smallest);

    if (kiln__cpuset_subset(&usable, &d->cpus) || candidates == 1) {
        plan->verdict = KILN_PIN_ALREADY;
        say(plan->reason, sizeof(plan->reason),
            "no change: every CPU this process may use with a known L%u cache is in the "
            "%s domain %s",
            topo->last_level, size, cpus);
    } else if (smallest == d->size) {
        plan->verdict = KILN_PIN_SYMMETRIC;
        say(plan->reason, sizeof(plan->reason),
            "all %u usable L%u domains are %s: pinning would cut the usable cores and buy "
            "no cache back (symmetric parts measured a loss)",
            candidates, topo->last_level, size);
    } else {
        int rc = kiln_cpuset_copy(&plan->cpus, &d->cpus);
        if (rc < 0) {
            kiln_cpuset_free(&usable);
            plan_reset(plan, KILN_PIN_FAILED);
            say(plan->reason, sizeof(plan->reason), "out of memory");
            return rc;
        }
        kiln__cpuset_and(&plan->cpus, &usable);
        char pin[96];
        plan->verdict = KILN_PIN_APPLY;
        say(plan->reason, sizeof(plan->reason),
            "pin to %s: the L%u domain %s (%s) is the largest of %u usable (smallest %s)",
            list_text(pin, sizeof(pin), &plan->cpus), topo->last_level, cpus, size, candidates,
            small);
    }
    kiln_cpuset_free(&usable);
    return KILN_OK;
}

/* ---- pinning ------------------------------------------------------------------ */

bool kiln__tid_seen(const struct kiln__tid_list *l, uint64_t tid)
{
    for (size_t i = 0; i < l->n; i++)
        if (l->v[i] == tid)
            return true;
    return false;
}

int kiln__tid_add(struct kiln__tid_list *l, uint64_t tid)
{
    uint64_t *v = kiln__grow(l->v, l->n, &l->cap, sizeof(*v), 64);
    if (!v)
        return KILN_ENOMEM;
    l->v = v;
    l->v[l->n++] = tid;
    return KILN_OK;
}

void kiln__tid_list_free(struct kiln__tid_list *l)
{
    kiln__free(l->v);
    *l = (struct kiln__tid_list){0};
}

int kiln__pin_text(const struct kiln_cpuset *cpus, char *text, size_t cap)
{
    assert(cap >= 4);
    if (kiln_cpuset_format(cpus, text, cap) >= cap)
        memcpy(text + cap - 4, "...", 4);
    if (kiln_cpuset_count(cpus) == 0) {
        KILN_ERROR("topo", "refusing to pin to an empty CPU set");
        return KILN_EINVAL;
    }
    return KILN_OK;
}

/* ---- the opt-in rule --------------------------------------------------------- */

static int affinity_decide(int flag, const char *env_value, struct kiln_affinity_decision *out)
{
    *out = (struct kiln_affinity_decision)KILN_AFFINITY_DECISION_INIT;
    if (flag < -1 || flag > 1) {
        say(out->reason, sizeof(out->reason), "invalid flag value %d", flag);
        return KILN_EINVAL;
    }
    int env = -1; /* -1 unset, 0, 1 */
    if (env_value && *env_value) {
        if (strcmp(env_value, "1") == 0)
            env = 1;
        else if (strcmp(env_value, "0") == 0)
            env = 0;
        else
            out->env_malformed = true;
    }

    if (flag >= 0) {
        out->on = flag == 1;
        out->source = KILN_AFFINITY_FLAG;
        const char *name = flag ? "--cache-affinity" : "--no-cache-affinity";
        if (out->env_malformed)
            say(out->reason, sizeof(out->reason), "%s given (%s='%.32s' ignored: expected 1 or 0)",
                name, KILN_CPU_CACHE_AFFINITY_ENV, env_value);
        else if (env >= 0 && env != flag)
            say(out->reason, sizeof(out->reason), "%s given (wins over %s=%d)", name,
                KILN_CPU_CACHE_AFFINITY_ENV, env);
        else
            say(out->reason, sizeof(out->reason), "%s given", name);
        return KILN_OK;
    }
    if (out->env_malformed) {
        out->source = KILN_AFFINITY_ENV;
        say(out->reason, sizeof(out->reason), "%s='%.32s' is malformed: expected 1 or 0",
            KILN_CPU_CACHE_AFFINITY_ENV, env_value);
        return KILN_EINVAL;
    }
    if (env >= 0) {
        out->on = env == 1;
        out->source = KILN_AFFINITY_ENV;
        say(out->reason, sizeof(out->reason), "%s=%d", KILN_CPU_CACHE_AFFINITY_ENV, env);
        return KILN_OK;
    }
    out->source = KILN_AFFINITY_DEFAULT;
    say(out->reason, sizeof(out->reason), "off by default (--cache-affinity or %s=1 turns it on)",
        KILN_CPU_CACHE_AFFINITY_ENV);
    return KILN_OK;
}

int kiln_topo_choose(const struct kiln_topo *topo, const struct kiln_cpuset *allowed,
                     struct kiln_pin_plan *plan)
{
    if (!topo || !plan)
        return KILN_EINVAL;
    KILN_TRY(kiln__struct_out_check(plan, "kiln_pin_plan"));
    struct kiln_pin_plan p;
    int rc = topo_choose(topo, allowed, &p);
    kiln__pin_plan_out(plan, &p);
    return rc;
}

int kiln_affinity_decide(int flag, const char *env_value, struct kiln_affinity_decision *out)
{
    if (!out)
        return KILN_EINVAL;
    KILN_TRY(kiln__struct_out_check(out, "kiln_affinity_decision"));
    struct kiln_affinity_decision d;
    int rc = affinity_decide(flag, env_value, &d);
    KILN_STRUCT_OUT(out, &d);
    return rc;
}
