"""What a sparse library node's ``validate()`` checks, in one place.

DaCe calls ``node.validate(sdfg, state)`` for every node from ``SDFG.validate()`` (which
``SDFG.compile`` runs before it generates any code) and wraps what it raises in
``InvalidSDFGNodeError`` ("Node validation failed: ...", the original error as
``__cause__``). An SDFG built by our frontends is wired right by construction; one loaded
from a file, edited in VS Code or rewritten by a transformation may not be, and a wrong
connection would otherwise reach code generation (a ``KeyError`` deep in an expansion, or
a kernel reading past an array). Each node's ``validate`` lists its operands through a
:class:`Wiring` and states the rules between them; every check raises a typed error of
:mod:`sdfgsparse.errors` whose message names the node (its label) and the connector:

- presence (:class:`~sdfgsparse.errors.ConnectorError`): every connector the node's
  expansions read or write exists on the right side and is connected; a sparse operand
  ``A`` has one connector ``_A_<member>`` per member of its format
  (:func:`~sdfgsparse.ops.base.member_conn`), and a connector the node does not take is an
  error (:meth:`Wiring.finish`);
- ranks (:class:`~sdfgsparse.errors.ShapeError`): a dense operand is a vector or a matrix
  as the node expects (a ``Scalar`` passes: one element reaches any rank; so does a part of
  an array whose rank the node's ``dense_ranks`` does not record);
- dtypes (:class:`~sdfgsparse.errors.DTypeError`): dense data are numbers; a sparse
  operand's values are of a supported value dtype and its index members all of one index
  dtype (int32 or int64), the ones of its structure; a result has the dtype the node
  computes (:meth:`Wiring.computes`);
- formats (:class:`~sdfgsparse.errors.FormatMismatchError`): a result's format is one the
  node writes; a result that takes its operand's pattern (its index arrays are copied) has
  the format the node reads the operand in, the same members, each of the operand's size;
- sizes (:class:`~sdfgsparse.errors.ShapeError`): sizes that must agree (``A @ x``: A's
  columns and x's length) raise when they definitely differ (two numbers, or a difference
  that is a nonzero number: ``N + 1`` against ``N``) and pass when that cannot be decided
  (``N`` against ``7``), as DaCe's ``Gemm.validate`` does; no warning: the frontend records
  such rules for every call to check (:mod:`sdfgsparse.ops.shape_checks`), and a warning
  here would repeat on every compile.

Where the structure behind an operand cannot be found (the FPGA lowering flattens it into
plain member arrays) its format and shape are undecidable: only its connectors and their
dtypes are checked. Nothing here changes the graph.
"""
from typing import Dict, List, NamedTuple, Optional, Sequence, Tuple

import dace
import sympy

from sdfgsparse import errors
from sdfgsparse.formats import SparseType
from sdfgsparse.formats.format import INDEX_DTYPES, VALUE_DTYPES
from sdfgsparse.ops.base import member_conn

__all__ = ['Size', 'SparseOperand', 'DenseOperand', 'Wiring', 'definitely_differ', 'concat_size']

#: NumPy kinds of the dtypes dense data may have: bool, integers, floats, complex
NUMBER_KINDS = 'biufc'

#: The exceptions that mean "the structure behind this operand cannot be found"
_UNFOUND = (errors.SparseError, KeyError, TypeError, ValueError, AttributeError, IndexError)


class Size(NamedTuple):
    """A size of an operand (an int or a sympy expression; None: unknown) and how an error
    names it (``'the columns of A (_A_*)'``)."""
    value: object
    what: str


def definitely_differ(a, b) -> bool:
    """Whether sizes ``a`` and ``b`` are certainly different: both numbers that differ, or
    a difference that is a nonzero number. Symbolic differences (``N - 7``) are undecidable:
    False."""
    try:
        diff = sympy.expand(sympy.sympify(a) - sympy.sympify(b))
    except (TypeError, ValueError, sympy.SympifyError):
        return False
    return bool(diff.is_Number) and diff != 0


class SparseOperand:
    """A sparse operand (or result) of a node as :meth:`Wiring.sparse` found it."""

    def __init__(self, prefix: str, output: bool, conns: Dict[str, str], stored: Optional[SparseType],
                 seen: Optional[SparseType], arrays: Dict[str, dace.data.Data]):
        self.prefix, self.output = prefix, output
        self.conns = conns  #: member -> connector
        self.stored = stored  #: the type of the structure behind it (None: not found)
        self.seen = seen  #: the type the node sees (its transposition and view applied)
        self.arrays = arrays  #: member -> descriptor of the connected array
        vals = arrays.get('vals')
        self.dtype = vals.dtype if vals is not None else None

    @property
    def shown(self) -> str:
        return f'{self.prefix} ({member_conn(self.prefix, "*")})'

    @property
    def conn(self) -> str:
        """The connector that carries the values (named by dtype errors)."""
        return self.conns.get('vals', member_conn(self.prefix, 'vals'))

    @property
    def rows(self) -> Size:
        return Size(self.seen.rows if self.seen is not None else None, f'the rows of {self.shown}')

    @property
    def cols(self) -> Size:
        return Size(self.seen.cols if self.seen is not None else None, f'the columns of {self.shown}')

    def dims(self) -> List[Size]:
        """Its sizes, one per dimension (a matrix's rows and columns; none where its type is
        unknown)."""
        if self.seen is None:
            return []
        if self.seen.rank == 2:
            return [self.rows, self.cols]
        return [Size(v, f'dimension {d} of {self.shown}') for d, v in enumerate(self.seen.shape)]


class DenseOperand:
    """A dense operand (or result) of a node as :meth:`Wiring.dense` found it."""

    def __init__(self, conn: str, desc: Optional[dace.data.Data], shaped: bool = True):
        self.conn = conn
        self.desc = desc  #: what the connector takes (None: unknown)
        self.dtype = desc.dtype if desc is not None else None
        #: its shape; None for a Scalar (one element reaches any rank), unknown data, or
        #: (not ``shaped``) a part of an array whose rank the node does not record
        self.shape = tuple(desc.shape) if shaped and isinstance(desc, dace.data.Array) else None

    def dim(self, d: int) -> Size:
        known = self.shape is not None and -len(self.shape) <= d < len(self.shape)
        if self.shape is not None and len(self.shape) == 1:
            what = f'the length of {self.conn}'
        else:
            what = f'dimension {d % len(self.shape) if known else d} of {self.conn}'
        return Size(self.shape[d] if known else None, what)

    @property
    def rank(self) -> Size:
        return Size(len(self.shape) if self.shape is not None else None, f'the rank of {self.conn}')


def _kind(dtype) -> Optional[str]:
    """NumPy's kind of a DaCe dtype (``'f'``, ``'i'``, ...); None for a pointer, a struct or
    an opaque type."""
    try:
        return dtype.as_numpy_dtype().kind
    except Exception:  # (a pointer or an opaque type has no NumPy dtype)
        return None


def _name(dtype) -> str:
    """``float64``, not C's ``double``."""
    try:
        return dtype.to_string()
    except Exception:  # (a pointer or an opaque type)
        return str(dtype)


def _ranks(ranks: Sequence[int]) -> str:
    names = {1: 'a vector (1-D)', 2: 'a matrix (2-D)'}
    return ' or '.join(names.get(r, f'a {r}-D array') for r in ranks)


def _shown_desc(desc: dace.data.Data) -> str:
    return f'{_name(desc.dtype)}[{", ".join(map(str, desc.shape))}]'


class Wiring:
    """The connections of ``node`` in ``state``, checked operand by operand (see the module).

    A node's ``validate`` asks for each operand (:meth:`sparse`, :meth:`dense`), states the
    rules between them (:meth:`same`, :meth:`computes`, :meth:`same_pattern`,
    :meth:`format_in`) and ends with :meth:`finish`, which refuses the connectors no
    operand accounted for."""

    def __init__(self, node, sdfg: dace.SDFG, state: dace.SDFGState):
        self.node, self.sdfg, self.state = node, sdfg, state
        self.label = node.label
        self._taken = {False: set(), True: set()}  # output? -> connectors accounted for

    # ------------------------------------------------------------------ helpers
    def fail(self, cls, message: str):
        raise cls(f'{self.label}: {message}')

    def _side(self, output: bool):
        return self.node.out_connectors if output else self.node.in_connectors

    def _edge(self, conn: str, output: bool):
        if output:
            return next((e for e in self.state.out_edges(self.node) if e.src_conn == conn), None)
        return next((e for e in self.state.in_edges(self.node) if e.dst_conn == conn), None)

    def _data(self, edge) -> Optional[dace.data.Data]:
        try:
            return self.sdfg.arrays[edge.data.data] if edge.data.data else None
        except KeyError:
            return None  # (DaCe's own validation names the memlet)

    def _connected(self, conn: str, output: bool, what: str):
        """The edge at ``conn`` (which must exist on its side and be connected)."""
        if conn not in self._side(output):
            side = 'an input' if output else 'an output'
            wrong = f' (it is {side} connector here)' if conn in self._side(not output) else ''
            self.fail(errors.ConnectorError, f'connector {conn} ({what}) is missing{wrong}')
        edge = self._edge(conn, output)
        if edge is None:
            self.fail(errors.ConnectorError, f'connector {conn} ({what}) is not connected')
        self._taken[output].add(conn)
        return edge

    # ------------------------------------------------------------------ operands
    def sparse(self, prefix: str, output: bool = False) -> SparseOperand:
        """The sparse operand ``prefix`` (an input, or a result with ``output``): one connected
        connector per member of its format; index members of one index dtype, values of a
        value dtype, both those of its structure."""
        kind = 'result' if output else 'operand'
        lead = member_conn(prefix, '')
        side = self._side(output)
        present = sorted(c for c in side if c.startswith(lead))
        stored = self._stored(prefix)
        if stored is not None:
            members = stored.fmt.member_names
            listed = ', '.join(member_conn(prefix, m) for m in members)
            for m in members:
                self._connected(member_conn(prefix, m), output,
                                f'member {m} of the {stored.fmt.name} {kind} {prefix}: {listed}')
            for c in present:
                if c[len(lead):] not in members:
                    self.fail(errors.ConnectorError, f'connector {c}: the {stored.fmt.name} {kind} {prefix} has no '
                              f'member {c[len(lead):]} (its connectors: {listed})')
        elif not present:
            self.fail(errors.ConnectorError, f'no connector of the sparse {kind} {prefix} '
                      f'({member_conn(prefix, "<member>")}, one per member of its format)')
        conns = {c[len(lead):]: c for c in present}
        edges = {m: self._connected(c, output, f'member {m} of the sparse {kind} {prefix}')
                 for m, c in conns.items()}
        arrays = {m: d for m, e in edges.items() if (d := self._data(e)) is not None}
        self._member_dtypes(prefix, stored, conns, arrays)
        seen = stored
        if stored is not None and not output:
            try:
                seen = self.node.operand_type(self.state, prefix)
            except _UNFOUND:
                seen = None
        return SparseOperand(prefix, output, conns, stored, seen, arrays)

    def _stored(self, prefix: str) -> Optional[SparseType]:
        try:
            return self.node.sparse_type(self.state, prefix)
        except _UNFOUND:
            return None  # undecidable (e.g. flattened into plain arrays for the FPGA)

    def _member_dtypes(self, prefix: str, stored: Optional[SparseType], conns: Dict[str, str],
                       arrays: Dict[str, dace.data.Data]) -> None:
        """Values of a value dtype, index members of one index dtype; both the structure's."""
        for m, d in arrays.items():
            if isinstance(d, dace.data.Structure):
                self.fail(errors.ConnectorError, f'connector {conns[m]} takes the array of member {m} of {prefix} '
                          '(through a view of it), not a whole structure')
        vals = arrays.get('vals')
        if vals is not None and vals.dtype not in VALUE_DTYPES:
            self.fail(errors.DTypeError, f'connector {conns["vals"]}: value dtype {_name(vals.dtype)} is not '
                      f'supported; use one of {", ".join(map(_name, VALUE_DTYPES))}')
        if vals is not None and stored is not None and vals.dtype != stored.dtype:
            self.fail(errors.DTypeError, f'connector {conns["vals"]}: values of dtype {_name(vals.dtype)}, but the '
                      f'structure of {prefix} holds {_name(stored.dtype)}')
        index = [(conns[m], d.dtype) for m, d in arrays.items() if m != 'vals']
        for conn, dtype in index:
            if dtype not in INDEX_DTYPES:
                self.fail(errors.DTypeError, f'connector {conn}: index dtype {_name(dtype)} is not supported; use '
                          'int32 or int64')
        for (c1, t1), (c2, t2) in zip(index, index[1:]):
            if t1 != t2:
                self.fail(errors.DTypeError, f'connectors {c1} ({_name(t1)}) and {c2} ({_name(t2)}): the index '
                          f'members of {prefix} must have one dtype')
        if index and stored is not None and index[0][1] != stored.index_dtype:
            self.fail(errors.DTypeError, f'connector {index[0][0]}: indices of dtype {_name(index[0][1])}, but the '
                      f'structure of {prefix} holds {_name(stored.index_dtype)}')

    def dense(self, conn: str, ranks: Optional[Sequence[int]] = None, output: bool = False,
              required: bool = True) -> Optional[DenseOperand]:
        """The dense operand at ``conn`` (an output with ``output``): connected, a dense
        array of one of ``ranks`` (None: any), of a number dtype. Not ``required``: None
        when the node has no such connector."""
        if not required and conn not in self._side(output):
            return None
        what = f'the dense {"result" if output else "operand"}'
        edge = self._connected(conn, output, what)
        data = self._data(edge)
        if data is None:
            return DenseOperand(conn, None)
        if isinstance(data, dace.data.Structure):
            self.fail(errors.ConnectorError, f'connector {conn} takes a dense array, but it is connected to the '
                      f'structure {edge.data.data}')
        desc = self.node.connected(self.state, conn)
        # a part of an array (X[0:M, 0] once DaCe removed the view X[:, 0]) has the rank the
        # frontend recorded (dense_ranks); without one, its unit dimensions are ambiguous
        shaped = desc is data or conn in (getattr(self.node, 'dense_ranks', None) or {})
        if ranks is not None and shaped and isinstance(desc, dace.data.Array) and len(desc.shape) not in ranks:
            self.fail(errors.ShapeError, f'connector {conn} takes {_ranks(ranks)}, but it is connected to a '
                      f'{len(desc.shape)}-D array {_shown_desc(desc)} ({edge.data.data})')
        kind = _kind(desc.dtype)
        if kind is None or kind not in NUMBER_KINDS:
            self.fail(errors.DTypeError, f'connector {conn}: dtype {_name(desc.dtype)} ({edge.data.data}) is not a '
                      'number type')
        return DenseOperand(conn, desc, shaped)

    # ------------------------------------------------------------------ rules
    def same(self, *sizes: Size) -> None:
        """The sizes are equal: :class:`~sdfgsparse.errors.ShapeError` when two of them
        definitely differ (:func:`definitely_differ`)."""
        known = [s for s in sizes if s.value is not None]
        for i, a in enumerate(known):
            for b in known[i + 1:]:
                if definitely_differ(a.value, b.value):
                    self.fail(errors.ShapeError, f'{a.what} ({a.value}) and {b.what} ({b.value}) differ')

    def computes(self, result, *operands, dtype=None) -> None:
        """``result`` (an operand) has the dtype the node computes: ``dtype``, or DaCe's
        result type of the ``operands``' dtypes (the frontend's choice). Undecidable, so
        not checked, where a dtype is unknown or complex (DaCe's rule then depends on the
        order, which a transformation may change)."""
        if dtype is None:
            found = [o.dtype for o in operands]
            if any(d is None or _kind(d) == 'c' for d in found):
                return
            dtype = dace.dtypes.result_type_of(*found) if len(found) > 1 else found[0]
        if result is not None and result.dtype is not None and result.dtype != dtype:
            frm = ', '.join(f'{o.conn} {_name(o.dtype)}' for o in operands)
            self.fail(errors.DTypeError, f'connector {result.conn}: dtype {_name(result.dtype)}, but the node '
                      f'computes {_name(dtype)}' + (f' (from {frm})' if frm else ''))

    def floating(self, result) -> None:
        """``result`` (an operand) holds floats (the node computes exponentials)."""
        if result is not None and result.dtype is not None and _kind(result.dtype) != 'f':
            self.fail(errors.DTypeError, f'connector {result.conn}: dtype {_name(result.dtype)}, but the node '
                      'computes floats (float32 or float64)')

    def same_pattern(self, out: SparseOperand, operand: SparseOperand) -> None:
        """Sparse result ``out`` takes ``operand``'s pattern (its index arrays are copied): the
        format the node sees the operand in, the same members, each of the operand's size,
        and the operand's shape."""
        if out.stored is not None and operand.seen is not None and out.stored.fmt.name != operand.seen.fmt.name:
            self.fail(errors.FormatMismatchError,
                      f'result {out.shown} is {out.stored.fmt.name}, but it takes the pattern (the index arrays) of '
                      f'{operand.shown}, which the node reads as {operand.seen.fmt.name}')
        if set(out.conns) != set(operand.conns):
            self.fail(errors.FormatMismatchError,
                      f'result {out.shown} has members {", ".join(sorted(out.conns))}, but it takes the pattern of '
                      f'{operand.shown}, whose members are {", ".join(sorted(operand.conns))}')
        for m, d in out.arrays.items():
            src = operand.arrays.get(m)
            if src is not None and isinstance(d, dace.data.Array) and isinstance(src, dace.data.Array):
                self.same(Size(d.total_size, f'the size of {out.conns[m]}'),
                          Size(src.total_size, f'the size of {operand.conns[m]}'))
        if out.seen is not None and operand.seen is not None and out.seen.rank != operand.seen.rank:
            self.fail(errors.ShapeError, f'result {out.shown} has {out.seen.rank} dimensions, but it takes the pattern '
                      f'of {operand.shown}, which has {operand.seen.rank}')
        for a, b in zip(out.dims(), operand.dims()):
            self.same(a, b)

    def format_in(self, operand: SparseOperand, names: Tuple[str, ...], why: str = '') -> None:
        """The format of ``operand`` as the node sees it is one of ``names``."""
        st = operand.seen
        if st is not None and st.fmt.name not in names:
            self.fail(errors.FormatMismatchError, f'{"result" if operand.output else "operand"} {operand.shown} is '
                      f'{st.fmt.name}; the node {"writes" if operand.output else "reads"} '
                      f'{" or ".join(names)}{why}')

    def finish(self) -> None:
        """Refuse the connectors no operand accounted for (the epilogue inputs of a fused
        node, ``_epi_*``, are accounted for by its ``epilogue_inputs``)."""
        for conn in sorted(getattr(self.node, 'epilogue_inputs', None) or {}):
            self._connected(conn, False, 'an input of the fused epilogue')
        for output in (False, True):
            extra = sorted(set(self._side(output)) - self._taken[output])
            if extra:
                self.fail(errors.ConnectorError, f'unexpected {"output" if output else "input"} connector {extra[0]}: '
                          f'the node takes {", ".join(sorted(self._taken[output])) or "none"}')


def concat_size(parts: List[SparseOperand], rows: bool) -> Size:
    """The rows (``rows``) or columns of ``parts`` stacked: their sum (None when one is unknown)."""
    sizes = [(p.rows if rows else p.cols).value for p in parts]
    total = None if any(s is None for s in sizes) else sum(sizes, sympy.Integer(0))
    return Size(total, f'the {"rows" if rows else "columns"} of {", ".join(p.prefix for p in parts)} together')
