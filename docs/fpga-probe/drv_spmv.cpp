#include <cstdio>
#include <cmath>
#include <vector>
#include <random>
#include "spmv.h"
int main() {
  int M = 200, N = 150;
  std::mt19937 rng(42);
  std::vector<int> rowptr(M + 1, 0), col; std::vector<float> val;
  for (int i = 0; i < M; ++i) {
    for (int j = 0; j < N; ++j) if (rng() % 10 == 0) { col.push_back(j); val.push_back((rng() % 100) / 10.f); }
    rowptr[i + 1] = (int)col.size();
  }
  int NNZ = (int)col.size();
  std::vector<float> x(N), y(M, -1.f), ref(M, 0.f);
  for (int j = 0; j < N; ++j) x[j] = 1.f + j * 0.01f;
  for (int i = 0; i < M; ++i) for (int k = rowptr[i]; k < rowptr[i+1]; ++k) ref[i] += val[k] * x[col[k]];
  auto h = __dace_init_spmv(M, N, NNZ);
  __program_spmv(h, col.data(), rowptr.data(), val.data(), x.data(), y.data(), M, N, NNZ);
  __dace_exit_spmv(h);
  int bad = 0;
  for (int i = 0; i < M; ++i) if (std::fabs(y[i] - ref[i]) > 1e-3f * (1 + std::fabs(ref[i]))) ++bad;
  printf("spmv M=%d N=%d NNZ=%d mismatches=%d y[3]=%f ref[3]=%f\n", M, N, NNZ, bad, y[3], ref[3]);
  return bad != 0;
}
