/* 1-bit masks (poet_edge/ops/mask.py): element i is bit i % 32 of word i / 32 of M (unused bits 0). The
 * mask lives in the float arena, so its words are read and written with memcpy (no float object is
 * accessed as an integer). */
#include <string.h>

#include "poet/kernels.h"

void poet_range_mask_f32(const float *Y, void *M, int32_t n, int32_t has_min, float min, int32_t has_max,
                         float max)
{
    unsigned char *out = (unsigned char *)M;
    for (int32_t w = 0; w * 32 < n; ++w) {
        const int32_t end = n - w * 32 < 32 ? n - w * 32 : 32;
        const float *y = Y + w * 32;
        uint32_t bits = 0;
        for (int32_t b = 0; b < end; ++b) {
            const int keep = (!has_min || y[b] > min) && (!has_max || y[b] < max);
            bits |= (uint32_t)keep << b;
        }
        memcpy(out + 4 * w, &bits, sizeof bits);
    }
}

void poet_mask_grad_f32(const void *M, const float *dY, float *dX, int32_t n)
{
    const unsigned char *in = (const unsigned char *)M;
    for (int32_t w = 0; w * 32 < n; ++w) {
        const int32_t end = n - w * 32 < 32 ? n - w * 32 : 32;
        uint32_t bits;
        memcpy(&bits, in + 4 * w, sizeof bits);
        for (int32_t b = 0; b < end; ++b) {
            const int32_t i = w * 32 + b;
            dX[i] = (bits >> b) & 1u ? dY[i] : 0.0f;
        }
    }
}
