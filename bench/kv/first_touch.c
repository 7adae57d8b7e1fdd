/*
 * first_touch.c - what the kernel charges for a shmem page's first touch,
 * the bounds of `openlake bench kv` put on a cold and on a populated slab.
 *
 *   first_touch MIB
 *
 * Copies MIB MiB in 2 MiB pieces into a MAP_SHARED mapping of a memfd, as
 * the C client does (one MADV_POPULATE_READ per 2 MiB piece, then memcpy):
 * once into a fresh memfd (every page allocated and zeroed on the way: a
 * cold slab), once into a memfd populated beforehand with
 * MADV_POPULATE_WRITE through another mapping (what kv_slab.populate does),
 * timing the populate too. THP is advised as the daemon does. Prints one
 * JSON object: fresh_gbs, populated_gbs, populate_s_per_gib, and the
 * shmem_enabled setting in force.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#define MADV_POPULATE_WRITE 23
#endif
#define PIECE (2u << 20)

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static char *map(int fd, size_t n)
{
    char *m = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED) {
        perror("mmap");
        exit(1);
    }
    madvise(m, n, MADV_HUGEPAGE);
    return m;
}

static int memfd(size_t n)
{
    int fd = memfd_create("first-touch", MFD_CLOEXEC);
    if (fd < 0 || ftruncate(fd, (off_t)n) < 0) {
        perror("memfd");
        exit(1);
    }
    return fd;
}

/* GB/s of copying src into a fresh mapping of fd, the client's way. */
static double copy_in(int fd, size_t n, const char *src)
{
    char *m = map(fd, n);
    double t = now();
    for (size_t o = 0; o < n; o += PIECE) {
        madvise(m + o, PIECE, MADV_POPULATE_READ);
        memcpy(m + o, src, PIECE);
    }
    t = now() - t;
    munmap(m, n);
    return (double)n / t / 1e9;
}

int main(int argc, char **argv)
{
    size_t n = (argc > 1 ? strtoull(argv[1], NULL, 10) : 1024) << 20;
    char *src = malloc(PIECE);
    for (size_t i = 0; i < PIECE; i++)
        src[i] = (char)(i * 131 + 7);
    int a = memfd(n), b = memfd(n);
    double fresh = copy_in(a, n, src);
    char *m = map(b, n);
    double t = now();
    if (madvise(m, n, MADV_POPULATE_WRITE) < 0) {
        perror("MADV_POPULATE_WRITE");
        return 1;
    }
    t = now() - t;
    munmap(m, n);
    double populated = copy_in(b, n, src);
    char thp[128] = "", *l, *r;
    FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/shmem_enabled", "r");
    if (f && fgets(thp, sizeof thp, f) && (l = strchr(thp, '[')) && (r = strchr(l, ']'))) {
        *r = 0;
        memmove(thp, l + 1, strlen(l + 1) + 1);
    }
    if (f)
        fclose(f);
    printf("{\"mib\": %zu, \"fresh_gbs\": %.3f, \"populated_gbs\": %.3f, "
           "\"populate_s_per_gib\": %.3f, \"shmem_enabled\": \"%s\"}\n",
           n >> 20, fresh, populated, t / ((double)n / (1u << 30)), thp);
    return 0;
}
