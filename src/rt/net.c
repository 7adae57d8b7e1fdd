/*
 * net.c - listening sockets (see net.h).
 */
#include "rt/net.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

/* getaddrinfo of "host:port" / "[v6]:port" (numeric port; flags its
 * AI_* flags): 0 and *out (freeaddrinfo it), -1 when addr has no ":port",
 * else getaddrinfo's code. */
static int ol_net_getaddr(const char *addr, int flags, struct addrinfo **out)
{
    char host[256];
    const char *colon = strrchr(addr, ':');
    if (!colon || colon == addr || (size_t)(colon - addr) >= sizeof host)
        return -1;
    size_t hl = (size_t)(colon - addr);
    memcpy(host, addr, hl);
    host[hl] = 0;
    if (host[0] == '[' && hl > 2 && host[hl - 1] == ']') {
        memmove(host, host + 1, hl - 2);
        host[hl - 2] = 0;
    }
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                             .ai_flags = flags | AI_NUMERICSERV};
    return getaddrinfo(host[0] ? host : NULL, colon + 1, &hints, out);
}

int ol_net_addr_numeric(const char *addr, struct sockaddr_storage *sa, socklen_t *len)
{
    struct addrinfo *ai = NULL;
    if (ol_net_getaddr(addr, AI_NUMERICHOST, &ai) != 0)
        return -EINVAL;
    memcpy(sa, ai->ai_addr, ai->ai_addrlen);
    *len = ai->ai_addrlen;
    freeaddrinfo(ai);
    return 0;
}

int ol_net_listen(const char *addr, int reuseport, int *port_out, char *err, size_t errlen)
{
    struct addrinfo *ai = NULL;
    int grc = ol_net_getaddr(addr, AI_PASSIVE, &ai);
    if (grc == -1) {
        snprintf(err, errlen, "bad listen address \"%s\" (expected host:port)", addr);
        return -EINVAL;
    }
    if (grc != 0) {
        snprintf(err, errlen, "cannot resolve listen address \"%s\": %s", addr, gai_strerror(grc));
        return -EINVAL;
    }
    int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int rc = 0;
    if (fd < 0) {
        rc = -errno;
        snprintf(err, errlen, "socket: %s", strerror(errno));
        goto out;
    }
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (reuseport)
        setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one);
    if (bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 || listen(fd, 4096) < 0) {
        rc = -errno;
        snprintf(err, errlen, "cannot listen on %s: %s%s", addr, strerror(errno),
                 errno == EADDRINUSE ? " (another process, maybe another openlaked, serves it)" : "");
        close(fd);
        goto out;
    }
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    getsockname(fd, (struct sockaddr *)&ss, &sl);
    *port_out = ss.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&ss)->sin6_port)
                                         : ntohs(((struct sockaddr_in *)&ss)->sin_port);
    rc = fd;
out:
    freeaddrinfo(ai);
    return rc;
}

int ol_net_listen_probe(const char *addr, char *err, size_t errlen)
{
    /* Without SO_REUSEPORT, so a daemon already serving addr (whose cores
     * share it with SO_REUSEPORT) makes this fail with EADDRINUSE. A daemon
     * that was just killed can hold its listeners a moment longer (the
     * kernel tears its io_uring rings, which reference them, down after the
     * process is gone): EADDRINUSE is retried for up to 1.5 s. */
    int port, fd = -1;
    for (int tries = 0; tries < 30; tries++) {
        fd = ol_net_listen(addr, 0, &port, err, errlen);
        if (fd != -EADDRINUSE)
            break;
        usleep(50 * 1000);
    }
    if (fd < 0)
        return fd;
    close(fd);
    return 0;
}

int ol_net_listen_unix(const char *path, unsigned mode, char *err, size_t errlen)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof sa.sun_path) {
        snprintf(err, errlen, "socket path %s is longer than %zu bytes", path, sizeof sa.sun_path - 1);
        return -ENAMETOOLONG;
    }
    strcpy(sa.sun_path, path);
    /* A socket left by a daemon that died is replaced; any other file is not. */
    struct stat st;
    if (lstat(path, &st) == 0) {
        if (!S_ISSOCK(st.st_mode)) {
            snprintf(err, errlen, "%s exists and is not a socket", path);
            return -EEXIST;
        }
        int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        int live = probe >= 0 && connect(probe, (struct sockaddr *)&sa, sizeof sa) == 0;
        if (probe >= 0)
            close(probe);
        if (live) {
            snprintf(err, errlen, "%s is in use (another openlaked serves it)", path);
            return -EADDRINUSE;
        }
        unlink(path);
    }
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        int rc = -errno;
        snprintf(err, errlen, "socket: %s", strerror(errno));
        return rc;
    }
    mode_t old = umask(0177); /* the socket is created 0600 */
    int brc = bind(fd, (struct sockaddr *)&sa, sizeof sa);
    umask(old);
    if (brc == 0 && mode != 0600 && chmod(path, (mode_t)mode) < 0) {
        int rc = -errno;
        snprintf(err, errlen, "cannot set mode %04o on %s: %s", mode, path, strerror(errno));
        close(fd);
        unlink(path);
        return rc;
    }
    if (brc < 0 || listen(fd, 4096) < 0) {
        int rc = -errno;
        snprintf(err, errlen, "cannot listen on %s: %s", path, strerror(errno));
        close(fd);
        return rc;
    }
    return fd;
}

int ol_net_peer_is_loopback(int fd)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    if (getpeername(fd, (struct sockaddr *)&ss, &len) < 0)
        return 0;
    if (ss.ss_family == AF_INET) {
        const struct sockaddr_in *a = (const struct sockaddr_in *)&ss;
        return (ntohl(a->sin_addr.s_addr) >> 24) == 127;
    }
    if (ss.ss_family == AF_INET6) {
        const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)&ss;
        if (IN6_IS_ADDR_LOOPBACK(&a->sin6_addr))
            return 1;
        return IN6_IS_ADDR_V4MAPPED(&a->sin6_addr) && a->sin6_addr.s6_addr[12] == 127;
    }
    return 0;
}

int ol_net_cap_loopback_sndbuf(int fd, int bytes)
{
    if (bytes <= 0 || !ol_net_peer_is_loopback(fd))
        return 0;
    return setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bytes, sizeof bytes) == 0;
}
