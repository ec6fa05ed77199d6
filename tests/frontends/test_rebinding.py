"""No silent write through a rebound name: in our programs (sparse data, or compiled by
sdfgsparse) ``y = A @ y`` on an argument ``y`` is refused while parsing, the file and line
named, since DaCe would write the value into the caller's array where NumPy makes a new
one. Writing on purpose (``y[:] = ...``, ``y += ...``) and new names work; a plain dense
``@dace.program`` keeps DaCe's behaviour."""
import re

import dace
import numpy as np
import pytest
import scipy.sparse as sp

import sdfgsparse as ss
from sdfgsparse import errors

N = dace.symbol('N')


@dace.program
def rebinds_sparse_argument(A: ss.CSR[dace.float64, N, N], y: dace.float64[N]):
    y = A @ y
    return y


@dace.program
def rebinds_in_a_loop(A: ss.CSR[dace.float64, N, N], y: dace.float64[N]):
    for _ in range(3):
        y = A @ y
    return y


@dace.program
def writes_on_purpose(A: ss.CSR[dace.float64, N, N], y: dace.float64[N], z: dace.float64[N]):
    y[:] = A @ y
    z += A @ y
    w = A @ z
    w = w * 2.0  # a name of our own: rebinding it is NumPy's semantics already
    return w


@dace.program
def dense_rebinds(x: dace.float64[N]):
    x = x * 2.0
    return x


def _matrix():
    return sp.random_array((6, 6), density=0.5, format='csr', rng=np.random.default_rng(3))


@pytest.mark.parametrize('prog, line', [(rebinds_sparse_argument, 'y = (A @ y)'), (rebinds_in_a_loop, 'y = (A @ y)')])
def test_rebinding_an_argument_is_refused_with_its_line(prog, line):
    y = np.arange(6.0)
    before = y.copy()
    lineno = prog.f.__code__.co_firstlineno + (2 if prog is rebinds_sparse_argument else 3)  # (from the decorator)
    pattern = re.escape(f'test_rebinding.py:{lineno}: "{line}" rebinds the argument \'y\'') + '.*' + \
        re.escape('write "y[:] = ..."')
    with pytest.raises(errors.UnsupportedOperationError, match=pattern):
        prog(_matrix(), y)
    np.testing.assert_array_equal(y, before)


def test_writing_on_purpose_and_new_names_work():
    A = _matrix()
    y, z = np.arange(6.0), np.ones(6)
    y0, z0 = y.copy(), z.copy()
    w = writes_on_purpose(A, y, z)
    np.testing.assert_allclose(y, A @ y0)
    np.testing.assert_allclose(z, z0 + A @ (A @ y0))
    np.testing.assert_allclose(w, 2.0 * (A @ z))


def test_compiled_dense_program_is_ours_and_refused():
    with pytest.raises(errors.UnsupportedOperationError, match=r"rebinds the argument 'x'"):
        ss.compile(dense_rebinds)


def test_plain_dense_program_keeps_daces_behaviour():
    x = np.ones(3)
    np.testing.assert_array_equal(dense_rebinds(x), 2.0 * np.ones(3))  # DaCe's: x is written too
