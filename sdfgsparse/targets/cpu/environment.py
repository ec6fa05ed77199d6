"""The DaCe environment of the ``cpu`` implementations: their C++ header files.

Every ``cpu`` expansion lists :class:`SdfgsparseCPU` in its ``environments``, as DaCe's
BLAS expansions list ``MKL`` or ``OpenBLAS``; DaCe then includes :data:`HEADERS` in the
generated code of every program that holds such a kernel and puts ``include/`` on the
compiler's include path. The headers hold the C++ leaves of the kernels: the vector width
and argument pointers of the row tasklets (``sdfgsparse_cpu.h``), the per-call thread
choice of the row loops (``sdfgsparse_team.h``), the row walks of the products
(``sdfgsparse_rows.h``; of the structured layouts: ``sdfgsparse_structured.h``), the row union of ``A + B`` (``sdfgsparse_row_union.h``) and the vector
versions of ``exp`` / ``log`` / ``tanh`` for the loops that call them (``sdfgsparse_vecmath.h``,
glibc's libmvec: :func:`libmvec`). They are part of sdfgsparse's source
fingerprint (:func:`sdfgsparse.build.naming.source_fingerprint`), so a change of a header
rebuilds the programs that include it.
"""
import os

import dace.library

from sdfgsparse.build import naming

__all__ = ['SdfgsparseCPU', 'INCLUDE', 'HEADERS', 'libmvec']

#: The folder of the C++ headers.
INCLUDE = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'include')
#: What every program with a ``cpu`` kernel includes (``sdfgsparse_cpu.h`` includes the team
#: header); the SpGEMM workspaces and the in-kernel checks come with the kernels that use them,
#: as their global code.
HEADERS = ['sdfgsparse_cpu.h', 'sdfgsparse_rows.h', 'sdfgsparse_structured.h', 'sdfgsparse_row_union.h',
           'sdfgsparse_vecmath.h', 'sdfgsparse_softmax.h', 'sdfgsparse_tensor.h']


def libmvec() -> bool:
    """Whether the generated loops call glibc's vector math library (libmvec): decided when
    sdfgsparse is imported (:data:`sdfgsparse.build.naming.LIBMVEC`: x86-64 Linux where the
    library is installed, unless ``SDFGSPARSE_LIBMVEC=0``). The environment then defines
    ``SS_LIBMVEC`` (``sdfgsparse_vecmath.h`` declares the vector versions of ``exp``, ``log``,
    ``tanh``; GCC only) and links ``-lmvec``; the decision is part of every build's key."""
    return naming.LIBMVEC


@dace.library.environment
class SdfgsparseCPU:
    """sdfgsparse's C++ headers for the ``cpu`` kernels (and glibc's libmvec where :func:`libmvec`)."""
    cmake_minimum_version = None
    cmake_packages = []
    cmake_variables = {}
    cmake_includes = [INCLUDE]
    cmake_libraries = ['mvec'] if naming.LIBMVEC else []  # (after the objects: the linker keeps it)
    cmake_compile_flags = ['-DSS_LIBMVEC'] if naming.LIBMVEC else []
    cmake_link_flags = []
    cmake_files = []
    headers = list(HEADERS)
    state_fields = []
    init_code = ''
    finalize_code = ''
    dependencies = []
