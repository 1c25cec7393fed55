/* Included by runtime_c/drivers/poet_stm32f4_flash.c through -DPOET_STM32F4_HOOKS='"stm32f4_hooks.h"':
 * every register access and every write into the flash array goes to the simulator (stm32f4_sim.c),
 * which enforces NOR semantics. */
#ifndef POET_STM32F4_HOOKS_H
#define POET_STM32F4_HOOKS_H

#include "stm32f4_sim.h"

static uint32_t poet_f4_reg_read(volatile uint32_t *reg)
{
    return sim_f4_reg_read(reg);
}
static void poet_f4_reg_write(volatile uint32_t *reg, uint32_t value)
{
    sim_f4_reg_write(reg, value);
}
static void poet_f4_flash_write8(uintptr_t addr, uint8_t v)
{
    sim_f4_flash_write(addr, v, 1u);
}
static void poet_f4_flash_write16(uintptr_t addr, uint16_t v)
{
    sim_f4_flash_write(addr, v, 2u);
}
static void poet_f4_flash_write32(uintptr_t addr, uint32_t v)
{
    sim_f4_flash_write(addr, v, 4u);
}
static void poet_f4_flash_write64(uintptr_t addr, uint64_t v)
{
    sim_f4_flash_write(addr, v, 8u);
}
static void poet_f4_barrier(void)
{
}

#endif
