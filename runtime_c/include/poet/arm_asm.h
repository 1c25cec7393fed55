/* Which hand-tuned kernel paths a build uses; the one place that decides (src/optimized/gemm.c, matmul.c
 * via gemm.c, and conv.c read only these macros).
 *
 * POET_GEMM_ASM: the fast kernels use the assembly GEMM blocks of poet/blocked_arm.h: GCC-compatible
 * compilers for Thumb-2 Cortex-M cores with a single-precision FPU and the hard-float ABI (Cortex-M4F, M7,
 * M33, M55 in poet's targets).
 *
 * POET_GEMM_MVE: the fast GEMM and convolution use Helium (M-profile Vector Extension) blocks written with
 * the intrinsics of <arm_mve.h> (poet/blocked_mve.h). Opt-in: a build asks for it with -DPOET_MVE (target
 * qemu-cortex-m55-mve) and the compiler must target MVE floating point (__ARM_FEATURE_MVE bit 1, e.g.
 * -mcpu=cortex-m55), else the build stops here. Not the default on an MVE core because MVE floating point
 * flushes subnormal inputs and results to zero and returns the default NaN (the Armv8.1-M "standard FPSCR
 * value" behaviour; QEMU 7.2 runs MVE float on standard_fp_status), while the reference kernels (scalar
 * FPv5 with FPSCR.FZ = 0) keep subnormals: results are bit-identical to the reference only where no
 * operand, product or partial sum is subnormal (or NaN). See docs/targets.md, "Cortex-M55 with Helium".
 *
 * Define POET_NO_ASM to build the C kernels only (neither path). */
#ifndef POET_ARM_ASM_H
#define POET_ARM_ASM_H

#if !defined(POET_NO_ASM) && defined(__GNUC__) && defined(__thumb2__) && defined(__ARM_FP) && (__ARM_FP & 4) && \
    defined(__ARM_PCS_VFP)
#define POET_GEMM_ASM 1
#endif

#if defined(POET_MVE) && !defined(POET_NO_ASM)
#if defined(__GNUC__) && defined(__ARM_FEATURE_MVE) && (__ARM_FEATURE_MVE & 2)
#define POET_GEMM_MVE 1
#else
#error "POET_MVE: this compiler does not target MVE floating point (Helium); build with e.g. -mcpu=cortex-m55"
#endif
#endif

/* POET_CONV_ASM: conv.c's own assembly paths (3x3 blocks, strided 1x1); the MVE build uses its MVE blocks */
#if defined(POET_GEMM_ASM) && !defined(POET_GEMM_MVE)
#define POET_CONV_ASM 1
#endif

#endif
