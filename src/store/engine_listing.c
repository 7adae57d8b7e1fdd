/*
 * engine_listing.c - the listing catalog's upkeep (store/catalog.h): what
 * a commit changes in the listing, computed from what it committed and
 * applied at its commit point (engine.h, ol_store_set_catalog).
 *
 * Each call is made when the write's quorum is reached, before its EV_DONE
 * callback and whatever the caller does then (a client that went away
 * changes nothing here), and with the key's commit lock held (asserted):
 * so two writes of one key, on one core or two, reach the catalog in the
 * order they committed. Bucket creates and deletes hold the bucket's lock
 * the same way (engine_bucket.c).
 *
 * Must not: do I/O or block (the catalog's calls are memory-only and take
 * its locks for a few microseconds); decide anything about the commit.
 * A failed catalog call marks the catalog dirty itself (catalog.h).
 */
#include "store/engine_int.h"

#include "base/assert.h"

#include "store/catalog.h"

#include <string.h>

void ol_store_set_catalog(struct ol_store *s, struct ol_catalog *cat) { s->catalog = cat; }

/* OL_INDEX_F_VERSIONS for a key whose latest is now vid: when it may hold
 * more than that one null version (another version was kept, vid is not
 * null, or the bucket was ever versioned). A flag too many costs
 * ListObjectVersions one metadata read; one missing would hide versions. */
static uint8_t versions_flag(struct ol_sreq *r, const uint8_t vid[16], bool kept)
{
    if (kept || !ol_meta_vid_is_null(vid) ||
        ol_store_versioning_get(r->c->s, r->bucket) != OL_STORE_VER_OFF)
        return OL_INDEX_F_VERSIONS;
    return 0;
}

/* The record of version v (an object or a delete marker) as the latest. */
static void rec_of(struct ol_index_rec *rec, const struct ol_meta_version *v, bool marker)
{
    memset(rec, 0, sizeof *rec);
    rec->mtime_ns = v->mtime_ns;
    if (marker) {
        rec->flags = OL_INDEX_F_DELETE_MARKER;
    } else {
        rec->size = v->size;
        memcpy(rec->etag, v->etag, 16);
        rec->etag_parts = v->etag_parts;
        rec->storage_class = v->storage_class;
    }
    memcpy(rec->version_id, v->vid, 16);
}

void ol_se_listing_commit(struct ol_sreq *r)
{
    struct ol_catalog *cat = r->c->s->catalog;
    if (!cat || r->mode == OL_SE_MODE_PART)
        return;
    OL_ASSERT(r->locked);   /* commit order: the key's lock is held */
    struct ol_meta_version v = r->tv;   /* the committed version: mtime, size, ETag, class */
    memcpy(v.vid, r->nvid, 16);
    struct ol_index_rec rec;
    rec_of(&rec, &v, r->dmark);
    rec.flags |= versions_flag(r, r->nvid, r->kept);
    ol_catalog_put(cat, r->bucket, r->key, r->klen, &rec);
}

void ol_se_listing_delete(struct ol_sreq *r)
{
    struct ol_catalog *cat = r->c->s->catalog;
    if (!cat || r->ta)
        return;   /* a tag set is not in the listing */
    OL_ASSERT(r->locked);
    const struct ol_delete_args *a = r->da;
    if (a && !a->found)
        return;   /* no drive had that version: nothing changed */
    if (!a || a->latest == 0) {
        ol_catalog_remove(cat, r->bucket, r->key, r->klen);
        return;
    }
    struct ol_index_rec rec;   /* the new latest, from the metadata written */
    rec_of(&rec, &a->lv, a->latest == OL_META_DELETE_MARKER);
    rec.flags |= versions_flag(r, a->lv.vid, a->more);
    ol_catalog_put(cat, r->bucket, r->key, r->klen, &rec);
}

void ol_se_listing_bucket(struct ol_sreq *r, bool created)
{
    struct ol_catalog *cat = r->c->s->catalog;
    if (!cat)
        return;
    OL_ASSERT(r->locked);   /* the bucket's lock: creates and deletes in order */
    if (created)
        ol_catalog_bucket_add(cat, r->bucket);
    else
        ol_catalog_bucket_remove(cat, r->bucket);
}

void ol_se_listing_unknown(struct ol_store *s, const char *what)
{
    if (s->catalog)
        ol_catalog_set_dirty(s->catalog, what, 0);
}
