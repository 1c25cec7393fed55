/* Fused weight-gradient updates (poet_edge/ops/fused.py): the optimizer step of a weight applied to each
 * tile of its gradient as soon as the tile is computed, so the whole gradient never exists.
 *
 * A tile (a few output channels of a convolution, a few rows of a GEMM) is computed into the workspace by
 * the unfused gradient kernel itself, called on the sub-problem (poet_conv2d_grad_weight_f32 with the
 * tile's channels as the geometry, poet_gemm_f32 on a row block): whichever variant is linked (reference or
 * fast), every dW element is summed in the same order as the unfused call, because each output of those
 * kernels depends only on its own products. The optimizer's own update kernel then runs on the tile (the
 * update is elementwise). So the parameters are bit-identical to the unfused step. Strided operands (the
 * columns of A a transposed row block reads, a tile's dY channels at batch > 1) are copied contiguous into
 * the workspace first: a copy of values, not a change of arithmetic. */
#include <stddef.h>

#include "poet/kernels.h"

static int32_t poet_min_i32(int32_t a, int32_t b) { return a < b ? a : b; }

/* the update of n elements of p at element offset off (state pointers advance with p) */
static void poet_update_tile(const poet_update *u, float *p, const float *g, float *s0, float *s1, int32_t off,
                             int32_t n)
{
    float *b0 = s0 ? s0 + off : NULL, *b1 = s1 ? s1 + off : NULL;
    if (u->kind == POET_UPDATE_SGD)
        poet_sgd_f32(p + off, g, u->lr, n);
    else if (u->kind == POET_UPDATE_SGD_MOMENTUM)
        poet_sgd_momentum_f32(p + off, g, b0, n, u->lr, u->momentum, (float)u->weight_decay, u->nesterov);
    else
        poet_adam_f32(p + off, g, b0, b1, n, u->lr, u->t, u->beta1, u->beta2, u->eps, u->weight_decay,
                      u->decoupled);
}

void poet_conv2d_grad_weight_update_f32(const float *X, const float *dY, float *W, float *s0, float *s1,
                                        int32_t kind, float lr, int32_t t, float momentum, double weight_decay,
                                        int32_t nesterov, double beta1, double beta2, double eps,
                                        int32_t decoupled, float *ws, const int32_t *g, int32_t tile)
{
    const poet_update u = {kind, lr, t, momentum, weight_decay, nesterov, beta1, beta2, eps, decoupled};
    const int32_t N = g[POET_WIN_N], C = g[POET_WIN_C], M = g[POET_WIN_M], G = g[POET_WIN_G];
    const int32_t IHW = g[POET_WIN_H] * g[POET_WIN_W], OHW = g[POET_WIN_OH] * g[POET_WIN_OW];
    const int32_t Cg = C / G, Mg = M / G, per = Cg * g[POET_WIN_KH] * g[POET_WIN_KW];
    int32_t sub[POET_WIN_LEN];
    for (int32_t i = 0; i < POET_WIN_LEN; ++i) sub[i] = g[i];
    float *dw = ws, *dy_copy = ws + tile * per;
    for (int32_t m0 = 0; m0 < M;) {
        int32_t mt, groups; /* output channels and groups of this call */
        if (Mg >= tile || G == 1) { /* channels of one group */
            mt = poet_min_i32(tile, (m0 / Mg + 1) * Mg - m0);
            groups = 1;
        } else { /* whole groups (depthwise) */
            groups = poet_min_i32(tile / Mg, (M - m0) / Mg);
            mt = groups * Mg;
        }
        sub[POET_WIN_M] = mt;
        sub[POET_WIN_G] = groups;
        sub[POET_WIN_C] = groups * Cg;
        const float *x = X + (m0 / Mg) * Cg * IHW, *dy = dY + m0 * OHW;
        if (N > 1) { /* G == 1 (ops/fused.py fuses no other): X whole, this tile's dY channels of each sample */
            for (int32_t n = 0; n < N; ++n)
                for (int32_t i = 0; i < mt * OHW; ++i) dy_copy[n * mt * OHW + i] = dY[(n * M + m0) * OHW + i];
            dy = dy_copy;
        }
        poet_conv2d_grad_weight_f32(x, dy, dw, sub);
        poet_update_tile(&u, W, dw, s0, s1, m0 * per, mt * per);
        m0 += mt;
    }
}

void poet_gemm_grad_update_f32(const float *A, const float *B, float *W, float *s0, float *s1, int32_t kind,
                               float lr, int32_t t, float momentum, double weight_decay, int32_t nesterov,
                               double beta1, double beta2, double eps, int32_t decoupled, float *ws, int32_t M,
                               int32_t N, int32_t K, int32_t transA, int32_t transB, float alpha, int32_t batches,
                               int32_t reduced, float scale, int32_t tile)
{
    const poet_update u = {kind, lr, t, momentum, weight_decay, nesterov, beta1, beta2, eps, decoupled};
    float *part = ws, *sum = ws + (reduced ? tile * N : 0), *a_copy = sum + tile * N;
    for (int32_t r0 = 0; r0 < M;) {
        const int32_t mt = poet_min_i32(tile, M - r0);
        if (reduced)
            for (int32_t i = 0; i < mt * N; ++i) sum[i] = 0.0f;
        for (int32_t p = 0; p < batches; ++p) {
            const float *a = A + p * M * K;
            if (transA) { /* op(A) = Aᵀ: rows r0.. of op(A) are columns of A, copied as a [K, mt] matrix */
                for (int32_t k = 0; k < K; ++k)
                    for (int32_t i = 0; i < mt; ++i) a_copy[k * mt + i] = a[k * M + r0 + i];
                a = a_copy;
            } else {
                a += r0 * K;
            }
            poet_gemm_f32(a, B + p * K * N, NULL, part, mt, N, K, transA, transB, alpha, 1.0f, 0, 0);
            if (reduced) /* ReduceSumTo's order: from +0.0f, batch ascending */
                for (int32_t i = 0; i < mt * N; ++i) sum[i] += part[i];
        }
        if (reduced && scale != 1.0f)
            for (int32_t i = 0; i < mt * N; ++i) sum[i] *= scale;
        poet_update_tile(&u, W, reduced ? sum : part, s0, s1, r0 * N, mt * N);
        r0 += mt;
    }
}
