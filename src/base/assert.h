/*
 * assert.h - OL_ASSERT(cond): the invariants a header states, checked where
 * they are relied on, in test builds.
 *
 * With OL_ASSERTS defined (the ASan build: Makefile DEFS, which `make test`
 * runs the unit and integration tests under) a false cond prints one line,
 *   src/kv/shard.c:412: ol_unpin: assertion failed: e->pins >= n
 * to stderr and aborts. Without it (the normal build) cond is not
 * evaluated and costs nothing, but it is still compiled (inside sizeof), so
 * an assert cannot rot in a build that never runs it. cond must therefore
 * have no side effects, and may sit on hot paths.
 *
 * Use it for what the code promises itself (counts that never go below
 * zero, states within their enum, an op in flight when its completion
 * comes); never for what a caller, a file or the network may get wrong:
 * those are errors with their own returns. Standalone: libc only.
 */
#ifndef OL_BASE_ASSERT_H
#define OL_BASE_ASSERT_H

#ifdef OL_ASSERTS

/* Prints file:line: func: assertion failed: expr, and aborts. */
void ol_assert_fail(const char *file, int line, const char *func, const char *expr)
    __attribute__((noreturn, cold));

#define OL_ASSERT(cond)                                                                        \
    (__builtin_expect(!!(cond), 1) ? (void)0 : ol_assert_fail(__FILE__, __LINE__, __func__, #cond))

#else

#define OL_ASSERT(cond) ((void)sizeof(!(cond)))

#endif

#endif
