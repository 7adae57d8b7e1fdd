/*
 * meta.h - the object store's per-object metadata file ("OLOM", format
 * version 1): codec and rewrite helpers.
 *
 * Owns: the byte layout of the metadata file that each drive of an
 * object's erasure set keeps for that object (one file per object per
 * drive, like MinIO's xl.meta): the object's key, and every S3 version of
 * the object, newest first, as a delete marker or an object record (size,
 * ETag, the six stored HTTP headers, user metadata, tagging, storage
 * class, flexible checksum, erasure layout, data directory, parts, and
 * optional inline data), the limits, and the checksum. docs/store-meta.md is the prose and
 * offset-table version of this contract; the two must agree.
 *
 * Must not: do I/O, allocate, keep hidden state, read a byte outside the
 * [buf, buf + len) it is given, or include anything but libc and xxhash.h.
 * It knows nothing of drives, paths, locks, quorum or HTTP: it turns bytes
 * into validated fields (slices of the caller's buffer, zero copy) and
 * fields into bytes in a caller buffer. Naming and printing S3 values
 * (base64 checksums, header names on the wire) is the S3 layer's job;
 * ol_meta_etag_format is here because the ETag's stored form is ours.
 *
 * File = 16-byte header, the object key, the version records (newest
 * first), an 8-byte trailer. All integers little-endian; no alignment, no
 * padding.
 *
 *   off size type    field
 *     0    4 u8[4]   magic "OLOM" (4F 4C 4F 4D)
 *     4    2 u16     format version: 1 (OL_META_FORMAT)
 *     6    2 u16     flags: 0 (none defined in version 1)
 *     8    4 u32     version count, 0..10000
 *    12    4 u32     total length: the file's bytes, header and trailer
 *                    included (27 .. OL_META_MAX_FILE)
 *    16    2 u16     key length K, 1..1024
 *    18    K u8[K]   the object key (the directory is named by its hash:
 *                    comparing it detects a hash collision)
 *  18+K    .         version records, each starting with its own u32 length
 *   -8    8 u64     XXH3-64 (seed 0) of every byte before it
 *
 * Version record (every offset relative to the record):
 *
 *     0    4 u32     record length, this field included
 *     4    1 u8      type: 1 object, 2 delete marker
 *     5    1 u8      flags (objects only, else 0): OL_META_VF_INLINE (0x01) or
 *                    OL_META_VF_FLAT (0x02, part count 1: the shard file is
 *                    <data dir id>.data beside the metadata file, not
 *                    <data dir id>/part.1), never both
 *     6    2 u16     reserved, 0
 *     8   16 u8[16]  version id; all zero = the S3 "null" version
 *    24    8 u64     modification time, ns since the Unix epoch
 *   -- a delete marker ends here (record length 32) --
 *    32    8 u64     size: the object's length in bytes
 *    40   16 u8[16]  ETag: MD5, or for a multipart upload MD5 of the parts' MD5s
 *    56    2 u16     ETag part count: 0 = plain "<md5>"; N = "<md5>-N"
 *    58    2 u16     part count P, 0..10000
 *    60    1 u8      storage class (enum ol_meta_sc)
 *    61    1 u8      checksum algorithm (enum ol_meta_cks); its length L
 *    62    1 u8      checksum flags: OL_META_CKS_COMPOSITE or
 *                    OL_META_CKS_FULL_OBJECT, never both
 *    63    1 u8      erasure k (data shards), >= 1
 *    64    1 u8      erasure m (parity shards); k + m <= 64
 *    65    1 u8      this drive's shard index, < k + m
 *    66    2 u16     checksum part count: N of a composite "<base64>-N", else 0
 *    68    4 u32     erasure block size: bytes per shard per stripe, >= 1
 *    72   16 u8[16]  data dir id: names the shard files (<id>.data when
 *                    FLAT, else the directory <id>/ of part.<n> files)
 *    88    L u8[L]   checksum bytes (0, 4, 8, 20 or 32)
 *     .  k+m u8[]    distribution: drive position -> shard index (a permutation)
 *     .    . str x6  Content-Type, Content-Encoding, Content-Disposition,
 *                    Content-Language, Cache-Control, Expires: each u16
 *                    length + bytes (0 = absent)
 *     .    . user    u16 pair count, then per pair u16 name length, name,
 *                    u16 value length, value; names strictly ascending
 *     .    . str     tagging: u16 length + the URL-encoded tag set
 *     .    . parts   P x { u32 number, u64 size, u64 actual size,
 *                    u8[16] ETag (MD5), u8[L] checksum }, numbers ascending
 *     .    . inline  only with OL_META_VF_INLINE: u32 length, u64 XXH3-64
 *                    of the bytes, the bytes
 *
 * A record is exactly as long as its fields; reserved fields are zero;
 * every file has one encoding (decode then re-encode gives the same bytes).
 *
 * Error convention (one for the module): 0 / a count / a length on
 * success, else a negative errno:
 *   -EBADMSG  decoding: malformed or corrupt (bad magic, checksum, length,
 *             field, limit, order, duplicate version id)
 *   -ENOTSUP  decoding: a well-formed file of another format version
 *   -EINVAL   encoding: a field out of range or over its per-field limit;
 *             a key that is empty, too long, or not the file's key
 *   -E2BIG    encoding: the file would exceed OL_META_MAX_VERSIONS or
 *             OL_META_MAX_FILE
 *   -EEXIST   encoding: two versions with one version id
 *   -ENOENT   lookups: no such version / part
 *   -ENOSPC   encoding: the caller's buffer is too small
 * Encoders validate everything before writing: on failure the output
 * buffer is untouched.
 */
#ifndef OL_STORE_META_H
#define OL_STORE_META_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- constants ------------------------------------------------------------ */

#define OL_META_MAGIC        "OLOM"
#define OL_META_FORMAT       1u      /* the only format version of this codec */
#define OL_META_HDR_LEN      16u     /* fixed header; the key follows */
#define OL_META_TRAILER_LEN  8u
/* A file may end in zeros up to the next multiple of this, which readers
 * skip: what an O_DIRECT writer writes (engine_put.c "ordered commit"). */
#define OL_META_PAD          4096u
/* The length of n encoded bytes with their padding. */
#define OL_META_PADDED(n)    (((n) + OL_META_PAD - 1) / OL_META_PAD * OL_META_PAD)
/* Bytes of a file without versions whose key is klen bytes. */
#define OL_META_EMPTY_LEN(klen) (OL_META_HDR_LEN + 2u + (klen) + OL_META_TRAILER_LEN)
#define OL_META_DM_LEN       32u     /* a delete marker record */
#define OL_META_OBJ_FIXED    88u     /* fixed part of an object record */
#define OL_META_PART_FIXED   36u     /* a part record without its checksum */
#define OL_META_ID_LEN       16u     /* version id, data dir id */

/*
 * Limits. Decoding rejects anything above them (-EBADMSG), encoding refuses
 * to produce it (-EINVAL per field, -E2BIG per file).
 *
 * OL_META_MAX_KEY: S3's limit on an object key (ol_layout_key_ok checks
 *   the rest: UTF-8, no NUL; this codec only counts bytes).
 * OL_META_MAX_VERSIONS: S3 has no limit; 10000 is MinIO's, and keeps a
 *   lookup by version id (a scan) cheap.
 * OL_META_MAX_PARTS: S3's limit on parts of a multipart upload; part
 *   numbers are 1..10000.
 * OL_META_MAX_HEADER: each stored header value (Content-Type, ...). S3
 *   bounds a request's headers at 8 KiB in all; 2 KiB each admits long
 *   Content-Disposition file names.
 * OL_META_MAX_USER_BYTES: S3's 2 KB of user-defined metadata: the sum of
 *   the bytes of every name (without "x-amz-meta-") and value.
 * OL_META_MAX_TAGGING: the URL-encoded tag set. S3 allows 10 tags, keys of
 *   128 and values of 256 Unicode characters; a character is at most 4
 *   UTF-8 bytes, each percent-encoded as 3: 10 * (128 + 256) * 12 + 19
 *   separators = 46099 bytes, rounded up to 48 KiB.
 * OL_META_MAX_INLINE: inline data of one version.
 * OL_META_MAX_SHARDS: k + m of an erasure set.
 * OL_META_MAX_FILE: the whole file, inline data included. The largest
 *   single version (64 shards, 10000 parts with SHA-256 checksums, every
 *   string and the user metadata full, maximal inline data) is 879,380
 *   bytes; 4 MiB holds four of those, or ~10000 ordinary versions. A store
 *   inlines data only while the file stays small.
 */
#define OL_META_MAX_KEY        1024u
#define OL_META_MAX_VERSIONS   10000u
#define OL_META_MAX_PARTS      10000u
#define OL_META_MAX_HEADER     2048u
#define OL_META_MAX_USER_BYTES 2048u
#define OL_META_MAX_TAGGING    (48u << 10)
#define OL_META_MAX_INLINE     (128u << 10)
#define OL_META_MAX_SHARDS     64u
#define OL_META_MAX_FILE       (4u << 20)

/* Version record types. */
enum ol_meta_type {
    OL_META_OBJECT        = 1,
    OL_META_DELETE_MARKER = 2,
};

/* Version record flags. */
#define OL_META_VF_INLINE  0x01u   /* the record carries inline data */
#define OL_META_VF_FLAT    0x02u   /* one part, its shard file <data dir id>.data in the
                                      object directory: no data directory (not with INLINE) */

/* Storage classes (x-amz-storage-class). Stable numbers. */
enum ol_meta_sc {
    OL_META_SC_STANDARD           = 0,
    OL_META_SC_REDUCED_REDUNDANCY = 1,
};
#define OL_META_SC__COUNT 2

/* Flexible checksum algorithms (x-amz-checksum-*). Stable numbers. */
enum ol_meta_cks {
    OL_META_CKS_NONE      = 0,
    OL_META_CKS_CRC32     = 1,   /* 4 bytes */
    OL_META_CKS_CRC32C    = 2,   /* 4 bytes */
    OL_META_CKS_CRC64NVME = 3,   /* 8 bytes */
    OL_META_CKS_SHA1      = 4,   /* 20 bytes */
    OL_META_CKS_SHA256    = 5,   /* 32 bytes */
};
#define OL_META_CKS__COUNT 6
#define OL_META_CKS_MAX    32u   /* the longest checksum */

/* Checksum flags. */
#define OL_META_CKS_COMPOSITE 0x01u  /* checksum of the parts' checksums, "-N" */
/* S3's FULL_OBJECT type asked for at CreateMultipartUpload: set in an
 * upload record (engine.h), whose Complete combines the parts' CRCs into
 * the whole object's. CRC32, CRC32C or CRC-64/NVME only, no part count.
 * A checksum without either flag is a whole-object one too (a PUT's, a
 * FULL_OBJECT Complete's): objects are written without this bit. */
#define OL_META_CKS_FULL_OBJECT 0x02u

/* The stored HTTP headers, in record order. Stable numbers. */
enum ol_meta_hdr {
    OL_META_HDR_CONTENT_TYPE        = 0,
    OL_META_HDR_CONTENT_ENCODING    = 1,
    OL_META_HDR_CONTENT_DISPOSITION = 2,
    OL_META_HDR_CONTENT_LANGUAGE    = 3,
    OL_META_HDR_CACHE_CONTROL       = 4,
    OL_META_HDR_EXPIRES             = 5,
};
#define OL_META_HDR__COUNT 6

/* Room for a printed ETag: 32 hex digits, "-", 5 digits, NUL. */
#define OL_META_ETAG_STRLEN 39u

/* ---- types ---------------------------------------------------------------- */

/* A slice: of the caller's buffer after decoding; not NUL-terminated. */
struct ol_meta_bytes {
    const uint8_t *p;
    uint32_t len;
};

/* One user metadata pair: name without "x-amz-meta-", and value. */
struct ol_meta_kv {
    struct ol_meta_bytes name, value;
};

/* One part: of a multipart upload, or part 1 of a single PUT. The part's
 * shard file is part.<number> in the version's data dir. */
struct ol_meta_part {
    uint32_t number;               /* 1..10000 */
    uint64_t size;                 /* bytes stored (shard input) */
    uint64_t actual_size;          /* bytes as uploaded */
    uint8_t etag[16];              /* MD5 of the part as uploaded */
    uint8_t cks[OL_META_CKS_MAX];  /* the part's checksum: the version's
                                      algorithm and length; unused bytes 0 */
};

/* Flexible checksum of a version. */
struct ol_meta_checksum {
    uint8_t algo;                  /* enum ol_meta_cks */
    uint8_t flags;                 /* OL_META_CKS_COMPOSITE, _FULL_OBJECT */
    uint16_t parts;                /* composite: N >= 1; else 0 */
    uint8_t sum[OL_META_CKS_MAX];  /* raw bytes as S3 sends them base64-
                                      decoded (CRCs big-endian); first
                                      ol_meta_cks_len(algo) bytes used */
};

/* Erasure layout of a version. */
struct ol_meta_erasure {
    uint8_t k, m;                  /* data, parity shards: 1 <= k, k + m <= 64 */
    uint8_t index;                 /* this drive's shard index, < k + m */
    uint32_t block_size;           /* bytes per shard per stripe, >= 1 */
    uint8_t dist[OL_META_MAX_SHARDS]; /* drive position -> shard index: a
                                         permutation of 0..k+m-1 */
};

/*
 * One version, as the encoder takes it and the decoder fills it.
 *
 * Delete markers use type, vid and mtime_ns only: the encoder ignores the
 * other fields, the decoder zeroes them.
 *
 * User metadata and parts come in one of two forms. Array form (encoder
 * input): user[0..user_count) sorted by name, parts[0..part_count) by
 * number. Encoded form (what the decoder returns, with user and parts
 * NULL): user_enc is the pairs as stored (after the u16 count), parts_enc
 * points at part_count records of OL_META_PART_FIXED + L bytes each. The
 * encoder takes either (not both: -EINVAL), so a decoded version re-encodes
 * as is. Read both forms with ol_meta_user_next / ol_meta_part_at.
 */
struct ol_meta_version {
    uint8_t type;                  /* enum ol_meta_type */
    uint8_t vid[OL_META_ID_LEN];   /* all zero = the null version */
    uint64_t mtime_ns;
    /* objects only */
    uint64_t size;
    uint8_t etag[16];
    uint16_t etag_parts;           /* 0, or the multipart "-N", <= 10000 */
    uint8_t storage_class;         /* enum ol_meta_sc */
    struct ol_meta_checksum cks;
    struct ol_meta_erasure ec;
    uint8_t data_dir[OL_META_ID_LEN];
    struct ol_meta_bytes hdr[OL_META_HDR__COUNT]; /* enum ol_meta_hdr; len 0 = absent */
    struct ol_meta_bytes tagging;  /* URL-encoded tag set; len 0 = none */
    uint16_t user_count;
    const struct ol_meta_kv *user; /* array form */
    struct ol_meta_bytes user_enc; /* encoded form */
    uint16_t part_count;
    const struct ol_meta_part *parts; /* array form */
    const uint8_t *parts_enc;      /* encoded form */
    bool has_inline;               /* inline data present (may be 0 bytes) */
    bool flat;                     /* OL_META_VF_FLAT: the shard file is <data_dir>.data */
    struct ol_meta_bytes inline_data;
    uint64_t inline_sum;           /* OUT: XXH3-64 of inline_data (checked
                                      by the decoder; the encoder computes
                                      it and ignores this field) */
    struct ol_meta_bytes raw;      /* OUT: the whole record as stored */
};

/*
 * Decoder state over one validated file. Public so it lives on the
 * caller's stack; key and count are for reading, the rest is private.
 */
struct ol_meta_file {
    struct ol_meta_bytes key;      /* the object key: a slice of buf */
    uint32_t count;                /* versions in the file */
    const uint8_t *buf;
    uint32_t len;                  /* file bytes */
    uint32_t first;                /* offset of the first record */
    uint32_t off;                  /* iterator: next record */
    uint32_t index;                /* iterator: records returned so far */
};

/* ---- small helpers ---------------------------------------------------------- */

/* Bytes of a checksum of algorithm algo (0 for NONE), or -EINVAL when algo
 * is unknown. */
int ol_meta_cks_len(unsigned algo);

/* The canonical header name ("Content-Type", ...) of enum ol_meta_hdr i, or
 * NULL. Static. */
const char *ol_meta_hdr_name(unsigned i);

/* The same version on two drives: every field a read quorum must agree on
 * (mtime, size, erasure geometry, inline or not, ETag, version id, data
 * dir). */
bool ol_meta_same_version(const struct ol_meta_version *a, const struct ol_meta_version *b);

/* True when vid is the null version id (16 zero bytes). */
bool ol_meta_vid_is_null(const uint8_t vid[OL_META_ID_LEN]);

/*
 * ol_meta_etag_format - the ETag as S3 prints it, without the quotes: 32
 * lower-case hex digits, then "-N" when parts > 0. out gets a NUL-terminated
 * string; cap >= OL_META_ETAG_STRLEN always suffices. Returns its length
 * (32..38) or -ENOSPC.
 */
int ol_meta_etag_format(const uint8_t etag[16], uint16_t parts, char *out, size_t cap);

/*
 * ol_meta_user_next - the next user metadata pair of v, in either form.
 * pos: cursor, 0 to start (an index or a byte offset: opaque). Returns 1
 * and fills *out, or 0 after the last pair. Never reads outside user_enc.
 */
int ol_meta_user_next(const struct ol_meta_version *v, uint32_t *pos, struct ol_meta_kv *out);

/*
 * ol_meta_part_at - part i (0-based) of v, in either form. Returns 0 and
 * fills *out, or -ENOENT when i >= part_count.
 */
int ol_meta_part_at(const struct ol_meta_version *v, unsigned i, struct ol_meta_part *out);

/*
 * ol_meta_part_find - the part numbered number (binary search: numbers
 * ascend). Returns its index and fills *out, or -ENOENT.
 */
int ol_meta_part_find(const struct ol_meta_version *v, uint32_t number, struct ol_meta_part *out);

/* ---- encoding ----------------------------------------------------------------- */

/*
 * ol_meta_version_size - validates v as the encoder does and returns the
 * bytes of its record (>= 32), or -EINVAL. A file of versions v[0..n) is
 * OL_META_EMPTY_LEN(key length) + the sum of their sizes bytes.
 */
int ol_meta_version_size(const struct ol_meta_version *v);

/*
 * ol_meta_encode - writes a whole file for the object key[0..klen) with the
 * n versions versions[0..n) (versions[0] the newest) into out[0..cap). n
 * may be 0 (a file without versions).
 *
 * Returns the file length, or -EINVAL (klen not 1..1024, or a version out
 * of range), -E2BIG (n
 * over OL_META_MAX_VERSIONS, or the file over OL_META_MAX_FILE), -EEXIST
 * (two versions with one id) or -ENOSPC. The encoded forms of user
 * metadata and parts, and inline data, are copied, so versions may point
 * into another file's buffer; out must not overlap anything they point to.
 */
int ol_meta_encode(const char *key, size_t klen, const struct ol_meta_version *const *versions,
                   unsigned n, uint8_t *out, size_t cap);

/* ---- decoding ----------------------------------------------------------------- */

/*
 * ol_meta_open - validates the whole file buf[0..len) and sets up f.
 *
 * len is the file's length: the encoded bytes, or those followed by zeros up
 * to the next multiple of OL_META_PAD (which are then skipped). Checks, in this order: the magic
 * (and 14 bytes at least), len <= OL_META_MAX_FILE, the trailer checksum
 * (-EBADMSG); the format version (-ENOTSUP: magic, version and trailer
 * are the same in every format version, so a corrupt file is -EBADMSG and
 * only an intact file of another version is -ENOTSUP); then every header
 * field, the key length, and every record (lengths, types, flags, reserved fields, limits,
 * orders, inline checksums, distinct version ids) (-EBADMSG).
 *
 * Returns 0, -EBADMSG or -ENOTSUP. Reads nothing outside buf[0..len). On
 * success f->key is the object key (the caller compares it with the key
 * it looked up: a mismatch is a hash collision), the iterators below
 * cannot fail, and every slice they hand out points into buf, which must
 * stay unchanged while f is in use.
 */
int ol_meta_open(const uint8_t *buf, size_t len, struct ol_meta_file *f);

/*
 * ol_meta_next - the next version, newest first. Returns 1 and fills *v,
 * 0 after the last one, or -EBADMSG only when buf changed after open.
 */
int ol_meta_next(struct ol_meta_file *f, struct ol_meta_version *v);

/* ol_meta_rewind - the next ol_meta_next starts again at the newest. */
void ol_meta_rewind(struct ol_meta_file *f);

/*
 * ol_meta_latest - the newest version (an object or a delete marker).
 * Returns 0 and fills *v, -ENOENT when the file has no version, or
 * -EBADMSG only when buf changed after open.
 */
int ol_meta_latest(const struct ol_meta_file *f, struct ol_meta_version *v);

/*
 * ol_meta_find - the version whose id is vid (the null vid finds the null
 * version). Returns its position (0 = the latest) and fills *v, -ENOENT,
 * or -EBADMSG only when buf changed after open. Does not move the
 * iterator.
 */
int ol_meta_find(const struct ol_meta_file *f, const uint8_t vid[OL_META_ID_LEN],
                 struct ol_meta_version *v);

/* ---- rewriting ----------------------------------------------------------------- */

/*
 * Each function below takes the current file old[0..oldlen), checks it as
 * ol_meta_open does, and writes the new file into out[0..cap) (out must not
 * overlap old, nor anything v points to). Versions that do not change are
 * copied byte for byte. Each returns the new file's length, or -EBADMSG /
 * -ENOTSUP (old is not a valid file), -EINVAL (v is not valid), -E2BIG,
 * -ENOSPC, or the function's own errors. cap >= oldlen +
 * ol_meta_version_size(v) always suffices (oldlen for a removal), and
 * OL_META_EMPTY_LEN(klen) + ol_meta_version_size(v) for a new file.
 */

/*
 * ol_meta_put_version - v becomes the latest version of the object
 * key[0..klen). old may be NULL with oldlen 0 (no file yet: a new one is
 * written); else its key must be the same (-EINVAL: the caller compares
 * keys after ol_meta_open, so this is a bug, not a collision to report).
 * A version with v's id is
 * removed when replace is set (S3: a PUT or DELETE in an unversioned or
 * versioning-suspended bucket replaces the null version, wherever it is);
 * without replace it is -EEXIST.
 */
int ol_meta_put_version(const uint8_t *old, size_t oldlen, const char *key, size_t klen,
                        const struct ol_meta_version *v, bool replace, uint8_t *out, size_t cap);

/*
 * ol_meta_update_version - v replaces the version with v's id where it
 * stands (S3: PutObjectTagging on any version; a heal rewriting one drive's
 * record). -ENOENT when no version has that id.
 */
int ol_meta_update_version(const uint8_t *old, size_t oldlen, const struct ol_meta_version *v,
                           uint8_t *out, size_t cap);

/*
 * ol_meta_remove_version - removes the version with id vid (S3: DELETE
 * with a versionId). -ENOENT when there is none. Removing the last version
 * writes a file without versions (OL_META_EMPTY_LEN(klen) bytes, count 0):
 * the store deletes the object instead of writing it.
 */
int ol_meta_remove_version(const uint8_t *old, size_t oldlen, const uint8_t vid[OL_META_ID_LEN],
                           uint8_t *out, size_t cap);

#endif
