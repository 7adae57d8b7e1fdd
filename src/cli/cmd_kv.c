/*
 * cmd_kv.c - `openlake kv stats|get|put|del`: look at and poke the KV cache
 * through the C client library (the same protocol as any client).
 */
#include "cli.h"
#include "output.h"

#include "base/datadir.h"
#include "kv/proto.h"
#include "openlake/client.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define OL_KV_CLI_MAX_VALUE (256u << 20)

struct ol_kv_args {
    const char *addr, *token, *token_file, *ns, *value, *file, *out;
    const char *sub, *key;
};

/* Reads all of fd (stdin or a file) into a new buffer. */
static char *ol_read_all(int fd, uint64_t *len)
{
    size_t cap = 65536, n = 0;
    char *b = malloc(cap);
    for (;;) {
        if (!b)
            return NULL;
        if (n == cap) {
            if (cap >= OL_KV_CLI_MAX_VALUE) {
                free(b);
                errno = EFBIG;
                return NULL;
            }
            char *nb = realloc(b, cap *= 2);
            if (!nb) {
                free(b);
                return NULL;
            }
            b = nb;
        }
        ssize_t r = read(fd, b + n, cap - n);
        if (r < 0) {
            free(b);
            return NULL;
        }
        if (r == 0)
            break;
        n += (size_t)r;
    }
    *len = n;
    return b;
}

static const char *ol_env(const char *name)
{
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}

const char *ol_cli_default_kv_sock(void)
{
    static char sock[4096];
    ol_datadir_find(environ, "kv.sock", sock, sizeof sock);
    return sock;
}

int ol_cli_kv_token(const struct ol_cli *cli, const char *cmd, const char *token,
                    const char *token_file, struct ol_client_opts *o, char *tokpath)
{
    if (token && token_file)
        return ol_cli_usage_error(cli, cmd, "give --token or --token-file, not both");
    if (!token && !token_file) {
        token = ol_env("OPENLAKE_KV_TOKEN");
        token_file = ol_env("OPENLAKE_KV_TOKEN_FILE");
        if (token && token_file)
            return ol_cli_usage_error(cli, cmd, "OPENLAKE_KV_TOKEN and OPENLAKE_KV_TOKEN_FILE "
                                      "are both set; unset one");
    } else if (token) {
        ol_cli_warn_secret_flag(cli, cmd, "--token",
                                "--token-file FILE (or OPENLAKE_KV_TOKEN_FILE, OPENLAKE_KV_TOKEN)");
    }
    if (!token && !token_file) {
        if (!strchr(o->addr, '/'))
            return ol_cli_usage_error(cli, cmd, "a TCP address needs --token-file, "
                                      "OPENLAKE_KV_TOKEN_FILE or OPENLAKE_KV_TOKEN");
        char dir[4096];                    /* kv.token sits beside kv.sock */
        snprintf(dir, sizeof dir, "%s", o->addr);
        snprintf(tokpath, 4096, "%s/kv.token", dirname(dir));
        token_file = tokpath;
    }
    o->token = token;
    o->token_file = token ? NULL : token_file;
    return 0;
}

static int ol_kv_connect(const struct ol_cli *cli, const struct ol_kv_args *a, uint64_t value_size,
                         ol_client **c)
{
    char tokpath[4096], err[512];
    struct ol_client_opts o = {.addr = a->addr, .ns = a->ns, .value_size = value_size};
    int rc = ol_cli_kv_token(cli, "kv", a->token, a->token_file, &o, tokpath);
    if (rc)
        return rc;
    if (ol_client_open(&o, c, err, sizeof err) < 0)
        return ol_cli_fail(cli, "kv", "%s (is openlaked running? see --addr)", err);
    return OL_EXIT_OK;
}

static int ol_kv_stats(const struct ol_cli *cli, ol_client *c)
{
    uint64_t v[OL_CLIENT_STATS];
    int rc = ol_client_stats(c, v);
    if (rc < 0)
        return ol_cli_fail(cli, "kv", "stats: %s", strerror(-rc));
    if (cli->out & OL_OUT_JSON) {
        struct ol_json j;
        ol_json_init(&j, stdout);
        ol_json_object_begin(&j);
        ol_json_key(&j, "shards");
        ol_json_uint(&j, ol_client_shards(c));
        for (int i = 0; i < OL_CLIENT_STATS; i++) {
            ol_json_key(&j, ol_kv_stat_name(i));
            ol_json_uint(&j, v[i]);
        }
        ol_json_object_end(&j);   /* the top level ends its line */
        return OL_EXIT_OK;
    }
    static const struct ol_col cols[] = {{"counter", "COUNTER", OL_ALIGN_LEFT},
                                         {"value", "VALUE", OL_ALIGN_RIGHT}};
    ol_table *t = ol_table_create(cols, 2);
    ol_table_row(t);
    ol_table_str(t, "shards");
    ol_table_uint(t, ol_client_shards(c));
    for (int i = 0; i < OL_CLIENT_STATS; i++) {
        ol_table_row(t);
        ol_table_str(t, ol_kv_stat_name(i));
        ol_table_uint(t, v[i]);
    }
    int prc = ol_table_print(t, stdout, cli->out);
    ol_table_destroy(t);
    return prc < 0 ? OL_EXIT_FAIL : OL_EXIT_OK;
}

static int ol_kv_op(const struct ol_cli *cli, const struct ol_kv_args *a)
{
    struct ol_client_key k = {a->key, (uint16_t)strlen(a->key)};
    if (k.len < 1 || strlen(a->key) > OL_KV_MAX_KEY)
        return ol_cli_usage_error(cli, "kv", "a key is 1 to %u bytes", OL_KV_MAX_KEY);
    char *val = NULL;
    uint64_t len = 0;
    if (!strcmp(a->sub, "put")) {
        if (a->value) {
            val = strdup(a->value);
            len = strlen(a->value);
        } else {
            int fd = a->file ? open(a->file, O_RDONLY | O_CLOEXEC) : STDIN_FILENO;
            if (fd < 0)
                return ol_cli_fail(cli, "kv", "%s: %s", a->file, strerror(errno));
            val = ol_read_all(fd, &len);
            if (a->file)
                close(fd);
        }
        if (!val)
            return ol_cli_fail(cli, "kv", "reading the value: %s", strerror(errno));
    }
    ol_client *c;
    int ex = ol_kv_connect(cli, a, len, &c);
    if (ex != OL_EXIT_OK) {
        free(val);
        return ex;
    }
    uint16_t st = 0;
    int rc = 0;
    if (!strcmp(a->sub, "put")) {
        const void *vp = val;
        rc = ol_client_put(c, &k, &vp, &len, 1, &st);
    } else if (!strcmp(a->sub, "del")) {
        rc = ol_client_delete(c, &k, 1, &st);
    } else { /* get */
        uint64_t cap = OL_KV_CLI_MAX_VALUE, got = 0;
        val = malloc(cap);
        void *bp = val;
        rc = val ? ol_client_get(c, &k, &bp, &cap, &got, 1, &st) : -ENOMEM;
        if (rc == 0 && st == OL_KV_OK) {
            FILE *f = a->out ? fopen(a->out, "wb") : stdout;
            if (!f || fwrite(val, 1, got, f) != got || (a->out && fclose(f) != 0))
                rc = -EIO;
        }
    }
    ol_client_close(c);
    free(val);
    if (rc < 0)
        return ol_cli_fail(cli, "kv", "%s: %s", a->sub, strerror(-rc));
    if (st != OL_KV_OK)
        return ol_cli_fail(cli, "kv", "%s %s: %s", a->sub, a->key, ol_kv_status_name(st));
    return OL_EXIT_OK;
}

int ol_cmd_kv(const struct ol_cli *cli, int argc, char **argv)
{
    struct ol_kv_args a = {.addr = ol_cli_default_kv_sock(), .ns = "default"};
    static const char *const opts[] = {"--addr", "--token", "--token-file", "--ns", "--value",
                                       "--file", "--out", NULL};
    const char **slots[] = {&a.addr, &a.token, &a.token_file, &a.ns, &a.value, &a.file, &a.out};
    const char **pos[] = {&a.sub, &a.key};
    int rc = ol_cli_options(cli, "kv", argc, argv, opts, slots, pos, 2);
    if (rc)
        return rc;
    static const char *const subs[] = {"stats", "get", "put", "del", NULL};
    if (!a.sub)
        return ol_cli_usage_error(cli, "kv", "say what to do: stats, get, put or del");
    int known = 0;
    for (int s = 0; subs[s]; s++)
        known |= !strcmp(a.sub, subs[s]);
    if (!known) {
        const char *sug = ol_cli_suggest(a.sub, subs);
        return ol_cli_usage_error(cli, "kv", "unknown action '%s'%s%s%s", a.sub,
                                  sug ? " (did you mean '" : "", sug ? sug : "", sug ? "'?)" : "");
    }
    if (!strcmp(a.sub, "stats")) {
        if (a.key)
            return ol_cli_usage_error(cli, "kv", "stats takes no key");
        ol_client *c;
        int ex = ol_kv_connect(cli, &a, 0, &c);
        if (ex != OL_EXIT_OK)
            return ex;
        ex = ol_kv_stats(cli, c);
        ol_client_close(c);
        return ex;
    }
    if (!a.key)
        return ol_cli_usage_error(cli, "kv", "%s needs a KEY", a.sub);
    return ol_kv_op(cli, &a);
}
