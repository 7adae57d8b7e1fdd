/*
 * metrics.c - Prometheus text rendering of the HTTP servers' per-core
 * counters (struct ol_http_stats, see server.h / metrics.h).
 *
 * Owns: metric names, labels and the exposition format (text 0.0.4).
 * Must not: write to the counters; it only reads them (relaxed loads, so
 * a scrape sees each counter as of some recent moment).
 */
#include "http/metrics.h"

#include <stdarg.h>
#include <stdio.h>

struct ol_mbuf {
    char *p;
    size_t len, cap;
};

static void ol_mput(struct ol_mbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void ol_mput(struct ol_mbuf *b, const char *fmt, ...)
{
    if (b->len >= b->cap)
        return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    b->len += (size_t)n; /* may pass cap: reported as truncation */
}

#define OL_LOAD(x) atomic_load_explicit(&(x), memory_order_relaxed)

size_t ol_metrics_put(char *buf, size_t cap, size_t off, const struct ol_metric *m, size_t n)
{
    struct ol_mbuf b = {buf, off, cap};
    for (size_t i = 0; i < n; i++)
        ol_mput(&b, "# HELP %s %s\n# TYPE %s %s\n%s %llu\n", m[i].name, m[i].help, m[i].name,
                m[i].type, m[i].name, (unsigned long long)m[i].v);
    return b.len;
}

static void ol_per_core(struct ol_mbuf *b, const struct ol_http_stats *const *st, int n,
                        const char *name, const char *type, const char *help, size_t off)
{
    ol_mput(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
    for (int i = 0; i < n; i++) {
        const _Atomic uint64_t *v = (const _Atomic uint64_t *)((const char *)st[i] + off);
        ol_mput(b, "%s{core=\"%d\"} %llu\n", name, i, (unsigned long long)OL_LOAD(*v));
    }
}

size_t ol_http_metrics_render(const struct ol_http_stats *const *st, int n, char *buf, size_t cap)
{
    struct ol_mbuf b = {buf, 0, cap};
    ol_per_core(&b, st, n, "openlake_http_connections_active", "gauge",
                "Open HTTP connections.", offsetof(struct ol_http_stats, conns_active));
    ol_per_core(&b, st, n, "openlake_http_connections_total", "counter",
                "HTTP connections accepted.", offsetof(struct ol_http_stats, conns_total));
    ol_per_core(&b, st, n, "openlake_http_connections_rejected_total", "counter",
                "HTTP connections refused with 503 at the connection limit.",
                offsetof(struct ol_http_stats, conns_rejected));
    ol_per_core(&b, st, n, "openlake_http_header_timeouts_total", "counter",
                "Connections closed at header_timeout_ms: a head not complete in time (408), "
                "or a new connection that sent nothing (closed unanswered).",
                offsetof(struct ol_http_stats, head_timeouts));
    ol_per_core(&b, st, n, "openlake_http_slow_bodies_total", "counter",
                "Requests failed with 408 because their body averaged less than body_min_rate "
                "over a body_rate_window_ms window.",
                offsetof(struct ol_http_stats, slow_bodies));
    ol_per_core(&b, st, n, "openlake_http_received_bytes_total", "counter",
                "Bytes received on HTTP connections.", offsetof(struct ol_http_stats, bytes_in));
    ol_per_core(&b, st, n, "openlake_http_sent_bytes_total", "counter",
                "Bytes sent on HTTP connections.", offsetof(struct ol_http_stats, bytes_out));

    ol_mput(&b, "# HELP openlake_http_requests_total HTTP responses by status code.\n"
                "# TYPE openlake_http_requests_total counter\n");
    for (int i = 0; i < n; i++)
        for (int code = 100; code < 600; code++) {
            uint64_t v = OL_LOAD(st[i]->requests[code]);
            if (v)
                ol_mput(&b, "openlake_http_requests_total{core=\"%d\",code=\"%d\"} %llu\n", i,
                        code, (unsigned long long)v);
        }

    ol_mput(&b, "# HELP openlake_http_request_duration_seconds Time from a request's head to "
                "the end of its response, all cores.\n"
                "# TYPE openlake_http_request_duration_seconds histogram\n");
    uint64_t cum = 0, sum_us = 0, count = 0;
    for (int k = 0; k <= OL_HTTP_LAT_BUCKETS; k++) {
        for (int i = 0; i < n; i++)
            cum += OL_LOAD(st[i]->lat_buckets[k]);
        if (k < OL_HTTP_LAT_BUCKETS)
            ol_mput(&b, "openlake_http_request_duration_seconds_bucket{le=\"%g\"} %llu\n",
                    ol_http_lat_bounds[k], (unsigned long long)cum);
        else
            ol_mput(&b, "openlake_http_request_duration_seconds_bucket{le=\"+Inf\"} %llu\n",
                    (unsigned long long)cum);
    }
    for (int i = 0; i < n; i++) {
        sum_us += OL_LOAD(st[i]->lat_sum_us);
        count += OL_LOAD(st[i]->lat_count);
    }
    ol_mput(&b, "openlake_http_request_duration_seconds_sum %.6f\n", (double)sum_us / 1e6);
    ol_mput(&b, "openlake_http_request_duration_seconds_count %llu\n", (unsigned long long)count);
    return b.len;
}
