/*
 * test_probe.c - unit tests for src/rt/probe.{h,c}, the io_uring feature
 * probe: it runs, its answers are self-consistent and cached, and both
 * output formats carry every feature (the JSON form is checked by a small
 * validating parser, not by substring search alone).
 */
#include "olt.h"

#include "rt/probe.h"

#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>

/* Every name ol_uring_features_format must print, in both formats. */
static const char *const want_names[] = {
    "kernel", "io_uring_disabled",
    "available", "setup_single_issuer", "setup_defer_taskrun",
    "setup_coop_taskrun", "setup_taskrun_flag", "setup_submit_all",
    "op_msg_ring", "op_send_zc", "op_sendmsg_zc", "multishot_accept",
    "multishot_recv", "multishot_trial", "provided_buffer_rings",
    "registered_buffers", "op_openat", "op_statx", "op_renameat",
    "op_fsync", "op_read", "op_write", "feat_nodrop", "feat_fast_poll",
    "feat_ext_arg",
};
#define NWANT (sizeof want_names / sizeof want_names[0])

static struct ol_uring_features probe_or_skip(void)
{
    struct ol_uring_features f;
    int ret = ol_uring_probe(&f);
    if (ret < 0) {
        static char why[160];
        snprintf(why, sizeof why, "io_uring unavailable here: %s (io_uring_disabled=%d)",
                 strerror(-ret), f.io_uring_disabled);
        OLT_SKIP(why);
    }
    return f;
}

/* ---- a minimal JSON validator -------------------------------------------- */

struct jp {
    const char *s;
    int depth, max_depth;
};

static bool jp_value(struct jp *p);

static void jp_ws(struct jp *p)
{
    while (*p->s == ' ' || *p->s == '\n' || *p->s == '\t' || *p->s == '\r')
        p->s++;
}

static bool jp_string(struct jp *p)
{
    if (*p->s != '"')
        return false;
    for (p->s++; *p->s != '"'; p->s++) {
        unsigned char c = (unsigned char)*p->s;
        if (c < 0x20)
            return false;
        if (c == '\\') {
            p->s++;
            if (*p->s == 'u') {
                for (int i = 1; i <= 4; i++)
                    if (!p->s[i] || !strchr("0123456789abcdefABCDEF", p->s[i]))
                        return false;
                p->s += 4;
            } else if (!*p->s || !strchr("\"\\/bfnrt", *p->s)) {
                return false;
            }
        }
    }
    p->s++;
    return true;
}

static bool jp_container(struct jp *p, char open, char close)
{
    p->s++;
    if (++p->depth > p->max_depth)
        p->max_depth = p->depth;
    jp_ws(p);
    if (*p->s == close) {
        p->s++;
        p->depth--;
        return true;
    }
    for (;;) {
        jp_ws(p);
        if (open == '{') {
            if (!jp_string(p))
                return false;
            jp_ws(p);
            if (*p->s++ != ':')
                return false;
        }
        if (!jp_value(p))
            return false;
        jp_ws(p);
        if (*p->s == ',') {
            p->s++;
            continue;
        }
        if (*p->s++ != close)
            return false;
        p->depth--;
        return true;
    }
}

static bool jp_value(struct jp *p)
{
    jp_ws(p);
    if (*p->s == '{')
        return jp_container(p, '{', '}');
    if (*p->s == '[')
        return jp_container(p, '[', ']');
    if (*p->s == '"')
        return jp_string(p);
    for (const char *const *lit = (const char *const[]){"true", "false", "null", NULL}; *lit; lit++)
        if (strncmp(p->s, *lit, strlen(*lit)) == 0) {
            p->s += strlen(*lit);
            return true;
        }
    const char *start = p->s;
    if (*p->s == '-')
        p->s++;
    while (*p->s >= '0' && *p->s <= '9')
        p->s++;
    return p->s > start && p->s[-1] != '-';
}

/* True if s is exactly one JSON value (and nothing after it). */
static bool json_valid(const char *s)
{
    struct jp p = { .s = s };
    if (!jp_value(&p))
        return false;
    jp_ws(&p);
    return *p.s == '\0' && p.depth == 0;
}

/* ---- tests --------------------------------------------------------------- */

OLT_TEST(probe_runs_and_is_consistent)
{
    struct ol_uring_features f = probe_or_skip();
    OLT_CHECK(f.available);
    OLT_CHECK_EQ(f.setup_error, 0);
    OLT_CHECK(f.kernel_release[0] != '\0');
    OLT_CHECK(f.io_uring_disabled >= -1 && f.io_uring_disabled <= 2);
    /* The kernel refuses DEFER_TASKRUN without SINGLE_ISSUER, and
     * TASKRUN_FLAG without COOP_TASKRUN (or DEFER_TASKRUN). */
    if (f.setup_defer_taskrun)
        OLT_CHECK(f.setup_single_issuer);
    if (f.setup_taskrun_flag)
        OLT_CHECK(f.setup_coop_taskrun);
    /* Multishot recv only works with provided buffers. */
    if (f.multishot_recv)
        OLT_CHECK(f.provided_buffer_rings);
    /* Each of these is older than every kernel with IORING_REGISTER_PROBE
     * (5.6) except read/write/openat/statx, which arrived in 5.6 itself. */
    OLT_CHECK(f.op_read && f.op_write && f.op_fsync && f.op_openat && f.op_statx);
    OLT_CHECK(f.feat_nodrop);
}

OLT_TEST(probe_flags_match_a_real_setup)
{
    struct ol_uring_features f = probe_or_skip();
    struct {
        bool claimed;
        unsigned flags;
    } cases[] = {
        { f.setup_single_issuer, IORING_SETUP_SINGLE_ISSUER },
        { f.setup_defer_taskrun, IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN },
        { f.setup_coop_taskrun, IORING_SETUP_COOP_TASKRUN },
        { f.setup_taskrun_flag, IORING_SETUP_COOP_TASKRUN | IORING_SETUP_TASKRUN_FLAG },
        { f.setup_submit_all, IORING_SETUP_SUBMIT_ALL },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct io_uring ring;
        struct io_uring_params p = { .flags = cases[i].flags };
        int ret = io_uring_queue_init_params(4, &ring, &p);
        if (ret == 0)
            io_uring_queue_exit(&ring);
        if (cases[i].claimed != (ret == 0))
            olt_fail(__FILE__, __LINE__, "flags 0x%x: probe says %d, setup returned %d",
                     cases[i].flags, cases[i].claimed, ret);
    }
}

static void *probe_thread(void *arg)
{
    struct ol_uring_features *f = arg;
    ol_uring_probe(f);
    return NULL;
}

OLT_TEST(probe_is_cached_and_thread_safe)
{
    struct ol_uring_features f[4], again;
    pthread_t t[4];
    memset(f, 0xa5, sizeof f);
    for (int i = 0; i < 4; i++)
        OLT_CHECK_EQ(pthread_create(&t[i], NULL, probe_thread, &f[i]), 0);
    for (int i = 0; i < 4; i++)
        OLT_CHECK_EQ(pthread_join(t[i], NULL), 0);
    ol_uring_probe(&again);
    /* Compare every field through the JSON form (a memcmp would also
     * compare padding, which struct assignment need not copy). */
    char want[OL_URING_FEATURES_FMT_MAX], got[OL_URING_FEATURES_FMT_MAX];
    OLT_CHECK(ol_uring_features_format(&again, want, sizeof want, 1) > 0);
    for (int i = 0; i < 4; i++) {
        OLT_CHECK(ol_uring_features_format(&f[i], got, sizeof got, 1) > 0);
        OLT_CHECK_STR(got, want);
        OLT_CHECK_EQ(f[i].setup_error, again.setup_error);
    }
}

OLT_TEST(format_human_lists_every_feature)
{
    struct ol_uring_features f;
    char buf[OL_URING_FEATURES_FMT_MAX];
    ol_uring_probe(&f);
    int n = ol_uring_features_format(&f, buf, sizeof buf, 0);
    OLT_CHECK(n > 0);
    OLT_CHECK_EQ(strlen(buf), n);
    for (size_t i = 0; i < NWANT; i++) {
        /* "name" at the start of a line, followed by padding. */
        char pat[64];
        size_t plen = (size_t)snprintf(pat, sizeof pat, "%s ", want_names[i]);
        bool found = strncmp(buf, pat, plen) == 0;
        for (const char *nl = buf; !found && (nl = strchr(nl, '\n')); nl++)
            found = strncmp(nl + 1, pat, plen) == 0;
        if (!found)
            olt_fail(__FILE__, __LINE__, "no line for '%s' in:\n%s", want_names[i], buf);
    }
    OLT_CHECK(buf[n - 1] == '\n');
    if (f.available)
        OLT_CHECK(strstr(buf, "available") && strstr(buf, " yes\n"));
}

OLT_TEST(format_json_is_valid_with_every_key)
{
    struct ol_uring_features f;
    char buf[OL_URING_FEATURES_FMT_MAX], key[64];
    ol_uring_probe(&f);
    int n = ol_uring_features_format(&f, buf, sizeof buf, 1);
    OLT_CHECK(n > 0);
    OLT_CHECK_EQ(strlen(buf), n);
    if (!json_valid(buf))
        olt_fail(__FILE__, __LINE__, "not valid JSON: %s", buf);
    OLT_CHECK(buf[0] == '{' && buf[n - 1] == '}');
    for (size_t i = 0; i < NWANT; i++) {
        snprintf(key, sizeof key, "\"%s\":", want_names[i]);
        if (!strstr(buf, key))
            olt_fail(__FILE__, __LINE__, "no key %s in %s", key, buf);
    }
    snprintf(key, sizeof key, "\"available\":%s", f.available ? "true" : "false");
    OLT_CHECK(strstr(buf, key) != NULL);
    snprintf(key, sizeof key, "\"setup_defer_taskrun\":%s",
             f.setup_defer_taskrun ? "true" : "false");
    OLT_CHECK(strstr(buf, key) != NULL);
}

OLT_TEST(format_unavailable_reports_the_error)
{
    struct ol_uring_features f;
    char buf[OL_URING_FEATURES_FMT_MAX];
    memset(&f, 0, sizeof f);
    f.setup_error = -EPERM;
    f.io_uring_disabled = 2;
    /* Quotes, a backslash and a control byte must be escaped in JSON. */
    snprintf(f.kernel_release, sizeof f.kernel_release, "6.1\"x\\y\tz");
    OLT_CHECK(ol_uring_features_format(&f, buf, sizeof buf, 1) > 0);
    if (!json_valid(buf))
        olt_fail(__FILE__, __LINE__, "not valid JSON: %s", buf);
    OLT_CHECK(strstr(buf, "\"kernel\":\"6.1\\\"x\\\\y\\u0009z\"") != NULL);
    OLT_CHECK(strstr(buf, "\"setup_error\":\"Operation not permitted\"") != NULL);
    OLT_CHECK(strstr(buf, "\"io_uring_disabled\":2") != NULL);
    OLT_CHECK(strstr(buf, "\"available\":false") != NULL);
    OLT_CHECK(ol_uring_features_format(&f, buf, sizeof buf, 0) > 0);
    OLT_CHECK(strstr(buf, "Operation not permitted\n") != NULL);
    OLT_CHECK(strstr(buf, "\navailable ") != NULL);

    f.io_uring_disabled = -1;
    OLT_CHECK(ol_uring_features_format(&f, buf, sizeof buf, 1) > 0);
    OLT_CHECK(json_valid(buf));
    OLT_CHECK(strstr(buf, "\"io_uring_disabled\":null") != NULL);
}

OLT_TEST(format_reports_short_buffers)
{
    struct ol_uring_features f;
    char full[OL_URING_FEATURES_FMT_MAX], small[40];
    ol_uring_probe(&f);
    for (int json = 0; json <= 1; json++) {
        int n = ol_uring_features_format(&f, full, sizeof full, json);
        OLT_CHECK(n > (int)sizeof small);
        memset(small, 'x', sizeof small);
        OLT_CHECK_EQ(ol_uring_features_format(&f, small, sizeof small, json), -ENOSPC);
        OLT_CHECK_EQ(strlen(small), sizeof small - 1);
        OLT_CHECK_MEM(small, full, sizeof small - 1);
        /* Exactly n + 1 bytes is enough; n is not. */
        char *exact = malloc((size_t)n + 1);
        OLT_CHECK(exact != NULL);
        OLT_CHECK_EQ(ol_uring_features_format(&f, exact, (size_t)n + 1, json), n);
        OLT_CHECK_STR(exact, full);
        OLT_CHECK_EQ(ol_uring_features_format(&f, exact, (size_t)n, json), -ENOSPC);
        free(exact);
        OLT_CHECK_EQ(ol_uring_features_format(&f, NULL, 0, json), -ENOSPC);
    }
}

/* Number of open file descriptors of this process. */
static int count_fds(void)
{
    int n = 0;
    for (int fd = 0; fd < 1024; fd++)
        if (fcntl(fd, F_GETFD) >= 0)
            n++;
    return n;
}

OLT_TEST(probe_leaves_no_descriptors)
{
    struct ol_uring_features f;
    int before = count_fds();
    ol_uring_probe(&f); /* the first call in this child runs the probe */
    OLT_CHECK_EQ(count_fds(), before);
}

OLT_TEST(probe_keeps_errno)
{
    struct ol_uring_features f;
    errno = 12345;
    ol_uring_probe(&f);
    OLT_CHECK_EQ(errno, 12345);
}
