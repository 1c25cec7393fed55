#include "poet/kernels.h"

/* A slice of a product's reduction (kernels.h): every output's accumulator starts at P (or +0.0f) and adds
 * A[i, k] * op(B)[k, j] for k ascending, as poet_gemm_f32 does over the whole K; then y = alpha * acc. */
void poet_gemm_part_f32(const float *A, const float *B, const float *P, float *Y, int32_t M, int32_t N, int32_t K,
                        int32_t transB, float alpha)
{
    const int32_t b_k = transB ? 1 : N, b_j = transB ? K : 1;
    for (int32_t i = 0; i < M; ++i) {
        for (int32_t j = 0; j < N; ++j) {
            float acc = P ? P[i * N + j] : 0.0f;
            const float *a = A + i * K, *b = B + j * b_j;
            for (int32_t k = 0; k < K; ++k) acc += a[k] * b[k * b_k];
            Y[i * N + j] = alpha * acc;
        }
    }
}
