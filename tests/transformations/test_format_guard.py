"""A format ``ss.optimize`` chose for the example matrices holds on every call: a call whose
matrix the chosen format would blow up (DIA of a power-law graph) runs the program's own
format instead, says so once (warning and report), allocates nothing for the conversion,
and agrees with scipy; the size check itself against the converted storage. Two programs
compile (the DIA-selected one and its CSR fallback)."""
import threading
import tracemalloc
import warnings

import dace
import numpy as np
import pytest
import scipy.sparse as sp

import sdfgsparse as ss
from sdfgsparse.analysis.conversion_bound import converted_bytes, csr_bytes
from sdfgsparse.runtime.convert import to_storage
from sdfgsparse.transformations.format_guard import GROWTH, FormatFallbackWarning
from sdfgsparse.transformations.sparse_format_selection import format_by_name

N = dace.symbol('N')


@dace.program
def power(A: ss.CSR[dace.float64, N, N], y: dace.float64[N]):
    x = np.copy(y)  # (rebinding the argument y itself is refused: it would write into the caller's array)
    for i in range(40):
        x = A @ x
        x = x / np.sqrt(np.sum(x * x))
    return x


def _power_ref(A, y):
    for _ in range(40):
        y = A @ y
        y = y / np.sqrt(np.sum(y * y))
    return y


def _band(n, offsets=range(-3, 4)):
    return sp.csr_array(sp.diags([np.full(n - abs(o), 1.0 + 0.1 * o) for o in offsets], list(offsets)))


def _power_law(n, rng):
    """Rows with Zipf-distributed lengths, columns anywhere (thousands of diagonals)."""
    lens = np.minimum(rng.zipf(1.8, n), n // 4)
    rows = np.repeat(np.arange(n), lens)
    cols = rng.integers(0, n, rows.size)
    A = sp.csr_array((rng.standard_normal(rows.size), (rows, cols)), shape=(n, n))
    A.sum_duplicates()
    A.indices, A.indptr = A.indices.astype(np.int32), A.indptr.astype(np.int32)  # (zero-copy, as declared)
    return A


@pytest.fixture(scope='module')
def optimized():
    n = 2000
    band = _band(n)
    opt = ss.optimize(power, matrices={'A': band, 'y': np.ones(n)})
    assert opt.conversions == {'A': 'DIA'}
    return opt, band


def test_chosen_format_falls_back_for_a_matrix_it_would_blow_up(optimized, rng):
    opt, band = optimized
    n = band.shape[0]
    y = rng.standard_normal(n)
    with warnings.catch_warnings():
        warnings.simplefilter('error', FormatFallbackWarning)  # the band fits DIA: no fallback
        np.testing.assert_allclose(opt(band, y.copy()), _power_ref(band, y), rtol=1e-10, atol=1e-13)
    G = _power_law(n, rng)
    need, _ = converted_bytes(G, 'DIA', 8, 4)
    assert need > 100 * csr_bytes(G, 8, 4)  # what DIA would have asked for
    with pytest.warns(FormatFallbackWarning, match=r"argument 'A' as DIA .* would need at least .* MiB, more than "
                      rf"{GROWTH}x its .* KiB as CSR: the call ran the program's own CSR"):
        got = opt(A=G, y=y.copy())
    np.testing.assert_allclose(got, _power_ref(G, y), rtol=1e-10, atol=1e-13)
    assert "argument 'A' as DIA" in opt.report() and "program's own formats" in opt.report()
    # said once; no conversion allocated (the DIA copy of G would take `need` bytes)
    tracemalloc.start()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter('error', FormatFallbackWarning)
            got = opt(G, y.copy())
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < need / 10, (peak, need)
    np.testing.assert_allclose(got, _power_ref(G, y), rtol=1e-10, atol=1e-13)
    assert opt.report().count("argument 'A' as DIA") == 1


def test_fallback_from_threads(optimized, rng):
    """8 threads, band and power-law matrices mixed: every result right."""
    opt, band = optimized
    n = band.shape[0]
    mats = [band if i % 2 else _power_law(n, np.random.default_rng(i)) for i in range(8)]
    ys = [rng.standard_normal(n) for _ in range(8)]
    out = [None] * 8

    def work(i):
        out[i] = opt(A=mats[i], y=ys[i].copy())

    with warnings.catch_warnings():
        warnings.simplefilter('ignore', FormatFallbackWarning)
        threads = [threading.Thread(target=work, args=(i, )) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    for i in range(8):
        np.testing.assert_allclose(out[i], _power_ref(mats[i], ys[i]), rtol=1e-10, atol=1e-13)


def test_garbage_is_still_a_typed_error(optimized):
    opt, _ = optimized
    for bad in ('A', None):
        with pytest.raises(ss.errors.SparseError):
            opt(A=bad, y=np.ones(4))


@pytest.mark.parametrize('fmt', ['CSR', 'ELL', 'DIA', 'BSR2x2', 'BSR4x4'])
def test_converted_bytes_is_the_converted_storage(fmt, rng):
    """Exact against the arrays the conversion makes (square matrices: DIA keeps ``rows``
    slots per diagonal); the O(rows) bound found without reading the columns is below it."""
    for A in (_band(64), _power_law(64, rng), sp.csr_array((64, 64)), sp.random_array((64, 64), density=0.1,
                                                                                        format='csr', rng=rng)):
        arrays, _ = to_storage(A, format_by_name(fmt), np.int32)
        size = sum(a.nbytes for a in arrays.values())
        need, exact = converted_bytes(A, fmt, 8, 4)
        assert exact and need == size
        low, exact = converted_bytes(A, fmt, 8, 4, limit=0)
        assert low <= need and (exact or low > 0)
