/* Register-blocked poet_gemm_part_f32 (same symbol, signature and results as src/kernels/gemm_part.c).
 *
 * Y[M, N] = alpha * (P + A[M, K] op(B)), a slice of a product's reduction: every output has one accumulator
 * that starts at P's value (or +0.0f without P) and adds the products A[i, k] * op(B)[k, j] for k ascending,
 * each product rounded first, then y = alpha * acc, as the reference does. The blocks are optimized/gemm.c's
 * with their accumulators loaded from P instead of zeroed:
 * - C (every core): blocks of up to 4 rows x 6 columns in 24 accumulators (the k step of poet/blocked.h):
 *   each value loaded from A is used for up to 6 outputs and each value loaded from op(B) for up to 4.
 * - Cortex-M with a single-precision FPU (POET_GEMM_ASM, poet/arm_asm.h), alpha == 1 (y = acc, every part
 *   but the last, and the last of a plain dX): A·B runs 4-row strips of the 4x6 and 4x3 assembly blocks of
 *   poet/blocked_arm.h that start from memory (poet_asm_nn_4x6_init / 4x3_init; from +0.0f without P), the
 *   rows left (a batch of 1) 1x8 blocks of its own below (one VLDM of 8 op(B) values per k step); A·Bᵀ runs
 *   4-row strips of 4x5 blocks (a strip in one assembly statement: with a reduction of 8, a block's set-up,
 *   P loads and stores would otherwise cost a quarter of its k steps) and a 4x4 block, that start from P or
 *   +0.0f and walk k two at a time (the k pair of poet/blocked_arm.h's 4x5 A·Bᵀ block). Column and row tails
 *   run the C blocks. Measured against poet_gemm_f32 by bench/split_kernels.py.
 * The multiplication by alpha is skipped only when alpha == 1.0f, where it is an identity for every value a
 * product sum can take. Needs -ffp-contract=off (as every poet build uses) so no multiply-add is fused. */
#include <stddef.h>

#include "poet/blocked.h"
#include "poet/blocked_arm.h"
#include "poet/kernels.h"

typedef struct {
    const float *A, *B, *P;
    float *Y;
    int32_t M, N, K;
    float alpha;
    int32_t plain; /* alpha == 1: y = acc */
} poet_part_args;

/* acc_rc from P (or +0.0f), and y from acc_rc */
#define POET_PART_INIT(r, c) if (R > r && NC > c) acc##r##c = p_row##r[c];
#define POET_PART_STORE(r, c) if (R > r && NC > c) y_row##r[c] = acc##r##c;
#define POET_PART_STORE_ALPHA(r, c) if (R > r && NC > c) y_row##r[c] = g->alpha * acc##r##c;
#define POET_PART_ROW(r, how) how(r, 0) how(r, 1) how(r, 2) how(r, 3) how(r, 4) how(r, 5)

/* Y[i : i+R, j : j+NC] for layout TB (op(B) = Bᵀ); R <= 4, NC <= 6, K >= 1; HASP: P given */
POET_ALWAYS_INLINE void poet_part_block(const poet_part_args *g, int32_t i, int32_t j, const int R, const int NC,
                                        const int TB, const int HASP)
{
    const int TA = 0; /* the k step of poet/blocked.h for op(A) = A */
    const int32_t K = g->K, N = g->N;
    float x0 = 0.0f, x1 = 0.0f, x2 = 0.0f, x3 = 0.0f;
    float acc00 = 0.0f, acc01 = 0.0f, acc02 = 0.0f, acc03 = 0.0f, acc04 = 0.0f, acc05 = 0.0f;
    float acc10 = 0.0f, acc11 = 0.0f, acc12 = 0.0f, acc13 = 0.0f, acc14 = 0.0f, acc15 = 0.0f;
    float acc20 = 0.0f, acc21 = 0.0f, acc22 = 0.0f, acc23 = 0.0f, acc24 = 0.0f, acc25 = 0.0f;
    float acc30 = 0.0f, acc31 = 0.0f, acc32 = 0.0f, acc33 = 0.0f, acc34 = 0.0f, acc35 = 0.0f;
    if (HASP) { /* rows a block does not have stay on its first row (never read) */
        const float *p_row0 = g->P + i * N + j, *p_row1 = p_row0 + (R > 1 ? N : 0);
        const float *p_row2 = p_row0 + (R > 2 ? 2 * N : 0), *p_row3 = p_row0 + (R > 3 ? 3 * N : 0);
        POET_PART_ROW(0, POET_PART_INIT) POET_PART_ROW(1, POET_PART_INIT)
        POET_PART_ROW(2, POET_PART_INIT) POET_PART_ROW(3, POET_PART_INIT)
        (void)p_row1; (void)p_row2; (void)p_row3;
    }
    /* op(B)[k, j]: B[j * K + k] if TB else B[k * N + j] */
    const float *a = g->A + i * K, *b = g->B + (TB ? j * K : j);
    int32_t ao = 0, bo = 0; /* by index: no pointer past the arrays is formed */
    const int32_t ka = K, kb = TB ? K : 0;
    const float *a0 = a, *a1 = a + (R > 1 ? ka : 0), *a2 = a + (R > 2 ? 2 * ka : 0), *a3 = a + (R > 3 ? 3 * ka : 0);
    const float *b0 = b, *b1 = b + (NC > 1 ? kb : 0), *b2 = b + (NC > 2 ? 2 * kb : 0);
    const float *b3 = b + (NC > 3 ? 3 * kb : 0), *b4 = b + (NC > 4 ? 4 * kb : 0), *b5 = b + (NC > 5 ? 5 * kb : 0);
    for (int32_t k = K; k > 0; --k) POET_STEP(+=);
    float *y_row0 = g->Y + i * N + j, *y_row1 = y_row0 + (R > 1 ? N : 0);
    float *y_row2 = y_row0 + (R > 2 ? 2 * N : 0), *y_row3 = y_row0 + (R > 3 ? 3 * N : 0);
    if (g->plain) {
        POET_PART_ROW(0, POET_PART_STORE) POET_PART_ROW(1, POET_PART_STORE)
        POET_PART_ROW(2, POET_PART_STORE) POET_PART_ROW(3, POET_PART_STORE)
    } else {
        POET_PART_ROW(0, POET_PART_STORE_ALPHA) POET_PART_ROW(1, POET_PART_STORE_ALPHA)
        POET_PART_ROW(2, POET_PART_STORE_ALPHA) POET_PART_ROW(3, POET_PART_STORE_ALPHA)
    }
    (void)a0; (void)a1; (void)a2; (void)a3; (void)ao; (void)bo;
    (void)b0; (void)b1; (void)b2; (void)b3; (void)b4; (void)b5;
    (void)y_row1; (void)y_row2; (void)y_row3;
    (void)x0; (void)x1; (void)x2; (void)x3;
}

/* Rows i .. i+R-1, columns from j on: 6-wide C blocks, then a 4-, 2- and 1-wide tail. */
POET_ALWAYS_INLINE void poet_part_rows(const poet_part_args *g, int32_t i, int32_t j, const int R, const int TB,
                                       const int HASP)
{
    const int32_t N = g->N;
    for (; j + 6 <= N; j += 6) poet_part_block(g, i, j, R, 6, TB, HASP);
    if (N - j >= 4) { poet_part_block(g, i, j, R, 4, TB, HASP); j += 4; }
    if (N - j >= 2) { poet_part_block(g, i, j, R, 2, TB, HASP); j += 2; }
    if (N - j >= 1) poet_part_block(g, i, j, R, 1, TB, HASP);
}

/* All of Y in C blocks: 4-row strips, then a 2- and a 1-row tail. */
POET_ALWAYS_INLINE void poet_part_layout(const poet_part_args *g, const int TB, const int HASP)
{
    const int32_t M = g->M;
    int32_t i = 0;
    for (; i + 4 <= M; i += 4) poet_part_rows(g, i, 0, 4, TB, HASP);
    if (M - i >= 2) { poet_part_rows(g, i, 0, 2, TB, HASP); i += 2; }
    if (M - i >= 1) poet_part_rows(g, i, 0, 1, TB, HASP);
}

POET_NOINLINE void poet_part_nn(const poet_part_args *g) { poet_part_layout(g, 0, 0); }
POET_NOINLINE void poet_part_nn_p(const poet_part_args *g) { poet_part_layout(g, 0, 1); }
POET_NOINLINE void poet_part_nt(const poet_part_args *g) { poet_part_layout(g, 1, 0); }
POET_NOINLINE void poet_part_nt_p(const poet_part_args *g) { poet_part_layout(g, 1, 1); }

#if defined(POET_GEMM_ASM)
/* ---- assembly blocks of their own (Thumb-2 / FPv4-SP; the macros of poet/blocked_arm.h) -------------- */

/* Where an A·Bᵀ block starts and goes (the offsets are the assembly's; y and ldy where poet_asm_out has
 * them, so POET_ASM_STORE<NC> stores it). */
typedef struct {
    float zeros[24];  /* +0.0f: the accumulators' start without P (read with ldp = 0) */
    float *y;         /* 96: the block's first output */
    int32_t ldy;      /* 100: bytes between output rows */
    const float *p;   /* 104: the block's first P value (or zeros) */
    int32_t ldp;      /* 108: bytes between P's rows (0 for zeros) */
    const float *bl;  /* 112: op(B)'s last column of the block (its row of B) */
    int32_t k;        /* 116: K */
} poet_part_out;
/* the offsets above, checked (C99: an array of negative size when one is wrong) */
typedef char poet_part_out_layout[(offsetof(poet_part_out, y) == 96 && offsetof(poet_part_out, ldy) == 100 &&
                                   offsetof(poet_part_out, p) == 104 && offsetof(poet_part_out, ldp) == 108 &&
                                   offsetof(poet_part_out, bl) == 112 && offsetof(poet_part_out, k) == 116)
                                      ? 1
                                      : -1];

/* The 4 rows of a block's accumulators from P (or zeros): %[bl] walks them (ldp bytes apart, held in %[k]),
 * then %[bl] and %[k] get their loop values. */
#define POET_PART_NT_INIT(r0, r1, r2, r3) \
    "ldr %[bl], [%[out], #104]\n\t" \
    "ldr %[k], [%[out], #108]\n\t" \
    "vldm %[bl], {" r0 "}\n\t" \
    "add %[bl], %[bl], %[k]\n\t" \
    "vldm %[bl], {" r1 "}\n\t" \
    "add %[bl], %[bl], %[k]\n\t" \
    "vldm %[bl], {" r2 "}\n\t" \
    "add %[bl], %[bl], %[k]\n\t" \
    "vldm %[bl], {" r3 "}\n\t" \
    "ldr %[bl], [%[out], #112]\n\t" \
    "ldr %[k], [%[out], #116]\n\t"
/* K steps of an A·Bᵀ block: an odd one, then a pair when K % 4 >= 2, then two pairs per iteration */
#define POET_PART_NT_LOOP(single, pair) \
    "tst %[k], #1\n\t" \
    "beq 1f\n\t" single "1:\n\t" \
    "tst %[k], #2\n\t" \
    "beq 4f\n\t" pair "4:\n\t" \
    "lsrs %[k], %[k], #2\n\t" \
    "beq 3f\n\t" \
    "2:\n\t" pair pair "subs %[k], %[k], #1\n\t" \
    "bne 2b\n\t" \
    "3:\n\t"
/* 4x4 A·Bᵀ steps (accumulators s(4r + c); x pairs in s20..s27, y pairs in s28, s29 as in the 4x5 block) */
#define POET_PART_NT4_PAIR \
    "vldmia %[a0]!, {s20-s21}\n\t" \
    "vldmia %[a1]!, {s22-s23}\n\t" \
    "vldmia %[a2]!, {s24-s25}\n\t" \
    "vldmia %[a3]!, {s26-s27}\n\t" \
    POET_ASM_NT_COL2("b0", 0, 4, 8, 12) POET_ASM_NT_COL2("b1", 1, 5, 9, 13) \
    POET_ASM_NT_COL2("b2", 2, 6, 10, 14) POET_ASM_NT_COL2("bl", 3, 7, 11, 15)
#define POET_PART_NT4_SINGLE \
    POET_ASM_A4(20, 22, 24, 26) \
    POET_ASM_NT_COL1("b0", 0, 4, 8, 12) POET_ASM_NT_COL1("b1", 1, 5, 9, 13) \
    POET_ASM_NT_COL1("b2", 2, 6, 10, 14) POET_ASM_NT_COL1("bl", 3, 7, 11, 15)
/* 4x5: poet/blocked_arm.h's k steps, the column pointers named c0..c4 here */
#define POET_PART_NT5_PAIR \
    "vldmia %[a0]!, {s20-s21}\n\t" \
    "vldmia %[a1]!, {s22-s23}\n\t" \
    "vldmia %[a2]!, {s24-s25}\n\t" \
    "vldmia %[a3]!, {s26-s27}\n\t" \
    POET_ASM_NT_COL2("c0", 0, 5, 10, 15) POET_ASM_NT_COL2("c1", 1, 6, 11, 16) \
    POET_ASM_NT_COL2("c2", 2, 7, 12, 17) POET_ASM_NT_COL2("c3", 3, 8, 13, 18) \
    POET_ASM_NT_COL2("c4", 4, 9, 14, 19)
#define POET_PART_NT5_SINGLE \
    POET_ASM_A4(20, 22, 24, 26) \
    POET_ASM_NT_COL1("c0", 0, 5, 10, 15) POET_ASM_NT_COL1("c1", 1, 6, 11, 16) \
    POET_ASM_NT_COL1("c2", 2, 7, 12, 17) POET_ASM_NT_COL1("c3", 3, 8, 13, 18) \
    POET_ASM_NT_COL1("c4", 4, 9, 14, 19)

/* A 4-row strip of n 4x5 A·Bᵀ blocks in one statement (the per-block set-up in assembly too): the strip's
 * op(A) rows a[r * K + k] (r < 4, pointers a0..a3), block b's columns B[(5 b + c) * K + k] (c0..c4 walk
 * them; c4 ends where the next block's c0 starts); accumulators from P (HASP: o->p, advanced 20 bytes a
 * block) or from o->zeros; per pair of k 9 VLDM for 40 MACs. K >= 1, n >= 1. */
typedef struct {
    float zeros[24]; /* +0.0f */
    float *y;        /* 96: the block's first output (advanced 20 bytes a block) */
    int32_t ldy;     /* 100: bytes between output (and P) rows, minus 20 */
    const float *p;  /* 104: the block's first P value (advanced 20 bytes a block) */
    int32_t k4;      /* 108: 4 K: bytes of a row of A or of B */
    int32_t k;       /* 112: K */
    int32_t kq;      /* 116: K / 4 (the loop count when K % 4 == 0) */
} poet_part_strip;
typedef char poet_part_strip_layout[(offsetof(poet_part_strip, y) == 96 && offsetof(poet_part_strip, ldy) == 100 &&
                                     offsetof(poet_part_strip, p) == 104 && offsetof(poet_part_strip, k4) == 108 &&
                                     offsetof(poet_part_strip, k) == 112 && offsetof(poet_part_strip, kq) == 116)
                                        ? 1
                                        : -1];
#define POET_PART_NT5_FROM_P \
    "ldr %[c1], [%[o], #104]\n\t" \
    "ldr %[c2], [%[o], #100]\n\t" \
    "vldmia %[c1]!, {s0-s4}\n\t" \
    "str %[c1], [%[o], #104]\n\t" \
    "add %[c1], %[c1], %[c2]\n\t" \
    "vldmia %[c1]!, {s5-s9}\n\t" \
    "add %[c1], %[c1], %[c2]\n\t" \
    "vldmia %[c1]!, {s10-s14}\n\t" \
    "add %[c1], %[c1], %[c2]\n\t" \
    "vldm %[c1], {s15-s19}\n\t"
#define POET_PART_NT5_FROM_ZERO "vldm %[o], {s0-s19}\n\t"
/* the k steps of a block: any K (the count from o->k), or K % 4 == 0 (two pairs o->kq times: no tests) */
#define POET_PART_NT5_ANY_K "ldr %[k], [%[o], #112]\n\t" POET_PART_NT_LOOP(POET_PART_NT5_SINGLE, POET_PART_NT5_PAIR)
#define POET_PART_NT5_K4 \
    "ldr %[k], [%[o], #116]\n\t" \
    "2:\n\t" POET_PART_NT5_PAIR POET_PART_NT5_PAIR "subs %[k], %[k], #1\n\t" \
    "bne 2b\n\t"
#define POET_PART_NT5_STRIP(init, steps) \
    "5:\n\t" init \
    "ldr %[k], [%[o], #108]\n\t" \
    "add %[c1], %[c0], %[k]\n\t" \
    "add %[c2], %[c1], %[k]\n\t" \
    "add %[c3], %[c2], %[k]\n\t" \
    "add %[c4], %[c3], %[k]\n\t" steps \
    "ldr %[c0], [%[o], #96]\n\t" \
    "ldr %[c1], [%[o], #100]\n\t" \
    "vstmia %[c0]!, {s0-s4}\n\t" \
    "str %[c0], [%[o], #96]\n\t" \
    "add %[c0], %[c0], %[c1]\n\t" \
    "vstmia %[c0]!, {s5-s9}\n\t" \
    "add %[c0], %[c0], %[c1]\n\t" \
    "vstmia %[c0]!, {s10-s14}\n\t" \
    "add %[c0], %[c0], %[c1]\n\t" \
    "vstm %[c0], {s15-s19}\n\t" \
    "ldr %[k], [%[o], #108]\n\t" \
    "sub %[a0], %[a0], %[k]\n\t" \
    "sub %[a1], %[a1], %[k]\n\t" \
    "sub %[a2], %[a2], %[k]\n\t" \
    "sub %[a3], %[a3], %[k]\n\t" \
    "mov %[c0], %[c4]\n\t" \
    "subs %[n], %[n], #1\n\t" \
    "bne 5b\n\t"
#define POET_PART_NT5_OPERANDS \
    : [a0] "+r"(a0), [a1] "+r"(a1), [a2] "+r"(a2), [a3] "+r"(a3), [c0] "+r"(c0), [c1] "=&r"(c1), [c2] "=&r"(c2), \
      [c3] "=&r"(c3), [c4] "=&r"(c4), [k] "=&r"(k), [n] "+r"(n) \
    : [o] "r"(o) : POET_ASM_CLOBBERS
POET_ALWAYS_INLINE void poet_part_nt_strip5(const float *a, const float *b, int32_t K, uint32_t n,
                                            poet_part_strip *o, const int HASP)
{
    const float *a0 = a, *a1 = a + K, *a2 = a1 + K, *a3 = a2 + K, *c0 = b, *c1, *c2, *c3, *c4;
    uint32_t k;
    if (HASP && K % 4 == 0)
        __asm__ volatile(POET_PART_NT5_STRIP(POET_PART_NT5_FROM_P, POET_PART_NT5_K4) POET_PART_NT5_OPERANDS);
    else if (HASP)
        __asm__ volatile(POET_PART_NT5_STRIP(POET_PART_NT5_FROM_P, POET_PART_NT5_ANY_K) POET_PART_NT5_OPERANDS);
    else if (K % 4 == 0)
        __asm__ volatile(POET_PART_NT5_STRIP(POET_PART_NT5_FROM_ZERO, POET_PART_NT5_K4) POET_PART_NT5_OPERANDS);
    else
        __asm__ volatile(POET_PART_NT5_STRIP(POET_PART_NT5_FROM_ZERO, POET_PART_NT5_ANY_K) POET_PART_NT5_OPERANDS);
    (void)c1; (void)c2; (void)c3; (void)c4; (void)k;
}

/* the same with 4 columns (out->bl = b + 3 K): 8 VLDM per pair of k for 32 MACs */
POET_ALWAYS_INLINE void poet_part_nt_4x4(const float *a, const float *b, int32_t K, const poet_part_out *out)
{
    const float *a0 = a, *a1 = a + K, *a2 = a1 + K, *a3 = a2 + K;
    const float *b0 = b, *b1 = b + K, *b2 = b1 + K, *bl;
    uint32_t k;
    __asm__ volatile(POET_PART_NT_INIT("s0-s3", "s4-s7", "s8-s11", "s12-s15")
                     POET_PART_NT_LOOP(POET_PART_NT4_SINGLE, POET_PART_NT4_PAIR) POET_ASM_STORE4("a1", "k")
                     : [a0] "+r"(a0), [a1] "+r"(a1), [a2] "+r"(a2), [a3] "+r"(a3), [b0] "+r"(b0), [b1] "+r"(b1),
                       [b2] "+r"(b2), [bl] "=&r"(bl), [k] "=&r"(k)
                     : [out] "r"(out)
                     : POET_ASM_CLOBBERS);
}

/* A·B, one row x 8 columns from init (8 floats: P's or zeros): op(A)[i, k] = a[k], op(B)[k, j + c] =
 * b[k * N + c]; per k step one VLDM of op(A), one VLDM of 8 op(B) values and one ADD for 8 MACs. K >= 1. */
#define POET_PART_NN1_STEP \
    "vldmia %[pa]!, {s16}\n\t" \
    "vldm %[pb], {s8-s15}\n\t" \
    "add %[pb], %[pb], %[sb]\n\t" \
    POET_ASM_MAC(0, 16, 8) POET_ASM_MAC(1, 16, 9) POET_ASM_MAC(2, 16, 10) POET_ASM_MAC(3, 16, 11) \
    POET_ASM_MAC(4, 16, 12) POET_ASM_MAC(5, 16, 13) POET_ASM_MAC(6, 16, 14) POET_ASM_MAC(7, 16, 15)
POET_ALWAYS_INLINE void poet_part_nn_1x8(const float *a, const float *b, int32_t N, int32_t K, const float *init,
                                         float *y)
{
    const int32_t sb = 4 * N;
    uint32_t k = (uint32_t)K;
    __asm__ volatile("vldm %[ip], {s0-s7}\n\t" POET_ASM_K_LOOP(POET_PART_NN1_STEP) "vstm %[y], {s0-s7}\n\t"
                     : [pa] "+r"(a), [pb] "+r"(b), [k] "+r"(k)
                     : [sb] "r"(sb), [ip] "r"(init), [y] "r"(y)
                     : POET_ASM_CLOBBERS);
}

/* A·B: 4-row strips of 4x6 then 4x3 assembly blocks (from P, or zeroed), the other rows 1x8 blocks; tails in C */
POET_ALWAYS_INLINE void poet_part_nn_asm_layout(const poet_part_args *g, const int HASP)
{
    const int32_t M = g->M, N = g->N, K = g->K;
    poet_asm_out out = {{0.0f}, NULL, 4 * N, NULL, NULL, 0, K};
    int32_t i = 0;
    for (; i + 4 <= M; i += 4) {
        const float *a = g->A + i * K, *p = HASP ? g->P + i * N : NULL;
        float *y = g->Y + i * N;
        int32_t j = 0;
        for (; j + 6 <= N; j += 6) {
            out.y = y + j;
            if (HASP) poet_asm_nn_4x6_init(a, K, g->B + j, N, K, &out, p + j, 0);
            else poet_asm_nn_4x6(a, K, g->B + j, N, K, &out, 0);
        }
        if (N - j >= 3) {
            out.y = y + j;
            if (HASP) poet_asm_nn_4x3_init(a, K, g->B + j, N, K, &out, p + j, 0);
            else poet_asm_nn_4x3(a, K, g->B + j, N, K, &out, 0);
            j += 3;
        }
        if (j < N) poet_part_rows(g, i, j, 4, 0, HASP);
    }
    for (; i < M; ++i) {
        const float *a = g->A + i * K, *p = HASP ? g->P + i * N : NULL;
        float *y = g->Y + i * N;
        int32_t j = 0;
        for (; j + 8 <= N; j += 8) poet_part_nn_1x8(a, g->B + j, N, K, HASP ? p + j : out.zeros, y + j);
        if (j < N) poet_part_rows(g, i, j, 1, 0, HASP);
    }
}

/* A·Bᵀ: 4-row strips of 4x5 blocks (one assembly statement a strip) and a 4x4 one, from P or zeros; the
 * column and row tails in C */
POET_ALWAYS_INLINE void poet_part_nt_asm_layout(const poet_part_args *g, const int HASP)
{
    const int32_t M = g->M, N = g->N, K = g->K, n5 = N / 5;
    poet_part_strip st = {{0.0f}, NULL, 4 * N - 20, NULL, 4 * K, K, K / 4};
    poet_part_out out = {{0.0f}, NULL, 4 * N, NULL, HASP ? 4 * N : 0, NULL, K};
    int32_t i = 0;
    for (; i + 4 <= M; i += 4) {
        const float *a = g->A + i * K;
        int32_t j = 5 * n5;
        if (n5 > 0) {
            st.y = g->Y + i * N;
            st.p = HASP ? g->P + i * N : NULL;
            poet_part_nt_strip5(a, g->B, K, (uint32_t)n5, &st, HASP);
        }
        if (N - j >= 4) {
            out.y = g->Y + i * N + j;
            out.p = HASP ? g->P + i * N + j : out.zeros;
            out.bl = g->B + (j + 3) * K;
            poet_part_nt_4x4(a, g->B + j * K, K, &out);
            j += 4;
        }
        if (j < N) poet_part_rows(g, i, j, 4, 1, HASP);
    }
    if (M - i >= 2) { poet_part_rows(g, i, 0, 2, 1, HASP); i += 2; }
    if (M - i >= 1) poet_part_rows(g, i, 0, 1, 1, HASP);
}

POET_NOINLINE void poet_part_nn_asm(const poet_part_args *g) { poet_part_nn_asm_layout(g, 0); }
POET_NOINLINE void poet_part_nn_asm_p(const poet_part_args *g) { poet_part_nn_asm_layout(g, 1); }
POET_NOINLINE void poet_part_nt_asm(const poet_part_args *g) { poet_part_nt_asm_layout(g, 0); }
POET_NOINLINE void poet_part_nt_asm_p(const poet_part_args *g) { poet_part_nt_asm_layout(g, 1); }
#endif

void poet_gemm_part_f32(const float *A, const float *B, const float *P, float *Y, int32_t M, int32_t N, int32_t K,
                        int32_t transB, float alpha)
{
    if (K <= 0) { /* no products: y = alpha * P (or alpha * +0.0f), as the reference */
        for (int32_t e = 0; e < M * N; ++e) Y[e] = alpha * (P ? P[e] : 0.0f);
        return;
    }
    const poet_part_args g = {A, B, P, Y, M, N, K, alpha, alpha == 1.0f};
#if defined(POET_GEMM_ASM)
    if (g.plain) {
        if (transB) {
            if (P) poet_part_nt_asm_p(&g);
            else poet_part_nt_asm(&g);
        } else {
            if (P) poet_part_nn_asm_p(&g);
            else poet_part_nn_asm(&g);
        }
        return;
    }
#endif
    if (transB) {
        if (P) poet_part_nt_p(&g);
        else poet_part_nt(&g);
    } else {
        if (P) poet_part_nn_p(&g);
        else poet_part_nn(&g);
    }
}
