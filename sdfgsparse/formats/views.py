"""Views of sparse matrices and tensors: slices, transpositions and reshapes that produce
no storage.

A view is the stored data seen through a chain of *steps* (:class:`Slice`,
:class:`Transpose`, :class:`Reshape`). It is a
:class:`~sdfgsparse.formats.format.SparseFormat` of its own (:class:`ViewFormat`): the same
levels and storage arrays as the stored format, and a loop nest (:meth:`ViewFormat.loops`)
whose coordinates are those of the view (of the view's rank, which a reshape may change).
An operation that iterates the view's loop nest therefore reads the view directly, and
shape and compute fuse by construction:

* a slice of the dimension that the outermost dense level enumerates (the rows of a CSR)
  narrows that level's loop (``for r in [0, count)``, stored row ``start + step * r``);
* a slice of any other dimension is a guard on the entry's coordinate (in range, on the
  step) and a new coordinate ``(c - start) / step``;
* a transposition permutes the coordinates (a matrix's ``.T`` swaps them; a tensor's
  ``transpose(axes)``, ``np.moveaxis`` any permutation);
* a reshape (C order) linearises the coordinates and splits the linear index again:
  ``(i, j)`` of a ``rows x cols`` matrix is ``((i * cols + j) // cols2, (i * cols + j) %
  cols2)`` of the ``rows2 x cols2`` view. Between ranks the dimensions are matched in
  groups of equal size products first (:func:`reshape_groups`), so ``(I, J, K) -> (I * J,
  K)`` is ``(i * J + j, k)``, an inserted dimension of size one (``np.expand_dims``) is the
  coordinate 0 and a removed one (``np.squeeze``) is dropped. The walk stays the stored one,
  so the view's dimensions are owned by the outer loop only where a group keeps the stored
  outer dimension first (:attr:`ViewFormat.outer_dim`): writers along the others take their
  safe schedule, a materialised reshape is sorted.

Slices are normalised as NumPy does (:func:`normalise_slice`): negative bounds count from
the end, bounds clip to the dimension, a negative step walks backwards; with symbolic
bounds the same rules are written as ``Min`` / ``Max`` expressions.

>>> import dace
>>> from sdfgsparse.formats import CSR
>>> st = CSR.type(dace.float64, 10, 8)
>>> v = view_type(st, [Slice(0, *normalise_slice(10, 2, 8, 2))])
>>> v.shape
(3, 8)
"""
import json
from typing import List, Optional, Sequence, Tuple, Union

import dace
import sympy
from dace.symbolic import int_floor

from sdfgsparse import errors
from sdfgsparse.formats.format import LoopNest, SparseFormat, SparseType
from sdfgsparse.formats.levels import COUNTED, LevelLoop

__all__ = ['Slice', 'Transpose', 'Reshape', 'ViewFormat', 'view_type', 'view_shape', 'normalise_slice', 'encode_steps',
           'decode_steps', 'is_view', 'reshape_groups']


class Slice:
    """Positions ``start, start + step, ...`` (``count`` of them) of dimension ``axis`` (of a
    matrix, 0: rows, 1: columns), already normalised (:func:`normalise_slice`)."""

    def __init__(self, axis: int, start, count, step: int):
        if isinstance(axis, bool) or not isinstance(axis, int) or axis < 0:
            raise ValueError(f'Slice: axis must be a dimension (0, 1, ...), got {axis!r}')
        self.axis = axis
        self.start = sympy.sympify(start)
        self.count = sympy.sympify(count)
        self.step = int(step)
        if self.step == 0:
            raise ValueError('Slice: step must not be zero')

    @property
    def exprs(self) -> tuple:
        """The symbolic expressions the step holds."""
        return (self.start, self.count)

    def as_json(self):
        return ['slice', self.axis, str(self.start), str(self.count), self.step]

    def __repr__(self):
        return f'Slice({self.axis}, {self.start}, {self.count}, {self.step})'


class Transpose:
    """The dimensions permuted: dimension ``d`` of the result is dimension ``axes[d]`` before
    it (NumPy's ``transpose(axes)``); ``axes=None`` reverses them (a matrix's ``.T``)."""

    def __init__(self, axes: Optional[Sequence[int]] = None):
        self.axes = None if axes is None else tuple(int(a) for a in axes)
        if self.axes is not None and sorted(self.axes) != list(range(len(self.axes))):
            raise ValueError(f'Transpose: axes must be a permutation of 0..{len(self.axes) - 1}, got {self.axes}')

    exprs = ()

    def order(self, rank: int) -> Tuple[int, ...]:
        """The permutation for data of ``rank`` dimensions."""
        if self.axes is None:
            return tuple(range(rank - 1, -1, -1))
        if len(self.axes) != rank:
            raise ValueError(f'Transpose{self.axes} of data of {rank} dimensions')
        return self.axes

    def as_json(self):
        return ['T'] if self.axes is None else ['T', list(self.axes)]

    def __repr__(self):
        return 'Transpose()' if self.axes is None else f'Transpose({self.axes})'


class Reshape:
    """The data of shape ``old`` seen in C order as shape ``new`` (the same number of
    elements; any ranks). A matrix's reshape names ``Reshape((rows, cols), (rows2, cols2))``."""

    def __init__(self, old: Sequence, new: Sequence):
        self.old = tuple(None if v is None else sympy.sympify(v) for v in old)
        self.new = tuple(sympy.sympify(v) for v in new)

    @property
    def exprs(self) -> tuple:
        return tuple(v for v in self.old + self.new if v is not None)

    def as_json(self):
        return ['reshape', [None if v is None else str(v) for v in self.old], [str(v) for v in self.new]]

    def __repr__(self):
        return f'Reshape({self.old} -> {self.new})'


Step = Union[Slice, Transpose, Reshape]


def encode_steps(steps: Sequence[Step]) -> str:
    """The steps as a JSON string (a node property; survives an SDFG's JSON round trip)."""
    return json.dumps([s.as_json() for s in steps])


def decode_steps(text: str) -> List[Step]:
    """Inverse of :func:`encode_steps` (also reads the matrix-only reshapes of earlier
    versions: ``['reshape', cols, rows2, cols2]``)."""
    res = []
    sym = dace.symbolic.pystr_to_symbolic
    for item in json.loads(text) if text else []:
        if item[0] == 'T':
            res.append(Transpose(item[1] if len(item) > 1 else None))
        elif item[0] == 'reshape' and len(item) == 3:
            res.append(Reshape([None if v is None else sym(v) for v in item[1]], [sym(v) for v in item[2]]))
        elif item[0] == 'reshape':
            res.append(Reshape((None, sym(item[1])), (sym(item[2]), sym(item[3]))))
        elif item[0] == 'slice':
            _, axis, start, count, step = item
            res.append(Slice(int(axis), sym(start), sym(count), int(step)))
        else:
            raise ValueError(f'unknown view step {item!r}')
    return res


def _is_int(v) -> bool:
    return isinstance(v, int) or (isinstance(v, sympy.Basic) and v.is_Integer)


def _negative_to_end(v, n):
    """NumPy's reading of an index ``v`` of a dimension of size ``n``: ``v + n`` where ``v``
    is negative. For a symbolic ``v``, ``v + n * [v < 0]`` with ``[v < 0] = Min(1, Max(0, -v))``
    (integers only)."""
    if _is_int(v):
        return v + n if int(v) < 0 else v
    return v + n * sympy.Min(1, sympy.Max(0, -v))


def normalise_slice(n, start=None, stop=None, step=None) -> Tuple[object, object, int]:
    """``(first, count, step)`` of the positions that ``x[start:stop:step]`` picks from a
    dimension of size ``n``, as NumPy picks them. ``step`` must be a nonzero integer;
    ``n``, ``start`` and ``stop`` may be symbolic (the result then is)."""
    step = 1 if step is None else step
    if not _is_int(step):
        raise errors.UnsupportedOperationError(f'slicing a sparse matrix: the step must be an integer constant, got '
                                               f'{step!r}')
    step = int(step)
    if step == 0:
        raise errors.ShapeError('slicing a sparse matrix: the step must not be zero (as in NumPy)')
    for v in (start, stop):
        if v is not None and not (_is_int(v) or dace.symbolic.issymbolic(v)):
            raise errors.UnsupportedOperationError(f'slicing a sparse matrix: bound {v!r} is not an integer or '
                                                   'a symbolic integer expression')
    if _is_int(n) and all(v is None or _is_int(v) for v in (start, stop)):
        r = range(int(n))[slice(None if start is None else int(start), None if stop is None else int(stop), step)]
        return r.start, len(r), step
    n = sympy.sympify(n)
    if step > 0:
        first = sympy.Integer(0) if start is None else sympy.Max(0, sympy.Min(n, _negative_to_end(start, n)))
        end = n if stop is None else sympy.Max(0, sympy.Min(n, _negative_to_end(stop, n)))
        count = sympy.Max(0, int_floor(end - first + step - 1, step))
    else:
        first = n - 1 if start is None else sympy.Max(-1, sympy.Min(n - 1, _negative_to_end(start, n)))
        end = sympy.Integer(-1) if stop is None else sympy.Max(-1, sympy.Min(n - 1, _negative_to_end(stop, n)))
        count = sympy.Max(0, int_floor(first - end - step - 1, -step))
    return first, count, step


def _vars(levels: Sequence[LevelLoop], upto: int) -> set:
    return {l.var for l in levels[:upto + 1] if l.var is not None}


def _level_of(levels: Sequence[LevelLoop], e) -> int:
    """The outermost level below which ``e`` is defined (all its loop variables are open)."""
    used = {s for s in sympy.sympify(e).free_symbols}
    for k in range(len(levels)):
        if used & {l.var for l in levels if l.var is not None} <= _vars(levels, k):
            return k
    return len(levels) - 1


def _with_guard(l: LevelLoop, g) -> LevelLoop:
    guard = g if l.guard is None else sympy.And(l.guard, g)
    return LevelLoop(l.kind, l.coord, l.pos, l.var, l.begin, l.end, guard, l.base)


def _replace(l: LevelLoop, sub: dict) -> LevelLoop:

    def r(e):
        return e.xreplace(sub) if isinstance(e, sympy.Basic) else e

    return LevelLoop(l.kind, r(l.coord), r(l.pos), l.var, r(l.begin), r(l.end), r(l.guard), r(l.base))


def _narrowable(l: LevelLoop, e) -> bool:
    """Whether coordinate ``e`` is the loop variable of a counted root level that a slice
    can narrow (a dense level: coordinate = variable, from 0)."""
    return (l.kind == COUNTED and l.var is not None and l.base is None and l.guard is None and l.coord == l.var
            and l.begin == 0 and e == l.var)


def _same(a, b) -> bool:
    return a is not None and b is not None and sympy.simplify(sympy.sympify(a) - b) == 0


def reshape_groups(old: Sequence, new: Sequence) -> Optional[List[Tuple[List[int], List[int]]]]:
    """The dimensions of a C-order reshape from shape ``old`` to ``new`` matched in groups of
    equal products, in order: ``[(old dims, new dims), ...]`` (``(I, J, K) -> (I * J, K)``:
    ``[([0, 1], [0]), ([2], [1])]``; a dimension of size one may form a group with no partner).
    None where no such matching is found (unknown or incommensurable sizes): the whole
    shape is then one group."""
    if any(v is None for v in old):
        return None
    groups, i, j = [], 0, 0
    while i < len(old) or j < len(new):
        if i < len(old) and _same(old[i], 1):
            groups.append(([i], []))
            i += 1
            continue
        if j < len(new) and _same(new[j], 1):
            groups.append(([], [j]))
            j += 1
            continue
        if i == len(old) or j == len(new):
            return None
        gi, gj = [i], [j]
        po, pn = sympy.sympify(old[i]), sympy.sympify(new[j])
        i, j = i + 1, j + 1
        while not _same(po, pn):
            # grow the side with the smaller product (the other's a multiple of it)
            num, den = sympy.fraction(sympy.cancel(pn / po))
            grow_old = bool(num > den) if num.is_number and den.is_number else den == 1
            if grow_old and i < len(old):
                po, i = po * old[i], i + 1
                gi.append(i - 1)
            elif j < len(new):
                pn, j = pn * new[j], j + 1
                gj.append(j - 1)
            elif i < len(old):
                po, i = po * old[i], i + 1
                gi.append(i - 1)
            else:
                return None
        groups.append((gi, gj))
    return groups


def _split(flat, sizes: Sequence) -> list:
    """The C-order coordinates of linear index ``flat`` over dimensions ``sizes`` (a
    dimension of one position: 0)."""
    out = []
    for t, n in enumerate(sizes):
        if _same(n, 1):
            out.append(sympy.Integer(0))
            continue
        stride = sympy.Integer(1)
        for m in sizes[t + 1:]:
            stride = stride * m
        e = flat if _same(stride, 1) else int_floor(flat, stride)
        out.append(e if t == 0 or all(_same(m, 1) for m in sizes[:t]) else sympy.Mod(e, n))
    return out


def _reshaped(dims: list, s: Reshape) -> list:
    """The coordinates ``dims`` (of shape ``s.old``) seen through reshape ``s``."""
    if len(s.old) == 2 and len(s.new) == 2 and reshape_groups(s.old, s.new) is None:
        rows2, cols2 = s.new
        flat = dims[0] * s.old[1] + dims[1]
        # one column: the linear index is the row (SymPy keeps ``Mod(M*crd1(p), 1)``: its
        # storage reads are not known integers; DaCe 1.0.2 miscompiled the ``% 1``)
        out = [flat, sympy.Integer(0)] if cols2 == 1 else [int_floor(flat, cols2), sympy.Mod(flat, cols2)]
        if rows2 == 1:
            out[0] = sympy.Integer(0)  # one row (see _one below)
        return out
    groups = reshape_groups(s.old, s.new) or [(list(range(len(s.old))), list(range(len(s.new))))]
    out = [None] * len(s.new)
    for gi, gj in groups:
        flat = sympy.Integer(0)
        for d in gi:
            flat = flat * s.old[d] + dims[d]
        if len(gj) == 1:
            out[gj[0]] = flat
        else:
            for d, e in zip(gj, _split(flat, [s.new[d] for d in gj])):
                out[d] = e
    return out


def apply_steps(nest: LoopNest, steps: Sequence[Step]) -> LoopNest:
    """The loop nest of the view: ``nest`` (the stored data's) seen through ``steps``."""
    levels = list(nest.levels)
    dims = list(nest.coords)
    for s in steps:
        if isinstance(s, Transpose):
            dims = [dims[a] for a in s.order(len(dims))]
            continue
        if isinstance(s, Reshape):
            dims = _reshaped(dims, s)
            continue
        e = dims[s.axis]
        if _narrowable(levels[0], e):
            v = levels[0].var
            sub = {v: s.start + s.step * v}
            levels = [LevelLoop(COUNTED, v, levels[0].pos.xreplace(sub), v, sympy.Integer(0), s.count)] + \
                [_replace(l, sub) for l in levels[1:]]
            dims = [d.xreplace(sub) for d in dims]
            dims[s.axis] = _one(s.count, v)
            continue
        q = e - s.start if s.step > 0 else s.start - e
        m = abs(s.step)
        guard = _membership(q, m, s.count)
        k = _level_of(levels, e)
        levels[k] = _with_guard(levels[k], sympy.And(*guard))
        dims[s.axis] = _one(s.count, q if m == 1 else int_floor(q, m))
    return LoopNest(levels, dims, nest.members)


def _membership(q, m: int, count) -> list:
    """The guard that position ``q`` (from the slice's start) is one of the ``count``
    positions a slice of step ``m`` takes: ``0 <= q < count * m`` and ``q % m == 0``. Where
    ``q`` reads a coordinate of an earlier stepped slice (``floor(a / k) + c``, a slice of a
    slice), the guard is written on ``a`` without the division (DaCe 1.0.2 fails to print
    ``int_floor`` in a condition): ``floor(a / k) + c >= b`` is ``a >= (b - c) * k``, ``<``
    likewise, and ``(floor(a / k) + c) % m == 0`` is ``(a + c * k) % (k * m) < k``."""
    parts = _floor_parts(q)
    if parts is None:
        guard = [sympy.Ge(q, 0), sympy.Lt(q, count * m)]
        return guard + ([sympy.Eq(sympy.Mod(q, m), 0)] if m != 1 else [])
    a, k, c = parts
    guard = [sympy.Ge(a, -c * k), sympy.Lt(a, (count * m - c) * k)]
    return guard + ([sympy.Lt(sympy.Mod(a + c * k, k * m), k)] if m != 1 else [])


def _floor_parts(q):
    """``(a, k, c)`` with ``q == int_floor(a, k) + c`` for a positive integer ``k`` and ``c``
    independent of ``a``'s variables (a bound of sizes), or None when ``q`` has no such form."""
    terms = sympy.Add.make_args(q)
    floors = [t for t in terms if isinstance(t, int_floor)]
    if len(floors) != 1:
        return None
    a, k = floors[0].args
    c = sympy.Add(*[t for t in terms if t is not floors[0]])
    if not (k.is_Integer and k > 0) or a.atoms(int_floor) or c.free_symbols & a.free_symbols:
        return None
    return a, k, c


def _one(count, coord):
    """A view's coordinate along a dimension of ``count`` positions: 0 where there is one
    (a dense result of one row is passed to a kernel as a scalar by DaCe 1.0.2, which then
    refused the computed index: "Tried to offset address of scalar _y")."""
    return sympy.Integer(0) if count == 1 else coord


class ViewFormat(SparseFormat):
    """The format of a view: the stored type ``base`` (a :class:`SparseType`, transposed
    already if the operation reads it so) seen through ``steps``. Storage questions (levels,
    members, sizes, counts) are the stored format's, at the stored shape, whatever shape
    they are asked with; iteration (:meth:`loops`) is the view's."""

    def __init__(self, base: SparseType, steps: Sequence[Step]):
        self.base = base
        self.steps = list(steps)
        bf = base.fmt
        super().__init__(f'{bf.name}View', bf.levels, lambda *shape: bf.extents(*base.shape), bf.dims,
                         scipy_format=None, transpose_name=None, block=(1, 1),
                         doc=f'A view of {bf.name} storage: {self.steps}.')
        nest = self.loops(None, base.sizes)
        lead = nest.levels[0]
        self.dims = tuple('c0' if (d == lead.var and lead.coord == lead.var) else str(d) for d in nest.coords)
        self._nest = nest

    def loops(self, shape, sizes) -> LoopNest:
        b = self.base
        return apply_steps(b.fmt.loops(b.shape, sizes), self.steps)

    @property
    def outer_dim(self) -> Optional[int]:
        """The view's dimension that the stored outer level owns: the stored one, followed
        through the permutations, and through a reshape where it leads a group that becomes
        one dimension (``(I, J, K) -> (I * J, K)``: distinct ``i`` give disjoint ``i * J + j``);
        else None."""
        od = self.base.fmt.outer_dim
        shape = list(self.base.shape)
        for s in self.steps:
            if od is None:
                return None
            if isinstance(s, Transpose):
                order = s.order(len(shape))
                od = order.index(od)
                shape = [shape[a] for a in order]
            elif isinstance(s, Reshape):
                groups = reshape_groups(s.old, s.new) or []
                od = next((gj[0] for gi, gj in groups if gi and gi[0] == od and len(gj) == 1), None)
                shape = list(s.new)
        return od

    @property
    def symbol_exprs(self) -> list:
        """Expressions whose symbols the view's iteration uses beyond the stored type's."""
        return list(self.base.shape) + [e for s in self.steps for e in s.exprs]

    def reverses(self, dim: int) -> bool:
        """Whether the view walks dimension ``dim`` backwards from the stored order (a slice
        along it with a negative step), or in no stored order at all (after a reshape)."""
        origin = list(range(self.base.rank))  # current dimension -> the stored type's
        backwards = [False] * self.base.rank
        for s in self.steps:
            if isinstance(s, Reshape):  # the order of a reshaped walk is not the stored one
                return True
            if isinstance(s, Transpose):
                origin = [origin[a] for a in s.order(len(origin))]
            elif s.step < 0:
                backwards[origin[s.axis]] = not backwards[origin[s.axis]]
        return backwards[origin[dim]]

    @property
    def T(self) -> 'ViewFormat':
        return ViewFormat(self.base, self.steps + [Transpose()])

    def type(self, *args, **kwargs):
        raise errors.UnsupportedOperationError(f'{self.name} is a view; it has no storage type of its own')

    def __repr__(self):
        return f'view of {self.base!r}: {self.steps}'


def is_view(st: SparseType) -> bool:
    return isinstance(st.fmt, ViewFormat)


def view_shape(shape: Sequence, steps: Sequence[Step]) -> tuple:
    """The shape of data of ``shape`` seen through ``steps``."""
    shape = list(shape)
    for s in steps:
        if isinstance(s, Transpose):
            shape = [shape[a] for a in s.order(len(shape))]
        elif isinstance(s, Reshape):
            shape = list(s.new)
        else:
            shape[s.axis] = s.count
    return tuple(shape)


def view_type(st: SparseType, steps: Sequence[Step]) -> SparseType:
    """``st`` (a stored type, or a view) seen through ``steps`` more."""
    if is_view(st):
        base, steps = st.fmt.base, st.fmt.steps + list(steps)
    else:
        base, steps = st, list(steps)
    fmt = ViewFormat(base, steps)
    return SparseType(fmt, base.dtype, view_shape(base.shape, steps), base.index_dtype, base.sizes, uid=-1)
