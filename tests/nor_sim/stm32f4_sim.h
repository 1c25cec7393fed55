/* Host simulation of the STM32F405 flash interface (RM0090 section 3): see stm32f4_sim.c. */
#ifndef POET_STM32F4_SIM_H
#define POET_STM32F4_SIM_H

#include <stdint.h>

#include "poet_stm32f4_flash.h"

#define SIM_F4_FLASH_BYTES (1024u * 1024u)

typedef struct {
    poet_stm32f4_flash_regs regs; /* the block the driver is pointed at */
    uint8_t mem[SIM_F4_FLASH_BYTES];
    uint32_t erases[POET_STM32F4_SECTORS];
    uint32_t violations;     /* protocol errors: write while busy, bad key, CR while locked, ... */
    uint32_t bit_violations; /* programs that asked a 0 bit to become 1 (needs an erase first) */
    uint32_t programs;       /* accepted flash writes */
    uint32_t sr_reads;
    /* internal */
    int locked;
    int key_stage;
    uint32_t busy;       /* SR reads left before the operation completes */
    int pending;         /* 0 none, 1 erase, 2 program */
    uint32_t p_addr, p_width, p_sector;
    uint64_t p_value;
} sim_f4;

extern sim_f4 sim_f4_state;
void sim_f4_reset(void);
uint32_t sim_f4_reg_read(volatile uint32_t *reg);
void sim_f4_reg_write(volatile uint32_t *reg, uint32_t value);
void sim_f4_flash_write(uintptr_t addr, uint64_t value, uint32_t width);

#endif
