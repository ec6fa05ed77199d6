"""Make DaCe-generated Xilinx host code simulate multi-pumped (_pumped) kernels:
DaCe 1.0.2 emits  program.MakeKernel("X_pumped_top", SimulationOnly(...)...)  without a host
function and comments out the X_pumped signature, so in HLSLIB_SIMULATE_OPENCL mode the pumped
kernel never runs (empty std::function -> exception swallowed by the shared_future) and the
design deadlocks. Patch: declare the signature and pass the C++ function."""
import re, sys
path = sys.argv[1]
s = open(path).read()
s = s.replace('//DACE_EXPORTED void ', 'DACE_EXPORTED void ')
s = re.sub(r'program\.MakeKernel\("(\w+)_pumped_top",', r'program.MakeKernel(\1_pumped, "\1_pumped_top",', s)
open(path, 'w').write(s)
