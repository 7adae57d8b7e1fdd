/*
 * test_kv_slab.c - the shared KV slab: layout, sealing, shared mapping,
 * slot headers, and per-shard slot allocation (classes, spans, page return).
 */
#include "olt.h"

#include "kv/slab.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static void mk(struct ol_kv_slab *s, uint64_t bytes)
{
    char err[256];
    if (ol_kv_slab_create(s, bytes, 1, err, sizeof err) < 0)
        olt_fail(__FILE__, __LINE__, "%s", err);
}

OLT_TEST(kv_slab_layout_sealed_and_shared)
{
    struct ol_kv_slab s;
    mk(&s, 64u << 20);
    OLT_CHECK_EQ(s.npages, 32);
    OLT_CHECK_EQ(s.sb->magic, OL_KV_SUPER_MAGIC);
    OLT_CHECK_EQ(s.sb->data_off % OL_KV_PAGE, 0);
    OLT_CHECK(s.sb->hdr_off + (uint64_t)s.npages * OL_KV_SLOTS_PER_PAGE * OL_KV_HDR_SIZE <= s.sb->data_off);
    OLT_CHECK_EQ(s.size, s.sb->data_off + 32ull * OL_KV_PAGE);
    /* a second mapping (what a client does with the passed fd) sees the same bytes */
    char *m = mmap(NULL, s.size, PROT_READ | PROT_WRITE, MAP_SHARED, s.fd, 0);
    OLT_CHECK(m != MAP_FAILED);
    s.base[s.sb->data_off + 5] = 42;
    OLT_CHECK_EQ(m[s.sb->data_off + 5], 42);
    munmap(m, s.size);
    /* sealed: nobody can shrink it under a mapping */
    OLT_CHECK(ftruncate(s.fd, 4096) < 0);
    ol_kv_slab_destroy(&s);
}

/* The kernel's THP settings for shmem, as sysfs writes them. */
OLT_TEST(kv_slab_thp_setting)
{
    char w[64];
    /* no per-size control (before 6.11): the top-level file decides */
    OLT_CHECK_EQ(ol_kv_thp_shmem("always within_size advise [never] deny force\n", NULL, w,
                                 sizeof w), 0);
    OLT_CHECK_STR(w, "shmem_enabled=never");
    OLT_CHECK_EQ(ol_kv_thp_shmem("always within_size [advise] never deny force\n", NULL, w,
                                 sizeof w), 1);
    OLT_CHECK_STR(w, "shmem_enabled=advise");
    OLT_CHECK_EQ(ol_kv_thp_shmem("[always] within_size advise never deny force", NULL, w, sizeof w), 1);
    OLT_CHECK_EQ(ol_kv_thp_shmem("always [within_size] advise never deny force", NULL, w, sizeof w), 1);
    OLT_CHECK_EQ(ol_kv_thp_shmem("always within_size advise never deny [force]", NULL, w, sizeof w), 1);
    OLT_CHECK_EQ(ol_kv_thp_shmem("always within_size advise never [deny] force", NULL, w, sizeof w), 0);
    /* the 2 MiB control decides unless it inherits */
    OLT_CHECK_EQ(ol_kv_thp_shmem("always within_size advise [never] deny force",
                                 "always [inherit] within_size advise never\n", w, sizeof w), 0);
    OLT_CHECK_STR(w, "shmem_enabled=never");
    OLT_CHECK_EQ(ol_kv_thp_shmem("always within_size advise [never] deny force",
                                 "always inherit within_size [advise] never", w, sizeof w), 1);
    OLT_CHECK_STR(w, "hugepages-2048kB/shmem_enabled=advise");
    OLT_CHECK_EQ(ol_kv_thp_shmem("[always] within_size advise never deny force",
                                 "always inherit within_size advise [never]", w, sizeof w), 0);
    OLT_CHECK_STR(w, "hugepages-2048kB/shmem_enabled=never");
    /* but the top-level deny and force override it */
    OLT_CHECK_EQ(ol_kv_thp_shmem("always within_size advise never [deny] force",
                                 "always inherit within_size [advise] never", w, sizeof w), 0);
    OLT_CHECK_STR(w, "shmem_enabled=deny");
    OLT_CHECK_EQ(ol_kv_thp_shmem("always within_size advise never deny [force]",
                                 "always inherit within_size advise [never]", w, sizeof w), 1);
    OLT_CHECK_STR(w, "shmem_enabled=force");
    /* no THP in the kernel, or text without a choice */
    OLT_CHECK_EQ(ol_kv_thp_shmem(NULL, NULL, w, sizeof w), 0);
    OLT_CHECK_STR(w, "");
    OLT_CHECK_EQ(ol_kv_thp_shmem("never", "garbage [", w, sizeof w), 0);
    OLT_CHECK_STR(w, "");
}

/* The log's line on what backs a slab, and how to get larger pages. */
OLT_TEST(kv_slab_backing_text)
{
    struct ol_kv_slab s = {.fd = -1, .size = (2ull << 30) + (34u << 20), .page_bytes = 4096,
                           .backing = OL_KV_BACKING_SHMEM, .thp = "shmem_enabled=never"};
    struct ol_kv_hugetlb_pool none = {.total = 0, .free = 0, .page = 2u << 20};
    char b[320];
    OLT_CHECK_STR(ol_kv_slab_backing_text(&s, &none, b, sizeof b),
                  "shmem, 4 KiB pages (shmem THP is off: echo advise > "
                  "/sys/kernel/mm/transparent_hugepage/shmem_enabled; or reserve hugetlb pages: "
                  "vm.nr_hugepages, 1041 of 2 MiB for this slab)");
    OLT_CHECK_STR(ol_kv_slab_backing_name(&s), "shmem");
    struct ol_kv_hugetlb_pool small = {.total = 100, .free = 60, .page = 2u << 20};
    snprintf(s.thp, sizeof s.thp, "hugepages-2048kB/shmem_enabled=never");
    OLT_CHECK_STR(ol_kv_slab_backing_text(&s, &small, b, sizeof b),
                  "shmem, 4 KiB pages (shmem THP is off: echo advise > "
                  "/sys/kernel/mm/transparent_hugepage/hugepages-2048kB/shmem_enabled; or enlarge "
                  "the hugetlb pool: 60 of its 2 MiB pages free, this slab needs 1041: "
                  "vm.nr_hugepages)");
    s.thp[0] = 0;
    OLT_CHECK(strstr(ol_kv_slab_backing_text(&s, &none, b, sizeof b), "this kernel has no shmem THP"));
    s.backing = OL_KV_BACKING_SHMEM_THP;
    snprintf(s.thp, sizeof s.thp, "shmem_enabled=advise");
    OLT_CHECK_STR(ol_kv_slab_backing_text(&s, &none, b, sizeof b),
                  "shmem with THP (shmem_enabled=advise)");
    OLT_CHECK_STR(ol_kv_slab_backing_name(&s), "shmem_thp");
    s.backing = OL_KV_BACKING_HUGETLB;
    s.page_bytes = 2u << 20;
    OLT_CHECK_STR(ol_kv_slab_backing_text(&s, &none, b, sizeof b), "hugetlbfs 2 MiB pages");
    OLT_CHECK_STR(ol_kv_slab_backing_name(&s), "hugetlb");
    s.page_bytes = 1u << 30;
    OLT_CHECK_STR(ol_kv_slab_backing_text(&s, &none, b, sizeof b), "hugetlbfs 1 GiB pages");
}

/* What this host gives: the slab says which backing it got, and the
 * kernel's count of allocated bytes follows first touches. */
OLT_TEST(kv_slab_backing_and_allocated)
{
    struct ol_kv_slab s;
    mk(&s, 8u << 20);
    struct ol_kv_hugetlb_pool pool;
    ol_kv_hugetlb_pool_read(&pool);
    if (s.backing == OL_KV_BACKING_HUGETLB) {
        OLT_CHECK(pool.total > 0);
        OLT_CHECK(s.page_bytes >= (2u << 20));
    } else {
        OLT_CHECK_EQ(s.page_bytes, 4096);
        uint64_t before = ol_kv_slab_allocated(&s);
        OLT_CHECK(before < s.size);
        memset(s.base + s.sb->data_off, 1, 1u << 20);
        OLT_CHECK(ol_kv_slab_allocated(&s) >= before + (1u << 20));
    }
    OLT_CHECK(ol_kv_slab_allocated(&s) <= s.size);
    ol_kv_slab_destroy(&s);
}

OLT_TEST(kv_slab_header_write_and_check)
{
    struct ol_kv_slab s;
    mk(&s, 8u << 20);
    struct ol_kv_hash h = {0x1111, 0x2222};
    ol_kv_slab_hdr_begin(&s, 3, 8, 7, h, "block-key", 9);
    struct ol_kv_slot_hdr copy = *ol_kv_slab_hdr(&s, 3);
    OLT_CHECK_EQ(ol_kv_slab_hdr_check(&copy), -1); /* reserved: odd generation, unreadable */
    OLT_CHECK_EQ(copy.gen, 9);
    ol_kv_slab_hdr_publish(&s, 3, 65536, 0xabcdef, OL_KV_SLOT_COMMITTED);
    copy = *ol_kv_slab_hdr(&s, 3);
    OLT_CHECK_EQ(ol_kv_slab_hdr_check(&copy), 0);
    OLT_CHECK_EQ(copy.gen, 8);
    OLT_CHECK_EQ(copy.key_len, 9);
    OLT_CHECK_MEM(copy.key, "block-key", 9);
    copy.value_len++; /* any change is caught */
    OLT_CHECK_EQ(ol_kv_slab_hdr_check(&copy), -1);
    copy = *ol_kv_slab_hdr(&s, 3);
    copy.gen |= 1; /* a header being written is never valid */
    OLT_CHECK_EQ(ol_kv_slab_hdr_check(&copy), -1);
    ol_kv_slab_destroy(&s);
}

OLT_TEST(kv_slab_alloc_classes_fill_free_and_pages_return)
{
    struct ol_kv_slab s;
    struct ol_kv_alloc a;
    mk(&s, 16u << 20); /* 8 pages */
    OLT_CHECK_EQ(ol_kv_alloc_init(&a, s.npages, 0, 8), 0);
    int c64 = ol_kv_alloc_class(&a, 64 << 10);       /* 32 per page */
    int c1 = ol_kv_alloc_class(&a, 1000);            /* rounded to 16 KiB: 128 per page */
    OLT_CHECK(c64 >= 0 && c1 >= 0 && c64 != c1);
    OLT_CHECK_EQ(ol_kv_alloc_class(&a, 65536), c64); /* same class again */
    OLT_CHECK_EQ(a.cls[c1].slot_size, OL_KV_MIN_SLOT);
    /* fill 4 pages with 64 KiB slots */
    uint32_t ids[128];
    for (int i = 0; i < 128; i++) {
        int64_t id = ol_kv_alloc_slot(&a, c64);
        OLT_CHECK(id >= 0);
        ids[i] = (uint32_t)id;
        OLT_CHECK_EQ(ol_kv_alloc_class_of(&a, ids[i]), c64);
        /* every slot is inside its page and 4 KiB aligned */
        uint64_t off = ol_kv_slab_off(&s, ids[i], a.cls[c64].slot_size);
        OLT_CHECK_EQ(off % 4096, 0);
        OLT_CHECK(off + a.cls[c64].slot_size <= s.size);
    }
    OLT_CHECK_EQ(a.cls[c64].pages, 4);
    OLT_CHECK_EQ(a.free_pages, 4);
    /* distinct offsets */
    for (int i = 0; i < 128; i++)
        for (int j = i + 1; j < 128; j++)
            OLT_CHECK(ids[i] != ids[j]);
    /* the other class takes the remaining pages, then runs out */
    int n1 = 0;
    while (ol_kv_alloc_slot(&a, c1) >= 0)
        n1++;
    OLT_CHECK_EQ(n1, 4 * 128);
    OLT_CHECK_EQ(ol_kv_alloc_slot(&a, c64), -ENOSPC);
    /* free one page worth of 64 KiB slots: the page returns to the shard
     * and the other class can use it */
    for (int i = 0; i < 32; i++)
        ol_kv_alloc_free(&a, c64, ids[i]);
    OLT_CHECK_EQ(a.free_pages, 1);
    OLT_CHECK(ol_kv_alloc_slot(&a, c1) >= 0);
    /* freeing one slot of a full page makes exactly that slot reusable */
    ol_kv_alloc_free(&a, c64, ids[40]);
    OLT_CHECK_EQ(ol_kv_alloc_slot(&a, c64), ids[40]);
    ol_kv_alloc_exit(&a);
    ol_kv_slab_destroy(&s);
}

OLT_TEST(kv_slab_alloc_spans_and_class_limit)
{
    struct ol_kv_slab s;
    struct ol_kv_alloc a;
    mk(&s, 20u << 20); /* 10 pages */
    OLT_CHECK_EQ(ol_kv_alloc_init(&a, s.npages, 2, 8), 0); /* a shard owning pages 2..9 */
    int big = ol_kv_alloc_class(&a, (3u << 20) + 1); /* 2 pages per slot */
    OLT_CHECK(big >= 0);
    OLT_CHECK_EQ(a.cls[big].span_pages, 2);
    int64_t x = ol_kv_alloc_slot(&a, big), y = ol_kv_alloc_slot(&a, big);
    OLT_CHECK_EQ(x, 2 * OL_KV_SLOTS_PER_PAGE);
    OLT_CHECK_EQ(y, 4 * OL_KV_SLOTS_PER_PAGE);
    OLT_CHECK_EQ(a.free_pages, 4);
    ol_kv_alloc_free(&a, big, (uint32_t)x);
    OLT_CHECK_EQ(a.free_pages, 6);
    OLT_CHECK_EQ(ol_kv_alloc_slot(&a, big), x);
    OLT_CHECK_EQ(ol_kv_alloc_class(&a, 17u << 20), -E2BIG); /* larger than the shard */
    for (int i = 0; i < OL_KV_MAX_CLASSES - 1; i++)
        OLT_CHECK(ol_kv_alloc_class(&a, (uint64_t)(i + 1) * 20480) >= 0);
    OLT_CHECK_EQ(ol_kv_alloc_class(&a, 999999), -ENOSPC);
    ol_kv_alloc_exit(&a);
    ol_kv_slab_destroy(&s);
}
