"""DistributeSparseProducts in one process: the rewritten program, with its callbacks bound
to the single-process product (scipy) and to the identity all-reduce, computes what the
original computes (a differential run); application counts; programs it must refuse,
refused before any change. Under MPI: tests/distributed/mpi_cases.py."""
import dace
import numpy as np
import pytest
import scipy.sparse as sp

import sdfgsparse as ss
from sdfgsparse.errors import UnsupportedOperationError
from sdfgsparse.transformations import DistributeSparseProducts

N, K, M = dace.symbol('N'), dace.symbol('K'), dace.symbol('M')


@dace.program
def cg_like(A: ss.CSR[dace.float64, N, N], x: dace.float64[N], p: dace.float64[N], rs: dace.float64):
    Ap = A @ p
    alpha = rs / np.dot(p, Ap)
    x_new = x + alpha * p
    return x_new, np.dot(x_new, x_new), np.sum(Ap), np.max(x_new)


@dace.program
def block_program(A: ss.CSR[dace.float64, N, N], X: dace.float64[N, K]):
    Y = A @ X
    return Y * 2.0 + X, np.sum(Y, axis=0), X.T @ Y


@dace.program
def transposed(A: ss.CSR[dace.float64, N, N], x: dace.float64[N]):
    return A.T @ x


@dace.program
def rectangular(A: ss.CSR[dace.float64, M, N], x: dace.float64[N]):
    return A @ x


@dace.program
def elementwise(A: ss.CSR[dace.float64, N, N], x: dace.float64[N]):
    return A @ x, (2 * A) @ x


def bind(result, A):
    """Callbacks for one process: products by scipy, all-reduces the identity."""
    calls = {}
    for name, (_, kind) in result['products'].items():
        def product(x, y):
            y[...] = A @ x
        calls[name] = product
    for name in result['reductions']:
        def allreduce(partial, out=None):
            if out is None:
                return partial
            out[...] = partial
        calls[name] = allreduce
    return calls


def run_rewritten(prog, A, **arrays):
    sdfg = prog.to_sdfg(simplify=True)
    sdfg.name = f'{sdfg.name}_rewritten'
    result = DistributeSparseProducts().apply_pass(sdfg, {})
    sdfg.validate()
    assert 'A' not in sdfg.arrays  # the matrix left the arguments
    symbols = {str(s): v for s, v in (('N', A.shape[0]), ('K', arrays.get('X', np.zeros((0, 3))).shape[1]))
               if str(s) in {str(f) for f in sdfg.free_symbols}}
    out = sdfg(**arrays, **symbols, **bind(result, A))
    return result, out


def test_cg_like_program_differential():
    rng = np.random.default_rng(0)
    A = sp.csr_array(sp.random_array((40, 40), density=0.1, rng=rng) + sp.eye_array(40))
    x, p = rng.standard_normal(40), rng.standard_normal(40)
    want = cg_like(A, x, p, 2.5)
    result, got = run_rewritten(cg_like, A, x=x, p=p, rs=2.5)
    assert len(result['products']) == 1 and len(result['reductions']) == 4  # two dots, a sum, a max
    assert set(result['reductions'].values()) == {'sum', 'max'}
    assert result['symbol'] == 'N'
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g).reshape(-1), np.asarray(w).reshape(-1), rtol=1e-12)


def test_block_program_differential():
    rng = np.random.default_rng(1)
    A = sp.csr_array(sp.random_array((30, 30), density=0.2, rng=rng))
    X = rng.standard_normal((30, 4))
    want = block_program(A, X)
    result, got = run_rewritten(block_program, A, X=X)
    assert list(result['products'].values()) == [('A', 'spmm')]
    assert len(result['reductions']) == 2  # the column sums and X.T @ Y
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-12)


@pytest.mark.parametrize('prog, match', [(transposed, r'A\.T @'), (rectangular, 'square'),
                                         (elementwise, 'may only be multiplied')])
def test_refused_before_any_change(prog, match):
    sdfg = prog.to_sdfg(simplify=True)
    before = sdfg.to_json()
    with pytest.raises(UnsupportedOperationError, match=match):
        DistributeSparseProducts().apply_pass(sdfg, {})
    assert sdfg.to_json() == before


def test_unknown_matrix_name():
    sdfg = cg_like.to_sdfg(simplify=True)
    p = DistributeSparseProducts()
    p.matrices = ['B']
    with pytest.raises(UnsupportedOperationError, match="'B' is not a sparse argument"):
        p.apply_pass(sdfg, {})


def test_compile_distributed_arguments_checked():
    with pytest.raises(ss.errors.ArgumentError, match='only with distributed=comm'):
        ss.compile(cg_like, partition='rows')
    with pytest.raises(ss.errors.ArgumentError, match='intra-communicator'):
        ss.compile(cg_like, distributed='comm')


@dace.program
def stencil(A: ss.CSR[dace.float64, N, N], x: dace.float64[N]):
    y = A @ x
    z = np.zeros_like(y)
    z[1:] = y[:-1]  # a neighbour's row: on another process at the block's edge
    return z


@dace.program
def size_as_value(A: ss.CSR[dace.float64, N, N], x: dace.float64[N]):
    return np.mean(A @ x)  # sum / N: N would be the local row count


@dace.program
def first_entry(A: ss.CSR[dace.float64, N, N], x: dace.float64[N]):
    y = A @ x
    return y[0] * x


@dace.program
def sum_by_hand(A: ss.CSR[dace.float64, N, N], x: dace.float64[N]):
    y = A @ x
    s = np.zeros(1)
    for i in dace.map[0:N]:
        s[0] += y[i]
    return s


@dace.program
def loop_over_rows(A: ss.CSR[dace.float64, N, N], x: dace.float64[N]):
    y = A @ x
    for i in range(N):
        y = A @ y
    return y


@pytest.mark.parametrize('prog', [stencil, size_as_value, first_entry, sum_by_hand, loop_over_rows],
                         ids=['stencil', 'size_as_value', 'first_entry', 'sum_by_hand', 'loop_over_rows'])
def test_computations_that_differ_on_a_process_rows_are_refused(prog):
    """What would silently compute on a process's rows instead of on the whole vector."""
    sdfg = prog.to_sdfg(simplify=True)
    before = sdfg.to_json()
    with pytest.raises(UnsupportedOperationError, match='distributed size N only as the extent'):
        DistributeSparseProducts().apply_pass(sdfg, {})
    assert sdfg.to_json() == before


@dace.program
def column_products(A: ss.CSR[dace.float64, N, N], X: dace.float64[N, K]):
    Y = np.zeros_like(X)
    Y[:, 0] = A @ X[:, 0]
    return Y


def test_a_product_of_part_of_an_array_is_refused():
    sdfg = column_products.to_sdfg(simplify=True)
    with pytest.raises(UnsupportedOperationError, match='whole arrays'):
        DistributeSparseProducts().apply_pass(sdfg, {})
