"""Each sparse transformation applied by hand to an SDFG, then the whole pipeline with
``ss.optimize`` — a copyable starting point for scripting optimisations.

    python samples/transformations_by_hand.py [MATRIX_DIR]

Every step is checked against scipy on the bundled matrices.
"""
import sys

import dace
import numpy as np

import sdfgsparse as ss
from sdfgsparse.transformations import (SparseDenseTiling, SparseEpilogueFusion, SparseFormatInference,
                                        SparseLoopOrdering)
from _common import load, matrices, max_error, timed

M, N, K, F = (dace.symbol(s) for s in 'MNKF')


@dace.program
def sampled(S: ss.CSR[dace.float64, M, N], X: dace.float64[M, K], Y: dace.float64[N, K]):
    return S * (X @ Y.T)  # written as a dense product, then sampled


@dace.program
def difference_t(A: ss.CSR[dace.float64, M, N], B: ss.CSR[dace.float64, M, N], x: dace.float64[M]):
    return (A - B).T @ x  # the intermediate is only used transposed


@dace.program
def gcn_layer(A: ss.CSR[dace.float64, N, N], X: dace.float64[N, K], W: dace.float64[K, F], b: dace.float64[F]):
    return np.maximum(A @ (X @ W) + b, 0)


@dace.program
def atb(A: ss.CSR[dace.float64, N, M], B: dace.float64[N, K]):
    return A.T @ B


@dace.program
def attention(S: ss.CSR[dace.float64, M, N], Q: dace.float64[M, K], Kt: dace.float64[N, K],
              V: dace.float64[N, F]):
    return ss.softmax(S * (Q @ Kt.T)) @ V


def by_hand():
    """The transformed programs (SDFG-level scripting, one transformation each)."""
    progs = {}
    sdfg = sampled.to_sdfg()
    sdfg.apply_transformations(SparseLoopOrdering)  # S * (X @ Y.T) -> SDDMM: nnz*K, not M*N*K
    progs['ordering'] = ss.compile(sdfg)
    sdfg = difference_t.to_sdfg()
    sdfg.apply_transformations(SparseFormatInference)  # A - B stored as CSC: (A - B).T @ x walks rows
    progs['format-infer'] = ss.compile(sdfg)
    sdfg = gcn_layer.to_sdfg()
    sdfg.apply_transformations_repeated(SparseEpilogueFusion)  # + b and relu inside the SpMM
    progs['epilogue'] = ss.compile(sdfg)
    return progs


def main(folder=None, k=16):
    progs = by_hand()
    rows = []
    rng = np.random.default_rng(0)
    for name, path in matrices(folder):
        A = load(path)
        m, n = A.shape
        X, Y, x = rng.standard_normal((m, k)), rng.standard_normal((n, k)), rng.standard_normal(m)
        cases = [
            ('ordering', lambda: progs['ordering'](S=A, X=X, Y=Y), A.multiply(X @ Y.T)),
            ('format-infer', lambda: progs['format-infer'](A=A, B=2.0 * A, x=x), (A - 2.0 * A).T @ x),
        ]
        if m == n:
            W, b = rng.standard_normal((k, 8)), rng.standard_normal(8)
            cases.append(('epilogue', lambda: progs['epilogue'](A=A, X=X, W=W, b=b), np.maximum(A @ (X @ W) + b, 0)))
        # tiling needs sizes: SparseDenseTiling takes them as symbol values
        B = rng.standard_normal((m, 64))
        sdfg = atb.to_sdfg()
        sdfg.apply_transformations(SparseDenseTiling, options={'sizes': {'N': m, 'M': n, 'K': 64}})
        tiled = ss.compile(sdfg)
        cases.append(('tiling', lambda: tiled(A=A, B=B), A.T @ B))
        # the whole pipeline: loop ordering, then fusion into one pass over S's rows
        opt = ss.optimize(attention, matrices={'S': A})
        Q, Kt, V = rng.standard_normal((m, k)), rng.standard_normal((n, k)), rng.standard_normal((n, 8))
        cases.append(('optimize', lambda: opt(S=A, Q=Q, Kt=Kt, V=V), ss.softmax(A.multiply(Q @ Kt.T).tocsr()) @ V))
        for label, call, want in cases:
            got, first, warm = timed(call)
            rows.append((label, name, max_error(got, want), first, warm))
    return rows


if __name__ == '__main__':
    print(ss.optimize(attention).report())
    for r in main(sys.argv[1] if len(sys.argv) > 1 else None):
        print(*r)
