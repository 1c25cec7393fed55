#include "poet/bcast.h"
#include "poet/kernels.h"
#include "poet/matmul_ref.h"

void poet_matmul_f32(const float *A, const float *B, float *Y, int32_t M, int32_t N, int32_t K, int32_t transA,
                     int32_t transB, int32_t rank, const int32_t *dims, const int32_t *a_strides,
                     const int32_t *b_strides)
{
    int32_t idx[POET_MAX_RANK] = {0}, off[2] = {0, 0}, batches = 1;
    const int32_t *strides[2] = {a_strides, b_strides};
    for (int32_t d = 0; d < rank; ++d) batches *= dims[d];
    for (int32_t p = 0; p < batches; ++p) {
        poet_matmul_one_ref(A + off[0], B + off[1], Y + p * M * N, M, N, K, transA, transB);
        poet_bcast_next(rank, dims, idx, 2, strides, off);
    }
}
