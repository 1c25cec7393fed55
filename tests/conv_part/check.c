/* Checks the channel-tile conv kernels (poet_conv2d_part_f32, poet_conv2d_grad_input_part_f32) of the
 * reference (poet_ref_*) and the fast (poet_fast_*) kernel files, linked into one program with renamed
 * symbols (tests/test_conv_part_kernels.py builds it; cases.h holds the geometries and tilings):
 *   chain  a chain of part calls over ascending tiles of the summed channels gives the bits of the whole
 *          reference kernel's channels (forward: per m-tile, over the c-tiles, P = previous Y, B on the last
 *          call; input gradient: per c-tile, over the m-tiles), for both kernel files;
 *   single every (c-tile, m-tile) call with a random P and B: fast == reference, bit for bit;
 *   aligned depthwise tiles (c-tile = m-tile): one call with P NULL and B;
 *   guard  no call writes past its output (the floats after it keep a NaN pattern).
 * Prints one line per case and a summary; compares floats as uint32. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "poet/kernels.h"
#include "cases.h"
#include "util.h"

void poet_ref_conv2d_f32(const float *X, const float *W, const float *B, float *Y, const int32_t *g);
void poet_ref_conv2d_grad_input_f32(const float *dY, const float *W, float *dX, const int32_t *g);
void poet_ref_conv2d_part_f32(const float *X, const float *W, const float *B, const float *P, float *Y,
                              const int32_t *g, const int32_t *t);
void poet_ref_conv2d_grad_input_part_f32(const float *dY, const float *W, const float *P, float *dX,
                                         const int32_t *g, const int32_t *t);
void poet_fast_conv2d_part_f32(const float *X, const float *W, const float *B, const float *P, float *Y,
                               const int32_t *g, const int32_t *t);
void poet_fast_conv2d_grad_input_part_f32(const float *dY, const float *W, const float *P, float *dX,
                                          const int32_t *g, const int32_t *t);

typedef void (*part_fn)(const float *, const float *, const float *, const float *, float *, const int32_t *,
                        const int32_t *);
typedef void (*gi_part_fn)(const float *, const float *, const float *, float *, const int32_t *, const int32_t *);

static float X[MAX_X], W[MAX_W], B[MAX_B], dY[MAX_Y];
static float Yw[MAX_Y], dXw[MAX_X];                   /* whole reference results */
static float Xt[MAX_X], dYt[MAX_Y];                   /* a tile's input channels */
static float Pr[MAX_X + MAX_Y];                       /* random starting values */
static float out[3][MAX_X + MAX_Y + GUARD];           /* chain buffers (alternating) and a second result */

/* copy channels [lo, hi) of a [N, C, S] array into a dense [N, hi - lo, S] one */
static void take(float *dst, const float *src, int32_t N, int32_t C, int32_t S, int32_t lo, int32_t hi)
{
    for (int32_t n = 0; n < N; ++n) memcpy(dst + n * (hi - lo) * S, src + (n * C + lo) * S, (size_t)((hi - lo) * S) * 4);
}

/* number of elements of a dense [N, hi - lo, S] tile that differ from channels [lo, hi) of whole [N, C, S] */
static int32_t diff_tile(const float *tile, const float *whole, int32_t N, int32_t C, int32_t S, int32_t lo, int32_t hi)
{
    int32_t bad = 0;
    for (int32_t n = 0; n < N; ++n)
        for (int32_t i = 0; i < (hi - lo) * S; ++i)
            if (memcmp(&tile[n * (hi - lo) * S + i], &whole[(n * C + lo) * S + i], 4) != 0) ++bad;
    return bad;
}

static long calls;

/* forward chain over the c-tiles for the m-tile [m_lo, m_hi); returns the number of differing outputs */
static int32_t fwd_chain(part_fn f, const int32_t *g, const int32_t *ct, int32_t nct, int32_t m_lo, int32_t m_hi,
                         int32_t *guards)
{
    const int32_t N = g[POET_WIN_N], C = g[POET_WIN_C], S = g[POET_WIN_H] * g[POET_WIN_W];
    const int32_t M = g[POET_WIN_M], OS = g[POET_WIN_OH] * g[POET_WIN_OW], ny = N * (m_hi - m_lo) * OS;
    const float *prev = NULL;
    for (int32_t k = 0; k < nct; ++k) {
        const int32_t t[4] = {ct[k], ct[k + 1], m_lo, m_hi};
        float *y = out[k % 2];
        take(Xt, X, N, C, S, ct[k], ct[k + 1]);
        set_guard(y, ny);
        f(Xt, W, k == nct - 1 ? B : NULL, prev, y, g, t);
        ++calls;
        *guards += guard_hit(y, ny);
        prev = y;
    }
    return diff_tile(prev, Yw, N, M, OS, m_lo, m_hi);
}

/* input-gradient chain over the m-tiles for the c-tile [c_lo, c_hi) */
static int32_t gi_chain(gi_part_fn f, const int32_t *g, const int32_t *mt, int32_t nmt, int32_t c_lo, int32_t c_hi,
                        int32_t *guards)
{
    const int32_t N = g[POET_WIN_N], C = g[POET_WIN_C], S = g[POET_WIN_H] * g[POET_WIN_W];
    const int32_t M = g[POET_WIN_M], OS = g[POET_WIN_OH] * g[POET_WIN_OW], nx = N * (c_hi - c_lo) * S;
    const float *prev = NULL;
    for (int32_t k = 0; k < nmt; ++k) {
        const int32_t t[4] = {c_lo, c_hi, mt[k], mt[k + 1]};
        float *dx = out[k % 2];
        take(dYt, dY, N, M, OS, mt[k], mt[k + 1]);
        set_guard(dx, nx);
        f(dYt, W, prev, dx, g, t);
        ++calls;
        *guards += guard_hit(dx, nx);
        prev = dx;
    }
    return diff_tile(prev, dXw, N, C, S, c_lo, c_hi);
}

int main(void)
{
    long bad_cases = 0;
    calls = 0;
    for (int32_t i = 0; i < NCASES; ++i) {
        const int32_t *g = case_geom[i], *ct = case_ct[i], *mt = case_mt[i];
        const int32_t nct = case_nct[i], nmt = case_nmt[i];
        const int32_t N = g[POET_WIN_N], C = g[POET_WIN_C], M = g[POET_WIN_M], G = g[POET_WIN_G];
        const int32_t S = g[POET_WIN_H] * g[POET_WIN_W], OS = g[POET_WIN_OH] * g[POET_WIN_OW];
        const int32_t KK = g[POET_WIN_KH] * g[POET_WIN_KW];
        int32_t chain_ref = 0, chain_fast = 0, single = 0, aligned = 0, guards = 0;
        rng = 0x9e3779b9u * (uint32_t)(i + 1);
        fill(X, N * C * S);
        fill(W, M * (C / G) * KK);
        fill(B, M);
        fill(dY, N * M * OS);
        fill(Pr, N * (C * S > M * OS ? C * S : M * OS));
        poet_ref_conv2d_f32(X, W, B, Yw, g);
        poet_ref_conv2d_grad_input_f32(dY, W, dXw, g);
        for (int32_t a = 0; a < nmt; ++a) {
            chain_ref += fwd_chain(poet_ref_conv2d_part_f32, g, ct, nct, mt[a], mt[a + 1], &guards);
            chain_fast += fwd_chain(poet_fast_conv2d_part_f32, g, ct, nct, mt[a], mt[a + 1], &guards);
        }
        for (int32_t a = 0; a < nct; ++a) {
            chain_ref += gi_chain(poet_ref_conv2d_grad_input_part_f32, g, mt, nmt, ct[a], ct[a + 1], &guards);
            chain_fast += gi_chain(poet_fast_conv2d_grad_input_part_f32, g, mt, nmt, ct[a], ct[a + 1], &guards);
        }
        /* every single call, with and without P and B, fast against reference */
        for (int32_t a = 0; a < nct; ++a) {
            for (int32_t b = 0; b < nmt; ++b) {
                const int32_t t[4] = {ct[a], ct[a + 1], mt[b], mt[b + 1]};
                const int32_t ny = N * (mt[b + 1] - mt[b]) * OS, nx = N * (ct[a + 1] - ct[a]) * S;
                for (int32_t with = 0; with < 4; ++with) {
                    const float *P = with & 1 ? Pr : NULL, *Bb = with & 2 ? B : NULL;
                    take(Xt, X, N, C, S, ct[a], ct[a + 1]);
                    take(dYt, dY, N, M, OS, mt[b], mt[b + 1]);
                    set_guard(out[0], ny);
                    set_guard(out[1], ny);
                    poet_ref_conv2d_part_f32(Xt, W, Bb, P, out[0], g, t);
                    poet_fast_conv2d_part_f32(Xt, W, Bb, P, out[1], g, t);
                    single += diff(out[0], out[1], ny);
                    guards += guard_hit(out[0], ny) + guard_hit(out[1], ny);
                    calls += 2;
                    if (with >= 2) continue; /* no bias in the input gradient */
                    set_guard(out[0], nx);
                    set_guard(out[1], nx);
                    poet_ref_conv2d_grad_input_part_f32(dYt, W, P, out[0], g, t);
                    poet_fast_conv2d_grad_input_part_f32(dYt, W, P, out[1], g, t);
                    single += diff(out[0], out[1], nx);
                    guards += guard_hit(out[0], nx) + guard_hit(out[1], nx);
                    calls += 2;
                }
            }
        }
        /* depthwise: a c-tile is its own m-tile, one call each */
        if (G == C && G == M) {
            for (int32_t a = 0; a < nct; ++a) {
                const int32_t t[4] = {ct[a], ct[a + 1], ct[a], ct[a + 1]};
                const int32_t ny = N * (ct[a + 1] - ct[a]) * OS, nx = N * (ct[a + 1] - ct[a]) * S;
                for (int32_t v = 0; v < 2; ++v) {
                    take(Xt, X, N, C, S, ct[a], ct[a + 1]);
                    set_guard(out[2], ny);
                    (v ? poet_fast_conv2d_part_f32 : poet_ref_conv2d_part_f32)(Xt, W, B, NULL, out[2], g, t);
                    aligned += diff_tile(out[2], Yw, N, M, OS, ct[a], ct[a + 1]);
                    guards += guard_hit(out[2], ny);
                    take(dYt, dY, N, M, OS, ct[a], ct[a + 1]);
                    set_guard(out[2], nx);
                    (v ? poet_fast_conv2d_grad_input_part_f32 : poet_ref_conv2d_grad_input_part_f32)(dYt, W, NULL,
                                                                                                      out[2], g, t);
                    aligned += diff_tile(out[2], dXw, N, C, S, ct[a], ct[a + 1]);
                    guards += guard_hit(out[2], nx);
                    calls += 2;
                }
            }
        }
        const int ok = chain_ref == 0 && chain_fast == 0 && single == 0 && aligned == 0 && guards == 0;
        bad_cases += !ok;
        printf("case %ld %s chain_ref %ld chain_fast %ld single %ld aligned %ld guards %ld\n", (long)i,
               ok ? "ok" : "FAIL", (long)chain_ref, (long)chain_fast, (long)single, (long)aligned, (long)guards);
    }
    printf("checked %ld cases, %ld calls, %ld failed\n", (long)NCASES, calls, bad_cases);
    return bad_cases ? 1 : 0;
}
