/* Checks the row-tile kernels (poet_conv2d_grad_weight_part_f32, poet_channel_sum_part_f32) of the reference
 * (poet_ref_*) and the fast (poet_fast_*) kernel files, linked into one program with renamed symbols
 * (tests/test_grad_weight_part.py builds it; rows_cases.h holds batch-1 geometries and row tilings of dY):
 *   chain       a chain of part calls over the ascending row tiles [a, b) of dY, each on the rows of X its
 *               output rows read, as a window of its own (kernels.h), with P = the previous call's dW (NULL
 *               first), gives the bits of the whole reference poet_conv2d_grad_weight_f32, for both files;
 *   single      every tile's call, and the whole geometry's, with a random P and with P NULL: fast ==
 *               reference, bit for bit, for the part kernel and for the fast conv.c's own paths that it
 *               calls (poet_conv2d_grad_weight_from_f32, also on the 1x1 tiles the part kernel gives the part
 *               GEMM); and the whole fast kernel == the whole reference;
 *   sum_chain   poet_channel_sum_part_f32 chained over the row tiles of dY gives poet_channel_sum_f32(dY);
 *   sum_single  every tile's channel sum with a random P and with NULL: fast == reference;
 *   guard       no call writes past its output (the floats after it keep a NaN pattern).
 * Prints one line per case and a summary; compares floats as uint32. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "poet/kernels.h"
#include "rows_cases.h"
#include "util.h"

void poet_ref_conv2d_grad_weight_f32(const float *X, const float *dY, float *dW, const int32_t *g);
void poet_fast_conv2d_grad_weight_f32(const float *X, const float *dY, float *dW, const int32_t *g);
void poet_ref_conv2d_grad_weight_part_f32(const float *X, const float *dY, const float *P, float *dW,
                                          const int32_t *g);
void poet_fast_conv2d_grad_weight_part_f32(const float *X, const float *dY, const float *P, float *dW,
                                           const int32_t *g);
void poet_fast_conv2d_grad_weight_from_f32(const float *X, const float *dY, const float *P, float *dW,
                                           const int32_t *g);
void poet_ref_channel_sum_f32(const float *X, float *Y, int32_t N, int32_t C, int32_t S);
void poet_ref_channel_sum_part_f32(const float *X, const float *P, float *Y, int32_t N, int32_t C, int32_t S);
void poet_fast_channel_sum_part_f32(const float *X, const float *P, float *Y, int32_t N, int32_t C, int32_t S);

typedef void (*gw_part_fn)(const float *, const float *, const float *, float *, const int32_t *);
typedef void (*sum_part_fn)(const float *, const float *, float *, int32_t, int32_t, int32_t);

static float X[MAX_X], dY[MAX_Y], Xt[MAX_X], dYt[MAX_Y];
static float dWw[MAX_W], sums[MAX_M]; /* whole reference results */
static float Pr[MAX_W + MAX_M];       /* random starting values */
static float out[2][MAX_W + GUARD];   /* chain buffers (alternating); single calls: reference, fast */

/* The window geometry of dY's rows [a, b) (kernels.h); *lo: its first row of X. */
static void row_window(const int32_t *g, int32_t a, int32_t b, int32_t *w, int32_t *lo)
{
    const int32_t H = g[POET_WIN_H], SH = g[POET_WIN_SH], PT = g[POET_WIN_PT], KH = g[POET_WIN_KH];
    const int32_t top = a * SH - PT;
    int32_t hi = (b - 1) * SH - PT + KH;
    *lo = top > 0 ? top : 0;
    if (hi > H) hi = H;
    if (hi < *lo) hi = *lo;
    memcpy(w, g, POET_WIN_LEN * sizeof(int32_t));
    w[POET_WIN_H] = hi - *lo;
    w[POET_WIN_OH] = b - a;
    w[POET_WIN_PT] = *lo - top;
}

/* rows [lo, lo + rows) of each of the `planes` [H, W] planes of src, dense into dst */
static void take_rows(float *dst, const float *src, int32_t planes, int32_t H, int32_t W, int32_t lo, int32_t rows)
{
    for (int32_t p = 0; p < planes; ++p)
        memcpy(dst + p * rows * W, src + (p * H + lo) * W, (size_t)(rows * W) * 4);
}

static long calls;

/* the window of tile [a, b): its geometry in w, X's rows in Xt and dY's in dYt */
static void tile(const int32_t *g, int32_t a, int32_t b, int32_t *w)
{
    int32_t lo;
    row_window(g, a, b, w, &lo);
    take_rows(Xt, X, g[POET_WIN_N] * g[POET_WIN_C], g[POET_WIN_H], g[POET_WIN_W], lo, w[POET_WIN_H]);
    take_rows(dYt, dY, g[POET_WIN_N] * g[POET_WIN_M], g[POET_WIN_OH], g[POET_WIN_OW], a, b - a);
}

/* weight-gradient chain over the row tiles; returns the number of outputs that differ from the whole's */
static int32_t gw_chain(gw_part_fn f, const int32_t *g, const int32_t *rows, int32_t nrows, int32_t nw,
                        int32_t *guards)
{
    const float *prev = NULL;
    for (int32_t k = 0; k < nrows; ++k) {
        int32_t w[POET_WIN_LEN];
        float *dw = out[k % 2];
        tile(g, rows[k], rows[k + 1], w);
        set_guard(dw, nw);
        f(Xt, dYt, prev, dw, w);
        ++calls;
        *guards += guard_hit(dw, nw);
        prev = dw;
    }
    return diff(prev, dWw, nw);
}

/* channel-sum chain over the row tiles of dY */
static int32_t sum_chain(sum_part_fn f, const int32_t *g, const int32_t *rows, int32_t nrows, int32_t *guards)
{
    const int32_t M = g[POET_WIN_M], OW = g[POET_WIN_OW];
    const float *prev = NULL;
    for (int32_t k = 0; k < nrows; ++k) {
        int32_t w[POET_WIN_LEN];
        float *y = out[k % 2];
        tile(g, rows[k], rows[k + 1], w);
        set_guard(y, M);
        f(dYt, prev, y, g[POET_WIN_N], M, (rows[k + 1] - rows[k]) * OW);
        ++calls;
        *guards += guard_hit(y, M);
        prev = y;
    }
    return diff(prev, sums, M);
}

/* the reference and the fast weight-gradient part kernel, and the fast conv.c's weight gradient from P, on
 * geometry w, from P: bits that differ from the reference */
static int32_t gw_pair(const float *x, const float *dy, const float *P, const int32_t *w, int32_t nw,
                       int32_t *guards)
{
    set_guard(out[0], nw);
    set_guard(out[1], nw);
    poet_ref_conv2d_grad_weight_part_f32(x, dy, P, out[0], w);
    poet_fast_conv2d_grad_weight_part_f32(x, dy, P, out[1], w);
    *guards += guard_hit(out[0], nw) + guard_hit(out[1], nw);
    int32_t bad = diff(out[0], out[1], nw);
    set_guard(out[1], nw);
    poet_fast_conv2d_grad_weight_from_f32(x, dy, P, out[1], w);
    calls += 3;
    *guards += guard_hit(out[1], nw);
    return bad + diff(out[0], out[1], nw);
}

int main(void)
{
    long bad_cases = 0;
    calls = 0;
    for (int32_t i = 0; i < NCASES; ++i) {
        const int32_t *g = case_geom[i], *rows = case_rows[i], nrows = case_nrows[i];
        const int32_t N = g[POET_WIN_N], C = g[POET_WIN_C], M = g[POET_WIN_M], G = g[POET_WIN_G];
        const int32_t OS = g[POET_WIN_OH] * g[POET_WIN_OW], OW = g[POET_WIN_OW];
        const int32_t nw = M * (C / G) * g[POET_WIN_KH] * g[POET_WIN_KW];
        int32_t chain_ref = 0, chain_fast = 0, single = 0, sum_chain_bad = 0, sum_single = 0, guards = 0;
        rng = 0x9e3779b9u * (uint32_t)(i + 1);
        fill(X, N * C * g[POET_WIN_H] * g[POET_WIN_W]);
        fill(dY, N * M * OS);
        fill(Pr, nw > M ? nw : M);
        poet_ref_conv2d_grad_weight_f32(X, dY, dWw, g);
        poet_ref_channel_sum_f32(dY, sums, N, M, OS);
        set_guard(out[1], nw);
        poet_fast_conv2d_grad_weight_f32(X, dY, out[1], g);
        single += diff(out[1], dWw, nw);
        guards += guard_hit(out[1], nw);
        single += gw_pair(X, dY, Pr, g, nw, &guards) + gw_pair(X, dY, NULL, g, nw, &guards);
        chain_ref += gw_chain(poet_ref_conv2d_grad_weight_part_f32, g, rows, nrows, nw, &guards);
        chain_fast += gw_chain(poet_fast_conv2d_grad_weight_part_f32, g, rows, nrows, nw, &guards);
        sum_chain_bad += sum_chain(poet_ref_channel_sum_part_f32, g, rows, nrows, &guards);
        sum_chain_bad += sum_chain(poet_fast_channel_sum_part_f32, g, rows, nrows, &guards);
        for (int32_t k = 0; k < nrows; ++k) {
            int32_t w[POET_WIN_LEN];
            const int32_t S = (rows[k + 1] - rows[k]) * OW;
            tile(g, rows[k], rows[k + 1], w);
            single += gw_pair(Xt, dYt, Pr, w, nw, &guards) + gw_pair(Xt, dYt, NULL, w, nw, &guards);
            for (int32_t with = 0; with < 2; ++with) {
                const float *P = with ? Pr : NULL;
                set_guard(out[0], M);
                set_guard(out[1], M);
                poet_ref_channel_sum_part_f32(dYt, P, out[0], N, M, S);
                poet_fast_channel_sum_part_f32(dYt, P, out[1], N, M, S);
                calls += 2;
                sum_single += diff(out[0], out[1], M);
                guards += guard_hit(out[0], M) + guard_hit(out[1], M);
            }
        }
        const int ok = chain_ref == 0 && chain_fast == 0 && single == 0 && sum_chain_bad == 0 && sum_single == 0 &&
                       guards == 0;
        bad_cases += !ok;
        printf("case %ld %s chain_ref %ld chain_fast %ld single %ld sum_chain %ld sum_single %ld guards %ld\n",
               (long)i, ok ? "ok" : "FAIL", (long)chain_ref, (long)chain_fast, (long)single, (long)sum_chain_bad,
               (long)sum_single, (long)guards);
    }
    printf("checked %ld cases, %ld calls, %ld failed\n", (long)NCASES, calls, bad_cases);
    return bad_cases ? 1 : 0;
}
