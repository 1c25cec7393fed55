#include "poet/kernels.h"

void poet_copy_f32(const float *X, float *Y, int32_t n)
{
    for (int32_t i = 0; i < n; ++i) Y[i] = X[i];
}
