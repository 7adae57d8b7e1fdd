/*
 * ucx_link.h - one blocking UCX stream connection, for the KV client's
 * ucx://host:port addresses (client.c).
 *
 * Owns: a UCP endpoint in client-server mode (a sockaddr, to a UCP listener
 * that speaks the KV byte stream, as the TCP port does) on a UCP worker of
 * its own, and the process-wide UCP context they come from. libucp is
 * loaded at run time (dlopen "libucp.so.0"), never linked: the Python
 * extension ships in a manylinux wheel, and a host's own UCX (with its
 * transport plugins) must be the one used. UCX's own settings come from
 * its UCX_* environment (UCX_TLS among them).
 *
 * Calls block the calling thread, each for at most the timeout given to
 * ol_cux_open, progressing the link's own worker and sleeping in poll(2)
 * on the worker's event fd. A link is used by one thread at a time (the
 * caller's lock), by any thread over time. Must not: keep a UCX request
 * that refers to the caller's memory once a call has returned (a send that
 * times out closes the endpoint; receives hand out UCX's buffers, never
 * post one of the caller's).
 *
 * Errors are returned as -errno.
 */
#ifndef OL_CLIENT_UCX_LINK_H
#define OL_CLIENT_UCX_LINK_H

#include <stddef.h>
#include <sys/uio.h>

struct ol_cux;

/*
 * Connects to the UCP listener at host:port (host numeric, IPv4 or IPv6, or
 * a name) and waits until the endpoint is usable, at most timeout_ms (> 0),
 * which every later call of the link waits at most too.
 * Returns 0 with *out (OUT; the caller closes it with ol_cux_close), or
 * -EOPNOTSUPP (no UCX: built without it, libucp.so.0 not found, or its
 * context could not be made, which ol_cux_unavailable then says; or UCX
 * could not make a worker), -EHOSTUNREACH
 * (no such host, no route, or no transport reaches it), -ECONNREFUSED
 * (nothing listens there, or the listener refused), -ETIMEDOUT, -ECONNRESET,
 * -ENOMEM.
 */
int ol_cux_open(const char *host, const char *port, int timeout_ms, struct ol_cux **out);

/* Why ol_cux_open returns -EOPNOTSUPP in this process (a sentence naming
 * what to install), or NULL when UCX is usable. Loads UCX if not yet. */
const char *ol_cux_unavailable(void);

/*
 * The worker's event fd: >= 0, owned by the link (never close it), valid
 * until ol_cux_close. client.c keeps it as the connection's fd ("open").
 */
int ol_cux_fd(const struct ol_cux *u);

/*
 * Sends the n pieces of iov, all of them, in order. Returns 0 once UCX is
 * done with their memory, or -ETIMEDOUT (the link is closed then: a send
 * cannot be taken back), or -ECONNRESET (the link is broken), -ENOMEM.
 */
int ol_cux_sendv(struct ol_cux *u, const struct iovec *iov, int n);

/*
 * Receives what has arrived, at most cap bytes into buf, waiting for the
 * first byte. Returns the count (> 0), 0 when the peer closed or the link
 * broke (as recv(2) at the end of a stream), or -ETIMEDOUT (the link stays
 * usable).
 */
long ol_cux_recv(struct ol_cux *u, void *buf, size_t cap);

/* Closes the endpoint (forcibly: the peer sees it end), waits for UCX to
 * finish it for at most a second, and frees the link. NULL is ignored. */
void ol_cux_close(struct ol_cux *u);

#endif
