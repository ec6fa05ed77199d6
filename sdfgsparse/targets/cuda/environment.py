"""The DaCe environment of the ``cuda`` leaf kernels: their headers (``include/*.cuh``).

A ``cuda`` expansion that calls a leaf (:mod:`sdfgsparse.targets.cuda.spmv`) lists
:class:`SdfgsparseCUDA`; DaCe then includes :data:`HEADERS` in the program's generated code
(the CUDA file and the host file: the headers compile with g++ as host code, their kernels
only under nvcc) and puts ``include/`` on the include path. They are part of sdfgsparse's
source fingerprint (:func:`sdfgsparse.build.naming.source_fingerprint`).
"""
import os

import dace.library

__all__ = ['SdfgsparseCUDA', 'INCLUDE', 'HEADERS']

#: The folder of the CUDA headers.
INCLUDE = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'include')
#: What every program with a ``cuda`` leaf includes.
HEADERS = ['sdfgsparse_cuda.cuh', 'sdfgsparse_cuda_spmv.cuh', 'sdfgsparse_cuda_spmm.cuh',
           'sdfgsparse_cuda_sddmm.cuh']


@dace.library.environment
class SdfgsparseCUDA:
    """sdfgsparse's CUDA leaf headers."""
    cmake_minimum_version = None
    cmake_packages = []
    cmake_variables = {}
    cmake_includes = [INCLUDE]
    cmake_libraries = []
    cmake_compile_flags = []
    cmake_link_flags = []
    cmake_files = []
    headers = {'frame': list(HEADERS), 'cuda': list(HEADERS)}  # the host file and the CUDA file
    state_fields = []
    init_code = ''
    finalize_code = ''
    dependencies = []
