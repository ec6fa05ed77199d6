"""Dense operands in every memory layout a user can hand over: Fortran order (what
``scipy.linalg.qr`` returns), strided and reversed views, offset C-ordered views and
non-contiguous torch tensors, in every op with a dense operand, cold and warm. They are
computed correctly (copied to C order where the kernels need it), the caller's arrays are
never modified, and an argument the program writes gets the result in its own layout.

Before: a Fortran-ordered ``B`` in ``A @ B`` gave a maximum error of 1.17 without any
error (DaCe passes the pointer and reads it as C-ordered), views raised DaCe's generic
``TypeError``.
"""
import dace
import numpy as np
import pytest
import scipy.linalg
import scipy.sparse as sp

import sdfgsparse as ss
from sparse_zoo import as_format, dense, tol

M, N, K = dace.symbol('M'), dace.symbol('N'), dace.symbol('K')


def _program(fmt):
    T = getattr(ss, fmt)[dace.float64, M, N]

    def lay_ops(A: T, x: dace.float64[N], xt: dace.float64[M], B: dace.float64[N, K], P: dace.float64[K, M],
                D: dace.float64[M, N], X: dace.float64[M, K], Y: dace.float64[K, N], W: dace.float64[K, K]):
        return A @ B, xt @ A, P @ A, A * D, A + D, D - A, ss.sddmm(A, X, Y), A @ (B @ W), A @ x

    lay_ops.__name__ = f'lay_ops_{fmt}'
    return dace.program(lay_ops)


PROGRAMS = {fmt: _program(fmt) for fmt in ('CSR', 'CSC', 'COO')}


def _reference(A, x, xt, B, P, D, X, Y, W):
    Ad = A.toarray()
    return [Ad @ B, xt @ Ad, P @ Ad, Ad * D, Ad + D, D - Ad, Ad * (X @ Y), Ad @ (B @ W), Ad @ x]


def _operands(rng, m, n, k):
    return dict(x=rng.standard_normal(n), xt=rng.standard_normal(m), B=rng.standard_normal((n, k)),
                P=rng.standard_normal((k, m)), D=rng.standard_normal((m, n)), X=rng.standard_normal((m, k)),
                Y=rng.standard_normal((k, n)), W=rng.standard_normal((k, k)))


def _relayout(a, how, rng):
    """``a``'s values in layout ``how``."""
    if how == 'C':
        return a
    if how == 'F':
        return np.asfortranarray(a)
    if how == 'strided':  # every other element of a larger array, along every axis
        big = np.zeros(tuple(2 * s + 1 for s in a.shape))
        view = big[tuple(slice(1, None, 2) for _ in a.shape)]
        view[...] = a
        return view
    if how == 'reversed':
        big = a[tuple(slice(None, None, -1) for _ in a.shape)].copy()
        return big[tuple(slice(None, None, -1) for _ in a.shape)]
    if how == 'offset':  # a C-ordered view that does not start at its base
        big = np.concatenate([rng.standard_normal(3), a.ravel()])
        return big[3:].reshape(a.shape)
    raise ValueError(how)


@pytest.mark.parametrize('fmt', ['CSR', 'CSC', 'COO'])
@pytest.mark.parametrize('how', ['F', 'strided', 'reversed', 'offset'])
def test_every_dense_operand_in_every_layout(rng, fmt, how):
    prog = PROGRAMS[fmt]
    m, n, k = 13, 9, 4
    A = sp.random_array((m, n), density=0.3, format='csr', rng=rng)
    arg = as_format(A, fmt, np.int32, rng)
    ops = _operands(rng, m, n, k)
    want = _reference(A, **ops)
    prog(arg, **ops)  # the C-ordered signature, so that the next calls are warm
    for name in ops:
        for _ in range(2):  # warm: the plan misses and the full path copies
            args = dict(ops)
            args[name] = _relayout(ops[name], how, rng)
            before = args[name].copy()
            got = prog(arg, **args)
            for label, g, w in zip(['A@B', 'xt@A', 'P@A', 'A*D', 'A+D', 'D-A', 'sddmm', 'A@(B@W)', 'A@x'], got,
                                   want):
                np.testing.assert_allclose(dense(g), w, **tol(np.float64), err_msg=f'{name} {how}: {label}')
            np.testing.assert_array_equal(args[name], before)


def test_qr_factor_and_read_only(rng):
    """The user's case: an orthogonal factor from scipy.linalg.qr (Fortran order) times a
    sparse matrix, also read-only."""
    A = sp.random_array((13, 9), density=0.3, format='csr', rng=rng)
    Q = scipy.linalg.qr(rng.standard_normal((9, 9)))[0][:, :4]
    assert not Q.flags.c_contiguous
    Q.flags.writeable = False
    ops = _operands(rng, 13, 9, 4)
    ops['B'] = Q
    got = PROGRAMS['CSR'](A, **ops)
    np.testing.assert_allclose(got[0], A @ Q, rtol=1e-12, atol=1e-12)


@dace.program
def lay_axpy(A: ss.CSR[dace.float64, M, N], x: dace.float64[N], y: dace.float64[M]):
    y[:] = A @ x + y


@pytest.mark.parametrize('how', ['C', 'F', 'strided', 'reversed', 'offset'])
def test_written_argument_gets_its_result(rng, how):
    """A program writing into a dense argument: the result lands in the caller's array,
    whatever its layout (a copy in, the result copied back)."""
    A = sp.random_array((12, 7), density=0.3, format='csr', rng=rng)
    x = _relayout(rng.standard_normal(7), how, rng)
    y0 = rng.standard_normal(12)
    for _ in range(2):
        y = _relayout(y0.copy(), how, rng)
        lay_axpy(A, x, y)
        np.testing.assert_allclose(y, A @ np.ascontiguousarray(x) + y0, rtol=1e-12)


def test_torch_non_contiguous(rng):
    torch = pytest.importorskip('torch')
    A = sp.random_array((13, 9), density=0.3, format='csr', rng=rng)
    ops = {k: torch.from_numpy(v) for k, v in _operands(rng, 13, 9, 4).items()}
    ops['B'] = torch.from_numpy(rng.standard_normal((4, 9))).t()  # transposed: not contiguous
    ops['x'] = torch.from_numpy(rng.standard_normal(18))[::2]
    got = PROGRAMS['CSR'](A, **ops)
    want = _reference(A, **{k: v.numpy() for k, v in ops.items()})
    for g, w in zip(got, want):
        np.testing.assert_allclose(dense(g.to_dense() if g.layout != torch.strided else g), w, rtol=1e-12,
                                   atol=1e-12)


def _inner_slices(A: ss.CSR[dace.float64, M, N], B: dace.float64[N, K], P: dace.float64[K, M],
                  C: dace.float64[M, K]):
    return (A @ B[:, 0], A @ B[:, 1:3], P[1] @ A, A.T @ C[:, 2], A.T @ P[0], ss.sddmm(A, C[:, 0:2], B[:, 1:3].T),
            A @ B[:, K - 1])


@pytest.mark.parametrize('implementation', ['cpu', 'pure'])
def test_dense_operands_sliced_inside_the_program(rng, implementation):
    """``A @ B[:, 0]``: DaCe passes the column to the node as a 2-D memlet of the whole
    ``B`` once it has removed the slice's view; the kernels took ``B``'s descriptor and read
    the column as contiguous (maximum error 1.15, no error raised). Now each connector takes
    the part its memlet selects, with the array's strides (``connector_desc``)."""
    with ss.targets.use_implementation(implementation if implementation == 'pure' else None):
        sdfg = dace.program(_inner_slices).to_sdfg()
    prog = ss.compile(sdfg)
    A = sp.random_array((7, 6), density=0.4, format='csr', rng=rng)
    B, P, C = rng.standard_normal((6, 4)), rng.standard_normal((4, 7)), rng.standard_normal((7, 4))
    got = prog(A=A, B=B, P=P, C=C)
    Ad = A.toarray()
    want = [Ad @ B[:, 0], Ad @ B[:, 1:3], P[1] @ Ad, Ad.T @ C[:, 2], Ad.T @ P[0], Ad * (C[:, 0:2] @ B[:, 1:3].T),
            Ad @ B[:, 3]]
    for g, w in zip(got, want):
        np.testing.assert_allclose(g.toarray() if sp.issparse(g) else g, w, atol=1e-12)
