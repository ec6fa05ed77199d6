"""The DaCe environment of the ``cpu`` implementations: their C++ header files.

Every ``cpu`` expansion lists :class:`SdfgsparseCPU` in its ``environments``, as DaCe's
BLAS expansions list ``MKL`` or ``OpenBLAS``; DaCe then includes :data:`HEADERS` in the
generated code of every program that holds such a kernel and puts ``include/`` on the
compiler's include path. The headers hold the C++ leaves of the kernels: the vector width
and argument pointers of the row tasklets (``sdfgsparse_cpu.h``), the per-call thread
choice of the row loops (``sdfgsparse_team.h``), the row walks of the products
(``sdfgsparse_rows.h``) and the row union of ``A + B`` (``sdfgsparse_row_union.h``). They are part of sdfgsparse's source
fingerprint (:func:`sdfgsparse.build.naming.source_fingerprint`), so a change of a header
rebuilds the programs that include it.
"""
import os

import dace.library

__all__ = ['SdfgsparseCPU', 'INCLUDE', 'HEADERS']

#: The folder of the C++ headers.
INCLUDE = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'include')
#: What every program with a ``cpu`` kernel includes (``sdfgsparse_cpu.h`` includes the team
#: header); the SpGEMM workspaces and the in-kernel checks come with the kernels that use them,
#: as their global code.
HEADERS = ['sdfgsparse_cpu.h', 'sdfgsparse_rows.h', 'sdfgsparse_row_union.h']


@dace.library.environment
class SdfgsparseCPU:
    """sdfgsparse's C++ headers for the ``cpu`` kernels (no library to link)."""
    cmake_minimum_version = None
    cmake_packages = []
    cmake_variables = {}
    cmake_includes = [INCLUDE]
    cmake_libraries = []
    cmake_compile_flags = []
    cmake_link_flags = []
    cmake_files = []
    headers = list(HEADERS)
    state_fields = []
    init_code = ''
    finalize_code = ''
    dependencies = []
