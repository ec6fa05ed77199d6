"""Sparse (graph) attention, softmax(S ∘ (Q @ K.T)) @ V over the stored entries of S,
fused by hand with the SparseFusion transformation and checked against scipy.

    python samples/attention.py [MATRIX_DIR]
"""
import copy
import sys

import dace
import numpy as np

import sdfgsparse as ss
from sdfgsparse.transformations import SparseFusion
from _common import load, matrices, max_error, timed

M, N, D, E = (dace.symbol(s) for s in 'MNDE')


@dace.program
def attention(S: ss.CSR[dace.float64, M, N], Q: dace.float64[M, D], K: dace.float64[N, D], V: dace.float64[N, E]):
    return ss.softmax(ss.sddmm(S, Q, K.T), axis=1) @ V


def scipy_attention(S, Q, K, V):
    """The same on the host: sampled scores, softmax per row (ss.softmax on scipy), @ V."""
    return ss.softmax(ss.sddmm(S, Q, K.T), axis=1) @ V


def main(folder=None, d=64):
    sdfg = attention.to_sdfg()
    unfused = ss.compile(copy.deepcopy(sdfg))
    assert sdfg.apply_transformations(SparseFusion) == 1  # SDDMM -> softmax -> SpMM becomes one node
    fused = ss.compile(sdfg)
    rows = []
    for name, path in matrices(folder):
        S = load(path)
        rng = np.random.default_rng(0)
        m, n = S.shape
        Q, K, V = rng.standard_normal((m, d)), rng.standard_normal((n, d)), rng.standard_normal((n, d))
        want = scipy_attention(S, Q, K, V)
        for label, prog in (('attention-unfused', unfused), ('attention-fused', fused)):
            got, first, warm = timed(lambda: prog(S=S, Q=Q, K=K, V=V))
            rows.append((label, name, max_error(got, want), first, warm))
    return rows


if __name__ == '__main__':
    for r in main(sys.argv[1] if len(sys.argv) > 1 else None):
        print(*r)
