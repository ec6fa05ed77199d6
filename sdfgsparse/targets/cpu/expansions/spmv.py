"""The ``cpu`` implementation of :class:`~sdfgsparse.ops.spmv.SpMV`."""
import dace
import dace.library
from dace.transformation.transformation import ExpandTransformation
from sdfgsparse._symbolic import pyexpr
from sdfgsparse.formats.levels import Compressed, Dense
from sdfgsparse.targets.cpu import kernel_checks, structured
from sdfgsparse.targets.cpu.dense_loops import regular_rows, spmv_row, spmv_row_chunks
from sdfgsparse.targets.cpu.entries import Entries, emit_accumulate, kernel_for_node
from sdfgsparse.lowering.epilogue import node_epilogue
from sdfgsparse.ops.base import member_conn
from sdfgsparse.ops.spmv import SpMV, X, Y
from sdfgsparse.targets.registry import register
from sdfgsparse.targets.cpu.environment import SdfgsparseCPU

__all__ = ['ExpandSpMVCPU']


@dace.library.expansion
class ExpandSpMVCPU(ExpandTransformation):
    """Co-iterates the levels of A: a scalar accumulator per row when the outer level owns
    the rows, otherwise in-place updates (sequential when rows are scattered). A plain row
    walk (CSR, or CSC seen as ``A.T``) with A, x and y of one dtype goes ``row_chunk``
    entries at a time (:func:`~sdfgsparse.targets.cpu.dense_loops.spmv_row_chunks`), or,
    with ``adaptive_walk``, one entry at a time on calls whose rows look regular
    (:func:`~sdfgsparse.targets.cpu.dense_loops.regular_rows`).

    When A is an argument that only such kernels read and its walk is a plain row walk
    (CSR, or CSC seen as ``A.T``; :func:`sdfgsparse.targets.cpu.kernel_checks.claims`), a
    large A is walked by one tasklet per row that also checks A's storage as it reads it
    (:func:`~sdfgsparse.targets.cpu.dense_loops.spmv_row`), and the call skips its check
    before the kernel."""
    environments = [SdfgsparseCPU]

    @staticmethod
    def expansion(node: 'SpMV', state, sdfg):
        st = node.operand_type(state, 'A')
        kb = kernel_for_node(node, state, sdfg)
        ent = Entries(st, {m: member_conn('A', m) for m in st.fmt.member_names})
        y = node.connected(state, Y)
        finish = (lambda v, idx: node_epilogue(node, v, idx)) if node.epilogue else None
        x_desc = node.connected(state, X)
        if structured.applies(st) and st.dtype == y.dtype == x_desc.dtype and \
                all(str(d.strides[-1]) == '1' for d in (x_desc, y)):
            # a fixed number of slots per group: one tasklet per row or row block (targets/cpu/structured.py)
            structured.emit_spmv(kb, st, ent.member_vars, Y, X, y.dtype.ctype)
            if finish:
                kb.line(f'for z0 in dace.map[0:{pyexpr(y.shape[0])}]:')
                kb.line(f'    {Y}[z0] = {finish(f"{Y}[z0]", ["z0"])}')
            return kb.build()
        row = row_walk(node, ent, state)
        argument = kernel_checks.claims(node, sdfg) if row is not None else None
        if node.row_chunk > 1 and (node.row_chunk > 64 or node.row_chunk & (node.row_chunk - 1)):
            raise ValueError(f'{node.label}: row_chunk must be 0, 1 or a power of two up to 64 (the lanes of '
                             f'one vector), got {node.row_chunk}')
        x_dtype = node.connected(state, X).dtype
        chunks = node.row_chunk if row is not None and node.row_chunk > 1 and st.dtype == y.dtype == x_dtype else 0

        def epilogue(indent):  # after a whole-row tasklet
            if finish:
                kb.line(f'{Y}[{ent.i}] = {finish(f"{Y}[{ent.i}]", [ent.i])}', indent)

        def walk(indent):  # the walk without checks
            if not chunks:
                emit_accumulate(kb, ent, Y, ent.i, f'{ent.val} * {X}[{ent.j}]', 0, node.schedule_hint, y.dtype,
                                y.shape, finish, indent=indent)
                return
            outer, inner, crd, pos = row

            def rows(width, at):
                ent.emit_row_map(kb, indent=at)
                for l in spmv_row_chunks(Y, ent.i, X, crd, ent.vals, inner.bounds[0], inner.bounds[1],
                                         f'{pos}[{outer.bounds[1]}]', width):
                    kb.line(l, at + 1)
                epilogue(at + 1)

            if not node.adaptive_walk:
                rows(chunks, indent)
                return
            for l in regular_rows('_regular', pos, outer.bounds[1]):  # the walk per call (dense_loops.regular_rows)
                kb.line(l, indent)
            kb.line('if _regular[0] > 0:', indent)
            rows(1, indent + 1)
            kb.line('else:', indent)
            rows(chunks, indent + 1)

        if argument is None:
            walk(0)
            return kb.build()
        # A large A is checked by the rows as they read it (one tasklet per row); below
        # that size, the walk above and the call's check before it
        _, inner, crd, _ = row
        stored = node.sparse_type(state, 'A')
        lvl = stored.fmt.levels[1]
        check = kernel_checks.RowCheck(pyexpr(stored.sizes['n1']),
                                       pyexpr(stored.fmt.extents(stored.rows, stored.cols)[1]),
                                       stored.index_dtype.type, lvl.ordered, lvl.unique)
        kb.line(f'if {check.applies()}:')
        ent.emit_row_map(kb, indent=1)
        for l in spmv_row(Y, ent.i, X, crd, ent.vals, inner.bounds[0], inner.bounds[1], y.dtype.ctype, check):
            kb.line(l, 2)
        epilogue(2)
        kb.line('else:')
        walk(1)
        kernel = kb.build()
        kernel_checks.add_to(kernel, argument)
        return kernel


def row_walk(node: SpMV, ent: Entries, state):
    """:meth:`Entries.row_walk` of A when the expansion takes it (rows in parallel, a
    scalar accumulator each; x and y of unit stride, as the row tasklets read them), else
    None. ``A @ X[:, 0]`` passes a strided x: the row tasklets read it as contiguous and
    gave a wrong result."""
    if any(str(node.connected(state, c).strides[-1]) != '1' for c in (X, Y)):
        return None
    return ent.row_walk() if ent.strategy(0, node.schedule_hint) == 'acc' else None


def checks_in_kernel(node: SpMV, state) -> bool:
    """Whether the expansion can check all of A's storage as it reads it (see
    :mod:`sdfgsparse.targets.cpu.kernel_checks`): a row walk over a dense and a
    compressed level with int32 or int64 indices."""
    st = node.operand_type(state, 'A')
    fmt = node.sparse_type(state, 'A').fmt
    if [type(l) for l in fmt.levels] != [Dense, Compressed] or not kernel_checks.RowCheck.supports(
            st.index_dtype.type) or list(fmt.size_keys) != ['n1']:
        return False
    return row_walk(node, Entries(st, {m: member_conn('A', m) for m in st.fmt.member_names}), state) is not None


register(SpMV, 'cpu', ExpandSpMVCPU, default=True)
kernel_checks.register_reader(SpMV, 'cpu', checks_in_kernel)
