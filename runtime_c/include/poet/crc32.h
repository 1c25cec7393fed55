/* CRC-32 (IEEE 802.3 / zlib: reflected polynomial 0xEDB88320, init and final xor 0xFFFFFFFF), used by the
 * generated runtime for checkpoints and --verify-paging. Header-only (static inline) so that every
 * project gets it without another source file; the 1 KB table is const (flash) and exists only in a
 * translation unit that calls it. Incremental: crc = poet_crc32_update(crc, a, n) over pieces gives the
 * same value as over their concatenation; start with POET_CRC32_INIT and finish with poet_crc32_final. */
#ifndef POET_CRC32_H
#define POET_CRC32_H

#include <stddef.h>
#include <stdint.h>

#define POET_CRC32_INIT 0xFFFFFFFFu

static inline uint32_t poet_crc32_update(uint32_t crc, const void *data, size_t bytes)
{
    static const uint32_t table[256] = {
#define POET_CRC_R1(c) (((c) & 1u) ? (0xEDB88320u ^ ((c) >> 1)) : ((c) >> 1))
#define POET_CRC_R8(c) POET_CRC_R1(POET_CRC_R1(POET_CRC_R1(POET_CRC_R1(POET_CRC_R1(POET_CRC_R1(POET_CRC_R1(POET_CRC_R1(c))))))))
#define POET_CRC_E(n) POET_CRC_R8((uint32_t)(n))
#define POET_CRC_E4(n) POET_CRC_E(n), POET_CRC_E((n) + 1u), POET_CRC_E((n) + 2u), POET_CRC_E((n) + 3u)
#define POET_CRC_E16(n) POET_CRC_E4(n), POET_CRC_E4((n) + 4u), POET_CRC_E4((n) + 8u), POET_CRC_E4((n) + 12u)
#define POET_CRC_E64(n) POET_CRC_E16(n), POET_CRC_E16((n) + 16u), POET_CRC_E16((n) + 32u), POET_CRC_E16((n) + 48u)
        POET_CRC_E64(0u), POET_CRC_E64(64u), POET_CRC_E64(128u), POET_CRC_E64(192u)
#undef POET_CRC_E64
#undef POET_CRC_E16
#undef POET_CRC_E4
#undef POET_CRC_E
#undef POET_CRC_R8
#undef POET_CRC_R1
    };
    const uint8_t *p = (const uint8_t *)data;
    for (size_t i = 0; i < bytes; ++i) {
        crc = table[(crc ^ p[i]) & 0xFFu] ^ (crc >> 8);
    }
    return crc;
}

static inline uint32_t poet_crc32_final(uint32_t crc)
{
    return crc ^ 0xFFFFFFFFu;
}

/* CRC-32 of one buffer. */
static inline uint32_t poet_crc32(const void *data, size_t bytes)
{
    return poet_crc32_final(poet_crc32_update(POET_CRC32_INIT, data, bytes));
}

#endif
