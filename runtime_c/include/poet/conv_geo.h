/* Private to the fast convolution (src/optimized/conv.c and conv_part.c): a convolution's window geometry
 * (enum POET_WIN_* in kernels.h) unpacked, and a shape test both dispatch on. Not part of the kernel API:
 * generated code includes kernels.h only. The functions are static, not inline, as they were in conv.c (the
 * compiler keeps making the same inlining choices there); each file that includes this calls both. */
#ifndef POET_CONV_GEO_H
#define POET_CONV_GEO_H

#include <stddef.h>

#include "poet/kernels.h"

/* P: the starting values of the weight gradient's accumulators (poet_conv2d_grad_weight_from_f32), NULL:
 * +0.0f. In the struct rather than an argument and read by POET_GEO_P (conv.c) where an output block starts,
 * so the loops keep the registers they had without it. */
typedef struct {
    int32_t N, C, IH, IW, M, KH, KW, OH, OW, SH, SW, PT, PL, G, Cg, Mg, IHW, OHW, KK;
    const float *P;
} poet_cgeo;

static poet_cgeo poet_conv_geo(const int32_t *g)
{
    poet_cgeo q;
    q.N = g[POET_WIN_N];
    q.C = g[POET_WIN_C];
    q.IH = g[POET_WIN_H];
    q.IW = g[POET_WIN_W];
    q.M = g[POET_WIN_M];
    q.KH = g[POET_WIN_KH];
    q.KW = g[POET_WIN_KW];
    q.OH = g[POET_WIN_OH];
    q.OW = g[POET_WIN_OW];
    q.SH = g[POET_WIN_SH];
    q.SW = g[POET_WIN_SW];
    q.PT = g[POET_WIN_PT];
    q.PL = g[POET_WIN_PL];
    q.G = g[POET_WIN_G];
    q.Cg = q.C / q.G;
    q.Mg = q.M / q.G;
    q.IHW = q.IH * q.IW;
    q.OHW = q.OH * q.OW;
    q.KK = q.KH * q.KW;
    q.P = NULL;
    return q;
}

/* 1x1, stride 1, no padding: every output pixel is the input pixel at the same place. */
static int poet_pw1(const poet_cgeo *g)
{
    return g->KH == 1 && g->KW == 1 && g->SH == 1 && g->SW == 1 && g->PT == 0 && g->PL == 0 &&
           g->OH == g->IH && g->OW == g->IW;
}

#endif
