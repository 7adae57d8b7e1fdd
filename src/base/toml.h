/*
 * toml.h - a small, strict TOML reader for OpenLake's configuration files.
 *
 * Owns: turning one TOML document (TOML 1.0, minus dates and times) held in
 * a caller's buffer into a read-only tree of tables, arrays and scalars,
 * and the accessors that walk that tree. Every value remembers the line and
 * column where it starts, so a caller can report "file:line: ..." later.
 *
 * Must not: read past the `len` bytes it is given (the input needs no NUL
 * terminator), keep a pointer into the caller's buffer after it returns,
 * allocate without bound, recurse without bound, or know anything about
 * OpenLake's settings (that is config.c).
 *
 * Supported: comments; bare, quoted and dotted keys; [table] and
 * [[array.of.tables]] headers; basic strings with the escapes \b \t \n \f
 * \r \" \\ \uXXXX \UXXXXXXXX; literal strings; multi-line basic and literal
 * strings (with line-ending backslashes); integers (decimal with sign and
 * underscores, 0x / 0o / 0b); floats (fraction, exponent, inf, nan);
 * booleans; arrays (nested, mixed types, newlines, comments, trailing comma);
 * inline tables. Duplicate keys and redefined tables are errors, as TOML 1.0
 * says. Line endings are LF or CRLF; CRLF inside multi-line strings reads as
 * LF. A leading UTF-8 byte-order mark is skipped; any other invalid UTF-8 is
 * an error.
 *
 * Deliberate limits (each rejected with a clear message):
 *   - offset/local date-times, dates and times ("not supported");
 *   - the escape \u0000 (strings are handed out NUL-terminated);
 *   - inputs over OL_TOML_MAX_INPUT bytes and trees deeper than
 *     OL_TOML_MAX_DEPTH levels (a dotted key, header part, array or inline
 *     table each add a level);
 *   - newlines and trailing commas inside inline tables (as TOML 1.0).
 *
 * Memory: a parsed document lives in one arena owned by struct ol_toml_doc
 * (at most OL_TOML_MAX_MEM bytes); ol_toml_free() releases all of it. Node
 * and string pointers handed out stay valid until then.
 *
 * Errors: ol_toml_parse() writes one line "name:line:col: message" (no
 * trailing newline) into the caller's buffer. Line and column count from 1;
 * the column counts bytes.
 */
#ifndef OL_TOML_H
#define OL_TOML_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define OL_TOML_MAX_INPUT (1u << 20)   /* bytes of input accepted */
#define OL_TOML_MAX_DEPTH 32           /* levels below the root table */
#define OL_TOML_MAX_MEM   (64u << 20)  /* arena bytes for one document */

enum ol_toml_type {
    OL_TOML_TABLE,
    OL_TOML_ARRAY,
    OL_TOML_STRING,
    OL_TOML_INT,
    OL_TOML_FLOAT,
    OL_TOML_BOOL,
};

struct ol_toml_doc;   /* a parsed document; owns every node and string */
struct ol_toml;       /* one value (table, array or scalar) in a document */

/*
 * Parses exactly `len` bytes of `buf` (no NUL terminator needed; bytes past
 * `len` are never read). `name` prefixes error messages (NULL: "<input>").
 * Returns a new document the caller frees with ol_toml_free(), or NULL with
 * a message "name:line:col: message" in err[errlen] (err may be NULL when
 * errlen is 0; the message is truncated to fit and always NUL-terminated).
 * NULL is also returned, with a message, when memory runs out.
 */
struct ol_toml_doc *ol_toml_parse(const char *name, const char *buf, size_t len,
                                  char *err, size_t errlen);

/* Frees a document and every node and string in it. NULL is ignored. */
void ol_toml_free(struct ol_toml_doc *doc);

/* The root table of a document (never NULL for a parsed document). */
const struct ol_toml *ol_toml_root(const struct ol_toml_doc *doc);

/* The type of a value. */
enum ol_toml_type ol_toml_type(const struct ol_toml *v);

/* "table", "array", "string", "integer", "float" or "boolean". */
const char *ol_toml_type_name(enum ol_toml_type t);

/*
 * Where the value starts in the input (1-based line, 1-based byte column).
 * For a table made by a [header] that is the header; for one made by a
 * dotted key, the key; for an element of an array of tables, its [[header]].
 */
unsigned ol_toml_line(const struct ol_toml *v);
unsigned ol_toml_col(const struct ol_toml *v);

/*
 * The key under which the value sits in its parent table (NUL-terminated,
 * may contain any UTF-8 but never NUL), or NULL for the root and for array
 * elements.
 */
const char *ol_toml_key(const struct ol_toml *v);

/* Number of entries of a table or elements of an array; 0 for scalars. */
size_t ol_toml_count(const struct ol_toml *v);

/*
 * Iteration in document order: ol_toml_first() gives the first entry of a
 * table or element of an array (NULL if empty or a scalar), ol_toml_next()
 * the following sibling (NULL after the last).
 */
const struct ol_toml *ol_toml_first(const struct ol_toml *v);
const struct ol_toml *ol_toml_next(const struct ol_toml *v);

/* The entry `key` of a table, or NULL (also when v is not a table).
 * Linear in the table's size. */
const struct ol_toml *ol_toml_get(const struct ol_toml *table, const char *key);

/*
 * Scalar readers. ol_toml_str() returns the NUL-terminated string and sets
 * *len (if len is not NULL), or returns NULL when v is not a string. The
 * others store into *out and return 0, or return -1 (leaving *out alone)
 * when v has another type. ol_toml_float() reads floats only; integers are
 * not converted.
 */
const char *ol_toml_str(const struct ol_toml *v, size_t *len);
int ol_toml_int(const struct ol_toml *v, int64_t *out);
int ol_toml_float(const struct ol_toml *v, double *out);
int ol_toml_bool(const struct ol_toml *v, bool *out);

/*
 * Writes a short human description of a value into buf[len] for error
 * messages: `string "big"`, `integer 7`, `float 0.5`, `boolean true`,
 * `array`, `table`. Long strings are cut with "..." and control characters
 * escaped. Always NUL-terminates when len > 0.
 */
void ol_toml_describe(const struct ol_toml *v, char *buf, size_t len);

/*
 * Reads one TOML number literal of exactly `len` bytes (no surrounding
 * space): integer forms store *i and return OL_TOML_INT, float forms
 * (including inf and nan) store *f and return OL_TOML_FLOAT. Returns -1 for
 * anything else, with *why (if not NULL) set to a static reason. Decimal
 * points are '.', whatever the process locale says.
 */
int ol_toml_number(const char *s, size_t len, int64_t *i, double *f,
                   const char **why);

#endif
