#include "poet/kernels.h"

void poet_gemm_f32(const float *A, const float *B, const float *C, float *Y, int32_t M, int32_t N, int32_t K,
                   int32_t transA, int32_t transB, float alpha, float beta, int32_t c_rs, int32_t c_cs)
{
    const int32_t a_i = transA ? 1 : K, a_k = transA ? M : 1;
    const int32_t b_k = transB ? 1 : N, b_j = transB ? K : 1;
    for (int32_t i = 0; i < M; ++i) {
        for (int32_t j = 0; j < N; ++j) {
            float acc = 0.0f;
            const float *a = A + i * a_i, *b = B + j * b_j;
            for (int32_t k = 0; k < K; ++k) acc += a[k * a_k] * b[k * b_k];
            float y = alpha * acc;
            if (C) y += beta * C[i * c_rs + j * c_cs];
            Y[i * N + j] = y;
        }
    }
}
