/*
 * test_fault.c - base/fault.h on its own: the spec grammar (good specs, and
 * a bad one that leaves the rules in force), a rule's matching by module,
 * drive and kind, nth / once / persist, chance with a seed (the same seed
 * draws the same failures), short counts for reads and writes only, an
 * open turned into an error closing its descriptor, and the report.
 * Test builds only (OL_FAULTS): skipped elsewhere, where the module does
 * not exist.
 */
#include "olt.h"

#include "base/fault.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifndef OL_FAULTS

OLT_TEST(fault_spec_grammar) { OLT_SKIP("not a test build: no OL_FAULTS (make asan has it)"); }

#else

#define ST OL_FAULT_STORE
#define KV OL_FAULT_KVDISK

static int set(const char *spec)
{
    char err[256];
    return ol_fault_set(spec, err, sizeof err);
}

OLT_TEST(fault_spec_grammar)
{
    char err[256], rep[2048];
    OLT_CHECK_EQ(ol_fault_set("store:drive=1,op=fsync,nth=3,err=EIO,persist;"
                              " kvdisk : op=write , nth=5, err=ENOSPC ;", err, sizeof err), 0);
    OLT_CHECK_STR(err, "");
    ol_fault_report(rep, sizeof rep);
    OLT_CHECK(strstr(rep, "\"rule\":\"store:drive=1,op=fsync,nth=3,err=EIO,persist\"") != NULL);
    OLT_CHECK(strstr(rep, "\"rule\":\"kvdisk:drive=any,op=write,nth=5,err=ENOSPC,once\"") != NULL);
    /* defaults: any drive, any op, the first, EIO, once */
    OLT_CHECK_EQ(set("store:"), 0);
    ol_fault_report(rep, sizeof rep);
    OLT_CHECK(strstr(rep, "\"rule\":\"store:drive=any,op=any,nth=1,err=EIO,once\"") != NULL);
    OLT_CHECK_EQ(set("store:op=read,err=short,p=0.25,seed=9,persist"), 0);
    ol_fault_report(rep, sizeof rep);
    OLT_CHECK(strstr(rep, "op=read,nth=1,p=0.25,seed=9,err=short,persist") != NULL);
    /* bad specs say what is wrong and leave the rules in force */
    static const char *const bad[] = {
        "disk:op=read", "store", "store:op=sync", "store:nth=0", "store:nth=x",
        "store:p=0", "store:p=1.5", "store:err=EPERM", "store:drive=-1", "store:bogus",
        "store:drive=99999999999", "store:err=delay,ms=0", "store:err=delay,ms=60001",
        "store:err=EIO,ms=5", "store:ms=5",
    };
    for (unsigned i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err[0] = 0;
        OLT_CHECK_EQ(ol_fault_set(bad[i], err, sizeof err), -EINVAL);
        OLT_CHECK(strncmp(err, "faults: ", 8) == 0);
    }
    ol_fault_report(rep, sizeof rep);
    OLT_CHECK(strstr(rep, "p=0.25,seed=9") != NULL);
    char many[1024] = "";
    for (unsigned i = 0; i <= OL_FAULT_MAX_RULES; i++)
        strcat(many, "store:op=read;");
    OLT_CHECK_EQ(ol_fault_set(many, err, sizeof err), -EINVAL);
    OLT_CHECK(strstr(err, "more than") != NULL);
    OLT_CHECK_EQ(set(""), 0);
    ol_fault_report(rep, sizeof rep);
    OLT_CHECK(strstr(rep, "\"rules\":[]") != NULL);
    OLT_CHECK_EQ(set(NULL), 0);
}

OLT_TEST(fault_nth_once_persist_and_matching)
{
    uint64_t st0 = ol_fault_injected(ST), kv0 = ol_fault_injected(KV);
    OLT_CHECK_EQ(set("store:drive=1,op=fsync,nth=3,err=EIO"), 0);
    OLT_CHECK_EQ(ol_fault_apply(ST, OL_FAULT_OP_FSYNC, 1, 0), 0);
    OLT_CHECK_EQ(ol_fault_apply(ST, OL_FAULT_OP_FSYNC, 0, 0), 0);      /* another drive */
    OLT_CHECK_EQ(ol_fault_apply(ST, OL_FAULT_OP_WRITE, 1, 4096), 4096); /* another kind */
    OLT_CHECK_EQ(ol_fault_apply(KV, OL_FAULT_OP_FSYNC, 1, 0), 0);      /* another module */
    OLT_CHECK_EQ(ol_fault_apply(ST, OL_FAULT_OP_FSYNC, 1, 0), 0);
    OLT_CHECK_EQ(ol_fault_apply(ST, OL_FAULT_OP_FSYNC, 1, 0), -EIO);   /* the third */
    OLT_CHECK_EQ(ol_fault_apply(ST, OL_FAULT_OP_FSYNC, 1, 0), 0);      /* once: spent */
    OLT_CHECK_EQ(ol_fault_injected(ST), st0 + 1);
    OLT_CHECK_EQ(set("store:op=write,nth=2,err=ENOSPC,persist"), 0);
    OLT_CHECK_EQ(ol_fault_apply(ST, OL_FAULT_OP_WRITE, 3, 100), 100);
    for (unsigned i = 0; i < 5; i++)
        OLT_CHECK_EQ(ol_fault_apply(ST, OL_FAULT_OP_WRITE, i, 100), -ENOSPC);
    OLT_CHECK_EQ(ol_fault_apply(ST, OL_FAULT_OP_NONE, 0, 100), 100);   /* not an I/O kind */
    /* short: half the bytes of reads and writes of at least two bytes, no
     * other op; never 0 (a read's 0 is its end of file) */
    OLT_CHECK_EQ(set("kvdisk:err=short,persist"), 0);
    OLT_CHECK_EQ(ol_fault_apply(KV, OL_FAULT_OP_READ, 0, 4096), 2048);
    OLT_CHECK_EQ(ol_fault_apply(KV, OL_FAULT_OP_WRITE, 0, 3), 1);
    OLT_CHECK_EQ(ol_fault_apply(KV, OL_FAULT_OP_READ, 0, 1), 1);
    OLT_CHECK_EQ(ol_fault_apply(KV, OL_FAULT_OP_WRITE, 0, 1), 1);
    OLT_CHECK_EQ(ol_fault_apply(KV, OL_FAULT_OP_WRITE, 0, 0), 0);
    OLT_CHECK_EQ(ol_fault_apply(KV, OL_FAULT_OP_READ, 0, -EIO), -EIO);
    OLT_CHECK_EQ(ol_fault_apply(KV, OL_FAULT_OP_FSYNC, 0, 0), 0);
    OLT_CHECK_EQ(ol_fault_apply(KV, OL_FAULT_OP_RENAME, 0, 0), 0);
    OLT_CHECK_EQ(ol_fault_injected(KV), kv0 + 2);
    /* the first matching rule that fires wins; the others still count */
    OLT_CHECK_EQ(set("store:op=read,err=ENOSPC,nth=2;store:op=read,err=EIO,persist"), 0);
    OLT_CHECK_EQ(ol_fault_apply(ST, OL_FAULT_OP_READ, 0, 10), -EIO);
    OLT_CHECK_EQ(ol_fault_apply(ST, OL_FAULT_OP_READ, 0, 10), -ENOSPC);
    OLT_CHECK_EQ(ol_fault_apply(ST, OL_FAULT_OP_READ, 0, 10), -EIO);
    char rep[1024];
    ol_fault_report(rep, sizeof rep);
    OLT_CHECK(strstr(rep, "\"seen\":3,\"fired\":1}") != NULL);
    OLT_CHECK(strstr(rep, "\"seen\":2,\"fired\":2}") != NULL);
    OLT_CHECK_EQ(set(""), 0);
    OLT_CHECK_EQ(ol_fault_apply(ST, OL_FAULT_OP_READ, 0, 10), 10);
}

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* delay: the result kept, the caller held up for ms first; counted */
OLT_TEST(fault_delay_keeps_the_result_late)
{
    uint64_t st0 = ol_fault_injected(ST);
    OLT_CHECK_EQ(set("store:op=rename,nth=2,err=delay,ms=150"), 0);
    char rep[512];
    ol_fault_report(rep, sizeof rep);
    OLT_CHECK(strstr(rep, "\"rule\":\"store:drive=any,op=rename,nth=2,err=delay,ms=150,once\"") !=
              NULL);
    uint64_t t0 = now_ms();
    OLT_CHECK_EQ(ol_fault_apply(ST, OL_FAULT_OP_RENAME, 0, 0), 0);     /* the first: at once */
    OLT_CHECK(now_ms() - t0 < 100);
    t0 = now_ms();
    OLT_CHECK_EQ(ol_fault_apply(ST, OL_FAULT_OP_RENAME, 0, -ENOENT), -ENOENT);
    OLT_CHECK(now_ms() - t0 >= 150);
    t0 = now_ms();
    OLT_CHECK_EQ(ol_fault_apply(ST, OL_FAULT_OP_RENAME, 0, 0), 0);     /* once: spent */
    OLT_CHECK(now_ms() - t0 < 100);
    OLT_CHECK_EQ(ol_fault_injected(ST), st0 + 1);
    OLT_CHECK_EQ(set("store:err=delay"), 0);                            /* 1000 ms by default */
    ol_fault_report(rep, sizeof rep);
    OLT_CHECK(strstr(rep, "err=delay,ms=1000,once") != NULL);
    OLT_CHECK_EQ(set(""), 0);
}

/* Failures among 1000 matches of a chance rule, as a bit string. */
static void draws(const char *spec, char out[1001])
{
    OLT_CHECK_EQ(set(spec), 0);
    for (unsigned i = 0; i < 1000; i++)
        out[i] = ol_fault_apply(ST, OL_FAULT_OP_UNLINK, 0, 0) < 0 ? '1' : '0';
    out[1000] = 0;
}

OLT_TEST(fault_chance_repeats_with_its_seed)
{
    char a[1001], b[1001], c[1001];
    draws("store:op=unlink,p=0.1,seed=42,persist", a);
    draws("store:op=unlink,p=0.1,seed=42,persist", b);
    draws("store:op=unlink,p=0.1,seed=43,persist", c);
    OLT_CHECK_STR(a, b);
    OLT_CHECK(strcmp(a, c) != 0);
    unsigned n = 0;
    for (unsigned i = 0; i < 1000; i++)
        n += a[i] == '1';
    OLT_CHECK(n > 50 && n < 150);          /* about 100 */
    draws("store:op=unlink,p=0.5,nth=10", a); /* once: one failure, not before the 10th */
    OLT_CHECK_EQ((long long)(strchr(a, '1') - a) >= 9, 1);
    OLT_CHECK(strchr(a, '1') == strrchr(a, '1'));
    OLT_CHECK_EQ(set(""), 0);
}

OLT_TEST(fault_failed_open_closes_its_descriptor)
{
    int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    OLT_CHECK(fd >= 0);
    OLT_CHECK_EQ(set("store:op=open,drive=2"), 0);
    OLT_CHECK_EQ(ol_fault_apply(ST, OL_FAULT_OP_OPEN, 2, fd), -EIO);
    OLT_CHECK_EQ(fcntl(fd, F_GETFD), -1);   /* closed: nobody else would */
    OLT_CHECK_EQ(errno, EBADF);
    OLT_CHECK_EQ(set(""), 0);
}

#endif
