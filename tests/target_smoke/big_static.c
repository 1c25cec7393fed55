/* Needs SMOKE_BIG_BYTES of static RAM (default 64 KiB): linking it into a smaller budget must fail. */
#include <stdint.h>
#include <stdio.h>

#ifndef SMOKE_BIG_BYTES
#define SMOKE_BIG_BYTES 65536
#endif

static volatile uint8_t smoke_big[SMOKE_BIG_BYTES];

int main(void)
{
    for (uint32_t i = 0; i < SMOKE_BIG_BYTES; ++i) {
        smoke_big[i] = (uint8_t)i;
    }
    printf("last byte %u\n", (unsigned)smoke_big[SMOKE_BIG_BYTES - 1]);
    return 0;
}
