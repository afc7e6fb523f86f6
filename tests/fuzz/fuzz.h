/*
 * fuzz.h - helpers shared by the fuzz targets (tests/fuzz/fuzz_*.c).
 *
 * Each target defines LLVMFuzzerTestOneInput. Built with clang and
 * -fsanitize=fuzzer (ZKELECT_FUZZ=ON) it is a libFuzzer binary; in the
 * normal builds it is linked with replay.c, which feeds it every file of the
 * committed corpus (a ctest entry per target), so crashes found once stay
 * tested with gcc and in the ASan build.
 *
 * Read the input one fz_* call per statement: the order in which a call's
 * arguments are evaluated differs between gcc and clang, and a replay must
 * decode what the fuzzer decoded.
 *
 * FZ_ASSERT aborts (a finding for libFuzzer, a failed replay otherwise).
 */
#ifndef ZKELECT_FUZZ_H
#define ZKELECT_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FZ_ASSERT(c)                                                                  \
    do {                                                                              \
        if (!(c)) {                                                                   \
            fprintf(stderr, "%s:%d: fuzz assertion failed: %s\n", __FILE__, __LINE__, #c); \
            abort();                                                                  \
        }                                                                             \
    } while (0)

/* A reader over the input; reads past the end give zeros. */
struct fz {
    const uint8_t *p;
    size_t n;
};

static inline unsigned fz_byte(struct fz *f)
{
    if (f->n == 0)
        return 0;
    f->n--;
    return *f->p++;
}

static inline uint32_t fz_u32(struct fz *f)
{
    uint32_t v = 0;
    for (int i = 0; i < 4; i++)
        v = v << 8 | fz_byte(f);
    return v;
}

static inline uint64_t fz_u64(struct fz *f)
{
    uint64_t hi = fz_u32(f);         /* one read per statement: a defined order */
    return hi << 32 | fz_u32(f);
}

/* A malloc'd NUL-terminated string: a length byte (capped at max) and that
 * many bytes (NUL bytes inside stay: the C string ends there). */
static inline char *fz_str(struct fz *f, size_t max)
{
    size_t len = fz_byte(f);
    if (len > max)
        len = max;
    if (len > f->n)
        len = f->n;
    char *s = malloc(len + 1);
    if (s == NULL)
        abort();
    memcpy(s, f->p, len);
    s[len] = '\0';
    f->p += len;
    f->n -= len;
    return s;
}

/* Splits a copy of the input at NUL bytes: *count fields, each a
 * NUL-terminated string inside the returned buffer (free it). */
static inline char *fz_fields(const uint8_t *data, size_t size, char **fields, int max, int *count)
{
    char *buf = malloc(size + 1);
    int k = 0;
    if (buf == NULL)
        abort();
    memcpy(buf, data, size);
    buf[size] = '\0';
    fields[k++] = buf;
    for (size_t i = 0; i < size && k < max; i++)
        if (buf[i] == '\0')
            fields[k++] = buf + i + 1;
    *count = k;
    return buf;
}

/* 1 if s has a control character (C0 or DEL). */
static inline int fz_has_ctl(const char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f)
            return 1;
    return 0;
}

#endif
