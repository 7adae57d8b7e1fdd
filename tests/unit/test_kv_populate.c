/*
 * test_kv_populate.c - populating the KV slab ahead of use: the order
 * (kv/populate.h: every byte once, each shard from its first page upward,
 * shards in turn) and ol_kv_slab_populate (pages allocated, no byte of the
 * slab changed, by MADV_POPULATE_WRITE and by the read-per-page fallback).
 * The thread itself is tested against a daemon (tests/integration/test_kv_slab.py).
 */
#include "olt.h"

#include "kv/populate.h"
#include "kv/slab.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static void check_order(uint64_t data_off, uint32_t npages, uint32_t nshards, uint32_t cp)
{
    struct ol_kv_pop_geom g = {.data_off = data_off, .npages = npages, .nshards = nshards,
                               .chunk_pages = cp};
    uint64_t total = data_off + (uint64_t)npages * OL_KV_PAGE, unit = 4096, covered = 0;
    uint8_t *seen = calloc(total / unit, 1);
    uint32_t *next = calloc(nshards, sizeof *next); /* each shard's next page */
    for (uint32_t i = 0; i < nshards; i++)
        next[i] = ol_kv_shard_first_page(npages, i, nshards);
    uint64_t off, len, k = 0, head_end = 0;
    int in_data = 0;
    uint32_t last_shard = UINT32_MAX;
    while (ol_kv_pop_range(&g, k++, &off, &len)) {
        OLT_CHECK(off % unit == 0 && len % unit == 0);
        OLT_CHECK(off + len <= total);
        for (uint64_t o = off; o < off + len; o += unit) {
            OLT_CHECK(!seen[o / unit]); /* once */
            seen[o / unit] = 1;
        }
        covered += len;
        if (off < data_off) { /* headers: first, in order, never after data */
            OLT_CHECK(!in_data);
            OLT_CHECK_EQ(off, head_end);
            OLT_CHECK(off + len <= data_off && len <= (uint64_t)cp * OL_KV_PAGE);
            head_end = off + len;
            continue;
        }
        OLT_CHECK_EQ(head_end, data_off);
        in_data = 1;
        if (!len)
            continue;
        /* a range is the next pages of one shard, within it */
        uint32_t p = (uint32_t)((off - data_off) / OL_KV_PAGE), n = (uint32_t)(len / OL_KV_PAGE);
        OLT_CHECK_EQ((off - data_off) % OL_KV_PAGE, 0);
        uint32_t i = 0;
        while (i + 1 < nshards && p >= ol_kv_shard_first_page(npages, i + 1, nshards))
            i++;
        OLT_CHECK_EQ(p, next[i]);
        OLT_CHECK(p + n <= ol_kv_shard_first_page(npages, i + 1, nshards));
        OLT_CHECK(n <= cp);
        /* shards take turns: one goes twice in a row only when the others are done */
        if (i == last_shard)
            for (uint32_t j = 0; j < nshards; j++)
                OLT_CHECK(j == i || next[j] == ol_kv_shard_first_page(npages, j + 1, nshards));
        next[i] = p + n;
        last_shard = i;
        OLT_CHECK(k < 1000000);
    }
    OLT_CHECK_EQ(covered, total);
    for (uint32_t i = 0; i < nshards; i++)
        OLT_CHECK_EQ(next[i], ol_kv_shard_first_page(npages, i + 1, nshards));
    free(next);
    free(seen);
}

OLT_TEST(kv_populate_order_covers_each_byte_once_shards_in_turn)
{
    static const uint32_t pages[] = {1, 2, 3, 7, 8, 64, 1000, 1025};
    for (size_t a = 0; a < sizeof pages / sizeof *pages; a++)
        for (uint32_t ns = 1; ns <= 5; ns++)
            for (uint32_t cp = 1; cp <= 4; cp++) {
                if (ns > pages[a])
                    continue; /* the service gives every shard a page at least */
                uint64_t hdr = 4096 + (uint64_t)pages[a] * OL_KV_SLOTS_PER_PAGE * OL_KV_HDR_SIZE;
                check_order((hdr + OL_KV_PAGE - 1) / OL_KV_PAGE * OL_KV_PAGE, pages[a], ns, cp);
            }
}

/* The pages of a fresh slab get allocated; bytes already written stay. */
static void populate_keeps_contents(int touch)
{
    struct ol_kv_slab s;
    char err[256];
    if (ol_kv_slab_create(&s, 16u << 20, 1, err, sizeof err) < 0)
        olt_fail(__FILE__, __LINE__, "%s", err);
    /* a written header and parts of two data pages, as a shard and a client would */
    uint64_t d0 = s.sb->data_off;
    struct ol_kv_hash h = {1, 2};
    ol_kv_slab_hdr_begin(&s, 130, 4, 9, h, "key", 3);
    for (uint64_t i = 0; i < 65536; i++) {
        s.base[d0 + i] = (char)(i * 7 + 1);
        s.base[d0 + 3 * OL_KV_PAGE + 12288 + i] = (char)(i * 13 + 5);
    }
    struct ol_kv_slot_hdr before = *ol_kv_slab_hdr(&s, 130);
    uint64_t alloc0 = ol_kv_slab_allocated(&s);
    OLT_CHECK(alloc0 < s.size);
    int t = touch;
    /* odd ranges: widened to whole pages, never past the region */
    OLT_CHECK_EQ(ol_kv_slab_populate(&s, 100, 5000, &t), 0);
    OLT_CHECK_EQ(ol_kv_slab_populate(&s, 0, s.size, &t), 0);
    OLT_CHECK_EQ(ol_kv_slab_populate(&s, s.size - 1, 1, &t), 0);
    OLT_CHECK_EQ(ol_kv_slab_populate(&s, s.size, 1, &t), -EINVAL);
    OLT_CHECK_EQ(t, touch); /* this kernel has MADV_POPULATE_WRITE (5.14+) */
    OLT_CHECK_EQ(ol_kv_slab_allocated(&s), s.size);
    OLT_CHECK_MEM(ol_kv_slab_hdr(&s, 130), &before, sizeof before);
    for (uint64_t i = 0; i < 65536; i++) {
        OLT_CHECK_EQ(s.base[d0 + i], (char)(i * 7 + 1));
        OLT_CHECK_EQ(s.base[d0 + 3 * OL_KV_PAGE + 12288 + i], (char)(i * 13 + 5));
    }
    OLT_CHECK_EQ(s.base[d0 + 5 * OL_KV_PAGE + 777], 0); /* a populated page reads zero */
    ol_kv_slab_destroy(&s);
}

OLT_TEST(kv_populate_write_keeps_contents) { populate_keeps_contents(0); }
OLT_TEST(kv_populate_touch_keeps_contents) { populate_keeps_contents(1); }

/* ---- the memory a slab may still take (ol_kv_pop_room) ----------------------------------- */

static void put_file(const char *root, const char *rel, const char *text)
{
    char p[1024];
    snprintf(p, sizeof p, "%s%s", root, rel);
    for (char *s = strchr(p + strlen(root) + 1, '/'); s; s = strchr(s + 1, '/')) {
        *s = 0;
        mkdir(p, 0700);
        *s = '/';
    }
    FILE *f = fopen(p, "w");
    OLT_CHECK(f != NULL);
    fputs(text, f);
    fclose(f);
}

OLT_TEST(kv_populate_room_from_meminfo_and_cgroups)
{
    const char *r = olt_tmpdir();
    /* nothing readable */
    OLT_CHECK_EQ(ol_kv_pop_room(r), -1);
    /* MemAvailable alone (no cgroup file) */
    put_file(r, "/proc/meminfo", "MemTotal:       24000000 kB\nMemFree: 100 kB\n"
                                 "MemAvailable:    8388608 kB\n");
    OLT_CHECK_EQ(ol_kv_pop_room(r), 8ll << 30);
    /* v1: the memory hierarchy's limit less usage, ours and each above it;
     * the smallest wins; an unlimited one (a huge number) does not count */
    put_file(r, "/proc/self/cgroup", "9:name=systemd:/\n4:memory:/a/b\n0::/\n");
    put_file(r, "/sys/fs/cgroup/memory/a/b/memory.limit_in_bytes", "9223372036854771712\n");
    put_file(r, "/sys/fs/cgroup/memory/a/b/memory.usage_in_bytes", "1000\n");
    OLT_CHECK_EQ(ol_kv_pop_room(r), 8ll << 30);
    put_file(r, "/sys/fs/cgroup/memory/a/memory.limit_in_bytes", "1073741824\n");
    put_file(r, "/sys/fs/cgroup/memory/a/memory.usage_in_bytes", "268435456\n");
    OLT_CHECK_EQ(ol_kv_pop_room(r), 3ll << 28);
    /* usage past the limit: no room */
    put_file(r, "/sys/fs/cgroup/memory/memory.limit_in_bytes", "100\n");
    put_file(r, "/sys/fs/cgroup/memory/memory.usage_in_bytes", "200\n");
    OLT_CHECK_EQ(ol_kv_pop_room(r), 0);
    /* v2 (its mount has controllers): "0::" names the cgroup; "max" is no limit */
    put_file(r, "/sys/fs/cgroup/cgroup.controllers", "cpu memory\n");
    put_file(r, "/proc/self/cgroup", "0::/svc/daemon\n");
    put_file(r, "/sys/fs/cgroup/svc/daemon/memory.max", "max\n");
    put_file(r, "/sys/fs/cgroup/svc/daemon/memory.current", "4096\n");
    OLT_CHECK_EQ(ol_kv_pop_room(r), 8ll << 30);
    put_file(r, "/sys/fs/cgroup/svc/memory.max", "2147483648\n");
    put_file(r, "/sys/fs/cgroup/svc/memory.current", "1073741824\n");
    OLT_CHECK_EQ(ol_kv_pop_room(r), 1ll << 30);
    /* a limit below MemAvailable's figure wins; MemAvailable below it wins */
    put_file(r, "/proc/meminfo", "MemAvailable:     524288 kB\n");
    OLT_CHECK_EQ(ol_kv_pop_room(r), 1ll << 29);
}
