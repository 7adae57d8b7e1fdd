/*
 * index_int.h - what index.c (the tree, cursor and listing) and
 * index_file.c (log, snapshot, open, flush, checkpoint) share: the handle's
 * body, the tree's node types, and the tree calls that do not log.
 *
 * Must not: be included outside src/store/index*.c.
 */
#ifndef OL_STORE_INDEX_INT_H
#define OL_STORE_INDEX_INT_H

#include "store/index.h"

#include <stdint.h>
#include <string.h>

/*
 * Leaf: one allocation for the struct, one for its area. The area is
 *   [0, plen)            the prefix shared by every key of the leaf
 *   [plen, heap)         entries, in insertion order: u16 rest length R,
 *                        R bytes (the key after the prefix), 52-byte record
 *   [heap, cap - 2n)     free
 *   [cap - 2n, cap)      n u16 slots: entry offsets in ascending key order
 * cap is a multiple of OL_IX_AREA_STEP, at most OL_IX_LEAF_MAX.
 */
#define OL_IX_LEAF_MAX  4096u
#define OL_IX_AREA_STEP 256u
#define OL_IX_FAN       64u          /* children of an inner node */
#define OL_IX_FAN_MIN   (OL_IX_FAN / 4)
#define OL_IX_MAX_H     24u          /* inner levels; 2 * 16^22 leaves */

struct ol_ix_leaf {
    struct ol_ix_leaf *prev, *next;
    uint8_t *area;
    uint16_t n, plen, heap, cap;
};

/* A separator: keys of the subtree on its right are >= it. */
struct ol_ix_sep {
    uint16_t len;
    uint8_t b[];
};

/* sep[i] lies between child[i] and child[i + 1]. */
struct ol_ix_inner {
    uint32_t n;                      /* children, 1..OL_IX_FAN */
    struct ol_ix_sep *sep[OL_IX_FAN - 1];
    void *child[OL_IX_FAN];
};

struct ol_index {
    /* tree */
    void *root;                      /* a leaf when height == 0 */
    unsigned height;
    struct ol_ix_leaf *first, *last;
    uint64_t nkeys, nleaves, ninner, mem;
    uint64_t version;                /* bumped by every change: cursors go stale */
    struct ol_ix_inner *spare;       /* reserved inner nodes, linked by child[0] */
    unsigned nspare;
    int failed;                      /* sticky -errno, 0 while healthy */

    /* files; dirfd < 0 for a memory-only index */
    int dirfd, logfd;
    uint64_t id, gen, seq;           /* index id, live log generation, next batch seq */
    uint64_t log_size;               /* bytes of the live log that are durable */
    uint8_t *batch;                  /* frames not yet flushed */
    size_t batch_len, batch_cap;
    uint64_t batch_frames;
};

/* ---- little-endian bytes ---------------------------------------------------------- */

static inline void ol_ix_put16(uint8_t *p, unsigned v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}
static inline unsigned ol_ix_get16(const uint8_t *p) { return (unsigned)p[0] | (unsigned)p[1] << 8; }
static inline void ol_ix_put32(uint8_t *p, uint32_t v)
{
    for (unsigned i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}
static inline uint32_t ol_ix_get32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline void ol_ix_put64(uint8_t *p, uint64_t v)
{
    ol_ix_put32(p, (uint32_t)v);
    ol_ix_put32(p + 4, (uint32_t)(v >> 32));
}
static inline uint64_t ol_ix_get64(const uint8_t *p)
{
    return (uint64_t)ol_ix_get32(p) | (uint64_t)ol_ix_get32(p + 4) << 32;
}

/* The 52-byte record of the file formats (and of the leaves). */
static inline void ol_ix_rec_encode(const struct ol_index_rec *r, uint8_t *p)
{
    ol_ix_put64(p, r->size);
    ol_ix_put64(p + 8, r->mtime_ns);
    memcpy(p + 16, r->etag, 16);
    ol_ix_put16(p + 32, r->etag_parts);
    p[34] = r->storage_class;
    p[35] = r->flags;
    memcpy(p + 36, r->version_id, 16);
}
static inline void ol_ix_rec_decode(const uint8_t *p, struct ol_index_rec *r)
{
    r->size = ol_ix_get64(p);
    r->mtime_ns = ol_ix_get64(p + 8);
    memcpy(r->etag, p + 16, 16);
    r->etag_parts = (uint16_t)ol_ix_get16(p + 32);
    r->storage_class = p[34];
    r->flags = p[35];
    memcpy(r->version_id, p + 36, 16);
}

/* ---- tree (index.c): no logging, no failed-handle checks ---------------------- */

/* An empty tree: one empty root leaf. 0 or -ENOMEM. */
int ol_ix_tree_init(struct ol_index *idx);
/* Frees every node (and the spare list). */
void ol_ix_tree_free(struct ol_index *idx);
/* Inserts or replaces; rec is 52 encoded bytes. 0 inserted, 1 replaced,
 * -ENOMEM (the tree is unchanged). */
int ol_ix_tree_put(struct ol_index *idx, const uint8_t *key, size_t klen, const uint8_t *rec);
/* 0 removed, -ENOENT. Never fails otherwise. */
int ol_ix_tree_remove(struct ol_index *idx, const uint8_t *key, size_t klen);
/* Encoded record of key, or NULL. */
const uint8_t *ol_ix_tree_get(const struct ol_index *idx, const uint8_t *key, size_t klen);

#endif
