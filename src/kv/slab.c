/*
 * slab.c - see slab.h.
 */
#include "kv/slab.h"

#include "base/simd.h"

#include <errno.h>
#include <fcntl.h>
#include <isa-l/crc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define OL_NONE UINT32_MAX

static uint64_t ol_round_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

uint32_t ol_kv_slot_size_for(uint64_t value_size)
{
    if (value_size > (1ull << 31))
        return 0;
    uint64_t s = ol_round_up(value_size < OL_KV_MIN_SLOT ? OL_KV_MIN_SLOT : value_size, 4096);
    return (uint32_t)s;
}

#define OL_THP_DIR "/sys/kernel/mm/transparent_hugepage/"

/* The bracketed word of a sysfs choice ("a [b] c" -> "b") into w; 0, or -1. */
static int ol_bracketed(const char *text, char *w, size_t wlen)
{
    const char *a = text ? strchr(text, '[') : NULL, *b = a ? strchr(a, ']') : NULL;
    if (!b || (size_t)(b - a - 1) >= wlen)
        return -1;
    memcpy(w, a + 1, (size_t)(b - a - 1));
    w[b - a - 1] = 0;
    return 0;
}

int ol_kv_thp_shmem(const char *top, const char *pmd, char *word, size_t wordlen)
{
    char w[32], t[32];
    const char *file = "hugepages-2048kB/shmem_enabled";
    /* the top-level "deny" and "force" override every per-size setting */
    int top_wins = ol_bracketed(top, t, sizeof t) == 0 && (!strcmp(t, "deny") || !strcmp(t, "force"));
    if (top_wins || ol_bracketed(pmd, w, sizeof w) < 0 || !strcmp(w, "inherit")) {
        file = "shmem_enabled";
        if (ol_bracketed(top, w, sizeof w) < 0) {
            snprintf(word, wordlen, "%s", "");
            return 0;
        }
    }
    snprintf(word, wordlen, "%s=%s", file, w);
    return !strcmp(w, "always") || !strcmp(w, "within_size") || !strcmp(w, "advise") ||
           !strcmp(w, "force");
}

const char *ol_kv_read_small(const char *path, char *buf, size_t len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    ssize_t n = read(fd, buf, len - 1);
    close(fd);
    if (n <= 0)
        return NULL;
    buf[n] = 0;
    return buf;
}

void ol_kv_hugetlb_pool_read(struct ol_kv_hugetlb_pool *p)
{
    *p = (struct ol_kv_hugetlb_pool){.total = -1, .free = -1};
    FILE *f = fopen("/proc/meminfo", "re");
    if (!f)
        return;
    char line[128];
    unsigned long long v;
    while (fgets(line, sizeof line, f)) {
        if (sscanf(line, "HugePages_Total: %llu", &v) == 1)
            p->total = (long)v;
        else if (sscanf(line, "HugePages_Free: %llu", &v) == 1)
            p->free = (long)v;
        else if (sscanf(line, "Hugepagesize: %llu kB", &v) == 1)
            p->page = v << 10;
    }
    fclose(f);
}

const char *ol_kv_slab_backing_name(const struct ol_kv_slab *s)
{
    return s->backing == OL_KV_BACKING_HUGETLB     ? "hugetlb"
           : s->backing == OL_KV_BACKING_SHMEM_THP ? "shmem_thp"
                                                   : "shmem";
}

/* "2 MiB", "1 GiB", "64 KiB" */
static void ol_page_name(uint64_t b, char *buf, size_t len)
{
    if (b >= (1u << 30) && b % (1u << 30) == 0)
        snprintf(buf, len, "%llu GiB", (unsigned long long)(b >> 30));
    else if (b >= (1u << 20) && b % (1u << 20) == 0)
        snprintf(buf, len, "%llu MiB", (unsigned long long)(b >> 20));
    else
        snprintf(buf, len, "%llu KiB", (unsigned long long)(b >> 10));
}

const char *ol_kv_slab_backing_text(const struct ol_kv_slab *s,
                                    const struct ol_kv_hugetlb_pool *pool, char *buf, size_t len)
{
    char pg[32];
    if (s->backing == OL_KV_BACKING_HUGETLB) {
        ol_page_name(s->page_bytes, pg, sizeof pg);
        snprintf(buf, len, "hugetlbfs %s pages", pg);
        return buf;
    }
    if (s->backing == OL_KV_BACKING_SHMEM_THP) {
        snprintf(buf, len, "shmem with THP (%s)", s->thp);
        return buf;
    }
    char thp[160];
    if (s->thp[0]) {
        const char *eq = strchr(s->thp, '=');
        snprintf(thp, sizeof thp, "shmem THP is off: echo advise > " OL_THP_DIR "%.*s",
                 (int)(eq ? eq - s->thp : 0), s->thp);
    } else {
        snprintf(thp, sizeof thp, "this kernel has no shmem THP");
    }
    uint64_t hp = pool->page ? pool->page : OL_KV_PAGE;
    unsigned long long need = (unsigned long long)((s->size + hp - 1) / hp);
    ol_page_name(hp, pg, sizeof pg);
    if (pool->total > 0)
        snprintf(buf, len, "shmem, 4 KiB pages (%s; or enlarge the hugetlb pool: %ld of its "
                 "%s pages free, this slab needs %llu: vm.nr_hugepages)", thp,
                 pool->free, pg, need);
    else
        snprintf(buf, len, "shmem, 4 KiB pages (%s; or reserve hugetlb pages: vm.nr_hugepages, "
                 "%llu of %s for this slab)", thp, need, pg);
    return buf;
}

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14 */
#endif

int ol_kv_slab_populate(const struct ol_kv_slab *s, uint64_t off, uint64_t len, int *touch)
{
    uint64_t pg = s->page_bytes ? s->page_bytes : 4096;
    if (off > s->size || len > s->size - off)
        return -EINVAL;
    uint64_t from = off / pg * pg, to = ol_round_up(off + len, pg);
    if (to > s->size)
        to = s->size;
    if (from >= to)
        return 0;
    char *m = mmap(NULL, to - from, PROT_READ | PROT_WRITE, MAP_SHARED, s->fd, (off_t)from);
    if (m == MAP_FAILED)
        return -errno;
    int rc = 0;
    if (s->backing == OL_KV_BACKING_SHMEM_THP) /* "advise": the faulting mapping decides */
        madvise(m, to - from, MADV_HUGEPAGE);
    if (!*touch && madvise(m, to - from, MADV_POPULATE_WRITE) < 0) {
        rc = -errno;
        if (rc == -EINVAL) { /* a kernel before 5.14 */
            *touch = 1;
            rc = 0;
        }
    }
    if (*touch)
        for (uint64_t o = 0; o < to - from; o += 4096)
            (void)*(volatile const char *)(m + o);
    munmap(m, to - from);
    return rc;
}

uint64_t ol_kv_slab_allocated(const struct ol_kv_slab *s)
{
    struct stat st;
    if (s->fd < 0 || fstat(s->fd, &st) < 0)
        return 0;
    uint64_t b = (uint64_t)st.st_blocks * 512u;
    return b < s->size ? b : s->size;
}

int ol_kv_slab_create(struct ol_kv_slab *s, uint64_t bytes, int try_huge, char *err, size_t errlen)
{
    memset(s, 0, sizeof *s);
    s->fd = -1;
    uint64_t npages = bytes / OL_KV_PAGE;
    if (npages < 1)
        npages = 1;
    if (npages > (UINT32_MAX / OL_KV_SLOTS_PER_PAGE)) {
        snprintf(err, errlen, "kv slab: %llu bytes is too large", (unsigned long long)bytes);
        return -E2BIG;
    }
    uint64_t hdr_off = 4096;
    uint64_t hdr_bytes = npages * OL_KV_SLOTS_PER_PAGE * OL_KV_HDR_SIZE;
    uint64_t data_off = ol_round_up(hdr_off + hdr_bytes, OL_KV_PAGE);
    uint64_t size = data_off + npages * OL_KV_PAGE;
    int rc;
    int fd = -1;
    if (try_huge) {
        fd = memfd_create("openlake-kv-slab", MFD_CLOEXEC | MFD_ALLOW_SEALING | MFD_HUGETLB);
        if (fd >= 0 && ftruncate(fd, (off_t)size) == 0) {
            void *m = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
            struct stat st;
            if (m != MAP_FAILED) {
                s->base = m;
                s->backing = OL_KV_BACKING_HUGETLB;
                s->page_bytes = fstat(fd, &st) == 0 ? (uint32_t)st.st_blksize : OL_KV_PAGE;
            }
        }
        if (!s->base && fd >= 0) {
            close(fd);
            fd = -1;
        }
    }
    if (!s->base) {
        fd = memfd_create("openlake-kv-slab", MFD_CLOEXEC | MFD_ALLOW_SEALING);
        if (fd < 0) {
            rc = -errno;
            snprintf(err, errlen, "kv slab: memfd_create: %s", strerror(errno));
            return rc;
        }
        if (ftruncate(fd, (off_t)size) < 0) {
            rc = -errno;
            snprintf(err, errlen, "kv slab: ftruncate %llu: %s", (unsigned long long)size,
                     strerror(errno));
            close(fd);
            return rc;
        }
        void *m = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (m == MAP_FAILED) {
            rc = -errno;
            snprintf(err, errlen, "kv slab: mmap %llu bytes: %s", (unsigned long long)size,
                     strerror(errno));
            close(fd);
            return rc;
        }
        s->base = m;
        madvise(s->base, size, MADV_HUGEPAGE); /* honoured if shmem THP is enabled */
        char top[128], pmd[128];
        int thp = ol_kv_thp_shmem(ol_kv_read_small(OL_THP_DIR "shmem_enabled", top, sizeof top),
                                  ol_kv_read_small(OL_THP_DIR "hugepages-2048kB/shmem_enabled",
                                                pmd, sizeof pmd), s->thp, sizeof s->thp);
        s->backing = thp ? OL_KV_BACKING_SHMEM_THP : OL_KV_BACKING_SHMEM;
        s->page_bytes = 4096;
    }
    /* Clients may map it but never resize it. */
    fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL);
    s->fd = fd;
    s->size = size;
    s->npages = (uint32_t)npages;
    s->sb = (struct ol_kv_super *)s->base;
    *s->sb = (struct ol_kv_super){
        .magic = OL_KV_SUPER_MAGIC, .version = OL_KV_SLAB_VERSION, .size = size,
        .hdr_off = hdr_off, .data_off = data_off, .npages = (uint32_t)npages,
        .page_size = OL_KV_PAGE, .hdr_size = OL_KV_HDR_SIZE,
        .slots_per_page = OL_KV_SLOTS_PER_PAGE,
    };
    return 0;
}

void ol_kv_slab_destroy(struct ol_kv_slab *s)
{
    if (s->base)
        munmap(s->base, s->size);
    if (s->fd >= 0)
        close(s->fd);
    memset(s, 0, sizeof *s);
    s->fd = -1;
}

/* Standard CRC-32C (as in the KV protocol): ISA-L's crc32_iscsi neither
 * inverts its input nor its output, so we do. */
uint32_t ol_kv_slot_hdr_crc(const struct ol_kv_slot_hdr *h)
{
    uint32_t c = crc32_iscsi((unsigned char *)h, 56, 0xFFFFFFFFu);
    c = crc32_iscsi((unsigned char *)h->key, h->key_len <= OL_KV_KEY_MAX ? h->key_len : 0, c);
    ol_simd_clean();   /* base/simd.h: ISA-L leaves the vector unit dirty */
    return ~c;
}

void ol_kv_slab_hdr_begin(const struct ol_kv_slab *s, uint32_t id, uint64_t gen, uint32_t ns,
                          struct ol_kv_hash kh, const void *key, uint16_t key_len)
{
    struct ol_kv_slot_hdr *h = ol_kv_slab_hdr(s, id);
    volatile uint64_t *g = &h->gen;
    *g = gen | 1; /* odd until published */
    __atomic_thread_fence(__ATOMIC_RELEASE);
    h->magic = OL_KV_SLOT_MAGIC;
    h->version = OL_KV_SLAB_VERSION;
    h->key_len = key_len;
    h->value_len = 0;
    h->value_sum = 0;
    h->ns = ns;
    h->flags = 0;
    h->hash_lo = kh.lo;
    h->hash_hi = kh.hi;
    h->_reserved = 0;
    memcpy(h->key, key, key_len);
}

void ol_kv_slab_hdr_retire(const struct ol_kv_slab *s, uint32_t id)
{
    struct ol_kv_slot_hdr *h = ol_kv_slab_hdr(s, id);
    *(volatile uint64_t *)&h->gen = h->gen | 1;
    __atomic_thread_fence(__ATOMIC_RELEASE);
}

void ol_kv_slab_hdr_publish(const struct ol_kv_slab *s, uint32_t id, uint64_t value_len,
                            uint64_t value_sum, uint32_t flags)
{
    struct ol_kv_slot_hdr *h = ol_kv_slab_hdr(s, id);
    uint64_t gen = h->gen & ~1ull;
    h->value_len = value_len;
    h->value_sum = value_sum;
    h->flags = flags;
    h->gen = gen; /* the crc covers the final, even generation */
    h->hdr_crc = ol_kv_slot_hdr_crc(h);
    h->gen = gen | 1;
    __atomic_thread_fence(__ATOMIC_RELEASE);
    *(volatile uint64_t *)&h->gen = gen;
}

int ol_kv_slab_hdr_check(const struct ol_kv_slot_hdr *h)
{
    if (h->magic != OL_KV_SLOT_MAGIC || h->version != OL_KV_SLAB_VERSION ||
        h->key_len > OL_KV_KEY_MAX || (h->gen & 1))
        return -1;
    return ol_kv_slot_hdr_crc(h) == h->hdr_crc ? 0 : -1;
}

/* ---- allocation -------------------------------------------------------------- */

int ol_kv_alloc_init(struct ol_kv_alloc *a, uint32_t total_pages, uint32_t first, uint32_t n)
{
    memset(a, 0, sizeof *a);
    if (n == 0 || first + n > total_pages)
        return -EINVAL;
    a->first_page = first;
    a->npages = n;
    a->free_pages = n;
    a->page_class = calloc(n, 1);
    a->page_next = calloc(n, sizeof *a->page_next);
    a->page_prev = calloc(n, sizeof *a->page_prev);
    a->page_used = calloc((size_t)n * 2, sizeof *a->page_used);
    a->page_nused = calloc(n, sizeof *a->page_nused);
    if (!a->page_class || !a->page_next || !a->page_prev || !a->page_used || !a->page_nused) {
        ol_kv_alloc_exit(a);
        return -ENOMEM;
    }
    return 0;
}

void ol_kv_alloc_exit(struct ol_kv_alloc *a)
{
    free(a->page_class);
    free(a->page_next);
    free(a->page_prev);
    free(a->page_used);
    free(a->page_nused);
    memset(a, 0, sizeof *a);
}

int ol_kv_alloc_class(struct ol_kv_alloc *a, uint64_t value_size)
{
    uint32_t ss = ol_kv_slot_size_for(value_size);
    if (!ss)
        return -E2BIG;
    int free_c = -1;
    for (int c = 0; c < OL_KV_MAX_CLASSES; c++) {
        if (a->cls[c].slot_size == ss)
            return c;
        if (!a->cls[c].slot_size && free_c < 0)
            free_c = c;
    }
    if (free_c < 0)
        return -ENOSPC;
    struct ol_kv_class *k = &a->cls[free_c];
    uint32_t span = ss <= OL_KV_PAGE ? 1 : (uint32_t)((ss + OL_KV_PAGE - 1) / OL_KV_PAGE);
    if (span > a->npages)
        return -E2BIG;
    *k = (struct ol_kv_class){.slot_size = ss, .per_page = ss <= OL_KV_PAGE ? OL_KV_PAGE / ss : 0,
                              .span_pages = span, .partial = OL_NONE};
    return free_c;
}

static void ol_partial_push(struct ol_kv_alloc *a, struct ol_kv_class *k, uint32_t lp)
{
    a->page_prev[lp] = OL_NONE;
    a->page_next[lp] = k->partial;
    if (k->partial != OL_NONE)
        a->page_prev[k->partial] = lp;
    k->partial = lp;
}

static void ol_partial_unlink(struct ol_kv_alloc *a, struct ol_kv_class *k, uint32_t lp)
{
    if (a->page_prev[lp] != OL_NONE)
        a->page_next[a->page_prev[lp]] = a->page_next[lp];
    else
        k->partial = a->page_next[lp];
    if (a->page_next[lp] != OL_NONE)
        a->page_prev[a->page_next[lp]] = a->page_prev[lp];
}

/* First run of n free local pages, or OL_NONE. */
static uint32_t ol_free_run(const struct ol_kv_alloc *a, uint32_t n)
{
    uint32_t run = 0;
    for (uint32_t p = 0; p < a->npages; p++) {
        run = a->page_class[p] == 0 ? run + 1 : 0;
        if (run == n)
            return p + 1 - n;
    }
    return OL_NONE;
}

/* Gives class c (k) the free span of pages starting at local page lp. */
static void ol_take_span(struct ol_kv_alloc *a, struct ol_kv_class *k, int c, uint32_t lp)
{
    a->page_class[lp] = (uint8_t)(c + 1);
    for (uint32_t i = 1; i < k->span_pages; i++)
        a->page_class[lp + i] = 0xFF;
    a->free_pages -= k->span_pages;
    k->pages += k->span_pages;
    k->used++;
}

/* Gives class c (k) free local page lp, empty, on its partial list. */
static void ol_take_page(struct ol_kv_alloc *a, struct ol_kv_class *k, int c, uint32_t lp)
{
    a->page_class[lp] = (uint8_t)(c + 1);
    a->page_used[2 * lp] = a->page_used[2 * lp + 1] = 0;
    a->page_nused[lp] = 0;
    a->free_pages--;
    k->pages++;
    ol_partial_push(a, k, lp);
}

/* Marks free slot `bit` of local page lp of class k used. */
static void ol_take_bit(struct ol_kv_alloc *a, struct ol_kv_class *k, uint32_t lp, uint32_t bit)
{
    a->page_used[2 * lp + bit / 64] |= 1ull << (bit % 64);
    if (++a->page_nused[lp] == k->per_page)
        ol_partial_unlink(a, k, lp);
    k->used++;
}

int64_t ol_kv_alloc_slot(struct ol_kv_alloc *a, int c)
{
    struct ol_kv_class *k = &a->cls[c];
    if (!k->per_page) { /* span class: one slot per run of pages */
        if (a->free_pages < k->span_pages)
            return -ENOSPC;
        uint32_t lp = ol_free_run(a, k->span_pages);
        if (lp == OL_NONE)
            return -ENOSPC;
        ol_take_span(a, k, c, lp);
        return (int64_t)(a->first_page + lp) * OL_KV_SLOTS_PER_PAGE;
    }
    uint32_t lp = k->partial;
    if (lp == OL_NONE) {
        if (!a->free_pages)
            return -ENOSPC;
        lp = ol_free_run(a, 1);
        ol_take_page(a, k, c, lp);
    }
    const uint64_t *w = &a->page_used[2 * lp];
    uint32_t bit = ~w[0] ? (uint32_t)__builtin_ctzll(~w[0]) : 64u + (uint32_t)__builtin_ctzll(~w[1]);
    ol_take_bit(a, k, lp, bit);
    return (int64_t)(a->first_page + lp) * OL_KV_SLOTS_PER_PAGE + bit;
}

int ol_kv_alloc_class_of(const struct ol_kv_alloc *a, uint32_t id)
{
    uint8_t pc = a->page_class[id / OL_KV_SLOTS_PER_PAGE - a->first_page];
    return pc == 0 || pc == 0xFF ? -1 : pc - 1;
}

void ol_kv_alloc_free(struct ol_kv_alloc *a, int c, uint32_t id)
{
    struct ol_kv_class *k = &a->cls[c];
    uint32_t lp = id / OL_KV_SLOTS_PER_PAGE - a->first_page;
    k->used--;
    if (!k->per_page) {
        for (uint32_t i = 0; i < k->span_pages; i++)
            a->page_class[lp + i] = 0;
        a->free_pages += k->span_pages;
        k->pages -= k->span_pages;
        return;
    }
    uint32_t bit = id % OL_KV_SLOTS_PER_PAGE;
    a->page_used[2 * lp + bit / 64] &= ~(1ull << (bit % 64));
    if (a->page_nused[lp]-- == k->per_page)
        ol_partial_push(a, k, lp); /* was full: has room again */
    if (a->page_nused[lp] == 0) {  /* wholly free: back to the shard */
        ol_partial_unlink(a, k, lp);
        a->page_class[lp] = 0;
        a->free_pages++;
        k->pages--;
    }
}

int ol_kv_alloc_claim(struct ol_kv_alloc *a, int c, uint32_t id)
{
    struct ol_kv_class *k = &a->cls[c];
    uint32_t page = id / OL_KV_SLOTS_PER_PAGE, bit = id % OL_KV_SLOTS_PER_PAGE;
    if (page < a->first_page || page - a->first_page >= a->npages || !k->slot_size)
        return -EINVAL;
    uint32_t lp = page - a->first_page;
    if (!k->per_page) {
        if (bit || lp + k->span_pages > a->npages)
            return -EINVAL;
        for (uint32_t i = 0; i < k->span_pages; i++)
            if (a->page_class[lp + i])
                return -EBUSY;
        ol_take_span(a, k, c, lp);
        return 0;
    }
    if (bit >= k->per_page)
        return -EINVAL;
    if (a->page_class[lp] == 0)
        ol_take_page(a, k, c, lp);
    else if (a->page_class[lp] != c + 1)
        return -EBUSY;
    if (a->page_used[2 * lp + bit / 64] & (1ull << (bit % 64)))
        return -EBUSY;
    ol_take_bit(a, k, lp, bit);
    return 0;
}
