#include "poet/bcast.h"
#include "poet/kernels.h"

#define POET_BIN_LOOP(expr)                                         \
    for (int32_t i = 0; i < n; ++i) {                               \
        Y[i] = (expr);                                              \
        poet_bcast_next(rank, dims, idx, 2, strides, off);          \
    }

void poet_binary_f32(int32_t op, const float *A, const float *B, float *Y, int32_t rank, const int32_t *dims,
                     const int32_t *a_strides, const int32_t *b_strides)
{
    int32_t idx[POET_MAX_RANK] = {0}, off[2] = {0, 0}, n = 1;
    const int32_t *strides[2] = {a_strides, b_strides};
    for (int32_t d = 0; d < rank; ++d) n *= dims[d];
    switch (op) {
    case POET_BIN_ADD: POET_BIN_LOOP(A[off[0]] + B[off[1]]) break;
    case POET_BIN_SUB: POET_BIN_LOOP(A[off[0]] - B[off[1]]) break;
    case POET_BIN_MUL: POET_BIN_LOOP(A[off[0]] * B[off[1]]) break;
    default: POET_BIN_LOOP(A[off[0]] / B[off[1]]) break;
    }
}
