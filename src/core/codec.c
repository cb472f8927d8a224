/*
 * The CRC-32 of codec.h (reflected, polynomial 0xEDB88320: ISO-HDLC, as zlib's crc32).
 * Eight bytes a step through eight tables (slicing-by-8): a byte-at-a-time loop is one
 * table load per byte in a dependent chain, a good part of an open of an already-mapped
 * IPC allocation, whose target is a microsecond. The tables (8 KiB) are why this is not
 * inline in the header.
 */
#include "codec.h"

static uint32_t crc_table[8][256];

__attribute__((constructor)) static void crc_init(void) {
  for (uint32_t i = 0; i < 256; i++) {
    uint32_t c = i;
    for (int k = 0; k < 8; k++) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
    crc_table[0][i] = c;
  }
  for (uint32_t i = 0; i < 256; i++)
    for (int t = 1; t < 8; t++)
      crc_table[t][i] = (crc_table[t - 1][i] >> 8) ^ crc_table[0][crc_table[t - 1][i] & 0xFF];
}

uint32_t gw__crc32(const unsigned char *p, size_t n) {
  uint32_t c = 0xFFFFFFFFu;
  for (; n >= 8; n -= 8, p += 8) {
    uint32_t lo = gw__get_le32(p) ^ c, hi = gw__get_le32(p + 4);
    c = crc_table[7][lo & 0xFF] ^ crc_table[6][(lo >> 8) & 0xFF] ^ crc_table[5][(lo >> 16) & 0xFF] ^
        crc_table[4][lo >> 24] ^ crc_table[3][hi & 0xFF] ^ crc_table[2][(hi >> 8) & 0xFF] ^
        crc_table[1][(hi >> 16) & 0xFF] ^ crc_table[0][hi >> 24];
  }
  for (; n > 0; n--, p++) c = crc_table[0][(c ^ *p) & 0xFF] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}
