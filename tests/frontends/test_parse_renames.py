"""``_dace_compat`` patch 17: the frontend's renames of transients to their Python names
are applied in one pass; the parsed SDFG is the one DaCe's one-by-one renames make
(aliases ``b = a``, sparse results with their members, dense temporaries) and runs."""
import json
import re

import dace
import numpy as np
import scipy.sparse as sp

import sdfgsparse as ss
from dace.frontend.python import newast

M, N, K = dace.symbol('M'), dace.symbol('N'), dace.symbol('K')


def _program():

    @dace.program
    def renames(S: ss.CSR[dace.float64, M, N], Q: dace.float64[M, K], Kt: dace.float64[N, K], V: dace.float64[N, K]):
        kt = np.transpose(Kt)
        scores = ss.sddmm(ss.spones(S) * 0.5, Q, kt)
        alias = scores
        weights = ss.softmax(alias, axis=1)
        out = weights @ V
        doubled = out * 2.0
        same = doubled
        return same + out, ss.relu(alias)

    return renames


def _stripped(sdfg):
    def strip(o):
        if isinstance(o, dict):
            return {k: strip(v) for k, v in o.items() if k not in ('guid', 'hash')}
        if isinstance(o, list):
            return [strip(v) for v in o]
        return o

    # size symbols of sparse results are named by a hash that differs per parse
    return strip(json.loads(re.sub(r'\bss[0-9a-f]{8}_', 'ss_', json.dumps(sdfg.to_json(), default=str))))


def test_batched_renames_make_the_same_sdfg(monkeypatch):
    pending = []
    flush = newast.propagate_states

    def spy(sdfg, *args, **kwargs):
        pending.append(len(sdfg.__dict__.get('_ss_renames', [])))
        return flush(sdfg, *args, **kwargs)

    monkeypatch.setattr(newast, 'propagate_states', spy)
    batched = _program().to_sdfg(simplify=False)
    assert max(pending) >= 6, pending  # the renames waited for one pass
    assert '_ss_renames' not in batched.__dict__
    # DaCe's own renames, one replace_dict per variable
    monkeypatch.setattr(dace.SDFG, 'replace_dict', dace.SDFG.replace_dict.__wrapped__)  # (patch 3's, under 17's)
    monkeypatch.setattr(newast, 'propagate_states', flush.__wrapped__)
    one_by_one = _program().to_sdfg(simplify=False)
    assert _stripped(batched) == _stripped(one_by_one)
    assert {'scores', 'weights', 'doubled'} <= set(batched.arrays)


def test_program_with_renames_runs():
    rng = np.random.default_rng(0)
    S = sp.random_array((9, 7), density=0.4, format='csr', rng=rng)
    Q, Kt, V = rng.standard_normal((9, 3)), rng.standard_normal((7, 3)), rng.standard_normal((7, 3))
    got, relu = _program()(S, Q, Kt, V)
    P = S.copy()
    P.data[:] = 1
    scores = ss.sddmm(P, Q, Kt.T) * 0.5
    d = np.where(P.toarray() != 0, scores.toarray(), -np.inf)
    e = np.where(np.isfinite(d), np.exp(d - d.max(axis=1, keepdims=True)), 0)
    w = e / np.where(e.sum(axis=1, keepdims=True) > 0, e.sum(axis=1, keepdims=True), 1)
    np.testing.assert_allclose(got, 3 * (w @ V), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(relu.toarray(), np.maximum(scores.toarray(), 0))
    # ss.spones on host values: the pattern of a sparse matrix, the nonzeros of a dense array
    np.testing.assert_array_equal(ss.spones(S).toarray(), S.toarray() != 0)
    np.testing.assert_array_equal(ss.spones(np.array([[0.0, -2.0], [np.nan, 0.0]])), [[0, 1], [1, 0]])
