/*
 * tls.h - TLS (OpenSSL) over memory BIOs, for the HTTP server and the
 * node RPC's TLS transport (net/xport_tls.c).
 *
 * Owns: TLS contexts (certificate chain and key, loaded once at start and
 * shared by every core: SSL_CTX is safe to share), and one TLS session per
 * connection. A session never touches the socket: the
 * server's io_uring receives ciphertext and hands it in (ol_tls_feed),
 * takes plaintext out (ol_tls_read), hands plaintext in (ol_tls_write)
 * and takes the ciphertext to send out (ol_tls_out). So the event loop,
 * its provided buffers and its backpressure stay as they are.
 *
 * The HTTP server's (ol_tls_ctx_new): TLS 1.2 and 1.3 only; OpenSSL's
 * default cipher lists (which follow the system's security level). No
 * client certificates, no session tickets across restarts. The node
 * RPC's (ol_tls_ctx_new_mutual): TLS 1.3 only; both ends present a
 * certificate and verify the other's against one CA bundle; no tickets,
 * no resumption. Neither renegotiates.
 *
 * Must not: block, or know HTTP.
 */
#ifndef OL_HTTP_TLS_H
#define OL_HTTP_TLS_H

#include <stddef.h>

typedef struct ol_tls_ctx ol_tls_ctx;
typedef struct ol_tls_conn ol_tls_conn;

/*
 * Loads the PEM certificate chain and private key and checks that they
 * match. Returns 0, or -1 with a message naming the file and OpenSSL's
 * reason in err.
 */
int ol_tls_ctx_new(const char *cert_path, const char *key_path, ol_tls_ctx **out, char *err,
                   size_t errlen);
/*
 * A context for mutual TLS 1.3: each end presents cert_path's chain and
 * key_path's key, and requires the peer's certificate, which must chain to
 * ca_path's CA bundle (SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT;
 * no host name is checked). One context serves both roles. what names the
 * keys in errors ("rpc_tls": rpc_tls_cert, rpc_tls_key, rpc_tls_ca).
 * Returns 0, or -1 with a message in err.
 */
int ol_tls_ctx_new_mutual(const char *what, const char *cert_path, const char *key_path,
                          const char *ca_path, ol_tls_ctx **out, char *err, size_t errlen);
void ol_tls_ctx_free(ol_tls_ctx *ctx);

/* A server-side session; NULL when out of memory. */
ol_tls_conn *ol_tls_conn_new(ol_tls_ctx *ctx);
/* A client-side session (its first ol_tls_read makes the ClientHello);
 * NULL when out of memory. */
ol_tls_conn *ol_tls_conn_new_client(ol_tls_ctx *ctx);
void ol_tls_conn_free(ol_tls_conn *t);

/* Ciphertext received from the peer. 0, or -1 (out of memory). */
int ol_tls_feed(ol_tls_conn *t, const void *data, size_t n);
/* Received bytes not yet read out as plaintext (ciphertext, and plaintext
 * the session holds), in bytes. */
size_t ol_tls_in_pending(const ol_tls_conn *t);

/*
 * Runs the handshake, then decrypts into buf[0..cap). Returns the bytes of
 * plaintext (> 0), 0 when more ciphertext is needed (the handshake may
 * have produced output: see ol_tls_out_pending), OL_TLS_CLOSED when the
 * peer sent close_notify, or OL_TLS_ERROR (a failed handshake, a bad
 * record: the connection must be closed).
 */
#define OL_TLS_CLOSED (-1)
#define OL_TLS_ERROR  (-2)
long ol_tls_read(ol_tls_conn *t, void *buf, size_t cap);

/* Why the session failed (after OL_TLS_ERROR, or OL_TLS_CLOSED): the
 * certificate check's reason, or OpenSSL's. Returns buf. */
const char *ol_tls_why(const ol_tls_conn *t, char *buf, size_t len);

/* Whether the handshake is done (plaintext may be written). */
int ol_tls_ready(const ol_tls_conn *t);

/* Encrypts plaintext (only once ready). 0, or OL_TLS_ERROR. */
int ol_tls_write(ol_tls_conn *t, const void *data, size_t n);

/* Ciphertext waiting to be sent, in bytes; ol_tls_out moves up to cap of
 * it into buf and returns how many. */
size_t ol_tls_out_pending(const ol_tls_conn *t);
size_t ol_tls_out(ol_tls_conn *t, void *buf, size_t cap);

#endif
