/*
 * test_store_index.c - unit tests of src/store/index*.c, the ordered
 * per-bucket key index: put / replace / remove / get and the cursor
 * against a sorted-array model under random operations (tree invariants
 * checked throughout, prefix-losing and 1024-byte-key splits included);
 * the S3 listing against a naive reference (a scan of the sorted key
 * array) on random key sets, prefixes, delimiters, markers and max-keys,
 * both the jumping walk and its plain twin, whole listings paged through
 * their next markers, and the edge cases by name; persistence across
 * close and reopen; torn log tails at every byte; a corrupt byte in the
 * middle of the log; checkpoint then more log; corrupt, truncated and
 * newer snapshots; every crash state of a checkpoint; the directory lock;
 * a flush whose write fails and is retried; the log bytes of the worked
 * example in docs/store-index.md; and the key length limits.
 */
#include "olt.h"

#include "store/index.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

/* ---- helpers ----------------------------------------------------------- */

static uint64_t s_rng;
static uint64_t rnd(void)
{
    s_rng ^= s_rng << 13;
    s_rng ^= s_rng >> 7;
    s_rng ^= s_rng << 17;
    return s_rng;
}
static unsigned rn(unsigned n) { return n ? (unsigned)(rnd() % n) : 0; }

static struct ol_index_rec rec_of(uint64_t v, uint8_t flags)
{
    struct ol_index_rec r;
    memset(&r, 0, sizeof r);
    r.size = v * 7919;
    r.mtime_ns = 1700000000000000000ull + v;
    for (int i = 0; i < 16; i++) {
        r.etag[i] = (uint8_t)(v >> (i % 8) * 8) ^ (uint8_t)i;
        r.version_id[i] = (uint8_t)(v * 31 + (uint64_t)i);
    }
    r.etag_parts = (uint16_t)(v % 3);
    r.storage_class = (uint8_t)(v % 2);
    r.flags = flags;
    return r;
}

static bool rec_eq(const struct ol_index_rec *a, const struct ol_index_rec *b)
{
    return a->size == b->size && a->mtime_ns == b->mtime_ns && !memcmp(a->etag, b->etag, 16) &&
           a->etag_parts == b->etag_parts && a->storage_class == b->storage_class && a->flags == b->flags &&
           !memcmp(a->version_id, b->version_id, 16);
}

static int bcmp_(const uint8_t *a, size_t al, const uint8_t *b, size_t bl)
{
    size_t m = al < bl ? al : bl;
    int c = m ? memcmp(a, b, m) : 0;
    return c ? c : (al > bl) - (al < bl);
}

/* The model: a sorted array of keys with their records. */
struct mkey {
    uint8_t *k; /* malloc'd */
    size_t len;
    struct ol_index_rec rec;
};
struct model {
    struct mkey *v;
    size_t n, cap;
};

static size_t m_lb(const struct model *m, const uint8_t *k, size_t len)
{
    size_t lo = 0, hi = m->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (bcmp_(m->v[mid].k, m->v[mid].len, k, len) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static int m_put(struct model *m, const uint8_t *k, size_t len, const struct ol_index_rec *r)
{
    size_t i = m_lb(m, k, len);
    if (i < m->n && bcmp_(m->v[i].k, m->v[i].len, k, len) == 0) {
        m->v[i].rec = *r;
        return 1;
    }
    if (m->n == m->cap) {
        m->cap = m->cap ? m->cap * 2 : 64;
        m->v = realloc(m->v, m->cap * sizeof *m->v);
        OLT_CHECK(m->v);
    }
    memmove(&m->v[i + 1], &m->v[i], (m->n - i) * sizeof *m->v);
    m->v[i].k = malloc(len);
    OLT_CHECK(m->v[i].k);
    memcpy(m->v[i].k, k, len);
    m->v[i].len = len;
    m->v[i].rec = *r;
    m->n++;
    return 0;
}

static int m_remove(struct model *m, const uint8_t *k, size_t len)
{
    size_t i = m_lb(m, k, len);
    if (i == m->n || bcmp_(m->v[i].k, m->v[i].len, k, len) != 0)
        return -ENOENT;
    free(m->v[i].k);
    memmove(&m->v[i], &m->v[i + 1], (m->n - i - 1) * sizeof *m->v);
    m->n--;
    return 0;
}

static void m_free(struct model *m)
{
    for (size_t i = 0; i < m->n; i++)
        free(m->v[i].k);
    free(m->v);
    memset(m, 0, sizeof *m);
}

/* The index holds exactly the model: get of every key, and a cursor walk. */
static void check_equal(const struct ol_index *idx, const struct model *m)
{
    OLT_CHECK_EQ(ol_index_check(idx), 0);
    OLT_CHECK_EQ(ol_index_count(idx), m->n);
    struct ol_index_cursor c;
    int r = ol_index_seek(idx, &c, NULL, 0, false);
    for (size_t i = 0; i < m->n; i++) {
        OLT_CHECK_EQ(r, 1);
        OLT_CHECK_EQ(c.klen, m->v[i].len);
        OLT_CHECK_MEM(c.key, m->v[i].k, m->v[i].len);
        OLT_CHECK(rec_eq(&c.rec, &m->v[i].rec));
        r = ol_index_next(&c);
    }
    OLT_CHECK_EQ(r, 0);
    for (size_t i = 0; i < m->n; i += 1 + m->n / 64) {
        struct ol_index_rec g;
        OLT_CHECK_EQ(ol_index_get(idx, m->v[i].k, m->v[i].len, &g), 0);
        OLT_CHECK(rec_eq(&g, &m->v[i].rec));
    }
}

/* Random key over a small alphabet (many shared prefixes and delimiters,
 * multibyte UTF-8, 0xff bytes). */
static size_t rand_key(uint8_t *k, size_t maxlen)
{
    static const char *tok[] = {"a", "b", "/", "ab", "\xc3\xa9", "\xff", "z", "0", "\xe2\x82\xac", "-"};
    size_t len = 0, ntok = 1 + rn(8);
    for (size_t t = 0; t < ntok; t++) {
        const char *s = tok[rn(sizeof tok / sizeof tok[0])];
        size_t sl = strlen(s);
        if (len + sl > maxlen)
            break;
        memcpy(k + len, s, sl);
        len += sl;
    }
    if (len == 0)
        k[len++] = 'a';
    return len;
}

static void path_of(char *out, size_t n, const char *dir, const char *name)
{
    int w = snprintf(out, n, "%s/%s", dir, name);
    OLT_CHECK(w > 0 && (size_t)w < n);
}

static uint8_t *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long sz = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc((size_t)sz + 1);
    OLT_CHECK(b && fread(b, 1, (size_t)sz, f) == (size_t)sz);
    fclose(f);
    *len = (size_t)sz;
    return b;
}

static void write_file(const char *path, const uint8_t *b, size_t len)
{
    FILE *f = fopen(path, "wb");
    OLT_CHECK(f);
    OLT_CHECK(len == 0 || fwrite(b, 1, len, f) == len);
    OLT_CHECK(fclose(f) == 0);
}

static bool exists(const char *dir, const char *name)
{
    char p[512];
    path_of(p, sizeof p, dir, name);
    return access(p, F_OK) == 0;
}

static const char *idx_dir(void)
{
    static char d[512];
    int w = snprintf(d, sizeof d, "%s/index", olt_tmpdir());
    OLT_CHECK(w > 0 && (size_t)w < sizeof d);
    return d;
}

/* An index in dir holding exactly m after a checkpoint (so it opens). */
static struct ol_index *fresh(const char *dir)
{
    struct ol_index *idx;
    OLT_CHECK_EQ(ol_index_create_empty(dir, &idx), 0);
    OLT_CHECK_EQ(ol_index_checkpoint(idx), 0);
    return idx;
}

static void put_ok(struct ol_index *idx, struct model *m, const void *k, size_t len, uint64_t v)
{
    struct ol_index_rec r = rec_of(v, (uint8_t)(v % 4));
    int want = m ? m_put(m, k, len, &r) : 0;
    int got = ol_index_put(idx, k, len, &r);
    if (m)
        OLT_CHECK_EQ(got, want);
    else
        OLT_CHECK(got >= 0);
}

static size_t knum(uint8_t *k, unsigned i) { return (size_t)sprintf((char *)k, "obj/%06u.bin", i); }

/* ---- map ---------------------------------------------------------------- */

OLT_TEST(store_index_put_get_remove)
{
    struct ol_index *idx;
    OLT_CHECK_EQ(ol_index_create_empty(NULL, &idx), 0);
    struct ol_index_rec r1 = rec_of(1, 0), r2 = rec_of(2, OL_INDEX_F_VERSIONS), g;
    OLT_CHECK_EQ(ol_index_get(idx, "a", 1, &g), -ENOENT);
    OLT_CHECK_EQ(ol_index_put(idx, "a", 1, &r1), 0);
    OLT_CHECK_EQ(ol_index_put(idx, "b", 1, &r1), 0);
    OLT_CHECK_EQ(ol_index_get(idx, "a", 1, &g), 0);
    OLT_CHECK(rec_eq(&g, &r1));
    OLT_CHECK_EQ(ol_index_put(idx, "a", 1, &r2), 1); /* replaced */
    OLT_CHECK_EQ(ol_index_get(idx, "a", 1, &g), 0);
    OLT_CHECK(rec_eq(&g, &r2));
    OLT_CHECK_EQ(ol_index_count(idx), 2);
    OLT_CHECK_EQ(ol_index_get(idx, "ab", 2, &g), -ENOENT);
    OLT_CHECK_EQ(ol_index_remove(idx, "ab", 2), -ENOENT);
    OLT_CHECK_EQ(ol_index_remove(idx, "a", 1), 0);
    OLT_CHECK_EQ(ol_index_remove(idx, "a", 1), -ENOENT);
    OLT_CHECK_EQ(ol_index_get(idx, "a", 1, &g), -ENOENT);
    OLT_CHECK_EQ(ol_index_get(idx, "b", 1, &g), 0);
    OLT_CHECK_EQ(ol_index_count(idx), 1);
    struct ol_index_rec bad = rec_of(3, 0x80);
    OLT_CHECK_EQ(ol_index_put(idx, "c", 1, &bad), -EINVAL);
    OLT_CHECK_EQ(ol_index_remove(idx, "b", 1), 0);
    OLT_CHECK_EQ(ol_index_count(idx), 0);
    OLT_CHECK_EQ(ol_index_check(idx), 0);
    OLT_CHECK_EQ(ol_index_flush(idx), 0);               /* memory-only: no-op */
    OLT_CHECK_EQ(ol_index_checkpoint(idx), -EINVAL);
    ol_index_close(idx);
}

OLT_TEST(store_index_limits)
{
    struct ol_index *idx = fresh(idx_dir());
    uint8_t k[OL_INDEX_KEY_MAX + 1];
    memset(k, 'k', sizeof k);
    struct ol_index_rec r = rec_of(9, 0), g;
    OLT_CHECK_EQ(ol_index_put(idx, k, OL_INDEX_KEY_MAX, &r), 0);
    OLT_CHECK_EQ(ol_index_put(idx, k, OL_INDEX_KEY_MAX + 1, &r), -EINVAL);
    OLT_CHECK_EQ(ol_index_put(idx, k, 0, &r), -EINVAL);
    OLT_CHECK_EQ(ol_index_get(idx, k, OL_INDEX_KEY_MAX + 1, &g), -EINVAL);
    OLT_CHECK_EQ(ol_index_get(idx, k, 0, &g), -EINVAL);
    OLT_CHECK_EQ(ol_index_remove(idx, k, OL_INDEX_KEY_MAX + 1), -EINVAL);
    OLT_CHECK_EQ(ol_index_remove(idx, k, 0), -EINVAL);
    memset(k, 0xff, sizeof k); /* 0xff everywhere: sorts last */
    OLT_CHECK_EQ(ol_index_put(idx, k, OL_INDEX_KEY_MAX, &r), 0);
    OLT_CHECK_EQ(ol_index_flush(idx), 0);
    ol_index_close(idx);
    struct ol_index_open_info info;
    OLT_CHECK_EQ(ol_index_open(idx_dir(), &idx, &info), 0);
    OLT_CHECK_EQ(info.keys, 2);
    OLT_CHECK_EQ(ol_index_get(idx, k, OL_INDEX_KEY_MAX, &g), 0);
    OLT_CHECK(rec_eq(&g, &r));
    OLT_CHECK_EQ(ol_index_checkpoint(idx), 0);
    ol_index_close(idx);
    OLT_CHECK_EQ(ol_index_open(idx_dir(), &idx, &info), 0);
    OLT_CHECK_EQ(info.snapshot_keys, 2);
    memset(k, 'k', sizeof k);
    OLT_CHECK_EQ(ol_index_get(idx, k, OL_INDEX_KEY_MAX, &g), 0);
    ol_index_close(idx);
}

/* Random puts and removes over a few key shapes, against the model. */
OLT_TEST_T(store_index_random_ops, 120)
{
    for (unsigned round = 0; round < 4; round++) {
        s_rng = 0x9e3779b97f4a7c15ull + round;
        struct ol_index *idx;
        OLT_CHECK_EQ(ol_index_create_empty(NULL, &idx), 0);
        struct model m = {0};
        uint8_t k[OL_INDEX_KEY_MAX];
        unsigned ops = 30000;
        for (unsigned i = 0; i < ops; i++) {
            size_t len;
            switch (round) {
            case 0: len = (size_t)sprintf((char *)k, "dir%02u/file%05u", rn(40), rn(3000)); break;
            case 1: len = rand_key(k, 40); break;
            case 2: /* long keys sharing long prefixes */
                len = 200 + rn(824);
                memset(k, 'p', len);
                sprintf((char *)k + len - 12, "%06u%06u", rn(50), rn(1000));
                k[len - 13] = (uint8_t)('a' + rn(3));
                break;
            default:
                len = 1 + rn(60);
                for (size_t j = 0; j < len; j++)
                    k[j] = (uint8_t)rnd();
                if (rn(2))
                    len = 1 + rn(3); /* and a dense small space to remove from */
                break;
            }
            /* Mostly growth, then a removal phase down to a few keys. */
            bool grow = i < ops * 6 / 10 ? rn(10) < 7 : rn(10) < 2;
            if (grow) {
                put_ok(idx, &m, k, len, i);
            } else if (m.n) {
                size_t at = rn((unsigned)m.n);
                uint8_t kk[OL_INDEX_KEY_MAX];
                size_t kl = m.v[at].len;
                memcpy(kk, m.v[at].k, kl);
                OLT_CHECK_EQ(ol_index_remove(idx, kk, kl), m_remove(&m, kk, kl));
            }
            if (i % 5000 == 4999)
                check_equal(idx, &m);
        }
        check_equal(idx, &m);
        while (m.n) { /* empty it completely */
            size_t at = rn((unsigned)m.n);
            uint8_t kk[OL_INDEX_KEY_MAX];
            size_t kl = m.v[at].len;
            memcpy(kk, m.v[at].k, kl);
            OLT_CHECK_EQ(ol_index_remove(idx, kk, kl), 0);
            m_remove(&m, kk, kl);
        }
        check_equal(idx, &m);
        struct ol_index_stats st;
        ol_index_stats(idx, &st);
        OLT_CHECK_EQ(st.height, 0);
        OLT_CHECK_EQ(st.leaves, 1);
        m_free(&m);
        ol_index_close(idx);
    }
}

/* Keys sorted in, and sorted the other way: full leaves, many levels. */
OLT_TEST(store_index_sequential_fill)
{
    struct ol_index *idx;
    OLT_CHECK_EQ(ol_index_create_empty(NULL, &idx), 0);
    struct model m = {0};
    uint8_t k[64];
    for (unsigned i = 0; i < 60000; i++)
        put_ok(idx, &m, k, knum(k, i), i); /* appends to the model too */
    check_equal(idx, &m);
    struct ol_index_stats st;
    ol_index_stats(idx, &st);
    OLT_CHECK(st.height >= 2);
    /* Appending fills leaves: ~4 KiB / 62 bytes per entry. */
    OLT_CHECK(st.keys / st.leaves >= 50);
    for (unsigned i = 60000; i-- > 30000;) {
        size_t len = knum(k, i);
        OLT_CHECK_EQ(ol_index_remove(idx, k, len), m_remove(&m, k, len));
    }
    /* Descending keys, all before the rest: always slot 0 of the first leaf.
     * The model is rebuilt in one go (inserting at its front is slow). */
    struct model d = {0};
    for (unsigned i = 100000; i-- > 90000;) {
        struct ol_index_rec r = rec_of(i, 0);
        size_t len = (size_t)sprintf((char *)k, "a%u", i);
        OLT_CHECK_EQ(ol_index_put(idx, k, len, &r), 0);
        OLT_CHECK_EQ(m_put(&d, k, len, &r), 0); /* d grows at its front: small */
    }
    d.v = realloc(d.v, (d.n + m.n) * sizeof *d.v);
    OLT_CHECK(d.v);
    memcpy(&d.v[d.n], m.v, m.n * sizeof *m.v);
    d.n += m.n;
    d.cap = d.n;
    free(m.v);
    check_equal(idx, &d);
    m_free(&d);
    ol_index_close(idx);
}

static int mkey_cmp(const void *a, const void *b)
{
    const struct mkey *x = a, *y = b;
    return bcmp_(x->k, x->len, y->k, y->len);
}

/* Many keys in random order, then contiguous ranges removed: inner nodes
 * run low beside full siblings (borrow) and beside sparse ones (merge). */
OLT_TEST_T(store_index_range_deletes, 120)
{
    s_rng = 4242;
    struct ol_index *idx;
    OLT_CHECK_EQ(ol_index_create_empty(NULL, &idx), 0);
    struct model m = {0};
    unsigned n = 150000;
    m.v = calloc(n, sizeof *m.v);
    OLT_CHECK(m.v);
    m.cap = n;
    uint8_t k[32];
    for (unsigned i = 0; i < n; i++) {
        uint32_t x = (uint32_t)rnd();
        size_t len = (size_t)sprintf((char *)k, "k%08x%u", x, i);
        struct ol_index_rec r = rec_of(i, 0);
        OLT_CHECK_EQ(ol_index_put(idx, k, len, &r), 0);
        m.v[m.n].k = malloc(len);
        memcpy(m.v[m.n].k, k, len);
        m.v[m.n].len = len;
        m.v[m.n++].rec = r;
    }
    qsort(m.v, m.n, sizeof *m.v, mkey_cmp);
    check_equal(idx, &m);
    for (unsigned round = 0; round < 60 && m.n; round++) {
        size_t len = 100 + rn(round < 30 ? 3000 : 8000);
        size_t at = rn((unsigned)m.n);
        if (at + len > m.n)
            len = m.n - at;
        for (size_t i = at; i < at + len; i++) {
            OLT_CHECK_EQ(ol_index_remove(idx, m.v[i].k, m.v[i].len), 0);
            free(m.v[i].k);
        }
        memmove(&m.v[at], &m.v[at + len], (m.n - at - len) * sizeof *m.v);
        m.n -= len;
        if (round % 6 == 5)
            check_equal(idx, &m);
    }
    check_equal(idx, &m);
    m_free(&m);
    ol_index_close(idx);
}

/* A key that lands between two leaves and shares little with its leaf's
 * 990-byte prefix: every entry would grow, so it gets a leaf of its own. */
OLT_TEST(store_index_prefix_loss_split)
{
    struct ol_index *idx;
    OLT_CHECK_EQ(ol_index_create_empty(NULL, &idx), 0);
    struct model m = {0};
    uint8_t k[OL_INDEX_KEY_MAX];
    memset(k, 'P', sizeof k);
    for (unsigned i = 0; i < 45; i++)
        put_ok(idx, &m, k, 990 + (size_t)sprintf((char *)k + 990, "%09u", i), i);
    put_ok(idx, &m, "Q", 1, 100);
    put_ok(idx, &m, "O", 1, 101);
    check_equal(idx, &m);
    struct ol_index_stats before, after;
    ol_index_stats(idx, &before);
    OLT_CHECK_EQ(before.leaves, 3); /* O | P...P x45 | Q */
    memset(k, 'P', sizeof k);
    k[500] = 'Q';
    put_ok(idx, &m, k, 501, 102); /* after every P...P key, before "Q" */
    k[500] = 'A';
    put_ok(idx, &m, k, 501, 103); /* before every P...P key, after "O" */
    check_equal(idx, &m);
    ol_index_stats(idx, &after);
    OLT_CHECK(after.leaves >= before.leaves + 1);
    /* and a key in the middle of the full leaf: a plain split */
    memset(k, 'P', sizeof k);
    put_ok(idx, &m, k, 990 + (size_t)sprintf((char *)k + 990, "%09u", 22) - 1, 104);
    check_equal(idx, &m);
    m_free(&m);
    ol_index_close(idx);
}

OLT_TEST(store_index_cursor)
{
    struct ol_index *idx;
    OLT_CHECK_EQ(ol_index_create_empty(NULL, &idx), 0);
    struct ol_index_rec r = rec_of(1, 0);
    const char *keys[] = {"a", "a/b", "a/c", "b", "\xff", "\xff\xff"};
    for (size_t i = 0; i < 6; i++)
        OLT_CHECK_EQ(ol_index_put(idx, keys[i], strlen(keys[i]), &r), 0);
    struct ol_index_cursor c;
    OLT_CHECK_EQ(ol_index_seek(idx, &c, "a/b", 3, false), 1);
    OLT_CHECK(c.klen == 3 && !memcmp(c.key, "a/b", 3));
    OLT_CHECK_EQ(ol_index_seek(idx, &c, "a/b", 3, true), 1);
    OLT_CHECK(c.klen == 3 && !memcmp(c.key, "a/c", 3));
    OLT_CHECK_EQ(ol_index_seek(idx, &c, "a/bb", 4, false), 1);
    OLT_CHECK(c.klen == 3 && !memcmp(c.key, "a/c", 3));
    OLT_CHECK_EQ(ol_index_next(&c), 1);
    OLT_CHECK(c.klen == 1 && c.key[0] == 'b');
    OLT_CHECK_EQ(ol_index_next(&c), 1);
    OLT_CHECK_EQ(ol_index_next(&c), 1);
    OLT_CHECK(c.klen == 2);
    OLT_CHECK_EQ(ol_index_next(&c), 0);
    OLT_CHECK_EQ(ol_index_seek(idx, &c, "\xff\xff", 2, true), 0);
    OLT_CHECK_EQ(ol_index_seek(idx, &c, "\xff\xff\xff", 3, false), 0);
    OLT_CHECK_EQ(ol_index_seek(idx, &c, NULL, 0, false), 1);
    OLT_CHECK(c.klen == 1 && c.key[0] == 'a');
    OLT_CHECK_EQ(ol_index_put(idx, "c", 1, &r), 0);
    OLT_CHECK_EQ(ol_index_next(&c), -ESTALE);
    ol_index_close(idx);
}

/* ---- listing --------------------------------------------------------------- */

struct ent {
    uint8_t name[OL_INDEX_KEY_MAX];
    size_t len;
    bool cp;
    struct ol_index_rec rec;
};
struct ents {
    struct ent *v;
    size_t n, cap;
};

static void ents_add(struct ents *e, const uint8_t *name, size_t len, bool cp, const struct ol_index_rec *r)
{
    if (e->n == e->cap) {
        e->cap = e->cap ? 2 * e->cap : 64;
        e->v = realloc(e->v, e->cap * sizeof *e->v);
        OLT_CHECK(e->v);
    }
    struct ent *x = &e->v[e->n++];
    memcpy(x->name, name, len);
    x->len = len;
    x->cp = cp;
    if (r)
        x->rec = *r;
}

static int collect(void *arg, const uint8_t *name, size_t len, const struct ol_index_rec *rec)
{
    ents_add(arg, name, len, rec == NULL, rec);
    return 0;
}

static bool starts(const uint8_t *k, size_t kl, const void *p, size_t pl)
{
    return kl >= pl && (pl == 0 || memcmp(k, p, pl) == 0);
}

/* The naive reference: every entry of the whole listing, in order. */
static void ref_entries(const struct model *m, const struct ol_index_list_req *q, struct ents *out)
{
    out->n = 0;
    for (size_t i = 0; i < m->n; i++) {
        const struct mkey *k = &m->v[i];
        if (!starts(k->k, k->len, q->prefix, q->prefix_len))
            continue;
        if (q->skip_deleted && (k->rec.flags & OL_INDEX_F_DELETE_MARKER))
            continue;
        size_t nl = k->len;
        bool cp = false;
        if (q->delim_len) {
            for (size_t j = q->prefix_len; j + q->delim_len <= k->len; j++) {
                if (!memcmp(k->k + j, q->delim, q->delim_len)) {
                    nl = j + q->delim_len;
                    cp = true;
                    break;
                }
            }
        }
        if (q->start_len && bcmp_(k->k, nl, q->start, q->start_len) <= 0)
            continue;
        if (cp && out->n && out->v[out->n - 1].cp && out->v[out->n - 1].len == nl &&
            !memcmp(out->v[out->n - 1].name, k->k, nl))
            continue;
        ents_add(out, k->k, nl, cp, &k->rec);
    }
}

static void same_page(const struct ents *got, const struct ents *all, size_t from, size_t n)
{
    OLT_CHECK_EQ(got->n, n);
    for (size_t i = 0; i < n; i++) {
        const struct ent *a = &got->v[i], *b = &all->v[from + i];
        OLT_CHECK_EQ(a->len, b->len);
        OLT_CHECK_MEM(a->name, b->name, a->len);
        OLT_CHECK_EQ(a->cp, b->cp);
        if (!a->cp)
            OLT_CHECK(rec_eq(&a->rec, &b->rec));
    }
}

/* One request through both walks, checked against the reference; then
 * the whole listing paged through next markers. */
static void check_list(const struct ol_index *idx, const struct model *m, struct ol_index_list_req q)
{
    struct ents all = {0}, got = {0};
    ref_entries(m, &q, &all);
    size_t want = all.n < q.max_keys ? all.n : q.max_keys;
    for (int twin = 0; twin < 2; twin++) {
        struct ol_index_list_out out;
        got.n = 0;
        int rc = twin ? ol_index_list_ref(idx, &q, collect, &got, &out)
                      : ol_index_list(idx, &q, collect, &got, &out);
        OLT_CHECK_EQ(rc, 0);
        same_page(&got, &all, 0, want);
        OLT_CHECK_EQ(out.truncated, q.max_keys && all.n > q.max_keys);
        size_t nk = 0;
        for (size_t i = 0; i < want; i++)
            nk += !all.v[i].cp;
        OLT_CHECK_EQ(out.nkeys, nk);
        OLT_CHECK_EQ(out.nprefixes, want - nk);
        if (want) {
            OLT_CHECK_EQ(out.next_len, all.v[want - 1].len);
            OLT_CHECK_MEM(out.next, all.v[want - 1].name, out.next_len);
        } else {
            OLT_CHECK_EQ(out.next_len, 0);
        }
    }
    if (q.max_keys && all.n / q.max_keys < 300) { /* page through to the end */
        size_t from = 0;
        uint8_t mark[OL_INDEX_KEY_MAX];
        for (;;) {
            struct ol_index_list_out out;
            got.n = 0;
            OLT_CHECK_EQ(ol_index_list(idx, &q, collect, &got, &out), 0);
            size_t n = all.n - from < q.max_keys ? all.n - from : q.max_keys;
            same_page(&got, &all, from, n);
            from += n;
            if (!out.truncated)
                break;
            memcpy(mark, out.next, out.next_len);
            q.start = mark;
            q.start_len = out.next_len;
        }
        OLT_CHECK_EQ(from, all.n);
    }
    free(all.v);
    free(got.v);
}

OLT_TEST_T(store_index_list_differential, 120)
{
    static const char *delims[] = {"/", "//", "a/", "\xff", "\xc3\xa9", "b", "ab/", "\xe2\x82\xac"};
    s_rng = 0x2545f4914f6cdd1dull;
    for (unsigned set = 0; set < 120; set++) {
        struct ol_index *idx;
        OLT_CHECK_EQ(ol_index_create_empty(NULL, &idx), 0);
        struct model m = {0};
        unsigned n = set % 10 == 0 ? rn(4) : 1 + rn(set % 3 ? 300 : 2000);
        uint8_t k[OL_INDEX_KEY_MAX];
        for (unsigned i = 0; i < n; i++) {
            size_t len = rand_key(k, 30);
            struct ol_index_rec r = rec_of(i, rn(5) == 0 ? OL_INDEX_F_DELETE_MARKER : 0);
            m_put(&m, k, len, &r);
            OLT_CHECK(ol_index_put(idx, k, len, &r) >= 0);
        }
        OLT_CHECK_EQ(ol_index_check(idx), 0);
        for (unsigned qn = 0; qn < 60; qn++) {
            uint8_t pre[64], st[64];
            struct ol_index_list_req q = {0};
            unsigned pc = rn(4);
            if (pc == 1 && m.n) { /* a prefix of some key */
                const struct mkey *x = &m.v[rn((unsigned)m.n)];
                q.prefix_len = rn((unsigned)x->len + 1);
                memcpy(pre, x->k, q.prefix_len);
            } else if (pc == 2) {
                q.prefix_len = rand_key(pre, 6);
            }
            q.prefix = pre;
            if (rn(4)) {
                q.delim = delims[rn(sizeof delims / sizeof delims[0])];
                q.delim_len = strlen(q.delim);
            }
            unsigned sc = rn(5);
            if (sc == 1 && m.n) { /* an existing key, or a prefix of one */
                const struct mkey *x = &m.v[rn((unsigned)m.n)];
                q.start_len = rn(2) ? x->len : rn((unsigned)x->len + 1);
                memcpy(st, x->k, q.start_len);
            } else if (sc == 2) {
                q.start_len = rand_key(st, 10);
            } else if (sc == 3) { /* prefix then something: often inside a group */
                memcpy(st, pre, q.prefix_len);
                q.start_len = q.prefix_len + rand_key(st + q.prefix_len, 10);
            }
            q.start = st;
            unsigned mk = rn(6);
            q.max_keys = mk == 0 ? 0 : mk == 1 ? 1 : mk == 2 ? 1000 : 1 + rn(20);
            q.skip_deleted = rn(2);
            check_list(idx, &m, q);
        }
        m_free(&m);
        ol_index_close(idx);
    }
}

/* Lists into a string "k:name c:name ..." with the truncation flag. */
static void list_str(const struct ol_index *idx, const char *pre, const char *delim, const char *start,
                     unsigned max, bool skip, char *out, size_t outsz)
{
    struct ol_index_list_req q = {pre, strlen(pre), delim, strlen(delim), start, strlen(start), max, skip};
    struct ents e = {0};
    struct ol_index_list_out o;
    OLT_CHECK_EQ(ol_index_list(idx, &q, collect, &e, &o), 0);
    size_t w = 0;
    out[0] = 0;
    for (size_t i = 0; i < e.n; i++)
        w += (size_t)snprintf(out + w, outsz - w, "%s%s:%.*s", i ? " " : "", e.v[i].cp ? "c" : "k",
                              (int)e.v[i].len, (const char *)e.v[i].name);
    snprintf(out + w, outsz - w, "%s%s", e.n ? " " : "", o.truncated ? "T" : "-");
    free(e.v);
}

OLT_TEST(store_index_list_cases)
{
    struct ol_index *idx;
    OLT_CHECK_EQ(ol_index_create_empty(NULL, &idx), 0);
    const char *keys[] = {"a",    "a/",   "a/1",     "a/2",  "a/b/c",           "a//x",
                          "ab",   "b/1",  "b/2",     "c",    "d::e::f",         "d::g",
                          "cafs", "caf\xc3\xa9/x", "caf\xc3\xa9s", "\xff\xff/1", "\xff\xff/2",
                          "\xff\xff"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        struct ol_index_rec r = rec_of(i, 0);
        OLT_CHECK_EQ(ol_index_put(idx, keys[i], strlen(keys[i]), &r), 0);
    }
    struct ol_index_rec dm = rec_of(99, OL_INDEX_F_DELETE_MARKER);
    OLT_CHECK_EQ(ol_index_put(idx, "e/gone", 6, &dm), 0);
    OLT_CHECK_EQ(ol_index_put(idx, "f", 1, &dm), 0);
    char s[2048];
    /* Empty prefix, "/" */
    list_str(idx, "", "/", "", 1000, false, s, sizeof s);
    OLT_CHECK_STR(s, "k:a c:a/ k:ab c:b/ k:c k:cafs c:caf\xc3\xa9/ k:caf\xc3\xa9s k:d::e::f k:d::g c:e/ "
                     "k:f k:\xff\xff c:\xff\xff/ -");
    /* Hidden delete markers: e/ holds only one, f is one */
    list_str(idx, "", "/", "", 1000, true, s, sizeof s);
    OLT_CHECK_STR(s, "k:a c:a/ k:ab c:b/ k:c k:cafs c:caf\xc3\xa9/ k:caf\xc3\xa9s k:d::e::f k:d::g "
                     "k:\xff\xff c:\xff\xff/ -");
    /* A key equal to the prefix is a key; "a//x" rolls up at the "/" after it */
    list_str(idx, "a/", "/", "", 1000, false, s, sizeof s);
    OLT_CHECK_STR(s, "k:a/ c:a// k:a/1 k:a/2 c:a/b/ -");
    /* A delimiter that is not there */
    list_str(idx, "a", "#", "", 3, false, s, sizeof s);
    OLT_CHECK_STR(s, "k:a k:a/ k:a//x T");
    /* Multi-byte delimiter */
    list_str(idx, "d", "::", "", 1000, false, s, sizeof s);
    OLT_CHECK_STR(s, "c:d:: -");
    list_str(idx, "d::", "::", "", 1000, false, s, sizeof s);
    OLT_CHECK_STR(s, "c:d::e:: k:d::g -");
    /* A marker inside a CommonPrefix skips the rest of it; at it, too */
    list_str(idx, "", "/", "a/1", 2, false, s, sizeof s);
    OLT_CHECK_STR(s, "k:ab c:b/ T");
    list_str(idx, "", "/", "a/", 2, false, s, sizeof s);
    OLT_CHECK_STR(s, "k:ab c:b/ T");
    /* ... while a marker before it shows it */
    list_str(idx, "", "/", "a", 2, false, s, sizeof s);
    OLT_CHECK_STR(s, "c:a/ k:ab T");
    /* Marker before the prefix, and after every key of it */
    list_str(idx, "b/", "", "a", 1000, false, s, sizeof s);
    OLT_CHECK_STR(s, "k:b/1 k:b/2 -");
    list_str(idx, "b/", "", "b/3", 1000, false, s, sizeof s);
    OLT_CHECK_STR(s, "-");
    /* max-keys 0: nothing, not truncated */
    list_str(idx, "", "", "", 0, false, s, sizeof s);
    OLT_CHECK_STR(s, "-");
    /* Exactly max-keys entries left: not truncated */
    list_str(idx, "b/", "", "", 2, false, s, sizeof s);
    OLT_CHECK_STR(s, "k:b/1 k:b/2 -");
    /* UTF-8 multibyte: é (c3 a9) sorts after s (73), a byte order */
    list_str(idx, "caf", "/", "", 1000, false, s, sizeof s);
    OLT_CHECK_STR(s, "k:cafs c:caf\xc3\xa9/ k:caf\xc3\xa9s -");
    list_str(idx, "caf", "\xc3\xa9", "", 1000, false, s, sizeof s);
    OLT_CHECK_STR(s, "k:cafs c:caf\xc3\xa9 -");
    /* 0xff keys: the group \xff\xff/ has no successor but the key \xff\xff */
    list_str(idx, "\xff", "/", "", 1000, false, s, sizeof s);
    OLT_CHECK_STR(s, "k:\xff\xff c:\xff\xff/ -");
    list_str(idx, "", "\xff", "", 1000, false, s, sizeof s);
    OLT_CHECK(strstr(s, "c:\xff -") != NULL);
    /* A callback that stops */
    struct ol_index_list_req q = {.delim = "/", .delim_len = 1, .max_keys = 1000};
    struct ol_index_list_out o;
    OLT_CHECK_EQ(ol_index_list(idx, &q, NULL, NULL, &o), 0);
    OLT_CHECK_EQ(o.nkeys + o.nprefixes, 14);
    ol_index_close(idx);
}

static int stop_at_two(void *arg, const uint8_t *name, size_t len, const struct ol_index_rec *rec)
{
    return ++*(int *)arg == 2 ? -ECANCELED : 0;
}

/* One million keys under "big/" cost one step with a delimiter. */
OLT_TEST(store_index_list_jumps_groups)
{
    struct ol_index *idx;
    OLT_CHECK_EQ(ol_index_create_empty(NULL, &idx), 0);
    uint8_t k[64];
    struct ol_index_rec r = rec_of(1, 0);
    for (unsigned i = 0; i < 200000; i++)
        OLT_CHECK_EQ(ol_index_put(idx, k, (size_t)sprintf((char *)k, "big/%07u", i), &r), 0);
    OLT_CHECK_EQ(ol_index_put(idx, "zzz", 3, &r), 0);
    OLT_CHECK_EQ(ol_index_put(idx, "aaa", 3, &r), 0);
    char s[256];
    list_str(idx, "", "/", "", 1000, false, s, sizeof s);
    OLT_CHECK_STR(s, "k:aaa c:big/ k:zzz -");
    int calls = 0;
    struct ol_index_list_req q = {.delim = "/", .delim_len = 1, .max_keys = 1000};
    struct ol_index_list_out o;
    OLT_CHECK_EQ(ol_index_list(idx, &q, stop_at_two, &calls, &o), -ECANCELED);
    OLT_CHECK_EQ(calls, 2);
    ol_index_close(idx);
}

/* ---- durability -------------------------------------------------------------- */

OLT_TEST(store_index_persist_reopen)
{
    const char *dir = idx_dir();
    s_rng = 77;
    struct ol_index *idx = fresh(dir);
    struct model m = {0};
    uint8_t k[OL_INDEX_KEY_MAX];
    for (unsigned i = 0; i < 5000; i++) {
        size_t len = rand_key(k, 60);
        if (rn(5) == 0 && m.n) {
            struct mkey *x = &m.v[rn((unsigned)m.n)];
            memcpy(k, x->k, x->len);
            len = x->len;
            OLT_CHECK_EQ(ol_index_remove(idx, k, len), 0);
            m_remove(&m, k, len);
        } else {
            put_ok(idx, &m, k, len, i);
        }
        if (i % 700 == 0)
            OLT_CHECK_EQ(ol_index_flush(idx), 0);
    }
    OLT_CHECK_EQ(ol_index_flush(idx), 0);
    struct ol_index_stats st;
    ol_index_stats(idx, &st);
    OLT_CHECK_EQ(st.pending_frames, 0);
    ol_index_close(idx);
    struct ol_index_open_info info;
    OLT_CHECK_EQ(ol_index_open(dir, &idx, &info), 0);
    OLT_CHECK_EQ(info.keys, m.n);
    OLT_CHECK_EQ(info.log_records, 5000);
    OLT_CHECK_EQ(info.log_batches, 9);
    OLT_CHECK_EQ(info.dropped_bytes, 0);
    OLT_CHECK(!info.damaged);
    check_equal(idx, &m);
    /* Changes not flushed are gone after close. */
    OLT_CHECK(ol_index_put(idx, "unflushed", 9, &m.v[0].rec) >= 0);
    ol_index_close(idx);
    OLT_CHECK_EQ(ol_index_open(dir, &idx, &info), 0);
    check_equal(idx, &m);
    /* Appends go on after a reopen. */
    put_ok(idx, &m, "after", 5, 1);
    OLT_CHECK_EQ(ol_index_flush(idx), 0);
    ol_index_close(idx);
    OLT_CHECK_EQ(ol_index_open(dir, &idx, &info), 0);
    check_equal(idx, &m);
    ol_index_close(idx);
    m_free(&m);
}

/* N keys, each flushed alone: N batches. Returns the log's path. */
static void build_log(const char *dir, unsigned n, struct model *m, char *logpath, size_t lpsz)
{
    struct ol_index *idx = fresh(dir);
    uint8_t k[64];
    for (unsigned i = 0; i < n; i++) {
        put_ok(idx, m, k, knum(k, i), i);
        OLT_CHECK_EQ(ol_index_flush(idx), 0);
    }
    ol_index_close(idx);
    path_of(logpath, lpsz, dir, "log.0000000000000002");
}

OLT_TEST_T(store_index_torn_tail, 120)
{
    const char *dir = idx_dir();
    struct model m = {0};
    char lp[512];
    build_log(dir, 20, &m, lp, sizeof lp);
    size_t len;
    uint8_t *log = read_file(lp, &len);
    /* The last batch: a PUT of "obj/000019.bin" (14 bytes: 82) and a COMMIT (32). */
    size_t last = len - 82 - 32;
    OLT_CHECK_EQ(log[last + 4], 1);
    struct model before = m; /* takes over m's keys */
    before.n--;
    free(before.v[before.n].k);
    for (size_t cut = last; cut < len; cut++) {
        write_file(lp, log, cut);
        struct ol_index *idx;
        struct ol_index_open_info info;
        OLT_CHECK_EQ(ol_index_open(dir, &idx, &info), 0);
        check_equal(idx, &before);
        OLT_CHECK_EQ(info.log_batches, 19);
        OLT_CHECK_EQ(info.dropped_bytes, cut - last);
        OLT_CHECK_EQ(info.dropped_records, cut - last >= 8 ? 1 : 0);
        OLT_CHECK(!info.damaged);
        ol_index_close(idx);
        struct stat sb;
        OLT_CHECK(stat(lp, &sb) == 0 && (size_t)sb.st_size == last); /* cut back */
    }
    /* Whole again, and appends after a cut land where they should. */
    write_file(lp, log, len - 1);
    struct ol_index *idx;
    OLT_CHECK_EQ(ol_index_open(dir, &idx, NULL), 0);
    put_ok(idx, &before, "new", 3, 5);
    OLT_CHECK_EQ(ol_index_flush(idx), 0);
    ol_index_close(idx);
    OLT_CHECK_EQ(ol_index_open(dir, &idx, NULL), 0);
    check_equal(idx, &before);
    ol_index_close(idx);
    free(log);
    m_free(&before);
}

/* A batch is all or nothing. */
OLT_TEST(store_index_torn_batch)
{
    const char *dir = idx_dir();
    struct ol_index *idx = fresh(dir);
    struct model m = {0};
    uint8_t k[64];
    put_ok(idx, &m, "first", 5, 1);
    OLT_CHECK_EQ(ol_index_flush(idx), 0);
    struct model one = m;
    one.v = malloc(sizeof *one.v);
    one.v[0] = m.v[0];
    for (unsigned i = 0; i < 10; i++)
        put_ok(idx, &m, k, knum(k, i), i);
    OLT_CHECK_EQ(ol_index_flush(idx), 0);
    ol_index_close(idx);
    char lp[512];
    path_of(lp, sizeof lp, dir, "log.0000000000000002");
    size_t len;
    uint8_t *log = read_file(lp, &len);
    for (size_t cut = len - 1; cut > len - 10 * 82 - 32; cut -= 37) {
        write_file(lp, log, cut);
        struct ol_index_open_info info;
        OLT_CHECK_EQ(ol_index_open(dir, &idx, &info), 0);
        check_equal(idx, &one);
        OLT_CHECK_EQ(info.log_batches, 1);
        OLT_CHECK(info.dropped_records >= 1 && info.dropped_records <= 10);
        ol_index_close(idx);
    }
    free(log);
    free(one.v);
    m_free(&m);
}

OLT_TEST(store_index_corrupt_middle)
{
    const char *dir = idx_dir();
    struct model m = {0};
    char lp[512];
    build_log(dir, 30, &m, lp, sizeof lp);
    size_t len;
    uint8_t *log = read_file(lp, &len);
    /* Batch i (one PUT + COMMIT, 114 bytes) starts at 32 + 114 i. */
    static const unsigned bads[] = {0, 7, 14, 21, 28, 29};
    for (size_t bi = 0; bi < 6; bi++) {
        unsigned bad = bads[bi];
        for (unsigned at = 0; at < 114; at += 19) {
            uint8_t *c = malloc(len);
            memcpy(c, log, len);
            c[32 + 114 * bad + at] ^= 0x20;
            write_file(lp, c, len);
            free(c);
            struct ol_index *idx;
            struct ol_index_open_info info;
            OLT_CHECK_EQ(ol_index_open(dir, &idx, &info), 0);
            struct model pre = m;
            pre.n = bad;
            check_equal(idx, &pre);
            OLT_CHECK_EQ(info.log_batches, bad);
            OLT_CHECK_EQ(info.dropped_bytes, len - 32 - 114 * bad);
            OLT_CHECK_EQ(info.dropped_records, 30 - bad);
            OLT_CHECK_EQ(info.damaged, bad < 29);
            ol_index_close(idx);
        }
    }
    free(log);
    m_free(&m);
}

OLT_TEST(store_index_checkpoint_then_log)
{
    const char *dir = idx_dir();
    struct ol_index *idx = fresh(dir);
    struct model m = {0};
    uint8_t k[64];
    for (unsigned i = 0; i < 3000; i++)
        put_ok(idx, &m, k, knum(k, i * 7 % 3000), i);
    OLT_CHECK_EQ(ol_index_checkpoint(idx), 0);
    OLT_CHECK(exists(dir, "snapshot") && exists(dir, "log.0000000000000003"));
    OLT_CHECK(!exists(dir, "log.0000000000000002") && !exists(dir, "snapshot.tmp"));
    for (unsigned i = 0; i < 500; i++) {
        size_t len = knum(k, i * 3);
        OLT_CHECK_EQ(ol_index_remove(idx, k, len), 0);
        m_remove(&m, k, len);
    }
    for (unsigned i = 3000; i < 4000; i++)
        put_ok(idx, &m, k, knum(k, i), i);
    put_ok(idx, &m, k, knum(k, 1), 12345); /* a replace */
    OLT_CHECK_EQ(ol_index_flush(idx), 0);
    ol_index_close(idx);
    struct ol_index_open_info info;
    OLT_CHECK_EQ(ol_index_open(dir, &idx, &info), 0);
    OLT_CHECK_EQ(info.snapshot_keys, 3000);
    OLT_CHECK_EQ(info.log_records, 1501);
    OLT_CHECK_EQ(info.log_gen, 3);
    check_equal(idx, &m);
    OLT_CHECK_EQ(ol_index_checkpoint(idx), 0);
    ol_index_close(idx);
    OLT_CHECK_EQ(ol_index_open(dir, &idx, &info), 0);
    OLT_CHECK_EQ(info.snapshot_keys, m.n);
    OLT_CHECK_EQ(info.log_records, 0);
    check_equal(idx, &m);
    ol_index_close(idx);
    m_free(&m);
}

/* Rewrites the snapshot's trailer after a patch. */
static void refix(uint8_t *b, size_t len)
{
    uint64_t h = XXH3_64bits(b, len - 8);
    for (int i = 0; i < 8; i++)
        b[len - 8 + i] = (uint8_t)(h >> (8 * i));
}

OLT_TEST(store_index_corrupt_snapshot)
{
    const char *dir = idx_dir();
    struct ol_index *idx = fresh(dir);
    struct model m = {0};
    uint8_t k[64];
    for (unsigned i = 0; i < 50; i++)
        put_ok(idx, &m, k, knum(k, i), i);
    OLT_CHECK_EQ(ol_index_checkpoint(idx), 0);
    ol_index_close(idx);
    char sp[512];
    path_of(sp, sizeof sp, dir, "snapshot");
    size_t len;
    uint8_t *snap = read_file(sp, &len), *c = malloc(len);
    for (size_t at = 0; at < len; at += 1 + at / 16) { /* a flipped byte anywhere */
        memcpy(c, snap, len);
        c[at] ^= 0x04;
        write_file(sp, c, len);
        OLT_CHECK_EQ(ol_index_open(dir, &idx, NULL), -EBADMSG);
        OLT_CHECK(idx == NULL);
    }
    for (size_t cut = 0; cut < len; cut += 1 + cut / 8) { /* truncated */
        write_file(sp, snap, cut);
        OLT_CHECK_EQ(ol_index_open(dir, &idx, NULL), -EBADMSG);
    }
    memcpy(c, snap, len); /* a sound snapshot of another version */
    c[4] = 2;
    refix(c, len);
    write_file(sp, c, len);
    OLT_CHECK_EQ(ol_index_open(dir, &idx, NULL), -ENOTSUP);
    memcpy(c, snap, len); /* keys out of order behind a valid checksum */
    OLT_CHECK(!memcmp(c + 32 + 4, "obj/000000.bin", 14));
    c[32 + 4 + 9] = '9'; /* obj/000009.bin, then obj/000001.bin */
    refix(c, len);
    write_file(sp, c, len);
    OLT_CHECK_EQ(ol_index_open(dir, &idx, NULL), -EBADMSG);
    memcpy(c, snap, len); /* a wrong key count */
    c[24] = 49;
    refix(c, len);
    write_file(sp, c, len);
    OLT_CHECK_EQ(ol_index_open(dir, &idx, NULL), -EBADMSG);
    write_file(sp, snap, len); /* and whole again */
    OLT_CHECK_EQ(ol_index_open(dir, &idx, NULL), 0);
    check_equal(idx, &m);
    ol_index_close(idx);
    free(snap);
    free(c);
    m_free(&m);
}

/* What a crash at each step of a checkpoint leaves behind, and open. */
OLT_TEST(store_index_checkpoint_crash_states)
{
    const char *dir = idx_dir();
    struct ol_index *idx;
    struct ol_index_open_info info;
    char p[512], p2[512];
    OLT_CHECK_EQ(ol_index_open(dir, &idx, NULL), -ENOENT); /* no directory */
    OLT_CHECK(mkdir(dir, 0700) == 0);
    OLT_CHECK_EQ(ol_index_open(dir, &idx, NULL), -ENOENT); /* empty directory */
    OLT_CHECK_EQ(ol_index_create_empty(dir, &idx), 0);
    struct ol_index *other;
    OLT_CHECK_EQ(ol_index_open(dir, &other, NULL), -EBUSY);
    OLT_CHECK_EQ(ol_index_create_empty(dir, &other), -EBUSY);
    struct model m = {0};
    put_ok(idx, &m, "x", 1, 1);
    OLT_CHECK_EQ(ol_index_flush(idx), 0);
    ol_index_close(idx);
    /* Created, never checkpointed: a log without a snapshot. */
    OLT_CHECK_EQ(ol_index_open(dir, &idx, NULL), -EBADMSG);
    OLT_CHECK_EQ(ol_index_create_empty(dir, &idx), 0);
    OLT_CHECK(!exists(dir, "snapshot") && exists(dir, "log.0000000000000001"));
    m_free(&m);
    put_ok(idx, &m, "a", 1, 1);
    OLT_CHECK_EQ(ol_index_checkpoint(idx), 0); /* snapshot -> log 2 */
    put_ok(idx, &m, "b", 1, 2);
    OLT_CHECK_EQ(ol_index_flush(idx), 0);
    ol_index_close(idx);
    /* A leftover snapshot.tmp (crash before the rename): ignored, removed. */
    path_of(p, sizeof p, dir, "snapshot.tmp");
    write_file(p, (const uint8_t *)"junk", 4);
    OLT_CHECK_EQ(ol_index_open(dir, &idx, NULL), 0);
    check_equal(idx, &m);
    ol_index_close(idx);
    OLT_CHECK(!exists(dir, "snapshot.tmp"));
    /* An old log next to a newer snapshot (crash before its unlink). */
    path_of(p, sizeof p, dir, "log.0000000000000001");
    write_file(p, (const uint8_t *)"stale", 5);
    OLT_CHECK_EQ(ol_index_open(dir, &idx, NULL), 0);
    check_equal(idx, &m);
    ol_index_close(idx);
    OLT_CHECK(!exists(dir, "log.0000000000000001"));
    /* The live log missing (crash right after the rename): created. */
    OLT_CHECK_EQ(ol_index_open(dir, &idx, NULL), 0);
    OLT_CHECK_EQ(ol_index_checkpoint(idx), 0); /* log 3 */
    ol_index_close(idx);
    path_of(p, sizeof p, dir, "log.0000000000000003");
    OLT_CHECK(unlink(p) == 0);
    OLT_CHECK_EQ(ol_index_open(dir, &idx, &info), 0);
    check_equal(idx, &m);
    OLT_CHECK(exists(dir, "log.0000000000000003"));
    put_ok(idx, &m, "c", 1, 3);
    OLT_CHECK_EQ(ol_index_flush(idx), 0);
    ol_index_close(idx);
    OLT_CHECK_EQ(ol_index_open(dir, &idx, NULL), 0);
    check_equal(idx, &m);
    ol_index_close(idx);
    /* A torn log header with nothing behind it: started afresh. */
    size_t len;
    uint8_t *log = read_file(p, &len);
    write_file(p, log, 20);
    m_remove(&m, (const uint8_t *)"c", 1);
    OLT_CHECK_EQ(ol_index_open(dir, &idx, &info), 0);
    check_equal(idx, &m);
    ol_index_close(idx);
    /* A damaged header with frames behind it: not a crash, -EBADMSG. */
    log[10] ^= 1;
    write_file(p, log, len);
    OLT_CHECK_EQ(ol_index_open(dir, &idx, NULL), -EBADMSG);
    log[10] ^= 1;
    write_file(p, log, len);
    /* A log of a generation newer than the snapshot's: -EBADMSG. */
    path_of(p2, sizeof p2, dir, "log.0000000000000004");
    write_file(p2, log, len);
    OLT_CHECK_EQ(ol_index_open(dir, &idx, NULL), -EBADMSG);
    OLT_CHECK(unlink(p2) == 0);
    /* A log of another index (id mismatch): -EBADMSG. */
    log[16] ^= 1;
    uint64_t h = XXH3_64bits(log, 24);
    for (int i = 0; i < 8; i++)
        log[24 + i] = (uint8_t)(h >> (8 * i));
    write_file(p, log, len);
    OLT_CHECK_EQ(ol_index_open(dir, &idx, NULL), -EBADMSG);
    /* The snapshot gone beside a log: -EBADMSG. */
    path_of(p2, sizeof p2, dir, "snapshot");
    OLT_CHECK(unlink(p2) == 0);
    OLT_CHECK_EQ(ol_index_open(dir, &idx, NULL), -EBADMSG);
    /* create_empty clears it all. */
    OLT_CHECK_EQ(ol_index_create_empty(dir, &idx), 0);
    OLT_CHECK_EQ(ol_index_count(idx), 0);
    OLT_CHECK_EQ(ol_index_checkpoint(idx), 0);
    ol_index_close(idx);
    OLT_CHECK(!exists(dir, "log.0000000000000003") && exists(dir, "log.0000000000000002"));
    OLT_CHECK_EQ(ol_index_open(dir, &idx, &info), 0);
    OLT_CHECK_EQ(info.keys, 0);
    ol_index_close(idx);
    free(log);
    m_free(&m);
}

/* The worked example of docs/store-index.md, byte for byte. */
OLT_TEST(store_index_log_frame_bytes)
{
    static const uint8_t want[] = {
        0x45, 0x00, 0x00, 0x00, 0x01, 0x00, 0x01, 0x00, 0x61, 0x05, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x2a, 0x36, 0xfe, 0x9c, 0x97, 0x17, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11,
        0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xff, 0x75, 0x2a,
        0xb4, 0xa7, 0x77, 0x16, 0x5c, 0x20, 0x00, 0x00, 0x00, 0x03, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x1a, 0xa2, 0xcb,
        0x91, 0x3c, 0xeb, 0x83, 0xb5,
    };
    const char *dir = idx_dir();
    struct ol_index *idx;
    OLT_CHECK_EQ(ol_index_create_empty(dir, &idx), 0);
    struct ol_index_rec r;
    memset(&r, 0, sizeof r);
    r.size = 5;
    r.mtime_ns = 1700000000000000000ull;
    memset(r.etag, 0x11, 16);
    OLT_CHECK_EQ(ol_index_put(idx, "a", 1, &r), 0);
    OLT_CHECK_EQ(ol_index_flush(idx), 0);
    ol_index_close(idx);
    char lp[512];
    path_of(lp, sizeof lp, dir, "log.0000000000000001");
    size_t len;
    uint8_t *log = read_file(lp, &len);
    OLT_CHECK_EQ(len, 32 + sizeof want);
    OLT_CHECK(!memcmp(log, "OLIL\x01\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00", 16));
    OLT_CHECK_EQ(XXH3_64bits(log, 24), (uint64_t)log[24] | (uint64_t)log[25] << 8 | (uint64_t)log[26] << 16 |
                                           (uint64_t)log[27] << 24 | (uint64_t)log[28] << 32 |
                                           (uint64_t)log[29] << 40 | (uint64_t)log[30] << 48 |
                                           (uint64_t)log[31] << 56);
    OLT_CHECK_MEM(log + 32, want, sizeof want);
    free(log);
}

/* A flush whose write fails (here: past RLIMIT_FSIZE, EFBIG) cuts the log
 * back and keeps the batch; the next flush writes it. */
OLT_TEST(store_index_flush_write_error_retry)
{
    const char *dir = idx_dir();
    struct ol_index *idx = fresh(dir);
    struct model m = {0};
    uint8_t k[64];
    for (unsigned i = 0; i < 10; i++)
        put_ok(idx, &m, k, knum(k, i), i);
    OLT_CHECK_EQ(ol_index_flush(idx), 0);
    struct ol_index_stats st;
    ol_index_stats(idx, &st);
    uint64_t durable = st.log_bytes;
    for (unsigned i = 10; i < 200; i++)
        put_ok(idx, &m, k, knum(k, i), i);
    signal(SIGXFSZ, SIG_IGN);
    struct rlimit old, lim;
    OLT_CHECK(getrlimit(RLIMIT_FSIZE, &old) == 0);
    lim = old;
    lim.rlim_cur = durable + 1000; /* part of the batch fits */
    OLT_CHECK(setrlimit(RLIMIT_FSIZE, &lim) == 0);
    OLT_CHECK_EQ(ol_index_flush(idx), -EFBIG);
    OLT_CHECK(setrlimit(RLIMIT_FSIZE, &old) == 0);
    char lp[512];
    path_of(lp, sizeof lp, dir, "log.0000000000000002");
    struct stat sb;
    OLT_CHECK(stat(lp, &sb) == 0 && (uint64_t)sb.st_size == durable); /* cut back */
    ol_index_stats(idx, &st);
    OLT_CHECK_EQ(st.pending_frames, 190);
    put_ok(idx, &m, "late", 4, 7); /* the handle still works */
    OLT_CHECK_EQ(ol_index_flush(idx), 0);
    ol_index_close(idx);
    struct ol_index_open_info info;
    OLT_CHECK_EQ(ol_index_open(dir, &idx, &info), 0);
    OLT_CHECK_EQ(info.log_batches, 2);
    OLT_CHECK_EQ(info.dropped_bytes, 0);
    check_equal(idx, &m);
    ol_index_close(idx);
    m_free(&m);
}
