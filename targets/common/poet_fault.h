/* Fault injection into poet_storage_read / poet_storage_write, for testing the generated runtime's error
 * paths (tests/test_faults.py, bench/faults.py). The host platform always has it; the Cortex-M platform when
 * built with -DPOET_FAULTS. Storage calls are counted from the last poet_fault_arm(); the call with index
 * `call` gets the fault:
 *   POET_FAULT_FAIL  the call returns -1 (a write writes nothing; a read fills dst with garbage)
 *   POET_FAULT_TEAR  power cut: a write stores only its first k bytes (k < bytes, from `seed`), a read stores
 *                    nothing; then the power-off handler runs (default: exit with POET_FAULT_POWER_OFF_EXIT)
 *   POET_FAULT_FLIP  one bit (chosen from `seed`) of the data is flipped: in storage for a write, in dst for
 *                    a read; the call reports success
 * POET_FAULT_NONE only counts calls. */
#ifndef POET_FAULT_H
#define POET_FAULT_H

#include <stddef.h>
#include <stdint.h>

typedef enum { POET_FAULT_NONE = 0, POET_FAULT_FAIL = 1, POET_FAULT_TEAR = 2, POET_FAULT_FLIP = 3 } poet_fault_kind;

#define POET_FAULT_POWER_OFF_EXIT 99

void poet_fault_arm(poet_fault_kind kind, uint32_t call, uint32_t seed);
uint32_t poet_fault_calls(void);   /* storage calls since the last arm */
int poet_fault_fired(void);        /* 1: the armed call happened */
int poet_fault_fired_write(void);  /* 1: ... and it was a write */
/* The "power cut" of a torn call; it must not return (longjmp to a simulated reset, or exit). */
void poet_fault_on_power_off(void (*handler)(void));

/* ---- for the platform that implements the hooks (define POET_FAULT_IMPLEMENTATION before including) ---- */
#ifdef POET_FAULT_IMPLEMENTATION
#include <stdlib.h>

typedef struct {
    poet_fault_kind action;
    size_t cut; /* TEAR: bytes stored */
    size_t bit; /* FLIP: bit index in the call's data */
} poet_fault_action;

static struct {
    poet_fault_kind kind;
    uint32_t call, seed, calls;
    int fired, fired_write;
    void (*power_off)(void);
} poet_fault_state;

void poet_fault_arm(poet_fault_kind kind, uint32_t call, uint32_t seed)
{
    poet_fault_state.kind = kind;
    poet_fault_state.call = call;
    poet_fault_state.seed = seed;
    poet_fault_state.calls = 0u;
    poet_fault_state.fired = 0;
    poet_fault_state.fired_write = 0;
}

uint32_t poet_fault_calls(void) { return poet_fault_state.calls; }
int poet_fault_fired(void) { return poet_fault_state.fired; }
int poet_fault_fired_write(void) { return poet_fault_state.fired_write; }
void poet_fault_on_power_off(void (*handler)(void)) { poet_fault_state.power_off = handler; }

static void poet_fault_power_off(void)
{
    if (poet_fault_state.power_off != NULL) poet_fault_state.power_off();
    exit(POET_FAULT_POWER_OFF_EXIT);
}

/* Called at the start of every storage call: what to do to this one. */
static poet_fault_action poet_fault_next(size_t bytes, int is_write)
{
    poet_fault_action a = {POET_FAULT_NONE, 0u, 0u};
    uint32_t i = poet_fault_state.calls++;
    if (poet_fault_state.kind == POET_FAULT_NONE || i != poet_fault_state.call || bytes == 0u) return a;
    uint32_t h = (poet_fault_state.seed ^ i) * 2654435761u; /* Knuth's multiplicative hash */
    h ^= h >> 15;
    poet_fault_state.fired = 1;
    poet_fault_state.fired_write = is_write;
    a.action = poet_fault_state.kind;
    a.cut = (size_t)h % bytes;
    a.bit = (size_t)h % (8u * bytes);
    return a;
}
#endif

#endif
