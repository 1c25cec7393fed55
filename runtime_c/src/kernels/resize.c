/* Resize / Upsample, mode "nearest" by integer factors: X[planes][D][H][W] -> Y[planes][D*KD][H*KH][W*KW],
 * each X element repeated over a KD x KH x KW block. Gradient: each dX element is the sum of its block of dY,
 * added from +0.0f in the block's row-major order (kd, kh, kw): the first dY row of a dX row starts the sums,
 * each next one (in that order) adds its KW elements per dX element. */
#include "poet/kernels.h"

/* One output row: each of the W values of x repeated KW times. */
static void poet_repeat_row(const float *x, float *y, int32_t W, int32_t KW)
{
    if (KW == 1) {
        for (int32_t w = 0; w < W; ++w) y[w] = x[w];
    } else if (KW == 2) {
        for (int32_t w = 0; w < W; ++w, y += 2) {
            const float v = x[w];
            y[0] = v;
            y[1] = v;
        }
    } else {
        for (int32_t w = 0; w < W; ++w) {
            const float v = x[w];
            for (int32_t c = 0; c < KW; ++c) *y++ = v;
        }
    }
}

void poet_resize_nearest_f32(const float *X, float *Y, int32_t planes, int32_t D, int32_t H, int32_t W, int32_t KD,
                             int32_t KH, int32_t KW)
{
    const int32_t ow = W * KW;
    for (int32_t p = 0; p < planes * D; ++p) { /* one depth slice of one plane: KD copies of its rows */
        for (int32_t a = 0; a < KD; ++a) {
            const float *x = X + p * H * W;
            for (int32_t h = 0; h < H; ++h, x += W) {
                poet_repeat_row(x, Y, W, KW);
                for (int32_t b = 1; b < KH; ++b) { /* the same row again: a plain copy of the one just made */
                    const float *src = Y;
                    Y += ow;
                    int32_t i = 0;
                    for (; i + 4 <= ow; i += 4) {
                        const float s0 = src[i], s1 = src[i + 1], s2 = src[i + 2], s3 = src[i + 3];
                        Y[i] = s0;
                        Y[i + 1] = s1;
                        Y[i + 2] = s2;
                        Y[i + 3] = s3;
                    }
                    for (; i < ow; ++i) Y[i] = src[i];
                }
                Y += ow;
            }
        }
    }
}

/* The first dY row of a dX row: dx[w] = ((+0.0f + r[w*KW]) + r[w*KW + 1]) + ... (left to right). */
static void poet_start_row_blocks(const float *r, float *dx, int32_t W, int32_t KW)
{
    if (KW == 2) {
        for (int32_t w = 0; w < W; ++w, r += 2) dx[w] = (0.0f + r[0]) + r[1];
    } else {
        for (int32_t w = 0; w < W; ++w) {
            float acc = 0.0f;
            for (int32_t c = 0; c < KW; ++c) acc += *r++;
            dx[w] = acc;
        }
    }
}

/* A next dY row: dx[w] = ((dx[w] + r[w*KW]) + r[w*KW + 1]) + ... (left to right). */
static void poet_add_row_blocks(const float *r, float *dx, int32_t W, int32_t KW)
{
    if (KW == 2) {
        for (int32_t w = 0; w < W; ++w, r += 2) dx[w] = (dx[w] + r[0]) + r[1];
    } else {
        for (int32_t w = 0; w < W; ++w) {
            float acc = dx[w];
            for (int32_t c = 0; c < KW; ++c) acc += *r++;
            dx[w] = acc;
        }
    }
}

void poet_resize_nearest_grad_f32(const float *dY, float *dX, int32_t planes, int32_t D, int32_t H, int32_t W,
                                  int32_t KD, int32_t KH, int32_t KW)
{
    const int32_t ow = W * KW, oh = H * KH; /* a dY row's floats, a dY depth slice's rows */
    for (int32_t p = 0; p < planes * D; ++p, dY += KD * oh * ow) {
        for (int32_t h = 0; h < H; ++h, dX += W) {
            poet_start_row_blocks(dY + h * KH * ow, dX, W, KW);
            for (int32_t a = 0; a < KD; ++a) {
                const float *r = dY + (a * oh + h * KH) * ow;
                for (int32_t b = a == 0 ? 1 : 0; b < KH; ++b) poet_add_row_blocks(r + b * ow, dX, W, KW);
            }
        }
    }
}
