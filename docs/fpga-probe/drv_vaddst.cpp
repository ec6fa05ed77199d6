#include <cstdio>
#include <cmath>
#include <vector>
#include "vaddst.h"
int main() {
  int N = 1000;
  std::vector<float> x(N), y(N), z(N, -1.f);
  for (int i = 0; i < N; ++i) { x[i] = i * 0.5f; y[i] = 3.f - i; }
  auto h = __dace_init_vaddst(N);
  if (!h) { printf("init failed\n"); return 2; }
  __program_vaddst(h, x.data(), y.data(), z.data(), N);
  int bad = 0;
  for (int i = 0; i < N; ++i) if (std::fabs(z[i] - (x[i] + y[i])) > 1e-6f) ++bad;
  __dace_exit_vaddst(h);
  printf("vaddst N=%d mismatches=%d z[10]=%f\n", N, bad, z[10]);
  return bad != 0;
}
