/*
 * tls.c - TLS sessions over memory BIOs (see tls.h): the HTTP server's
 * contexts and sessions, and the node RPC's mutual ones (xport_tls.c).
 */
#include "http/tls.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <stdio.h>
#include <stdlib.h>

struct ol_tls_ctx {
    SSL_CTX *ctx;
};

struct ol_tls_conn {
    SSL *ssl;
    BIO *rbio;   /* ciphertext in: owned by ssl */
    BIO *wbio;   /* ciphertext out: owned by ssl */
    unsigned long err;   /* OpenSSL's reason for the last OL_TLS_ERROR */
};

/* OpenSSL's newest queued reason, as text, after prefix. */
static int tls_fail(char *err, size_t errlen, const char *what, const char *path)
{
    char reason[256] = "unknown error";
    unsigned long e = ERR_peek_last_error();
    if (e)
        ERR_error_string_n(e, reason, sizeof reason);
    ERR_clear_error();
    snprintf(err, errlen, "%s %s: %s", what, path, reason);
    return -1;
}

/* No passphrase: an encrypted key fails to load (OpenSSL's default would
 * prompt on the terminal and block the daemon's start). */
static int no_passphrase(char *buf, int size, int rwflag, void *u)
{
    (void)buf, (void)size, (void)rwflag, (void)u;
    return 0;
}

/* Loads the chain and key of a context made by the caller; what names
 * the keys in errors ("s3_tls": s3_tls_cert, s3_tls_key). 0 or -1. */
static int ctx_load(SSL_CTX *c, const char *what, const char *cert_path, const char *key_path,
                    char *err, size_t errlen)
{
    char m[96];
    SSL_CTX_set_default_passwd_cb(c, no_passphrase);
    if (SSL_CTX_use_certificate_chain_file(c, cert_path) != 1) {
        snprintf(m, sizeof m, "%s_cert: cannot use certificate chain", what);
        return tls_fail(err, errlen, m, cert_path);
    }
    if (SSL_CTX_use_PrivateKey_file(c, key_path, SSL_FILETYPE_PEM) != 1) {
        snprintf(m, sizeof m, "%s_key: cannot use private key (PEM, not encrypted)", what);
        return tls_fail(err, errlen, m, key_path);
    }
    if (SSL_CTX_check_private_key(c) != 1) {
        snprintf(m, sizeof m, "%s_key: does not match the certificate in", what);
        return tls_fail(err, errlen, m, cert_path);
    }
    return 0;
}

/* A new context on method, without resumption or renegotiation. */
static ol_tls_ctx *ctx_alloc(const SSL_METHOD *method, char *err, size_t errlen)
{
    ol_tls_ctx *t = calloc(1, sizeof *t);
    if (!t || !(t->ctx = SSL_CTX_new(method))) {
        free(t);
        ERR_clear_error();
        snprintf(err, errlen, "TLS: out of memory");
        return NULL;
    }
    SSL_CTX_set_options(t->ctx, SSL_OP_NO_RENEGOTIATION);
    SSL_CTX_set_num_tickets(t->ctx, 0);    /* no resumption state to keep or leak */
    SSL_CTX_set_session_cache_mode(t->ctx, SSL_SESS_CACHE_OFF);
    return t;
}

int ol_tls_ctx_new(const char *cert_path, const char *key_path, ol_tls_ctx **out, char *err,
                   size_t errlen)
{
    *out = NULL;
    ol_tls_ctx *t = ctx_alloc(TLS_server_method(), err, errlen);
    if (!t)
        return -1;
    SSL_CTX_set_min_proto_version(t->ctx, TLS1_2_VERSION);
    SSL_CTX_set_options(t->ctx, SSL_OP_CIPHER_SERVER_PREFERENCE);
    if (ctx_load(t->ctx, "s3_tls", cert_path, key_path, err, errlen) < 0) {
        ol_tls_ctx_free(t);
        return -1;
    }
    *out = t;
    return 0;
}

int ol_tls_ctx_new_mutual(const char *what, const char *cert_path, const char *key_path,
                          const char *ca_path, ol_tls_ctx **out, char *err, size_t errlen)
{
    *out = NULL;
    ol_tls_ctx *t = ctx_alloc(TLS_method(), err, errlen);
    if (!t)
        return -1;
    SSL_CTX *c = t->ctx;
    SSL_CTX_set_min_proto_version(c, TLS1_3_VERSION);
    SSL_CTX_set_max_proto_version(c, TLS1_3_VERSION);
    SSL_CTX_set_options(c, SSL_OP_NO_TICKET);
    SSL_CTX_set_verify(c, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, NULL);
    int rc = ctx_load(c, what, cert_path, key_path, err, errlen);
    if (rc == 0 && SSL_CTX_load_verify_locations(c, ca_path, NULL) != 1) {
        char m[96];
        snprintf(m, sizeof m, "%s_ca: cannot use CA bundle", what);
        rc = tls_fail(err, errlen, m, ca_path);
    }
    if (rc < 0) {
        ol_tls_ctx_free(t);
        return -1;
    }
    *out = t;
    return 0;
}

void ol_tls_ctx_free(ol_tls_ctx *t)
{
    if (!t)
        return;
    SSL_CTX_free(t->ctx);
    free(t);
}

/* A session of role client or server. */
static ol_tls_conn *conn_new(ol_tls_ctx *ctx, int client)
{
    ol_tls_conn *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    t->ssl = SSL_new(ctx->ctx);
    t->rbio = BIO_new(BIO_s_mem());
    t->wbio = BIO_new(BIO_s_mem());
    if (!t->ssl || !t->rbio || !t->wbio) {
        SSL_free(t->ssl);
        BIO_free(t->rbio);
        BIO_free(t->wbio);
        free(t);
        ERR_clear_error();
        return NULL;
    }
    /* An empty input BIO means "wait for more", never end of file. */
    BIO_set_mem_eof_return(t->rbio, -1);
    BIO_set_mem_eof_return(t->wbio, -1);
    SSL_set_bio(t->ssl, t->rbio, t->wbio);
    if (client)
        SSL_set_connect_state(t->ssl);
    else
        SSL_set_accept_state(t->ssl);
    return t;
}

ol_tls_conn *ol_tls_conn_new(ol_tls_ctx *ctx) { return conn_new(ctx, 0); }

ol_tls_conn *ol_tls_conn_new_client(ol_tls_ctx *ctx) { return conn_new(ctx, 1); }

void ol_tls_conn_free(ol_tls_conn *t)
{
    if (!t)
        return;
    SSL_free(t->ssl);   /* frees both BIOs */
    free(t);
}

int ol_tls_feed(ol_tls_conn *t, const void *data, size_t n)
{
    while (n) {
        int chunk = n > (1u << 30) ? 1 << 30 : (int)n;
        int w = BIO_write(t->rbio, data, chunk);
        if (w <= 0) {
            ERR_clear_error();
            return -1;
        }
        data = (const char *)data + w;
        n -= (size_t)w;
    }
    return 0;
}

size_t ol_tls_in_pending(const ol_tls_conn *t)
{
    int held = SSL_pending(t->ssl);   /* decrypted, not yet read */
    return BIO_ctrl_pending(t->rbio) + (held > 0 ? (size_t)held : 0);
}

int ol_tls_ready(const ol_tls_conn *t) { return SSL_is_init_finished(t->ssl); }

long ol_tls_read(ol_tls_conn *t, void *buf, size_t cap)
{
    int rc;
    if (!SSL_is_init_finished(t->ssl)) {
        rc = SSL_do_handshake(t->ssl);
        if (rc != 1)
            goto fail;
    }
    rc = SSL_read(t->ssl, buf, cap > (1u << 30) ? 1 << 30 : (int)cap);
    if (rc > 0)
        return rc;
fail:;
    int e = SSL_get_error(t->ssl, rc);
    if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE)
        return 0;
    t->err = ERR_peek_last_error();
    ERR_clear_error();
    return e == SSL_ERROR_ZERO_RETURN ? OL_TLS_CLOSED : OL_TLS_ERROR;
}

int ol_tls_write(ol_tls_conn *t, const void *data, size_t n)
{
    while (n) {
        int chunk = n > (1u << 30) ? 1 << 30 : (int)n;
        int w = SSL_write(t->ssl, data, chunk);
        if (w <= 0) {
            ERR_clear_error();
            return OL_TLS_ERROR;   /* a memory BIO never asks to retry a write */
        }
        data = (const char *)data + w;
        n -= (size_t)w;
    }
    return 0;
}

size_t ol_tls_out_pending(const ol_tls_conn *t) { return BIO_ctrl_pending(t->wbio); }

size_t ol_tls_out(ol_tls_conn *t, void *buf, size_t cap)
{
    if (!cap)
        return 0;
    int r = BIO_read(t->wbio, buf, cap > (1u << 30) ? 1 << 30 : (int)cap);
    return r > 0 ? (size_t)r : 0;
}

const char *ol_tls_why(const ol_tls_conn *t, char *buf, size_t len)
{
    long v = SSL_get_verify_result(t->ssl);
    if (v != X509_V_OK)
        snprintf(buf, len, "certificate verify failed: %s", X509_verify_cert_error_string(v));
    else if (t->err)
        ERR_error_string_n(t->err, buf, len);
    else
        snprintf(buf, len, "the peer ended the session");
    return buf;
}
