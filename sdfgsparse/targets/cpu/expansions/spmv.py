"""The ``cpu`` implementation of :class:`~sdfgsparse.ops.spmv.SpMV`."""
import dace
import dace.library
from dace.transformation.transformation import ExpandTransformation
from sdfgsparse._symbolic import pyexpr
from sdfgsparse.formats.levels import Compressed, Dense
from sdfgsparse.lowering.graph import Operand, epilogue_pass, read
from sdfgsparse.ops.base import member_conn
from sdfgsparse.targets.cpu import kernel_checks, structured
from sdfgsparse.targets.cpu.builder import CpuKernel, accumulate, row_walk as plain_row_walk, store, strategy
from sdfgsparse.targets.cpu.row_leaves import regular_rows, result, spmv_row, spmv_row_chunks
from sdfgsparse.ops.spmv import SpMV, X, Y
from sdfgsparse.targets.registry import register
from sdfgsparse.targets.cpu.environment import SdfgsparseCPU

__all__ = ['ExpandSpMVCPU']


@dace.library.expansion
class ExpandSpMVCPU(ExpandTransformation):
    """Co-iterates the levels of A: a scalar accumulator per row when the outer level owns
    the rows, otherwise in-place updates (sequential when rows are scattered). A plain row
    walk (CSR, or CSC seen as ``A.T``) with A, x and y of one dtype goes ``row_chunk``
    entries at a time (:func:`~sdfgsparse.targets.cpu.row_leaves.spmv_row_chunks`), or,
    with ``adaptive_walk``, one entry at a time on calls whose rows look regular
    (:func:`~sdfgsparse.targets.cpu.row_leaves.regular_rows`).

    When A is an argument that only such kernels read and its walk is a plain row walk
    (CSR, or CSC seen as ``A.T``; :func:`sdfgsparse.targets.cpu.kernel_checks.claims`), a
    large A is walked by one tasklet per row that also checks A's storage as it reads it
    (:func:`~sdfgsparse.targets.cpu.row_leaves.spmv_row`), and the call skips its check
    before the kernel."""
    environments = [SdfgsparseCPU]

    @staticmethod
    def expansion(node: 'SpMV', state, sdfg):
        k = CpuKernel(node, state, sdfg)
        st = node.operand_type(state, 'A')
        A = k.operand('A', st)
        y = k.sdfg.arrays[Y]
        x_desc = k.sdfg.arrays[X]
        if structured.applies(st) and st.dtype == y.dtype == x_desc.dtype and \
                all(str(d.strides[-1]) == '1' for d in (x_desc, y)):
            # a fixed number of slots per group: one tasklet per row or row block (targets/cpu/structured.py)
            structured.emit_spmv(k, st, A, Y, X, y.dtype.ctype)
            epilogue_pass(k, node, Y, y.shape)
            return k.build()
        walk = row_walk(node, A, state)
        argument = kernel_checks.claims(node, sdfg) if walk is not None else None
        if node.row_chunk > 1 and (node.row_chunk > 64 or node.row_chunk & (node.row_chunk - 1)):
            raise ValueError(f'{node.label}: row_chunk must be 0, 1 or a power of two up to 64 (the lanes of '
                             f'one vector), got {node.row_chunk}')
        chunks = node.row_chunk if walk is not None and node.row_chunk > 1 and st.dtype == y.dtype == x_desc.dtype \
            else 0

        def rows(state, width=None, checked=None):
            """The rows in parallel, each one tasklet (then the epilogue on its value)."""
            sc = k.rows(state, walk)
            out = result(k, sc, 'row', y.dtype) if node.epilogue else (Y, [walk.row])
            if checked is not None:  # (the check's order, its size inputs)
                spmv_row(k, sc, walk, A.vals, X, out, y.dtype.ctype, *checked)
            else:
                spmv_row_chunks(k, sc, walk, A.vals, X, out, width)
            if node.epilogue:
                store(k, sc, out, Y, [walk.row], node)

        def walk_rows(state):  # the walk without checks
            if not chunks:
                accumulate(k, state, A, Y, A.row, A.value * read(X, A.col), 0, node.schedule_hint, y.dtype, y.shape,
                           node)
            elif not node.adaptive_walk:
                rows(state, chunks)
            else:  # the walk chosen per call from a sample of the rows
                regular = regular_rows(k, state, walk)
                k.branch(f'{regular} > 0', lambda s: rows(s, 1), lambda s: rows(s, chunks))

        if argument is None:
            walk_rows(k.add_state('spmv'))
            return k.build()
        # A large A is checked by the rows as they read it (one tasklet per row); below
        # that size, the walk above and the call's check before it
        stored = node.sparse_type(state, 'A')
        lvl = stored.fmt.levels[1]
        check = kernel_checks.RowCheck(pyexpr(stored.sizes['n1']),
                                       pyexpr(stored.fmt.extents(stored.rows, stored.cols)[1]),
                                       stored.index_dtype.type, lvl.ordered, lvl.unique)
        checked = (check.order, check.add_scalars(k, k.add_state('check_sizes')))
        k.branch(check.applies(), lambda s: rows(s, checked=checked), walk_rows)
        kernel = k.build()
        kernel_checks.add_to(kernel, argument)
        return kernel


def row_walk(node: SpMV, A, state):
    """The :class:`~sdfgsparse.targets.cpu.builder.RowWalk` of A when the expansion takes it
    (rows in parallel, a scalar accumulator each; x and y of unit stride, as the row
    tasklets read them), else None. ``A @ X[:, 0]`` passes a strided x: the row tasklets
    read it as contiguous and gave a wrong result."""
    if any(str(node.connected(state, c).strides[-1]) != '1' for c in (X, Y)):
        return None
    return plain_row_walk(A) if strategy(A.type, 0, node.schedule_hint) == 'acc' else None


def checks_in_kernel(node: SpMV, state) -> bool:
    """Whether the expansion can check all of A's storage as it reads it (see
    :mod:`sdfgsparse.targets.cpu.kernel_checks`): a row walk over a dense and a
    compressed level with int32 or int64 indices."""
    st = node.operand_type(state, 'A')
    fmt = node.sparse_type(state, 'A').fmt
    if [type(l) for l in fmt.levels] != [Dense, Compressed] or not kernel_checks.RowCheck.supports(
            st.index_dtype.type) or list(fmt.size_keys) != ['n1']:
        return False
    return row_walk(node, Operand(st, {m: member_conn('A', m) for m in st.fmt.member_names}), state) is not None


register(SpMV, 'cpu', ExpandSpMVCPU, default=True)
kernel_checks.register_reader(SpMV, 'cpu', checks_in_kernel)
