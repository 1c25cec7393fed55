/* Register-blocked poet_matmul_f32 (same symbol, signature and results as src/kernels/matmul.c): every
 * matrix of the batch is one product computed like the fast poet_gemm_f32 (src/optimized/gemm.c), in
 * blocks of up to 4 rows x 6 columns held in 24 float registers, one instantiation per layout. The k step
 * is shared with gemm.c through poet/blocked.h.
 *
 * Bit-identical to the reference: every output has one accumulator that starts at +0.0f and adds the
 * products a[k]*b[k] for k ascending (the first addition 0.0f + p is kept: it turns -0.0 into +0.0 as the
 * reference does); Y = acc. Needs -ffp-contract=off (as every poet build uses). Aᵀ·Bᵀ, which no training
 * graph uses, runs the reference loop. */
#include <stddef.h>

#include "poet/bcast.h"
#include "poet/blocked.h"
#include "poet/kernels.h"
#include "poet/matmul_ref.h"

typedef struct {
    const float *A, *B;
    float *Y;
    int32_t M, N, K;
} poet_mm_args;

#define POET_MM_STORE(r, c) if (R > r && NC > c) y_row##r[c] = acc##r##c;
#define POET_MM_STORE_ROW(r) \
    POET_MM_STORE(r, 0) POET_MM_STORE(r, 1) POET_MM_STORE(r, 2) POET_MM_STORE(r, 3) POET_MM_STORE(r, 4) \
    POET_MM_STORE(r, 5)

/* Y[i : i+R, j : j+NC] for layout (TA, TB); R <= 4, NC <= 6 and K >= 1. */
POET_ALWAYS_INLINE void poet_mm_block(const poet_mm_args *g, int32_t i, int32_t j, const int R, const int NC,
                                      const int TA, const int TB)
{
    const int32_t K = g->K;
    const float zero = 0.0f;
    float x0 = 0.0f, x1 = 0.0f, x2 = 0.0f, x3 = 0.0f;
    float acc00 = 0.0f, acc01 = 0.0f, acc02 = 0.0f, acc03 = 0.0f, acc04 = 0.0f, acc05 = 0.0f;
    float acc10 = 0.0f, acc11 = 0.0f, acc12 = 0.0f, acc13 = 0.0f, acc14 = 0.0f, acc15 = 0.0f;
    float acc20 = 0.0f, acc21 = 0.0f, acc22 = 0.0f, acc23 = 0.0f, acc24 = 0.0f, acc25 = 0.0f;
    float acc30 = 0.0f, acc31 = 0.0f, acc32 = 0.0f, acc33 = 0.0f, acc34 = 0.0f, acc35 = 0.0f;
    /* op(A)[i, k]: A[k * M + i] if TA else A[i * K + k]; op(B)[k, j]: B[j * K + k] if TB else B[k * N + j] */
    const float *a = g->A + (TA ? i : i * K), *b = g->B + (TB ? j * K : j);
    int32_t ao = 0, bo = 0; /* strided walks by index: no pointer past the arrays is ever formed */
    const int32_t ka = TA ? 0 : K, kb = TB ? K : 0;
    const float *a0 = a, *a1 = a + (R > 1 ? ka : 0), *a2 = a + (R > 2 ? 2 * ka : 0), *a3 = a + (R > 3 ? 3 * ka : 0);
    const float *b0 = b, *b1 = b + (NC > 1 ? kb : 0), *b2 = b + (NC > 2 ? 2 * kb : 0);
    const float *b3 = b + (NC > 3 ? 3 * kb : 0), *b4 = b + (NC > 4 ? 4 * kb : 0), *b5 = b + (NC > 5 ? 5 * kb : 0);
    POET_STEP(POET_SET_FIRST);
    for (int32_t k = K - 1; k > 0; --k) POET_STEP(+=);
    const int32_t N = g->N;
    float *y_row0 = g->Y + i * N + j, *y_row1 = y_row0 + (R > 1 ? N : 0);
    float *y_row2 = y_row0 + (R > 2 ? 2 * N : 0), *y_row3 = y_row0 + (R > 3 ? 3 * N : 0);
    POET_MM_STORE_ROW(0) POET_MM_STORE_ROW(1) POET_MM_STORE_ROW(2) POET_MM_STORE_ROW(3)
    (void)a0; (void)a1; (void)a2; (void)a3; (void)ao; (void)bo;
    (void)b0; (void)b1; (void)b2; (void)b3; (void)b4; (void)b5;
    (void)y_row1; (void)y_row2; (void)y_row3;
    (void)x0; (void)x1; (void)x2; (void)x3;
}

POET_ALWAYS_INLINE void poet_mm_rows(const poet_mm_args *g, int32_t i, const int R, const int TA, const int TB)
{
    const int32_t N = g->N;
    int32_t j = 0;
    for (; j + 6 <= N; j += 6) poet_mm_block(g, i, j, R, 6, TA, TB);
    if (N - j >= 4) { poet_mm_block(g, i, j, R, 4, TA, TB); j += 4; }
    if (N - j >= 2) { poet_mm_block(g, i, j, R, 2, TA, TB); j += 2; }
    if (N - j >= 1) poet_mm_block(g, i, j, R, 1, TA, TB);
}

POET_ALWAYS_INLINE void poet_mm_layout(const poet_mm_args *g, const int TA, const int TB)
{
    const int32_t M = g->M;
    int32_t i = 0;
    for (; i + 4 <= M; i += 4) poet_mm_rows(g, i, 4, TA, TB);
    if (M - i >= 2) { poet_mm_rows(g, i, 2, TA, TB); i += 2; }
    if (M - i >= 1) poet_mm_rows(g, i, 1, TA, TB);
}

POET_NOINLINE void poet_mm_nt(const poet_mm_args *g) { poet_mm_layout(g, 0, 1); }
POET_NOINLINE void poet_mm_nn(const poet_mm_args *g) { poet_mm_layout(g, 0, 0); }
POET_NOINLINE void poet_mm_tn(const poet_mm_args *g) { poet_mm_layout(g, 1, 0); }

void poet_matmul_f32(const float *A, const float *B, float *Y, int32_t M, int32_t N, int32_t K, int32_t transA,
                     int32_t transB, int32_t rank, const int32_t *dims, const int32_t *a_strides,
                     const int32_t *b_strides)
{
    int32_t idx[POET_MAX_RANK] = {0}, off[2] = {0, 0}, batches = 1;
    const int32_t *strides[2] = {a_strides, b_strides};
    for (int32_t d = 0; d < rank; ++d) batches *= dims[d];
    for (int32_t p = 0; p < batches; ++p) {
        const float *Ap = A + off[0], *Bp = B + off[1];
        float *Yp = Y + p * M * N;
        if (K <= 0 || (transA && transB)) { /* no products, or Aᵀ·Bᵀ: the reference loop */
            poet_matmul_one_ref(Ap, Bp, Yp, M, N, K, transA, transB);
        } else {
            const poet_mm_args g = {Ap, Bp, Yp, M, N, K};
            if (transA) poet_mm_tn(&g);
            else if (transB) poet_mm_nt(&g);
            else poet_mm_nn(&g);
        }
        poet_bcast_next(rank, dims, idx, 2, strides, off);
    }
}
