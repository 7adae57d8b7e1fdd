/*
 * main.c - `openlake`, the operator CLI: global flags, the command table,
 * `help`, and exit codes.
 *
 *   openlake [--json] [--no-color] <command> [<args>]
 *
 * Owns: the command table (one row per command; the handlers live in
 * cmd_NAME.c), argument splitting, `--help` for every command, and turning
 * a write error on stdout into exit status 1. Global flags are accepted
 * before or after the command name, up to a "--".
 *
 * Must not: know what any command other than `help` does.
 */
#include "cli/cli.h"
#include "cli/output.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int ol_cmd_help(const struct ol_cli *cli, int argc, char **argv);

static const struct ol_cli_cmd ol_commands[] = {
    {
        "help",
        "Show the commands, or how to use one",
        "usage: openlake help [<command>]\n"
        "\n"
        "Without a command, lists every command with a one-line summary (an\n"
        "array of {name, summary} objects with --json). With one, prints its\n"
        "usage, the same as 'openlake <command> --help'.\n",
        ol_cmd_help,
    },
    {
        "version",
        "Print the version, build details and this kernel's io_uring support",
        "usage: openlake version [--json]\n"
        "\n"
        "Prints the OpenLake version, the git commit it was built from, the\n"
        "build flags, the compiler, whether UCX support was compiled in, and\n"
        "what the running kernel's io_uring supports. The io_uring answers are\n"
        "found by trying each feature (setup flags, opcodes, buffer rings,\n"
        "multishot accept/recv on a private socket), not from headers.\n"
        "\n"
        "With --json, prints one object with the keys version, commit,\n"
        "build_flags, compiler, ucx and io_uring (an object of feature names).\n",
        ol_cmd_version,
    },
    {
        "kv",
        "Look at and change the KV cache: stats, get, put, del",
        "usage: openlake kv stats [options]\n"
        "       openlake kv get KEY [--out FILE] [options]\n"
        "       openlake kv put KEY [--value TEXT | --file FILE | < FILE] [options]\n"
        "       openlake kv del KEY [options]\n"
        "\n"
        "Talks to openlaked's KV service like any client (the C client library):\n"
        "stats sums the counters of every shard (--json: one object); get writes\n"
        "the value to stdout or FILE; put stores one value (its size is the value\n"
        "size class of the session); del deletes one key.\n"
        "\n"
        "Options:\n"
        "  --addr ADDR        the Unix socket or host:port; default kv.sock in\n"
        "                     ./data if it is there, else in $XDG_DATA_HOME/openlake\n"
        "                     (~/.local/share/openlake): where openlaked puts it\n"
        "  --token-file FILE  read the KV token from FILE (also OPENLAKE_KV_TOKEN_FILE;\n"
        "                     default: kv.token beside the socket)\n"
        "  --token TOKEN      the token itself (also OPENLAKE_KV_TOKEN); any local\n"
        "                     user can read it in ps: prefer --token-file\n"
        "  --ns NAMESPACE     the namespace (default \"default\")\n"
        "\n"
        "Exit status: 0 done, 1 failed (e.g. NOT_FOUND), 2 usage error.\n",
        ol_cmd_kv,
    },
    {
        "bench",
        "Load a service and report its speed: bench kv | client",
        "usage: openlake bench kv [options]\n"
        "       openlake bench client --target URL --op read|write [options]\n"
        "\n"
        "kv: puts batches of new values, gets them back (checking the bytes), then\n"
        "looks them up, a third of --seconds each, through the C client (the\n"
        "shared slab over the Unix socket, values inline over TCP). Reports\n"
        "keys/s, GB/s and per-batch latency p50/p99/p999 for each (--json: an\n"
        "array of objects); a progress bar on a terminal. Over the Unix socket\n"
        "each also says whether the slab was cold or warm when it began: the\n"
        "share of it the kernel had pages for (a put onto a page without one\n"
        "waits for the kernel to allocate it; JSON: slab, slab_allocated_frac).\n"
        "\n"
        "Options of kv:\n"
        "  --addr ADDR          the Unix socket or host:port; default kv.sock in ./data\n"
        "                       if it is there, else in $XDG_DATA_HOME/openlake\n"
        "  --token-file FILE    the KV token's file (also OPENLAKE_KV_TOKEN_FILE;\n"
        "                       default: kv.token beside the socket)\n"
        "  --token TOKEN        the token itself (also OPENLAKE_KV_TOKEN); shows in ps\n"
        "  --ns NAMESPACE       default \"bench\"\n"
        "  --value-size BYTES   default 262144 (at most 16 MiB)\n"
        "  --batch KEYS         default 32 (at most 4096)\n"
        "  --seconds S          default 6\n"
        "\n"
        "client: the load test to run against any node, or the whole pool, from any\n"
        "host: --concurrency workers, each with a connection of its own, write new\n"
        "values (--op write) or read back a set each wrote first (--op read, every\n"
        "byte checked) for --seconds; reports ops/s, GB/s, latency p50/p99/p999 per\n"
        "operation and errors (--json: one object). Exit 1 when any operation failed.\n"
        "\n"
        "Options of client:\n"
        "  --target URL         kv://HOST:PORT (KV over TCP), kv:PATH (its Unix socket:\n"
        "                       the shared slab), ucx://HOST:PORT (KV over UCX: its\n"
        "                       kv_ucx_addr), http://HOST:PORT (S3); or a comma-\n"
        "                       separated list of one kind (up to 64: a pool's nodes),\n"
        "                       worker i on target i mod n\n"
        "  --op read|write\n"
        "  --size BYTES         value or object size, default 262144 (at most 16 MiB)\n"
        "  --concurrency N      workers, default 4 (at most 256; at least one a target)\n"
        "  --seconds S          default 5\n"
        "  --keys N             the set each worker reads, default 16\n"
        "  KV: --token-file FILE, --token TOKEN, --ns NAMESPACE (default bench-client)\n"
        "  S3: --bucket NAME (default openlake-bench, made when missing), and the\n"
        "      credential: --access-key K --secret-key-file F, or --credentials FILE\n"
        "      (the daemon's s3.credentials), or AWS_ACCESS_KEY_ID /\n"
        "      AWS_SECRET_ACCESS_KEY; --region R\n",
        ol_cmd_bench,
    },
    {
        "heal",
        "Heal the objects of a bucket (or all) and report what was repaired",
        "usage: openlake heal [BUCKET[/PREFIX]] [options]\n"
        "\n"
        "Asks openlaked to walk the objects of BUCKET under PREFIX (every bucket\n"
        "without one), verify every shard block and metadata file on every drive,\n"
        "and rewrite what is missing, stale or corrupt from the good shards. Prints\n"
        "progress on stderr while it runs and a summary on stdout (--json: one\n"
        "object: walk, bucket, prefix, scanned, healed, failed, bytes_written).\n"
        "One walk runs at a time. The request is signed (AWS SigV4) with an S3\n"
        "credential of the daemon.\n"
        "\n"
        "Options:\n"
        "  --endpoint URL       the daemon's S3 address (default http://127.0.0.1:9000,\n"
        "                       also OPENLAKE_ENDPOINT)\n"
        "  --access-key KEY     with --secret-key-file; else AWS_ACCESS_KEY_ID and\n"
        "  --secret-key-file F  AWS_SECRET_ACCESS_KEY (or OPENLAKE_ACCESS_KEY with\n"
        "                       OPENLAKE_SECRET_KEY_FILE or OPENLAKE_SECRET_KEY)\n"
        "  --secret-key SECRET  the secret itself; any local user can read it in ps\n"
        "  --credentials FILE   else the daemon's generated credentials file\n"
        "                       (s3.credentials in ./data, else in the per-user\n"
        "                       $XDG_DATA_HOME/openlake or ~/.local/share/openlake)\n"
        "  --region REGION      default us-east-1 (the daemon's region)\n"
        "\n"
        "Exit status: 0 every object healthy or healed, 1 an object could not be\n"
        "healed (or the daemon refused), 2 usage error.\n",
        ol_cmd_heal,
    },
    {
        "cluster",
        "The cluster as etcd knows it: cluster status | topology [--probe] | drain | undrain",
        "usage: openlake cluster status --config FILE\n"
        "       openlake cluster status --etcd URL[,URL...] --cluster NAME [options]\n"
        "       openlake cluster topology (--config FILE | --etcd URL --cluster NAME)\n"
        "                [--probe [--mib N] [credential options]]\n"
        "       openlake cluster drain NODE (--config FILE | --etcd URL --cluster NAME)\n"
        "                [--wait-ms MS]\n"
        "       openlake cluster undrain NODE (--config FILE | --etcd URL ...) [--wait-ms MS]\n"
        "\n"
        "status: reads the cluster's node records from etcd (each node keeps its own\n"
        "under a lease: a node dead or cut off for cluster.lease_ttl_secs is gone) and\n"
        "asks every node's /_openlake/health/ready. Prints etcd's health, then a\n"
        "table of the nodes: id, state (starting, active, draining, drained,\n"
        "leaving), ready, version,\n"
        "uptime, host, S3 and KV addresses, KV slab, drives (--json: one object).\n"
        "\n"
        "topology: the nodes, their node RPC addresses, and each KV member's\n"
        "capacity and share of the KV keys (weighted rendezvous placement:\n"
        "docs/cluster.md). With --probe, each node in turn measures the node RPC to\n"
        "every other (its signed /_openlake/cluster/probe): the median round trip\n"
        "of 16 calls and the GB/s each way over N MiB (--mib, default 64), printed\n"
        "as two matrices (--json: every number).\n"
        "\n"
        "drain NODE: asks node NODE (its id) to drain: it takes no new KV keys (every\n"
        "node's placement leaves it out once its record says draining), its KV pool\n"
        "work in flight finishes, and its record says drained: it can stop. The ask\n"
        "is kept in etcd (no lease): a drained node that restarts stays drained.\n"
        "Waits until the record says drained, at most --wait-ms (default 30000; 0:\n"
        "do not wait). undrain NODE: lifts it (the node is active again); a node\n"
        "not drained is left as it is (exit 0).\n"
        "\n"
        "Options:\n"
        "  --config FILE            a node's openlaked configuration: its [cluster]\n"
        "                           section says where etcd is and how to log in\n"
        "                           (and --probe signs with its first credential)\n"
        "  --etcd URL[,URL...]      etcd's client URLs, with --cluster NAME\n"
        "  --etcd-user USER         etcd auth: the user, with\n"
        "  --etcd-password-file F   the file holding its password\n"
        "  --etcd-ca F, --etcd-cert F, --etcd-key F   TLS for https:// URLs\n"
        "  --timeout-ms MS          each etcd request (default 3000)\n"
        "  --access-key K --secret-key-file F, or --credentials FILE, --region R\n"
        "                           the S3 credential --probe signs with (else\n"
        "                           AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY)\n"
        "\n"
        "  --wait-ms MS             drain, undrain: how long to wait (default 30000)\n"
        "\n"
        "Exit status: status: 0 every etcd endpoint healthy and every node ready and\n"
        "active, draining or drained, 1 anything degraded (or etcd unreadable);\n"
        "topology: 0, or 1 when a record is unreadable or a probed pair failed;\n"
        "drain, undrain: 0 done, 1 no such node running (drain), not done within\n"
        "--wait-ms, or etcd failed; 2 usage error.\n",
        ol_cmd_cluster,
    },
    {
        "node",
        "One node of a cluster: node info [NODE]",
        "usage: openlake node info [NODE] --config FILE\n"
        "       openlake node info NODE --etcd URL[,URL...] --cluster NAME [options]\n"
        "\n"
        "info: node NODE's record in etcd (state, whether it is asked to drain,\n"
        "version, host and pid, uptime, S3, KV and node RPC addresses, KV slab and\n"
        "disk capacity, drives, data dir, instance) and whether its\n"
        "/_openlake/health/ready answers (--json: one object). With --config and no\n"
        "NODE: the node that file configures (its self_id).\n"
        "\n"
        "Options: --config FILE, or --etcd URL[,URL...] --cluster NAME with\n"
        "--etcd-user, --etcd-password-file, --etcd-ca, --etcd-cert, --etcd-key and\n"
        "--timeout-ms, as for openlake cluster.\n"
        "\n"
        "Exit status: 0 the record was read, 1 no such node running or etcd\n"
        "unreadable, 2 usage error.\n",
        ol_cmd_node,
    },
    {
        "disk",
        "A node's drives and KV disk tier: disk info [NODE]",
        "usage: openlake disk info [NODE] --config FILE [credential options]\n"
        "       openlake disk info NODE --etcd URL[,URL...] --cluster NAME [options]\n"
        "       openlake disk info --addr HOST:PORT [credential options]\n"
        "\n"
        "info: asks the node (its signed GET /_openlake/disks, on its S3 listener)\n"
        "for its drives: each data dir's index, erasure set, state (online, offline,\n"
        "adopted at start: a blank drive the healer fills, no store: mode kv) and\n"
        "its filesystem's size and space available; and its KV disk tier: capacity,\n"
        "dirs, and the shard files there with their length and the space they\n"
        "take (--json: the node's answer). The node is found by its record in etcd\n"
        "(NODE; with --config and no NODE, the file's own node), or, for a single\n"
        "host, at the file's s3_addr or at --addr.\n"
        "\n"
        "Options:\n"
        "  --config FILE, --etcd URL --cluster NAME, and the etcd options: as for\n"
        "                           openlake cluster\n"
        "  --addr HOST:PORT         the node's S3 listener, asked directly\n"
        "  --access-key K --secret-key-file F, or --credentials FILE, --region R\n"
        "                           the S3 credential to sign with (with --config:\n"
        "                           the file's first; else AWS_ACCESS_KEY_ID /\n"
        "                           AWS_SECRET_ACCESS_KEY, else the daemon's\n"
        "                           generated credentials file)\n"
        "\n"
        "Exit status: 0 every drive online and measured, 1 a drive offline or\n"
        "unreadable, the node unknown, unreachable or refusing, 2 usage error.\n",
        ol_cmd_disk,
    },
};
#define OL_NCOMMANDS (sizeof ol_commands / sizeof ol_commands[0])

static const char ol_main_usage[] =
    "usage: openlake [--json] [--no-color] <command> [<args>]\n"
    "\n"
    "The OpenLake operator CLI.\n";

static const char ol_main_flags[] =
    "Global flags (before or after the command):\n"
    "  --json       print machine-readable JSON instead of tables\n"
    "  --no-color   never colour the output (also: NO_COLOR=1, or not a terminal)\n"
    "  -h, --help   show this help; 'openlake <command> --help' for one command\n"
    "  --version    the same as 'openlake version'\n"
    "\n"
    "Exit status: 0 success, 1 the operation failed, 2 usage error.\n";

static const struct ol_cli_cmd *ol_cli_find(const char *name)
{
    for (size_t i = 0; i < OL_NCOMMANDS; i++)
        if (strcmp(ol_commands[i].name, name) == 0)
            return &ol_commands[i];
    return NULL;
}

static int ol_cli_unknown_command(const struct ol_cli *cli, const char *name)
{
    const char *names[OL_NCOMMANDS + 1];
    for (size_t i = 0; i < OL_NCOMMANDS; i++)
        names[i] = ol_commands[i].name;
    names[OL_NCOMMANDS] = NULL;
    const char *s = ol_cli_suggest(name, names);
    if (s)
        return ol_cli_usage_error(cli, NULL,
                                  "unknown command '%s' (did you mean '%s'?)", name, s);
    return ol_cli_usage_error(cli, NULL, "unknown command '%s'", name);
}

/* The command list: a table for people, an array of objects with --json. */
static void ol_cli_print_help(FILE *fp, unsigned out)
{
    static const struct ol_col cols[] = {
        { "name", "COMMAND", OL_ALIGN_LEFT },
        { "summary", "SUMMARY", OL_ALIGN_LEFT },
    };
    ol_table *t = ol_table_create(cols, 2);
    for (size_t i = 0; i < OL_NCOMMANDS; i++) {
        ol_table_row(t);
        ol_table_str(t, ol_commands[i].name);
        ol_table_str(t, ol_commands[i].summary);
    }
    if (out & OL_OUT_JSON) {
        ol_table_print(t, fp, out);
    } else {
        fprintf(fp, "%s\n%sCommands:%s\n", ol_main_usage,
                ol_color(out, OL_BOLD), ol_color(out, OL_RESET));
        ol_table_set_indent(t, 2);
        ol_table_print(t, fp, out | OL_OUT_NO_HEADER);
        fprintf(fp, "\n%s", ol_main_flags);
    }
    ol_table_destroy(t);
}

static int ol_cmd_help(const struct ol_cli *cli, int argc, char **argv)
{
    if (argc > 2)
        return ol_cli_usage_error(cli, "help", "expected at most one command, got %d",
                                  argc - 1);
    if (argc == 2 && argv[1][0] == '-' && argv[1][1])
        return ol_cli_bad_option(cli, "help", argv[1], NULL);
    if (argc == 1) {
        ol_cli_print_help(stdout, cli->out);
        return OL_EXIT_OK;
    }
    const struct ol_cli_cmd *cmd = ol_cli_find(argv[1]);
    if (!cmd)
        return ol_cli_unknown_command(cli, argv[1]);
    if (cli->out & OL_OUT_JSON) {
        struct ol_json j;
        ol_json_init(&j, stdout);
        ol_json_object_begin(&j);
        ol_json_key(&j, "name");
        ol_json_str(&j, cmd->name);
        ol_json_key(&j, "summary");
        ol_json_str(&j, cmd->summary);
        ol_json_key(&j, "usage");
        ol_json_str(&j, cmd->usage);
        ol_json_object_end(&j);
    } else {
        fputs(cmd->usage, stdout);
    }
    return OL_EXIT_OK;
}

/* Whether output to fd may be coloured: a terminal, not TERM=dumb, no
 * NO_COLOR (https://no-color.org), no --no-color. */
static bool ol_cli_color_ok(int fd, bool no_color)
{
    const char *nc = getenv("NO_COLOR"), *term = getenv("TERM");
    if (no_color || (nc && nc[0]) || (term && strcmp(term, "dumb") == 0))
        return false;
    return isatty(fd) == 1;
}

/* Flushes stdout and turns a write error into a failure status. */
static int ol_cli_finish(const struct ol_cli *cli, int rc)
{
    if (fflush(stdout) != 0 || ferror(stdout)) {
        int e = errno;
        ol_cli_fail(cli, NULL, "writing output: %s", strerror(e ? e : EIO));
        return rc == OL_EXIT_OK ? OL_EXIT_FAIL : rc;
    }
    return rc;
}

int main(int argc, char **argv)
{
    struct ol_cli cli = { 0 };
    bool json = false, no_color = false, help = false, dashdash = false;
    const char *bad_option = NULL;
    const struct ol_cli_cmd *cmd = NULL;
    const char *cmd_name = NULL;
    /* The command's argv: its name, then every argument that is not a
     * global flag, in order. */
    char **cargv = calloc((size_t)argc + 1, sizeof *cargv);
    int cargc = 1, rc;
    if (!cargv) {
        fputs("openlake: out of memory\n", stderr);
        return OL_EXIT_FAIL;
    }

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        bool flag = !dashdash && a[0] == '-' && a[1] != '\0';
        if (flag && strcmp(a, "--json") == 0) {
            json = true;
        } else if (flag && strcmp(a, "--no-color") == 0) {
            no_color = true;
        } else if (flag && (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0)) {
            help = true;
        } else if (flag && !cmd_name && strcmp(a, "--version") == 0) {
            cmd_name = "version";
        } else if (!cmd_name && strcmp(a, "--") == 0 && !dashdash) {
            dashdash = true;
        } else if (!cmd_name && flag) {
            if (!bad_option)
                bad_option = a;
        } else if (!cmd_name) {
            cmd_name = a;
        } else {
            if (strcmp(a, "--") == 0)
                dashdash = true;
            cargv[cargc++] = argv[i];
        }
    }

    cli.out = (json ? OL_OUT_JSON : 0) |
              (ol_cli_color_ok(STDOUT_FILENO, no_color) ? OL_OUT_COLOR : 0);
    cli.err = ol_cli_color_ok(STDERR_FILENO, no_color) ? OL_OUT_COLOR : 0;

    if (bad_option) {
        rc = ol_cli_bad_option(&cli, NULL, bad_option, NULL);
    } else if (!cmd_name) {
        if (help) {
            ol_cli_print_help(stdout, cli.out);
            rc = OL_EXIT_OK;
        } else {
            ol_cli_print_help(stderr, cli.err);
            rc = ol_cli_usage_error(&cli, NULL, "no command given");
        }
    } else if (!(cmd = ol_cli_find(cmd_name))) {
        rc = ol_cli_unknown_command(&cli, cmd_name);
    } else if (help) {
        fputs(cmd->usage, stdout);
        rc = OL_EXIT_OK;
    } else {
        cargv[0] = (char *)cmd->name;
        rc = cmd->run(&cli, cargc, cargv);
    }
    rc = ol_cli_finish(&cli, rc);
    free(cargv);
    return rc;
}
