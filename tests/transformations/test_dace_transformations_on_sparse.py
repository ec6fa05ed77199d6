"""DaCe's own transformations on sparse SDFGs, as the VS Code extension offers them: every
one listed applies to an SDFG that validates and loads again from its JSON (the editor's
round trip); those that corrupted sparse SDFGs (``sdfgsparse._dace_compat``, patch 22) are
not listed there, and are still listed on dense programs."""
import copy
import json
import warnings

import dace
import numpy as np
import pytest
from dace import serialize
from dace.transformation.optimizer import SDFGOptimizer

import sdfgsparse as ss

N, K, F = (dace.symbol(s) for s in 'NKF')
REFUSED = {'NestSDFG', 'FPGATransformSDFG', 'FPGATransformState', 'RedundantArrayCopying'}


@dace.program
def gcn_layer(A: ss.CSR[dace.float64, N, N], X: dace.float64[N, K], W: dace.float64[K, F], b: dace.float64[F]):
    return np.maximum(A @ (X @ W) + b, 0)


@dace.program
def add_scaled(A: ss.CSR[dace.float64, N, N], B: ss.CSR[dace.float64, N, N]):
    return (A + B.T) * 2.0


@dace.program
def dense(X: dace.float64[N, K], Y: dace.float64[N, K]):
    return X + Y


def _matches(sdfg_json):
    sdfg = dace.SDFG.from_json(copy.deepcopy(sdfg_json))
    return [m for m in SDFGOptimizer(sdfg).get_pattern_matches() if getattr(type(m), 'CATEGORY', '') != 'Sparse']


@pytest.mark.parametrize('prog', [gcn_layer, add_scaled], ids=lambda p: p.name)
def test_listed_dace_transformations_leave_loadable_sdfgs(prog):
    doc = prog.to_sdfg().to_json()
    matches = _matches(doc)
    names = {type(m).__name__ for m in matches}
    assert not names & REFUSED
    assert 'GPUTransformSDFG' in names  # others are still offered
    tried = set()
    for m in matches:
        name = type(m).__name__
        if name in tried:
            continue  # one match per transformation class keeps this fast
        tried.add(name)
        sdfg = dace.SDFG.from_json(copy.deepcopy(doc))
        xf = serialize.from_json(copy.deepcopy(m.to_json()))
        target = sdfg.cfg_list[xf.cfg_id]
        xf._sdfg = target
        try:
            xf.apply_pattern(target)
        except Exception:
            continue  # an error is reported by the editor and leaves the document as it was
        with warnings.catch_warnings():
            warnings.simplefilter('ignore')
            again = dace.SDFG.from_json(json.loads(json.dumps(sdfg.to_json())))
        again.validate()


def test_refusal_is_specific_to_sparse_sdfgs():
    names = {type(m).__name__ for m in _matches(dense.to_sdfg().to_json())}
    assert {'NestSDFG', 'FPGATransformSDFG'} <= names
