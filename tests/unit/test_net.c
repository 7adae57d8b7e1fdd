/*
 * test_net.c - rt/net.h's peer checks on real sockets: which accepted
 * connections count as from this host (IPv4 127/8, ::1, v4-mapped
 * loopback; not another of the host's addresses, not a Unix socket), and
 * that only those get the capped send buffer.
 */
#include "olt.h"

#include "rt/net.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

/* A connected pair over TCP: *srv is the accepted end. The listener binds
 * `to`; the client binds `from` first when given (port 0). */
static int tcp_pair(const struct sockaddr *to, const struct sockaddr *from, socklen_t len,
                    int *cli, int *srv)
{
    int fam = to->sa_family, one = 1;
    int l = socket(fam, SOCK_STREAM, 0);
    if (l < 0)
        return -1;
    setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_storage a;
    socklen_t alen = len;
    memcpy(&a, to, len);
    if (bind(l, (struct sockaddr *)&a, len) < 0 || listen(l, 1) < 0 ||
        getsockname(l, (struct sockaddr *)&a, &alen) < 0) {
        close(l);
        return -1;
    }
    int c = socket(from ? from->sa_family : fam, SOCK_STREAM, 0);
    if (c < 0 || (from && bind(c, from, len) < 0) || connect(c, (struct sockaddr *)&a, alen) < 0) {
        if (c >= 0)
            close(c);
        close(l);
        return -1;
    }
    int s = accept(l, NULL, NULL);
    close(l);
    if (s < 0) {
        close(c);
        return -1;
    }
    *cli = c;
    *srv = s;
    return 0;
}

static struct sockaddr_in v4(const char *ip)
{
    struct sockaddr_in a = {.sin_family = AF_INET};
    inet_pton(AF_INET, ip, &a.sin_addr);
    return a;
}

static int sndbuf(int fd)
{
    int v = 0;
    socklen_t l = sizeof v;
    getsockopt(fd, SOL_SOCKET, SO_SNDBUF, &v, &l);
    return v;
}

OLT_TEST(net_loopback_peers_v4)
{
    struct sockaddr_in to = v4("127.0.0.1"), from = v4("127.0.0.2");
    int c, s;
    OLT_CHECK(tcp_pair((struct sockaddr *)&to, NULL, sizeof to, &c, &s) == 0);
    OLT_CHECK_EQ(ol_net_peer_is_loopback(s), 1);
    close(c);
    close(s);
    /* anywhere in 127/8, not just 127.0.0.1 */
    OLT_CHECK(tcp_pair((struct sockaddr *)&to, (struct sockaddr *)&from, sizeof to, &c, &s) == 0);
    OLT_CHECK_EQ(ol_net_peer_is_loopback(s), 1);
    close(c);
    close(s);
}

OLT_TEST(net_loopback_peers_v6)
{
    struct sockaddr_in6 to = {.sin6_family = AF_INET6, .sin6_addr = IN6ADDR_LOOPBACK_INIT};
    int c, s;
    if (tcp_pair((struct sockaddr *)&to, NULL, sizeof to, &c, &s) < 0)
        OLT_SKIP("no IPv6 loopback here");
    OLT_CHECK_EQ(ol_net_peer_is_loopback(s), 1);
    close(c);
    close(s);

    /* a dual-stack listener sees an IPv4 client as ::ffff:127.0.0.1 */
    int l = socket(AF_INET6, SOCK_STREAM, 0), off = 0;
    OLT_CHECK(l >= 0);
    setsockopt(l, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof off);
    struct sockaddr_in6 any = {.sin6_family = AF_INET6, .sin6_addr = IN6ADDR_ANY_INIT};
    socklen_t alen = sizeof any;
    OLT_CHECK(bind(l, (struct sockaddr *)&any, sizeof any) == 0 && listen(l, 1) == 0);
    OLT_CHECK(getsockname(l, (struct sockaddr *)&any, &alen) == 0);
    struct sockaddr_in dst = v4("127.0.0.1");
    dst.sin_port = any.sin6_port;
    c = socket(AF_INET, SOCK_STREAM, 0);
    OLT_CHECK(connect(c, (struct sockaddr *)&dst, sizeof dst) == 0);
    s = accept(l, NULL, NULL);
    OLT_CHECK(s >= 0);
    struct sockaddr_in6 peer;
    socklen_t plen = sizeof peer;
    OLT_CHECK(getpeername(s, (struct sockaddr *)&peer, &plen) == 0);
    OLT_CHECK(IN6_IS_ADDR_V4MAPPED(&peer.sin6_addr));
    OLT_CHECK_EQ(ol_net_peer_is_loopback(s), 1);
    close(c);
    close(s);
    close(l);
}

/* The host's first IPv4 address that is not loopback, or 0. */
static int host_addr(struct sockaddr_in *out)
{
    struct ifaddrs *ifs, *i;
    int found = 0;
    if (getifaddrs(&ifs) < 0)
        return 0;
    for (i = ifs; i && !found; i = i->ifa_next) {
        if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET || (i->ifa_flags & IFF_LOOPBACK) ||
            !(i->ifa_flags & IFF_UP))
            continue;
        *out = *(struct sockaddr_in *)i->ifa_addr;
        out->sin_port = 0;
        found = 1;
    }
    freeifaddrs(ifs);
    return found;
}

OLT_TEST(net_other_peers_are_not_loopback)
{
    int sp[2];
    OLT_CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sp) == 0);
    OLT_CHECK_EQ(ol_net_peer_is_loopback(sp[0]), 0);
    OLT_CHECK_EQ(ol_net_cap_loopback_sndbuf(sp[0], 100000), 0);
    close(sp[0]);
    close(sp[1]);
    OLT_CHECK_EQ(ol_net_peer_is_loopback(-1), 0);

    struct sockaddr_in a;
    int c, s;
    if (!host_addr(&a))
        OLT_SKIP("no non-loopback IPv4 address here");
    /* this host, but through its network address: not loopback by address */
    OLT_CHECK(tcp_pair((struct sockaddr *)&a, (struct sockaddr *)&a, sizeof a, &c, &s) == 0);
    OLT_CHECK_EQ(ol_net_peer_is_loopback(s), 0);
    int before = sndbuf(s);
    OLT_CHECK_EQ(ol_net_cap_loopback_sndbuf(s, 100000), 0);
    OLT_CHECK_EQ(sndbuf(s), before);
    close(c);
    close(s);
}

OLT_TEST(net_cap_loopback_sndbuf)
{
    struct sockaddr_in to = v4("127.0.0.1");
    int c, s;
    OLT_CHECK(tcp_pair((struct sockaddr *)&to, NULL, sizeof to, &c, &s) == 0);
    int before = sndbuf(s);
    OLT_CHECK_EQ(ol_net_cap_loopback_sndbuf(s, 0), 0);     /* 0: autotuning kept */
    OLT_CHECK_EQ(sndbuf(s), before);
    OLT_CHECK_EQ(ol_net_cap_loopback_sndbuf(s, 100000), 1);
    OLT_CHECK_EQ(sndbuf(s), 200000);   /* the kernel doubles it for its bookkeeping */
    close(c);
    close(s);
}
