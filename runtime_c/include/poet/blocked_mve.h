/* Helium (MVE) helpers shared by the MVE paths of src/optimized/gemm.c and conv.c (POET_GEMM_MVE, decided
 * in poet/arm_asm.h). Every MVE block vectorises across independent outputs: the four lanes of a vector
 * are four outputs (four columns of a GEMM block, four pixels of a convolution block), each with its own
 * accumulator lane that starts at +0.0f and adds its products in the reference order, each product rounded
 * before the addition (VMUL then VADD; never VFMA, which would round once). So every output sees the same
 * operations in the same order as the reference kernel; what differs is MVE floating point itself:
 * subnormal operands and results are flushed to (signed) zero and a NaN result is the default NaN. */
#ifndef POET_BLOCKED_MVE_H
#define POET_BLOCKED_MVE_H

#include "poet/arm_asm.h"

#if defined(POET_GEMM_MVE)
#include <arm_mve.h>
#include <stdint.h>

/* {0, s, 2s, 3s}: the element offsets of four lanes s floats apart */
static inline uint32x4_t poet_mve_lanes(int32_t s)
{
    return vmulq_n_u32(vidupq_n_u32(0u, 1), (uint32_t)s);
}

/* The predicate of the first n (1..4) lanes. */
static inline mve_pred16_t poet_mve_first(int32_t n)
{
    return vctp32q((uint32_t)n);
}

#endif
#endif
