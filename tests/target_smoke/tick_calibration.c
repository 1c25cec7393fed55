/* Times a loop of a known instruction count (2 instructions x SMOKE_LOOPS iterations on Arm) and
 * prints the tick delta, from which the instructions-per-tick factor of a QEMU target follows. */
#include <stdint.h>
#include <stdio.h>

#include "poet/platform.h"

#ifndef SMOKE_LOOPS
#define SMOKE_LOOPS 1000000
#endif

int main(void)
{
    uint64_t t0 = poet_ticks();
#if defined(__arm__)
    __asm__ volatile("ldr r0, =%c0\n"
                     "1: subs r0, r0, #1\n"
                     "bne 1b\n"
                     :
                     : "i"(SMOKE_LOOPS)
                     : "r0", "cc");
#else
    for (volatile uint32_t i = 0; i < SMOKE_LOOPS; i = i + 1u) {
    }
#endif
    uint64_t t1 = poet_ticks();
    printf("instructions=%lu ticks=%lu\n", 2ul * SMOKE_LOOPS, (unsigned long)(t1 - t0));
    return t1 > t0 ? 0 : 1;
}
