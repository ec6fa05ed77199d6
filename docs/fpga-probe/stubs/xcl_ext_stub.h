// Minimal stand-in for XRT's CL/cl_ext_xilinx.h, just enough for
// hlslib/xilinx/OpenCL.h to compile in HLSLIB_SIMULATE_OPENCL mode.
// (Values mirror XRT's public definitions; never passed to a real runtime.)
#pragma once
// (no includes: safe to force-include into every TU with -include)
#define CL_MEM_EXT_PTR_XILINX (1u << 31)
#define XCL_MEM_TOPOLOGY (1u << 31)
#define XCL_MEM_DDR_BANK0 (1u << 0)
#define XCL_MEM_DDR_BANK1 (1u << 1)
#define XCL_MEM_DDR_BANK2 (1u << 2)
#define XCL_MEM_DDR_BANK3 (1u << 3)
typedef struct cl_mem_ext_ptr_s {
  unsigned int flags;
  void *obj;
  void *param;
} cl_mem_ext_ptr_t;
