"""Per-signature call plans: what a warm call of a compiled program still has to do.

The first call of a signature goes through DaCe. Everything that depends only on the
signature — which arguments are sparse and in which format and dtypes, their struct
fields, which symbol each shape, size and dimension defines or must match, the program's
parameter list, how to allocate each return value from the symbols — is then worked out
once into a :class:`CallPlan`, whose warm call is compiled code: a
:class:`~sdfgsparse.runtime._binder.Binder` (``runtime/_binder.c``, built by the package's
install) made from the plan's description. It reads the arguments' fields, runs the cheap
storage checks, allocates the results and calls the program's entry
(:mod:`sdfgsparse.targets.cpu.entry`) with the GIL released; the uncommon parts of a
signature (sparse formats other than CSR / CSC, capacities of data-dependent results,
sparse results) are steps that call back into the slots here (:mod:`sdfgsparse.runtime.slots`).
Arguments whose kernels check their storage as they read it
(:mod:`sdfgsparse.targets.cpu.kernel_checks`) are not checked before; when a kernel
reports a problem, the results are dropped and the call takes the full path, which
raises the error.

A plan only takes calls it can finish exactly like the full path: any argument that is
not the expected kind (another format or index dtype, a copy to make, a dense array not
in C order, a shape that disagrees, storage that fails the check, memory a written
argument shares with another) makes the binder return :data:`MISS` before anything runs,
and the caller takes the full path, which converts, warns or raises the typed error.
"""
import ctypes
import weakref
from typing import Any, Dict, List, Optional, Sequence

import dace
import numpy as np
from dace import hooks

from sdfgsparse._symbolic import integer_code
from sdfgsparse.formats import is_sparse_desc
from sdfgsparse.formats.levels import Compressed, Dense
from sdfgsparse.ops import shape_checks
from sdfgsparse.runtime import marshal

try:
    from sdfgsparse.runtime import _binder
except ImportError as exc:  # pragma: no cover - a source tree that was never installed
    raise ImportError('sdfgsparse.runtime._binder (the compiled warm call) is not built: install the package '
                      '(`make venv`, or `pip install -e .`), which compiles it') from exc
from sdfgsparse.runtime.aliasing import access_of
from sdfgsparse.runtime.outputs import plan_outputs, return_names
from sdfgsparse.runtime.results import to_torch
from sdfgsparse.runtime.slots import (MISS, DenseReturn, DenseSlot, Holder, NoPlan, ScalarSlot, SparseReturn,
                                      SparseSlot)
from sdfgsparse.targets.cpu import entry as entries
from sdfgsparse.targets.cpu import kernel_checks

__all__ = ['CallPlan', 'build_plan', 'MISS', 'dispatch']

#: ``dispatch(table, args, miss)``: the binder ``table`` holds for the types of ``args``, called
#: (the hook's warm call by position, runtime/hooks.py); ``miss`` where none or it misses.
dispatch = _binder.dispatch


def _probe() -> bool:
    """Whether the binder reads NumPy arrays as NumPy does (data, rank, shape, C order,
    dtype); plans are off where not (every call takes the full path)."""
    probes = [np.arange(5, dtype=t)[1:] for t in (np.float64, np.int32, np.int8)] + \
        [np.ones((3, 4)), np.ones((3, 4)).T, np.empty(0)]
    for a in probes:
        got = _binder.probe(a)
        if got != (a.__array_interface__['data'][0], a.ndim, a.shape, bool(a.flags.c_contiguous), a.dtype) or \
                got[4] is not a.dtype:
            return False
    return True


#: Whether warm plans are made (the binder agrees with NumPy on this machine's arrays).
ENABLED = _probe()

#: Every plan made (weakly): tests add up their binders' ``done`` and ``missed`` counts.
PLANS: 'weakref.WeakSet[CallPlan]' = weakref.WeakSet()

_FIELD = {'pos1': 0, 'crd1': 1, 'vals': 2, 'rows': 3, 'cols': 4, 'n1': 5}


def _plain_compressed(slot: SparseSlot) -> bool:
    """A CSR / CSC-like argument the binder reads itself: one dense then one compressed
    level, the entry count its only size, from scipy CSR / CSC, torch CSR / CSC or a
    :class:`~sdfgsparse.runtime.container.SparseMatrix`."""
    fmt = slot.fmt
    if [type(lvl) for lvl in fmt.levels] != [Dense, Compressed] or fmt.levels[0].size_key or \
            list(fmt.size_keys) != ['n1'] or sorted(slot.members) != ['crd1', 'pos1', 'vals'] or \
            slot.size_specs != [('n1', 'crd1')] or fmt.block != (1, 1):
        return False
    if slot.source == 'scipy':
        return slot.scipy_format in ('csr', 'csc')
    if slot.source == 'torch':
        return slot.torch_layout in marshal.TORCH_COMPRESSED
    return slot.source == 'matrix'


class _Symbols:
    """The binder's symbol table: a position per name."""

    def __init__(self):
        self.names: List[str] = []
        self.at: Dict[str, int] = {}

    def __call__(self, name: str) -> int:
        if name not in self.at:
            self.at[name] = len(self.names)
            self.names.append(name)
        return self.at[name]


class CallPlan:
    """The warm call of one compiled program for one signature (see the module docs):
    ``plan.run(args, out=None)`` is its binder, returning the results or :data:`MISS`."""

    def __init__(self, csdfg, argnames: Sequence[str], descs: Dict[str, Optional[dace.data.Data]],
                 out: Dict[str, Any], sparse: Dict[str, 'marshal.SparseArg'], values: Dict[str, Any],
                 torch_out: bool, given: Sequence[str] = ()):
        if not ENABLED:
            raise NoPlan('the binder does not read this NumPy\'s arrays')
        sdfg = csdfg.sdfg
        self.csdfg = csdfg
        self.torch_out = torch_out
        self.nargs = len(argnames)
        #: symbols the call gives by name (a slice's bounds), sorted: positional after the arguments
        self.given = list(given)
        constants = {k: int(v) for k, v in sdfg.constants.items() if isinstance(v, (int, np.integer))}
        sparse_slots, dense_slots = [], []
        defined = set(constants) | set(self.given)
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
        #: the library's count of storage problems its kernels found (None: they check none)
        self.failures = failures = None
        found = kernel_checks.symbols(csdfg._lib, [s.name for s in sparse_slots]) if sparse_slots else None
        if found is not None:
            failures, checked = found
            self.failures = failures
            for slot in sparse_slots:
                slot.in_kernel_from = checked.get(slot.name)
        from sdfgsparse.runtime.capacity import PREFIX
        self.capacities = sorted(str(s) for s in sdfg.free_symbols if str(s).startswith(PREFIX))
        defined |= set(self.capacities)
        # Shape rules only a call can decide (ops.shape_checks): a call that breaks one
        # takes the full path, which raises
        rules = []
        for rule in shape_checks.rules(sdfg):
            ea, eb = (dace.symbolic.pystr_to_symbolic(x) for x in rule[:2])
            free = {str(x) for e in (ea, eb) for x in getattr(e, 'free_symbols', ())}
            if not free <= defined:
                raise NoPlan(f'shape rule over {sorted(free - defined)}')
            rules.append((ea, eb))
        # Returns in DaCe's order (sorted by name), results in the caller's order.
        returns = [(n, d) for n, d in sorted(sdfg.arrays.items()) if n.startswith('__return') and not d.transient]
        self.returns = [(n, SparseReturn(d) if is_sparse_desc(d) else DenseReturn(d)) for n, d in returns]
        names = [n for n, _ in returns]
        self.result_order = [names.index(n) for n in return_names(sdfg)]
        # the program's single entry (targets/cpu/entry.py), when its library has one
        self.entry = entries.find(csdfg) if sparse_slots else None
        self._made = (csdfg, argnames, constants, rules, failures, defined)
        #: how the binder takes each argument: 'sparse' (CSR / CSC, read in C), 'python'
        #: (another sparse format: the slot's step), 'numpy', 'torch' or 'scalar'
        self.steps: Dict[str, str] = {}
        self.run = _binder.Binder(self._spec(*self._made))
        PLANS.add(self)

    def python_twin(self):
        """A second binder of this plan whose sparse arguments all take the slots' Python
        steps (:meth:`SparseSlot.bind <sdfgsparse.runtime.slots.SparseSlot.bind>`): the
        differential tests run both on the same calls."""
        return _binder.Binder(self._spec(*self._made, python=True))

    def _spec(self, csdfg, argnames, constants, rules, failures, defined, python=False) -> dict:
        """The binder's description of this plan (runtime/_binder.c reads it)."""
        syms = _Symbols()
        for name in list(constants) + self.given + sorted(defined):
            syms(name)
        table = syms.at.get  # (expressions over symbols no step defines: evaluated in Python, they MISS)
        need_dict = bool(self.capacities) or any(isinstance(r, SparseReturn) for _, r in self.returns)

        def expr(e):
            nonlocal need_dict
            code = integer_code(e, table)
            if code is None:
                from sdfgsparse.runtime.symexpr import compile_int
                need_dict = True
                return compile_int(e)
            return tuple(code)

        entry = self.entry
        plain = set(entry.sparse) if entry is not None else set()
        # the program's parameters: each one's words of the record (kind 0: an argument,
        # 1: a result, 2: a symbol)
        index = {n: i for i, n in enumerate(argnames)}
        retindex = {n: j for j, (n, _) in enumerate(self.returns)}
        sparse_names = {s.name for s in self.sparse_slots}
        sources, sources_at, arg_word, codes = [], [], [0] * len(argnames), []
        for a in csdfg._sig:
            desc = csdfg._typedict[a]
            if a in index:
                arg_word[index[a]] = len(codes)
                if a in plain:
                    codes += ['Q' if isinstance(t, dace.pointer) else 'q'
                              for t in desc.dtype.base_type.fields.values()] + ['q'] * 3
                elif a in sparse_names:
                    codes.append('Q')
                else:
                    codes.append(_slot_code(desc))
            elif a in retindex:
                sources += [1, retindex[a]]
                sources_at.append(len(codes))
                codes.append('Q')
            elif a in defined and isinstance(desc, dace.data.Scalar):
                sources += [2, syms(a)]
                sources_at.append(len(codes))
                codes.append(_slot_code(desc))
            else:
                raise NoPlan(f'compiled argument {a}')
        if entry is not None and ''.join(codes) != entry.slots:
            raise NoPlan('the entry\'s record differs from the plan\'s')
        for i in range(len(argnames)):  # arguments the program does not take: checked, words kept apart
            if argnames[i] not in csdfg._sig:
                arg_word[i] = len(codes)
                codes += ['Q'] * 8
        steps = [{'kind': _binder.GIVEN, 'index': 0, 'words': 0, 'written': 0, 'position': j, 'sym': syms(n)}
                 for j, n in enumerate(self.given)]
        defined_now = set(constants) | set(self.given)
        written = set(self.written)
        c_sparse = entry is not None and not self.capacities and not python
        kinds = {_binder.SPARSE: 'sparse', _binder.PYTHON: 'python', _binder.NUMPY: 'numpy', _binder.TORCH: 'torch',
                 _binder.SCALAR: 'scalar'}
        for slot in self.sparse_slots:
            step = {'index': slot.index, 'written': int(slot.index in written)}
            if slot.name in plain and c_sparse and _plain_compressed(slot):
                step.update(_sparse_step(slot, entry, syms, defined_now))
            else:
                need_dict = True
                words = len(slot.fields) + 3 if slot.name in plain else 1
                step.update(kind=_binder.PYTHON, words=words, fn=slot.binder_step(words > 1),
                            defines=[syms(s) for s, _ in slot.symbols])
                defined_now |= {s for s, _ in slot.symbols}
            steps.append(step)
        for slot in self.dense_slots:
            step = {'index': slot.index, 'written': int(slot.index in written), 'words': 1}
            if isinstance(slot, ScalarSlot):
                step.update(kind=_binder.SCALAR, type=slot.kind, is_float=int(slot.is_float))
            else:
                dims = tuple((d, syms(sym) if sym is not None else -1, None if e is None else expr(e))
                             for d, sym, e in slot.dims)
                step.update(ndim=slot.ndim, itemsize=slot.dtype.itemsize, dims=dims)
                if slot.torch is not None:
                    cls, dtype, strided = slot.torch
                    step.update(kind=_binder.TORCH, cls=cls, dtype=dtype, strided=strided)
                else:
                    step.update(kind=_binder.NUMPY, dtype=slot.dtype)
            steps.append(step)
        if not python:
            self.steps = {argnames[st['index']]: kinds[st['kind']] for st in steps if st['kind'] in kinds}
        rets = []
        for _, ret in self.returns:
            if isinstance(ret, SparseReturn):
                rets.append({'sparse': 1, 'alloc': ret.allocate, 'result': ret.result})
            else:
                rets.append({'sparse': 0, 'dtype': ret.dtype, 'shape': tuple(expr(e) for e in ret.shape)})
        capacities = _capacity_step(self.capacities) if self.capacities else None
        return {
            'csdfg': csdfg, 'lib': csdfg._lib._lib, 'hooks': hooks, 'validate': marshal.VALIDATE, 'miss': MISS,
            'empty': np.empty, 'ndarray': np.ndarray, 'plan_outputs': plan_outputs,
            'to_torch': to_torch if self.torch_out else None, 'failures': failures,
            'capacities': capacities, 'caps': [syms(c) for c in self.capacities],
            'entry': entry.address if entry is not None else 0, 'call': None if entry is not None else self._function(),
            'nargs': len(argnames), 'ngiven': len(self.given), 'need_dict': int(need_dict),
            'constants': {syms(k): v for k, v in constants.items()}, 'steps': steps,
            'rules': [(expr(a), expr(b)) for a, b in rules], 'returns': rets,
            'order': self.result_order, 'sources': sources, 'sources_at': sources_at, 'arg_word': arg_word,
            'written_args': sorted(written), 'nwords': len(codes), 'codes': ''.join(codes).encode(),
            'sym_names': tuple(syms.names),
        }

    def _function(self):
        """The program's own function through ctypes (a library without an entry)."""
        csdfg = self.csdfg
        argtypes = [ctypes.c_void_p]
        for a in csdfg._sig:
            desc = csdfg._typedict[a]
            argtypes.append(desc.dtype.as_ctypes() if isinstance(desc, dace.data.Scalar) and not is_sparse_desc(desc)
                            else ctypes.c_void_p)
        proto = ctypes.CFUNCTYPE(ctypes.c_int, *argtypes)
        return proto(ctypes.cast(csdfg._cfunc, ctypes.c_void_p).value)


def _capacity_step(caps: List[str]):
    """The binder's step for the capacities of data-dependent results
    (:mod:`sdfgsparse.runtime.capacity`): ``step(table, origin)`` puts each into the table,
    from the sparse arguments the steps before left in ``origin``."""
    from sdfgsparse.runtime.capacity import fill_capacities

    def step(table: dict, origin: dict) -> None:
        held = {n: Holder(a) for n, a in origin.items()}
        fill_capacities(caps, held)
        for k in caps:
            table[k] = held[k]

    return step


def _slot_code(desc) -> str:
    """The record slot of a dense parameter (:func:`~sdfgsparse.targets.cpu.entry.slot_code`:
    an address, an integer or a double); another kind (a complex value) takes the full path."""
    code = entries.slot_code(desc)
    if code is None:
        raise NoPlan(f'a {desc.dtype} parameter')
    return code


def _sparse_step(slot: SparseSlot, entry, syms: _Symbols, defined: set) -> dict:
    """The binder's step of a CSR / CSC argument (see :func:`_plain_compressed`)."""
    fmt = slot.fmt
    # the parent level's extent is rows (CSR) or cols (CSC); the compressed level's the other
    r, c = dace.symbolic.symbol('_rows'), dace.symbolic.symbol('_cols')
    counts = fmt.counts((r, c), {'n1': dace.symbolic.symbol('n1')})
    extent = fmt.extents(r, c)[1]
    dims = {str(r): 0, str(c): 1}
    if str(counts[0]) not in dims or str(extent) not in dims or str(counts[-1]) != 'n1':
        raise NoPlan(f'the levels of {slot.name}')
    uses = []
    values = {'rows': 0, 'cols': 1, 'n1': 2}
    for sym, key in slot.symbols:
        uses += [syms(sym), values[key], int(sym not in defined)]
        defined.add(sym)
    want = dict(slot.const_dims)
    src = slot.source
    if src == 'scipy':
        fmt_key, vdt, idt = slot.scipy_format, slot.vals_dtype, slot.index_dtype
    elif src == 'matrix':
        fmt_key, vdt, idt = slot.fmt, slot.vals_dtype, slot.index_dtype
    else:
        fmt_key = marshal._torch_attr(slot.torch_layout)
        vdt, idt = marshal._torch_attr(slot.vals_dtype.name), marshal._torch_attr(slot.index_dtype.name)
    pos, crd = marshal.TORCH_COMPRESSED.get(getattr(slot, 'torch_layout', None), ('', ''))
    lvl = fmt.levels[1]
    return {
        'kind': _binder.SPARSE, 'words': len(slot.fields) + 3,
        'source': {'scipy': 0, 'matrix': 1, 'torch': 2}[src], 'fmt': fmt_key, 'vdt': vdt, 'idt': idt,
        'pos_name': pos, 'crd_name': crd, 'parent_dim': dims[str(counts[0])], 'extent_dim': dims[str(extent)],
        'ordered': int(bool(lvl.ordered)), 'unique': int(bool(lvl.unique)), 'bit': entry.sparse.index(slot.name),
        'rows_want': want.get(0, -1), 'cols_want': want.get(1, -1), 'imax': slot.imax,
        'in_kernel_from': -1 if slot.in_kernel_from is None else int(slot.in_kernel_from),
        'index_size': slot.index_size, 'vals_size': slot.vals_dtype.itemsize,
        'fields': [_FIELD[f] for f, _ in slot.fields], 'syms': uses,
    }


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
