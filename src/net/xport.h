/*
 * xport.h - the byte transports under the node RPC: a listener and
 * connections that each carry one ordered stream of bytes both ways.
 *
 * Owns: the interface rpc.c drives (struct ol_xport_ops); its
 * implementations are the TCP transport (xport_tcp.c: the loop's accept,
 * connect, multishot receive and sendmsg, and the sockets' keepalive
 * options), the TLS one (xport_tls.c: mutual TLS 1.3 over the TCP one)
 * and the UCX one (xport_ucx.c: UCP stream endpoints). A transport knows
 * nothing of frames, the handshake or credits: rpc.c keeps the one codec
 * and the one state machine over whichever transport moves the bytes.
 *
 * RMA (optional: NULL ops on TCP; UCX has them): a transport may map one
 * memory region of this process for its peers' one-sided reads, handing
 * out its packed remote key, which rpc.c carries in the handshake; the
 * other end unpacks it on its connection and reads [addr, addr + len) of
 * the region with `get`, no code of the owner's running for it (on RDMA
 * hardware; UCX emulates it over its active messages where the wire has
 * no RMA, e.g. UCX_TLS=tcp, answered by the owner's worker progress).
 *
 * Events: each runs on the loop's thread from a completion, never inside
 * a call of ops below (so rpc.c may close or free from any event). Every
 * operation started (dial, recv, send) ends with exactly one event, or
 * one event with more = false for a receive; after shutdown they end with
 * -ECANCELED or their real result.
 *
 * Must not: block, or be called from another thread than its loop's.
 */
#ifndef OL_NET_XPORT_H
#define OL_NET_XPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "rt/loop.h"

struct ol_xport;

/* A connection: each transport's own begins with this. */
struct ol_xconn {
    struct ol_xport *t;
    void *user;                   /* rpc.c's connection */
};

struct ol_xport_events {
    /* A connection came in on the listener; its user is NULL until set.
     * The user sets x->user, or frees x (ops->free) to refuse it. */
    void (*accepted)(void *arg, struct ol_xconn *x);
    /* A dial ended: 0 (connected) or -errno. */
    void (*connected)(struct ol_xconn *x, int res);
    /* res > 0: b[0, res) arrived (valid during the event only); 0: the
     * peer closed; -ENOBUFS: no buffer now (arm again later); other < 0:
     * -errno. more: the receive stays armed. */
    void (*received)(struct ol_xconn *x, int res, const uint8_t *b, bool more);
    /* A send ended: bytes sent from the front of its iov (> 0), or -errno. */
    void (*sent)(struct ol_xconn *x, int res);
};

struct ol_xport_ops {
    const char *name;
    /* Listens at addr ("host:port", numeric); *port gets the bound port.
     * 0, or -errno with a message in err. */
    int (*listen)(struct ol_xport *t, const char *addr, int *port, char *err, size_t errlen);
    /* Stops listening (the endpoint closes); the transport's own
     * operations on the loop end later. */
    void (*unlisten)(struct ol_xport *t);
    /* True while the transport has an operation of its own outstanding on
     * the loop (the listener's accept, the wakeup poll). */
    bool (*busy)(const struct ol_xport *t);
    /* Starts a connection to sa (connected follows), or NULL (-errno in *rc). */
    struct ol_xconn *(*dial)(struct ol_xport *t, const struct sockaddr *sa, socklen_t salen,
                             void *user, int *rc);
    /* Arms the receive (received follows, until more = false). 0 or -errno. */
    int (*recv)(struct ol_xconn *x);
    /* Sends iov[0, n) (it stays valid until sent follows). 0 or -errno. */
    int (*send)(struct ol_xconn *x, const struct iovec *iov, int n);
    /* Ends the stream both ways: the operations outstanding end soon. */
    void (*shutdown)(struct ol_xconn *x);
    /* Frees x: nothing outstanding, or the loop no longer runs. */
    void (*free)(struct ol_xconn *x);
    /* Frees the transport: its connections are freed, its loop stopped
     * or idle; a get still outstanding ends here with -ECANCELED. */
    void (*destroy)(struct ol_xport *t);

    /* ---- RMA: all NULL on a transport without it ---- */
    /* Maps base[0, len) for peers' reads (one region per transport; a
     * second call fails with -EEXIST). *rkey and *rkey_len: the packed
     * remote key, owned by the transport until destroy. 0 or -errno. */
    int (*mem_map)(struct ol_xport *t, void *base, size_t len, const void **rkey,
                   size_t *rkey_len);
    /* Unpacks a peer's packed key for x's gets (replacing x's previous
     * one). 0 or -errno (-EINVAL: not a key this transport can use). */
    int (*rkey_unpack)(struct ol_xconn *x, const void *rkey, size_t len);
    /* Reads len bytes at the peer's address raddr (in the region whose
     * key x unpacked) into buf, which stays valid until done(arg, res):
     * exactly once, from the loop (never inside this call), res 0 or
     * -errno (-ECANCELED: x shut down or freed meanwhile; the transport
     * keeps what it needs until then, so x may be freed with gets
     * outstanding). 0, or -errno and done never runs (-ENOKEY: no key). */
    int (*get)(struct ol_xconn *x, void *buf, size_t len, uint64_t raddr,
               void (*done)(void *arg, int res), void *arg);
};

struct ol_xport {
    const struct ol_xport_ops *ops;
    ol_loop *loop;
    const struct ol_xport_events *ev;
    void *arg;                    /* the accepted event's */
};

/* The TCP transport on loop. 0 and *out, or -errno. */
int ol_xport_tcp_create(ol_loop *loop, const struct ol_xport_events *ev, void *arg,
                        struct ol_xport **out);
/* The files of the TLS transport (rpc_tls_*): each PEM. */
struct ol_xport_tls_opts {
    const char *cert;             /* this node's certificate chain */
    const char *key;              /* its private key */
    const char *ca;               /* the CA bundle every node's certificate chains to */
};
/* The TLS transport on loop (xport_tls.c): TCP under mutual TLS 1.3; each
 * end presents o->cert and verifies the other's against o->ca. 0 and
 * *out, or -errno with a message naming the file in err. */
int ol_xport_tls_create(ol_loop *loop, const struct ol_xport_events *ev, void *arg,
                        const struct ol_xport_tls_opts *o, struct ol_xport **out, char *err,
                        size_t errlen);
/* Handshakes that failed on t since it was made (any thread); 0 on a
 * transport other than TLS. */
uint64_t ol_xport_tls_failures(const struct ol_xport *t);
/* Settings of the UCX context ([rdma]); the environment's UCX_* win. */
struct ol_xport_ucx_opts {
    const char *net_devices;      /* UCX_NET_DEVICES ("mlx5_0:1,..."); NULL or "": UCX's */
    const char *gid_index;        /* UCX_IB_GID_INDEX ("3"); NULL or "": UCX's */
    /* UCP_FEATURE_RMA (mem_map, rkey_unpack, get): off by default, since
     * it lets ANY process that opens a UCX connection to the listener,
     * before any handshake, read and write this process's memory: UCX's
     * software RMA (its emulation over active messages, registered on
     * every transport) checks no key and no rights. Only on a network
     * that nothing but the nodes reaches. */
    bool rma;
};
/* The UCX transport on loop (xport_ucx.c; UCX's own settings from its
 * UCX_* environment, UCX_TLS among them, then o, which may be NULL). 0
 * and *out, or -errno with a message in err (-ENOTSUP: built without
 * UCX). */
int ol_xport_ucx_create(ol_loop *loop, const struct ol_xport_events *ev, void *arg,
                        const struct ol_xport_ucx_opts *o, struct ol_xport **out, char *err,
                        size_t errlen);

#endif
