"""Iteration over the stored entries of one sparse operand.

:class:`Entries` composes the level pieces of a format into a loop nest and offers the
expressions an operation's body needs: the row ``i``, the column ``j`` and the position
``v`` of the value. It decides how the outer loop may run:

``acc``
    the outer level owns the written dimension and its coordinate *is* that index
    (CSR rows): parallel map, one scalar accumulator per outer iteration;
``owned``
    the outer level owns the written dimension (BSR block rows, DCSR): parallel map,
    updates in place;
``sequential``
    anything else (scatter through a transposed view, COO): a sequential loop.
"""
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import dace
import sympy

from sdfgsparse.formats import SparseType, is_sparse_desc
from sdfgsparse._symbolic import pyexpr
from sdfgsparse.lowering.graph import connector_desc
from sdfgsparse.targets.cpu.builder import plain_row_walk, strategy
from sdfgsparse.targets.cpu.kernel import KernelBuilder
from sdfgsparse.targets.cpu.team import TeamWork

__all__ = ['Entries', 'kernel_for_node', 'zero_fill', 'copy_index_members', 'update', 'emit_accumulate']


@dataclass
class LevelPiece:
    """The Python source of one level's loop in a generated kernel, rendered from its
    :class:`~sdfgsparse.formats.levels.LevelLoop`: ``var`` in ``[bounds[0], bounds[1])``
    (``var is None``: no loop); ``pre`` lines run before the loop (in the parent's body);
    ``coord`` and ``pos`` are inlined expressions (DaCe 1.0.2 mistypes scalars assigned
    inside loops when they reach a condition); ``guard`` a condition or None."""
    coord: str
    pos: str
    guard: Optional[str] = None
    bounds: Optional[tuple] = None
    var: Optional[str] = None
    pre: List[str] = field(default_factory=list)
    body: List[str] = field(default_factory=list)

    @property
    def has_loop(self) -> bool:
        return self.var is not None


def render(nest, member_vars: Dict[str, str]) -> Tuple[List[LevelPiece], Callable]:
    """The loops of ``nest`` as Python source, and the printer of further expressions in
    the nest's names. A dense level's base position below the root goes through a data
    scalar ``b{k}``: DaCe 1.0.2 mis-offsets nested-SDFG arguments indexed by
    ``map_var * symbol + loop_var``."""
    pieces, subs = [], {}

    def py(e, reads_only=False):
        if not isinstance(e, sympy.Basic):
            return pyexpr(e, member_vars)
        if reads_only:  # positions through b{k} inside storage reads only (a row index stays a symbol)
            return pyexpr(e.replace(lambda a: isinstance(a, sympy.core.function.AppliedUndef),
                                    lambda a: a.func(*(x.xreplace(subs) for x in a.args))), member_vars)
        return pyexpr(e.xreplace(subs), member_vars)

    for k, l in enumerate(nest.levels):
        piece = LevelPiece(coord=py(l.coord), pos=py(l.pos), bounds=(py(l.begin), py(l.end)) if l.has_loop else None,
                           var=str(l.var) if l.has_loop else None)
        if l.base is not None:
            b = sympy.Symbol(f'b{k}')
            piece.pre = [f'b{k} = dace.int64({py(l.base)})']
            piece.pos = py(b + l.var)
            subs[l.pos] = b + l.var
        # the guard after the level's own base: a guard on a coordinate it reads (a view's
        # slice of ELL's columns) indexes through b{k} too
        piece.guard = py(l.guard) if l.guard is not None else None
        pieces.append(piece)
    return pieces, py


class Entries:
    """The loop nest over the stored entries of a sparse operand in a generated kernel."""

    def __init__(self, st: SparseType, member_vars: Dict[str, str]):
        self.type = st
        self.member_vars = dict(member_vars)
        self.nest = st.fmt.loops(st.rows, st.cols, st.sizes)
        self.pieces, py = render(self.nest, member_vars)
        # the row and column index dense operands (memlets): no data scalar in them (GNM's
        # and VNM's row ``c0 * g + c1`` is also a dense level's position, ``b1 + c1``)
        self.i, self.j = (py(e, reads_only=True) for e in (self.nest.row, self.nest.col))
        self.v = py(self.nest.value_pos)
        self.vals = member_vars['vals']
        #: lines that define the entry's coordinates before a body reads them (see below)
        self.coordinate_lines: List[str] = []
        self.bound_row = False
        if getattr(st.fmt, 'steps', None):
            # A view's coordinate (``start - 2 * c0 - c2`` of a reversed slice of BSR rows)
            # goes through a scalar: DaCe 1.0.2 propagates the subset of an index with a
            # negative coefficient wrongly and wrote out of bounds.
            # A stepped slice's ``(c - start) // step`` divides the scalar: DaCe's frontend
            # prints a floor division of loop variables through SymPy, which cannot.
            for attr, e in (('i', self.nest.row), ('j', self.nest.col)):
                if e.is_Symbol or isinstance(e, sympy.core.function.AppliedUndef):
                    continue
                if type(e).__name__ == 'int_floor':
                    q, m = e.args
                    self.coordinate_lines += [f'vq{attr} = dace.int64({py(q)})', f'v{attr} = vq{attr} // ({py(m)})']
                else:
                    self.coordinate_lines.append(f'v{attr} = dace.int64({getattr(self, attr)})')
                setattr(self, attr, f'v{attr}')
                self.bound_row = self.bound_row or attr == 'i'

    @property
    def val(self) -> str:
        return f'{self.vals}[{self.v}]'

    @property
    def nvals(self):
        """Number of value slots (symbolic)."""
        st = self.type
        return st.fmt.counts(st.rows, st.cols, st.sizes)[-1]

    def emit_coordinates(self, kb: KernelBuilder, row: str = 'ri', col: str = 'ci'):
        """Flat coordinate arrays: row ``ri[q]`` and column ``ci[q]`` of every value slot
        ``q`` (``ri[q] = -1`` where the slot holds no entry: padding, out-of-range diagonals,
        unused capacity). Filled in parallel over the outer level: slots are distinct.

        With them, a scatter can run in parallel over a dense dimension around one flat
        loop over the slots (DaCe 1.0.2 miscompiles a level walk nested in such a map)."""
        n = pyexpr(self.nvals)
        kb.globals['np'] = __import__('numpy')
        kb.line(f'{row} = np.zeros(({n},), dtype=np.int64)')
        kb.line(f'{col} = np.zeros(({n},), dtype=np.int64)')
        zero_fill(kb, row, [self.nvals], value='-1')
        self.emit(kb, [f'{row}[{self.v}] = {self.i}', f'{col}[{self.v}] = {self.j}'], parallel=True)
        return n

    def strategy(self, written_dim: Optional[int], hint: str = 'auto') -> str:
        """How the outer loop may run when the body writes along ``written_dim``
        (:func:`sdfgsparse.targets.cpu.builder.strategy`)."""
        return strategy(self.type, written_dim, hint)

    def row_walk(self):
        """``(outer, inner, crd, pos)`` when the walk is a loop over all rows around one
        compressed level whose entries ``[pos[row], pos[row + 1])`` are the row's (CSR, or
        CSC seen as ``A.T``): the two level pieces and the names of the index and position
        arrays; otherwise None. Kernels with a whole-row body (one tasklet per row) use it."""
        if not plain_row_walk(self.nest):
            return None
        p_outer, p_inner = self.pieces
        return p_outer, p_inner, self.member_vars['crd1'], self.member_vars['pos1']

    def emit_row_map(self, kb: KernelBuilder, indent: int = 0, scale: str = '1'):
        """Open the parallel map over the rows of a :meth:`row_walk` (its body goes at
        ``indent + 1``: one whole-row tasklet per iteration). Rows are taken in dynamic
        chunks, and the thread count is chosen per call (:mod:`sdfgsparse.targets.cpu.team`)
        from the walk's entries times ``scale`` (the multiply-adds per entry)."""
        st = self.type
        kb.symbols_of(st.rows, st.cols, *st.sizes.values())
        outer = self.pieces[0]
        kb.balance(outer.var)
        kb.team(outer.var, TeamWork(self.member_vars['pos1'], str(outer.bounds[1]), scale))
        kb.line(f'for {outer.var} in dace.map[{outer.bounds[0]}:{outer.bounds[1]}]:', indent)

    def emit(self,
             kb: KernelBuilder,
             inner: Sequence[str],
             parallel: bool,
             pro: Sequence[str] = (),
             epi: Sequence[str] = (),
             indent: int = 0):
        """Emit the loop nest; ``pro``/``epi`` run once per outer iteration around the
        inner loops (after the outer coordinate is defined), ``inner`` once per entry."""
        st = self.type
        kb.symbols_of(st.rows, st.cols, *st.sizes.values(), *getattr(st.fmt, 'symbol_exprs', ()))
        ind = indent
        outer_body = None
        for k, piece in enumerate(self.pieces):
            for l in piece.pre:
                kb.line(l, ind)
            if piece.has_loop:
                b, e = piece.bounds
                if k == 0 and parallel:
                    kb.line(f'for {piece.var} in dace.map[{b}:{e}]:', ind)
                else:
                    kb.line(f'for {piece.var} in range({b}, {e}):', ind)
                ind += 1
            for l in piece.body:
                kb.line(l, ind)
            if k == 0:
                outer_body = ind
                for l in pro:
                    kb.line(l, ind)
            if piece.guard:
                kb.line(f'if {piece.guard}:', ind)
                ind += 1
        for l in self.coordinate_lines + list(inner):
            kb.line(l, ind)
        for l in epi:
            kb.line(l, outer_body)


def kernel_for_node(node, state, sdfg, name: Optional[str] = None) -> KernelBuilder:
    """A kernel whose parameters are the node's connectors, typed like the connected data."""
    kb = KernelBuilder(name or node.label)
    kb.parallel = node.schedule != dace.ScheduleType.Sequential  # (a node inside a parallel map: sequential)
    # sparse data reach the node member by member (views); their index dtypes are those of
    # the enclosing SDFG's structures
    kb.sparse_operands.extend(d for d in sdfg.arrays.values() if is_sparse_desc(d))
    ranks = getattr(node, 'dense_ranks', None) or {}
    for e in state.in_edges(node):
        if e.dst_conn and e.dst_conn not in kb.params:
            kb.param(e.dst_conn, connector_desc(sdfg, e, ranks.get(e.dst_conn)))
    for e in state.out_edges(node):
        if e.src_conn and e.src_conn not in kb.params:
            kb.param(e.src_conn, connector_desc(sdfg, e, ranks.get(e.src_conn)))
    return kb


def zero_fill(kb: KernelBuilder, name: str, shape: Sequence, indent: int = 0, value: str = '0'):
    """Emit a parallel fill of a dense array."""
    idx = [f'z{d}' for d in range(len(shape))]
    rng = ', '.join(f'{i}' for i in idx)
    kb.line(f'for {rng} in dace.map[{", ".join(f"0:{pyexpr(s)}" for s in shape)}]:', indent)
    kb.line(f'{name}[{rng}] = {value}', indent + 1)


def copy_index_members(kb, members, src_prefix: str, dst_prefix: str):
    """Emit parallel copies of every index member (all but ``vals``)."""
    for m, desc in members.items():
        if m == 'vals':
            continue
        kb.line(f'for q in dace.map[0:{pyexpr(desc.shape[0])}]:')
        kb.line(f'    _{dst_prefix}_{m}[q] = _{src_prefix}_{m}[q]')


def update(target: str, term: str, op: str = '+') -> str:
    """``target = target op (term)``: an explicit read-modify-write. DaCe 1.0.2 drops the
    accumulation of ``X[..., idx[p]] += v`` (an indirect index) inside a map."""
    return f'{target} = {target} {op} ({term})'


def emit_accumulate(kb: KernelBuilder, ent: Entries, target: str, index: str, term: str, written_dim: int,
                    hint: str, dtype, shape: Sequence, finish=None, indent: int = 0):
    """``target[index] += term`` over all stored entries, where ``index`` runs along matrix
    dimension ``written_dim``: one scalar accumulator per outer iteration when the outer
    level is that dimension, in-place updates otherwise (see :meth:`Entries.strategy`).

    ``finish(value, index) -> expression`` transforms each final value (a fused epilogue):
    inline on the accumulator, else in a pass after the accumulation."""
    strat = ent.strategy(written_dim, hint)
    if strat == 'acc':
        final = finish('acc', [index]) if finish else 'acc'
        ent.emit(kb, [f'acc += {term}'],
                 parallel=True,
                 pro=[f'acc = {kb.dtype(dtype)}(0)'],
                 epi=[f'{target}[{index}] = {final}'],
                 indent=indent)
        return
    zero_fill(kb, target, shape, indent)
    ent.emit(kb, [update(f'{target}[{index}]', term)], parallel=strat != 'sequential', indent=indent)
    if finish:
        kb.line(f'for z0 in dace.map[0:{pyexpr(shape[0])}]:', indent)
        kb.line(f'    {target}[z0] = {finish(f"{target}[z0]", ["z0"])}', indent)
