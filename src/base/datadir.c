/*
 * datadir.c - see datadir.h.
 */
#include "base/datadir.h"

#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

static const char *ol_env_in(char **envp, const char *name)
{
    size_t n = strlen(name);
    for (; envp && *envp; envp++)
        if (strncmp(*envp, name, n) == 0 && (*envp)[n] == '=')
            return *envp + n + 1;
    return NULL;
}

/* The per-user dir into out: 1, or 0 when neither variable is usable, -1
 * when it would not fit (out is then undefined). */
static int ol_per_user(char **envp, char *out, size_t len)
{
    const char *xdg = ol_env_in(envp, "XDG_DATA_HOME");
    const char *home = ol_env_in(envp, "HOME");
    int n;
    if (xdg && xdg[0] == '/')      /* the spec: a relative one is ignored */
        n = snprintf(out, len, "%s/openlake", xdg);
    else if (home && home[0] == '/')
        n = snprintf(out, len, "%s/.local/share/openlake", home);
    else
        return 0;
    return n < 0 || (size_t)n >= len ? -1 : 1;
}

static bool ol_is_dir(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

int ol_datadir_default(char **envp, char *out, size_t len)
{
    if (!ol_is_dir("data")) {
        int rc = ol_per_user(envp, out, len);
        if (rc != 0) {
            if (rc > 0)
                return 1;
            snprintf(out, len, "./data");
            return -1;
        }
    }
    snprintf(out, len, "./data");
    return 0;
}

int ol_datadir_find(char **envp, const char *name, char *out, size_t len)
{
    char dir[PATH_MAX];
    struct stat st;
    ol_datadir_default(envp, dir, sizeof dir);
    snprintf(out, len, "%s/%s", dir, name);
    if (strcmp(dir, "./data") != 0 || lstat(out, &st) == 0)
        return 0;
    /* ./data without it: a daemon on the per-user dir, started elsewhere */
    if (ol_per_user(envp, dir, sizeof dir) > 0) {
        char alt[PATH_MAX];
        if (snprintf(alt, sizeof alt, "%s/%s", dir, name) < (int)sizeof alt &&
            lstat(alt, &st) == 0) {
            snprintf(out, len, "%s", alt);
            return 1;
        }
    }
    return 0;
}

int ol_datadir_make_parents(const char *path)
{
    char p[PATH_MAX];
    if (snprintf(p, sizeof p, "%s", path) >= (int)sizeof p)
        return -ENAMETOOLONG;
    char *end = strrchr(p, '/');
    if (!end || end == p)
        return 0;
    *end = 0;
    for (char *s = p + 1;; s++) {
        if (*s != '/' && *s)
            continue;
        char c = *s;
        *s = 0;
        if (mkdir(p, 0700) < 0 && errno != EEXIST)
            return -errno;
        if (!c)
            return 0;
        *s = c;
    }
}
