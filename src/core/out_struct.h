/*
 * The structs the library fills begin with `size_t struct_size`, the size the caller's
 * struct has (gpuwrap.h, Conventions). Each struct has a list of its layouts, oldest first:
 * a struct only grows at its end, so a layout is a size. The library fills a whole struct
 * of its own and copies out the bytes of the layout the caller named; a size that names no
 * layout (0, never set, garbage) is the first layout, the one a caller that never heard of
 * struct_size was compiled with.
 *
 * When a struct grows: append its new size to its GW__*_LAYOUTS and leave the old entries
 * as they are (they are what older programs were compiled with); GW__LAYOUTS_CHECK where
 * the struct is filled fails the build until then. Each entry is the end of the layout's last field
 * rounded up to the struct's alignment, which is the sizeof an older program saw.
 * Header-only: the core and libgpuwrap-halo both fill such structs.
 */
#ifndef GW_CORE_OUT_STRUCT_H
#define GW_CORE_OUT_STRUCT_H

#include <stddef.h>
#include <string.h>

#define GW__FIELD_END(T, f) (offsetof(T, f) + sizeof(((T *)0)->f))
#define GW__LAYOUT_END(T, f) ((GW__FIELD_END(T, f) + _Alignof(T) - 1) / _Alignof(T) * _Alignof(T))

/* v1: struct_size .. the last field of the release that added struct_size. _LAST is the
 * newest, which the struct's sizeof must equal (checked where it is filled). */
#define GW__PTRINFO_V1 GW__LAYOUT_END(gw_ptrinfo, flags)
#define GW__PTRINFO_LAST GW__PTRINFO_V1
#define GW__PTRINFO_LAYOUTS \
  { GW__PTRINFO_V1 }
#define GW__SETTING_INFO_V1 GW__LAYOUT_END(gw_setting_info, problem)
#define GW__SETTING_INFO_LAST GW__SETTING_INFO_V1
#define GW__SETTING_INFO_LAYOUTS \
  { GW__SETTING_INFO_V1 }
#define GW__HALO_INFO_V1 GW__LAYOUT_END(gw_halo_info, shared_memory)
/* v2: path_stream_ordered (AUTO per mode). On LP64 it fills v1's tail padding, so both
 * sizes are 56 bytes: a v1 caller's struct has room for it, and gets it. */
#define GW__HALO_INFO_V2 GW__LAYOUT_END(gw_halo_info, path_stream_ordered)
#define GW__HALO_INFO_LAST GW__HALO_INFO_V2
#define GW__HALO_INFO_LAYOUTS \
  { GW__HALO_INFO_V1, GW__HALO_INFO_V2 }
#define GW__GRID_INFO_V1 GW__LAYOUT_END(gw_grid_info, offset)
#define GW__GRID_INFO_LAST GW__GRID_INFO_V1
#define GW__GRID_INFO_LAYOUTS \
  { GW__GRID_INFO_V1 }
#define GW__LAYOUTS_CHECK(T, last)                                                      \
  _Static_assert(sizeof(T) == (last), #T " grew: append its new layout to its list in " \
                                         "src/core/out_struct.h")

/* The number of bytes to write for a caller that asked for `asked`: a known layout's
 * size, else the first layout's. */
static inline size_t gw__out_size(size_t asked, const size_t *layouts, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (asked == layouts[i]) return asked;
  return layouts[0];
}

/* Copy the library's whole struct `full` into the caller's `out`: the bytes of the layout
 * out->struct_size names, struct_size set to that size. */
static inline void gw__out_copy(void *out, const void *full, const size_t *layouts, size_t n) {
  size_t asked;
  memcpy(&asked, out, sizeof asked); /* may be indeterminate: any value is safe */
  size_t bytes = gw__out_size(asked, layouts, n);
  memcpy(out, full, bytes);
  memcpy(out, &bytes, sizeof bytes);
}

#endif /* GW_CORE_OUT_STRUCT_H */
