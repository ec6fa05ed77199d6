"""Views of sparse matrices: slices and transpositions that produce no storage.

A view is the stored matrix seen through a chain of *steps* (:class:`Slice`,
:class:`Transpose`). It is a :class:`~sdfgsparse.formats.format.SparseFormat` of its own
(:class:`ViewFormat`): the same levels and storage arrays as the stored format, and a loop
nest (:meth:`ViewFormat.loops`) whose coordinates are those of the view. An operation
that iterates the view's loop nest therefore reads the slice directly, and shape and
compute fuse by construction:

* a slice of the dimension that the outermost dense level enumerates (the rows of a CSR)
  narrows that level's loop (``for r in [0, count)``, stored row ``start + step * r``);
* a slice of any other dimension is a guard on the entry's coordinate (in range, on the
  step) and a new coordinate ``(c - start) / step``;
* a transposition swaps the two coordinates;
* a reshape (C order) linearises the coordinates and splits the linear index again:
  ``(i, j)`` of a ``rows x cols`` matrix is ``((i * cols + j) // cols2, (i * cols + j) %
  cols2)`` of the ``rows2 x cols2`` view. The walk stays the stored one, so the view's rows
  are no longer owned by the outer loop (:attr:`ViewFormat.outer_dim` is None): writers
  along them take their safe schedule, a materialised reshape is sorted.

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

__all__ = ['Slice', 'Transpose', 'Reshape', 'ViewFormat', 'view_type', 'normalise_slice', 'encode_steps', 'decode_steps',
           'is_view']


class Slice:
    """Positions ``start, start + step, ...`` (``count`` of them) of matrix dimension ``axis``
    (0: rows, 1: columns), already normalised (:func:`normalise_slice`)."""

    def __init__(self, axis: int, start, count, step: int):
        if axis not in (0, 1):
            raise ValueError(f'Slice: axis must be 0 or 1, got {axis!r}')
        self.axis = axis
        self.start = sympy.sympify(start)
        self.count = sympy.sympify(count)
        self.step = int(step)
        if self.step == 0:
            raise ValueError('Slice: step must not be zero')

    def as_json(self):
        return ['slice', self.axis, str(self.start), str(self.count), self.step]

    def __repr__(self):
        return f'Slice({self.axis}, {self.start}, {self.count}, {self.step})'


class Transpose:
    """Rows and columns swapped."""

    def as_json(self):
        return ['T']

    def __repr__(self):
        return 'Transpose()'


class Reshape:
    """The matrix (``cols`` columns) seen in C order as ``rows2 x cols2`` (the same number
    of elements)."""

    def __init__(self, cols, rows2, cols2):
        self.cols = sympy.sympify(cols)
        self.rows2 = sympy.sympify(rows2)
        self.cols2 = sympy.sympify(cols2)

    def as_json(self):
        return ['reshape', str(self.cols), str(self.rows2), str(self.cols2)]

    def __repr__(self):
        return f'Reshape({self.cols} -> {self.rows2} x {self.cols2})'


Step = Union[Slice, Transpose, Reshape]


def encode_steps(steps: Sequence[Step]) -> str:
    """The steps as a JSON string (a node property; survives an SDFG's JSON round trip)."""
    return json.dumps([s.as_json() for s in steps])


def decode_steps(text: str) -> List[Step]:
    """Inverse of :func:`encode_steps`."""
    res = []
    for item in json.loads(text) if text else []:
        if item[0] == 'T':
            res.append(Transpose())
        elif item[0] == 'reshape':
            sym = dace.symbolic.pystr_to_symbolic
            res.append(Reshape(*(sym(v) for v in item[1:])))
        elif item[0] == 'slice':
            _, axis, start, count, step = item
            sym = dace.symbolic.pystr_to_symbolic
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


def apply_steps(nest: LoopNest, steps: Sequence[Step]) -> LoopNest:
    """The loop nest of the view: ``nest`` (the stored matrix's) seen through ``steps``."""
    levels = list(nest.levels)
    dims = [nest.row, nest.col]
    for s in steps:
        if isinstance(s, Transpose):
            dims.reverse()
            continue
        if isinstance(s, Reshape):
            flat = dims[0] * s.cols + dims[1]
            # one column: the linear index is the row (SymPy keeps ``Mod(M*crd1(p), 1)``: its
            # storage reads are not known integers; DaCe 1.0.2 miscompiled the ``% 1``)
            dims = [flat, sympy.Integer(0)] if s.cols2 == 1 else [int_floor(flat, s.cols2), sympy.Mod(flat, s.cols2)]
            if s.rows2 == 1:
                dims[0] = sympy.Integer(0)  # one row (see _one below)
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
    return LoopNest(levels, (dims[0], dims[1]), nest.members)


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
        super().__init__(f'{bf.name}View', bf.levels, lambda r, c: bf.extents(base.rows, base.cols), bf.dims,
                         scipy_format=None, transpose_name=None, block=(1, 1),
                         doc=f'A view of {bf.name} storage: {self.steps}.')
        nest = self.loops(None, base.sizes)
        lead = nest.levels[0]
        self.dims = tuple('c0' if (d == lead.var and lead.coord == lead.var) else str(d) for d in (nest.row, nest.col))
        self._nest = nest

    def loops(self, shape, sizes) -> LoopNest:
        b = self.base
        return apply_steps(b.fmt.loops(b.shape, sizes), self.steps)

    @property
    def outer_dim(self) -> Optional[int]:
        od = self.base.fmt.outer_dim
        if od is None or any(isinstance(s, Reshape) for s in self.steps):
            return None
        for s in self.steps:
            if isinstance(s, Transpose):
                od = 1 - od
        return od

    @property
    def symbol_exprs(self) -> list:
        """Expressions whose symbols the view's iteration uses beyond the stored type's."""
        return [self.base.rows, self.base.cols] + [e for s in self.steps if isinstance(s, Slice) for e in (s.start, s.count)] \
            + [e for s in self.steps if isinstance(s, Reshape) for e in (s.cols, s.rows2, s.cols2)]

    def reverses(self, dim: int) -> bool:
        """Whether the view walks dimension ``dim`` (0: rows, 1: columns) backwards from the
        stored order (a slice along it with a negative step), or in no stored order at all
        (after a reshape)."""
        origin = [0, 1]  # current dimension -> the stored type's
        backwards = [False, False]
        for s in self.steps:
            if isinstance(s, Reshape):  # the order of a reshaped walk is not the stored one
                return True
            if isinstance(s, Transpose):
                origin.reverse()
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


def view_type(st: SparseType, steps: Sequence[Step]) -> SparseType:
    """``st`` (a stored type, or a view) seen through ``steps`` more."""
    if is_view(st):
        base, steps = st.fmt.base, st.fmt.steps + list(steps)
    else:
        base, steps = st, list(steps)
    shape = [base.rows, base.cols]
    for s in steps:
        if isinstance(s, Transpose):
            shape.reverse()
        elif isinstance(s, Reshape):
            shape = [s.rows2, s.cols2]
        else:
            shape[s.axis] = s.count
    fmt = ViewFormat(base, steps)
    return SparseType(fmt, base.dtype, (shape[0], shape[1]), base.index_dtype, base.sizes, uid=-1)

