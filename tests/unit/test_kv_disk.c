/*
 * test_kv_disk.c - the KV disk tier: rebuilding the index from the .idx
 * headers (newest wins, damaged headers and overlaps dropped, another
 * layout starts empty), a real write / read / damaged read on a loop, and
 * (test builds) faults injected at the tier's completions.
 */
#include "olt.h"

#include "kv/disk.h"
#include "kv/evict.h"
#include "kv/proto.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MIB (1u << 20)

static struct ol_kv_disk *open_disk(const char *dir, int nshards, uint64_t bytes)
{
    char err[512];
    struct ol_kv_disk *d = NULL;
    struct ol_kv_disk_params p = {.dir = dir, .shard = 0, .nshards = nshards, .bytes = bytes,
                                  .evict_kind = OL_EVICT_DEFAULT, .queue_depth = 4};
    if (ol_kv_disk_open(&d, &p, err, sizeof err) < 0)
        olt_fail(__FILE__, __LINE__, "ol_kv_disk_open: %s", err);
    return d;
}

/* Writes a header for slot id as the tier would. */
static void put_hdr(const char *dir, uint32_t id, uint64_t seq, struct ol_kv_hash h, uint32_t ns,
                    uint64_t len, int damage)
{
    struct ol_kv_slot_hdr hd;
    memset(&hd, 0, sizeof hd);
    hd.magic = OL_KV_DISK_MAGIC;
    hd.version = OL_KV_DISK_VERSION;
    hd.key_len = 3;
    memcpy(hd.key, "key", 3);
    hd.gen = seq;
    hd.value_len = len;
    hd.value_sum = 77;
    hd.ns = ns;
    hd.flags = OL_KV_SLOT_COMMITTED;
    hd.hash_lo = h.lo;
    hd.hash_hi = h.hi;
    hd._reserved = ol_kv_slot_size_for(len);
    hd.hdr_crc = ol_kv_slot_hdr_crc(&hd);
    if (damage)
        hd.value_len ^= 1;
    char path[512];
    snprintf(path, sizeof path, "%s/kv-disk/shard-0.idx", dir);
    int fd = open(path, O_WRONLY);
    OLT_CHECK(fd >= 0);
    OLT_CHECK_EQ(pwrite(fd, &hd, sizeof hd, OL_KV_DISK_SB_SIZE + (off_t)id * OL_KV_HDR_SIZE),
                 (ssize_t)sizeof hd);
    close(fd);
}

static const char *subdir(const char *name)
{
    static char buf[512];
    snprintf(buf, sizeof buf, "%s/%s", olt_tmpdir(), name);
    OLT_CHECK(mkdir(buf, 0700) == 0); /* the tier makes only kv-disk/ inside */
    return buf;
}

OLT_TEST(kv_disk_rebuild_newest_wins_bad_and_overlapping_dropped)
{
    char dir[512];
    snprintf(dir, sizeof dir, "%s", subdir("rebuild"));
    struct ol_kv_disk *d = open_disk(dir, 1, 8 * MIB); /* 4 pages */
    ol_kv_disk_close(d);
    struct ol_kv_hash A = {1, 2}, B = {3, 4}, C = {5, 6}, D = {7, 8}, E = {9, 10};
    put_hdr(dir, 0, 5, A, 42, 65536, 0);
    put_hdr(dir, 1, 9, A, 42, 65536, 0);         /* a newer copy of A */
    put_hdr(dir, 2, 3, B, 42, 65536, 1);         /* damaged header */
    put_hdr(dir, 128, 4, C, 42, 65536, 0);       /* page 1 as a 64 KiB class ... */
    put_hdr(dir, 129, 7, D, 42, MIB, 0);         /* ... and, newer, as a 1 MiB class */
    put_hdr(dir, 256, 2, E, 42, 3 * MIB, 0);     /* a span over pages 2-3 */
    d = open_disk(dir, 1, 8 * MIB);
    uint64_t len = 0;
    OLT_CHECK_EQ(ol_kv_disk_find(d, 42, A, &len), 1);
    OLT_CHECK_EQ(len, 65536);
    OLT_CHECK_EQ(ol_kv_disk_find(d, 41, A, NULL), -1); /* another namespace */
    OLT_CHECK_EQ(ol_kv_disk_find(d, 42, B, NULL), -1);
    OLT_CHECK_EQ(ol_kv_disk_find(d, 42, C, NULL), -1);
    OLT_CHECK_EQ(ol_kv_disk_find(d, 42, D, NULL), 129);
    OLT_CHECK_EQ(ol_kv_disk_find(d, 42, E, &len), 256);
    OLT_CHECK_EQ(len, 3 * MIB);
    struct ol_kv_disk_stats st;
    ol_kv_disk_stats(d, &st);
    OLT_CHECK_EQ(st.recovered, 3);
    OLT_CHECK_EQ(st.entries, 3);
    OLT_CHECK_EQ(st.value_bytes, 65536 + MIB + 3 * MIB);
    OLT_CHECK(ol_kv_disk_has(d, A) && !ol_kv_disk_has(d, C));
    ol_kv_disk_close(d);
    /* Another layout (here: shard count) starts empty. */
    d = open_disk(dir, 2, 8 * MIB);
    ol_kv_disk_stats(d, &st);
    OLT_CHECK_EQ(st.recovered, 0);
    OLT_CHECK_EQ(ol_kv_disk_find(d, 42, A, NULL), -1);
    ol_kv_disk_close(d);
}

/* A tenant's tier lives in kv-disk/tenant-<name>/ beside the main tier's
 * files in kv-disk/, in the same dir: neither sees the other's entries, and
 * each finds its own again. */
OLT_TEST(kv_disk_tenant_files_apart)
{
    char dir[512], err[512], path[1024];
    snprintf(dir, sizeof dir, "%s", subdir("tenants"));
    struct ol_kv_disk *main_tier = open_disk(dir, 1, 8 * MIB), *t = NULL;
    struct ol_kv_disk_params p = {.dir = dir, .tenant = "team-a", .shard = 0, .nshards = 1,
                                  .bytes = 8 * MIB, .evict_kind = OL_EVICT_DEFAULT,
                                  .queue_depth = 4};
    OLT_CHECK_EQ(ol_kv_disk_open(&t, &p, err, sizeof err), 0);
    struct stat st;
    snprintf(path, sizeof path, "%s/kv-disk/tenant-team-a/shard-0.idx", dir);
    OLT_CHECK(stat(path, &st) == 0 && (st.st_mode & 0777) == 0600);
    snprintf(path, sizeof path, "%s/kv-disk/tenant-team-a", dir);
    OLT_CHECK(stat(path, &st) == 0 && S_ISDIR(st.st_mode) && (st.st_mode & 0777) == 0700);
    ol_kv_disk_close(t);
    ol_kv_disk_close(main_tier);
    struct ol_kv_hash A = {1, 2};
    put_hdr(dir, 0, 5, A, 42, 65536, 0);   /* the main tier's shard-0.idx */
    main_tier = open_disk(dir, 1, 8 * MIB);
    OLT_CHECK_EQ(ol_kv_disk_open(&t, &p, err, sizeof err), 0);
    OLT_CHECK_EQ(ol_kv_disk_find(main_tier, 42, A, NULL), 0);
    OLT_CHECK_EQ(ol_kv_disk_find(t, 42, A, NULL), -1);
    ol_kv_disk_close(t);
    ol_kv_disk_close(main_tier);
}

/* ---- I/O on a loop ---------------------------------------------------------- */

struct io_case {
    struct ol_kv_disk *d;
    char *src, *dst;
    uint64_t len, sum;
    struct ol_kv_hash h;
    int step, wrote, read, corrupt_then;
    int status[2];
    char key[8];
};

static void io_done(void *ctx, int ev, uint64_t tag, int status, const struct ol_kv_slot_hdr *hdr)
{
    struct io_case *t = ctx;
    ol_loop *loop = ol_loop_current();
    if (ev == OL_KV_DISK_WROTE) {
        t->wrote = 1;
        t->status[0] = status;
        int64_t id = ol_kv_disk_find(t->d, 1, t->h, NULL);
        if (status || id < 0 || ol_kv_disk_read(t->d, id, t->dst, 2) < 0) {
            ol_loop_stop(loop);
            return;
        }
        return;
    }
    t->read = 1;
    t->status[1] = status;
    if (status == 0 && (!hdr || hdr->key_len != 5 || memcmp(hdr->key, "blk-0", 5) != 0))
        t->status[1] = -1000; /* the header handed back must be the entry's */
    ol_loop_stop(loop);
}

static int io_init(ol_loop *loop, void *arg)
{
    struct io_case *t = arg;
    ol_kv_disk_attach(t->d, loop, io_done, t);
    if (t->corrupt_then) { /* only read what is there */
        int64_t id = ol_kv_disk_find(t->d, 1, t->h, NULL);
        t->wrote = 1;
        if (id < 0 || ol_kv_disk_read(t->d, id, t->dst, 2) < 0)
            return -1;
        return 0;
    }
    return ol_kv_disk_write(t->d, 1, t->h, "blk-0", 5, t->src, t->len, t->sum, 1) == 0 ? 0 : -1;
}

static void run_io(struct io_case *t)
{
    char err[256];
    ol_loop *l = NULL;
    struct ol_loop_params p = {.index = 0, .cpu = -1, .recv_bufs = 64, .recv_buf_size = 4096};
    int rc = ol_loop_create(&p, &l, err, sizeof err);
    if (rc == -EPERM || rc == -ENOSYS)
        OLT_SKIP("io_uring not available here");
    OLT_CHECK_EQ(rc, 0);
    rc = ol_loop_start(l, io_init, t);
    if (rc == 0)
        ol_loop_join(l);
    ol_loop_destroy(l);
    OLT_CHECK_EQ(rc, 0);
}

OLT_TEST(kv_disk_write_read_back_and_damaged_value_is_dropped)
{
    char dir[512];
    snprintf(dir, sizeof dir, "%s", subdir("io"));
    struct io_case t;
    memset(&t, 0, sizeof t);
    t.len = MIB + 1000; /* not a multiple of 4 KiB: the tail block is padded */
    OLT_CHECK(posix_memalign((void **)&t.src, 4096, 2 * MIB) == 0);
    OLT_CHECK(posix_memalign((void **)&t.dst, 4096, 2 * MIB) == 0);
    for (uint64_t i = 0; i < t.len; i++)
        t.src[i] = (char)(i * 7 + 3);
    t.sum = ol_kv_value_hash(t.src, t.len);
    t.h = (struct ol_kv_hash){11, 12};
    t.d = open_disk(dir, 1, 8 * MIB);
    run_io(&t);
    OLT_CHECK(t.wrote && t.read);
    OLT_CHECK_EQ(t.status[0], 0);
    OLT_CHECK_EQ(t.status[1], 0);
    OLT_CHECK_MEM(t.dst, t.src, t.len);
    struct ol_kv_disk_stats st;
    ol_kv_disk_stats(t.d, &st);
    OLT_CHECK_EQ(st.writes, 1);
    OLT_CHECK_EQ(st.reads, 1);
    int64_t id = ol_kv_disk_find(t.d, 1, t.h, NULL);
    OLT_CHECK(id >= 0);
    ol_kv_disk_close(t.d);

    /* Flip one value byte on the drive: the next read fails its checksum,
     * the entry is dropped and is never found again. */
    char path[600];
    snprintf(path, sizeof path, "%s/kv-disk/shard-0.dat", dir);
    int fd = open(path, O_RDWR);
    OLT_CHECK(fd >= 0);
    char b;
    off_t off = (off_t)(id / 128) * 2 * MIB + (off_t)(id % 128) * ol_kv_slot_size_for(t.len) + 4242;
    OLT_CHECK_EQ(pread(fd, &b, 1, off), 1);
    b ^= 0x10;
    OLT_CHECK_EQ(pwrite(fd, &b, 1, off), 1);
    close(fd);
    t.d = open_disk(dir, 1, 8 * MIB);
    OLT_CHECK(ol_kv_disk_find(t.d, 1, t.h, NULL) >= 0); /* the header is intact */
    t.corrupt_then = 1;
    t.read = 0;
    run_io(&t);
    OLT_CHECK(t.read);
    OLT_CHECK_EQ(t.status[1], -EBADMSG);
    OLT_CHECK_EQ(ol_kv_disk_find(t.d, 1, t.h, NULL), -1);
    ol_kv_disk_stats(t.d, &st);
    OLT_CHECK_EQ(st.corrupt, 1);
    OLT_CHECK_EQ(st.entries, 0);
    ol_kv_disk_close(t.d);
    free(t.src);
    free(t.dst);
}

/* ---- faults at the completions (test builds: base/fault.h) -------------------- */

#ifdef OL_FAULTS
#include "base/fault.h"

static void kv_faults(const char *spec)
{
    char err[256];
    if (ol_fault_set(spec, err, sizeof err) < 0)
        olt_fail(__FILE__, __LINE__, "spec \"%s\": %s", spec, err);
}
#endif

/*
 * A value write that fails (EIO), a header write cut short and a read cut
 * short: each reports -EIO to the shard, the entry is not served (gone from
 * the index), and what a restart finds is either nothing or the value's
 * exact bytes (a header write reported short may have reached the drive).
 */
OLT_TEST(kv_disk_faults_fail_the_io_never_the_bytes)
{
#ifndef OL_FAULTS
    OLT_SKIP("not a test build: no OL_FAULTS (make asan has it)");
#else
    char dir[512];
    snprintf(dir, sizeof dir, "%s", subdir("faults"));
    struct io_case t;
    memset(&t, 0, sizeof t);
    t.len = 300000;
    OLT_CHECK(posix_memalign((void **)&t.src, 4096, MIB) == 0);
    OLT_CHECK(posix_memalign((void **)&t.dst, 4096, MIB) == 0);
    for (uint64_t i = 0; i < t.len; i++)
        t.src[i] = (char)(i * 5 + 1);
    t.sum = ol_kv_value_hash(t.src, t.len);
    struct ol_kv_disk_stats st;
    static const char *const specs[] = {
        "kvdisk:op=write,nth=1,err=EIO",    /* the value */
        "kvdisk:op=write,nth=2,err=short",  /* its header */
        "kvdisk:op=read,err=short,persist", /* the write is fine, the read is not */
    };
    for (unsigned c = 0; c < 3; c++) {
        t.h = (struct ol_kv_hash){100 + c, 7};
        t.wrote = t.read = t.corrupt_then = 0;
        t.status[0] = t.status[1] = 1;
        t.d = open_disk(dir, 1, 8 * MIB);
        kv_faults(specs[c]);
        run_io(&t);
        kv_faults("");
        OLT_CHECK(t.wrote);
        OLT_CHECK_EQ(t.status[c < 2 ? 0 : 1], -EIO);
        OLT_CHECK_EQ(t.read, c == 2);
        OLT_CHECK_EQ(ol_kv_disk_find(t.d, 1, t.h, NULL), -1);
        ol_kv_disk_stats(t.d, &st);
        OLT_CHECK_EQ(st.io_errors, 1);
        OLT_CHECK_EQ(st.entries, 0);
        ol_kv_disk_close(t.d);
        /* after a restart: nothing, or exactly the value */
        t.d = open_disk(dir, 1, 8 * MIB);
        if (ol_kv_disk_find(t.d, 1, t.h, NULL) >= 0) {
            OLT_CHECK_EQ(c, 1);
            memset(t.dst, 0, MIB);
            t.corrupt_then = 1;
            t.read = 0;
            run_io(&t);
            OLT_CHECK(t.read);
            OLT_CHECK_EQ(t.status[1], 0);
            OLT_CHECK_MEM(t.dst, t.src, t.len);
        }
        ol_kv_disk_close(t.d);
    }
    free(t.src);
    free(t.dst);
#endif
}
