/* Fast poet_matmul_f32 (same symbol, signature and results as src/kernels/matmul.c): every matrix of the
 * batch is one call of the fast poet_gemm_f32 (src/optimized/gemm.c) with alpha = 1 and no C, which gives
 * the reference's bits: one accumulator per output from +0.0f, products added for k ascending, y = acc
 * (the GEMM's y = 1 * acc is skipped as the identity it is; Aᵀ·Bᵀ and K = 0 run its reference loop). */
#include <stddef.h>

#include "poet/bcast.h"
#include "poet/kernels.h"

void poet_matmul_f32(const float *A, const float *B, float *Y, int32_t M, int32_t N, int32_t K, int32_t transA,
                     int32_t transB, int32_t rank, const int32_t *dims, const int32_t *a_strides,
                     const int32_t *b_strides)
{
    int32_t idx[POET_MAX_RANK] = {0}, off[2] = {0, 0}, batches = 1;
    const int32_t *strides[2] = {a_strides, b_strides};
    for (int32_t d = 0; d < rank; ++d) batches *= dims[d];
    for (int32_t p = 0; p < batches; ++p) {
        poet_gemm_f32(A + off[0], B + off[1], NULL, Y + p * M * N, M, N, K, transA, transB, 1.0f, 0.0f, 0, 0);
        poet_bcast_next(rank, dims, idx, 2, strides, off);
    }
}
