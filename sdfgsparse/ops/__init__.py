"""The sparse library nodes. Each derives from :class:`SparseLibraryNode` and lists its
implementations (``pure``: a portable SDFG; ``cpu``: the tuned CPU kernels)."""
from sdfgsparse.ops.base import SparseLibraryNode, FusableSparseNode

__all__ = ['SparseLibraryNode', 'FusableSparseNode']
