/* Gather along one axis with constant indices (normalised to [0, n_axis) by the compiler), and its
 * gradient: a scatter-add into zeros in increasing output order, so repeated indices sum in a fixed order. */
#include "poet/kernels.h"

void poet_gather_f32(const float *X, float *Y, int32_t outer, int32_t n_axis, int32_t inner, int32_t n_idx,
                     const int32_t *idx)
{
    for (int32_t o = 0; o < outer; ++o) {
        for (int32_t j = 0; j < n_idx; ++j) {
            const float *x = X + (o * n_axis + idx[j]) * inner;
            float *y = Y + (o * n_idx + j) * inner;
            for (int32_t i = 0; i < inner; ++i) y[i] = x[i];
        }
    }
}

void poet_gather_grad_f32(const float *dY, float *dX, int32_t outer, int32_t n_axis, int32_t inner, int32_t n_idx,
                          const int32_t *idx)
{
    for (int32_t i = 0; i < outer * n_axis * inner; ++i) dX[i] = 0.0f;
    for (int32_t o = 0; o < outer; ++o) {
        for (int32_t j = 0; j < n_idx; ++j) {
            float *dx = dX + (o * n_axis + idx[j]) * inner;
            const float *dy = dY + (o * n_idx + j) * inner;
            for (int32_t i = 0; i < inner; ++i) dx[i] += dy[i];
        }
    }
}
