/*
 * test_assert.c - base/assert.h: in a test build (OL_ASSERTS) a false
 * OL_ASSERT aborts with file:line, the function and the expression on
 * stderr, and a true one does nothing; in a normal build the expression is
 * not evaluated at all.
 */
#include "olt.h"

#include "base/assert.h"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static int evaluated;

static int touch(int v)
{
    evaluated++;
    return v;
}

OLT_TEST(assert_fires_only_in_test_builds)
{
    OL_ASSERT(touch(1) == 1);
#ifndef OL_ASSERTS
    OLT_CHECK_EQ(evaluated, 0);   /* compiled, never run */
    OL_ASSERT(touch(0) == 1);     /* a false one costs nothing either */
    OLT_CHECK_EQ(evaluated, 0);
#else
    OLT_CHECK_EQ(evaluated, 1);
    char path[512];
    snprintf(path, sizeof path, "%s/stderr", olt_tmpdir());
    pid_t pid = fork();
    OLT_CHECK(pid >= 0);
    if (pid == 0) {
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fd < 0 || dup2(fd, 2) < 0)
            _exit(3);
        signal(SIGABRT, SIG_DFL);
        OL_ASSERT(touch(0) == 1);
        _exit(0);
    }
    int st = 0;
    OLT_CHECK_EQ(waitpid(pid, &st, 0), pid);
    OLT_CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT);
    char buf[512] = {0};
    int fd = open(path, O_RDONLY);
    OLT_CHECK(fd >= 0);
    OLT_CHECK(read(fd, buf, sizeof buf - 1) > 0);
    close(fd);
    OLT_CHECK(strstr(buf, "tests/unit/test_assert.c:") != NULL);
    OLT_CHECK(strstr(buf, ": assert_fires_only_in_test_builds: assertion failed: touch(0) == 1") !=
              NULL);
#endif
}
