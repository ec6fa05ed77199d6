"""I/O lower bounds (SOAP, red-blue pebble game) of dense and sparse SDFGs.

``io_lower_bound(sdfg_or_program, cache_size=None)`` reads each statement's iteration
domain and access functions from the SDFG, groups statements as SOAP does, solves the
tile optimisation in closed form and returns an :class:`IOBoundResult` whose ``total`` is a
sympy expression in the program's symbols and the fast-memory size ``S``. Sparse library
nodes use the models of :mod:`~sdfgsparse.analysis.sparse_models`, which also work alone.
"""
from sdfgsparse.analysis.errors import (AnalysisError, InvalidCacheSizeError, SimulationError, SkippedNodeWarning,
                                        StatsError, SymbolClashError, UnboundSymbolError, UnsupportedProgramError)
from sdfgsparse.analysis.symbols import S
from sdfgsparse.analysis.lower_bound import (GroupBound, IOBoundResult, SparseOpBound, StatementBound, analyse_model,
                                             io_lower_bound)
from sdfgsparse.analysis.io_pass import IOLowerBoundPass
from sdfgsparse.analysis.sparse_models import (SparseBound, chain_bound, dense_mm_model, einsum_distinct, einsum_model,
                                               sddmm_bound, sddmm_model, spgemm_bound, spgemm_counts, spgemm_model,
                                               spmm_bound, spmm_model, spmv_bound, spmv_model, structure_stats)
from sdfgsparse.analysis.cache_sim import LRUCache, SimResult, simulate
from sdfgsparse.analysis.sdfg_extract import extract
from sdfgsparse.analysis.iterations import iteration_count, node_iterations

__all__ = [
    'io_lower_bound', 'analyse_model', 'IOBoundResult', 'StatementBound', 'GroupBound', 'SparseOpBound',
    'IOLowerBoundPass', 'S', 'SparseBound', 'spmv_model', 'spmm_model', 'sddmm_model', 'spgemm_model',
    'dense_mm_model', 'spmv_bound', 'spmm_bound', 'sddmm_bound', 'spgemm_bound', 'chain_bound', 'structure_stats',
    'spgemm_counts', 'einsum_model', 'einsum_distinct',
    'iteration_count', 'node_iterations', 'simulate', 'LRUCache', 'SimResult', 'extract', 'AnalysisError', 'UnsupportedProgramError',
    'InvalidCacheSizeError', 'SymbolClashError', 'StatsError', 'SimulationError', 'SkippedNodeWarning',
    'UnboundSymbolError'
]
