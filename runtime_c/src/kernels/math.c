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

/* tanh: odd polynomial x + x^3 T(x^2) below 0.625 (fitted at Chebyshev nodes), else
 * 1 - 2 / (e^{2|x|} + 1); saturates to +-1 from 9.1 (tanh(9.1) rounds to 1 in float).
 * Max error 1.35 ulp (at x = 0.6326), measured over every finite float against double libm tanh. */
float poet_tanhf(float x)
{
    if (x != x) return x;
    float a = x < 0.0f ? -x : x, y;
    if (a < 0.625f) {
        float t = x * x;
        float p = 2.3136155e-03f;
        p = p * t + -8.365284e-03f;
        p = p * t + 2.1776699e-02f;
        p = p * t + -5.3960457e-02f;
        p = p * t + 1.333331e-01f;
        p = p * t + -3.3333334e-01f;
        return x + x * t * p;
    }
    if (a >= 9.1f) y = 1.0f;
    else y = 1.0f - 2.0f / (poet_expf(2.0f * a) + 1.0f);
    return x < 0.0f ? -y : y;
}

/* erf: x + x (E(x^2) - 1) below 0.9; 1 - e^{-x^2} Q(x) on [0.9, 3.95) with Q(x) = erfc(x) e^{x^2} a polynomial in
 * x - 2.425 (both fitted at Chebyshev nodes); +-1 from 3.95 (erf(3.95) rounds to 1 in float).
 * Max error 1.22 ulp (at x = 0.9019), measured over every finite float against double libm erf. */
float poet_erff(float x)
{
    if (x != x) return x;
    float a = x < 0.0f ? -x : x, y;
    if (a < 0.9f) {
        float t = x * x;
        float p = 8.578745e-05f;
        p = p * t + -8.192115e-04f;
        p = p * t + 5.205426e-03f;
        p = p * t + -2.6861208e-02f;
        p = p * t + 1.1283729e-01f;
        p = p * t + -3.7612635e-01f;
        p = p * t + 1.2837917e-01f; /* 2/sqrt(pi) - 1: x + x p keeps the leading term exact */
        return x + x * p;
    }
    if (a >= 3.95f) {
        y = 1.0f;
    } else {
        float v = a - 2.425f;
        float q = 1.3882952e-07f;
        q = q * v + -5.48795e-07f;
        q = q * v + 1.1496074e-06f;
        q = q * v + -4.461085e-06f;
        q = q * v + 1.9412391e-05f;
        q = q * v + -7.031606e-05f;
        q = q * v + 2.4433693e-04f;
        q = q * v + -8.3523104e-04f;
        q = q * v + 2.7609468e-03f;
        q = q * v + -8.78499e-03f;
        q = q * v + 2.6824795e-02f;
        q = q * v + -7.822734e-02f;
        q = q * v + 2.1652615e-01f;
        y = 1.0f - poet_expf(-(a * a)) * q;
    }
    return x < 0.0f ? -y : y;
}
