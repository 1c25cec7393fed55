/* AveragePool (2-D, strides, padding, dilation 1), GlobalAveragePool and their gradients (MaxPool is
 * in maxpool.c). g[] is the window geometry (enum POET_WIN_* in kernels.h; M = C, G = 1). Windows are
 * scanned in row-major (kh, kw) order and padded taps are skipped; outputs in (n, c, oh, ow) order. */
#include "poet/kernels.h"

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

/* dX rows [r0, r1) of the IH input rows (all: 0, IH): dX holds only those rows (a row part). */
void poet_avgpool2d_grad_f32(const float *dY, float *dX, const int32_t *g, int32_t count_include_pad, int32_t r0,
                             int32_t r1)
{
    const int32_t NC = g[POET_WIN_N] * g[POET_WIN_C], IW = g[POET_WIN_W];
    const int32_t KH = g[POET_WIN_KH], KW = g[POET_WIN_KW], OH = g[POET_WIN_OH], OW = g[POET_WIN_OW];
    const int32_t RW = (r1 - r0) * IW;
    for (int32_t i = 0; i < NC * RW; ++i) dX[i] = 0.0f;
    for (int32_t p = 0; p < NC; ++p) {
        float *dx = dX + p * RW;
        for (int32_t oh = 0; oh < OH; ++oh) {
            for (int32_t ow = 0; ow < OW; ++ow) {
                const int32_t count = count_include_pad ? KH * KW : window_count(g, oh, ow);
                const float d = dY[(p * OH + oh) * OW + ow] / (float)count;
                for (int32_t kh = 0; kh < KH; ++kh) {
                    const int32_t ih = oh * g[POET_WIN_SH] - g[POET_WIN_PT] + kh;
                    if (ih < r0 || ih >= r1) continue;
                    for (int32_t kw = 0; kw < KW; ++kw) {
                        const int32_t iw = ow * g[POET_WIN_SW] - g[POET_WIN_PL] + kw;
                        if (iw < 0 || iw >= IW) continue;
                        dx[(ih - r0) * IW + iw] += d;
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
