/*
 * fuzz_toml.c - libFuzzer target for the TOML reader and the config loader.
 *
 * Each input is (1) parsed by ol_toml_parse() and, when valid, walked with
 * every accessor; (2) loaded as a config file by ol_config_load_buffer(),
 * and when it loads and finalizes, dumped, reloaded and dumped again: the
 * two dumps must be identical; (3) split at NUL bytes into flag arguments
 * and environment entries for ol_config_apply_args()/apply_env().
 * libFuzzer hands over exactly `size` bytes in a heap block of that size,
 * so ASan reports any read past the end.
 *
 *   clang -std=c17 -D_GNU_SOURCE -g -O1 -Iinclude -Isrc \
 *         -fsanitize=fuzzer,address,undefined tests/fuzz/fuzz_toml.c \
 *         src/base/toml.c src/base/config.c -o fuzz_toml -lm
 *   ./fuzz_toml -max_total_time=60 tests/fuzz/seeds/fuzz_toml
 */
#include "base/config.h"
#include "base/toml.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static size_t walk(const struct ol_toml *v, int depth)
{
    char buf[96];
    size_t n = 1;
    int64_t i;
    double f;
    bool b;
    size_t len;
    if (depth > OL_TOML_MAX_DEPTH + 1)
        __builtin_trap();
    ol_toml_describe(v, buf, sizeof buf);
    ol_toml_describe(v, buf, 5);
    if (strlen(buf) >= 5)
        __builtin_trap();
    (void)ol_toml_line(v);
    (void)ol_toml_col(v);
    (void)ol_toml_type_name(ol_toml_type(v));
    switch (ol_toml_type(v)) {
    case OL_TOML_STRING: {
        const char *s = ol_toml_str(v, &len);
        if (!s || strlen(s) != len)     /* no NUL inside strings */
            __builtin_trap();
        break;
    }
    case OL_TOML_INT:
        if (ol_toml_int(v, &i))
            __builtin_trap();
        break;
    case OL_TOML_FLOAT:
        if (ol_toml_float(v, &f))
            __builtin_trap();
        break;
    case OL_TOML_BOOL:
        if (ol_toml_bool(v, &b))
            __builtin_trap();
        break;
    default: {
        size_t count = 0;
        for (const struct ol_toml *c = ol_toml_first(v); c; c = ol_toml_next(c)) {
            count++;
            const char *k = ol_toml_key(c);
            if (ol_toml_type(v) == OL_TOML_TABLE) {
                /* ol_toml_get is linear: check the first few only */
                if (!k || (count <= 64 && ol_toml_get(v, k) == NULL))
                    __builtin_trap();
            } else if (k) {
                __builtin_trap();
            }
            n += walk(c, depth + 1);
        }
        if (count != ol_toml_count(v))
            __builtin_trap();
        break;
    }
    }
    return n;
}

static char *dump(const struct ol_config *c, size_t *len)
{
    char *buf = NULL;
    FILE *f = open_memstream(&buf, len);
    if (!f)
        abort();
    ol_config_dump(f, c, true);
    fclose(f);
    return buf;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct ol_config *c, *c2;
    char err[256];
    const char *in = (const char *)data;

    if (!c) {
        c = malloc(sizeof *c);
        c2 = malloc(sizeof *c2);
        if (!c || !c2)
            abort();
    }

    /* 1: the reader */
    struct ol_toml_doc *d = ol_toml_parse("fuzz", in, size, err, sizeof err);
    if (d) {
        walk(ol_toml_root(d), 0);
        ol_toml_free(d);
    } else if (strnlen(err, sizeof err) >= sizeof err || !err[0]) {
        __builtin_trap();
    }
    int64_t iv;
    double fv;
    (void)ol_toml_number(in, size < 64 ? size : 64, &iv, &fv, NULL);

    /* 2: the config loader, with a dump round trip when it accepts */
    ol_config_defaults(c);
    if (ol_config_load_buffer(c, "fuzz.toml", in, size, err, sizeof err) == 0 &&
        ol_config_finalize(c, err, sizeof err) == 0) {
        size_t l1, l2;
        char *t1 = dump(c, &l1);
        ol_config_defaults(c2);
        if (ol_config_load_buffer(c2, "dump", t1, l1, err, sizeof err) != 0 ||
            ol_config_finalize(c2, err, sizeof err) != 0) {
            fprintf(stderr, "dump does not reload: %s\n%s\n", err, t1);
            __builtin_trap();
        }
        char *t2 = dump(c2, &l2);
        if (l1 != l2 || memcmp(t1, t2, l1) != 0) {
            fprintf(stderr, "dump changed on reload:\n%s\n---\n%s\n", t1, t2);
            __builtin_trap();
        }
        free(t1);
        free(t2);
    }

    /* 3: the same bytes as NUL-separated flags and environment entries */
    if (size <= 4096) {
        char *copy = malloc(size + 1);
        char *argv[34], *envp[33];
        int argc = 0, envc = 0;
        memcpy(copy, in, size);
        copy[size] = 0;
        argv[argc++] = (char *)"openlaked";
        for (char *p = copy; p <= copy + size && argc < 33; p += strlen(p) + 1) {
            argv[argc++] = p;
            if (envc < 32)
                envp[envc++] = p;
        }
        argv[argc] = NULL;
        envp[envc] = NULL;
        const char *path;
        ol_config_defaults(c);
        (void)ol_config_find_file_arg(argc, argv, &path, err, sizeof err);
        if (ol_config_apply_args(c, argc, argv, err, sizeof err) == 0)
            (void)ol_config_finalize(c, err, sizeof err);
        ol_config_defaults(c);
        if (ol_config_apply_env(c, envp, err, sizeof err) == 0)
            (void)ol_config_finalize(c, err, sizeof err);
        free(copy);
    }
    return 0;
}
