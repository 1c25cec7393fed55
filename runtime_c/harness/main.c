/* poet-edge training harness: feeds batches from poet_data.bin to poet_train_step() and writes the
 * parameters to poet_params.bin. Same file on every target (stdio: the host's, or semihosting).
 *
 * poet_data.bin: "POETDAT1", u32 steps, u32 x_elems, u32 label_elems, u32 labels_are_int, f32 lr,
 *                then per step: x (f32 × x_elems), labels (i32 or f32 × label_elems).
 * poet_params.bin: "POETPAR1", u32 count, then per parameter: u32 name_len, name, u32 n, f32 × n.
 * A step that returns an error status (bad label, non-finite input, storage error) ends the run with exit
 * code 15 and a line naming the status. */
#include <stdio.h>
#include <string.h>

#include "poet/crc32.h"
#include "poet/platform.h"
#include "poet_model.h"
#include "poet_target.h"

#if POET_INPUT_IN_STORAGE
/* the batch goes from the data file to storage through a small buffer: it never occupies RAM whole */
static float poet_x[POET_INPUT_ELEMS < 256 ? POET_INPUT_ELEMS : 256];
#else
static float poet_x[POET_INPUT_ELEMS];
#endif
static int32_t poet_y[POET_LABEL_ELEMS]; /* int32 labels or float targets, both 4 bytes */

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
        fwrite(p->data, sizeof(float), n, f);
    }
    return fclose(f);
}

int main(void)
{
    char magic[8];
    uint32_t steps, xe, le, is_int;
    float lr;
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
    poet_init();
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
