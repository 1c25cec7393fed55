/* poet_reduce_sum_to_f32 with the innermost axis as a plain loop (same symbol and bit-identical results
 * as src/kernels/reduce_sum_to.c: every output starts at 0.0f and adds its inputs in the same order;
 * an output summed along the innermost axis keeps its running sum in a register). */
#include "poet/bcast.h"
#include "poet/kernels.h"

void poet_reduce_sum_to_f32(const float *X, float *Y, float scale, int32_t n_out, int32_t rank,
                            const int32_t *dims, const int32_t *y_strides)
{
    for (int32_t i = 0; i < n_out; ++i) Y[i] = 0.0f;
    if (rank <= 0) {
        Y[0] += X[0];
    } else {
        int32_t idx[POET_MAX_RANK] = {0}, off[1] = {0}, rows = 1;
        const int32_t *strides[1] = {y_strides};
        const int32_t n = dims[rank - 1], sy = y_strides[rank - 1];
        for (int32_t d = 0; d < rank - 1; ++d) rows *= dims[d];
        for (int32_t r = 0; r < rows; ++r, X += n) {
            float *y = Y + off[0];
            if (sy == 1) {
                for (int32_t j = 0; j < n; ++j) y[j] += X[j];
            } else if (sy == 0) {
                float s = y[0];
                for (int32_t j = 0; j < n; ++j) s += X[j];
                y[0] = s;
            } else {
                for (int32_t j = 0; j < n; ++j) y[j * sy] += X[j];
            }
            poet_bcast_next(rank - 1, dims, idx, 1, strides, off);
        }
    }
    if (scale != 1.0f)
        for (int32_t i = 0; i < n_out; ++i) Y[i] *= scale;
}
