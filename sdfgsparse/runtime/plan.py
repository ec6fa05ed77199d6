"""Per-signature call plans: what a warm call of a compiled program still has to do.

The first call of a signature goes through DaCe. Everything that depends only on the
signature — which arguments are sparse and in which format and dtypes, their struct class
and field order, which symbol each shape, size and dimension defines or must match, the
order and C types of the compiled function's argument list, how to allocate each return
value from the symbols — is then worked out once into a :class:`CallPlan`. A warm call
reads the arrays' pointers and sizes, runs the cheap storage check
(:mod:`sdfgsparse.runtime.fastcheck`), fills the argument structs, calls the compiled
function and builds the results. Arguments whose kernels check their storage as they read
it (:mod:`sdfgsparse.targets.cpu.kernel_checks`) are not checked before; when a kernel
reports a problem, the results are dropped and the call takes the full path, which
raises the error.

A plan only takes calls it can finish exactly like the full path: any argument that is
not the expected kind (another format or index dtype, a copy to make, a dense array not
in C order, a shape that disagrees, storage that fails the check) makes :meth:`CallPlan.run` return
:data:`MISS` before anything runs, and the caller takes the full path, which converts,
warns or raises the typed error as before.
"""
import ctypes
from typing import Any, Dict, List, Optional, Sequence

import dace
import numpy as np
import scipy.sparse as sp
from dace import hooks

from sdfgsparse.formats import is_sparse_desc
from sdfgsparse.formats.levels import Compressed
from sdfgsparse.targets.cpu import kernel_checks, storage_check
from sdfgsparse.ops import shape_checks
from sdfgsparse.runtime import marshal
from sdfgsparse.runtime.aliasing import access_of
from sdfgsparse.runtime.container import SparseMatrix
from sdfgsparse.runtime.convert import scipy_members
from sdfgsparse.runtime.fastcheck import StorageCheck
from sdfgsparse.runtime.pointers import data_pointer
from sdfgsparse.runtime.results import return_allocator, struct_to_python
from sdfgsparse.runtime.specialise import specialise
from sdfgsparse.runtime.symexpr import compile_int, compile_rules

__all__ = ['CallPlan', 'build_plan', 'MISS']

#: Returned by :meth:`CallPlan.run` when the call must take the full path.
MISS = object()


class NoPlan(Exception):
    """The signature needs something a plan does not do; keep the full path."""


# ---------------------------------------------------------------------- arguments
class _SparseSlot:
    """One sparse argument: where its arrays come from, what they must be, the symbols
    it defines, and the struct it becomes."""

    def __init__(self, index: int, name: str, arg: 'marshal.SparseArg', struct_cls, sample, lib=None):
        st = arg.type
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
        if marshal.VALIDATE['on']:
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
        if origin is not None:  # capacity symbols read the arguments
            arg = marshal.SparseArg(self.name, v, self.type)
            arg.arrays, arg.shape, arg.sizes = arrays, (rows, cols), sizes
            origin[self.name] = arg
        return obj


class _DenseSlot:
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
        self.dims = []  # (dimension, symbol to define) or (dimension, f(symbols) to match)
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
                    self.dims.append((d, None, compile_int(expr)))
                # else: undecidable before the call, as in the full path

    def bind(self, v, syms: Dict[str, int]) -> Optional[int]:
        if self.torch is not None:
            cls, dtype, strided = self.torch
            if type(v) is not cls or v.dtype != dtype or v.dim() != self.ndim or not v.is_cpu or \
                    v.layout is not strided or not v.is_contiguous():
                return None
        elif type(v) is not np.ndarray or v.dtype != self.dtype or v.ndim != self.ndim or not v.flags.c_contiguous:
            return None  # (a C-ordered view is passed as it is; other layouts: the full path copies)
        shape = v.shape
        for d, sym, fn in self.dims:
            if sym is not None:
                syms[sym] = shape[d]
            elif fn(syms) != shape[d]:
                return None
        return data_pointer(v) if self.torch is None else v.data_ptr()

    def span(self, v, p: int):
        """The bytes ``[p, end)`` of ``v`` (bound: C-contiguous, starting at ``p``)."""
        return ((p, p + (v.nbytes if self.torch is None else v.numel() * v.element_size())), )


class _ScalarSlot:
    """One scalar argument (``rs_old: dace.float64``): passed by value. Only values of the
    first call's Python or NumPy type are taken, so the conversion is the one the full path
    made for that call."""

    def __init__(self, index: int, name: str, desc: dace.data.Scalar, sample):
        if not isinstance(sample, (int, float, complex, np.number)) or isinstance(sample, (bool, np.bool_)):
            raise NoPlan(f'scalar argument {name} of type {type(sample).__name__}')
        self.index, self.name = index, name
        self.kind = type(sample)
        self.ctype = desc.dtype.as_ctypes()

    #: (passed by value: no memory to overlap)
    span = None

    def bind(self, v, syms: Dict[str, int]):
        if type(v) is not self.kind:
            return None
        return self.ctype(v)


# ---------------------------------------------------------------------- returns
class _DenseReturn:

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
        self.shape = [compile_int(e) for e in shape]
        self.dtype = np.dtype(desc.dtype.as_numpy_dtype())

    def allocate(self, syms):
        arr = np.empty(tuple(f(syms) for f in self.shape), self.dtype)
        return arr, data_pointer(arr)

    @staticmethod
    def result(obj):
        return obj


class _SparseReturn:

    def __init__(self, desc: dace.data.Structure):
        self.allocator = return_allocator(desc)

    def allocate(self, syms):
        obj = self.allocator(syms)
        return obj, ctypes.addressof(obj)

    @staticmethod
    def result(obj):
        return struct_to_python(obj)


# ---------------------------------------------------------------------- the plan
class _Holder:
    """What :func:`~sdfgsparse.runtime.capacity.fill_capacities` reads an argument from."""

    def __init__(self, arg):
        self._ss_arg = arg


class CallPlan:
    """The warm call of one compiled program for one signature (see the module docs)."""

    def __init__(self, csdfg, argnames: Sequence[str], descs: Dict[str, Optional[dace.data.Data]],
                 out: Dict[str, Any], sparse: Dict[str, 'marshal.SparseArg'], values: Dict[str, Any],
                 torch_out: bool):
        sdfg = csdfg.sdfg
        self.csdfg = csdfg
        self.lib = csdfg._lib._lib
        self.torch_out = torch_out
        self.nargs = len(argnames)
        self.constants = {k: int(v) for k, v in sdfg.constants.items() if isinstance(v, (int, np.integer))}
        sparse_slots, dense_slots = [], []
        defined = set(self.constants)
        for i, name in enumerate(argnames):
            if name in sparse:
                slot = _SparseSlot(i, name, sparse[name], type(out[name]), values[name], csdfg._lib)
                defined |= {s for s, _ in slot.symbols}
                sparse_slots.append(slot)
        for i, name in enumerate(argnames):
            if name in sparse:
                continue
            desc = sdfg.arrays.get(name)
            if isinstance(desc, dace.data.Scalar) and not is_sparse_desc(desc):
                dense_slots.append(_ScalarSlot(i, name, desc, values[name]))
                continue
            if not isinstance(desc, dace.data.Array) or isinstance(desc, dace.data.View) or is_sparse_desc(desc):
                raise NoPlan(f'argument {name}')
            dense_slots.append(_DenseSlot(i, name, desc, descs.get(name), defined, out[name]))
        self.sparse_slots, self.dense_slots = sparse_slots, dense_slots
        # Arguments the program writes: a call where one shares memory with another
        # argument takes the full path, which computes through a copy (runtime/aliasing.py)
        written = access_of(sdfg).written
        self.written = [i for i, n in enumerate(argnames) if n in written]
        # Arguments whose kernels check their storage: the counter tells after the call
        self.failures = None
        found = kernel_checks.symbols(csdfg._lib, [s.name for s in sparse_slots]) if sparse_slots else None
        if found is not None:
            self.failures, checked = found
            for slot in sparse_slots:
                slot.in_kernel_from = checked.get(slot.name)

        from sdfgsparse.runtime.capacity import PREFIX
        self.capacities = sorted(str(s) for s in sdfg.free_symbols if str(s).startswith(PREFIX))
        defined |= set(self.capacities)
        # Shape rules only a call can decide (ops.shape_checks): a call that breaks one
        # takes the full path, which raises
        self.shape_rules = []
        for fa, fb, free, _ in compile_rules(shape_checks.rules(sdfg)):
            if not free <= defined:
                raise NoPlan(f'shape rule over {sorted(free - defined)}')
            self.shape_rules.append((fa, fb))

        # Returns in DaCe's order (sorted by name), results in the caller's order.
        returns = [(n, d) for n, d in sorted(sdfg.arrays.items()) if n.startswith('__return') and not d.transient]
        self.returns = [(n, _SparseReturn(d) if is_sparse_desc(d) else _DenseReturn(d)) for n, d in returns]
        names = [n for n, _ in returns]
        order = list(range(len(names)))
        if len(names) > 1 and all(n.startswith('__return_') for n in names):
            order.sort(key=lambda j: int(names[j][len('__return_'):]))
        self.result_order = order

        # The compiled function's argument list.
        index = {n: i for i, n in enumerate(argnames)}
        retindex = {n: j for j, n in enumerate(names)}
        self.sources = []
        argtypes = [ctypes.c_void_p]
        for a in csdfg._sig:
            desc = csdfg._typedict[a]
            if a in index:
                self.sources.append((0, index[a]))
                argtypes.append(desc.dtype.as_ctypes() if isinstance(desc, dace.data.Scalar) else ctypes.c_void_p)
            elif a in retindex:
                self.sources.append((1, retindex[a]))
                argtypes.append(ctypes.c_void_p)
            elif a in defined and isinstance(desc, dace.data.Scalar):
                self.sources.append((2, a))
                argtypes.append(desc.dtype.as_ctypes())
            else:
                raise NoPlan(f'compiled argument {a}')
        proto = ctypes.CFUNCTYPE(ctypes.c_int, *argtypes)
        self.func = proto(ctypes.cast(csdfg._cfunc, ctypes.c_void_p).value)
        self.specialised = specialise(self)

    def run(self, args: Sequence[Any]):
        """Call with positional ``args`` (all arguments); :data:`MISS` if the full path must.
        The plan's specialised function when it has one (:mod:`sdfgsparse.runtime.specialise`),
        else :meth:`run_generic`."""
        fast = self.specialised
        return fast(args) if fast is not None else self.run_generic(args)

    def run_generic(self, args: Sequence[Any]):
        """:meth:`run` by walking the slots: the specification of the specialised function."""
        csdfg = self.csdfg
        if csdfg._lib._lib is not self.lib or not csdfg._initialized or csdfg.do_not_execute or \
                hooks._COMPILED_SDFG_CALL_HOOKS:
            return MISS
        syms = dict(self.constants)
        ptrs = [None] * self.nargs
        keep = []
        origin = {} if self.capacities else None
        in_kernel = []
        spans = {} if self.written else None
        for slot in self.sparse_slots:
            obj = slot.bind(args[slot.index], syms, origin, keep, in_kernel)
            if obj is None:
                return MISS
            if spans is not None:  # (bind kept the member arrays last)
                spans[slot.index] = [(p, p + a.nbytes) for a in keep[-1].values() for p in (data_pointer(a), )]
            keep.append(obj)
            ptrs[slot.index] = ctypes.addressof(obj)
        for slot in self.dense_slots:
            p = slot.bind(args[slot.index], syms)
            if p is None:
                return MISS
            ptrs[slot.index] = p
            if spans is not None and slot.span is not None:
                spans[slot.index] = slot.span(args[slot.index], p)
        if spans is not None and _crossing(spans, self.written):
            return MISS
        for fa, fb in self.shape_rules:
            if fa(syms) != fb(syms):
                return MISS
        if origin is not None:
            from sdfgsparse.runtime.capacity import fill_capacities
            table = {n: _Holder(a) for n, a in origin.items()}
            fill_capacities(self.capacities, table)
            for k in self.capacities:
                syms[k] = table[k]
        rets = [ret.allocate(syms) for _, ret in self.returns]
        cargs = [csdfg._libhandle]
        for kind, key in self.sources:
            cargs.append(ptrs[key] if kind == 0 else rets[key][1] if kind == 1 else syms[key])
        failures = self.failures if in_kernel else None  # only when a kernel checks in this call
        if failures is not None:
            before = failures()
        self.func(*cargs)
        if failures is not None and failures() != before:
            return MISS  # a kernel found broken storage: the full path raises the precise error
        if not rets:
            return None
        results = [self.returns[j][1].result(rets[j][0]) for j in self.result_order]
        res = results[0] if len(results) == 1 else tuple(results)
        if self.torch_out:
            from sdfgsparse.runtime.call import _to_torch
            res = _to_torch(res)
        return res


def _crossing(spans: Dict[int, Sequence], written: Sequence[int]) -> bool:
    """Whether the memory of a written argument shares a byte with another argument's
    (``spans``: argument index -> its ``(start, end)`` byte ranges)."""
    for w in written:
        for s0, e0 in spans.get(w, ()):
            for o, ranges in spans.items():
                if o != w:
                    for s1, e1 in ranges:
                        if s0 < e1 and s1 < e0:
                            return True
    return False


def build_plan(csdfg, argnames, descs, out, sparse, values, torch_out) -> Optional[CallPlan]:
    """A plan for this signature, or None when a part of it needs the full path.

    :param descs: the annotations' descriptors (None where unannotated), as the full path
                  checks arguments against them.
    :param out, sparse, values: the marshalled arguments, sparse arguments and values of
                                the call that found this compiled program.
    """
    try:
        return CallPlan(csdfg, argnames, descs, out, sparse, values, torch_out)
    except NoPlan:
        return None
