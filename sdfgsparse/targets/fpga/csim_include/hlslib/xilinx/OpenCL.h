// sdfgsparse: the host side of DaCe's Xilinx code in C-simulation, without OpenCL.
//
// DaCe's generated host and frame code talk to the FPGA through hlslib's `hlslib::ocl`
// API (buffers, a program, kernels launched as tasks, events). hlslib's own header needs
// the Khronos OpenCL C++ bindings and Xilinx's extensions even in its simulation mode.
// This header stands in for it, earlier on the include path, with the part of that API
// DaCe 1.0.2's code generator emits, simulated on the host:
//   * a Buffer is host memory (shared by copies of the handle, as an OpenCL buffer is);
//   * MakeKernel binds the kernel's C++ function: buffers are passed as raw pointers,
//     SimulationOnly(x) as the object itself, scalars by value;
//   * ExecuteTaskAsync runs the kernel on its own thread (kernels of one state run
//     concurrently, as on the device, so streams between them work);
//   * an error inside a kernel is recorded, not swallowed: the program's call returns and
//     sdfgsparse_csim_error() gives the message (the Python side raises it).
// Kernels without a C++ function (RTL, multi-pumped top-levels) fail with that message.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstring>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

namespace hlslib {
namespace ocl {

enum class Access { read, write, readWrite };
enum class StorageType { DDR, HBM };

namespace csim {

// Keeps the first error of a kernel until sdfgsparse_csim_error() reads it (csim_runtime.cpp).
void record_error(const std::string &what);

}  // namespace csim

template <typename T, Access access = Access::readWrite>
class Buffer {
 public:
  Buffer() = default;
  explicit Buffer(size_t count) : data_(std::make_shared<std::vector<T>>(count)) {}

  T *devicePtr() { return data_ ? data_->data() : nullptr; }
  const T *devicePtr() const { return data_ ? data_->data() : nullptr; }
  size_t size() const { return data_ ? data_->size() : 0; }

  template <typename Ptr>
  void CopyFromHost(size_t offset, size_t count, Ptr source) {
    Check(offset, count, "CopyFromHost");
    std::copy(source, source + count, data_->begin() + offset);
  }

  template <typename Ptr>
  void CopyToHost(size_t offset, size_t count, Ptr destination) const {
    Check(offset, count, "CopyToHost");
    std::copy(data_->begin() + offset, data_->begin() + offset + count, destination);
  }

  template <typename Other>
  void CopyToDevice(size_t offset, size_t count, Other &other, size_t other_offset = 0) const {
    Check(offset, count, "CopyToDevice");
    if (other_offset + count > other.size()) throw std::out_of_range("CopyToDevice: destination too small");
    std::copy(data_->begin() + offset, data_->begin() + offset + count, other.devicePtr() + other_offset);
  }

 private:
  void Check(size_t offset, size_t count, const char *what) const {
    if (!data_ || offset + count > data_->size()) {
      throw std::out_of_range(std::string(what) + ": out of the buffer's range");
    }
  }
  std::shared_ptr<std::vector<T>> data_;
};

// A kernel argument that exists in simulation only (a stream between kernels).
template <typename T>
struct SimulationOnlyRef {
  T *object;
};

template <typename T>
SimulationOnlyRef<T> SimulationOnly(T &object) {
  return {&object};
}

template <typename T>
SimulationOnlyRef<T> SimulationOnly(T *object) {
  return {object};
}

namespace csim {

template <typename T>
T &unwrap(T &value) {
  return value;
}

template <typename T, Access A>
T *unwrap(Buffer<T, A> &buffer) {
  return buffer.devicePtr();
}

template <typename T>
T &unwrap(SimulationOnlyRef<T> &ref) {
  return *ref.object;
}

}  // namespace csim

class Event {
 public:
  Event() = default;
  explicit Event(std::shared_future<void> done) : done_(std::move(done)) {}
  void wait() const {
    if (done_.valid()) done_.wait();
  }

 private:
  std::shared_future<void> done_;
};

inline void WaitForEvents(const std::vector<Event> &events) {
  for (auto const &e : events) e.wait();
}

class Kernel {
 public:
  Kernel(std::string name, std::function<void()> body) : name_(std::move(name)), body_(std::move(body)) {}

  template <typename Iterator>
  Event ExecuteTaskAsync(Iterator first, Iterator last) {
    std::vector<Event> deps(first, last);
    return Launch(std::move(deps));
  }

  Event ExecuteTaskAsync() { return Launch({}); }

  void ExecuteTask() { ExecuteTaskAsync().wait(); }

 private:
  Event Launch(std::vector<Event> deps) {
    auto name = name_;
    auto body = body_;
    auto run = [name, body, deps]() {
      WaitForEvents(deps);
      try {
        if (!body) throw std::runtime_error("the kernel has no C++ function to simulate");
        body();
      } catch (std::exception const &e) {
        csim::record_error("kernel " + name + ": " + e.what());
      } catch (...) {
        csim::record_error("kernel " + name + ": unknown exception");
      }
    };
    return Event(std::async(std::launch::async, run).share());
  }

  std::string name_;
  std::function<void()> body_;
};

class Program {
 public:
  template <typename Function, typename... Args>
  Kernel MakeKernel(Function &&function, std::string const &name, Args &&...args) {
    auto bound = std::make_shared<std::tuple<std::decay_t<Args>...>>(std::forward<Args>(args)...);
    auto fn = function;
    return Kernel(name, [fn, bound]() { std::apply([&](auto &...a) { fn(csim::unwrap(a)...); }, *bound); });
  }

  // RTL and multi-pumped top-level kernels: named only, no C++ function
  template <typename... Args>
  Kernel MakeKernel(char const *name, Args &&...) {
    return Kernel(name, nullptr);
  }
};

class Context {
 public:
  Context() = default;
  explicit Context(int) {}
  Program &MakeProgram(std::string const &) { return program_; }
  Program &CurrentlyLoadedProgram() { return program_; }

  template <typename T, Access A>
  Buffer<T, A> MakeBuffer(StorageType, int, size_t count) {
    return Buffer<T, A>(count);
  }

 private:
  Program program_;
};

}  // namespace ocl
}  // namespace hlslib

