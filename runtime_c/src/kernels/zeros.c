#include "poet/kernels.h"

void poet_zeros_f32(float *Y, int32_t n)
{
    for (int32_t i = 0; i < n; ++i) Y[i] = 0.0f;
}
