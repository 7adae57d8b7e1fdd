/*
 * evict.c - see evict.h.
 *
 * Every list is threaded through next/prev of an entry array (UINT32_MAX =
 * none): q[0] and q[1] over ent[] (resident ids), q[2] and q[3] over gent[]
 * (ghost nodes). head is the newest end, tail the oldest; next points towards
 * the tail. where = 1 + the list index, 0 = on no list. Ghost nodes not in
 * use form a free list through next. The ghost set maps a fingerprint to its
 * node by open addressing (linear probing, backward-shift delete) in a table
 * at most half full. One malloc at init holds every array.
 */
#include "kv/evict.h"

#include "base/assert.h"

#include <errno.h>
#include <stdalign.h>
#include <stdlib.h>
#include <string.h>

#define NIL UINT32_MAX
#define FREQ_MAX 3
enum { QS = 0, QM = 1, QT1 = 0, QT2 = 1, QB1 = 2, QB2 = 3, QG = 2 };

static const char *const kind_names[OL_EVICT_KIND_COUNT] = {
    [OL_EVICT_LRU] = "lru",
    [OL_EVICT_S3FIFO] = "s3fifo",
    [OL_EVICT_ARC] = "arc",
};

const char *ol_evict_kind_name(enum ol_evict_kind kind)
{
    return (unsigned)kind < OL_EVICT_KIND_COUNT ? kind_names[kind] : NULL;
}

int ol_evict_kind_parse(const char *name)
{
    for (int k = 0; k < OL_EVICT_KIND_COUNT; k++)
        if (strcmp(name, kind_names[k]) == 0)
            return k;
    return -EINVAL;
}

/* ---- lists ------------------------------------------------------------- */

static struct ol_evict_ent *arr(struct ol_evict *e, unsigned qi)
{
    return qi < 2 ? e->ent : e->gent;
}

static void q_push_head(struct ol_evict *e, unsigned qi, uint32_t id)
{
    struct ol_evict_ent *a = arr(e, qi);
    struct ol_evict_q *q = &e->q[qi];
    a[id].prev = NIL;
    a[id].next = q->head;
    if (q->head != NIL)
        a[q->head].prev = id;
    else
        q->tail = id;
    q->head = id;
    q->size++;
    a[id].where = (uint8_t)(qi + 1);
}

static void q_unlink(struct ol_evict *e, unsigned qi, uint32_t id)
{
    struct ol_evict_ent *a = arr(e, qi);
    struct ol_evict_q *q = &e->q[qi];
    uint32_t p = a[id].prev, n = a[id].next;
    if (p != NIL)
        a[p].next = n;
    else
        q->head = n;
    if (n != NIL)
        a[n].prev = p;
    else
        q->tail = p;
    q->size--;
    a[id].where = 0;
}

/* Moves id (on list from) to the head of list to. */
static void q_move_head(struct ol_evict *e, unsigned from, unsigned to, uint32_t id)
{
    if (from == to && e->q[to].head == id)
        return;
    q_unlink(e, from, id);
    q_push_head(e, to, id);
}

/* ---- ghost set --------------------------------------------------------- */

static uint64_t g_home(const struct ol_evict *e, uint64_t fp)
{
    return (fp * 0x9E3779B97F4A7C15ull) >> e->gshift;
}

/* Table slot holding fp, or NIL. The table is at most half full: this ends. */
static uint32_t g_slot(const struct ol_evict *e, uint64_t fp)
{
    for (uint64_t i = g_home(e, fp);; i = (i + 1) & e->gmask) {
        if (e->gtab[i].node == NIL)
            return NIL;
        if (e->gtab[i].fp == fp)
            return (uint32_t)i;
    }
}

/* Empties slot i, shifting later members of its probe run back. */
static void g_slot_del(struct ol_evict *e, uint64_t i)
{
    for (;;) {
        e->gtab[i].node = NIL;
        uint64_t j = i;
        for (;;) {
            j = (j + 1) & e->gmask;
            if (e->gtab[j].node == NIL)
                return;
            uint64_t k = g_home(e, e->gtab[j].fp);
            /* j stays if its home lies cyclically in (i, j]. */
            if (i <= j ? (i < k && k <= j) : (i < k || k <= j))
                continue;
            e->gtab[i] = e->gtab[j];
            i = j;
            break;
        }
    }
}

/* Forgets ghost node g (on list qi). */
static void g_drop(struct ol_evict *e, unsigned qi, uint32_t g)
{
    g_slot_del(e, g_slot(e, e->gent[g].fp));
    q_unlink(e, qi, g);
    e->gent[g].next = e->gfree;
    e->gfree = g;
}

static void g_drop_tail(struct ol_evict *e, unsigned qi)
{
    g_drop(e, qi, e->q[qi].tail);
}

/* Frees a ghost node: S3-FIFO gives up its oldest ghost. ARC (B1 + B2 full
 * at c) its oldest B1 ghost if |T1| + |B1| is at its bound c, else its
 * oldest B2 ghost, as ARC's directory replacement does. */
static void g_make_room(struct ol_evict *e)
{
    if (e->kind == OL_EVICT_ARC && e->q[QB2].size &&
        (e->q[QT1].size + e->q[QB1].size < e->capacity || !e->q[QB1].size))
        g_drop_tail(e, QB2);
    else
        g_drop_tail(e, QB1);
}

/* Makes fp the newest ghost on list qi (QG / QB1 / QB2). */
static void g_push(struct ol_evict *e, unsigned qi, uint64_t fp)
{
    uint32_t s = g_slot(e, fp);
    if (s != NIL) {
        uint32_t g = e->gtab[s].node;
        q_move_head(e, e->gent[g].where - 1u, qi, g);
        return;
    }
    if (e->gfree == NIL)
        g_make_room(e);
    uint32_t g = e->gfree;
    e->gfree = e->gent[g].next;
    e->gent[g].fp = fp;
    q_push_head(e, qi, g);
    uint64_t i = g_home(e, fp);
    while (e->gtab[i].node != NIL)
        i = (i + 1) & e->gmask;
    e->gtab[i] = (struct ol_evict_gslot){fp, g};
}

/* If fp is a ghost: forgets it and returns the list it was on; else -1. */
static int g_take(struct ol_evict *e, uint64_t fp)
{
    if (!e->gtab)
        return -1;
    uint32_t s = g_slot(e, fp);
    if (s == NIL)
        return -1;
    uint32_t g = e->gtab[s].node;
    int qi = e->gent[g].where - 1;
    g_slot_del(e, s);
    q_unlink(e, (unsigned)qi, g);
    e->gent[g].next = e->gfree;
    e->gfree = g;
    return qi;
}

/* ---- setup ------------------------------------------------------------- */

static size_t carve(size_t *off, size_t n, size_t align)
{
    size_t at = (*off + align - 1) & ~(align - 1);
    *off = at + n;
    return at;
}

int ol_evict_init(struct ol_evict *e, enum ol_evict_kind kind, uint32_t capacity)
{
    memset(e, 0, sizeof *e);
    if ((unsigned)kind >= OL_EVICT_KIND_COUNT || capacity == 0 || capacity > (1u << 30))
        return -EINVAL;
    uint32_t small = capacity / 10 ? capacity / 10 : 1, gcap = 0;
    if (kind == OL_EVICT_S3FIFO)
        gcap = capacity > small ? capacity - small : 1;   /* as many as M holds */
    else if (kind == OL_EVICT_ARC)
        gcap = capacity;                                  /* |B1| + |B2| <= c */
    unsigned gbits = 1;
    while ((1ull << gbits) < 2ull * gcap)
        gbits++;
    uint64_t gsize = gcap ? 1ull << gbits : 0;

    size_t off = 0;
    size_t o_ent = carve(&off, (size_t)capacity * sizeof(struct ol_evict_ent),
                         alignof(struct ol_evict_ent));
    size_t o_gent = carve(&off, (size_t)gcap * sizeof(struct ol_evict_ent),
                          alignof(struct ol_evict_ent));
    size_t o_gtab = carve(&off, gsize * sizeof(struct ol_evict_gslot),
                          alignof(struct ol_evict_gslot));
    char *m = malloc(off);
    if (!m)
        return -ENOMEM;

    e->mem = m;
    e->kind = kind;
    e->capacity = capacity;
    e->small_target = small;
    e->ent = (struct ol_evict_ent *)(void *)(m + o_ent);
    for (uint32_t i = 0; i < capacity; i++)
        e->ent[i] = (struct ol_evict_ent){0, NIL, NIL, 0, 0};
    for (unsigned i = 0; i < 4; i++)
        e->q[i] = (struct ol_evict_q){NIL, NIL, 0};
    e->gfree = NIL;
    if (gcap) {
        e->gent = (struct ol_evict_ent *)(void *)(m + o_gent);
        for (uint32_t i = 0; i < gcap; i++)
            e->gent[i] = (struct ol_evict_ent){0, i + 1 < gcap ? i + 1 : NIL, NIL, 0, 0};
        e->gfree = 0;
        e->gcap = gcap;
        e->gtab = (struct ol_evict_gslot *)(void *)(m + o_gtab);
        e->gshift = 64 - gbits;
        e->gmask = gsize - 1;
        for (uint64_t i = 0; i < gsize; i++)
            e->gtab[i].node = NIL;
    }
    return 0;
}

void ol_evict_exit(struct ol_evict *e)
{
    free(e->mem);
    memset(e, 0, sizeof *e);
}

/* ---- operations -------------------------------------------------------- */

void ol_evict_insert(struct ol_evict *e, uint32_t id, uint64_t fp, uint32_t hint)
{
    OL_ASSERT(id < e->capacity && e->ent[id].where == 0);
    struct ol_evict_ent *x = &e->ent[id];
    x->fp = fp;
    x->freq = 0;
    switch (e->kind) {
    case OL_EVICT_LRU:
        q_push_head(e, 0, id);
        break;
    case OL_EVICT_S3FIFO:
        q_push_head(e, g_take(e, fp) == QG ? QM : QS, id);
        break;
    case OL_EVICT_ARC: {
        uint32_t b1 = e->q[QB1].size, b2 = e->q[QB2].size, c = e->capacity;
        int g = g_take(e, fp);
        if (g == QB1) {         /* recency was too short: favour T1 */
            uint32_t d = b1 >= b2 ? 1 : b2 / b1;
            e->arc_p = c - e->arc_p > d ? e->arc_p + d : c;
        } else if (g == QB2) {  /* frequency was too short: favour T2 */
            uint32_t d = b2 >= b1 ? 1 : b1 / b2;
            e->arc_p = e->arc_p > d ? e->arc_p - d : 0;
        }
        if (g >= 0) {
            q_push_head(e, QT2, id);
            break;
        }
        q_push_head(e, QT1, id);
        /* Directory bound: |T1| + |B1| <= c. */
        if (e->q[QT1].size + e->q[QB1].size > c && e->q[QB1].size)
            g_drop_tail(e, QB1);
        break;
    }
    }
}

void ol_evict_hit(struct ol_evict *e, uint32_t id)
{
    OL_ASSERT(id < e->capacity && e->ent[id].where != 0);
    struct ol_evict_ent *x = &e->ent[id];
    switch (e->kind) {
    case OL_EVICT_LRU:
        q_move_head(e, 0, 0, id);
        break;
    case OL_EVICT_S3FIFO:
        if (x->freq < FREQ_MAX)
            x->freq++;
        break;
    case OL_EVICT_ARC:
        q_move_head(e, x->where - 1u, QT2, id);
        break;
    }
}

void ol_evict_remove(struct ol_evict *e, uint32_t id)
{
    OL_ASSERT(id < e->capacity && e->ent[id].where != 0);
    q_unlink(e, e->ent[id].where - 1u, id);
}

/* Moves the tail of resident list qi to its head. */
static void q_rotate(struct ol_evict *e, unsigned qi)
{
    q_move_head(e, qi, qi, e->q[qi].tail);
}

/*
 * Pins: run[qi] counts the pinned entries met in a row at the tail of list
 * qi, each moved to the head; when it reaches the list's size every entry of
 * it has been seen pinned and done[qi] is set. Any other step on a list
 * resets its run; an entry moved onto a list clears its done.
 */
struct walk {
    uint32_t run[2];
    bool done[2];
};

/* True if the tail of qi is pinned (and was moved to the head). */
static bool skip_pinned(struct ol_evict *e, struct walk *w, unsigned qi,
                        ol_evict_pinned_fn pinned, void *ctx)
{
    if (!pinned || !pinned(ctx, e->q[qi].tail)) {
        w->run[qi] = 0;
        return false;
    }
    q_rotate(e, qi);
    if (++w->run[qi] >= e->q[qi].size)
        w->done[qi] = true;
    return true;
}

static int64_t victim_lru(struct ol_evict *e, ol_evict_pinned_fn pinned, void *ctx)
{
    struct walk w = {{0, 0}, {false, false}};
    while (e->q[0].size && !w.done[0]) {
        uint32_t t = e->q[0].tail;
        if (skip_pinned(e, &w, 0, pinned, ctx))
            continue;
        q_unlink(e, 0, t);
        return t;
    }
    return -1;
}

/*
 * S3-FIFO: S is chosen when it holds at least its share (or M has nothing to
 * give); once chosen, S is worked until it yields a victim, as in the paper.
 * Each S step either evicts, or promotes an entry hit while in S to M; each
 * M step evicts or spends one unit of frequency.
 */
static int64_t victim_s3(struct ol_evict *e, ol_evict_pinned_fn pinned, void *ctx)
{
    struct walk w = {{0, 0}, {false, false}};
    bool in_s = false;
    for (;;) {
        bool s_ok = e->q[QS].size && !w.done[QS], m_ok = e->q[QM].size && !w.done[QM];
        unsigned qi;
        if (s_ok && (in_s || e->q[QS].size >= e->small_target || !m_ok)) {
            qi = QS;
            in_s = true;
        } else if (m_ok) {
            qi = QM;
        } else {
            return -1;
        }
        uint32_t t = e->q[qi].tail;
        if (skip_pinned(e, &w, qi, pinned, ctx))
            continue;
        struct ol_evict_ent *x = &e->ent[t];
        if (qi == QS) {
            q_unlink(e, QS, t);
            if (x->freq > 0) {
                q_push_head(e, QM, t);
                w.run[QM] = 0;
                w.done[QM] = false;
                continue;
            }
            g_push(e, QG, x->fp);
            return t;
        }
        if (x->freq > 0) {
            x->freq--;
            q_rotate(e, QM);
            continue;
        }
        q_unlink(e, QM, t);
        return t;
    }
}

/*
 * ARC's REPLACE: the LRU end of T1 if T1 is over its target p, else of T2;
 * the victim's fingerprint becomes the newest ghost of B1 or B2. (ARC's tie
 * rule "or the missed key is in B2 and |T1| == p" needs the key being
 * inserted, which this API gives only afterwards; it is left out.)
 */
static int64_t victim_arc(struct ol_evict *e, ol_evict_pinned_fn pinned, void *ctx)
{
    struct walk w = {{0, 0}, {false, false}};
    for (;;) {
        bool t1_ok = e->q[QT1].size && !w.done[QT1], t2_ok = e->q[QT2].size && !w.done[QT2];
        unsigned qi;
        if (t1_ok && (e->q[QT1].size > e->arc_p || !t2_ok))
            qi = QT1;
        else if (t2_ok)
            qi = QT2;
        else
            return -1;
        uint32_t t = e->q[qi].tail;
        if (skip_pinned(e, &w, qi, pinned, ctx))
            continue;
        q_unlink(e, qi, t);
        g_push(e, qi == QT1 ? QB1 : QB2, e->ent[t].fp);
        return t;
    }
}

int64_t ol_evict_victim(struct ol_evict *e, ol_evict_pinned_fn pinned, void *ctx)
{
    switch (e->kind) {
    case OL_EVICT_S3FIFO:
        return victim_s3(e, pinned, ctx);
    case OL_EVICT_ARC:
        return victim_arc(e, pinned, ctx);
    default:
        return victim_lru(e, pinned, ctx);
    }
}

/* ---- self-check -------------------------------------------------------- */

static int check_list(const struct ol_evict *e, unsigned qi, uint32_t limit)
{
    const struct ol_evict_ent *a = qi < 2 ? e->ent : e->gent;
    const struct ol_evict_q *q = &e->q[qi];
    uint32_t n = 0, prev = NIL;
    for (uint32_t id = q->head; id != NIL; id = a[id].next) {
        if (id >= limit || a[id].where != qi + 1 || a[id].prev != prev || ++n > q->size)
            return -1;
        if (qi < 2 && a[id].freq > FREQ_MAX)
            return -1;
        if (qi >= 2) {
            uint32_t s = g_slot(e, a[id].fp);
            if (s == NIL || e->gtab[s].node != id)
                return -1;
        }
        prev = id;
    }
    return n == q->size && q->tail == prev ? 0 : -1;
}

int ol_evict_check(const struct ol_evict *e)
{
    for (unsigned qi = 0; qi < 4; qi++)
        if (check_list(e, qi, qi < 2 ? e->capacity : e->gcap))
            return -(int)(10 + qi);
    uint32_t marked = 0;
    for (uint32_t id = 0; id < e->capacity; id++)
        marked += e->ent[id].where != 0;
    if (marked != e->q[0].size + e->q[1].size)
        return -20;
    if (e->kind == OL_EVICT_LRU && e->q[1].size)
        return -21;
    if (e->kind != OL_EVICT_ARC && e->q[QB2].size)
        return -22;
    if (e->kind == OL_EVICT_ARC && e->arc_p > e->capacity)
        return -23;
    if (!e->gcap)
        return 0;
    /* Every node is on a ghost list or on the free list; the table holds
     * exactly the listed ones. */
    uint32_t nfree = 0;
    for (uint32_t g = e->gfree; g != NIL; g = e->gent[g].next)
        if (g >= e->gcap || e->gent[g].where || ++nfree > e->gcap)
            return -30;
    if (nfree + e->q[QB1].size + e->q[QB2].size != e->gcap)
        return -31;
    uint64_t members = 0;
    for (uint64_t i = 0; i <= e->gmask; i++)
        members += e->gtab[i].node != NIL;
    if (members != e->q[QB1].size + e->q[QB2].size)
        return -32;
    return 0;
}
