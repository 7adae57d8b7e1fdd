/*
 * assert.c - see assert.h. Only test builds (OL_ASSERTS) have a body.
 */
#include "base/assert.h"

#ifdef OL_ASSERTS

#include <stdio.h>
#include <stdlib.h>

void ol_assert_fail(const char *file, int line, const char *func, const char *expr)
{
    fprintf(stderr, "%s:%d: %s: assertion failed: %s\n", file, line, func, expr);
    fflush(stderr);
    abort();
}

#endif
