"""Conjugate gradients for a symmetric positive definite CSR matrix: one CG iteration is a
``@dace.program`` (SpMV, two dot products, three vector updates); Python loops over it.
The residual norms are checked against the same steps in scipy / NumPy.

    python samples/cg.py [MATRIX_DIR] [ITERATIONS]

Each bundled square matrix A becomes SPD as ``S / ||S||_inf + 1.1 I`` with ``S = A + A.T``:
its eigenvalues lie in [0.1, 2.1] (the spectral radius is at most the largest absolute row
sum), so CG converges in a few dozen steps and the trajectories can be compared.
"""
import sys
import time

import dace
import numpy as np
import scipy.sparse as sp

import sdfgsparse as ss
from _common import load, matrices

N = dace.symbol('N')


@dace.program
def cg_step(A: ss.CSR[dace.float64, N, N], x: dace.float64[N], r: dace.float64[N], p: dace.float64[N],
            rs_old: dace.float64):
    Ap = A @ p
    alpha = rs_old / np.dot(p, Ap)
    x_new = x + alpha * p
    r_new = r - alpha * Ap
    rs_new = np.dot(r_new, r_new)
    p_new = r_new + (rs_new / rs_old) * p
    return x_new, r_new, p_new, rs_new


def make_spd(A):
    """``S / ||S||_inf + 1.1 I``, ``S = A + A.T`` (see the module docstring), canonical CSR."""
    S = sp.csr_array(A + A.T)
    S = sp.csr_array(S / max(abs(S).sum(axis=1).max(), 1e-300) + 1.1 * sp.eye_array(A.shape[0]))
    S.sum_duplicates()
    S.sort_indices()
    return S


def cg(step, A, b, iterations):
    """``iterations`` CG steps from x = 0 with ``step(A, x, r, p, rs_old)``; returns x and
    the residual norms ||r|| after each step (the first entry is ||b||)."""
    x, r = np.zeros_like(b), b.copy()
    p, rs = r.copy(), float(r @ r)
    norms = [np.sqrt(rs)]
    for _ in range(iterations):
        x, r, p, rs = step(A, x, r, p, rs)  # results go straight back in as arguments
        rs = float(np.asarray(rs).reshape(-1)[0])  # the program returns a 1-element array
        norms.append(np.sqrt(rs))
    return x, np.array(norms)


def numpy_step(A, x, r, p, rs_old):
    """The same iteration with scipy / NumPy."""
    Ap = A @ p
    alpha = rs_old / (p @ Ap)
    x, r = x + alpha * p, r - alpha * Ap
    rs_new = r @ r
    return x, r, r + (rs_new / rs_old) * p, rs_new


def main(folder=None, iterations=20):
    """Rows (kernel, matrix, error, first call s, warm step s) as ``sdfgsparse demo`` prints
    them; the error is the largest difference of the residual norms from NumPy's, relative
    to ||b||."""
    rows = []
    for name, path in matrices(folder):
        A = load(path)
        if A.shape[0] != A.shape[1]:
            continue
        A = make_spd(A)
        b = np.random.default_rng(0).standard_normal(A.shape[0])
        t0 = time.perf_counter()
        cg(cg_step, A, b, 1)
        first = time.perf_counter() - t0
        t0 = time.perf_counter()
        x, norms = cg(cg_step, A, b, iterations)
        warm = (time.perf_counter() - t0) / iterations
        _, want = cg(numpy_step, A, b, iterations)
        trajectory = float(np.max(np.abs(norms - want)) / want[0])  # relative to ||b||
        rows.append((f'cg x{iterations}', name, trajectory, first, warm))
    return rows


if __name__ == '__main__':
    for r in main(sys.argv[1] if len(sys.argv) > 1 else None, int(sys.argv[2]) if len(sys.argv) > 2 else 20):
        print(*r)
