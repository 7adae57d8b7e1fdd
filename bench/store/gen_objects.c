/*
 * gen_objects.c - fills a bucket of a stopped openlaked with N objects for
 * the end-to-end listing benchmark (bench/store/run_list.sh), without N
 * PUTs: each object gets its object directory and a metadata file copied
 * from a template object that a real PUT made (same version fields, its
 * own key and mtime), written with the metadata codec (store/meta.h) at
 * the place the engine would use (store/layout.h). Not fsynced: this is
 * benchmark data, and the daemon's start rebuilds the listing index from
 * these files exactly as after a crash.
 *
 *   gen_objects DRIVE BUCKET TEMPLATE_KEY N
 *
 * Keys: "dir%04u/file%06u.bin", 500 per folder (bench/store/index_bench.c's
 * "dirs" set). One drive (a set of one): the metadata file is the whole
 * object. Prints the number written.
 */
#include "store/format.h"
#include "store/layout.h"
#include "store/meta.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static int read_all(const char *path, uint8_t *buf, size_t cap, size_t *len)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return -errno;
    ssize_t n = read(fd, buf, cap);
    close(fd);
    if (n < 0)
        return -errno;
    *len = (size_t)n;
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: gen_objects DRIVE BUCKET TEMPLATE_KEY N\n");
        return 2;
    }
    const char *drive = argv[1], *bucket = argv[2], *tkey = argv[3];
    unsigned long n = strtoul(argv[4], NULL, 10);
    struct ol_format f;
    if (ol_format_read(drive, &f) < 0) {
        fprintf(stderr, "gen_objects: %s has no OpenLake format (start the daemon once)\n",
                drive);
        return 1;
    }
    char objects[4300], path[4700];
    snprintf(objects, sizeof objects, "%s/.openlake/buckets/%s/objects", drive, bucket);
    char odir[OL_LAYOUT_DIR_LEN];
    ol_layout_object_dir(f.deployment, tkey, strlen(tkey), odir);
    snprintf(path, sizeof path, "%s/%s/meta", objects, odir);
    static uint8_t tbuf[OL_META_MAX_FILE], out[OL_META_MAX_FILE];
    size_t tlen = 0;
    struct ol_meta_file mf;
    struct ol_meta_version v;
    if (read_all(path, tbuf, sizeof tbuf, &tlen) < 0 || ol_meta_open(tbuf, tlen, &mf) < 0 ||
        ol_meta_latest(&mf, &v) < 0) {
        fprintf(stderr, "gen_objects: no template object %s/%s (%s)\n", bucket, tkey, path);
        return 1;
    }
    static bool made_ab[256];
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    uint64_t t0 = (uint64_t)now.tv_sec * 1000000000ull + (uint64_t)now.tv_nsec;
    unsigned long done = 0;
    for (unsigned long i = 0; i < n; i++) {
        char key[64];
        int kl = snprintf(key, sizeof key, "dir%04lu/file%06lu.bin", i / 500, i);
        ol_layout_object_dir(f.deployment, key, (size_t)kl, odir);
        unsigned ab = (unsigned)strtoul((char[]){odir[0], odir[1], 0}, NULL, 16);
        if (!made_ab[ab]) {
            snprintf(path, sizeof path, "%s/%.2s", objects, odir);
            if (mkdir(path, 0755) < 0 && errno != EEXIST)
                goto fail;
            made_ab[ab] = true;
        }
        snprintf(path, sizeof path, "%s/%s", objects, odir);
        if (mkdir(path, 0755) < 0 && errno != EEXIST)
            goto fail;
        v.mtime_ns = t0 + i;
        int len = ol_meta_put_version(NULL, 0, key, (size_t)kl, &v, false, out, sizeof out);
        if (len < 0) {
            fprintf(stderr, "gen_objects: encoding %s: %s\n", key, strerror(-len));
            return 1;
        }
        snprintf(path, sizeof path, "%s/%s/meta", objects, odir);
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd < 0 || write(fd, out, (size_t)len) != len)
            goto fail;
        close(fd);
        done++;
    }
    ol_format_free(&f);
    printf("%lu\n", done);
    return 0;
fail:
    fprintf(stderr, "gen_objects: %s: %s\n", path, strerror(errno));
    return 1;
}
