/*
 * metrics.h - Prometheus exposition of the HTTP layer's counters.
 */
#ifndef OL_HTTP_METRICS_H
#define OL_HTTP_METRICS_H

#include <stddef.h>

#include "http/server.h"

/*
 * Renders the counters of n servers (one per core) as Prometheus text into
 * buf[0..cap). Returns the length the full text needs: when it is >= cap
 * the text was truncated and the caller retries with a bigger buffer.
 */
size_t ol_http_metrics_render(const struct ol_http_stats *const *st, int n, char *buf, size_t cap);

#endif
