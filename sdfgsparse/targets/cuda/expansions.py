"""The ``cuda`` implementation of every sparse library node.

Each node's ``cuda`` expansion is its level-walk SDFG (the ``pure`` builder's maps, loops
and tasklets) with nothing in it that only a CPU runs: DaCe's ``GPUTransformSDFG`` then
turns its maps into kernels, as it does for any SDFG (:func:`sdfgsparse.targets.cuda.lower.to_gpu`
chooses ``cuda`` for every node, places the arguments and applies the transformation). A
tuned kernel is a ``.cuh`` leaf header (``include/``) with its own expansion class,
registered over the generic one, without touching :mod:`sdfgsparse.ops`: SpMV's merge-path
(:mod:`sdfgsparse.targets.cuda.spmv`), SpMM's thread per element (:mod:`.spmm`) and SDDMM's
warp per row (:mod:`.sddmm`) so far.
"""
from typing import List, Type

import dace.library
from dace.transformation.transformation import ExpandTransformation

from sdfgsparse.ops.add import SparseAdd
from sdfgsparse.ops.add_dense import SparseAddDense
from sdfgsparse.ops.attention import SparseAttention
from sdfgsparse.ops.base import SparseLibraryNode
from sdfgsparse.ops.concat import SparseConcat
from sdfgsparse.ops.convert import Convert
from sdfgsparse.ops.dense_spmm import DenseSpMM
from sdfgsparse.ops.einsum import SparseEinsum
from sdfgsparse.ops.einsum_sparse import SparsePrefixEinsum
from sdfgsparse.ops.map_values import MapValues
from sdfgsparse.ops.materialise import SparseMaterialise
from sdfgsparse.ops.tensor_add import SparseTensorAdd
from sdfgsparse.ops.tensor_mul import SparseTensorMul
from sdfgsparse.ops.mul import SparseMul
from sdfgsparse.ops.mul_dense import SparseMulDense
from sdfgsparse.ops.reduce import SparseSum
from sdfgsparse.ops.sddmm import SDDMM
from sdfgsparse.ops.softmax import SparseSoftmax
from sdfgsparse.ops.sparse_copy import SparseCopy
from sdfgsparse.ops.spgemm import SpGEMM
from sdfgsparse.ops.spmm import SpMM
from sdfgsparse.ops.spmv import SpMV
from sdfgsparse.targets.registry import register

__all__ = ['IMPLEMENTATION', 'NODES', 'generic_expansion', 'portable']

#: The name of the implementations registered here.
IMPLEMENTATION = 'cuda'

#: The node classes that get a ``cuda`` implementation (every sparse library node).
NODES: List[Type[SparseLibraryNode]] = [
    SparseAdd, SparseAddDense, SparseAttention, Convert, DenseSpMM, MapValues, SparseMul, SparseMulDense, SparseSum,
    SDDMM, SparseSoftmax, SparseCopy, SparseConcat, SpGEMM, SpMM, SpMV, SparseEinsum,
    SparsePrefixEinsum, SparseMaterialise, SparseTensorAdd, SparseTensorMul
]


def portable(node, state, sdfg, *args, **kwargs):
    """The node's portable level walk (its ``pure`` expansion), looked up at expansion time so
    that a replaced ``pure`` expansion is the one run: the generic ``cuda`` expansion, and what
    a leaf kernel (:mod:`sdfgsparse.targets.cuda.leaves`) does not take."""
    return type(node).implementations['pure'].expansion(node, state, sdfg, *args, **kwargs)


def generic_expansion(node_cls: Type[SparseLibraryNode]) -> Type[ExpandTransformation]:
    """The ``cuda`` expansion class of ``node_cls``: its portable level walk, to be scheduled
    on the GPU by DaCe's GPU transformation (one class per node class: DaCe binds an
    expansion to the node it was registered on)."""
    cls = type(f'Expand{node_cls.__name__}CUDA', (ExpandTransformation, ), {
        '__doc__': f'The level walk of :class:`{node_cls.__module__}.{node_cls.__name__}` for the GPU '
                   '(maps that DaCe\'s GPU transformation makes kernels).',
        '__module__': __name__,
        'environments': [],
        'expansion': staticmethod(portable),
    })
    return dace.library.expansion(cls)


for _node in NODES:
    _cls = generic_expansion(_node)
    globals()[_cls.__name__] = _cls  # a saved history names it by classpath: DaCe locates it here
    register(_node, IMPLEMENTATION, _cls)
