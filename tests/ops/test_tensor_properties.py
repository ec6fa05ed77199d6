"""Property tests of sparse tensors (hypothesis, derandomised): for tensors of ranks 1-4 with
any shape (empty dimensions included), density, duplicate entries (COO) and index dtype,
every contraction and element-wise operation of one program per rank agrees with NumPy on
the dense tensor, in COO and in CSF."""
import dace
import numpy as np
import scipy.sparse as sp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import sdfgsparse as ss
from sparse_zoo import dense

SETTINGS = dict(derandomize=True, database=None, deadline=None, suppress_health_check=list(HealthCheck))
A_, B_, C_, D_, R_ = (dace.symbol(s) for s in ('pA', 'pB', 'pC', 'pD', 'pR'))


@dace.program
def props1(T: ss.COO[dace.float64, A_], U: ss.CSF[dace.float64, A_], x: dace.float64[A_], W: dace.float64[A_, R_]):
    return np.einsum('a,a->', T, x), np.einsum('a,ar->r', U, W), T.sum(), 2.0 * U


@dace.program
def props3(T: ss.COO[dace.float64, A_, B_, C_], U: ss.CSF[dace.float64, A_, B_, C_, dace.int64],
           X: dace.float64[B_, R_], Y: dace.float64[C_, R_], z: dace.float64[C_]):
    return (np.einsum('abc,br,cr->ar', T, X, Y), np.einsum('abc,br,cr->ar', U, X, Y), np.einsum('abc,c->ab', T, z),
            np.einsum('abc,c->ab', U, z), np.einsum('abc,cr->rba', U, Y), U.sum(axis=(0, 2)), ss.relu(U))


@dace.program
def props4(T: ss.COO[dace.float64, A_, B_, C_, D_], U: ss.CSF[dace.float64, A_, B_, C_, D_],
           z: dace.float64[D_], X: dace.float64[B_, R_]):
    return np.einsum('abcd,d,br->acr', T, z, X), np.einsum('abcd,d,br->acr', U, z, X), T.sum(axis=(1, 3)), -U


def tensors(rank):
    """A random COO tensor (scipy N-D) of ``rank`` with duplicates, and its dense sum."""
    return st.tuples(st.lists(st.integers(0, 6), min_size=rank, max_size=rank), st.floats(0, 1),
                     st.integers(0, 4), st.integers(0, 2**31 - 1))


def build(spec):
    shape, density, dups, seed = spec
    rng = np.random.default_rng(seed)
    size = int(np.prod(shape))
    n = int(round(size * density))
    flat = rng.choice(size, size=n, replace=False) if size else np.zeros(0, dtype=np.int64)
    if n and dups:
        flat = np.concatenate([flat, rng.choice(flat, size=dups)])
    rng.shuffle(flat)
    coords = tuple(np.ascontiguousarray(c) for c in np.unravel_index(flat, shape)) if len(shape) > 1 else \
        (flat.astype(np.int64), )
    vals = rng.standard_normal(flat.size)
    D = np.zeros(shape)
    np.add.at(D, coords, vals)
    return sp.coo_array((vals, coords), shape=tuple(shape)), D, rng


def close(got, want, what):
    np.testing.assert_allclose(dense(got).reshape(np.shape(want)), want, rtol=1e-10, atol=1e-10, err_msg=what)


@settings(max_examples=25, **SETTINGS)
@given(tensors(1), st.integers(1, 4))
def test_rank_1(spec, r):
    T, D, rng = build(spec)
    x, W = rng.standard_normal(D.shape), rng.standard_normal(D.shape + (r, ))
    got = props1(T=T, U=ss.convert(T, ss.CSF), x=x, W=W)
    for k, want in enumerate(([D @ x], D @ W, [D.sum()], 2 * D)):
        close(got[k], want, f'{spec}: result {k}')


@settings(max_examples=30, **SETTINGS)
@given(tensors(3), st.integers(1, 5))
def test_rank_3(spec, r):
    T, D, rng = build(spec)
    X, Y, z = rng.standard_normal((D.shape[1], r)), rng.standard_normal((D.shape[2], r)), rng.standard_normal(D.shape[2])
    got = props3(T=T, U=ss.convert(T, ss.CSF, index_dtype=np.int64), X=X, Y=Y, z=z)
    mttkrp = np.einsum('abc,br,cr->ar', D, X, Y)
    ttv = np.einsum('abc,c->ab', D, z)
    want = (mttkrp, mttkrp, ttv, ttv, np.einsum('abc,cr->rba', D, Y), D.sum(axis=(0, 2)), np.maximum(D, 0))
    for k, w in enumerate(want):
        close(got[k], w, f'{spec}: result {k}')


@settings(max_examples=20, **SETTINGS)
@given(tensors(4), st.integers(1, 3))
def test_rank_4(spec, r):
    T, D, rng = build(spec)
    z, X = rng.standard_normal(D.shape[3]), rng.standard_normal((D.shape[1], r))
    got = props4(T=T, U=ss.convert(T, ss.CSF), z=z, X=X)
    want = np.einsum('abcd,d,br->acr', D, z, X)
    for k, w in enumerate((want, want, D.sum(axis=(1, 3)), -D)):
        close(got[k], w, f'{spec}: result {k}')


@dace.program
def props_views(T: ss.COO[dace.float64, A_, B_, C_], U: ss.CSF[dace.float64, A_, B_, C_], z: dace.float64[A_]):
    return (T.transpose((2, 0, 1)), np.moveaxis(U, 1, 0)[1:, ::-2], T.reshape((A_ * B_, C_)).sum(axis=0),
            np.expand_dims(U, 1), T + U, T * U, ss.abs(T - U), U[0], np.einsum('bca,a->bc', np.moveaxis(T, 0, 2), z))


def nonempty_tensors(rank):
    """As :func:`tensors`, every dimension at least one (``U[0]``)."""
    return st.tuples(st.lists(st.integers(1, 6), min_size=rank, max_size=rank), st.floats(0, 1),
                     st.integers(0, 4), st.integers(0, 2**31 - 1))


@settings(max_examples=25, **SETTINGS)
@given(nonempty_tensors(3), st.integers(0, 2**31 - 1))
def test_views_and_two_tensors(spec, seed):
    """Shape operators (views: returned, summed, contracted), T + U, T * U, |T - U| of a COO
    tensor with duplicates and a CSF one, against NumPy."""
    T, D, rng = build(spec)
    U, DU, _ = build((spec[0], 0.4, 0, seed))
    z = rng.standard_normal(D.shape[0])
    got = props_views(T=T, U=ss.convert(U, ss.CSF), z=z)
    want = (D.transpose(2, 0, 1), np.moveaxis(DU, 1, 0)[1:, ::-2], D.reshape(-1, D.shape[2]).sum(axis=0),
            np.expand_dims(DU, 1), D + DU, D * DU, np.abs(D - DU), DU[0],
            np.einsum('bca,a->bc', np.moveaxis(D, 0, 2), z))
    for k, w in enumerate(want):
        close(got[k], w, f'{spec}, {seed}: result {k}')
