"""Exceptions raised for bad user input.

Every error names the argument (and, for storage arrays, the array, position and value)
and is raised before any compilation or mutation. All subclass ``SparseError`` and one of
the built-in ``ValueError`` / ``TypeError`` so that generic handlers keep working.
"""
import os
import sys
import warnings

__all__ = [
    'SparseError', 'ShapeError', 'DTypeError', 'FormatMismatchError', 'InvalidIndexError',
    'UnsortedIndicesError', 'DuplicateIndicesError', 'IndptrError', 'IndexOverflowError',
    'UnsupportedOperationError', 'PatternError', 'ArgumentError', 'ConnectorError', 'DeviceError', 'DistributedError',
    'CopyWarning',
    'FormatFallbackWarning', 'LayoutFallbackWarning', 'warn_user'
]


class SparseError(Exception):
    """Base class of every sdfgsparse input error."""


class ShapeError(SparseError, ValueError):
    """An argument's shape disagrees with the annotation or with another argument."""


class DTypeError(SparseError, TypeError):
    """An argument's value or index dtype is not the one the program expects."""


class FormatMismatchError(SparseError, TypeError):
    """A sparse argument is stored in another format than its annotation says."""


class InvalidIndexError(SparseError, ValueError):
    """A stored index is negative or outside the matrix."""


class UnsortedIndicesError(InvalidIndexError):
    """Indices must be sorted within a row/column for this format."""


class DuplicateIndicesError(InvalidIndexError):
    """The format stores each coordinate at most once, but a duplicate was found."""


class PatternError(InvalidIndexError):
    """Storage that breaks its format's pattern: an n:m group whose slots repeat a
    coordinate or list them out of order, a V:N:M block that selects a column twice."""


class IndptrError(SparseError, ValueError):
    """A position (indptr) array is not monotone, does not start at 0 or disagrees with nnz."""


class IndexOverflowError(SparseError, ValueError):
    """A size or index does not fit in the index dtype the program uses (e.g. int32)."""


class UnsupportedOperationError(SparseError, TypeError):
    """The operation is not defined for these operands (e.g. mismatched inner dimensions)."""


class ArgumentError(SparseError, TypeError):
    """The arguments do not fit the parameters: too many or missing, or a value of a kind
    that cannot be passed there (a string, None, a list or tuple where an array belongs)."""


class ConnectorError(SparseError, ValueError):
    """A sparse library node in an SDFG is wired wrongly (a file loaded or edited, or a
    transformation's result): a connector it reads or writes is missing or not connected,
    is connected to data of the wrong kind, or is one the node does not take. Raised by the
    node's ``validate()`` (:mod:`sdfgsparse.ops.validation`), before any code is generated."""


class DeviceError(SparseError, RuntimeError):
    """A GPU program cannot be built or run as asked: this machine has no usable CUDA
    device (or no nvcc to build), or an argument is in host memory where the program
    reads device memory. (A ``RuntimeError``: the call is wrong here, not everywhere.)"""


class DistributedError(SparseError, RuntimeError):
    """A collective operation of :mod:`sdfgsparse.distributed` failed on some process; every
    process of the communicator raises it (``ranks``: the failing ranks, ``messages``: their
    errors), so that none waits forever for the others."""

    def __init__(self, message, ranks=(), messages=()):
        super().__init__(message)
        self.ranks = tuple(ranks)
        self.messages = tuple(messages)


class CopyWarning(UserWarning):
    """An argument had to be copied (e.g. index arrays widened) instead of passed zero-copy."""


class FormatFallbackWarning(UserWarning):
    """A call's matrix would not fit the format ``ss.optimize`` chose for the example
    matrices; the call ran the program's own format instead
    (:mod:`sdfgsparse.transformations.format_guard`)."""


class LayoutFallbackWarning(UserWarning):
    """An operation has no sparse implementation for a layout (``ss.torch``'s
    :class:`LayoutTensor`): it ran on the dense matrix instead (once per operation and
    layout is warned)."""


#: Modules whose frames are ours or DaCe's (a warning is attributed past them). By module
#: name, not folder: ``sdfgsparse.transformations`` and ``sdfgsparse.frontends`` are
#: installed from folders beside ``sdfgsparse/`` (setup.cfg ``package_dir``).
_INSIDE_MODULES = ('sdfgsparse', 'dace')
#: Folders whose frames count as inside too (code run from a file of the package as
#: ``__main__``, or compiled without a module name).
_INSIDE = tuple(os.path.dirname(os.path.abspath(m.__file__)) + os.sep
                for m in (sys.modules[__name__.rsplit('.', 1)[0]], ) if getattr(m, '__file__', None))


def _inside(frame, folders) -> bool:
    """Whether ``frame`` runs code of sdfgsparse (any of its subpackages, wherever they are
    installed) or of DaCe."""
    name = frame.f_globals.get('__name__')
    if isinstance(name, str) and any(name == m or name.startswith(m + '.') for m in _INSIDE_MODULES):
        return True
    return os.path.abspath(frame.f_code.co_filename).startswith(folders)


def warn_user(message: str, category=CopyWarning) -> None:
    """``warnings.warn`` attributed to the first caller outside sdfgsparse and DaCe (the
    user's call of the program), however deep the call path is."""
    import dace
    folders = _INSIDE + (os.path.dirname(os.path.abspath(dace.__file__)) + os.sep, )
    frame, level = sys._getframe(1), 2  # stacklevel 1 is this function
    while frame is not None and _inside(frame, folders):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, category, stacklevel=level)
