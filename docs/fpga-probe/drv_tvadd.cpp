#include <cstdio>
#include <cmath>
#include <vector>
#include "tvadd.h"
int main() {
  const int N = 1024;  // specialized in the SDFG
  std::vector<float> x(N), y(N), z(N, -1.f);
  for (int i = 0; i < N; ++i) { x[i] = i * 0.5f; y[i] = 3.f - i; }
  using V = dace::vec<float, 4>;
  auto h = __dace_init_tvadd();
  __program_tvadd(h, (V*)z.data(), (V*)x.data(), (V*)y.data());
  __dace_exit_tvadd(h);
  int bad = 0;
  for (int i = 0; i < N; ++i) if (std::fabs(z[i] - (x[i] + y[i])) > 1e-6f) ++bad;
  printf("tvadd N=%d mismatches=%d z[10]=%f\n", N, bad, z[10]);
  return bad != 0;
}
