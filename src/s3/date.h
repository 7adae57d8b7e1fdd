/*
 * date.h - the dates of the S3 API, in UTC: HTTP dates (RFC 1123, as in
 * Last-Modified and the If-Modified-Since family) and the ISO 8601 dates
 * of XML documents (LastModified, CreationDate, Initiated).
 *
 * Owns: formatting and parsing them. Must not: know requests, headers or
 * the store, or allocate; it uses libc only, so it is tested alone.
 */
#ifndef OL_S3_DATE_H
#define OL_S3_DATE_H

#include <stddef.h>
#include <stdint.h>

/* "Sun, 06 Dec 2026 07:16:09 GMT" of sec (seconds since the epoch),
 * NUL-terminated in out[40]. */
void ol_s3_http_date(int64_t sec, char out[40]);

/* "2026-12-06T07:16:09.000Z" of sec (whole seconds: S3 writes .000 for
 * the dates it keeps to the second), NUL-terminated in out[40]. */
void ol_s3_iso_date(int64_t sec, char out[40]);

/* "2026-12-06T07:16:09.798Z" of ns (nanoseconds since the epoch, written
 * to the millisecond: listings' LastModified), NUL-terminated in out[80]. */
void ol_s3_iso_date_ms(uint64_t ns, char out[80]);

/* An HTTP date (RFC 1123, the form clients send) s[0..n) as seconds since
 * the epoch; -1 when it is not one (another form, trailing bytes, or
 * longer than 63 bytes). */
int64_t ol_s3_parse_http_date(const char *s, size_t n);

#endif
