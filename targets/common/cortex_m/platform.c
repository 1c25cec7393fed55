/* Platform interface (poet/platform.h) and target services (poet_target.h) for the QEMU Cortex-M
 * targets. Storage is a memory region outside the RAM budget (linker region STORAGE), read and
 * written with memcpy; or, built with -DPOET_STORAGE_FILE='"path"' (poet run --storage-file), a host
 * file reached through semihosting (SYS_OPEN, SYS_SEEK, SYS_READ, SYS_WRITE), as an SD card driver would
 * reach its card: every transfer is a seek and one block of bytes, counted here and printed at exit. Ticks come from SysTick (default; exact under QEMU -icount) or from
 * DWT->CYCCNT when built with -DPOET_TICKS_DWT (real silicon; QEMU's DWT reads 0). */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
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

/* The storage's bytes: the STORAGE region's, or with a storage file POET_STORAGE_FILE_BYTES when given (the
 * STM32F405 target's second RAM bank takes the region QEMU would page to). */
static size_t poet_storage_bytes(void)
{
#if defined(POET_STORAGE_FILE) && defined(POET_STORAGE_FILE_BYTES)
    return (size_t)POET_STORAGE_FILE_BYTES;
#else
    return (size_t)(__poet_storage_end - __poet_storage_start);
#endif
}

static int poet_storage_span_ok(uint32_t offset, size_t bytes)
{
    size_t capacity = poet_storage_bytes();
    return offset <= capacity && bytes <= capacity - offset;
}

#if defined(POET_STORAGE_FILE)
#if defined(POET_FAULTS)
#error "fault injection (POET_FAULTS) acts on the memory-backed storage only"
#endif
/* Semihosting (Arm "Semihosting for AArch32 and AArch64"): the operation in r0, a pointer to its
 * argument block in r1, BKPT 0xAB on M-profile; the result comes back in r0. */
#define POET_SYS_OPEN 0x01
#define POET_SYS_CLOSE 0x02
#define POET_SYS_WRITE 0x05
#define POET_SYS_READ 0x06
#define POET_SYS_SEEK 0x0A
#define POET_SYS_MODE_WPB 7 /* "w+b": created or truncated, read and written */

static int32_t poet_semihost(int32_t op, const void *args)
{
    register int32_t r0 __asm__("r0") = op;
    register const void *r1 __asm__("r1") = args;
    __asm__ volatile("bkpt 0xab" : "+r"(r0) : "r"(r1) : "memory");
    return r0;
}

static int32_t poet_storage_handle = -1;
static uint64_t poet_file_bytes_written, poet_file_bytes_read;
static uint32_t poet_file_writes, poet_file_reads;

/* At exit: what went through the file, and the file closed. */
static void poet_storage_file_report(void)
{
    printf("storage_file bytes_written %lu bytes_read %lu writes %lu reads %lu\n",
           (unsigned long)poet_file_bytes_written, (unsigned long)poet_file_bytes_read,
           (unsigned long)poet_file_writes, (unsigned long)poet_file_reads);
    uint32_t args[1] = {(uint32_t)poet_storage_handle};
    (void)poet_semihost(POET_SYS_CLOSE, args);
}

/* The file, opened (emptied) at the first transfer; -1 when the host refuses it. */
static int32_t poet_storage_file(void)
{
    if (poet_storage_handle < 0) {
        static const char name[] = POET_STORAGE_FILE;
        uint32_t args[3] = {(uint32_t)(uintptr_t)name, POET_SYS_MODE_WPB, (uint32_t)(sizeof name - 1u)};
        poet_storage_handle = poet_semihost(POET_SYS_OPEN, args);
        if (poet_storage_handle >= 0 && atexit(poet_storage_file_report) != 0) {
            return -1;
        }
    }
    return poet_storage_handle;
}

/* One transfer at offset: SYS_SEEK, then SYS_WRITE or SYS_READ of all the bytes (they return the count
 * NOT transferred: anything but 0 is an error). Counts the bytes that moved. */
static int poet_storage_file_transfer(uint32_t offset, void *buf, size_t bytes, int write)
{
    int32_t h = poet_storage_file();
    if (h < 0) {
        return -1;
    }
    uint32_t seek[2] = {(uint32_t)h, offset};
    if (poet_semihost(POET_SYS_SEEK, seek) != 0) {
        return -1;
    }
    uint32_t args[3] = {(uint32_t)h, (uint32_t)(uintptr_t)buf, (uint32_t)bytes};
    int32_t left = poet_semihost(write ? POET_SYS_WRITE : POET_SYS_READ, args);
    if (left < 0 || (size_t)left > bytes) {
        return -1;
    }
    if (write) {
        poet_file_bytes_written += bytes - (size_t)left;
        poet_file_writes += 1u;
    } else {
        poet_file_bytes_read += bytes - (size_t)left;
        poet_file_reads += 1u;
    }
    return left == 0 ? 0 : -1;
}
#endif

int poet_storage_write(uint32_t offset, const void *src, size_t bytes)
{
    if (!poet_storage_span_ok(offset, bytes)) {
        return -1;
    }
#if defined(POET_STORAGE_FILE)
    if (poet_storage_file_transfer(offset, (void *)(uintptr_t)src, bytes, 1) != 0) {
        return -1;
    }
#else
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
#if defined(POET_STORAGE_FILE)
    if (poet_storage_file_transfer(offset, dst, bytes, 0) != 0) {
        return -1;
    }
#else
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
    return (uint32_t)poet_storage_bytes();
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
