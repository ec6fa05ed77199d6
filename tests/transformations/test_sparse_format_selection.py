"""SparseFormatSelection: the cost model's choices on banded, power-law and blocked
structure, differential runs before/after (the argument passed in the chosen format),
ss.optimize converting the caller's matrix, the record on the SDFG, and refusals."""
import copy
import json

import dace
import numpy as np
import scipy.sparse as sp

import sdfgsparse as ss
from sdfgsparse.build import naming
from sdfgsparse.analysis.format_cost import choose_format, format_costs, matrix_format_stats
from sdfgsparse.formats import sparse_type_of
from sdfgsparse.transformations import SparseFormatSelection
from sparse_zoo import real_matrix

N = dace.symbol('N')


@dace.program
def power(A: ss.CSR[dace.float64, N, N], x: dace.float64[N]):
    y = np.copy(x)
    for it in range(40):
        y = A @ y
    return y


@dace.program
def one_product(A: ss.CSR[dace.float64, N, N], x: dace.float64[N]):
    return A @ x


def _banded(n=300, half=3):
    offs = list(range(-half, half + 1))
    A = sp.diags([np.full(n - abs(o), 0.1 * (o + 4)) for o in offs], offs, format='csr')
    return sp.csr_array(A)


def _select(prog, A, **opts):
    sdfg = prog.to_sdfg()
    before = copy.deepcopy(sdfg)
    applied = sdfg.apply_transformations(SparseFormatSelection,
                                         options={'stats': matrix_format_stats(A), 'given': 'CSR', **opts})
    sdfg.validate()
    return before, sdfg, applied


def _power_ref(A, x):
    y = x.copy()
    for _ in range(40):
        y = A @ y
    return y


def test_cost_model_choices():
    banded = matrix_format_stats(_banded())
    assert banded['ndiags'] == 7 and banded['max_row'] == 7
    assert choose_format(banded, [1] * 40)[0] == 'DIA'  # no index reads, no padding to speak of
    assert choose_format(banded, [1])[0] == 'CSR'  # one product does not pay the conversion
    cora = matrix_format_stats(real_matrix('cora_A'))
    costs = format_costs(cora, [1] * 40)
    assert min(costs, key=costs.get) == 'CSR'
    assert costs['ELL'] > 5 * costs['CSR'] and costs['DIA'] > 50 * costs['CSR']  # padding of power-law rows
    # dense 4x4 blocks: BSR stores one index per block
    blocks = sp.csr_array(sp.kron(sp.random(40, 40, density=0.05, random_state=1), np.ones((4, 4))))
    assert choose_format(matrix_format_stats(blocks), [64] * 40)[0] == 'BSR4x4'
    # a scatter walk pays for the idle threads
    assert format_costs(banded, [1], threads=2)['COO'] > 2 * format_costs(banded, [1])['CSR']


def test_banded_power_iteration_switches_to_dia(rng):
    A = _banded()
    before, after, applied = _select(power, A)
    assert applied == 1
    (arg, ) = [sparse_type_of(d).fmt.name for n, d in after.arrays.items() if n == 'A']
    assert arg == 'DIA'
    rec = [t for t in after.transformation_hist if isinstance(t, SparseFormatSelection)]
    assert rec[-1].chosen == 'DIA' and min(json.loads(rec[-1].reason).items(), key=lambda kv: kv[1])[0] == 'DIA'
    # the new type's size symbols are named after the argument, not by a process-wide count:
    # selecting again gives the same SDFG content, so the same build folder
    _, again, _ = _select(power, A)
    assert set(map(str, sparse_type_of(again.arrays['A']).sizes.values())) == {f'A_DIA_{k}' for k in ss.DIA.size_keys}
    assert naming.content_hash(again) == naming.content_hash(after)
    x = rng.standard_normal(A.shape[0])
    got = ss.compile(after)(A=ss.convert(A, ss.DIA), x=x)
    np.testing.assert_allclose(got, ss.compile(before)(A=A, x=x), rtol=1e-12)
    np.testing.assert_allclose(got, _power_ref(A, x), rtol=1e-10)


def test_optimize_converts_the_callers_matrix(rng):
    A = _banded(200)
    opt = ss.optimize(power, matrices={'A': A})
    assert opt.conversions == {'A': 'DIA'} and 'A -> DIA' in opt.report()
    x = rng.standard_normal(200)
    np.testing.assert_allclose(opt(A, x), _power_ref(A, x), rtol=1e-10)
    np.testing.assert_allclose(opt(A=A, x=x), _power_ref(A, x), rtol=1e-10)
    assert A.format == 'csr'  # the caller's matrix is not touched
    # a matrix with another structure of the same signature still gives the right result
    B = sp.csr_array(sp.random(200, 200, density=0.05, random_state=3))
    np.testing.assert_allclose(opt(A=B, x=x), _power_ref(B, x), rtol=1e-10)


def test_keeps_csr_where_it_is_cheapest():
    _, _, applied = _select(power, real_matrix('cora_A'))  # power-law rows
    assert applied == 0
    _, _, applied = _select(one_product, _banded())  # one use: the conversion does not pay
    assert applied == 0
    sdfg = power.to_sdfg()
    assert sdfg.apply_transformations(SparseFormatSelection) == 0  # no statistics


def test_round_trips_through_json():
    _, after, _ = _select(power, _banded())
    again = dace.SDFG.from_json(after.to_json())
    assert sparse_type_of(again.arrays['A']).fmt.name == 'DIA'
    xf = SparseFormatSelection()
    xf.stats, xf.chosen = {'nnz': 3.0}, 'DIA'
    back = SparseFormatSelection.from_json(xf.to_json())
    assert back.chosen == 'DIA' and dict(back.stats) == {'nnz': 3.0} and back.CATEGORY == 'Sparse'
