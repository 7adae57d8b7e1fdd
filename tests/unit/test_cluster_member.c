/*
 * test_cluster_member.c - cluster/member.h's record: encode then decode
 * gives the same fields; a newer format, a field of the wrong type, a
 * negative capacity and text that is not a JSON object are refused with
 * the field named; unknown fields are ignored; keys and prefixes.
 */
#include "olt.h"

#include "cluster/member.h"

#include <string.h>

OLT_TEST(cluster_member_record_round_trip)
{
    struct ol_member m;
    memset(&m, 0, sizeof m);          /* padding too: compared with memcmp below */
    m.id = 42;
    m.pid = 1234;
    m.started = 1796000000;
    m.kv_slab_bytes = 1ull << 33;
    m.kv_disk_bytes = 5ull << 40;
    m.drives = 4;
    m.kv_replicas = 3;
    m.s3_tls = true;
    strcpy(m.instance, "0123456789abcdef0123456789abcdef");
    strcpy(m.state, "active");
    strcpy(m.version, "0.1.0");
    strcpy(m.host, "gpu-7");
    strcpy(m.data_dir, "/srv/ol/d0");
    strcpy(m.s3_addr, "10.0.0.7:9000");
    strcpy(m.kv_addr, "10.0.0.7:9400");
    strcpy(m.kv_ucx_addr, "10.0.0.7:9401");
    strcpy(m.rpc_addr, "10.0.0.7:9100");
    char buf[4096];
    size_t n = ol_member_encode(&m, buf, sizeof buf);
    OLT_CHECK(n > 0 && n < sizeof buf && strlen(buf) == n);
    struct ol_member d;
    char why[128];
    OLT_CHECK_EQ(ol_member_decode(buf, n, &d, why, sizeof why), 0);
    OLT_CHECK_EQ(memcmp(&d, &m, sizeof m), 0);
    OLT_CHECK(ol_member_encode(&m, buf, 10) >= 10);     /* too small: says so */

    const char *extra = "{\"v\":1,\"id\":3,\"state\":\"starting\",\"zone\":\"b\",\"more\":[1,2]}";
    OLT_CHECK_EQ(ol_member_decode(extra, strlen(extra), &d, why, sizeof why), 0);
    OLT_CHECK_EQ(d.id, 3);
    OLT_CHECK_STR(d.state, "starting");
    OLT_CHECK_EQ(d.kv_replicas, 0);    /* not said: a node without a KV pool, or older */
    OLT_CHECK_STR(d.kv_ucx_addr, ""); /* no UCX KV listener, or older */
    /* a value this version cannot take is not said either: the node stays */
    static const char *odd[] = {"{\"v\":1,\"id\":4,\"kv_replicas\":0}",
                                "{\"v\":1,\"id\":4,\"kv_replicas\":17}",
                                "{\"v\":1,\"id\":4,\"kv_replicas\":\"2\"}",
                                "{\"v\":1,\"id\":4,\"kv_replicas\":2.5}"};
    for (size_t i = 0; i < sizeof odd / sizeof odd[0]; i++) {
        OLT_CHECK_EQ(ol_member_decode(odd[i], strlen(odd[i]), &d, why, sizeof why), 0);
        OLT_CHECK(d.id == 4 && d.kv_replicas == 0);
    }
    m.kv_replicas = 0;                 /* and not written then */
    m.kv_ucx_addr[0] = 0;
    n = ol_member_encode(&m, buf, sizeof buf);
    OLT_CHECK(n > 0 && n < sizeof buf && !strstr(buf, "kv_replicas") &&
              !strstr(buf, "kv_ucx_addr"));
    const char *bad = "{\"v\":1,\"id\":4,\"kv_ucx_addr\":9401}";
    OLT_CHECK_EQ(ol_member_decode(bad, strlen(bad), &d, why, sizeof why), -1);
}

OLT_TEST(cluster_member_record_refusals)
{
    static const struct { const char *json, *why; } bad[] = {
        {"{\"v\":2,\"id\":1}", "field v (a newer format)"},
        {"{\"id\":1}", "field v"},
        {"{\"v\":1,\"id\":\"1\"}", "field id"},
        {"{\"v\":1,\"state\":7}", "field state"},
        {"{\"v\":1,\"kv_slab_bytes\":-1}", "field a capacity"},
        {"{\"v\":1,\"s3_addr\":[]}", "field an address"},
        {"{\"v\":1,\"instance\":5}", "field instance"},
        {"{\"v\":1,\"s3_tls\":\"yes\"}", "field s3_tls"},
        {"[1,2]", "not a JSON object"},
        {"not json", "not a JSON object"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct ol_member d;
        char why[128] = "";
        OLT_CHECK_EQ(ol_member_decode(bad[i].json, strlen(bad[i].json), &d, why, sizeof why), -1);
        OLT_CHECK_STR(why, bad[i].why);
    }
    char k[160];
    ol_member_key("c1", 12, k, sizeof k);
    OLT_CHECK_STR(k, "/openlake/c1/nodes/12");
    ol_member_prefix("c1", k, sizeof k);
    OLT_CHECK_STR(k, "/openlake/c1/nodes/");
}

OLT_TEST(cluster_member_replicas_differ)
{
    struct ol_member m[5];
    memset(m, 0, sizeof m);
    int64_t r[5] = {2, 1, 0, 2, 1};      /* node 3 states none (no KV pool, or older) */
    for (int i = 0; i < 5; i++) {
        m[i].id = i + 1;
        m[i].kv_replicas = r[i];
    }
    char buf[128];
    OLT_CHECK(!ol_member_replicas_differ(m, 1, buf, sizeof buf));
    OLT_CHECK_STR(buf, "");
    OLT_CHECK(!ol_member_replicas_differ(m + 3, 0, buf, sizeof buf));
    m[1].kv_replicas = 0;
    m[4].kv_replicas = 0;
    OLT_CHECK(!ol_member_replicas_differ(m, 5, buf, sizeof buf));   /* 2 on 1 and 4 only */
    m[1].kv_replicas = 1;
    m[4].kv_replicas = 1;
    OLT_CHECK(ol_member_replicas_differ(m, 5, buf, sizeof buf));
    OLT_CHECK_STR(buf, "1 on nodes 2, 5; 2 on nodes 1, 4");
    m[4].kv_replicas = 16;
    OLT_CHECK(ol_member_replicas_differ(m, 5, buf, sizeof buf));
    OLT_CHECK_STR(buf, "1 on node 2; 2 on nodes 1, 4; 16 on node 5");
    char small[16];
    OLT_CHECK(ol_member_replicas_differ(m, 5, small, sizeof small));
    OLT_CHECK_STR(small, "1 on node 2;...");
}
