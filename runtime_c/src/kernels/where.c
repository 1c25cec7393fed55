/* Where(C, X, Z) with broadcasting over three operands; the condition is a float32 0/1 tensor (any non-zero
 * value selects X). The gradient of a branch passes dY where that branch was selected, else 0 (in the output
 * shape; the compiler sums it down to the branch's shape). The condition gets no gradient. */
#include "poet/bcast.h"
#include "poet/kernels.h"

void poet_where_f32(const float *C, const float *X, const float *Z, float *Y, int32_t rank, const int32_t *dims,
                    const int32_t *c_strides, const int32_t *x_strides, const int32_t *z_strides)
{
    int32_t idx[POET_MAX_RANK] = {0}, off[3] = {0, 0, 0}, n = 1;
    const int32_t *strides[3] = {c_strides, x_strides, z_strides};
    for (int32_t d = 0; d < rank; ++d) n *= dims[d];
    for (int32_t i = 0; i < n; ++i) {
        Y[i] = C[off[0]] != 0.0f ? X[off[1]] : Z[off[2]];
        poet_bcast_next(rank, dims, idx, 3, strides, off);
    }
}

void poet_where_grad_f32(const float *C, const float *dY, float *dB, int32_t branch, int32_t rank,
                         const int32_t *dims, const int32_t *c_strides)
{
    int32_t idx[POET_MAX_RANK] = {0}, off[1] = {0}, n = 1;
    const int32_t *strides[1] = {c_strides};
    for (int32_t d = 0; d < rank; ++d) n *= dims[d];
    for (int32_t i = 0; i < n; ++i) {
        dB[i] = (C[off[0]] != 0.0f) == (branch != 0) ? dY[i] : 0.0f;
        poet_bcast_next(rank, dims, idx, 1, strides, off);
    }
}
