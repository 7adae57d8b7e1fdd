/*
 * index.c - see index.h: the in-memory B+tree, the cursor and the S3
 * listing walk. index_file.c has the log, the snapshot and the handle's
 * life cycle; index_int.h the node layouts.
 *
 * Insert. A key that starts with its leaf's prefix and fits goes into the
 * leaf's free gap (entry appended to the heap, one u16 slot shifted in);
 * anything else rebuilds the leaf from its items: into one leaf with a
 * shorter prefix when they fit, else a new leaf holding only the new key
 * when it is appended past the last key of the tree (so loading keys in
 * order - a snapshot, a sequential writer - fills leaves completely), else
 * two leaves cut near the byte midpoint (ol_ix_plan says why two always
 * suffice). Every allocation, the inner nodes a split may need included
 * (kept on a spare list), is made before the tree changes, so -ENOMEM
 * leaves it as it was.
 *
 * Remove. The entry is cut out of the heap; an emptied leaf leaves the
 * tree; a leaf under a quarter full merges with a sibling when the two fit
 * in three quarters of a leaf; an inner node under OL_IX_FAN_MIN children
 * merges with or borrows from a sibling; a root with one child goes.
 * Separators are never updated on removal (a separator only has to lie
 * between its neighbours' keys).
 *
 * Listing. A cursor walk over the leaf chain; a CommonPrefix group is left
 * by seeking to the group's successor (the prefix with trailing 0xff bytes
 * dropped and its last byte incremented): one descent, whatever the
 * group's size. ol_index_list_ref steps through the group instead.
 */
#include "store/index_int.h"

#include "base/assert.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* ---- keys ---------------------------------------------------------------------- */

static int ol_ix_cmp(const uint8_t *a, size_t al, const uint8_t *b, size_t bl)
{
    size_t m = al < bl ? al : bl;
    int c = m ? memcmp(a, b, m) : 0;
    if (c)
        return c;
    return (al > bl) - (al < bl);
}

static size_t ol_ix_lcp(const uint8_t *a, size_t al, const uint8_t *b, size_t bl)
{
    size_t m = al < bl ? al : bl, i = 0;
    while (i < m && a[i] == b[i])
        i++;
    return i;
}

static bool ol_ix_starts(const uint8_t *k, size_t kl, const uint8_t *p, size_t pl)
{
    return kl >= pl && (pl == 0 || memcmp(k, p, pl) == 0);
}

/* ---- leaves -------------------------------------------------------------------- */

static inline uint16_t *ol_ix_slots(const struct ol_ix_leaf *l)
{
    return (uint16_t *)(void *)(l->area + l->cap) - l->n;
}

static inline const uint8_t *ol_ix_ent(const struct ol_ix_leaf *l, unsigned i)
{
    return l->area + ol_ix_slots(l)[i];
}

static inline size_t ol_ix_ent_size(const uint8_t *e) { return 2 + ol_ix_get16(e) + OL_INDEX_REC_LEN; }

static unsigned ol_ix_area_cap(size_t used)
{
    size_t cap = (used + OL_IX_AREA_STEP - 1) / OL_IX_AREA_STEP * OL_IX_AREA_STEP;
    return (unsigned)(cap ? cap : OL_IX_AREA_STEP);
}

/* Compares key with entry i of l. */
static int ol_ix_cmp_ent(const struct ol_ix_leaf *l, unsigned i, const uint8_t *key, size_t klen)
{
    size_t m = klen < l->plen ? klen : l->plen;
    int c = m ? memcmp(key, l->area, m) : 0;
    if (c)
        return c;
    if (klen < l->plen)
        return -1;
    const uint8_t *e = ol_ix_ent(l, i);
    return ol_ix_cmp(key + l->plen, klen - l->plen, e + 2, ol_ix_get16(e));
}

/* The first slot whose key is >= key; *eq when that key equals it. */
static unsigned ol_ix_leaf_lb(const struct ol_ix_leaf *l, const uint8_t *key, size_t klen, bool *eq)
{
    *eq = false;
    if (l->n == 0)
        return 0;
    size_t m = klen < l->plen ? klen : l->plen;
    int c = m ? memcmp(key, l->area, m) : 0;
    if (c < 0 || (c == 0 && klen < l->plen))
        return 0;
    if (c > 0)
        return l->n;
    const uint8_t *q = key + l->plen;
    size_t ql = klen - l->plen;
    const uint16_t *s = ol_ix_slots(l);
    unsigned lo = 0, hi = l->n;
    while (lo < hi) {
        unsigned mid = (lo + hi) / 2;
        const uint8_t *e = l->area + s[mid];
        if (ol_ix_cmp(e + 2, ol_ix_get16(e), q, ql) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo < l->n) {
        const uint8_t *e = l->area + s[lo];
        *eq = ol_ix_cmp(e + 2, ol_ix_get16(e), q, ql) == 0;
    }
    return lo;
}

/* A key and its encoded record, gathered out of a leaf for a rebuild. */
struct ol_ix_item {
    const uint8_t *k, *rec;
    size_t klen;
};

/* Bytes ol_ix_gather needs for l. */
static size_t ol_ix_gather_size(const struct ol_ix_leaf *l) { return (size_t)l->n * l->plen + l->heap; }

/* Copies l's keys and records into buf, items into it[0..n). Returns the
 * end of what was written in buf. */
static uint8_t *ol_ix_gather(const struct ol_ix_leaf *l, uint8_t *buf, struct ol_ix_item *it)
{
    const uint16_t *s = ol_ix_slots(l);
    for (unsigned i = 0; i < l->n; i++) {
        const uint8_t *e = l->area + s[i];
        size_t r = ol_ix_get16(e);
        memcpy(buf, l->area, l->plen);
        memcpy(buf + l->plen, e + 2, r);
        memcpy(buf + l->plen + r, e + 2 + r, OL_INDEX_REC_LEN);
        it[i] = (struct ol_ix_item){buf, buf + l->plen + r, l->plen + r};
        buf += l->plen + r + OL_INDEX_REC_LEN;
    }
    return buf;
}

/* Used bytes of a leaf holding it[a..b); psum[i] = sum of klen of it[0..i). */
static size_t ol_ix_pack_size(const struct ol_ix_item *it, const size_t *psum, size_t a, size_t b)
{
    size_t plen = ol_ix_lcp(it[a].k, it[a].klen, it[b - 1].k, it[b - 1].klen);
    return plen + (b - a) * (2 + OL_INDEX_REC_LEN + 2) + (psum[b] - psum[a]) - (b - a) * plen;
}

/* Lays it[0..n) out in area (cap bytes) and makes it l's. */
static void ol_ix_fill(struct ol_ix_leaf *l, uint8_t *area, unsigned cap, const struct ol_ix_item *it,
                       size_t n)
{
    size_t plen = n ? ol_ix_lcp(it[0].k, it[0].klen, it[n - 1].k, it[n - 1].klen) : 0;
    if (plen)
        memcpy(area, it[0].k, plen);
    uint16_t *slots = (uint16_t *)(void *)(area + cap) - n;
    size_t off = plen;
    for (size_t i = 0; i < n; i++) {
        size_t r = it[i].klen - plen;
        slots[i] = (uint16_t)off;
        ol_ix_put16(area + off, (unsigned)r);
        memcpy(area + off + 2, it[i].k + plen, r);
        memcpy(area + off + 2 + r, it[i].rec, OL_INDEX_REC_LEN);
        off += 2 + r + OL_INDEX_REC_LEN;
    }
    l->area = area;
    l->cap = (uint16_t)cap;
    l->n = (uint16_t)n;
    l->plen = (uint16_t)plen;
    l->heap = (uint16_t)off;
}

static void ol_ix_unlink(struct ol_index *idx, struct ol_ix_leaf *l)
{
    if (l->prev)
        l->prev->next = l->next;
    else
        idx->first = l->next;
    if (l->next)
        l->next->prev = l->prev;
    else
        idx->last = l->prev;
}

static void ol_ix_leaf_free(struct ol_index *idx, struct ol_ix_leaf *l)
{
    idx->mem -= sizeof *l + l->cap;
    idx->nleaves--;
    free(l->area);
    free(l);
}

/* ---- inner nodes --------------------------------------------------------------- */

struct ol_ix_path {
    struct ol_ix_inner *node[OL_IX_MAX_H];
    unsigned at[OL_IX_MAX_H];
};

static struct ol_ix_leaf *ol_ix_descend(const struct ol_index *idx, const uint8_t *key, size_t klen,
                                        struct ol_ix_path *p)
{
    void *n = idx->root;
    for (unsigned d = 0; d < idx->height; d++) {
        struct ol_ix_inner *in = n;
        unsigned lo = 0, hi = in->n - 1;
        while (lo < hi) {
            unsigned mid = (lo + hi) / 2;
            if (ol_ix_cmp(in->sep[mid]->b, in->sep[mid]->len, key, klen) <= 0)
                lo = mid + 1;
            else
                hi = mid;
        }
        if (p) {
            p->node[d] = in;
            p->at[d] = lo;
        }
        n = in->child[lo];
    }
    return n;
}

/* Makes sure n inner nodes are on the spare list. 0 or -ENOMEM. */
static int ol_ix_reserve(struct ol_index *idx, unsigned n)
{
    while (idx->nspare < n) {
        struct ol_ix_inner *in = malloc(sizeof *in);
        if (!in)
            return -ENOMEM;
        in->child[0] = idx->spare;
        idx->spare = in;
        idx->nspare++;
    }
    return 0;
}

static struct ol_ix_inner *ol_ix_take(struct ol_index *idx)
{
    struct ol_ix_inner *in = idx->spare;
    idx->spare = in->child[0];
    idx->nspare--;
    idx->ninner++;
    idx->mem += sizeof *in;
    return in;
}

static void ol_ix_inner_free(struct ol_index *idx, struct ol_ix_inner *in)
{
    idx->ninner--;
    idx->mem -= sizeof *in;
    free(in);
}

static void ol_ix_sep_free(struct ol_index *idx, struct ol_ix_sep *s)
{
    idx->mem -= sizeof *s + s->len;
    free(s);
}

/*
 * Inserts child (and sep, on its left) just after the child that p leads
 * to at depth d (the parent is p->node[d - 1]); splits full nodes upward
 * and grows a new root at the top. Takes nodes from the spare list only.
 */
static void ol_ix_insert_up(struct ol_index *idx, struct ol_ix_path *p, unsigned d, struct ol_ix_sep *sep,
                            void *child)
{
    for (;;) {
        if (d == 0) {
            struct ol_ix_inner *r = ol_ix_take(idx);
            r->n = 2;
            r->child[0] = idx->root;
            r->child[1] = child;
            r->sep[0] = sep;
            idx->root = r;
            idx->height++;
            return;
        }
        struct ol_ix_inner *in = p->node[d - 1];
        unsigned i = p->at[d - 1];
        if (in->n < OL_IX_FAN) {
            memmove(&in->child[i + 2], &in->child[i + 1], (in->n - i - 1) * sizeof in->child[0]);
            memmove(&in->sep[i + 1], &in->sep[i], (in->n - 1 - i) * sizeof in->sep[0]);
            in->child[i + 1] = child;
            in->sep[i] = sep;
            in->n++;
            return;
        }
        void *ch[OL_IX_FAN + 1];
        struct ol_ix_sep *sp[OL_IX_FAN];
        memcpy(ch, in->child, (i + 1) * sizeof ch[0]);
        ch[i + 1] = child;
        memcpy(&ch[i + 2], &in->child[i + 1], (OL_IX_FAN - i - 1) * sizeof ch[0]);
        memcpy(sp, in->sep, i * sizeof sp[0]);
        sp[i] = sep;
        memcpy(&sp[i + 1], &in->sep[i], (OL_IX_FAN - 1 - i) * sizeof sp[0]);
        unsigned h = (OL_IX_FAN + 1) / 2;
        struct ol_ix_inner *right = ol_ix_take(idx);
        in->n = h;
        memcpy(in->child, ch, h * sizeof ch[0]);
        memcpy(in->sep, sp, (h - 1) * sizeof sp[0]);
        right->n = OL_IX_FAN + 1 - h;
        memcpy(right->child, &ch[h], right->n * sizeof ch[0]);
        memcpy(right->sep, &sp[h], (right->n - 1) * sizeof sp[0]);
        sep = sp[h - 1];
        child = right;
        d--;
    }
}

/* Drops child ci of in with the separator on its left (on its right for
 * child 0); frees the separator when free_sep. */
static void ol_ix_inner_drop(struct ol_index *idx, struct ol_ix_inner *in, unsigned ci, bool free_sep)
{
    unsigned si = ci ? ci - 1 : 0;
    if (free_sep)
        ol_ix_sep_free(idx, in->sep[si]);
    memmove(&in->sep[si], &in->sep[si + 1], (in->n - 2 - si) * sizeof in->sep[0]);
    memmove(&in->child[ci], &in->child[ci + 1], (in->n - 1 - ci) * sizeof in->child[0]);
    in->n--;
}

/* Restores the inner node at depth d after it lost a child. */
static void ol_ix_rebalance(struct ol_index *idx, struct ol_ix_path *p, unsigned d)
{
    for (;;) {
        struct ol_ix_inner *x = p->node[d];
        if (d == 0) {
            if (x->n == 1) {
                idx->root = x->child[0];
                idx->height--;
                ol_ix_inner_free(idx, x);
            }
            return;
        }
        if (x->n >= OL_IX_FAN_MIN)
            return;
        struct ol_ix_inner *par = p->node[d - 1];
        unsigned xi = p->at[d - 1], si;
        OL_ASSERT(par->n >= 2); /* a root keeps two, others OL_IX_FAN_MIN - 1 */
        struct ol_ix_inner *l, *r;
        if (xi + 1 < par->n) {
            l = x;
            r = par->child[xi + 1];
            si = xi;
        } else {
            l = par->child[xi - 1];
            r = x;
            si = xi - 1;
        }
        if (l->n + r->n <= OL_IX_FAN) {
            l->sep[l->n - 1] = par->sep[si];
            memcpy(&l->sep[l->n], r->sep, (r->n - 1) * sizeof r->sep[0]);
            memcpy(&l->child[l->n], r->child, r->n * sizeof r->child[0]);
            l->n += r->n;
            ol_ix_inner_free(idx, r);
            ol_ix_inner_drop(idx, par, si + 1, false);
            d--;
            continue;
        }
        /* Borrow: share the children of both evenly. */
        void *ch[2 * OL_IX_FAN];
        struct ol_ix_sep *sp[2 * OL_IX_FAN];
        unsigned t = l->n + r->n, hl = t / 2;
        memcpy(ch, l->child, l->n * sizeof ch[0]);
        memcpy(&ch[l->n], r->child, r->n * sizeof ch[0]);
        memcpy(sp, l->sep, (l->n - 1) * sizeof sp[0]);
        sp[l->n - 1] = par->sep[si];
        memcpy(&sp[l->n], r->sep, (r->n - 1) * sizeof sp[0]);
        l->n = hl;
        memcpy(l->child, ch, hl * sizeof ch[0]);
        memcpy(l->sep, sp, (hl - 1) * sizeof sp[0]);
        par->sep[si] = sp[hl - 1];
        r->n = t - hl;
        memcpy(r->child, &ch[hl], r->n * sizeof ch[0]);
        memcpy(r->sep, &sp[hl], (r->n - 1) * sizeof sp[0]);
        return;
    }
}

/* ---- tree ---------------------------------------------------------------------- */

int ol_ix_tree_init(struct ol_index *idx)
{
    struct ol_ix_leaf *l = calloc(1, sizeof *l);
    uint8_t *area = malloc(OL_IX_AREA_STEP);
    if (!l || !area) {
        free(l);
        free(area);
        return -ENOMEM;
    }
    ol_ix_fill(l, area, OL_IX_AREA_STEP, NULL, 0);
    idx->root = idx->first = idx->last = l;
    idx->height = 0;
    idx->nkeys = 0;
    idx->nleaves = 1;
    idx->ninner = 0;
    idx->mem = sizeof *l + l->cap;
    return 0;
}

static void ol_ix_free_node(void *n, unsigned depth, unsigned height)
{
    if (depth == height) {
        struct ol_ix_leaf *l = n;
        free(l->area);
        free(l);
        return;
    }
    struct ol_ix_inner *in = n;
    for (unsigned i = 0; i < in->n; i++) {
        if (i)
            free(in->sep[i - 1]);
        ol_ix_free_node(in->child[i], depth + 1, height);
    }
    free(in);
}

void ol_ix_tree_free(struct ol_index *idx)
{
    if (idx->root)
        ol_ix_free_node(idx->root, 0, idx->height);
    while (idx->spare) {
        struct ol_ix_inner *in = idx->spare;
        idx->spare = in->child[0];
        free(in);
    }
    idx->nspare = 0;
    idx->root = idx->first = idx->last = NULL;
}

const uint8_t *ol_ix_tree_get(const struct ol_index *idx, const uint8_t *key, size_t klen)
{
    const struct ol_ix_leaf *l = ol_ix_descend(idx, key, klen, NULL);
    bool eq;
    unsigned pos = ol_ix_leaf_lb(l, key, klen, &eq);
    if (!eq)
        return NULL;
    const uint8_t *e = ol_ix_ent(l, pos);
    return e + 2 + ol_ix_get16(e);
}

/* The shortest separator s with a < s <= b (a < b). */
static struct ol_ix_sep *ol_ix_sep_new(const struct ol_ix_item *a, const struct ol_ix_item *b)
{
    size_t len = ol_ix_lcp(a->k, a->klen, b->k, b->klen) + 1;
    struct ol_ix_sep *s = malloc(sizeof *s + len);
    if (s) {
        s->len = (uint16_t)len;
        memcpy(s->b, b->k, len);
    }
    return s;
}

/*
 * Splits m items (a leaf's keys and the new one) into one or two leaves:
 * bounds g[0] = 0 < g[1] (< g[2] = m). Returns the count. Two always do:
 * a new key that is not between two of the leaf's keys can stand alone;
 * one that is shares the leaf's prefix P, every entry then is at most
 * 1080 - P bytes, and cutting after the longest run that fits leaves less
 * than two entries' bytes, P + 2 (1080 - P) <= 2160, for the right. Of the
 * cuts that fit, the one nearest the byte midpoint is taken, except when
 * keys arrive in order at the end of the tree: then the new key starts the
 * next leaf, so in-order loads fill leaves.
 */
static size_t ol_ix_plan(const struct ol_ix_item *it, const size_t *psum, size_t m, bool append,
                         size_t *g)
{
    g[0] = 0;
    if (ol_ix_pack_size(it, psum, 0, m) <= OL_IX_LEAF_MAX) {
        g[1] = m;
        return 1;
    }
    g[2] = m;
    if (append && ol_ix_pack_size(it, psum, 0, m - 1) <= OL_IX_LEAF_MAX) {
        g[1] = m - 1;
        return 2;
    }
    size_t raw = psum[m] + m * (2 + OL_INDEX_REC_LEN + 2), mid = 1;
    while (mid < m - 1 && (psum[mid] + mid * (2 + OL_INDEX_REC_LEN + 2)) * 2 < raw)
        mid++;
    for (size_t dist = 0; dist < m; dist++) {
        size_t cut[2] = {mid + dist, dist && dist < mid ? mid - dist : 0};
        for (int j = 0; j < 2; j++) {
            size_t s = cut[j];
            if (s >= 1 && s <= m - 1 && ol_ix_pack_size(it, psum, 0, s) <= OL_IX_LEAF_MAX &&
                ol_ix_pack_size(it, psum, s, m) <= OL_IX_LEAF_MAX) {
                g[1] = s;
                return 2;
            }
        }
    }
    abort(); /* unreachable: a two-leaf cut always exists (above) */
}

/* Adds leaf nl (already linked after its left neighbour in the chain) to
 * the tree under separator sep. */
static void ol_ix_add_leaf(struct ol_index *idx, struct ol_ix_leaf *nl, struct ol_ix_sep *sep)
{
    struct ol_ix_path p;
    struct ol_ix_leaf *at = ol_ix_descend(idx, sep->b, sep->len, &p);
    OL_ASSERT(at == nl->prev); /* the new leaf is not routed to yet */
    (void)at;
    ol_ix_insert_up(idx, &p, idx->height, sep, nl);
}

/* The slow path of put: rebuild leaf l with key inserted at slot pos. */
static int ol_ix_rebuild(struct ol_index *idx, struct ol_ix_leaf *l, unsigned pos, const uint8_t *key,
                         size_t klen, const uint8_t *rec)
{
    size_t m = (size_t)l->n + 1;
    int rc = -ENOMEM;
    struct ol_ix_item *it = malloc(m * sizeof *it);
    size_t *psum = malloc((m + 1) * sizeof *psum), g[3];
    uint8_t *buf = malloc(ol_ix_gather_size(l) + 1);
    uint8_t **areas = NULL;
    struct ol_ix_leaf **nl = NULL;
    struct ol_ix_sep **seps = NULL;
    size_t k = 0;
    if (!it || !psum || !buf)
        goto out;
    ol_ix_gather(l, buf, it);
    memmove(&it[pos + 1], &it[pos], (l->n - pos) * sizeof *it);
    it[pos] = (struct ol_ix_item){key, rec, klen};
    psum[0] = 0;
    for (size_t i = 0; i < m; i++)
        psum[i + 1] = psum[i] + it[i].klen;
    k = ol_ix_plan(it, psum, m, pos == l->n && !l->next, g);

    /* Allocate everything first. */
    areas = calloc(k, sizeof *areas);
    nl = calloc(k, sizeof *nl);
    seps = calloc(k, sizeof *seps);
    if (!areas || !nl || !seps || ol_ix_reserve(idx, (unsigned)(k - 1) * (idx->height + 2)) < 0)
        goto out;
    for (size_t j = 0; j < k; j++) {
        areas[j] = malloc(ol_ix_area_cap(ol_ix_pack_size(it, psum, g[j], g[j + 1])));
        if (!areas[j])
            goto out;
        if (j) {
            nl[j] = calloc(1, sizeof **nl);
            seps[j] = ol_ix_sep_new(&it[g[j] - 1], &it[g[j]]);
            if (!nl[j] || !seps[j])
                goto out;
        }
    }

    /* Now change the tree: nothing below fails. */
    idx->mem -= l->cap;
    free(l->area);
    nl[0] = l;
    for (size_t j = 0; j < k; j++) {
        unsigned cap = ol_ix_area_cap(ol_ix_pack_size(it, psum, g[j], g[j + 1]));
        ol_ix_fill(nl[j], areas[j], cap, &it[g[j]], g[j + 1] - g[j]);
        idx->mem += cap;
        areas[j] = NULL;
        if (j) {
            struct ol_ix_leaf *prev = nl[j - 1];
            nl[j]->prev = prev;
            nl[j]->next = prev->next;
            if (prev->next)
                prev->next->prev = nl[j];
            else
                idx->last = nl[j];
            prev->next = nl[j];
            idx->mem += sizeof *nl[j] + sizeof *seps[j] + seps[j]->len;
            idx->nleaves++;
            ol_ix_add_leaf(idx, nl[j], seps[j]);
            nl[j] = NULL;
            seps[j] = NULL;
        }
    }
    idx->nkeys++;
    idx->version++;
    rc = 0;
out:
    for (size_t j = 0; j < k; j++) {
        if (areas)
            free(areas[j]);
        if (j && nl)
            free(nl[j]);
        if (j && seps)
            free(seps[j]);
    }
    free(areas);
    free(nl);
    free(seps);
    free(it);
    free(psum);
    free(buf);
    return rc;
}

int ol_ix_tree_put(struct ol_index *idx, const uint8_t *key, size_t klen, const uint8_t *rec)
{
    struct ol_ix_leaf *l = idx->last;
    unsigned pos;
    bool eq = false;
    if (l->n && ol_ix_cmp_ent(l, l->n - 1u, key, klen) > 0) {
        pos = l->n; /* past the last key: no descent */
    } else {
        l = ol_ix_descend(idx, key, klen, NULL);
        pos = ol_ix_leaf_lb(l, key, klen, &eq);
    }
    if (eq) {
        const uint8_t *e = ol_ix_ent(l, pos);
        memcpy(l->area + ol_ix_slots(l)[pos] + 2 + ol_ix_get16(e), rec, OL_INDEX_REC_LEN);
        idx->version++;
        return 1;
    }
    if (ol_ix_starts(key, klen, l->area, l->plen)) {
        size_t esz = 2 + klen - l->plen + OL_INDEX_REC_LEN;
        size_t need = l->heap + esz + 2 * ((size_t)l->n + 1);
        if (need <= OL_IX_LEAF_MAX) {
            if (need > l->cap) {
                unsigned cap = ol_ix_area_cap(need);
                uint8_t *a = realloc(l->area, cap);
                if (!a)
                    return -ENOMEM;
                memmove(a + cap - 2u * l->n, a + l->cap - 2u * l->n, 2u * l->n);
                idx->mem += cap - l->cap;
                l->area = a;
                l->cap = (uint16_t)cap;
            }
            uint8_t *e = l->area + l->heap;
            ol_ix_put16(e, (unsigned)(klen - l->plen));
            memcpy(e + 2, key + l->plen, klen - l->plen);
            memcpy(e + 2 + klen - l->plen, rec, OL_INDEX_REC_LEN);
            uint16_t *s = ol_ix_slots(l), *ns = s - 1;
            memmove(ns, s, pos * sizeof *s);
            ns[pos] = l->heap;
            l->n++;
            l->heap = (uint16_t)(l->heap + esz);
            idx->nkeys++;
            idx->version++;
            return 0;
        }
    }
    return ol_ix_rebuild(idx, l, pos, key, klen, rec);
}

/* Gives l an area just large enough, when that saves two steps or more. */
static void ol_ix_shrink(struct ol_index *idx, struct ol_ix_leaf *l)
{
    unsigned cap = ol_ix_area_cap((size_t)l->heap + 2u * l->n);
    if (cap + 2 * OL_IX_AREA_STEP > l->cap)
        return;
    uint8_t *a = malloc(cap);
    if (!a)
        return;
    memcpy(a, l->area, l->heap);
    memcpy(a + cap - 2u * l->n, ol_ix_slots(l), 2u * l->n);
    free(l->area);
    idx->mem -= l->cap - cap;
    l->area = a;
    l->cap = (uint16_t)cap;
}

/* Merges leaf l (child p->at[h-1] of its parent) with a sibling when both
 * fit in three quarters of a leaf. */
static void ol_ix_try_merge(struct ol_index *idx, struct ol_ix_path *p, struct ol_ix_leaf *l)
{
    unsigned h = idx->height;
    struct ol_ix_inner *par = p->node[h - 1];
    unsigned i = p->at[h - 1], si;
    OL_ASSERT(par->n >= 2);
    struct ol_ix_leaf *a, *b;
    if (i + 1 < par->n) {
        a = l;
        b = par->child[i + 1];
        si = i;
    } else {
        a = par->child[i - 1];
        b = l;
        si = i - 1;
    }
    if ((size_t)a->heap + b->heap + 2u * (a->n + b->n) > OL_IX_LEAF_MAX * 3 / 4 + a->plen + b->plen)
        return; /* cannot fit even if the prefixes were kept */
    size_t m = (size_t)a->n + b->n;
    struct ol_ix_item *it = malloc(m * sizeof *it);
    size_t *psum = malloc((m + 1) * sizeof *psum);
    uint8_t *buf = malloc(ol_ix_gather_size(a) + ol_ix_gather_size(b) + 1), *area = NULL;
    if (!it || !psum || !buf)
        goto out;
    ol_ix_gather(b, ol_ix_gather(a, buf, it), it + a->n);
    psum[0] = 0;
    for (size_t j = 0; j < m; j++)
        psum[j + 1] = psum[j] + it[j].klen;
    size_t used = ol_ix_pack_size(it, psum, 0, m);
    if (used > OL_IX_LEAF_MAX * 3 / 4)
        goto out;
    unsigned cap = ol_ix_area_cap(used);
    if (!(area = malloc(cap)))
        goto out;
    idx->mem -= a->cap;
    free(a->area);
    ol_ix_fill(a, area, cap, it, m);
    idx->mem += cap;
    ol_ix_unlink(idx, b);
    ol_ix_leaf_free(idx, b);
    ol_ix_inner_drop(idx, par, si + 1, true);
    ol_ix_rebalance(idx, p, h - 1);
out:
    free(it);
    free(psum);
    free(buf);
}

int ol_ix_tree_remove(struct ol_index *idx, const uint8_t *key, size_t klen)
{
    struct ol_ix_path p;
    struct ol_ix_leaf *l = ol_ix_descend(idx, key, klen, &p);
    bool eq;
    unsigned pos = ol_ix_leaf_lb(l, key, klen, &eq);
    if (!eq)
        return -ENOENT;
    uint16_t *s = ol_ix_slots(l);
    unsigned off = s[pos];
    size_t esz = ol_ix_ent_size(l->area + off);
    memmove(l->area + off, l->area + off + esz, l->heap - off - esz);
    l->heap = (uint16_t)(l->heap - esz);
    memmove(s + 1, s, pos * sizeof *s);
    l->n--;
    s = ol_ix_slots(l);
    for (unsigned j = 0; j < l->n; j++)
        if (s[j] > off)
            s[j] = (uint16_t)(s[j] - esz);
    idx->nkeys--;
    idx->version++;
    if (idx->height == 0) {
        ol_ix_shrink(idx, l);
        return 0;
    }
    unsigned h = idx->height;
    if (l->n == 0) {
        ol_ix_unlink(idx, l);
        ol_ix_leaf_free(idx, l);
        ol_ix_inner_drop(idx, p.node[h - 1], p.at[h - 1], true);
        ol_ix_rebalance(idx, &p, h - 1);
        return 0;
    }
    ol_ix_shrink(idx, l);
    if ((size_t)l->heap + 2u * l->n < OL_IX_LEAF_MAX / 4)
        ol_ix_try_merge(idx, &p, l);
    return 0;
}

/* ---- public map calls ------------------------------------------------------------ */

int ol_index_get(const struct ol_index *idx, const void *key, size_t klen, struct ol_index_rec *rec)
{
    if (klen == 0 || klen > OL_INDEX_KEY_MAX)
        return -EINVAL;
    const uint8_t *r = ol_ix_tree_get(idx, key, klen);
    if (!r)
        return -ENOENT;
    ol_ix_rec_decode(r, rec);
    return 0;
}

uint64_t ol_index_count(const struct ol_index *idx) { return idx->nkeys; }

void ol_index_stats(const struct ol_index *idx, struct ol_index_stats *st)
{
    *st = (struct ol_index_stats){
        .keys = idx->nkeys,
        .leaves = idx->nleaves,
        .inner_nodes = idx->ninner,
        .height = idx->height,
        .mem_bytes = idx->mem,
        .log_bytes = idx->log_size,
        .pending_frames = idx->batch_frames,
        .pending_bytes = idx->batch_len,
    };
}

/* ---- invariants ------------------------------------------------------------------ */

struct ol_ix_chk {
    const struct ol_ix_leaf *prev; /* the leaf before, in tree order */
    uint64_t keys, leaves, inner, mem;
    uint8_t last[OL_INDEX_KEY_MAX];
    size_t last_len;
    bool have_last;
};

static int ol_ix_check_leaf(const struct ol_index *idx, const struct ol_ix_leaf *l,
                            const struct ol_ix_sep *lo, const struct ol_ix_sep *hi, struct ol_ix_chk *c)
{
    if (l->prev != c->prev || (c->prev ? c->prev->next != l : idx->first != l))
        return -EUCLEAN;
    if (l->cap % OL_IX_AREA_STEP || l->cap > OL_IX_LEAF_MAX || (size_t)l->heap + 2u * l->n > l->cap ||
        l->plen > l->heap || (l->n == 0 && idx->root != l))
        return -EUCLEAN;
    const uint16_t *s = ol_ix_slots(l);
    size_t bytes = 0;
    for (unsigned i = 0; i < l->n; i++) {
        if (s[i] < l->plen || (size_t)s[i] + 2 > l->heap)
            return -EUCLEAN;
        const uint8_t *e = l->area + s[i];
        size_t r = ol_ix_get16(e), klen = l->plen + r;
        if ((size_t)s[i] + 2 + r + OL_INDEX_REC_LEN > l->heap || klen == 0 || klen > OL_INDEX_KEY_MAX)
            return -EUCLEAN;
        bytes += 2 + r + OL_INDEX_REC_LEN;
        uint8_t key[OL_INDEX_KEY_MAX];
        memcpy(key, l->area, l->plen);
        memcpy(key + l->plen, e + 2, r);
        if (c->have_last && ol_ix_cmp(c->last, c->last_len, key, klen) >= 0)
            return -EUCLEAN;
        if (lo && ol_ix_cmp(key, klen, lo->b, lo->len) < 0)
            return -EUCLEAN;
        if (hi && ol_ix_cmp(key, klen, hi->b, hi->len) >= 0)
            return -EUCLEAN;
        if (e[2 + r + 35] & ~OL_INDEX_F_ALL)
            return -EUCLEAN;
        memcpy(c->last, key, klen);
        c->last_len = klen;
        c->have_last = true;
    }
    if (bytes + l->plen != l->heap)
        return -EUCLEAN; /* overlapping or leaked entries */
    c->prev = l;
    c->keys += l->n;
    c->leaves++;
    c->mem += sizeof *l + l->cap;
    return 0;
}

static int ol_ix_check_node(const struct ol_index *idx, const void *n, unsigned depth,
                            const struct ol_ix_sep *lo, const struct ol_ix_sep *hi, struct ol_ix_chk *c)
{
    if (depth == idx->height)
        return ol_ix_check_leaf(idx, n, lo, hi, c);
    const struct ol_ix_inner *in = n;
    if (in->n < 1 || in->n > OL_IX_FAN || (depth == 0 && in->n < 2))
        return -EUCLEAN;
    c->inner++;
    c->mem += sizeof *in;
    for (unsigned i = 0; i + 1 < in->n; i++) {
        const struct ol_ix_sep *s = in->sep[i];
        if (s->len == 0 || s->len > OL_INDEX_KEY_MAX)
            return -EUCLEAN;
        if (i && ol_ix_cmp(in->sep[i - 1]->b, in->sep[i - 1]->len, s->b, s->len) >= 0)
            return -EUCLEAN;
        if ((lo && ol_ix_cmp(s->b, s->len, lo->b, lo->len) < 0) ||
            (hi && ol_ix_cmp(s->b, s->len, hi->b, hi->len) >= 0))
            return -EUCLEAN;
        c->mem += sizeof *s + s->len;
    }
    for (unsigned i = 0; i < in->n; i++) {
        int rc = ol_ix_check_node(idx, in->child[i], depth + 1, i ? in->sep[i - 1] : lo,
                                  i + 1 < in->n ? in->sep[i] : hi, c);
        if (rc < 0)
            return rc;
    }
    return 0;
}

int ol_index_check(const struct ol_index *idx)
{
    struct ol_ix_chk *c = calloc(1, sizeof *c);
    if (!c)
        return -ENOMEM;
    int rc = ol_ix_check_node(idx, idx->root, 0, NULL, NULL, c);
    if (rc == 0 && (c->prev != idx->last || idx->last->next || c->keys != idx->nkeys ||
                    c->leaves != idx->nleaves || c->inner != idx->ninner || c->mem != idx->mem))
        rc = -EUCLEAN;
    free(c);
    return rc;
}

/* ---- cursor ---------------------------------------------------------------------- */

static void ol_ix_cur_load(struct ol_index_cursor *c, const struct ol_ix_leaf *l, unsigned pos)
{
    const uint8_t *e = ol_ix_ent(l, pos);
    size_t r = ol_ix_get16(e);
    memcpy(c->key, l->area, l->plen);
    memcpy(c->key + l->plen, e + 2, r);
    c->klen = (uint16_t)(l->plen + r);
    ol_ix_rec_decode(e + 2 + r, &c->rec);
    c->leaf = l;
    c->pos = pos;
}

/* Moves to slot pos of l or the first slot after it. 1 or 0 (end). */
static int ol_ix_cur_settle(struct ol_index_cursor *c, const struct ol_ix_leaf *l, unsigned pos)
{
    while (l && pos >= l->n) {
        l = l->next;
        pos = 0;
    }
    if (!l) {
        c->leaf = NULL;
        c->klen = 0;
        return 0;
    }
    ol_ix_cur_load(c, l, pos);
    return 1;
}

int ol_index_seek(const struct ol_index *idx, struct ol_index_cursor *c, const void *key, size_t klen,
                  bool after)
{
    c->idx = idx;
    c->version = idx->version;
    bool eq = false;
    const struct ol_ix_leaf *l;
    unsigned pos;
    if (klen == 0) {
        l = idx->first;
        pos = 0;
    } else {
        l = ol_ix_descend(idx, key, klen, NULL);
        pos = ol_ix_leaf_lb(l, key, klen, &eq);
    }
    return ol_ix_cur_settle(c, l, pos + (after && eq));
}

int ol_index_next(struct ol_index_cursor *c)
{
    if (c->version != c->idx->version)
        return -ESTALE;
    if (!c->leaf)
        return 0;
    return ol_ix_cur_settle(c, c->leaf, c->pos + 1);
}

/* ---- S3 listing ------------------------------------------------------------------ */

/* The smallest key greater than every key starting with b[0..len): b with
 * trailing 0xff bytes dropped and its last byte incremented, in place.
 * Returns its length, 0 when there is none (b is all 0xff). */
static size_t ol_ix_succ(uint8_t *b, size_t len)
{
    while (len && b[len - 1] == 0xff)
        len--;
    if (len)
        b[len - 1]++;
    return len;
}

/* Leaves the CommonPrefix group cp: the cursor ends on the first key that
 * does not start with cp. */
static int ol_ix_skip_group(struct ol_index_cursor *c, const uint8_t *cp, size_t cplen, bool jump)
{
    if (jump) {
        uint8_t succ[OL_INDEX_KEY_MAX];
        memcpy(succ, cp, cplen);
        size_t sl = ol_ix_succ(succ, cplen);
        if (!sl) {
            c->leaf = NULL;
            return 0;
        }
        return ol_index_seek(c->idx, c, succ, sl, false);
    }
    int r;
    while ((r = ol_index_next(c)) == 1 && ol_ix_starts(c->key, c->klen, cp, cplen))
        ;
    return r;
}

static int ol_ix_list(const struct ol_index *idx, const struct ol_index_list_req *q, ol_index_list_fn cb,
                      void *arg, struct ol_index_list_out *out, bool jump)
{
    const uint8_t *pre = q->prefix, *dl = q->delim, *st = q->start;
    size_t pl = q->prefix_len, dlen = q->delim_len, sl = q->start_len;
    out->nkeys = out->nprefixes = 0;
    out->truncated = false;
    out->next_len = 0;
    if (q->max_keys == 0)
        return 0;
    struct ol_index_cursor c;
    uint8_t cp[OL_INDEX_KEY_MAX];
    unsigned count = 0;
    int r;
    if (sl && ol_ix_cmp(st, sl, pre, pl) >= 0)
        r = ol_index_seek(idx, &c, st, sl, true);
    else
        r = ol_index_seek(idx, &c, pre, pl, false);
    while (r == 1) {
        if (!ol_ix_starts(c.key, c.klen, pre, pl))
            break;
        const uint8_t *d = dlen ? memmem(c.key + pl, c.klen - pl, dl, dlen) : NULL;
        if (d) {
            size_t cplen = (size_t)(d - c.key) + dlen;
            memcpy(cp, c.key, cplen);
            if (sl && ol_ix_cmp(cp, cplen, st, sl) <= 0) { /* the marker is inside it */
                r = ol_ix_skip_group(&c, cp, cplen, jump);
                continue;
            }
            if (q->skip_deleted && (c.rec.flags & OL_INDEX_F_DELETE_MARKER)) {
                while ((r = ol_index_next(&c)) == 1 && ol_ix_starts(c.key, c.klen, cp, cplen) &&
                       (c.rec.flags & OL_INDEX_F_DELETE_MARKER))
                    ;
                if (r != 1 || !ol_ix_starts(c.key, c.klen, cp, cplen))
                    continue; /* only delete markers under it */
            }
            if (count == q->max_keys) {
                out->truncated = true;
                break;
            }
            count++;
            out->nprefixes++;
            memcpy(out->next, cp, cplen);
            out->next_len = (uint16_t)cplen;
            if (cb && (r = cb(arg, cp, cplen, NULL)) < 0)
                return r;
            r = ol_ix_skip_group(&c, cp, cplen, jump);
            continue;
        }
        if (q->skip_deleted && (c.rec.flags & OL_INDEX_F_DELETE_MARKER)) {
            r = ol_index_next(&c);
            continue;
        }
        if (count == q->max_keys) {
            out->truncated = true;
            break;
        }
        count++;
        out->nkeys++;
        memcpy(out->next, c.key, c.klen);
        out->next_len = c.klen;
        if (cb && (r = cb(arg, c.key, c.klen, &c.rec)) < 0)
            return r;
        r = ol_index_next(&c);
    }
    return r < 0 ? r : 0; /* -ESTALE: the callback changed the index */
}

int ol_index_list(const struct ol_index *idx, const struct ol_index_list_req *req, ol_index_list_fn cb,
                  void *arg, struct ol_index_list_out *out)
{
    return ol_ix_list(idx, req, cb, arg, out, true);
}

int ol_index_list_ref(const struct ol_index *idx, const struct ol_index_list_req *req,
                      ol_index_list_fn cb, void *arg, struct ol_index_list_out *out)
{
    return ol_ix_list(idx, req, cb, arg, out, false);
}
