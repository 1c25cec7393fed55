/* STM32F4 internal flash driver (poet_stm32f4_flash.h). */
#include "poet_stm32f4_flash.h"

#include <string.h>

#ifdef POET_STM32F4_HOOKS
#include POET_STM32F4_HOOKS /* defines the accessors below, e.g. over a simulated register block */
#else
static uint32_t poet_f4_reg_read(volatile uint32_t *reg)
{
    return *reg;
}
static void poet_f4_reg_write(volatile uint32_t *reg, uint32_t value)
{
    *reg = value;
}
static void poet_f4_flash_write8(uintptr_t addr, uint8_t v)
{
    *(volatile uint8_t *)addr = v;
}
static void poet_f4_flash_write16(uintptr_t addr, uint16_t v)
{
    *(volatile uint16_t *)addr = v;
}
static void poet_f4_flash_write32(uintptr_t addr, uint32_t v)
{
    *(volatile uint32_t *)addr = v;
}
static void poet_f4_flash_write64(uintptr_t addr, uint64_t v)
{
    *(volatile uint64_t *)addr = v;
}
static void poet_f4_barrier(void)
{
#if defined(__arm__)
    __asm__ volatile("dsb" ::: "memory");
#endif
}
#endif

uint32_t poet_stm32f4_sector_offset(uint32_t n)
{
    if (n < 4u) return n * 0x4000u;
    if (n == 4u) return 0x10000u;
    return 0x20000u + (n - 5u) * 0x20000u;
}

uint32_t poet_stm32f4_sector_bytes(uint32_t n)
{
    if (n < 4u) return 0x4000u;
    if (n == 4u) return 0x10000u;
    return n < POET_STM32F4_SECTORS ? 0x20000u : 0u;
}

static uintptr_t poet_f4_addr(const poet_stm32f4_flash *f, uint32_t addr, uint32_t sector_bytes)
{
    uint32_t sector = f->sectors[addr / sector_bytes];
    return f->flash_base + poet_stm32f4_sector_offset(sector) + addr % sector_bytes;
}

/* Waits for BSY = 0; returns the error flags of FLASH_SR (cleared), or -1 after max_polls. */
static int poet_f4_wait(poet_stm32f4_flash *f)
{
    uint32_t polls = 0;
    uint32_t sr;
    while ((sr = poet_f4_reg_read(&f->regs->SR)) & POET_STM32F4_SR_BSY) {
        if (f->max_polls != 0u && ++polls >= f->max_polls) return -1;
    }
    uint32_t errors = sr & POET_STM32F4_SR_ERRORS;
    if (errors != 0u) poet_f4_reg_write(&f->regs->SR, errors | POET_STM32F4_SR_EOP); /* write 1 to clear */
    return (int)errors;
}

static int poet_f4_unlock(poet_stm32f4_flash *f)
{
    if (poet_f4_wait(f) < 0) return -1; /* and clears stale error flags */
    if (poet_f4_reg_read(&f->regs->CR) & POET_STM32F4_CR_LOCK) {
        poet_f4_reg_write(&f->regs->KEYR, POET_STM32F4_KEY1);
        poet_f4_reg_write(&f->regs->KEYR, POET_STM32F4_KEY2);
    }
    return (poet_f4_reg_read(&f->regs->CR) & POET_STM32F4_CR_LOCK) ? -1 : 0;
}

static void poet_f4_lock(poet_stm32f4_flash *f)
{
    poet_f4_reg_write(&f->regs->CR, POET_STM32F4_CR_LOCK);
}

static int poet_f4_read(void *ctx, uint32_t addr, void *dst, size_t bytes)
{
    poet_stm32f4_flash *f = (poet_stm32f4_flash *)ctx;
    uint32_t sector_bytes = poet_stm32f4_sector_bytes(f->sectors[0]);
    while (bytes > 0u) { /* a run may cross into the next of the log's sectors, which need not follow */
        uint32_t room = sector_bytes - addr % sector_bytes;
        size_t n = bytes < room ? bytes : room;
        memcpy(dst, (const void *)poet_f4_addr(f, addr, sector_bytes), n);
        dst = (uint8_t *)dst + n;
        addr += (uint32_t)n;
        bytes -= n;
    }
    return 0;
}

static int poet_f4_program(void *ctx, uint32_t addr, const void *src, size_t bytes)
{
    poet_stm32f4_flash *f = (poet_stm32f4_flash *)ctx;
    uint32_t sector_bytes = poet_stm32f4_sector_bytes(f->sectors[0]);
    uint32_t width = 1u << (uint32_t)f->psize;
    if (addr % width != 0u || bytes % width != 0u || addr / sector_bytes != (addr + bytes - 1u) / sector_bytes) {
        return -1; /* the log programs aligned runs inside one sector */
    }
    uintptr_t at = poet_f4_addr(f, addr, sector_bytes);
    const uint8_t *in = (const uint8_t *)src;
    if (poet_f4_unlock(f) != 0) return -1;
    int status = 0;
    poet_f4_reg_write(&f->regs->CR, ((uint32_t)f->psize << POET_STM32F4_CR_PSIZE_SHIFT) | POET_STM32F4_CR_PG);
    for (size_t i = 0; i < bytes && status == 0; i += width) {
        switch (f->psize) {
        case POET_STM32F4_PSIZE_X8:
            poet_f4_flash_write8(at + i, in[i]);
            break;
        case POET_STM32F4_PSIZE_X16: {
            uint16_t v;
            memcpy(&v, in + i, sizeof v);
            poet_f4_flash_write16(at + i, v);
            break;
        }
        case POET_STM32F4_PSIZE_X32: {
            uint32_t v;
            memcpy(&v, in + i, sizeof v);
            poet_f4_flash_write32(at + i, v);
            break;
        }
        default: {
            uint64_t v;
            memcpy(&v, in + i, sizeof v);
            poet_f4_flash_write64(at + i, v);
            break;
        }
        }
        poet_f4_barrier();
        status = poet_f4_wait(f);
    }
    poet_f4_reg_write(&f->regs->CR, (uint32_t)f->psize << POET_STM32F4_CR_PSIZE_SHIFT); /* PG off */
    poet_f4_lock(f);
    if (status != 0) return -1;
    return memcmp((const void *)at, src, bytes) == 0 ? 0 : -1; /* a 0 bit cannot become 1 again */
}

static int poet_f4_erase(void *ctx, uint32_t index)
{
    poet_stm32f4_flash *f = (poet_stm32f4_flash *)ctx;
    if (index >= f->num_sectors) return -1;
#ifdef POET_NOR_TEST_SKIP_ERASE
    return 0; /* deliberately broken build: the host simulation must catch it */
#else
    uint32_t sector = f->sectors[index];
    if (poet_f4_unlock(f) != 0) return -1;
    uint32_t cr = ((uint32_t)f->psize << POET_STM32F4_CR_PSIZE_SHIFT) | POET_STM32F4_CR_SER |
                  (sector << POET_STM32F4_CR_SNB_SHIFT);
    poet_f4_reg_write(&f->regs->CR, cr);
    poet_f4_reg_write(&f->regs->CR, cr | POET_STM32F4_CR_STRT);
    poet_f4_barrier();
    int status = poet_f4_wait(f);
    poet_f4_reg_write(&f->regs->CR, (uint32_t)f->psize << POET_STM32F4_CR_PSIZE_SHIFT); /* SER off */
    poet_f4_lock(f);
    uint32_t acr = poet_f4_reg_read(&f->regs->ACR);
    if (acr & POET_STM32F4_ACR_DCEN) { /* the data cache may hold lines of the old contents */
        poet_f4_reg_write(&f->regs->ACR, acr & ~POET_STM32F4_ACR_DCEN);
        poet_f4_reg_write(&f->regs->ACR, (acr & ~POET_STM32F4_ACR_DCEN) | POET_STM32F4_ACR_DCRST);
        poet_f4_reg_write(&f->regs->ACR, acr & ~POET_STM32F4_ACR_DCRST);
    }
    if (status != 0) return -1;
    const uint8_t *p = (const uint8_t *)(f->flash_base + poet_stm32f4_sector_offset(sector));
    for (uint32_t i = 0; i < poet_stm32f4_sector_bytes(sector); ++i) {
        if (p[i] != 0xFFu) return -1;
    }
    return 0;
#endif
}

int poet_stm32f4_flash_device(poet_stm32f4_flash *flash, poet_nor_device *dev)
{
    if (flash == NULL || dev == NULL || flash->regs == NULL || flash->sectors == NULL || flash->num_sectors < 3u ||
        flash->num_sectors > POET_STM32F4_SECTORS || (uint32_t)flash->psize > 3u) {
        return -1;
    }
    uint32_t size = poet_stm32f4_sector_bytes(flash->sectors[0]);
    for (uint32_t i = 0; i < flash->num_sectors; ++i) {
        if (flash->sectors[i] >= POET_STM32F4_SECTORS || poet_stm32f4_sector_bytes(flash->sectors[i]) != size) {
            return -1;
        }
        for (uint32_t j = 0; j < i; ++j) {
            if (flash->sectors[j] == flash->sectors[i]) return -1;
        }
    }
    dev->ctx = flash;
    dev->sector_bytes = size;
    dev->num_sectors = flash->num_sectors;
    dev->read = poet_f4_read;
    dev->program = poet_f4_program;
    dev->erase = poet_f4_erase;
    return 0;
}
