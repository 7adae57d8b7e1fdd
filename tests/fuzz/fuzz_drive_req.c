/*
 * fuzz_drive_req.c - libFuzzer target for the DRIVE payload codec
 * (src/cluster/drive.c, docs/node-protocol.md "DRIVE (3)").
 *
 * The input is one payload, decoded from an allocation of exactly its
 * bytes (ASan catches a read past it). Aborts when the drive.h contract
 * breaks: a return other than 0 or -EINVAL; a payload that decoded whose
 * header does not re-encode to its first 48 bytes, or whose path, second
 * path and data do not lie back to back after it and fill it; a decoded
 * step outside 1..OL_DRV_STEP_MAX; a path accepted that ol_drv_path_ok
 * refuses (or that holds a ".." component, a NUL or a leading '/'); a
 * WRITE without data or over OL_DRV_IO_MAX; data on any other step; OPEN
 * flags outside OL_DRV_O_ALL; a mode over 0777; a negative token, or a FENCE
 * without one.
 */
#include "cluster/drive.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define REQUIRE(c) do { if (!(c)) abort(); } while (0)

static void check_path(const char *p, size_t n)
{
    REQUIRE(n >= 1 && n <= OL_DRV_PATH_MAX && ol_drv_path_ok(p, n));
    REQUIRE(p[0] != '/' && memchr(p, 0, n) == NULL);
    for (size_t i = 0; i + 1 < n; i++)
        if (p[i] == '.' && p[i + 1] == '.')
            REQUIRE(!((i == 0 || p[i - 1] == '/') && (i + 2 == n || p[i + 2] == '/')));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t *b = malloc(size ? size : 1);
    if (!b)
        return 0;
    if (size)
        memcpy(b, data, size);
    struct ol_drv_req q;
    int rc = ol_drv_req_decode(b, size, &q);
    REQUIRE(rc == 0 || rc == -EINVAL);
    if (rc == 0) {
        REQUIRE(size >= OL_DRV_HDR_LEN);
        REQUIRE(q.step >= 1 && q.step <= OL_DRV_STEP_MAX);
        uint8_t h[OL_DRV_HDR_LEN];
        ol_drv_req_encode(&q, h);
        REQUIRE(memcmp(h, b, OL_DRV_HDR_LEN) == 0);
        REQUIRE((const uint8_t *)q.path == b + OL_DRV_HDR_LEN);
        REQUIRE(q.path2 == q.path + q.path_len);
        REQUIRE(q.data == (const uint8_t *)q.path2 + q.path2_len);
        REQUIRE(OL_DRV_HDR_LEN + (size_t)q.path_len + q.path2_len + q.data_len == size);
        if (q.path_len)
            check_path(q.path, q.path_len);
        if (q.path2_len)
            check_path(q.path2, q.path2_len);
        REQUIRE(q.step == OL_DRV_WRITE ? q.data_len >= 1 && q.data_len <= OL_DRV_IO_MAX
                                       : q.data_len == 0);
        REQUIRE(q.mode <= 0777);
        if (q.step == OL_DRV_OPEN)
            REQUIRE((q.arg & ~OL_DRV_O_ALL) == 0 && q.path_len > 0);
        if (q.step == OL_DRV_READ)
            REQUIRE(q.arg >= 1 && q.arg <= OL_DRV_IO_MAX);
        REQUIRE(q.token >= 0 && (q.step != OL_DRV_FENCE || q.token > 0));
    }
    free(b);
    return 0;
}
