/*
 * cmd_heal.c - `openlake heal [BUCKET[/PREFIX]]`: start a heal walk on
 * openlaked and follow it to the end.
 *
 * Owns: the admin call (POST /_openlake/heal, then GET /_openlake/heal every
 * 200 ms; signed, cli/admin.h), the progress lines on stderr and the
 * summary on stdout.
 *
 * Must not: speak TLS (the admin plane listens on s3_addr, plain HTTP in
 * this build), or retry a walk that failed: exit 1 says so.
 */
#include "cli/admin.h"
#include "cli/cli.h"
#include "cli/output.h"
#include "s3/pct.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define OL_HEAL_RESP_MAX (64u << 10)
#define OL_HEAL_POLL_MS  200

struct ol_heal_args {
    const char *endpoint, *access_key, *secret_key, *secret_key_file, *credentials, *region,
        *target;
    char host[256], port[8];
    struct ol_cli_cred cred;
};

/* ---- the JSON answers (flat objects of numbers, booleans and strings) ------------------- */

static unsigned long long jnum(const char *js, const char *key)
{
    char pat[48];
    snprintf(pat, sizeof pat, "\"%s\":", key);
    const char *p = strstr(js, pat);
    return p ? strtoull(p + strlen(pat), NULL, 10) : 0;
}

static bool jtrue(const char *js, const char *key)
{
    char pat[48];
    snprintf(pat, sizeof pat, "\"%s\":true", key);
    return strstr(js, pat) != NULL;
}

/* The "message" of an error answer, for the user. */
static const char *jmsg(char *js)
{
    char *p = strstr(js, "\"message\":\"");
    if (!p)
        return js;
    p += 11;
    char *e = strrchr(p, '"');
    if (e)
        *e = 0;
    return p;
}

static void human_bytes(unsigned long long b, char *out, size_t cap)
{
    static const char *const u[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)b;
    unsigned i = 0;
    while (v >= 1024 && i < 4) {
        v /= 1024;
        i++;
    }
    snprintf(out, cap, i ? "%.1f %s" : "%.0f %s", v, u[i]);
}

/* ---- the command ------------------------------------------------------------------------ */

static int parse(const struct ol_cli *cli, int argc, char **argv, struct ol_heal_args *a)
{
    static const char *const opts[] = {"--endpoint", "--access-key", "--secret-key",
                                       "--secret-key-file", "--credentials", "--region", NULL};
    const char **slots[] = {&a->endpoint, &a->access_key, &a->secret_key, &a->secret_key_file,
                            &a->credentials, &a->region};
    const char **pos[] = {&a->target};
    int rc = ol_cli_options(cli, "heal", argc, argv, opts, slots, pos, 1);
    if (rc)
        return rc;
    const char *ep = a->endpoint;
    if (!strncmp(ep, "http://", 7))
        ep += 7;
    else if (strstr(ep, "://"))
        return ol_cli_usage_error(cli, "heal", "--endpoint '%s': only http:// is supported",
                                  a->endpoint);
    const char *colon = strrchr(ep, ':');
    size_t hl = colon ? (size_t)(colon - ep) : strcspn(ep, "/");
    if (hl == 0 || hl >= sizeof a->host)
        return ol_cli_usage_error(cli, "heal", "--endpoint '%s': need host:port", a->endpoint);
    memcpy(a->host, ep, hl);
    a->host[hl] = 0;
    snprintf(a->port, sizeof a->port, "%.*s", colon ? (int)strcspn(colon + 1, "/") : 2,
             colon ? colon + 1 : "80");
    struct ol_cli_cred_flags f = {a->access_key, a->secret_key, a->secret_key_file,
                                  a->credentials, a->region};
    return ol_cli_cred_load(cli, "heal", &f, &a->cred);
}

int ol_cmd_heal(const struct ol_cli *cli, int argc, char **argv)
{
    struct ol_heal_args a = {.endpoint = "http://127.0.0.1:9000", .region = "us-east-1"};
    if (getenv("OPENLAKE_ENDPOINT") && *getenv("OPENLAKE_ENDPOINT"))
        a.endpoint = getenv("OPENLAKE_ENDPOINT");
    int rc = parse(cli, argc, argv, &a);
    if (rc)
        return rc;
    char bucket[64] = "", prefix[1025] = "";
    if (a.target) {
        size_t bl = strcspn(a.target, "/");
        if (bl == 0 || bl >= sizeof bucket)
            return ol_cli_usage_error(cli, "heal", "'%s' is not BUCKET[/PREFIX]", a.target);
        memcpy(bucket, a.target, bl);
        if (a.target[bl] == '/')
            snprintf(prefix, sizeof prefix, "%s", a.target + bl + 1);
    }
    char query[4096] = "", eb[256], epx[3200];
    ol_pct_encode(bucket, strlen(bucket), eb, sizeof eb, false);   /* 3 x 63, 3 x 1024: fit */
    ol_pct_encode(prefix, strlen(prefix), epx, sizeof epx, false);
    if (bucket[0])
        snprintf(query, sizeof query, "bucket=%s%s%s", eb, prefix[0] ? "&prefix=" : "",
                 prefix[0] ? epx : "");
    char *resp = malloc(OL_HEAL_RESP_MAX);
    if (!resp)
        return ol_cli_fail(cli, "heal", "out of memory");
    int st = ol_cli_admin_request(&a.cred, a.host, a.port, "POST", "/_openlake/heal", query, resp, OL_HEAL_RESP_MAX);
    if (st < 0) {
        free(resp);
        return ol_cli_fail(cli, "heal", "%s:%s: %s (is openlaked running? see --endpoint)",
                           a.host, a.port, strerror(-st));
    }
    if (st != 202) {
        int ex = ol_cli_fail(cli, "heal", "HTTP %d: %s", st, jmsg(resp));
        free(resp);
        return ex;
    }
    unsigned long long id = jnum(resp, "walk"), last = ~0ull;
    bool tty = isatty(2);
    for (;;) {
        struct timespec ts = {.tv_sec = 0, .tv_nsec = OL_HEAL_POLL_MS * 1000000L};
        nanosleep(&ts, NULL);
        st = ol_cli_admin_request(&a.cred, a.host, a.port, "GET", "/_openlake/heal", "", resp, OL_HEAL_RESP_MAX);
        if (st != 200) {
            int ex = ol_cli_fail(cli, "heal", "progress: %s",
                                 st < 0 ? strerror(-st) : jmsg(resp));
            free(resp);
            return ex;
        }
        unsigned long long w = jnum(resp, "walk"), sc = jnum(resp, "scanned");
        bool running = jtrue(resp, "running");
        if (w != id) {
            free(resp);
            return ol_cli_fail(cli, "heal", "walk %llu was replaced by walk %llu", id, w);
        }
        char hb[32];
        human_bytes(jnum(resp, "bytes"), hb, sizeof hb);
        if (sc != last || !running) {
            fprintf(stderr, "%sheal: %llu objects scanned, %llu healed, %llu failed, %s written%s",
                    tty ? "\r" : "", sc, jnum(resp, "healed"), jnum(resp, "failed"), hb,
                    tty ? "" : "\n");
            last = sc;
        }
        if (!running)
            break;
    }
    if (tty)
        fputc('\n', stderr);
    if (jtrue(resp, "no_bucket")) {
        free(resp);
        return ol_cli_fail(cli, "heal", "no such bucket: %s", bucket);
    }
    unsigned long long sc = jnum(resp, "scanned"), he = jnum(resp, "healed"),
                       fa = jnum(resp, "failed"), by = jnum(resp, "bytes");
    if (cli->out & OL_OUT_JSON) {
        struct ol_json j;
        ol_json_init(&j, stdout);
        ol_json_object_begin(&j);
        ol_json_key(&j, "walk");
        ol_json_uint(&j, id);
        ol_json_key(&j, "bucket");
        ol_json_str(&j, bucket);
        ol_json_key(&j, "prefix");
        ol_json_str(&j, prefix);
        ol_json_key(&j, "scanned");
        ol_json_uint(&j, sc);
        ol_json_key(&j, "healed");
        ol_json_uint(&j, he);
        ol_json_key(&j, "failed");
        ol_json_uint(&j, fa);
        ol_json_key(&j, "bytes_written");
        ol_json_uint(&j, by);
        ol_json_object_end(&j);   /* the top level ends its line */
    } else {
        char hb[32];
        human_bytes(by, hb, sizeof hb);
        printf("healed %s%s%s: %llu objects scanned, %llu healed, %llu failed, %s written\n",
               bucket[0] ? bucket : "every bucket", prefix[0] ? "/" : "", prefix, sc, he, fa, hb);
    }
    free(resp);
    if (fa)
        return ol_cli_fail(cli, "heal", "%llu object%s could not be healed (see the daemon's log)",
                           fa, fa == 1 ? "" : "s");
    return OL_EXIT_OK;
}
