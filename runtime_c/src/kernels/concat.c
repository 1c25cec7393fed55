#include "poet/kernels.h"

void poet_concat_f32(const float *X0, const float *X1, const float *X2, const float *X3, const float *X4,
                     const float *X5, const float *X6, const float *X7, float *Y, int32_t outer, int32_t n_in,
                     const int32_t *lens)
{
    const float *X[POET_MAX_PIECES] = {X0, X1, X2, X3, X4, X5, X6, X7};
    for (int32_t o = 0, at = 0; o < outer; ++o)
        for (int32_t p = 0; p < n_in; ++p)
            for (int32_t j = 0; j < lens[p]; ++j) Y[at++] = X[p][o * lens[p] + j];
}

void poet_split_f32(const float *X, float *Y0, float *Y1, float *Y2, float *Y3, float *Y4, float *Y5, float *Y6,
                    float *Y7, int32_t outer, int32_t n_out, const int32_t *lens)
{
    float *Y[POET_MAX_PIECES] = {Y0, Y1, Y2, Y3, Y4, Y5, Y6, Y7};
    for (int32_t o = 0, at = 0; o < outer; ++o)
        for (int32_t p = 0; p < n_out; ++p)
            for (int32_t j = 0; j < lens[p]; ++j) Y[p][o * lens[p] + j] = X[at++];
}
