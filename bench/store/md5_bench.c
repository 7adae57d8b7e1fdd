/*
 * md5_bench.c - the S3 ETag's MD5 on one core, per kernel (issue 5).
 *
 * S streams of LEN bytes each are fed in step, one 16 KiB receive buffer
 * at a time (as a core receives S uploads at once), through a set
 * (base/md5.h) that may use only one kernel (ol_md5_set_only), and through OpenSSL alone, one stream after another.
 * Prints one JSON object per line: kernel, streams, GB/s (bytes hashed /
 * wall time, the best of `runs`). Run by bench/store/run_md5.sh.
 *
 * And one stream's MD5 together with the SHA-256 of each of its 64 KiB
 * chunks (a signed aws-chunked upload, docs/s3.md), the bytes fed 16 KiB
 * at a time: OpenSSL's MD5 then OpenSSL's SHA-256 over each piece
 * ("openssl-md5+sha256"), and base/md5sha.h's one pass ("one-pass"); GB/s
 * of the stream's bytes, both hashes done.
 */
#define OPENSSL_SUPPRESS_DEPRECATED
#include "base/md5.h"
#include "base/md5sha.h"
#include "base/sha256.h"

#include <openssl/md5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { LEN = 8 << 20, PIECE = 16384, MAXS = 16 };

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* GB/s of S streams in step through a set restricted to one kernel
 * (NULL: its own choice). */
static double through_set(const uint8_t *src, const char *kernel, unsigned S)
{
    struct ol_md5_set *set = ol_md5_set_new(32);
    if (!set || (kernel && !ol_md5_set_only(set, kernel))) {
        ol_md5_set_free(set);
        return 0;
    }
    struct ol_md5 *h[MAXS];
    for (unsigned i = 0; i < S; i++)
        ol_md5_init(h[i] = ol_md5_get(set));
    double t0 = now();
    for (size_t at = 0; at < LEN; at += PIECE)
        for (unsigned i = 0; i < S; i++)
            ol_md5_update(h[i], src + (size_t)i * LEN + at, PIECE);
    uint8_t d[16];
    for (unsigned i = 0; i < S; i++)
        ol_md5_end(h[i]);
    for (unsigned i = 0; i < S; i++)
        ol_md5_final(h[i], d);
    double t = now() - t0;
    ol_md5_set_free(set);
    return (double)S * LEN / t / 1e9;
}

static double openssl_alone(const uint8_t *src, unsigned S)
{
    double t0 = now();
    for (unsigned i = 0; i < S; i++) {
        uint8_t d[16];
        MD5(src + (size_t)i * LEN, LEN, d);
    }
    return (double)S * LEN / (now() - t0) / 1e9;
}

/* One stream: its MD5 and the SHA-256 of each CHUNK of it, in PIECEs. */
enum { CHUNK = 65536 };
static double md5_and_chunks(const uint8_t *src, int one_pass)
{
    struct ol_md5 m = {0};
    SHA256_CTX c;
    MD5_CTX mc;
    uint8_t d[32];
    double t0 = now();
    if (one_pass)
        ol_md5_init(&m);
    else
        MD5_Init(&mc);
    for (size_t at = 0; at < LEN; at += PIECE) {
        if (at % CHUNK == 0)
            ol_sha256_init(&c);
        if (one_pass) {
            ol_md5_sha256_update(&m, &c, src + at, PIECE);
        } else {
            MD5_Update(&mc, src + at, PIECE);
            ol_sha256_update(&c, src + at, PIECE);
        }
        if ((at + PIECE) % CHUNK == 0)
            ol_sha256_final(&c, d);
    }
    if (one_pass)
        ol_md5_final(&m, d);
    else
        MD5_Final(d, &mc);
    return (double)LEN / (now() - t0) / 1e9;
}

int main(int argc, char **argv)
{
    int runs = argc > 1 ? atoi(argv[1]) : 3;
    uint8_t *src = malloc((size_t)MAXS * LEN);
    if (!src)
        return 1;
    for (size_t i = 0; i < (size_t)MAXS * LEN; i++)
        src[i] = (uint8_t)(i * 2654435761u >> 13);
    static const struct { const char *name; unsigned width; } k[] = {
        {"openssl", 1}, {"x2", 2}, {"x3", 3}, {"v8-avx2", 8}, {"v8-avx512", 8},
        {"v16-avx512", 16}, {"auto", 0},
    };
    static const unsigned streams[] = {1, 2, 3, 4, 8, 16};
    for (size_t a = 0; a < sizeof k / sizeof k[0]; a++)
        for (size_t b = 0; b < sizeof streams / sizeof streams[0]; b++) {
            unsigned S = streams[b];
            if ((k[a].width == 1 && S != 1) || (k[a].width > 1 && S < k[a].width && k[a].width < 8) ||
                (k[a].width == 0 && S == 1) || (k[a].width >= 8 && S < 2))
                continue;
            double best = 0;
            for (int r = 0; r < runs; r++) {
                double g = k[a].width == 1 ? openssl_alone(src, S)
                           : through_set(src, k[a].width ? k[a].name : NULL, S);
                if (g > best)
                    best = g;
            }
            if (best > 0)
                printf("{\"kernel\":\"%s\",\"streams\":%u,\"gbps\":%.2f}\n", k[a].name, S, best);
        }
    for (int one_pass = 0; one_pass < 2; one_pass++) {
        if (one_pass && !ol_md5sha_fast())
            break;
        double best = 0;
        for (int r = 0; r < runs; r++) {
            double g = md5_and_chunks(src, one_pass);
            if (g > best)
                best = g;
        }
        printf("{\"kernel\":\"%s\",\"streams\":1,\"gbps\":%.2f}\n",
               one_pass ? "one-pass" : "openssl-md5+sha256", best);
    }
    free(src);
    return 0;
}
