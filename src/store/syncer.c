/*
 * syncer.c - see syncer.h: a thread per filesystem turning the barriers
 * of every core into one syncfs(2) at a time.
 *
 * Waiters are pushed on a lock-free stack (compare-and-swap on the head)
 * and the thread woken through an eventfd; the thread reads the eventfd,
 * takes the whole stack with one exchange, calls syncfs, and posts each
 * waiter back. A push after the exchange also wrote the eventfd, so the
 * thread comes round again: no barrier is left waiting.
 */
#include "store/syncer.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

struct ol_fs_syncer {
    _Atomic(struct ol_sync_wait *) head;
    atomic_bool stop;
    int fd;                  /* a drive directory of this filesystem (dup) */
    int efd;
    dev_t dev;
    pthread_t th;
    bool started;
    _Atomic uint64_t syncs, barriers;
    _Atomic uint64_t errs;   /* failed syncfs calls */
    _Atomic uint64_t ns;     /* time spent in syncfs */
};

struct ol_syncers {
    unsigned n, nfs;
    int *of;                 /* drive -> index in fs[], -1 = offline */
    struct ol_fs_syncer *fs;
};

/* One syncfs for the list w (newest first), then each waiter posted back. */
static void sync_batch(struct ol_fs_syncer *f, struct ol_sync_wait *w)
{
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int rc = syncfs(f->fd) < 0 ? -errno : 0;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    atomic_fetch_add_explicit(&f->ns, (uint64_t)((t1.tv_sec - t0.tv_sec) * 1000000000ll +
                                                 (t1.tv_nsec - t0.tv_nsec)),
                              memory_order_relaxed);
    atomic_fetch_add_explicit(&f->syncs, 1, memory_order_relaxed);
    if (rc < 0)
        atomic_fetch_add(&f->errs, 1);
    uint64_t errs = atomic_load(&f->errs);
    while (w) {
        struct ol_sync_wait *next = w->next;
        _Atomic unsigned *out = w->out;
        w->res = rc < 0 ? rc : errs != w->since ? -EIO : 0;
        atomic_fetch_add_explicit(&f->barriers, 1, memory_order_relaxed);
        ol_loop_post(w->loop, &w->msg); /* w belongs to its loop from here */
        if (out)
            atomic_fetch_sub_explicit(out, 1, memory_order_release);
        w = next;
    }
}

static void *syncer_main(void *arg)
{
    struct ol_fs_syncer *f = arg;
    for (;;) {
        uint64_t v;
        if (read(f->efd, &v, sizeof v) < 0 && errno != EINTR && errno != EAGAIN)
            break; /* cannot happen on an eventfd we own */
        struct ol_sync_wait *w;
        while ((w = atomic_exchange(&f->head, NULL)))
            sync_batch(f, w);
        if (atomic_load(&f->stop))
            break; /* nothing can be pushed any more: the cores are gone */
    }
    return NULL;
}

int ol_syncers_open(const int *dfd, unsigned n, struct ol_syncers **out, char *err,
                    size_t errlen)
{
    *out = NULL;
    struct ol_syncers *s = calloc(1, sizeof *s);
    if (!s || !(s->of = malloc((n ? n : 1) * sizeof *s->of)) ||
        !(s->fs = calloc(n ? n : 1, sizeof *s->fs))) {
        ol_syncers_close(s);
        return -ENOMEM;
    }
    s->n = n;
    for (unsigned i = 0; i < n; i++) {
        s->of[i] = -1;
        if (dfd[i] < 0)
            continue;
        struct stat st;
        if (fstat(dfd[i], &st) < 0) {
            int rc = -errno;
            snprintf(err, errlen, "syncer: drive %u: fstat: %s", i, strerror(-rc));
            ol_syncers_close(s);
            return rc;
        }
        unsigned j = 0;
        while (j < s->nfs && s->fs[j].dev != st.st_dev)
            j++;
        if (j == s->nfs) {
            struct ol_fs_syncer *f = &s->fs[s->nfs++];
            f->dev = st.st_dev;
            f->efd = -1;
            f->fd = fcntl(dfd[i], F_DUPFD_CLOEXEC, 0);
            if (f->fd < 0 || (f->efd = eventfd(0, EFD_CLOEXEC)) < 0) {
                int rc = -errno;
                snprintf(err, errlen, "syncer: drive %u: %s", i, strerror(-rc));
                ol_syncers_close(s);
                return rc;
            }
            /* The thread takes no signal (it starts before the daemon blocks
             * SIGTERM for its main thread: it would take the default action). */
            sigset_t all, old;
            sigfillset(&all);
            pthread_sigmask(SIG_SETMASK, &all, &old);
            int rc = pthread_create(&f->th, NULL, syncer_main, f);
            pthread_sigmask(SIG_SETMASK, &old, NULL);
            if (rc) {
                snprintf(err, errlen, "syncer: thread: %s", strerror(rc));
                ol_syncers_close(s);
                return -rc;
            }
            f->started = true;
            char name[16];
            snprintf(name, sizeof name, "ol-sync%u", j);
            pthread_setname_np(f->th, name);
        }
        s->of[i] = (int)j;
    }
    *out = s;
    return 0;
}

void ol_syncers_close(struct ol_syncers *s)
{
    if (!s)
        return;
    for (unsigned j = 0; s->fs && j < s->nfs; j++) {
        struct ol_fs_syncer *f = &s->fs[j];
        if (f->started) {
            atomic_store(&f->stop, true);
            uint64_t one = 1;
            while (write(f->efd, &one, sizeof one) < 0 && errno == EINTR)
                ;
            pthread_join(f->th, NULL);
        }
        if (f->efd >= 0)
            close(f->efd);
        if (f->fd >= 0)
            close(f->fd);
    }
    free(s->fs);
    free(s->of);
    free(s);
}

int ol_syncer_fs(const struct ol_syncers *s, unsigned drive)
{
    return drive >= s->n ? -1 : s->of[drive];
}

uint64_t ol_syncer_mark(const struct ol_syncers *s, unsigned drive)
{
    return drive >= s->n || s->of[drive] < 0 ? 0 : atomic_load(&s->fs[s->of[drive]].errs);
}

void ol_syncer_wait(struct ol_syncers *s, unsigned drive, ol_loop *loop, struct ol_sync_wait *w)
{
    w->loop = loop;
    if (drive >= s->n || s->of[drive] < 0) { /* offline at open: never synced */
        w->res = -ENODEV;
        _Atomic unsigned *out = w->out;
        ol_loop_post(loop, &w->msg);
        if (out)
            atomic_fetch_sub_explicit(out, 1, memory_order_release);
        return;
    }
    struct ol_fs_syncer *f = &s->fs[s->of[drive]];
    struct ol_sync_wait *h = atomic_load_explicit(&f->head, memory_order_relaxed);
    do
        w->next = h;
    while (!atomic_compare_exchange_weak_explicit(&f->head, &h, w, memory_order_release,
                                                  memory_order_relaxed));
    uint64_t one = 1;
    while (write(f->efd, &one, sizeof one) < 0 && errno == EINTR)
        ;
}

void ol_syncers_counts(const struct ol_syncers *s, uint64_t *syncs, uint64_t *barriers,
                       uint64_t *ns)
{
    uint64_t a = 0, b = 0, t = 0;
    for (unsigned j = 0; s && j < s->nfs; j++) {
        a += atomic_load_explicit(&s->fs[j].syncs, memory_order_relaxed);
        b += atomic_load_explicit(&s->fs[j].barriers, memory_order_relaxed);
        t += atomic_load_explicit(&s->fs[j].ns, memory_order_relaxed);
    }
    *syncs = a;
    *barriers = b;
    if (ns)
        *ns = t;
}

unsigned ol_syncers_filesystems(const struct ol_syncers *s) { return s ? s->nfs : 0; }
