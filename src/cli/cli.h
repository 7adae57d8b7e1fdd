/*
 * cli.h - what every `openlake` command shares: the command descriptor, the
 * global options, exit codes, and the error/usage messages.
 *
 * Owns: the contract between main.c (which parses global flags, finds the
 * command, handles `--help` for every command) and the cmd_*.c files (one
 * per command). To add a command: write src/cli/cmd_NAME.c with a handler,
 * declare it at the bottom of this file, add one row to the table in main.c.
 *
 * Must not: print anything itself except through the helpers below and
 * cli/output.h; every message goes to stderr, results to stdout.
 */
#ifndef OL_CLI_CLI_H
#define OL_CLI_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cluster/member.h"

/* Exit statuses of the openlake binary (documented in `openlake --help`). */
#define OL_EXIT_OK    0 /* the operation succeeded */
#define OL_EXIT_FAIL  1 /* the operation was attempted and failed */
#define OL_EXIT_USAGE 2 /* the command line was wrong; nothing was done */

/* Global options, fixed before a handler runs. */
struct ol_cli {
    unsigned out;  /* OL_OUT_* bits for stdout: JSON (--json), COLOR (a
                      terminal, no --no-color, no NO_COLOR) */
    unsigned err;  /* OL_OUT_COLOR when stderr may be coloured, else 0 */
};

/*
 * A command handler. argv[0] is the command name, argv[1..argc-1] its
 * arguments with the global flags (--json, --no-color) already removed and
 * --help already handled; argv[argc] is NULL. Returns an OL_EXIT_* status.
 */
typedef int (*ol_cli_fn)(const struct ol_cli *cli, int argc, char **argv);

/* One row of the command table in main.c. */
struct ol_cli_cmd {
    const char *name;     /* as typed: "version" */
    const char *summary;  /* one line for `openlake --help`, no period */
    const char *usage;    /* full text for `openlake NAME --help`, starting
                             "usage: openlake NAME ..." and ending in '\n' */
    ol_cli_fn run;
};

/*
 * The candidate from the NULL-terminated list `cands` closest to `word`
 * (edit distance counting adjacent transpositions as one edit; failing
 * that, a candidate that word is a prefix of), if close enough to be a
 * likely typo; otherwise NULL. Returns a pointer into cands.
 */
const char *ol_cli_suggest(const char *word, const char *const *cands);

/*
 * Prints a usage error to stderr and returns OL_EXIT_USAGE:
 *   openlake[ CMD]: MESSAGE. See 'openlake[ CMD] --help'.
 * cmd may be NULL (an error before a command was chosen). MESSAGE is
 * printf-formatted and should say what was wrong, quoting the input.
 */
int ol_cli_usage_error(const struct ol_cli *cli, const char *cmd,
                       const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/*
 * Usage error for an option `opt` the command does not know. Suggests the
 * closest of `known` (NULL-terminated, may be NULL) and the global flags.
 * Returns OL_EXIT_USAGE.
 */
int ol_cli_bad_option(const struct ol_cli *cli, const char *cmd,
                      const char *opt, const char *const *known);

/*
 * Parses a command's arguments: each of opts[] (NULL-terminated, "--name")
 * takes a value ("--name VALUE" or "--name=VALUE") stored in *slots[i];
 * other words fill *pos[0..npos) in order. Returns 0, or the usage error's
 * OL_EXIT_USAGE (an unknown option, a missing value, too many words).
 */
int ol_cli_options(const struct ol_cli *cli, const char *cmd, int argc, char **argv,
                   const char *const *opts, const char **const *slots, const char **const *pos,
                   int npos);

/*
 * Prints "openlake CMD: MESSAGE" to stderr for an operation that failed
 * and returns OL_EXIT_FAIL.
 */
int ol_cli_fail(const struct ol_cli *cli, const char *cmd, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/*
 * Warns on stderr that a secret came as the option `flag`, which every
 * local user can read (ps, /proc/PID/cmdline):
 *   openlake CMD: warning: FLAG on the command line is readable by any
 *   local user in /proc/PID/cmdline; use INSTEAD instead
 */
void ol_cli_warn_secret_flag(const struct ol_cli *cli, const char *cmd, const char *flag,
                             const char *instead);

struct ol_client_opts;

/*
 * The KV token of `openlake kv` and `openlake bench`, into o->token or
 * o->token_file (o->addr set): --token or --token-file (not both; --token
 * warns), else OPENLAKE_KV_TOKEN or OPENLAKE_KV_TOKEN_FILE (not both),
 * else kv.token beside a Unix socket address (written into tokpath[4096]).
 * Returns 0, or OL_EXIT_USAGE after printing the usage error.
 */
int ol_cli_kv_token(const struct ol_cli *cli, const char *cmd, const char *token,
                    const char *token_file, struct ol_client_opts *o, char *tokpath);

/* The KV socket when --addr is not given: kv.sock in the daemon's default
 * data dir (base/datadir.h: ./data's if there, else the per-user one's).
 * A static buffer. */
const char *ol_cli_default_kv_sock(void);

/* ---- the cluster's records, as `cluster`, `node` and `disk` read them ---- */

/* cmd_cluster.c reads the records from etcd and holds the one parser of
 * those three commands (ol_cl_main); cmd_node.c holds `node info` and
 * `disk info`, which it calls. */
struct ol_etcd;
struct ol_etcd_kv;
struct ol_json;
struct ol_cli_cred;

struct ol_cl_node {
    struct ol_member m;
    int ready;               /* 1 ready, 0 answered not ready, -1 no answer */
    long http;
    char why[160];
    bool kv;                 /* its KV figures were read (from its metrics) */
    uint64_t kv_hits, kv_misses, kv_ram, kv_disk;
};


struct ol_cl_list {
    struct ol_cl_node *v;
    int n, cap;
    char prefix[160];
    int bad;                 /* records this version cannot read */
};


struct ol_cl_exact {
    const char *key;
    bool found;
};

/* The node records under cluster name's prefix into l (l->v realloc'ed:
 * the caller frees it; records this version cannot read counted in
 * l->bad), in id order, and etcd's revision: 0 or -errno with err. */
int ol_cl_read_members(struct ol_etcd *e, const char *name, struct ol_cl_list *l, int64_t *rev,
                       char *err, size_t errlen);
/* Node id's record in l, or NULL. */
const struct ol_cl_node *ol_cl_find_node(const struct ol_cl_list *l, int64_t id);
/* Asks node n's /_openlake/health/ready, and its metrics for the KV
 * figures (2 s each): n->ready, http, why and the kv fields. */
void ol_cl_probe(struct ol_cl_node *n);
/* n's fields as JSON keys into the object j has open. */
void ol_cl_node_json(struct ol_json *j, const struct ol_cl_node *n);
/* Time since started (Unix seconds) as "42s", "5m", "3h", "2d"; "-" when
 * unknown. buf, returned. */
const char *ol_cl_uptime(int64_t started, char *buf, size_t len);
/* An ol_etcd_range_prefix callback: arg (struct ol_cl_exact) found when
 * the exact key is among those listed. */
int ol_cl_find_exact(void *arg, const struct ol_etcd_kv *kv);
/* `cluster`, `node` and `disk` (cmd names the one): their options parsed
 * and checked, etcd opened, the subcommand run. An OL_EXIT_* status. */
int ol_cl_main(const struct ol_cli *cli, const char *cmd, int argc, char **argv);

/* node info: node id's record, drain key and readiness (cmd_node.c). */
int ol_cl_node_info(const struct ol_cli *cli, struct ol_etcd *e, const char *name, int64_t id);
/* disk info of the node whose admin plane is at s3_addr (tls: HTTPS),
 * signed with cred; who names it in messages (cmd_node.c). */
int ol_cl_disk_info(const struct ol_cli *cli, const struct ol_cli_cred *cred, const char *s3_addr,
                    bool tls, const char *who);
/* disk info of node id of cluster name, found by its record (cmd_node.c). */
int ol_cl_node_disks(const struct ol_cli *cli, struct ol_etcd *e, const char *name, int64_t id,
                     const struct ol_cli_cred *cred);

/* ---- commands (one cmd_NAME.c each; `help` lives in main.c) ------------- */

int ol_cmd_version(const struct ol_cli *cli, int argc, char **argv);
int ol_cmd_kv(const struct ol_cli *cli, int argc, char **argv);
int ol_cmd_bench(const struct ol_cli *cli, int argc, char **argv);
int ol_cmd_bench_client(const struct ol_cli *cli, int argc, char **argv);
int ol_cmd_heal(const struct ol_cli *cli, int argc, char **argv);
int ol_cmd_cluster(const struct ol_cli *cli, int argc, char **argv);
int ol_cmd_node(const struct ol_cli *cli, int argc, char **argv);   /* cmd_node.c */
int ol_cmd_disk(const struct ol_cli *cli, int argc, char **argv);   /* cmd_node.c */

#endif
