"""Sparse tensors of any rank inside ``@dace.program``: contractions, sums, products with
dense arrays and the shape operators NumPy has for N-D arrays.

* ``np.einsum`` with one sparse operand (:class:`~sdfgsparse.ops.einsum.SparseEinsum`, a
  dense result; :class:`~sdfgsparse.ops.einsum_sparse.SparsePrefixEinsum` where the result's
  indices are the sparse operand's outer levels, which keeps it sparse), and what is written
  with it: ``np.tensordot``, ``@`` with a tensor (batched products), ``T * D`` with a dense
  array of T's trailing dimensions (a sparse result on T's pattern), ``T + D`` (dense), sums
  over any axes; ``T + U``, ``T - U``, ``T * U`` of two tensors.
* Shape operators as views (:mod:`sdfgsparse.formats.views`, no storage): ``T.transpose(axes)``
  / ``np.transpose``, ``np.moveaxis``, ``np.swapaxes``, ``np.expand_dims``, ``np.squeeze``,
  reshapes between ranks, slices and integer indices, ``np.stack`` of matrices (their
  concatenation seen as a tensor). The contractions read views directly; a view is made data
  (:class:`~sdfgsparse.ops.materialise.SparseMaterialise`) only where it is returned or read
  by an operation that does not iterate views.

Importing this module registers the functions with :mod:`sdfgsparse.frontends.numpy`
(:data:`~sdfgsparse.frontends.numpy.TENSOR_OPERATIONS`, ``SPARSE_FUNCTIONS``,
``CALLBACK_FUNCTIONS``): that module handles matrices and hands tensors here.
"""
import string

import dace
import numpy as np
import sympy
from dace.frontend.common import op_repository as oprepo

from sdfgsparse import errors
from sdfgsparse.formats import SparseType
from sdfgsparse.formats.counted import counted_coo
from sdfgsparse.formats.views import Reshape, Transpose
from sdfgsparse.frontends import numpy as _np
from sdfgsparse.ops import base
from sdfgsparse.ops.einsum import OUT as EINSUM_OUT
from sdfgsparse.ops.einsum import SparseEinsum, dense_conn, index_extents, parse_spec, result_shape
from sdfgsparse.ops.einsum_sparse import SparsePrefixEinsum, sparse_result
from sdfgsparse.ops.shape_checks import require_equal
from sdfgsparse.ops.tensor_add import SparseTensorAdd
from sdfgsparse.ops.tensor_mul import SparseTensorMul, walked_operand

__all__ = []

_LETTERS = string.ascii_lowercase + string.ascii_uppercase


def _axis(v, rank: int, what: str) -> int:
    """``v`` as a dimension of data of ``rank`` dimensions (NumPy's negative axes too)."""
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or not -rank <= int(v) < rank:
        raise errors.ShapeError(f'{what}: axis {v!r} is out of range for {rank} dimensions')
    return int(v) % rank


def _axes(value, rank: int, what: str) -> tuple:
    items = tuple(value) if isinstance(value, (tuple, list)) else (value, )
    out = tuple(_axis(v, rank, what) for v in items)
    if len(set(out)) != len(out):
        raise errors.ShapeError(f'{what}: repeated axis in {value!r}')
    return out


# ---------------------------------------------------------------------- contractions
def np_einsum(pv, sdfg, state, subscripts, *operands, optimize=False, **kwargs):
    """``np.einsum(subscripts, ...)`` with one sparse operand (a tensor of any rank, or a view
    of one) and dense arrays: a :class:`~sdfgsparse.ops.einsum.SparseEinsum` node into a dense
    result, or a :class:`~sdfgsparse.ops.einsum_sparse.SparsePrefixEinsum` into sparse data
    where the result's indices are the operand's outer levels (``ijk,k->ij``: TTV; a view is
    made data first there). ``optimize`` is a hint NumPy may ignore; ``out``, ``dtype``,
    ``order`` and ``casting`` are not supported here."""
    found = _np._sparse_operands(sdfg, operands)
    if kwargs:
        raise _np._unsupported(f'numpy.einsum with {", ".join(sorted(kwargs))}', found, sdfg)
    if len(found) != 1:
        raise errors.UnsupportedOperationError(
            f'np.einsum: {", ".join(_np._shown(n, sdfg) for n in found)} are sparse; a contraction of one sparse '
            'operand with dense ones is supported (convert the others to dense arrays)')
    text = getattr(subscripts, 'value', subscripts)
    if not isinstance(text, str):
        raise errors.ArgumentError(f'np.einsum: the subscripts must be a string literal, got {subscripts!r}')
    for op in operands:
        if not (isinstance(op, str) and op in sdfg.arrays):
            raise errors.UnsupportedOperationError(f'np.einsum {text!r}: operand {op!r} is not an array of the '
                                                   'program (numbers and expressions: bind them to a name first)')
    sparse = operands.index(found[0])
    spec = parse_spec(text, len(operands), sparse)
    a = found[0]
    if base.concat_of(sdfg, a) is not None:
        a = _np._concat_materialise(sdfg, state, a)
    st = _np._stype(sdfg, a)
    if st.rank != len(spec.inputs[sparse]):
        raise errors.ShapeError(f'np.einsum {text!r}: {_np._shown(a, sdfg)} has {st.rank} dimensions, its '
                                f'subscripts {spec.inputs[sparse]!r} {len(spec.inputs[sparse])}')
    dense = [op for k, op in enumerate(operands) if k != sparse]
    shapes = []
    for op, subs in zip(dense, spec.dense_inputs):
        shape = list(sdfg.arrays[op].shape)
        if len(shape) != len(subs) and not (not subs and shape == [1]):
            raise errors.ShapeError(f'np.einsum {text!r}: operand {op} has {len(shape)} dimensions, its subscripts '
                                    f'{subs!r} {len(subs)}')
        shapes.append(shape)
    ext = index_extents(spec, st.shape, shapes)
    for what, subs, shape in [(_np._shown(a, sdfg), spec.inputs[sparse], st.shape)] + \
            list(zip(dense, spec.dense_inputs, shapes)):
        for c, size in zip(subs, shape):
            require_equal(sdfg, ext[c], size, f'np.einsum {text!r}: index {c} of {what}')
    dtypes = [sdfg.arrays[op].dtype for op in dense]
    dtype = dace.dtypes.result_type_of(st.dtype, *dtypes) if dtypes else st.dtype
    dense_in = {dense_conn(k): op for k, op in enumerate(dense)}
    if _np._is_view(sdfg, a) and st.rank != 2 and sparse_result(spec, counted_coo(st.rank)) is not None:
        a = _np._materialise(sdfg, state, a)  # (a sparse result takes the pattern of stored levels)
        st = _np._stype(sdfg, a)
    fmt = None if _np._is_view(sdfg, a) else sparse_result(spec, st.fmt)
    if fmt is not None:  # the operand's outer levels: sparse, their pattern
        out_type = SparseType(fmt, dtype, tuple(ext[c] for c in spec.output), st.index_dtype,
                              {key: st.sizes[key] for key in fmt.size_keys})
        return _np._insert(state, SparsePrefixEinsum(spec=spec.text, sparse=sparse), {'A': a}, dense_in,
                           sparse_out=('out', out_type, 'einsum'))
    out, _ = sdfg.add_temp_transient(result_shape(spec, ext), dtype)
    return _np._insert(state, SparseEinsum(spec=spec.text, sparse=sparse), {'A': a}, dense_in,
                       dense_out=(EINSUM_OUT, out))


def _contract(sdfg, state, text: str, operands):
    return np_einsum(None, sdfg, state, text, *operands)


def tensor_sum(sdfg, state, a, st, axis):
    """``T.sum(axis)`` of a tensor of rank other than 2 (``axis``: None, an int or a tuple of
    ints, negative ones counted from the end): the contraction of the summed axes
    (:class:`~sdfgsparse.ops.einsum.SparseEinsum`), a dense result as NumPy's and scipy's
    sums (one element for ``axis=None``). Float tensors only (an integer sum accumulates in
    another dtype)."""
    what = f'{_np._shown(a, sdfg)}.sum(axis={axis!r})'
    axes = range(st.rank) if axis is None else (axis if isinstance(axis, (tuple, list)) else (axis, ))
    summed = set()
    for ax in axes:
        if isinstance(ax, bool) or not isinstance(ax, (int, np.integer)) or not -st.rank <= ax < st.rank:
            raise errors.UnsupportedOperationError(f'{what}: axis {ax!r} is not an axis of a rank-{st.rank} tensor')
        summed.add(int(ax) % st.rank)
    if st.dtype not in (dace.float32, dace.float64):
        raise errors.UnsupportedOperationError(f'{what}: sums of {st.dtype} tensors are not supported yet (NumPy '
                                               'accumulates integers in int64); convert the values to floats')
    letters = _LETTERS[:st.rank]
    spec = f'{letters}->' + ''.join(c for d, c in enumerate(letters) if d not in summed)
    out, _ = sdfg.add_temp_transient([st.shape[d] for d in range(st.rank) if d not in summed] or [1], st.dtype)
    return _np._insert(state, SparseEinsum(spec=spec, sparse=0), {'A': a}, dense_out=(EINSUM_OUT, out))


def _rank(sdfg, name) -> int:
    return _np._stype(sdfg, name).rank if _np._sparse_name(sdfg, name) else len(sdfg.arrays[name].shape)


def tensor_matmul(pv, sdfg, state, a, b):
    """``a @ b`` (NumPy's ``matmul``) where one operand is sparse and either has a rank other
    than 2: the product of the last two dimensions, batched over the leading ones (aligned
    from the right, of equal sizes; a 1-D operand is a vector). A contraction."""
    ra, rb = _rank(sdfg, a), _rank(sdfg, b)
    what = f'{_np._shown(a, sdfg) if _np._sparse_name(sdfg, a) else a} @ ' \
        f'{_np._shown(b, sdfg) if _np._sparse_name(sdfg, b) else b}'
    if ra == 0 or rb == 0:
        raise errors.ShapeError(f'{what}: matmul does not take a scalar operand (use *)')
    batch = max(ra, rb, 2) - 2
    letters = iter(_LETTERS)
    bl = [next(letters) for _ in range(max(batch, 0))]
    i, k, j = next(letters), next(letters), next(letters)
    sa = (bl[len(bl) - (ra - 2):] if ra > 2 else []) + ([i, k] if ra >= 2 else [k])
    sb = (bl[len(bl) - (rb - 2):] if rb > 2 else []) + ([k, j] if rb >= 2 else [k])
    out = bl + ([i] if ra >= 2 else []) + ([j] if rb >= 2 else [])
    return _contract(sdfg, state, f'{"".join(sa)},{"".join(sb)}->{"".join(out)}', (a, b))


def tensordot(pv, sdfg, state, a, b, axes=2):
    """``np.tensordot(a, b, axes)`` with one sparse operand: ``axes`` an integer N (the last N
    dimensions of ``a`` with the first N of ``b``) or a pair of axis sequences. A
    contraction whose result holds ``a``'s free dimensions, then ``b``'s."""
    ra, rb = _rank(sdfg, a), _rank(sdfg, b)
    what = f'np.tensordot(..., axes={axes!r})'
    if isinstance(axes, (int, np.integer)) and not isinstance(axes, bool):
        n = int(axes)
        if not 0 <= n <= min(ra, rb):
            raise errors.ShapeError(f'{what}: {n} axes for operands of {ra} and {rb} dimensions')
        xa, xb = tuple(range(ra - n, ra)), tuple(range(n))
    elif isinstance(axes, (tuple, list)) and len(axes) == 2:
        xa, xb = _axes(axes[0], ra, what), _axes(axes[1], rb, what)
        if len(xa) != len(xb):
            raise errors.ShapeError(f'{what}: {len(xa)} axes of the first operand, {len(xb)} of the second')
    else:
        raise errors.ArgumentError(f'{what}: axes must be an integer or a pair of axis sequences')
    letters = iter(_LETTERS)
    sa = [next(letters) for _ in range(ra)]
    sb = [next(letters) for _ in range(rb)]
    for p, q in zip(xa, xb):
        sb[q] = sa[p]
    out = [c for d, c in enumerate(sa) if d not in xa] + [c for d, c in enumerate(sb) if d not in xb]
    return _contract(sdfg, state, f'{"".join(sa)},{"".join(sb)}->{"".join(out)}', (a, b))


def tensor_add_dense(pv, sdfg, state, a, d, sparse_sign=1, dense_sign=1):
    """``T + D``, ``T - D``, ``D - T`` of a sparse tensor and a dense array (NumPy's
    broadcasting): a dense result, T made dense by its contraction ``ijk->ijk`` and DaCe's
    element-wise operation of two arrays."""
    st = _np._stype(sdfg, a)
    letters = _LETTERS[:st.rank]
    dense = _contract(sdfg, state, f'{letters}->{letters}', (a, ))
    state = pv._add_state('tensor_add_dense')  # (after the contraction: it reads its result)
    if dense_sign < 0:
        return oprepo.Replacements.getop('Array', 'Sub', otherclass='Array')(pv, sdfg, state, dense, d)
    op = 'Sub' if sparse_sign < 0 else 'Add'
    return oprepo.Replacements.getop('Array', op, otherclass='Array')(pv, sdfg, state, d, dense)


def tensor_mul_dense(sdfg, state, a, d):
    """``T * D`` of a sparse tensor (rank other than 2) and a dense array of its trailing
    dimensions (NumPy's broadcasting of a lower rank): a sparse result on T's pattern
    (``einsum('ijk,jk->ijk')``)."""
    st = _np._stype(sdfg, a)
    shape = list(sdfg.arrays[d].shape)
    what = f'{_np._shown(a, sdfg)} * {d}'
    if len(shape) > st.rank:
        raise errors.ShapeError(f'{what}: the dense operand has more dimensions ({len(shape)}) than the tensor '
                                f'({st.rank}); the product would be dense')
    letters = _LETTERS[:st.rank]
    return _contract(sdfg, state, f'{letters},{letters[st.rank - len(shape):]}->{letters}', (a, d))


def _elementwise(sdfg, state, a, b, op: str, node, capacity):
    """``a op b`` of sparse data of one shape (a rank other than 2) by ``node`` into a counted
    coordinate list (``PCOO<n>``) of ``capacity(sta, stb)`` entries: the shapes checked (now
    where they are numbers, at the call where they are symbols), concatenations made data,
    int64 coordinates where a reshape may widen them or an operand has them."""
    sta, stb = _np._stype(sdfg, a), _np._stype(sdfg, b)
    what = f'{_np._shown(a, sdfg)} {op} {_np._shown(b, sdfg)}'
    if sta.rank != stb.rank:
        raise errors.ShapeError(f'{what}: operands of {sta.rank} and {stb.rank} dimensions (sparse operands are not '
                                'broadcast)')
    for d, (x, y) in enumerate(zip(sta.shape, stb.shape)):
        require_equal(sdfg, x, y, f'{what}: dimension {d}')
    a, b = (_np._concat_materialise(sdfg, state, x) if base.concat_of(sdfg, x) is not None else x for x in (a, b))
    dtype = dace.dtypes.result_type_of(sta.dtype, stb.dtype)
    out_type = counted_coo(sta.rank).type(dtype, *sta.shape, _np._coordinate_type(sta, stb), n1=capacity(sta, stb))
    return _np._insert(state, node, {'A': a, 'B': b}, sparse_out=('out', out_type, 'elementwise'))


def _entries(st):
    return st.fmt.counts(st.shape, st.sizes)[-1]


def tensor_add(sdfg, state, a, b, sign=1):
    """``T + U`` / ``T - U`` of sparse data of one shape (a rank other than 2): a
    :class:`~sdfgsparse.ops.tensor_add.SparseTensorAdd` (both operands' entries in one
    coordinate list; equal coordinates sum where it is read or returned)."""
    return _elementwise(sdfg, state, a, b, '+' if sign > 0 else '-', SparseTensorAdd(sign=sign),
                        lambda sta, stb: _entries(sta) + _entries(stb))


def tensor_mul(sdfg, state, a, b, sign=1):
    """``T * U`` of sparse data of one shape (a rank other than 2): a
    :class:`~sdfgsparse.ops.tensor_mul.SparseTensorMul` (the product where both hold
    entries; at most the walked operand's entries)."""
    return _elementwise(sdfg, state, a, b, '*', SparseTensorMul(),
                        lambda sta, stb: _entries((sta, stb)[walked_operand(sta, stb)]))


# ---------------------------------------------------------------------- shape operators (views)
def _view(sdfg, a, steps, shown):
    if base.concat_of(sdfg, a) is not None:
        raise errors.UnsupportedOperationError(f'{shown}: a concatenation seen with another rank; bind it with '
                                               'np.stack, or make it data first (np.copy)')
    return base.view_alias(sdfg, a, steps, shown)


def tensor_transpose(pv, sdfg, state, a, axes=None):
    """``np.transpose(T, axes)`` / ``T.transpose(axes)`` / ``T.T``: a view whose dimension ``d``
    is T's dimension ``axes[d]`` (``axes=None``: reversed)."""
    st = _np._stype(sdfg, a)
    shown = f'{_np._shown(a, sdfg)}.transpose({"" if axes is None else axes})'
    if axes is None:
        order = tuple(range(st.rank - 1, -1, -1))
    else:
        order = _axes(axes, st.rank, shown)
        if len(order) != st.rank:
            raise errors.ShapeError(f'{shown}: axes must name each of the {st.rank} dimensions once')
    if order == tuple(range(st.rank)):
        return a
    if st.rank == 2 and base.concat_of(sdfg, a) is not None:
        return _np._transposed(sdfg, a)
    return _view(sdfg, a, [Transpose(order)], shown)


def _transpose_method(pv, sdfg, state, a, *axes):
    if len(axes) == 1 and (axes[0] is None or isinstance(axes[0], (tuple, list))):
        axes = axes[0]
    elif not axes:
        axes = None
    if _np._stype(sdfg, a).rank == 2:
        return _np._np_transpose(pv, sdfg, state, a, axes)
    return tensor_transpose(pv, sdfg, state, a, axes)


def moveaxis(pv, sdfg, state, a, source, destination):
    """``np.moveaxis(T, source, destination)``: a transposition (view)."""
    st = _np._stype(sdfg, a)
    what = f'np.moveaxis({_np._shown(a, sdfg)}, {source!r}, {destination!r})'
    src, dst = _axes(source, st.rank, what), _axes(destination, st.rank, what)
    if len(src) != len(dst):
        raise errors.ShapeError(f'{what}: source and destination must have the same number of axes')
    order = [d for d in range(st.rank) if d not in src]
    for d, s in sorted(zip(dst, src)):
        order.insert(d, s)
    return tensor_transpose(pv, sdfg, state, a, tuple(order))


def swapaxes(pv, sdfg, state, a, axis1, axis2):
    """``np.swapaxes(T, axis1, axis2)`` / ``T.swapaxes``: a transposition (view)."""
    st = _np._stype(sdfg, a)
    what = f'np.swapaxes({_np._shown(a, sdfg)}, {axis1!r}, {axis2!r})'
    p, q = _axis(axis1, st.rank, what), _axis(axis2, st.rank, what)
    order = list(range(st.rank))
    order[p], order[q] = order[q], order[p]
    return tensor_transpose(pv, sdfg, state, a, tuple(order))


def _reshaped(sdfg, state, a, shape, what):
    st = _np._stype(sdfg, a)
    if base.concat_of(sdfg, a) is not None:
        a = _np._concat_materialise(sdfg, state, a)
    return _view(sdfg, a, [Reshape(st.shape, shape)], what)


def expand_dims(pv, sdfg, state, a, axis):
    """``np.expand_dims(T, axis)``: dimensions of size one inserted at ``axis`` (an int or a
    tuple, positions in the result): a reshape (view)."""
    st = _np._stype(sdfg, a)
    what = f'np.expand_dims({_np._shown(a, sdfg)}, {axis!r})'
    rank = st.rank + (len(axis) if isinstance(axis, (tuple, list)) else 1)
    new = _axes(axis, rank, what)
    rest = iter(st.shape)
    shape = [1 if d in new else next(rest) for d in range(rank)]
    return _reshaped(sdfg, state, a, shape, what)


def _is_one(v) -> bool:
    return sympy.simplify(sympy.sympify(v) - 1) == 0


def squeeze(pv, sdfg, state, a, axis=None):
    """``np.squeeze(T, axis)``: dimensions of size one removed (``axis=None``: every dimension
    known to be one; a symbolic dimension is not): a reshape (view)."""
    st = _np._stype(sdfg, a)
    what = f'np.squeeze({_np._shown(a, sdfg)}{"" if axis is None else f", {axis!r}"})'
    if axis is None:
        drop = {d for d, v in enumerate(st.shape) if _is_one(v)}
    else:
        drop = set(_axes(axis, st.rank, what))
        for d in sorted(drop):
            if not _is_one(st.shape[d]):
                raise errors.ShapeError(f'{what}: dimension {d} has size {st.shape[d]}, not one')
    if not drop:
        return a
    shape = [v for d, v in enumerate(st.shape) if d not in drop]
    if not shape:
        raise errors.UnsupportedOperationError(f'{what}: every dimension removed (a scalar); use .sum()')
    return _reshaped(sdfg, state, a, shape, what)


def stack(pv, sdfg, state, arrays, axis=0, out=None, **kwargs):
    """``np.stack(matrices, axis)``: sparse matrices of one shape as the slices of a rank-3
    tensor along ``axis``: their concatenation along the rows, made data once
    (:class:`~sdfgsparse.ops.concat.SparseConcat`), seen as ``(k, M, N)`` and transposed to
    put the new dimension at ``axis`` (views)."""
    names = list(arrays) if isinstance(arrays, (tuple, list)) else [arrays]
    names = [n[0] if isinstance(n, (tuple, list)) and len(n) == 1 else n for n in names]
    shown = ', '.join(_np._shown(n, sdfg) if _np._sparse_name(sdfg, n) else str(n) for n in names)
    what = f'np.stack(({shown}), axis={axis!r})'
    if out is not None or kwargs:
        raise _np._unsupported(f'{what} with out, dtype or casting', _np._sparse_operands(sdfg, names), sdfg)
    ranks = {_np._stype(sdfg, n).rank for n in names if _np._sparse_name(sdfg, n)}
    if ranks != {2}:
        raise errors.UnsupportedOperationError(f'{what}: stacks sparse matrices (2-D) only inside a program')
    st = _np._stype(sdfg, names[0])
    for n in names[1:]:
        if _np._sparse_name(sdfg, n):
            o = _np._stype(sdfg, n)
            for d in (0, 1):
                require_equal(sdfg, st.shape[d], o.shape[d], f'{what}: dimension {d} of {_np._shown(n, sdfg)}')
    ax = _axis(axis, 3, what)
    k = len(names)
    cat = _np._sparse_concat(pv, sdfg, state, names, 0, 'np.stack')
    if base.concat_of(sdfg, cat) is not None:
        cat = _np._concat_materialise(sdfg, state, cat)
    tensor = _view(sdfg, cat, [Reshape((k * st.shape[0], st.shape[1]), (k, st.shape[0], st.shape[1]))], what)
    if ax == 0:
        return tensor
    order = [1, 2]
    order.insert(ax, 0)
    return _view(sdfg, tensor, [Transpose(order)], what)


@oprepo.replaces_method('Structure', 'transpose')
def _sparse_transpose_method(pv, sdfg, state, a, *axes):
    return _transpose_method(pv, sdfg, state, a, *axes)


@oprepo.replaces_method('Structure', 'swapaxes')
def _sparse_swapaxes_method(pv, sdfg, state, a, axis1, axis2):
    return swapaxes(pv, sdfg, state, a, axis1, axis2)


@oprepo.replaces_method('Structure', 'squeeze')
def _sparse_squeeze_method(pv, sdfg, state, a, axis=None):
    return squeeze(pv, sdfg, state, a, axis)


_np.TENSOR_OPERATIONS.update({
    'sum': tensor_sum,
    'matmul': tensor_matmul,
    'mul_dense': tensor_mul_dense,
    'add_dense': tensor_add_dense,
    'transpose': tensor_transpose,
    'add': tensor_add,
    'mul': tensor_mul,
})
_np.SPARSE_FUNCTIONS.update({
    'numpy.einsum': np_einsum,
    'numpy.tensordot': tensordot,
    'numpy.stack': stack,
})
#: NumPy functions DaCe has no replacement for (a program would call them back in Python):
#: with a sparse operand, these instead
_np.CALLBACK_FUNCTIONS.update({
    'numpy.moveaxis': moveaxis,
    'numpy.swapaxes': swapaxes,
    'numpy.expand_dims': expand_dims,
    'numpy.squeeze': squeeze,
})
