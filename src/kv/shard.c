/*
 * shard.c - see shard.h.
 *
 * Entries are indexed by local id = slot id - id_base, so the index, the
 * eviction policies and the entry array share one dense id space. Space for
 * a new value: kv/space.h (the same rule the disk tier uses).
 *
 * Disk tier tags: an I/O for entry lid at generation gen carries
 * lid | (low 32 bits of gen) << 32; the entry is held (wpin, or the LOADING
 * pin) until its completion, so the slot cannot change hands meanwhile.
 */
#include "kv/shard.h"

#include "base/assert.h"
#include "kv/space.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define OL_NONE UINT32_MAX

enum { OL_ENT_FREE = 0, OL_ENT_RESERVED, OL_ENT_COMMITTED, OL_ENT_DOOMED, OL_ENT_LOADING };

struct ol_kv_ent {
    uint64_t gen;          /* even; bumped by 2 each time the slot gets a key */
    uint64_t value_len, value_sum, deadline_ms;
    struct ol_kv_hash h;
    uint32_t ns, hint;
    uint32_t rnext, rprev; /* reservation list, oldest first */
    uint32_t pins;
    int16_t owner;         /* reserving session */
    uint8_t state, cls;
    uint8_t on_disk;       /* the disk tier holds this value */
    uint8_t wpin;          /* its write behind is in flight */
    uint16_t nsi;          /* its namespace's ol_kv_nsu */
    uint32_t nnext, nprev; /* namespace list of committed entries, oldest first */
};

/* A session's pins: open addressing over slot ids (key + 1; 0 = empty). */
struct ol_kv_pin { uint32_t key, count; };
struct ol_kv_session {
    uint32_t mask, used;
    struct ol_kv_pin pins[];
};

static inline uint32_t ol_lid(const struct ol_kv_shard *sh, uint32_t slot) { return slot - sh->id_base; }
static inline uint32_t ol_slot(const struct ol_kv_shard *sh, uint32_t lid) { return lid + sh->id_base; }

static bool ol_lid_ok(const struct ol_kv_shard *sh, uint32_t slot)
{
    return slot >= sh->id_base && slot - sh->id_base < sh->nents;
}

/* ---- set-up ----------------------------------------------------------------- */

int ol_kv_shard_init(struct ol_kv_shard *sh, const struct ol_kv_slab *slab, uint32_t first_page,
                     uint32_t npages, int evict_kind, uint32_t ttl_ms)
{
    memset(sh, 0, sizeof *sh);
    int rc;
    sh->slab = slab;
    sh->evict_kind = evict_kind;
    sh->ttl_ms = ttl_ms;
    sh->id_base = first_page * OL_KV_SLOTS_PER_PAGE;
    sh->nents = npages * OL_KV_SLOTS_PER_PAGE;
    sh->res_head = sh->res_tail = OL_NONE;
    for (int i = 0; i <= OL_KV_SHARD_NS; i++)
        sh->nsu[i].head = sh->nsu[i].tail = OL_NONE;
    sh->nsu[OL_KV_SHARD_NS].used = 1;
    if ((rc = ol_kv_alloc_init(&sh->alloc, slab->npages, first_page, npages)) < 0)
        return rc;
    if ((rc = ol_kv_index_init(&sh->index, sh->nents)) < 0)
        goto fail;
    sh->ents = calloc(sh->nents, sizeof *sh->ents);
    if (!sh->ents) {
        rc = -ENOMEM;
        goto fail;
    }
    sh->st.bytes_capacity = (uint64_t)npages * OL_KV_PAGE;
    return 0;
fail:
    ol_kv_shard_exit(sh);
    return rc;
}

void ol_kv_shard_exit(struct ol_kv_shard *sh)
{
    for (int i = 0; i < OL_KV_MAX_SESSIONS; i++)
        free(sh->sessions[i]);
    for (int c = 0; c < OL_KV_MAX_CLASSES; c++)
        ol_evict_exit(&sh->evict[c]);
    free(sh->ents);
    free(sh->wq);
    ol_kv_index_exit(&sh->index);
    ol_kv_alloc_exit(&sh->alloc);
    memset(sh, 0, sizeof *sh);
}

/* ---- reservations list ---------------------------------------------------------- */

static void ol_res_unlink(struct ol_kv_shard *sh, uint32_t lid)
{
    struct ol_kv_ent *e = &sh->ents[lid];
    if (e->rprev != OL_NONE)
        sh->ents[e->rprev].rnext = e->rnext;
    else
        sh->res_head = e->rnext;
    if (e->rnext != OL_NONE)
        sh->ents[e->rnext].rprev = e->rprev;
    else
        sh->res_tail = e->rprev;
}

static void ol_res_append(struct ol_kv_shard *sh, uint32_t lid)
{
    struct ol_kv_ent *e = &sh->ents[lid];
    e->rnext = OL_NONE;
    e->rprev = sh->res_tail;
    if (sh->res_tail != OL_NONE)
        sh->ents[sh->res_tail].rnext = lid;
    else
        sh->res_head = lid;
    sh->res_tail = lid;
}

/* ---- namespaces ------------------------------------------------------------------------ */

/* The cell of ns in the open-addressed table, or the empty cell it would take. */
static uint32_t ol_nsu_cell(const struct ol_kv_shard *sh, uint32_t ns)
{
    const uint32_t mask = OL_KV_SHARD_NS - 1;
    uint32_t i = (ns * 2654435761u) & mask;
    while (sh->nsu[i].used && sh->nsu[i].ns != ns)
        i = (i + 1) & mask;
    return i;
}

static bool ol_nsu_full(const struct ol_kv_shard *sh)
{
    return sh->nsu_count >= OL_KV_SHARD_NS / 4 * 3;
}

/* The usage record of ns (created on first use; the shared last one when
 * the table is three quarters full). */
static uint32_t ol_nsi(struct ol_kv_shard *sh, uint32_t ns)
{
    uint32_t i = ol_nsu_cell(sh, ns);
    if (sh->nsu[i].used)
        return i;
    if (ol_nsu_full(sh))
        return OL_KV_SHARD_NS;
    sh->nsu[i].used = 1;
    sh->nsu[i].ns = ns;
    sh->nsu_count++;
    return i;
}

static const struct ol_kv_nsu *ol_nsu_find(const struct ol_kv_shard *sh, uint32_t ns)
{
    uint32_t i = ol_nsu_cell(sh, ns);
    if (sh->nsu[i].used)
        return &sh->nsu[i];
    return ol_nsu_full(sh) ? &sh->nsu[OL_KV_SHARD_NS] : NULL;
}

/* Appends committed entry lid at the young end of its namespace's list. */
static void ol_ns_link(struct ol_kv_shard *sh, uint32_t lid)
{
    struct ol_kv_ent *e = &sh->ents[lid];
    struct ol_kv_nsu *u = &sh->nsu[e->nsi];
    e->nnext = OL_NONE;
    e->nprev = u->tail;
    if (u->tail != OL_NONE)
        sh->ents[u->tail].nnext = lid;
    else
        u->head = lid;
    u->tail = lid;
    u->entries++;
    u->value_bytes += e->value_len;
}

static void ol_ns_unlink(struct ol_kv_shard *sh, uint32_t lid)
{
    struct ol_kv_ent *e = &sh->ents[lid];
    struct ol_kv_nsu *u = &sh->nsu[e->nsi];
    OL_ASSERT(u->entries > 0 && u->value_bytes >= e->value_len);
    if (e->nprev != OL_NONE)
        sh->ents[e->nprev].nnext = e->nnext;
    else
        u->head = e->nnext;
    if (e->nnext != OL_NONE)
        sh->ents[e->nnext].nprev = e->nprev;
    else
        u->tail = e->nprev;
    u->entries--;
    u->value_bytes -= e->value_len;
}

void ol_kv_shard_set_quota(struct ol_kv_shard *sh, uint64_t bytes) { sh->quota = bytes; }

void ol_kv_shard_ns_usage(const struct ol_kv_shard *sh, uint32_t ns, uint64_t *entries,
                          uint64_t *value_bytes)
{
    const struct ol_kv_nsu *u = ol_nsu_find(sh, ns);
    *entries = u ? u->entries : 0;
    *value_bytes = u ? u->value_bytes : 0;
}

/* ---- freeing ----------------------------------------------------------------------- */

static void ol_ent_free(struct ol_kv_shard *sh, uint32_t lid)
{
    struct ol_kv_ent *e = &sh->ents[lid];
    struct ol_kv_class *k = &sh->alloc.cls[e->cls];
    /* a pinned slot is never reused (shard.h); the doomed ones come here at 0 */
    OL_ASSERT(e->state != OL_ENT_FREE && e->state <= OL_ENT_LOADING && e->pins == 0);
    OL_ASSERT(sh->st.bytes_used >= k->slot_size && sh->nsu[e->nsi].bytes >= k->slot_size);
    ol_kv_slab_hdr_retire(sh->slab, ol_slot(sh, lid));
    ol_kv_alloc_free(&sh->alloc, e->cls, ol_slot(sh, lid));
    sh->st.bytes_used -= k->slot_size;
    sh->nsu[e->nsi].bytes -= k->slot_size;
    e->state = OL_ENT_FREE;
    e->pins = 0;
    e->wpin = 0;
    e->on_disk = 0;
}

/* Takes a committed entry out of view (index and policy). */
static void ol_ent_unpublish(struct ol_kv_shard *sh, uint32_t lid)
{
    struct ol_kv_ent *e = &sh->ents[lid];
    OL_ASSERT(e->state == OL_ENT_COMMITTED && sh->st.entries > 0);
    ol_kv_index_remove(&sh->index, e->h);
    if (ol_evict_contains(&sh->evict[e->cls], lid))
        ol_evict_remove(&sh->evict[e->cls], lid);
    ol_ns_unlink(sh, lid);
    sh->st.entries--;
    sh->st.value_bytes -= e->value_len;
}

static void ol_res_drop(struct ol_kv_shard *sh, uint32_t lid)
{
    OL_ASSERT(sh->ents[lid].state == OL_ENT_RESERVED && sh->st.reserved > 0);
    ol_res_unlink(sh, lid);
    ol_kv_index_remove(&sh->index, sh->ents[lid].h);
    sh->st.reserved--;
    ol_ent_free(sh, lid);
}

/* ---- space -------------------------------------------------------------------------- */

static bool ol_pinned(void *ctx, uint32_t lid)
{
    const struct ol_kv_shard *sh = ctx;
    return sh->ents[lid].pins != 0 || sh->ents[lid].wpin;
}

/* Space callback: evicts committed entry lid (already out of its policy). */
static void ol_evict_ent(void *ctx, uint32_t lid)
{
    struct ol_kv_shard *sh = ctx;
    struct ol_kv_ent *e = &sh->ents[lid];
    /* only committed entries are in a policy, and pinned ones are never evicted */
    OL_ASSERT(e->state == OL_ENT_COMMITTED && !e->pins && !e->wpin && sh->st.entries > 0);
    ol_kv_index_remove(&sh->index, e->h);
    ol_ns_unlink(sh, lid);
    sh->st.entries--;
    sh->st.value_bytes -= e->value_len;
    sh->st.evictions++;
    if (sh->disk && !e->on_disk)
        sh->st.writebehind_skipped++;
    ol_ent_free(sh, lid);
}

static int64_t ol_get_slot(struct ol_kv_shard *sh, int c)
{
    struct ol_kv_space_ops ops = {.pinned = ol_pinned, .drop = ol_evict_ent, .ctx = sh};
    return ol_kv_space_slot(&sh->alloc, sh->evict, c, &ops);
}

/* Makes room for `need` more bytes of namespace u under the quota by
 * evicting its own oldest committed entries. False if it cannot. */
static bool ol_quota_room(struct ol_kv_shard *sh, struct ol_kv_nsu *u, uint64_t need)
{
    if (!sh->quota)
        return true;
    for (uint32_t lid = u->head, next; u->bytes + need > sh->quota && lid != OL_NONE; lid = next) {
        next = sh->ents[lid].nnext;
        if (ol_pinned(sh, lid))
            continue;
        ol_evict_remove(&sh->evict[sh->ents[lid].cls], lid);
        ol_evict_ent(sh, lid);
    }
    return u->bytes + need <= sh->quota;
}

/* ---- sessions ----------------------------------------------------------------------- */

int ol_kv_shard_session_open(struct ol_kv_shard *sh)
{
    for (int i = 0; i < OL_KV_MAX_SESSIONS; i++) {
        if (sh->sessions[i])
            continue;
        uint32_t cap = 2 * OL_KV_SESSION_PINS;
        struct ol_kv_session *s = calloc(1, sizeof *s + cap * sizeof(struct ol_kv_pin));
        if (!s)
            return -ENOMEM;
        s->mask = cap - 1;
        sh->sessions[i] = s;
        return i;
    }
    return -EBUSY;
}

static struct ol_kv_pin *ol_pin_find(struct ol_kv_session *s, uint32_t slot, bool add)
{
    for (uint32_t i = (slot * 2654435761u) & s->mask;; i = (i + 1) & s->mask) {
        if (s->pins[i].key == slot + 1)
            return &s->pins[i];
        if (s->pins[i].key == 0) {
            if (!add || s->used >= OL_KV_SESSION_PINS)
                return NULL;
            s->pins[i].key = slot + 1;
            s->pins[i].count = 0;
            s->used++;
            return &s->pins[i];
        }
    }
}

static void ol_pin_erase(struct ol_kv_session *s, struct ol_kv_pin *p)
{
    uint32_t i = (uint32_t)(p - s->pins);
    OL_ASSERT(i <= s->mask && p->key && p->count == 0 && s->used > 0);
    for (uint32_t j = (i + 1) & s->mask; s->pins[j].key; j = (j + 1) & s->mask) {
        uint32_t home = ((s->pins[j].key - 1) * 2654435761u) & s->mask;
        if (((j - home) & s->mask) >= ((j - i) & s->mask)) {
            s->pins[i] = s->pins[j];
            i = j;
        }
    }
    s->pins[i].key = 0;
    s->used--;
}

static void ol_unpin(struct ol_kv_shard *sh, uint32_t lid, uint32_t n)
{
    struct ol_kv_ent *e = &sh->ents[lid];
    OL_ASSERT(n > 0 && e->pins >= n);
    e->pins -= n;
    if (e->pins)
        return;
    OL_ASSERT(sh->st.pinned_slots > 0);
    sh->st.pinned_slots--;
    if (e->state == OL_ENT_DOOMED && !e->wpin)
        ol_ent_free(sh, lid);
}

void ol_kv_shard_session_close(struct ol_kv_shard *sh, int sid)
{
    if (sid < 0 || sid >= OL_KV_MAX_SESSIONS || !sh->sessions[sid])
        return;
    struct ol_kv_session *s = sh->sessions[sid];
    for (uint32_t i = 0; i <= s->mask; i++)
        if (s->pins[i].key)
            ol_unpin(sh, ol_lid(sh, s->pins[i].key - 1), s->pins[i].count);
    for (uint32_t lid = sh->res_head, next; lid != OL_NONE; lid = next) {
        next = sh->ents[lid].rnext;
        if (sh->ents[lid].owner == sid) {
            ol_res_drop(sh, lid);
            sh->st.aborts++;
        }
    }
    free(s);
    sh->sessions[sid] = NULL;
}

static bool ol_sid_ok(const struct ol_kv_shard *sh, int sid)
{
    return sid >= 0 && sid < OL_KV_MAX_SESSIONS && sh->sessions[sid];
}

/* ---- operations --------------------------------------------------------------------- */

int ol_kv_shard_reserve(struct ol_kv_shard *sh, int sid, uint32_t ns, struct ol_kv_hash h,
                        const void *key, uint16_t key_len, uint64_t value_size, uint32_t hint,
                        uint64_t now_ms, struct ol_kv_loc *loc)
{
    if (!ol_sid_ok(sh, sid) || key_len > OL_KV_KEY_MAX)
        return OL_KV_BAD_REQUEST;
    if (ol_kv_index_find(&sh->index, h) >= 0 || (sh->disk && ol_kv_disk_has(sh->disk, h)))
        return OL_KV_EXISTS;
    int c = ol_kv_alloc_class(&sh->alloc, value_size);
    if (c == -ENOSPC)
        return OL_KV_BUSY;
    if (c < 0)
        return OL_KV_TOO_LARGE_ST;
    if (!sh->evict[c].capacity && ol_evict_init(&sh->evict[c], sh->evict_kind, sh->nents) < 0)
        return OL_KV_INTERNAL;
    uint32_t nsi = ol_nsi(sh, ns);
    if (!ol_quota_room(sh, &sh->nsu[nsi], sh->alloc.cls[c].slot_size))
        return OL_KV_QUOTA;
    int64_t slot = ol_get_slot(sh, c);
    if (slot < 0)
        return OL_KV_NOSPACE;
    uint32_t lid = ol_lid(sh, (uint32_t)slot);
    struct ol_kv_ent *e = &sh->ents[lid];
    e->gen += 2;
    e->h = h;
    e->ns = ns;
    e->nsi = (uint16_t)nsi;
    e->hint = hint;
    e->cls = (uint8_t)c;
    e->state = OL_ENT_RESERVED;
    e->owner = (int16_t)sid;
    e->pins = 0;
    e->wpin = e->on_disk = 0;
    e->value_len = e->value_sum = 0;
    e->deadline_ms = now_ms + sh->ttl_ms;
    ol_kv_index_insert(&sh->index, h, lid);
    ol_res_append(sh, lid);
    const struct ol_kv_class *k = &sh->alloc.cls[c];
    ol_kv_slab_hdr_begin(sh->slab, (uint32_t)slot, e->gen, ns, h, key, key_len);
    sh->st.bytes_used += k->slot_size;
    sh->nsu[nsi].bytes += k->slot_size;
    sh->st.reserved++;
    sh->st.reserves++;
    *loc = (struct ol_kv_loc){.slot = (uint32_t)slot, .gen = e->gen,
                              .offset = ol_kv_slab_off(sh->slab, (uint32_t)slot, k->slot_size),
                              .capacity = k->slot_size};
    return OL_KV_OK;
}

/* The live reservation (slot, gen) of session sid, or NULL. */
static struct ol_kv_ent *ol_my_res(struct ol_kv_shard *sh, int sid, uint32_t slot, uint64_t gen)
{
    if (!ol_sid_ok(sh, sid) || !ol_lid_ok(sh, slot))
        return NULL;
    struct ol_kv_ent *e = &sh->ents[ol_lid(sh, slot)];
    if (e->state != OL_ENT_RESERVED || e->gen != gen || e->owner != sid)
        return NULL;
    return e;
}

int ol_kv_shard_commit(struct ol_kv_shard *sh, int sid, uint32_t slot, uint64_t gen,
                       uint64_t value_len, uint64_t value_sum)
{
    struct ol_kv_ent *e = ol_my_res(sh, sid, slot, gen);
    if (!e)
        return OL_KV_STALE_GENERATION;
    if (value_len > sh->alloc.cls[e->cls].slot_size)
        return OL_KV_TOO_LARGE_ST;
    uint32_t lid = ol_lid(sh, slot);
    OL_ASSERT(sh->st.reserved > 0 && e->pins == 0 && (e->gen & 1) == 0);
    ol_res_unlink(sh, lid);
    e->state = OL_ENT_COMMITTED;
    e->value_len = value_len;
    e->value_sum = value_sum;
    ol_kv_slab_hdr_publish(sh->slab, slot, value_len, value_sum, OL_KV_SLOT_COMMITTED);
    ol_evict_insert(&sh->evict[e->cls], lid, e->h.lo, e->hint);
    ol_ns_link(sh, lid);
    sh->st.reserved--;
    sh->st.entries++;
    sh->st.value_bytes += value_len;
    sh->st.commits++;
    if (sh->disk) {
        if (sh->wq_len < sh->nents)
            sh->wq[(sh->wq_head + sh->wq_len++) % sh->nents] = (struct ol_kv_wq){lid, e->gen};
        else
            sh->st.writebehind_skipped++;
    }
    return OL_KV_OK;
}

int ol_kv_shard_abort(struct ol_kv_shard *sh, int sid, uint32_t slot, uint64_t gen)
{
    if (!ol_my_res(sh, sid, slot, gen))
        return OL_KV_STALE_GENERATION;
    ol_res_drop(sh, ol_lid(sh, slot));
    sh->st.aborts++;
    return OL_KV_OK;
}

/* The committed entry of (ns, h), or NULL. */
static struct ol_kv_ent *ol_committed(struct ol_kv_shard *sh, uint32_t ns, int64_t lid)
{
    if (lid < 0)
        return NULL;
    struct ol_kv_ent *e = &sh->ents[lid];
    return e->state == OL_ENT_COMMITTED && e->ns == ns ? e : NULL;
}

uint32_t ol_kv_shard_lookup(struct ol_kv_shard *sh, uint32_t ns, const struct ol_kv_hash *hs,
                            uint32_t n, uint8_t *present)
{
    enum { B = 64 };
    int64_t ids[B];
    uint32_t run = 0, found = 0;
    bool in_run = true;
    for (uint32_t base = 0; base < n; base += B) {
        uint32_t m = n - base < B ? n - base : B;
        ol_kv_index_find_batch(&sh->index, hs + base, m, ids);
        for (uint32_t i = 0; i < m; i++) {
            present[base + i] = ol_committed(sh, ns, ids[i]) != NULL;
            if (!present[base + i] && sh->disk &&
                ol_kv_disk_find(sh->disk, ns, hs[base + i], NULL) >= 0) {
                present[base + i] = 1;
                sh->st.disk_hits++;
            }
            found += present[base + i];
            if (in_run && present[base + i])
                run++;
            else
                in_run = false;
        }
    }
    sh->st.lookups += n;
    sh->st.hits += found;
    sh->st.misses += n - found;
    return run;
}

int ol_kv_shard_acquire(struct ol_kv_shard *sh, int sid, uint32_t ns, struct ol_kv_hash h,
                        struct ol_kv_loc *loc)
{
    if (!ol_sid_ok(sh, sid))
        return OL_KV_BAD_REQUEST;
    int64_t lid = ol_kv_index_find(&sh->index, h);
    struct ol_kv_ent *e = ol_committed(sh, ns, lid);
    if (!e) {
        sh->st.misses++;
        return OL_KV_NOT_FOUND;
    }
    uint32_t slot = ol_slot(sh, (uint32_t)lid);
    struct ol_kv_pin *p = ol_pin_find(sh->sessions[sid], slot, true);
    if (!p)
        return OL_KV_BUSY;
    OL_ASSERT((e->gen & 1) == 0); /* even: a published slot (shard.h, kv-slab.md) */
    p->count++;
    if (e->pins++ == 0)
        sh->st.pinned_slots++;
    sh->st.acquires++;
    sh->st.hits++;
    ol_evict_hit(&sh->evict[e->cls], (uint32_t)lid);
    ol_ns_unlink(sh, (uint32_t)lid); /* the namespace's young end */
    ol_ns_link(sh, (uint32_t)lid);
    uint32_t ss = sh->alloc.cls[e->cls].slot_size;
    *loc = (struct ol_kv_loc){.slot = slot, .gen = e->gen, .offset = ol_kv_slab_off(sh->slab, slot, ss),
                              .capacity = ss, .value_len = e->value_len, .value_sum = e->value_sum};
    return OL_KV_OK;
}

int ol_kv_shard_release(struct ol_kv_shard *sh, int sid, uint32_t slot, uint64_t gen)
{
    if (!ol_sid_ok(sh, sid) || !ol_lid_ok(sh, slot))
        return OL_KV_STALE_GENERATION;
    struct ol_kv_session *s = sh->sessions[sid];
    struct ol_kv_pin *p = ol_pin_find(s, slot, false);
    struct ol_kv_ent *e = &sh->ents[ol_lid(sh, slot)];
    if (!p || e->gen != gen)
        return OL_KV_STALE_GENERATION;
    if (--p->count == 0)
        ol_pin_erase(s, p);
    ol_unpin(sh, ol_lid(sh, slot), 1);
    return OL_KV_OK;
}

static void ol_delete_lid(struct ol_kv_shard *sh, uint32_t lid)
{
    struct ol_kv_ent *e = &sh->ents[lid];
    if (e->state == OL_ENT_LOADING) {
        ol_kv_index_remove(&sh->index, e->h);
        e->state = OL_ENT_DOOMED; /* freed when its read completes */
        return;
    }
    ol_ent_unpublish(sh, lid);
    sh->st.deletes++;
    if (e->pins || e->wpin)
        e->state = OL_ENT_DOOMED; /* freed by the last release or the write's end */
    else
        ol_ent_free(sh, lid);
}

int ol_kv_shard_delete(struct ol_kv_shard *sh, uint32_t ns, struct ol_kv_hash h)
{
    int64_t lid = ol_kv_index_find(&sh->index, h);
    bool in_ram = ol_committed(sh, ns, lid) != NULL ||
                  (lid >= 0 && sh->ents[lid].state == OL_ENT_LOADING && sh->ents[lid].ns == ns);
    if (in_ram)
        ol_delete_lid(sh, (uint32_t)lid);
    bool on_disk = sh->disk && ol_kv_disk_delete(sh->disk, ns, h) == 0;
    return in_ram || on_disk ? OL_KV_OK : OL_KV_NOT_FOUND;
}

uint64_t ol_kv_shard_reset(struct ol_kv_shard *sh, uint32_t ns)
{
    uint64_t n = 0;
    for (uint32_t lid = 0; lid < sh->nents; lid++) {
        struct ol_kv_ent *e = &sh->ents[lid];
        if ((e->state == OL_ENT_COMMITTED || e->state == OL_ENT_LOADING) && e->ns == ns) {
            /* counted once: from the disk when it has the entry too */
            n += e->state == OL_ENT_COMMITTED && !e->on_disk;
            ol_delete_lid(sh, lid);
        }
    }
    if (sh->disk)
        n += ol_kv_disk_reset(sh->disk, ns);
    return n;
}

uint32_t ol_kv_shard_expire(struct ol_kv_shard *sh, uint64_t now_ms)
{
    uint32_t n = 0;
    /* Same TTL for all: the list is in deadline order. */
    while (sh->res_head != OL_NONE && sh->ents[sh->res_head].deadline_ms <= now_ms) {
        ol_res_drop(sh, sh->res_head);
        sh->st.expired++;
        n++;
    }
    return n;
}

void ol_kv_shard_stats(const struct ol_kv_shard *sh, struct ol_kv_shard_stats *out)
{
    *out = sh->st;
}

/* ---- disk tier ----------------------------------------------------------------------- */

static uint64_t ol_tag(uint32_t lid, uint64_t gen) { return lid | (gen & 0xFFFFFFFFu) << 32; }

int ol_kv_shard_set_disk(struct ol_kv_shard *sh, struct ol_kv_disk *d)
{
    sh->wq = calloc(sh->nents, sizeof *sh->wq);
    if (!sh->wq)
        return -ENOMEM;
    sh->disk = d;
    return 0;
}

int ol_kv_shard_where(const struct ol_kv_shard *sh, uint32_t ns, struct ol_kv_hash h)
{
    int64_t lid = ol_kv_index_find(&sh->index, h);
    if (lid >= 0 && sh->ents[lid].ns == ns) {
        if (sh->ents[lid].state == OL_ENT_COMMITTED)
            return OL_KV_WHERE_RAM;
        if (sh->ents[lid].state == OL_ENT_LOADING)
            return OL_KV_WHERE_LOADING;
    }
    if (lid < 0 && sh->disk && ol_kv_disk_find(sh->disk, ns, h, NULL) >= 0)
        return OL_KV_WHERE_DISK;
    return OL_KV_WHERE_MISS;
}

int ol_kv_shard_promote(struct ol_kv_shard *sh, uint32_t ns, struct ol_kv_hash h)
{
    uint64_t len;
    int64_t did;
    if (!sh->disk || ol_kv_index_find(&sh->index, h) >= 0 ||
        (did = ol_kv_disk_find(sh->disk, ns, h, &len)) < 0)
        return -ENOENT;
    if (!ol_kv_disk_idle_slot(sh->disk))
        return -EBUSY;
    int c = ol_kv_alloc_class(&sh->alloc, len);
    if (c < 0)
        return -ENOSPC;
    if (!sh->evict[c].capacity && ol_evict_init(&sh->evict[c], sh->evict_kind, sh->nents) < 0)
        return -ENOSPC;
    uint32_t nsi = ol_nsi(sh, ns);
    if (!ol_quota_room(sh, &sh->nsu[nsi], sh->alloc.cls[c].slot_size))
        return -ENOSPC;
    int64_t slot = ol_get_slot(sh, c);
    if (slot < 0)
        return -ENOSPC;
    uint32_t lid = ol_lid(sh, (uint32_t)slot);
    struct ol_kv_ent *e = &sh->ents[lid];
    e->gen += 2;
    e->h = h;
    e->ns = ns;
    e->nsi = (uint16_t)nsi;
    e->hint = 0;
    e->cls = (uint8_t)c;
    e->state = OL_ENT_LOADING;
    e->owner = -1;
    e->pins = 1; /* the read's */
    e->wpin = 0;
    e->on_disk = 1;
    e->value_len = len;
    e->value_sum = 0;
    const struct ol_kv_class *k = &sh->alloc.cls[c];
    ol_kv_slab_hdr_begin(sh->slab, (uint32_t)slot, e->gen, ns, h, "", 0); /* odd until loaded */
    sh->st.bytes_used += k->slot_size;
    sh->nsu[nsi].bytes += k->slot_size;
    int rc = ol_kv_disk_read(sh->disk, did,
                             sh->slab->base + ol_kv_slab_off(sh->slab, (uint32_t)slot, k->slot_size),
                             ol_tag(lid, e->gen));
    if (rc < 0) {
        ol_ent_free(sh, lid);
        return rc;
    }
    ol_kv_index_insert(&sh->index, h, lid);
    return 0;
}

bool ol_kv_shard_disk_busy(const struct ol_kv_shard *sh)
{
    return sh->disk && (sh->wq_len || ol_kv_disk_busy(sh->disk));
}

void ol_kv_shard_pump(struct ol_kv_shard *sh)
{
    if (!sh->disk)
        return;
    while (sh->wq_len && ol_kv_disk_idle_slot(sh->disk)) {
        struct ol_kv_wq w = sh->wq[sh->wq_head];
        sh->wq_head = (sh->wq_head + 1) % sh->nents;
        sh->wq_len--;
        struct ol_kv_ent *e = &sh->ents[w.lid];
        if (e->gen != w.gen || e->state != OL_ENT_COMMITTED || e->on_disk || e->wpin)
            continue; /* gone, or there already */
        uint32_t slot = ol_slot(sh, w.lid);
        const struct ol_kv_slot_hdr *hd = ol_kv_slab_hdr(sh->slab, slot);
        uint32_t ss = sh->alloc.cls[e->cls].slot_size;
        int rc = ol_kv_disk_write(sh->disk, e->ns, e->h, hd->key, hd->key_len,
                                  sh->slab->base + ol_kv_slab_off(sh->slab, slot, ss),
                                  e->value_len, e->value_sum, ol_tag(w.lid, e->gen));
        if (rc == 0) {
            e->wpin = 1;
        } else if (rc == -EEXIST) {
            e->on_disk = 1;
        } else if (rc == -EBUSY) {
            sh->wq_head = (sh->wq_head + sh->nents - 1) % sh->nents; /* put it back */
            sh->wq[sh->wq_head] = w;
            sh->wq_len++;
            return;
        } else {
            sh->st.writebehind_skipped++;
        }
    }
}

void ol_kv_shard_disk_done(void *ctx, int ev, uint64_t tag, int status,
                           const struct ol_kv_slot_hdr *hdr)
{
    struct ol_kv_shard *sh = ctx;
    uint32_t lid = (uint32_t)tag;
    if (lid >= sh->nents)
        return;
    struct ol_kv_ent *e = &sh->ents[lid];
    if ((e->gen & 0xFFFFFFFFu) != tag >> 32)
        return;
    uint32_t slot = ol_slot(sh, lid);
    /* the entry is held until its I/O completes (shard.c's header): by wpin
     * for a write, by the LOADING pin (or doomed) for a read */
    OL_ASSERT(ev == OL_KV_DISK_WROTE ? e->wpin == 1 && e->state != OL_ENT_FREE
                                     : e->state == OL_ENT_LOADING || e->state == OL_ENT_DOOMED);
    if (ev == OL_KV_DISK_WROTE) {
        e->wpin = 0;
        if (status == 0 && e->state == OL_ENT_COMMITTED)
            e->on_disk = 1;
        if (e->state == OL_ENT_DOOMED && !e->pins)
            ol_ent_free(sh, lid);
        return;
    }
    /* a promotion's read */
    if (e->state == OL_ENT_DOOMED) { /* deleted while loading */
        ol_ent_free(sh, lid);
        return;
    }
    if (e->state != OL_ENT_LOADING)
        return;
    e->pins = 0;
    if (status != 0 || !hdr) {
        ol_kv_index_remove(&sh->index, e->h);
        ol_ent_free(sh, lid);
        return;
    }
    ol_kv_slab_hdr_begin(sh->slab, slot, e->gen, e->ns, e->h, hdr->key, hdr->key_len);
    ol_kv_slab_hdr_publish(sh->slab, slot, e->value_len, hdr->value_sum, OL_KV_SLOT_COMMITTED);
    e->value_sum = hdr->value_sum;
    e->state = OL_ENT_COMMITTED;
    ol_evict_insert(&sh->evict[e->cls], lid, e->h.lo, 0);
    ol_evict_hit(&sh->evict[e->cls], lid); /* wanted right now */
    ol_ns_link(sh, lid);
    sh->st.entries++;
    sh->st.value_bytes += e->value_len;
    sh->st.promotions++;
}
