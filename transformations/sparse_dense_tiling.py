"""``SparseDenseTiling``: strip-mine the dense loop of a sparse-dense product and hoist the
tile loop outward, with the tile size from the data-movement model."""
from dace import properties
from dace.sdfg import utils as sdutil
from dace.transformation import transformation as xf

from sdfgsparse._symbolic import evaluate
from sdfgsparse.analysis.schedules import Decision, Machine, spmm_bound_bytes, spmm_tile_decision
from sdfgsparse.targets.cpu.dense_loops import contiguous_rows
from sdfgsparse.transformations._sizes import size_values, stored_slots
from sdfgsparse.transformations.examples import recorded_machine
from sdfgsparse.targets.cpu.builder import strategy
from sdfgsparse.ops.spmm import SCATTER_TILE, SpMM

__all__ = ['SparseDenseTiling']


@properties.make_properties
class SparseDenseTiling(xf.SingleStateTransformation):
    """Tiles the dense loop of SpMM (Scorch's sparse-dense tiling).

    SpMM ``Y = A @ B`` walks ``A``'s stored entries around a dense loop over the ``K``
    columns of ``B`` -- a dense loop that encloses no sparse loop. This transformation
    strip-mines it into tiles of ``J`` columns and hoists the tile loop outward (the node's
    ``dense_tile`` property; the expansion generates the loops)::

        before: for i in rows (parallel): for p in row i: for k in 0..K:        Y[i,k] += A[p] B[j,k]
        after:  for kt in 0..K step J:   for i (parallel): for p: for k in kt..kt+J: ...

    (a scatter walk -- CSC, COO, ``A.T`` -- runs its tiles in parallel, each walking ``A``'s
    entries once with ``J`` contiguous updates per entry instead of one strided column per
    walk; untransformed, it takes tiles of :data:`~sdfgsparse.ops.spmm.SCATTER_TILE`).
    ``J`` comes from the data-movement model
    (:func:`sdfgsparse.analysis.schedules.spmm_tile_decision`): each candidate tile pays
    one walk over ``A`` per tile and saves the gathers of ``B`` (and scattered updates of
    ``Y``) that its smaller working set keeps in the last-level and private caches.

    Applicability: the node is untiled (``dense_tile == 0``), the operand's shape, entry
    count and ``K`` are known (constants, symbol values in ``sizes``, or the sizes recorded
    on the SDFG from example arguments by ``ss.optimize(..., matrices=)`` or
    ``sdfgsparse annotate``), and the model's
    best tile moves at least :data:`~sdfgsparse.analysis.schedules.MARGIN` less than the
    schedule without the transformation; :meth:`decision` gives every candidate's cost.
    """
    CATEGORY = 'Sparse'

    product = xf.PatternNode(SpMM)

    cache_bytes = properties.Property(dtype=int,
                                      default=0,
                                      desc='Last-level cache size in bytes for the model; 0: the one recorded with '
                                      'the examples, else this machine\'s')
    threads = properties.Property(dtype=int, default=0, desc='Parallel workers; 0: the number recorded with the '
                                  'examples, else OMP_NUM_THREADS or the CPU count')
    vector = properties.Property(dtype=int, default=8, desc='Tile sizes are multiples of this (SIMD width)')
    sizes = properties.DictProperty(key_type=str,
                                    value_type=int,
                                    desc='Values of size symbols (e.g. {"K": 64}) used to evaluate the tile size; '
                                    'symbols not given here take the values recorded from example arguments '
                                    '(ss.optimize(matrices=), sdfgsparse annotate)')

    @classmethod
    def expressions(cls):
        return [sdutil.node_path_graph(cls.product)]

    def decision(self, state, sdfg) -> Decision:
        """The model's verdict on the matched node (None when a size is unknown)."""
        node = self.product
        st = node.operand_type(state, 'A')
        y = node.connected(state, '_Y')
        values = size_values(sdfg, self.sizes)  # sizes: constants or given
        rows, cols, k = (evaluate(e, values) for e in (st.rows, st.cols, y.shape[1]))
        nnz = stored_slots(st, values)
        if rows is None or cols is None or k is None or nnz is None:
            return None
        scatter = strategy(st, 0, node.schedule_hint) == 'sequential'
        b = node.connected(state, '_B')
        # without the transformation: a scatter walk takes fixed tiles (one column per walk
        # where the rows are not contiguous), a row-owned walk one walk
        default = (SCATTER_TILE if contiguous_rows(b, y) else 1) if scatter else 0
        v, i = b.dtype.bytes, st.index_dtype.bytes
        machine = recorded_machine(sdfg)  # (what the examples were recorded with, where not set here)
        m = Machine.here(llc=self.cache_bytes or machine.get('cache_bytes'),
                         threads=self.threads or machine.get('threads'))
        bound = spmm_bound_bytes(rows, cols, nnz, k, m, v)
        return spmm_tile_decision(node.label, rows, cols, nnz, k, scatter, default, m, v, i, self.vector, bound)

    def tile(self, state, sdfg) -> int:
        """The tile the model chooses for the matched node (0: none)."""
        d = self.decision(state, sdfg)
        if d is None or not d.applies:
            return 0
        return d.candidate(d.chosen).param

    def can_be_applied(self, state, expr_index, sdfg, permissive=False):
        if self.product.dense_tile != 0:
            return False
        return self.tile(state, sdfg) > 0

    def apply(self, state, sdfg):
        self.product.dense_tile = self.tile(state, sdfg)
