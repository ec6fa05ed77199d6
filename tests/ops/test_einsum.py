"""``np.einsum`` with one sparse operand (:class:`sdfgsparse.ops.einsum.SparseEinsum`): tensors of
ranks 1-4 in COO and CSF (int32 and int64 indices, duplicates and unsorted COO entries), the
matrix formats of the catalogue as the rank-2 case, against NumPy's einsum of the dense
tensor; ``pure`` and ``cpu`` expansions; errors at parse time and before any call."""
import dace
import numpy as np
import pytest
import scipy.sparse as sp

import sdfgsparse as ss
from sdfgsparse import errors
from sdfgsparse.ops.einsum import EinsumSpec, parse_spec
from sparse_zoo import dense, zoo

I, J, K, L, R = (dace.symbol(s) for s in 'IJKLR')


def random_coo(rng, shape, density=0.2, duplicates=0, dtype=np.float64):
    """A scipy N-D ``coo_array`` (unsorted entries; ``duplicates`` entries stored twice) and its
    dense tensor (duplicates summed)."""
    size = int(np.prod(shape))
    n = max(int(size * density), 1 if size else 0)
    flat = rng.choice(size, size=n, replace=False) if size else np.zeros(0, dtype=np.int64)
    if duplicates and n:
        flat = np.concatenate([flat, rng.choice(flat, size=duplicates)])
    rng.shuffle(flat)
    coords = np.unravel_index(flat, shape)
    vals = rng.standard_normal(flat.size).astype(dtype)
    dense = np.zeros(shape, dtype=np.float64)
    np.add.at(dense, coords, vals)
    return sp.coo_array((vals, coords), shape=shape), dense


@dace.program
def mttkrp_coo(T: ss.COO[dace.float64, I, J, K], B: dace.float64[J, R], C: dace.float64[K, R]):
    return np.einsum('ijk,jr,kr->ir', T, B, C)


@dace.program
def contractions_coo(T: ss.COO[dace.float64, I, J, K], v: dace.float64[K], M: dace.float64[K, R],
                     B: dace.float64[I, J, R]):
    return (np.einsum('ijk,k->ij', T, v), np.einsum('ijk,kr->ijr', T, M), np.einsum('ijk->i', T),
            np.einsum('ijk', T), np.einsum('ijk,ijr->kr', T, B), np.einsum('ijk->', T), np.einsum('kr,ijk->ri', M, T))


@dace.program
def contractions_csf(T: ss.CSF[dace.float64, I, J, K], v: dace.float64[K], M: dace.float64[K, R],
                     B: dace.float64[I, J, R]):
    return (np.einsum('ijk,k->ij', T, v), np.einsum('ijk,kr->ijr', T, M), np.einsum('ijk->i', T),
            np.einsum('ijk', T), np.einsum('ijk,ijr->kr', T, B), np.einsum('ijk->', T), np.einsum('kr,ijk->ri', M, T))


@dace.program
def batched_spmm(T: ss.CSF[dace.float32, I, J, K, dace.int64], X: dace.float32[I, K, R]):
    return np.einsum('bij,bjk->bik', T, X)


@dace.program
def rank4(T: ss.COO[dace.float64, I, J, K, L, dace.int64], v: dace.float64[L], W: dace.float64[J, R]):
    return np.einsum('ijkl,l,jr->ikr', T, v, W)


@dace.program
def rank1(t: ss.COO[dace.float64, I], x: dace.float64[I], W: dace.float64[I, R]):
    return np.einsum('i,i->', t, x), np.einsum('i,ir->r', t, W)


def _contractions(D, v, M, B):
    return [np.einsum('ijk,k->ij', D, v), np.einsum('ijk,kr->ijr', D, M), D.sum(axis=(1, 2)), D,
            np.einsum('ijk,ijr->kr', D, B), np.array([D.sum()]), np.einsum('kr,ijk->ri', M, D)]


def test_spec_parsing():
    assert parse_spec('ijk,jr,kr->ir', 3, 0) == EinsumSpec(('ijk', 'jr', 'kr'), 'ir', 0)
    assert parse_spec('ij,jk', 2, 1).output == 'ik'  # implicit: indices seen once, sorted
    assert parse_spec(' ijk , k -> ij ', 2, 0).text == 'ijk,k->ij'
    assert parse_spec('ijk,jr,kr->ir', 3, 0).inner == ('r', )
    assert parse_spec('kr,ijk->ri', 2, 1).inner == ('r', )
    for bad, cls, match in (('...ij,j', errors.UnsupportedOperationError, 'ellipses'),
                            ('iij,j->i', errors.UnsupportedOperationError, 'repeats'),
                            ('ij,j->q', errors.ArgumentError, "index 'q' is in no operand"),
                            ('ij->i', errors.ArgumentError, '1 operand subscripts for 2 operands'),
                            ('i1,j->i', errors.ArgumentError, 'is not an index')):
        with pytest.raises(cls, match=match):
            parse_spec(bad, 2, 0)


def test_mttkrp_of_a_coo_tensor_with_duplicates(rng):
    T, D = random_coo(rng, (9, 7, 5), density=0.25, duplicates=6)
    B, C = rng.standard_normal((7, 4)), rng.standard_normal((5, 4))
    want = np.einsum('ijk,jr,kr->ir', D, B, C)
    np.testing.assert_allclose(mttkrp_coo(T=T, B=B, C=C), want, rtol=1e-12, atol=1e-12)
    with ss.targets.use_implementation('pure'):
        np.testing.assert_allclose(mttkrp_coo(T=T, B=B, C=C), want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize('fmt', ['COO', 'CSF'])
def test_contractions_of_rank_3_tensors(fmt, rng):
    prog = contractions_coo if fmt == 'COO' else contractions_csf
    for shape, density in (((6, 5, 4), 0.3), ((1, 1, 1), 1.0), ((8, 3, 9), 0.05), ((5, 4, 3), 0.0)):
        T, D = random_coo(rng, shape, density, duplicates=2 if fmt == 'COO' and density else 0)
        if fmt == 'CSF':
            T = ss.convert(T, ss.CSF)
        v, M = rng.standard_normal(shape[2]), rng.standard_normal((shape[2], 3))
        B = rng.standard_normal(shape[:2] + (3, ))
        got = prog(T=T, v=v, M=M, B=B)
        # TTV's result is a matrix on the tensor's two outer levels: sparse, their pattern
        assert (sp.issparse(got[0]) and got[0].format == 'coo') if fmt == 'COO' else \
            (isinstance(got[0], ss.SparseMatrix) and got[0].format.name == 'CSF2')
        for k, (g, want) in enumerate(zip(got, _contractions(D, v, M, B))):
            assert k == 0 or isinstance(g, np.ndarray), f'result {k} is {type(g).__name__}'
            np.testing.assert_allclose(dense(g).reshape(want.shape), want, rtol=1e-12, atol=1e-12,
                                       err_msg=f'{fmt} {shape}: result {k}')


def test_batched_spmm_float32_int64(rng):
    T, D = random_coo(rng, (3, 6, 5), density=0.3, dtype=np.float32)
    T = ss.convert(T, ss.CSF[dace.float32, I, J, K, dace.int64])
    X = rng.standard_normal((3, 5, 4)).astype(np.float32)
    got = batched_spmm(T=T, X=X)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, np.einsum('bij,bjk->bik', D, X.astype(np.float64)), rtol=1e-5, atol=1e-5)


def test_rank_4_and_rank_1(rng):
    T, D = random_coo(rng, (4, 3, 5, 2), density=0.2, duplicates=3)
    v, W = rng.standard_normal(2), rng.standard_normal((3, 6))
    np.testing.assert_allclose(rank4(T=T, v=v, W=W), np.einsum('ijkl,l,jr->ikr', D, v, W), rtol=1e-12, atol=1e-12)
    t, d = random_coo(rng, (11, ), density=0.4, duplicates=2)
    x, W = rng.standard_normal(11), rng.standard_normal((11, 3))
    dot, row = rank1(t=t, x=x, W=W)
    np.testing.assert_allclose(dot, [d @ x], rtol=1e-12)
    np.testing.assert_allclose(row, d @ W, rtol=1e-12)


@dace.program
def matrix_einsum(A: ss.CSR[dace.float64, I, J], B: dace.float64[J, R], x: dace.float64[J], y: dace.float64[I]):
    return np.einsum('ij,jr->ir', A, B), np.einsum('ij,j', A, x), np.einsum('ij,i->j', A, y), np.einsum('ij->', A)


def test_matrices_are_the_rank_2_case(rng):
    for name, A in zoo(np.float64).items():
        A = sp.csr_array(A)
        B, x, y = rng.standard_normal((A.shape[1], 3)), rng.standard_normal(A.shape[1]), rng.standard_normal(A.shape[0])
        Ad = A.toarray()
        for got, want in zip(matrix_einsum(A=A, B=B, x=x, y=y), (Ad @ B, Ad @ x, y @ Ad, [Ad.sum()])):
            np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12, err_msg=name)


@pytest.mark.parametrize('fmt', ['CSC', 'COO', 'DCSR', 'ELL', 'DIA', 'BSR'])
def test_every_matrix_format(fmt, rng):
    f = getattr(ss, fmt)

    @dace.program
    def prog(A: f[dace.float64, I, J], B: dace.float64[J, R]):
        return np.einsum('ij,jr->ri', A, B)

    A = sp.random_array((8, 6), density=0.3, format='csr', rng=rng)
    B = rng.standard_normal((6, 3))
    got = prog(A=ss.convert(A, ss.BSR.with_block(2, 2) if fmt == 'BSR' else f), B=B)
    np.testing.assert_allclose(got, (A @ B).T, rtol=1e-12, atol=1e-12)


def _parse(fn):
    return fn.to_sdfg()


def test_refused_at_parse_time():

    @dace.program
    def two_sparse(T: ss.COO[dace.float64, I, J, K], U: ss.COO[dace.float64, I, J, K]):
        return np.einsum('ijk,ijk->i', T, U)

    @dace.program
    def wrong_rank(T: ss.COO[dace.float64, I, J, K], v: dace.float64[K]):
        return np.einsum('ij,j->i', T, v)

    @dace.program
    def dense_rank(T: ss.COO[dace.float64, I, J, K], v: dace.float64[K, R]):
        return np.einsum('ijk,k->ij', T, v)

    @dace.program
    def matrix_op(T: ss.COO[dace.float64, I, J, K], v: dace.float64[K]):
        return ss.softmax(T)

    @dace.program
    def with_out(T: ss.COO[dace.float64, I, J, K], v: dace.float64[K], o: dace.float64[I, J]):
        np.einsum('ijk,k->ij', T, v, out=o)

    for prog, cls, match in ((two_sparse, errors.UnsupportedOperationError, 'a contraction of one sparse operand'),
                             (wrong_rank, errors.ShapeError, 'has 3 dimensions, its subscripts'),
                             (dense_rank, errors.ShapeError, 'operand v has 2 dimensions'),
                             (matrix_op, errors.UnsupportedOperationError, 'this operation takes matrices'),
                             (with_out, errors.UnsupportedOperationError, 'numpy.einsum with out')):
        with pytest.raises(cls, match=match):
            _parse(prog)


def test_index_extents_are_checked_before_the_call(rng):
    T, _ = random_coo(rng, (4, 3, 5))
    B, C = rng.standard_normal((3, 2)), rng.standard_normal((6, 2))  # k: 5 in T, 6 in C
    with pytest.raises(errors.ShapeError):
        mttkrp_coo(T=T, B=B, C=C)


@dace.program
def mttkrp_csf(T: ss.CSF[dace.float64, I, J, K], B: dace.float64[J, R], C: dace.float64[K, R]):
    return np.einsum('ijk,jr,kr->ir', T, B, C), np.einsum('ijk,kr,jr->ir', T, C, B)


@dace.program
def mttkrp_csf32(T: ss.CSF[dace.float32, I, J, K, dace.int64], B: dace.float32[J, R], C: dace.float32[K, R]):
    return np.einsum('ijk,jr,kr->ir', T, B, C)


def _leaf_calls(prog):
    sdfg = prog.to_sdfg()
    sdfg.expand_library_nodes()
    return sum('mttkrp_csf3_slice' in n.code.as_string for n, _ in sdfg.all_nodes_recursive()
               if isinstance(n, dace.nodes.Tasklet))


@pytest.mark.parametrize('rank', [1, 3, 128, 130])
def test_mttkrp_of_a_csf_tensor_by_slices(rank, rng):
    """The cpu kernel of a CSF tensor's MTTKRP (``mttkrp_csf3_slice``: a root slice per call,
    B's row once per fiber) over ranks below, at and past its block of 128 columns, with the
    operands in either order; float32 with int64 indices."""
    assert _leaf_calls(mttkrp_csf) == 2 and _leaf_calls(mttkrp_csf32) == 1
    for shape, density in (((9, 7, 5), 0.25), ((1, 1, 1), 1.0), ((6, 5, 4), 0.0), ((30, 2, 40), 0.05)):
        T, D = random_coo(rng, shape, density, duplicates=3 if density else 0)
        B, C = rng.standard_normal((shape[1], rank)), rng.standard_normal((shape[2], rank))
        want = np.einsum('ijk,jr,kr->ir', D, B, C)
        for got in mttkrp_csf(T=ss.convert(T, ss.CSF), B=B, C=C):
            np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12, err_msg=f'{shape} R={rank}')
    T, D = random_coo(rng, (8, 6, 7), 0.3, dtype=np.float32)
    B, C = rng.standard_normal((6, rank)).astype(np.float32), rng.standard_normal((7, rank)).astype(np.float32)
    got = mttkrp_csf32(T=ss.convert(T, ss.CSF[dace.float32, I, J, K, dace.int64]), B=B, C=C)
    np.testing.assert_allclose(got, np.einsum('ijk,jr,kr->ir', D, B.astype(np.float64), C.astype(np.float64)),
                               rtol=1e-4, atol=1e-4)


@dace.program
def tensor_sums(T: ss.COO[dace.float64, I, J, K], U: ss.CSF[dace.float32, I, J, K, dace.int64]):
    return T.sum(), T.sum(axis=1), np.sum(T, axis=(0, 2)), T.sum(axis=(-1, 0, 1)), U.sum(axis=-1), U.sum(axis=(0, 1))


def test_sums_over_any_axes(rng):
    T, D = random_coo(rng, (5, 4, 6), 0.3, duplicates=4)
    U, E = random_coo(rng, (5, 4, 6), 0.3, dtype=np.float32)
    got = tensor_sums(T=T, U=ss.convert(U, ss.CSF[dace.float32, I, J, K, dace.int64]))
    want = [[D.sum()], D.sum(axis=1), D.sum(axis=(0, 2)), [D.sum()], E.sum(axis=-1), E.sum(axis=(0, 1))]
    for k, (g, w) in enumerate(zip(got, want)):
        assert isinstance(g, np.ndarray)
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5, err_msg=f'sum {k}')

    @dace.program
    def bad_axis(T: ss.COO[dace.float64, I, J, K]):
        return T.sum(axis=3)

    @dace.program
    def int_sum(T: ss.COO[dace.int32, I, J, K]):
        return T.sum(axis=0)

    with pytest.raises(errors.UnsupportedOperationError, match='axis 3 is not an axis of a rank-3 tensor'):
        bad_axis.to_sdfg()
    with pytest.raises(errors.UnsupportedOperationError, match='sums of int tensors are not supported'):
        int_sum.to_sdfg()
