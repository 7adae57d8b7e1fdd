/*
 * test_toml.c - unit tests of the TOML reader (src/base/toml.c).
 *
 * Covers the TOML 1.0 subset toml.h promises (valid and invalid cases from
 * the spec's own examples), exact error positions, the size and depth
 * limits, non-NUL-terminated input, and a guard-page sweep: every prefix
 * of a set of documents is parsed with its last byte just before a
 * PROT_NONE page, so any read past `len` faults.
 */
#include "olt.h"

#include "base/toml.h"

#include <math.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

static char terr[512];

static struct ol_toml_doc *P(const char *s)
{
    return ol_toml_parse("t.toml", s, strlen(s), terr, sizeof terr);
}

/* Parses s, which must be valid; fails the test with the message if not. */
static struct ol_toml_doc *ok(const char *s)
{
    struct ol_toml_doc *d = P(s);
    if (!d)
        olt_fail(__FILE__, __LINE__, "unexpected error: %s\n--- input:\n%s", terr, s);
    return d;
}

/* Parses s, which must be invalid; returns the message. */
static const char *bad(const char *s)
{
    struct ol_toml_doc *d = P(s);
    if (d) {
        ol_toml_free(d);
        olt_fail(__FILE__, __LINE__, "accepted invalid input:\n%s", s);
    }
    return terr;
}

/* Follows a dotted path of plain keys ("a.b.c") from the root. */
static const struct ol_toml *at(struct ol_toml_doc *d, const char *path)
{
    char buf[256];
    snprintf(buf, sizeof buf, "%s", path);
    const struct ol_toml *v = ol_toml_root(d);
    for (char *tok = strtok(buf, "."); tok && v; tok = strtok(NULL, "."))
        v = ol_toml_get(v, tok);
    return v;
}

static int64_t I(struct ol_toml_doc *d, const char *path)
{
    int64_t x = -12345;
    const struct ol_toml *v = at(d, path);
    if (!v || ol_toml_int(v, &x))
        olt_fail(__FILE__, __LINE__, "%s is not an integer", path);
    return x;
}

static double F(struct ol_toml_doc *d, const char *path)
{
    double x = -12345;
    const struct ol_toml *v = at(d, path);
    if (!v || ol_toml_float(v, &x))
        olt_fail(__FILE__, __LINE__, "%s is not a float", path);
    return x;
}

static const char *S(struct ol_toml_doc *d, const char *path)
{
    const struct ol_toml *v = at(d, path);
    const char *s = v ? ol_toml_str(v, NULL) : NULL;
    if (!s)
        olt_fail(__FILE__, __LINE__, "%s is not a string", path);
    return s;
}

/* Does the error message end with `tail`? */
static int ends_with(const char *s, const char *tail)
{
    size_t a = strlen(s), b = strlen(tail);
    return a >= b && strcmp(s + a - b, tail) == 0;
}

#define CHECK_BAD(input, want)                                               \
    do {                                                                     \
        const char *m_ = bad(input);                                         \
        if (!ends_with(m_, want))                                            \
            olt_fail(__FILE__, __LINE__, "error \"%s\" does not end with "   \
                     "\"%s\"", m_, want);                                    \
    } while (0)

OLT_TEST(toml_scalars_and_lines)
{
    struct ol_toml_doc *d = ok(
        "# a comment\n"
        "name = \"openlake\"   # trailing comment\n"
        "\n"
        "count = 42\n"
        "ratio = 0.5\n"
        "on = true\n"
        "off = false\n");
    const struct ol_toml *root = ol_toml_root(d);
    OLT_CHECK_EQ(ol_toml_type(root), OL_TOML_TABLE);
    OLT_CHECK_EQ(ol_toml_count(root), 5);
    OLT_CHECK_STR(S(d, "name"), "openlake");
    OLT_CHECK_EQ(I(d, "count"), 42);
    OLT_CHECK(F(d, "ratio") == 0.5);
    bool b = false;
    OLT_CHECK(ol_toml_bool(at(d, "on"), &b) == 0 && b);
    OLT_CHECK(ol_toml_bool(at(d, "off"), &b) == 0 && !b);
    OLT_CHECK_EQ(ol_toml_line(at(d, "name")), 2);
    OLT_CHECK_EQ(ol_toml_col(at(d, "name")), 8);
    OLT_CHECK_EQ(ol_toml_line(at(d, "count")), 4);
    OLT_CHECK_EQ(ol_toml_line(at(d, "off")), 7);
    /* document order */
    const char *order[] = {"name", "count", "ratio", "on", "off"};
    int i = 0;
    for (const struct ol_toml *v = ol_toml_first(root); v; v = ol_toml_next(v))
        OLT_CHECK_STR(ol_toml_key(v), order[i++]);
    OLT_CHECK_EQ(i, 5);
    /* wrong-type readers refuse */
    int64_t x;
    OLT_CHECK(ol_toml_int(at(d, "name"), &x) == -1);
    OLT_CHECK(ol_toml_str(at(d, "count"), NULL) == NULL);
    double f;
    OLT_CHECK(ol_toml_float(at(d, "count"), &f) == -1);
    OLT_CHECK(ol_toml_first(at(d, "count")) == NULL);
    OLT_CHECK_EQ(ol_toml_count(at(d, "count")), 0);
    OLT_CHECK(ol_toml_get(at(d, "count"), "x") == NULL);
    OLT_CHECK(ol_toml_key(root) == NULL);
    ol_toml_free(d);
    ol_toml_free(NULL);
}

OLT_TEST(toml_empty_and_blank_documents)
{
    const char *docs[] = {"", "\n", "   \n\t\n", "# only a comment", "#\r\n#\n",
                          "\xEF\xBB\xBF", "\357\273\277a = 1\n"};
    for (size_t i = 0; i < sizeof docs / sizeof docs[0]; i++)
        ol_toml_free(ok(docs[i]));
    struct ol_toml_doc *d = ol_toml_parse(NULL, NULL, 0, terr, sizeof terr);
    OLT_CHECK(d != NULL);
    OLT_CHECK_EQ(ol_toml_count(ol_toml_root(d)), 0);
    ol_toml_free(d);
    /* the BOM does not count towards columns */
    const char *m = bad("\357\273\277a = ?\n");
    OLT_CHECK_STR(m, "t.toml:1:5: expected a value, found '?'");
}

OLT_TEST(toml_basic_strings)
{
    struct ol_toml_doc *d = ok(
        "a = \"tab\\there \\\"q\\\" back\\\\slash\"\n"
        "b = \"\\b\\f\\n\\r\"\n"
        "c = \"\\u00e9\\u20AC\\U0001F600\"\n"
        "d = \"\"\n"
        "e = \"caf\xC3\xA9 \xE2\x82\xAC\"\n"
        "f = \"# not a comment\"\n"
        "g = \"with\ttab\"\n");
    OLT_CHECK_STR(S(d, "a"), "tab\there \"q\" back\\slash");
    OLT_CHECK_STR(S(d, "b"), "\b\f\n\r");
    OLT_CHECK_STR(S(d, "c"), "\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80");
    OLT_CHECK_STR(S(d, "d"), "");
    OLT_CHECK_STR(S(d, "e"), "caf\xC3\xA9 \xE2\x82\xAC");
    OLT_CHECK_STR(S(d, "f"), "# not a comment");
    OLT_CHECK_STR(S(d, "g"), "with\ttab");
    size_t len = 99;
    OLT_CHECK(ol_toml_str(at(d, "c"), &len) != NULL);
    OLT_CHECK_EQ(len, 9);
    ol_toml_free(d);

    CHECK_BAD("a = \"x\\q\"\n", "t.toml:1:7: invalid escape '\\' followed by 'q'");
    CHECK_BAD("a = \"x\\ \"\n", "t.toml:1:7: invalid escape '\\' followed by a space");
    CHECK_BAD("a = \"\\u12\"\n", "t.toml:1:6: invalid \\u escape: expected 4 hex digits");
    CHECK_BAD("a = \"\\U0000004\"\n", "t.toml:1:6: invalid \\U escape: expected 8 hex digits");
    CHECK_BAD("a = \"\\uD800\"\n", "t.toml:1:6: \\u escape is not a Unicode scalar value");
    CHECK_BAD("a = \"\\U00110000\"\n", "t.toml:1:6: \\U escape is not a Unicode scalar value");
    CHECK_BAD("a = \"\\u0000\"\n", "t.toml:1:6: the NUL character (\\u0000) is not supported in strings");
    CHECK_BAD("a = \"open\n\"\n", "t.toml:1:10: newline in a single-line string");
    CHECK_BAD("a = \"open", "t.toml:1:5: unterminated string");
    CHECK_BAD("a = \"x\\", "t.toml:1:5: unterminated string");
    CHECK_BAD("a = \"bell\x07\"\n", "t.toml:1:10: control character 0x07 in a string (write it as an escape)");
    CHECK_BAD("a = \"del\x7f\"\n", "t.toml:1:9: control character 0x7f in a string (write it as an escape)");
}

OLT_TEST(toml_literal_strings)
{
    struct ol_toml_doc *d = ok(
        "winpath = 'C:\\Users\\nodejs\\templates'\n"
        "quoted = 'Tom \"Dubs\" Preston-Werner'\n"
        "regex = '<\\i\\c*\\s*>'\n"
        "empty = ''\n");
    OLT_CHECK_STR(S(d, "winpath"), "C:\\Users\\nodejs\\templates");
    OLT_CHECK_STR(S(d, "quoted"), "Tom \"Dubs\" Preston-Werner");
    OLT_CHECK_STR(S(d, "regex"), "<\\i\\c*\\s*>");
    OLT_CHECK_STR(S(d, "empty"), "");
    ol_toml_free(d);
    CHECK_BAD("a = 'no\nend'\n", "t.toml:1:8: newline in a single-line string");
    CHECK_BAD("a = 'open", "t.toml:1:5: unterminated string");
}

OLT_TEST(toml_multiline_strings)
{
    struct ol_toml_doc *d = ok(
        "a = \"\"\"\nRoses are red\nViolets are blue\"\"\"\n"
        "b = \"\"\"\\\n    The quick brown \\\n\n\n      fox.\\\n    \"\"\"\n"
        "c = \"\"\"Here are two quotation marks: \"\". Simple enough.\"\"\"\n"
        "d = \"\"\"Here are three: \"\"\\\".\"\"\"\n"
        "e = \"\"\"\"This,\" she said, \"is just a pointless statement.\"\"\"\"\n"
        "f = '''\nThe first newline is\ntrimmed in raw strings.\n   All other whitespace\n   is preserved.\n'''\n"
        "g = '''I [dw]on't need \\d{2} apples'''\n"
        "h = ''''That,' she said, 'is still pointless.''''\n"
        "i = \"\"\"\"\"\"\n"
        "j = \"\"\"a\"\"\"\"\"\n"
        "k = \"\"\"x \\   \n   y\"\"\"\n");
    OLT_CHECK_STR(S(d, "a"), "Roses are red\nViolets are blue");
    OLT_CHECK_STR(S(d, "b"), "The quick brown fox.");
    OLT_CHECK_STR(S(d, "c"), "Here are two quotation marks: \"\". Simple enough.");
    OLT_CHECK_STR(S(d, "d"), "Here are three: \"\"\".");
    OLT_CHECK_STR(S(d, "e"), "\"This,\" she said, \"is just a pointless statement.\"");
    OLT_CHECK_STR(S(d, "f"), "The first newline is\ntrimmed in raw strings.\n   All other whitespace\n   is preserved.\n");
    OLT_CHECK_STR(S(d, "g"), "I [dw]on't need \\d{2} apples");
    OLT_CHECK_STR(S(d, "h"), "'That,' she said, 'is still pointless.'");
    OLT_CHECK_STR(S(d, "i"), "");
    OLT_CHECK_STR(S(d, "j"), "a\"\"");
    OLT_CHECK_STR(S(d, "k"), "x y");
    /* lines after a multi-line string are counted right */
    OLT_CHECK_EQ(ol_toml_line(at(d, "b")), 4);
    OLT_CHECK_EQ(ol_toml_line(at(d, "c")), 10);
    OLT_CHECK_EQ(ol_toml_line(at(d, "k")), 23);
    ol_toml_free(d);

    /* CRLF inside reads as LF */
    d = ok("a = \"\"\"\r\none\r\ntwo\"\"\"\r\nb = 1\r\n");
    OLT_CHECK_STR(S(d, "a"), "one\ntwo");
    OLT_CHECK_EQ(ol_toml_line(at(d, "b")), 4);
    ol_toml_free(d);

    CHECK_BAD("a = \"\"\"x\"\"\"\"\"\"\n", "t.toml:1:9: too many quotes at the end of a multi-line string");
    CHECK_BAD("a = \"\"\"x \\ y\"\"\"\n", "t.toml:1:10: a backslash followed by spaces must be the last thing on its line");
    CHECK_BAD("a = \"\"\"open\n\n", "t.toml:1:5: unterminated string");
    CHECK_BAD("a = '''open\n", "t.toml:1:5: unterminated string");
    CHECK_BAD("a = \"\"\"x\ry\"\"\"\n", "t.toml:1:9: carriage return not followed by a line feed");
    CHECK_BAD("a = '''\x01'''\n", "t.toml:1:8: control character 0x01 in a string (write it as an escape)");
}

OLT_TEST(toml_integers)
{
    struct ol_toml_doc *d = ok(
        "a = +99\nb = 42\nc = 0\nd = -17\ne = 1_000\nf = 5_349_221\n"
        "g = 0xDEADBEEF\nh = 0xdead_beef\ni = 0o01234567\nj = 0o755\n"
        "k = 0b11010110\nl = 9223372036854775807\nm = -9223372036854775808\n"
        "n = +0\no = -0\np = 0x7fffffffffffffff\nq = 0x00ff\n");
    OLT_CHECK_EQ(I(d, "a"), 99);
    OLT_CHECK_EQ(I(d, "b"), 42);
    OLT_CHECK_EQ(I(d, "c"), 0);
    OLT_CHECK_EQ(I(d, "d"), -17);
    OLT_CHECK_EQ(I(d, "e"), 1000);
    OLT_CHECK_EQ(I(d, "f"), 5349221);
    OLT_CHECK_EQ(I(d, "g"), 0xDEADBEEF);
    OLT_CHECK_EQ(I(d, "h"), 0xdeadbeef);
    OLT_CHECK_EQ(I(d, "i"), 01234567);
    OLT_CHECK_EQ(I(d, "j"), 0755);
    OLT_CHECK_EQ(I(d, "k"), 214);
    OLT_CHECK(I(d, "l") == INT64_MAX);
    OLT_CHECK(I(d, "m") == INT64_MIN);
    OLT_CHECK_EQ(I(d, "n"), 0);
    OLT_CHECK_EQ(I(d, "o"), 0);
    OLT_CHECK(I(d, "p") == INT64_MAX);
    OLT_CHECK_EQ(I(d, "q"), 255);
    ol_toml_free(d);

    CHECK_BAD("a = 012\n", "t.toml:1:5: invalid number 012: leading zeros are not allowed");
    CHECK_BAD("a = 1__2\n", "t.toml:1:5: invalid number 1__2: an underscore must stand between two digits");
    CHECK_BAD("a = 1_\n", "t.toml:1:5: invalid number 1_: an underscore must stand between two digits");
    CHECK_BAD("a = _1\n", "t.toml:1:5: invalid value _1 (strings must be quoted)");
    CHECK_BAD("a = +0x10\n", "t.toml:1:5: invalid number +0x10: hexadecimal, octal and binary integers take no sign");
    CHECK_BAD("a = 0x\n", "t.toml:1:5: invalid number 0x: expected hexadecimal digits after 0x");
    CHECK_BAD("a = 0X10\n", "t.toml:1:5: invalid number 0X10: unexpected character in number");
    CHECK_BAD("a = 0o8\n", "t.toml:1:5: invalid number 0o8: expected octal digits after 0o");
    CHECK_BAD("a = 0b12\n", "t.toml:1:5: invalid number 0b12: expected binary digits after 0b");
    CHECK_BAD("a = 0x_1\n", "t.toml:1:5: invalid number 0x_1: expected hexadecimal digits after 0x");
    CHECK_BAD("a = 9223372036854775808\n", "invalid number 9223372036854775808: integer does not fit in 64 signed bits");
    CHECK_BAD("a = -9223372036854775809\n", "integer does not fit in 64 signed bits");
    CHECK_BAD("a = 0x8000000000000000\n", "integer does not fit in 64 signed bits");
    CHECK_BAD("a = +\n", "t.toml:1:5: invalid number +: expected a digit");
    CHECK_BAD("a = 1 2\n", "t.toml:1:7: expected the end of the line after a value, found '2'");
}

OLT_TEST(toml_floats)
{
    struct ol_toml_doc *d = ok(
        "a = +1.0\nb = 3.1415\nc = -0.01\nd = 5e+22\ne = 1e06\nf = -2E-2\n"
        "g = 6.626e-34\nh = 224_617.445_991_228\ni = inf\nj = +inf\nk = -inf\n"
        "l = nan\nm = +nan\nn = -nan\no = 0.0\np = -0.0\nq = 0e0\nr = 1e-400\n");
    OLT_CHECK(F(d, "a") == 1.0);
    OLT_CHECK(F(d, "b") == 3.1415);
    OLT_CHECK(F(d, "c") == -0.01);
    OLT_CHECK(F(d, "d") == 5e22);
    OLT_CHECK(F(d, "e") == 1e6);
    OLT_CHECK(F(d, "f") == -2e-2);
    OLT_CHECK(F(d, "g") == 6.626e-34);
    OLT_CHECK(F(d, "h") == 224617.445991228);
    OLT_CHECK(isinf(F(d, "i")) && F(d, "i") > 0);
    OLT_CHECK(isinf(F(d, "j")) && F(d, "j") > 0);
    OLT_CHECK(isinf(F(d, "k")) && F(d, "k") < 0);
    OLT_CHECK(isnan(F(d, "l")) && isnan(F(d, "m")) && isnan(F(d, "n")));
    OLT_CHECK(signbit(F(d, "n")) && !signbit(F(d, "m")));
    OLT_CHECK(F(d, "o") == 0.0 && !signbit(F(d, "o")));
    OLT_CHECK(F(d, "p") == 0.0 && signbit(F(d, "p")));
    OLT_CHECK(F(d, "q") == 0.0);
    OLT_CHECK(F(d, "r") == 0.0);
    ol_toml_free(d);

    CHECK_BAD("a = 1.\n", "invalid number 1.: a decimal point must be followed by a digit");
    CHECK_BAD("a = .5\n", "t.toml:1:5: invalid value .5 (strings must be quoted)");
    CHECK_BAD("a = 1.e5\n", "a decimal point must be followed by a digit");
    CHECK_BAD("a = 1e\n", "invalid number 1e: an exponent needs digits");
    CHECK_BAD("a = 1e+\n", "an exponent needs digits");
    CHECK_BAD("a = 01.5\n", "leading zeros are not allowed");
    CHECK_BAD("a = 1.5_\n", "an underscore must stand between two digits");
    CHECK_BAD("a = 1e999\n", "invalid number 1e999: float out of range");
    CHECK_BAD("a = infinity\n", "invalid value infinity (strings must be quoted)");
    CHECK_BAD("a = NaN\n", "invalid value NaN (strings must be quoted)");
    CHECK_BAD("a = 1.5.6\n", "unexpected character in number");
}

OLT_TEST(toml_number_helper)
{
    int64_t i = 0;
    double f = 0;
    const char *why = NULL;
    OLT_CHECK_EQ(ol_toml_number("12", 2, &i, &f, &why), OL_TOML_INT);
    OLT_CHECK_EQ(i, 12);
    /* exactly len bytes: "123" with len 2 is 12 */
    OLT_CHECK_EQ(ol_toml_number("123", 2, &i, &f, &why), OL_TOML_INT);
    OLT_CHECK_EQ(i, 12);
    OLT_CHECK_EQ(ol_toml_number("2.5e1", 5, &i, &f, &why), OL_TOML_FLOAT);
    OLT_CHECK(f == 25.0);
    OLT_CHECK_EQ(ol_toml_number("", 0, &i, &f, &why), -1);
    OLT_CHECK_EQ(ol_toml_number("x", 1, &i, &f, NULL), -1);
    OLT_CHECK_EQ(ol_toml_number(" 1", 2, &i, &f, &why), -1);
    /* a float longer than the helper's stack buffer */
    char lng[400];
    memset(lng, '1', sizeof lng);
    lng[1] = '.';
    OLT_CHECK_EQ(ol_toml_number(lng, 300, &i, &f, &why), OL_TOML_FLOAT);
    OLT_CHECK(f > 1.1 && f < 1.12);
}

OLT_TEST(toml_booleans_and_bare_words)
{
    CHECK_BAD("a = True\n", "t.toml:1:5: invalid value True (strings must be quoted)");
    CHECK_BAD("a = truex\n", "invalid value truex (strings must be quoted)");
    CHECK_BAD("a = hello\n", "invalid value hello (strings must be quoted)");
    CHECK_BAD("a =\n", "t.toml:1:4: expected a value, found end of line");
    CHECK_BAD("a = ", "t.toml:1:5: expected a value, found end of input");
    CHECK_BAD("a = \"x\" true\n", "expected the end of the line after a value, found 't'");
}

OLT_TEST(toml_dates_rejected)
{
    CHECK_BAD("a = 1979-05-27T07:32:00Z\n", "t.toml:1:5: dates and times are not supported");
    CHECK_BAD("a = 1979-05-27\n", "dates and times are not supported");
    CHECK_BAD("a = 1979-05-27 07:32:00\n", "dates and times are not supported");
    CHECK_BAD("a = 07:32:00\n", "dates and times are not supported");
    CHECK_BAD("a = [1979-05-27]\n", "t.toml:1:6: dates and times are not supported");
}

OLT_TEST(toml_arrays)
{
    struct ol_toml_doc *d = ok(
        "integers = [ 1, 2, 3 ]\n"
        "colors = [ \"red\", \"yellow\", \"green\" ]\n"
        "nested = [ [ 1, 2 ], [3, 4, 5] ]\n"
        "mixed = [ 0.1, \"x\", [ 'a' ], { k = 1 }, true ]\n"
        "empty = []\n"
        "multi = [\n"
        "  1,   # one\n"
        "  2,\n"
        "\n"
        "  # a comment line\n"
        "  3,   # trailing comma next\n"
        "]\n"
        "after = 7\n");
    const struct ol_toml *v = at(d, "integers");
    OLT_CHECK_EQ(ol_toml_type(v), OL_TOML_ARRAY);
    OLT_CHECK_EQ(ol_toml_count(v), 3);
    int64_t want = 1, x;
    for (const struct ol_toml *e = ol_toml_first(v); e; e = ol_toml_next(e), want++) {
        OLT_CHECK(ol_toml_int(e, &x) == 0 && x == want);
        OLT_CHECK(ol_toml_key(e) == NULL);
        OLT_CHECK_EQ(ol_toml_line(e), 1);
    }
    OLT_CHECK_EQ(ol_toml_col(ol_toml_first(v)), 14);
    v = at(d, "nested");
    OLT_CHECK_EQ(ol_toml_count(v), 2);
    OLT_CHECK_EQ(ol_toml_count(ol_toml_next(ol_toml_first(v))), 3);
    v = at(d, "mixed");
    OLT_CHECK_EQ(ol_toml_count(v), 5);
    const struct ol_toml *e = ol_toml_first(v);
    OLT_CHECK_EQ(ol_toml_type(e), OL_TOML_FLOAT);
    e = ol_toml_next(e);
    OLT_CHECK_EQ(ol_toml_type(e), OL_TOML_STRING);
    e = ol_toml_next(e);
    OLT_CHECK_EQ(ol_toml_type(e), OL_TOML_ARRAY);
    e = ol_toml_next(e);
    OLT_CHECK_EQ(ol_toml_type(e), OL_TOML_TABLE);
    OLT_CHECK(ol_toml_get(e, "k") != NULL);
    e = ol_toml_next(e);
    OLT_CHECK_EQ(ol_toml_type(e), OL_TOML_BOOL);
    OLT_CHECK(ol_toml_next(e) == NULL);
    OLT_CHECK_EQ(ol_toml_count(at(d, "empty")), 0);
    v = at(d, "multi");
    OLT_CHECK_EQ(ol_toml_count(v), 3);
    OLT_CHECK_EQ(ol_toml_line(ol_toml_first(v)), 7);
    OLT_CHECK_EQ(I(d, "after"), 7);
    OLT_CHECK_EQ(ol_toml_line(at(d, "after")), 13);
    ol_toml_free(d);

    CHECK_BAD("a = [,]\n", "t.toml:1:6: expected a value, found ','");
    CHECK_BAD("a = [1,,2]\n", "t.toml:1:8: expected a value, found ','");
    CHECK_BAD("a = [1 2]\n", "t.toml:1:8: expected ',' or ']' in an array, found '2'");
    CHECK_BAD("a = [1, 2\n", "t.toml:1:5: unterminated array");
    CHECK_BAD("a = [1, 2\nb = 3\n", "t.toml:2:1: expected ',' or ']' in an array, found 'b'");
    CHECK_BAD("a = [\n", "t.toml:1:5: unterminated array");
    CHECK_BAD("a = [1] ]\n", "expected the end of the line after a value, found ']'");
}

OLT_TEST(toml_inline_tables)
{
    struct ol_toml_doc *d = ok(
        "name = { first = \"Tom\", last = \"Preston-Werner\" }\n"
        "point = { x = 1, y = 2 }\n"
        "animal = { type.name = \"pug\", type.size = 'small' }\n"
        "empty = {}\n"
        "nest = { a = { b = [ { c = 1 } ] } }\n");
    OLT_CHECK_STR(S(d, "name.first"), "Tom");
    OLT_CHECK_STR(S(d, "name.last"), "Preston-Werner");
    OLT_CHECK_EQ(I(d, "point.y"), 2);
    OLT_CHECK_STR(S(d, "animal.type.name"), "pug");
    OLT_CHECK_STR(S(d, "animal.type.size"), "small");
    OLT_CHECK_EQ(ol_toml_type(at(d, "empty")), OL_TOML_TABLE);
    OLT_CHECK_EQ(ol_toml_count(at(d, "empty")), 0);
    const struct ol_toml *b = at(d, "nest.a.b");
    OLT_CHECK(b && ol_toml_type(b) == OL_TOML_ARRAY);
    int64_t x = 0;
    OLT_CHECK(ol_toml_int(ol_toml_get(ol_toml_first(b), "c"), &x) == 0 && x == 1);
    ol_toml_free(d);

    CHECK_BAD("a = { x = 1, }\n", "t.toml:1:14: trailing comma in an inline table");
    CHECK_BAD("a = { x = 1,\n y = 2 }\n", "t.toml:1:13: newline inside an inline table");
    CHECK_BAD("a = { x = 1\n}\n", "t.toml:1:12: newline inside an inline table");
    CHECK_BAD("a = { x = 1 y = 2 }\n", "t.toml:1:13: expected ',' or '}' in an inline table, found 'y'");
    CHECK_BAD("a = { x = 1, x = 2 }\n", "t.toml:1:14: duplicate key \"a.x\" (first defined at line 1)");
    CHECK_BAD("a = { x = 1", "t.toml:1:5: unterminated inline table");
    CHECK_BAD("a = {,}\n", "t.toml:1:6: expected a key, found ','");
    /* sealed once written */
    CHECK_BAD("a = { x = 1 }\na.y = 2\n", "t.toml:2:1: cannot add keys to \"a\" with a dotted key: it is an inline table (line 1)");
    CHECK_BAD("a = { x = 1 }\n[a]\n", "t.toml:2:1: cannot define [a]: it is already an inline table (line 1)");
    CHECK_BAD("a = { x = 1 }\n[a.b]\n", "t.toml:2:2: cannot define a table under \"a\": it is an inline table (line 1)");
    CHECK_BAD("[p]\nq = { r = 1 }\n[p.q.s]\n", "t.toml:3:4: cannot define a table under \"p.q\": it is an inline table (line 2)");
}

OLT_TEST(toml_keys)
{
    struct ol_toml_doc *d = ok(
        "key = 1\nbare_key = 2\nbare-key = 3\n1234 = 4\n"
        "\"127.0.0.1\" = 5\n\"character encoding\" = 6\n'key2' = 7\n"
        "'quoted \"value\"' = 8\n\"\" = 9\n"
        "physical.color = \"orange\"\nphysical . shape = \"round\"\n"
        "site.\"google.com\" = true\n3.14159 = \"pi\"\n\"\\u00e9\" = 10\n");
    const struct ol_toml *root = ol_toml_root(d);
    OLT_CHECK_EQ(I(d, "bare-key"), 3);
    OLT_CHECK_EQ(I(d, "1234"), 4);
    int64_t x = 0;
    OLT_CHECK(ol_toml_int(ol_toml_get(root, "127.0.0.1"), &x) == 0 && x == 5);
    OLT_CHECK(ol_toml_int(ol_toml_get(root, "character encoding"), &x) == 0 && x == 6);
    OLT_CHECK(ol_toml_int(ol_toml_get(root, "key2"), &x) == 0 && x == 7);
    OLT_CHECK(ol_toml_int(ol_toml_get(root, "quoted \"value\""), &x) == 0 && x == 8);
    OLT_CHECK(ol_toml_int(ol_toml_get(root, ""), &x) == 0 && x == 9);
    OLT_CHECK(ol_toml_int(ol_toml_get(root, "\xC3\xA9"), &x) == 0 && x == 10);
    OLT_CHECK_STR(S(d, "physical.color"), "orange");
    OLT_CHECK_STR(S(d, "physical.shape"), "round");
    OLT_CHECK(ol_toml_get(at(d, "site"), "google.com") != NULL);
    OLT_CHECK_STR(S(d, "3.14159"), "pi");
    OLT_CHECK_EQ(ol_toml_type(at(d, "3")), OL_TOML_TABLE);
    ol_toml_free(d);

    CHECK_BAD("= 1\n", "t.toml:1:1: expected a key, found '='");
    CHECK_BAD("a b = 1\n", "t.toml:1:3: expected '=' after a key, found 'b'");
    CHECK_BAD("a. = 1\n", "t.toml:1:4: expected a key, found '='");
    CHECK_BAD("a\n", "t.toml:1:2: expected '=' after a key, found end of line");
    CHECK_BAD("a", "t.toml:1:2: expected '=' after a key, found end of input");
    CHECK_BAD("\"\"\"a\"\"\" = 1\n", "t.toml:1:3: expected '=' after a key, found '\"'");
    CHECK_BAD("a@b = 1\n", "t.toml:1:2: expected '=' after a key, found '@'");
    CHECK_BAD("\"a\nb\" = 1\n", "t.toml:1:3: newline in a single-line string");
}

OLT_TEST(toml_tables)
{
    struct ol_toml_doc *d = ok(
        "top = 0\n"
        "[table-1]\nkey1 = \"some string\"\nkey2 = 123\n"
        "[table-2]\nkey1 = \"another string\"\n"
        "[dog.\"tater.man\"]\ntype.name = \"pug\"\n"
        "[ j . \"k\" . 'l' ]   # spaces\nm = 1\n"
        "[x.y.z.w]\n"
        "[x]\nq = 2\n"
        "[fruit]\napple.color = \"red\"\napple.taste.sweet = true\n"
        "[fruit.apple.texture]\nsmooth = true\n");
    OLT_CHECK_EQ(I(d, "top"), 0);
    OLT_CHECK_EQ(I(d, "table-1.key2"), 123);
    OLT_CHECK_STR(S(d, "table-2.key1"), "another string");
    const struct ol_toml *t = ol_toml_get(at(d, "dog"), "tater.man");
    OLT_CHECK(t != NULL);
    OLT_CHECK_STR(ol_toml_str(ol_toml_get(ol_toml_get(t, "type"), "name"), NULL), "pug");
    OLT_CHECK_EQ(ol_toml_line(t), 7);
    OLT_CHECK_EQ(I(d, "j.k.l.m"), 1);
    OLT_CHECK_EQ(ol_toml_type(at(d, "x.y.z.w")), OL_TOML_TABLE);
    OLT_CHECK_EQ(I(d, "x.q"), 2);
    /* [x] was implied at line 11 and defined at line 12 */
    OLT_CHECK_EQ(ol_toml_line(at(d, "x")), 12);
    OLT_CHECK(ol_toml_get(at(d, "fruit.apple.taste"), "sweet") != NULL);
    OLT_CHECK(ol_toml_get(at(d, "fruit.apple.texture"), "smooth") != NULL);
    ol_toml_free(d);

    CHECK_BAD("[a]\nb = 1\n[a]\nc = 2\n", "t.toml:3:1: table [a] defined twice (first at line 1)");
    CHECK_BAD("[a]\nb = 1\n[a.b]\n", "t.toml:3:1: cannot define [a.b]: it is already an integer (line 2)");
    CHECK_BAD("[a]\nb = 1\n[a.b.c]\n", "t.toml:3:4: cannot define a table under \"a.b\": it is an integer (line 2)");
    CHECK_BAD("[a.b]\n[a]\n[a]\n", "t.toml:3:1: table [a] defined twice (first at line 2)");
    CHECK_BAD("[fruit]\napple.color = \"red\"\n[fruit.apple]\n", "t.toml:3:1: cannot define [fruit.apple]: it is already a table made by dotted keys (line 2)");
    CHECK_BAD("[fruit]\napple.taste.sweet = true\n[fruit.apple.taste]\n", "cannot define [fruit.apple.taste]: it is already a table made by dotted keys (line 2)");
    CHECK_BAD("a.b = 1\n[a]\n", "t.toml:2:1: cannot define [a]: it is already a table made by dotted keys (line 1)");
    /* dotted keys cannot reach into tables made by headers */
    CHECK_BAD("[a.b.c]\nz = 9\n[a]\nb.c.t = 1\n", "t.toml:4:1: cannot add keys to \"a.b\" with a dotted key: it is a table (line 1)");
    CHECK_BAD("[a.b.c.d]\nz = 9\n[a]\nb.c.d.k.t = 1\n", "t.toml:4:1: cannot add keys to \"a.b\" with a dotted key: it is a table (line 1)");
    CHECK_BAD("[a.b]\nz = 9\n[a]\nb.y = 1\n", "t.toml:4:1: cannot add keys to \"a.b\" with a dotted key: it is a table (line 1)");
    CHECK_BAD("[a.b.c]\nz = 9\n[[other]]\nx = 1\n[a]\nb.c.t = 1\n", "t.toml:6:1: cannot add keys to \"a.b\" with a dotted key: it is a table (line 1)");
    CHECK_BAD("a = 1\na.b = 2\n", "t.toml:2:1: cannot add keys to \"a\" with a dotted key: it is an integer (line 1)");
    CHECK_BAD("[]\n", "t.toml:1:2: expected a key, found ']'");
    CHECK_BAD("[a\n", "t.toml:1:3: expected ']' to close a table header, found end of line");
    CHECK_BAD("[a]]\n", "t.toml:1:4: expected the end of the line after a table header, found ']'");
    CHECK_BAD("[a] b = 1\n", "t.toml:1:5: expected the end of the line after a table header, found 'b'");
    CHECK_BAD("[a.]\n", "t.toml:1:4: expected a key, found ']'");
}

OLT_TEST(toml_arrays_of_tables)
{
    struct ol_toml_doc *d = ok(
        "[[products]]\nname = \"Hammer\"\nsku = 738594937\n"
        "[[products]]  # empty\n"
        "[[products]]\nname = \"Nail\"\ncolor = \"gray\"\n"
        "[[fruits]]\nname = \"apple\"\n"
        "[fruits.physical]\ncolor = \"red\"\n"
        "[[fruits.varieties]]\nname = \"red delicious\"\n"
        "[[fruits.varieties]]\nname = \"granny smith\"\n"
        "[[fruits]]\nname = \"banana\"\n"
        "[[fruits.varieties]]\nname = \"plantain\"\n"
        "[[x.y]]\n[x]\nz = 1\n");
    const struct ol_toml *p = at(d, "products");
    OLT_CHECK_EQ(ol_toml_type(p), OL_TOML_ARRAY);
    OLT_CHECK_EQ(ol_toml_count(p), 3);
    const struct ol_toml *e = ol_toml_first(p);
    OLT_CHECK_EQ(ol_toml_line(e), 1);
    OLT_CHECK_EQ(ol_toml_count(e), 2);
    e = ol_toml_next(e);
    OLT_CHECK_EQ(ol_toml_line(e), 4);
    OLT_CHECK_EQ(ol_toml_count(e), 0);
    e = ol_toml_next(e);
    OLT_CHECK_STR(ol_toml_str(ol_toml_get(e, "color"), NULL), "gray");
    const struct ol_toml *f = at(d, "fruits");
    OLT_CHECK_EQ(ol_toml_count(f), 2);
    const struct ol_toml *apple = ol_toml_first(f);
    OLT_CHECK_STR(ol_toml_str(ol_toml_get(ol_toml_get(apple, "physical"), "color"), NULL), "red");
    OLT_CHECK_EQ(ol_toml_count(ol_toml_get(apple, "varieties")), 2);
    const struct ol_toml *banana = ol_toml_next(apple);
    OLT_CHECK_EQ(ol_toml_count(ol_toml_get(banana, "varieties")), 1);
    OLT_CHECK_EQ(I(d, "x.z"), 1);
    ol_toml_free(d);

    CHECK_BAD("a = [1]\n[[a]]\n", "t.toml:2:1: cannot define [[a]]: it is already an array (line 1)");
    CHECK_BAD("[a]\n[[a]]\n", "t.toml:2:1: cannot define [[a]]: it is already a table (line 1)");
    CHECK_BAD("[[a]]\n[a]\n", "t.toml:2:1: cannot define [a]: it is already an array of tables (line 1)");
    CHECK_BAD("a = [{b = 1}]\n[a.c]\n", "t.toml:2:2: cannot define a table under \"a\": it is an array (line 1)");
    CHECK_BAD("[[fruit]]\n[fruit.variety]\n[[fruit.variety]]\n", "t.toml:3:1: cannot define [[fruit.variety]]: it is already a table (line 2)");
    CHECK_BAD("[[fruit]]\n[[fruit.physical]]\n[fruit.physical]\n", "t.toml:3:1: cannot define [fruit.physical]: it is already an array of tables (line 2)");
    CHECK_BAD("[[a]\n", "t.toml:1:4: expected ']]' to close an array-of-tables header, found ']'");
    CHECK_BAD("[[a]]\nb = 1\nb = 2\n", "t.toml:3:1: duplicate key \"a.b\" (first defined at line 2)");
}

OLT_TEST(toml_duplicate_keys)
{
    CHECK_BAD("name = \"Tom\"\nname = \"Pradyun\"\n", "t.toml:2:1: duplicate key \"name\" (first defined at line 1)");
    CHECK_BAD("spelling = \"favorite\"\n\"spelling\" = \"favourite\"\n", "t.toml:2:1: duplicate key \"spelling\" (first defined at line 1)");
    CHECK_BAD("a.b = 1\na.b = 2\n", "t.toml:2:3: duplicate key \"a.b\" (first defined at line 1)");
    CHECK_BAD("a.b = 1\na = 2\n", "t.toml:2:1: duplicate key \"a\" (first defined at line 1)");
    CHECK_BAD("[x.y]\n[x]\ny = 1\n", "t.toml:3:1: duplicate key \"x.y\" (first defined at line 1)");
    CHECK_BAD("\"a b\" = 1\n'a b' = 2\n", "t.toml:2:1: duplicate key \"a b\" (first defined at line 1)");
    /* the same key in different tables is fine */
    ol_toml_free(ok("a = 1\n[t]\na = 2\n[[u]]\na = 3\n[[u]]\na = 4\n"));
}

OLT_TEST(toml_utf8_and_control_bytes)
{
    struct ol_toml_doc *d = ok("# caf\xC3\xA9 \xF0\x9F\x98\x80\n\"\xE2\x82\xAC\" = '\xC3\xA9'\n");
    OLT_CHECK_STR(ol_toml_str(ol_toml_get(ol_toml_root(d), "\xE2\x82\xAC"), NULL), "\xC3\xA9");
    ol_toml_free(d);
    CHECK_BAD("a = \"\xC3\x28\"\n", "t.toml:1:6: invalid UTF-8 (byte 0xc3)");
    CHECK_BAD("# ok\n# \xFF\n", "t.toml:2:3: invalid UTF-8 (byte 0xff)");
    CHECK_BAD("a = '\xC0\xAF'\n", "invalid UTF-8 (byte 0xc0)");                 /* overlong */
    CHECK_BAD("a = '\xED\xA0\x80'\n", "invalid UTF-8 (byte 0xed)");             /* surrogate */
    CHECK_BAD("a = '\xF4\x90\x80\x80'\n", "invalid UTF-8 (byte 0xf4)");         /* > U+10FFFF */
    CHECK_BAD("a = '\xE2\x82'", "invalid UTF-8 (byte 0xe2)");                   /* truncated */
    CHECK_BAD("# bell \x07\n", "t.toml:1:8: control character 0x07 in a comment");
    CHECK_BAD("a = 1 # \x7f\n", "t.toml:1:9: control character 0x7f in a comment");
    CHECK_BAD("a = 1\rb = 2\n", "t.toml:1:6: carriage return not followed by a line feed");
    CHECK_BAD("# c\r", "t.toml:1:4: carriage return not followed by a line feed");
    OLT_CHECK(ol_toml_parse("t.toml", "a = 1\0\n", 7, terr, sizeof terr) == NULL);
    OLT_CHECK_STR(terr, "t.toml:1:6: expected the end of the line after a value, found byte 0x00");
    OLT_CHECK(ol_toml_parse("t.toml", "a = \"x\0\"\n", 9, terr, sizeof terr) == NULL);
    OLT_CHECK_STR(terr, "t.toml:1:7: control character 0x00 in a string (write it as an escape)");
    CHECK_BAD("x.\"a b\" = 1\nx.'a b' = 2\n", "t.toml:2:3: duplicate key x.\"a b\" (first defined at line 1)");
    /* CRLF documents */
    d = ok("a = 1\r\n# c\r\n[t]\r\nb = [\r\n 1,\r\n]\r\n");
    OLT_CHECK_EQ(ol_toml_count(at(d, "t.b")), 1);
    ol_toml_free(d);
}

/* Builds "a = [[[...1...]]]" with `depth` brackets. */
static char *nested_arrays(int depth)
{
    char *s = malloc((size_t)depth * 2 + 16);
    size_t n = 0;
    n += (size_t)sprintf(s, "a = ");
    for (int i = 0; i < depth; i++)
        s[n++] = '[';
    s[n++] = '1';
    for (int i = 0; i < depth; i++)
        s[n++] = ']';
    s[n] = 0;
    return s;
}

OLT_TEST(toml_limits)
{
    /* nesting: "a" is level 1, so 31 arrays fit and 32 do not */
    char *s = nested_arrays(31);
    ol_toml_free(ok(s));
    free(s);
    s = nested_arrays(32);
    CHECK_BAD(s, "t.toml:1:37: nesting deeper than 32 levels");
    free(s);
    s = nested_arrays(100000);
    CHECK_BAD(s, "nesting deeper than 32 levels");
    free(s);
    /* inline tables count too */
    char buf[4096];
    size_t n = (size_t)sprintf(buf, "a = ");
    for (int i = 0; i < 40; i++)
        n += (size_t)sprintf(buf + n, "{b = ");
    strcpy(buf + n, "1");
    CHECK_BAD(buf, "nesting deeper than 32 levels");
    /* dotted keys and headers: 32 parts fit, 33 do not */
    n = 0;
    for (int i = 0; i < 32; i++)
        n += (size_t)sprintf(buf + n, "%sk", i ? "." : "");
    strcpy(buf + n, " = 1\n");
    ol_toml_free(ok(buf));
    strcpy(buf + n, ".k = 1\n");
    CHECK_BAD(buf, "t.toml:1:65: key has more than 32 parts");
    buf[0] = '[';
    n = 1;
    for (int i = 0; i < 32; i++)
        n += (size_t)sprintf(buf + n, "%sk", i ? "." : "");
    strcpy(buf + n, "]\nx = 1\n");
    CHECK_BAD(buf, "t.toml:2:1: nesting deeper than 32 levels");
    /* nested arrays of tables add two levels each: 16 fit, 17 do not */
    n = 0;
    for (int i = 1; i <= 17; i++) {
        n += (size_t)sprintf(buf + n, "[[");
        for (int j = 0; j < i; j++)
            n += (size_t)sprintf(buf + n, "%sa", j ? "." : "");
        n += (size_t)sprintf(buf + n, "]]\n");
        if (i == 16)
            ol_toml_free(ok(buf));
    }
    CHECK_BAD(buf, "t.toml:17:1: nesting deeper than 32 levels");

    /* size */
    size_t big = OL_TOML_MAX_INPUT + 1;
    char *b = malloc(big);
    memset(b, '\n', big);
    OLT_CHECK(ol_toml_parse("big.toml", b, big, terr, sizeof terr) == NULL);
    OLT_CHECK_STR(terr, "big.toml:1:1: input is 1048577 bytes; the limit is 1048576 (1 MiB)");
    struct ol_toml_doc *d = ol_toml_parse("big.toml", b, big - 1, terr, sizeof terr);
    OLT_CHECK(d != NULL);
    ol_toml_free(d);
    free(b);
}

OLT_TEST_T(toml_large_documents_are_fast, 20)
{
    /* 60k keys in one table and a 300k-element array: duplicate checks
     * must not be quadratic. */
    size_t cap = OL_TOML_MAX_INPUT;
    char *b = malloc(cap);
    size_t n = 0;
    for (int i = 0; i < 60000; i++)
        n += (size_t)sprintf(b + n, "k%d=%d\n", i, i);
    struct ol_toml_doc *d = ol_toml_parse("big", b, n, terr, sizeof terr);
    OLT_CHECK(d != NULL);
    OLT_CHECK_EQ(ol_toml_count(ol_toml_root(d)), 60000);
    OLT_CHECK(ol_toml_get(ol_toml_root(d), "k59999") != NULL);
    ol_toml_free(d);
    n = (size_t)sprintf(b, "a=[");
    while (n + 4 < cap)
        n += (size_t)sprintf(b + n, "1,");
    b[n++] = ']';
    d = ol_toml_parse("big", b, n, terr, sizeof terr);
    OLT_CHECK(d != NULL);
    OLT_CHECK(ol_toml_count(ol_toml_get(ol_toml_root(d), "a")) > 500000);
    ol_toml_free(d);
    /* the same key repeated at the end of a big table is still found */
    n = 0;
    for (int i = 0; i < 50000; i++)
        n += (size_t)sprintf(b + n, "k%d=%d\n", i, i);
    n += (size_t)sprintf(b + n, "k7=1\n");
    OLT_CHECK(ol_toml_parse("big", b, n, terr, sizeof terr) == NULL);
    OLT_CHECK_STR(terr, "big:50001:1: duplicate key \"k7\" (first defined at line 8)");
    free(b);
}

OLT_TEST(toml_input_is_exactly_len_bytes)
{
    /* bytes after len would change the meaning if they were read */
    const char *s = "a = 12345\nb = 2";
    struct ol_toml_doc *d = ol_toml_parse("t", s, 7, terr, sizeof terr);
    OLT_CHECK(d != NULL);
    OLT_CHECK_EQ(I(d, "a"), 123);
    ol_toml_free(d);
    d = ol_toml_parse("t", "a = \"xy\"zzz", 8, terr, sizeof terr);
    OLT_CHECK(d != NULL);
    OLT_CHECK_STR(S(d, "a"), "xy");
    ol_toml_free(d);
    OLT_CHECK(ol_toml_parse("t", "a = \"xy\"", 7, terr, sizeof terr) == NULL);
    OLT_CHECK_STR(terr, "t:1:5: unterminated string");
    OLT_CHECK(ol_toml_parse("t", "a = true", 7, terr, sizeof terr) == NULL);
    OLT_CHECK_STR(terr, "t:1:5: invalid value tru (strings must be quoted)");
    /* a small error buffer is filled, cut and terminated */
    char small[12];
    OLT_CHECK(ol_toml_parse("t", "a = ?", 5, small, sizeof small) == NULL);
    OLT_CHECK_STR(small, "t:1:5: expe");
    OLT_CHECK(ol_toml_parse("t", "a = ?", 5, NULL, 0) == NULL);
}

OLT_TEST(toml_describe)
{
    struct ol_toml_doc *d = ok(
        "s = \"big\"\ni = -7\nf = 0.5\nb = true\na = []\nt = {}\n"
        "q = \"say \\\"hi\\\"\\n\"\n"
        "l = \"0123456789012345678901234567890123456789012345678901234567890123456789\"\n");
    char buf[128];
    ol_toml_describe(at(d, "s"), buf, sizeof buf);
    OLT_CHECK_STR(buf, "string \"big\"");
    ol_toml_describe(at(d, "i"), buf, sizeof buf);
    OLT_CHECK_STR(buf, "integer -7");
    ol_toml_describe(at(d, "f"), buf, sizeof buf);
    OLT_CHECK_STR(buf, "float 0.5");
    ol_toml_describe(at(d, "b"), buf, sizeof buf);
    OLT_CHECK_STR(buf, "boolean true");
    ol_toml_describe(at(d, "a"), buf, sizeof buf);
    OLT_CHECK_STR(buf, "array");
    ol_toml_describe(at(d, "t"), buf, sizeof buf);
    OLT_CHECK_STR(buf, "table");
    ol_toml_describe(at(d, "q"), buf, sizeof buf);
    OLT_CHECK_STR(buf, "string \"say \\\"hi\\\"\\n\"");
    ol_toml_describe(at(d, "l"), buf, sizeof buf);
    OLT_CHECK_STR(buf, "string \"012345678901234567890123456789012345678901234567...\"");
    ol_toml_describe(at(d, "l"), buf, 10);
    OLT_CHECK_STR(buf, "string \"0");
    OLT_CHECK_STR(ol_toml_type_name(OL_TOML_INT), "integer");
    OLT_CHECK_STR(ol_toml_type_name(OL_TOML_BOOL), "boolean");
    ol_toml_free(d);
}

/* Documents whose every prefix is parsed against a guard page. */
static const char *const guard_docs[] = {
    "a = 1\nb = -0x1f\n",
    "a = 0x1F",
    "a = 0o17",
    "a = 0b101",
    "a = 1_000",
    "a = -1.5e-3",
    "f = 6.626e-34",
    "a = inf",
    "a = -nan",
    "a = true",
    "a = false",
    "s = \"basic \\t \\u00e9 \\U0001F600 \\\" end\"",
    "s = 'literal'",
    "s = \"\"\"\nmulti \\\n   line \"\" \"\"\"",
    "s = '''\nraw ''' ",
    "s = '''x'''''",
    "s = \"\"\"x\"\"\"\"\"",
    "s = \"caf\xC3\xA9 \xF0\x9F\x98\x80\"",
    "# comment \xE2\x82\xAC\r\n",
    "[table]\nk = 1",
    "[ a . \"b c\" . 'd' ]",
    "[[aot]]\n[[aot]]\nx = [1, 2,\n 3, ] # c",
    "t = { a = 1, b.c = [ {d = 'e'} ] }",
    "a.b.c = 1",
    "\"quoted key\" = 2",
    "a = [[1, 2], [\"x\", 'y'], []]",
    "a = 1979-05-27",
    "a = \"\\u12",
    "a = \"\\U0001F6",
    "a = \"\\",
    "a = \"\"\"x\\",
    "\357\273\277a = 1",
    "a = 1\r",
    "a = { x = 1 }\n",
};

OLT_TEST(toml_guard_page)
{
    long pg = sysconf(_SC_PAGESIZE);
    char *mem = mmap(NULL, (size_t)pg * 2, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    OLT_CHECK(mem != MAP_FAILED);
    OLT_CHECK(mprotect(mem + pg, (size_t)pg, PROT_NONE) == 0);
    char *end = mem + pg;
    int parsed = 0;
    for (size_t i = 0; i < sizeof guard_docs / sizeof guard_docs[0]; i++) {
        size_t len = strlen(guard_docs[i]);
        for (size_t k = 0; k <= len; k++) {
            memcpy(end - k, guard_docs[i], k);
            struct ol_toml_doc *d = ol_toml_parse("g", end - k, k, terr, sizeof terr);
            parsed += d != NULL;
            ol_toml_free(d);
        }
        /* the full document is valid unless it is one of the broken ones */
    }
    OLT_CHECK(parsed > 100);
    /* a valid document ending exactly at the guard is read in full */
    const char *s = "a = 123";
    memcpy(end - 7, s, 7);
    struct ol_toml_doc *d = ol_toml_parse("g", end - 7, 7, terr, sizeof terr);
    OLT_CHECK(d != NULL);
    OLT_CHECK_EQ(I(d, "a"), 123);
    ol_toml_free(d);
    munmap(mem, (size_t)pg * 2);
}
