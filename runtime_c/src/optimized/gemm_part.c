/* Column-blocked poet_gemm_part_f32 (same symbol, signature and results as src/kernels/gemm_part.c).
 *
 * Four outputs of a row at a time, each in its own accumulator that starts at P (or +0.0f) and adds the
 * products A[i, k] * op(B)[k, j] for k ascending, as the reference does; each A value loaded is used for four
 * products. The columns left (N not a multiple of 4) run the reference loop. Needs -ffp-contract=off (as
 * every poet build uses) so no multiply-add is fused. */
#include <stddef.h>

#include "poet/kernels.h"

static void poet_gemm_part_one(const float *a, const float *B, const float *P, float *Y, int32_t N, int32_t K,
                               int32_t j, int32_t transB, float alpha)
{
    const int32_t b_k = transB ? 1 : N, b_j = transB ? K : 1;
    float acc = P ? P[j] : 0.0f;
    const float *b = B + j * b_j;
    for (int32_t k = 0; k < K; ++k) acc += a[k] * b[k * b_k];
    Y[j] = alpha * acc;
}

void poet_gemm_part_f32(const float *A, const float *B, const float *P, float *Y, int32_t M, int32_t N, int32_t K,
                        int32_t transB, float alpha)
{
    for (int32_t i = 0; i < M; ++i) {
        const float *a = A + i * K, *p = P ? P + i * N : NULL;
        float *y = Y + i * N;
        int32_t j = 0;
        for (; j + 4 <= N; j += 4) {
            float acc0 = p ? p[j] : 0.0f, acc1 = p ? p[j + 1] : 0.0f;
            float acc2 = p ? p[j + 2] : 0.0f, acc3 = p ? p[j + 3] : 0.0f;
            if (transB) { /* op(B)[k, j] = B[j * K + k]: four rows of B walked along k */
                const float *b0 = B + j * K, *b1 = b0 + K, *b2 = b1 + K, *b3 = b2 + K;
                for (int32_t k = 0; k < K; ++k) {
                    const float x = a[k];
                    acc0 += x * b0[k];
                    acc1 += x * b1[k];
                    acc2 += x * b2[k];
                    acc3 += x * b3[k];
                }
            } else { /* op(B)[k, j] = B[k * N + j]: four neighbours of a row of B */
                const float *b = B + j;
                for (int32_t k = 0, o = 0; k < K; ++k, o += N) { /* by index: no pointer past B is formed */
                    const float x = a[k];
                    acc0 += x * b[o];
                    acc1 += x * b[o + 1];
                    acc2 += x * b[o + 2];
                    acc3 += x * b[o + 3];
                }
            }
            y[j] = alpha * acc0;
            y[j + 1] = alpha * acc1;
            y[j + 2] = alpha * acc2;
            y[j + 3] = alpha * acc3;
        }
        for (; j < N; ++j) poet_gemm_part_one(a, B, p, y, N, K, j, transB, alpha);
    }
}
