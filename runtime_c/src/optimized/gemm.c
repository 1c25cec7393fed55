/* Register-blocked poet_gemm_f32 (same symbol, signature and results as src/kernels/gemm.c).
 *
 * Y is computed in blocks of up to 4 rows x 6 columns held in 24 float registers; each value loaded
 * from A is reused for 6 outputs and each value loaded from B for 4. Tails use 4/2/1-row and
 * 6/4/2/1-column blocks of the same code. Every layout (transA, transB) gets its own instantiation,
 * so the loads are pointer walks the compiler turns into post-incremented or immediate-offset loads:
 * forward A·Bᵀ walks 10 pointers along k; input-gradient A·B reads a row of B at fixed offsets;
 * weight-gradient Aᵀ·B reads one row of A and one row of B per k. Aᵀ·Bᵀ, which no training graph
 * uses, runs the reference loop.
 *
 * Bit-identical to the reference: every output has one accumulator that starts at +0.0f and adds the
 * products a[k]*b[k] for k ascending (the first addition 0.0f + p is kept: it turns -0.0 into +0.0
 * exactly as the reference does), then y = alpha * acc and, with C, y += beta * C. The multiplication
 * by alpha is skipped only when alpha == 1.0f, where it is an identity for every value a product sum
 * can take. Needs -ffp-contract=off (as every poet build uses) so no multiply-add is fused. */
#include <stddef.h>

#include "poet/blocked.h"
#include "poet/blocked_arm.h"
#include "poet/blocked_mve.h"
#include "poet/kernels.h"

typedef struct {
    const float *A, *B, *C;
    float *Y;
    int32_t M, N, K, c_rs, c_cs;
    float alpha, beta;
    int32_t plain, bias_row, bias_col; /* epilogue shortcuts (exact: they skip multiplications by 1.0f only) */
} poet_gemm_args;

/* Y[i + r, j + c] from acc_rc, exactly as the reference finishes an output. */
#define POET_STORE_PLAIN(r, c) if (R > r && NC > c) y_row##r[c] = acc##r##c;
#define POET_STORE_FULL(r, c) \
    if (R > r && NC > c) { \
        float v_ = g->alpha * acc##r##c; \
        if (g->C) v_ += g->beta * g->C[(i + r) * g->c_rs + (j + c) * g->c_cs]; \
        y_row##r[c] = v_; \
    }
#define POET_STORE_BIAS(r, c) if (R > r && NC > c) y_row##r[c] = acc##r##c + bias[c];
#define POET_STORE_BIAS_COL(r, c) if (R > r && NC > c) y_row##r[c] = acc##r##c + bias[r];
#define POET_STORE_ROW(r, how) how(r, 0) how(r, 1) how(r, 2) how(r, 3) how(r, 4) how(r, 5)

/* Y[i : i+R, j : j+NC] for layout (TA, TB); R <= 4, NC <= 6 and K >= 1. */
POET_ALWAYS_INLINE void poet_gemm_block(const poet_gemm_args *g, int32_t i, int32_t j, const int R, const int NC,
                                        const int TA, const int TB, const int KC)
{
    /* KC: K at compile time (a training batch as the reduction: the k loop unrolled), 0 = run time */
    const int32_t K = KC ? KC : g->K;
    const float zero = 0.0f;
    float x0 = 0.0f, x1 = 0.0f, x2 = 0.0f, x3 = 0.0f;
    float acc00 = 0.0f, acc01 = 0.0f, acc02 = 0.0f, acc03 = 0.0f, acc04 = 0.0f, acc05 = 0.0f;
    float acc10 = 0.0f, acc11 = 0.0f, acc12 = 0.0f, acc13 = 0.0f, acc14 = 0.0f, acc15 = 0.0f;
    float acc20 = 0.0f, acc21 = 0.0f, acc22 = 0.0f, acc23 = 0.0f, acc24 = 0.0f, acc25 = 0.0f;
    float acc30 = 0.0f, acc31 = 0.0f, acc32 = 0.0f, acc33 = 0.0f, acc34 = 0.0f, acc35 = 0.0f;
    /* op(A)[i, k]: A[k * M + i] if TA else A[i * K + k]; op(B)[k, j]: B[j * K + k] if TB else B[k * N + j] */
    /* row pointers of the rows a block does not have stay on its first row (never read) */
    const float *a = g->A + (TA ? i : i * K), *b = g->B + (TB ? j * K : j);
    int32_t ao = 0, bo = 0; /* strided walks by index: no pointer past the arrays is ever formed */
    const int32_t ka = TA ? 0 : K, kb = TB ? K : 0;
    const float *a0 = a, *a1 = a + (R > 1 ? ka : 0), *a2 = a + (R > 2 ? 2 * ka : 0), *a3 = a + (R > 3 ? 3 * ka : 0);
    const float *b0 = b, *b1 = b + (NC > 1 ? kb : 0), *b2 = b + (NC > 2 ? 2 * kb : 0);
    const float *b3 = b + (NC > 3 ? 3 * kb : 0), *b4 = b + (NC > 4 ? 4 * kb : 0), *b5 = b + (NC > 5 ? 5 * kb : 0);
    POET_STEP(POET_SET_FIRST);
    if (KC) {
#if defined(__GNUC__)
#pragma GCC unroll 16
#endif
        for (int32_t k = K - 1; k > 0; --k) POET_STEP(+=);
    } else {
        for (int32_t k = K - 1; k > 0; --k) POET_STEP(+=);
    }
    const int32_t N = g->N;
    float *y_row0 = g->Y + i * N + j, *y_row1 = y_row0 + (R > 1 ? N : 0);
    float *y_row2 = y_row0 + (R > 2 ? 2 * N : 0), *y_row3 = y_row0 + (R > 3 ? 3 * N : 0);
    if (g->plain) { /* alpha == 1, no C: y = 1 * acc = acc */
        POET_STORE_ROW(0, POET_STORE_PLAIN) POET_STORE_ROW(1, POET_STORE_PLAIN)
        POET_STORE_ROW(2, POET_STORE_PLAIN) POET_STORE_ROW(3, POET_STORE_PLAIN)
    } else if (g->bias_row) { /* alpha == beta == 1, C a row vector: y = acc + C[j] */
        const float *bias = g->C + j;
        POET_STORE_ROW(0, POET_STORE_BIAS) POET_STORE_ROW(1, POET_STORE_BIAS)
        POET_STORE_ROW(2, POET_STORE_BIAS) POET_STORE_ROW(3, POET_STORE_BIAS)
    } else if (g->bias_col) { /* alpha == beta == 1, C a column vector: y = acc + C[i] */
        const float *bias = g->C + i;
        POET_STORE_ROW(0, POET_STORE_BIAS_COL) POET_STORE_ROW(1, POET_STORE_BIAS_COL)
        POET_STORE_ROW(2, POET_STORE_BIAS_COL) POET_STORE_ROW(3, POET_STORE_BIAS_COL)
    } else {
        POET_STORE_ROW(0, POET_STORE_FULL) POET_STORE_ROW(1, POET_STORE_FULL)
        POET_STORE_ROW(2, POET_STORE_FULL) POET_STORE_ROW(3, POET_STORE_FULL)
    }
    (void)a0; (void)a1; (void)a2; (void)a3; (void)ao; (void)bo;
    (void)b0; (void)b1; (void)b2; (void)b3; (void)b4; (void)b5;
    (void)y_row1; (void)y_row2; (void)y_row3;
    (void)x0; (void)x1; (void)x2; (void)x3;
}

/* Rows i .. i+R-1, all columns: 6-wide blocks, then a 4-, 2- and 1-wide tail. */
POET_ALWAYS_INLINE void poet_gemm_rows(const poet_gemm_args *g, int32_t i, const int R, const int TA, const int TB,
                                       const int KC)
{
    const int32_t N = g->N;
    int32_t j = 0;
    for (; j + 6 <= N; j += 6) poet_gemm_block(g, i, j, R, 6, TA, TB, KC);
    if (N - j >= 4) { poet_gemm_block(g, i, j, R, 4, TA, TB, KC); j += 4; }
    if (N - j >= 2) { poet_gemm_block(g, i, j, R, 2, TA, TB, KC); j += 2; }
    if (N - j >= 1) poet_gemm_block(g, i, j, R, 1, TA, TB, KC);
}

/* All of Y for one layout: 4-row strips, then a 2- and a 1-row tail. */
POET_ALWAYS_INLINE void poet_gemm_layout(const poet_gemm_args *g, const int TA, const int TB, const int KC)
{
    const int32_t M = g->M;
    int32_t i = 0;
    for (; i + 4 <= M; i += 4) poet_gemm_rows(g, i, 4, TA, TB, KC);
    if (M - i >= 2) { poet_gemm_rows(g, i, 2, TA, TB, KC); i += 2; }
    if (M - i >= 1) poet_gemm_rows(g, i, 1, TA, TB, KC);
}

#if defined(POET_GEMM_ASM)
/* Rows i .. i+3, the columns the assembly blocks cover (epilogue EPI: 0 plain, 1 bias row, 2 bias column);
 * returns the first column left for the C blocks. */
POET_ALWAYS_INLINE int32_t poet_gemm_strip_asm(const poet_gemm_args *g, int32_t i, const int TA, const int TB,
                                               const int EPI, poet_asm_out *out)
{
    const int32_t M = g->M, N = g->N, K = g->K;
    const float *B = g->B, *C = g->C, *a = TA ? g->A + i : g->A + i * K;
    float *Y = g->Y + i * N;
    if (EPI == 2) out->rbias = C + i;
    int32_t j = 0;
    if (TA) {
        for (; j + 6 <= N; j += 6) {
            out->y = Y + j;
            if (EPI == 1) out->bias = C + j;
            poet_asm_tn_4x6(a, M, B + j, N, K, out, EPI);
        }
        if (N - j >= 3) {
            out->y = Y + j;
            if (EPI == 1) out->bias = C + j;
            poet_asm_tn_4x3(a, M, B + j, N, K, out, EPI);
            j += 3;
        }
    } else if (TB) {
        for (; j + 5 <= N; j += 5) {
            out->y = Y + j;
            if (EPI == 1) out->bias = C + j;
            poet_asm_nt_4x5(a, K, B + j * K, K, K, out, EPI);
        }
        for (; j + 2 <= N; j += 2) { /* 2-column blocks: a head's outputs, or the tail */
            out->y = Y + j;
            if (EPI == 1) out->bias = C + j;
            poet_asm_nt_4x2(a, K, B + j * K, K, K, out, EPI);
        }
    } else {
        for (; j + 6 <= N; j += 6) {
            out->y = Y + j;
            if (EPI == 1) out->bias = C + j;
            poet_asm_nn_4x6(a, K, B + j, N, K, out, EPI);
        }
        if (N - j >= 3) {
            out->y = Y + j;
            if (EPI == 1) out->bias = C + j;
            poet_asm_nn_4x3(a, K, B + j, N, K, out, EPI);
            j += 3;
        }
    }
    return j;
}

/* Rows i .. i+3 with the assembly blocks of poet/blocked_arm.h (4x6 and a 4x3 tail, or 4x5 then 4x2 for
 * A·Bᵀ), the column tail with the C blocks; only for the plain, bias-row and bias-column epilogues (the
 * assembly stores y = acc, acc + C[j] or acc + C[i]), each its own instantiation of the block loop. */
POET_ALWAYS_INLINE void poet_gemm_rows_asm(const poet_gemm_args *g, int32_t i, const int TA, const int TB)
{
    const int32_t N = g->N;
    poet_asm_out out = {{0.0f}, NULL, 4 * N, NULL, NULL, 0, 0};
    int32_t j = g->bias_row   ? poet_gemm_strip_asm(g, i, TA, TB, 1, &out)
                : g->bias_col ? poet_gemm_strip_asm(g, i, TA, TB, 2, &out)
                              : poet_gemm_strip_asm(g, i, TA, TB, 0, &out);
    if (N - j >= 4) { poet_gemm_block(g, i, j, 4, 4, TA, TB, 0); j += 4; }
    if (N - j >= 2) { poet_gemm_block(g, i, j, 4, 2, TA, TB, 0); j += 2; }
    if (N - j >= 1) poet_gemm_block(g, i, j, 4, 1, TA, TB, 0);
}

/* Aᵀ·B, plain, two rows i, i+1: 12-column blocks in assembly, the tail in C */
POET_ALWAYS_INLINE void poet_gemm_rows2_tn_asm(const poet_gemm_args *g, int32_t i)
{
    const int32_t M = g->M, N = g->N, K = g->K;
    poet_asm_out out = {{0.0f}, g->Y + i * N, 4 * N, NULL, NULL, 0, 0};
    int32_t j = 0;
    for (; j + 12 <= N; j += 12) {
        out.y = g->Y + i * N + j;
        poet_asm_tn_2x12(g->A + i, M, g->B + j, N, K, &out);
    }
    for (; j + 6 <= N; j += 6) poet_gemm_block(g, i, j, 2, 6, 1, 0, 0);
    if (N - j >= 4) { poet_gemm_block(g, i, j, 2, 4, 1, 0, 0); j += 4; }
    if (N - j >= 2) { poet_gemm_block(g, i, j, 2, 2, 1, 0, 0); j += 2; }
    if (N - j >= 1) poet_gemm_block(g, i, j, 2, 1, 1, 0, 0);
}

POET_ALWAYS_INLINE void poet_gemm_layout_asm(const poet_gemm_args *g, const int TA, const int TB)
{
    const int32_t M = g->M;
    int32_t i = 0;
    for (; i + 4 <= M; i += 4) poet_gemm_rows_asm(g, i, TA, TB);
    if (M - i >= 2 && TA && g->plain) { poet_gemm_rows2_tn_asm(g, i); i += 2; }
    if (M - i >= 2) { poet_gemm_rows(g, i, 2, TA, TB, 0); i += 2; }
    if (M - i >= 1) poet_gemm_rows(g, i, 1, TA, TB, 0);
}

POET_NOINLINE void poet_gemm_nt_asm(const poet_gemm_args *g) { poet_gemm_layout_asm(g, 0, 1); }
POET_NOINLINE void poet_gemm_nn_asm(const poet_gemm_args *g) { poet_gemm_layout_asm(g, 0, 0); }
POET_NOINLINE void poet_gemm_tn_asm(const poet_gemm_args *g) { poet_gemm_layout_asm(g, 1, 0); }
#endif

#if defined(POET_GEMM_MVE)
/* ---- Helium (MVE) blocks (poet/arm_asm.h decides; poet/blocked_mve.h) --------------------------------
 * Y[i : i+R, j : j+4C] in R x C vector accumulators (R <= 3, C <= 2: with the loaded vector and the product,
 * 8 of MVE's 8 q registers); lane l of vector c is output column j + 4c + l, so every output has its own
 * accumulator lane that starts at +0.0f and adds op(A)[i+r, k] * op(B)[k, j+4c+l] for k ascending, the
 * product rounded first (VMUL.F32 Qd, Qn, Rm with the A value in a core register, then VADD.F32): the
 * reference's operations in the reference's order. Per k step: R scalar loads of op(A), C vector loads of
 * op(B) and 2RC vector operations for 4RC MACs. op(B) rows are contiguous for A·B and Aᵀ·B (VLDRW); for A·Bᵀ
 * the four lanes are four rows of B, K floats apart: a gather (VLDRW.U32 Qd, [Rn, Qm, UXTW #2]) from a base
 * that advances by one float per k, the lanes' offsets in two more q registers: R <= 2 there (gcc 12's
 * vldrwq_gather_base_wb_f32 issues two loads, so the write-back form is not used). When N is not a multiple of 4 the
 * last vector has `last` valid lanes: its loads (A·B, Aᵀ·B) and stores are predicated, so no element
 * outside the arrays is touched (its gathered lanes re-read B's last row and are not stored).
 * Epilogues: y = acc, acc + C[j] (a vector add), acc + C[i] (add the row's scalar), else the general
 * y = alpha * acc (+ beta * C[...]) in scalar FPv5 code, as the reference computes it. */
/* the loops over a block's rows and vectors fully unrolled: the accumulators stay in registers */
#define POET_MVE_UNROLL _Pragma("GCC unroll 8")
POET_ALWAYS_INLINE void poet_mve_block(const poet_gemm_args *g, int32_t i, int32_t j, const int R, const int C,
                                       int32_t last, const int TAIL, const int TA, const int TB)
{
    const int32_t M = g->M, N = g->N, K = g->K;
    const float32x4_t zero = vdupq_n_f32(0.0f);
    float32x4_t acc[3][2] = {{zero, zero}, {zero, zero}, {zero, zero}};
    const mve_pred16_t pl = TAIL ? poet_mve_first(last) : 0; /* lanes of the last vector */
    const float *a0 = g->A + (TA ? i : i * K), *a1 = a0 + (R > 1 ? (TA ? 1 : K) : 0);
    const float *a2 = a0 + (R > 2 ? (TA ? 2 : 2 * K) : 0);
    if (TB) {
        uint32x4_t off[2];
        POET_MVE_UNROLL for (int c = 0; c < C; ++c) /* element offsets (j + 4c + l) * K of the lanes' rows, rows past N - 1 clamped */
            off[c] = vmulq_n_u32(vminq_u32(vaddq_n_u32(poet_mve_lanes(1), (uint32_t)(j + 4 * c)),
                                           vdupq_n_u32((uint32_t)(N - 1))),
                                 (uint32_t)K);
        const float *bk = g->B;
        for (int32_t k = 0; k < K; ++k) {
            const float x0 = *a0++, x1 = R > 1 ? *a1++ : 0.0f, x2 = R > 2 ? *a2++ : 0.0f;
            POET_MVE_UNROLL for (int c = 0; c < C; ++c) {
                const float32x4_t bv = vldrwq_gather_shifted_offset_f32(bk, off[c]);
                acc[0][c] = vaddq_f32(acc[0][c], vmulq_n_f32(bv, x0));
                if (R > 1) acc[1][c] = vaddq_f32(acc[1][c], vmulq_n_f32(bv, x1));
                if (R > 2) acc[2][c] = vaddq_f32(acc[2][c], vmulq_n_f32(bv, x2));
            }
            ++bk;
        }
    } else {
        const float *b = g->B + j;
        for (int32_t k = 0; k < K; ++k) {
            float x0, x1 = 0.0f, x2 = 0.0f;
            if (TA) {
                x0 = a0[0];
                if (R > 1) x1 = a0[1];
                if (R > 2) x2 = a0[2];
                a0 += M;
            } else {
                x0 = *a0++;
                if (R > 1) x1 = *a1++;
                if (R > 2) x2 = *a2++;
            }
            POET_MVE_UNROLL for (int c = 0; c < C; ++c) {
                const float32x4_t bv = TAIL && c == C - 1 ? vldrwq_z_f32(b + 4 * c, pl) : vld1q_f32(b + 4 * c);
                acc[0][c] = vaddq_f32(acc[0][c], vmulq_n_f32(bv, x0));
                if (R > 1) acc[1][c] = vaddq_f32(acc[1][c], vmulq_n_f32(bv, x1));
                if (R > 2) acc[2][c] = vaddq_f32(acc[2][c], vmulq_n_f32(bv, x2));
            }
            b += N;
        }
    }
    (void)a1;
    (void)a2;
    POET_MVE_UNROLL for (int r = 0; r < R; ++r) {
        float *y = g->Y + (i + r) * N + j;
        POET_MVE_UNROLL for (int c = 0; c < C; ++c) {
            const int part = TAIL && c == C - 1;
            float32x4_t v = acc[r][c];
            if (g->plain) {
            } else if (g->bias_row) {
                const float *bias = g->C + j + 4 * c;
                v = vaddq_f32(v, part ? vldrwq_z_f32(bias, pl) : vld1q_f32(bias));
            } else if (g->bias_col) {
                v = vaddq_n_f32(v, g->C[i + r]);
            } else { /* the general epilogue, scalar: y = alpha * acc, then + beta * C */
                float t[4];
                vst1q_f32(t, v);
                const int32_t n = part ? last : 4;
                for (int32_t l = 0; l < n; ++l) {
                    const int32_t col = j + 4 * c + l;
                    float yv = g->alpha * t[l];
                    if (g->C) yv += g->beta * g->C[(i + r) * g->c_rs + col * g->c_cs];
                    y[4 * c + l] = yv;
                }
                continue;
            }
            if (part) vstrwq_p_f32(y + 4 * c, v, pl);
            else vst1q_f32(y + 4 * c, v);
        }
    }
}

/* Rows i .. i+R-1: 8-column blocks, then the 1..7 columns left (one block, its last vector predicated). */
POET_ALWAYS_INLINE void poet_mve_rows(const poet_gemm_args *g, int32_t i, const int R, const int TA, const int TB)
{
    const int32_t N = g->N;
    int32_t j = 0;
    for (; j + 8 <= N; j += 8) poet_mve_block(g, i, j, R, 2, 4, 0, TA, TB);
    const int32_t left = N - j;
    if (left > 4) poet_mve_block(g, i, j, R, 2, left - 4, 1, TA, TB);
    else if (left == 4) poet_mve_block(g, i, j, R, 1, 4, 0, TA, TB);
    else if (left > 0) poet_mve_block(g, i, j, R, 1, left, 1, TA, TB);
}

/* All of Y: 3-row strips (2-row for A·Bᵀ, whose gathers need two more q registers), then the rows left. */
POET_ALWAYS_INLINE void poet_mve_layout(const poet_gemm_args *g, const int TA, const int TB)
{
    const int32_t M = g->M;
    int32_t i = 0;
    if (TB) {
        for (; i + 2 <= M; i += 2) poet_mve_rows(g, i, 2, TA, TB);
    } else {
        for (; i + 3 <= M; i += 3) poet_mve_rows(g, i, 3, TA, TB);
        if (M - i == 2) { poet_mve_rows(g, i, 2, TA, TB); i += 2; }
    }
    if (M - i == 1) poet_mve_rows(g, i, 1, TA, TB);
}

POET_NOINLINE void poet_gemm_nt_mve(const poet_gemm_args *g) { poet_mve_layout(g, 0, 1); }
POET_NOINLINE void poet_gemm_nn_mve(const poet_gemm_args *g) { poet_mve_layout(g, 0, 0); }
POET_NOINLINE void poet_gemm_tn_mve(const poet_gemm_args *g) { poet_mve_layout(g, 1, 0); }
#endif

/* one function per layout, kept out of line so each gets the whole register file to itself; A·Bᵀ with K = 8
 * (a layer of 8 inputs) has its own with the k loop unrolled (for Aᵀ·B the unrolled loop spills) */
POET_NOINLINE void poet_gemm_nt(const poet_gemm_args *g) { poet_gemm_layout(g, 0, 1, 0); }
POET_NOINLINE void poet_gemm_nn(const poet_gemm_args *g) { poet_gemm_layout(g, 0, 0, 0); }
POET_NOINLINE void poet_gemm_tn(const poet_gemm_args *g) { poet_gemm_layout(g, 1, 0, 0); }
POET_NOINLINE void poet_gemm_nt8(const poet_gemm_args *g) { poet_gemm_layout(g, 0, 1, 8); }

void poet_gemm_f32(const float *A, const float *B, const float *C, float *Y, int32_t M, int32_t N, int32_t K,
                   int32_t transA, int32_t transB, float alpha, float beta, int32_t c_rs, int32_t c_cs)
{
    if (K <= 0 || (transA && transB)) { /* no products, or Aᵀ·Bᵀ (no training graph uses it): reference loop */
        const int32_t a_i = transA ? 1 : K, a_k = transA ? M : 1, b_k = transB ? 1 : N, b_j = transB ? K : 1;
        for (int32_t i = 0; i < M; ++i) {
            for (int32_t j = 0; j < N; ++j) {
                float acc = 0.0f;
                const float *a = A + i * a_i, *b = B + j * b_j;
                for (int32_t k = 0; k < K; ++k) acc += a[k * a_k] * b[k * b_k];
                float y = alpha * acc;
                if (C) y += beta * C[i * c_rs + j * c_cs];
                Y[i * N + j] = y;
            }
        }
        return;
    }
    const int32_t plain = alpha == 1.0f && C == NULL;
    const int32_t bias_row = alpha == 1.0f && beta == 1.0f && C != NULL && c_rs == 0 && c_cs == 1;
    const int32_t bias_col = alpha == 1.0f && beta == 1.0f && C != NULL && c_rs == 1 && c_cs == 0;
    const poet_gemm_args g = {A, B, C, Y, M, N, K, c_rs, c_cs, alpha, beta, plain, bias_row, bias_col};
#if defined(POET_GEMM_MVE)
    if (transA) poet_gemm_tn_mve(&g);
    else if (transB) poet_gemm_nt_mve(&g);
    else poet_gemm_nn_mve(&g);
    return;
#endif
#if defined(POET_GEMM_ASM)
    if (plain || bias_row || bias_col) {
        if (transA) poet_gemm_tn_asm(&g);
        else if (transB) poet_gemm_nt_asm(&g);
        else poet_gemm_nn_asm(&g);
        return;
    }
#endif
    if (transA) {
        poet_gemm_tn(&g);
    } else {
        if (transB && K == 8) poet_gemm_nt8(&g);
        else if (transB) poet_gemm_nt(&g);
        else poet_gemm_nn(&g);
    }
}
