/* Never finishes: the runner's wall-clock timeout must kill it. */
#include <stdio.h>

int main(void)
{
    printf("spinning\n");
    fflush(stdout);
    for (volatile unsigned i = 0;; i = i + 1u) {
    }
    return 0;
}
