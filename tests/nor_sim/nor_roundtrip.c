/* Round trip of paged tensors through the wear-spreading log (runtime_c/drivers/poet_nor_log.c) over a
 * simulated device: -DSIM_F4 (STM32F405 internal flash, poet_stm32f4_flash.c over stm32f4_sim.c) or
 * -DSIM_SPI (SPI NOR, poet_spi_nor.c over spi_nor_sim.c). Usage: nor_roundtrip STEPS.
 * Each step writes every tensor of a storage layout like a compiled plan's (16-byte aligned offsets, sizes
 * that are not multiples of 256: the batch, paged values, an undo journal) with new contents, every 7th step
 * a checkpoint slot, then reads everything back in another order and compares. Every 40 steps the log is
 * mounted again from the device alone (a reset) and everything is compared again. Prints one line of
 * key=value counts; exit 0 only if all data matched and the simulator saw no violation. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "poet_nor_log.h"
#include "sim_device.h"

#define NT 9
/* the batch, six paged values, a journal entry, two checkpoint slots */
static const uint32_t sizes[NT] = {3136, 1600, 400, 2048, 1200, 100, 4, 4100, 1296};
#define CKPT_BYTES 1536u
static uint32_t offsets[NT + 2];
static uint32_t logical_bytes;
static uint8_t expect[64 * 1024];
static uint8_t buf[8192];
static uint16_t map[POET_NOR_MAP_ENTRIES(64 * 1024)];
static poet_nor_log log_state;
static poet_nor_device dev;
static uint32_t mismatches, errors;

static uint8_t value(uint32_t step, uint32_t t, uint32_t i)
{
    uint32_t h = step * 2654435761u ^ (t + 1u) * 40503u ^ i * 2246822519u;
    h ^= h >> 15;
    h *= 2654435761u;
    return (uint8_t)(h >> 24);
}

static void put(uint32_t region, uint32_t bytes, uint32_t step)
{
    for (uint32_t i = 0; i < bytes; ++i) buf[i] = value(step, region, i);
    if (poet_nor_log_write(&log_state, offsets[region], buf, bytes) != 0) {
        errors += 1u;
        return;
    }
    memcpy(expect + offsets[region], buf, bytes);
}

static void check(uint32_t region, uint32_t bytes)
{
    if (poet_nor_log_read(&log_state, offsets[region], buf, bytes) != 0) {
        errors += 1u;
        return;
    }
    if (memcmp(buf, expect + offsets[region], bytes) != 0) mismatches += 1u;
}

static void check_all(void)
{
    for (uint32_t t = NT; t-- > 0;) check(t, sizes[t]);
    check(NT, CKPT_BYTES);
    check(NT + 1, CKPT_BYTES);
}

int main(int argc, char **argv)
{
    uint32_t steps = argc > 1 ? (uint32_t)strtoul(argv[1], NULL, 10) : 100u;
    uint32_t top = 0, remounts = 0;
    for (uint32_t t = 0; t < NT; ++t) {
        offsets[t] = top;
        top += (sizes[t] + 15u) & ~15u;
    }
    top = (top + 255u) & ~255u; /* checkpoint slots on a 256-byte boundary, as in a compiled plan */
    offsets[NT] = top;
    offsets[NT + 1] = top + CKPT_BYTES;
    logical_bytes = top + 2u * CKPT_BYTES;
    if (sim_device_setup(&dev) != 0) {
        puts("setup failed");
        return 2;
    }
    int rc = poet_nor_log_mount(&log_state, &dev, map, logical_bytes);
    if (rc != 0) {
        printf("mount failed %d\n", rc);
        return 3;
    }
    memset(expect, 0, sizeof expect); /* never-written bytes read as zero */
    check_all();
    poet_nor_stats total = {0};
    for (uint32_t s = 1; s <= steps; ++s) {
        for (uint32_t t = 0; t < NT; ++t) put(t, sizes[t], s);
        if (s % 7u == 0u) put(NT + (s / 7u) % 2u, CKPT_BYTES, s);
        check_all();
        if (s % 40u == 0u || s == steps) { /* a reset: only the device keeps the data */
            total.erases += log_state.stats.erases;
            total.unit_writes += log_state.stats.unit_writes;
            total.unit_copies += log_state.stats.unit_copies;
            total.partial_units += log_state.stats.partial_units;
            memset(&log_state, 0xA5, sizeof log_state);
            memset(map, 0xA5, sizeof map);
            rc = poet_nor_log_mount(&log_state, &dev, map, logical_bytes);
            if (rc != 0) {
                printf("remount failed %d\n", rc);
                errors += 1u;
                break;
            }
            remounts += 1u;
            check_all();
        }
    }
    printf("steps=%u logical_bytes=%u capacity=%u remounts=%u log_erases=%u unit_writes=%u unit_copies=%u "
           "partial_units=%u mismatches=%u driver_errors=%u ",
           (unsigned)steps, (unsigned)logical_bytes, (unsigned)poet_nor_log_capacity(&dev), (unsigned)remounts,
           (unsigned)total.erases, (unsigned)total.unit_writes, (unsigned)total.unit_copies,
           (unsigned)total.partial_units, (unsigned)mismatches, (unsigned)errors);
    /* the simulator's verdict (violations, bytes outside the log's sectors changed) counts as errors */
    errors += sim_device_report();
    printf("\n");
    return mismatches == 0u && errors == 0u ? 0 : 1;
}
