/* The row-tile part kernel of the convolution's weight gradient (kernels.h): conv.c's weight gradient from
 * P, poet_conv2d_grad_weight_from_f32. A file of its own because the fast variant
 * (src/optimized/conv_part.c) also calls the part GEMM, which no whole convolution kernel needs. */
#include "poet/kernels.h"

void poet_conv2d_grad_weight_part_f32(const float *X, const float *dY, const float *P, float *dW, const int32_t *g)
{
    poet_conv2d_grad_weight_from_f32(X, dY, P, dW, g);
}
