/*
 * admin_store.c - the object store's and the S3 API's counters in
 * /_openlake/metrics: struct ol_store_stats (store/engine.h) and struct
 * ol_s3_stats (s3/server.h) of every core, summed, and the listing
 * catalog's error count (store/catalog.h).
 *
 * Each core writes its own counters; this reads them from the admin
 * request's core with relaxed 64-bit loads (a scrape sees each counter as
 * of some recent moment, never a torn value).
 *
 * Owns: the openlake_store_* and openlake_s3_* metric names. Must not:
 * write to the counters.
 */
#include "daemon/daemon.h"

#include "http/metrics.h"
#include "s3/server.h"
#include "store/catalog.h"
#include "store/engine.h"

#define LOAD(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)

size_t ol_admin_store_metrics(struct ol_daemon *d, char *buf, size_t cap)
{
    struct ol_store_stats t = {0};
    struct ol_s3_stats e = {0};
    bool store = false;
    for (int i = 0; i < d->ncores; i++) {
        const struct ol_core *c = &d->cores[i];
        if (c->store) {
            const struct ol_store_stats *s = ol_store_core_stats(c->store);
            store = true;
            t.puts += LOAD(s->puts);
            t.put_bytes += LOAD(s->put_bytes);
            t.put_errors += LOAD(s->put_errors);
            t.gets += LOAD(s->gets);
            t.get_bytes += LOAD(s->get_bytes);
            t.get_errors += LOAD(s->get_errors);
            t.deletes += LOAD(s->deletes);
            t.busy += LOAD(s->busy);
            t.reads_reconstructed += LOAD(s->reads_reconstructed);
            t.checksum_failures += LOAD(s->checksum_failures);
            t.read_errors += LOAD(s->read_errors);
            t.write_drive_failures += LOAD(s->write_drive_failures);
            t.direct_bytes += LOAD(s->direct_bytes);
            t.ahead_bytes += LOAD(s->ahead_bytes);
            t.mapped_bytes += LOAD(s->mapped_bytes);
        }
        if (c->s3api) {
            struct ol_s3_stats x;
            ol_s3_server_stats(c->s3api, &x);
            e.etag_blocks_interleaved += x.etag_blocks_interleaved;
            e.etag_blocks_alone += x.etag_blocks_alone;
            e.etag_waits += x.etag_waits;
            e.etag_waits_late += x.etag_waits_late;
            e.chunk_paired_bytes += x.chunk_paired_bytes;
            e.chunk_unstaged += x.chunk_unstaged;
            e.one_pass_bytes += x.one_pass_bytes;
            e.one_pass_moved += x.one_pass_moved;
            e.auth_sigv4 += x.auth_sigv4;
            e.auth_sigv2 += x.auth_sigv2;
        }
    }
    uint64_t syncs = 0, barriers = 0, sync_ns = 0;
    if (d->store)
        ol_store_sync_stats(d->store, &syncs, &barriers, &sync_ns);
    uint64_t cat_errors = d->catalog ? ol_catalog_errors(d->catalog) : 0;
    const struct ol_metric m[] = {
        {"openlake_s3_auth_sigv4_total", "counter", "S3 requests authenticated with Signature Version 4 (header or presigned URL).", e.auth_sigv4},
        {"openlake_s3_auth_sigv2_total", "counter", "S3 requests authenticated with Signature Version 2 (header or presigned URL; s3_sigv2).", e.auth_sigv2},
        {"openlake_s3_etag_md5_blocks_interleaved_total", "counter", "ETag MD5 blocks hashed together with other uploads' (base/md5.h).", e.etag_blocks_interleaved},
        {"openlake_s3_etag_md5_blocks_alone_total", "counter", "ETag MD5 blocks hashed alone.", e.etag_blocks_alone},
        {"openlake_s3_etag_waits_total", "counter", "Uploads whose body ended and whose ETag waited for another upload's bytes.", e.etag_waits},
        {"openlake_s3_etag_waits_late_total", "counter", "Of those, waits ended by the timer (the rest hashed alone).", e.etag_waits_late},
        {"openlake_s3_chunk_sha256_paired_bytes_total", "counter", "Bytes of signed aws-chunked chunks hashed beside another chunk's (base/sha256.h).", e.chunk_paired_bytes},
        {"openlake_s3_chunk_unstaged_total", "counter", "Signed aws-chunked uploads that found no staging free and hashed their chunks one by one.", e.chunk_unstaged},
        {"openlake_s3_chunk_one_pass_bytes_total", "counter", "Bytes of signed uploads alone on their core hashed for their signatures (chunk or payload SHA-256) and their ETag in one pass (base/md5sha.h).", e.one_pass_bytes},
        {"openlake_s3_one_pass_moved_total", "counter", "Signed-payload uploads that began alone in one pass and moved to the core's MD5 set when other uploads came.", e.one_pass_moved},
        {"openlake_store_puts_total", "counter", "Objects and parts written.", t.puts},
        {"openlake_store_put_bytes_total", "counter", "Bytes of objects and parts written.", t.put_bytes},
        {"openlake_store_put_errors_total", "counter", "Writes that failed.", t.put_errors},
        {"openlake_store_gets_total", "counter", "Object reads.", t.gets},
        {"openlake_store_get_bytes_total", "counter", "Bytes read for clients.", t.get_bytes},
        {"openlake_store_get_errors_total", "counter", "Object reads that failed.", t.get_errors},
        {"openlake_store_deletes_total", "counter", "Object and version deletes.", t.deletes},
        {"openlake_store_busy_total", "counter", "Requests refused: the core's request states were all in use.", t.busy},
        {"openlake_store_reads_reconstructed_total", "counter", "Stripes or inline objects rebuilt from parity while reading.", t.reads_reconstructed},
        {"openlake_store_checksum_failures_total", "counter", "Shard blocks or metadata files that failed their checksum.", t.checksum_failures},
        {"openlake_store_read_errors_total", "counter", "Shard files missing, short or failing to read.", t.read_errors},
        {"openlake_store_write_drive_failures_total", "counter", "Drives that missed a write that succeeded (queued for heal).", t.write_drive_failures},
        {"openlake_store_direct_write_bytes_total", "counter", "Shard-file bytes written with O_DIRECT (drives that take it, store.md).", t.direct_bytes},
        {"openlake_store_ahead_write_bytes_total", "counter", "Of those, bytes written while their stripe was still filling (a lone PUT's pages ahead of the seal, store.md).", t.ahead_bytes},
        {"openlake_store_get_mapped_bytes_total", "counter", "Shard bytes a GET verified and sent where they lie in the page cache, without reading them into a buffer (store.md, mapped reads).", t.mapped_bytes},
        {"openlake_store_syncfs_total", "counter", "syncfs calls of the group commit (store_sync = syncfs, store.md).", syncs},
        {"openlake_store_sync_barriers_total", "counter", "Barriers they answered (each the drives on one filesystem of a write, delete or bucket change).", barriers},
        {"openlake_store_syncfs_microseconds_total", "counter", "Time spent in those syncfs calls.", sync_ns / 1000},
        {"openlake_store_catalog_errors_total", "counter", "Listing index updates that failed, or writes whose outcome it could not learn: the index is then rebuilt from the object metadata at the next start (store.md, listing).", cat_errors},
    };
    /* the store's lines only where there is one (not in mode kv) */
    return ol_metrics_put(buf, cap, 0, m, store ? sizeof m / sizeof *m : 6);
}
