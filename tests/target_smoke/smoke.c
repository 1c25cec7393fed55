/* Target smoke test: float math (multiply-add loops, division, sqrt), paging storage round trip,
 * stdio file input/output, ticks and stack/heap measurements. Exit code 0 means every check passed;
 * otherwise it is a bit mask of the failed checks (see SMOKE_FAIL_*).
 * Input  smoke_in.bin : SMOKE_PAIRS pairs of little-endian float32 (x, t).
 * Output smoke_out.bin: per-epoch losses, final w and b, and a 16x16 matrix-vector product (float32). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "poet/platform.h"
#include "poet_target.h"

#define SMOKE_PAIRS 128
#define SMOKE_EPOCHS 40
#define SMOKE_DIM 16
#define SMOKE_STORAGE_OFFSET 4096u

#define SMOKE_FAIL_INPUT 1
#define SMOKE_FAIL_STORAGE 2
#define SMOKE_FAIL_OUTPUT 4
#define SMOKE_FAIL_MATH 8
#define SMOKE_FAIL_BOUNDS 16
#define SMOKE_FAIL_TICKS 32

static float smoke_data[SMOKE_PAIRS][2];
static float smoke_losses[SMOKE_EPOCHS];
static float smoke_matrix[SMOKE_DIM][SMOKE_DIM];
static float smoke_vector[SMOKE_DIM];
static float smoke_product[SMOKE_DIM];
static float smoke_readback[SMOKE_DIM][SMOKE_DIM];

static int smoke_read_input(void)
{
    FILE *f = fopen("smoke_in.bin", "rb");
    if (f == NULL) {
        return SMOKE_FAIL_INPUT;
    }
    size_t got = fread(smoke_data, sizeof(float), 2u * SMOKE_PAIRS, f);
    fclose(f);
    return got == 2u * SMOKE_PAIRS ? 0 : SMOKE_FAIL_INPUT;
}

/* Linear regression t ~ w*x + b by SGD: a loop of multiply-adds with a data-dependent update. */
static void smoke_train(float *w, float *b)
{
    const float lr = 0.05f;
    for (int epoch = 0; epoch < SMOKE_EPOCHS; ++epoch) {
        float loss = 0.0f;
        for (int i = 0; i < SMOKE_PAIRS; ++i) {
            float err = *w * smoke_data[i][0] + *b - smoke_data[i][1];
            loss += err * err;
            *w -= lr * err * smoke_data[i][0];
            *b -= lr * err;
        }
        smoke_losses[epoch] = sqrtf(loss / (float)SMOKE_PAIRS);
    }
}

static void smoke_matvec(void)
{
    for (int r = 0; r < SMOKE_DIM; ++r) {
        smoke_vector[r] = smoke_data[r][0] / (1.0f + smoke_data[r][1] * smoke_data[r][1]);
        for (int c = 0; c < SMOKE_DIM; ++c) {
            smoke_matrix[r][c] = smoke_data[(r * SMOKE_DIM + c) % SMOKE_PAIRS][1] * (float)(r - c) * 0.125f;
        }
    }
    for (int r = 0; r < SMOKE_DIM; ++r) {
        float acc = 0.0f;
        for (int c = 0; c < SMOKE_DIM; ++c) {
            acc += smoke_matrix[r][c] * smoke_vector[c];
        }
        smoke_product[r] = acc;
    }
}

static int smoke_storage(void)
{
    int fail = 0;
    if (poet_storage_write(SMOKE_STORAGE_OFFSET, smoke_matrix, sizeof smoke_matrix) != 0 ||
        poet_storage_write(0u, smoke_losses, sizeof smoke_losses) != 0) {
        fail |= SMOKE_FAIL_STORAGE;
    }
    memset(smoke_readback, 0, sizeof smoke_readback);
    if (poet_storage_read(SMOKE_STORAGE_OFFSET, smoke_readback, sizeof smoke_readback) != 0 ||
        memcmp(smoke_readback, smoke_matrix, sizeof smoke_matrix) != 0) {
        fail |= SMOKE_FAIL_STORAGE;
    }
    uint32_t capacity = poet_target_storage_capacity();
    if (capacity < 8u || poet_storage_write(capacity - 4u, smoke_vector, 8u) == 0 ||
        poet_storage_read(capacity - 4u, smoke_readback, 8u) == 0) {
        fail |= SMOKE_FAIL_BOUNDS;
    }
    poet_storage_stats_t stats;
    poet_target_storage_stats(&stats);
    if (stats.writes != 2u || stats.reads != 1u || stats.bytes_written != sizeof smoke_matrix + sizeof smoke_losses ||
        stats.bytes_read != sizeof smoke_readback) {
        fail |= SMOKE_FAIL_STORAGE;
    }
    printf("storage writes=%lu reads=%lu bytes_written=%lu bytes_read=%lu\n", (unsigned long)stats.writes,
           (unsigned long)stats.reads, (unsigned long)stats.bytes_written, (unsigned long)stats.bytes_read);
    return fail;
}

static int smoke_write_output(float w, float b)
{
    FILE *f = fopen("smoke_out.bin", "wb");
    if (f == NULL) {
        return SMOKE_FAIL_OUTPUT;
    }
    float wb[2] = {w, b};
    size_t n = fwrite(smoke_losses, sizeof(float), SMOKE_EPOCHS, f);
    n += fwrite(wb, sizeof(float), 2u, f);
    n += fwrite(smoke_product, sizeof(float), SMOKE_DIM, f);
    int closed = fclose(f);
    return n == SMOKE_EPOCHS + 2u + SMOKE_DIM && closed == 0 ? 0 : SMOKE_FAIL_OUTPUT;
}

int main(void)
{
    char line[96];
    snprintf(line, sizeof line, "smoke: target %s", poet_target_name());
    poet_log(line);
    uint64_t t0 = poet_ticks();
    int fail = smoke_read_input();
    if (fail) {
        printf("smoke: cannot read smoke_in.bin\n");
        return fail;
    }
    float w = 0.0f;
    float b = 0.0f;
    uint64_t t1 = poet_ticks();
    smoke_train(&w, &b);
    smoke_matvec();
    uint64_t t2 = poet_ticks();
    fail |= smoke_storage();
    uint64_t t3 = poet_ticks();
    fail |= smoke_write_output(w, b);
    for (int epoch = 0; epoch < SMOKE_EPOCHS; epoch += 8) {
        printf("epoch %d loss %.9g\n", epoch, (double)smoke_losses[epoch]);
    }
    printf("w=%.9g b=%.9g\n", (double)w, (double)b);
    if (!(isfinite(w) && isfinite(b) && smoke_losses[SMOKE_EPOCHS - 1] < smoke_losses[0])) {
        fail |= SMOKE_FAIL_MATH;
    }
    if (!(t2 > t1 && t3 > t2)) {
        fail |= SMOKE_FAIL_TICKS;
    }
    printf("ticks input=%lu compute=%lu storage=%lu\n", (unsigned long)(t1 - t0), (unsigned long)(t2 - t1),
           (unsigned long)(t3 - t2));
    printf("stack_used=%lu stack_size=%lu heap_used=%lu heap_size=%lu\n",
           (unsigned long)poet_target_stack_used(), (unsigned long)poet_target_stack_size(),
           (unsigned long)poet_target_heap_used(), (unsigned long)poet_target_heap_size());
    printf("smoke: exit %d\n", fail);
    return fail;
}
