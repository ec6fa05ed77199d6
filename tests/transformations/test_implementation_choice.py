"""``ss.optimize``'s measured choice of an implementation family per node
(``transformations/implementation_choice.py``; today ``mkl``, the ``[mkl]`` extra)."""
import dace
import numpy as np
import pytest
import scipy.sparse as sp

import sdfgsparse as ss
from sdfgsparse.ops.spmv import SpMV
from sdfgsparse.targets import mkl
from sdfgsparse.transformations import implementation_choice

pytestmark = pytest.mark.skipif(not mkl.available(), reason=f'the [mkl] extra: {mkl.missing()}')

M, N = dace.symbol('M'), dace.symbol('N')


@dace.program
def ic_spmv(A: ss.CSR[dace.float64, M, N], x: dace.float64[N]):
    return A @ x


@dace.program
def ic_spmv64(A: ss.CSR[dace.float64, M, N, dace.int64], x: dace.float64[N]):
    return A @ x


def _examples(rng):
    A = sp.random_array((200, 150), density=0.05, format='csr', rng=rng)
    return A, rng.standard_normal(150)


def _spmv_nodes(opt):
    return [n for n, _ in opt.sdfg.all_nodes_recursive() if isinstance(n, SpMV)]


def _step(opt):
    return next(s for s in opt.steps if s.name == 'implementations')


@pytest.mark.parametrize('faster', [True, False])
def test_a_node_keeps_the_family_only_where_the_program_gets_faster(rng, monkeypatch, faster):
    """With a stand-in timer (the family takes 40 % of the default's time, or 95 %: within
    the margin), the node keeps ``mkl`` or its default; either way the program's result is
    scipy's."""
    A, x = _examples(rng)
    seen = []

    def timer(compile_fn, sdfg, arguments):
        impl = [n.implementation for n, _ in sdfg.all_nodes_recursive() if isinstance(n, SpMV)][0]
        seen.append(impl)
        return (0.4 if faster else 0.95) if impl == 'mkl' else 1.0

    monkeypatch.setattr(implementation_choice, 'measure', timer)
    opt = ss.optimize(ic_spmv, matrices={'A': A, 'x': x}, implementations=True)
    assert seen == [None, 'mkl']  # the default, then the node on mkl
    (node, ) = _spmv_nodes(opt)
    assert node.implementation == ('mkl' if faster else None)
    assert _step(opt).applied == int(faster) and len(opt.trials) == 1
    assert ('mkl kept' if faster else 'default kept') in opt.report()
    np.testing.assert_allclose(opt(A, x), A @ x, rtol=1e-12)


def test_measured_on_the_examples(rng):
    A, x = _examples(rng)
    opt = ss.optimize(ic_spmv, matrices={'A': A, 'x': x}, implementations=True)
    (trial, ) = opt.trials
    assert trial.family == 'mkl' and trial.default_s > 0 and trial.family_s > 0
    assert _spmv_nodes(opt)[0].implementation == ('mkl' if trial.chosen else None)
    np.testing.assert_allclose(opt(A, x), A @ x, rtol=1e-12)


def test_not_measured_without_every_argument_or_when_asked_not_to(rng):
    A, x = _examples(rng)
    opt = ss.optimize(ic_spmv, matrices={'A': A}, implementations=True)
    assert 'not measured: no example for x' in _step(opt).detail and opt.trials == []
    assert all(n.implementation is None for n in _spmv_nodes(opt))
    opt = ss.optimize(ic_spmv, matrices={'A': A, 'x': x}, implementations=False)
    assert not any(s.name == 'implementations' for s in opt.steps)


def test_a_node_the_family_does_not_serve_is_not_tried(rng):
    A, x = _examples(rng)
    A64 = sp.csr_array((A.data, A.indices.astype(np.int64), A.indptr.astype(np.int64)), shape=A.shape)
    opt = ss.optimize(ic_spmv64, matrices={'A': A64, 'x': x}, implementations=True, formats=False)
    assert _step(opt).detail == 'no node that mkl serves' and opt.trials == []
