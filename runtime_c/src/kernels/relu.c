#include "poet/kernels.h"

void poet_relu_f32(const float *X, float *Y, int32_t n)
{
    for (int32_t i = 0; i < n; ++i) Y[i] = X[i] > 0.0f ? X[i] : 0.0f;
}

void poet_relu_grad_f32(const float *Y, const float *dY, float *dX, int32_t n)
{
    for (int32_t i = 0; i < n; ++i) dX[i] = Y[i] > 0.0f ? dY[i] : 0.0f;
}
