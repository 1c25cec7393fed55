/* Direct 2-D convolution (NCHW, groups incl. depthwise, strides, zero padding, dilation 1) and its
 * gradients; no im2col, no scratch. g[] is the window geometry (enum POET_WIN_* in kernels.h).
 * Summation orders (documented, fixed): forward over (c, kh, kw) then + bias; grad_input over
 * (m, kh, kw); grad_weight over (n, oh, ow); channel_sum over (n, s). Padded taps are skipped.
 * poet_conv2d_grad_weight_from_f32 (what the weight gradient's row-tile part kernel in conv_part.c runs) and
 * the _part variant of channel_sum (kernels.h) start each accumulator at P instead of +0.0f. */
#include <stddef.h>

#include "poet/kernels.h"

void poet_conv2d_f32(const float *X, const float *W, const float *B, float *Y, const int32_t *g)
{
    const int32_t N = g[POET_WIN_N], C = g[POET_WIN_C], IH = g[POET_WIN_H], IW = g[POET_WIN_W];
    const int32_t M = g[POET_WIN_M], KH = g[POET_WIN_KH], KW = g[POET_WIN_KW];
    const int32_t OH = g[POET_WIN_OH], OW = g[POET_WIN_OW], SH = g[POET_WIN_SH], SW = g[POET_WIN_SW];
    const int32_t PT = g[POET_WIN_PT], PL = g[POET_WIN_PL], G = g[POET_WIN_G];
    const int32_t Cg = C / G, Mg = M / G;
    for (int32_t n = 0; n < N; ++n) {
        for (int32_t m = 0; m < M; ++m) {
            const float *xg = X + (n * C + (m / Mg) * Cg) * IH * IW;
            const float *wm = W + m * Cg * KH * KW;
            float *y = Y + (n * M + m) * OH * OW;
            for (int32_t oh = 0; oh < OH; ++oh) {
                for (int32_t ow = 0; ow < OW; ++ow) {
                    float acc = 0.0f;
                    for (int32_t c = 0; c < Cg; ++c) {
                        const float *x = xg + c * IH * IW, *w = wm + c * KH * KW;
                        for (int32_t kh = 0; kh < KH; ++kh) {
                            const int32_t ih = oh * SH - PT + kh;
                            if (ih < 0 || ih >= IH) continue;
                            for (int32_t kw = 0; kw < KW; ++kw) {
                                const int32_t iw = ow * SW - PL + kw;
                                if (iw < 0 || iw >= IW) continue;
                                acc += x[ih * IW + iw] * w[kh * KW + kw];
                            }
                        }
                    }
                    y[oh * OW + ow] = B ? acc + B[m] : acc;
                }
            }
        }
    }
}

void poet_conv2d_grad_input_f32(const float *dY, const float *W, float *dX, const int32_t *g)
{
    const int32_t N = g[POET_WIN_N], C = g[POET_WIN_C], IH = g[POET_WIN_H], IW = g[POET_WIN_W];
    const int32_t M = g[POET_WIN_M], KH = g[POET_WIN_KH], KW = g[POET_WIN_KW];
    const int32_t OH = g[POET_WIN_OH], OW = g[POET_WIN_OW], SH = g[POET_WIN_SH], SW = g[POET_WIN_SW];
    const int32_t PT = g[POET_WIN_PT], PL = g[POET_WIN_PL], G = g[POET_WIN_G];
    const int32_t Cg = C / G, Mg = M / G;
    for (int32_t n = 0; n < N; ++n) {
        for (int32_t c = 0; c < C; ++c) {
            const int32_t m0 = (c / Cg) * Mg, cl = c % Cg;
            float *dx = dX + (n * C + c) * IH * IW;
            for (int32_t ih = 0; ih < IH; ++ih) {
                for (int32_t iw = 0; iw < IW; ++iw) {
                    float acc = 0.0f;
                    for (int32_t m = m0; m < m0 + Mg; ++m) {
                        const float *dy = dY + (n * M + m) * OH * OW, *w = W + (m * Cg + cl) * KH * KW;
                        for (int32_t kh = 0; kh < KH; ++kh) {
                            const int32_t th = ih + PT - kh; /* = oh * SH */
                            if (th < 0) break;
                            if (th % SH != 0 || th / SH >= OH) continue;
                            for (int32_t kw = 0; kw < KW; ++kw) {
                                const int32_t tw = iw + PL - kw; /* = ow * SW */
                                if (tw < 0) break;
                                if (tw % SW != 0 || tw / SW >= OW) continue;
                                acc += dy[(th / SH) * OW + tw / SW] * w[kh * KW + kw];
                            }
                        }
                    }
                    dx[ih * IW + iw] = acc;
                }
            }
        }
    }
}

/* Channel tiles (kernels.h): the same loops over the tile's outputs, the channel range of each output cut
 * to the tile, each accumulator starting at P (or +0.0f). */
void poet_conv2d_part_f32(const float *X, const float *W, const float *B, const float *P, float *Y,
                          const int32_t *g, const int32_t *t)
{
    const int32_t N = g[POET_WIN_N], C = g[POET_WIN_C], IH = g[POET_WIN_H], IW = g[POET_WIN_W];
    const int32_t M = g[POET_WIN_M], KH = g[POET_WIN_KH], KW = g[POET_WIN_KW];
    const int32_t OH = g[POET_WIN_OH], OW = g[POET_WIN_OW], SH = g[POET_WIN_SH], SW = g[POET_WIN_SW];
    const int32_t PT = g[POET_WIN_PT], PL = g[POET_WIN_PL], G = g[POET_WIN_G];
    const int32_t Cg = C / G, Mg = M / G;
    const int32_t c_lo = t[0], c_hi = t[1], m_lo = t[2], m_hi = t[3], Ct = c_hi - c_lo, Mt = m_hi - m_lo;
    for (int32_t n = 0; n < N; ++n) {
        for (int32_t m = m_lo; m < m_hi; ++m) {
            const int32_t gm = m / Mg;
            const int32_t ca = c_lo > gm * Cg ? c_lo : gm * Cg, cb = c_hi < (gm + 1) * Cg ? c_hi : (gm + 1) * Cg;
            const float *wm = W + m * Cg * KH * KW;
            const int32_t o = (n * Mt + m - m_lo) * OH * OW;
            for (int32_t oh = 0; oh < OH; ++oh) {
                for (int32_t ow = 0; ow < OW; ++ow) {
                    float acc = P ? P[o + oh * OW + ow] : 0.0f;
                    for (int32_t c = ca; c < cb; ++c) {
                        const float *x = X + (n * Ct + c - c_lo) * IH * IW, *w = wm + (c - gm * Cg) * KH * KW;
                        for (int32_t kh = 0; kh < KH; ++kh) {
                            const int32_t ih = oh * SH - PT + kh;
                            if (ih < 0 || ih >= IH) continue;
                            for (int32_t kw = 0; kw < KW; ++kw) {
                                const int32_t iw = ow * SW - PL + kw;
                                if (iw < 0 || iw >= IW) continue;
                                acc += x[ih * IW + iw] * w[kh * KW + kw];
                            }
                        }
                    }
                    Y[o + oh * OW + ow] = B ? acc + B[m] : acc;
                }
            }
        }
    }
}

void poet_conv2d_grad_input_part_f32(const float *dY, const float *W, const float *P, float *dX,
                                     const int32_t *g, const int32_t *t)
{
    const int32_t N = g[POET_WIN_N], C = g[POET_WIN_C], IH = g[POET_WIN_H], IW = g[POET_WIN_W];
    const int32_t M = g[POET_WIN_M], KH = g[POET_WIN_KH], KW = g[POET_WIN_KW];
    const int32_t OH = g[POET_WIN_OH], OW = g[POET_WIN_OW], SH = g[POET_WIN_SH], SW = g[POET_WIN_SW];
    const int32_t PT = g[POET_WIN_PT], PL = g[POET_WIN_PL], G = g[POET_WIN_G];
    const int32_t Cg = C / G, Mg = M / G;
    const int32_t c_lo = t[0], c_hi = t[1], m_lo = t[2], m_hi = t[3], Ct = c_hi - c_lo, Mt = m_hi - m_lo;
    for (int32_t n = 0; n < N; ++n) {
        for (int32_t c = c_lo; c < c_hi; ++c) {
            const int32_t grp = c / Cg, cl = c % Cg;
            const int32_t ma = m_lo > grp * Mg ? m_lo : grp * Mg, mb = m_hi < (grp + 1) * Mg ? m_hi : (grp + 1) * Mg;
            const int32_t o = (n * Ct + c - c_lo) * IH * IW;
            for (int32_t ih = 0; ih < IH; ++ih) {
                for (int32_t iw = 0; iw < IW; ++iw) {
                    float acc = P ? P[o + ih * IW + iw] : 0.0f;
                    for (int32_t m = ma; m < mb; ++m) {
                        const float *dy = dY + (n * Mt + m - m_lo) * OH * OW, *w = W + (m * Cg + cl) * KH * KW;
                        for (int32_t kh = 0; kh < KH; ++kh) {
                            const int32_t th = ih + PT - kh; /* = oh * SH */
                            if (th < 0) break;
                            if (th % SH != 0 || th / SH >= OH) continue;
                            for (int32_t kw = 0; kw < KW; ++kw) {
                                const int32_t tw = iw + PL - kw; /* = ow * SW */
                                if (tw < 0) break;
                                if (tw % SW != 0 || tw / SW >= OW) continue;
                                acc += dy[(th / SH) * OW + tw / SW] * w[kh * KW + kw];
                            }
                        }
                    }
                    dX[o + ih * IW + iw] = acc;
                }
            }
        }
    }
}

/* The weight gradient, each accumulator starting at P or +0.0f (P NULL). */
static void poet_grad_weight(const float *X, const float *dY, const float *P, float *dW, const int32_t *g)
{
    const int32_t N = g[POET_WIN_N], C = g[POET_WIN_C], IH = g[POET_WIN_H], IW = g[POET_WIN_W];
    const int32_t M = g[POET_WIN_M], KH = g[POET_WIN_KH], KW = g[POET_WIN_KW];
    const int32_t OH = g[POET_WIN_OH], OW = g[POET_WIN_OW], SH = g[POET_WIN_SH], SW = g[POET_WIN_SW];
    const int32_t PT = g[POET_WIN_PT], PL = g[POET_WIN_PL], G = g[POET_WIN_G];
    const int32_t Cg = C / G, Mg = M / G;
    for (int32_t m = 0; m < M; ++m) {
        const int32_t c0 = (m / Mg) * Cg;
        for (int32_t c = 0; c < Cg; ++c) {
            for (int32_t kh = 0; kh < KH; ++kh) {
                for (int32_t kw = 0; kw < KW; ++kw) {
                    const int32_t o = ((m * Cg + c) * KH + kh) * KW + kw;
                    float acc = P ? P[o] : 0.0f;
                    for (int32_t n = 0; n < N; ++n) {
                        const float *x = X + (n * C + c0 + c) * IH * IW, *dy = dY + (n * M + m) * OH * OW;
                        for (int32_t oh = 0; oh < OH; ++oh) {
                            const int32_t ih = oh * SH - PT + kh;
                            if (ih < 0 || ih >= IH) continue;
                            for (int32_t ow = 0; ow < OW; ++ow) {
                                const int32_t iw = ow * SW - PL + kw;
                                if (iw < 0 || iw >= IW) continue;
                                acc += dy[oh * OW + ow] * x[ih * IW + iw];
                            }
                        }
                    }
                    dW[o] = acc;
                }
            }
        }
    }
}

void poet_conv2d_grad_weight_f32(const float *X, const float *dY, float *dW, const int32_t *g)
{
    poet_grad_weight(X, dY, NULL, dW, g);
}

void poet_conv2d_grad_weight_from_f32(const float *X, const float *dY, const float *P, float *dW, const int32_t *g)
{
    poet_grad_weight(X, dY, P, dW, g);
}

static void poet_channel_sum(const float *X, const float *P, float *Y, int32_t N, int32_t C, int32_t S)
{
    for (int32_t c = 0; c < C; ++c) {
        float acc = P ? P[c] : 0.0f;
        for (int32_t n = 0; n < N; ++n) {
            const float *x = X + (n * C + c) * S;
            for (int32_t s = 0; s < S; ++s) acc += x[s];
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
