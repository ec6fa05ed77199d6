"""Negative checks for the multi-pumped variant (each run in its own process under `timeout`):
  nopatch : W=4 F=2 without the host patch        -> expected to hang (pumped kernel never launched)
  nofix4  : W=4 F=4 without the map-range fix      -> expected to hang / fail (DaCe hard-codes *2)
  samedepth: W=4 F=2 with equal stream depths      -> expected to hang (is_external_stream bug)"""
import os, sys
os.environ.setdefault('DACE_cache', 'hash')
import numpy as np, dace
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import spmm_stream as S, spmm_stream_pumped as P
from dace.transformation.subgraph import TemporalVectorization

mode = sys.argv[1]
W, K = 4, 8
F = 4 if mode == 'nofix4' else 2
if mode != 'nopatch':
    P._install_host_patch()
sdfg = P.build_pumpable(W, K)
sdfg.name += f'_{mode}'
if mode == 'samedepth':
    for n in ('vb_s', 'pr_s'):
        sdfg.arrays[n].buffer_size = 8
if mode == 'nofix4':
    ok, sg = P.report_can_be_applied(sdfg, F)['multiply']
    xf = TemporalVectorization(); xf.factor = F; xf.setup_match(sg); xf.apply(sdfg)
else:
    P.pump(sdfg, F)
with dace.config.set_temporary('compiler', 'xilinx', 'frequency', value=P.CLOCKS):
    c = S.compile_sdfg(sdfg)
rng = np.random.default_rng(0)
print(mode, 'result:', S.run_case(c, W, K, S.random_csr(10, 10, 0.3, rng), rng), flush=True)
