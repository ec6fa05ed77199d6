"""A call's arguments: checked, and translated into what DaCe accepts.

:func:`marshal_arguments` turns a ``{name: value}`` call into DaCe's arguments: sparse
values become argument structs, and the symbols they determine (shape, number of stored
entries, ...) are returned for the call. It also checks dense arguments against the
symbols the sparse ones fixed, so a wrong length is an error, not a wild read. Every path
that calls a built program (:mod:`sdfgsparse.runtime.call`, the targets' runtimes in
:mod:`sdfgsparse.runtime.targets`) binds its arguments through these functions.
"""
from typing import Any, Dict, Optional, Tuple

import dace
import numpy as np

from sdfgsparse import errors
from sdfgsparse._symbolic import evaluate
from sdfgsparse.formats import is_sparse_desc, sparse_type_of
from sdfgsparse.runtime.aliasing import access_of
from sdfgsparse.runtime.marshal import SparseArg, _torch_layout, is_sparse_value, marshal_sparse

__all__ = ['marshal_arguments', 'dense_argument', 'copy_back', 'written_arguments']


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
            st = sparse_type_of(desc)
            raise errors.FormatMismatchError(f'{name}: the program expects a sparse '
                                             f'{"matrix" if st.rank == 2 else "tensor"} ({st!r}), '
                                             f'got {type(v).__name__}')
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
