/*
 * secretfile.h - a secret (S3 secret key, KV token) read from a file.
 *
 * Owns: the one rule for secret files, shared by openlaked's *_file config
 * keys (config.c) and the openlake command's *-file flags (src/cli): the
 * path names a regular file (symlinks are followed: Kubernetes and Docker
 * mount secrets through them) of at most 4 KiB; trailing whitespace
 * (spaces, tabs, "\n", "\r\n") is dropped, so `echo secret > file` works;
 * what is left must be non-empty, hold no NUL byte and fit the caller's
 * buffer. The file's permission bits are handed back: whether group or
 * others may read it is the caller's warning to give.
 *
 * Must not: log, or put any byte of the secret into an error message.
 * Standalone: no other module of the project is included.
 */
#ifndef OL_BASE_SECRETFILE_H
#define OL_BASE_SECRETFILE_H

#include <stddef.h>

/*
 * Reads the secret in `path` into buf[cap] (NUL-terminated, so at most
 * cap - 1 bytes of secret). *mode (may be NULL) gets the file's permission
 * bits (st_mode & 07777). Returns the secret's length (> 0), or a negative
 * errno with one line in err[errlen] that starts with the path:
 *   -errno of open/fstat/read  "<path>: cannot open: No such file or directory"
 *   -EINVAL                    "<path>: not a regular file" / "<path>: holds a NUL byte"
 *   -ENODATA                   "<path>: is empty"
 *   -E2BIG                     "<path>: longer than <cap - 1> bytes"
 * On failure buf holds no byte of the file (it is zeroed).
 */
int ol_secret_file_read(const char *path, char *buf, size_t cap, unsigned *mode, char *err,
                        size_t errlen);

/* True when mode (from ol_secret_file_read) lets group or others read or
 * write the file. */
static inline int ol_secret_file_loose(unsigned mode)
{
    return (mode & 077) != 0;
}

#endif
