/* Reset and exception handling for the QEMU Cortex-M targets (M4F, M7, M33).
 * Vector table, FPU enable before any float code, .data copy, .bss zero, stack painting,
 * SysTick tick counter, semihosting stdio with static line buffers (no heap), then main() and exit(). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "cortex_m.h"

#define POET_IRQ_COUNT 48
#define POET_SYS_WRITE0 0x04
#define POET_SYS_EXIT_EXTENDED 0x20
#define POET_ADP_APPLICATION_EXIT 0x20026
#define POET_FAULT_EXIT_CODE 125
#define POET_STDIO_BUFFER_BYTES 256

extern int main(void);
extern void initialise_monitor_handles(void);

void Reset_Handler(void);
void poet_reset_c(void);
void poet_default_handler(void);
void SysTick_Handler(void);

typedef void (*poet_handler_t)(void);

typedef struct {
    uint32_t *initial_sp;
    poet_handler_t handlers[15 + POET_IRQ_COUNT];
} poet_vector_table_t;

__attribute__((section(".vectors"), used)) const poet_vector_table_t poet_vectors = {
    __poet_stack_top,
    {
        Reset_Handler,        /* Reset */
        poet_default_handler, /* NMI */
        poet_default_handler, /* HardFault */
        poet_default_handler, /* MemManage */
        poet_default_handler, /* BusFault */
        poet_default_handler, /* UsageFault */
        poet_default_handler, /* SecureFault (v8-M) */
        0, 0, 0,
        poet_default_handler, /* SVCall */
        poet_default_handler, /* DebugMon */
        0,
        poet_default_handler, /* PendSV */
        SysTick_Handler,      /* SysTick */
        [15 ... 15 + POET_IRQ_COUNT - 1] = poet_default_handler,
    },
};

static char poet_stdout_buffer[POET_STDIO_BUFFER_BYTES];
static char poet_stderr_buffer[POET_STDIO_BUFFER_BYTES];

static int poet_semihost(int op, void *arg)
{
    register int r0 __asm__("r0") = op;
    register void *r1 __asm__("r1") = arg;
    __asm__ volatile("bkpt 0xab" : "+r"(r0) : "r"(r1) : "memory");
    return r0;
}

/* Enable CP10/CP11 (the FPU) before the compiler may emit any VFP instruction, then go to C. */
__attribute__((naked, noreturn)) void Reset_Handler(void)
{
    __asm__ volatile(
#if defined(__ARM_FP)
        "ldr r0, =0xE000ED88\n"
        "ldr r1, [r0]\n"
        "orr r1, r1, #(0xF << 20)\n"
        "str r1, [r0]\n"
        "dsb\n"
        "isb\n"
#endif
        "ldr r0, =__poet_stack_top\n"
        "mov sp, r0\n"
        "b poet_reset_c\n");
}

static void poet_copy_data_zero_bss(void)
{
    const uint32_t *src = __poet_data_load;
    for (uint32_t *dst = __poet_data_start; dst < __poet_data_end;) {
        *dst++ = *src++;
    }
    for (uint32_t *dst = __poet_bss_start; dst < __poet_bss_end;) {
        *dst++ = 0u;
    }
}

/* Fill the stack area below the current frame with a pattern; platform.c finds the high-water mark. */
static void poet_paint_stack(void)
{
    uint32_t sp;
    __asm__ volatile("mov %0, sp" : "=r"(sp));
    volatile uint32_t *end = (volatile uint32_t *)(sp - 64u);
    for (volatile uint32_t *p = __poet_stack_limit; p < end; ++p) {
        *p = POET_STACK_PAINT;
    }
#if defined(__ARM_ARCH_8M_MAIN__)
    /* v8-M: a push below the limit raises a UsageFault (STKOF) instead of corrupting the heap. */
    __asm__ volatile("msr msplim, %0" : : "r"(__poet_stack_limit));
#endif
}

__attribute__((noreturn)) void poet_reset_c(void)
{
    poet_copy_data_zero_bss();
    poet_paint_stack();
    poet_cortex_m_ticks_init();
    initialise_monitor_handles();
    setvbuf(stdout, poet_stdout_buffer, _IOLBF, sizeof poet_stdout_buffer);
    setvbuf(stderr, poet_stderr_buffer, _IOLBF, sizeof poet_stderr_buffer);
    exit(main());
}

/* newlib's __libc_init_array/__libc_fini_array call these; crti.o is not linked (-nostartfiles). */
void _init(void);
void _fini(void);
void _init(void)
{
}
void _fini(void)
{
}

void SysTick_Handler(void)
{
    poet_cortex_m_ticks_isr();
}

/* Any fault or unexpected interrupt: report over semihosting without stdio and exit with 125. */
__attribute__((noreturn)) void poet_default_handler(void)
{
    uint32_t ipsr;
    __asm__ volatile("mrs %0, ipsr" : "=r"(ipsr));
    static char message[] = "poet: fault or unexpected exception, IPSR=  \n";
    message[sizeof message - 4] = (char)('0' + (ipsr / 10u) % 10u);
    message[sizeof message - 3] = (char)('0' + ipsr % 10u);
    poet_semihost(POET_SYS_WRITE0, message);
    uint32_t block[2] = {POET_ADP_APPLICATION_EXIT, POET_FAULT_EXIT_CODE};
    for (;;) {
        poet_semihost(POET_SYS_EXIT_EXTENDED, block);
    }
}
