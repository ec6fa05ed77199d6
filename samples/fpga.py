"""Sparse kernels for the FPGA (Xilinx HLS through DaCe), run as a C-simulation of the
generated code when no FPGA is attached: SpMV, a GCN layer (SpMM + bias + relu) and an
SDDMM on the bundled matrices, in float32, checked against scipy. The GCN layer goes
through ``ss.optimize(target='fpga')``, which chooses its streaming design (vector width,
accumulators, multi-pumping) with the FPGA model.

    python samples/fpga.py [MATRIX_DIR]

The first call of each program generates the HLS code and builds its simulation with g++
(a few seconds); "warm call" is the simulation's time, not an FPGA's.
"""
import sys
import warnings

import dace
import numpy as np

import sdfgsparse as ss
from sdfgsparse.targets.fpga.csim import SimulationNotice
from _common import load, matrices, max_error, timed

M, N, K = dace.symbol('M'), dace.symbol('N'), dace.symbol('K')
CSR32 = ss.CSR[dace.float32, M, N, dace.int32]


@dace.program
def fpga_spmv(A: CSR32, x: dace.float32[N]):
    return A @ x


@dace.program
def fpga_gcn_layer(A: CSR32, X: dace.float32[N, K], b: dace.float32[K]):
    return np.maximum(A @ X + b, 0)


@dace.program
def fpga_sddmm(A: CSR32, X: dace.float32[M, K], Y: dace.float32[K, N]):
    return ss.sddmm(A, X, Y)


def main(folder=None):
    warnings.filterwarnings('ignore', category=SimulationNotice)  # (the demo says it in its title)
    spmv, sddmm = (ss.compile(p, target='fpga') for p in (fpga_spmv, fpga_sddmm))
    gcn = None
    rows = []
    for name, path in matrices(folder):
        A = load(path, np.float32)
        rng = np.random.default_rng(0)
        m, n = A.shape
        x = rng.standard_normal(n).astype(np.float32)
        X, b = rng.standard_normal((n, 16)).astype(np.float32), rng.standard_normal(16).astype(np.float32)
        if gcn is None:  # the streaming design chosen by the model at the first matrix's sizes
            gcn = ss.optimize(fpga_gcn_layer, target='fpga', matrices={'A': A, 'X': X, 'b': b})
            c = gcn.fpga_choice
            print(f'fpga gcn layer: W={c.design.vector_width} P={c.design.accumulators} pumping {c.design.pumping} '
                  f'({c.rule}); gcn.fpga_report() gives the model')
        got, first, warm = timed(spmv, A, x, repeat=3)
        rows.append(('fpga spmv', name, max_error(got, A @ x), first, warm))
        got, first, warm = timed(gcn, A, X, b, repeat=3)
        rows.append(('fpga gcn layer', name, max_error(got, np.maximum(A @ X + b, 0)), first, warm))
        P, Q = rng.standard_normal((m, 16)).astype(np.float32), rng.standard_normal((16, n)).astype(np.float32)
        got, first, warm = timed(sddmm, A, P, Q, repeat=3)
        rows.append(('fpga sddmm', name, max_error(got, A.multiply(P @ Q)), first, warm))
    return rows


if __name__ == '__main__':
    for r in main(sys.argv[1] if len(sys.argv) > 1 else None):
        print(f'{r[0]:<15} {r[1]:<16} max rel err {r[2]:.1e}  first call {r[3]:.2f} s  warm call {r[4] * 1e3:.2f} ms')
