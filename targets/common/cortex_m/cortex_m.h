/* Cortex-M system registers and linker symbols shared by startup.c and platform.c (private). */
#ifndef POET_CORTEX_M_H
#define POET_CORTEX_M_H

#include <stdint.h>

#define POET_REG(addr) (*(volatile uint32_t *)(addr))
#define POET_SYST_CSR POET_REG(0xE000E010u)
#define POET_SYST_RVR POET_REG(0xE000E014u)
#define POET_SYST_CVR POET_REG(0xE000E018u)
#define POET_CPACR POET_REG(0xE000ED88u)
#define POET_DEMCR POET_REG(0xE000EDFCu)
#define POET_DWT_CTRL POET_REG(0xE0001000u)
#define POET_DWT_CYCCNT POET_REG(0xE0001004u)

#define POET_SYSTICK_RELOAD 0x00FFFFFFu
#define POET_STACK_PAINT 0x5AC35AC3u

/* Provided by the linker script (link.ld.in). */
extern uint32_t __poet_data_load[], __poet_data_start[], __poet_data_end[];
extern uint32_t __poet_bss_start[], __poet_bss_end[];
extern uint8_t __poet_heap_start[], __poet_heap_end[];
extern uint32_t __poet_stack_limit[], __poet_stack_top[];
extern uint8_t __poet_storage_start[], __poet_storage_end[];

/* platform.c */
void poet_cortex_m_ticks_init(void);
void poet_cortex_m_ticks_isr(void);

#endif
