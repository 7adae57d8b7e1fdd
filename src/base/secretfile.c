/*
 * secretfile.c - see secretfile.h.
 */
#include "base/secretfile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define OL_SECRET_FILE_MAX 4096

int ol_secret_file_read(const char *path, char *buf, size_t cap, unsigned *mode, char *err,
                        size_t errlen)
{
    char tmp[OL_SECRET_FILE_MAX + 1];
    size_t n = 0;
    int rc = 0;
    if (cap)
        buf[0] = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) {
        rc = -errno;
        snprintf(err, errlen, "%s: cannot open: %s", path, strerror(-rc));
        return rc;
    }
    struct stat st;
    if (fstat(fd, &st) < 0) {
        rc = -errno;
        snprintf(err, errlen, "%s: %s", path, strerror(-rc));
        goto out;
    }
    if (!S_ISREG(st.st_mode)) {
        rc = -EINVAL;
        snprintf(err, errlen, "%s: not a regular file", path);
        goto out;
    }
    if (mode)
        *mode = (unsigned)st.st_mode & 07777;
    while (n < sizeof tmp) {
        ssize_t r = read(fd, tmp + n, sizeof tmp - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            rc = -errno;
            snprintf(err, errlen, "%s: read: %s", path, strerror(-rc));
            goto out;
        }
        if (r == 0)
            break;
        n += (size_t)r;
    }
    while (n > 0 && (tmp[n - 1] == '\n' || tmp[n - 1] == '\r' || tmp[n - 1] == ' ' ||
                     tmp[n - 1] == '\t'))
        n--;
    if (n == 0) {
        rc = -ENODATA;
        snprintf(err, errlen, "%s: is empty", path);
    } else if (cap == 0 || n > cap - 1) {
        rc = -E2BIG;
        snprintf(err, errlen, "%s: longer than %zu bytes", path, cap ? cap - 1 : 0);
    } else if (memchr(tmp, 0, n)) {
        rc = -EINVAL;
        snprintf(err, errlen, "%s: holds a NUL byte", path);
    } else {
        memcpy(buf, tmp, n);
        buf[n] = 0;
        rc = (int)n;
    }
out:
    close(fd);
    explicit_bzero(tmp, sizeof tmp);
    return rc;
}
