/*
 * Byte codecs shared by the handles one process writes and another reads (the IPC
 * handle, ipc_handle.c; the interprocess event's, ipc_event.c; the CPU model's runtime
 * handles, cpu_ipc.c): integers little-endian whatever the host's order, LEB128 varints
 * with zigzag for signed values, and the CRC-32 that seals a handle (codec.c).
 */
#ifndef GW_CORE_CODEC_H
#define GW_CORE_CODEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- little-endian fields ---- */

static inline void gw__put_le16(unsigned char *p, uint16_t v) {
  p[0] = (unsigned char)v;
  p[1] = (unsigned char)(v >> 8);
}
static inline uint16_t gw__get_le16(const unsigned char *p) {
  return (uint16_t)(p[0] | (unsigned)p[1] << 8);
}
static inline void gw__put_le32(unsigned char *p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static inline uint32_t gw__get_le32(const unsigned char *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline void gw__put_le64(unsigned char *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static inline uint64_t gw__get_le64(const unsigned char *p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; i++) v |= (uint64_t)p[i] << (8 * i);
  return v;
}

/* ---- LEB128 varints ---- */

/* Append v; false when it does not fit in [*at, end). */
static inline bool gw__put_varint(unsigned char **at, const unsigned char *end, uint64_t v) {
  do {
    if (*at == end) return false;
    unsigned char b = v & 0x7F;
    v >>= 7;
    *(*at)++ = (unsigned char)(b | (v ? 0x80 : 0));
  } while (v);
  return true;
}

/* Read one; false for a truncated or over-long (more than 64 bits) varint. */
static inline bool gw__get_varint(const unsigned char **at, const unsigned char *end,
                                  uint64_t *out) {
  uint64_t v = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (*at == end) return false;
    unsigned char b = *(*at)++;
    if (shift == 63 && (b & 0x7E)) return false; /* bits past 64 */
    v |= (uint64_t)(b & 0x7F) << shift;
    if (!(b & 0x80)) {
      *out = v;
      return true;
    }
  }
  return false;
}

/* Signed values as unsigned with the sign in bit 0, so small negatives stay short. */
static inline uint64_t gw__zigzag(int64_t v) { return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63); }
static inline int64_t gw__unzigzag(uint64_t v) { return (int64_t)(v >> 1) ^ -(int64_t)(v & 1); }

/* ---- CRC-32 (ISO-HDLC: reflected, polynomial 0xEDB88320, as zlib's crc32) ---- */

uint32_t gw__crc32(const unsigned char *p, size_t n);

#endif
