/* The row-tile part kernel of the convolution's weight gradient (same symbol, signature and results as
 * src/kernels/conv_part.c; the contract is in kernels.h).
 *
 * A one-sample 1x1 stride-1 tile without padding from P is dW = P + dY·Xᵀ per group: the part GEMM
 * (poet_gemm_part_f32, src/optimized/gemm_part.c: A·Bᵀ, alpha 1 so y = acc) adds s ascending to P, the
 * reference order. Every other tile runs conv.c's paths from P (poet_conv2d_grad_weight_from_f32). It is a
 * file of its own so that conv.c, and with it every whole convolution kernel, calls no part GEMM: a project
 * whose convolutions have no row tiles links neither this file nor gemm_part.c. */
#include <stddef.h>

#include "poet/conv_geo.h"
#include "poet/kernels.h"

void poet_conv2d_grad_weight_part_f32(const float *X, const float *dY, const float *P, float *dW,
                                      const int32_t *geom)
{
    const poet_cgeo g = poet_conv_geo(geom);
    if (P == NULL || g.N != 1 || !poet_pw1(&g)) {
        poet_conv2d_grad_weight_from_f32(X, dY, P, dW, geom);
        return;
    }
    for (int32_t grp = 0; grp < g.G; ++grp) {
        const int32_t w = grp * g.Mg * g.Cg;
        poet_gemm_part_f32(dY + grp * g.Mg * g.OHW, X + grp * g.Cg * g.IHW, P + w, dW + w, g.Mg, g.Cg, g.IHW, 1, 1.0f);
    }
}
