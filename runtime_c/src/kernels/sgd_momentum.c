#include "poet/kernels.h"

/* torch.optim.SGD (dampening 0): d = g + wd * p; buf = momentum * buf + d; p -= lr * (nesterov ? d +
 * momentum * buf : buf). buf NULL: no momentum, p -= lr * d. Every product rounded before its sum; the
 * branches on the hyperparameters are taken once per call, not per element. */
void poet_sgd_momentum_f32(float *p, const float *g, float *buf, int32_t n, float lr, float momentum,
                           float weight_decay, int32_t nesterov)
{
    if (weight_decay == 0.0f && buf) {
        for (int32_t i = 0; i < n; ++i) {
            const float b = momentum * buf[i] + g[i];
            buf[i] = b;
            p[i] -= lr * (nesterov ? g[i] + momentum * b : b);
        }
    } else if (buf) {
        for (int32_t i = 0; i < n; ++i) {
            const float d = g[i] + weight_decay * p[i];
            const float b = momentum * buf[i] + d;
            buf[i] = b;
            p[i] -= lr * (nesterov ? d + momentum * b : b);
        }
    } else {
        for (int32_t i = 0; i < n; ++i) p[i] -= lr * (g[i] + weight_decay * p[i]);
    }
}
