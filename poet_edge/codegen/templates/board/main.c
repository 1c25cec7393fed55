/* Bare-metal example: poet_train_step() in a loop on an STM32F405/407 (Cortex-M4F, 168 MHz), paging
 * storage and checkpoints in internal flash sectors 8-11 through the wear-spreading log
 * (drivers/poet_nor_log.h over drivers/poet_stm32f4_flash.h). Built by CMakeLists.txt with
 * cmake/arm-none-eabi.cmake; the code is linked into sectors 0-7 (examples/bare_metal/stm32f405.ld).
 * Replace fill_batch() with your sensor or data set, and poet_log() with your UART or RTT. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "poet/platform.h"
#include "poet_model.h"
#include "poet_nor_log.h"
#include "poet_stm32f4_flash.h"

/* ---- storage: 4 x 128 KB sectors, the log holds up to 2 x 481 x 256 = 246,272 bytes -------------- */
static const uint8_t storage_sectors[] = {8, 9, 10, 11};
#define STORAGE_CAPACITY (2u * (131072u / POET_NOR_SLOT_BYTES) * POET_NOR_UNIT_BYTES)
/* compile error here: this plan's storage does not fit the 4 sectors; give the log more sectors */
typedef char poet_example_storage_fits[POET_STORAGE_TOTAL_BYTES <= STORAGE_CAPACITY ? 1 : -1];

static poet_stm32f4_flash flash = {
    POET_STM32F4_FLASH_REGS, POET_STM32F4_FLASH_BASE, storage_sectors, sizeof storage_sectors,
    POET_STM32F4_PSIZE_X32, /* x32 parallelism: 2.7-3.6 V supply */
    0u                      /* wait for BSY as long as it takes */
};
static poet_nor_device storage_device;
static poet_nor_log storage_log;
static uint16_t storage_map[POET_NOR_MAP_ENTRIES(POET_STORAGE_TOTAL_BYTES)];

/* ---- ticks: the DWT cycle counter, extended to 64 bits (call at least once per 2^32 cycles) ------- */
#define DEMCR (*(volatile uint32_t *)0xE000EDFCu)
#define DWT_CTRL (*(volatile uint32_t *)0xE0001000u)
#define DWT_CYCCNT (*(volatile uint32_t *)0xE0001004u)
static uint32_t ticks_high, ticks_last;

uint64_t poet_ticks(void)
{
    uint32_t now = DWT_CYCCNT;
    if (now < ticks_last) ticks_high += 1u;
    ticks_last = now;
    return ((uint64_t)ticks_high << 32) | now;
}

/* ---- log: the last 8 lines in RAM, for a debugger (replace with a UART or SEGGER RTT) -------------- */
volatile char poet_example_log[8][64];
static uint32_t log_next;

void poet_log(const char *line)
{
    volatile char *dst = poet_example_log[log_next++ % 8u];
    size_t i = 0;
    for (; line[i] != '\0' && i < 63u; ++i) dst[i] = line[i];
    dst[i] = '\0';
}

/* ---- the training loop ---------------------------------------------------------------------------- */
static float x[POET_INPUT_ELEMS];
#if POET_LABELS_ARE_INT
static int32_t labels[POET_LABEL_ELEMS];
#else
static float labels[POET_LABEL_ELEMS];
#endif
volatile uint32_t poet_example_steps;
volatile float poet_example_loss;

/* A stand-in for real data: pseudo-random inputs in [-1, 1] and labels (or targets). */
static void fill_batch(void)
{
    static uint32_t rng = 1u;
    for (uint32_t i = 0; i < POET_INPUT_ELEMS; ++i) {
        rng = rng * 1664525u + 1013904223u;
        x[i] = (float)(rng >> 9) / 4194304.0f - 1.0f;
    }
    for (uint32_t i = 0; i < POET_LABEL_ELEMS; ++i) {
        rng = rng * 1664525u + 1013904223u;
#if POET_LABELS_ARE_INT
        labels[i] = (int32_t)((rng >> 16) % (uint32_t)POET_NUM_CLASSES);
#else
        labels[i] = (float)(rng >> 9) / 4194304.0f - 1.0f;
#endif
    }
}

int main(void)
{
    DEMCR |= 1u << 24; /* TRCENA */
    DWT_CYCCNT = 0u;
    DWT_CTRL |= 1u; /* CYCCNTENA */
    if (poet_stm32f4_flash_device(&flash, &storage_device) != 0 ||
        poet_nor_log_mount(&storage_log, &storage_device, storage_map, POET_STORAGE_TOTAL_BYTES) != POET_NOR_OK) {
        poet_log("storage: mount failed");
        for (;;) {
        }
    }
    poet_storage_nor_bind(&storage_log);
    poet_init();
    if (poet_checkpoint_restore() != POET_OK) poet_log("no checkpoint: the compiled-in parameters");
    for (uint32_t step = 0;; ++step) {
        fill_batch();
#if POET_INPUT_IN_STORAGE
        if (poet_storage_write(POET_INPUT_OFFSET, x, sizeof x) != 0) continue;
#endif
        float loss = 0.0f;
        poet_status st = poet_train_step(POET_INPUT_IN_STORAGE ? NULL : x, labels, 0.01f, &loss);
        if (st != POET_OK) {
            poet_log(poet_status_name(st)); /* the model is unchanged */
            continue;
        }
        poet_example_steps = step + 1u;
        poet_example_loss = loss;
        if ((step + 1u) % 1000u == 0u && poet_checkpoint_save() != POET_OK) poet_log("checkpoint failed");
    }
}
