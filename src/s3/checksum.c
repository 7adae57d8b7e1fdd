/*
 * checksum.c - S3 flexible checksums (see checksum.h).
 */
#include "s3/checksum.h"

#include "base/simd.h"

#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <strings.h>

#include <isa-l/crc.h>

static const struct {
    const char *header, *name;
    size_t raw;
} ck_tab[OL_CK_COUNT] = {
    [OL_CK_CRC32] = {"x-amz-checksum-crc32", "CRC32", 4},
    [OL_CK_CRC32C] = {"x-amz-checksum-crc32c", "CRC32C", 4},
    [OL_CK_CRC64NVME] = {"x-amz-checksum-crc64nvme", "CRC64NVME", 8},
    [OL_CK_SHA1] = {"x-amz-checksum-sha1", "SHA1", 20},
    [OL_CK_SHA256] = {"x-amz-checksum-sha256", "SHA256", 32},
};

int ol_ck_algo_of_header(const char *name, size_t n)
{
    for (int a = 1; a < OL_CK_COUNT; a++)
        if (strlen(ck_tab[a].header) == n && strncasecmp(ck_tab[a].header, name, n) == 0)
            return a;
    return OL_CK_NONE;
}

int ol_ck_algo_of_name(const char *name, size_t n)
{
    for (int a = 1; a < OL_CK_COUNT; a++)
        if (strlen(ck_tab[a].name) == n && strncasecmp(ck_tab[a].name, name, n) == 0)
            return a;
    return OL_CK_NONE;
}

const char *ol_ck_header(int algo) { return algo > 0 && algo < OL_CK_COUNT ? ck_tab[algo].header : ""; }
const char *ol_ck_name(int algo) { return algo > 0 && algo < OL_CK_COUNT ? ck_tab[algo].name : ""; }
size_t ol_ck_raw_size(int algo) { return algo > 0 && algo < OL_CK_COUNT ? ck_tab[algo].raw : 0; }

/* ---- CRC-64/NVME --------------------------------------------------------- */

#define NVME_POLY_REFL 0x9a6c9329ac4bc9b5ull   /* 0xad93d23594c93659 reflected */

uint64_t ol_crc64nvme_ref(uint64_t crc, const void *p, size_t n)
{
    const uint8_t *b = p;
    crc = ~crc;
    for (size_t i = 0; i < n; i++) {
        crc ^= b[i];
        for (int k = 0; k < 8; k++)
            crc = (crc >> 1) ^ (NVME_POLY_REFL & (0 - (crc & 1)));
    }
    return ~crc;
}

static uint64_t nvme_tab[8][256];
static pthread_once_t nvme_once = PTHREAD_ONCE_INIT;

static void nvme_init(void)
{
    for (unsigned i = 0; i < 256; i++) {
        uint64_t c = i;
        for (int k = 0; k < 8; k++)
            c = (c >> 1) ^ (NVME_POLY_REFL & (0 - (c & 1)));
        nvme_tab[0][i] = c;
    }
    for (unsigned i = 0; i < 256; i++)
        for (int t = 1; t < 8; t++)
            nvme_tab[t][i] = (nvme_tab[t - 1][i] >> 8) ^ nvme_tab[0][nvme_tab[t - 1][i] & 0xff];
}

uint64_t ol_crc64nvme(uint64_t crc, const void *p, size_t n)
{
    pthread_once(&nvme_once, nvme_init);
    const uint8_t *b = p;
    crc = ~crc;
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, b, 8);
        crc ^= w;   /* little-endian host assumed (x86-64, arm64) */
        crc = nvme_tab[7][crc & 0xff] ^ nvme_tab[6][(crc >> 8) & 0xff] ^
              nvme_tab[5][(crc >> 16) & 0xff] ^ nvme_tab[4][(crc >> 24) & 0xff] ^
              nvme_tab[3][(crc >> 32) & 0xff] ^ nvme_tab[2][(crc >> 40) & 0xff] ^
              nvme_tab[1][(crc >> 48) & 0xff] ^ nvme_tab[0][crc >> 56];
        b += 8;
        n -= 8;
    }
    while (n--)
        crc = (crc >> 8) ^ nvme_tab[0][(crc ^ *b++) & 0xff];
    return ~crc;
}

/* ---- CRC combine --------------------------------------------------------- */

/* The reflected polynomial and width of each CRC. In the reflected
 * representation bit w-1 is the coefficient of x^0, bit 0 that of x^(w-1). */
static const struct {
    uint64_t poly;
    unsigned width;
} crc_tab[OL_CK_COUNT] = {
    [OL_CK_CRC32] = {0xedb88320u, 32},
    [OL_CK_CRC32C] = {0x82f63b78u, 32},
    [OL_CK_CRC64NVME] = {NVME_POLY_REFL, 64},
};

#define X2N_COUNT 67   /* x^(2^k) for k < 3 + 64: a length in bytes is 2^3 bits */

static uint64_t x2n_tab[OL_CK_COUNT][X2N_COUNT];
static pthread_once_t x2n_once = PTHREAD_ONCE_INIT;

int ol_ck_is_crc(int algo)
{
    return algo > 0 && algo < OL_CK_COUNT && crc_tab[algo].width != 0;
}

/* a * b mod p in the reflected representation (zlib's multmodp). a != 0. */
static uint64_t gf_mul(int algo, uint64_t a, uint64_t b)
{
    uint64_t poly = crc_tab[algo].poly, m = 1ull << (crc_tab[algo].width - 1), p = 0;
    for (;;) {
        if (a & m) {
            p ^= b;
            if ((a & (m - 1)) == 0)
                break;
        }
        m >>= 1;
        b = b & 1 ? (b >> 1) ^ poly : b >> 1;
    }
    return p;
}

static void x2n_init(void)
{
    for (int a = 1; a < OL_CK_COUNT; a++) {
        if (!ol_ck_is_crc(a))
            continue;
        uint64_t p = 1ull << (crc_tab[a].width - 2);   /* x^1 */
        x2n_tab[a][0] = p;
        for (int k = 1; k < X2N_COUNT; k++)
            x2n_tab[a][k] = p = gf_mul(a, p, p);
    }
}

uint64_t ol_ck_crc_combine(int algo, uint64_t crc_a, uint64_t crc_b, uint64_t len_b)
{
    if (!ol_ck_is_crc(algo))
        return 0;
    pthread_once(&x2n_once, x2n_init);
    /* x^(8 len_b) mod p, from the squares x^(2^k) */
    uint64_t p = 1ull << (crc_tab[algo].width - 1);   /* x^0 */
    for (unsigned k = 3; len_b; len_b >>= 1, k++)
        if (len_b & 1)
            p = gf_mul(algo, x2n_tab[algo][k], p);
    return gf_mul(algo, p, crc_a) ^ crc_b;
}

uint64_t ol_ck_crc_combine_ref(int algo, uint64_t crc_a, uint64_t crc_b, uint64_t len_b)
{
    if (!ol_ck_is_crc(algo))
        return 0;
    uint64_t poly = crc_tab[algo].poly, r = crc_a;
    for (uint64_t i = 0; i < 8 * len_b; i++)
        r = (r >> 1) ^ (poly & (0 - (r & 1)));
    return r ^ crc_b;
}

uint64_t ol_ck_crc_load(int algo, const uint8_t *raw)
{
    uint64_t v = 0;
    for (size_t i = 0; i < ol_ck_raw_size(algo); i++)
        v = v << 8 | raw[i];
    return v;
}

void ol_ck_crc_store(int algo, uint64_t crc, uint8_t *raw)
{
    size_t n = ol_ck_raw_size(algo);
    for (size_t i = 0; i < n; i++)
        raw[i] = (uint8_t)(crc >> (8 * (n - 1 - i)));
}

/* ---- streaming ------------------------------------------------------------ */

int ol_ck_init(struct ol_ck *c, int algo, EVP_MD_CTX *md)
{
    c->algo = algo;
    c->crc = 0;
    c->md = md;
    switch (algo) {
    case OL_CK_CRC32:
    case OL_CK_CRC32C:
    case OL_CK_CRC64NVME:
        return 0;
    case OL_CK_SHA1:
    case OL_CK_SHA256:
        if (!md)
            return -EINVAL;
        return EVP_DigestInit_ex(md, algo == OL_CK_SHA1 ? EVP_sha1() : EVP_sha256(), NULL) == 1
                   ? 0 : -EIO;
    default:
        return -EINVAL;
    }
}

void ol_ck_update(struct ol_ck *c, const void *p, size_t n)
{
    switch (c->algo) {
    case OL_CK_CRC32:
        c->crc = crc32_gzip_refl((uint32_t)c->crc, p, n);
        ol_simd_clean();   /* base/simd.h: ISA-L leaves the vector unit dirty */
        break;
    case OL_CK_CRC32C:
        /* ISA-L's iSCSI CRC takes and returns the un-inverted state */
        c->crc = ~crc32_iscsi((unsigned char *)(uintptr_t)p, (int)n, ~(uint32_t)c->crc) &
                 0xffffffffu;
        ol_simd_clean();
        break;
    case OL_CK_CRC64NVME:
        c->crc = ol_crc64nvme(c->crc, p, n);
        break;
    case OL_CK_SHA1:
    case OL_CK_SHA256:
        EVP_DigestUpdate(c->md, p, n);
        break;
    }
}

size_t ol_ck_final(struct ol_ck *c, uint8_t out[OL_CK_MAX_RAW])
{
    size_t raw = ol_ck_raw_size(c->algo);
    if (c->algo == OL_CK_SHA1 || c->algo == OL_CK_SHA256) {
        unsigned len = 0;
        EVP_DigestFinal_ex(c->md, out, &len);
        return len;
    }
    ol_ck_crc_store(c->algo, c->crc, out);
    return raw;
}

size_t ol_ck_b64(const uint8_t *raw, size_t n, char out[OL_CK_MAX_B64 + 1])
{
    if (n > OL_CK_MAX_RAW)
        n = OL_CK_MAX_RAW;
    return (size_t)EVP_EncodeBlock((unsigned char *)out, raw, (int)n);
}

int ol_ck_from_b64(const char *s, size_t n, size_t want, uint8_t *out)
{
    if (n == 0 || n % 4 || n > OL_CK_MAX_B64 || want > OL_CK_MAX_RAW)
        return -EINVAL;
    unsigned char tmp[OL_CK_MAX_B64];
    int len = EVP_DecodeBlock(tmp, (const unsigned char *)s, (int)n);
    if (len < 0)
        return -EINVAL;
    /* EVP_DecodeBlock counts padding as zero bytes */
    size_t pad = (s[n - 1] == '=') + (s[n - 2] == '=');
    if ((size_t)len < pad || (size_t)len - pad != want)
        return -EINVAL;
    memcpy(out, tmp, want);
    return 0;
}
