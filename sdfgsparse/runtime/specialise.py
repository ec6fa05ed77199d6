"""A call plan's warm call, specialised into one straight-line Python function.

:meth:`CallPlan.run_generic <sdfgsparse.runtime.plan.CallPlan.run_generic>` walks the
plan's slots with a method call, a few dictionaries and a list comprehension per argument:
more than half of a tiny matrix's warm call, and more than the whole call of torch's or
scipy's SpMV on matrices with ten thousand entries (figures: docs/performance.md). :func:`specialise`
writes the same steps as the source of one function for the plan — each argument's
checks in a row, sizes and symbols as locals, the storage check of a CSR / CSC argument
as one call of the library's compiled check — and compiles it once (``exec``, as
:mod:`dataclasses` and ``collections.namedtuple`` build their methods). It only covers
plans whose every part it can write exactly as the generic path does:

* sparse arguments in a format of one dense and one compressed level (CSR, CSC), given as
  scipy or torch CSR / CSC or as :class:`~sdfgsparse.runtime.container.SparseMatrix`,
  checked by the library's compiled check;
* NumPy array, torch tensor and scalar arguments;
* dense results, and no SpGEMM capacities.

When the program writes an argument, the function keeps each argument's pointer and end
as locals and returns ``MISS`` when a written argument shares a byte with another (a few
comparisons; the full path then computes through a copy, :mod:`~sdfgsparse.runtime.aliasing`).

Where the program's library has its entry (:mod:`sdfgsparse.targets.cpu.entry`), the
function makes one foreign call: it packs the call's values into the entry's record (NumPy
arrays as their objects, unless a written argument needs their addresses for the overlap
check) and sets a check bit per sparse argument instead of building the structs and calling
the check itself; the entry checks before the program runs and a failed check returns
``MISS`` as the check did.

Any other plan keeps the generic walk (:func:`specialise` returns None). The function
returns :data:`~sdfgsparse.runtime.plan.MISS` under exactly the conditions the generic walk
does; ``tests/runtime/test_call_plans.py`` and ``test_torch.py`` run both on the same
calls.
"""
import ctypes
import struct
from typing import Callable, Dict, List, Optional

import numpy as np
import sympy
from dace import hooks

from sdfgsparse._symbolic import _PyPrinter
from sdfgsparse.formats.levels import Compressed, Dense
from sdfgsparse.runtime import marshal
from sdfgsparse.runtime.convert import SCIPY_COMPRESSED
from sdfgsparse.runtime.marshal import TORCH_COMPRESSED, _torch_attr
from sdfgsparse.runtime.outputs import plan_outputs
from sdfgsparse.runtime.pointers import HEADER_OFFSET, data_pointer
from sdfgsparse.runtime.results import to_torch
from sdfgsparse.runtime.slots import MISS, DenseReturn, DenseSlot, ScalarSlot

__all__ = ['specialise']

#: a NumPy array passed to the entry as its object (the entry reads its data pointer): the
#: source of its slot, which also marks it in the entry's mask
_OBJECT = 'id({})'

class _Printer(_PyPrinter):
    """Prints a size expression over local variables (``names``: symbol -> source)."""

    def __init__(self, names: Dict[str, str]):
        super().__init__()
        self.names = names

    def _print_Symbol(self, expr):
        return self.names[str(expr)]


def _source(expr, names: Dict[str, str]) -> str:
    """Python source of an integer size expression (a plain int, a symbol, or a formula)."""
    if isinstance(expr, (int, np.integer)):
        return str(int(expr))
    expr = sympy.sympify(expr)
    if expr.is_Symbol:
        return names[str(expr)]  # already an int
    return f'int({_Printer(names).doprint(expr)})'


def _plain_compressed(slot) -> bool:
    """A CSR / CSC-like argument: one dense then one compressed level, sizes ``n1``, the
    library's compiled check, and a source whose arrays :func:`specialise` reads."""
    fmt = slot.fmt
    if [type(lvl) for lvl in fmt.levels] != [Dense, Compressed] or fmt.levels[0].size_key or \
            list(fmt.size_keys) != ['n1'] or sorted(slot.members) != ['crd1', 'pos1', 'vals'] or \
            slot.size_specs != [('n1', 'crd1')] or slot.check.native is None or fmt.block != (1, 1):
        return False
    if slot.source == 'scipy':
        return slot.scipy_format in ('csr', 'csc')
    if slot.source == 'torch':
        return slot.torch_layout in TORCH_COMPRESSED
    return slot.source == 'matrix'


class _Writer:

    def __init__(self):
        self.lines: List[str] = []
        self.env: Dict[str, object] = {}

    def put(self, line: str, depth: int = 1):
        self.lines.append('    ' * depth + line)

    def const(self, name: str, value) -> str:
        """A global of the generated function (a constant it reads by name)."""
        assert name not in self.env or self.env[name] is value
        self.env[name] = value
        return name

    def miss_unless(self, condition: str, depth: int = 1):
        self.put(f'if not ({condition}): return MISS', depth)


def _size(w: _Writer, name: str, fn) -> str:
    """Source of a compiled size ``fn(s)`` (runtime/symexpr.py): its expression over the table
    ``s`` inline where it carries one (no call), else a call of the function as a global."""
    source = getattr(fn, 'source', None)
    return f'({source})' if source is not None else f'{w.const(name, fn)}(s)'


def _array_ok(w: _Writer, var: str, dtype_name: str, extra: str = '', torch: bool = False) -> None:
    if torch:  # the tests NumPy makes of the tensor's .numpy() view, asked of the tensor
        w.miss_unless(f'{var}.dtype == {dtype_name} and {var}.dim() == 1 and {var}.is_contiguous(){extra}')
    else:
        w.miss_unless(f'({var}.dtype is {dtype_name} or {var}.dtype == {dtype_name}) and {var}.ndim == 1 and '
                      f'{var}.flags.c_contiguous{extra}')  # (a builtin dtype is one object: no comparison)


def _sparse(w: _Writer, k: int, slot, defined: set, spans: Optional[dict], bit: Optional[int] = None):
    """Lines binding sparse argument ``slot``; returns the source of its struct's address,
    or with ``bit`` (its check bit of the program's entry, :mod:`sdfgsparse.targets.cpu.entry`)
    the sources of the entry's parameters for it. With ``spans``, the byte ranges of its
    members go there (local names of start and end)."""
    v = f'a{k}'
    w.put(f'{v} = args[{slot.index}]')
    if slot.source == 'scipy':
        w.miss_unless(f'{v}.format == {slot.scipy_format!r}')
        for m, attr in SCIPY_COMPRESSED.items():
            w.put(f'{m}_{k} = {v}.{attr}')
        w.put(f'r{k}, c{k} = {v}.shape')
    elif slot.source == 'torch':  # the member tensors themselves (marshal._torch_members views them)
        pos, crd = TORCH_COMPRESSED[slot.torch_layout]
        w.miss_unless(f'{v}.layout is {w.const(f"LAYOUT{k}", _torch_attr(slot.torch_layout))} and {v}.is_cpu')
        w.put(f'pos1_{k} = {v}.{pos}()')
        w.put(f'crd1_{k} = {v}.{crd}()')
        w.put(f'vals_{k} = {v}.values()')
        w.put(f'r{k}, c{k} = {v}.shape')
    else:  # SparseMatrix
        w.miss_unless(f'{v}.format is {w.const(f"FMT{k}", slot.fmt)}')
        w.put(f'm{k} = {v}.arrays')
        for m in ('pos1', 'crd1', 'vals'):
            w.put(f'{m}_{k} = m{k}[{m!r}]')
        w.put(f'r{k}, c{k} = {v}.shape')
    w.put(f'r{k} = int(r{k}); c{k} = int(c{k})')
    for d, want in slot.const_dims:
        w.miss_unless(f'{("r", "c")[d]}{k} == {want}')
    w.miss_unless(f'r{k} <= {slot.imax} and c{k} <= {slot.imax}')
    torch = slot.source == 'torch'
    if torch:
        vdt = w.const(f'VDT{k}', _torch_attr(slot.vals_dtype.name))
        idt = w.const(f'IDT{k}', _torch_attr(slot.index_dtype.name))
        ptr = '{}.data_ptr()'.format
    else:
        vdt, idt = w.const(f'VDT{k}', slot.vals_dtype), w.const(f'IDT{k}', slot.index_dtype)
        ptr = _OBJECT.format if bit is not None and spans is None and HEADER_OFFSET else 'dp({})'.format
    # (a torch view with the conjugate or negative bit has no NumPy view: the generic walk fails on it)
    extra = f' and vals_{k}.numel() <= {slot.imax} and not vals_{k}.is_conj() and not vals_{k}.is_neg()' if torch \
        else f' and vals_{k}.size <= {slot.imax}'
    _array_ok(w, f'vals_{k}', vdt, extra, torch)
    for m in ('crd1', 'pos1'):  # the generic walk's order of the index members does not matter: all must pass
        _array_ok(w, f'{m}_{k}', idt, torch=torch)
    w.put(f'n1_{k} = crd1_{k}.shape[0]')
    # the storage check (fastcheck.StorageCheck for this format)
    names = {'_rows': f'r{k}', '_cols': f'c{k}', 'n1': f'n1_{k}'}
    r, c = sympy.Symbol('_rows', integer=True), sympy.Symbol('_cols', integer=True)
    fmt = slot.fmt
    counts = fmt.counts(r, c, {'n1': sympy.Symbol('n1', integer=True)})
    extent = fmt.extents(r, c)[1]
    lvl = fmt.levels[1]
    parent = f'parent{k}'
    w.put('if VALIDATE["on"]:')
    w.put(f'{parent} = {_source(counts[0], names)}', 2)
    w.put(f'if vals_{k}.shape[0] != {_source(counts[-1], names)} or pos1_{k}.shape[0] != {parent} + 1: return MISS',
          2)
    if bit is None:
        check = w.const(f'CHECK{k}', slot.check.native['compressed'])
        call = (f'{check}({ptr(f"pos1_{k}")}, {parent}, {ptr(f"crd1_{k}")}, n1_{k}, {_source(extent, names)}, '
                f'{bool(lvl.ordered)}, {bool(lvl.unique)}) == 0')
        check_lines = [f'if not ({call}): return MISS']
    else:  # the entry checks it before the program runs
        check_lines = [f'checks |= {1 << bit}']
    if slot.in_kernel_from is None:
        for line in check_lines:
            w.put(line, 2)
    else:  # the kernels check the entries of large arguments themselves (kernel_checks)
        w.put(f'if n1_{k} * {slot.index_size} < {slot.in_kernel_from}:', 2)
        for line in check_lines:
            w.put(line, 3)
        w.put('else:', 2)
        w.miss_unless(f'pos1_{k}[0] == 0 and pos1_{k}[{parent}] == n1_{k}', 3)
        w.put('in_kernel = True', 3)
    if bit is not None:
        w.put('else:')
        w.put(f'{parent} = 0', 2)
    values = {'rows': f'r{k}', 'cols': f'c{k}', 'n1': f'n1_{k}'}
    for sym, key in slot.symbols:
        if sym in defined:
            w.miss_unless(f's[{sym!r}] == {values[key]}')
        else:
            w.put(f's[{sym!r}] = {values[key]}')
            defined.add(sym)
    if spans is not None:  # the members' pointers as locals: the struct and the overlap check read them
        spans[slot.index] = []
        for m in ('pos1', 'crd1', 'vals'):
            size = f'{m}_{k}.numel() * {m}_{k}.element_size()' if torch else f'{m}_{k}.nbytes'
            w.put(f'q{m}_{k} = {ptr(f"{m}_{k}")}; z{m}_{k} = q{m}_{k} + {size}')
            spans[slot.index].append((f'q{m}_{k}', f'z{m}_{k}'))
        ptr = 'q{}'.format
    fields = [ptr(f'{f}_{k}') if is_array else values[f] for f, is_array in slot.fields]
    if bit is not None:
        return fields + [parent, f'n1_{k}', _source(extent, names)]
    w.put(f'st{k} = {w.const(f"STRUCT{k}", slot.struct_cls)}({", ".join(fields)})')
    return f'addressof(st{k})'


def _dense(w: _Writer, k: int, slot, spans: Optional[dict], objects: bool = False) -> str:
    v = f'a{k}'
    w.put(f'{v} = args[{slot.index}]')
    if slot.torch is not None:
        cls, dtype, strided = slot.torch
        strided = w.const('STRIDED', strided)
        w.miss_unless(f'type({v}) is {w.const(f"TCLS{k}", cls)} and {v}.dtype == {w.const(f"TDT{k}", dtype)} and '
                      f'{v}.dim() == {slot.ndim} and {v}.is_cpu and {v}.layout is {strided} and {v}.is_contiguous()')
        pointer = f'{v}.data_ptr()'
    else:
        dt = w.const(f'DDT{k}', slot.dtype)
        w.miss_unless(f'type({v}) is ndarray and ({v}.dtype is {dt} or {v}.dtype == {dt}) and '
                      f'{v}.ndim == {slot.ndim} and {v}.flags.c_contiguous')
        pointer = _OBJECT.format(v) if objects and spans is None else f'dp({v})'
    if spans is not None:
        size = f'{v}.numel() * {v}.element_size()' if slot.torch is not None else f'{v}.nbytes'
        w.put(f'q{k} = {pointer}; z{k} = q{k} + {size}')
        spans[slot.index] = [(f'q{k}', f'z{k}')]
        pointer = f'q{k}'
    for j, (d, sym, fn) in enumerate(slot.dims):
        if sym is not None:
            w.put(f's[{sym!r}] = {v}.shape[{d}]')
        else:
            w.miss_unless(f'{_size(w, f"DIM{k}_{j}", fn)} == {v}.shape[{d}]')
    return pointer


def _scalar(w: _Writer, k: int, slot, spans: Optional[dict], entry: bool = False) -> str:
    v = f'a{k}'
    w.put(f'{v} = args[{slot.index}]')
    w.miss_unless(f'type({v}) is {w.const(f"KIND{k}", slot.kind)}')
    if entry:  # the record holds it as an int64 or a double (a value outside: StructError)
        return v
    return f'{w.const(f"CTYPE{k}", slot.ctype)}({v})'


def specialise(plan) -> Optional[Callable]:
    """``run(args)`` for ``plan`` (a :class:`~sdfgsparse.runtime.plan.CallPlan`), or None
    when the plan has a part only the generic walk does (see the module)."""
    if plan.capacities or not all(_plain_compressed(s) for s in plan.sparse_slots) or \
            not all(isinstance(r, DenseReturn) for _, r in plan.returns):
        return None
    w = _Writer()
    w.env.update(MISS=MISS, VALIDATE=marshal.VALIDATE, dp=data_pointer, addressof=ctypes.addressof,
                 ndarray=np.ndarray, empty=np.empty, hooks=hooks, CSDFG=plan.csdfg, LIB=plan.lib, FUNC=plan.func)
    w.put('if CSDFG._lib._lib is not LIB or not CSDFG._initialized or CSDFG.do_not_execute or '
          'hooks._COMPILED_SDFG_CALL_HOOKS: return MISS')
    w.put(f's = {dict(plan.constants)!r}')
    w.put('in_kernel = False')
    entry = plan.entry
    if entry is not None:
        w.put('checks = 0')
    ptrs = {}
    defined = set(plan.constants)
    spans = {} if plan.written else None
    for k, slot in enumerate(plan.sparse_slots):
        bit = None if entry is None else entry.sparse.index(slot.name)
        ptrs[slot.index] = _sparse(w, k, slot, defined, spans, bit)
    for k, slot in enumerate(plan.dense_slots, start=len(plan.sparse_slots)):
        assert isinstance(slot, (ScalarSlot, DenseSlot))
        if isinstance(slot, ScalarSlot):
            ptrs[slot.index] = _scalar(w, k, slot, spans, entry is not None)
        else:
            ptrs[slot.index] = _dense(w, k, slot, spans, entry is not None and bool(HEADER_OFFSET))
    if spans is not None:  # a written argument sharing memory with another: the full path copies it
        crossings = [f'({s0} < {e1} and {s1} < {e0})' for i in plan.written for s0, e0 in spans.get(i, ())
                     for o, ranges in spans.items() if o != i for s1, e1 in ranges]
        if crossings:
            w.put(f'if {" or ".join(crossings)}: return MISS')
    for j, (fa, fb) in enumerate(plan.shape_rules):
        w.miss_unless(f'{_size(w, f"RULE{j}A", fa)} == {_size(w, f"RULE{j}B", fb)}')
    shapes = {}
    for j, (_, ret) in enumerate(plan.returns):
        shape = ', '.join(_size(w, f'RSHAPE{j}_{d}', fn) for d, fn in enumerate(ret.shape))
        shapes[j] = f'({shape}{"," if len(ret.shape) == 1 else ""})'
    if plan.returns:  # out= (runtime/outputs.py): the caller's arrays where they fit exactly
        w.env['PLAN_OUTPUTS'] = plan_outputs
        specs = ', '.join(f'({w.const(f"RDT{j}", plan.returns[j][1].dtype)}, {shapes[j]})' for j in plan.result_order)
        w.put('if out is not None:')
        w.put(f'outs = PLAN_OUTPUTS(out, args, ({specs},))', 2)
        w.put('if outs is None: return MISS', 2)
        for pos, j in enumerate(plan.result_order):
            w.put(f'ret{j} = outs[{pos}] if outs[{pos}] is not None else empty({shapes[j]}, RDT{j})', 2)
        w.put('else:')
        for j in range(len(plan.returns)):
            w.put(f'ret{j} = empty({shapes[j]}, RDT{j})', 2)
    else:
        w.put('if out is not None: return MISS')  # (the full path names the error)
    args = ['CSDFG._libhandle']
    objects = entry is not None and spans is None and bool(HEADER_OFFSET)
    for kind, key in plan.sources:
        source = ptrs[key] if kind == 0 else (_OBJECT if objects else 'dp({})').format(f'ret{key}') if kind == 1 \
            else f's[{key!r}]'
        args.extend(source if isinstance(source, list) else [source])
    if entry is None:
        call = f'FUNC({", ".join(args)})'
    else:  # one foreign call: the entry assembles the structs, checks, and runs the program
        # (NumPy arrays go as their objects' addresses, whose data pointers the entry reads)
        # (the mask has 64 bits: an array in a later slot goes as its data pointer)
        params = [f'dp({a[3:-1]})' if j >= 64 and a.startswith('id(') else a for j, a in enumerate(args[1:])]
        mask = sum(1 << j for j, a in enumerate(params) if a.startswith('id('))
        w.env.update(ENTRY=entry.func, RECORD=entry.record.pack, StructError=struct.error)
        w.put('try:')
        w.put(f'record = RECORD({args[0]}.value, checks, {mask}, {HEADER_OFFSET or 0}, {", ".join(params)})', 2)
        w.put('except StructError:')  # a value outside its slot: the full path decides
        w.put('return MISS', 2)
        call = 'if ENTRY(record): return MISS'
    if plan.failures is not None:
        w.env['FAILURES'] = plan.failures
        w.put('if in_kernel:')
        w.put('before = FAILURES()', 2)
        w.put(call, 2)
        w.put('if FAILURES() != before: return MISS', 2)
        w.put('else:')
        w.put(call, 2)
    else:
        w.put(call)
    if not plan.returns:
        w.put('return None')
    else:
        results = [f'ret{j}' for j in plan.result_order]
        res = results[0] if len(results) == 1 else f'({", ".join(results)})'
        if len(results) == 1:  # out=(y,): the result as a tuple, as NumPy's ufuncs give it
            res = f'({res},) if type(out) is tuple else {res}'
        if plan.torch_out:
            w.env['to_torch'] = to_torch
            res = f'to_torch({res})'
        w.put(f'return {res}')
    source = 'def run(args, out=None):\n' + '\n'.join(w.lines) + '\n'
    namespace = dict(w.env)
    exec(compile(source, f'<sdfgsparse-call-plan-{id(plan):x}>', 'exec'), namespace)  # noqa: S102 (our source)
    run = namespace['run']
    run.source = source
    return run
