"""scipy.sparse / torch.sparse / pydata sparse / ``SparseMatrix`` -> argument structs, with
validation.

A sparse argument becomes an instance of the ctypes struct of its ``Structure`` whose
members point at the caller's arrays (zero-copy when dtypes and layout match). The
struct keeps the arrays alive and answers ``__descriptor__()`` so DaCe accepts it.
Everything is checked before any compilation: format, shape, dtypes, index ranges,
ordering and uniqueness where the format requires them, and index overflow.

Tensors of any rank are sparse values too (:mod:`sdfgsparse.runtime.tensors`): pydata/sparse
arrays, scipy's N-D ``coo_array`` and torch sparse COO tensors are coordinate lists, in format
``COO<n>``; torch's batched CSR tensors (3 dimensions) are ``BatchedCSR`` (their positions made
global, columns and values zero-copy); a ``SparseMatrix`` holds any format of any rank. Their
shape has the format's rank; a matrix keeps its own messages (rows, columns) and fast branches.
"""
import re
from typing import Dict, Optional, Tuple

import dace
import numpy as np
import scipy.sparse as sp

from sdfgsparse import errors
from sdfgsparse.formats import SparseFormat, SparseType, get_format
from sdfgsparse.formats.catalogue import BatchedCSR, coo_of_rank
from sdfgsparse.formats.levels import Compressed, Offset, Singleton
from sdfgsparse.runtime import _binder
from sdfgsparse.ops import functions as host_functions
from sdfgsparse.runtime.container import SparseMatrix
from sdfgsparse.runtime.convert import scipy_members
from sdfgsparse.runtime.tensors import (batched_csr_members, is_pydata, pydata_members, pydata_problem,
                                        scipy_tensor_problem)

__all__ = [
    'SparseArg', 'is_sparse_value', 'format_of_value', 'marshal_sparse', 'struct_class', 'VALIDATE', 'check_value',
    'layout_problem'
]

#: Set to False (``ss.set_validation(False)``) to skip the O(nnz) index checks on each call.
VALIDATE = {'on': True}

_TORCH_LAYOUTS = {'sparse_csr': 'CSR', 'sparse_csc': 'CSC', 'sparse_coo': 'COO', 'sparse_bsr': 'BSR'}


def _torch_layout(obj) -> Optional[str]:
    if type(obj).__module__.startswith('torch') and type(obj).__name__ == 'Tensor':
        return str(obj.layout).replace('torch.', '')
    return None


def torch_on_host(obj, name: str = 'A'):
    """A torch tensor as host data: a NumPy array (a dense tensor) or scipy COO (a sparse
    matrix in any layout), detached and on the CPU; anything else as it is. A sparse tensor
    that is not a matrix (``name`` in the error) is a ShapeError."""
    if not (type(obj).__module__.startswith('torch') and hasattr(obj, 'layout') and hasattr(obj, 'detach')):
        return obj  # (a torch.nn.Parameter too)
    obj = obj.detach().cpu()
    if str(obj.layout) == 'torch.strided':
        return obj.numpy()
    coo = obj.to_sparse_coo().coalesce()
    if coo.dim() != 2 or coo.dense_dim() != 0:
        raise errors.ShapeError(f'{name}: a {coo.dim()}-D torch tensor with {coo.dense_dim()} dense dimensions; '
                                'expected a matrix')
    rows, cols = coo.indices().numpy()
    return sp.coo_array((coo.values().numpy(), (rows, cols)), shape=tuple(coo.shape))


def is_sparse_value(obj) -> bool:
    """Whether ``obj`` is a sparse matrix or tensor the runtime takes: scipy, torch sparse,
    pydata/sparse or a :class:`SparseMatrix`."""
    if sp.issparse(obj) or isinstance(obj, SparseMatrix):
        return True
    lay = _torch_layout(obj)
    return lay in _TORCH_LAYOUTS or (lay is None and is_pydata(obj))


def format_of_value(obj) -> SparseFormat:
    """The catalogue format an object is stored in (``COO<n>`` for a coordinate list of a
    tensor of rank ``n``: pydata/sparse, scipy's N-D ``coo_array``, torch's sparse COO)."""
    if isinstance(obj, SparseMatrix):
        return obj.format
    if sp.issparse(obj):
        if obj.ndim != 2:
            if obj.format != 'coo':
                raise errors.FormatMismatchError(f'a {obj.ndim}-D scipy {obj.format} array: of scipy\'s sparse '
                                                 f'arrays of {obj.ndim} dimension{"s" if obj.ndim > 1 else ""} only '
                                                 'coo_array is taken; pass .tocoo()')
            return coo_of_rank(obj.ndim)
        if obj.format == 'bsr':
            from sdfgsparse.formats.catalogue import BSR
            return BSR.with_block(*obj.blocksize)
        if obj.format in ('csr', 'csc', 'coo', 'dia'):
            return get_format(obj.format.upper())
        raise errors.FormatMismatchError(f'scipy format {obj.format!r} is not supported; convert it with '
                                         f'ss.convert(A, ss.CSR)')
    lay = _torch_layout(obj)
    if lay == 'sparse_bsr':
        from sdfgsparse.formats.catalogue import BSR
        v = obj.values()
        return BSR.with_block(v.shape[1], v.shape[2])
    if lay == 'sparse_coo' and obj.dim() != 2:
        return coo_of_rank(obj.dim())
    if lay == 'sparse_csr' and _batch_dims(obj) == 1:  # torch's batched CSR
        return BatchedCSR
    if lay in _TORCH_LAYOUTS:
        return get_format(_TORCH_LAYOUTS[lay])
    if lay is None and is_pydata(obj):
        return coo_of_rank(obj.ndim)
    raise TypeError(f'{type(obj).__name__} is not a sparse matrix')


def _batch_dims(obj) -> int:
    """The batch dimensions of a torch tensor in a compressed layout (CSR, CSC): its
    dimensions less the two sparse and the dense (hybrid) ones."""
    return obj.dim() - obj.dense_dim() - 2


#: The accessors of the positions and indices of torch's compressed layouts (the warm
#: call's binder calls them too, runtime/_binder.c).
TORCH_COMPRESSED = {'sparse_csr': ('crow_indices', 'col_indices'), 'sparse_csc': ('ccol_indices', 'row_indices')}


def _torch_attr(name: str):
    """``torch.<name>`` (a dtype or layout), importing torch only when asked."""
    import torch
    return getattr(torch, name)


def _torch_members(obj) -> Tuple[Dict[str, np.ndarray], tuple]:
    lay = _torch_layout(obj)
    if obj.device.type != 'cpu':
        raise errors.SparseError(f'the tensor is on {obj.device}; the CPU program needs .cpu()')

    def n(t):
        return t.detach().numpy()

    if lay == 'sparse_csr' and _batch_dims(obj) == 1:  # batched: global positions (a copy), the rest zero-copy
        m = batched_csr_members(n(obj.crow_indices()), n(obj.col_indices()), n(obj.values()))
    elif lay in TORCH_COMPRESSED:
        pos, crd = TORCH_COMPRESSED[lay]
        m = {'pos1': n(getattr(obj, pos)()), 'crd1': n(getattr(obj, crd)()), 'vals': n(obj.values())}
    elif lay == 'sparse_bsr':
        m = {'pos1': n(obj.crow_indices()), 'crd1': n(obj.col_indices()), 'vals': n(obj.values()).reshape(-1)}
    else:  # COO of any rank: a row of the (ndim, nnz) indices per dimension (views, zero-copy)
        idx = n(obj._indices())
        if idx.shape[0] == 2:
            m = {'crd0': idx[0], 'crd1': idx[1], 'vals': n(obj._values())}
        else:
            m = {f'crd{k}': idx[k] for k in range(idx.shape[0])}
            m['vals'] = n(obj._values())
    return m, tuple(obj.shape)


def layout_problem(value) -> Optional[str]:
    """What is wrong with the shapes of a sparse object's own arrays before they are read
    as the format's 1-D members (None: nothing). scipy does not check assignments such as
    ``A.data = A.data.reshape(-1, 1)``, and reading such arrays flat took a CSR ``data``
    of shape (nnz, 1), a DIA ``data`` of one dimension or ``offsets`` of two."""
    if sp.issparse(value):
        f = value.format
        if value.ndim != 2:
            return scipy_tensor_problem(value)
        want = {'csr': {'data': 1, 'indices': 1, 'indptr': 1}, 'csc': {'data': 1, 'indices': 1, 'indptr': 1},
                'bsr': {'data': 3, 'indices': 1, 'indptr': 1}, 'coo': {'data': 1, 'row': 1, 'col': 1},
                'dia': {'data': 2, 'offsets': 1}}.get(f, {})
        for attr, ndim in want.items():
            a = getattr(value, attr, None)
            if not isinstance(a, np.ndarray):
                return f'{attr} is a {type(a).__name__}, not a NumPy array'
            if a.ndim != ndim:
                return f'{attr} has shape {a.shape}; a scipy {f} matrix keeps it in {ndim} dimension' + \
                    ('s' if ndim > 1 else '')
        if f == 'bsr' and value.data.shape[1:] != tuple(value.blocksize):
            return f'data has blocks of shape {value.data.shape[1:]}, the blocksize is {value.blocksize}'
        if f == 'dia' and value.data.shape[0] != value.offsets.shape[0]:
            return f'data has {value.data.shape[0]} diagonals, offsets {value.offsets.shape[0]}'
        return None
    if isinstance(value, SparseMatrix):
        for m, a in value.arrays.items():
            if a.ndim != 1:
                return f'{m} has shape {a.shape}; members are 1-D arrays'
        return None
    lay = _torch_layout(value)
    if lay in ('sparse_csr', 'sparse_csc') and _batch_dims(value) > 0:  # batched CSR: (B, nnz) values
        batch = _batch_dims(value)
        if lay == 'sparse_csc' or batch != 1:
            return (f'a torch {lay[7:].upper()} tensor of {value.dim()} dimensions ({batch} batch dimension'
                    f'{"s" if batch > 1 else ""}); of torch\'s batched layouts CSR with one batch dimension is taken '
                    '(ss.BatchedCSR)')
        if value.values().dim() != 2:
            return (f'values have shape {tuple(value.values().shape)}: hybrid tensors (dense dimensions) are not '
                    'supported')
    elif lay in ('sparse_csr', 'sparse_csc', 'sparse_coo'):
        vals = value.values() if lay != 'sparse_coo' else value._values()
        if vals.dim() != 1:
            return f'values have shape {tuple(vals.shape)}: hybrid tensors (dense dimensions) are not supported'
        if lay == 'sparse_coo':  # a COO tensor of any rank is a coordinate list (COO<n>)
            if value.dim() < 1:
                return 'a 0-D torch tensor; sparse tensors have at least one dimension'
        elif value.dim() != 2:
            return f'the tensor has {value.dim()} dimensions; sparse matrices have 2'
    elif lay == 'sparse_bsr' and value.values().dim() != 3:
        return f'values have shape {tuple(value.values().shape)}: hybrid tensors are not supported'
    elif lay is None and is_pydata(value):
        return pydata_problem(value)
    return None


class SparseArg:
    """A validated sparse argument: its member arrays, sizes and ctypes struct."""

    def __init__(self, argname: str, value, st: SparseType):
        self.argname = argname
        self.value = value
        self.type = st
        self.arrays: Dict[str, np.ndarray] = {}
        self.shape: Tuple[int, ...] = (0, 0)  # (rows, cols); of a tensor, one size per dimension
        self.sizes: Dict[str, int] = {}

    def symbol_values(self) -> Dict[str, int]:
        """Values of the annotation's free symbols determined by this argument."""
        st = self.type
        names = st.__dict__.get('_symbol_slots')
        if names is None:  # (symbol name, dimension key (st.dim_keys: 'rows', 'dim0', ...) / size key), once per type
            names = []
            for key, expr in (*zip(st.dim_keys, st.shape), *st.sizes.items()):
                if dace.symbolic.issymbolic(expr) and expr.is_Symbol:
                    names.append((str(expr), key))
            st._symbol_slots = names
        if len(self.shape) == 2:
            values = {'rows': self.shape[0], 'cols': self.shape[1], **self.sizes}
        else:
            values = {**dict(zip(st.dim_keys, self.shape)), **self.sizes}
        out: Dict[str, int] = {}
        for name, key in names:
            value = out.setdefault(name, values[key])
            if value != values[key]:  # one symbol for two sizes, as ss.CSR[.., N, N]: a square matrix
                first = next(k for n, k in names if n == name)
                raise errors.ShapeError(f'{self.argname}: its {first} ({value}) and {key} ({values[key]}) differ, '
                                        f'but the program declares both as {name} ({st!r})')
        return out

    def make_struct(self, desc: dace.data.Structure):
        cls = struct_class(desc)
        device = getattr(self.value, '_ss_device', None)
        if device is not None:
            return self._device_struct(cls, desc, device)
        fields = {m: a.ctypes.data for m, a in self.arrays.items()}
        for key, v in self._dims():
            if key in desc.members:
                fields[key] = v
        obj = cls(**fields)
        obj._ss_keepalive = self.arrays
        obj._ss_arg = self
        return obj

    def _dims(self):
        """(struct member, size) of each dimension: ``rows`` / ``cols`` of a matrix, ``dim<d>``
        of a tensor (:attr:`SparseType.dim_keys`)."""
        if len(self.shape) == 2:
            return (('rows', self.shape[0]), ('cols', self.shape[1]))
        return tuple(zip(self.type.dim_keys, self.shape))

    def _device_struct(self, cls, desc, device):
        """The struct of a sparse value in device memory (a GPU program's argument): the
        checks ran on its host copy (``self.value``, :func:`sdfgsparse.runtime.device.
        device_sparse_value`), the struct points at its device members; a member the
        checks converted (another index width) is copied to the device converted."""
        fields, keep = {}, [self.value._ss_keep]
        for m, a in self.arrays.items():
            pointer, dtype = device[m]
            if dtype != a.dtype:
                pointer, converted = self.value._ss_upload(a)
                keep.append(converted)
            fields[m] = pointer
        for key, v in self._dims():
            if key in desc.members:
                fields[key] = v
        obj = cls(**fields)
        obj._ss_keepalive = keep
        obj._ss_arg = self
        return obj


_STRUCT_CLASSES = {}
_STRUCT_BY_ID = {}


def struct_class(desc: dace.data.Structure):
    """The ctypes struct class of a sparse structure, answering ``__descriptor__``.
    Equal structures share one class (an unannotated argument makes a new descriptor per
    call); the lookup by identity keeps the common case free of symbolic printing."""
    hit = _STRUCT_BY_ID.get(id(desc))
    if hit is not None and hit[0] is desc:
        return hit[1]
    key = (desc.name, tuple((k, str(getattr(v, 'shape', v))) for k, v in desc.members.items()))
    cls = _STRUCT_CLASSES.get(key)
    if cls is None:
        base = desc.dtype._typeclass.as_ctypes()
        cls = type(f'{desc.name}_arg', (base, ), {'__descriptor__': lambda self, _d=desc: _d})
        _STRUCT_CLASSES[key] = cls
    if len(_STRUCT_BY_ID) < 4096:
        _STRUCT_BY_ID[id(desc)] = (desc, cls)
    return cls


def marshal_sparse(argname: str, value, st: Optional[SparseType]) -> SparseArg:
    """Check ``value`` against the expected type ``st`` and collect its member arrays.

    :param st: the annotation's type, or None to take the value's own format
               (int32 indices unless the value has int64 ones).
    """
    problem = layout_problem(value)
    if problem is not None:
        raise errors.ShapeError(f'{argname}: {problem}')
    try:
        fmt = format_of_value(value)
        if isinstance(value, SparseMatrix):
            arrays, shape = dict(value.arrays), value.shape
        elif sp.issparse(value):
            arrays, shape = dict(scipy_members(value, fmt)), value.shape
        elif is_pydata(value):
            arrays, shape = pydata_members(value)
        else:
            arrays, shape = _torch_members(value)
    except errors.SparseError as ex:
        raise type(ex)(f'{argname}: {ex}') from None
    matrix = len(shape) == 2
    if st is None:  # the value's own index width (torch's default int64 passes zero-copy)
        it = dace.int64 if _index_dtype_of(value, arrays) == np.int64 else dace.int32
        dims = ('rows', 'cols') if matrix else tuple(f'dim{d}' for d in range(len(shape)))
        st = SparseType(fmt, _value_dtype(arrays['vals'].dtype, argname), tuple(f'{argname}_{k}' for k in dims),
                        it, {k: f'{argname}_{k}' for k in fmt.size_keys})
    if len(shape) != st.rank:
        raise errors.ShapeError(f'{argname}: {type(value).__name__} of shape {tuple(shape)} is '
                                f'{_rank_words(len(shape))}; the program expects {_rank_words(st.rank)} ({st!r})')
    if fmt.name != st.fmt.name:
        given = fmt.name
        raise errors.FormatMismatchError(
            f'{argname}: the program expects {st.fmt.name} but got {given} ({type(value).__name__}); '
            f'convert explicitly with ss.convert({argname}, {_spelling(st.fmt.name.rstrip("T"))})')
    arg = SparseArg(argname, value, st)
    if matrix:
        arg.shape = (int(shape[0]), int(shape[1]))
        # Shape against the annotation
        for d, (expr, val) in enumerate(zip((st.rows, st.cols), arg.shape)):
            if not dace.symbolic.issymbolic(expr) and int(expr) != val:
                raise errors.ShapeError(f'{argname}: has {"rows" if d == 0 else "columns"} = {val}, '
                                        f'the program expects {int(expr)}')
        R, C = st.fmt.block
        if arg.shape[0] % R or arg.shape[1] % C:
            raise errors.ShapeError(f'{argname}: shape {arg.shape} is not a multiple of the block shape {R}x{C}')
    else:
        arg.shape = tuple(int(v) for v in shape)
        for d, (expr, val) in enumerate(zip(st.shape, arg.shape)):
            if not dace.symbolic.issymbolic(expr) and int(expr) != val:
                raise errors.ShapeError(f'{argname}: has shape {arg.shape}: dimension {d} is {val}, the program '
                                        f'expects {int(expr)} ({st!r})')

    # Value dtype
    want = np.dtype(st.dtype.type)
    vals = arrays['vals']
    if vals.dtype != want:
        raise errors.DTypeError(f'{argname}: values are {vals.dtype}, the program expects {want}; '
                                f'pass {argname}.astype(np.{want.name})')
    # Index dtype: widen/narrow the index arrays (a copy) when their values fit
    iwant = np.dtype(st.index_dtype.type)
    imax = np.iinfo(iwant).max
    if max(arg.shape) > imax:
        raise errors.IndexOverflowError(f'{argname}: shape {arg.shape} does not fit {iwant.name} indices; '
                                        f'annotate with dace.int64 indices')
    if vals.size > imax:
        raise errors.IndexOverflowError(f'{argname}: {vals.size} stored values do not fit {iwant.name} '
                                        f'positions; annotate with dace.int64 indices')
    for m, a in list(arrays.items()):
        if m == 'vals':
            continue
        if a.dtype != iwant:
            if not np.issubdtype(a.dtype, np.integer):
                raise errors.DTypeError(f'{argname}: index array {m} has dtype {a.dtype}')
            if a.size:
                lo, hi = a.min(), a.max()
                if lo < 0:  # a negative index is an error whatever the width
                    at = int(np.argmin(a))
                    raise errors.InvalidIndexError(f'{argname}: {m}[{at}] = {int(lo)} is negative')
                if hi > imax:
                    at = int(np.argmax(a))
                    raise errors.IndexOverflowError(f'{argname}: {m}[{at}] = {int(hi)} does not fit {iwant.name} '
                                                    f'indices; annotate with dace.int64 indices')
            errors.warn_user(f'{argname}: index arrays are {a.dtype}, the program uses {iwant.name}; '
                             'copying them (annotate the index dtype to pass them zero-copy)')
            arrays[m] = a.astype(iwant)
    for m, a in arrays.items():
        if not a.flags.c_contiguous:
            arrays[m] = np.ascontiguousarray(a)
    arg.arrays = arrays
    arg.sizes = _sizes(st.fmt, arrays, arg.shape)
    if VALIDATE['on'] and not getattr(value, '_ss_checked', False):  # (a private copy, checked once)
        validate_storage(st.fmt, arrays, arg.shape, arg.sizes, argname)
    return arg


def _rank_words(rank: int) -> str:
    """``a matrix (rank 2)``, ``a rank-3 tensor``: a value's rank in an error."""
    return 'a matrix (rank 2)' if rank == 2 else f'a rank-{rank} tensor'


def _spelling(name: str) -> str:
    """How a user writes the format named ``name`` (``ss.CSR``, ``ss.NM[2, 4]``; ``ss.CSF``
    and ``ss.COO`` for the tensor formats ``CSF3``, ``COO4``, whose rank the value gives)."""
    family = re.fullmatch(r'(COO|CSF)\d+', name)
    if family:
        return f'ss.{family.group(1)}'
    try:
        return repr(get_format(name))
    except KeyError:
        return f'ss.{name}'


def check_value(argname: str, value) -> None:
    """Validate a sparse value given to a host function (``ss.relu(A)``, ``ss.convert``,
    ``ss.sddmm``): the checks of a program argument, with the same typed errors."""
    if not is_sparse_value(value):
        raise errors.ArgumentError(f'{argname}: expected a sparse matrix or tensor (scipy, torch, pydata/sparse or '
                                   f'ss.SparseMatrix), got {type(value).__name__}')
    marshal_sparse(argname, value, None)


host_functions.register_host_check(check_value)  # ss.relu(A) & co. on scipy values


def _index_dtype_of(value, arrays) -> np.dtype:
    """The index dtype of a sparse object whose member arrays are ``arrays``: its (outer)
    coordinates', all index arrays' for a ``SparseMatrix`` (int32 where they differ), int32
    for a scipy DIA matrix (offsets are not indices)."""
    if isinstance(value, SparseMatrix):
        dts = {np.dtype(a.dtype) for m, a in arrays.items() if m != 'vals'}
        return dts.pop() if len(dts) == 1 else np.dtype(np.int32)
    if sp.issparse(value) and value.format == 'dia':
        return np.dtype(np.int32)
    crd = next((m for m in ('crd0', 'crd1') if m in arrays), None) or min(m for m in arrays if m.startswith('crd'))
    return np.dtype(arrays[crd].dtype)


def _value_dtype(dt, argname):
    """The value typeclass of an unannotated argument whose values have dtype ``dt``."""
    from sdfgsparse.formats.format import VALUE_DTYPES
    try:
        t = dace.dtype_to_typeclass(np.dtype(dt).type)
    except Exception:
        t = None
    if t not in VALUE_DTYPES:
        raise errors.DTypeError(f'{argname}: value dtype {dt} is not supported; use one of '
                                f'{", ".join(str(np.dtype(v.type)) for v in VALUE_DTYPES)} ({argname}.astype(...))')
    return t


def _sizes(fmt: SparseFormat, arrays, shape) -> Dict[str, int]:
    sizes = {}
    for k, lvl in enumerate(fmt.levels):
        if isinstance(lvl, Compressed):
            sizes[f'n{k}'] = int(arrays[f'crd{k}'].size)
        elif isinstance(lvl, Offset):
            nd = int(arrays[f'off{k}'].size)
            sizes['nd'] = nd
            sizes['L'] = int(arrays['vals'].size // nd) if nd else 0
    if 'K' in fmt.size_keys:
        outer = int(fmt.extents(*shape)[0])  # rows for ELL, columns for a transposed view
        sizes['K'] = int(arrays['vals'].size // outer) if outer else 0
    return sizes


def validate_storage(fmt: SparseFormat, arrays, shape, sizes, argname: str):
    """Run every level's checks on the arrays (errors name the array, position, value);
    ``shape``: (rows, cols) of a matrix, a size per dimension of a tensor."""
    shape = tuple(shape)
    ext = [None if e is None else int(e) for e in fmt.extents(*shape)]
    counts = [int(dace.symbolic.evaluate(c, {})) if dace.symbolic.issymbolic(c) else int(c)
              for c in fmt.counts(shape, sizes)]
    expect_vals = counts[-1]
    if arrays['vals'].size != expect_vals:
        raise errors.IndptrError(f'{argname}: {_size_mismatch(fmt, arrays, expect_vals)}')
    parent = 1
    for k, lvl in enumerate(fmt.levels):
        extent = ext[k] if ext[k] is not None else 0
        if not _level_valid(lvl, k, arrays, parent, extent, sizes):
            lvl.validate(k, arrays, parent, extent, argname, sizes)
        parent = counts[k]
    for name, size in fmt.member_shapes(shape, sizes).items():  # what no level checks (V:N:M's table)
        want = int(dace.symbolic.evaluate(size, {})) if dace.symbolic.issymbolic(size) else int(size)
        if arrays[name].size != want:
            raise errors.IndptrError(f'{argname}: {name} has {arrays[name].size} entries, expected {want}')


def _level_valid(lvl, k: int, arrays, parent: int, extent: int, sizes) -> bool:
    """Whether level ``k`` passes its checks, decided in one pass in C (``_binder.level_ok``)
    for compressed levels and plain singletons; False where it does not or cannot say, and
    the level's own NumPy checks then run and name the problem (they cost about 20 ms per
    call on a 480K-entry CSF tensor)."""
    crd = arrays.get(f'crd{k}')
    if crd is None:
        return False
    if isinstance(lvl, Compressed):
        pos = arrays.get(f'pos{k}') if k > 0 else None
        if crd.shape[0] != sizes.get(f'n{k}') or (k > 0 and (pos is None or pos.shape[0] != parent + 1)):
            return False
        return _binder.level_ok(pos, crd, int(extent), bool(lvl.ordered), bool(lvl.unique)) is True
    if isinstance(lvl, Singleton) and not lvl.padded and lvl.run <= 1:
        if crd.shape[0] != parent:
            return False
        return _binder.level_ok(None, crd, int(extent), False, False) is True
    return False


def _size_mismatch(fmt: SparseFormat, arrays, expect_vals: int) -> str:
    """Which array is the wrong length when ``vals`` disagrees with the entries the
    levels count: the index array of the last compressed level when ``vals`` agrees with
    its positions (``indptr[-1]``), otherwise ``vals``."""
    last = max((k for k, lvl in enumerate(fmt.levels) if isinstance(lvl, Compressed)), default=None)
    n = arrays['vals'].size
    if last is not None and f'pos{last}' in arrays and arrays[f'pos{last}'].size:
        end = int(arrays[f'pos{last}'][-1])
        if end == n and arrays[f'crd{last}'].size != n:
            return (f'crd{last} (indices) has {arrays[f"crd{last}"].size} entries, but vals (data) and '
                    f'pos{last}[-1] (indptr[-1]) say {n}')
    return f'vals (data) has {n} entries, expected {expect_vals}'
