/*
 * space.c - see space.h.
 */
#include "kv/space.h"

#include <errno.h>

#define OL_MAX_SPACE_TRIES 64

/* Evicts every unpinned live entry of class k on the page of policy id. */
static void ol_reclaim_page(struct ol_kv_alloc *a, struct ol_evict *ev, int k, uint32_t id,
                            const struct ol_kv_space_ops *ops)
{
    uint32_t base = a->first_page * OL_KV_SLOTS_PER_PAGE;
    uint32_t first = id / OL_KV_SLOTS_PER_PAGE * OL_KV_SLOTS_PER_PAGE;
    for (uint32_t i = first; i < first + OL_KV_SLOTS_PER_PAGE; i++) {
        if (ol_evict_contains(&ev[k], i) && !ops->pinned(ops->ctx, i) &&
            ol_kv_alloc_class_of(a, base + i) == k) {
            ol_evict_remove(&ev[k], i);
            ops->drop(ops->ctx, i);
        }
    }
}

int64_t ol_kv_space_slot(struct ol_kv_alloc *a, struct ol_evict *ev, int c,
                         const struct ol_kv_space_ops *ops)
{
    for (int tries = 0; tries < OL_MAX_SPACE_TRIES; tries++) {
        int64_t s = ol_kv_alloc_slot(a, c);
        if (s >= 0)
            return s;
        /* Fair share of pages among the classes in use. */
        uint32_t used_classes = 0, big = 0;
        int bigk = -1;
        for (int k = 0; k < OL_KV_MAX_CLASSES; k++) {
            if (!a->cls[k].pages)
                continue;
            used_classes++;
            if (k != c && a->cls[k].pages > big && ev[k].capacity && ol_evict_count(&ev[k])) {
                big = a->cls[k].pages;
                bigk = k;
            }
        }
        uint32_t wanting = used_classes + (a->cls[c].pages ? 0 : 1);
        uint32_t fair = a->npages / wanting;
        int64_t v = -1;
        if (a->cls[c].pages >= fair || bigk < 0) {
            if (ev[c].capacity && ol_evict_count(&ev[c]))
                v = ol_evict_victim(&ev[c], ops->pinned, ops->ctx);
            if (v >= 0) {
                ops->drop(ops->ctx, (uint32_t)v);
                continue;
            }
        }
        if (bigk < 0)
            return -ENOSPC;
        v = ol_evict_victim(&ev[bigk], ops->pinned, ops->ctx);
        if (v < 0)
            return -ENOSPC;
        ops->drop(ops->ctx, (uint32_t)v);
        ol_reclaim_page(a, ev, bigk, (uint32_t)v, ops);
    }
    return -ENOSPC;
}
