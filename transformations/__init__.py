"""Sparse-aware SDFG transformations (``CATEGORY = 'Sparse'``), importable as
``sdfgsparse.transformations``."""
from sdfgsparse.transformations.sparse_epilogue_fusion import SparseEpilogueFusion

__all__ = ['SparseEpilogueFusion']
