/* Host simulation of a SPI NOR chip (spi_nor_sim.c). */
#ifndef POET_SPI_NOR_SIM_H
#define POET_SPI_NOR_SIM_H

#include <stddef.h>
#include <stdint.h>

#define SIM_NOR_BYTES (2u * 1024u * 1024u)
#define SIM_NOR_SECTOR 4096u

typedef struct {
    uint8_t mem[SIM_NOR_BYTES];
    uint32_t erases[SIM_NOR_BYTES / SIM_NOR_SECTOR];
    uint32_t violations, bit_violations, programs, transfers, page_wraps;
    int wel;
    uint32_t busy;
    int pending; /* 0 none, 1 erase, 2 program */
    uint32_t p_addr, p_len;
    uint8_t p_data[256];
} sim_nor;

extern sim_nor sim_nor_state;
void sim_nor_reset(void);
int sim_nor_transfer(void *user, const uint8_t *cmd, size_t cmd_bytes, const uint8_t *tx, size_t tx_bytes,
                     uint8_t *rx, size_t rx_bytes);

#endif
