/* Register-blocked GEMM blocks in Thumb-2 / FPv4-SP assembly for Cortex-M cores with a single-precision
 * FPU (M4F, M7, M33), used by src/optimized/gemm.c and matmul.c for the full blocks of the three layouts a
 * training step calls; the C blocks of poet/blocked.h do the tails and every other core.
 *
 * Same bits as the C blocks and the reference: every output is one accumulator that starts at +0.0f and
 * adds the products a[k]*b[k] for k ascending, each product rounded (VMUL, then VADD: no fused or chained
 * multiply-add), then y = acc, y = acc + bias[c] or y = acc + rbias[r]. What the assembly adds over what GCC
 * makes of the C:
 * - VLDM loads several consecutive values (and advances the pointer) in one instruction: 4 of op(A) and
 *   6 of op(B) per k step for Aᵀ·B in 3 instructions where the C needs 10; pairs along k for A·Bᵀ;
 * - every accumulator stays in its register (24 of the 32), the k loop is unrolled by two, and a block is
 *   zeroed with one VLDM and stored with one VSTM per row.
 * Which targets: poet/arm_asm.h (define POET_NO_ASM to build the C blocks only). */
#ifndef POET_BLOCKED_ARM_H
#define POET_BLOCKED_ARM_H

#include <stdint.h>

#include "poet/arm_asm.h"
#include "poet/blocked.h"

#if defined(POET_GEMM_ASM)

/* Where a block goes; one per kernel call, its y and bias set per block. */
typedef struct {
    float zeros[24];    /* +0.0f: VLDM starts the accumulators from here (no register for another pointer) */
    float *y;           /* the block's first output */
    int32_t ldy;        /* bytes between output rows */
    const float *bias;  /* bias[c] added to column c (the column-bias epilogue) */
    const float *rbias; /* rbias[r] added to row r (the row-bias epilogue: a column vector C) */
    int32_t step1, step2; /* byte steps a block kernel reads from memory (poet_asm_conv3x3_4x4); step2: K for
                           * poet_asm_nn_4x6_init / nn_4x3_init */
} poet_asm_out;

/* s<a> += s<x> */
#define POET_ASM_ADD(a, x) "vadd.f32 s" #a ", s" #a ", s" #x "\n\t"
/* acc s<a> += s<x> * s<y>, the product rounded first (s31 holds it) */
#define POET_ASM_MAC(a, x, y) "vmul.f32 s31, s" #x ", s" #y "\n\tvadd.f32 s" #a ", s" #a ", s31\n\t"

/* 4 rows (x in s24..s27) times 3 columns (y in s28..s30) into accumulators a0..a0+2, a0+6.., a0+12.., a0+18.. */
#define POET_ASM_4X3(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11) \
    POET_ASM_MAC(a0, 24, 28) POET_ASM_MAC(a1, 24, 29) POET_ASM_MAC(a2, 24, 30) \
    POET_ASM_MAC(a3, 25, 28) POET_ASM_MAC(a4, 25, 29) POET_ASM_MAC(a5, 25, 30) \
    POET_ASM_MAC(a6, 26, 28) POET_ASM_MAC(a7, 26, 29) POET_ASM_MAC(a8, 26, 30) \
    POET_ASM_MAC(a9, 27, 28) POET_ASM_MAC(a10, 27, 29) POET_ASM_MAC(a11, 27, 30)

/* 4 rows x 4 columns into accumulators s(4r + c): row r's value in s<r0..r3>, column c's in s<c0..c3> */
#define POET_ASM_4X4(r0, r1, r2, r3, c0, c1, c2, c3) \
    POET_ASM_MAC(0, r0, c0) POET_ASM_MAC(1, r0, c1) POET_ASM_MAC(2, r0, c2) POET_ASM_MAC(3, r0, c3) \
    POET_ASM_MAC(4, r1, c0) POET_ASM_MAC(5, r1, c1) POET_ASM_MAC(6, r1, c2) POET_ASM_MAC(7, r1, c3) \
    POET_ASM_MAC(8, r2, c0) POET_ASM_MAC(9, r2, c1) POET_ASM_MAC(10, r2, c2) POET_ASM_MAC(11, r2, c3) \
    POET_ASM_MAC(12, r3, c0) POET_ASM_MAC(13, r3, c1) POET_ASM_MAC(14, r3, c2) POET_ASM_MAC(15, r3, c3)
/* the next weight of each of 4 channels (pointers w0..w3) into s<a>..s<d> */
#define POET_ASM_W4(a, b, c, d) \
    "vldmia %[w0]!, {s" #a "}\n\t" \
    "vldmia %[w1]!, {s" #b "}\n\t" \
    "vldmia %[w2]!, {s" #c "}\n\t" \
    "vldmia %[w3]!, {s" #d "}\n\t"

/* the next value of each of 4 rows (pointers a0..a3, walked along k) into s<a>..s<d> */
#define POET_ASM_A4(a, b, c, d) \
    "vldmia %[a0]!, {s" #a "}\n\t" \
    "vldmia %[a1]!, {s" #b "}\n\t" \
    "vldmia %[a2]!, {s" #c "}\n\t" \
    "vldmia %[a3]!, {s" #d "}\n\t"
/* the k step of a 4x6 block once x = op(A)[i : i+4, k] is in s24..s27: op(B)[k, j : j+6] is 6 consecutive
 * floats at %[pb], loaded as two triples into s28..s30; then %[pb] moves on by %[sb] more bytes */
#define POET_ASM_B6_STEP \
    "vldmia %[pb]!, {s28-s30}\n\t" \
    POET_ASM_4X3(0, 1, 2, 6, 7, 8, 12, 13, 14, 18, 19, 20) \
    "vldmia %[pb]!, {s28-s30}\n\t" \
    POET_ASM_4X3(3, 4, 5, 9, 10, 11, 15, 16, 17, 21, 22, 23) \
    "add %[pb], %[pb], %[sb]\n\t"

/* Epilogues of a 4-row block of NC = 6, 5 or 2 columns (accumulator s(NC*r + c)): a column bias (bias[c]
 * added to column c) or a row bias (rbias[r] to row r) read through the operand named v, then the stores
 * of the rows through the operands named t and u (registers free once the k loop is done). */
#define POET_ASM_COLBIAS6(v) \
    "ldr %[" v "], [%[out], #104]\n\t" \
    "vldm %[" v "], {s24-s29}\n\t" \
    POET_ASM_ADD(0, 24) POET_ASM_ADD(1, 25) POET_ASM_ADD(2, 26) \
    POET_ASM_ADD(3, 27) POET_ASM_ADD(4, 28) POET_ASM_ADD(5, 29) \
    POET_ASM_ADD(6, 24) POET_ASM_ADD(7, 25) POET_ASM_ADD(8, 26) \
    POET_ASM_ADD(9, 27) POET_ASM_ADD(10, 28) POET_ASM_ADD(11, 29) \
    POET_ASM_ADD(12, 24) POET_ASM_ADD(13, 25) POET_ASM_ADD(14, 26) \
    POET_ASM_ADD(15, 27) POET_ASM_ADD(16, 28) POET_ASM_ADD(17, 29) \
    POET_ASM_ADD(18, 24) POET_ASM_ADD(19, 25) POET_ASM_ADD(20, 26) \
    POET_ASM_ADD(21, 27) POET_ASM_ADD(22, 28) POET_ASM_ADD(23, 29)
#define POET_ASM_ROWBIAS6(v) \
    "ldr %[" v "], [%[out], #108]\n\t" \
    "vldm %[" v "], {s24-s27}\n\t" \
    POET_ASM_ADD(0, 24) POET_ASM_ADD(1, 24) POET_ASM_ADD(2, 24) \
    POET_ASM_ADD(3, 24) POET_ASM_ADD(4, 24) POET_ASM_ADD(5, 24) \
    POET_ASM_ADD(6, 25) POET_ASM_ADD(7, 25) POET_ASM_ADD(8, 25) \
    POET_ASM_ADD(9, 25) POET_ASM_ADD(10, 25) POET_ASM_ADD(11, 25) \
    POET_ASM_ADD(12, 26) POET_ASM_ADD(13, 26) POET_ASM_ADD(14, 26) \
    POET_ASM_ADD(15, 26) POET_ASM_ADD(16, 26) POET_ASM_ADD(17, 26) \
    POET_ASM_ADD(18, 27) POET_ASM_ADD(19, 27) POET_ASM_ADD(20, 27) \
    POET_ASM_ADD(21, 27) POET_ASM_ADD(22, 27) POET_ASM_ADD(23, 27)
#define POET_ASM_STORE6(t, u) \
    "ldr %[" t "], [%[out], #96]\n\t" \
    "ldr %[" u "], [%[out], #100]\n\t" \
    "vstmia %[" t "], {s0-s5}\n\t" \
    "add %[" t "], %[" t "], %[" u "]\n\t" \
    "vstmia %[" t "], {s6-s11}\n\t" \
    "add %[" t "], %[" t "], %[" u "]\n\t" \
    "vstmia %[" t "], {s12-s17}\n\t" \
    "add %[" t "], %[" t "], %[" u "]\n\t" \
    "vstmia %[" t "], {s18-s23}\n\t"
#define POET_ASM_COLBIAS5(v) \
    "ldr %[" v "], [%[out], #104]\n\t" \
    "vldm %[" v "], {s24-s28}\n\t" \
    POET_ASM_ADD(0, 24) POET_ASM_ADD(1, 25) POET_ASM_ADD(2, 26) POET_ASM_ADD(3, 27) POET_ASM_ADD(4, 28) \
    POET_ASM_ADD(5, 24) POET_ASM_ADD(6, 25) POET_ASM_ADD(7, 26) POET_ASM_ADD(8, 27) POET_ASM_ADD(9, 28) \
    POET_ASM_ADD(10, 24) POET_ASM_ADD(11, 25) POET_ASM_ADD(12, 26) POET_ASM_ADD(13, 27) POET_ASM_ADD(14, 28) \
    POET_ASM_ADD(15, 24) POET_ASM_ADD(16, 25) POET_ASM_ADD(17, 26) POET_ASM_ADD(18, 27) POET_ASM_ADD(19, 28)
#define POET_ASM_ROWBIAS5(v) \
    "ldr %[" v "], [%[out], #108]\n\t" \
    "vldm %[" v "], {s24-s27}\n\t" \
    POET_ASM_ADD(0, 24) POET_ASM_ADD(1, 24) POET_ASM_ADD(2, 24) POET_ASM_ADD(3, 24) POET_ASM_ADD(4, 24) \
    POET_ASM_ADD(5, 25) POET_ASM_ADD(6, 25) POET_ASM_ADD(7, 25) POET_ASM_ADD(8, 25) POET_ASM_ADD(9, 25) \
    POET_ASM_ADD(10, 26) POET_ASM_ADD(11, 26) POET_ASM_ADD(12, 26) POET_ASM_ADD(13, 26) POET_ASM_ADD(14, 26) \
    POET_ASM_ADD(15, 27) POET_ASM_ADD(16, 27) POET_ASM_ADD(17, 27) POET_ASM_ADD(18, 27) POET_ASM_ADD(19, 27)
#define POET_ASM_STORE5(t, u) \
    "ldr %[" t "], [%[out], #96]\n\t" \
    "ldr %[" u "], [%[out], #100]\n\t" \
    "vstmia %[" t "], {s0-s4}\n\t" \
    "add %[" t "], %[" t "], %[" u "]\n\t" \
    "vstmia %[" t "], {s5-s9}\n\t" \
    "add %[" t "], %[" t "], %[" u "]\n\t" \
    "vstmia %[" t "], {s10-s14}\n\t" \
    "add %[" t "], %[" t "], %[" u "]\n\t" \
    "vstmia %[" t "], {s15-s19}\n\t"
#define POET_ASM_COLBIAS2(v) \
    "ldr %[" v "], [%[out], #104]\n\t" \
    "vldm %[" v "], {s24-s25}\n\t" \
    POET_ASM_ADD(0, 24) POET_ASM_ADD(1, 25) POET_ASM_ADD(2, 24) POET_ASM_ADD(3, 25) \
    POET_ASM_ADD(4, 24) POET_ASM_ADD(5, 25) POET_ASM_ADD(6, 24) POET_ASM_ADD(7, 25)
#define POET_ASM_ROWBIAS2(v) \
    "ldr %[" v "], [%[out], #108]\n\t" \
    "vldm %[" v "], {s24-s27}\n\t" \
    POET_ASM_ADD(0, 24) POET_ASM_ADD(1, 24) POET_ASM_ADD(2, 25) POET_ASM_ADD(3, 25) \
    POET_ASM_ADD(4, 26) POET_ASM_ADD(5, 26) POET_ASM_ADD(6, 27) POET_ASM_ADD(7, 27)
#define POET_ASM_STORE2(t, u) \
    "ldr %[" t "], [%[out], #96]\n\t" \
    "ldr %[" u "], [%[out], #100]\n\t" \
    "vstmia %[" t "], {s0-s1}\n\t" \
    "add %[" t "], %[" t "], %[" u "]\n\t" \
    "vstmia %[" t "], {s2-s3}\n\t" \
    "add %[" t "], %[" t "], %[" u "]\n\t" \
    "vstmia %[" t "], {s4-s5}\n\t" \
    "add %[" t "], %[" t "], %[" u "]\n\t" \
    "vstmia %[" t "], {s6-s7}\n\t"
#define POET_ASM_COLBIAS3(v) \
    "ldr %[" v "], [%[out], #104]\n\t" \
    "vldm %[" v "], {s24-s26}\n\t" \
    POET_ASM_ADD(0, 24) POET_ASM_ADD(1, 25) POET_ASM_ADD(2, 26) \
    POET_ASM_ADD(3, 24) POET_ASM_ADD(4, 25) POET_ASM_ADD(5, 26) \
    POET_ASM_ADD(6, 24) POET_ASM_ADD(7, 25) POET_ASM_ADD(8, 26) \
    POET_ASM_ADD(9, 24) POET_ASM_ADD(10, 25) POET_ASM_ADD(11, 26)
#define POET_ASM_ROWBIAS3(v) \
    "ldr %[" v "], [%[out], #108]\n\t" \
    "vldm %[" v "], {s24-s27}\n\t" \
    POET_ASM_ADD(0, 24) POET_ASM_ADD(1, 24) POET_ASM_ADD(2, 24) \
    POET_ASM_ADD(3, 25) POET_ASM_ADD(4, 25) POET_ASM_ADD(5, 25) \
    POET_ASM_ADD(6, 26) POET_ASM_ADD(7, 26) POET_ASM_ADD(8, 26) \
    POET_ASM_ADD(9, 27) POET_ASM_ADD(10, 27) POET_ASM_ADD(11, 27)
#define POET_ASM_STORE3(t, u) \
    "ldr %[" t "], [%[out], #96]\n\t" \
    "ldr %[" u "], [%[out], #100]\n\t" \
    "vstmia %[" t "], {s0-s2}\n\t" \
    "add %[" t "], %[" t "], %[" u "]\n\t" \
    "vstmia %[" t "], {s3-s5}\n\t" \
    "add %[" t "], %[" t "], %[" u "]\n\t" \
    "vstmia %[" t "], {s6-s8}\n\t" \
    "add %[" t "], %[" t "], %[" u "]\n\t" \
    "vstmia %[" t "], {s9-s11}\n\t"
/* one asm statement per epilogue (EPI: 0 plain, 1 column bias, 2 row bias; a compile-time constant) */
#define POET_ASM_WITH_EPILOGUE(EPI, NC, body, t, u, v, operands) \
    do { \
        if ((EPI) == 1) \
            __asm__ volatile(body POET_ASM_COLBIAS##NC(v) POET_ASM_STORE##NC(t, u) operands); \
        else if ((EPI) == 2) \
            __asm__ volatile(body POET_ASM_ROWBIAS##NC(v) POET_ASM_STORE##NC(t, u) operands); \
        else \
            __asm__ volatile(body POET_ASM_STORE##NC(t, u) operands); \
    } while (0)

/* K steps: an odd one first, then pairs (%[k] counts down the pairs) */
#define POET_ASM_K_LOOP(step) \
    "tst %[k], #1\n\t" \
    "beq 1f\n\t" \
    step \
    "1:\n\t" \
    "lsrs %[k], %[k], #1\n\t" \
    "beq 3f\n\t" \
    "2:\n\t" \
    step step \
    "subs %[k], %[k], #1\n\t" \
    "bne 2b\n\t" \
    "3:\n\t"

#define POET_ASM_CLOBBERS \
    "memory", "cc", "s0", "s1", "s2", "s3", "s4", "s5", "s6", "s7", "s8", "s9", "s10", "s11", "s12", "s13", \
        "s14", "s15", "s16", "s17", "s18", "s19", "s20", "s21", "s22", "s23", "s24", "s25", "s26", "s27", \
        "s28", "s29", "s30", "s31"

/* Aᵀ·B, 4x6: op(A)[i + r, k] = a[k * lda + r] (4 consecutive floats per k), op(B)[k, j + c] = b[k * ldb + c]
 * (6 per k); lda and ldb in floats, K >= 1. Per k step: 3 VLDM, 2 ADD and 24 x (VMUL + VADD). */
#define POET_ASM_TN_LOOP \
    POET_ASM_K_LOOP("vldm %[pa], {s24-s27}\n\t" \
                    "add %[pa], %[pa], %[sa]\n\t" POET_ASM_B6_STEP)
#define POET_ASM_TN_BODY "vldm %[out], {s0-s23}\n\t" POET_ASM_TN_LOOP
#define POET_ASM_TN_OPERANDS \
    : [pa] "+r"(a), [pb] "+r"(b), [k] "+r"(k), [sa] "+r"(sa), [sb] "+r"(sb) : [out] "r"(out) : POET_ASM_CLOBBERS
POET_ALWAYS_INLINE void poet_asm_tn_4x6(const float *a, int32_t lda, const float *b, int32_t ldb, int32_t K,
                                        const poet_asm_out *out, const int EPI)
{
    int32_t sa = 4 * lda, sb = 4 * ldb - 24;
    uint32_t k = (uint32_t)K;
    POET_ASM_WITH_EPILOGUE(EPI, 6, POET_ASM_TN_BODY, "pa", "sa", "sb", POET_ASM_TN_OPERANDS);
}

/* A·B, 4x6: op(A)[i + r, k] = a[r * lda + k] (4 rows walked along k), op(B)[k, j + c] = b[k * ldb + c];
 * K >= 1. Per k step: 6 VLDM, 1 ADD and 24 x (VMUL + VADD). */
#define POET_ASM_NN_LOOP POET_ASM_K_LOOP(POET_ASM_A4(24, 25, 26, 27) POET_ASM_B6_STEP)
#define POET_ASM_NN_BODY "vldm %[out], {s0-s23}\n\t" POET_ASM_NN_LOOP
#define POET_ASM_NN_OPERANDS \
    : [a0] "+r"(a0), [a1] "+r"(a1), [a2] "+r"(a2), [a3] "+r"(a3), [pb] "+r"(b), [k] "+r"(k), [sb] "+r"(sb) \
    : [out] "r"(out) : POET_ASM_CLOBBERS
POET_ALWAYS_INLINE void poet_asm_nn_4x6(const float *a, int32_t lda, const float *b, int32_t ldb, int32_t K,
                                        const poet_asm_out *out, const int EPI)
{
    const float *a0 = a, *a1 = a + lda, *a2 = a + 2 * lda, *a3 = a + 3 * lda;
    int32_t sb = 4 * ldb - 24;
    uint32_t k = (uint32_t)K;
    POET_ASM_WITH_EPILOGUE(EPI, 6, POET_ASM_NN_BODY, "a0", "sb", "k", POET_ASM_NN_OPERANDS);
}

/* one column c of a 4x5 A·Bᵀ block for a pair of k: (b[k], b[k+1]) into s28, s29, x pairs in s20..s27,
 * accumulators s(c), s(5 + c), s(10 + c), s(15 + c); k first, then k + 1, for every output */
#define POET_ASM_NT_COL2(bc, c0, c1, c2, c3) \
    "vldmia %[" bc "]!, {s28-s29}\n\t" \
    POET_ASM_MAC(c0, 20, 28) POET_ASM_MAC(c1, 22, 28) POET_ASM_MAC(c2, 24, 28) POET_ASM_MAC(c3, 26, 28) \
    POET_ASM_MAC(c0, 21, 29) POET_ASM_MAC(c1, 23, 29) POET_ASM_MAC(c2, 25, 29) POET_ASM_MAC(c3, 27, 29)
#define POET_ASM_NT_COL1(bc, c0, c1, c2, c3) \
    "vldmia %[" bc "]!, {s28}\n\t" \
    POET_ASM_MAC(c0, 20, 28) POET_ASM_MAC(c1, 22, 28) POET_ASM_MAC(c2, 24, 28) POET_ASM_MAC(c3, 26, 28)
#define POET_ASM_NT_PAIR \
    "vldmia %[a0]!, {s20-s21}\n\t" \
    "vldmia %[a1]!, {s22-s23}\n\t" \
    "vldmia %[a2]!, {s24-s25}\n\t" \
    "vldmia %[a3]!, {s26-s27}\n\t" \
    POET_ASM_NT_COL2("b0", 0, 5, 10, 15) POET_ASM_NT_COL2("b1", 1, 6, 11, 16) \
    POET_ASM_NT_COL2("b2", 2, 7, 12, 17) POET_ASM_NT_COL2("b3", 3, 8, 13, 18) \
    POET_ASM_NT_COL2("b4", 4, 9, 14, 19)
#define POET_ASM_NT_SINGLE \
    POET_ASM_A4(20, 22, 24, 26) \
    POET_ASM_NT_COL1("b0", 0, 5, 10, 15) POET_ASM_NT_COL1("b1", 1, 6, 11, 16) \
    POET_ASM_NT_COL1("b2", 2, 7, 12, 17) POET_ASM_NT_COL1("b3", 3, 8, 13, 18) \
    POET_ASM_NT_COL1("b4", 4, 9, 14, 19)

/* A·Bᵀ, 4x5: op(A)[i + r, k] = a[r * lda + k], op(B)[k, j + c] = b[c * ldb + k]: 9 rows walked along k, two
 * k at a time (4 x + 5 y pairs loaded by 9 VLDM for 40 MACs); K >= 1. */
#define POET_ASM_NT_BODY \
    "vldm %[out], {s0-s19}\n\t" \
    "tst %[k], #1\n\t" \
    "beq 1f\n\t" POET_ASM_NT_SINGLE "1:\n\t" \
    "lsrs %[k], %[k], #1\n\t" \
    "beq 3f\n\t" \
    "2:\n\t" POET_ASM_NT_PAIR "subs %[k], %[k], #1\n\t" \
    "bne 2b\n\t" \
    "3:\n\t"
#define POET_ASM_NT_OPERANDS \
    : [a0] "+r"(a0), [a1] "+r"(a1), [a2] "+r"(a2), [a3] "+r"(a3), [b0] "+r"(b0), [b1] "+r"(b1), [b2] "+r"(b2), \
      [b3] "+r"(b3), [b4] "+r"(b4), [k] "+r"(k) \
    : [out] "r"(out) : POET_ASM_CLOBBERS
POET_ALWAYS_INLINE void poet_asm_nt_4x5(const float *a, int32_t lda, const float *b, int32_t ldb, int32_t K,
                                        const poet_asm_out *out, const int EPI)
{
    const float *a0 = a, *a1 = a + lda, *a2 = a + 2 * lda, *a3 = a + 3 * lda;
    const float *b0 = b, *b1 = b + ldb, *b2 = b + 2 * ldb, *b3 = b + 3 * ldb, *b4 = b + 4 * ldb;
    uint32_t k = (uint32_t)K;
    POET_ASM_WITH_EPILOGUE(EPI, 5, POET_ASM_NT_BODY, "a1", "k", "a0", POET_ASM_NT_OPERANDS);
}

/* A·Bᵀ with 2 columns (a classifier head), 4x2: 4 rows and 2 columns walked along k, four k at a time
 * (4 x quads in s8..s23, a y quad in s24..s27: 6 VLDM for 32 MACs); single steps first for K % 4 */
#define POET_ASM_NT2_QUAD \
    "vldmia %[a0]!, {s8-s11}\n\t" \
    "vldmia %[a1]!, {s12-s15}\n\t" \
    "vldmia %[a2]!, {s16-s19}\n\t" \
    "vldmia %[a3]!, {s20-s23}\n\t" \
    "vldmia %[b0]!, {s24-s27}\n\t" \
    POET_ASM_MAC(0, 8, 24) POET_ASM_MAC(2, 12, 24) POET_ASM_MAC(4, 16, 24) POET_ASM_MAC(6, 20, 24) \
    POET_ASM_MAC(0, 9, 25) POET_ASM_MAC(2, 13, 25) POET_ASM_MAC(4, 17, 25) POET_ASM_MAC(6, 21, 25) \
    POET_ASM_MAC(0, 10, 26) POET_ASM_MAC(2, 14, 26) POET_ASM_MAC(4, 18, 26) POET_ASM_MAC(6, 22, 26) \
    POET_ASM_MAC(0, 11, 27) POET_ASM_MAC(2, 15, 27) POET_ASM_MAC(4, 19, 27) POET_ASM_MAC(6, 23, 27) \
    "vldmia %[b1]!, {s24-s27}\n\t" \
    POET_ASM_MAC(1, 8, 24) POET_ASM_MAC(3, 12, 24) POET_ASM_MAC(5, 16, 24) POET_ASM_MAC(7, 20, 24) \
    POET_ASM_MAC(1, 9, 25) POET_ASM_MAC(3, 13, 25) POET_ASM_MAC(5, 17, 25) POET_ASM_MAC(7, 21, 25) \
    POET_ASM_MAC(1, 10, 26) POET_ASM_MAC(3, 14, 26) POET_ASM_MAC(5, 18, 26) POET_ASM_MAC(7, 22, 26) \
    POET_ASM_MAC(1, 11, 27) POET_ASM_MAC(3, 15, 27) POET_ASM_MAC(5, 19, 27) POET_ASM_MAC(7, 23, 27)
#define POET_ASM_NT2_SINGLE \
    POET_ASM_A4(8, 12, 16, 20) \
    "vldmia %[b0]!, {s24}\n\t" \
    POET_ASM_MAC(0, 8, 24) POET_ASM_MAC(2, 12, 24) POET_ASM_MAC(4, 16, 24) POET_ASM_MAC(6, 20, 24) \
    "vldmia %[b1]!, {s24}\n\t" \
    POET_ASM_MAC(1, 8, 24) POET_ASM_MAC(3, 12, 24) POET_ASM_MAC(5, 16, 24) POET_ASM_MAC(7, 20, 24)

#define POET_ASM_NT2_BODY \
    "vldm %[out], {s0-s7}\n\t" \
    "1:\n\t" \
    "tst %[k], #3\n\t" \
    "beq 2f\n\t" POET_ASM_NT2_SINGLE "sub %[k], %[k], #1\n\t" \
    "b 1b\n\t" \
    "2:\n\t" \
    "lsrs %[k], %[k], #2\n\t" \
    "beq 3f\n\t" \
    "6:\n\t" POET_ASM_NT2_QUAD "subs %[k], %[k], #1\n\t" \
    "bne 6b\n\t" \
    "3:\n\t"
#define POET_ASM_NT2_OPERANDS \
    : [a0] "+r"(a0), [a1] "+r"(a1), [a2] "+r"(a2), [a3] "+r"(a3), [b0] "+r"(b0), [b1] "+r"(b1), [k] "+r"(k) \
    : [out] "r"(out) : POET_ASM_CLOBBERS
POET_ALWAYS_INLINE void poet_asm_nt_4x2(const float *a, int32_t lda, const float *b, int32_t ldb, int32_t K,
                                        const poet_asm_out *out, const int EPI)
{
    const float *a0 = a, *a1 = a + lda, *a2 = a + 2 * lda, *a3 = a + 3 * lda, *b0 = b, *b1 = b + ldb;
    uint32_t k = (uint32_t)K;
    POET_ASM_WITH_EPILOGUE(EPI, 2, POET_ASM_NT2_BODY, "a1", "k", "a0", POET_ASM_NT2_OPERANDS);
}

/* Aᵀ·B with 2 rows (a 2-output layer's weight gradient), 2x12, plain y = acc only: op(A)[i + r, k] =
 * a[k * lda + r] (1 VLDM), op(B)[k, j + c] = b[k * ldb + c] (4 VLDM of 3) per k step */
#define POET_ASM_TN2_STEP \
    "vldm %[pa], {s24-s25}\n\t" \
    "add %[pa], %[pa], %[sa]\n\t" \
    "vldmia %[pb]!, {s26-s28}\n\t" \
    POET_ASM_MAC(0, 24, 26) POET_ASM_MAC(1, 24, 27) POET_ASM_MAC(2, 24, 28) \
    POET_ASM_MAC(12, 25, 26) POET_ASM_MAC(13, 25, 27) POET_ASM_MAC(14, 25, 28) \
    "vldmia %[pb]!, {s26-s28}\n\t" \
    POET_ASM_MAC(3, 24, 26) POET_ASM_MAC(4, 24, 27) POET_ASM_MAC(5, 24, 28) \
    POET_ASM_MAC(15, 25, 26) POET_ASM_MAC(16, 25, 27) POET_ASM_MAC(17, 25, 28) \
    "vldmia %[pb]!, {s26-s28}\n\t" \
    POET_ASM_MAC(6, 24, 26) POET_ASM_MAC(7, 24, 27) POET_ASM_MAC(8, 24, 28) \
    POET_ASM_MAC(18, 25, 26) POET_ASM_MAC(19, 25, 27) POET_ASM_MAC(20, 25, 28) \
    "vldmia %[pb]!, {s26-s28}\n\t" \
    POET_ASM_MAC(9, 24, 26) POET_ASM_MAC(10, 24, 27) POET_ASM_MAC(11, 24, 28) \
    POET_ASM_MAC(21, 25, 26) POET_ASM_MAC(22, 25, 27) POET_ASM_MAC(23, 25, 28) \
    "add %[pb], %[pb], %[sb]\n\t"

POET_ALWAYS_INLINE void poet_asm_tn_2x12(const float *a, int32_t lda, const float *b, int32_t ldb, int32_t K,
                                         const poet_asm_out *out)
{
    int32_t sa = 4 * lda, sb = 4 * ldb - 48;
    uint32_t k = (uint32_t)K;
    __asm__ volatile("vldm %[out], {s0-s23}\n\t"
                     POET_ASM_K_LOOP(POET_ASM_TN2_STEP)
                     "ldr %[pa], [%[out], #96]\n\t"
                     "ldr %[sa], [%[out], #100]\n\t"
                     "vstmia %[pa], {s0-s11}\n\t"
                     "add %[pa], %[pa], %[sa]\n\t"
                     "vstmia %[pa], {s12-s23}\n\t"
                     : [pa] "+r"(a), [pb] "+r"(b), [k] "+r"(k), [sa] "+r"(sa), [sb] "+r"(sb)
                     : [out] "r"(out)
                     : POET_ASM_CLOBBERS);
}

/* Aᵀ·B, 4x4, stored every other float (a 1x1 stride-2 convolution's input gradient: the outputs of one
 * input row sit at even columns): op(A)[i + r, k] = a[k * lda + r], op(B)[k, j + c] = b[k * ldb + c];
 * y[r * ldy + 2 c] = acc. Per k step: 2 VLDM, 2 ADD and 16 x (VMUL + VADD). */
#define POET_ASM_TN44_STEP \
    "vldm %[pa], {s16-s19}\n\t" \
    "add %[pa], %[pa], %[sa]\n\t" \
    "vldm %[pb], {s20-s23}\n\t" \
    "add %[pb], %[pb], %[sb]\n\t" \
    POET_ASM_4X4(16, 17, 18, 19, 20, 21, 22, 23)
POET_ALWAYS_INLINE void poet_asm_tn_4x4_s2(const float *a, int32_t lda, const float *b, int32_t ldb, int32_t K,
                                           const poet_asm_out *out)
{
    int32_t sa = 4 * lda, sb = 4 * ldb;
    uint32_t k = (uint32_t)K;
    __asm__ volatile("vldm %[out], {s0-s15}\n\t" POET_ASM_K_LOOP(POET_ASM_TN44_STEP)
                     "ldr %[pa], [%[out], #96]\n\t"
                     "ldr %[sa], [%[out], #100]\n\t"
                     "vstr s0, [%[pa], #0]\n\t" "vstr s1, [%[pa], #8]\n\t"
                     "vstr s2, [%[pa], #16]\n\t" "vstr s3, [%[pa], #24]\n\t"
                     "add %[pa], %[pa], %[sa]\n\t"
                     "vstr s4, [%[pa], #0]\n\t" "vstr s5, [%[pa], #8]\n\t"
                     "vstr s6, [%[pa], #16]\n\t" "vstr s7, [%[pa], #24]\n\t"
                     "add %[pa], %[pa], %[sa]\n\t"
                     "vstr s8, [%[pa], #0]\n\t" "vstr s9, [%[pa], #8]\n\t"
                     "vstr s10, [%[pa], #16]\n\t" "vstr s11, [%[pa], #24]\n\t"
                     "add %[pa], %[pa], %[sa]\n\t"
                     "vstr s12, [%[pa], #0]\n\t" "vstr s13, [%[pa], #8]\n\t"
                     "vstr s14, [%[pa], #16]\n\t" "vstr s15, [%[pa], #24]\n\t"
                     : [pa] "+r"(a), [pb] "+r"(b), [k] "+r"(k), [sa] "+r"(sa), [sb] "+r"(sb)
                     : [out] "r"(out)
                     : POET_ASM_CLOBBERS);
}

/* 4-column epilogues (poet_asm_nn_4x4_s2) */
#define POET_ASM_COLBIAS4(v) \
    "ldr %[" v "], [%[out], #104]\n\t" \
    "vldm %[" v "], {s24-s27}\n\t" \
    POET_ASM_ADD(0, 24) POET_ASM_ADD(1, 25) POET_ASM_ADD(2, 26) POET_ASM_ADD(3, 27) \
    POET_ASM_ADD(4, 24) POET_ASM_ADD(5, 25) POET_ASM_ADD(6, 26) POET_ASM_ADD(7, 27) \
    POET_ASM_ADD(8, 24) POET_ASM_ADD(9, 25) POET_ASM_ADD(10, 26) POET_ASM_ADD(11, 27) \
    POET_ASM_ADD(12, 24) POET_ASM_ADD(13, 25) POET_ASM_ADD(14, 26) POET_ASM_ADD(15, 27)
#define POET_ASM_ROWBIAS4(v) \
    "ldr %[" v "], [%[out], #108]\n\t" \
    "vldm %[" v "], {s24-s27}\n\t" \
    POET_ASM_ADD(0, 24) POET_ASM_ADD(1, 24) POET_ASM_ADD(2, 24) POET_ASM_ADD(3, 24) \
    POET_ASM_ADD(4, 25) POET_ASM_ADD(5, 25) POET_ASM_ADD(6, 25) POET_ASM_ADD(7, 25) \
    POET_ASM_ADD(8, 26) POET_ASM_ADD(9, 26) POET_ASM_ADD(10, 26) POET_ASM_ADD(11, 26) \
    POET_ASM_ADD(12, 27) POET_ASM_ADD(13, 27) POET_ASM_ADD(14, 27) POET_ASM_ADD(15, 27)
#define POET_ASM_STORE4(t, u) \
    "ldr %[" t "], [%[out], #96]\n\t" \
    "ldr %[" u "], [%[out], #100]\n\t" \
    "vstmia %[" t "], {s0-s3}\n\t" \
    "add %[" t "], %[" t "], %[" u "]\n\t" \
    "vstmia %[" t "], {s4-s7}\n\t" \
    "add %[" t "], %[" t "], %[" u "]\n\t" \
    "vstmia %[" t "], {s8-s11}\n\t" \
    "add %[" t "], %[" t "], %[" u "]\n\t" \
    "vstmia %[" t "], {s12-s15}\n\t"

/* A·B, 4x4, reading every other float of op(B)'s rows (a 1x1 stride-2 convolution's forward: one output row
 * reads even input columns): op(A)[i + r, k] = a[r * lda + k], op(B)[k, j + c] = b[k * ldb + 2 c]. Per k
 * step: 4 single-value VLDM, 4 VLDR, 1 ADD and 16 x (VMUL + VADD). */
#define POET_ASM_NN44S2_STEP \
    POET_ASM_A4(16, 17, 18, 19) \
    "vldr s20, [%[pb]]\n\t" \
    "vldr s21, [%[pb], #8]\n\t" \
    "vldr s22, [%[pb], #16]\n\t" \
    "vldr s23, [%[pb], #24]\n\t" \
    "add %[pb], %[pb], %[sb]\n\t" \
    POET_ASM_4X4(16, 17, 18, 19, 20, 21, 22, 23)
#define POET_ASM_NN44S2_BODY "vldm %[out], {s0-s15}\n\t" POET_ASM_K_LOOP(POET_ASM_NN44S2_STEP)
POET_ALWAYS_INLINE void poet_asm_nn_4x4_s2(const float *a, int32_t lda, const float *b, int32_t ldb, int32_t K,
                                           const poet_asm_out *out, const int EPI)
{
    const float *a0 = a, *a1 = a + lda, *a2 = a + 2 * lda, *a3 = a + 3 * lda;
    int32_t sb = 4 * ldb;
    uint32_t k = (uint32_t)K;
    POET_ASM_WITH_EPILOGUE(EPI, 4, POET_ASM_NN44S2_BODY, "a0", "sb", "k", POET_ASM_NN_OPERANDS);
}

/* A 3x3 convolution block of 4 channels x 4 consecutive pixels with every tap valid (conv.c's poet_block
 * with R = P = 4 and a full window, stride 1): out[r, p] = sum over k1 < nk1, k2 < 3, k3 < 3 (ascending) of
 * v[k1 vk1 + k2 vk2 + DIR k3 + p] * w_r[9 k1' + 3 k2 + k3] where w_r = w + r wr walks its 9 taps and then
 * skips to the next k1 (wk1 floats on). DIR = +1: the forward (inputs x[p + k3]); DIR = -1: the input
 * gradient (dY values x[p - k3]); DIR = 2: the forward at stride 2 (x[2 p + k3]). One k2 row: the input
 * values the 4 pixels x 3 taps read in one VLDM (6 in s16..s21; 9 in s16..s24 at stride 2), then per tap 4
 * weights (s22..s25; s25..s28) for 16 MACs: 13 loads for 48 MACs. y rows from the out struct (ldy bytes
 * apart), + rbias[r] with EPI = 2. */
#define POET_ASM_CONV3_ROW_FWD \
    "vldm %[pv], {s16-s21}\n\t" \
    POET_ASM_W4(22, 23, 24, 25) POET_ASM_4X4(22, 23, 24, 25, 16, 17, 18, 19) \
    POET_ASM_W4(22, 23, 24, 25) POET_ASM_4X4(22, 23, 24, 25, 17, 18, 19, 20) \
    POET_ASM_W4(22, 23, 24, 25) POET_ASM_4X4(22, 23, 24, 25, 18, 19, 20, 21)
#define POET_ASM_CONV3_ROW_GI \
    "vldm %[pv], {s16-s21}\n\t" \
    POET_ASM_W4(22, 23, 24, 25) POET_ASM_4X4(22, 23, 24, 25, 18, 19, 20, 21) \
    POET_ASM_W4(22, 23, 24, 25) POET_ASM_4X4(22, 23, 24, 25, 17, 18, 19, 20) \
    POET_ASM_W4(22, 23, 24, 25) POET_ASM_4X4(22, 23, 24, 25, 16, 17, 18, 19)
/* stride 2 (forward only): the 9 input values x[2 p + k3] in s16..s24, weights in s25..s28 */
#define POET_ASM_CONV3_ROW_FWD2 \
    "vldm %[pv], {s16-s24}\n\t" \
    POET_ASM_W4(25, 26, 27, 28) POET_ASM_4X4(25, 26, 27, 28, 16, 18, 20, 22) \
    POET_ASM_W4(25, 26, 27, 28) POET_ASM_4X4(25, 26, 27, 28, 17, 19, 21, 23) \
    POET_ASM_W4(25, 26, 27, 28) POET_ASM_4X4(25, 26, 27, 28, 18, 20, 22, 24)
#define POET_ASM_CONV3_BODY(row) "vldm %[out], {s0-s15}\n\t" POET_ASM_CONV3_LOOP(row)
#define POET_ASM_CONV3_LOOP(row) \
    "1:\n\t" row "add %[pv], %[pv], %[vk2]\n\t" row "add %[pv], %[pv], %[vk2]\n\t" row \
    "ldr %[t], [%[out], #112]\n\t" \
    "add %[pv], %[pv], %[t]\n\t" \
    "ldr %[t], [%[out], #116]\n\t" \
    "add %[w0], %[w0], %[t]\n\t" \
    "add %[w1], %[w1], %[t]\n\t" \
    "add %[w2], %[w2], %[t]\n\t" \
    "add %[w3], %[w3], %[t]\n\t" \
    "subs %[k], %[k], #1\n\t" \
    "bne 1b\n\t"
#define POET_ASM_CONV3_OPERANDS \
    : [w0] "+r"(w0), [w1] "+r"(w1), [w2] "+r"(w2), [w3] "+r"(w3), [pv] "+r"(pv), [k] "+r"(k), [t] "=&r"(t) \
    : [vk2] "r"(vk2b), [out] "r"(out) : POET_ASM_CLOBBERS
/* out->step1 = 4 (vk1 - 2 vk2) and out->step2 = 4 (wk1 - 9) must be set (bytes to the next k1) */
POET_ALWAYS_INLINE void poet_asm_conv3x3_4x4(const float *w, int32_t wr, const float *v, int32_t nk1, int32_t vk2,
                                             const poet_asm_out *out, const int DIR, const int EPI)
{
    const float *w0 = w, *w1 = w + wr, *w2 = w + 2 * wr, *w3 = w + 3 * wr;
    const float *pv = DIR < 0 ? v - 2 : v;
    const int32_t vk2b = 4 * vk2;
    uint32_t k = (uint32_t)nk1; /* >= 1 */
    int32_t t;
    if (DIR == 2)
        POET_ASM_WITH_EPILOGUE(EPI, 4, POET_ASM_CONV3_BODY(POET_ASM_CONV3_ROW_FWD2), "w0", "w1", "w2",
                               POET_ASM_CONV3_OPERANDS);
    else if (DIR > 0)
        POET_ASM_WITH_EPILOGUE(EPI, 4, POET_ASM_CONV3_BODY(POET_ASM_CONV3_ROW_FWD), "w0", "w1", "w2",
                               POET_ASM_CONV3_OPERANDS);
    else
        POET_ASM_WITH_EPILOGUE(EPI, 4, POET_ASM_CONV3_BODY(POET_ASM_CONV3_ROW_GI), "w0", "w1", "w2",
                               POET_ASM_CONV3_OPERANDS);
}

/* 4x3 blocks for the 3-column tail of A·B and Aᵀ·B (e.g. the 9 pixels of a 3x3 map in a 1x1 convolution:
 * one 4x6 block, then one 4x3), accumulators s(3r + c). Per k step: A·B 4 single-value VLDM, 1 VLDM of 3,
 * 1 ADD; Aᵀ·B 2 VLDM, 2 ADD; and 12 x (VMUL + VADD). */
#define POET_ASM_B3_STEP \
    "vldm %[pb], {s28-s30}\n\t" \
    "add %[pb], %[pb], %[sb]\n\t" POET_ASM_4X3(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11)
#define POET_ASM_NN3_LOOP POET_ASM_K_LOOP(POET_ASM_A4(24, 25, 26, 27) POET_ASM_B3_STEP)
#define POET_ASM_NN3_BODY "vldm %[out], {s0-s11}\n\t" POET_ASM_NN3_LOOP
POET_ALWAYS_INLINE void poet_asm_nn_4x3(const float *a, int32_t lda, const float *b, int32_t ldb, int32_t K,
                                        const poet_asm_out *out, const int EPI)
{
    const float *a0 = a, *a1 = a + lda, *a2 = a + 2 * lda, *a3 = a + 3 * lda;
    int32_t sb = 4 * ldb;
    uint32_t k = (uint32_t)K;
    POET_ASM_WITH_EPILOGUE(EPI, 3, POET_ASM_NN3_BODY, "a0", "sb", "k", POET_ASM_NN_OPERANDS);
}
#define POET_ASM_TN3_LOOP \
    POET_ASM_K_LOOP("vldm %[pa], {s24-s27}\n\t" \
                    "add %[pa], %[pa], %[sa]\n\t" POET_ASM_B3_STEP)
#define POET_ASM_TN3_BODY "vldm %[out], {s0-s11}\n\t" POET_ASM_TN3_LOOP
POET_ALWAYS_INLINE void poet_asm_tn_4x3(const float *a, int32_t lda, const float *b, int32_t ldb, int32_t K,
                                        const poet_asm_out *out, const int EPI)
{
    int32_t sa = 4 * lda, sb = 4 * ldb;
    uint32_t k = (uint32_t)K;
    POET_ASM_WITH_EPILOGUE(EPI, 3, POET_ASM_TN3_BODY, "pa", "sa", "sb", POET_ASM_TN_OPERANDS);
}

/* ---- blocks whose accumulators start from memory (the channel-tile kernels of src/optimized/conv.c) --------
 * The same blocks as above, but every accumulator starts at the value of a previous partial sum P (same
 * layout as the block's outputs: 4 rows of NC floats at %[ip], the rows ldy bytes apart as y's) instead of
 * +0.0f: then the products in the same order and the same epilogue, so the bits are those of the reference
 * part kernel (acc = P; acc += products ascending). %[ip] is advanced; `step` names the register that
 * holds ldy. */
#define POET_ASM_INIT_ROWS(step, r0, r1, r2, r3) \
    "vldm %[ip], {" r0 "}\n\t" \
    "add %[ip], %[ip], %[" step "]\n\t" \
    "vldm %[ip], {" r1 "}\n\t" \
    "add %[ip], %[ip], %[" step "]\n\t" \
    "vldm %[ip], {" r2 "}\n\t" \
    "add %[ip], %[ip], %[" step "]\n\t" \
    "vldm %[ip], {" r3 "}\n\t"
#define POET_ASM_INIT6(step) POET_ASM_INIT_ROWS(step, "s0-s5", "s6-s11", "s12-s17", "s18-s23")
#define POET_ASM_INIT4(step) POET_ASM_INIT_ROWS(step, "s0-s3", "s4-s7", "s8-s11", "s12-s15")
#define POET_ASM_INIT3(step) POET_ASM_INIT_ROWS(step, "s0-s2", "s3-s5", "s6-s8", "s9-s11")

/* A·B has no register to spare for ldy: k holds it while the rows load, then K from out->step2 */
#define POET_ASM_NN_INIT(rows, loop) \
    "ldr %[k], [%[out], #100]\n\t" rows("k") "ldr %[k], [%[out], #116]\n\t" loop
#define POET_ASM_NN_INIT_OPERANDS \
    : [a0] "+r"(a0), [a1] "+r"(a1), [a2] "+r"(a2), [a3] "+r"(a3), [pb] "+r"(b), [k] "=&r"(k), [sb] "+r"(sb), \
      [ip] "+r"(ip) \
    : [out] "r"(out) : POET_ASM_CLOBBERS
#define POET_ASM_TN_INIT_OPERANDS \
    : [pa] "+r"(a), [pb] "+r"(b), [k] "+r"(k), [sa] "+r"(sa), [sb] "+r"(sb), [ip] "+r"(ip) \
    : [out] "r"(out), [il] "r"(il) : POET_ASM_CLOBBERS

/* poet_asm_nn_4x6 / nn_4x3 / tn_4x6 / tn_4x3 from init (K >= 1; A·B reads K from out->step2) */
POET_ALWAYS_INLINE void poet_asm_nn_4x6_init(const float *a, int32_t lda, const float *b, int32_t ldb, int32_t K,
                                             const poet_asm_out *out, const float *init, const int EPI)
{
    const float *a0 = a, *a1 = a + lda, *a2 = a + 2 * lda, *a3 = a + 3 * lda, *ip = init;
    int32_t sb = 4 * ldb - 24;
    uint32_t k;
    (void)K;
    POET_ASM_WITH_EPILOGUE(EPI, 6, POET_ASM_NN_INIT(POET_ASM_INIT6, POET_ASM_NN_LOOP), "a0", "sb", "k",
                           POET_ASM_NN_INIT_OPERANDS);
}
POET_ALWAYS_INLINE void poet_asm_nn_4x3_init(const float *a, int32_t lda, const float *b, int32_t ldb, int32_t K,
                                             const poet_asm_out *out, const float *init, const int EPI)
{
    const float *a0 = a, *a1 = a + lda, *a2 = a + 2 * lda, *a3 = a + 3 * lda, *ip = init;
    int32_t sb = 4 * ldb;
    uint32_t k;
    (void)K;
    POET_ASM_WITH_EPILOGUE(EPI, 3, POET_ASM_NN_INIT(POET_ASM_INIT3, POET_ASM_NN3_LOOP), "a0", "sb", "k",
                           POET_ASM_NN_INIT_OPERANDS);
}
POET_ALWAYS_INLINE void poet_asm_tn_4x6_init(const float *a, int32_t lda, const float *b, int32_t ldb, int32_t K,
                                             const poet_asm_out *out, const float *init, const int EPI)
{
    const float *ip = init;
    int32_t sa = 4 * lda, sb = 4 * ldb - 24;
    const int32_t il = out->ldy;
    uint32_t k = (uint32_t)K;
    POET_ASM_WITH_EPILOGUE(EPI, 6, POET_ASM_INIT6("il") POET_ASM_TN_LOOP, "pa", "sa", "sb", POET_ASM_TN_INIT_OPERANDS);
}
POET_ALWAYS_INLINE void poet_asm_tn_4x3_init(const float *a, int32_t lda, const float *b, int32_t ldb, int32_t K,
                                             const poet_asm_out *out, const float *init, const int EPI)
{
    const float *ip = init;
    int32_t sa = 4 * lda, sb = 4 * ldb;
    const int32_t il = out->ldy;
    uint32_t k = (uint32_t)K;
    POET_ASM_WITH_EPILOGUE(EPI, 3, POET_ASM_INIT3("il") POET_ASM_TN3_LOOP, "pa", "sa", "sb", POET_ASM_TN_INIT_OPERANDS);
}

/* poet_asm_conv3x3_4x4 from init: ldy is read into the scratch register t first */
#define POET_ASM_CONV3_INIT_OPERANDS \
    : [w0] "+r"(w0), [w1] "+r"(w1), [w2] "+r"(w2), [w3] "+r"(w3), [pv] "+r"(pv), [k] "+r"(k), [t] "=&r"(t), \
      [ip] "+r"(ip) \
    : [vk2] "r"(vk2b), [out] "r"(out) : POET_ASM_CLOBBERS
#define POET_ASM_CONV3_INIT_BODY(row) "ldr %[t], [%[out], #100]\n\t" POET_ASM_INIT4("t") POET_ASM_CONV3_LOOP(row)
POET_ALWAYS_INLINE void poet_asm_conv3x3_4x4_init(const float *w, int32_t wr, const float *v, int32_t nk1,
                                                  int32_t vk2, const poet_asm_out *out, const float *init,
                                                  const int DIR, const int EPI)
{
    const float *w0 = w, *w1 = w + wr, *w2 = w + 2 * wr, *w3 = w + 3 * wr, *ip = init;
    const float *pv = DIR < 0 ? v - 2 : v;
    const int32_t vk2b = 4 * vk2;
    uint32_t k = (uint32_t)nk1; /* >= 1 */
    int32_t t;
    if (DIR == 2)
        POET_ASM_WITH_EPILOGUE(EPI, 4, POET_ASM_CONV3_INIT_BODY(POET_ASM_CONV3_ROW_FWD2), "w0", "w1", "w2",
                               POET_ASM_CONV3_INIT_OPERANDS);
    else if (DIR > 0)
        POET_ASM_WITH_EPILOGUE(EPI, 4, POET_ASM_CONV3_INIT_BODY(POET_ASM_CONV3_ROW_FWD), "w0", "w1", "w2",
                               POET_ASM_CONV3_INIT_OPERANDS);
    else
        POET_ASM_WITH_EPILOGUE(EPI, 4, POET_ASM_CONV3_INIT_BODY(POET_ASM_CONV3_ROW_GI), "w0", "w1", "w2",
                               POET_ASM_CONV3_INIT_OPERANDS);
}

#endif /* POET_GEMM_ASM */
#endif
