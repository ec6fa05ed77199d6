"""``np.maximum`` / ``np.minimum`` inside our programs propagate NaN as NumPy does (NaN in
either operand gives NaN), ``np.fmax`` / ``np.fmin`` ignore it: in DaCe's dense ufuncs of a
program we compile (``ss.compile``, or one with sparse data; stock DaCe 1.0.2 computes
``a > b ? a : b`` and ``np.maximum(nan, 0)`` was 0) and in the epilogues
``SparseEpilogueFusion`` fuses into sparse products (the GCN layer ``np.maximum(A @ X, 0)``),
cpu and pure expansions. A plain dense ``@dace.program`` keeps DaCe's own code.
"""
import types

import dace
import numpy as np
import pytest
import scipy.sparse as sp

import sdfgsparse as ss
from sdfgsparse.lowering.epilogue import NAN_UFUNC_CODE, node_epilogue, program_expressible
from sdfgsparse.ops.base import FusableSparseNode
from sdfgsparse.transformations import SparseEpilogueFusion

M, N, K = (dace.symbol(s) for s in 'MNK')
nan, inf = np.nan, np.inf


@dace.program
def dense_extrema(X: dace.float64[N], Y: dace.float64[N], I: dace.int32[N], J: dace.int32[N]):
    return (np.maximum(X, Y), np.minimum(X, Y), np.fmax(X, Y), np.fmin(X, Y), np.maximum(X, 0.0),
            np.minimum(1.0, X), np.maximum(I, J), np.minimum(I, J))


def test_dense_ufuncs_propagate_nan_like_numpy():
    X = np.array([nan, 1.0, nan, 2.0, -inf, 0.5, inf])
    Y = np.array([0.0, nan, nan, 1.0, nan, -0.5, 3.0])
    I = np.array([1, -2, 3, 2**31 - 1, -2**31, 0, 5], dtype=np.int32)
    J = np.array([0, 5, 3, -1, 0, 0, 7], dtype=np.int32)
    want = (np.maximum(X, Y), np.minimum(X, Y), np.fmax(X, Y), np.fmin(X, Y), np.maximum(X, 0.0),
            np.minimum(1.0, X), np.maximum(I, J), np.minimum(I, J))
    got = ss.compile(dense_extrema)(X, Y, I, J)
    for k, (g, w) in enumerate(zip(got, want)):
        assert g.dtype == w.dtype, f'result {k}: dtype {g.dtype} != {w.dtype}'
        np.testing.assert_array_equal(g, w, err_msg=f'result {k}')


def test_a_plain_dense_program_keeps_daces_code():
    """Not ours (no sparse data, not compiled by sdfgsparse): DaCe's own ufunc tasklets."""
    from dace.frontend.python import replacements
    codes = {n.code.as_string for n, _ in dense_extrema.to_sdfg().all_nodes_recursive()
             if isinstance(n, dace.nodes.Tasklet)}
    for name, code in NAN_UFUNC_CODE.items():
        assert code not in codes
        assert replacements.ufuncs[name]['code'] in codes  # DaCe's: max(a, b) / min(a, b)


@pytest.mark.parametrize('name', sorted(NAN_UFUNC_CODE))
def test_ufunc_code_is_written_as_the_numpy_call_in_cpu_kernels(name):
    """The patched tasklet code, fused as an epilogue, is a statement the cpu kernels can
    hold (``np.maximum(acc + b[k], 0)``), not a conditional DaCe's frontend rejects."""
    code = NAN_UFUNC_CODE[name].split('=', 1)[1].strip().replace('__in1', '__value').replace('__in2', '0')
    assert program_expressible(code)
    node = types.SimpleNamespace(epilogue=code.replace('__value', '(__value + _epi_0)'), epilogue_inputs={'_epi_0': '{1}'})
    assert node_epilogue(node, 'acc', ['i', 'k']) == f'np.{name}(acc + _epi_0[k], 0)'
    assert not program_expressible('__value if __value > 1 else 2')  # other conditionals are refused


@dace.program
def epilogues(A: ss.CSR[dace.float64, M, N], B: dace.float64[N, K], x: dace.float64[N], C: dace.float64[N, K]):
    return np.maximum(A @ B, 0), np.minimum(A @ x, 1.0), np.fmax(A @ C, 0.0)


def _epilogue_program(impl):

    def nan_epilogues(A: ss.CSR[dace.float64, M, N], B: dace.float64[N, K], x: dace.float64[N],
                      C: dace.float64[N, K]):
        return np.maximum(A @ B, 0), np.minimum(A @ x, 1.0), np.fmax(A @ C, 0.0)

    nan_epilogues.__name__ = f'nan_epilogues_{impl}'
    return dace.program(nan_epilogues)


def _operands():
    A = sp.csr_array(np.array([[1.0, 0, 0], [0, 2.0, 0], [0, 0, nan], [0, 0, 0], [1.0, -1.0, 0]]))
    B = np.array([[nan, 1.0], [-1.0, nan], [2.0, -3.0]])
    x = np.array([nan, -1.0, 0.5])
    C = np.array([[nan, -1.0], [1.0, 2.0], [0.0, 0.0]])
    return A, B, x, C


def _check(got, A, B, x, C, what):
    want = (np.maximum(A @ B, 0), np.minimum(A @ x, 1.0), np.fmax(A @ C, 0.0))  # scipy: stored entries only
    for k, (g, w) in enumerate(zip(got, want)):
        np.testing.assert_array_equal(np.asarray(g), w, err_msg=f'{what}: result {k}')
    assert np.isnan(got[0][0, 0]) and np.isnan(got[1][0]), f'{what}: NaN dropped'


@pytest.mark.parametrize('impl', ['cpu', 'pure'])
def test_fused_epilogues_keep_nan(impl):
    prog = _epilogue_program(impl)
    with ss.targets.use_implementation('pure' if impl == 'pure' else None):
        sdfg = prog.to_sdfg()
    assert sdfg.apply_transformations_repeated(SparseEpilogueFusion) == 3
    fused = [n for n, _ in sdfg.all_nodes_recursive() if isinstance(n, FusableSparseNode)]
    assert len(fused) == 3 and all(n.epilogue and n.implementation in (impl, None) for n in fused)
    _check(ss.compile(sdfg)(*_operands()), *_operands(), f'{impl}, fused')


def test_optimize_keeps_nan():
    _check(ss.optimize(epilogues)(*_operands()), *_operands(), 'ss.optimize')
    _check(epilogues(*_operands()), *_operands(), 'unfused')
