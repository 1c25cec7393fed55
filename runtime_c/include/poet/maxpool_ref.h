/* The reference MaxPool loops (2-D, strides, padding, dilation 1), shared by src/kernels/maxpool.c, the
 * oracle, and src/optimized/maxpool.c, which falls back to them for windows that reach the padding.
 * g[] is the window geometry (enum POET_WIN_* in kernels.h; M = C, G = 1). Windows are scanned in
 * row-major (kh, kw) order and padded taps are skipped; outputs in (n, c, oh, ow) order. */
#ifndef POET_MAXPOOL_REF_H
#define POET_MAXPOOL_REF_H

#include "poet/kernels.h"

/* Flat index ih * IW + iw of the first maximum of window (oh, ow) of plane x (ties -> first; -1 if
 * the window holds no input element, which the compiler rules out with pads < kernel). */
static inline int32_t poet_window_argmax(const float *x, const int32_t *g, int32_t oh, int32_t ow)
{
    const int32_t IH = g[POET_WIN_H], IW = g[POET_WIN_W], KH = g[POET_WIN_KH], KW = g[POET_WIN_KW];
    int32_t best = -1;
    for (int32_t kh = 0; kh < KH; ++kh) {
        const int32_t ih = oh * g[POET_WIN_SH] - g[POET_WIN_PT] + kh;
        if (ih < 0 || ih >= IH) continue;
        for (int32_t kw = 0; kw < KW; ++kw) {
            const int32_t iw = ow * g[POET_WIN_SW] - g[POET_WIN_PL] + kw;
            if (iw < 0 || iw >= IW) continue;
            if (best < 0 || x[ih * IW + iw] > x[best]) best = ih * IW + iw;
        }
    }
    return best;
}

static inline void poet_maxpool2d_ref(const float *X, float *Y, const int32_t *g)
{
    const int32_t NC = g[POET_WIN_N] * g[POET_WIN_C], HW = g[POET_WIN_H] * g[POET_WIN_W];
    const int32_t OH = g[POET_WIN_OH], OW = g[POET_WIN_OW];
    for (int32_t p = 0; p < NC; ++p) {
        const float *x = X + p * HW;
        for (int32_t oh = 0; oh < OH; ++oh) {
            for (int32_t ow = 0; ow < OW; ++ow) {
                const int32_t i = poet_window_argmax(x, g, oh, ow);
                Y[(p * OH + oh) * OW + ow] = i >= 0 ? x[i] : 0.0f;
            }
        }
    }
}

/* dX rows [r0, r1) of the H input rows (all: 0, H): dX holds only those rows; a window's maximum outside
 * them adds nothing here (a row part of the gradient, whose halo rows belong to a neighbouring part). */
static inline void poet_maxpool2d_grad_ref(const float *X, const float *dY, float *dX, const int32_t *g,
                                           int32_t r0, int32_t r1)
{
    const int32_t NC = g[POET_WIN_N] * g[POET_WIN_C], HW = g[POET_WIN_H] * g[POET_WIN_W];
    const int32_t OH = g[POET_WIN_OH], OW = g[POET_WIN_OW], IW = g[POET_WIN_W], RW = (r1 - r0) * IW;
    for (int32_t i = 0; i < NC * RW; ++i) dX[i] = 0.0f;
    for (int32_t p = 0; p < NC; ++p) {
        for (int32_t oh = 0; oh < OH; ++oh) {
            for (int32_t ow = 0; ow < OW; ++ow) {
                const int32_t i = poet_window_argmax(X + p * HW, g, oh, ow) - r0 * IW;
                if (i >= 0 && i < RW) dX[p * RW + i] += dY[(p * OH + oh) * OW + ow];
            }
        }
    }
}
#endif
