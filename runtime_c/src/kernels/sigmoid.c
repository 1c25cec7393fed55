#include "poet/kernels.h"

void poet_sigmoid_f32(const float *X, float *Y, int32_t n)
{
    for (int32_t i = 0; i < n; ++i) Y[i] = 1.0f / (1.0f + poet_expf(-X[i]));
}

void poet_sigmoid_grad_f32(const float *Y, const float *dY, float *dX, int32_t n)
{
    for (int32_t i = 0; i < n; ++i) dX[i] = dY[i] * Y[i] * (1.0f - Y[i]);
}
