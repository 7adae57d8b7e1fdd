/*
 * net.h - listening sockets for the per-core servers.
 *
 * Owns: address parsing ("host:port", "[v6]:port"), socket options of
 * listeners and of accepted sockets from this host (the loopback send
 * buffer), the single-owner probe, and Unix socket paths (stale sockets
 * replaced, live ones refused, mode 0600). Returns an fd or -errno with a
 * message in err; never touches errno for the caller.
 */
#ifndef OL_RT_NET_H
#define OL_RT_NET_H

#include <stddef.h>
#include <sys/socket.h>

/* A listening TCP socket on addr; with reuseport, cores can each open one
 * on the same address. *port_out gets the bound port (useful with port 0). */
int ol_net_listen(const char *addr, int reuseport, int *port_out, char *err, size_t errlen);
/* A numeric "host:port" or "[v6]:port" (no name lookup: safe on a loop
 * thread) into *sa and *len. 0, or -EINVAL. */
int ol_net_addr_numeric(const char *addr, struct sockaddr_storage *sa, socklen_t *len);
/*
 * Checks that addr can be listened on by this process alone: fails with
 * -EADDRINUSE when anyone, another openlaked using SO_REUSEPORT included,
 * already listens there. Call once before the per-core listeners.
 */
int ol_net_listen_probe(const char *addr, char *err, size_t errlen);
/* A listening Unix socket at path with permission bits mode (0600: its
 * owner only). It is made 0600 and changed to mode before it listens, so it
 * is never looser than asked. */
int ol_net_listen_unix(const char *path, unsigned mode, char *err, size_t errlen);
/*
 * True when the connected TCP socket's peer is on this host: 127.0.0.0/8,
 * ::1 or ::ffff:127.0.0.0/104. False for any other peer or a failed lookup.
 */
int ol_net_peer_is_loopback(int fd);
/*
 * Caps the send buffer (SO_SNDBUF, which turns autotuning off) of an
 * accepted socket whose peer is on this host; leaves any other alone.
 * With no network between the two ends the round trip is microseconds, so
 * a small buffer costs no throughput, and it keeps the bytes queued for the
 * peer few enough to stay in the CPU's caches until the peer reads them
 * (docs/architecture.md, "A request's life"; docs/benchmarks-history.md has the
 * figures). Returns 1 when capped, else 0.
 */
int ol_net_cap_loopback_sndbuf(int fd, int bytes);

#endif
