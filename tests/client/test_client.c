/*
 * test_client.c - the C client against a real openlaked. Run by
 * tests/integration/test_client.py, which starts a daemon with two shards
 * and sets OL_TEST_KV_SOCK (Unix socket), OL_TEST_KV_TCP (host:port) and
 * OL_TEST_KV_TOKEN_FILE. Without them every test skips.
 */
#include "olt.h"

#include "openlake/client.h"
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
