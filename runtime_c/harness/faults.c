/* poet-edge fault-injection driver (tests/test_faults.py, bench/faults.py): for every storage call of one
 * training step followed by one checkpoint save, and every fault kind of poet_fault.h, it
 *   1. resets: parameters = the pre-step state S0, storage = one valid checkpoint of S0 (slot 0, seq 1);
 *   2. arms the fault at that call and runs poet_train_step, then (if it succeeded) poet_checkpoint_save;
 *      a torn call "cuts the power": longjmp back here, RAM is lost;
 *   3. without a power cut, checks the parameters in RAM: S0 after a failed step (transactional), S1 (the
 *      fault-free post-step state) after a successful one;
 *   4. "reboots": overwrites every persistent tensor with 0xFF bytes (NaN), poet_init, poet_checkpoint_restore,
 *      and says whether the restored state is exactly S0 or S1.
 * Same file on every target (stdio: the host's, or semihosting). Arguments (optional, else the macros
 * POET_FAULT_STRIDE and POET_FAULT_FIRST, default 1 and 0): a stride (every call of the step is tested, then
 * every stride-th call of the save) and the first call index. Output, one line each:
 *   calls step N save M
 *   check bad_label <status> <pre|post|other>      [check nonfinite ... with POET_CHECK_INPUTS]
 *   case <fail|tear|flip> <call> <read|write> fired <0|1> step <status> save <status|-> power_off <0|1>
 *        ram <pre|post|other|-> restored <pre|post|other|none>
 *   done cases K */
#include <math.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "poet/crc32.h"
#include "poet/platform.h"
#include "poet_fault.h"
#include "poet_model.h"

#ifndef POET_FAULT_STRIDE
#define POET_FAULT_STRIDE 1
#endif
#ifndef POET_FAULT_FIRST
#define POET_FAULT_FIRST 0
#endif

static uint8_t poet_s0[POET_CHECKPOINT_PAYLOAD_BYTES], poet_s1[POET_CHECKPOINT_PAYLOAD_BYTES];
static float poet_x[POET_INPUT_ELEMS];
static int32_t poet_y[POET_LABEL_ELEMS]; /* int32 labels or float targets, both 4 bytes */
static jmp_buf poet_reset;

static void power_off(void) { longjmp(poet_reset, 1); }

/* A stored parameter (data NULL) is read and written through poet_param_read / poet_param_write. */
static void snapshot(uint8_t *dst)
{
    for (int32_t i = 0; i < POET_NUM_PERSISTENT; ++i) {
        const poet_persistent_span *s = &poet_persistent[i];
        if (s->data != NULL) {
            memcpy(dst, s->data, s->bytes);
        } else if (poet_param_read(s->param, 0u, s->bytes / 4u, (float *)(void *)dst) != 0) {
            memset(dst, 0, s->bytes);
        }
        dst += s->bytes;
    }
}

static void load(const uint8_t *src, int scribble)
{
    for (int32_t i = 0; i < POET_NUM_PERSISTENT; ++i) {
        const poet_persistent_span *s = &poet_persistent[i];
        if (scribble) {
            /* a stored parameter survives the reboot: storage keeps it (the model's slot choice stays as
             * the restore leaves it, as after a real reset, where the restore writes slot 0) */
            if (s->data != NULL) memset(s->data, 0xFF, s->bytes);
        } else {
            if (s->data != NULL) {
                memcpy(s->data, src, s->bytes);
            } else {
                (void)poet_param_write(s->param, 0u, s->bytes / 4u, (const float *)(const void *)src);
            }
            src += s->bytes;
        }
    }
}

static const char *state_name(void)
{
    static uint8_t now[POET_CHECKPOINT_PAYLOAD_BYTES];
    snapshot(now);
    if (memcmp(now, poet_s0, sizeof now) == 0) return "pre";
    if (memcmp(now, poet_s1, sizeof now) == 0) return "post";
    return "other";
}

/* The batch: deterministic inputs, labels in range (or targets); with the batch in storage, written there. */
static void write_batch(float bad)
{
    for (uint32_t i = 0; i < POET_INPUT_ELEMS; ++i) poet_x[i] = (float)((int32_t)((i * 7919u) % 201u) - 100) / 64.0f;
    poet_x[POET_INPUT_ELEMS / 2] += bad;
    for (uint32_t i = 0; i < POET_LABEL_ELEMS; ++i) {
#if POET_LABELS_ARE_INT
        poet_y[i] = (int32_t)(i % (uint32_t)POET_NUM_CLASSES);
#else
        float t = (float)(i % 7u) / 7.0f;
        memcpy(&poet_y[i], &t, sizeof t);
#endif
    }
#if POET_INPUT_IN_STORAGE
    if (poet_storage_write(POET_INPUT_OFFSET, poet_x, sizeof poet_x) != 0) exit(20);
    poet_set_input_crc(poet_crc32(poet_x, sizeof poet_x));
#endif
}

static poet_status step(void)
{
    float loss;
    return poet_train_step(POET_INPUT_IN_STORAGE ? NULL : poet_x, poet_y, 0.05f, &loss);
}

/* Parameters S0 in RAM, both slots erased, one checkpoint of S0 (slot 0, sequence 1), nothing armed. */
static void reset(void)
{
    static const uint8_t zeros[64];
    poet_fault_arm(POET_FAULT_NONE, 0u, 0u);
    for (uint32_t off = 0; off < 2u * POET_CHECKPOINT_SLOT_BYTES; off += (uint32_t)sizeof zeros) {
        if (poet_storage_write(POET_CHECKPOINT_OFFSET + off, zeros, sizeof zeros) != 0) exit(21);
    }
    write_batch(0.0f);
    load(poet_s0, 0);
    poet_init();
    if (poet_checkpoint_save() != POET_OK) exit(22);
}

static const char *const kind_names[] = {"none", "fail", "tear", "flip"};

static void run_case(poet_fault_kind kind, uint32_t call)
{
    reset();
    poet_fault_on_power_off(power_off);
    poet_fault_arm(kind, call, 0x9E3779B9u * (call + 1u) + (uint32_t)kind);
    volatile int powered_off = 0;
    volatile poet_status st_step = POET_OK, st_save = POET_OK;
    volatile int saved = 0;
    if (setjmp(poet_reset) == 0) {
        st_step = step();
        if (st_step == POET_OK) {
            st_save = poet_checkpoint_save();
            saved = 1;
        }
    } else {
        powered_off = 1;
    }
    int fired = poet_fault_fired(), on_write = poet_fault_fired_write();
    poet_fault_arm(POET_FAULT_NONE, 0u, 0u);
    const char *ram = powered_off ? "-" : state_name();
    load(NULL, 1); /* reboot: RAM is gone */
    poet_init();
    poet_status st_restore = poet_checkpoint_restore();
    printf("case %s %lu %s fired %d step %s save %s power_off %d ram %s restored %s\n", kind_names[kind],
           (unsigned long)call, on_write ? "write" : "read", fired, powered_off ? "-" : poet_status_name(st_step),
           saved && !powered_off ? poet_status_name(st_save) : "-", powered_off, ram,
           st_restore == POET_OK ? state_name() : "none");
}

int main(int argc, char **argv)
{
    uint32_t stride = argc > 1 ? (uint32_t)strtoul(argv[1], NULL, 10) : (uint32_t)POET_FAULT_STRIDE;
    uint32_t first = argc > 2 ? (uint32_t)strtoul(argv[2], NULL, 10) : (uint32_t)POET_FAULT_FIRST;
    if (stride == 0u) stride = 1u;
    poet_init();
    snapshot(poet_s0);
    memcpy(poet_s1, poet_s0, sizeof poet_s1); /* until S1 is known */
    reset();
    poet_fault_arm(POET_FAULT_NONE, 0u, 0u);
    if (step() != POET_OK) return 23;
    uint32_t n_step = poet_fault_calls();
    if (poet_checkpoint_save() != POET_OK) return 24;
    uint32_t n_save = poet_fault_calls() - n_step;
    snapshot(poet_s1);
    printf("calls step %lu save %lu\n", (unsigned long)n_step, (unsigned long)n_save);

    reset();
#if POET_LABELS_ARE_INT
    poet_y[0] = POET_NUM_CLASSES;
    printf("check bad_label %s %s\n", poet_status_name(step()), state_name());
    poet_y[0] = -1;
    printf("check negative_label %s %s\n", poet_status_name(step()), state_name());
#endif
#ifdef POET_CHECK_INPUTS
    reset();
    write_batch(INFINITY);
    printf("check nonfinite %s %s\n", poet_status_name(step()), state_name());
#endif
    uint32_t cases = 0u;
    for (int kind = POET_FAULT_FAIL; kind <= POET_FAULT_FLIP; ++kind) {
        for (uint32_t call = first; call < n_step + n_save; call += call < n_step ? 1u : stride) {
            run_case((poet_fault_kind)kind, call);
            ++cases;
        }
    }
    printf("done cases %lu\n", (unsigned long)cases);
    return 0;
}
