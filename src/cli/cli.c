/*
 * cli.c - messages and typo suggestions shared by every command (see cli.h).
 *
 * Owns: the wording of usage errors and failures, and the suggestion rule.
 * Must not: exit (handlers return a status and main() exits with it).
 */
#include "cli/cli.h"
#include "cli/output.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* Flags main.c accepts anywhere; also suggestion candidates for every
 * command's unknown options. */
static const char *const ol_cli_global_flags[] = {
    "--json", "--no-color", "--help", NULL,
};

/* Longest word compared for suggestions; longer input gets none. */
#define OL_SUGGEST_MAX 64

/* Edit distance between a and b counting insertions, deletions,
 * substitutions and adjacent transpositions (optimal string alignment). */
static size_t ol_cli_distance(const char *a, size_t la, const char *b, size_t lb)
{
    size_t d[OL_SUGGEST_MAX + 1][OL_SUGGEST_MAX + 1];
    for (size_t i = 0; i <= la; i++)
        d[i][0] = i;
    for (size_t j = 0; j <= lb; j++)
        d[0][j] = j;
    for (size_t i = 1; i <= la; i++) {
        for (size_t j = 1; j <= lb; j++) {
            size_t cost = a[i - 1] != b[j - 1];
            size_t v = d[i - 1][j - 1] + cost;
            if (d[i - 1][j] + 1 < v)
                v = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < v)
                v = d[i][j - 1] + 1;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
                d[i - 2][j - 2] + 1 < v)
                v = d[i - 2][j - 2] + 1;
            d[i][j] = v;
        }
    }
    return d[la][lb];
}

const char *ol_cli_suggest(const char *word, const char *const *cands)
{
    size_t lw = strlen(word), best_d = (size_t)-1;
    const char *best = NULL;
    if (lw == 0 || lw > OL_SUGGEST_MAX || !cands)
        return NULL;
    /* A typo is at most 2 edits, and at most a third of the word, so that
     * "x" does not suggest everything with one letter. */
    size_t limit = lw >= 6 ? 2 : lw >= 3 ? 1 : 0;
    for (size_t i = 0; cands[i]; i++) {
        size_t lc = strlen(cands[i]);
        if (lc > OL_SUGGEST_MAX)
            continue;
        size_t d = ol_cli_distance(word, lw, cands[i], lc);
        /* An unambiguous-looking prefix ("ver" for "version") counts as
         * close, but never beats a real near-miss. */
        if (d > limit && lw >= 3 && lc > lw && strncmp(word, cands[i], lw) == 0)
            d = limit + 1;
        else if (d > limit)
            continue;
        if (d < best_d) {
            best_d = d;
            best = cands[i];
        }
    }
    return best;
}

static void ol_cli_prefix(const struct ol_cli *cli, const char *cmd)
{
    fprintf(stderr, "%sopenlake%s%s:%s ", ol_color(cli->err, OL_BOLD),
            cmd ? " " : "", cmd ? cmd : "", ol_color(cli->err, OL_RESET));
}

/* Writes the shared tail of a usage error and returns OL_EXIT_USAGE. */
static int ol_cli_usage_tail(const char *cmd)
{
    fprintf(stderr, ". See 'openlake%s%s --help'.\n", cmd ? " " : "", cmd ? cmd : "");
    return OL_EXIT_USAGE;
}

int ol_cli_usage_error(const struct ol_cli *cli, const char *cmd, const char *fmt, ...)
{
    va_list ap;
    ol_cli_prefix(cli, cmd);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    return ol_cli_usage_tail(cmd);
}

int ol_cli_options(const struct ol_cli *cli, const char *cmd, int argc, char **argv,
                   const char *const *opts, const char **const *slots, const char **const *pos,
                   int npos)
{
    int npos_set = 0;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (arg[0] == '-' && arg[1] == '-') {
            int found = 0;
            for (int o = 0; opts[o]; o++) {
                size_t ol = strlen(opts[o]);
                if (!strncmp(arg, opts[o], ol) && (arg[ol] == 0 || arg[ol] == '=')) {
                    if (arg[ol] == '=')
                        *slots[o] = arg + ol + 1;
                    else if (i + 1 < argc)
                        *slots[o] = argv[++i];
                    else
                        return ol_cli_usage_error(cli, cmd, "%s needs a value", opts[o]);
                    found = 1;
                    break;
                }
            }
            if (!found)
                return ol_cli_bad_option(cli, cmd, arg, opts);
        } else if (npos_set < npos) {
            *pos[npos_set++] = arg;
        } else {
            return ol_cli_usage_error(cli, cmd, "unexpected argument '%s'", arg);
        }
    }
    return 0;
}

int ol_cli_bad_option(const struct ol_cli *cli, const char *cmd, const char *opt,
                      const char *const *known)
{
    const char *s = ol_cli_suggest(opt, known);
    const char *g = ol_cli_suggest(opt, ol_cli_global_flags);
    /* Prefer the command's own option unless the global one is closer. */
    if (!s || (g && ol_cli_distance(opt, strlen(opt), g, strlen(g)) <
                    ol_cli_distance(opt, strlen(opt), s, strlen(s))))
        s = g;
    ol_cli_prefix(cli, cmd);
    fprintf(stderr, "unknown option '%s'", opt);
    if (s)
        fprintf(stderr, " (did you mean '%s'?)", s);
    return ol_cli_usage_tail(cmd);
}

void ol_cli_warn_secret_flag(const struct ol_cli *cli, const char *cmd, const char *flag,
                             const char *instead)
{
    ol_cli_prefix(cli, cmd);
    fprintf(stderr, "warning: %s on the command line is readable by any local user in "
            "/proc/PID/cmdline; use %s instead\n", flag, instead);
}

int ol_cli_fail(const struct ol_cli *cli, const char *cmd, const char *fmt, ...)
{
    va_list ap;
    ol_cli_prefix(cli, cmd);
    fputs(ol_color(cli->err, OL_RED), stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "%s\n", ol_color(cli->err, OL_RESET));
    return OL_EXIT_FAIL;
}
