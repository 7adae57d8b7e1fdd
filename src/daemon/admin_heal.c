/*
 * admin_heal.c - the heal routes of the admin plane and the heal metrics.
 *
 *   POST /_openlake/heal[?bucket=B][&prefix=P]   starts a heal walk of
 *        bucket B (every bucket when absent) under prefix P; 202 and
 *        {"walk":ID}; 409 while a walk runs; 400 for a bad bucket name or
 *        prefix; 503 without an object store (mode kv)
 *   GET  /_openlake/heal                         the current or last walk
 *        and the healer's counters, as one JSON object (docs/store.md, "Heal")
 *
 * Both are signed like S3 requests (AWS SigV4 with one of the daemon's S3
 * credentials; header or presigned query): healing is an operator's
 * action. The unauthenticated /_openlake/metrics carries the counters
 * only, no names.
 *
 * Owns: parsing and answering these two routes, the openlake_heal_*
 * metric lines, and what the admin plane's operator routes share
 * (ol_admin_signed: the method and SigV4 check; ol_admin_json_error;
 * ol_admin_query), used by admin_cluster.c too. Must not: block (the healer's state is read under its
 * mutex, which is never held across I/O).
 */
#include "daemon/daemon.h"

#include "http/metrics.h"
#include "s3/auth.h"
#include "s3/errors.h"
#include "s3/pct.h"
#include "store/heal.h"
#include "store/layout.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

/* The decoded value of query parameter name into out (cap bytes, NUL-
 * terminated): its length, -ENOENT when absent, -EINVAL / -E2BIG. */
long ol_admin_query(const char *q, size_t qlen, const char *name, char *out, size_t cap)
{
    size_t nl = strlen(name);
    const char *end = q + qlen;
    while (q < end) {
        const char *amp = memchr(q, '&', (size_t)(end - q));
        const char *stop = amp ? amp : end;
        if ((size_t)(stop - q) >= nl && memcmp(q, name, nl) == 0 &&
            (q + nl == stop || q[nl] == '=')) {
            const char *v = q + nl + (q + nl < stop);
            long n = ol_pct_decode(v, (size_t)(stop - v), out, cap - 1, true);
            if (n >= 0)
                out[n] = 0;
            return n;
        }
        q = stop + 1;
    }
    return -ENOENT;
}

/* s as a JSON string (quotes included) at buf + *off. */
static void json_str(char *buf, size_t cap, size_t *off, const char *s)
{
    static const char hex[] = "0123456789abcdef";
    size_t o = *off;
    if (o < cap)
        buf[o] = '"';
    o++;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        char esc[7];
        size_t n = 0;
        if (*p == '"' || *p == '\\') {
            esc[n++] = '\\';
            esc[n++] = (char)*p;
        } else if (*p < 0x20) {
            memcpy(esc, "\\u00", 4);
            n = 4;
            esc[n++] = hex[*p >> 4];
            esc[n++] = hex[*p & 15];
        } else {
            esc[n++] = (char)*p;
        }
        for (size_t i = 0; i < n; i++, o++)
            if (o < cap)
                buf[o] = esc[i];
    }
    if (o < cap)
        buf[o] = '"';
    *off = o + 1;
}

static void say(char *buf, size_t cap, size_t *off, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void say(char *buf, size_t cap, size_t *off, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(*off < cap ? buf + *off : NULL, *off < cap ? cap - *off : 0, fmt, ap);
    va_end(ap);
    if (n > 0)
        *off += (size_t)n;
}

static void answer(ol_http_req *r, int status, const char *body, size_t len)
{
    ol_http_resp_simple(r, status, "application/json", body, len);
}

void ol_admin_json_error(ol_http_req *r, int status, const char *code, const char *msg)
{
    char body[512];
    size_t o = 0;
    say(body, sizeof body, &o, "{\"error\":\"%s\",\"message\":", code);
    json_str(body, sizeof body - 2, &o, msg);
    say(body, sizeof body, &o, "}\n");
    answer(r, status, body, o < sizeof body ? o : sizeof body - 1);
}

static void progress(ol_http_req *r, struct ol_healer *h)
{
    struct ol_heal_stats st;
    ol_healer_stats(h, &st);
    char body[4096];
    size_t o = 0;
    say(body, sizeof body, &o,
        "{\"walk\":%" PRIu64 ",\"running\":%s,\"rebuild\":%s,\"no_bucket\":%s,\"bucket\":",
        st.walk_id, st.walk_running ? "true" : "false", st.walk_rebuild ? "true" : "false",
        st.walk_no_bucket ? "true" : "false");
    json_str(body, sizeof body, &o, st.walk_bucket);
    say(body, sizeof body, &o, ",\"prefix\":");
    json_str(body, sizeof body, &o, st.walk_prefix);
    say(body, sizeof body, &o,
        ",\"scanned\":%" PRIu64 ",\"healed\":%" PRIu64 ",\"failed\":%" PRIu64
        ",\"bytes\":%" PRIu64 ",\"started_ns\":%" PRIu64 ",\"finished_ns\":%" PRIu64
        ",\"queued\":%" PRIu64 ",\"dropped\":%" PRIu64 ",\"queue_len\":%" PRIu64
        ",\"objects_healed\":%" PRIu64 ",\"objects_failed\":%" PRIu64 "}\n",
        st.walk_scanned, st.walk_healed, st.walk_failed, st.walk_bytes, st.walk_started_ns,
        st.walk_finished_ns, st.queued, st.dropped, st.queue_len, st.objects_healed, st.failed);
    answer(r, 200, body, o < sizeof body ? o : sizeof body - 1);
}

bool ol_admin_signed(struct ol_core *core, ol_http_req *r, const char *path, size_t plen,
                     const char *q, size_t qlen)
{
    struct ol_daemon *d = core->d;
    const struct ol_http_request *h = ol_http_req_head(r);
    bool post = h->method_len == 4 && !memcmp(h->method, "POST", 4);
    bool get = h->method_len == 3 && !memcmp(h->method, "GET", 3);
    if (!post && !get) {
        ol_http_resp_simple(r, 405, "text/plain", "method not allowed; use GET, POST\n", 34);
        return false;
    }
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    struct ol_s3_auth auth;
    const struct ol_s3_auth_conf conf = {&d->creds.view, d->cfg.region, d->cfg.s3_domain,
                                         d->cfg.s3_sigv2};
    enum ol_s3_err e = ol_s3_authenticate(h->method, h->method_len, path, plen, q, qlen,
                                          h->headers, h->num_headers, &conf, now.tv_sec, &auth);
    if (e) {
        const struct ol_s3_err_info *ei = ol_s3_err_info(e);
        ol_admin_json_error(r, ei->status, ei->code, auth.message[0] ? auth.message : ei->message);
        return false;
    }
    return true;
}

void ol_admin_heal_route(struct ol_core *core, ol_http_req *r, const char *path, size_t plen,
                         const char *q, size_t qlen)
{
    struct ol_daemon *d = core->d;
    if (!ol_admin_signed(core, r, path, plen, q, qlen))
        return;
    const struct ol_http_request *h = ol_http_req_head(r);
    bool get = h->method_len == 3 && !memcmp(h->method, "GET", 3);
    if (!d->healer) {
        ol_admin_json_error(r, 503, "NoObjectStore", "this daemon runs no object store (mode kv)");
        return;
    }
    if (get) {
        progress(r, d->healer);
        return;
    }
    char bucket[OL_LAYOUT_BUCKET_MAX + 1], prefix[OL_LAYOUT_KEY_MAX + 1];
    long bl = ol_admin_query(q, qlen, "bucket", bucket, sizeof bucket);
    long pl = ol_admin_query(q, qlen, "prefix", prefix, sizeof prefix);
    if (bl == -ENOENT)
        bucket[0] = 0, bl = 0;
    if (pl == -ENOENT)
        prefix[0] = 0, pl = 0;
    if (bl < 0 || (bl > 0 && ol_layout_bucket_ok(bucket, (size_t)bl) != 0)) {
        ol_admin_json_error(r, 400, "InvalidBucketName", "bucket: not a valid bucket name");
        return;
    }
    if (pl < 0 || memchr(prefix, 0, (size_t)pl)) {
        ol_admin_json_error(r, 400, "InvalidArgument", "prefix: at most 1024 bytes, no NUL");
        return;
    }
    int64_t id = ol_healer_walk(d->healer, bucket, prefix);
    if (id == -EBUSY) {
        ol_admin_json_error(r, 409, "HealRunning", "a heal walk is running: wait for it to finish");
        return;
    }
    if (id < 0) {
        ol_admin_json_error(r, 400, "InvalidArgument", "bucket or prefix too long");
        return;
    }
    char body[64];
    int n = snprintf(body, sizeof body, "{\"walk\":%" PRId64 "}\n", id);
    answer(r, 202, body, (size_t)n);
}

size_t ol_admin_heal_metrics(struct ol_daemon *d, char *buf, size_t cap)
{
    if (!d->healer)
        return 0;
    struct ol_heal_stats st;
    ol_healer_stats(d->healer, &st);
    const struct ol_metric m[] = {
        {"openlake_heal_queued_total", "counter", "Objects queued for heal by reads and degraded writes.", st.queued},
        {"openlake_heal_dropped_total", "counter", "Heal requests dropped: the queue was full.", st.dropped},
        {"openlake_heal_queue_length", "gauge", "Objects waiting in the heal queue.", st.queue_len},
        {"openlake_heal_objects_healed_total", "counter", "Objects that had a drive rewritten.", st.objects_healed},
        {"openlake_heal_shards_healed_total", "counter", "Shard and metadata files rewritten.", st.shards_healed},
        {"openlake_heal_leftover_dirs_removed_total", "counter", "Shard files and data dirs no version names (writes cut short), removed.", st.dirs_removed},
        {"openlake_heal_bytes_written_total", "counter", "Bytes written by heals.", st.bytes_written},
        {"openlake_heal_failed_total", "counter", "Objects that could not be healed.", st.failed},
        {"openlake_heal_scanner_objects_total", "counter", "Objects verified by the scanner.", st.scan_objects},
        {"openlake_heal_scanner_bytes_total", "counter", "Shard bytes verified by the scanner.", st.scan_bytes},
        {"openlake_heal_scanner_passes_total", "counter", "Complete scanner passes.", st.scan_passes},
        {"openlake_heal_walk_id", "gauge", "Id of the current or last heal walk (0: none).", st.walk_id},
        {"openlake_heal_walk_running", "gauge", "1 while a heal walk (CLI or drive rebuild) runs.", st.walk_running},
        {"openlake_heal_walk_rebuild", "gauge", "1 when the current or last walk rebuilds adopted drives.", st.walk_rebuild},
        {"openlake_heal_walk_objects_scanned", "gauge", "Objects the current or last walk has looked at.", st.walk_scanned},
        {"openlake_heal_walk_objects_healed", "gauge", "Objects the current or last walk healed.", st.walk_healed},
        {"openlake_heal_walk_objects_failed", "gauge", "Objects the current or last walk could not heal.", st.walk_failed},
        {"openlake_heal_walk_bytes_written", "gauge", "Bytes the current or last walk wrote.", st.walk_bytes},
    };
    return ol_metrics_put(buf, cap, 0, m, sizeof m / sizeof *m);
}
