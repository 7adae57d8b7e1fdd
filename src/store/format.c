/*
 * format.c - see format.h.
 *
 * Encoding and decoding go byte by byte (little-endian), never through a
 * packed struct. A read checks, in order: a regular file of plausible
 * size, the magic, the trailing XXH3-64, then the version (so a damaged
 * version byte reads as corrupt, not as "newer"), then every field.
 * Resolution groups the formatted drives by (deployment, layout table);
 * the group holding most drives is the deployment's truth. Tables are
 * kept once per group, not per drive, so memory stays O(n) for n drives
 * that agree.
 */
#include "store/format.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <xxhash.h>

static const uint8_t ol_zero16[16];

/* ---- bytes ------------------------------------------------------------------------ */

static void ol_put16(uint8_t *p, unsigned v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

static unsigned ol_get16(const uint8_t *p) { return (unsigned)p[0] | (unsigned)p[1] << 8; }

static void ol_put64(uint8_t *p, uint64_t v)
{
    for (unsigned i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t ol_get64(const uint8_t *p)
{
    uint64_t v = 0;
    for (unsigned i = 0; i < 8; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

static size_t ol_fmt_size(unsigned hdr, unsigned sets, unsigned dps)
{
    return (size_t)hdr + (size_t)OL_FORMAT_UUID_LEN * sets * dps + OL_FORMAT_SUM_LEN;
}

static int ol_uuid_cmp(const void *a, const void *b) { return memcmp(a, b, 16); }

/* 0 when the n uuids are non-zero and distinct; -EINVAL if not; -ENOMEM. */
static int ol_uuids_check(const uint8_t (*t)[16], size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (memcmp(t[i], ol_zero16, 16) == 0)
            return -EINVAL;
    uint8_t (*s)[16] = malloc(n * 16);
    if (!s)
        return -ENOMEM;
    memcpy(s, t, n * 16);
    qsort(s, n, 16, ol_uuid_cmp);
    int rc = 0;
    for (size_t i = 1; i < n && rc == 0; i++)
        if (memcmp(s[i - 1], s[i], 16) == 0)
            rc = -EINVAL;
    free(s);
    return rc;
}

/* 0 when f can be written; -EINVAL or -ENOMEM. */
static int ol_fmt_check(const struct ol_format *f)
{
    if (f->sets < 1 || f->sets > OL_FORMAT_MAX_SETS || f->drives_per_set < 1 ||
        f->drives_per_set > OL_FORMAT_MAX_SET_DRIVES || f->set >= f->sets ||
        f->drive >= f->drives_per_set || !f->layout ||
        memcmp(f->deployment, ol_zero16, 16) == 0)
        return -EINVAL;
    if (memcmp(f->layout[f->set * f->drives_per_set + f->drive], f->uuid, 16) != 0)
        return -EINVAL;
    return ol_uuids_check((const uint8_t (*)[16])f->layout, (size_t)f->sets * f->drives_per_set);
}

static void ol_fmt_encode(const struct ol_format *f, uint8_t *b, size_t size)
{
    memset(b, 0, size);
    memcpy(b, OL_FORMAT_MAGIC, 4);
    ol_put16(b + 4, OL_FORMAT_VERSION);
    ol_put16(b + 6, OL_FORMAT_HDR_LEN);
    memcpy(b + 8, f->deployment, 16);
    memcpy(b + 24, f->uuid, 16);
    ol_put16(b + 40, f->sets);
    ol_put16(b + 42, f->drives_per_set);
    ol_put16(b + 44, f->set);
    ol_put16(b + 46, f->drive);
    memcpy(b + OL_FORMAT_HDR_LEN, f->layout, (size_t)16 * f->sets * f->drives_per_set);
    ol_put64(b + size - 8, XXH3_64bits(b, size - 8));
}

/* Decodes a whole file image into f (layout newly allocated). */
static int ol_fmt_decode(const uint8_t *b, size_t size, struct ol_format *f)
{
    if (size < 8 + OL_FORMAT_SUM_LEN || memcmp(b, OL_FORMAT_MAGIC, 4) != 0)
        return -EBADMSG;
    if (ol_get64(b + size - 8) != XXH3_64bits(b, size - 8))
        return -EBADMSG;
    unsigned version = ol_get16(b + 4), hdr = ol_get16(b + 6);
    if (version == 0)
        return -EBADMSG;
    if (version > OL_FORMAT_VERSION)
        return -ENOTSUP;
    if (hdr < OL_FORMAT_HDR_LEN || hdr > OL_FORMAT_MAX_HDR_LEN || size < (size_t)hdr + 8)
        return -EBADMSG;
    struct ol_format t = {0};
    memcpy(t.deployment, b + 8, 16);
    memcpy(t.uuid, b + 24, 16);
    t.sets = ol_get16(b + 40);
    t.drives_per_set = ol_get16(b + 42);
    t.set = ol_get16(b + 44);
    t.drive = ol_get16(b + 46);
    if (t.sets < 1 || t.sets > OL_FORMAT_MAX_SETS || t.drives_per_set < 1 ||
        t.drives_per_set > OL_FORMAT_MAX_SET_DRIVES ||
        size != ol_fmt_size(hdr, t.sets, t.drives_per_set))
        return -EBADMSG;
    size_t n = (size_t)t.sets * t.drives_per_set;
    t.layout = malloc(n * 16);
    if (!t.layout)
        return -ENOMEM;
    memcpy(t.layout, b + hdr, n * 16);
    int rc = ol_fmt_check(&t);
    if (rc < 0) {
        free(t.layout);
        return rc == -ENOMEM ? rc : -EBADMSG;
    }
    *f = t;
    return 0;
}

/* ---- files ------------------------------------------------------------------------ */

static int ol_join(char *out, size_t len, const char *drive, const char *rel)
{
    int n = snprintf(out, len, "%s/%s", drive, rel);
    return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

/* The drive directory itself: 0, -ENODEV (absent), -ENOTDIR or -errno. */
static int ol_drive_dir(const char *drive)
{
    struct stat st;
    if (stat(drive, &st) < 0)
        return errno == ENOENT ? -ENODEV : -errno;
    return S_ISDIR(st.st_mode) ? 0 : -ENOTDIR;
}

static int ol_fsync_dir(const char *path)
{
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    int rc = fsync(fd) < 0 ? -errno : 0;
    close(fd);
    return rc;
}

int ol_format_read(const char *drive, struct ol_format *f)
{
    memset(f, 0, sizeof *f);
    char path[PATH_MAX];
    int rc = ol_join(path, sizeof path, drive, OL_FORMAT_FILE);
    if (rc < 0)
        return rc;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) {
        int e = errno;
        if (e != ENOENT)
            return -e;
        rc = ol_drive_dir(drive);
        return rc < 0 ? rc : -ENOENT;
    }
    uint8_t *b = NULL;
    struct stat st;
    if (fstat(fd, &st) < 0) {
        rc = -errno;
        goto out;
    }
    if (!S_ISREG(st.st_mode) || st.st_size < 16 || (uint64_t)st.st_size > OL_FORMAT_MAX_FILE) {
        rc = -EBADMSG;
        goto out;
    }
    size_t size = (size_t)st.st_size, got = 0;
    b = malloc(size);
    if (!b) {
        rc = -ENOMEM;
        goto out;
    }
    while (got < size) {
        ssize_t r = pread(fd, b + got, size - got, (off_t)got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            rc = -errno;
            goto out;
        }
        if (r == 0) { /* shrank under us */
            rc = -EBADMSG;
            goto out;
        }
        got += (size_t)r;
    }
    rc = ol_fmt_decode(b, size, f);
out:
    free(b);
    close(fd);
    return rc;
}

void ol_format_free(struct ol_format *f)
{
    free(f->layout);
    memset(f, 0, sizeof *f);
}

/* Phase 1 of a write: <drive>/.openlake/format.tmp written and fsynced. */
static int ol_fmt_prepare(const char *drive, const struct ol_format *f)
{
    int rc = ol_fmt_check(f);
    if (rc < 0)
        return rc;
    if ((rc = ol_drive_dir(drive)) < 0)
        return rc;
    char dir[PATH_MAX], tmp[PATH_MAX];
    if ((rc = ol_join(dir, sizeof dir, drive, OL_FORMAT_DIR)) < 0 ||
        (rc = ol_join(tmp, sizeof tmp, drive, OL_FORMAT_TMP)) < 0)
        return rc;
    if (mkdir(dir, 0700) < 0 && errno != EEXIST)
        return -errno;
    size_t size = ol_fmt_size(OL_FORMAT_HDR_LEN, f->sets, f->drives_per_set), off = 0;
    uint8_t *b = malloc(size);
    if (!b)
        return -ENOMEM;
    ol_fmt_encode(f, b, size);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) {
        rc = -errno;
        goto out;
    }
    if (fchmod(fd, 0600) < 0) { /* a leftover temp file may have had another mode */
        rc = -errno;
        goto out;
    }
    while (off < size) {
        ssize_t w = write(fd, b + off, size - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0) {
            rc = -errno;
            goto out;
        }
        off += (size_t)w;
    }
    if (fsync(fd) < 0)
        rc = -errno;
out:
    if (fd >= 0 && close(fd) < 0 && rc == 0)
        rc = -errno;
    if (rc < 0 && fd >= 0)
        unlink(tmp);
    free(b);
    return rc;
}

/* Phase 2: the temp file renamed over the format; both directories fsynced. */
static int ol_fmt_commit(const char *drive)
{
    char dir[PATH_MAX], tmp[PATH_MAX], path[PATH_MAX];
    int rc;
    if ((rc = ol_join(dir, sizeof dir, drive, OL_FORMAT_DIR)) < 0 ||
        (rc = ol_join(tmp, sizeof tmp, drive, OL_FORMAT_TMP)) < 0 ||
        (rc = ol_join(path, sizeof path, drive, OL_FORMAT_FILE)) < 0)
        return rc;
    if (rename(tmp, path) < 0)
        return -errno;
    if ((rc = ol_fsync_dir(dir)) < 0)
        return rc;
    return ol_fsync_dir(drive); /* .openlake/ itself may be new */
}

static void ol_fmt_unlink_tmp(const char *drive)
{
    char tmp[PATH_MAX];
    if (ol_join(tmp, sizeof tmp, drive, OL_FORMAT_TMP) == 0)
        unlink(tmp);
}

int ol_format_write(const char *drive, const struct ol_format *f)
{
    int rc = ol_fmt_prepare(drive, f);
    if (rc == 0 && (rc = ol_fmt_commit(drive)) < 0)
        ol_fmt_unlink_tmp(drive);
    return rc;
}

void ol_format_uuid_str(const uint8_t u[16], char out[37])
{
    static const char hex[] = "0123456789abcdef";
    char *p = out;
    for (unsigned i = 0; i < 16; i++) {
        if (i == 4 || i == 6 || i == 8 || i == 10)
            *p++ = '-';
        *p++ = hex[u[i] >> 4];
        *p++ = hex[u[i] & 15];
    }
    *p = 0;
}

/* ---- resolution ------------------------------------------------------------------- */

/* Formatted drives that agree on deployment and layout. */
struct ol_fmt_group {
    uint8_t deployment[16];
    unsigned sets, dps;
    uint64_t sum;                /* XXH3-64 of the table */
    uint8_t (*table)[16];        /* one copy for the group */
    unsigned count;
};

const char *ol_format_state_name(enum ol_format_state s)
{
    switch (s) {
    case OL_FORMAT_OK: return "ok";
    case OL_FORMAT_BLANK: return "blank";
    case OL_FORMAT_OFFLINE: return "offline";
    case OL_FORMAT_CORRUPT: return "corrupt";
    case OL_FORMAT_NEWER: return "newer";
    case OL_FORMAT_SWAPPED: return "swapped";
    case OL_FORMAT_DUPLICATE: return "duplicate";
    case OL_FORMAT_FOREIGN: return "foreign";
    case OL_FORMAT_MISMATCH: return "mismatch";
    }
    return "?";
}

void ol_format_plan_free(struct ol_format_plan *plan)
{
    free(plan->layout);
    free(plan->drives);
    memset(plan, 0, sizeof *plan);
}

static void ol_say(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void ol_say(char *err, size_t errlen, const char *fmt, ...)
{
    if (!err || !errlen)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

int ol_format_random_id(uint8_t out[16], bool uuid)
{
    size_t got = 0;
    while (got < 16) {
        ssize_t r = getrandom(out + got, 16 - got, 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return -EIO;
        got += (size_t)r;
    }
    if (uuid) {
        out[6] = (uint8_t)((out[6] & 0x0f) | 0x40);
        out[8] = (uint8_t)((out[8] & 0x3f) | 0x80);
    }
    if (memcmp(out, ol_zero16, 16) == 0)
        out[15] = 1; /* a zero id is invalid; 2^-128 */
    return 0;
}

/* Index of the group for f, adding one if new; -1 on ENOMEM. */
static int ol_group_of(struct ol_fmt_group *g, unsigned *ng, const struct ol_format *f)
{
    size_t tlen = (size_t)16 * f->sets * f->drives_per_set;
    uint64_t sum = XXH3_64bits(f->layout, tlen);
    for (unsigned i = 0; i < *ng; i++)
        if (g[i].sum == sum && g[i].sets == f->sets && g[i].dps == f->drives_per_set &&
            memcmp(g[i].deployment, f->deployment, 16) == 0 &&
            memcmp(g[i].table, f->layout, tlen) == 0)
            return (int)i;
    struct ol_fmt_group *n = &g[*ng];
    n->table = malloc(tlen);
    if (!n->table)
        return -1;
    memcpy(n->table, f->layout, tlen);
    memcpy(n->deployment, f->deployment, 16);
    n->sets = f->sets;
    n->dps = f->drives_per_set;
    n->sum = sum;
    n->count = 0;
    return (int)(*ng)++;
}

static void ol_refuse(struct ol_format_plan *plan, struct ol_format_drive *d,
                      enum ol_format_state s)
{
    d->state = s;
    d->refused = true;
    plan->nrefused++;
}

/* Blank (or adopted corrupt) drive i of an existing deployment: adopt it. */
static void ol_adopt(struct ol_format_plan *plan, struct ol_format_drive *d)
{
    d->write = true;
    d->heal = true;
    plan->nwrite++;
    plan->nheal++;
}

int ol_format_resolve(const char *const *paths, unsigned n, unsigned dps, unsigned flags,
                      struct ol_format_plan *plan, char *err, size_t errlen)
{
    memset(plan, 0, sizeof *plan);
    ol_say(err, errlen, "%s", "");
    if (n == 0 || dps == 0 || dps > OL_FORMAT_MAX_SET_DRIVES || n % dps != 0 ||
        n / dps > OL_FORMAT_MAX_SETS) {
        ol_say(err, errlen,
               "%u drives in sets of %u: need a whole number of sets, 1 to %u drives per set, "
               "at most %u sets",
               n, dps, OL_FORMAT_MAX_SET_DRIVES, OL_FORMAT_MAX_SETS);
        return -EINVAL;
    }
    plan->n = n;
    plan->sets = n / dps;
    plan->drives_per_set = dps;
    plan->flags = flags;
    plan->drives = calloc(n, sizeof *plan->drives);
    plan->layout = calloc(n, 16);
    struct ol_fmt_group *groups = calloc(n, sizeof *groups);
    int *grp = malloc(n * sizeof *grp);        /* drive -> group, or -1 */
    unsigned *owner = malloc(n * sizeof *owner); /* position -> claiming drive, or n */
    unsigned ng = 0;
    int rc = 0;
    if (!plan->drives || !plan->layout || !groups || !grp || !owner) {
        ol_say(err, errlen, "out of memory");
        rc = -ENOMEM;
        goto out;
    }

    /* Read every drive. */
    for (unsigned i = 0; i < n; i++) {
        struct ol_format_drive *d = &plan->drives[i];
        struct ol_format f;
        d->path = paths[i];
        d->set = i / dps;
        d->drive = i % dps;
        d->other = n;
        grp[i] = -1;
        owner[i] = n;
        d->read_rc = ol_format_read(paths[i], &f);
        switch (d->read_rc) {
        case 0:
            d->state = OL_FORMAT_OK; /* provisional */
            memcpy(d->found_deployment, f.deployment, 16);
            d->found_sets = f.sets;
            d->found_drives_per_set = f.drives_per_set;
            d->found_set = f.set;
            d->found_drive = f.drive;
            grp[i] = ol_group_of(groups, &ng, &f);
            ol_format_free(&f);
            if (grp[i] < 0) {
                ol_say(err, errlen, "out of memory");
                rc = -ENOMEM;
                goto out;
            }
            groups[grp[i]].count++;
            break;
        case -ENOENT: d->state = OL_FORMAT_BLANK; break;
        case -EBADMSG: d->state = OL_FORMAT_CORRUPT; break;
        case -ENOTSUP: d->state = OL_FORMAT_NEWER; break;
        case -ENOMEM:
            ol_say(err, errlen, "out of memory");
            rc = -ENOMEM;
            goto out;
        default: d->state = OL_FORMAT_OFFLINE; break;
        }
    }

    bool adopt_corrupt = flags & OL_FORMAT_ADOPT_CORRUPT;
    if (ng == 0) {
        /* A new deployment: every drive must be there and blank. */
        for (unsigned i = 0; i < n; i++) {
            struct ol_format_drive *d = &plan->drives[i];
            if (d->state == OL_FORMAT_BLANK || (d->state == OL_FORMAT_CORRUPT && adopt_corrupt)) {
                d->write = true;
                plan->nwrite++;
            } else {
                ol_refuse(plan, d, d->state);
            }
        }
        if (plan->nrefused) {
            rc = -EUCLEAN;
            goto out;
        }
        plan->fresh = true;
        if ((rc = ol_format_random_id(plan->deployment, false)) < 0) {
            ol_say(err, errlen, "getrandom failed: cannot make a deployment id");
            goto out;
        }
        for (unsigned i = 0; i < n; i++)
            if ((rc = ol_format_random_id(plan->layout[i], true)) < 0) {
                ol_say(err, errlen, "getrandom failed: cannot make drive uuids");
                goto out;
            }
        goto out;
    }

    /* The deployment held by most drives, then its most common table. */
    unsigned best_dep = 0, best_dep_count = 0;
    for (unsigned a = 0; a < ng; a++) {
        unsigned c = 0;
        for (unsigned b = 0; b < ng; b++)
            if (memcmp(groups[a].deployment, groups[b].deployment, 16) == 0)
                c += groups[b].count;
        if (c > best_dep_count) {
            best_dep_count = c;
            best_dep = a;
        }
    }
    unsigned ref = best_dep;
    for (unsigned a = 0; a < ng; a++)
        if (memcmp(groups[a].deployment, groups[best_dep].deployment, 16) == 0 &&
            groups[a].count > groups[ref].count)
            ref = a;
    struct ol_fmt_group *R = &groups[ref];
    memcpy(plan->deployment, R->deployment, 16);
    bool layout_ok = R->sets == plan->sets && R->dps == dps;
    if (layout_ok)
        memcpy(plan->layout, R->table, (size_t)16 * n);

    /* Formatted drives: foreign, mismatched, inconsistent, or placed. */
    for (unsigned i = 0; i < n; i++) {
        struct ol_format_drive *d = &plan->drives[i];
        if (grp[i] < 0)
            continue;
        const struct ol_fmt_group *G = &groups[grp[i]];
        if (memcmp(G->deployment, R->deployment, 16) != 0) {
            ol_refuse(plan, d, OL_FORMAT_FOREIGN);
        } else if (!layout_ok || G->sets != R->sets || G->dps != R->dps) {
            ol_refuse(plan, d, OL_FORMAT_MISMATCH);
        } else if ((unsigned)grp[i] != ref) {
            d->state = OL_FORMAT_CORRUPT; /* its table disagrees with the deployment's */
            if (adopt_corrupt)
                ol_adopt(plan, d);
            else
                ol_refuse(plan, d, OL_FORMAT_CORRUPT);
        } else if (d->found_set * dps + d->found_drive == i) {
            owner[i] = i;
            plan->nok++;
        }
    }
    /* Drives of this deployment at another position. */
    for (unsigned i = 0; i < n && layout_ok; i++) {
        struct ol_format_drive *d = &plan->drives[i];
        if (grp[i] != (int)ref || d->state != OL_FORMAT_OK || owner[i] == i)
            continue;
        unsigned p = d->found_set * dps + d->found_drive;
        if (owner[p] == n) {
            owner[p] = i;
            d->other = p;
            ol_refuse(plan, d, OL_FORMAT_SWAPPED);
        } else {
            d->other = owner[p];
            ol_refuse(plan, d, OL_FORMAT_DUPLICATE);
        }
    }
    /* The rest. */
    unsigned nblank = 0, first_blank = n;
    for (unsigned i = 0; i < n; i++) {
        struct ol_format_drive *d = &plan->drives[i];
        if (grp[i] >= 0)
            continue;
        switch (d->state) {
        case OL_FORMAT_BLANK:
            if (layout_ok) /* else there is no uuid to give it */
                ol_adopt(plan, d);
            break;
        case OL_FORMAT_CORRUPT:
            if (adopt_corrupt && layout_ok)
                ol_adopt(plan, d);
            else
                ol_refuse(plan, d, OL_FORMAT_CORRUPT);
            break;
        case OL_FORMAT_OFFLINE:
            plan->noffline++;
            break;
        default:
            ol_refuse(plan, d, d->state);
            break;
        }
    }
    for (unsigned i = 0; i < n; i++)
        if (plan->drives[i].heal) {
            nblank++;
            if (first_blank == n)
                first_blank = i;
        }
    char dep[37];
    ol_format_uuid_str(plan->deployment, dep);
    if (2 * nblank > n && !(flags & OL_FORMAT_ADOPT_BLANK)) {
        plan->blank_refused = true;
        if (!plan->nrefused)
            ol_say(err, errlen,
                   "%u of %u drives have no usable format (first: %s) while the others belong "
                   "to deployment %s: refusing to adopt them; check data_dirs and that every "
                   "drive is mounted",
                   nblank, n, plan->drives[first_blank].path, dep);
    }
    /* A set with drives to adopt and none formatted has nothing to heal from. */
    for (unsigned s = 0; s < plan->sets && nblank && !plan->blank_refused &&
                        !(flags & OL_FORMAT_ADOPT_BLANK); s++) {
        unsigned ok = 0, adopt = 0, first = n;
        for (unsigned i = s * dps; i < (s + 1) * dps; i++) {
            ok += plan->drives[i].state == OL_FORMAT_OK && !plan->drives[i].refused;
            if (plan->drives[i].heal) {
                adopt++;
                if (first == n)
                    first = i;
            }
        }
        if (adopt && !ok) {
            plan->blank_refused = true;
            if (!plan->nrefused)
                ol_say(err, errlen,
                       "set %u has no drive formatted for deployment %s (first blank: %s): "
                       "its data cannot be healed; check data_dirs and that every drive is "
                       "mounted",
                       s, dep, plan->drives[first].path);
        }
    }
    if (plan->nrefused || plan->blank_refused)
        rc = -EUCLEAN;

out:
    if (rc == -EUCLEAN && plan->nrefused) {
        unsigned first = 0;
        while (!plan->drives[first].refused)
            first++;
        char line[2 * PATH_MAX + 512];
        ol_format_describe(plan, first, line, sizeof line);
        unsigned more = plan->nrefused - 1 + (plan->blank_refused ? 1 : 0);
        if (more)
            ol_say(err, errlen, "%s%s (and %u more problem%s)", ng ? "" : "cannot create a new "
                   "deployment: ", line, more, more == 1 ? "" : "s");
        else
            ol_say(err, errlen, "%s%s", ng ? "" : "cannot create a new deployment: ", line);
    }
    if (rc < 0 && rc != -EUCLEAN) {
        /* Nothing to act on: leave no half-made plan behind. */
        free(plan->layout);
        free(plan->drives);
        plan->layout = NULL;
        plan->drives = NULL;
    }
    for (unsigned a = 0; groups && a < ng; a++)
        free(groups[a].table);
    free(groups);
    free(grp);
    free(owner);
    return rc;
}

void ol_format_describe(const struct ol_format_plan *plan, unsigned i, char *buf, size_t len)
{
    if (!len)
        return;
    if (!plan->drives || i >= plan->n) {
        snprintf(buf, len, "no such drive");
        return;
    }
    const struct ol_format_drive *d = &plan->drives[i];
    const struct ol_format_drive *o = d->other < plan->n ? &plan->drives[d->other] : NULL;
    char dep[37], mine[37];
    ol_format_uuid_str(d->found_deployment, dep);
    ol_format_uuid_str(plan->deployment, mine);
    switch (d->state) {
    case OL_FORMAT_OK:
        snprintf(buf, len, "%s: ok, set %u drive %u", d->path, d->set, d->drive);
        return;
    case OL_FORMAT_BLANK:
        if (plan->fresh)
            snprintf(buf, len, "%s: blank, to be formatted as set %u drive %u of a new deployment",
                     d->path, d->set, d->drive);
        else if (d->write)
            snprintf(buf, len, "%s: blank, to be adopted as set %u drive %u and healed", d->path,
                     d->set, d->drive);
        else
            snprintf(buf, len, "%s: blank", d->path);
        return;
    case OL_FORMAT_OFFLINE:
        if (d->read_rc == -ENODEV)
            snprintf(buf, len,
                     "%s: directory does not exist (drive not mounted, or a wrong path in "
                     "data_dirs)%s",
                     d->path, d->refused ? "" : "; running without it");
        else
            snprintf(buf, len, "%s: cannot read %s (%s): check the drive and its permissions%s",
                     d->path, OL_FORMAT_FILE, strerror(-d->read_rc),
                     d->refused ? "" : "; running without it");
        return;
    case OL_FORMAT_CORRUPT:
        if (d->write && plan->fresh)
            snprintf(buf, len, "%s: unusable format, to be formatted as set %u drive %u of a new "
                     "deployment", d->path, d->set, d->drive);
        else if (d->write)
            snprintf(buf, len, "%s: unusable format, to be adopted as set %u drive %u and healed",
                     d->path, d->set, d->drive);
        else if (d->read_rc == 0)
            snprintf(buf, len,
                     "%s: its layout table disagrees with the other drives of deployment %s: "
                     "move %s/%s away so the drive is adopted as blank and healed",
                     d->path, dep, d->path, OL_FORMAT_FILE);
        else
            snprintf(buf, len,
                     "%s: %s is damaged: replace the drive, or move the file away so the drive "
                     "is adopted as blank and healed",
                     d->path, OL_FORMAT_FILE);
        return;
    case OL_FORMAT_NEWER:
        snprintf(buf, len,
                 "%s: formatted by a newer OpenLake (format version above %u): upgrade openlaked",
                 d->path, OL_FORMAT_VERSION);
        return;
    case OL_FORMAT_SWAPPED:
        snprintf(buf, len,
                 "%s: is set %u drive %u of this deployment, but data_dirs lists it as set %u "
                 "drive %u; it belongs where data_dirs lists %s: put the drives (or the "
                 "data_dirs entries) back in their places",
                 d->path, d->found_set, d->found_drive, d->set, d->drive, o ? o->path : "?");
        return;
    case OL_FORMAT_DUPLICATE:
        snprintf(buf, len,
                 "%s: claims set %u drive %u, which %s holds too: the same drive listed twice "
                 "(a symlink or bind mount) or a cloned drive; remove one from data_dirs or wipe it",
                 d->path, d->found_set, d->found_drive, o ? o->path : "?");
        return;
    case OL_FORMAT_FOREIGN:
        snprintf(buf, len,
                 "%s: belongs to another deployment (%s), not this one (%s): remove it from "
                 "data_dirs, or wipe it to reuse it",
                 d->path, dep, mine);
        return;
    case OL_FORMAT_MISMATCH:
        snprintf(buf, len,
                 "%s: formatted as %u set%s of %u drives (%u drives), but data_dirs and "
                 "set_drive_count now give %u set%s of %u: restore the earlier data_dirs and "
                 "set_drive_count",
                 d->path, d->found_sets, d->found_sets == 1 ? "" : "s", d->found_drives_per_set,
                 d->found_sets * d->found_drives_per_set, plan->sets, plan->sets == 1 ? "" : "s",
                 plan->drives_per_set);
        return;
    }
    snprintf(buf, len, "%s: ?", d->path);
}

/* The format drive i of the plan carries. */
static void ol_plan_format(const struct ol_format_plan *plan, unsigned i, struct ol_format *f)
{
    memset(f, 0, sizeof *f);
    memcpy(f->deployment, plan->deployment, 16);
    memcpy(f->uuid, plan->layout[i], 16);
    f->sets = plan->sets;
    f->drives_per_set = plan->drives_per_set;
    f->set = i / plan->drives_per_set;
    f->drive = i % plan->drives_per_set;
    f->layout = plan->layout;
}

int ol_format_apply(const struct ol_format_plan *plan, char *err, size_t errlen)
{
    ol_say(err, errlen, "%s", "");
    if (!plan->drives || !plan->layout || plan->nrefused || plan->blank_refused) {
        ol_say(err, errlen, "format plan was refused or is empty: nothing written");
        return -EINVAL;
    }
    struct ol_format f;
    int rc = 0;
    unsigned i;
    for (i = 0; i < plan->n; i++) {
        if (!plan->drives[i].write)
            continue;
        ol_plan_format(plan, i, &f);
        if ((rc = ol_fmt_prepare(plan->drives[i].path, &f)) < 0) {
            ol_say(err, errlen, "%s: cannot write %s: %s (no drive was formatted)",
                   plan->drives[i].path, OL_FORMAT_TMP, strerror(-rc));
            for (unsigned j = 0; j < i; j++)
                if (plan->drives[j].write)
                    ol_fmt_unlink_tmp(plan->drives[j].path);
            return rc;
        }
    }
    for (i = 0; i < plan->n; i++) {
        const struct ol_format_drive *d = &plan->drives[i];
        if (d->write) {
            if ((rc = ol_fmt_commit(d->path)) < 0) {
                ol_say(err, errlen, "%s: cannot put %s in place: %s", d->path, OL_FORMAT_FILE,
                       strerror(-rc));
                for (unsigned j = i; j < plan->n; j++)
                    if (plan->drives[j].write)
                        ol_fmt_unlink_tmp(plan->drives[j].path);
                return rc;
            }
        } else if (d->state != OL_FORMAT_OFFLINE) {
            ol_fmt_unlink_tmp(d->path); /* a crash's leftover, if any */
        }
    }
    return 0;
}
