/* Uses about SMOKE_STACK_BYTES of stack (default 6 KiB) in a recursive chain, then reports the
 * measured high-water mark; exit 0 if the measurement covers the use and fits the stack area. */
#include <stdint.h>
#include <stdio.h>

#include "poet_target.h"

#ifndef SMOKE_STACK_BYTES
#define SMOKE_STACK_BYTES 6144
#endif
#define SMOKE_FRAME_BYTES 256

static uint32_t smoke_recurse(uint32_t depth)
{
    volatile uint8_t frame[SMOKE_FRAME_BYTES];
    for (uint32_t i = 0; i < SMOKE_FRAME_BYTES; ++i) {
        frame[i] = (uint8_t)(i + depth);
    }
    uint32_t below = depth > 1u ? smoke_recurse(depth - 1u) : 0u;
    return below + frame[depth % SMOKE_FRAME_BYTES];
}

int main(void)
{
    uint32_t sum = smoke_recurse(SMOKE_STACK_BYTES / SMOKE_FRAME_BYTES);
    uint32_t used = poet_target_stack_used();
    uint32_t size = poet_target_stack_size();
    printf("sum=%lu stack_used=%lu stack_size=%lu\n", (unsigned long)sum, (unsigned long)used,
           (unsigned long)size);
    if (size == 0u) {
        return 0; /* not measured on this target (host) */
    }
    return used >= SMOKE_STACK_BYTES && used <= size ? 0 : 1;
}
