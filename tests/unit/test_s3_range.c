/*
 * test_s3_range.c - byte ranges (s3/range.h): GetObject's Range against an
 * object's size, and UploadPartCopy's x-amz-copy-source-range.
 */
#include "olt.h"

#include "s3/range.h"

#include <string.h>

static struct ol_http_header h(const char *v)
{
    return (struct ol_http_header){"range", 5, v, strlen(v)};
}

/* ol_s3_range on the value v; *off and *len start as 12345 */
static int rg(const char *v, uint64_t size, uint64_t *off, uint64_t *len)
{
    struct ol_http_header x = h(v);
    *off = *len = 12345;
    return ol_s3_range(&x, size, off, len);
}

OLT_TEST(s3_range_get)
{
    uint64_t off, len;
    OLT_CHECK_EQ(ol_s3_range(NULL, 100, &off, &len), 0);
    OLT_CHECK_EQ(rg("bytes=0-9", 100, &off, &len), 1);
    OLT_CHECK_EQ(off, 0);
    OLT_CHECK_EQ(len, 10);
    OLT_CHECK_EQ(rg("bytes=90-", 100, &off, &len), 1);   /* open end */
    OLT_CHECK_EQ(off, 90);
    OLT_CHECK_EQ(len, 10);
    OLT_CHECK_EQ(rg("bytes=50-500", 100, &off, &len), 1);   /* end past the size */
    OLT_CHECK_EQ(off, 50);
    OLT_CHECK_EQ(len, 50);
    OLT_CHECK_EQ(rg("bytes=-30", 100, &off, &len), 1);   /* suffix */
    OLT_CHECK_EQ(off, 70);
    OLT_CHECK_EQ(len, 30);
    OLT_CHECK_EQ(rg("bytes=-300", 100, &off, &len), 1);   /* suffix longer than the object */
    OLT_CHECK_EQ(off, 0);
    OLT_CHECK_EQ(len, 100);
    /* not satisfiable */
    OLT_CHECK_EQ(rg("bytes=100-", 100, &off, &len), -1);
    OLT_CHECK_EQ(rg("bytes=-0", 100, &off, &len), -1);
    OLT_CHECK_EQ(rg("bytes=0-", 0, &off, &len), -1);
    OLT_CHECK_EQ(rg("bytes=-5", 0, &off, &len), -1);
    /* ignored: the whole object */
    OLT_CHECK_EQ(rg("bytes=0-1,5-6", 100, &off, &len), 0);
    OLT_CHECK_EQ(rg("items=0-1", 100, &off, &len), 0);
    OLT_CHECK_EQ(rg("bytes=9-1", 100, &off, &len), 0);
    OLT_CHECK_EQ(rg("bytes=-", 100, &off, &len), 0);
    OLT_CHECK_EQ(rg("bytes=1-2x", 100, &off, &len), 0);
    OLT_CHECK_EQ(rg("bytes=99999999999999999999-", 100, &off, &len), 0);
    OLT_CHECK_EQ(off, 12345);   /* untouched when not 1 */
}

static int cr(const char *v, uint64_t *first, uint64_t *last)
{
    struct ol_http_header x = h(v);
    return ol_s3_copy_range(&x, first, last);
}

OLT_TEST(s3_range_copy_source)
{
    uint64_t a = 7, b = 7;
    OLT_CHECK_EQ(cr("bytes=0-0", &a, &b), 0);
    OLT_CHECK_EQ(a, 0);
    OLT_CHECK_EQ(b, 0);
    OLT_CHECK_EQ(cr("bytes=5242880-10485759", &a, &b), 0);
    OLT_CHECK_EQ(a, 5242880);
    OLT_CHECK_EQ(b, 10485759);
    const char *bad[] = {"", "bytes=", "bytes=5-", "bytes=-5", "bytes=9-1", "bytes=0-1,2-3",
                         "bytes=0-1x", "bytes= 0-1", "items=0-10",
                         "bytes=0-18446744073709551615",
                         "bytes=0-123456789012345678901234567890123456789012345678901234567890"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        OLT_CHECK_EQ(cr(bad[i], &a, &b), -1);
}
