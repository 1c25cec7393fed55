#include <math.h>

#include "poet/kernels.h"

/* b^e by repeated squaring (IEEE double products: the same bits on every target). */
static double poet_powi(double b, int32_t e)
{
    double r = 1.0;
    while (e > 0) {
        if (e & 1) r *= b;
        b *= b;
        e >>= 1;
    }
    return r;
}

/* torch.optim.Adam / AdamW at step t (>= 1). The scalars are computed in double, as torch computes them in
 * Python floats, then rounded to float; the elementwise work is float32 in torch's order. */
void poet_adam_f32(float *p, const float *g, float *m, float *v, int32_t n, float lr, int32_t t, double beta1,
                   double beta2, double eps, double weight_decay, int32_t decoupled)
{
    const float step = (float)((double)lr / (1.0 - poet_powi(beta1, t)));
    const float bc2 = (float)sqrt(1.0 - poet_powi(beta2, t));
    const float b2 = (float)beta2, one_b1 = (float)(1.0 - beta1), one_b2 = (float)(1.0 - beta2);
    const float e = (float)eps, wd = (float)weight_decay, shrink = (float)(1.0 - (double)lr * weight_decay);
    const int32_t l2 = weight_decay != 0.0 && !decoupled, scale = weight_decay != 0.0 && decoupled;
    for (int32_t i = 0; i < n; ++i) {
        float gi = g[i], pi = p[i];
        if (scale) pi = pi * shrink;
        if (l2) gi = gi + wd * pi;
        const float mi = m[i] + one_b1 * (gi - m[i]);
        const float vi = v[i] * b2 + one_b2 * gi * gi;
        m[i] = mi;
        v[i] = vi;
        p[i] = pi + (-step * mi) / (sqrtf(vi) / bc2 + e);
    }
}
