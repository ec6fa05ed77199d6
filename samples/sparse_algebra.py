"""Sparse results: A + A.T, A @ A (SpGEMM), SDDMM and scaled relu, returned as scipy arrays.

    python samples/sparse_algebra.py [MATRIX_DIR]
"""
import sys

import dace
import numpy as np
import scipy.sparse as sp

import sdfgsparse as ss
from _common import load, matrices, max_error, timed

N, K = dace.symbol('N'), dace.symbol('K')


@dace.program
def symmetrize(A: ss.CSR[dace.float64, N, N]):
    return A + A.T


@dace.program
def square(A: ss.CSR[dace.float64, N, N]):
    return A @ A


@dace.program
def sampled(A: ss.CSR[dace.float64, N, N], X: dace.float64[N, K], Y: dace.float64[K, N]):
    return ss.relu(0.5 * ss.sddmm(A, X, Y))


def main(folder=None):
    rows = []
    for name, path in matrices(folder):
        A = load(path)
        if A.shape[0] != A.shape[1]:
            continue
        got, first, warm = timed(symmetrize, A)
        rows.append(('A + A.T', name, max_error(got, A + A.T), first, warm))
        got, first, warm = timed(square, A)
        rows.append(('A @ A', name, max_error(got, A @ A), first, warm))
        rng = np.random.default_rng(0)
        X, Y = rng.standard_normal((A.shape[0], 8)), rng.standard_normal((8, A.shape[0]))
        got, first, warm = timed(sampled, A, X, Y)
        want = sp.csr_array(A.multiply(X @ Y) * 0.5)
        want.data = np.maximum(want.data, 0)
        rows.append(('relu(sddmm)', name, max_error(got, want), first, warm))
    return rows


if __name__ == '__main__':
    for r in main(sys.argv[1] if len(sys.argv) > 1 else None):
        print(*r)
