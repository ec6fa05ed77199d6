"""The ``cpu`` implementations of the sparse library nodes, one module per node file of
:mod:`sdfgsparse.ops`; importing this package registers them all (and makes ``cpu`` each
node's default). Each expansion is tested against the node's portable ``pure`` SDFG."""
from sdfgsparse.targets.cpu.expansions import (add, add_dense, attention, concat, convert, dense_spmm, einsum,
                                               einsum_sparse, map_values, materialise, mul, mul_dense, reduce, sddmm,
                                               softmax, sparse_copy, spgemm, spmm, spmv, tensor_add,
                                               tensor_mul)

__all__ = ['add', 'add_dense', 'attention', 'concat', 'convert', 'dense_spmm', 'einsum', 'einsum_sparse', 'map_values',
           'materialise', 'mul', 'mul_dense', 'reduce', 'sddmm', 'softmax', 'sparse_copy', 'spgemm', 'spmm', 'spmv',
           'tensor_add', 'tensor_mul']
