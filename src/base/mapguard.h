/*
 * mapguard.h - reading a file mapping without dying of it.
 *
 * A page of a shared file mapping that the kernel cannot supply (the file
 * was truncated under the mapping, or reading the page back from the drive
 * failed) is delivered as SIGBUS to the thread that touched it, and SIGBUS
 * ends the process by default. ol_mapguard_run calls a function over a
 * mapped range so that such a SIGBUS, at an address inside the range, makes
 * the call return -EFAULT instead. A SIGBUS anywhere else, or on a thread
 * with no guard, goes to the disposition that was there before
 * ol_mapguard_init (the default one: the process dies, as it would have).
 *
 * The kernel's own reads of a mapping (send(2) from it) never raise SIGBUS:
 * they fail with -EFAULT. Only user-space reads need the guard.
 *
 * Owns: the process's SIGBUS handler (installed once) and one guard per
 * thread. Must not: guard anything but reads of memory (the function jumped
 * out of must hold no lock and own nothing it has not released by the time
 * it can fault), nest guards on one thread, or run where SIGBUS is blocked.
 */
#ifndef OL_BASE_MAPGUARD_H
#define OL_BASE_MAPGUARD_H

#include <stddef.h>

/*
 * Installs the SIGBUS handler (SA_SIGINFO | SA_NODEFER | SA_ONSTACK),
 * keeping the disposition it replaces for faults that are not ours. Safe to
 * call from several threads and more than once. Returns 0 or -errno (the
 * sigaction failed: ol_mapguard_run must not be used).
 */
int ol_mapguard_init(void);

/*
 * Returns fn(arg), or -EFAULT when fn touched an address in [lo, lo + len)
 * that raised SIGBUS (fn is left at the fault; nothing after it in fn runs).
 * Needs ol_mapguard_init first. Not reentrant on one thread.
 */
int ol_mapguard_run(const void *lo, size_t len, int (*fn)(void *arg), void *arg);

#endif
