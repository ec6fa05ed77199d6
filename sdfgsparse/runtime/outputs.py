"""``out=``: a program's dense results written into the caller's arrays (NumPy's convention).

``prog(A, x, out=y)`` computes ``prog(A, x)`` into ``y`` and returns ``y``; a program with
several results takes a tuple (``None`` where a result is to be allocated as usual) and
returns the tuple of results. ``out`` is a reserved keyword only where the program has no
parameter of that name. A loop that calls a program many times then reuses one buffer:
a fresh result of many megabytes costs its page faults on every call.

Checked before the program runs, with typed errors naming ``out`` (or ``out[k]``): each
array must be a NumPy array or CPU torch tensor with the result's shape and dtype,
C-ordered, writable and in this machine's byte order; a sparse or scalar result takes no
``out``. An ``out`` that shares memory with an argument is filled by a copy after the
program ran into a fresh array, so the result is the one without ``out`` (as NumPy's
ufuncs do). The first call of a signature (which DaCe parses and builds) also fills
``out`` by a copy; later ones write into it directly, through the signature's warm plan
where its results are dense arrays (:func:`plan_outputs`), else through the full path.
"""
from typing import Any, Dict, List, Optional, Sequence, Tuple

import dace
import numpy as np

from sdfgsparse import errors
from sdfgsparse._symbolic import evaluate
from sdfgsparse.formats import is_sparse_desc
from sdfgsparse.runtime.marshal import _torch_layout, _torch_members

__all__ = ['OUT', 'take_out', 'return_names', 'check_kinds', 'specs_of_sdfg', 'specs_of_result', 'Outputs',
           'call_compiled', 'plan_outputs']

#: The keyword.
OUT = 'out'


def take_out(kwargs: Dict[str, Any], parameters) -> Optional[Any]:
    """Remove and return ``out`` from ``kwargs`` where it is not one of the program's
    ``parameters`` (None: not given, or given as None)."""
    if OUT in kwargs and OUT not in parameters:
        return kwargs.pop(OUT)
    return None


def return_names(sdfg: dace.SDFG) -> List[str]:
    """The program's results in the caller's order (``__return_2`` before ``__return_10``:
    the order in which the call returns them, patch 2 of ``sdfgsparse._dace_compat``)."""
    names = sorted(n for n, d in sdfg.arrays.items() if n.startswith('__return') and not d.transient)
    if len(names) > 1 and all(n[len('__return_'):].isdigit() for n in names):
        names.sort(key=lambda n: int(n[len('__return_'):]))
    return names


def _array(label: str, v) -> np.ndarray:
    if isinstance(v, np.ndarray):
        return v
    if type(v).__module__.split('.')[0] == 'torch' and type(v).__name__ == 'Tensor':
        if str(v.layout) != 'torch.strided':
            raise errors.ArgumentError(f'{label}: a sparse torch tensor; out= takes dense arrays')
        if v.device.type != 'cpu':
            raise errors.ArgumentError(f'{label}: the tensor is on {v.device}; out= of a CPU program takes CPU arrays')
        if v.requires_grad:
            raise errors.ArgumentError(f'{label}: the tensor requires grad; pass {label}.detach() to write into it')
        return v.numpy()
    kind = 'None' if v is None else type(v).__name__
    raise errors.ArgumentError(f'{label}: expected a NumPy array or a CPU torch tensor, got {kind}')


def _label(k: int, given_tuple: bool, count: int) -> str:
    """How errors name result ``k`` of ``out``: ``out`` for one array, else ``out[k]``."""
    return OUT if count == 1 and not given_tuple else f'{OUT}[{k}]'


def check_kinds(out) -> None:
    """Refuse what can never be an ``out`` array, before anything is parsed or built:
    arrays (or None inside a tuple); shapes and dtypes are checked against the results
    once they are known (:class:`Outputs`)."""
    given = out if isinstance(out, tuple) else (out, )
    for k, o in enumerate(given):
        if o is not None or not isinstance(out, tuple):
            _array(_label(k, isinstance(out, tuple), len(given)), o)


def specs_of_sdfg(sdfg: dace.SDFG, symbols: Dict[str, int]) -> List[tuple]:
    """``(name, kind, dtype, shape)`` of each result of a compiled program (kind: 'array',
    'sparse' or 'scalar'; a shape entry None where the symbols do not give it)."""
    specs = []
    for name in return_names(sdfg):
        desc = sdfg.arrays[name]
        kind = 'sparse' if is_sparse_desc(desc) else 'scalar' if isinstance(desc, dace.data.Scalar) else 'array'
        dtype = np.dtype(desc.dtype.as_numpy_dtype()) if kind == 'array' else None
        shape = tuple(evaluate(s, symbols) for s in desc.shape) if kind == 'array' else None
        specs.append((name, kind, dtype, shape))
    return specs


def specs_of_result(result) -> List[tuple]:
    """The specs of the values a program returned (a call that ran without ``out``)."""
    if result is None:
        return []
    specs = []
    for k, r in enumerate(result if isinstance(result, tuple) else (result, )):
        if isinstance(r, np.ndarray):
            specs.append((f'__return_{k}', 'array', r.dtype, r.shape))
        elif type(r).__module__.split('.')[0] == 'torch' and str(getattr(r, 'layout', '')) == 'torch.strided':
            specs.append((f'__return_{k}', 'array', np.dtype(str(r.dtype).replace('torch.', '')), tuple(r.shape)))
        else:
            specs.append((f'__return_{k}', 'sparse' if hasattr(r, 'format') or hasattr(r, 'layout') else 'scalar',
                          None, None))
    return specs


class Outputs:
    """The ``out`` of one call, checked against the program's results.

    :param what: the program, for messages.
    :param out: what the caller passed as ``out``.
    :param specs: the results (:func:`specs_of_sdfg` before the run, :func:`specs_of_result`
                  after one).
    :param inputs: the call's argument values (an ``out`` sharing memory with one is
                   filled by a copy).
    """

    def __init__(self, what: str, out, specs: List[tuple], inputs: Sequence[Any] = ()):
        if not specs:
            raise errors.ArgumentError(f'{what}: out= was given, but the program returns nothing')
        given = out if isinstance(out, tuple) else (out, )
        if len(given) != len(specs):
            raise errors.ArgumentError(f'{what}: out= holds {len(given)} array{"s" if len(given) != 1 else ""}, '
                                       f'the program returns {len(specs)} value{"s" if len(specs) != 1 else ""}')
        self.tuple = isinstance(out, tuple)
        self.given = given
        self.direct: Dict[str, np.ndarray] = {}  # written by the program itself
        self.copied: Dict[int, np.ndarray] = {}  # result k copied in after the run
        self.names = [n for n, *_ in specs]
        seen: List[Tuple[int, np.ndarray]] = []
        for k, ((name, kind, want, shape), o) in enumerate(zip(specs, given)):
            if o is None:
                continue
            label = _label(k, self.tuple, len(specs))
            if kind == 'sparse':
                raise errors.UnsupportedOperationError(f'{what}: {label}: the result is sparse; out= takes dense '
                                                       'results only')
            if kind == 'scalar':
                raise errors.UnsupportedOperationError(f'{what}: {label}: the result is a scalar; out= takes arrays')
            arr = _array(label, o)
            if arr.dtype != want:
                raise errors.DTypeError(f'{label}: dtype is {arr.dtype}, the result is {want}')
            if None not in shape and tuple(arr.shape) != tuple(int(s) for s in shape):
                raise errors.ShapeError(f'{label}: has shape {tuple(arr.shape)}, the result has shape '
                                        f'{tuple(int(s) for s in shape)}')
            if not arr.flags.c_contiguous:
                raise errors.ArgumentError(f'{label}: not C-ordered (a strided view or Fortran order); out= takes '
                                           'C-ordered arrays')
            if not arr.flags.writeable:
                raise errors.ArgumentError(f'{label}: the array is read-only')
            if not arr.dtype.isnative:
                raise errors.DTypeError(f'{label}: dtype {arr.dtype.str} is not in this machine\'s byte order')
            for j, other in seen:
                if np.shares_memory(arr, other):  # one result would overwrite the other
                    raise errors.ArgumentError(f'{what}: {label} shares memory with {_label(j, self.tuple, len(specs))}'
                                               '; each result needs an array of its own')
            seen.append((k, arr))
            if any(_overlaps(arr, v) for v in inputs):
                self.copied[k] = arr
            else:
                self.direct[name] = arr

    @staticmethod
    def forget_shapes(csdfg) -> None:
        """After a call that passed ``__return`` arrays: DaCe 1.0.2 remembers the results it
        was given by name only, and the next call with the same symbols but without them
        failed to allocate them (a ``TypeError`` in ``_initialize_return_values``); its
        next call works the results out again."""
        csdfg._return_syms = None

    def arguments(self) -> Dict[str, np.ndarray]:
        """The ``__return`` arguments of the compiled program's call."""
        return dict(self.direct)

    def finish(self, result, written: bool = True):
        """What the call returns: the caller's ``out`` (a tuple where a tuple was given),
        after copying in every result the program did not write there itself (all of them
        where ``written`` is False: the first call, which DaCe ran with its own arrays)."""
        results = result if isinstance(result, tuple) else (result, )
        for k, (name, o) in enumerate(zip(self.names, self.given)):
            if o is None or (written and name in self.direct):
                continue
            arr = self.direct.get(name, self.copied.get(k))
            np.copyto(arr, np.asarray(results[k]).reshape(arr.shape))
        final = tuple(o if o is not None else r for o, r in zip(self.given, results))
        return final if self.tuple or len(final) > 1 else final[0]


def call_compiled(what: str, csdfg, call: Dict[str, Any], out, symbols: Dict[str, int], values: Dict[str, Any]):
    """``(csdfg(**call), the call's Outputs)``: with ``out`` (None: none given) checked
    against the results and passed as their ``__return`` arguments where it can be."""
    if out is None:
        return csdfg(**call), None
    outputs = Outputs(what, out, specs_of_sdfg(csdfg.sdfg, symbols), list(values.values()))
    call.update(outputs.arguments())
    try:
        return csdfg(**call), outputs
    finally:
        Outputs.forget_shapes(csdfg)


def plan_outputs(out, args, specs) -> Optional[list]:
    """For a warm plan's binder (:mod:`sdfgsparse.runtime.plan`): the array to write each
    result into, in the caller's order (None: allocate), where every array of ``out`` is
    a NumPy array exactly as the result needs it (``specs``: ``(dtype, shape)`` per
    result) and can share no memory with an argument's arrays or another ``out`` array;
    None where the full path must decide (it copies, or raises the typed error).

    Arrays that own their memory, and views whose ``base`` is the array that owns it
    (NumPy collapses chains of views to the owner), are told apart by their owners:
    two different owners never share a byte. Others are compared by their bounds."""
    given = out if type(out) is tuple else (out, )
    if len(given) != len(specs):
        return None
    outs, owners = [], []
    for o, (dtype, shape) in zip(given, specs):
        if o is None:
            continue
        if type(o) is not np.ndarray or (o.dtype is not dtype and o.dtype != dtype) or o.shape != shape:
            return None
        flags = o.flags
        if not flags.c_contiguous or not flags.writeable:
            return None
        b = o.base
        owner = o if b is None else b if type(b) is np.ndarray and b.base is None else None
        for prev, prev_owner in zip(outs, owners):
            if (owner is prev_owner) if owner is not None and prev_owner is not None else \
                    np.may_share_memory(o, prev):
                return None
        outs.append(o)
        owners.append(owner)
    for v in args:
        t = type(v)
        if t is np.ndarray:
            arrays = (v, )
        elif t in _SCALARS:
            continue
        else:
            arrays = _arrays_of(v)
            if arrays is None:
                return None
        for a in arrays:
            b = a.base
            owner = a if b is None else b if type(b) is np.ndarray and b.base is None else None
            for o, o_owner in zip(outs, owners):
                if (owner is o_owner) if owner is not None and o_owner is not None else np.may_share_memory(o, a):
                    return None
    return list(given)


_SCALARS = (int, float, complex, bool, np.float64, np.float32, np.int64, np.int32)


def _arrays_of(v) -> Optional[list]:
    """The NumPy arrays behind an argument (scipy, ``SparseMatrix``, a CPU torch tensor,
    sparse or dense), or None for anything else."""
    names = _SCIPY_ARRAYS.get(getattr(v, 'format', None))  # scipy (before any other attribute: scipy
    if names is not None:                                    # raises inside for a missing one, slowly)
        return [a for a in (getattr(v, n) for n in names) if type(a) is np.ndarray]
    layout = _torch_layout(v)
    if layout is not None:  # (a sparse tensor's members are the NumPy views the call passes)
        if v.device.type != 'cpu':
            return []
        return [v.detach().numpy()] if layout == 'strided' else list(_torch_members(v)[0].values())
    members = getattr(v, 'arrays', None)  # SparseMatrix
    return [a for a in members.values() if type(a) is np.ndarray] if isinstance(members, dict) else None


_SCIPY_ARRAYS = {'csr': ('data', 'indices', 'indptr'), 'csc': ('data', 'indices', 'indptr'),
                 'bsr': ('data', 'indices', 'indptr'), 'coo': ('data', 'row', 'col'), 'dia': ('data', 'offsets')}


def _overlaps(arr: np.ndarray, v) -> bool:
    """Whether ``arr`` shares memory with the argument ``v`` (an array, a torch tensor, a
    sparse matrix's arrays)."""
    if isinstance(v, np.ndarray):
        return np.shares_memory(arr, v)
    return any(np.shares_memory(arr, a) for a in _arrays_of(v) or ())
