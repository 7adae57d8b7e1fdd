/*
 * dirs.c - openlaked's directories at start: each one there (or made), and
 * each one locked, before anything in them is read.
 *
 * Owns: the rule for a missing directory and the process's set of
 * directory locks (base/dirlock.h), held until the process ends. The
 * directories are every data dir (modes all, s3 and kv: the first holds
 * the S3 credentials, the KV token and socket) and, where a KV disk tier
 * (the main one, or a [[kv_tenants]] entry's) is on and kv_disk.dirs names
 * its own dirs, those.
 *
 *   exists                       locked
 *   missing, its parent exists   made (mode 0700, one level), logged, locked
 *   the per-user default         its parents made first (base/datadir.h),
 *                                then as above
 *   missing, parent missing too  exit 2 naming both: a drive not mounted or
 *                                a typo must not turn into an empty store
 *                                on the root filesystem
 *   not a directory              exit 2
 *   locked by another process    exit 2: "data dir D is in use by openlaked
 *                                pid N"; nothing made, nothing read
 *   cannot be examined/locked    a warning; the directory is left to the
 *                                subsystem that uses it (the store runs
 *                                without a drive it cannot read)
 *
 * Every directory is examined before any is made, and every one that
 * exists is locked before any is made, so a start that fails changes
 * nothing on disk.
 *
 * Must not: read or write anything in the directories but the lock file.
 */
#include "daemon/daemon.h"

#include "base/datadir.h"
#include "base/dirlock.h"
#include "base/log.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

struct ol_dir_want {
    const char *path;
    const char *noun; /* "data dir", "KV disk dir" */
    const char *key;  /* the configuration key that names it */
    int probe;        /* ol_dirlock_probe's answer */
    char parent[PATH_MAX];
};

static int ol_dir_lock(struct ol_daemon *d, const struct ol_dir_want *w, char *err,
                       size_t errlen)
{
    long pid;
    int rc = ol_dirlock_take(d->locks, w->path, &pid);
    if (rc > 0) {
        ol_warn("%s %s: locked, but cannot write its %s (%s): a second openlaked on it is "
                "refused without its pid", w->noun, w->path, OL_DIRLOCK_FILE, strerror(rc));
    } else if (rc == -EWOULDBLOCK && pid) {
        snprintf(err, errlen, "%s %s is in use by openlaked pid %ld", w->noun, w->path, pid);
        return rc;
    } else if (rc == -EWOULDBLOCK) {
        snprintf(err, errlen, "%s %s is in use by another process (%s/%s names no pid)", w->noun,
                 w->path, w->path, OL_DIRLOCK_FILE);
        return rc;
    } else if (rc == -ENOMEM) {
        snprintf(err, errlen, "out of memory");
        return rc;
    } else if (rc < 0) {
        ol_warn("%s %s: cannot lock it (%s): another openlaked could use it beside this one",
                w->noun, w->path, strerror(-rc));
    }
    return 0;
}

int ol_daemon_dirs(struct ol_daemon *d, char *err, size_t errlen)
{
    static struct ol_dir_want want[OL_CONFIG_MAX_DATA_DIRS + OL_CONFIG_MAX_KV_DISK_DIRS];
    const struct ol_config *c = &d->cfg;
    unsigned n = 0;
    for (int i = 0; i < c->n_data_dirs; i++)
        want[n++] = (struct ol_dir_want){.path = c->data_dirs[i], .noun = "data dir",
                                         .key = "data_dirs"};
    bool kv_disk = c->kv_disk.capacity_gb > 0;
    for (int i = 0; i < c->n_kv_tenants; i++)
        kv_disk |= c->kv_tenants[i].disk_capacity_gb > 0;
    if (c->mode != OL_MODE_S3 && kv_disk)
        for (int i = 0; i < c->kv_disk.n_dirs; i++)
            want[n++] = (struct ol_dir_want){.path = c->kv_disk.dirs[i], .noun = "KV disk dir",
                                             .key = "kv_disk.dirs"};

    for (unsigned i = 0; i < n; i++) {
        struct ol_dir_want *w = &want[i];
        w->probe = ol_dirlock_probe(w->path, w->parent, sizeof w->parent);
        /* The per-user default (no data_dirs anywhere, no ./data) may lack
         * its parents (~/.local/share): made below, once every other
         * directory passed, as any XDG program makes them; a configured
         * directory's never are. */
        if (w->probe == -ENOENT && i == 0 && c->data_dir_per_user)
            continue;
        if (w->probe == -ENOENT) {
            snprintf(err, errlen, "%s %s does not exist and neither does its parent %s (a drive "
                     "not mounted? a typo in %s?)", w->noun, w->path, w->parent, w->key);
            return w->probe;
        }
        if (w->probe == -ENOTDIR) {
            snprintf(err, errlen, "%s %s: it or its parent %s is not a directory", w->noun,
                     w->path, w->parent);
            return w->probe;
        }
        if (w->probe < 0)
            ol_warn("%s %s: %s; not locked, left to what uses it", w->noun, w->path,
                    strerror(-w->probe));
    }

    if (c->data_dir_per_user && want[0].probe == -ENOENT) {
        struct ol_dir_want *w = &want[0];
        int rc = ol_datadir_make_parents(w->path);
        if (rc < 0) {
            snprintf(err, errlen, "data dir %s (the per-user default: no data_dirs given and no "
                     "./data here): cannot make its parents: %s", w->path, strerror(-rc));
            return rc;
        }
        w->probe = ol_dirlock_probe(w->path, w->parent, sizeof w->parent);
        if (w->probe == -ENOENT || w->probe == -ENOTDIR) {   /* its parents went meanwhile */
            snprintf(err, errlen, "data dir %s: %s", w->path, strerror(-w->probe));
            return w->probe;
        }
        if (w->probe < 0)
            ol_warn("%s %s: %s; not locked, left to what uses it", w->noun, w->path,
                    strerror(-w->probe));
    }

    int rc = ol_dirlock_create(&d->locks);
    if (rc < 0) {
        snprintf(err, errlen, "out of memory");
        return rc;
    }
    for (unsigned i = 0; i < n; i++)
        if (want[i].probe == 0 && (rc = ol_dir_lock(d, &want[i], err, errlen)) < 0)
            return rc;
    for (unsigned i = 0; i < n; i++) {
        struct ol_dir_want *w = &want[i];
        if (w->probe != 1)
            continue;
        if (mkdir(w->path, 0700) == 0) {
            ol_info("%s %s did not exist: created it (its parent %s exists)", w->noun, w->path,
                    w->parent);
        } else if (errno != EEXIST) { /* EEXIST: named twice, or made just now by another */
            rc = -errno;
            snprintf(err, errlen, "%s %s: cannot create it: %s", w->noun, w->path,
                     strerror(-rc));
            return rc;
        }
        if ((rc = ol_dir_lock(d, w, err, errlen)) < 0)
            return rc;
    }
    return 0;
}
