"""SparseFormatInference: result formats of element-wise sparse ops from their consumers and
operands. Differential runs before/after on random and real matrices, the formats chosen,
JSON round trip, and the cases it must leave alone."""
import copy

import dace
import numpy as np
import pytest
import scipy.sparse as sp

import sdfgsparse as ss
from sdfgsparse.formats import is_sparse_desc, sparse_type_of
from sdfgsparse.ops.spmv import SpMV
from sdfgsparse.transformations import SparseFormatInference
from sparse_zoo import real_matrix

M, N = (dace.symbol(s) for s in 'MN')


@dace.program
def sum_transposed_times(A: ss.CSR[dace.float64, M, N], B: ss.CSR[dace.float64, M, N], x: dace.float64[M]):
    return (A - B).T @ x


@dace.program
def csc_product(A: ss.CSC[dace.float64, M, N], B: ss.CSC[dace.float64, M, N]):
    return A * B


@dace.program
def csc_sum(A: ss.CSC[dace.float64, M, N], B: ss.CSC[dace.float64, M, N]):
    return A + B


@dace.program
def sum_times(A: ss.CSC[dace.float64, M, N], B: ss.CSC[dace.float64, M, N], x: dace.float64[N]):
    return (A + B) @ x


@dace.program
def csr_sum(A: ss.CSR[dace.float64, M, N], B: ss.CSC[dace.float64, M, N]):
    return A + B


def _inferred(prog):
    sdfg = prog.to_sdfg()
    before = copy.deepcopy(sdfg)
    applied = sdfg.apply_transformations_repeated(SparseFormatInference)
    sdfg.validate()
    return before, sdfg, applied


def _formats(sdfg):
    return sorted(sparse_type_of(d).fmt.name for n, d in sdfg.arrays.items() if '.' not in n and is_sparse_desc(d)
                  and not n.endswith('_ssT'))


def _pair(rng, shape=(60, 45)):
    return (sp.random_array(shape, density=0.1, format='csr', rng=rng),
            sp.random_array(shape, density=0.1, format='csr', rng=rng))


def test_transposed_consumer_gets_a_column_major_intermediate(rng):
    before, after, applied = _inferred(sum_transposed_times)
    assert applied == 1
    assert _formats(after).count('CSC') == 1  # the intermediate A - B
    (spmv, ) = [n for n, _ in after.all_nodes_recursive() if isinstance(n, SpMV)]
    state = next(s for s in after.states() if spmv in s.nodes())
    assert spmv.operand_type(state, 'A').fmt.outer_dim == 0  # the SpMV now walks owned rows (was a scatter)
    a, b = ss.compile(before), ss.compile(after)
    C = real_matrix('cora_A')
    CC = (C @ C).tocsr()
    CC.sort_indices()
    for A, B in (_pair(rng), (C, CC)):
        x = rng.standard_normal(A.shape[0])
        np.testing.assert_allclose(b(A=A, B=B, x=x), a(A=A, B=B, x=x), rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(b(A=A, B=B, x=x), (A - B).T @ x, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize('prog,op', [(csc_product, 'mul'), (csc_sum, 'add')])
def test_returned_result_follows_column_major_operands(prog, op, rng):
    """The frontend already gives CSC for CSC (op) CSC, as scipy; the rules agree, so
    nothing is applied, and the result is CSC either way."""
    before, after, applied = _inferred(prog)
    assert applied == 0
    a = ss.compile(before)
    for A, B in (_pair(rng), (real_matrix('cora_A'), real_matrix('cora_A') * 2.0)):
        A, B = A.tocsc(), B.tocsc()
        want = A.multiply(B) if op == 'mul' else A + B
        got = a(A=A, B=B)
        assert got.format == 'csc' == want.format
        np.testing.assert_allclose(got.toarray(), want.toarray(), rtol=1e-12)
        assert got.has_sorted_indices


def test_row_consumer_gets_csr(rng):
    """CSC operands but a row-wise consumer: the consumer decides, the intermediate
    becomes CSR (the SpMV walks owned rows instead of scattering)."""
    before, after, applied = _inferred(sum_times)
    assert applied == 1
    assert _formats(before).count('CSC') == 3 and _formats(after).count('CSC') == 2
    (spmv, ) = [n for n, _ in after.all_nodes_recursive() if isinstance(n, SpMV)]
    state = next(s for s in after.states() if spmv in s.nodes())
    assert spmv.operand_type(state, 'A').fmt.name == 'CSR'
    a, b = ss.compile(before), ss.compile(after)
    for A, B in (_pair(rng), (real_matrix('cora_A'), real_matrix('cora_A') * 2.0)):
        A, B = A.tocsc(), B.tocsc()
        x = rng.standard_normal(A.shape[1])
        np.testing.assert_allclose(b(A=A, B=B, x=x), a(A=A, B=B, x=x), rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(b(A=A, B=B, x=x), (A + B) @ x, rtol=1e-10, atol=1e-12)


def test_mixed_operands_keep_csr():
    _, _, applied = _inferred(csr_sum)
    assert applied == 0


def test_round_trips_through_json():
    _, after, _ = _inferred(csc_sum)
    again = dace.SDFG.from_json(after.to_json())
    assert _formats(again) == _formats(after)
    assert SparseFormatInference.from_json(SparseFormatInference().to_json()).CATEGORY == 'Sparse'


@dace.program
def transposed_and_scaled(A: ss.CSR[dace.float64, M, N], B: ss.CSR[dace.float64, M, N], x: dace.float64[M],
                          y: dace.float64[M]):
    C = A - B
    return C.T @ x, C.T @ y, 2 * C


def test_a_reader_sharing_the_pattern_keeps_the_format(rng):
    """``2 * C`` stores its result with C's index arrays, typed as C is: retyping C alone to
    CSC (what its two transposed readers prefer) left that result CSR over CSC storage, a
    wrong result and, for a non-square C, writes past its position array. Not applied."""
    before, after, applied = _inferred(transposed_and_scaled)
    assert applied == 0 and _formats(after) == _formats(before)
    A, B = _pair(rng)
    x, y = rng.standard_normal(A.shape[0]), rng.standard_normal(A.shape[0])
    got = ss.compile(after)(A=A, B=B, x=x, y=y)
    np.testing.assert_allclose(got[0], (A - B).T @ x, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(got[1], (A - B).T @ y, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(got[2].toarray(), 2 * (A - B).toarray(), rtol=1e-12, atol=1e-12)
