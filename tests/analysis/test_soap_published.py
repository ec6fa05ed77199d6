"""SOAP leading terms of dense kernels, compared as sympy expressions.

Published (Kwasniewski et al., "Red-blue pebbling revisited", SC'19, and "Pebbles, graphs,
and a pinch of combinatorics", SPAA'21): matrix multiplication ``2 N M K / sqrt(S)`` and
the Polybench linear-algebra kernels below. The stencil values are derived with the same
method by hand (module docstring of ``soap_groups``), not copied from the paper's table.
"""
import pytest
import sympy

from sdfgsparse.analysis import S, io_lower_bound
from soap_kernels import K, M, N, NI, NJ, NK, NL, NM, NP, NQ, NR, T

SQ = sympy.sqrt(S)

PUBLISHED = {
    'gemm': 2 * N * M * K / SQ,
    'gemm_loops': 2 * N * M * K / SQ,
    'gemm_nested': 2 * N * M * K / SQ,
    'gemm_lib': 2 * N * M * K / SQ,
    'k2mm': 2 * NI * NJ * (NK + NL) / SQ,
    'k3mm': 2 * (NI * NJ * NK + NJ * NL * NM + NI * NJ * NL) / SQ,
    'doitgen': 2 * NR * NQ * NP**2 / SQ,
    'syrk': M * N**2 / SQ,
    'syr2k': 2 * M * N**2 / SQ,
    'cholesky': N**3 / (3 * SQ),
    'lu': 2 * N**3 / (3 * SQ),
    'atax': M * N,
    'bicg': M * N,
    'mvt': N**2,
    'gesummv': 2 * N**2,
}

DERIVED_STENCILS = {
    'jacobi1d': 4 * N * T / S,
    'jacobi2d': 8 * N**2 * T / SQ,
    'seidel1d': 2 * N * T / S,
}


@pytest.mark.parametrize('name', sorted(PUBLISHED))
def test_published_leading_term(kernel_sdfg, name):
    res = io_lower_bound(kernel_sdfg(name))
    assert sympy.expand(res.leading - PUBLISHED[name]) == 0, res.table()


@pytest.mark.parametrize('name', sorted(DERIVED_STENCILS))
def test_stencil_leading_term(kernel_sdfg, name):
    res = io_lower_bound(kernel_sdfg(name))
    assert sympy.expand(res.leading - DERIVED_STENCILS[name]) == 0, res.table()


def test_gemm_exact_total_and_statement(kernel_sdfg):
    res = io_lower_bound(kernel_sdfg('gemm'))
    assert sympy.expand(res.total - 2 * N * M * K / SQ) == 0
    (st, ) = res.statements
    assert [v for v, _, _ in st.domain] == ['i', 'j', 'k']
    assert st.accesses == {'A': ['A[i, k] read'], 'B': ['B[k, j] read'], 'C': ['C[i, j] update']}
    assert st.volume == N * M * K
    assert sympy.simplify(st.intensity - SQ / 2) == 0
    assert all(sympy.simplify(t - SQ) == 0 for t in st.tiles.values())


def test_gemm_dominator_and_chi(kernel_sdfg):
    (g, ) = io_lower_bound(kernel_sdfg('gemm')).groups
    ti, tj, tk = (sympy.Symbol(f't_{v}', positive=True) for v in 'ijk')
    assert sympy.expand(g.dominator - (ti * tj + ti * tk + tj * tk)) == 0
    assert g.gamma == sympy.Rational(3, 2)
    assert sympy.simplify(g.X0 - 3 * S) == 0


def test_cholesky_keeps_lower_order_statements(kernel_sdfg):
    res = io_lower_bound(kernel_sdfg('cholesky'))
    assert len(res.statements) == 3
    update = max(res.statements, key=lambda s: len(s.domain))
    assert sympy.expand(update.volume - (N**3 / 6 - N / 6)) == 0
    assert sympy.expand(update.bound - N**3 / (3 * SQ)) == 0


def test_streaming_group_shares_the_matrix(kernel_sdfg):
    res = io_lower_bound(kernel_sdfg('atax'))
    assert len(res.groups) == 1 and len(res.groups[0].statements) == 2
    assert res.groups[0].intensity == 2
    assert res.statements[0].tiles == {'i': M, 'j': N}


def test_stencil_groups_time_steps(kernel_sdfg):
    res = io_lower_bound(kernel_sdfg('jacobi1d'))
    (g, ) = res.groups
    assert g.gamma == 2
    assert sympy.simplify(g.intensity - S / 2) == 0
    tiles = res.statements[0].tiles
    assert sympy.simplify(tiles['t'] - S / 4) == 0 and sympy.simplify(tiles['i'] - S) == 0


def test_numeric_cache_size_substitutes_S(kernel_sdfg):
    res = io_lower_bound(kernel_sdfg('gemm'), cache_size=1024)
    assert sympy.expand(res.total - N * M * K / 16) == 0
    assert res.evaluate(N=64, M=64, K=64) == pytest.approx(64**3 / 16)
    assert res.statements[0].tiles == {'i': 32, 'j': 32, 'k': 32}


def test_table_and_dict(kernel_sdfg):
    res = io_lower_bound(kernel_sdfg('k2mm'))
    text = str(res)
    assert 'Q >= ' in text and 'tiles' in text and 'tmp[i, j] update' in text
    d = res.to_dict()
    assert d['total'] == sympy.sstr(res.total)
    assert len(d['statements']) == 2
    assert res.to_json()
