/* STM32F4 internal flash as a poet_nor_device (poet_nor_log.h), for the STM32F405/407/415/417: 1 MB in
 * sectors 0-3 of 16 KB (0x08000000), sector 4 of 64 KB (0x08010000), sectors 5-11 of 128 KB
 * (0x08020000 + (n - 5) x 128 KB). Register use as in RM0090 section 3 (Embedded flash memory interface):
 * unlock by writing KEY1 = 0x45670123 then KEY2 = 0xCDEF89AB to FLASH_KEYR; sector erase: wait for BSY = 0
 * in FLASH_SR, set SER and SNB in FLASH_CR, then STRT, wait for BSY = 0; programming: set PG, write the
 * data with the access width PSIZE selects (x8/x16/x32/x64), wait for BSY = 0; errors in FLASH_SR
 * (OPERR, WRPERR, PGAERR, PGPERR, PGSERR; write 1 to clear). The controller is locked again after every
 * call; every erase and program is read back and checked. The data cache (FLASH_ACR DCEN) is reset after
 * an erase so reads do not return stale lines.
 *
 * Give the log sectors of one size that hold no code, e.g. 8-11 (4 x 128 KB at 0x08080000) with the
 * firmware in 0-7; erasing a 128 KB sector takes 1-2 s (datasheet), during which code fetched from flash
 * stalls. Register and flash accesses go through POET_STM32F4_HOOKS (a header a host simulation defines)
 * when that macro is set, plain volatile accesses otherwise. */
#ifndef POET_STM32F4_FLASH_H
#define POET_STM32F4_FLASH_H

#include <stddef.h>
#include <stdint.h>

#include "poet_nor_log.h"

typedef struct {
    volatile uint32_t ACR;     /* 0x00 */
    volatile uint32_t KEYR;    /* 0x04 */
    volatile uint32_t OPTKEYR; /* 0x08 */
    volatile uint32_t SR;      /* 0x0C */
    volatile uint32_t CR;      /* 0x10 */
    volatile uint32_t OPTCR;   /* 0x14 */
} poet_stm32f4_flash_regs;

#define POET_STM32F4_FLASH_REGS ((poet_stm32f4_flash_regs *)0x40023C00u)
#define POET_STM32F4_FLASH_BASE 0x08000000u
#define POET_STM32F4_SECTORS 12u

#define POET_STM32F4_KEY1 0x45670123u
#define POET_STM32F4_KEY2 0xCDEF89ABu
#define POET_STM32F4_CR_PG (1u << 0)
#define POET_STM32F4_CR_SER (1u << 1)
#define POET_STM32F4_CR_SNB_SHIFT 3u
#define POET_STM32F4_CR_SNB_MASK (0xFu << 3)
#define POET_STM32F4_CR_PSIZE_SHIFT 8u
#define POET_STM32F4_CR_PSIZE_MASK (3u << 8)
#define POET_STM32F4_CR_STRT (1u << 16)
#define POET_STM32F4_CR_LOCK (1u << 31)
#define POET_STM32F4_SR_EOP (1u << 0)
#define POET_STM32F4_SR_OPERR (1u << 1)
#define POET_STM32F4_SR_WRPERR (1u << 4)
#define POET_STM32F4_SR_PGAERR (1u << 5)
#define POET_STM32F4_SR_PGPERR (1u << 6)
#define POET_STM32F4_SR_PGSERR (1u << 7)
#define POET_STM32F4_SR_BSY (1u << 16)
#define POET_STM32F4_SR_ERRORS 0xF2u
#define POET_STM32F4_ACR_DCEN (1u << 10)
#define POET_STM32F4_ACR_DCRST (1u << 12)

/* Program parallelism (FLASH_CR PSIZE) by supply voltage (RM0090 table "Program/erase parallelism"):
 * x8 at 1.8-2.1 V, x16 at 2.1-2.7 V, x32 at 2.7-3.6 V (the usual 3.3 V board), x64 only with VPP. */
typedef enum {
    POET_STM32F4_PSIZE_X8 = 0,
    POET_STM32F4_PSIZE_X16 = 1,
    POET_STM32F4_PSIZE_X32 = 2,
    POET_STM32F4_PSIZE_X64 = 3
} poet_stm32f4_psize;

typedef struct {
    poet_stm32f4_flash_regs *regs; /* POET_STM32F4_FLASH_REGS on the chip */
    uintptr_t flash_base;          /* POET_STM32F4_FLASH_BASE on the chip */
    const uint8_t *sectors;        /* sector numbers (0-11) the log may erase, all of one size */
    uint32_t num_sectors;
    poet_stm32f4_psize psize;
    uint32_t max_polls;            /* BSY polls before an operation counts as failed (0: wait forever) */
} poet_stm32f4_flash;

/* Byte offset and size of sector n (0-11) of the 1 MB STM32F405/407. */
uint32_t poet_stm32f4_sector_offset(uint32_t n);
uint32_t poet_stm32f4_sector_bytes(uint32_t n);

/* Fills dev (read, program, erase over flash's sectors) after checking the configuration: 0, or -1 if a
 * sector number is out of range, repeated or of another size than the first, or there are fewer than 3. */
int poet_stm32f4_flash_device(poet_stm32f4_flash *flash, poet_nor_device *dev);

#endif
