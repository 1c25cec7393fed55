/* Strided copy and scatter (same symbols, signatures and results as src/kernels/strided.c): the innermost
 * dimension runs as a plain loop (unrolled by 4) with the odometer advanced once per row instead of once
 * per element. Pure copies (or the same multiplication by scale), element for element in the reference
 * order, so results are bit-identical. */
#include "poet/bcast.h"
#include "poet/kernels.h"

void poet_strided_copy_f32(const float *X, float *Y, float scale, int32_t x_off, int32_t rank, const int32_t *dims,
                           const int32_t *x_strides)
{
    if (rank <= 0) { /* a scalar */
        Y[0] = scale == 1.0f ? X[x_off] : X[x_off] * scale;
        return;
    }
    int32_t idx[POET_MAX_RANK] = {0}, off[1] = {x_off}, rows = 1;
    const int32_t *strides[1] = {x_strides};
    const int32_t inner = dims[rank - 1], s = x_strides[rank - 1];
    for (int32_t d = 0; d < rank - 1; ++d) rows *= dims[d];
    if (inner <= 0) return;
    for (int32_t r = 0; r < rows; ++r) {
        const float *x = X + off[0];
        int32_t i = 0;
        if (scale == 1.0f) {
            for (; i + 4 <= inner; i += 4, Y += 4, x += 4 * s) {
                const float a = x[0], b = x[s], c = x[2 * s], e = x[3 * s];
                Y[0] = a;
                Y[1] = b;
                Y[2] = c;
                Y[3] = e;
            }
            for (; i < inner; ++i, x += s) *Y++ = *x;
        } else {
            for (; i < inner; ++i, x += s) *Y++ = *x * scale;
        }
        poet_bcast_next(rank - 1, dims, idx, 1, strides, off);
    }
}

void poet_strided_scatter_f32(const float *X, float *Y, int32_t n_y, int32_t y_off, int32_t rank,
                              const int32_t *dims, const int32_t *y_strides)
{
    for (int32_t i = 0; i < n_y; ++i) Y[i] = 0.0f;
    if (rank <= 0) {
        Y[y_off] = X[0];
        return;
    }
    int32_t idx[POET_MAX_RANK] = {0}, off[1] = {y_off}, rows = 1;
    const int32_t *strides[1] = {y_strides};
    const int32_t inner = dims[rank - 1], s = y_strides[rank - 1];
    for (int32_t d = 0; d < rank - 1; ++d) rows *= dims[d];
    if (inner <= 0) return;
    for (int32_t r = 0; r < rows; ++r) {
        float *y = Y + off[0];
        for (int32_t i = 0; i < inner; ++i, y += s) *y = *X++;
        poet_bcast_next(rank - 1, dims, idx, 1, strides, off);
    }
}
