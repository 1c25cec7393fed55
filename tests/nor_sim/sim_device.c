/* The simulated device the driver tests use: -DSIM_F4 (STM32F405 internal flash, sectors 8-11, over
 * stm32f4_sim.c) or -DSIM_SPI (24 sectors of a SPI NOR chip from 64 KB on, over spi_nor_sim.c). Bytes
 * outside the log's sectors are filled with a pattern (the "firmware") that must survive. */
#include <stdio.h>

#include "sim_device.h"
#ifdef SIM_F4
#include "poet_stm32f4_flash.h"
#include "stm32f4_sim.h"
#else
#include "poet_spi_nor.h"
#include "spi_nor_sim.h"
#endif

#ifdef SIM_F4
#ifdef SIM_F4_WIDE
static const uint8_t f4_sectors[] = {5, 6, 7, 8, 9, 10, 11}; /* 7 x 128 KB; 0-4 hold "firmware" */
#else
static const uint8_t f4_sectors[] = {8, 9, 10, 11}; /* 4 x 128 KB; 0-7 hold "firmware" */
#endif
#define F4_FIRST ((uint32_t)f4_sectors[0])
static poet_stm32f4_flash f4 = {0};
int sim_device_setup(poet_nor_device *dev)
{
    sim_f4_reset();
    for (uint32_t i = 0; i < poet_stm32f4_sector_offset(F4_FIRST); ++i) sim_f4_state.mem[i] = (uint8_t)(i * 7u + 3u);
    f4.regs = &sim_f4_state.regs;
    f4.flash_base = (uintptr_t)sim_f4_state.mem;
    f4.sectors = f4_sectors;
    f4.num_sectors = (uint32_t)sizeof f4_sectors;
    f4.psize = POET_STM32F4_PSIZE_X32;
    f4.max_polls = 1000;
    return poet_stm32f4_flash_device(&f4, dev);
}
uint32_t sim_device_report(void)
{
    uint32_t errors = 0;
    int outside_ok = 1;
    for (uint32_t i = 0; i < poet_stm32f4_sector_offset(F4_FIRST); ++i) {
        if (sim_f4_state.mem[i] != (uint8_t)(i * 7u + 3u)) outside_ok = 0;
    }
    printf("device=stm32f4 first_sector=%u erases=", (unsigned)F4_FIRST);
    for (uint32_t s = 0; s < POET_STM32F4_SECTORS; ++s) printf("%s%u", s ? "," : "", (unsigned)sim_f4_state.erases[s]);
    printf(" violations=%u bit_violations=%u programs=%u outside_ok=%d", (unsigned)sim_f4_state.violations,
           (unsigned)sim_f4_state.bit_violations, (unsigned)sim_f4_state.programs, outside_ok);
    if (!outside_ok) errors += 1u;
    return errors + sim_f4_state.violations + sim_f4_state.bit_violations;
}
#else
#define SPI_BASE (64u * 1024u)
#ifndef SPI_SECTORS
#define SPI_SECTORS 24u
#endif
static poet_spi_nor nor = {0};
int sim_device_setup(poet_nor_device *dev)
{
    sim_nor_reset();
    for (uint32_t i = 0; i < SPI_BASE; ++i) sim_nor_state.mem[i] = (uint8_t)(i * 7u + 3u);
    nor.transfer = sim_nor_transfer;
    nor.base = SPI_BASE;
    nor.num_sectors = SPI_SECTORS;
    nor.max_polls = 1000;
    return poet_spi_nor_device(&nor, dev);
}
uint32_t sim_device_report(void)
{
    uint32_t errors = 0;
    int outside_ok = 1;
    for (uint32_t i = 0; i < SPI_BASE; ++i) {
        if (sim_nor_state.mem[i] != (uint8_t)(i * 7u + 3u)) outside_ok = 0;
    }
    for (uint32_t i = SPI_BASE + SPI_SECTORS * SIM_NOR_SECTOR; i < SIM_NOR_BYTES; ++i) {
        if (sim_nor_state.mem[i] != 0xFFu) outside_ok = 0;
    }
    printf("device=spi_nor jedec=%02x%02x%02x sectors=%u erases=", nor.jedec_id[0], nor.jedec_id[1], nor.jedec_id[2],
           (unsigned)SPI_SECTORS);
    for (uint32_t s = 0; s < SPI_SECTORS; ++s) {
        printf("%s%u", s ? "," : "", (unsigned)sim_nor_state.erases[SPI_BASE / SIM_NOR_SECTOR + s]);
    }
    printf(" violations=%u bit_violations=%u programs=%u page_wraps=%u outside_ok=%d",
           (unsigned)sim_nor_state.violations, (unsigned)sim_nor_state.bit_violations,
           (unsigned)sim_nor_state.programs, (unsigned)sim_nor_state.page_wraps, outside_ok);
    if (!outside_ok) errors += 1u;
    return errors + sim_nor_state.violations + sim_nor_state.bit_violations + sim_nor_state.page_wraps;
}
#endif

