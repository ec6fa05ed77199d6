"""Shared machinery of the sparse library nodes.

A sparse operand ``A`` (a ``Structure`` made by :mod:`sdfgsparse.formats`) reaches a
library node through one view per member: ``A --views--> A_pos1 --> node:_A_pos1``.
The node recovers the operand's :class:`SparseType` by following those edges back to
the structure, so the *data* stays the source of truth for the format; the node itself
only carries choices a transformation may change (``transpose_A``, ``schedule``).

A node class defines its portable ``pure`` expansion; the targets register theirs onto
it (:mod:`sdfgsparse.targets.registry`). :func:`use_implementation` (or the environment
variable ``SDFGSPARSE_IMPLEMENTATION``, read once at import) makes every sparse node
created while it is active take another implementation where the node has it.

Sparse *results* are transient structures written member by member the same way
(``node:_out_vals --> out_vals --views--> out``).
"""
import contextlib
import os
from typing import Dict, List, Optional, Tuple

import dace
import sympy
from dace import properties
from dace.sdfg import nodes
from dace.sdfg.state import SDFGState

from sdfgsparse import errors
from sdfgsparse.formats import SparseType, is_sparse_desc, sparse_type_of
from sdfgsparse.formats import views as _views
from sdfgsparse.lowering.graph import connector_desc

__all__ = ['SparseLibraryNode', 'FusableSparseNode', 'member_conn', 'member_memlet', 'resolve_alias',
           'transposed_alias', 'alias', 'view_alias', 'resolve_view', 'shown_name', 'concat_alias', 'concat_of',
           'add_sparse_input',
           'add_sparse_output', 'add_dense_input', 'add_dense_output', 'new_sparse_result', 'insert_node',
           'retype_sparse', 'sparse_consumers', 'change_argument_format', 'use_implementation',
           'implementation_override']

#: Suffix of the name that stands for ``X.T`` in a program (a zero-copy transposed view).
T_SUFFIX = '_ssT'


def member_conn(prefix: str, member: str) -> str:
    return f'_{prefix}_{member}'


def member_memlet(name: str, member: str, mdesc: dace.data.Data) -> dace.Memlet:
    """The whole member ``name.member`` (descriptor ``mdesc``), for the edge between a
    structure and a view of that member. Marked ``allow_oob``: DaCe 1.0.2's validation
    checks such a subset against the *structure's* shape (``(1,)``), which only passes
    while the member's size is symbolic; ``ss.CSR[dace.float32, 6, 4]`` (fixed sizes)
    failed with "Memlet subset out-of-bounds (A.pos1[0:7])"."""
    memlet = dace.Memlet.from_array(f'{name}.{member}', mdesc)
    memlet.allow_oob = True
    return memlet


def resolve_alias(name: str) -> Tuple[str, bool]:
    """``A_ssT_ssT`` -> (``A``, False); ``A_ssT`` -> (``A``, True)."""
    transposed = False
    while name.endswith(T_SUFFIX):
        name = name[:-len(T_SUFFIX)]
        transposed = not transposed
    return name, transposed


def transposed_alias(sdfg: dace.SDFG, name: str) -> str:
    """Register (once) the name that stands for ``name.T``; returns it."""
    if getattr(sdfg.arrays.get(name), VIEW_ATTR, None) is not None:
        return view_alias(sdfg, name, [_views.Transpose()], f'{shown_name(sdfg, name)}.T')
    base, tr = resolve_alias(name)
    alias = base if tr else base + T_SUFFIX
    if alias not in sdfg.arrays:
        st = sparse_type_of(sdfg.arrays[base])
        desc = st.T.structure(transient=True)
        sdfg.add_datadesc(alias, desc)
    return alias


#: Attribute of the descriptor that stands for a view in a program (:func:`view_alias`):
#: ``(stored data name, transposed, steps as JSON, how the view is shown in errors)``
VIEW_ATTR = '_ss_view'


def resolve_view(sdfg: dace.SDFG, name: str) -> Tuple[str, bool, str]:
    """``(stored data name, transposed, steps)`` of sparse data ``name``: an argument or a
    result (no steps: ``''``), an ``X.T`` alias, or a view made by :func:`view_alias`."""
    view = getattr(sdfg.arrays.get(name), VIEW_ATTR, None)
    if view is not None:
        return view[0], view[1], view[2]
    base, tr = resolve_alias(name)
    return base, tr, ''


def shown_name(sdfg: dace.SDFG, name: str) -> str:
    """How sparse data ``name`` appears in an error: ``A``, ``A.T``, ``A[2:5, :]``."""
    view = getattr(sdfg.arrays.get(name), VIEW_ATTR, None)
    if view is not None:
        return view[3]
    cat = getattr(sdfg.arrays.get(name), CONCAT_ATTR, None)
    if cat is not None:
        return cat[2]
    base, tr = resolve_alias(name)
    return f'{base}.T' if tr else base


def view_type(sdfg: dace.SDFG, name: str) -> SparseType:
    """The type of sparse data ``name`` as a program sees it (a view's own shape)."""
    base, tr, steps = resolve_view(sdfg, name)
    st = sparse_type_of(sdfg.arrays[base])
    st = st.T if tr else st
    return _views.view_type(st, _views.decode_steps(steps)) if steps else st


def view_alias(sdfg: dace.SDFG, name: str, steps, shown: str) -> str:
    """A new name that stands for sparse data ``name`` seen through ``steps`` (a list of
    :mod:`sdfgsparse.formats.views` steps): no storage; the operations that read it iterate
    the stored data through the view (a node's ``views``). ``shown``: the view in errors."""
    base, tr, old = resolve_view(sdfg, name)
    allsteps = _views.decode_steps(old) + list(steps)
    st = sparse_type_of(sdfg.arrays[base])
    desc = st.structure(transient=True)
    setattr(desc, VIEW_ATTR, (base, tr, _views.encode_steps(allsteps), shown))
    return sdfg.add_datadesc(f'{base}_ssV', desc, find_new_name=True)


#: Attribute of the descriptor that stands for a concatenation in a program
#: (:func:`concat_alias`): ``(axis, part names, how it is shown in errors)``
CONCAT_ATTR = '_ss_concat'


def concat_alias(sdfg: dace.SDFG, parts, axis: int, st: SparseType, shown: str) -> str:
    """A new name that stands for sparse data ``parts`` (names: arguments, results, views)
    concatenated along ``axis`` (0: rows, 1: columns), of type ``st`` (the type the
    concatenation has when it is materialised: its shape, dtype and capacity). No storage:
    the frontend splits a linear operation on it into one per part, and materialises it
    (a ``SparseConcat`` node) for the others; no node reads it directly."""
    desc = st.structure(transient=True)
    setattr(desc, CONCAT_ATTR, (int(axis), tuple(parts), shown))
    return sdfg.add_datadesc('__ss_cat', desc, find_new_name=True)


def concat_of(sdfg: dace.SDFG, name) -> Optional[Tuple[int, Tuple[str, ...]]]:
    """``(axis, parts)`` when ``name`` stands for a concatenation (:func:`concat_alias`), else None."""
    cat = getattr(sdfg.arrays.get(name), CONCAT_ATTR, None) if isinstance(name, str) else None
    return None if cat is None else (cat[0], cat[1])


def alias(sdfg: dace.SDFG, name: str) -> str:
    """Register (once) a second name for the sparse data ``name`` as it is (``A_ssT_ssT``:
    ``A`` itself), for a program variable bound to an argument (``B = A``); every op reads
    ``A`` through it (:func:`resolve_alias`), and a returned alias is copied, never handed
    out as the argument's storage. Returns it."""
    base, tr = resolve_alias(name)
    second = base + T_SUFFIX * (3 if tr else 2)
    if second not in sdfg.arrays:
        st = sparse_type_of(sdfg.arrays[base])
        sdfg.add_datadesc(second, (st.T if tr else st).structure(transient=True))
    return second


_OVERRIDE = {'name': os.environ.get('SDFGSPARSE_IMPLEMENTATION') or None}


def implementation_override() -> Optional[str]:
    """The implementation new sparse nodes take where they have it (None: their default)."""
    return _OVERRIDE['name']


@contextlib.contextmanager
def use_implementation(name: Optional[str]):
    """Within the block, new sparse nodes take implementation ``name`` where they have it.

    >>> import sdfgsparse as ss
    >>> with ss.targets.use_implementation('pure'):
    ...     pass  # programs parsed here expand every sparse node as a portable SDFG
    """
    old = _OVERRIDE['name']
    _OVERRIDE['name'] = name
    try:
        yield
    finally:
        _OVERRIDE['name'] = old


@properties.make_properties
class SparseLibraryNode(nodes.LibraryNode):
    """Base class: a library node with sparse operands wired member by member."""

    #: names of the sparse operand prefixes (``('A',)``)
    SPARSE_INPUTS: Tuple[str, ...] = ()
    SPARSE_OUTPUTS: Tuple[str, ...] = ()
    #: whether the expansions iterate a sparse input through a view (``views``); the
    #: frontends materialise a view before a node that does not
    ACCEPTS_VIEWS: bool = False

    dense_ranks = properties.DictProperty(key_type=str,
                                          value_type=int,
                                          desc='Dense connector -> the rank of the array it takes (set by the '
                                          'frontend; X[:, 0] reaches a 1-D connector through a 2-D memlet once DaCe '
                                          'removes the view)')

    views = properties.DictProperty(key_type=str,
                                    value_type=str,
                                    desc='Sparse input prefix -> the view of it the operation reads (slices and '
                                    'transpositions as JSON, sdfgsparse.formats.views), applied after '
                                    'transpose_<prefix>; no entry: the operand as it is')

    schedule_hint = properties.Property(dtype=str,
                                        default='auto',
                                        choices=['auto', 'parallel', 'sequential'],
                                        desc='How the expansion runs the outer loop: auto (parallel when the '
                                        'outer level owns the written dimension), parallel or sequential')
    io_lower_bound = properties.Property(dtype=str,
                                         default='',
                                         desc='Set by the SparseIOLowerBound pass: this operation\'s I/O lower bound '
                                         'in words (SOAP); not used by the expansions')

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        forced = implementation_override()
        if forced is not None and forced in self.implementations and self.implementation is None:
            self.implementation = forced

    def sparse_type(self, state: SDFGState, prefix: str) -> SparseType:
        """The operand's type as stored (before any transposition on the node)."""
        sdfg = state.parent
        for e in state.in_edges(self) if prefix in self.SPARSE_INPUTS else state.out_edges(self):
            conn = e.dst_conn if prefix in self.SPARSE_INPUTS else e.src_conn
            if conn and conn.startswith(f'_{prefix}_'):
                view = e.src if prefix in self.SPARSE_INPUTS else e.dst
                for ve in (state.in_edges(view) if prefix in self.SPARSE_INPUTS else state.out_edges(view)):
                    base = ve.data.data.split('.')[0]
                    if base in sdfg.arrays and is_sparse_desc(sdfg.arrays[base]):
                        return sparse_type_of(sdfg.arrays[base])
        raise errors.UnsupportedOperationError(f'{self.label}: cannot find the structure of sparse operand {prefix}')

    def operand_type(self, state: SDFGState, prefix: str) -> SparseType:
        """The operand's type as the operation sees it (transposed view, then the view in
        ``views``, applied)."""
        st = self.sparse_type(state, prefix)
        st = st.T if getattr(self, f'transpose_{prefix}', False) else st
        steps = self.views.get(prefix) if self.views else None
        return _views.view_type(st, _views.decode_steps(steps)) if steps else st

    @property
    def free_symbols(self):
        """DaCe's (symbolic properties), and the symbols of the views' bounds."""
        res = set(super().free_symbols)
        for steps in (self.views or {}).values():
            for s in _views.decode_steps(steps):
                res |= {str(x) for e in s.exprs for x in sympy.sympify(e).free_symbols}
        return res

    def member_arrays(self, state: SDFGState, prefix: str) -> Dict[str, dace.data.Data]:
        """Member name -> descriptor of the array connected for that member."""
        sdfg = state.parent
        res = {}
        edges = state.in_edges(self) if prefix in self.SPARSE_INPUTS else state.out_edges(self)
        for e in edges:
            conn = e.dst_conn if prefix in self.SPARSE_INPUTS else e.src_conn
            if conn and conn.startswith(f'_{prefix}_'):
                res[conn[len(prefix) + 2:]] = sdfg.arrays[e.data.data]
        return res

    def edge(self, state: SDFGState, conn: str):
        """The edge at connector ``conn`` (an input or an output); None when it is not
        connected."""
        for e in state.in_edges(self):
            if e.dst_conn == conn:
                return e
        for e in state.out_edges(self):
            if e.src_conn == conn:
                return e
        return None

    def connected(self, state: SDFGState, conn: str) -> dace.data.Data:
        """The descriptor of the data at connector ``conn`` as the node sees it (KeyError
        when not connected): the connected data, or the part its memlet selects
        (:func:`connector_desc`)."""
        e = self.edge(state, conn)
        if e is None:
            raise KeyError(f'{self.label}: connector {conn} is not connected')
        return connector_desc(state.parent, e, self.dense_ranks.get(conn) if self.dense_ranks else None)


@properties.make_properties
class FusableSparseNode(SparseLibraryNode):
    """A sparse node whose expansion can apply an element-wise epilogue to its dense result
    while it is produced (set by the ``SparseEpilogueFusion`` transformation)."""

    epilogue = properties.Property(dtype=str,
                                   default='',
                                   desc='Element-wise function of the result, a Python expression of __value and '
                                   'of the _epi_* inputs; empty for none')
    epilogue_inputs = properties.DictProperty(key_type=str,
                                              value_type=str,
                                              desc='Epilogue input connector (_epi_*) -> index template over the '
                                              'output dimensions, e.g. "{1}" for b[k] of element [i, k]')


# ---------------------------------------------------------------------- wiring helpers
def _member_view(sdfg: dace.SDFG, base: str, member: str, desc: dace.data.Data) -> str:
    name, _ = sdfg.add_view(f'{base}_{member}', desc.shape, desc.dtype, find_new_name=True)
    return name


def add_sparse_input(state: SDFGState, node: SparseLibraryNode, prefix: str, name: str) -> SparseType:
    """Connect the members of sparse data ``name`` (or an ``X.T`` alias) to ``node``.

    Returns the type the node sees (transposed if ``name`` is an alias of ``X.T``); sets
    ``node.transpose_<prefix>`` accordingly when the node has that property.
    """
    sdfg = state.parent
    if concat_of(sdfg, name) is not None:
        raise errors.UnsupportedOperationError(f'{node.label} does not read a concatenation ({shown_name(sdfg, name)}); '
                                               'split the operation per part or materialise it (SparseConcat)')
    base, transposed, steps = resolve_view(sdfg, name)
    desc = sdfg.arrays[base]
    st = sparse_type_of(desc)
    # Read from the node that wrote the data in this state, if any, so that the
    # dataflow orders the producer before this consumer.
    written = [n for n in state.data_nodes() if n.data == base and state.in_degree(n) > 0]
    acc = written[-1] if written else state.add_read(base)
    for member in st.fmt.member_names:
        mdesc = desc.members[member]
        view = _member_view(sdfg, base, member, mdesc)
        vnode = state.add_access(view)
        state.add_edge(acc, None, vnode, 'views', member_memlet(base, member, mdesc))
        conn = member_conn(prefix, member)
        node.add_in_connector(conn)
        state.add_edge(vnode, None, node, conn, dace.Memlet.from_array(view, sdfg.arrays[view]))
    if hasattr(node, f'transpose_{prefix}'):
        setattr(node, f'transpose_{prefix}', transposed)
    elif transposed and node.ACCEPTS_VIEWS:  # read as a view whose first step transposes
        steps = _views.encode_steps([_views.Transpose()] + _views.decode_steps(steps))
        transposed = False
    elif transposed:
        raise errors.UnsupportedOperationError(f'{node.label} does not take a transposed operand {prefix}')
    st = st.T if transposed else st
    if steps:
        if not node.ACCEPTS_VIEWS:
            raise errors.UnsupportedOperationError(f'{node.label} does not read a view ({shown_name(sdfg, name)}); '
                                                   'materialise it first (a Convert node)')
        node.views = {**(node.views or {}), prefix: steps}
        st = _views.view_type(st, _views.decode_steps(steps))
    return st


def new_sparse_result(sdfg: dace.SDFG, st: SparseType, hint: str = 'S') -> str:
    """Add a transient structure of type ``st``; returns its name."""
    return sdfg.add_datadesc(f'__ss_{hint}', st.structure(transient=True), find_new_name=True)


def add_sparse_output(state: SDFGState, node: SparseLibraryNode, prefix: str, name: str) -> SparseType:
    """Connect ``node``'s member outputs to the members of sparse data ``name``."""
    sdfg = state.parent
    desc = sdfg.arrays[name]
    st = sparse_type_of(desc)
    acc = state.add_write(name)
    for member in st.fmt.member_names:
        mdesc = desc.members[member]
        view = _member_view(sdfg, name, member, mdesc)
        vnode = state.add_access(view)
        conn = member_conn(prefix, member)
        node.add_out_connector(conn)
        state.add_edge(node, conn, vnode, None, dace.Memlet.from_array(view, sdfg.arrays[view]))
        state.add_edge(vnode, 'views', acc, None, member_memlet(name, member, mdesc))
    return st


def _dense_memlet(sdfg: dace.SDFG, name: str, subset=None) -> dace.Memlet:
    """The whole of dense data ``name``, or the part ``subset`` (a ``Range`` or its text)."""
    if subset is None:
        return dace.Memlet.from_array(name, sdfg.arrays[name])
    return dace.Memlet(data=name, subset=subset if isinstance(subset, dace.subsets.Range) else
                       dace.subsets.Range.from_string(str(subset)))


def add_dense_input(state: SDFGState, node: nodes.LibraryNode, conn: str, name: str, subset=None):
    """Connect dense data ``name`` (or the part ``subset`` of it: a block of a
    concatenation's operand) to input ``conn``."""
    sdfg = state.parent
    if isinstance(node, SparseLibraryNode):
        node.dense_ranks = {**(node.dense_ranks or {}), conn: len(sdfg.arrays[name].shape)}
    node.add_in_connector(conn)
    state.add_edge(state.add_read(name), None, node, conn, _dense_memlet(sdfg, name, subset))


def add_dense_output(state: SDFGState, node: nodes.LibraryNode, conn: str, name: str, subset=None):
    """Connect output ``conn`` to dense data ``name`` (or to the part ``subset`` of it)."""
    sdfg = state.parent
    if isinstance(node, SparseLibraryNode):
        node.dense_ranks = {**(node.dense_ranks or {}), conn: len(sdfg.arrays[name].shape)}
    node.add_out_connector(conn)
    state.add_edge(node, conn, state.add_write(name), None, _dense_memlet(sdfg, name, subset))


def insert_node(state: SDFGState,
                node: SparseLibraryNode,
                sparse_in: Dict[str, str] = None,
                dense_in: Dict[str, str] = None,
                dense_out: Tuple[str, str] = None,
                sparse_out: Tuple[str, SparseType, str] = None) -> str:
    """Add ``node`` to ``state`` and wire it.

    :param sparse_in: operand prefix -> sparse data name (or ``X.T`` alias).
    :param dense_in: connector -> dense data name, or ``(name, subset)`` for a part of it.
    :param dense_out: (connector, data name[, subset]) of a dense result.
    :param sparse_out: (prefix, type, name hint) of a sparse result, created here.
    :return: the name of the result.
    """
    state.add_node(node)
    for prefix, name in (sparse_in or {}).items():
        add_sparse_input(state, node, prefix, name)
    for conn, name in (dense_in or {}).items():
        add_dense_input(state, node, conn, *(name if isinstance(name, tuple) else (name, )))
    if dense_out is not None:
        add_dense_output(state, node, *dense_out)
        return dense_out[1]
    prefix, st, hint = sparse_out
    out = new_sparse_result(state.parent, st, hint)
    add_sparse_output(state, node, prefix, out)
    return out


def retype_sparse(sdfg: dace.SDFG, name: str, st: SparseType) -> None:
    """Give sparse data ``name`` the type ``st`` (same member names, other shapes — e.g. CSR
    to CSC) and reshape every member view and memlet that reads or writes it."""
    old = sdfg.arrays[name]
    new = st.structure(transient=old.transient)
    if sorted(new.members) != sorted(old.members):
        raise errors.UnsupportedOperationError(f'cannot retype {name}: members {sorted(old.members)} -> '
                                               f'{sorted(new.members)}')
    sdfg.remove_data(name, validate=False)
    sdfg.add_datadesc(name, new)
    for state in sdfg.states():
        for acc in [n for n in state.data_nodes() if n.data == name]:
            for e in list(state.in_edges(acc)) + list(state.out_edges(acc)):
                view = e.src if e.dst is acc else e.dst
                member = e.data.data.split('.', 1)[1] if e.data.data and '.' in e.data.data else None
                if member is None or not isinstance(view, nodes.AccessNode):
                    continue
                mdesc = new.members[member]
                e.data = member_memlet(name, member, mdesc)
                vdesc = sdfg.arrays[view.data]
                if isinstance(vdesc, dace.data.View):
                    sdfg.remove_data(view.data, validate=False)
                    sdfg.add_view(view.data, mdesc.shape, mdesc.dtype)
                    for ve in list(state.in_edges(view)) + list(state.out_edges(view)):
                        if ve is not e and ve.data.data == view.data:
                            ve.data = dace.Memlet.from_array(view.data, sdfg.arrays[view.data])


def sparse_consumers(state: SDFGState, name: str) -> List[Tuple[nodes.Node, str]]:
    """(node, connector prefix) of every node in ``state`` that reads sparse data ``name``
    through member views; a prefix of None marks a reader that is not a sparse node."""
    res = []
    for acc in [n for n in state.data_nodes() if n.data == name]:
        for e in state.out_edges(acc):
            view = e.dst
            for ve in state.out_edges(view):
                conn = ve.dst_conn or ''
                if isinstance(ve.dst, SparseLibraryNode) and conn.startswith('_'):
                    prefix = conn[1:].split('_', 1)[0]
                    if (ve.dst, prefix) not in res:
                        res.append((ve.dst, prefix))
                elif (ve.dst, None) not in res:
                    res.append((ve.dst, None))
    return res


def change_argument_format(sdfg: dace.SDFG, name: str, fmt) -> SparseType:
    """Make the sparse argument ``name`` (read by sparse nodes only) a matrix of format
    ``fmt``: its structure replaced, every reader rewired to the new members (a transposed
    view stays one); returns the new type. Its size symbols are named after the argument
    (``A_CSR_n1``): the same names in every process, since a build folder is named by the
    SDFG's content. The caller converts what it passes (``SparseFormatSelection``'s call
    path, the FPGA call path)."""
    old = sparse_type_of(sdfg.arrays[name])
    new_type = fmt.type(old.dtype, old.rows, old.cols, old.index_dtype,
                        **{k: f'{name}_{fmt.name}_{k}' for k in fmt.size_keys})
    readers = []  # collect the readers, then rewire them to the new members
    for s in sdfg.states():
        for acc in [n for n in s.data_nodes() if n.data == name]:
            for node, prefix in sparse_consumers(s, name):
                readers.append((s, node, prefix, bool(getattr(node, f'transpose_{prefix}', False))))
            for e in list(s.out_edges(acc)):
                view = e.dst
                for ve in list(s.out_edges(view)):
                    ve.dst.remove_in_connector(ve.dst_conn)
                s.remove_node(view)
                if view.data in sdfg.arrays:
                    sdfg.remove_data(view.data, validate=False)
            s.remove_node(acc)
    sdfg.remove_data(name, validate=False)
    sdfg.add_datadesc(name, new_type.structure(transient=False))
    alias = name + T_SUFFIX
    if alias in sdfg.arrays:
        sdfg.remove_data(alias, validate=False)
    for s, node, prefix, transposed in readers:
        add_sparse_input(s, node, prefix, transposed_alias(sdfg, name) if transposed else name)
    used = {str(x) for x in sdfg.free_symbols}
    for sym in old.free_symbols:
        if sym not in used and sym in sdfg.symbols:
            sdfg.remove_symbol(sym)
    return new_type
