/*
 * sigv4.c - AWS Signature Version 4 checks (see sigv4.h for the contract).
 *
 * The canonical request is built straight into the caller's buffer; query
 * parameters are canonicalised into a bounded stack area first so they can
 * be sorted. Percent-decoding and re-encoding follow AWS's rule: every byte
 * except A-Z a-z 0-9 '-' '.' '_' '~' is written %XX (upper-case hex), and
 * '/' is kept in the path. A '+' in the query decodes to a space (as form
 * encoding and the common S3 servers do); clients that sign with SDKs send
 * %20 and %2B, which round-trip exactly.
 */
#include "s3/sigv4.h"

#include "s3/pct.h"

#include <errno.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#define OL_SIGV4_MAX_PARAMS 100

/* ---- small helpers --------------------------------------------------------- */

void ol_sigv4_hex(const uint8_t in[32], char out[64])
{
    static const char d[] = "0123456789abcdef";
    for (int i = 0; i < 32; i++) {
        out[2 * i] = d[in[i] >> 4];
        out[2 * i + 1] = d[in[i] & 15];
    }
}

int ol_sigv4_from_hex(const char *s, size_t n, uint8_t out[32])
{
    if (n != 64)
        return -EINVAL;
    for (int i = 0; i < 32; i++) {
        int hi = ol_hexval(s[2 * i]), lo = ol_hexval(s[2 * i + 1]);
        if (hi < 0 || lo < 0)
            return -EINVAL;
        out[i] = (uint8_t)(hi << 4 | lo);
    }
    return 0;
}

bool ol_sigv4_equal(const uint8_t a[32], const uint8_t b[32])
{
    return CRYPTO_memcmp(a, b, 32) == 0;
}

static void sha256(const void *p, size_t n, uint8_t out[32])
{
    EVP_Digest(p, n, out, NULL, EVP_sha256(), NULL);
}

static void hmac(const void *key, size_t klen, const void *p, size_t n, uint8_t out[32])
{
    unsigned len = 32;
    HMAC(EVP_sha256(), key, (int)klen, p, n, out, &len);
}

/* Bounded appender: err is set once anything did not fit. */
struct sb {
    char *p;
    size_t n, cap;
    int err;
};

static void sb_put(struct sb *b, const char *s, size_t n)
{
    if (b->err)
        return;
    if (n > b->cap - b->n) {
        b->err = -ENOSPC;
        return;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
}

static void sb_ch(struct sb *b, char c) { sb_put(b, &c, 1); }

static int unreserved(unsigned char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
           c == '-' || c == '.' || c == '_' || c == '~';
}

static void sb_enc(struct sb *b, unsigned char c, int keep_slash)
{
    static const char d[] = "0123456789ABCDEF";
    if (unreserved(c) || (keep_slash && c == '/')) {
        sb_ch(b, (char)c);
        return;
    }
    char e[3] = {'%', d[c >> 4], d[c & 15]};
    sb_put(b, e, 3);
}

/* Decodes s[0..n) and writes it canonically encoded. plus: '+' means ' '. */
static int sb_recode(struct sb *b, const char *s, size_t n, int keep_slash, int plus)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '%') {
            if (i + 2 >= n || ol_hexval(s[i + 1]) < 0 || ol_hexval(s[i + 2]) < 0)
                return -EINVAL;
            c = (unsigned char)(ol_hexval(s[i + 1]) << 4 | ol_hexval(s[i + 2]));
            i += 2;
        } else if (c == '+' && plus) {
            c = ' ';
        }
        sb_enc(b, c, keep_slash);
    }
    return 0;
}

static int is_digits(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (s[i] < '0' || s[i] > '9')
            return 0;
    return 1;
}

static int num(const char *s, size_t n)
{
    int v = 0;
    for (size_t i = 0; i < n; i++)
        v = v * 10 + (s[i] - '0');
    return v;
}

static int valid_ymd(const char *s)
{
    if (!is_digits(s, 8))
        return 0;
    int y = num(s, 4), m = num(s + 4, 2), d = num(s + 6, 2);
    static const int mdays[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    if (y < 1970 || m < 1 || m > 12 || d < 1)
        return 0;
    int leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    return d <= mdays[m - 1] + (m == 2 && leap);
}

int ol_sigv4_parse_amz_date(const char *s, size_t n, int64_t *epoch)
{
    if (n != 16 || s[8] != 'T' || s[15] != 'Z' || !valid_ymd(s) || !is_digits(s + 9, 6))
        return -EINVAL;
    int y = num(s, 4), m = num(s + 4, 2), d = num(s + 6, 2);
    int hh = num(s + 9, 2), mm = num(s + 11, 2), ss = num(s + 13, 2);
    if (hh > 23 || mm > 59 || ss > 59)
        return -EINVAL;
    /* days from civil (proleptic Gregorian), 1970-01-01 = 0 */
    y -= m <= 2;
    int64_t era = y / 400;
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    int64_t days = era * 146097 + doe - 719468;
    *epoch = days * 86400 + hh * 3600 + mm * 60 + ss;
    return 0;
}

/* ---- parsing ------------------------------------------------------------- */

/* "AK/yyyymmdd/region/service/aws4_request" */
static int parse_credential(const char *s, size_t n, struct ol_sigv4 *a)
{
    const char *part[5];
    size_t len[5];
    size_t k = 0, start = 0;
    for (size_t i = 0; i <= n; i++) {
        if (i == n || s[i] == '/') {
            if (k == 5)
                return -EINVAL;
            part[k] = s + start;
            len[k++] = i - start;
            start = i + 1;
        }
    }
    if (k != 5 || len[0] == 0 || len[1] != 8 || len[2] == 0 || len[3] == 0 ||
        len[4] != 12 || memcmp(part[4], "aws4_request", 12) != 0 || !valid_ymd(part[1]))
        return -EINVAL;
    if (len[0] > 128 || n - len[0] - 1 > OL_SIGV4_SCOPE_MAX)
        return -EINVAL;
    a->access_key = part[0];
    a->access_key_len = len[0];
    a->scope = part[1];
    a->scope_len = n - len[0] - 1;
    memcpy(a->scope_date, part[1], 8);
    a->scope_date[8] = 0;
    a->region = part[2];
    a->region_len = len[2];
    a->service = part[3];
    a->service_len = len[3];
    return 0;
}

/* Lower case, sorted, no empty names, and "host" among them. */
static int check_signed_headers(const char *s, size_t n)
{
    if (n == 0)
        return -EINVAL;
    const char *prev = NULL;
    size_t prev_len = 0, count = 0;
    int host = 0;
    size_t start = 0;
    for (size_t i = 0; i <= n; i++) {
        if (i < n && s[i] != ';') {
            char c = s[i];
            if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_' ||
                  c == '.'))
                return -EINVAL;
            continue;
        }
        size_t len = i - start;
        if (len == 0 || ++count > OL_SIGV4_MAX_SIGNED)
            return -EINVAL;
        const char *name = s + start;
        if (prev) {
            size_t m = prev_len < len ? prev_len : len;
            int c = memcmp(prev, name, m);
            if (c > 0 || (c == 0 && prev_len >= len))
                return -EINVAL;
        }
        if (len == 4 && memcmp(name, "host", 4) == 0)
            host = 1;
        prev = name;
        prev_len = len;
        start = i + 1;
    }
    return host ? 0 : -EINVAL;
}

int ol_sigv4_parse_header(const char *v, size_t n, struct ol_sigv4 *out)
{
    memset(out, 0, sizeof *out);
    size_t alen = sizeof OL_SIGV4_ALGO - 1;
    if (n <= alen || memcmp(v, OL_SIGV4_ALGO, alen) != 0 || v[alen] != ' ')
        return -EINVAL;
    int have_cred = 0, have_sh = 0, have_sig = 0;
    size_t i = alen;
    while (i < n) {
        while (i < n && (v[i] == ' ' || v[i] == ','))
            i++;
        if (i == n)
            break;
        size_t s = i;
        while (i < n && v[i] != ',')
            i++;
        size_t e = i;
        while (e > s && v[e - 1] == ' ')
            e--;
        const char *kv = v + s;
        size_t kl = e - s;
        const char *eq = memchr(kv, '=', kl);
        if (!eq)
            return -EINVAL;
        size_t nl = (size_t)(eq - kv);
        const char *val = eq + 1;
        size_t vl = kl - nl - 1;
        if (nl == 10 && memcmp(kv, "Credential", 10) == 0) {
            if (have_cred++ || parse_credential(val, vl, out) < 0)
                return -EINVAL;
        } else if (nl == 13 && memcmp(kv, "SignedHeaders", 13) == 0) {
            if (have_sh++ || check_signed_headers(val, vl) < 0)
                return -EINVAL;
            out->signed_headers = val;
            out->signed_headers_len = vl;
        } else if (nl == 9 && memcmp(kv, "Signature", 9) == 0) {
            if (have_sig++ || ol_sigv4_from_hex(val, vl, out->signature) < 0)
                return -EINVAL;
        } else {
            return -EINVAL;
        }
    }
    return have_cred && have_sh && have_sig ? 0 : -EINVAL;
}

int ol_sigv4_parse_query(const char *q, size_t n, char *scratch, struct ol_sigv4 *out)
{
    memset(out, 0, sizeof *out);
    int have_algo = 0, have_cred = 0, have_date = 0, have_exp = 0, have_sh = 0, have_sig = 0;
    int bad = 0;
    size_t used = 0, at = 0;
    struct ol_qparam pr;
    while (ol_query_next(q, n, &at, &pr)) {
        const char *p = pr.name;
        size_t nl = pr.name_len;
        if (nl < 6 || memcmp(p, "X-Amz-", 6) != 0)
            continue;
        char *val = scratch + used;
        long vl = ol_pct_decode(pr.value ? pr.value : p + nl, pr.value_len, val, n - used,
                                true);
        if (vl < 0) {
            bad = 1;
            continue;
        }
        used += (size_t)vl;
#define NAME_IS(lit) (nl == sizeof(lit) - 1 && memcmp(p, lit, nl) == 0)
        if (NAME_IS("X-Amz-Algorithm")) {
            have_algo++;
            if ((size_t)vl != sizeof OL_SIGV4_ALGO - 1 || memcmp(val, OL_SIGV4_ALGO, (size_t)vl))
                bad = 1;
        } else if (NAME_IS("X-Amz-Credential")) {
            if (have_cred++ || parse_credential(val, (size_t)vl, out) < 0)
                bad = 1;
        } else if (NAME_IS("X-Amz-Date")) {
            int64_t t;
            if (have_date++ || ol_sigv4_parse_amz_date(val, (size_t)vl, &t) < 0)
                bad = 1;
            else
                memcpy(out->amz_date, val, 16);
        } else if (NAME_IS("X-Amz-Expires")) {
            if (have_exp++ || vl < 1 || vl > 6 || !is_digits(val, (size_t)vl))
                bad = 1;
            else
                out->expires = num(val, (size_t)vl);
        } else if (NAME_IS("X-Amz-SignedHeaders")) {
            if (have_sh++ || check_signed_headers(val, (size_t)vl) < 0)
                bad = 1;
            out->signed_headers = val;
            out->signed_headers_len = (size_t)vl;
        } else if (NAME_IS("X-Amz-Signature")) {
            if (have_sig++ || ol_sigv4_from_hex(val, (size_t)vl, out->signature) < 0)
                bad = 1;
        }
#undef NAME_IS
    }
    if (!have_algo)
        return -ENOENT;
    if (bad || have_algo != 1 || !have_cred || !have_date || !have_exp || !have_sh || !have_sig ||
        out->expires < 1 || out->expires > OL_SIGV4_MAX_EXPIRES)
        return -EINVAL;
    out->presigned = true;
    return 0;
}

/* ---- canonical request ------------------------------------------------------ */

struct param {
    size_t off, name_len, len;   /* canonical "name=value" at tmp + off */
};

static int param_cmp(const char *tmp, const struct param *a, const struct param *b)
{
    /* by name, then by value (the canonical bytes compare the same way) */
    size_t m = a->name_len < b->name_len ? a->name_len : b->name_len;
    int c = memcmp(tmp + a->off, tmp + b->off, m);
    if (c || a->name_len != b->name_len)
        return c ? c : (a->name_len < b->name_len ? -1 : 1);
    size_t av = a->len - a->name_len, bv = b->len - b->name_len;
    m = av < bv ? av : bv;
    c = memcmp(tmp + a->off + a->name_len, tmp + b->off + b->name_len, m);
    return c ? c : (av < bv ? -1 : av > bv);
}

static int canonical_query(struct sb *out, const char *q, size_t n, bool presigned)
{
    char tmp[OL_SIGV4_MAX_CANONICAL];
    struct param ps[OL_SIGV4_MAX_PARAMS];
    struct sb t = {tmp, 0, sizeof tmp, 0};
    size_t np = 0, at = 0;
    struct ol_qparam qp;
    while (ol_query_next(q, n, &at, &qp)) {
        const char *p = qp.name;
        size_t nl = qp.name_len;
        if (nl == 0 && !qp.value)
            continue;
        if (presigned && nl == 15 && memcmp(p, "X-Amz-Signature", 15) == 0)
            continue;
        if (np == OL_SIGV4_MAX_PARAMS)
            return -EINVAL;
        struct param *pr = &ps[np++];
        pr->off = t.n;
        if (sb_recode(&t, p, nl, 0, 1) < 0)
            return -EINVAL;
        pr->name_len = t.n - pr->off;
        sb_ch(&t, '=');
        if (qp.value && sb_recode(&t, qp.value, qp.value_len, 0, 1) < 0)
            return -EINVAL;
        if (t.err)
            return t.err;
        pr->len = t.n - pr->off;
    }
    /* insertion sort: a handful of parameters */
    for (size_t a = 1; a < np; a++) {
        struct param x = ps[a];
        size_t b = a;
        while (b > 0 && param_cmp(tmp, &ps[b - 1], &x) > 0) {
            ps[b] = ps[b - 1];
            b--;
        }
        ps[b] = x;
    }
    for (size_t a = 0; a < np; a++) {
        if (a)
            sb_ch(out, '&');
        sb_put(out, tmp + ps[a].off, ps[a].len);
    }
    return 0;
}

/* value with inner runs of spaces folded to one (ends are already trimmed) */
static void put_folded(struct sb *b, const char *v, size_t n)
{
    size_t s = 0, e = n;
    while (s < e && (v[s] == ' ' || v[s] == '\t'))
        s++;
    while (e > s && (v[e - 1] == ' ' || v[e - 1] == '\t'))
        e--;
    int sp = 0;
    for (size_t i = s; i < e; i++) {
        char c = v[i] == '\t' ? ' ' : v[i];
        if (c == ' ') {
            if (!sp)
                sb_ch(b, ' ');
            sp = 1;
        } else {
            sp = 0;
            sb_ch(b, c);
        }
    }
}

int ol_sigv4_canonical_request(const char *method, size_t method_len,
                               const char *path, size_t path_len,
                               const char *query, size_t query_len, bool presigned,
                               const struct ol_http_header *hdrs, size_t nhdrs,
                               const char *signed_headers, size_t signed_len,
                               const char *payload, size_t payload_len,
                               char *out, size_t cap)
{
    struct sb b = {out, 0, cap, 0};
    sb_put(&b, method, method_len);
    sb_ch(&b, '\n');
    if (path_len == 0)
        sb_ch(&b, '/');
    else if (sb_recode(&b, path, path_len, 1, 0) < 0)
        return -EINVAL;
    sb_ch(&b, '\n');
    int rc = canonical_query(&b, query, query_len, presigned);
    if (rc < 0)
        return rc;
    sb_ch(&b, '\n');
    size_t start = 0;
    for (size_t i = 0; i <= signed_len; i++) {
        if (i < signed_len && signed_headers[i] != ';')
            continue;
        const char *name = signed_headers + start;
        size_t nl = i - start;
        start = i + 1;
        int found = 0;
        sb_put(&b, name, nl);
        sb_ch(&b, ':');
        for (size_t h = 0; h < nhdrs; h++) {
            if (hdrs[h].name_len != nl || strncasecmp(hdrs[h].name, name, nl) != 0)
                continue;
            if (found++)
                sb_ch(&b, ',');
            put_folded(&b, hdrs[h].value, hdrs[h].value_len);
        }
        if (!found)
            return -ENOENT;
        sb_ch(&b, '\n');
    }
    sb_ch(&b, '\n');
    sb_put(&b, signed_headers, signed_len);
    sb_ch(&b, '\n');
    sb_put(&b, payload, payload_len);
    if (b.err)
        return b.err;
    return (int)b.n;
}

/* ---- signatures ------------------------------------------------------------- */

int ol_sigv4_signing_key(const char *secret, size_t secret_len, const struct ol_sigv4 *a,
                         uint8_t key[32])
{
    char k0[4 + 128];
    if (secret_len > 128)
        return -EINVAL;
    memcpy(k0, "AWS4", 4);
    memcpy(k0 + 4, secret, secret_len);
    uint8_t t[32];
    hmac(k0, 4 + secret_len, a->scope_date, 8, t);
    hmac(t, 32, a->region, a->region_len, t);
    hmac(t, 32, a->service, a->service_len, t);
    hmac(t, 32, "aws4_request", 12, key);
    OPENSSL_cleanse(k0, sizeof k0);
    OPENSSL_cleanse(t, sizeof t);
    return 0;
}

/* "ALGO\n" date "\n" scope "\n" then the caller's lines, HMAC'd with key */
static void sign_lines(const uint8_t key[32], const char *algo, const char *amz_date,
                       const char *scope, size_t scope_len, const char *const *lines,
                       const size_t *lens, int nlines, uint8_t sig[32])
{
    char buf[64 + 17 + OL_SIGV4_SCOPE_MAX + 4 * 66];
    struct sb b = {buf, 0, sizeof buf, 0};
    sb_put(&b, algo, strlen(algo));
    sb_ch(&b, '\n');
    sb_put(&b, amz_date, 16);
    sb_ch(&b, '\n');
    sb_put(&b, scope, scope_len);
    for (int i = 0; i < nlines; i++) {
        sb_ch(&b, '\n');
        sb_put(&b, lines[i], lens[i]);
    }
    hmac(key, 32, buf, b.n, sig);
}

void ol_sigv4_sign(const uint8_t key[32], const char *amz_date, const char *scope,
                   size_t scope_len, const char *canonical, size_t canonical_len,
                   uint8_t sig[32])
{
    uint8_t h[32];
    char hex[64];
    sha256(canonical, canonical_len, h);
    ol_sigv4_hex(h, hex);
    const char *lines[1] = {hex};
    size_t lens[1] = {64};
    sign_lines(key, OL_SIGV4_ALGO, amz_date, scope, scope_len, lines, lens, 1, sig);
}

void ol_sigv4_chunk_sign(const uint8_t key[32], const char *amz_date, const char *scope,
                         size_t scope_len, const uint8_t prev[32],
                         const uint8_t chunk_sha256[32], uint8_t sig[32])
{
    static const char empty[] =
        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
    char p[64], c[64];
    ol_sigv4_hex(prev, p);
    ol_sigv4_hex(chunk_sha256, c);
    const char *lines[3] = {p, empty, c};
    size_t lens[3] = {64, 64, 64};
    sign_lines(key, "AWS4-HMAC-SHA256-PAYLOAD", amz_date, scope, scope_len, lines, lens, 3,
               sig);
}

void ol_sigv4_trailer_sign(const uint8_t key[32], const char *amz_date, const char *scope,
                           size_t scope_len, const uint8_t prev[32],
                           const char *trailer, size_t trailer_len, uint8_t sig[32])
{
    uint8_t h[32];
    char p[64], t[64];
    sha256(trailer, trailer_len, h);
    ol_sigv4_hex(prev, p);
    ol_sigv4_hex(h, t);
    const char *lines[2] = {p, t};
    size_t lens[2] = {64, 64};
    sign_lines(key, "AWS4-HMAC-SHA256-TRAILER", amz_date, scope, scope_len, lines, lens, 2,
               sig);
}
