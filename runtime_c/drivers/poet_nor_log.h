/* A wear-spreading log over NOR flash: what turns erase-before-write flash into the random-access,
 * rewrite-anything storage of runtime_c/include/poet/platform.h (poet_storage_write/read).
 *
 * The device (poet_nor_device) is a set of equal erase sectors: programming only turns bits from 1 to 0, an
 * erase sets a whole sector to 0xFF. Two drivers provide one: the STM32F4 internal flash
 * (poet_stm32f4_flash.h) and a generic SPI NOR chip (poet_spi_nor.h).
 *
 * Layout. Logical storage is cut into units of POET_NOR_UNIT_BYTES (256). Each sector holds
 * sector_bytes / POET_NOR_SLOT_BYTES slots; a slot is a unit's data followed by a 16-byte header
 * {magic, logical unit, sequence number, CRC-32 of those and the data}, programmed after the data (the
 * commit: a write cut by a power loss leaves no valid header and the previous copy stays current). The
 * CRC also covers the log's number of units, so a log mounted with another size ignores the old one's data.
 * A RAM map (the caller's uint16_t array, one entry per logical unit) says which slot holds the current
 * copy of each unit; it is rebuilt at mount from the headers (the highest sequence number wins).
 *
 * Writes never rewrite a slot in place: a changed unit goes to the next free slot of the head sector
 * (a partly written unit is read, patched in the log's 256-byte buffer and written whole). When the head
 * is full the log moves on round-robin: the next sector (always kept erased, the spare) becomes the head,
 * the oldest sector after it has its still-current units copied into the head and is erased, and becomes
 * the new spare. Every sector is therefore erased once per trip around the ring, whatever the access
 * pattern: wear is spread evenly over all sectors given, and the number of erases per sector is about
 * (bytes written + bytes copied) / (sectors x sector capacity). A training step rewrites most paged values
 * each step, so little is copied; data that never changes (e.g. an old checkpoint) is copied once per trip.
 *
 * Capacity: logical_bytes may be at most (sectors - 2) x slots per sector x 256 bytes (two sectors of
 * slack: the spare and room for the copies), and sectors x slots must stay below 65535.
 * Bytes never written read as zero. No malloc; not reentrant (one caller at a time). */
#ifndef POET_NOR_LOG_H
#define POET_NOR_LOG_H

#include <stddef.h>
#include <stdint.h>

#define POET_NOR_UNIT_BYTES 256u
#define POET_NOR_HEADER_BYTES 16u
#define POET_NOR_SLOT_BYTES (POET_NOR_UNIT_BYTES + POET_NOR_HEADER_BYTES)
#define POET_NOR_MAGIC 0x54454F50u /* "POET" little-endian */
#define POET_NOR_UNMAPPED 0xFFFFu

/* Status codes (0 is success). */
#define POET_NOR_OK 0
#define POET_NOR_ERR_DEVICE (-1)   /* the device's read, program or erase failed */
#define POET_NOR_ERR_RANGE (-2)    /* offset + bytes beyond the logical size */
#define POET_NOR_ERR_CONFIG (-3)   /* too few sectors, too many slots, logical size too large */
#define POET_NOR_ERR_FULL (-4)     /* no slot left while copying (cannot happen within the capacity rule,
                                      except at mount after a power loss during a copy of a sector whose
                                      every unit was current) */

/* One NOR device as the log sees it: sectors 0 .. num_sectors-1 of sector_bytes each, addressed
 * sector * sector_bytes + byte. The log programs 16-byte-aligned runs whose length is a multiple of 16
 * and only into erased bytes. Each function returns 0 on success. */
typedef struct {
    void *ctx;
    uint32_t sector_bytes;
    uint32_t num_sectors;
    int (*read)(void *ctx, uint32_t addr, void *dst, size_t bytes);
    int (*program)(void *ctx, uint32_t addr, const void *src, size_t bytes);
    int (*erase)(void *ctx, uint32_t sector);
} poet_nor_device;

typedef struct {
    uint32_t erases;        /* sector erases */
    uint32_t unit_writes;   /* units programmed for the caller */
    uint32_t unit_copies;   /* current units copied out of a sector before its erase */
    uint32_t partial_units; /* unit writes that read the old unit first (write not covering a whole unit) */
} poet_nor_stats;

typedef struct {
    const poet_nor_device *dev;
    uint16_t *map;            /* the caller's array: logical unit -> slot (POET_NOR_UNMAPPED: never written) */
    uint32_t logical_bytes;
    uint32_t logical_units;
    uint32_t slots_per_sector;
    uint32_t head;            /* sector receiving writes */
    uint32_t next_slot;       /* its first free slot */
    uint32_t seq;             /* sequence number of the next unit written */
    poet_nor_stats stats;
    uint8_t unit[POET_NOR_UNIT_BYTES]; /* read-modify-write and copy buffer */
    uint8_t header[POET_NOR_HEADER_BYTES];
} poet_nor_log;

/* Units (map entries) a log of logical_bytes needs: the length of the caller's map array. */
#define POET_NOR_MAP_ENTRIES(logical_bytes) \
    (((uint32_t)(logical_bytes) + POET_NOR_UNIT_BYTES - 1u) / POET_NOR_UNIT_BYTES)

/* Rebuilds the map from the device (after a reset, or on a blank or foreign device, which is then
 * treated as empty: its sectors are erased as the log reaches them) and finishes a copy or erase that a
 * power loss interrupted. map has POET_NOR_MAP_ENTRIES(logical_bytes) entries. */
int poet_nor_log_mount(poet_nor_log *log, const poet_nor_device *dev, uint16_t *map, uint32_t logical_bytes);

/* Erases every sector and mounts the empty log. */
int poet_nor_log_format(poet_nor_log *log, const poet_nor_device *dev, uint16_t *map, uint32_t logical_bytes);

int poet_nor_log_write(poet_nor_log *log, uint32_t offset, const void *src, size_t bytes);
int poet_nor_log_read(poet_nor_log *log, uint32_t offset, void *dst, size_t bytes);

/* The largest logical_bytes a device supports (the capacity rule above). */
uint32_t poet_nor_log_capacity(const poet_nor_device *dev);

/* poet_storage_write/read (poet/platform.h) over a mounted log: defined in poet_storage_nor.c, which a
 * board links instead of another storage port. Calls before poet_storage_nor_bind fail with -1. */
void poet_storage_nor_bind(poet_nor_log *log);

#endif
