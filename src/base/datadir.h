/*
 * datadir.h - where openlaked keeps its data when nothing says where, and
 * where the CLI looks for the daemon's KV socket then: one rule for both.
 *
 *   ./data is a directory (where the process started)   "./data"
 *   else $XDG_DATA_HOME is an absolute path              "$XDG_DATA_HOME/openlake"
 *   else $HOME is an absolute path                       "$HOME/.local/share/openlake"
 *   else                                                 "./data"
 *
 * So a developer's checkout (make run makes ./data) keeps its data in the
 * tree, and a daemon installed with pip keeps it per user wherever it is
 * started from. A client looking for the daemon's file (kv.sock,
 * kv.token, s3.credentials) takes it from ./data when it is there, else
 * from the per-user dir (ol_datadir_find): a project's own ./data folder
 * does not hide a per-user daemon from `openlake kv` started in it. The
 * Python connector (openlake_client/connector/config.py) follows the same
 * rule for the socket.
 *
 * Owns: the rule and the making of the XDG directory's parents. Standalone:
 * no logging, no config. Reads the environment from envp (NULL-ended, as
 * main's third argument), never from getenv.
 */
#ifndef OL_BASE_DATADIR_H
#define OL_BASE_DATADIR_H

#include <stddef.h>

/* The default data dir into out (at most len bytes with its NUL). Returns 1
 * when it is the per-user XDG one (its parents may be missing: see
 * ol_datadir_make_parents), 0 when it is "./data", -1 (out "./data") when
 * the XDG path would not fit in len. */
int ol_datadir_default(char **envp, char *out, size_t len);

/* Where a client finds the daemon's file name (e.g. "kv.sock") when told
 * nothing: <default dir>/name; but when that is ./data/name and missing,
 * the per-user dir's name if that exists. Into out (its len bytes hold
 * it, truncated otherwise); 1 when the per-user one was taken. */
int ol_datadir_find(char **envp, const char *name, char *out, size_t len);

/* Makes every missing parent of path (not path itself), mode 0700 as the
 * XDG base directory spec asks. 0, or -errno of the mkdir that failed. */
int ol_datadir_make_parents(const char *path);

#endif
