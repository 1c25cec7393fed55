/* Clip (ReLU6 = clip to [0, 6]); a bound applies only if its has_* flag is set. Gradient passes dY
 * where min < X < max (strictly), else 0. NaN passes through the forward unchanged. */
#include "poet/kernels.h"

void poet_clip_f32(const float *X, float *Y, int32_t n, int32_t has_min, float min, int32_t has_max, float max)
{
    for (int32_t i = 0; i < n; ++i) {
        float y = X[i];
        if (has_min && y < min) y = min;
        if (has_max && y > max) y = max;
        Y[i] = y;
    }
}

void poet_clip_grad_f32(const float *X, const float *dY, float *dX, int32_t n, int32_t has_min, float min,
                        int32_t has_max, float max)
{
    for (int32_t i = 0; i < n; ++i) {
        const int32_t keep = (!has_min || X[i] > min) && (!has_max || X[i] < max);
        dX[i] = keep ? dY[i] : 0.0f;
    }
}
