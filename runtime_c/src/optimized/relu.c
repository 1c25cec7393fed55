/* poet_relu_f32 / poet_relu_grad_f32 unrolled by 4 (same symbols and bit-identical results as
 * src/kernels/relu.c: the same comparison and selection per element). */
#include "poet/kernels.h"

void poet_relu_f32(const float *X, float *Y, int32_t n)
{
    int32_t i = 0;
    for (; i + 4 <= n; i += 4) {
        const float x0 = X[i], x1 = X[i + 1], x2 = X[i + 2], x3 = X[i + 3];
        Y[i] = x0 > 0.0f ? x0 : 0.0f;
        Y[i + 1] = x1 > 0.0f ? x1 : 0.0f;
        Y[i + 2] = x2 > 0.0f ? x2 : 0.0f;
        Y[i + 3] = x3 > 0.0f ? x3 : 0.0f;
    }
    for (; i < n; ++i) Y[i] = X[i] > 0.0f ? X[i] : 0.0f;
}

void poet_relu_grad_f32(const float *Y, const float *dY, float *dX, int32_t n)
{
    int32_t i = 0;
    for (; i + 4 <= n; i += 4) {
        const float y0 = Y[i], y1 = Y[i + 1], y2 = Y[i + 2], y3 = Y[i + 3];
        const float g0 = dY[i], g1 = dY[i + 1], g2 = dY[i + 2], g3 = dY[i + 3];
        dX[i] = y0 > 0.0f ? g0 : 0.0f;
        dX[i + 1] = y1 > 0.0f ? g1 : 0.0f;
        dX[i + 2] = y2 > 0.0f ? g2 : 0.0f;
        dX[i + 3] = y3 > 0.0f ? g3 : 0.0f;
    }
    for (; i < n; ++i) dX[i] = Y[i] > 0.0f ? dY[i] : 0.0f;
}
