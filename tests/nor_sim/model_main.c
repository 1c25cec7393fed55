/* A generated training step (poet_model.c) with its paging storage on a simulated flash device through the
 * wear-spreading log (poet_storage_nor.c), or, with -DRAM_STORAGE, on a plain RAM array (the oracle).
 * Usage: model_main STEPS. Trains STEPS steps on deterministic data, saves a checkpoint, prints the bits of
 * every parameter (one hash per parameter); then damages the parameters, mounts the log again from the
 * device alone (a reset), restores the checkpoint and prints the hashes again. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "poet/platform.h"
#include "poet_model.h"

#ifdef RAM_STORAGE
static unsigned char poet_ram_storage[POET_STORAGE_TOTAL_BYTES];
static unsigned long storage_calls;
int poet_storage_write(uint32_t offset, const void *src, size_t bytes)
{
    if (offset > sizeof poet_ram_storage || bytes > sizeof poet_ram_storage - offset) return -1;
    memcpy(poet_ram_storage + offset, src, bytes);
    storage_calls += 1u;
    return 0;
}
int poet_storage_read(uint32_t offset, void *dst, size_t bytes)
{
    if (offset > sizeof poet_ram_storage || bytes > sizeof poet_ram_storage - offset) return -1;
    memcpy(dst, poet_ram_storage + offset, bytes);
    storage_calls += 1u;
    return 0;
}
static int storage_mount(void)
{
    return 0;
}
#else
#include "poet_nor_log.h"
#include "sim_device.h"
static poet_nor_device dev;
static poet_nor_log nor_log;
static uint16_t nor_map[POET_NOR_MAP_ENTRIES(POET_STORAGE_TOTAL_BYTES)];
static int storage_mount(void)
{
    memset(&nor_log, 0xA5, sizeof nor_log);
    int rc = poet_nor_log_mount(&nor_log, &dev, nor_map, POET_STORAGE_TOTAL_BYTES);
    poet_storage_nor_bind(rc == 0 ? &nor_log : NULL);
    return rc;
}
#endif

uint64_t poet_ticks(void)
{
    return 0;
}

void poet_log(const char *line)
{
    puts(line);
}

static float x[POET_INPUT_ELEMS];
#if POET_LABELS_ARE_INT
static int32_t labels[POET_LABEL_ELEMS];
#else
static float labels[POET_LABEL_ELEMS];
#endif
static uint32_t rng = 12345u;
static uint32_t next(void)
{
    rng = rng * 1664525u + 1013904223u;
    return rng >> 8;
}

static void print_hashes(const char *what)
{
    printf("%s", what);
    for (int32_t i = 0; i < POET_NUM_PARAMS; ++i) {
        uint32_t h = 2166136261u;
        const unsigned char *p = (const unsigned char *)poet_params[i].data;
        for (size_t k = 0; k < 4u * (size_t)poet_params[i].count; ++k) h = (h ^ p[k]) * 16777619u;
        printf(" %08lx", (unsigned long)h);
    }
    printf("\n");
}

int main(int argc, char **argv)
{
    uint32_t steps = argc > 1 ? (uint32_t)strtoul(argv[1], NULL, 10) : 10u;
#ifndef RAM_STORAGE
    if (sim_device_setup(&dev) != 0) return 2;
#endif
    if (storage_mount() != 0) return 3;
    poet_init();
    for (uint32_t s = 0; s < steps; ++s) {
        for (uint32_t i = 0; i < POET_INPUT_ELEMS; ++i) x[i] = (float)(next() % 2001u) / 1000.0f - 1.0f;
        for (uint32_t i = 0; i < POET_LABEL_ELEMS; ++i) {
#if POET_LABELS_ARE_INT
            labels[i] = (int32_t)(next() % (uint32_t)POET_NUM_CLASSES);
#else
            labels[i] = (float)(next() % 2001u) / 1000.0f - 1.0f;
#endif
        }
#if POET_INPUT_IN_STORAGE
        if (poet_storage_write(POET_INPUT_OFFSET, x, sizeof x) != 0) return 4;
#endif
        float loss = 0.0f;
        poet_status st = poet_train_step(POET_INPUT_IN_STORAGE ? NULL : x, labels, 0.05f, &loss);
        uint32_t bits;
        memcpy(&bits, &loss, sizeof bits);
        printf("step %lu %s loss_bits %08lx\n", (unsigned long)s, poet_status_name(st), (unsigned long)bits);
        if (st != POET_OK) return 5;
        if (s % 4u == 3u && poet_checkpoint_save() != POET_OK) return 6;
    }
    if (poet_checkpoint_save() != POET_OK) return 6;
    print_hashes("trained");
    static float zeros[1 << 16];
    for (int32_t i = 0; i < POET_NUM_PARAMS; ++i) {
        if (poet_params[i].trainable) (void)poet_set_param(i, zeros);
    }
    if (storage_mount() != 0) return 7; /* a reset: only the device keeps the data */
    poet_init();
    poet_status st = poet_checkpoint_restore();
    printf("restore %s\n", poet_status_name(st));
    print_hashes("restored");
#ifdef RAM_STORAGE
    printf("storage_calls %lu\n", storage_calls);
    return 0;
#else
    printf("unit_writes %lu erases %lu\n", (unsigned long)nor_log.stats.unit_writes, (unsigned long)nor_log.stats.erases);
    return sim_device_report() == 0u ? 0 : 1;
#endif
}
