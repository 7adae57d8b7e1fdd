/*
 * test_nspat.c - unit tests of the namespace patterns of [[kv_tenants]]
 * (src/base/nspat.c): what is a pattern, what it matches, and when two
 * patterns can claim one namespace; a differential test of the overlap
 * rule against a brute-force search over a small alphabet.
 */
#include "olt.h"

#include "base/nspat.h"

#include <stdbool.h>
#include <string.h>

static bool m(const char *pat, const char *ns)
{
    return ol_nspat_match(pat, ns, strlen(ns));
}

OLT_TEST(nspat_check)
{
    OLT_CHECK_EQ(ol_nspat_check("team-a/llama"), 0);
    OLT_CHECK_EQ(ol_nspat_check("team-a/*"), 0);
    OLT_CHECK_EQ(ol_nspat_check("*"), 0);
    OLT_CHECK_EQ(ol_nspat_check("a b/\xc3\xa9"), 0);   /* spaces, UTF-8: bytes */
    OLT_CHECK_EQ(ol_nspat_check(""), -1);
    OLT_CHECK_EQ(ol_nspat_check("a*b"), -1);            /* '*' only at the end */
    OLT_CHECK_EQ(ol_nspat_check("**"), -1);
    OLT_CHECK_EQ(ol_nspat_check("a\tb"), -1);
    OLT_CHECK_EQ(ol_nspat_check("a\x7f"), -1);
    char big[OL_NSPAT_MAX + 2];
    memset(big, 'x', sizeof big);
    big[OL_NSPAT_MAX] = 0;
    OLT_CHECK_EQ(ol_nspat_check(big), 0);
    big[OL_NSPAT_MAX] = 'x';
    big[OL_NSPAT_MAX + 1] = 0;
    OLT_CHECK_EQ(ol_nspat_check(big), -1);
}

OLT_TEST(nspat_match)
{
    OLT_CHECK(m("team-a/llama", "team-a/llama"));
    OLT_CHECK(!m("team-a/llama", "team-a/llama2"));
    OLT_CHECK(!m("team-a/llama", "team-a/llam"));
    OLT_CHECK(m("team-a/*", "team-a/llama/abc123"));
    OLT_CHECK(m("team-a/*", "team-a/"));
    OLT_CHECK(!m("team-a/*", "team-a"));
    OLT_CHECK(!m("team-a/*", "team-ab/x"));
    OLT_CHECK(m("*", "anything"));
    OLT_CHECK(m("team-a*", "team-ab/x"));
    /* bytes, not strings: a NUL inside a namespace is just a byte */
    OLT_CHECK(ol_nspat_match("a/*", "a/\0x", 4));
    OLT_CHECK(!ol_nspat_match("a/x", "a/x\0", 4));
}

OLT_TEST(nspat_overlap)
{
    OLT_CHECK(ol_nspat_overlap("a/x", "a/x"));
    OLT_CHECK(!ol_nspat_overlap("a/x", "a/y"));
    OLT_CHECK(ol_nspat_overlap("a/*", "a/x"));
    OLT_CHECK(ol_nspat_overlap("a/x", "a/*"));
    OLT_CHECK(!ol_nspat_overlap("a/*", "b/x"));
    OLT_CHECK(!ol_nspat_overlap("a/*", "a"));           /* "a" does not start with "a/" */
    OLT_CHECK(ol_nspat_overlap("a/*", "a/b/*"));
    OLT_CHECK(ol_nspat_overlap("a/b/*", "a/*"));
    OLT_CHECK(!ol_nspat_overlap("a/*", "b/*"));
    OLT_CHECK(ol_nspat_overlap("*", "b/*"));
    OLT_CHECK(ol_nspat_overlap("team*", "team-a/*"));
}

/* Every pattern over {a, b} of up to 3 fixed bytes, with and without '*';
 * overlap must equal "some namespace over {a, b} of up to 4 bytes matches
 * both" (a witness, if any, is at most one byte longer than the longer
 * fixed part). */
OLT_TEST(nspat_overlap_matches_brute_force)
{
    char pats[64][8];
    int np = 0;
    for (int len = 1; len <= 3; len++)
        for (int bits = 0; bits < (1 << len); bits++)
            for (int star = 0; star < 2; star++) {
                for (int i = 0; i < len; i++)
                    pats[np][i] = (bits >> i) & 1 ? 'b' : 'a';
                pats[np][len] = star ? '*' : 0;
                pats[np][len + star] = 0;
                np++;
            }
    snprintf(pats[np++], 8, "*");
    for (int i = 0; i < np; i++) {
        OLT_CHECK_EQ(ol_nspat_check(pats[i]), 0);
        for (int j = 0; j < np; j++) {
            bool want = false;
            for (int len = 1; len <= 4 && !want; len++)
                for (int bits = 0; bits < (1 << len) && !want; bits++) {
                    char ns[8];
                    for (int k = 0; k < len; k++)
                        ns[k] = (bits >> k) & 1 ? 'b' : 'a';
                    want = ol_nspat_match(pats[i], ns, (size_t)len) &&
                           ol_nspat_match(pats[j], ns, (size_t)len);
                }
            if (ol_nspat_overlap(pats[i], pats[j]) != want)
                olt_fail(__FILE__, __LINE__, "overlap(\"%s\", \"%s\") should be %d", pats[i],
                         pats[j], want);
        }
    }
}
