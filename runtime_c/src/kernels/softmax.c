#include "poet/kernels.h"

void poet_softmax_f32(const float *X, float *Y, int32_t outer, int32_t n, int32_t inner)
{
    for (int32_t o = 0; o < outer; ++o) {
        for (int32_t j = 0; j < inner; ++j) {
            const float *x = X + o * n * inner + j;
            float *y = Y + o * n * inner + j;
            float m = x[0], s = 0.0f;
            for (int32_t k = 1; k < n; ++k) m = x[k * inner] > m ? x[k * inner] : m;
            for (int32_t k = 0; k < n; ++k) {
                y[k * inner] = poet_expf(x[k * inner] - m);
                s += y[k * inner];
            }
            for (int32_t k = 0; k < n; ++k) y[k * inner] /= s;
        }
    }
}

void poet_softmax_grad_f32(const float *Y, const float *dY, float *dX, int32_t outer, int32_t n, int32_t inner)
{
    for (int32_t o = 0; o < outer; ++o) {
        for (int32_t j = 0; j < inner; ++j) {
            const int32_t base = o * n * inner + j;
            float dot = 0.0f;
            for (int32_t k = 0; k < n; ++k) dot += dY[base + k * inner] * Y[base + k * inner];
            for (int32_t k = 0; k < n; ++k) dX[base + k * inner] = Y[base + k * inner] * (dY[base + k * inner] - dot);
        }
    }
}
