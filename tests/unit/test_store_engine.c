/*
 * test_store_engine.c - the object engine on a real loop with temporary
 * directories as drives: PUT/GET round trips across the inline threshold
 * and stripe boundaries, range reads, overwrite, delete, buckets,
 * durability across a re-open, reconstruction after lost drives and
 * flipped bytes, too many drives lost (-EIO, never wrong bytes), aborted
 * and interrupted PUTs, flow control, and pool exhaustion.
 *
 * The test thread drives the engine synchronously: each call posts a
 * message to the loop thread, which starts the operation, and the engine's
 * callback wakes the test thread when it is done (store_harness.h, shared
 * with test_store_mpu.c; the PUTs here finish with an ETag made of the size).
 */
#include "olt.h"
#include "store_harness.h"

#include "store/bitrot.h"
#include "store/ec.h"
#include "store/engine.h"
#include "store/engine_int.h"
#include "store/format.h"
#include "store/meta.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/statvfs.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- this file's environment and PUTs (the rest: store_harness.h) ------------------ */

static void env_open(struct sh_env *e, unsigned n, unsigned dps, int64_t inline_max)
{
    sh_env_open(e, n, dps, inline_max, 0);
}

static void env_reopen(struct sh_env *e)
{
    sh_env_stop(e, false);
    sh_env_start(e);
}

static void env_close(struct sh_env *e) { sh_env_stop(e, false); }

/* The version the PUTs of these tests finish with: an ETag made of the size. */
static void fill_version(struct sh_call *t, struct ol_meta_version *v)
{
    for (unsigned i = 0; i < 16; i++)
        v->etag[i] = (uint8_t)(t->size * 31 + i);
    static const char ct[] = "application/test";
    v->hdr[OL_META_HDR_CONTENT_TYPE] = (struct ol_meta_bytes){(const uint8_t *)ct, sizeof ct - 1};
}

static void fn_put(struct sh_call *t)
{
    struct ol_put_args a = {.bucket = t->bucket, .key = t->key, .size = t->size,
                            .parity = t->parity};
    t->fill = fill_version;
    int rc = ol_put_begin(t->e->c, &a, sh_put_cb, t, &t->put);
    if (rc < 0)
        return sh_done(t, rc);
    sh_put_pump(t);
}

static int put_full(struct sh_env *e, const char *b, const char *k, const uint8_t *data,
                    uint64_t size, int parity, struct sh_call *out)
{
    struct sh_call t;
    memset(&t, 0, sizeof t);
    t.bucket = b;
    t.key = k;
    t.data = data;
    t.size = t.stop = size;
    t.chunk = OL_STORE_WRITE_MAX;
    t.parity = parity;
    int rc = sh_call(e, &t, fn_put);
    if (out)
        *out = t;
    return rc;
}

static int put(struct sh_env *e, const char *b, const char *k, const uint8_t *data, uint64_t size)
{
    return put_full(e, b, k, data, size, -1, NULL);
}

static int head(struct sh_env *e, const char *b, const char *k, uint64_t *size)
{
    struct sh_call t;
    int rc = sh_head(e, b, k, &t);
    if (size)
        *size = t.msize;
    return rc;
}

/* ---- looking at the drives --------------------------------------------------------- */

static void part_path(const struct sh_env *e, unsigned i, const char *b, const char *k, char *out,
                      size_t len)
{
    OLT_CHECK(sh_part_path(e, i, b, k, 1, out, len));
}

/* ---- tests ------------------------------------------------------------------------- */

/* Objects of many sizes, with the shard files written with O_DIRECT where
 * the drives take it (direct_io 0) or buffered (-1): the same bytes read
 * back, and the files are exactly as bitrot.h frames them. Records are
 * 8 + 32 KiB here, so each stripe's starts 8 bytes further into its page:
 * the sizes end on and off page boundaries, in the first stripe, after 512
 * stripes (the offsets have gone round a page), and one whose last record
 * is smaller than a page. */
static void put_get_sizes(int direct_io)
{
    struct sh_env e;
    env_open(&e, 4, 4, -1);   /* one set, k 2 + m 2 */
    if (direct_io) {
        e.p.direct_io = direct_io;
        env_reopen(&e);
    }
    OLT_CHECK_EQ(ol_store_parity(e.s), 2);
    uint32_t inl = ol_store_inline_max(e.s);
    OLT_CHECK_EQ(inl, SH_STRIPE); /* the default 128 KiB, clamped to the stripe */
    OLT_CHECK_EQ(sh_bucket_create(&e, "bkt"), 0);
    uint64_t sd = 2 * ol_ec_shard_len(SH_STRIPE, 2); /* data bytes per stripe */
    uint64_t sizes[] = {0, 1, 63, inl, inl + 1, 3 * sd, 2 * sd + sd / 2 + 7, 5 * sd + 1,
                        3 * sd + 10, 2 * 4088 * 2, 513 * sd + 12345};
    for (unsigned i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        char key[64];
        snprintf(key, sizeof key, "dir/obj-%u", i);
        uint8_t *data = sh_pattern(sizes[i], i);
        OLT_CHECK_EQ(put(&e, "bkt", key, data, sizes[i]), 0);
        sh_check_get(&e, "bkt", key, data, sizes[i]);
        uint64_t hs = 99;
        OLT_CHECK_EQ(head(&e, "bkt", key, &hs), 0);
        OLT_CHECK_EQ(hs, sizes[i]);
        /* on disk: inline objects are one file per drive; others meta + one shard file */
        for (unsigned d = 0; d < 4; d++) {
            char dir[700];
            sh_obj_dir(&e, d, "bkt", key, dir, sizeof dir);
            OLT_CHECK_EQ(sh_count_entries(dir), sizes[i] <= inl ? 1 : 2);
            if (sizes[i] > inl) {
                char pp[900];
                part_path(&e, d, "bkt", key, pp, sizeof pp);
                struct stat st;
                OLT_CHECK_EQ(stat(pp, &st), 0);
                uint64_t nst = (sizes[i] + sd - 1) / sd, last = sizes[i] - (nst - 1) * sd;
                uint64_t shard = (nst - 1) * (sd / 2) + ol_ec_shard_len(last, 2);
                /* the blocks, then zeros to a page boundary (bitrot.h) */
                uint64_t framed = ol_bitrot_file_size((uint32_t)(sd / 2), shard);
                OLT_CHECK_EQ((uint64_t)st.st_size, (framed + 4095) / 4096 * 4096);
                uint8_t pad[4096], zero[4096] = {0};
                size_t np = (size_t)st.st_size - framed;
                int fd = open(pp, O_RDONLY | O_CLOEXEC);
                OLT_CHECK(fd >= 0);
                OLT_CHECK_EQ(pread(fd, pad, np, (off_t)framed), (ssize_t)np);
                close(fd);
                OLT_CHECK_MEM(pad, zero, np);
            }
        }
        free(data);
    }
    struct ol_store_stats st = sh_stats(&e);
    OLT_CHECK_EQ(st.puts, sizeof sizes / sizeof *sizes);
    OLT_CHECK_EQ(st.reads_reconstructed, 0);
    OLT_CHECK_EQ(st.checksum_failures, 0);
    bool dio = ol_store_drive_direct_io(e.s, 0);
    for (unsigned d = 1; d < 4; d++)   /* another node's drive takes no O_DIRECT */
        OLT_CHECK_EQ(ol_store_drive_direct_io(e.s, d), sh_remote_mode() && d % 2 ? false : dio);
    if (direct_io < 0)
        OLT_CHECK(!dio);
    if (dio) /* every byte, the last pages whole (on two drives of four: two remote) */
        OLT_CHECK(st.direct_bytes > (sh_remote_mode() ? 2u : 4u) * 513 * (sd / 2));
    else
        OLT_CHECK_EQ(st.direct_bytes, 0);
    sh_check_tmp_empty(&e);
    sh_settle(&e);
    env_close(&e);
}

OLT_TEST_T(store_engine_put_get_sizes, 120) { put_get_sizes(0); }

OLT_TEST_T(store_engine_put_get_sizes_buffered, 120) { put_get_sizes(-1); }

OLT_TEST_T(store_engine_two_sets_and_parity_override, 120)
{
    struct sh_env e;
    env_open(&e, 6, 3, 0);    /* two sets of k 2 + m 1; nothing inline */
    OLT_CHECK_EQ(ol_store_sets(e.s), 2);
    OLT_CHECK_EQ(sh_bucket_create(&e, "two"), 0);
    OLT_CHECK_EQ(sh_bucket_exists(&e, "two"), 0);
    unsigned in_set[2] = {0, 0};
    for (unsigned i = 0; i < 12; i++) {
        char key[32];
        snprintf(key, sizeof key, "k%u", i);
        uint64_t size = 1000 + 7919u * i;
        uint8_t *data = sh_pattern(size, 100 + i);
        OLT_CHECK_EQ(put(&e, "two", key, data, size), 0);
        in_set[ol_store_set_of(e.s, "two", key)]++;
        sh_check_get(&e, "two", key, data, size);
        free(data);
    }
    OLT_CHECK(in_set[0] > 0 && in_set[1] > 0);
    /* parity 0 (k 3): every drive of the set is needed, and holds a data shard */
    uint8_t *data = sh_pattern(200000, 7);
    struct sh_call t;
    OLT_CHECK_EQ(put_full(&e, "two", "p0", data, 200000, 0, &t), 0);
    sh_check_get(&e, "two", "p0", data, 200000);
    OLT_CHECK_EQ(put_full(&e, "two", "p9", data, 10, 9, &t), -EINVAL);
    free(data);
    sh_settle(&e);
    env_close(&e);
}

OLT_TEST_T(store_engine_range_reads, 120)
{
    struct sh_env e;
    env_open(&e, 4, 4, 4096);
    OLT_CHECK_EQ(sh_bucket_create(&e, "rng"), 0);
    uint64_t sd = 2 * ol_ec_shard_len(SH_STRIPE, 2);
    uint64_t size = 2 * sd + sd / 3;
    uint8_t *data = sh_pattern(size, 3), *buf = malloc(size);
    OLT_CHECK_EQ(put(&e, "rng", "big", data, size), 0);
    OLT_CHECK_EQ(put(&e, "rng", "small", data, 1000), 0);
    struct { uint64_t off; int64_t len; uint64_t want_off, want_len; } cases[] = {
        {0, 1, 0, 1},                               /* first byte */
        {size - 1, 1, size - 1, 1},                 /* last byte */
        {size - 1, -1, size - 1, 1},
        {sd - 10, 20, sd - 10, 20},                 /* across a stripe boundary */
        {sd / 2 - 3, (int64_t)sd, sd / 2 - 3, sd},  /* across shards and stripes */
        {sd, (int64_t)sd, sd, sd},                  /* exactly one stripe */
        {12345, -1, 12345, size - 12345},           /* to the end */
        {size - 100, 1000, size - 100, 100},        /* clamped at the end */
        {0, (int64_t)size, 0, size},
    };
    for (unsigned i = 0; i < sizeof cases / sizeof *cases; i++) {
        uint64_t got = 0;
        OLT_CHECK_EQ(sh_get_range(&e, "rng", "big", cases[i].off, cases[i].len, buf, size, &got),
                     0);
        OLT_CHECK_EQ(got, cases[i].want_len);
        OLT_CHECK_MEM(buf, data + cases[i].want_off, got);
    }
    uint64_t got = 0;
    OLT_CHECK_EQ(sh_get_range(&e, "rng", "big", size, 1, buf, size, &got), -ERANGE);
    OLT_CHECK_EQ(sh_get_range(&e, "rng", "big", size + 5, -1, buf, size, &got), -ERANGE);
    OLT_CHECK_EQ(sh_get_range(&e, "rng", "big", 5, 0, buf, size, &got), -ERANGE);
    /* inline object */
    OLT_CHECK_EQ(sh_get_range(&e, "rng", "small", 999, 1, buf, size, &got), 0);
    OLT_CHECK_EQ(got, 1);
    OLT_CHECK_EQ(buf[0], data[999]);
    OLT_CHECK_EQ(sh_get_range(&e, "rng", "small", 100, 300, buf, size, &got), 0);
    OLT_CHECK_EQ(got, 300);
    OLT_CHECK_MEM(buf, data + 100, 300);
    OLT_CHECK_EQ(sh_get_range(&e, "rng", "small", 1000, 1, buf, size, &got), -ERANGE);
    free(data);
    free(buf);
    sh_settle(&e);
    env_close(&e);
}

OLT_TEST_T(store_engine_overwrite_removes_old_data, 120)
{
    struct sh_env e;
    env_open(&e, 4, 4, 4096);
    OLT_CHECK_EQ(sh_bucket_create(&e, "ow"), 0);
    uint8_t *a = sh_pattern(300000, 1), *b = sh_pattern(150000, 2), *c = sh_pattern(100, 3);
    OLT_CHECK_EQ(put(&e, "ow", "x", a, 300000), 0);
    char old[4][900];
    for (unsigned d = 0; d < 4; d++)
        part_path(&e, d, "ow", "x", old[d], sizeof old[d]);
    OLT_CHECK_EQ(put(&e, "ow", "x", b, 150000), 0);
    sh_check_get(&e, "ow", "x", b, 150000);
    for (unsigned d = 0; d < 4; d++) {
        OLT_CHECK(access(old[d], F_OK) != 0);          /* old shard file gone */
        char dir[700], now[900];
        sh_obj_dir(&e, d, "ow", "x", dir, sizeof dir);
        OLT_CHECK_EQ(sh_count_entries(dir), 2);           /* meta + the new shard file */
        part_path(&e, d, "ow", "x", now, sizeof now);
        struct stat st;
        OLT_CHECK_EQ(stat(now, &st), 0);
        OLT_CHECK(S_ISREG(st.st_mode));                  /* flat: beside meta, no data dir */
        OLT_CHECK(strcmp(now, old[d]) != 0);
    }
    /* overwrite with an inline object: the shard file goes too */
    OLT_CHECK_EQ(put(&e, "ow", "x", c, 100), 0);
    sh_check_get(&e, "ow", "x", c, 100);
    for (unsigned d = 0; d < 4; d++) {
        char dir[700];
        sh_obj_dir(&e, d, "ow", "x", dir, sizeof dir);
        OLT_CHECK_EQ(sh_count_entries(dir), 1);
    }
    free(a);
    free(b);
    free(c);
    sh_settle(&e);
    env_close(&e);
}

/* Four drives on one 8 MiB tmpfs at fs (olt_tmpdir()/fs), the store
 * started on them, the tmpfs in the test's own mount namespace. Skips where
 * a tmpfs cannot be mounted. */
static void tmpfs_env(struct sh_env *e, char *fs, size_t fslen)
{
    snprintf(fs, fslen, "%s/fs", olt_tmpdir());
    OLT_CHECK_EQ(mkdir(fs, 0700), 0);
    if (!sh_own_mount_ns() || mount("tmpfs", fs, "tmpfs", 0, "size=8m") != 0)
        OLT_SKIP("cannot mount a tmpfs here (not root, or no privilege)");
    memset(e, 0, sizeof *e);
    e->n = e->dps = 4;
    for (unsigned i = 0; i < 4; i++) {
        snprintf(e->path[i], sizeof e->path[i], "%s/d%u", fs, i);
        OLT_CHECK_EQ(mkdir(e->path[i], 0700), 0);
        e->dp[i] = e->path[i];
    }
    e->p = (struct ol_store_params){.drives = e->dp, .n = 4, .drives_per_set = 4, .parity = -1,
                                    .stripe_bytes = SH_STRIPE, .inline_max = -1};
    sh_env_start(e);
}

/* Drives without room for the shard files: the PUT fails when its files are
 * made (each is reserved at its full size), not after streaming the body;
 * nothing stays behind, and what fits is stored. */
OLT_TEST_T(store_engine_full_drives_fail_before_the_body, 60)
{
    char fs[400];
    struct sh_env e;
    tmpfs_env(&e, fs, sizeof fs);
    OLT_CHECK_EQ(sh_bucket_create(&e, "full"), 0);
    uint64_t big = 64u << 20;   /* 32 MiB per drive, on 8 MiB for all four */
    uint8_t *data = sh_pattern(big, 7);
    struct sh_call t;
    OLT_CHECK_EQ(put_full(&e, "full", "big", data, big, -1, &t), OL_STORE_EFULL);
    OLT_CHECK(t.written <= OL_STORE_PUT_SLOTS * 2 * ol_ec_shard_len(SH_STRIPE, 2));
    sh_settle(&e);
    sh_check_tmp_empty(&e);
    OLT_CHECK_EQ(head(&e, "full", "big", NULL), -ENOENT);
    OLT_CHECK_EQ(put(&e, "full", "fits", data, 1u << 20), 0);  /* 512 KiB per drive */
    sh_check_get(&e, "full", "fits", data, 1u << 20);
    free(data);
    sh_env_stop(&e, false);
    OLT_CHECK_EQ(umount2(fs, MNT_DETACH), 0);
}

/* Free bytes of the filesystem at path (what an unprivileged file gets). */
static uint64_t free_bytes(const char *path)
{
    struct statvfs v;
    OLT_CHECK_EQ(statvfs(path, &v), 0);
    return (uint64_t)v.f_bavail * v.f_bsize;
}

/*
 * Drives that run out of room after the PUT reserved its shard files (the
 * metadata's page is what is missing; a write past a reservation would be
 * the same): the write fails as full (OL_STORE_EFULL: S3's
 * XOpenLakeStorageFull, 507), not as a failed store (-EIO: 503), and leaves
 * nothing behind. All four drives share
 * one tmpfs, filled so that exactly the four shard files still fit.
 */
OLT_TEST_T(store_engine_full_after_the_reservation, 60)
{
    char fs[400];
    struct sh_env e;
    tmpfs_env(&e, fs, sizeof fs);
    OLT_CHECK_EQ(sh_bucket_create(&e, "room"), 0);
    uint64_t size = 300000;
    uint8_t *data = sh_pattern(size, 17);
    uint64_t pages = (ol_se_part_blocks(size, 2, ol_ec_shard_len(SH_STRIPE, 2)) + 4095) / 4096;
    char filler[500];
    snprintf(filler, sizeof filler, "%s/filler", fs);
    int fd = open(filler, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
    OLT_CHECK(fd >= 0);
    uint64_t room = free_bytes(fs);
    OLT_CHECK(room > 4 * pages * 4096);
    OLT_CHECK_EQ(fallocate(fd, 0, 0, (off_t)(room - 4 * pages * 4096)), 0);
    close(fd);
    OLT_CHECK_EQ(free_bytes(fs), 4 * pages * 4096);   /* the four shard files, no more */
    OLT_CHECK_EQ(put(&e, "room", "k", data, size), OL_STORE_EFULL);
    sh_settle(&e);
    sh_check_tmp_empty(&e);
    OLT_CHECK_EQ(head(&e, "room", "k", NULL), -ENOENT);
    OLT_CHECK_EQ(free_bytes(fs), 4 * pages * 4096);   /* its reservations given back */
    OLT_CHECK_EQ(unlink(filler), 0);
    OLT_CHECK_EQ(put(&e, "room", "k", data, size), 0);
    sh_check_get(&e, "room", "k", data, size);
    free(data);
    sh_env_stop(&e, false);
    OLT_CHECK_EQ(umount2(fs, MNT_DETACH), 0);
}

OLT_TEST_T(store_engine_delete_then_get, 60)
{
    struct sh_env e;
    env_open(&e, 4, 4, -1);
    OLT_CHECK_EQ(sh_bucket_create(&e, "del"), 0);
    uint8_t *a = sh_pattern(200000, 4);
    OLT_CHECK_EQ(put(&e, "del", "gone", a, 200000), 0);
    OLT_CHECK_EQ(put(&e, "del", "tiny", a, 10), 0);
    OLT_CHECK_EQ(sh_del(&e, "del", "gone"), 0);
    OLT_CHECK_EQ(sh_get_range(&e, "del", "gone", 0, -1, NULL, 0, NULL), -ENOENT);
    OLT_CHECK_EQ(head(&e, "del", "gone", NULL), -ENOENT);
    OLT_CHECK_EQ(sh_del(&e, "del", "gone"), 0);           /* missing: still success */
    OLT_CHECK_EQ(sh_del(&e, "del", "never"), 0);
    for (unsigned d = 0; d < 4; d++) {
        char dir[700];
        sh_obj_dir(&e, d, "del", "gone", dir, sizeof dir);
        OLT_CHECK_EQ(sh_count_entries(dir), -1);
    }
    sh_check_get(&e, "del", "tiny", a, 10);
    OLT_CHECK_EQ(sh_del(&e, "del", "tiny"), 0);
    OLT_CHECK_EQ(head(&e, "del", "tiny", NULL), -ENOENT);
    /* put after delete works (directories made again) */
    OLT_CHECK_EQ(put(&e, "del", "gone", a, 1234), 0);
    sh_check_get(&e, "del", "gone", a, 1234);
    free(a);
    sh_settle(&e);
    env_close(&e);
}

OLT_TEST_T(store_engine_buckets, 60)
{
    struct sh_env e;
    env_open(&e, 6, 3, -1);
    uint8_t *a = sh_pattern(500000, 5);
    OLT_CHECK_EQ(sh_bucket_exists(&e, "nob"), OL_STORE_ENOBUCKET);
    OLT_CHECK_EQ(sh_get_range(&e, "nob", "k", 0, -1, NULL, 0, NULL), OL_STORE_ENOBUCKET);
    OLT_CHECK_EQ(head(&e, "nob", "k", NULL), OL_STORE_ENOBUCKET);
    OLT_CHECK_EQ(put(&e, "nob", "k", a, 5000), OL_STORE_ENOBUCKET);
    OLT_CHECK_EQ(put(&e, "nob", "k", a, 500000), OL_STORE_ENOBUCKET);
    sh_settle(&e);
    sh_check_tmp_empty(&e);   /* the shard files made beside the bucket's statx */
    OLT_CHECK_EQ(sh_del(&e, "nob", "k"), OL_STORE_ENOBUCKET);
    OLT_CHECK_EQ(sh_bucket_delete(&e, "nob"), OL_STORE_ENOBUCKET);
    OLT_CHECK_EQ(sh_bucket_create(&e, "yes"), 0);
    OLT_CHECK_EQ(sh_bucket_create(&e, "yes"), -EEXIST);
    OLT_CHECK_EQ(sh_bucket_exists(&e, "yes"), 0);
    OLT_CHECK_EQ(put(&e, "yes", "k", a, 5000), 0);
    OLT_CHECK_EQ(sh_bucket_delete(&e, "yes"), -ENOTEMPTY);
    sh_check_get(&e, "yes", "k", a, 5000);
    OLT_CHECK_EQ(sh_del(&e, "yes", "k"), 0);
    OLT_CHECK_EQ(sh_bucket_delete(&e, "yes"), 0);
    OLT_CHECK_EQ(sh_bucket_exists(&e, "yes"), OL_STORE_ENOBUCKET);
    for (unsigned d = 0; d < 6; d++) {
        char p[600];
        snprintf(p, sizeof p, "%s/.openlake/buckets", e.path[d]);
        OLT_CHECK_EQ(sh_count_entries(p), 0);
    }
    free(a);
    sh_settle(&e);
    env_close(&e);
}

OLT_TEST_T(store_engine_durable_across_reopen, 120)
{
    struct sh_env e;
    env_open(&e, 6, 3, -1);
    OLT_CHECK_EQ(sh_bucket_create(&e, "dur"), 0);
    uint64_t sizes[] = {0, 17, 40000, 300001};
    uint8_t *data[4];
    for (unsigned i = 0; i < 4; i++) {
        char key[16];
        snprintf(key, sizeof key, "o%u", i);
        data[i] = sh_pattern(sizes[i], 40 + i);
        OLT_CHECK_EQ(put(&e, "dur", key, data[i], sizes[i]), 0);
    }
    env_reopen(&e);
    OLT_CHECK_EQ(sh_bucket_exists(&e, "dur"), 0);
    for (unsigned i = 0; i < 4; i++) {
        char key[16];
        snprintf(key, sizeof key, "o%u", i);
        sh_check_get(&e, "dur", key, data[i], sizes[i]);
        free(data[i]);
    }
    sh_check_tmp_empty(&e);
    sh_settle(&e);
    env_close(&e);
}

OLT_TEST_T(store_engine_reconstructs_after_m_drives_lost, 120)
{
    struct sh_env e;
    env_open(&e, 4, 4, 4096);
    OLT_CHECK_EQ(sh_bucket_create(&e, "rc"), 0);
    uint64_t size = 400000;
    uint8_t *a = sh_pattern(size, 8), *s = sh_pattern(3000, 9);
    OLT_CHECK_EQ(put(&e, "rc", "big", a, size), 0);
    OLT_CHECK_EQ(put(&e, "rc", "small", s, 3000), 0);
    /* wipe the two drives with the data shards of "big": both must be rebuilt */
    unsigned d0 = sh_drive_with_shard(&e, "rc", "big", 0);
    unsigned d1 = sh_drive_with_shard(&e, "rc", "big", 1);
    sh_wipe(e.path[d0]);
    sh_wipe(e.path[d1]);
    sh_check_get(&e, "rc", "big", a, size);
    sh_check_get(&e, "rc", "small", s, 3000);
    uint8_t buf[64];
    uint64_t got = 0;
    OLT_CHECK_EQ(sh_get_range(&e, "rc", "big", 200000, 64, buf, 64, &got), 0);
    OLT_CHECK_MEM(buf, a + 200000, 64);
    struct ol_store_stats st = sh_stats(&e);
    OLT_CHECK(st.reads_reconstructed >= 7); /* every stripe of big, and small */
    OLT_CHECK(st.needs_heal >= 3);
    OLT_CHECK_EQ(st.checksum_failures, 0);
    free(a);
    free(s);
    sh_settle(&e);
    env_close(&e);
}

OLT_TEST_T(store_engine_flipped_byte_is_never_served, 120)
{
    struct sh_env e;
    env_open(&e, 4, 4, 4096);
    OLT_CHECK_EQ(sh_bucket_create(&e, "rot"), 0);
    uint64_t size = 300000;
    uint32_t B = (uint32_t)ol_ec_shard_len(SH_STRIPE, 2);
    uint8_t *a = sh_pattern(size, 10), *s = sh_pattern(2000, 11);
    OLT_CHECK_EQ(put(&e, "rot", "big", a, size), 0);
    OLT_CHECK_EQ(put(&e, "rot", "small", s, 2000), 0);
    /* a data byte of stripe 1 of shard 0 */
    char pp[900];
    part_path(&e, sh_drive_with_shard(&e, "rot", "big", 0), "rot", "big", pp, sizeof pp);
    sh_flip_byte(pp, (uint64_t)(B + OL_BITROT_HDR_SIZE) + OL_BITROT_HDR_SIZE + 5);
    sh_check_get(&e, "rot", "big", a, size);
    struct ol_store_stats st = sh_stats(&e);
    OLT_CHECK_EQ(st.checksum_failures, 1);
    OLT_CHECK_EQ(st.reads_reconstructed, 1);
    /* a byte of a block header (shard 1, stripe 0) */
    part_path(&e, sh_drive_with_shard(&e, "rot", "big", 1), "rot", "big", pp, sizeof pp);
    sh_flip_byte(pp, 3);
    sh_check_get(&e, "rot", "big", a, size);
    st = sh_stats(&e);
    OLT_CHECK_EQ(st.checksum_failures, 3);  /* the first flip is read again */
    /* an inline object's metadata on one drive */
    char mp[800];
    sh_obj_dir(&e, sh_drive_with_shard(&e, "rot", "small", 0), "rot", "small", mp, sizeof mp);
    strcat(mp, "/meta");
    struct stat sst;
    OLT_CHECK_EQ(stat(mp, &sst), 0);
    sh_flip_byte(mp, (uint64_t)sst.st_size - 100);
    sh_check_get(&e, "rot", "small", s, 2000);
    st = sh_stats(&e);
    OLT_CHECK_EQ(st.checksum_failures, 4);
    OLT_CHECK(st.reads_reconstructed >= 3);
    free(a);
    free(s);
    sh_settle(&e);
    env_close(&e);
}

OLT_TEST_T(store_engine_too_many_lost_is_eio, 120)
{
    struct sh_env e;
    env_open(&e, 4, 4, 4096);
    OLT_CHECK_EQ(sh_bucket_create(&e, "eio"), 0);
    uint32_t B = (uint32_t)ol_ec_shard_len(SH_STRIPE, 2);
    uint64_t sd = 2ull * B, size = 3 * sd;
    /* a holds the 200000 bytes of the last PUT below too */
    uint8_t *a = sh_pattern(size > 200000 ? size : 200000, 12), *buf = malloc(size);
    OLT_CHECK_EQ(put(&e, "eio", "obj", a, size), 0);
    /* m + 1 corrupt shards of stripe 1: stripe 0 is served, then -EIO, no wrong byte */
    for (unsigned sh = 0; sh < 3; sh++) {
        char pp[900];
        part_path(&e, sh_drive_with_shard(&e, "eio", "obj", sh), "eio", "obj", pp, sizeof pp);
        sh_flip_byte(pp, (uint64_t)(B + OL_BITROT_HDR_SIZE) + OL_BITROT_HDR_SIZE + 100);
    }
    uint64_t got = 0;
    OLT_CHECK_EQ(sh_get_range(&e, "eio", "obj", 0, -1, buf, size, &got), -EIO);
    OLT_CHECK(got <= sd);
    OLT_CHECK_MEM(buf, a, got);
    OLT_CHECK_EQ(sh_get_range(&e, "eio", "obj", 2 * sd, 100, buf, size, &got), 0);
    OLT_CHECK_MEM(buf, a + 2 * sd, 100);
    /* m + 1 drives gone */
    OLT_CHECK_EQ(put(&e, "eio", "small", a, 100), 0);
    OLT_CHECK_EQ(put(&e, "eio", "mid", a, 100000), 0);
    for (unsigned d = 0; d < 3; d++)
        sh_wipe(e.path[d]);
    OLT_CHECK_EQ(sh_get_range(&e, "eio", "mid", 0, -1, buf, size, &got), -EIO);
    OLT_CHECK_EQ(sh_get_range(&e, "eio", "small", 0, -1, buf, size, &got), -EIO);
    OLT_CHECK_EQ(head(&e, "eio", "small", NULL), -EIO);
    OLT_CHECK_EQ(put(&e, "eio", "new", a, 100), -EIO);
    OLT_CHECK_EQ(put(&e, "eio", "new", a, 200000), -EIO);
    OLT_CHECK_EQ(sh_del(&e, "eio", "mid"), -EIO);
    sh_check_tmp_empty(&e);
    free(a);
    free(buf);
    sh_settle(&e);
    env_close(&e);
}

/* Writes `stop` of `size` bytes of a PUT and leaves it open. */
static void put_partial(struct sh_env *e, struct sh_call *t, const char *b, const char *k,
                        const uint8_t *data, uint64_t size, uint64_t stop)
{
    memset(t, 0, sizeof *t);
    t->bucket = b;
    t->key = k;
    t->data = data;
    t->size = size;
    t->stop = stop;
    t->chunk = 10000;
    t->parity = -1;
    OLT_CHECK_EQ(sh_call(e, t, fn_put), 0);
    OLT_CHECK(t->put != NULL);
}

OLT_TEST_T(store_engine_abort_leaves_nothing, 120)
{
    struct sh_env e;
    env_open(&e, 4, 4, 4096);
    OLT_CHECK_EQ(sh_bucket_create(&e, "ab"), 0);
    uint64_t size = 500000;
    uint8_t *a = sh_pattern(size, 13);
    OLT_CHECK_EQ(put(&e, "ab", "k", a, 1000), 0);   /* an old version stays visible */
    int fds = sh_count_fds();
    struct sh_call t;
    put_partial(&e, &t, "ab", "k", a, size, size / 2);
    usleep(50000);                                  /* let the writes land */
    for (unsigned d = 0; d < 4; d++) {
        char p[600];
        snprintf(p, sizeof p, "%s/.openlake/tmp", e.path[d]);
        OLT_CHECK_EQ(sh_count_entries(p), 2);           /* <tid>.part, <tid>.meta */
    }
    sh_call(&e, &t, sh_fn_abort_put);
    sh_settle(&e);
    sh_check_tmp_empty(&e);
    sh_check_get(&e, "ab", "k", a, 1000);
    /* abort of an inline PUT and of one that wrote nothing */
    put_partial(&e, &t, "ab", "k2", a, 3000, 1000);
    sh_call(&e, &t, sh_fn_abort_put);
    put_partial(&e, &t, "ab", "k3", a, size, 0);
    sh_call(&e, &t, sh_fn_abort_put);
    sh_settle(&e);
    OLT_CHECK_EQ(head(&e, "ab", "k2", NULL), -ENOENT);
    OLT_CHECK_EQ(head(&e, "ab", "k3", NULL), -ENOENT);
    OLT_CHECK_EQ(sh_count_fds(), fds);
    env_reopen(&e);
    sh_check_tmp_empty(&e);
    sh_check_get(&e, "ab", "k", a, 1000);
    OLT_CHECK_EQ(sh_stats(&e).puts, 0);
    free(a);
    sh_settle(&e);
    env_close(&e);
}

OLT_TEST_T(store_engine_interrupted_put_invisible_after_reopen, 120)
{
    struct sh_env e;
    env_open(&e, 4, 4, 4096);
    OLT_CHECK_EQ(sh_bucket_create(&e, "cr"), 0);
    uint64_t size = 500000;
    uint8_t *a = sh_pattern(size, 14);
    struct sh_call t;
    put_partial(&e, &t, "cr", "half", a, size, size - 1);
    usleep(50000);
    sh_env_stop(&e, true);       /* a crash: the PUT never finishes */
    sh_env_start(&e);
    sh_check_tmp_empty(&e);
    OLT_CHECK_EQ(head(&e, "cr", "half", NULL), -ENOENT);
    OLT_CHECK_EQ(sh_get_range(&e, "cr", "half", 0, -1, NULL, 0, NULL), -ENOENT);
    OLT_CHECK_EQ(put(&e, "cr", "half", a, size), 0);
    sh_check_get(&e, "cr", "half", a, size);
    free(a);
    sh_settle(&e);
    env_close(&e);
}

OLT_TEST_T(store_engine_flow_control_pauses_writer, 120)
{
    struct sh_env e;
    env_open(&e, 4, 4, -1);
    OLT_CHECK_EQ(sh_bucket_create(&e, "fc"), 0);
    uint64_t size = 40ull * SH_STRIPE + 12345;
    uint8_t *a = sh_pattern(size, 15);
    struct sh_call t;
    OLT_CHECK_EQ(put_full(&e, "fc", "stream", a, size, -1, &t), 0);
    OLT_CHECK(t.ones > 0);                /* ol_put_write said "full" */
    OLT_CHECK_EQ(t.readies, t.ones);      /* and EV_READY came each time */
    sh_check_get(&e, "fc", "stream", a, size);
    free(a);
    sh_settle(&e);
    env_close(&e);
}

static void fn_busy(struct sh_call *t)
{
    struct ol_get *g[3];
    struct ol_get_args a = {.bucket = "bz", .key = "k", .offset = 0, .length = -1};
    int rc = 0;
    for (unsigned i = 0; i < 2 && rc == 0; i++)
        rc = ol_get_begin(t->e->c, &a, sh_get_cb, t, &g[i]);
    if (rc == 0)
        rc = ol_get_begin(t->e->c, &a, sh_get_cb, t, &g[2]) == -EBUSY ? 0 : -EPROTO;
    struct ol_put_args pa = {.bucket = "bz", .key = "k", .size = 1, .parity = -1};
    struct ol_put *p;
    if (rc == 0 && ol_put_begin(t->e->c, &pa, sh_put_cb, t, &p) != -EBUSY)
        rc = -EPROTO;
    if (rc == 0 && ol_delete(t->e->c, "bz", "k", sh_simple_cb, t) != -EBUSY)
        rc = -EPROTO;
    ol_get_end(g[0]);   /* before any callback: allowed */
    ol_get_end(g[1]);
    sh_done(t, rc);
}

OLT_TEST_T(store_engine_pool_exhausted_is_ebusy, 60)
{
    struct sh_env e;
    memset(&e, 0, sizeof e);
    env_open(&e, 4, 4, -1);
    OLT_CHECK_EQ(sh_bucket_create(&e, "bz"), 0);
    sh_env_stop(&e, false);
    e.p.max_requests = 2;
    sh_env_start(&e);
    struct sh_call t;
    memset(&t, 0, sizeof t);
    OLT_CHECK_EQ(sh_call(&e, &t, fn_busy), 0);
    sh_settle(&e);
    OLT_CHECK_EQ(sh_stats(&e).busy, 3);
    env_close(&e);
}

/* ---- concurrency and degraded sets ---------------------------------------------------- */

#define NCONC 10
struct conc {
    struct sh_call sub[NCONC];
    uint8_t *data[NCONC], *out[NCONC];
    uint64_t size[NCONC];
    char key[NCONC][16];
};
static struct conc g_conc;

static void fn_conc(struct sh_call *t)
{
    t->remaining = NCONC;
    for (unsigned i = 0; i < NCONC; i++) {
        struct sh_call *u = &g_conc.sub[i];
        u->e = t->e;
        u->parent = t;
        u->posted = false;
        if (t->which == 0)
            fn_put(u);
        else
            sh_fn_get(u);
    }
}

OLT_TEST_T(store_engine_concurrent_requests_one_core, 120)
{
    struct sh_env e;
    env_open(&e, 6, 6, 8192);   /* one set, k 3 + m 3: blocks not a divisor of the stripe */
    OLT_CHECK_EQ(ol_store_parity(e.s), 3);
    OLT_CHECK_EQ(sh_bucket_create(&e, "cc"), 0);
    struct conc *c = &g_conc;
    memset(c, 0, sizeof *c);
    for (unsigned i = 0; i < NCONC; i++) {
        c->size[i] = i % 3 == 0 ? 100 + i : 90000 * i + 17;
        c->data[i] = sh_pattern(c->size[i], 60 + i);
        c->out[i] = malloc(c->size[i] + 1);
        snprintf(c->key[i], sizeof c->key[i], "c%u", i);
        struct sh_call *u = &c->sub[i];
        u->bucket = "cc";
        u->key = c->key[i];
        u->data = c->data[i];
        u->size = u->stop = c->size[i];
        u->chunk = 7000;       /* odd chunks: writes cross shard and stripe edges */
        u->parity = -1;
    }
    struct sh_call t;
    memset(&t, 0, sizeof t);
    t.which = 0;
    OLT_CHECK_EQ(sh_call(&e, &t, fn_conc), 0);
    for (unsigned i = 0; i < NCONC; i++)
        OLT_CHECK_EQ(c->sub[i].status, 0);
    for (unsigned i = 0; i < NCONC; i++) {
        struct sh_call *u = &c->sub[i];
        memset(u, 0, sizeof *u);
        u->bucket = "cc";
        u->key = c->key[i];
        u->len = -1;
        u->out = c->out[i];
        u->cap = c->size[i] + 1;
    }
    memset(&t, 0, sizeof t);
    t.which = 1;
    OLT_CHECK_EQ(sh_call(&e, &t, fn_conc), 0);
    for (unsigned i = 0; i < NCONC; i++) {
        OLT_CHECK_EQ(c->sub[i].status, 0);
        OLT_CHECK_EQ(c->sub[i].got, c->size[i]);
        OLT_CHECK_MEM(c->out[i], c->data[i], c->size[i]);
        free(c->data[i]);
        free(c->out[i]);
    }
    sh_settle(&e);
    env_close(&e);
}

OLT_TEST_T(store_engine_degraded_writes_and_blank_drives, 120)
{
    struct sh_env e;
    env_open(&e, 6, 6, 8192);   /* k 3 + m 3: write quorum 4 */
    OLT_CHECK_EQ(sh_bucket_create(&e, "dg"), 0);
    uint8_t *a = sh_pattern(700000, 70), *b = sh_pattern(5000, 71);
    OLT_CHECK_EQ(put(&e, "dg", "before", a, 700000), 0);
    sh_wipe(e.path[1]);
    sh_wipe(e.path[4]);
    OLT_CHECK_EQ(put(&e, "dg", "during", a, 650000), 0);  /* 4 drives: enough */
    OLT_CHECK_EQ(put(&e, "dg", "small", b, 5000), 0);
    struct ol_store_stats st = sh_stats(&e);
    OLT_CHECK_EQ(st.write_drive_failures, 4);
    OLT_CHECK_EQ(st.needs_heal, 2);
    sh_check_get(&e, "dg", "before", a, 700000);
    sh_check_get(&e, "dg", "during", a, 650000);
    sh_check_get(&e, "dg", "small", b, 5000);
    sh_check_tmp_empty(&e);
    /* re-open: the wiped drives are blank, adopted (formatted), not healed yet */
    env_reopen(&e);
    sh_check_get(&e, "dg", "before", a, 700000);
    sh_check_get(&e, "dg", "during", a, 650000);
    OLT_CHECK_EQ(sh_bucket_exists(&e, "dg"), 0);
    OLT_CHECK_EQ(put(&e, "dg", "after", b, 4000), 0);
    sh_check_get(&e, "dg", "after", b, 4000);
    /* a third drive lost: 3 left = k: reads still work, writes do not */
    sh_wipe(e.path[0]);
    sh_check_get(&e, "dg", "during", a, 650000);
    sh_check_get(&e, "dg", "after", b, 4000);
    OLT_CHECK_EQ(put(&e, "dg", "more", b, 4000), -EIO);
    OLT_CHECK_EQ(put(&e, "dg", "more", a, 300000), -EIO);
    sh_check_tmp_empty(&e);
    free(a);
    free(b);
    sh_settle(&e);
    env_close(&e);
}

OLT_TEST_T(store_engine_commit_below_quorum_is_undone, 120)
{
    struct sh_env e;
    env_open(&e, 4, 4, 4096);   /* k 2 + m 2: write quorum 3 */
    OLT_CHECK_EQ(sh_bucket_create(&e, "uq"), 0);
    uint8_t *a = sh_pattern(300000, 80), *b = sh_pattern(250000, 81);
    OLT_CHECK_EQ(put(&e, "uq", "x", a, 300000), 0);
    int fds = sh_count_fds();
    /* two drives cannot take a new metadata file: "meta" became a directory
     * there (the old version stays readable on the other two) */
    for (unsigned d = 0; d < 2; d++) {
        char p[800], q[820];
        sh_obj_dir(&e, d, "uq", "x", p, sizeof p);
        snprintf(q, sizeof q, "%s/meta", p);
        OLT_CHECK_EQ(unlink(q), 0);
        OLT_CHECK_EQ(mkdir(q, 0700), 0);
    }
    OLT_CHECK_EQ(put(&e, "uq", "x", b, 250000), -EIO);
    sh_check_get(&e, "uq", "x", a, 300000);  /* the old version, put back */
    for (unsigned d = 0; d < 4; d++) {
        char p[800];
        sh_obj_dir(&e, d, "uq", "x", p, sizeof p);
        OLT_CHECK_EQ(sh_count_entries(p), 2);  /* meta + the old data dir: the new one is gone */
    }
    /* a new key whose object directory is a file on two drives */
    for (unsigned d = 0; d < 2; d++) {
        char p[800];
        sh_obj_dir(&e, d, "uq", "y", p, sizeof p);
        char ab[800];
        snprintf(ab, sizeof ab, "%s", p);
        *strrchr(ab, '/') = 0;
        mkdir(ab, 0700);
        int fd = open(p, O_CREAT | O_WRONLY, 0600);
        OLT_CHECK(fd >= 0);
        close(fd);
    }
    OLT_CHECK_EQ(put(&e, "uq", "y", b, 250000), -EIO);
    OLT_CHECK_EQ(put(&e, "uq", "y", b, 2000), -EIO);  /* inline too */
    OLT_CHECK_EQ(head(&e, "uq", "y", NULL), -ENOENT);
    for (unsigned d = 2; d < 4; d++) {
        char p[800];
        sh_obj_dir(&e, d, "uq", "y", p, sizeof p);
        OLT_CHECK_EQ(sh_count_entries(p), -1);  /* undone: not even the directory */
    }
    sh_check_tmp_empty(&e);
    OLT_CHECK_EQ(sh_count_fds(), fds); /* every failed drive closed what it had open */
    struct ol_store_stats st = sh_stats(&e);
    OLT_CHECK_EQ(st.put_errors, 3);
    free(a);
    free(b);
    env_close(&e);
}

/* n drive directories root/d0.. made, named in e (not yet opened). */
static void env_dirs(struct sh_env *e, unsigned n, const char *root)
{
    memset(e, 0, sizeof *e);
    e->n = e->dps = n;
    for (unsigned i = 0; i < n; i++) {
        snprintf(e->path[i], sizeof e->path[i], "%s/d%u", root, i);
        OLT_CHECK_EQ(mkdir(e->path[i], 0700), 0);
        e->dp[i] = e->path[i];
    }
}

/* ---- a drive that dies as its commit's syncs start (root, xfsprogs) ---- */

static dev_t fan_victim;   /* the filesystem the next fan on it kills; 0: none */
static unsigned fan_kills;

static void kill_in_fan(int dfd)
{
    struct stat st;
    if (!fan_victim || fstat(dfd, &st) < 0 || st.st_dev != fan_victim)
        return;
    if (sh_xfs_shutdown(dfd))
        fan_kills++;
    fan_victim = 0;
}

/*
 * Two of six drives are XFS filesystems of their own, each shut down by
 * the fan hook as its drive's fan starts (after the shard writes, the
 * directories and the tmp metadata: every sync and directory open of the
 * fan then fails with EIO). An overwrite (the fan syncs the shard file and
 * the metadata) and a new key (it also opens and syncs the directories
 * the commit made) both succeed on the write quorum, read back, and leave
 * no file open: the drives unmount once the store is closed.
 */
OLT_TEST_T(store_engine_drive_dies_in_the_fan, 120)
{
    sh_local_only("kills a local filesystem under the fan");
    if (geteuid() != 0 || system("command -v mkfs.xfs >/dev/null 2>&1") != 0)
        OLT_SKIP("needs root and mkfs.xfs (loop-mounted XFS drives)");
    /* A mount namespace of this test's own: its mounts go with it, whether
     * it passes or fails (a failed check ends the process at once). */
    if (!sh_own_mount_ns())
        OLT_SKIP("cannot make a private mount namespace here");
    struct sh_env e;
    env_dirs(&e, 6, olt_tmpdir());
    for (unsigned v = 0; v < 2; v++) {
        char img[600];
        snprintf(img, sizeof img, "%s/xfs%u.img", olt_tmpdir(), v);
        if (!sh_mount_xfs(img, e.path[4 + v])) {
            if (v)
                umount2(e.path[4], 0);
            OLT_SKIP("cannot loop-mount an XFS image here");
        }
    }
    e.p = (struct ol_store_params){.drives = e.dp, .n = 6, .drives_per_set = 6, .parity = -1,
                                   .stripe_bytes = SH_STRIPE, .inline_max = 4096};
    sh_env_start(&e);
    OLT_CHECK_EQ(sh_bucket_create(&e, "fan"), 0);
    uint8_t *a = sh_pattern(300000, 90), *b = sh_pattern(200000, 91);
    OLT_CHECK_EQ(put(&e, "fan", "old", a, 300000), 0);
    int fds = sh_count_fds();
    struct stat st;
    ol_se_fan_hook = kill_in_fan;
    OLT_CHECK_EQ(stat(e.path[4], &st), 0);
    fan_victim = st.st_dev;
    OLT_CHECK_EQ(put(&e, "fan", "old", b, 200000), 0);   /* overwrite: drive 4 dies */
    OLT_CHECK_EQ(fan_kills, 1u);
    OLT_CHECK_EQ(stat(e.path[5], &st), 0);
    fan_victim = st.st_dev;
    OLT_CHECK_EQ(put(&e, "fan", "new", a, 300000), 0);   /* new key: drive 5 dies */
    OLT_CHECK_EQ(fan_kills, 2u);
    ol_se_fan_hook = NULL;
    sh_check_get(&e, "fan", "old", b, 200000);
    sh_check_get(&e, "fan", "new", a, 300000);
    sh_settle(&e);                       /* the GETs close their shard files after the data */
    OLT_CHECK_EQ(sh_count_fds(), fds);   /* what the dead drives had open is closed */
    struct ol_store_stats s = sh_stats(&e);
    OLT_CHECK_EQ(s.put_errors, 0);
    OLT_CHECK_EQ(s.write_drive_failures, 3);   /* 4 in the overwrite; 4 and 5 in the new key */
    sh_env_stop(&e, false);
    OLT_CHECK_EQ(umount2(e.path[4], 0), 0);     /* nothing of the store holds them */
    OLT_CHECK_EQ(umount2(e.path[5], 0), 0);
    free(a);
    free(b);
}

OLT_TEST_T(store_engine_default_stripe_large_object, 120)
{
    struct sh_env e;
    env_open(&e, 6, 6, -1);
    sh_env_stop(&e, false);
    e.p.stripe_bytes = 0;        /* the default: 1 MiB, k 3: blocks of 349568 bytes */
    sh_env_start(&e);
    OLT_CHECK_EQ(ol_store_inline_max(e.s), OL_STORE_INLINE_DEFAULT);
    OLT_CHECK_EQ(sh_bucket_create(&e, "big"), 0);
    uint64_t size = (9u << 20) + 333;
    uint8_t *a = sh_pattern(size, 90), *buf = malloc(4096);
    OLT_CHECK_EQ(put(&e, "big", "obj", a, size), 0);
    OLT_CHECK_EQ(put(&e, "big", "inl", a, OL_STORE_INLINE_DEFAULT), 0);
    sh_check_get(&e, "big", "obj", a, size);
    sh_check_get(&e, "big", "inl", a, OL_STORE_INLINE_DEFAULT);
    uint64_t got = 0;
    OLT_CHECK_EQ(sh_get_range(&e, "big", "obj", (5u << 20) + 7, 4096, buf, 4096, &got), 0);
    OLT_CHECK_EQ(got, 4096);
    OLT_CHECK_MEM(buf, a + (5u << 20) + 7, 4096);
    sh_wipe(e.path[sh_drive_with_shard(&e, "big", "obj", 1)]);
    sh_check_get(&e, "big", "obj", a, size);
    OLT_CHECK(sh_stats(&e).reads_reconstructed >= 9);
    free(a);
    free(buf);
    env_close(&e);
}

/*
 * Ahead writes (engine_put.c): a PUT whose body comes in a little at a
 * time, the loop running in between, is held at its first bytes while its
 * files are made, then has its stripe's whole pages written while the
 * stripe fills (data pages as they come, parity pages as the parity is
 * encoded range by range), and the rest at the seal. The default 1 MiB
 * stripe, k 2 + m 2, blocks of 512 KiB; objects of one whole stripe, a
 * stripe and a few bytes, almost three stripes, and one short stripe whose
 * second data block is partly padding. Each reads back, and again from the
 * parity alone once both data shards' files are removed: every page
 * written ahead, data and parity, is right.
 */
OLT_TEST_T(store_engine_pages_written_ahead_of_the_seal, 120)
{
    sh_local_only("ahead writes are O_DIRECT's, which remote drives do not take");
    struct sh_env e;
    env_open(&e, 4, 4, -1);
    sh_env_stop(&e, false);
    e.p.stripe_bytes = 0;
    sh_env_start(&e);
    if (!ol_store_drive_direct_io(e.s, 0)) {
        env_close(&e);
        OLT_SKIP("the test's drives do not take O_DIRECT");
    }
    OLT_CHECK_EQ(sh_bucket_create(&e, "ah"), 0);
    uint64_t sizes[] = {1u << 20, (1u << 20) + 4097, (3u << 20) - 5, 700 * 1024};
    for (unsigned i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        uint64_t size = sizes[i];
        uint8_t *a = sh_pattern(size, 40 + i);
        char key[32];
        snprintf(key, sizeof key, "obj-%u", i);
        struct sh_call t;
        put_partial(&e, &t, "ah", key, a, size, 64 * 1024);
        OLT_CHECK_EQ(t.ones, 1); /* held at its first bytes until its files are made */
        struct ol_store_stats st0 = sh_stats(&e);
        bool ahead = false;
        for (uint64_t stop = 128 * 1024; stop < size; stop += 64 * 1024) {
            t.stop = stop;
            OLT_CHECK_EQ(sh_call(&e, &t, sh_put_pump), 0);
            /* the second half of the first block is in: its pages are
             * written before the stripe is (the loop runs meanwhile) */
            for (int w = 0; !ahead && stop >= 400 * 1024 && w < 2000; w++) {
                ahead = sh_stats(&e).ahead_bytes > st0.ahead_bytes;
                if (!ahead)
                    usleep(1000);
            }
            OLT_CHECK(stop < 400 * 1024 || ahead);
        }
        t.stop = size; /* the rest, then the finish */
        OLT_CHECK_EQ(sh_call(&e, &t, sh_put_pump), 0);
        struct ol_store_stats st = sh_stats(&e);
        OLT_CHECK(st.ahead_bytes > st0.ahead_bytes);
        /* each shard's bytes once, the ahead ones among them */
        OLT_CHECK(st.direct_bytes - st0.direct_bytes >= 4 * (size / 2));
        OLT_CHECK(st.direct_bytes - st0.direct_bytes < 4 * (size / 2 + (64u << 10)));
        sh_check_get(&e, "ah", key, a, size);
        /* the data shards' files gone: the bytes come from the parity */
        for (unsigned sh = 0; sh < 2; sh++) {
            char pp[900];
            part_path(&e, sh_drive_with_shard(&e, "ah", key, sh), "ah", key, pp, sizeof pp);
            OLT_CHECK_EQ(unlink(pp), 0);
        }
        sh_check_get(&e, "ah", key, a, size);
        st = sh_stats(&e);
        OLT_CHECK(st.reads_reconstructed - st0.reads_reconstructed >= (size + (1u << 20) - 1) >> 20);
        OLT_CHECK_EQ(st.checksum_failures, 0);
        free(a);
    }
    sh_settle(&e);
    env_close(&e);
}

/* ---- a power cut right after the acknowledgements (root, xfsprogs) ---- */

/*
 * Four drives on one loop-mounted XFS, once with each way of making writes
 * durable (p.sync: the syncfs group commit, then an fsync per file). A new
 * object of three stripes, an inline one, an overwrite and a delete are
 * acknowledged; the filesystem is then shut down without flushing its log,
 * as a power cut would leave it (what only the page cache or the journal's
 * memory held is gone), and mounted again (log recovery). Every
 * acknowledged change is there: the objects read back byte for byte, the
 * overwrite shows its new bytes, the deleted key is gone.
 */
OLT_TEST_T(store_engine_acknowledged_writes_survive_a_power_cut, 120)
{
    if (geteuid() != 0 || system("command -v mkfs.xfs >/dev/null 2>&1") != 0)
        OLT_SKIP("needs root and mkfs.xfs (a loop-mounted XFS)");
    if (!sh_own_mount_ns())
        OLT_SKIP("cannot make a private mount namespace here");
    uint8_t *a = sh_pattern(300000, 70), *b = sh_pattern(2000, 71), *c = sh_pattern(150000, 72);
    for (int mode = 0; mode < 2; mode++) {
        char img[400], fs[400];
        snprintf(img, sizeof img, "%s/pc%d.img", olt_tmpdir(), mode);
        snprintf(fs, sizeof fs, "%s/pc%d", olt_tmpdir(), mode);
        OLT_CHECK_EQ(mkdir(fs, 0700), 0);
        if (!sh_mount_xfs(img, fs))
            OLT_SKIP("cannot loop-mount an XFS image here");
        struct sh_env e;
        env_dirs(&e, 4, fs);
        e.p = (struct ol_store_params){.drives = e.dp, .n = 4, .drives_per_set = 4,
                                       .parity = -1, .stripe_bytes = SH_STRIPE,
                                       .inline_max = 4096, .sync = mode};
        sh_env_start(&e);
        OLT_CHECK_EQ(sh_bucket_create(&e, "pc"), 0);
        OLT_CHECK_EQ(put(&e, "pc", "gone", c, 150000), 0);
        OLT_CHECK_EQ(put(&e, "pc", "over", a, 300000), 0);
        /* the power cut comes right after these four acknowledgements */
        OLT_CHECK_EQ(put(&e, "pc", "big", a, 300000), 0);
        OLT_CHECK_EQ(put(&e, "pc", "inl", b, 2000), 0);
        OLT_CHECK_EQ(put(&e, "pc", "over", c, 150000), 0);
        OLT_CHECK_EQ(sh_del(&e, "pc", "gone"), 0);
        OLT_CHECK(sh_xfs_shutdown(ol_store_drive_fd(e.s, 0)));
        sh_env_stop(&e, true);
        OLT_CHECK_EQ(umount2(fs, 0), 0);
        OLT_CHECK(sh_mount_image(img, fs));
        sh_env_start(&e);
        sh_check_get(&e, "pc", "big", a, 300000);
        sh_check_get(&e, "pc", "inl", b, 2000);
        sh_check_get(&e, "pc", "over", c, 150000);
        OLT_CHECK_EQ(head(&e, "pc", "gone", NULL), -ENOENT);
        sh_env_stop(&e, false);
        OLT_CHECK_EQ(umount2(fs, 0), 0);
    }
    free(a);
    free(b);
    free(c);
}

/* ---- the ordered commit: a crash between the rename and its barrier (root, xfsprogs) ---- */

static unsigned renames_left; /* the hook shuts the XFS down at the last of these */

static void log_at_last_rename(int dfd)
{
    if (renames_left && --renames_left == 0)
        OLT_CHECK(sh_xfs_shutdown_after_the_log(dfd));
}

/*
 * On XFS with O_DIRECT a PUT's commit renames its metadata into place as
 * soon as it is written and then waits for one barrier (engine_put.c "the
 * ordered commit"). Four drives on one loop-mounted XFS; as the last of a
 * PUT's four renames completes, before any barrier could follow it, the
 * filesystem's log is forced to the disk and it is shut down: the renames
 * are durable, and whatever the page cache alone held is lost, as after a
 * power cut that fell right there. Mounted again, every drive's metadata
 * names the new version and opens (it was written with O_DIRECT, not left
 * to writeback), and the object reads back whole with nothing rebuilt
 * (the shard files' bytes were on the disk before the rename): for a new
 * object of three stripes, an inline one and an overwrite. With the group
 * commit (not with OLT_STORE_SYNC=fsync, where the renames follow fsyncs)
 * each PUT takes one barrier for its four drives, which share the
 * filesystem (engine.c "one barrier per filesystem"), and one syncfs.
 */
OLT_TEST_T(store_engine_ordered_commit_survives_a_log_flush, 120)
{
    sh_local_only("the ordered commit is local XFS's (O_DIRECT and syncfs)");
    if (geteuid() != 0 || system("command -v mkfs.xfs >/dev/null 2>&1") != 0)
        OLT_SKIP("needs root and mkfs.xfs (a loop-mounted XFS)");
    if (!sh_own_mount_ns())
        OLT_SKIP("cannot make a private mount namespace here");
    char img[400], fs[400];
    snprintf(img, sizeof img, "%s/oc.img", olt_tmpdir());
    snprintf(fs, sizeof fs, "%s/oc", olt_tmpdir());
    OLT_CHECK_EQ(mkdir(fs, 0700), 0);
    if (!sh_mount_xfs(img, fs))
        OLT_SKIP("cannot loop-mount an XFS image here");
    uint8_t *a = sh_pattern(300000, 80), *b = sh_pattern(2000, 81), *c = sh_pattern(150000, 82);
    struct { const char *key; const uint8_t *old, *data; uint64_t oldsize, size; } cases[] = {
        {"big", NULL, a, 0, 300000}, {"inl", NULL, b, 0, 2000}, {"over", a, c, 300000, 150000},
    };
    struct sh_env e;
    env_dirs(&e, 4, fs);
    e.p = (struct ol_store_params){.drives = e.dp, .n = 4, .drives_per_set = 4, .parity = -1,
                                   .stripe_bytes = SH_STRIPE, .inline_max = 4096};
    for (unsigned ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        sh_env_start(&e);
        bool grouped = e.p.sync == 0;
        for (unsigned i = 0; i < 4; i++)
            OLT_CHECK_EQ(ol_store_drive_ordered(e.s, i), grouped);
        if (ci == 0)
            OLT_CHECK_EQ(sh_bucket_create(&e, "oc"), 0);
        if (cases[ci].old) {
            uint64_t s0, s1, b0, b1, ns;
            ol_store_sync_stats(e.s, &s0, &b0, &ns);
            OLT_CHECK_EQ(put(&e, "oc", cases[ci].key, cases[ci].old, cases[ci].oldsize), 0);
            ol_store_sync_stats(e.s, &s1, &b1, &ns);
            OLT_CHECK_EQ(b1 - b0, grouped ? 1 : 0); /* one barrier for the four drives */
            OLT_CHECK_EQ(s1 - s0, grouped ? 1 : 0); /* and one syncfs, not one per drive */
        }
        renames_left = 4;
        ol_se_renamed_hook = log_at_last_rename;
        (void)put(&e, "oc", cases[ci].key, cases[ci].data, cases[ci].size); /* may fail: EIO */
        ol_se_renamed_hook = NULL;
        OLT_CHECK_EQ(renames_left, 0);
        sh_env_stop(&e, true);
        OLT_CHECK_EQ(umount2(fs, 0), 0);
        OLT_CHECK(sh_mount_image(img, fs));
        sh_env_start(&e);
        for (unsigned i = 0; i < 4; i++) {
            uint8_t *buf = malloc(1u << 20);
            OLT_CHECK(buf);
            struct ol_meta_version v;
            OLT_CHECK(sh_drive_meta(&e, i, "oc", cases[ci].key, buf, 1u << 20, &v));
            OLT_CHECK_EQ(v.size, cases[ci].size);
            free(buf);
        }
        struct ol_store_stats s0 = sh_stats(&e);
        sh_check_get(&e, "oc", cases[ci].key, cases[ci].data, cases[ci].size);
        struct ol_store_stats s1 = sh_stats(&e);
        OLT_CHECK_EQ(s1.reads_reconstructed - s0.reads_reconstructed, 0);
        OLT_CHECK_EQ(s1.checksum_failures - s0.checksum_failures, 0);
        sh_env_stop(&e, false);
    }
    OLT_CHECK_EQ(umount2(fs, 0), 0);
    free(a);
    free(b);
    free(c);
}

/*
 * Drives on a filesystem that syncfs is not known to make durable as a
 * whole (a ramfs mount here, standing in for FUSE or a network
 * filesystem) are synced file by file even when the group commit is
 * chosen (store.md, "Making writes durable"); the other drives still go
 * by barriers. Two of four drives on ramfs: a PUT, an overwrite and a
 * DELETE succeed on all four drives, and the barriers counted are those of
 * the two drives on the local filesystem alone, which share each one (two
 * for a PUT).
 */
OLT_TEST_T(store_engine_syncfs_only_where_it_covers_the_filesystem, 60)
{
    sh_local_only("the syncfs group commit is local drives'");
    if (geteuid() != 0)
        OLT_SKIP("needs root (ramfs mounts)");
    if (!sh_own_mount_ns())
        OLT_SKIP("cannot make a private mount namespace here");
    struct sh_env e;
    env_dirs(&e, 4, olt_tmpdir());
    for (unsigned i = 2; i < 4; i++)
        if (mount("none", e.path[i], "ramfs", 0, "mode=0700") != 0)
            OLT_SKIP("cannot mount ramfs here");
    e.p = (struct ol_store_params){.drives = e.dp, .n = 4, .drives_per_set = 4, .parity = -1,
                                   .stripe_bytes = SH_STRIPE, .inline_max = 4096, .sync = 0};
    sh_env_start(&e);
    bool grouped = e.p.sync == 0; /* not with OLT_STORE_SYNC=fsync */
    for (unsigned i = 0; i < 4; i++) {
        unsigned long type = 0;
        OLT_CHECK_EQ(ol_store_drive_syncfs(e.s, i, &type), grouped && i < 2);
        if (grouped && i >= 2)
            OLT_CHECK_EQ(type, 0x858458F6ul); /* RAMFS_MAGIC */
    }
    OLT_CHECK_EQ(sh_bucket_create(&e, "rf"), 0);
    uint8_t *a = sh_pattern(300000, 60), *b = sh_pattern(200000, 61);
    uint64_t syncs, b0, b1, ns;
    ol_store_sync_stats(e.s, &syncs, &b0, &ns);
    OLT_CHECK_EQ(put(&e, "rf", "k", a, 300000), 0);
    ol_store_sync_stats(e.s, &syncs, &b1, &ns);
    /* two barriers for a PUT, one with the ordered commit (an XFS TMPDIR), each
     * shared by the two drives on that filesystem */
    OLT_CHECK_EQ(b1 - b0, grouped ? (ol_store_drive_ordered(e.s, 0) ? 1 : 2) : 0);
    OLT_CHECK_EQ(put(&e, "rf", "k", b, 200000), 0);
    OLT_CHECK_EQ(put(&e, "rf", "gone", a, 300000), 0);
    OLT_CHECK_EQ(sh_del(&e, "rf", "gone"), 0);
    sh_check_get(&e, "rf", "k", b, 200000);
    OLT_CHECK_EQ(head(&e, "rf", "gone", NULL), -ENOENT);
    struct ol_store_stats st = sh_stats(&e);
    OLT_CHECK_EQ(st.write_drive_failures, 0);
    OLT_CHECK_EQ(st.reads_reconstructed, 0);
    sh_check_tmp_empty(&e);
    sh_env_stop(&e, false);
    OLT_CHECK_EQ(umount2(e.path[2], 0), 0);
    OLT_CHECK_EQ(umount2(e.path[3], 0), 0);
    free(a);
    free(b);
}

/* ---- GET from the page cache's mapping (engine_get.c "mapped reads") ---------------- */

/* Reads the whole file, so its pages are in the page cache. */
static void warm_file(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    OLT_CHECK(fd >= 0);
    static char buf[65536];
    while (read(fd, buf, sizeof buf) > 0)
        ;
    close(fd);
}

/* Mappings of this process of files under the env's drives: how many, and
 * their address ranges (into out) to tell a mapping made again from one
 * kept. */
static int drive_maps(const struct sh_env *e, char *out, size_t cap)
{
    FILE *f = fopen("/proc/self/maps", "r");
    OLT_CHECK(f != NULL);
    char line[2048];
    int n = 0;
    size_t used = 0;
    out[0] = 0;
    while (fgets(line, sizeof line, f)) {
        bool ours = false;
        for (unsigned i = 0; i < e->n; i++)
            ours |= strstr(line, e->path[i]) != NULL;
        if (!ours)
            continue;
        n++;
        int w = snprintf(out + used, cap - used, "%.*s;", (int)strcspn(line, " "), line);
        if (w > 0 && (size_t)w < cap - used)
            used += (size_t)w;
    }
    fclose(f);
    return n;
}

static int get_by_ref(struct sh_env *e, const char *b, const char *k, uint8_t *out,
                      uint64_t cap, uint64_t *got, void (*on_data)(struct sh_call *))
{
    struct sh_call t;
    memset(&t, 0, sizeof t);
    t.bucket = b;
    t.key = k;
    t.len = -1;
    t.out = out;
    t.cap = cap;
    t.by_ref = true;
    t.on_data = on_data;
    int rc = sh_call(e, &t, sh_fn_get);
    *got = t.got;
    return rc;
}

static char cut_path[900];
static off_t cut_len;
static void cut_after_first_slice(struct sh_call *t)
{
    if (cut_path[0]) {
        OLT_CHECK_EQ(truncate(cut_path, cut_len), 0);
        cut_path[0] = 0;
    }
    (void)t;
}

/* Two GETs of one object at once share the mappings of its shard files:
 * the first is held after its first slice while the second starts; when
 * the second has its first slice, the process maps each data file once. */
struct share {
    struct sh_call sub[2];
    struct ol_msg resume;
    int maps_seen;
};
static struct share g_share;

/* Whether /proc/self/maps holds a mapping of path. */
static bool path_mapped(const char *path)
{
    FILE *f = fopen("/proc/self/maps", "r");
    OLT_CHECK(f != NULL);
    char line[2048];
    bool found = false;
    while (!found && fgets(line, sizeof line, f))
        found = strstr(line, path) != NULL;
    fclose(f);
    return found;
}

static void share_resume(ol_loop *l, struct ol_msg *m)
{
    (void)l;
    (void)m;
    sh_get_resume(&g_share.sub[0]);
}

static void share_second_data(struct sh_call *t)
{
    if (g_share.maps_seen >= 0)
        return;
    char m[4096];
    g_share.maps_seen = drive_maps(t->e, m, sizeof m);
    g_share.resume.fn = share_resume;
    ol_loop_post(t->e->loop, &g_share.resume); /* not from inside this GET's callback */
}

static void share_first_data(struct sh_call *t)
{
    if (g_share.sub[1].fn == NULL) {
        struct sh_call *u = &g_share.sub[1];
        t->held = true;
        u->fn = sh_fn_get;
        sh_fn_get(u);
    }
}

static void fn_share(struct sh_call *t)
{
    t->remaining = 2;
    for (unsigned i = 0; i < 2; i++) {
        g_share.sub[i].e = t->e;
        g_share.sub[i].parent = t;
        g_share.sub[i].posted = false;
    }
    sh_fn_get(&g_share.sub[0]);
}

OLT_TEST_T(store_engine_concurrent_gets_share_mappings, 60)
{
    sh_local_only("mapped reads are local files'");
    struct sh_env e;
    env_open(&e, 4, 4, 4096);
    OLT_CHECK_EQ(sh_bucket_create(&e, "ms"), 0);
    uint32_t B = (uint32_t)ol_ec_shard_len(SH_STRIPE, 2);
    uint64_t size = 5ull * 2 * B + 1000;
    uint8_t *a = sh_pattern(size, 41);
    OLT_CHECK_EQ(put(&e, "ms", "obj", a, size), 0);
    for (unsigned s = 0; s < 4; s++) {
        char pp[900];
        part_path(&e, sh_drive_with_shard(&e, "ms", "obj", s), "ms", "obj", pp, sizeof pp);
        warm_file(pp);
    }
    memset(&g_share, 0, sizeof g_share);
    g_share.maps_seen = -1;
    for (unsigned i = 0; i < 2; i++) {
        struct sh_call *u = &g_share.sub[i];
        u->bucket = "ms";
        u->key = "obj";
        u->len = -1;
        u->out = malloc(size + 1);
        u->cap = size + 1;
        u->by_ref = true;
        u->on_data = i == 0 ? share_first_data : share_second_data;
    }
    struct sh_call t;
    memset(&t, 0, sizeof t);
    OLT_CHECK_EQ(sh_call(&e, &t, fn_share), 0);
    for (unsigned i = 0; i < 2; i++) {
        OLT_CHECK_EQ(g_share.sub[i].status, 0);
        OLT_CHECK_EQ(g_share.sub[i].got, size);
        OLT_CHECK_MEM(g_share.sub[i].out, a, size);
        free(g_share.sub[i].out);
    }
    OLT_CHECK_EQ(g_share.sub[1].fn == sh_fn_get, true); /* the second ran while the first was held */
    OLT_CHECK_EQ(g_share.maps_seen, 2);                 /* each data file mapped once */
    char m[4096];
    OLT_CHECK_EQ(drive_maps(&e, m, sizeof m), 2);       /* and kept for the next GET */

    /* more files read than the table holds: the oldest unused go, the
     * process never keeps more than OL_SE_PARK */
    unsigned nobj = OL_SE_PARK / 2 + 3;
    uint64_t small = 2ull * B; /* one stripe: two data files */
    uint8_t *out = malloc(small + 1);
    for (unsigned i = 0; i < nobj; i++) {
        char k[32];
        snprintf(k, sizeof k, "many-%u", i);
        OLT_CHECK_EQ(put(&e, "ms", k, a, small), 0);
        uint64_t got = 0;
        OLT_CHECK_EQ(get_by_ref(&e, "ms", k, out, small + 1, &got, NULL), 0);
        OLT_CHECK_EQ(got, small);
        OLT_CHECK_MEM(out, a, small);
    }
    static char big[256 * 1024];
    OLT_CHECK_EQ(drive_maps(&e, big, sizeof big), (int)OL_SE_PARK);
    /* the last object's files are kept, the first object's went */
    char first[900], last[900], k[32];
    snprintf(k, sizeof k, "many-%u", nobj - 1);
    part_path(&e, sh_drive_with_shard(&e, "ms", k, 0), "ms", k, last, sizeof last);
    part_path(&e, sh_drive_with_shard(&e, "ms", "many-0", 0), "ms", "many-0", first, sizeof first);
    OLT_CHECK(path_mapped(last));
    OLT_CHECK(!path_mapped(first));
    free(out);
    free(a);
    env_close(&e);
}

/* A GET whose caller sends by reference verifies blocks whose pages are
 * cached where they lie in a mapping of the shard file and hands them out
 * from there; other GETs, and blocks not cached, are read into the slots.
 * A flipped byte is caught in the mapping too (and the rebuild takes its
 * mapped sources), and a shard file cut short while the GET runs is read,
 * found short and rebuilt around. A GET's mappings are kept for the next
 * GET of the same files, and unmapped once unused for OL_SE_PARK_MS. */
OLT_TEST_T(store_engine_get_from_the_page_cache_mapping, 120)
{
    sh_local_only("mapped reads are local files'");
    struct sh_env e;
    env_open(&e, 4, 4, 4096);
    OLT_CHECK_EQ(sh_bucket_create(&e, "mr"), 0);
    uint32_t B = (uint32_t)ol_ec_shard_len(SH_STRIPE, 2), st = B + OL_BITROT_HDR_SIZE;
    uint64_t size = 5ull * 2 * B + 1000; /* 6 stripes, the last a short one */
    uint8_t *a = sh_pattern(size, 40), *buf = malloc(size + 1);
    uint64_t got = 0;
    OLT_CHECK_EQ(put(&e, "mr", "obj", a, size), 0);
    char pp[4][900];
    for (unsigned s = 0; s < 4; s++) {
        part_path(&e, sh_drive_with_shard(&e, "mr", "obj", s), "mr", "obj", pp[s], sizeof pp[s]);
        warm_file(pp[s]);
    }

    /* not by reference: read into the slots */
    struct ol_store_stats s0 = sh_stats(&e);
    sh_check_get(&e, "mr", "obj", a, size);
    struct ol_store_stats s1 = sh_stats(&e);
    OLT_CHECK_EQ(s1.mapped_bytes, s0.mapped_bytes);

    /* by reference: every data block from the mapping, none rebuilt */
    OLT_CHECK_EQ(get_by_ref(&e, "mr", "obj", buf, size + 1, &got, NULL), 0);
    OLT_CHECK_EQ(got, size);
    OLT_CHECK_MEM(buf, a, size);
    struct ol_store_stats s2 = sh_stats(&e);
    uint64_t mapped = s2.mapped_bytes - s1.mapped_bytes;
    OLT_CHECK(mapped >= size && mapped <= size + 2ull * B);
    OLT_CHECK_EQ(s2.checksum_failures, s1.checksum_failures);
    OLT_CHECK_EQ(s2.reads_reconstructed, s1.reads_reconstructed);
    /* the two data files' mappings are parked, and the next GET takes them */
    char m1[4096], m2[4096];
    OLT_CHECK_EQ(drive_maps(&e, m1, sizeof m1), 2);
    OLT_CHECK_EQ(get_by_ref(&e, "mr", "obj", buf, size + 1, &got, NULL), 0);
    OLT_CHECK_EQ(got, size);
    OLT_CHECK_MEM(buf, a, size);
    OLT_CHECK_EQ(drive_maps(&e, m2, sizeof m2), 2);
    OLT_CHECK_STR(m2, m1);
    OLT_CHECK(sh_stats(&e).mapped_bytes - s2.mapped_bytes == mapped);
    s2 = sh_stats(&e);

    /* a flipped data byte of shard 0, stripe 2: caught in the mapping, the
     * stripe rebuilt from shard 1's mapped block and a parity block */
    sh_flip_byte(pp[0], 2ull * st + OL_BITROT_HDR_SIZE + 77);
    OLT_CHECK_EQ(get_by_ref(&e, "mr", "obj", buf, size + 1, &got, NULL), 0);
    OLT_CHECK_EQ(got, size);
    OLT_CHECK_MEM(buf, a, size);
    struct ol_store_stats s3 = sh_stats(&e);
    OLT_CHECK_EQ(s3.checksum_failures, s2.checksum_failures + 1);
    OLT_CHECK_EQ(s3.reads_reconstructed, s2.reads_reconstructed + 1);
    OLT_CHECK(s3.mapped_bytes > s2.mapped_bytes);
    sh_settle(&e);

    /* shard 0's file cut after the stripes the GET reads ahead, once the
     * first slice is out: the later stripes' pages (the flipped byte's
     * among them) are gone from the cache, so they are read, come back
     * short and are rebuilt */
    snprintf(cut_path, sizeof cut_path, "%s", pp[0]);
    cut_len = (off_t)OL_STORE_GET_SLOTS * st;
    OLT_CHECK_EQ(get_by_ref(&e, "mr", "obj", buf, size + 1, &got, cut_after_first_slice), 0);
    OLT_CHECK_EQ(cut_path[0], 0);
    OLT_CHECK_EQ(got, size);
    OLT_CHECK_MEM(buf, a, size);
    struct ol_store_stats s4 = sh_stats(&e);
    OLT_CHECK(s4.read_errors > s3.read_errors);
    OLT_CHECK(s4.reads_reconstructed >= s3.reads_reconstructed + 6 - OL_STORE_GET_SLOTS);
    sh_settle(&e);
    /* parked mappings unused for OL_SE_PARK_MS are unmapped */
    OLT_CHECK(drive_maps(&e, m1, sizeof m1) > 0);
    for (int i = 0; i < 300 && drive_maps(&e, m1, sizeof m1) > 0; i++)
        usleep(10000);
    OLT_CHECK_EQ(drive_maps(&e, m1, sizeof m1), 0);
    free(a);
    free(buf);
    env_close(&e);
}
