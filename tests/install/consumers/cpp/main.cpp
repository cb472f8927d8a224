// Wraps a std::vector, fills it through gpuwrap, checks the values and an error's status.
#include <gpuwrap.hpp>

#include <cstdio>
#include <vector>

int main() {
  try {
    gw::context ctx; // GW_BACKEND_AUTO: a GPU if one loads, else the CPU backend
    std::vector<double> h(12, 0.0);
    gw::array a = gw::array::wrap(ctx, h.data(), {3, 4});
    a.view({0, 0}, {3, 2}, {1, 2}).fill(2.5); // every other column
    ctx.synchronize();
    for (int i = 0; i < 12; i++)
      if (h[i] != (i % 2 ? 0.0 : 2.5)) return 1;
    try {
      a.view({3, 0}, {1, 1});
      return 2;
    } catch (const gw::error &e) {
      if (e.status() != GW_EINVAL) return 3;
    }
    std::printf("consumer_cpp: ok on %s\n", gw_backend_name(ctx.backend()));
  } catch (const gw::error &e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 4;
  }
  return 0;
}
