"""The parts of a call plan (:mod:`sdfgsparse.runtime.plan`): one slot per argument —
where its arrays come from, what they must be, the symbols it defines — and one per
return value. The plan describes them to its compiled binder (``runtime/_binder.c``);
the binder calls back into :meth:`SparseSlot.binder_step`, :meth:`SparseReturn.allocate`
and :meth:`SparseReturn.result` for the parts it does not do itself."""
import ctypes
from typing import Any, Dict, List, Optional

import dace
import numpy as np
import scipy.sparse as sp

from sdfgsparse.formats.levels import Compressed
from sdfgsparse.targets.cpu import storage_check
from sdfgsparse.runtime import marshal
from sdfgsparse.runtime.container import SparseMatrix
from sdfgsparse.runtime.convert import scipy_members
from sdfgsparse.runtime.fastcheck import StorageCheck
from sdfgsparse.runtime.pointers import data_pointer
from sdfgsparse.runtime.results import return_allocator, struct_to_python

__all__ = ['MISS', 'NoPlan', 'SparseSlot', 'DenseSlot', 'ScalarSlot', 'DenseReturn', 'SparseReturn', 'Holder']

#: Returned by :meth:`CallPlan.run` when the call must take the full path.
MISS = object()


class NoPlan(Exception):
    """The signature needs something a plan does not do; keep the full path."""


# ---------------------------------------------------------------------- arguments
class SparseSlot:
    """One sparse argument: where its arrays come from, what they must be, the symbols
    it defines, and the struct it becomes."""

    def __init__(self, index: int, name: str, arg: 'marshal.SparseArg', struct_cls, sample, lib=None):
        st = arg.type
        if st.rank != 2:  # (a tensor of another rank: every call takes the full path)
            raise NoPlan(f'{name} is a rank-{st.rank} tensor')
        fmt = st.fmt
        self.index, self.name, self.type = index, name, st
        self.fmt = fmt
        self.members = list(fmt.member_names)
        self.index_members = [m for m in self.members if m != 'vals']
        self.vals_dtype = np.dtype(st.dtype.type)
        self.index_dtype = np.dtype(st.index_dtype.type)
        self.imax = int(np.iinfo(self.index_dtype).max)
        self.const_dims = [(d, int(e)) for d, e in enumerate((st.rows, st.cols)) if not dace.symbolic.issymbolic(e)]
        self.block = fmt.block
        arg.symbol_values()  # fills the type's symbol slots
        self.symbols = list(st.__dict__['_symbol_slots'])
        self.check = StorageCheck(fmt, None if lib is None else storage_check.symbols(lib, self.index_dtype))
        self.index_size = self.index_dtype.itemsize
        # bytes of indices from which the kernels check the entries themselves (set by
        # the plan; None: they never do)
        self.in_kernel_from = None
        # Entries of each compressed level; other sizes (ELL's K, DIA's nd and L) as
        # marshal._sizes computes them.
        self.size_specs = [(f'n{k}', f'crd{k}') for k, lvl in enumerate(fmt.levels) if isinstance(lvl, Compressed)]
        if len(self.size_specs) != len(fmt.size_keys):
            self.size_specs = None
        fields = [f[0] for f in struct_cls._fields_]
        unknown = set(fields) - set(self.members) - {'rows', 'cols'}
        if unknown:
            raise NoPlan(f'struct fields {sorted(unknown)}')
        self.fields = [(f, f in self.members) for f in fields]
        self.struct_cls = struct_cls
        # Where the arrays come from: the kind of object passed on the first call.
        if isinstance(sample, SparseMatrix):
            self.source = 'matrix'
        elif sp.issparse(sample):
            self.source = 'scipy'
            self.scipy_format = sample.format
        elif marshal._torch_layout(sample) is not None:
            self.source = 'torch'
            self.torch_layout = marshal._torch_layout(sample)
        else:
            raise NoPlan(f'{type(sample).__name__} argument')

    def _arrays(self, v):
        src = self.source
        if src == 'scipy':
            if v.format != self.scipy_format or (self.scipy_format == 'bsr' and v.blocksize != self.block):
                return None
            if self.scipy_format in ('bsr', 'dia') and marshal.layout_problem(v) is not None:
                return None  # (members read flat: the full path names the problem)
            return scipy_members(v, self.fmt), v.shape
        if src == 'matrix':
            if v.format is not self.fmt:
                return None
            return v.arrays, v.shape
        if marshal._torch_layout(v) != self.torch_layout or v.device.type != 'cpu':
            return None
        if self.torch_layout == 'sparse_bsr' and tuple(v.values().shape[1:]) != self.block:
            return None
        return marshal._torch_members(v)

    def bind(self, v, syms: Dict[str, int], origin: Dict[str, Any], keep: List[Any], in_kernel: List[str]):
        """The struct for ``v`` (or None: take the full path); defines its symbols. Appends
        its name to ``in_kernel`` when the kernels check its entries in this call."""
        got = self._arrays(v)
        if got is None:
            return None
        arrays, shape = got
        if len(shape) != 2:  # a tensor of another rank (scipy's N-D coo, torch's COO): the full path
            return None
        rows, cols = int(shape[0]), int(shape[1])
        for d, want in self.const_dims:
            if (rows, cols)[d] != want:
                return None
        R, C = self.block
        if rows % R or cols % C or rows > self.imax or cols > self.imax:
            return None
        vals = arrays['vals']
        if vals.dtype != self.vals_dtype or vals.size > self.imax or vals.ndim != 1 or not vals.flags.c_contiguous:
            return None
        idt = self.index_dtype
        for m in self.index_members:
            a = arrays[m]
            if a.dtype != idt or a.ndim != 1 or not a.flags.c_contiguous:
                return None
        if self.size_specs is None:
            sizes = marshal._sizes(self.fmt, arrays, (rows, cols))
        else:
            sizes = {key: arrays[member].shape[0] for key, member in self.size_specs}
        if marshal.VALIDATE['on'] and not getattr(v, '_ss_checked', False):  # (a private copy, checked once)
            contents = self.in_kernel_from is None or sizes['n1'] * self.index_size < self.in_kernel_from
            if not self.check(arrays, rows, cols, sizes, contents=contents):
                return None
            if not contents:
                in_kernel.append(self.name)
        values = {'rows': rows, 'cols': cols, **sizes}
        for sym, key in self.symbols:
            val = values[key]
            old = syms.get(sym)
            if old is None:
                syms[sym] = val
            elif old != val:
                return None
        obj = self.struct_cls(*[data_pointer(arrays[f]) if is_array else values[f] for f, is_array in self.fields])
        keep.append(arrays)
        keep.append(obj)
        if origin is not None:  # capacity symbols read the arguments
            arg = marshal.SparseArg(self.name, v, self.type)
            arg.arrays, arg.shape, arg.sizes = arrays, (rows, cols), sizes
            origin[self.name] = arg
        return obj

    def binder_step(self, fields: bool):
        """The binder's step for this argument: ``step(v, syms, origin, keep, in_kernel)`` ->
        None (take the full path) or ``(words, spans)``: the record's words for it (the
        struct's ``fields`` and ``parent, n, extent`` of a check the entry does not make,
        else the struct's address) and the byte ranges of its arrays."""
        names = [f for f, _ in self.fields]

        def step(v, syms, origin, keep, in_kernel):
            obj = self.bind(v, syms, origin, keep, in_kernel)
            if obj is None:
                return None
            spans = tuple((p, p + a.nbytes) for a in keep[-2].values() for p in (data_pointer(a), ))
            if fields:
                return tuple(getattr(obj, f) or 0 for f in names) + (0, 0, 0), spans
            return (ctypes.addressof(obj), ), spans

        return step


class DenseSlot:
    """One NumPy array (or torch tensor, as on the first call) argument: dtype, rank, and
    for each dimension the symbol it defines or the value it must have. A torch tensor is
    taken where the full path passes it as it is: a contiguous CPU tensor of the dtype
    (:func:`sdfgsparse.runtime.call.check_dense`)."""

    def __init__(self, index: int, name: str, desc: dace.data.Array, annotation: Optional[dace.data.Data],
                 defined: set, sample=None):
        self.index, self.name = index, name
        self.dtype = np.dtype(desc.dtype.as_numpy_dtype())
        self.ndim = len(desc.shape)
        self.torch = None  # (tensor class, torch dtype, torch.strided) for torch arguments
        if marshal._torch_layout(sample) == 'strided':
            self.torch = (type(sample), marshal._torch_attr(self.dtype.name), marshal._torch_attr('strided'))
        elif not isinstance(sample, np.ndarray):
            raise NoPlan(f'argument {name} of type {type(sample).__name__}')
        self.dims = []  # (dimension, symbol to define, None) or (dimension, None, the size it must have)
        if not isinstance(annotation, dace.data.Array) or isinstance(annotation, dace.data.View):
            annotation = desc  # unannotated: DaCe compiled the shape of the first call's array
        if len(annotation.shape) != self.ndim:
            raise NoPlan(f'annotation of {name}')
        for d, expr in enumerate(annotation.shape):
            if dace.symbolic.issymbolic(expr) and expr.is_Symbol and str(expr) not in defined:
                defined.add(str(expr))
                self.dims.append((d, str(expr), None))
            else:
                free = {str(s) for s in getattr(expr, 'free_symbols', ())}
                if free <= defined:
                    self.dims.append((d, None, expr))
                # else: undecidable before the call, as in the full path


class ScalarSlot:
    """One scalar argument (``rs_old: dace.float64``): passed by value. Only values of the
    first call's Python or NumPy type are taken, so the conversion is the one the full path
    made for that call."""

    def __init__(self, index: int, name: str, desc: dace.data.Scalar, sample):
        if not isinstance(sample, (int, float, complex, np.number)) or isinstance(sample, (bool, np.bool_)):
            raise NoPlan(f'scalar argument {name} of type {type(sample).__name__}')
        self.index, self.name = index, name
        self.kind = type(sample)
        #: passed as a double (else as a 64-bit integer)
        self.is_float = bool(np.issubdtype(desc.dtype.type, np.floating))


# ---------------------------------------------------------------------- returns
class DenseReturn:

    def __init__(self, desc: dace.data.Array):
        if isinstance(desc, dace.data.Scalar) or isinstance(desc.dtype, dace.dtypes.pyobject):
            raise NoPlan('scalar return')
        if desc.storage not in (dace.StorageType.Default, dace.StorageType.CPU_Heap):
            raise NoPlan(f'return storage {desc.storage}')
        shape = list(desc.shape)
        strides, total = list(desc.strides), desc.total_size
        c_strides, acc = [], 1
        for s in reversed(shape):
            c_strides.insert(0, acc)
            acc = acc * s
        if any(dace.symbolic.simplify(a - b) != 0 for a, b in zip(strides, c_strides)) or \
                dace.symbolic.simplify(total - acc) != 0:
            raise NoPlan('return with non-C strides')
        self.shape = shape  # (symbolic: the binder evaluates it)
        self.dtype = np.dtype(desc.dtype.as_numpy_dtype())


class SparseReturn:

    def __init__(self, desc: dace.data.Structure):
        self.allocator = return_allocator(desc)

    def allocate(self, syms):
        obj = self.allocator(syms)
        return obj, ctypes.addressof(obj)

    @staticmethod
    def result(obj):
        return struct_to_python(obj)


# ---------------------------------------------------------------------- the plan
class Holder:
    """What :func:`~sdfgsparse.runtime.capacity.fill_capacities` reads an argument from."""

    def __init__(self, arg):
        self._ss_arg = arg
