// sdfgsparse: what the C-simulation host (csim_include/hlslib/xilinx/OpenCL.h) keeps
// once per program library: the first error a simulated kernel raised.
#include <cstring>
#include <mutex>
#include <string>

namespace {
std::mutex lock;
std::string message;
}  // namespace

namespace hlslib {
namespace ocl {
namespace csim {

void record_error(const std::string &what) {
  std::lock_guard<std::mutex> guard(lock);
  if (message.empty()) message = what;
}

}  // namespace csim
}  // namespace ocl
}  // namespace hlslib

// The first error since the last call, copied into buffer (size bytes, 0-terminated);
// returns its length (0: none) and clears it.
extern "C" int sdfgsparse_csim_error(char *buffer, int size) {
  std::lock_guard<std::mutex> guard(lock);
  int n = static_cast<int>(message.size());
  if (buffer && size > 0) {
    std::strncpy(buffer, message.c_str(), size - 1);
    buffer[size - 1] = '\0';
  }
  message.clear();
  return n;
}
