/* Equal with broadcasting: a float32 0/1 tensor (poet-edge's booleans). No gradient. */
#include "poet/bcast.h"
#include "poet/kernels.h"

void poet_equal_f32(const float *A, const float *B, float *Y, int32_t rank, const int32_t *dims,
                    const int32_t *a_strides, const int32_t *b_strides)
{
    int32_t idx[POET_MAX_RANK] = {0}, off[2] = {0, 0}, n = 1;
    const int32_t *strides[2] = {a_strides, b_strides};
    for (int32_t d = 0; d < rank; ++d) n *= dims[d];
    for (int32_t i = 0; i < n; ++i) {
        Y[i] = A[off[0]] == B[off[1]] ? 1.0f : 0.0f;
        poet_bcast_next(rank, dims, idx, 2, strides, off);
    }
}
