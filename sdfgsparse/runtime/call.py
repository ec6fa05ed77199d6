"""Calling programs and SDFGs with scipy / torch sparse arguments (their checks and
translation: :mod:`sdfgsparse.runtime.arguments`).

:func:`call_program` is what ``@dace.program`` calls go through once sdfgsparse is
imported (see :mod:`sdfgsparse.runtime.hooks`); :class:`CompiledProgram` (``ss.compile``)
does the same for an SDFG object.
"""
import ast
import inspect
import textwrap
import threading
from typing import Any, Dict, Optional, Tuple

import dace
import numpy as np

from sdfgsparse import errors
from sdfgsparse._symbolic import evaluate
from sdfgsparse._warnings import benign_dace_warnings
from sdfgsparse.formats import is_sparse_desc, mark_ours, own_size_symbols, parsing_ours
from sdfgsparse.runtime.aliasing import ArgumentAccess, access_of, check_after, separate
from sdfgsparse.runtime.arguments import (_dense_shape_symbols, _merge, copy_back, marshal_arguments,
                                          written_arguments)
from sdfgsparse.runtime.marshal import _torch_layout, is_sparse_value
from sdfgsparse.runtime.outputs import OUT, Outputs, call_compiled, check_kinds, specs_of_result, take_out
from sdfgsparse.runtime.plan import MISS, build_plan, dispatch
from sdfgsparse.runtime.results import to_pydata, to_torch
from sdfgsparse.runtime.tensors import is_pydata
from sdfgsparse.runtime.targets import RUNTIMES

__all__ = ['call_program', 'CompiledProgram', 'compile', 'bind_values']


_LOCKS_LOCK = threading.Lock()


def lock_of(obj) -> threading.RLock:
    """The re-entrant lock of ``obj`` (a DaCe program or compiled program, or any object of
    the runtime that keeps per-call state), made on first use and kept in its ``__dict__``."""
    lock = obj.__dict__.get('_ss_lock')
    if lock is None:
        with _LOCKS_LOCK:
            lock = obj.__dict__.setdefault('_ss_lock', threading.RLock())
    return lock


def _annotation_descs(prog) -> Dict[str, Optional[dace.data.Data]]:
    descs = {}
    for name, param in prog.signature.parameters.items():
        ann = param.annotation
        if ann is param.empty:
            descs[name] = None
            continue
        ann = prog._evaluate_annotation(ann)
        try:
            descs[name] = dace.data.create_datadescriptor(ann)
        except Exception:
            descs[name] = None
    own_size_symbols(descs)  # as DaCe's parse gets them (runtime/hooks.py)
    return descs


def _program_descs(prog) -> Dict[str, Optional[dace.data.Data]]:
    descs = prog.__dict__.get('_ss_descs')
    if descs is None:
        descs = prog.__dict__['_ss_descs'] = _annotation_descs(prog)
    return descs


def _call_key(out: Dict[str, Any], descs: Dict[str, Optional[dace.data.Data]]):
    """What decides the compiled program: struct types for sparse arguments, dtype, rank
    and layout for arrays, and the shape of an unannotated array (DaCe compiles it in).
    None when another kind of argument is present."""
    key = []
    for n, v in out.items():
        desc = getattr(v, '__descriptor__', None)
        if desc is not None and hasattr(v, '_ss_arg'):
            key.append((n, desc().name))
        elif isinstance(v, np.ndarray):
            key.append((n, v.dtype.str, v.ndim, v.flags.c_contiguous, None if descs.get(n) else v.shape))
        elif _torch_layout(v) == 'strided':  # passed as it is (dense_argument)
            key.append((n, 'torch', str(v.dtype), v.dim(), v.is_contiguous(), None if descs.get(n) else
                        tuple(v.shape)))
        elif isinstance(v, (bool, int, float, complex, np.number)):
            key.append((n, type(v).__name__))  # a scalar argument: its Python type decides
        else:
            return None
    return tuple(key)


def call_program(prog, orig_call, args, kwargs, tried=False):
    """Run a ``@dace.program`` whose arguments may be sparse.

    The first call of a signature goes through DaCe (parse, compile, DaCe's cache); later
    calls with the same argument types and dtypes run its :class:`~sdfgsparse.runtime.plan.CallPlan`
    (pointers, cheap validation, the compiled function); a call the plan cannot finish
    exactly (a copy, a warning or an error to raise) takes the full path: marshalling and
    validation as above, then the compiled program directly, skipping DaCe's per-call
    descriptor serialisation and symbol solving.

    Threads: plans keep nothing of a call and run concurrently. The full path holds the
    program's lock (:func:`lock_of`): DaCe's program object and its compiled program keep
    the parsed SDFG, the arguments and the return arrays of the last call, so two threads
    there received each other's results; and a second thread making the same first call
    waits for the first one's build and then takes its plan instead of parsing again.

    ``tried``: the hook already ran the one plan of these argument types (it missed)."""
    params = prog.signature.parameters
    out = take_out(kwargs, params) if OUT in kwargs else None  # (runtime/outputs.py)
    plans = prog.__dict__.get('_ss_plans')
    if plans:
        result = _run_plans(plans, prog.argnames, args, kwargs, prog.__dict__.get('_ss_by_type'), out, tried)
        if result is not MISS:
            return result
    names = list(prog.argnames)
    values = bind_values(f'{prog.name}()', names, args, kwargs,
                   optional={n for n, p in params.items() if p.default is not p.empty})
    descs = _program_descs(prog)
    if not any(is_sparse_value(v) for v in values.values()) and \
            not any(d is not None and is_sparse_desc(d) for d in descs.values()):
        if out is not None:
            check_kinds(out)
            with lock_of(prog):
                result = orig_call(prog, *args, **kwargs)
            return Outputs(f'{prog.name}()', out, specs_of_result(result)).finish(result, written=False)
        return orig_call(prog, *args, **kwargs)
    if out is not None:
        check_kinds(out)
    with lock_of(prog):
        if not plans and prog.__dict__.get('_ss_plans'):  # built while this thread waited
            result = _run_plans(prog.__dict__['_ss_plans'], prog.argnames, args, kwargs, out=out)
            if result is not MISS:
                return result
        return _full_call(prog, orig_call, names, values, descs, args, kwargs, out)


def _too_large_constant(prog) -> str:
    """``'the constant C in `line` '`` for the first integer constant of ``prog``'s source
    that no 64-bit integer holds ('' when the source cannot be read)."""
    try:
        source = textwrap.dedent(inspect.getsource(prog.f))
        tree = ast.parse(source)
    except (OSError, TypeError, SyntaxError):
        return ''
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool) \
                and not -2**63 <= node.value < 2**63:
            line = source.splitlines()[node.lineno - 1].strip()
            return f'the constant {node.value} in `{line}` '
    return 'an integer constant '


def bind_values(what: str, names, args, kwargs, optional=(), keep_others=False) -> Dict[str, Any]:
    """``{parameter: value}`` of a call of ``what`` (a name for errors), or
    :class:`~sdfgsparse.errors.ArgumentError` for too many positional arguments, a
    parameter given twice, or one missing that is not ``optional`` (has a default).
    Keyword arguments that name no parameter are symbol values: kept with
    ``keep_others``, else left to DaCe."""
    if len(args) > len(names):
        raise errors.ArgumentError(f'{what} takes {len(names)} arguments ({", ".join(names)}), '
                                   f'{len(args)} were given')
    values = dict(zip(names, args))
    for k, v in kwargs.items():
        if k in values:
            raise errors.ArgumentError(f'{what}: argument {k} given by position and by name')
        if keep_others or k in names:
            values[k] = v
    missing = [n for n in names if n not in values and n not in optional]
    if missing:
        raise errors.ArgumentError(f'{what}: missing argument{"s" if len(missing) > 1 else ""} {", ".join(missing)}')
    return values


def _full_call(prog, orig_call, names, values, descs, args, kwargs, result_out=None):
    out, symbols, sparse, copies = marshal_arguments(values, descs)
    torch_in = any(_torch_layout(v) is not None for v in values.values())
    fast = prog.__dict__.setdefault('_ss_fast', {})
    # symbol values given by name (a slice's bounds, ``prog(A, x, a=2, b=7)``): part of the
    # key by name, passed to the compiled program as the symbols the arguments define are
    given = {k: v for k, v in kwargs.items() if k not in names}
    for k, v in given.items():
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
            raise errors.ArgumentError(f'{prog.name}(): {k}={v!r}: a symbol\'s value must be an integer '
                                       f'({", ".join(names)} are the arguments; other names are symbols)')
    key = None
    if len(values) == len(names):
        key = _call_key(out, descs)
        if key is not None and given:
            key = key + (('symbols', tuple(sorted(given))), )
            symbols = {**symbols, **{k: int(v) for k, v in given.items()}}
    entry = fast.get(key) if key is not None else None
    # written arguments sharing memory with others: computed through copies (runtime/aliasing.py)
    pairs = separate(out, copies, access_of(entry[0].sdfg) if entry is not None else None, sparse)
    outputs = None
    if entry is not None:
        csdfg, needed = entry
        call = {k: v for k, v in out.items() if k in needed}
        call.update({k: v for k, v in symbols.items() if k in needed})
        result, outputs = call_compiled(f'{prog.name}()', csdfg, call, result_out, symbols, values)
    else:
        prog.symbols |= set(symbols)
        newargs = [out[n] for n in names[:len(args)]]
        newkw = {k: out.get(k, v) for k, v in kwargs.items()}
        newkw.update(symbols)
        with benign_dace_warnings():  # the first call of a signature: parsed and built
            try:
                result = orig_call(prog, *newargs, **newkw)
            except OverflowError as exc:  # DaCe's frontend on an integer constant past 64 bits
                raise errors.UnsupportedOperationError(f'{prog.name}(): {_too_large_constant(prog)}does not fit '
                                                       'in a 64-bit integer') from exc
            except TypeError as exc:  # DaCe's words for a symbol the call does not give
                built = _compiled_for(prog, out)
                missing = sorted({str(x) for x in built.sdfg.free_symbols} - set(newkw) - set(out)) \
                    if built is not None and 'cannot be evaluated' in str(exc) else []
                if missing:
                    raise errors.ArgumentError(f'{prog.name}(): missing the value of symbol'
                                               f'{"s" if len(missing) > 1 else ""} {", ".join(missing)} (give it '
                                               f'by name: {prog.name}(..., {missing[0]}=...))') from exc
                raise
        csdfg = _compiled_for(prog, out)
        if key is not None:
            _remember(prog, fast, key, out, symbols, csdfg)
        if pairs and csdfg is not None:
            check_after(pairs, access_of(csdfg.sdfg), sparse)
    if copies:
        copy_back(copies, out, written_arguments(csdfg.sdfg) if csdfg is not None else copies)
    if key is not None and key in fast:
        _add_plan(prog, fast[key][0], key, names, descs, values, out, sparse, torch_in, given)
    if result_out is not None:
        if outputs is None:  # the first call of the signature: DaCe ran it with its own arrays
            outputs = Outputs(f'{prog.name}()', result_out, specs_of_result(result))
            result = outputs.finish(result, written=False)
        else:
            result = outputs.finish(result)
    if torch_in:
        return to_torch(result)
    return to_pydata(result) if any(is_pydata(v) for v in values.values()) else result


def _run_plans(plans, argnames, args, kwargs, by_type=None, out=None, tried=False):
    """The result of the first plan that finishes the call, or MISS. Plans are keyed by the
    types and dtypes of *all* arguments, so a call that leaves some out matches none.
    ``by_type`` (:func:`_add_plan`) holds the same plans by the types alone: where the types
    have one plan, the dtypes can select no other, and that plan runs without reading them
    (unless ``tried``: the caller ran it already)."""
    pos, given = (args, []) if not kwargs else _positional(argnames, args, kwargs)
    if pos is None:
        return MISS
    # symbol values named by the call (positional after the arguments): the plan must name the same
    if by_type:
        same = by_type.get(tuple(map(type, pos)))
        if same is not None and len(same) == 1 and (not given or same[0].given == given):
            if tried and not kwargs and out is None:
                return MISS
            return same[0].run(pos) if out is None else same[0].run(pos, out)
    for plan in plans.get(_raw_key(pos), ()):
        if given and plan.given != given:
            continue
        result = plan.run(pos) if out is None else plan.run(pos, out)
        if result is not MISS:
            return result
    return MISS


def _raw_key(args) -> tuple:
    """What selects a plan, read straight from the arguments: type and dtype of each."""
    return tuple([(type(v), getattr(v, 'dtype', None)) for v in args])


def _positional(argnames, args, kwargs) -> Tuple[Optional[tuple], list]:
    """``(all arguments in order, then the values of the symbols the call names; those
    names, sorted)`` when the call names exactly the remaining parameters and symbols, else
    ``(None, [])``."""
    rest = argnames[len(args):]
    if not all(n in kwargs for n in rest):
        return None, []
    extra = sorted(k for k in kwargs if k not in argnames)
    if len(rest) + len(extra) != len(kwargs):
        return None, []  # a parameter given twice: the full path says so
    return tuple(args) + tuple(kwargs[n] for n in rest) + tuple(kwargs[k] for k in extra), extra


def _add_plan(prog, csdfg, key, names, descs, values, out, sparse, torch_in, given=None):
    """Offer the plan of this compiled signature (built once) to later calls whose
    arguments have the same types and dtypes. Several plans can share those (a torch
    CSR and a torch CSC tensor); each checks the rest itself. ``given``: symbol values
    the call names (positional after the arguments, sorted by name, in the plan's key)."""
    extra = sorted(given or ())
    raw = _raw_key([values[n] for n in names] + [given[k] for k in extra])
    built = prog.__dict__.setdefault('_ss_plan_built', {})
    if (key, raw) not in built:
        built[(key, raw)] = build_plan(csdfg, names, descs, out, sparse, values, torch_in, extra)
    _keep_plan(prog.__dict__, raw, built[(key, raw)])


def _keep_plan(store: dict, raw: tuple, plan) -> None:
    """Keep ``plan`` in ``store`` (the ``__dict__`` of a ``@dace.program`` or of a
    :class:`CompiledProgram`) for :func:`_run_plans`: ``_ss_plans`` by types and dtypes,
    ``_ss_by_type`` by the arguments' types alone (where the types have one plan,
    :func:`_run_plans` runs it without reading dtypes: a dtype costs more to read and hash
    than a type, and every plan checks the dtypes itself)."""
    if plan is None:
        return
    by_type = store.setdefault('_ss_by_type', {})  # (first: a thread that sees plans finds it)
    plans = store.setdefault('_ss_plans', {})
    have = plans.get(raw, ())
    if plan not in have and len(have) < 8:
        plans[raw] = have + (plan, )
        types = tuple(t for t, _ in raw)
        same = by_type.get(types, ())
        if len(same) < 16:
            by_type[types] = same + (plan, )
            # by position, where the types have one plan: its binder, for _binder.dispatch
            warm = store.setdefault('_ss_warm', {})
            if len(by_type[types]) == 1 and not plan.given:
                warm[types] = plan.run
            else:
                warm.pop(types, None)


def _matches(sdfg: dace.SDFG, out: Dict[str, Any]) -> bool:
    for n, v in out.items():
        desc = sdfg.arrays.get(n)
        if desc is None:
            return False
        if hasattr(v, '_ss_arg'):
            if not is_sparse_desc(desc) or desc.name != v.__descriptor__().name:
                return False
        elif isinstance(v, np.ndarray):
            if desc.dtype.as_numpy_dtype() != v.dtype or len(desc.shape) != v.ndim:
                return False
            if any(not dace.symbolic.issymbolic(d) and int(d) != s for d, s in zip(desc.shape, v.shape)):
                return False  # compiled for another length (an unannotated array)
    return True


def _compiled_for(prog, out):
    """The compiled program of DaCe's cache that the call with arguments ``out`` ran."""
    return next((e.compiled_sdfg for e in reversed(list(prog._cache.cache.values()))
                 if e.compiled_sdfg is not None and _matches(e.compiled_sdfg.sdfg, out)), None)


def _remember(prog, fast, key, out, symbols, csdfg):
    """Keep the compiled program of this signature when every argument and symbol it needs
    comes from the call itself (no closure data, no symbol DaCe would have to solve)."""
    if csdfg is None:
        return
    sdfg = csdfg.sdfg
    needed = set(sdfg.arg_names) | {str(s) for s in sdfg.free_symbols}
    from sdfgsparse.runtime.capacity import PREFIX
    provided = set(out) | set(symbols)
    missing = {n for n in needed - provided if not n.startswith(PREFIX) and not n.startswith('__return')}
    if not missing:
        fast[key] = (csdfg, needed)


_LOCKS_LOCK = threading.Lock()


class CompiledProgram:
    """An SDFG compiled once, callable with scipy / torch / NumPy arguments by name.

    ``target='gpu'`` lowers a copy of the SDFG for the GPU
    (:func:`sdfgsparse.targets.cuda.lower.to_gpu`): its array arguments are then device
    arrays (torch CUDA tensors, CuPy arrays, ``ss.to_device``); a
    call checks that this machine has a CUDA device and that no argument is a host array
    (:class:`~sdfgsparse.errors.DeviceError` naming it) before anything runs. Building
    needs only nvcc, not a GPU. What differs per target is in its
    :class:`~sdfgsparse.runtime.targets.Runtime` (:mod:`sdfgsparse.runtime.targets`); this
    class holds no branch on the target.

    >>> prog = ss.compile(sdfg)          # doctest: +SKIP
    >>> y = prog(A=A_scipy, x=x)         # doctest: +SKIP
    """
    #: What it builds for.
    TARGETS = tuple(RUNTIMES)

    def __init__(self, sdfg: dace.SDFG, target: str = 'cpu', design=None):
        if target not in RUNTIMES:
            raise errors.UnsupportedOperationError(f'ss.compile: target {target!r} is not supported (supported: '
                                                   f'{", ".join(self.TARGETS)})')
        runtime = RUNTIMES[target]
        runtime.check_options(design)
        mark_ours(sdfg)  # built by sdfgsparse: its build policy and call behaviour (formats.is_ours)
        #: the SDFG that is generated and built (the FPGA lowering of a copy for 'fpga',
        #: the GPU lowering for 'gpu', the program itself for 'cpu'); ``sdfg`` keeps the
        #: program's signature
        self.sdfg, self.lowered = runtime.lower(sdfg, design)
        self.target = target
        self._runtime = runtime
        self._compiled = None

    @property
    def compiled(self):
        if self._compiled is None:
            with lock_of(self):  # one build, whichever thread asks first
                if self._compiled is None:
                    self._compiled = self._runtime.build(self.sdfg, self.lowered)
        return self._compiled

    def _access(self) -> ArgumentAccess:
        """What the program writes (runtime/aliasing.py), worked out once, on this object:
        the caller may transform their SDFG object and compile it again."""
        found = self.__dict__.get('_ss_access')
        if found is None:
            found = self._ss_access = ArgumentAccess(self.sdfg)
        return found

    def build(self) -> 'CompiledProgram':
        """Generate and compile the code now (otherwise on the first call), without
        running anything; returns self. A GPU program builds without a GPU."""
        self.compiled
        return self

    def __call__(self, *args, **kwargs):
        tried = False
        if not kwargs:  # by position: the binder of the arguments' types, found in C (runtime/hooks.py)
            warm = self.__dict__.get('_ss_warm')
            if warm:
                result = dispatch(warm, args, MISS)
                if result is not MISS:
                    return result
                tried = True
        plans = self.__dict__.get('_ss_plans')
        names = self._ss_names if plans else list(self.sdfg.arg_names)  # (kept when the plans were)
        out = take_out(kwargs, names) if OUT in kwargs else None  # (runtime/outputs.py)
        if plans:  # a warm call of a known signature (see call_program)
            result = _run_plans(plans, names, args, kwargs, self._ss_by_type, out, tried)
            if result is not MISS:
                return result
        values = bind_values(self.sdfg.name, names, args, kwargs, keep_others=True)
        self._runtime.before_call(self.sdfg, values)
        if out is not None:
            if not self._runtime.takes_out:
                raise errors.UnsupportedOperationError(f'{self.sdfg.name}(): out= is supported for CPU programs '
                                                       f'only (this one is built for {self.target})')
            check_kinds(out)
        with lock_of(self):  # the compiled program keeps a call's arguments and results
            if out is not None:
                return self._full_call(names, values, result_out=out)
            return self._runtime.call(self, names, values)

    def _full_call(self, names, values, device=None, result_out=None):
        """The call of the built program with ``values`` bound to ``names``: arguments
        checked and marshalled, symbols derived, results converted back; a warm plan kept
        for the next call of this signature where the runtime keeps plans. ``device``:
        the arguments that are device arrays already (passed as they are)."""
        descs = {n: self.sdfg.arrays[n] for n in values if n in self.sdfg.arrays}
        device = device or {}
        out, symbols, sparse, copies = marshal_arguments({n: v for n, v in values.items() if n not in device},
                                                         {n: d for n, d in descs.items() if n not in device})
        out.update(device)
        self._runtime.prepare(self, sparse, symbols)
        separate(out, copies, self._access(), sparse)
        origin = {s: 'another argument' for s in symbols}
        for n, v in device.items():  # their sizes: symbols, or checked against them
            for expr, actual in zip(descs[n].shape, v.shape):
                if dace.symbolic.issymbolic(expr) and expr.is_Symbol:
                    _merge(symbols, origin, str(expr), int(actual), n, f'dimension {expr}')
                elif evaluate(expr, symbols) not in (None, int(actual)):
                    raise errors.ShapeError(f'{n}: has shape {tuple(v.shape)}, the program expects '
                                            f'({", ".join(map(str, descs[n].shape))})')
        _dense_shape_symbols(descs, values, symbols)
        compiled = self.compiled
        result = self._runtime.invoke(self, compiled, out, sparse, symbols, values, result_out)
        if copies:
            copy_back(copies, out, written_arguments(compiled.sdfg))
        torch_in = any(_torch_layout(v) is not None or hasattr(v, '_ss_torch') for v in values.values())
        if set(values) == set(names) and self._runtime.plans:
            raw = _raw_key([values[n] for n in names])
            built = self.__dict__.setdefault('_ss_plan_built', {})
            if raw not in built:
                self._ss_names = tuple(names)  # (the compiled SDFG's, fixed from now on)
                built[raw] = build_plan(compiled, names, descs, out, sparse, values, torch_in)
                _keep_plan(self.__dict__, raw, built[raw])
        if torch_in:
            result = to_torch(result)
        elif any(is_pydata(v) for v in values.values()):
            result = to_pydata(result)
        return result


def compile(sdfg: dace.SDFG, target: str = 'cpu', design=None) -> CompiledProgram:
    """Compile an SDFG (e.g. after transformations) or a ``@dace.program`` into a callable
    taking sparse arguments. The code is built on the first call, or now with ``.build()``.

    :param target: ``'cpu'``, ``'gpu'`` (CUDA; array arguments are device arrays, see
                   :class:`CompiledProgram`), or ``'fpga'`` (Xilinx HLS through DaCe, run as a
                   C-simulation: :mod:`sdfgsparse.targets.fpga`).
    :param design: for ``'fpga'``, the streaming design of CSR products
                   (:class:`sdfgsparse.targets.fpga.Design`: vector width, accumulators,
                   multi-pumping factor); ``ss.optimize`` chooses one from its model.
    """
    if hasattr(sdfg, 'to_sdfg') and not isinstance(sdfg, dace.SDFG):
        with parsing_ours():
            sdfg = sdfg.to_sdfg()
    return CompiledProgram(sdfg, target, design=design)
