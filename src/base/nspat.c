/*
 * nspat.c - see nspat.h.
 */
#include "base/nspat.h"

#include <string.h>

int ol_nspat_check(const char *pat)
{
    size_t n = strlen(pat);
    if (n == 0 || n > OL_NSPAT_MAX)
        return -1;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)pat[i];
        if (c < 0x20 || c == 0x7f || (c == '*' && i + 1 != n))
            return -1;
    }
    return 0;
}

/* The length of pat's fixed part, and whether a '*' follows it. */
static size_t ol_nspat_fixed(const char *pat, bool *prefix)
{
    size_t n = strlen(pat);
    *prefix = n > 0 && pat[n - 1] == '*';
    return *prefix ? n - 1 : n;
}

bool ol_nspat_match(const char *pat, const void *ns, size_t len)
{
    bool prefix;
    size_t n = ol_nspat_fixed(pat, &prefix);
    if (prefix ? len < n : len != n)
        return false;
    return memcmp(pat, ns, n) == 0;
}

bool ol_nspat_overlap(const char *a, const char *b)
{
    bool pa, pb;
    size_t na = ol_nspat_fixed(a, &pa), nb = ol_nspat_fixed(b, &pb);
    if (!pa && !pb)
        return na == nb && memcmp(a, b, na) == 0;
    /* a prefix overlaps what starts with it: the shorter fixed part must
     * begin the longer one (and an exact namespace is at least its prefix) */
    if (pa && !pb)
        return ol_nspat_match(a, b, nb);
    if (!pa && pb)
        return ol_nspat_match(b, a, na);
    size_t n = na < nb ? na : nb;
    return memcmp(a, b, n) == 0;
}
