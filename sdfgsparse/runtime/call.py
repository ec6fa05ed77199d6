"""Calling programs and SDFGs with scipy / torch sparse arguments.

:func:`marshal_arguments` turns a ``{name: value}`` call into what DaCe accepts: sparse
values become argument structs, and the symbols they determine (shape, number of stored
entries, ...) are returned for the call. It also checks dense arguments against the
symbols the sparse ones fixed, so a wrong length is an error, not a wild read.

:func:`call_program` is what ``@dace.program`` calls go through once sdfgsparse is
imported (see :mod:`sdfgsparse._dace_compat`); :class:`CompiledProgram` (``ss.compile``)
does the same for an SDFG object.
"""
import copy
import threading
from typing import Any, Dict, Optional, Tuple

import dace
import numpy as np

from sdfgsparse import errors
from sdfgsparse._dace_compat import lock_of
from sdfgsparse._symbolic import evaluate
from sdfgsparse._warnings import benign_dace_warnings
from sdfgsparse.formats import is_sparse_desc, sparse_type_of
from sdfgsparse.runtime.aliasing import ArgumentAccess, access_of, check_after, separate
from sdfgsparse.runtime.marshal import SparseArg, _torch_layout, is_sparse_value, marshal_sparse
from sdfgsparse.runtime.plan import MISS, build_plan
from sdfgsparse.runtime.results import to_torch

__all__ = ['marshal_arguments', 'call_program', 'CompiledProgram', 'compile']


def _merge(symbols: Dict[str, int], origin: Dict[str, str], name: str, value: int, argname: str, what: str):
    if name in symbols and symbols[name] != value:
        raise errors.ShapeError(f'{argname}: {what} is {value}, but {origin[name]} fixed {name} = {symbols[name]}')
    symbols[name] = int(value)
    origin.setdefault(name, argname)


def marshal_arguments(values: Dict[str, Any], descs: Dict[str, Optional[dace.data.Data]]
                      ) -> Tuple[Dict[str, Any], Dict[str, int], Dict[str, SparseArg], Dict[str, Any]]:
    """Validate and translate call arguments.

    :param values: argument name -> value as the user passed it.
    :param descs: argument name -> expected descriptor (None where unannotated).
    :return: (translated values, symbol values, sparse arguments by name, dense arguments
             passed as a C-ordered copy: name -> the caller's array).
    """
    out = dict(values)
    symbols: Dict[str, int] = {}
    origin: Dict[str, str] = {}
    sparse: Dict[str, SparseArg] = {}
    copies: Dict[str, Any] = {}
    for name, v in values.items():
        desc = descs.get(name)
        if is_sparse_value(v):
            if desc is not None and not is_sparse_desc(desc):
                raise errors.FormatMismatchError(f'{name}: a sparse matrix was passed where the program expects a '
                                                 f'dense {desc}; pass {name}.toarray()')
            st = sparse_type_of(desc) if desc is not None else None
            arg = marshal_sparse(name, v, st)
            for s, val in arg.symbol_values().items():
                _merge(symbols, origin, s, val, name, f'symbol {s}')
            out[name] = arg.make_struct(desc if desc is not None else arg.type.structure())
            sparse[name] = arg
        elif desc is not None and is_sparse_desc(desc):
            raise errors.FormatMismatchError(f'{name}: the program expects a sparse matrix '
                                             f'({sparse_type_of(desc)!r}), got {type(v).__name__}')
        else:
            out[name] = dense_argument(name, v, desc)
            if out[name] is not v:
                copies[name] = v
    for name, v in values.items():
        desc = descs.get(name)
        if not isinstance(desc, dace.data.Array) or isinstance(desc, dace.data.View) or not hasattr(v, 'shape'):
            continue
        shape = tuple(v.shape)
        if len(shape) != len(desc.shape):
            raise errors.ShapeError(f'{name}: has {len(shape)} dimensions {shape}, the program expects '
                                    f'{len(desc.shape)} ({", ".join(map(str, desc.shape))})')
        for expr, actual in zip(desc.shape, shape):
            if dace.symbolic.issymbolic(expr) and expr.is_Symbol and str(expr) not in symbols:
                _merge(symbols, origin, str(expr), actual, name, f'dimension {expr}')
                continue
            want = evaluate(expr, symbols)
            if want is not None and want != actual:
                src = ', '.join(f'{s} = {symbols[s]} (from {origin[s]})' for s in sorted(map(str, getattr(
                    expr, 'free_symbols', ()))) if s in symbols)
                raise errors.ShapeError(f'{name}: has shape {shape}, the program expects '
                                        f'({", ".join(map(str, desc.shape))}) with {src or expr}')
    for name, v in values.items():  # a symbol given by keyword must agree with the arguments that fix it
        if name in symbols and descs.get(name) is None and origin.get(name) != name and _is_integer(v) \
                and int(v) != symbols[name]:
            raise errors.ShapeError(f'{name}: given as {int(v)}, but {origin[name]} fixed {name} = {symbols[name]}')
    return out, symbols, sparse, copies


def _is_integer(v) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, bool)


#: Values that are never a dense argument (the kernel would read garbage or DaCe fail late).
_NOT_DENSE = (str, bytes, bytearray, list, tuple, dict, set, frozenset, type(None))
_NUMBER = (bool, int, float, complex, np.number, np.bool_)


def dense_argument(name: str, v, desc: Optional[dace.data.Data]):
    """What to pass for the non-sparse argument ``v`` where the program expects ``desc``
    (None: unannotated): ``v`` itself, or a C-ordered copy of a NumPy array or torch tensor
    in another layout (Fortran order, a strided or offset view). The kernels index dense
    operands in C order, and DaCe passes an array's pointer whatever its strides: an
    F-ordered ``B`` in ``A @ B`` gave wrong results without an error. Raises a typed error
    for what cannot be passed: another dtype, a sparse or non-CPU tensor, and a string,
    None, a list or a tuple where an array or a number belongs."""
    lay = _torch_layout(v)
    if isinstance(desc, dace.data.Scalar):
        if isinstance(v, _NUMBER) or (isinstance(v, np.ndarray) and v.ndim == 0):
            return v
        raise errors.ArgumentError(f'{name}: expected a number ({desc.dtype.to_string()}), '
                                   f'got {_kind(v)}')
    array = isinstance(desc, dace.data.Array) and not isinstance(desc, dace.data.View)
    if lay is None and not isinstance(v, np.ndarray):
        if array:
            raise errors.ArgumentError(f'{name}: expected a NumPy array or torch tensor of '
                                       f'{np.dtype(desc.dtype.as_numpy_dtype()).name} with shape '
                                       f'({", ".join(map(str, desc.shape))}), got {_kind(v)}')
        if isinstance(v, _NOT_DENSE):
            raise errors.ArgumentError(f'{name}: expected a NumPy array, a torch tensor or a number, got {_kind(v)}'
                                       + ('; pass np.asarray(...)' if isinstance(v, (list, tuple)) else ''))
        return v
    want = np.dtype(desc.dtype.as_numpy_dtype()) if array else None
    if lay is not None:
        if lay != 'strided':
            raise errors.FormatMismatchError(f'{name}: a torch tensor with layout {lay} where the program expects '
                                             f'a dense array; pass {name}.to_dense()')
        if v.device.type != 'cpu':
            raise errors.SparseError(f'{name}: the tensor is on {v.device}; the CPU program needs {name}.cpu()')
        got = str(v.dtype).replace('torch.', '')
        if want is not None and got != want.name:
            raise errors.DTypeError(f'{name}: dtype is {got}, the program expects {want.name}; '
                                    f'pass {name}.to(torch.{want.name})')
        if v.is_conj() or v.is_neg():  # lazy conjugate / negative views: the bits are not the values
            v = v.resolve_conj().resolve_neg()
        return v if v.is_contiguous() else v.contiguous()
    if want is not None and v.dtype != want:
        raise errors.DTypeError(f'{name}: dtype is {v.dtype}, the program expects {want}; '
                                f'pass {name}.astype(np.{want.name})')
    if not v.dtype.isnative:
        raise errors.DTypeError(f'{name}: dtype {v.dtype.str} is not in this machine\'s byte order; '
                                f'pass {name}.astype({v.dtype.newbyteorder("=").name})')
    if v.flags.c_contiguous and v.base is None:
        return v
    # DaCe refuses every NumPy view, and reads any other layout as C-ordered
    return np.array(v, order='C', copy=True)


def _kind(v) -> str:
    if v is None:
        return 'None'
    if isinstance(v, (str, bytes)):
        return f'a {type(v).__name__} ({v[:20]!r})'
    return f'a {type(v).__name__}'


def copy_back(copies: Dict[str, Any], out: Dict[str, Any], written) -> None:
    """Write the results of dense arguments the program wrote into their copies back into
    the caller's arrays (:func:`dense_argument`)."""
    for name, orig in copies.items():
        if name not in written:
            continue
        if isinstance(orig, np.ndarray):
            np.copyto(orig, out[name])
        elif hasattr(orig, 'copy_'):  # torch
            orig.copy_(out[name])
        else:  # CuPy
            orig[...] = out[name]


def written_arguments(sdfg: dace.SDFG) -> frozenset:
    """Names of the SDFG's arguments that it writes (from its :class:`ArgumentAccess`,
    computed once per SDFG object)."""
    return access_of(sdfg).written & frozenset(sdfg.arg_names)


def _dense_shape_symbols(descs: Dict[str, dace.data.Data], values: Dict[str, Any], symbols: Dict[str, int]) -> None:
    """Add to ``symbols`` the sizes of dense arguments whose dimension is a plain symbol
    (symbols already known are kept)."""
    for name, desc in descs.items():
        if isinstance(desc, dace.data.Array) and hasattr(values[name], 'shape') and not is_sparse_desc(desc):
            for expr, actual in zip(desc.shape, values[name].shape):
                if dace.symbolic.issymbolic(expr) and expr.is_Symbol:
                    symbols.setdefault(str(expr), int(actual))


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


def call_program(prog, orig_call, args, kwargs):
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
    waits for the first one's build and then takes its plan instead of parsing again."""
    plans = prog.__dict__.get('_ss_plans')
    if plans:
        result = _run_plans(plans, prog.argnames, args, kwargs)
        if result is not MISS:
            return result
    names = list(prog.argnames)
    params = prog.signature.parameters
    values = _bind(f'{prog.name}()', names, args, kwargs,
                   optional={n for n, p in params.items() if p.default is not p.empty})
    descs = _program_descs(prog)
    if not any(is_sparse_value(v) for v in values.values()) and \
            not any(d is not None and is_sparse_desc(d) for d in descs.values()):
        return orig_call(prog, *args, **kwargs)
    with lock_of(prog):
        if not plans and prog.__dict__.get('_ss_plans'):  # built while this thread waited
            result = _run_plans(prog.__dict__['_ss_plans'], prog.argnames, args, kwargs)
            if result is not MISS:
                return result
        return _full_call(prog, orig_call, names, values, descs, args, kwargs)


def _bind(what: str, names, args, kwargs, optional=(), keep_others=False) -> Dict[str, Any]:
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


def _full_call(prog, orig_call, names, values, descs, args, kwargs):
    out, symbols, sparse, copies = marshal_arguments(values, descs)
    torch_in = any(_torch_layout(v) is not None for v in values.values())
    fast = prog.__dict__.setdefault('_ss_fast', {})
    key = _call_key(out, descs) if len(values) == len(names) and set(kwargs) <= set(names) else None
    entry = fast.get(key) if key is not None else None
    # written arguments sharing memory with others: computed through copies (runtime/aliasing.py)
    pairs = separate(out, copies, access_of(entry[0].sdfg) if entry is not None else None, sparse)
    if entry is not None:
        csdfg, needed = entry
        call = {k: v for k, v in out.items() if k in needed}
        call.update({k: v for k, v in symbols.items() if k in needed})
        result = csdfg(**call)
    else:
        prog.symbols |= set(symbols)
        newargs = [out[n] for n in names[:len(args)]]
        newkw = {k: out.get(k, v) for k, v in kwargs.items()}
        newkw.update(symbols)
        with benign_dace_warnings():  # the first call of a signature: parsed and built
            result = orig_call(prog, *newargs, **newkw)
        csdfg = _compiled_for(prog, out)
        if key is not None:
            _remember(prog, fast, key, out, symbols, csdfg)
        if pairs and csdfg is not None:
            check_after(pairs, access_of(csdfg.sdfg), sparse)
    if copies:
        copy_back(copies, out, written_arguments(csdfg.sdfg) if csdfg is not None else copies)
    if key is not None and key in fast:
        _add_plan(prog, fast[key][0], key, names, descs, values, out, sparse, torch_in)
    return to_torch(result) if torch_in else result


def _run_plans(plans, argnames, args, kwargs):
    """The result of the first plan that finishes the call, or MISS. Plans are keyed by the
    types of *all* arguments, so a call that leaves some out matches none."""
    pos = args if not kwargs else _positional(argnames, args, kwargs)
    if pos is None:
        return MISS
    for plan in plans.get(_raw_key(pos), ()):
        result = plan.run(pos)
        if result is not MISS:
            return result
    return MISS


def _raw_key(args) -> tuple:
    """What selects a plan, read straight from the arguments: type and dtype of each."""
    return tuple([(type(v), getattr(v, 'dtype', None)) for v in args])


def _positional(argnames, args, kwargs) -> Optional[tuple]:
    """All arguments in order when the call names exactly the remaining parameters."""
    rest = argnames[len(args):]
    if len(rest) != len(kwargs) or not all(n in kwargs for n in rest):
        return None
    return tuple(args) + tuple(kwargs[n] for n in rest)


def _add_plan(prog, csdfg, key, names, descs, values, out, sparse, torch_in):
    """Offer the plan of this compiled signature (built once) to later calls whose
    arguments have the same types and dtypes. Several plans can share those (a torch
    CSR and a torch CSC tensor); each checks the rest itself."""
    raw = _raw_key([values[n] for n in names])
    built = prog.__dict__.setdefault('_ss_plan_built', {})
    if (key, raw) not in built:
        built[(key, raw)] = build_plan(csdfg, names, descs, out, sparse, values, torch_in)
    plan = built[(key, raw)]
    if plan is None:
        return
    plans = prog.__dict__.setdefault('_ss_plans', {})
    have = plans.get(raw, ())
    if plan not in have and len(have) < 8:
        plans[raw] = have + (plan, )


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
    arrays (torch CUDA tensors, CuPy arrays, ``sdfgsparse.targets.cuda.to_device``); a
    call checks that this machine has a CUDA device and that no argument is a host array
    (:class:`~sdfgsparse.errors.DeviceError` naming it) before anything runs. Building
    needs only nvcc, not a GPU.

    >>> prog = ss.compile(sdfg)          # doctest: +SKIP
    >>> y = prog(A=A_scipy, x=x)         # doctest: +SKIP
    """
    #: What it builds for.
    TARGETS = ('cpu', 'gpu', 'fpga')

    def __init__(self, sdfg: dace.SDFG, target: str = 'cpu', design=None):
        if target not in self.TARGETS:
            raise errors.UnsupportedOperationError(f'ss.compile: target {target!r} is not supported (supported: '
                                                   f'{", ".join(self.TARGETS)})')
        if design is not None:
            from sdfgsparse.targets.fpga.streaming import Design
            if target != 'fpga':
                raise errors.UnsupportedOperationError(f'ss.compile: design= is for target=\'fpga\', not {target!r}')
            if not isinstance(design, Design):
                raise errors.ArgumentError(f'ss.compile: design must be a sdfgsparse.targets.fpga.Design, got '
                                           f'{type(design).__name__}')
        if target == 'gpu':
            from sdfgsparse.targets.cuda.lower import is_lowered, to_gpu
            if not is_lowered(sdfg):  # the caller's SDFG is theirs: lower a copy
                sdfg = to_gpu(copy.deepcopy(sdfg))
        #: the SDFG that is generated and built: for 'fpga' the FPGA lowering of a copy
        #: (``sdfg`` keeps the program's signature), for 'gpu' the GPU lowering, for 'cpu'
        #: the program itself
        self.lowered = sdfg
        if target == 'fpga':  # lowered on a copy: self.sdfg keeps the program's signature
            from sdfgsparse.targets.fpga.lower import to_fpga
            self.lowered = to_fpga(copy.deepcopy(sdfg), design)
        self.sdfg = sdfg
        self.target = target
        self._compiled = None

    @property
    def compiled(self):
        if self._compiled is None:
            with lock_of(self):  # one build, whichever thread asks first
                if self._compiled is None:
                    sdfg = self.sdfg
                    if self.target == 'fpga':
                        from sdfgsparse.targets.fpga.csim import compile_csim
                        self._compiled = compile_csim(self.lowered)
                        return self._compiled
                    if self.target == 'gpu':
                        from sdfgsparse.targets.cuda.toolchain import require_nvcc
                        require_nvcc(sdfg.name)
                    else:
                        # dense products take sdfgsparse's expansions, as in @dace.program calls (see
                        # targets.cpu.dense_products.sparse_program_defaults); on a copy: the caller's SDFG is theirs.
                        # (Not for the GPU: those expansions are CPU tasklets.)
                        from sdfgsparse.targets.cpu.dense_products import sparse_program_defaults
                        if sparse_program_defaults(sdfg, apply=False):
                            sdfg = copy.deepcopy(sdfg)
                            sparse_program_defaults(sdfg)
                    with benign_dace_warnings():
                        self._compiled = sdfg.compile()
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
        names = list(self.sdfg.arg_names)
        plans = self.__dict__.get('_plans')
        if plans:  # a warm call of a known signature (see call_program)
            result = _run_plans(plans, names, args, kwargs)
            if result is not MISS:
                return result
        values = _bind(self.sdfg.name, names, args, kwargs, keep_others=True)
        if self.target == 'gpu':
            # without a device, DaCe 1.0.2's GPU library segfaults the process when called
            from sdfgsparse.targets.cuda.device import check_device_arguments
            from sdfgsparse.targets.cuda.toolchain import require_device
            require_device(f'{self.sdfg.name}()')
            check_device_arguments(f'{self.sdfg.name}()', values, self.sdfg)
        with lock_of(self):  # the compiled program keeps a call's arguments and results
            if self.target == 'fpga':
                return self._fpga_call(values)
            return self._full_call(names, values)

    def _fpga_call(self, values):
        """A call of the C-simulation: arguments checked as for the CPU, each sparse one
        passed as the member arrays the lowering flattened it into."""
        from sdfgsparse.runtime.capacity import PREFIX as CAPACITY_PREFIX
        from sdfgsparse.runtime.capacity import fill_capacities
        from sdfgsparse.runtime.results import allocate_return, struct_to_python
        from sdfgsparse.targets.fpga.csim import check_error
        from sdfgsparse.runtime.host_convert import convert
        from sdfgsparse.targets.fpga.lower import converted_arguments, flat_arguments
        descs = {n: self.sdfg.arrays[n] for n in values if n in self.sdfg.arrays}
        out, symbols, sparse, copies = marshal_arguments(values, descs)
        for name, csr in converted_arguments(self.lowered).items():  # streamed as CSR: converted here
            if name in sparse:
                _, more, arg, _ = marshal_arguments({name: convert(sparse[name].value, csr)}, {name: csr})
                sparse[name] = arg[name]
                symbols.update(more)
        separate(out, copies, self._access(), sparse)
        _dense_shape_symbols(descs, values, symbols)
        lowered = self.lowered
        shapes = self.__dict__.get('_fpga_symbols')
        if shapes is None:  # both SDFGs are fixed: their symbols are computed once
            caps = sorted(str(c) for c in self.sdfg.free_symbols if str(c).startswith(CAPACITY_PREFIX))
            shapes = self._fpga_symbols = (caps, set(map(str, lowered.free_symbols)) | set(lowered.symbols))
        caps, needed = shapes
        if caps:  # data-dependent results (SpGEMM): their capacities, from the argument structs
            sized = dict(out)
            fill_capacities(caps, sized)
            symbols.update({c: sized[c] for c in caps})
        flat = flat_arguments(lowered)
        call = {}
        results = {}  # sparse results: allocated here, their members filled by the program
        for name, members in flat.items():
            if name.startswith('__return'):
                results[name] = allocate_return(self.sdfg.arrays[name], symbols)
                for member, array in members.items():
                    call[array] = results[name]._ss_keepalive[member]
        for name, v in out.items():
            if name in flat and name not in results:
                for member, array in flat[name].items():
                    m = sparse[name].arrays[member]
                    call[array] = m if m.base is None else m.copy()  # (DaCe refuses views; the host copies anyway)
            elif name in lowered.arrays:
                call[name] = v
            elif name in needed:
                symbols[name] = v
        call.update({k: v for k, v in symbols.items() if k in needed})
        compiled = self.compiled
        result = compiled(**call)
        check_error(compiled)
        if copies:
            copy_back(copies, out, written_arguments(compiled.sdfg))
        if results:  # the program's results in its order: dense ones as DaCe returns them
            names = sorted((n for n, d in self.sdfg.arrays.items() if n.startswith('__return') and not d.transient),
                           key=lambda n: int(n[len('__return_'):]) if n[len('__return_'):].isdigit() else -1)
            dense = list(result) if isinstance(result, tuple) else [] if result is None else [result]
            whole = [struct_to_python(results[n]) if n in results else dense.pop(0) for n in names]
            result = whole[0] if len(whole) == 1 else tuple(whole)
        if any(_torch_layout(v) is not None for v in values.values()):
            result = to_torch(result)
        return result

    def _full_call(self, names, values):
        descs = {n: self.sdfg.arrays[n] for n in values if n in self.sdfg.arrays}
        device = {}
        if self.target == 'gpu':  # device arrays pass as they are; marshalling takes host values only
            from sdfgsparse.targets.cuda.device import device_argument, is_device_array
            device = {n: v for n, v in values.items() if n in descs and is_device_array(v)
                      and isinstance(descs[n], dace.data.Array)}
            for n, v in device.items():
                device_argument(n, v, descs[n])
        out, symbols, sparse, copies = marshal_arguments({n: v for n, v in values.items() if n not in device},
                                                         {n: d for n, d in descs.items() if n not in device})
        out.update(device)
        separate(out, copies, self._access(), sparse)
        origin = {s: 'another argument' for s in symbols}
        for n, v in device.items():  # their sizes: symbols, or checked against them
            for expr, actual in zip(descs[n].shape, v.shape):
                if dace.symbolic.issymbolic(expr) and expr.is_Symbol:
                    _merge(symbols, origin, str(expr), int(actual), n, f'dimension {expr}')
                elif evaluate(expr, symbols) not in (None, int(actual)):
                    raise errors.ShapeError(f'{n}: has shape {tuple(v.shape)}, the program expects '
                                            f'({", ".join(map(str, descs[n].shape))})')
        needed = self.__dict__.get('_needed')
        if needed is None:  # the SDFG is fixed once compiled: its symbols are computed once
            needed = self._needed = set(map(str, self.sdfg.free_symbols)) | set(self.sdfg.symbols)
        for n, v in values.items():
            if n not in self.sdfg.arrays and n in needed:
                symbols[n] = v
        _dense_shape_symbols(descs, values, symbols)
        call = {k: v for k, v in out.items() if k in self.sdfg.arrays}
        call.update({k: v for k, v in symbols.items() if k in needed})
        compiled = self.compiled
        result = compiled(**call)
        if copies:
            copy_back(copies, out, written_arguments(compiled.sdfg))
        torch_in = any(_torch_layout(v) is not None for v in values.values())
        if set(values) == set(names) and self.target == 'cpu':  # (plans pass host arrays only)
            raw = _raw_key([values[n] for n in names])
            plans = self.__dict__.setdefault('_plans', {})
            if raw not in plans:
                plan = build_plan(compiled, names, descs, out, sparse, values, torch_in)
                plans[raw] = (plan, ) if plan is not None else ()
        if torch_in:
            result = to_torch(result)
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
        sdfg = sdfg.to_sdfg()
    return CompiledProgram(sdfg, target, design=design)
