/*
 * test_mapguard.c - base/mapguard.h: a SIGBUS raised by reading a file
 * mapping past the file's end (the file was cut after it was mapped) makes
 * ol_mapguard_run return -EFAULT, again and again on the same thread and on
 * another thread; reads that do not fault return the function's value; a
 * SIGBUS outside the guarded range, or with no guard, still ends the
 * process (checked in a child).
 */
#include "olt.h"

#include "base/mapguard.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

struct rd {
    const volatile uint8_t *p;
    size_t len;
};

static int sum_fn(void *arg)
{
    const struct rd *r = arg;
    unsigned s = 0;
    for (size_t i = 0; i < r->len; i += 512)
        s += r->p[i];
    return (int)(s & 0x7fffffff);
}

/* A file of 4 pages of 1s, mapped, then cut to 1 page (*fd kept open). */
static uint8_t *cut_mapping(const char *path, long pg)
{
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    OLT_CHECK(fd >= 0);
    uint8_t *buf = malloc((size_t)pg * 4);
    memset(buf, 1, (size_t)pg * 4);
    OLT_CHECK_EQ(write(fd, buf, (size_t)pg * 4), pg * 4);
    free(buf);
    uint8_t *m = mmap(NULL, (size_t)pg * 4, PROT_READ, MAP_SHARED, fd, 0);
    OLT_CHECK(m != MAP_FAILED);
    OLT_CHECK_EQ(ftruncate(fd, pg), 0);
    close(fd);
    return m;
}

struct thr {
    uint8_t *m;
    long pg;
    int rc;
};

static void *thr_fn(void *arg)
{
    struct thr *t = arg;
    struct rd r = {t->m + 2 * t->pg, (size_t)t->pg};
    t->rc = ol_mapguard_run(t->m, (size_t)t->pg * 4, sum_fn, &r);
    return NULL;
}

OLT_TEST(mapguard_sigbus_in_the_range_is_efault)
{
    long pg = sysconf(_SC_PAGESIZE);
    OLT_CHECK_EQ(ol_mapguard_init(), 0);
    OLT_CHECK_EQ(ol_mapguard_init(), 0); /* once is enough; again is harmless */
    char path[600];
    snprintf(path, sizeof path, "%s/cut", olt_tmpdir());
    uint8_t *m = cut_mapping(path, pg);
    struct rd first = {m, (size_t)pg}, past = {m + 2 * pg, (size_t)pg};
    int want = (int)(pg / 512); /* each byte read is a 1 */
    OLT_CHECK_EQ(ol_mapguard_run(m, (size_t)pg * 4, sum_fn, &first), want);
    for (int i = 0; i < 3; i++) /* the handler stays armed and SIGBUS unblocked */
        OLT_CHECK_EQ(ol_mapguard_run(m, (size_t)pg * 4, sum_fn, &past), -EFAULT);
    OLT_CHECK_EQ(ol_mapguard_run(m, (size_t)pg * 4, sum_fn, &first), want);
    struct thr t = {m, pg, 0};
    pthread_t th;
    OLT_CHECK_EQ(pthread_create(&th, NULL, thr_fn, &t), 0);
    pthread_join(th, NULL);
    OLT_CHECK_EQ(t.rc, -EFAULT);
    munmap(m, (size_t)pg * 4);
}

OLT_TEST(mapguard_sigbus_outside_the_range_still_kills)
{
    long pg = sysconf(_SC_PAGESIZE);
    OLT_CHECK_EQ(ol_mapguard_init(), 0);
    char path[600];
    snprintf(path, sizeof path, "%s/cut2", olt_tmpdir());
    uint8_t *m = cut_mapping(path, pg);
    for (int mode = 0; mode < 2; mode++) {
        fflush(NULL);
        pid_t pid = fork();
        OLT_CHECK(pid >= 0);
        if (pid == 0) {
            int nul = open("/dev/null", O_WRONLY);
            if (nul >= 0)
                dup2(nul, 2); /* ASan's report of the SIGBUS, expected */
            struct rd past = {m + 2 * pg, (size_t)pg};
            if (mode == 0) /* guarded, but the fault is not in the range */
                (void)ol_mapguard_run(m, (size_t)pg, sum_fn, &past);
            else           /* no guard at all */
                (void)sum_fn(&past);
            _exit(0);      /* not reached */
        }
        int status = 0;
        OLT_CHECK_EQ(waitpid(pid, &status, 0), pid);
        /* killed by SIGBUS (under ASan: its report, then an abort or a
         * failing exit) */
        OLT_CHECK(!(WIFEXITED(status) && WEXITSTATUS(status) == 0));
        if (WIFSIGNALED(status))
            OLT_CHECK(WTERMSIG(status) == SIGBUS || WTERMSIG(status) == SIGABRT);
    }
    munmap(m, (size_t)pg * 4);
}
