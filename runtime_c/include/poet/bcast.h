/* Internal: odometer over an N-d index space with per-operand element strides. */
#ifndef POET_BCAST_H
#define POET_BCAST_H

#include <stdint.h>

#define POET_MAX_RANK 8

/* Advance idx (rank digits over dims) by one; update offsets of `k` operands. */
static inline void poet_bcast_next(int32_t rank, const int32_t *dims, int32_t *idx, int32_t k,
                                   const int32_t *const *strides, int32_t *off)
{
    for (int32_t d = rank - 1; d >= 0; --d) {
        idx[d]++;
        for (int32_t j = 0; j < k; ++j) off[j] += strides[j][d];
        if (idx[d] < dims[d]) return;
        for (int32_t j = 0; j < k; ++j) off[j] -= strides[j][d] * dims[d];
        idx[d] = 0;
    }
}

#endif
