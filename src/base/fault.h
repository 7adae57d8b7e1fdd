/*
 * fault.h - fault injection at I/O completions, by class, for test builds.
 *
 * A rule rewrites the result of a completed operation before the module
 * that issued it sees it: -EIO, -ENOSPC, -EDQUOT, or a short count (half
 * the bytes of a read or write), once (transient) or from then on
 * (persistent), on the Nth matching operation or at random with a seed.
 * Each module applies it at the one place where a completion's result
 * reaches its state machine (store: engine.c ol_se_on_op, so every drive
 * op of every request kind, barriers included; KV disk tier: disk.c
 * ol_on_io; the KV pool's remote reads: kvpool.c, each get of a granted
 * value or of its slot header, op read, drive 0), so a test can fail one fsync on one drive after a rename on
 * another, and no power cut is needed to reach that code. SQLite's
 * FAULTSIM and MinIO's wrapped test disks are the models.
 *
 * Compiled only where OL_FAULTS is defined (the ASan build, Makefile):
 * elsewhere OL_FAULT() is its result argument and nothing of this module
 * exists, so a release binary has no such surface and no cost.
 *
 * The operation already ran when its result is rewritten: an injected
 * error after a write, rename, mkdir or unlink that took effect is what a
 * caller must assume of any real error (the state is unknown). An open
 * that succeeded and is turned into an error has its descriptor closed
 * here, so nothing leaks. Short counts apply to reads and writes of at
 * least two bytes only (a short count is 1..res-1: a read of a regular
 * file gives 0 only at its end, so an injected 0 would be a false end of
 * file, which no real short read is); a rule with err=short matches no
 * other operation.
 *
 * ---- spec grammar (OPENLAKE_FAULTS, POST /_openlake/debug/faults) ----------
 *
 *   spec   = rule *( ";" rule )                 at most OL_FAULT_MAX_RULES
 *   rule   = module ":" field *( "," field )    (an empty spec: no rules)
 *   module = "store" | "kvdisk" | "rma"
 *   field  = "drive=" ( N | "any" )   store: configured drive 0..n-1 (the
 *                                     order of data_dirs); kvdisk: the shard
 *                                     (core) index. Default any
 *          | "op=" kind               default any
 *          | "nth=" N                 N >= 1: the Nth matching operation
 *                                     (counted per rule). Default 1
 *          | "p=" F                   0 < F <= 1: from the nth on, each
 *                                     matching operation fails with chance F
 *          | "seed=" N                of the rule's generator (p). Default 1
 *          | "err=" ( "EIO" | "ENOSPC" | "EDQUOT" | "short" | "delay" )
 *                                     default EIO. delay: the result is kept,
 *                                     but the thread that completes the
 *                                     operation first sleeps ms (a slow step
 *                                     as its caller sees it; on an event
 *                                     loop, everything else of that loop
 *                                     waits too)
 *          | "ms=" N                  delay's length, 1..60000. Default 1000
 *          | "persist"                every match from the nth on fails
 *                                     (with p: each with chance F)
 *          | "once"                   one failure, then the rule is spent
 *                                     (the default)
 *   kind   = "read" | "write" | "fsync" (fsync, fdatasync and the store's
 *            group-commit barriers) | "open" | "close" | "rename" |
 *            "unlink" (of files and directories) | "mkdir" | "statx" |
 *            "fallocate" | "any"
 *
 * Example: "store:drive=1,op=fsync,nth=3,err=EIO,persist;kvdisk:op=write,nth=5,err=ENOSPC"
 * fails drive 1's third fsync and all after it, and the KV disk tier's
 * fifth write on any shard, once. Spaces around tokens are ignored.
 *
 * Thread rules: every function may be called from any thread. Rules are
 * replaced as a whole under a mutex; ol_fault_apply takes it only while
 * rules exist (an atomic count says so), and counts in atomics.
 */
#ifndef OL_BASE_FAULT_H
#define OL_BASE_FAULT_H

#include <stddef.h>
#include <stdint.h>

/* The environment variable the daemon reads its initial rules from (not a
 * config key: base/config.c leaves it alone). */
#define OL_FAULT_ENV "OPENLAKE_FAULTS"
#define OL_FAULT_MAX_RULES 16u

enum ol_fault_mod { OL_FAULT_STORE = 0, OL_FAULT_KVDISK, OL_FAULT_RMA, OL_FAULT_NMOD };

enum ol_fault_op {
    OL_FAULT_OP_NONE = 0,  /* not an I/O kind the rules know: never rewritten */
    OL_FAULT_OP_READ,
    OL_FAULT_OP_WRITE,
    OL_FAULT_OP_FSYNC,
    OL_FAULT_OP_OPEN,
    OL_FAULT_OP_CLOSE,
    OL_FAULT_OP_RENAME,
    OL_FAULT_OP_UNLINK,
    OL_FAULT_OP_MKDIR,
    OL_FAULT_OP_STATX,
    OL_FAULT_OP_FALLOCATE,
    OL_FAULT_NOPS
};

#ifdef OL_FAULTS

/*
 * The result res (>= 0 or -errno) of a completed operation of kind op on
 * drive `drive` of module mod, rewritten by the first rule that matches
 * and fires, else res unchanged. A rule matches an op of its module, drive
 * and kind (short: reads and writes with res >= 2 only); each match counts
 * towards nth. Closes the descriptor of an open it turns into an error.
 */
int ol_fault_apply(enum ol_fault_mod mod, enum ol_fault_op op, unsigned drive, int res);

/*
 * Replaces every rule by those of spec (grammar above; NULL or "" clears
 * them). Per-rule counts start at 0; the totals of ol_fault_injected go on.
 * Returns 0 (err[0] = 0), or -EINVAL with one line in err[0..errlen)
 * saying what is wrong, and the rules in force left as they were. err may
 * be NULL when errlen is 0.
 */
int ol_fault_set(const char *spec, char *err, size_t errlen);

/* ol_fault_set(getenv(OL_FAULT_ENV)): 0 when unset. */
int ol_fault_set_env(char *err, size_t errlen);

/* Faults injected into mod since the process started (all rule sets). */
uint64_t ol_fault_injected(enum ol_fault_mod mod);

/*
 * The rules in force and their counts as one JSON object into buf:
 *   {"injected":{"store":N,"kvdisk":N,"rma":N},"rules":[{"rule":"<canonical form>",
 *    "seen":N,"fired":N},...]}
 * followed by a newline. Returns its length (>= cap: cut short).
 */
size_t ol_fault_report(char *buf, size_t cap);

#define OL_FAULT(mod, op, drive, res) ol_fault_apply((mod), (op), (drive), (res))

#else

#define OL_FAULT(mod, op, drive, res) (res)

#endif

#endif
