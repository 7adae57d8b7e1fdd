/*
 * buckets.c - the shared bucket list (see buckets.h).
 */
#include "s3/buckets.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "store/layout.h"

static int cmp(const void *a, const void *b)
{
    return strcmp(((const struct ol_s3_bucket *)a)->name, ((const struct ol_s3_bucket *)b)->name);
}

int ol_s3_buckets_load(struct ol_s3_buckets *b, const char *const *drives, unsigned n)
{
    memset(b, 0, sizeof *b);
    pthread_mutex_init(&b->mu, NULL);
    b->v = calloc(OL_S3_MAX_BUCKETS, sizeof *b->v);
    unsigned *seen = calloc(OL_S3_MAX_BUCKETS, sizeof *seen);
    if (!b->v || !seen) {
        free(seen);
        return -ENOMEM;
    }
    for (unsigned d = 0; d < n; d++) {
        char path[4200];
        snprintf(path, sizeof path, "%s/.openlake/buckets", drives[d]);
        DIR *dir = opendir(path);
        if (!dir)
            continue;
        struct dirent *e;
        while ((e = readdir(dir))) {
            size_t len = strlen(e->d_name);
            if (ol_layout_bucket_ok(e->d_name, len) < 0)
                continue;
            char full[sizeof path + 256 + 2];
            snprintf(full, sizeof full, "%s/%s", path, e->d_name);
            struct statx sx;
            if (statx(AT_FDCWD, full, 0, STATX_BTIME | STATX_MTIME, &sx) < 0 ||
                !S_ISDIR(sx.stx_mode))
                continue;
            int64_t t = (sx.stx_mask & STATX_BTIME) ? sx.stx_btime.tv_sec : sx.stx_mtime.tv_sec;
            unsigned i = 0;
            while (i < b->n && strcmp(b->v[i].name, e->d_name) != 0)
                i++;
            if (i == b->n) {
                if (b->n == OL_S3_MAX_BUCKETS)
                    continue;
                memcpy(b->v[i].name, e->d_name, len + 1);
                b->v[i].created = t;
                b->n++;
            } else if (t < b->v[i].created) {
                b->v[i].created = t;
            }
            seen[i]++;
        }
        closedir(dir);
    }
    unsigned kept = 0;
    for (unsigned i = 0; i < b->n; i++)
        if (2 * seen[i] >= n)   /* on at least half the drives */
            b->v[kept++] = b->v[i];
    b->n = kept;
    free(seen);
    qsort(b->v, b->n, sizeof *b->v, cmp);
    return 0;
}

void ol_s3_buckets_free(struct ol_s3_buckets *b)
{
    free(b->v);
    b->v = NULL;
    pthread_mutex_destroy(&b->mu);
}

int ol_s3_buckets_add(struct ol_s3_buckets *b, const char *name, int64_t created)
{
    int rc = 0;
    pthread_mutex_lock(&b->mu);
    unsigned i = 0;
    while (i < b->n && strcmp(b->v[i].name, name) < 0)
        i++;
    if (i < b->n && strcmp(b->v[i].name, name) == 0) {
        /* already listed */
    } else if (b->n == OL_S3_MAX_BUCKETS) {
        rc = -ENOSPC;
    } else {
        memmove(&b->v[i + 1], &b->v[i], (b->n - i) * sizeof *b->v);
        snprintf(b->v[i].name, sizeof b->v[i].name, "%s", name);
        b->v[i].created = created;
        b->n++;
    }
    pthread_mutex_unlock(&b->mu);
    return rc;
}

void ol_s3_buckets_remove(struct ol_s3_buckets *b, const char *name)
{
    pthread_mutex_lock(&b->mu);
    for (unsigned i = 0; i < b->n; i++)
        if (strcmp(b->v[i].name, name) == 0) {
            memmove(&b->v[i], &b->v[i + 1], (b->n - i - 1) * sizeof *b->v);
            b->n--;
            break;
        }
    pthread_mutex_unlock(&b->mu);
}

unsigned ol_s3_buckets_list(struct ol_s3_buckets *b, struct ol_s3_bucket *out, unsigned max)
{
    pthread_mutex_lock(&b->mu);
    unsigned n = b->n < max ? b->n : max;
    memcpy(out, b->v, n * sizeof *out);
    pthread_mutex_unlock(&b->mu);
    return n;
}
