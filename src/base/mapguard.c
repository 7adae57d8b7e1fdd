/*
 * mapguard.c - the SIGBUS guard for reads of file mappings (mapguard.h).
 *
 * One guard per thread (initial-exec TLS: safe to read in a handler). The
 * handler jumps back into ol_mapguard_run when the fault is inside the
 * guarded range; otherwise it puts back the disposition it replaced and
 * returns, so the faulting instruction runs again and faults into that one.
 * SA_NODEFER keeps SIGBUS unblocked after the jump (sigsetjmp does not save
 * the mask: no system call per guarded call).
 */
#include "base/mapguard.h"

#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>

struct guard {
    sigjmp_buf jb;
    uintptr_t lo;
    size_t len;
};

static __thread struct guard *volatile cur_guard;
static struct sigaction prev_act;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static int init_rc;

static void on_sigbus(int sig, siginfo_t *si, void *uc)
{
    struct guard *g = cur_guard;
    if (g && (uintptr_t)si->si_addr - g->lo < g->len) {
        cur_guard = NULL;
        siglongjmp(g->jb, 1);
    }
    /* Not ours: the disposition from before, met when the fault repeats. */
    (void)sig;
    (void)uc;
    sigaction(SIGBUS, &prev_act, NULL);
}

static void install(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_sigbus;
    sa.sa_flags = SA_SIGINFO | SA_NODEFER | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    init_rc = sigaction(SIGBUS, &sa, &prev_act) < 0 ? -errno : 0;
}

int ol_mapguard_init(void)
{
    pthread_once(&once, install);
    return init_rc;
}

int ol_mapguard_run(const void *lo, size_t len, int (*fn)(void *arg), void *arg)
{
    struct guard g;
    g.lo = (uintptr_t)lo;
    g.len = len;
    if (sigsetjmp(g.jb, 0)) {
        cur_guard = NULL;
        return -EFAULT;
    }
    cur_guard = &g;
    int rc = fn(arg);
    cur_guard = NULL;
    return rc;
}
