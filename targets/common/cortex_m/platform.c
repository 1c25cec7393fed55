/* Platform interface (poet/platform.h) and target services (poet_target.h) for the QEMU Cortex-M
 * targets. Storage is a memory region outside the RAM budget (linker region STORAGE), read and
 * written with memcpy. Ticks come from SysTick (default; exact under QEMU -icount) or from
 * DWT->CYCCNT when built with -DPOET_TICKS_DWT (real silicon; QEMU's DWT reads 0). */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "cortex_m.h"
#include "poet/platform.h"
#include "poet_target.h"
#ifdef POET_FAULTS /* fault injection for tests (poet_fault.h) */
#define POET_FAULT_IMPLEMENTATION
#include "poet_fault.h"
#endif

#ifndef POET_TARGET_NAME
#define POET_TARGET_NAME "cortex-m"
#endif

static poet_storage_stats_t poet_storage_counters;
static uint8_t *poet_heap_brk = __poet_heap_start;

/* ---- paging storage ---------------------------------------------------------------------- */

static int poet_storage_span_ok(uint32_t offset, size_t bytes)
{
    size_t capacity = (size_t)(__poet_storage_end - __poet_storage_start);
    return offset <= capacity && bytes <= capacity - offset;
}

int poet_storage_write(uint32_t offset, const void *src, size_t bytes)
{
    if (!poet_storage_span_ok(offset, bytes)) {
        return -1;
    }
#ifdef POET_FAULTS
    poet_fault_action fault = poet_fault_next(bytes, 1);
    if (fault.action == POET_FAULT_FAIL) {
        return -1;
    }
    if (fault.action == POET_FAULT_TEAR) {
        memcpy(__poet_storage_start + offset, src, fault.cut);
        poet_fault_power_off();
    }
#endif
    memcpy(__poet_storage_start + offset, src, bytes);
#ifdef POET_FAULTS
    if (fault.action == POET_FAULT_FLIP) {
        __poet_storage_start[offset + fault.bit / 8u] ^= (uint8_t)(1u << (fault.bit % 8u));
    }
#endif
    poet_storage_counters.bytes_written += bytes;
    poet_storage_counters.writes += 1u;
    return 0;
}

int poet_storage_read(uint32_t offset, void *dst, size_t bytes)
{
    if (!poet_storage_span_ok(offset, bytes)) {
        return -1;
    }
#ifdef POET_FAULTS
    poet_fault_action fault = poet_fault_next(bytes, 0);
    if (fault.action == POET_FAULT_FAIL) {
        memset(dst, 0xA5, bytes);
        return -1;
    }
    if (fault.action == POET_FAULT_TEAR) {
        poet_fault_power_off();
    }
#endif
    memcpy(dst, __poet_storage_start + offset, bytes);
#ifdef POET_FAULTS
    if (fault.action == POET_FAULT_FLIP) {
        ((uint8_t *)dst)[fault.bit / 8u] ^= (uint8_t)(1u << (fault.bit % 8u));
    }
#endif
    poet_storage_counters.bytes_read += bytes;
    poet_storage_counters.reads += 1u;
    return 0;
}

void poet_target_storage_stats(poet_storage_stats_t *out)
{
    *out = poet_storage_counters;
}

void poet_target_storage_reset_stats(void)
{
    memset(&poet_storage_counters, 0, sizeof poet_storage_counters);
}

uint32_t poet_target_storage_capacity(void)
{
    return (uint32_t)(__poet_storage_end - __poet_storage_start);
}

/* ---- ticks ---------------------------------------------------------------------------------- */

static volatile uint32_t poet_tick_wraps;

#if defined(POET_TICKS_DWT)
static uint32_t poet_dwt_last;

void poet_cortex_m_ticks_init(void)
{
    POET_DEMCR |= (1u << 24); /* TRCENA */
    POET_DWT_CYCCNT = 0u;
    POET_DWT_CTRL |= 1u; /* CYCCNTENA */
    /* SysTick only guarantees that a 32-bit CYCCNT wrap is never missed. */
    POET_SYST_RVR = POET_SYSTICK_RELOAD;
    POET_SYST_CVR = 0u;
    POET_SYST_CSR = 7u;
}

/* Extends CYCCNT to 64 bits; called from thread code and from SysTick (at least every 2^24 cycles). */
uint64_t poet_ticks(void)
{
    uint32_t primask;
    __asm__ volatile("mrs %0, primask\n cpsid i" : "=r"(primask) : : "memory");
    uint32_t now = POET_DWT_CYCCNT;
    if (now < poet_dwt_last) {
        poet_tick_wraps = poet_tick_wraps + 1u;
    }
    poet_dwt_last = now;
    uint64_t ticks = ((uint64_t)poet_tick_wraps << 32) | now;
    __asm__ volatile("msr primask, %0" : : "r"(primask) : "memory");
    return ticks;
}

void poet_cortex_m_ticks_isr(void)
{
    (void)poet_ticks();
}
#else
void poet_cortex_m_ticks_init(void)
{
    POET_SYST_RVR = POET_SYSTICK_RELOAD;
    POET_SYST_CVR = 0u;
    POET_SYST_CSR = 7u; /* ENABLE | TICKINT | CLKSOURCE = processor clock */
}

/* SysTick counts down from 2^24-1 at the processor clock; the handler counts wraps.
 * Must not be called with interrupts masked. */
uint64_t poet_ticks(void)
{
    uint32_t before;
    uint32_t after;
    uint32_t value;
    do {
        before = poet_tick_wraps;
        value = POET_SYST_CVR;
        after = poet_tick_wraps;
    } while (before != after);
    return (uint64_t)before * (POET_SYSTICK_RELOAD + 1u) + (POET_SYSTICK_RELOAD - value);
}

void poet_cortex_m_ticks_isr(void)
{
    poet_tick_wraps = poet_tick_wraps + 1u;
}
#endif

/* ---- log ------------------------------------------------------------------------------------ */

void poet_log(const char *line)
{
    fputs(line, stdout);
    fputc('\n', stdout);
}

/* ---- stack and heap ------------------------------------------------------------------------- */

uint32_t poet_target_stack_size(void)
{
    return (uint32_t)((uintptr_t)__poet_stack_top - (uintptr_t)__poet_stack_limit);
}

uint32_t poet_target_stack_used(void)
{
    const uint32_t *p = __poet_stack_limit;
    while (p < __poet_stack_top && *p == POET_STACK_PAINT) {
        ++p;
    }
    return (uint32_t)((uintptr_t)__poet_stack_top - (uintptr_t)p);
}

uint32_t poet_target_heap_size(void)
{
    return (uint32_t)(__poet_heap_end - __poet_heap_start);
}

uint32_t poet_target_heap_used(void)
{
    return (uint32_t)(poet_heap_brk - __poet_heap_start);
}

/* newlib's malloc (used by stdio's FILE table, stream buffers and printf's dtoa) grows through
 * _sbrk; it is confined to the fixed heap region (overrides librdimon's weak _sbrk). */
void *_sbrk(ptrdiff_t increment);
void *_sbrk(ptrdiff_t increment)
{
    ptrdiff_t room = __poet_heap_end - poet_heap_brk;
    ptrdiff_t used = poet_heap_brk - __poet_heap_start;
    if (increment > room || -increment > used) {
        errno = ENOMEM;
        return (void *)-1;
    }
    uint8_t *previous = poet_heap_brk;
    poet_heap_brk += increment;
    return previous;
}

const char *poet_target_name(void)
{
    return POET_TARGET_NAME;
}
