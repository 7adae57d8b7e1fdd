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
    for (size_t i = 0; i < raw; i++)
        out[i] = (uint8_t)(c->crc >> (8 * (raw - 1 - i)));
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
