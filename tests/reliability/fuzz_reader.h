/* The fuzz targets' input: little-endian integers read off the fuzzer's bytes, zeros once
 * they run out (so every input, however short, is a complete case). */
#ifndef GW_FUZZ_READER_H
#define GW_FUZZ_READER_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
  const uint8_t *p;
  size_t n;
} reader;

static uint64_t rd(reader *r, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; i++) {
    v |= (uint64_t)(r->n ? *r->p : 0) << (8 * i);
    if (r->n) r->p++, r->n--;
  }
  return v;
}
static uint8_t rd8(reader *r) { return (uint8_t)rd(r, 1); }

#endif
