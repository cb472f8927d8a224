// cpu.cpp.raii: gpuwrap.hpp's handles: lifetimes (the CPU model's live allocation and
// registration counters back at their start after each block), moves (the moved-from
// handle is empty, the moved-to one frees exactly once), retain, exceptions carrying the
// C status and gw_last_error(), and values checked element by element on fresh random data.
#include <gpuwrap.hpp>
#include <gpuwrap/cpu_testing.h>

#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

static int failures = 0;
#define EXPECT(cond)                                                                                                   \
  do {                                                                                                                 \
    if (!(cond)) {                                                                                                     \
      std::fprintf(stderr, "%s:%d: FAIL %s\n", __FILE__, __LINE__, #cond);                                             \
      failures++;                                                                                                      \
    }                                                                                                                  \
  } while (0)

// The C status a callable throws as gw::error (GW_OK when it does not throw).
template <class F> static gw_status thrown(F &&f, std::string *what = nullptr) {
  try {
    f();
  } catch (const gw::error &e) {
    if (what) *what = e.what();
    return e.status();
  }
  return GW_OK;
}

int main() {
  std::random_device rd;
  unsigned seed = rd();
  std::printf("seed %u\n", seed);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> uni(-1.0, 1.0);
  const std::size_t allocs0 = gw_cpu_live_allocations(), regs0 = gw_cpu_live_registrations();

  { // IPC: export_ipc / context::ipc_open (the exporting process: a view of the original
    // memory, no runtime open); bytes of the wrong length, a damaged handle, host memory
    gw::context ctx(GW_BACKEND_CPU);
    const std::int64_t n = 257;
    std::vector<std::int32_t> h(n), back(n, -1);
    for (auto &x : h) x = static_cast<std::int32_t>(rng());
    gw::array d = gw::array::alloc(ctx, GW_MEM_DEVICE, GW_INT32, {n});
    d.copy_from(gw::array::wrap(ctx, h.data(), {n}));
    gw::array v = d.view({3}, {50}, {5});
    gw::ipc_handle hv = gw::export_ipc(v);
    EXPECT(hv.size() == 256 && std::memcmp(hv.data(), "GWIP", 4) == 0);
    const long calls = gw_cpu_op_calls(GW_CPU_OP_IPC_OPEN);
    gw::array o = ctx.ipc_open(gw::ipc_handle::from_bytes(hv.data(), hv.size()));
    EXPECT(gw_cpu_op_calls(GW_CPU_OP_IPC_OPEN) == calls);
    EXPECT(o.data() == v.data() && o.kind() == GW_MEM_DEVICE && !o.owns());
    EXPECT((o.shape() == gw::dims{50}) && (o.strides() == gw::dims{5}));
    gw::array b = gw::array::wrap(ctx, back.data(), {50});
    b.copy_from(o);
    bool ok = true;
    for (int i = 0; i < 50; i++) ok = ok && back[i] == h[3 + 5 * i];
    EXPECT(ok);
    std::string what;
    EXPECT(thrown([&] { gw::ipc_handle::from_bytes(hv.data(), 255); }, &what) == GW_EINVAL);
    EXPECT(what.find("255 bytes") != std::string::npos);
    gw_ipc_handle raw = hv.get();
    raw.bytes[100] ^= 1;
    EXPECT(thrown([&] { ctx.ipc_open(gw::ipc_handle(raw)); }, &what) == GW_EINVAL);
    EXPECT(what.find("check value") != std::string::npos);
    { // ipc_handle::send / recv over a socket pair (in one process: the same memory)
      int sv[2];
      EXPECT(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
      hv.send(sv[0]);
      gw::ipc_handle got = gw::ipc_handle::recv(sv[1]);
      EXPECT(std::memcmp(got.data(), hv.data(), hv.size()) == 0);
      gw::array o2 = ctx.ipc_open(got);
      EXPECT(o2.data() == v.data());
      close(sv[0]);
      EXPECT(thrown([&] { gw::ipc_handle::recv(sv[1]); }, &what) == GW_EBACKEND);
      EXPECT(what.find("closed") != std::string::npos);
      close(sv[1]);
    }
    gw::array host = gw::array::wrap(ctx, h.data(), {n});
    EXPECT(thrown([&] { host.export_ipc(); }, &what) == GW_ENOTSUP);
    EXPECT(what.find("only device memory") != std::string::npos);
  }
  EXPECT(gw_cpu_live_allocations() == allocs0 && gw_cpu_live_registrations() == regs0);

  { // wrap, alloc, copy, fill: values through the handles
    gw::context ctx(GW_BACKEND_CPU);
    EXPECT(ctx.backend() == GW_BACKEND_CPU && ctx.device() == 0);
    const std::int64_t rows = 7, cols = 5;
    std::vector<double> h(rows * cols), back(rows * cols);
    for (auto &x : h) x = uni(rng);
    gw::array a = gw::array::wrap(ctx, h.data(), {rows, cols});
    EXPECT(a.dtype() == GW_FLOAT64 && a.ndim() == 2 && a.numel() == rows * cols);
    EXPECT((a.shape() == gw::dims{rows, cols}) && (a.strides() == gw::dims{cols, 1}));
    EXPECT(a.kind() == GW_MEM_PINNED && gw_cpu_live_registrations() == regs0 + 1);
    EXPECT(ctx.query(h.data() + 3).kind == GW_MEM_PINNED);
    gw::array d = gw::array::alloc(ctx, GW_MEM_DEVICE, GW_FLOAT64, {cols, rows});
    EXPECT(gw_cpu_live_allocations() == allocs0 + 1 && d.owns());
    // the transpose: a column-major wrap of back, so back[j + i*cols]... = h[i*cols + j]
    gw::array t = gw::array::wrap(ctx, back.data(), {rows, cols}, {1, rows});
    d.copy_from(a.reshape({cols, rows}));
    t.copy_from(a);
    bool ok = true;
    for (std::int64_t i = 0; i < rows; i++)
      for (std::int64_t j = 0; j < cols; j++) ok = ok && std::memcmp(&back[i + j * rows], &h[i * cols + j], 8) == 0;
    EXPECT(ok);
    // fill of a strided view (every other row), checked cell by cell
    const double v = uni(rng);
    std::vector<double> want = h;
    a.view({0, 0}, {(rows + 1) / 2, cols}, {2, 1}).fill(v);
    for (std::int64_t i = 0; i < rows; i += 2)
      for (std::int64_t j = 0; j < cols; j++) want[i * cols + j] = v;
    EXPECT(std::memcmp(want.data(), h.data(), h.size() * 8) == 0);
    // streams: owned and borrowed, async fill then copy, wait
    gw::stream s(ctx);
    gw::stream b = gw::stream::borrow(ctx, s.native());
    const double w = uni(rng);
    d.fill(w, s);
    d.wait(b);
    gw::array hd = gw::array::alloc(ctx, GW_MEM_HOST, GW_FLOAT64, {cols, rows});
    hd.copy_from(d, b);
    b.synchronize();
    s.synchronize();
    ok = true;
    for (std::int64_t i = 0; i < rows * cols; i++) ok = ok && hd.host_data<double>()[i] == w;
    EXPECT(ok && !d.pending());
    ctx.synchronize();
  }
  EXPECT(gw_cpu_live_allocations() == allocs0 && gw_cpu_live_registrations() == regs0);

  { // moves and retain: exactly one free, at the right time
    gw::context ctx(GW_BACKEND_CPU);
    gw::array a = gw::array::alloc(ctx, GW_MEM_DEVICE, GW_INT32, {16});
    gw_array *raw = a.get();
    gw::array b = std::move(a);
    EXPECT(!a && b.get() == raw);                               // NOLINT(bugprone-use-after-move)
    gw::array c;
    c = std::move(b);
    EXPECT(!b && c.get() == raw && gw_cpu_live_allocations() == allocs0 + 1);
    {
      gw::array r = c.retain();
      EXPECT(r.get() == raw);
      c = gw::array();                                           // drops one reference: r keeps it
      EXPECT(gw_cpu_live_allocations() == allocs0 + 1);
    }
    EXPECT(gw_cpu_live_allocations() == allocs0);
    // assignment over a live handle releases the old array
    gw::array x = gw::array::alloc(ctx, GW_MEM_DEVICE, GW_INT32, {4});
    x = gw::array::alloc(ctx, GW_MEM_PINNED, GW_INT32, {4});
    EXPECT(gw_cpu_live_allocations() == allocs0 + 1 && x.kind() == GW_MEM_PINNED);
    // adopt / release hand references across the C boundary
    gw_array *given = x.release();
    EXPECT(!x);
    gw::array y = gw::array::adopt(given);
    gw::context moved = std::move(ctx);                         // arrays keep the context alive anyway
    EXPECT(!ctx && moved);
    gw::stream s(moved), s2 = std::move(s);
    EXPECT(!s && s2.native() != nullptr);
  }
  EXPECT(gw_cpu_live_allocations() == allocs0 && gw_cpu_live_registrations() == regs0);

  { // exceptions: the C status and gw_last_error()
    std::string what;
    EXPECT(thrown([] { gw::context c(static_cast<gw_backend>(99)); }, &what) == GW_EINVAL);
    EXPECT(what.find("GW_EINVAL") == 0 && what.find("99") != std::string::npos);
    gw::context ctx(GW_BACKEND_CPU);
    std::vector<float> f(10);
    EXPECT(thrown([&] { gw::array::wrap(ctx, f.data(), {-1}); }) == GW_EINVAL);
    const std::vector<float> &cf = f;
    gw::array ro = gw::array::wrap(ctx, cf.data(), {10}); // const T: read-only
    EXPECT(ro.readonly());
    EXPECT(thrown([&] { ro.fill(1.0f); }) == GW_EREADONLY);
    gw::array a = gw::array::wrap(ctx, f.data() + 1, {9});
    EXPECT(thrown([&] { a.view({9}, {1}); }) == GW_EINVAL);
    EXPECT(thrown([&] { a.copy_from(gw::array::alloc(ctx, GW_MEM_DEVICE, GW_FLOAT32, {8})); }) == GW_EINVAL);
    EXPECT(thrown([&] { ctx.unpin(f.data(), 40); }) == GW_ENOTREG);
    // fill's value must be the element type: a double into float32 wrote its first 4 bytes
    // (0 for 1.0), a float into float64 read 8 bytes of a 4-byte value
    // (memory of its own: f's pages are registered read-only by `ro`, so `a` is read-only too)
    std::vector<float> h(10, 7.0f);
    gw::array w = gw::array::wrap(ctx, h.data() + 1, {9});
    EXPECT(thrown([&] { w.fill(1.0); }, &what) == GW_EINVAL);
    EXPECT(what.find("float32") != std::string::npos);
    EXPECT(thrown([&] { w.fill(1); }) == GW_EINVAL);
    bool untouched = true;
    for (float x : h) untouched = untouched && x == 7.0f;
    EXPECT(untouched);
    w.fill(2.5f);
    bool filled = h[0] == 7.0f;
    for (std::size_t i = 1; i < h.size(); i++) filled = filled && h[i] == 2.5f;
    EXPECT(filled);
    // per-dim vectors hold ndim entries (the C call reads that many)
    std::vector<double> g(12);
    gw::array m = gw::array::wrap(ctx, g.data(), {3, 4});
    EXPECT(thrown([&] { m.view({1}, {2}); }, &what) == GW_EINVAL);
    EXPECT(what.find("start: 1 entries for 2 dims") != std::string::npos);
    EXPECT(thrown([&] { m.view({0, 0}, {3, 4}, {1}); }) == GW_EINVAL);
    EXPECT(thrown([&] { m.view({0, 0, 0}, {1, 1}); }) == GW_EINVAL);
    EXPECT(thrown([&] { gw::array::wrap(ctx, g.data(), {3, 4}, {4}); }, &what) == GW_EINVAL);
    EXPECT(what.find("strides") != std::string::npos);
    // every integer spelling has its dtype (int64_t is long here, long long is another type)
    std::vector<long long> ll(4);
    std::vector<unsigned long long> ull(4);
    EXPECT(gw::array::wrap(ctx, ll.data(), {4}).dtype() == GW_INT64);
    EXPECT(gw::array::wrap(ctx, ull.data(), {4}).dtype() == GW_UINT64);
    EXPECT(gw::dtype_of<int>::value == GW_INT32 && gw::dtype_of<std::int64_t>::value == GW_INT64 &&
           gw::dtype_of<unsigned short>::value == GW_UINT16 && gw::dtype_of<std::uint8_t>::value == GW_UINT8);
    try {
      gw::check(GW_ENODEV);
    } catch (const gw::error &e) {
      EXPECT(e.status() == GW_ENODEV);
    }
    EXPECT(gw::device_count(GW_BACKEND_CPU) >= 1);
    EXPECT(thrown([] { gw::device_count(GW_BACKEND_AUTO); }) == GW_EINVAL);
  }
  EXPECT(gw_cpu_live_allocations() == allocs0 && gw_cpu_live_registrations() == regs0);

  if (failures) {
    std::fprintf(stderr, "%d failures\n", failures);
    return 1;
  }
  std::puts("cpp.raii: ok");
  return 0;
}
