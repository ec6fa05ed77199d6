"""Shape operators of sparse tensors inside programs (views: transpose(axes), moveaxis,
swapaxes, reshapes between ranks, expand_dims / squeeze, slices and integer indices, stack of
matrices), read by contractions and sums, returned (made data), and the tensor operations
written with einsum (batched ``@``, tensordot, ``T * D``) or of two tensors (``T + U``),
against NumPy on the dense tensors."""
import threading

import dace
import numpy as np
import pytest
import scipy.sparse as sp

import sdfgsparse as ss
from sdfgsparse import errors

I, J, K, B, R, M, N = (dace.symbol(s) for s in 'IJKBRMN')


def _tensor(rng, shape, density=0.3, dtype=np.float64):
    T = sp.random_array(shape, density=density, format='coo', rng=rng, dtype=dtype)
    T.data -= 0.5  # (both signs: relu matters)
    return T, T.toarray()


def _dense(x):
    if hasattr(x, 'toarray'):
        return x.toarray()
    return x.todense() if hasattr(x, 'todense') else np.asarray(x)


@dace.program
def read_views(T: ss.COO[dace.float64, I, J, K], v: dace.float64[J], X: dace.float64[K, R]):
    a = np.einsum('jik,j->ik', T.transpose((1, 0, 2)), v)
    b = np.moveaxis(T, 2, 0).sum(axis=(1, 2))
    c = np.swapaxes(T, 0, 2).sum(axis=0)
    d = T.reshape((I * J, K)) @ X
    e = T[1] @ X
    f = np.einsum('ijk->ik', T[1:4, ::-1, ::2])
    g = np.einsum('ijlk,kr->ijr', np.expand_dims(T, 2), X)
    return a, b, c, d, e, f, g


def test_contractions_read_views(rng):
    T, D = _tensor(rng, (5, 6, 7))
    v, X = rng.standard_normal(6), rng.standard_normal((7, 3))
    got = read_views(T, v, X)
    want = [np.einsum('jik,j->ik', D.transpose(1, 0, 2), v), np.moveaxis(D, 2, 0).sum(axis=(1, 2)),
            np.swapaxes(D, 0, 2).sum(axis=0), D.reshape(30, 7) @ X, D[1] @ X,
            np.einsum('ijk->ik', D[1:4, ::-1, ::2]), np.einsum('ijlk,kr->ijr', np.expand_dims(D, 2), X)]
    for k, (g, w) in enumerate(zip(got, want)):
        np.testing.assert_allclose(_dense(g), w, rtol=1e-12, atol=1e-12, err_msg=f'result {k}')


@dace.program
def returned_views(T: ss.COO[dace.float64, I, J, K]):
    return (T.transpose((2, 0, 1)), T[1:4, :, 2:6], np.expand_dims(T, 1), np.squeeze(np.expand_dims(T, 0)),
            T[:, 3], T.reshape((I, J * K)), T[-1, ::-2], T.reshape((I * J * K, 1, 1)), T.T)


@dace.program
def returned_views_csf(T: ss.CSF[dace.float32, I, J, K, dace.int64]):
    return T[::2, 1:, :], np.moveaxis(T, 0, -1), T.reshape((I, J, K, 1))[:, :, 1:3]


def _check_views(got, D):
    want = [D.transpose(2, 0, 1), D[1:4, :, 2:6], np.expand_dims(D, 1), D, D[:, 3], D.reshape(D.shape[0], -1),
            D[-1, ::-2], D.reshape(-1, 1, 1), D.T]
    for k, (g, w) in enumerate(zip(got, want)):
        assert g.shape == w.shape, k
        np.testing.assert_array_equal(_dense(g), w, err_msg=f'result {k}')
    assert not isinstance(got[0], ss.SparseTensor) or got[0].format.name == 'COO3'
    # a view made data keeps the entries it holds, not the stored tensor's count
    assert got[1].nnz == np.count_nonzero(D[1:4, :, 2:6])
    assert sp.issparse(got[4]) and sp.issparse(got[5])  # matrices come back as scipy's


@pytest.mark.parametrize('shape', [(5, 6, 7), (2, 4, 3), (1, 4, 1)])
def test_returned_views_are_data(rng, shape):
    T, D = _tensor(rng, shape)
    _check_views(returned_views(T), D)


def test_returned_views_of_empty_and_int32_tensors(rng):
    empty = sp.coo_array((np.zeros(0), (np.zeros(0, np.int32), ) * 3), shape=(4, 5, 6))
    _check_views(returned_views(empty), np.zeros((4, 5, 6)))


def test_returned_views_of_a_csf_tensor(rng):
    T, D = _tensor(rng, (6, 5, 4), dtype=np.float32)
    a, b, c = returned_views_csf(ss.convert(T, ss.CSF, index_dtype=np.int64))
    for g, w in zip((a, b, c), (D[::2, 1:, :], np.moveaxis(D, 0, -1), D.reshape(6, 5, 4, 1)[:, :, 1:3])):
        assert _dense(g).dtype == np.float32 and g.shape == w.shape
        np.testing.assert_array_equal(_dense(g), w)


def test_pydata_in_pydata_out(rng):
    sparse = pytest.importorskip('sparse')
    T, D = _tensor(rng, (5, 6, 7))
    got = returned_views(sparse.COO(np.stack(T.coords), T.data, T.shape))
    assert isinstance(got[0], sparse.COO)
    _check_views(got, D)


@dace.program
def stacked(A: ss.CSR[dace.float64, M, N], Bm: ss.CSR[dace.float64, M, N], C: ss.CSC[dace.float64, M, N],
            x: dace.float64[N]):
    s0 = np.stack((A, Bm, C))
    s1 = np.stack((A, Bm, C), axis=1)
    return s0, s1, np.stack((A, Bm, C), axis=-1), np.einsum('bmn,n->bm', s0, x)


def test_stack_of_matrices(rng):
    mats = [sp.random_array((4, 5), density=0.4, format=f, rng=rng) for f in ('csr', 'csr', 'csc')]
    x = rng.standard_normal(5)
    dense = np.stack([m.toarray() for m in mats])
    got = stacked(*mats, x)
    for g, w in zip(got[:3], (dense, np.stack([m.toarray() for m in mats], axis=1),
                              np.stack([m.toarray() for m in mats], axis=-1))):
        assert g.shape == w.shape
        np.testing.assert_allclose(_dense(g), w, rtol=1e-14)
    np.testing.assert_allclose(_dense(got[3]), np.einsum('bmn,n->bm', dense, x), rtol=1e-12)


@dace.program
def products(T: ss.COO[dace.float64, B, I, K], X: dace.float64[B, K, R], W: dace.float64[K, R],
             Y: dace.float64[I, K], v: dace.float64[K], Z: dace.float64[R, B, I]):
    return (T @ X, T @ W, T @ v, W.T @ np.swapaxes(T, 1, 2), np.tensordot(T, W, axes=([2], [0])),
            np.tensordot(Z, T, axes=2), T * Y, Y * T)


def test_batched_products_tensordot_and_dense_factors(rng):
    T, D = _tensor(rng, (3, 4, 5))
    X, W, Y = rng.standard_normal((3, 5, 2)), rng.standard_normal((5, 2)), rng.standard_normal((4, 5))
    v, Z = rng.standard_normal(5), rng.standard_normal((2, 3, 4))
    got = products(T, X, W, Y, v, Z)
    want = [D @ X, D @ W, D @ v, W.T @ np.swapaxes(D, 1, 2), np.tensordot(D, W, axes=([2], [0])), np.tensordot(Z, D, axes=2), D * Y,
            Y * D]
    for k, (g, w) in enumerate(zip(got, want)):
        np.testing.assert_allclose(_dense(g), w, rtol=1e-12, atol=1e-12, err_msg=f'result {k}')
    assert isinstance(got[6], ss.SparseTensor)  # T * D keeps T's pattern
    assert got[6].nnz == T.nnz


@dace.program
def sums_and_differences(T: ss.COO[dace.float64, I, J, K], U: ss.CSF[dace.float64, I, J, K], v: dace.float64[K]):
    s = T + U
    return s, T - U[:, :, :], np.moveaxis(U, 0, 0) - 2.0 * T, ss.relu(T.transpose((1, 0, 2))), \
        np.einsum('ijk,k->ij', s, v), (T + U).sum(axis=2)


def test_sums_of_two_tensors_and_functions_of_views(rng):
    T, D = _tensor(rng, (4, 5, 6))
    U, DU = _tensor(rng, (4, 5, 6), 0.4)
    v = rng.standard_normal(6)
    got = sums_and_differences(T, ss.convert(U, ss.CSF), v)
    want = [D + DU, D - DU, DU - 2 * D, np.maximum(D.transpose(1, 0, 2), 0), np.einsum('ijk,k->ij', D + DU, v),
            (D + DU).sum(axis=2)]
    for k, (g, w) in enumerate(zip(got, want)):
        np.testing.assert_allclose(_dense(g), w, rtol=1e-12, atol=1e-12, err_msg=f'result {k}')


@dace.program
def products_of_tensors(T: ss.COO[dace.float64, I, J, K], U: ss.CSF[dace.float64, I, J, K]):
    return T * U, U[:, ::-1] * T[:, ::-1], ss.relu(T * T), (T + U) * T, U * T, U * U


def _with_duplicates(T):
    """``T`` with its first entries stored again (times -2: a sum of opposite signs)."""
    c, v = np.stack(T.coords), T.data
    k = min(5, v.size)
    return sp.coo_array((np.concatenate([v, -2 * v[:k]]), tuple(np.concatenate([c, c[:, :k]], axis=1))),
                        shape=T.shape)


@pytest.mark.parametrize('density', [0.0, 0.1, 0.5])
def test_products_of_two_tensors(rng, density):
    T, _ = _tensor(rng, (4, 5, 6), density)
    T = _with_duplicates(T)
    D = T.toarray()
    U, DU = _tensor(rng, (4, 5, 6), 0.5)
    got = products_of_tensors(T, ss.convert(U, ss.CSF))
    want = [D * DU, DU[:, ::-1] * D[:, ::-1], np.maximum(D * D, 0), (D + DU) * D, DU * D, DU * DU]
    for k, (g, w) in enumerate(zip(got, want)):
        np.testing.assert_allclose(_dense(g), w, rtol=1e-12, atol=1e-12, err_msg=f'result {k}')
    # the intersection: the coordinates where both hold an entry (a cancelled sum of duplicates
    # still counts; T's duplicates may stay apart: a coordinate list sums them)
    *coords, _ = got[0].to_coo_arrays()
    stored = set(zip(*(c.tolist() for c in coords)))
    assert stored == set(map(tuple, np.argwhere(D != 0))) & set(map(tuple, np.argwhere(DU != 0)))


def test_the_portable_expansions_agree(rng):
    T, D = _tensor(rng, (5, 6, 7))
    U, DU = _tensor(rng, (5, 6, 7))
    with ss.targets.use_implementation('pure'):
        a, b, c, d = _pure_program()(T, ss.convert(U, ss.CSF))
    np.testing.assert_allclose(_dense(a), D[1:4, :, 2:6] + DU[1:4, :, 2:6], rtol=1e-12)
    np.testing.assert_allclose(_dense(b), np.moveaxis(DU, 0, 2)[::-1], rtol=1e-12)
    np.testing.assert_allclose(_dense(c), D * DU, rtol=1e-12)
    np.testing.assert_allclose(_dense(d), np.abs(D + DU), rtol=1e-12)


def _pure_program():

    @dace.program
    def pure_views(T: ss.COO[dace.float64, I, J, K], U: ss.CSF[dace.float64, I, J, K]):
        return T[1:4, :, 2:6] + U[1:4, :, 2:6], np.moveaxis(U, 0, 2)[::-1], T * U, ss.abs(T + U)

    return pure_views


def test_threads_share_a_view_program(rng):
    T, D = _tensor(rng, (5, 6, 7))
    want = D.transpose(2, 0, 1)
    returned_views(T)  # (compiled once)
    bad = []

    def run():
        for _ in range(5):
            got = returned_views(T)[0]
            if not np.array_equal(_dense(got), want):
                bad.append(got)

    threads = [threading.Thread(target=run) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not bad


# ---------------------------------------------------------------------- refused at parse time
@pytest.mark.parametrize('body, error, match', [
    ('return T.transpose((0, 1))', errors.ShapeError, r'each of the 3 dimensions'),
    ('return np.moveaxis(T, 3, 0)', errors.ShapeError, r'axis 3 is out of range for 3 dimensions'),
    ('return np.squeeze(T, 1)', errors.ShapeError, r'dimension 1 has size 5, not one'),
    ('return T.reshape((4, 7))', errors.ShapeError, r'number of elements'),
    ('return T[4]', errors.ShapeError, r'index 4 is out of bounds for dimension 0 of size 4'),
    ('return T[0, 0, 0, 0]', errors.ShapeError, r'too many indices for a 3-D sparse tensor'),
    ('return T * T[0]', errors.ShapeError, r'operands of 3 and 2 dimensions'),
    ('return T + T[0]', errors.ShapeError, r'operands of 3 and 2 dimensions'),
    ('return np.stack((T, T))', errors.UnsupportedOperationError, r'stacks sparse matrices \(2-D\) only'),
])
def test_refused(tmp_path, body, error, match):
    src = tmp_path / 'prog.py'
    src.write_text('import dace\nimport numpy as np\nimport sdfgsparse as ss\n\n'
                   '@dace.program\ndef prog(T: ss.COO[dace.float64, 4, 5, 6]):\n    ' + body + '\n')
    import importlib.util
    spec = importlib.util.spec_from_file_location(f'prog_{abs(hash(body))}', src)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    with pytest.raises(error, match=match):
        mod.prog.to_sdfg()


@dace.program
def dense_factor_any_format(T: ss.CSF[dace.float64, I, J, K, (2, 0, 1)], Bt: ss.BatchedCSR[dace.float64, B, M, N],
                            Y: dace.float64[J, K], Z: dace.float64[M, N]):
    return T * Y, Bt * Z


def test_a_dense_factor_keeps_any_formats_pattern(rng):
    T, D = _tensor(rng, (4, 5, 6))
    Bt, DB = _tensor(rng, (3, 4, 5))
    Y, Z = rng.standard_normal((5, 6)), rng.standard_normal((4, 5))
    a, b = dense_factor_any_format(ss.convert(T, ss.CSF.with_order(2, 0, 1)), ss.convert(Bt, ss.BatchedCSR), Y, Z)
    assert a.format.name == 'CSF3_201' and b.format.name == 'BatchedCSR'
    np.testing.assert_allclose(a.toarray(), D * Y, rtol=1e-14)
    np.testing.assert_allclose(b.toarray(), DB * Z, rtol=1e-14)


@dace.program
def matrices_with_other_ranks(A: ss.CSR[dace.float64, M, N], x: dace.float64[N]):
    return A.reshape((M * N, )), np.reshape(A, (2, M // 2, N)), np.expand_dims(A, 0), A.reshape((2, M // 2, N)) @ x


def test_matrices_seen_with_other_ranks(rng):
    A = sp.random_array((6, 5), density=0.4, format='csr', rng=rng)
    x = rng.standard_normal(5)
    D = A.toarray()
    got = matrices_with_other_ranks(A, x)
    for k, (g, w) in enumerate(zip(got, (D.reshape(30), D.reshape(2, 3, 5), D[None], D.reshape(2, 3, 5) @ x))):
        assert g.shape == w.shape, k
        np.testing.assert_allclose(_dense(g), w, rtol=1e-12, err_msg=f'result {k}')


@dace.program
def dense_sums(T: ss.COO[dace.float64, I, J, K], D: dace.float64[I, J, K], E: dace.float64[J, K],
               F: dace.float64[J, K, I]):
    return T + D, D - T, T - E, np.moveaxis(T, 0, 2) + F


def test_sums_with_dense_arrays_are_dense(rng):
    T, A = _tensor(rng, (3, 4, 5))
    D, E, F = rng.standard_normal((3, 4, 5)), rng.standard_normal((4, 5)), rng.standard_normal((4, 5, 3))
    got = dense_sums(T, D, E, F)
    for k, (g, w) in enumerate(zip(got, (A + D, D - A, A - E, np.moveaxis(A, 0, 2) + F))):
        assert isinstance(g, np.ndarray) and g.shape == w.shape, k
        np.testing.assert_allclose(g, w, rtol=1e-14, err_msg=f'result {k}')
