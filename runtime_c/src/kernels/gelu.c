#include "poet/kernels.h"

#define POET_SQRT1_2 0.707106781f      /* 1/sqrt(2) */
#define POET_SQRT2_PI 0.797884561f     /* sqrt(2/pi) */
#define POET_INV_SQRT_2PI 0.398942280f /* 1/sqrt(2 pi) */
#define POET_GELU_C 0.044715f

void poet_gelu_f32(const float *X, float *Y, int32_t n, int32_t tanh_approx)
{
    for (int32_t i = 0; i < n; ++i) {
        float x = X[i];
        float t = tanh_approx ? poet_tanhf(POET_SQRT2_PI * (x + POET_GELU_C * x * x * x)) : poet_erff(x * POET_SQRT1_2);
        Y[i] = 0.5f * x * (1.0f + t);
    }
}

void poet_gelu_grad_f32(const float *X, const float *dY, float *dX, int32_t n, int32_t tanh_approx)
{
    for (int32_t i = 0; i < n; ++i) {
        float x = X[i], g;
        if (tanh_approx) {
            float t = poet_tanhf(POET_SQRT2_PI * (x + POET_GELU_C * x * x * x));
            g = 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * POET_SQRT2_PI * (1.0f + 3.0f * POET_GELU_C * x * x);
        } else {
            g = 0.5f * (1.0f + poet_erff(x * POET_SQRT1_2)) + x * POET_INV_SQRT_2PI * poet_expf(-0.5f * x * x);
        }
        dX[i] = dY[i] * g;
    }
}
