/*
 * date.c - HTTP and ISO 8601 dates of the S3 API (see date.h).
 */
#include "s3/date.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

void ol_s3_http_date(int64_t sec, char out[40])
{
    time_t t = (time_t)sec;
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(out, 40, "%a, %d %b %Y %H:%M:%S GMT", &tm);
}

void ol_s3_iso_date(int64_t sec, char out[40])
{
    time_t t = (time_t)sec;
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(out, 40, "%Y-%m-%dT%H:%M:%S.000Z", &tm);
}

void ol_s3_iso_date_ms(uint64_t ns, char out[80])
{
    time_t sec = (time_t)(ns / 1000000000ull);
    struct tm tm;
    gmtime_r(&sec, &tm);
    snprintf(out, 80, "%04d-%02d-%02dT%02d:%02d:%02d.%03uZ", tm.tm_year + 1900, tm.tm_mon + 1,
             tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (unsigned)(ns / 1000000ull % 1000));
}

int64_t ol_s3_parse_http_date(const char *s, size_t n)
{
    char buf[64];
    if (n >= sizeof buf)
        return -1;
    memcpy(buf, s, n);
    buf[n] = 0;
    struct tm tm = {0};
    const char *end = strptime(buf, "%a, %d %b %Y %H:%M:%S GMT", &tm);
    if (!end || *end)
        return -1;
    return (int64_t)timegm(&tm);
}
