/*
 * range.c - GetObject's Range and UploadPartCopy's x-amz-copy-source-range
 * (see range.h).
 */
#include "s3/range.h"

#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

int ol_s3_range(const struct ol_http_header *h, uint64_t size, uint64_t *off, uint64_t *len)
{
    if (!h || h->value_len < 7 || strncmp(h->value, "bytes=", 6) != 0)
        return 0;
    const char *s = h->value + 6, *end = h->value + h->value_len;
    if (memchr(s, ',', (size_t)(end - s)))
        return 0;
    uint64_t a = 0, b = 0;
    bool has_a = false, has_b = false;
    while (s < end && *s >= '0' && *s <= '9') {
        if (a > (UINT64_MAX - 9) / 10)
            return 0;
        a = a * 10 + (uint64_t)(*s++ - '0');
        has_a = true;
    }
    if (s == end || *s++ != '-')
        return 0;
    while (s < end && *s >= '0' && *s <= '9') {
        if (b > (UINT64_MAX - 9) / 10)
            return 0;
        b = b * 10 + (uint64_t)(*s++ - '0');
        has_b = true;
    }
    if (s != end || (!has_a && !has_b))
        return 0;
    if (!has_a) {   /* suffix: the last b bytes */
        if (b == 0)
            return -1;
        *len = b < size ? b : size;
        *off = size - *len;
        return size == 0 ? -1 : 1;
    }
    if (has_b && b < a)
        return 0;
    if (a >= size)
        return -1;
    *off = a;
    *len = (has_b && b < size - 1 ? b : size - 1) - a + 1;
    return 1;
}

int ol_s3_copy_range(const struct ol_http_header *h, uint64_t *first, uint64_t *last)
{
    char v[64];
    int pos = 0;
    unsigned long long a = 0, b = 0;
    if (h->value_len >= sizeof v) {
        pos = -1;
    } else {
        memcpy(v, h->value, h->value_len);
        v[h->value_len] = 0;
        if (h->value_len < 9 || v[6] < '0' || v[6] > '9' ||
            sscanf(v, "bytes=%llu-%llu%n", &a, &b, &pos) != 2 || (size_t)pos != h->value_len)
            pos = -1;
    }
    if (pos < 0 || a > b || b == ULLONG_MAX)
        return -1;
    *first = a;
    *last = b;
    return 0;
}
