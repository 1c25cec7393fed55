#include "poet/bcast.h"
#include "poet/kernels.h"

void poet_strided_copy_f32(const float *X, float *Y, float scale, int32_t x_off, int32_t rank, const int32_t *dims,
                           const int32_t *x_strides)
{
    int32_t idx[POET_MAX_RANK] = {0}, off[1] = {x_off}, n = 1;
    const int32_t *strides[1] = {x_strides};
    for (int32_t d = 0; d < rank; ++d) n *= dims[d];
    for (int32_t i = 0; i < n; ++i) {
        Y[i] = scale == 1.0f ? X[off[0]] : X[off[0]] * scale;
        poet_bcast_next(rank, dims, idx, 1, strides, off);
    }
}

void poet_strided_scatter_f32(const float *X, float *Y, int32_t n_y, int32_t y_off, int32_t rank,
                              const int32_t *dims, const int32_t *y_strides)
{
    int32_t idx[POET_MAX_RANK] = {0}, off[1] = {y_off}, n = 1;
    const int32_t *strides[1] = {y_strides};
    for (int32_t i = 0; i < n_y; ++i) Y[i] = 0.0f;
    for (int32_t d = 0; d < rank; ++d) n *= dims[d];
    for (int32_t i = 0; i < n; ++i) {
        Y[off[0]] = X[i];
        poet_bcast_next(rank, dims, idx, 1, strides, off);
    }
}
