/*
 * layout.h - where an object lives and which names are allowed: the
 * object's erasure set, the order of its shards over the set's drives,
 * parity by set size and storage class, quorums, bucket and key rules,
 * and the object's directory name on a drive.
 *
 * Owns: the placement rules, which are part of the on-disk format (a
 * change moves every object): the hashes below are pinned by known-answer
 * tests and must never change for an existing deployment.
 *
 * Keyed hashes. Placement and directory names are XXH3 hashes keyed by the
 * deployment id (struct ol_format.deployment), so they cannot be computed
 * from outside without it. Each use has its own 192-byte XXH3 secret,
 * derived from the id and a label:
 *
 *   secret(label) = 12 blocks of 16 bytes; block i (0..11) is
 *                   XXH3_128bits_withSeed(label || id, seed i), low half
 *                   then high half, each little-endian
 *   labels        "openlake/set/v1", "openlake/obj/v1", "openlake/dir/v1"
 *
 * XXH3 with a secret is a fast non-cryptographic hash, not a PRF: the
 * keying makes placement unpredictable to clients, it does not resist an
 * attacker who studies many placements. The deployment id must not be
 * shown to S3 clients.
 *
 * Must not: do I/O, allocate, know drives' paths or the format file.
 * Pure functions: the same inputs give the same answer on every machine.
 * Validation (bucket_ok, key_ok, parity_for_class) happens once at the S3
 * boundary; the placement functions trust their inputs.
 */
#ifndef OL_STORE_LAYOUT_H
#define OL_STORE_LAYOUT_H

#include <stddef.h>
#include <stdint.h>

#define OL_LAYOUT_BUCKET_MIN 3u
#define OL_LAYOUT_BUCKET_MAX 63u
#define OL_LAYOUT_KEY_MAX    1024u   /* bytes of UTF-8 */
#define OL_LAYOUT_MAX_SHARDS 256u    /* what a uint8_t shard index can name */
#define OL_LAYOUT_DIR_LEN    36u     /* "ab/" + 32 hex + NUL */

/* ---- placement -------------------------------------------------------------------- */

/*
 * The erasure set (0..nsets-1) of object (bucket, key): h = XXH3-64 with
 * secret("openlake/set/v1") over blen as 8 bytes little-endian, the bucket
 * bytes, then the key bytes; set = (h * nsets) >> 64 (128-bit product), so
 * sets are equally likely. nsets >= 1. Depends on nsets: the set count of
 * a deployment never changes (the format file enforces it).
 */
unsigned ol_layout_set_of(const uint8_t deployment_id[16], const char *bucket, size_t blen,
                          const char *key, size_t klen, unsigned nsets);

/*
 * The object's 64-bit distribution hash, for ol_layout_distribution: the
 * same input as ol_layout_set_of under secret("openlake/obj/v1"), so it is
 * independent of the set choice.
 */
uint64_t ol_layout_object_hash(const uint8_t deployment_id[16], const char *bucket, size_t blen,
                               const char *key, size_t klen);

/*
 * Which shard each drive of the set holds: out[p] = the shard index
 * (0..nshards-1; data shards first, then parity) stored on the set's drive
 * at position p, for p in 0..nshards-1. The order is a rotation by
 * start = hash % nshards: shard s goes to drive (start + s) % nshards, so
 * out[p] = (p + nshards - start) % nshards. Different objects start at
 * different drives and parity is spread over all of them. out has room for
 * nshards bytes; 1 <= nshards <= OL_LAYOUT_MAX_SHARDS.
 */
void ol_layout_distribution(uint64_t hash, unsigned nshards, uint8_t *out);

/* ---- parity and quorums ----------------------------------------------------------- */

/*
 * The default parity m for a set of drives_per_set drives (MinIO's
 * defaults): 1 drive 0; 2-3 drives 1; 4-5 drives 2; 6-7 drives 3; 8 or
 * more 4. 0 for 0 drives.
 */
unsigned ol_layout_default_parity(unsigned drives_per_set);

/*
 * The parity for an x-amz-storage-class value (len bytes, case-sensitive):
 *   "" or "STANDARD"        standard_parity
 *   "REDUCED_REDUNDANCY"    min(standard_parity, max(1, standard_parity / 2))
 *                           (0 only when standard parity is 0, which only a
 *                           1-drive set may have)
 * into *parity (OUT). Returns 0; -EINVAL for any other class (the S3 layer
 * answers InvalidStorageClass); -ERANGE when standard_parity is not valid
 * for drives_per_set (more than half of it, or 0 drives) - a caller bug,
 * the configuration is checked at start.
 */
int ol_layout_parity_for_class(const char *storage_class, size_t len, unsigned drives_per_set,
                               unsigned standard_parity, unsigned *parity);

/*
 * Quorums for nshards = k + m shards with parity m (m <= nshards / 2):
 * a write succeeds once k drives have it, k + 1 when k == m (so two
 * disjoint halves can never both succeed); a read needs k shards.
 */
unsigned ol_layout_write_quorum(unsigned nshards, unsigned parity);
unsigned ol_layout_read_quorum(unsigned nshards, unsigned parity);

/* ---- names -------------------------------------------------------------------------- */

/*
 * Checks an S3 bucket name (len bytes, not NUL-terminated): 3 to 63
 * characters of a-z, 0-9, '.' and '-'; first and last a letter or digit;
 * no "..", ".-" or "-." (each label must be a DNS label); not four
 * dot-separated runs of digits (an IP address, e.g. 192.168.5.4); not
 * starting with "xn--", "sthree-" or "amzn-s3-demo-"; not ending with
 * "-s3alias", "--ol-s3", "--x-s3" or "--table-s3". Returns 0 or -EINVAL.
 */
int ol_layout_bucket_ok(const char *name, size_t len);

/*
 * Checks an object key (len bytes): 1 to 1024 bytes of well-formed UTF-8
 * (no overlong forms, no surrogates U+D800..U+DFFF, nothing above
 * U+10FFFF, no truncated sequence) without a NUL byte. Returns 0;
 * -ENAMETOOLONG (more than 1024 bytes); -EINVAL (empty, NUL, bad UTF-8).
 * Anything else is a valid key: "../x", "a//b", "%2e%2e" are just names.
 */
int ol_layout_key_ok(const char *key, size_t len);

/*
 * The object's directory under its bucket's objects/ directory on a drive:
 * out = "ab/" followed by the 32 lowercase hex digits of
 * h = XXH3-128 (secret "openlake/dir/v1") of the key bytes, written
 * big-endian (high half first: XXH128's canonical form), where "ab" is the
 * first 2 of those 32 digits (256-way fan-out). Always 35 characters and a
 * NUL: [0-9a-f]{2} '/' [0-9a-f]{32}. The key never appears in a path, so
 * no key can name a file outside the bucket; the key itself is kept in
 * the object's metadata (which is compared on every lookup: a hash
 * collision is detected there) and in the bucket's ordered index.
 */
void ol_layout_object_dir(const uint8_t deployment_id[16], const char *key, size_t klen,
                          char out[OL_LAYOUT_DIR_LEN]);

#endif
