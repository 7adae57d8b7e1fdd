/*
 * sigv2.c - AWS Signature Version 2 checks (see sigv2.h for the contract).
 *
 * The string to sign is written straight into the caller's buffer. The
 * x-amz-* headers and the sub-resources are first noted as indexes into
 * the caller's arrays (bounded, on the stack) and sorted there, stably, so
 * that repeated names keep the order they were sent in (as botocore's and
 * s3cmd's signers do).
 */
#include "s3/sigv2.h"

#include "s3/pct.h"
#include "s3/sigv4.h"

#include <errno.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

/*
 * The query parameters that are part of CanonicalizedResource: botocore's
 * HmacV1Auth.QSAOfInterest (a superset of s3cmd's list and of the one in
 * AWS's documentation). A server that signs one more or one fewer than the
 * client fails every request carrying it, so this follows the client that
 * most SigV2 requests come from.
 */
static const char *const subresources[] = {
    "accelerate", "acl", "analytics", "cors", "defaultObjectAcl", "delete", "inventory",
    "lifecycle", "location", "logging", "metrics", "notification", "object-lock",
    "partNumber", "policy", "replication", "requestPayment", "response-cache-control",
    "response-content-disposition", "response-content-encoding", "response-content-language",
    "response-content-type", "response-expires", "restore", "select", "select-type",
    "storageClass", "tagging", "torrent", "uploadId", "uploads", "versionId", "versioning",
    "versions", "website",
};

/* ---- small helpers ------------------------------------------------------------ */

bool ol_sigv2_equal(const uint8_t a[20], const uint8_t b[20])
{
    return CRYPTO_memcmp(a, b, 20) == 0;
}

void ol_sigv2_sign(const char *secret, size_t secret_len, const char *sts, size_t sts_len,
                   uint8_t sig[20])
{
    unsigned len = 20;
    HMAC(EVP_sha1(), secret, (int)secret_len, (const unsigned char *)sts, sts_len, sig, &len);
}

/* base64 of exactly 20 bytes: 27 characters and one '='. */
static int sig_from_base64(const char *s, size_t n, uint8_t out[20])
{
    unsigned char tmp[21];
    if (n != 28 || s[27] != '=' || s[26] == '=')
        return -EINVAL;
    for (size_t i = 0; i < 27; i++) {
        char c = s[i];
        if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
              c == '+' || c == '/'))
            return -EINVAL;
    }
    if (EVP_DecodeBlock(tmp, (const unsigned char *)s, 28) != 21)
        return -EINVAL;
    memcpy(out, tmp, 20);
    return 0;
}

static bool digits(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (s[i] < '0' || s[i] > '9')
            return false;
    return n > 0;
}

/* ---- dates -------------------------------------------------------------------- */

int ol_sigv2_parse_date(const char *s, size_t n, int64_t *epoch)
{
    /* ISO 8601 basic: yyyymmddThhmmssZ, SigV4's x-amz-date */
    if (n == 16)
        return ol_sigv4_parse_amz_date(s, n, epoch);
    /* RFC 1123: "Www, dd Mon yyyy hh:mm:ss GMT" (or UTC, or +0000), checked
     * as the same stamp */
    static const char wdays[] = "MonTueWedThuFriSatSun";
    static const char months[] = "JanFebMarAprMayJunJulAugSepOctNovDec";
    if (n < 29 || s[3] != ',' || s[4] != ' ' || s[7] != ' ' || s[11] != ' ' || s[16] != ' ' ||
        s[19] != ':' || s[22] != ':' || s[25] != ' ')
        return -EINVAL;
    size_t zl = n - 26;
    const char *z = s + 26;
    if (!((zl == 3 && (memcmp(z, "GMT", 3) == 0 || memcmp(z, "UTC", 3) == 0)) ||
          (zl == 5 && memcmp(z, "+0000", 5) == 0)))
        return -EINVAL;
    bool wday_ok = false;
    for (int i = 0; i < 7; i++)
        wday_ok |= memcmp(s, wdays + 3 * i, 3) == 0;
    int mo = 0;
    for (int i = 0; i < 12; i++)
        if (memcmp(s + 8, months + 3 * i, 3) == 0)
            mo = i + 1;
    if (!wday_ok || !mo || !digits(s + 5, 2) || !digits(s + 12, 4) || !digits(s + 17, 2) ||
        !digits(s + 20, 2) || !digits(s + 23, 2))
        return -EINVAL;
    char iso[16];
    memcpy(iso, s + 12, 4);
    iso[4] = (char)('0' + mo / 10);
    iso[5] = (char)('0' + mo % 10);
    memcpy(iso + 6, s + 5, 2);
    iso[8] = 'T';
    memcpy(iso + 9, s + 17, 2);
    memcpy(iso + 11, s + 20, 2);
    memcpy(iso + 13, s + 23, 2);
    iso[15] = 'Z';
    return ol_sigv4_parse_amz_date(iso, sizeof iso, epoch);
}

/* ---- parsing -------------------------------------------------------------------- */

int ol_sigv2_parse_header(const char *v, size_t n, struct ol_sigv2 *out)
{
    memset(out, 0, sizeof *out);
    if (n < 4 || memcmp(v, "AWS ", 4) != 0)
        return -EINVAL;
    const char *ak = v + 4;
    const char *colon = memchr(ak, ':', n - 4);
    if (!colon)
        return -EINVAL;
    size_t akl = (size_t)(colon - ak);
    if (akl == 0 || akl > OL_SIGV2_KEY_MAX || memchr(ak, ' ', akl))
        return -EINVAL;
    out->signature_ok = sig_from_base64(colon + 1, n - 4 - akl - 1, out->signature) == 0;
    out->access_key = ak;
    out->access_key_len = akl;
    return 0;
}

int ol_sigv2_parse_query(const char *q, size_t n, char *scratch, struct ol_sigv2 *out)
{
    memset(out, 0, sizeof *out);
    int have_ak = 0, have_sig = 0, have_exp = 0, bad = 0;
    size_t used = 0, at = 0;
    struct ol_qparam pr;
    while (ol_query_next(q, n, &at, &pr)) {
        const char *p = pr.name;
        size_t nl = pr.name_len;
        int which = nl == 14 && memcmp(p, "AWSAccessKeyId", 14) == 0 ? 1
                  : nl == 9 && memcmp(p, "Signature", 9) == 0       ? 2
                  : nl == 7 && memcmp(p, "Expires", 7) == 0         ? 3
                                                                    : 0;
        if (!which)
            continue;
        /* a raw '+' in Signature is base64's, not a space */
        char *val = scratch + used;
        long vl = ol_pct_decode(pr.value ? pr.value : p, pr.value_len, val, n - used,
                                which != 2);
        if (vl < 0) {
            bad = 1;
            continue;
        }
        used += (size_t)vl;
        if (which == 1) {
            if (have_ak++ || vl == 0 || vl > (long)OL_SIGV2_KEY_MAX)
                bad = 1;
            out->access_key = val;
            out->access_key_len = (size_t)vl;
        } else if (which == 2) {
            if (have_sig++)
                bad = 1;
            out->signature_ok = sig_from_base64(val, (size_t)vl, out->signature) == 0;
        } else {
            if (have_exp++ || vl > 19 || !digits(val, (size_t)vl))
                bad = 1;
            out->expires = val;
            out->expires_len = (size_t)vl;
        }
    }
    if (!have_ak && !have_sig && !have_exp)
        return -ENOENT;
    if (bad || !have_ak || !have_sig || !have_exp)
        return -EINVAL;
    int64_t t = 0;
    for (size_t k = 0; k < out->expires_len; k++) {
        if (t > (INT64_MAX - 9) / 10)
            return -EINVAL;
        t = t * 10 + (out->expires[k] - '0');
    }
    out->expires_at = t;
    out->presigned = true;
    return 0;
}

/* ---- string to sign --------------------------------------------------------------- */

struct out {
    char *p;
    size_t n, cap;
    int err;
};

static void put(struct out *o, const char *s, size_t n)
{
    if (o->err || n > o->cap - o->n) {
        o->err = -ENOSPC;
        return;
    }
    memcpy(o->p + o->n, s, n);
    o->n += n;
}

static void put_lower(struct out *o, const char *s, size_t n)
{
    if (o->err || n > o->cap - o->n) {
        o->err = -ENOSPC;
        return;
    }
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        o->p[o->n++] = c >= 'A' && c <= 'Z' ? (char)(c + 32) : c;
    }
}

/* A header value without surrounding spaces and tabs. */
static void put_trimmed(struct out *o, const char *v, size_t n)
{
    while (n && (v[0] == ' ' || v[0] == '\t'))
        v++, n--;
    while (n && (v[n - 1] == ' ' || v[n - 1] == '\t'))
        n--;
    put(o, v, n);
}

static const struct ol_http_header *find(const struct ol_http_header *h, size_t nh,
                                         const char *name)
{
    for (size_t i = 0; i < nh; i++)
        if (ol_http_name_eq(h[i].name, h[i].name_len, name))
            return &h[i];
    return NULL;
}

static void put_header_line(struct out *o, const struct ol_http_header *h)
{
    if (h)
        put_trimmed(o, h->value, h->value_len);
    put(o, "\n", 1);
}

/* Case-insensitive order of two header names (the lower-cased bytes). */
static int name_cmp(const struct ol_http_header *a, const struct ol_http_header *b)
{
    size_t m = a->name_len < b->name_len ? a->name_len : b->name_len;
    for (size_t i = 0; i < m; i++) {
        unsigned char x = (unsigned char)a->name[i], y = (unsigned char)b->name[i];
        x = x >= 'A' && x <= 'Z' ? x + 32 : x;
        y = y >= 'A' && y <= 'Z' ? y + 32 : y;
        if (x != y)
            return x < y ? -1 : 1;
    }
    return a->name_len < b->name_len ? -1 : a->name_len > b->name_len;
}

static bool is_amz(const struct ol_http_header *h)
{
    return h->name_len > 6 && ol_http_name_eq(h->name, 6, "x-amz-");
}

static void put_amz_headers(struct out *o, const struct ol_http_header *h, size_t nh)
{
    const struct ol_http_header *a[OL_SIGV2_MAX_AMZ];
    size_t na = 0;
    for (size_t i = 0; i < nh; i++) {
        if (!is_amz(&h[i]))
            continue;
        if (na == OL_SIGV2_MAX_AMZ) {
            o->err = -ENOSPC;
            return;
        }
        size_t k = na++;   /* insertion sort: stable */
        while (k > 0 && name_cmp(a[k - 1], &h[i]) > 0) {
            a[k] = a[k - 1];
            k--;
        }
        a[k] = &h[i];
    }
    for (size_t i = 0; i < na; i++) {
        if (i > 0 && name_cmp(a[i - 1], a[i]) == 0) {
            put(o, ",", 1);
        } else {
            if (i > 0)
                put(o, "\n", 1);
            put_lower(o, a[i]->name, a[i]->name_len);
            put(o, ":", 1);
        }
        put_trimmed(o, a[i]->value, a[i]->value_len);
    }
    if (na)
        put(o, "\n", 1);
}

static bool is_subresource(const char *name, size_t n)
{
    for (size_t i = 0; i < sizeof subresources / sizeof subresources[0]; i++)
        if (strlen(subresources[i]) == n && memcmp(subresources[i], name, n) == 0)
            return true;
    return false;
}

static int param_cmp(const struct ol_qparam *a, const struct ol_qparam *b)
{
    size_t m = a->name_len < b->name_len ? a->name_len : b->name_len;
    int c = memcmp(a->name, b->name, m);
    return c ? c : (a->name_len < b->name_len ? -1 : a->name_len > b->name_len);
}

/* A sub-resource value, percent-decoded as Python's unquote does: '%XX'
 * becomes the byte, anything else (a stray '%', a '+') stays. */
static void put_unquoted(struct out *o, const char *v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        char c = v[i];
        if (c == '%' && i + 2 < n && ol_hexval(v[i + 1]) >= 0 && ol_hexval(v[i + 2]) >= 0) {
            c = (char)(ol_hexval(v[i + 1]) << 4 | ol_hexval(v[i + 2]));
            i += 2;
        }
        put(o, &c, 1);
    }
}

static void put_resource(struct out *o, const char *bucket, size_t bucket_len,
                         const char *path, size_t path_len, const char *q, size_t qn)
{
    if (bucket_len) {
        put(o, "/", 1);
        put(o, bucket, bucket_len);
    }
    put(o, path, path_len);
    /* path style, the bucket alone: signed as "/bucket/" (botocore's
     * authPath for bucket operations, "the signature the server accepts") */
    if (!bucket_len && path_len > 1 && path[0] == '/' && !memchr(path + 1, '/', path_len - 1))
        put(o, "/", 1);
    struct ol_qparam ps[OL_SIGV2_MAX_SUBRES];
    size_t np = 0, at = 0;
    struct ol_qparam x;
    while (ol_query_next(q, qn, &at, &x)) {
        if (!is_subresource(x.name, x.name_len))
            continue;
        if (np == OL_SIGV2_MAX_SUBRES) {
            o->err = -ENOSPC;
            return;
        }
        size_t k = np++;   /* insertion sort by name: stable */
        while (k > 0 && param_cmp(&ps[k - 1], &x) > 0) {
            ps[k] = ps[k - 1];
            k--;
        }
        ps[k] = x;
    }
    for (size_t k = 0; k < np; k++) {
        put(o, k ? "&" : "?", 1);
        put(o, ps[k].name, ps[k].name_len);
        if (ps[k].value) {
            put(o, "=", 1);
            put_unquoted(o, ps[k].value, ps[k].value_len);
        }
    }
}

int ol_sigv2_string_to_sign(const char *method, size_t method_len, const char *bucket,
                            size_t bucket_len, const char *path, size_t path_len,
                            const char *query, size_t query_len,
                            const struct ol_http_header *hdrs, size_t nhdrs,
                            const char *expires, size_t expires_len, char *out, size_t cap)
{
    struct out o = {out, 0, cap, 0};
    put(&o, method, method_len);
    put(&o, "\n", 1);
    put_header_line(&o, find(hdrs, nhdrs, "content-md5"));
    put_header_line(&o, find(hdrs, nhdrs, "content-type"));
    if (expires) {
        put(&o, expires, expires_len);
        put(&o, "\n", 1);
    } else {
        /* with x-amz-date, the Date line is empty (x-amz-date is signed
         * among the x-amz-* headers instead) */
        put_header_line(&o, find(hdrs, nhdrs, "x-amz-date") ? NULL
                                                              : find(hdrs, nhdrs, "date"));
    }
    put_amz_headers(&o, hdrs, nhdrs);
    put_resource(&o, bucket, bucket_len, path, path_len, query, query_len);
    return o.err ? o.err : (int)o.n;
}
