"""The DaCe environment of the ``mkl`` implementations: MKL's headers and ``libmkl_rt``.

The headers come from the ``mkl-include`` package and the library from ``mkl`` (the ``[mkl]``
extra: ``pip install -e '.[mkl]'``), both installed under the Python environment's prefix
(``<prefix>/include``, ``<prefix>/lib``); ``$MKLROOT`` (a oneAPI installation) is looked in
as well. :func:`missing` says what is not there; without them the implementations are not
registered and ``ss.optimize`` never offers them.
"""
import glob
import os
import sys
from typing import List, Optional

import dace.library

from sdfgsparse.targets.cpu.environment import SdfgsparseCPU

__all__ = ['SdfgsparseMKL', 'missing', 'include_dir', 'library']

HEADER = 'mkl_spblas.h'


def _prefixes() -> List[str]:
    out = [sys.prefix, sys.base_prefix]
    if os.environ.get('MKLROOT'):
        out.insert(0, os.environ['MKLROOT'])
    return list(dict.fromkeys(out))


def include_dir() -> Optional[str]:
    """The folder holding ``mkl_spblas.h``, or None."""
    for p in _prefixes():
        if os.path.isfile(os.path.join(p, 'include', HEADER)):
            return os.path.join(p, 'include')
    return None


def library() -> Optional[str]:
    """The path of ``libmkl_rt`` (MKL's single dynamic library), or None."""
    for p in _prefixes():
        for sub in ('lib', 'lib/intel64', 'lib64'):
            found = sorted(glob.glob(os.path.join(p, sub, 'libmkl_rt.so*')))
            if found:
                return found[0] if os.path.basename(found[0]) == 'libmkl_rt.so' else found[-1]
    return None


def missing() -> Optional[str]:
    """Why the ``mkl`` implementations are not offered, or None when they are."""
    if sys.platform != 'linux':
        return 'the mkl implementations are built for Linux only'
    if include_dir() is None:
        return f'{HEADER} not found (pip install -e ".[mkl]", the mkl-include package)'
    if library() is None:
        return 'libmkl_rt not found (pip install -e ".[mkl]", the mkl package)'
    return None


@dace.library.environment
class SdfgsparseMKL:
    """MKL's sparse BLAS for the ``mkl`` kernels: its headers, ``libmkl_rt`` (linked by
    path, found at run time beside it), and sdfgsparse's leaves (``include/sdfgsparse_mkl.h``)."""
    cmake_minimum_version = None
    cmake_packages = []
    cmake_variables = {}
    cmake_compile_flags = []
    cmake_files = []
    state_fields = []
    init_code = ''
    finalize_code = ''
    dependencies = [SdfgsparseCPU]
    headers = [os.path.join('include', 'sdfgsparse_mkl.h')]

    @staticmethod
    def cmake_includes():
        return [d for d in (include_dir(), ) if d]

    @staticmethod
    def cmake_libraries():
        return [p for p in (library(), ) if p]

    @staticmethod
    def cmake_link_flags():
        lib = library()
        return [f'-Wl,-rpath,{os.path.dirname(lib)}'] if lib else []
