"""The SOAP analysis bounds the portable (``pure``) expansions of sparse nodes: a map over
one segment of a compressed level, ``p in [pos[i], pos[i + 1])``, is a dimension of
``nnz / rows`` iterations per row, no longer a skipped data-dependent domain."""
import copy
import warnings

import dace
import pytest
import sympy

import sdfgsparse as ss
from sdfgsparse.analysis import extract, io_lower_bound
from sdfgsparse.formats import sparse_type_of

M, N = dace.symbol('M'), dace.symbol('N')


def _expanded(fmt):
    with ss.targets.use_implementation('pure'):

        @dace.program
        def spmv(A: fmt[dace.float64, M, N], x: dace.float64[N]):
            return A @ x

        sdfg = spmv.to_sdfg()
    nnz = sparse_type_of(sdfg.arrays['A']).sizes['n1']
    exp = copy.deepcopy(sdfg)
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')  # DaCe's memlet-propagation warnings on dynamic ranges
        exp.expand_library_nodes()
    return exp, nnz


@pytest.mark.parametrize('fmt', [ss.CSR, ss.CSC], ids=['CSR', 'CSC'])
def test_expanded_pure_spmv_is_bounded(fmt):
    sdfg, nnz = _expanded(fmt)
    with warnings.catch_warnings():
        warnings.simplefilter('error')  # a skipped part would warn (SkippedNodeWarning)
        r = io_lower_bound(sdfg)
    assert r.skipped == []
    assert not any(st.data_dependent for st in extract(sdfg).statements)
    assert nnz in sympy.sympify(r.total).free_symbols, r.total
    (seg, ) = [st for st in extract(sdfg).statements if len(st.dims) == 2]
    assert sympy.simplify(sympy.Mul(*[d.extent for d in seg.dims]) - nnz) == 0  # nnz iterations in all


def test_a_cpu_kernel_stays_skipped():
    """The cpu implementation's whole-row C++ tasklets walk data the analysis cannot see."""
    @dace.program
    def spmv(A: ss.CSR[dace.float64, M, N], x: dace.float64[N]):
        return A @ x

    sdfg = copy.deepcopy(spmv.to_sdfg())
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        sdfg.expand_library_nodes()
        r = io_lower_bound(sdfg)
    assert r.skipped
