/* poet_storage_write/read (poet/platform.h) over a mounted wear-spreading log (poet_nor_log.h): link this
 * file in a board port instead of another storage implementation, mount the log at boot (over
 * poet_stm32f4_flash.h or poet_spi_nor.h) and pass it to poet_storage_nor_bind. */
#include <stddef.h>
#include <stdint.h>

#include "poet/platform.h"
#include "poet_nor_log.h"

static poet_nor_log *poet_storage_log;

void poet_storage_nor_bind(poet_nor_log *log)
{
    poet_storage_log = log;
}

int poet_storage_write(uint32_t offset, const void *src, size_t bytes)
{
    if (poet_storage_log == NULL) return -1;
    return poet_nor_log_write(poet_storage_log, offset, src, bytes) == POET_NOR_OK ? 0 : -1;
}

int poet_storage_read(uint32_t offset, void *dst, size_t bytes)
{
    if (poet_storage_log == NULL) return -1;
    return poet_nor_log_read(poet_storage_log, offset, dst, bytes) == POET_NOR_OK ? 0 : -1;
}
