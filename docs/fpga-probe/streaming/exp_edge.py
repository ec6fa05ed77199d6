"""Side experiments: zero-length crd/vals buffers for nnz=0, FIFO depth 1, M=0."""
import os, sys
os.environ.setdefault('DACE_cache', 'hash')
import numpy as np, scipy.sparse as sp
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import spmm_stream as S
from sdfgsparse.targets.fpga import csim

c = S.compile_sdfg(S.build_sdfg(2, 8, depth=1))
rng = np.random.default_rng(0)
A = S.random_csr(30, 20, 0.3, rng, empty_rows=(0, 29))
print('depth=1:', S.run_case(c, 2, 8, A, rng))
# nnz = 0 with zero-length arrays
X = np.ones((5, 8), np.float32); Y = np.full((4, 8), np.nan, np.float32)
c(pos=np.zeros(5, np.int32), crd=np.zeros(0, np.int32), vals=np.zeros(0, np.float32), X=X, Y=Y, M=4, N=5, NNZ=0)
csim.check_error(c)
print('nnz=0 zero-length buffers:', np.all(Y == 0))
# M = 0
Y = np.zeros((0, 8), np.float32)
c(pos=np.zeros(1, np.int32), crd=np.zeros(0, np.int32), vals=np.zeros(0, np.float32), X=X, Y=Y, M=0, N=5, NNZ=0)
csim.check_error(c)
print('M=0 ok')
