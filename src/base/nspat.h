/*
 * nspat.h - namespace patterns: which KV namespaces a [[kv_tenants]] entry
 * claims (docs/configuration.md, "KV tenants").
 *
 * Owns: the pattern syntax and the two questions asked of patterns. A
 * pattern is 1 to 256 bytes with no control byte (below 0x20, or 0x7f), and
 * is either
 *
 *   an exact namespace   team-a/llama    matches that namespace only, or
 *   a prefix, then '*'   team-a/ + '*'   matches every namespace that starts
 *                                        with "team-a/" ('*' alone: every one)
 *
 * A '*' anywhere but at the end is invalid: namespaces are opaque bytes, so
 * a pattern means one thing only (a namespace that ends in '*' is claimed
 * through a prefix).
 *
 * Standalone: no other module of the project is included.
 */
#ifndef OL_BASE_NSPAT_H
#define OL_BASE_NSPAT_H

#include <stdbool.h>
#include <stddef.h>

#define OL_NSPAT_MAX 256   /* bytes of a pattern, and of a namespace */

/* 0 when pat (NUL-terminated) is a valid pattern, else -1. */
int ol_nspat_check(const char *pat);

/* Whether namespace ns[0, len) matches the valid pattern pat. */
bool ol_nspat_match(const char *pat, const void *ns, size_t len);

/* Whether some namespace matches both valid patterns a and b. */
bool ol_nspat_overlap(const char *a, const char *b);

#endif
