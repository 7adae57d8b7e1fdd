/*
 * creds.c - S3 credentials: configured, or generated once and kept in the
 * data dir (see creds.h).
 */
#include "s3/creds.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

static void finish(struct ol_s3_credset *s)
{
    for (int i = 0; i < s->n; i++) {
        s->ak_ptr[i] = s->access_key[i];
        s->sk_ptr[i] = s->secret[i];
    }
    s->view.access_keys = s->ak_ptr;
    s->view.secrets = s->sk_ptr;
    s->view.n = s->n;
}

/* `name = "value"` on one line; value copied into out[cap]. */
static int line_value(const char *line, const char *name, char *out, size_t cap)
{
    size_t nl = strlen(name);
    if (strncmp(line, name, nl) != 0)
        return -ENOENT;
    const char *p = line + nl;
    while (*p == ' ')
        p++;
    if (*p++ != '=')
        return -EINVAL;
    while (*p == ' ')
        p++;
    if (*p++ != '"')
        return -EINVAL;
    const char *end = strchr(p, '"');
    if (!end || (size_t)(end - p) == 0 || (size_t)(end - p) >= cap)
        return -EINVAL;
    for (const char *c = p; c < end; c++)
        if (*c < 0x21 || *c > 0x7e || *c == '\\')
            return -EINVAL;
    memcpy(out, p, (size_t)(end - p));
    out[end - p] = 0;
    return 0;
}

static int read_file(struct ol_s3_credset *s, char *err, size_t errlen)
{
    int fd = open(s->path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return -errno;
    struct stat st;
    char buf[1024];
    ssize_t n = -1;
    if (fstat(fd, &st) == 0 && (st.st_mode & 077) == 0)
        n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n < 0 || (st.st_mode & 077)) {
        snprintf(err, errlen, "%s: unreadable or not mode 0600 (chmod 600 it, or delete it "
                 "to generate a new pair)", s->path);
        return -EACCES;
    }
    buf[n] = 0;
    int have_ak = 0, have_sk = 0;
    for (char *line = strtok(buf, "\n"); line; line = strtok(NULL, "\n")) {
        if (line[0] == '#' || line[0] == 0)
            continue;
        if (line_value(line, "access_key", s->access_key[0], OL_CONFIG_KEY_LEN) == 0)
            have_ak++;
        else if (line_value(line, "secret_key", s->secret[0], OL_CONFIG_KEY_LEN) == 0)
            have_sk++;
        else
            goto bad;
    }
    if (have_ak != 1 || have_sk != 1)
        goto bad;
    s->n = 1;
    return 0;
bad:
    snprintf(err, errlen, "%s: expected one access_key = \"...\" and one secret_key = \"...\" "
             "line (delete the file to generate a new pair)", s->path);
    return -EINVAL;
}

static void random_chars(char *out, size_t n, const char *alphabet, const unsigned char *rnd)
{
    size_t al = strlen(alphabet);
    for (size_t i = 0; i < n; i++)
        out[i] = alphabet[rnd[i] % al];   /* 256 % al bias is < 1 bit of 200+ */
    out[n] = 0;
}

static int generate(struct ol_s3_credset *s, const char *dir, char *err, size_t errlen)
{
    unsigned char rnd[60];
    if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd) {
        snprintf(err, errlen, "getrandom: %s", strerror(errno));
        return -EIO;
    }
    random_chars(s->access_key[0], 20, "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789", rnd);
    random_chars(s->secret[0], 40,
                 "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/", rnd + 20);
    char tmp[sizeof s->path + 8];
    snprintf(tmp, sizeof tmp, "%s.tmp", s->path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0)
        goto fail;
    char body[512];
    int n = snprintf(body, sizeof body,
                     "# OpenLake S3 credentials, generated on the first start. Keep this file\n"
                     "# secret (mode 0600). Configured [[credentials]] or OPENLAKE_ACCESS_KEY /\n"
                     "# OPENLAKE_SECRET_KEY take the place of this file.\n"
                     "access_key = \"%s\"\nsecret_key = \"%s\"\n", s->access_key[0], s->secret[0]);
    if (write(fd, body, (size_t)n) != n || fsync(fd) < 0) {
        close(fd);
        unlink(tmp);
        goto fail;
    }
    close(fd);
    if (rename(tmp, s->path) < 0) {
        unlink(tmp);
        goto fail;
    }
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        fsync(dfd);
        close(dfd);
    }
    s->n = 1;
    s->generated = true;
    return 0;
fail:;
    int rc = -errno;
    snprintf(err, errlen, "%s: cannot write the generated credentials: %s", s->path,
             strerror(errno));
    return rc;
}

int ol_s3_creds_load(const struct ol_config *cfg, const char *dir, struct ol_s3_credset *out,
                     char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    if (cfg->n_credentials > 0) {
        for (int i = 0; i < cfg->n_credentials; i++) {
            snprintf(out->access_key[i], OL_CONFIG_KEY_LEN, "%s", cfg->credentials[i].access_key);
            snprintf(out->secret[i], OL_CONFIG_KEY_LEN, "%s", cfg->credentials[i].secret_key);
        }
        out->n = cfg->n_credentials;
        finish(out);
        return 0;
    }
    snprintf(out->path, sizeof out->path, "%s/%s", dir, OL_S3_CREDS_FILE);
    int rc = read_file(out, err, errlen);
    if (rc == -ENOENT)
        rc = generate(out, dir, err, errlen);
    else if (rc < 0 && !err[0])
        snprintf(err, errlen, "%s: %s", out->path, strerror(-rc));
    if (rc < 0)
        return rc;
    finish(out);
    return 0;
}
