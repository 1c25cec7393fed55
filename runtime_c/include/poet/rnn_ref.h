/* Scalar helpers of the recurrent reference kernels (src/kernels/gru.c and lstm.c): a dot product summed
 * k ascending from +0.0f, the logistic sigmoid through the runtime's deterministic poet_expf, and the time
 * index of step s of direction d (reverse runs, and the second direction of a bidirectional op, go from the
 * last time step back). */
#ifndef POET_RNN_REF_H
#define POET_RNN_REF_H

#include "poet/kernels.h"

static inline float poet_rnn_dot(const float *a, const float *b, int32_t n)
{
    float s = 0.0f;
    for (int32_t k = 0; k < n; ++k) s += a[k] * b[k];
    return s;
}

static inline float poet_rnn_sigmoid(float x) { return 1.0f / (1.0f + poet_expf(-x)); }

static inline int32_t poet_rnn_time(int32_t s, int32_t seq, int32_t d, int32_t direction)
{
    return (direction == 1 || d == 1) ? seq - 1 - s : s;
}

#endif
