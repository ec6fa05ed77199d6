"""Warnings raised from sdfgsparse.transformations / sdfgsparse.frontends (installed from
folders beside ``sdfgsparse/``, setup.cfg ``package_dir``) are attributed to the user's
line, as those raised from ``sdfgsparse/`` itself are; and the user-facing warning classes
live in :mod:`sdfgsparse.errors`."""
import inspect
import warnings

import dace
import numpy as np
import pytest
import scipy.sparse as sp

import sdfgsparse as ss
from sdfgsparse import errors
from sdfgsparse.transformations import format_guard
from sdfgsparse.transformations.format_guard import FormatGuard

N = dace.symbol('N')


@dace.program
def warning_attribution_spmv(A: ss.CSR[dace.float64, N, N], x: dace.float64[N]):
    return A @ x


def _scattered(n, rng):
    """Entries on thousands of diagonals: DIA would need rows x diagonals slots."""
    rows = np.repeat(np.arange(n), 3)
    cols = rng.integers(0, n, rows.size)
    return sp.csr_array((np.ones(rows.size), (rows, cols)), shape=(n, n))


def test_format_fallback_warning_is_a_user_facing_warning_of_errors():
    assert format_guard.FormatFallbackWarning is errors.FormatFallbackWarning
    assert 'FormatFallbackWarning' in errors.__all__ and issubclass(errors.FormatFallbackWarning, UserWarning)


def test_a_warning_from_transformations_names_the_callers_line(rng):
    """The format guard (transformations/format_guard.py) warns through errors.warn_user:
    the warning points at the line below, not at format_guard.py (it did: the folder
    transformations/ is not under sdfgsparse/)."""
    guard = FormatGuard(warning_attribution_spmv.to_sdfg(), {'A': 'DIA'}, {}, optimize=None)
    with pytest.warns(errors.FormatFallbackWarning, match=r"argument 'A' as DIA .* would need") as caught:
        line = _lineno() + 1
        assert guard.oversized({'A': _scattered(3000, rng)})
    (w, ) = [w for w in caught if issubclass(w.category, errors.FormatFallbackWarning)]
    assert (w.filename, w.lineno) == (__file__, line), (w.filename, w.lineno)


def test_warn_user_skips_every_sdfgsparse_module_by_name():
    """A frame of any module named sdfgsparse.* (wherever its file lies) is skipped; one of
    a module merely named like it (sdfgsparse_user) is not."""
    calls = {}
    for module in ('sdfgsparse.frontends.fake', 'sdfgsparse_user'):
        scope = {'__name__': module, 'errors': errors}
        exec(compile('def emit():\n    errors.warn_user("hello", errors.CopyWarning)\n', '/elsewhere/fake.py',
                     'exec'), scope)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter('always')
            line = _lineno() + 1
            scope['emit']()
        (w, ) = caught
        calls[module] = (w.filename, w.lineno)
    assert calls['sdfgsparse.frontends.fake'] == (__file__, line)
    assert calls['sdfgsparse_user'] == ('/elsewhere/fake.py', 2)


def _lineno():
    return inspect.currentframe().f_back.f_lineno
