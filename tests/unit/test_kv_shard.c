/*
 * test_kv_shard.c - the KV lifecycle on one shard: reserve/commit/lookup/
 * acquire/release/delete/reset, TTL, sessions, eviction under pressure
 * (pins respected), cross-class page reclaim, namespaces, and a random
 * stress run checking the accounting invariants.
 */
#include "olt.h"

#include "kv/shard.h"

#include <errno.h>
#include <stdlib.h>

struct fx {
    struct ol_kv_slab slab;
    struct ol_kv_shard sh;
    int sid;
};

static void fx_init(struct fx *f, uint32_t pages, uint32_t ttl_ms)
{
    char err[256];
    if (ol_kv_slab_create(&f->slab, (uint64_t)pages * OL_KV_PAGE, 0, err, sizeof err) < 0)
        olt_fail(__FILE__, __LINE__, "%s", err);
    OLT_CHECK_EQ(ol_kv_shard_init(&f->sh, &f->slab, 0, pages, OL_EVICT_DEFAULT, ttl_ms), 0);
    f->sid = ol_kv_shard_session_open(&f->sh);
    OLT_CHECK(f->sid >= 0);
}

static void fx_exit(struct fx *f)
{
    ol_kv_shard_exit(&f->sh);
    ol_kv_slab_destroy(&f->slab);
}

static struct ol_kv_hash K(uint64_t i) { return (struct ol_kv_hash){i * 0x9E3779B97F4A7C15ull + 1, i}; }

/* reserve + commit one key; returns the status of the reserve */
static int put(struct fx *f, uint32_t ns, uint64_t i, uint64_t size)
{
    struct ol_kv_loc loc;
    int st = ol_kv_shard_reserve(&f->sh, f->sid, ns, K(i), "k", 1, size, (uint32_t)i, 0, &loc);
    if (st == OL_KV_OK)
        OLT_CHECK_EQ(ol_kv_shard_commit(&f->sh, f->sid, loc.slot, loc.gen, size, 0), OL_KV_OK);
    return st;
}

OLT_TEST(kv_shard_lifecycle)
{
    struct fx f;
    fx_init(&f, 4, 1000);
    struct ol_kv_loc loc, loc2;
    OLT_CHECK_EQ(ol_kv_shard_reserve(&f.sh, f.sid, 1, K(1), "key1", 4, 65536, 0, 0, &loc), OL_KV_OK);
    OLT_CHECK_EQ(loc.capacity, 65536);
    OLT_CHECK_EQ(loc.offset % 4096, 0);
    /* reserved keys are not visible yet, and cannot be reserved twice */
    uint8_t pres[4];
    struct ol_kv_hash hs[4] = {K(1), K(2), K(3), K(4)};
    OLT_CHECK_EQ(ol_kv_shard_lookup(&f.sh, 1, hs, 1, pres), 0);
    OLT_CHECK_EQ(ol_kv_shard_reserve(&f.sh, f.sid, 1, K(1), "key1", 4, 65536, 0, 0, &loc2), OL_KV_EXISTS);
    /* a value written into the slab before commit */
    memset(f.slab.base + loc.offset, 0x5a, 65536);
    OLT_CHECK_EQ(ol_kv_shard_commit(&f.sh, f.sid, loc.slot, loc.gen + 2, 100, 0), OL_KV_STALE_GENERATION);
    OLT_CHECK_EQ(ol_kv_shard_commit(&f.sh, f.sid, loc.slot, loc.gen, 65537, 0), OL_KV_TOO_LARGE_ST);
    OLT_CHECK_EQ(ol_kv_shard_commit(&f.sh, f.sid, loc.slot, loc.gen, 65536, 77), OL_KV_OK);
    OLT_CHECK_EQ(ol_kv_shard_commit(&f.sh, f.sid, loc.slot, loc.gen, 65536, 77), OL_KV_STALE_GENERATION);
    /* the slab header tells a reader what is there */
    struct ol_kv_slot_hdr h = *ol_kv_slab_hdr(&f.slab, loc.slot);
    OLT_CHECK_EQ(ol_kv_slab_hdr_check(&h), 0);
    OLT_CHECK_EQ(h.flags, OL_KV_SLOT_COMMITTED);
    OLT_CHECK_EQ(h.value_len, 65536);
    OLT_CHECK_EQ(h.gen, loc.gen);
    /* leading run: 1, 3 present, 2 absent -> run 1 */
    OLT_CHECK_EQ(put(&f, 1, 3, 65536), OL_KV_OK);
    OLT_CHECK_EQ(ol_kv_shard_lookup(&f.sh, 1, hs, 4, pres), 1);
    OLT_CHECK(pres[0] && !pres[1] && pres[2] && !pres[3]);
    OLT_CHECK_EQ(put(&f, 1, 2, 65536), OL_KV_OK);
    OLT_CHECK_EQ(ol_kv_shard_lookup(&f.sh, 1, hs, 4, pres), 3);
    /* another namespace sees nothing */
    OLT_CHECK_EQ(ol_kv_shard_lookup(&f.sh, 2, hs, 4, pres), 0);
    /* acquire pins; release with the wrong generation is refused */
    OLT_CHECK_EQ(ol_kv_shard_acquire(&f.sh, f.sid, 1, K(1), &loc2), OL_KV_OK);
    OLT_CHECK_EQ(loc2.offset, loc.offset);
    OLT_CHECK_EQ(loc2.value_len, 65536);
    OLT_CHECK_EQ(loc2.value_sum, 77);
    OLT_CHECK_EQ((unsigned char)f.slab.base[loc2.offset + 100], 0x5a);
    OLT_CHECK_EQ(ol_kv_shard_acquire(&f.sh, f.sid, 2, K(1), &loc2), OL_KV_NOT_FOUND);
    OLT_CHECK_EQ(ol_kv_shard_release(&f.sh, f.sid, loc.slot, loc.gen + 2), OL_KV_STALE_GENERATION);
    OLT_CHECK_EQ(ol_kv_shard_release(&f.sh, f.sid, loc.slot, loc.gen), OL_KV_OK);
    OLT_CHECK_EQ(ol_kv_shard_release(&f.sh, f.sid, loc.slot, loc.gen), OL_KV_STALE_GENERATION);
    /* delete, reset */
    OLT_CHECK_EQ(ol_kv_shard_delete(&f.sh, 2, K(1)), OL_KV_NOT_FOUND);
    OLT_CHECK_EQ(ol_kv_shard_delete(&f.sh, 1, K(1)), OL_KV_OK);
    OLT_CHECK_EQ(ol_kv_shard_lookup(&f.sh, 1, hs, 4, pres), 0);
    OLT_CHECK_EQ(put(&f, 2, 9, 65536), OL_KV_OK);
    OLT_CHECK_EQ(ol_kv_shard_reset(&f.sh, 1), 2);
    struct ol_kv_shard_stats st;
    ol_kv_shard_stats(&f.sh, &st);
    OLT_CHECK_EQ(st.entries, 1); /* namespace 2's entry survives a reset of 1 */
    OLT_CHECK_EQ(st.bytes_used, 65536);
    fx_exit(&f);
}

OLT_TEST(kv_shard_ttl_and_session_close)
{
    struct fx f;
    fx_init(&f, 2, 500);
    struct ol_kv_loc a, b, c;
    OLT_CHECK_EQ(ol_kv_shard_reserve(&f.sh, f.sid, 1, K(1), "a", 1, 20000, 0, 1000, &a), OL_KV_OK);
    OLT_CHECK_EQ(ol_kv_shard_reserve(&f.sh, f.sid, 1, K(2), "b", 1, 20000, 0, 1200, &b), OL_KV_OK);
    OLT_CHECK_EQ(ol_kv_shard_expire(&f.sh, 1499), 0);
    OLT_CHECK_EQ(ol_kv_shard_expire(&f.sh, 1500), 1); /* a's TTL passed, b's not */
    OLT_CHECK_EQ(ol_kv_shard_commit(&f.sh, f.sid, a.slot, a.gen, 10, 0), OL_KV_STALE_GENERATION);
    OLT_CHECK_EQ(ol_kv_shard_commit(&f.sh, f.sid, b.slot, b.gen, 10, 0), OL_KV_OK);
    /* another session cannot commit or abort my reservation */
    int other = ol_kv_shard_session_open(&f.sh);
    OLT_CHECK_EQ(ol_kv_shard_reserve(&f.sh, f.sid, 1, K(3), "c", 1, 20000, 0, 2000, &c), OL_KV_OK);
    OLT_CHECK_EQ(ol_kv_shard_commit(&f.sh, other, c.slot, c.gen, 10, 0), OL_KV_STALE_GENERATION);
    OLT_CHECK_EQ(ol_kv_shard_abort(&f.sh, other, c.slot, c.gen), OL_KV_STALE_GENERATION);
    /* the other session pins b twice, then disconnects: pins go */
    OLT_CHECK_EQ(ol_kv_shard_acquire(&f.sh, other, 1, K(2), &b), OL_KV_OK);
    OLT_CHECK_EQ(ol_kv_shard_acquire(&f.sh, other, 1, K(2), &b), OL_KV_OK);
    struct ol_kv_shard_stats st;
    ol_kv_shard_stats(&f.sh, &st);
    OLT_CHECK_EQ(st.pinned_slots, 1);
    ol_kv_shard_session_close(&f.sh, other);
    ol_kv_shard_stats(&f.sh, &st);
    OLT_CHECK_EQ(st.pinned_slots, 0);
    /* my session closes: my reservation is aborted */
    ol_kv_shard_session_close(&f.sh, f.sid);
    ol_kv_shard_stats(&f.sh, &st);
    OLT_CHECK_EQ(st.reserved, 0);
    OLT_CHECK_EQ(st.entries, 1);
    OLT_CHECK_EQ(st.bytes_used, 20480);
    OLT_CHECK_EQ(ol_kv_shard_acquire(&f.sh, f.sid, 1, K(2), &b), OL_KV_BAD_REQUEST);
    fx_exit(&f);
}

OLT_TEST(kv_shard_eviction_respects_pins)
{
    struct fx f;
    fx_init(&f, 4, 1000); /* 4 pages x 32 slots of 64 KiB = 128 entries */
    struct ol_kv_loc loc;
    for (uint64_t i = 0; i < 8; i++) {
        OLT_CHECK_EQ(put(&f, 1, i, 65536), OL_KV_OK);
        OLT_CHECK_EQ(ol_kv_shard_acquire(&f.sh, f.sid, 1, K(i), &loc), OL_KV_OK);
    }
    for (uint64_t i = 8; i < 2000; i++)
        OLT_CHECK_EQ(put(&f, 1, i, 65536), OL_KV_OK); /* evicts as needed */
    struct ol_kv_shard_stats st;
    ol_kv_shard_stats(&f.sh, &st);
    OLT_CHECK_EQ(st.entries, 128);
    OLT_CHECK(st.evictions >= 2000 - 128);
    for (uint64_t i = 0; i < 8; i++) /* pinned: still there */
        OLT_CHECK_EQ(ol_kv_shard_acquire(&f.sh, f.sid, 1, K(i), &loc), OL_KV_OK);
    /* pin everything: nothing evictable -> NOSPACE, nothing lost */
    struct ol_kv_hash hs[2000];
    uint8_t pres[2000];
    for (uint64_t i = 0; i < 2000; i++)
        hs[i] = K(i);
    ol_kv_shard_lookup(&f.sh, 1, hs, 2000, pres);
    for (uint64_t i = 0; i < 2000; i++)
        if (pres[i])
            OLT_CHECK_EQ(ol_kv_shard_acquire(&f.sh, f.sid, 1, K(i), &loc), OL_KV_OK);
    OLT_CHECK_EQ(put(&f, 1, 5000, 65536), OL_KV_NOSPACE);
    ol_kv_shard_stats(&f.sh, &st);
    OLT_CHECK_EQ(st.entries, 128);
    /* delete a pinned entry: gone from view, slot freed by the last release */
    OLT_CHECK_EQ(ol_kv_shard_delete(&f.sh, 1, K(0)), OL_KV_OK);
    OLT_CHECK_EQ(ol_kv_shard_acquire(&f.sh, f.sid, 1, K(0), &loc), OL_KV_NOT_FOUND);
    OLT_CHECK_EQ(put(&f, 1, 5000, 65536), OL_KV_NOSPACE);
    ol_kv_shard_session_close(&f.sh, f.sid); /* drops every pin */
    f.sid = ol_kv_shard_session_open(&f.sh);
    OLT_CHECK_EQ(put(&f, 1, 5000, 65536), OL_KV_OK);
    fx_exit(&f);
}

OLT_TEST(kv_shard_classes_share_pages)
{
    struct fx f;
    fx_init(&f, 4, 1000);
    /* class A (64 KiB) takes every page */
    for (uint64_t i = 0; i < 300; i++)
        OLT_CHECK_EQ(put(&f, 1, i, 65536), OL_KV_OK);
    OLT_CHECK_EQ(f.sh.alloc.cls[0].pages, 4);
    /* class B (1 MiB) still gets room: a page is taken back from A */
    for (uint64_t i = 1000; i < 1010; i++)
        OLT_CHECK_EQ(put(&f, 1, i, 1 << 20), OL_KV_OK);
    int b = ol_kv_alloc_class(&f.sh.alloc, 1 << 20);
    OLT_CHECK(f.sh.alloc.cls[b].pages >= 1);
    OLT_CHECK(f.sh.alloc.cls[b].pages <= 2); /* its fair share, no more */
    /* both classes keep serving */
    OLT_CHECK_EQ(put(&f, 1, 2000, 65536), OL_KV_OK);
    OLT_CHECK_EQ(put(&f, 1, 2001, 1 << 20), OL_KV_OK);
    /* a value larger than the shard */
    OLT_CHECK_EQ(put(&f, 1, 3000, 9u << 20), OL_KV_TOO_LARGE_ST);
    fx_exit(&f);
}

static uint64_t s_rng = 12345;
static uint64_t rnd(void)
{
    s_rng ^= s_rng << 13;
    s_rng ^= s_rng >> 7;
    s_rng ^= s_rng << 17;
    return s_rng;
}

OLT_TEST(kv_shard_random_stress_accounting)
{
    struct fx f;
    fx_init(&f, 8, 50);
    int sids[3] = {f.sid, ol_kv_shard_session_open(&f.sh), ol_kv_shard_session_open(&f.sh)};
    struct ol_kv_loc res[3][64];
    int nres[3] = {0};
    static const uint64_t sizes[] = {16384, 65536, 200000, 1 << 20, 3 << 20};
    uint64_t now = 0;
    for (int op = 0; op < 200000; op++) {
        int s = (int)(rnd() % 3);
        uint64_t k = rnd() % 3000;
        switch (rnd() % 8) {
        case 0: case 1: {
            if (nres[s] == 64)
                break;
            int st = ol_kv_shard_reserve(&f.sh, sids[s], 1, K(k), "k", 1, sizes[k % 5],
                                         (uint32_t)(k % 50), now, &res[s][nres[s]]);
            OLT_CHECK(st == OL_KV_OK || st == OL_KV_EXISTS || st == OL_KV_NOSPACE);
            if (st == OL_KV_OK)
                nres[s]++;
            break;
        }
        case 2: case 3:
            if (nres[s]) {
                struct ol_kv_loc *l = &res[s][--nres[s]];
                int st = ol_kv_shard_commit(&f.sh, sids[s], l->slot, l->gen, l->capacity, 0);
                OLT_CHECK(st == OL_KV_OK || st == OL_KV_STALE_GENERATION); /* maybe expired */
            }
            break;
        case 4: {
            struct ol_kv_loc l;
            if (ol_kv_shard_acquire(&f.sh, sids[s], 1, K(k), &l) == OL_KV_OK && (rnd() & 3))
                OLT_CHECK_EQ(ol_kv_shard_release(&f.sh, sids[s], l.slot, l.gen), OL_KV_OK);
            break;
        }
        case 5:
            ol_kv_shard_delete(&f.sh, 1, K(k));
            break;
        case 6:
            now += rnd() % 20;
            ol_kv_shard_expire(&f.sh, now);
            break;
        case 7:
            if (rnd() % 500 == 0) {
                ol_kv_shard_session_close(&f.sh, sids[s]);
                sids[s] = ol_kv_shard_session_open(&f.sh);
                nres[s] = 0;
            }
            break;
        }
        if (op % 20000 == 0) {
            /* bytes_used equals the slots held by every class */
            uint64_t held = 0;
            for (int c = 0; c < OL_KV_MAX_CLASSES; c++)
                held += (uint64_t)f.sh.alloc.cls[c].used * f.sh.alloc.cls[c].slot_size;
            struct ol_kv_shard_stats st;
            ol_kv_shard_stats(&f.sh, &st);
            OLT_CHECK_EQ(st.bytes_used, held);
            OLT_CHECK(st.bytes_used <= st.bytes_capacity);
            OLT_CHECK_EQ(st.entries + st.reserved, ol_kv_index_count(&f.sh.index));
            for (int c = 0; c < OL_KV_MAX_CLASSES; c++)
                if (f.sh.evict[c].capacity)
                    OLT_CHECK_EQ(ol_evict_check(&f.sh.evict[c]), 0);
        }
    }
    for (int s = 0; s < 3; s++)
        ol_kv_shard_session_close(&f.sh, sids[s]);
    struct ol_kv_shard_stats st;
    ol_kv_shard_stats(&f.sh, &st);
    OLT_CHECK_EQ(st.reserved, 0);
    OLT_CHECK_EQ(st.pinned_slots, 0);
    fx_exit(&f);
}

OLT_TEST(kv_shard_namespace_quota_evicts_its_own_oldest_first)
{
    struct fx f;
    fx_init(&f, 8, 1000); /* 8 pages = 256 slots of 64 KiB */
    ol_kv_shard_set_quota(&f.sh, 10 * 65536);
    /* tenant 2 fills part of the shard; tenant 1 then writes far past its quota */
    for (uint64_t i = 0; i < 20; i++)
        OLT_CHECK_EQ(put(&f, 2, 1000 + i, 65536), OL_KV_OK);
    for (uint64_t i = 0; i < 30; i++)
        OLT_CHECK_EQ(put(&f, 1, i, 65536), OL_KV_OK);
    uint64_t n, bytes;
    ol_kv_shard_ns_usage(&f.sh, 1, &n, &bytes);
    OLT_CHECK_EQ(n, 10);
    OLT_CHECK_EQ(bytes, 10 * 65536);
    ol_kv_shard_ns_usage(&f.sh, 2, &n, &bytes);
    OLT_CHECK_EQ(n, 10); /* over quota too: its own oldest went as it wrote */
    /* the survivors of tenant 1 are its 10 newest */
    uint8_t pres[30];
    struct ol_kv_hash hs[30];
    for (int i = 0; i < 30; i++)
        hs[i] = K((uint64_t)i);
    ol_kv_shard_lookup(&f.sh, 1, hs, 30, pres);
    for (int i = 0; i < 30; i++)
        OLT_CHECK_EQ(pres[i], i >= 20);
    /* a hit makes an entry young: 20 survives the next write, 21 goes */
    struct ol_kv_loc loc;
    OLT_CHECK_EQ(ol_kv_shard_acquire(&f.sh, f.sid, 1, K(20), &loc), OL_KV_OK);
    OLT_CHECK_EQ(ol_kv_shard_release(&f.sh, f.sid, loc.slot, loc.gen), OL_KV_OK);
    OLT_CHECK_EQ(put(&f, 1, 100, 65536), OL_KV_OK);
    ol_kv_shard_lookup(&f.sh, 1, hs + 20, 2, pres);
    OLT_CHECK_EQ(pres[0], 1);
    OLT_CHECK_EQ(pres[1], 0);
    /* pinned and reserved entries are never taken for the quota: QUOTA */
    struct ol_kv_hash all[10];
    int k = 0;
    for (int i = 22; i < 30; i++)
        all[k++] = K((uint64_t)i);
    all[k++] = K(20);
    all[k++] = K(100);
    struct ol_kv_loc pins[10];
    for (int i = 0; i < 10; i++)
        OLT_CHECK_EQ(ol_kv_shard_acquire(&f.sh, f.sid, 1, all[i], &pins[i]), OL_KV_OK);
    OLT_CHECK_EQ(put(&f, 1, 200, 65536), OL_KV_QUOTA);
    OLT_CHECK_EQ(put(&f, 3, 300, 65536), OL_KV_OK); /* other tenants are not affected */
    for (int i = 0; i < 10; i++)
        OLT_CHECK_EQ(ol_kv_shard_release(&f.sh, f.sid, pins[i].slot, pins[i].gen), OL_KV_OK);
    OLT_CHECK_EQ(put(&f, 1, 200, 65536), OL_KV_OK);
    ol_kv_shard_ns_usage(&f.sh, 1, &n, &bytes);
    OLT_CHECK_EQ(n, 10);
    fx_exit(&f);
}
