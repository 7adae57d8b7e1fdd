/*
 * output.c - tables, JSON and colour for the CLI (see output.h).
 *
 * Owns: the cell storage of struct ol_table (one flat array, row-major,
 * ncols cells per row), the UTF-8 decoder both output forms share, and the
 * escape rules. Must not: keep global state (every mode comes in as an
 * OL_OUT_* argument).
 */
#include "cli/output.h"

#include "base/assert.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ---- memory (the CLI's policy: out of memory ends the process) ---------- */

static void *ol_out_realloc(void *p, size_t n)
{
    p = realloc(p, n ? n : 1);
    if (!p) {
        fputs("openlake: out of memory\n", stderr);
        exit(1);
    }
    return p;
}

static char *ol_out_strdup(const char *s)
{
    size_t n = strlen(s) + 1;
    return memcpy(ol_out_realloc(NULL, n), s, n);
}

/* ---- colour -------------------------------------------------------------- */

const char *ol_color(unsigned out, enum ol_color c)
{
    static const char *const codes[] = {
        [OL_RESET] = "\033[0m",  [OL_BOLD] = "\033[1m",
        [OL_DIM] = "\033[2m",    [OL_RED] = "\033[31m",
        [OL_GREEN] = "\033[32m", [OL_YELLOW] = "\033[33m",
    };
    if (!(out & OL_OUT_COLOR) || (unsigned)c >= sizeof codes / sizeof codes[0])
        return "";
    return codes[c];
}

/* ---- UTF-8 --------------------------------------------------------------- */

/*
 * Decodes one UTF-8 sequence at s (NUL-terminated). Returns its length
 * (1..4) and the code point in *cp, or 0 if s does not start a valid,
 * shortest-form, non-surrogate sequence (the caller then skips one byte).
 */
static int ol_utf8_decode(const unsigned char *s, uint32_t *cp)
{
    uint32_t c = s[0], min;
    int n;
    if (c < 0x80) {
        *cp = c;
        return 1;
    }
    if (c >= 0xc2 && c <= 0xdf) {
        n = 2; c &= 0x1f; min = 0x80;
    } else if (c >= 0xe0 && c <= 0xef) {
        n = 3; c &= 0x0f; min = 0x800;
    } else if (c >= 0xf0 && c <= 0xf4) {
        n = 4; c &= 0x07; min = 0x10000;
    } else {
        return 0;
    }
    for (int i = 1; i < n; i++) {
        if ((s[i] & 0xc0) != 0x80) /* also stops at the NUL */
            return 0;
        c = (c << 6) | (s[i] & 0x3f);
    }
    if (c < min || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff))
        return 0;
    *cp = c;
    return n;
}

/* True for code points a terminal may act on: C0, DEL and C1 controls. */
static bool ol_is_control(uint32_t cp)
{
    return cp < 0x20 || (cp >= 0x7f && cp <= 0x9f);
}

void ol_json_write_string(FILE *fp, const char *s)
{
    if (!s) {
        fputs("null", fp);
        return;
    }
    const unsigned char *p = (const unsigned char *)s;
    fputc('"', fp);
    while (*p) {
        uint32_t cp;
        int n = ol_utf8_decode(p, &cp);
        if (n == 0) {
            fputs("\\ufffd", fp);
            p++;
            continue;
        }
        switch (cp) {
        case '"':  fputs("\\\"", fp); break;
        case '\\': fputs("\\\\", fp); break;
        case '\b': fputs("\\b", fp); break;
        case '\f': fputs("\\f", fp); break;
        case '\n': fputs("\\n", fp); break;
        case '\r': fputs("\\r", fp); break;
        case '\t': fputs("\\t", fp); break;
        default:
            if (ol_is_control(cp))
                fprintf(fp, "\\u%04" PRIx32, cp);
            else
                fwrite(p, 1, (size_t)n, fp);
        }
        p += n;
    }
    fputc('"', fp);
}

/* Human form of s: control characters and invalid bytes become '?'.
 * Writes it to fp if fp is not NULL; returns its width in code points. */
static size_t ol_human_text(FILE *fp, const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t width = 0;
    while (*p) {
        uint32_t cp;
        int n = ol_utf8_decode(p, &cp);
        bool bad = n == 0 || ol_is_control(cp);
        if (fp) {
            if (bad)
                fputc('?', fp);
            else
                fwrite(p, 1, (size_t)n, fp);
        }
        p += n ? n : 1;
        width++;
    }
    return width;
}

/* ---- JSON writer ----------------------------------------------------------- */

void ol_json_init(struct ol_json *j, FILE *fp)
{
    memset(j, 0, sizeof *j);
    j->fp = fp;
}

/* Comma (or nothing) before a value or key at the current depth. */
static void ol_json_before_value(struct ol_json *j)
{
    if (j->after_key) {
        j->after_key = false;
        return;
    }
    OL_ASSERT(j->depth == 0 || !j->object[j->depth]); /* objects need a key */
    if (j->depth > 0 && !j->first[j->depth])
        fputc(',', j->fp);
    j->first[j->depth] = false;
}

/* After a complete value: a top-level value ends its line. */
static void ol_json_after_value(struct ol_json *j)
{
    if (j->depth == 0)
        fputc('\n', j->fp);
}

static void ol_json_open(struct ol_json *j, bool object)
{
    ol_json_before_value(j);
    OL_ASSERT(j->depth < OL_JSON_MAX_DEPTH);
    fputc(object ? '{' : '[', j->fp);
    j->depth++;
    j->first[j->depth] = true;
    j->object[j->depth] = object;
}

static void ol_json_close(struct ol_json *j, bool object)
{
    OL_ASSERT(j->depth > 0 && j->object[j->depth] == object && !j->after_key);
    fputc(object ? '}' : ']', j->fp);
    j->depth--;
    ol_json_after_value(j);
}

void ol_json_object_begin(struct ol_json *j) { ol_json_open(j, true); }
void ol_json_object_end(struct ol_json *j) { ol_json_close(j, true); }
void ol_json_array_begin(struct ol_json *j) { ol_json_open(j, false); }
void ol_json_array_end(struct ol_json *j) { ol_json_close(j, false); }

void ol_json_key(struct ol_json *j, const char *key)
{
    OL_ASSERT(j->depth > 0 && j->object[j->depth] && !j->after_key);
    if (!j->first[j->depth])
        fputc(',', j->fp);
    j->first[j->depth] = false;
    ol_json_write_string(j->fp, key);
    fputc(':', j->fp);
    j->after_key = true;
}

void ol_json_str(struct ol_json *j, const char *s)
{
    ol_json_before_value(j);
    ol_json_write_string(j->fp, s);
    ol_json_after_value(j);
}

void ol_json_int(struct ol_json *j, long long v)
{
    ol_json_before_value(j);
    fprintf(j->fp, "%lld", v);
    ol_json_after_value(j);
}

void ol_json_uint(struct ol_json *j, unsigned long long v)
{
    ol_json_before_value(j);
    fprintf(j->fp, "%llu", v);
    ol_json_after_value(j);
}

void ol_json_bool(struct ol_json *j, bool v)
{
    ol_json_before_value(j);
    fputs(v ? "true" : "false", j->fp);
    ol_json_after_value(j);
}

void ol_json_null(struct ol_json *j)
{
    ol_json_before_value(j);
    fputs("null", j->fp);
    ol_json_after_value(j);
}

void ol_json_raw(struct ol_json *j, const char *json)
{
    ol_json_before_value(j);
    fputs(json, j->fp);
    ol_json_after_value(j);
}

/* ---- tables ---------------------------------------------------------------- */

enum ol_cell_type { OL_CELL_NULL, OL_CELL_STR, OL_CELL_NUM, OL_CELL_BOOL };

struct ol_cell {
    enum ol_cell_type type;
    bool b;      /* OL_CELL_BOOL */
    char *text;  /* OL_CELL_STR, OL_CELL_NUM (decimal); owned */
};

struct ol_table {
    struct ol_col *cols;
    size_t ncols;
    struct ol_cell *cells;  /* row-major; row r is cells[r*ncols ...] */
    size_t ncells, cap;
    size_t nrows;
    unsigned indent;
};

ol_table *ol_table_create(const struct ol_col *cols, size_t ncols)
{
    OL_ASSERT(ncols >= 1);
    ol_table *t = ol_out_realloc(NULL, sizeof *t);
    memset(t, 0, sizeof *t);
    t->cols = ol_out_realloc(NULL, ncols * sizeof *cols);
    memcpy(t->cols, cols, ncols * sizeof *cols);
    t->ncols = ncols;
    return t;
}

void ol_table_destroy(ol_table *t)
{
    if (!t)
        return;
    for (size_t i = 0; i < t->ncells; i++)
        free(t->cells[i].text);
    free(t->cells);
    free(t->cols);
    free(t);
}

void ol_table_set_indent(ol_table *t, unsigned indent)
{
    t->indent = indent;
}

static void ol_table_push(ol_table *t, struct ol_cell c)
{
    OL_ASSERT(t->nrows > 0 && "ol_table_row() before the first cell");
    OL_ASSERT(t->ncells < t->nrows * t->ncols && "more cells than columns");
    if (t->ncells == t->cap) {
        t->cap = t->cap ? 2 * t->cap : 4 * t->ncols;
        t->cells = ol_out_realloc(t->cells, t->cap * sizeof *t->cells);
    }
    t->cells[t->ncells++] = c;
}

void ol_table_row(ol_table *t)
{
    while (t->ncells < t->nrows * t->ncols)
        ol_table_null(t);
    t->nrows++;
}

void ol_table_str(ol_table *t, const char *s)
{
    if (!s) {
        ol_table_null(t);
        return;
    }
    ol_table_push(t, (struct ol_cell){ .type = OL_CELL_STR, .text = ol_out_strdup(s) });
}

void ol_table_strf(ol_table *t, const char *fmt, ...)
{
    va_list ap;
    char *s;
    va_start(ap, fmt);
    int n = vasprintf(&s, fmt, ap);
    va_end(ap);
    if (n < 0) {
        fputs("openlake: out of memory\n", stderr);
        exit(1);
    }
    ol_table_push(t, (struct ol_cell){ .type = OL_CELL_STR, .text = s });
}

void ol_table_int(ol_table *t, long long v)
{
    char buf[32];
    snprintf(buf, sizeof buf, "%lld", v);
    ol_table_push(t, (struct ol_cell){ .type = OL_CELL_NUM, .text = ol_out_strdup(buf) });
}

void ol_table_uint(ol_table *t, unsigned long long v)
{
    char buf[32];
    snprintf(buf, sizeof buf, "%llu", v);
    ol_table_push(t, (struct ol_cell){ .type = OL_CELL_NUM, .text = ol_out_strdup(buf) });
}

void ol_table_bool(ol_table *t, bool v)
{
    ol_table_push(t, (struct ol_cell){ .type = OL_CELL_BOOL, .b = v });
}

void ol_table_null(ol_table *t)
{
    ol_table_push(t, (struct ol_cell){ .type = OL_CELL_NULL });
}

size_t ol_table_rows(const ol_table *t)
{
    return t->nrows;
}

/* The cell at row r, column c; a null cell past the last one added. */
static const struct ol_cell *ol_table_cell(const ol_table *t, size_t r, size_t c)
{
    static const struct ol_cell null_cell = { .type = OL_CELL_NULL };
    size_t i = r * t->ncols + c;
    return i < t->ncells ? &t->cells[i] : &null_cell;
}

static const char *ol_cell_human(const struct ol_cell *c)
{
    switch (c->type) {
    case OL_CELL_STR:
    case OL_CELL_NUM:  return c->text;
    case OL_CELL_BOOL: return c->b ? "yes" : "no";
    case OL_CELL_NULL: break;
    }
    return "-";
}

static void ol_table_print_json(const ol_table *t, FILE *fp)
{
    struct ol_json j;
    ol_json_init(&j, fp);
    ol_json_array_begin(&j);
    for (size_t r = 0; r < t->nrows; r++) {
        ol_json_object_begin(&j);
        for (size_t c = 0; c < t->ncols; c++) {
            const struct ol_cell *cell = ol_table_cell(t, r, c);
            ol_json_key(&j, t->cols[c].key);
            switch (cell->type) {
            case OL_CELL_STR:  ol_json_str(&j, cell->text); break;
            case OL_CELL_NUM:  ol_json_raw(&j, cell->text); break;
            case OL_CELL_BOOL: ol_json_bool(&j, cell->b); break;
            case OL_CELL_NULL: ol_json_null(&j); break;
            }
        }
        ol_json_object_end(&j);
    }
    ol_json_array_end(&j);
}

/* Human text of row `row`, column c; row SIZE_MAX is the title row. */
static const char *ol_table_text(const ol_table *t, size_t row, size_t c)
{
    if (row == SIZE_MAX)
        return t->cols[c].title;
    return ol_cell_human(ol_table_cell(t, row, c));
}

/* Colour for a cell: bold titles, green "yes", dim "no". */
static enum ol_color ol_table_color(const ol_table *t, size_t row, size_t c)
{
    if (row == SIZE_MAX)
        return OL_BOLD;
    const struct ol_cell *cell = ol_table_cell(t, row, c);
    if (cell->type == OL_CELL_BOOL)
        return cell->b ? OL_GREEN : OL_DIM;
    return OL_RESET;
}

/*
 * One human line (row SIZE_MAX: the title row). Cells are padded to
 * width[c] and separated by two spaces; the last column is not padded and
 * trailing empty cells print nothing, so no line ends in blanks.
 */
static void ol_table_print_line(const ol_table *t, FILE *fp, unsigned out,
                                const size_t *width, size_t row)
{
    size_t end = t->ncols;
    while (end > 1 && ol_table_text(t, row, end - 1)[0] == '\0')
        end--;
    fprintf(fp, "%*s", (int)t->indent, "");
    for (size_t c = 0; c < end; c++) {
        const char *s = ol_table_text(t, row, c);
        size_t pad = width[c] - ol_human_text(NULL, s);
        bool right = t->cols[c].align == OL_ALIGN_RIGHT;
        enum ol_color color = ol_table_color(t, row, c);
        if (c > 0)
            fputs("  ", fp);
        if (right)
            fprintf(fp, "%*s", (int)pad, "");
        if (color != OL_RESET)
            fputs(ol_color(out, color), fp);
        ol_human_text(fp, s);
        if (color != OL_RESET)
            fputs(ol_color(out, OL_RESET), fp);
        if (!right && c + 1 < end)
            fprintf(fp, "%*s", (int)pad, "");
    }
    fputc('\n', fp);
}

int ol_table_print(const ol_table *t, FILE *fp, unsigned out)
{
    if (out & OL_OUT_JSON) {
        ol_table_print_json(t, fp);
    } else {
        bool header = !(out & OL_OUT_NO_HEADER);
        size_t *width = ol_out_realloc(NULL, t->ncols * sizeof *width);
        for (size_t c = 0; c < t->ncols; c++) {
            width[c] = header ? ol_human_text(NULL, t->cols[c].title) : 0;
            for (size_t r = 0; r < t->nrows; r++) {
                size_t w = ol_human_text(NULL, ol_table_text(t, r, c));
                if (w > width[c])
                    width[c] = w;
            }
        }
        if (header)
            ol_table_print_line(t, fp, out, width, SIZE_MAX);
        for (size_t r = 0; r < t->nrows; r++)
            ol_table_print_line(t, fp, out, width, r);
        free(width);
    }
    return ferror(fp) ? -EIO : 0;
}
