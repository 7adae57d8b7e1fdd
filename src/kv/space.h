/*
 * space.h - room for a new value in a size-class allocator, made by
 * evicting: shared by the RAM shard (slab pages) and the disk tier (file
 * pages), so both tiers free space by the same rule and the same policy.
 *
 * Owns: the rule. A free slot of the class if there is one; else a victim
 * of the class's own policy, while the class holds at least its fair share
 * of pages (pages / classes in use); else a whole page taken back from the
 * class holding the most pages (every evictable entry on the victim's page
 * goes, so the page frees).
 *
 * Must not: know what an entry is. The caller's ops say whether an id is
 * pinned and drop an evicted entry (it is already out of its policy).
 * Policy ids are slot ids minus the allocator's first slot id.
 */
#ifndef OL_KV_SPACE_H
#define OL_KV_SPACE_H

#include <stdint.h>

#include "kv/evict.h"
#include "kv/slab.h"

struct ol_kv_space_ops {
    ol_evict_pinned_fn pinned;             /* true: id must stay */
    void (*drop)(void *ctx, uint32_t id);  /* free evicted entry id and its slot */
    void *ctx;
};

/* A slot id of class c, evicting as above; -ENOSPC when nothing can go. */
int64_t ol_kv_space_slot(struct ol_kv_alloc *a, struct ol_evict *ev, int c,
                         const struct ol_kv_space_ops *ops);

#endif
