/*
 * lock.c - the LOCK and UNLOCK payloads (lock.h).
 */
#include "cluster/lock.h"

#include "base/le.h"
#include "cluster/drive.h"

#include <errno.h>
#include <string.h>

void ol_lock_encode(const struct ol_lock_msg *m, uint8_t b[OL_LOCK_HDR_LEN])
{
    memset(b, 0, OL_LOCK_HDR_LEN);
    ol_le_st32(b, m->pool);
    ol_le_st32(b + 4, m->set);
    ol_le_st16(b + 8, m->path_len);
    ol_le_st64(b + 16, m->ticket);
}

void ol_unlock_encode(const struct ol_lock_msg *m, uint8_t b[OL_LOCK_HDR_LEN])
{
    memset(b, 0, OL_LOCK_HDR_LEN);
    ol_le_st32(b, m->pool);
    ol_le_st32(b + 4, m->set);
    ol_le_st32(b + 8, m->id);
    ol_le_st64(b + 16, m->ticket);
}

int ol_lock_decode(const uint8_t *b, size_t len, struct ol_lock_msg *m)
{
    if (len < OL_LOCK_HDR_LEN)
        return -EINVAL;
    memset(m, 0, sizeof *m);
    m->pool = ol_le_ld32(b);
    m->set = ol_le_ld32(b + 4);
    m->path_len = ol_le_ld16(b + 8);
    m->ticket = ol_le_ld64(b + 16);
    for (int i = 10; i < 16; i++)
        if (b[i])
            return -EINVAL;
    if (!m->ticket)
        return -EINVAL;
    if (len != OL_LOCK_HDR_LEN + (size_t)m->path_len || m->path_len > OL_LOCK_PATH_MAX)
        return -EINVAL;
    m->path = (const char *)b + OL_LOCK_HDR_LEN;
    return ol_drv_path_ok(m->path, m->path_len) ? 0 : -EINVAL;
}

int ol_unlock_decode(const uint8_t *b, size_t len, struct ol_lock_msg *m)
{
    if (len != OL_LOCK_HDR_LEN || ol_le_ld32(b + 12))
        return -EINVAL;
    memset(m, 0, sizeof *m);
    m->pool = ol_le_ld32(b);
    m->set = ol_le_ld32(b + 4);
    m->id = ol_le_ld32(b + 8);
    m->ticket = ol_le_ld64(b + 16);
    return m->ticket ? 0 : -EINVAL;
}
