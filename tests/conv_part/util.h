/* Helpers shared by the part-kernel checkers of tests/conv_part (check.c: channel tiles, check_rows.c: row
 * tiles): random test values, guard zones after outputs, bitwise comparison of float arrays. */
#ifndef POET_TEST_CONV_PART_UTIL_H
#define POET_TEST_CONV_PART_UTIL_H

#include <stdint.h>
#include <string.h>

#define GUARD 16
static const uint32_t guard_bits = 0xffc0dead; /* a NaN pattern */
static uint32_t rng; /* the state of rnd(): each case seeds it */

static inline float rnd(void)
{
    rng = rng * 1664525u + 1013904223u;
    if ((rng & 0x3f0u) == 0u) return (rng & 1u) ? -0.0f : 0.0f; /* exact zeros of both signs */
    return (float)((int32_t)(rng >> 9) - (1 << 22)) / 4194304.0f;
}

static inline void fill(float *p, int32_t n)
{
    for (int32_t i = 0; i < n; ++i) p[i] = rnd();
}

static inline void set_guard(float *p, int32_t n)
{
    for (int32_t i = 0; i < GUARD; ++i) memcpy(&p[n + i], &guard_bits, 4);
}

static inline int guard_hit(const float *p, int32_t n)
{
    for (int32_t i = 0; i < GUARD; ++i)
        if (memcmp(&p[n + i], &guard_bits, 4) != 0) return 1;
    return 0;
}

/* the number of elements of a and b whose bits differ */
static inline int32_t diff(const float *a, const float *b, int32_t n)
{
    int32_t bad = 0;
    for (int32_t i = 0; i < n; ++i)
        if (memcmp(&a[i], &b[i], 4) != 0) ++bad;
    return bad;
}

#endif
