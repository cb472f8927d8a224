// cpu.cpp.halo: gw::halo over a periodic 3-D Cartesian communicator: after update() (and
// start()/finish()) every cell, halo included, holds the value of the global cell it stands
// for; an invalid plan throws gw::error with the halo's message; plans and arrays leave
// nothing allocated or registered.
#define GW_CPP_HALO 1 // gpuwrap.hpp includes gpuwrap/halo.h (and mpi.h, without its C++ bindings)
#include <gpuwrap.hpp>
#include <gpuwrap/cpu.h>

#include <cstdio>
#include <vector>

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, size, dims[3] = {0, 0, 0}, periods[3] = {1, 1, 1}, coords[3], bad = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Dims_create(size, 3, dims);
  MPI_Comm cart;
  MPI_Cart_create(MPI_COMM_WORLD, 3, dims, periods, 0, &cart);
  MPI_Cart_coords(cart, rank, 3, coords);
  const std::size_t regs0 = gw_cpu_live_registrations();
  const std::int64_t n[3] = {5, 4, 6}, in[3] = {3, 2, 4};
  auto value = [&](std::int64_t i, std::int64_t j, std::int64_t k) {
    std::int64_t g[3] = {coords[0] * in[0] + i - 1, coords[1] * in[1] + j - 1, coords[2] * in[2] + k - 1};
    for (int d = 0; d < 3; d++) g[d] = (g[d] % (dims[d] * in[d]) + dims[d] * in[d]) % (dims[d] * in[d]);
    return double(g[0] * 10000 + g[1] * 100 + g[2]);
  };
  {
    gw::context ctx(GW_BACKEND_CPU);
    std::vector<double> h(n[0] * n[1] * n[2], -1.0);
    for (std::int64_t i = 1; i < n[0] - 1; i++)
      for (std::int64_t j = 1; j < n[1] - 1; j++)
        for (std::int64_t k = 1; k < n[2] - 1; k++) h[(i * n[1] + j) * n[2] + k] = value(i, j, k);
    gw::array a = gw::array::wrap(ctx, h.data(), {n[0], n[1], n[2]});
    for (int split = 0; split < 2; split++) {
      gw::halo plan(a, cart, {1, 1, 1}, GW_HALO_PATH_HOST);
      if (split) {
        plan.start();
        plan.finish();
      } else {
        plan.update();
      }
      gw::halo moved = std::move(plan);
      bad += plan || !moved || moved.info().path != GW_HALO_PATH_HOST;
    }
    for (std::int64_t i = 0; i < n[0]; i++)
      for (std::int64_t j = 0; j < n[1]; j++)
        for (std::int64_t k = 0; k < n[2]; k++) bad += h[(i * n[1] + j) * n[2] + k] != value(i, j, k);
    try {
      gw::halo wrong(a, MPI_COMM_WORLD, {1, 1, 1});
      bad++;
    } catch (const gw::error &e) {
      bad += e.status() != GW_EINVAL || e.detail().empty();
    }
  }
  bad += gw_cpu_live_registrations() != regs0;
  MPI_Allreduce(MPI_IN_PLACE, &bad, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  MPI_Comm_free(&cart);
  MPI_Finalize();
  if (rank == 0) std::printf("cpp.halo: %s (%d ranks)\n", bad ? "FAILED" : "ok", size);
  return bad ? 1 : 0;
}
