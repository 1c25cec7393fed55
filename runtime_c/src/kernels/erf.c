#include "poet/kernels.h"

void poet_erf_f32(const float *X, float *Y, int32_t n)
{
    for (int32_t i = 0; i < n; ++i) Y[i] = poet_erff(X[i]);
}

void poet_erf_grad_f32(const float *X, const float *dY, float *dX, int32_t n)
{
    for (int32_t i = 0; i < n; ++i) dX[i] = dY[i] * 1.12837917f * poet_expf(-(X[i] * X[i])); /* 2/sqrt(pi) */
}
