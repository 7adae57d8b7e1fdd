/*
 * log.c - see log.h. Formats into a stack buffer, then one write(2).
 */
#include "base/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

static enum ol_log_level ol_log_min = OL_LOG_INFO;
static _Thread_local int ol_log_core = -1;
static const char *const ol_log_names[] = {"DEBUG", "INFO", "WARN", "ERROR"};

void ol_log_set_level(enum ol_log_level lvl) { ol_log_min = lvl; }
int ol_log_enabled(enum ol_log_level lvl) { return lvl >= ol_log_min; }
void ol_log_set_core(int core) { ol_log_core = core; }

int ol_log_set_level_name(const char *name)
{
    for (int i = 0; i <= OL_LOG_ERROR; i++)
        if (strcasecmp(name, ol_log_names[i]) == 0 ||
            (i == OL_LOG_WARN && strcasecmp(name, "warning") == 0)) {
            ol_log_min = (enum ol_log_level)i;
            return 0;
        }
    return -1;
}

void ol_log(enum ol_log_level lvl, const char *fmt, ...)
{
    if (lvl < ol_log_min)
        return;
    char line[2048];
    struct timespec ts;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    int n = (int)strftime(line, sizeof line, "%Y-%m-%dT%H:%M:%S", &tm);
    n += snprintf(line + n, sizeof line - (size_t)n, ".%03ldZ %-5s ",
                  ts.tv_nsec / 1000000, ol_log_names[lvl]);
    if (ol_log_core >= 0)
        n += snprintf(line + n, sizeof line - (size_t)n, "[core %d] ", ol_log_core);
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
    va_end(ap);
    if (m < 0)
        m = 0;
    n += m;
    if (n > (int)sizeof line - 2)
        n = (int)sizeof line - 2;
    line[n++] = '\n';
    ssize_t w = write(STDERR_FILENO, line, (size_t)n);
    (void)w;
}

void ol_vwarn_limited(uint64_t *last_ms, uint64_t now_ms, uint64_t every_ms, const char *fmt,
                      va_list ap)
{
    if (*last_ms && now_ms - *last_ms < every_ms)
        return;
    *last_ms = now_ms;
    char msg[512];
    vsnprintf(msg, sizeof msg, fmt, ap);
    ol_log(OL_LOG_WARN, "%s", msg);
}

void ol_warn_limited(uint64_t *last_ms, uint64_t now_ms, uint64_t every_ms, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    ol_vwarn_limited(last_ms, now_ms, every_ms, fmt, ap);
    va_end(ap);
}
