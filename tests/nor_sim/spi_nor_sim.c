/* A SPI NOR chip simulated on the host, behind the transfer function of runtime_c/drivers/poet_spi_nor.h.
 * NOR semantics: PAGE PROGRAM (0x02) only clears bits (old AND new; a 0 -> 1 request counts a bit
 * violation) and wraps at the 256-byte page end like the real chip; SECTOR ERASE (0x20) sets a 4 KB sector
 * to 0xFF. Both need WRITE ENABLE (0x06) first (else ignored, counted) and clear it; while WIP is set only
 * READ STATUS (0x05) is accepted (anything else is a violation); WIP stays set for a few status reads. */
#include "spi_nor_sim.h"

#include <string.h>

sim_nor sim_nor_state;
#define N sim_nor_state
#define BUSY_READS 2u

void sim_nor_reset(void)
{
    memset(&N, 0, sizeof N);
    memset(N.mem, 0xFF, sizeof N.mem);
}

static uint32_t sim_nor_addr(const uint8_t *cmd)
{
    return ((uint32_t)cmd[1] << 16) | ((uint32_t)cmd[2] << 8) | cmd[3];
}

static void sim_nor_complete(void)
{
    if (N.pending == 1) {
        memset(N.mem + N.p_addr, 0xFF, SIM_NOR_SECTOR);
        N.erases[N.p_addr / SIM_NOR_SECTOR] += 1u;
    } else if (N.pending == 2) {
        for (uint32_t i = 0; i < N.p_len; ++i) {
            uint32_t a = (N.p_addr & ~0xFFu) | ((N.p_addr + i) & 0xFFu); /* wraps inside the page */
            if ((uint8_t)(N.p_data[i] & ~N.mem[a]) != 0u) N.bit_violations += 1u;
            N.mem[a] &= N.p_data[i];
        }
        N.programs += 1u;
    }
    N.pending = 0;
}

int sim_nor_transfer(void *user, const uint8_t *cmd, size_t cmd_bytes, const uint8_t *tx, size_t tx_bytes,
                     uint8_t *rx, size_t rx_bytes)
{
    (void)user;
    N.transfers += 1u;
    if (cmd_bytes == 0u) return -1;
    uint8_t op = cmd[0];
    if (op == 0x05u) { /* READ STATUS */
        for (size_t i = 0; i < rx_bytes; ++i) {
            rx[i] = (uint8_t)((N.busy > 0u ? 0x01u : 0u) | (N.wel ? 0x02u : 0u));
            if (N.busy > 0u && --N.busy == 0u) sim_nor_complete();
        }
        return 0;
    }
    if (N.busy > 0u) { /* the chip ignores every other command while busy */
        N.violations += 1u;
        return 0;
    }
    switch (op) {
    case 0x06u:
        N.wel = 1;
        return 0;
    case 0x9Fu:
        for (size_t i = 0; i < rx_bytes; ++i) rx[i] = i == 0 ? 0xEFu : i == 1 ? 0x40u : 0x18u; /* W25Q128 */
        return 0;
    case 0x03u: {
        if (cmd_bytes != 4u) break;
        uint32_t a = sim_nor_addr(cmd);
        for (size_t i = 0; i < rx_bytes; ++i) rx[i] = N.mem[(a + i) % SIM_NOR_BYTES];
        return 0;
    }
    case 0x02u:
        if (cmd_bytes != 4u || tx_bytes == 0u || tx_bytes > 256u) break;
        if (!N.wel) {
            N.violations += 1u; /* ignored without WRITE ENABLE */
            return 0;
        }
        N.p_addr = sim_nor_addr(cmd) % SIM_NOR_BYTES;
        N.p_len = (uint32_t)tx_bytes;
        memcpy(N.p_data, tx, tx_bytes);
        if ((N.p_addr & 0xFFu) + tx_bytes > 256u) N.page_wraps += 1u;
        N.pending = 2;
        N.busy = BUSY_READS;
        N.wel = 0;
        return 0;
    case 0x20u:
        if (cmd_bytes != 4u) break;
        if (!N.wel) {
            N.violations += 1u;
            return 0;
        }
        N.p_addr = (sim_nor_addr(cmd) % SIM_NOR_BYTES) & ~(SIM_NOR_SECTOR - 1u);
        N.pending = 1;
        N.busy = BUSY_READS;
        N.wel = 0;
        return 0;
    default:
        break;
    }
    N.violations += 1u;
    return 0;
}
