"""Try DaCe's own build of the TemporalVectorization (multi-pumped) SDFG against the fake Vitis tree."""
import os, sys
os.environ.setdefault('DACE_CONFIG', '/tmp/fpga_probe/dace.conf')
FV = '/tmp/fpga_probe/fv2'
os.environ['XILINX_XRT'] = FV + '/xrt'
import numpy as np, dace
from dace.config import Config
Config.set('compiler', 'xilinx', 'path', value=FV + '/Vitis/2022.1')
Config.set('compiler', 'extra_cmake_args', value=f'-DOpenCL_INCLUDE_DIR={FV}/sysroot/usr/include -DOpenCL_LIBRARY={FV}/xrt/lib/libxilinxopencl.so')
Config.set('default_build_folder', value='/tmp/fpga_probe/work/.dacecache2')
sdfg = dace.SDFG.from_file('/tmp/fpga_probe/work/tvadd/tvadd.sdfg')
x = np.random.rand(1024).astype(np.float32); y = np.random.rand(1024).astype(np.float32); r = np.zeros(1024, np.float32)
sdfg(x=x, y=y, returnnew=r)
print('tvadd ok:', np.allclose(r, x + y))
