/* The k step of the register-blocked dense kernels (src/optimized/gemm.c): a block of up to
 * R = 4 rows x NC = 6 columns of Y in 24 accumulators acc<r><c>, for layout (TA, TB). The including
 * function defines the row pointers a<r>, column pointers b<c>, offsets ao/bo, x<r> and g (with fields M
 * and N). In a header so both kernel files share it (every generated project gets include/poet/). */
#ifndef POET_BLOCKED_H
#define POET_BLOCKED_H

/* GCC's first (pre-register-allocation) scheduling pass hoists all loads of a k step to the top and then
 * spills accumulators to the stack; without it the allocator keeps every accumulator in a register. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-schedule-insns")
#endif

#if !defined(POET_ALWAYS_INLINE) /* conv.c defines its own */
#if defined(__GNUC__) && defined(__SANITIZE_ADDRESS__)
/* sanitizer builds: the same code without forced inlining (as in conv.c): the same operations in the same
 * order, so the same results, compiled in seconds instead of minutes with the instrumentation */
#define POET_ALWAYS_INLINE static inline
#define POET_NOINLINE static __attribute__((noinline))
#elif defined(__GNUC__)
#define POET_ALWAYS_INLINE static inline __attribute__((always_inline))
#define POET_NOINLINE static __attribute__((noinline))
#else
#define POET_ALWAYS_INLINE static inline
#define POET_NOINLINE static
#endif
#endif

/* One k step. x_r = op(A)[i + r, k] are loaded first; then column by column, y_c = op(B)[k, j + c] is
 * loaded and used for the block's rows (live: 24 accumulators, 4 x, 1 y, 1 product: no spills). The
 * first step is acc = +0.0f + product (the reference's first addition, without a zeroing move). */
#define POET_MAC(r, c, op) if (R > r && NC > c) acc##r##c op x##r * y##c;
#define POET_LOAD_X(r) if (R > r) x##r = TA ? a[ao + r] : *a##r++;
#define POET_COLUMN(c, op) \
    if (NC > c) { \
        const float y##c = TB ? *b##c++ : b[bo + c]; \
        POET_MAC(0, c, op) POET_MAC(1, c, op) POET_MAC(2, c, op) POET_MAC(3, c, op) \
    }
#define POET_STEP(op) \
    do { \
        POET_LOAD_X(0) POET_LOAD_X(1) POET_LOAD_X(2) POET_LOAD_X(3) \
        POET_COLUMN(0, op) POET_COLUMN(1, op) POET_COLUMN(2, op) \
        POET_COLUMN(3, op) POET_COLUMN(4, op) POET_COLUMN(5, op) \
        if (TA) ao += g->M; \
        if (!TB) bo += g->N; \
    } while (0)
#define POET_SET_FIRST = zero +

#endif
