/* poet-edge training harness: feeds batches from poet_data.bin to poet_train_step() and writes the
 * parameters to poet_params.bin. Same file on every target (stdio: the host's, or semihosting).
 *
 * poet_data.bin: "POETDAT1", u32 steps, u32 x_elems, u32 label_elems, u32 labels_are_int, f32 lr,
 *                then per step: x (f32 × x_elems), labels (i32 or f32 × label_elems).
 * poet_params.bin: "POETPAR1", u32 count, then per parameter: u32 name_len, name, u32 n, f32 × n.
 * poet_load.bin (optional, same format as poet_params.bin): trainable parameters set before the first step.
 * poet_eval.bin (optional): "POETEVL1", u32 batches, then per batch x and labels as in poet_data.bin. Before
 *                the first step and after the last, every batch goes through poet_predict (its outputs are
 *                appended to poet_logits.bin) and poet_eval_step (its loss is printed).

 * A step that returns an error status (bad label, non-finite input, storage error) ends the run with exit
 * code 15 and a line naming the status. */
#include <stdio.h>
#include <string.h>

#include "poet/crc32.h"
#include "poet/platform.h"
#include "poet_model.h"
#include "poet_target.h"

#if POET_INPUT_IN_STORAGE
/* the batch goes from the data file to storage through a small buffer: it never occupies RAM whole. The
 * plan counts this buffer in its fixed RAM (poet_edge.planning.INPUT_STAGING_FLOATS: keep them equal) */
#define POET_INPUT_STAGING_FLOATS 256
static float poet_x[POET_INPUT_ELEMS < POET_INPUT_STAGING_FLOATS ? POET_INPUT_ELEMS : POET_INPUT_STAGING_FLOATS];
#else
static float poet_x[POET_INPUT_ELEMS];
#endif
/* int32 labels or float targets (both 4 bytes), or poet_predict's outputs: never needed at the same time,
 * so one buffer (the plan's fixed RAM counts the larger) */
static union {
    int32_t labels[POET_LABEL_ELEMS];
    float out[POET_OUTPUT_ELEMS];
} poet_buf;
#define poet_y poet_buf.labels

/* Reads one batch of x from f: into poet_x, or through it into storage at POET_INPUT_OFFSET. */
static int read_x(FILE *f, uint32_t xe)
{
#if POET_INPUT_IN_STORAGE
    const uint32_t chunk = (uint32_t)(sizeof poet_x / sizeof poet_x[0]);
    uint32_t crc = POET_CRC32_INIT;
    for (uint32_t done = 0; done < xe; done += chunk) {
        uint32_t n = xe - done < chunk ? xe - done : chunk;
        if (fread(poet_x, sizeof(float), n, f) != n) return -1;
        if (poet_storage_write(POET_INPUT_OFFSET + 4u * done, poet_x, 4u * n) != 0) return -1;
        crc = poet_crc32_update(crc, poet_x, 4u * n);
    }
    poet_set_input_crc(poet_crc32_final(crc)); /* checked at each load with --verify-paging */
    return 0;
#else
    return fread(poet_x, sizeof(float), xe, f) == xe ? 0 : -1;
#endif
}

#define CHUNK 32u /* floats per parameter transfer (stack buffer) */

static int read_u32(FILE *f, uint32_t *v) { return fread(v, sizeof *v, 1, f) == 1 ? 0 : -1; }

static int write_params(const char *path)
{
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    uint32_t count = POET_NUM_PARAMS;
    fwrite("POETPAR1", 1, 8, f);
    fwrite(&count, sizeof count, 1, f);
    for (uint32_t i = 0; i < count; ++i) {
        const poet_param_info *p = &poet_params[i];
        uint32_t len = (uint32_t)strlen(p->name), n = (uint32_t)p->count;
        fwrite(&len, sizeof len, 1, f);
        fwrite(p->name, 1, len, f);
        fwrite(&n, sizeof n, 1, f);
        for (uint32_t k = 0; k < n; k += CHUNK) { /* poet_param_read: the parameter may be in storage */
            float buf[CHUNK];
            uint32_t m = n - k < CHUNK ? n - k : CHUNK;
            if (poet_param_read((int32_t)i, k, m, buf) != 0) { fclose(f); return -1; }
            fwrite(buf, sizeof(float), m, f);
        }
    }
    return fclose(f);
}

/* Sets the trainable parameters listed in poet_load.bin (absent: keeps the compiled ones). */
static int load_params(void)
{
    char magic[8], name[128];
    uint32_t count, len, n;
    FILE *f = fopen("poet_load.bin", "rb");
    if (!f) return 0;
    if (fread(magic, 1, 8, f) != 8 || memcmp(magic, "POETPAR1", 8) != 0 || read_u32(f, &count)) return -1;
    for (uint32_t k = 0; k < count; ++k) {
        if (read_u32(f, &len) || len >= sizeof name || fread(name, 1, len, f) != len || read_u32(f, &n)) return -1;
        name[len] = 0;
        int32_t i = 0;
        while (i < POET_NUM_PARAMS && strcmp(poet_params[i].name, name) != 0) ++i;
        if (i == POET_NUM_PARAMS || (uint32_t)poet_params[i].count != n) return -1;
        for (uint32_t k = 0; k < n; k += CHUNK) {
            float buf[CHUNK], now[CHUNK];
            uint32_t m = n - k < CHUNK ? n - k : CHUNK;
            if (fread(buf, sizeof(float), m, f) != m) return -1;
            if (poet_params[i].trainable) {
                if (poet_param_write(i, k, m, buf) != 0) return -1;
                continue;
            }
            /* frozen: const in flash, must be given unchanged */
            if (poet_param_read(i, k, m, now) != 0) return -1;
            if (memcmp(buf, now, m * sizeof(float)) != 0) {
                printf("poet: parameter %s is frozen in this build (const); load it by compiling again\n", name);
                return -1;
            }
        }
    }
    return fclose(f);
}

/* Runs every batch of poet_eval.bin through poet_predict and poet_eval_step (absent: nothing). */
static int evaluate(uint32_t phase)
{
    char magic[8];
    uint32_t batches;
    FILE *f = fopen("poet_eval.bin", "rb");
    if (!f) return 0;
    if (fread(magic, 1, 8, f) != 8 || memcmp(magic, "POETEVL1", 8) != 0 || read_u32(f, &batches)) return -1;
    FILE *logits = fopen("poet_logits.bin", phase ? "ab" : "wb");
    if (!logits || setvbuf(logits, NULL, _IONBF, 0) != 0) return -1; /* unbuffered: no heap for a buffer */
    for (uint32_t b = 0; b < batches; ++b) {
        if (read_x(f, POET_INPUT_ELEMS) != 0 || fread(poet_y, 4, POET_LABEL_ELEMS, f) != POET_LABEL_ELEMS) return -1;
        const float *x = POET_INPUT_IN_STORAGE ? NULL : poet_x;
        float loss;
        uint64_t t0 = poet_ticks();
        poet_status st = poet_eval_step(x, poet_y, &loss);
        uint64_t t1 = poet_ticks();
        if (st == POET_OK) st = poet_predict(x, poet_buf.out); /* overwrites the labels */
        uint64_t t2 = poet_ticks();
        if (st != POET_OK) {
            printf("poet: evaluation batch %lu failed: %s\n", (unsigned long)b, poet_status_name(st));
            return -1;
        }
        if (fwrite(poet_buf.out, sizeof(float), POET_OUTPUT_ELEMS, logits) != POET_OUTPUT_ELEMS) return -1;
        uint32_t bits;
        memcpy(&bits, &loss, sizeof bits);
        printf("eval %lu batch %lu loss_bits %08lx predict_ticks %lu eval_ticks %lu\n", (unsigned long)phase,
               (unsigned long)b, (unsigned long)bits, (unsigned long)(t2 - t1), (unsigned long)(t1 - t0));
    }
    return fclose(logits) | fclose(f);
}

int main(void)
{
    char magic[8];
    uint32_t steps, xe, le, is_int;
    float lr;
    poet_init();
    if (load_params() != 0) { puts("poet: poet_load.bin is unreadable or does not match the model"); return 17; }
    if (evaluate(0) != 0) { puts("poet: evaluation before training failed"); return 16; }
    FILE *f = fopen("poet_data.bin", "rb");
    if (!f) { puts("poet: cannot open poet_data.bin"); return 10; }
    if (fread(magic, 1, 8, f) != 8 || memcmp(magic, "POETDAT1", 8) != 0 || read_u32(f, &steps) ||
        read_u32(f, &xe) || read_u32(f, &le) || read_u32(f, &is_int) || fread(&lr, sizeof lr, 1, f) != 1) {
        puts("poet: poet_data.bin has a bad header");
        return 11;
    }
    if (xe != POET_INPUT_ELEMS || le != POET_LABEL_ELEMS || is_int != POET_LABELS_ARE_INT) {
        puts("poet: poet_data.bin does not match the model's input/label sizes");
        return 12;
    }
    for (uint32_t s = 0; s < steps; ++s) {
        if (read_x(f, xe) != 0 || fread(poet_y, 4, le, f) != le) {
            puts("poet: poet_data.bin is truncated");
            return 13;
        }
        poet_storage_stats_t st0, st1;
        poet_target_storage_stats(&st0);
        uint64_t t0 = poet_ticks();
        float loss = 0.0f;
        poet_status status = poet_train_step(POET_INPUT_IN_STORAGE ? NULL : poet_x, poet_y, lr, &loss);
        uint64_t t1 = poet_ticks();
        if (status != POET_OK) {
            printf("poet: step %lu failed: %s (the model is unchanged)\n", (unsigned long)s, poet_status_name(status));
            return 15;
        }
        poet_target_storage_stats(&st1);
        uint32_t bits;
        memcpy(&bits, &loss, sizeof bits);
        /* the loss is printed as its bits: no float formatting, so newlib's dtoa needs no heap */
        printf("step %lu loss_bits %08lx ticks %lu written %lu read %lu\n", (unsigned long)s, (unsigned long)bits, (unsigned long)(t1 - t0), (unsigned long)(st1.bytes_written - st0.bytes_written),
               (unsigned long)(st1.bytes_read - st0.bytes_read));
    }
    fclose(f);
    if (evaluate(1) != 0) { puts("poet: evaluation after training failed"); return 16; }
    if (write_params("poet_params.bin") != 0) { puts("poet: cannot write poet_params.bin"); return 14; }
#ifdef POET_PROFILE
    for (int32_t k = 0; k < poet_profile_kinds(); ++k)
        printf("kind %s calls %lu ticks %lu\n", poet_profile_name(k), (unsigned long)poet_profile_calls(k),
               (unsigned long)poet_profile_ticks(k));
#endif
    printf("done stack_used %lu heap_used %lu\n", (unsigned long)poet_target_stack_used(),
           (unsigned long)poet_target_heap_used());
    return 0;
}
