"""The structured layouts (``ss.NM``, ``ss.GNM``, ``ss.VNM``) through every operation,
against scipy: the zoo padded to each pattern's block and pruned by magnitude (the
reference is the pruned matrix), and the real matrices of tests/data.

One signature per format (the pairs alternate), as the other formats' pairs do, so each
program compiles once; the programs are those of ``test_ops_zoo`` and
``test_sparse_sparse_zoo``."""
import dace
import numpy as np
import pytest
import scipy.sparse as sp

import sdfgsparse as ss
from sparse_zoo import REAL, format_of, padded_to_block, real_matrix, zoo

import test_ops_zoo
import test_sparse_sparse_zoo

STRUCTURED = ['NM2_4', 'NM1_4', 'GNM2_2_4', 'VNM4_2_8']
PAIRS = [(dace.float64, dace.int32), (dace.float32, dace.int64)]


def signatures():
    for k, fmt in enumerate(STRUCTURED):
        vt, it = PAIRS[k % 2]
        yield pytest.param(fmt, vt, it, id=f'{fmt}-{vt.to_string()}-{it.to_string()}')


def pruned(A, fmt):
    """``A`` padded to the block of ``fmt`` and pruned to its pattern, as scipy CSR."""
    F = format_of(fmt)
    return sp.csr_array(ss.convert(padded_to_block(A, F), F, prune=True).to_scipy())


def _cases(fmt, dtype, real: bool, seed=7):
    cases = [(name, pruned(A, fmt)) for name, A in zoo(dtype, seed).items()]
    if real:
        cases += [(name, pruned(real_matrix(name), fmt)) for name in REAL if name != 'cryg2500']
    return cases


@pytest.mark.parametrize('fmt,vt,it', list(signatures()))
def test_all_ops(fmt, vt, it):
    real = vt == dace.float64
    for name, A in _cases(fmt, np.dtype(vt.type), real):
        try:
            test_ops_zoo.run_case(fmt, vt, it, A)
        except AssertionError as ex:
            raise AssertionError(f'matrix {name}: {ex}') from ex


@pytest.mark.parametrize('fmt,vt,it', [p for p in signatures() if p.values[0] == 'VNM4_2_8'])
def test_sparse_sparse_ops(fmt, vt, it):
    """(V:N:M only, the composition with the most levels: each program compiles for 25-30 s
    and CI's half hour is nearly spent; the other layouts' level walks are compositions of
    the same levels.)"""
    npv = np.dtype(vt.type)
    for (name, A), (_, B) in zip(_cases(fmt, npv, False), _cases(fmt, npv, False, seed=99)):
        try:
            test_sparse_sparse_zoo.run_case(fmt, vt, it, A, B)
        except AssertionError as ex:
            raise AssertionError(f'matrix {name}: {ex}') from ex


THREADS_SCRIPT = '''
import sys
import dace, numpy as np, scipy.sparse as sp
sys.path[:0] = [{tests!r}, {ops!r}]
import test_ops_zoo, test_sparse_sparse_zoo, test_structured_zoo as z
for fmt, vt, it in [p.values for p in z.signatures()]:
    npv = np.dtype(vt.type)
    for rep in range(2):
        rng = np.random.default_rng(rep)
        A, B = (z.pruned(sp.random_array((420, 304), density=d, format='csr', rng=rng, dtype=npv), fmt)
                for d in (0.4, 0.3))
        test_ops_zoo.run_case(fmt, vt, it, A)
        if fmt == 'VNM4_2_8':
            test_sparse_sparse_zoo.run_case(fmt, vt, it, A, B)
    print(fmt, 'ok', flush=True)
'''


@pytest.mark.after_zoo  # the programs of the tests above
def test_all_ops_with_four_openmp_threads():
    """The structured kernels' parallel loops with four threads (the suite's workers run one
    OpenMP thread each), on matrices large enough to split, twice each, against scipy."""
    import os
    import subprocess
    import sys
    here = os.path.dirname(os.path.abspath(__file__))
    script = THREADS_SCRIPT.format(tests=os.path.dirname(here), ops=here)
    env = dict(os.environ, OMP_NUM_THREADS='4', SDFGSPARSE_TEAM='team')
    out = subprocess.run([sys.executable, '-c', script], capture_output=True, text=True, env=env, timeout=1200,
                         cwd=os.getcwd())
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-4000:]
    assert out.stdout.split() == [w for f in STRUCTURED for w in (f, 'ok')]
