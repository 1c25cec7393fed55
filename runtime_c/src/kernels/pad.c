/* Pad, mode "constant": Y (rank dims x_dims[d] + pads[d] + pads[rank + d]) is X surrounded by `value`.
 * Y is seen as planes of its last two axes (one row for a 1-D X); each output element is written once: the
 * constant, or a copied input element. */
#include "poet/bcast.h"
#include "poet/kernels.h"

static float *poet_fill(float *Y, int32_t n, float value)
{
    int32_t i = 0;
    for (; i + 4 <= n; i += 4) {
        Y[i] = value;
        Y[i + 1] = value;
        Y[i + 2] = value;
        Y[i + 3] = value;
    }
    for (; i < n; ++i) Y[i] = value;
    return Y + n;
}

static float *poet_copy_row(float *Y, const float *X, int32_t n)
{
    int32_t i = 0;
    for (; i + 4 <= n; i += 4) {
        const float a = X[i], b = X[i + 1], c = X[i + 2], d = X[i + 3];
        Y[i] = a;
        Y[i + 1] = b;
        Y[i + 2] = c;
        Y[i + 3] = d;
    }
    for (; i < n; ++i) Y[i] = X[i];
    return Y + n;
}

void poet_pad_f32(const float *X, float *Y, float value, int32_t rank, const int32_t *x_dims, const int32_t *pads)
{
    if (rank <= 0) { /* a scalar: nothing to pad */
        Y[0] = X[0];
        return;
    }
    const int32_t wa = rank - 1, ha = rank - 2; /* the row axis and (ha >= 0) the plane's other axis */
    const int32_t W = x_dims[wa], L = pads[wa], R = pads[rank + wa];
    const int32_t H = ha >= 0 ? x_dims[ha] : 1, T = ha >= 0 ? pads[ha] : 0, B = ha >= 0 ? pads[rank + ha] : 0;
    const int32_t ow = L + W + R;
    int32_t y_dims[POET_MAX_RANK], idx[POET_MAX_RANK] = {0}, planes = 1;
    for (int32_t d = 0; d < ha; ++d) {
        y_dims[d] = x_dims[d] + pads[d] + pads[rank + d];
        planes *= y_dims[d];
    }
    for (int32_t p = 0; p < planes; ++p) {
        int32_t inside = 1;
        for (int32_t d = 0; d < ha; ++d) inside &= idx[d] >= pads[d] && idx[d] < pads[d] + x_dims[d];
        if (!inside) {
            Y = poet_fill(Y, (T + H + B) * ow, value);
        } else {
            Y = poet_fill(Y, T * ow, value);
            for (int32_t h = 0; h < H; ++h, X += W) {
                Y = poet_fill(Y, L, value);
                Y = poet_copy_row(Y, X, W);
                Y = poet_fill(Y, R, value);
            }
            Y = poet_fill(Y, B * ow, value);
        }
        for (int32_t d = ha - 1; d >= 0; --d) { /* the next plane: odometer over the leading output dims */
            if (++idx[d] < y_dims[d]) break;
            idx[d] = 0;
        }
    }
}
