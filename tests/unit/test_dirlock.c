/*
 * test_dirlock.c - base/dirlock.h: a directory locked by one set is refused
 * to another with the holder's pid from the lock file (in this process and
 * from a child process), freed when the set is destroyed and when a
 * holder is killed; one directory under two names is locked once; a stale
 * lock file, an empty one and one with junk block nothing or name no pid;
 * ol_dirlock_probe tells an existing directory, a missing one with its
 * parent, one without, and a file apart, and names the parent.
 */
#include "olt.h"

#include "base/dirlock.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *path_in(char *buf, size_t len, const char *name)
{
    snprintf(buf, len, "%s/%s", olt_tmpdir(), name);
    return buf;
}

static void write_file(const char *dir, const char *name, const char *text)
{
    char p[512];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    OLT_CHECK(fd >= 0);
    OLT_CHECK_EQ(write(fd, text, strlen(text)), (long long)strlen(text));
    close(fd);
}

static long pid_in_file(const char *dir)
{
    char p[512], buf[64] = {0};
    snprintf(p, sizeof p, "%s/%s", dir, OL_DIRLOCK_FILE);
    int fd = open(p, O_RDONLY);
    OLT_CHECK(fd >= 0);
    OLT_CHECK(read(fd, buf, sizeof buf - 1) > 0);
    close(fd);
    char want[32];
    snprintf(want, sizeof want, "%ld\n", (long)getpid());
    return strcmp(buf, want) == 0 ? (long)getpid() : -1;
}

/* A fresh directory "d" in dir, locked by *a, and an empty second set *b. */
static void held_dir(char *dir, size_t len, struct ol_dirlock **a, struct ol_dirlock **b)
{
    path_in(dir, len, "d");
    OLT_CHECK_EQ(mkdir(dir, 0700), 0);
    OLT_CHECK_EQ(ol_dirlock_create(a), 0);
    OLT_CHECK_EQ(ol_dirlock_create(b), 0);
    long holder = -1;
    OLT_CHECK_EQ(ol_dirlock_take(*a, dir, &holder), 0);
    OLT_CHECK_EQ(holder, 0);
}

OLT_TEST(dirlock_second_set_refused_with_pid_then_freed)
{
    char dir[512];
    struct ol_dirlock *a, *b;
    held_dir(dir, sizeof dir, &a, &b);
    long holder;
    OLT_CHECK_EQ(pid_in_file(dir), getpid());
    struct stat st;
    OLT_CHECK_EQ(stat(dir, &st), 0);
    OLT_CHECK_EQ(st.st_mode & 0777, 0700); /* the directory is not touched */
    char lf[600];
    snprintf(lf, sizeof lf, "%s/%s", dir, OL_DIRLOCK_FILE);
    OLT_CHECK_EQ(stat(lf, &st), 0);
    OLT_CHECK_EQ(st.st_mode & 0777, 0600);

    /* flock conflicts between two opens, even in one process */
    OLT_CHECK_EQ(ol_dirlock_take(b, dir, &holder), -EWOULDBLOCK);
    OLT_CHECK_EQ(holder, getpid());
    /* taking it again into its own set is no conflict */
    OLT_CHECK_EQ(ol_dirlock_take(a, dir, &holder), 0);

    ol_dirlock_destroy(a);
    OLT_CHECK_EQ(ol_dirlock_take(b, dir, &holder), 0); /* stale file: no block */
    ol_dirlock_destroy(b);
    ol_dirlock_destroy(NULL);
}

OLT_TEST(dirlock_one_directory_under_two_names_is_locked_once)
{
    char dir[512], dot[600], link[512], other[512];
    path_in(dir, sizeof dir, "d");
    path_in(link, sizeof link, "alias");
    path_in(other, sizeof other, "e");
    snprintf(dot, sizeof dot, "%s/./", dir);
    OLT_CHECK_EQ(mkdir(dir, 0700), 0);
    OLT_CHECK_EQ(mkdir(other, 0700), 0);
    OLT_CHECK_EQ(symlink(dir, link), 0);
    struct ol_dirlock *a, *b;
    OLT_CHECK_EQ(ol_dirlock_create(&a), 0);
    OLT_CHECK_EQ(ol_dirlock_create(&b), 0);
    long holder;
    /* more than the set's first allocation (8), with repeats */
    for (int i = 0; i < 20; i++) {
        char sub[600];
        snprintf(sub, sizeof sub, "%s/s%d", other, i);
        OLT_CHECK_EQ(mkdir(sub, 0700), 0);
        OLT_CHECK_EQ(ol_dirlock_take(a, sub, &holder), 0);
    }
    OLT_CHECK_EQ(ol_dirlock_take(a, dir, &holder), 0);
    OLT_CHECK_EQ(ol_dirlock_take(a, dot, &holder), 0);
    OLT_CHECK_EQ(ol_dirlock_take(a, link, &holder), 0);
    OLT_CHECK_EQ(ol_dirlock_take(b, link, &holder), -EWOULDBLOCK);
    OLT_CHECK_EQ(holder, getpid());
    char sub[600];
    snprintf(sub, sizeof sub, "%s/s19", other);
    OLT_CHECK_EQ(ol_dirlock_take(b, sub, &holder), -EWOULDBLOCK);
    ol_dirlock_destroy(a);
    OLT_CHECK_EQ(ol_dirlock_take(b, dot, &holder), 0);
    OLT_CHECK_EQ(ol_dirlock_take(b, sub, &holder), 0);
    ol_dirlock_destroy(b);
}

OLT_TEST(dirlock_lock_file_without_a_pid_names_none)
{
    char dir[512];
    struct ol_dirlock *a, *b;
    held_dir(dir, sizeof dir, &a, &b);
    long holder;
    static const char *junk[] = {"", "abc\n", "12x\n", "-5\n", "0\n",
                                 "99999999999999999999999\n"};
    for (size_t i = 0; i < sizeof junk / sizeof junk[0]; i++) {
        write_file(dir, OL_DIRLOCK_FILE, junk[i]);
        holder = -1;
        OLT_CHECK_EQ(ol_dirlock_take(b, dir, &holder), -EWOULDBLOCK);
        OLT_CHECK_EQ(holder, 0);
    }
    write_file(dir, OL_DIRLOCK_FILE, "4242");   /* no newline: still a pid */
    OLT_CHECK_EQ(ol_dirlock_take(b, dir, &holder), -EWOULDBLOCK);
    OLT_CHECK_EQ(holder, 4242);
    char lf[600];
    snprintf(lf, sizeof lf, "%s/%s", dir, OL_DIRLOCK_FILE);
    OLT_CHECK_EQ(unlink(lf), 0);
    OLT_CHECK_EQ(ol_dirlock_take(b, dir, &holder), -EWOULDBLOCK);
    OLT_CHECK_EQ(holder, 0);
    ol_dirlock_destroy(a);
    ol_dirlock_destroy(b);
}

OLT_TEST(dirlock_missing_or_not_a_directory_holds_nothing)
{
    char dir[512], file[512];
    path_in(dir, sizeof dir, "nope");
    path_in(file, sizeof file, "f");
    write_file(olt_tmpdir(), "f", "x");
    struct ol_dirlock *a;
    OLT_CHECK_EQ(ol_dirlock_create(&a), 0);
    long holder = -1;
    OLT_CHECK_EQ(ol_dirlock_take(a, dir, &holder), -ENOENT);
    OLT_CHECK_EQ(holder, 0);
    OLT_CHECK_EQ(ol_dirlock_take(a, file, &holder), -ENOTDIR);
    struct stat st;
    OLT_CHECK(stat(dir, &st) < 0); /* not made */
    ol_dirlock_destroy(a);
}

/* A child takes the lock and waits; the parent is refused with the child's
 * pid; once the child is killed (SIGKILL: no clean-up of its own) the
 * kernel has dropped the lock and the parent takes it. */
OLT_TEST(dirlock_held_by_a_killed_process_is_free)
{
    char dir[512];
    path_in(dir, sizeof dir, "d");
    OLT_CHECK_EQ(mkdir(dir, 0700), 0);
    int p[2];
    OLT_CHECK_EQ(pipe(p), 0);
    pid_t child = fork();
    OLT_CHECK(child >= 0);
    if (child == 0) {
        struct ol_dirlock *l;
        long h;
        char ok = ol_dirlock_create(&l) == 0 && ol_dirlock_take(l, dir, &h) == 0 ? 'y' : 'n';
        if (write(p[1], &ok, 1) != 1)
            _exit(1);
        for (;;)
            pause();
    }
    close(p[1]);
    char ok = 0;
    OLT_CHECK_EQ(read(p[0], &ok, 1), 1);
    close(p[0]);
    OLT_CHECK_EQ(ok, 'y');
    struct ol_dirlock *a;
    OLT_CHECK_EQ(ol_dirlock_create(&a), 0);
    long holder;
    int rc = ol_dirlock_take(a, dir, &holder);
    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
    OLT_CHECK_EQ(rc, -EWOULDBLOCK);
    OLT_CHECK_EQ(holder, child);
    OLT_CHECK_EQ(ol_dirlock_take(a, dir, &holder), 0);
    OLT_CHECK_EQ(pid_in_file(dir), getpid());
    ol_dirlock_destroy(a);
}

OLT_TEST(dirlock_probe_tells_the_cases_apart)
{
    char dir[512], parent[512], sub[600], file[512];
    path_in(dir, sizeof dir, "d");
    path_in(file, sizeof file, "f");
    OLT_CHECK_EQ(mkdir(dir, 0700), 0);
    write_file(olt_tmpdir(), "f", "x");

    OLT_CHECK_EQ(ol_dirlock_probe(dir, parent, sizeof parent), 0);
    OLT_CHECK_STR(parent, olt_tmpdir());
    snprintf(sub, sizeof sub, "%s/new//", dir);   /* trailing slashes ignored */
    OLT_CHECK_EQ(ol_dirlock_probe(sub, parent, sizeof parent), 1);
    OLT_CHECK_STR(parent, dir);
    snprintf(sub, sizeof sub, "%s/gone/new", dir);
    OLT_CHECK_EQ(ol_dirlock_probe(sub, parent, sizeof parent), -ENOENT);
    snprintf(sub, sizeof sub, "%s/gone", dir);
    OLT_CHECK_STR(parent, sub);
    OLT_CHECK_EQ(ol_dirlock_probe(file, parent, sizeof parent), -ENOTDIR);
    snprintf(sub, sizeof sub, "%s/data", file);   /* under a file */
    OLT_CHECK_EQ(ol_dirlock_probe(sub, parent, sizeof parent), -ENOTDIR);
    OLT_CHECK_STR(parent, file);
    struct stat st;
    snprintf(sub, sizeof sub, "%s/new", dir);
    OLT_CHECK(stat(sub, &st) < 0);                /* nothing made */

    /* the parent's name for short paths */
    OLT_CHECK_EQ(ol_dirlock_probe("/", parent, sizeof parent), 0);
    OLT_CHECK_STR(parent, "/");
    ol_dirlock_probe("/olt-no-such-dir", parent, sizeof parent);
    OLT_CHECK_STR(parent, "/");
    ol_dirlock_probe("olt-no-such-dir", parent, sizeof parent);
    OLT_CHECK_STR(parent, ".");
    ol_dirlock_probe("a//b/", parent, sizeof parent);
    OLT_CHECK_STR(parent, "a");
    OLT_CHECK_EQ(ol_dirlock_probe("/a/b", parent, 2), -ENAMETOOLONG);
}
