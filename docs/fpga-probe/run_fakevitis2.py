"""Let DaCe 1.0.2 build+run a Xilinx SDFG itself (compiler.xilinx.mode=simulation) against a FAKE Vitis tree
(/tmp/fpga_probe/fakevitis: stub executables, ap_int headers from hls4ml, stub XRT lib) -> callable from Python."""
import os, sys
os.environ.setdefault('DACE_CONFIG', '/tmp/fpga_probe/dace.conf')
import numpy as np
import dace
from dace.config import Config

FV = os.environ.get('FV', '/tmp/fpga_probe/fakevitis')
SYS = FV + '/sysroot/usr' if os.path.isdir(FV + '/sysroot') else '/tmp/fpga_probe/sysroot/usr'

os.environ['XILINX_XRT'] = FV + '/xrt'
Config.set('compiler', 'fpga', 'vendor', value='xilinx')
Config.set('compiler', 'xilinx', 'mode', value='simulation')
Config.set('compiler', 'xilinx', 'path', value=FV + '/Vitis/2022.1')
Config.set('compiler', 'extra_cmake_args', value=f'-DOpenCL_INCLUDE_DIR={SYS}/include '
           f'-DOpenCL_LIBRARY={FV}/xrt/lib/libxilinxopencl.so')
Config.set('default_build_folder', value=os.environ.get('CACHE', '/tmp/fpga_probe/work/.dacecache'))

N = dace.symbol('N')
M = dace.symbol('M')
NNZ = dace.symbol('NNZ')

@dace.program
def fv_vadd(x: dace.float32[N], y: dace.float32[N], z: dace.float32[N]):
    for i in dace.map[0:N]:
        z[i] = x[i] + y[i]

@dace.program
def fv_spmv(rowptr: dace.int32[M + 1], col: dace.int32[NNZ], val: dace.float32[NNZ],
            x: dace.float32[N], y: dace.float32[M]):
    for i in range(M):
        acc = dace.float32(0)
        for j in range(rowptr[i], rowptr[i + 1]):
            acc += val[j] * x[col[j]]
        y[i] = acc

def main(which):
    if which == 'vadd':
        sdfg = fv_vadd.to_sdfg(simplify=True)
        sdfg.apply_fpga_transformations()
        n = 1000
        x = np.random.rand(n).astype(np.float32); y = np.random.rand(n).astype(np.float32)
        z = np.zeros(n, np.float32)
        sdfg(x=x, y=y, z=z, N=n)
        print('vadd ok:', np.allclose(z, x + y))
    else:
        import scipy.sparse as sp
        A = sp.random(200, 150, density=0.1, format='csr', dtype=np.float32, random_state=1)
        x = np.random.rand(150).astype(np.float32); y = np.zeros(200, np.float32)
        sdfg = fv_spmv.to_sdfg(simplify=True)
        sdfg.apply_fpga_transformations()
        sdfg(rowptr=A.indptr.astype(np.int32), col=A.indices.astype(np.int32), val=A.data.copy(), x=x, y=y,
             M=200, N=150, NNZ=A.nnz)
        print('spmv ok:', np.allclose(y, A @ x, rtol=1e-4))

if __name__ == '__main__':
    main(sys.argv[1] if len(sys.argv) > 1 else 'vadd')
