/* The platform interface: what a board port implements for the generated training code.
 * Everything else in runtime_c/ is portable C99 with no I/O and no malloc. */
#ifndef POET_PLATFORM_H
#define POET_PLATFORM_H

#include <stddef.h>
#include <stdint.h>

/* Secondary storage (SD card, SPI flash, internal flash) used for paging.
 * Offsets are bytes from the start of poet-edge's storage area. Return 0 on success. */
int poet_storage_write(uint32_t offset, const void *src, size_t bytes);
int poet_storage_read(uint32_t offset, void *dst, size_t bytes);

/* A monotonically increasing tick counter (cycles on silicon, instructions/ticks in QEMU). */
uint64_t poet_ticks(void);

/* Write one line of text (no trailing newline needed) to the board's log output. */
void poet_log(const char *line);

#endif
