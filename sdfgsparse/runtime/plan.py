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
from typing import Any, Dict, Optional, Sequence

import dace
import numpy as np
from dace import hooks

from sdfgsparse.formats import is_sparse_desc
from sdfgsparse.targets.cpu import entry, kernel_checks
from sdfgsparse.ops import shape_checks
from sdfgsparse.runtime import marshal
from sdfgsparse.runtime.aliasing import access_of
from sdfgsparse.runtime.outputs import return_names
from sdfgsparse.runtime.pointers import data_pointer
from sdfgsparse.runtime.results import to_torch
from sdfgsparse.runtime.slots import (MISS, DenseReturn, DenseSlot, Holder, NoPlan, ScalarSlot, SparseReturn,
                                      SparseSlot)
from sdfgsparse.runtime.specialise import specialise
from sdfgsparse.runtime.symexpr import compile_rules

__all__ = ['CallPlan', 'build_plan', 'MISS']


class CallPlan:
    """The warm call of one compiled program for one signature (see the module docs)."""

    def __init__(self, csdfg, argnames: Sequence[str], descs: Dict[str, Optional[dace.data.Data]],
                 out: Dict[str, Any], sparse: Dict[str, 'marshal.SparseArg'], values: Dict[str, Any],
                 torch_out: bool, given: Sequence[str] = ()):
        sdfg = csdfg.sdfg
        self.csdfg = csdfg
        self.lib = csdfg._lib._lib
        self.torch_out = torch_out
        self.nargs = len(argnames)
        #: symbols the call gives by name (a slice's bounds), sorted: positional after the arguments
        self.given = list(given)
        self.constants = {k: int(v) for k, v in sdfg.constants.items() if isinstance(v, (int, np.integer))}
        sparse_slots, dense_slots = [], []
        defined = set(self.constants) | set(self.given)
        for i, name in enumerate(argnames):
            if name in sparse:
                slot = SparseSlot(i, name, sparse[name], type(out[name]), values[name], csdfg._lib)
                defined |= {s for s, _ in slot.symbols}
                sparse_slots.append(slot)
        for i, name in enumerate(argnames):
            if name in sparse:
                continue
            desc = sdfg.arrays.get(name)
            if isinstance(desc, dace.data.Scalar) and not is_sparse_desc(desc):
                dense_slots.append(ScalarSlot(i, name, desc, values[name]))
                continue
            if not isinstance(desc, dace.data.Array) or isinstance(desc, dace.data.View) or is_sparse_desc(desc):
                raise NoPlan(f'argument {name}')
            dense_slots.append(DenseSlot(i, name, desc, descs.get(name), defined, out[name]))
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
        self.returns = [(n, SparseReturn(d) if is_sparse_desc(d) else DenseReturn(d)) for n, d in returns]
        names = [n for n, _ in returns]
        self.result_order = [names.index(n) for n in return_names(sdfg)]

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
        # the library's single entry for a warm call (targets/cpu/entry.py), when it has one
        self.entry = entry.find(csdfg) if sparse_slots else None
        self.specialised = specialise(self) if not self.given else None

    def run(self, args: Sequence[Any], out=None):
        """Call with positional ``args`` (all arguments); :data:`MISS` if the full path must.
        The plan's specialised function when it has one (:mod:`sdfgsparse.runtime.specialise`),
        else :meth:`run_generic`. ``out``: the caller's ``out=`` (:mod:`sdfgsparse.runtime.outputs`;
        the specialised function only)."""
        fast = self.specialised
        if fast is not None:
            return fast(args, out) if out is not None else fast(args)
        return self.run_generic(args) if out is None else MISS

    def run_generic(self, args: Sequence[Any]):
        """:meth:`run` by walking the slots: the specification of the specialised function."""
        csdfg = self.csdfg
        if csdfg._lib._lib is not self.lib or not csdfg._initialized or csdfg.do_not_execute or \
                hooks._COMPILED_SDFG_CALL_HOOKS:
            return MISS
        syms = dict(self.constants)
        for j, name in enumerate(self.given):
            v = args[self.nargs + j]
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
                return MISS
            syms[name] = int(v)
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
            table = {n: Holder(a) for n, a in origin.items()}
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
            res = to_torch(res)
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


def build_plan(csdfg, argnames, descs, out, sparse, values, torch_out, given=()) -> Optional[CallPlan]:
    """A plan for this signature, or None when a part of it needs the full path.

    :param descs: the annotations' descriptors (None where unannotated), as the full path
                  checks arguments against them.
    :param out, sparse, values: the marshalled arguments, sparse arguments and values of
                                the call that found this compiled program.
    """
    try:
        return CallPlan(csdfg, argnames, descs, out, sparse, values, torch_out, given)
    except NoPlan:
        return None
