/* Where(C, X, Z) with broadcasting over three operands; the condition is a float32 0/1 tensor (any non-zero
 * value selects X). The gradient of a branch passes dY where that branch was selected, else 0 (in the output
 * shape; the compiler sums it down to the branch's shape). The condition gets no gradient. The innermost
 * axis is a plain strided loop; the odometer (poet/bcast.h) runs once per row. */
#include "poet/bcast.h"
#include "poet/kernels.h"

void poet_where_f32(const float *C, const float *X, const float *Z, float *Y, int32_t rank, const int32_t *dims,
                    const int32_t *c_strides, const int32_t *x_strides, const int32_t *z_strides)
{
    int32_t idx[POET_MAX_RANK] = {0}, off[3] = {0, 0, 0}, rows = 1;
    const int32_t *strides[3] = {c_strides, x_strides, z_strides};
    const int32_t n = dims[rank - 1], sc = c_strides[rank - 1], sx = x_strides[rank - 1], sz = z_strides[rank - 1];
    for (int32_t d = 0; d < rank - 1; ++d) rows *= dims[d];
    for (int32_t r = 0; r < rows; ++r, Y += n) {
        const float *c = C + off[0], *x = X + off[1], *z = Z + off[2];
        for (int32_t j = 0; j < n; ++j) Y[j] = c[j * sc] != 0.0f ? x[j * sx] : z[j * sz];
        poet_bcast_next(rank - 1, dims, idx, 3, strides, off);
    }
}

void poet_where_grad_f32(const float *C, const float *dY, float *dB, int32_t branch, int32_t rank,
                         const int32_t *dims, const int32_t *c_strides)
{
    int32_t idx[POET_MAX_RANK] = {0}, off[1] = {0}, rows = 1;
    const int32_t *strides[1] = {c_strides};
    const int32_t n = dims[rank - 1], sc = c_strides[rank - 1], want = branch != 0;
    for (int32_t d = 0; d < rank - 1; ++d) rows *= dims[d];
    for (int32_t r = 0; r < rows; ++r, dY += n, dB += n) {
        const float *c = C + off[0];
        for (int32_t j = 0; j < n; ++j) dB[j] = (c[j * sc] != 0.0f) == want ? dY[j] : 0.0f;
        poet_bcast_next(rank - 1, dims, idx, 1, strides, off);
    }
}
