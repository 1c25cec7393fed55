/* Generic SPI NOR driver (poet_spi_nor.h). */
#include "poet_spi_nor.h"

#include <string.h>

static void poet_spi_nor_cmd(uint8_t *cmd, uint8_t op, uint32_t addr)
{
    cmd[0] = op;
    cmd[1] = (uint8_t)(addr >> 16);
    cmd[2] = (uint8_t)(addr >> 8);
    cmd[3] = (uint8_t)addr;
}

/* Polls the status register until WIP clears. */
static int poet_spi_nor_wait(poet_spi_nor *nor)
{
    const uint8_t cmd = POET_SPI_NOR_CMD_RDSR;
    uint32_t polls = 0;
    for (;;) {
        uint8_t sr;
        if (nor->transfer(nor->user, &cmd, 1, NULL, 0, &sr, 1) != 0) return -1;
        if ((sr & POET_SPI_NOR_SR_WIP) == 0u) return 0;
        if (nor->max_polls != 0u && ++polls >= nor->max_polls) return -1;
    }
}

static int poet_spi_nor_write_enable(poet_spi_nor *nor)
{
    const uint8_t cmd = POET_SPI_NOR_CMD_WREN;
    return nor->transfer(nor->user, &cmd, 1, NULL, 0, NULL, 0);
}

static int poet_spi_nor_read(void *ctx, uint32_t addr, void *dst, size_t bytes)
{
    poet_spi_nor *nor = (poet_spi_nor *)ctx;
    uint8_t cmd[4];
    poet_spi_nor_cmd(cmd, POET_SPI_NOR_CMD_READ, nor->base + addr);
    return nor->transfer(nor->user, cmd, sizeof cmd, NULL, 0, (uint8_t *)dst, bytes) == 0 ? 0 : -1;
}

/* Compares the chip's bytes at addr with expect (or with 0xFF when expect is NULL), in 64-byte reads. */
static int poet_spi_nor_check(poet_spi_nor *nor, uint32_t addr, const uint8_t *expect, size_t bytes)
{
    uint8_t buf[64];
    for (size_t done = 0; done < bytes; done += sizeof buf) {
        size_t n = bytes - done < sizeof buf ? bytes - done : sizeof buf;
        if (poet_spi_nor_read(nor, addr + (uint32_t)done, buf, n) != 0) return -1;
        for (size_t i = 0; i < n; ++i) {
            if (buf[i] != (expect ? expect[done + i] : 0xFFu)) return -1;
        }
    }
    return 0;
}

static int poet_spi_nor_program(void *ctx, uint32_t addr, const void *src, size_t bytes)
{
    poet_spi_nor *nor = (poet_spi_nor *)ctx;
    const uint8_t *in = (const uint8_t *)src;
    uint32_t at = addr;
    size_t left = bytes;
    while (left > 0u) {
        uint32_t room = POET_SPI_NOR_PAGE_BYTES - (nor->base + at) % POET_SPI_NOR_PAGE_BYTES;
        size_t n = left < room ? left : room;
        uint8_t cmd[4];
        poet_spi_nor_cmd(cmd, POET_SPI_NOR_CMD_PP, nor->base + at);
        if (poet_spi_nor_write_enable(nor) != 0 || nor->transfer(nor->user, cmd, sizeof cmd, in, n, NULL, 0) != 0 ||
            poet_spi_nor_wait(nor) != 0) {
            return -1;
        }
        in += n;
        at += (uint32_t)n;
        left -= n;
    }
    return poet_spi_nor_check(nor, addr, (const uint8_t *)src, bytes);
}

static int poet_spi_nor_erase(void *ctx, uint32_t sector)
{
    poet_spi_nor *nor = (poet_spi_nor *)ctx;
    if (sector >= nor->num_sectors) return -1;
#ifdef POET_NOR_TEST_SKIP_ERASE
    return 0; /* deliberately broken build: the host simulation must catch it */
#else
    uint32_t addr = sector * POET_SPI_NOR_SECTOR_BYTES;
    uint8_t cmd[4];
    poet_spi_nor_cmd(cmd, POET_SPI_NOR_CMD_SE, nor->base + addr);
    if (poet_spi_nor_write_enable(nor) != 0 || nor->transfer(nor->user, cmd, sizeof cmd, NULL, 0, NULL, 0) != 0 ||
        poet_spi_nor_wait(nor) != 0) {
        return -1;
    }
    return poet_spi_nor_check(nor, addr, NULL, POET_SPI_NOR_SECTOR_BYTES);
#endif
}

int poet_spi_nor_device(poet_spi_nor *nor, poet_nor_device *dev)
{
    if (nor == NULL || dev == NULL || nor->transfer == NULL || nor->base % POET_SPI_NOR_SECTOR_BYTES != 0u ||
        nor->num_sectors < 3u || nor->base > 0x1000000u ||
        nor->num_sectors > (0x1000000u - nor->base) / POET_SPI_NOR_SECTOR_BYTES) {
        return -1;
    }
    const uint8_t cmd = POET_SPI_NOR_CMD_RDID;
    if (poet_spi_nor_wait(nor) != 0 || nor->transfer(nor->user, &cmd, 1, NULL, 0, nor->jedec_id, 3) != 0) return -1;
    int all00 = nor->jedec_id[0] == 0x00u && nor->jedec_id[1] == 0x00u && nor->jedec_id[2] == 0x00u;
    int allff = nor->jedec_id[0] == 0xFFu && nor->jedec_id[1] == 0xFFu && nor->jedec_id[2] == 0xFFu;
    if (all00 || allff) return -1;
    dev->ctx = nor;
    dev->sector_bytes = POET_SPI_NOR_SECTOR_BYTES;
    dev->num_sectors = nor->num_sectors;
    dev->read = poet_spi_nor_read;
    dev->program = poet_spi_nor_program;
    dev->erase = poet_spi_nor_erase;
    return 0;
}
