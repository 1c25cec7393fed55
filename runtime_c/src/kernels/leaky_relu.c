/* LeakyRelu: Y = X > 0 ? X : X * alpha. Gradient: dX = T > 0 ? dY : dY * alpha, where T is the output Y
 * (alpha >= 0: Y > 0 exactly where X > 0) or the input X (alpha < 0); x = 0 gets alpha * dY, as torch. */
#include "poet/kernels.h"

void poet_leaky_relu_f32(const float *X, float *Y, int32_t n, float alpha)
{
    for (int32_t i = 0; i < n; ++i) {
        const float x = X[i];
        Y[i] = x > 0.0f ? x : x * alpha;
    }
}

void poet_leaky_relu_grad_f32(const float *T, const float *dY, float *dX, int32_t n, float alpha)
{
    for (int32_t i = 0; i < n; ++i) {
        const float dy = dY[i];
        dX[i] = T[i] > 0.0f ? dy : dy * alpha;
    }
}
