/* Equal with broadcasting: a float32 0/1 tensor (poet-edge's booleans). No gradient. The innermost axis is
 * a plain strided loop; the odometer (poet/bcast.h) runs once per row. */
#include "poet/bcast.h"
#include "poet/kernels.h"

void poet_equal_f32(const float *A, const float *B, float *Y, int32_t rank, const int32_t *dims,
                    const int32_t *a_strides, const int32_t *b_strides)
{
    int32_t idx[POET_MAX_RANK] = {0}, off[2] = {0, 0}, rows = 1;
    const int32_t *strides[2] = {a_strides, b_strides};
    const int32_t n = dims[rank - 1], sa = a_strides[rank - 1], sb = b_strides[rank - 1];
    for (int32_t d = 0; d < rank - 1; ++d) rows *= dims[d];
    for (int32_t r = 0; r < rows; ++r, Y += n) {
        const float *a = A + off[0], *b = B + off[1];
        for (int32_t j = 0; j < n; ++j) Y[j] = a[j * sa] == b[j * sb] ? 1.0f : 0.0f;
        poet_bcast_next(rank - 1, dims, idx, 2, strides, off);
    }
}
