/*
 * log.h - one-line log records to stderr.
 *
 * Owns: the process-wide log level and the line format
 *   2026-11-29T15:21:45.123Z INFO  [core 0] message
 * Must not: allocate, or block on anything but the write(2) of one line.
 * Safe from any thread; each record is written with a single write(2).
 */
#ifndef OL_LOG_H
#define OL_LOG_H

#include <stdarg.h>
#include <stdint.h>

enum ol_log_level { OL_LOG_DEBUG, OL_LOG_INFO, OL_LOG_WARN, OL_LOG_ERROR };

/* Sets the minimum level written. Returns 0, or -1 for an unknown name. */
int ol_log_set_level_name(const char *name);
void ol_log_set_level(enum ol_log_level lvl);
int ol_log_enabled(enum ol_log_level lvl);
/* Core id printed in records from this thread (-1: none). */
void ol_log_set_core(int core);
void ol_log(enum ol_log_level lvl, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* A warning at most once per every_ms: none when the last one through
 * *last_ms (0: none yet) went out less than every_ms before now_ms (the
 * caller's clock); else written and *last_ms = now_ms. For what a peer or
 * a stranger can repeat at will (the caller owns *last_ms). */
void ol_warn_limited(uint64_t *last_ms, uint64_t now_ms, uint64_t every_ms, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
void ol_vwarn_limited(uint64_t *last_ms, uint64_t now_ms, uint64_t every_ms, const char *fmt,
                      va_list ap) __attribute__((format(printf, 4, 0)));

#define ol_debug(...) do { if (ol_log_enabled(OL_LOG_DEBUG)) ol_log(OL_LOG_DEBUG, __VA_ARGS__); } while (0)
#define ol_info(...)  ol_log(OL_LOG_INFO, __VA_ARGS__)
#define ol_warn(...)  ol_log(OL_LOG_WARN, __VA_ARGS__)
#define ol_error(...) ol_log(OL_LOG_ERROR, __VA_ARGS__)

#endif
