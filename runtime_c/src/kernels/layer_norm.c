#include <math.h>

#include "poet/kernels.h"

/* mean and 1/sqrt(var + eps) of one row of n values (two passes) */
static float row_stats(const float *x, int32_t n, float eps, float *rstd)
{
    float s = 0.0f, v = 0.0f;
    for (int32_t j = 0; j < n; ++j) s += x[j];
    const float mean = s / (float)n;
    for (int32_t j = 0; j < n; ++j) {
        float d = x[j] - mean;
        v += d * d;
    }
    *rstd = 1.0f / sqrtf(v / (float)n + eps);
    return mean;
}

void poet_layer_norm_f32(const float *X, const float *S, const float *B, float *Y, int32_t outer, int32_t n,
                         float eps)
{
    for (int32_t o = 0; o < outer; ++o) {
        const float *x = X + o * n;
        float rstd, mean = row_stats(x, n, eps, &rstd);
        for (int32_t j = 0; j < n; ++j) {
            float y = (x[j] - mean) * rstd * S[j];
            Y[o * n + j] = B ? y + B[j] : y;
        }
    }
}

void poet_layer_norm_grad_f32(const float *X, const float *S, const float *dY, float *dX, int32_t outer,
                              int32_t n, float eps)
{
    for (int32_t o = 0; o < outer; ++o) {
        const float *x = X + o * n, *dy = dY + o * n;
        float rstd, mean = row_stats(x, n, eps, &rstd), sg = 0.0f, sgx = 0.0f;
        for (int32_t j = 0; j < n; ++j) {
            float g = dy[j] * S[j];
            sg += g;
            sgx += g * ((x[j] - mean) * rstd);
        }
        sg /= (float)n;
        sgx /= (float)n;
        for (int32_t j = 0; j < n; ++j) {
            float xhat = (x[j] - mean) * rstd;
            dX[o * n + j] = rstd * (dy[j] * S[j] - sg - xhat * sgx);
        }
    }
}

void poet_layer_norm_scale_grad_f32(const float *X, const float *dY, float *dS, int32_t outer, int32_t n, float eps)
{
    for (int32_t j = 0; j < n; ++j) dS[j] = 0.0f;
    for (int32_t o = 0; o < outer; ++o) {
        const float *x = X + o * n;
        float rstd, mean = row_stats(x, n, eps, &rstd);
        for (int32_t j = 0; j < n; ++j) dS[j] += dY[o * n + j] * ((x[j] - mean) * rstd);
    }
}
