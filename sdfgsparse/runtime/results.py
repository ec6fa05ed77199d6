"""Sparse return values: allocation before the call, conversion to scipy / torch after.

A program that returns a sparse value has a non-transient ``__return`` structure. Before
the call its member arrays are allocated from the symbols of the call (for results whose
number of entries depends on the data, the structure's size symbol is a *capacity* and
the real count is read back from the position array); after the call the struct becomes
a scipy sparse array of the op's natural format (or a :class:`SparseMatrix`).
"""
from typing import Callable, Dict

import dace
import numpy as np

from sdfgsparse.formats import sparse_type_of
from sdfgsparse.formats.catalogue import BatchedCSR, coo_of_rank
from sdfgsparse.formats.counted import is_counted_coo
from sdfgsparse.runtime.container import SparseMatrix
from sdfgsparse.runtime.convert import has_scipy_twin, to_scipy_twin
from sdfgsparse.runtime.marshal import struct_class
from sdfgsparse.runtime.pointers import data_pointer
from sdfgsparse.runtime.symexpr import compile_int
from sdfgsparse.runtime.tensors import batched_csr_parts

__all__ = ['allocate_return', 'allocate_on_device', 'return_allocator', 'struct_to_python', 'scipy_to_torch', 'is_sparse_return',
           'to_torch', 'to_pydata']


def is_sparse_return(obj) -> bool:
    return hasattr(obj, '_ss_result_type')


def allocate_return(desc: dace.data.Structure, syms: Dict[str, int]):
    """Allocate the member arrays of a sparse return structure; returns its struct."""
    return return_allocator(desc)(syms)


_ALLOCATORS: Dict[int, tuple] = {}

#: bytes from which :func:`zeroed` fills an uninitialised array instead of calling ``np.zeros``
ZEROED_FILL_BYTES = 1 << 22


def zeroed(n: int, dtype) -> np.ndarray:
    """``np.zeros(n, dtype)``; a large one as ``np.empty`` filled with zeros: NumPy asks for
    transparent huge pages on its ``empty`` buffers but not on ``calloc``'s, whose 4 KiB page
    faults then cost more than the fill (134 MB: 42-50 ms against 9 ms; an n:m SDDMM
    result's two members took 30 % of the call)."""
    dtype = np.dtype(dtype)
    if n * dtype.itemsize < ZEROED_FILL_BYTES:
        return np.zeros(n, dtype=dtype)
    a = np.empty(n, dtype=dtype)
    a.fill(0)
    return a


def return_allocator(desc: dace.data.Structure) -> Callable[[Dict[str, int]], object]:
    """``allocate(symbols) -> struct`` for a sparse return structure; the member sizes
    are compiled once per descriptor (evaluating them with SymPy cost milliseconds)."""
    hit = _ALLOCATORS.get(id(desc))
    if hit is not None and hit[0] is desc:
        return hit[1]
    st = sparse_type_of(desc)
    members = [(name, compile_int(size), np.dtype((st.dtype if name == 'vals' else st.index_dtype).as_numpy_dtype()))
               for name, size in st.member_shapes().items()]
    extents = [compile_int(e) for e in st.shape]  # (rows, cols of a matrix)
    cls = struct_class(desc)
    fields = [f[0] for f in cls._fields_]
    dims = {k for k in st.dim_keys if k in desc.members}

    # CSR / CSC results are trimmed to pos[-1] entries (struct_to_python), and every kernel
    # writes all of those: their capacity-sized crd1 / vals need no zeroing (zeroing a large
    # SpGEMM capacity cost milliseconds per call; docs/performance.md). Other formats keep
    # zeroed members (padding slots of ELL / DIA / BSR must read as zeros).
    uninit = {'crd1', 'vals'} if st.fmt.name in ('CSR', 'CSC') else set()
    members = [(name, fn, dt, np.empty if name in uninit else zeroed) for name, fn, dt in members]
    on_device = any(getattr(m, 'storage', None) == dace.StorageType.GPU_Global for m in desc.members.values())

    def allocate_on_device(syms: Dict[str, int]):  # a GPU program's result (zeroed device arrays)
        from sdfgsparse.runtime.device import device_return
        shape = tuple(int(e(syms)) for e in extents)
        obj = device_return([(name, fn(syms), dt) for name, fn, dt, _ in members], fields,
                            {k: v for k, v in zip(st.dim_keys, shape) if k in dims}, cls, shape)
        obj._ss_result_type = st
        obj._ss_on_device = True
        return obj

    def allocate(syms: Dict[str, int]):
        arrays = {name: make(max(fn(syms), 0), dtype=dt) for name, fn, dt, make in members}
        shape = tuple(int(e(syms)) for e in extents)
        values = dict(zip(st.dim_keys, shape))
        obj = cls(*[data_pointer(arrays[f]) if f in arrays else values[f] if f in dims else 0 for f in fields])
        obj._ss_keepalive = arrays
        obj._ss_result_type = st
        obj._ss_shape = shape
        return obj

    chosen = allocate_on_device if on_device else allocate
    if len(_ALLOCATORS) < 4096:
        _ALLOCATORS[id(desc)] = (desc, chosen)
    return chosen


def allocate_on_device(desc: dace.data.Array, syms: Dict[str, int]):
    """A dense result of a GPU program in device memory (a
    :class:`~sdfgsparse.targets.cuda.device.DeviceArray`; DaCe's own allocation needs
    CuPy), or None where DaCe allocates it (not in device memory, or not C-ordered)."""
    if desc.storage != dace.StorageType.GPU_Global or isinstance(desc, dace.data.Scalar):
        return None
    shape = tuple(int(dace.symbolic.evaluate(s, syms)) for s in desc.shape)
    strides = tuple(int(dace.symbolic.evaluate(s, syms)) for s in desc.strides)
    if strides != tuple(int(np.prod(shape[k + 1:], dtype=np.int64)) for k in range(len(shape))):
        return None
    from sdfgsparse.targets.cuda.device import DeviceArray
    return DeviceArray(shape, desc.dtype.as_numpy_dtype())


def struct_to_python(obj):
    """The scipy sparse array (or ``SparseMatrix``; ``ss.SparseTensor`` of a rank other than
    2) a returned struct stands for."""
    st = obj._ss_result_type
    a = dict(obj._ss_keepalive)
    fmt = st.fmt
    if getattr(obj, '_ss_on_device', False):  # a GPU program's: stays in device memory
        from sdfgsparse.runtime.device import DeviceSparseMatrix
        count = None
        if 'pos1' in a and fmt.name in ('CSR', 'CSC') or fmt.name.startswith('BSR'):
            count = int(a['pos1'].get()[-1]) if a['pos1'].size else 0
        return DeviceSparseMatrix(fmt, a, obj._ss_shape, count=count)
    # Trim capacity-sized arrays to the real count recorded in the position array.
    if 'pos1' in a and fmt.name in ('CSR', 'CSC') or fmt.name.startswith('BSR'):
        n = int(a['pos1'][-1]) if a['pos1'].size else 0
        R, C = fmt.block
        a['crd1'] = _shrunk(a['crd1'], n)
        a['vals'] = _shrunk(a['vals'], n * R * C)
    if is_counted_coo(fmt):  # a counted coordinate list: its used entries, as COO<n>
        n = int(a['pos1'][1]) if a['pos1'].size > 1 else 0
        a = {f'crd{k}': _shrunk(a[f'crd{k + 1}'], n) for k in range(fmt.rank)} | {'vals': _shrunk(a['vals'], n)}
        fmt = coo_of_rank(fmt.rank)
    m = SparseMatrix(fmt, a, obj._ss_shape)
    return to_scipy_twin(m) if fmt.rank == 2 and has_scipy_twin(fmt) else m


def _shrunk(array: np.ndarray, n: int) -> np.ndarray:
    """The first ``n`` elements of a result's capacity-sized member, as an array of its own:
    shrunk in place (``realloc``, which keeps the data where it is), not sliced. scipy copies
    a view of less than half its base (``_prune_array`` in its constructor): an SpGEMM whose
    capacity bound (its products) was over twice its entries paid two copies of the result
    (web-indochina-2004 A @ A: 3.5 ms of 16). The member was allocated for this call only
    (:func:`return_allocator`) and nothing else refers to it (the struct that pointed at it
    is dropped)."""
    if n < array.shape[0] and array.flags.owndata:  # (always, as allocated; a slice otherwise)
        array.resize((n, ), refcheck=False)
        return array
    return array[:n]


def scipy_to_torch(A):
    """A scipy sparse array as the torch sparse tensor of the same layout (CSR/CSC/COO/BSR)."""
    import torch
    if A.format == 'csr':
        return torch.sparse_csr_tensor(torch.from_numpy(A.indptr), torch.from_numpy(A.indices),
                                       torch.from_numpy(A.data), size=A.shape, check_invariants=False)
    if A.format == 'csc':
        return torch.sparse_csc_tensor(torch.from_numpy(A.indptr), torch.from_numpy(A.indices),
                                       torch.from_numpy(A.data), size=A.shape, check_invariants=False)
    if A.format == 'bsr':
        return torch.sparse_bsr_tensor(torch.from_numpy(A.indptr), torch.from_numpy(A.indices),
                                       torch.from_numpy(A.data), size=A.shape, check_invariants=False)
    A = A.tocoo()
    idx = torch.from_numpy(np.vstack([A.row, A.col]).astype(np.int64))
    return torch.sparse_coo_tensor(idx, torch.from_numpy(A.data), size=A.shape, check_invariants=False)


def to_torch(result):
    """A program's result for a caller who passed torch tensors: NumPy arrays as tensors
    sharing their memory, scipy sparse arrays as torch sparse tensors, a ``BatchedCSR``
    tensor as torch's batched CSR where every batch stores as many entries (else, as other
    tensors, torch sparse COO), tuples element by element; anything else as it is."""
    import torch  # optional: only callers with torch arguments get here
    if isinstance(result, np.ndarray):
        return torch.from_numpy(result)
    if isinstance(result, tuple):
        return tuple(to_torch(r) for r in result)
    if hasattr(result, 'tocoo') and hasattr(result, 'format'):
        return scipy_to_torch(result)
    if isinstance(result, SparseMatrix) and result.format is BatchedCSR:
        parts = batched_csr_parts(result.arrays, result.shape)
        if parts is not None:  # (columns and values shared)
            crow, col, vals = (torch.from_numpy(np.ascontiguousarray(a)) for a in parts)
            return torch.sparse_csr_tensor(crow, col.to(crow.dtype), vals, size=result.shape, check_invariants=False)
    if isinstance(result, SparseMatrix) and len(result.shape) == 2:  # a format without a scipy twin
        return scipy_to_torch(result.to_scipy())
    if isinstance(result, SparseMatrix):  # a tensor: torch's sparse COO
        *coords, vals = result.to_coo_arrays()
        idx = torch.from_numpy(np.vstack(coords).astype(np.int64)) if coords else torch.zeros((0, 0), dtype=torch.int64)
        return torch.sparse_coo_tensor(idx, torch.from_numpy(np.ascontiguousarray(vals)), size=result.shape,
                                       check_invariants=False)
    if type(result).__name__ == 'DeviceSparseMatrix':  # a GPU program's
        return result.to_torch()
    if type(result).__name__ == 'DeviceArray':
        return torch.as_tensor(result, device='cuda')
    return result


def to_pydata(result):
    """A program's result for a caller who passed pydata/sparse arrays (and no torch tensor):
    sparse tensors of a rank other than 2 (``ss.SparseTensor``) as pydata ``COO`` arrays
    (coordinates in storage order, a COO result's duplicates kept, as pydata keeps them until
    asked), tuples element by element; anything else as it is (matrices stay scipy arrays, as
    on every call path)."""
    if isinstance(result, tuple):
        return tuple(to_pydata(r) for r in result)
    if isinstance(result, SparseMatrix) and len(result.shape) != 2:
        import sparse  # pydata/sparse: its arrays were an argument, so it is installed
        *coords, vals = result.to_coo_arrays()
        return sparse.COO(np.vstack(coords).astype(np.int64), vals, shape=result.shape,
                          has_duplicates=result.format.name.startswith('COO'), sorted=False)
    return result
