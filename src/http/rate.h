/*
 * rate.h - the minimum-rate window of a request body (http.body_min_rate
 * over http.body_rate_window_ms).
 *
 * Owns: the arithmetic only: bytes counted in the current window, and a
 * clock that runs only while the server is willing to receive (the caller
 * stops it while the handler has paused the body, or while the loop has
 * no receive buffers, and starts it again after). A window ends after
 * window_ms of that clock; if fewer than min_rate bytes per second of it
 * arrived, the body is too slow, else the next window starts from zero.
 *
 * Must not: read a clock, arm a timer or know about connections: the
 * caller passes `now` (milliseconds, any monotonic origin) and decides
 * what a too-slow body means (server.c answers 408 and closes). Pure
 * functions, so tests/unit/test_http_rate.c drives them with made-up times.
 */
#ifndef OL_HTTP_RATE_H
#define OL_HTTP_RATE_H

#include <stdbool.h>
#include <stdint.h>

struct ol_http_rate {
    uint64_t bytes;     /* body bytes counted in this window */
    uint64_t ran_ms;    /* clock time of this window before since_ms */
    uint64_t since_ms;  /* the clock runs from here (only while running) */
    bool running;
};

#define OL_HTTP_RATE_SLOW (-1)

/* Starts the first window at now, clock running, no bytes. */
static inline void ol_http_rate_begin(struct ol_http_rate *w, uint64_t now)
{
    w->bytes = 0;
    w->ran_ms = 0;
    w->since_ms = now;
    w->running = true;
}

/* Stops the clock (the server stopped receiving); no-op when stopped. */
static inline void ol_http_rate_stop(struct ol_http_rate *w, uint64_t now)
{
    if (!w->running)
        return;
    w->ran_ms += now > w->since_ms ? now - w->since_ms : 0;
    w->running = false;
}

/* Starts the clock again; no-op when running. */
static inline void ol_http_rate_go(struct ol_http_rate *w, uint64_t now)
{
    if (w->running)
        return;
    w->since_ms = now;
    w->running = true;
}

/* Counts n body bytes received in this window. */
static inline void ol_http_rate_add(struct ol_http_rate *w, uint64_t n)
{
    w->bytes += n;
}

/* Clock time of the current window at now. */
static inline uint64_t ol_http_rate_elapsed(const struct ol_http_rate *w, uint64_t now)
{
    return w->ran_ms + (w->running && now > w->since_ms ? now - w->since_ms : 0);
}

/*
 * The verdict at now. While the window's clock is below window_ms: returns
 * the clock time left in it (>= 1). At or past window_ms (a late check
 * included): the bytes must average min_rate per second over the clock
 * time elapsed; if they do not, returns OL_HTTP_RATE_SLOW and changes
 * nothing; if they do, the next window starts at now and window_ms is
 * returned. min_rate 0 never finds a body slow. window_ms must be > 0, and
 * min_rate times the clock time must fit in 64 bits (the config's bounds,
 * 1 GiB/s and an hour's window, leave room for checks days late).
 */
static inline int64_t ol_http_rate_check(struct ol_http_rate *w, uint64_t now,
                                         uint64_t min_rate, uint64_t window_ms)
{
    uint64_t t = ol_http_rate_elapsed(w, now);
    if (t < window_ms)
        return (int64_t)(window_ms - t);
    /* bytes * 1000 >= min_rate * t, without overflow for any byte count */
    if (w->bytes < UINT64_MAX / 1000 && w->bytes * 1000 < min_rate * t)
        return OL_HTTP_RATE_SLOW;
    bool running = w->running;
    ol_http_rate_begin(w, now);
    w->running = running;
    return (int64_t)window_ms;
}

/* The now at which the current window's clock reaches window_ms if it
 * keeps running (now itself when it already has). Only while running. */
static inline uint64_t ol_http_rate_due(const struct ol_http_rate *w, uint64_t window_ms)
{
    return w->ran_ms >= window_ms ? w->since_ms : w->since_ms + (window_ms - w->ran_ms);
}

#endif
