/*
 * test_store_listing.c - the listing catalog (store/catalog.h): a page is
 * copied out under the bucket's lock and formatted after it (the callback
 * may call back into the catalog; max-keys is clamped to the page), a
 * failed update makes the catalog dirty (counted, no clean marker at
 * close: the next open rebuilds), a clean close is loaded again.
 */
#include "olt.h"

#include "store/catalog.h"
#include "store/index.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* One drive with buckets bk1 and bk2 (empty): its path into out. */
static void one_drive(char *out, size_t cap)
{
    snprintf(out, cap, "%s/d0", olt_tmpdir());
    const char *sub[] = {"", "/.openlake", "/.openlake/buckets", "/.openlake/buckets/bk1",
                         "/.openlake/buckets/bk2"};
    for (unsigned i = 0; i < sizeof sub / sizeof *sub; i++) {
        char p[600];
        snprintf(p, sizeof p, "%s%s", out, sub[i]);
        OLT_CHECK(mkdir(p, 0700) == 0);
    }
}

static struct ol_catalog *cat_open(const char *drive, struct ol_catalog_info *info)
{
    const char *dp[1] = {drive};
    struct ol_catalog *c = NULL;
    char err[256] = "";
    int rc = ol_catalog_open(dp, 1, 1, &c, info, err, sizeof err);
    if (rc < 0)
        olt_fail(__FILE__, __LINE__, "ol_catalog_open: %d %s", rc, err);
    return c;
}

static struct ol_index_rec rec_of(unsigned i)
{
    struct ol_index_rec r;
    memset(&r, 0, sizeof r);
    r.size = i;
    r.mtime_ns = 1700000000000000000ull + i;
    memset(r.etag, (int)(i & 0xff), sizeof r.etag);
    return r;
}

/* Field by field (the struct has padding). */
static bool rec_eq(const struct ol_index_rec *a, const struct ol_index_rec *b)
{
    return a->size == b->size && a->mtime_ns == b->mtime_ns &&
           !memcmp(a->etag, b->etag, sizeof a->etag) && a->etag_parts == b->etag_parts &&
           a->storage_class == b->storage_class && a->flags == b->flags &&
           !memcmp(a->version_id, b->version_id, sizeof a->version_id);
}

static bool clean_marker(const char *drive)
{
    char p[600];
    snprintf(p, sizeof p, "%s/.openlake/index/clean", drive);
    return access(p, F_OK) == 0;
}

/* The callback: checks order and records, and writes into the catalog
 * while the listing runs (which would deadlock under the bucket's lock). */
struct seen {
    struct ol_catalog *c;
    unsigned n, prefixes;
    char last[64];
};

static int seen_entry(void *arg, const uint8_t *name, size_t len, const struct ol_index_rec *rec)
{
    struct seen *s = arg;
    char k[64];
    OLT_CHECK(len < sizeof k);
    memcpy(k, name, len);
    k[len] = 0;
    OLT_CHECK(strcmp(k, s->last) > 0);
    snprintf(s->last, sizeof s->last, "%s", k);
    if (!rec) {
        s->prefixes++;
        return 0;
    }
    unsigned i = 9999;   /* z-late */
    OLT_CHECK(k[0] == 'z' || sscanf(k, "k%u", &i) == 1);
    struct ol_index_rec want = rec_of(i);
    OLT_CHECK(rec_eq(rec, &want));
    s->n++;
    /* into the same bucket, during the listing: a key after every listed one */
    struct ol_index_rec r = rec_of(9999);
    OLT_CHECK_EQ(ol_catalog_put(s->c, "bk1", "z-late", 6, &r), 0);
    return 0;
}

static int stop_at_3(void *arg, const uint8_t *name, size_t len, const struct ol_index_rec *rec)
{
    unsigned *n = arg;
    return ++*n == 3 ? -ECANCELED : 0;
}

OLT_TEST_T(store_listing_page_is_copied_out_and_formatted_after_the_lock, 60)
{
    char drive[512];
    one_drive(drive, sizeof drive);
    struct ol_catalog_info info;
    struct ol_catalog *c = cat_open(drive, &info);
    OLT_CHECK_EQ(info.buckets, 2);
    struct ol_catalog_page *page;
    OLT_CHECK_EQ(ol_catalog_page_create(&page), 0);
    for (unsigned i = 0; i < 1500; i++) {
        char k[32];
        int n = snprintf(k, sizeof k, "k%05u", i);
        struct ol_index_rec r = rec_of(i);
        OLT_CHECK_EQ(ol_catalog_put(c, "bk1", k, (size_t)n, &r), 0);
    }
    OLT_CHECK_EQ(ol_catalog_put(c, "bk1", "dir/a", 5, &(struct ol_index_rec){0}), 0);
    /* more than a page asked for: a page of OL_CATALOG_PAGE_MAX, truncated */
    struct seen s = {.c = c};
    struct ol_index_list_req req = {.max_keys = 5000, .delim = "/", .delim_len = 1};
    struct ol_index_list_out out;
    OLT_CHECK_EQ(ol_catalog_list(c, "bk1", &req, page, seen_entry, &s, &out), 0);
    OLT_CHECK_EQ(s.prefixes, 1);              /* "dir/" sorts first */
    OLT_CHECK_EQ(s.n, OL_CATALOG_PAGE_MAX - 1);
    OLT_CHECK_EQ(out.nkeys + out.nprefixes, OL_CATALOG_PAGE_MAX);
    OLT_CHECK(out.truncated);
    OLT_CHECK_EQ(out.next_len, 6);
    OLT_CHECK_MEM(out.next, "k00998", 6);
    struct ol_index_rec got;
    OLT_CHECK_EQ(ol_catalog_get(c, "bk1", "z-late", 6, &got), 0); /* the callback's write */
    /* the rest, from the next marker */
    memset(&s, 0, sizeof s);
    s.c = c;
    snprintf(s.last, sizeof s.last, "k00998");
    req.start = out.next;
    req.start_len = out.next_len;
    req.delim_len = 0;
    struct ol_index_list_out out2;
    OLT_CHECK_EQ(ol_catalog_list(c, "bk1", &req, page, seen_entry, &s, &out2), 0);
    OLT_CHECK_EQ(out2.nkeys, 1500 - 999 + 1);   /* k00999..k01499 and z-late */
    OLT_CHECK(!out2.truncated);
    /* a callback that stops: its value, and *out still has the whole page */
    unsigned calls = 0;
    req.start_len = 0;
    req.max_keys = 10;
    OLT_CHECK_EQ(ol_catalog_list(c, "bk1", &req, page, stop_at_3, &calls, &out), -ECANCELED);
    OLT_CHECK_EQ(calls, 3);
    OLT_CHECK_EQ(out.nkeys, 10);
    OLT_CHECK_EQ(ol_catalog_list(c, "nob", &req, page, stop_at_3, &calls, &out), -ENOENT);
    OLT_CHECK(!ol_catalog_dirty(c));
    ol_catalog_page_destroy(page);
    OLT_CHECK_EQ(ol_catalog_close(c), 0);
    OLT_CHECK(clean_marker(drive));
    /* a clean close is loaded, not rebuilt */
    c = cat_open(drive, &info);
    OLT_CHECK_EQ(info.rebuilt, 0);
    OLT_CHECK_EQ(info.keys, 1502);
    OLT_CHECK(!clean_marker(drive));          /* stale from now on */
    OLT_CHECK_EQ(ol_catalog_get(c, "bk1", "k01234", 6, &got), 0);
    struct ol_index_rec want = rec_of(1234);
    OLT_CHECK(rec_eq(&got, &want));
    OLT_CHECK_EQ(ol_catalog_close(c), 0);
}

OLT_TEST_T(store_listing_failed_update_makes_the_catalog_dirty, 60)
{
    char drive[512];
    one_drive(drive, sizeof drive);
    struct ol_catalog_info info;
    struct ol_catalog *c = cat_open(drive, &info);
    struct ol_index_rec r = rec_of(1);
    OLT_CHECK_EQ(ol_catalog_put(c, "bk1", "kept", 4, &r), 0);
    OLT_CHECK_EQ(ol_catalog_remove(c, "bk1", "never", 5), 0);   /* nothing to remove */
    OLT_CHECK_EQ(ol_catalog_remove(c, "nob", "k", 1), 0);
    OLT_CHECK(!ol_catalog_dirty(c));
    OLT_CHECK_EQ(ol_catalog_errors(c), 0);
    /* a commit into a bucket the table lacks, a key too long: both wrong */
    OLT_CHECK_EQ(ol_catalog_put(c, "nob", "k", 1, &r), -ENOENT);
    OLT_CHECK(ol_catalog_dirty(c));
    static char longkey[OL_INDEX_KEY_MAX + 1];
    memset(longkey, 'x', sizeof longkey);
    OLT_CHECK_EQ(ol_catalog_put(c, "bk1", longkey, sizeof longkey, &r), -EINVAL);
    OLT_CHECK_EQ(ol_catalog_errors(c), 2);
    /* it keeps serving */
    struct ol_index_rec got;
    OLT_CHECK_EQ(ol_catalog_get(c, "bk1", "kept", 4, &got), 0);
    /* its close saves nothing and writes no marker */
    OLT_CHECK_EQ(ol_catalog_close(c), -ESTALE);
    OLT_CHECK(!clean_marker(drive));
    c = cat_open(drive, &info);
    OLT_CHECK_EQ(info.rebuilt, 2);            /* from the (empty) object metadata */
    OLT_CHECK_EQ(info.keys, 0);
    OLT_CHECK(!ol_catalog_dirty(c));
    ol_catalog_set_dirty(c, "a test", 0);
    OLT_CHECK_EQ(ol_catalog_errors(c), 1);
    OLT_CHECK_EQ(ol_catalog_close(c), -ESTALE);
    OLT_CHECK(!clean_marker(drive));
}
