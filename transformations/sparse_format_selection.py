"""``SparseFormatSelection``: the storage format of a sparse argument, chosen by a cost model
over the structure of the matrix the caller will pass."""
import json

import sympy
from dace import properties
from dace.sdfg import nodes
from dace.sdfg import utils as sdutil
from dace.transformation import transformation as xf
from dace.transformation.interstate.loop_detection import find_for_loop

from sdfgsparse.analysis.format_cost import CANDIDATES, choose_format
from sdfgsparse.formats import get_format, is_sparse_desc, sparse_type_of
from sdfgsparse.formats.catalogue import BSR
from sdfgsparse._symbolic import evaluate
from sdfgsparse.ops.base import change_argument_format, sparse_consumers, T_SUFFIX
from sdfgsparse.transformations._sizes import size_values
from sdfgsparse.transformations.examples import recorded, recorded_stats

__all__ = ['SparseFormatSelection', 'format_by_name']

#: dense operand connector whose last dimension is the dense width ``k`` of a use
_DENSE_WIDTH = {'SpMM': '_Y', 'SDDMM': '_X', 'DenseSpMM': '_C', 'SparseAttention': '_V'}


def format_by_name(name: str):
    """'CSR' -> ss.CSR, 'BSR4x4' -> ss.BSR.with_block(4, 4)."""
    if name.startswith('BSR') and 'x' in name:
        R, C = (int(x) for x in name[3:].split('x'))
        return BSR.with_block(R, C)
    return get_format(name)


def _cost_name(fmt) -> str:
    if fmt.name.startswith('BSR'):
        R, C = fmt.block
        return f'BSR{R}x{C}'
    return fmt.name


def _loop_trips(sdfg, sizes) -> dict:
    """State -> iterations of the loops around it, for the frontend's state-machine for-loops
    with constant (or size-symbol) bounds; a loop with another count counts once."""
    trips = {s: 1 for s in sdfg.states()}
    subs = {sympy.Symbol(k): v for k, v in sizes.items()}
    for guard in sdfg.states():
        for e in sdfg.out_edges(guard):
            body, stack = set(), [e.dst]
            while stack:  # the states reachable from the edge without passing the guard
                st = stack.pop()
                if st is guard or st in body:
                    continue
                body.add(st)
                stack.extend(x.dst for x in sdfg.out_edges(st))
            if not any(x.dst is guard for st in body for x in sdfg.out_edges(st)):
                continue  # not a loop body (no edge back to the guard)
            try:
                found = find_for_loop(sdfg, guard, e.dst)
            except Exception:
                found = None
            if not found:
                continue
            start, end, step = (sympy.sympify(str(x)).subs(subs) for x in found[1])
            n = (end - start) / step + 1
            if n.is_number and n > 0:
                for st in body:
                    trips[st] *= int(n)
    return trips


@properties.make_properties
class SparseFormatSelection(xf.SingleStateTransformation):
    """Chooses the storage format of a sparse program argument for the matrix the caller
    will pass, among the catalogue formats (CSR, CSC, COO, DCSR, ELL, DIA, BSR 2x2/4x4).

    The cost model (:mod:`sdfgsparse.analysis.format_cost`) counts, per program call, the
    bytes each format moves for every operation that reads the argument (its dense width
    ``k``: 1 for SpMV, ``K`` for SpMM/SDDMM; operations inside a loop count once per
    iteration), padding slots included (ELL's row width, DIA's diagonals, BSR's block
    fill), sequential scatter walks charged for the threads they leave idle, plus the
    conversion of the caller's matrix from its format ``given`` (three passes over both
    storages, every call). The cheapest format wins; the given one wins ties.

    Matched pattern: an access node of a non-transient sparse structure (a program
    argument). Applicable when ``stats`` (from
    :func:`~sdfgsparse.analysis.format_cost.matrix_format_stats` of the matrix the caller
    will pass) are given, or were recorded on the SDFG with the sizes by
    ``ss.optimize(..., matrices=)`` or ``sdfgsparse annotate``
    (:mod:`sdfgsparse.transformations.examples`), every reader is a sparse library node, and the model prefers
    another format. The rewrite changes the argument's type -- readers are rewired to the
    new format's members -- and records the choice and every candidate's cost in
    ``chosen`` and ``reason`` (kept in the SDFG's transformation history). The caller must
    pass the argument in the chosen format (``ss.optimize`` converts it on each call).

    Example: ``for it in range(40): x = A @ x`` with a banded ``A`` (8 diagonals): CSR moves
    ``12 nnz + 8 nnz`` bytes per product, DIA ``8 nnz + 8 nnz``: DIA after conversion.
    """
    CATEGORY = 'Sparse'

    access = xf.PatternNode(nodes.AccessNode)

    stats = properties.DictProperty(key_type=str, value_type=float,
                                    desc='Structure statistics of the matrix the caller will pass (nnz, rows, cols, '
                                    'max_row, ndiags, nonempty_rows, blocks_RxC); empty: those recorded on the SDFG '
                                    '(ss.optimize(matrices=), sdfgsparse annotate), with their sizes and threads')
    given = properties.Property(dtype=str, default='CSR', desc='Format the caller passes (conversion costs from it)')
    sizes = properties.DictProperty(key_type=str, value_type=int,
                                    desc='Values of size symbols (dense widths, loop bounds)')
    threads = properties.Property(dtype=int, default=1, desc='Threads the program runs with')
    chosen = properties.Property(dtype=str, default='', desc='Set when applied: the chosen format')
    reason = properties.Property(dtype=str, default='', desc='Set when applied: the cost of every candidate (bytes '
                                 'per call)')

    @classmethod
    def expressions(cls):
        return [sdutil.node_path_graph(cls.access)]

    # ------------------------------------------------------------------ model
    def inputs(self, sdfg):
        """(stats, given, sizes, threads) the model runs with: the properties, or where they
        are empty what :func:`~sdfgsparse.transformations.examples.record_examples` recorded."""
        stats, given, sizes, threads = dict(self.stats), self.given, dict(self.sizes), self.threads
        if not stats:
            rec_stats, rec_given = recorded_stats(sdfg, self.access.data)
            if rec_stats:
                stats, given = rec_stats, rec_given or given
                threads = int(recorded(sdfg).get('threads') or threads)
        return stats, given, size_values(sdfg, sizes), threads

    def uses(self, sdfg):
        """Dense width of every operation reading the argument, once per loop iteration."""
        name = self.access.data
        res = []
        sizes = self.inputs(sdfg)[2]
        loops = _loop_trips(sdfg, sizes)
        for state in sdfg.states():
            trips = loops.get(state, 1)
            for node, prefix in sparse_consumers(state, name):
                if prefix is None:
                    return None
                k = 0
                conn = _DENSE_WIDTH.get(type(node).__name__)
                if type(node).__name__ == 'SpMV':
                    k = 1
                elif conn is not None:
                    k = evaluate(node.connected(state, conn).shape[-1], sizes)
                    k = 1 if k is None else k  # an unknown width counts as a vector
                res += [k] * trips
        return res

    def decide(self, sdfg):
        """(chosen format name, costs) or None when the model cannot run."""
        stats, given, _, threads = self.inputs(sdfg)
        if not stats:
            return None
        uses = self.uses(sdfg)
        if not uses:
            return None
        desc = sdfg.arrays[self.access.data]
        st = sparse_type_of(desc)
        return choose_format(stats, uses, given=given, value_bytes=st.dtype.bytes,
                             index_bytes=st.index_dtype.bytes, threads=max(1, threads), candidates=CANDIDATES)

    def can_be_applied(self, state, expr_index, sdfg, permissive=False):
        name = self.access.data
        desc = sdfg.arrays.get(name)
        if desc is None or not is_sparse_desc(desc) or desc.transient or '.' in name or name.endswith(T_SUFFIX):
            return False
        if state.in_degree(self.access) != 0:
            return False  # written in the program
        if any(n.data == name and s.in_degree(n) > 0 for s in sdfg.states() for n in s.data_nodes()):
            return False
        decided = self.decide(sdfg)
        if decided is None:
            return False
        best, _ = decided
        return best != _cost_name(sparse_type_of(desc).fmt)

    def apply(self, state, sdfg):
        name = self.access.data
        best, costs = self.decide(sdfg)
        self.chosen = best
        self.reason = json.dumps({f: round(c) for f, c in sorted(costs.items(), key=lambda kv: kv[1])})
        if not any(t is self for t in sdfg.transformation_hist):
            sdfg.append_transformation(self)  # the choice stays on the SDFG (apply_pattern already records it)
        change_argument_format(sdfg, name, format_by_name(best))
