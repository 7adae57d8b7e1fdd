/*
 * fault.c - see fault.h. Test builds only (OL_FAULTS): the whole file is
 * empty otherwise.
 *
 * Rules live in one static table replaced as a whole under `mu`; nrules
 * (atomic) lets ol_fault_apply skip the mutex while no rule exists, which
 * is every operation of a run without faults. Random draws use each
 * rule's own xorshift64* state, so a seed repeats the same draws for the
 * same sequence of matching operations.
 */
#include "base/fault.h"

#ifdef OL_FAULTS

#include "base/log.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define ANY_DRIVE UINT32_MAX
#define LOG_MAX   32u      /* injections logged per rule set, then silence */
#define DELAY     1        /* rule.err of err=delay: the result kept, late */
#define DELAY_MAX 60000u   /* ms */

struct rule {
    uint8_t mod, op;       /* op OL_FAULT_OP_NONE: any */
    uint32_t drive;        /* ANY_DRIVE: any */
    uint64_t nth;          /* >= 1 */
    double p;              /* 0: fire on the nth (and after, when persist) */
    uint64_t seed, rng;
    int err;               /* -errno, 0 for short, DELAY */
    uint32_t ms;           /* DELAY: how long */
    bool ms_given;
    bool persist;
    bool spent;            /* fired, transient */
    uint64_t seen, fired;
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct rule rules[OL_FAULT_MAX_RULES];
static _Atomic unsigned nrules;
static _Atomic uint64_t injected[OL_FAULT_NMOD];
static unsigned logged;

static const char *const mod_names[OL_FAULT_NMOD] = {"store", "kvdisk", "rma"};
static const char *const op_names[OL_FAULT_NOPS] = {
    "any", "read", "write", "fsync", "open", "close", "rename", "unlink", "mkdir", "statx",
    "fallocate",
};
static const struct { const char *name; int err; } err_names[] = {
    {"EIO", -EIO}, {"ENOSPC", -ENOSPC}, {"EDQUOT", -EDQUOT}, {"short", 0}, {"delay", DELAY},
};

static const char *err_name(int err)
{
    for (size_t i = 0; i < sizeof err_names / sizeof err_names[0]; i++)
        if (err_names[i].err == err)
            return err_names[i].name;
    return "?";
}

/* xorshift64*: a uniform double in [0, 1). */
static double draw(struct rule *r)
{
    uint64_t x = r->rng;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    r->rng = x;
    return (double)((x * 0x2545F4914F6CDD1Dull) >> 11) * 0x1.0p-53;
}

/* Does rule r fire on this, its seen-th, match? */
static bool fires(struct rule *r)
{
    if (r->spent || r->seen < r->nth)
        return false;
    if (r->p > 0)
        return draw(r) < r->p;
    return r->seen == r->nth || r->persist;
}

int ol_fault_apply(enum ol_fault_mod mod, enum ol_fault_op op, unsigned drive, int res)
{
    if (!atomic_load_explicit(&nrules, memory_order_acquire) || op == OL_FAULT_OP_NONE)
        return res;
    bool rw = op == OL_FAULT_OP_READ || op == OL_FAULT_OP_WRITE;
    int out = res;
    uint32_t sleep_ms = 0;
    pthread_mutex_lock(&mu);
    unsigned n = atomic_load_explicit(&nrules, memory_order_relaxed);
    for (unsigned i = 0; i < n; i++) {
        struct rule *r = &rules[i];
        if (r->mod != mod || (r->op && r->op != op) ||
            (r->drive != ANY_DRIVE && r->drive != drive) || (r->err == 0 && (!rw || res < 2)))
            continue;
        r->seen++;
        if (!fires(r))
            continue;
        r->fired++;
        r->spent = !r->persist;
        if (r->err == DELAY)
            sleep_ms = r->ms;
        else   /* short: 1..res-1, never 0 (a read's end of file) */
            out = r->err ? r->err : res / 2;
        atomic_fetch_add_explicit(&injected[mod], 1, memory_order_relaxed);
        if (logged < LOG_MAX) {
            logged++;
            ol_warn("fault: %s drive %u %s: %d -> %d%s (rule %u, match %llu)%s", mod_names[mod],
                    drive, op_names[op], res, out, sleep_ms ? " late" : "", i + 1,
                    (unsigned long long)r->seen, logged == LOG_MAX ? "; no more fault lines" : "");
        }
        break;
    }
    pthread_mutex_unlock(&mu);
    /* the calling thread stalls: a slow step, as its caller sees it */
    struct timespec left = {sleep_ms / 1000, (long)(sleep_ms % 1000) * 1000000L};
    while (sleep_ms && nanosleep(&left, &left) < 0 && errno == EINTR)
        ;
    if (op == OL_FAULT_OP_OPEN && res >= 0 && out < 0)
        close(res);
    return out;
}

/* ---- parsing ---------------------------------------------------------------- */

/* [s, e) with the spaces at both ends cut off. */
static void trim(const char **s, const char **e)
{
    while (*s < *e && (**s == ' ' || **s == '\t' || **s == '\n' || **s == '\r'))
        (*s)++;
    while (*e > *s && ((*e)[-1] == ' ' || (*e)[-1] == '\t' || (*e)[-1] == '\n' ||
                       (*e)[-1] == '\r'))
        (*e)--;
}

static bool tok_is(const char *s, size_t n, const char *lit)
{
    return strlen(lit) == n && memcmp(s, lit, n) == 0;
}

/* A decimal number of [s, s + n), at most max. */
static bool parse_u64(const char *s, size_t n, uint64_t max, uint64_t *out)
{
    if (n == 0 || n > 20)
        return false;
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9' || v > (max - (uint64_t)(s[i] - '0')) / 10)
            return false;
        v = v * 10 + (uint64_t)(s[i] - '0');
    }
    *out = v;
    return true;
}

static int parse_field(struct rule *r, const char *s, size_t n, char *err, size_t errlen)
{
    const char *eq = memchr(s, '=', n);
    if (!eq) {
        if (tok_is(s, n, "persist"))
            r->persist = true;
        else if (tok_is(s, n, "once"))
            r->persist = false;
        else
            goto bad;
        return 0;
    }
    size_t kl = (size_t)(eq - s), vl = n - kl - 1;
    const char *v = eq + 1;
    uint64_t u;
    if (tok_is(s, kl, "drive")) {
        if (tok_is(v, vl, "any"))
            r->drive = ANY_DRIVE;
        else if (parse_u64(v, vl, ANY_DRIVE - 1, &u))
            r->drive = (uint32_t)u;
        else
            goto bad;
    } else if (tok_is(s, kl, "op")) {
        unsigned k = 0;
        while (k < OL_FAULT_NOPS && !tok_is(v, vl, op_names[k]))
            k++;
        if (k == OL_FAULT_NOPS)
            goto bad;
        r->op = (uint8_t)k; /* "any" is index 0, OL_FAULT_OP_NONE */
    } else if (tok_is(s, kl, "nth")) {
        if (!parse_u64(v, vl, UINT64_MAX, &u) || u == 0)
            goto bad;
        r->nth = u;
    } else if (tok_is(s, kl, "p")) {
        char num[32];
        if (vl == 0 || vl >= sizeof num)
            goto bad;
        memcpy(num, v, vl);
        num[vl] = 0;
        char *end;
        double p = strtod(num, &end);
        if (*end || !(p > 0 && p <= 1))
            goto bad;
        r->p = p;
    } else if (tok_is(s, kl, "ms")) {
        if (!parse_u64(v, vl, DELAY_MAX, &u) || u == 0)
            goto bad;
        r->ms = (uint32_t)u;
        r->ms_given = true;
    } else if (tok_is(s, kl, "seed")) {
        if (!parse_u64(v, vl, UINT64_MAX, &u))
            goto bad;
        r->seed = u;
    } else if (tok_is(s, kl, "err")) {
        size_t k = 0;
        while (k < sizeof err_names / sizeof err_names[0] && !tok_is(v, vl, err_names[k].name))
            k++;
        if (k == sizeof err_names / sizeof err_names[0])
            goto bad;
        r->err = err_names[k].err;
    } else {
        goto bad;
    }
    return 0;
bad:
    snprintf(err, errlen, "faults: bad field \"%.*s\" (fields: drive=N|any, op=read|write|fsync|"
        "open|close|rename|unlink|mkdir|statx|fallocate|any, nth=N, p=F, seed=N, "
        "err=EIO|ENOSPC|EDQUOT|short|delay, ms=N, persist, once)", (int)n, s);
    return -EINVAL;
}

static int parse_rule(struct rule *r, const char *s, const char *e, char *err, size_t errlen)
{
    memset(r, 0, sizeof *r);
    r->drive = ANY_DRIVE;
    r->nth = 1;
    r->seed = 1;
    r->err = -EIO;
    r->ms = 1000;
    const char *colon = memchr(s, ':', (size_t)(e - s));
    const char *ms = s, *me = colon ? colon : e;
    trim(&ms, &me);
    unsigned m = 0;
    while (m < OL_FAULT_NMOD && !tok_is(ms, (size_t)(me - ms), mod_names[m]))
        m++;
    if (m == OL_FAULT_NMOD || !colon) {
        snprintf(err, errlen, "faults: rule \"%.*s\" must start with store:, kvdisk: or rma:", (int)(e - s),
            s);
        return -EINVAL;
    }
    r->mod = (uint8_t)m;
    for (const char *f = colon + 1; f <= e;) {
        const char *fe = memchr(f, ',', (size_t)(e - f));
        if (!fe)
            fe = e;
        const char *a = f, *b = fe;
        trim(&a, &b);
        if (a < b && parse_field(r, a, (size_t)(b - a), err, errlen) < 0)
            return -EINVAL;
        f = fe + 1;
    }
    if (r->ms_given && r->err != DELAY) {
        snprintf(err, errlen, "faults: rule \"%.*s\": ms= goes with err=delay only",
                 (int)(e - s), s);
        return -EINVAL;
    }
    r->rng = r->seed * 0x9E3779B97F4A7C15ull + 1; /* never 0 */
    return 0;
}

int ol_fault_set(const char *spec, char *err, size_t errlen)
{
    struct rule next[OL_FAULT_MAX_RULES];
    unsigned n = 0;
    if (errlen)
        err[0] = 0;
    const char *s = spec ? spec : "";
    const char *end = s + strlen(s);
    while (s < end) {
        const char *re = memchr(s, ';', (size_t)(end - s));
        if (!re)
            re = end;
        const char *a = s, *b = re;
        trim(&a, &b);
        if (a < b) {
            if (n == OL_FAULT_MAX_RULES) {
                snprintf(err, errlen, "faults: more than %u rules", OL_FAULT_MAX_RULES);
                return -EINVAL;
            }
            if (parse_rule(&next[n], a, b, err, errlen) < 0)
                return -EINVAL;
            n++;
        }
        s = re + 1;
    }
    pthread_mutex_lock(&mu);
    memcpy(rules, next, n * sizeof next[0]);
    logged = 0;
    atomic_store_explicit(&nrules, n, memory_order_release);
    pthread_mutex_unlock(&mu);
    return 0;
}

int ol_fault_set_env(char *err, size_t errlen)
{
    const char *v = getenv(OL_FAULT_ENV);
    return v ? ol_fault_set(v, err, errlen) : 0;
}

uint64_t ol_fault_injected(enum ol_fault_mod mod)
{
    return mod < OL_FAULT_NMOD ? atomic_load_explicit(&injected[mod], memory_order_relaxed) : 0;
}

/* Appends piece[0..n) to buf at len (counting past cap, writing only
 * within it); the new length. */
static size_t append(char *buf, size_t cap, size_t len, const char *piece, int n)
{
    for (int i = 0; i < n; i++, len++)
        if (len < cap)
            buf[len] = piece[i];
    return len;
}

size_t ol_fault_report(char *buf, size_t cap)
{
    char piece[320];
    int n = snprintf(piece, sizeof piece,
                     "{\"injected\":{\"store\":%llu,\"kvdisk\":%llu,\"rma\":%llu},"
                     "\"rules\":[",
                     (unsigned long long)ol_fault_injected(OL_FAULT_STORE),
                     (unsigned long long)ol_fault_injected(OL_FAULT_KVDISK),
                     (unsigned long long)ol_fault_injected(OL_FAULT_RMA));
    size_t len = append(buf, cap, 0, piece, n < (int)sizeof piece ? n : (int)sizeof piece - 1);
    pthread_mutex_lock(&mu);
    unsigned nr = atomic_load_explicit(&nrules, memory_order_relaxed);
    for (unsigned i = 0; i < nr; i++) {
        const struct rule *r = &rules[i];
        char drive[16] = "any";
        if (r->drive != ANY_DRIVE)
            snprintf(drive, sizeof drive, "%u", r->drive);
        char p[48] = "", ms[24] = "";
        if (r->p > 0)
            snprintf(p, sizeof p, ",p=%g,seed=%llu", r->p, (unsigned long long)r->seed);
        if (r->err == DELAY)
            snprintf(ms, sizeof ms, ",ms=%u", r->ms);
        n = snprintf(piece, sizeof piece,
                     "%s{\"rule\":\"%s:drive=%s,op=%s,nth=%llu%s,err=%s%s,%s\",\"seen\":%llu,"
                     "\"fired\":%llu}",
                     i ? "," : "", mod_names[r->mod], drive, op_names[r->op],
                     (unsigned long long)r->nth, p, err_name(r->err), ms,
                     r->persist ? "persist" : "once", (unsigned long long)r->seen,
                     (unsigned long long)r->fired);
        len = append(buf, cap, len, piece, n < (int)sizeof piece ? n : (int)sizeof piece - 1);
    }
    pthread_mutex_unlock(&mu);
    return append(buf, cap, len, "]}\n", 3);
}

#endif
