/*
 * test_store_format.c - the drive format file (round trip, every damaged
 * byte, truncation, later versions) and start-up resolution on real
 * directories: a new deployment, a wiped drive adopted, swapped, duplicate,
 * foreign, corrupt, offline and mismatched drives, a blank majority, and
 * leftover temp files.
 */
#include "olt.h"

#include "store/format.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <xxhash.h>

#define MAXD 16

struct drives {
    char path[MAXD][512];
    const char *p[MAXD];
    unsigned n;
};

/* n empty drive directories <tmp>/<prefix><i>. */
static void mk_drives(struct drives *d, const char *prefix, unsigned n)
{
    d->n = n;
    for (unsigned i = 0; i < n; i++) {
        snprintf(d->path[i], sizeof d->path[i], "%s/%s%u", olt_tmpdir(), prefix, i);
        OLT_CHECK(mkdir(d->path[i], 0700) == 0);
        d->p[i] = d->path[i];
    }
}

static void path_of(char *out, size_t len, const char *drive, const char *rel)
{
    snprintf(out, len, "%s/%s", drive, rel);
}

/* Removes the drive's format (and .openlake/): a blank drive again. */
static void wipe(const char *drive)
{
    char p[600];
    path_of(p, sizeof p, drive, OL_FORMAT_FILE);
    OLT_CHECK(unlink(p) == 0);
    path_of(p, sizeof p, drive, OL_FORMAT_TMP);
    unlink(p);
    path_of(p, sizeof p, drive, OL_FORMAT_DIR);
    OLT_CHECK(rmdir(p) == 0);
}

static size_t get_raw(const char *drive, uint8_t *buf, size_t cap)
{
    char p[600];
    path_of(p, sizeof p, drive, OL_FORMAT_FILE);
    int fd = open(p, O_RDONLY);
    OLT_CHECK(fd >= 0);
    ssize_t n = read(fd, buf, cap);
    close(fd);
    OLT_CHECK(n > 0 && (size_t)n < cap);
    return (size_t)n;
}

static void put_raw(const char *drive, const char *rel, const uint8_t *buf, size_t len)
{
    char p[600];
    path_of(p, sizeof p, drive, rel);
    int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    OLT_CHECK(fd >= 0);
    OLT_CHECK_EQ(write(fd, buf, len), (ssize_t)len);
    close(fd);
}

/* Recomputes the trailing XXH3-64 of an image. */
static void reseal(uint8_t *b, size_t len)
{
    uint64_t s = XXH3_64bits(b, len - 8);
    for (unsigned i = 0; i < 8; i++)
        b[len - 8 + i] = (uint8_t)(s >> (8 * i));
}

/* A valid format for a sets x dps deployment, this drive at (set, drive). */
static void make_format(struct ol_format *f, unsigned sets, unsigned dps, unsigned set,
                        unsigned drive)
{
    memset(f, 0, sizeof *f);
    for (unsigned i = 0; i < 16; i++)
        f->deployment[i] = (uint8_t)(0xd0 + i);
    f->sets = sets;
    f->drives_per_set = dps;
    f->set = set;
    f->drive = drive;
    f->layout = calloc((size_t)sets * dps, 16);
    OLT_CHECK(f->layout);
    for (unsigned i = 0; i < sets * dps; i++) {
        f->layout[i][0] = (uint8_t)(i + 1);
        f->layout[i][1] = (uint8_t)((i + 1) >> 8);
        f->layout[i][15] = 0x77;
    }
    memcpy(f->uuid, f->layout[set * dps + drive], 16);
}

static void resolve_ok(const struct drives *d, unsigned dps, unsigned flags,
                       struct ol_format_plan *plan)
{
    char err[1024];
    int rc = ol_format_resolve(d->p, d->n, dps, flags, plan, err, sizeof err);
    if (rc != 0)
        olt_fail(__FILE__, __LINE__, "resolve: %d: %s", rc, err);
}

/* A formatted deployment of d->n drives in sets of dps; returns its plan. */
static void deploy(const struct drives *d, unsigned dps, struct ol_format_plan *plan)
{
    char err[1024];
    resolve_ok(d, dps, 0, plan);
    OLT_CHECK(plan->fresh);
    int rc = ol_format_apply(plan, err, sizeof err);
    if (rc != 0)
        olt_fail(__FILE__, __LINE__, "apply: %d: %s", rc, err);
}

static void swap_dirs(const char *a, const char *b)
{
    char t[600];
    snprintf(t, sizeof t, "%s.swap", a);
    OLT_CHECK(rename(a, t) == 0);
    OLT_CHECK(rename(b, a) == 0);
    OLT_CHECK(rename(t, b) == 0);
}

/* ---- the file ------------------------------------------------------------------------ */

OLT_TEST(store_format_round_trip)
{
    struct drives d;
    mk_drives(&d, "d", 1);
    struct ol_format f, g;
    make_format(&f, 3, 5, 2, 4);
    OLT_CHECK_EQ(ol_format_read(d.p[0], &g), -ENOENT);
    OLT_CHECK_EQ(ol_format_write(d.p[0], &f), 0);
    OLT_CHECK_EQ(ol_format_read(d.p[0], &g), 0);
    OLT_CHECK_MEM(g.deployment, f.deployment, 16);
    OLT_CHECK_MEM(g.uuid, f.uuid, 16);
    OLT_CHECK_EQ(g.sets, 3);
    OLT_CHECK_EQ(g.drives_per_set, 5);
    OLT_CHECK_EQ(g.set, 2);
    OLT_CHECK_EQ(g.drive, 4);
    OLT_CHECK_MEM(g.layout, f.layout, 15 * 16);
    ol_format_free(&g);

    /* Size and mode as documented; overwriting works. */
    uint8_t buf[4096];
    OLT_CHECK_EQ(get_raw(d.p[0], buf, sizeof buf), OL_FORMAT_HDR_LEN + 15 * 16 + 8);
    OLT_CHECK_MEM(buf, "OLFM\x01\x00\x30\x00", 8);
    char p[600];
    struct stat st;
    path_of(p, sizeof p, d.p[0], OL_FORMAT_FILE);
    OLT_CHECK(stat(p, &st) == 0 && (st.st_mode & 0777) == 0600);
    f.drive = 3;
    memcpy(f.uuid, f.layout[2 * 5 + 3], 16);
    OLT_CHECK_EQ(ol_format_write(d.p[0], &f), 0);
    OLT_CHECK_EQ(ol_format_read(d.p[0], &g), 0);
    OLT_CHECK_EQ(g.drive, 3);
    ol_format_free(&g);
    ol_format_free(&g); /* harmless twice */

    /* Invalid formats are not written. */
    f.drive = 5;
    OLT_CHECK_EQ(ol_format_write(d.p[0], &f), -EINVAL);
    f.drive = 3;
    f.uuid[0] ^= 1; /* not the table's entry */
    OLT_CHECK_EQ(ol_format_write(d.p[0], &f), -EINVAL);
    f.uuid[0] ^= 1;
    memcpy(f.layout[0], f.layout[1], 16); /* duplicate uuid */
    OLT_CHECK_EQ(ol_format_write(d.p[0], &f), -EINVAL);

    /* A missing drive directory is never created. */
    char gone[600];
    snprintf(gone, sizeof gone, "%s/not-mounted", olt_tmpdir());
    OLT_CHECK_EQ(ol_format_read(gone, &g), -ENODEV);
    f.layout[0][0] = 0x55;
    OLT_CHECK_EQ(ol_format_write(gone, &f), -ENODEV);
    OLT_CHECK(stat(gone, &st) < 0 && errno == ENOENT);
    ol_format_free(&f);
}

OLT_TEST(store_format_damaged_byte)
{
    struct drives d;
    mk_drives(&d, "d", 1);
    struct ol_format f, g;
    make_format(&f, 2, 4, 1, 2);
    OLT_CHECK_EQ(ol_format_write(d.p[0], &f), 0);
    uint8_t good[1024], bad[1024];
    size_t n = get_raw(d.p[0], good, sizeof good);
    for (size_t i = 0; i < n; i++) {
        for (unsigned bit = 0; bit < 8; bit += 7) {
            memcpy(bad, good, n);
            bad[i] ^= (uint8_t)(1u << bit);
            put_raw(d.p[0], OL_FORMAT_FILE, bad, n);
            int rc = ol_format_read(d.p[0], &g);
            if (rc != -EBADMSG)
                olt_fail(__FILE__, __LINE__, "byte %zu bit %u: %d", i, bit, rc);
        }
    }
    put_raw(d.p[0], OL_FORMAT_FILE, good, n);
    OLT_CHECK_EQ(ol_format_read(d.p[0], &g), 0);
    ol_format_free(&g);
    ol_format_free(&f);
}

OLT_TEST(store_format_truncated)
{
    struct drives d;
    mk_drives(&d, "d", 1);
    struct ol_format f, g;
    make_format(&f, 1, 4, 0, 3);
    OLT_CHECK_EQ(ol_format_write(d.p[0], &f), 0);
    uint8_t good[1024];
    size_t n = get_raw(d.p[0], good, sizeof good);
    for (size_t len = 0; len < n; len++) {
        put_raw(d.p[0], OL_FORMAT_FILE, good, len);
        int rc = ol_format_read(d.p[0], &g);
        if (rc != -EBADMSG)
            olt_fail(__FILE__, __LINE__, "length %zu: %d", len, rc);
    }
    good[n] = 0;
    put_raw(d.p[0], OL_FORMAT_FILE, good, n + 1); /* one byte too many */
    OLT_CHECK_EQ(ol_format_read(d.p[0], &g), -EBADMSG);
    ol_format_free(&f);
}

OLT_TEST(store_format_versions_and_fields)
{
    struct drives d;
    mk_drives(&d, "d", 1);
    struct ol_format f, g;
    make_format(&f, 2, 2, 0, 1);
    OLT_CHECK_EQ(ol_format_write(d.p[0], &f), 0);
    uint8_t good[1024], b[1024];
    size_t n = get_raw(d.p[0], good, sizeof good);

    /* A sound file of a later version: not ours to read. */
    memcpy(b, good, n);
    b[4] = 2;
    reseal(b, n);
    put_raw(d.p[0], OL_FORMAT_FILE, b, n);
    OLT_CHECK_EQ(ol_format_read(d.p[0], &g), -ENOTSUP);
    /* Version 0 does not exist. */
    b[4] = 0;
    reseal(b, n);
    put_raw(d.p[0], OL_FORMAT_FILE, b, n);
    OLT_CHECK_EQ(ol_format_read(d.p[0], &g), -EBADMSG);

    /* A longer header (compatible additions) is skipped. */
    size_t m = n + 8;
    memcpy(b, good, OL_FORMAT_HDR_LEN);
    memset(b + OL_FORMAT_HDR_LEN, 0xee, 8);
    memcpy(b + OL_FORMAT_HDR_LEN + 8, good + OL_FORMAT_HDR_LEN, n - OL_FORMAT_HDR_LEN);
    b[6] = OL_FORMAT_HDR_LEN + 8;
    reseal(b, m);
    put_raw(d.p[0], OL_FORMAT_FILE, b, m);
    OLT_CHECK_EQ(ol_format_read(d.p[0], &g), 0);
    OLT_CHECK_MEM(g.layout, f.layout, 4 * 16);
    ol_format_free(&g);

    /* Sealed but wrong: each field out of range reads as corrupt. */
    struct { unsigned off; uint8_t val; } cases[] = {
        {6, 40},           /* header shorter than 48 */
        {40, 0},           /* no sets */
        {42, 0},           /* no drives per set */
        {42, 33},          /* more than 32 drives per set */
        {44, 2},           /* set index out of range */
        {46, 2},           /* drive index out of range */
        {24, 0x99},        /* uuid not the table's entry at its position */
        {OL_FORMAT_HDR_LEN + 32, 0x01}, /* table entry 2 = entry 0 (duplicate) */
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        memcpy(b, good, n);
        b[cases[i].off] = cases[i].val;
        reseal(b, n);
        put_raw(d.p[0], OL_FORMAT_FILE, b, n);
        int rc = ol_format_read(d.p[0], &g);
        if (rc != -EBADMSG)
            olt_fail(__FILE__, __LINE__, "case %zu: %d", i, rc);
    }
    /* A zero deployment id. */
    memcpy(b, good, n);
    memset(b + 8, 0, 16);
    reseal(b, n);
    put_raw(d.p[0], OL_FORMAT_FILE, b, n);
    OLT_CHECK_EQ(ol_format_read(d.p[0], &g), -EBADMSG);
    /* A directory where the file should be. */
    char p[600];
    path_of(p, sizeof p, d.p[0], OL_FORMAT_FILE);
    OLT_CHECK(unlink(p) == 0 && mkdir(p, 0700) == 0);
    OLT_CHECK_EQ(ol_format_read(d.p[0], &g), -EBADMSG);
    ol_format_free(&f);
}

/* ---- resolution ----------------------------------------------------------------------- */

OLT_TEST(store_format_fresh_deployment)
{
    struct drives d;
    mk_drives(&d, "d", 6);
    struct ol_format_plan a, b;
    deploy(&d, 3, &a);
    OLT_CHECK_EQ(a.nwrite, 6);
    OLT_CHECK_EQ(a.nheal, 0);
    OLT_CHECK_EQ(a.sets, 2);
    for (unsigned i = 0; i < 6; i++) {
        struct ol_format f;
        OLT_CHECK_EQ(ol_format_read(d.p[i], &f), 0);
        OLT_CHECK_MEM(f.deployment, a.deployment, 16);
        OLT_CHECK_MEM(f.uuid, a.layout[i], 16);
        OLT_CHECK_EQ(f.set, i / 3);
        OLT_CHECK_EQ(f.drive, i % 3);
        OLT_CHECK_MEM(f.layout, a.layout, 6 * 16);
        OLT_CHECK_EQ(f.uuid[6] >> 4, 4); /* uuid version 4 */
        ol_format_free(&f);
    }
    /* Start again: every drive in place, nothing to write. */
    resolve_ok(&d, 3, 0, &b);
    OLT_CHECK(!b.fresh);
    OLT_CHECK_MEM(b.deployment, a.deployment, 16);
    OLT_CHECK_MEM(b.layout, a.layout, 6 * 16);
    OLT_CHECK_EQ(b.nok, 6);
    OLT_CHECK_EQ(b.nwrite, 0);
    OLT_CHECK_EQ(b.nrefused, 0);
    for (unsigned i = 0; i < 6; i++)
        OLT_CHECK_EQ(b.drives[i].state, OL_FORMAT_OK);
    char err[256];
    OLT_CHECK_EQ(ol_format_apply(&b, err, sizeof err), 0);
    char line[512];
    ol_format_describe(&b, 4, line, sizeof line);
    OLT_CHECK(strstr(line, "ok, set 1 drive 1"));
    ol_format_plan_free(&a);
    ol_format_plan_free(&b);
    ol_format_plan_free(&b); /* harmless twice */
}

OLT_TEST(store_format_bad_arguments)
{
    struct drives d;
    mk_drives(&d, "d", 6);
    struct ol_format_plan plan;
    char err[256];
    OLT_CHECK_EQ(ol_format_resolve(d.p, 0, 1, 0, &plan, err, sizeof err), -EINVAL);
    OLT_CHECK_EQ(ol_format_resolve(d.p, 6, 4, 0, &plan, err, sizeof err), -EINVAL);
    OLT_CHECK(strstr(err, "6 drives in sets of 4"));
    OLT_CHECK_EQ(ol_format_resolve(d.p, 6, 0, 0, &plan, err, sizeof err), -EINVAL);
    OLT_CHECK_EQ(ol_format_resolve(d.p, 6, 33, 0, &plan, err, sizeof err), -EINVAL);
    ol_format_plan_free(&plan);
    /* Applying an empty plan writes nothing. */
    OLT_CHECK_EQ(ol_format_apply(&plan, err, sizeof err), -EINVAL);
}

OLT_TEST(store_format_wiped_drive_adopted)
{
    struct drives d;
    mk_drives(&d, "d", 4);
    struct ol_format_plan a, b, c;
    char err[512];
    deploy(&d, 4, &a);
    wipe(d.p[2]);
    resolve_ok(&d, 4, 0, &b);
    OLT_CHECK(!b.fresh);
    OLT_CHECK_EQ(b.drives[2].state, OL_FORMAT_BLANK);
    OLT_CHECK(b.drives[2].write && b.drives[2].heal);
    OLT_CHECK_EQ(b.nwrite, 1);
    OLT_CHECK_EQ(b.nheal, 1);
    OLT_CHECK_EQ(b.nok, 3);
    for (unsigned i = 0; i < 4; i++)
        OLT_CHECK(i == 2 || (!b.drives[i].write && !b.drives[i].heal));
    char line[512];
    ol_format_describe(&b, 2, line, sizeof line);
    OLT_CHECK(strstr(line, "adopted as set 0 drive 2 and healed"));
    OLT_CHECK_EQ(ol_format_apply(&b, err, sizeof err), 0);
    struct ol_format f;
    OLT_CHECK_EQ(ol_format_read(d.p[2], &f), 0);
    OLT_CHECK_MEM(f.uuid, a.layout[2], 16); /* the uuid of its position */
    OLT_CHECK_MEM(f.deployment, a.deployment, 16);
    ol_format_free(&f);
    resolve_ok(&d, 4, 0, &c);
    OLT_CHECK_EQ(c.nok, 4);
    OLT_CHECK_EQ(c.nheal, 0);
    ol_format_plan_free(&a);
    ol_format_plan_free(&b);
    ol_format_plan_free(&c);
}

OLT_TEST(store_format_swapped_drives)
{
    struct drives d;
    mk_drives(&d, "d", 4);
    struct ol_format_plan a, b;
    char err[1024];
    deploy(&d, 2, &a);
    swap_dirs(d.path[1], d.path[2]); /* set 0 drive 1 <-> set 1 drive 0 */
    OLT_CHECK_EQ(ol_format_resolve(d.p, 4, 2, 0, &b, err, sizeof err), -EUCLEAN);
    OLT_CHECK_EQ(b.drives[0].state, OL_FORMAT_OK);
    OLT_CHECK_EQ(b.drives[1].state, OL_FORMAT_SWAPPED);
    OLT_CHECK_EQ(b.drives[2].state, OL_FORMAT_SWAPPED);
    OLT_CHECK_EQ(b.drives[3].state, OL_FORMAT_OK);
    OLT_CHECK_EQ(b.drives[1].other, 2);
    OLT_CHECK_EQ(b.drives[2].other, 1);
    OLT_CHECK_EQ(b.drives[1].found_set, 1);
    OLT_CHECK_EQ(b.drives[1].found_drive, 0);
    OLT_CHECK_EQ(b.nrefused, 2);
    /* The message names the drive, its real place, and the other path. */
    char want[1200];
    snprintf(want, sizeof want,
             "%s: is set 1 drive 0 of this deployment, but data_dirs lists it as set 0 drive 1; "
             "it belongs where data_dirs lists %s",
             d.p[1], d.p[2]);
    if (!strstr(err, want))
        olt_fail(__FILE__, __LINE__, "err: %s", err);
    OLT_CHECK(strstr(err, "(and 1 more problem)"));
    OLT_CHECK_EQ(ol_format_apply(&b, err, sizeof err), -EINVAL);
    ol_format_plan_free(&b);

    /* Swapped back: fine again. */
    swap_dirs(d.path[1], d.path[2]);
    resolve_ok(&d, 2, 0, &b);
    OLT_CHECK_EQ(b.nok, 4);
    ol_format_plan_free(&a);
    ol_format_plan_free(&b);
}

OLT_TEST(store_format_duplicate_drive)
{
    struct drives d;
    mk_drives(&d, "d", 4);
    struct ol_format_plan a, b;
    char err[1024];
    deploy(&d, 4, &a);
    /* Position 3 configured as a symlink to the drive at position 0. */
    char link[600];
    snprintf(link, sizeof link, "%s/alias", olt_tmpdir());
    OLT_CHECK(symlink(d.p[0], link) == 0);
    const char *p[4] = {d.p[0], d.p[1], d.p[2], link};
    OLT_CHECK_EQ(ol_format_resolve(p, 4, 4, 0, &b, err, sizeof err), -EUCLEAN);
    OLT_CHECK_EQ(b.drives[0].state, OL_FORMAT_OK);
    OLT_CHECK_EQ(b.drives[3].state, OL_FORMAT_DUPLICATE);
    OLT_CHECK_EQ(b.drives[3].other, 0);
    OLT_CHECK(strstr(err, link) && strstr(err, "listed twice"));
    ol_format_plan_free(&a);
    ol_format_plan_free(&b);
}

OLT_TEST(store_format_foreign_drive)
{
    struct drives x, y;
    mk_drives(&x, "x", 4);
    mk_drives(&y, "y", 4);
    struct ol_format_plan a, b, c;
    char err[1024];
    deploy(&x, 2, &a);
    deploy(&y, 2, &b);
    OLT_CHECK(memcmp(a.deployment, b.deployment, 16) != 0);
    /* x's last drive replaced by y's. */
    const char *p[4] = {x.p[0], x.p[1], x.p[2], y.p[3]};
    OLT_CHECK_EQ(ol_format_resolve(p, 4, 2, 0, &c, err, sizeof err), -EUCLEAN);
    OLT_CHECK_EQ(c.drives[3].state, OL_FORMAT_FOREIGN);
    OLT_CHECK_EQ(c.nok, 3);
    OLT_CHECK_MEM(c.deployment, a.deployment, 16);
    OLT_CHECK(strstr(err, y.p[3]) && strstr(err, "another deployment"));
    ol_format_plan_free(&a);
    ol_format_plan_free(&b);
    ol_format_plan_free(&c);
}

OLT_TEST(store_format_layout_mismatch)
{
    struct drives d;
    mk_drives(&d, "d", 6);
    struct ol_format_plan a, b;
    char err[1024];
    const char *four[4] = {d.p[0], d.p[1], d.p[2], d.p[3]};
    OLT_CHECK_EQ(ol_format_resolve(four, 4, 2, 0, &a, err, sizeof err), 0);
    OLT_CHECK_EQ(ol_format_apply(&a, err, sizeof err), 0);
    /* Same drives, another set size. */
    OLT_CHECK_EQ(ol_format_resolve(four, 4, 4, 0, &b, err, sizeof err), -EUCLEAN);
    for (unsigned i = 0; i < 4; i++)
        OLT_CHECK_EQ(b.drives[i].state, OL_FORMAT_MISMATCH);
    OLT_CHECK(strstr(err, "formatted as 2 sets of 2 drives (4 drives)"));
    OLT_CHECK(strstr(err, "now give 1 set of 4"));
    ol_format_plan_free(&b);
    /* Two drives added as a third set: the stored layout has two. */
    OLT_CHECK_EQ(ol_format_resolve(d.p, 6, 2, 0, &b, err, sizeof err), -EUCLEAN);
    OLT_CHECK_EQ(b.drives[0].state, OL_FORMAT_MISMATCH);
    OLT_CHECK_EQ(b.drives[4].state, OL_FORMAT_BLANK);
    OLT_CHECK(!b.drives[4].write);
    OLT_CHECK(strstr(err, "now give 3 sets of 2"));
    ol_format_plan_free(&a);
    ol_format_plan_free(&b);
}

OLT_TEST(store_format_blank_majority)
{
    struct drives d;
    mk_drives(&d, "d", 4);
    struct ol_format_plan a, b;
    char err[1024];
    deploy(&d, 4, &a);
    /* Half blank: adopted. */
    wipe(d.p[0]);
    wipe(d.p[3]);
    resolve_ok(&d, 4, 0, &b);
    OLT_CHECK_EQ(b.nheal, 2);
    ol_format_plan_free(&b);
    /* More than half: refused, unless allowed. */
    wipe(d.p[1]);
    OLT_CHECK_EQ(ol_format_resolve(d.p, 4, 4, 0, &b, err, sizeof err), -EUCLEAN);
    OLT_CHECK(b.blank_refused);
    OLT_CHECK_EQ(b.nrefused, 0);
    OLT_CHECK(strstr(err, "3 of 4 drives have no usable format"));
    OLT_CHECK(strstr(err, d.p[0]));
    OLT_CHECK_EQ(ol_format_apply(&b, err, sizeof err), -EINVAL);
    ol_format_plan_free(&b);
    resolve_ok(&d, 4, OL_FORMAT_ADOPT_BLANK, &b);
    OLT_CHECK_EQ(b.nheal, 3);
    OLT_CHECK_EQ(ol_format_apply(&b, err, sizeof err), 0);
    ol_format_plan_free(&b);
    resolve_ok(&d, 4, 0, &b);
    OLT_CHECK_EQ(b.nok, 4);
    OLT_CHECK_MEM(b.deployment, a.deployment, 16);
    OLT_CHECK_MEM(b.layout, a.layout, 4 * 16);
    ol_format_plan_free(&a);
    ol_format_plan_free(&b);
}

OLT_TEST(store_format_blank_set)
{
    struct drives d;
    mk_drives(&d, "d", 6);
    struct ol_format_plan a, b;
    char err[1024];
    deploy(&d, 2, &a);
    /* Set 1 wholly blank: only 2 of 6 drives, but nothing to heal it from. */
    wipe(d.p[2]);
    wipe(d.p[3]);
    OLT_CHECK_EQ(ol_format_resolve(d.p, 6, 2, 0, &b, err, sizeof err), -EUCLEAN);
    OLT_CHECK(b.blank_refused);
    OLT_CHECK(strstr(err, "set 1 has no drive formatted") && strstr(err, d.p[2]));
    ol_format_plan_free(&b);
    /* Blank + offline in one set: the same. */
    OLT_CHECK(rmdir(d.p[3]) == 0);
    OLT_CHECK_EQ(ol_format_resolve(d.p, 6, 2, 0, &b, err, sizeof err), -EUCLEAN);
    OLT_CHECK(b.blank_refused);
    ol_format_plan_free(&b);
    /* The operator says the drives really were replaced. */
    OLT_CHECK(mkdir(d.p[3], 0700) == 0);
    resolve_ok(&d, 2, OL_FORMAT_ADOPT_BLANK, &b);
    OLT_CHECK_EQ(b.nheal, 2);
    ol_format_plan_free(&a);
    ol_format_plan_free(&b);
}

OLT_TEST(store_format_corrupt_drive)
{
    struct drives d;
    mk_drives(&d, "d", 4);
    struct ol_format_plan a, b;
    char err[1024];
    deploy(&d, 2, &a);
    uint8_t junk[100];
    memset(junk, 0x5a, sizeof junk);
    put_raw(d.p[1], OL_FORMAT_FILE, junk, sizeof junk);
    OLT_CHECK_EQ(ol_format_resolve(d.p, 4, 2, 0, &b, err, sizeof err), -EUCLEAN);
    OLT_CHECK_EQ(b.drives[1].state, OL_FORMAT_CORRUPT);
    OLT_CHECK(strstr(err, d.p[1]) && strstr(err, "is damaged"));
    ol_format_plan_free(&b);
    resolve_ok(&d, 2, OL_FORMAT_ADOPT_CORRUPT, &b);
    OLT_CHECK(b.drives[1].write && b.drives[1].heal);
    OLT_CHECK_EQ(ol_format_apply(&b, err, sizeof err), 0);
    ol_format_plan_free(&b);
    resolve_ok(&d, 2, 0, &b);
    OLT_CHECK_EQ(b.nok, 4);

    /* A later version on one drive refuses, flag or not. */
    struct ol_format f;
    OLT_CHECK_EQ(ol_format_read(d.p[3], &f), 0);
    uint8_t raw[1024];
    size_t n = get_raw(d.p[3], raw, sizeof raw);
    raw[4] = 9;
    reseal(raw, n);
    put_raw(d.p[3], OL_FORMAT_FILE, raw, n);
    ol_format_plan_free(&b);
    OLT_CHECK_EQ(ol_format_resolve(d.p, 4, 2, OL_FORMAT_ADOPT_CORRUPT, &b, err, sizeof err),
                 -EUCLEAN);
    OLT_CHECK_EQ(b.drives[3].state, OL_FORMAT_NEWER);
    OLT_CHECK(strstr(err, "newer OpenLake"));
    ol_format_free(&f);
    ol_format_plan_free(&a);
    ol_format_plan_free(&b);
}

OLT_TEST(store_format_offline_drive)
{
    struct drives d;
    mk_drives(&d, "d", 4);
    struct ol_format_plan a, b;
    char err[1024];
    /* A new deployment needs every drive. */
    OLT_CHECK(rmdir(d.p[2]) == 0);
    OLT_CHECK_EQ(ol_format_resolve(d.p, 4, 2, 0, &b, err, sizeof err), -EUCLEAN);
    OLT_CHECK_EQ(b.drives[2].state, OL_FORMAT_OFFLINE);
    OLT_CHECK_EQ(b.drives[2].read_rc, -ENODEV);
    OLT_CHECK(strstr(err, "cannot create a new deployment"));
    OLT_CHECK(strstr(err, d.p[2]) && strstr(err, "does not exist"));
    ol_format_plan_free(&b);
    struct stat st;
    OLT_CHECK(stat(d.p[2], &st) < 0); /* not created */

    /* An existing deployment runs without it. */
    OLT_CHECK(mkdir(d.p[2], 0700) == 0);
    deploy(&d, 2, &a);
    wipe(d.p[2]);
    OLT_CHECK(rmdir(d.p[2]) == 0);
    resolve_ok(&d, 2, 0, &b);
    OLT_CHECK_EQ(b.drives[2].state, OL_FORMAT_OFFLINE);
    OLT_CHECK(!b.drives[2].write && !b.drives[2].heal);
    OLT_CHECK_EQ(b.noffline, 1);
    OLT_CHECK_EQ(b.nok, 3);
    OLT_CHECK_EQ(ol_format_apply(&b, err, sizeof err), 0);
    OLT_CHECK(stat(d.p[2], &st) < 0);
    char line[512];
    ol_format_describe(&b, 2, line, sizeof line);
    OLT_CHECK(strstr(line, "running without it"));
    ol_format_plan_free(&a);
    ol_format_plan_free(&b);
}

OLT_TEST(store_format_leftover_temp)
{
    struct drives d;
    mk_drives(&d, "d", 2);
    uint8_t junk[64];
    memset(junk, 0xa5, sizeof junk);
    char p[600];
    struct stat st;

    /* A first start that crashed mid-write: the drive is still blank. */
    path_of(p, sizeof p, d.p[0], OL_FORMAT_DIR);
    OLT_CHECK(mkdir(p, 0700) == 0);
    put_raw(d.p[0], OL_FORMAT_TMP, junk, sizeof junk);
    struct ol_format f;
    OLT_CHECK_EQ(ol_format_read(d.p[0], &f), -ENOENT);
    struct ol_format_plan a, b;
    deploy(&d, 2, &a);
    path_of(p, sizeof p, d.p[0], OL_FORMAT_TMP);
    OLT_CHECK(stat(p, &st) < 0 && errno == ENOENT);

    /* A crash while rewriting: the old format still reads; apply cleans up. */
    put_raw(d.p[1], OL_FORMAT_TMP, junk, sizeof junk);
    OLT_CHECK_EQ(ol_format_read(d.p[1], &f), 0);
    ol_format_free(&f);
    char err[256];
    resolve_ok(&d, 2, 0, &b);
    OLT_CHECK_EQ(b.nok, 2);
    OLT_CHECK_EQ(ol_format_apply(&b, err, sizeof err), 0);
    path_of(p, sizeof p, d.p[1], OL_FORMAT_TMP);
    OLT_CHECK(stat(p, &st) < 0 && errno == ENOENT);
    ol_format_plan_free(&a);
    ol_format_plan_free(&b);
}

OLT_TEST(store_format_state_names)
{
    OLT_CHECK_STR(ol_format_state_name(OL_FORMAT_OK), "ok");
    OLT_CHECK_STR(ol_format_state_name(OL_FORMAT_SWAPPED), "swapped");
    OLT_CHECK_STR(ol_format_state_name(OL_FORMAT_MISMATCH), "mismatch");
    uint8_t u[16];
    for (unsigned i = 0; i < 16; i++)
        u[i] = (uint8_t)(i * 17);
    char s[37];
    ol_format_uuid_str(u, s);
    OLT_CHECK_STR(s, "00112233-4455-6677-8899-aabbccddeeff");
}
