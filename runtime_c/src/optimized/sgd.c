/* poet_sgd_f32 unrolled by 4 (same symbol and bit-identical results as src/kernels/sgd.c:
 * p = p - lr * g per element, the product rounded before the subtraction). */
#include "poet/kernels.h"

void poet_sgd_f32(float *p, const float *g, float lr, int32_t n)
{
    int32_t i = 0;
    for (; i + 4 <= n; i += 4) {
        const float g0 = g[i], g1 = g[i + 1], g2 = g[i + 2], g3 = g[i + 3];
        const float p0 = p[i], p1 = p[i + 1], p2 = p[i + 2], p3 = p[i + 3];
        p[i] = p0 - lr * g0;
        p[i + 1] = p1 - lr * g1;
        p[i + 2] = p2 - lr * g2;
        p[i + 3] = p3 - lr * g3;
    }
    for (; i < n; ++i) p[i] -= lr * g[i];
}
