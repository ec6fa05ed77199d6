"""Sparse-aware SDFG transformations (``CATEGORY = 'Sparse'``), importable as
``sdfgsparse.transformations``."""
from sdfgsparse.transformations.sparse_epilogue_fusion import SparseEpilogueFusion
from sdfgsparse.transformations.sparse_fusion import SparseFusion
from sdfgsparse.transformations.sparse_loop_ordering import SparseLoopOrdering
from sdfgsparse.transformations.sparse_dense_tiling import SparseDenseTiling
from sdfgsparse.transformations.sparse_format_inference import SparseFormatInference
from sdfgsparse.transformations.sparse_format_selection import SparseFormatSelection
from sdfgsparse.transformations.sparse_multi_pumping import SparseMultiPumping
from sdfgsparse.transformations.sparse_io_lower_bound import SparseIOLowerBound
from sdfgsparse.transformations.distribute_sparse_products import DistributeSparseProducts
from sdfgsparse.transformations.examples import record_examples

__all__ = ['SparseEpilogueFusion', 'SparseFusion', 'SparseLoopOrdering', 'SparseDenseTiling', 'SparseFormatInference',
           'SparseFormatSelection', 'SparseMultiPumping', 'SparseIOLowerBound', 'DistributeSparseProducts',
           'record_examples']
