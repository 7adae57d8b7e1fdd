/*
 * test_datadir.c - base/datadir.h: the default data dir is ./data where
 * that directory is, else $XDG_DATA_HOME/openlake for an absolute
 * XDG_DATA_HOME, else $HOME/.local/share/openlake for an absolute HOME,
 * else ./data; a path that would not fit falls back to ./data (-1); a file
 * named data is not the directory; a client's ol_datadir_find takes
 * ./data's file, else the per-user dir's when ./data lacks it; ol_datadir_make_parents makes every
 * missing parent 0700 and not the last component, and says which mkdir
 * failed.
 */
#include "olt.h"

#include "base/datadir.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

OLT_TEST(datadir_default_rule)
{
    char here[PATH_MAX], out[256];
    OLT_CHECK(getcwd(here, sizeof here) != NULL);
    OLT_CHECK_EQ(chdir(olt_tmpdir()), 0);   /* no ./data here yet */

    char *both[] = {"HOME=/home/u", "XDG_DATA_HOME=/xdg", NULL};
    OLT_CHECK_EQ(ol_datadir_default(both, out, sizeof out), 1);
    OLT_CHECK_STR(out, "/xdg/openlake");
    char *rel[] = {"XDG_DATA_HOME=rel/x", "HOME=/home/u", NULL};   /* relative XDG: ignored */
    OLT_CHECK_EQ(ol_datadir_default(rel, out, sizeof out), 1);
    OLT_CHECK_STR(out, "/home/u/.local/share/openlake");
    char *near[] = {"XDG_DATA_HOMEX=/no", "HOMEDIR=/no", "HOME=/h", NULL};
    OLT_CHECK_EQ(ol_datadir_default(near, out, sizeof out), 1);
    OLT_CHECK_STR(out, "/h/.local/share/openlake");
    char *none[] = {"HOME=", "PATH=/bin", NULL};
    OLT_CHECK_EQ(ol_datadir_default(none, out, sizeof out), 0);
    OLT_CHECK_STR(out, "./data");
    OLT_CHECK_EQ(ol_datadir_default(NULL, out, sizeof out), 0);
    OLT_CHECK_STR(out, "./data");
    char small[16];                           /* "/xdg/openlake" fits, this does not */
    char *longer[] = {"XDG_DATA_HOME=/a/much/longer/path", NULL};
    OLT_CHECK_EQ(ol_datadir_default(longer, small, sizeof small), -1);
    OLT_CHECK_STR(small, "./data");

    int fd = open("data", O_WRONLY | O_CREAT, 0600);   /* a file: not the data dir */
    OLT_CHECK(fd >= 0);
    close(fd);
    OLT_CHECK_EQ(ol_datadir_default(both, out, sizeof out), 1);
    OLT_CHECK_EQ(unlink("data"), 0);
    OLT_CHECK_EQ(mkdir("data", 0700), 0);               /* the directory wins */
    OLT_CHECK_EQ(ol_datadir_default(both, out, sizeof out), 0);
    OLT_CHECK_STR(out, "./data");

    /* A client's find: ./data's file when it is there, else the per-user
     * one's when that is, else the default path (for the error). */
    char xdg[300], env0[320], want[400];
    snprintf(xdg, sizeof xdg, "%s/xdg", olt_tmpdir());
    snprintf(env0, sizeof env0, "XDG_DATA_HOME=%s", xdg);
    char *env[] = {env0, NULL};
    OLT_CHECK_EQ(ol_datadir_find(env, "kv.sock", out, sizeof out), 0);
    OLT_CHECK_STR(out, "./data/kv.sock");
    snprintf(want, sizeof want, "%s/openlake/kv.sock", xdg);
    OLT_CHECK_EQ(ol_datadir_make_parents(want), 0);
    fd = open(want, O_WRONLY | O_CREAT, 0600);
    OLT_CHECK(fd >= 0);
    close(fd);
    OLT_CHECK_EQ(ol_datadir_find(env, "kv.sock", out, sizeof out), 1);
    OLT_CHECK_STR(out, want);
    fd = open("data/kv.sock", O_WRONLY | O_CREAT, 0600);
    OLT_CHECK(fd >= 0);
    close(fd);
    OLT_CHECK_EQ(ol_datadir_find(env, "kv.sock", out, sizeof out), 0);
    OLT_CHECK_STR(out, "./data/kv.sock");
    OLT_CHECK_EQ(rmdir("data"), -1);                    /* not empty: ./data stays first */
    OLT_CHECK_EQ(unlink("data/kv.sock"), 0);
    OLT_CHECK_EQ(rmdir("data"), 0);                     /* no ./data: the per-user one */
    OLT_CHECK_EQ(ol_datadir_find(env, "kv.sock", out, sizeof out), 0);
    OLT_CHECK_STR(out, want);
    OLT_CHECK_EQ(chdir(here), 0);
}

OLT_TEST(datadir_make_parents)
{
    char p[512], q[512];
    struct stat st;
    snprintf(p, sizeof p, "%s/a/b/c/openlake", olt_tmpdir());
    OLT_CHECK_EQ(ol_datadir_make_parents(p), 0);
    snprintf(q, sizeof q, "%s/a/b/c", olt_tmpdir());
    OLT_CHECK_EQ(stat(q, &st), 0);
    OLT_CHECK(S_ISDIR(st.st_mode));
    OLT_CHECK_EQ(st.st_mode & 0777, 0700);
    OLT_CHECK_EQ(stat(p, &st), -1);                     /* not the last one */
    OLT_CHECK_EQ(ol_datadir_make_parents(p), 0);        /* all there: fine */
    OLT_CHECK_EQ(ol_datadir_make_parents("openlake"), 0); /* no parent to make */

    snprintf(q, sizeof q, "%s/file", olt_tmpdir());     /* a parent that is a file */
    int fd = open(q, O_WRONLY | O_CREAT, 0600);
    OLT_CHECK(fd >= 0);
    close(fd);
    snprintf(p, sizeof p, "%s/file/x/openlake", olt_tmpdir());
    OLT_CHECK_EQ(ol_datadir_make_parents(p), -ENOTDIR);
}
