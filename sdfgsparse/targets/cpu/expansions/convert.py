"""The ``cpu`` implementation of :class:`~sdfgsparse.ops.convert.Convert`."""
import dace
import dace.library
import sympy
from dace import dtypes
from dace.transformation.transformation import ExpandTransformation
from sdfgsparse.formats.levels import Compressed, Dense
from sdfgsparse.formats.views import Reshape, Slice
from sdfgsparse.lowering.graph import Operand, Scope, emit, read
from sdfgsparse.lowering.graph_compress import Rows, compress_lists, expand_entries
from sdfgsparse.ops.convert import OUT_CRD, OUT_POS, OUT_VALS, Convert
from sdfgsparse.targets.cpu.builder import CpuKernel, strategy, update
from sdfgsparse.targets.registry import register
from sdfgsparse.targets.cpu.environment import SdfgsparseCPU

__all__ = ['ExpandConvertCPU']


@dace.library.expansion
class ExpandConvertCPU(ExpandTransformation):
    """A walk that meets the entries row by row in column order (a CSR, a slice or a
    transposed CSC of one, a reshaped CSR) copies them straight into the result, no sort
    (:func:`row_copy`); any other format is expanded, sorted and compressed (the portable
    pieces: a parallel expansion, two counting sorts, the rows' duplicates summed by a
    leaf). The result's type (CSR or CSC) decides the compressed dimension."""
    environments = [SdfgsparseCPU]

    @staticmethod
    def expansion(node: 'Convert', state, sdfg):
        st = node.operand_type(state, 'A')
        walk = st.T if node.sparse_type(state, 'out').fmt.name == 'CSC' else st  # the result's storage walks its rows
        k = CpuKernel(node, state, sdfg)
        A = k.operand('A', walk)
        if sorted_row_walk(walk):
            row_copy(k, A, node.sparse_type(state, 'out').sizes['n1'])
        elif ordered_walk(walk):
            row_copy(k, A, node.sparse_type(state, 'out').sizes['n1'], by_row=False)
        else:
            lists = expand_entries(k, 'cv', A, k.sdfg.arrays[OUT_VALS].dtype)
            compress_lists(k, 'cv', lists, A.nvals, walk.rows, walk.cols, Rows(OUT_POS, OUT_CRD, OUT_VALS, walk.rows))
        return k.build()


def _sorted_rows(stored) -> bool:
    """Whether stored format ``stored`` is a dense level over one ordered, unique compressed
    level (CSR, or CSC seen transposed)."""
    levels = stored.levels
    return [type(l) for l in levels] == [Dense, Compressed] and levels[1].ordered and levels[1].unique


def sorted_row_walk(st) -> bool:
    """Whether the level walk of ``st`` goes row by row (its outer loop is the row, one per
    iteration) over one ordered, unique compressed level, its columns in increasing order:
    a CSR, or a view of one (a slice, a transposed CSC) whose columns are not reversed."""
    fmt = st.fmt
    if not _sorted_rows(getattr(fmt, 'base', st).fmt):
        return False
    if getattr(fmt, 'steps', None) and fmt.reverses(1):
        return False
    return strategy(st, 0) == 'acc'


def ordered_walk(st) -> bool:
    """Whether the stored walk of ``st`` (a view) meets its entries in the view's row-major
    order without a repeat: a sorted row walk of the stored matrix (CSR, or a CSC read
    transposed) seen through reshapes and slices with positive steps only. A C-order reshape
    keeps the linear order of the entries, a forward slice keeps their order; a transposition
    or a reversal does not."""
    fmt = st.fmt
    steps = getattr(fmt, 'steps', None)
    if not steps or not any(isinstance(s, Reshape) for s in steps):
        return False  # (no reshape: sorted_row_walk decides)
    stored = fmt.base.fmt
    if not _sorted_rows(stored):
        return False
    base_nest = stored.loops(fmt.base.shape, fmt.base.sizes)
    if base_nest.row != base_nest.levels[0].var:  # the outer level enumerates the rows
        return False
    return all(isinstance(s, Reshape) or (isinstance(s, Slice) and s.step > 0) for s in steps)


def row_copy(k: CpuKernel, A: Operand, capacity, by_row: bool = True) -> None:
    """The result's rows copied straight from A's walk, no sort: entries counted per result
    row, a prefix sum into ``pos`` (each row's cursor set to its start), each entry written
    at its row's cursor.

    ``by_row``: the walk is a sorted row walk (:func:`sorted_row_walk`: one result row per
    outer iteration), whose rows run in parallel; a row slice of a CSR costs its entries.
    Else an :func:`ordered_walk` (a reshaped CSR): one sequential pass each, entries
    appended in walk order (a result row may gather entries of several stored rows). Each
    entry counts, and is written, only where its guard holds: a view's row index is valid
    there only (an outer iteration outside a slice has no row of the result).

    ``pos[0]`` is written as ``min(0, capacity)``: the capacity past ``pos[rows]`` is left
    as it is (the runtime trims results to the count), and this keeps the capacity a symbol
    the kernel reads (DaCe passes the enclosing program only the symbols its kernels use)."""
    rows = A.type.rows
    loops = [(str(l.var), l.begin, l.end) for l in A.levels if l.has_loop]
    cnt = k.transient('rcnt', [rows], dace.int64)
    cur = k.transient('rcur', [rows], dace.int64)
    k.fill(k.add_state('count_zero'), cnt)
    first = dtypes.ScheduleType.Default if by_row else dtypes.ScheduleType.Sequential
    schedules = [first] + [dtypes.ScheduleType.Sequential] * (len(loops) - 1)
    if by_row:
        k.balance(loops[0][0])
    sc = k.scope(k.add_state('count'), loops, schedules)
    update(k, sc, (cnt, [A.row]), 1, A.guard)
    k.compute(Scope.at(k.add_state('first')), (OUT_POS, [0]), sympy.Min(0, sympy.sympify(capacity)), label='first')
    r = sympy.Symbol('__r')
    body = k.loop('positions', str(r), 0, rows)
    k.compute(Scope.at(body), (OUT_POS, [r + 1]), read(OUT_POS, r) + read(cnt, r), label='positions',
              more=[((cur, [r]), read(OUT_POS, r))])
    sc = k.scope(k.add_state('fill'), loops, schedules)
    at = read(cur, A.row)
    emit(k, sc, [((OUT_CRD, [at]), A.col, None), ((OUT_VALS, [at]), A.value, None), ((cur, [A.row]), at + 1, None)],
         guard=A.guard, label='place', guarded_reads=True)


register(Convert, 'cpu', ExpandConvertCPU, default=True)
