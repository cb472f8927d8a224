/*
 * gen_fortran: writes the generated parts of the Fortran modules from the C headers, so the
 * Fortran constants are the C compiler's own values and can never drift from the enums
 * (a hand-written interface once had to count enum values to find GW_FLOAT64 = 12).
 *
 *   gen_fortran constants  FILE   named constants of gpuwrap.h (gpuwrap_constants.inc)
 *   gen_fortran generic    FILE   generic interface blocks (the kinds)
 *   gen_fortran procedures FILE   the specific procedures of those
 *   gen_fortran halo       FILE   gw_halo_path, struct sizes (built with GW_GEN_HALO: needs halo.h, mpi.h)
 * (FILE, not a shell redirection: CMake's custom commands have no portable one.)
 *
 * Run on the build machine at build time (the library is built for that machine too).
 * Statuses come from GW_STATUS_TABLE itself, so a new status appears without touching this
 * file; the other enums are listed here by name, and the dtype list is checked against
 * GW_DTYPE_COUNT at compile time.
 */
#include "gpuwrap.h"
#ifdef GW_GEN_HALO
#include "gpuwrap/halo.h"
#endif

#include <stdio.h>
#include <string.h>

/* The Fortran side passes every enum as integer(c_int): that is only right if the C enums
 * are int-sized, which the ABIs we build for guarantee; checked rather than assumed. */
_Static_assert(sizeof(gw_status) == sizeof(int), "gw_status is not int-sized");
_Static_assert(sizeof(gw_dtype) == sizeof(int), "gw_dtype is not int-sized");
_Static_assert(sizeof(gw_memkind) == sizeof(int), "gw_memkind is not int-sized");
_Static_assert(sizeof(gw_backend) == sizeof(int), "gw_backend is not int-sized");

#define C(name) \
  { #name, (long long)(name) }
typedef struct {
  const char *name;
  long long value;
} constant;

static const constant backends[] = {C(GW_BACKEND_AUTO), C(GW_BACKEND_CPU), C(GW_BACKEND_CUDA),
                                    C(GW_BACKEND_HIP)};
static const constant memkinds[] = {C(GW_MEM_UNKNOWN), C(GW_MEM_HOST), C(GW_MEM_PINNED),
                                    C(GW_MEM_DEVICE), C(GW_MEM_MANAGED)};
static const constant dtypes[] = {C(GW_BOOL),    C(GW_INT8),      C(GW_INT16),     C(GW_INT32),
                                  C(GW_INT64),   C(GW_UINT8),     C(GW_UINT16),    C(GW_UINT32),
                                  C(GW_UINT64),  C(GW_FLOAT16),   C(GW_BFLOAT16),  C(GW_FLOAT32),
                                  C(GW_FLOAT64), C(GW_COMPLEX64), C(GW_COMPLEX128)};
_Static_assert(sizeof dtypes / sizeof dtypes[0] == GW_DTYPE_COUNT,
               "a gw_dtype is missing from gen_fortran.c");
static const constant flags[] = {C(GW_WRAP_OWN), C(GW_WRAP_NO_REGISTER), C(GW_WRAP_READONLY),
                                 C(GW_PTR_GPUWRAP_REGISTERED), C(GW_PTR_HOST_REGISTERED)};
static const constant misc[] = {C(GW_VERSION_MAJOR), C(GW_VERSION_MINOR), C(GW_VERSION_PATCH),
                                C(GW_MAX_DIMS),      C(GW_DTYPE_COUNT),   C(GW_IPC_HANDLE_BYTES)};

static void emit(const char *what, const constant *c, size_t n) {
  printf("  ! %s\n", what);
  for (size_t i = 0; i < n; i++)
    printf("  integer(c_int), parameter :: %s = %lld\n", c[i].name, c[i].value);
}

/* The kinds gw_wrap_array and gw_fill_scalar accept: the Fortran type, a suffix for the
 * specific procedure, and the gpuwrap dtype it is. Default logical has no gpuwrap dtype
 * (4 bytes on gfortran): logical(c_bool) is GW_BOOL. */
static const struct {
  const char *suffix, *type, *dtype;
} kinds[] = {
    {"i8", "integer(int8)", "GW_INT8"},         {"i16", "integer(int16)", "GW_INT16"},
    {"i32", "integer(int32)", "GW_INT32"},      {"i64", "integer(int64)", "GW_INT64"},
    {"r32", "real(real32)", "GW_FLOAT32"},      {"r64", "real(real64)", "GW_FLOAT64"},
    {"c64", "complex(real32)", "GW_COMPLEX64"}, {"c128", "complex(real64)", "GW_COMPLEX128"},
    {"l8", "logical(c_bool)", "GW_BOOL"},
};
#define NKINDS (sizeof kinds / sizeof kinds[0])
/* Fortran's largest rank (F2008); GW_MAX_DIMS is larger. */
#define MAX_RANK 15
_Static_assert(MAX_RANK <= GW_MAX_DIMS, "Fortran rank above GW_MAX_DIMS");

static void generic(void) {
  const char *names[] = {"gw_wrap_array", "gw_fill_scalar", "gw_fill_async_scalar"};
  const char *pfx[] = {"wrap_array_", "fill_scalar_", "fill_async_scalar_"};
  for (int g = 0; g < 3; g++) {
    printf("  interface %s\n", names[g]);
    for (size_t k = 0; k < NKINDS; k++)
      printf("    module procedure %s%s\n", pfx[g], kinds[k].suffix);
    printf("  end interface %s\n", names[g]);
  }
  /* one statement per name: free-form lines end at 132 characters */
  for (int g = 0; g < 3; g++)
    for (size_t k = 0; k < NKINDS; k++) printf("  private :: %s%s\n", pfx[g], kinds[k].suffix);
}

/* One specific of gw_wrap_array per kind: `select rank` over 0..MAX_RANK. For each rank the
 * address of element 1 and of its neighbour along each dim with extent > 1 are taken (the
 * byte distance is the stride, whatever section the array is); wrap_described does the rest
 * (kind-independent). Elements are only referenced when the array has elements. */
static void procedures(void) {
  for (size_t k = 0; k < NKINDS; k++) {
    const char *s = kinds[k].suffix;
    printf("  function wrap_array_%s(ctx, a, out, flags) result(st)\n", s);
    printf("    type(c_ptr), intent(in) :: ctx\n");
    /* ASYNCHRONOUS: the device reads and writes `a` after the call returns, which is what
     * the attribute means; and a vector-subscripted actual argument (a copy, never `a`'s
     * memory) is a compile-time error with it (F2018 15.5.2.4). */
    printf("    %s, target, asynchronous :: a(..)\n", kinds[k].type);
    printf("    type(c_ptr), intent(out) :: out\n");
    printf("    integer(c_int), intent(in), optional :: flags\n");
    printf("    integer(c_int) :: st\n");
    printf("    integer(c_int64_t) :: sh(%d), bs(%d)\n", MAX_RANK, MAX_RANK);
    printf("    type(c_ptr) :: p\n");
    printf("    integer(c_intptr_t) :: p0\n");
    printf("    p = c_null_ptr\n    p0 = 0\n    sh = 0\n    bs = 0\n");
    printf("    select rank (a)\n");
    printf("    rank (0)\n");
    printf("      st = wrap_described(ctx, c_loc(a), %s, 0, sh, bs, flags, out)\n", kinds[k].dtype);
    for (int r = 1; r <= MAX_RANK; r++) {
      printf("    rank (%d)\n", r);
      printf("      sh(1:%d) = shape(a, kind=c_int64_t)\n", r);
      printf("      if (all(sh(1:%d) > 0)) then\n", r);
      printf("        p = c_loc(a(");
      for (int d = 0; d < r; d++) printf("%s1", d ? "," : "");
      printf("))\n        p0 = transfer(p, p0)\n");
      for (int d = 0; d < r; d++) {
        printf("        if (sh(%d) > 1) bs(%d) = transfer(c_loc(a(", d + 1, d + 1);
        for (int e = 0; e < r; e++) printf("%s%d", e ? "," : "", e == d ? 2 : 1);
        printf(")), p0) - p0\n");
      }
      printf("      end if\n");
      printf("      st = wrap_described(ctx, p, %s, %d, sh, bs, flags, out)\n", kinds[k].dtype, r);
    }
    printf("    rank default\n");
    printf("      ! assumed-size: no extent along the last dim, nothing to describe\n");
    printf("      st = wrap_described(ctx, p, %s, -1, sh, bs, flags, out)\n", kinds[k].dtype);
    printf("    end select\n");
    printf("  end function wrap_array_%s\n\n", s);

    printf("  function fill_scalar_%s(dst, value) result(st)\n", s);
    printf("    type(c_ptr), intent(in) :: dst\n");
    printf("    %s, intent(in) :: value\n", kinds[k].type);
    printf("    integer(c_int) :: st\n");
    printf("    %s, target :: v\n", kinds[k].type);
    printf("    v = value\n    st = gw_fill(dst, c_loc(v))\n");
    printf("  end function fill_scalar_%s\n\n", s);

    /* gw_fill_async reads *value before it returns (the C contract: "read at once"),
     * so a local copy is enough. */
    printf("  function fill_async_scalar_%s(dst, value, s) result(st)\n", s);
    printf("    type(c_ptr), intent(in) :: dst, s\n");
    printf("    %s, intent(in) :: value\n", kinds[k].type);
    printf("    integer(c_int) :: st\n");
    printf("    %s, target :: v\n", kinds[k].type);
    printf("    v = value\n    st = gw_fill_async(dst, c_loc(v), s)\n");
    printf("  end function fill_async_scalar_%s\n\n", s);
  }
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "";
  if (argc > 2 && !freopen(argv[2], "w", stdout)) {
    perror(argv[2]);
    return 1;
  }
  printf("! Generated by fortran/gen_fortran.c (%s) from the C headers: do not edit.\n", mode);
  if (!strcmp(mode, "constants")) {
    printf("  ! gw_status (GW_STATUS_TABLE)\n");
#define GW_F_STATUS_(name, value, text) \
  printf("  integer(c_int), parameter :: %s = %d\n", #name, (int)(name));
    GW_STATUS_TABLE(GW_F_STATUS_)
#undef GW_F_STATUS_
    emit("gw_backend", backends, sizeof backends / sizeof backends[0]);
    emit("gw_memkind", memkinds, sizeof memkinds / sizeof memkinds[0]);
    emit("gw_dtype", dtypes, sizeof dtypes / sizeof dtypes[0]);
    emit("flags of gw_wrap (GW_WRAP_*) and gw_ptrinfo%flags (GW_PTR_*)", flags,
         sizeof flags / sizeof flags[0]);
    emit("limits and version", misc, sizeof misc / sizeof misc[0]);
    printf("  ! the largest rank gw_wrap_array accepts\n");
    printf("  integer(c_int), parameter :: GW_F_MAX_RANK = %d\n", MAX_RANK);
    printf("  ! sizeof(gw_ptrinfo) in C: the test checks c_sizeof(gw_ptrinfo) against it\n");
    printf("  integer(c_size_t), parameter :: GW_PTRINFO_C_SIZE = %zu\n", sizeof(gw_ptrinfo));
    return 0;
  }
  if (!strcmp(mode, "generic")) {
    generic();
    return 0;
  }
  if (!strcmp(mode, "procedures")) {
    procedures();
    return 0;
  }
#ifdef GW_GEN_HALO
  if (!strcmp(mode, "halo")) {
    static const constant paths[] = {C(GW_HALO_PATH_AUTO), C(GW_HALO_PATH_HOST),
                                     C(GW_HALO_PATH_DEVICE), C(GW_HALO_PATH_NCCL),
                                     C(GW_HALO_PATH_IPC)};
    _Static_assert(sizeof(gw_halo_path) == sizeof(int), "gw_halo_path is not int-sized");
    emit("gw_halo_path", paths, sizeof paths / sizeof paths[0]);
    printf("  ! sizeof(gw_halo_info) in C: the test checks c_sizeof(gw_halo_info) against it\n");
    printf("  integer(c_size_t), parameter :: GW_HALO_INFO_C_SIZE = %zu\n", sizeof(gw_halo_info));
    printf("  ! sizeof(gw_grid_info) in C: the test checks c_sizeof(gw_grid_info) against it\n");
    printf("  integer(c_size_t), parameter :: GW_GRID_INFO_C_SIZE = %zu\n", sizeof(gw_grid_info));
    return 0;
  }
#endif
  fprintf(stderr, "usage: %s constants|generic|procedures%s\n", argv[0],
#ifdef GW_GEN_HALO
          "|halo"
#else
          ""
#endif
  );
  return 2;
}
