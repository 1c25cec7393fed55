/* GRU (ONNX gates z, r, h; linear_before_reset lbr = 1 as torch exports it, or 0) forward and its backpropagation through time.
 * Layout 0: X[seq][batch][in], W[dirs][3H][in], R[dirs][3H][H], B[dirs][6H] (Wb then Rb), states
 * [dirs][batch][H], Y[seq][dirs][batch][H]. direction: 0 forward, 1 reverse, 2 bidirectional (dirs = 2,
 * the second one reverse). Optional pointers may be NULL (zero bias, zero initial state, no gradient).
 * Every gate is computed per unit with scalar dot products: no workspace in the forward. */
#include <stddef.h>

#include "poet/kernels.h"
#include "poet/rnn_ref.h"

typedef struct {
    float z, r, hl, n;
} gru_gates;

/* gate r of unit k (pre-activation sums as in gates()) */
static float reset_gate(const float *W, const float *R, const float *B, const float *x, const float *h,
                        int32_t k, int32_t in, int32_t H)
{
    const float ax = poet_rnn_dot(W + (H + k) * in, x, in) + (B ? B[H + k] : 0.0f);
    return poet_rnn_sigmoid(ax + (h ? poet_rnn_dot(R + (H + k) * H, h, H) : 0.0f) + (B ? B[4 * H + k] : 0.0f));
}

/* Rh[j] . (r (.) h) without a buffer: every r_k evaluated again (the last step of a linear_before_reset=0
 * forward that has no spare row) */
static float rh_dot_slow(const float *W, const float *R, const float *B, const float *x, const float *h,
                         int32_t j, int32_t in, int32_t H)
{
    float s = 0.0f;
    for (int32_t k = 0; h && k < H; ++k) s += R[(2 * H + j) * H + k] * (reset_gate(W, R, B, x, h, k, in, H) * h[k]);
    return s;
}

/* gates of unit j for input row x and previous state h (NULL: zeros), with one direction's weights.
 * lbr = 1: hl = Rh h + Rbh, n = tanh(Wh x + Wbh + r hl). lbr = 0: hl = Rh (r (.) h) + Rbh with r (.) h
 * read from rh (NULL: evaluated again), n = tanh(Wh x + Wbh + hl). */
static gru_gates gates(const float *W, const float *R, const float *B, const float *x, const float *h,
                       const float *rh, int32_t j, int32_t in, int32_t H, int32_t lbr)
{
    float a[6];
    for (int32_t g = 0; g < 3; ++g) {
        a[g] = poet_rnn_dot(W + (g * H + j) * in, x, in) + (B ? B[g * H + j] : 0.0f);
        a[3 + g] = (g < 2 || lbr) && h ? poet_rnn_dot(R + (g * H + j) * H, h, H) : 0.0f;
        a[3 + g] += B ? B[(3 + g) * H + j] : 0.0f;
    }
    gru_gates o;
    o.z = poet_rnn_sigmoid(a[0] + a[3]);
    o.r = poet_rnn_sigmoid(a[1] + a[4]);
    if (lbr) {
        o.hl = a[5];
        o.n = poet_tanhf(a[2] + o.r * o.hl);
    } else {
        o.hl = (rh ? poet_rnn_dot(R + (2 * H + j) * H, rh, H) : rh_dot_slow(W, R, B, x, h, j, in, H)) + a[5];
        o.n = poet_tanhf(a[2] + o.hl);
    }
    return o;
}

/* rh[k] = r_k h_k for every unit (zeros without h) */
static void reset_times_h(const float *W, const float *R, const float *B, const float *x, const float *h, float *rh,
                          int32_t in, int32_t H)
{
    for (int32_t k = 0; k < H; ++k) rh[k] = h ? reset_gate(W, R, B, x, h, k, in, H) * h[k] : 0.0f;
}

/* the previous hidden state of step s (row b, direction d): Y of the previous step, else H0 or NULL */
static const float *prev_h(const float *Y, const float *H0, int32_t s, int32_t seq, int32_t d, int32_t b,
                           int32_t batch, int32_t H, int32_t direction)
{
    const int32_t dirs = direction == 2 ? 2 : 1;
    if (s > 0) return Y + ((poet_rnn_time(s - 1, seq, d, direction) * dirs + d) * batch + b) * H;
    return H0 ? H0 + (d * batch + b) * H : NULL;
}

void poet_gru_f32(const float *X, const float *W, const float *R, const float *B, const float *H0, float *Y,
                  float *Yh, int32_t seq, int32_t batch, int32_t in, int32_t H, int32_t direction, int32_t lbr)
{
    const int32_t dirs = direction == 2 ? 2 : 1, G = 3 * H;
    for (int32_t d = 0; d < dirs; ++d) {
        const float *Wd = W + d * G * in, *Rd = R + d * G * H, *Bd = B ? B + d * 2 * G : NULL;
        for (int32_t s = 0; s < seq; ++s) {
            const int32_t t = poet_rnn_time(s, seq, d, direction);
            for (int32_t b = 0; b < batch; ++b) {
                const float *x = X + (t * batch + b) * in;
                const float *hp = prev_h(Y, H0, s, seq, d, b, batch, H, direction);
                float *y = Y + ((t * dirs + d) * batch + b) * H;
                /* linear_before_reset = 0: r (.) h goes to a row not yet written (the next step's, else Y_h) */
                const int32_t tn = s + 1 < seq ? poet_rnn_time(s + 1, seq, d, direction) : -1;
                float *rh = lbr ? NULL : tn >= 0 ? Y + ((tn * dirs + d) * batch + b) * H : Yh ? Yh + (d * batch + b) * H : NULL;
                if (rh) reset_times_h(Wd, Rd, Bd, x, hp, rh, in, H);
                for (int32_t j = 0; j < H; ++j) {
                    const gru_gates g = gates(Wd, Rd, Bd, x, hp, rh, j, in, H, lbr);
                    y[j] = (1.0f - g.z) * g.n + g.z * (hp ? hp[j] : 0.0f);
                }
            }
        }
        const int32_t tl = poet_rnn_time(seq - 1, seq, d, direction);
        for (int32_t k = 0; Yh && k < batch * H; ++k) Yh[d * batch * H + k] = Y[(tl * dirs + d) * batch * H + k];
    }
}

static void zero(float *p, int32_t n)
{
    for (int32_t k = 0; k < n; ++k) p[k] = 0.0f;
}

/* One row's step of BPTT: c holds dL/dh (carried). S[4H] receives daz, dar, dan and the n rows' R-side
 * gradient dan*r (lbr = 1), or daz, dar, dan and r (.) h (lbr = 0). */
static void grad_row(const float *Wd, const float *Rd, const float *Bd, const float *x, const float *hp,
                     const float *dy, float *c, float *S, float *dWd, float *dRd, float *dBd, float *dx,
                     int32_t in, int32_t H, int32_t lbr)
{
    float *rh = lbr ? NULL : S + 3 * H;
    if (rh) reset_times_h(Wd, Rd, Bd, x, hp, rh, in, H);
    for (int32_t j = 0; j < H; ++j) {
        const gru_gates g = gates(Wd, Rd, Bd, x, hp, rh, j, in, H, lbr);
        const float dh = c[j] + (dy ? dy[j] : 0.0f), hj = hp ? hp[j] : 0.0f;
        const float dan = dh * (1.0f - g.z) * (1.0f - g.n * g.n);
        S[j] = dh * (hj - g.n) * g.z * (1.0f - g.z);
        S[H + j] = lbr ? dan * g.hl * g.r * (1.0f - g.r) : g.r; /* lbr = 0: r, until d(r (.) h) is known */
        S[2 * H + j] = dan;
        if (lbr) S[3 * H + j] = dan * g.r;
        c[j] = dh * g.z;
    }
    for (int32_t j = 0; !lbr && j < H; ++j) { /* d(r (.) h) = Rhᵀ dan */
        float drh = 0.0f;
        for (int32_t i = 0; i < H; ++i) drh += S[2 * H + i] * Rd[(2 * H + i) * H + j];
        const float r = S[H + j], hj = hp ? hp[j] : 0.0f;
        c[j] += drh * r;
        S[H + j] = drh * hj * r * (1.0f - r);
    }
    for (int32_t k = 0; k < 3 * H; ++k) {
        const float gw = S[k], gr = k < 2 * H || !lbr ? S[k] : S[k + H];
        const float *hk = k < 2 * H || lbr ? hp : rh;
        for (int32_t i = 0; i < in; ++i) dWd[k * in + i] += gw * x[i];
        for (int32_t i = 0; hk && i < H; ++i) dRd[k * H + i] += gr * hk[i];
        dBd[k] += gw;
        dBd[3 * H + k] += gr;
    }
    for (int32_t i = 0; dx && i < in; ++i) {
        float s = 0.0f;
        for (int32_t k = 0; k < 3 * H; ++k) s += S[k] * Wd[k * in + i];
        dx[i] += s;
    }
    const int32_t rows = lbr ? 3 * H : 2 * H; /* lbr = 0: the n rows reach h through r (.) h, done above */
    for (int32_t j = 0; j < H; ++j) {
        float s = 0.0f;
        for (int32_t k = 0; k < rows; ++k) s += (k < 2 * H ? S[k] : S[k + H]) * Rd[k * H + j];
        c[j] += s;
    }
}

void poet_gru_grad_f32(const float *X, const float *W, const float *R, const float *B, const float *H0,
                       const float *Y, const float *dY, const float *dYh, float *dX, float *dW, float *dR,
                       float *dB, float *dH0, float *S, int32_t seq, int32_t batch, int32_t in, int32_t H,
                       int32_t direction, int32_t lbr)
{
    const int32_t dirs = direction == 2 ? 2 : 1, G = 3 * H;
    if (dX) zero(dX, seq * batch * in);
    zero(dW, dirs * G * in);
    zero(dR, dirs * G * H);
    zero(dB, dirs * 2 * G);
    for (int32_t k = 0; k < dirs * batch * H; ++k) dH0[k] = dYh ? dYh[k] : 0.0f;
    for (int32_t d = 0; d < dirs; ++d) {
        const float *Wd = W + d * G * in, *Rd = R + d * G * H, *Bd = B ? B + d * 2 * G : NULL;
        for (int32_t s = seq - 1; s >= 0; --s) {
            const int32_t t = poet_rnn_time(s, seq, d, direction);
            for (int32_t b = 0; b < batch; ++b) {
                const int32_t row = (t * dirs + d) * batch + b;
                grad_row(Wd, Rd, Bd, X + (t * batch + b) * in, prev_h(Y, H0, s, seq, d, b, batch, H, direction),
                         dY ? dY + row * H : NULL, dH0 + (d * batch + b) * H, S, dW + d * G * in,
                         dR + d * G * H, dB + d * 2 * G, dX ? dX + (t * batch + b) * in : NULL, in, H, lbr);
            }
        }
    }
}
