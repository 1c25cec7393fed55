#include "poet/kernels.h"

/* log-sum-exp of one row, shifted by its max */
static float row_lse(const float *z, int32_t C, float *max_out)
{
    float m = z[0], s = 0.0f;
    for (int32_t c = 1; c < C; ++c) m = z[c] > m ? z[c] : m;
    for (int32_t c = 0; c < C; ++c) s += poet_expf(z[c] - m);
    *max_out = m;
    return poet_logf(s);
}

void poet_softmax_xent_f32(const float *logits, const int32_t *labels, float *loss, int32_t N, int32_t C)
{
    float total = 0.0f;
    for (int32_t i = 0; i < N; ++i) {
        const float *z = logits + i * C;
        float m, lse = row_lse(z, C, &m);
        total += lse - (z[labels[i]] - m);
    }
    *loss = total / (float)N;
}

void poet_softmax_xent_grad_f32(const float *logits, const int32_t *labels, float *dlogits, int32_t N, int32_t C)
{
    for (int32_t i = 0; i < N; ++i) {
        const float *z = logits + i * C;
        float m, lse = row_lse(z, C, &m);
        for (int32_t c = 0; c < C; ++c) {
            float p = poet_expf(z[c] - m - lse);
            dlogits[i * C + c] = (p - (c == labels[i] ? 1.0f : 0.0f)) / (float)N;
        }
    }
}
