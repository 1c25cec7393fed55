/* LSTM (ONNX gates i, o, f, c; no peepholes, input_forget = 0) forward, cell-state recomputation and
 * backpropagation through time. Layouts and `direction` as in gru.c: W[dirs][4H][in], R[dirs][4H][H],
 * B[dirs][8H], states [dirs][batch][H], Y and C[seq][dirs][batch][H]; NULL optional pointers read as zeros.
 * The forward needs no workspace: step s keeps c of step s-1 in the Y row it is about to write (unit j
 * reads its own c before writing its h), and writes its c into the next step's Y row. */
#include <stddef.h>

#include "poet/kernels.h"
#include "poet/rnn_ref.h"

typedef struct {
    float i, o, f, g;
} lstm_gates;

static lstm_gates gates(const float *W, const float *R, const float *B, const float *x, const float *h,
                        int32_t j, int32_t in, int32_t H)
{
    float a[4];
    for (int32_t k = 0; k < 4; ++k) {
        const int32_t row = k * H + j;
        a[k] = poet_rnn_dot(W + row * in, x, in) + (B ? B[row] : 0.0f) + (h ? poet_rnn_dot(R + row * H, h, H) : 0.0f) +
               (B ? B[4 * H + row] : 0.0f);
    }
    lstm_gates o = {poet_rnn_sigmoid(a[0]), poet_rnn_sigmoid(a[1]), poet_rnn_sigmoid(a[2]), poet_tanhf(a[3])};
    return o;
}

/* row b of direction d of a [*][dirs][batch][H] tensor at the time of step s (NULL before step 0 when
 * there is no initial state) */
static const float *prev_row(const float *T, const float *T0, int32_t s, int32_t seq, int32_t d, int32_t b,
                             int32_t batch, int32_t H, int32_t direction)
{
    const int32_t dirs = direction == 2 ? 2 : 1;
    if (s > 0) return T + ((poet_rnn_time(s - 1, seq, d, direction) * dirs + d) * batch + b) * H;
    return T0 ? T0 + (d * batch + b) * H : NULL;
}

void poet_lstm_f32(const float *X, const float *W, const float *R, const float *B, const float *H0,
                   const float *C0, float *Y, float *Yh, float *Yc, int32_t seq, int32_t batch, int32_t in,
                   int32_t H, int32_t direction)
{
    const int32_t dirs = direction == 2 ? 2 : 1, G = 4 * H;
    for (int32_t d = 0; d < dirs; ++d) {
        const float *Wd = W + d * G * in, *Rd = R + d * G * H, *Bd = B ? B + d * 2 * G : NULL;
        for (int32_t s = 0; s < seq; ++s) {
            const int32_t t = poet_rnn_time(s, seq, d, direction);
            const int32_t tn = s + 1 < seq ? poet_rnn_time(s + 1, seq, d, direction) : -1;
            for (int32_t b = 0; b < batch; ++b) {
                const float *x = X + (t * batch + b) * in;
                const float *hp = prev_row(Y, H0, s, seq, d, b, batch, H, direction);
                const float *c0 = C0 ? C0 + (d * batch + b) * H : NULL;
                float *y = Y + ((t * dirs + d) * batch + b) * H;
                float *cnext = tn >= 0 ? Y + ((tn * dirs + d) * batch + b) * H : Yc ? Yc + (d * batch + b) * H : NULL;
                for (int32_t j = 0; j < H; ++j) {
                    const lstm_gates g = gates(Wd, Rd, Bd, x, hp, j, in, H);
                    const float cp = s > 0 ? y[j] : c0 ? c0[j] : 0.0f;
                    const float c = g.f * cp + g.i * g.g;
                    y[j] = g.o * poet_tanhf(c);
                    if (cnext) cnext[j] = c;
                }
            }
        }
        const int32_t tl = poet_rnn_time(seq - 1, seq, d, direction);
        for (int32_t k = 0; Yh && k < batch * H; ++k) Yh[d * batch * H + k] = Y[(tl * dirs + d) * batch * H + k];
    }
}

void poet_lstm_states_f32(const float *X, const float *W, const float *R, const float *B, const float *H0,
                          const float *C0, const float *Y, float *C, int32_t seq, int32_t batch, int32_t in,
                          int32_t H, int32_t direction)
{
    const int32_t dirs = direction == 2 ? 2 : 1, G = 4 * H;
    for (int32_t d = 0; d < dirs; ++d) {
        const float *Wd = W + d * G * in, *Rd = R + d * G * H, *Bd = B ? B + d * 2 * G : NULL;
        for (int32_t s = 0; s < seq; ++s) {
            const int32_t t = poet_rnn_time(s, seq, d, direction);
            for (int32_t b = 0; b < batch; ++b) {
                const float *hp = prev_row(Y, H0, s, seq, d, b, batch, H, direction);
                const float *cp = prev_row(C, C0, s, seq, d, b, batch, H, direction);
                float *c = C + ((t * dirs + d) * batch + b) * H;
                for (int32_t j = 0; j < H; ++j) {
                    const lstm_gates g = gates(Wd, Rd, Bd, X + (t * batch + b) * in, hp, j, in, H);
                    c[j] = g.f * (cp ? cp[j] : 0.0f) + g.i * g.g;
                }
            }
        }
    }
}

static void zero(float *p, int32_t n)
{
    for (int32_t k = 0; k < n; ++k) p[k] = 0.0f;
}

typedef struct {
    const float *x, *hp, *cp, *ct, *dy;
} lstm_row;

/* One row's step of BPTT: ch / cc carry dL/dh and dL/dc; S[4H] receives the gate pre-activation grads. */
static void grad_row(const float *Wd, const float *Rd, const float *Bd, lstm_row r, float *ch, float *cc,
                     float *S, float *dWd, float *dRd, float *dBd, float *dx, int32_t in, int32_t H)
{
    for (int32_t j = 0; j < H; ++j) {
        const lstm_gates g = gates(Wd, Rd, Bd, r.x, r.hp, j, in, H);
        const float dh = ch[j] + (r.dy ? r.dy[j] : 0.0f), tc = poet_tanhf(r.ct[j]);
        const float dc = cc[j] + dh * g.o * (1.0f - tc * tc);
        S[j] = dc * g.g * g.i * (1.0f - g.i);
        S[H + j] = dh * tc * g.o * (1.0f - g.o);
        S[2 * H + j] = dc * (r.cp ? r.cp[j] : 0.0f) * g.f * (1.0f - g.f);
        S[3 * H + j] = dc * g.i * (1.0f - g.g * g.g);
        cc[j] = dc * g.f;
    }
    for (int32_t k = 0; k < 4 * H; ++k) {
        for (int32_t i = 0; i < in; ++i) dWd[k * in + i] += S[k] * r.x[i];
        for (int32_t i = 0; r.hp && i < H; ++i) dRd[k * H + i] += S[k] * r.hp[i];
        dBd[k] += S[k];
        dBd[4 * H + k] += S[k];
    }
    for (int32_t i = 0; dx && i < in; ++i) {
        float s = 0.0f;
        for (int32_t k = 0; k < 4 * H; ++k) s += S[k] * Wd[k * in + i];
        dx[i] += s;
    }
    for (int32_t j = 0; j < H; ++j) {
        float s = 0.0f;
        for (int32_t k = 0; k < 4 * H; ++k) s += S[k] * Rd[k * H + j];
        ch[j] = s;
    }
}

void poet_lstm_grad_f32(const float *X, const float *W, const float *R, const float *B, const float *H0,
                        const float *C0, const float *Y, const float *C, const float *dY, const float *dYh,
                        const float *dYc, float *dX, float *dW, float *dR, float *dB, float *dH0, float *dC0,
                        float *S, int32_t seq, int32_t batch, int32_t in, int32_t H, int32_t direction)
{
    const int32_t dirs = direction == 2 ? 2 : 1, G = 4 * H;
    if (dX) zero(dX, seq * batch * in);
    zero(dW, dirs * G * in);
    zero(dR, dirs * G * H);
    zero(dB, dirs * 2 * G);
    for (int32_t k = 0; k < dirs * batch * H; ++k) {
        dH0[k] = dYh ? dYh[k] : 0.0f;
        dC0[k] = dYc ? dYc[k] : 0.0f;
    }
    for (int32_t d = 0; d < dirs; ++d) {
        const float *Wd = W + d * G * in, *Rd = R + d * G * H, *Bd = B ? B + d * 2 * G : NULL;
        for (int32_t s = seq - 1; s >= 0; --s) {
            const int32_t t = poet_rnn_time(s, seq, d, direction);
            for (int32_t b = 0; b < batch; ++b) {
                const int32_t row = ((t * dirs + d) * batch + b) * H, st = (d * batch + b) * H;
                lstm_row r = {X + (t * batch + b) * in, prev_row(Y, H0, s, seq, d, b, batch, H, direction),
                              prev_row(C, C0, s, seq, d, b, batch, H, direction), C + row, dY ? dY + row : NULL};
                grad_row(Wd, Rd, Bd, r, dH0 + st, dC0 + st, S, dW + d * G * in, dR + d * G * H, dB + d * 2 * G,
                         dX ? dX + (t * batch + b) * in : NULL, in, H);
            }
        }
    }
}
