/* The STM32F405 flash interface simulated on the host. NOR semantics: a program can only clear bits
 * (the stored byte becomes old AND new; asking for a 0 -> 1 change counts a bit violation), an erase sets
 * one whole sector (4 x 16 KB, 64 KB, 7 x 128 KB) to 0xFF and is the only way back to 1. The controller as
 * RM0090 describes it: locked after reset until KEY1 then KEY2 are written to KEYR (a wrong key locks it
 * for good); writes to the flash array need PG set and the access width PSIZE selects (else PGSERR,
 * PGPERR), naturally aligned (else PGAERR); STRT with SER erases sector SNB; an operation completes only
 * after BSY has been read as set a few times, so a driver that does not poll BSY reads stale data. The
 * simulator is stricter than the chip in one way: writing CR or the flash array while BSY is set counts as
 * a violation (the chip stalls the bus instead). */
#include "stm32f4_sim.h"

#include <string.h>

sim_f4 sim_f4_state;
#define S sim_f4_state
#define BUSY_READS 3u

void sim_f4_reset(void)
{
    memset(&S, 0, sizeof S);
    memset(S.mem, 0xFF, sizeof S.mem);
    S.locked = 1;
    S.regs.CR = POET_STM32F4_CR_LOCK;
}

static void sim_f4_complete(void)
{
    if (S.pending == 1) {
        memset(S.mem + poet_stm32f4_sector_offset(S.p_sector), 0xFF, poet_stm32f4_sector_bytes(S.p_sector));
        S.erases[S.p_sector] += 1u;
    } else if (S.pending == 2) {
        for (uint32_t i = 0; i < S.p_width; ++i) {
            uint8_t want = (uint8_t)(S.p_value >> (8u * i));
            uint8_t *cell = &S.mem[S.p_addr + i];
            if ((uint8_t)(want & ~*cell) != 0u) S.bit_violations += 1u;
            *cell &= want;
        }
        S.programs += 1u;
    }
    S.pending = 0;
    S.regs.SR &= ~POET_STM32F4_SR_BSY;
    S.regs.SR |= POET_STM32F4_SR_EOP;
}

static void sim_f4_start(int kind)
{
    S.pending = kind;
    S.busy = BUSY_READS;
    S.regs.SR |= POET_STM32F4_SR_BSY;
}

uint32_t sim_f4_reg_read(volatile uint32_t *reg)
{
    if (reg == &S.regs.SR) {
        S.sr_reads += 1u;
        uint32_t value = S.regs.SR;
        if (S.busy > 0u && --S.busy == 0u) sim_f4_complete();
        return value;
    }
    if (reg == &S.regs.CR) return (S.regs.CR & ~POET_STM32F4_CR_LOCK) | (S.locked ? POET_STM32F4_CR_LOCK : 0u);
    return *reg;
}

void sim_f4_reg_write(volatile uint32_t *reg, uint32_t value)
{
    if (reg == &S.regs.KEYR) {
        if (!S.locked || S.key_stage < 0) {
            S.violations += 1u; /* keys written while unlocked, or after a wrong key */
        } else if (S.key_stage == 0 && value == POET_STM32F4_KEY1) {
            S.key_stage = 1;
        } else if (S.key_stage == 1 && value == POET_STM32F4_KEY2) {
            S.locked = 0;
            S.key_stage = 0;
        } else {
            S.key_stage = -1; /* locked until reset */
            S.violations += 1u;
        }
        return;
    }
    if (reg == &S.regs.SR) {
        S.regs.SR &= ~(value & (POET_STM32F4_SR_ERRORS | POET_STM32F4_SR_EOP));
        return;
    }
    if (reg == &S.regs.ACR) {
        S.regs.ACR = value & ~POET_STM32F4_ACR_DCRST;
        return;
    }
    if (reg != &S.regs.CR) {
        S.violations += 1u;
        return;
    }
    if (S.busy > 0u) S.violations += 1u; /* CR written without waiting for BSY = 0 */
    if (value & POET_STM32F4_CR_LOCK) {
        S.locked = 1;
        S.key_stage = S.key_stage < 0 ? -1 : 0;
        S.regs.CR = POET_STM32F4_CR_LOCK;
        return;
    }
    if (S.locked) {
        S.violations += 1u; /* ignored by the chip */
        return;
    }
    S.regs.CR = value;
    if (value & POET_STM32F4_CR_STRT) {
        uint32_t snb = (value & POET_STM32F4_CR_SNB_MASK) >> POET_STM32F4_CR_SNB_SHIFT;
        if (!(value & POET_STM32F4_CR_SER) || (value & POET_STM32F4_CR_PG) || snb >= POET_STM32F4_SECTORS) {
            S.regs.SR |= POET_STM32F4_SR_PGSERR;
            S.violations += 1u;
            return;
        }
        S.p_sector = snb;
        sim_f4_start(1);
    }
}

void sim_f4_flash_write(uintptr_t addr, uint64_t value, uint32_t width)
{
    uintptr_t base = (uintptr_t)S.mem;
    if (addr < base || addr + width > base + SIM_F4_FLASH_BYTES) {
        S.violations += 1u;
        return;
    }
    if (S.busy > 0u) S.violations += 1u;
    uint32_t psize = (S.regs.CR & POET_STM32F4_CR_PSIZE_MASK) >> POET_STM32F4_CR_PSIZE_SHIFT;
    if (S.locked || !(S.regs.CR & POET_STM32F4_CR_PG) || (S.regs.CR & POET_STM32F4_CR_SER)) {
        S.regs.SR |= POET_STM32F4_SR_PGSERR;
        S.violations += 1u;
        return;
    }
    if (width != (1u << psize)) {
        S.regs.SR |= POET_STM32F4_SR_PGPERR;
        S.violations += 1u;
        return;
    }
    if ((addr - base) % width != 0u) {
        S.regs.SR |= POET_STM32F4_SR_PGAERR;
        S.violations += 1u;
        return;
    }
    S.p_addr = (uint32_t)(addr - base);
    S.p_width = width;
    S.p_value = value;
    sim_f4_start(2);
}
