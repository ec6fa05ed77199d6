"""sdfgsparse: sparse tensors as first-class data in DaCe SDFGs.

>>> import dace, numpy as np, scipy.sparse as sp
>>> import sdfgsparse as ss
>>> M, N = dace.symbol('M'), dace.symbol('N')
>>> @dace.program
... def spmv(A: ss.CSR[dace.float64, M, N], x: dace.float64[N]):
...     return A @ x
"""
from sdfgsparse import _dace_compat

_dace_compat.apply()  # DaCe 1.0.2 bug fixes

from sdfgsparse import build as _build
from sdfgsparse import notes as _notes

_build.install()  # build folders named by content, built under a lock; CMake seeds
_notes.install()  # SDFG.sparse_notes

from sdfgsparse.targets.cpu import openmp as _openmp

_openmp.bind()  # one OpenMP runtime for our libraries and those already or later loaded

from sdfgsparse import errors
from sdfgsparse.formats import CSR, CSC, COO, DCSR, BSR, ELL, DIA, CSF, BatchedCSR, NM, GNM, VNM, SparseFormat, SparseType
from sdfgsparse.runtime.container import SparseMatrix, SparseTensor
from sdfgsparse.ops.functions import relu, exp, sqrt, abs, sin, tanh, square, sigmoid, spones, sddmm, softmax
from sdfgsparse.runtime.call import compile as _compile
from sdfgsparse.runtime.host_convert import convert as _host_convert
from sdfgsparse.runtime.marshal import VALIDATE as _VALIDATE
from sdfgsparse.runtime import hooks as _hooks
import sdfgsparse.frontends.numpy  # registers the sparse operators with DaCe's frontend
import sdfgsparse.frontends.numpy_tensor  # and those of tensors (rank other than 2)
from sdfgsparse import analysis
from sdfgsparse import targets
import sdfgsparse.targets.cpu  # registers the cpu implementations of the sparse nodes
import sdfgsparse.targets.cuda  # noqa: F401 (installed below, once the runtime is loaded)
import sdfgsparse.targets.mkl  # noqa: F401 (registers the mkl implementations where the [mkl] extra is)
from sdfgsparse import ops
from sdfgsparse import transformations  # registers the Sparse transformations (editors, history replay)
from sdfgsparse import distributed  # MPI: mpi4py (the [mpi] extra) is imported at the first distributed call
from sdfgsparse.distributed.program import compile_distributed as _distributed_program

_hooks.install()  # sparse arguments and results through DaCe's own call paths
targets.cuda.install()  # CUDA 13 build fixes; the sparse-aware GPUTransformSDFG

__version__ = '0.1.0'


def to_device(array, index_dtype=None):
    """A copy of ``array`` in GPU memory, for the arguments of programs compiled with
    ``target='gpu'``: a ``DeviceArray`` of a dense array, a ``DeviceSparseMatrix`` of a
    sparse matrix (checked once; ``index_dtype``: its index width) (see
    :func:`sdfgsparse.runtime.device.to_device`)."""
    from sdfgsparse.runtime.device import to_device as _to_device
    return _to_device(array, index_dtype)


def __getattr__(name):
    if name == 'torch':  # the PyTorch frontend; torch is optional, imported on first use
        import importlib
        module = importlib.import_module('sdfgsparse.frontends.torch')
        globals()['torch'] = module
        return module
    raise AttributeError(f'module {__name__!r} has no attribute {name!r}')


def compile(program_or_sdfg, target: str = 'cpu', design=None, distributed=None, **options):
    """Compile an SDFG or a ``@dace.program`` into a callable taking sparse arguments (see
    :func:`sdfgsparse.runtime.call.compile` for ``target`` and ``design``).

    ``distributed=comm`` (an mpi4py communicator; the ``[mpi]`` extra): the program runs on
    every process of ``comm``, its sparse products as local products plus the halo
    exchange and its dot products and sums over the rows as all-reduces; ``options``:
    ``partition`` ('rows', '2d', 'arrow'), ``format`` (of the local matrices), ``gather``
    (None: results stay distributed; a rank or 'all'), ``overlap``. See
    :mod:`sdfgsparse.distributed.program`."""
    if distributed is None:
        if options:
            raise errors.ArgumentError(f'compile: {sorted(options)} apply only with distributed=comm')
        return _compile(program_or_sdfg, target, design)
    if target != 'cpu' or design is not None:
        raise errors.ArgumentError(f"compile: distributed programs run on target='cpu' (got {target!r})")
    return _distributed_program(program_or_sdfg, distributed, **options)


def set_validation(on: bool) -> None:
    """Turn the O(nnz) index checks on sparse arguments on (default) or off."""
    _VALIDATE['on'] = bool(on)


def convert(A, fmt, index_dtype=None, prune=False):
    """Convert ``A`` to the catalogue format ``fmt``.

    In Python: returns a new matrix (scipy when the format has a scipy twin, else
    :class:`SparseMatrix`). Inside a ``@dace.program`` it becomes a conversion node.
    ``prune=True``: into a structured format (``ss.NM[2, 4]``), keep the largest
    magnitudes of each group (by default a matrix that does not fit raises
    ``ss.errors.PatternError``).
    """
    return _host_convert(A, fmt, index_dtype, prune)


def record_examples(sdfg, matrices, threads=None, cache_bytes=None) -> dict:
    """Record the sizes and structure statistics of example arguments (``{'A': scipy matrix,
    'X': array}``) on ``sdfg``, where SparseFormatSelection, SparseDenseTiling and the
    SparseIOLowerBound pass find them (also after saving, and in the VS Code extension);
    see :mod:`sdfgsparse.transformations.examples`. ``ss.optimize(..., matrices=)`` records
    its matrices the same way."""
    from sdfgsparse.transformations.examples import record_examples as _record
    return _record(sdfg, matrices, threads, cache_bytes)


def optimize(program_or_sdfg, target='cpu', matrices=None, cache_size=None, fpga_board='u280', fpga_clock_mhz=300,
             formats=True, implementations=None):
    """Apply the sparse optimisation pipeline (format selection, loop ordering, fusion,
    tiling, DaCe's own clean-up, and with every argument among ``matrices`` a measured choice
    of each product's implementation where the ``[mkl]`` extra offers another) to a
    ``@dace.program`` or an SDFG (in place); returns a callable with the program's
    signature, ``.sdfg``, ``.lowered`` and ``.report()`` (``target='fpga'``: also
    ``.fpga_report()``, the model of the chosen design on ``fpga_board``). See
    :func:`sdfgsparse.transformations.pipeline.optimize` for every parameter."""
    from sdfgsparse.transformations.pipeline import optimize as _optimize
    return _optimize(program_or_sdfg, target=target, matrices=matrices, cache_size=cache_size, fpga_board=fpga_board,
                     fpga_clock_mhz=fpga_clock_mhz, formats=formats, implementations=implementations)


__all__ = [
    'CSR', 'CSC', 'COO', 'DCSR', 'BSR', 'ELL', 'DIA', 'CSF', 'BatchedCSR', 'NM', 'GNM', 'VNM', 'SparseFormat', 'SparseType',
    'SparseMatrix', 'SparseTensor', 'compile',
    'convert', 'errors', 'set_validation', 'analysis', 'relu', 'exp', 'sqrt', 'abs', 'sin', 'tanh', 'square',
    'sigmoid', 'spones', 'sddmm', 'softmax', 'optimize', 'targets', 'ops', 'to_device', 'transformations',
    'record_examples', 'distributed'
]
