/*
 * pool.h - fixed-size object pools, one per core, sized at start-up.
 *
 * Owns: a single mmap(MAP_NORESERVE) region cut into `count` objects of
 * `obj_size` bytes, and a free list threaded through the free objects.
 * Pages are touched only when an object is first handed out, so a pool sized
 * for the worst case costs memory only for what is really used.
 * Must not: lock (a pool belongs to one loop thread) or grow: when empty,
 * ol_pool_get() returns NULL and the caller answers 503 / a retryable error.
 */
#ifndef OL_BASE_POOL_H
#define OL_BASE_POOL_H

#include <stddef.h>
#include <stdint.h>

#include "base/assert.h"

struct ol_pool {
    char *mem;
    size_t obj_size;   /* rounded up to 16 bytes */
    uint32_t count;    /* capacity */
    uint32_t fresh;    /* objects [fresh, count) were never handed out */
    uint32_t in_use;
    uint32_t high;     /* high-water mark of in_use */
    void *free;        /* free list of returned objects */
};

/* Reserves address space for count objects. Returns 0 or -ENOMEM / -EINVAL. */
int ol_pool_init(struct ol_pool *p, size_t obj_size, uint32_t count);
void ol_pool_exit(struct ol_pool *p);

/* Returns an object (contents undefined), or NULL when all are in use. */
static inline void *ol_pool_get(struct ol_pool *p)
{
    void *o = p->free;
    if (o) {
        p->free = *(void **)o;
    } else if (p->fresh < p->count) {
        o = p->mem + (size_t)p->fresh++ * p->obj_size;
    } else {
        return NULL;
    }
    if (++p->in_use > p->high)
        p->high = p->in_use;
    return o;
}

/* Returns o (from this pool) to it. */
static inline void ol_pool_put(struct ol_pool *p, void *o)
{
    OL_ASSERT(p->in_use > 0 && (char *)o >= p->mem &&
              (size_t)((char *)o - p->mem) < (size_t)p->fresh * p->obj_size &&
              (size_t)((char *)o - p->mem) % p->obj_size == 0);
    *(void **)o = p->free;
    p->free = o;
    p->in_use--;
}

#endif
