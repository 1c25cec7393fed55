/* Minimal startup for the STM32F405/407: the vector table at 0x08000000 (initial stack pointer, reset and
 * the 14 Cortex-M exceptions, 82 peripheral interrupts to one default handler), .data copied from flash,
 * .bss zeroed, the FPU enabled (CPACR CP10/CP11 full access) before main. */
#include <stdint.h>

extern uint32_t _sidata, _sdata, _edata, _sbss, _ebss, _estack;
int main(void);
void Reset_Handler(void);
void Default_Handler(void);

void Default_Handler(void)
{
    for (;;) {
    }
}

void Reset_Handler(void)
{
    uint32_t *src = &_sidata;
    for (uint32_t *dst = &_sdata; dst < &_edata;) *dst++ = *src++;
    for (uint32_t *dst = &_sbss; dst < &_ebss;) *dst++ = 0u;
#if defined(__ARM_FP)
    *(volatile uint32_t *)0xE000ED88u |= 0xFu << 20; /* SCB->CPACR: CP10, CP11 */
    __asm__ volatile("dsb\n isb" ::: "memory");
#endif
    (void)main();
    for (;;) {
    }
}

#define POET_VECTORS (16 + 82)
__attribute__((section(".isr_vector"), used)) const uintptr_t poet_vectors[POET_VECTORS] = {
    (uintptr_t)&_estack,
    (uintptr_t)Reset_Handler,
    [2 ... POET_VECTORS - 1] = (uintptr_t)Default_Handler,
};
