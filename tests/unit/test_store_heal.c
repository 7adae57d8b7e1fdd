/*
 * test_store_heal.c - ol_store_heal_object on real drives (temporary
 * directories, store_harness.h): a deleted shard file and a flipped byte
 * rebuilt byte for byte, a missing and a stale metadata file rewritten,
 * inline objects, a blank drive adopted at open and rebuilt, a healthy
 * object left alone, verify-only mode writing nothing, and fewer than k
 * good shards refused with nothing touched; the healer's queue (bound,
 * deduplication, drops) and walks (prefix, one at a time). Multipart objects:
 * test_store_mpu.c (store_mpu_heal_parts).
 */
#include "olt.h"
#include "store_harness.h"

#include "store/engine.h"
#include "store/engine_int.h"
#include "store/format.h"
#include "store/heal.h"
#include "store/meta.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static void fill_version(struct sh_call *t, struct ol_meta_version *v)
{
    for (unsigned i = 0; i < 16; i++)
        v->etag[i] = (uint8_t)(t->size * 7 + i);
}

static int put(struct sh_env *e, const char *b, const char *k, const uint8_t *data, uint64_t size)
{
    return sh_put(e, b, k, data, size, fill_version);
}

/* A whole file (malloc'ed; *len its size), or NULL when it does not exist. */
static uint8_t *slurp(const char *path, size_t *len)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return NULL;
    struct stat st;
    OLT_CHECK_EQ(fstat(fd, &st), 0);
    uint8_t *b = malloc((size_t)st.st_size + 1);
    OLT_CHECK(b);
    OLT_CHECK_EQ(pread(fd, b, (size_t)st.st_size, 0), st.st_size);
    close(fd);
    *len = (size_t)st.st_size;
    return b;
}

/* A shard file written whole in pages (O_DIRECT) ends in zeros up to its
 * last page boundary (bitrot.h); a healed one at its framing's end. */
static void check_padding(const uint8_t *b, size_t got, size_t len)
{
    if (got == len)
        return;
    OLT_CHECK_EQ(got, (len + 4095) / 4096 * 4096);
    for (size_t i = len; i < got; i++)
        OLT_CHECK_EQ(b[i], 0);
}

/* The file holds want[0..len), then nothing (or a shard file's padding). */
static void same_file(const char *path, const uint8_t *want, size_t len)
{
    size_t got = 0;
    uint8_t *b = slurp(path, &got);
    OLT_CHECK(b);
    OLT_CHECK(got >= len);
    check_padding(b, got, len);
    OLT_CHECK_MEM(b, want, len);
    free(b);
}


/* The object's files on every drive: meta and part.1 paths, and their bytes. */
struct snap {
    char meta[SH_MAXD][700], part[SH_MAXD][800];
    uint8_t *mb[SH_MAXD], *pb[SH_MAXD];
    size_t ml[SH_MAXD], pl[SH_MAXD];  /* pl: the shard file's framed bytes */
};

static void snap_take(const struct sh_env *e, const char *b, const char *k, struct snap *s)
{
    memset(s, 0, sizeof *s);
    static uint8_t buf[1 << 20];
    for (unsigned i = 0; i < e->n; i++) {
        char dir[600];
        sh_obj_dir(e, i, b, k, dir, sizeof dir);
        snprintf(s->meta[i], sizeof s->meta[i], "%s/meta", dir);
        s->mb[i] = slurp(s->meta[i], &s->ml[i]);
        OLT_CHECK(s->mb[i]);
        struct ol_meta_version v;
        OLT_CHECK(sh_drive_meta(e, i, b, k, buf, sizeof buf, &v));
        if (!sh_part_path(e, i, b, k, 1, s->part[i], sizeof s->part[i]))
            continue;
        size_t got = 0;
        s->pb[i] = slurp(s->part[i], &got);
        OLT_CHECK(s->pb[i]);
        s->pl[i] = ol_se_part_blocks(v.size, v.ec.k, v.ec.block_size);
        OLT_CHECK(got >= s->pl[i]);
        check_padding(s->pb[i], got, s->pl[i]);
    }
}

/* Every file is what it was when s was taken. */
static void snap_check(const struct sh_env *e, const struct snap *s)
{
    for (unsigned i = 0; i < e->n; i++) {
        same_file(s->meta[i], s->mb[i], s->ml[i]);
        if (s->pb[i])
            same_file(s->part[i], s->pb[i], s->pl[i]);
    }
}

static void snap_free(struct snap *s)
{
    for (unsigned i = 0; i < SH_MAXD; i++) {
        free(s->mb[i]);
        free(s->pb[i]);
    }
}

static void put_file(const char *path, const uint8_t *b, size_t len);

static int heal(struct sh_env *e, const char *b, const char *k, struct ol_heal_result *res)
{
    return ol_store_heal_object(e->s, b, k, 0, res);
}

OLT_TEST_T(store_heal_deleted_shard_and_flipped_block, 120)
{
    sh_local_only("heal walks only this node's drives: a cluster store's remote drives are not healed yet");
    struct sh_env e;
    sh_env_open(&e, 4, 4, 4096, 0);
    OLT_CHECK_EQ(sh_bucket_create(&e, "hb"), 0);
    uint64_t size = 5 * SH_STRIPE + 777; /* several stripes, a short last one */
    uint8_t *data = sh_pattern(size, 3);
    OLT_CHECK_EQ(put(&e, "hb", "obj", data, size), 0);
    struct snap s;
    snap_take(&e, "hb", "obj", &s);

    struct ol_heal_result res;
    OLT_CHECK_EQ(heal(&e, "hb", "obj", &res), 0); /* healthy: nothing written */
    OLT_CHECK_EQ(res.shards_bad, 0);
    OLT_CHECK_EQ(res.drives_bad, 0);
    OLT_CHECK_EQ(res.drives_healed, 0);
    OLT_CHECK_EQ(res.bytes_written, 0);
    OLT_CHECK(res.bytes_verified >= size);

    OLT_CHECK_EQ(unlink(s.part[1]), 0);
    sh_flip_byte(s.part[3], s.pl[3] - 5); /* inside the last block */
    sh_flip_byte(s.part[3], 100);         /* and the first */
    sh_check_get(&e, "hb", "obj", data, size);

    OLT_CHECK_EQ(ol_store_heal_object(e.s, "hb", "obj", OL_HEAL_VERIFY_ONLY, &res), 0);
    OLT_CHECK_EQ(res.shards_bad, 2);
    OLT_CHECK_EQ(res.drives_healed, 0);
    OLT_CHECK(access(s.part[1], F_OK) != 0); /* verify-only wrote nothing */

    OLT_CHECK_EQ(heal(&e, "hb", "obj", &res), 0);
    OLT_CHECK_EQ(res.shards_bad, 2);
    OLT_CHECK_EQ(res.drives_bad, 0);
    OLT_CHECK_EQ(res.drives_healed, 2);
    OLT_CHECK_EQ(res.shards_written, 2);
    OLT_CHECK_EQ(res.bytes_written, s.pl[1] + s.pl[3]);
    snap_check(&e, &s);
    OLT_CHECK_EQ(heal(&e, "hb", "obj", &res), 0);
    OLT_CHECK_EQ(res.shards_bad + res.drives_healed, 0);
    sh_check_tmp_empty(&e);
    struct ol_store_stats before = sh_stats(&e);
    sh_check_get(&e, "hb", "obj", data, size);
    OLT_CHECK_EQ(sh_stats(&e).reads_reconstructed, before.reads_reconstructed);
    OLT_CHECK_EQ(sh_stats(&e).needs_heal, before.needs_heal);
    snap_free(&s);
    free(data);
    sh_env_stop(&e, false);
}

OLT_TEST_T(store_heal_missing_and_stale_meta, 120)
{
    sh_local_only("heal walks only this node's drives: a cluster store's remote drives are not healed yet");
    struct sh_env e;
    sh_env_open(&e, 4, 4, 4096, 0);
    OLT_CHECK_EQ(sh_bucket_create(&e, "hm"), 0);
    uint8_t *a = sh_pattern(200000, 5), *b = sh_pattern(150000, 6);
    OLT_CHECK_EQ(put(&e, "hm", "k", a, 200000), 0);
    struct snap old;
    snap_take(&e, "hm", "k", &old);
    OLT_CHECK_EQ(put(&e, "hm", "k", b, 150000), 0);
    struct snap s;
    snap_take(&e, "hm", "k", &s);
    /* drive 2 goes back to the first version's metadata (a drive that missed
       the overwrite), drive 0 loses its metadata file */
    int fd = open(s.meta[2], O_WRONLY | O_TRUNC);
    OLT_CHECK(fd >= 0);
    OLT_CHECK_EQ(write(fd, old.mb[2], old.ml[2]), (ssize_t)old.ml[2]);
    close(fd);
    OLT_CHECK_EQ(unlink(s.meta[0]), 0);
    sh_check_get(&e, "hm", "k", b, 150000);

    struct ol_heal_result res;
    OLT_CHECK_EQ(heal(&e, "hm", "k", &res), 0);
    OLT_CHECK_EQ(res.drives_bad, 2);
    OLT_CHECK_EQ(res.shards_bad, 0);
    OLT_CHECK_EQ(res.drives_healed, 2);
    snap_check(&e, &s);
    char dir[600];
    sh_obj_dir(&e, 2, "hm", "k", dir, sizeof dir);
    OLT_CHECK_EQ(sh_count_entries(dir), 2); /* meta + the new data dir: the old one went */
    struct ol_store_stats before = sh_stats(&e);
    sh_check_get(&e, "hm", "k", b, 150000);
    OLT_CHECK_EQ(sh_stats(&e).needs_heal, before.needs_heal);
    sh_check_tmp_empty(&e);
    snap_free(&s);
    snap_free(&old);
    free(a);
    free(b);
    sh_env_stop(&e, false);
}

OLT_TEST_T(store_heal_inline_objects, 120)
{
    sh_local_only("heal walks only this node's drives: a cluster store's remote drives are not healed yet");
    struct sh_env e;
    sh_env_open(&e, 4, 4, 4096, 0);
    OLT_CHECK_EQ(sh_bucket_create(&e, "hi"), 0);
    uint8_t *a = sh_pattern(3000, 8);
    OLT_CHECK_EQ(put(&e, "hi", "small", a, 3000), 0);
    OLT_CHECK_EQ(put(&e, "hi", "empty", a, 0), 0);
    struct snap s, z;
    snap_take(&e, "hi", "small", &s);
    snap_take(&e, "hi", "empty", &z);
    OLT_CHECK(s.pb[0] == NULL); /* inline: no shard files */
    sh_flip_byte(s.meta[1], s.ml[1] - 20); /* corrupt: fails the file checksum */
    OLT_CHECK_EQ(unlink(s.meta[3]), 0);
    OLT_CHECK_EQ(unlink(z.meta[0]), 0);
    sh_check_get(&e, "hi", "small", a, 3000);

    struct ol_heal_result res;
    OLT_CHECK_EQ(heal(&e, "hi", "small", &res), 0);
    OLT_CHECK_EQ(res.drives_bad, 2);
    OLT_CHECK_EQ(res.drives_healed, 2);
    OLT_CHECK_EQ(heal(&e, "hi", "empty", &res), 0);
    OLT_CHECK_EQ(res.drives_healed, 1);
    snap_check(&e, &s);
    snap_check(&e, &z);
    OLT_CHECK_EQ(heal(&e, "hi", "nope", &res), -ENOENT);
    snap_free(&s);
    snap_free(&z);
    free(a);
    sh_env_stop(&e, false);
}

OLT_TEST_T(store_heal_refuses_below_k_untouched, 120)
{
    sh_local_only("heal walks only this node's drives: a cluster store's remote drives are not healed yet");
    struct sh_env e;
    sh_env_open(&e, 4, 4, 4096, 0);
    OLT_CHECK_EQ(sh_bucket_create(&e, "hr"), 0);
    uint64_t size = 3 * SH_STRIPE;
    uint8_t *data = sh_pattern(size, 9), *small = sh_pattern(100, 10);
    OLT_CHECK_EQ(put(&e, "hr", "big", data, size), 0);
    OLT_CHECK_EQ(put(&e, "hr", "tiny", small, 100), 0);
    struct snap s, t;
    snap_take(&e, "hr", "big", &s);
    snap_take(&e, "hr", "tiny", &t);
    /* k = 2: one shard file missing, two corrupt: one good shard left */
    OLT_CHECK_EQ(unlink(s.part[0]), 0);
    sh_flip_byte(s.part[1], 20);
    sh_flip_byte(s.part[2], s.pl[2] - 1);
    struct ol_heal_result res;
    OLT_CHECK_EQ(heal(&e, "hr", "big", &res), -EIO);
    OLT_CHECK_EQ(res.drives_healed, 0);
    OLT_CHECK_EQ(res.bytes_written, 0);
    OLT_CHECK(access(s.part[0], F_OK) != 0);
    same_file(s.part[3], s.pb[3], s.pl[3]);
    for (unsigned i = 0; i < 4; i++)
        same_file(s.meta[i], s.mb[i], s.ml[i]);
    /* metadata on one drive corrupt, on one missing: no version list has a
       quorum, and too few drives say "no object": nothing written */
    sh_flip_byte(t.meta[1], 40);
    sh_flip_byte(t.meta[2], 40);
    OLT_CHECK_EQ(unlink(t.meta[3]), 0);
    OLT_CHECK_EQ(heal(&e, "hr", "tiny", &res), -EIO);
    OLT_CHECK(access(t.meta[3], F_OK) != 0);
    /* metadata on one drive only: a leftover (as for a GET: no such key) */
    for (unsigned i = 1; i < 3; i++)
        OLT_CHECK_EQ(unlink(t.meta[i]), 0);
    OLT_CHECK_EQ(heal(&e, "hr", "tiny", &res), -ENOENT);
    for (unsigned i = 1; i < 4; i++)
        OLT_CHECK(access(t.meta[i], F_OK) != 0);
    same_file(t.meta[0], t.mb[0], t.ml[0]);
    sh_check_tmp_empty(&e);
    snap_free(&s);
    snap_free(&t);
    free(data);
    free(small);
    sh_env_stop(&e, false);
}

/* Whatever heal made under a drive is private to the daemon's user, as
 * what a PUT makes is: no group or other bits (the drive's root is the
 * harness's). */
static int g_open_modes;
static const char *g_mode_root;
static int private_mode(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
    (void)type;
    (void)ftw;
    if (strcmp(path, g_mode_root) != 0 && (st->st_mode & 077)) {
        fprintf(stderr, "%s: mode %o\n", path, (unsigned)(st->st_mode & 07777));
        g_open_modes++;
    }
    return 0;
}

static int open_modes(const char *root)
{
    g_open_modes = 0;
    g_mode_root = root;
    OLT_CHECK_EQ(nftw(root, private_mode, 16, FTW_PHYS), 0);
    return g_open_modes;
}

OLT_TEST_T(store_heal_blank_drive_rebuilt, 120)
{
    sh_local_only("heal walks only this node's drives: a cluster store's remote drives are not healed yet");
    struct sh_env e;
    sh_env_open(&e, 4, 4, 4096, 0);
    OLT_CHECK_EQ(sh_bucket_create(&e, "hd"), 0);
    uint8_t *data = sh_pattern(300000, 12);
    OLT_CHECK_EQ(put(&e, "hd", "a", data, 300000), 0);
    OLT_CHECK_EQ(put(&e, "hd", "b", data, 1000), 0);
    struct snap sa, sb;
    snap_take(&e, "hd", "a", &sa);
    snap_take(&e, "hd", "b", &sb);
    sh_env_stop(&e, false);
    sh_wipe(e.path[2]); /* a blank replacement drive */
    sh_env_start(&e);
    OLT_CHECK(ol_store_drive_adopted(e.s, 2));
    OLT_CHECK(!ol_store_drive_adopted(e.s, 0));
    struct ol_heal_result res;
    OLT_CHECK_EQ(heal(&e, "hd", "a", &res), 0);
    OLT_CHECK_EQ(res.drives_healed, 1);
    OLT_CHECK_EQ(heal(&e, "hd", "b", &res), 0);
    OLT_CHECK_EQ(res.drives_healed, 1);
    snap_check(&e, &sa);
    snap_check(&e, &sb);
    OLT_CHECK_EQ(open_modes(e.path[2]), 0);
    /* a drive wiped while serving (tmp/ and the format gone too) */
    sh_wipe(e.path[0]);
    OLT_CHECK_EQ(heal(&e, "hd", "a", &res), 0);
    OLT_CHECK_EQ(res.drives_healed, 1);
    OLT_CHECK_EQ(heal(&e, "hd", "b", &res), 0);
    snap_check(&e, &sa);
    snap_check(&e, &sb);
    OLT_CHECK_EQ(open_modes(e.path[0]), 0);
    snap_free(&sa);
    snap_free(&sb);
    free(data);
    sh_env_stop(&e, false);
}

/* ---- the healer (store/heal.h) ------------------------------------------------------------ */

static struct ol_heal_stats healer_wait(struct ol_healer *h, bool (*done)(const struct ol_heal_stats *))
{
    struct ol_heal_stats st;
    for (int i = 0; i < 2000; i++) {
        ol_healer_stats(h, &st);
        if (done(&st))
            return st;
        usleep(10000);
    }
    olt_fail(__FILE__, __LINE__, "the healer never got there");
}

static bool queue_empty(const struct ol_heal_stats *st)
{
    return st->queue_len == 0 && st->objects_healed >= 1;
}

static bool walk_done(const struct ol_heal_stats *st)
{
    return !st->walk_running && st->walk_finished_ns != 0;
}

OLT_TEST_T(store_heal_queue_bound_dedup_and_walk, 120)
{
    sh_local_only("heal walks only this node's drives: a cluster store's remote drives are not healed yet");
    struct sh_env e;
    sh_env_open(&e, 4, 4, 4096, 0);
    OLT_CHECK_EQ(sh_bucket_create(&e, "hq"), 0);
    uint8_t *data = sh_pattern(200000, 14);
    OLT_CHECK_EQ(put(&e, "hq", "a", data, 200000), 0);
    OLT_CHECK_EQ(put(&e, "hq", "pre/b", data, 5000), 0);
    OLT_CHECK_EQ(put(&e, "hq", "pre/c", data, 7000), 0);
    struct snap s, b, c;
    snap_take(&e, "hq", "a", &s);
    snap_take(&e, "hq", "pre/b", &b);
    snap_take(&e, "hq", "pre/c", &c);

    struct ol_healer *h;
    struct ol_healer_params hp = {.queue_size = 3, .paused = true};
    struct ol_healer_params big = {.queue_size = OL_HEAL_QUEUE_MAX + 1};
    OLT_CHECK_EQ(ol_healer_start(e.s, &big, &h), -EINVAL);
    OLT_CHECK_EQ(ol_healer_start(e.s, &hp, &h), 0);
    OLT_CHECK_EQ(unlink(s.part[2]), 0);
    ol_healer_enqueue(h, "hq", "a");
    ol_healer_enqueue(h, "hq", "a");          /* queued already */
    ol_healer_enqueue(h, "hq", "x");
    ol_healer_enqueue(h, "hq", "y");
    ol_healer_enqueue(h, "hq", "z");          /* full: dropped */
    ol_healer_enqueue(h, "", "k");            /* not a name: ignored */
    struct ol_heal_stats st;
    ol_healer_stats(h, &st);
    OLT_CHECK_EQ(st.queued, 3);
    OLT_CHECK_EQ(st.dropped, 1);
    OLT_CHECK_EQ(st.queue_len, 3);
    /* one walk at a time */
    OLT_CHECK_EQ(unlink(b.meta[1]), 0);
    sh_flip_byte(c.meta[3], 30);
    OLT_CHECK_EQ(ol_healer_walk(h, "hq", "pre/"), 1);
    OLT_CHECK_EQ(ol_healer_walk(h, "hq", ""), -EBUSY);
    ol_healer_resume(h);
    st = healer_wait(h, queue_empty);
    OLT_CHECK_EQ(st.failed, 0);               /* x, y: no such object, nothing to heal */
    st = healer_wait(h, walk_done);
    OLT_CHECK_EQ(st.walk_id, 1);
    OLT_CHECK_EQ(st.walk_scanned, 2);         /* pre/b and pre/c, not a */
    OLT_CHECK_EQ(st.walk_healed, 2);
    OLT_CHECK_EQ(st.walk_failed, 0);
    OLT_CHECK_EQ(st.objects_healed, 3);
    OLT_CHECK_STR(st.walk_prefix, "pre/");
    snap_check(&e, &s);
    snap_check(&e, &b);
    snap_check(&e, &c);
    OLT_CHECK(!st.walk_no_bucket);
    OLT_CHECK_EQ(ol_healer_walk(h, NULL, NULL), 2);
    st = healer_wait(h, walk_done);
    OLT_CHECK_EQ(st.walk_scanned, 3);
    OLT_CHECK_EQ(st.walk_healed, 0);
    OLT_CHECK(!st.walk_no_bucket);
    OLT_CHECK_EQ(ol_healer_walk(h, "nope", NULL), 3);
    st = healer_wait(h, walk_done);
    OLT_CHECK_EQ(st.walk_scanned, 0);
    OLT_CHECK(st.walk_no_bucket);
    ol_healer_stop(h);
    snap_free(&s);
    snap_free(&b);
    snap_free(&c);
    free(data);
    sh_env_stop(&e, false);
}

/* A GET that reconstructs around an offline drive (nothing to heal it onto)
 * queues nothing; one that meets a corrupt block on an online drive does. */
OLT_TEST_T(store_heal_queue_skips_offline_drives, 120)
{
    sh_local_only("heal walks only this node's drives: a cluster store's remote drives are not healed yet");
    struct sh_env e;
    sh_env_open(&e, 4, 4, 4096, 0);
    OLT_CHECK_EQ(sh_bucket_create(&e, "ho"), 0);
    uint8_t *data = sh_pattern(300000, 15);
    OLT_CHECK_EQ(put(&e, "ho", "k", data, 300000), 0);
    struct snap s;
    snap_take(&e, "ho", "k", &s);
    unsigned d0 = sh_drive_with_shard(&e, "ho", "k", 0), d1 = sh_drive_with_shard(&e, "ho", "k", 1);
    sh_env_stop(&e, false);
    sh_wipe(e.path[d0]);
    OLT_CHECK_EQ(rmdir(e.path[d0]), 0); /* unmounted: offline */
    sh_env_start(&e);
    struct ol_healer *h;
    struct ol_healer_params hp = {.paused = true};
    OLT_CHECK_EQ(ol_healer_start(e.s, &hp, &h), 0);
    uint64_t before = sh_stats(&e).needs_heal;
    sh_check_get(&e, "ho", "k", data, 300000);
    OLT_CHECK(sh_stats(&e).needs_heal > before); /* still counted */
    struct ol_heal_stats st;
    ol_healer_stats(h, &st);
    OLT_CHECK_EQ(st.queued, 0);
    sh_flip_byte(s.part[d1], 50);
    sh_check_get(&e, "ho", "k", data, 300000);
    ol_healer_stats(h, &st);
    OLT_CHECK_EQ(st.queued, 1);
    ol_healer_stop(h);
    snap_free(&s);
    free(data);
    sh_env_stop(&e, false);
    OLT_CHECK_EQ(mkdir(e.path[d0], 0755), 0); /* for the cleanup */
}

/* Writes file bytes to path (replacing it). */
static void put_file(const char *path, const uint8_t *b, size_t len)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    OLT_CHECK(fd >= 0);
    OLT_CHECK_EQ(write(fd, b, len), (ssize_t)len);
    close(fd);
}

/* Every version of the file is rewritten (an object over an older delete
 * marker), and a file of a delete marker alone. */
OLT_TEST_T(store_heal_all_versions_and_delete_markers, 120)
{
    sh_local_only("heal walks only this node's drives: a cluster store's remote drives are not healed yet");
    struct sh_env e;
    sh_env_open(&e, 4, 4, 4096, 0);
    OLT_CHECK_EQ(sh_bucket_create(&e, "hv"), 0);
    uint8_t *data = sh_pattern(100000, 16);
    OLT_CHECK_EQ(put(&e, "hv", "two", data, 100000), 0);
    OLT_CHECK_EQ(put(&e, "hv", "dm", data, 10), 0);
    struct ol_meta_version dm;
    memset(&dm, 0, sizeof dm);
    dm.type = OL_META_DELETE_MARKER;
    memset(dm.vid, 0x42, sizeof dm.vid);
    dm.mtime_ns = 1000;
    static uint8_t buf[1 << 20], out[1 << 20];
    char two[SH_MAXD][700], del[SH_MAXD][700], dir[600];
    size_t two_len[SH_MAXD], del_len = 0;
    uint8_t *two_b[SH_MAXD];
    for (unsigned i = 0; i < 4; i++) {
        struct ol_meta_version v;
        OLT_CHECK(sh_drive_meta(&e, i, "hv", "two", buf, sizeof buf, &v));
        const struct ol_meta_version *vs[2] = {&v, &dm};
        int n = ol_meta_encode("two", 3, vs, 2, out, sizeof out);
        OLT_CHECK(n > 0);
        sh_obj_dir(&e, i, "hv", "two", dir, sizeof dir);
        snprintf(two[i], sizeof two[i], "%s/meta", dir);
        put_file(two[i], out, (size_t)n);
        two_b[i] = malloc((size_t)n);
        memcpy(two_b[i], out, (size_t)n);
        two_len[i] = (size_t)n;
        const struct ol_meta_version *only[1] = {&dm};
        n = ol_meta_encode("dm", 2, only, 1, out, sizeof out);
        OLT_CHECK(n > 0);
        del_len = (size_t)n;
        sh_obj_dir(&e, i, "hv", "dm", dir, sizeof dir);
        snprintf(del[i], sizeof del[i], "%s/meta", dir);
        put_file(del[i], out, del_len);
    }
    OLT_CHECK_EQ(unlink(two[2]), 0);
    OLT_CHECK_EQ(unlink(del[0]), 0);
    sh_flip_byte(del[3], 20);
    struct ol_heal_result res;
    OLT_CHECK_EQ(heal(&e, "hv", "two", &res), 0);
    OLT_CHECK_EQ(res.drives_healed, 1);
    OLT_CHECK_EQ(heal(&e, "hv", "dm", &res), 0);
    OLT_CHECK_EQ(res.drives_healed, 2);
    for (unsigned i = 0; i < 4; i++) {
        same_file(two[i], two_b[i], two_len[i]);
        same_file(del[i], out, del_len);
        free(two_b[i]);
    }
    sh_check_get(&e, "hv", "two", data, 100000);
    free(data);
    sh_env_stop(&e, false);
}

/* A drive that cannot take its shard (its tmp/ is a file) gets no metadata
 * naming it; the other drive is healed; a later heal finishes the job. */
OLT_TEST_T(store_heal_drive_write_failure_isolated, 120)
{
    sh_local_only("heal walks only this node's drives: a cluster store's remote drives are not healed yet");
    struct sh_env e;
    sh_env_open(&e, 4, 4, 4096, 0);
    OLT_CHECK_EQ(sh_bucket_create(&e, "hf"), 0);
    uint8_t *data = sh_pattern(250000, 17);
    OLT_CHECK_EQ(put(&e, "hf", "k", data, 250000), 0);
    struct snap s;
    snap_take(&e, "hf", "k", &s);
    OLT_CHECK_EQ(unlink(s.part[1]), 0);
    OLT_CHECK_EQ(unlink(s.part[2]), 0);
    OLT_CHECK_EQ(unlink(s.meta[2]), 0);
    char tmpd[600];
    snprintf(tmpd, sizeof tmpd, "%s/.openlake/tmp", e.path[2]);
    OLT_CHECK_EQ(rmdir(tmpd), 0);
    put_file(tmpd, (const uint8_t *)"x", 1);
    struct ol_heal_result res;
    OLT_CHECK_EQ(heal(&e, "hf", "k", &res), -ENOTDIR);
    OLT_CHECK_EQ(res.drives_healed, 1);
    same_file(s.part[1], s.pb[1], s.pl[1]);
    OLT_CHECK(access(s.part[2], F_OK) != 0);
    OLT_CHECK(access(s.meta[2], F_OK) != 0); /* no metadata naming a missing shard */
    OLT_CHECK_EQ(unlink(tmpd), 0);
    OLT_CHECK_EQ(mkdir(tmpd, 0755), 0);
    OLT_CHECK_EQ(heal(&e, "hf", "k", &res), 0);
    OLT_CHECK_EQ(res.drives_healed, 1);
    snap_check(&e, &s);
    snap_free(&s);
    free(data);
    sh_env_stop(&e, false);
}

/* Makes <obj dir on drive i>/<uuid>/part.1 with mtimes age seconds ago. */
static void orphan_make(const struct sh_env *e, unsigned i, const char *uuid, int64_t age,
                        char *dir_out, size_t cap)
{
    char dir[600];
    sh_obj_dir(e, i, "hb", "obj", dir, sizeof dir);
    snprintf(dir_out, cap, "%s/%s", dir, uuid);
    OLT_CHECK_EQ(mkdir(dir_out, 0755), 0);
    char f[800];
    snprintf(f, sizeof f, "%s/part.1", dir_out);
    put_file(f, (const uint8_t *)"leftover", 8);
    struct timespec ts[2] = {{.tv_sec = time(NULL) - age}, {.tv_sec = time(NULL) - age}};
    OLT_CHECK_EQ(utimensat(AT_FDCWD, f, ts, 0), 0);
    OLT_CHECK_EQ(utimensat(AT_FDCWD, dir_out, ts, 0), 0);
}

/* Makes <obj dir on drive i>/<name> (a flat shard file's place) with an
 * mtime age seconds ago. */
static void orphan_file(const struct sh_env *e, unsigned i, const char *name, int64_t age,
                        char *out, size_t cap)
{
    char dir[600];
    sh_obj_dir(e, i, "hb", "obj", dir, sizeof dir);
    snprintf(out, cap, "%s/%s", dir, name);
    put_file(out, (const uint8_t *)"leftover", 8);
    struct timespec ts[2] = {{.tv_sec = time(NULL) - age}, {.tv_sec = time(NULL) - age}};
    OLT_CHECK_EQ(utimensat(AT_FDCWD, out, ts, 0), 0);
}

OLT_TEST_T(store_heal_removes_old_unnamed_data_dirs, 120)
{
    sh_local_only("heal walks only this node's drives: a cluster store's remote drives are not healed yet");
    struct sh_env e;
    sh_env_open(&e, 4, 4, 4096, 0);
    OLT_CHECK_EQ(sh_bucket_create(&e, "hb"), 0);
    uint64_t size = 3 * SH_STRIPE + 5;
    uint8_t *data = sh_pattern(size, 9);
    OLT_CHECK_EQ(put(&e, "hb", "obj", data, size), 0);
    struct snap s;
    snap_take(&e, "hb", "obj", &s);
    char old_dir[700], fresh_dir[700], named_like[700];
    orphan_make(&e, 0, "0badc0de-0000-4000-8000-000000000001", 2 * OL_HEAL_ORPHAN_AGE_S,
                old_dir, sizeof old_dir);
    orphan_make(&e, 1, "0badc0de-0000-4000-8000-000000000002", 10, fresh_dir,
                sizeof fresh_dir);
    orphan_make(&e, 2, "not-a-data-dir", 2 * OL_HEAL_ORPHAN_AGE_S, named_like,
                sizeof named_like);
    /* the same for flat shard files: <uuid>.data beside meta */
    char old_file[700], fresh_file[700], file_like[700];
    orphan_file(&e, 3, "0badc0de-0000-4000-8000-000000000003.data", 2 * OL_HEAL_ORPHAN_AGE_S,
                old_file, sizeof old_file);
    orphan_file(&e, 0, "0badc0de-0000-4000-8000-000000000004.data", 10, fresh_file,
                sizeof fresh_file);
    orphan_file(&e, 1, "0badc0de-0000-4000-8000-000000000005.datax", 2 * OL_HEAL_ORPHAN_AGE_S,
                file_like, sizeof file_like);
    struct ol_heal_result res;
    OLT_CHECK_EQ(ol_store_heal_object(e.s, "hb", "obj", OL_HEAL_VERIFY_ONLY, &res), 0);
    OLT_CHECK_EQ(res.dirs_removed, 2u);             /* found ... */
    OLT_CHECK_EQ(access(old_dir, F_OK), 0);       /* ... but verify-only removes nothing */
    OLT_CHECK_EQ(access(old_file, F_OK), 0);
    OLT_CHECK_EQ(heal(&e, "hb", "obj", &res), 0);
    OLT_CHECK_EQ(res.dirs_removed, 2u);
    OLT_CHECK(access(old_dir, F_OK) != 0);         /* old and named by no version: gone */
    OLT_CHECK(access(old_file, F_OK) != 0);
    OLT_CHECK_EQ(access(fresh_dir, F_OK), 0);      /* too recent: a write may own it */
    OLT_CHECK_EQ(access(fresh_file, F_OK), 0);
    OLT_CHECK_EQ(access(named_like, F_OK), 0);     /* not a data dir's name: not ours */
    OLT_CHECK_EQ(access(file_like, F_OK), 0);
    snap_check(&e, &s);                            /* the object's own files untouched */
    sh_check_get(&e, "hb", "obj", data, size);
    snap_free(&s);
    free(data);
    sh_env_stop(&e, false);
}
