"""Level formats and the format catalogue (CSR, CSC, COO, DCSR, BSR, ELL, DIA; the structured
NM, GNM and VNM families; COO and CSF of tensors of any rank, CSF in any mode order; BatchedCSR)."""
from sdfgsparse.formats.levels import Level, Dense, Compressed, Singleton, Offset, Indirect
from sdfgsparse.formats.format import (SparseFormat, SparseType, sparse_type_of, is_sparse_desc, is_ours, mark_ours,
                                       parsing_ours, is_parsing_ours,
                                       get_format,
                                       own_size_symbols)
from sdfgsparse.formats.catalogue import CSR, CSC, COO, DCSR, BSR, ELL, DIA, CSF, BatchedCSR, CATALOGUE, TENSOR_FORMATS
from sdfgsparse.formats.structured import NM, GNM, VNM, pattern_of

__all__ = [
    'Level', 'Dense', 'Compressed', 'Singleton', 'Offset', 'Indirect', 'SparseFormat', 'SparseType', 'sparse_type_of',
    'own_size_symbols', 'is_sparse_desc', 'is_ours', 'mark_ours', 'parsing_ours', 'is_parsing_ours', 'get_format', 'CSR', 'CSC', 'COO', 'DCSR', 'BSR', 'ELL', 'DIA', 'CATALOGUE',
    'CSF', 'BatchedCSR', 'TENSOR_FORMATS',
    'NM', 'GNM', 'VNM', 'pattern_of'
]
