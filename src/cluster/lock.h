/*
 * lock.h - the commit locks of the object store across hosts on the node
 * RPC (docs/node-protocol.md "LOCK (4), UNLOCK (5)"): a node asks the owner
 * of a set for the commit lock of a key (or of a bucket, in set 0); the
 * owner grants it from its engine's lock table, with the set's fencing
 * token, or says it is held, or that it does not own the set.
 *
 * Owns: the two payloads' codecs (pure). The owner's handlers and the
 * asking side live with the daemon's store (daemon/cstore.c).
 *
 * LOCK request (24 + path_len bytes, little-endian):
 *   0 u32 pool   4 u32 set   8 u16 path_len (1..255)   10 6 bytes 0
 *   16 u64 ticket (not 0: the asker's name for this call, unique among its
 *   calls)   24 the path
 * LOCK reply (16 bytes):
 *   0 i32 result: 0 granted, -EBUSY held by another, -ESTALE this node does
 *     not own the set   4 u32 lock id (granted; else 0)   8 i64 the token
 * UNLOCK request (24 bytes):
 *   0 u32 pool   4 u32 set   8 u32 lock id, or OL_LOCK_ID_ANY   12 u32 0
 *   16 u64 the ticket of the LOCK that got it
 *   The owner lets the lock go only when this connection holds it under
 *   that ticket. OL_LOCK_ID_ANY: whichever lock the connection holds
 *   under the ticket, if any: an asker whose LOCK call failed (its
 *   deadline passed) sends it, since the owner may have granted the lock
 *   after all, and a grant nobody waits for would keep the key locked for
 *   as long as the connection lives. The connection delivers requests in
 *   order, so the UNLOCK comes after its LOCK.
 * UNLOCK reply (8 bytes): 0 i32 result: 0, -ENOENT (not held on this
 *   connection under that ticket)   4 u32 0
 *
 * Must not: allocate or log.
 */
#ifndef OL_CLUSTER_LOCK_H
#define OL_CLUSTER_LOCK_H

#include <stddef.h>
#include <stdint.h>

#define OL_LOCK_RPC_LOCK   4u
#define OL_LOCK_RPC_UNLOCK 5u
#define OL_LOCK_HDR_LEN    24u
#define OL_LOCK_ID_ANY     0xffffffffu
#define OL_LOCK_REPLY_LEN  16u
#define OL_LOCK_PATH_MAX   255u

struct ol_lock_msg {
    uint32_t pool, set;
    uint32_t id;               /* UNLOCK */
    uint64_t ticket;           /* not 0 */
    const char *path;          /* LOCK: not NUL-terminated */
    uint16_t path_len;
};

/* LOCK's header into b (the path follows it); UNLOCK's whole payload. */
void ol_lock_encode(const struct ol_lock_msg *m, uint8_t b[OL_LOCK_HDR_LEN]);
void ol_unlock_encode(const struct ol_lock_msg *m, uint8_t b[OL_LOCK_HDR_LEN]);
/* 0, or -EINVAL: not the table's length, a reserved byte not 0, a ticket
 * of 0, a path that breaks the drive's rules (cluster/drive.h
 * ol_drv_path_ok). */
int ol_lock_decode(const uint8_t *b, size_t len, struct ol_lock_msg *m);
int ol_unlock_decode(const uint8_t *b, size_t len, struct ol_lock_msg *m);

#endif
