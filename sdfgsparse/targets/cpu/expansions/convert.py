"""The ``cpu`` implementation of :class:`~sdfgsparse.ops.convert.Convert`."""
import dace
import dace.library
from dace.transformation.transformation import ExpandTransformation
from sdfgsparse.targets.cpu.compress import compress_kernel, emit_append
from sdfgsparse._symbolic import pyexpr
from sdfgsparse.formats.levels import Compressed, Dense
from sdfgsparse.formats.views import Reshape, Slice
from sdfgsparse.targets.cpu.entries import Entries, kernel_for_node
from sdfgsparse.ops.base import member_conn
from sdfgsparse.ops.convert import Convert
from sdfgsparse.targets.registry import register
from sdfgsparse.targets.cpu.environment import SdfgsparseCPU

__all__ = ['ExpandConvertCPU']


@dace.library.expansion
class ExpandConvertCPU(ExpandTransformation):
    """Expand the entries of A (any format), sort, compress (see :mod:`..targets/cpu/compress`);
    the result's type (CSR or CSC) decides the compressed dimension."""
    environments = [SdfgsparseCPU]

    @staticmethod
    def expansion(node: 'Convert', state, sdfg):
        st = node.operand_type(state, 'A')
        csc = node.sparse_type(state, 'out').fmt.name == 'CSC'
        walk = st.T if csc else st  # the result's storage walks rows of this
        rows = Entries(walk, {m: member_conn('A', m) for m in walk.fmt.member_names})
        if sorted_row_walk(walk, rows):
            return row_copy_kernel(node, state, sdfg, rows, walk)
        if ordered_walk(walk):
            return row_copy_kernel(node, state, sdfg, rows, walk, by_row=False)
        ent = Entries(st, {m: member_conn('A', m) for m in st.fmt.member_names})

        def expand(kb, vt):
            ent.emit(kb, emit_append(ent.i, ent.j, ent.val), parallel=False)

        # a CSC result (the type of ``out``) is compressed by columns in compress_kernel
        return compress_kernel(node, state, sdfg, expand, st.rows, st.cols)


def _sorted_rows(stored) -> bool:
    """Whether stored format ``stored`` is a dense level over one ordered, unique compressed
    level (CSR, or CSC seen transposed)."""
    levels = stored.levels
    return [type(l) for l in levels] == [Dense, Compressed] and levels[1].ordered and levels[1].unique


def sorted_row_walk(st, ent: Entries) -> bool:
    """Whether ``ent`` walks ``st`` row by row (its outer loop is the row, one per
    iteration) over one ordered, unique compressed level, its columns in increasing order:
    a CSR, or a view of one (a slice, a transposed CSC) whose columns are not reversed."""
    fmt = st.fmt
    if not _sorted_rows(getattr(fmt, 'base', st).fmt):
        return False
    if getattr(fmt, 'steps', None) and fmt.reverses(1):
        return False
    return ent.strategy(0) == 'acc'


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
    base_nest = stored.loops(fmt.base.rows, fmt.base.cols, fmt.base.sizes)
    if base_nest.row != base_nest.levels[0].var:  # the outer level enumerates the rows
        return False
    return all(isinstance(s, Reshape) or (isinstance(s, Slice) and s.step > 0) for s in steps)


def row_copy_kernel(node, state, sdfg, ent: Entries, st, by_row: bool = True):
    """The result's rows copied straight from the walk, no sort: entries counted per result
    row, a prefix sum into ``pos`` (each row's cursor set to its start), each entry written
    at its row's cursor.

    ``by_row``: ``ent`` is a sorted row walk (:func:`sorted_row_walk`: one result row per
    outer iteration), whose rows run in parallel, the row index read once per row; a row
    slice of a CSR costs its entries. Else an :func:`ordered_walk` (a reshaped CSR): one
    sequential pass each, entries appended in walk order (a result row may gather entries
    of several stored rows)."""
    kb = kernel_for_node(node, state, sdfg)
    kb.globals['np'] = __import__('numpy')
    R = pyexpr(st.rows)
    pos, crd, vals = (member_conn('out', m) for m in ('pos1', 'crd1', 'vals'))
    row = [f'ri = dace.int64({ent.i})']
    pro, head = (row, []) if by_row else ([], row)
    kb.line(f'rcnt = np.zeros(({R},), dtype=dace.int64)')
    ent.emit(kb, head + ['rcnt[ri] = rcnt[ri] + 1'], parallel=by_row, pro=pro)
    # pos[0] = 0, written as min(0, capacity): the capacity past pos[rows] is left as it is
    # (the runtime trims results to the count), and this keeps the capacity a symbol the
    # kernel reads: DaCe passes the enclosing program only the symbols its nested kernels
    # use, not those that only size their arguments
    kb.line(f'{pos}[0] = min(0, {pyexpr(node.sparse_type(state, "out").sizes["n1"])})')
    kb.line(f'for r in range(0, {R}):')
    kb.line(f'    {pos}[r + 1] = {pos}[r] + rcnt[r]')
    kb.line(f'    rcnt[r] = {pos}[r]')
    ent.emit(kb, head + ['d = rcnt[ri]', f'{crd}[d] = {ent.j}', f'{vals}[d] = {ent.val}', 'rcnt[ri] = d + 1'],
             parallel=by_row, pro=pro)
    return kb.build()


register(Convert, 'cpu', ExpandConvertCPU, default=True)
