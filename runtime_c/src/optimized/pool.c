/* MaxPool, AveragePool (2-D, strides, padding, dilation 1), GlobalAveragePool and their gradients (same
 * symbols, signatures and results as src/kernels/pool.c). MaxPool and its gradient have a fast path for
 * windows that never reach the padding (every window tap inside the input): the window is scanned in the
 * reference's row-major (kh, kw) order with the same comparison (a later tap wins only when strictly
 * greater; ties and NaNs keep the earlier one), without per-tap bounds tests, 2x2 windows unrolled. The
 * gradient's fast path also needs non-overlapping windows (stride >= kernel): then every dX element gets at
 * most one addition, done as 0.0f + dY exactly as the reference's zero fill and +=. Everything else (and
 * the average pools) is the reference code. */
#include "poet/kernels.h"

/* Flat index ih * IW + iw of the first maximum of window (oh, ow) of plane x (ties -> first; -1 if
 * the window holds no input element, which the compiler rules out with pads < kernel). */
static int32_t window_argmax(const float *x, const int32_t *g, int32_t oh, int32_t ow)
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

/* Number of input elements (not padding) in window (oh, ow). */
static int32_t window_count(const int32_t *g, int32_t oh, int32_t ow)
{
    int32_t rows = 0, cols = 0;
    for (int32_t kh = 0; kh < g[POET_WIN_KH]; ++kh) {
        const int32_t ih = oh * g[POET_WIN_SH] - g[POET_WIN_PT] + kh;
        rows += ih >= 0 && ih < g[POET_WIN_H];
    }
    for (int32_t kw = 0; kw < g[POET_WIN_KW]; ++kw) {
        const int32_t iw = ow * g[POET_WIN_SW] - g[POET_WIN_PL] + kw;
        cols += iw >= 0 && iw < g[POET_WIN_W];
    }
    return rows * cols;
}

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
    for (int32_t p = 0; p < NC; ++p) {
        const float *x = X + p * HW;
        for (int32_t oh = 0; oh < OH; ++oh) {
            for (int32_t ow = 0; ow < OW; ++ow) {
                const int32_t i = window_argmax(x, g, oh, ow);
                Y[(p * OH + oh) * OW + ow] = i >= 0 ? x[i] : 0.0f;
            }
        }
    }
}

void poet_maxpool2d_grad_f32(const float *X, const float *dY, float *dX, const int32_t *g)
{
    const int32_t NC = g[POET_WIN_N] * g[POET_WIN_C], HW = g[POET_WIN_H] * g[POET_WIN_W];
    const int32_t OH = g[POET_WIN_OH], OW = g[POET_WIN_OW];
    for (int32_t i = 0; i < NC * HW; ++i) dX[i] = 0.0f;
    if (poet_pool_inside(g) && g[POET_WIN_SH] >= g[POET_WIN_KH] && g[POET_WIN_SW] >= g[POET_WIN_KW]) {
        const int32_t IW = g[POET_WIN_W], KH = g[POET_WIN_KH], KW = g[POET_WIN_KW];
        const int32_t SH = g[POET_WIN_SH], SW = g[POET_WIN_SW];
        const float zero = 0.0f;
        for (int32_t p = 0; p < NC; ++p) {
            const float *x = X + p * HW, *dy = dY + p * OH * OW;
            float *dx = dX + p * HW;
            for (int32_t oh = 0; oh < OH; ++oh) {
                int32_t o = oh * SH * IW;
                for (int32_t ow = 0; ow < OW; ++ow, o += SW) dx[poet_argmax_in(x, o, IW, KH, KW)] = zero + *dy++;
            }
        }
        return;
    }
    for (int32_t p = 0; p < NC; ++p) {
        for (int32_t oh = 0; oh < OH; ++oh) {
            for (int32_t ow = 0; ow < OW; ++ow) {
                const int32_t i = window_argmax(X + p * HW, g, oh, ow);
                if (i >= 0) dX[p * HW + i] += dY[(p * OH + oh) * OW + ow];
            }
        }
    }
}

void poet_avgpool2d_f32(const float *X, float *Y, const int32_t *g, int32_t count_include_pad)
{
    const int32_t NC = g[POET_WIN_N] * g[POET_WIN_C], IH = g[POET_WIN_H], IW = g[POET_WIN_W];
    const int32_t KH = g[POET_WIN_KH], KW = g[POET_WIN_KW], OH = g[POET_WIN_OH], OW = g[POET_WIN_OW];
    for (int32_t p = 0; p < NC; ++p) {
        const float *x = X + p * IH * IW;
        for (int32_t oh = 0; oh < OH; ++oh) {
            for (int32_t ow = 0; ow < OW; ++ow) {
                float acc = 0.0f;
                for (int32_t kh = 0; kh < KH; ++kh) {
                    const int32_t ih = oh * g[POET_WIN_SH] - g[POET_WIN_PT] + kh;
                    if (ih < 0 || ih >= IH) continue;
                    for (int32_t kw = 0; kw < KW; ++kw) {
                        const int32_t iw = ow * g[POET_WIN_SW] - g[POET_WIN_PL] + kw;
                        if (iw < 0 || iw >= IW) continue;
                        acc += x[ih * IW + iw];
                    }
                }
                const int32_t count = count_include_pad ? KH * KW : window_count(g, oh, ow);
                Y[(p * OH + oh) * OW + ow] = acc / (float)count;
            }
        }
    }
}

void poet_avgpool2d_grad_f32(const float *dY, float *dX, const int32_t *g, int32_t count_include_pad)
{
    const int32_t NC = g[POET_WIN_N] * g[POET_WIN_C], IH = g[POET_WIN_H], IW = g[POET_WIN_W];
    const int32_t KH = g[POET_WIN_KH], KW = g[POET_WIN_KW], OH = g[POET_WIN_OH], OW = g[POET_WIN_OW];
    for (int32_t i = 0; i < NC * IH * IW; ++i) dX[i] = 0.0f;
    for (int32_t p = 0; p < NC; ++p) {
        float *dx = dX + p * IH * IW;
        for (int32_t oh = 0; oh < OH; ++oh) {
            for (int32_t ow = 0; ow < OW; ++ow) {
                const int32_t count = count_include_pad ? KH * KW : window_count(g, oh, ow);
                const float d = dY[(p * OH + oh) * OW + ow] / (float)count;
                for (int32_t kh = 0; kh < KH; ++kh) {
                    const int32_t ih = oh * g[POET_WIN_SH] - g[POET_WIN_PT] + kh;
                    if (ih < 0 || ih >= IH) continue;
                    for (int32_t kw = 0; kw < KW; ++kw) {
                        const int32_t iw = ow * g[POET_WIN_SW] - g[POET_WIN_PL] + kw;
                        if (iw < 0 || iw >= IW) continue;
                        dx[ih * IW + iw] += d;
                    }
                }
            }
        }
    }
}

void poet_global_avgpool_f32(const float *X, float *Y, int32_t NC, int32_t S)
{
    for (int32_t p = 0; p < NC; ++p) {
        float acc = 0.0f;
        for (int32_t s = 0; s < S; ++s) acc += X[p * S + s];
        Y[p] = acc / (float)S;
    }
}

void poet_global_avgpool_grad_f32(const float *dY, float *dX, int32_t NC, int32_t S)
{
    for (int32_t p = 0; p < NC; ++p) {
        const float d = dY[p] / (float)S;
        for (int32_t s = 0; s < S; ++s) dX[p * S + s] = d;
    }
}
