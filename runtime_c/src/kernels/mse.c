#include "poet/kernels.h"

void poet_mse_f32(const float *y, const float *t, float *loss, int32_t n)
{
    float s = 0.0f;
    for (int32_t i = 0; i < n; ++i) {
        float d = y[i] - t[i];
        s += d * d;
    }
    *loss = s / (float)n;
}

void poet_mse_grad_f32(const float *y, const float *t, float *dy, int32_t n)
{
    const float k = 2.0f / (float)n;
    for (int32_t i = 0; i < n; ++i) dy[i] = (y[i] - t[i]) * k;
}
