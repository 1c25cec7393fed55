#include "poet/bcast.h"
#include "poet/kernels.h"

void poet_reduce_sum_to_f32(const float *X, float *Y, float scale, int32_t n_out, int32_t rank,
                            const int32_t *dims, const int32_t *y_strides)
{
    int32_t idx[POET_MAX_RANK] = {0}, off[1] = {0}, n = 1;
    const int32_t *strides[1] = {y_strides};
    for (int32_t i = 0; i < n_out; ++i) Y[i] = 0.0f;
    for (int32_t d = 0; d < rank; ++d) n *= dims[d];
    for (int32_t i = 0; i < n; ++i) {
        Y[off[0]] += X[i];
        poet_bcast_next(rank, dims, idx, 1, strides, off);
    }
    if (scale != 1.0f)
        for (int32_t i = 0; i < n_out; ++i) Y[i] *= scale;
}
