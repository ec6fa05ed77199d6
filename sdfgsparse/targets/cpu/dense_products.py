"""A register-blocked SIMD expansion for DaCe's dense ``MatMul`` (``C = A @ B``, both 2-D).

DaCe 1.0.2 expands a dense matrix product without a BLAS library into a map with a
write-conflict reduction over the inner dimension, which the C++ compiler cannot
vectorise: ``X @ W`` of a GCN layer (2708 x 64 times 64 x 64, float32) dominates the layer.
This expansion computes blocks of four rows of ``C`` in parallel (a DaCe map); each block
walks ``B`` in column panels whose accumulators stay in registers over the whole ``k``
loop, every loaded piece of a ``B`` row feeding four SIMD FMAs (:func:`gemm_row_block`),
instead of the earlier row-wise axpy form (one load and store of ``C`` per FMA); it relies
on ``-O3`` (:func:`sdfgsparse.build.install`). Figures, against MKL's SGEMM in torch, are in
docs/performance.md. It is registered as the ``'sdfgsparse'`` implementation of DaCe's
``MatMul`` node.
:func:`select_dense_products` selects it for the products it applies to
(:func:`rows_applicable`): ``ss.optimize`` does, and so does every call of a program with
sparse data (an SDFG call hook, :func:`sparse_program_defaults`): with DaCe's pure GEMM a
GCN layer written as a plain ``@dace.program``, ``relu(A @ (X @ W))``, was two orders of
magnitude slower than torch. Programs without sparse data keep DaCe's choices.

DaCe's pure ``Dot`` expansion (``np.dot`` of two vectors) is a parallel map whose every
product is an atomic add into one scalar: two threads fight over its cache line (a CG
iteration ran slower on 2 threads than on 1). :class:`ExpandDotReduce`
is one tasklet: an OpenMP SIMD reduction, run in parallel only above
:data:`DOT_PARALLEL` elements (:func:`dot_applicable` says where it applies).

DaCe's pure ``Reduce`` expansion (``np.sum(x, axis=1)``, ``np.max(x, axis=1)``) has the
same fault along an axis: every element is an atomic update of its output (a compare-
and-swap loop for float sums, an OpenMP critical section for ``max``), which made the
row max and sum of a GCN's ``log_softmax`` its most expensive step. A reduction
that keeps at least one axis takes DaCe's own ``'pure-seq'`` expansion instead (a
parallel map over the kept elements, each accumulated in a register by a sequential
loop; :func:`reduce_applicable`).

DaCe's pure ``Transpose`` is one parallel map over the input's elements, writing the
output with the stride of a whole row (the transposes around the sparse products of a
torch ``nn.Linear`` chain). :class:`ExpandTransposeTiled` is DaCe's own pure expansion with DaCe's
``MapTiling`` applied to its map (:data:`TRANSPOSE_TILE` square tiles in parallel, each
walked sequentially: both sides stay in cache).
"""
import dace
import dace.library
from dace import hooks
from dace.libraries.blas import Dot, MatMul
from dace.libraries.standard import Reduce, Transpose
from dace.libraries.standard.nodes.transpose import ExpandTransposePure
from dace.transformation.transformation import ExpandTransformation

from sdfgsparse._symbolic import pyexpr
from sdfgsparse.targets.cpu.builder import CpuKernel
from sdfgsparse.targets.cpu.dense_loops import GEMM_ROWS, contiguous_rows
from sdfgsparse.targets.cpu.row_leaves import gemm_row_block
from sdfgsparse.targets.cpu.environment import SdfgsparseCPU

__all__ = ['ExpandMatMulRows', 'ExpandDotReduce', 'IMPLEMENTATION', 'rows_applicable', 'dot_applicable',
           'reduce_applicable', 'REDUCE_IMPLEMENTATION', 'ExpandTransposeTiled', 'TRANSPOSE_TILE',
           'transpose_applicable', 'DOT_PARALLEL', 'select_dense_products', 'sparse_program_defaults']

IMPLEMENTATION = 'sdfgsparse'

#: Below this many elements a dot product runs on one thread (a parallel region costs more).
DOT_PARALLEL = 1 << 16


def _operands(node, state, inputs=('_a', '_b'), output='_c'):
    """The descriptors connected to ``inputs`` and ``output`` (None where unconnected)."""
    sdfg = state.parent
    ins = {e.dst_conn: sdfg.arrays[e.data.data] for e in state.in_edges(node)}
    outs = {e.src_conn: sdfg.arrays[e.data.data] for e in state.out_edges(node)}
    return tuple(ins.get(c) for c in inputs) + (outs.get(output), )


_HOST = (dace.StorageType.Default, dace.StorageType.CPU_Heap, dace.StorageType.Register)


def _whole_arrays(node, state) -> bool:
    """Whether every memlet of ``node`` covers its whole array (the row expansion reads the
    descriptors' shapes, not the subsets: ``X[2:6, :] @ W`` on a 12-row ``X`` must not
    take it)."""
    sdfg = state.parent
    for e in list(state.in_edges(node)) + list(state.out_edges(node)):
        desc = sdfg.arrays[e.data.data]
        subset = e.data.subset
        if subset is None or len(subset) != len(desc.shape):
            return False
        if any(dace.symbolic.simplify(lo) != 0 for lo in subset.min_element()):
            return False
        if any(dace.symbolic.simplify(sz - n) != 0 for sz, n in zip(subset.size(), desc.shape)):
            return False
    return True


def rows_applicable(node, state) -> bool:
    """A 2-D x 2-D product of one float type in host memory, whole arrays (no subsets),
    rows contiguous, no scaling or accumulation."""
    if not isinstance(node, MatMul) or node.alpha != 1 or node.beta != 0:
        return False
    a, b, c = _operands(node, state)
    if a is None or b is None or c is None:
        return False
    if not (len(a.shape) == len(b.shape) == len(c.shape) == 2):
        return False
    if not (a.dtype == b.dtype == c.dtype) or a.dtype not in (dace.float32, dace.float64):
        return False
    if any(isinstance(d, dace.data.View) or d.storage not in _HOST for d in (a, b, c)):
        return False
    return contiguous_rows(a, b, c) and _whole_arrays(node, state)


@dace.library.expansion
class ExpandMatMulRows(ExpandTransformation):
    """Blocks of rows of C in parallel; per block, register-held column panels over K."""
    environments = [SdfgsparseCPU]

    @staticmethod
    def expansion(node, state, sdfg):
        a, b, c = _operands(node, state)
        k = CpuKernel(node, state, sdfg)
        M, K, N = a.shape[0], a.shape[1], b.shape[1]
        sc = k.scope(k.add_state('gemm'), [('ib', 0, (M + GEMM_ROWS - 1) // GEMM_ROWS)])
        gemm_row_block(k, sc, '_c', '_a', '_b', M, K, N, *(d.strides[0] for d in (a, b, c)), c.dtype.ctype)
        return k.build()


MatMul.register_implementation(IMPLEMENTATION, ExpandMatMulRows)


def dot_applicable(node, state) -> bool:
    """A dot product of two float vectors of the result's type, in host memory."""
    if not isinstance(node, Dot):
        return False
    x, y, r = _operands(node, state, ('_x', '_y'), '_result')
    if x is None or y is None or r is None:
        return False
    if not (x.dtype == y.dtype == r.dtype) or x.dtype not in (dace.float32, dace.float64):
        return False
    return all(d.storage in _HOST for d in (x, y, r))


@dace.library.expansion
class ExpandDotReduce(ExpandTransformation):
    """``_result = sum(_x[i] * _y[i])`` as one OpenMP SIMD reduction tasklet."""
    environments = [SdfgsparseCPU]

    @staticmethod
    def expansion(node, state, sdfg):
        (desc_x, stride_x), (desc_y, stride_y), desc_res, size = node.validate(sdfg, state)
        n = pyexpr(node.n or size)
        ctype = desc_res.dtype.ctype
        code = (f'{ctype} s = 0; const long n = {n}, sx = {pyexpr(stride_x)}, sy = {pyexpr(stride_y)}; '
                f'_Pragma("omp parallel for simd reduction(+:s) if(n >= {DOT_PARALLEL})") '
                'for (long i = 0; i < n; ++i) s += _x[i * sx] * _y[i * sy]; '
                '_result = s;')
        return dace.sdfg.nodes.Tasklet(node.name, node.in_connectors, {'_result': desc_res.dtype}, code,
                                       language=dace.dtypes.Language.CPP)


Dot.register_implementation(IMPLEMENTATION, ExpandDotReduce)

#: Edge of the square tiles of :class:`ExpandTransposeTiled` (16 float32: one cache line)
TRANSPOSE_TILE = 16


def transpose_applicable(node, state) -> bool:
    """A 2-D transpose in host memory."""
    if not isinstance(node, Transpose):
        return False
    ins, outs = state.in_edges(node), state.out_edges(node)
    if len(ins) != 1 or len(outs) != 1:
        return False
    src, dst = state.sdfg.arrays[ins[0].data.data], state.sdfg.arrays[outs[0].data.data]
    return len(src.shape) == 2 and src.storage in _HOST and dst.storage in _HOST


@dace.library.expansion
class ExpandTransposeTiled(ExpandTransformation):
    """DaCe's pure transpose with its map tiled by DaCe's ``MapTiling``: tiles in
    parallel, the elements of a tile in sequence."""
    environments = [SdfgsparseCPU]

    @staticmethod
    def expansion(node, state, sdfg):
        from dace.transformation.dataflow import MapTiling
        nsdfg = ExpandTransposePure.expansion(node, state, sdfg)
        (nstate, ) = nsdfg.nodes()
        entries = [n for n in nstate.nodes() if isinstance(n, dace.nodes.MapEntry)]
        if len(entries) == 1 and len(entries[0].map.params) == 2:
            inner = entries[0]
            MapTiling.apply_to(nsdfg, options={'tile_sizes': (TRANSPOSE_TILE, TRANSPOSE_TILE)}, map_entry=inner)
            inner.map.schedule = dace.ScheduleType.Sequential
        return nsdfg


Transpose.register_implementation(IMPLEMENTATION, ExpandTransposeTiled)

#: DaCe's expansion of a ``Reduce`` along an axis without atomics
REDUCE_IMPLEMENTATION = 'pure-seq'


def reduce_applicable(node, state) -> bool:
    """A reduction in host memory that keeps at least one axis of its input and has an
    identity (``'pure-seq'`` starts each accumulator from it). A full reduction (one
    output element) keeps DaCe's parallel expansion."""
    if not isinstance(node, Reduce) or node.identity is None:
        return False
    ins, outs = state.in_edges(node), state.out_edges(node)
    if len(ins) != 1 or len(outs) != 1 or ins[0].data.data is None or outs[0].data.data is None:
        return False
    sdfg = state.sdfg
    src, dst = sdfg.arrays[ins[0].data.data], sdfg.arrays[outs[0].data.data]
    if src.storage not in _HOST or dst.storage not in _HOST:
        return False
    kept = [d for d in range(len(ins[0].data.subset)) if node.axes is not None and d not in node.axes]
    return any(ins[0].data.subset.size()[d] != 1 for d in kept)


def select_dense_products(sdfg: dace.SDFG, apply: bool = True) -> int:
    """Select sdfgsparse's expansions for the dense 2-D ``MatMul``, ``Dot`` and
    ``Transpose`` nodes of ``sdfg`` they apply to, and DaCe's ``'pure-seq'`` for its
    ``Reduce`` nodes along an axis; returns how many nodes it switched (``apply=False``: would switch). Only nodes
    left to DaCe's default are switched — not those with an implementation of their own,
    and no product while DaCe's BLAS default is not ``'pure'`` (a BLAS library configured
    by the user)."""
    blas = dace.Config.get('library', 'blas', 'default_implementation') == 'pure'
    n = 0
    for node, state in sdfg.all_nodes_recursive():
        if not isinstance(state, dace.SDFGState) or node.__class__ not in (MatMul, Dot, Reduce, Transpose):
            continue
        if isinstance(node, Transpose):
            if not node.implementation and transpose_applicable(node, state):
                if apply:
                    node.implementation = IMPLEMENTATION
                n += 1
        elif isinstance(node, Reduce):
            if not node.implementation and reduce_applicable(node, state):
                if apply:
                    node.implementation = REDUCE_IMPLEMENTATION
                n += 1
        elif blas and not node.implementation and (rows_applicable(node, state) or dot_applicable(node, state)):
            if apply:
                node.implementation = IMPLEMENTATION
            n += 1
    return n


def sparse_program_defaults(sdfg: dace.SDFG, apply: bool = True) -> int:
    """SDFG call hook (DaCe runs it before it compiles a called ``@dace.program`` or an
    ``SDFG.__call__``; ``ss.compile`` applies it to a copy; ``SDFG.compile()`` called
    directly bypasses it): in an SDFG with sparse data, dense products take sdfgsparse's
    expansions (:func:`select_dense_products`). Returns how many nodes it switched."""
    from sdfgsparse.formats import is_sparse_desc
    if any(is_sparse_desc(d) for g in sdfg.all_sdfgs_recursive() for d in g.arrays.values()):
        return select_dense_products(sdfg, apply)
    return 0


if not any(getattr(h, '_sdfgsparse', False) for h in hooks._SDFG_CALL_HOOKS):
    hooks.register_sdfg_call_hook(before_hook=sparse_program_defaults)
    hooks._SDFG_CALL_HOOKS[-1]._sdfgsparse = True
