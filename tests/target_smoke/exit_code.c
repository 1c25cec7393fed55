/* Exits with SMOKE_EXIT_CODE (default 3) to check that the exit status reaches the caller. */
#include <stdio.h>

#ifndef SMOKE_EXIT_CODE
#define SMOKE_EXIT_CODE 3
#endif

int main(void)
{
    printf("exiting with %d\n", SMOKE_EXIT_CODE);
    return SMOKE_EXIT_CODE;
}
