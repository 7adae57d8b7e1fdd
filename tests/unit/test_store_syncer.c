/*
 * test_store_syncer.c - the syncfs group commit (src/store/syncer.h): a
 * thread per filesystem, barriers of one loop answered together, a dead
 * filesystem's barriers failed, and what a barrier promises checked across
 * a power cut (an XFS shut down without flushing its log, then mounted
 * again). Needs root and xfsprogs for the XFS cases (skipped otherwise).
 */
#include "olt.h"
#include "store_harness.h"

#include "rt/loop.h"
#include "store/syncer.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#define NB 64

struct bar {
    struct ol_sync_wait w;      /* first */
    struct run *run;
};

struct run {
    struct ol_timer t;          /* first: issues the barriers on the loop */
    struct ol_syncers *s;
    unsigned ndrives;
    const int *dfd;             /* a file is made on each before its barrier */
    unsigned n, done, ok;
    int first_err;
    struct bar b[NB];
};

static void bar_done(ol_loop *loop, struct ol_msg *m)
{
    struct bar *b = (struct bar *)m;
    struct run *r = b->run;
    if (b->w.res == 0)
        r->ok++;
    else if (!r->first_err)
        r->first_err = b->w.res;
    if (++r->done == r->n)
        ol_loop_stop(loop);
}

/* On the loop thread: for each barrier, a file with a page of data made on
 * its drive (so the filesystem has something to write); then the barriers,
 * one right after the other. */
static void issue(ol_loop *loop, struct ol_timer *t)
{
    struct run *r = (struct run *)t;
    for (unsigned i = 0; i < r->n; i++) {
        unsigned drive = i % r->ndrives;
        r->b[i].w.since = ol_syncer_mark(r->s, drive); /* before the changes */
        char name[32];
        snprintf(name, sizeof name, "f%u", i);
        int fd = openat(r->dfd[drive], name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (fd >= 0) {
            char page[4096];
            memset(page, (int)i, sizeof page);
            if (write(fd, page, sizeof page) != (ssize_t)sizeof page)
                r->first_err = -EIO;
            close(fd);
        }
    }
    for (unsigned i = 0; i < r->n; i++) {
        r->b[i].run = r;
        r->b[i].w.msg.fn = bar_done;
        ol_syncer_wait(r->s, i % r->ndrives, loop, &r->b[i].w);
    }
}

static int run_init(ol_loop *loop, void *arg)
{
    ol_timer_arm(loop, arg, 0);
    return 0;
}

/* n barriers spread over the drives from one loop; returns when all came back. */
static void run_barriers(struct run *r, struct ol_syncers *s, const int *dfd, unsigned ndrives,
                         unsigned n)
{
    memset(r, 0, sizeof *r);
    r->t.fn = issue;
    r->s = s;
    r->dfd = dfd;
    r->ndrives = ndrives;
    r->n = n;
    ol_loop *l = sh_loop_new();
    OLT_CHECK_EQ(ol_loop_start(l, run_init, r), 0);
    ol_loop_join(l);
    ol_loop_destroy(l);
    OLT_CHECK_EQ(r->done, n);
}

static int open_dir(const char *path)
{
    OLT_CHECK(mkdir(path, 0700) == 0 || errno == EEXIST);
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    OLT_CHECK(fd >= 0);
    return fd;
}

static void need_xfs(void)
{
    if (geteuid() != 0 || system("command -v mkfs.xfs >/dev/null 2>&1") != 0)
        OLT_SKIP("needs root and mkfs.xfs (loop-mounted XFS)");
    if (!sh_own_mount_ns())
        OLT_SKIP("cannot make a private mount namespace here");
}

static void mount_at(const char *name, char *img, char *dir, size_t len)
{
    snprintf(img, len, "%s/%s.img", olt_tmpdir(), name);
    snprintf(dir, len, "%s/%s", olt_tmpdir(), name);
    OLT_CHECK_EQ(mkdir(dir, 0700), 0);
    if (!sh_mount_xfs(img, dir))
        OLT_SKIP("cannot loop-mount an XFS image here");
}

/*
 * Drives on two filesystems (two on one XFS, one on another, one offline):
 * one thread per filesystem, every barrier answered 0, and the 64 barriers
 * one loop asks for at once share a few syncfs calls (each of which waits
 * for the journal: the rest queue meanwhile) instead of one each. A
 * barrier of the offline drive comes back at once with ENODEV.
 */
OLT_TEST_T(store_syncer_one_syncfs_for_many_barriers, 60)
{
    need_xfs();
    char img[2][400], dir[2][400], d[4][500];
    mount_at("x0", img[0], dir[0], sizeof img[0]);
    mount_at("x1", img[1], dir[1], sizeof img[1]);
    snprintf(d[0], sizeof d[0], "%s/a", dir[0]);
    snprintf(d[1], sizeof d[1], "%s/b", dir[0]);
    snprintf(d[2], sizeof d[2], "%s/c", dir[1]);
    int dfd[4] = {open_dir(d[0]), open_dir(d[1]), open_dir(d[2]), -1};
    struct ol_syncers *s = NULL;
    char err[256] = "";
    OLT_CHECK_EQ(ol_syncers_open(dfd, 4, &s, err, sizeof err), 0);
    OLT_CHECK_EQ(ol_syncers_filesystems(s), 2);
    struct run *r = calloc(1, sizeof *r);
    run_barriers(r, s, dfd, 3, NB);
    OLT_CHECK_EQ(r->ok, NB);
    uint64_t syncs, barriers;
    ol_syncers_counts(s, &syncs, &barriers, NULL);
    OLT_CHECK_EQ(barriers, NB);
    OLT_CHECK(syncs >= 2);          /* each filesystem synced */
    OLT_CHECK(syncs <= NB / 4);     /* and the barriers grouped */
    run_barriers(r, s, dfd, 4, 4);  /* the offline drive's barrier: ENODEV at once */
    OLT_CHECK_EQ(r->ok, 3);
    OLT_CHECK_EQ(r->first_err, -ENODEV);
    ol_syncers_close(s);
    for (int i = 0; i < 3; i++)
        close(dfd[i]);
    free(r);
    OLT_CHECK_EQ(umount2(dir[0], 0), 0);
    OLT_CHECK_EQ(umount2(dir[1], 0), 0);
}

/*
 * A barrier's promise across a power cut: files made and written, then a
 * barrier answered; the XFS is shut down without flushing its log and
 * mounted again: every file is there with its page. Then on a shut-down
 * filesystem every barrier fails (EIO) and the filesystem's error count
 * (ol_syncer_mark) moves on.
 */
OLT_TEST_T(store_syncer_barrier_survives_a_power_cut_and_reports_errors, 60)
{
    need_xfs();
    char img[400], dir[400], d[500];
    mount_at("pc", img, dir, sizeof img);
    snprintf(d, sizeof d, "%s/drive", dir);
    int dfd = open_dir(d);
    struct ol_syncers *s = NULL;
    char err[256] = "";
    OLT_CHECK_EQ(ol_syncers_open(&dfd, 1, &s, err, sizeof err), 0);
    struct run *r = calloc(1, sizeof *r);
    run_barriers(r, s, &dfd, 1, 16);
    OLT_CHECK_EQ(r->ok, 16);
    OLT_CHECK(sh_xfs_shutdown(dfd));
    ol_syncers_close(s);
    close(dfd);
    OLT_CHECK_EQ(umount2(dir, 0), 0);
    OLT_CHECK(sh_mount_image(img, dir));
    for (unsigned i = 0; i < 16; i++) {
        char p[600];
        snprintf(p, sizeof p, "%s/f%u", d, i);
        struct stat st;
        OLT_CHECK_EQ(stat(p, &st), 0);
        OLT_CHECK_EQ(st.st_size, 4096);
    }
    /* a dead filesystem: every barrier fails */
    dfd = open_dir(d);
    OLT_CHECK_EQ(ol_syncers_open(&dfd, 1, &s, err, sizeof err), 0);
    uint64_t mark = ol_syncer_mark(s, 0);
    OLT_CHECK(sh_xfs_shutdown(dfd));
    run_barriers(r, s, &dfd, 1, 4);
    OLT_CHECK_EQ(r->ok, 0);
    OLT_CHECK_EQ(r->first_err, -EIO);
    OLT_CHECK(ol_syncer_mark(s, 0) > mark);
    ol_syncers_close(s);
    close(dfd);
    free(r);
    OLT_CHECK_EQ(umount2(dir, 0), 0);
}
