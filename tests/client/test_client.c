/*
 * test_client.c - the C client against a real openlaked. Run by
 * tests/integration/test_client.py, which starts a daemon with two shards
 * and sets OL_TEST_KV_SOCK (Unix socket), OL_TEST_KV_TCP (host:port) and
 * OL_TEST_KV_TOKEN_FILE. Without them every test skips. The UCX tests
 * (tests/integration/test_kv_ucx.py) set OL_TEST_KV_TCP to the daemon's
 * ucx://host:port, which runs the TCP tests over UCX, and OL_TEST_KV_UCX
 * (host:port) for client_ucx_strangers_are_dropped.
 */
#include "olt.h"

#include "openlake/client.h"
#include "client/ucx_link.h"
#include "kv/proto.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

static const char *env(const char *n)
{
    const char *v = getenv(n);
    if (!v || !*v)
        OLT_SKIP("needs a daemon: run through tests/integration/test_client.py");
    return v;
}

static ol_client *open_client(int tcp, const char *ns, uint64_t value_size)
{
    char err[256];
    struct ol_client_opts o = {.addr = tcp ? env("OL_TEST_KV_TCP") : env("OL_TEST_KV_SOCK"),
                               .token_file = env("OL_TEST_KV_TOKEN_FILE"), .ns = ns,
                               .value_size = value_size};
    ol_client *c = NULL;
    if (ol_client_open(&o, &c, err, sizeof err) < 0)
        olt_fail(__FILE__, __LINE__, "ol_client_open: %s", err);
    return c;
}

#define N 96
#define V (64 << 10)

static void fill(char *p, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (char)(seed * 131 + i * 7 + i / 4096);
}

OLT_TEST(client_put_get_lookup_across_shards_and_transports)
{
    ol_client *u = open_client(0, "client-test", V), *t = open_client(1, "client-test", V);
    OLT_CHECK_EQ(ol_client_shards(u), 2);
    OLT_CHECK(ol_client_has_slab(u));
    OLT_CHECK(!ol_client_has_slab(t));
    uint64_t size = 0, alloc0 = 0, alloc1 = 0;
    OLT_CHECK_EQ(ol_client_slab_usage(u, &size, &alloc0), 0);
    OLT_CHECK(size >= (4u << 20) && alloc0 > 0 && alloc0 <= size); /* the superblock at least */
    OLT_CHECK_EQ(ol_client_slab_usage(t, &size, &alloc0), -EOPNOTSUPP);
    OLT_CHECK_EQ(ol_client_slab_usage(u, &size, &alloc0), 0);
    char names[N][16];
    struct ol_client_key keys[N];
    static char vals[N][V], back[N][V];
    const void *vp[N];
    void *bp[N];
    uint64_t lens[N], caps[N], got[N];
    uint16_t st[N];
    for (int i = 0; i < N; i++) {
        keys[i].len = (uint16_t)snprintf(names[i], sizeof names[i], "blk-%03d", i);
        keys[i].data = names[i];
        fill(vals[i], V, (unsigned)i);
        vp[i] = vals[i];
        bp[i] = back[i];
        lens[i] = (uint64_t)(V - i); /* various lengths */
        caps[i] = V;
    }
    /* first half through the slab, second half inline over TCP */
    OLT_CHECK_EQ(ol_client_put(u, keys, vp, lens, N / 2, st), 0);
    for (int i = 0; i < N / 2; i++)
        OLT_CHECK_EQ(st[i], OL_KV_OK);
    OLT_CHECK_EQ(ol_client_put(t, keys + N / 2, vp + N / 2, lens + N / 2, N / 2, st), 0);
    for (int i = 0; i < N / 2; i++)
        OLT_CHECK_EQ(st[i], OL_KV_OK);
    /* the pages those values went to exist now (or already did: kv_slab.populate) */
    OLT_CHECK_EQ(ol_client_slab_usage(u, &size, &alloc1), 0);
    OLT_CHECK(alloc1 >= alloc0 && alloc1 <= size);
    OLT_CHECK(alloc1 >= (uint64_t)(N / 2) * (V / 2) || alloc0 == size);
    /* again: EXISTS */
    OLT_CHECK_EQ(ol_client_put(u, keys, vp, lens, 3, st), 0);
    OLT_CHECK_EQ(st[0], OL_KV_EXISTS);
    /* both transports read everything back byte for byte */
    for (int tr = 0; tr < 2; tr++) {
        memset(back, 0, sizeof back);
        OLT_CHECK_EQ(ol_client_get(tr ? t : u, keys, bp, caps, got, N, st), 0);
        for (int i = 0; i < N; i++) {
            OLT_CHECK_EQ(st[i], OL_KV_OK);
            OLT_CHECK_EQ(got[i], lens[i]);
            OLT_CHECK_MEM(back[i], vals[i], lens[i]);
        }
    }
    /* leading run across shards, in key order */
    uint8_t present[N];
    uint32_t leading = 0;
    OLT_CHECK_EQ(ol_client_delete(u, keys + 10, 1, st), 0);
    OLT_CHECK_EQ(st[0], OL_KV_OK);
    OLT_CHECK_EQ(ol_client_lookup(t, keys, N, present, &leading), 0);
    OLT_CHECK_EQ(leading, 10);
    OLT_CHECK(!present[10] && present[11] && present[N - 1]);
    /* a buffer too small: TOO_LARGE, nothing copied */
    uint64_t small = 100;
    OLT_CHECK_EQ(ol_client_get(u, keys, bp, &small, got, 1, st), 0);
    OLT_CHECK_EQ(st[0], OL_KV_TOO_LARGE_ST);
    /* other namespaces see nothing; reset clears every shard of ours */
    ol_client *o = open_client(0, "someone-else", V);
    OLT_CHECK_EQ(ol_client_lookup(o, keys, N, present, &leading), 0);
    OLT_CHECK_EQ(leading, 0);
    uint64_t stats[OL_CLIENT_STATS];
    OLT_CHECK_EQ(ol_client_stats(u, stats), 0);
    OLT_CHECK(stats[OL_KV_STAT_ENTRIES] >= N - 1);
    OLT_CHECK(stats[OL_KV_STAT_SESSIONS] >= 6); /* 3 clients x 2 shards */
    uint64_t removed = 0;
    OLT_CHECK_EQ(ol_client_reset(u, &removed), 0);
    OLT_CHECK_EQ(removed, N - 1);
    OLT_CHECK_EQ(ol_client_lookup(u, keys, N, present, &leading), 0);
    OLT_CHECK_EQ(leading, 0);
    ol_client_close(o);
    ol_client_close(t);
    ol_client_close(u);
}

OLT_TEST(client_bad_token_and_bad_keys)
{
    char err[256];
    struct ol_client_opts o = {.addr = env("OL_TEST_KV_SOCK"), .token = "not-the-token",
                               .ns = "x"};
    ol_client *c = NULL;
    OLT_CHECK_EQ(ol_client_open(&o, &c, err, sizeof err), -EACCES);
    OLT_CHECK(strstr(err, "token") != NULL);
    o.ns = NULL;
    OLT_CHECK_EQ(ol_client_open(&o, &c, err, sizeof err), -EINVAL);
    c = open_client(0, "x", 0);
    struct ol_client_key k = {"", 0};
    uint8_t p;
    uint32_t lead;
    OLT_CHECK_EQ(ol_client_lookup(c, &k, 1, &p, &lead), -EINVAL);
    uint16_t st;
    const void *vp = "v";
    uint64_t len = 1, cap = 1, got;
    char buf[1];
    void *bp = buf;
    OLT_CHECK_EQ(ol_client_delete(c, &k, 1, &st), -EINVAL);
    OLT_CHECK_EQ(ol_client_put(c, &k, &vp, &len, 1, &st), -EINVAL);
    OLT_CHECK_EQ(ol_client_get(c, &k, &bp, &cap, &got, 1, &st), -EINVAL);
    /* the client is still usable after refusing bad input */
    struct ol_client_key good = {"good", 4};
    OLT_CHECK_EQ(ol_client_put(c, &good, &vp, &len, 1, &st), 0);
    OLT_CHECK_EQ(st, OL_KV_OK);
    OLT_CHECK_EQ(ol_client_get(c, &good, &bp, &cap, &got, 1, &st), 0);
    OLT_CHECK_EQ(st, OL_KV_OK);
    OLT_CHECK_EQ(buf[0], 'v');
    ol_client_close(c);
}

/* Zero-copy slots: reserve, write in place, commit; acquire, read in place,
 * release; and every way a handle is refused. */
OLT_TEST(client_slots_reserve_commit_acquire_release)
{
    ol_client *u = open_client(0, "slots", V), *t = open_client(1, "slots", V);
    enum { K = 8 };
    char names[K][16];
    struct ol_client_key keys[K];
    struct ol_client_slot sl[K], again[K];
    uint16_t st[K];
    static char want[K][V], back[V];
    for (int i = 0; i < K; i++) {
        keys[i].len = (uint16_t)snprintf(names[i], sizeof names[i], "slot-%d", i);
        keys[i].data = names[i];
        fill(want[i], V, (unsigned)(i + 500));
    }
    /* reserve, write through the pointer, commit (lens NULL: the size asked for) */
    OLT_CHECK_EQ(ol_client_reserve(u, keys, K, V - 100, sl, st), 0);
    for (int i = 0; i < K; i++) {
        OLT_CHECK_EQ(st[i], OL_KV_OK);
        OLT_CHECK_EQ(sl[i].state, OL_CLIENT_SLOT_RESERVED);
        OLT_CHECK(sl[i].data && ((uintptr_t)sl[i].data & 4095) == 0);
        OLT_CHECK(sl[i].capacity >= V && sl[i].len == V - 100);
        memcpy(sl[i].data, want[i], V - 100);
    }
    /* not visible before commit */
    uint8_t present[K];
    uint32_t leading;
    OLT_CHECK_EQ(ol_client_lookup(u, keys, K, present, &leading), 0);
    OLT_CHECK_EQ(leading, 0);
    OLT_CHECK_EQ(ol_client_commit(u, sl, NULL, K, st), 0);
    for (int i = 0; i < K; i++) {
        OLT_CHECK_EQ(st[i], OL_KV_OK);
        OLT_CHECK_EQ(sl[i].state, OL_CLIENT_SLOT_NONE);
        OLT_CHECK(sl[i].data == NULL);
        OLT_CHECK_EQ(sl[i].checksum, ol_kv_value_hash(want[i], V - 100));
    }
    /* committing again, or a handle that never held anything: refused */
    OLT_CHECK_EQ(ol_client_commit(u, sl, NULL, K, st), 0);
    OLT_CHECK_EQ(st[0], OL_KV_STALE_GENERATION);
    /* both transports read it back */
    for (int tr = 0; tr < 2; tr++) {
        for (int i = 0; i < K; i++) {
            void *bp = back;
            uint64_t cap = V, got = 0;
            OLT_CHECK_EQ(ol_client_get(tr ? t : u, &keys[i], &bp, &cap, &got, 1, st), 0);
            OLT_CHECK_EQ(st[0], OL_KV_OK);
            OLT_CHECK_EQ(got, V - 100);
            OLT_CHECK_MEM(back, want[i], V - 100);
        }
    }
    /* reserving a present key: EXISTS, nothing held */
    OLT_CHECK_EQ(ol_client_reserve(u, keys, K, 0, again, st), 0);
    for (int i = 0; i < K; i++) {
        OLT_CHECK_EQ(st[i], OL_KV_EXISTS);
        OLT_CHECK_EQ(again[i].state, OL_CLIENT_SLOT_NONE);
        OLT_CHECK(again[i].data == NULL);
    }
    /* a size over the slot: TOO_LARGE without a round trip */
    OLT_CHECK_EQ(ol_client_reserve(u, keys, 1, 1ull << 30, again, st), 0);
    OLT_CHECK_EQ(st[0], OL_KV_TOO_LARGE_ST);
    /* acquire: pinned, read in place, verified, released */
    OLT_CHECK_EQ(ol_client_acquire(u, keys, K, sl, st), 0);
    for (int i = 0; i < K; i++) {
        OLT_CHECK_EQ(st[i], OL_KV_OK);
        OLT_CHECK_EQ(sl[i].state, OL_CLIENT_SLOT_PINNED);
        OLT_CHECK_EQ(sl[i].len, V - 100);
        OLT_CHECK_MEM(sl[i].data, want[i], V - 100);
        OLT_CHECK_EQ(ol_client_slot_verify(u, &sl[i]), 0);
    }
    uint64_t stats[OL_CLIENT_STATS];
    OLT_CHECK_EQ(ol_client_stats(u, stats), 0);
    OLT_CHECK_EQ(stats[OL_KV_STAT_PINS], K);
    /* a pinned entry cannot be deleted (PINNED) */
    OLT_CHECK_EQ(ol_client_delete(u, keys, 1, st), 0);
    OLT_CHECK(st[0] == OL_KV_PINNED || st[0] == OL_KV_OK);
    int deleted = st[0] == OL_KV_OK;
    /* corrupted bytes are caught by verify and by get (restored after) */
    char *p = sl[1].data;
    p[10] ^= 0x5a;
    OLT_CHECK_EQ(ol_client_slot_verify(u, &sl[1]), -EBADMSG);
    {
        void *bp = back;
        uint64_t cap = V, got = 0;
        OLT_CHECK_EQ(ol_client_get(u, &keys[1], &bp, &cap, &got, 1, st), 0);
        OLT_CHECK_EQ(st[0], OL_KV_CHECKSUM_MISMATCH);
        OLT_CHECK_EQ(got, 0);
    }
    p[10] ^= 0x5a;
    OLT_CHECK_EQ(ol_client_slot_verify(u, &sl[1]), 0);
    /* writing into a reservation is refused for a pinned handle, and the
     * wrong kind of handle is refused by each call */
    OLT_CHECK_EQ(ol_client_commit(u, sl, NULL, 1, st), 0);
    OLT_CHECK_EQ(st[0], OL_KV_STALE_GENERATION);
    OLT_CHECK_EQ(sl[0].state, OL_CLIENT_SLOT_PINNED); /* untouched */
    OLT_CHECK_EQ(ol_client_release(u, sl, K, st), 0);
    for (int i = 0; i < K; i++) {
        OLT_CHECK_EQ(st[i], OL_KV_OK);
        OLT_CHECK_EQ(sl[i].state, OL_CLIENT_SLOT_NONE);
    }
    OLT_CHECK_EQ(ol_client_slot_verify(u, &sl[0]), -EINVAL);
    OLT_CHECK_EQ(ol_client_release(u, sl, K, st), 0);
    OLT_CHECK_EQ(st[0], OL_KV_STALE_GENERATION);
    OLT_CHECK_EQ(ol_client_stats(u, stats), 0);
    OLT_CHECK_EQ(stats[OL_KV_STAT_PINS], 0);
    if (deleted) { /* freed by the last release */
        OLT_CHECK_EQ(ol_client_lookup(u, keys, 1, present, &leading), 0);
        OLT_CHECK_EQ(present[0], 0);
    }
    /* a missing key */
    struct ol_client_key missing = {"no-such-slot", 12};
    OLT_CHECK_EQ(ol_client_acquire(u, &missing, 1, sl, st), 0);
    OLT_CHECK_EQ(st[0], OL_KV_NOT_FOUND);
    OLT_CHECK_EQ(sl[0].state, OL_CLIENT_SLOT_NONE);
    /* a forged handle (another generation) is refused by the server; the
     * real one still commits; too long a length is refused and the slot
     * stays reserved; abort gives it back unpublished */
    struct ol_client_key fresh[2] = {{"fresh-a", 7}, {"fresh-b", 7}};
    OLT_CHECK_EQ(ol_client_reserve(u, fresh, 2, 0, sl, st), 0);
    OLT_CHECK(st[0] == OL_KV_OK && st[1] == OL_KV_OK);
    struct ol_client_slot forged = sl[0];
    forged.gen += 2;
    OLT_CHECK_EQ(ol_client_commit(u, &forged, NULL, 1, st), 0);
    OLT_CHECK_EQ(st[0], OL_KV_STALE_GENERATION);
    OLT_CHECK_EQ(forged.state, OL_CLIENT_SLOT_NONE);
    memcpy(sl[0].data, "hello", 5);
    uint64_t five = 5, huge = sl[1].capacity + 1;
    OLT_CHECK_EQ(ol_client_commit(u, &sl[0], &five, 1, st), 0);
    OLT_CHECK_EQ(st[0], OL_KV_OK);
    OLT_CHECK_EQ(ol_client_commit(u, &sl[1], &huge, 1, st), 0);
    OLT_CHECK_EQ(st[0], OL_KV_TOO_LARGE_ST);
    OLT_CHECK_EQ(sl[1].state, OL_CLIENT_SLOT_RESERVED);
    OLT_CHECK_EQ(ol_client_abort(u, &sl[1], 1, st), 0);
    OLT_CHECK_EQ(st[0], OL_KV_OK);
    OLT_CHECK_EQ(sl[1].state, OL_CLIENT_SLOT_NONE);
    OLT_CHECK_EQ(ol_client_abort(u, &sl[1], 1, st), 0);
    OLT_CHECK_EQ(st[0], OL_KV_STALE_GENERATION);
    OLT_CHECK_EQ(ol_client_lookup(u, fresh, 2, present, &leading), 0);
    OLT_CHECK(present[0] && !present[1]);
    {
        char b5[8];
        void *bp = b5;
        uint64_t cap = sizeof b5, got = 0;
        OLT_CHECK_EQ(ol_client_get(t, fresh, &bp, &cap, &got, 1, st), 0);
        OLT_CHECK_EQ(got, 5);
        OLT_CHECK_MEM(b5, "hello", 5);
    }
    /* an entry written by a client of another value size sits in a slot of
     * another size class: it is pinned and read all the same */
    {
        enum { BIG = 1 << 20 };
        static char big[BIG];
        fill(big, BIG, 4242);
        ol_client *w = open_client(1, "slots", BIG);
        struct ol_client_key bk = {"big-one", 7};
        const void *vp = big;
        uint64_t blen = BIG;
        OLT_CHECK_EQ(ol_client_put(w, &bk, &vp, &blen, 1, st), 0);
        OLT_CHECK_EQ(st[0], OL_KV_OK);
        OLT_CHECK_EQ(ol_client_acquire(u, &bk, 1, sl, st), 0);
        OLT_CHECK_EQ(st[0], OL_KV_OK);
        OLT_CHECK_EQ(sl[0].len, BIG);
        OLT_CHECK_EQ(sl[0].capacity, BIG);
        OLT_CHECK_MEM(sl[0].data, big, BIG);
        OLT_CHECK_EQ(ol_client_slot_verify(u, &sl[0]), 0);
        OLT_CHECK_EQ(ol_client_release(u, sl, 1, st), 0);
        OLT_CHECK_EQ(st[0], OL_KV_OK);
        ol_client_close(w);
    }
    /* bad arguments */
    struct ol_client_key empty = {"", 0};
    OLT_CHECK_EQ(ol_client_reserve(u, &empty, 1, 0, sl, st), -EINVAL);
    OLT_CHECK_EQ(ol_client_acquire(u, &empty, 1, sl, st), -EINVAL);
    ol_client_close(t);
    ol_client_close(u);
}

/* The slot calls need the shared slab: over TCP each says so. */
OLT_TEST(client_slots_need_the_unix_socket)
{
    ol_client *t = open_client(1, "slots-tcp", V);
    struct ol_client_key k = {"k", 1};
    struct ol_client_slot sl = {0};
    uint16_t st;
    OLT_CHECK_EQ(ol_client_reserve(t, &k, 1, 0, &sl, &st), -EOPNOTSUPP);
    OLT_CHECK_EQ(ol_client_acquire(t, &k, 1, &sl, &st), -EOPNOTSUPP);
    OLT_CHECK_EQ(ol_client_commit(t, &sl, NULL, 1, &st), -EOPNOTSUPP);
    OLT_CHECK_EQ(ol_client_abort(t, &sl, 1, &st), -EOPNOTSUPP);
    OLT_CHECK_EQ(ol_client_release(t, &sl, 1, &st), -EOPNOTSUPP);
    OLT_CHECK_EQ(ol_client_slot_verify(t, &sl), -EINVAL);
    ol_client_close(t);
}

/* A pinned slot is never evicted or reused: fill the slab several times
 * over while holding a pin, and the pinned bytes stay as they were. */
OLT_TEST_T(client_pinned_slot_survives_eviction, 120)
{
    enum { BIG = 1 << 20 };
    ol_client *u = open_client(0, "pressure", BIG);
    static char val[BIG], other[BIG];
    fill(val, BIG, 99);
    struct ol_client_key k = {"pinned", 6};
    const void *vp = val;
    uint64_t len = BIG;
    uint16_t st;
    OLT_CHECK_EQ(ol_client_put(u, &k, &vp, &len, 1, &st), 0);
    OLT_CHECK_EQ(st, OL_KV_OK);
    struct ol_client_slot pin;
    OLT_CHECK_EQ(ol_client_acquire(u, &k, 1, &pin, &st), 0);
    OLT_CHECK_EQ(st, OL_KV_OK);
    uint64_t before[OL_CLIENT_STATS], after[OL_CLIENT_STATS];
    OLT_CHECK_EQ(ol_client_stats(u, before), 0);
    /* 0.25 GiB slab: 600 values of 1 MiB overflow it more than twice */
    for (int i = 0; i < 600; i++) {
        char name[32];
        struct ol_client_key o = {name, (uint16_t)snprintf(name, sizeof name, "fill-%d", i)};
        fill(other, BIG, (unsigned)i);
        const void *op = other;
        OLT_CHECK_EQ(ol_client_put(u, &o, &op, &len, 1, &st), 0);
        OLT_CHECK(st == OL_KV_OK || st == OL_KV_NOSPACE || st == OL_KV_BUSY);
    }
    OLT_CHECK_EQ(ol_client_stats(u, after), 0);
    OLT_CHECK(after[OL_KV_STAT_EVICTIONS] > before[OL_KV_STAT_EVICTIONS]);
    OLT_CHECK_MEM(pin.data, val, BIG);
    OLT_CHECK_EQ(ol_client_slot_verify(u, &pin), 0);
    uint8_t present;
    uint32_t leading;
    OLT_CHECK_EQ(ol_client_lookup(u, &k, 1, &present, &leading), 0);
    OLT_CHECK_EQ(present, 1);
    OLT_CHECK_EQ(ol_client_release(u, &pin, 1, &st), 0);
    OLT_CHECK_EQ(st, OL_KV_OK);
    ol_client_close(u);
}

/* get sends its RELEASE without waiting; the answer is read by the next call
 * on that connection. Back-to-back gets mixed with lookups, puts and stats
 * on one client, from two threads, stay in step and leave no pins. */
#define GB_KEYS 40
#define GB_V 8192

struct getter {
    ol_client *c;
    int id, errors;
};

static void *get_loop(void *arg)
{
    struct getter *w = arg;
    char names[GB_KEYS][24];
    struct ol_client_key keys[GB_KEYS];
    static char vals[2][GB_KEYS][GB_V], back[2][GB_KEYS][GB_V];
    const void *vp[GB_KEYS];
    void *bp[GB_KEYS];
    uint64_t lens[GB_KEYS], caps[GB_KEYS], got[GB_KEYS];
    uint16_t st[GB_KEYS];
    uint8_t present[GB_KEYS];
    uint32_t leading;
    for (int i = 0; i < GB_KEYS; i++) {
        keys[i].len = (uint16_t)snprintf(names[i], sizeof names[i], "gb%d-%d", w->id, i);
        keys[i].data = names[i];
        fill(vals[w->id][i], GB_V, (unsigned)(w->id * 100 + i));
        vp[i] = vals[w->id][i];
        bp[i] = back[w->id][i];
        lens[i] = GB_V - (uint64_t)i;
        caps[i] = GB_V;
    }
    if (ol_client_put(w->c, keys, vp, lens, GB_KEYS, st) < 0)
        w->errors++;
    for (int r = 0; r < 200; r++) {
        uint32_t n = 1 + (uint32_t)(r * 7) % GB_KEYS, off = (uint32_t)r % (GB_KEYS - n + 1);
        memset(back[w->id], 0, sizeof back[w->id]);
        if (ol_client_get(w->c, keys + off, bp + off, caps + off, got + off, n, st + off) < 0)
            w->errors++;
        for (uint32_t i = off; i < off + n; i++)
            if (st[i] != OL_KV_OK || got[i] != lens[i] || memcmp(back[w->id][i], vals[w->id][i], lens[i]))
                w->errors++;
        if (r % 3 == 0 && (ol_client_lookup(w->c, keys, GB_KEYS, present, &leading) < 0 ||
                           leading != GB_KEYS))
            w->errors++;
        if (r % 5 == 1) { /* a put right after a get: EXISTS */
            if (ol_client_put(w->c, keys + off, vp + off, lens + off, 1, st) < 0 || st[0] != OL_KV_EXISTS)
                w->errors++;
        }
        if (r % 11 == 2) {
            struct ol_client_slot sl;
            uint16_t s1;
            if (ol_client_acquire(w->c, keys + off, 1, &sl, &s1) < 0 || s1 != OL_KV_OK ||
                memcmp(sl.data, vals[w->id][off], lens[off]) != 0 ||
                ol_client_release(w->c, &sl, 1, &s1) < 0 || s1 != OL_KV_OK)
                w->errors++;
        }
    }
    /* a get of keys that are not there, and of one that is */
    char miss[] = "gb-missing";
    struct ol_client_key mk[2] = {{miss, sizeof miss - 1}, keys[0]};
    void *mb[2] = {back[w->id][1], back[w->id][0]};
    uint64_t mc[2] = {GB_V, GB_V}, mg[2];
    if (ol_client_get(w->c, mk, mb, mc, mg, 2, st) < 0 || st[0] != OL_KV_NOT_FOUND || st[1] != OL_KV_OK)
        w->errors++;
    return NULL;
}

OLT_TEST(client_back_to_back_gets_leave_no_pins)
{
    ol_client *c = open_client(0, "getloop", GB_V);
    uint64_t stats[OL_CLIENT_STATS], errs;
    OLT_CHECK_EQ(ol_client_stats(c, stats), 0);
    errs = stats[OL_KV_STAT_PROTOCOL_ERRORS];
    struct getter one = {c, 0, 0};
    get_loop(&one);
    OLT_CHECK_EQ(one.errors, 0);
    OLT_CHECK_EQ(ol_client_stats(c, stats), 0);
    OLT_CHECK_EQ(stats[OL_KV_STAT_PINS], 0);
    pthread_t th[2];
    struct getter w[2];
    for (int i = 0; i < 2; i++) {
        w[i] = (struct getter){c, i, 0};
        pthread_create(&th[i], NULL, get_loop, &w[i]);
    }
    for (int i = 0; i < 2; i++) {
        pthread_join(th[i], NULL);
        OLT_CHECK_EQ(w[i].errors, 0);
    }
    OLT_CHECK_EQ(ol_client_stats(c, stats), 0);
    OLT_CHECK_EQ(stats[OL_KV_STAT_PINS], 0);
    OLT_CHECK_EQ(stats[OL_KV_STAT_PROTOCOL_ERRORS], errs);
    ol_client_close(c);
}

/* Closing right after a get (its RELEASE answer unread) neither hangs nor
 * leaves pins: another client sees none. */
OLT_TEST_T(client_close_right_after_get, 30)
{
    char names[GB_KEYS][24];
    struct ol_client_key keys[GB_KEYS];
    static char val[GB_V], back[GB_KEYS][GB_V];
    const void *vp[GB_KEYS];
    void *bp[GB_KEYS];
    uint64_t lens[GB_KEYS], caps[GB_KEYS], got[GB_KEYS];
    uint16_t st[GB_KEYS];
    fill(val, GB_V, 3);
    for (int i = 0; i < GB_KEYS; i++) {
        keys[i].len = (uint16_t)snprintf(names[i], sizeof names[i], "cl-%d", i);
        keys[i].data = names[i];
        vp[i] = val;
        bp[i] = back[i];
        lens[i] = GB_V;
        caps[i] = GB_V;
    }
    ol_client *w = open_client(0, "closeget", GB_V);
    OLT_CHECK_EQ(ol_client_put(w, keys, vp, lens, GB_KEYS, st), 0);
    ol_client_close(w);
    for (int r = 0; r < 20; r++) {
        ol_client *c = open_client(0, "closeget", GB_V);
        OLT_CHECK_EQ(ol_client_get(c, keys, bp, caps, got, GB_KEYS, st), 0);
        for (int i = 0; i < GB_KEYS; i++) {
            OLT_CHECK_EQ(st[i], OL_KV_OK);
            OLT_CHECK_MEM(back[i], val, GB_V);
        }
        ol_client_close(c);
        ol_client *o = open_client(0, "closeget", GB_V);
        uint64_t stats[OL_CLIENT_STATS];
        OLT_CHECK_EQ(ol_client_stats(o, stats), 0);
        OLT_CHECK_EQ(stats[OL_KV_STAT_PINS], 0);
        ol_client_close(o);
    }
}

struct worker {
    ol_client *c;
    int id, errors;
};

static void *work(void *arg)
{
    struct worker *w = arg;
    char name[32], val[4096], back[4096];
    for (int i = 0; i < 300; i++) {
        struct ol_client_key k = {name, (uint16_t)snprintf(name, sizeof name, "t%d-%d", w->id, i)};
        fill(val, sizeof val, (unsigned)(w->id * 1000 + i));
        const void *vp = val;
        void *bp = back;
        uint64_t len = sizeof val, cap = sizeof back, got;
        uint16_t st;
        if (ol_client_put(w->c, &k, &vp, &len, 1, &st) < 0 || st != OL_KV_OK)
            w->errors++;
        if (ol_client_get(w->c, &k, &bp, &cap, &got, 1, &st) < 0 || st != OL_KV_OK ||
            got != len || memcmp(back, val, len) != 0)
            w->errors++;
        struct ol_client_slot sl;
        if (ol_client_acquire(w->c, &k, 1, &sl, &st) < 0 || st != OL_KV_OK || sl.len != len ||
            memcmp(sl.data, val, len) != 0 || ol_client_release(w->c, &sl, 1, &st) < 0 ||
            st != OL_KV_OK)
            w->errors++;
    }
    return NULL;
}

OLT_TEST(client_is_safe_from_many_threads)
{
    ol_client *c = open_client(0, "threads", 4096);
    pthread_t th[4];
    struct worker w[4];
    for (int i = 0; i < 4; i++) {
        w[i] = (struct worker){c, i, 0};
        pthread_create(&th[i], NULL, work, &w[i]);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        OLT_CHECK_EQ(w[i].errors, 0);
    }
    ol_client_close(c);
}

/* The daemon is restarted under a live client (the test driver does it when
 * asked over OL_TEST_CTL_REQ / OL_TEST_CTL_ACK, two pipe fds): calls fail
 * cleanly (-EAGAIN / -EIO / -ETIMEDOUT, never a crash or a wrong answer)
 * and work again after the client reconnects on its own. */
OLT_TEST_T(client_reconnects_after_daemon_restart, 60)
{
    const char *req = getenv("OL_TEST_CTL_REQ"), *ack = getenv("OL_TEST_CTL_ACK");
    if (!req || !ack)
        OLT_SKIP("needs the test driver's restart pipe");
    ol_client *c = open_client(0, "restart", 4096);
    char name[] = "survivor";
    struct ol_client_key k = {name, sizeof name - 1};
    char val[4096], back[4096];
    fill(val, sizeof val, 7);
    const void *vp = val;
    void *bp = back;
    uint64_t len = sizeof val, cap = sizeof back, got;
    uint16_t st;
    OLT_CHECK_EQ(ol_client_put(c, &k, &vp, &len, 1, &st), 0);
    /* handles held across the restart: a pin and a reservation (on either shard) */
    struct ol_client_slot pin, res[4];
    char rnames[4][16];
    struct ol_client_key rkeys[4];
    uint16_t rst[4];
    for (int i = 0; i < 4; i++) {
        rkeys[i].len = (uint16_t)snprintf(rnames[i], sizeof rnames[i], "pending-%d", i);
        rkeys[i].data = rnames[i];
    }
    OLT_CHECK_EQ(ol_client_acquire(c, &k, 1, &pin, &st), 0);
    OLT_CHECK_EQ(st, OL_KV_OK);
    OLT_CHECK_EQ(ol_client_reserve(c, rkeys, 4, 0, res, rst), 0);
    /* and a get whose RELEASE answer is still unread when the daemon goes */
    OLT_CHECK_EQ(ol_client_get(c, &k, &bp, &cap, &got, 1, &st), 0);
    OLT_CHECK_EQ(st, OL_KV_OK);
    char b = 'r';
    OLT_CHECK_EQ(write(atoi(req), &b, 1), 1);
    OLT_CHECK_EQ(read(atoi(ack), &b, 1), 1); /* the daemon is back (empty cache) */
    int failures = 0, ok = 0;
    for (int i = 0; i < 400 && !ok; i++) {
        uint8_t p;
        uint32_t lead;
        int rc = ol_client_lookup(c, &k, 1, &p, &lead);
        if (rc == 0)
            ok = 1;
        else {
            OLT_CHECK(rc == -EAGAIN || rc == -EIO || rc == -ETIMEDOUT);
            failures++;
            usleep(10000);
        }
    }
    OLT_CHECK(ok);
    OLT_CHECK(failures >= 1); /* the old connections were noticed as gone */
    /* the old handles are refused, never sent to the new daemon; the old
     * mapping is still there, so the pinned bytes are still readable */
    OLT_CHECK_EQ(ol_client_slot_verify(c, &pin), -ESTALE);
    OLT_CHECK_MEM(pin.data, val, sizeof val);
    OLT_CHECK_EQ(ol_client_release(c, &pin, 1, &st), 0);
    OLT_CHECK_EQ(st, OL_KV_STALE_GENERATION);
    int rc = -EAGAIN;
    for (int i = 0; i < 400 && rc != 0; i++) {
        /* a shard not used since the restart first finds its connection dead */
        rc = ol_client_commit(c, res, NULL, 4, rst);
        OLT_CHECK(rc == 0 || rc == -EAGAIN || rc == -EIO || rc == -ETIMEDOUT);
        if (rc)
            usleep(10000);
    }
    OLT_CHECK_EQ(rc, 0);
    for (int i = 0; i < 4; i++) {
        OLT_CHECK_EQ(rst[i], OL_KV_STALE_GENERATION);
        OLT_CHECK_EQ(res[i].state, OL_CLIENT_SLOT_NONE);
    }
    /* a fresh daemon: the value is gone, and the client stores again */
    OLT_CHECK_EQ(ol_client_get(c, &k, &bp, &cap, &got, 1, &st), 0);
    OLT_CHECK_EQ(st, OL_KV_NOT_FOUND);
    OLT_CHECK_EQ(ol_client_put(c, &k, &vp, &len, 1, &st), 0);
    OLT_CHECK_EQ(st, OL_KV_OK);
    OLT_CHECK_EQ(ol_client_get(c, &k, &bp, &cap, &got, 1, &st), 0);
    OLT_CHECK_EQ(st, OL_KV_OK);
    OLT_CHECK_MEM(back, val, sizeof val);
    /* the value is really in the new daemon's slab: another client reads it */
    ol_client *o = open_client(0, "restart", 4096);
    memset(back, 0, sizeof back);
    OLT_CHECK_EQ(ol_client_get(o, &k, &bp, &cap, &got, 1, &st), 0);
    OLT_CHECK_EQ(st, OL_KV_OK);
    OLT_CHECK_MEM(back, val, sizeof val);
    ol_client_close(o);
    ol_client_close(c);
}

/* Reads until the daemon ends the link: 0 when it did within the link's
 * timeout, -ETIMEDOUT when it did not. */
static long ucx_until_closed(struct ol_cux *u)
{
    static char b[65536];
    long n;
    while ((n = ol_cux_recv(u, b, sizeof b)) > 0)
        ; /* an ERROR frame may come first */
    return n;
}

/* Raw UCP endpoints on the daemon's UCX listener (kv_ucx_addr) that do
 * not say HELLO: one silent (closed at kv_hello_timeout_ms, 1 s in the
 * test), one that floods 256 KiB of garbage (closed at once: the server
 * refuses the bytes, or the bridge's 64 KiB before an answer). The daemon
 * holds nothing for either after (test_kv_ucx.py checks its gauge). */
OLT_TEST(client_ucx_strangers_are_dropped)
{
    const char *a = getenv("OL_TEST_KV_UCX");
    if (!a || !*a)
        OLT_SKIP("needs a daemon's kv_ucx_addr: run through tests/integration/test_kv_ucx.py");
    char host[128];
    const char *colon = strrchr(a, ':');
    OLT_CHECK(colon && colon - a < (long)sizeof host);
    snprintf(host, sizeof host, "%.*s", (int)(colon - a), a);
    struct ol_cux *silent = NULL, *flood = NULL;
    OLT_CHECK_EQ(ol_cux_open(host, colon + 1, 5000, &silent), 0);
    OLT_CHECK_EQ(ol_cux_open(host, colon + 1, 5000, &flood), 0);
    static char junk[256 << 10];
    memset(junk, 0xab, sizeof junk);
    struct iovec iov = {junk, sizeof junk};
    int rc = ol_cux_sendv(flood, &iov, 1);
    OLT_CHECK(rc == 0 || rc == -ECONNRESET);
    OLT_CHECK_EQ(ucx_until_closed(flood), 0);
    OLT_CHECK_EQ(ucx_until_closed(silent), 0);
    ol_cux_close(flood);
    ol_cux_close(silent);
}
