/*
 * test_http_rate.c - the body-rate window (http/rate.h) with made-up
 * times: a body below the minimum is found slow at the window's end and
 * not before, one at or above it never is, the clock stops while the
 * server is not receiving, late checks average over the time elapsed,
 * and a window that passes starts the next from zero.
 */
#include "olt.h"

#include "http/rate.h"

#define RATE 100     /* bytes/s */
#define WIN  2000    /* ms: 200 bytes a window */

OLT_TEST(http_rate_slow_body_cut_at_window_end)
{
    struct ol_http_rate w;
    ol_http_rate_begin(&w, 5000);
    /* one byte every 500 ms: 2 B/s */
    uint64_t t = 5000;
    for (int i = 0; i < 3; i++) {
        t += 500;
        ol_http_rate_add(&w, 1);
        OLT_CHECK_EQ(ol_http_rate_check(&w, t, RATE, WIN), WIN - 500 * (i + 1));
    }
    OLT_CHECK_EQ(ol_http_rate_due(&w, WIN), 7000);
    OLT_CHECK_EQ(ol_http_rate_check(&w, 6999, RATE, WIN), 1);
    OLT_CHECK_EQ(ol_http_rate_check(&w, 7000, RATE, WIN), OL_HTTP_RATE_SLOW);
    /* the verdict changes nothing: asked again, still slow */
    OLT_CHECK_EQ(ol_http_rate_check(&w, 7010, RATE, WIN), OL_HTTP_RATE_SLOW);
}

OLT_TEST(http_rate_steady_body_never_cut)
{
    struct ol_http_rate w;
    ol_http_rate_begin(&w, 0);
    /* exactly the minimum, 10 bytes every 100 ms, for ten windows */
    for (uint64_t t = 100; t <= 10 * WIN; t += 100) {
        ol_http_rate_add(&w, 10);
        int64_t left = ol_http_rate_check(&w, t, RATE, WIN);
        OLT_CHECK(left > 0);
        if (t % WIN == 0) {   /* a window passed: the next starts empty */
            OLT_CHECK_EQ(left, WIN);
            OLT_CHECK_EQ(w.bytes, 0);
            OLT_CHECK_EQ(ol_http_rate_due(&w, WIN), t + WIN);
        }
    }
    /* a burst early in the window carries it (bytes, not spacing, count) */
    ol_http_rate_begin(&w, 0);
    ol_http_rate_add(&w, 200);
    OLT_CHECK_EQ(ol_http_rate_check(&w, WIN, RATE, WIN), WIN);
    OLT_CHECK_EQ(ol_http_rate_check(&w, 2 * WIN, RATE, WIN), OL_HTTP_RATE_SLOW);
}

OLT_TEST(http_rate_clock_stops_while_not_receiving)
{
    struct ol_http_rate w;
    ol_http_rate_begin(&w, 0);
    ol_http_rate_add(&w, 50);
    ol_http_rate_stop(&w, 1000);        /* the handler paused the body */
    ol_http_rate_stop(&w, 1500);        /* a second stop changes nothing */
    OLT_CHECK_EQ(ol_http_rate_elapsed(&w, 60000), 1000);
    OLT_CHECK_EQ(ol_http_rate_check(&w, 60000, RATE, WIN), WIN - 1000);
    ol_http_rate_go(&w, 60000);         /* resumed a minute later */
    ol_http_rate_go(&w, 60500);         /* a second go changes nothing */
    OLT_CHECK_EQ(ol_http_rate_due(&w, WIN), 61000);
    ol_http_rate_add(&w, 150);          /* the queued bytes, read at once */
    OLT_CHECK_EQ(ol_http_rate_check(&w, 61000, RATE, WIN), WIN);
    /* stopped past the window's end: the window is judged, and the next
     * starts stopped */
    ol_http_rate_stop(&w, 63500);
    OLT_CHECK_EQ(ol_http_rate_check(&w, 70000, RATE, WIN), OL_HTTP_RATE_SLOW);
    ol_http_rate_add(&w, 250);
    OLT_CHECK_EQ(ol_http_rate_check(&w, 70000, RATE, WIN), WIN);
    OLT_CHECK(!w.running);
    OLT_CHECK_EQ(ol_http_rate_elapsed(&w, 99000), 0);
}

OLT_TEST(http_rate_late_check_averages_over_elapsed)
{
    struct ol_http_rate w;
    ol_http_rate_begin(&w, 0);
    /* checked at 3 windows instead of 1: needs 600 bytes, not 200 */
    ol_http_rate_add(&w, 599);
    OLT_CHECK_EQ(ol_http_rate_check(&w, 3 * WIN, RATE, WIN), OL_HTTP_RATE_SLOW);
    ol_http_rate_add(&w, 1);
    OLT_CHECK_EQ(ol_http_rate_check(&w, 3 * WIN, RATE, WIN), WIN);
}

OLT_TEST(http_rate_zero_minimum_and_huge_counts)
{
    struct ol_http_rate w;
    ol_http_rate_begin(&w, 0);
    OLT_CHECK_EQ(ol_http_rate_check(&w, 10 * WIN, 0, WIN), WIN);   /* 0: never slow */
    ol_http_rate_add(&w, UINT64_MAX / 100);                         /* no overflow */
    OLT_CHECK_EQ(ol_http_rate_check(&w, 20 * WIN, 1u << 30, WIN), WIN);
    /* the config's extremes: 1 GiB/s over an hour, checked a day late */
    ol_http_rate_begin(&w, 0);
    OLT_CHECK_EQ(ol_http_rate_check(&w, 90000000, 1u << 30, 3600000), OL_HTTP_RATE_SLOW);
}
