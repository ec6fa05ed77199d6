"""Sparse matrices in device memory (runtime/device.py), on any machine: the device arrays
are stood in for by host arrays (a fake ``DeviceArray``), so what runs here is everything
but the copies (the GPU tests run the real thing, tests/targets/test_gpu_ops.py)."""
import dace
import numpy as np
import pytest
import scipy.sparse as sp

import sdfgsparse as ss
from sdfgsparse import errors
from sdfgsparse.formats import sparse_type_of
from sdfgsparse.runtime import device as rdevice
from sdfgsparse.runtime.marshal import marshal_sparse
from sdfgsparse.runtime.pointers import data_pointer
from sdfgsparse.runtime.results import return_allocator, struct_to_python

M, N = dace.symbol('M'), dace.symbol('N')


class FakeDeviceArray:
    """A host array with DeviceArray's interface."""

    def __init__(self, shape, dtype=np.float64):
        self._a = np.full(shape, 7, dtype)  # (not zeroed: a read of an unwritten slot shows)
        self.shape, self.dtype = self._a.shape, self._a.dtype
        self.size = self._a.size

    @classmethod
    def from_host(cls, a):
        out = cls(np.shape(a), np.asarray(a).dtype)
        out._a[...] = a
        return out

    @classmethod
    def zeros(cls, shape, dtype=np.float64):
        out = cls(shape, dtype)
        out._a[...] = 0
        return out

    pointer = property(lambda self: data_pointer(self._a))

    def get(self):
        return self._a.copy()


@pytest.fixture
def fake(monkeypatch):
    monkeypatch.setattr(rdevice, 'DeviceArray', FakeDeviceArray)
    monkeypatch.setattr(rdevice, 'dense_to_device', FakeDeviceArray.from_host)


def test_to_device_checks_copies_and_gets_back(fake):
    A = sp.random(9, 7, density=0.4, format='csr', random_state=1)
    d = ss.to_device(A)
    assert isinstance(d, rdevice.DeviceSparseMatrix) and d.shape == (9, 7) and d.dtype == np.float64
    before = A.copy()
    assert (d.get() != before).nnz == 0
    A.data[:] = 0  # the device copy is the caller's matrix as it was
    assert (d.get() != before).nnz == 0 and d.get().count_nonzero() == before.count_nonzero() > 0
    wide = ss.to_device(sp.random(9, 7, density=0.4, format='csr', random_state=1), index_dtype=np.int64)
    assert wide.index_dtype == np.int64
    bad = sp.csr_matrix((np.ones(2), np.array([0, 9]), np.array([0, 1, 2])), shape=(2, 5))
    with pytest.raises(errors.InvalidIndexError, match='to_device'):
        ss.to_device(bad)
    with pytest.raises(errors.DTypeError, match='index_dtype must be int32 or int64'):
        ss.to_device(A, index_dtype=np.int16)


def test_the_struct_points_at_the_device_members(fake):
    A = sp.random(9, 7, density=0.4, format='csr', random_state=2)
    d = ss.to_device(A)
    host = rdevice.device_sparse_value('A', d)
    desc = ss.CSR[dace.float64, M, N]
    s = marshal_sparse('A', host, sparse_type_of(desc)).make_struct(desc)
    assert (s.pos1, s.crd1, s.vals) == tuple(d.arrays[m].pointer for m in ('pos1', 'crd1', 'vals'))
    assert rdevice.device_sparse_value('x', np.ones(3)) is None


def test_a_sparse_result_in_device_memory_is_trimmed_to_its_entries(fake):
    """A capacity-sized CSR result: ``get()`` keeps the pos1[-1] entries the kernel wrote."""
    desc = ss.CSR[dace.float64, M, N]
    for m in desc.members.values():
        if isinstance(m, dace.data.Array):
            m.storage = dace.StorageType.GPU_Global
    st = sparse_type_of(desc)
    obj = return_allocator(desc)({'M': 3, 'N': 4, str(st.sizes['n1']): 5})
    arrays = obj._ss_keepalive
    arrays['pos1']._a[:] = [0, 1, 1, 3]
    arrays['crd1']._a[:3] = [2, 0, 3]
    arrays['vals']._a[:3] = [1.0, 2.0, 3.0]
    d = struct_to_python(obj)
    assert isinstance(d, rdevice.DeviceSparseMatrix)
    np.testing.assert_array_equal(d.get().toarray(), [[0, 0, 1, 0], [0, 0, 0, 0], [2, 0, 0, 3]])
