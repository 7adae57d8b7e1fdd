/*
 * output.h - how every `openlake` command prints: aligned tables for people,
 * JSON for machines, colour only when wanted.
 *
 * Owns: the table printer (struct ol_table), the streaming JSON writer
 * (struct ol_json), JSON string escaping, and the colour escape codes.
 * A command builds a table cell by cell and prints it once; with OL_OUT_JSON
 * the same table comes out as an array of objects keyed by column key.
 * Commands whose result is one record rather than rows use struct ol_json.
 *
 * Must not: decide policy (whether to use colour or JSON is the caller's,
 * from the global flags, passed in as OL_OUT_* bits), or print anything
 * outside the FILE it is given (but for the out-of-memory message below).
 *
 * Text handling: strings are bytes, expected UTF-8. JSON output is always
 * valid: '"', '\\' and control characters are escaped and invalid UTF-8
 * becomes U+FFFD. Human output replaces control characters (C0, DEL, C1)
 * and invalid UTF-8 with '?', so data from a remote node cannot move the
 * cursor or recolour the terminal; column widths count code points.
 *
 * Memory: the CLI's policy is that running out of memory ends the process
 * (message on stderr, exit status 1), so nothing here returns ENOMEM.
 */
#ifndef OL_CLI_OUTPUT_H
#define OL_CLI_OUTPUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/* Output mode bits (combine with |). */
#define OL_OUT_JSON      (1U << 0) /* JSON instead of human text */
#define OL_OUT_COLOR     (1U << 1) /* ANSI colour in human text */
#define OL_OUT_NO_HEADER (1U << 2) /* tables: no title row (key/value lists) */

/* ---- colour -------------------------------------------------------------- */

enum ol_color { OL_RESET, OL_BOLD, OL_DIM, OL_RED, OL_GREEN, OL_YELLOW };

/* The escape sequence for c, or "" unless (out & OL_OUT_COLOR). Static
 * storage; never NULL. */
const char *ol_color(unsigned out, enum ol_color c);

/* ---- JSON ---------------------------------------------------------------- */

/* Writes s to fp as a quoted JSON string (see "Text handling" above);
 * NULL writes null. */
void ol_json_write_string(FILE *fp, const char *s);

#define OL_JSON_MAX_DEPTH 32

/*
 * A streaming JSON writer: compact output, commas and colons placed for
 * you, and a newline after each complete top-level value. Lives on the
 * caller's stack; no teardown. Misuse (a value where a key is due, closing
 * what was not opened, nesting beyond OL_JSON_MAX_DEPTH) fails an assert.
 *
 *   struct ol_json j;
 *   ol_json_init(&j, stdout);
 *   ol_json_object_begin(&j);
 *   ol_json_key(&j, "version"); ol_json_str(&j, OL_VERSION);
 *   ol_json_object_end(&j);                     -> {"version":"0.1.0"}\n
 */
struct ol_json {
    FILE *fp;
    int depth;                            /* open containers */
    bool after_key;                       /* a key was written; value due */
    bool first[OL_JSON_MAX_DEPTH + 1];    /* no member yet at that depth */
    bool object[OL_JSON_MAX_DEPTH + 1];   /* container at that depth is {} */
};

void ol_json_init(struct ol_json *j, FILE *fp);
void ol_json_object_begin(struct ol_json *j);
void ol_json_object_end(struct ol_json *j);
void ol_json_array_begin(struct ol_json *j);
void ol_json_array_end(struct ol_json *j);
/* The next member's key; only directly inside an object. */
void ol_json_key(struct ol_json *j, const char *key);
/* Values. ol_json_str(NULL) writes null. */
void ol_json_str(struct ol_json *j, const char *s);
void ol_json_int(struct ol_json *j, long long v);
void ol_json_uint(struct ol_json *j, unsigned long long v);
void ol_json_bool(struct ol_json *j, bool v);
void ol_json_null(struct ol_json *j);
/* A value already encoded as JSON by someone else (e.g. the io_uring
 * probe's object); written verbatim, so it must be one valid JSON value. */
void ol_json_raw(struct ol_json *j, const char *json);

/* ---- tables -------------------------------------------------------------- */

enum ol_align { OL_ALIGN_LEFT, OL_ALIGN_RIGHT };

/* A column: `key` names it in JSON ("free_bytes"), `title` heads it for
 * people ("FREE"). Both strings must outlive the table. */
struct ol_col {
    const char *key;
    const char *title;
    enum ol_align align;
};

typedef struct ol_table ol_table;

/* A new, empty table with ncols (>= 1) columns copied from cols.
 * Caller frees with ol_table_destroy(). Never returns NULL. */
ol_table *ol_table_create(const struct ol_col *cols, size_t ncols);
void ol_table_destroy(ol_table *t);
/* Spaces before every human line (e.g. 2 under a section title); default 0. */
void ol_table_set_indent(ol_table *t, unsigned indent);

/*
 * Starts a new row; cells are then added left to right. A row given fewer
 * cells than columns is completed with nulls; more is an assert failure, as
 * is adding a cell before the first ol_table_row().
 */
void ol_table_row(ol_table *t);
/* Cells. Human form: strings as given (NULL: "-"), integers in decimal,
 * booleans "yes"/"no", null "-". JSON form: string, number, true/false, null.
 * Strings are copied. */
void ol_table_str(ol_table *t, const char *s);
void ol_table_strf(ol_table *t, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void ol_table_int(ol_table *t, long long v);
void ol_table_uint(ol_table *t, unsigned long long v);
void ol_table_bool(ol_table *t, bool v);
void ol_table_null(ol_table *t);

/* Rows added so far. */
size_t ol_table_rows(const ol_table *t);

/*
 * Prints the table to fp according to `out` (OL_OUT_* bits):
 *   human: a bold title row (unless OL_OUT_NO_HEADER), then one line per
 *          row, columns padded to their widest cell and separated by two
 *          spaces, no trailing blanks; "yes" green and "no" dim with colour;
 *   JSON:  [{"key":value,...},...] and a newline; no rows gives [].
 * Returns 0, or -EIO if fp reported a write error.
 */
int ol_table_print(const ol_table *t, FILE *fp, unsigned out);

#endif
