"""One graph-convolution layer, relu(A @ (X @ W)), in float32 with a CSR adjacency.

    python samples/gcn.py [MATRIX_DIR]
"""
import sys

import dace
import numpy as np

import sdfgsparse as ss
from _common import load, matrices, max_error, timed

M, N, K = (dace.symbol(s) for s in 'MNK')


@dace.program
def gcn(A: ss.CSR[dace.float32, N, N], X: dace.float32[N, K], W: dace.float32[K, M]):
    return np.maximum(A @ (X @ W), 0)


def main(folder=None, features=32, hidden=16):
    rows = []
    for name, path in matrices(folder):
        A = load(path, np.float32)
        if A.shape[0] != A.shape[1]:
            continue
        rng = np.random.default_rng(0)
        X = rng.standard_normal((A.shape[0], features)).astype(np.float32)
        W = rng.standard_normal((features, hidden)).astype(np.float32)
        got, first, warm = timed(gcn, A, X, W)
        rows.append(('gcn', name, max_error(got, np.maximum(A @ (X @ W), 0)), first, warm))
    return rows


if __name__ == '__main__':
    for r in main(sys.argv[1] if len(sys.argv) > 1 else None):
        print(*r)
