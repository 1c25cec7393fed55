/* The wear-spreading log (poet_nor_log.h): slots written in order through a ring of erase sectors. */
#include "poet_nor_log.h"

#include <string.h>

#include "poet/crc32.h"

static void poet_nor_put32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
}

static uint32_t poet_nor_get32(const uint8_t *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

/* Wrap-safe: a is newer than b. */
static int poet_nor_newer(uint32_t a, uint32_t b)
{
    return (int32_t)(a - b) > 0;
}

static uint32_t poet_nor_slot_addr(const poet_nor_log *log, uint32_t slot)
{
    uint32_t sector = slot / log->slots_per_sector;
    return sector * log->dev->sector_bytes + (slot % log->slots_per_sector) * POET_NOR_SLOT_BYTES;
}

static uint32_t poet_nor_crc(const poet_nor_log *log, uint32_t unit, uint32_t seq, const uint8_t *data)
{
    uint8_t head[12];
    poet_nor_put32(head, unit);
    poet_nor_put32(head + 4, seq);
    poet_nor_put32(head + 8, log->logical_units);
    uint32_t crc = poet_crc32_update(POET_CRC32_INIT, head, sizeof head);
    return poet_crc32_final(poet_crc32_update(crc, data, POET_NOR_UNIT_BYTES));
}

/* Reads the header of `slot` into log->header; 1 if it names a unit of this log (CRC not checked). */
static int poet_nor_header(poet_nor_log *log, uint32_t slot, uint32_t *unit, uint32_t *seq, int *rc)
{
    *rc = log->dev->read(log->dev->ctx, poet_nor_slot_addr(log, slot) + POET_NOR_UNIT_BYTES, log->header,
                         POET_NOR_HEADER_BYTES);
    if (*rc != 0) {
        *rc = POET_NOR_ERR_DEVICE;
        return 0;
    }
    *unit = poet_nor_get32(log->header + 4);
    *seq = poet_nor_get32(log->header + 8);
    return poet_nor_get32(log->header) == POET_NOR_MAGIC && *unit < log->logical_units;
}

static int poet_nor_all_ff(const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; ++i) {
        if (p[i] != 0xFFu) return 0;
    }
    return 1;
}

/* 1 if every byte of the slot is erased, 0 if not, <0 on a device error. */
static int poet_nor_slot_blank(poet_nor_log *log, uint32_t slot)
{
    uint32_t addr = poet_nor_slot_addr(log, slot);
    if (log->dev->read(log->dev->ctx, addr, log->unit, POET_NOR_UNIT_BYTES) != 0 ||
        log->dev->read(log->dev->ctx, addr + POET_NOR_UNIT_BYTES, log->header, POET_NOR_HEADER_BYTES) != 0) {
        return POET_NOR_ERR_DEVICE;
    }
    return poet_nor_all_ff(log->unit, POET_NOR_UNIT_BYTES) && poet_nor_all_ff(log->header, POET_NOR_HEADER_BYTES);
}

static int poet_nor_sector_blank(poet_nor_log *log, uint32_t sector)
{
    for (uint32_t k = 0; k < log->slots_per_sector; ++k) {
        int blank = poet_nor_slot_blank(log, sector * log->slots_per_sector + k);
        if (blank != 1) return blank;
    }
    return 1;
}

static int poet_nor_erase(poet_nor_log *log, uint32_t sector)
{
    log->stats.erases += 1u;
    return log->dev->erase(log->dev->ctx, sector) == 0 ? POET_NOR_OK : POET_NOR_ERR_DEVICE;
}

/* Programs `data` as the current copy of `unit` into the head's next free slot (the caller made room):
 * data first, the header (the commit) last. A failed program still uses up the slot. */
static int poet_nor_append(poet_nor_log *log, uint32_t unit, const uint8_t *data)
{
    if (log->next_slot >= log->slots_per_sector) return POET_NOR_ERR_FULL;
    uint32_t slot = log->head * log->slots_per_sector + log->next_slot;
    uint32_t addr = poet_nor_slot_addr(log, slot);
    uint8_t header[POET_NOR_HEADER_BYTES];
    poet_nor_put32(header, POET_NOR_MAGIC);
    poet_nor_put32(header + 4, unit);
    poet_nor_put32(header + 8, log->seq);
    poet_nor_put32(header + 12, poet_nor_crc(log, unit, log->seq, data));
    log->next_slot += 1u;
    log->seq += 1u;
    if (log->dev->program(log->dev->ctx, addr, data, POET_NOR_UNIT_BYTES) != 0 ||
        log->dev->program(log->dev->ctx, addr + POET_NOR_UNIT_BYTES, header, POET_NOR_HEADER_BYTES) != 0) {
        return POET_NOR_ERR_DEVICE;
    }
    log->map[unit] = (uint16_t)slot;
    return POET_NOR_OK;
}

/* Copies the current units of `sector` into the head, then erases the sector. */
static int poet_nor_reclaim(poet_nor_log *log, uint32_t sector)
{
    for (uint32_t k = 0; k < log->slots_per_sector; ++k) {
        uint32_t slot = sector * log->slots_per_sector + k;
        uint32_t unit, seq;
        int rc;
        if (!poet_nor_header(log, slot, &unit, &seq, &rc)) {
            if (rc != 0) return rc;
            continue;
        }
        if (log->map[unit] != slot) continue; /* an older copy */
        if (log->dev->read(log->dev->ctx, poet_nor_slot_addr(log, slot), log->unit, POET_NOR_UNIT_BYTES) != 0) {
            return POET_NOR_ERR_DEVICE;
        }
        rc = poet_nor_append(log, unit, log->unit);
        if (rc != 0) return rc;
        log->stats.unit_copies += 1u;
    }
    return poet_nor_erase(log, sector);
}

/* Makes the head have a free slot: moves the head round-robin to the spare and turns the oldest sector
 * into the next spare, as many times as needed (each full trip erases every sector once). */
static int poet_nor_make_room(poet_nor_log *log)
{
    uint32_t n = log->dev->num_sectors;
    for (uint32_t tries = 0; tries <= n; ++tries) {
        if (log->next_slot < log->slots_per_sector) return POET_NOR_OK;
        log->head = (log->head + 1u) % n; /* the spare: erased */
        log->next_slot = 0;
        int rc = poet_nor_reclaim(log, (log->head + 1u) % n); /* the oldest sector */
        if (rc != 0) return rc;
    }
    return POET_NOR_ERR_FULL;
}

uint32_t poet_nor_log_capacity(const poet_nor_device *dev)
{
    if (dev == NULL || dev->num_sectors < 3u || dev->sector_bytes < POET_NOR_SLOT_BYTES) return 0;
    uint32_t slots = dev->sector_bytes / POET_NOR_SLOT_BYTES;
    if ((uint64_t)slots * dev->num_sectors >= POET_NOR_UNMAPPED) return 0;
    uint64_t bytes = (uint64_t)(dev->num_sectors - 2u) * slots * POET_NOR_UNIT_BYTES;
    return bytes > 0xFFFFFFFFu ? 0xFFFFFFFFu : (uint32_t)bytes;
}

int poet_nor_log_mount(poet_nor_log *log, const poet_nor_device *dev, uint16_t *map, uint32_t logical_bytes)
{
    if (log == NULL || map == NULL || logical_bytes == 0u || logical_bytes > poet_nor_log_capacity(dev)) {
        return POET_NOR_ERR_CONFIG;
    }
    memset(log, 0, sizeof *log);
    log->dev = dev;
    log->map = map;
    log->logical_bytes = logical_bytes;
    log->logical_units = POET_NOR_MAP_ENTRIES(logical_bytes);
    log->slots_per_sector = dev->sector_bytes / POET_NOR_SLOT_BYTES;
    for (uint32_t u = 0; u < log->logical_units; ++u) map[u] = POET_NOR_UNMAPPED;

    uint32_t total = log->slots_per_sector * dev->num_sectors;
    int found = 0;
    uint32_t newest = 0, newest_slot = 0;
    for (uint32_t slot = 0; slot < total; ++slot) {
        uint32_t unit, seq, cur_unit, cur_seq;
        int rc;
        if (!poet_nor_header(log, slot, &unit, &seq, &rc)) {
            if (rc != 0) return rc;
            continue;
        }
        uint32_t crc = poet_nor_get32(log->header + 12);
        if (dev->read(dev->ctx, poet_nor_slot_addr(log, slot), log->unit, POET_NOR_UNIT_BYTES) != 0) {
            return POET_NOR_ERR_DEVICE;
        }
        if (poet_nor_crc(log, unit, seq, log->unit) != crc) continue; /* torn or foreign */
        if (map[unit] != POET_NOR_UNMAPPED) {
            if (!poet_nor_header(log, map[unit], &cur_unit, &cur_seq, &rc)) return rc != 0 ? rc : POET_NOR_ERR_DEVICE;
            if (!poet_nor_newer(seq, cur_seq)) continue;
        }
        map[unit] = (uint16_t)slot;
        if (!found || poet_nor_newer(seq, newest)) {
            newest = seq;
            newest_slot = slot;
            found = 1;
        }
    }
    uint32_t n = dev->num_sectors;
    if (!found) { /* empty (or foreign) device: sector 0 becomes the head, sector 1 the spare */
        for (uint32_t s = 0; s < 2u; ++s) {
            int blank = poet_nor_sector_blank(log, s);
            if (blank < 0) return blank;
            if (!blank && poet_nor_erase(log, s) != 0) return POET_NOR_ERR_DEVICE;
        }
        return POET_NOR_OK;
    }
    log->head = newest_slot / log->slots_per_sector;
    log->seq = newest + 1u;
    log->next_slot = log->slots_per_sector; /* after the last slot that is not blank (torn ones included) */
    while (log->next_slot > 0u) {
        int blank = poet_nor_slot_blank(log, log->head * log->slots_per_sector + log->next_slot - 1u);
        if (blank < 0) return blank;
        if (!blank) break;
        log->next_slot -= 1u;
    }
    /* The spare must be erased: a power loss may have cut the copy out of it or its erase. */
    uint32_t spare = (log->head + 1u) % n;
    int blank = poet_nor_sector_blank(log, spare);
    if (blank < 0) return blank;
    if (!blank) {
        int rc = poet_nor_reclaim(log, spare);
        if (rc != 0) return rc;
    }
    return poet_nor_make_room(log);
}

int poet_nor_log_format(poet_nor_log *log, const poet_nor_device *dev, uint16_t *map, uint32_t logical_bytes)
{
    if (logical_bytes == 0u || logical_bytes > poet_nor_log_capacity(dev)) return POET_NOR_ERR_CONFIG;
    for (uint32_t s = 0; s < dev->num_sectors; ++s) {
        if (dev->erase(dev->ctx, s) != 0) return POET_NOR_ERR_DEVICE;
    }
    int rc = poet_nor_log_mount(log, dev, map, logical_bytes);
    log->stats.erases += dev->num_sectors;
    return rc;
}

static int poet_nor_span_ok(const poet_nor_log *log, uint32_t offset, size_t bytes)
{
    return log != NULL && log->dev != NULL && offset <= log->logical_bytes && bytes <= log->logical_bytes - offset;
}

int poet_nor_log_write(poet_nor_log *log, uint32_t offset, const void *src, size_t bytes)
{
    if (!poet_nor_span_ok(log, offset, bytes)) return POET_NOR_ERR_RANGE;
    const uint8_t *in = (const uint8_t *)src;
    while (bytes > 0u) {
        uint32_t unit = offset / POET_NOR_UNIT_BYTES;
        uint32_t at = offset % POET_NOR_UNIT_BYTES;
        size_t n = POET_NOR_UNIT_BYTES - at < bytes ? POET_NOR_UNIT_BYTES - at : bytes;
        int rc = poet_nor_make_room(log); /* first: copying sectors uses log->unit */
        if (rc != 0) return rc;
        const uint8_t *data = in;
        if (n < POET_NOR_UNIT_BYTES) { /* patch the current copy */
            uint16_t slot = log->map[unit];
            if (slot == POET_NOR_UNMAPPED) {
                memset(log->unit, 0, POET_NOR_UNIT_BYTES);
            } else if (log->dev->read(log->dev->ctx, poet_nor_slot_addr(log, slot), log->unit,
                                      POET_NOR_UNIT_BYTES) != 0) {
                return POET_NOR_ERR_DEVICE;
            }
            memcpy(log->unit + at, in, n);
            data = log->unit;
            log->stats.partial_units += 1u;
        }
        rc = poet_nor_append(log, unit, data);
        if (rc != 0) return rc;
        log->stats.unit_writes += 1u;
        in += n;
        offset += (uint32_t)n;
        bytes -= n;
    }
    return POET_NOR_OK;
}

int poet_nor_log_read(poet_nor_log *log, uint32_t offset, void *dst, size_t bytes)
{
    if (!poet_nor_span_ok(log, offset, bytes)) return POET_NOR_ERR_RANGE;
    uint8_t *out = (uint8_t *)dst;
    while (bytes > 0u) {
        uint32_t unit = offset / POET_NOR_UNIT_BYTES;
        uint32_t at = offset % POET_NOR_UNIT_BYTES;
        size_t n = POET_NOR_UNIT_BYTES - at < bytes ? POET_NOR_UNIT_BYTES - at : bytes;
        uint16_t slot = log->map[unit];
        if (slot == POET_NOR_UNMAPPED) {
            memset(out, 0, n);
        } else if (log->dev->read(log->dev->ctx, poet_nor_slot_addr(log, slot) + at, out, n) != 0) {
            return POET_NOR_ERR_DEVICE;
        }
        out += n;
        offset += (uint32_t)n;
        bytes -= n;
    }
    return POET_NOR_OK;
}
