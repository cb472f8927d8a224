// cpu.cpp.grid: gw::grid and a multi-field gw::halo on a 2-D grid made from its global size
// (9 cells along x over the ranks: uneven with 2; periodic in x, not in y): two fields of
// different dtypes and widths in one plan, exchanged stream-ordered (start_on/finish_on on
// a gw::stream), a stencil over the halo gathered to rank 0 with grid::gather and compared
// element by element with the same stencil on the global box; grid errors throw gw::error.
#define GW_CPP_HALO 1 // gpuwrap.hpp includes gpuwrap/halo.h (and mpi.h, without its C++ bindings)
#include <gpuwrap.hpp>
#include <gpuwrap/cpu.h>

#include <cstdio>
#include <string>
#include <vector>

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, bad = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const std::size_t regs0 = gw_cpu_live_registrations();
  const std::int64_t G[2] = {9, 4};
  // global reference values: periodic in x, 0 outside the box in y (the untouched boundary)
  auto ga = [&](std::int64_t x, std::int64_t y) {
    return y < 0 || y >= G[1] ? 0.0 : double(((x % G[0]) + G[0]) % G[0] * 10 + y + 1);
  };
  auto gb = [&](std::int64_t x, std::int64_t y) {
    return y < 0 || y >= G[1] ? 0.0f : float(((x % G[0]) + G[0]) % G[0] + 100 * y) + 0.25f;
  };
  auto gw_ref = [&](std::int64_t x, std::int64_t y) {
    return ga(x - 1, y) + ga(x + 1, y) + ga(x, y - 1) + ga(x, y + 1) + 2.0 * double(gb(x - 2, y)) +
           3.0 * double(gb(x + 1, y + 1));
  };
  {
    gw::grid g(MPI_COMM_WORLD, {G[0], G[1]}, {1, 0});
    const gw_grid_info in = g.info();
    bad += in.ndims != 2 || in.global[0] != G[0] || in.dims[0] * in.dims[1] != in.size || in.dims[2] != 1;
    std::int64_t cells = 0;
    for (int r = 0; r < in.size; r++) cells += g.block(r).local[0] * g.block(r).local[1];
    bad += cells != G[0] * G[1];
    gw::context ctx = g.context(GW_BACKEND_CPU);
    gw::stream s(ctx);
    const std::int64_t l0 = in.local[0], l1 = in.local[1], o0 = in.offset[0], o1 = in.offset[1];
    const std::int64_t na = l1 + 2, nb = l1 + 2; // a: width {1, 1}; b: width {2, 1}
    std::vector<double> ha((l0 + 2) * na, 0.0), hw((l0 + 2) * na, -1.0);
    std::vector<float> hb((l0 + 4) * nb, 0.0f);
    for (std::int64_t i = 0; i < l0; i++)
      for (std::int64_t j = 0; j < l1; j++) {
        ha[(i + 1) * na + j + 1] = ga(o0 + i, o1 + j);
        hb[(i + 2) * nb + j + 1] = gb(o0 + i, o1 + j);
      }
    gw::array a = gw::array::wrap(ctx, ha.data(), {l0 + 2, na});
    gw::array b = gw::array::wrap(ctx, hb.data(), {l0 + 4, nb});
    {
      gw::halo plan({{a, {1, 1, 0}}, {b, {2, 1, 0}}}, g.comm(), GW_HALO_PATH_HOST);
      plan.start_on(s);
      plan.finish_on(s);
      s.synchronize();
      bad += plan.info().path != GW_HALO_PATH_HOST;
    }
    for (std::int64_t i = 0; i < l0; i++)
      for (std::int64_t j = 0; j < l1; j++) {
        auto A = [&](std::int64_t di, std::int64_t dj) { return ha[(i + 1 + di) * na + j + 1 + dj]; };
        auto B = [&](std::int64_t di, std::int64_t dj) { return double(hb[(i + 2 + di) * nb + j + 1 + dj]); };
        hw[(i + 1) * na + j + 1] = A(-1, 0) + A(1, 0) + A(0, -1) + A(0, 1) + 2.0 * B(-2, 0) + 3.0 * B(1, 1);
      }
    gw::array w = gw::array::wrap(ctx, hw.data(), {l0 + 2, na});
    std::vector<double> hg(in.rank == 0 ? G[0] * G[1] : 0, -5.0);
    gw::array glob = in.rank == 0 ? gw::array::wrap(ctx, hg.data(), {G[0], G[1]}) : gw::array();
    g.gather(w, glob, 0, {1, 1});
    if (in.rank == 0)
      for (std::int64_t x = 0; x < G[0]; x++)
        for (std::int64_t y = 0; y < G[1]; y++) bad += hg[x * G[1] + y] != gw_ref(x, y);
    try { // widths that do not match the field: GW_EINVAL on every rank, with the detail
      g.gather(w, glob, 0, {2, 1});
      bad++;
    } catch (const gw::error &e) {
      bad += e.status() != GW_EINVAL || e.detail().empty();
    }
    gw::grid moved = std::move(g);
    bad += g || !moved || moved.comm() == MPI_COMM_NULL;
    gw::grid loc = gw::grid::from_local(MPI_COMM_WORLD, {3}, {1});
    bad += loc.info().global[0] != 3 * loc.info().size;
    std::string why;
    bad += !gw::halo_nccl_available(&why) && why.empty();
    bad += std::string(gw_halo_path_name(GW_HALO_PATH_NCCL)) != "nccl";
  }
  try {
    gw::grid wrong(MPI_COMM_WORLD, {4, 4, 4, 4});
    bad++;
  } catch (const gw::error &e) {
    bad += e.status() != GW_EINVAL;
  }
  bad += gw_cpu_live_registrations() != regs0;
  MPI_Allreduce(MPI_IN_PLACE, &bad, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  MPI_Finalize();
  if (rank == 0) std::printf("cpp.grid: %s\n", bad ? "FAILED" : "ok");
  return bad ? 1 : 0;
}
