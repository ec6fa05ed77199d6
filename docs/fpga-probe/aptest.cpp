#include <ap_int.h>
#include <ap_fixed.h>
#include <hlslib/xilinx/DataPack.h>
#include <hlslib/xilinx/Stream.h>
#include <hlslib/xilinx/Simulation.h>
#include <cstdio>
void producer(hlslib::Stream<ap_uint<512>, 4> &s, int n) { for (int i = 0; i < n; ++i) { ap_uint<512> v = 0; v.range(511, 480) = i; v.range(31, 0) = 2 * i; s.Push(v); } }
void consumer(hlslib::Stream<ap_uint<512>, 4> &s, int n, long &sum) { for (int i = 0; i < n; ++i) { auto v = s.Pop(); sum += (long)v.range(511, 480).to_uint() + v.range(31, 0).to_uint(); } }
int main() {
  ap_fixed<16, 8> a = 1.25, b = -3.5; ap_int<40> big = 1; big <<= 38;
  hlslib::DataPack<float, 8> p(1.5f); 
  hlslib::Stream<ap_uint<512>, 4> s("s"); long sum = 0; const int n = 100;
  HLSLIB_DATAFLOW_INIT();
  HLSLIB_DATAFLOW_FUNCTION(producer, s, n);
  HLSLIB_DATAFLOW_FUNCTION(consumer, s, n, sum);
  HLSLIB_DATAFLOW_FINALIZE();
  printf("ap_fixed a*b=%f big=%lld pack[7]=%f streamsum=%ld (expect %d)\n", (a * b).to_double(), (long long)big.to_int64(), (float)p[7], sum, 3 * n * (n - 1) / 2);
}
