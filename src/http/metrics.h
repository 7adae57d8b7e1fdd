/*
 * metrics.h - Prometheus exposition of the HTTP layer's counters.
 */
#ifndef OL_HTTP_METRICS_H
#define OL_HTTP_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include "http/server.h"

/*
 * Renders the counters of n servers (one per core) as Prometheus text into
 * buf[0..cap). Returns the length the full text needs: when it is >= cap
 * the text was truncated and the caller retries with a bigger buffer.
 */
size_t ol_http_metrics_render(const struct ol_http_stats *const *st, int n, char *buf, size_t cap);

/* One unlabelled sample with its HELP and TYPE lines. */
struct ol_metric {
    const char *name, *type, *help;
    uint64_t v;
};
/* Renders n metrics into buf[0..cap) from offset off; returns the offset
 * the full text reaches (>= cap: truncated, as above). */
size_t ol_metrics_put(char *buf, size_t cap, size_t off, const struct ol_metric *m, size_t n);

#endif
