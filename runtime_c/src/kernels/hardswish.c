/* HardSwish: Y = X * min(max(X + 3, 0), 6) / 6 (torch's order of operations). Gradient: 0 for X <= -3,
 * dY * (X / 3 + 0.5) for -3 < X < 3, dY for X >= 3 (torch's values at the kinks). */
#include "poet/kernels.h"

void poet_hardswish_f32(const float *X, float *Y, int32_t n)
{
    for (int32_t i = 0; i < n; ++i) {
        float t = X[i] + 3.0f;
        t = t < 0.0f ? 0.0f : (t > 6.0f ? 6.0f : t);
        Y[i] = X[i] * t / 6.0f;
    }
}

void poet_hardswish_grad_f32(const float *X, const float *dY, float *dX, int32_t n)
{
    for (int32_t i = 0; i < n; ++i) {
        const float x = X[i];
        dX[i] = x <= -3.0f ? 0.0f : (x < 3.0f ? dY[i] * (x / 3.0f + 0.5f) : dY[i]);
    }
}
