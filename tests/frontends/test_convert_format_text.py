"""``ss.convert(A, fmt)`` inside a program: DaCe hands the format over as source text, which
is read from its syntax tree (catalogue names, integer constants, ``with_block`` and
subscripts), never evaluated as Python."""
import dace
import numpy as np
import pytest
import scipy.sparse as sp

import sdfgsparse as ss
from sdfgsparse import errors
from sdfgsparse.frontends.numpy import _format_of_text

M, N = dace.symbol('M'), dace.symbol('N')


@pytest.mark.parametrize('text, name', [('ss.CSR', 'CSR'), ('sdfgsparse.DIA', 'DIA'),
                                        ('ss.BSR.with_block(2, 2)', 'BSR2x2'), (' ss.CSC ', 'CSC')])
def test_format_names_are_read(text, name):
    assert _format_of_text(text).name == name


def test_structured_family_subscript():
    assert _format_of_text('ss.NM[2, 4]') == ss.NM[2, 4]


@pytest.mark.parametrize('text', ['__import__("os").system("true")', 'ss.CSR.__class__', 'ss.errors', 'ss.CSR.fmt',
                                  'ss.CSR.with_block(1, 1)', 'ss.BSR.with_block(2, n=2)', 'open("x")', 'ss.', '1 + 1',
                                  'ss.BSR.with_block(2.5, 2)'])
def test_anything_else_is_refused(text):
    with pytest.raises(errors.UnsupportedOperationError, match=r'fmt must be a format such as ss\.CSR'):
        _format_of_text(text)


@dace.program
def to_csc(A: ss.CSR[dace.float64, M, N], x: dace.float64[N]):
    return ss.convert(A, ss.CSC) @ x


def test_convert_in_a_program():
    A = sp.random_array((6, 8), density=0.3, format='csr', rng=np.random.default_rng(5))
    x = np.arange(8.0)
    np.testing.assert_allclose(to_csc(A, x), A @ x, rtol=1e-12)
