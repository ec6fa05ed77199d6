"""Element-wise operations on sparse tensors of ranks 1-4 (scalars and value functions: the
:class:`~sdfgsparse.ops.map_values.MapValues` node on any rank), their sparse results as
``ss.SparseTensor`` (torch in, torch sparse COO out), and an intermediate tensor read by a
contraction, against NumPy on the dense tensor."""
import dace
import numpy as np
import pytest
import scipy.sparse as sp

import sdfgsparse as ss
from sdfgsparse import errors

I, J, K, L, P = (dace.symbol(s) for s in 'IJKLP')


def _tensor(rng, shape, density=0.3):
    T = sp.random_array(shape, density=density, format='coo', rng=rng)
    T.data -= 0.5  # (values of both signs: relu and abs matter)
    return T, T.toarray()


@dace.program
def rank3(T: ss.COO[dace.float64, I, J, K], U: ss.CSF[dace.float64, I, J, K], v: dace.float64[K]):
    return 2.0 * T, ss.relu(U), -U, T * 0.5, ss.abs(T), np.einsum('ijk,k->ij', 3.0 * U, v)


@dace.program
def rank4_and_1(T: ss.COO[dace.float64, I, J, K, L, dace.int64], t: ss.CSF[dace.float32, P]):
    return ss.exp(T), t * 2.0


def test_element_wise_on_rank_3(rng):
    T, D = _tensor(rng, (6, 5, 4))
    v = rng.standard_normal(4)
    got = rank3(T=T, U=ss.convert(T, ss.CSF), v=v)
    want = [2 * D, np.maximum(D, 0), -D, 0.5 * D, np.abs(D)]
    for k, (g, w) in enumerate(zip(got[:5], want)):
        assert isinstance(g, ss.SparseTensor) and g.shape == D.shape and g.format.rank == 3, k
        assert g.format.name == ('COO3' if k in (0, 3, 4) else 'CSF3')
        np.testing.assert_allclose(g.toarray(), w, rtol=1e-14, atol=0, err_msg=f'result {k}')
    np.testing.assert_allclose(got[5].toarray(), np.einsum('ijk,k->ij', 3.0 * D, v), rtol=1e-12, atol=1e-12)


def test_element_wise_on_ranks_4_and_1(rng):
    T, D = _tensor(rng, (3, 4, 2, 5), 0.2)
    t, d = _tensor(rng, (9, ), 0.5)
    e, s = rank4_and_1(T=T, t=ss.convert(t.astype(np.float32), ss.CSF))
    # exp of the stored entries only (the pattern is kept)
    np.testing.assert_allclose(e.toarray(), np.where(D != 0, np.exp(D), 0), rtol=1e-14)
    assert s.toarray().dtype == np.float32 and s.shape == (9, )
    np.testing.assert_allclose(s.toarray(), 2 * d, rtol=1e-6)


def test_torch_in_torch_out(rng):
    torch = pytest.importorskip('torch')
    T, D = _tensor(rng, (4, 3, 5))
    t = torch.from_numpy(D).to_sparse()
    got = rank3(T=t, U=ss.convert(T, ss.CSF), v=rng.standard_normal(5))
    assert got[0].layout == torch.sparse_coo and tuple(got[0].shape) == D.shape
    np.testing.assert_allclose(got[0].to_dense().numpy(), 2 * D, rtol=1e-14)
    # (TTV's CSF2 matrix: torch's CSR)
    assert isinstance(got[5], torch.Tensor) and got[5].layout == torch.sparse_csr


def test_matrix_operations_refuse_tensors():

    @dace.program
    def softmax(T: ss.COO[dace.float64, I, J, K]):
        return ss.softmax(T)

    with pytest.raises(errors.UnsupportedOperationError, match='takes matrices'):
        softmax.to_sdfg()


def test_pydata_in_pydata_out(rng):
    """A caller who passes pydata/sparse arrays gets tensors back as pydata COO (matrices stay
    scipy arrays, dense results NumPy)."""
    sparse = pytest.importorskip('sparse')
    T, D = _tensor(rng, (4, 3, 5))
    P = sparse.COO(np.array(T.coords), T.data, shape=T.shape)
    v = rng.standard_normal(5)
    got = rank3(T=P, U=ss.convert(P, ss.CSF), v=v)
    assert isinstance(got[0], sparse.COO) and got[0].shape == D.shape
    np.testing.assert_allclose(got[0].todense(), 2 * D, rtol=1e-14)
    assert isinstance(got[1], sparse.COO)  # (a CSF result, as pydata COO)
    np.testing.assert_allclose(got[1].todense(), np.maximum(D, 0), rtol=1e-14)
    assert isinstance(got[5], ss.SparseMatrix) and got[5].shape == (4, 3)  # TTV's CSF2 matrix
