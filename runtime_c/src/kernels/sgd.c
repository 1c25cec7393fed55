#include "poet/kernels.h"

void poet_sgd_f32(float *p, const float *g, float lr, int32_t n)
{
    for (int32_t i = 0; i < n; ++i) p[i] -= lr * g[i];
}
