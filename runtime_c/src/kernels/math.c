/* Deterministic expf/logf: plain float arithmetic, identical bits on host and Cortex-M with
 * -ffp-contract=off (libm implementations differ between glibc and newlib). Max error ~2 ulp. */
#include "poet/kernels.h"

#include <string.h>

static float from_bits(uint32_t u) { float f; memcpy(&f, &u, sizeof f); return f; }
static uint32_t to_bits(float f) { uint32_t u; memcpy(&u, &f, sizeof u); return u; }

float poet_expf(float x)
{
    if (x != x) return x;
    if (x > 88.72283f) return from_bits(0x7f800000u);
    if (x < -103.97208f) return 0.0f;
    /* x = n ln2 + r, |r| <= ln2/2; ln2 split in two for an exact n*ln2_hi */
    float fn = x * 1.44269504f;
    int32_t n = (int32_t)(fn + (fn >= 0.0f ? 0.5f : -0.5f));
    float r = (x - (float)n * 0.693145752f) - (float)n * 1.42860677e-6f;
    /* e^r by a degree-7 Taylor polynomial (error < 1e-9 on |r| <= 0.35), Horner */
    float p = 1.0f / 5040.0f;
    p = p * r + 1.0f / 720.0f;
    p = p * r + 1.0f / 120.0f;
    p = p * r + 1.0f / 24.0f;
    p = p * r + 1.0f / 6.0f;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    /* scale by 2^n in two steps so subnormal results stay right */
    int32_t n1 = n / 2, n2 = n - n1;
    return p * from_bits((uint32_t)(n1 + 127) << 23) * from_bits((uint32_t)(n2 + 127) << 23);
}

float poet_logf(float x)
{
    if (x != x || x < 0.0f) return from_bits(0x7fc00000u);
    if (x == 0.0f) return from_bits(0xff800000u);
    uint32_t u = to_bits(x);
    int32_t e = 0;
    if (u < 0x00800000u) { x *= 8388608.0f; u = to_bits(x); e = -23; } /* subnormal */
    if (u >= 0x7f800000u) return x;
    e += (int32_t)(u >> 23) - 127;
    float m = from_bits((u & 0x007fffffu) | 0x3f800000u); /* m in [1, 2) */
    if (m > 1.41421356f) { m *= 0.5f; e += 1; }
    /* log(m) = 2 atanh(s), s = (m - 1) / (m + 1), |s| <= 0.1716 */
    float s = (m - 1.0f) / (m + 1.0f), s2 = s * s;
    float q = 2.0f / 11.0f;
    q = q * s2 + 2.0f / 9.0f;
    q = q * s2 + 2.0f / 7.0f;
    q = q * s2 + 2.0f / 5.0f;
    q = q * s2 + 2.0f / 3.0f;
    float logm = 2.0f * s + s * s2 * q;
    return (float)e * 0.693145752f + ((float)e * 1.42860677e-6f + logm);
}
