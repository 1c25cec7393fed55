#include "poet/kernels.h"

void poet_tanh_f32(const float *X, float *Y, int32_t n)
{
    for (int32_t i = 0; i < n; ++i) Y[i] = poet_tanhf(X[i]);
}

void poet_tanh_grad_f32(const float *Y, const float *dY, float *dX, int32_t n)
{
    for (int32_t i = 0; i < n; ++i) dX[i] = dY[i] * (1.0f - Y[i] * Y[i]);
}
