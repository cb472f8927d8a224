/*
 * dlpack_share: one buffer shared between a C program, gpuwrap and a DLPack consumer
 * (PyTorch, CuPy, NumPy, ... or any C library that speaks DLPack), with no copies.
 *
 *   1. The program owns a buffer (here: malloc'd host memory; it could be a Fortran array,
 *      an MPI buffer, cudaMalloc'd memory). gpuwrap wraps it, with a deleter so that the
 *      buffer is freed exactly once, when the last user lets go.
 *   2. gpuwrap exports it as a DLManagedTensorVersioned: what a Python binding hands to
 *      torch.from_dlpack() (see share_with_torch.py). The consumer here is a small C
 *      function that scales the tensor in place and calls the deleter when done.
 *   3. The other way: a library produces a DLPack tensor over its own memory; gpuwrap
 *      imports it, fills it (on the GPU when the memory is device-accessible), and the
 *      library's deleter runs when the gpuwrap array is released.
 *
 * Build: part of the CMake build (target dlpack_share), or
 *   cc -std=c11 -Iinclude examples/dlpack_share.c -Lbuild/lib -lgpuwrap -o dlpack_share
 * Run:   ./dlpack_share            (GPUWRAP_BACKEND=cpu|cuda|hip picks the backend)
 */
#include "gpuwrap.h"
#include "gpuwrap/dlpack.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(call)                                                                       \
  do {                                                                                    \
    gw_status s_ = (call);                                                                \
    if (s_ != GW_OK) {                                                                    \
      fprintf(stderr, "%s:%d: %s: %s (%s)\n", __FILE__, __LINE__, #call, gw_err_name(s_), \
              gw_last_error());                                                           \
      exit(1);                                                                            \
    }                                                                                     \
  } while (0)

/* ---- the program's own buffer and its deleter ---------------------------------------- */

static int buffer_freed;
static void free_buffer(void *ptr, void *user) {
  (void)user;
  printf("  deleter: the program's buffer %p is freed (once)\n", ptr);
  free(ptr);
  buffer_freed++;
}

/* ---- a DLPack consumer (what torch.from_dlpack does, in a few lines of C) ------------- */

static void consumer_scale(DLManagedTensorVersioned *t, double factor) {
  DLTensor *dt = &t->dl_tensor;
  printf("  consumer: got %s tensor, device type %d, data %p, %d-d, flags 0x%llx\n",
         dt->dtype.code == kDLFloat && dt->dtype.bits == 64 ? "float64" : "other",
         (int)dt->device.device_type, dt->data, (int)dt->ndim, (unsigned long long)t->flags);
  int64_t n = 1, expect = 1;
  int contiguous = 1;
  for (int i = dt->ndim - 1; i >= 0; i--) {
    if (dt->shape[i] != 1 && dt->strides[i] != expect) contiguous = 0;
    expect *= dt->shape[i];
    n *= dt->shape[i];
  }
  if (dt->device.device_type == kDLCPU && contiguous && dt->dtype.code == kDLFloat &&
      dt->dtype.bits == 64 && !(t->flags & DLPACK_FLAG_BITMASK_READ_ONLY)) {
    double *x = (double *)(void *)((char *)dt->data + dt->byte_offset);
    for (int64_t i = 0; i < n; i++) x[i] *= factor;
    printf("  consumer: scaled %lld elements in place: x[1] = %g, x[%lld] = %g\n", (long long)n,
           x[1], (long long)(n - 1), x[n - 1]);
  }
  t->deleter(t); /* the consumer is done with it */
}

/* ---- a DLPack producer: a "library" lending its memory -------------------------------- */

typedef struct {
  DLManagedTensorVersioned mt;
  int64_t shape[1], strides[1];
  float data[1000];
} lib_tensor;

static int lib_deleted;
static void lib_deleter(DLManagedTensorVersioned *self) {
  printf("  library: its tensor %p is returned (once)\n", (void *)self);
  free(self->manager_ctx);
  lib_deleted++;
}

static DLManagedTensorVersioned *library_make_tensor(void) {
  lib_tensor *l = calloc(1, sizeof *l);
  if (!l) exit(1);
  l->shape[0] = 1000;
  l->strides[0] = 1;
  l->mt.version = (DLPackVersion){DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION};
  l->mt.manager_ctx = l;
  l->mt.deleter = lib_deleter;
  l->mt.dl_tensor = (DLTensor){.data = l->data,
                               .device = {kDLCPU, 0},
                               .ndim = 1,
                               .dtype = {kDLFloat, 32, 1},
                               .shape = l->shape,
                               .strides = l->strides,
                               .byte_offset = 0};
  return &l->mt;
}

int main(int argc, char **argv) {
  if (argc > 1) {
    int help = !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h");
    if (!help) fprintf(stderr, "dlpack_share: unknown argument '%s' (it takes none)\n", argv[1]);
    fprintf(help ? stdout : stderr,
            "usage: dlpack_share   (GPUWRAP_BACKEND=cpu|cuda|hip picks the backend)\n"
            "  shares one buffer between the program, gpuwrap and a DLPack consumer, both ways,\n"
            "  with no copies; each deleter runs exactly once. Exit status: 0 ok, 1 a failed\n"
            "  call, 2 bad usage, 77 the backend asked for has no device.\n");
    return help ? 0 : 2;
  }
  gw_context *ctx;
  gw_status cs = gw_context_create(GW_BACKEND_AUTO, 0, &ctx);
  if (cs == GW_ENODEV) { /* the backend asked for (GPUWRAP_BACKEND) has no device here */
    fprintf(stderr, "skipped: %s\n", gw_last_error());
    return 77;
  }
  CHECK(cs);
  printf("backend %s, device %d\n", gw_backend_name(gw_context_backend(ctx)),
         gw_context_device(ctx));

  /* 1. The program's buffer, wrapped without a copy; the deleter now owns it. */
  enum { NX = 4, NY = 6 };
  double *field = malloc(sizeof(double) * NX * NY);
  if (!field) return 1;
  for (int i = 0; i < NX * NY; i++) field[i] = i;
  int64_t shape[2] = {NX, NY};
  gw_array *a;
  CHECK(gw_wrap_with_deleter(ctx, field, GW_FLOAT64, 2, shape, NULL, 0, free_buffer, NULL, &a));
  printf("1. wrapped the program's buffer %p as a %s array (device address %p)\n", (void *)field,
         gw_memkind_name(gw_kind(a)), gw_data(a));

  /* 2. Export. The natural device type of pinned memory is kDLCUDAHost, which PyTorch and
   *    CuPy do not import: a C consumer that reads on the host asks for kDLCPU. */
  DLManagedTensorVersioned *t;
  CHECK(gw_to_dlpack_as(a, (DLDevice){kDLCPU, 0}, &t));
  printf("2. exported: data %p is the program's buffer: %s\n", t->dl_tensor.data,
         t->dl_tensor.data == (void *)field ? "yes, no copy" : "NO");
  gw_release(a); /* the tensor keeps the memory alive */
  printf("   released the gpuwrap handle; buffer freed yet: %s\n", buffer_freed ? "yes" : "no");
  consumer_scale(t, 10.0);
  printf("   after the consumer: buffer freed %d time(s)\n", buffer_freed);

  /* 3. Import a library's tensor, fill it through gpuwrap, see it in the library's memory. */
  DLManagedTensorVersioned *lt = library_make_tensor();
  float *lib_data = ((lib_tensor *)lt->manager_ctx)->data;
  gw_array *b;
  CHECK(gw_from_dlpack(ctx, lt, &b)); /* gpuwrap takes the tensor */
  float v = 2.5f;
  CHECK(gw_fill(b, &v));
  printf("3. imported the library's tensor as a %s array at %p (library memory %p); after "
         "gw_fill: lib_data[999] = %g\n",
         gw_memkind_name(gw_kind(b)), gw_host_data(b), (void *)lib_data, lib_data[999]);
  gw_release(b); /* the last reference: the library's deleter runs */

  gw_context_destroy(ctx);
  int ok = buffer_freed == 1 && lib_deleted == 1;
  printf("%s: program buffer freed %d time(s), library tensor returned %d time(s)\n",
         ok ? "ok" : "FAILED", buffer_freed, lib_deleted);
  return ok ? 0 : 1;
}
