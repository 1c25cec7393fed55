/* BatchNormalization, inference form (frozen running mean/var), over X[N, C, S] (S = spatial size),
 * and its gradients. Per channel k = scale / sqrtf(var + eps) (sqrtf is correctly rounded). */
#include <math.h>

#include "poet/kernels.h"

void poet_batchnorm_f32(const float *X, const float *scale, const float *bias, const float *mean,
                        const float *var, float *Y, int32_t N, int32_t C, int32_t S, float eps)
{
    for (int32_t c = 0; c < C; ++c) {
        const float k = scale[c] / sqrtf(var[c] + eps);
        for (int32_t n = 0; n < N; ++n) {
            const int32_t p = (n * C + c) * S;
            for (int32_t s = 0; s < S; ++s) Y[p + s] = (X[p + s] - mean[c]) * k + bias[c];
        }
    }
}

void poet_batchnorm_grad_input_f32(const float *dY, const float *scale, const float *var, float *dX, int32_t N,
                                   int32_t C, int32_t S, float eps)
{
    for (int32_t c = 0; c < C; ++c) {
        const float k = scale[c] / sqrtf(var[c] + eps);
        for (int32_t n = 0; n < N; ++n) {
            const int32_t p = (n * C + c) * S;
            for (int32_t s = 0; s < S; ++s) dX[p + s] = dY[p + s] * k;
        }
    }
}

/* dscale[c] = (sum over (n, s) of dY * (X - mean[c])) / sqrtf(var[c] + eps) */
void poet_batchnorm_grad_scale_f32(const float *X, const float *dY, const float *mean, const float *var,
                                   float *dscale, int32_t N, int32_t C, int32_t S, float eps)
{
    for (int32_t c = 0; c < C; ++c) {
        float acc = 0.0f;
        for (int32_t n = 0; n < N; ++n) {
            const int32_t p = (n * C + c) * S;
            for (int32_t s = 0; s < S; ++s) acc += dY[p + s] * (X[p + s] - mean[c]);
        }
        dscale[c] = acc / sqrtf(var[c] + eps);
    }
}

void poet_batchnorm_grad_scale_part_f32(const float *X, const float *dY, const float *mean, const float *var,
                                        const float *P, float *dscale, int32_t N, int32_t C, int32_t S, float eps,
                                        int32_t divide)
{
    for (int32_t c = 0; c < C; ++c) {
        float acc = P ? P[c] : 0.0f;
        for (int32_t n = 0; n < N; ++n) {
            const int32_t p = (n * C + c) * S;
            for (int32_t s = 0; s < S; ++s) acc += dY[p + s] * (X[p + s] - mean[c]);
        }
        dscale[c] = divide ? acc / sqrtf(var[c] + eps) : acc;
    }
}
