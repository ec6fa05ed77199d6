"""The ``mkl`` implementations of SpMV, SpMM and SpGEMM: Intel MKL's sparse BLAS.

Each expansion is a kernel of the level-walk builder (:class:`~sdfgsparse.lowering.graph.Kernel`:
one array per connector) holding one C++ tasklet that calls a leaf of
``include/sdfgsparse_mkl.h`` (:func:`~sdfgsparse.lowering.graph.leaf`). It applies to what
MKL's LP64 interface takes: a CSR or CSC matrix (a CSC one, or ``A.T`` of a CSR one, is
MKL's transposed operation on the same arrays) with int32 indices and float32 / float64
values of the same dtype as the dense operands, dense rows contiguous, no fused epilogue;
SpGEMM: CSR times CSR into CSR. Anywhere else (:func:`unsupported` says why) the node
expands as its ``cpu`` implementation: choosing ``mkl`` never changes a result, only who
computes it.
"""
import ctypes
from typing import Optional

import dace
import dace.library
from dace.codegen.targets.cpp import sym2cpp
from dace.transformation.transformation import ExpandTransformation

from sdfgsparse.lowering.graph import Kernel, leaf
from sdfgsparse.ops.base import member_conn
from sdfgsparse.ops.spgemm import SpGEMM
from sdfgsparse.ops.spmm import SpMM
from sdfgsparse.ops.spmv import SpMV
from sdfgsparse.targets.cpu.environment import SdfgsparseCPU
from sdfgsparse.targets.cpu.storage_check import library_function
from sdfgsparse.targets.mkl.environment import SdfgsparseMKL

__all__ = ['ExpandSpMVMKL', 'ExpandSpMMMKL', 'ExpandSpGEMMMKL', 'unsupported', 'refused_calls', 'NODES']

_VALUES = (dace.float32, dace.float64)


def _c(expr) -> str:
    return sym2cpp(dace.symbolic.pystr_to_symbolic(str(expr)))


def _csr_arrays(node, state, prefix: str):
    """(reason it does not apply or None, the MKL operation's transpose flag, MKL's rows and
    columns of the stored arrays) for sparse operand ``prefix``."""
    st = node.sparse_type(state, prefix)  # as stored
    if st.fmt.name not in ('CSR', 'CSC'):
        return f'{prefix} is {st.fmt.name} (MKL takes CSR and CSC)', None, None
    if st.index_dtype != dace.int32:
        return f'{prefix} has {st.index_dtype} indices (the LP64 interface takes int32)', None, None
    if st.dtype not in _VALUES:
        return f'{prefix} has {st.dtype} values (MKL takes float32 and float64)', None, None
    # a CSC matrix (rows x cols) is the CSR storage of its transpose (cols x rows)
    csc = st.fmt.name == 'CSC'
    dims = (st.cols, st.rows) if csc else (st.rows, st.cols)
    transpose = csc != bool(getattr(node, f'transpose_{prefix}', False))
    return None, transpose, dims


def _dense_rows(desc) -> bool:
    return len(desc.shape) == 2 and str(desc.strides[1]) == '1'


def unsupported(node, state) -> Optional[str]:
    """Why ``node``'s ``mkl`` expansion computes with the ``cpu`` one instead, or None."""
    if getattr(node, 'epilogue', None):
        return 'a fused epilogue (MKL computes the product only)'
    if getattr(node, 'views', None):
        return 'a view of an operand (a slice; MKL multiplies stored matrices)'
    why, _, _ = _csr_arrays(node, state, 'A')
    if why:
        return why
    vt = node.sparse_type(state, 'A').dtype
    if isinstance(node, SpGEMM):
        why, transpose, _ = _csr_arrays(node, state, 'B')
        if why:
            return why
        _, ta, _ = _csr_arrays(node, state, 'A')
        if ta or transpose:
            return 'a transposed or CSC operand (MKL multiplies CSR by CSR here)'
        if node.sparse_type(state, 'B').dtype != vt or node.sparse_type(state, 'out').fmt.name != 'CSR':
            return 'mixed value dtypes or a CSC result'
        return None
    dense = ('_x', '_y') if isinstance(node, SpMV) else ('_B', '_Y')
    for conn in dense:
        desc = node.connected(state, conn)
        if desc.dtype != vt:
            return f'{conn[1:]} is {desc.dtype}, A is {vt} (MKL computes in one dtype)'
        if isinstance(node, SpMM) and not _dense_rows(desc):
            return f'{conn[1:]} has no contiguous rows'
        if isinstance(node, SpMV) and str(desc.strides[-1]) != '1':
            return f'{conn[1:]} is strided (a column of a matrix)'
    return None


def _cpu(node, state, sdfg):
    return type(node).implementations['cpu'].expansion(node, state, sdfg)


def _product(node, state, sdfg, spmm: bool):
    if unsupported(node, state):
        return _cpu(node, state, sdfg)
    _, transpose, (m, n) = _csr_arrays(node, state, 'A')
    k = Kernel(node, state, sdfg)
    a = {mem: member_conn('A', mem) for mem in ('pos1', 'crd1', 'vals')}
    x, y = ('_B', '_Y') if spmm else ('_x', '_y')
    T = k.sdfg.arrays[a['vals']].dtype.ctype
    if spmm:
        bd, yd = k.sdfg.arrays[x], k.sdfg.arrays[y]
        cols, ldb, ldy = _c(yd.shape[1]), _c(bd.strides[0]), _c(yd.strides[0])
    else:
        cols, ldb, ldy = '1', '1', '1'
    call = (f'sdfgsparse::mkl::csr_mm<{T}>({"true" if transpose else "false"}, {_c(m)}, {_c(n)}, {cols}, '
            f'ss_in(ss_{a["pos1"]}), ss_in(ss_{a["crd1"]}), ss_in(ss_{a["vals"]}), ss_in(ss_{x}), {ldb}, '
            f'ss_out(ss_{y}), {ldy});')
    leaf(k, k.add_state('mkl'), 'mkl_spmm' if spmm else 'mkl_spmv', call, [*a.values(), x], [y])
    return k.build()


@dace.library.expansion
class ExpandSpMVMKL(ExpandTransformation):
    """``y = A @ x`` by ``mkl_sparse_?_mv`` (see the module for where it applies)."""
    environments = [SdfgsparseCPU, SdfgsparseMKL]

    @staticmethod
    def expansion(node: SpMV, state, sdfg):
        return _product(node, state, sdfg, spmm=False)


@dace.library.expansion
class ExpandSpMMMKL(ExpandTransformation):
    """``Y = A @ B`` by ``mkl_sparse_?_mm`` with row-major B and Y (see the module)."""
    environments = [SdfgsparseCPU, SdfgsparseMKL]

    @staticmethod
    def expansion(node: SpMM, state, sdfg):
        return _product(node, state, sdfg, spmm=True)


@dace.library.expansion
class ExpandSpGEMMMKL(ExpandTransformation):
    """``C = A @ B`` by ``mkl_sparse_spmm`` and ``mkl_sparse_order`` (columns sorted within
    each row, as scipy's), copied into the result's arrays (see the module)."""
    environments = [SdfgsparseCPU, SdfgsparseMKL]

    @staticmethod
    def expansion(node: SpGEMM, state, sdfg):
        if unsupported(node, state):
            return _cpu(node, state, sdfg)
        _, _, (m, n) = _csr_arrays(node, state, 'A')  # (the stored arrays: CSR, or A.T of a CSC A)
        _, _, (_, p) = _csr_arrays(node, state, 'B')
        k = Kernel(node, state, sdfg)
        a = [member_conn('A', mem) for mem in ('pos1', 'crd1', 'vals')]
        b = [member_conn('B', mem) for mem in ('pos1', 'crd1', 'vals')]
        c = [member_conn('out', mem) for mem in ('pos1', 'crd1', 'vals')]
        T = k.sdfg.arrays[a[2]].dtype.ctype
        cap = _c(k.sdfg.arrays[c[1]].shape[0])
        ins = ', '.join(f'ss_in(ss_{n})' for n in a + b)
        outs = ', '.join(f'ss_out(ss_{n})' for n in c)
        call = f'sdfgsparse::mkl::csr_spgemm<{T}>({_c(m)}, {_c(n)}, {_c(p)}, {ins}, {outs}, {cap});'
        leaf(k, k.add_state('mkl'), 'mkl_spgemm', call, a + b, c)
        return k.build()


#: The nodes the ``mkl`` implementation is registered on, with their expansion.
NODES = {SpMV: ExpandSpMVMKL, SpMM: ExpandSpMMMKL, SpGEMM: ExpandSpGEMMMKL}


def refused_calls(compiled) -> Optional[int]:
    """How many calls of a compiled program's ``mkl`` kernels MKL refused so far (the header's
    plain loops computed them), or None for a program without them; ``compiled`` is DaCe's
    ``CompiledSDFG`` (``ss.compile(...).compiled``)."""
    f = library_function(compiled._lib, '__ss_mkl_refused', ctypes.CFUNCTYPE(ctypes.c_longlong))
    return None if f is None else int(f())
