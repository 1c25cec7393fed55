/* poet-edge reference kernels: forward and backward of every op, losses and the optimizer.
 * Pure functions over caller-provided buffers: no malloc, no globals, no I/O. float32, row-major. */
#ifndef POET_KERNELS_H
#define POET_KERNELS_H

#include <stdint.h>

/* Deterministic math (same bits on every C99 target with -ffp-contract=off). */
float poet_expf(float x);
float poet_logf(float x);
/* Max error vs the exact value, over every finite float (exhaustive test against double libm):
 * expf 1.23 ulp (normal results), logf 1.97 ulp, tanhf 1.35 ulp, erff 1.22 ulp. */
float poet_tanhf(float x);
float poet_erff(float x);

/* Y[M,N] = alpha * op(A) op(B) + beta * C; op(X) = X or Xᵀ. C may be NULL; it is read as
 * C[i * c_rs + j * c_cs] (strides 0 on broadcast axes). */
void poet_gemm_f32(const float *A, const float *B, const float *C, float *Y, int32_t M, int32_t N, int32_t K,
                   int32_t transA, int32_t transB, float alpha, float beta, int32_t c_rs, int32_t c_cs);

/* Elementwise with broadcasting: Y has `rank` dims `dims`; A and B are read with element strides. */
void poet_add_f32(const float *A, const float *B, float *Y, int32_t rank, const int32_t *dims,
                  const int32_t *a_strides, const int32_t *b_strides);

void poet_relu_f32(const float *X, float *Y, int32_t n);
void poet_relu_grad_f32(const float *Y, const float *dY, float *dX, int32_t n);

void poet_copy_f32(const float *X, float *Y, int32_t n);

/* Y[n_out] = scale * sum of X over the axes where y_strides is 0 (X has `rank` dims `dims`). */
void poet_reduce_sum_to_f32(const float *X, float *Y, float scale, int32_t n_out, int32_t rank,
                            const int32_t *dims, const int32_t *y_strides);

/* Softmax cross-entropy, mean over the batch. loss is one float. */
void poet_softmax_xent_f32(const float *logits, const int32_t *labels, float *loss, int32_t N, int32_t C);
void poet_softmax_xent_grad_f32(const float *logits, const int32_t *labels, float *dlogits, int32_t N, int32_t C);

/* Mean squared error over n elements and its gradient 2 (y - t) / n. */
void poet_mse_f32(const float *y, const float *t, float *loss, int32_t n);
void poet_mse_grad_f32(const float *y, const float *t, float *dy, int32_t n);

/* p -= lr * g */
void poet_sgd_f32(float *p, const float *g, float lr, int32_t n);

/* torch.optim.SGD with momentum and weight decay, in place: d = g + weight_decay * p;
 * buf = momentum * buf + d; p -= lr * (nesterov ? d + momentum * buf : buf). buf NULL: p -= lr * d. */
void poet_sgd_momentum_f32(float *p, const float *g, float *buf, int32_t n, float lr, float momentum,
                           float weight_decay, int32_t nesterov);

/* torch.optim.Adam (decoupled 0) / AdamW (decoupled 1) at step t >= 1, in place on p, m (exp_avg) and v
 * (exp_avg_sq); bias corrections 1 - beta^t in double. */
void poet_adam_f32(float *p, const float *g, float *m, float *v, int32_t n, float lr, int32_t t, double beta1,
                   double beta2, double eps, double weight_decay, int32_t decoupled);

/* ---- CNN: Conv, BatchNormalization, Clip, MaxPool, AveragePool, GlobalAveragePool ---------------- */

/* Geometry of a 2-D window op (NCHW), one int32 array indexed by these names: input N, C, H, W;
 * output channels M (= C for pools); kernel KH, KW; output OH, OW; strides SH, SW; top/left padding
 * PT, PL (bottom/right padding is implied by OH, OW); groups G (1 for pools). Dilation is 1.
 * 1-D ops use H = KH = OH = SH = 1, PT = 0. */
enum {
    POET_WIN_N, POET_WIN_C, POET_WIN_H, POET_WIN_W, POET_WIN_M, POET_WIN_KH, POET_WIN_KW, POET_WIN_OH,
    POET_WIN_OW, POET_WIN_SH, POET_WIN_SW, POET_WIN_PT, POET_WIN_PL, POET_WIN_G, POET_WIN_LEN
};

/* Direct convolution: X[N,C,H,W], W[M,C/G,KH,KW], B[M] or NULL -> Y[N,M,OH,OW]; zero padding.
 * grad_input: dY, W -> dX[N,C,H,W]; grad_weight: X, dY -> dW[M,C/G,KH,KW]. No workspace. */
void poet_conv2d_f32(const float *X, const float *W, const float *B, float *Y, const int32_t *g);
void poet_conv2d_grad_input_f32(const float *dY, const float *W, float *dX, const int32_t *g);
void poet_conv2d_grad_weight_f32(const float *X, const float *dY, float *dW, const int32_t *g);
/* Channel tiles of a convolution (operator splitting): g is the geometry of the WHOLE conv, t = {c_lo, c_hi,
 * m_lo, m_hi} a tile of input channels [c_lo, c_hi) and output channels [m_lo, m_hi) (absolute indices,
 * 0 <= lo < hi <= C or M). Every tensor but W and B is dense over its tile's channels; W [M,C/G,KH,KW] and
 * B [M] are the whole conv's (B indexed by absolute m).
 * Forward: X [N, c_hi-c_lo, H, W], Y and P [N, m_hi-m_lo, OH, OW]. Each output of channel m (group
 * gm = m / (M/G)) starts at P's value at the same index (P NULL: +0.0f), adds the products of the input
 * channels [max(c_lo, gm*Cg), min(c_hi, (gm+1)*Cg)) (Cg = C/G) in the reference order (c, kh, kw) ascending,
 * padded taps skipped, then Y = acc + B[m] (B NULL: Y = acc). So a chain of calls over ascending c-tiles
 * that cover [0, C), each with P = the previous call's Y (NULL first) and B on the last call only, gives
 * the bits of poet_conv2d_f32's output channels [m_lo, m_hi). Depthwise (G = C = M) with c-tile = m-tile
 * is one call (P NULL, B given).
 * Grad-input: dY [N, m_hi-m_lo, OH, OW], dX and P [N, c_hi-c_lo, H, W]. Each dX[n, c] starts at P (or +0.0f)
 * and adds, in the reference order (m, kh, kw) ascending, the taps of the output channels in [m_lo, m_hi)
 * of c's group: a chain over ascending m-tiles gives poet_conv2d_grad_input_f32's channels [c_lo, c_hi).
 * An output whose channel range is empty is P (or +0.0f), plus B[m] in the forward. Y (dX) never aliases
 * P or an input. */
void poet_conv2d_part_f32(const float *X, const float *W, const float *B, const float *P, float *Y,
                          const int32_t *g, const int32_t *t);
void poet_conv2d_grad_input_part_f32(const float *dY, const float *W, const float *P, float *dX,
                                     const int32_t *g, const int32_t *t);
/* Operator splitting: Y[M,N] = alpha * (P + A[M,K] op(B)), op(B) = B[K,N] or (transB) B[N,K]ᵀ, each
 * accumulator starting at P[i, j] (P NULL: +0.0f) and adding the products for k ascending: chained over the
 * row blocks of a weight, the parts give poet_gemm_f32's input-gradient bits. Y never aliases an input. */
void poet_gemm_part_f32(const float *A, const float *B, const float *P, float *Y, int32_t M, int32_t N, int32_t K,
                        int32_t transB, float alpha);
/* Row tiles (operator splitting): poet_conv2d_grad_weight_f32 with every accumulator dW[m, c, kh, kw]
 * starting at P at the same index (P NULL: +0.0f) and then adding its products dY * X in the documented order
 * (n, oh, ow) ascending, padded positions skipped. dW never aliases P or an input. For N = 1 a chain of calls
 * over consecutive ranges [a, b) of dY's rows, each with P = the previous call's dW (NULL first), gives
 * poet_conv2d_grad_weight_f32's bits when each call gets dY's rows [a, b) and the rows [lo, hi) of X they read,
 * lo = max(0, a*SH - PT), hi = min(H, (b-1)*SH - PT + KH), as a window of its own: geometry H = hi - lo,
 * OH = b - a, PT = lo - (a*SH - PT) (the bottom padding implied), everything else the whole conv's. */
void poet_conv2d_grad_weight_part_f32(const float *X, const float *dY, const float *P, float *dW,
                                      const int32_t *g);
/* poet_conv2d_grad_weight_part_f32's results, computed by conv.c alone: the part kernel (conv_part.c) calls it
 * for every tile but the one-sample 1x1 ones, which it gives the part GEMM, so no whole convolution kernel
 * calls the part GEMM and a project without row tiles does not link it. */
void poet_conv2d_grad_weight_from_f32(const float *X, const float *dY, const float *P, float *dW,
                                      const int32_t *g);
/* Y[c] = sum over n and s of X[N,C,S] (bias gradient of Conv and BatchNormalization). The part kernel's
 * accumulator starts at P[c] (P NULL: +0.0f) and adds (n, s) ascending: chained over consecutive ranges of
 * rows (N = 1) or of samples, with P = the previous call's Y, the parts give poet_channel_sum_f32's bits.
 * Y never aliases P. */
void poet_channel_sum_f32(const float *X, float *Y, int32_t N, int32_t C, int32_t S);
void poet_channel_sum_part_f32(const float *X, const float *P, float *Y, int32_t N, int32_t C, int32_t S);

/* BatchNormalization with frozen statistics over X[N,C,S]: Y = (X - mean) * (scale / sqrtf(var + eps)) + bias;
 * grad_input: dX = dY * scale / sqrtf(var + eps); grad_scale: dscale = sum(dY * (X - mean)) / sqrtf(var + eps). */
void poet_batchnorm_f32(const float *X, const float *scale, const float *bias, const float *mean,
                        const float *var, float *Y, int32_t N, int32_t C, int32_t S, float eps);
void poet_batchnorm_grad_input_f32(const float *dY, const float *scale, const float *var, float *dX, int32_t N,
                                   int32_t C, int32_t S, float eps);
void poet_batchnorm_grad_scale_f32(const float *X, const float *dY, const float *mean, const float *var,
                                   float *dscale, int32_t N, int32_t C, int32_t S, float eps);
/* A row part of grad_scale (operator splitting): the sums start at P[c] (NULL: 0) and are divided only when
 * divide (the chain's last part), so a chain over ranges of rows gives the whole sums' bits at batch 1. */
void poet_batchnorm_grad_scale_part_f32(const float *X, const float *dY, const float *mean, const float *var,
                                        const float *P, float *dscale, int32_t N, int32_t C, int32_t S, float eps,
                                        int32_t divide);

/* Clip to [min, max]; a bound is used only if has_min / has_max. Gradient: dY where min < X < max. */
void poet_clip_f32(const float *X, float *Y, int32_t n, int32_t has_min, float min, int32_t has_max, float max);
void poet_clip_grad_f32(const float *X, const float *dY, float *dX, int32_t n, int32_t has_min, float min,
                        int32_t has_max, float max);

/* Pooling over padded windows (padding never contributes). MaxPool's gradient recomputes each window's
 * first maximum from X and adds dY there; AveragePool divides by KH*KW if count_include_pad, else by the
 * number of input elements in the window. GlobalAveragePool: X[NC,S] -> Y[NC]. */
void poet_maxpool2d_f32(const float *X, float *Y, const int32_t *g);
/* pool gradients write dX rows [r0, r1) of the H input rows only (0, H: all; a row part of operator splitting) */
void poet_maxpool2d_grad_f32(const float *X, const float *dY, float *dX, const int32_t *g, int32_t r0, int32_t r1);
void poet_avgpool2d_f32(const float *X, float *Y, const int32_t *g, int32_t count_include_pad);
void poet_avgpool2d_grad_f32(const float *dY, float *dX, const int32_t *g, int32_t count_include_pad, int32_t r0,
                             int32_t r1);
void poet_global_avgpool_f32(const float *X, float *Y, int32_t NC, int32_t S);
void poet_global_avgpool_grad_f32(const float *dY, float *dX, int32_t NC, int32_t S);
/* ---- end CNN ---------------------------------------------------------------------------------------- */

/* ---- transformer: Sub/Mul/Div, Sigmoid, Tanh, Erf, Gelu, Softmax, LayerNormalization, batched MatMul, ------
 * Transpose, Slice, Concat, Split, ReduceMean (reuses poet_reduce_sum_to_f32), Identity/Dropout (copy) ---- */

/* Y = A (op) B with broadcasting, like poet_add_f32; op is one of POET_BIN_*. */
enum { POET_BIN_ADD = 0, POET_BIN_SUB = 1, POET_BIN_MUL = 2, POET_BIN_DIV = 3 };
void poet_binary_f32(int32_t op, const float *A, const float *B, float *Y, int32_t rank, const int32_t *dims,
                     const int32_t *a_strides, const int32_t *b_strides);

/* Activations and their gradients: Sigmoid/Tanh gradients read Y, Erf/Gelu gradients read X. */
void poet_sigmoid_f32(const float *X, float *Y, int32_t n);
void poet_sigmoid_grad_f32(const float *Y, const float *dY, float *dX, int32_t n);
void poet_tanh_f32(const float *X, float *Y, int32_t n);
void poet_tanh_grad_f32(const float *Y, const float *dY, float *dX, int32_t n);
void poet_erf_f32(const float *X, float *Y, int32_t n);
void poet_erf_grad_f32(const float *X, const float *dY, float *dX, int32_t n);
void poet_gelu_f32(const float *X, float *Y, int32_t n, int32_t tanh_approx);
void poet_gelu_grad_f32(const float *X, const float *dY, float *dX, int32_t n, int32_t tanh_approx);

/* Softmax over the middle dim of X seen as [outer, n, inner]; gradient dX = Y (dY - sum(dY Y)). */
void poet_softmax_f32(const float *X, float *Y, int32_t outer, int32_t n, int32_t inner);
void poet_softmax_grad_f32(const float *Y, const float *dY, float *dX, int32_t outer, int32_t n, int32_t inner);

/* LayerNormalization of each of `outer` rows of n values; S, B and dS have n values, B may be NULL. */
void poet_layer_norm_f32(const float *X, const float *S, const float *B, float *Y, int32_t outer, int32_t n,
                         float eps);
void poet_layer_norm_grad_f32(const float *X, const float *S, const float *dY, float *dX, int32_t outer,
                              int32_t n, float eps);
void poet_layer_norm_scale_grad_f32(const float *X, const float *dY, float *dS, int32_t outer, int32_t n, float eps);

/* Batched Y[p] = op(A[p]) op(B[p]) (M x N each, contiguous) for every index p of the `rank` batch dims;
 * A and B advance by their element strides per batch dim (0 on broadcast dims). */
void poet_matmul_f32(const float *A, const float *B, float *Y, int32_t M, int32_t N, int32_t K, int32_t transA,
                     int32_t transB, int32_t rank, const int32_t *dims, const int32_t *a_strides,
                     const int32_t *b_strides);

/* Y (contiguous, `rank` dims) = scale * X[x_off + sum idx_d x_strides_d] (Transpose, Slice, broadcasts);
 * scatter: Y[n_y] = 0, then Y[y_off + sum idx_d y_strides_d] = X (the gradient of Slice). */
void poet_strided_copy_f32(const float *X, float *Y, float scale, int32_t x_off, int32_t rank, const int32_t *dims,
                           const int32_t *x_strides);
void poet_strided_scatter_f32(const float *X, float *Y, int32_t n_y, int32_t y_off, int32_t rank,
                              const int32_t *dims, const int32_t *y_strides);

/* Concat / Split of up to POET_MAX_PIECES pieces (unused ones NULL) along an axis: `outer` rows, piece p
 * holds lens[p] elements of each row. */
#define POET_MAX_PIECES 8
void poet_concat_f32(const float *X0, const float *X1, const float *X2, const float *X3, const float *X4,
                     const float *X5, const float *X6, const float *X7, float *Y, int32_t outer, int32_t n_in,
                     const int32_t *lens);
void poet_split_f32(const float *X, float *Y0, float *Y1, float *Y2, float *Y3, float *Y4, float *Y5, float *Y6,
                    float *Y7, int32_t outer, int32_t n_out, const int32_t *lens);
void poet_zeros_f32(float *Y, int32_t n);
/* ---- end transformer -------------------------------------------------------------------------------- */

/* ---- models users bring: HardSigmoid, HardSwish, Gather, Equal, Where ------------------------------------
 * (Expand is a strided copy, Squeeze/Unsqueeze a copy; booleans are float32 0/1 tensors.) */
/* HardSigmoid = clamp(alpha X + beta, 0, 1); HardSwish = X clamp(X + 3, 0, 6) / 6. Gradients read X. */
void poet_hardsigmoid_f32(const float *X, float *Y, int32_t n, float alpha, float beta);
void poet_hardsigmoid_grad_f32(const float *X, const float *dY, float *dX, int32_t n, float alpha, float beta);
void poet_hardswish_f32(const float *X, float *Y, int32_t n);
void poet_hardswish_grad_f32(const float *X, const float *dY, float *dX, int32_t n);
/* Gather along an axis: X seen as [outer, n_axis, inner], Y as [outer, n_idx, inner] with
 * Y[o, j, i] = X[o, idx[j], i] (idx already in [0, n_axis)). Gradient: dX = 0, then dX[o, idx[j], i] += dY[o, j, i]
 * in increasing (o, j, i) order (repeated indices add up in that fixed order). */
void poet_gather_f32(const float *X, float *Y, int32_t outer, int32_t n_axis, int32_t inner, int32_t n_idx,
                     const int32_t *idx);
void poet_gather_grad_f32(const float *dY, float *dX, int32_t outer, int32_t n_axis, int32_t inner, int32_t n_idx,
                          const int32_t *idx);
/* Equal: Y = (A == B) ? 1 : 0 with broadcasting, like poet_add_f32. */
void poet_equal_f32(const float *A, const float *B, float *Y, int32_t rank, const int32_t *dims,
                    const int32_t *a_strides, const int32_t *b_strides);
/* Where: Y = C != 0 ? X : Z with broadcasting over three operands. Gradient of one branch:
 * dB = (C != 0) == branch ? dY : 0 over the output shape (dY contiguous, C read with c_strides). */
void poet_where_f32(const float *C, const float *X, const float *Z, float *Y, int32_t rank, const int32_t *dims,
                    const int32_t *c_strides, const int32_t *x_strides, const int32_t *z_strides);
void poet_where_grad_f32(const float *C, const float *dY, float *dB, int32_t branch, int32_t rank,
                         const int32_t *dims, const int32_t *c_strides);
/* ---- end models users bring ------------------------------------------------------------------------- */
/* ---- models users bring (2): LeakyRelu, Pad, Resize / Upsample ------------------------------------------
 * (Pad's gradient PadGrad is Slice's strided copy, poet_strided_copy_f32.) */
/* LeakyRelu: Y = X > 0 ? X : X * alpha. Gradient: dX = T > 0 ? dY : dY * alpha (x = 0 gets alpha * dY, as
 * torch), T the output Y when alpha >= 0 (same sign test as X), else X. Both may run in place. */
void poet_leaky_relu_f32(const float *X, float *Y, int32_t n, float alpha);
void poet_leaky_relu_grad_f32(const float *T, const float *dY, float *dX, int32_t n, float alpha);
/* Pad, mode "constant": X has `rank` dims x_dims; pads = rank begins then rank ends (>= 0, ONNX order); Y
 * (x_dims[d] + begin + end per dim) is X surrounded by `value`. */
void poet_pad_f32(const float *X, float *Y, float value, int32_t rank, const int32_t *x_dims, const int32_t *pads);
/* Nearest upsampling by integer factors: X[planes][D][H][W] -> Y[planes][D*KD][H*KH][W*KW], each X element
 * repeated over a KD x KH x KW block. Gradient: dX = the sum of each block of dY, from +0.0f in the block's
 * row-major order. */
void poet_resize_nearest_f32(const float *X, float *Y, int32_t planes, int32_t D, int32_t H, int32_t W, int32_t KD,
                             int32_t KH, int32_t KW);
void poet_resize_nearest_grad_f32(const float *dY, float *dX, int32_t planes, int32_t D, int32_t H, int32_t W,
                                  int32_t KD, int32_t KH, int32_t KW);
/* ---- end models users bring (2) --------------------------------------------------------------------- */
/* ---- recurrent (gru.c, lstm.c) ---------------------------------------------------------------------- */
/* ONNX GRU (linear_before_reset = lbr, 1 or 0) / LSTM, layout 0: X[seq][batch][in], W[dirs][G*H][in],
 * R[dirs][G*H][H], B[dirs][2*G*H], states [dirs][batch][H], Y[seq][dirs][batch][H]; G = 3 (GRU) or 4 (LSTM);
 * direction 0 forward, 1 reverse, 2 bidirectional. NULL optional inputs read as zeros, NULL outputs are
 * skipped. The gradients recompute each step's gates (from X and Y; LSTM also from the cell states C of
 * poet_lstm_states_f32), carry dh (and dc) in dH0 (dC0), and use S[4H] as one row's scratch; dX may be
 * NULL (X needs no gradient). */
void poet_gru_f32(const float *X, const float *W, const float *R, const float *B, const float *H0, float *Y,
                  float *Yh, int32_t seq, int32_t batch, int32_t in, int32_t H, int32_t direction, int32_t lbr);
void poet_gru_grad_f32(const float *X, const float *W, const float *R, const float *B, const float *H0,
                       const float *Y, const float *dY, const float *dYh, float *dX, float *dW, float *dR,
                       float *dB, float *dH0, float *S, int32_t seq, int32_t batch, int32_t in, int32_t H,
                       int32_t direction, int32_t lbr);
void poet_lstm_f32(const float *X, const float *W, const float *R, const float *B, const float *H0,
                   const float *C0, float *Y, float *Yh, float *Yc, int32_t seq, int32_t batch, int32_t in,
                   int32_t H, int32_t direction);
void poet_lstm_states_f32(const float *X, const float *W, const float *R, const float *B, const float *H0,
                          const float *C0, const float *Y, float *C, int32_t seq, int32_t batch, int32_t in,
                          int32_t H, int32_t direction);
void poet_lstm_grad_f32(const float *X, const float *W, const float *R, const float *B, const float *H0,
                        const float *C0, const float *Y, const float *C, const float *dY, const float *dYh,
                        const float *dYc, float *dX, float *dW, float *dR, float *dB, float *dH0, float *dC0,
                        float *S, int32_t seq, int32_t batch, int32_t in, int32_t H, int32_t direction);
/* ---- end recurrent ---------------------------------------------------------------------------------- */

/* ---- training-graph rewrites (poet_edge/autodiff.py TrainingOptions) -------------------------------- */

/* Fused weight-gradient updates (src/kernels/fused.c): the gradient of W computed `tile` output channels
 * (convolution) or rows (GEMM) at a time into ws by the unfused gradient kernel, and each tile applied at
 * once by the optimizer's update kernel (kind POET_UPDATE_*; s0, s1: its state tensors or NULL). Same bits
 * as the gradient kernel followed by the update. The GEMM form computes alpha op(A) op(B) per batch (A, B
 * contiguous [batches] stacks) and, if `reduced`, sums the batches from +0.0f and multiplies by scale unless
 * it is 1 (ReduceSumTo). ws: tile * per-row floats (twice if reduced), plus K * tile for transA, plus (conv,
 * N > 1) N * tile * OH * OW. */
enum { POET_UPDATE_SGD = 0, POET_UPDATE_SGD_MOMENTUM = 1, POET_UPDATE_ADAM = 2 };
typedef struct {
    int32_t kind;
    float lr;
    int32_t t;
    float momentum;
    double weight_decay;
    int32_t nesterov;
    double beta1, beta2, eps;
    int32_t decoupled;
} poet_update;
void poet_conv2d_grad_weight_update_f32(const float *X, const float *dY, float *W, float *s0, float *s1,
                                        int32_t kind, float lr, int32_t t, float momentum, double weight_decay,
                                        int32_t nesterov, double beta1, double beta2, double eps,
                                        int32_t decoupled, float *ws, const int32_t *g, int32_t tile);
void poet_gemm_grad_update_f32(const float *A, const float *B, float *W, float *s0, float *s1, int32_t kind,
                               float lr, int32_t t, float momentum, double weight_decay, int32_t nesterov,
                               double beta1, double beta2, double eps, int32_t decoupled, float *ws, int32_t M,
                               int32_t N, int32_t K, int32_t transA, int32_t transB, float alpha, int32_t batches,
                               int32_t reduced, float scale, int32_t tile);

/* 1-bit masks (src/kernels/mask.c): M (uint32 words in the arena; element i is bit i % 32 of word i / 32)
 * = has_min ? Y > min : 1 and has_max ? Y < max : 1; dX = bit ? dY : 0.0f (dX may be dY). */
void poet_range_mask_f32(const float *Y, void *M, int32_t n, int32_t has_min, float min, int32_t has_max,
                         float max);
void poet_mask_grad_f32(const void *M, const float *dY, float *dX, int32_t n);

#endif
