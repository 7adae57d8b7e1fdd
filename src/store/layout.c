/*
 * layout.c - see layout.h. Secrets are derived per call (twelve short
 * XXH3-128 calls, well under a microsecond); nothing is cached, so every
 * function is pure and thread-safe.
 */
#include "store/layout.h"

#include <errno.h>
#include <stdbool.h>
#include <string.h>

#define XXH_STATIC_LINKING_ONLY /* XXH3_state_t on the stack */
#include <xxhash.h>

#define OL_SECRET_LEN 192u

_Static_assert(OL_SECRET_LEN >= XXH3_SECRET_SIZE_MIN, "XXH3 secret too short");
_Static_assert(OL_SECRET_LEN % 16 == 0, "secret is made of 16-byte blocks");

static void ol_put64(uint8_t *p, uint64_t v)
{
    for (unsigned i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

/* secret(label) as documented in layout.h. */
static void ol_secret(uint8_t out[OL_SECRET_LEN], const char *label,
                      const uint8_t deployment_id[16])
{
    uint8_t in[32 + 16];
    size_t ll = strlen(label);
    memcpy(in, label, ll);
    memcpy(in + ll, deployment_id, 16);
    for (unsigned i = 0; i < OL_SECRET_LEN / 16; i++) {
        XXH128_hash_t h = XXH3_128bits_withSeed(in, ll + 16, i);
        ol_put64(out + 16 * i, h.low64);
        ol_put64(out + 16 * i + 8, h.high64);
    }
}

/* XXH3-64 under secret(label) of blen (8 bytes LE) || bucket || key. */
static uint64_t ol_obj_hash(const char *label, const uint8_t deployment_id[16],
                            const char *bucket, size_t blen, const char *key, size_t klen)
{
    uint8_t secret[OL_SECRET_LEN], le[8];
    ol_secret(secret, label, deployment_id);
    ol_put64(le, (uint64_t)blen);
    XXH3_state_t st;
    XXH3_INITSTATE(&st);
    XXH3_64bits_reset_withSecret(&st, secret, sizeof secret);
    XXH3_64bits_update(&st, le, sizeof le);
    XXH3_64bits_update(&st, bucket, blen);
    XXH3_64bits_update(&st, key, klen);
    return XXH3_64bits_digest(&st);
}

unsigned ol_layout_set_of(const uint8_t deployment_id[16], const char *bucket, size_t blen,
                          const char *key, size_t klen, unsigned nsets)
{
    uint64_t h = ol_obj_hash("openlake/set/v1", deployment_id, bucket, blen, key, klen);
    return (unsigned)(((unsigned __int128)h * nsets) >> 64);
}

uint64_t ol_layout_object_hash(const uint8_t deployment_id[16], const char *bucket, size_t blen,
                               const char *key, size_t klen)
{
    return ol_obj_hash("openlake/obj/v1", deployment_id, bucket, blen, key, klen);
}

void ol_layout_distribution(uint64_t hash, unsigned nshards, uint8_t *out)
{
    unsigned start = (unsigned)(hash % nshards);
    for (unsigned p = 0; p < nshards; p++)
        out[p] = (uint8_t)((p + nshards - start) % nshards);
}

unsigned ol_layout_default_parity(unsigned drives_per_set)
{
    if (drives_per_set <= 1)
        return 0;
    if (drives_per_set <= 3)
        return 1;
    if (drives_per_set <= 5)
        return 2;
    if (drives_per_set <= 7)
        return 3;
    return 4;
}

static bool ol_is(const char *s, size_t len, const char *lit)
{
    return len == strlen(lit) && memcmp(s, lit, len) == 0;
}

int ol_layout_parity_for_class(const char *storage_class, size_t len, unsigned drives_per_set,
                               unsigned standard_parity, unsigned *parity)
{
    if (drives_per_set == 0 || standard_parity > drives_per_set / 2)
        return -ERANGE;
    if (len == 0 || ol_is(storage_class, len, "STANDARD")) {
        *parity = standard_parity;
        return 0;
    }
    if (ol_is(storage_class, len, "REDUCED_REDUNDANCY")) {
        unsigned half = standard_parity / 2 > 1 ? standard_parity / 2 : 1;
        *parity = half < standard_parity ? half : standard_parity;
        return 0;
    }
    return -EINVAL;
}

unsigned ol_layout_write_quorum(unsigned nshards, unsigned parity)
{
    unsigned k = nshards - parity;
    return k == parity ? k + 1 : k;
}

unsigned ol_layout_read_quorum(unsigned nshards, unsigned parity) { return nshards - parity; }

/* ---- names -------------------------------------------------------------------------- */

static bool ol_prefix(const char *s, size_t len, const char *p)
{
    size_t n = strlen(p);
    return len >= n && memcmp(s, p, n) == 0;
}

static bool ol_suffix(const char *s, size_t len, const char *p)
{
    size_t n = strlen(p);
    return len >= n && memcmp(s + len - n, p, n) == 0;
}

static bool ol_alnum(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }

/* Four dot-separated non-empty runs of digits. */
static bool ol_ip_like(const char *s, size_t len)
{
    unsigned dots = 0, run = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] == '.') {
            if (!run)
                return false;
            dots++;
            run = 0;
        } else if (s[i] >= '0' && s[i] <= '9') {
            run++;
        } else {
            return false;
        }
    }
    return dots == 3 && run > 0;
}

int ol_layout_bucket_ok(const char *name, size_t len)
{
    static const char *const bad_prefix[] = {"xn--", "sthree-", "amzn-s3-demo-"};
    static const char *const bad_suffix[] = {"-s3alias", "--ol-s3", "--x-s3", "--table-s3"};
    if (len < OL_LAYOUT_BUCKET_MIN || len > OL_LAYOUT_BUCKET_MAX)
        return -EINVAL;
    if (!ol_alnum(name[0]) || !ol_alnum(name[len - 1]))
        return -EINVAL;
    for (size_t i = 0; i < len; i++) {
        char c = name[i];
        if (!ol_alnum(c) && c != '.' && c != '-')
            return -EINVAL;
        if (i > 0 && c == '.' && (name[i - 1] == '.' || name[i - 1] == '-'))
            return -EINVAL;
        if (i > 0 && c == '-' && name[i - 1] == '.')
            return -EINVAL;
    }
    if (ol_ip_like(name, len))
        return -EINVAL;
    for (size_t i = 0; i < sizeof bad_prefix / sizeof *bad_prefix; i++)
        if (ol_prefix(name, len, bad_prefix[i]))
            return -EINVAL;
    for (size_t i = 0; i < sizeof bad_suffix / sizeof *bad_suffix; i++)
        if (ol_suffix(name, len, bad_suffix[i]))
            return -EINVAL;
    return 0;
}

int ol_layout_key_ok(const char *key, size_t len)
{
    if (len == 0)
        return -EINVAL;
    if (len > OL_LAYOUT_KEY_MAX)
        return -ENAMETOOLONG;
    const unsigned char *s = (const unsigned char *)key;
    size_t i = 0;
    while (i < len) {
        unsigned c = s[i];
        if (c == 0)
            return -EINVAL;
        if (c < 0x80) {
            i++;
            continue;
        }
        unsigned need, lo = 0x80, hi = 0xbf; /* range of the second byte */
        if (c >= 0xc2 && c <= 0xdf) {
            need = 1;
        } else if (c >= 0xe0 && c <= 0xef) {
            need = 2;
            if (c == 0xe0)
                lo = 0xa0;  /* overlong below U+0800 */
            else if (c == 0xed)
                hi = 0x9f;  /* surrogates U+D800..U+DFFF */
        } else if (c >= 0xf0 && c <= 0xf4) {
            need = 3;
            if (c == 0xf0)
                lo = 0x90;  /* overlong below U+10000 */
            else if (c == 0xf4)
                hi = 0x8f;  /* above U+10FFFF */
        } else {
            return -EINVAL; /* continuation byte, 0xc0/0xc1 overlongs, 0xf5.. */
        }
        if (len - i <= need)
            return -EINVAL; /* truncated */
        if (s[i + 1] < lo || s[i + 1] > hi)
            return -EINVAL;
        for (unsigned j = 2; j <= need; j++)
            if ((s[i + j] & 0xc0) != 0x80)
                return -EINVAL;
        i += need + 1;
    }
    return 0;
}

void ol_layout_object_dir(const uint8_t deployment_id[16], const char *key, size_t klen,
                          char out[OL_LAYOUT_DIR_LEN])
{
    static const char hex[] = "0123456789abcdef";
    uint8_t secret[OL_SECRET_LEN];
    ol_secret(secret, "openlake/dir/v1", deployment_id);
    XXH128_canonical_t c;
    XXH128_canonicalFromHash(&c, XXH3_128bits_withSecret(key, klen, secret, sizeof secret));
    char *p = out + 3;
    for (unsigned i = 0; i < 16; i++) {
        *p++ = hex[c.digest[i] >> 4];
        *p++ = hex[c.digest[i] & 15];
    }
    *p = 0;
    out[0] = out[3];
    out[1] = out[4];
    out[2] = '/';
}
