/* The reference product of one matrix pair of poet_matmul_f32, shared by src/kernels/matmul.c (the oracle)
 * and src/optimized/matmul.c (its fallback for K <= 0 and Aᵀ·Bᵀ): Y[i, j] = sum over k ascending of
 * op(A)[i, k] * op(B)[k, j], one accumulator starting at +0.0f. */
#ifndef POET_MATMUL_REF_H
#define POET_MATMUL_REF_H

#include "poet/kernels.h"

static inline void poet_matmul_one_ref(const float *A, const float *B, float *Y, int32_t M, int32_t N, int32_t K,
                                       int32_t transA, int32_t transB)
{
    const int32_t a_i = transA ? 1 : K, a_k = transA ? M : 1;
    const int32_t b_k = transB ? 1 : N, b_j = transB ? K : 1;
    for (int32_t i = 0; i < M; ++i) {
        for (int32_t j = 0; j < N; ++j) {
            float acc = 0.0f;
            const float *a = A + i * a_i, *b = B + j * b_j;
            for (int32_t k = 0; k < K; ++k) acc += a[k * a_k] * b[k * b_k];
            Y[i * N + j] = acc;
        }
    }
}

#endif
