/* POET_GEMM_ASM is defined where the fast kernels use the assembly GEMM blocks of poet/blocked_arm.h:
 * GCC-compatible compilers for Thumb-2 Cortex-M cores with a single-precision FPU and the hard-float ABI
 * (Cortex-M4F, M7, M33 in poet's targets). Define POET_NO_ASM to build the C kernels only. */
#ifndef POET_ARM_ASM_H
#define POET_ARM_ASM_H

#if !defined(POET_NO_ASM) && defined(__GNUC__) && defined(__thumb2__) && defined(__ARM_FP) && (__ARM_FP & 4) && \
    defined(__ARM_PCS_VFP)
#define POET_GEMM_ASM 1
#endif

#endif
