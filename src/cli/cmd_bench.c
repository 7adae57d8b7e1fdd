/*
 * cmd_bench.c - `openlake bench kv` (and the dispatch of `bench client`,
 * cmd_bench_client.c): load a KV service through the C client
 * and report keys/s, GB/s and per-batch latency percentiles for put, get and
 * lookup, with a progress bar on a terminal, and whether the slab was cold
 * or warm when each began: the share of the slab the kernel had pages for
 * (ol_client_slab_usage). A put onto a page that does not exist yet waits
 * for the kernel to allocate and zero it, which made a fresh daemon's first
 * puts several times slower than warm ones (docs/kv-slab.md, "Populating").
 */
#include "cli.h"
#include "output.h"

#include "kv/proto.h"
#include "openlake/client.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double ol_b_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int ol_b_cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

struct ol_b_result {
    const char *op;
    uint64_t keys, bytes, errors;
    double secs, p50, p99, p999;
    double slab_frac;   /* share of the slab with pages when the op began; -1 unknown (TCP) */
};

/* The slab's state from the share of it that has pages: at least 98% warm
 * (every data page has one; the slot headers, 1.6% of the slab, get pages
 * only where slots are used: 98.5% after a pass of 256 KiB values), under
 * 1% cold. */
static const char *ol_b_slab_state(double frac, bool json)
{
    return frac < 0 ? "unknown" : frac >= 0.98 ? "warm" : frac < 0.01 ? "cold"
           : json ? "partly_warm" : "partly warm";
}

static void ol_b_progress(const struct ol_cli *cli, const char *op, double frac)
{
    if (!(cli->err & OL_OUT_COLOR)) /* a terminal on stderr */
        return;
    int w = 30, done = (int)(frac * w);
    fprintf(stderr, "\r%-6s [%.*s%*s] %3d%%", op, done, "##############################",
            w - done, "", (int)(frac * 100));
    fflush(stderr);
}

int ol_cmd_bench(const struct ol_cli *cli, int argc, char **argv)
{
    const char *addr = ol_cli_default_kv_sock(), *token = NULL, *token_file = NULL, *ns = "bench";
    uint64_t vsize = 256 << 10;
    unsigned batch = 32;
    double seconds = 6;
    if (argc >= 2 && !strcmp(argv[1], "client"))
        return ol_cmd_bench_client(cli, argc, argv);
    if (argc < 2 || strcmp(argv[1], "kv") != 0)
        return ol_cli_usage_error(cli, "bench", "what to load: kv, or client");
    static const char *const opts[] = {"--addr", "--token", "--token-file", "--ns",
                                       "--value-size", "--batch", "--seconds", NULL};
    for (int i = 2; i < argc; i++) {
        int o = -1;
        for (int k = 0; opts[k]; k++)
            if (!strcmp(argv[i], opts[k]))
                o = k;
        if (o < 0)
            return ol_cli_bad_option(cli, "bench", argv[i], opts);
        if (i + 1 >= argc)
            return ol_cli_usage_error(cli, "bench", "%s needs a value", argv[i]);
        const char *v = argv[++i];
        char *end;
        switch (o) {
        case 0: addr = v; break;
        case 1: token = v; break;
        case 2: token_file = v; break;
        case 3: ns = v; break;
        case 4: vsize = strtoull(v, &end, 10);
            if (*end || !vsize || vsize > (16u << 20))
                return ol_cli_usage_error(cli, "bench", "--value-size: 1 to 16777216 bytes");
            break;
        case 5: batch = (unsigned)strtoul(v, &end, 10);
            if (*end || !batch || batch > 4096)
                return ol_cli_usage_error(cli, "bench", "--batch: 1 to 4096 keys");
            break;
        case 6: seconds = strtod(v, &end);
            if (*end || seconds <= 0 || seconds > 3600)
                return ol_cli_usage_error(cli, "bench", "--seconds: more than 0, at most 3600");
            break;
        }
    }
    char tokpath[4096], err[512];
    struct ol_client_opts o = {.addr = addr, .ns = ns, .value_size = vsize};
    int ex = ol_cli_kv_token(cli, "bench", token, token_file, &o, tokpath);
    if (ex)
        return ex;
    ol_client *c;
    if (ol_client_open(&o, &c, err, sizeof err) < 0)
        return ol_cli_fail(cli, "bench", "%s (is openlaked running? see --addr)", err);

    char *vals = malloc((size_t)batch * vsize), *back = malloc((size_t)batch * vsize);
    struct ol_client_key *keys = calloc(batch, sizeof *keys);
    char (*names)[32] = calloc(batch, 32);
    const void **vp = calloc(batch, sizeof *vp);
    void **bp = calloc(batch, sizeof *bp);
    uint64_t *lens = calloc(batch, sizeof *lens), *caps = calloc(batch, sizeof *caps),
             *got = calloc(batch, sizeof *got);
    uint16_t *st = calloc(batch, sizeof *st);
    uint8_t *present = calloc(batch, 1);
    size_t maxlat = 1u << 20;
    double *lat = malloc(maxlat * sizeof *lat);
    if (!vals || !back || !keys || !names || !vp || !bp || !lens || !caps || !got || !st ||
        !present || !lat) {
        ol_client_close(c);
        return ol_cli_fail(cli, "bench", "out of memory");
    }
    for (size_t i = 0; i < (size_t)batch * vsize; i++)
        vals[i] = (char)(i * 131 + i / 4096);
    for (unsigned i = 0; i < batch; i++) {
        vp[i] = vals + (size_t)i * vsize;
        bp[i] = back + (size_t)i * vsize;
        lens[i] = caps[i] = vsize;
        keys[i].data = names[i];
    }
    uint64_t run_id = (uint64_t)getpid() << 20 ^ (uint64_t)time(NULL), written = 0;
    /* get and lookup revisit the newest keys that half the slab holds, so
     * they measure reads, not what eviction already removed */
    uint64_t stats[OL_CLIENT_STATS], window = UINT64_MAX;
    if (ol_client_stats(c, stats) == 0 && stats[OL_KV_STAT_BYTES_CAPACITY])
        window = stats[OL_KV_STAT_BYTES_CAPACITY] / 2 / (vsize < 16384 ? 16384 : vsize);
    if (window < batch)
        window = batch;
    struct ol_b_result res[3] = {{.op = "put"}, {.op = "get"}, {.op = "lookup"}};
    int rc = 0;
    uint64_t slab_size = 0, slab_alloc;
    double after_put = -1;
    for (int phase = 0; phase < 3 && rc == 0; phase++) {
        struct ol_b_result *r = &res[phase];
        r->slab_frac = ol_client_slab_usage(c, &slab_size, &slab_alloc) == 0 && slab_size
                           ? (double)slab_alloc / (double)slab_size : -1;
        if (phase == 1)
            after_put = r->slab_frac;
        size_t nlat = 0;
        double t0 = ol_b_now(), end = t0 + seconds / 3, t;
        uint64_t b = 0;
        while ((t = ol_b_now()) < end && nlat < maxlat) {
            /* put writes batch after batch; get/lookup revisit what was written */
            uint64_t span = written < window ? written : window;
            uint64_t base = phase == 0 ? written : written - span + (span ? (b * batch) % span : 0);
            if (phase && base + batch > written)
                base = written - batch; /* stay inside what was written */
            for (unsigned i = 0; i < batch; i++)
                keys[i].len = (uint16_t)snprintf(names[i], 32, "b%llx-%llu",
                                                 (unsigned long long)run_id,
                                                 (unsigned long long)(base + i));
            double s = ol_b_now();
            uint32_t lead;
            if (phase == 0)
                rc = ol_client_put(c, keys, vp, lens, batch, st);
            else if (phase == 1)
                rc = ol_client_get(c, keys, bp, caps, got, batch, st);
            else
                rc = ol_client_lookup(c, keys, batch, present, &lead);
            if (rc < 0)
                break;
            lat[nlat++] = ol_b_now() - s;
            for (unsigned i = 0; i < batch; i++) {
                int ok = phase == 2 ? present[i] : st[i] == OL_KV_OK;
                r->errors += !ok;
                r->bytes += ok && phase < 2 ? vsize : 0;
            }
            if (phase == 1 && st[0] == OL_KV_OK && memcmp(back, vals, vsize) != 0) {
                rc = -EBADMSG; /* bytes read back differ from bytes written */
                break;
            }
            r->keys += batch;
            b++;
            if (phase == 0)
                written += batch;
            if (b % 16 == 0)
                ol_b_progress(cli, r->op, (t - t0) / (seconds / 3));
        }
        r->secs = ol_b_now() - t0;
        if (nlat) {
            qsort(lat, nlat, sizeof *lat, ol_b_cmp);
            r->p50 = lat[nlat / 2] * 1e6;
            r->p99 = lat[nlat * 99 / 100] * 1e6;
            r->p999 = lat[nlat * 999 / 1000] * 1e6;
        }
        ol_b_progress(cli, r->op, 1.0);
        if (cli->err & OL_OUT_COLOR)
            fputc('\n', stderr);
    }
    const char *path = ol_client_has_slab(c) ? "through the shared slab" : "inline over TCP";
    ol_client_close(c);
    free(vals); free(back); free(keys); free(names); free(vp); free(bp);
    free(lens); free(caps); free(got); free(st); free(present); free(lat);
    if (rc < 0)
        return ol_cli_fail(cli, "bench", "%s", rc == -EBADMSG ? "bytes read back differ from bytes written"
                                                               : strerror(-rc));
    if (cli->out & OL_OUT_JSON) {
        struct ol_json j;
        ol_json_init(&j, stdout);
        ol_json_array_begin(&j);
        for (int i = 0; i < 3; i++) {
            ol_json_object_begin(&j);
            ol_json_key(&j, "op"); ol_json_str(&j, res[i].op);
            ol_json_key(&j, "keys_per_s"); ol_json_uint(&j, (uint64_t)(res[i].keys / res[i].secs));
            char num[64];
            snprintf(num, sizeof num, "%.3f", (double)res[i].bytes / res[i].secs / 1e9);
            ol_json_key(&j, "gb_per_s"); ol_json_raw(&j, num);
            snprintf(num, sizeof num, "%.1f", res[i].p50);
            ol_json_key(&j, "p50_us"); ol_json_raw(&j, num);
            snprintf(num, sizeof num, "%.1f", res[i].p99);
            ol_json_key(&j, "p99_us"); ol_json_raw(&j, num);
            snprintf(num, sizeof num, "%.1f", res[i].p999);
            ol_json_key(&j, "p999_us"); ol_json_raw(&j, num);
            ol_json_key(&j, "misses"); ol_json_uint(&j, res[i].errors);
            ol_json_key(&j, "slab"); ol_json_str(&j, ol_b_slab_state(res[i].slab_frac, true));
            ol_json_key(&j, "slab_allocated_frac");
            if (res[i].slab_frac < 0) {
                ol_json_raw(&j, "null");
            } else {
                snprintf(num, sizeof num, "%.4f", res[i].slab_frac);
                ol_json_raw(&j, num);
            }
            ol_json_object_end(&j);
        }
        ol_json_array_end(&j);
        putchar('\n');
        return OL_EXIT_OK;
    }
    static const struct ol_col cols[] = {
        {"op", "OP", OL_ALIGN_LEFT}, {"keys", "KEYS/S", OL_ALIGN_RIGHT},
        {"gbs", "GB/S", OL_ALIGN_RIGHT}, {"p50", "P50 µS", OL_ALIGN_RIGHT},
        {"p99", "P99 µS", OL_ALIGN_RIGHT}, {"p999", "P999 µS", OL_ALIGN_RIGHT},
        {"miss", "MISSES", OL_ALIGN_RIGHT}, {"slab", "SLAB AT START", OL_ALIGN_LEFT}};
    ol_table *t = ol_table_create(cols, 8);
    for (int i = 0; i < 3; i++) {
        ol_table_row(t);
        ol_table_str(t, res[i].op);
        ol_table_uint(t, (uint64_t)(res[i].keys / res[i].secs));
        ol_table_strf(t, "%.2f", (double)res[i].bytes / res[i].secs / 1e9);
        ol_table_strf(t, "%.0f", res[i].p50);
        ol_table_strf(t, "%.0f", res[i].p99);
        ol_table_strf(t, "%.0f", res[i].p999);
        ol_table_uint(t, res[i].errors);
        if (res[i].slab_frac < 0)
            ol_table_str(t, "unknown");
        else
            ol_table_strf(t, "%s (%.0f%%)", ol_b_slab_state(res[i].slab_frac, false),
                          res[i].slab_frac * 100);
    }
    printf("%s: batches of %u keys, values of %llu bytes, %s\n", addr, batch,
           (unsigned long long)vsize, path);
    int prc = ol_table_print(t, stdout, cli->out);
    ol_table_destroy(t);
    /* SLAB AT START: the share of the slab the kernel had pages for */
    double f = res[0].slab_frac;
    if (f < 0)
        printf("slab: not mapped over TCP, so whether it was cold or warm is unknown\n");
    else if (f < 0.98)
        printf("slab: %s when put began: %.0f%% of its %.1f GiB had pages (%.0f%% when put "
               "ended); a put onto a page without one waits for the kernel to allocate and "
               "zero it, so these put figures are not a warm slab's (kv_slab.populate, "
               "docs/kv-slab.md)\n",
               ol_b_slab_state(f, false), f * 100, (double)slab_size / (1u << 30),
               after_put * 100);
    else
        printf("slab: warm: %.0f%% of its %.1f GiB had pages when put began\n", f * 100,
               (double)slab_size / (1u << 30));
    return prc < 0 ? OL_EXIT_FAIL : OL_EXIT_OK;
}
