/* Platform interface (poet/platform.h) and target services (poet_target.h) for a Linux/POSIX host.
 * Storage is an anonymous temporary file (tmpfile(); bytes never written read back as zero), so it
 * does not inflate the program's RAM; ticks are CLOCK_MONOTONIC nanoseconds (not deterministic).
 * Stack and heap are not measured on the host (the functions return 0). Storage calls go through the
 * fault injector of poet_fault.h (inactive unless a test arms it). */
#define _POSIX_C_SOURCE 199309L

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "poet/platform.h"
#include "poet_target.h"
#define POET_FAULT_IMPLEMENTATION
#include "poet_fault.h"

#ifndef POET_TARGET_NAME
#define POET_TARGET_NAME "host"
#endif
#ifndef POET_HOST_STORAGE_BYTES
#define POET_HOST_STORAGE_BYTES (256ul * 1024ul * 1024ul)
#endif

static FILE *poet_storage_file;
static poet_storage_stats_t poet_storage_counters;

/* Line-buffer stdout even when it is a pipe, so a driver can stream per-step output. */
__attribute__((constructor)) static void poet_host_line_buffer_stdout(void)
{
    setvbuf(stdout, NULL, _IOLBF, BUFSIZ);
}

static FILE *poet_storage_open(void)
{
    if (poet_storage_file == NULL) {
        poet_storage_file = tmpfile();
    }
    return poet_storage_file;
}

static int poet_storage_span_ok(uint32_t offset, size_t bytes)
{
    return offset <= POET_HOST_STORAGE_BYTES && bytes <= POET_HOST_STORAGE_BYTES - offset;
}

/* FLIP after a write: the stored byte with the chosen bit inverted. */
static int poet_storage_flip(FILE *f, uint32_t offset, size_t bit)
{
    unsigned char b;
    long at = (long)offset + (long)(bit / 8u);
    if (fflush(f) != 0 || fseek(f, at, SEEK_SET) != 0 || fread(&b, 1, 1, f) != 1) return -1;
    b = (unsigned char)(b ^ (1u << (bit % 8u)));
    if (fseek(f, at, SEEK_SET) != 0 || fwrite(&b, 1, 1, f) != 1) return -1;
    return 0;
}

int poet_storage_write(uint32_t offset, const void *src, size_t bytes)
{
    FILE *f = poet_storage_open();
    if (f == NULL || !poet_storage_span_ok(offset, bytes) || fseek(f, (long)offset, SEEK_SET) != 0) {
        return -1;
    }
    poet_fault_action fault = poet_fault_next(bytes, 1);
    if (fault.action == POET_FAULT_FAIL) {
        return -1;
    }
    if (fault.action == POET_FAULT_TEAR) {
        if (fwrite(src, 1, fault.cut, f) == fault.cut) {
            fflush(f);
        }
        poet_fault_power_off();
    }
    if (fwrite(src, 1, bytes, f) != bytes) {
        return -1;
    }
    if (fault.action == POET_FAULT_FLIP && poet_storage_flip(f, offset, fault.bit) != 0) {
        return -1;
    }
    poet_storage_counters.bytes_written += bytes;
    poet_storage_counters.writes += 1u;
    return 0;
}

int poet_storage_read(uint32_t offset, void *dst, size_t bytes)
{
    FILE *f = poet_storage_open();
    if (f == NULL || !poet_storage_span_ok(offset, bytes) || fseek(f, (long)offset, SEEK_SET) != 0) {
        return -1;
    }
    poet_fault_action fault = poet_fault_next(bytes, 0);
    if (fault.action == POET_FAULT_FAIL) {
        memset(dst, 0xA5, bytes);
        return -1;
    }
    if (fault.action == POET_FAULT_TEAR) {
        poet_fault_power_off();
    }
    size_t got = fread(dst, 1, bytes, f);
    if (got < bytes) {
        if (ferror(f)) {
            return -1;
        }
        clearerr(f);
        memset((uint8_t *)dst + got, 0, bytes - got); /* never written: zeros, as in the QEMU targets */
    }
    if (fault.action == POET_FAULT_FLIP) {
        ((uint8_t *)dst)[fault.bit / 8u] ^= (uint8_t)(1u << (fault.bit % 8u));
    }
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
    return (uint32_t)POET_HOST_STORAGE_BYTES;
}

uint64_t poet_ticks(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
}

void poet_log(const char *line)
{
    fputs(line, stdout);
    fputc('\n', stdout);
    fflush(stdout);
}

uint32_t poet_target_stack_size(void)
{
    return 0u;
}

uint32_t poet_target_stack_used(void)
{
    return 0u;
}

uint32_t poet_target_heap_size(void)
{
    return 0u;
}

uint32_t poet_target_heap_used(void)
{
    return 0u;
}

const char *poet_target_name(void)
{
    return POET_TARGET_NAME;
}
