#include <cstdio>
#include <cmath>
#include <vector>
#include "vaddst4.h"
int main() {
  int N = 1000;
  std::vector<float> x(N), y(N), z(N, -1.f);
  for (int i = 0; i < N; ++i) { x[i] = i * 0.5f; y[i] = 3.f - i; }
  auto h = __dace_init_vaddst4(N);
  if (!h) { printf("init failed\n"); return 2; }
  using V = dace::vec<float, 4>; __program_vaddst4(h, (V*)x.data(), (V*)y.data(), (V*)z.data(), N);
  int bad = 0;
  for (int i = 0; i < N; ++i) if (std::fabs(z[i] - (x[i] + y[i])) > 1e-6f) ++bad;
  __dace_exit_vaddst4(h);
  printf("vaddst4 N=%d mismatches=%d z[10]=%f\n", N, bad, z[10]);
  return bad != 0;
}
