/*
 * pingpong.c - the floor under any Unix-socket round trip on this machine:
 * two processes bouncing a 600-byte message (the size of a 32-key frame)
 * over a socketpair, the server pinned to SERVER_CPU, the client to
 * CLIENT_CPU. Prints {"p50_us":..,"p99_us":..,"p999_us":..}.
 *
 *   pingpong SERVER_CPU CLIENT_CPU [ROUNDS]
 */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void pin(int cpu)
{
    cpu_set_t s;
    CPU_ZERO(&s);
    CPU_SET(cpu, &s);
    sched_setaffinity(0, sizeof s, &s);
}

int main(int argc, char **argv)
{
    if (argc < 3)
        return 2;
    int n = argc > 3 ? atoi(argv[3]) : 20000;
    int sv[2];
    char b[600] = {0};
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) < 0)
        return 1;
    pid_t pid = fork();
    if (pid == 0) {
        pin(atoi(argv[1]));
        close(sv[0]);
        while (read(sv[1], b, sizeof b) > 0)
            if (write(sv[1], b, sizeof b) != (ssize_t)sizeof b)
                break;
        _exit(0);
    }
    close(sv[1]);
    pin(atoi(argv[2]));
    double *v = malloc((size_t)n * sizeof *v);
    for (int i = 0; i < n; i++) {
        double t0 = now();
        if (write(sv[0], b, sizeof b) != (ssize_t)sizeof b)
            return 1;
        size_t got = 0;
        while (got < sizeof b) {
            ssize_t r = read(sv[0], b + got, sizeof b - got);
            if (r <= 0)
                return 1;
            got += (size_t)r;
        }
        v[i] = now() - t0;
    }
    close(sv[0]);
    waitpid(pid, NULL, 0);
    qsort(v, (size_t)n, sizeof *v, cmp);
    printf("{\"p50_us\":%.1f,\"p99_us\":%.1f,\"p999_us\":%.1f}\n", v[n / 2] * 1e6,
           v[n * 99 / 100] * 1e6, v[n * 999 / 1000] * 1e6);
    return 0;
}
