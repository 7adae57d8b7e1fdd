/*
 * test_s3_date.c - the S3 layer's dates (s3/date.h): HTTP and ISO 8601
 * forms, and parsing what clients send.
 */
#include "olt.h"

#include "s3/date.h"

#include <string.h>

OLT_TEST(s3_date_formats)
{
    char d[80];
    ol_s3_http_date(0, d);
    OLT_CHECK_STR(d, "Thu, 01 Jan 1970 00:00:00 GMT");
    ol_s3_http_date(1796541369, d);
    OLT_CHECK_STR(d, "Sun, 06 Dec 2026 07:16:09 GMT");
    ol_s3_iso_date(1796541369, d);
    OLT_CHECK_STR(d, "2026-12-06T07:16:09.000Z");
    ol_s3_iso_date_ms(1796541369798123456ull, d);
    OLT_CHECK_STR(d, "2026-12-06T07:16:09.798Z");
    ol_s3_iso_date_ms(5000000ull, d);
    OLT_CHECK_STR(d, "1970-01-01T00:00:00.005Z");
}

OLT_TEST(s3_date_parse)
{
    const char *s = "Sun, 06 Dec 2026 07:16:09 GMT";
    OLT_CHECK_EQ(ol_s3_parse_http_date(s, strlen(s)), 1796541369);
    char d[40];
    ol_s3_http_date(1234567890, d);
    OLT_CHECK_EQ(ol_s3_parse_http_date(d, strlen(d)), 1234567890);
    /* not an RFC 1123 date: another form, trailing bytes, too long */
    const char *bad[] = {"", "yesterday", "2026-12-06T07:16:09Z",
                         "Sun, 06 Dec 2026 07:16:09 GMT x",
                         "Sun, 06 Dec 2026 07:16:09 GMT                                   "};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        OLT_CHECK_EQ(ol_s3_parse_http_date(bad[i], strlen(bad[i])), -1);
    /* only the n bytes given are read */
    OLT_CHECK_EQ(ol_s3_parse_http_date(s, strlen(s) - 4), -1);
}
