/*
 * creds.h - the S3 credentials a daemon accepts.
 *
 * Owns: the credential set (from [[credentials]], OPENLAKE_ACCESS_KEY /
 * OPENLAKE_SECRET_KEY or the access_key / secret_key flags, as merged by the
 * config), and, when none is configured, the generated pair kept in
 * <data dir>/s3.credentials (mode 0600; created on the first start with
 * getrandom, written to a temporary file, fsynced, renamed, the directory
 * fsynced). There is no built-in default credential.
 *
 * File format (text, two lines plus comments):
 *   # comment lines
 *   access_key = "<20 characters A-Z 0-9>"
 *   secret_key = "<40 characters A-Z a-z 0-9 + />"
 *
 * Must not: be used on a loop thread (blocking file I/O at start-up only).
 */
#ifndef OL_S3_CREDS_H
#define OL_S3_CREDS_H

#include <stdbool.h>

#include "base/config.h"
#include "s3/auth.h"

#define OL_S3_CREDS_FILE "s3.credentials"

struct ol_s3_credset {
    int n;
    char access_key[OL_CONFIG_MAX_CREDENTIALS][OL_CONFIG_KEY_LEN];
    char secret[OL_CONFIG_MAX_CREDENTIALS][OL_CONFIG_KEY_LEN];
    const char *ak_ptr[OL_CONFIG_MAX_CREDENTIALS];
    const char *sk_ptr[OL_CONFIG_MAX_CREDENTIALS];
    struct ol_s3_creds view;      /* what ol_s3_authenticate takes */
    bool generated;               /* created by this start: print it once */
    char path[OL_CONFIG_PATH_LEN + 32]; /* the file, when one is used */
};

/*
 * ol_s3_creds_load - the configured credentials, or those of
 * <dir>/s3.credentials, or a new generated pair stored there. Returns 0, or
 * -errno with a message in err (an unreadable file, a file not mode 0600, a
 * malformed file: each says how to fix it).
 */
int ol_s3_creds_load(const struct ol_config *cfg, const char *dir, struct ol_s3_credset *out,
                     char *err, size_t errlen);

#endif
