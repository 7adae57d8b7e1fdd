/*
 * cmd_version.c - `openlake version`: what this binary is and what the
 * kernel under it can do.
 *
 * Owns: the version record: OL_VERSION, OL_GIT_COMMIT and OL_BUILD_FLAGS
 * (strings the Makefile passes with -D), the compiler (__VERSION__), UCX
 * (OL_HAVE_UCX defined by the Makefile when pkg-config finds ucx), and the
 * io_uring features from rt/probe.h.
 *
 * Must not: fail because io_uring is unavailable; that is reported, with
 * the reason, and the command still succeeds.
 */
#include "cli/cli.h"
#include "base/assert.h"
#include "cli/output.h"
#include "rt/probe.h"

#include <stdio.h>
#include <string.h>

#ifndef OL_VERSION
#error "OL_VERSION must be defined by the build (see Makefile)"
#endif
#ifndef OL_GIT_COMMIT
#error "OL_GIT_COMMIT must be defined by the build (see Makefile)"
#endif
#ifndef OL_BUILD_FLAGS
#error "OL_BUILD_FLAGS must be defined by the build (see Makefile)"
#endif

/* clang's __VERSION__ already names it ("Debian Clang 14.0.6"); gcc's is
 * only the number. */
#if defined(__clang__)
#define OL_COMPILER __VERSION__
#elif defined(__GNUC__)
#define OL_COMPILER "gcc " __VERSION__
#else
#define OL_COMPILER __VERSION__
#endif

#ifdef OL_HAVE_UCX
#define OL_UCX true
#else
#define OL_UCX false
#endif

/*
 * Appends the probe's human "name value" lines to t as rows: "yes"/"no"
 * become booleans (so they are coloured), anything else stays text.
 * Modifies text in place.
 */
static void ol_version_feature_rows(ol_table *t, char *text)
{
    char *save = NULL;
    for (char *line = strtok_r(text, "\n", &save); line;
         line = strtok_r(NULL, "\n", &save)) {
        char *value = strchr(line, ' ');
        if (value) {
            *value++ = '\0';
            value += strspn(value, " ");
        }
        ol_table_row(t);
        ol_table_str(t, line);
        if (!value)
            ol_table_null(t);
        else if (strcmp(value, "yes") == 0 || strcmp(value, "no") == 0)
            ol_table_bool(t, value[0] == 'y');
        else
            ol_table_str(t, value);
    }
}

int ol_cmd_version(const struct ol_cli *cli, int argc, char **argv)
{
    struct ol_uring_features f;
    char feat[OL_URING_FEATURES_FMT_MAX];
    int json = (cli->out & OL_OUT_JSON) != 0;

    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--") == 0)
            continue;
        if (argv[i][0] == '-' && argv[i][1] != '\0')
            return ol_cli_bad_option(cli, "version", argv[i], NULL);
        return ol_cli_usage_error(cli, "version", "unexpected argument '%s'", argv[i]);
    }

    /* A negative return only means io_uring is unavailable; f says why. */
    (void)ol_uring_probe(&f);
    int n = ol_uring_features_format(&f, feat, sizeof feat, json);
    OL_ASSERT(n >= 0); /* OL_URING_FEATURES_FMT_MAX always suffices */
    (void)n;

    if (json) {
        struct ol_json j;
        ol_json_init(&j, stdout);
        ol_json_object_begin(&j);
        ol_json_key(&j, "version");
        ol_json_str(&j, OL_VERSION);
        ol_json_key(&j, "commit");
        ol_json_str(&j, OL_GIT_COMMIT);
        ol_json_key(&j, "build_flags");
        ol_json_str(&j, OL_BUILD_FLAGS);
        ol_json_key(&j, "compiler");
        ol_json_str(&j, OL_COMPILER);
        ol_json_key(&j, "ucx");
        ol_json_bool(&j, OL_UCX);
        ol_json_key(&j, "io_uring");
        ol_json_raw(&j, feat);
        ol_json_object_end(&j);
        return OL_EXIT_OK;
    }

    static const struct ol_col cols[] = {
        { "name", "NAME", OL_ALIGN_LEFT },
        { "value", "VALUE", OL_ALIGN_LEFT },
    };
    ol_table *t = ol_table_create(cols, 2);
    ol_table_row(t);
    ol_table_str(t, "version");
    ol_table_str(t, OL_VERSION);
    ol_table_row(t);
    ol_table_str(t, "commit");
    ol_table_str(t, OL_GIT_COMMIT);
    ol_table_row(t);
    ol_table_str(t, "build_flags");
    ol_table_str(t, OL_BUILD_FLAGS[0] ? OL_BUILD_FLAGS : "(none)");
    ol_table_row(t);
    ol_table_str(t, "compiler");
    ol_table_str(t, OL_COMPILER);
    ol_table_row(t);
    ol_table_str(t, "ucx");
    ol_table_bool(t, OL_UCX);
    ol_table_print(t, stdout, cli->out | OL_OUT_NO_HEADER);
    ol_table_destroy(t);

    printf("%sio_uring:%s\n", ol_color(cli->out, OL_BOLD), ol_color(cli->out, OL_RESET));
    t = ol_table_create(cols, 2);
    ol_table_set_indent(t, 2);
    ol_version_feature_rows(t, feat);
    ol_table_print(t, stdout, cli->out | OL_OUT_NO_HEADER);
    ol_table_destroy(t);
    return OL_EXIT_OK;
}
