/* Register-blocked direct 2-D convolution (same symbols, signatures and results as src/kernels/conv.c).
 *
 * No im2col and no workspace. Every output keeps one accumulator that starts at +0.0f and adds its
 * products in exactly the reference order, skipping padded taps as the reference does, so results are
 * bit-identical to the reference kernels (with -ffp-contract=off, as every poet build uses):
 *   forward      y[n,m,oh,ow]  over (c, kh, kw) ascending, then + bias;
 *   grad_input   dx[n,c,ih,iw] over (m, kh, kw) ascending (only taps that hit an output position);
 *   grad_weight  dw[m,c,kh,kw] over (n, oh, ow) ascending (only positions inside the input);
 *   channel_sum  y[c]          over (n, s) ascending.
 * poet_conv2d_grad_weight_from_f32 (the row-tile part kernel's paths, src/optimized/conv_part.c) and the
 * part kernel of channel_sum (kernels.h) run the same paths with every accumulator starting at P instead (one
 * internal function each; P NULL for the plain kernel).
 *
 * Forward and input gradient share one block kernel: R (<= 4) output channels x P (<= 6) pixels of one
 * output row in R*P float registers. A k step loads R weights and, pixel by pixel, one input value
 * reused for R outputs (R + P loads for R*P multiply-adds). The pixels of a block all use the same
 * taps: for every output row the valid kernel rows are one range (vertical padding), and the pixels of
 * a row are cut into runs whose valid kernel columns are the same (the interior run, and the few border
 * pixels on each side); each run is tiled with 6/4/2/1-pixel blocks. Interior 3-wide kernels (and 1x1
 * kernels) have their tap loop unrolled so every load is an immediate offset. The input gradient walks
 * output pixels of one residue class modulo the stride, so its taps form a progression with step SW and
 * the dY values a block reads are consecutive.
 * Weight gradient: R output channels x P input channels for one tap (kh, kw), whose valid positions are
 * one rectangle, reading R dY values and P input values per position (the same block shape). Depthwise
 * (one input channel per output channel) instead keeps the KW taps of one kernel row in registers and
 * slides along the row, so each dY value is loaded once for KW products.
 * Shapes outside the specialised paths (e.g. other kernel widths) use the same blocks with run-time tap
 * counts. The 1x1 stride-1 input gradient (Wᵀ·dY) and one-sample weight gradient (dY·Xᵀ) are products of
 * two matrices: they call the fast GEMM (poet_gemm_f32, src/optimized/gemm.c), whose walks along the
 * reduction cost less than the block kernel's strided ones. No function here calls a part GEMM
 * (poet_gemm_part_f32): the weight gradient's part kernel, which does, is in conv_part.c, so a project
 * without row tiles links no part GEMM. */
#include <stddef.h>

#include "poet/arm_asm.h"
#include "poet/kernels.h"

/* GCC's first (pre-register-allocation) scheduling pass hoists all loads of a step to the top and then
 * spills accumulators to the stack; without it the allocator keeps every accumulator in a register.
 * Temporary expression replacement (TER) would expand each accumulator's chain of additions over an
 * unrolled tap loop in one piece at its last use, keeping every loaded value of those taps live at once
 * (and spilling); without it the additions stay where the source has them. Neither changes results. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-schedule-insns", "no-tree-ter")
#endif

/* Sanitizer builds (GCC defines __SANITIZE_ADDRESS__) skip the forced inlining and unrolling: the same C
 * code, the same operations in the same order (so the same results), but it compiles in seconds instead of
 * minutes with the instrumentation. */
#if defined(__GNUC__) && defined(__SANITIZE_ADDRESS__)
#define POET_ALWAYS_INLINE static inline
#define POET_NOINLINE static __attribute__((noinline))
#define POET_UNROLL
#elif defined(__GNUC__)
#define POET_ALWAYS_INLINE static inline __attribute__((always_inline))
#define POET_NOINLINE static __attribute__((noinline))
#define POET_UNROLL _Pragma("GCC unroll 32")
#else
#define POET_ALWAYS_INLINE static inline
#define POET_NOINLINE static
#define POET_UNROLL
#endif

#include "poet/blocked_arm.h" /* after POET_ALWAYS_INLINE: the assembly GEMM blocks on Cortex-M */
#include "poet/blocked_mve.h"
#include "poet/conv_geo.h" /* after the pragma: compiled with the options of the code here */

/* An input value read once per use: a volatile read, so the compiler neither keeps values of one k step
 * live for the next (with 24 accumulators that would spill them) nor merges or reorders the reads. It is
 * still one load instruction. */
#define POET_LOAD(p) (*(const volatile float *)(p))

#define POET_MAX_R 4
#define POET_MAX_P 6

/* g->P by a volatile read: the compiler does not hoist it out of the loops and keep it in a register that
 * the plain kernel's loops had for themselves (one load and test per output block). */
#define POET_GEO_P(g) (*(const float *const volatile *)&(g)->P)
/* the plain kernel's branch (P NULL) laid out as the fall-through */
#if defined(__GNUC__)
#define POET_UNLIKELY(x) __builtin_expect(!!(x), 0)
#else
#define POET_UNLIKELY(x) (x)
#endif

static int32_t poet_max32(int32_t a, int32_t b) { return a > b ? a : b; }
static int32_t poet_min32(int32_t a, int32_t b) { return a < b ? a : b; }

/* ---- the block kernel (forward and input gradient) ------------------------------------------------
 * out[r, p] = sum over k1 < nk1, k2 < nk2, k3 < nk3 (in that order) of
 *             v[k1 * vk1 + k2 * vk2 + k3 * VK3 + p * vp] * w_r[k1 * wk1 + k2 * wk2 + k3 * WK3]
 * where w_r = ws + r * wr. Compile-time: R, P, K2 / K3 (tap counts; 0 = run-time nk2 / nk3), VP (pixel
 * stride of v; 0 = run-time vp), VK3 and WK3 (strides of the innermost tap; WK3 0 = run-time wk3). The result goes to
 * y[r * yr + p * yp] (+ bias[r] when bias). With hinit, out[r, p] starts at init[r * yr + p * yp] (the part
 * kernels' P) instead of +0.0f. */
typedef struct {
    const float *v, *w;
    int32_t nk1, nk2, nk3;
    int32_t vk1, vk2, vp;
    int32_t wr, wk1, wk2, wk3;
    const float *bias;
    float *y;
    int32_t yr, yp;
    const float *init; /* hinit: the outputs' starting values (a part kernel's P, laid out as y), else unused */
    int32_t hinit;
} poet_blk;

/* One k step: R weights, then P input values each used for R accumulators. */
POET_ALWAYS_INLINE void poet_step(float acc[POET_MAX_R][POET_MAX_P], const float *v, const float *w, int32_t vp,
                                  int32_t wr, const int R, const int P, const int VW)
{
    /* VW: weights read with volatile loads too (unrolled taps: keeps one base pointer with immediate
     * offsets); otherwise the compiler walks one post-incremented pointer per output channel */
    float wv[POET_MAX_R];
    POET_UNROLL for (int r = 0; r < R; ++r) wv[r] = VW ? POET_LOAD(w + r * wr) : w[r * wr];
    POET_UNROLL for (int p = 0; p < P; ++p) {
        const float xv = POET_LOAD(v + p * vp);
        POET_UNROLL for (int r = 0; r < R; ++r) acc[r][p] += xv * wv[r];
    }
}

/* Taps k3 < nk3 of one k2 row (unrolled when K3 > 0). */
POET_ALWAYS_INLINE void poet_row(float acc[POET_MAX_R][POET_MAX_P], const float *v2, const float *w2, int32_t nk3,
                                 int32_t vp, int32_t wr, int32_t wk3, const int R, const int P, const int K3,
                                 const int VK3)
{
    if (K3) {
        POET_UNROLL for (int k3 = 0; k3 < K3; ++k3) poet_step(acc, v2 + k3 * VK3, w2 + k3 * wk3, vp, wr, R, P, K3 > 1);
    } else {
        for (int32_t k3 = 0; k3 < nk3; ++k3) poet_step(acc, v2 + k3 * VK3, w2 + k3 * wk3, vp, wr, R, P, 0);
    }
}

POET_ALWAYS_INLINE void poet_block(const poet_blk *b, const int R, const int P, const int K2, const int K3,
                                   const int VP, const int VK3, const int WK3, const int WR, const int WK1)
{
    float acc[POET_MAX_R][POET_MAX_P];
    const int32_t vp = VP ? VP : b->vp, nk3 = K3 ? K3 : b->nk3;
    const int32_t vk1 = b->vk1, vk2 = b->vk2, wk3 = WK3 ? WK3 : b->wk3;
    /* a full K2 x K3 window (forward KW = K3; input gradient at stride 1 SH * KW = K3): rows K3 * WK3 apart */
    const int32_t wk2 = K2 && K3 ? K3 * WK3 : b->wk2;
    const int32_t wr = WR ? WR : b->wr, wk1 = WK1 ? WK1 : b->wk1;
    int32_t k1 = 0;
    if (b->hinit) {
        POET_UNROLL for (int r = 0; r < R; ++r) POET_UNROLL for (int p = 0; p < P; ++p)
            acc[r][p] = b->init[r * b->yr + p * b->yp];
    } else if (K2 == 1 && K3 == 1) {
        /* single tap (1x1): the first product is added to +0.0f as the reference does, without zeroing */
        const float zero = 0.0f;
        if (b->nk1 < 1) {
            POET_UNROLL for (int r = 0; r < R; ++r) POET_UNROLL for (int p = 0; p < P; ++p) acc[r][p] = 0.0f;
        } else {
            float wv[POET_MAX_R];
            POET_UNROLL for (int r = 0; r < R; ++r) wv[r] = b->w[r * wr];
            POET_UNROLL for (int p = 0; p < P; ++p) {
                const float xv = b->v[p * vp];
                POET_UNROLL for (int r = 0; r < R; ++r) acc[r][p] = zero + xv * wv[r];
            }
            k1 = 1;
        }
    } else {
        POET_UNROLL for (int r = 0; r < R; ++r) POET_UNROLL for (int p = 0; p < P; ++p) acc[r][p] = 0.0f;
    }
    for (; k1 < b->nk1; ++k1) {
        const float *v1 = b->v + k1 * vk1, *w1 = b->w + k1 * wk1;
        if (K2) {
            POET_UNROLL for (int k2 = 0; k2 < K2; ++k2)
                poet_row(acc, v1 + k2 * vk2, w1 + k2 * wk2, nk3, vp, wr, wk3, R, P, K3, VK3);
        } else {
            for (int32_t k2 = 0; k2 < b->nk2; ++k2)
                poet_row(acc, v1 + k2 * vk2, w1 + k2 * wk2, nk3, vp, wr, wk3, R, P, K3, VK3);
        }
    }
    POET_UNROLL for (int r = 0; r < R; ++r) {
        float *y = b->y + r * b->yr;
        if (b->bias) {
            const float bv = b->bias[r];
            POET_UNROLL for (int p = 0; p < P; ++p) y[p * b->yp] = acc[r][p] + bv;
        } else {
            POET_UNROLL for (int p = 0; p < P; ++p) y[p * b->yp] = acc[r][p];
        }
    }
}

#if defined(POET_GEMM_MVE)
/* poet_block with Helium (POET_GEMM_MVE, poet/arm_asm.h): R (<= 4) channels x 4 pixels, one vector
 * accumulator per channel whose lane p is pixel p, so every output keeps its own accumulator and adds its
 * products in poet_block's (the reference's) order, each product rounded first (VMUL.F32 Qd, Qn, Rm with
 * the weight in a core register, then VADD.F32; never VFMA). A tap step: R scalar weight loads, one vector
 * of the 4 pixels' input values (VLDRW for consecutive pixels, else a gather VP floats apart) and 2R vector
 * operations for 4R MACs. The pixels of a block share their taps (poet_run's runs), so no lane is masked. */
POET_ALWAYS_INLINE void poet_block_mve(const poet_blk *b, const int R, const int K2, const int K3, const int VP,
                                       const int VK3, const int WK3, const int WR, const int WK1)
{
    const int32_t vp = VP ? VP : b->vp, nk3 = K3 ? K3 : b->nk3;
    const int32_t vk1 = b->vk1, vk2 = b->vk2, wk3 = WK3 ? WK3 : b->wk3;
    const int32_t wk2 = K2 && K3 ? K3 * WK3 : b->wk2;
    const int32_t wr = WR ? WR : b->wr, wk1 = WK1 ? WK1 : b->wk1;
    const int32_t nk2 = K2 ? K2 : b->nk2;
    const uint32x4_t off = poet_mve_lanes(vp), yoff = poet_mve_lanes(b->yp);
    const float32x4_t zero = vdupq_n_f32(0.0f);
    float32x4_t acc[POET_MAX_R] = {zero, zero, zero, zero};
    if (b->hinit) {
        POET_UNROLL for (int r = 0; r < R; ++r) {
            const float *ir = b->init + r * b->yr;
            acc[r] = b->yp == 1 ? vld1q_f32(ir) : vldrwq_gather_shifted_offset_f32(ir, yoff);
        }
    }
    for (int32_t k1 = 0; k1 < b->nk1; ++k1) {
        const float *v1 = b->v + k1 * vk1, *w1 = b->w + k1 * wk1;
        for (int32_t k2 = 0; k2 < nk2; ++k2) {
            const float *v2 = v1 + k2 * vk2, *w2 = w1 + k2 * wk2;
            if (K3) {
                POET_UNROLL for (int k3 = 0; k3 < K3; ++k3) {
                    const float *vv = v2 + k3 * VK3, *ww = w2 + k3 * wk3;
                    const float32x4_t xv = VP == 1 ? vld1q_f32(vv) : vldrwq_gather_shifted_offset_f32(vv, off);
                    POET_UNROLL for (int r = 0; r < R; ++r) acc[r] = vaddq_f32(acc[r], vmulq_n_f32(xv, ww[r * wr]));
                }
            } else {
                for (int32_t k3 = 0; k3 < nk3; ++k3) {
                    const float *vv = v2 + k3 * VK3, *ww = w2 + k3 * wk3;
                    const float32x4_t xv = VP == 1 ? vld1q_f32(vv) : vldrwq_gather_shifted_offset_f32(vv, off);
                    POET_UNROLL for (int r = 0; r < R; ++r) acc[r] = vaddq_f32(acc[r], vmulq_n_f32(xv, ww[r * wr]));
                }
            }
        }
    }
    POET_UNROLL for (int r = 0; r < R; ++r) {
        float *y = b->y + r * b->yr;
        const float32x4_t v = b->bias ? vaddq_n_f32(acc[r], b->bias[r]) : acc[r];
        if (b->yp == 1) vst1q_f32(y, v);
        else vstrwq_scatter_shifted_offset_f32(y, yoff, v);
    }
}
#endif

/* A run of n pixels with the same taps, tiled with 6/4/2/1-pixel blocks; b describes the first pixel and
 * step_v / step_y advance v / y by one pixel. */
POET_ALWAYS_INLINE void poet_run(poet_blk *b, int32_t n, int32_t step_v, int32_t step_y, const int R, const int K2,
                                 const int K3, const int VP, const int VK3, const int WK3, const int WR, const int WK1)
{
    /* the fully unrolled window (K2 > 1) only for the main 6-wide blocks: tails keep the row loop */
    const int K2T = K2 > 1 ? 0 : K2;
#if defined(POET_GEMM_MVE)
    for (; n >= 4; n -= 4) { /* 4-pixel MVE blocks, then the 2- and 1-pixel tails in scalar code */
        poet_block_mve(b, R, K2, K3, VP, VK3, WK3, WR, WK1);
        b->v += 4 * step_v;
        b->y += 4 * step_y;
        b->init += 4 * step_y;
    }
#else
    for (; n >= 6; n -= 6) {
        poet_block(b, R, 6, K2, K3, VP, VK3, WK3, WR, WK1);
        b->v += 6 * step_v;
        b->y += 6 * step_y;
        b->init += 6 * step_y;
    }
#endif
    if (n >= 4) {
        poet_block(b, R, 4, K2T, K3, VP, VK3, WK3, WR, WK1);
        b->v += 4 * step_v;
        b->y += 4 * step_y;
        b->init += 4 * step_y;
        n -= 4;
    }
    if (n >= 2) {
        poet_block(b, R, 2, K2T, K3, VP, VK3, WK3, WR, WK1);
        b->v += 2 * step_v;
        b->y += 2 * step_y;
        b->init += 2 * step_y;
        n -= 2;
    }
    if (n >= 1) poet_block(b, R, 1, K2T, K3, VP, VK3, WK3, WR, WK1);
}

#if defined(POET_CONV_ASM)
/* poet_run for a full 3x3 window with R = 4 (the interior of a 3x3 convolution's forward at stride 1, DIR =
 * +1, or 2, DIR = 2, or its input gradient at stride 1, DIR = -1): 4-pixel blocks in assembly
 * (poet_asm_conv3x3_4x4), a C 6-pixel block first where that saves a tail, the 2- and 1-pixel
 * tail in C; b->wr, wk1 as the C block reads them, pixels 1 apart in y and 1 (DIR = 2: 2) in v. */
POET_ALWAYS_INLINE void poet_run_conv3_asm(poet_blk *b, int32_t n, const int DIR)
{
    const int S = DIR == 2 ? 2 : 1;
    poet_asm_out out = {{0.0f}, b->y, 4 * b->yr, NULL, b->bias, 4 * (b->vk1 - 2 * b->vk2), 4 * (b->wk1 - 9)};
    /* one C 6-pixel block when that leaves a multiple of 4 (6 = 6, 14 = 6 + 2 x 4, 30 = 6 + 6 x 4) or saves
     * the 2-pixel tail (7 = 6 + 1, 15 = 6 + 2 x 4 + 1) */
    if (n >= 6 && n % 4 >= 2) {
        n -= 6;
        poet_block(b, 4, 6, 3, 3, S, 1 - 2 * (DIR < 0), 1, DIR > 0 ? 0 : 9, 0);
        b->v += 6 * S;
        b->y += 6;
        b->init += 6;
    }
    for (; n >= 4; n -= 4) {
        out.y = b->y;
        if (b->hinit && b->bias)
            poet_asm_conv3x3_4x4_init(b->w, b->wr, b->v, b->nk1, b->vk2, &out, b->init, DIR, 2);
        else if (b->hinit)
            poet_asm_conv3x3_4x4_init(b->w, b->wr, b->v, b->nk1, b->vk2, &out, b->init, DIR, 0);
        else if (b->bias)
            poet_asm_conv3x3_4x4(b->w, b->wr, b->v, b->nk1, b->vk2, &out, DIR, 2);
        else
            poet_asm_conv3x3_4x4(b->w, b->wr, b->v, b->nk1, b->vk2, &out, DIR, 0);
        b->v += 4 * S;
        b->y += 4;
        b->init += 4;
    }
    if (n >= 2) {
        poet_block(b, 4, 2, 0, 3, S, 1 - 2 * (DIR < 0), 1, DIR > 0 ? 0 : 9, 0);
        b->v += 2 * S;
        b->y += 2;
        b->init += 2;
        n -= 2;
    }
    if (n >= 1) poet_block(b, 4, 1, 0, 3, S, 1 - 2 * (DIR < 0), 1, DIR > 0 ? 0 : 9, 0);
}

/* poet_run for a 1x1 stride-1 block of R = 4 channels over all pixels (b->nk1 >= 1): the GEMM blocks of
 * poet/blocked_arm.h, 4x6 then 4x3, the 2- and 1-pixel tail in C. Forward (TA = 0): A·B with the weights
 * of a channel walked along the input channels (rows b->wr apart), the input rows b->vk1 apart; input
 * gradient (TA = 1): Aᵀ·B with the 4 channels' weights consecutive (b->wr = 1) and b->wk1 apart per output
 * channel. The part kernels use it (the whole kernels call the GEMM): accumulators from b->init when
 * hinit. */
POET_ALWAYS_INLINE void poet_run_pw_asm_epi(poet_blk *b, int32_t n, const int TA, const int EPI, const int INIT)
{
    poet_asm_out out = {{0.0f}, b->y, 4 * b->yr, NULL, b->bias, 0, b->nk1}; /* step2: K for A·B from init */
    const int32_t lda = TA ? b->wk1 : b->wr, ldb = b->vk1;
    for (; n >= 6; n -= 6) {
        out.y = b->y;
        if (TA && INIT) poet_asm_tn_4x6_init(b->w, lda, b->v, ldb, b->nk1, &out, b->init, EPI);
        else if (TA) poet_asm_tn_4x6(b->w, lda, b->v, ldb, b->nk1, &out, EPI);
        else if (INIT) poet_asm_nn_4x6_init(b->w, lda, b->v, ldb, b->nk1, &out, b->init, EPI);
        else poet_asm_nn_4x6(b->w, lda, b->v, ldb, b->nk1, &out, EPI);
        b->v += 6;
        b->y += 6;
        b->init += 6;
    }
    if (n >= 3) {
        out.y = b->y;
        if (TA && INIT) poet_asm_tn_4x3_init(b->w, lda, b->v, ldb, b->nk1, &out, b->init, EPI);
        else if (TA) poet_asm_tn_4x3(b->w, lda, b->v, ldb, b->nk1, &out, EPI);
        else if (INIT) poet_asm_nn_4x3_init(b->w, lda, b->v, ldb, b->nk1, &out, b->init, EPI);
        else poet_asm_nn_4x3(b->w, lda, b->v, ldb, b->nk1, &out, EPI);
        b->v += 3;
        b->y += 3;
        b->init += 3;
        n -= 3;
    }
    if (n >= 2) {
        poet_block(b, 4, 2, 1, 1, 1, 1, 1, TA ? 1 : 0, TA ? 0 : 1);
        b->v += 2;
        b->y += 2;
        b->init += 2;
        n -= 2;
    }
    if (n >= 1) poet_block(b, 4, 1, 1, 1, 1, 1, 1, TA ? 1 : 0, TA ? 0 : 1);
}

POET_ALWAYS_INLINE void poet_run_pw_asm(poet_blk *b, int32_t n, const int TA)
{
    if (TA && b->hinit) poet_run_pw_asm_epi(b, n, 1, 0, 1);
    else if (TA) poet_run_pw_asm_epi(b, n, 1, 0, 0);
    else if (b->hinit && b->bias) poet_run_pw_asm_epi(b, n, 0, 2, 1);
    else if (b->hinit) poet_run_pw_asm_epi(b, n, 0, 0, 1);
    else if (b->bias) poet_run_pw_asm_epi(b, n, 0, 2, 0);
    else poet_run_pw_asm_epi(b, n, 0, 0, 0);
}
#endif

/* A channel tile of a part kernel (kernels.h): input channels [c_lo, c_hi) and output channels [m_lo, m_hi)
 * (absolute; for the input gradient "input" is dY's m and "output" dX's c), P the starting values or NULL.
 * The whole kernels run the same code with the whole conv as the tile. */
typedef struct {
    int32_t c_lo, c_hi, m_lo, m_hi;
    const float *P;
} poet_tile;

/* ---- depthwise 3x3 (one input and one output channel per group) --------------------------------------
 * The nine weights of a channel stay in registers. poet_dw_plane computes
 *   out[o, q] = sum over kh, kw < 3 (ascending) of in[r, c] * w[kh, kw]  (+ bias)
 * where r = o * S + AH + D * kh, c = q * S + AW + D * kw and taps with r or c outside the input are
 * skipped: the forward pass is D = +1 (AH = -PT, AW = -PL); the input gradient at stride 1 is D = -1 with
 * in = dY (AH = PT, AW = PL). The valid kernel rows of an output row are one range [KH0, KH1) and the valid
 * kernel columns of an output column one range [KW0, KW1): every block below has both ranges fixed at
 * compile time, so no tap is tested. Interior columns (all three kernel columns valid) run in blocks of
 * 8/4/2/1 outputs that read each input value of a row once (one load for up to 3 products); each border
 * column is one output with its own column range. Rows whose range is not one of the three common ones
 * (maps of height 1 or 2) take one generic path that loops over the ranges at run time. */
typedef struct {
    const float *in, *w, *bias;
    float *out;
    int32_t HI, WI, HO, WO, AH, AW;
} poet_dwp;

/* P outputs from column col (input column of tap kw: col + p * S + D * kw), taps kh in [KH0, KH1) and kw in
 * [KW0, KW1), rows[kh] the input row of tap kh (only those in range are read). */
POET_ALWAYS_INLINE void poet_dw_px(const float *const rows[3], const float w[9], int32_t col, const float *bias,
                                   float *out, const int P, const int S, const int D, const int KH0, const int KH1,
                                   const int KW0, const int KW1)
{
    float acc[8];
    POET_UNROLL for (int p = 0; p < P; ++p) acc[p] = 0.0f;
    POET_UNROLL for (int kh = KH0; kh < KH1; ++kh) {
        const float *x = rows[kh] + col + D * KW0; /* the first valid column: no pointer outside the row */
        POET_UNROLL for (int p = 0; p < P; ++p) POET_UNROLL for (int kw = KW0; kw < KW1; ++kw)
            acc[p] += x[p * S + D * (kw - KW0)] * w[kh * 3 + kw];
    }
    if (bias) {
        const float bv = *bias;
        POET_UNROLL for (int p = 0; p < P; ++p) out[p] = acc[p] + bv;
    } else {
        POET_UNROLL for (int p = 0; p < P; ++p) out[p] = acc[p];
    }
}

/* valid tap range [*k0, *k1) of a 3-wide kernel at position base (input index base + D * k in [0, n)) */
static void poet_dw_range(int32_t base, int32_t n, int32_t D, int32_t *k0, int32_t *k1)
{
    if (D > 0) {
        *k0 = poet_max32(0, -base);
        *k1 = poet_min32(3, n - base);
    } else {
        *k0 = poet_max32(0, base - n + 1);
        *k1 = poet_min32(3, base + 1);
    }
    if (*k1 < *k0) *k1 = *k0;
}

/* One border column q (its own kernel-column range, chosen at run time among the compile-time ones). */
POET_ALWAYS_INLINE void poet_dw_edge(const poet_dwp *d, const float *const rows[3], const float w[9], float *out,
                                     int32_t q, const int S, const int D, const int KH0, const int KH1)
{
    const int32_t col = q * S + d->AW;
    int32_t k0, k1;
    poet_dw_range(col, d->WI, D, &k0, &k1);
    switch (k0 * 4 + k1) {
    case 1: poet_dw_px(rows, w, col, d->bias, out + q, 1, S, D, KH0, KH1, 0, 1); break;
    case 2: poet_dw_px(rows, w, col, d->bias, out + q, 1, S, D, KH0, KH1, 0, 2); break;
    case 3: poet_dw_px(rows, w, col, d->bias, out + q, 1, S, D, KH0, KH1, 0, 3); break;
    case 6: poet_dw_px(rows, w, col, d->bias, out + q, 1, S, D, KH0, KH1, 1, 2); break;
    case 7: poet_dw_px(rows, w, col, d->bias, out + q, 1, S, D, KH0, KH1, 1, 3); break;
    case 11: poet_dw_px(rows, w, col, d->bias, out + q, 1, S, D, KH0, KH1, 2, 3); break;
    default: poet_dw_px(rows, w, col, d->bias, out + q, 1, S, D, 0, 0, 0, 0); break; /* no tap */
    }
}

/* One output row with kernel rows [KH0, KH1): border columns below qa and from qb, interior blocks between. */
POET_ALWAYS_INLINE void poet_dw_row(const poet_dwp *d, const float *const rows[3], const float w[9], float *out,
                                    int32_t qa, int32_t qb, const int S, const int D, const int KH0, const int KH1)
{
    int32_t q = 0;
    for (; q < qa; ++q) poet_dw_edge(d, rows, w, out, q, S, D, KH0, KH1);
    for (; q + 8 <= qb; q += 8) poet_dw_px(rows, w, q * S + d->AW, d->bias, out + q, 8, S, D, KH0, KH1, 0, 3);
    if (qb - q >= 4) {
        poet_dw_px(rows, w, q * S + d->AW, d->bias, out + q, 4, S, D, KH0, KH1, 0, 3);
        q += 4;
    }
    if (qb - q >= 2) {
        poet_dw_px(rows, w, q * S + d->AW, d->bias, out + q, 2, S, D, KH0, KH1, 0, 3);
        q += 2;
    }
    if (qb - q >= 1) {
        poet_dw_px(rows, w, q * S + d->AW, d->bias, out + q, 1, S, D, KH0, KH1, 0, 3);
        q += 1;
    }
    for (; q < d->WO; ++q) poet_dw_edge(d, rows, w, out, q, S, D, KH0, KH1);
}

/* Any row range (rare: maps of height 1 or 2): the taps of every output tested at run time. */
static void poet_dw_row_any(const poet_dwp *d, const float *const rows[3], int32_t kh0, int32_t kh1, float *out,
                            const int32_t S, const int32_t D)
{
    for (int32_t q = 0; q < d->WO; ++q) {
        const int32_t col = q * S + d->AW;
        int32_t k0, k1;
        poet_dw_range(col, d->WI, D, &k0, &k1);
        float acc = 0.0f;
        for (int32_t kh = kh0; kh < kh1; ++kh)
            for (int32_t kw = k0; kw < k1; ++kw) acc += rows[kh][col + D * kw] * d->w[kh * 3 + kw];
        out[q] = d->bias ? acc + *d->bias : acc;
    }
}

POET_ALWAYS_INLINE void poet_dw_plane(const poet_dwp *d, const int S, const int D)
{
    float w[9];
    POET_UNROLL for (int i = 0; i < 9; ++i) w[i] = d->w[i];
    const int32_t WI = d->WI, WO = d->WO;
    /* interior columns q in [qa, qb): every tap column in [0, WI) */
    const int32_t lo = D > 0 ? -d->AW : 2 - d->AW;          /* q * S >= lo */
    const int32_t hi = D > 0 ? WI - 3 - d->AW : WI - 1 - d->AW; /* q * S <= hi */
    const int32_t qa = poet_min32(WO, lo <= 0 ? 0 : (lo + S - 1) / S);
    const int32_t qb = hi < 0 ? qa : poet_max32(qa, poet_min32(WO, hi / S + 1));
    for (int32_t o = 0; o < d->HO; ++o) {
        const float *rows[3];
        const int32_t base = o * S + d->AH;
        int32_t kh0, kh1;
        poet_dw_range(base, d->HI, D, &kh0, &kh1);
        POET_UNROLL for (int kh = 0; kh < 3; ++kh) {
            const int32_t r = base + D * kh;
            rows[kh] = r >= 0 && r < d->HI ? d->in + r * WI : d->in;
        }
        float *out = d->out + o * WO;
        if (kh0 == 0 && kh1 == 3)
            poet_dw_row(d, rows, w, out, qa, qb, S, D, 0, 3);
        else if (kh0 == 1 && kh1 == 3)
            poet_dw_row(d, rows, w, out, qa, qb, S, D, 1, 3);
        else if (kh0 == 0 && kh1 == 2)
            poet_dw_row(d, rows, w, out, qa, qb, S, D, 0, 2);
        else
            poet_dw_row_any(d, rows, kh0, kh1, out, S, D);
    }
}

/* The common planes (one border column at most on each side, one border row at most at the top and the
 * bottom, as 3x3 kernels with padding 1 give): LE / RE are the column ranges of the left / right border
 * column (0: none, 1: [1, 3), 2: [0, 2)), TE / BE the row ranges of the top / bottom border row, all fixed at
 * compile time; few values are live, so nothing spills. */
POET_ALWAYS_INLINE void poet_dw_frow(const float *const rows[3], const float w[9], const float *bias, float *out,
                                     int32_t n, int32_t col, const int S, const int D, const int KH0,
                                     const int KH1, const int LE, const int RE)
{
    if (LE) {
        if (LE == 1) poet_dw_px(rows, w, col, bias, out, 1, S, D, KH0, KH1, 1, 3);
        else poet_dw_px(rows, w, col, bias, out, 1, S, D, KH0, KH1, 0, 2);
        col += S;
        ++out;
    }
    for (; n >= 8; n -= 8, col += 8 * S, out += 8) poet_dw_px(rows, w, col, bias, out, 8, S, D, KH0, KH1, 0, 3);
    if (n >= 4) {
        poet_dw_px(rows, w, col, bias, out, 4, S, D, KH0, KH1, 0, 3);
        n -= 4;
        col += 4 * S;
        out += 4;
    }
    if (n >= 2) {
        poet_dw_px(rows, w, col, bias, out, 2, S, D, KH0, KH1, 0, 3);
        n -= 2;
        col += 2 * S;
        out += 2;
    }
    if (n >= 1) {
        poet_dw_px(rows, w, col, bias, out, 1, S, D, KH0, KH1, 0, 3);
        col += S;
        ++out;
    }
    if (RE == 1) poet_dw_px(rows, w, col, bias, out, 1, S, D, KH0, KH1, 1, 3);
    else if (RE == 2) poet_dw_px(rows, w, col, bias, out, 1, S, D, KH0, KH1, 0, 2);
}

POET_ALWAYS_INLINE void poet_dw_frow_any(const float *const rows[3], const float w[9], const float *bias,
                                         float *out, int32_t n, int32_t col, const int S, const int D,
                                         const int KP, const int LE, const int RE)
{
    if (KP == 0) poet_dw_frow(rows, w, bias, out, n, col, S, D, 0, 3, LE, RE);
    else if (KP == 1) poet_dw_frow(rows, w, bias, out, n, col, S, D, 1, 3, LE, RE);
    else poet_dw_frow(rows, w, bias, out, n, col, S, D, 0, 2, LE, RE);
}

POET_ALWAYS_INLINE void poet_dw_fplane(const poet_dwp *d, const int S, const int D, const int LE, const int RE,
                                       const int TE, const int BE, const int HOC, const int WOC)
{
    /* HOC / WOC: the output size at compile time (small planes: everything unrolled), 0 = run time */
    float w[9];
    POET_UNROLL for (int i = 0; i < 9; ++i) w[i] = d->w[i];
    const float *const in = d->in, *const bias = d->bias;
    const int32_t HO = HOC ? HOC : d->HO, WO = WOC ? WOC : d->WO;
    const int32_t WI = d->WI, AH = d->AH, AW = d->AW;
    const int32_t n = WO - (LE ? 1 : 0) - (RE ? 1 : 0);
    float *out = d->out;
#define POET_DW_FROW \
    do { \
        const int32_t base = o * S + AH; \
        const float *rows[3]; \
        /* only the rows of the range used below are read; the others point at the plane */ \
        POET_UNROLL for (int kh = 0; kh < 3; ++kh) { \
            const int32_t r = base + D * kh; \
            rows[kh] = in + (r >= 0 && r < d->HI ? r : 0) * WI; \
        } \
        if (TE && o == 0) poet_dw_frow_any(rows, w, bias, out, n, AW, S, D, TE, LE, RE); \
        else if (BE && o == HO - 1) poet_dw_frow_any(rows, w, bias, out, n, AW, S, D, BE, LE, RE); \
        else poet_dw_frow_any(rows, w, bias, out, n, AW, S, D, 0, LE, RE); \
    } while (0)
    if (HOC) { /* unrolled only with a compile-time trip count */
        POET_UNROLL for (int32_t o = 0; o < HO; ++o, out += WO) POET_DW_FROW;
    } else {
        for (int32_t o = 0; o < HO; ++o, out += WO) POET_DW_FROW;
    }
#undef POET_DW_FROW
}

/* pattern code of a 3-tap range: 0 = [0, 3), 1 = [1, 3), 2 = [0, 2), -1 = any other */
static int poet_dw_code(int32_t base, int32_t n, int32_t D)
{
    int32_t k0, k1;
    poet_dw_range(base, n, D, &k0, &k1);
    return k0 == 0 && k1 == 3 ? 0 : k0 == 1 && k1 == 3 ? 1 : k0 == 0 && k1 == 2 ? 2 : -1;
}

/* The fast plane's compile-time codes for this geometry, packed as LE | RE << 2 | TE << 4 | BE << 6, or -1. */
static int32_t poet_dw_kind(const poet_dwp *d, int32_t S, int32_t D, int32_t qa, int32_t qb)
{
    if (d->HO < 3 || qa > 1 || d->WO - qb > 1 || qb - qa < 1) return -1;
    const int le = qa ? poet_dw_code(d->AW, d->WI, D) : 0;
    const int re = qb < d->WO ? poet_dw_code((d->WO - 1) * S + d->AW, d->WI, D) : 0;
    const int te = poet_dw_code(d->AH, d->HI, D), be = poet_dw_code((d->HO - 1) * S + d->AH, d->HI, D);
    if (le < 0 || re < 0 || te < 0 || be < 0 || (qa && !le) || (qb < d->WO && !re)) return -1;
    if (poet_dw_code(S + d->AH, d->HI, D) != 0 || poet_dw_code((d->HO - 2) * S + d->AH, d->HI, D) != 0) return -1;
    return le | re << 2 | te << 4 | be << 6;
}

/* Every channel of every sample; the plane's kind (poet_dw_kind) is the same for all of them. */
POET_ALWAYS_INLINE void poet_dw_each(const poet_cgeo *g, poet_dwp *d, const float *in, const float *W,
                                     const float *B, float *out, int32_t in_hw, int32_t out_hw, const int S,
                                     const int D, const int FAST, const int LE, const int RE, const int TE,
                                     const int BE, const int HOC, const int WOC)
{
    for (int32_t n = 0; n < g->N; ++n) {
        for (int32_t m = 0; m < g->M; ++m) {
            d->in = in + (n * g->M + m) * in_hw;
            d->out = out + (n * g->M + m) * out_hw;
            d->w = W + m * 9;
            d->bias = B ? B + m : NULL;
            if (FAST) poet_dw_fplane(d, S, D, LE, RE, TE, BE, HOC, WOC);
            else poet_dw_plane(d, S, D);
        }
    }
}

#define POET_DW_VARIANT(name, S, D, FAST, LE, RE, TE, BE, HOC, WOC) \
    POET_NOINLINE void name(const poet_cgeo *g, poet_dwp *d, const float *in, const float *W, const float *B, \
                            float *out, int32_t in_hw, int32_t out_hw) \
    { \
        poet_dw_each(g, d, in, W, B, out, in_hw, out_hw, S, D, FAST, LE, RE, TE, BE, HOC, WOC); \
    }
/* kinds: LE | RE << 2 | TE << 4 | BE << 6 (forward D = +1 with padding 1: left and top borders [1, 3), right
 * and bottom [0, 2); the input gradient D = -1 the other way round; stride 2 on even sizes: no right or
 * bottom border) */
POET_DW_VARIANT(poet_dw_s1_any, 1, 1, 0, 0, 0, 0, 0, 0, 0)
POET_DW_VARIANT(poet_dw_s2_any, 2, 1, 0, 0, 0, 0, 0, 0, 0)
POET_DW_VARIANT(poet_dw_gs1_any, 1, -1, 0, 0, 0, 0, 0, 0, 0)
POET_DW_VARIANT(poet_dw_s1_p1, 1, 1, 1, 1, 2, 1, 2, 0, 0)
POET_DW_VARIANT(poet_dw_s1_p1_3, 1, 1, 1, 1, 2, 1, 2, 3, 3)
POET_DW_VARIANT(poet_dw_s1_p1_6, 1, 1, 1, 1, 2, 1, 2, 6, 6)
POET_DW_VARIANT(poet_dw_s1_p1_w5, 1, 1, 1, 1, 2, 1, 2, 0, 5)
POET_DW_VARIANT(poet_dw_s1_p0, 1, 1, 1, 0, 0, 0, 0, 0, 0)
POET_DW_VARIANT(poet_dw_s2_p1, 2, 1, 1, 1, 2, 1, 2, 0, 0)
POET_DW_VARIANT(poet_dw_s2_p1e, 2, 1, 1, 1, 0, 1, 0, 0, 0)
POET_DW_VARIANT(poet_dw_s2_p1e_3, 2, 1, 1, 1, 0, 1, 0, 3, 3)
POET_DW_VARIANT(poet_dw_s2_p1e_6, 2, 1, 1, 1, 0, 1, 0, 6, 6)
POET_DW_VARIANT(poet_dw_gs1_p1, 1, -1, 1, 2, 1, 2, 1, 0, 0)
POET_DW_VARIANT(poet_dw_gs1_p1_3, 1, -1, 1, 2, 1, 2, 1, 3, 3)
POET_DW_VARIANT(poet_dw_gs1_p1_6, 1, -1, 1, 2, 1, 2, 1, 6, 6)
POET_DW_VARIANT(poet_dw_gs1_p1_w5, 1, -1, 1, 2, 1, 2, 1, 0, 5)
POET_DW_VARIANT(poet_dw_gs1_p0, 1, -1, 1, 0, 0, 0, 0, 0, 0)

static void poet_dw_all(const poet_cgeo *g, const float *in, const float *W, const float *B, float *out,
                        int32_t in_hw, int32_t out_hw, int32_t S, int32_t D)
{
    poet_dwp d;
    d.HI = D > 0 ? g->IH : g->OH;
    d.WI = D > 0 ? g->IW : g->OW;
    d.HO = D > 0 ? g->OH : g->IH;
    d.WO = D > 0 ? g->OW : g->IW;
    d.AH = D > 0 ? -g->PT : g->PT;
    d.AW = D > 0 ? -g->PL : g->PL;
    /* interior columns as poet_dw_plane computes them */
    const int32_t lo = D > 0 ? -d.AW : 2 - d.AW, hi = D > 0 ? d.WI - 3 - d.AW : d.WI - 1 - d.AW;
    const int32_t qa = poet_min32(d.WO, lo <= 0 ? 0 : (lo + S - 1) / S);
    const int32_t qb = hi < 0 ? qa : poet_max32(qa, poet_min32(d.WO, hi / S + 1));
    const int32_t kind = poet_dw_kind(&d, S, D, qa, qb);
    const int32_t sq = d.HO == d.WO ? d.HO : 0; /* square output planes of 3x3 and 6x6: fully unrolled */
    if (S == 1 && D > 0 && kind == (1 | 2 << 2 | 1 << 4 | 2 << 6) && sq == 3)
        poet_dw_s1_p1_3(g, &d, in, W, B, out, in_hw, out_hw);
    else if (S == 1 && D > 0 && kind == (1 | 2 << 2 | 1 << 4 | 2 << 6) && sq == 6)
        poet_dw_s1_p1_6(g, &d, in, W, B, out, in_hw, out_hw);
    else if (S == 1 && D > 0 && kind == (1 | 2 << 2 | 1 << 4 | 2 << 6) && d.WO == 5)
        poet_dw_s1_p1_w5(g, &d, in, W, B, out, in_hw, out_hw);
    else if (S == 1 && D > 0 && kind == (1 | 2 << 2 | 1 << 4 | 2 << 6))
        poet_dw_s1_p1(g, &d, in, W, B, out, in_hw, out_hw);
    else if (S == 1 && D > 0 && kind == 0)
        poet_dw_s1_p0(g, &d, in, W, B, out, in_hw, out_hw);
    else if (S == 1 && D > 0)
        poet_dw_s1_any(g, &d, in, W, B, out, in_hw, out_hw);
    else if (S == 2 && kind == (1 | 2 << 2 | 1 << 4 | 2 << 6))
        poet_dw_s2_p1(g, &d, in, W, B, out, in_hw, out_hw);
    else if (S == 2 && kind == (1 | 1 << 4) && sq == 3)
        poet_dw_s2_p1e_3(g, &d, in, W, B, out, in_hw, out_hw);
    else if (S == 2 && kind == (1 | 1 << 4) && sq == 6)
        poet_dw_s2_p1e_6(g, &d, in, W, B, out, in_hw, out_hw);
    else if (S == 2 && kind == (1 | 1 << 4))
        poet_dw_s2_p1e(g, &d, in, W, B, out, in_hw, out_hw);
    else if (S == 2)
        poet_dw_s2_any(g, &d, in, W, B, out, in_hw, out_hw);
    else if (kind == (2 | 1 << 2 | 2 << 4 | 1 << 6) && sq == 3)
        poet_dw_gs1_p1_3(g, &d, in, W, B, out, in_hw, out_hw);
    else if (kind == (2 | 1 << 2 | 2 << 4 | 1 << 6) && sq == 6)
        poet_dw_gs1_p1_6(g, &d, in, W, B, out, in_hw, out_hw);
    else if (kind == (2 | 1 << 2 | 2 << 4 | 1 << 6) && d.WO == 5)
        poet_dw_gs1_p1_w5(g, &d, in, W, B, out, in_hw, out_hw);
    else if (kind == (2 | 1 << 2 | 2 << 4 | 1 << 6))
        poet_dw_gs1_p1(g, &d, in, W, B, out, in_hw, out_hw);
    else if (kind == 0)
        poet_dw_gs1_p0(g, &d, in, W, B, out, in_hw, out_hw);
    else
        poet_dw_gs1_any(g, &d, in, W, B, out, in_hw, out_hw);
}

POET_NOINLINE void poet_dw_fwd_s1(const poet_cgeo *g, const float *X, const float *W, const float *B, float *Y)
{
    poet_dw_all(g, X, W, B, Y, g->IHW, g->OHW, 1, 1);
}
POET_NOINLINE void poet_dw_fwd_s2(const poet_cgeo *g, const float *X, const float *W, const float *B, float *Y)
{
    poet_dw_all(g, X, W, B, Y, g->IHW, g->OHW, 2, 1);
}
POET_NOINLINE void poet_dw_gi_s1(const poet_cgeo *g, const float *dY, const float *W, float *dX)
{
    poet_dw_all(g, dY, W, NULL, dX, g->OHW, g->IHW, 1, -1);
}

/* Input gradient of a depthwise 3x3 channel at stride 2: dx[ih, iw] sums dy[(ih + PT - kh) / 2,
 * (iw + PL - kw) / 2] * w[kh, kw] over the taps where both divisions are exact and inside dY, kh then kw
 * ascending. In a row, the valid kh are {0, 2} or {1} (by the parity of ih + PT); along the row, input
 * columns pair up: u = iw + PL even takes kw 0 and 2 (dY columns u/2 and u/2 - 1), u + 1 takes kw 1
 * (column u/2). Interior pairs run without tests, each dY value loaded once; the rest test every tap. */
POET_ALWAYS_INLINE void poet_dw_gi2_pair(const float *const rows[3], const int ok[3], const float w[9], int32_t o,
                                         float *dx, int32_t iw, const int PAT)
{
    float ae = 0.0f, ao = 0.0f;
    POET_UNROLL for (int kh = 0; kh < 3; ++kh) {
        const int use = PAT == 1 ? kh != 1 : PAT == 2 ? kh == 1 : 1;
        if (use && (PAT || ok[kh])) {
            const float d0 = rows[kh][o], d1 = rows[kh][o - 1];
            ae += d0 * w[kh * 3];
            ae += d1 * w[kh * 3 + 2];
            ao += d0 * w[kh * 3 + 1];
        }
    }
    dx[iw] = ae;
    dx[iw + 1] = ao; /* o < ob keeps iw + 1 inside the row */
}

POET_NOINLINE void poet_dw_gi_s2(const poet_cgeo *g, const float *dY, const float *W, float *dX)
{
    const int32_t IW = g->IW, OW = g->OW, PL = g->PL;
    /* pairs (u = 2o, 2o + 1), u = iw + PL: need o >= 1, o <= OW - 1, 2o - PL >= 0 and 2o - PL <= IW - 2 */
    const int32_t oa = poet_max32(1, (PL + 1) / 2);
    const int32_t ob = poet_min32(OW, (IW - 2 + PL) >= 0 ? (IW - 2 + PL) / 2 + 1 : 0); /* o < ob */
    for (int32_t n = 0; n < g->N; ++n) {
        for (int32_t m = 0; m < g->M; ++m) {
            float w[9];
            POET_UNROLL for (int i = 0; i < 9; ++i) w[i] = W[m * 9 + i];
            const float *dy = dY + (n * g->M + m) * g->OHW;
            float *dxp = dX + (n * g->M + m) * g->IHW;
            for (int32_t ih = 0; ih < g->IH; ++ih) {
                const float *rows[3];
                int ok[3];
                POET_UNROLL for (int kh = 0; kh < 3; ++kh) {
                    const int32_t t = ih + g->PT - kh;
                    ok[kh] = t >= 0 && (t & 1) == 0 && t / 2 < g->OH;
                    rows[kh] = ok[kh] ? dy + (t / 2) * OW : dy;
                }
                const int pat = ok[0] && ok[2] ? 1 : ok[1] ? 2 : 0;
                float *dx = dxp + ih * IW;
                int32_t iw = 0;
                while (iw < IW) {
                    const int32_t u = iw + PL;
                    if ((u & 1) == 0 && u / 2 >= oa && u / 2 < ob) {
                        int32_t o = u / 2;
                        if (pat == 1)
                            for (; o < ob; ++o, iw += 2) poet_dw_gi2_pair(rows, ok, w, o, dx, iw, 1);
                        else if (pat == 2)
                            for (; o < ob; ++o, iw += 2) poet_dw_gi2_pair(rows, ok, w, o, dx, iw, 2);
                        else
                            for (; o < ob; ++o, iw += 2) poet_dw_gi2_pair(rows, ok, w, o, dx, iw, 0);
                        continue;
                    }
                    float acc = 0.0f;
                    POET_UNROLL for (int kh = 0; kh < 3; ++kh) {
                        if (ok[kh]) {
                            POET_UNROLL for (int kw = 0; kw < 3; ++kw) {
                                const int32_t c = u - kw;
                                if (c >= 0 && (c & 1) == 0 && c / 2 < OW) acc += rows[kh][c / 2] * w[kh * 3 + kw];
                            }
                        }
                    }
                    dx[iw] = acc;
                    ++iw;
                }
            }
        }
    }
}

/* The common case of the stride-2 input gradient: padding 1 on the top and left, IH = 2 OH or 2 OH - 1 and
 * IW = 2 OW or 2 OW - 1 (a 3x3 stride-2 conv with padding 1). Then dx row ih = 2i uses kernel row 1 (dY row
 * i); ih = 2i + 1 uses kernel rows 0 (dY row i + 1) and 2 (dY row i), or only 2 on the last row. Along a
 * row, dx column 2j uses kernel column 1 (dY column j), 2j + 1 columns 0 (dY column j + 1) and 2 (column
 * j), or only 2 at the right end. P pairs of dx columns read P + 1 values of each dY row used. */
POET_ALWAYS_INLINE void poet_dw_gi2_blk(const float *a, const float *b, const float w[9], float *dx, const int P,
                                        const int TWO, const int KA, const int LAST)
{
    /* a: dY row of kernel row KA (0 with TWO, else KA), b: dY row of kernel row 2 (TWO only). LAST: the
     * final pair has no dY column j + 1 (its odd column takes kernel column 2 only). */
    float av[9], bv[9];
    POET_UNROLL for (int j = 0; j <= P; ++j) {
        if (j < P || !LAST) {
            av[j] = a[j];
            if (TWO) bv[j] = b[j];
        }
    }
    POET_UNROLL for (int j = 0; j < P; ++j) {
        float e = 0.0f, o = 0.0f;
        e += av[j] * w[KA * 3 + 1];
        if (TWO) e += bv[j] * w[7];
        dx[2 * j] = e;
        if (LAST && j == P - 1) {
            o += av[j] * w[KA * 3 + 2];
            if (TWO) o += bv[j] * w[8];
        } else {
            o += av[j + 1] * w[KA * 3];
            o += av[j] * w[KA * 3 + 2];
            if (TWO) {
                o += bv[j + 1] * w[6];
                o += bv[j] * w[8];
            }
        }
        dx[2 * j + 1] = o;
    }
}

/* one dx row: OW - 1 full pairs, then the last dY column: a pair (even IW) or a single column (odd IW) */
POET_ALWAYS_INLINE void poet_dw_gi2_row(const float *a, const float *b, const float w[9], float *dx, int32_t OW,
                                        int32_t odd_w, const int TWO, const int KA)
{
    int32_t n = OW - 1;
    for (; n >= 4; n -= 4, a += 4, b += 4, dx += 8) poet_dw_gi2_blk(a, b, w, dx, 4, TWO, KA, 0);
    if (n >= 2) {
        poet_dw_gi2_blk(a, b, w, dx, 2, TWO, KA, 0);
        n -= 2;
        a += 2;
        b += 2;
        dx += 4;
    }
    if (n >= 1) {
        poet_dw_gi2_blk(a, b, w, dx, 1, TWO, KA, 0);
        a += 1;
        b += 1;
        dx += 2;
    }
    if (odd_w) {
        float e = 0.0f;
        e += a[0] * w[KA * 3 + 1];
        if (TWO) e += b[0] * w[7];
        dx[0] = e;
    } else {
        poet_dw_gi2_blk(a, b, w, dx, 1, TWO, KA, 1);
    }
}

POET_ALWAYS_INLINE void poet_dw_gi2_all(const poet_cgeo *g, const float *dY, const float *W, float *dX, const int OC)
{
    /* OC: dY planes of OC x OC and even dX sizes at compile time (small planes: unrolled), 0 = run time */
    const int32_t IH = OC ? 2 * OC : g->IH, IW = OC ? 2 * OC : g->IW, OH = OC ? OC : g->OH, OW = OC ? OC : g->OW;
    const int32_t odd_w = IW & 1;
    for (int32_t n = 0; n < g->N; ++n) {
        for (int32_t m = 0; m < g->M; ++m) {
            float w[9];
            POET_UNROLL for (int i = 0; i < 9; ++i) w[i] = W[m * 9 + i];
            const float *dy = dY + (n * g->M + m) * g->OHW;
            float *dx = dX + (n * g->M + m) * g->IHW;
#define POET_DW_GI2_ROW \
    do { \
        const int32_t i = ih >> 1; \
        if ((ih & 1) == 0) poet_dw_gi2_row(dy + i * OW, dy, w, dx, OW, odd_w, 0, 1); \
        else if (i + 1 < OH) poet_dw_gi2_row(dy + (i + 1) * OW, dy + i * OW, w, dx, OW, odd_w, 1, 0); \
        else poet_dw_gi2_row(dy + i * OW, dy, w, dx, OW, odd_w, 0, 2); \
    } while (0)
            if (OC) {
                POET_UNROLL for (int32_t ih = 0; ih < IH; ++ih, dx += IW) POET_DW_GI2_ROW;
            } else {
                for (int32_t ih = 0; ih < IH; ++ih, dx += IW) POET_DW_GI2_ROW;
            }
#undef POET_DW_GI2_ROW
        }
    }
}

POET_NOINLINE void poet_dw_gi2_fast(const poet_cgeo *g, const float *dY, const float *W, float *dX)
{
    poet_dw_gi2_all(g, dY, W, dX, 0);
}
POET_NOINLINE void poet_dw_gi2_fast3(const poet_cgeo *g, const float *dY, const float *W, float *dX)
{
    poet_dw_gi2_all(g, dY, W, dX, 3);
}

static int poet_dw_gi2_common(const poet_cgeo *g)
{
    return g->PT == 1 && g->PL == 1 && (g->IH == 2 * g->OH || g->IH == 2 * g->OH - 1) &&
           (g->IW == 2 * g->OW || g->IW == 2 * g->OW - 1) && g->OW >= 1 && g->OH >= 1;
}

/* the nine accumulators of channel m: P's values or +0.0f; one test of P */
POET_ALWAYS_INLINE void poet_dw_gw_init(float acc[9], const float *P, int32_t m)
{
    if (POET_UNLIKELY(P != NULL)) {
        POET_UNROLL for (int i = 0; i < 9; ++i) acc[i] = P[m * 9 + i];
    } else {
        POET_UNROLL for (int i = 0; i < 9; ++i) acc[i] = 0.0f;
    }
}

/* Weight gradient of a depthwise 3x3 channel: nine accumulators, positions (n, oh, ow) in order; interior
 * positions in blocks of 4/2/1 that load each dY value once for nine products. */
POET_ALWAYS_INLINE void poet_dw_gw_block(const float *const rows[3], const int ok[3], const float *dy, int32_t col,
                                         float acc[9], const int Q, const int S)
{
    float dv[4];
    POET_UNROLL for (int q = 0; q < Q; ++q) dv[q] = dy[q];
    POET_UNROLL for (int kh = 0; kh < 3; ++kh) {
        if (ok[kh]) {
            const float *x = rows[kh] + col;
            POET_UNROLL for (int q = 0; q < Q; ++q) POET_UNROLL for (int kw = 0; kw < 3; ++kw)
                acc[kh * 3 + kw] += dv[q] * x[q * S + kw];
        }
    }
}

POET_ALWAYS_INLINE void poet_dw_gw(const poet_cgeo *g, const float *X, const float *dY, float *dW, const int S)
{
    const int32_t IW = g->IW, OW = g->OW;
    const int32_t lo = g->PL, hi = IW - 3 + g->PL; /* interior: lo <= ow * S <= hi */
    const int32_t qa = poet_min32(OW, lo <= 0 ? 0 : (lo + S - 1) / S);
    const int32_t qb = hi < 0 ? qa : poet_max32(qa, poet_min32(OW, hi / S + 1));
    for (int32_t m = 0; m < g->M; ++m) {
        float acc[9];
        poet_dw_gw_init(acc, POET_GEO_P(g), m);
        for (int32_t n = 0; n < g->N; ++n) {
            const float *x = X + (n * g->C + m) * g->IHW, *dyp = dY + (n * g->M + m) * g->OHW;
            for (int32_t oh = 0; oh < g->OH; ++oh) {
                const float *rows[3];
                int ok[3];
                POET_UNROLL for (int kh = 0; kh < 3; ++kh) {
                    const int32_t r = oh * S - g->PT + kh;
                    ok[kh] = r >= 0 && r < g->IH;
                    rows[kh] = ok[kh] ? x + r * IW : x;
                }
                const float *dy = dyp + oh * OW;
                int32_t q = 0;
                for (; q < OW; ++q) {
                    if (q == qa) {
                        for (; q + 4 <= qb; q += 4) poet_dw_gw_block(rows, ok, dy + q, q * S - g->PL, acc, 4, S);
                        if (qb - q >= 2) {
                            poet_dw_gw_block(rows, ok, dy + q, q * S - g->PL, acc, 2, S);
                            q += 2;
                        }
                        if (qb - q >= 1) {
                            poet_dw_gw_block(rows, ok, dy + q, q * S - g->PL, acc, 1, S);
                            q += 1;
                        }
                        if (q >= OW) break;
                    }
                    const float dv = dy[q];
                    POET_UNROLL for (int kh = 0; kh < 3; ++kh) {
                        if (ok[kh]) {
                            POET_UNROLL for (int kw = 0; kw < 3; ++kw) {
                                const int32_t c = q * S - g->PL + kw;
                                if (c >= 0 && c < IW) acc[kh * 3 + kw] += dv * rows[kh][c];
                            }
                        }
                    }
                }
            }
        }
        POET_UNROLL for (int i = 0; i < 9; ++i) dW[m * 9 + i] = acc[i];
    }
}

POET_NOINLINE void poet_dw_gw_s1(const poet_cgeo *g, const float *X, const float *dY, float *dW)
{
    poet_dw_gw(g, X, dY, dW, 1);
}
POET_NOINLINE void poet_dw_gw_s2(const poet_cgeo *g, const float *X, const float *dY, float *dW)
{
    poet_dw_gw(g, X, dY, dW, 2);
}

/* The common planes (poet_dw_kind of the forward geometry: at most one border column / row per side, with
 * the compile-time ranges LE, RE, TE, BE): Q positions of one row, taps kh in [KH0, KH1), kw in [KW0, KW1). */
POET_ALWAYS_INLINE void poet_dw_gpx(const float *const rows[3], const float *dy, int32_t col, float acc[9], const int Q,
                                    const int S, const int KH0, const int KH1, const int KW0, const int KW1)
{
    float dv[8];
    POET_UNROLL for (int q = 0; q < Q; ++q) dv[q] = dy[q];
    POET_UNROLL for (int kh = KH0; kh < KH1; ++kh) {
        const float *x = rows[kh] + col + KW0;
        POET_UNROLL for (int q = 0; q < Q; ++q) POET_UNROLL for (int kw = KW0; kw < KW1; ++kw)
            acc[kh * 3 + kw] += dv[q] * x[q * S + kw - KW0];
    }
}

POET_ALWAYS_INLINE void poet_dw_grow(const float *const rows[3], const float *dy, float acc[9], int32_t n, int32_t col,
                                     const int S, const int KH0, const int KH1, const int LE, const int RE)
{
    if (LE) {
        if (LE == 1) poet_dw_gpx(rows, dy, col, acc, 1, S, KH0, KH1, 1, 3);
        else poet_dw_gpx(rows, dy, col, acc, 1, S, KH0, KH1, 0, 2);
        col += S;
        ++dy;
    }
    for (; n >= 8; n -= 8, col += 8 * S, dy += 8) poet_dw_gpx(rows, dy, col, acc, 8, S, KH0, KH1, 0, 3);
    if (n >= 4) {
        poet_dw_gpx(rows, dy, col, acc, 4, S, KH0, KH1, 0, 3);
        n -= 4;
        col += 4 * S;
        dy += 4;
    }
    if (n >= 2) {
        poet_dw_gpx(rows, dy, col, acc, 2, S, KH0, KH1, 0, 3);
        n -= 2;
        col += 2 * S;
        dy += 2;
    }
    if (n >= 1) {
        poet_dw_gpx(rows, dy, col, acc, 1, S, KH0, KH1, 0, 3);
        col += S;
        ++dy;
    }
    if (RE == 1) poet_dw_gpx(rows, dy, col, acc, 1, S, KH0, KH1, 1, 3);
    else if (RE == 2) poet_dw_gpx(rows, dy, col, acc, 1, S, KH0, KH1, 0, 2);
}

POET_ALWAYS_INLINE void poet_dw_gfast(const poet_cgeo *g, const float *X, const float *dY, float *dW, const int S,
                                      const int LE, const int RE, const int TE, const int BE, const int OHC,
                                      const int OWC)
{
    /* OHC / OWC: dY plane size at compile time (small planes: everything unrolled), 0 = run time */
    const int32_t IW = g->IW, OW = OWC ? OWC : g->OW, OH = OHC ? OHC : g->OH, PT = g->PT, PL = g->PL;
    const int32_t n = OW - (LE ? 1 : 0) - (RE ? 1 : 0);
    for (int32_t m = 0; m < g->M; ++m) {
        float acc[9];
        poet_dw_gw_init(acc, POET_GEO_P(g), m);
        for (int32_t s = 0; s < g->N; ++s) {
            const float *x = X + (s * g->C + m) * g->IHW, *dy = dY + (s * g->M + m) * g->OHW;
#define POET_DW_GROW \
    do { \
        const float *rows[3]; \
        POET_UNROLL for (int kh = 0; kh < 3; ++kh) { \
            const int32_t r = oh * S - PT + kh; \
            rows[kh] = x + (r >= 0 && r < g->IH ? r : 0) * IW; \
        } \
        if (TE && oh == 0) { \
            if (TE == 1) poet_dw_grow(rows, dy, acc, n, -PL, S, 1, 3, LE, RE); \
            else poet_dw_grow(rows, dy, acc, n, -PL, S, 0, 2, LE, RE); \
        } else if (BE && oh == OH - 1) { \
            if (BE == 1) poet_dw_grow(rows, dy, acc, n, -PL, S, 1, 3, LE, RE); \
            else poet_dw_grow(rows, dy, acc, n, -PL, S, 0, 2, LE, RE); \
        } else { \
            poet_dw_grow(rows, dy, acc, n, -PL, S, 0, 3, LE, RE); \
        } \
    } while (0)
            if (OHC) {
                POET_UNROLL for (int32_t oh = 0; oh < OH; ++oh, dy += OW) POET_DW_GROW;
            } else {
                for (int32_t oh = 0; oh < OH; ++oh, dy += OW) POET_DW_GROW;
            }
#undef POET_DW_GROW
        }
        POET_UNROLL for (int i = 0; i < 9; ++i) dW[m * 9 + i] = acc[i];
    }
}

#define POET_DW_GW_VARIANT(name, S, LE, RE, TE, BE, OHC, OWC) \
    POET_NOINLINE void name(const poet_cgeo *g, const float *X, const float *dY, float *dW) \
    { \
        poet_dw_gfast(g, X, dY, dW, S, LE, RE, TE, BE, OHC, OWC); \
    }
POET_DW_GW_VARIANT(poet_dw_gw_s1_p1, 1, 1, 2, 1, 2, 0, 0)
POET_DW_GW_VARIANT(poet_dw_gw_s1_p1_3, 1, 1, 2, 1, 2, 3, 3)
POET_DW_GW_VARIANT(poet_dw_gw_s1_p1_6, 1, 1, 2, 1, 2, 6, 6)
POET_DW_GW_VARIANT(poet_dw_gw_s1_p1_w5, 1, 1, 2, 1, 2, 0, 5)
POET_DW_GW_VARIANT(poet_dw_gw_s1_p0, 1, 0, 0, 0, 0, 0, 0)
POET_DW_GW_VARIANT(poet_dw_gw_s2_p1, 2, 1, 2, 1, 2, 0, 0)
POET_DW_GW_VARIANT(poet_dw_gw_s2_p1e, 2, 1, 0, 1, 0, 0, 0)
POET_DW_GW_VARIANT(poet_dw_gw_s2_p1e_3, 2, 1, 0, 1, 0, 3, 3)
POET_DW_GW_VARIANT(poet_dw_gw_s2_p1e_6, 2, 1, 0, 1, 0, 6, 6)

/* the kind (poet_dw_kind) of the forward geometry of a depthwise 3x3 conv at stride S */
static int32_t poet_dw_fkind(const poet_cgeo *g, int32_t S)
{
    poet_dwp d;
    d.HI = g->IH;
    d.WI = g->IW;
    d.HO = g->OH;
    d.WO = g->OW;
    d.AH = -g->PT;
    d.AW = -g->PL;
    const int32_t lo = g->PL, hi = g->IW - 3 + g->PL;
    const int32_t qa = poet_min32(g->OW, lo <= 0 ? 0 : (lo + S - 1) / S);
    const int32_t qb = hi < 0 ? qa : poet_max32(qa, poet_min32(g->OW, hi / S + 1));
    return poet_dw_kind(&d, S, 1, qa, qb);
}

static void poet_dw_gw_any(const poet_cgeo *g, const float *X, const float *dY, float *dW, int32_t S)
{
    const int32_t kind = poet_dw_fkind(g, S), sq = g->OH == g->OW ? g->OH : 0;
    if (S == 1 && kind == (1 | 2 << 2 | 1 << 4 | 2 << 6) && sq == 3)
        poet_dw_gw_s1_p1_3(g, X, dY, dW);
    else if (S == 1 && kind == (1 | 2 << 2 | 1 << 4 | 2 << 6) && sq == 6)
        poet_dw_gw_s1_p1_6(g, X, dY, dW);
    else if (S == 1 && kind == (1 | 2 << 2 | 1 << 4 | 2 << 6) && g->OW == 5)
        poet_dw_gw_s1_p1_w5(g, X, dY, dW);
    else if (S == 1 && kind == (1 | 2 << 2 | 1 << 4 | 2 << 6))
        poet_dw_gw_s1_p1(g, X, dY, dW);
    else if (S == 1 && kind == 0)
        poet_dw_gw_s1_p0(g, X, dY, dW);
    else if (S == 1)
        poet_dw_gw_s1(g, X, dY, dW);
    else if (kind == (1 | 2 << 2 | 1 << 4 | 2 << 6))
        poet_dw_gw_s2_p1(g, X, dY, dW);
    else if (kind == (1 | 1 << 4) && sq == 3)
        poet_dw_gw_s2_p1e_3(g, X, dY, dW);
    else if (kind == (1 | 1 << 4) && sq == 6)
        poet_dw_gw_s2_p1e_6(g, X, dY, dW);
    else if (kind == (1 | 1 << 4))
        poet_dw_gw_s2_p1e(g, X, dY, dW);
    else
        poet_dw_gw_s2(g, X, dY, dW);
}

/* depthwise 3x3 with equal strides s (the specialised paths) */
static int poet_dw3(const poet_cgeo *g, int32_t s)
{
    return g->Cg == 1 && g->Mg == 1 && g->KH == 3 && g->KW == 3 && g->SH == s && g->SW == s;
}

/* ---- forward ---------------------------------------------------------------------------------------- */

/* valid kernel columns [*k0, *k0 + *nk) of output column ow (forward: iw = ow * SW - PL + kw in [0, IW)) */
static void poet_fwd_cols(const poet_cgeo *g, int32_t ow, int32_t *k0, int32_t *nk)
{
    const int32_t iw = ow * g->SW - g->PL;
    *k0 = poet_max32(0, -iw);
    *nk = poet_max32(0, poet_min32(g->KW, g->IW - iw) - *k0);
}

/* R output channels of one sample: xg the first of the nc input channels they sum (g->IHW apart), wm the
 * first output channel's weights of that input channel, bias its bias (or NULL), y0 its output plane and i0
 * its starting values (P) or NULL; SWC / KWC: compile-time stride / kernel width (0 = run-time). Pointwise
 * (KHC = KWC = 1, no padding) has a single tap. */
POET_ALWAYS_INLINE void poet_fwd_rows(const poet_cgeo *g, const float *xg, const float *wm, const float *bias,
                                      float *y0, const float *i0, int32_t nc, const int R, const int SWC,
                                      const int KWC, const int PW)
{
    const float *ib = i0 ? i0 : y0; /* read only with hinit */
    poet_blk b;
    b.hinit = i0 != NULL;
    b.init = ib;
    b.nk1 = nc;
    b.vk1 = g->IHW;
    b.vk2 = g->IW;
    b.vp = g->SW;
    b.wr = g->Cg * g->KK;
    b.wk1 = g->KK;
    b.wk2 = g->KW;
    b.wk3 = 1;
    b.bias = bias;
    b.yr = g->OHW;
    b.yp = 1;
    if (PW) { /* 1x1, stride 1, no padding: all OH*OW pixels as one row */
        b.nk2 = 1;
        b.nk3 = 1;
        b.v = xg;
        b.w = wm;
        b.y = y0;
        b.init = ib;
#if defined(POET_CONV_ASM)
        if (R == 4 && nc > 0) {
            poet_run_pw_asm(&b, g->OHW, 0);
            return;
        }
#endif
        poet_run(&b, g->OHW, 1, 1, R, 1, 1, 1, 1, 1, 0, 1);
        return;
    }
    for (int32_t oh = 0; oh < g->OH; ++oh) {
        const int32_t ih = oh * g->SH - g->PT;
        const int32_t kh0 = poet_max32(0, -ih), nkh = poet_max32(0, poet_min32(g->KH, g->IH - ih) - kh0);
        b.nk2 = nkh;
        float *yrow = y0 + oh * g->OW;
        const float *irow = ib + oh * g->OW;
        int32_t ow = 0;
        while (ow < g->OW) {
            int32_t kw0, nkw, end = ow + 1;
            poet_fwd_cols(g, ow, &kw0, &nkw);
            for (;;) {
                int32_t k, c;
                if (end >= g->OW) break;
                poet_fwd_cols(g, end, &k, &c);
                if (k != kw0 || c != nkw) break;
                ++end;
            }
            const int32_t iw = ow * g->SW - g->PL;
            b.y = yrow + ow;
            b.init = irow + ow;
            b.nk3 = nkw;
            if (nkh > 0 && nkw > 0) {
                b.v = xg + (ih + kh0) * g->IW + iw + kw0;
                b.w = wm + kh0 * g->KW + kw0;
            } else { /* no taps: nothing is read */
                b.v = xg;
                b.w = wm;
                b.nk1 = 0;
            }
            if (KWC == 1) /* strided 1x1: one tap (or none: nk1 = 0 writes zeros / bias) */
                poet_run(&b, end - ow, g->SW, 1, R, 1, 1, SWC, 1, 1, 0, 1);
#if defined(POET_CONV_ASM)
            else if (KWC == 3 && SWC == 1 && nkw == 3 && nkh == 3 && g->KW == 3 && R == 4 && b.nk1 > 0)
                poet_run_conv3_asm(&b, end - ow, 1);
            else if (KWC == 3 && SWC == 2 && nkw == 3 && nkh == 3 && g->KW == 3 && R == 4 && b.nk1 > 0)
                poet_run_conv3_asm(&b, end - ow, 2);
#endif
            else if (KWC == 3 && nkw == 3 && nkh == 3 && g->KW == 3 && R == 4)
                poet_run(&b, end - ow, g->SW, 1, R, 3, 3, SWC, 1, 1, 0, 0);
            else if (KWC == 3 && nkw == 3)
                poet_run(&b, end - ow, g->SW, 1, R, 0, 3, SWC, 1, 1, 0, 0);
            else if (KWC == 3 && nkw == 2 && R == 4) /* border columns of a 3-wide kernel */
                poet_run(&b, end - ow, g->SW, 1, R, 0, 2, SWC, 1, 1, 0, 0);
            else if (KWC == 5 && nkw == 5)
                poet_run(&b, end - ow, g->SW, 1, R, 0, 5, SWC, 1, 1, 0, 0);
            else
                poet_run(&b, end - ow, g->SW, 1, R, 0, 0, SWC, 1, 1, 0, 0);
            b.nk1 = nc;
            ow = end;
        }
    }
}

/* The tile's outputs (every output channel of the whole conv for the whole kernel), 4/2/1 channels at a time:
 * X holds the input channels [c_lo, c_hi) of each sample, Y (and P) the output channels [m_lo, m_hi). */
POET_ALWAYS_INLINE void poet_fwd_all(const poet_cgeo *g, const poet_tile *t, const float *X, const float *W,
                                     const float *B, float *Y, const int SWC, const int KWC, const int PW)
{
    const int32_t Ct = t->c_hi - t->c_lo, Mt = t->m_hi - t->m_lo;
    for (int32_t n = 0; n < g->N; ++n) {
        for (int32_t grp = t->m_lo / g->Mg; grp * g->Mg < t->m_hi; ++grp) {
            int32_t m = poet_max32(t->m_lo, grp * g->Mg);
            const int32_t mend = poet_min32(t->m_hi, (grp + 1) * g->Mg);
            const int32_t ca = poet_max32(t->c_lo, grp * g->Cg);
            const int32_t nc = poet_max32(0, poet_min32(t->c_hi, (grp + 1) * g->Cg) - ca);
            /* no input channel of this group in the tile: nothing is read (the outputs are P or 0, + bias) */
            const float *xg = nc > 0 ? X + (n * Ct + ca - t->c_lo) * g->IHW : X;
            const int32_t wc = nc > 0 ? (ca - grp * g->Cg) * g->KK : 0;
#define POET_FWD_ROWS(R) \
    do { \
        const int32_t o_ = (n * Mt + m - t->m_lo) * g->OHW; \
        poet_fwd_rows(g, xg, W + m * g->Cg * g->KK + wc, B ? B + m : NULL, Y + o_, t->P ? t->P + o_ : NULL, nc, \
                      R, SWC, KWC, PW); \
    } while (0)
            for (; m + 4 <= mend; m += 4) POET_FWD_ROWS(4);
            if (mend - m >= 2) {
                POET_FWD_ROWS(2);
                m += 2;
            }
            if (mend - m >= 1) POET_FWD_ROWS(1);
#undef POET_FWD_ROWS
        }
    }
}

#if defined(POET_GEMM_ASM) || defined(POET_GEMM_MVE)
/* 1x1, stride 1, no padding, where the GEMM has assembly blocks: y[m, s] = sum over c of W[m, c] * X[c, s],
 * then + B[m], is the product W·X plus a column bias per sample and group, which poet_gemm_f32 computes in
 * the reference order (c ascending from +0.0f, then + B[m]) with fewer instructions than the block kernel
 * (in C the block kernel is the faster). */
POET_NOINLINE void poet_fwd_pw(const poet_cgeo *g, const float *X, const float *W, const float *B, float *Y)
{
    for (int32_t n = 0; n < g->N; ++n)
        for (int32_t grp = 0; grp < g->G; ++grp)
            poet_gemm_f32(W + grp * g->Mg * g->Cg, X + (n * g->C + grp * g->Cg) * g->IHW, B ? B + grp * g->Mg : NULL,
                          Y + (n * g->M + grp * g->Mg) * g->OHW, g->Mg, g->OHW, g->Cg, 0, 0, 1.0f, 1.0f, 1, 0);
}
#endif
/* the block kernel on a 1x1 stride-1 conv (the part kernels on every target, the whole kernel in C builds) */
POET_NOINLINE void poet_fwd_pw_blk(const poet_cgeo *g, const poet_tile *t, const float *X, const float *W,
                                   const float *B, float *Y)
{
    poet_fwd_all(g, t, X, W, B, Y, 1, 1, 1);
}
#if !defined(POET_GEMM_ASM) && !defined(POET_GEMM_MVE)
POET_NOINLINE void poet_fwd_pw(const poet_cgeo *g, const float *X, const float *W, const float *B, float *Y)
{
    const poet_tile t = {0, g->C, 0, g->M, NULL};
    poet_fwd_pw_blk(g, &t, X, W, B, Y);
}
#endif
POET_NOINLINE void poet_fwd_s1(const poet_cgeo *g, const poet_tile *t, const float *X, const float *W, const float *B,
                               float *Y)
{
    poet_fwd_all(g, t, X, W, B, Y, 1, 3, 0);
}
POET_NOINLINE void poet_fwd_s2(const poet_cgeo *g, const poet_tile *t, const float *X, const float *W, const float *B,
                               float *Y)
{
    poet_fwd_all(g, t, X, W, B, Y, 2, 3, 0);
}
POET_NOINLINE void poet_fwd_k5_s1(const poet_cgeo *g, const poet_tile *t, const float *X, const float *W,
                                  const float *B, float *Y)
{
    poet_fwd_all(g, t, X, W, B, Y, 1, 5, 0);
}
#if defined(POET_CONV_ASM)
/* 1x1, stride 2, no padding, output rows and `channels` (of a group) in multiples of 4: the assembly paths */
static int poet_pw2_asm(const poet_cgeo *g, int32_t channels)
{
    return g->KH == 1 && g->KW == 1 && g->SH == 2 && g->SW == 2 && g->PT == 0 && g->PL == 0 && channels % 4 == 0 &&
           g->OW % 4 == 0 && 2 * (g->OH - 1) < g->IH && 2 * (g->OW - 1) < g->IW;
}
#endif

#if defined(POET_CONV_ASM)
/* 1x1, stride 2, no padding, groups of output channels and output rows in multiples of 4 (the input
 * gradient's condition with 4 | Mg, poet_pw2_asm), where the GEMM has assembly blocks: y[m, oh, ow] = sum over c of
 * W[m, c] * X[c, 2 oh, 2 ow], then + B[m], is W·X per sample, group and output row, X read every other
 * column (poet_asm_nn_4x4_s2). Same order as the reference: c ascending from +0.0f, then the bias. */
POET_NOINLINE void poet_fwd_pw_s2_nn(const poet_cgeo *g, const float *X, const float *W, const float *B, float *Y)
{
    poet_asm_out out = {{0.0f}, NULL, 4 * g->OHW, NULL, NULL, 0, 0};
    for (int32_t n = 0; n < g->N; ++n)
        for (int32_t grp = 0; grp < g->G; ++grp) {
            const float *Xg = X + (n * g->C + grp * g->Cg) * g->IHW;
            for (int32_t m = grp * g->Mg; m < (grp + 1) * g->Mg; m += 4) {
                const float *Wm = W + m * g->Cg;
                float *Ym = Y + (n * g->M + m) * g->OHW;
                out.rbias = B ? B + m : NULL;
                for (int32_t oh = 0; oh < g->OH; ++oh)
                    for (int32_t ow = 0; ow < g->OW; ow += 4) {
                        out.y = Ym + oh * g->OW + ow;
                        if (B)
                            poet_asm_nn_4x4_s2(Wm, g->Cg, Xg + 2 * oh * g->IW + 2 * ow, g->IHW, g->Cg, &out, 2);
                        else
                            poet_asm_nn_4x4_s2(Wm, g->Cg, Xg + 2 * oh * g->IW + 2 * ow, g->IHW, g->Cg, &out, 0);
                    }
            }
        }
}
#endif

POET_NOINLINE void poet_fwd_pw_s2(const poet_cgeo *g, const poet_tile *t, const float *X, const float *W,
                                  const float *B, float *Y)
{
    poet_fwd_all(g, t, X, W, B, Y, 2, 1, 0);
}
POET_NOINLINE void poet_fwd_any(const poet_cgeo *g, const poet_tile *t, const float *X, const float *W, const float *B,
                                float *Y)
{
    poet_fwd_all(g, t, X, W, B, Y, 0, 0, 0);
}

/* the block-kernel paths of the forward for a tile (the whole conv: every path but the specialised ones) */
static void poet_fwd_tile(const poet_cgeo *g, const poet_tile *t, const float *X, const float *W, const float *B,
                          float *Y)
{
    if (poet_pw1(g))
        poet_fwd_pw_blk(g, t, X, W, B, Y);
    else if (g->KH == 1 && g->KW == 1 && g->SW == 2)
        poet_fwd_pw_s2(g, t, X, W, B, Y);
    else if (g->SW == 1 && g->KW == 5)
        poet_fwd_k5_s1(g, t, X, W, B, Y);
    else if (g->SW == 1)
        poet_fwd_s1(g, t, X, W, B, Y);
    else if (g->SW == 2)
        poet_fwd_s2(g, t, X, W, B, Y);
    else
        poet_fwd_any(g, t, X, W, B, Y);
}


void poet_conv2d_f32(const float *X, const float *W, const float *B, float *Y, const int32_t *geom)
{
    const poet_cgeo g = poet_conv_geo(geom);
    const poet_tile t = {0, g.C, 0, g.M, NULL};
    if (poet_dw3(&g, 1))
        poet_dw_fwd_s1(&g, X, W, B, Y);
    else if (poet_dw3(&g, 2))
        poet_dw_fwd_s2(&g, X, W, B, Y);
    else if (poet_pw1(&g))
        poet_fwd_pw(&g, X, W, B, Y);
#if defined(POET_CONV_ASM)
    else if (poet_pw2_asm(&g, g.Mg))
        poet_fwd_pw_s2_nn(&g, X, W, B, Y);
#endif
    else
        poet_fwd_tile(&g, &t, X, W, B, Y);
}

/* ---- input gradient --------------------------------------------------------------------------------- */

/* Taps k of a kernel of size K that reach output index o = (i + P - k) / S in [0, O) with (i + P - k) % S
 * == 0: *k0, *k0 + S, ... (*nk of them), in ascending order. */
static void poet_gi_taps(int32_t i, int32_t P, int32_t S, int32_t K, int32_t O, int32_t *k0, int32_t *nk)
{
    const int32_t t = i + P, lo = poet_max32(0, t - (O - 1) * S), hi = poet_min32(K - 1, t);
    *k0 = 0;
    *nk = 0;
    if (lo > hi) return;
    const int32_t first = lo + (t - lo) % S;
    if (first > hi) return;
    *k0 = first;
    *nk = (hi - first) / S + 1;
}

/* R input channels of one sample: dyg the first of the nm output-gradient channels they sum (g->OHW apart),
 * wc the first input channel's weights of that output channel, dx0 its dX plane and i0 its starting values
 * (P) or NULL. */
POET_ALWAYS_INLINE void poet_gi_rows(const poet_cgeo *g, const float *dyg, const float *wc, float *dx0,
                                     const float *i0, int32_t nm, const int R, const int SWC, const int KWC,
                                     const int PW)
{
    const float *ib = i0 ? i0 : dx0; /* read only with hinit */
    poet_blk b;
    b.hinit = i0 != NULL;
    b.init = ib;
    b.nk1 = nm;
    b.vk1 = g->OHW;
    b.vk2 = -g->OW;
    b.vp = 1;
    b.wr = g->KK;
    b.wk1 = g->Cg * g->KK;
    b.wk2 = g->SH * g->KW;
    b.wk3 = g->SW;
    b.bias = NULL;
    b.yr = g->IHW;
    b.yp = g->SW;
    if (PW) {
        b.nk2 = 1;
        b.nk3 = 1;
        b.v = dyg;
        b.w = wc;
        b.y = dx0;
        b.init = ib;
#if defined(POET_CONV_ASM)
        if (R == 4 && nm > 0) {
            poet_run_pw_asm(&b, g->IHW, 1);
            return;
        }
#endif
        poet_run(&b, g->IHW, 1, 1, R, 1, 1, 1, -1, 1, 1, 0);
        return;
    }
    /* Stride 1: the rows [ra, rb) have every kernel row and the columns [qa, qb) every kernel column. The
     * border columns of those rows run as vertical runs (pixels one row apart: one kernel-column range),
     * not as one-pixel horizontal runs; every other pixel as below. */
    int32_t ra = 0, rb = 0, qa = 0, qb = g->IW;
    if ((SWC == 1 || (SWC == 0 && g->SW == 1)) && g->SH == 1) {
        ra = poet_max32(0, g->KH - 1 - g->PT);
        rb = poet_min32(g->IH, g->OH - g->PT);
        qa = poet_min32(g->IW, poet_max32(0, g->KW - 1 - g->PL));
        qb = poet_max32(qa, poet_min32(g->IW, g->OW - g->PL));
        if (ra >= rb || (qa == 0 && qb == g->IW)) {
            ra = rb = 0;
            qa = 0;
            qb = g->IW;
        }
    }
    for (int32_t iw = 0; iw < g->IW && ra < rb; ++iw) {
        if (iw == qa) iw = qb;
        if (iw >= g->IW) break;
        int32_t kw0, nkw;
        poet_gi_taps(iw, g->PL, 1, g->KW, g->OW, &kw0, &nkw);
        poet_blk c = b;
        c.nk2 = g->KH;
        c.nk3 = nkw;
        c.vp = g->OW;
        c.yp = g->IW;
        c.y = dx0 + ra * g->IW + iw;
        c.init = ib + ra * g->IW + iw;
        if (nkw > 0) {
            c.v = dyg + (ra + g->PT) * g->OW + iw + g->PL - kw0;
            c.w = wc + kw0;
        } else {
            c.v = dyg;
            c.w = wc;
            c.nk1 = 0;
        }
        poet_run(&c, rb - ra, g->OW, g->IW, R, 0, 0, 0, -1, 1, 0, 0);
    }
    for (int32_t ih = 0; ih < g->IH; ++ih) {
        int32_t kh0, nkh;
        poet_gi_taps(ih, g->PT, g->SH, g->KH, g->OH, &kh0, &nkh);
        b.nk2 = nkh;
        const int32_t oh0 = (ih + g->PT - kh0) / g->SH; /* dY row of the first tap */
        float *xrow = dx0 + ih * g->IW;
        const float *irow = ib + ih * g->IW;
        const int32_t split = ih >= ra && ih < rb; /* border columns done above */
        for (int32_t rho = 0; rho < g->SW && rho < g->IW; ++rho) {
            const int32_t nq = split ? qb : (g->IW - rho + g->SW - 1) / g->SW;
            int32_t q = split ? qa : 0;
            while (q < nq) {
                int32_t kw0, nkw, end = q + 1;
                const int32_t iw = rho + q * g->SW;
                poet_gi_taps(iw, g->PL, g->SW, g->KW, g->OW, &kw0, &nkw);
                for (;;) {
                    int32_t k, c;
                    if (end >= nq) break;
                    poet_gi_taps(rho + end * g->SW, g->PL, g->SW, g->KW, g->OW, &k, &c);
                    if (k != kw0 || c != nkw) break;
                    ++end;
                }
                b.y = xrow + iw;
                b.init = irow + iw;
                b.nk3 = nkw;
                if (nkh > 0 && nkw > 0) {
                    b.v = dyg + oh0 * g->OW + (iw + g->PL - kw0) / g->SW;
                    b.w = wc + kh0 * g->KW + kw0;
                } else {
                    b.v = dyg;
                    b.w = wc;
                    b.nk1 = 0;
                }
                /* taps step by SW along a row: WK3 = SWC (0: run time) */
                if (KWC == 1) /* strided 1x1: one tap (or none: nk1 = 0 writes zeros) */
                    poet_run(&b, end - q, 1, g->SW, R, 1, 1, 1, -1, SWC, 1, 0);
#if defined(POET_CONV_ASM)
                else if (KWC == 3 && SWC == 1 && nkw == 3 && nkh == 3 && g->SH == 1 && R == 4 && b.nk1 > 0)
                    poet_run_conv3_asm(&b, end - q, -1);
#endif
                else if (KWC == 3 && SWC == 1 && nkw == 3 && nkh == 3 && g->SH == 1 && R == 4)
                    poet_run(&b, end - q, 1, 1, R, 3, 3, 1, -1, 1, 9, 0);
                else if (KWC == 3 && SWC == 1 && nkw == 3)
                    poet_run(&b, end - q, 1, 1, R, 0, 3, 1, -1, 1, 9, 0);
                else if (KWC == 3 && nkw == 2 && R == 4)
                    poet_run(&b, end - q, 1, g->SW, R, 0, 2, 1, -1, SWC, 9, 0);
                else if (KWC == 3 && nkw == 1 && R == 4)
                    poet_run(&b, end - q, 1, g->SW, R, 0, 1, 1, -1, SWC, 9, 0);
                else if (KWC == 5 && SWC == 1 && nkw == 5 && g->KH == 5) /* 5x5: channels 25 apart */
                    poet_run(&b, end - q, 1, 1, R, 0, 5, 1, -1, 1, 25, 0);
                else if (KWC == 5 && SWC == 1 && nkw == 5) /* (1,5), (3,5), ...: KH * 5 apart (run time) */
                    poet_run(&b, end - q, 1, 1, R, 0, 5, 1, -1, 1, 0, 0);
                else
                    poet_run(&b, end - q, 1, g->SW, R, 0, 0, 1, -1, SWC, 0, 0);
                b.nk1 = nm;
                q = end;
            }
        }
    }
}

/* The tile's input channels [c_lo, c_hi) (dX and P hold those of each sample), summing the output channels
 * [m_lo, m_hi) of their group (dY holds those); the whole kernel: every channel. */
POET_ALWAYS_INLINE void poet_gi_all(const poet_cgeo *g, const poet_tile *t, const float *dY, const float *W, float *dX,
                                    const int SWC, const int KWC, const int PW)
{
    const int32_t Ct = t->c_hi - t->c_lo, Mt = t->m_hi - t->m_lo;
    for (int32_t n = 0; n < g->N; ++n) {
        for (int32_t grp = t->c_lo / g->Cg; grp * g->Cg < t->c_hi; ++grp) {
            int32_t c = poet_max32(t->c_lo, grp * g->Cg);
            const int32_t cend = poet_min32(t->c_hi, (grp + 1) * g->Cg);
            const int32_t ma = poet_max32(t->m_lo, grp * g->Mg);
            const int32_t nm = poet_max32(0, poet_min32(t->m_hi, (grp + 1) * g->Mg) - ma);
            /* no output channel of this group in the tile: nothing is read (dX is P or 0) */
            const float *dyg = nm > 0 ? dY + (n * Mt + ma - t->m_lo) * g->OHW : dY;
            const int32_t wm = nm > 0 ? ma : grp * g->Mg;
#define POET_GI_ROWS(R) \
    do { \
        const int32_t o_ = (n * Ct + c - t->c_lo) * g->IHW; \
        poet_gi_rows(g, dyg, W + (wm * g->Cg + c - grp * g->Cg) * g->KK, dX + o_, t->P ? t->P + o_ : NULL, nm, R, \
                     SWC, KWC, PW); \
    } while (0)
            for (; c + 4 <= cend; c += 4) POET_GI_ROWS(4);
            if (cend - c >= 2) {
                POET_GI_ROWS(2);
                c += 2;
            }
            if (cend - c >= 1) POET_GI_ROWS(1);
#undef POET_GI_ROWS
        }
    }
}

/* 1x1, stride 1, no padding: dX[c, s] = sum over m of W[m, c] * dY[m, s] is the product Wᵀ·dY per sample
 * and group, which the fast GEMM (src/optimized/gemm.c, Aᵀ·B) computes in the reference order: m ascending
 * from +0.0f. */
POET_NOINLINE void poet_gi_pw(const poet_cgeo *g, const float *dY, const float *W, float *dX)
{
    for (int32_t n = 0; n < g->N; ++n)
        for (int32_t grp = 0; grp < g->G; ++grp)
            poet_gemm_f32(W + grp * g->Mg * g->Cg, dY + (n * g->M + grp * g->Mg) * g->OHW, NULL,
                          dX + (n * g->C + grp * g->Cg) * g->IHW, g->Cg, g->IHW, g->Mg, 1, 0, 1.0f, 0.0f, 0, 0);
}
#if defined(POET_CONV_ASM)
/* 1x1, stride 2, no padding, channel groups and output rows in multiples of 4, where the GEMM has
 * assembly blocks (poet_pw2_asm with 4 | Cg): dX[c, 2 oh, 2 ow] = sum over m of W[m, c] * dY[m, oh, ow] is
 * Wᵀ·dY per sample, group and output row, stored every other input column (poet_asm_tn_4x4_s2); every
 * other input position gets no product: +0.0f, as in the reference. Same order as the reference: m
 * ascending from +0.0f. */
POET_NOINLINE void poet_gi_pw_s2_tn(const poet_cgeo *g, const float *dY, const float *W, float *dX)
{
    const int32_t total = g->N * g->C * g->IHW;
    for (int32_t i = 0; i < total; ++i) dX[i] = 0.0f;
    poet_asm_out out = {{0.0f}, NULL, 4 * g->IHW, NULL, NULL, 0, 0};
    for (int32_t n = 0; n < g->N; ++n)
        for (int32_t grp = 0; grp < g->G; ++grp) {
            const float *Wg = W + grp * g->Mg * g->Cg, *dYg = dY + (n * g->M + grp * g->Mg) * g->OHW;
            for (int32_t c = 0; c < g->Cg; c += 4) {
                float *dXc = dX + (n * g->C + grp * g->Cg + c) * g->IHW;
                for (int32_t oh = 0; oh < g->OH; ++oh)
                    for (int32_t ow = 0; ow < g->OW; ow += 4) {
                        out.y = dXc + 2 * oh * g->IW + 2 * ow;
                        poet_asm_tn_4x4_s2(Wg + c, g->Cg, dYg + oh * g->OW + ow, g->OHW, g->Mg, &out);
                    }
            }
        }
}
#endif

POET_NOINLINE void poet_gi_pw_blk(const poet_cgeo *g, const poet_tile *t, const float *dY, const float *W, float *dX)
{
    poet_gi_all(g, t, dY, W, dX, 1, 1, 1);
}
POET_NOINLINE void poet_gi_pw_s2(const poet_cgeo *g, const poet_tile *t, const float *dY, const float *W, float *dX)
{
    poet_gi_all(g, t, dY, W, dX, 2, 1, 0);
}
POET_NOINLINE void poet_gi_k3_s1(const poet_cgeo *g, const poet_tile *t, const float *dY, const float *W, float *dX)
{
    poet_gi_all(g, t, dY, W, dX, 1, 3, 0);
}
POET_NOINLINE void poet_gi_k3_s2(const poet_cgeo *g, const poet_tile *t, const float *dY, const float *W, float *dX)
{
    poet_gi_all(g, t, dY, W, dX, 2, 3, 0);
}
POET_NOINLINE void poet_gi_k5_s1(const poet_cgeo *g, const poet_tile *t, const float *dY, const float *W, float *dX)
{
    poet_gi_all(g, t, dY, W, dX, 1, 5, 0);
}
POET_NOINLINE void poet_gi_any(const poet_cgeo *g, const poet_tile *t, const float *dY, const float *W, float *dX)
{
    poet_gi_all(g, t, dY, W, dX, 0, 0, 0);
}

/* the block-kernel paths of the input gradient for a tile (the whole conv: every path but the specialised
 * ones; pointwise: the part kernels only) */
static void poet_gi_tile(const poet_cgeo *g, const poet_tile *t, const float *dY, const float *W, float *dX)
{
    if (poet_pw1(g))
        poet_gi_pw_blk(g, t, dY, W, dX);
    else if (g->KH == 1 && g->KW == 1 && g->SW == 2)
        poet_gi_pw_s2(g, t, dY, W, dX);
    else if (g->SW == 1 && g->KW == 3 && g->KH == 3)
        poet_gi_k3_s1(g, t, dY, W, dX);
    else if (g->SW == 2 && g->KW == 3 && g->KH == 3)
        poet_gi_k3_s2(g, t, dY, W, dX);
    else if (g->SW == 1 && g->KW == 5)
        poet_gi_k5_s1(g, t, dY, W, dX);
    else
        poet_gi_any(g, t, dY, W, dX);
}

void poet_conv2d_grad_input_f32(const float *dY, const float *W, float *dX, const int32_t *geom)
{
    const poet_cgeo g = poet_conv_geo(geom);
    if (poet_dw3(&g, 1))
        poet_dw_gi_s1(&g, dY, W, dX);
    else if (poet_dw3(&g, 2) && poet_dw_gi2_common(&g) && g.OH == 3 && g.OW == 3 && g.IH == 6 && g.IW == 6)
        poet_dw_gi2_fast3(&g, dY, W, dX);
    else if (poet_dw3(&g, 2) && poet_dw_gi2_common(&g))
        poet_dw_gi2_fast(&g, dY, W, dX);
    else if (poet_dw3(&g, 2))
        poet_dw_gi_s2(&g, dY, W, dX);
    else if (poet_pw1(&g))
        poet_gi_pw(&g, dY, W, dX);
#if defined(POET_CONV_ASM)
    else if (poet_pw2_asm(&g, g.Cg))
        poet_gi_pw_s2_tn(&g, dY, W, dX);
#endif
    else {
        const poet_tile t = {0, g.C, 0, g.M, NULL};
        poet_gi_tile(&g, &t, dY, W, dX);
    }
}

/* ---- channel tiles (kernels.h) ------------------------------------------------------------------------
 * A tile without P whose channels are a whole convolution of their own is one: the whole kernel runs on that
 * geometry (every specialised path, the same instructions per MAC). Forward: the output channels a union of
 * groups and the input channels exactly theirs (depthwise tiles, grouped convs), or the output channels in
 * one group and the input channels all of that group (any output tile of G = 1). Input gradient: the same
 * with input and output channels swapped, or the input channels one whole group and the output channels
 * any part of it (the first tile of a chain over output channels). The sub-geometry is written to sub. Any
 * other tile runs the block kernels with the tile's channel ranges (poet_fwd_tile / poet_gi_tile), the
 * accumulators starting at P. */
static int32_t poet_part_groups(const poet_cgeo *g, const poet_tile *t, int grad)
{
    /* the channels summed (a) and those of the outputs (b), per group */
    const int32_t a_lo = grad ? t->m_lo : t->c_lo, a_hi = grad ? t->m_hi : t->c_hi, Ag = grad ? g->Mg : g->Cg;
    const int32_t b_lo = grad ? t->c_lo : t->m_lo, b_hi = grad ? t->c_hi : t->m_hi, Bg = grad ? g->Cg : g->Mg;
    if (t->P) return 0;
    if (b_lo % Bg == 0 && b_hi % Bg == 0 && a_lo == b_lo / Bg * Ag && a_hi == b_hi / Bg * Ag) return (b_hi - b_lo) / Bg;
    if (!grad && b_lo / Bg == (b_hi - 1) / Bg && a_lo == b_lo / Bg * Ag && a_hi == a_lo + Ag) return 1;
    if (grad && b_lo % Bg == 0 && b_hi == b_lo + Bg && a_lo / Ag == b_lo / Bg && (a_hi - 1) / Ag == b_lo / Bg)
        return 1;
    return 0;
}

/* geom with the tile's channel counts and G groups (a tile that poet_part_groups found a conv of its own) */
static void poet_part_geom(const int32_t *geom, const poet_tile *t, int32_t G, int32_t *sub)
{
    for (int32_t i = 0; i < POET_WIN_LEN; ++i) sub[i] = geom[i];
    sub[POET_WIN_C] = t->c_hi - t->c_lo;
    sub[POET_WIN_M] = t->m_hi - t->m_lo;
    sub[POET_WIN_G] = G;
}

void poet_conv2d_part_f32(const float *X, const float *W, const float *B, const float *P, float *Y,
                          const int32_t *geom, const int32_t *tl)
{
    const poet_cgeo g = poet_conv_geo(geom);
    const poet_tile t = {tl[0], tl[1], tl[2], tl[3], P};
    const int32_t G = poet_part_groups(&g, &t, 0);
    if (G > 0) { /* W rows from m_lo: [Mt, Cg, KH, KW] is the sub-conv's weight */
        int32_t sub[POET_WIN_LEN];
        poet_part_geom(geom, &t, G, sub);
        poet_conv2d_f32(X, W + t.m_lo * g.Cg * g.KK, B ? B + t.m_lo : NULL, Y, sub);
        return;
    }
    poet_fwd_tile(&g, &t, X, W, B, Y);
}

void poet_conv2d_grad_input_part_f32(const float *dY, const float *W, const float *P, float *dX,
                                     const int32_t *geom, const int32_t *tl)
{
    const poet_cgeo g = poet_conv_geo(geom);
    const poet_tile t = {tl[0], tl[1], tl[2], tl[3], P};
    const int32_t G = poet_part_groups(&g, &t, 1);
    if (G > 0) {
        int32_t sub[POET_WIN_LEN];
        poet_part_geom(geom, &t, G, sub);
        poet_conv2d_grad_input_f32(dY, W + t.m_lo * g.Cg * g.KK, dX, sub);
        return;
    }
    poet_gi_tile(&g, &t, dY, W, dX);
}

/* ---- weight gradient -------------------------------------------------------------------------------- */

/* valid output positions [*o0, *o0 + *no) of tap k along one axis: i = o * S - P + k in [0, I) */
static void poet_gw_span(int32_t k, int32_t P, int32_t S, int32_t I, int32_t O, int32_t *o0, int32_t *no)
{
    const int32_t a = P - k; /* o * S >= a */
    const int32_t lo = a <= 0 ? 0 : (a + S - 1) / S;
    const int32_t b = I - 1 + P - k; /* o * S <= b */
    const int32_t hi = b < 0 ? -1 : poet_min32(O - 1, b / S);
    *o0 = lo;
    *no = poet_max32(0, hi - lo + 1);
}

/* The accumulators of a block of R x NP outputs dW[base + r * rs + p * ps]: P's values there
 * or +0.0f; one test of P per block. */
POET_ALWAYS_INLINE void poet_gw_init(float acc[POET_MAX_R][POET_MAX_P], const float *P, int32_t base, int32_t rs,
                                     int32_t ps, const int R, const int NP)
{
    if (POET_UNLIKELY(P != NULL)) {
        P += base;
        POET_UNROLL for (int r = 0; r < R; ++r) POET_UNROLL for (int p = 0; p < NP; ++p) acc[r][p] = P[r * rs + p * ps];
    } else {
        POET_UNROLL for (int r = 0; r < R; ++r) POET_UNROLL for (int p = 0; p < NP; ++p) acc[r][p] = 0.0f;
    }
}

/* dW[m0 + r, c0 + p, kh, kw] for r < R, p < P: sum over n, oh, ow of dY[n, m0+r, oh, ow] * X[n, c, ih, iw]. */
POET_ALWAYS_INLINE void poet_gw_block(const poet_cgeo *g, const float *X, const float *dY, float *dW, int32_t m0,
                                      int32_t cg0, int32_t cl0, int32_t kh, int32_t kw, const int R, const int P,
                                      const int SWC)
{
    float acc[POET_MAX_R][POET_MAX_P];
    poet_gw_init(acc, POET_GEO_P(g), ((m0 * g->Cg + cl0) * g->KH + kh) * g->KW + kw, g->Cg * g->KK, g->KK, R, P);
    int32_t oh0, noh, ow0, now;
    poet_gw_span(kh, g->PT, g->SH, g->IH, g->OH, &oh0, &noh);
    poet_gw_span(kw, g->PL, g->SW, g->IW, g->OW, &ow0, &now);
    const int32_t sw = SWC ? SWC : g->SW;
    if (noh > 0 && now > 0) {
        for (int32_t n = 0; n < g->N; ++n) {
            const float *dyn = dY + (n * g->M + m0) * g->OHW + oh0 * g->OW + ow0;
            const float *xn = X + (n * g->C + cg0) * g->IHW + (oh0 * g->SH - g->PT + kh) * g->IW +
                              ow0 * g->SW - g->PL + kw;
            for (int32_t oh = 0; oh < noh; ++oh) {
                const float *dy[POET_MAX_R], *x[POET_MAX_P];
                POET_UNROLL for (int r = 0; r < R; ++r) dy[r] = dyn + r * g->OHW + oh * g->OW;
                POET_UNROLL for (int p = 0; p < P; ++p) x[p] = xn + p * g->IHW + oh * g->SH * g->IW;
                for (int32_t i = 0; i < now; ++i) {
                    float dv[POET_MAX_R];
                    POET_UNROLL for (int r = 0; r < R; ++r) dv[r] = dy[r][i];
                    POET_UNROLL for (int p = 0; p < P; ++p) {
                        const float xv = x[p][i * sw];
                        POET_UNROLL for (int r = 0; r < R; ++r) acc[r][p] += dv[r] * xv;
                    }
                }
            }
        }
    }
    POET_UNROLL for (int r = 0; r < R; ++r) POET_UNROLL for (int p = 0; p < P; ++p)
        dW[(((m0 + r) * g->Cg + cl0 + p) * g->KH + kh) * g->KW + kw] = acc[r][p];
}

POET_ALWAYS_INLINE void poet_gw_cols(const poet_cgeo *g, const float *X, const float *dY, float *dW, int32_t grp,
                                     int32_t m0, const int R, const int SWC)
{
    for (int32_t cl = 0; cl < g->Cg;) {
        const int32_t left = g->Cg - cl, cg0 = grp * g->Cg + cl;
        for (int32_t kh = 0; kh < g->KH; ++kh) {
            for (int32_t kw = 0; kw < g->KW; ++kw) {
                if (left >= 6) poet_gw_block(g, X, dY, dW, m0, cg0, cl, kh, kw, R, 6, SWC);
                else if (left >= 4) poet_gw_block(g, X, dY, dW, m0, cg0, cl, kh, kw, R, 4, SWC);
                else if (left >= 2) poet_gw_block(g, X, dY, dW, m0, cg0, cl, kh, kw, R, 2, SWC);
                else poet_gw_block(g, X, dY, dW, m0, cg0, cl, kh, kw, R, 1, SWC);
            }
        }
        cl += left >= 6 ? 6 : left >= 4 ? 4 : left >= 2 ? 2 : 1;
    }
}

POET_ALWAYS_INLINE void poet_gw_all(const poet_cgeo *g, const float *X, const float *dY, float *dW, const int SWC)
{
    for (int32_t grp = 0; grp < g->G; ++grp) {
        int32_t m = grp * g->Mg;
        const int32_t mend = m + g->Mg;
        for (; m + 4 <= mend; m += 4) poet_gw_cols(g, X, dY, dW, grp, m, 4, SWC);
        if (mend - m >= 2) {
            poet_gw_cols(g, X, dY, dW, grp, m, 2, SWC);
            m += 2;
        }
        if (mend - m >= 1) poet_gw_cols(g, X, dY, dW, grp, m, 1, SWC);
    }
}

/* 1x1, stride 1, no padding, one sample, from +0.0f: dW[m, c] = sum over s of dY[m, s] * X[c, s] is the
 * product dY·Xᵀ of two matrices per group, which the fast GEMM (src/optimized/gemm.c, A·Bᵀ: both operands
 * walked along s by post-incremented pointers) computes in the reference order: s ascending from +0.0f.
 * (From P, the part kernel in conv_part.c runs the part GEMM instead: conv.c calls no part GEMM.) */
POET_NOINLINE void poet_gw_pw(const poet_cgeo *g, const float *X, const float *dY, float *dW)
{
    for (int32_t grp = 0; grp < g->G; ++grp) {
        const float *a = dY + grp * g->Mg * g->OHW, *b = X + grp * g->Cg * g->IHW;
        poet_gemm_f32(a, b, NULL, dW + grp * g->Mg * g->Cg, g->Mg, g->Cg, g->IHW, 0, 1, 1.0f, 0.0f, 0, 0);
    }
}

POET_NOINLINE void poet_gw_s1(const poet_cgeo *g, const float *X, const float *dY, float *dW)
{
    poet_gw_all(g, X, dY, dW, 1);
}
POET_NOINLINE void poet_gw_any(const poet_cgeo *g, const float *X, const float *dY, float *dW)
{
    poet_gw_all(g, X, dY, dW, 0);
}

/* Few input channels per group (first layers): R output channels x the P = KW taps of one kernel row (c, kh)
 * instead of R x P input channels. Tap kw is valid for the output columns [a[kw], b[kw]); positions run
 * (n, oh, ow) ascending, the columns valid for every tap without tests, the few others testing each tap,
 * so every accumulator adds its positions in the reference order. Per position: R dY and P input loads. */
POET_ALWAYS_INLINE void poet_gw_taps(const poet_cgeo *g, const float *X, const float *dY, float *dW, int32_t m0,
                                     int32_t cg, int32_t cl, int32_t kh, const int R, const int P, const int SWC)
{
    float acc[POET_MAX_R][POET_MAX_P];
    poet_gw_init(acc, POET_GEO_P(g), ((m0 * g->Cg + cl) * g->KH + kh) * g->KW, g->Cg * g->KK, 1, R, P);
    const int32_t S = SWC ? SWC : g->SW;
    int32_t oh0, noh, a[POET_MAX_P], b[POET_MAX_P];
    poet_gw_span(kh, g->PT, g->SH, g->IH, g->OH, &oh0, &noh);
    int32_t lo = g->OW, hi = 0, ca = 0, cb = g->OW; /* union [lo, hi), common [ca, cb) */
    POET_UNROLL for (int p = 0; p < P; ++p) {
        int32_t o0, no;
        poet_gw_span(p, g->PL, S, g->IW, g->OW, &o0, &no);
        a[p] = o0;
        b[p] = o0 + no;
        if (no > 0) {
            lo = poet_min32(lo, a[p]);
            hi = poet_max32(hi, b[p]);
        }
        ca = poet_max32(ca, a[p]);
        cb = poet_min32(cb, b[p]);
    }
    if (cb < ca) cb = ca;
    for (int32_t n = 0; n < g->N && noh > 0 && lo < hi; ++n) {
        for (int32_t oh = oh0; oh < oh0 + noh; ++oh) {
            const float *dy = dY + (n * g->M + m0) * g->OHW + oh * g->OW;
            const float *x = X + (n * g->C + cg) * g->IHW + (oh * g->SH - g->PT + kh) * g->IW - g->PL;
            int32_t ow = lo;
            for (; ow < hi; ++ow) {
                if (ow == ca && ca < cb) {
                    for (; ow < cb; ++ow) {
                        float dv[POET_MAX_R];
                        POET_UNROLL for (int r = 0; r < R; ++r) dv[r] = dy[r * g->OHW + ow];
                        const float *xo = x + ow * S;
                        POET_UNROLL for (int p = 0; p < P; ++p) {
                            const float xv = xo[p];
                            POET_UNROLL for (int r = 0; r < R; ++r) acc[r][p] += dv[r] * xv;
                        }
                    }
                    if (ow >= hi) break;
                }
                float dv[POET_MAX_R];
                POET_UNROLL for (int r = 0; r < R; ++r) dv[r] = dy[r * g->OHW + ow];
                POET_UNROLL for (int p = 0; p < P; ++p) {
                    if (ow >= a[p] && ow < b[p]) {
                        const float xv = x[ow * S + p];
                        POET_UNROLL for (int r = 0; r < R; ++r) acc[r][p] += dv[r] * xv;
                    }
                }
            }
        }
    }
    POET_UNROLL for (int r = 0; r < R; ++r) POET_UNROLL for (int p = 0; p < P; ++p)
        dW[(((m0 + r) * g->Cg + cl) * g->KH + kh) * g->KW + p] = acc[r][p];
}

POET_ALWAYS_INLINE void poet_gw_taps_all(const poet_cgeo *g, const float *X, const float *dY, float *dW, const int P,
                                         const int SWC)
{
    for (int32_t grp = 0; grp < g->G; ++grp) {
        int32_t m = grp * g->Mg;
        const int32_t mend = m + g->Mg;
        while (m < mend) {
            const int32_t left = mend - m;
            for (int32_t cl = 0; cl < g->Cg; ++cl) {
                const int32_t cg = grp * g->Cg + cl;
                for (int32_t kh = 0; kh < g->KH; ++kh) {
                    if (left >= 4) poet_gw_taps(g, X, dY, dW, m, cg, cl, kh, 4, P, SWC);
                    else if (left >= 2) poet_gw_taps(g, X, dY, dW, m, cg, cl, kh, 2, P, SWC);
                    else poet_gw_taps(g, X, dY, dW, m, cg, cl, kh, 1, P, SWC);
                }
            }
            m += left >= 4 ? 4 : left >= 2 ? 2 : 1;
        }
    }
}

POET_NOINLINE void poet_gw_taps4(const poet_cgeo *g, const float *X, const float *dY, float *dW)
{
    poet_gw_taps_all(g, X, dY, dW, 4, 0);
}
POET_NOINLINE void poet_gw_taps5(const poet_cgeo *g, const float *X, const float *dY, float *dW)
{
    poet_gw_taps_all(g, X, dY, dW, 5, 0);
}

/* Both weight-gradient kernels: every path starts its accumulators at g.P (the _from kernel) or +0.0f
 * (NULL); the one-sample 1x1 product runs on the GEMM from +0.0f only (from P it is a 1x1 like any other). */
static void poet_grad_weight(const float *X, const float *dY, const float *P, float *dW, const int32_t *geom)
{
    poet_cgeo g = poet_conv_geo(geom);
    g.P = P;
    if (poet_dw3(&g, 1))
        poet_dw_gw_any(&g, X, dY, dW, 1);
    else if (poet_dw3(&g, 2))
        poet_dw_gw_any(&g, X, dY, dW, 2);
    else if (poet_pw1(&g) && g.N == 1 && !P) {
        poet_gw_pw(&g, X, dY, dW);
    } else if (poet_pw1(&g)) { /* 1x1: all pixels as one row */
        poet_cgeo f = g;
        f.IH = f.OH = 1;
        f.IW = f.OW = g.IHW;
        poet_gw_s1(&f, X, dY, dW);
    } else if (g.Cg <= 2 && g.KW == 5)
        poet_gw_taps5(&g, X, dY, dW);
    else if (g.Cg <= 2 && g.KW == 4)
        poet_gw_taps4(&g, X, dY, dW);
    else if (g.SW == 1)
        poet_gw_s1(&g, X, dY, dW);
    else
        poet_gw_any(&g, X, dY, dW);
}

void poet_conv2d_grad_weight_f32(const float *X, const float *dY, float *dW, const int32_t *geom)
{
    poet_grad_weight(X, dY, NULL, dW, geom);
}

void poet_conv2d_grad_weight_from_f32(const float *X, const float *dY, const float *P, float *dW,
                                      const int32_t *geom)
{
    poet_grad_weight(X, dY, P, dW, geom);
}

/* ---- bias gradient ---------------------------------------------------------------------------------- */

/* both channel-sum kernels: each accumulator starts at P[c] (the part kernel) or +0.0f (NULL) */
static void poet_channel_sum(const float *X, const float *P, float *Y, int32_t N, int32_t C, int32_t S)
{
    for (int32_t c = 0; c < C; ++c) {
        float acc = P ? P[c] : 0.0f;
        for (int32_t n = 0; n < N; ++n) {
            const float *x = X + (n * C + c) * S;
            int32_t s = 0;
            for (; s + 4 <= S; s += 4) {
                acc += x[s];
                acc += x[s + 1];
                acc += x[s + 2];
                acc += x[s + 3];
            }
            for (; s < S; ++s) acc += x[s];
        }
        Y[c] = acc;
    }
}

void poet_channel_sum_f32(const float *X, float *Y, int32_t N, int32_t C, int32_t S)
{
    poet_channel_sum(X, NULL, Y, N, C, S);
}

void poet_channel_sum_part_f32(const float *X, const float *P, float *Y, int32_t N, int32_t C, int32_t S)
{
    poet_channel_sum(X, P, Y, N, C, S);
}
