/* MaxPool and its gradient (same symbols, signatures and results as src/kernels/maxpool.c), fast paths for
 * windows that never reach the padding (every window tap inside the input): the window is scanned in the
 * reference's row-major (kh, kw) order with the same comparison (a later tap wins only when strictly
 * greater; ties and NaNs keep the earlier one), without per-tap bounds tests, 2x2 windows unrolled. The
 * gradient's fast path also needs non-overlapping windows (stride >= kernel): then every dX element gets at
 * most one addition, done as 0.0f + dY exactly as the reference's zero fill and +=. Both gradients write only
 * dX rows [r0, r1) (a row part, whose other rows a neighbouring part writes). Other windows run the
 * reference loops (poet/maxpool_ref.h). */
#include "poet/maxpool_ref.h"

/* every window tap inside the input (no padding reached) */
static int poet_pool_inside(const int32_t *g)
{
    return g[POET_WIN_PT] == 0 && g[POET_WIN_PL] == 0 && g[POET_WIN_OH] >= 1 && g[POET_WIN_OW] >= 1 &&
           (g[POET_WIN_OH] - 1) * g[POET_WIN_SH] + g[POET_WIN_KH] <= g[POET_WIN_H] &&
           (g[POET_WIN_OW] - 1) * g[POET_WIN_SW] + g[POET_WIN_KW] <= g[POET_WIN_W];
}

/* offset (within the plane) of the first maximum of the window whose top-left tap is at x0 = x + o */
static inline int32_t poet_argmax_in(const float *x, int32_t o, int32_t IW, int32_t KH, int32_t KW)
{
    int32_t best = o;
    float bv = x[o];
    if (KH == 2 && KW == 2) {
        if (x[o + 1] > bv) {
            best = o + 1;
            bv = x[o + 1];
        }
        if (x[o + IW] > bv) {
            best = o + IW;
            bv = x[o + IW];
        }
        if (x[o + IW + 1] > bv) best = o + IW + 1;
        return best;
    }
    for (int32_t kh = 0; kh < KH; ++kh) {
        for (int32_t kw = 0; kw < KW; ++kw) {
            const int32_t i = o + kh * IW + kw;
            if (x[i] > bv) {
                best = i;
                bv = x[i];
            }
        }
    }
    return best;
}

void poet_maxpool2d_f32(const float *X, float *Y, const int32_t *g)
{
    const int32_t NC = g[POET_WIN_N] * g[POET_WIN_C], HW = g[POET_WIN_H] * g[POET_WIN_W];
    const int32_t OH = g[POET_WIN_OH], OW = g[POET_WIN_OW];
    if (poet_pool_inside(g)) {
        const int32_t IW = g[POET_WIN_W], KH = g[POET_WIN_KH], KW = g[POET_WIN_KW];
        const int32_t SH = g[POET_WIN_SH], SW = g[POET_WIN_SW];
        for (int32_t p = 0; p < NC; ++p) {
            const float *x = X + p * HW;
            float *y = Y + p * OH * OW;
            for (int32_t oh = 0; oh < OH; ++oh) {
                int32_t o = oh * SH * IW;
                for (int32_t ow = 0; ow < OW; ++ow, o += SW) *y++ = x[poet_argmax_in(x, o, IW, KH, KW)];
            }
        }
        return;
    }
    poet_maxpool2d_ref(X, Y, g);
}

void poet_maxpool2d_grad_f32(const float *X, const float *dY, float *dX, const int32_t *g, int32_t r0,
                             int32_t r1)
{
    const int32_t NC = g[POET_WIN_N] * g[POET_WIN_C], HW = g[POET_WIN_H] * g[POET_WIN_W];
    const int32_t OH = g[POET_WIN_OH], OW = g[POET_WIN_OW];
    if (poet_pool_inside(g) && g[POET_WIN_SH] >= g[POET_WIN_KH] && g[POET_WIN_SW] >= g[POET_WIN_KW]) {
        const int32_t IW = g[POET_WIN_W], KH = g[POET_WIN_KH], KW = g[POET_WIN_KW];
        const int32_t SH = g[POET_WIN_SH], SW = g[POET_WIN_SW], lo = r0 * IW, hi = r1 * IW;
        for (int32_t i = 0; i < NC * (hi - lo); ++i) dX[i] = 0.0f;
        const float zero = 0.0f;
        for (int32_t p = 0; p < NC; ++p) {
            const float *x = X + p * HW, *dy = dY + p * OH * OW;
            float *dx = dX + p * (hi - lo); /* input element i of the plane: dx[i - lo], for i in [lo, hi) */
            for (int32_t oh = 0; oh < OH; ++oh) {
                int32_t o = oh * SH * IW;
                for (int32_t ow = 0; ow < OW; ++ow, o += SW, ++dy) {
                    const int32_t i = poet_argmax_in(x, o, IW, KH, KW);
                    if (i >= lo && i < hi) dx[i - lo] = zero + *dy;
                }
            }
        }
        return;
    }
    poet_maxpool2d_grad_ref(X, dY, dX, g, r0, r1);
}
