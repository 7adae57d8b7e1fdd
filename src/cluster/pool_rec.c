/*
 * pool_rec.c - the pool record (pool_rec.h): made, encoded as JSON
 * (jansson), decoded and checked.
 */
#include "cluster/pool_rec.h"

#include "store/format.h"

#include <errno.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void ol_pool_rec_free(struct ol_pool_rec *r)
{
    free(r->nodes);
    free(r->uuids);
    memset(r, 0, sizeof *r);
}

int ol_pool_rec_index(const struct ol_pool_rec *r, int64_t id)
{
    for (unsigned i = 0; i < r->shape.nodes; i++)
        if (r->nodes[i] == id)
            return (int)i;
    return -1;
}

static const char *skip_sp(const char *s)
{
    while (*s == ' ')
        s++;
    return s;
}

/* A decimal id at *s (at most 2^31 - 1, as self_id): 0 and *s past it, or -1. */
static int parse_id(const char **s, int64_t *v)
{
    const char *p = skip_sp(*s);
    if (*p < '0' || *p > '9')
        return -1;
    int64_t x = 0;
    for (; *p >= '0' && *p <= '9'; p++) {
        x = x * 10 + (*p - '0');
        if (x > 2147483647)
            return -1;
    }
    *v = x;
    *s = skip_sp(p);
    return 0;
}

int ol_pool_parse_nodes(const char *s, int64_t *out, unsigned max, unsigned *n, char *err,
                        size_t errlen)
{
    unsigned k = 0;
    const char *p = s;
    for (;;) {
        int64_t a, b;
        if (parse_id(&p, &a) < 0) {
            snprintf(err, errlen, "pool \"%s\": expected a node id at \"%s\"", s, p);
            return -EINVAL;
        }
        b = a;
        if (*p == '-') {
            p++;
            if (parse_id(&p, &b) < 0 || b < a) {
                snprintf(err, errlen, "pool \"%s\": a range is low-high, both node ids", s);
                return -EINVAL;
            }
        }
        for (int64_t id = a; id <= b; id++) {
            if (k >= max) {
                snprintf(err, errlen, "pool \"%s\": more than %u nodes", s, max);
                return -EINVAL;
            }
            for (unsigned j = 0; j < k; j++)
                if (out[j] == id) {
                    snprintf(err, errlen, "pool \"%s\": node %lld is in it twice", s,
                             (long long)id);
                    return -EINVAL;
                }
            out[k++] = id;
        }
        if (*p == 0)
            break;
        if (*p != ',') {
            snprintf(err, errlen, "pool \"%s\": expected ',' at \"%s\"", s, p);
            return -EINVAL;
        }
        p++;
    }
    *n = k;
    return 0;
}

static int nodes_ok(const int64_t *nodes, unsigned n, char *err, size_t errlen)
{
    for (unsigned i = 0; i < n; i++) {
        if (nodes[i] < 0) {
            snprintf(err, errlen, "node id %lld in a pool: ids are 0 or more",
                     (long long)nodes[i]);
            return -EINVAL;
        }
        for (unsigned j = 0; j < i; j++)
            if (nodes[j] == nodes[i]) {
                snprintf(err, errlen, "node %lld is twice in one pool", (long long)nodes[i]);
                return -EINVAL;
            }
    }
    return 0;
}

static bool zero16(const uint8_t *u)
{
    for (int i = 0; i < 16; i++)
        if (u[i])
            return false;
    return true;
}

int ol_pool_rec_new(unsigned pool, const int64_t *nodes, const struct ol_pool_shape *shape,
                    struct ol_pool_rec *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    int rc = ol_pool_check(shape, err, errlen);
    if (rc == 0)
        rc = nodes_ok(nodes, shape->nodes, err, errlen);
    if (rc < 0)
        return rc;
    unsigned p = shape->nodes * shape->drives_per_node;
    out->pool = pool;
    out->shape = *shape;
    out->nodes = malloc(shape->nodes * sizeof *out->nodes);
    out->uuids = calloc(p, sizeof *out->uuids);
    if (!out->nodes || !out->uuids) {
        ol_pool_rec_free(out);
        return -ENOMEM;
    }
    memcpy(out->nodes, nodes, shape->nodes * sizeof *nodes);
    rc = ol_format_random_id(out->deployment, false);
    for (unsigned g = 0; rc == 0 && g < p; g++) {
        rc = ol_format_random_id(out->uuids[g], true);
        for (unsigned h = 0; rc == 0 && h < g; h++)
            if (!memcmp(out->uuids[h], out->uuids[g], 16))
                g--, h = g;   /* 2^-122: draw it again */
    }
    if (rc < 0) {
        snprintf(err, errlen, "getrandom failed: cannot make the pool's ids");
        ol_pool_rec_free(out);
    }
    return rc;
}

static void hex16(const uint8_t *u, char out[33])
{
    static const char h[] = "0123456789abcdef";
    for (int i = 0; i < 16; i++) {
        out[2 * i] = h[u[i] >> 4];
        out[2 * i + 1] = h[u[i] & 15];
    }
    out[32] = 0;
}

static int unhex16(const char *s, uint8_t *u)
{
    if (!s || strlen(s) != 32)
        return -1;
    for (int i = 0; i < 32; i++) {
        char c = s[i];
        int v = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (v < 0)
            return -1;
        if (i % 2 == 0)
            u[i / 2] = (uint8_t)(v << 4);
        else
            u[i / 2] |= (uint8_t)v;
    }
    return 0;
}

char *ol_pool_rec_encode(const struct ol_pool_rec *r, size_t *len)
{
    char dep[33];
    hex16(r->deployment, dep);
    json_t *nodes = json_array(), *uuids = json_array();
    unsigned p = r->shape.nodes * r->shape.drives_per_node;
    for (unsigned i = 0; nodes && i < r->shape.nodes; i++)
        json_array_append_new(nodes, json_integer((json_int_t)r->nodes[i]));
    for (unsigned g = 0; uuids && g < p; g++) {
        char u[33];
        hex16(r->uuids[g], u);
        json_array_append_new(uuids, json_string(u));
    }
    json_t *j = json_pack("{s:i, s:i, s:s, s:o, s:i, s:i, s:i, s:o}", "v", OL_POOL_REC_FORMAT,
                          "pool", (json_int_t)r->pool, "deployment", dep, "nodes", nodes,
                          "drives_per_node", (json_int_t)r->shape.drives_per_node,
                          "set_drives", (json_int_t)r->shape.set_drives, "parity",
                          (json_int_t)r->shape.parity, "drives", uuids);
    if (!j)
        return NULL;
    char *s = json_dumps(j, JSON_COMPACT);
    json_decref(j);
    if (s && len)
        *len = strlen(s);
    return s;
}

#define BAD(...) do { snprintf(err, errlen, __VA_ARGS__); rc = -EINVAL; goto out; } while (0)

int ol_pool_rec_decode(const char *json, size_t len, struct ol_pool_rec *out, char *err,
                       size_t errlen)
{
    memset(out, 0, sizeof *out);
    json_error_t je;
    json_t *j = json_loadb(json, len, JSON_REJECT_DUPLICATES, &je);
    int rc = 0;
    if (!j || !json_is_object(j))
        BAD("the pool record is not a JSON object");
    json_t *v = json_object_get(j, "v");
    if (!json_is_integer(v) || json_integer_value(v) < 1)
        BAD("the pool record has no format version");
    if (json_integer_value(v) > OL_POOL_REC_FORMAT) {
        snprintf(err, errlen, "the pool record is of format %lld, newer than this openlaked "
                 "reads (%d): upgrade it", (long long)json_integer_value(v), OL_POOL_REC_FORMAT);
        rc = -ENOTSUP;
        goto out;
    }
    json_t *pool = json_object_get(j, "pool"), *dep = json_object_get(j, "deployment"),
           *nodes = json_object_get(j, "nodes"), *dpn = json_object_get(j, "drives_per_node"),
           *sd = json_object_get(j, "set_drives"), *par = json_object_get(j, "parity"),
           *drives = json_object_get(j, "drives");
    if (!json_is_integer(pool) || !json_is_string(dep) || !json_is_array(nodes) ||
        !json_is_integer(dpn) || !json_is_integer(sd) || !json_is_integer(par) ||
        !json_is_array(drives))
        BAD("the pool record lacks a field or has one of the wrong type");
    json_int_t pv = json_integer_value(pool), dv = json_integer_value(dpn),
               sv = json_integer_value(sd), mv = json_integer_value(par);
    size_t nn = json_array_size(nodes);
    if (pv < 0 || pv > 255 || dv < 1 || dv > OL_POOL_MAX_NODE_DRIVES || sv < 1 ||
        sv > OL_POOL_MAX_SET_DRIVES || mv < 0 || mv > OL_POOL_MAX_SET_DRIVES || nn < 1 ||
        nn > OL_POOL_MAX_NODES)
        BAD("the pool record's numbers are out of range");
    out->pool = (unsigned)pv;
    out->shape = (struct ol_pool_shape){(unsigned)nn, (unsigned)dv, (unsigned)sv, (unsigned)mv};
    rc = ol_pool_check(&out->shape, err, errlen);
    if (rc < 0)
        goto out;
    if (unhex16(json_string_value(dep), out->deployment) < 0 || zero16(out->deployment))
        BAD("the pool record's deployment id is not 32 hex digits, or is zero");
    out->nodes = malloc(nn * sizeof *out->nodes);
    size_t p = nn * (size_t)dv;
    out->uuids = calloc(p, sizeof *out->uuids);
    if (!out->nodes || !out->uuids) {
        rc = -ENOMEM;
        goto out;
    }
    for (size_t i = 0; i < nn; i++) {
        json_t *x = json_array_get(nodes, i);
        if (!json_is_integer(x))
            BAD("the pool record's nodes are not all integers");
        out->nodes[i] = (int64_t)json_integer_value(x);
    }
    rc = nodes_ok(out->nodes, (unsigned)nn, err, errlen);
    if (rc < 0)
        goto out;
    if (json_array_size(drives) != p)
        BAD("the pool record has %zu drive uuids for %zu positions", json_array_size(drives), p);
    for (size_t g = 0; g < p; g++) {
        if (unhex16(json_string_value(json_array_get(drives, g)), out->uuids[g]) < 0 ||
            zero16(out->uuids[g]))
            BAD("the pool record's drive %zu is not a uuid of 32 hex digits", g);
        for (size_t h = 0; h < g; h++)
            if (!memcmp(out->uuids[h], out->uuids[g], 16))
                BAD("the pool record names drive uuid %s twice", json_string_value(
                        json_array_get(drives, g)));
    }
out:
    json_decref(j);
    if (rc < 0)
        ol_pool_rec_free(out);
    return rc;
}

int ol_pool_owner_parse(const char *key, size_t klen, const char *val, size_t vlen,
                        unsigned nsets, unsigned *set, int64_t *node)
{
    const char *slash = klen ? memrchr(key, '/', klen) : NULL;
    if (!slash || !val)
        return -EINVAL;
    size_t nl = klen - (size_t)(slash + 1 - key);
    unsigned long v = 0;
    if (nl == 0 || nl > 9)
        return -EINVAL;
    for (size_t i = 0; i < nl; i++) {
        char c = slash[1 + i];
        if (c < '0' || c > '9')
            return -EINVAL;
        v = v * 10 + (unsigned long)(c - '0');
    }
    if (v >= nsets)
        return -EINVAL;
    json_error_t je;
    json_t *j = json_loadb(val, vlen, 0, &je);
    json_t *n = j ? json_object_get(j, "node") : NULL;
    int rc = json_is_integer(n) ? 0 : -EINVAL;
    if (rc == 0) {
        *set = (unsigned)v;
        *node = (int64_t)json_integer_value(n);
    }
    json_decref(j);
    return rc;
}
