/*
 * datadir.c - see datadir.h.
 */
#include "base/datadir.h"

#include <errno.h>
#include <limits.h>
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

int ol_datadir_default(char **envp, char *out, size_t len)
{
    struct stat st;
    snprintf(out, len, "./data");
    if (stat("data", &st) == 0 && S_ISDIR(st.st_mode))
        return 0;
    const char *xdg = ol_env_in(envp, "XDG_DATA_HOME");
    const char *home = ol_env_in(envp, "HOME");
    int n;
    if (xdg && xdg[0] == '/')      /* the spec: a relative one is ignored */
        n = snprintf(out, len, "%s/openlake", xdg);
    else if (home && home[0] == '/')
        n = snprintf(out, len, "%s/.local/share/openlake", home);
    else
        return 0;
    if (n < 0 || (size_t)n >= len) {
        snprintf(out, len, "./data");
        return -1;
    }
    return 1;
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
