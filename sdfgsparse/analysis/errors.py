"""Exceptions raised by the I/O lower-bound analysis.

All derive from :class:`sdfgsparse.errors.SparseError` and ``ValueError`` so generic
handlers keep working; each message names the argument, the value and the fix.
"""
from sdfgsparse.errors import SparseError

__all__ = ['AnalysisError', 'UnsupportedProgramError', 'InvalidCacheSizeError', 'SymbolClashError', 'StatsError',
           'SimulationError', 'UnboundSymbolError', 'SkippedNodeWarning']


class AnalysisError(SparseError, ValueError):
    """Base class of the errors of :mod:`sdfgsparse.analysis`."""


class UnsupportedProgramError(AnalysisError):
    """The object to analyse is neither a ``dace.SDFG`` nor a ``@dace.program``."""


class InvalidCacheSizeError(AnalysisError):
    """``cache_size`` / ``--cache-words`` is not a positive integer."""


class SymbolClashError(AnalysisError):
    """The program defines a symbol with the name reserved for the fast-memory size (``S``)."""


class StatsError(AnalysisError):
    """A structure statistic passed to a sparse model is unknown, negative or inconsistent."""


class SimulationError(AnalysisError):
    """The cache simulator cannot run the program (missing symbol values, cache too small, ...)."""


class UnboundSymbolError(AnalysisError):
    """A bound is evaluated without a value for one of its symbols."""


class SkippedNodeWarning(UserWarning):
    """Some library nodes or scopes were not analysed; the bound ignores their traffic."""
