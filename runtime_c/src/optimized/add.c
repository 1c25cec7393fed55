/* poet_add_f32 with the innermost axis as a plain loop (same symbol and bit-identical results as
 * src/kernels/add.c: Y[i] = A[.] + B[.] in the same operand order; the odometer runs once per row
 * instead of once per element, and same-shape and row-broadcast operands get stride-free loops). */
#include "poet/bcast.h"
#include "poet/kernels.h"

void poet_add_f32(const float *A, const float *B, float *Y, int32_t rank, const int32_t *dims,
                  const int32_t *a_strides, const int32_t *b_strides)
{
    if (rank <= 0) {
        Y[0] = A[0] + B[0];
        return;
    }
    int32_t idx[POET_MAX_RANK] = {0}, off[2] = {0, 0}, rows = 1;
    const int32_t *strides[2] = {a_strides, b_strides};
    const int32_t n = dims[rank - 1], sa = a_strides[rank - 1], sb = b_strides[rank - 1];
    for (int32_t d = 0; d < rank - 1; ++d) rows *= dims[d];
    for (int32_t r = 0; r < rows; ++r, Y += n) {
        const float *a = A + off[0], *b = B + off[1];
        if (sa == 1 && sb == 1) {
            for (int32_t j = 0; j < n; ++j) Y[j] = a[j] + b[j];
        } else if (sa == 1 && sb == 0) {
            const float bv = b[0];
            for (int32_t j = 0; j < n; ++j) Y[j] = a[j] + bv;
        } else if (sa == 0 && sb == 1) {
            const float av = a[0];
            for (int32_t j = 0; j < n; ++j) Y[j] = av + b[j];
        } else {
            for (int32_t j = 0; j < n; ++j) Y[j] = a[j * sa] + b[j * sb];
        }
        poet_bcast_next(rank - 1, dims, idx, 2, strides, off);
    }
}
