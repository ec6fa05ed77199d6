"""Sparse formats composed of levels, and their annotated instances (``ss.CSR[dace.float64, M, N]``).

A :class:`SparseFormat` is the recipe: a stack of levels, how level coordinates map to
matrix coordinates, and the extent of each level. Indexing a format with a value dtype
and a shape gives a :class:`SparseType`, which owns the symbols of its data-dependent
sizes (number of stored entries, ELL width, ...) and builds the ``dace.data.Structure``
that stands for the argument in an SDFG.

The structure's type name encodes format and dtypes (``ss_CSR_float64_int32``); it is the
key of the registry that maps a ``Structure`` back to its :class:`SparseType`
(:func:`sparse_type_of`), so the mapping survives copies and JSON round trips.
"""
import collections
import contextlib
import hashlib
import os
import re
import sys
import threading
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import dace
import numpy as np
import sympy

from sdfgsparse import errors
from sdfgsparse._symbolic import integral
from sdfgsparse.formats.levels import Compressed, Dense, Level, LevelLoop, LoopContext, Offset

__all__ = [
    'SparseFormat', 'SparseType', 'sparse_type_of', 'is_sparse_desc', 'register_format', 'get_format',
    'widen_size_symbols', 'LoopNest', 'matrix_coord'
]

_FORMATS: Dict[str, 'SparseFormat'] = {}
# per creation site (module, function, line) and type (format, dtypes, shape, named sizes):
# how many such types were made there so far
_SITE_COUNTS: Dict[tuple, int] = collections.defaultdict(int)
_FORMATS_DIR = os.path.dirname(os.path.abspath(__file__))


def _site_uid(content: tuple = ()) -> str:
    """A name part for the size symbols of a new type, fixed by where the type is made and
    what it is.

    The caller's module, function and line (the first frame outside this package folder),
    the type's ``content`` (format, dtypes, shape, named sizes), and how many such types
    that line made before in this process: two parameters annotated alike on one line get
    two names, and a program gets the same names in every process whatever types were made
    before it elsewhere. A global counter gave a program other symbol names, so another
    build, when another module made its types first; a count per line alone did the same
    for a line that makes types in a loop or a factory (``F[vt, M, N, it]`` for each
    format: the ELL program of a process that made DCSR's type first was another build)."""
    frame = sys._getframe(1)
    while frame is not None and os.path.dirname(os.path.abspath(frame.f_code.co_filename)) == _FORMATS_DIR:
        frame = frame.f_back
    if frame is None:
        site = ('?', '?', 0)
    else:
        code = frame.f_code
        site = (frame.f_globals.get('__name__', '?'), getattr(code, 'co_qualname', code.co_name), frame.f_lineno)
    site = site + tuple(content)
    k = _SITE_COUNTS[site]
    _SITE_COUNTS[site] = k + 1
    return hashlib.sha1(repr((site, k)).encode()).hexdigest()[:8]

VALUE_DTYPES = (dace.float32, dace.float64, dace.int32, dace.int64)
INDEX_DTYPES = (dace.int32, dace.int64)


def register_format(fmt: 'SparseFormat') -> 'SparseFormat':
    _FORMATS[fmt.name] = fmt
    return fmt


#: Families of formats named by a pattern (``BSR4x4``): the name's regular expression and
#: the function that makes the format from the match (registered by the catalogue).
_FAMILIES: List[Tuple['re.Pattern', Callable]] = []


def register_family(pattern: str, make: Callable) -> None:
    """Formats whose names match ``pattern`` (a regular expression, whole name) are made by
    ``make(match)`` when :func:`get_format` meets a name not registered yet."""
    _FAMILIES.append((re.compile(pattern), make))


def get_format(name: str) -> 'SparseFormat':
    if name not in _FORMATS:
        for pattern, make in _FAMILIES:
            m = pattern.fullmatch(name)
            if m:
                return make(m)
        raise KeyError(f'unknown sparse format {name!r}')
    return _FORMATS[name]


class SparseFormat:
    """A sparse format (of a matrix, or of a tensor of any rank) as a stack of levels.

    :param name: catalogue name (``CSR``, ``COO3``); also the structure-name prefix.
    :param levels: the levels, outermost first.
    :param extents: ``f(*shape) -> [extent of level k]`` (coordinate range of each level;
                    ``f(rows, cols)`` for a matrix).
    :param dims: Python expressions of the tensor's coordinates (a matrix's row and column)
                 in terms of the levels' coordinates ``c{k}``; their number is the rank.
    :param scipy_format: scipy's format name holding the same arrays, if any.
    :param transpose_of: name of the format this one is the transposed view of, if any.
    """

    def __init__(self,
                 name: str,
                 levels: Sequence[Level],
                 extents: Callable,
                 dims: Tuple[str, str],
                 scipy_format: Optional[str] = None,
                 transpose_name: Optional[str] = None,
                 block: Tuple[int, int] = (1, 1),
                 doc: str = ''):
        self.name = name
        self.levels = list(levels)
        self.extents = extents
        self.dims = tuple(dims)
        self.scipy_format = scipy_format
        self.transpose_name = transpose_name
        self.block = tuple(block)
        self.__doc__ = doc or f'{name} sparse matrix format: levels {self.levels}.'

    @property
    def rank(self) -> int:
        """The number of dimensions of the tensors stored in this format (2: a matrix)."""
        return len(self.dims)

    @property
    def level_dims(self) -> Optional[Tuple[int, ...]]:
        """For each level, the tensor dimension whose coordinate it stores (``CSR``: (0, 1),
        ``CSC``: (1, 0), ``CSF3_201``: (2, 0, 1)); None where some dimension is no single
        level's coordinate (``BSR``'s blocks, ``ELL``'s slots)."""
        where = {}
        for d, expr in enumerate(self.dims):
            m = re.fullmatch(r'\s*c(\d+)\s*', expr) if isinstance(expr, str) else None
            if m is None:
                return None
            where[int(m.group(1))] = d
        if sorted(where) != list(range(len(self.levels))):
            return None
        return tuple(where[k] for k in range(len(self.levels)))

    # ------------------------------------------------------------------ structure
    @property
    def size_keys(self) -> List[str]:
        keys = []
        for k, lvl in enumerate(self.levels):
            if isinstance(lvl, Compressed):
                keys.append(f'n{k}')
            elif isinstance(lvl, Dense) and lvl.size_key:
                keys.append(lvl.size_key)
            elif isinstance(lvl, Offset):
                keys += ['nd', 'L']
        return keys

    @property
    def member_names(self) -> List[str]:
        names = []
        for k, lvl in enumerate(self.levels):
            names += lvl.members(k)
        return names + ['vals']

    @property
    def outer_dim(self) -> Optional[int]:
        """The matrix dimension the outermost level owns (distinct outer positions write
        disjoint rows/columns), or None (e.g. COO's non-unique root)."""
        if not self.levels[0].unique:
            return None
        for d, expr in enumerate(self.dims):
            if re.search(r'\bc0\b', expr):
                return d
        return None

    def counts(self, shape, sizes) -> List[object]:
        """Number of positions of each level (symbolic), for a tensor of ``shape``."""
        ext = self.extents(*shape)
        res = []
        parent = 1
        for k, lvl in enumerate(self.levels):
            parent = lvl.count(parent, sizes, k, ext[k])
            res.append(parent)
        return res

    def member_shapes(self, shape, sizes) -> Dict[str, object]:
        counts = self.counts(shape, sizes)
        ext = dict(enumerate(self.extents(*shape)))
        shapes = {}
        parent = 1
        for k, lvl in enumerate(self.levels):
            shapes.update(lvl.member_sizes(k, parent, counts[k], sizes, extents=ext))
            parent = counts[k]
        shapes['vals'] = counts[-1]
        return shapes

    # ------------------------------------------------------------------ iteration
    def loops(self, shape, sizes: Dict[str, object]) -> 'LoopNest':
        """The iteration over stored entries as symbolic objects (see :class:`LoopNest`).

        :param shape, sizes: symbolic shape (a tuple of the tensor's rank) and sizes of the
                             operand.
        """
        ctx = LoopContext(extent=dict(enumerate(self.extents(*shape))), sizes=dict(sizes))
        levels = []
        parent = None
        for k, lvl in enumerate(self.levels):
            parent = lvl.loop(k, parent, ctx)
            ctx.coords[k] = parent.coord
            levels.append(parent)
        coords = {f'c{k}': l.coord for k, l in enumerate(levels)}
        dims = tuple(sympy.sympify(d, locals={n: sympy.Symbol(n) for n in coords}).xreplace(
            {sympy.Symbol(n): e for n, e in coords.items()}) for d in self.dims)
        return LoopNest(levels, dims, self.member_names)

    # ------------------------------------------------------------------ views
    @property
    def T(self) -> 'SparseFormat':
        """The transposed view: the same storage, row and column coordinates swapped (a
        matrix format's)."""
        if self.rank != 2:
            raise errors.UnsupportedOperationError(f'{self!r}: .T of a rank-{self.rank} format')
        name = self.transpose_name or (self.name[:-1] if self.name.endswith('T') and self.name[:-1] in _FORMATS
                                       else self.name + 'T')
        if name in _FORMATS:
            return _FORMATS[name]
        fmt = SparseFormat(name,
                           self.levels,
                           lambda r, c, _e=self.extents: _e(c, r),
                           (self.dims[1], self.dims[0]),
                           scipy_format=None,
                           transpose_name=self.name,
                           block=(self.block[1], self.block[0]),
                           doc=f'Transposed view of {self.name}: same arrays, coordinates swapped.')
        if getattr(self, 'spelling', None):
            fmt.spelling = f'{self.spelling}.T'
        return register_format(fmt)

    # ------------------------------------------------------------------ annotation
    def __getitem__(self, args) -> dace.data.Structure:
        """``FMT[value_dtype, rows, cols]`` or ``FMT[value_dtype, rows, cols, dace.int64]``
        (index dtype; int32 by default); a tensor format takes as many dimensions as its rank
        (``ss.COO[dace.float64, I, J, K]``). Size symbols can be named through :meth:`type`."""
        if not isinstance(args, tuple):
            args = (args, )
        return self.type(*args).structure()

    def with_rank(self, rank: int) -> 'SparseFormat':
        """This format for tensors of ``rank`` dimensions (formats of one rank: itself, or a
        ShapeError)."""
        if rank != self.rank:
            raise errors.ShapeError(f'{self!r} stores tensors of {self.rank} dimensions, not {rank}' +
                                    ('; ss.COO and ss.CSF store tensors of any rank' if self.rank == 2 else ''))
        return self

    def type(self, dtype, *args, **sizes) -> 'SparseType':
        index_dtype, shape = None, []
        for e in args:
            if index_dtype is None and isinstance(e, dace.typeclass):
                index_dtype = e
            elif index_dtype is None and isinstance(e, type) and issubclass(e, np.integer):
                index_dtype = dace.dtype_to_typeclass(e)
            elif index_dtype is None and _is_dimension(e):
                shape.append(e)
            else:
                raise TypeError(f'{self.name}[...]: unexpected annotation argument {e!r}; expected a dimension '
                                '(a symbol, a number or a string) or, last, an index dtype (dace.int32 or dace.int64)')
        if len(shape) < 1:
            raise TypeError(f'{self.name}[...]: no dimensions given')
        return SparseType(self.with_rank(len(shape)), dtype, tuple(shape), index_dtype or dace.int32, sizes)

    def __repr__(self):
        return getattr(self, 'spelling', None) or f'ss.{self.name}'


class LoopNest:
    """A full iteration over the stored entries of a format: its levels' loops, outermost
    first (:class:`~sdfgsparse.formats.levels.LevelLoop`), the tensor ``coords`` of an entry
    (a matrix's ``row`` and ``col``) and the position ``value_pos`` of its value, all
    symbolic; storage reads are :func:`~sdfgsparse.formats.levels.member` applications named
    by ``members``."""

    def __init__(self, levels: List[LevelLoop], coords: Sequence, members: Sequence[str]):
        self.levels = levels
        self.coords = tuple(coords)
        self.value_pos = levels[-1].pos
        self.members = list(members)

    @property
    def row(self):
        return matrix_coord(self.coords, 0)

    @property
    def col(self):
        return matrix_coord(self.coords, 1)

    @property
    def guards(self) -> list:
        return [l.guard for l in self.levels if l.guard is not None]

    @property
    def loops(self) -> List[LevelLoop]:
        """The levels that open a loop."""
        return [l for l in self.levels if l.has_loop]


def widen_size_symbols(sdfg) -> None:
    """Make the symbols that size an int64-index sparse structure int64 in ``sdfg`` and
    every SDFG nested in it. DaCe types a symbol by the first object that names it
    (``dace.symbol('N')`` is int32, whether in ``A``'s annotation or ``x``'s), and a
    dimension of 2**32 + 1000 passed as int32 reached the kernels as 1000."""
    wide = set()
    graphs = list(sdfg.all_sdfgs_recursive())
    for g in graphs:
        for desc in g.arrays.values():
            if is_sparse_desc(desc):
                st = sparse_type_of(desc)
                if st.index_dtype == dace.int64:
                    wide |= st.free_symbols
    for g in graphs:
        for name in wide & set(g.symbols):
            if g.symbols[name] != dace.int64:
                g.symbols[name] = dace.int64


def matrix_coord(coords, d: int):
    """A matrix's row (``d`` 0) or column (1) of ``coords`` (an UnsupportedOperationError
    for a tensor of another rank: 2-D code must not read a tensor as a matrix)."""
    if len(coords) != 2:
        raise errors.UnsupportedOperationError(f'a rank-{len(coords)} tensor has no {("rows", "columns")[d]}: '
                                               'this operation takes matrices')
    return coords[d]


def _is_dimension(v) -> bool:
    """Whether an annotation argument is a dimension: a number, a string or a symbolic
    expression (not a dtype)."""
    if isinstance(v, bool):
        return False
    return isinstance(v, (int, np.integer, str)) or dace.symbolic.issymbolic(v) or isinstance(v, sympy.Basic)


def _typename(t: dace.typeclass) -> str:
    return t.to_string() if hasattr(t, 'to_string') else str(t)


def _size(v):
    """A symbolic size as one exact division over a common denominator
    (:func:`sdfgsparse._symbolic.integral`: C would round each term of ``K*N/2 + M*N/2``
    down); constants as they are."""
    return integral(v) if dace.symbolic.issymbolic(v) else v


class SparseType:
    """An annotated sparse type (a matrix, or a tensor of the format's rank): format,
    value/index dtypes, shape and size symbols."""

    def __init__(self, fmt: SparseFormat, dtype, shape, index_dtype=dace.int32, sizes=None, uid=None):
        if not isinstance(dtype, dace.typeclass):
            dtype = dace.dtype_to_typeclass(dtype)
        if dtype not in VALUE_DTYPES:
            raise errors.DTypeError(f'{fmt.name}: value dtype {dtype} is not supported; use one of '
                                    f'{", ".join(map(str, VALUE_DTYPES))}')
        if index_dtype not in INDEX_DTYPES:
            raise errors.DTypeError(f'{fmt.name}: index dtype {index_dtype} is not supported; use int32 or int64')
        self.fmt = fmt
        self.dtype = dtype
        self.index_dtype = index_dtype
        if len(shape) != fmt.rank:
            raise errors.ShapeError(f'{fmt!r}: a shape of {len(shape)} dimensions for a rank-{fmt.rank} format')
        self.shape = tuple(_size(dace.symbolic.pystr_to_symbolic(v) if isinstance(v, str) else v) for v in shape)
        sizes = dict(sizes or {})
        if uid is None:
            uid = _site_uid((fmt.name, _typename(dtype), *map(str, self.shape), _typename(index_dtype)) +
                            tuple(sorted((k, str(v)) for k, v in sizes.items())))
        for key in fmt.size_keys:
            if key not in sizes:
                sizes[key] = dace.symbol(f'ss{uid}_{key}', dace.int64)
            elif isinstance(sizes[key], str):
                sizes[key] = dace.symbol(sizes[key], dace.int64)
        self.sizes = sizes

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def rows(self):
        """A matrix's rows (an UnsupportedOperationError for a tensor of another rank)."""
        return matrix_coord(self.shape, 0)

    @property
    def cols(self):
        """A matrix's columns (an UnsupportedOperationError for a tensor of another rank)."""
        return matrix_coord(self.shape, 1)

    @property
    def dim_keys(self) -> Tuple[str, ...]:
        """The structure members that hold symbolic dimensions: ``rows`` / ``cols`` of a
        matrix, ``dim0`` ... of a tensor of another rank."""
        return ('rows', 'cols') if self.rank == 2 else tuple(f'dim{d}' for d in range(self.rank))

    @property
    def name(self) -> str:
        # Constant dimensions are part of the type name (a Structure member cannot be a
        # plain integer in DaCe 1.0.2); symbolic ones are members (:attr:`dim_keys`).
        if self.rank == 2:
            dims = ''.join(f'_{tag}{int(v)}' for tag, v in zip('rc', self.shape) if not dace.symbolic.issymbolic(v))
        else:
            dims = ''.join(f'_d{d}x{int(v)}' for d, v in enumerate(self.shape) if not dace.symbolic.issymbolic(v))
        return f'ss_{self.fmt.name}_{_typename(self.dtype)}_{_typename(self.index_dtype)}{dims}'

    @property
    def T(self) -> 'SparseType':
        return SparseType(self.fmt.T, self.dtype, (self.cols, self.rows), self.index_dtype, self.sizes, uid=-1)

    def member_shapes(self):
        return self.fmt.member_shapes(self.shape, self.sizes)

    def structure(self, transient: bool = False) -> dace.data.Structure:
        members = {}
        for name, size in self.member_shapes().items():
            dt = self.dtype if name == 'vals' else self.index_dtype
            members[name] = dace.data.Array(dt, [_size(size)])
        for key, v in zip(self.dim_keys, self.shape):
            if dace.symbolic.issymbolic(v):
                members[key] = _settable(v)
        return dace.data.Structure(members, name=self.name, transient=transient)

    @property
    def free_symbols(self):
        res = set()
        for v in (*self.shape, *self.sizes.values()):
            if dace.symbolic.issymbolic(v):
                res |= {str(s) for s in sympy.sympify(v).free_symbols}
        return res

    def __repr__(self):
        return f'{self.fmt!r}[{self.dtype}, {", ".join(map(str, self.shape))}, index={self.index_dtype}]'


_AUTO_SIZE = re.compile(r'ss[0-9a-f]{8}_\w+')


def own_size_symbols(descs) -> None:
    """Give each sparse parameter its own generated size symbols, in the mapping ``descs``
    (parameter name -> descriptor or None), in place.

    An annotation makes its size symbols once (``ss<site>_n1``, the number of stored
    entries), so one alias annotating two parameters (``T = ss.CSR[...]``;
    ``def f(A: T, B: T)``) gave both one entry count. A parameter whose generated symbols
    an earlier one has gets renamed copies (``ss<site>_n1_B``); sizes the user named
    (``ss.CSR.type(..., n1='NNZ')``) stay shared."""
    seen = set()
    for name, desc in list(descs.items()):
        if not is_sparse_desc(desc):
            continue
        st = sparse_type_of(desc)
        auto = {k: str(v) for k, v in st.sizes.items() if _AUTO_SIZE.fullmatch(str(v))}
        if set(auto.values()) & seen:
            sizes = {k: (f'{auto[k]}_{name}' if k in auto else v) for k, v in st.sizes.items()}
            own = SparseType(st.fmt, st.dtype, st.shape, st.index_dtype, sizes, uid=-1)
            descs[name] = own.structure(transient=desc.transient)
        seen |= set(auto.values())


_NAME_RE = re.compile(r'ss_(?P<fmt>\w+?)_(?P<dt>float32|float64|int32|int64)_(?P<it>int32|int64)'
                      r'(_r(?P<r>\d+))?(_c(?P<c>\d+))?(?P<dims>(_d\d+x\d+)*)')


def is_sparse_desc(desc) -> bool:
    return isinstance(desc, dace.data.Structure) and _NAME_RE.fullmatch(desc.name or '') is not None


def mark_ours(sdfg):
    """Mark ``sdfg`` as built by sdfgsparse (``ss.compile``, ``ss.optimize``, the torch
    frontend): :func:`is_ours` then holds for it even without sparse data. Returns it."""
    sdfg.__dict__['_sdfgsparse_ours'] = True
    return sdfg


_PARSING = threading.local()


@contextlib.contextmanager
def parsing_ours():
    """While parsing a program for sdfgsparse (``ss.compile``, ``ss.optimize``, the torch
    frontend) in this thread: what the frontend builds is ours (:func:`is_parsing_ours`)."""
    before = getattr(_PARSING, 'on', False)
    _PARSING.on = True
    try:
        yield
    finally:
        _PARSING.on = before


def is_parsing_ours() -> bool:
    """Whether this thread is inside :func:`parsing_ours`."""
    return getattr(_PARSING, 'on', False)


def is_ours(sdfg) -> bool:
    """Whether ``sdfg`` holds sparse data (in any nested SDFG) or sdfgsparse built it
    (:func:`mark_ours`): sdfgsparse's changes of DaCe's behaviour (results that are not
    views, the compiled program's lock, the build policy, NaN-propagating ``np.maximum``)
    apply to such SDFGs only; any other DaCe program is built and run as DaCe does."""
    if sdfg is None:
        return False
    if sdfg.__dict__.get('_sdfgsparse_ours'):
        return True
    return any(is_sparse_desc(d) for g in sdfg.all_sdfgs_recursive() for d in g.arrays.values())


_TYPE_CACHE: Dict[int, tuple] = {}


#: The function that holds a dimension a structure member cannot be as it is (:func:`_settable`)
_SIZE = sympy.Function('ss_size')


def _settable(e):
    """A symbolic dimension as a structure member. DaCe 1.0.2's ``Structure`` sets
    ``transient`` on every member, which a sympy sum (``M + K``: the rows of a
    concatenation) does not take: such an expression is kept as ``ss_size(M + K)``, which
    does (and has the same free symbols)."""
    try:
        e.transient = False
        return e
    except AttributeError:
        return _SIZE(e)


def _unwrapped(e):
    """Inverse of :func:`_settable` (also of its text, after a JSON round trip)."""
    if isinstance(e, sympy.core.function.AppliedUndef) and e.func.__name__ == 'ss_size' and len(e.args) == 1:
        return e.args[0]
    return e


def sparse_type_of(desc: dace.data.Structure) -> SparseType:
    """Recover the :class:`SparseType` a structure was built from (its name and member shapes).
    Results are cached per descriptor object (the call path asks on every call)."""
    hit = _TYPE_CACHE.get(id(desc))
    if hit is not None and hit[0] is desc:
        return hit[1]
    st = _sparse_type_of(desc)
    if len(_TYPE_CACHE) < 4096:
        _TYPE_CACHE[id(desc)] = (desc, st)
    return st


def _sparse_type_of(desc: dace.data.Structure) -> SparseType:
    m = _NAME_RE.fullmatch(desc.name or '') if isinstance(desc, dace.data.Structure) else None
    if m is None:
        raise TypeError(f'{desc} is not a sparse structure made by sdfgsparse.formats')
    fmt = get_format(m.group('fmt'))
    dtype = getattr(dace, m.group('dt'))
    itype = getattr(dace, m.group('it'))
    members = desc.members

    def sym(v):
        return _unwrapped(dace.symbolic.pystr_to_symbolic(v) if isinstance(v, str) else v)

    if fmt.rank == 2:
        shape = (int(m.group('r')) if m.group('r') else sym(members['rows']),
                 int(m.group('c')) if m.group('c') else sym(members['cols']))
    else:
        fixed = {int(d): int(v) for d, v in re.findall(r'_d(\d+)x(\d+)', m.group('dims') or '')}
        shape = tuple(fixed[d] if d in fixed else sym(members[f'dim{d}']) for d in range(fmt.rank))
    sizes = {}
    for k, lvl in enumerate(fmt.levels):
        if isinstance(lvl, Compressed):
            sizes[f'n{k}'] = members[f'crd{k}'].shape[0]
        elif isinstance(lvl, Offset):
            sizes['nd'] = members[f'off{k}'].shape[0]
    if 'K' in fmt.size_keys:
        # slots per entry of the outer level: rows for ELL, columns for its transposed view
        sizes['K'] = sympy.simplify(members['vals'].shape[0] / fmt.extents(*shape)[0])
    if 'L' in fmt.size_keys:
        sizes['L'] = sympy.simplify(members['vals'].shape[0] / sizes['nd'])
    return SparseType(fmt, dtype, shape, itype, sizes, uid=-1)
