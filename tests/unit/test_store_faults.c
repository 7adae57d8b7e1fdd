/*
 * test_store_faults.c - the object engine under faults injected at its
 * I/O completions (base/fault.h; engine.c ol_se_on_op): one drive whose
 * writes fail for good (the PUT succeeds on the write quorum, that drive
 * is left out, and a heal puts it back once the faults stop), short writes
 * and short reads on a drive (handled as the errors they are), a failed
 * fsync on one drive during the commit (with the group commit's barriers
 * and with an fsync per file: that drive counts as failed and holds no new
 * metadata), fsync failing everywhere (-EIO, nothing visible, nothing
 * left open), ENOSPC everywhere (OL_STORE_EFULL), and random faults of
 * every class during PUTs and DELETEs: a GET once the faults stop never
 * answers bytes no PUT wrote, nor a state no acknowledged operation
 * allows. Test builds only (OL_FAULTS): skipped elsewhere.
 */
#include "olt.h"
#include "store_harness.h"

#include "base/fault.h"
#include "store/engine.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifndef OL_FAULTS

OLT_TEST(store_fault_injection)
{
    OLT_SKIP("not a test build: no OL_FAULTS (make asan has it)");
}

#else

static void fill_version(struct sh_call *t, struct ol_meta_version *v)
{
    for (unsigned i = 0; i < 16; i++)
        v->etag[i] = (uint8_t)(t->size * 13 + i);
}

static int put(struct sh_env *e, const char *b, const char *k, const uint8_t *data, uint64_t size)
{
    return sh_put(e, b, k, data, size, fill_version);
}

static void faults(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void faults(const char *fmt, ...)
{
    char spec[256], err[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(spec, sizeof spec, fmt, ap);
    va_end(ap);
    if (ol_fault_set(spec, err, sizeof err) < 0)
        olt_fail(__FILE__, __LINE__, "spec \"%s\": %s", spec, err);
}

static bool has_meta(struct sh_env *e, unsigned drive, const char *b, const char *k)
{
    static uint8_t buf[1 << 20];
    struct ol_meta_version v;
    return sh_drive_meta(e, drive, b, k, buf, sizeof buf, &v);
}

/* One drive's writes fail for good: every PUT still succeeds without it,
 * reads are right, and a heal after the faults stop makes it whole. */
OLT_TEST_T(store_fault_eio_on_one_drives_writes, 120)
{
    struct sh_env e;
    sh_env_open(&e, 4, 4, 4096, 0);
    OLT_CHECK_EQ(sh_bucket_create(&e, "f"), 0);
    static const uint64_t sizes[] = {100, 5000, 300000};
    uint8_t *data = sh_pattern(300000, 3);
    unsigned bad = sh_drive_of(&e, "f", "k0", 1);
    faults("store:drive=%u,op=write,err=EIO,persist", bad);
    uint64_t before = ol_fault_injected(OL_FAULT_STORE);
    char key[16];
    for (unsigned i = 0; i < 3; i++) {
        snprintf(key, sizeof key, "k%u", i);
        OLT_CHECK_EQ(put(&e, "f", key, data, sizes[i]), 0);
        sh_check_get(&e, "f", key, data, sizes[i]);
    }
    OLT_CHECK(ol_fault_injected(OL_FAULT_STORE) > before);
    OLT_CHECK(!has_meta(&e, bad, "f", "k0"));
    struct ol_store_stats st = sh_stats(&e);
    OLT_CHECK(st.write_drive_failures >= 1);
    OLT_CHECK_EQ(st.put_errors, 0);
    faults("%s", "");
    sh_settle(&e);
    sh_check_tmp_empty(&e);
    sh_local_only("heal walks only this node's drives: a cluster store's remote drives are not "
                  "healed yet");
    for (unsigned i = 0; i < 3; i++) {
        snprintf(key, sizeof key, "k%u", i);
        OLT_CHECK(!has_meta(&e, bad, "f", key));
        struct ol_heal_result res;
        OLT_CHECK_EQ(ol_store_heal_object(e.s, "f", key, 0, &res), 0);
        OLT_CHECK_EQ(res.drives_healed, 1);
        OLT_CHECK(has_meta(&e, bad, "f", key));
        sh_check_get(&e, "f", key, data, sizes[i]);
    }
    free(data);
    sh_env_stop(&e, false);
}

/* Short writes on one drive and short reads on another are errors of
 * those drives, never bytes: the PUT and the GETs are right. */
OLT_TEST_T(store_fault_short_writes_and_reads, 120)
{
    struct sh_env e;
    sh_env_open(&e, 4, 4, 4096, 0);
    OLT_CHECK_EQ(sh_bucket_create(&e, "s"), 0);
    uint8_t *data = sh_pattern(400000, 4);
    unsigned w = sh_drive_of(&e, "s", "k", 0), r = sh_drive_of(&e, "s", "k", 1);
    faults("store:drive=%u,op=write,err=short,persist", w);
    OLT_CHECK_EQ(put(&e, "s", "k", data, 400000), 0);
    OLT_CHECK_EQ(put(&e, "s", "small", data, 3000), 0);   /* inline: its metadata */
    faults("store:drive=%u,op=read,err=short,persist", r);
    sh_check_get(&e, "s", "k", data, 400000);
    sh_check_get(&e, "s", "small", data, 3000);
    struct ol_store_stats st = sh_stats(&e);
    OLT_CHECK(st.write_drive_failures >= 1);
    faults("%s", "");
    sh_settle(&e);
    sh_check_tmp_empty(&e);
    free(data);
    sh_env_stop(&e, false);
}

/* fsync (or the group commit's barrier) fails on one drive during the
 * commit: the PUT succeeds on the others, and that drive counts as failed
 * and holds no metadata of the new object (except under the ordered
 * commit, XFS with syncfs: there the rename comes before the drive's one
 * barrier, so the failed drive may keep a name whose durability is unknown,
 * as after a crash; it counted as failed, and heal rewrites it). */
static void fsync_fails_on_one_drive(int sync)
{
    struct sh_env e;
    sh_env_open(&e, 4, 4, 4096, 0);
    sh_env_stop(&e, false);
    e.p.sync = sync;
    sh_env_start(&e);
    OLT_CHECK_EQ(sh_bucket_create(&e, "y"), 0);
    uint8_t *data = sh_pattern(200000, 5);
    unsigned bad = sh_drive_of(&e, "y", "k", 2);
    int fds = sh_count_fds();
    faults("store:drive=%u,op=fsync,err=EIO,persist", bad);
    struct ol_store_stats st0 = sh_stats(&e);
    OLT_CHECK_EQ(put(&e, "y", "k", data, 200000), 0);
    struct ol_store_stats st = sh_stats(&e);
    OLT_CHECK_EQ(st.write_drive_failures - st0.write_drive_failures, 1);
    if (!ol_store_drive_ordered(e.s, bad))
        OLT_CHECK(!has_meta(&e, bad, "y", "k"));
    for (unsigned i = 0; i < 4; i++)
        if (i != bad)
            OLT_CHECK(has_meta(&e, i, "y", "k"));
    sh_check_get(&e, "y", "k", data, 200000);
    /* fsync failing everywhere: nothing becomes visible, nothing stays open */
    faults("store:op=fsync,err=EIO,persist");
    OLT_CHECK_EQ(put(&e, "y", "k2", data, 100000), -EIO);
    OLT_CHECK_EQ(sh_head(&e, "y", "k2", NULL), -ENOENT);
    OLT_CHECK_EQ(put(&e, "y", "k", data + 1, 100000), -EIO);  /* an overwrite is undone */
    faults("%s", "");
    sh_check_get(&e, "y", "k", data, 200000);
    sh_settle(&e);
    sh_check_tmp_empty(&e);
    OLT_CHECK_EQ(sh_count_fds(), fds);
    free(data);
    sh_env_stop(&e, false);
}

OLT_TEST_T(store_fault_fsync_fails_on_one_drive_group_commit, 120) { fsync_fails_on_one_drive(0); }
OLT_TEST_T(store_fault_fsync_fails_on_one_drive_fsync_per_file, 120) { fsync_fails_on_one_drive(1); }

/* No room anywhere, as the reservation or as a write finds it: the PUT is
 * OL_STORE_EFULL (S3's 507) and leaves nothing. */
OLT_TEST_T(store_fault_enospc_everywhere_is_efull, 60)
{
    struct sh_env e;
    sh_env_open(&e, 4, 4, 4096, 0);
    OLT_CHECK_EQ(sh_bucket_create(&e, "n"), 0);
    uint8_t *data = sh_pattern(300000, 6);
    static const char *const op[] = {"fallocate", "write"};
    for (unsigned i = 0; i < 2; i++) {
        faults("store:op=%s,err=ENOSPC,persist", op[i]);
        OLT_CHECK_EQ(put(&e, "n", "k", data, 300000), OL_STORE_EFULL);
        faults("%s", "");
        OLT_CHECK_EQ(sh_head(&e, "n", "k", NULL), -ENOENT);
        sh_settle(&e);
        sh_check_tmp_empty(&e);
    }
    faults("store:op=write,err=EDQUOT,persist");
    OLT_CHECK_EQ(put(&e, "n", "q", data, 3000), OL_STORE_EFULL);  /* inline: its metadata */
    faults("%s", "");
    OLT_CHECK_EQ(put(&e, "n", "k", data, 300000), 0);
    sh_check_get(&e, "n", "k", data, 300000);
    free(data);
    sh_env_stop(&e, false);
}

/* ---- random faults ----------------------------------------------------------------- */

#define RKEYS 3
#define RSTATES 8
static const uint64_t rsizes[] = {0, 100, 4000, 70000, 300000};

/* What a key may read as: a set of (size, seed) states; size UINT64_MAX: absent. */
struct rkey {
    unsigned n;
    uint64_t size[RSTATES];
    unsigned seed[RSTATES];
};

static void allow_only(struct rkey *k, uint64_t size, unsigned seed)
{
    k->n = 1;
    k->size[0] = size;
    k->seed[0] = seed;
}

static void allow_also(struct rkey *k, uint64_t size, unsigned seed)
{
    for (unsigned i = 0; i < k->n; i++)
        if (k->size[i] == size && k->seed[i] == seed)
            return;
    OLT_CHECK(k->n < RSTATES);
    k->size[k->n] = size;
    k->seed[k->n] = seed;
    k->n++;
}

static uint64_t rnd(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/*
 * Rounds of a random fault rule (drive, kind, class, chance, once or
 * persistent) during a PUT or DELETE of one of three keys; then, with no
 * faults, a GET of the key must be one of the states the operations allow
 * (a failed PUT or DELETE may or may not have taken effect) and exactly
 * that state's bytes, and the state found is the one the next round starts
 * from. OLT_FAULT_SEED repeats a run; the seed is printed.
 */
OLT_TEST_T(store_fault_random_faults_never_serve_wrong_bytes, 240)
{
    uint64_t seed = getenv("OLT_FAULT_SEED") ? strtoull(getenv("OLT_FAULT_SEED"), NULL, 0)
                                             : (uint64_t)time(NULL);
    printf("store_fault_random_faults: OLT_FAULT_SEED=%llu\n", (unsigned long long)seed);
    fflush(stdout);
    uint64_t s = seed * 2654435761u + 1;
    struct sh_env e;
    sh_env_open(&e, 4, 4, 4096, 0);
    OLT_CHECK_EQ(sh_bucket_create(&e, "r"), 0);
    uint8_t *pat[16];
    for (unsigned i = 0; i < 16; i++)
        pat[i] = sh_pattern(300000, 100 + i);
    uint8_t *out = malloc(300000);
    OLT_CHECK(out);
    struct rkey keys[RKEYS];
    for (unsigned i = 0; i < RKEYS; i++)
        allow_only(&keys[i], UINT64_MAX, 0);
    static const char *const ops[] = {"read", "write", "fsync", "open", "close", "rename",
                                      "unlink", "mkdir", "statx", "fallocate", "any"};
    static const char *const errs[] = {"EIO", "ENOSPC", "short", "EIO"};
    static const char *const ps[] = {"0.05", "0.2", "0.5", "1"};
    unsigned failed = 0, rounds = 120;
    bool verbose = getenv("OLT_FAULT_VERBOSE") != NULL;
    for (unsigned round = 0; round < rounds; round++) {
        unsigned ki = (unsigned)(rnd(&s) % RKEYS);
        char key[8];
        snprintf(key, sizeof key, "k%u", ki);
        char spec[512] = "";
        for (unsigned nr = 1 + (unsigned)(rnd(&s) % 3), i = 0; i < nr; i++) {
            char drive[8] = "any";
            if (rnd(&s) % 3)
                snprintf(drive, sizeof drive, "%u", (unsigned)(rnd(&s) % 4));
            size_t at = strlen(spec);
            snprintf(spec + at, sizeof spec - at, "store:drive=%s,op=%s,err=%s,p=%s,seed=%llu,%s;",
                     drive, ops[rnd(&s) % (sizeof ops / sizeof ops[0])],
                     errs[rnd(&s) % (sizeof errs / sizeof errs[0])],
                     ps[rnd(&s) % (sizeof ps / sizeof ps[0])],
                     (unsigned long long)rnd(&s) % 1000, rnd(&s) % 2 ? "persist" : "once");
        }
        faults("%s", spec);
        struct rkey *k = &keys[ki];
        int rc;
        if (rnd(&s) % 4) {
            uint64_t size = rsizes[rnd(&s) % (sizeof rsizes / sizeof rsizes[0])];
            unsigned ps_ = (unsigned)(rnd(&s) % 16);
            if (verbose)
                printf("round %u: PUT %s %llu bytes\n", round, key, (unsigned long long)size);
            rc = put(&e, "r", key, pat[ps_], size);
            if (rc == 0)
                allow_only(k, size, ps_);
            else
                allow_also(k, size, ps_);
        } else {
            if (verbose)
                printf("round %u: DELETE %s\n", round, key);
            rc = sh_del(&e, "r", key);
            if (rc == 0 || rc == -ENOENT)
                allow_only(k, UINT64_MAX, 0);
            else
                allow_also(k, UINT64_MAX, 0);
        }
        failed += rc != 0;
        if (verbose)
            printf("round %u key %s: %s: %d\n", round, key, spec, rc);
        /* under the faults a GET may fail, but what it answers is a state */
        uint64_t got = 0;
        rc = sh_get_range(&e, "r", key, 0, -1, out, 300000, &got);
        unsigned match = k->n;
        for (unsigned i = 0; i < k->n && match == k->n && rc == 0; i++)
            if (k->size[i] == got && memcmp(out, pat[k->seed[i]], got) == 0)
                match = i;
        if (rc == 0 && match == k->n)
            olt_fail(__FILE__, __LINE__, "seed %llu round %u key %s: a GET under faults "
                     "answered %llu bytes of no state", (unsigned long long)seed, round, key,
                     (unsigned long long)got);
        faults("%s", "");
        got = 0;
        rc = sh_get_range(&e, "r", key, 0, -1, out, 300000, &got);
        match = k->n;
        for (unsigned i = 0; i < k->n && match == k->n; i++) {
            if (k->size[i] == UINT64_MAX ? rc == -ENOENT
                                         : rc == 0 && got == k->size[i] &&
                                               memcmp(out, pat[k->seed[i]], got) == 0)
                match = i;
        }
        if (match == k->n)
            olt_fail(__FILE__, __LINE__, "seed %llu round %u key %s: GET %d (%llu bytes) is no "
                     "state the operations allow (%u of them)", (unsigned long long)seed, round,
                     key, rc, (unsigned long long)got, k->n);
        allow_only(k, k->size[match], k->seed[match]);
    }
    printf("store_fault_random_faults: %u rounds, %u operations failed, %llu faults\n", rounds,
           failed, (unsigned long long)ol_fault_injected(OL_FAULT_STORE));
    sh_settle(&e);
    sh_check_tmp_empty(&e);
    for (unsigned i = 0; i < 16; i++)
        free(pat[i]);
    free(out);
    sh_env_stop(&e, false);
}

/* An overwrite that fails (every rename EIO) after short reads of the old
 * metadata (each with probability p): its undo writes back the old
 * metadata whole, so the old value is still there; the same for a DELETE.
 * With p = 1 an inline GET is also read while every read is short: GET
 * reads the metadata on (an inline value is all metadata; a shard read
 * that comes short marks its drive bad instead: parity rebuilds it, or the
 * GET fails). */
static void overwrite_after_short_meta_reads(const char *p)
{
    struct sh_env e;
    sh_env_open(&e, 4, 4, 4096, 0);
    OLT_CHECK_EQ(sh_bucket_create(&e, "o"), 0);
    uint8_t *old = sh_pattern(300000, 5), *neu = sh_pattern(4000, 6);
    OLT_CHECK_EQ(put(&e, "o", "k", old, 300000), 0);
    OLT_CHECK_EQ(put(&e, "o", "s", old, 3000), 0);   /* inline: the value in its metadata */
    faults("store:drive=any,op=read,err=short,p=%s,seed=9,persist;"
           "store:drive=any,op=rename,err=EIO,persist", p);
    OLT_CHECK(put(&e, "o", "k", neu, 4000) != 0);
    OLT_CHECK(put(&e, "o", "s", neu, 4000) != 0);
    faults("%s", "");
    sh_check_get(&e, "o", "k", old, 300000);
    sh_check_get(&e, "o", "s", old, 3000);
    if (strcmp(p, "1") == 0) {
        faults("%s", "store:drive=any,op=read,err=short,p=1,seed=9,persist");
        sh_check_get(&e, "o", "s", old, 3000);
    }
    faults("store:drive=any,op=read,err=short,p=%s,seed=9,persist;"
           "store:drive=any,op=rename,err=EIO,persist;"
           "store:drive=any,op=unlink,err=EIO,persist", p);
    (void)sh_del(&e, "o", "k");
    faults("%s", "");
    uint64_t got = 0;
    uint8_t *out = malloc(300000);
    OLT_CHECK(out);
    int rc = sh_get_range(&e, "o", "k", 0, -1, out, 300000, &got);
    OLT_CHECK(rc == -ENOENT || (rc == 0 && got == 300000 && memcmp(out, old, got) == 0));
    sh_settle(&e);
    free(out);
    free(old);
    free(neu);
    sh_env_stop(&e, false);
}

/* Half the reads short: seed 1796625978 of the test above found the undo
 * writing back only the bytes one short read gave. */
OLT_TEST_T(store_fault_failed_overwrite_after_short_meta_reads_keeps_the_old, 60)
{
    overwrite_after_short_meta_reads("0.5");
}

/* Every read short: each read of the rest gives half of it, down to 1
 * byte, which a short read leaves whole (the fault layer once made it 0,
 * an end of file one byte early: the undo wrote back all but the trailer's
 * last byte, on every drive). */
OLT_TEST_T(store_fault_failed_overwrite_after_short_meta_reads_keeps_the_old_p1, 60)
{
    overwrite_after_short_meta_reads("1");
}

#endif
