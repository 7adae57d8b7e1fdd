/*
 * runner.c - runs the tests registered by OLT_TEST (see olt.h).
 *
 *   unit_tests [-t SECONDS] [-r RESULTS_FILE] [SUBSTRING...]
 *
 * Each test runs in a forked child with alarm(timeout) (default 60 s,
 * OLT_TIMEOUT overrides). Exit status 0 = pass, 77 = skip (reason sent over
 * a pipe), anything else or a signal = fail. Prints one line per test and a
 * closing "unit: N passed, N failed, N skipped". With -r, appends
 * "PASS|FAIL|SKIP name reason" lines to RESULTS_FILE for scripts/test.sh.
 */
#include "olt.h"

#include <errno.h>
#include <ftw.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define OLT_MAX 4096

struct olt_case {
    const char *name, *file;
    olt_fn fn;
    int timeout_s;
};

static struct olt_case olt_cases[OLT_MAX];
static int olt_ncases;
static int olt_msg_fd = -1;
static char olt_dir[256];

void olt_register(const char *name, const char *file, olt_fn fn, int timeout_s)
{
    if (olt_ncases == OLT_MAX) {
        fprintf(stderr, "olt: more than %d tests\n", OLT_MAX);
        abort();
    }
    olt_cases[olt_ncases++] = (struct olt_case){name, file, fn, timeout_s};
}

static void olt_send(const char *s)
{
    if (olt_msg_fd >= 0) {
        ssize_t n = write(olt_msg_fd, s, strlen(s));
        (void)n;
    }
}

void olt_fail(const char *file, int line, const char *fmt, ...)
{
    char msg[1024];
    int n = snprintf(msg, sizeof msg, "%s:%d: ", file, line);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg + n, sizeof msg - (size_t)n, fmt, ap);
    va_end(ap);
    olt_send(msg);
    fflush(NULL);
    _exit(1);
}

void olt_skip(const char *reason)
{
    olt_send(reason);
    fflush(NULL);
    _exit(77);
}

const char *olt_tmpdir(void)
{
    if (!olt_dir[0]) {
        const char *base = getenv("TMPDIR");
        snprintf(olt_dir, sizeof olt_dir, "%s/olt-XXXXXX", base ? base : "/tmp");
        if (!mkdtemp(olt_dir))
            olt_fail(__FILE__, __LINE__, "mkdtemp: %s", strerror(errno));
    }
    return olt_dir;
}

static int olt_rm(const char *p, const struct stat *st, int flag, struct FTW *f)
{
    (void)st; (void)flag; (void)f;
    return remove(p);
}

static int olt_match(const char *name, int argc, char **argv, int first)
{
    if (first >= argc)
        return 1;
    for (int i = first; i < argc; i++)
        if (strstr(name, argv[i]))
            return 1;
    return 0;
}

int main(int argc, char **argv)
{
    int timeout = 60, opt;
    const char *results = NULL;
    if (getenv("OLT_TIMEOUT"))
        timeout = atoi(getenv("OLT_TIMEOUT"));
    while ((opt = getopt(argc, argv, "t:r:")) != -1) {
        if (opt == 't') timeout = atoi(optarg);
        else if (opt == 'r') results = optarg;
        else {
            fprintf(stderr, "usage: %s [-t SECONDS] [-r FILE] [SUBSTRING...]\n", argv[0]);
            return 2;
        }
    }
    FILE *rf = results ? fopen(results, "a") : NULL;
    int pass = 0, fail = 0, skip = 0;
    signal(SIGPIPE, SIG_IGN);
    for (int i = 0; i < olt_ncases; i++) {
        struct olt_case *c = &olt_cases[i];
        if (!olt_match(c->name, argc, argv, optind))
            continue;
        int p[2];
        if (pipe(p) != 0) { perror("pipe"); return 2; }
        fflush(NULL);
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        pid_t pid = fork();
        if (pid == 0) {
            close(p[0]);
            olt_msg_fd = p[1];
            alarm((unsigned)(c->timeout_s ? c->timeout_s : timeout));
            c->fn();
            if (olt_dir[0])
                nftw(olt_dir, olt_rm, 16, FTW_DEPTH | FTW_PHYS);
            fflush(NULL);
            _exit(0);
        }
        close(p[1]);
        char msg[1024] = "";
        size_t got = 0;
        ssize_t n;
        while (got < sizeof msg - 1 && (n = read(p[0], msg + got, sizeof msg - 1 - got)) > 0)
            got += (size_t)n;
        msg[got] = 0;
        close(p[0]);
        int st;
        while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {}
        clock_gettime(CLOCK_MONOTONIC, &t1);
        double ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
        const char *verdict;
        if (WIFEXITED(st) && WEXITSTATUS(st) == 0) {
            verdict = "PASS"; pass++;
        } else if (WIFEXITED(st) && WEXITSTATUS(st) == 77) {
            verdict = "SKIP"; skip++;
        } else {
            verdict = "FAIL"; fail++;
            if (!msg[0]) {
                if (WIFSIGNALED(st) && WTERMSIG(st) == SIGALRM)
                    snprintf(msg, sizeof msg, "timed out");
                else if (WIFSIGNALED(st))
                    snprintf(msg, sizeof msg, "killed by signal %d", WTERMSIG(st));
                else
                    snprintf(msg, sizeof msg, "exit status %d", WEXITSTATUS(st));
            }
        }
        printf("%s %-48s %8.1f ms%s%s\n", verdict, c->name, ms, msg[0] ? "  " : "", msg);
        if (rf)
            fprintf(rf, "%s unit:%s %s\n", verdict, c->name, msg);
    }
    if (rf)
        fclose(rf);
    printf("unit: %d passed, %d failed, %d skipped\n", pass, fail, skip);
    return fail ? 1 : 0;
}
