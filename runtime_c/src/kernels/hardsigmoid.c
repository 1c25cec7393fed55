/* HardSigmoid: Y = clamp(alpha * X + beta, 0, 1). Gradient: dX = alpha * dY where 0 < alpha * X + beta < 1
 * strictly (0 at the kinks, as torch), else 0. */
#include "poet/kernels.h"

void poet_hardsigmoid_f32(const float *X, float *Y, int32_t n, float alpha, float beta)
{
    for (int32_t i = 0; i < n; ++i) {
        const float t = X[i] * alpha + beta;
        Y[i] = t < 0.0f ? 0.0f : (t > 1.0f ? 1.0f : t);
    }
}

void poet_hardsigmoid_grad_f32(const float *X, const float *dY, float *dX, int32_t n, float alpha, float beta)
{
    for (int32_t i = 0; i < n; ++i) {
        const float t = X[i] * alpha + beta;
        dX[i] = (t > 0.0f && t < 1.0f) ? dY[i] * alpha : 0.0f;
    }
}
