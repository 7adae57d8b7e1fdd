/*
 * etcd.c - see etcd.h.
 *
 * The gateway takes and gives JSON: bytes fields (key, value, range_end)
 * in base64, 64-bit integers as decimal strings (it accepts numbers too),
 * errors as {"error": ..., "code": grpc-code, "message": ...} with an HTTP
 * status >= 400. A watch is one POST whose answer streams one JSON object
 * per event batch, for as long as the connection lives.
 */
#include "cluster/etcd.h"

#include <curl/curl.h>
#include <errno.h>
#include <jansson.h>
#include <openssl/evp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* What one answer may hold: a range of a cluster's members is kilobytes;
 * more than this is not an answer we asked for. */
#define OL_ETCD_MAX_BODY (16u << 20)
/* One watch message (a batch of events on node records): far less. */
#define OL_ETCD_MAX_EVENT (4u << 20)

struct ol_etcd {
    CURL *curl;
    CURLM *multi;                    /* every request runs in it: ol_etcd_wake ends its wait */
    const atomic_bool *stop;         /* set: requests end (ol_etcd_set_stop) */
    struct ol_etcd_opts o;
    int cur;                         /* the endpoint that answered last */
    char token[512];                 /* auth token; "" = none (yet) */
    char *buf;                       /* the answer being read */
    size_t len, cap;
    bool overflow;
    /* watch: events go straight to the callback as the stream arrives */
    int (*wfn)(void *, const struct ol_etcd_kv *);
    void *warg;
    int wrc;                         /* fn's non-zero return, or a parse error */
    int64_t wlast;                   /* revision of the last event seen */
    bool wcreated, wcompacted;
    char werr[256];
};

static int fail(char *err, size_t errlen, int rc, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int fail(char *err, size_t errlen, int rc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return rc;
}

static size_t on_body(char *p, size_t sz, size_t n, void *arg)
{
    struct ol_etcd *e = arg;
    size_t add = sz * n;
    if (e->len + add > OL_ETCD_MAX_BODY) {
        e->overflow = true;
        return 0;                    /* curl stops: CURLE_WRITE_ERROR */
    }
    if (e->len + add + 1 > e->cap) {
        size_t cap = e->cap ? e->cap : 4096;
        while (cap < e->len + add + 1)
            cap *= 2;
        char *nb = realloc(e->buf, cap);
        if (!nb) {
            e->overflow = true;
            return 0;
        }
        e->buf = nb;
        e->cap = cap;
    }
    memcpy(e->buf + e->len, p, add);
    e->len += add;
    e->buf[e->len] = 0;
    return add;
}

/* ---- base64 (OpenSSL's codec) --------------------------------------------- */

static char *b64(const void *p, size_t n)
{
    char *out = malloc(4 * ((n + 2) / 3) + 1);
    if (out)
        EVP_EncodeBlock((unsigned char *)out, p, (int)n);
    return out;
}

/* Decodes s into a new buffer (NUL-terminated for convenience); *n its length. */
static char *unb64(const char *s, size_t *n)
{
    size_t sl = strlen(s);
    if (sl % 4)
        return NULL;
    char *out = malloc(sl / 4 * 3 + 1);
    if (!out)
        return NULL;
    int got = sl ? EVP_DecodeBlock((unsigned char *)out, (const unsigned char *)s, (int)sl) : 0;
    if (got < 0) {
        free(out);
        return NULL;
    }
    size_t pad = sl >= 2 ? (s[sl - 1] == '=') + (s[sl - 2] == '=') : 0;
    *n = (size_t)got - pad;
    out[*n] = 0;
    return out;
}

/* The key right after every key with this prefix (etcd's range_end). */
static char *prefix_end(const char *prefix)
{
    size_t n = strlen(prefix);
    char *end = malloc(n + 1);
    if (!end)
        return NULL;
    memcpy(end, prefix, n + 1);
    while (n && (unsigned char)end[n - 1] == 0xff)
        n--;
    if (!n) {                        /* all 0xff: to the end of the key space */
        end[0] = 0;
        return end;
    }
    end[n - 1]++;
    end[n] = 0;
    return end;
}

static int64_t jint(json_t *o, const char *name)
{
    json_t *v = json_object_get(o, name);
    if (json_is_string(v))
        return strtoll(json_string_value(v), NULL, 10);
    if (json_is_integer(v))
        return json_integer_value(v);
    return 0;
}

/* ---- requests --------------------------------------------------------------- */

static void setup(struct ol_etcd *e, const char *url, const char *body, struct curl_slist *h)
{
    curl_easy_reset(e->curl);
    curl_easy_setopt(e->curl, CURLOPT_URL, url);
    curl_easy_setopt(e->curl, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e->curl, CURLOPT_CONNECTTIMEOUT_MS, e->o.timeout_ms);
    curl_easy_setopt(e->curl, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(e->curl, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(e->curl, CURLOPT_WRITEDATA, e);
    curl_easy_setopt(e->curl, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(e->curl, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(e->curl, CURLOPT_TCP_KEEPIDLE, 5L);
    curl_easy_setopt(e->curl, CURLOPT_TCP_KEEPINTVL, 2L);
    if (e->o.ca_file)
        curl_easy_setopt(e->curl, CURLOPT_CAINFO, e->o.ca_file);
    if (e->o.cert_file)
        curl_easy_setopt(e->curl, CURLOPT_SSLCERT, e->o.cert_file);
    if (e->o.key_file)
        curl_easy_setopt(e->curl, CURLOPT_SSLKEY, e->o.key_file);
    if (body) {
        curl_easy_setopt(e->curl, CURLOPT_POST, 1L);
        curl_easy_setopt(e->curl, CURLOPT_POSTFIELDS, body);
    }
    e->len = 0;
    e->overflow = false;
}

static struct curl_slist *headers(struct ol_etcd *e)
{
    struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
    if (h && e->token[0]) {
        char auth[600];
        snprintf(auth, sizeof auth, "Authorization: %s", e->token);
        struct curl_slist *h2 = curl_slist_append(h, auth);
        if (!h2) {
            curl_slist_free_all(h);
            return NULL;
        }
        h = h2;
    }
    return h;
}

/* The request set up on e->curl, run in the multi handle so that
 * ol_etcd_wake (another thread) ends the wait at once when *e->stop
 * is set: CURLE_ABORTED_BY_CALLBACK then. */
static CURLcode perform(struct ol_etcd *e)
{
    const atomic_bool *stop = e->stop;
    if (stop && atomic_load(stop))
        return CURLE_ABORTED_BY_CALLBACK;
    if (curl_multi_add_handle(e->multi, e->curl) != CURLM_OK)
        return curl_easy_perform(e->curl);
    CURLcode cc = CURLE_OK;
    int running = 1;
    while (running && !(stop && atomic_load(stop))) {
        if (curl_multi_perform(e->multi, &running) != CURLM_OK)
            break;
        if (running)
            curl_multi_poll(e->multi, NULL, 0, 1000, NULL);
    }
    int left;
    CURLMsg *msg;
    while ((msg = curl_multi_info_read(e->multi, &left)))
        if (msg->msg == CURLMSG_DONE && msg->easy_handle == e->curl)
            cc = msg->data.result;
    if (running || (stop && atomic_load(stop)))
        cc = CURLE_ABORTED_BY_CALLBACK;
    curl_multi_remove_handle(e->multi, e->curl);
    return cc;
}

/* One POST to one endpoint: 0 with *resp parsed, or an error. An error
 * answer of the gateway is -EACCES (authentication, permission), -EAGAIN
 * (the token expired: log in again), or -EPROTO; a transport failure
 * -EHOSTUNREACH. */
static int post_one(struct ol_etcd *e, int ep, const char *path, const char *body, json_t **resp,
                    char *err, size_t errlen)
{
    char url[600];
    snprintf(url, sizeof url, "%s%s", e->o.endpoints[ep], path);
    struct curl_slist *h = headers(e);
    if (!h)
        return fail(err, errlen, -ENOMEM, "out of memory");
    setup(e, url, body, h);
    curl_easy_setopt(e->curl, CURLOPT_TIMEOUT_MS, e->o.timeout_ms);
    CURLcode cc = perform(e);
    curl_slist_free_all(h);
    if (e->overflow)
        return fail(err, errlen, -EPROTO, "%s: answer over %u bytes", url, OL_ETCD_MAX_BODY);
    if (cc == CURLE_ABORTED_BY_CALLBACK)
        return fail(err, errlen, -ECANCELED, "%s: stopped", url);
    if (cc != CURLE_OK)
        return fail(err, errlen, -EHOSTUNREACH, "%s: %s", url, curl_easy_strerror(cc));
    long status = 0;
    curl_easy_getinfo(e->curl, CURLINFO_RESPONSE_CODE, &status);
    json_error_t je;
    json_t *j = json_loadb(e->buf ? e->buf : "", e->len, 0, &je);
    if (!j || !json_is_object(j)) {
        json_decref(j);
        return fail(err, errlen, -EPROTO, "%s: HTTP %ld, not a JSON object: %.120s", url, status,
                    e->buf ? e->buf : "");
    }
    json_t *msg = json_object_get(j, "message");
    if (!msg)
        msg = json_object_get(j, "error");
    if (status >= 400 || (msg && json_object_get(j, "code"))) {
        const char *m = json_is_string(msg) ? json_string_value(msg) : "(no message)";
        int rc = strstr(m, "invalid auth token") || strstr(m, "user name is empty") ? -EAGAIN
                 : strstr(m, "authentication failed") || strstr(m, "permission denied") ||
                         strstr(m, "user name not found") ||
                         strstr(m, "authentication is not enabled") || status == 401 ||
                         status == 403
                     ? -EACCES
                 : strstr(m, "requested lease not found") ? -ENOENT
                                                          : -EPROTO;
        fail(err, errlen, rc, "%s: HTTP %ld: %s", url, status, m);
        json_decref(j);
        return rc;
    }
    *resp = j;
    return 0;
}

static int authenticate(struct ol_etcd *e, int ep, char *err, size_t errlen)
{
    e->token[0] = 0;
    /* Built here, not by jansson, so that no copy of the password is left
     * in freed memory: the one buffer is zeroed after the call. (config.c
     * holds user and password to printable ASCII: '"' and '\\' are the
     * only characters JSON needs escaped.) */
    char s[640];
    size_t n = 0;
    const char *parts[] = {"{\"name\":\"", e->o.user, "\",\"password\":\"",
                           e->o.password ? e->o.password : "", "\"}"};
    for (int i = 0; i < 5; i++)
        for (const char *c = parts[i]; *c && n < sizeof s - 3; c++) {
            if ((i == 1 || i == 3) && (*c == '"' || *c == '\\'))
                s[n++] = '\\';
            s[n++] = *c;
        }
    s[n] = 0;
    json_t *r = NULL;
    int rc = post_one(e, ep, "/v3/auth/authenticate", s, &r, err, errlen);
    explicit_bzero(s, sizeof s);
    if (rc == -EAGAIN)
        rc = -EACCES;
    if (rc < 0)
        return rc;
    json_t *t = json_object_get(r, "token");
    if (!json_is_string(t) || strlen(json_string_value(t)) >= sizeof e->token) {
        json_decref(r);
        return fail(err, errlen, -EPROTO, "%s: authenticate: no token in the answer",
                    e->o.endpoints[ep]);
    }
    snprintf(e->token, sizeof e->token, "%s", json_string_value(t));
    json_decref(r);
    return 0;
}

/* POST body (consumed) to path on the endpoint that answered last, else the
 * others in turn; logs in first (and again once when the token expired). */
static int call(struct ol_etcd *e, const char *path, json_t *body, json_t **resp, char *err,
                size_t errlen)
{
    if (!body)
        return fail(err, errlen, -ENOMEM, "out of memory");
    char *s = json_dumps(body, JSON_COMPACT);
    json_decref(body);
    if (!s)
        return fail(err, errlen, -ENOMEM, "out of memory");
    int rc = -EHOSTUNREACH;
    for (int i = 0; i < e->o.n_endpoints; i++) {
        int ep = (e->cur + i) % e->o.n_endpoints;
        for (int tries = 0; tries < 2; tries++) {
            if (e->o.user && !e->token[0] && (rc = authenticate(e, ep, err, errlen)) < 0)
                break;
            rc = post_one(e, ep, path, s, resp, err, errlen);
            if (rc != -EAGAIN)
                break;
            e->token[0] = 0;         /* expired: once more with a new one */
        }
        if (rc != -EHOSTUNREACH) {
            if (rc != -ECANCELED)
                e->cur = ep;
            break;
        }
        e->token[0] = 0;             /* tokens are per member */
    }
    free(s);
    return rc;
}

/* ---- API --------------------------------------------------------------------- */

int ol_etcd_open(const struct ol_etcd_opts *o, struct ol_etcd **out, char *err, size_t errlen)
{
    static bool inited;
    if (!inited) {                   /* first use is on one thread: member.c's start */
        curl_global_init(CURL_GLOBAL_DEFAULT);
        inited = true;
    }
    if (o->n_endpoints < 1 || o->n_endpoints > OL_ETCD_MAX_ENDPOINTS)
        return fail(err, errlen, -EINVAL, "1 to %d etcd endpoints", OL_ETCD_MAX_ENDPOINTS);
    struct ol_etcd *e = calloc(1, sizeof *e);
    if (!e || !(e->curl = curl_easy_init()) || !(e->multi = curl_multi_init())) {
        if (e)
            curl_easy_cleanup(e->curl);
        free(e);
        return fail(err, errlen, -ENOMEM, "out of memory");
    }
    e->o = *o;
    if (e->o.timeout_ms <= 0)
        e->o.timeout_ms = 5000;
    if (o->n_endpoints > 0)
        e->cur = (o->first % o->n_endpoints + o->n_endpoints) % o->n_endpoints;
    *out = e;
    return 0;
}

void ol_etcd_close(struct ol_etcd *e)
{
    if (!e)
        return;
    curl_multi_cleanup(e->multi);
    curl_easy_cleanup(e->curl);
    free(e->buf);
    explicit_bzero(e->token, sizeof e->token);
    free(e);
}

void ol_etcd_set_timeout(struct ol_etcd *e, long ms)
{
    e->o.timeout_ms = ms;
}

const char *ol_etcd_endpoint(const struct ol_etcd *e)
{
    return e->o.endpoints[e->cur];
}

int ol_etcd_lease_grant(struct ol_etcd *e, int64_t ttl_s, int64_t *id, char *err, size_t errlen)
{
    json_t *r;
    int rc = call(e, "/v3/lease/grant", json_pack("{s:I}", "TTL", (json_int_t)ttl_s), &r, err,
                  errlen);
    if (rc < 0)
        return rc;
    *id = jint(r, "ID");
    json_decref(r);
    return *id ? 0 : fail(err, errlen, -EPROTO, "lease grant: no ID in the answer");
}

int ol_etcd_lease_keepalive(struct ol_etcd *e, int64_t id, int64_t *ttl_left, char *err,
                            size_t errlen)
{
    json_t *r;
    int rc = call(e, "/v3/lease/keepalive", json_pack("{s:I}", "ID", (json_int_t)id), &r, err,
                  errlen);
    if (rc < 0)
        return rc;
    json_t *res = json_object_get(r, "result");
    *ttl_left = res ? jint(res, "TTL") : 0;   /* no TTL: the lease is gone */
    json_decref(r);
    return 0;
}

int ol_etcd_lease_revoke(struct ol_etcd *e, int64_t id, char *err, size_t errlen)
{
    json_t *r;
    int rc = call(e, "/v3/lease/revoke", json_pack("{s:I}", "ID", (json_int_t)id), &r, err,
                  errlen);
    if (rc == 0)
        json_decref(r);
    return rc;
}

int ol_etcd_put(struct ol_etcd *e, const char *key, const void *val, size_t vlen, int64_t lease,
                char *err, size_t errlen)
{
    char *k = b64(key, strlen(key)), *v = b64(val, vlen);
    json_t *body = k && v ? json_pack("{s:s, s:s, s:I}", "key", k, "value", v, "lease",
                                      (json_int_t)lease)
                          : NULL;
    free(k);
    free(v);
    json_t *r;
    int rc = call(e, "/v3/kv/put", body, &r, err, errlen);
    if (rc == 0)
        json_decref(r);
    return rc;
}

int ol_etcd_delete(struct ol_etcd *e, const char *key, char *err, size_t errlen)
{
    char *k = b64(key, strlen(key));
    json_t *body = k ? json_pack("{s:s}", "key", k) : NULL;
    free(k);
    json_t *r;
    int rc = call(e, "/v3/kv/deleterange", body, &r, err, errlen);
    if (rc == 0)
        json_decref(r);
    return rc;
}

/* A kv object of an answer into out (key and value decoded into new
 * buffers the caller frees: *kb, *vb). */
static int kv_of(json_t *o, struct ol_etcd_kv *out, char **kb, char **vb, bool deleted)
{
    *kb = *vb = NULL;
    json_t *k = json_object_get(o, "key"), *v = json_object_get(o, "value");
    if (!json_is_string(k) || !(*kb = unb64(json_string_value(k), &out->klen)))
        return -EPROTO;
    out->key = *kb;
    out->val = NULL;
    out->vlen = 0;
    if (!deleted) {
        if (json_is_string(v)) {
            if (!(*vb = unb64(json_string_value(v), &out->vlen)))
                return -EPROTO;
            out->val = *vb;
        } else {
            out->val = "";           /* an empty value is left out of the JSON */
        }
    }
    out->mod_revision = jint(o, "mod_revision");
    out->lease = jint(o, "lease");
    return 0;
}

/* One transaction: key = val under lease if the key's `target` ("CREATE"
 * or "MOD") revision is `want`; else, with range_else, the key is read.
 * 0 put, 1 not (*r the answer, for the caller to read and free), or -errno;
 * *rev the revision of the answer. */
static int txn_put_if(struct ol_etcd *e, const char *key, const void *val, size_t vlen,
                      int64_t lease, const char *target, int64_t want, bool range_else,
                      json_t **r, int64_t *rev, char *err, size_t errlen)
{
    char *k = b64(key, strlen(key)), *v = b64(val, vlen);
    char w[24];
    snprintf(w, sizeof w, "%lld", (long long)want);
    json_t *body = k && v ? json_pack("{s:[{s:s, s:s, s:s, s:s}], s:[{s:{s:s, s:s, s:I}}]}",
                                      "compare", "key", k, "target", target,
                                      !strcmp(target, "MOD") ? "mod_revision" : "create_revision",
                                      w, "result", "EQUAL", "success", "request_put", "key", k,
                                      "value", v, "lease", (json_int_t)lease)
                          : NULL;
    if (body && range_else && json_object_set_new(body, "failure",
                                                  json_pack("[{s:{s:s}}]", "request_range",
                                                            "key", k)) < 0) {
        json_decref(body);
        body = NULL;
    }
    free(k);
    free(v);
    *r = NULL;
    int rc = call(e, "/v3/kv/txn", body, r, err, errlen);
    if (rc < 0)
        return rc;
    *rev = jint(json_object_get(*r, "header"), "revision");
    if (json_is_true(json_object_get(*r, "succeeded"))) {
        json_decref(*r);
        *r = NULL;
        return 0;
    }
    return 1;
}

int ol_etcd_put_if(struct ol_etcd *e, const char *key, const void *val, size_t vlen,
                   int64_t lease, int64_t mod_rev, int64_t *rev, char *err, size_t errlen)
{
    json_t *r;
    int rc = txn_put_if(e, key, val, vlen, lease, "MOD", mod_rev, false, &r, rev, err, errlen);
    if (rc == 1)
        json_decref(r);
    return rc;
}

int ol_etcd_create(struct ol_etcd *e, const char *key, const void *val, size_t vlen,
                   int64_t lease, int64_t *rev, char *have, size_t havelen, char *err,
                   size_t errlen)
{
    json_t *r;
    int rc = txn_put_if(e, key, val, vlen, lease, "CREATE", 0, true, &r, rev, err, errlen);
    if (rc != 1)
        return rc;
    /* failure: responses[0].response_range.kvs[0] */
    json_t *kvs = json_object_get(
        json_object_get(json_array_get(json_object_get(r, "responses"), 0), "response_range"),
        "kvs");
    struct ol_etcd_kv kv;
    char *kb = NULL, *vb = NULL;
    if (havelen)
        have[0] = 0;
    if (json_array_size(kvs) == 1 && kv_of(json_array_get(kvs, 0), &kv, &kb, &vb, false) == 0 &&
        havelen)
        snprintf(have, havelen, "%.*s", (int)kv.vlen, kv.val);
    free(kb);
    free(vb);
    json_decref(r);
    return 1;
}

int ol_etcd_range_prefix(struct ol_etcd *e, const char *prefix,
                         int (*fn)(void *arg, const struct ol_etcd_kv *kv), void *arg,
                         int64_t *rev, char *err, size_t errlen)
{
    char *end = prefix_end(prefix);
    char *k = b64(prefix, strlen(prefix)), *ke = end ? b64(end, strlen(end)) : NULL;
    json_t *body = k && ke ? json_pack("{s:s, s:s}", "key", k, "range_end", ke) : NULL;
    free(end);
    free(k);
    free(ke);
    json_t *r;
    int rc = call(e, "/v3/kv/range", body, &r, err, errlen);
    if (rc < 0)
        return rc;
    *rev = jint(json_object_get(r, "header"), "revision");
    json_t *kvs = json_object_get(r, "kvs");
    size_t i;
    json_t *o;
    json_array_foreach(kvs, i, o) {
        struct ol_etcd_kv kv;
        char *kb, *vb;
        rc = kv_of(o, &kv, &kb, &vb, false);
        if (rc == 0)
            rc = fn(arg, &kv);
        else
            fail(err, errlen, rc, "range %s: a key-value pair not in the documented form",
                 prefix);
        free(kb);
        free(vb);
        if (rc)
            break;
    }
    json_decref(r);
    return rc;
}

/* Watch stream: parse every whole JSON object in the buffer. */
static size_t on_watch(char *p, size_t sz, size_t n, void *arg)
{
    struct ol_etcd *e = arg;
    size_t add = on_body(p, sz, n, arg);
    if (add != sz * n)
        return 0;
    if (e->len > OL_ETCD_MAX_EVENT) {
        snprintf(e->werr, sizeof e->werr, "watch: a message over %u bytes", OL_ETCD_MAX_EVENT);
        e->wrc = -EPROTO;
        return 0;
    }
    /* The gateway ends each message with a newline: nothing to parse before
     * one arrives (no re-parsing of a long message at every chunk). */
    if (!memchr(p, '\n', add))
        return add;
    size_t off = 0;
    while (off < e->len) {
        while (off < e->len && (e->buf[off] == '\n' || e->buf[off] == '\r' || e->buf[off] == ' '))
            off++;
        if (off == e->len)
            break;
        json_error_t je;
        json_t *j = json_loadb(e->buf + off, e->len - off, JSON_DISABLE_EOF_CHECK, &je);
        if (!j && json_error_code(&je) == json_error_premature_end_of_input)
            break;                   /* the rest of it is still on its way */
        if (!j) {
            snprintf(e->werr, sizeof e->werr, "watch: not JSON: %s", je.text);
            e->wrc = -EPROTO;
            return 0;
        }
        off += (size_t)je.position;
        json_t *res = json_object_get(j, "result");
        json_t *error = json_object_get(j, "error");
        if (error || !res) {
            json_t *m = json_object_get(error ? error : j, "message");
            snprintf(e->werr, sizeof e->werr, "watch: %s",
                     json_is_string(m) ? json_string_value(m) : "an answer without a result");
            e->wrc = -EPROTO;
            json_decref(j);
            return 0;
        }
        if (json_is_true(json_object_get(res, "created")))
            e->wcreated = true;
        if (jint(res, "compact_revision") > 0) {
            e->wcompacted = true;
            snprintf(e->werr, sizeof e->werr, "watch: revision compacted (oldest kept %lld)",
                     (long long)jint(res, "compact_revision"));
            e->wrc = -ERANGE;
            json_decref(j);
            return 0;
        }
        if (json_is_true(json_object_get(res, "canceled"))) {
            json_t *m = json_object_get(res, "cancel_reason");
            snprintf(e->werr, sizeof e->werr, "watch canceled: %s",
                     json_is_string(m) ? json_string_value(m) : "no reason given");
            e->wrc = -EPROTO;
            json_decref(j);
            return 0;
        }
        size_t i;
        json_t *ev;
        json_array_foreach(json_object_get(res, "events"), i, ev) {
            json_t *type = json_object_get(ev, "type");
            bool del = json_is_string(type) && !strcmp(json_string_value(type), "DELETE");
            struct ol_etcd_kv kv;
            char *kb, *vb;
            int rc = kv_of(json_object_get(ev, "kv"), &kv, &kb, &vb, del);
            if (rc == 0) {
                e->wlast = kv.mod_revision;
                rc = e->wfn(e->warg, &kv);
            } else {
                snprintf(e->werr, sizeof e->werr, "watch: an event not in the documented form");
            }
            free(kb);
            free(vb);
            if (rc) {
                e->wrc = rc;
                json_decref(j);
                return 0;
            }
        }
        json_decref(j);
    }
    memmove(e->buf, e->buf + off, e->len - off);
    e->len -= off;
    return add;
}

int ol_etcd_watch(struct ol_etcd *e, const char *prefix, int64_t start_rev,
                  int (*fn)(void *arg, const struct ol_etcd_kv *kv), void *arg, char *err,
                  size_t errlen)
{
    const atomic_bool *stop = e->stop;
    if (e->o.user && !e->token[0]) {
        int rc = authenticate(e, e->cur, err, errlen);
        if (rc < 0)
            return rc;
    }
    char *end = prefix_end(prefix);
    char *k = b64(prefix, strlen(prefix)), *ke = end ? b64(end, strlen(end)) : NULL;
    json_t *body = k && ke ? json_pack("{s:{s:s, s:s, s:I}}", "create_request", "key", k,
                                       "range_end", ke, "start_revision", (json_int_t)start_rev)
                           : NULL;
    free(end);
    free(k);
    free(ke);
    char *s = body ? json_dumps(body, JSON_COMPACT) : NULL;
    json_decref(body);
    struct curl_slist *h = s ? headers(e) : NULL;
    /* A member cut off from etcd's quorum would keep the stream open with
     * no events: this asks etcd to refuse the watch (and end it) instead. */
    struct curl_slist *h2 = h ? curl_slist_append(h, "Grpc-Metadata-hasleader: true") : NULL;
    if (!h2) {
        curl_slist_free_all(h);
        free(s);
        return fail(err, errlen, -ENOMEM, "out of memory");
    }
    h = h2;
    char url[600];
    snprintf(url, sizeof url, "%s/v3/watch", e->o.endpoints[e->cur]);
    setup(e, url, s, h);
    curl_easy_setopt(e->curl, CURLOPT_WRITEFUNCTION, on_watch);
    e->wfn = fn;
    e->warg = arg;
    e->wrc = 0;
    e->wlast = 0;
    e->wcreated = e->wcompacted = false;
    e->werr[0] = 0;
    CURLcode cc = perform(e);
    curl_slist_free_all(h);
    free(s);
    if (stop && atomic_load(stop))
        return 0;
    if (e->wrc) {
        if (e->werr[0])
            snprintf(err, errlen, "%s: %s", url, e->werr);
        if (e->wrc == -EPROTO && strstr(e->werr, "auth"))
            e->token[0] = 0;
        return e->wrc;
    }
    if (e->overflow)
        return fail(err, errlen, -EPROTO, "%s: an event over %u bytes", url, OL_ETCD_MAX_BODY);
    long status = 0;
    curl_easy_getinfo(e->curl, CURLINFO_RESPONSE_CODE, &status);
    if (cc == CURLE_OK && status >= 400) {
        e->token[0] = 0;             /* perhaps an expired token: log in again next time */
        return fail(err, errlen, status == 401 ? -EACCES : -EPROTO, "%s: HTTP %ld: %.160s", url,
                    status, e->buf ? e->buf : "");
    }
    e->cur = (e->cur + 1) % e->o.n_endpoints;   /* the stream broke: next time the next one */
    return fail(err, errlen, -EHOSTUNREACH, "%s: the stream ended: %s", url,
                cc == CURLE_OK ? "closed by etcd" : curl_easy_strerror(cc));
}

void ol_etcd_set_stop(struct ol_etcd *e, const atomic_bool *stop)
{
    e->stop = stop;
}

void ol_etcd_wake(struct ol_etcd *e)
{
    curl_multi_wakeup(e->multi);
}

int ol_etcd_health(struct ol_etcd *e, int *healthy, char *err, size_t errlen)
{
    *healthy = 0;
    err[0] = 0;
    for (int i = 0; i < e->o.n_endpoints; i++) {
        char url[600];
        snprintf(url, sizeof url, "%s/health", e->o.endpoints[i]);
        struct curl_slist *h = headers(e);
        if (!h)
            return fail(err, errlen, -ENOMEM, "out of memory");
        setup(e, url, NULL, h);
        curl_easy_setopt(e->curl, CURLOPT_TIMEOUT_MS, e->o.timeout_ms);
        CURLcode cc = curl_easy_perform(e->curl);
        curl_slist_free_all(h);
        json_error_t je;
        json_t *j = cc == CURLE_OK ? json_loadb(e->buf ? e->buf : "", e->len, 0, &je) : NULL;
        json_t *ok = json_object_get(j, "health");
        if (json_is_string(ok) && !strcmp(json_string_value(ok), "true"))
            (*healthy)++;
        else
            snprintf(err, errlen, "%s: %s", url,
                     cc != CURLE_OK ? curl_easy_strerror(cc) : "not healthy");
        json_decref(j);
    }
    return 0;
}
