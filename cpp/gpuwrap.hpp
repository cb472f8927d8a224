/*
 * gpuwrap.hpp — C++17 RAII handles over the C API of gpuwrap.h (header only; CMake target
 * gpuwrap::cpp, which links gpuwrap::gpuwrap).
 *
 *   gw::context ctx;                                   // GW_BACKEND_AUTO, device 0
 *   std::vector<double> h(rows * cols);
 *   gw::array a = gw::array::wrap(ctx, h.data(), {rows, cols});   // dtype from double
 *   a.fill(1.0);                                       // throws gw::error on failure
 *
 * Errors: every failing C call throws gw::error, which carries the gw_status (status())
 * and gw_last_error()'s detail, read at once, in what(). Exceptions rather than an
 * expected-like return because handles are made by constructors and factories, which have
 * no return value to carry a status, and C++17 has no std::expected; a caller that must not
 * throw calls the C API on the raw handles (get()), which every class gives out. Accessors
 * that cannot fail in C (shape, kind, ...) are noexcept.
 *
 * Ownership: context, array, stream, halo and grid are move-only. An array is one gw_array
 * reference: copying is deleted so that sharing memory is always visible in the code; say
 * a.retain() for a second handle to the same array (gw_retain). Moved-from handles are
 * empty (get() == nullptr); destroying an empty handle does nothing. adopt(raw) takes over
 * a reference you hold; release() gives yours up to the caller.
 *
 * Nothing here re-implements C logic: every member forwards to one C call (the dtype of a
 * C++ element type is a table lookup).
 *
 * gw::halo and gw::grid (include/gpuwrap/halo.h, needs MPI) are defined when gpuwrap/halo.h was included
 * before this header, or when GW_CPP_HALO is defined (then this header includes it): link
 * gpuwrap::halo too (including halo.h yourself in C++: define OMPI_SKIP_MPICXX and
 * MPICH_SKIP_MPICXX first, or link MPI::MPI_CXX, as for any C++ use of mpi.h). Its
 * destructor is collective (gw_halo_destroy): destroy plans on every rank, before
 * MPI_Finalize; so is gw::grid's. gw::halo takes one field (gw_halo_create) or a list of
 * gw::halo_field (gw_halo_create_multi: {{u, {1, 1, 1}}, {v, {2, 1, 1}}}); start_on,
 * finish_on and update_on order the exchange with a gw::stream. gw::grid wraps the gw_grid_*
 * helpers (comm(), info(), block(r), context(), gather()); halo_nccl_available() is
 * gw_halo_nccl_available.
 */
#ifndef GPUWRAP_HPP
#define GPUWRAP_HPP

#include "gpuwrap.h"
#if defined(GW_CPP_HALO) && !defined(GPUWRAP_HALO_H)
/* halo.h includes mpi.h, which in C++ drags in the removed MPI C++ bindings (and a link
 * dependency on libmpi_cxx) unless told not to; the plan needs the C API only. */
#ifndef OMPI_SKIP_MPICXX
#define OMPI_SKIP_MPICXX 1
#endif
#ifndef MPICH_SKIP_MPICXX
#define MPICH_SKIP_MPICXX 1
#endif
#include "gpuwrap/halo.h"
#endif

#include <complex>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace gw {

/** A failed gpuwrap call: its status and gw_last_error() (or gw_halo_last_error()). */
class error : public std::runtime_error {
public:
  error(gw_status s, const std::string &detail)
      : std::runtime_error(std::string(gw_err_name(s)) + ": " +
                           (detail.empty() ? gw_strerror(s) : detail)),
        status_(s), detail_(detail) {}
  gw_status status() const noexcept { return status_; }
  /** gw_last_error() as it was when the call failed ("" when the C call left none). */
  const std::string &detail() const noexcept { return detail_; }

private:
  gw_status status_;
  std::string detail_;
};

/** Throws gw::error for anything but GW_OK. */
inline void check(gw_status s) {
  if (s != GW_OK) throw error(s, gw_last_error());
}

/** The gw_dtype of a C++ element type (dtype_of<double>::value == GW_FLOAT64). */
template <class T> struct dtype_of;
#define GW_CPP_DTYPE_(type, dt) \
  template <> struct dtype_of<type> { static constexpr gw_dtype value = dt; }
GW_CPP_DTYPE_(bool, GW_BOOL);
/* Every fundamental integer type by its size (std::int64_t is long on some platforms, long
 * long on others: both are covered, and so is each intN_t, an alias of one of them). */
#define GW_CPP_DTYPE_INT_(type, s, u)                      \
  GW_CPP_DTYPE_(type, sizeof(type) == 1   ? s##8           \
                      : sizeof(type) == 2 ? s##16          \
                      : sizeof(type) == 4 ? s##32          \
                                          : s##64);        \
  GW_CPP_DTYPE_(unsigned type, sizeof(type) == 1   ? u##8  \
                               : sizeof(type) == 2 ? u##16 \
                               : sizeof(type) == 4 ? u##32 \
                                                   : u##64)
GW_CPP_DTYPE_(signed char, GW_INT8);
GW_CPP_DTYPE_(unsigned char, GW_UINT8);
GW_CPP_DTYPE_INT_(short, GW_INT, GW_UINT);
GW_CPP_DTYPE_INT_(int, GW_INT, GW_UINT);
GW_CPP_DTYPE_INT_(long, GW_INT, GW_UINT);
GW_CPP_DTYPE_INT_(long long, GW_INT, GW_UINT);
#undef GW_CPP_DTYPE_INT_
GW_CPP_DTYPE_(float, GW_FLOAT32);
GW_CPP_DTYPE_(double, GW_FLOAT64);
GW_CPP_DTYPE_(std::complex<float>, GW_COMPLEX64);
GW_CPP_DTYPE_(std::complex<double>, GW_COMPLEX128);
#undef GW_CPP_DTYPE_

using dims = std::vector<std::int64_t>;

namespace detail {
/* Whether T has a gw_dtype (dtype_of<T> defined). */
template <class T, class = void> struct has_dtype : std::false_type {};
template <class T>
struct has_dtype<T, std::void_t<decltype(dtype_of<T>::value)>> : std::true_type {};
/* A per-dim argument of the C call holds ndim entries: the C library reads that many. */
inline void check_dims(const char *what, const dims &v, std::size_t ndim) {
  if (v.size() != ndim)
    throw error(GW_EINVAL, std::string(what) + ": " + std::to_string(v.size()) + " entries for " +
                               std::to_string(ndim) + " dims");
}
} // namespace detail

/** gw_ipc_handle: the GW_IPC_HANDLE_BYTES plain bytes of an exported array (docs/IPC.md);
 *  send them any way and open them in another process with context::ipc_open. */
class ipc_handle {
public:
  ipc_handle() noexcept { std::memset(raw_.bytes, 0, sizeof raw_.bytes); }
  explicit ipc_handle(const gw_ipc_handle &raw) noexcept : raw_(raw) {}
  /** From received bytes: exactly GW_IPC_HANDLE_BYTES of them, else gw::error GW_EINVAL
   *  (a truncated handle); the contents are validated by ipc_open. */
  static ipc_handle from_bytes(const void *p, std::size_t n) {
    if (!p || n != GW_IPC_HANDLE_BYTES)
      throw error(GW_EINVAL, "h: " + std::to_string(n) + " bytes, a gpuwrap IPC handle has " +
                                 std::to_string(GW_IPC_HANDLE_BYTES));
    ipc_handle h;
    std::memcpy(h.raw_.bytes, p, n);
    return h;
  }
  /** gw_ipc_handle_send: the handle, with the descriptors of pool and VMM memory, over the
   *  Unix socket `sock` (SCM_RIGHTS; in the exporting process; docs/IPC.md). */
  void send(int sock) const { check(gw_ipc_handle_send(sock, &raw_)); }
  /** gw_ipc_handle_recv: one handle from `sock`; its descriptors are kept for the next
   *  context::ipc_open of it in this process (instead of pidfd_getfd). */
  static ipc_handle recv(int sock) {
    ipc_handle h;
    check(gw_ipc_handle_recv(sock, &h.raw_));
    return h;
  }
  const unsigned char *data() const noexcept { return raw_.bytes; }
  static constexpr std::size_t size() noexcept { return GW_IPC_HANDLE_BYTES; }
  const gw_ipc_handle &get() const noexcept { return raw_; }

private:
  gw_ipc_handle raw_;
};

class array;

/** gw_context: one (backend, device). Arrays keep their context alive in C, so a context
 *  may be destroyed before the arrays made through it. */
class context {
public:
  explicit context(gw_backend backend = GW_BACKEND_AUTO, int device = 0) {
    check(gw_context_create(backend, device, &p_));
  }
  static context adopt(gw_context *raw) noexcept { return context(raw, 0); }
  context(context &&o) noexcept : p_(std::exchange(o.p_, nullptr)) {}
  context &operator=(context &&o) noexcept {
    if (this != &o) {
      gw_context_destroy(p_);
      p_ = std::exchange(o.p_, nullptr);
    }
    return *this;
  }
  context(const context &) = delete;
  context &operator=(const context &) = delete;
  ~context() { gw_context_destroy(p_); }

  gw_context *get() const noexcept { return p_; }
  gw_context *release() noexcept { return std::exchange(p_, nullptr); }
  explicit operator bool() const noexcept { return p_ != nullptr; }
  gw_backend backend() const noexcept { return gw_context_backend(p_); }
  int device() const noexcept { return gw_context_device(p_); }
  void synchronize() const { check(gw_synchronize(p_)); }
  gw_ptrinfo query(const void *ptr) const {
    gw_ptrinfo info{};
    info.struct_size = sizeof info; // the layout this header has (gpuwrap.h, Conventions)
    check(gw_pointer_query(p_, ptr, &info));
    return info;
  }
  void pin(void *ptr, std::size_t bytes) const { check(gw_pin(p_, ptr, bytes)); }
  void unpin(void *ptr, std::size_t bytes) const { check(gw_unpin(p_, ptr, bytes)); }
  /** gw_ipc_open: the array another process (or this one) exported. */
  array ipc_open(const ipc_handle &h) const;

private:
  context(gw_context *raw, int) noexcept : p_(raw) {}
  gw_context *p_ = nullptr;
};

/** gw_backend_device_count, throwing. */
inline int device_count(gw_backend b) {
  int n = 0;
  check(gw_backend_device_count(b, &n));
  return n;
}

/** gw_stream: created (owned: destroying it waits for its work) or borrowed from a native
 *  stream (gw_stream_wrap: destroying it drops the handle only). The C call tells the two
 *  apart, so one class serves both. */
class stream {
public:
  /** A new (blocking) stream on the context's device. */
  explicit stream(const context &ctx) { check(gw_stream_create(ctx.get(), &p_)); }
  /** Borrow a native stream (cudaStream_t, hipStream_t, or gw_stream_native() on the CPU
   *  backend); it must outlive this handle. */
  static stream borrow(const context &ctx, void *native) {
    gw_stream *s = nullptr;
    check(gw_stream_wrap(ctx.get(), native, &s));
    return stream(s);
  }
  static stream adopt(gw_stream *raw) noexcept { return stream(raw); }
  stream(stream &&o) noexcept : p_(std::exchange(o.p_, nullptr)) {}
  stream &operator=(stream &&o) noexcept {
    if (this != &o) {
      gw_stream_destroy(p_);
      p_ = std::exchange(o.p_, nullptr);
    }
    return *this;
  }
  stream(const stream &) = delete;
  stream &operator=(const stream &) = delete;
  ~stream() { gw_stream_destroy(p_); }

  gw_stream *get() const noexcept { return p_; }
  gw_stream *release() noexcept { return std::exchange(p_, nullptr); }
  explicit operator bool() const noexcept { return p_ != nullptr; }
  void *native() const noexcept { return gw_stream_native(p_); }
  void synchronize() const { check(gw_stream_synchronize(p_)); }

private:
  explicit stream(gw_stream *raw) noexcept : p_(raw) {}
  gw_stream *p_ = nullptr;
};

/** gw_array: one reference. Move-only; retain() for a second handle (see the top). */
class array {
public:
  array() noexcept = default;
  /** Take over a reference the caller holds (from a C call). */
  static array adopt(gw_array *raw) noexcept { return array(raw); }

  /** gw_wrap: existing memory, without copying. strides empty = C order (as NULL in C). */
  static array wrap(const context &ctx, void *ptr, gw_dtype dtype, const dims &shape,
                    const dims &strides = {}, unsigned flags = 0) {
    gw_array *a = nullptr;
    if (!strides.empty()) detail::check_dims("strides", strides, shape.size());
    check(gw_wrap(ctx.get(), ptr, dtype, static_cast<int>(shape.size()), shape.data(),
                  strides.empty() ? nullptr : strides.data(), flags, &a));
    return array(a);
  }
  /** gw_wrap with the dtype of T. */
  template <class T>
  static array wrap(const context &ctx, T *ptr, const dims &shape, const dims &strides = {},
                    unsigned flags = 0) {
    return wrap(ctx, const_cast<void *>(static_cast<const void *>(ptr)),
                dtype_of<std::remove_cv_t<T>>::value, shape, strides,
                flags | (std::is_const<T>::value ? GW_WRAP_READONLY : 0u));
  }
  /** gw_wrap_with_deleter: deleter(ptr, user) runs once, when the last reference goes. */
  static array wrap_with_deleter(const context &ctx, void *ptr, gw_dtype dtype, const dims &shape,
                                 const dims &strides, unsigned flags, gw_deleter deleter,
                                 void *user) {
    gw_array *a = nullptr;
    if (!strides.empty()) detail::check_dims("strides", strides, shape.size());
    check(gw_wrap_with_deleter(ctx.get(), ptr, dtype, static_cast<int>(shape.size()), shape.data(),
                               strides.empty() ? nullptr : strides.data(), flags, deleter, user,
                               &a));
    return array(a);
  }
  /** gw_alloc: a C-contiguous array of `kind` memory that the array owns. */
  static array alloc(const context &ctx, gw_memkind kind, gw_dtype dtype, const dims &shape) {
    gw_array *a = nullptr;
    check(gw_alloc(ctx.get(), kind, dtype, static_cast<int>(shape.size()), shape.data(), &a));
    return array(a);
  }

  array(array &&o) noexcept : p_(std::exchange(o.p_, nullptr)) {}
  array &operator=(array &&o) noexcept {
    if (this != &o) {
      gw_release(p_);
      p_ = std::exchange(o.p_, nullptr);
    }
    return *this;
  }
  array(const array &) = delete;
  array &operator=(const array &) = delete;
  ~array() { gw_release(p_); }

  /** A second handle to this array (gw_retain). */
  array retain() const noexcept { return array(gw_retain(p_)); }
  gw_array *get() const noexcept { return p_; }
  gw_array *release() noexcept { return std::exchange(p_, nullptr); }
  explicit operator bool() const noexcept { return p_ != nullptr; }

  void *data() const noexcept { return gw_data(p_); }
  void *host_data() const noexcept { return gw_host_data(p_); }
  template <class T> T *host_data() const noexcept { return static_cast<T *>(gw_host_data(p_)); }
  gw_memkind kind() const noexcept { return gw_kind(p_); }
  int device() const noexcept { return gw_device(p_); }
  gw_dtype dtype() const noexcept { return gw_array_dtype(p_); }
  int ndim() const noexcept { return gw_ndim(p_); }
  dims shape() const { return dims(gw_shape(p_), gw_shape(p_) + gw_ndim(p_)); }
  dims strides() const { return dims(gw_strides(p_), gw_strides(p_) + gw_ndim(p_)); }
  std::int64_t numel() const noexcept { return gw_numel(p_); }
  bool owns() const noexcept { return gw_owns(p_) != 0; }
  bool readonly() const noexcept { return gw_is_readonly(p_) != 0; }
  bool pending() const noexcept { return gw_array_pending(p_) != 0; }
  /** The array's context (borrowed from the array: gw_array_context). */
  gw_context *context_handle() const noexcept { return gw_array_context(p_); }

  /** gw_view; step empty = all 1. */
  array view(const dims &start, const dims &shape, const dims &step = {}) const {
    gw_array *v = nullptr;
    const std::size_t n = p_ ? static_cast<std::size_t>(ndim()) : start.size();
    detail::check_dims("start", start, n);
    detail::check_dims("shape", shape, n);
    if (!step.empty()) detail::check_dims("step", step, n);
    check(gw_view(p_, start.data(), shape.data(), step.empty() ? nullptr : step.data(), &v));
    return array(v);
  }
  array reshape(const dims &shape) const {
    gw_array *v = nullptr;
    check(gw_reshape(p_, static_cast<int>(shape.size()), shape.data(), &v));
    return array(v);
  }
  /** gw_copy(this, src). */
  void copy_from(const array &src) const { check(gw_copy(p_, src.p_)); }
  void copy_from(const array &src, const stream &s) const {
    check(gw_copy_async(p_, src.p_, s.get()));
  }
  /** gw_fill with a value of the array's element type: T must be it (fill(1.0) of a float32
   *  array is GW_EINVAL, not a fill with the first 4 bytes of a double; write fill(1.0f)).
   *  A T without a dtype (a struct) must have the element's size. */
  template <class T> void fill(const T &value) const {
    check_fill_type<T>();
    check(gw_fill(p_, &value));
  }
  template <class T> void fill(const T &value, const stream &s) const {
    check_fill_type<T>();
    check(gw_fill_async(p_, &value, s.get()));
  }
  /** gw_array_wait: s waits, on the device, for the work pending on this array. */
  void wait(const stream &s) const { check(gw_array_wait(p_, s.get())); }
  /** gw_ipc_export: a handle for another process (device memory only). */
  ipc_handle export_ipc() const {
    gw_ipc_handle h;
    check(gw_ipc_export(p_, &h));
    return ipc_handle(h);
  }

private:
  explicit array(gw_array *raw) noexcept : p_(raw) {}
  template <class T> void check_fill_type() const {
    if (!p_) return; /* gw_fill names the NULL array */
    const gw_dtype dt = dtype();
    bool ok;
    if constexpr (detail::has_dtype<T>::value)
      ok = dtype_of<T>::value == dt;
    else
      ok = sizeof(T) == gw_dtype_size(dt);
    if (!ok)
      throw error(GW_EINVAL, std::string("value: a ") + std::to_string(sizeof(T)) +
                                 "-byte value of another type "
                                 "than the array's " +
                                 gw_dtype_name(dt) + " (fill takes the element type)");
  }
  gw_array *p_ = nullptr;
};

/** gw_copy(dst, src). */
inline void copy(const array &dst, const array &src) { dst.copy_from(src); }

/** gw_ipc_export / gw_ipc_open as free functions. */
inline ipc_handle export_ipc(const array &a) { return a.export_ipc(); }
inline array context::ipc_open(const ipc_handle &h) const {
  gw_array *a = nullptr;
  check(gw_ipc_open(p_, &h.get(), &a));
  return array::adopt(a);
}

#ifdef GPUWRAP_HALO_H
/** Throws gw::error carrying gw_halo_last_error() for anything but GW_OK (the halo and grid
 *  calls; their detail includes gpuwrap's own when a gpuwrap call failed). */
inline void check_halo(gw_status s) {
  if (s != GW_OK) throw error(s, gw_halo_last_error());
}

/** gw_halo_nccl_available: whether the NCCL path could load NCCL here; *why (if given) gets
 *  the loader's message when not. Not collective. */
inline bool halo_nccl_available(std::string *why = nullptr) {
  const char *w = nullptr;
  const bool ok = gw_halo_nccl_available(&w) != 0;
  if (why) *why = (!ok && w) ? w : "";
  return ok;
}

/** One field of a multi-field plan and its halo width per dim ({u, {1, 1, 1}}). The array
 *  is referenced, not owned: the plan takes its own reference. */
struct halo_field {
  const array &field;
  int width[3];
};

/** gw_halo: a halo plan (collective create and destroy, see halo.h). Errors carry
 *  gw_halo_last_error(), which includes gpuwrap's own detail when a gpuwrap call failed. */
class halo {
public:
  /** gw_halo_create: one 3-D field. */
  halo(const array &field, MPI_Comm cart, const int (&width)[3],
       gw_halo_path path = GW_HALO_PATH_AUTO) {
    check_halo(gw_halo_create(field.get(), cart, width, path, &p_));
  }
  /** gw_halo_create_multi: several fields in one plan, {{u, {1, 1, 1}}, {v, {2, 1, 1}}}. */
  halo(std::initializer_list<halo_field> fields, MPI_Comm cart,
       gw_halo_path path = GW_HALO_PATH_AUTO) {
    create_multi(fields.begin(), fields.size(), cart, path);
  }
  halo(const std::vector<halo_field> &fields, MPI_Comm cart,
       gw_halo_path path = GW_HALO_PATH_AUTO) {
    create_multi(fields.data(), fields.size(), cart, path);
  }
  static halo adopt(gw_halo *raw) noexcept { return halo(raw); }
  halo(halo &&o) noexcept : p_(std::exchange(o.p_, nullptr)) {}
  halo &operator=(halo &&o) noexcept {
    if (this != &o) {
      gw_halo_destroy(p_);
      p_ = std::exchange(o.p_, nullptr);
    }
    return *this;
  }
  halo(const halo &) = delete;
  halo &operator=(const halo &) = delete;
  ~halo() { gw_halo_destroy(p_); }

  gw_halo *get() const noexcept { return p_; }
  gw_halo *release() noexcept { return std::exchange(p_, nullptr); }
  explicit operator bool() const noexcept { return p_ != nullptr; }
  void update() const { check_halo(gw_halo_update(p_)); }
  void start() const { check_halo(gw_halo_start(p_)); }
  void finish() const { check_halo(gw_halo_finish(p_)); }
  /** Stream-ordered (halo.h): the exchange is ordered with s on the device. */
  void update_on(const stream &s) const { check_halo(gw_halo_update_on(p_, s.get())); }
  void start_on(const stream &s) const { check_halo(gw_halo_start_on(p_, s.get())); }
  void finish_on(const stream &s) const { check_halo(gw_halo_finish_on(p_, s.get())); }
  gw_halo_info info() const {
    gw_halo_info i{};
    i.struct_size = sizeof i;
    check_halo(gw_halo_query(p_, &i));
    return i;
  }

private:
  explicit halo(gw_halo *raw) noexcept : p_(raw) {}
  void create_multi(const halo_field *f, std::size_t n, MPI_Comm cart, gw_halo_path path) {
    std::vector<gw_halo_field> c(n);
    for (std::size_t i = 0; i < n; i++) {
      c[i].field = f[i].field.get();
      for (int d = 0; d < 3; d++) c[i].width[d] = f[i].width[d];
    }
    check_halo(gw_halo_create_multi(c.data(), static_cast<int>(n), cart, path, &p_));
  }
  gw_halo *p_ = nullptr;
};

/** One rank's block of a grid (gw_grid_block): its cells and global offset per dim. */
struct grid_block {
  std::int64_t local[3];
  std::int64_t offset[3];
};

/** gw_grid: a global box decomposed over a Cartesian communicator (halo.h, "Grid
 *  helpers"). Move-only; the constructor and destructor are collective. Empty periods: none
 *  periodic; empty dims: MPI_Dims_create chooses (as NULL in C); otherwise ndims entries. */
class grid {
public:
  /** gw_grid_create: from the global cell counts (ndims = global.size()). */
  grid(MPI_Comm comm, const dims &global, const std::vector<int> &periods = {},
       const std::vector<int> &rank_dims = {}) {
    check_sizes(global.size(), periods, rank_dims);
    check_halo(gw_grid_create(comm, static_cast<int>(global.size()), global.data(), opt(periods),
                              opt(rank_dims), &p_));
  }
  /** gw_grid_create_local: from every rank's cell counts. */
  static grid from_local(MPI_Comm comm, const dims &local, const std::vector<int> &periods = {},
                         const std::vector<int> &rank_dims = {}) {
    check_sizes(local.size(), periods, rank_dims);
    gw_grid *g = nullptr;
    check_halo(gw_grid_create_local(comm, static_cast<int>(local.size()), local.data(),
                                    opt(periods), opt(rank_dims), &g));
    return grid(g);
  }
  static grid adopt(gw_grid *raw) noexcept { return grid(raw); }
  grid(grid &&o) noexcept : p_(std::exchange(o.p_, nullptr)) {}
  grid &operator=(grid &&o) noexcept {
    if (this != &o) {
      gw_grid_destroy(p_);
      p_ = std::exchange(o.p_, nullptr);
    }
    return *this;
  }
  grid(const grid &) = delete;
  grid &operator=(const grid &) = delete;
  ~grid() { gw_grid_destroy(p_); }

  gw_grid *get() const noexcept { return p_; }
  gw_grid *release() noexcept { return std::exchange(p_, nullptr); }
  explicit operator bool() const noexcept { return p_ != nullptr; }
  /** The grid's Cartesian communicator (borrowed: valid while the grid lives). */
  MPI_Comm comm() const noexcept { return gw_grid_comm(p_); }
  gw_grid_info info() const {
    gw_grid_info i{};
    i.struct_size = sizeof i;
    check_halo(gw_grid_query(p_, &i));
    return i;
  }
  /** Rank r's block (r: a rank of comm()). */
  grid_block block(int r) const {
    grid_block b;
    check_halo(gw_grid_block(p_, r, b.local, b.offset));
    return b;
  }
  /** gw_grid_context_create: a context on this rank's device (node_rank mod device count). */
  gw::context context(gw_backend backend = GW_BACKEND_AUTO) const {
    gw_context *c = nullptr;
    check_halo(gw_grid_context_create(p_, backend, &c));
    return gw::context::adopt(c);
  }
  /** gw_grid_gather (collective): root's `global` receives every rank's interior; on the
   *  other ranks `global` may be empty (gw::array()). Empty width: inferred (NULL). */
  void gather(const array &field, const array &global, int root = 0,
              const std::vector<int> &width = {}) const {
    if (!width.empty() && width.size() != static_cast<std::size_t>(info().ndims))
      throw error(GW_EINVAL, "gw::grid::gather: width needs one entry per dim of the grid");
    check_halo(gw_grid_gather(p_, field.get(), width.empty() ? nullptr : width.data(), global.get(),
                              root));
  }

private:
  explicit grid(gw_grid *raw) noexcept : p_(raw) {}
  static const int *opt(const std::vector<int> &v) noexcept {
    return v.empty() ? nullptr : v.data();
  }
  static void check_sizes(std::size_t ndims, const std::vector<int> &periods,
                          const std::vector<int> &rank_dims) {
    if ((!periods.empty() && periods.size() != ndims) ||
        (!rank_dims.empty() && rank_dims.size() != ndims))
      throw error(GW_EINVAL, "gw::grid: periods and dims need one entry per dim (or none)");
  }
  gw_grid *p_ = nullptr;
};
#endif

} // namespace gw

#endif /* GPUWRAP_HPP */
