/*
 * dirlock.c - see dirlock.h.
 *
 * A set is an array of (descriptor, device, inode), one per directory
 * held; it grows by doubling. The pid file is written with one write(2)
 * after O_TRUNC: a contender that reads it in between sees an empty file
 * and names no pid, which is the worst a race can do.
 */
#include "base/dirlock.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

struct ol_dirlock_ent {
    int fd;
    dev_t dev;
    ino_t ino;
};

struct ol_dirlock {
    struct ol_dirlock_ent *v;
    size_t n, cap;
};

int ol_dirlock_create(struct ol_dirlock **out)
{
    *out = calloc(1, sizeof **out);
    return *out ? 0 : -ENOMEM;
}

void ol_dirlock_destroy(struct ol_dirlock *l)
{
    if (!l)
        return;
    for (size_t i = 0; i < l->n; i++)
        close(l->v[i].fd); /* the last descriptor of the open: the flock goes */
    free(l->v);
    free(l);
}

/* The pid in the lock file of the directory dfd, or 0 when it names none. */
static long ol_dirlock_holder(int dfd)
{
    int fd = openat(dfd, OL_DIRLOCK_FILE, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return 0;
    char buf[32];
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = 0;
    char *end;
    errno = 0;
    long pid = strtol(buf, &end, 10);
    if (errno || end == buf || (*end && *end != '\n') || pid <= 0)
        return 0;
    return pid;
}

/* Writes getpid() into the lock file of dfd: 0 or a positive errno. */
static int ol_dirlock_note(int dfd)
{
    int fd = openat(dfd, OL_DIRLOCK_FILE, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC,
                    0600);
    if (fd < 0)
        return errno;
    char buf[32];
    int len = snprintf(buf, sizeof buf, "%ld\n", (long)getpid());
    ssize_t w;
    do
        w = write(fd, buf, (size_t)len);
    while (w < 0 && errno == EINTR);
    int rc = w < 0 ? errno : w != len ? EIO : 0;
    if (close(fd) < 0 && rc == 0)
        rc = errno;
    return rc;
}

int ol_dirlock_take(struct ol_dirlock *l, const char *dir, long *holder)
{
    *holder = 0;
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    int rc;
    struct stat st;
    if (fstat(fd, &st) < 0) {
        rc = -errno;
        goto fail;
    }
    for (size_t i = 0; i < l->n; i++)
        if (l->v[i].dev == st.st_dev && l->v[i].ino == st.st_ino) {
            rc = 0; /* held already, under another name */
            goto fail;
        }
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 8;
        struct ol_dirlock_ent *v = realloc(l->v, cap * sizeof *v);
        if (!v) {
            rc = -ENOMEM;
            goto fail;
        }
        l->v = v;
        l->cap = cap;
    }
    while ((rc = flock(fd, LOCK_EX | LOCK_NB)) < 0 && errno == EINTR)
        ;
    if (rc < 0) {
        rc = -errno;
        if (rc == -EWOULDBLOCK)
            *holder = ol_dirlock_holder(fd);
        goto fail;
    }
    l->v[l->n++] = (struct ol_dirlock_ent){.fd = fd, .dev = st.st_dev, .ino = st.st_ino};
    return ol_dirlock_note(fd);
fail:
    close(fd);
    return rc;
}

int ol_dirlock_probe(const char *dir, char *parent, size_t plen)
{
    size_t n = strlen(dir);
    while (n > 1 && dir[n - 1] == '/')
        n--;
    size_t cut = n; /* the parent is dir[0, cut) */
    while (cut > 0 && dir[cut - 1] != '/')
        cut--;
    while (cut > 1 && dir[cut - 1] == '/')
        cut--;
    const char *p = cut ? dir : ".";
    size_t pn = cut ? cut : 1;
    if (pn >= plen)
        return -ENAMETOOLONG;
    memcpy(parent, p, pn);
    parent[pn] = 0;

    struct stat st;
    if (stat(dir, &st) == 0)
        return S_ISDIR(st.st_mode) ? 0 : -ENOTDIR;
    if (errno != ENOENT)
        return -errno;
    if (stat(parent, &st) < 0)
        return errno == ENOENT ? -ENOENT : -errno;
    return S_ISDIR(st.st_mode) ? 1 : -ENOTDIR;
}
