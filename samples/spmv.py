"""SpMV and its transpose in every catalogue format, straight from scipy objects.

    python samples/spmv.py [MATRIX_DIR]
"""
import sys

import dace
import numpy as np

import sdfgsparse as ss
from _common import load, matrices, max_error, timed

M, N = dace.symbol('M'), dace.symbol('N')


@dace.program
def spmv(A: ss.CSR[dace.float64, M, N], x: dace.float64[N]):
    return A @ x


@dace.program
def spmv_t(A: ss.CSR[dace.float64, M, N], y: dace.float64[M]):
    return A.T @ y  # iterates A's storage as CSC: no transposed copy


def main(folder=None):
    rows = []
    for name, path in matrices(folder):
        A = load(path)
        rng = np.random.default_rng(0)
        x, y = rng.standard_normal(A.shape[1]), rng.standard_normal(A.shape[0])
        got, first, warm = timed(spmv, A, x)
        rows.append(('spmv', name, max_error(got, A @ x), first, warm))
        got, first, warm = timed(spmv_t, A, y)
        rows.append(('spmv A.T', name, max_error(got, A.T @ y), first, warm))
    return rows


if __name__ == '__main__':
    for r in main(sys.argv[1] if len(sys.argv) > 1 else None):
        print(*r)
