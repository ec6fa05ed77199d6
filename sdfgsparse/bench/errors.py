"""Errors of the benchmark harness, raised for bad command-line or API input.

Each names the option (``--kernels``, ``--peers``, ``--matrices`` …), the value and what
would be accepted. All subclass :class:`BenchError`, itself a ``ValueError``.
"""

__all__ = ['BenchError', 'KernelSpecError', 'PeerSpecError', 'MatrixError', 'OptionError']


class BenchError(ValueError):
    """Base class of every benchmark-harness input error."""


class KernelSpecError(BenchError):
    """An entry of ``--kernels`` is not a known kernel (or its parameter is not a positive integer)."""


class PeerSpecError(BenchError):
    """An entry of ``--peers`` is not a known peer system."""


class MatrixError(BenchError):
    """``--matrices`` names no folder, a folder without .mtx/.mtx.gz files, or an unreadable file."""


class OptionError(BenchError):
    """A numeric option (``--threads``, ``--repeat``) is out of range."""
