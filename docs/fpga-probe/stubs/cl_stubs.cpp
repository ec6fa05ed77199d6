// No-op definitions of the few OpenCL entry points that hlslib's cl:: wrappers
// reference (only reached on non-null handles, which never exist in
// HLSLIB_SIMULATE_OPENCL mode). Lets the simulation link without libOpenCL.
#include <CL/cl.h>
#include <cstdio>
#include <cstdlib>
#define DIE(n) { std::fprintf(stderr, "OpenCL stub %s called in simulation\n", n); std::abort(); }
extern "C" {
cl_int clReleaseCommandQueue(cl_command_queue) DIE("clReleaseCommandQueue")
cl_int clReleaseContext(cl_context) DIE("clReleaseContext")
cl_int clReleaseDevice(cl_device_id) DIE("clReleaseDevice")
cl_int clReleaseEvent(cl_event) DIE("clReleaseEvent")
cl_int clReleaseKernel(cl_kernel) DIE("clReleaseKernel")
cl_int clRetainEvent(cl_event) DIE("clRetainEvent")
}
