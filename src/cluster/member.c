/*
 * member.c - see member.h.
 *
 * Two threads, each with its own etcd handle (curl handles are not shared):
 *
 *   lease   registers the record (grant a lease, create the key if absent,
 *           or replace this node's previous life's), renews the lease every
 *           ttl/3 s, writes the record again when the state changes, and
 *           registers anew when etcd says the lease expired (after an
 *           outage longer than the TTL: etcd deleted the record meanwhile).
 *   watch   reads every key under /openlake/<cluster>/ (the records, and
 *           this node's drain key), then watches from the revision after;
 *           a broken stream is followed by a read again (with a backoff of
 *           0.1 s doubling to 2 s while etcd is away).
 *
 * Both sleep on one condition variable, so stop and a state change wake
 * them at once.
 */
#include "cluster/member.h"

#include "base/log.h"
#include "cluster/etcd.h"

#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct ol_cluster {
    char name[64];
    char root[128];                  /* "/openlake/<cluster>/": what the watch covers */
    char prefix[128];
    char key[160];
    char drain_key[160];             /* this node's drain key (ol_member_drain_key) */
    int64_t ttl;
    struct ol_etcd_opts eo;          /* points into the daemon's config */
    struct ol_etcd *lease_e, *watch_e;
    pthread_t lease_t, watch_t;
    bool lease_started, watch_started;
    atomic_bool stop;
    atomic_bool wstop;               /* watch_e's stop flag: stop, or a refresh asked */

    pthread_mutex_t mu;          /* everything below */
    pthread_cond_t cv;
    struct ol_member self;
    bool state_dirty;
    uint64_t state_gen, state_written;   /* set_state's count; the last one in etcd */
    int64_t lease;               /* 0 = not registered (__atomic: ol_cluster_lease) */
    struct ol_member *members;   /* id order */
    int n;
    bool drain;                  /* this node's drain key exists */
    int64_t revision;            /* the newest revision of a key under the root this view has
                                    seen (an event's, or a read's ...), see watch_main */
    int64_t want;                /* the peer revision ol_cluster_refresh was asked for */
    bool etcd_ok;
    int64_t etcd_since;
    char etcd_error[256];
    uint64_t renewals, failures, restarts, refreshes;
    bool watching;               /* the watch thread is in (or about to enter) its watch */
    bool refresh;                /* ol_cluster_refresh asked it to read the members again */
    time_t last_warn;
    bool live;                   /* the view itself (not a range read into a copy): log changes */
};

/* ---- the record -------------------------------------------------------------- */

void ol_member_prefix(const char *cluster, char *buf, size_t len)
{
    snprintf(buf, len, "/openlake/%s/nodes/", cluster);
}

void ol_member_key(const char *cluster, int64_t id, char *buf, size_t len)
{
    snprintf(buf, len, "/openlake/%s/nodes/%lld", cluster, (long long)id);
}

void ol_member_drain_key(const char *cluster, int64_t id, char *buf, size_t len)
{
    snprintf(buf, len, "/openlake/%s/drain/%lld", cluster, (long long)id);
}

size_t ol_member_encode(const struct ol_member *m, char *buf, size_t len)
{
    json_t *j = json_pack(
        "{s:i, s:I, s:s, s:s, s:s, s:s, s:s, s:I, s:I, s:s, s:b, s:s, s:s, s:I, s:I, s:I}",
        "v", OL_MEMBER_FORMAT, "id", (json_int_t)m->id, "instance", m->instance, "state",
        m->state, "version",
        m->version, "host", m->host, "data_dir", m->data_dir, "pid", (json_int_t)m->pid,
        "started", (json_int_t)m->started, "s3_addr", m->s3_addr, "s3_tls", (int)m->s3_tls,
        "kv_addr", m->kv_addr,
        "rpc_addr", m->rpc_addr, "kv_slab_bytes", (json_int_t)m->kv_slab_bytes,
        "kv_disk_bytes", (json_int_t)m->kv_disk_bytes, "drives", (json_int_t)m->drives);
    if (j && m->kv_replicas > 0)      /* said only by a node with a KV pool */
        json_object_set_new(j, "kv_replicas", json_integer((json_int_t)m->kv_replicas));
    if (j && m->kv_ucx_addr[0])       /* said only by a node with a UCX KV listener */
        json_object_set_new(j, "kv_ucx_addr", json_string(m->kv_ucx_addr));
    /* json_pack fails on a string that is not UTF-8: 0 then */
    size_t n = j ? json_dumpb(j, buf, len ? len - 1 : 0, JSON_COMPACT | JSON_SORT_KEYS) : 0;
    json_decref(j);
    if (n < len)
        buf[n] = 0;
    return n;
}

static int take_str(json_t *j, const char *name, char *out, size_t len)
{
    json_t *v = json_object_get(j, name);
    if (!v) {
        out[0] = 0;
        return 0;
    }
    if (!json_is_string(v) || strlen(json_string_value(v)) >= len)
        return -1;
    snprintf(out, len, "%s", json_string_value(v));
    return 0;
}

static int take_int(json_t *j, const char *name, int64_t *out)
{
    json_t *v = json_object_get(j, name);
    if (!v) {
        *out = 0;
        return 0;
    }
    if (!json_is_integer(v))
        return -1;
    *out = json_integer_value(v);
    return 0;
}

int ol_member_decode(const char *json, size_t len, struct ol_member *m, char *why,
                     size_t whylen)
{
    json_error_t je;
    json_t *j = json_loadb(json, len, 0, &je);
    memset(m, 0, sizeof *m);
    if (!json_is_object(j)) {
        json_decref(j);
        snprintf(why, whylen, "not a JSON object");
        return -1;
    }
    int64_t v = 0, slab = 0, disk = 0;
    const char *bad = NULL;
    if (take_int(j, "v", &v) || v < 1)
        bad = "v";
    else if (v > OL_MEMBER_FORMAT)
        bad = "v (a newer format)";
    else if (take_int(j, "id", &m->id))
        bad = "id";
    else if (take_str(j, "instance", m->instance, sizeof m->instance))
        bad = "instance";
    else if (take_str(j, "state", m->state, sizeof m->state))
        bad = "state";
    else if (take_str(j, "version", m->version, sizeof m->version))
        bad = "version";
    else if (take_str(j, "host", m->host, sizeof m->host))
        bad = "host";
    else if (take_str(j, "data_dir", m->data_dir, sizeof m->data_dir))
        bad = "data_dir";
    else if (take_int(j, "pid", &m->pid) || take_int(j, "started", &m->started))
        bad = "pid or started";
    else if (take_str(j, "s3_addr", m->s3_addr, sizeof m->s3_addr) ||
             take_str(j, "kv_addr", m->kv_addr, sizeof m->kv_addr) ||
             take_str(j, "kv_ucx_addr", m->kv_ucx_addr, sizeof m->kv_ucx_addr) ||
             take_str(j, "rpc_addr", m->rpc_addr, sizeof m->rpc_addr))
        bad = "an address";
    else if (json_object_get(j, "s3_tls") && !json_is_boolean(json_object_get(j, "s3_tls")))
        bad = "s3_tls";
    else if (take_int(j, "kv_slab_bytes", &slab) || take_int(j, "kv_disk_bytes", &disk) ||
             take_int(j, "drives", &m->drives) || slab < 0 || disk < 0)
        bad = "a capacity";
    /* kv_replicas only names a node that disagrees (no placement reads
     * it): one this version cannot take (a type, 0, past 16) is "not
     * said", never a reason to leave the node out of the view. */
    if (!bad && (take_int(j, "kv_replicas", &m->kv_replicas) || m->kv_replicas < 1 ||
                 m->kv_replicas > OL_MEMBER_MAX_REPLICAS))
        m->kv_replicas = 0;
    m->s3_tls = json_is_true(json_object_get(j, "s3_tls"));
    json_decref(j);
    if (bad) {
        snprintf(why, whylen, "field %s", bad);
        return -1;
    }
    m->kv_slab_bytes = (uint64_t)slab;
    m->kv_disk_bytes = (uint64_t)disk;
    return 0;
}

bool ol_member_replicas_differ(const struct ol_member *m, int n, char *buf, size_t len)
{
    int values = 0;
    bool seen[OL_MEMBER_MAX_REPLICAS + 1] = {false};
    for (int i = 0; i < n; i++)
        if (m[i].kv_replicas > 0 && m[i].kv_replicas <= OL_MEMBER_MAX_REPLICAS &&
            !seen[m[i].kv_replicas]) {
            seen[m[i].kv_replicas] = true;
            values++;
        }
    if (len)
        buf[0] = 0;
    if (values < 2)
        return false;
    size_t at = 0;
    for (int r = 1; r <= OL_MEMBER_MAX_REPLICAS && at < len; r++) {
        if (!seen[r])
            continue;
        int cnt = 0;
        for (int i = 0; i < n; i++)
            cnt += m[i].kv_replicas == r;
        int w = snprintf(buf + at, len - at, "%s%d on node%s ", at ? "; " : "", r,
                         cnt == 1 ? "" : "s");
        at += w > 0 ? (size_t)w : 0;
        for (int i = 0, k = 0; i < n && at < len; i++)
            if (m[i].kv_replicas == r) {
                w = snprintf(buf + at, len - at, "%s%lld", k++ ? ", " : "", (long long)m[i].id);
                at += w > 0 ? (size_t)w : 0;
            }
    }
    if (at >= len && len >= 4)
        memcpy(buf + len - 4, "...", 4);
    return true;
}

/* ---- the view ------------------------------------------------------------------ */

static int64_t id_of_key(const struct ol_cluster *cl, const struct ol_etcd_kv *kv, bool *ok)
{
    size_t pl = strlen(cl->prefix);
    char num[32];
    *ok = false;
    if (kv->klen <= pl || kv->klen - pl >= sizeof num || memcmp(kv->key, cl->prefix, pl))
        return 0;
    memcpy(num, kv->key + pl, kv->klen - pl);
    num[kv->klen - pl] = 0;
    char *end;
    long long id = strtoll(num, &end, 10);
    *ok = *end == 0 && id >= 0;
    return id;
}

static bool view_has(const struct ol_cluster *cl, int64_t id)
{
    for (int i = 0; i < cl->n; i++)
        if (cl->members[i].id == id)
            return true;
    return false;
}

/* Insert, replace or (m NULL) remove member id; mu held. -1: the view is
 * full, m left out. */
static int view_set(struct ol_cluster *cl, int64_t id, const struct ol_member *m)
{
    int lo = 0, hi = cl->n;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (cl->members[mid].id < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    bool found = lo < cl->n && cl->members[lo].id == id;
    if (!m) {
        if (found) {
            memmove(&cl->members[lo], &cl->members[lo + 1],
                    (size_t)(cl->n - lo - 1) * sizeof *cl->members);
            cl->n--;
        }
        return 0;
    }
    if (!found) {
        if (cl->n == OL_MEMBER_MAX)
            return -1;
        memmove(&cl->members[lo + 1], &cl->members[lo],
                (size_t)(cl->n - lo) * sizeof *cl->members);
        cl->n++;
    }
    cl->members[lo] = *m;
    return 0;
}

/* This node's drain key put (an operator asked it to drain) or deleted. */
static void on_drain(struct ol_cluster *cl, const struct ol_etcd_kv *kv)
{
    pthread_mutex_lock(&cl->mu);
    bool was = cl->drain;
    cl->drain = kv->val != NULL;
    if (kv->mod_revision > cl->revision)
        cl->revision = kv->mod_revision;
    pthread_mutex_unlock(&cl->mu);
    if (cl->live && was != (kv->val != NULL))
        ol_info("cluster %s: %s", cl->name, kv->val ? "asked to drain" : "drain lifted");
}

static int on_record(void *arg, const struct ol_etcd_kv *kv)
{
    struct ol_cluster *cl = arg;
    /* Every key under the root moves the view's revision, known or not (a
     * peer that saw it and a node that saw it agree, so neither asks the
     * other to read again for it), in the same critical section as the
     * change it brings: a reader never sees the revision before the change. */
    if (kv->klen == strlen(cl->drain_key) && !memcmp(kv->key, cl->drain_key, kv->klen)) {
        on_drain(cl, kv);
        return 0;
    }
    bool ok;
    int64_t id = id_of_key(cl, kv, &ok);
    if (!ok) {                       /* not a node record: another node's drain key, or
                                        someone else's key */
        pthread_mutex_lock(&cl->mu);
        if (kv->mod_revision > cl->revision)
            cl->revision = kv->mod_revision;
        pthread_mutex_unlock(&cl->mu);
        return 0;
    }
    struct ol_member m;
    char why[128];
    bool readable = !kv->val || ol_member_decode(kv->val, kv->vlen, &m, why, sizeof why) == 0;
    /* An unreadable record leaves the view like a deleted one. Logged after
     * the mutex is let go: a data core reading metrics takes it. */
    pthread_mutex_lock(&cl->mu);
    bool had = view_has(cl, id), full = false;
    if (kv->val && readable) {
        m.id = id;                   /* the key's, whatever the record says */
        m.mod_revision = kv->mod_revision;
        full = view_set(cl, id, &m) < 0;
    } else {
        view_set(cl, id, NULL);
    }
    if (kv->mod_revision > cl->revision)
        cl->revision = kv->mod_revision;
    pthread_mutex_unlock(&cl->mu);
    if (!readable)
        ol_warn("cluster %s: the record of node %lld is not one this version reads (%s): "
                "left out of the view", cl->name, (long long)id, why);
    else if (full)
        ol_warn("cluster %s: more than %d members: node %lld left out of the view", cl->name,
                OL_MEMBER_MAX, (long long)id);
    else if (cl->live && kv->val && !had)
        ol_info("cluster %s: member %lld joined (host %s, S3 %s)", cl->name, (long long)id,
                m.host, m.s3_addr);
    else if (cl->live && !kv->val && had)
        ol_info("cluster %s: member %lld gone", cl->name, (long long)id);
    return 0;
}

/* ---- etcd up and down ------------------------------------------------------------ */

static void etcd_result(struct ol_cluster *cl, int rc, const char *what, const char *err)
{
    if (rc == -ECANCELED)            /* stopping: not etcd's doing */
        return;
    int say = 0;                     /* 1 back, 2 away: logged once the mutex is let go */
    pthread_mutex_lock(&cl->mu);
    bool was = cl->etcd_ok;
    time_t now = time(NULL);
    if (rc >= 0) {
        if (!was) {
            cl->etcd_ok = true;
            cl->etcd_since = now;
            say = 1;
        }
    } else {
        cl->failures++;
        snprintf(cl->etcd_error, sizeof cl->etcd_error, "%s: %s", what, err);
        if (was) {
            cl->etcd_ok = false;
            cl->etcd_since = now;
        }
        if (was || now - cl->last_warn >= 30) {   /* one warning per 30 s */
            cl->last_warn = now;
            say = 2;
        }
    }
    if (was != cl->etcd_ok)
        pthread_cond_broadcast(&cl->cv);          /* set_state's wait looks at it */
    pthread_mutex_unlock(&cl->mu);
    if (say == 1)
        ol_info("cluster %s: etcd answers again (%s)", cl->name, what);
    else if (say == 2)
        ol_warn("cluster %s: etcd: %s: %s (serving with the membership last known)", cl->name,
                what, err);
}

/* A deadline ms from now on the monotonic clock (the condition variable's:
 * a wall clock stepped back must not stretch a lease renewal). */
static struct timespec after_ms(long ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_sec += ms / 1000;
    ts.tv_nsec += (ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    return ts;
}

/* Sleeps up to ms, or until stop (or, for the lease thread, a state change). */
static void nap(struct ol_cluster *cl, long ms, bool wake_on_state)
{
    struct timespec ts = after_ms(ms);
    pthread_mutex_lock(&cl->mu);
    while (!atomic_load(&cl->stop) && !(wake_on_state && cl->state_dirty))
        if (pthread_cond_timedwait(&cl->cv, &cl->mu, &ts) == ETIMEDOUT)
            break;
    pthread_mutex_unlock(&cl->mu);
}

/* ---- registration ------------------------------------------------------------------ */

/* Grant a lease and write the record under it: 0, -EEXIST (a live node
 * holds the id; err says which), or an etcd error. */
static int do_register(struct ol_cluster *cl, struct ol_etcd *e, char *err, size_t errlen)
{
    char rec[4096], have[4096];
    pthread_mutex_lock(&cl->mu);
    struct ol_member self = cl->self;
    uint64_t gen = cl->state_gen;
    pthread_mutex_unlock(&cl->mu);
    size_t n = ol_member_encode(&self, rec, sizeof rec);   /* before any lease is taken */
    if (n == 0 || n >= sizeof rec) {
        snprintf(err, errlen, n ? "the node record is over %zu bytes"
                                : "the node record cannot be encoded (a field not UTF-8?)",
                 sizeof rec);
        return -EINVAL;
    }
    int64_t lease, rev;
    int rc = ol_etcd_lease_grant(e, cl->ttl, &lease, err, errlen);
    if (rc < 0)
        return rc;
    rc = ol_etcd_create(e, cl->key, rec, n, lease, &rev, have, sizeof have, err, errlen);
    if (rc == 1) {
        struct ol_member old;
        char why[128];
        bool mine = ol_member_decode(have, strlen(have), &old, why, sizeof why) == 0 &&
                    old.instance[0] && !strcmp(old.instance, self.instance);
        if (!mine) {
            snprintf(err, errlen, "node id %lld is registered by a live openlaked (host %.80s, "
                     "pid %lld, data dir %.160s, S3 %.80s); give this node another self_id",
                     (long long)self.id, old.host[0] ? old.host : "?", (long long)old.pid,
                     old.data_dir[0] ? old.data_dir : "?", old.s3_addr[0] ? old.s3_addr : "?");
            rc = -EEXIST;
        } else {
            /* This node's own instance id (in its data dir, which this
             * process holds locked): its previous run, dead, whose lease
             * has not run out yet. */
            ol_info("cluster %s: replacing the record of this node's previous run (pid %lld)",
                    cl->name, (long long)old.pid);
            rc = ol_etcd_put(e, cl->key, rec, n, lease, err, errlen);
        }
    }
    if (rc < 0) {                    /* no lease left behind */
        char e2[256];
        ol_etcd_lease_revoke(e, lease, e2, sizeof e2);
        return rc;
    }
    pthread_mutex_lock(&cl->mu);
    __atomic_store_n(&cl->lease, lease, __ATOMIC_RELEASE);
    cl->state_written = gen;
    if (cl->state_gen == gen)
        cl->state_dirty = false;
    pthread_cond_broadcast(&cl->cv);
    pthread_mutex_unlock(&cl->mu);
    return 0;
}

static void *lease_main(void *arg)
{
    struct ol_cluster *cl = arg;
    char err[512];
    bool conflict_logged = false;
    unsigned fails = 0;
    while (!atomic_load(&cl->stop)) {
        pthread_mutex_lock(&cl->mu);
        int64_t lease = __atomic_load_n(&cl->lease, __ATOMIC_ACQUIRE);
        bool dirty = cl->state_dirty;
        struct ol_member self = cl->self;
        uint64_t gen = cl->state_gen;
        pthread_mutex_unlock(&cl->mu);
        int rc;
        if (!lease) {
            rc = do_register(cl, cl->lease_e, err, sizeof err);
            if (rc == -EEXIST) {
                if (!conflict_logged)
                    ol_error("cluster %s: %s; staying out of the cluster until it leaves",
                             cl->name, err);
                conflict_logged = true;
                etcd_result(cl, 0, "register", "");
                nap(cl, cl->ttl * 1000, false);
                continue;
            }
            etcd_result(cl, rc, "register", err);
            if (rc == 0) {
                conflict_logged = false;
                ol_info("cluster %s: registered node %lld (lease %lld s)", cl->name,
                        (long long)self.id, (long long)cl->ttl);
            }
        } else if (dirty) {
            char rec[4096];
            size_t n = ol_member_encode(&self, rec, sizeof rec);
            rc = n && n < sizeof rec
                     ? ol_etcd_put(cl->lease_e, cl->key, rec, n, lease, err, sizeof err)
                     : (snprintf(err, sizeof err, "the node record cannot be encoded"), -EINVAL);
            if (rc == -ENOENT) {         /* "requested lease not found": register anew */
                ol_warn("cluster %s: the lease of node %lld is gone (%s): registering again",
                        cl->name, (long long)self.id, err);
                pthread_mutex_lock(&cl->mu);
                __atomic_store_n(&cl->lease, 0, __ATOMIC_RELEASE);
                pthread_mutex_unlock(&cl->mu);
                rc = 0;
                continue;
            }
            etcd_result(cl, rc, "record", err);
            if (rc == 0) {
                pthread_mutex_lock(&cl->mu);
                cl->state_written = gen;
                if (cl->state_gen == gen)
                    cl->state_dirty = false;
                pthread_cond_broadcast(&cl->cv);
                pthread_mutex_unlock(&cl->mu);
            }
        } else {
            int64_t left = 0;
            rc = ol_etcd_lease_keepalive(cl->lease_e, lease, &left, err, sizeof err);
            etcd_result(cl, rc, "lease renewal", err);
            if (rc == 0) {
                pthread_mutex_lock(&cl->mu);
                cl->renewals++;
                if (left <= 0)           /* expired, or revoked: etcd deleted the record */
                    __atomic_store_n(&cl->lease, 0, __ATOMIC_RELEASE);
                pthread_mutex_unlock(&cl->mu);
                if (left <= 0) {
                    ol_warn("cluster %s: the lease of node %lld expired or was revoked (etcd "
                            "away longer than %lld s?): registering again", cl->name,
                            (long long)self.id, (long long)cl->ttl);
                    continue;
                }
            }
        }
        /* Renew at a third of the TTL. A failure is retried after 0.5 s,
         * doubling up to that third (a wrong password is not tried twice a
         * second for ever), and a pending state change does not cut the
         * wait short then: it waits for the retry. */
        fails = rc < 0 ? fails + 1 : 0;
        long third = cl->ttl * 1000 / 3, wait = third;
        if (fails) {
            wait = 500L << (fails < 6 ? fails - 1 : 5);
            if (wait > third)
                wait = third;
        }
        nap(cl, wait, fails == 0);
    }
    return NULL;
}

static void *watch_main(void *arg)
{
    struct ol_cluster *cl = arg;
    char err[512];
    long backoff = 100;
    while (!atomic_load(&cl->stop)) {
        /* read it all, into a fresh view, then watch from there */
        pthread_mutex_lock(&cl->mu);
        int keep = cl->n;
        pthread_mutex_unlock(&cl->mu);
        struct ol_cluster tmp = {0};
        snprintf(tmp.name, sizeof tmp.name, "%s", cl->name);
        snprintf(tmp.prefix, sizeof tmp.prefix, "%s", cl->prefix);
        snprintf(tmp.drain_key, sizeof tmp.drain_key, "%s", cl->drain_key);
        tmp.members = calloc(OL_MEMBER_MAX, sizeof *tmp.members);
        pthread_mutex_init(&tmp.mu, NULL);
        int64_t rev = 0;
        int rc = tmp.members ? ol_etcd_range_prefix(cl->watch_e, cl->root, on_record, &tmp,
                                                     &rev, err, sizeof err)
                             : -ENOMEM;
        etcd_result(cl, rc, "read members", rc == -ENOMEM ? "out of memory" : err);
        if (rc == 0) {
            pthread_mutex_lock(&cl->mu);
            memcpy(cl->members, tmp.members, (size_t)tmp.n * sizeof *tmp.members);
            cl->n = tmp.n;
            /* The view's revision: the newest key it holds (tmp's, from
             * on_record), what it had, and the revision a peer carried when
             * that asked for this read, if the read is at least as new (it
             * then holds every change up to it, deletes included). Never
             * etcd's header revision itself: that counts writes outside the
             * root, which no watch of the root reaches, and a node claiming
             * it would make every peer read again for nothing. */
            int64_t proven = cl->want < rev ? cl->want : rev;
            if (tmp.revision > cl->revision)
                cl->revision = tmp.revision;
            if (proven > cl->revision)
                cl->revision = proven;
            bool was = cl->drain;
            cl->drain = tmp.drain;
            pthread_mutex_unlock(&cl->mu);
            if (was != tmp.drain)
                ol_info("cluster %s: %s", cl->name, tmp.drain ? "asked to drain" : "drain lifted");
            if (keep != tmp.n)
                ol_info("cluster %s: %d member%s at revision %lld", cl->name, tmp.n,
                        tmp.n == 1 ? "" : "s", (long long)rev);
        }
        free(tmp.members);
        pthread_mutex_destroy(&tmp.mu);
        if (rc == 0) {
            backoff = 100;
            pthread_mutex_lock(&cl->mu);
            cl->watching = true;
            pthread_mutex_unlock(&cl->mu);
            rc = ol_etcd_watch(cl->watch_e, cl->root, rev + 1, on_record, cl, err, sizeof err);
            pthread_mutex_lock(&cl->mu);
            cl->watching = false;
            bool refresh = cl->refresh && !atomic_load(&cl->stop);
            cl->refresh = false;
            if (refresh) {
                atomic_store(&cl->wstop, false);
                cl->refreshes++;
            } else {
                cl->restarts++;
            }
            int64_t have = cl->revision;
            pthread_mutex_unlock(&cl->mu);
            if (atomic_load(&cl->stop))
                break;
            if (refresh) {               /* read them all again now, then watch again */
                ol_info("cluster %s: a peer's view is newer than this node's (revision %lld): "
                        "reading the members again", cl->name, (long long)have);
                continue;
            }
            etcd_result(cl, rc, "watch", err);
        }
        nap(cl, backoff, false);
        backoff = backoff * 2 > 2000 ? 2000 : backoff * 2;
    }
    return NULL;
}

/* ---- API ------------------------------------------------------------------------------ */

void ol_cluster_etcd_opts(const struct ol_config *c, struct ol_etcd_opts *o)
{
    memset(o, 0, sizeof *o);
    for (int i = 0; i < c->cluster.n_etcd; i++)
        o->endpoints[o->n_endpoints++] = c->cluster.etcd[i];
    if (c->cluster.etcd_user[0]) {
        o->user = c->cluster.etcd_user;
        o->password = c->cluster.etcd_password;
    }
    o->ca_file = c->cluster.etcd_tls_ca[0] ? c->cluster.etcd_tls_ca : NULL;
    o->cert_file = c->cluster.etcd_tls_cert[0] ? c->cluster.etcd_tls_cert : NULL;
    o->key_file = c->cluster.etcd_tls_key[0] ? c->cluster.etcd_tls_key : NULL;
    o->timeout_ms = c->cluster.etcd_timeout_ms;
}

int ol_cluster_start(const struct ol_config *cfg, const struct ol_member *self,
                     struct ol_cluster **out, char *err, size_t errlen)
{
    struct ol_cluster *cl = calloc(1, sizeof *cl);
    if (!cl || !(cl->members = calloc(OL_MEMBER_MAX, sizeof *cl->members))) {
        free(cl);
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    snprintf(cl->name, sizeof cl->name, "%s", cfg->cluster.name);
    snprintf(cl->root, sizeof cl->root, "/openlake/%s/", cl->name);
    ol_member_prefix(cl->name, cl->prefix, sizeof cl->prefix);
    ol_member_key(cl->name, self->id, cl->key, sizeof cl->key);
    ol_member_drain_key(cl->name, self->id, cl->drain_key, sizeof cl->drain_key);
    cl->ttl = cfg->cluster.lease_ttl_secs;
    cl->self = *self;
    cl->live = true;
    cl->etcd_ok = true;
    cl->etcd_since = time(NULL);
    pthread_mutex_init(&cl->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&cl->cv, &ca);
    pthread_condattr_destroy(&ca);
    ol_cluster_etcd_opts(cfg, &cl->eo);
    /* each node starts on its own endpoint (by id): a cluster's lease
     * renewals and watches spread over etcd's members instead of all
     * landing on the first of the list */
    cl->eo.first = (int)(self->id % (cl->eo.n_endpoints ? cl->eo.n_endpoints : 1));
    int rc = ol_etcd_open(&cl->eo, &cl->lease_e, err, errlen);
    if (rc == 0)
        rc = ol_etcd_open(&cl->eo, &cl->watch_e, err, errlen);
    if (rc == 0) {
        /* whether it was asked to drain, before it says it is active: a
         * drained node that restarts stays out of the placement (read
         * again by the watch; etcd away: the watch finds out later) */
        char e1[512];
        int64_t rev;
        ol_etcd_range_prefix(cl->lease_e, cl->drain_key, on_record, cl, &rev, e1, sizeof e1);
        rc = do_register(cl, cl->lease_e, e1, sizeof e1);
        if (rc == -EEXIST || rc == -EACCES) {
            snprintf(err, errlen, "cluster %s: %s", cl->name, e1);
        } else if (rc < 0) {
            etcd_result(cl, rc, "register", e1);
            rc = 0;                  /* etcd away: serve, and keep trying */
        } else {
            etcd_result(cl, 0, "register", "");
            ol_info("cluster %s: registered node %lld with etcd %s (lease %lld s)", cl->name,
                    (long long)self->id, ol_etcd_endpoint(cl->lease_e), (long long)cl->ttl);
        }
    }
    if (rc == 0) {                   /* ol_cluster_stop ends their calls at once */
        ol_etcd_set_stop(cl->lease_e, &cl->stop);
        ol_etcd_set_stop(cl->watch_e, &cl->wstop);
    }
    if (rc == 0 && pthread_create(&cl->lease_t, NULL, lease_main, cl) == 0)
        cl->lease_started = true;
    if (rc == 0 && pthread_create(&cl->watch_t, NULL, watch_main, cl) == 0)
        cl->watch_started = true;
    if (rc == 0 && (!cl->lease_started || !cl->watch_started)) {
        snprintf(err, errlen, "cannot start the cluster threads");
        rc = -EAGAIN;
    }
    if (rc < 0) {
        ol_cluster_stop(cl);
        return rc;
    }
    *out = cl;
    return 0;
}

void ol_cluster_set_state(struct ol_cluster *cl, const char *state)
{
    if (!cl)
        return;
    pthread_mutex_lock(&cl->mu);
    snprintf(cl->self.state, sizeof cl->self.state, "%s", state);
    cl->state_dirty = true;
    uint64_t gen = ++cl->state_gen;
    pthread_cond_broadcast(&cl->cv);
    /* Wait (bounded) until it is in etcd: "active" is then true for anyone
     * who sees the node ready, "leaving" before its listeners close. While
     * not registered, or with etcd known to be away, there is nothing to
     * wait for (the thread writes it when etcd answers). */
    struct timespec ts = after_ms(cl->eo.timeout_ms + 1000);
    while (cl->lease && cl->etcd_ok && cl->state_written < gen && !atomic_load(&cl->stop))
        if (pthread_cond_timedwait(&cl->cv, &cl->mu, &ts) == ETIMEDOUT)
            break;
    pthread_mutex_unlock(&cl->mu);
}

bool ol_cluster_state_written(struct ol_cluster *cl)
{
    pthread_mutex_lock(&cl->mu);
    bool w = cl->state_written >= cl->state_gen;
    pthread_mutex_unlock(&cl->mu);
    return w;
}

void ol_cluster_view(struct ol_cluster *cl, struct ol_cluster_view *v, struct ol_member *buf,
                     int cap)
{
    pthread_mutex_lock(&cl->mu);
    v->revision = cl->revision;
    v->etcd_ok = cl->etcd_ok;
    v->etcd_since = cl->etcd_since;
    v->registered = cl->lease != 0;
    snprintf(v->etcd_error, sizeof v->etcd_error, "%s", cl->etcd_ok ? "" : cl->etcd_error);
    v->lease_renewals = cl->renewals;
    v->etcd_failures = cl->failures;
    v->watch_restarts = cl->restarts;
    v->n = cl->n;
    v->members = buf;
    memcpy(buf, cl->members, (size_t)(cl->n < cap ? cl->n : cap) * sizeof *buf);
    pthread_mutex_unlock(&cl->mu);
}

bool ol_cluster_refresh(struct ol_cluster *cl, int64_t revision)
{
    bool wake = false;
    pthread_mutex_lock(&cl->mu);
    if (revision > cl->revision && cl->watching && !cl->refresh) {
        cl->refresh = true;
        if (revision > cl->want)
            cl->want = revision;
        atomic_store(&cl->wstop, true);
        wake = true;
    }
    pthread_mutex_unlock(&cl->mu);
    if (wake)
        ol_etcd_wake(cl->watch_e);
    return wake;
}

bool ol_cluster_drain_asked(struct ol_cluster *cl)
{
    pthread_mutex_lock(&cl->mu);
    bool d = cl->drain;
    pthread_mutex_unlock(&cl->mu);
    return d;
}

int64_t ol_cluster_revision(struct ol_cluster *cl)
{
    pthread_mutex_lock(&cl->mu);
    int64_t rev = cl->revision;
    pthread_mutex_unlock(&cl->mu);
    return rev;
}

size_t ol_cluster_metrics(struct ol_cluster *cl, char *buf, size_t cap)
{
    pthread_mutex_lock(&cl->mu);
    int n = cl->n;
    bool up = cl->etcd_ok, reg = cl->lease != 0;
    int64_t rev = cl->revision;
    uint64_t ren = cl->renewals, fail = cl->failures, rst = cl->restarts, rfr = cl->refreshes;
    pthread_mutex_unlock(&cl->mu);
    int len = snprintf(
        buf, cap,
        "# HELP openlake_cluster_members Members in this node's view of the cluster.\n"
        "# TYPE openlake_cluster_members gauge\n"
        "openlake_cluster_members{cluster=\"%s\"} %d\n"
        "# HELP openlake_cluster_etcd_up 1 while etcd answers this node, else 0.\n"
        "# TYPE openlake_cluster_etcd_up gauge\n"
        "openlake_cluster_etcd_up{cluster=\"%s\"} %d\n"
        "# HELP openlake_cluster_registered 1 while this node's record is in etcd under its lease.\n"
        "# TYPE openlake_cluster_registered gauge\n"
        "openlake_cluster_registered{cluster=\"%s\"} %d\n"
        "# HELP openlake_cluster_revision etcd revision of this node's view.\n"
        "# TYPE openlake_cluster_revision gauge\n"
        "openlake_cluster_revision{cluster=\"%s\"} %lld\n"
        "# HELP openlake_cluster_lease_renewals_total Lease renewals etcd answered.\n"
        "# TYPE openlake_cluster_lease_renewals_total counter\n"
        "openlake_cluster_lease_renewals_total{cluster=\"%s\"} %llu\n"
        "# HELP openlake_cluster_etcd_failures_total etcd calls that failed (any thread).\n"
        "# TYPE openlake_cluster_etcd_failures_total counter\n"
        "openlake_cluster_etcd_failures_total{cluster=\"%s\"} %llu\n"
        "# HELP openlake_cluster_watch_restarts_total Watches of the members that broke and were started again.\n"
        "# TYPE openlake_cluster_watch_restarts_total counter\n"
        "openlake_cluster_watch_restarts_total{cluster=\"%s\"} %llu\n"
        "# HELP openlake_cluster_refreshes_total Members read again because a peer's frames carried a newer revision.\n"
        "# TYPE openlake_cluster_refreshes_total counter\n"
        "openlake_cluster_refreshes_total{cluster=\"%s\"} %llu\n",
        cl->name, n, cl->name, up, cl->name, reg, cl->name, (long long)rev, cl->name,
        (unsigned long long)ren, cl->name, (unsigned long long)fail, cl->name,
        (unsigned long long)rst, cl->name, (unsigned long long)rfr);
    return len < 0 ? cap : (size_t)len;
}

int64_t ol_cluster_lease(struct ol_cluster *cl)
{
    return cl ? __atomic_load_n(&cl->lease, __ATOMIC_ACQUIRE) : 0;
}

void ol_cluster_stop(struct ol_cluster *cl)
{
    if (!cl)
        return;
    pthread_mutex_lock(&cl->mu);
    atomic_store(&cl->stop, true);
    atomic_store(&cl->wstop, true);
    pthread_cond_broadcast(&cl->cv);
    pthread_mutex_unlock(&cl->mu);
    if (cl->watch_e)
        ol_etcd_wake(cl->watch_e);
    if (cl->lease_e)
        ol_etcd_wake(cl->lease_e);
    if (cl->lease_started)
        pthread_join(cl->lease_t, NULL);
    if (cl->watch_started)
        pthread_join(cl->watch_t, NULL);
    if (cl->lease && cl->lease_e) {  /* leave now, not a TTL from now */
        char err[512];
        ol_etcd_set_stop(cl->lease_e, NULL);     /* this last call must run */
        ol_etcd_set_timeout(cl->lease_e, cl->eo.timeout_ms < 1000 ? cl->eo.timeout_ms : 1000);
        if (ol_etcd_lease_revoke(cl->lease_e, cl->lease, err, sizeof err) < 0)
            ol_warn("cluster %s: cannot revoke the lease (%s): the node leaves when it "
                    "expires, in %lld s", cl->name, err, (long long)cl->ttl);
        else
            ol_info("cluster %s: node %lld left", cl->name, (long long)cl->self.id);
    }
    ol_etcd_close(cl->lease_e);
    ol_etcd_close(cl->watch_e);
    pthread_cond_destroy(&cl->cv);
    pthread_mutex_destroy(&cl->mu);
    free(cl->members);
    free(cl);
}
