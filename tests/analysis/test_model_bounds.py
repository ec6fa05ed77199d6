"""The data-movement counts of the models that steer choices are never below the SOAP lower
bound of the same operation (a count below the bound is an undercount, whatever the choice
it steers): format selection's bytes per use (:mod:`sdfgsparse.analysis.format_cost`), and
the SpMM schedules' bytes (:mod:`sdfgsparse.analysis.schedules`) through the last-level
cache and, where the working set does not stay there, from memory. Over the zoo's shapes
(empty, one row, one column, empty rows and columns, power law, band, dense) and the
shipped real matrices, for a vector and for 16 and 64 dense columns."""
import numpy as np
import pytest

from sdfgsparse.analysis import format_cost, schedules
from sdfgsparse.analysis import sparse_models as sm
from sparse_zoo import REAL, real_matrix, zoo

MATRICES = {**zoo(), **{name: real_matrix(name) for name in REAL}}
WIDTHS = (1, 16, 64)
#: the machine of the model: this VM's caches, and one so small that nothing stays resident
MACHINES = {'here': schedules.Machine(llc=32 << 20, l2=1 << 20, threads=2),
            'tiny': schedules.Machine(llc=64 << 10, l2=16 << 10, threads=2)}


def _bound(A, k, m: schedules.Machine) -> float:
    """The SpMM (SpMV for k = 1) bound in bytes of float64 values, the last-level cache as the
    fast memory, with the matrix's own statistics (non-empty rows and columns)."""
    stats = sm.structure_stats(A)
    rows, cols = A.shape
    model = (sm.spmv_model(A.nnz, rows, cols, S=m.llc // 8, stats=stats) if k == 1 else sm.spmm_model(
        A.nnz, rows, cols, k, S=m.llc // 8, stats=stats))
    return schedules.bound_bytes(model, 8)


@pytest.mark.parametrize('name', sorted(MATRICES))
def test_format_costs_are_not_below_the_bound(name):
    A = MATRICES[name]
    stats = format_cost.matrix_format_stats(A)
    for k in WIDTHS:
        bound = _bound(A, k, MACHINES['here'])
        for fmt, cost in format_cost.format_costs(stats, [k], given='CSR', value_bytes=8, index_bytes=4).items():
            assert cost >= bound, f'{name} k={k} {fmt}: {cost:.0f} bytes < the bound {bound:.0f}'


@pytest.mark.parametrize('machine', sorted(MACHINES))
@pytest.mark.parametrize('name', sorted(MATRICES))
def test_spmm_schedule_costs_are_not_below_the_bound(name, machine):
    A = MATRICES[name]
    m = MACHINES[machine]
    rows, cols = A.shape
    for k in WIDTHS:
        bound = _bound(A, k, m)
        for scatter in (False, True):
            for tile in sorted({8, 16, k}):
                c = schedules.spmm_tile_cost(rows, cols, A.nnz, k, tile, scatter, m)
                assert c.private >= bound, f'{name} k={k} tile {tile}: {c.private:.0f} < {bound:.0f}'
                resident = rows * k * 8 + A.nnz * 12 + (rows + cols) * k * 8 <= m.llc
                if not resident:  # (resident between calls: the steady state moves nothing from memory)
                    assert c.memory >= bound, f'{name} k={k} tile {tile}: {c.memory:.0f} < {bound:.0f}'


def test_the_bound_counts_the_result():
    """The check has teeth: a model that forgot the result's write (rows x k values; format
    selection's did until issue 35) is below the bound on a matrix with few entries per row."""
    A = MATRICES['col_Nx1']
    k = 16
    stats = format_cost.matrix_format_stats(A)
    reads_only = format_cost.storage_bytes('CSR', stats, 8, 4) + A.nnz * k * 8
    assert reads_only < _bound(A, k, MACHINES['here'])
    assert np.isfinite(_bound(A, k, MACHINES['tiny']))
