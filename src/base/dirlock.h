/*
 * dirlock.h - one process's exclusive hold on the directories it keeps its
 * data in, and the start-up check of whether such a directory may be made.
 *
 * Two daemons on one directory each believe they own it: their indexes and
 * caches diverge and each overwrites what the other wrote. A set of locks
 * (struct ol_dirlock) takes, for each directory, an exclusive flock(2) on
 * the directory itself (LOCK_EX | LOCK_NB, on a descriptor opened
 * O_RDONLY | O_DIRECTORY | O_CLOEXEC) and holds it until the set is
 * destroyed or the process ends; the kernel drops it then, also after
 * kill -9, so nothing stale ever blocks. Locking the directory rather than
 * a file in it keeps the process's open files there down to the directory
 * itself, which the store holds open anyway.
 *
 * Owns: <dir>/.openlake.lock (OL_DIRLOCK_FILE), written after the lock is
 * taken: the holder's pid in decimal and a newline, mode 0600, nothing
 * else. It only names the holder for a contender's message; the lock is the
 * flock, never the file: a file left by a process that has ended (it is
 * not removed at exit) blocks nothing, and a missing one only leaves the
 * holder unnamed.
 *
 * Directories are told apart by device and inode, so one directory named
 * twice (a data dir that is also a KV disk dir, "d" and "./d", a symlink)
 * is locked once and never blocks its own holder.
 *
 * Plain blocking syscalls for start-up code. I/O errors are -errno; errno
 * is not relied on. Standalone: no logging, no config, no daemon header.
 * Must not: create a directory (the caller decides, with
 * ol_dirlock_probe), read or write anything in it but OL_DIRLOCK_FILE, or
 * wait for a lock.
 */
#ifndef OL_BASE_DIRLOCK_H
#define OL_BASE_DIRLOCK_H

#include <stddef.h>

#define OL_DIRLOCK_FILE ".openlake.lock"

struct ol_dirlock;

/* An empty set in *out (the caller destroys it). 0 or -ENOMEM. */
int ol_dirlock_create(struct ol_dirlock **out);

/*
 * Takes dir's lock into l.
 *   0             held; OL_DIRLOCK_FILE holds getpid(); also when l
 *                 already holds the same directory (by any name)
 *   > 0           held, but OL_DIRLOCK_FILE could not be written: the
 *                 value is the errno why (the lock protects all the same;
 *                 a contender is told no pid)
 *   -EWOULDBLOCK  another open of the directory holds it (another process,
 *                 or another set); *holder is the pid OL_DIRLOCK_FILE
 *                 names, 0 when it names none
 *   -ENOMEM       the set could not grow; nothing held
 *   other -errno  dir could not be opened, examined or locked (-ENOENT,
 *                 -ENOTDIR, -EACCES, -ENOLCK where the filesystem has no
 *                 flock on directories...); nothing held
 * *holder is set on every return (0 unless -EWOULDBLOCK).
 */
int ol_dirlock_take(struct ol_dirlock *l, const char *dir, long *holder);

/* Releases every lock of l and frees it. NULL is a no-op. The lock files
 * stay: the next holder overwrites them. */
void ol_dirlock_destroy(struct ol_dirlock *l);

/*
 * What start-up may do about dir, which should be a directory:
 *   0        it is one
 *   1        it does not exist and its parent directory does: it may be
 *            made with one mkdir
 *   -ENOENT  it does not exist and neither does its parent (a drive not
 *            mounted, a typo): parent holds the parent's path
 *   -ENOTDIR it, or its parent, exists but is not a directory (parent
 *            holds the parent's path)
 *   other -errno  stat failed (-EACCES, -EIO, -ENAMETOOLONG...)
 * parent (plen bytes, at least 2) always receives the parent's path ("."
 * for a bare name, "/" for a child of the root); a trailing '/' of dir is
 * ignored. Reads only the two inodes.
 */
int ol_dirlock_probe(const char *dir, char *parent, size_t plen);

#endif
