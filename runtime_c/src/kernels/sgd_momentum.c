#include "poet/kernels.h"

/* torch.optim.SGD (dampening 0): d = g + wd * p; buf = momentum * buf + d; p -= lr * (nesterov ? d +
 * momentum * buf : buf). buf NULL: no momentum, p -= lr * d. Every product rounded before its sum. */
void poet_sgd_momentum_f32(float *p, const float *g, float *buf, int32_t n, float lr, float momentum,
                           float weight_decay, int32_t nesterov)
{
    for (int32_t i = 0; i < n; ++i) {
        float d = weight_decay != 0.0f ? g[i] + weight_decay * p[i] : g[i];
        if (buf) {
            const float b = momentum * buf[i] + d;
            buf[i] = b;
            d = nesterov ? d + momentum * b : b;
        }
        p[i] -= lr * d;
    }
}
