/*
 * etcd.h - a blocking client of etcd v3 through its HTTP/JSON gateway
 * (/v3/kv/..., /v3/lease/..., /v3/watch, /v3/auth/authenticate), with
 * libcurl for HTTP (and TLS) and jansson for JSON (docs/dependencies.md).
 *
 * Owns: one curl handle and the endpoint list; the auth token of a
 * user/password login, taken again when etcd says it expired; failing over
 * to the next endpoint when one does not answer. Keys and values are bytes
 * (base64 on the wire, as the gateway wants).
 *
 * For the control threads of cluster/member.c: never call it from a data
 * core (every call waits on the network, up to timeout_ms). One handle per
 * thread; nothing here is thread-safe but ol_etcd_wake.
 *
 * Errors: negative, with err holding one line for a log or the user
 * (which endpoint, what etcd or the transport said):
 *   -EHOSTUNREACH  no endpoint answered
 *   -EACCES        authentication refused (bad user or password, no
 *                  permission on the key)
 *   -EPROTO        an answer that is not what the API documents
 *   -ECANCELED     the stop flag (ol_etcd_set_stop) was set
 *   -ENOMEM
 */
#ifndef OL_CLUSTER_ETCD_H
#define OL_CLUSTER_ETCD_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define OL_ETCD_MAX_ENDPOINTS 16

struct ol_etcd_opts {
    const char *endpoints[OL_ETCD_MAX_ENDPOINTS]; /* "http://h:2379" or "https://..." */
    int n_endpoints;
    const char *user;       /* NULL: no authentication */
    const char *password;
    const char *ca_file;    /* https: the CA bundle; NULL = the system's */
    const char *cert_file;  /* client certificate (etcd --client-cert-auth), or NULL */
    const char *key_file;
    long timeout_ms;        /* each request, connect included */
    int first;              /* the endpoint to try first (mod n_endpoints): nodes that
                               start on different ones spread etcd's load */
};

struct ol_etcd;

int ol_etcd_open(const struct ol_etcd_opts *o, struct ol_etcd **out, char *err, size_t errlen);
void ol_etcd_close(struct ol_etcd *e);

/* Each request's deadline from now on (e.g. shorter for a last call at
 * shutdown). */
void ol_etcd_set_timeout(struct ol_etcd *e, long ms);

/* The endpoint the last request went to (for messages). */
const char *ol_etcd_endpoint(const struct ol_etcd *e);

/* A lease of ttl_s seconds: its id. */
int ol_etcd_lease_grant(struct ol_etcd *e, int64_t ttl_s, int64_t *id, char *err, size_t errlen);

/* One keep-alive: *ttl_left the seconds the lease now has, 0 when it has
 * expired (or never was: its keys are gone). */
int ol_etcd_lease_keepalive(struct ol_etcd *e, int64_t id, int64_t *ttl_left, char *err,
                            size_t errlen);

/* Revokes a lease: its keys go now. */
int ol_etcd_lease_revoke(struct ol_etcd *e, int64_t id, char *err, size_t errlen);

/* Creates key = val under lease (0: none) only if the key does not exist
 * (one transaction). 0 made (*rev its revision), 1 it exists: its value
 * into have (at most havelen bytes with a NUL; truncated) and *rev the
 * revision read. */
int ol_etcd_create(struct ol_etcd *e, const char *key, const void *val, size_t vlen,
                   int64_t lease, int64_t *rev, char *have, size_t havelen, char *err,
                   size_t errlen);

/* key = val under lease (0: none) only if the key's mod revision is still
 * mod_rev (one transaction): 0 put (*rev its new revision), 1 it was
 * changed or deleted since (nothing put). */
int ol_etcd_put_if(struct ol_etcd *e, const char *key, const void *val, size_t vlen,
                   int64_t lease, int64_t mod_rev, int64_t *rev, char *err, size_t errlen);

/* key = val under lease (0: none), whatever was there. */
int ol_etcd_put(struct ol_etcd *e, const char *key, const void *val, size_t vlen, int64_t lease,
                char *err, size_t errlen);

/* Deletes key. */
int ol_etcd_delete(struct ol_etcd *e, const char *key, char *err, size_t errlen);

/* One key-value pair of a range or an event. */
struct ol_etcd_kv {
    const char *key;
    size_t klen;
    const char *val;        /* NULL for a deletion */
    size_t vlen;
    int64_t mod_revision;
    int64_t lease;
};

/* Every key under prefix, in key order, each to fn (a non-zero return
 * stops, and is returned); *rev the revision the range was read at. */
int ol_etcd_range_prefix(struct ol_etcd *e, const char *prefix,
                         int (*fn)(void *arg, const struct ol_etcd_kv *kv), void *arg,
                         int64_t *rev, char *err, size_t errlen);

/* Watches every key under prefix from revision start_rev: each put or
 * delete to fn (kv->val NULL for a delete), in order, as etcd streams
 * them, until fn returns non-zero (returned), the stop flag of
 * ol_etcd_set_stop becomes true (0 returned; checked when ol_etcd_wake is
 * called, and every second), or the stream breaks (its error; the caller
 * watches again from the revision after the last event it saw). -ERANGE: etcd compacted start_rev away; the caller reads the
 * range again and watches from there. */
int ol_etcd_watch(struct ol_etcd *e, const char *prefix, int64_t start_rev,
                  int (*fn)(void *arg, const struct ol_etcd_kv *kv), void *arg, char *err,
                  size_t errlen);

/* From now on every request ends when *stop is true (-ECANCELED; a watch
 * returns 0). NULL: no longer. */
void ol_etcd_set_stop(struct ol_etcd *e, const atomic_bool *stop);

/* Wakes the request or watch running on e in another thread, so it sees
 * its stop flag now (the one call here that another thread may make). */
void ol_etcd_wake(struct ol_etcd *e);

/* GET /health of each endpoint: how many answered healthy. */
int ol_etcd_health(struct ol_etcd *e, int *healthy, char *err, size_t errlen);

#endif
