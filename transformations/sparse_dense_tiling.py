"""``SparseDenseTiling``: strip-mine the dense loop of a sparse-dense product and hoist the
tile loop outward, with the tile size from the data-movement model."""
from dace import properties
from dace.sdfg import utils as sdutil
from dace.transformation import transformation as xf

from sdfgsparse._symbolic import evaluate
from sdfgsparse.analysis.tiling import machine_cache_bytes, machine_threads, spmm_dense_tile
from sdfgsparse.targets.cpu.entries import Entries
from sdfgsparse.ops.base import member_conn
from sdfgsparse.ops.spmm import SpMM

__all__ = ['SparseDenseTiling']


@properties.make_properties
class SparseDenseTiling(xf.SingleStateTransformation):
    """Tiles the dense loop of SpMM (Scorch's sparse-dense tiling).

    SpMM ``Y = A @ B`` walks ``A``'s stored entries around a dense loop over the ``K``
    columns of ``B`` — a dense loop that encloses no sparse loop. This transformation
    strip-mines it into tiles of ``J`` columns and hoists the tile loop outward (the node's
    ``dense_tile`` property; the expansion generates the loops)::

        before: for i in rows (parallel): for p in row i: for k in 0..K:        Y[i,k] += A[p] B[j,k]
        after:  for kt in 0..K step J:   for i (parallel): for p: for k in kt..kt+J: ...

    (a scatter walk — CSC, COO, ``A.T`` — runs its tiles in parallel, each walking ``A``'s
    entries once with ``J`` contiguous updates per entry instead of one strided column per
    walk). ``J`` is the largest tile whose working set fits ``cache_bytes`` (see
    :func:`sdfgsparse.analysis.tiling.spmm_dense_tile`), a multiple of ``vector``.

    Applicability: the node is untiled (``dense_tile == 0``), the operand's shape and ``K``
    are known (constants, or symbol values in ``sizes``), and the model says tiling helps
    (a row-owned walk whose ``B`` does not fit the cache but a vector-wide slice does, or
    any scatter walk with ``K`` above the vector width).
    """
    CATEGORY = 'Sparse'

    product = xf.PatternNode(SpMM)

    cache_bytes = properties.Property(dtype=int,
                                      default=0,
                                      desc='Fast-memory size in bytes the tile must fit; 0: the L2 cache of this '
                                      'machine')
    threads = properties.Property(dtype=int, default=0, desc='Parallel workers; 0: OMP_NUM_THREADS or the CPU count')
    vector = properties.Property(dtype=int, default=8, desc='Tile sizes are multiples of this (SIMD width)')
    sizes = properties.DictProperty(key_type=str,
                                    value_type=int,
                                    desc='Values of size symbols (e.g. {"K": 64}) used to evaluate the tile size')

    @classmethod
    def expressions(cls):
        return [sdutil.node_path_graph(cls.product)]

    def tile(self, state, sdfg) -> int:
        """The tile the model chooses for the matched node (0: none)."""
        node = self.product
        st = node.operand_type(state, 'A')
        y = node.connected(state, '_Y')
        values = {**{str(c): v for c, v in sdfg.constants.items()}, **self.sizes}  # sizes: constants or given
        rows, cols, k = (evaluate(e, values) for e in (st.rows, st.cols, y.shape[1]))
        if rows is None or cols is None or k is None:
            return 0
        ent = Entries(st, {m: member_conn('A', m) for m in st.fmt.member_names})
        scatter = ent.strategy(0, node.schedule_hint) == 'sequential'
        itemsize = node.connected(state, '_B').dtype.bytes
        cache = self.cache_bytes if self.cache_bytes > 0 else machine_cache_bytes(2)
        return spmm_dense_tile(rows, cols, k, cache // itemsize, scatter,
                               self.threads if self.threads > 0 else machine_threads(), self.vector)

    def can_be_applied(self, state, expr_index, sdfg, permissive=False):
        if self.product.dense_tile != 0:
            return False
        return self.tile(state, sdfg) > 0

    def apply(self, state, sdfg):
        self.product.dense_tile = self.tile(state, sdfg)
