/* poet-edge reference kernels: forward and backward of every op, losses and the optimizer.
 * Pure functions over caller-provided buffers: no malloc, no globals, no I/O. float32, row-major. */
#ifndef POET_KERNELS_H
#define POET_KERNELS_H

#include <stdint.h>

/* Deterministic math (same bits on every C99 target with -ffp-contract=off). */
float poet_expf(float x);
float poet_logf(float x);

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

#endif
