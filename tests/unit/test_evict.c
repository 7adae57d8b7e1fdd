/*
 * test_evict.c - eviction policies (src/kv/evict.c).
 *
 * Exact small scenarios per kind; pins (never returned, never lost, all
 * pinned -> -1); remove anywhere; and a differential test against the plain
 * reference twins below (arrays, memmove, linear search: the algorithms as
 * evict.h states them, with nothing clever) over long random op sequences
 * with random pins, checking every victim, the number of pin queries, the
 * live count and ol_evict_check() as it goes, then draining every live id.
 * "No allocation after init" is not checked here: that needs a malloc
 * replacement, which this shared binary must not carry (evict.c calls
 * malloc once, in ol_evict_init, and free once, in ol_evict_exit).
 */
#include "olt.h"

#include "kv/evict.h"

#include <errno.h>
#include <stdlib.h>

/* ---- helpers ----------------------------------------------------------- */

static uint64_t rng_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

struct pins {
    uint8_t *on;
    long calls;
};

static bool pinned_cb(void *ctx, uint32_t id)
{
    struct pins *p = ctx;
    p->calls++;
    return p->on[id] != 0;
}

static uint64_t fp_of(uint32_t key)
{
    return (uint64_t)key * 0x100000001B3ull + 7;
}

static void init_ok(struct ol_evict *e, enum ol_evict_kind k, uint32_t cap)
{
    OLT_CHECK_EQ(ol_evict_init(e, k, cap), 0);
    OLT_CHECK_EQ(ol_evict_check(e), 0);
}

/* ---- reference twins --------------------------------------------------- */

/* Lists are arrays with index 0 = tail (oldest), n-1 = head (newest):
 * 0, 1 resident (LRU; S, M; T1, T2), 2, 3 ghosts (G; B1, B2). */
struct ref {
    enum ol_evict_kind kind;
    uint32_t cap, small, gcap, p;
    uint64_t *l[4];   /* ids for 0, 1; fingerprints for 2, 3 */
    uint32_t n[4];
    uint8_t *where, *freq;
    uint64_t *fp;
};

static void ref_init(struct ref *r, enum ol_evict_kind kind, uint32_t cap)
{
    memset(r, 0, sizeof *r);
    r->kind = kind;
    r->cap = cap;
    r->small = cap / 10 ? cap / 10 : 1;
    r->gcap = kind == OL_EVICT_S3FIFO ? (cap > r->small ? cap - r->small : 1)
            : kind == OL_EVICT_ARC ? cap : 0;
    for (int i = 0; i < 4; i++)
        r->l[i] = calloc(cap + r->gcap + 1, sizeof(uint64_t));
    r->where = calloc(cap, 1);
    r->freq = calloc(cap, 1);
    r->fp = calloc(cap, sizeof(uint64_t));
}

static void ref_exit(struct ref *r)
{
    for (int i = 0; i < 4; i++)
        free(r->l[i]);
    free(r->where); free(r->freq); free(r->fp);
}

static int64_t ref_find(const struct ref *r, int li, uint64_t v)
{
    for (uint32_t i = 0; i < r->n[li]; i++)
        if (r->l[li][i] == v)
            return i;
    return -1;
}

static void ref_del_at(struct ref *r, int li, uint32_t i)
{
    memmove(&r->l[li][i], &r->l[li][i + 1], (r->n[li] - i - 1) * sizeof(uint64_t));
    r->n[li]--;
}

static void ref_append(struct ref *r, int li, uint64_t v)
{
    r->l[li][r->n[li]++] = v;
    if (li < 2)
        r->where[v] = (uint8_t)(li + 1);
}

static void ref_unlink(struct ref *r, uint32_t id)
{
    int li = r->where[id] - 1;
    ref_del_at(r, li, (uint32_t)ref_find(r, li, id));
    r->where[id] = 0;
}

static int ref_ghost_take(struct ref *r, uint64_t fp)
{
    for (int li = 2; li < 4; li++) {
        int64_t i = ref_find(r, li, fp);
        if (i >= 0) {
            ref_del_at(r, li, (uint32_t)i);
            return li;
        }
    }
    return -1;
}

static void ref_ghost_push(struct ref *r, int li, uint64_t fp)
{
    if (ref_ghost_take(r, fp) < 0 && r->n[2] + r->n[3] == r->gcap) {
        bool b2 = r->kind == OL_EVICT_ARC && r->n[3] &&
                  (r->n[0] + r->n[2] < r->cap || !r->n[2]);
        ref_del_at(r, b2 ? 3 : 2, 0);
    }
    ref_append(r, li, fp);
}

static void ref_insert(struct ref *r, uint32_t id, uint64_t fp)
{
    r->fp[id] = fp;
    r->freq[id] = 0;
    if (r->kind == OL_EVICT_LRU) {
        ref_append(r, 0, id);
        return;
    }
    uint32_t b1 = r->n[2], b2 = r->n[3];
    int g = ref_ghost_take(r, fp);
    if (r->kind == OL_EVICT_S3FIFO) {
        ref_append(r, g == 2 ? 1 : 0, id);
        return;
    }
    if (g == 2) {
        uint32_t d = b1 >= b2 ? 1 : b2 / b1;
        r->p = r->p + d < r->cap ? r->p + d : r->cap;
    } else if (g == 3) {
        uint32_t d = b2 >= b1 ? 1 : b1 / b2;
        r->p = r->p > d ? r->p - d : 0;
    }
    ref_append(r, g >= 0 ? 1 : 0, id);
    if (g < 0 && r->n[0] + r->n[2] > r->cap && r->n[2])
        ref_del_at(r, 2, 0);
}

static void ref_hit(struct ref *r, uint32_t id)
{
    if (r->kind == OL_EVICT_S3FIFO) {
        if (r->freq[id] < 3)
            r->freq[id]++;
        return;
    }
    ref_unlink(r, id);
    ref_append(r, r->kind == OL_EVICT_ARC ? 1 : 0, id);
}

static void ref_rotate(struct ref *r, int li)
{
    uint32_t t = (uint32_t)r->l[li][0];
    ref_unlink(r, t);
    ref_append(r, li, t);
}

/* Chooses the list to take from given which are usable (non-empty, not
 * seen all pinned). */
static int ref_pick(const struct ref *r, const bool ok[2], bool in_s)
{
    switch (r->kind) {
    case OL_EVICT_LRU:
        return ok[0] ? 0 : -1;
    case OL_EVICT_S3FIFO:
        return ok[0] && (in_s || r->n[0] >= r->small || !ok[1]) ? 0 : ok[1] ? 1 : -1;
    default:
        return ok[0] && (r->n[0] > r->p || !ok[1]) ? 0 : ok[1] ? 1 : -1;
    }
}

/* The algorithm as evict.h states it: a list is given up once all of its
 * entries were seen pinned in a row; an entry arriving on a list makes it
 * worth trying again; S3-FIFO keeps to S, once chosen, until S yields. */
static int64_t ref_victim(struct ref *r, ol_evict_pinned_fn pinned, void *ctx)
{
    uint32_t run[2] = {0, 0};
    bool done[2] = {false, false}, in_s = false;
    for (;;) {
        bool ok[2] = {r->n[0] && !done[0], r->n[1] && !done[1]};
        int li = ref_pick(r, ok, in_s);
        if (li < 0)
            return -1;
        in_s |= r->kind == OL_EVICT_S3FIFO && li == 0;
        uint32_t t = (uint32_t)r->l[li][0];
        if (pinned(ctx, t)) {
            ref_rotate(r, li);
            if (++run[li] >= r->n[li])
                done[li] = true;
            continue;
        }
        run[li] = 0;
        if (r->kind == OL_EVICT_S3FIFO && li == 0 && r->freq[t]) {
            ref_unlink(r, t);
            ref_append(r, 1, t);
            run[1] = 0;
            done[1] = false;
            continue;
        }
        if (r->kind == OL_EVICT_S3FIFO && li == 1 && r->freq[t]) {
            r->freq[t]--;
            ref_rotate(r, 1);
            continue;
        }
        ref_unlink(r, t);
        if (r->kind == OL_EVICT_S3FIFO && li == 0)
            ref_ghost_push(r, 2, r->fp[t]);
        else if (r->kind == OL_EVICT_ARC)
            ref_ghost_push(r, li + 2, r->fp[t]);
        return t;
    }
}

/* ---- setup and names --------------------------------------------------- */

OLT_TEST(evict_init_rejects_bad_arguments)
{
    struct ol_evict e;
    OLT_CHECK_EQ(ol_evict_init(&e, OL_EVICT_LRU, 0), -EINVAL);
    OLT_CHECK_EQ(ol_evict_init(&e, (enum ol_evict_kind)OL_EVICT_KIND_COUNT, 8), -EINVAL);
    OLT_CHECK_EQ(ol_evict_init(&e, OL_EVICT_S3FIFO, (1u << 30) + 1), -EINVAL);
    ol_evict_exit(&e); /* harmless after a failed init */
    for (int k = 0; k < OL_EVICT_KIND_COUNT; k++) {
        init_ok(&e, (enum ol_evict_kind)k, 1);
        OLT_CHECK_EQ(ol_evict_count(&e), 0);
        OLT_CHECK_EQ(ol_evict_victim(&e, NULL, NULL), -1);
        ol_evict_insert(&e, 0, 1, 0);
        OLT_CHECK_EQ(ol_evict_victim(&e, NULL, NULL), 0);
        ol_evict_exit(&e);
    }
}

OLT_TEST(evict_kind_names_round_trip)
{
    for (int k = 0; k < OL_EVICT_KIND_COUNT; k++)
        OLT_CHECK_EQ(ol_evict_kind_parse(ol_evict_kind_name((enum ol_evict_kind)k)), k);
    OLT_CHECK_STR(ol_evict_kind_name(OL_EVICT_S3FIFO), "s3fifo");
    OLT_CHECK_STR(ol_evict_kind_name(OL_EVICT_ARC), "arc");
    OLT_CHECK(ol_evict_kind_name((enum ol_evict_kind)OL_EVICT_KIND_COUNT) == NULL);
    OLT_CHECK_EQ(ol_evict_kind_parse("clock"), -EINVAL);
}

/* ---- exact scenarios --------------------------------------------------- */

OLT_TEST(evict_lru_exact_order)
{
    struct ol_evict e;
    init_ok(&e, OL_EVICT_LRU, 8);
    for (uint32_t i = 0; i < 5; i++)
        ol_evict_insert(&e, i, fp_of(i), i);
    ol_evict_hit(&e, 1);
    ol_evict_hit(&e, 0);
    ol_evict_hit(&e, 0); /* already the head */
    /* recency, oldest first: 2 3 4 1 0 */
    int64_t want[] = {2, 3, 4, 1, 0, -1};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        OLT_CHECK_EQ(ol_evict_victim(&e, NULL, NULL), want[i]);
        OLT_CHECK_EQ(ol_evict_check(&e), 0);
    }
    ol_evict_exit(&e);
}

OLT_TEST(evict_s3fifo_exact_order)
{
    /* capacity 20: S's share is 2, the ghost holds 18 fingerprints. */
    struct ol_evict e;
    init_ok(&e, OL_EVICT_S3FIFO, 20);
    for (uint32_t i = 0; i < 4; i++)
        ol_evict_insert(&e, i, fp_of(100 + i), 0);
    ol_evict_hit(&e, 1);
    ol_evict_hit(&e, 1);
    ol_evict_hit(&e, 2);
    /* S (tail first) 0 1 2 3. S holds >= 2: 0 (never hit) goes to the ghost. */
    OLT_CHECK_EQ(ol_evict_victim(&e, NULL, NULL), 0);
    /* 1 was hit: moves to M (freq 2 kept); 2 was hit: M; 3 is evicted. */
    OLT_CHECK_EQ(ol_evict_victim(&e, NULL, NULL), 3);
    OLT_CHECK_EQ(ol_evict_count(&e), 2);
    /* Key 100 comes back under id 7: a ghost hit, so it enters M's head. */
    ol_evict_insert(&e, 7, fp_of(100), 0);
    ol_evict_insert(&e, 8, fp_of(200), 0); /* new: S */
    /* S holds 1 < 2: evict from M (tail first 1 2 7). 1 has freq 2: back to
     * the head with 1; 2 has freq 1: back with 0; 7 has 0: evicted. */
    OLT_CHECK_EQ(ol_evict_victim(&e, NULL, NULL), 7);
    /* M is now 1(freq 1) 2(freq 0): 1 rotates, 2 goes. */
    OLT_CHECK_EQ(ol_evict_victim(&e, NULL, NULL), 2);
    OLT_CHECK_EQ(ol_evict_victim(&e, NULL, NULL), 1);
    /* Key 100 was taken from the ghost by its hit: it enters S this time. */
    ol_evict_insert(&e, 9, fp_of(100), 0);
    OLT_CHECK_EQ(ol_evict_victim(&e, NULL, NULL), 8);
    OLT_CHECK_EQ(ol_evict_victim(&e, NULL, NULL), 9);
    OLT_CHECK_EQ(ol_evict_victim(&e, NULL, NULL), -1);
    /* Both 8 and 9 left S unhit: their keys are ghosts now. */
    ol_evict_insert(&e, 0, fp_of(200), 0);
    ol_evict_insert(&e, 1, fp_of(300), 0);
    ol_evict_insert(&e, 2, fp_of(301), 0);
    /* S holds 2 (ids 1, 2), M holds 0: S first. */
    OLT_CHECK_EQ(ol_evict_victim(&e, NULL, NULL), 1);
    /* S holds 1 < 2: M's 0 goes before S's 2. */
    OLT_CHECK_EQ(ol_evict_victim(&e, NULL, NULL), 0);
    OLT_CHECK_EQ(ol_evict_victim(&e, NULL, NULL), 2);
    OLT_CHECK_EQ(ol_evict_check(&e), 0);
    ol_evict_exit(&e);
}

OLT_TEST(evict_s3fifo_scan_does_not_flush_hot_entries)
{
    /* 10 hot entries hit twice, then a scan of 1000 one-time keys through a
     * cache of 40: LRU loses the hot set, S3-FIFO keeps it. */
    for (int k = 0; k < OL_EVICT_KIND_COUNT; k++) {
        struct ol_evict e;
        init_ok(&e, (enum ol_evict_kind)k, 40);
        uint32_t key_of[40];
        for (uint32_t i = 0; i < 10; i++) {
            ol_evict_insert(&e, i, fp_of(i), 0);
            key_of[i] = i;
        }
        uint32_t next_id = 10;
        for (int round = 0; round < 2; round++)
            for (uint32_t i = 0; i < 10; i++)
                ol_evict_hit(&e, i);
        for (uint32_t key = 1000; key < 2000; key++) {
            uint32_t id;
            if (next_id < 40) {
                id = next_id++;
            } else {
                int64_t v = ol_evict_victim(&e, NULL, NULL);
                OLT_CHECK(v >= 0);
                id = (uint32_t)v;
            }
            ol_evict_insert(&e, id, fp_of(key), 0);
            key_of[id] = key;
        }
        int hot = 0;
        for (uint32_t id = 0; id < 40; id++)
            hot += ol_evict_contains(&e, id) && key_of[id] < 10;
        if (k == OL_EVICT_LRU)
            OLT_CHECK_EQ(hot, 0);
        else
            OLT_CHECK_EQ(hot, 10);
        ol_evict_exit(&e);
    }
}

OLT_TEST(evict_arc_exact_order)
{
    struct ol_evict e;
    init_ok(&e, OL_EVICT_ARC, 4);
    for (uint32_t i = 0; i < 4; i++)
        ol_evict_insert(&e, i, fp_of(10 + i), 0);
    ol_evict_hit(&e, 1);                     /* T1: 0 2 3, T2: 1, p = 0 */
    OLT_CHECK_EQ(ol_evict_victim(&e, NULL, NULL), 0);   /* |T1| > p: B1 */
    ol_evict_insert(&e, 0, fp_of(10), 0);    /* B1 hit: p = 1, into T2 */
    OLT_CHECK_EQ(ol_evict_victim(&e, NULL, NULL), 2);   /* |T1| 2 > 1 */
    OLT_CHECK_EQ(ol_evict_victim(&e, NULL, NULL), 1);   /* |T1| 1 = p: T2 */
    ol_evict_insert(&e, 1, fp_of(11), 0);    /* B2 hit: p = 0, into T2 */
    OLT_CHECK_EQ(ol_evict_victim(&e, NULL, NULL), 3);   /* |T1| 1 > 0 */
    OLT_CHECK_EQ(ol_evict_victim(&e, NULL, NULL), 0);   /* T2's LRU end */
    OLT_CHECK_EQ(ol_evict_victim(&e, NULL, NULL), 1);
    OLT_CHECK_EQ(ol_evict_victim(&e, NULL, NULL), -1);
    /* Ghosts now: B1 = {12, 13}, B2 = {10, 11}: the pool (4) is full. */
    ol_evict_insert(&e, 2, fp_of(12), 0);    /* B1 hit: p = 1, into T2 */
    ol_evict_insert(&e, 3, fp_of(50), 0);    /* new: T1 */
    OLT_CHECK_EQ(ol_evict_victim(&e, NULL, NULL), 2);   /* |T1| 1 = p: T2 */
    OLT_CHECK_EQ(ol_evict_victim(&e, NULL, NULL), 3);
    OLT_CHECK_EQ(ol_evict_check(&e), 0);
    ol_evict_exit(&e);
}

/* ---- pins and remove --------------------------------------------------- */

OLT_TEST(evict_pinned_never_returned_nor_lost)
{
    for (int k = 0; k < OL_EVICT_KIND_COUNT; k++) {
        struct ol_evict e;
        uint8_t on[16] = {0};
        struct pins p = {on, 0};
        init_ok(&e, (enum ol_evict_kind)k, 16);
        for (uint32_t i = 0; i < 16; i++)
            ol_evict_insert(&e, i, fp_of(i), i);
        for (uint32_t i = 0; i < 16; i += 2)
            on[i] = 1;
        ol_evict_hit(&e, 3);
        for (int n = 0; n < 8; n++) {
            int64_t v = ol_evict_victim(&e, pinned_cb, &p);
            OLT_CHECK(v >= 0 && v % 2 == 1);
            OLT_CHECK(!ol_evict_contains(&e, (uint32_t)v));
            OLT_CHECK_EQ(ol_evict_check(&e), 0);
        }
        /* Only pinned entries left: -1, all still there. */
        OLT_CHECK_EQ(ol_evict_victim(&e, pinned_cb, &p), -1);
        OLT_CHECK_EQ(ol_evict_victim(&e, pinned_cb, &p), -1);
        OLT_CHECK_EQ(ol_evict_count(&e), 8);
        for (uint32_t i = 0; i < 16; i += 2)
            OLT_CHECK(ol_evict_contains(&e, i));
        OLT_CHECK_EQ(ol_evict_check(&e), 0);
        /* Released one by one, each becomes the next victim. */
        for (uint32_t i = 0; i < 16; i += 2) {
            on[i] = 0;
            OLT_CHECK_EQ(ol_evict_victim(&e, pinned_cb, &p), i);
        }
        OLT_CHECK_EQ(ol_evict_victim(&e, pinned_cb, &p), -1);
        OLT_CHECK_EQ(ol_evict_count(&e), 0);
        ol_evict_exit(&e);
    }
}

OLT_TEST(evict_all_pinned_in_both_s3fifo_queues)
{
    /* Entries in S and in M, all pinned: -1 without looping; unpinning one
     * in M while S is over its share still finds it. */
    struct ol_evict e;
    uint8_t on[10] = {0};
    struct pins p = {on, 0};
    init_ok(&e, OL_EVICT_S3FIFO, 10);
    for (uint32_t i = 0; i < 6; i++) {
        ol_evict_insert(&e, i, fp_of(i), 0);
        ol_evict_hit(&e, i);
    }
    ol_evict_insert(&e, 6, fp_of(6), 0);
    ol_evict_insert(&e, 7, fp_of(7), 0);
    /* 0..5 were hit: the victim call moves them all to M, evicts 6. */
    OLT_CHECK_EQ(ol_evict_victim(&e, NULL, NULL), 6);
    memset(on, 1, sizeof on);
    p.calls = 0;
    OLT_CHECK_EQ(ol_evict_victim(&e, pinned_cb, &p), -1);
    OLT_CHECK(p.calls <= 7); /* each entry asked once */
    OLT_CHECK_EQ(ol_evict_count(&e), 7);
    on[3] = 0;
    OLT_CHECK_EQ(ol_evict_victim(&e, pinned_cb, &p), 3);
    OLT_CHECK_EQ(ol_evict_check(&e), 0);
    ol_evict_exit(&e);
}

OLT_TEST(evict_remove_anywhere)
{
    for (int k = 0; k < OL_EVICT_KIND_COUNT; k++) {
        struct ol_evict e;
        init_ok(&e, (enum ol_evict_kind)k, 32);
        for (uint32_t i = 0; i < 12; i++)
            ol_evict_insert(&e, i, fp_of(i), 0);
        for (uint32_t i = 0; i < 6; i++)
            ol_evict_hit(&e, i);
        /* Push some into M for the S3-FIFO kinds. */
        OLT_CHECK(ol_evict_victim(&e, NULL, NULL) >= 0);
        uint32_t order[] = {11, 0, 5, 6, 3};  /* head, tail, middles */
        for (size_t j = 0; j < 5; j++) {
            if (!ol_evict_contains(&e, order[j]))
                continue;
            ol_evict_remove(&e, order[j]);
            OLT_CHECK(!ol_evict_contains(&e, order[j]));
            OLT_CHECK_EQ(ol_evict_check(&e), 0);
        }
        int64_t v;
        while ((v = ol_evict_victim(&e, NULL, NULL)) >= 0)
            for (size_t j = 0; j < 5; j++)
                OLT_CHECK(v != order[j]);
        OLT_CHECK_EQ(ol_evict_count(&e), 0);
        /* A removed id can be inserted again. */
        ol_evict_insert(&e, 5, fp_of(5), 0);
        OLT_CHECK_EQ(ol_evict_victim(&e, NULL, NULL), 5);
        ol_evict_exit(&e);
    }
}

/* ---- differential against the twins ------------------------------------ */

static void differential(enum ol_evict_kind kind, uint32_t cap, uint64_t seed, long ops)
{
    struct ol_evict e;
    struct ref r;
    init_ok(&e, kind, cap);
    ref_init(&r, kind, cap);
    uint8_t *on = calloc(cap, 1), *live = calloc(cap, 1);
    struct pins pe = {on, 0}, pr = {on, 0};
    uint32_t nlive = 0, keys = cap * 3, hint = 0;
    uint64_t s = seed;
    for (long op = 0; op < ops; op++) {
        uint32_t x = (uint32_t)rng_next(&s);
        uint32_t id = (uint32_t)(rng_next(&s) % cap);
        switch (x % 16) {
        case 0: case 1: case 2: case 3: case 4: case 5: { /* insert */
            if (live[id])
                break;
            uint64_t fp = fp_of((uint32_t)(rng_next(&s) % keys));
            hint = x & 64 ? hint + 1 : (uint32_t)(x >> 8) % 4;
            ol_evict_insert(&e, id, fp, hint);
            ref_insert(&r, id, fp);
            live[id] = 1;
            nlive++;
            break;
        }
        case 6: case 7: case 8: case 9: /* hit */
            if (!live[id])
                break;
            ol_evict_hit(&e, id);
            ref_hit(&r, id);
            break;
        case 10: /* remove */
            if (!live[id])
                break;
            ol_evict_remove(&e, id);
            ref_unlink(&r, id);
            live[id] = 0;
            nlive--;
            break;
        case 11: /* pin or release */
            on[id] ^= 1;
            break;
        case 12: /* sometimes pin everything, sometimes nothing */
            if ((x >> 8) % 8 == 0)
                memset(on, (x >> 12) & 1, cap);
            break;
        default: { /* victim */
            int64_t a = ol_evict_victim(&e, pinned_cb, &pe);
            int64_t b = ref_victim(&r, pinned_cb, &pr);
            if (a != b || pe.calls != pr.calls)
                olt_fail(__FILE__, __LINE__, "kind %d op %ld: victim %lld vs ref %lld, "
                         "pin calls %ld vs %ld", kind, op, (long long)a, (long long)b,
                         pe.calls, pr.calls);
            if (a >= 0) {
                OLT_CHECK(live[a] && !on[a]);
                live[a] = 0;
                nlive--;
            } else {
                for (uint32_t i = 0; i < cap; i++)
                    OLT_CHECK(!live[i] || on[i]);
            }
        }
        }
        OLT_CHECK_EQ(ol_evict_count(&e), nlive);
        if (op % 512 == 0)
            OLT_CHECK_EQ(ol_evict_check(&e), 0);
    }
    /* Every live id is still there and comes out exactly once. */
    memset(on, 0, cap);
    int64_t v;
    while ((v = ol_evict_victim(&e, pinned_cb, &pe)) >= 0) {
        OLT_CHECK_EQ(ref_victim(&r, pinned_cb, &pr), v);
        OLT_CHECK(live[v]);
        live[v] = 0;
        nlive--;
    }
    OLT_CHECK_EQ(nlive, 0);
    OLT_CHECK_EQ(ol_evict_check(&e), 0);
    free(on);
    free(live);
    ref_exit(&r);
    ol_evict_exit(&e);
}

OLT_TEST(evict_lru_matches_reference)
{
    differential(OL_EVICT_LRU, 1, 1, 2000);
    differential(OL_EVICT_LRU, 7, 2, 20000);
    differential(OL_EVICT_LRU, 64, 3, 100000);
}

OLT_TEST(evict_s3fifo_matches_reference)
{
    differential(OL_EVICT_S3FIFO, 1, 4, 2000);
    differential(OL_EVICT_S3FIFO, 2, 5, 5000);
    differential(OL_EVICT_S3FIFO, 9, 6, 20000);
    differential(OL_EVICT_S3FIFO, 64, 7, 100000);
    differential(OL_EVICT_S3FIFO, 300, 8, 100000);
}

OLT_TEST(evict_arc_matches_reference)
{
    differential(OL_EVICT_ARC, 1, 9, 2000);
    differential(OL_EVICT_ARC, 2, 10, 5000);
    differential(OL_EVICT_ARC, 10, 11, 20000);
    differential(OL_EVICT_ARC, 64, 12, 100000);
    differential(OL_EVICT_ARC, 300, 13, 100000);
}

OLT_TEST(evict_ghost_survives_heavy_churn)
{
    /* Many more distinct keys than the ghosts hold, evicted and re-inserted
     * over and over: the ghost lists, table and free list stay consistent. */
    enum ol_evict_kind kinds[] = {OL_EVICT_S3FIFO, OL_EVICT_ARC};
    for (size_t k = 0; k < 2; k++) {
        struct ol_evict e;
        init_ok(&e, kinds[k], 50);
        uint64_t s = 99;
        for (uint32_t id = 0; id < 50; id++)
            ol_evict_insert(&e, id, rng_next(&s), 0);
        for (int i = 0; i < 200000; i++) {
            int64_t v = ol_evict_victim(&e, NULL, NULL);
            OLT_CHECK(v >= 0);
            ol_evict_insert(&e, (uint32_t)v, fp_of((uint32_t)(rng_next(&s) % 200)), 0);
            if (i % 4 == 0)
                ol_evict_hit(&e, (uint32_t)(rng_next(&s) % 50));
            if (i % 10000 == 0)
                OLT_CHECK_EQ(ol_evict_check(&e), 0);
        }
        OLT_CHECK_EQ(ol_evict_count(&e), 50);
        OLT_CHECK_EQ(ol_evict_check(&e), 0);
        ol_evict_exit(&e);
    }
}
