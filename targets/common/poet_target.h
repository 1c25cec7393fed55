/* Target services beyond the platform interface (runtime_c/include/poet/platform.h):
 * measurements a harness prints at the end of a run. Every board port implements these.
 * No function here allocates memory. */
#ifndef POET_TARGET_H
#define POET_TARGET_H

#include <stddef.h>
#include <stdint.h>

/* Byte and transfer counts of poet_storage_read/poet_storage_write since reset
 * (or since the last poet_target_storage_reset_stats()). */
typedef struct {
    uint64_t bytes_written;
    uint64_t bytes_read;
    uint32_t writes;
    uint32_t reads;
} poet_storage_stats_t;

void poet_target_storage_stats(poet_storage_stats_t *out);
void poet_target_storage_reset_stats(void);
/* Bytes of paging storage available (offset + bytes must stay below this). */
uint32_t poet_target_storage_capacity(void);

/* Stack: bytes available between the top of RAM and the end of the heap, and the high-water mark
 * measured by stack painting (bytes ever used since reset). Both are 0 where unmeasured (host). */
uint32_t poet_target_stack_size(void);
uint32_t poet_target_stack_used(void);

/* Heap (newlib's stdio and dtoa allocate from it; generated code never does): size of the fixed
 * heap region and bytes handed out by _sbrk so far. Both are 0 on the host. */
uint32_t poet_target_heap_size(void);
uint32_t poet_target_heap_used(void);

/* The target's name, e.g. "qemu-cortex-m4" or "host". */
const char *poet_target_name(void);

#endif
