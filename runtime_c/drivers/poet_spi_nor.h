/* A generic SPI NOR flash chip (W25Qxx, MX25Lxx, IS25LPxx, AT25SFxx, ...) as a poet_nor_device
 * (poet_nor_log.h), over a SPI transfer function the board supplies. JEDEC commands, 3-byte addresses
 * (chips up to 16 MB): READ 0x03, PAGE PROGRAM 0x02 (256-byte pages: a program never crosses a page
 * boundary, the chip would wrap to the page start), SECTOR ERASE 0x20 (4 KB), WRITE ENABLE 0x06 before each
 * program and erase, READ STATUS REGISTER 0x05 polled until WIP (bit 0) clears, JEDEC ID 0x9F at setup.
 * Every program and erase is read back and checked. */
#ifndef POET_SPI_NOR_H
#define POET_SPI_NOR_H

#include <stddef.h>
#include <stdint.h>

#include "poet_nor_log.h"

#define POET_SPI_NOR_CMD_WREN 0x06u
#define POET_SPI_NOR_CMD_RDSR 0x05u
#define POET_SPI_NOR_CMD_READ 0x03u
#define POET_SPI_NOR_CMD_PP 0x02u
#define POET_SPI_NOR_CMD_SE 0x20u
#define POET_SPI_NOR_CMD_RDID 0x9Fu
#define POET_SPI_NOR_SR_WIP 0x01u
#define POET_SPI_NOR_SR_WEL 0x02u
#define POET_SPI_NOR_PAGE_BYTES 256u
#define POET_SPI_NOR_SECTOR_BYTES 4096u

/* One transaction with chip select held low throughout: send cmd_bytes of cmd, then tx_bytes of tx (may
 * be 0), then clock in rx_bytes into rx (may be 0), then release chip select. Returns 0 on success. */
typedef int (*poet_spi_transfer_fn)(void *user, const uint8_t *cmd, size_t cmd_bytes, const uint8_t *tx,
                                    size_t tx_bytes, uint8_t *rx, size_t rx_bytes);

typedef struct {
    poet_spi_transfer_fn transfer;
    void *user;           /* passed to transfer (the SPI handle, the chip-select pin) */
    uint32_t base;        /* first byte of the area the log owns (4 KB aligned) */
    uint32_t num_sectors; /* 4 KB sectors in it (at least 3) */
    uint32_t max_polls;   /* status polls before an operation counts as failed (0: wait forever) */
    uint8_t jedec_id[3];  /* manufacturer, memory type, capacity: read by poet_spi_nor_device */
} poet_spi_nor;

/* Reads the JEDEC ID (fails with -1 if the chip does not answer: all 0x00 or all 0xFF), checks the area
 * (base 4 KB aligned, at least 3 sectors, within 16 MB) and fills dev. */
int poet_spi_nor_device(poet_spi_nor *nor, poet_nor_device *dev);

#endif
