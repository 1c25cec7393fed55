#include "poet/bcast.h"
#include "poet/kernels.h"

void poet_matmul_f32(const float *A, const float *B, float *Y, int32_t M, int32_t N, int32_t K, int32_t transA,
                     int32_t transB, int32_t rank, const int32_t *dims, const int32_t *a_strides,
                     const int32_t *b_strides)
{
    const int32_t a_i = transA ? 1 : K, a_k = transA ? M : 1;
    const int32_t b_k = transB ? 1 : N, b_j = transB ? K : 1;
    int32_t idx[POET_MAX_RANK] = {0}, off[2] = {0, 0}, batches = 1;
    const int32_t *strides[2] = {a_strides, b_strides};
    for (int32_t d = 0; d < rank; ++d) batches *= dims[d];
    for (int32_t p = 0; p < batches; ++p) {
        const float *Ap = A + off[0], *Bp = B + off[1];
        float *Yp = Y + p * M * N;
        for (int32_t i = 0; i < M; ++i) {
            for (int32_t j = 0; j < N; ++j) {
                float acc = 0.0f;
                const float *a = Ap + i * a_i, *b = Bp + j * b_j;
                for (int32_t k = 0; k < K; ++k) acc += a[k * a_k] * b[k * b_k];
                Yp[i * N + j] = acc;
            }
        }
        poet_bcast_next(rank, dims, idx, 2, strides, off);
    }
}
