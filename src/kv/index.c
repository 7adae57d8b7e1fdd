/*
 * index.c - see index.h. Linear probing over 16-byte cells (4 per cache
 * line); deletion shifts later cells of the same run back (Knuth's
 * algorithm R), so probe lengths never grow with churn.
 */
#include "kv/index.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

static inline uint64_t ol_ix_lo(struct ol_kv_hash h) { return h.lo ? h.lo : 1; }

int ol_kv_index_init(struct ol_kv_index *ix, uint32_t max_ids)
{
    memset(ix, 0, sizeof *ix);
    if (max_ids == 0 || max_ids > (1u << 31))
        return -EINVAL;
    uint64_t want = (uint64_t)max_ids * 8 / 7 + 1, cells = 16;
    while (cells < want)
        cells <<= 1;
    size_t cbytes = cells * sizeof(struct ol_kv_index_cell);
    void *c = mmap(NULL, cbytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (c == MAP_FAILED)
        return -ENOMEM;
    ix->hi = calloc(max_ids, sizeof *ix->hi);
    if (!ix->hi) {
        munmap(c, cbytes);
        return -ENOMEM;
    }
    ix->cells = c;
    ix->mask = cells - 1;
    ix->max_ids = max_ids;
    return 0;
}

void ol_kv_index_exit(struct ol_kv_index *ix)
{
    if (ix->cells)
        munmap(ix->cells, (ix->mask + 1) * sizeof(struct ol_kv_index_cell));
    free(ix->hi);
    memset(ix, 0, sizeof *ix);
}

/* Cell index holding h, or -1. */
static inline int64_t ol_ix_slot_of(const struct ol_kv_index *ix, struct ol_kv_hash h)
{
    uint64_t lo = ol_ix_lo(h);
    for (uint64_t i = lo & ix->mask;; i = (i + 1) & ix->mask) {
        const struct ol_kv_index_cell *c = &ix->cells[i];
        if (c->lo == 0)
            return -1;
        if (c->lo == lo && ix->hi[c->id] == h.hi)
            return (int64_t)i;
    }
}

int64_t ol_kv_index_find(const struct ol_kv_index *ix, struct ol_kv_hash h)
{
    int64_t i = ol_ix_slot_of(ix, h);
    return i < 0 ? -1 : (int64_t)ix->cells[i].id;
}

void ol_kv_index_find_batch(const struct ol_kv_index *ix, const struct ol_kv_hash *hs,
                            size_t n, int64_t *ids)
{
    enum { STRIDE = 16 };
    for (size_t base = 0; base < n; base += STRIDE) {
        size_t end = base + STRIDE < n ? base + STRIDE : n;
        for (size_t i = base; i < end; i++)
            __builtin_prefetch(&ix->cells[ol_ix_lo(hs[i]) & ix->mask]);
        for (size_t i = base; i < end; i++)
            ids[i] = ol_kv_index_find(ix, hs[i]);
    }
}

int64_t ol_kv_index_find_ref(const struct ol_kv_index *ix, struct ol_kv_hash h)
{
    uint64_t lo = ol_ix_lo(h);
    for (uint64_t k = 0; k <= ix->mask; k++) {
        const struct ol_kv_index_cell *c = &ix->cells[(( lo & ix->mask) + k) & ix->mask];
        if (c->lo == 0)
            break;
        if (c->lo == lo && ix->hi[c->id] == h.hi)
            return c->id;
    }
    return -1;
}

int ol_kv_index_insert(struct ol_kv_index *ix, struct ol_kv_hash h, uint32_t id)
{
    uint64_t lo = ol_ix_lo(h);
    uint64_t i = lo & ix->mask;
    for (;; i = (i + 1) & ix->mask) {
        struct ol_kv_index_cell *c = &ix->cells[i];
        if (c->lo == 0)
            break;
        if (c->lo == lo && ix->hi[c->id] == h.hi)
            return -EEXIST;
    }
    if (ix->count >= ix->max_ids || id >= ix->max_ids)
        return -ENOSPC;
    ix->cells[i].lo = lo;
    ix->cells[i].id = id;
    ix->hi[id] = h.hi;
    ix->count++;
    return 0;
}

int64_t ol_kv_index_remove(struct ol_kv_index *ix, struct ol_kv_hash h)
{
    int64_t at = ol_ix_slot_of(ix, h);
    if (at < 0)
        return -1;
    uint32_t id = ix->cells[at].id;
    uint64_t i = (uint64_t)at;
    /* Shift back every later cell of the run that may legally sit at i. */
    for (uint64_t j = (i + 1) & ix->mask; ix->cells[j].lo; j = (j + 1) & ix->mask) {
        uint64_t home = ix->cells[j].lo & ix->mask;
        if (((j - home) & ix->mask) >= ((j - i) & ix->mask)) {
            ix->cells[i] = ix->cells[j];
            i = j;
        }
    }
    ix->cells[i].lo = 0;
    ix->count--;
    return id;
}
