/*
 * olt.h - the one C unit-test harness of OpenLake.
 *
 * A test is a function declared with OLT_TEST(name) in any .c file under tests/unit/;
 * it registers itself at load time. tests/unit/runner.c runs each test
 * in its own forked child under a timeout, so a crash, hang or sanitizer
 * report in one test fails that test only.
 *
 *   OLT_TEST(toml_parses_tables) {
 *       OLT_CHECK(x == 1);                 fail unless true
 *       OLT_CHECK_EQ(a, b);                integers, prints both on failure
 *       OLT_CHECK_STR(s, "want");          C strings
 *       OLT_SKIP("no io_uring here");      skip with a reason
 *   }
 *
 * A failed check ends the test at once (the child exits). Tests may use
 * olt_tmpdir() for a private temporary directory removed after the test.
 */
#ifndef OLT_H
#define OLT_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>

typedef void (*olt_fn)(void);

void olt_register(const char *name, const char *file, olt_fn fn, int timeout_s);
void olt_fail(const char *file, int line, const char *fmt, ...)
    __attribute__((noreturn, format(printf, 3, 4)));
void olt_skip(const char *reason) __attribute__((noreturn));
/* A fresh directory for this test; removed (recursively) when it ends. */
const char *olt_tmpdir(void);

#define OLT_TEST_T(name, timeout_s)                                          \
    static void name(void);                                                  \
    __attribute__((constructor)) static void olt_reg_##name(void) {          \
        olt_register(#name, __FILE__, name, timeout_s);                      \
    }                                                                        \
    static void name(void)
#define OLT_TEST(name) OLT_TEST_T(name, 0)

#define OLT_CHECK(c)                                                         \
    do { if (!(c)) olt_fail(__FILE__, __LINE__, "check failed: %s", #c); }  \
    while (0)
#define OLT_CHECK_EQ(a, b)                                                   \
    do {                                                                     \
        long long olt_a_ = (long long)(a), olt_b_ = (long long)(b);          \
        if (olt_a_ != olt_b_)                                                \
            olt_fail(__FILE__, __LINE__, "%s == %s: %lld != %lld", #a, #b,   \
                     olt_a_, olt_b_);                                        \
    } while (0)
#define OLT_CHECK_STR(a, b)                                                  \
    do {                                                                     \
        const char *olt_a_ = (a), *olt_b_ = (b);                             \
        if (!olt_a_ || !olt_b_ || strcmp(olt_a_, olt_b_) != 0)               \
            olt_fail(__FILE__, __LINE__, "%s == %s: \"%s\" != \"%s\"", #a,   \
                     #b, olt_a_ ? olt_a_ : "(null)",                         \
                     olt_b_ ? olt_b_ : "(null)");                            \
    } while (0)
#define OLT_CHECK_MEM(a, b, n)                                               \
    do {                                                                     \
        if (memcmp((a), (b), (n)) != 0)                                      \
            olt_fail(__FILE__, __LINE__, "memcmp(%s, %s, %s) != 0", #a, #b,  \
                     #n);                                                    \
    } while (0)
#define OLT_SKIP(reason) olt_skip(reason)

#endif
