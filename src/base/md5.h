/*
 * md5.h - MD5 (the S3 ETag) of many streams at once.
 *
 * One core receives many uploads at the same time, and OpenSSL hashes one
 * stream at a time (0.7 - 0.85 GB/s): MD5 is a serial chain, each step
 * waits for the one before, and most of the core idles. A set (struct
 * ol_md5_set, one per core) lends each stream a lane with a staging ring
 * (OL_MD5_STAGE); when a lane's ring is full it hashes one receive
 * buffer's worth, and the stream's end all it has, together with the
 * staged blocks of up to 15 other lanes: chains interleaved in scalar code
 * for two or three lanes, one lane per vector element for up to 8 or 16
 * (md5.c; which kernel each group takes is timed when the set is made).
 * Measured through a set (`bash bench/store/run_md5.sh`): 1.1 GB/s for
 * two streams, 2.2 for four, 3.6 for eight and 4.2 for sixteen on an
 * AVX-512 core where OpenSSL does 0.7. A lane with no company goes
 * through OpenSSL's MD5.
 *
 * Uploads often arrive one after the other (the kernel hands a core one
 * connection's bytes in a run), so a stream that ends finds no company for
 * its last staged bytes. ol_md5_end lets it wait for some: an ended lane
 * with blocks left is "waiting", and every update of another lane hashes
 * that lane's blocks together with the waiting ones at once; the caller
 * asks ol_md5_ready and takes the digest with ol_md5_final when it is (or
 * when it gives up waiting: ol_md5_final hashes what is left alone).
 *
 * Owns: the lanes' states and staging rings, the kernels and their
 * timing, the choice of lanes and kernel to hash together. OpenSSL does the rest: the single-stream blocks
 * and the padding at the end (MD5_Update / MD5_Final).
 *
 * Must not: allocate or lock after ol_md5_set_new (a set belongs to one
 * loop thread), or keep a pointer to the caller's bytes (they are copied).
 *
 *   struct ol_md5_set *set = ol_md5_set_new(32);
 *   struct ol_md5 *h = ol_md5_get(set);     // NULL: all lent, use a lone one
 *   ol_md5_init(h); ol_md5_update(h, p, n); ...; ol_md5_final(h, etag);
 *   ol_md5_put(h);
 *
 * A struct ol_md5 that belongs to no set (ol_md5_init on a zeroed one) is a
 * plain one-stream MD5.
 */
#ifndef OL_BASE_MD5_H
#define OL_BASE_MD5_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <openssl/sha.h>

/* Staging bytes per lane of a set (a multiple of 64): 32 receive buffers
 * of 16 KiB, so that the lanes it is hashed with have blocks staged too. */
#define OL_MD5_STAGE 524288u

struct ol_md5_set;

struct ol_md5 {
    uint32_t h[4];             /* state after `done` bytes */
    uint64_t done;             /* bytes hashed into h (a multiple of 64) */
    struct ol_md5_set *set;    /* NULL: a lone stream, no staging */
    uint8_t *stage;            /* set only: OL_MD5_STAGE bytes */
    uint32_t off, len;         /* a ring: len bytes from stage[off] wait to be
                                  hashed (off is a multiple of 64) */
    uint32_t tail;             /* lone stream: bytes in buf */
    int32_t pend;              /* index in the set's pending list, or -1 */
    bool lent, ended;          /* set: lent by ol_md5_get; ol_md5_end called */
    SHA256_CTX *sha;           /* ol_md5_with_sha256: fed the same bytes */
    struct ol_md5 *next_free;  /* set: the free list */
    uint8_t buf[64];           /* lone stream: a partial block */
};

/* A set of `lanes` streams, each with OL_MD5_STAGE bytes of staging
 * (address space; pages are touched when a lane first holds that much).
 * Returns NULL when out of memory or lanes is 0. */
struct ol_md5_set *ol_md5_set_new(unsigned lanes);
void ol_md5_set_free(struct ol_md5_set *s);
/* A free lane of the set (init it before use), or NULL when all are lent. */
struct ol_md5 *ol_md5_get(struct ol_md5_set *s);
/* Whether any lane is lent (some upload on this core hashes through the
 * set). */
bool ol_md5_set_busy(const struct ol_md5_set *s);
/* Gives a lane back (what it staged is dropped); a lone stream is dropped. */
void ol_md5_put(struct ol_md5 *h);
/* Tests and benchmarks: hash groups only with one kernel, not the fastest
 * for each group: "x2", "x3" (interleaved scalar), "v8-avx2",
 * "v8-avx512", "v16-avx512" (vector). False when this CPU (or a set of
 * fewer than 9 lanes, for v16) has no such kernel. */
bool ol_md5_set_only(struct ol_md5_set *s, const char *kernel);
/* Lanes with SHA-256 companions (ol_md5_with_sha256), two or more in a
 * group: through base/md5sha.h's four-lane kernel, MD5s and SHA-256s
 * interleaved (the set's own choice when made: whichever was faster
 * here), or through the MD5 kernels with the SHA-256s in pairs after.
 * on < 0 asks; tests and benchmarks force either. False when asked for
 * the kernel on a CPU without it; else whether the set now uses it. */
bool ol_md5_set_x4(struct ol_md5_set *s, int on);
/* Blocks of staged bytes hashed so far with company (interleaved) and
 * alone (the last partial block of each stream is not counted); any
 * thread may read them (relaxed loads; a torn value is impossible). */
void ol_md5_set_stats(const struct ol_md5_set *s, uint64_t *multi, uint64_t *single);

/* Starts a stream (a lane of a set, or a lone one: set == NULL). Drops
 * whatever the lane still held, and its SHA-256 companion. */
void ol_md5_init(struct ol_md5 *h);
/* Right after ol_md5_init: the stream's bytes also go to the SHA-256 c (a
 * signed payload's, which hashes the same bytes from the same start). A
 * lane of a set hashes c from its staging as it hashes its MD5 there,
 * two such lanes of a group at once (base/sha256.h: ol_sha256_update2),
 * so the lanes that upload side by side share the SHA-NI unit as they
 * share the MD5 kernels; c is whole when ol_md5_final returns. A lone
 * stream feeds c as it is updated (base/md5sha.h's one pass is the fast
 * way for those, and takes no companion). c must be at a block's edge
 * (just initialised) and outlive the stream. */
void ol_md5_with_sha256(struct ol_md5 *h, SHA256_CTX *c);
void ol_md5_update(struct ol_md5 *h, const void *p, size_t n);
/* Lane h of a set (lent, not yet used) takes over the lone stream `from`:
 * its state and its partial block; `from` is left empty. For an upload
 * hashed alone that company has joined since (s3/body.h). With a SHA-256
 * companion (ol_md5_with_sha256 after this), only at a block's edge
 * (from's partial block empty), where the companion stands too. */
void ol_md5_take(struct ol_md5 *h, struct ol_md5 *from);
/* The stream has no more bytes: its staged blocks are hashed with any
 * company there is now. True when nothing but the last partial block is
 * left (ol_md5_final is quick); false when blocks wait for company (see
 * the top). A lone stream is always ready. */
bool ol_md5_end(struct ol_md5 *h);
/* An ended stream whose blocks are all hashed (or a lone one). */
bool ol_md5_ready(const struct ol_md5 *h);
/* Whether waiting can pay: another lane of h's set is lent and has not
 * ended (its bytes are still to come). */
bool ol_md5_company_coming(const struct ol_md5 *h);
/* The digest; the lane is idle after (init it for the next stream). */
void ol_md5_final(struct ol_md5 *h, uint8_t out[16]);
/* Abandons a stream without a digest (a lane keeps nothing staged). */
void ol_md5_drop(struct ol_md5 *h);

#endif
