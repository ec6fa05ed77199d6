"""``sdfgsparse bench --suite shape`` (sdfgsparse.bench.shape): every task runs, its result
checked against scipy, on an empty-rowed rectangular matrix and a one-row one."""
import json

import numpy as np
import scipy.sparse as sp

from sdfgsparse.bench.matrices import MatrixSource
from sdfgsparse.bench.shape import TASKS, format_shape, run_shape


def test_shape_suite_runs_every_task_and_checks_it():
    rng = np.random.default_rng(3)
    A = sp.random_array((40, 30), density=0.2, format='csr', rng=rng).tolil()
    A[5, :] = 0
    mats = [MatrixSource('rect', lambda: sp.csr_array(A)),
            MatrixSource('one-row', lambda: sp.random_array((1, 12), density=0.5, format='csr', rng=rng))]
    lines = []
    results = run_shape(mats, repeat=2, log=lines.append)
    assert [(r.task, r.matrix) for r in results] == [(t, m.name) for m in mats for t in TASKS]
    assert all(r.correct for r in results), [(r.task, r.matrix, r.errors) for r in results if not r.correct]
    assert all(type(r.correct) is bool for r in results)
    json.dumps([r.__dict__ for r in results])  # what --json writes
    for r in results:  # one peak per system timed: bytes above the inputs (None off Linux)
        assert r.peak.keys() == r.seconds.keys()
        assert all(v is None or (isinstance(v, int) and v >= 0) for v in r.peak.values())
        assert r.out_bytes and r.out_bytes > 0
    assert all({'sdfgsparse', 'scipy'} <= r.seconds.keys() for r in results)
    assert all('materialised' in r.seconds for r in results if '@' in r.task or '.' in r.task)
    table = format_shape(results)
    assert 'rows@x' in table and 'geomean' in table and ' NO' not in table and 'peak KiB' in table
