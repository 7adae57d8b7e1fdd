/*
 * syncer.h - group commit of a drive's changes by syncfs(2): one thread
 * per filesystem that holds drives.
 *
 * Owns: the threads, each with a descriptor of one drive directory on its
 * filesystem, and the lock-free list of barriers waiting on it.
 *
 * A barrier is a promise that everything the caller changed on a drive's
 * filesystem before asking (file data, new files and directories, renames,
 * unlinks) is durable when it completes with 0. The thread takes every
 * barrier waiting, calls syncfs once for all of them, and posts each one
 * back to the loop it came from: a PUT then needs no fsync per file and
 * per directory, and the PUTs of all the cores on one filesystem share its
 * journal's flushes. A barrier asked for while a syncfs runs waits for the
 * next one (a syncfs may have started before its changes were made).
 *
 * syncfs reports a writeback error of the filesystem once per descriptor
 * (Linux 5.8+): every barrier of that batch fails with it. An error can
 * also surface in an earlier batch (the kernel wrote a page back on its
 * own, failed, and the next syncfs, for someone else, reported it): so a
 * caller marks the filesystem's error count before it changes anything
 * (ol_syncer_mark) and its barrier fails with -EIO if any syncfs failed
 * since. No write that might have lost a page is acknowledged.
 *
 * Must not: touch the engine's requests. Thread rules: ol_syncer_wait on
 * any loop thread; open/close on one thread with no barrier in flight.
 * A loop that stops with barriers out must outlive them: its owner waits
 * for w->out to reach zero (the syncer posts to a stopped loop safely; the
 * message is never run).
 */
#ifndef OL_STORE_SYNCER_H
#define OL_STORE_SYNCER_H

#include "rt/loop.h"

#include <stddef.h>
#include <stdint.h>

struct ol_syncers;

/* One barrier; embed it in the waiter, set msg.fn; res is set before fn runs. */
struct ol_sync_wait {
    struct ol_msg msg;              /* first: posted back to `loop` */
    struct ol_sync_wait *next;      /* private */
    ol_loop *loop;                  /* private */
    _Atomic unsigned *out;          /* NULL, or a count the syncer takes 1
                                       from once it no longer touches w */
    uint64_t since;                 /* ol_syncer_mark before the caller's changes */
    int res;                        /* 0, or -errno from syncfs; -EIO when any
                                       syncfs since `since` failed */
};

/* Groups the n drive descriptors by filesystem (st_dev; dfd < 0 = offline,
 * left out) and starts a thread per group. Returns 0 or -errno, with a
 * message in err. */
int ol_syncers_open(const int *dfd, unsigned n, struct ol_syncers **out, char *err,
                    size_t errlen);
/* Stops the threads (after their batch in progress) and frees. NULL is fine. */
void ol_syncers_close(struct ol_syncers *s);

/* The error count of drive's filesystem, for w->since. */
uint64_t ol_syncer_mark(const struct ol_syncers *s, unsigned drive);

/* Asks for a barrier on drive's filesystem; w->msg.fn runs on `loop` when
 * it is done (with -ENODEV at once for a drive offline at open). Never
 * blocks. */
void ol_syncer_wait(struct ol_syncers *s, unsigned drive, ol_loop *loop, struct ol_sync_wait *w);

/* Which filesystem (0 .. ol_syncers_filesystems - 1) drive is on; -1 when
 * it was offline at open. Drives with the same value share every syncfs. */
int ol_syncer_fs(const struct ol_syncers *s, unsigned drive);

/* How many filesystems (threads) the online drives are on. */
unsigned ol_syncers_filesystems(const struct ol_syncers *s);

/* How many syncfs calls and barriers so far, and the nanoseconds spent in
 * syncfs (any thread; for tests and metrics). ns may be NULL. */
void ol_syncers_counts(const struct ol_syncers *s, uint64_t *syncs, uint64_t *barriers,
                       uint64_t *ns);

#endif
